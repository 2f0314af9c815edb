"""Controller gains and timeouts of the soliton encirclement law: one validated object.

Defaults are the reference configuration (see ``config/controller.yaml`` for what each one
does). The agent node, the batch simulator and YAML files all build a :class:`ControllerParams`
so that they share one rule set; bad values raise ``ValueError`` naming the field and value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from velocity_mobility_ros.validation import finite_float, from_mapping

# Fields and the lower bound each must respect: (bound, strict). Gains that may take any sign
# (the KdV-like terms) are absent and only need to be finite.
_LOWER_BOUNDS = {
    'radius': (0.0, True),
    'k_r': (0.0, False),
    'k_dr': (0.0, False),
    'c_coupling': (0.0, False),
    'beta_u': (0.0, False),
    'alpha_u': (0.0, False),
    'k_e_tau': (0.0, False),
    'kappa_u_diff': (0.0, False),
    'k_tau': (0.0, False),
    'r_min': (0.0, True),
    'k_omega_damp': (0.0, False),
    'u_lim': (0.0, True),
    'hysteresis': (0.0, False),
    'control_period': (0.0, True),
    'agent_state_timeout': (0.0, False),
    'target_state_timeout': (0.0, False),
    'max_speed_xy': (0.0, True),
    'max_speed_z': (0.0, True),
}
_BOOL_FIELDS = ('soft_limiter', 'prune_expired')
AGENT_TIMEOUT_PERIODS = 3.0   # auto agent_state_timeout, in control periods
TARGET_TIMEOUT_PERIODS = 5.0  # auto target_state_timeout, in control periods


@dataclass(frozen=True)
class ControllerParams:
    """Every gain and timeout of the reference agent control loop (SI units, radians)."""

    radius: float = 20.0             # desired encirclement radius R [m]
    k_r: float = 1.0                 # radial proportional gain [1/s]
    k_dr: float = 0.5                # radial damping gain on the radial speed [-]
    c_coupling: float = 2.0          # soliton transport term C*(u_succ - u_pred)
    beta_u: float = 7.0              # linear decay of u
    alpha_u: float = 0.5             # cubic (or soft-limited) decay of u
    k_e_tau: float = 25.0            # drive of u by the spacing error e_tau
    kappa_u_diff: float = 0.1        # 1-hop diffusion on u_ss; 0 disables
    k_u_steepen: float = 0.3         # KdV-like steepening -k*u*u_s; 0 disables
    kappa_u_disp: float = 0.05       # KdV-like dispersion on u_sss; 0 disables
    k_tau: float = 0.2               # angular rate per unit u [rad/s]
    r_min: float = 1.0               # r_eff = max(r, r_min) in the tangential mapping [m]
    k_omega_damp: float = 0.1        # angular-rate damping on e_tau; 0 disables
    soft_limiter: bool = False       # g(u) = u^3/(1+(|u|/u_lim)^2) instead of u^3
    u_lim: float = 2.0               # soft limiter scale
    hysteresis: float = 0.05         # neighbour switch hysteresis [rad]
    control_period: float = 0.01     # control tick and Euler step of u [s]
    agent_state_timeout: float = 0.0   # agent state liveness [s]; 0 = 3 x control_period
    target_state_timeout: float = 0.0  # target state liveness [s]; 0 = 5 x control_period
    prune_expired: bool = True       # drop expired agent states from the cache
    max_speed_xy: float = 10.0       # command clamp, horizontal norm [m/s]
    max_speed_z: float = 5.0         # command clamp, abs vertical [m/s]

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _BOOL_FIELDS:
                if not isinstance(value, bool):
                    raise ValueError(f'{field.name} must be a bool, got {value!r}')
                continue
            value = finite_float(field.name, value)
            object.__setattr__(self, field.name, value)
            bound = _LOWER_BOUNDS.get(field.name)
            if bound is not None:
                low, strict = bound
                if value < low or (strict and value == low):
                    raise ValueError(
                        f'{field.name} must be {">" if strict else ">="} {low:g}, got {value}')

    @property
    def agent_timeout(self) -> float:
        """Resolved agent state timeout [s] (``agent_state_timeout`` or 3 x control_period)."""
        return self.agent_state_timeout or AGENT_TIMEOUT_PERIODS * self.control_period

    @property
    def target_timeout(self) -> float:
        """Resolved target state timeout [s] (``target_state_timeout`` or 5 x control_period)."""
        return self.target_state_timeout or TARGET_TIMEOUT_PERIODS * self.control_period

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> 'ControllerParams':
        """Build from a name->value mapping; missing names keep defaults, unknown ones raise."""
        return from_mapping(cls, values)

    def with_changes(self, **changes: Any) -> 'ControllerParams':
        """Validated copy with ``changes`` applied."""
        return self.from_mapping({**dataclasses.asdict(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Plain name->value mapping (for summaries and YAML)."""
        return dataclasses.asdict(self)
