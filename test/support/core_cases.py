"""The hand-computed cases of the controller core's unit tests: gains, placements, messages."""
import math

import numpy as np

from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, receive_target_state, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams

P = ControllerParams.preset('reference')  # the hand-computed cases use the reference gains
ORIGIN = np.zeros(3)


def on_circle(angle, radius=20.0):
    return np.array([radius * math.cos(angle), radius * math.sin(angle), 0.0])


def agent_msg(agent_id, angle, seq=0, u=0.0, u_ss=0.0, velocity=(0.0, 0.0, 0.0)):
    return AgentBroadcast(agent_id, seq, 0, on_circle(angle), velocity, u, u_ss)


def with_target(state, rx=0.0, velocity=(0.0, 0.0, 0.0), **kw):
    target = TargetBroadcast(seconds_to_ns(rx), ORIGIN, velocity, **kw)
    return receive_target_state(state, target, rx, P)
