"""
Bytes on the wire of the swarm topics, to judge a latched topic for the arc weights.

    .venv/bin/python benchmarks/bench_wire.py

Serialises (CDR, as DDS sends them) an agent state and target states with 0, 10 and 100 arc
weights, and prints the bytes per second of the swarm's broadcasts at the default rates.
Prints figures only.
"""
from __future__ import annotations

import numpy as np
from rclpy.serialization import serialize_message

from soliton_encirclement_ros.core.controller import AgentBroadcast
from soliton_encirclement_ros.interface import agent_state_to_msg, target_state_to_msg

CONTROL_RATE = 20.0    # Hz, the swarm plan's control period 0.05 s: one agent state each
TARGET_RATE = 20.0     # Hz, target_node's broadcast_period 0.05 s


def main() -> None:
    agent = len(serialize_message(agent_state_to_msg(AgentBroadcast(
        3, 10, 10**9, np.zeros(3), np.zeros(3), 0.1, 0.0, 12345))))
    print(f'agent state: {agent} B')
    for n in (10, 100):
        swarm = n * agent * CONTROL_RATE
        print(f'N = {n}: agent states {swarm / 1e3:.1f} kB/s in all (each host receives them)')
        for weights in (0, n):
            target = len(serialize_message(target_state_to_msg(
                10**9, np.zeros(3), np.zeros(3), 0.2, dict.fromkeys(range(1, weights + 1), 1.0))))
            rate = target * TARGET_RATE
            print(f'  target state with {weights:3d} arc weights: {target} B, '
                  f'{rate / 1e3:.2f} kB/s = {100 * rate / swarm:.1f} % of the agent states')


if __name__ == '__main__':
    main()
