"""The task library: one folder per task with ``task.py`` (native format) and ``seed.py``."""
