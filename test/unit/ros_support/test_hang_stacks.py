"""A test that gives up on a program that hangs says where it hung (SIGUSR1, StopRequest)."""
import os
from pathlib import Path
import sys

import pytest

from support.waits import Running

ROOT = Path(__file__).resolve().parents[3]

HANGS = ('import sys, threading\n'
         'from ros_support.signals import StopRequest\n'
         'StopRequest("hangs").install()\n'
         'def stuck_here():\n'
         '    print("up", file=sys.stderr, flush=True)\n'
         '    threading.Event().wait()\n'
         'stuck_here()\n')


def test_a_program_past_its_deadline_prints_its_stacks_into_the_failure():
    with Running([sys.executable, '-c', HANGS],
                 env={**os.environ, 'PYTHONPATH': str(ROOT)}) as program:
        program.wait_for_line('up')
        with pytest.raises(AssertionError) as failure:
            program.wait(timeout=0.5)
    message = str(failure.value)
    assert 'did not exit within 0 s' in message  # the deadline, as before
    assert 'its threads, asked with SIGUSR1 after the deadline' in message
    assert 'most recent call first' in message and 'in stuck_here' in message, message
    assert program.process.returncode is not None  # and it was killed
