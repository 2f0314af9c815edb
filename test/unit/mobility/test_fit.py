"""
fit_mobility against synthetic ground truth (pure: no rclpy).

Flights are flown by the project's own model with known limits, a command delay, odometry noise
and step, ramp and chirp commands (``support.synthetic_flight``), recorded into small MCAP bags
as this package records them, and fitted back through the command line. The fits of a second
or more each are in ``acceptance/test_fit_acceptance.py``: the two-vehicle fit, limits never
reached, and the flights of an independent simulator (``support.independent_flight``).
"""
import json
import math

import numpy as np
import pytest

from soliton_encirclement_ros.analysis import fit_mobility
from soliton_encirclement_ros.core.scenario import load_scenario
from support.synthetic_flight import fly, write_ros_bag
from velocity_mobility_ros.core.fit import PARAM_NAMES, simulate_velocity
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

TRUTH = VehicleParams(tau_xy=0.8, tau_z=0.5, max_acc_xy=3.0, max_acc_z=2.0, max_speed_xy=6.0,
                      max_speed_z=2.5)
DELAYS = {'uav1': 0.08, 'uav2': 0.04}  # multiples of sim_dt, as a node's step sees them
ODOM_PERIOD = 0.02  # 50 Hz


def test_the_fit_simulates_the_model_step_for_step():
    """simulate_velocity's rows are model.step under each row's own limits."""
    rng = np.random.default_rng(3)
    rows, steps = 4, 300
    u = rng.normal(0.0, 4.0, (rows, steps, 3))
    draws = rng.uniform([0.1, 0.1, 0.5, 0.5, 1.0, 1.0], [2.0, 2.0, 6.0, 6.0, 9.0, 4.0], (rows, 6))
    params = [VehicleParams(tau_xy=t, tau_z=tz, max_acc_xy=a, max_acc_z=az, max_speed_xy=s,
                            max_speed_z=sz) for t, tz, a, az, s, sz in draws]
    table = {n: np.array([getattr(p, n) for p in params]) for n in PARAM_NAMES}
    simulated = simulate_velocity(u, np.zeros((rows, 3)), table, 0.01)
    for r, p in enumerate(params):
        state = VehicleState.at_rest([[0.0, 0.0, 0.0]])
        for k in range(steps):
            state = step(state, u[r, k][None, :], p)
            np.testing.assert_allclose(simulated[r, k + 1], state.velocity[0], rtol=0,
                                       atol=1e-12)


def test_a_plane_that_never_moved_is_reported_unidentifiable(tmp_path):
    def flat(t):
        v = np.zeros((t.size, 3))
        v[:, 0] = np.where((t > 1) & (t < 6), 1.0, 0.0) + np.where((t > 8) & (t < 14), 8.0, 0)
        v[:, 1] = np.where((t > 16) & (t < 20), -2.0, 0.0)
        return v
    write_ros_bag(tmp_path / 'bag', {'uav1': fly(TRUTH, duration=24.0, commands=flat)})
    assert fit_mobility.main([str(tmp_path / 'bag'), '--out', str(tmp_path / 'out')]) == 0
    params = json.loads((tmp_path / 'out' / 'fit.json').read_text())['vehicles']['uav1'][
        'parameters']
    for name in ('tau_z', 'max_acc_z', 'max_speed_z'):
        assert not params[name]['identified'] and 'never moved' in params[name]['reason']
    for name in ('tau_xy', 'max_acc_xy', 'max_speed_xy'):
        assert params[name]['value'] == pytest.approx(getattr(TRUTH, name), rel=0.05)
    text = (tmp_path / 'out' / 'mobility_fit.yaml').read_text()
    assert '\n    tau_z: ' not in text and '# tau_z: not identified (z never moved)' in text


def _error_line(capsys, argv):
    assert fit_mobility.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith('fit_mobility: error: ')
    return err


