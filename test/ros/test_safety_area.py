"""
The safety area in the ROS graph (issue 37 §2): agent_node keeps its vehicle able to stop inside.

``swarm_sim --safety-area FILE`` runs the real agent, target, mobility and metrics nodes; the
agents read the area from ``safety_area_file`` (the run's own copy in ``--out``), and the
metrics node draws it in ``/swarm/markers``. Positions are read back from the recorded bag.
"""
from pathlib import Path

from rosbags.highlevel import AnyReader
import yaml

from soliton_encirclement_ros.interface import agent_state_from_msg, target_state_from_msg
from soliton_encirclement_ros.sim import runner

# x <= 30 m (the margin: the vehicles stop by 29 m), 0-30 m altitude.
FIELD = {'polygon': [[-40, -40], [30, -40], [30, 40], [-40, 40]], 'z_min': 0.0, 'z_max': 30.0}


def positions(bag):
    """Return {agent id: [(t, x, y, z, member)]} and the target's [(t, x)] from a bag."""
    agents, target = {}, []
    with AnyReader([Path(bag)]) as reader:
        wanted = [c for c in reader.connections
                  if c.topic in ('/swarm/agent_states', '/target/state')]
        for connection, stamp, raw in reader.messages(connections=wanted):
            msg = reader.deserialize(raw, connection.msgtype)
            if connection.topic == '/target/state':
                target.append((stamp * 1e-9, target_state_from_msg(msg).position[0]))
                continue
            state = agent_state_from_msg(msg)
            agents.setdefault(state.agent_id, []).append(
                (stamp * 1e-9, *state.position, state.member))
    return agents, target


def area_file(tmp_path, **changes):
    path = tmp_path / 'field.yaml'
    path.write_text(yaml.safe_dump({**FIELD, **changes}))
    return path


def test_a_target_that_walks_off_the_field_leaves_the_ring_stopped_inside(tmp_path):
    scenario = tmp_path / 'leaving.yaml'
    # 30 s: the target (5 m/s) reaches its last waypoint at 24 s, beyond it the ring only holds
    # at the stop line (batch_sim: every agent pressed against it by 15 s).
    scenario.write_text(yaml.safe_dump({'agents': 4, 'duration': 30.0, 'seed': 2,
                                        'target_motion': 'waypoints',
                                        'waypoints': [[0, 0, 0], [120, 0, 0]]}))
    out, bag = tmp_path / 'run', tmp_path / 'bag'
    code = runner.main(['--no-progress', '--control-period', '0.05', '--scenario',
                        str(scenario), '--safety-area', str(area_file(tmp_path)), '--out',
                        str(out), '--record', str(bag)])
    assert code == 0
    agents, target = positions(bag)
    assert max(x for _, x in target) > 60.0  # the target left the field far behind
    assert sorted(agents) == [1, 2, 3, 4]
    for trace in agents.values():
        xs = [x for _, x, *_ in trace]
        assert max(xs) <= 29.0 + 1e-3  # the stop line, margin inside the boundary
    # the ring followed the target as far as it could: pressed against the stop line
    assert sum(max(x for _, x, *_ in trace) > 28.5 for trace in agents.values()) >= 2
    # the run keeps the area it flew, and says so in its summary
    assert yaml.safe_load((out / 'safety_area.yaml').read_text())['polygon'][1] == [30.0, -40.0]
    summary = yaml.safe_load((out / 'summary.json').read_text())
    assert summary['params']['safety_area']['z_max'] == 30.0


