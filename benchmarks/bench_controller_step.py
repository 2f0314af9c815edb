"""
One agent's controller tick (``core.controller``) in microseconds, as agent_node calls it.

    .venv/bin/python benchmarks/bench_controller_step.py [--neighbours 9 31 99] [--d-safe 2]

An agent on the R = 20 m ring with ``n`` live neighbours evenly spaced and a static target:
``receive_states`` (one tick's broadcasts as one ``AgentStates``, as the in-process graph hands
them out, and the target) then ``agent_tick``. CPU time per tick (time.process_time), best of
5 rounds. ``--d-safe`` turns the separation term on (fitted to the ring: at most half the
spacing). Prints figures and writes them to benchmarks/results/controller_step.json
(``--no-save``: print only); asserts nothing.
"""
import argparse
import math
import time

import numpy as np
from results import add_options, begin, save, table

from soliton_encirclement_ros.core.controller import (
    agent_tick, AgentBroadcast, AgentStates, initial_state, receive_states, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams


def ring(n: int, now_ns: int, seq: int) -> list:
    states = []
    for i in range(1, n + 2):
        angle = 2 * math.pi * (i - 1) / (n + 1)
        states.append(AgentBroadcast(
            agent_id=i, seq=seq, stamp_ns=now_ns, position=(20 * math.cos(angle),
                                                            20 * math.sin(angle), 10.0),
            velocity=(-math.sin(angle), math.cos(angle), 0.0), u=0.1))
    return states


def cost(n: int, d_safe: float = 0.0, ticks: int = 400) -> tuple[float, float]:
    """(receive_states µs, agent_tick µs) per tick for an agent with ``n`` neighbours."""
    spacing = 2 * 20.0 * math.sin(math.pi / (n + 1))
    params = ControllerParams(d_safe=min(d_safe, 0.5 * spacing))
    period_ns = round(params.control_period * 1e9)
    state = initial_state(1)
    best_rx, best_tick = math.inf, math.inf
    for _ in range(5):
        rx_cpu = tick_cpu = 0.0
        for k in range(1, ticks + 1):
            now_ns = k * period_ns
            now = now_ns * 1e-9
            heard = ring(n, now_ns - period_ns, k)
            target = TargetBroadcast(now_ns - period_ns, np.zeros(3), np.zeros(3))
            received = [(AgentStates.of(heard), now - params.control_period),
                        (target, now - params.control_period)]
            start = time.process_time()
            state = receive_states(state, received, params)
            middle = time.process_time()
            tick = agent_tick(state, (now - params.control_period, heard[0].position,
                                      heard[0].velocity), now, params)
            end = time.process_time()
            state = tick.state
            rx_cpu += middle - start
            tick_cpu += end - middle
        best_rx = min(best_rx, rx_cpu / ticks * 1e6)
        best_tick = min(best_tick, tick_cpu / ticks * 1e6)
    return best_rx, best_tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--neighbours', type=int, nargs='+', default=[9, 31, 99])
    parser.add_argument('--d-safe', type=float, default=0.0, help='separation distance [m]')
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    print(f'{"neighbours":>10}{"receive_states us":>19}{"agent_tick us":>15}')
    rows = []
    for n in args.neighbours:
        rx, tick = cost(n, args.d_safe)
        print(f'{n:>10}{rx:>19.0f}{tick:>15.0f}', flush=True)
        rows.append([n, round(rx), round(tick)])
    save(args, 'controller_step', {
        'd_safe': args.d_safe,
        'tick': table(['live neighbours', 'receive_states [µs]', 'agent_tick [µs]'], rows)},
        load)


if __name__ == '__main__':
    main()
