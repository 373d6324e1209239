"""What tells which kind of device holds a tensor: the lint names these in its message
(`fitness.check.lint`) and the run-time guard refuses them (`fitness.sandbox.torch_guard`). What ran in
the CPU interpreter must be what runs on the GPU; a CUDA allocation is always 512-byte aligned and a CPU
one is not (``data_ptr``), and a tensor's text names a CUDA device (the dunders). No imports: the lint
stays free of torch."""

DEVICE_QUERIES = frozenset({"is_cuda", "is_cpu", "is_meta", "is_mps", "is_xpu", "get_device", "type", "device_type",
                            "data_ptr", "__format__", "__repr__", "__str__"})
