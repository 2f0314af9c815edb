"""
What a bag says about itself: the rosbag2 ``custom_data`` of our recordings, pure (no rclpy).

Keys (all strings, as rosbag2 requires): ``scenario`` (the run's scenario as one line of strict
JSON, NaN as null), ``seed``, ``package_version``, ``git_commit`` (``<sha>``, ``<sha>-dirty``
for a checkout with uncommitted changes; outside one, the commit pip recorded of an install from
git, else ``unknown``: the version identifies the code) and ``recorder``.
``analyze_run`` prints them and keeps them in ``summary.json`` (``params.bag_custom_data``).
The version also titles the figures, and :func:`code_identity` is what ``sweep_sim
--scheduler`` compares between its Dask workers and itself.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
import importlib.metadata
import json
import math
from pathlib import Path
import subprocess
from typing import Any

PACKAGE = 'soliton_encirclement_ros'
SOURCE_ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = 'unknown'


@lru_cache(maxsize=1)
def package_version() -> str:
    """Return the installed package's version, or ``unknown``."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


@lru_cache(maxsize=1)
def git_commit() -> str:
    """
    Return the commit this source tree is at (``-dirty`` if changed), or ``unknown``.

    An installed copy outside a git checkout: the commit pip recorded (:func:`installed_commit`).
    """
    def git(*args: str) -> str:
        return subprocess.run(['git', '-C', str(SOURCE_ROOT), *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    try:
        # Only our own checkout: an installed copy may sit inside some other repository.
        if Path(git('rev-parse', '--show-toplevel')).resolve() != SOURCE_ROOT:
            return installed_commit()
        commit = git('rev-parse', 'HEAD')
        dirty = git('status', '--porcelain', '--untracked-files=no')
    except (OSError, subprocess.SubprocessError):
        return installed_commit()
    return commit + ('-dirty' if dirty else '')


def installed_commit(distribution: importlib.metadata.Distribution | None = None) -> str:
    """
    Return the commit an installed copy was built from, or ``unknown``.

    What pip recorded of a ``pip install git+URL@REF`` (PEP 610 ``direct_url.json``:
    ``vcs_info.commit_id``) for ``distribution`` (default: this package's). An install from a
    directory or a wheel records no commit: ``unknown`` (the version identifies it).
    """
    try:
        dist = distribution or importlib.metadata.distribution(PACKAGE)
        info = json.loads(dist.read_text('direct_url.json') or '{}')
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):
        return UNKNOWN
    commit = (info.get('vcs_info') or {}).get('commit_id') if isinstance(info, dict) else None
    return commit if isinstance(commit, str) and commit else UNKNOWN


def code_identity() -> dict:
    """``{'version': ..., 'commit': ...}`` of the code running in this process."""
    return {'version': package_version(), 'commit': git_commit()}


def bag_custom_data(recorder: str, scenario: Mapping[str, Any] | None = None
                    ) -> dict[str, str]:
    """Return the ``custom_data`` of a bag recorded by ``recorder`` (of ``scenario`` if known)."""
    data = {'recorder': recorder, 'package_version': package_version(),
            'git_commit': git_commit()}
    if scenario is not None:
        data['scenario'] = json.dumps(_finite(scenario), separators=(',', ':'),
                                      allow_nan=False, default=str)
        data['seed'] = str(scenario.get('seed'))
    return data


def describe(custom_data: Mapping[str, str]) -> str:
    """
    One line for a person: the seed, version, commit and the scenario's main fields.

    A commit that was not known (an install without its git checkout) is left out: the version
    identifies the code.
    """
    parts = []
    try:
        scenario = json.loads(custom_data.get('scenario', '{}'))
    except ValueError:
        scenario = {}
    if scenario:
        parts.append('scenario: ' + ', '.join(
            f'{key} {scenario[key]}' for key in ('agents', 'radius', 'duration',
                                                 'control_period', 'target_motion')
            if key in scenario))
    for key in ('seed', 'package_version', 'git_commit', 'recorder'):
        if key in custom_data and (key, custom_data[key]) != ('git_commit', UNKNOWN):
            parts.append(f'{key.replace("_", " ")} {custom_data[key]}')
    others = sorted(set(custom_data) - {'scenario', 'seed', 'package_version', 'git_commit',
                                        'recorder'})
    parts += [f'{key} {custom_data[key]}' for key in others]
    return '; '.join(parts)


def _finite(value):
    """JSON-ready copy: NaN and inf (no JSON equivalent) become None."""
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
