"""
The wire page's bytes are those of today's messages (benchmarks/results/wire.json).

The page showed an agent state of 260 B (52.0 kB/s at N = 10), measured before ``landed`` joined
the layout; bench_wire.py and a bag of the demo give 276 B (55.2 kB/s).
"""
import json
from pathlib import Path

import numpy as np
from rclpy.serialization import serialize_message

from soliton_encirclement_ros.core.controller import AgentBroadcast
from soliton_encirclement_ros.interface import agent_state_to_msg

RESULTS = Path(__file__).resolve().parents[2] / 'benchmarks' / 'results' / 'wire.json'


def test_the_results_file_holds_the_size_of_todays_agent_state():
    results = json.loads(RESULTS.read_text())['results']
    today = len(serialize_message(agent_state_to_msg(AgentBroadcast(
        3, 10, 10**9, np.zeros(3), np.zeros(3), 0.1, 0.0, 12345))))
    assert results['agent_state_bytes'] == today
    rows = results['streams']['rows']
    assert {row[1] for row in rows} == {today}
    assert {(row[0], row[2]) for row in rows} == {
        (n, round(n * today * results['control_rate_hz'] / 1e3, 1)) for n in (10, 100)}
