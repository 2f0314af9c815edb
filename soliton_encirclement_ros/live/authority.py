"""
Who may command the fleet through the live view: the commanding token and each call's request.

The live view offers the fleet's Trigger services to Foxglove clients. Those that move vehicles
(every offered service but the read-only ones, ``READ_ONLY_SERVICES``: the check) are offered
only when the operator enables commanding with a secret token, read from a file or an
environment variable (never a parameter's value, which any node of the graph can read, and
never logged). A client presents it in each call's JSON request, ``{"token": "..."}``:
foxglove-sdk 0.30 has no per-connection authentication, and its parameters are shared by every
client. A request that is not a JSON object (garbage, or an empty payload), has a field other
than ``token``, or a missing or wrong token is refused before anything is called
(:class:`CallRefused`, one line that never repeats the request). No rclpy here.
"""
from __future__ import annotations

import hmac
import json
import os
from pathlib import Path
import re
from typing import Mapping, Optional

# The offered services that only read: every other one moves vehicles and needs the token.
READ_ONLY_SERVICES = '^/fleet/check$'
TOKEN_FIELD = 'token'
TOKEN_ENV = 'SOLITON_LIVE_VIEW_TOKEN'  # the token, when no token file is given
MIN_TOKEN_LENGTH = 16  # characters: a token short enough to guess is refused
REQUEST_ENCODING = 'json'
# The JSON schemas of the requests, as Foxglove's Service Call panel shows them.
READ_ONLY_REQUEST_SCHEMA = {'type': 'object', 'properties': {}, 'additionalProperties': False}
COMMAND_REQUEST_SCHEMA = {'type': 'object', 'properties': {TOKEN_FIELD: {'type': 'string'}},
                          'required': [TOKEN_FIELD], 'additionalProperties': False}


class CallRefused(Exception):
    """A service call refused before anything was called: one line saying why."""


def is_read_only(service: str) -> bool:
    """Whether ``service`` only reads (callable with no token); every other one commands."""
    return re.search(READ_ONLY_SERVICES, service) is not None


def load_token(token_file: str = '', environ: Optional[Mapping[str, str]] = None) -> str:
    """
    Return the commanding token: the content of ``token_file``, else ``$SOLITON_LIVE_VIEW_TOKEN``.

    Surrounding white space (a file's final newline) is dropped. ``ValueError`` in one line when
    there is none, it cannot be read, or it is shorter than ``MIN_TOKEN_LENGTH``; the line never
    contains the token.
    """
    environ = os.environ if environ is None else environ
    if token_file:
        where = f'command_token_file {token_file}'
        try:
            token = Path(token_file).read_text(encoding='utf-8').strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise ValueError(f'{where}: cannot read the commanding token: {reason}') from None
    else:
        where = f'${TOKEN_ENV}'
        token = environ.get(TOKEN_ENV, '').strip()
        if not token:
            raise ValueError(
                f'commanding needs a secret token: give command_token_file (a file holding it) '
                f'or set {TOKEN_ENV}; commanding stays off without one')
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f'{where}: the commanding token must be at least {MIN_TOKEN_LENGTH} '
                         f'characters, got {len(token)}')
    if any(c.isspace() for c in token):
        raise ValueError(f'{where}: the commanding token must be one word (no white space)')
    return token


def check_request(service: str, encoding: str, payload: bytes,
                  token: Optional[str]) -> None:
    """
    Refuse (:class:`CallRefused`) a call of ``service`` that must not be made; else return.

    ``token``: the commanding token, or None (commanding off: only read-only services). The
    request must be a JSON object: ``{}`` for a read-only service (a token is allowed, not
    looked at), ``{"token": TOKEN}`` for one that commands, the token compared in constant time.
    """
    if encoding != REQUEST_ENCODING:
        raise CallRefused(f'{service}: refused: the request must be encoded as '
                          f'{REQUEST_ENCODING}, got {encoding!r}; nothing was called')
    if not payload.strip():
        raise CallRefused(f'{service}: refused: the request is empty; send a JSON object '
                          f'({_expected(service)}); nothing was called')
    try:
        request = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        request = None
    if not isinstance(request, dict):
        raise CallRefused(f'{service}: refused: the request is not a JSON object; send '
                          f'{_expected(service)}; nothing was called')
    if set(request) - {TOKEN_FIELD}:  # the names are not repeated: one may be a secret
        raise CallRefused(f'{service}: refused: the request has a field it does not take; '
                          f'send {_expected(service)}; nothing was called')
    if is_read_only(service):  # a token given is not looked at
        return
    if token is None:
        raise CallRefused(f'{service}: refused: commanding is off in this live view; nothing '
                          'was called')
    given = request.get(TOKEN_FIELD)
    if not isinstance(given, str) or not given:
        raise CallRefused(f'{service}: refused: no token; a command needs '
                          f'{_expected(service)}; nothing was called')
    if not hmac.compare_digest(given.encode('utf-8'), token.encode('utf-8')):
        raise CallRefused(f'{service}: refused: wrong token; nothing was called')


def _expected(service: str) -> str:
    return '{}' if is_read_only(service) else f'{{"{TOKEN_FIELD}": "<the commanding token>"}}'
