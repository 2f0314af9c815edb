"""
Generic helpers for ROS 2 nodes and their command lines, shared by both packages.

- ``validation`` (no rclpy): one bounds check, settings from mappings, one-line CLI errors,
  YAML reading.
- ``signals`` (no rclpy): SIGINT/SIGTERM handlers that only record the request.
- ``ros_parameters`` (rclpy): parameter specs with descriptors and ranges, declared and
  validated once.
- ``spin`` (rclpy): the clean-shutdown entry point every executable uses.

Import the submodules directly, so the rclpy-free ones stay free of rclpy.
"""
