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


def test_simulated_faults_are_drawn_from_the_seed_one_agent_each():
    """Which agents a run's killed agents, reset and clock step strike: from its seed."""
    import numpy as np
    from soliton_encirclement_ros.core.faults import fault_plan, RESET_HOLD_JUMP
    from soliton_encirclement_ros.core.scenario import Scenario
    scenario = Scenario(agents=6, silent_failures=2, reset_jump=44.72, clock_step=2.0,
                        fault_time=7.0)
    plan = fault_plan(scenario, 6, 3)
    assert plan.killed.sum() == 2 and np.count_nonzero(plan.uncertainty) == 1
    assert np.count_nonzero(plan.clock) == 1
    struck = plan.killed | (plan.uncertainty > 0) | (plan.clock != 0)
    assert struck.sum() == 4  # each agent by one fault at most
    reset = int(np.flatnonzero(plan.uncertainty)[0])
    assert abs(np.hypot(*plan.shift[reset, :2]) - 44.72) < 1e-9
    assert plan.held[reset] and 44.72 > RESET_HOLD_JUMP
    assert not plan.at(6.9).active and plan.at(7.0).active
    again = fault_plan(scenario, 6, 3)
    assert again.killed.tolist() == plan.killed.tolist()
    assert fault_plan(scenario, 6, 4).killed.tolist() != plan.killed.tolist() or \
        fault_plan(scenario, 6, 4).clock.tolist() != plan.clock.tolist()
    small = fault_plan(Scenario(agents=3, reset_jump=1.5), 3, 0)
    assert not small.held.any()  # a bridge flies on after a jump within max_reset_jump
    assert not fault_plan(Scenario(agents=3), 3, 0).active


def test_a_run_models_each_fault_as_a_real_flight_meets_it():
    """
    Each simulated fault as a real flight meets it, in the agent node's code path.

    Killed: silent and held; reset: broadcast shifted with its uncertainty, vehicle held;
    clock step: its states reach the others as presence.
    """
    import numpy as np
    from soliton_encirclement_ros.core.faults import fault_plan
    from soliton_encirclement_ros.core.scenario import Scenario
    from soliton_encirclement_ros.core.swarm_run import SwarmRun
    scenario = Scenario(agents=6, seed=2, duration=6.0, control_period=0.05,
                        silent_failures=1, reset_jump=10.0, clock_step=2.0, fault_time=2.0)
    plan = fault_plan(scenario, 6, 2)
    killed, reset = int(np.flatnonzero(plan.killed)[0]), int(np.flatnonzero(plan.uncertainty)[0])
    stepped = int(np.flatnonzero(plan.clock)[0])
    run = SwarmRun(scenario, 'per-agent')
    for _ in range(run.ticks + 1):
        tick = run.tick()
        if tick.now >= 2.0:
            assert not tick.live[killed] and tick.silent[killed]
            assert tick.commands[killed].tolist() == [0.0, 0.0, 0.0]
            assert tick.commands[reset].tolist() == [0.0, 0.0, 0.0]  # held
        if tick.index == run.ticks:
            break
        run.advance()
    states = run._swarm.states
    other = next(i for i in range(6) if i not in (killed, reset, stepped))
    table = states[other].neighbours
    rows = {int(i): k for k, i in enumerate(table.ids.tolist())}
    ids = scenario.agent_ids()
    assert table.rx[rows[ids[killed]]] < 2.0 + 1e-9          # not heard since it was killed
    unc = table.floats[rows[ids[reset]], 9]
    assert unc == 10.0                                         # its jump, as uncertainty
    assert table.floats[rows[ids[stepped]], 8] == 0.0          # kept as presence, not member


