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


def test_a_clock_stepped_back_drops_the_commands_heard_on_the_old_clock():
    buffer = CommandBuffer(3)
    buffer.receive(0, [2.0, 0.0, 0.0], [0.0, 0.0, 0.3], 9_000 * MS)  # on the old clock
    buffer.receive(1, [1.0, 0.0, 0.0], [0.0] * 3, 900 * MS)          # before the new time
    buffer.advance(9_010 * MS, 10_000 * MS)
    assert buffer.stepped_back_ns == 0 and buffer.linear[0, 0] == 2.0
    # The clock steps back 8 s: vehicle 0's command has no known age, it is dropped at once;
    # vehicle 1's was heard before the new time, its age is known and within the timeout.
    buffer.receive(2, [0.0, 3.0, 0.0], [0.0] * 3, 1_005 * MS)        # on the new clock: kept
    assert list(buffer.advance(1_010 * MS, 10_000 * MS)) == [0]
    assert buffer.stepped_back_ns == 8_000 * MS
    assert not buffer.linear[0].any() and not buffer.angular[0].any()
    assert buffer.linear[2, 1] == 3.0
    assert buffer.linear[1, 0] == 1.0
    assert list(buffer.advance(1_020 * MS, 10_000 * MS)) == [] and buffer.stepped_back_ns == 0
    assert buffer.receive(0, [1.0, 0.0, 0.0], [0.0] * 3, 1_025 * MS) is True  # resumed


def test_a_clock_stepped_back_drops_the_command_even_without_a_timeout():
    buffer = CommandBuffer(1)
    buffer.receive(0, [2.0, 0.0, 0.0], [0.0] * 3, 9_000 * MS)
    buffer.advance(9_010 * MS, 0)
    assert list(buffer.advance(1_000 * MS, 0)) == [0] and not buffer.linear.any()


def test_catch_up_steps_before_a_command_are_not_a_step_back():
    buffer = CommandBuffer(1)
    buffer.advance(1_000 * MS, 500 * MS)
    buffer.receive(0, [2.0, 0.0, 0.0], [0.0] * 3, 1_050 * MS)
    for t in (1_010, 1_020, 1_030, 1_040, 1_050, 1_060):  # one tick's catch-up steps
        assert list(buffer.advance(t * MS, 500 * MS)) == [] and buffer.stepped_back_ns == 0
    assert buffer.linear[0, 0] == 2.0