def test_an_agent_found_outside_holds_says_why_once_and_leaves_the_ring(tmp_path, capfd):
    """Agent 1 starts at x = -18.4 m (seed 1), outside a field that begins at x = -16 m."""
    params = tmp_path / 'agents.yaml'
    params.write_text('/**/agent:\n  ros__parameters:\n    outside_land_after: 2.0\n')
    bag = tmp_path / 'bag'
    code = runner.main(['--no-progress', '--control-period', '0.05', '--agents', '4',
                        '--duration', '8', '--seed', '1', '--params-file', str(params),
                        '--safety-area', str(area_file(
                            tmp_path, polygon=[[-16, -40], [40, -40], [40, 40], [-16, 40]])),
                        '--out', str(tmp_path / 'run'), '--record', str(bag)])
    assert code == 0
    err = capfd.readouterr().err
    agents, _ = positions(bag)
    start = agents[1][0]
    assert start[1] < -16.0  # outside from the start
    moved = max(abs(x - start[1]) + abs(y - start[2]) for _, x, y, *_ in agents[1])
    assert moved < 0.05  # held where it was found
    assert err.count('agent 1: outside the safety area (at (') == 1
    assert 'outside the polygon): holding (zero velocity), landing after outside_land_after 2 s' \
        in err
    assert 'agent 1: outside the safety area for 2.0 s (outside_land_after 2 s): landing' in err
    assert 'agent 1: failed (outside the safety area for 2.0 s (at (' in err
    # out of the ring: from then on it broadcasts its presence only (member 0)
    assert agents[1][-1][4] == 0.0
    assert all(agents[other][-1][4] == 1.0 for other in (2, 3, 4))
    for other in (2, 3, 4):
        assert all(x >= -15.0 - 1e-3 for _, x, *_ in agents[other])


def test_agents_below_the_band_hold_and_the_run_says_so(tmp_path, capfd):
    """
    Agents started below z_min hold horizontally, and swarm_sim says so once.

    Before, they logged 'holding (zero velocity)' and flew the ring horizontally (up to 18 m
    in 10 s), and swarm_sim printed settle times as if the run were an encirclement.
    """
    bag = tmp_path / 'bag'
    code = runner.main(['--no-progress', '--control-period', '0.05', '--agents', '3',
                        '--duration', '4', '--safety-area', str(area_file(tmp_path, z_min=2.0)),
                        '--out', str(tmp_path / 'run'), '--record', str(bag)])
    assert code == 0
    captured = capfd.readouterr()
    said = captured.out + captured.err
    warned = [line for line in captured.err.splitlines()
              if line.startswith('swarm_sim: warning: 3 of 3 agents start outside')]
    assert len(warned) == 1 and 'below z_min 2 m' in warned[0], captured.err
    assert 'settled: not reported: uav1, uav2, uav3 started outside the safety area' \
        in said
    assert 'E_gap < 0.05 from' not in said
    agents, _ = positions(bag)
    for trace in agents.values():
        x0, y0 = trace[0][1], trace[0][2]
        assert max(abs(x - x0) + abs(y - y0) for _, x, y, *_ in trace) < 0.05


def test_the_area_is_drawn_in_the_markers_at_both_ends_of_its_band():
    from builtin_interfaces.msg import Time
    from soliton_encirclement_ros.core.area import SafetyArea
    from soliton_encirclement_ros.nodes.markers import swarm_markers
    import numpy as np

    area = SafetyArea.from_mapping(FIELD)
    markers = swarm_markers({1: (np.zeros(3), True)}, np.zeros(3), 20.0, {}, 'world', Time(),
                            area).markers
    outlines = [m for m in markers if m.ns == 'safety_area']
    assert [m.id for m in outlines] == [0, 1]
    for marker, z in zip(outlines, (0.0, 30.0)):
        points = [(p.x, p.y, p.z) for p in marker.points]
        assert points[0] == points[-1] and len(points) == 5  # a closed outline
        assert {p[2] for p in points} == {z}
        assert (30.0, 40.0, z) in points
    assert not any(m.ns == 'safety_area' for m in swarm_markers(
        {}, np.zeros(3), 20.0, {}, 'world', Time()).markers)


def test_a_run_refused_at_start_up_leaves_no_area_in_out(tmp_path, capfd):
    """The graph refuses to start (the live view's port is taken): --out is as it was."""
    import socket
    kept = tmp_path / 'kept'
    kept.mkdir()
    (kept / 'notes.txt').write_text('mine')
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        for out in (tmp_path / 'new', kept):
            assert runner.main(['--no-progress', '--no-plots', '--agents', '3', '--duration',
                                '1', '--safety-area', str(area_file(tmp_path)), '--out',
                                str(out), '--foxglove', str(port)]) == 2
    err = capfd.readouterr().err
    assert err.count('swarm_sim: error: cannot start the Foxglove server') == 2, err
    assert not (tmp_path / 'new').exists()
    assert sorted(p.name for p in kept.iterdir()) == ['notes.txt']
