"""
``fleet console`` driven as an operator does, in its line mode, against three vehicles.

The console runs as its own process (``fleet console FILE --plain``); keys are lines on its
stdin. First against stand-ins that speak as bridges do on the wire (no px4_msgs needed), then
against three real bridges, each with the PX4 test double behind it (needs px4_msgs): ``h`` puts
every double in PX4's Hold (its own nav_state), engage without its confirmation key sends
nothing, and a vehicle whose bridge is gone is named as unheard while the console goes on
serving the others.
"""
import os
import re
import subprocess
import sys

import pytest
from rclpy.node import Node
import yaml

from support.console_process import ConsoleProcess
from support.harness import default_context_executor, spin_until
from support.px4_ring import DEADLINE, FIELD, HAVE_PX4_MSGS, sitl_plan, start_graph
from support.stand_in import fleet_file, NAMES, StandIn

ros = pytest.fixture(default_context_executor)
HOLD = '4 (AUTO_LOITER)'


@pytest.fixture
def console_of():
    started = []

    def start(path, *args):
        started.append(ConsoleProcess(path, *args))
        return started[-1]
    yield start
    for console in started:
        console.close()


def test_the_console_holds_at_once_confirms_engage_and_names_an_unheard_vehicle(
        ros, tmp_path, console_of):
    stand_in = StandIn()
    ros.add_node(stand_in)
    console = console_of(fleet_file(tmp_path), '--timeout', '5')
    assert spin_until(ros, lambda: console.count('fleet console: discovery took'),
                      timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: all(console.count(f'{name}: mode POSCTL, disarmed')
                                       for name in NAMES), timeout=DEADLINE), console.text

    # engage without its confirmation: asked, then cancelled by another key; nothing sent
    console.press('e')
    assert spin_until(ros, lambda: console.count('engage every vehicle? press y to confirm'))
    console.press('n')
    assert spin_until(ros, lambda: console.count('engage: cancelled; nothing was sent'))
    console.press('c')  # a round trip through the console after the cancel
    assert spin_until(ros, lambda: console.count('all 27 checks passed')), console.text
    assert stand_in.calls == []

    # hold: no confirmation; every bridge called at once, each confirmed by its status
    console.press('h')
    assert spin_until(ros, lambda: all(stand_in.state[n]['nav_state'] == HOLD for n in NAMES),
                      timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: console.count('hold: confirmed by every vehicle'),
                      timeout=DEADLINE), console.text
    for name in NAMES:
        assert console.count(f'{name}: hold ok: holding: PX4 reports AUTO_LOITER') == 1
    assert sorted(stand_in.calls) == [(name, 'hold') for name in NAMES]

    # uav3's companion goes silent: named at once as unheard; the others are still served
    stand_in.silent.add('uav3')
    assert spin_until(ros, lambda: console.count('uav3: UNHEARD: no status for'),
                      timeout=DEADLINE), console.text
    assert not console.count('uav1: UNHEARD') and not console.count('uav2: UNHEARD')
    console.press('h')
    assert spin_until(ros, lambda: all(console.count(f'{name}: hold ok') == 2
                                       for name in ('uav1', 'uav2')),
                      timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: console.count('uav3: hold FAILED: not confirmed within 5 s'),
                      timeout=DEADLINE), console.text
    # the summary is its own line, after the vehicle's: read when it comes, not with it
    assert spin_until(ros, lambda: console.count('hold: FAILED for uav3'),
                      timeout=DEADLINE), console.text
    assert console.count('hold: FAILED for uav3') == 1
    console.press('e')
    console.press('y')  # confirmed, but the check fails on the unheard vehicle: nothing sent
    assert spin_until(ros, lambda: console.count('engage refused: the pre-flight check failed'),
                      timeout=DEADLINE), console.text
    assert not any(action == 'engage' for _, action in stand_in.calls)
    assert console.press_quit() == 0


def one_shot_hold(ros, tmp_path) -> str:
    """Run `fleet hold` on the stand-in's fleet while spinning ``ros``; its output (exit 0)."""
    process = subprocess.Popen(
        [sys.executable, '-m', 'soliton_encirclement_ros.fleet.cli', 'hold',
         str(fleet_file(tmp_path)), '--timeout', '60'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    assert spin_until(ros, lambda: process.poll() is not None, timeout=DEADLINE)
    out = process.stdout.read()
    assert process.returncode == 0, out
    return out


def test_a_one_shot_fleet_command_says_how_long_its_discovery_took(ros, tmp_path):
    stand_in = StandIn()
    ros.add_node(stand_in)
    out = one_shot_hold(ros, tmp_path)
    said = [line for line in out.splitlines() if line.startswith('fleet: discovery')]
    assert len(said) == 1, out
    assert re.fullmatch(r'fleet: discovery took \d+\.\d s since the command started \(every '
                        r"bridge's ~/hold found and called\); `fleet console` discovers the "
                        r'fleet once and acts at once', said[0]), said
    assert all(f'{name}: hold ok' in out for name in NAMES), out


def test_a_hold_whose_request_was_lost_is_asked_again_and_confirmed(ros, tmp_path):
    stand_in = StandIn()
    stand_in.lose_first = {'uav1'}
    ros.add_node(stand_in)
    out = one_shot_hold(ros, tmp_path)
    assert all(f'{name}: hold ok' in out for name in NAMES), out
    assert stand_in.calls.count(('uav1', 'hold')) >= 2, stand_in.calls


def double_fleet_file(tmp_path, names):
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': list(FIELD), 'vehicles': [
        {'name': name, 'agent_id': i + 1, 'px4_namespace': f'px4_{i + 1}', 'host': f'c{i + 1}'}
        for i, name in enumerate(names)]}))
    return path


