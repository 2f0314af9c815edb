"""
fit_mobility recovers known limits and delays, through the command line or directly (no rclpy).

Two synthetic vehicles flown by the project's own model (``support.synthetic_flight``), recorded
into an MCAP bag and fitted once, a flight whose limits are never reached, and six flights of the
independent simulator (``support.independent_flight``): the parts of
``unit/mobility/test_fit.py`` that take a second or more each.
"""
import json

import numpy as np
import pytest
import yaml

from soliton_encirclement_ros.analysis import fit_mobility
from soliton_encirclement_ros.core.scenario import load_scenario
from support.independent_flight import fly_independent, Truth
from support.synthetic_flight import fly, write_ros_bag
from velocity_mobility_ros.core.fit import DELAY, fit, Flight, PARAM_NAMES
from velocity_mobility_ros.core.vehicle import VehicleParams

TRUTH = VehicleParams(tau_xy=0.8, tau_z=0.5, max_acc_xy=3.0, max_acc_z=2.0, max_speed_xy=6.0,
                      max_speed_z=2.5)
DELAYS = {'uav1': 0.08, 'uav2': 0.04}  # multiples of sim_dt, as a node's step sees them
ODOM_PERIOD = 0.02  # 50 Hz


@pytest.fixture(scope='module')
def fitted(tmp_path_factory):
    """Two vehicles with known limits and different delays, fitted through the CLI once."""
    root = tmp_path_factory.mktemp('fit')
    bag = root / 'flight'
    write_ros_bag(bag, {name: fly(TRUTH, delay=delay, noise=0.05, seed=i)
                        for i, (name, delay) in enumerate(DELAYS.items())})
    out = root / 'out'
    assert fit_mobility.main([str(bag), '--out', str(out)]) == 0
    return out, json.loads((out / 'fit.json').read_text())


@pytest.mark.parametrize('which', ['uav1', 'uav2', 'pooled'])
def test_each_parameter_is_recovered_within_5_percent(fitted, which):
    _, report = fitted
    result = report['pooled'] if which == 'pooled' else report['vehicles'][which]
    params = result['parameters']
    for name in PARAM_NAMES:
        assert params[name]['identified'], (name, params[name])
        value, truth = params[name]['value'], getattr(TRUTH, name)
        assert abs(value - truth) <= 0.05 * truth, (name, value, truth)
        assert 0.0 < params[name]['std'] < 0.05 * truth
        low, high = params[name]['interval']
        assert low <= truth <= high, (name, params[name])
    if which != 'pooled':  # the pooled delay lies between the two vehicles'
        assert abs(params['delay']['value'] - DELAYS[which]) <= ODOM_PERIOD, params['delay']
    held_out = result['after']['holdout']
    assert held_out['r2'] > 0.99 and held_out['rmse'] < 0.1  # the noise is 0.05 m/s per axis
    assert result['before']['holdout']['r2'] < held_out['r2']


def test_the_parameters_file_is_what_the_simulators_read(fitted):
    out, report = fitted
    content = yaml.safe_load((out / 'mobility_fit.yaml').read_text())
    pooled = {n: report['pooled']['parameters'][n]['value'] for n in PARAM_NAMES}
    for node in ('/**/mobility', '/swarm_mobility'):
        values = content[node]['ros__parameters']
        assert set(values) == set(PARAM_NAMES)
        for name, value in values.items():
            assert isinstance(value, float)  # ROS types a 3 as an integer parameter
            assert value == pytest.approx(pooled[name], rel=1e-3)
    assert set(content['/**/agent']['ros__parameters']) == {'max_speed_xy', 'max_speed_z'}
    # batch_sim / sweep_sim / swarm_sim --scenario: the vehicle: overrides
    vehicle = load_scenario(out / 'mobility_fit.yaml').vehicle_params()
    for name in PARAM_NAMES:
        assert getattr(vehicle, name) == pytest.approx(pooled[name], rel=1e-3)
    assert (out / 'fit_report.png').stat().st_size > 10_000


def test_batch_sim_and_a_sweep_take_the_parameters_file_as_it_is(fitted, tmp_path):
    from soliton_encirclement_ros.sim import batch_sim
    from soliton_encirclement_ros.sim.sweep import load_spec
    out, report = fitted
    pooled = {n: report['pooled']['parameters'][n]['value'] for n in PARAM_NAMES}
    fit_file = out / 'mobility_fit.yaml'
    assert batch_sim.main(['--scenario', str(fit_file), '--agents', '3', '--duration', '2',
                           '--out', str(tmp_path / 'batch')]) == 0
    flown = json.loads((tmp_path / 'batch' / 'summary.json').read_text())['params']
    for name in PARAM_NAMES:
        assert flown['vehicle'][name] == pytest.approx(pooled[name], rel=1e-3)
    assert flown['controller']['max_speed_xy'] == flown['vehicle']['max_speed_xy']
    spec = tmp_path / 'sweep.yaml'
    spec.write_text(f'scenario: {fit_file}\ngrid: {{agents: [3]}}\n')
    base = load_spec(spec).base['vehicle']
    assert {n: pytest.approx(v, rel=1e-3) for n, v in pooled.items()} == base


