"""When a PX4 bridge speaks for its silent agent: px4.presence.AgentWatch."""
from soliton_encirclement_ros.core.controller import BLIND, OK
from soliton_encirclement_ros.px4.presence import AGENT_SILENCE, AgentWatch, LANDED_ANNOUNCED


def test_an_agent_that_speaks_is_never_spoken_for():
    watch = AgentWatch(0.0, 3)
    for k in range(100):
        now = 0.1 * k
        if k % 10 == 0:
            watch.on_status(now, OK, 3)
        said = watch.update(now, airborne=True, have_position=True)
        assert not said.speak and said.log is None


def test_a_killed_agent_is_spoken_for_until_its_vehicle_has_landed():
    watch = AgentWatch(0.0, 3)
    watch.on_status(1.0, OK, 7)   # the agent's own id wins over the namespace's
    assert not watch.update(1.0 + AGENT_SILENCE, True, True).speak
    said = watch.update(1.1 + AGENT_SILENCE, True, True)   # silent since 1.0: killed
    assert said.speak and not said.landed and 'silent for 3.1 s' in said.log
    assert watch.agent_id == 7
    said = watch.update(10.0, True, True)
    assert said.speak and said.log is None   # said once
    said = watch.update(20.0, False, True)   # landed and disarmed: said as landed for a while
    assert said.speak and said.landed
    assert watch.update(20.0 + LANDED_ANNOUNCED - 0.1, False, True).speak
    said = watch.update(20.0 + LANDED_ANNOUNCED + 0.1, False, True)
    assert not said.speak and 'landed' in said.log
    assert not watch.update(30.0, False, True).speak


def test_a_blind_agent_is_spoken_for_and_one_that_speaks_again_is_not():
    watch = AgentWatch(0.0, 2)
    watch.on_status(1.0, BLIND, 2)
    said = watch.update(1.0, True, True)
    assert said.speak and 'blind' in said.log
    watch.on_status(2.0, OK, 2)
    said = watch.update(2.0, True, True)
    assert not said.speak and 'speaks again' in said.log


def test_nothing_is_said_for_a_vehicle_on_the_ground_or_without_a_position():
    watch = AgentWatch(0.0, 4)   # no agent ever heard
    assert not watch.update(AGENT_SILENCE + 1.0, False, True).speak   # on the ground
    assert not watch.update(AGENT_SILENCE + 1.0, True, False).speak   # no placed odometry
    said = watch.update(AGENT_SILENCE + 1.0, True, True)
    assert said.speak and 'no ~/status from its agent' in said.log
    assert not AgentWatch(0.0, None).update(10.0, True, True).speak   # no id to speak with
