"""
Synthetic flights with known parameters, for the fit_mobility tests (pure: no rclpy).

:func:`fly` flies the project's own model (``velocity_mobility_ros.core.model.step``) through
step, ramp and chirp commands sent at ``cmd_rate``, with a transport delay (a command takes
effect from the first step after it arrived plus ``delay``, as the mobility node applies it)
and Gaussian noise on the odometry velocity. :func:`write_ros_bag` records it as this package
records a vehicle (``/<name>/cmd_vel`` Twist, ``/<name>/odom`` Odometry, twist in the body
frame); :func:`write_px4_bag` as a PX4 flight (``/fmu/in/trajectory_setpoint``,
``/fmu/out/vehicle_odometry``, NED), with the PX4 message definitions registered in rosbags and
embedded in the MCAP file, so no px4_msgs is needed.
"""
from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_types_from_msg, get_typestore, Stores

from velocity_mobility_ros.core.vehicle import VehicleParams

# px4_msgs message definitions (PX4/px4_msgs, msg/*.msg, main), the fields the fit reads.
TRAJECTORY_SETPOINT_MSG = """\
uint32 MESSAGE_VERSION = 0
uint64 timestamp
float32[3] position
float32[3] velocity
float32[3] acceleration
float32[3] jerk
float32 yaw
float32 yawspeed
"""
VEHICLE_ODOMETRY_MSG = """\
uint32 MESSAGE_VERSION = 0
uint64 timestamp
uint64 timestamp_sample
uint8 pose_frame
uint8 POSE_FRAME_UNKNOWN = 0
uint8 POSE_FRAME_NED = 1
uint8 POSE_FRAME_FRD = 2
float32[3] position
float32[4] q
uint8 velocity_frame
uint8 VELOCITY_FRAME_UNKNOWN = 0
uint8 VELOCITY_FRAME_NED = 1
uint8 VELOCITY_FRAME_FRD = 2
uint8 VELOCITY_FRAME_BODY_FRD = 3
float32[3] velocity
float32[3] angular_velocity
float32[3] position_variance
float32[3] orientation_variance
float32[3] velocity_variance
uint8 reset_counter
int8 quality
"""
START_NS = 1_700_000_000 * 10**9  # a wall-clock epoch, as a real recording has


@dataclass
class Recording:
    """What was commanded and measured (world ENU), times in ns from START_NS."""

    cmd_ns: np.ndarray     # (K,)
    cmd_v: np.ndarray      # (K, 3)
    odom_ns: np.ndarray    # (M,)
    position: np.ndarray   # (M, 3)
    velocity: np.ndarray   # (M, 3) measured (noisy)
    true_velocity: np.ndarray
    yaw: np.ndarray        # (M,)


def _chirp(t, t0, t1, amp, f0, f1):
    s = np.clip(t - t0, 0.0, t1 - t0)
    rate = (f1 - f0) / (t1 - t0)
    return np.where((t >= t0) & (t < t1), amp * np.sin(2 * np.pi * (f0 * s + 0.5 * rate * s * s)),
                    0.0)


