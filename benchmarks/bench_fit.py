"""
fit_mobility's accuracy on flights it did not simulate, and a ring flown with the fitted model.

    .venv/bin/python benchmarks/bench_fit.py independent   # truth, estimate, interval per flight
    .venv/bin/python benchmarks/bench_fit.py loop          # a slow vehicle: flight, fit, sims

``independent``: the flights of ``test/acceptance/test_fit_acceptance.py``, flown by an
independent simulator (``test/support/independent_flight.py``: continuous time, Runge-Kutta 4 at
1 kHz, commands held at 20 Hz, delays off the 10 ms step grid, odometry noise, nothing of
``velocity_mobility_ros`` imported), fitted as ``fit_mobility`` fits them (the 40 s flights with
the last 20 % held out, the 60 s ones with the command line's 30 %). Per parameter: the truth,
the estimate, its error, the interval ``value -+ (2 std + systematic)`` and the error in
white-noise standard deviations.

``loop``: vehicles slower than the defaults assume (``tau_xy`` 1.8 s, ``max_acc_xy`` 1.2 m/s^2,
``max_speed_xy`` 4 m/s; the controller is not told) fly a ring of 6 in ``swarm_sim``, recorded;
``fit_mobility`` fits the recording; the same scenario is simulated with the defaults, with the
fitted file, and with its vehicle section only. Per run: the settle times and the metrics' means.

Prints the figures and writes them to benchmarks/results/fit_independent.json or fit_loop.json
(``--no-save``: print only). Asserts nothing.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
import subprocess
import sys
import tempfile

from results import add_options, begin, save, table
import yaml

from soliton_encirclement_ros.sim.executables import find_executable
from velocity_mobility_ros.core.fit import DELAY, fit, Flight, PARAM_NAMES

ROOT = Path(__file__).resolve().parents[1]
LOOP = ['--agents', '6', '--duration', '60', '--control-period', '0.05', '--seed', '1',
        '--no-progress']
SLOW = {'tau_xy': 1.8, 'max_acc_xy': 1.2, 'max_speed_xy': 4.0}


def independent() -> dict:
    sys.path[:0] = [str(ROOT / 'test'), str(ROOT / 'test' / 'acceptance')]
    from test_fit_acceptance import HELD_OUT, INDEPENDENT

    from support.independent_flight import fly_independent
    flights = {f'{name} (40 s)': (truth, options, 40.0, 0.2)
               for name, (truth, options) in HELD_OUT.items()}
    flights.update({f'{name} (60 s)': (truth, options, 60.0, 0.3)
                    for name, (truth, options) in INDEPENDENT.items()})
    rows = []
    for label, (truth, options, duration, holdout) in flights.items():
        rec = fly_independent(truth, duration=duration, **options)
        result = fit([Flight(label, rec.cmd_ns * 1e-9, rec.cmd_v, rec.odom_ns * 1e-9,
                             rec.velocity)], holdout=holdout)
        for name in PARAM_NAMES + (DELAY,):
            est, true = result.estimates[name], getattr(truth, name)
            error = est.value - true
            rows.append([label, name, true, float(f'{est.value:.4g}'),
                         f'{100 * error / true:+.2f} %',
                         f'[{est.low:.4g}, {est.high:.4g}]',
                         round(abs(error) / est.std_white, 1)])
            print(' | '.join(str(cell) for cell in rows[-1]), flush=True)
    return {'flights': table(['flight', 'parameter', 'truth', 'estimate', 'error', 'interval',
                              'error / white-noise std'], rows)}


def _summary(out: Path) -> dict:
    return json.loads((out / 'summary.json').read_text())


def loop() -> dict:
    swarm_sim, fit_mobility = find_executable('swarm_sim'), find_executable('fit_mobility')
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        truth = tmp / 'truth.yaml'
        truth.write_text(yaml.safe_dump({'/swarm_mobility': {'ros__parameters': SLOW}}))
        subprocess.run([str(swarm_sim), *LOOP, '--params-file', str(truth), '--record',
                        str(tmp / 'bag'), '--out', str(tmp / 'flight')], check=True)
        runs['the flight (recorded)'] = _summary(tmp / 'flight')
        subprocess.run([str(fit_mobility), str(tmp / 'bag'), '--out', str(tmp / 'fit')],
                       check=True)
        fitted = tmp / 'fit' / 'mobility_fit.yaml'
        vehicle_only = tmp / 'vehicle_only.yaml'
        content = yaml.safe_load(fitted.read_text())
        vehicle_only.write_text(yaml.safe_dump({'/swarm_mobility': content['/swarm_mobility']}))
        for label, extra in (('simulated, defaults', []),
                             ('simulated, mobility_fit.yaml', ['--params-file', str(fitted)]),
                             ('simulated, its vehicle section only',
                              ['--params-file', str(vehicle_only)])):
            out = tmp / label.replace(' ', '_').replace(',', '')
            subprocess.run([str(swarm_sim), *LOOP, *extra, '--out', str(out)], check=True)
            runs[label] = _summary(out)
        pooled = json.loads((tmp / 'fit' / 'fit.json').read_text())['pooled']['parameters']
    rows = []
    for label, summary in runs.items():
        settle, mean = summary['settle_time'], summary['mean']
        rows.append([label, *(f'{settle[m]:.2f} s' if settle[m] is not None else 'never'
                              for m in ('E_gap', 'E_r')),
                     *(round(mean[m], 4) for m in ('E_gap', 'E_r', 'G_max')),
                     f'{mean["d_min"]:.2f} m'])
        print(' | '.join(str(cell) for cell in rows[-1]), flush=True)
    found = [[name, SLOW.get(name, ''),
              round(entry['value'], 3) if entry['identified'] else 'unidentifiable']
             for name, entry in pooled.items() if name in PARAM_NAMES]
    return {'runs': table(['run', 'E_gap < 0.05 from', 'E_r < 0.01 from', 'mean E_gap',
                           'mean E_r', 'mean G_max', 'mean d_min'], rows),
            'pooled': table(['parameter', 'truth', 'pooled fit'], found)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('what', choices=('independent', 'loop'))
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    results = independent() if args.what == 'independent' else loop()
    save(args, f'fit_{args.what}', results, load)


if __name__ == '__main__':
    main()
