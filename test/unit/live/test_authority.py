"""The live view's commanding token and request checks, on plain inputs (no rclpy, no server)."""
import pytest

from soliton_encirclement_ros.live.authority import (
    CallRefused, check_request, is_read_only, load_token, MIN_TOKEN_LENGTH, TOKEN_ENV)

TOKEN = 'correct-horse-battery-staple-42'


def test_the_token_comes_from_a_file_or_the_environment_and_is_never_in_an_error(tmp_path):
    path = tmp_path / 'token'
    path.write_text(f'  {TOKEN}\n')
    assert load_token(str(path), environ={}) == TOKEN
    assert load_token('', environ={TOKEN_ENV: TOKEN}) == TOKEN
    assert load_token(str(path), environ={TOKEN_ENV: 'x' * 40}) == TOKEN  # the file wins
    with pytest.raises(ValueError, match=f'commanding needs a secret token: .* {TOKEN_ENV}'):
        load_token('', environ={})
    with pytest.raises(ValueError, match='cannot read the commanding token: No such file'):
        load_token(str(tmp_path / 'missing'), environ={})
    short = 'abc123'
    path.write_text(short)
    with pytest.raises(ValueError) as error:
        load_token(str(path), environ={})
    assert str(error.value) == (f'command_token_file {path}: the commanding token must be at '
                                f'least {MIN_TOKEN_LENGTH} characters, got 6')
    assert short not in str(error.value)
    path.write_text('two words-that-are-long-enough')
    with pytest.raises(ValueError, match='one word') as error:
        load_token(str(path), environ={})
    assert 'words-that' not in str(error.value)


@pytest.mark.parametrize('service, encoding, payload, words', [
    ('/fleet/engage', 'json', b'\x00garbage', 'the request is not a JSON object'),
    ('/fleet/engage', 'json', b'', 'the request is empty'),
    ('/fleet/engage', 'json', b'  \n', 'the request is empty'),
    ('/fleet/engage', 'json', b'"token"', 'the request is not a JSON object'),
    ('/fleet/engage', 'cbor', b'{}', "must be encoded as json, got 'cbor'"),
    ('/fleet/land', 'json', b'{}', 'no token'),
    ('/fleet/land', 'json', b'{"token": ""}', 'no token'),
    ('/fleet/land', 'json', b'{"token": null}', 'no token'),
    ('/fleet/hold', 'json', b'{"token": "correct-horse-battery-staple-43"}', 'wrong token'),
    ('/fleet/hold', 'json', b'{"token": "correct-horse-battery-staple-42", '
     b'"correct-horse-battery-staple-42": 1}', 'a field it does not take'),
    ('/fleet/check', 'json', b'not json', 'the request is not a JSON object'),
    ('/fleet/check', 'json', b'{"force": true}', 'a field it does not take'),
])
def test_a_bad_request_is_refused_in_one_line_never_repeating_it(
        service, encoding, payload, words):
    with pytest.raises(CallRefused) as refused:
        check_request(service, encoding, payload, TOKEN)
    text = str(refused.value)
    assert text.startswith(f'{service}: refused: ') and words in text, text
    assert text.endswith('nothing was called') and '\n' not in text
    assert TOKEN not in text and 'staple' not in text


def test_the_right_token_commands_and_reading_needs_none():
    check_request('/fleet/engage', 'json', b'{"token": "%s"}' % TOKEN.encode(), TOKEN)
    check_request('/fleet/check', 'json', b'{}', None)
    check_request('/fleet/check', 'json', b'{"token": "anything"}', None)  # not looked at
    with pytest.raises(CallRefused, match='commanding is off'):
        check_request('/fleet/hold', 'json', b'{"token": "%s"}' % TOKEN.encode(), None)
    assert is_read_only('/fleet/check')
    assert not any(is_read_only(f'/fleet/{a}') for a in ('engage', 'land', 'hold', 'abort'))
