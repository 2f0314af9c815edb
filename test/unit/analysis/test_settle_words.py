"""
A metric that never settled reads "did not settle", everywhere a settle time is printed.

``swarm_sim``'s summary printed "E_gap < 0.05 from never", ``analyze_run`` "E_gap settles at
never" and the flight report "never" under "settles at".
"""
import io

from soliton_encirclement_ros.analysis import cli, flight_report
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, settled_text
from soliton_encirclement_ros.sim.runner import print_summary


def _summary(settle):
    nan = float('nan')
    return {'final': dict.fromkeys(METRIC_NAMES, 0.1), 'mean': {}, 'settle_time': settle,
            'closest': {'d_min': 3.0, 'time': 1.0},
            'params': {}, 'real_time_factor': nan}


def test_no_settle_time_is_did_not_settle():
    assert settled_text('E_gap', None) == 'E_gap did not settle (< 0.05)'
    assert settled_text('E_r', 3.25) == 'E_r < 0.01 from 3.25 s'


def test_the_summary_line_table_and_report_say_did_not_settle(tmp_path):
    summary = _summary({'E_gap': None, 'E_r': 4.0})
    stream = io.StringIO()
    print_summary(summary, tmp_path, stream)
    printed = stream.getvalue()
    assert 'settled: E_gap did not settle (< 0.05), E_r < 0.01 from 4.00 s' in printed, printed
    assert 'never' not in printed
    line = cli._summary_line(summary)
    assert 'E_gap did not settle' in line and 'never' not in line, line
    assert flight_report._settle_text(summary, 'E_gap') == 'did not settle'
