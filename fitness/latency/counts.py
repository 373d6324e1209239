"""What the instrumented interpreter counted for one kernel launch, extrapolated to the whole grid.

The worker fills these from a sample of programs (`fitness.latency.interp_profile`); the roofline model
(`fitness.latency.roofline`) turns them into a time. Byte counts are in 32-byte sectors' worth of bytes
(the unit a GPU moves between L2 and DRAM), so a strided access pays for whole sectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class BufferTraffic:
    """Traffic to one tensor argument over the whole grid.

    requests: sectors loaded, summed over every load (re-reads included): L2 requests.
    unique: sectors loaded, counted once per program, summed over programs.
    span: bytes between the lowest and highest address any sample touched (clipped to the buffer).
    reuse_distance: the smallest launch-order distance (in programs) at which another program
    loads mostly the same sectors, 0 if none was found within the probes. Programs that close
    together are resident at the same time: their re-reads are served by L2.
    """

    name: str
    size: int
    requests: float = 0.0
    unique: float = 0.0
    span: float = 0.0
    reuse_distance: int = 0
    store_requests: float = 0.0
    store_unique: float = 0.0
    store_span: float = 0.0

    @property
    def compulsory(self) -> float:
        """Bytes that must come from DRAM at least once."""
        return min(self.unique, self.span) if self.span else self.unique

    @property
    def store_compulsory(self) -> float:
        return min(self.store_unique, self.store_span) if self.store_span else self.store_unique


@dataclass(frozen=True)
class LaunchCounts:
    """One kernel launch. Totals are over the grid; `*_per_program` are means over programs."""

    kernel: str
    grid: tuple[int, int, int]
    num_warps: int
    num_stages: int
    buffers: tuple[BufferTraffic, ...] = ()
    tensor_flops: dict[str, float] = field(default_factory=dict)  # by operand type: fp16, bf16, tf32, fp8
    fma_flops: float = 0.0  # tl.dot in full fp32 on CUDA cores
    alu_flops: float = 0.0  # element-wise float work and reductions
    sfu_ops: float = 0.0  # exp, log, sqrt, division...
    warp_instructions: float = 0.0
    rounds_dram_per_program: float = 0.0  # memory round trips that bring new sectors
    rounds_reuse_per_program: float = 0.0  # round trips that re-read sectors this program read before
    rounds_pipelined_per_program: float = 0.0  # of those, loads feeding tl.dot (software-pipelined)
    reductions_per_program: float = 0.0
    unique_bytes_per_program: float = 0.0
    dot_min_m: int = 0  # smallest M of any tl.dot (wgmma needs 64 per warp group)
    hot_atomics: float = 0.0  # atomic updates of the most updated address, over the grid (they serialize)
    # the most any one sampled program did of each (a grid finishes with its longest program)
    longest_rounds_dram: float = 0.0
    longest_rounds_reuse: float = 0.0
    longest_rounds_pipelined: float = 0.0
    longest_reductions: float = 0.0
    longest_warp_instructions: float = 0.0
    longest_l2_bytes: float = 0.0  # loads and stores one program requests (its SM's path to L2 carries them)
    sampled_programs: int = 0
    repeats: int = 1  # identical launches in one call (counted once, timed `repeats` times)
    spec: int = 0  # index of its compiled specialization (`fitness.latency.interp_profile.compile_spec`)

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def load_requests(self) -> float:
        return sum(b.requests for b in self.buffers)

    @property
    def store_requests(self) -> float:
        return sum(b.store_requests for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["grid"] = list(self.grid)
        d["buffers"] = [asdict(b) for b in self.buffers]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchCounts:
        d = dict(d)
        d["grid"] = tuple(d["grid"])
        d["buffers"] = tuple(BufferTraffic(**b) for b in d["buffers"])
        return cls(**d)


@dataclass(frozen=True)
class KernelResources:
    """Static resources of one compiled kernel on the target (from ptxas via cuobjdump)."""

    kernel: str
    num_warps: int
    registers: int
    spill_bytes: int  # per thread (local memory stack)
    shared_bytes: int  # per program (dynamic + static)
    pipeline_depth: int  # buffers of the least pipelined loop's copies into shared memory (1: none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelResources:
        return cls(**d)
