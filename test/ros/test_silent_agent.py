"""
An agent process killed in a ``swarm_sim --processes`` ring: its vehicle stays an obstacle.

One process per node, as ``ros2 launch`` starts them. A ring of 4 around a target at rest; at
10 s the agent at its front (largest x) is killed with SIGKILL: it broadcasts
nothing more, and the swarm mobility node holds its vehicle (its ``cmd_vel`` times out). The
target then moves on through it at 2 m/s, and the three others follow, the back one of them
over the held vehicle about 20 s later. Before, the others kept ``d_safe`` from where they
last heard it for ``d_safe_memory`` (15 s) and then forgot it: the back one passed 1.2 m from
it. Now a
silent vehicle stays an obstacle until it is heard again (or its landing is), its disc growing
at ``hold_drift``.
"""
import os
from pathlib import Path
import signal
import time

from nav_msgs.msg import Odometry
import numpy as np
import pytest

from soliton_encirclement_ros.bringup.graph import SwarmPlan
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.processes import ProcessGraph

N = 4
KILL_AT = 10.0   # sim s: the ring has formed around the target at rest
END = 42.0       # sim s: the target (2 m/s from KILL_AT) is 64 m on, past the held vehicle
DEADLINE = 240.0  # wall s for the whole run (a loaded machine is slow)


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_the_others_keep_clear_of_a_killed_agents_vehicle(tmp_path):
    ring = tmp_path / 'ring.yaml'  # the settled ring: uav1 at its front, (20, 0)
    ring.write_text('[[20, 0], [0, 20], [-20, 0], [0, -20]]\n')
    scenario = Scenario(agents=N, control_period=0.05, duration=END, placement='file',
                        placement_file=str(ring), target_motion='waypoints',
                        waypoints=((0, 0, 0), (0, 0, 0), (80, 0, 0)),
                        arrival_times=(0.0, KILL_AT, KILL_AT + 40.0))
    plan = SwarmPlan(scenario=scenario, clock_source='mobility', real_time_factor=4.0,
                     metrics_output_dir=str(tmp_path / 'out'))
    graph = ProcessGraph(plan)
    odometry = {}  # name -> (sim s, x, y) rows

    def listen(name):
        def take(msg):
            position = msg.pose.pose.position
            odometry.setdefault(name, []).append((graph.sim_time, position.x, position.y))
        return take

    for name in plan.names:
        graph.node.create_subscription(Odometry, f'/{name}/odom', listen(name), 50)
    killed = None
    started = time.monotonic()
    try:
        while graph.sim_time < END:
            assert time.monotonic() - started < DEADLINE, f'stalled at {graph.sim_time:.1f} s'
            graph.executor.spin_once(timeout_sec=0.05)
            if killed is None and graph.sim_time >= KILL_AT and len(odometry) == N:
                killed = max(plan.names, key=lambda name: odometry[name][-1][1])  # the front
                agent = next(process for spec, process, _ in graph.processes
                             if spec.executable == 'agent_node'
                             and spec.namespace == f'/{killed}')
                os.kill(agent.pid, signal.SIGKILL)
            if killed is None:
                graph._check_children()  # a node that died by itself fails the test
    finally:
        graph.close()
    assert killed is not None, 'the ring never formed'

    def after_kill(name):
        rows = np.array([row for row in odometry[name] if row[0] >= KILL_AT]).reshape(-1, 3)
        assert len(rows), (f'no odometry of {name} heard after the kill at {KILL_AT:g} s (last '
                           f'at {odometry[name][-1][0]:.1f} s; the run reached '
                           f'{graph.sim_time:.1f} s)')
        return rows
    held = after_kill(killed)
    closest = np.inf
    for name in plan.names:
        if name == killed:
            continue
        other = after_kill(name)
        at = np.searchsorted(held[:, 0], other[:, 0]).clip(0, len(held) - 1)
        d = np.hypot(*(other[:, 1:] - held[at, 1:]).T)
        closest = min(closest, float(d.min()))
    braked = held[held[:, 0] >= KILL_AT + 5.0]  # it brakes to a hover on its last command
    assert len(braked) >= 2, (f'{killed} was heard {len(braked)} times from {KILL_AT + 5.0:g} s '
                              f'on (its last odometry at {held[-1, 0]:.1f} s)')
    moved = np.hypot(*(braked[-1, 1:] - braked[0, 1:]))
    assert moved < 0.5, f"the killed agent's vehicle did not hold ({moved:.1f} m)"
    # d_safe (2 m) from the held vehicle: before, the back agent passed 1.2 m from it (10 m now)
    assert closest >= 2.0, f'another vehicle came {closest:.2f} m from the held {killed}'
