"""
Every figure names the committed code it measured, and how old that code is now.

``benchmarks/results.py`` refuses to save figures measured on an uncommitted tree (a draft goes
to ``benchmarks/results/drafts/``, which the site never renders), and the site's provenance line
says the commit and how many commits to the measured code have landed since.
"""
import importlib.util
import json
from pathlib import Path
import re
import subprocess

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location('benchmark_results',
                                               ROOT / 'benchmarks' / 'results.py')
results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results)
FILES = sorted((ROOT / 'benchmarks' / 'results').glob('*.json'))
LOAD = re.compile(r'^1-minute load average [0-9.]+ at the start, [0-9.]+ at the end$')


def git(*args):
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True)


def in_git_history() -> bool:
    return git('rev-parse', 'HEAD').returncode == 0 and git(
        'rev-parse', '--is-shallow-repository').stdout.strip() == 'false'


@pytest.mark.parametrize('path', FILES, ids=[p.stem for p in FILES])
def test_each_results_file_was_measured_on_a_commit_of_this_history(path):
    record = json.loads(path.read_text())
    commit = record['commit']
    assert re.fullmatch(r'[0-9a-f]{40}', commit), f'{path.name}: commit {commit!r}'
    # in the reader's terms: no machine-specific paths, no shell quoting, a measured load
    assert not re.search(r'(^|\s)/(tmp|home|root|work)/', record['command']), record['command']
    assert "'" not in record['command'] and '"' not in record['command'], record['command']
    assert LOAD.match(record['load']), f'{path.name}: load {record["load"]!r}'
    if not in_git_history():
        pytest.skip('not a full git checkout: the commit cannot be looked up')
    assert git('merge-base', '--is-ancestor', commit, 'HEAD').returncode == 0, (
        f'{path.name}: commit {commit} is not in this history')
    assert 'not in this history' not in results.age_text(record)


def test_figures_from_an_uncommitted_tree_are_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(results, 'measured_commit', lambda: 'a' * 40 + '-dirty')
    with pytest.raises(results.UncommittedTree) as refused:
        results.write_results('x', {}, load='idle', directory=tmp_path)
    assert '\n' not in str(refused.value) and 'uncommitted changes' in str(refused.value)
    assert not (tmp_path / 'x.json').exists()
    # a draft is written, where the site never looks
    monkeypatch.setattr(results, 'DRAFTS_DIR', tmp_path / 'drafts')
    path = results.write_results('x', {}, load='idle', draft=True)
    assert path == tmp_path / 'drafts' / 'x.json'
    with pytest.raises(ValueError, match='uncommitted tree'):
        results.age_text(json.loads(path.read_text()))


def test_a_tree_changed_only_in_the_figures_a_benchmark_writes_is_the_commit_measured(
        monkeypatch, tmp_path):
    # a benchmark that draws its plot into docs/images (bench_stability growth --plot) made
    # its own tree dirty before it saved its results, and then refused them
    import subprocess
    repo = tmp_path / 'repo'
    for path in ('benchmarks/results/x.json', 'docs/images/plot.png', 'core.py'):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text('0')

    def git(*args):
        subprocess.run(['git', '-C', str(repo), '-c', 'user.name=t', '-c', 'user.email=t@t',
                        *args], check=True, capture_output=True)
    git('init', '-q')
    git('add', '.')
    git('commit', '-qm', 'x')
    sha = subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True,
                         text=True, check=True).stdout.strip()
    monkeypatch.setattr(results, 'RESULTS_DIR', repo / 'benchmarks' / 'results')
    monkeypatch.setattr(results, 'code_identity', lambda: {'commit': sha + '-dirty'})
    for written in ('benchmarks/results/x.json', 'docs/images/plot.png'):
        (repo / written).write_text('1')
    assert results.measured_commit() == sha
    (repo / 'core.py').write_text('1')
    assert results.measured_commit() == sha + '-dirty'


def test_the_age_of_a_figure_counts_the_commits_to_its_code_since():
    if not in_git_history():
        pytest.skip('not a full git checkout')
    head = git('rev-parse', 'HEAD').stdout.strip()
    assert results.age_text({'benchmark': 'x', 'commit': head, 'code': ['ros_support']}) \
        .endswith('(the code as it is now)')
    # the last commit to ros_support's parent: one commit to ros_support since (at least)
    touched = git('log', '-2', '--format=%H', '--', 'ros_support').stdout.split()
    if len(touched) < 2:
        pytest.skip('ros_support has fewer than two commits in this history')
    expected = int(git('rev-list', '--count', f'{touched[1]}..HEAD', '--',
                       'ros_support').stdout)
    assert expected >= 1
    assert results.age_text({'benchmark': 'x', 'commit': touched[1], 'code': ['ros_support']}) \
        .endswith(f'({expected} commit{"" if expected == 1 else "s"} to it since)')
    assert 'not in this history' in results.age_text(
        {'benchmark': 'x', 'commit': 'b' * 40, 'code': ['ros_support']})
