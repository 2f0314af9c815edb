"""Target motion models, failure injection, comms impairments and scenario loading."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.comms import ImpairedChannel
from soliton_encirclement_ros.core.faults import OutageProcess, SwarmOutages
from soliton_encirclement_ros.core.scenario import initial_positions, load_scenario, Scenario
from soliton_encirclement_ros.core.target_motion import RandomHeading, Static, Waypoints
from support import ROOT


def test_static_target():
    assert np.all(Static().desired_velocity(3.0, [1.0, 2.0, 0.0]) == 0.0)


def test_random_heading_changes_every_period_at_speed_and_steers_home():
    model = RandomHeading(speed=5.0, period=1.0, boundary=20.0, seed=1)
    v0 = model.desired_velocity(0.0, np.zeros(3))
    assert math.hypot(v0[0], v0[1]) == pytest.approx(5.0) and v0[2] == 0.0
    assert np.array_equal(model.desired_velocity(0.5, np.zeros(3)), v0)  # held within a period
    v1 = model.desired_velocity(1.0, np.zeros(3))
    assert not np.array_equal(v1, v0)
    home = model.desired_velocity(2.0, [25.0, 5.0, 0.0])  # outside the box: back to origin
    assert home[:2] == pytest.approx(-5.0 * np.array([25.0, 5.0]) / math.hypot(25.0, 5.0))
    again = RandomHeading(speed=5.0, period=1.0, boundary=20.0, seed=1)
    assert np.array_equal(again.desired_velocity(0.0, np.zeros(3)), v0)  # seeded


def test_waypoints_untimed_heads_to_each_point_then_stops():
    model = Waypoints([[0, 0], [10, 0], [10, 10]], speed=2.0)
    assert model.desired_velocity(0.0, [0.0, 0.0, 0.0]) == pytest.approx([2.0, 0.0, 0.0])
    toward_next = 2.0 * np.array([0.2, 10.0, 0.0]) / math.hypot(0.2, 10.0)  # (10, 0) reached
    assert model.desired_velocity(5.0, [9.8, 0.0, 0.0]) == pytest.approx(toward_next)
    assert model.desired_velocity(9.0, [10.0, 9.5, 0.0]) == pytest.approx([0.0, 0.5, 0.0])
    assert np.all(model.desired_velocity(10.0, [10.0, 10.0, 0.0]) == 0.0)


def test_waypoints_timed_track_reference():
    model = Waypoints([[0, 0], [10, 0]], arrival_times=[0.0, 5.0], speed=3.0)
    ref, ff = model.reference(2.5)
    assert ref == pytest.approx([5.0, 0.0, 0.0]) and ff == pytest.approx([2.0, 0.0, 0.0])
    assert model.desired_velocity(2.5, [4.0, 0.0, 0.0]) == pytest.approx([3.0, 0.0, 0.0])
    assert model.desired_velocity(9.0, [10.0, 0.0, 0.0]) == pytest.approx([0.0, 0.0, 0.0])


def test_waypoint_time_that_cannot_be_met_is_an_error():
    with pytest.raises(ValueError, match=r'waypoint 2 \[10.0, 10.0, 0.0\] cannot be reached at '
                                         r't=6 s: 10 m in 1 s needs 10 m/s > speed 5 m/s'):
        Waypoints([[0, 0], [10, 0], [10, 10]], arrival_times=[0, 5, 6], speed=5.0)
    with pytest.raises(ValueError, match='arrival_times must increase strictly'):
        Waypoints([[0, 0], [1, 0]], arrival_times=[2, 2])
    with pytest.raises(ValueError, match='one time per waypoint'):
        Waypoints([[0, 0], [1, 0]], arrival_times=[0])


def test_outage_process_rate_off_time_and_seed():
    process = OutageProcess(failures_per_min=60.0, off_time=2.0, check_period=0.1, seed=4,
                            agent_id=1)
    assert process.probability == pytest.approx(1 - math.exp(-0.1))
    states = [process.update(k * 0.1) for k in range(1, 6001)]
    starts = [k for k in range(1, len(states)) if states[k] and not states[k - 1]]
    # down for exactly off_time each time; about 600 s / (60 s/60 + 2 s) outages
    lengths = [next(j for j in range(k, len(states)) if not states[j]) - k for k in starts[:-1]]
    assert set(lengths) == {20}
    assert 150 < len(starts) < 260
    replay = OutageProcess(60.0, 2.0, 0.1, seed=4, agent_id=1)
    assert [replay.update(k * 0.1) for k in range(1, 6001)] == states
    assert not any(OutageProcess(0.0).update(k) for k in range(100))


def test_swarm_outages_match_per_agent_processes():
    swarm = SwarmOutages([1, 2, 3], 30.0, 1.0, 0.1, seed=9)
    singles = [OutageProcess(30.0, 1.0, 0.1, seed=9, agent_id=i) for i in (1, 2, 3)]
    for k in range(1, 300):
        now = k * 0.05
        assert swarm.update(now).tolist() == [p.update(now) for p in singles]


def test_impaired_channel_defaults_pass_through():
    channel = ImpairedChannel()
    channel.receive('a', 1.0)
    assert channel.due(1.0) == [('a', 1.0)] and channel.due(2.0) == []


def test_impaired_channel_delay_and_seeded_loss():
    channel = ImpairedChannel(delay=0.2)
    channel.receive('a', 1.0)
    assert channel.due(1.1) == [] and channel.due(1.2) == [('a', 1.2)]
    lossy = ImpairedChannel(loss=0.25, seed=2, agent_id=1)
    for k in range(4000):
        lossy.receive(k, 0.0)
    kept = [m for m, _ in lossy.due(0.0)]
    assert 2800 < len(kept) < 3200
    replay = ImpairedChannel(loss=0.25, seed=2, agent_id=1)
    for k in range(4000):
        replay.receive(k, 0.0)
    assert [m for m, _ in replay.due(0.0)] == kept
    with pytest.raises(ValueError, match='loss must be a probability in \\[0, 1\\), got 2.0'):
        ImpairedChannel(loss=2.0)
    with pytest.raises(ValueError, match='delay must be >= 0, got -1.0'):
        ImpairedChannel(delay=-1.0)


def test_initial_positions_follow_reference_placement():
    p = initial_positions(2000, 20.0, seed=7)
    theta = np.arctan2(p[:, 1], p[:, 0])
    a = p[:, 0] / (20.0 * np.cos(theta))
    assert np.all((a > 0.8 - 1e-9) & (a < 1.2 + 1e-9))
    assert np.all(np.abs(p[:, 1]) <= 24.0) and np.all(p[:, 2] == 0.0)
    assert np.array_equal(p, initial_positions(2000, 20.0, seed=7))


def test_scenario_validation_and_yaml(tmp_path):
    with pytest.raises(ValueError, match='target_motion must be one of static, random, '
                                         "waypoints, circle, got 'orbit'"):
        Scenario(target_motion='orbit')
    with pytest.raises(ValueError, match='k_r must be >= 0, got -1.0'):
        Scenario(controller={'k_r': -1.0})
    with pytest.raises(ValueError, match='max_acc_xy must be >= 0'):
        Scenario(vehicle={'max_acc_xy': -1.0})
    with pytest.raises(ValueError, match='controller.radius is set by the scenario'):
        Scenario(controller={'radius': 5.0})
    path = tmp_path / 's.yaml'
    path.write_text('agents: 12\ncontroller: {k_tau: 0.3}\nvehicle: {tau_xy: 0.5}\n')
    scenario = load_scenario(path)
    assert scenario.agents == 12 and scenario.controller_params().k_tau == 0.3
    assert scenario.vehicle_params().tau_xy == 0.5
    path.write_text('agents: [1\n')
    with pytest.raises(ValueError, match='is not valid YAML'):
        load_scenario(path)
    with pytest.raises(ValueError, match='cannot read scenario'):
        load_scenario(tmp_path / 'missing.yaml')


def test_shipped_scenarios_load():
    files = sorted((ROOT / 'config' / 'scenarios').glob('*.yaml'))
    assert files
    for path in files:
        load_scenario(path)


def test_a_scenario_resolves_its_gains_and_limits_once(monkeypatch):
    """Issue 25 §2: 3 builds to create a Scenario and 5 + 3 in one simulate, before."""
    from soliton_encirclement_ros.core.gains import ControllerParams
    from soliton_encirclement_ros.sim.batch_sim import simulate
    from velocity_mobility_ros.core.vehicle import VehicleParams
    builds = []
    for cls in (ControllerParams, VehicleParams):
        checked = cls.__post_init__
        monkeypatch.setattr(cls, '__post_init__', lambda self, checked=checked: (
            builds.append(type(self).__name__), checked(self))[1])
    scenario = Scenario(agents=3, duration=0.5, controller={'k_r': 2.0},
                        vehicle={'max_speed_xy': 6.0})
    assert sorted(builds) == ['ControllerParams', 'VehicleParams']
    assert scenario.gains.k_r == 2.0 and scenario.gains.max_speed_xy == 6.0
    assert scenario.limits.max_speed_xy == 6.0 and scenario.controller_params() is scenario.gains
    scenario.gains.ring_gains()  # the ring's gains (ring_gains_from): once per parameter set
    builds.clear()
    simulate(scenario)
    assert builds == []
    assert scenario == Scenario(agents=3, duration=0.5, controller={'k_r': 2.0},
                                vehicle={'max_speed_xy': 6.0})  # held objects not compared
