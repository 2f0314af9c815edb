"""
When a PX4 bridge speaks for its vehicle on the swarm topic: its agent is silent.

An agent broadcasts its vehicle's state, or its presence when its controller is out. A crashed
agent process, a hung one, or one without odometry says nothing, and the others would know the
vehicle only where they last heard it. The bridge holds that vehicle and has PX4's position, so
while its agent is silent it announces the vehicle's presence itself (``member`` 0, the
incarnation :data:`~soliton_encirclement_ros.core.identity.BRIDGE_INCARNATION`, which no agent
process has), ``landed`` once PX4 says the vehicle is on the ground or disarmed, and stops a
little after the landing, or as soon as its agent speaks again.

The agent is judged by its ``~/status`` (every second, and on change): silent when none came
for :data:`AGENT_SILENCE`, or when it reports ``blind`` (no fresh odometry: no broadcast).
Pure Python, no rclpy: the node feeds it and publishes what it returns.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Optional

from soliton_encirclement_ros.core.controller import BLIND

AGENT_SILENCE = 3.0     # s without its agent's ~/status (published every 1 s): the agent is silent
LANDED_ANNOUNCED = 2.0  # s a landed vehicle is still announced (as landed) before the bridge stops
PRESENCE_PERIOD = 0.1   # s between two presence broadcasts (an agent's control period)


@dataclass
class Announcement:
    """This period: ``speak`` a presence (``landed`` or not); ``log`` a line (or None)."""

    speak: bool
    landed: bool = False
    log: Optional[str] = None


class AgentWatch:
    """Whether the agent flying this vehicle is silent, and so whether the bridge speaks for it."""

    def __init__(self, started: float, namespace_id: Optional[int],
                 silence: float = AGENT_SILENCE) -> None:
        self.started = float(started)
        self.silence = float(silence)
        self.agent_id = namespace_id  # what the namespace implies, until its agent says
        self._heard: Optional[tuple[float, str]] = None  # (when, its state)
        self._speaking = False
        self._landed_since = math.inf

    def on_status(self, now: float, state: str, agent_id: Optional[int]) -> None:
        """Take the agent's ``~/status``: its ``state`` and ``agent_id`` values."""
        self._heard = (float(now), state)
        if agent_id:
            self.agent_id = int(agent_id)

    def silence_reason(self, now: float) -> Optional[str]:
        """Why the agent says nothing on the swarm topic now, or None while it speaks."""
        if self._heard is None:
            if now - self.started > self.silence:
                return f'no ~/status from its agent in the {now - self.started:.0f} s since start'
            return None
        heard, state = self._heard
        if now - heard > self.silence:
            return f'its agent has been silent for {now - heard:.1f} s (no ~/status)'
        if state == BLIND:
            return 'its agent is blind (no fresh odometry), so silent on the swarm topic'
        return None

    def update(self, now: float, airborne: bool, have_position: bool) -> Announcement:
        """
        Decide this period's presence broadcast.

        ``airborne``: PX4 reports the vehicle armed and not landed. A vehicle that was never
        announced and is on the ground needs no announcement; one that was is announced as
        ``landed`` for :data:`LANDED_ANNOUNCED`, then no more. Without a position (no placed
        odometry) nothing can be said.
        """
        reason = self.silence_reason(now)
        if reason is None or self.agent_id is None or not have_position:
            if self._speaking:
                self._speaking = False
                return Announcement(False, log='its agent speaks again: the bridge no longer '
                                    "announces this vehicle's presence" if reason is None else
                                    None)
            return Announcement(False)
        if airborne:
            self._landed_since = math.inf
        elif self._landed_since == math.inf:
            self._landed_since = now
        landed = not airborne
        if landed and (not self._speaking or now - self._landed_since > LANDED_ANNOUNCED):
            if self._speaking:
                self._speaking = False
                return Announcement(False, log='the vehicle has landed: the bridge no longer '
                                    'announces its presence')
            return Announcement(False)
        log = None
        if not self._speaking:
            self._speaking = True
            log = (f"{reason}: the bridge announces this vehicle's presence (agent_id "
                   f"{self.agent_id}) from PX4's odometry, so that the others keep clear of it")
        return Announcement(True, landed, log)
