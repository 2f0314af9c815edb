"""
The offboard sequencer's parts (pure): the façade is ``px4.offboard.OffboardSequencer``.

``mavlink`` (PX4's numbers and the commands), ``config`` (timing), ``outputs`` (what the
sequencer answers), ``link`` (PX4's word, the stream, other setpoint writers),
``transaction`` (a command sent, acknowledged, confirmed or timed out), ``phases`` and
``handover`` (one class per phase), ``readiness`` (the engage checks), ``trust`` (estimator
resets), ``battery``, ``setpoint`` (cmd_vel or a hold, and why) and ``status`` (``~/status``).
"""
