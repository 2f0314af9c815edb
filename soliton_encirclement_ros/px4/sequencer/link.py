"""
The link to PX4: what it reports (status, failsafe, land detector, odometry arrival), the stream.

:class:`Px4Link` keeps PX4's word and answers questions about it (is it landing, landed,
stale, in a failsafe, the right system); :class:`Stream` tracks the offboard heartbeat (PX4
must hear it for ``warmup`` before OFFBOARD; a landing PX4 did not confirm stops it);
:class:`SetpointWriters` names the other nodes that publish setpoints to the vehicle.
"""
from soliton_encirclement_ros.px4.sequencer.mavlink import (
    ARMING_STATE_ARMED, ARMING_STATE_DISARMED, LANDING_NAV_STATES, nav_state_text,
    NAVIGATION_STATE_AUTO_LAND, NAVIGATION_STATE_OFFBOARD, state_text)


class Px4Link:
    """PX4's reported state with its times (steady-clock seconds), and what it says."""

    def __init__(self, config, target_system=0):
        self.config = config
        self.target_system = int(target_system)
        self.status = None              # (nav_state, arming_state, stamp)
        self.failsafe = False           # vehicle_status.failsafe
        self.preflight_ok = None        # vehicle_status.pre_flight_checks_pass
        self.failsafe_flags = ((), None)  # (names of the active failsafe_flags, stamp)
        self.system_id = None           # vehicle_status.system_id
        self.reported = None            # (nav_state, arming_state, failsafe) last logged
        self.landed = None              # (vehicle_land_detected.landed, stamp)
        self.odom_stamp = None          # the last valid odometry
        # Why PX4 may be unheard, from the node (a px4_msgs of another message version).
        self.hint = None

    def on_status(self, now, nav, arming, system_id, failsafe, preflight_ok):
        """Take vehicle_status; return the line to report when PX4's state changed, or None."""
        self.status = (nav, arming, now)
        self.failsafe = failsafe
        self.preflight_ok = None if preflight_ok is None else bool(preflight_ok)
        self.system_id = None if system_id is None else int(system_id)
        if (nav, arming, failsafe) == self.reported:
            return None
        self.reported = (nav, arming, failsafe)
        return 'PX4 reports ' + self.state_text() + (' (failsafe)' if failsafe else '')

    def state_text(self):
        """PX4's reported mode and arming state (its land detector may be heard first)."""
        if self.status is None:
            return 'no vehicle_status yet'
        nav, arming, _ = self.status
        return state_text(nav, arming)

    def offboard(self):
        """Whether PX4 reports OFFBOARD (False before any vehicle_status)."""
        return self.status is not None and self.status[0] == NAVIGATION_STATE_OFFBOARD

    def armed(self):
        return self.status is not None and self.status[1] == ARMING_STATE_ARMED

    def stale(self, now):
        return self.status is None or now - self.status[2] > self.config.status_timeout

    def odometry_stale(self, now):
        return self.odom_stamp is None or now - self.odom_stamp > self.config.status_timeout

    def heard_after(self, since):
        """PX4's (nav_state, arming_state) if its status was heard at or after ``since``."""
        if self.status is None or self.status[2] < since:
            return None
        return self.status[:2]

    def landing_seen(self, since):
        """
        Return what shows PX4 landing or landed, heard after ``since``, or None.

        The truth is PX4's state, not its acks: a landing mode (AUTO_LAND, ...), DISARMED, or
        vehicle_land_detected ``landed``.
        """
        state = self.heard_after(since)
        if state is not None and (state[0] in LANDING_NAV_STATES
                                  or state[1] == ARMING_STATE_DISARMED):
            return f'PX4 reports {self.state_text()}'
        if self.landed is not None and self.landed[0] and self.landed[1] >= since:
            return 'PX4 reports landed (vehicle_land_detected)'
        return None

    def touchdown(self, since):
        """
        Return what shows the vehicle landed and disarmed, heard after ``since``, or None.

        PX4 disarms by itself once its land detector says landed (COM_DISARM_LAND); its
        ``vehicle_land_detected`` must agree when the bridge hears it.
        """
        state = self.heard_after(since)
        if state is None or state[1] != ARMING_STATE_DISARMED:
            return None
        if self.landed is not None and not self.landed[0]:
            return None
        detector = ', landed' if self.landed is not None else ''
        return f'PX4 reports {self.state_text()}{detector}'

    def airborne(self):
        """Whether PX4 reports armed and its land detector (when heard) not landed."""
        if not self.armed():
            return False
        return self.landed is None or not self.landed[0]

    def landed_text(self):
        return 'unknown' if self.landed is None else str(self.landed[0]).lower()

    def problem(self, now):
        """Why PX4 is not heard well enough to fly: no or stale status or odometry, or None."""
        if self.status is None:
            if self.hint:
                return f'no vehicle_status received from PX4 yet: {self.hint}'
            return ('no vehicle_status received from PX4 yet (is the uXRCE-DDS agent running '
                    'and px4_namespace right?)')
        if now - self.status[2] > self.config.status_timeout:
            return f'vehicle_status is stale ({now - self.status[2]:.1f} s old)'
        if self.odom_stamp is None:
            return 'no valid vehicle_odometry received from PX4 yet'
        if now - self.odom_stamp > self.config.status_timeout:
            return f'vehicle_odometry is stale ({now - self.odom_stamp:.1f} s old)'
        return None

    def system_id_problem(self):
        if (self.system_id is None or self.target_system == 0
                or self.system_id == self.target_system):
            return None
        return (f'target_system is {self.target_system} but this PX4 reports system_id '
                f'{self.system_id} (MAV_SYS_ID): PX4 ignores commands addressed to another '
                'system; set target_system to it')

    def failsafe_text(self, now):
        """'PX4 is in a failsafe (nav_state=..., active: ...)', or None."""
        if not self.failsafe or self.status is None:
            return None
        flags, stamp = self.failsafe_flags
        which = (f'; active: {", ".join(flags)}' if flags and stamp is not None
                 and now - stamp <= self.config.status_timeout else '')
        return f'PX4 is in a failsafe (nav_state={nav_state_text(self.status[0])}{which})'

    def landing_problem(self):
        """Why an engage must not start now: PX4 is landing (armed, in AUTO_LAND), or None."""
        if self.status is None:
            return None
        nav, arming, _ = self.status
        if nav == NAVIGATION_STATE_AUTO_LAND and arming == ARMING_STATE_ARMED:
            return (f'PX4 is landing ({self.state_text()}): the bridge never takes a vehicle '
                    'out of a landing; take over with the RC or the ground station first, or '
                    'engage once it has landed and disarmed')
        return None


