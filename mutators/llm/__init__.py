"""LLM-guided rewrites: the mutator, its prompt, the client of an OpenAI-compatible endpoint, the parsing
of answers and the record of requests."""
