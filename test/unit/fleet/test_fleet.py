"""fleet: the fleet file, its launch lines and the pre-flight verdicts (issue 37 §4)."""
import math
import re
import shlex

import numpy as np
import pytest
import yaml

from soliton_encirclement_ros.fleet.checks import check_fleet, link_offsets, render, VehicleView
from soliton_encirclement_ros.fleet.cli import main
from soliton_encirclement_ros.fleet.fleet_file import launch_commands, load_fleet

FIELD = [47.397742, 8.545594, 488.0]
VEHICLES = [{'name': f'uav{i}', 'agent_id': i, 'px4_namespace': '', 'target_system': 1,
             'host': f'companion{i}'} for i in (1, 2, 3)]


def fleet_file(tmp_path, **changes):
    (tmp_path / 'field.yaml').write_text(yaml.safe_dump(
        {'polygon': [[-50, -50], [50, -50], [50, 50], [-50, 50]], 'z_min': -5.0,
         'z_max': 40.0}))
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': FIELD, 'safety_area': 'field.yaml',
                                    'vehicles': VEHICLES, **changes}))
    return path


def test_launch_commands_are_the_exact_line_for_each_companion(tmp_path, capsys):
    fleet = load_fleet(fleet_file(tmp_path))
    host, name, line = launch_commands(fleet)[1]
    assert (host, name) == ('companion2', 'uav2')
    assert shlex.split(line) == [
        'ros2', 'launch', 'soliton_encirclement_ros', 'agent_px4.launch.py', 'agent_name:=uav2',
        'agent_id:=2', 'px4_namespace:=', 'target_system:=1', 'radius:=20', 'altitude:=10',
        'd_safe:=2', 'swarm_reliability:=best_effort',
        'geo_reference:=47.397742,8.545594,488', f'safety_area:={tmp_path / "field.yaml"}']
    assert main(['launch-commands', str(tmp_path / 'fleet.yaml')]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == '# uav1 on companion1' and out[3] == line
    assert out[-1] == f'# every companion needs the safety area at {tmp_path / "field.yaml"}'


@pytest.mark.parametrize('changes, message', [
    ({'vehicles': VEHICLES + [{'name': 'uav1', 'agent_id': 9}]},
     'names must be unique, got uav1'),
    ({'vehicles': VEHICLES + [{'name': 'uav9', 'agent_id': 2}]},
     'agent ids must be unique, got 2'),
    ({'vehicles': [{**VEHICLES[0], 'host': 'a'}, {**VEHICLES[1], 'host': 'a'}]},
     'two vehicles on one host share a px4_namespace (one PX4 each): a:(instance 0)'),
    ({'geo_reference': None}, 'uav1, uav2, uav3 has no origin and there is no geo_reference'),
    ({'min_battery': 1.5}, 'min_battery must be a finite number >= 0 and <= 1, got 1.5'),
    # non-finite numbers passed every comparison: d_safe .nan into every launch line, and the
    # check's `distance < d_safe` failed no pair
    ({'d_safe': math.nan}, 'd_safe must be a finite number >= 2 (the least separation a PX4 '
     'launch flies with), got nan'),
    # every vehicle's launch would refuse these: the fleet file refuses them first
    ({'d_safe': 0}, 'd_safe must be a finite number >= 2 (the least separation a PX4 launch '
     'flies with), got 0'),
    ({'altitude': -50.0}, 'altitude must be a finite number > 0 (world ENU z, up from the '
     'origin), got -50.0'),
    ({'vehicles': [{'name': 'uav1', 'agent_id': 1, 'target_system': 0}]},
     'uav1 target_system must be an integer in [1, 255], got 0'),
    ({'radius': math.inf}, 'radius must be a finite number > 0, got inf'),
    ({'radius': 0.0}, 'radius must be a finite number > 0, got 0.0'),
    ({'altitude': math.nan}, 'altitude must be a finite number > 0 (world ENU z, up from the '
     'origin), got nan'),
    ({'max_clock_offset': math.inf}, 'max_clock_offset must be a finite number >= 0, got inf'),
    ({'min_battery': math.nan}, 'min_battery must be a finite number >= 0 and <= 1, got nan'),
    ({'geo_reference': [math.nan, 8.5, 488.0]}, 'geo_reference must be [lat, lon, alt]'),
    ({'vehicles': [{'name': 'uav1', 'agent_id': 1, 'origin': [0.0, math.inf, 0.0]}]},
     'uav1 origin must be [x, y, z] of finite numbers (m, world ENU), got [0.0, inf, 0.0]'),
    ({'vehicles': [{'name': 'uav1', 'agent_id': 1, 'target_system': 300}]},
     'uav1 target_system must be an integer in [1, 255], got 300'),
    ({'vehicles': [{'name': 'uav1', 'agent_id': 1, 'origin': [1, 2]}]},
     'uav1 origin must be [x, y, z] of finite numbers (m, world ENU), got [1, 2]'),
    ({'vehicle': []}, 'unknown keys'),
])
def test_a_bad_fleet_file_is_one_line_naming_the_rule(tmp_path, changes, message, capsys):
    path = fleet_file(tmp_path, **changes)
    with pytest.raises(ValueError, match=None) as error:
        load_fleet(path)
    assert message in str(error.value) and '\n' not in str(error.value)
    assert main(['check', str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'fleet: error: fleet file {path}: ') and err.count('\n') == 1


def healthy(fleet, offsets=None, bridge=None, delays=None, agent=None):
    """
    Return views of a fleet ready to fly: 10 m apart, inside, charged, clocks agreeing.

    ``offsets``: agent id -> its clock's offset; ``delays``: (receiver id, sender id) -> the
    fastest delivery's delay, which adds to what the receiver measures.
    """
    views = {}
    for i, vehicle in enumerate(fleet.vehicles):
        clock, delay = offsets or {}, delays or {}
        links = {f'link.{other.agent_id}': 'heard=40 lost=0 offset='
                 f'{clock.get(other.agent_id, 0.0) - clock.get(vehicle.agent_id, 0.0) + delay.get((vehicle.agent_id, other.agent_id), 0.0):+.4f}'  # noqa: E501
                 for other in fleet.vehicles if other is not vehicle}
        views[vehicle.name] = VehicleView(
            bridge={'ready': 'yes', 'origin_enu': f'({10.0 * i:.2f}, 0.00, 0.00)',
                    'origin_source': 'gps', 'battery_remaining': '0.80', 'safety_area': 'inside',
                    'target_system': '1', 'px4_namespace': '',
                    'geo_reference': '47.397742,8.545594,488',
                    **(bridge or {}).get(vehicle.name, {})},
            bridge_age=0.5, agent={'agent_id': str(vehicle.agent_id), 'duplicate_id': 'false',
                                   'radius': '20', 'altitude': '10', 'd_safe': '2',
                                   **links, **(agent or {}).get(vehicle.name, {})},
            agent_age=0.5,
            position=np.array([10.0 * i, 0.0, 0.0]))
    return views


def test_a_healthy_fleet_passes_every_check(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path))
    report = check_fleet(fleet, healthy(fleet))
    assert report.passed and len(report.verdicts) == 3 * 9
    table = render(report).splitlines()
    assert table[0].split() == ['vehicle', 'heard', 'id', 'config', 'ready', 'origin', 'area',
                                'separation', 'clock', 'battery']
    assert table[1].split() == ['uav1'] + ['ok'] * 9
    assert table[-1] == 'all 27 checks passed'


def failing(report):
    return {(v.vehicle, v.check): v.detail for v in report.problems}


def test_each_fault_fails_its_check_naming_the_vehicle_and_the_value(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path))
    views = healthy(fleet, bridge={
        'uav1': {'ready': 'PX4 is in a failsafe (nav_state=AUTO_LOITER): clear it (or take '
                          'over) before engaging', 'battery_remaining': '0.12'},
        'uav2': {'origin_problem': 'origin_enu (5.00, 0.00, 0.00) is 5.0 m from the GPS '
                                   'origin (10.00, 0.00, 0.00)'}})
    views['uav3'] = VehicleView(bridge=views['uav3'].bridge, bridge_age=0.5,
                                agent=views['uav3'].agent, agent_age=0.5,
                                position=np.array([60.0, 0.0, 0.0]))
    problems = failing(check_fleet(fleet, views))
    assert problems == {
        ('uav1', 'ready'): 'PX4 is in a failsafe (nav_state=AUTO_LOITER): clear it (or take '
                           'over) before engaging',
        ('uav1', 'battery'): '12% remaining, below min_battery 25%',
        ('uav2', 'origin'): 'origin_enu (5.00, 0.00, 0.00) is 5.0 m from the GPS origin '
                            '(10.00, 0.00, 0.00)',
        ('uav3', 'area'): 'outside the safety area (at (60.0, 0.0, 0.0) m, 10.0 m outside the '
                          'polygon)'}


