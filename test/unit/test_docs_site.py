"""
The documentation site builds strictly, and README.md and docs/ hold no development history.

``mkdocs build --strict`` fails on a broken link, a page missing from the navigation, an unknown
anchor, a bad API reference, and (docs/hooks/generated.py) a benchmark results file, table or
value a page names that does not exist, or an executable left undocumented. The tiny sites
below show that each of these fails the build, so the full build passing means something.
"""
from pathlib import Path
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / 'docs' / 'hooks' / 'generated.py'
# As /work/shared/hooks/before-stop and the project's rule: no stop or issue numbers, no "this
# hour", no session numbers in what users read (history goes in CHANGELOG.md).
DIARY = re.compile(r'\bstops? [0-9]+\b(?!\s*(m|s|cm|mm|km)\b)|\bissues? [0-9]+\b|\bthis hour\b'
                   r'|\bsession [0-9]', re.I)
README_MAX_LINES = 200

# Only the builds need MkDocs: a module-level importorskip would skip the whole directory under
# launch_testing's pytest plugin (colcon test), so each build test asks for it (a fixture).
MKDOCS_MISSING = ("the docs extra is not installed (pip install -e '.[docs]'; scripts/setup.sh "
                  'does)')


@pytest.fixture
def mkdocs():
    return pytest.importorskip('mkdocs', reason=MKDOCS_MISSING)


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'mkdocs', 'build', '--strict', '--config-file',
                           str(config), '--site-dir', str(site)], cwd=config.parent,
                          capture_output=True, text=True, timeout=600)


def test_the_site_builds_strictly(tmp_path, mkdocs):
    done = build(ROOT / 'mkdocs.yml', tmp_path / 'site')
    assert done.returncode == 0, done.stdout + done.stderr
    # the generated parts are there: an executable's options, a benchmark's table and source
    cli = (tmp_path / 'site' / 'reference' / 'cli' / 'index.html').read_text()
    assert '--control-period' in cli and '--foxglove-host' in cli
    performance = (tmp_path / 'site' / 'reference' / 'performance' / 'index.html').read_text()
    assert 'benchmarks/results/controller_step.json' in performance
    assert (tmp_path / 'site' / 'changelog' / 'index.html').exists()


TINY_CONFIG = """\
site_name: tiny
theme: {{name: mkdocs}}
hooks: [{hook}]
plugins:
  - mkdocstrings:
      handlers: {{python: {{paths: [{root}]}}}}
validation:
  nav: {{omitted_files: warn, not_found: warn}}
  links: {{not_found: warn, anchors: warn}}
nav:
  - index.md
  - changelog.md
{nav}"""


@pytest.mark.parametrize('case, page, nav, complaint', [
    ('a broken link', 'See [the other page](other.md).', '', 'other.md'),
    ('an unknown anchor', 'See [the top](#nowhere).', '', 'nowhere'),
    ('a page missing from the navigation', 'Hello.', '  - missing.md\n', 'missing.md'),
    ('a bad API reference', '::: soliton_encirclement_ros.core.no_such_module', '',
     'no_such_module'),
    ('a results file that was never written', '<!-- results: no_such_benchmark table -->', '',
     'no_such_benchmark'),
    ('a table its results file lacks', '<!-- results: controller_step no_such_table -->', '',
     'no_such_table'),
    ('an executable that does not exist', '<!-- cli: no_such_tool -->', '', 'no_such_tool'),
])
def test_the_strict_build_fails_on(tmp_path, mkdocs, case, page, nav, complaint):
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'index.md').write_text(f'# Tiny\n\n{page}\n')
    config = tmp_path / 'mkdocs.yml'
    config.write_text(TINY_CONFIG.format(hook=HOOK, root=ROOT, nav=nav))
    done = build(config, tmp_path / 'site')
    assert done.returncode != 0, f'{case}: the strict build passed'
    assert complaint in done.stdout + done.stderr, (case, done.stdout + done.stderr)


def test_the_tiny_site_builds_when_nothing_is_wrong(tmp_path, mkdocs):
    """The failures above are the faults', not the tiny site's."""
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'index.md').write_text(textwrap.dedent("""\
        # Tiny

        One agent's tick takes <!-- result: controller_step d_safe --> m of separation.

        <!-- results: controller_step tick -->
        """))
    config = tmp_path / 'mkdocs.yml'
    config.write_text(TINY_CONFIG.format(hook=HOOK, root=ROOT, nav=''))
    done = build(config, tmp_path / 'site')
    assert done.returncode == 0, done.stdout + done.stderr
    html = (tmp_path / 'site' / 'index.html').read_text()
    assert 'Figures from <code>benchmarks/results/controller_step.json</code>' in html
    assert 'bench_controller_step.py' in html  # the command that measured them


