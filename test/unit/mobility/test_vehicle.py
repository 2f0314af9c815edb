"""Validation of the vehicle and interface parameter objects (pure, no ROS)."""
import math

import pytest

from velocity_mobility_ros.core.vehicle import InterfaceParams, split_node_params, VehicleParams


def test_defaults_are_the_reference_scenario_with_extensions_off():
    p = VehicleParams()
    assert (p.sim_dt, p.max_speed_xy, p.max_speed_z, p.max_acc_xy, p.max_acc_z) == (
        0.01, 10.0, 5.0, 4.0, 5.0)
    assert (p.tau_xy, p.tau_z) == (1.0, 1.2)
    assert (p.max_dec_xy, p.max_dec_z, p.max_jerk_xy, p.max_jerk_z, p.max_yaw_acc) == (0,) * 5
    assert (p.brake_xy, p.brake_z) == (4.0, 5.0)


@pytest.mark.parametrize('name', ['max_speed_xy', 'max_acc_z', 'max_dec_xy', 'max_jerk_z',
                                  'tau_xy', 'sim_dt', 'max_yaw_rate', 'max_yaw_acc'])
@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_rejected_by_name(name, bad):
    with pytest.raises(ValueError, match=rf'^{name} must be finite, got {bad}'):
        VehicleParams(**{name: bad})


@pytest.mark.parametrize('name', ['max_speed_xy', 'max_speed_z', 'max_acc_xy', 'max_acc_z',
                                  'max_dec_xy', 'max_dec_z', 'max_jerk_xy', 'max_jerk_z',
                                  'tau_xy', 'tau_z', 'max_yaw_acc'])
def test_negative_limits_are_rejected_by_name(name):
    with pytest.raises(ValueError, match=rf'^{name} must be >= 0, got -0.5'):
        VehicleParams(**{name: -0.5})


def test_tau_must_exceed_sim_dt_when_set():
    with pytest.raises(ValueError, match=r'^tau_xy must be > sim_dt \(0.01\).*got 0.005'):
        VehicleParams(tau_xy=0.005)
    with pytest.raises(ValueError, match=r'^tau_z must be > sim_dt \(0.02\).*got 0.02'):
        VehicleParams(sim_dt=0.02, tau_z=0.02)
    assert VehicleParams(tau_xy=0.0, tau_z=0.0).tau_xy == 0.0  # 0 = off is allowed


def test_other_invalid_values_name_the_parameter():
    # The ranges a node declares are the core's (one definition, in the field metadata).
    with pytest.raises(ValueError, match=r'^sim_dt must be >= 0.0001, got 0.0'):
        VehicleParams(sim_dt=0.0, tau_xy=0.0, tau_z=0.0)
    with pytest.raises(ValueError, match=r'^max_yaw_rate must be >= 0.001, got 0.0'):
        VehicleParams(max_yaw_rate=0.0)
    with pytest.raises(ValueError, match=r'^max_speed_xy must be <= 100, got 101.0'):
        VehicleParams(max_speed_xy=101)
    with pytest.raises(ValueError, match=r'^odom_rate must be <= 10000, got 20000.0'):
        InterfaceParams(odom_rate=20000)
    with pytest.raises(ValueError, match=r'^heading_mode must be one of command, velocity, '
                                         r"got 'sideways'"):
        VehicleParams(heading_mode='sideways')
    with pytest.raises(ValueError, match=r"^max_acc_xy must be a number, got '4'"):
        VehicleParams(max_acc_xy='4')
    with pytest.raises(ValueError, match=r'^max_acc_xy must be a number, got True'):
        VehicleParams(max_acc_xy=True)


def test_integers_become_floats():
    p = VehicleParams(max_speed_xy=3)
    assert p.max_speed_xy == 3.0 and isinstance(p.max_speed_xy, float)


def test_from_mapping_rejects_unknown_keys_by_name():
    p = VehicleParams.from_mapping({'max_speed_xy': 3.0})
    assert p == VehicleParams(max_speed_xy=3.0)
    with pytest.raises(ValueError, match=r'unknown VehicleParams field\(s\): max_sped_xy, zz'):
        VehicleParams.from_mapping({'max_sped_xy': 3.0, 'zz': 1})


def test_with_changes_is_a_validated_copy():
    p = VehicleParams()
    q = p.with_changes(max_dec_xy=8.0)
    assert (q.max_dec_xy, q.brake_xy, p.max_dec_xy) == (8.0, 8.0, 0.0)
    with pytest.raises(ValueError, match='tau_xy must be > sim_dt'):
        p.with_changes(sim_dt=1.0)
    with pytest.raises(ValueError, match='unknown VehicleParams field'):
        p.with_changes(speed=1.0)


def test_interface_params_validation():
    assert InterfaceParams().odom_decimation(0.01) == 2
    assert InterfaceParams(odom_rate=100.0).odom_decimation(0.01) == 1
    assert InterfaceParams(odom_rate=30.0).odom_decimation(0.01) == 3
    with pytest.raises(ValueError, match=r'^odom_rate must be < 2/sim_dt .*got 250.0'):
        InterfaceParams(odom_rate=250.0).odom_decimation(0.01)
    with pytest.raises(ValueError, match=r'^odom_rate must be >= 0.01, got 0.0'):
        InterfaceParams(odom_rate=0.0)
    with pytest.raises(ValueError, match=r'^odom_rate must be finite, got nan'):
        InterfaceParams(odom_rate=math.nan)
    with pytest.raises(ValueError, match=r'^cmd_timeout must be >= 0, got -1.0'):
        InterfaceParams(cmd_timeout=-1.0)
    with pytest.raises(ValueError, match=r"^cmd_frame must be one of world, body, got 'map'"):
        InterfaceParams(cmd_frame='map')
    with pytest.raises(ValueError, match=r"^world_frame must be a non-empty string, got ''"):
        InterfaceParams(world_frame='')


def test_split_node_params_routes_names_and_checks_decimation():
    vehicle, interface = split_node_params({'max_acc_xy': 2.0, 'cmd_timeout': 0.0})
    assert vehicle == VehicleParams(max_acc_xy=2.0)
    assert interface == InterfaceParams(cmd_timeout=0.0)
    with pytest.raises(ValueError, match=r'unknown InterfaceParams field\(s\): bogus'):
        split_node_params({'bogus': 1.0})
    with pytest.raises(ValueError, match='odom_rate must be < 2/sim_dt'):
        split_node_params({'sim_dt': 0.1, 'odom_rate': 50.0, 'tau_xy': 0.0, 'tau_z': 0.0})
