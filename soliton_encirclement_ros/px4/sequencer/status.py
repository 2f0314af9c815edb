"""
What ``~/status`` says: its key values, and one sentence at a level, the gravest first.

A stopped heartbeat, a reset that holds the vehicle until ``~/engage``, another setpoint
writer; then a landing or a hold in progress; a failsafe; then what the phase says.
"""
from soliton_encirclement_ros.px4.sequencer.mavlink import ARMING_NAMES, nav_state_text
from soliton_encirclement_ros.px4.sequencer.outputs import ERROR, OK, Status, WARN
from soliton_encirclement_ros.px4.sequencer.phases import Phase


def status_values(seq, now):
    """Return the (key, value) string pairs of ``~/status``."""
    link, trust, mode = seq.link, seq.trust, seq.mode
    values = [('phase', mode.phase.value), ('streaming', str(seq.streaming).lower())]
    if link.status is not None:
        values += [('nav_state', nav_state_text(link.status[0])),
                   ('arming_state', ARMING_NAMES.get(link.status[1], str(link.status[1]))),
                   ('failsafe', str(link.failsafe).lower())]
    if trust.reset is not None:
        values += [('last_reset_jump_m', f'{trust.reset.jump:.2f}'),
                   ('reset_counter', str(trust.sample[0]) if trust.sample else 'none')]
    if seq.writers.nodes:
        values.append(('other_publishers', ', '.join(seq.writers.nodes)))
    if trust.reset is not None:
        values.append(('position_uncertainty_m', f'{trust.position_uncertainty(now):.2f}'))
    if seq.battery.reading is not None:
        values.append(('battery_remaining', f'{seq.battery.reading[0]:.2f}'))
    if link.landed is not None:
        values.append(('landed', link.landed_text()))
    if seq.out_of_ring:
        values.append(('out_of_ring', seq.out_of_ring))
    if seq.area_watch is not None:
        values.append(('safety_area', seq.area_watch.state_text()))
    if mode.phase is Phase.IDLE:
        values.append(('ready', seq.engage_problem(now) or 'yes'))
    else:
        values.append(('ready', f'no: {mode.phase.value}'))
    if mode.phase is Phase.ACTIVE:  # engaged, and whether it flies cmd_vel or holds (why)
        hold = seq.hold_reason(now)
        values.append(('holding', 'no' if hold is None else seq.hold_text(hold)))
    return tuple(values)


def status(seq, now):
    """Return :class:`~.outputs.Status`: what ``~/status`` says now."""
    values = status_values(seq, now)
    stream, mode = seq.stream, seq.mode
    if stream.stopped is not None:
        late = stream.given_up
        if late is not None and late[1] is not None:
            return Status(OK, f'landing confirmed: {late[1]}; offboard heartbeat stopped, '
                          '~/engage starts it again', values)
        return Status(ERROR, 'offboard heartbeat stopped: ' + stream.stopped, values)
    if seq.trust.latched:
        return Status(ERROR, seq.trust.latched_text() + ': holding (zero velocity) until '
                      'the operator calls ~/engage', values)
    if seq.writers.nodes:
        return Status(WARN, seq.writers.problem(), values)
    if mode.outranks_failsafe:
        return mode.describe(seq, now, values)
    failsafe = seq.link.failsafe_text(now)
    if failsafe:
        return Status(WARN, failsafe, values)
    return mode.describe(seq, now, values)
