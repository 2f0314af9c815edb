"""
The soliton encirclement swarm: the controller, its nodes, simulators, analysis and PX4 bridge.

``core`` is pure (numpy, no rclpy), ``interface`` defines the wire, ``nodes`` and ``px4`` are
the ROS shells, ``sim`` the simulators, ``bringup`` the node-graph plan, ``recording`` and
``analysis`` the bags and run outputs. Import from the subpackages, e.g.
``from soliton_encirclement_ros.analysis import metrics_from_bag``; nothing is imported here,
so the pure parts stay free of rclpy.
"""
