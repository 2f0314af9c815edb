"""
fit_mobility's outputs in the real nodes, and a fit of the fake autopilot from PX4 topics.

- mobility_fit.yaml as it is: ``mobility_node --params-file`` takes its values, and
  ``swarm_sim --params-file`` flies them (the fitted speed limit bounds every agent's speed).
- A different vehicle: the fake autopilot's kinematic model (``support.fake_px4.fly_kinematic``,
  its first-order lag with clamps and the ground), driven by TrajectorySetpoints and sampled as
  VehicleOdometry at its 50 Hz, recorded with the PX4 message definitions embedded in the MCAP
  file (no px4_msgs needed); the fit predicts its held-out velocity with R^2 >= 0.95.
"""
import json

import numpy as np
import pytest
import rclpy
import yaml

from soliton_encirclement_ros.analysis import fit_mobility
from soliton_encirclement_ros.px4.frames import enu_to_ned
from soliton_encirclement_ros.sim import runner
from support.fake_px4 import fly_kinematic, SAMPLE_AGE_US
from support.synthetic_flight import fly, px4_typestore, rich_commands, write_px4_bag, \
    write_ros_bag
from velocity_mobility_ros.core.fit import PARAM_NAMES
from velocity_mobility_ros.core.model import VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams
from velocity_mobility_ros.nodes.mobility_node import MobilityNode

SLOW = VehicleParams(tau_xy=0.6, tau_z=0.7, max_acc_xy=1.5, max_acc_z=1.0, max_speed_xy=2.5,
                     max_speed_z=1.5)


@pytest.fixture(scope='module')
def fit_file(tmp_path_factory):
    root = tmp_path_factory.mktemp('fit')
    write_ros_bag(root / 'bag', {'uav1': fly(SLOW, duration=40.0, delay=0.05, seed=4)})
    assert fit_mobility.main([str(root / 'bag'), '--out', str(root / 'out')]) == 0
    return root / 'out' / 'mobility_fit.yaml'


def test_mobility_node_takes_the_fitted_parameters_file(fit_file):
    expected = yaml.safe_load(fit_file.read_text())['/**/mobility']['ros__parameters']
    assert set(expected) == set(PARAM_NAMES)
    context = rclpy.Context()
    context.init()
    try:
        node = MobilityNode(namespace='uav1', context=context,
                            cli_args=['--ros-args', '--params-file', str(fit_file)])
        try:
            for name, value in expected.items():
                assert node.get_parameter(name).value == value
                assert value == pytest.approx(getattr(SLOW, name), rel=0.05)
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def test_swarm_sim_flies_the_fitted_parameters_file(fit_file, tmp_path):
    limit = yaml.safe_load(fit_file.read_text())['/swarm_mobility']['ros__parameters'][
        'max_speed_xy']
    out = tmp_path / 'run'
    code = runner.main(['--no-progress', '--control-period', '0.05', '--agents', '3',
                        '--duration', '4', '--out', str(out), '--params-file', str(fit_file)])
    assert code == 0
    agents = np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1)
    # the defaults fly these agents at up to 5 m/s; the fitted vehicle at its own limit
    assert limit < 3.0 and 0.9 * limit < agents[:, 3].max() <= limit + 1e-6


def test_the_fake_autopilot_is_predicted_from_px4_topics(tmp_path):
    """Setpoints at 20 Hz, odometry at 50 Hz (NED), as the fake autopilot flies and reports."""
    params = VehicleParams(tau_xy=0.45, tau_z=0.9, max_acc_xy=2.5, max_acc_z=1.2,
                           max_speed_xy=4.0, max_speed_z=1.8)
    store = px4_typestore()
    setpoint_cls = store.types['px4_msgs/msg/TrajectorySetpoint']
    vehicle = VehicleState.at_rest([[0.0, 0.0, -60.0]])  # NED: 60 m up
    setpoints, odometry, latest = [], [], None
    nan3 = np.full(3, np.nan, dtype=np.float32)
    period_ns, setpoint_ns, next_setpoint = 20_000_000, 50_000_000, 3_000_000
    for tick in range(1, 60 * 50 + 1):
        now_ns = tick * period_ns
        while next_setpoint <= now_ns:  # the bridge's setpoints, heard before this tick
            v_ned = enu_to_ned(rich_commands(np.array([next_setpoint * 1e-9]))[0])
            latest = setpoint_cls(timestamp=next_setpoint // 1000, position=nan3,
                                  velocity=v_ned.astype(np.float32), acceleration=nan3,
                                  jerk=nan3, yaw=np.float32(np.nan), yawspeed=np.float32(0.0))
            setpoints.append((next_setpoint, v_ned))
            next_setpoint += setpoint_ns
        vehicle = fly_kinematic(vehicle, latest, params, 2)  # the fake's 50 Hz tick
        yaw = float(vehicle.yaw[0])
        now_us = now_ns // 1000
        odometry.append((now_ns, {
            'timestamp': now_us, 'timestamp_sample': now_us - SAMPLE_AGE_US,
            'position': vehicle.position[0], 'velocity': vehicle.velocity[0],
            'q': [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]}))
    write_px4_bag(tmp_path / 'px4', setpoints, odometry, namespace='px4_1')
    out = tmp_path / 'out'
    assert fit_mobility.main([str(tmp_path / 'px4'), '--out', str(out)]) == 0
    result = json.loads((out / 'fit.json').read_text())['vehicles']['px4_1']
    assert result['after']['holdout']['r2'] >= 0.95, result['after']
    assert result['after']['holdout']['r2'] > result['before']['holdout']['r2']
    fitted = result['parameters']
    for name in PARAM_NAMES:  # the same model: every limit comes back
        assert fitted[name]['value'] == pytest.approx(getattr(params, name), rel=0.05)
    text = (out / 'mobility_fit.yaml').read_text()
    assert f'max_speed_xy: {fitted["max_speed_xy"]["value"]:.4g}' in text
