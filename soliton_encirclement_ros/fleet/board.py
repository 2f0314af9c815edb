"""
The operator's board: what ``fleet console`` shows of each vehicle, and its keys (no rclpy).

Each vehicle's row comes from its bridge's status values (``/diagnostics``, as
:class:`~.live.FleetOperator` keeps them) and how long ago the console heard them:

========== ======================================================================================
mode       PX4's navigation state (``nav_state``: AUTO_LOITER is PX4's Hold)
armed      PX4's arming state
landed     PX4's land detector, as the bridge reports it
battery    PX4's remaining charge
link       s since the console last heard the vehicle's bridge (its status, at least 1 Hz)
warning    the newest warning or error its bridge or agent said, and how long ago
========== ======================================================================================

:class:`Board` turns a snapshot per tick into lines for a log (a vehicle's state changed, a
new warning, a vehicle no longer heard or heard again); :class:`Keys` is the keypad: ``h`` hold
at once, ``e`` engage and ``l`` land only after the confirmation key, ``c`` check, ``q`` quit.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
import math
import re
from typing import Mapping, Optional

CONFIRM_KEY = 'y'
CONFIRM_WINDOW = 10.0  # s an engage or a landing waits for its confirmation key
KEYS = {'h': 'hold', 'e': 'engage', 'l': 'land', 'c': 'check', 'q': 'quit'}
CONFIRMED = ('engage', 'land')  # what needs the confirmation key; hold never does
HELP = 'keys: h hold (at once), e engage, l land (each then y to confirm), c check, q quit'
WARNING_LEVELS = ('WARN', 'ERROR')
_FIGURE = re.compile(r'[-+]?\d+(?:\.\d+)?')


@dataclass(frozen=True)
class Row:
    """One vehicle on the board (text cells; ``heard`` False: nothing heard for too long)."""

    name: str
    heard: bool
    mode: str = '?'
    armed: str = '?'
    landed: str = '?'
    battery: str = '?'
    link: float = math.inf   # s since its bridge was last heard
    phase: str = '?'

    def state(self) -> tuple:
        """Return what a change of is worth a line (not the link age, which always changes)."""
        return (self.heard, self.mode, self.armed, self.landed, self.battery, self.phase)

    def text(self) -> str:
        """Return the row as one line of the log."""
        link = 'never heard' if self.link == math.inf else f'link {self.link:.1f} s'
        return (f'{self.name}: mode {self.mode}, {self.armed.lower()}, landed {self.landed}, '
                f'battery {self.battery}, {self.phase}, {link}')


def _after_number(text: Optional[str]) -> str:
    """Return '4 (AUTO_LOITER)' as 'AUTO_LOITER' (a bridge's nav_state value), else as is."""
    if not text:
        return '?'
    head, _, rest = text.partition(' (')
    return rest.rstrip(')') if rest and head.strip().isdigit() else text


def _battery(text: Optional[str]) -> str:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return '?'
    return f'{value:.0%}' if math.isfinite(value) else '?'


def row(name: str, bridge: Optional[Mapping[str, str]], age: float, stale: float) -> Row:
    """Return the board's row of vehicle ``name`` from its bridge's status values."""
    if bridge is None:
        return Row(name, heard=False)
    return Row(name, heard=age <= stale, mode=_after_number(bridge.get('nav_state')),
               armed=bridge.get('arming_state', '?'), landed=bridge.get('landed', '?'),
               battery=_battery(bridge.get('battery_remaining')), link=age,
               phase=bridge.get('phase', '?'))


@dataclass(frozen=True)
class Said:
    """The newest warning of one vehicle: what its node said and when (steady s)."""

    source: str
    level: str
    message: str
    at: float

    def text(self, now: float) -> str:
        return f'{self.level} {self.message} ({now - self.at:.0f} s ago, {self.source})'


def _gist(message: str) -> str:
    """Return a message without its figures: a warning whose numbers change is not new."""
    return _FIGURE.sub('#', message)


class Board:
    """The fleet's rows, and the log lines their changes make."""

    def __init__(self, names, stale: float) -> None:
        self.names = list(names)
        self.stale = stale
        self.rows: dict[str, Row] = {name: Row(name, heard=False) for name in self.names}
        self.warnings: dict[str, Said] = {}
        self._shown: dict[str, tuple] = {}
        self._said: dict[str, tuple] = {}   # node -> (level, gist) of the warning it said last

    def update(self, rows: Mapping[str, Row], statuses: Mapping[str, list],
               now: float) -> list[str]:
        """
        Take this tick's rows and each vehicle's node statuses; return the new log lines.

        ``statuses`` maps a vehicle to ``(node name, values)`` pairs of its bridge and agent;
        a status at WARN or ERROR whose message is new becomes the vehicle's warning.
        """
        lines = []
        for name in self.names:
            new = rows[name]
            old = self.rows[name]
            self.rows[name] = new
            for source, values in statuses.get(name, ()):
                level = (values or {}).get('level')
                if level in WARNING_LEVELS:
                    message = values.get('message', '')
                    if self._said.get(source) != (level, _gist(message)):  # new, not new figures
                        self._said[source] = (level, _gist(message))
                        self.warnings[name] = Said(source, level, message, now)
                        lines.append(f'{name}: {level}: {message} ({source})')
                    elif self.warnings[name].source == source:  # the same, its newest figures
                        self.warnings[name] = replace(self.warnings[name], message=message)
                else:
                    self._said.pop(source, None)  # that node is fine again: a repeat is news
            if old.heard and not new.heard:
                lines.append(self.unheard_text(new))
            elif new.heard and not old.heard and name in self._shown:
                lines.append(f'{name}: heard again')
            if new.heard and self._shown.get(name) != new.state():
                self._shown[name] = new.state()
                lines.append(new.text())
        return lines

    def unheard_text(self, one: Row) -> str:
        """Return the line that names a vehicle the console cannot hear."""
        since = ('never heard' if one.link == math.inf
                 else f'no status for {one.link:.1f} s')
        return (f'{one.name}: UNHEARD: {since} (more than {self.stale:g} s): its companion, '
                'bridge or link is down')

    def unheard(self) -> list[str]:
        """Return the names of the vehicles not heard within ``stale`` s."""
        return [name for name in self.names if not self.rows[name].heard]

    def table(self, now: float) -> list[str]:
        """Return the board as a header and one line per vehicle (the terminal UI's table)."""
        columns = ('vehicle', 'mode', 'armed', 'landed', 'battery', 'link', 'phase', 'warning')
        cells = []
        for name in self.names:
            one = self.rows[name]
            link = 'never' if one.link == math.inf else f'{one.link:.1f} s'
            if not one.heard:
                link += ' UNHEARD'
            warning = self.warnings.get(name)
            cells.append((name, one.mode, one.armed, one.landed, one.battery, link, one.phase,
                          warning.text(now) if warning else ''))
        widths = [max(len(c[i]) for c in [columns, *cells]) for i in range(len(columns) - 1)]
        return ['  '.join([*(c.ljust(w) for c, w in zip(line, widths)), line[-1]]).rstrip()
                for line in [columns, *cells]]


class Keys:
    """
    The console's keypad: which action a key asks for, and the confirmation of the risky ones.

    :meth:`press` returns ``(action or None, line or None)``: the action to run now (``hold``,
    ``check``, ``quit``, or a confirmed ``engage``/``land``) and what to tell the operator.
    ``h`` acts at once, whatever is pending (and cancels it); ``e`` and ``l`` ask for
    :data:`CONFIRM_KEY` within :data:`CONFIRM_WINDOW` s, and any other key cancels them.
    """

    def __init__(self) -> None:
        self.pending: Optional[tuple[str, float]] = None  # (action, asked at)

    def prompt(self, now: float) -> Optional[str]:
        """Return the question waiting for the confirmation key, if any."""
        if self.pending and now - self.pending[1] <= CONFIRM_WINDOW:
            return (f'{self.pending[0]} every vehicle? press {CONFIRM_KEY} to confirm, any '
                    'other key cancels')
        return None

    def expire(self, now: float) -> Optional[str]:
        """Drop a confirmation not given in time; return the line that says so."""
        if self.pending and now - self.pending[1] > CONFIRM_WINDOW:
            action = self.pending[0]
            self.pending = None
            return f'{action}: not confirmed within {CONFIRM_WINDOW:g} s; nothing was sent'
        return None

    def press(self, key: str, now: float) -> tuple[Optional[str], Optional[str]]:
        """Take one key (or a line's first character); return (action to run, line to say)."""
        key = key.strip()[:1].lower()
        if not key:
            return None, None
        pending, self.pending = self.pending, None
        if pending and now - pending[1] > CONFIRM_WINDOW:
            pending = None
        if pending and key == CONFIRM_KEY:
            return pending[0], None
        action = KEYS.get(key)
        cancelled = (f'{pending[0]}: cancelled; nothing was sent' if pending else None)
        if action in CONFIRMED:
            self.pending = (action, now)
            asked = self.prompt(now)
            return None, asked if cancelled is None else f'{cancelled}\n{asked}'
        if action is None:  # a key that only cancels what was pending is no mistake
            return None, cancelled or f'unknown key {key!r}; {HELP}'
        return action, cancelled