def test_bad_input_is_one_line(tmp_path, capsys):
    hover = fly(TRUTH, duration=20.0, commands=lambda t: np.zeros((t.size, 3)), noise=0.005)
    write_ros_bag(tmp_path / 'hover', {'uav1': hover})
    err = _error_line(capsys, [str(tmp_path / 'hover'), '--out', str(tmp_path / 'o1')])
    assert 'uav1 never moved' in err and 'nothing to identify' in err
    for name in PARAM_NAMES + ('delay',):
        assert name in err
    short = fly(TRUTH, duration=3.0)
    write_ros_bag(tmp_path / 'short', {'uav1': short})
    err = _error_line(capsys, [str(tmp_path / 'short'), '--out', str(tmp_path / 'o2')])
    assert 'too short' in err
    err = _error_line(capsys, [str(tmp_path / 'short'), '--out', str(tmp_path / 'o3'),
                               '--vehicles', 'uav9'])
    assert 'uav9 not in' in err and 'uav1' in err
    assert not any((tmp_path / o).exists() for o in ('o1', 'o2', 'o3'))


def test_a_bag_without_a_command_topic_is_one_line(tmp_path, capsys):
    write_ros_bag(tmp_path / 'odom_only', {'uav1': fly(TRUTH, duration=2.0)}, commands=False)
    err = _error_line(capsys, [str(tmp_path / 'odom_only'), '--out', str(tmp_path / 'o')])
    assert 'no command topic' in err and '/uav1/odom' in err


@pytest.mark.parametrize('argv, message', [
    (['--axes', 'xz'], "--axes: must be xy, z or xy,z, got 'xz'"),
    (['--from', '5', '--to', '2'], '--to must be > --from (5), got 2'),
    (['--holdout', '0.99'], '--holdout: must be in [0.05, 0.9], got 0.99'),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        fit_mobility.main([str(tmp_path), '--out', str(tmp_path / 'o'), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_ros_parameters_file_as_a_scenario_takes_only_vehicle_limits(tmp_path):
    good = tmp_path / 'good.yaml'
    good.write_text('/swarm_mobility:\n  ros__parameters:\n    tau_xy: 0.7\n'
                    '/**/agent:\n  ros__parameters:\n    max_speed_xy: 4.0\n')
    scenario = load_scenario(good)
    assert dict(scenario.vehicle) == {'tau_xy': 0.7, 'max_speed_xy': 4.0}
    assert scenario.controller_params().max_speed_xy == 4.0
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**/agent:\n  ros__parameters:\n    k_r: 2.0\n')
    with pytest.raises(ValueError, match='k_r is not a vehicle limit'):
        load_scenario(bad)
    clash = tmp_path / 'clash.yaml'
    clash.write_text('/a:\n  ros__parameters:\n    tau_xy: 0.7\n'
                     '/b:\n  ros__parameters:\n    tau_xy: 0.9\n')
    with pytest.raises(ValueError, match='one value'):
        load_scenario(clash)


def test_the_delay_is_continuous_between_steps():
    """A fractional delay interpolates the commands, so the error has a slope in it."""
    from velocity_mobility_ros.core.fit import Flight, predict
    rec = fly(TRUTH, duration=12.0, delay=0.05, noise=0.0)
    flight = Flight('v', rec.cmd_ns * 1e-9, rec.cmd_v, rec.odom_ns * 1e-9, rec.velocity)
    errors = [np.sqrt(np.mean((predict(flight, TRUTH, d)['simulated'] - rec.true_velocity) ** 2))
              for d in (0.03, 0.035, 0.04, 0.045, 0.05)]
    assert errors[-1] < 1e-9 and all(a > b for a, b in zip(errors, errors[1:]))
    assert math.isfinite(errors[0])


def test_a_window_keeps_the_command_in_force_at_its_start():
    from velocity_mobility_ros.core.fit import Flight
    flight = Flight('v', np.array([0.0, 1.0, 2.0, 3.0]), np.arange(12.0).reshape(4, 3),
                    np.arange(0.0, 4.0, 0.5), np.zeros((8, 3)))
    part = flight.window(1.5, 2.5)
    assert part.cmd_t.tolist() == [1.0, 2.0]  # 1.0 is in force at 1.5
    assert part.odom_t.tolist() == [1.5, 2.0, 2.5]
    assert flight.window(None, None).cmd_t.size == 4
