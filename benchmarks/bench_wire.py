"""
Bytes on the wire of the swarm topics, to judge a latched topic for the arc weights.

    .venv/bin/python benchmarks/bench_wire.py

Serialises (CDR, as DDS sends them) an agent state and target states with 0, 10 and 100 arc
weights, and prints the bytes per second of the swarm's broadcasts at the default rates.
Prints the figures and writes them to benchmarks/results/wire.json (``--no-save``: print only).
"""
from __future__ import annotations

import argparse

import numpy as np
from rclpy.serialization import serialize_message
from results import add_options, begin, save, table

from soliton_encirclement_ros.core.controller import AgentBroadcast
from soliton_encirclement_ros.interface import agent_state_to_msg, target_state_to_msg

CONTROL_RATE = 20.0    # Hz, the swarm plan's control period 0.05 s: one agent state each
TARGET_RATE = 20.0     # Hz, target_node's broadcast_period 0.05 s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    rows = []
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
            rows.append([n, agent, round(swarm / 1e3, 1), weights, target,
                         round(100 * rate / swarm, 1)])
    save(args, 'wire', {
        'control_rate_hz': CONTROL_RATE, 'agent_state_bytes': agent,
        'streams': table(['N', 'agent state [B]', 'agent states, all [kB/s]', 'arc weights',
                          'target state [B]', 'target stream / agent states [%]'], rows)}, load)


if __name__ == '__main__':
    main()
