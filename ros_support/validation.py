"""Validation helpers shared by every settings object of both packages (no rclpy)."""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import re
from typing import Any, Iterable, Mapping, TypeVar

import yaml

Settings = TypeVar('Settings')

DOMAIN_IDS = (0, 232)  # the ROS_DOMAIN_IDs Fast DDS accepts on one host


def finite_float(name: str, value: Any) -> float:
    """``value`` as a float; ``ValueError`` naming ``name`` if it is not a finite number."""
    return bounded(name, value)


def domain_id_problem(text: str | None) -> str | None:
    """
    Return one line if ``text`` (the ``ROS_DOMAIN_ID`` environment value) is no domain id.

    Unset or empty is domain 0 (as rcl reads it); anything else must be a decimal integer in
    ``DOMAIN_IDS``, the rule ``--domain-id`` applies. rcl itself would answer ``abc`` with a
    traceback, 233 with a raw Fast DDS error, and take ``-1``, ``1e3`` or ``0x52`` silently.
    """
    if text is None or text == '':
        return None
    low, high = DOMAIN_IDS
    if re.fullmatch(r'[0-9]+', text) and low <= int(text) <= high:
        return None
    return (f'ROS_DOMAIN_ID must be an integer in {low}..{high} (the domains DDS accepts on '
            f'one host), got {text!r}; export a valid one or unset it (domain 0)')


def regular_expression(name: str, value: str) -> re.Pattern:
    """Return ``value`` compiled; ``ValueError`` naming the parameter if it is not one."""
    try:
        return re.compile(value)
    except re.error as error:
        raise ValueError(f'{name} {value!r} is not a regular expression: {error}') from None


def bounded(name: str, value: Any, low: float | None = None, high: float | None = None,
            strict: bool = False, high_strict: bool = False) -> float:
    """
    Return ``value`` as a finite float within the bounds: the one check of a bounded number.

    ``ValueError`` names the rule: '<name> must be a number, got ...', '... must be finite',
    '... must be > 0, got -1.0' (``strict``: the low bound excluded), '... must be < 1, got 1.0'
    (``high_strict``). Every settings object, scenario, CLI option and node parameter of both
    packages checks its numbers through this.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'{name} must be a number, got {value!r}')
    value = float(value)
    rule = broken_rule(value, low, high, strict, high_strict)
    if rule:
        raise ValueError(f'{name} {rule}, got {value}')
    return value


def broken_rule(value: float, low: float | None = None, high: float | None = None,
                strict: bool = False, high_strict: bool = False) -> str | None:
    """Return the rule ``value`` breaks ('must be finite', 'must be > 0', ...), or None."""
    if not math.isfinite(value):
        return 'must be finite'
    if low is not None and (value < low or (strict and value == low)):
        return f'must be {">" if strict else ">="} {low:g}'
    if high is not None and (value > high or (high_strict and value == high)):
        return f'must be {"<" if high_strict else "<="} {high:g}'
    return None


def from_mapping(cls: type[Settings], values: Mapping[str, Any], what: str = '') -> Settings:
    """``cls(**values)`` for a dataclass; unknown names raise ``ValueError`` listing them."""
    what = what or f'{cls.__name__} field(s)'
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f'unknown {what}: {", ".join(unknown)} (known: {", ".join(sorted(known))})'
        )
    return cls(**values)


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (YAML says keys are unique)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _ in node.value:
                if key_node.tag == 'tag:yaml.org,2002:merge':
                    continue  # '<<: *base' may be overridden: that is its purpose
                key = self.construct_object(key_node, deep=True)
                try:
                    line = first.setdefault(key, key_node.start_mark.line)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if line != key_node.start_mark.line:
                    raise yaml.constructor.ConstructorError(
                        None, None, f'duplicate key {key!r} (first given on line {line + 1}): '
                        'give each key once', key_node.start_mark)
        return super().construct_mapping(node, deep)


# The bounds of every YAML input file the project reads (scenario, placement, safety area, sweep
# spec, fleet file, params file). PyYAML reads about 0.2 MiB per CPU second: a file of this
# size takes tens of seconds, a 60 MB one minutes; 100,000 placement points take about 3 MiB.
# An alias is counted as often as it is used (a kilobyte of nested aliases names billions).
MAX_YAML_BYTES = 4 << 20
MAX_YAML_VALUES = 1_000_000


def yaml_values(node) -> float:
    """
    Return how many values (scalars, sequences, mappings) a composed YAML document expands to.

    Every use of an alias counts its anchor's values again; a recursive alias is ``inf``. The
    walk visits each node once (no expansion), so a bomb costs no more than its text.
    """
    sizes: dict[int, float] = {}
    open_nodes: set[int] = set()
    stack = [(node, False)]
    while stack:
        current, finished = stack.pop()
        key = id(current)
        children = ([item for pair in current.value for item in pair]
                    if isinstance(current, yaml.MappingNode) else
                    current.value if isinstance(current, yaml.SequenceNode) else [])
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # an alias of an anchor it lies inside
            return math.inf
        open_nodes.add(key)
        stack.append((current, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(node)]


class _TooMany(yaml.YAMLError):
    """A document whose aliases expand it past ``MAX_YAML_VALUES`` (the message says how far)."""


class _BoundedLoader(UniqueKeyLoader):
    """:class:`UniqueKeyLoader` that refuses a document expanding past ``MAX_YAML_VALUES``."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_values(node)
        return node


