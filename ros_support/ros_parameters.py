"""
Declare node parameters from a spec table and validate changes with a pure function.

A node lists its parameters as :class:`ParamSpec` rows (name, default, description, range,
read-only). :func:`declare_validated` declares them with full descriptors, builds the node's
settings object through a pure ``validate(mapping)`` (e.g. ``VehicleParams.from_mapping``),
rejects run-time changes that ``validate`` refuses (the ``ValueError`` text becomes the
rejection reason) and hands every accepted change to ``apply``.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
import textwrap
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from rcl_interfaces.msg import (
    FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult)
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

from ros_support.number_text import number_text
from ros_support.settings import default_of, describe, settings_fields

Settings = TypeVar('Settings')
HELP_WIDTH = 99  # columns of a ``--help``


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its default fixes its type unless ``value_type`` is given (for ``[]``)."""

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    read_only: bool = False
    value_type: Parameter.Type | None = None
    strict: bool = False  # ``low`` itself excluded (checked by the settings; ROS ranges include)
    high_strict: bool = False  # ``high`` itself excluded (likewise)

    @property
    def is_array(self) -> bool:
        return isinstance(self.default, (list, tuple))

    @property
    def param_type(self) -> Parameter.Type:
        return self.value_type or Parameter.Type.from_parameter_value(self.default)

    def descriptor(self) -> ParameterDescriptor:
        # Typed (static): `ros2 param describe` shows this type whatever was refused. The
        # widenings (an integer for a double) and the refusal in words (type_problem) happen
        # before rclpy checks the type: _TypedParameters.
        desc = ParameterDescriptor(
            name=self.name, type=self.param_type.value, description=self.description,
            read_only=self.read_only, dynamic_typing=False)
        if self.low is not None or self.high is not None:
            low = -math.inf if self.low is None else self.low
            high = math.inf if self.high is None else self.high
            if self.param_type == Parameter.Type.DOUBLE:
                desc.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high))]
                desc.additional_constraints = f'{low} <= {self.name} <= {high}'
            elif self.param_type == Parameter.Type.INTEGER:
                desc.integer_range = [IntegerRange(from_value=int(low), to_value=int(high))]
                desc.additional_constraints = f'{low} <= {self.name} <= {high}'
        return desc


def specs_of(cls: type, names: Iterable[str] | None = None, read_only: bool = False,
             rename: Mapping[str, str] | None = None) -> list[ParamSpec]:
    """
    Return one parameter per settings field of ``cls`` (``ros_support.settings.setting``).

    Default, description, unit, range and read-only come from the field, so the node declares
    exactly what the core validates. ``read_only`` makes every one read-only; ``rename`` maps a
    field to another parameter name.
    """
    rename = rename or {}
    specs = []
    for f in settings_fields(cls, names):
        meta = f.metadata
        description = describe(f)
        if meta['choices']:
            description += f' (one of: {", ".join(meta["choices"])})'
        default = default_of(f)
        specs.append(ParamSpec(rename.get(f.name, f.name),
                               list(default) if meta['array'] else default, description,
                               low=meta['low'], high=meta['high'],
                               read_only=read_only or meta['read_only'], strict=meta['strict'],
                               high_strict=meta['high_strict'],
                               value_type=_ARRAY_TYPES.get(meta['array'])))
    return specs


_ARRAY_TYPES = {'double': Parameter.Type.DOUBLE_ARRAY, 'integer': Parameter.Type.INTEGER_ARRAY,
                'string': Parameter.Type.STRING_ARRAY}
_TYPE_WORDS = {
    Parameter.Type.BOOL: 'bool', Parameter.Type.INTEGER: 'integer',
    Parameter.Type.DOUBLE: 'double', Parameter.Type.STRING: 'string',
    Parameter.Type.BYTE_ARRAY: 'byte array', Parameter.Type.BOOL_ARRAY: 'bool array',
    Parameter.Type.INTEGER_ARRAY: 'integer array', Parameter.Type.DOUBLE_ARRAY: 'double array',
    Parameter.Type.STRING_ARRAY: 'string array', Parameter.Type.NOT_SET: 'nothing'}
# Widenings accepted (YAML and `ros2 param set` write 10 for 10.0).
_ACCEPTED = {(Parameter.Type.DOUBLE, Parameter.Type.INTEGER),
             (Parameter.Type.DOUBLE_ARRAY, Parameter.Type.INTEGER_ARRAY)}


