"""ControllerParams (core/gains.py): defaults, derived timeouts, bad values named."""
from pathlib import Path

import pytest
import yaml

from soliton_encirclement_ros.core.gains import ControllerParams
from support.core_cases import P

CONFIG = Path(__file__).parents[3] / 'config'


def test_params_defaults_and_auto_timeouts():
    assert P.radius == 20.0 and P.k_e_tau == 25.0 and P.hysteresis == 0.05
    assert P.agent_timeout == pytest.approx(0.03)  # 3 periods
    floored = ControllerParams(agent_timeout_floor=0.25)
    assert floored.agent_timeout == pytest.approx(0.25)  # 3 periods, at least the floor
    assert floored.with_changes(control_period=0.1).agent_timeout == pytest.approx(0.3)
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


def test_example_parameter_files_fly_the_defaults():
    """
    controller.yaml lists the defaults; swarm.yaml (the simulated launch's file) changes none.

    swarm.yaml once set the reference's k_tau and k_e_tau: ``ros2 launch`` flew those with the
    defaults' damping terms, a mix that neither swarm_sim nor the reference flies.
    """
    defaults = ControllerParams()
    files = {'controller.yaml': '/**', 'swarm.yaml': '/**/agent'}
    for name, key in files.items():
        values = yaml.safe_load((CONFIG / name).read_text())[key]['ros__parameters']
        gains = {k: v for k, v in values.items() if k in ControllerParams.__dataclass_fields__}
        assert gains or name == 'swarm.yaml'
        assert {k: getattr(defaults, k) for k in gains} == gains, name