def rich_commands(t: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Return steps, ramps and chirps on both planes (60 s), world ENU [m/s], times ``scale``."""
    v = np.zeros((t.size, 3))
    vx, vy, vz = v[:, 0], v[:, 1], v[:, 2]
    vx += np.where((t >= 1) & (t < 5), 1.0, 0.0)             # small step: the lag
    vx += np.where((t >= 5) & (t < 11), 9.0, 0.0)            # big step: acc, then speed limit
    vy += np.where((t >= 14) & (t < 22), (t - 14) * 0.5, 0)  # ramp
    vx += _chirp(t, 22, 34, 1.2, 0.1, 1.2)                   # chirp: lag and delay
    vx += np.where((t >= 34) & (t < 40), -3.0, 0.0)
    vy += np.where((t >= 34) & (t < 40), 3.0, 0.0)           # diagonal step
    vy += np.where((t >= 42) & (t < 47), -0.8, 0.0)
    vx += np.where((t >= 47) & (t < 54), 8.0, 0.0)
    vx += _chirp(t, 54, 60, 1.0, 0.2, 1.0)
    vz += np.where((t >= 2) & (t < 6), 0.6, 0.0)
    vz += np.where((t >= 8) & (t < 14), -5.0, 0.0)
    vz += np.where((t >= 16) & (t < 24), (t - 16) * 0.3, 0.0)
    vz += _chirp(t, 26, 38, 0.6, 0.1, 1.0)
    vz += np.where((t >= 40) & (t < 46), 4.0, 0.0)
    vz += np.where((t >= 48) & (t < 52), -0.5, 0.0)
    vz += _chirp(t, 52, 60, 0.8, 0.2, 0.8)
    return v * scale


def fly(params: VehicleParams, duration: float = 60.0, delay: float = 0.08,
        noise: float = 0.05, cmd_rate: float = 20.0, odom_rate: float = 50.0, seed: int = 0,
        commands=rich_commands, altitude: float = 20.0) -> Recording:
    """Fly ``params`` through ``commands(t)`` (see the module doc)."""
    # imported here: support.independent_flight uses this module's writers, not the model
    from velocity_mobility_ros.core.model import step, VehicleState

    rng = np.random.default_rng(seed)
    dt_ns = round(params.sim_dt * 1e9)
    cmd_ns = np.arange(0, int(duration * 1e9), round(1e9 / cmd_rate), dtype=np.int64)
    cmd_v = commands(cmd_ns * 1e-9)
    delay_ns = round(delay * 1e9)
    decimation = max(1, round(1.0 / (odom_rate * params.sim_dt)))
    state = VehicleState.at_rest([[0.0, 0.0, altitude]])
    steps = int(duration * 1e9) // dt_ns
    odom_ns, pos, vel, yaw = [], [], [], []
    for k in range(1, steps + 1):
        t_ns = k * dt_ns
        n = np.searchsorted(cmd_ns, t_ns - delay_ns, side='left')  # arrived strictly before
        v_des = cmd_v[n - 1:n] if n > 0 else np.zeros((1, 3))
        state = step(state, v_des, params, np.array([0.1]))
        if k % decimation == 0:
            odom_ns.append(t_ns)
            pos.append(state.position[0].copy())
            vel.append(state.velocity[0].copy())
            yaw.append(float(state.yaw[0]))
    true_v = np.array(vel)
    return Recording(cmd_ns, cmd_v, np.array(odom_ns, dtype=np.int64), np.array(pos),
                     true_v + rng.normal(0.0, noise, true_v.shape), true_v, np.array(yaw))


def _quat_yaw(yaw: float) -> tuple[float, float, float, float]:
    """(w, x, y, z) of a rotation by ``yaw`` about z."""
    return math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)


def write_ros_bag(path, recordings: dict[str, Recording], commands: bool = True) -> None:
    """Record as this package does: /<name>/cmd_vel Twist (if ``commands``), /<name>/odom."""
    store = get_typestore(Stores.ROS2_KILTED)
    twist_t, odom_t = 'geometry_msgs/msg/Twist', 'nav_msgs/msg/Odometry'
    m = store.types
    vec, quat = m['geometry_msgs/msg/Vector3'], m['geometry_msgs/msg/Quaternion']
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for name, rec in recordings.items():
            cmd_conn = (writer.add_connection(f'/{name}/cmd_vel', twist_t, typestore=store)
                        if commands else None)
            odom_conn = writer.add_connection(f'/{name}/odom', odom_t, typestore=store)
            items = []
            for t, v in zip(rec.cmd_ns, rec.cmd_v) if commands else ():
                msg = m[twist_t](linear=vec(*map(float, v)), angular=vec(0.0, 0.0, 0.0))
                items.append((int(t), cmd_conn, store.serialize_cdr(msg, twist_t)))
            for t, p, v, yaw in zip(rec.odom_ns, rec.position, rec.velocity, rec.yaw):
                c, s = math.cos(yaw), math.sin(yaw)
                body = (c * v[0] + s * v[1], -s * v[0] + c * v[1], v[2])  # twist: body FLU
                stamp = m['builtin_interfaces/msg/Time'](
                    sec=int((START_NS + t) // 10**9), nanosec=int((START_NS + t) % 10**9))
                header = m['std_msgs/msg/Header'](stamp=stamp, frame_id='world')
                pose = m['geometry_msgs/msg/PoseWithCovariance'](
                    pose=m['geometry_msgs/msg/Pose'](
                        position=m['geometry_msgs/msg/Point'](*map(float, p)),
                        orientation=quat(*_xyzw(_quat_yaw(yaw)))),
                    covariance=np.zeros(36))
                twist = m['geometry_msgs/msg/TwistWithCovariance'](
                    twist=m['geometry_msgs/msg/Twist'](linear=vec(*map(float, body)),
                                                       angular=vec(0.0, 0.0, 0.1)),
                    covariance=np.zeros(36))
                msg = m[odom_t](header=header, child_frame_id=f'{name}/base_link', pose=pose,
                                twist=twist)
                items.append((int(t), odom_conn, store.serialize_cdr(msg, odom_t)))
            for t, conn, raw in sorted(items, key=lambda item: item[0]):
                writer.write(conn, START_NS + t, raw)


def _xyzw(wxyz):
    w, x, y, z = wxyz
    return x, y, z, w


def px4_typestore():
    """Return a rosbags typestore with px4_msgs' TrajectorySetpoint and VehicleOdometry."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    types.update(get_types_from_msg(TRAJECTORY_SETPOINT_MSG, 'px4_msgs/msg/TrajectorySetpoint'))
    types.update(get_types_from_msg(VEHICLE_ODOMETRY_MSG, 'px4_msgs/msg/VehicleOdometry'))
    store.register(types)
    return store


def write_px4_bag(path, setpoints, odometry, namespace: str = '') -> None:
    """
    Record PX4 topics: ``setpoints`` [(t_ns, velocity_ned)], ``odometry`` [(t_ns, fields)].

    ``fields`` holds VehicleOdometry field values (``position``, ``q``, ``velocity``,
    ``velocity_frame``, ``timestamp``, ``timestamp_sample``...); the rest are zero.
    """
    store = px4_typestore()
    sp_t, od_t = 'px4_msgs/msg/TrajectorySetpoint', 'px4_msgs/msg/VehicleOdometry'
    sp_cls, od_cls = store.types[sp_t], store.types[od_t]
    prefix = f'/{namespace}' if namespace else ''
    nan3 = np.full(3, np.nan, dtype=np.float32)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        sp_conn = writer.add_connection(f'{prefix}/fmu/in/trajectory_setpoint', sp_t,
                                        typestore=store)
        od_conn = writer.add_connection(f'{prefix}/fmu/out/vehicle_odometry', od_t,
                                        typestore=store)
        items = []
        for t, v in setpoints:
            msg = sp_cls(timestamp=int(t // 1000), position=nan3,
                         velocity=np.asarray(v, dtype=np.float32), acceleration=nan3,
                         jerk=nan3, yaw=np.float32(np.nan), yawspeed=np.float32(0.0))
            items.append((int(t), sp_conn, store.serialize_cdr(msg, sp_t)))
        for t, fields in odometry:
            values = {'timestamp': 0, 'timestamp_sample': 0, 'pose_frame': 1,
                      'position': np.zeros(3, np.float32),
                      'q': np.array([1, 0, 0, 0], np.float32),
                      'velocity_frame': 1, 'velocity': np.zeros(3, np.float32),
                      'angular_velocity': np.zeros(3, np.float32),
                      'position_variance': np.zeros(3, np.float32),
                      'orientation_variance': np.zeros(3, np.float32),
                      'velocity_variance': np.zeros(3, np.float32), 'reset_counter': 0,
                      'quality': 0}
            values.update(fields)
            for key in ('position', 'q', 'velocity', 'angular_velocity'):
                values[key] = np.asarray(values[key], dtype=np.float32)
            items.append((int(t), od_conn, store.serialize_cdr(od_cls(**values), od_t)))
        for t, conn, raw in sorted(items, key=lambda item: item[0]):
            writer.write(conn, START_NS + t, raw)
