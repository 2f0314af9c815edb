"""Entry-point helper shared by every node executable: init, build, spin, clean shutdown."""
from __future__ import annotations

import sys
from typing import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


def run_node(factory: Callable[..., Node], args=None, on_shutdown: Callable[[Node], None] | None = None) -> None:
    """Run one node until Ctrl-C/SIGTERM; a bad configuration exits 2 with one clear line."""
    rclpy.init(args=args)
    node = None
    try:
        node = factory()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (ValueError, ParameterException) as error:
        print(f'error: {error}', file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            if on_shutdown is not None:
                on_shutdown(node)
            node.destroy_node()
        rclpy.try_shutdown()
