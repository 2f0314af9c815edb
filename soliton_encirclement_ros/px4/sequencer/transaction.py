"""
A vehicle command as a transaction: sent, acknowledged, confirmed by PX4's state, or timed out.

One :class:`CommandChannel` carries the engage's DO_SET_MODE and ARM, the landing's NAV_LAND and
the hold's DO_SET_MODE alike: it resends an unconfirmed command every ``command_retry``, reads
PX4's acks (TEMPORARILY_REJECTED is retried, a final refusal is kept as the denial for the phase
to act on) and says what PX4 answered. Acks only inform: a command counts once PX4's reported
state confirms it, which the phase that sent it decides.
"""
from dataclasses import dataclass
import math

from soliton_encirclement_ros.px4.sequencer.mavlink import (
    COMMAND_NAMES, command_text, result_text, VEHICLE_CMD_NAV_LAND, VEHICLE_CMD_RESULT_ACCEPTED,
    VEHICLE_CMD_RESULT_IN_PROGRESS, VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED,
    VehicleCommandRequest)
from soliton_encirclement_ros.px4.sequencer.outputs import TickOutput


@dataclass
class CommandTransaction:
    """Command sent and not yet confirmed."""

    request: VehicleCommandRequest
    sent_at: float
    sent: int = 1                 # times sent
    accepted: bool = False        # PX4 answered ACCEPTED or IN_PROGRESS
    last_result: int | None = None
    refusals: int = 0             # final refusals in a row (a NAV_LAND's: see on_ack)

    def sent_text(self):
        """``'sent 3 times'``."""
        return f'sent {self.sent} time{"s" if self.sent > 1 else ""}'


class CommandChannel:
    """The one command in flight (``pending``) and PX4's final refusal of it (``denial``)."""

    def __init__(self, config):
        self.config = config
        self.pending = None   # CommandTransaction: sent, not yet confirmed
        self.denial = None    # (command, reason): a final refusal from vehicle_command_ack

    def begin(self, request, now):
        """Start a transaction for ``request``, sent now (the caller sends it)."""
        self.pending = CommandTransaction(request, now)
        self.denial = None

    def reset(self):
        """Nothing in flight and no refusal kept: a new engage starts clean."""
        self.pending = None
        self.denial = None

    def end(self):
        """Close the transaction: its command was confirmed, or its request ended."""
        self.pending = None

    def take_denial(self):
        """Return the kept refusal (command, reason) once, or None."""
        denial, self.denial = self.denial, None
        return denial

    def send(self, now, wanted):
        """Send ``wanted`` now unless it was sent less than ``command_retry`` ago."""
        pending = self.pending
        if pending is not None and pending.request.command == wanted.command:
            if now - pending.sent_at < self.config.command_retry:
                return TickOutput()
            pending.sent_at, pending.sent = now, pending.sent + 1
            return TickOutput(commands=(wanted,),
                              info=(f'resending {COMMAND_NAMES[wanted.command]} (attempt '
                                    f'{pending.sent})',))
        self.pending = CommandTransaction(wanted, now)
        return TickOutput(commands=(wanted,), info=(f'sending {COMMAND_NAMES[wanted.command]}',))

    def on_ack(self, command, result, target_system=None, target_component=None,
               source=(None, None)):
        """
        Take a vehicle_command_ack; return a line to report, or None.

        Acks addressed to another sender (``target_system`` / ``target_component`` not ours,
        ``source``) are ignored. TEMPORARILY_REJECTED is retried; any other refusal of the
        pending command is kept as the denial.
        """
        ours_system, ours_component = source
        if ((ours_system is not None and target_system is not None
             and target_system != ours_system)
                or (ours_component is not None and target_component is not None
                    and target_component != ours_component)):
            return None
        pending = self.pending
        if pending is None or command != pending.request.command:
            return None
        pending.last_result = result
        if result == VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED:
            return (f'PX4 temporarily rejected {COMMAND_NAMES.get(command, command)}'
                    f': retrying every {self.config.command_retry:g} s')
        if result in (VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_IN_PROGRESS):
            pending.accepted = True
            pending.refusals = 0
            return None
        pending.refusals += 1
        if command == VEHICLE_CMD_NAV_LAND and (pending.refusals < 2 or pending.sent < 2):
            # Acks carry no request id: one refusal may answer an earlier attempt, or come
            # late. The landing's truth is PX4's state; NAV_LAND is sent again at once, and a
            # refusal counts only when two sends in a row are refused.
            pending.sent_at = -math.inf
            return (f'PX4 refused NAV_LAND ({result_text(result)}): sending it '
                    'again (an ack may answer an earlier attempt)')
        self.denial = (command, f'PX4 refused {command_text(command)}: {result_text(result)}')
        return None