def type_problem(spec: ParamSpec, given: Parameter.Type) -> str | None:
    """'parameter 'k_r': expected double, got string' when ``given`` does not fit ``spec``."""
    expected = spec.param_type
    if given == expected or (expected, given) in _ACCEPTED:
        return None
    if given == Parameter.Type.STRING_ARRAY and expected in (
            Parameter.Type.INTEGER_ARRAY, Parameter.Type.DOUBLE_ARRAY):
        return None  # an empty YAML list [] arrives as a string array
    return (f'parameter {spec.name!r}: expected {_TYPE_WORDS[expected]}, '
            f'got {_TYPE_WORDS.get(given, given.name.lower())}')


def declare(node: Node, specs: Iterable[ParamSpec]) -> dict[str, Any]:
    """
    Declare ``specs`` on ``node`` (overrides/YAML win over defaults); return their values.

    Raises rclpy's ``InvalidParameterValueException`` when an override is outside its range.
    """
    specs = list(specs)
    typed = _TypedParameters.of(node)
    for spec in specs:
        typed.specs[spec.name] = spec
        override = node._parameter_overrides.get(spec.name)
        if override is not None:
            problem = type_problem(spec, override.type_)
            if problem:
                raise ValueError(problem)
            node._parameter_overrides[spec.name] = _widened(spec, override)
        if spec.is_array and not spec.default:
            _declare_empty_array(node, spec)
            continue
        node.declare_parameter(spec.name, spec.default, spec.descriptor())
    return current_values(node, specs)


class _TypedParameters:
    """
    A node's typed parameters: what rclpy's static typing would refuse, handled first.

    One per node (rclpy joins the lists its pre-set callbacks return). Before rclpy checks the
    types, :meth:`pre_set` widens an integer given for a double (YAML and ``ros2 param set``
    write 10 for 10.0) and replaces a value of a wrong type by the current one, noting the
    problem; :meth:`refuse` then refuses that set with the problem in words (``parameter 'k_r':
    expected double, got string``). The declared type never changes.
    """

    def __init__(self, node: Node):
        self.node = node
        self.specs: dict[str, ParamSpec] = {}
        self.problems: dict[str, str] = {}

    @classmethod
    def of(cls, node: Node) -> '_TypedParameters':
        typed = getattr(node, '_ros_support_typed', None)
        if typed is None:
            typed = cls(node)
            node._ros_support_typed = typed
            node.add_pre_set_parameters_callback(typed.pre_set)
            node.add_on_set_parameters_callback(typed.refuse)
        return typed

    def pre_set(self, params: list[Parameter]) -> list[Parameter]:
        self.problems = {}
        out = []
        for param in params:
            spec = self.specs.get(param.name)
            problem = spec is not None and type_problem(spec, param.type_)
            if problem and self.node.has_parameter(param.name):
                self.problems[param.name] = problem
                out.append(self.node.get_parameter(param.name))
            else:
                out.append(param if spec is None else _widened(spec, param))
        return out

    def refuse(self, params: list[Parameter]) -> SetParametersResult:
        for param in params:
            if param.name in self.problems:
                return SetParametersResult(successful=False,
                                           reason=self.problems.pop(param.name))
        return SetParametersResult(successful=True)


def _widened(spec: ParamSpec, param: Parameter) -> Parameter:
    """Return ``param`` as its spec's type when it is a widening that spec takes."""
    if param.type_ == spec.param_type or param.type_ == Parameter.Type.NOT_SET:
        return param
    if (spec.param_type, param.type_) in _ACCEPTED or (
            param.type_ == Parameter.Type.STRING_ARRAY and not list(param.value)):
        return Parameter(param.name, spec.param_type,
                         _as_spec_type(spec, _plain(param.value)))
    return param


# rclpy has no public API for these: the parameters a node was given (params files and -p,
# before it declares them) and the ones it declared. Read here only.
def given_names(node: Node) -> set[str]:
    """Return the names of the parameters ``node`` was given (params files and ``-p``)."""
    return set(node._parameter_overrides)


def declared_names(node: Node) -> set[str]:
    """Return the names of the parameters ``node`` declared (rclpy's own included)."""
    return set(node._parameters)


def _declare_empty_array(node: Node, spec: ParamSpec) -> None:
    """
    Declare an array whose default is empty with a typed empty value.

    Declared by type alone it would stay unset, and rclpy then answers a whole GetParameters
    request (what `ros2 param dump` sends) with nothing; declared with ``[]`` it would become a
    byte array. rclpy's own declare step (``_declare_parameter_common``) is the only one that
    takes an explicitly typed value.
    """
    descriptor = spec.descriptor()
    if spec.name in given_names(node):
        node.declare_parameter(spec.name, spec.param_type, descriptor)
    else:
        node._declare_parameter_common([Parameter(spec.name, spec.param_type, [])],
                                       {spec.name: descriptor})


