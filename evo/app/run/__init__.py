"""`evo run`: the campaign driver, its setup, executors, run directory, progress and results."""
