"""Simulation drivers: parameter sweeps (``sweep_sim``)."""
