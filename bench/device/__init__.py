"""Scripts for a machine with a GPU: the device check a lent GPU runs first, the seeds and known-better kernels
measured, a short search on whatever device is there."""
