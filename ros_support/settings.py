"""
Settings dataclasses whose fields carry their own description, unit and rules (no rclpy).

A field declared with :func:`setting` holds, in its metadata, everything said about it: the
description, the unit, the bounds (or the allowed choices) and whether a node may change it at
run time. From that one definition:

- :func:`check_fields` validates an instance (``__post_init__`` calls it): one ``ValueError``
  naming the field, the value and the rule;
- ``ros_support.ros_parameters.specs_of`` declares the ROS parameters, with descriptors and ranges;
- :func:`add_options` adds the command-line options (``--control-period``), with help text and
  the same rules;
- the parameter tables (docs/reference/parameters.md) are generated from the ROS specs.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any, Iterable, Sequence

from ros_support.number_text import number_text
from ros_support.validation import bounded, broken_rule, number


def setting(default: Any = dataclasses.MISSING, description: str = '', unit: str = '',
            low: float | None = None, high: float | None = None, strict: bool = False,
            high_strict: bool = False, nan_ok: bool = False, choices: Sequence[str] = (),
            read_only: bool = False, optional: bool = False, rule: str = '',
            array: str = '', default_factory: Any = dataclasses.MISSING):
    """
    Return a dataclass field with its description, unit and rules in the metadata.

    ``low``/``high`` bound a number (``strict``/``high_strict`` exclude the bound itself),
    ``nan_ok`` lets NaN mean "off", ``optional`` lets None mean "not set", ``choices`` lists a
    string's allowed values, ``read_only`` says a node reads it once at start-up, and ``rule``
    words the bounds for the error ('a probability in [0, 1)'), ``array`` names the element
    type of a list ('double', 'integer', 'string'; its ROS parameter type when it is empty).
    """
    metadata = {'description': description, 'unit': unit, 'low': low, 'high': high,
                'strict': strict, 'high_strict': high_strict, 'nan_ok': nan_ok,
                'choices': tuple(choices), 'read_only': read_only, 'optional': optional,
                'rule': rule, 'array': array}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def same_as(cls: type, name: str, **changes: Any):
    """
    Return a field defined like ``cls``'s field ``name``, with ``changes`` to its rules.

    For a setting that means the same in two places (a scenario's ``loss`` and an agent
    node's ``loss``): the description, unit, bounds and default are written once.
    """
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    metadata = {**f.metadata, **{k: v for k, v in changes.items() if k != 'default'}}
    default = changes.get('default', f.default)
    if f.default_factory is not dataclasses.MISSING and 'default' not in changes:
        return dataclasses.field(default_factory=f.default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def described(f: dataclasses.Field) -> bool:
    """Whether ``f`` was declared with :func:`setting`."""
    return 'description' in f.metadata


def describe(f: dataclasses.Field) -> str:
    """One-line description with unit, e.g. 'radial proportional gain [1/s]'."""
    unit = f.metadata.get('unit')
    return f.metadata['description'] + (f' [{unit}]' if unit else '')


def default_of(f: dataclasses.Field) -> Any:
    """Return the field's default value (built by its factory if it has one)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def check_value(f: dataclasses.Field, value: Any, name: str = '') -> Any:
    """Return ``value`` checked by the rules of field ``f`` (numbers as floats); else raise."""
    name = name or f.name
    meta = f.metadata
    default = default_of(f)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f'{name} must be a bool, got {value!r}')
        return value
    if meta['choices']:
        if value not in meta['choices']:
            raise ValueError(f'{name} must be one of {", ".join(meta["choices"])}, got {value!r}')
        return value
    if meta['optional'] and value is None:
        return value
    if meta['array']:
        if isinstance(value, (str, bytes)) or not hasattr(value, '__iter__'):
            raise ValueError(f'{name} must be a list of {meta["array"]}s, got {value!r}')
        if meta['array'] == 'double':
            return [bounded(f'{name}[{i}]', v) for i, v in enumerate(value)]
        if meta['array'] == 'integer':
            bad = [v for v in value if isinstance(v, bool) or not isinstance(v, int)]
            if bad:
                raise ValueError(f'{name} must be a list of integers, got {bad[0]!r} in it')
        return list(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f'{name} must be a string, got {value!r}')
    number = (int, float) if isinstance(default, float) else int
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if meta['nan_ok'] and isinstance(value, float) and math.isnan(value):
            return value
        kind = 'a number' if number is not int else 'an integer'
        if isinstance(value, bool) or not isinstance(value, number):
            raise ValueError(f'{name} must be {kind}, got {value!r}')
        broken = broken_rule(float(value), meta['low'], meta['high'], meta['strict'],
                             meta['high_strict'])
        if broken and meta['rule']:
            raise ValueError(f'{name} must be {meta["rule"]}, got {value!r}')
        if number is int:
            if broken:
                raise ValueError(f'{name} {broken.replace("must be", "must be an integer", 1)}, '
                                 f'got {value}')
            return value
        if broken:
            raise ValueError(f'{name} {broken}, got {float(value)}')
        return float(value)
    return value


def check_fields(settings: Any) -> None:
    """Validate (and normalise) every :func:`setting` field of a frozen dataclass instance."""
    for f in dataclasses.fields(settings):
        if described(f):
            object.__setattr__(settings, f.name, check_value(f, getattr(settings, f.name)))


def settings_fields(cls: type, names: Iterable[str] | None = None) -> list[dataclasses.Field]:
    """Return the :func:`setting` fields of ``cls`` (only ``names``, in that order, if given)."""
    by_name = {f.name: f for f in dataclasses.fields(cls) if described(f)}
    if names is None:
        return list(by_name.values())
    return [by_name[name] for name in names]


def add_options(parser: argparse.ArgumentParser, cls: type,
                names: Iterable[str] | None = None) -> None:
    """
    Add one ``--option`` per field of ``cls``: help, type and rule from the field.

    The options default to None (not given), so that a scenario file or the dataclass default
    fills what the command line leaves out; the help names the dataclass default.
    """
    for f in settings_fields(cls, names):
        default = default_of(f)
        kwargs: dict[str, Any] = {'default': None, 'metavar': f.name.upper()}
        if isinstance(default, bool):
            kwargs = {'default': None, 'action': argparse.BooleanOptionalAction}
        elif f.metadata['choices']:
            kwargs['choices'] = f.metadata['choices']
            kwargs['metavar'] = None
        elif isinstance(default, (int, float)):
            kwargs['type'] = _option_type(f)
        elif isinstance(default, str):
            kwargs['type'] = str
        else:
            continue  # mappings and sequences come from a scenario file
        shown = ('NaN (off)' if isinstance(default, float) and math.isnan(default)
                 else number_text(default, ascii_only=True))
        parser.add_argument('--' + f.name.replace('_', '-'),
                            help=f'{describe(f)} (default {shown})'.replace('%', '%%'), **kwargs)


def _option_type(f: dataclasses.Field):
    return number(integer=isinstance(default_of(f), int),
                  check=lambda value: check_value(f, value, name='value'))


def given_options(args: argparse.Namespace, cls: type,
                  names: Iterable[str] | None = None) -> dict[str, Any]:
    """Return the options of :func:`add_options` that the command line gave, by field name."""
    return {f.name: getattr(args, f.name) for f in settings_fields(cls, names)
            if getattr(args, f.name, None) is not None}
