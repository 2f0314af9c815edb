"""Failure injection (core/faults.py)."""


def test_outage_process_starts_its_checks_at_the_first_update_on_a_wall_clock():
    from soliton_encirclement_ros.core.faults import OutageProcess
    wall = 1.8e9 + 0.37
    process = OutageProcess(failures_per_min=0.0, seed=1, agent_id=1)
    assert process.update(wall) is False
    assert process.update(wall + 5.0) is False
    assert process._checks == 50  # 5 s of 0.1 s checks, not 1.8e10 of them since the epoch
    sim = OutageProcess(failures_per_min=600.0, off_time=0.5, seed=3, agent_id=2)
    shifted = OutageProcess(failures_per_min=600.0, off_time=0.5, seed=3, agent_id=2)
    sim.update(0.05)
    shifted.update(1000.05)
    assert [sim.update(0.05 + 0.1 * k) for k in range(50)] == [
        shifted.update(1000.05 + 0.1 * k) for k in range(50)
    ]
