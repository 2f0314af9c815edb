"""A key given twice in a YAML file is refused in one line naming it, in every file we read."""
import pytest

from ros_support.validation import read_yaml
from soliton_encirclement_ros.core.area import read_area_file
from soliton_encirclement_ros.core.scenario import load_scenario
from soliton_encirclement_ros.fleet.fleet_file import load_fleet

AREA = 'polygon: [[-50, -50], [50, -50], [50, 50], [-50, 50]]\nz_min: -5.0\nz_max: 40.0\n'
FLEET = ('geo_reference: [47.4, 8.5, 488.0]\nvehicles:\n'
         '  - {name: uav1, agent_id: 1, px4_namespace: "", target_system: 1}\n')


@pytest.mark.parametrize('reader, what, text, key, where, first', [
    (load_scenario, 'scenario', 'radius: 10.0\nagents: 3\nradius: 30.0\n', 'radius', '3, column 1',
     1),
    (read_area_file, 'safety area', AREA + 'z_max: 400.0\n', 'z_max', '4, column 1', 3),
    (load_fleet, 'fleet file', FLEET + 'geo_reference: [0, 0, 0]\n', 'geo_reference',
     '4, column 1', 1),
    (load_scenario, 'scenario', 'controller:\n  k_r: 1.0\n  k_r: 2.0\n', 'k_r', '3, column 3',
     2),
])
def test_a_duplicate_key_is_one_line_naming_it(tmp_path, reader, what, text, key, where, first):
    path = tmp_path / 'file.yaml'
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        reader(path)
    assert str(refused.value) == (
        f'{what} {path} is not valid YAML (line {where}): duplicate key {key!r} (first given '
        f'on line {first}): give each key once')


def test_a_merge_key_may_still_be_overridden(tmp_path):
    path = tmp_path / 'file.yaml'
    path.write_text('base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  x: 3\n')
    assert read_yaml(path, 'file') == {'base': {'x': 1, 'y': 2}, 'this': {'x': 3, 'y': 2}}