def current_values(node: Node, specs: Iterable[ParamSpec]) -> dict[str, Any]:
    """
    Return the current values of declared ``specs``.

    Arrays as lists, an unset array as its default, integers given for doubles as floats.
    """
    values = {}
    for spec in specs:
        try:
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:
            value = spec.default
        values[spec.name] = _as_spec_type(spec, _plain(value))
    return values


def _as_spec_type(spec: ParamSpec, value: Any) -> Any:
    if spec.param_type == Parameter.Type.DOUBLE and isinstance(value, int) \
            and not isinstance(value, bool):
        return float(value)
    if spec.param_type == Parameter.Type.DOUBLE_ARRAY and isinstance(value, list):
        return [float(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Parameter arrays (array.array or list) as lists, other values unchanged."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def declare_validated(node: Node, specs: Sequence[ParamSpec],
                      validate: Callable[[Mapping[str, Any]], Settings],
                      apply: Callable[[Settings], None]) -> Settings:
    """
    Declare ``specs``, return ``validate(values)`` and keep it valid at run time.

    A ``ValueError`` from ``validate`` at start-up propagates (the node cannot start with a
    bad configuration); at run time it rejects the change with its message as the reason.
    After an accepted change to any of ``specs``, ``apply(validate(new values))`` runs.
    """
    settings = validate(declare(node, specs))
    names = {spec.name for spec in specs}

    by_name = {spec.name: spec for spec in specs}

    def check(params: list[Parameter]) -> SetParametersResult:
        for p in params:
            problem = p.name in by_name and type_problem(by_name[p.name], p.type_)
            if problem:
                return SetParametersResult(successful=False, reason=problem)
        changed = {p.name: _as_spec_type(by_name[p.name], _plain(p.value))
                   for p in params if p.name in names}
        if not changed:
            return SetParametersResult(successful=True)
        try:
            validate({**current_values(node, specs), **changed})
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        return SetParametersResult(successful=True)

    def apply_changes(params: list[Parameter]) -> None:
        if any(p.name in names for p in params):
            apply(validate(current_values(node, specs)))

    node.add_on_set_parameters_callback(check)
    node.add_post_set_parameters_callback(apply_changes)
    return settings


def markdown_table(specs: Iterable[ParamSpec]) -> str:
    """Return the parameter table of ``specs``: name, default, range, description per row."""
    rows = ['| parameter | default | range | description |', '|---|---|---|---|']
    for spec in specs:
        name = f'`{spec.name}`' + (' (read-only)' if spec.read_only else '')
        low = spec.low is not None and f'{">" if spec.strict else "≥"} {_cell(spec.low)}'
        high = spec.high is not None and f'{"<" if spec.high_strict else "≤"} {_cell(spec.high)}'
        if low and high and not spec.strict and not spec.high_strict:
            bounds = f'{_cell(spec.low)} – {_cell(spec.high)}'
        else:
            bounds = ', '.join(b for b in (low, high) if b)
        description = spec.description.replace('|', '\\|')
        rows.append(f'| {name} | {_cell(spec.default)} | {bounds} | {description} |')
    return '\n'.join(rows) + '\n'


def parameters_help(specs: Iterable[ParamSpec]) -> str:
    """
    Return the parameters of a ``--help``: one entry per spec, as the parameter tables give them.

    Name, type, default, range and read-only on one line, the description on the next (plain
    ASCII, for any terminal).
    """
    lines = []
    for spec in specs:
        facts = [_TYPE_WORDS[spec.param_type], f'default {_plain_cell(spec.default)}']
        if spec.low is not None:
            facts.append(f'{">" if spec.strict else ">="} {_number(spec.low)}')
        if spec.high is not None:
            facts.append(f'{"<" if spec.high_strict else "<="} {_number(spec.high)}')
        if spec.read_only:
            facts.append('read-only')
        lines.append(f'  {spec.name} ({", ".join(facts)})')
        lines += textwrap.wrap(spec.description, width=HELP_WIDTH, initial_indent=' ' * 6,
                               subsequent_indent=' ' * 6)
    return '\n'.join(lines) + '\n'


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f'{value:g}'


def _plain_cell(value: Any) -> str:
    return repr(value) if isinstance(value, str) else _cell(value)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return f'{value}'.lower()
    if isinstance(value, float):
        return 'NaN' if math.isnan(value) else number_text(value)
    if isinstance(value, str):
        return f"`'{value}'`" if value else "`''`"
    if isinstance(value, (list, tuple)):
        return '[' + ', '.join(_cell(v) for v in value) + ']'
    return str(value)
