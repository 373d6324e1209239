"""Resource limits of the evaluation worker: its address space, and core dumps."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager


def set_memory_limit(megabytes: int, bench_megabytes: int) -> None:
    """Cap the address space at what imports took plus `megabytes` (checks at check sizes), and
    at most `bench_megabytes` more while bench-size buffers are needed (`roomy_address_space`: the
    hard limit). Both are configured (`evaluation.memory_mb`, `evaluation.profile_memory_mb`), never
    derived from the machine: two evaluators cannot take the machine between them by default. A
    candidate that allocates past the cap gets a MemoryError: a ``crash`` saying "memory limit"."""
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    soft = vm * 1024 + megabytes * 1024 * 1024
    hard = max(soft, vm * 1024 + bench_megabytes * 1024 * 1024)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def roomy_address_space() -> Iterator[None]:
    """Raise the soft address-space cap to the hard one while bench-size buffers are needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
