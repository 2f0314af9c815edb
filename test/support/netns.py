"""
Emulated hosts for multi-host tests.

Linux network namespaces joined by veth pairs and a bridge, with private addresses that exist only
inside the namespaces made here.

Topology: a "ground station" namespace holds the bridge ``br0`` (10.231.0.1/24); every other
host is a namespace with one veth (10.231.0.<10 + k>/24) whose peer sits in the ground station,
enslaved to the bridge. Multicast is routed on the LAN unless ``multicast=False``: then the
bridge floods no multicast to its ports (``mcast_flood off``), so no multicast frame of a host
reaches another, as on a WiFi network that drops multicast (run every process in a host then:
the bridge still delivers what the ground-station namespace itself sends). Cutting a host's
link sets its peer down: the host keeps its own interface and loopback (its local processes
still talk to each other), but nothing crosses.

Everything is named ``<prefix>-<pid>-...``, so a crashed earlier run is recognised (dead pid)
and removed by :func:`remove_stale`, and :meth:`EmulatedHosts.close` removes what it made even
after a failure.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

PREFIX = 'solitontest'
SUBNET = '10.231.0'


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(['ip', *args], capture_output=True, text=True, check=check, timeout=20)


def unavailable_reason() -> str | None:
    """Why emulated hosts cannot be made here, or None."""
    if shutil.which('ip') is None:
        return 'the ip command (iproute2) is not installed'
    if os.geteuid() != 0:
        return 'network namespaces need root (CAP_NET_ADMIN)'
    probe = f'{PREFIX}-{os.getpid()}-probe'
    result = _ip('netns', 'add', probe, check=False)
    if result.returncode != 0:
        return f'ip netns add failed: {result.stderr.strip()}'
    _ip('netns', 'del', probe, check=False)
    return None


def remove_stale() -> None:
    """Delete namespaces left by earlier runs whose process is gone."""
    listing = _ip('netns', 'list', check=False).stdout.split()
    for name in listing:
        parts = name.split('-')
        if len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit():
            try:
                os.kill(int(parts[1]), 0)
            except ProcessLookupError:
                _ip('netns', 'del', name, check=False)
            except PermissionError:
                pass


class EmulatedHosts:
    """A ground station ``'gs'`` and hosts named by the caller, each in its own namespace."""

    def __init__(self, hosts: list[str], multicast: bool = True) -> None:
        self.tag = f'{PREFIX}-{os.getpid()}'
        self.hosts = list(hosts)
        self.multicast = multicast  # False: the bridge forwards no multicast between hosts
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self._suffix = str(os.getpid() % 100000)

    def ns(self, host: str) -> str:
        return f'{self.tag}-{host}'

    def address(self, host: str) -> str:
        return f'{SUBNET}.1' if host == 'gs' else f'{SUBNET}.{10 + self.hosts.index(host) + 1}'

    def _peer(self, host: str) -> str:
        return f'sp{self.hosts.index(host)}x{self._suffix}'  # <= 15 characters

    def create(self) -> 'EmulatedHosts':
        gs = self.ns('gs')
        for host in ['gs', *self.hosts]:
            _ip('netns', 'add', self.ns(host))
            self.namespaces.append(self.ns(host))
            _ip('-n', self.ns(host), 'link', 'set', 'lo', 'up')
        _ip('-n', gs, 'link', 'add', 'br0', 'type', 'bridge', 'mcast_snooping', '0')
        _ip('-n', gs, 'addr', 'add', f'{SUBNET}.1/24', 'dev', 'br0')
        _ip('-n', gs, 'link', 'set', 'br0', 'up')
        multicast_routed = self.multicast
        if multicast_routed:
            _ip('-n', gs, 'route', 'add', '224.0.0.0/4', 'dev', 'br0')
        for host in self.hosts:
            inner, peer = f'sh{self.hosts.index(host)}x{self._suffix}', self._peer(host)
            _ip('link', 'add', inner, 'netns', self.ns(host), 'type', 'veth', 'peer', 'name', peer,
                'netns', gs)
            _ip('-n', self.ns(host), 'link', 'set', inner, 'name', 'eth0')
            _ip('-n', self.ns(host), 'addr', 'add', f'{self.address(host)}/24', 'dev', 'eth0')
            _ip('-n', self.ns(host), 'link', 'set', 'eth0', 'up')
            if multicast_routed:
                _ip('-n', self.ns(host), 'route', 'add', '224.0.0.0/4', 'dev', 'eth0')
            _ip('-n', gs, 'link', 'set', peer, 'master', 'br0')
            if not self.multicast:
                subprocess.run(['bridge', '-n', gs, 'link', 'set', 'dev', peer, 'mcast_flood',
                                'off'], capture_output=True, text=True, check=True, timeout=20)
            _ip('-n', gs, 'link', 'set', peer, 'up')
        return self

    def run(self, host: str, command: list[str], env: dict) -> subprocess.Popen:
        """Start ``command`` inside ``host``; its stdout is a pipe of text lines."""
        process = subprocess.Popen(['ip', 'netns', 'exec', self.ns(host), *command], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        self.processes.append(process)
        return process

    def multicast_flood(self) -> dict[str, bool]:
        """Return whether the bridge floods multicast to each host, by host name."""
        lines = subprocess.run(['bridge', '-n', self.ns('gs'), '-d', 'link', 'show'],
                               capture_output=True, text=True, check=True,
                               timeout=20).stdout.splitlines()
        flood = {}
        for host in self.hosts:
            for i, line in enumerate(lines[:-1]):
                if f' {self._peer(host)}@' in line:
                    flood[host] = ' mcast_flood on ' in f' {lines[i + 1]} '
        return flood

    def set_link(self, host: str, up: bool) -> None:
        _ip('-n', self.ns('gs'), 'link', 'set', self._peer(host), 'up' if up else 'down')

    def close(self) -> None:
        """Stop every process started here, then delete every namespace (and so every link)."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + 10.0
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for name in reversed(self.namespaces):
            _ip('netns', 'del', name, check=False)
        self.namespaces = []
