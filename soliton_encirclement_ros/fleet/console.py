"""
``fleet console FILE``: the operator's standing console, connected before it is needed.

It starts ROS once, makes the clients of every bridge's ``~/engage``, ``~/land`` and ``~/hold``
at once (:meth:`~.live.FleetOperator.prepare`) and keeps them, so that an action goes out the
moment its key is pressed: a :class:`~.live.FleetAction` calls every discovered bridge
concurrently (none waits for another's answer) and judges each vehicle by what its bridge
reports, as the one-shot ``fleet`` commands do. The screen shows each vehicle's state
(:mod:`.board`); the main loop waits for DDS at most :data:`TICK` s before it looks at the keys,
and never for one vehicle.

On a terminal it is a curses board redrawn at 5 Hz; without one (or with ``--plain``) it prints
a line per change (a vehicle's state, a new warning, a vehicle unheard or heard again, each
action's lines) and reads one command per line from stdin (a line's first character is its key;
stdin closed quits).
"""
from __future__ import annotations

import collections
import os
import queue
import sys
import threading
import time
from typing import Optional

from soliton_encirclement_ros.fleet.board import Board, HELP, Keys, row
from soliton_encirclement_ros.fleet.checks import render
from soliton_encirclement_ros.fleet.live import FleetAction, FleetOperator

ACTIONS = ('engage', 'land', 'hold')
TICK = 0.02     # s at most between two looks at the keys (a key wakes the line mode at once)
REDRAW = 0.2    # s between two redraws of the terminal UI (5 Hz)
LATE_CALLS = 2.0  # s an action still calls a bridge discovered after its key


class Console:
    """The fleet as one node hears it, the board, the keys, and the action under way."""

    def __init__(self, node, fleet, say, stale: float = 3.0, timeout: float = 60.0,
                 wait: float = 8.0, started: Optional[float] = None) -> None:
        self.fleet, self.say = fleet, say
        self.stale, self.timeout, self.wait = stale, timeout, wait
        self.operator = FleetOperator(node, fleet)
        self.operator.prepare(ACTIONS)  # discovered once, before any key
        self.board = Board([v.name for v in fleet.vehicles], stale)
        self.keys = Keys()
        self.started = time.monotonic() if started is None else started  # the command's start
        self.discovered = False
        self.action = None           # the FleetAction under way
        self._pressed = 0.0          # steady time of its key
        self._announced: set = set()  # vehicles whose call of it has been said
        self.quit = False

    def press(self, key: str) -> None:
        """Take one key (or line) from the operator and act on it now."""
        now = time.monotonic()
        action, line = self.keys.press(key, now)
        for text in (line or '').splitlines():
            self.say(text)
        if action == 'quit':
            self.quit = True
        elif action == 'check':
            for text in render(self.operator.check(self.stale)).splitlines():
                self.say(text)
        elif action is not None:
            self.act(action, now)

    def act(self, action: str, pressed: float) -> None:
        """Start ``action`` on every vehicle at once (an engage only after a passing check)."""
        if action == 'engage':
            report = self.operator.check(self.stale)
            if not report.passed:
                for text in render(report).splitlines():
                    self.say(text)
                self.say('engage refused: the pre-flight check failed; nothing was engaged')
                return
        if self.action is not None and not self.action.done:
            for text in self.action.finish(f' before the {action} superseded it'):
                self.say(text)
        self.action, self._pressed, self._announced = (
            FleetAction(self.operator, action, discover=LATE_CALLS), pressed, set())
        if not self.action.called_at:
            self.say(f'{action}: no bridge found to call yet; calling each as it appears for '
                     f'{LATE_CALLS:g} s')
        self._say_calls()

    def _say_calls(self) -> None:
        run = self.action
        new = [name for name in run.called_at if name not in self._announced]
        if not new:
            return
        self._announced.update(new)
        latest = max(run.called_at[name] for name in new) - self._pressed
        waiting = [v.name for v in self.fleet.vehicles if v.name not in run.calls]
        self.say(f'{run.action}: called ' + ', '.join(new) + f' {latest * 1e3:.0f} ms after '
                 'the key' + (f'; not discovered yet: {", ".join(waiting)}' if waiting else ''))

    def tick(self) -> None:
        """Advance the action under way, the board and the discovery; say what changed."""
        now = time.monotonic()
        expired = self.keys.expire(now)
        if expired:
            self.say(expired)
        if self.action is not None:
            for text in self.action.update():
                self.say(text)
            self._say_calls()
            if self.action.done:
                self._end_action()
            elif now - self._pressed > self.timeout:
                for text in self.action.finish(f' within {self.timeout:g} s'):
                    self.say(text)
                self._end_action()
        rows, statuses = {}, {}
        for vehicle in self.fleet.vehicles:
            bridge = self.operator.heard(vehicle.bridge)
            age = now - bridge[1] if bridge else float('inf')
            rows[vehicle.name] = row(vehicle.name, bridge[0] if bridge else None, age,
                                     self.stale)
            statuses[vehicle.name] = [(node, heard[0]) for node, heard in (
                (vehicle.bridge, bridge), (vehicle.agent, self.operator.heard(vehicle.agent)))
                if heard is not None]
        for text in self.board.update(rows, statuses, now):
            self.say(text)
        if not self.discovered:
            self._discovery(now)

    def _end_action(self) -> None:
        run, self.action = self.action, None
        failed = [name for name, (ok, _) in run.verdicts.items() if not ok]
        self.say(f'{run.action}: ' + ('confirmed by every vehicle' if not failed else
                                      f'FAILED for {", ".join(failed)}')
                 + f' ({time.monotonic() - self._pressed:.1f} s after the key)')

    def _discovery(self, now: float) -> None:
        missing = self.operator.missing_services(ACTIONS)
        unheard = self.board.unheard()
        placed = self.operator.positions_known()
        if not missing and not unheard and placed:
            self.discovered = True
            self.say(f'fleet console: discovery took {now - self.started:.1f} s since the '
                     "command started: every vehicle heard, its odometry and its bridge's "
                     f'services found; {HELP}')
        elif now - self.started > self.wait:
            self.discovered = True
            self.say(f'fleet console: after {self.wait:g} s, '
                     + '; '.join(part for part in (
                         'not heard: ' + ', '.join(unheard) if unheard else '',
                         'services not found: ' + ', '.join(missing) if missing else '',
                         '' if placed else 'odometry not heard of every vehicle')
                         if part)
                     + f' (calls reach them once they appear); {HELP}')
            for name in unheard:
                self.say(self.board.unheard_text(self.board.rows[name]))

    def undecided_text(self) -> str:
        """Return the line a quit says of the action under way, if any ('' if none)."""
        if self.action is None:
            return ''
        return (f'fleet console: the {self.action.action} requests already sent go on in the '
                'bridges; not yet confirmed: ' + ', '.join(
                    v.name for v in self.fleet.vehicles if v.name not in self.action.verdicts))


