"""
The swarm's ROS nodes: thin shells that convert messages, hold parameters and call ``core``.

agent_node, target_node, metrics_node and recorder_node are executables (``main``); settings
holds their typed, validated settings (pure), swarm_topics the shared subscriptions, markers
the RViz markers. Nothing is imported here, so importing ``settings`` needs no rclpy.
"""
