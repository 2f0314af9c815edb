"""The mobility nodes (mobility_node, swarm_mobility_node) and their message conversions."""