def test_unheard_duplicate_close_and_unknown_battery_fail(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path))
    views = healthy(fleet)
    views['uav1'] = VehicleView(bridge={k: v for k, v in views['uav1'].bridge.items()
                                        if k != 'battery_remaining'}, bridge_age=0.5,
                                agent={**views['uav1'].agent, 'duplicate_id': 'true'},
                                agent_age=0.5, position=np.array([11.5, 0.0, 0.0]))
    views['uav3'] = VehicleView()
    problems = failing(check_fleet(fleet, views))
    assert problems[('uav1', 'id')] == 'agent_id 1 is broadcast by another process too'
    assert problems[('uav1', 'battery')] == 'battery unknown: no BatteryStatus heard from PX4'
    assert problems[('uav1', 'separation')] == ('uav2 is 1.50 m away, closer than d_safe 2 m')
    assert problems[('uav3', 'heard')] == ('no status from /uav3/px4_bridge (never), /uav3/agent '
                                           '(never): is its companion up, on this ROS_DOMAIN_ID '
                                           'and network?')
    # nothing of it is heard: one line says so, its other checks are not judged ('-')
    assert {check for name, check in problems if name == 'uav3'} == {'heard'}
    report = check_fleet(fleet, views)
    assert not report.passed
    assert render(report).splitlines()[3].split() == ['uav3', 'FAIL'] + ['-'] * 8


