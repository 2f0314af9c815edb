"""The command buffer of the mobility nodes, pure: when a command takes effect, the timeout."""
import numpy as np

from velocity_mobility_ros.core.commands import CommandBuffer

MS = 1_000_000  # ns


def test_a_command_takes_effect_from_the_first_step_after_its_arrival():
    buffer = CommandBuffer(2)
    assert buffer.receive(1, [1.0, 2.0, 3.0], [0.0, 0.0, 0.5], 10 * MS) is False
    buffer.advance(10 * MS, 0)  # a step at the arrival instant: not yet
    np.testing.assert_array_equal(buffer.linear, np.zeros((2, 3)))
    np.testing.assert_array_equal(buffer.newest_linear[1], [1.0, 2.0, 3.0])
    buffer.advance(20 * MS, 0)
    np.testing.assert_array_equal(buffer.linear[1], [1.0, 2.0, 3.0])
    assert buffer.angular[1, 2] == 0.5 and not buffer.linear[0].any()


def test_a_newer_command_does_not_lose_one_that_was_already_due():
    buffer = CommandBuffer(1)
    buffer.receive(0, [1.0, 0.0, 0.0], [0.0] * 3, 10 * MS)
    buffer.receive(0, [2.0, 0.0, 0.0], [0.0] * 3, 15 * MS)  # the first was due: it took effect
    np.testing.assert_array_equal(buffer.linear[0], [1.0, 0.0, 0.0])
    buffer.receive(0, [3.0, 0.0, 0.0], [0.0] * 3, 15 * MS)  # same instant: replaces the newest
    buffer.advance(20 * MS, 0)
    np.testing.assert_array_equal(buffer.linear[0], [3.0, 0.0, 0.0])


def test_the_timeout_zeroes_once_and_a_new_command_resumes():
    buffer = CommandBuffer(2)
    buffer.receive(0, [1.0, 0.0, 0.0], [0.0, 0.0, 0.2], 0)
    buffer.receive(1, [0.0, 1.0, 0.0], [0.0] * 3, 0)
    buffer.advance(10 * MS, 500 * MS)
    assert list(buffer.advance(500 * MS, 500 * MS)) == []  # exactly the timeout: still live
    buffer.receive(1, [0.0, 1.0, 0.0], [0.0] * 3, 400 * MS)
    assert list(buffer.advance(510 * MS, 500 * MS)) == [0]
    assert not buffer.linear[0].any() and not buffer.angular[0].any()
    assert list(buffer.advance(2000 * MS, 500 * MS)) == [1]
    assert list(buffer.advance(3000 * MS, 500 * MS)) == []  # reported once
    assert buffer.timed_out.tolist() == [True, True]
    assert buffer.receive(0, [0.5, 0.0, 0.0], [0.0] * 3, 3000 * MS) is True
    assert buffer.timed_out.tolist() == [False, True]
    assert list(buffer.advance(3010 * MS, 0)) == []  # 0 = no timeout
    np.testing.assert_array_equal(buffer.linear[0], [0.5, 0.0, 0.0])


def test_rejected_commands_are_counted_per_vehicle():
    buffer = CommandBuffer(3)
    assert [buffer.reject(2), buffer.reject(2), buffer.reject(0)] == [1, 2, 1]
    assert buffer.rejected.tolist() == [1, 0, 2]
