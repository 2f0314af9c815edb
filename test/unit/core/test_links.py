"""core.links: what a receiver hears from each sender (loss, age, restarts, clock offset)."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core import links as links_module
from soliton_encirclement_ros.core.comms import ImpairedChannel
from soliton_encirclement_ros.core.links import (
    _column_medians, LinkMonitor, offset_summary, offset_warning, parse_link_text)


def test_seq_gaps_are_losses_and_a_new_incarnation_is_a_restart():
    links = LinkMonitor(window=10.0)
    for seq in (0, 1, 2, 5, 6, 9):  # 3, 4, 7, 8 lost
        links.record(4, 11, seq, 0.1 * seq, 0.1 * seq + 0.002)
    links.record(4, 12, 0, 1.0, 1.002)  # restarted: seq 0 again, no loss
    links.record(4, 12, 1, 1.1, 1.102)
    figures = links.figures(1.2)[4]
    assert (figures.heard, figures.lost, figures.restarts) == (8, 4, 1)
    assert figures.loss == pytest.approx(4 / 12)
    assert figures.age_mean == pytest.approx(0.002)
    assert figures.last_heard == pytest.approx(1.102)


def test_batches_in_one_call_give_the_same_figures_as_one_at_a_time():
    rng = np.random.default_rng(3)
    senders = rng.integers(1, 6, 400)
    seqs = np.zeros(400, dtype=np.int64)
    counters = {}
    for i, s in enumerate(senders):
        counters[s] = counters.get(s, -1) + 1 + int(rng.random() < 0.2)  # some skipped
        seqs[i] = counters[s]
    stamps = np.arange(400) * 0.01
    raw = stamps + 0.005 + 0.01 * rng.random(400)
    one, batch = LinkMonitor(), LinkMonitor()
    for i in range(400):
        one.record(senders[i], 1, seqs[i], stamps[i], raw[i])
    for chunk in np.array_split(np.arange(400), 17):
        batch.record(senders[chunk], np.ones(chunk.size, dtype=np.int64), seqs[chunk],
                     stamps[chunk], raw[chunk])
    assert one.figures(4.0) == batch.figures(4.0)
    expected_lost = sum(int(np.sum(np.diff(seqs[senders == s]) - 1)) for s in range(1, 6))
    assert expected_lost > 50
    assert sum(f.lost for f in batch.figures(4.0).values()) == expected_lost
    assert sum(f.heard for f in batch.figures(4.0).values()) == 400


def test_states_kept_for_later_give_the_figures_of_taking_each_call_in_at_once(monkeypatch):
    # An agent's ticks: its records wait until the figures (or deaf) take them in together.
    rng = np.random.default_rng(8)

    def run(pending):
        monkeypatch.setattr(links_module, 'PENDING_RECORDS', pending)
        links, seq, out = LinkMonitor(window=3.0), {}, []
        for tick in range(1, 700):
            now = tick * 0.01
            usual = 0.97 if tick < 350 else 0.3  # the usual tick: every sender, in order
            senders = (np.arange(1, 9) if rng.random() < usual
                       else rng.permutation(9)[:int(rng.integers(1, 9))] + 1)
            count = senders.size
            incarnation = np.where(rng.random(count) < 0.02, 7, 1).astype(np.int64)
            for s in senders.tolist():
                seq[s] = seq.get(s, -1) + 1 + int(rng.random() < 0.1)
            seqs = np.array([seq[s] for s in senders.tolist()], dtype=np.int64)
            if tick >= 350 or rng.random() < 0.02:
                seqs[rng.random(count) < 0.03] = -1  # rejected stamps: the offset only
            stamp = now - 0.01 + 0.001 * rng.random(count)
            raw = np.full(count, now - 0.01)
            links.record(senders, incarnation, seqs, stamp, raw, raw + 0.002)
            if tick % 97 == 0:
                links.deaf()
            if tick % 100 == 0:
                out.append(links.figures(now))
        return out

    as_rows = []
    take_in_rows = LinkMonitor._take_in_rows
    monkeypatch.setattr(LinkMonitor, '_take_in_rows', lambda links, pending: as_rows.append(
        take_in_rows(links, pending)) or as_rows[-1])
    kept, state = links_module.PENDING_RECORDS, rng.bit_generator.state
    every_call = run(1)
    rng.bit_generator.state = state
    later = run(kept)
    assert later == every_call
    assert as_rows.count(True) >= 5  # calls of the same senders taken in as a matrix
    assert sum(f.lost for f in later[-1].values()) > 0
    assert sum(f.restarts for f in later[-1].values()) > 0


def test_offset_is_the_senders_clock_minus_this_one_despite_late_outliers():
    links = LinkMonitor(window=5.0)
    rng = np.random.default_rng(1)
    for k in range(500):  # 5 s at 100 Hz; the sender's clock is 0.3 s ahead
        t = 0.01 * k
        latency = 0.0005 + 0.002 * rng.random() + (0.4 if k % 50 == 0 else 0.0)
        links.record(2, 1, k, t + 0.3, t + latency)
        if k % 100 == 99:
            figures = links.figures(t)
    assert figures[2].offset == pytest.approx(0.3, abs=0.002)
    assert figures[2].age_max == pytest.approx(-0.3 + 0.4, abs=0.003)
    warning = offset_warning(7, figures[2], 0.1)
    assert 'the clock of agent 2 is 0.29' in warning and 'ahead of this one' in warning
    assert 'max_clock_offset 0.1 s' in warning
    assert offset_warning(7, figures[2], 0.5) is None
    assert 'synchronise the companion' in warning


def test_on_sim_time_an_offset_is_a_lagging_clock_not_companions_to_synchronise():
    """swarm_sim --processes: every node on /clock, one host: no clocks to synchronise."""
    links = LinkMonitor(window=5.0)
    for k in range(100):
        links.record(2, 1, k, 0.01 * k + 0.3, 0.01 * k)
    warning = offset_warning(7, links.figures(0.99)[2], 0.1, sim_time=True)
    assert warning.startswith('agent 7: agent 2 stamps its states 0.300 s ahead of this '
                              "node's /clock (max_clock_offset 0.1 s): every node runs on "
                              '/clock (use_sim_time)')
    assert 'synchronise' not in warning and 'chrony' not in warning


def test_emulated_loss_and_delay_read_back_within_sampling_error():
    channel = ImpairedChannel(loss=0.2, delay=0.1, seed=5, agent_id=3)
    links = LinkMonitor(window=100.0)
    for k in range(5000):
        t = 0.01 * k
        channel.receive(('agent', (1, k, t)), t)
        due = channel.due(t)
        if due:
            arrival = np.array([rx for _, rx in due])
            seq = np.array([m[1][1] for m, _ in due])
            stamp = np.array([m[1][2] for m, _ in due])
            links.record(np.ones(seq.size, dtype=np.int64), np.ones(seq.size, dtype=np.int64),
                         seq, stamp, arrival - channel.delay, arrival)
    figures = links.figures(50.0)[1]
    sigma = math.sqrt(0.2 * 0.8 / 5000)
    assert abs(figures.loss - 0.2) < 4 * sigma
    assert figures.age_mean == pytest.approx(0.1, abs=1e-9)
    assert figures.offset == pytest.approx(0.0, abs=1e-9)  # the emulated delay is no offset


def test_old_periods_leave_the_window_and_rejected_stamps_count_for_the_offset_only():
    links = LinkMonitor(window=2.0)
    links.record(9, 1, 0, 0.0, 0.01)
    links.figures(1.0)
    links.record(9, 1, -1, 2.8, 2.0)  # stamped 0.8 s ahead: rejected, offset only
    figures = links.figures(2.5)[9]
    assert (figures.heard, figures.lost) == (1, 0)
    assert figures.offset == pytest.approx((0.8 - 0.01) / 2)  # median of the two periods
    later = links.figures(3.2)
    assert later[9].heard == 0 and math.isnan(later[9].age_mean)
    assert links.figures(10.0) == {}


def test_text_reads_back():
    links = LinkMonitor()
    links.record(3, 1, 0, 0.0, 0.25)
    links.record(3, 1, 2, 0.1, 0.35)
    figures = links.figures(1.0)[3]
    parsed = parse_link_text(figures.text())
    assert parsed['heard'] == 2 and parsed['lost'] == 1
    assert parsed['loss'] == pytest.approx(1 / 3, abs=1e-4)
    assert parsed['offset'] == pytest.approx(-0.25) and parsed['age_max'] == pytest.approx(0.25)


def test_window_must_be_positive():
    with pytest.raises(ValueError, match='link window must be > 0 s, got 0'):
        LinkMonitor(window=0)


def test_what_a_deaf_receiver_missed_is_neither_loss_nor_a_restart():
    """A failed agent takes in no states; its outage is not its link's loss (issue 36)."""
    links = LinkMonitor(window=10.0)
    for seq in (0, 1, 2):
        links.record(4, 11, seq, 0.1 * seq, 0.1 * seq + 0.002)
    links.deaf()  # failed for a while: seq 3..49 were sent, none taken in
    for seq in (50, 51, 53):  # 52 lost after it recovered
        links.record(4, 11, seq, 0.1 * seq, 0.1 * seq + 0.002)
    figures = links.figures(6.0)[4]
    assert (figures.heard, figures.lost, figures.restarts) == (6, 1, 0)


