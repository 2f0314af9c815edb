"""
Which Python files a linter still has to check: the others passed with the same bytes before.

flake8 and pydocstyle judge each file on its own, so a file that passed with the same content,
the same configuration and the same linter versions passes again. The record of the files that
passed is kept in pytest's cache (``.pytest_cache``; ``--cache-clear`` or ``-p
no:cacheprovider`` lint every file again), and only after a clean run: a file with an error is
checked on every run until it passes. With no record (a fresh clone, CI) the linter gets the
source directories themselves, exactly as ``ros2 pkg create``'s test gives them.
"""
import hashlib
from importlib.metadata import distributions
from pathlib import Path
import sys


def python_files(root: Path, sources) -> list:
    """Every ``.py`` file under the source directories: all the linters could check, and more."""
    found = []
    for source in sources:
        path = root / source
        found.extend([path] if path.is_file() else sorted(path.rglob('*.py')))
    return [f for f in found if '__pycache__' not in f.parts]


def tool_identity(names, files=()) -> str:
    """Python's, the named distributions' versions and the given files' bytes, as one hash."""
    names = {n.lower().replace('_', '-') for n in names}
    versions = sorted({f'{d.metadata["Name"]}=={d.version}' for d in distributions()
                       if (d.metadata['Name'] or '').lower().replace('_', '-') in names})
    digest = hashlib.sha256('\n'.join([sys.version, *versions]).encode())
    for path in files:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


class LintRecord:
    """The files that passed one linter, in pytest's cache, for one linter identity."""

    def __init__(self, config, name: str, root: Path, sources, identity: str):
        self._cache = getattr(config, 'cache', None)  # None with -p no:cacheprovider
        self._key = f'soliton_encirclement_ros/lint/{name}'
        self._root = root
        self._sources = list(sources)
        self._identity = identity
        self._digests = self._read()
        record = self._cache.get(self._key, None) if self._cache is not None else None
        passed = (record or {}).get('passed', {}) if (
            record or {}).get('identity') == identity else {}
        self.stale = sorted(f for f, digest in self._digests.items() if passed.get(f) != digest)

    def paths(self) -> list:
        """Return the linter's paths: the source directories if all is stale, else stale files."""
        if len(self.stale) == len(self._digests):
            return [str(self._root / s) for s in self._sources]
        return [str(self._root / f) for f in self.stale]

    def all_passed(self) -> None:
        """Record the files as passed: call only after the linter found no problem."""
        if self._cache is not None:  # a file edited meanwhile may not be what was checked
            now = self._read()
            self._cache.set(self._key, {'identity': self._identity, 'passed': {
                f: digest for f, digest in self._digests.items() if now.get(f) == digest}})

    def _read(self) -> dict:
        return {str(f.relative_to(self._root)): hashlib.sha256(f.read_bytes()).hexdigest()
                for f in python_files(self._root, self._sources)}
