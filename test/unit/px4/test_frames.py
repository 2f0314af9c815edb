"""PX4 <-> ROS frame conversions: known vectors, full attitudes (not only yaw), round trips."""
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from transforms3d.euler import euler2quat, quat2euler
from transforms3d.quaternions import quat2mat

from soliton_encirclement_ros.px4 import frames
from soliton_encirclement_ros.px4.frames import (
    enu_to_ned, flu_to_frd, frd_to_flu, ned_to_enu, OdometryFrameError, q_enu_flu_to_ned_frd,
    q_ned_frd_to_enu_flu, vehicle_odometry_to_enu, yaw_enu_to_ned, yaw_ned_to_enu,
    yaw_rate_enu_to_ned)
from velocity_mobility_ros.core.geometry import wrap_angle

finite = st.floats(-1e3, 1e3, allow_nan=False)
vectors = st.tuples(finite, finite, finite).map(np.array)
angles = st.floats(-np.pi, np.pi, allow_nan=False)
unit_quaternions = st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 4).filter(
    lambda q: np.linalg.norm(q) > 0.1).map(lambda q: np.array(q) / np.linalg.norm(q))


def same_attitude(q1, q2):
    return np.allclose(quat2mat(q1), quat2mat(q2), atol=1e-9)


def test_known_vectors():
    assert np.allclose(enu_to_ned([1.0, 2.0, 3.0]), [2.0, 1.0, -3.0])
    assert np.allclose(ned_to_enu([2.0, 1.0, -3.0]), [1.0, 2.0, 3.0])
    assert np.allclose(flu_to_frd([1.0, 2.0, 3.0]), [1.0, -2.0, -3.0])
    assert np.allclose(frd_to_flu([1.0, -2.0, -3.0]), [1.0, 2.0, 3.0])
    assert np.allclose(enu_to_ned([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
                       [[0.0, 1.0, 0.0], [0.0, 0.0, -1.0]])


@given(vectors)
def test_vector_round_trips(v):
    assert np.allclose(ned_to_enu(enu_to_ned(v)), v)
    assert np.allclose(frd_to_flu(flu_to_frd(v)), v)


@pytest.mark.parametrize('yaw_enu, yaw_ned', [
    (0.0, np.pi / 2), (np.pi / 2, 0.0), (np.pi, -np.pi / 2), (-np.pi / 2, -np.pi),
    (np.pi / 4, np.pi / 4)])
def test_yaw_known_headings(yaw_enu, yaw_ned):
    # East is 0 in ENU and +pi/2 in NED; North is +pi/2 in ENU and 0 in NED.
    assert wrap_angle(yaw_enu_to_ned(yaw_enu) - yaw_ned) == pytest.approx(0.0, abs=1e-12)


@given(angles, st.floats(-10, 10, allow_nan=False))
def test_yaw_round_trip_and_rate_sign(yaw, rate):
    assert wrap_angle(yaw_ned_to_enu(yaw_enu_to_ned(yaw)) - yaw) == pytest.approx(0.0, abs=1e-9)
    assert -np.pi <= yaw_enu_to_ned(yaw) < np.pi
    assert yaw_rate_enu_to_ned(rate) == -rate


@given(unit_quaternions, vectors)
def test_attitude_maps_body_vectors_consistently(q_ned_frd, b_frd):
    """The defining property: a body vector rotated into the world agrees in both conventions."""
    q_enu_flu = q_ned_frd_to_enu_flu(q_ned_frd)
    v_ned = quat2mat(q_ned_frd) @ b_frd
    assert np.allclose(quat2mat(q_enu_flu) @ frd_to_flu(b_frd), ned_to_enu(v_ned), atol=1e-6)


@given(unit_quaternions)
def test_attitude_round_trip(q):
    assert same_attitude(q_enu_flu_to_ned_frd(q_ned_frd_to_enu_flu(q)), q)
    assert np.isclose(np.linalg.norm(q_ned_frd_to_enu_flu(q)), 1.0)


def test_known_attitude_with_roll_and_pitch():
    """Nose north, 10 deg nose-up, right wing 30 deg down (NED/FRD euler ZYX = 0, 10, 30 deg)."""
    roll, pitch = np.radians(30.0), np.radians(10.0)
    q_ned = euler2quat(roll, pitch, 0.0, 'sxyz')  # R = Rz(yaw) Ry(pitch) Rx(roll)
    q_enu = q_ned_frd_to_enu_flu(q_ned)
    # In ENU/FLU the same attitude is yaw +90 deg (north), pitch -10 deg (FLU y points left, so
    # nose-up is a negative rotation about it) and roll +30 deg (left wing up).
    assert np.allclose(quat2euler(q_enu, 'sxyz'), [roll, -pitch, np.pi / 2], atol=1e-12)
    # Nose direction: north and up in ENU.
    assert np.allclose(quat2mat(q_enu) @ [1.0, 0.0, 0.0], [0.0, np.cos(pitch), np.sin(pitch)])
    # Left wing: west, raised by the roll, and tilted south by the pitch.
    assert np.allclose(quat2mat(q_enu) @ [0.0, 1.0, 0.0],
                       [-np.cos(roll), -np.sin(roll) * np.sin(pitch),
                        np.sin(roll) * np.cos(pitch)])


@given(angles)
def test_level_attitude_yaw_matches_yaw_conversion(yaw_enu):
    q_ned = q_enu_flu_to_ned_frd(euler2quat(0.0, 0.0, yaw_enu, 'sxyz'))
    assert same_attitude(q_ned, euler2quat(0.0, 0.0, float(yaw_enu_to_ned(yaw_enu)), 'sxyz'))


def _odom(**overrides):
    fields = {'pose_frame': frames.POSE_FRAME_NED, 'position': [1.0, 2.0, -3.0],
              'q': euler2quat(0.2, -0.1, 0.7, 'sxyz'),
              'velocity_frame': frames.VELOCITY_FRAME_NED,
              'velocity': [0.5, -1.0, 0.25], 'angular_velocity': [0.1, 0.2, 0.3]}
    fields.update(overrides)
    return fields


def test_odometry_pose_in_enu_and_twist_in_body_flu():
    f = _odom()
    odom = vehicle_odometry_to_enu(**f)
    assert np.allclose(odom.position, [2.0, 1.0, 3.0])
    assert same_attitude(odom.orientation, q_ned_frd_to_enu_flu(f['q']))
    # The body twist rotated back into the world is the world velocity in ENU.
    assert np.allclose(quat2mat(odom.orientation) @ odom.linear_velocity,
                       ned_to_enu(f['velocity']))
    assert np.allclose(odom.angular_velocity, [0.1, -0.2, -0.3])


def test_odometry_body_and_world_velocity_frames_agree():
    f = _odom()
    body_frd = quat2mat(f['q']).T @ np.array(f['velocity'])
    from_world = vehicle_odometry_to_enu(**f)
    from_body = vehicle_odometry_to_enu(**_odom(velocity_frame=frames.VELOCITY_FRAME_BODY_FRD,
                                                velocity=body_frd))
    assert np.allclose(from_world.linear_velocity, from_body.linear_velocity)


def test_odometry_origin_offset_and_frd_pose_frame():
    odom = vehicle_odometry_to_enu(**_odom(pose_frame=frames.POSE_FRAME_FRD,
                                           velocity_frame=frames.VELOCITY_FRAME_FRD),
                                   origin_enu=(10.0, -5.0, 0.5))
    assert np.allclose(odom.position, [12.0, -4.0, 3.5])


@pytest.mark.parametrize('overrides, match', [
    ({'velocity_frame': frames.VELOCITY_FRAME_UNKNOWN}, r'velocity_frame=0 \(UNKNOWN\)'),
    ({'velocity_frame': frames.VELOCITY_FRAME_FRD}, r'velocity_frame=2 \(FRD\).*pose_frame=1'),
    ({'velocity_frame': 9}, r'velocity_frame=9'),
    ({'pose_frame': frames.POSE_FRAME_UNKNOWN}, r'pose_frame=0 \(UNKNOWN\)'),
    ({'position': [np.nan, 0.0, 0.0]}, r'position is invalid'),
    ({'q': [np.nan, 0.0, 0.0, 0.0]}, r'q is invalid'),
    ({'q': [2.0, 0.0, 0.0, 0.0]}, r'q is not a unit quaternion'),
    ({'velocity': [0.0, np.inf, 0.0]}, r'velocity is invalid'),
    ({'angular_velocity': [0.0, 0.0]}, r'angular_velocity must have 3 values'),
])
def test_odometry_rejects_unknown_frames_and_invalid_values(overrides, match):
    with pytest.raises(OdometryFrameError, match=match):
        vehicle_odometry_to_enu(**_odom(**overrides))


@settings(max_examples=50)
@given(unit_quaternions, vectors, vectors)
def test_odometry_speed_is_preserved(q, p, v):
    odom = vehicle_odometry_to_enu(**_odom(q=q, position=p, velocity=v))
    speed = np.linalg.norm(odom.linear_velocity)
    assert speed == pytest.approx(np.linalg.norm(v), rel=1e-9, abs=1e-9)
    assert np.allclose(odom.position, ned_to_enu(p))


def test_covariances_follow_the_axes_of_each_frame():
    from soliton_encirclement_ros.px4.frames import odometry_covariances
    level = np.array([1.0, 0.0, 0.0, 0.0])  # body FRD aligned with NED
    pose, twist = odometry_covariances([1.0, 2.0, 3.0], [0.1, 0.2, 0.3], [4.0, 5.0, 6.0],
                                       frames.VELOCITY_FRAME_NED, q_ned_frd_to_enu_flu(level))
    pose, twist = pose.reshape(6, 6), twist.reshape(6, 6)
    assert np.allclose(np.diag(pose)[:3], [2.0, 1.0, 3.0])       # NED -> ENU swaps x and y
    assert np.allclose(np.diag(pose)[3:], [0.2, 0.1, 0.3])       # body axes seen from ENU
    assert np.allclose(np.diag(twist)[:3], [4.0, 5.0, 6.0])  # forward = north, left = west
    assert np.allclose(np.diag(twist)[3:], 0.0)                   # not reported by PX4
    body, _ = odometry_covariances([np.nan, 1.0, 1.0], [0.0] * 3, [1.0, 2.0, 3.0],
                                   frames.VELOCITY_FRAME_BODY_FRD, q_ned_frd_to_enu_flu(level))
    assert np.all(np.isfinite(body)) and body.reshape(6, 6)[1, 1] == 0.0  # NaN -> unknown (0)


def test_sample_stamp_is_the_receive_time_less_the_age_on_px4s_clock():
    from soliton_encirclement_ros.px4.frames import sample_stamp_ns
    assert sample_stamp_ns(5_000_000_000, 1_000_000_000, 999_997_000) == 4_997_000_000
    assert sample_stamp_ns(5_000_000_000, 1_000_000_000, 0) == 5_000_000_000      # missing
    assert sample_stamp_ns(5_000_000_000, 1_000_000_000, 1_000_100_000) == 5_000_000_000
    assert sample_stamp_ns(0, 1_000_000_000, 999_997_000) == 0  # sim time before any /clock
    # A stalled estimator: a sample 30 s old is stamped 30 s old, never as fresh.
    assert sample_stamp_ns(50_000_000_000, 31_000_000, 1_000_000) == 20_000_000_000
