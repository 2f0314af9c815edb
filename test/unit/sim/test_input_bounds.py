"""
Every size an input can ask for is bounded, and refused in one line (exit 2) before it is built.

Run as a user runs the tools (their console scripts): a kilobyte of nested YAML aliases as a
safety area's polygon kept ``batch_sim`` busy for minutes, and as waypoints gave numpy's own
words; a 60 MB scenario file was read for minutes; a sweep grid point of 100,000,000 agents
started a worker that grew to gigabytes.
"""
import math
from pathlib import Path
import subprocess
import sys

import pytest

from ros_support.validation import MAX_YAML_BYTES, MAX_YAML_VALUES, read_yaml
from soliton_encirclement_ros.core.area import MAX_VERTICES
from soliton_encirclement_ros.core.target_motion import MAX_WAYPOINTS

BIN = Path(sys.executable).parent
DEADLINE = 120.0  # s: a refusal comes at once; only a broken bound gets near this


def alias_bomb(levels: int = 9) -> str:
    """Return a flow sequence of 9 nested levels, each naming the one inside it 9 times."""
    text = '[0.0, 0.0]'
    for level in range(levels):
        text = f'[&l{level} {text}' + f', *l{level}' * 8 + ']'
    return text


def run_tool(tool: str, *args: str) -> tuple[int, list[str]]:
    """Run a console script; return its exit code and its stderr lines."""
    done = subprocess.run([str(BIN / tool), *args], capture_output=True, text=True,
                          timeout=DEADLINE, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr.strip().splitlines()


def test_an_alias_bomb_as_a_polygon_is_refused_at_once(tmp_path):
    area = tmp_path / 'area.yaml'
    area.write_text(f'polygon: {alias_bomb()}\nz_min: -5.0\nz_max: 40.0\n')
    assert area.stat().st_size < 1024
    code, err = run_tool('batch_sim', '--agents', '3', '--duration', '1', '--no-plots',
                         '--safety-area', str(area), '--out', str(tmp_path / 'out'))
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith(
        f'batch_sim: error: safety area {area}: its aliases expand it to '), err
    expanded = int(err[0].split('expand it to ')[1].split()[0].replace(',', ''))
    assert expanded > 9 ** 9  # the 9 ** 9 points it names, and the lists holding them
    assert err[0].endswith(f' values, more than the {MAX_YAML_VALUES:,} a YAML input may hold; '
                           'refused before it was built'), err
    assert not (tmp_path / 'out').exists()


def test_an_alias_bomb_as_waypoints_is_refused_in_the_loader_s_words(tmp_path):
    scenario = tmp_path / 'scenario.yaml'
    scenario.write_text(f'target_motion: waypoints\nwaypoints: {alias_bomb()}\n')
    code, err = run_tool('batch_sim', '--scenario', str(scenario), '--agents', '3',
                         '--duration', '1', '--no-plots', '--out', str(tmp_path / 'out'))
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith(f'batch_sim: error: scenario {scenario}: its '
                                               'aliases expand it to '), err
    assert 'numpy' not in err[0] and 'sequence' not in err[0]


def test_a_recursive_alias_and_a_deep_nesting_are_one_line(tmp_path):
    path = tmp_path / 'file.yaml'
    path.write_text('a: &a [1, *a]\n')
    with pytest.raises(ValueError) as refused:
        read_yaml(path, 'scenario')
    assert str(refused.value) == (f'scenario {path}: an alias inside its own anchor expands it '
                                  'without end; refused before it was built')
    path.write_text('[' * 20000 + ']' * 20000)
    with pytest.raises(ValueError) as refused:
        read_yaml(path, 'scenario')
    assert str(refused.value) == f'scenario {path} is not valid YAML: nested too deeply'


def test_aliases_that_expand_little_are_read_as_before(tmp_path):
    path = tmp_path / 'file.yaml'
    path.write_text('base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  x: 3\nboth: [*b, *b]\n')
    assert read_yaml(path, 'file') == {'base': {'x': 1, 'y': 2}, 'this': {'x': 3, 'y': 2},
                                       'both': [{'x': 1, 'y': 2}, {'x': 1, 'y': 2}]}


@pytest.mark.parametrize('kind', ['scenario', 'placement'])
def test_a_huge_input_file_is_refused_before_it_is_read(tmp_path, kind):
    path = tmp_path / f'{kind}.yaml'
    with open(path, 'w') as stream:  # 30 MB: minutes of PyYAML
        stream.write('target_motion: waypoints\nwaypoints:\n' if kind == 'scenario' else '')
        line = '  - [1.0, 2.0, 0.0]\n'
        stream.write(line * (30_000_000 // len(line)))
    args = (['--scenario', str(path)] if kind == 'scenario'
            else ['--agents', '3', '--placement', 'file', '--placement-file', str(path)])
    code, err = run_tool('batch_sim', *args, '--duration', '1', '--no-plots',
                         '--out', str(tmp_path / 'out'))
    assert code == 2, err
    what = 'scenario' if kind == 'scenario' else 'placement file'
    assert err == [f'batch_sim: error: {what} {path} is 28.6 MiB, more than the '
                   f'{MAX_YAML_BYTES >> 20} MiB a YAML input may be'], err


def test_more_vertices_than_the_bound_are_refused_naming_file_key_count_and_bound(tmp_path):
    area = tmp_path / 'area.yaml'
    count = MAX_VERTICES + 1
    circle = ', '.join(f'[{100 * math.cos(2 * math.pi * k / count):.4f}, '
                       f'{100 * math.sin(2 * math.pi * k / count):.4f}]' for k in range(count))
    area.write_text(f'polygon: [{circle}]\nz_min: -5.0\nz_max: 40.0\n')
    code, err = run_tool('batch_sim', '--agents', '3', '--duration', '1', '--no-plots',
                         '--safety-area', str(area), '--out', str(tmp_path / 'out'))
    assert code == 2, err
    assert err == [f'batch_sim: error: safety area {area}: safety_area polygon has {count} '
                   f'vertices, more than the {MAX_VERTICES} a safety area may have']


def test_more_waypoints_than_the_bound_are_refused_naming_file_key_count_and_bound(tmp_path):
    scenario = tmp_path / 'scenario.yaml'
    count = MAX_WAYPOINTS + 1
    points = ', '.join(f'[{k % 40}.0, 0.0]' for k in range(count))
    scenario.write_text(f'target_motion: waypoints\nwaypoints: [{points}]\n')
    code, err = run_tool('batch_sim', '--scenario', str(scenario), '--agents', '3',
                         '--duration', '1', '--no-plots', '--out', str(tmp_path / 'out'))
    assert code == 2, err
    assert err == [f'batch_sim: error: scenario {scenario}: waypoints has {count} points, more '
                   f"than the {MAX_WAYPOINTS} a target's route may have"]


def test_a_sweep_grid_point_too_big_for_memory_is_refused_before_any_worker(tmp_path):
    spec = tmp_path / 'spec.yaml'
    spec.write_text('scenario: {duration: 1.0}\ngrid:\n  agents: [4, 100000000]\n')
    out = tmp_path / 'out'
    code, err = run_tool('sweep_sim', str(spec), '--out', str(out), '--workers', '1')
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith('sweep_sim: error: grid point agents=100000000: agents 100000000 '
                             'needs about '), err
    assert '% of the ' in err[0] and ' a run may take here' in err[0], err
    assert not out.exists()  # no worker started, nothing written
