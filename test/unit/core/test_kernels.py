"""
The batch engine's compiled tick (``core.kernels``) against its numpy path, value for value.

Random receiver tables (missing entries, exact ties of angle, agents at the target, current
neighbours no longer heard, rows without a live target) under several gain sets: the control
kernel must give the numpy path's ``u``, ``u_ss``, neighbours and commands bit for bit, and
decline (the numpy path's scan runs) where a vehicle is within the ``d_safe`` term's reach.
The metrics kernel equals ``batch_metrics`` to rounding, the vehicle kernel ``model.step``
bit for bit. The default law's even-ring term (its gate and its ramp, whose state the
kernel keeps per run x agent) is compiled: compared on random ramp states and over runs with
failures that change the ring mid-run. Where the kernels cover nothing (gap steering, the
ring's bulge, a field they do not know) the engine keeps the numpy path.
"""
import copy
import dataclasses
import importlib.util
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from ros_support.settings import setting
from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.batch_engine import (
    batch_metrics, BatchControllers, simulate_runs)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import crowded, ring_gain_share
from soliton_encirclement_ros.core.neighbours import NO_NEIGHBOUR
from soliton_encirclement_ros.core.scenario import Scenario
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

# Each test skips without numba (a marker, not a module-level skip: under colcon's pytest that
# can skip a whole directory).
pytestmark = pytest.mark.skipif(importlib.util.find_spec('numba') is None,
                                reason='numba is not installed (the standalone extra)')

# (gains, lambdas): the default law (the even-ring term with its gate and ramp) and others
GAIN_SETS = {
    'default, d_safe off': ({'d_safe': 0.0}, None),
    'default, d_safe off, ring_ramp 0': ({'d_safe': 0.0, 'ring_ramp': 0.0}, None),
    'reference, lambdas': ({'k_r': 1.0, 'k_dr': 0.5, 'c_coupling': 2.0, 'beta_u': 7.0,
                            'alpha_u': 0.5, 'k_e_tau': 25.0, 'k_tau': 0.2, 'k_omega_damp_n': 0.0,
                            'k_omega_own': 0.0, 'd_safe': 0.0, 'target_lead': 0.0,
                            'k_e_ring': 0.0}, {2: 1.5, 5: 0.7}),
    'soft limiter, altitude hold, no damping, lambdas (no ring fit)': ({
        'soft_limiter': True, 'u_lim': 0.5, 'altitude': 12.0, 'k_z': 0.7,
        'k_omega_damp': 0.0, 'k_omega_damp_n': 0.0, 'd_safe': 0.0, 'hysteresis': 0.2},
        {2: 1.5, 5: 0.7}),
    # the crowd's gains everywhere (ring_gains_from 0): the ring's saturate u on most rows
    'd_safe on, far apart, k_e_ring 1.3': ({'d_safe': 0.05, 'd_safe_share': 0.0,
                                           'k_e_ring': 1.3, 'ring_ramp': 2.0,
                                            'ring_gains_from': 0.0}, None),
    # at P = 0.05 s part of this damping is taken implicitly (law.implicit_decay) at any N
    'stiff spacing, damping partly implicit': ({'k_tau': 1.0, 'k_e_tau': 100.0,
                                                'k_omega_own': 0.8, 'd_safe': 0.0}, None),
    # u held (law.turn_capped) on many rows (|u| about 1 here, held at sqrt(2 / r_eff) / 0.25)
    "the crowd's gains, u held by ring_turn_acc": ({'ring_turn_acc': 4.0, 'd_safe': 0.0,
                                                    'ring_gains_from': 0.0}, None),
    # rows at the crowd's gains, at the ring's and blended (radii 5-40 m, R 20.4 m)
    "the ring's gains": ({'ring_gains_from': 0.5, 'ring_gains_full': 1.2, 'd_safe': 0.0,
                         'ring_ramp': 0.0}, None),
    # the ring's gains faded by the ring size heard (law.ring_size_share): 75 N here, whole
    # to N = 5, none from 8
    "the ring's gains, faded by ring size": ({'ring_gains_from': 0.5, 'ring_gains_full': 1.2,
                                              'k_e_tau_ring': 1500.0, 'd_safe': 0.0,
                                              'ring_ramp': 0.0}, None),
    # a change of the ring size heard keeps the ramp (no silent vehicle on a kernel's row)
    'ring_ramp_silent': ({'ring_ramp_silent': True, 'd_safe': 0.0}, None),
}
RAMP_STATE = ('ring_size', 'ring_changed', 'ring_tick')  # law.ring_ramp's, per run x agent