@pytest.mark.skipif(not HAVE_PX4_MSGS, reason=(
    'px4_msgs is not importable: build PX4/px4_msgs (matching the PX4 version) in a colcon '
    'workspace and source it'))
def test_the_console_holds_three_doubled_vehicles_and_serves_the_others_without_one(
        ros, tmp_path, console_of):
    from std_srvs.srv import Trigger
    _, plan = sitl_plan(3)
    nodes = start_graph(ros, plan)
    fakes = [nodes[f'fake px4_{i}'] for i in (1, 2, 3)]
    status = fakes[0].m['VehicleStatus']
    console = console_of(double_fleet_file(tmp_path, plan.names), '--timeout', '20')
    assert spin_until(ros, lambda: console.count('fleet console: discovery took'),
                      timeout=DEADLINE), console.text

    console.press('e')
    assert spin_until(ros, lambda: console.count('engage every vehicle? press y to confirm'))
    console.press('x')
    assert spin_until(ros, lambda: console.count('engage: cancelled; nothing was sent'))
    console.press('c')
    assert spin_until(ros, lambda: console.count('problem(s):') or console.count('checks passed'),
                      timeout=DEADLINE), console.text
    assert all(fake.commands == [] for fake in fakes)  # no bridge was asked to engage
    assert all(fake.arming_state == status.ARMING_STATE_DISARMED for fake in fakes)

    # flying: engaged through each bridge, as the vehicles of a field day are
    operator = Node('engager')
    ros.add_node(operator)
    engage = [operator.create_client(Trigger, f'/{name}/px4_bridge/engage')
              for name in plan.names]
    assert spin_until(ros, lambda: all(c.service_is_ready() for c in engage), timeout=DEADLINE)
    answers = {}

    def in_offboard(fake):
        return (fake.nav_state == status.NAVIGATION_STATE_OFFBOARD
                and fake.arming_state == status.ARMING_STATE_ARMED)

    def flying():
        # A starved graph may lose an engage, or PX4's offboard-loss failsafe may take a
        # vehicle out of OFFBOARD after its engage was confirmed: either goes again, until
        # every vehicle is in OFFBOARD, armed and in the air at once.
        for i, client in enumerate(engage):
            future = answers.get(i)
            if future is None or (future.done() and not (future.result().success
                                                         and in_offboard(fakes[i]))):
                answers[i] = client.call_async(Trigger.Request())
        return all(answers[i].done() and answers[i].result().success and in_offboard(fake)
                   and -fake.true_position_ned[2] > 3.0 for i, fake in enumerate(fakes))
    assert spin_until(ros, flying, timeout=DEADLINE), [  # climbing to the ring
        (f.result().message if f.done() else 'no answer', fake.nav_state, fake.arming_state,
         fake.true_position_ned[2]) for f, fake in zip(answers.values(), fakes)]

    console.press('h')
    assert spin_until(ros, lambda: all(f.nav_state == status.NAVIGATION_STATE_AUTO_LOITER
                                       for f in fakes), timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: console.count('hold: confirmed by every vehicle'),
                      timeout=DEADLINE), console.text
    for name in plan.names:
        assert console.count(f'{name}: hold ok') == 1, console.text

    # uav3's bridge dies: named as unheard; the others land from Hold on the console's word
    bridge = nodes['/uav3/px4_bridge']
    ros.remove_node(bridge)
    bridge.destroy_node()
    assert spin_until(ros, lambda: console.count('uav3: UNHEARD'), timeout=DEADLINE), \
        console.text
    console.press('l')
    console.press('y')
    assert spin_until(ros, lambda: all(f.arming_state == status.ARMING_STATE_DISARMED
                                       and f.landed for f in fakes[:2]),
                      timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: console.count('uav1: land ok')
                      and console.count('uav2: land ok'), timeout=DEADLINE), console.text
    assert spin_until(ros, lambda: console.count('uav3: land FAILED'), timeout=DEADLINE), \
        console.text
    assert fakes[2].arming_state == status.ARMING_STATE_ARMED  # its bridge never asked PX4
    assert console.press_quit() == 0