def test_the_companion_whose_clock_is_off_is_the_one_named(tmp_path):
    fleet = load_fleet(fleet_file(tmp_path))
    report = check_fleet(fleet, healthy(fleet, offsets={2: 0.3}))
    assert failing(report) == {('uav2', 'clock'): (
        'its clock is +0.300 s off uav1, uav3 (agrees with 0 of 2), past max_clock_offset 0.1 '
        's: synchronise it (chrony/NTP)')}
    two = load_fleet(fleet_file(tmp_path, vehicles=VEHICLES[:2]))
    assert set(failing(check_fleet(two, healthy(two, offsets={2: 0.3})))) == {
        ('uav1', 'clock'), ('uav2', 'clock')}  # which of two is off cannot be told: both
    assert link_offsets({'link.4': 'heard=3 lost=0 offset=-0.2950', 'state': 'ok'}) == {
        4: pytest.approx(-0.295)}
    assert math.isinf(VehicleView().bridge_age)


def test_what_runs_is_compared_with_the_fleet_file(tmp_path):
    """A fleet file edited after the launch: the running values are named against it."""
    fleet = load_fleet(fleet_file(tmp_path, vehicles=[
        {**VEHICLES[0], 'target_system': 2}, VEHICLES[1],
        {**VEHICLES[2], 'origin': [20.0, 0.0, 0.0]}], d_safe=3.0))
    views = healthy(fleet, bridge={'uav1': {'target_system': '1'}, 'uav2': {
        'geo_reference': '47.4,8.545594,488'}, 'uav3': {'origin_source': 'given',
                                                        'origin_enu': '[20.50, 0.00, 0.00]'}})
    problems = failing(check_fleet(fleet, views))
    tail = ': relaunch it with the line of fleet launch-commands'
    assert problems == {
        ('uav1', 'config'): 'runs with target_system 1 (the fleet file says 2); d_safe 2 (the '
                            'fleet file says 3)' + tail,
        ('uav2', 'config'): 'runs with geo_reference 47.4,8.545594,488 (the fleet file says '
                            '47.397742,8.545594,488); d_safe 2 (the fleet file says 3)' + tail,
        ('uav3', 'config'): 'runs with origin [20.50, 0.00, 0.00] (the fleet file says [20.0, '
                            '0.0, 0.0]); d_safe 2 (the fleet file says 3)' + tail}
    fleet = load_fleet(fleet_file(tmp_path))
    assert not failing(check_fleet(fleet, healthy(fleet)))
    gps = failing(check_fleet(fleet, healthy(fleet, bridge={'uav2': {'origin_source': 'given'}},
                                             agent={'uav3': {'altitude': 'nan'}})))
    assert gps == {('uav2', 'config'): 'runs with origin (10.00, 0.00, 0.00) given (the fleet '
                                       'file places it by GPS)' + tail,
                   ('uav3', 'config'): 'runs with altitude nan (the fleet file says 10)' + tail}