def _controllers(gains, runs=3, agents=6, lambdas=None):
    scenarios = [Scenario(agents=agents, seed=seed, control_period=0.05, controller=gains,
                          lambdas=lambdas or {}) for seed in range(runs)]
    return BatchControllers(scenarios, scenarios[0].agent_ids())


def _random_tick(c, rng, now=1.0):
    """Fill ``c``'s tables with a random tick; return (live, positions, velocities)."""
    r, n = c.u.shape
    target = rng.normal(0.0, 5.0, (r, 3))
    angle = rng.uniform(0.0, 2 * np.pi, (r, n))
    angle[:, 1] = angle[:, 0]  # two agents on one bearing: a tie broken by ids
    radius = rng.uniform(5.0, 40.0, (r, n))
    radius[0, 2] = 0.0          # an agent at the target itself
    positions = target[:, None, :] + np.stack(
        (radius * np.cos(angle), radius * np.sin(angle), rng.normal(10.0, 1.0, (r, n))), -1)
    velocities = rng.normal(0.0, 2.0, (r, n, 3))
    stale = rng.normal(0.0, 0.3, (r, n, n, 3))  # what each receiver heard: a little old
    c.has[...] = rng.random((r, n, n)) < 0.85
    c.has[:, np.arange(n), np.arange(n)] = False
    c.rx[...] = np.where(rng.random((r, n, n)) < 0.9, now - 0.05, now - 10.0)
    c.member[...] = rng.random((r, n, n)) < 0.9
    c.position[...] = positions[:, None, :, :] + stale
    c.velocity[...] = velocities[:, None, :, :] + stale
    c.nb_u[...] = rng.normal(0.0, 0.5, (r, n, n))
    c.nb_u_ss[...] = rng.normal(0.0, 0.5, (r, n, n))
    c.u[...] = rng.normal(0.0, 0.5, (r, n))
    c.u[0, 0] = 40.0  # beyond u_bound: clipped
    c.prev_cmd[...] = rng.normal(0.0, 3.0, (r, n, 3))
    c.pred[...] = rng.integers(-1, n, (r, n))
    c.succ[...] = rng.integers(-1, n, (r, n))
    c.target_has[...] = True
    c.target_rx[...] = now - 0.05
    c.target_has[1, 3] = False  # a row without a live target: the fallback command
    c.target_position[...] = target[:, None, :]
    c.target_velocity[...] = rng.normal(0.0, 2.0, (r, 1, 3))
    c.target_acceleration[...] = rng.normal(0.0, 1.0, (r, 1, 3))
    # law.ring_ramp's state: the ring size heard last tick the same or not, the last change
    # long ago, lately, never or ahead of the clock (weight 0), the last tick lately or beyond
    # agent_timeout (a change whatever the size)
    entry = c.has & (now - c.rx <= c.params.agent_timeout) & c.member
    c.ring_size[...] = np.where(rng.random((r, n)) < 0.6, entry.sum(axis=2) + 1,
                                rng.integers(0, n + 1, (r, n)))
    c.ring_changed[...] = now - rng.choice([0.0, 0.4, 2.5, 30.0, -1.0, np.inf], (r, n))
    c.ring_tick[...] = np.where(rng.random((r, n)) < 0.8, now - 0.05, now - 10.0)
    return np.ones((r, n), dtype=bool), positions, velocities


