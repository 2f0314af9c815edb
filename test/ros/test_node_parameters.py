"""
Every node's parameters as `ros2 param` sees them.

A dump returns every value, and every writable parameter either takes effect (validated by the
start-up code) or is read-only.
"""
from dataclasses import fields
import math

import pytest
from rcl_interfaces.msg import ParameterType
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient

from ros_support.ros_parameters import declared_names
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from soliton_encirclement_ros.nodes.target_node import TargetNode
from velocity_mobility_ros.nodes.mobility_node import MobilityNode
from velocity_mobility_ros.nodes.swarm_mobility_node import SwarmMobilityNode

NODES = {
    'agent': lambda ctx: AgentNode(context=ctx, namespace='/uav1'),
    'target': lambda ctx: TargetNode(context=ctx, namespace='/target'),
    'metrics': lambda ctx: MetricsNode(context=ctx, namespace='/swarm'),
    'mobility': lambda ctx: MobilityNode(context=ctx, namespace='/uav1'),
    'swarm_mobility': lambda ctx: SwarmMobilityNode(context=ctx, parameter_overrides=[
        Parameter('vehicle_names', value=['uav1', 'uav2'])]),
}
BUILTIN = {'use_sim_time', 'start_type_description_service'}


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


@pytest.mark.parametrize('name', NODES)
def test_a_parameter_dump_returns_every_value(name, context):
    node = NODES[name](context)
    client_node = rclpy.create_node('dumper', context=context)
    executor = SingleThreadedExecutor(context=context)
    for n in (node, client_node):
        executor.add_node(n)
    try:
        client = AsyncParameterClient(client_node, node.get_fully_qualified_name())
        assert client.wait_for_services(timeout_sec=10.0)
        listed = client.list_parameters()
        executor.spin_until_future_complete(listed, timeout_sec=10.0)
        names = list(listed.result().result.names)
        got = client.get_parameters(names)
        executor.spin_until_future_complete(got, timeout_sec=10.0)
        values = got.result().values
        assert len(names) > 5 and len(values) == len(names)
        assert all(v.type != ParameterType.PARAMETER_NOT_SET for v in values)
    finally:
        executor.shutdown()
        client_node.destroy_node()
        node.destroy_node()


def changed_value(value, descriptor):
    """
    Return a different value inside the declared range.

    Where there is no range, a sensible one.
    """
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return {'world': 'body', 'command': 'velocity', 'reliable': 'best_effort'}.get(
            value, value + '_changed')
    if isinstance(value, int):
        rng = descriptor.integer_range
        return (rng[0].from_value + rng[0].to_value) // 2 if rng else value + 1
    if isinstance(value, float):
        rng = descriptor.floating_point_range
        if math.isnan(value):
            return 5.0
        candidate = value * 1.5 + 0.1
        if rng and candidate > rng[0].to_value:
            return 0.5 * (value + rng[0].to_value)
        return candidate
    return None  # arrays: read-only pose and vehicle lists


def settings_value(node, name):
    """Where each node keeps the validated value of a writable parameter."""
    for holder in ('_params', '_vehicle', '_interface', '_settings'):
        settings = getattr(node, holder, None)
        if settings is not None and hasattr(settings, name):
            return getattr(settings, name)
    raise AssertionError(f'{name} is writable but no settings object of the node holds it')


@pytest.mark.parametrize('name', NODES)
def test_every_writable_parameter_takes_effect_or_is_read_only(name, context):
    node = NODES[name](context)
    try:
        writable = []
        for param in sorted(declared_names(node) - BUILTIN):
            descriptor = node.describe_parameter(param)
            value = node.get_parameter(param).value
            new = changed_value(value, descriptor)
            if new is None:
                assert descriptor.read_only, f'{param}: array parameters must be read-only'
                continue
            [result] = node.set_parameters([Parameter(param, value=new)])
            if descriptor.read_only:
                assert not result.successful and 'read-only' in result.reason, (param, result)
                continue
            if not result.successful and isinstance(new, float) and value > 0.0:
                # refused by a rule across parameters (ring_gains_from below ring_gains_full):
                # a smaller change, still inside the declared range
                new = 0.5 * value
                [result] = node.set_parameters([Parameter(param, value=new)])
            assert result.successful, (param, new, result.reason)
            assert settings_value(node, param) == new, param
            writable.append(param)
        expected = {'agent': len(fields(ControllerParams)), 'target': 0, 'metrics': 0}
        if name in expected:
            assert len(writable) == expected[name], writable
    finally:
        node.destroy_node()


def test_a_wrong_type_is_named_in_words(context):
    node = NODES['agent'](context)
    try:
        [result] = node.set_parameters([Parameter('k_r', value='fast')])
        assert not result.successful
        assert result.reason == "parameter 'k_r': expected double, got string"
        [widened] = node.set_parameters([Parameter('k_r', value=2)])  # YAML's 2 for 2.0
        assert widened.successful and node._params.k_r == 2.0
    finally:
        node.destroy_node()


def test_a_refused_set_leaves_the_parameter_its_type(context):
    """
    ``ros2 param describe`` still says double after ``ros2 param set ... k_r xyz`` is refused.

    Declared with dynamic typing, rclpy took the refused value's type into the descriptor.
    """
    node = NODES['agent'](context)
    try:
        double = Parameter.Type.DOUBLE
        [refused] = node.set_parameters([Parameter('k_r', value='xyz')])
        assert not refused.successful
        [descriptor] = node.describe_parameters(['k_r'])
        assert descriptor.type == double.value and not descriptor.dynamic_typing
        assert node.get_parameter('k_r').type_ == double
        [widened] = node.set_parameters([Parameter('k_r', value=3)])
        assert widened.successful and node.get_parameter('k_r').type_ == double
        assert node.describe_parameters(['k_r'])[0].type == double.value
    finally:
        node.destroy_node()
