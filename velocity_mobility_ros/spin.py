"""The one entry-point helper of every node executable: init, build, spin, clean shutdown."""
from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.node import Node

SPIN_SLICE_S = 0.2  # how soon main() notices a shutdown request


def spin_node(node_class: Callable[[], Node], args: list[str] | None = None,
              on_shutdown: Callable[[Node], None] | None = None) -> None:
    """rclpy.init, spin one ``node_class`` until Ctrl-C/SIGTERM or shutdown, clean up.

    A bad configuration (ValueError or a rejected parameter) logs one FATAL line naming it and
    exits 1. ``on_shutdown(node)`` runs before the node is destroyed (e.g. to write outputs).
    Uses the EventsExecutor: it drives ROS-time timers from ``/clock`` as the
    SingleThreadedExecutor does, at a lower CPU cost (see benchmarks/). Its ``spin()`` does
    not return on SIGINT/SIGTERM (rclpy 9.1), so spin in short slices until the context ends.
    """
    rclpy.init(args=args)
    node = None
    executor = EventsExecutor()
    try:
        try:
            node = node_class()
        except (ValueError, ParameterException) as error:
            name = getattr(node_class, '__name__', 'node')
            rclpy.logging.get_logger(name).fatal(f'invalid configuration: {error}')
            raise SystemExit(1) from error
        executor.add_node(node)
        while rclpy.ok():
            executor.spin_once(timeout_sec=SPIN_SLICE_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        if node is not None:
            if on_shutdown is not None:
                on_shutdown(node)
            node.destroy_node()
        rclpy.try_shutdown()