def test_the_offsets_median_is_nanmedians_of_each_sender():
    rng = np.random.default_rng(1)
    for _ in range(500):
        values = rng.normal(size=(int(rng.integers(1, 12)), 4)) * 10.0 ** rng.integers(-9, 3)
        values[rng.random(values.shape) < 0.4] = np.nan
        medians, heard = _column_medians(values)
        for column in np.flatnonzero(heard):
            assert (np.float64(np.nanmedian(values[:, column])).tobytes()
                    == medians[column].tobytes())
        assert not (~np.isnan(values[:, ~heard])).any()


def test_states_that_arrive_late_are_named_lag_not_a_clock_to_synchronise():
    """
    A sender 'behind' is what lag looks like between processes on one clock: say lag first.

    A busy host took each state in 4.2 s after it was stamped: that used to read "the clock of
    agent 2 is 4.200 s behind this one ... synchronise the companion computers' clocks".
    """
    links = LinkMonitor(window=5.0)
    for k in range(100):
        links.record(2, 1, k, 0.01 * k, 0.01 * k + 4.2)
    figures = links.figures(5.19)[2]
    warning = offset_warning(7, figures, 0.1)
    assert warning.startswith('agent 7: the states of agent 2 arrive 4.200 s after their stamps '
                              'even at their fastest (max_clock_offset 0.1 s): lag'), warning
    assert 'the clock of agent 2' not in warning and 'synchronise' not in warning
    assert offset_summary(figures) == 'states of agent 2 4.200 s late (lag or clock)'
    links.record(3, 1, 0, 10.3, 10.0)  # a sender ahead can only be a clock
    ahead = links.figures(10.5)[3]
    assert offset_summary(ahead) == 'clock of agent 3 off by +0.300 s'