def _both_paths(c, tick):
    """Run ``_control`` compiled and with the numpy path on copies; (rows compiled, both)."""
    plan, c._plan = c._plan, None
    numpy_path = copy.deepcopy(c)
    c._plan = plan
    ran = []
    kernel = c._control_compiled
    c._control_compiled = lambda *args: ran.append(kernel(*args)) or ran[-1]
    got = c._control(*tick)
    want = numpy_path._control(*tick)
    [(done, stepped)] = ran
    assert stepped == done.sum()  # the count the caller compares with the rows it has
    return done, [(got[0], c), (want[0], numpy_path)]


@pytest.mark.parametrize('gains', GAIN_SETS)
def test_control_kernel_equals_the_numpy_path_bit_for_bit(gains):
    rng = np.random.default_rng(sum(map(ord, gains)))
    params, lambdas = GAIN_SETS[gains]
    c = _controllers(params, lambdas=lambdas)
    assert c._plan is not None
    ring_term = 0  # rows whose u the even-ring term moved
    held = 0  # rows whose u ring_turn_acc held
    gains_rows = np.zeros(3, dtype=int)  # rows at the crowd's gains, blended, the ring's
    for _ in range(30):
        live, positions, velocities = _random_tick(c, rng)
        if 'd_safe on' in gains:  # every vehicle far beyond the term's reach
            positions *= 1e4
            c.position *= 1e4
            c.rx[...] = 1.0 - 0.05  # none silent (heard once, not lately): the scan's
        plan, c._plan = c._plan, None
        without = copy.deepcopy(c)  # the same tick without the even-ring term (numpy path)
        unheld = copy.deepcopy(c)  # and without ring_turn_acc's hold of u
        c._plan, without.params = plan, c.params.with_changes(k_e_ring=0.0)
        unheld.params = c.params.with_changes(ring_turn_acc=0.0)
        without._control(1.0, live, positions, velocities)
        unheld._control(1.0, live, positions, velocities)
        done, [(cmds, a), (want_cmds, b)] = _both_paths(c, (1.0, live, positions, velocities))
        assert done.sum() == done.size - 1  # all but the row without a live target
        np.testing.assert_array_equal(cmds, want_cmds)
        for name in ('u', 'u_ss', 'pred', 'succ', 'prev_cmd') + RAMP_STATE:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert np.any(a.pred != NO_NEIGHBOUR) and np.any(cmds != 0.0)
        ring_term += np.sum(a.u != without.u)
        held += np.sum(a.u != unheld.u)
        offset = (positions - c.target_position)[done]
        share = ring_gain_share(np.hypot(offset[:, 0], offset[:, 1]), c.params)
        gains_rows += [np.sum(share <= 0.0), np.sum((share > 0.0) & (share < 1.0)),
                       np.sum(share >= 1.0)]
    assert (held > 50) == bool(params.get('ring_turn_acc'))  # of 30 x 17 rows
    if params.get('ring_gains_from'):  # rows at the crowd's gains, blended, at the ring's
        assert np.all(gains_rows > 50), gains_rows
    if params.get('k_e_ring', ControllerParams().k_e_ring) and not lambdas:
        assert ring_term > 50  # of 30 x 17 rows: the term acts (its gate and ramp partly)
    else:
        assert ring_term == 0


@pytest.mark.parametrize('gains', [{'d_safe': 2.0}, {'d_safe': 3.0, 't_react': 0.0},
                                   {'d_safe': 2.0, 'a_safe': 0.0, 'v_safe': 4.0},
                                   {'d_safe': 2.0, 'ring_turn_acc': 0.5, 'k_tau': 1.0,
                                    'k_e_tau': 100.0, 'ring_gains_from': 0.0},
                                   {'d_safe': 2.0, 'k_tau': 1.0, 'k_e_tau': 1e4},
                                   {'d_safe': 2.0, 'ring_gains_from': 0.4,
                                    'ring_gains_full': 1.4},
                                   {'d_safe': 2.0, 'ring_ramp_silent': True}],
                         ids=['default', 't_react 0', 'a_safe 0, v_safe 4',
                              'u held but where the term acts', 'wound up past max_speed_xy',
                              "the ring's gains, blended", 'ring_ramp_silent'])
