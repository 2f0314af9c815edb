"""
Recording a live graph into a rosbag2 on pip-only machines (``ros2 bag record`` elsewhere).

    from soliton_encirclement_ros.recording import BagRecorder
"""
from soliton_encirclement_ros.recording.recorder import BagRecorder

__all__ = ['BagRecorder']
