"""
The scenario options that ``swarm_sim`` and ``batch_sim`` share, derived from :class:`Scenario`.

Both simulators take the same ``--scenario FILE``, the same ``--preset`` and one option per
scalar scenario field (``--agents``, ``--control-period``, ``--target-motion``, ...), with the
field's description, unit, default and rule. Options override the file, which overrides the
scenario defaults, so a scenario file runs unchanged in both.
"""
from __future__ import annotations

import argparse

from ros_support.settings import add_options, given_options, settings_fields
from ros_support.validation import read_yaml
from soliton_encirclement_ros.core.area import read_area_file
from soliton_encirclement_ros.core.gains import PRESETS
from soliton_encirclement_ros.core.scenario import load_scenario, Scenario

# Every setting field of Scenario (the scalars), its own first, then those it inherits
# (target motion, impairments); waypoints, arrival times, lambdas, gains and vehicle limits
# come from a scenario file (or, for swarm_sim, also from ROS parameter files).
SCENARIO_OPTIONS = tuple(sorted((f.name for f in settings_fields(Scenario)),
                                key=lambda name: name not in Scenario.__annotations__))


def add_scenario_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--scenario``, ``--preset`` and one option per scalar scenario field."""
    group = parser.add_argument_group(
        'scenario', 'what is simulated; options override --scenario, which overrides the '
        'defaults')
    group.add_argument('--scenario', metavar='FILE',
                       help='scenario YAML: a mapping of these fields plus waypoints, '
                       'arrival_times, lambdas, controller: and vehicle: overrides')
    group.add_argument('--preset', choices=tuple(PRESETS), default=None,
                       help="controller gains under the scenario's controller: overrides "
                       "(default: the package defaults; reference: the original's gains)")
    group.add_argument('--safety-area', metavar='FILE',
                       help='YAML safety area: {polygon: [[x, y], ...] (m, world ENU) or '
                       'polygon_latlon with geo_reference, z_min, z_max, margin}; every '
                       "command keeps its vehicle able to stop inside (the scenario's "
                       'safety_area: key)')
    add_options(group, Scenario, SCENARIO_OPTIONS)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """Return the scenario the options describe; ``ValueError`` naming what is wrong."""
    base = load_scenario(args.scenario) if args.scenario else Scenario()
    changes = given_options(args, Scenario, SCENARIO_OPTIONS)
    if getattr(args, 'safety_area', None):
        changes['safety_area'] = read_area_file(args.safety_area)
    if args.preset:
        changes['controller'] = {**PRESETS[args.preset], **base.controller}
    return base.with_changes(**changes) if changes else base


def given_settings(args: argparse.Namespace, prog: str) -> dict[str, str]:
    """
    Return the settings the user gave, by name, with where from (``SwarmPlan.given``).

    A scenario file's fields (its ``controller:`` gains and ``vehicle:`` limits by their own
    names), then the ``--preset`` gains, then the options: the last one named is what wins.
    """
    given: dict[str, str] = {}
    if args.scenario:
        content = read_yaml(args.scenario, 'scenario') or {}
        for name, value in content.items():
            if name in ('controller', 'vehicle') and isinstance(value, dict):
                given.update({key: f'scenario file {args.scenario}' for key in value})
            else:
                given[name] = f'scenario file {args.scenario}'
    if args.preset:
        given.update({key: f'{prog} --preset {args.preset}' for key in PRESETS[args.preset]})
    for name in given_options(args, Scenario, SCENARIO_OPTIONS):
        given[name] = f'{prog} option --{name.replace("_", "-")}'
    return given