def test_a_delivery_delay_on_one_host_is_not_a_clock_offset(tmp_path):
    """One clock, one slow direction (a loaded host): half the two ways' sum bounds the error."""
    fleet = load_fleet(fleet_file(tmp_path))
    delays = {(1, 2): 0.156, (2, 1): 0.004, (1, 3): 0.01, (3, 1): 0.01, (2, 3): 0.2,
              (3, 2): 0.003}
    report = check_fleet(fleet, healthy(fleet, delays=delays))
    assert not failing(report)
    clock = {v.vehicle: v.detail for v in report.verdicts if v.check == 'clock'}
    for detail in clock.values():  # within its error of 0: delay, not offset
        match = re.match(r'([-+][0-9.]+) s \(±([0-9.]+)\)', detail)
        value, error = (float(x) for x in match.groups())
        assert abs(value) <= error + 1e-3, clock
    # a real 0.3 s offset with the same delays is still named
    report = check_fleet(fleet, healthy(fleet, offsets={2: 0.3}, delays=delays))
    assert set(failing(report)) == {('uav2', 'clock')}


@pytest.mark.parametrize('args, message', [
    (['check', 'f.yaml', '--wait', 'nan'], 'fleet check: error: argument --wait: must be finite'),
    (['check', 'f.yaml', '--wait', '-1'], 'fleet check: error: argument --wait: must be >= 0'),
    (['engage', 'f.yaml', '--timeout', '-3'], 'fleet engage: error: argument --timeout: must '
     'be > 0'),
    (['land', 'f.yaml', '--timeout', 'nan'], 'fleet land: error: argument --timeout: must be '
     'finite'),
    (['check', 'f.yaml', '--stale', '0'], 'fleet check: error: argument --stale: must be > 0'),
])
def test_a_bad_wait_or_timeout_is_one_line_before_anything_is_read(args, message, capsys):
    with pytest.raises(SystemExit) as refused:
        main(args)
    assert refused.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(message), err


def test_fleet_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    out = capsys.readouterr().out
    assert 'fleet check FILE' in out and 'same ROS_DOMAIN_ID' in out
    assert '``' not in out and not re.search(r':[a-z]+:`', out), out