def test_rows_within_reach_compile_the_d_safe_term(gains):
    """
    A row with a vehicle within ``d_safe``'s reach is the kernel's, its term compiled.

    A presence it hears (a failed agent's vehicle) counts with its rest point too. A row that
    counts a silent vehicle runs the numpy path's scan. One tick split between both gives
    each row's values of the numpy path alone, bit for bit, and the term moves many commands,
    some of them of rows that hear a presence. With ``ring_turn_acc``, ``u`` is held on some
    rows and, where the term acts, left unheld on others (``law.turn_released``). Wound up
    (``u`` at its bound, ``k_tau u r`` far past ``max_speed_xy``), the term takes the approach
    out of the command as flown (``law.flyable_command``).
    """
    rng = np.random.default_rng(1)
    c = _controllers(gains, runs=6, agents=8)
    assert c._plan.separate
    moved, moved_by_presence = 0, 0
    held, released, wound, blended, restarts, resized_apart, gated = 0, 0, 0, 0, 0, 0, 0
    for _ in range(20):
        live, positions, velocities = _random_tick(c, rng)
        c.member[...] = True
        c.member[2, :, 3] = False  # run 2's agents hear agent 3's presence
        c.rx[...] = np.where(rng.random(c.rx.shape) < 0.97, 1.0 - 0.05, -9.0)  # a few silent
        c.rx[0, 0] = 1.0 - 0.05
        c.has[0, 0, 1] = True
        c.position[0, 0, 1] = positions[0, 0] + [0.5, 0.0, 0.0]  # one 0.5 m from agent 1
        heard = c.has & (1.0 - c.rx <= c.params.agent_timeout)
        silent = (c.has & ~heard).any(axis=2)
        presence = (heard & ~c.member).any(axis=2)
        size_before, changed_before, tick_before = (c.ring_size.copy(), c.ring_changed.copy(),
                                                    c.ring_tick.copy())
        plan, c._plan = c._plan, None
        without = copy.deepcopy(c)  # the same tick without the d_safe term (numpy path)
        c._plan, without.params = plan, c.params.with_changes(d_safe=0.0)
        without._control(1.0, live, positions, velocities)
        done, [(cmds, a), (want_cmds, b)] = _both_paths(c, (1.0, live, positions, velocities))
        assert done[0, 0] and not done[silent].any()
        np.testing.assert_array_equal(cmds, want_cmds)
        for name in ('u', 'u_ss', 'pred', 'succ', 'prev_cmd') + RAMP_STATE:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        acted = np.any(a.prev_cmd != without.prev_cmd, axis=-1)
        moved += np.sum(done & acted)
        assert done[presence & ~silent].all()
        moved_by_presence += np.sum(done & acted & presence)
        if 'ring_turn_acc' in gains:  # the bound of u at each row's r_eff
            r = np.hypot(*np.moveaxis(positions[..., :2] - c.target_position[..., :2], -1, 0))
            bound = np.sqrt(0.5 / np.maximum(r, c.params.r_min))
            held += np.sum(done & (np.abs(a.u) == bound))
            released += np.sum(done & acted & (np.abs(a.u) > bound))
        r = np.hypot(*np.moveaxis(positions[..., :2] - c.target_position[..., :2], -1, 0))
        fast = (c.params.k_tau * np.abs(a.u) * np.maximum(r, c.params.r_min)
                > 2.0 * c.params.max_speed_xy)
        wound += np.sum(done & acted & fast)  # the law asks twice what is flown, or more
        counted = c.has & (1.0 - c.rx <= c.params.obstacle_memory)
        crowd = crowded(positions, c.position, counted, c.params.safety_distance(a.ring_size))
        share = ring_gain_share(r, c.params, crowd)
        blended += np.sum(done & acted & (share > 0.0) & (share < 1.0))
        gated += np.sum(done & crowd & (ring_gain_share(r, c.params) > 0.0))
        # law.ring_ramp: a change of the ring size heard (the last tick lately) restarts the
        # ramp; with ring_ramp_silent only where a vehicle the row counts is within its d_safe
        resized = (done & (a.ring_size != size_before)
                   & (1.0 - tick_before <= c.params.agent_timeout))
        restarted = resized & (a.ring_changed == 1.0) & (changed_before != 1.0)
        if c.params.ring_ramp_silent:
            np.testing.assert_array_equal(restarted, resized & crowd & (changed_before != 1.0))
        else:
            np.testing.assert_array_equal(restarted, resized & (changed_before != 1.0))
        restarts += np.sum(restarted)
        resized_apart += np.sum(resized & ~crowd)
    assert restarts >= 10 and resized_apart >= 10, (restarts, resized_apart)
    assert moved >= 40 and moved_by_presence >= 3  # the compiled term acted on these rows
    assert gains.get('k_e_tau') != 1e4 or wound >= 30
    assert ('ring_turn_acc' not in gains) or (held >= 200 and released >= 30)
    assert ('ring_gains_from' not in gains) or blended >= 20  # the term on both steps
    # in the band but crowded (a vehicle counted within d_safe): the crowd's gains alone
    assert ('ring_gains_from' not in gains) or gated >= 20, gated


