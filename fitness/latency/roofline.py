r"""The roofline model: a deterministic latency estimate on a target GPU, from counted traffic.

Inputs per kernel launch: the counts of `fitness.latency.counts.LaunchCounts` (extrapolated from sampled
programs at the bench size), the static resources of the kernel compiled for the target
(`KernelResources`: registers R and spill bytes Sp per thread, shared memory S per program), and a
`evo.contracts.gpus.GpuProfile` (N SMs at clock f; achievable DRAM bandwidth B_dram; L2 of size L2 and
bandwidth B_l2; latencies lat_dram and lat_l2). With W warps per program and P programs::

    occupancy   k = min(floor(64 / W), 32, floor(65536 / (256 ceil(32 R / 256) W)),
                        floor(S_sm / (S + 1 KB)))          programs resident per SM
                k = 0 (S over the per-block limit, W > 32) -> does not fit: a compile error
    per SM      n = ceil(P / N) programs on the busiest SM,  waves = ceil(n / k)
    concurrent  C = min(P, N k);  U = unique bytes one program loads
    miss(X)     = clamp(1 - (L2 / 2) / X, 0, 1)            share of re-reads with working set X
                                                          that miss a (half-usable) L2
    DRAM bytes  = sum over tensors b of
                    compulsory_b                           min(sum of per-program unique, span)
                  + intra_b * miss(C U)                    re-reads within a program
                  + inter_b * (0 if reuse distance_b <= C else miss(compulsory_b + C U))
                                                           re-reads across programs: served by L2
                                                           when the programs are resident together
                  + stores (compulsory)
    L2 bytes    = every sector request (loads and stores) + spills: Sp * 32 W * 2 * (1 + rounds) * P

    t_dram  = DRAM bytes / B_dram              t_l2    = L2 bytes / B_l2
    t_sm    = max(n * (L2 bytes / P), L2 bytes of the sampled program that moves the most) / (64 B * f)
                                               the L2 -> SM path of the busiest SM
    t_tc    = n * (tensor FLOPs / P) / (peak_op * achievable * eff / N)
                  eff = 1 for wgmma (sm_90, W % 4 == 0, M >= 64), 0.6 for mma.sync on sm_90
    t_alu   = n * (float FLOPs / P) / (fp32 peak / N)
    t_sfu   = n * (transcendentals / P) / (16 f)
    t_issue = n * (warp instructions / P) / (4 f)
    chain   = rounds_dram * lat_dram + rounds_reuse * (lat_l2 + miss(C U) (lat_dram - lat_l2))
              + rounds_pipelined * lat_dram / max(1, depth - 1)      depth: the compiled pipelining
              + reductions * 300 / f + (warp instructions / P / W) / f   (issue-limited)
              + (Sp > 0) * (rounds + 1) * lat_l2                   one program, start to end
    t_lat   = max(waves * chain, chain of the longest sampled program)
                                                what too little parallelism costs (and one program
                                                that does far more than the rest: the grid waits for it)
    t_atom  = hot atomics / f                   the atomic updates of the grid's most updated address
                                                serialize: at most one per clock (a global counter)

    launch  = (sum of t_i^3 over the terms)^(1/3) + launch overhead     (a soft maximum: terms
              overlap imperfectly near balance, and a gradient survives for the search)
    latency = sum over launches of launch * repeats
              + sum over host fills of (launch overhead + bytes / achievable DRAM bandwidth)

A host fill is a tensor that `launch` zeroes or fills with torch (``out.zero_()``, ``torch.zeros``,
``fill_``...): on a GPU each one is a memset kernel of its own, timed with the rest of ``launch``.

Resources come from compiling the exact specializations that ran (`fitness.latency.target_compile`);
none is ever assumed. The model ranks kernels; its absolute figures are approximate, and every
figure it produces is labelled ``model``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from evo.contracts.gpus import GpuProfile
from fitness.latency.counts import KernelResources, LaunchCounts

_P = 3.0  # soft-maximum exponent
_RESERVED_SHARED = 1024
_REDUCTION_CYCLES = 300
_CPI = 1
_MMA_SYNC_EFFICIENCY_SM90 = 0.6


class DoesNotFit(ValueError):
    """The kernel's static resources exceed what one SM of the target offers."""


