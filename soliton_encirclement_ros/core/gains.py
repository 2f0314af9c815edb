"""
Controller gains and timeouts of the soliton encirclement law: one validated object.

Defaults are the reference configuration except gains chosen with ``core.stability`` so that a
ring of any size settles (``k_tau`` 0.25 instead of 0.2, and the damping ``k_omega_damp_n``
that grows with the number of agents heard, 0 in the reference) and re-spaces about twice as
fast after a loss or a return (``k_e_tau`` 50 instead of 25 with the damping by the agent's own
angular rate ``k_omega_own`` 0.4, 0 in the reference); the exact
reference gains are the ``reference`` preset (:data:`PRESETS`, ``config/reference.yaml``).
Each field's metadata carries its description, unit
and bounds: the one definition from which the agent node declares its ROS parameters (with
descriptors and ranges) and by which the batch simulator and YAML files are validated. Bad
values raise ``ValueError`` naming the field, the value and the rule.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import functools
import math
from typing import Any, Mapping

import numpy as np

from ros_support.settings import check_fields, setting
from ros_support.validation import from_mapping

AGENT_TIMEOUT_PERIODS = 3.0   # auto agent_state_timeout, in control periods
TARGET_TIMEOUT_PERIODS = 5.0  # auto target_state_timeout, in control periods
# The d_safe flown is at most this share of the settled ring's spacing 2 R sin(pi/N): a large
# ring still forms (its neighbours are that far apart), and half the spacing leaves the law
# room to even the ring out without the separation term.
D_SAFE_SHARE = 0.5
# The neighbour hysteresis kept is at most this share of the even ring's angular gap 2 pi / N:
# 0.05 rad is 80 % of the gap of 100 agents, and a ring whose separation kept two agents from
# passing each other then held a neighbour two places away for good (E_gap 0.087, never settled).
HYSTERESIS_SHARE = 0.3
# 1/s: the most that the neighbour damping with beta_u may decay u by, whatever the period
# (law.omega_damping_gain); beyond it the ring's long waves are overdamped and settle slowly.
DAMPING_DECAY_MAX = 100.0


# The reference experiment's gains (its published configuration), for parity runs: the
# ``reference`` preset. ``config/reference.yaml`` is the same mapping as a ROS parameter file.
REFERENCE_GAINS = {
    'k_r': 1.0, 'k_dr': 0.5, 'c_coupling': 2.0, 'beta_u': 7.0, 'alpha_u': 0.5, 'k_e_tau': 25.0,
    'kappa_u_diff': 0.1, 'k_u_steepen': 0.3, 'kappa_u_disp': 0.05, 'k_tau': 0.2, 'r_min': 1.0,
    'k_omega_damp': 0.1, 'k_omega_damp_n': 0.0, 'k_omega_own': 0.0, 'k_e_ring': 0.0,
    'k_gap_steer': 0.0,
    'ring_turn_acc': 0.0, 'soft_limiter': False,
    'u_lim': 2.0, 'hysteresis': 0.05, 'd_safe': 0.0, 'target_lead': 0.0,
    'ring_gains_from': 0.0, 'ring_ramp_silent': False,
}
PRESETS = {'default': {}, 'reference': REFERENCE_GAINS}


@dataclass(frozen=True)
class ControllerParams:
    """Every gain and timeout of the reference agent control loop (SI units, radians)."""

    radius: float = setting(20.0, 'desired encirclement radius R', 'm', low=0.0, strict=True)
    k_r: float = setting(1.0, 'radial proportional gain: v_r = -k_r (r - R) - k_dr v_r', '1/s',
                         low=0.0)
    k_dr: float = setting(0.5, 'radial damping gain on the radial speed relative to the target',
                          low=0.0)
    c_coupling: float = setting(2.0, 'soliton transport term C (u_succ - u_pred) in du/dt', '1/s',
                                low=0.0)
    beta_u: float = setting(7.0, 'linear decay of u in du/dt', '1/s', low=0.0)
    alpha_u: float = setting(0.5, 'cubic (or soft-limited) decay of u in du/dt', '1/s', low=0.0)
    k_e_tau: float = setting(50.0, 'drive of u by the lambda-weighted spacing error e_tau '
                             '(reference 25)', '1/s', low=0.0)
    kappa_u_diff: float = setting(0.1, '1-hop diffusion of u (u_succ - 2u + u_pred); 0 disables',
                                  '1/s', low=0.0)
    k_u_steepen: float = setting(0.3, 'KdV-like steepening -k u u_s; any sign, 0 disables', '1/s')
    kappa_u_disp: float = setting(0.05, 'KdV-like dispersion on u_sss; any sign, 0 disables',
                                  '1/s')
    k_tau: float = setting(0.25, 'angular rate per unit u in the tangential velocity '
                           '(reference 0.2)', 'rad/s', low=0.0)
    r_min: float = setting(1.0, 'minimum radius r_eff = max(r, r_min) of the tangential mapping',
                           'm', low=0.0, strict=True)
    k_omega_damp: float = setting(0.1, 'damping of e_tau by the angular-rate difference to the '
                                  'neighbours; 0 disables', 's/rad', low=0.0)
    k_omega_damp_n: float = setting(0.025, 'damping added per agent heard (self included, N): '
                                    'the gain is k_omega_damp + k_omega_damp_n x N, at most '
                                    'where it and beta_u decay u at '
                                    f'{DAMPING_DECAY_MAX:g}/s; 0 disables '
                                    '(reference 0)', 's/rad', low=0.0)
    k_omega_own: float = setting(0.4, "damping of e_tau by the agent's own angular rate about "
                                 "the target (its velocity relative to the target's, over "
                                 'r_eff) less omega_ref: derivative action for the velocity '
                                 'lag; 0 disables (reference 0)', 's/rad', low=0.0)
    k_e_ring: float = setting(0.4, "drive of e_tau by the agent's offset from the even ring "
                              'fitted to every ring member it hears (law.ring_offset): every '
                              'wave of the ring then closes at a rate that does not fall with N; '
                              'weighted by how open the gap it drives toward is and ramped in '
                              'over ring_ramp after the members heard change; 0 disables '
                              '(reference 0)', '1/rad', low=0.0)
    ring_ramp: float = setting(5.0, 'the even-ring term (k_e_ring) ramps in linearly over this '
                               'long from the tick the number of ring members an agent hears '
                               'last changed (its first tick included): the fitted ring moves '
                               'every slot when a member is lost or returns; 0 = at once', 's',
                               low=0.0)
    ring_ramp_silent: bool = setting(True, 'ring_ramp restarts, when the ring members an agent '
                                     'hears change, only where a vehicle it heard has fallen '
                                     'silent (one its d_safe term keeps, obstacle_memory) or a '
                                     'vehicle it counts is nearer than its d_safe (a crowd); at '
                                     'its first tick or return always. A member that fails '
                                     'broadcasting its presence, or comes back, leaves the term '
                                     'as it is: the ring re-spaces round a known vehicle at '
                                     'once, and gently where one may still be flying on or '
                                     'where the vehicles round it leave no room')
    ring_turn_acc: float = setting(0.0, 'centripetal acceleration the tangential term may ask '
                                   'of the vehicle: u is held where its speed along the ring '
                                   'relative to the target (k_tau u r_eff) reaches '
                                   'sqrt(ring_turn_acc r_eff), where flying that circle needs '
                                   'this acceleration; faster, the vehicle cannot hold the '
                                   'circle and drifts out; not held where the d_safe term '
                                   'pushes the agent; 0 = no cap', 'm/s^2', low=0.0)
    ring_gains_from: float = setting(0.5, "the agent's tangential gains go over from those "
                                     "above (the crowd's: k_tau, k_e_tau, k_omega_own, "
                                     "ring_turn_acc) to the ring's (k_tau_ring, k_e_tau_ring, "
                                     'k_omega_own_ring, ring_turn_acc_ring) as its distance from '
                                     'the target grows from this share of R to ring_gains_full '
                                     "of it (the two laws' steps blended), but the crowd's "
                                     'wherever a vehicle it counts is nearer than its d_safe: '
                                     'the ring re-spaces fast while a crowd still near the '
                                     'target, or among other vehicles, moves gently; and '
                                     'they fade out where k_tau_ring k_e_tau_ring N P (N the '
                                     'ring size heard, P control_period) goes from 400 to 600, '
                                     "where their explicit step would let a large ring's "
                                     'shortest wave grow; 0 = off (the gains above everywhere; '
                                     'the reference)',
                                     low=0.0)
    ring_gains_full: float = setting(0.75, "the share of R from which the ring's gains "
                                     '(ring_gains_from) apply whole; above ring_gains_from',
                                     low=0.0)
    k_tau_ring: float = setting(1.0, "k_tau of the ring's gains (ring_gains_from)", 'rad/s',
                                low=0.0)
    k_e_tau_ring: float = setting(100.0, "k_e_tau of the ring's gains (ring_gains_from)", '1/s',
                                  low=0.0)
    k_omega_own_ring: float = setting(0.8, "k_omega_own of the ring's gains (ring_gains_from)",
                                      's/rad', low=0.0)
    ring_turn_acc_ring: float = setting(2.5, "ring_turn_acc of the ring's gains "
                                        '(ring_gains_from)', 'm/s^2', low=0.0)
    soft_limiter: bool = setting(False, 'g(u) = u^3 / (1 + (|u|/u_lim)^2) instead of u^3')
    u_lim: float = setting(2.0, 'soft limiter scale of u', low=0.0, strict=True)
    d_safe: float = setting(2.0, 'safety distance: every vehicle heard closer than this '
                            '(horizontally, after the t_safe look-ahead) adds a repulsive '
                            'velocity away from it; at most d_safe_share of the even ring '
                            'spacing (see d_safe_share); 0 = off (the reference preset)', 'm',
                            low=0.0)
    d_safe_share: float = setting(D_SAFE_SHARE, 'the d_safe flown is at most this share of the '
                                  'even ring spacing 2 R sin(pi/N), N the agents heard (self '
                                  'included): a ring of 100 at R 20 m flies 0.63 m; 0 = d_safe '
                                  'as set', low=0.0, high=1.0)
    v_safe: float = setting(10.0, 'largest repulsive speed of the d_safe term (at contact; it '
                            'falls linearly to 0 at d_safe; the sum is bounded to this)', 'm/s',
                            low=0.0, strict=True)
    t_safe: float = setting(1.0, 'look-ahead of the d_safe term: the distance counted is the '
                            'current one minus t_safe x the closing speed (about the vehicle '
                            'velocity lag); 0 = the plain distance', 's', low=0.0)
    a_safe: float = setting(4.0, 'braking of the d_safe look-ahead: a closing speed c also '
                            'takes c^2 / (2 a_safe) off the distance counted (the stopping '
                            'distance of an acceleration-limited vehicle, 4 m/s^2 by default); '
                            '0 = off', 'm/s^2', low=0.0)
    t_react: float = setting(0.3, 'reaction time of the d_safe term to an agent ahead stopping: '
                             'were it to brake to a hover now, this one flies on this long (after '
                             'the age of its state) before it brakes too, and must still pass '
                             'its rest point d_safe/2 apart (a following distance at speed); '
                             '0 = off', 's', low=0.0)
    hold_drift: float = setting(0.5, 'how fast a vehicle may drift from where it was last known '
                                'while where it is now is not known (PX4 holding it): one that '
                                'falls silent stays in the d_safe term at rest where it was last '
                                'heard, and one broadcast wider than d_safe also at its last '
                                'trusted position, each as a disc growing at this rate up to the '
                                'usable size (see v_uncertain), until it is heard again or its '
                                'landing is', 'm/s', low=0.0)
    silent_run_on: float = setting(0.5, 'a vehicle whose agent falls silent may fly its last '
                                   "velocity this long (its bridge's or mobility node's "
                                   'cmd_timeout) before it brakes to a hover: the d_safe term '
                                   'counts it anywhere on its way between that and braking at '
                                   'once', 's', low=0.0)
    v_uncertain: float = setting(2.0, "largest speed the d_safe term adds because of a vehicle's "
                                 'position uncertainty (its disc beyond its point): inside a wide '
                                 'disc an agent stops approaching it and leaves it at this speed '
                                 'instead of fleeing at v_safe. A disc counts at most the ring '
                                 'spacing 2 R sin(pi/N) less the d_safe flown (wider, it gives '
                                 'no direction); beyond d_safe (an estimate that jumped, its '
                                 "vehicle held), the vehicle's last trusted position (a state "
                                 'at most d_safe uncertain) counts too', 'm/s', low=0.0)
    target_lead: float = setting(1.0, "feed-forward of the target's acceleration: commands follow "
                                 "the target's velocity this far ahead, the vehicles' velocities "
                                 'are compared with it this far behind; the vehicle velocity time '
                                 "constant (the model's tau_xy, fit_mobility's fit); 0 = off "
                                 '(reference)', 's', low=0.0)
    obstacle_clearance: float = setting(0.0, "the ring's radius bulges round a known obstacle (a "
                                        "failed or silent agent's vehicle) so that the agents "
                                        'passing it keep this far from it: out round one inside '
                                        'R + clearance/2, in round one beyond; their angles (the '
                                        'spacing) untouched. Only with d_safe (the obstacles '
                                        'are its); 0 = off (the default: it helps a static '
                                        "target's ring, not a moving one's; 3 m measured)", 'm',
                                        low=0.0)
    obstacle_ramp: float = setting(10.0, 'the bulge round an obstacle (obstacle_clearance) rises '
                                   'over this length across the ray from the target, on each '
                                   'side of the obstacle', 'm', low=0.0, strict=True)
    obstacle_lead: float = setting(1.5, 'the bulge is taken where the agent and the target will '
                                   'be this far ahead (their velocities): the radial term and the '
                                   'vehicle lag about that much', 's', low=0.0)
    k_gap_steer: float = setting(0.0, 'the whole ring turns so that a gap, not a member, meets '
                                 "a known obstacle (a failed or silent agent's vehicle) near "
                                 'the ring: every agent adds the same rate to omega_ref, this '
                                 "x sin(n e)/n, e the obstacle's angle from the nearest gap's "
                                 "middle (n members), plus the obstacle's own angular rate "
                                 '(law.gap_steer); the spacing is '
                                 'untouched. Only with d_safe (the obstacles are its); 0 = off',
                                 '1/s', low=0.0)
    hysteresis: float = setting(0.05, 'keep a ring neighbour unless a candidate is closer by this '
                                '(at most 0.3 of the even gap 2 pi/N)', 'rad', low=0.0)
    control_period: float = setting(0.01, 'control tick and Euler step of u', 's', low=1e-3,
                                    high=1.0)
    agent_state_timeout: float = setting(0.0, 'a neighbour is live while its last state is at '
                                         'most this old; 0 = 3 x control_period, at least '
                                         'agent_timeout_floor', 's', low=0.0)
    agent_timeout_floor: float = setting(0.0, 'the automatic agent_state_timeout (0) is at least '
                                         'this: over a link that loses or delays a few states '
                                         'in a row (WiFi, best effort) a neighbour is not '
                                         'dropped and taken back every few ticks, which '
                                         "restarts the even-ring term's ramp and the neighbour "
                                         'choice; but for d_safe a neighbour then counts as '
                                         'flying on at its last velocity that long, not as '
                                         'silent (a smaller worst separation measured with loss '
                                         'and a silent agent); 0 = off', 's', low=0.0)
    target_state_timeout: float = setting(0.0, 'the target state is live while at most this old; '
                                          'then the agent flies its last velocity; '
                                          '0 = 5 x control_period; never more than '
                                          'target_timeout', 's', low=0.0)
    target_timeout: float = setting(1.0, 'after this long without a live target state the agent '
                                    'commands zero velocity (hold) until it is heard again', 's',
                                    low=0.0, strict=True)
    odom_timeout: float = setting(0.5, 'odometry older than this makes the agent blind: it stops '
                                  'broadcasting and commands zero velocity', 's', low=0.0,
                                  strict=True)
    max_future_stamp: float = setting(0.5, 'agent and target states stamped further ahead of '
                                      "this agent's clock are rejected", 's', low=0.0)
    prune_expired: bool = setting(True, 'drop expired agent states from the cache')
    max_speed_xy: float = setting(10.0, 'command clamp, horizontal norm (the vehicle limit)',
                                  'm/s', low=0.0, strict=True)
    max_speed_z: float = setting(5.0, 'command clamp, absolute vertical (the vehicle limit)',
                                 'm/s', low=0.0, strict=True)
    altitude: float = setting(math.nan, 'altitude hold: world ENU z the agent climbs or descends '
                              "to; NaN = off (vertical command = the target's)", 'm',
                              nan_ok=True)
    k_z: float = setting(1.0, 'altitude hold gain: vz = k_z (altitude - z) + target vz', '1/s',
                         low=0.0)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.ring_gains_from and not self.ring_gains_full > self.ring_gains_from:
            raise ValueError(f'ring_gains_full = {self.ring_gains_full!r}: must be above '
                             f'ring_gains_from ({self.ring_gains_from!r})')

    def ring_gains(self) -> 'ControllerParams':
        """
        Return these parameters with the ring's gains in place of the crowd's (ring_gains_from).

        ``k_tau``, ``k_e_tau``, ``k_omega_own`` and ``ring_turn_acc`` take the ``*_ring``
        values, and ``ring_gains_from`` is 0: the law flown where the ring's gains apply whole.
        """
        return _ring_gains(self)

    @property
    def agent_timeout(self) -> float:
        """
        Return the agent state liveness [s].

        ``agent_state_timeout``, or 3 control periods but at least ``agent_timeout_floor``.
        """
        return self.agent_state_timeout or max(AGENT_TIMEOUT_PERIODS * self.control_period,
                                               self.agent_timeout_floor)

    @property
    def obstacle_memory(self) -> float:
        """
        Return how long a cached agent state counts for ``d_safe`` [s] (0: d_safe off).

        Forever (inf): a vehicle that falls silent stays an obstacle until it is heard again
        or its landing is (``hold_drift``).
        """
        return math.inf if self.d_safe else 0.0

    @property
    def knows_obstacles(self) -> bool:
        """Return whether the law takes the known obstacles (law.ring_obstacles) at all."""
        return bool(self.d_safe and (self.obstacle_clearance or self.k_gap_steer))

    def usable_uncertainty(self, ring_size=0):
        """
        Return the widest position uncertainty [m] the ``d_safe`` term counts as a disc.

        The even ring's spacing ``2 R sin(pi/N)`` less the ``d_safe`` flown (N = ``ring_size``,
        at least 2): a disc that wide keeps ``d_safe`` from a neighbour at its settled place,
        so it leaves the ring as it is; a wider one swallows neighbours and gives them no
        direction to go. Scalars or arrays (one value per agent).
        """
        n = np.maximum(np.asarray(ring_size, dtype=float), 2.0)
        usable = np.maximum(2.0 * self.radius * np.sin(np.pi / n)
                            - self.safety_distance(ring_size), 0.0)
        return float(usable) if usable.ndim == 0 else usable

    def safety_distance(self, ring_size=0):
        """
        Return the ``d_safe`` [m] flown by an agent hearing ``ring_size`` agents (self included).

        The smaller of ``d_safe`` and ``d_safe_share`` x the even ring spacing 2 R sin(pi/N);
        ``ring_size`` below 2 (alone, or unknown) or ``d_safe_share`` 0 gives ``d_safe``.
        Scalars or arrays (one value per agent).
        """
        if not self.d_safe or not self.d_safe_share:
            if np.ndim(ring_size) == 0:
                return self.d_safe
            return np.full(np.shape(ring_size), self.d_safe)
        n = np.maximum(np.asarray(ring_size, dtype=float), 2.0)
        spacing = 2.0 * self.radius * np.sin(np.pi / n)
        flown = np.minimum(self.d_safe, self.d_safe_share * spacing)
        flown = np.where(np.asarray(ring_size) < 2, self.d_safe, flown)
        return float(flown) if flown.ndim == 0 else flown

    def neighbour_hysteresis(self, ring_size=0):
        """
        Return the ``hysteresis`` [rad] kept by an agent hearing ``ring_size`` agents (self too).

        The smaller of ``hysteresis`` and :data:`HYSTERESIS_SHARE` x the even ring's gap
        2 pi / N (``hysteresis`` itself up to N = 37): a candidate half a gap away always
        replaces a neighbour one gap further. ``ring_size`` below 2 gives ``hysteresis``.
        Scalars (a float) or arrays (one value per agent).
        """
        if type(ring_size) is int or np.ndim(ring_size) == 0:
            if ring_size < 2:
                return self.hysteresis
            return min(self.hysteresis, HYSTERESIS_SHARE * 2.0 * math.pi / float(ring_size))
        n = np.asarray(ring_size, dtype=float)
        return np.where(n < 2, self.hysteresis, np.minimum(
            self.hysteresis, HYSTERESIS_SHARE * 2.0 * np.pi / np.maximum(n, 2.0)))

    @property
    def target_liveness(self) -> float:
        """
        Return the target-state liveness [s] (``target_state_timeout`` or 5 periods).

        Never longer than ``target_timeout``: a target older than that is lost (hold), however
        long a state would otherwise stay live (e.g. 5 x a control_period above 0.2 s).
        """
        liveness = self.target_state_timeout or TARGET_TIMEOUT_PERIODS * self.control_period
        return min(liveness, self.target_timeout)

    @property
    def altitude_hold(self) -> bool:
        """Return whether ``altitude`` is set (not NaN)."""
        return not math.isnan(self.altitude)

    @classmethod
    def preset(cls, name: str, **changes: Any) -> 'ControllerParams':
        """
        Return the gains of preset ``name`` with ``changes`` applied.

        The presets are :data:`PRESETS`: 'default' or 'reference'.
        """
        if name not in PRESETS:
            raise ValueError(f'preset must be one of {", ".join(PRESETS)}, got {name!r}')
        return cls.from_mapping({**PRESETS[name], **changes})

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> 'ControllerParams':
        """Build from a name->value mapping; missing names keep defaults, unknown ones raise."""
        return from_mapping(cls, values)

    def with_changes(self, **changes: Any) -> 'ControllerParams':
        """Return a validated copy with ``changes`` applied."""
        return self.from_mapping({**dataclasses.asdict(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Plain name->value mapping (for summaries and YAML)."""
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=64)
def _ring_gains(params: ControllerParams) -> ControllerParams:
    """:meth:`ControllerParams.ring_gains`, built once per parameter set."""
    return dataclasses.replace(params, k_tau=params.k_tau_ring, k_e_tau=params.k_e_tau_ring,
                               k_omega_own=params.k_omega_own_ring,
                               ring_turn_acc=params.ring_turn_acc_ring, ring_gains_from=0.0)