def test_the_kernels_sum_is_numpys():
    """The ring offset's sum over the columns in numpy's (pairwise) order, bit for bit."""
    kernels = compiled.kernels()
    rng = np.random.default_rng(4)
    for size in [*range(0, 300), 1000, 1023, 10000]:
        row = rng.uniform(0.0, 2 * np.pi, size) * (rng.random(size) < 0.8)
        assert kernels._numpy_sum(row) == np.sum(np.tile(row, (3, 1)), axis=-1)[1], size


def test_the_kernels_modulo_is_numpys():
    """The angles' modulo 2 pi (its shortcut within one turn) as np.mod, sign of zero included."""
    kernels = compiled.kernels()
    two_pi = 2 * np.pi
    edges = [0.0, -0.0, two_pi, -two_pi, np.nextafter(two_pi, 0), -np.nextafter(two_pi, 0),
             np.nextafter(two_pi, 7), 5e-324, -5e-324, -1e-17, 3 * two_pi + 0.1, -20.0, np.nan,
             np.inf, -np.inf]
    values = np.concatenate((edges, np.random.default_rng(5).uniform(-15.0, 15.0, 2000)))
    got = np.array([kernels._mod_2pi(x) for x in values])
    with np.errstate(invalid='ignore'):  # of the infinities: NaN
        want = np.mod(values, two_pi)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[~np.isnan(got)]).any()


def test_one_scan_answers_every_bound_as_a_scan_per_bound_would():
    """
    The nearest counted vehicle (one pass a row) gives each bound's answer.

    Nearer than the bound; a NaN distance or bound counts as nearer only where asked (the
    reach test, not a crowd).
    """
    kernels = compiled.kernels()
    rng = np.random.default_rng(6)
    rows, cols, now, memory = 400, 6, 10.0, 1.0
    has = rng.random((rows, cols)) < 0.7
    rx = now - rng.uniform(0.0, 2.0, (rows, cols))
    nb = rng.uniform(-3.0, 3.0, (rows, cols, 3))
    nb[rng.random((rows, cols)) < 0.05] = np.nan
    own = rng.uniform(-3.0, 3.0, (rows, 3))
    tab = np.arange(rows)
    checked = {True: 0, False: 0}
    for m in range(rows):
        counted = has[m] & (now - rx[m] <= memory)
        d2 = ((nb[m, :, :2] - own[m, :2]) ** 2).sum(axis=1)[counted]
        nearest = kernels._nearest(m, has, tab, rx, now, memory, own, nb)
        for bound in (0.0, 0.5, 1.5, 4.0, np.nan):
            for nan_counts in (True, False):
                with np.errstate(invalid='ignore'):
                    want = bool(np.any((d2 < bound ** 2) | (nan_counts & ~(d2 >= bound ** 2))))
                assert kernels._nearer(nearest, bound, nan_counts) == want, (m, bound)
                checked[want] += 1
    assert min(checked.values()) > 500