def test_a_failed_agent_listens_and_knows_a_vehicle_that_fell_silent_meanwhile():
    """
    Failed at 1 s, back at 3 s: it knows where agent 2, killed at 2 s, last was.

    Before, a failed agent heard nothing: back in the ring, its last state of agent 2 was from
    before its own failure, 1 s older than the vehicle's last known place (in the separation
    benchmark an agent back from an outage flew into a vehicle killed meanwhile, 15 m from
    where it had last heard it: 0.03 d_safe).
    """
    import numpy as np
    from soliton_encirclement_ros.core.batch_engine import BatchControllers, stack_plans
    from soliton_encirclement_ros.core.controller import seconds_to_ns, TargetBroadcast
    from soliton_encirclement_ros.core.engines import PerAgentSwarm
    from soliton_encirclement_ros.core.faults import no_faults
    from soliton_encirclement_ros.core.gains import ControllerParams
    from soliton_encirclement_ros.core.scenario import Scenario
    params = ControllerParams(control_period=0.05)
    ids = np.array([1, 2, 3])
    per_agent = PerAgentSwarm(ids, params, 0.0, 0.0, 0)
    batch = BatchControllers([Scenario(agents=3, control_period=0.05, silent_failures=1)], ids)
    positions = np.array([[20.0, 0.0, 0.0], [0.0, 20.0, 0.0], [-20.0, 0.0, 0.0]])
    for k in range(61):
        now = k * 0.05
        faults = no_faults(3)
        if now >= 2.0 - 1e-9:
            faults.killed[1] = True
        live = ~faults.killed & ~((now >= 1.0 - 1e-9) & (now < 3.0 - 1e-9) & (ids == 1))
        moved = positions + np.array([0.0, now, 0.0])  # agent 2 flies on until killed
        target = TargetBroadcast(seconds_to_ns(now), np.zeros(3), np.zeros(3))
        per_agent.tick(now, live, moved, np.zeros((3, 3)), target, faults)
        batch.tick(now, live[None], moved[None], np.zeros((1, 3, 3)), np.zeros((1, 3)),
                   np.zeros((1, 3)), 0.0, stack_plans([faults]))
    table = per_agent.states[0].neighbours
    row = table.ids.tolist().index(2)
    assert abs(table.rx[row] - 1.95) < 1e-9           # its last state, heard while failed
    assert table.floats[row, 1] == 20.0 + 1.95
    assert abs(batch.rx[0, 0, 1] - 1.95) < 1e-9 and batch.position[0, 0, 1, 1] == 20.0 + 1.95


def test_an_agent_whose_clock_stepped_ahead_ages_the_others_states_from_their_arrival():
    """
    Its clock 2 s ahead, every other state arrives 2 s after its stamp: the stamp is no age.

    Before, the agent counted every other state 2 s old and carried each vehicle ``t_safe``
    (1 s) on along its velocity, not the link's delay (in the separation benchmark the stepped
    agent flew to 0.24 d_safe of a neighbour). Now a state stamped more than
    ``max_future_stamp`` before its arrival is aged from its arrival, in the agent node's code
    path and in the batch engine alike: the agent flies as on one clock.
    """
    import numpy as np
    from soliton_encirclement_ros.core.batch_engine import BatchControllers
    from soliton_encirclement_ros.core.controller import (
        AgentBroadcast, control_step, initial_state, receive_states, seconds_to_ns,
        TargetBroadcast)
    from soliton_encirclement_ros.core.gains import ControllerParams
    from soliton_encirclement_ros.core.scenario import Scenario
    # the crowd's gains on the ring too: the ring's saturate the command at max_speed_xy
    params = ControllerParams(d_safe=2.0, control_period=0.05, ring_gains_from=0.0)
    own, own_velocity = np.array([20.0, 0.0, 0.0]), np.array([0.0, -4.0, 0.0])
    ahead, slower = np.array([20.0, -6.0, 0.0]), np.array([0.0, -1.0, 0.0])

    def command(sent, arrival):
        """Agent 1's table and command at ``arrival``: agent 2's vehicle (sent at ``sent``)."""
        state = receive_states(initial_state(1), [
            (TargetBroadcast(seconds_to_ns(arrival), np.zeros(3), np.zeros(3)), arrival),
            (AgentBroadcast(3, 1, seconds_to_ns(arrival), [-20.0, 0.0, 0.0], np.zeros(3),
                            0.0), arrival),  # the ring: agent 3 across the target
            (AgentBroadcast(2, 1, seconds_to_ns(sent), ahead, slower, 0.0, member=False),
             arrival)], params)  # a presence ahead of it: its d_safe term alone
        return state, control_step(state, own, own_velocity, arrival, params)[1]

    stepped, late = command(10.0, 12.0)      # its clock 2 s ahead of agent 2's
    _, synchronised = command(12.0, 12.0)    # the same state on one clock
    assert late.tolist() == synchronised.tolist(), (late, synchronised)
    row = stepped.neighbours.ids.tolist().index(2)
    assert stepped.neighbours.ints[row, 3] == seconds_to_ns(12.0)  # aged from its arrival
    _, half = command(11.5, 12.0)            # within max_future_stamp: the stamp's age
    assert half.tolist() != synchronised.tolist()
    # The batch engine: the same rule over receiver x sender arrays.
    batch = BatchControllers([Scenario(agents=2, control_period=0.05, clock_step=2.0)],
                             np.array([1, 2]))
    got = np.array([[[False, True], [True, False]]])
    batch._keep_faults(got, {'stamp': np.array([[[12.0, 10.0], [11.5, 12.0]]]),
                             'uncertainty': np.zeros((1, 2)), 'rx': np.array([[12.0, 12.0]])},
                       np.stack((own, ahead))[None], np.stack((own_velocity, slower))[None],
                       12.0)
    assert batch.stamp[0, 0, 1] == 12.0 and batch.stamp[0, 1, 0] == 11.5