# Independent flights (support.independent_flight: continuous time, RK4 at 1 kHz, commands held
# at 20 Hz, delays off the step grid, odometry noise; both z limits bind), 60 s each, through
# the command line: every parameter within 5 % and its interval covers the truth.
INDEPENDENT = {
    'reviewer': (Truth(delay=0.1), {'seed': 10}),
    'slow_xy': (Truth(tau_xy=1.2, max_acc_xy=1.8, max_speed_xy=4.0, tau_z=0.4, max_acc_z=3.0,
                      max_speed_z=2.0, delay=0.1437), {'seed': 11, 'noise': 0.1,
                                                       'odom_rate': 30.0}),
    'drift': (Truth(delay=0.0537), {'seed': 12, 'correlated_noise': 0.05}),
    'fast_odom': (Truth(tau_xy=0.6, max_acc_xy=2.0, max_speed_xy=3.5, tau_z=0.9, max_acc_z=1.2,
                        max_speed_z=1.2, delay=0.0213), {'seed': 13, 'noise': 0.03,
                                                         'odom_rate': 100.0,
                                                         'odom_phase': 0.0021}),
}


@pytest.mark.parametrize('name', sorted(INDEPENDENT))
def test_an_independent_flight_is_recovered_and_covered(name, tmp_path):
    truth, options = INDEPENDENT[name]
    write_ros_bag(tmp_path / 'bag', {name: fly_independent(truth, **options)})
    assert fit_mobility.main([str(tmp_path / 'bag'), '--out', str(tmp_path / 'out')]) == 0
    params = json.loads((tmp_path / 'out' / 'fit.json').read_text())['vehicles'][name][
        'parameters']
    for param in PARAM_NAMES + ('delay',):
        entry, true = params[param], getattr(truth, param)
        assert entry['identified'], (param, entry)
        low, high = entry['interval']
        if name == 'drift' and param == 'delay':
            # an odometry error drifting over a second moves the delay by more than 5 % (here
            # 58 ms for 54); its interval still covers it
            assert abs(entry['value'] - true) <= 0.01 and low <= true <= high, (entry, true)
            continue
        assert abs(entry['value'] - true) <= 0.05 * true, (param, entry, true)
        assert low <= true <= high, (param, entry, true)


def test_a_limit_never_reached_is_unidentifiable_and_left_out(tmp_path):
    """Gentle commands: the lag shows, the acceleration and speed limits never bind."""
    def gentle(t):
        v = np.zeros((t.size, 3))
        v[:, 0] = np.where((t > 1) & (t < 8), 1.5, 0.0) + 0.8 * np.sin(0.7 * t) * (t > 10)
        v[:, 2] = np.where((t > 3) & (t < 9), 0.4, 0.0) - 0.3 * np.sin(0.9 * t) * (t > 12)
        return v
    write_ros_bag(tmp_path / 'bag', {'uav1': fly(TRUTH, duration=24.0, commands=gentle)})
    assert fit_mobility.main([str(tmp_path / 'bag'), '--out', str(tmp_path / 'out')]) == 0
    params = json.loads((tmp_path / 'out' / 'fit.json').read_text())['vehicles']['uav1'][
        'parameters']
    assert params['tau_xy']['value'] == pytest.approx(TRUTH.tau_xy, rel=0.05)
    assert params['tau_z']['value'] == pytest.approx(TRUTH.tau_z, rel=0.05)
    for name in ('max_acc_xy', 'max_speed_xy', 'max_acc_z', 'max_speed_z'):
        assert not params[name]['identified'], (name, params[name])
        assert 'never reached' in params[name]['reason'], params[name]
    content = yaml.safe_load((tmp_path / 'out' / 'mobility_fit.yaml').read_text())
    assert set(content['/swarm_mobility']['ros__parameters']) == {'tau_xy', 'tau_z'}
    assert '/**/agent' not in content  # no speed limit to give the controller


# Two more vehicles of the independent simulator, 40 s each, fitted directly (not through the
# command line) with the last 20 % held out: different limits, delays off the 10 ms step grid,
# odometry at 50 Hz and 30 Hz with a phase of its own, different noise and commands.
HELD_OUT = {
    'reviewer': (Truth(tau_xy=0.8, max_acc_xy=2.5, max_speed_xy=6.0, tau_z=0.5, max_acc_z=1.5,
                       max_speed_z=2.5, delay=0.1037), {'seed': 0, 'noise': 0.05}),
    'other': (Truth(tau_xy=0.5, max_acc_xy=3.5, max_speed_xy=4.5, tau_z=0.7, max_acc_z=2.2,
                    max_speed_z=1.8, delay=0.0735), {'seed': 1, 'odom_rate': 30.0,
                                                     'noise': 0.08}),
}


@pytest.fixture(scope='module', params=sorted(HELD_OUT))
def independent_fit(request):
    """Fly an independent flight of 40 s and fit it once (the last 20 % held out)."""
    truth, options = HELD_OUT[request.param]
    rec = fly_independent(truth, duration=40.0, **options)
    flight = Flight(request.param, rec.cmd_ns * 1e-9, rec.cmd_v, rec.odom_ns * 1e-9,
                    rec.velocity)
    return truth, fit([flight], holdout=0.2)


def test_an_independent_flight_is_recovered_within_5_percent(independent_fit):
    truth, result = independent_fit
    for name in PARAM_NAMES + (DELAY,):
        est, true = result.estimates[name], getattr(truth, name)
        assert est.identified, (name, est)
        assert abs(est.value - true) <= 0.05 * true, (name, est.value, true)
    # held out: what is left is the odometry noise
    assert result.after['holdout'].rmse < 1.2 * HELD_OUT[result.vehicles[0]][1]['noise']


def test_the_interval_covers_the_truth_of_an_independent_flight(independent_fit):
    """The interval covers the truth and is still informative."""
    truth, result = independent_fit
    for name in PARAM_NAMES + (DELAY,):
        est, true = result.estimates[name], getattr(truth, name)
        assert est.low <= true <= est.high, (name, true, est)
        # informative: within 10 %, the delay within 15 ms
        assert est.half_width < (0.015 if name == DELAY else 0.1 * est.value), (name, est)
        assert est.std >= est.std_white > 0.0
