"""
Numbers as a person reads them in the tables, reports and logs: no float noise, no minus zero.

A parameter table showed ``-6.283185307179586 – 6.283185307179586`` for ±2π and the CLI
``(default 1.5707963267948966)``; link tables ``-0.0000`` clock offsets and a separation table
a clearance of ``-0.00``.
"""
import argparse
import dataclasses
import math

import pytest

from ros_support.number_text import fixed, number_text
from ros_support.settings import add_options, setting
from soliton_encirclement_ros.core.links import LinkFigures


@pytest.mark.parametrize('value, digits, sign, text', [
    (-0.00001, 4, True, '+0.0000'), (-0.00001, 4, False, '0.0000'), (-0.004, 2, False, '0.00'),
    (-0.006, 2, False, '-0.01'), (0.3, 3, True, '+0.300'), (-0.3, 3, True, '-0.300'),
])
def test_a_value_that_rounds_to_zero_has_no_sign(value, digits, sign, text):
    assert fixed(value, digits, sign) == text


@pytest.mark.parametrize('value, unicode_text, ascii_text', [
    (2 * math.pi, '2π', '2*pi'), (-2 * math.pi, '-2π', '-2*pi'), (math.pi / 2, 'π/2', 'pi/2'),
    (math.pi, 'π', 'pi'), (0.05, '0.05', '0.05'), (-0.0, '0.0', '0.0'), (20.0, '20.0', '20.0'),
])
def test_a_multiple_of_pi_is_named(value, unicode_text, ascii_text):
    assert number_text(value) == unicode_text
    assert number_text(value, ascii_only=True) == ascii_text


def test_the_parameter_tables_and_the_cli_show_pi_by_name():
    from ros_support.ros_parameters import markdown_table, specs_of
    from velocity_mobility_ros.core.vehicle import PoseSettings
    table = markdown_table(specs_of(PoseSettings))
    assert '| -2π – 2π |' in table and '6.283185307179586' not in table

    @dataclasses.dataclass(frozen=True)
    class Bearing:
        bearing: float = setting(math.pi / 2, 'a bearing', 'rad')
    parser = argparse.ArgumentParser()
    add_options(parser, Bearing)
    assert '(default pi/2)' in ' '.join(parser.format_help().split())


def test_a_link_offset_that_rounds_to_zero_is_printed_without_a_sign():
    figures = LinkFigures(2, 10, 0, 0, 0.001, 0.002, -0.00001, 1.0)
    assert 'offset=+0.0000' in figures.text()


def test_the_flight_reports_link_table_prints_no_minus_zero_offset():
    from soliton_encirclement_ros.analysis import flight_report
    assert flight_report._number(-0.00001, 4) == '0.0000'


def test_a_results_table_shows_no_minus_zero(tmp_path):
    """The separation table's clearance ``-0.00`` (a string in its results file) reads 0.00."""
    pytest.importorskip('mkdocs', reason='the docs extra is not installed')
    import importlib.util
    from pathlib import Path
    hook = Path(__file__).resolve().parents[3] / 'docs' / 'hooks' / 'generated.py'
    spec = importlib.util.spec_from_file_location('generated_hook', hook)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [module._value(v) for v in ('-0.00', -0.0, '-0.01', 0.25)] == [
        '0.00', '0.0', '-0.01', '0.25']
