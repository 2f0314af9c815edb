"""
What a swarm size will cost, said and checked before anything is built (no rclpy).

``batch_sim --agents 100000000`` grew 1.7 GB in 45 s with nothing printed, and every engine
hears every agent (memory and time grow as N^2): now a size that cannot fit in the memory
available is refused in one line naming --agents, the value and the most agents that fit, and
a big run says what it will cost before it is built.
"""
import json
import math
from pathlib import Path

import pytest

from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim import batch_sim, runner
from soliton_encirclement_ros.sim.sizes import (
    COSTS, engine_note, estimate, largest_fit, MEMORY_MARGIN, size_note, size_problem)

RESULTS = Path(__file__).resolve().parents[3] / 'benchmarks' / 'results' / 'sizes.json'
GIB = float(1 << 30)


def test_the_costs_are_those_the_benchmark_measured():
    measured = {mode: fit for mode, fit in json.loads(RESULTS.read_text())['results'].items()
                if mode != 'costs'}  # the fits, and the table the docs show of them
    assert set(measured) == set(COSTS)
    for mode, cost in COSTS.items():
        for name in ('base', 'per_agent', 'per_pair', 'tick_per_agent', 'tick_per_pair'):
            assert getattr(cost, name) == pytest.approx(measured[mode][name], rel=1e-3,
                                                        abs=1e-12), (mode, name)


def test_a_size_that_cannot_fit_is_refused_naming_the_most_that_fits():
    scenario = Scenario(agents=100_000_000)
    problem = size_problem(scenario, 'vectorised', available=8 * GIB)
    assert problem.startswith('--agents 100000000 needs about ')
    assert ('of memory (engine vectorised), more than the 7.2 GiB a run may take here (90% of '
            'the 8.0 GiB available): at most about ') in problem
    fit = int(problem.split('at most about ')[1].split()[0])
    budget = MEMORY_MARGIN * 8 * GIB
    assert estimate(Scenario(agents=fit), 'vectorised').memory <= budget
    assert estimate(Scenario(agents=fit + 1), 'vectorised').memory > budget
    assert size_problem(Scenario(agents=fit), 'vectorised', available=8 * GIB) is None
    assert largest_fit(scenario, 'processes', 8 * GIB) < 100  # a process per node


def test_one_agent_past_the_bound_is_refused_in_words_that_are_true():
    fit = largest_fit(Scenario(agents=10), 'vectorised', MEMORY_MARGIN * 20 * GIB, True)
    problem = size_problem(Scenario(agents=fit + 1), 'vectorised', telemetry_in_memory=True,
                           available=20 * GIB)
    needed, budget, available = (float(problem.split(before)[1].split(' GiB')[0]) for before in (
        'needs about ', 'more than the ', '% of the '))
    assert needed > budget  # the line compares what is compared: not 17.9 > 19.1
    assert budget == pytest.approx(MEMORY_MARGIN * available, abs=1e-3)
    assert available == 20.0 and f'({MEMORY_MARGIN:.0%} of the 20.0' in problem
    assert problem.endswith(f'at most about {fit} agents fit (estimate from '
                            'benchmarks/bench_sizes.py)')


def test_batch_sim_keeps_its_telemetry_in_memory_and_counts_it():
    long = Scenario(agents=1000, duration=36000.0)
    assert estimate(long, 'vectorised', telemetry_in_memory=True).memory > \
        estimate(long, 'vectorised').memory + 1000 * 36000 * 32


def test_a_big_run_says_what_it_will_cost_a_small_one_says_nothing():
    assert size_note(Scenario(agents=10), 'vectorised') is None
    note = size_note(Scenario(agents=5000), 'vectorised')
    assert note.startswith('5000 agents for 120 s (engine vectorised): about ')
    assert 'of memory and ' in note and note.endswith('Ctrl-C stops it')
    assert math.isfinite(estimate(Scenario(agents=5000), 'nodes').seconds)


def test_batch_sim_and_swarm_sim_refuse_a_huge_swarm_at_once_in_one_line(tmp_path, capsys):
    assert batch_sim.main(['--agents', '100000000', '--out', str(tmp_path / 'b')]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('batch_sim: error: --agents 100000000 needs '
                                               'about '), err
    assert runner.main(['--agents', '100000000', '--engine', 'auto', '--no-progress',
                        '--out', str(tmp_path / 's')]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('swarm_sim: error: --agents 100000000 needs '
                                               'about '), err
    assert 'engine vectorised' in err[0]
    assert not (tmp_path / 'b').exists() and not (tmp_path / 's').exists()


def test_a_node_graph_slower_than_real_time_points_at_engine_auto():
    assert engine_note(Scenario(agents=10), 'nodes') is None  # keeps up
    assert engine_note(Scenario(agents=100), 'vectorised') is None  # not the node graph
    assert engine_note(Scenario(agents=100), 'processes') is None
    from soliton_encirclement_ros.sim.sizes import AUTO_MEASURED, COSTS
    scenario = Scenario(agents=100)
    note = engine_note(scenario, 'nodes')
    slower = COSTS['nodes'].tick(100) / scenario.control_period
    assert note.startswith(f'100 agents on the node graph (one node per agent) run about '
                           f'{slower:.0f}x slower than real time (estimate from '
                           'benchmarks/bench_sizes.py); --engine auto flies the same '
                           'controllers as arrays'), note
    # what swarm_sim --engine auto measured against the node graph, not the bare engine's tick
    # (which read 'about 18x faster')
    n, nodes, auto = AUTO_MEASURED
    assert note.endswith(f' {auto / nodes:.0f}x the sim-s per CPU-s of the node graph at '
                         f'N = {n} (measured by benchmarks/bench_swarm_sim.py)'), note


def test_the_engine_auto_figure_is_the_one_bench_swarm_sim_measured():
    """AUTO_MEASURED is the n100 case of the two results files (loop sim-s per CPU-s)."""
    from soliton_encirclement_ros.sim.sizes import AUTO_MEASURED

    def loop(name, case):
        table = json.loads((RESULTS.parent / f'{name}.json').read_text())['results']['runs']
        column = table['columns'].index('loop: sim-s per CPU-s')
        return next(row[column] for row in table['rows'] if row[0] == case)
    n = AUTO_MEASURED[0]
    assert AUTO_MEASURED == (n, loop('swarm_sim', f'n{n}'), loop('swarm_sim_auto', f'n{n}'))
    # the large-swarms page quotes the note, and the ratio in its prose
    page = ' '.join(
        (RESULTS.parents[2] / 'docs' / 'simulate' / 'large-swarms.md').read_text().split())
    ratio = f'{AUTO_MEASURED[2] / AUTO_MEASURED[1]:.0f}x'
    assert f'{ratio} the sim-s per CPU-s of the node graph at N = {n}' in page
    assert f'The {ratio} is' in page


def test_swarm_sim_says_it_before_the_graph_is_built(tmp_path, capsys, monkeypatch):
    from soliton_encirclement_ros.sim import domain
    monkeypatch.setattr(domain, 'claim_domain', lambda: (None, 'stopped here by the test'))
    for engine, said in (('nodes', True), ('auto', False)):
        assert runner.main(['--agents', '100', '--engine', engine, '--no-progress', '--out',
                            str(tmp_path / 's')]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err[-1] == 'swarm_sim: error: stopped here by the test'
        assert any(line.startswith('swarm_sim: 100 agents on the node graph')
                   and '--engine auto' in line for line in err) == said, err
