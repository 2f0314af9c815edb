"""ControllerParams (core/gains.py): defaults, derived timeouts, bad values named."""
import pytest

from soliton_encirclement_ros.core.gains import ControllerParams
from support.core_cases import P


def test_params_defaults_and_auto_timeouts():
    assert P.radius == 20.0 and P.k_e_tau == 25.0 and P.hysteresis == 0.05
    assert P.agent_timeout == pytest.approx(0.03)
    assert P.target_liveness == pytest.approx(0.05)
    explicit = P.with_changes(control_period=0.05, agent_state_timeout=0.5)
    assert explicit.agent_timeout == 0.5 and explicit.target_liveness == pytest.approx(0.25)


@pytest.mark.parametrize('field, value, message', [
    ('radius', 0.0, 'radius must be > 0, got 0.0'),
    ('k_r', -1.0, 'k_r must be >= 0, got -1.0'),
    ('control_period', float('nan'), 'control_period must be finite, got nan'),
    ('hysteresis', 'wide', "hysteresis must be a number, got 'wide'"),
    ('soft_limiter', 1, 'soft_limiter must be a bool, got 1'),
])
def test_params_reject_bad_values_naming_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        ControllerParams.from_mapping({field: value})


def test_params_reject_unknown_key():
    with pytest.raises(ValueError, match='unknown ControllerParams field.*k_typo'):
        ControllerParams.from_mapping({'k_typo': 1.0})
