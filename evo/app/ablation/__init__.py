"""`evo ablate`: ablation studies (variants x seeds as campaigns), their statistics and report."""
