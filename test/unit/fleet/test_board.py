"""The console's board and keypad (fleet.board): rows, the lines of changes, confirmations."""
import math

from soliton_encirclement_ros.fleet.board import Board, CONFIRM_WINDOW, Keys, row

BRIDGE = {'nav_state': '4 (AUTO_LOITER)', 'arming_state': 'ARMED', 'landed': 'false',
          'battery_remaining': '0.63', 'phase': 'idle', 'level': 'OK', 'message': 'idle'}


def test_a_row_shows_what_the_bridge_reports_and_how_long_ago():
    one = row('uav1', BRIDGE, 0.4, 3.0)
    assert (one.mode, one.armed, one.landed, one.battery, one.phase, one.heard) == (
        'AUTO_LOITER', 'ARMED', 'false', '63%', 'idle', True)
    assert one.text() == ('uav1: mode AUTO_LOITER, armed, landed false, battery 63%, idle, '
                          'link 0.4 s')
    assert not row('uav1', BRIDGE, 3.5, 3.0).heard
    never = row('uav2', None, math.inf, 3.0)
    assert not never.heard and never.text().endswith('never heard')
    assert row('uav1', {**BRIDGE, 'battery_remaining': 'nan'}, 0.1, 3.0).battery == '?'


def test_the_board_says_changes_warnings_and_a_vehicle_it_no_longer_hears_once():
    board = Board(['uav1', 'uav2'], stale=3.0)
    rows = {'uav1': row('uav1', BRIDGE, 0.1, 3.0), 'uav2': row('uav2', BRIDGE, 0.1, 3.0)}
    assert len(board.update(rows, {}, 10.0)) == 2  # first sight of each
    assert board.update(rows, {}, 10.5) == []  # nothing changed (the link age is no news)
    rows['uav2'] = row('uav2', BRIDGE, 3.2, 3.0)
    warn = {'level': 'WARN', 'message': 'hold requested'}
    lines = board.update(rows, {'uav1': [('/uav1/px4_bridge', warn)]}, 11.0)
    assert lines == ['uav1: WARN: hold requested (/uav1/px4_bridge)',
                     'uav2: UNHEARD: no status for 3.2 s (more than 3 s): its companion, '
                     'bridge or link is down']
    assert board.unheard() == ['uav2']
    assert board.update(rows, {'uav1': [('/uav1/px4_bridge', warn)]}, 11.5) == []  # said once
    assert 'WARN hold requested (2 s ago' in board.table(13.0)[1]
    assert 'UNHEARD' in board.table(13.0)[2]
    rows['uav2'] = row('uav2', BRIDGE, 0.1, 3.0)
    assert board.update(rows, {}, 12.0) == ['uav2: heard again']


def test_hold_acts_at_once_engage_and_land_only_after_the_confirmation_key():
    keys = Keys()
    assert keys.press('h', 0.0) == ('hold', None)
    action, line = keys.press('e', 1.0)
    assert action is None and 'press y to confirm' in line
    assert keys.press('y', 2.0) == ('engage', None)
    assert keys.press('y', 3.0)[0] is None  # a confirmation with nothing pending does nothing
    keys.press('l', 4.0)
    assert keys.press('n', 5.0) == (None, 'land: cancelled; nothing was sent')
    keys.press('e', 6.0)
    assert keys.press('h', 7.0) == ('hold', 'engage: cancelled; nothing was sent')  # at once
    keys.press('engage', 8.0)  # a line's first character is its key
    assert keys.expire(8.0 + CONFIRM_WINDOW + 0.1) == (
        f'engage: not confirmed within {CONFIRM_WINDOW:g} s; nothing was sent')
    assert keys.press('y', 8.0 + CONFIRM_WINDOW + 0.2)[0] is None
    keys.press('l', 30.0)
    assert keys.press('y', 30.0 + CONFIRM_WINDOW + 1.0)[0] is None  # too late, not expired yet
    assert keys.press('c', 40.0) == ('check', None)
    assert keys.press('q', 41.0) == ('quit', None)
    assert keys.press('', 42.0) == (None, None)
    assert 'unknown key' in keys.press('x', 43.0)[1]


def test_a_warning_whose_figures_change_is_said_once_and_two_nodes_do_not_repeat_each_other():
    board = Board(['uav1'], stale=3.0)
    rows = {'uav1': row('uav1', BRIDGE, 0.1, 3.0)}
    board.update(rows, {}, 0.0)
    agent = {'level': 'WARN', 'message': 'clock of agent 2 off by -0.135 s'}
    bridge = {'level': 'WARN', 'message': 'engaged, holding (zero velocity): awaiting cmd_vel'}
    both = {'uav1': [('/uav1/px4_bridge', bridge), ('/uav1/agent', agent)]}
    assert len(board.update(rows, both, 1.0)) == 2
    agent['message'] = 'clock of agent 2 off by -0.101 s'
    assert board.update(rows, both, 2.0) == []
    assert board.warnings['uav1'].message == 'clock of agent 2 off by -0.101 s'
    agent['level'] = 'OK'
    assert board.update(rows, both, 3.0) == []
    agent['level'] = 'WARN'  # warns again after a good spell: news
    assert board.update(rows, both, 4.0) == [
        'uav1: WARN: clock of agent 2 off by -0.101 s (/uav1/agent)']
