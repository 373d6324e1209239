"""Resource limits of the evaluation worker: its address space, and core dumps."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager


def set_memory_limit(megabytes: int) -> None:
    """Cap the address space at what imports took plus `megabytes` (no harm to the machine).

    The hard limit is higher (half the machine's memory, if that is more): bench-size profiling
    allocates full-size buffers (a naive attention's score matrix is 8 GiB) but touches only the
    parts its sampled programs use, so it lifts the soft cap for its duration (`roomy_address_space`).
    """
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    with open("/proc/meminfo") as f:
        total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    soft = vm * 1024 + megabytes * 1024 * 1024
    hard = max(soft, vm * 1024 + total_kb * 1024 // 2)
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