def user_text():
    """Yield (path, line number, line) of README.md and every page under docs/."""
    for path in [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            yield path.relative_to(ROOT), number, line


def test_readme_and_docs_hold_no_development_history():
    diary = [f'{path}:{number}: {line.strip()}' for path, number, line in user_text()
             if DIARY.search(line)]
    assert not diary, 'development history belongs in CHANGELOG.md:\n' + '\n'.join(diary)


def test_the_readme_is_short_and_its_links_lead_somewhere():
    text = (ROOT / 'README.md').read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', text)
    assert targets
    missing = [t for t in targets if '://' not in t and not (ROOT / t).exists()]
    assert not missing, missing


def test_no_page_says_to_open_the_built_site_from_the_file_system():
    """
    The site is built for a web server (``use_directory_urls``, the search): it is served.

    Opened as a file, each of its links leads to a folder listing and its search finds nothing.
    """
    config = (ROOT / 'mkdocs.yml').read_text()
    assert re.search(r'^use_directory_urls: true$', config, re.M)
    told = [f'{path}:{number}: {line.strip()}' for path, number, line in user_text()
            if re.search(r'open\W+site/index\.html', line)]
    script = (ROOT / 'scripts' / 'docs.sh').read_text()
    told += [f'scripts/docs.sh: {line}' for line in script.splitlines()
             if re.search(r'open\W+site/index\.html', line)]
    assert not told, 'the built site is served (bash scripts/docs.sh serve):\n' + '\n'.join(told)


def _paragraphs(path):
    """Yield (line number, text) of each prose paragraph (no heading, table, code or list)."""
    lines, inside, start, block = path.read_text().splitlines(), False, 0, []
    for number, line in enumerate([*lines, ''], 1):
        if line.lstrip().startswith('```'):
            inside = not inside
            continue
        if inside or not line.strip() or line.lstrip().startswith(('#', '|', '<!--')):
            if block:
                yield start, ' '.join(' '.join(block).split())
            block = []
            continue
        if not block:
            start = number
        block.append(line)


def test_no_paragraph_restates_the_one_before():
    """A section does not open by repeating the page's first sentence (the fault table did)."""
    repeated = []
    for path in [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]:
        recent = []  # the sentence openings of the last two paragraphs
        for number, text in _paragraphs(path):
            openings = {' '.join(re.findall(r'\w+', s.lower())[:8])
                        for s in re.split(r'(?<=[.!?])\s+', text)
                        if len(re.findall(r'\w+', s)) >= 8}
            again = openings & set().union(*recent) if recent else set()
            repeated += [f'{path.relative_to(ROOT)}:{number}: {o}...' for o in sorted(again)]
            recent = [*recent[-1:], openings]
    assert not repeated, 'said twice in a row:\n' + '\n'.join(repeated)


ABSOLUTE_PATH = re.compile(r'(?<![\w.~])/(?:work|home|root|Users|tmp|opt/python)/')


def _documented(obj, seen):
    """Yield (name, docstring) of ``obj`` and its public members, as the API pages show them."""
    import inspect
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield getattr(obj, '__qualname__', getattr(obj, '__name__', '?')), inspect.getdoc(obj) or ''
    if inspect.ismodule(obj) or inspect.isclass(obj):
        for name, member in vars(obj).items():
            home = getattr(member, '__module__', None)
            owner = obj.__name__ if inspect.ismodule(obj) else obj.__module__
            if name.startswith('_') or home != owner:
                continue
            if inspect.isclass(member) or inspect.isfunction(member):
                yield from _documented(member, seen)


def test_the_api_pages_docstrings_hold_no_history_and_no_machines_paths():
    """What mkdocstrings renders: no issue numbers, no absolute path of a development machine."""
    import importlib
    api = ROOT / 'docs' / 'reference' / 'api'
    targets = sorted({line.split()[1] for page in api.glob('*.md')
                      for line in page.read_text().splitlines() if line.startswith('::: ')})
    assert targets
    bad, seen = [], set()
    for target in targets:
        module_name, obj = target, None
        while obj is None:
            try:
                obj = importlib.import_module(module_name)
            except ImportError:
                module_name = module_name.rpartition('.')[0]
        for attribute in target[len(module_name):].strip('.').split('.'):
            obj = getattr(obj, attribute) if attribute else obj
        for name, doc in _documented(obj, seen):
            for line in doc.splitlines():
                if DIARY.search(line) or ABSOLUTE_PATH.search(line):
                    bad.append(f'{target}: {name}: {line.strip()}')
    assert not bad, 'docstrings rendered into the API pages:\n' + '\n'.join(bad)


def test_every_node_the_package_creates_is_named_on_a_reference_page():
    """`ros2 node list` showed /swarm_sim_claim, and no page said what it was."""
    created = set()
    for package in ('soliton_encirclement_ros', 'velocity_mobility_ros', 'ros_support'):
        for path in (ROOT / package).rglob('*.py'):
            created |= set(re.findall(r"(?:\bNode\(|super\(\)\.__init__\()'([a-z_]+)'",
                                      path.read_text()))
    assert 'swarm_sim_claim' in created
    pages = '\n'.join(p.read_text() for p in (ROOT / 'docs' / 'reference').glob('*.md'))
    missing = sorted(name for name in created if not re.search(rf'`/?{name}`', pages))
    assert not missing, f'nodes no reference page names: {missing}'
