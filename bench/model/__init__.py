"""The latency model's figures: its cost per candidate, its calibration against measured times, the precision behind
task tolerances, the workload tables."""
