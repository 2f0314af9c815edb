"""
Imported by the fork server of a sweep's local pool, and only there: :func:`server.start`.

``multiprocessing`` preloads it (``scheduling.FORK_SERVER_PRELOAD``) in the server before the
server forks any worker.
"""
from soliton_encirclement_ros.sim.sweep import server

server.start()
