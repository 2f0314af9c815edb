"""
Bags written with rosbags' own Writer (no code of ours on the writing side), either storage.

Vehicles on the desired circle around a still target, with their agent states in any of the
wire layouts: ``test_analysis.py`` and ``acceptance/test_analyze_run_acceptance.py`` read them.
"""
import math

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_typestore, Stores

TS = get_typestore(Stores.ROS2_KILTED)
T = TS.types
RADIUS = 20.0
TARGET = np.array([3.0, -2.0])
OMEGA = 0.2  # rad/s around the target
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
ODOM, STATES, FLOAT = (
    'nav_msgs/msg/Odometry',
    'std_msgs/msg/Float64MultiArray',
    'std_msgs/msg/Float64',
)
DIAGNOSTICS = 'diagnostic_msgs/msg/DiagnosticArray'


def odometry(t, name, xy, yaw, forward_speed):
    """Odometry as a vehicle publishes it: pose in world, twist in the body frame."""
    sec, nsec = divmod(int(round(t * 1e9)), 10**9)
    header = T['std_msgs/msg/Header'](
        stamp=T['builtin_interfaces/msg/Time'](sec=sec, nanosec=nsec), frame_id='world'
    )
    pose = T['geometry_msgs/msg/Pose'](
        position=T['geometry_msgs/msg/Point'](x=float(xy[0]), y=float(xy[1]), z=5.0),
        orientation=T['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=math.sin(yaw / 2),
                                                      w=math.cos(yaw / 2)))
    vector = T['geometry_msgs/msg/Vector3']
    twist = T['geometry_msgs/msg/Twist'](linear=vector(x=forward_speed, y=0.0, z=0.0),
                                         angular=vector(x=0.0, y=0.0, z=0.0))
    return T[ODOM](
        header=header, child_frame_id=f'{name}/base_link',
        pose=T['geometry_msgs/msg/PoseWithCovariance'](pose=pose, covariance=np.zeros(36)),
        twist=T['geometry_msgs/msg/TwistWithCovariance'](twist=twist, covariance=np.zeros(36)))


# The agent-state wire layouts, written out here independently of the package's interface:
# v4 (now: ``member``, 0 for a failed agent's presence broadcast), v3 (archived: the stamp as
# integer seconds and nanoseconds) and v2 (archived: float seconds).
STATE_LABEL = ('agent_state.v4:agent_id,incarnation,seq,stamp_sec,stamp_nanosec,px,py,pz,vx,vy,'
               'vz,u,u_ss,member')
STATE_LABEL_V3 = ('agent_state.v3:agent_id,incarnation,seq,stamp_sec,stamp_nanosec,px,py,pz,vx,'
                  'vy,vz,u,u_ss')
STATE_LABEL_V2 = 'agent_state.v2:agent_id,incarnation,seq,stamp,px,py,pz,vx,vy,vz,u,u_ss'


def agent_state(agent_id, seq, t, xy, velocity, label=STATE_LABEL, member=True):
    stamp = (list(divmod(int(round(t * 1e9)), 10**9))
             if label.startswith(('agent_state.v3', 'agent_state.v4')) else [t])
    values = [agent_id, 7, seq, *stamp, xy[0], xy[1], 5.0, velocity[0], velocity[1], 0.0, 0.5,
              0.5] + ([float(member)] if label.endswith(',member') else [])
    if not label.startswith('agent_state.v'):  # the v1 layout: no incarnation
        del values[1]
    layout = T['std_msgs/msg/MultiArrayLayout'](
        dim=[T['std_msgs/msg/MultiArrayDimension'](label=label, size=len(values),
                                                   stride=len(values))], data_offset=0)
    return T[STATES](layout=layout, data=np.array(values, dtype=float))


def write_circle_bag(path, storage='mcap', agents=6, duration=2.0, rate=20.0, failed_after=None,
                     state_label=STATE_LABEL, engine_statuses=False):
    """
    ``agents`` vehicles uav1..

    on the desired circle at equal angles, turning around a still target, plus /swarm/agent_states.
    With ``failed_after`` an extra vehicle uav<agents+1> sits on the target and fails at that
    time (it keeps publishing odometry): from then on it sends presence broadcasts (``member``
    0) in a layout that has them, else nothing. ``engine_statuses``: /diagnostics at 1 Hz as
    ``swarm_sim --engine`` publishes them (one per agent, ok, no agent state).
    """
    with Writer(path, version=9, storage_plugin=STORAGES[storage]) as writer:
        connections = {}

        def write(topic, msgtype, t, msg):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TS)
            writer.write(connections[topic], int(round(t * 1e9)), TS.serialize_cdr(msg, msgtype))

        for k in range(int(duration * rate) + 1):
            t = 10.0 + k / rate
            write('/target/odom', ODOM, t, odometry(t, 'target', TARGET, 0.0, 0.0))
            for i in range(agents):
                angle = 2 * math.pi * i / agents + OMEGA * t
                xy = TARGET + RADIUS * np.array([math.cos(angle), math.sin(angle)])
                heading = angle + math.pi / 2  # flying tangentially, nose first
                speed = OMEGA * RADIUS
                write(f'/uav{i + 1}/odom', ODOM, t, odometry(t, f'uav{i + 1}', xy, heading, speed))
                write('/swarm/agent_states', STATES, t, agent_state(
                    i + 1, k, t, xy, speed * np.array([math.cos(heading), math.sin(heading)]),
                    state_label))
            if failed_after is not None:
                name = f'uav{agents + 1}'
                write(f'/{name}/odom', ODOM, t, odometry(t, name, TARGET, 0.0, 0.0))
                member = t - 10.0 < failed_after
                if member or state_label.endswith(',member'):
                    write('/swarm/agent_states', STATES, t, agent_state(
                        agents + 1, k, t, TARGET, np.zeros(2), state_label, member))
            write('/swarm/metrics/E_r', FLOAT, t, T[FLOAT](data=0.0))
            if engine_statuses and k % int(rate) == 0:
                status = T['diagnostic_msgs/msg/DiagnosticStatus']
                write('/diagnostics', DIAGNOSTICS, t, T[DIAGNOSTICS](
                    header=odometry(t, '', TARGET, 0.0, 0.0).header, status=[
                        status(level=0, name=f'/uav{i + 1}/agent', message='ok',
                               hardware_id=f'uav{i + 1}', values=[]) for i in range(agents)]))
    return path
