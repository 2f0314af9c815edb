"""
Write (or check) the parameter tables (docs/reference/parameters.md) from the nodes' own specs.

    .venv/bin/python scripts/readme_parameters.py          # rewrite docs/reference/parameters.md
    .venv/bin/python scripts/readme_parameters.py --check  # exit 1 if the page is stale

Each table sits between ``<!-- parameters: NODE -->`` and ``<!-- end parameters -->``; its
rows come from the ParamSpec lists the node declares (description, unit and bounds live there
and, for the controller gains, in ``ControllerParams``' field metadata), so the page cannot
drift from the code. ``test/ros/test_readme_parameters.py`` runs the check.
"""
from __future__ import annotations

import argparse
from pathlib import Path
import re
import sys

PAGE = Path(__file__).resolve().parents[1] / 'docs' / 'reference' / 'parameters.md'
BLOCK = re.compile(
    r'(<!-- parameters: (?P<node>\w+) -->\n)(?P<table>.*?)(<!-- end parameters -->)', re.S)


def node_parameters() -> dict:
    """Return every node's parameter specs, in declaration order, by executable name."""
    from soliton_encirclement_ros.nodes.catalogue import node_parameters as table
    return table()


def blocks() -> dict:
    """Return the parameter tables by block name: the nodes' specs, shared ones once."""
    from velocity_mobility_ros.nodes import mobility_node, swarm_mobility_node
    nodes = node_parameters()
    return {
        'vehicle': mobility_node.MOBILITY_PARAMS,
        'mobility_node': mobility_node.MobilityNode.POSE_PARAMS,
        'swarm_mobility_node': swarm_mobility_node.SWARM_PARAMS,
        'clock': mobility_node.CLOCK_PARAMS,
        **{name: nodes[name] for name in ('agent_node', 'target_node', 'metrics_node',
                                          'px4_bridge_node')},
    }


def render(text: str) -> str:
    """Return ``text`` with every parameter block regenerated."""
    from ros_support.ros_parameters import markdown_table
    tables = blocks()

    def table(match: re.Match) -> str:
        node = match.group('node')
        if node not in tables:
            raise SystemExit('docs/reference/parameters.md: no known node in a parameters block: '
                             f'{node}')
        return match.group(1) + markdown_table(tables[node]) + match.group(4)
    return BLOCK.sub(table, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--check', action='store_true', help='only check; exit 1 if stale')
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print('docs/reference/parameters.md is stale: run scripts/readme_parameters.py',
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == '__main__':
    sys.exit(main())
