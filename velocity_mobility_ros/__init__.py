"""
The velocity mobility model: Twist in, Odometry out, under speed, acceleration, lag and limits.

``core`` is pure (the vectorised model, its limits, geometry, command timing); ``nodes`` holds
mobility_node, swarm_mobility_node and the message conversions. Nothing is imported here, so the
pure core stays free of rclpy.
"""