def test_metrics_kernel_equals_batch_metrics():
    rng = np.random.default_rng(2)
    r, n = 40, 9
    positions = rng.normal(0.0, 20.0, (r, n, 3))
    velocities = rng.normal(0.0, 3.0, (r, n, 3))
    live = rng.random((r, n)) < 0.8
    live[0] = False            # no live agent: NaN
    live[1] = False
    live[1, 4] = True          # one: d_min NaN
    target = rng.normal(0.0, 5.0, (r, 3))
    positions[2, 3, :2] = target[2, :2]  # an agent at the target
    target_v = rng.normal(0.0, 2.0, (r, 3))
    radius = rng.uniform(5.0, 30.0, r)
    got = np.empty((r, 6))  # as the batch engine calls it, in place
    compiled.kernels().metrics_rows(positions, velocities, live, target, target_v, radius, got)
    want = batch_metrics(positions, velocities, live, target, target_v, radius)
    assert np.isnan(got[0]).all() and np.isnan(got[1, 5]) and not np.isnan(got[1, :5]).any()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# (gains, the scenario's settings, the least share of agent-ticks the kernel steps: the others
# failed (no target heard) or count a silent vehicle)
FAILURES = {'failures_per_min': 4.0, 'failure_off_time': 4.0}
RUNS = {
    'reference law': ({'k_e_ring': 0.0}, {}, 0.8),
    'default law': ({}, {}, 0.99),
    'default law, circling target, radius 8 m': (
        {}, {'target_motion': 'circle', 'target_speed': 3.0, 'radius': 8.0}, 0.99),
    'default law, d_safe off, failures': ({'d_safe': 0.0}, FAILURES, 0.6),
    'default law, failures': ({}, FAILURES, 0.6),
    'default law, failures, loss 0.2, delay 0.1 s': (
        {}, {**FAILURES, 'loss': 0.2, 'delay': 0.1}, 0.5),
    'stiff spacing, damping partly implicit': (
        {'k_tau': 1.0, 'k_e_tau': 100.0, 'k_omega_own': 0.8}, {}, 0.99),
    'stiff spacing, tangential speed capped, failures': (
        {'k_tau': 1.0, 'k_e_tau': 100.0, 'k_omega_own': 0.8, 'ring_turn_acc': 2.0,
         'ring_ramp': 0.0}, FAILURES, 0.6),
}


@pytest.mark.parametrize('run', RUNS)
def test_runs_equal_the_numpy_path(monkeypatch, run):
    """
    A sweep chunk: the same trajectories, bit for bit, and the same metrics series.

    With failures (outages of 4 s, not simulated faults: the kernel runs) the ring members
    each agent hears change mid-run, and the even-ring term's ramp restarts. The ring of a
    moving target is within the d_safe term's reach all along: its rows compiled too.
    """
    gains, settings, share = RUNS[run]
    scenarios = [Scenario(agents=8, seed=seed, duration=20.0, control_period=0.05,
                          controller=gains, **settings) for seed in range(3)]
    ran, changes = [], []
    kernel = BatchControllers._control_compiled

    def counted(self, *args):
        done, stepped = kernel(self, *args)
        assert stepped == done.sum()  # the count the caller compares with the rows it has
        ran.append(stepped)
        changes.append(np.sum(self.ring_changed > 0.0))  # a change after the first tick
        return done, stepped

    monkeypatch.setattr(BatchControllers, '_control_compiled', counted)
    got = simulate_runs(scenarios, apart=1.0)
    stepped = sum(ran)
    assert stepped > share * 400 * 3 * 8
    if 'failures_per_min' in settings:
        assert max(changes) >= 5  # the ramp restarted mid-run in some rows
    monkeypatch.setattr(compiled, '_KERNELS', False)  # numba "unavailable": numpy path
    want = simulate_runs(scenarios, apart=1.0)
    np.testing.assert_array_equal(got.final_positions, want.final_positions)
    for a, b in zip(got.metrics, want.metrics):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.separation.after, want.separation.after)


