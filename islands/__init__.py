"""Island populations and the Ray machinery that runs them (see `islands.island` for the model)."""