def _check_values(node) -> None:
    values = yaml_values(node)
    if values > MAX_YAML_VALUES:
        raise _TooMany('an alias inside its own anchor expands it without end'
                       if math.isinf(values) else
                       f'its aliases expand it to {values:,} values, more than the '
                       f'{MAX_YAML_VALUES:,} a YAML input may hold')


def read_yaml(path, what: str, syntax_only: bool = False) -> Any:
    """
    Return the YAML document in file ``path`` (``what`` names it in errors).

    ``ValueError`` in one line: 'cannot read <what> <path>: <reason>' or '<what> <path> is not
    valid YAML (line L, column C): <problem>'. ``syntax_only`` composes the document without
    constructing it (tags such as launch_ros's ``!!python/tuple`` pass) and returns None.
    A key given twice in one mapping is refused (:class:`UniqueKeyLoader`), naming it; so is a
    file of more than ``MAX_YAML_BYTES`` (before it is read), and a document whose aliases
    expand it to more than ``MAX_YAML_VALUES`` values (:func:`yaml_values`, before it is built).
    """
    try:
        with open(path, 'rb') as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(MAX_YAML_BYTES + 1) if size <= MAX_YAML_BYTES else b''
            if size > MAX_YAML_BYTES or len(data) > MAX_YAML_BYTES:
                shown = f'{size / (1 << 20):.1f} MiB, ' if size > MAX_YAML_BYTES else ''
                raise ValueError(f'{what} {path} is {shown}more than the '
                                 f'{MAX_YAML_BYTES >> 20} MiB a YAML input may be')
            if syntax_only:
                _check_values(yaml.compose(data, Loader=yaml.SafeLoader))
                return None
            return yaml.load(data, Loader=_BoundedLoader)  # a SafeLoader
    except OSError as error:
        raise ValueError(f'cannot read {what} {path}: {error.strerror or error}') from None
    except _TooMany as error:
        raise ValueError(f'{what} {path}: {error}; refused before it was built') from None
    except RecursionError:
        raise ValueError(f'{what} {path} is not valid YAML: nested too deeply') from None
    except yaml.YAMLError as error:
        mark = getattr(error, 'problem_mark', None)
        where = f' (line {mark.line + 1}, column {mark.column + 1})' if mark else ''
        problem = getattr(error, 'problem', None) or str(error).splitlines()[0]
        raise ValueError(f'{what} {path} is not valid YAML{where}: {problem}') from None


def plain_text(text: str | None) -> str | None:
    """Return a docstring's text without its Sphinx markup (``x``, :func:`~.x`), for ``--help``."""
    if not text:
        return text
    text = re.sub(r':[a-z]+:`~?\.?([^`]+)`', lambda m: m.group(1).rsplit('.', 1)[-1], text)
    return text.replace('``', '')


class OneLineParser(argparse.ArgumentParser):
    """
    An ArgumentParser whose errors are one line (``prog: error: ...``) and exit 2.

    Its description and epilog are shown as plain text (a module docstring's Sphinx markup
    removed), and its subcommands' parsers are OneLineParsers too.
    """

    def __init__(self, *args, **kwargs):
        for key in ('description', 'epilog'):
            kwargs[key] = plain_text(kwargs.get(key))
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):
        kwargs.setdefault('parser_class', OneLineParser)
        return super().add_subparsers(**kwargs)

    def error(self, message: str):
        self.exit(2, f'{self.prog}: error: {message}\n')


def number(low: float | None = None, strict: bool = False, integer: bool = False,
           check=None):
    """
    Return an argparse ``type`` for a finite number with an optional lower bound.

    One rule per option, shared by every CLI: ``number(0, strict=True)`` for "> 0". ``check``
    (value -> value, ``ValueError`` '<name> must be ...') replaces the bound with a settings
    field's own rule.
    """
    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f'expected {"an integer" if integer else "a number"}, got {text!r}') from None
        if check is not None:
            try:
                return check(value)
            except ValueError as error:  # the option's name comes from argparse
                raise argparse.ArgumentTypeError(str(error).split(' ', 1)[1]) from None
        rule = broken_rule(value, low, strict=strict)
        if rule:  # the option's name comes from argparse
            raise argparse.ArgumentTypeError(f'{rule}, got {text}')
        return value
    return parse


# Parameters every rclpy node has without declaring them in its specs.
BUILTIN_PARAMETERS = ('use_sim_time', 'start_type_description_service')


def unknown_parameters(given: Mapping[str, Iterable[str]], declared: Iterable[str]) -> list[str]:
    """
    Return one phrase per parameter given to a node that no node of the graph declares.

    The one policy for a misspelt parameter: ``given`` maps a node's name to the parameters it
    was given (params files and ``-p``), ``declared`` is what the graph's nodes declare. A
    parameter of a shared ``/**`` section that another node declares is not unknown. Each phrase
    names the parameter, the node and the closest declared name: ``k_rr (given to
    /uav1/agent; did you mean k_r?)``.
    """
    known = set(declared) | set(BUILTIN_PARAMETERS)
    first: dict[str, str] = {}
    for node, names in given.items():
        for name in names:
            if name not in known and not name.startswith('qos_overrides.'):
                first.setdefault(name, node)
    phrases = []
    for name in sorted(first):
        close = difflib.get_close_matches(name, sorted(known), n=1)
        phrases.append(f'{name} (given to {first[name]}'
                       + (f'; did you mean {close[0]}?)' if close else ')'))
    return phrases
