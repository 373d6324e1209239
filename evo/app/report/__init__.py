"""`evo report`: a run read back, its figures and plots, rendered as HTML and Markdown."""
