"""
The controller and everything it stands on, free of middleware (no rclpy anywhere in here).

    from soliton_encirclement_ros.core import ControllerParams, Scenario, control_step
"""
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.controller import (
    agent_tick, AgentBroadcast, control_step, ControllerState, initial_state, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams, PRESETS
from soliton_encirclement_ros.core.metrics import compute_metrics, METRIC_NAMES
from soliton_encirclement_ros.core.scenario import initial_positions, load_scenario, Scenario

__all__ = ['agent_tick', 'AgentBroadcast', 'compute_metrics', 'control_step', 'ControllerParams',
           'ControllerState', 'initial_positions', 'initial_state', 'load_scenario',
           'METRIC_NAMES', 'PRESETS', 'Scenario', 'simulate_runs', 'TargetBroadcast']
