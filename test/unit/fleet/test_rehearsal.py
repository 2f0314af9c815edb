"""px4_sitl_rehearsal's plan: PX4 instances, homes and the companions' nodes (no PX4 needed)."""
import pymap3d
import pytest
import yaml

from soliton_encirclement_ros.fleet import rehearsal
from soliton_encirclement_ros.fleet.fleet_file import load_fleet
from soliton_encirclement_ros.fleet.rehearsal import (
    companion_nodes, main, px4_binary, px4_environment, RehearsalError, spawns)

FIELD = [47.397742, 8.545594, 488.0]


def fleet_file(tmp_path, vehicles=None, **changes):
    vehicles = vehicles or [{'name': f'uav{i}', 'agent_id': i, 'px4_namespace': f'px4_{i}',
                             'target_system': i + 1} for i in (1, 2, 3)]
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': FIELD, 'vehicles': vehicles, **changes}))
    return path


def test_each_vehicle_gets_its_instance_namespace_and_gps_home(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path))
    places = spawns(fleet)
    assert places == {'uav1': (-3.0, -6.0, 0.0), 'uav2': (0.0, -6.0, 0.0),
                      'uav3': (3.0, -6.0, 0.0)}
    env = px4_environment(fleet, fleet.vehicles[2], places['uav3'])
    assert (env['PX4_SYS_AUTOSTART'], env['PX4_UXRCE_DDS_NS']) == ('10040', 'px4_3')
    assert env['PX4_PARAM_MAV_SYS_ID'] == '4'
    east, north, up = pymap3d.geodetic2enu(float(env['PX4_HOME_LAT']),
                                           float(env['PX4_HOME_LON']),
                                           float(env['PX4_HOME_ALT']), *FIELD)
    assert (east, north, up) == pytest.approx((3.0, -6.0, 0.0), abs=0.01)


def test_the_companions_run_what_their_launch_line_starts(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path, d_safe=2.5))
    specs = {spec.executable: spec for spec in companion_nodes(fleet, fleet.vehicles[1])}
    assert sorted(specs) == ['agent_node', 'px4_bridge_node']
    bridge, agent = specs['px4_bridge_node'], specs['agent_node']
    assert bridge.full_name == '/uav2/px4_bridge' and agent.full_name == '/uav2/agent'
    assert bridge.parameters['px4_namespace'] == 'px4_2'
    assert bridge.parameters['target_system'] == 3
    assert bridge.parameters['origin_source'] == 'gps'
    assert agent.parameters['agent_id'] == 2 and agent.parameters['d_safe'] == 2.5


@pytest.mark.parametrize('vehicles, message', [
    ([{'name': 'uav1', 'agent_id': 1, 'px4_namespace': 'a', 'target_system': 2},
      {'name': 'uav2', 'agent_id': 2, 'px4_namespace': 'b', 'target_system': 2}],
     'uav1 and uav2 share target_system 2: on one machine every vehicle needs its own'),
    ([{'name': 'uav1', 'agent_id': 1, 'px4_namespace': '', 'target_system': 1, 'host': 'c1'},
      {'name': 'uav2', 'agent_id': 2, 'px4_namespace': '', 'target_system': 2, 'host': 'c2'}],
     "uav1 and uav2 share px4_namespace ''"),
    ([{'name': 'uav1', 'agent_id': 1, 'px4_namespace': 'a', 'target_system': 1,
       'origin': [0.0, 0.0, 0.0]},
      {'name': 'uav2', 'agent_id': 2, 'px4_namespace': 'b', 'target_system': 2,
       'origin': [1.0, 0.0, 0.0]}],
     'uav1 and uav2 would spawn 1.00 m apart, closer than d_safe 2 m'),
])
def test_a_fleet_one_machine_cannot_fly_is_refused_in_one_line(tmp_path, vehicles, message):
    fleet = load_fleet(fleet_file(tmp_path, vehicles))
    with pytest.raises(RehearsalError) as error:
        spawns(fleet)
    assert message in str(error.value)


def test_no_px4_tree_or_agent_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    path = fleet_file(tmp_path)
    monkeypatch.delenv('PX4_DIR', raising=False)
    assert main([str(path), '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'give --px4-dir or set PX4_DIR' in err
    with pytest.raises(RehearsalError, match='has no SITL build'):
        px4_binary(str(tmp_path))
    with pytest.raises(RehearsalError, match='no Micro XRCE-DDS Agent'):
        rehearsal.agent_binary(str(tmp_path / 'no_agent'))
