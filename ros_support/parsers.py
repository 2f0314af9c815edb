"""
The argument parser an executable builds, without running it.

Each CLI builds its parser in its ``main``; :func:`captured_parser` calls ``main`` with the
parsing replaced by a capture, so the CLI reference page (docs/hooks/generated.py) and the test
that parses every documented command line (test/unit/test_docs_commands.py) read the very
parser the executable uses. Nothing here needs MkDocs.
"""
from __future__ import annotations

import argparse
import importlib
from typing import Callable


class _Captured(Exception):
    """Raised in place of parsing: carries the parser ``main`` built."""

    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__(parser.prog)
        self.parser = parser


def captured_parser(main: Callable, *args) -> argparse.ArgumentParser | None:
    """Return the parser ``main(*args)`` builds (stopped where it would parse), or None."""
    def capture(self, args=None, namespace=None):
        raise _Captured(self)
    original = argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_known_args = capture
    try:
        main(*args)
    except _Captured as captured:
        return captured.parser
    finally:
        argparse.ArgumentParser.parse_known_args = original
    return None


def executable_parser(name: str) -> argparse.ArgumentParser:
    """Return executable ``name``'s parser (``LookupError``: no such executable, or no parser)."""
    from ros_support.entry import EXECUTABLES
    if name not in EXECUTABLES:
        raise LookupError(f'no executable {name!r} (ros_support.entry.EXECUTABLES)')
    parser = captured_parser(importlib.import_module(EXECUTABLES[name]).main, [])
    if parser is None:
        raise LookupError(f'{name} parsed no arguments')
    return parser
