"""How well the search does: SPACE sweeps (the baseline any search must beat), search tables and anytime curves,
mutators alone, the stand-in LLM's recorded replies."""
