"""
The stability and separation benchmarks' ``--gain NAME=VALUE``: any gain, checked as flown.

Each name and value is checked as the controller checks it. A refused change is one line
naming the option, the value and the rule, before anything runs; an accepted one changes what is
measured (the linearised ring's growth rates, a run's closest approach). The separation
benchmark's ``--control-period`` likewise: checked as a scenario checks it, flown, and named.
"""
import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / 'benchmarks' / 'bench_stability.py'
SEPARATION = ROOT / 'benchmarks' / 'bench_separation.py'
# one separation run: N = 8 from one point, a static target, no failure, a clean link
ONE_RUN = ('--quick', '--faults', 'none', '--ns', '8', '--placements', 'coincident',
           '--failures', '0', '--links', '0', '--targets', 'static', '--workers', '1')


def bench(*args, script=BENCH):
    return subprocess.run([sys.executable, str(script), *args, '--no-save'], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)


@pytest.mark.parametrize('args, words', [
    (('--gain', 'k_tau'), "expected NAME=VALUE (k_tau=1.0), got 'k_tau'"),
    (('--gain', 'k_tau=-1'), 'k_tau must be >= 0, got -1'),
    (('--gain', 'k_tau=fast'), "k_tau must be a number, got 'fast'"),
    (('--gain', 'k_taux=1'), 'unknown ControllerParams field(s): k_taux'),
    (('--gain', 'soft_limiter=1'), 'soft_limiter must be a bool, got 1'),
    (('--gain', 'control_period=0.05'), '--gain control_period: each run sets it'),
])
def test_a_bad_gain_is_refused_in_one_line_before_anything_runs(args, words):
    done = bench('growth', *args)
    assert done.returncode == 2
    assert done.stdout == ''  # nothing measured
    lines = done.stderr.strip().splitlines()
    assert 'Traceback' not in done.stderr
    assert lines[-1].startswith('bench_stability.py: error: ') and words in lines[-1], lines


def test_crossings_refuses_gains_it_would_not_fly():
    done = bench('crossings', '--gain', 'k_tau=1.0')
    assert done.returncode == 2 and done.stdout == ''
    assert 'crossings flies its own gains' in done.stderr.strip().splitlines()[-1]


def _growth(stdout):
    """Each (preset, period, tau) row's largest growth rate [1/s]."""
    rows = re.findall(r"^\('(\w+)', ([0-9.]+), ([0-9.]+)\): max ([-+][0-9.]+)/s", stdout, re.M)
    return {(p, float(period), float(tau)): float(rate) for p, period, tau, rate in rows}


def test_growth_analyses_the_changed_gains_of_the_chosen_preset_only():
    plain = _growth(bench('growth').stdout)
    faster = _growth(bench('growth', '--gain', 'k_tau=4.0').stdout)
    assert len(plain) == len(faster) == 6
    # the defaults' ring decays in every configuration; sixteen times the angular-rate gain
    # makes the ring at P = 0.05 s grow (the sampled loop's limit), not the one at 0.01 s
    assert all(rate < 0 for key, rate in plain.items() if key[0] == 'default')
    assert faster['default', 0.01, 1.0] < 0 < faster['default', 0.05, 1.0]
    assert all(faster[key] == plain[key] for key in plain if key[0] == 'reference')


@pytest.mark.parametrize('args, words', [
    (('--gain', 'd_safe=1'), '--gain d_safe: this benchmark takes it as --d-safe'),
    (('--gain', 'radius=30'), '--gain radius: each run sets it'),
    (('--gain', 'k_e_tau=-5'), 'k_e_tau must be >= 0, got -5'),
])
def test_the_separation_benchmark_refuses_a_bad_gain_in_one_line(args, words):
    done = bench('--quick', *args, script=SEPARATION)
    assert done.returncode == 2 and done.stdout == ''
    assert 'Traceback' not in done.stderr
    assert words in done.stderr.strip().splitlines()[-1]


def _closest(stdout):
    """Return the worst run's closest approach after once apart, over d_safe."""
    return float(re.search(r'^worst runs.*\n\s+([0-9.]+)\s', stdout, re.M).group(1))


def test_the_separation_benchmark_flies_the_changed_gains():
    plain = bench(*ONE_RUN, script=SEPARATION)
    faster = bench(*ONE_RUN, '--gain', 'k_tau=1', script=SEPARATION)
    assert plain.returncode == faster.returncode == 0, plain.stderr + faster.stderr
    assert "gains {'k_tau': 1}" in faster.stdout and 'gains' not in plain.stdout.split('\n')[0]
    # the same start and target flown by another law: another closest approach
    assert _closest(plain.stdout) != _closest(faster.stdout)


def test_the_changed_gains_name_the_separation_results_file():
    name = f'test_gains_{os.getpid()}'
    done = subprocess.run([sys.executable, str(SEPARATION), *ONE_RUN, '--gain', 'k_tau=1',
                           '--gain', 'k_omega_own=0.8', '--draft', '--name', name], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    written = ROOT / 'benchmarks' / 'results' / 'drafts' / f'{name}_k_tau_1_k_omega_own_0.8.json'
    try:
        assert done.returncode == 0, done.stderr
        assert f'figures written to {written}' in done.stdout
        record = json.loads(written.read_text())
        assert record['results']['gains'] == {'k_tau': 1, 'k_omega_own': 0.8}
        assert record['results']['overall']['rows'][0][0] == 1  # the one run
    finally:
        written.unlink(missing_ok=True)


@pytest.mark.parametrize('value, words', [
    ('0', '--control-period: control_period must be >= 0.001, got 0.0'),
    ('nan', '--control-period: control_period must be finite, got nan'),
    ('2', '--control-period: control_period must be <= 1, got 2.0'),
])
def test_the_separation_benchmark_refuses_a_bad_control_period_in_one_line(value, words):
    done = bench('--quick', '--control-period', value, script=SEPARATION)
    assert done.returncode == 2 and done.stdout == ''
    assert 'Traceback' not in done.stderr
    assert words in done.stderr.strip().splitlines()[-1]


def test_the_separation_benchmark_flies_and_names_another_control_period():
    name = f'test_period_{os.getpid()}'
    plain = bench(*ONE_RUN, script=SEPARATION)
    done = subprocess.run([sys.executable, str(SEPARATION), *ONE_RUN, '--control-period', '0.01',
                           '--draft', '--name', name], cwd=ROOT, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    written = ROOT / 'benchmarks' / 'results' / 'drafts' / f'{name}_control_period_0.01.json'
    try:
        assert plain.returncode == done.returncode == 0, plain.stderr + done.stderr
        assert 'P = 0.05 s' in plain.stdout and 'P = 0.01 s' in done.stdout
        # the same start and target flown five times as often: another closest approach
        assert _closest(plain.stdout) != _closest(done.stdout)
        record = json.loads(written.read_text())
        assert record['results']['control_period'] == 0.01
        assert record['results']['overall']['rows'][0][0] == 1  # the one run
    finally:
        written.unlink(missing_ok=True)
