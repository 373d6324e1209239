"""What the machinery costs: the broker's throughput, the fork server's and the sandbox's cost per evaluation, the cost
of verification."""