@dataclasses.dataclass(frozen=True)
class _NewTerm(ControllerParams):
    k_new: float = setting(0.0, 'a term the kernels do not know', '1/s', low=0.0)


@pytest.mark.parametrize('params', [ControllerParams(obstacle_clearance=3.0),
                                    ControllerParams(k_gap_steer=1.0),
                                    _NewTerm()], ids=['obstacle_clearance', 'k_gap_steer',
                                                      'a new field'])
def test_terms_the_kernels_do_not_cover_keep_the_numpy_path(params):
    assert compiled.covers(ControllerParams())  # the default law, the even-ring term on
    assert ControllerParams().k_e_ring and ControllerParams().ring_ramp
    assert not compiled.covers(params)
    assert compiled.control_plan(params, 0.0, 2, 5) is None


def test_every_controller_field_is_known_to_the_kernels():
    """
    Each field of ControllerParams is one the kernels honour, or one forcing the numpy path.

    A new law term fails here until it is sorted into either (``compiled.KNOWN_FIELDS``,
    ``compiled.NOT_COVERED``).
    """
    fields = {f.name for f in dataclasses.fields(ControllerParams)}
    assert set(compiled.NOT_COVERED) <= compiled.KNOWN_FIELDS
    assert sorted(fields - compiled.KNOWN_FIELDS) == []
    assert sorted(compiled.KNOWN_FIELDS - fields) == []  # no stale names either
    for name in compiled.NOT_COVERED:  # each forces the numpy path when set
        assert not compiled.covers(ControllerParams().with_changes(**{name: 1.0})), name


@pytest.mark.parametrize('vehicle', [{}, {'max_dec_xy': 2.0, 'max_dec_z': 1.0,
                                          'max_yaw_acc': 3.0, 'tau_z': 0.0}],
                         ids=['default', 'braking limits, yaw acceleration, no tau_z'])
def test_vehicle_kernel_equals_model_step_bit_for_bit(vehicle):
    params = VehicleParams.from_mapping(vehicle)
    rng = np.random.default_rng(3)
    n = 50
    state = VehicleState(rng.normal(0.0, 20.0, (n, 3)), rng.normal(0.0, 4.0, (n, 3)),
                         rng.normal(0.0, 2.0, (n, 3)), rng.uniform(-np.pi, np.pi, n),
                         rng.normal(0.0, 0.5, n))
    v_des = rng.normal(0.0, 6.0, (n, 3))
    v_des[:5] = 0.0                       # braking to a hover
    v_des[5:10] = state.velocity[5:10]    # on its command already
    want = state
    for _ in range(7):
        want = step(want, v_des, params)
    got = compiled.vehicle_steps(state, v_des, params, 7)
    for name in ('position', 'velocity', 'acceleration', 'yaw', 'yaw_rate'):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert not np.shares_memory(got.position, state.position)  # the state passed is kept
    assert compiled.vehicle_steps(state, v_des, params.with_changes(max_jerk_xy=5.0), 1) is None


def test_the_compiled_cache_goes_where_it_can_be_written(monkeypatch, tmp_path):
    """Beside the sources where writable, else under the user's ~/.cache: a directory per key."""
    monkeypatch.delenv('NUMBA_CACHE_DIR', raising=False)
    key = compiled.sources_key()
    sources = Path(compiled.__file__).resolve().parent
    writable = os.access
    if writable(sources, os.W_OK):
        assert compiled.cache_dir() == str(sources / '__pycache__' / 'numba' / key)
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setattr(compiled.os, 'access',
                        lambda path, mode: sources not in Path(path).parents
                        and writable(path, mode))
    user = tmp_path / '.cache' / 'soliton_encirclement_ros' / 'numba'
    stale = user / '0123456789abcdef'
    stale.mkdir(parents=True)
    assert compiled.cache_dir() == str(user / key)
    assert (user / key).is_dir() and not stale.exists()  # the older sources' cache is gone
    monkeypatch.setenv('NUMBA_CACHE_DIR', str(tmp_path / 'mine'))
    assert compiled.cache_dir() == str(tmp_path / 'mine' / key)
    monkeypatch.setenv('NUMBA_CACHE_DIR', str(tmp_path / 'mine' / key))  # a worker's
    assert compiled.cache_dir() == str(tmp_path / 'mine' / key)