class Stream:
    """
    The offboard heartbeat and setpoint stream as PX4 hears it.

    ``start``: when it (re)started; ``feedback_since``: PX4's first feedback after that (the
    warmup counts from it); ``stopped``: why it is stopped (a landing PX4 did not confirm) until
    the next engage; ``given_up``: (since, what showed) for that landing, if it shows after all.
    """

    def __init__(self):
        self.start = None
        self.feedback_since = None
        self.stopped = None
        self.given_up = None

    def track(self, now, streaming):
        """Note when the stream (re)started: PX4 must hear it for warmup before OFFBOARD."""
        if not streaming:
            self.start = self.feedback_since = None
        elif self.start is None:
            self.start, self.feedback_since = now, None

    def heard(self, now):
        """PX4 said something: the first time since the stream started counts for warmup."""
        if self.start is not None and self.feedback_since is None:
            self.feedback_since = now

    def warmed_up(self, now, warmup):
        return self.feedback_since is not None and now - self.feedback_since >= warmup

    def stop(self, reason, since):
        """Stop the heartbeat (a landing not confirmed since ``since``) until the next engage."""
        self.given_up = (since, None)
        self.stopped = reason

    def restart(self):
        """
        Let an engage start the heartbeat again; return the line to report, or None.

        PX4 must hear it for warmup again before OFFBOARD.
        """
        if self.stopped is None:
            return None
        self.stopped = self.given_up = None
        self.start = self.feedback_since = None
        return 'offboard heartbeat restarted for this engage'


class SetpointWriters:
    """The other nodes that publish on this vehicle's ``/fmu/in/`` setpoint topics."""

    def __init__(self):
        self.nodes = ()

    def update(self, nodes, topics):
        """
        Take the writers seen now; return (warning, info) lines to report (each may be None).

        A new one is warned about once, naming it; that they all left is said once.
        """
        nodes = tuple(sorted(set(nodes)))
        if nodes == self.nodes:
            return None, None
        new = [n for n in nodes if n not in self.nodes]
        self.nodes = nodes
        if new:
            return (f'another node publishes setpoints to this vehicle ({topics}): '
                    f'{", ".join(new)}; its setpoints interleave with this bridge\'s: engage '
                    'is refused and an engaged vehicle holds (zero velocity) while it is '
                    'there'), None
        if not nodes:
            return None, 'no other node publishes setpoints to this vehicle any more'
        return None, None

    def problem(self):
        if not self.nodes:
            return None
        return ('another node publishes setpoints to this vehicle: '
                + ', '.join(self.nodes) + '; stop it first (one bridge per vehicle)')
