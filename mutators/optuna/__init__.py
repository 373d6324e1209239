"""Optuna tuning of a kernel's tile meta-parameters (its SPACE)."""
