"""
No class in ``px4/`` is longer than 400 lines: a class holding many concerns is split by concern.

The offboard sequencer is a façade over small parts (``px4/sequencer/``) and the bridge node a
shell with small collaborators; a class that grows past the limit is named here.
"""
import ast
from pathlib import Path

PX4 = Path(__file__).resolve().parents[3] / 'soliton_encirclement_ros' / 'px4'
MAX_CLASS_LINES = 400


def class_lengths(path):
    """Return (name, first line, lines) of every class in the module at ``path``, nested too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_the_measure_counts_a_class_from_its_line_to_its_last_nested_ones_too(tmp_path):
    module = tmp_path / 'module.py'
    module.write_text('class A:\n    x = 1\n\n    class Inner:\n        pass\n\n\n'
                      'class B:\n    pass\n')
    assert class_lengths(module) == [('A', 1, 5), ('B', 8, 2), ('Inner', 4, 2)]


def test_no_class_in_px4_is_longer_than_400_lines():
    modules = sorted(PX4.rglob('*.py'))
    assert PX4 / 'offboard.py' in modules and PX4 / 'bridge_node.py' in modules
    too_long = [f'{path.relative_to(PX4.parent)}:{line} class {name}: {lines} lines'
                for path in modules for name, line, lines in class_lengths(path)
                if lines > MAX_CLASS_LINES]
    assert not too_long, (f'classes longer than {MAX_CLASS_LINES} lines (split them by '
                          'concern): ' + '; '.join(too_long))
