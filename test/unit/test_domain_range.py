"""The suite keeps to the DDS domain ids a lab gives it (``SOLITON_TEST_DOMAINS``)."""
import os
from pathlib import Path
import subprocess
import sys

import pytest

from support.domain_range import suite_domain_ids

ROOT = Path(__file__).resolve().parents[2]


def test_a_range_in_the_environment_is_the_suites_domains():
    assert suite_domain_ids(None, None) == list(range(1, 233))
    assert suite_domain_ids('100-104', None) == [100, 101, 102, 103, 104]
    assert suite_domain_ids('100-102,150', '101') == [100, 102, 150]  # never the user's own


@pytest.mark.parametrize('text', ['0-10', '200-240', 'a-b', '140-100', '5,,6'])
def test_a_range_outside_1_to_232_is_refused_naming_the_variable(text):
    with pytest.raises(ValueError, match=r'SOLITON_TEST_DOMAINS must be domain ids or ranges'):
        suite_domain_ids(text, None)


def test_the_module_domains_come_from_the_range():
    """With SOLITON_TEST_DOMAINS=201-202 the suite's conftest locks one of those two."""
    code = ('import sys; sys.path.insert(0, "test"); import conftest; '
            'print(conftest._lock_free_domain()[0])')
    env = {**os.environ, 'SOLITON_TEST_DOMAINS': '201-202'}
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() in (['201'], ['202']), done.stdout
    env['SOLITON_TEST_DOMAINS'] = '300-310'
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and 'SOLITON_TEST_DOMAINS must be' in done.stderr, done.stderr
