"""STOKE-style random local tweaks walked as a Metropolis-Hastings chain: the mutator and its figures."""
