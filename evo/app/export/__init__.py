"""`evo export`: a run's best kernel as a torch custom op or an autotuned module, checked."""