def test_the_cache_key_changes_with_any_source_the_kernels_read(monkeypatch, tmp_path):
    """A constant of law.py compiles afresh: numba itself checks only a kernel's own file."""
    package = tmp_path / 'pkg_law'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'law.py').write_text('SEPARATION_YIELD = 5.0\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(compiled, 'KERNEL_SOURCES', (*compiled.KERNEL_SOURCES, 'pkg_law'))
    before = compiled.sources_key()
    assert compiled.sources_key() == before
    (package / 'law.py').write_text('SEPARATION_YIELD = 4.0\n')
    assert compiled.sources_key() != before


def test_importing_the_kernels_points_numba_at_the_keyed_cache():
    code = ('import numba\n'
            'from soliton_encirclement_ros.core import compiled, kernels\n'
            'print(numba.config.CACHE_DIR == compiled.cache_dir() != None)')
    env = {k: v for k, v in os.environ.items() if k != 'NUMBA_CACHE_DIR'}
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                         timeout=120, cwd=Path(compiled.__file__).resolve().parents[2])
    assert out.stdout.strip() == 'True', out.stderr


def test_the_kernels_run_without_importing_scipy_linalg():
    """
    The BLAS probe of numba imports all of scipy.linalg (about 0.3 CPU-s in every process).

    No kernel calls BLAS, so the probe is skipped (``kernels._skip_blas_probe``); scipy.linalg
    still imports afterwards for whoever needs it.
    """
    code = ('import sys\n'
            'from soliton_encirclement_ros.core import compiled\n'
            'from soliton_encirclement_ros.core.batch_engine import simulate_runs\n'
            'from soliton_encirclement_ros.core.scenario import Scenario\n'
            'simulate_runs([Scenario(agents=4, duration=0.5, control_period=0.05)])\n'
            'print(len(compiled.kernels().control_rows.signatures))\n'
            'print("scipy.linalg" in sys.modules)\n'
            'import numba.np.arraymath\n'
            'print(numba.np.arraymath._HAVE_BLAS)\n'
            'import scipy.linalg.cython_blas\n'
            'print(scipy.linalg.cython_blas.__name__)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=600, cwd=Path(compiled.__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['1', 'False', 'False', 'scipy.linalg.cython_blas'], out.stdout


def test_one_run_and_many_runs_use_the_same_compiled_kernels():
    # A sweep's chunks of many runs and a run of one must call the kernels with the same
    # array layouts: numba compiles (and caches) a version per layout, so a sweep after a
    # single run compiled every kernel again (strided slices of the bodies' arrays).
    names = ('exchange_states', 'metrics_rows', 'estimate_rows', 'target_rows', 'prepare_rows',
             'control_rows')
    code = ('from soliton_encirclement_ros.core import compiled\n'
            'from soliton_encirclement_ros.core.batch_engine import simulate_runs\n'
            'from soliton_encirclement_ros.core.scenario import Scenario\n'
            'scenario = Scenario(agents=4, duration=0.5, control_period=0.05)\n'
            'simulate_runs([scenario])\n'
            'simulate_runs([scenario.with_changes(seed=s) for s in range(3)])\n'
            'k = compiled.kernels()\n'
            f'print(sorted((name, len(getattr(k, name).signatures)) for name in {names!r}))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=600, cwd=Path(compiled.__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sorted((name, 1) for name in names)), out.stdout
