"""What a ``swarm_sim --engine`` run imports: none of the node graph's modules it never builds."""
import json
import os
from pathlib import Path
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[3]
# The node graph's (one node per agent, ``--engine nodes``); an --engine run builds none of them.
NODE_MODULES = ('soliton_encirclement_ros.nodes.agent_node',
                'soliton_encirclement_ros.nodes.metrics_node',
                'soliton_encirclement_ros.nodes.target_node',
                'velocity_mobility_ros.nodes.swarm_mobility_node',
                'velocity_mobility_ros.nodes.mobility_node')


def loaded_after_importing(*modules: str) -> list[str]:
    """Return NODE_MODULES loaded once ``modules`` are imported in a fresh interpreter."""
    code = ('import importlib, json, sys\n'
            f'for module in {modules!r}:\n'
            '    importlib.import_module(module)\n'
            f'print(json.dumps(sorted(m for m in {NODE_MODULES!r} if m in sys.modules)))\n')
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_engine_run_imports_no_node_of_the_node_graph():
    """The runner and the engine graph (what ``--engine auto`` imports) load no node class."""
    assert loaded_after_importing('soliton_encirclement_ros.sim.runner',
                                  'soliton_encirclement_ros.sim.engine_graph') == []


def test_the_node_graph_imports_its_nodes():
    """The probe sees the node modules where they are used: the in-process node graph."""
    assert loaded_after_importing('soliton_encirclement_ros.sim.inprocess') == sorted(
        NODE_MODULES)