@dataclass(frozen=True)
class LaunchEstimate:
    kernel: str
    seconds: float  # one launch, overhead included
    repeats: int
    terms: dict[str, float]
    bound: str
    programs_per_sm: int
    occupancy_limit: str
    waves: int
    dram_bytes: float
    l2_bytes: float
    tensor_flops: float
    other_flops: float
    resources: KernelResources

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "kernel": self.kernel, "us": round(self.seconds * 1e6, 3), "repeats": self.repeats,
            "bound": self.bound, "terms_us": {k: round(v * 1e6, 3) for k, v in self.terms.items()},
            "programs_per_sm": self.programs_per_sm, "occupancy_limit": self.occupancy_limit,
            "waves": self.waves, "dram_bytes": round(self.dram_bytes), "l2_bytes": round(self.l2_bytes),
            "tensor_flops": round(self.tensor_flops), "other_flops": round(self.other_flops),
        }
        d.update(registers=self.resources.registers, spill_bytes=self.resources.spill_bytes,
                 shared_bytes=self.resources.shared_bytes, pipeline_depth=self.resources.pipeline_depth)
        return d


@dataclass(frozen=True)
class ModelEstimate:
    seconds: float
    launches: tuple[LaunchEstimate, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def dram_bytes(self) -> float:
        return sum(x.dram_bytes * x.repeats for x in self.launches)

    @property
    def flops(self) -> float:
        return sum((x.tensor_flops + x.other_flops) * x.repeats for x in self.launches)


def occupancy(warps: int, resources: KernelResources, gpu: GpuProfile) -> tuple[int, str]:
    """Programs resident per SM and the resource that limits them."""
    if warps > 32:
        raise DoesNotFit(f"num_warps={warps} is more than 1024 threads per program")
    if warps < 1:
        raise DoesNotFit(f"num_warps={warps}: a program needs at least one warp")
    regs = resources.registers
    shared = resources.shared_bytes
    if shared > gpu.shared_per_block:
        raise DoesNotFit(
            f"needs {shared} bytes of shared memory per program; {gpu.name} allows {gpu.shared_per_block}")
    per_warp_regs = 256 * math.ceil(32 * max(regs, 1) / 256)  # registers are allocated per warp in units of 256
    limits = {
        "warps": gpu.max_warps_per_sm // warps,
        "blocks": gpu.max_blocks_per_sm,
        "registers": gpu.registers_per_sm // (per_warp_regs * warps),
        "shared memory": gpu.shared_per_sm // (shared + _RESERVED_SHARED),
    }
    limiter = min(limits, key=lambda k: limits[k])
    if limits[limiter] < 1:
        raise DoesNotFit(f"one program does not fit on an SM of {gpu.name} ({limiter}: {regs} registers/thread, "
                         f"{shared} bytes shared, {warps} warps)")
    return limits[limiter], limiter


def _miss(working_set: float, gpu: GpuProfile) -> float:
    if working_set <= 0:
        return 0.0
    return min(max(1.0 - (gpu.l2_bytes / 2) / working_set, 0.0), 1.0)


def estimate_launch(c: LaunchCounts, res: KernelResources, gpu: GpuProfile) -> LaunchEstimate:
    """One launch's time by the formula of the module docstring."""
    warps = c.num_warps
    k, limiter = occupancy(warps, res, gpu)
    p = max(c.programs, 1)
    n_sm = math.ceil(p / gpu.sms)
    waves = math.ceil(n_sm / k)
    concurrent = min(p, gpu.sms * k)
    live = concurrent * c.unique_bytes_per_program
    miss_intra = _miss(live, gpu)
    dram = 0.0
    for b in c.buffers:
        intra = max(b.requests - b.unique, 0.0)
        inter = max(b.unique - b.compulsory, 0.0)
        shared_while_resident = 0 < b.reuse_distance <= concurrent
        miss_inter = 0.0 if shared_while_resident else _miss(b.compulsory + live, gpu)
        dram += b.compulsory + intra * miss_intra + inter * miss_inter + b.store_compulsory
    spill = res.spill_bytes
    rounds = c.rounds_dram_per_program + c.rounds_reuse_per_program + c.rounds_pipelined_per_program
    spill_bytes = spill * 32 * warps * 2 * (1 + rounds) * p
    l2 = c.load_requests + c.store_requests + spill_bytes
    f = gpu.clock_hz
    per_sm = n_sm / p  # share of the grid's work on the busiest SM
    wgmma = gpu.arch >= 90 and warps % 4 == 0 and c.dot_min_m >= 64
    tc_eff = 1.0 if wgmma or gpu.arch < 90 else _MMA_SYNC_EFFICIENCY_SM90
    tensor = sum(c.tensor_flops.values())
    t_tc = sum(v * per_sm / (gpu.tensor_rate(op) * gpu.tensor_achievable_fraction * tc_eff / gpu.sms)
               for op, v in c.tensor_flops.items())

    def chain_of(dram_rounds: float, reuse_rounds: float, pipelined_rounds: float, reductions: float,
                 instructions: float) -> float:
        """One program's time start to end, from its round trips, reductions and instructions (per warp)."""
        return (
            dram_rounds * gpu.dram_latency_s
            + reuse_rounds * (gpu.l2_latency_s + miss_intra * (gpu.dram_latency_s - gpu.l2_latency_s))
            + pipelined_rounds * gpu.dram_latency_s / max(1, res.pipeline_depth - 1)
            + reductions * _REDUCTION_CYCLES / f
            + instructions / warps * _CPI / f
            + (dram_rounds + reuse_rounds + pipelined_rounds + 1) * gpu.l2_latency_s * (spill > 0)
        )

    chain = chain_of(c.rounds_dram_per_program, c.rounds_reuse_per_program, c.rounds_pipelined_per_program,
                     c.reductions_per_program, c.warp_instructions / p)
    longest = chain_of(c.longest_rounds_dram, c.longest_rounds_reuse, c.longest_rounds_pipelined,
                       c.longest_reductions, c.longest_warp_instructions)
    terms = {
        "dram": dram / gpu.dram_achievable,
        "l2": l2 / gpu.l2_bandwidth,
        # the busiest SM's share, or the one program that moves the most: it runs on one SM whatever the rest do
        "sm_path": max(l2 * per_sm, c.longest_l2_bytes) / (gpu.sm_load_bytes_per_clock * f),
        "tensor": t_tc,
        "alu": (c.alu_flops + c.fma_flops) * per_sm / (gpu.fp32_peak / gpu.sms),
        "sfu": c.sfu_ops * per_sm / (16 * f),
        "issue": c.warp_instructions * per_sm / (4 * f),
        "latency": max(waves * chain, longest),  # the grid is done no sooner than its longest program
        "atomics": c.hot_atomics / f,  # one update per clock at most to one address: they serialize in L2
    }
    body = sum(t**_P for t in terms.values()) ** (1 / _P)
    return LaunchEstimate(
        kernel=c.kernel, seconds=body + gpu.launch_overhead_s, repeats=c.repeats, terms=terms,
        bound=max(terms, key=lambda t: terms[t]), programs_per_sm=k, occupancy_limit=limiter, waves=waves,
        dram_bytes=dram, l2_bytes=l2, tensor_flops=tensor, other_flops=c.alu_flops + c.fma_flops, resources=res,
    )


def estimate(launches: list[LaunchCounts], resources: list[KernelResources], gpu: GpuProfile) -> ModelEstimate:
    """The latency of one call of ``launch``: every launch it makes, in order."""
    ests = tuple(estimate_launch(c, r, gpu) for c, r in zip(launches, resources))
    return ModelEstimate(sum(e.seconds * e.repeats for e in ests), ests)


def fill_seconds(fills: list[int], gpu: GpuProfile) -> float:
    """What the host fills of one call of ``launch`` (bytes written by each) cost: one memset launch each."""
    return sum(gpu.launch_overhead_s + b / gpu.dram_achievable for b in fills)


def speed_of_light(flops: float | None, bytes_moved: float | None, gpu: GpuProfile, dtype: str, *,
                   bound: bool = False) -> float | None:
    """The least time the task's FLOPs and bytes can take at the GPU's *peak* rates (seconds).

    With `bound`, the lower bound a measurement is held to: the L2 may still hold up to its size
    of written data when a kernel ends, so that much traffic is not counted.
    """
    times = []
    if bytes_moved:
        times.append(max(bytes_moved - (gpu.l2_bytes if bound else 0), 0) / gpu.dram_peak)
    if flops:
        operand = {"float16": "fp16", "bfloat16": "bf16", "float32": "tf32"}.get(dtype, "fp32")
        times.append(flops / max(gpu.tensor_rate(operand), gpu.fp32_peak))
    return max(times) if times else None