class LineUi:
    """Plain lines: what changed on stdout, a command per line from ``stream``."""

    def __init__(self, node, stream=None, out=None) -> None:
        self._out = out or sys.stdout
        self._lines: queue.SimpleQueue = queue.SimpleQueue()
        # a key wakes the executor at once rather than at its next timeout
        self._wake = node.create_guard_condition(lambda: None)
        self._thread = threading.Thread(target=self._read, args=(stream or sys.stdin,),
                                        daemon=True, name='console-stdin')
        self._thread.start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, ''):
            self._lines.put(line)
            self._wake.trigger()
        self._lines.put(None)
        self._wake.trigger()

    def keys(self) -> list:
        """Return the lines typed since the last call (None: stdin was closed)."""
        keys = []
        while True:
            try:
                keys.append(self._lines.get_nowait())
            except queue.Empty:
                return keys

    def say(self, line: str) -> None:
        print(line, file=self._out, flush=True)

    def show(self, console: Console, now: float) -> None:
        """Nothing to redraw: every change was said as a line."""


class CursesUi:
    """A curses board: the vehicles' table, the prompt or the keys, the newest log lines."""

    def __init__(self, screen, title: str) -> None:
        import curses
        self._curses, self._screen, self._title = curses, screen, title
        screen.nodelay(True)
        try:
            curses.curs_set(0)
        except curses.error:
            pass  # a terminal that cannot hide its cursor
        self._log: collections.deque = collections.deque(maxlen=500)
        self._drawn = -float('inf')

    def keys(self) -> list:
        keys = []
        while True:
            code = self._screen.getch()
            if code == -1:
                return keys
            if 0 <= code < 256:
                keys.append(chr(code))

    def say(self, line: str) -> None:
        self._log.append(f'{time.strftime("%H:%M:%S")} {line}')
        self._drawn = -float('inf')  # show it now

    def show(self, console: Console, now: float) -> None:
        """Redraw at most every :data:`REDRAW` s, or at once after a new log line."""
        if now - self._drawn < REDRAW:
            return
        self._drawn = now
        height, width = self._screen.getmaxyx()
        lines = [f'{self._title}  {time.strftime("%H:%M:%S")}', '',
                 *console.board.table(now), '',
                 console.keys.prompt(now) or HELP, '']
        room = max(0, height - len(lines))
        lines += list(self._log)[-room:] if room else []
        self._screen.erase()
        for y, text in enumerate(lines[:height]):
            try:
                self._screen.addnstr(y, 0, text, max(1, width - 1))
            except self._curses.error:
                pass  # the last cell of a small window
        self._screen.refresh()


def run(args, fleet, stop, started: Optional[float] = None) -> int:
    """Run the console until ``q``, a closed stdin (line mode), SIGINT or SIGTERM; exit 0."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f'fleet_console_{os.getpid()}')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    plain = args.plain or not (sys.stdin.isatty() and sys.stdout.isatty())
    title = f'fleet console: {len(fleet.vehicles)} vehicles from {fleet.path}'

    def loop(ui) -> Console:
        console = Console(node, fleet, ui.say, stale=args.stale, timeout=args.timeout,
                          wait=args.wait, started=started)
        while not console.quit and not stop.requested:
            executor.spin_once(timeout_sec=TICK)
            for key in ui.keys():
                if key is None:
                    ui.say('fleet console: stdin closed; quitting')
                    console.quit = True
                    break
                console.press(key)
            console.tick()
            ui.show(console, time.monotonic())
        return console

    try:
        if plain:
            ui = LineUi(node)
            ui.say(f'{title}; discovering (keys work already)')
            console = loop(ui)
        else:
            import curses
            console = curses.wrapper(lambda screen: loop(CursesUi(screen, title)))
        if stop.requested:
            print('fleet console: interrupted', file=sys.stderr, flush=True)
        left = console.undecided_text()
        if left:
            print(left, flush=True)
        return 0
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
