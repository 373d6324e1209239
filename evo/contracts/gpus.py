"""GPU profiles: the figures the roofline model and the speed-of-light bound use, with their sources.

Two kinds of figure are kept apart. *Peak* figures are the vendor's datasheet numbers; the
speed-of-light bound uses them, so no legitimate measurement can fall below it. *Achievable*
figures are what a well-written kernel reaches in practice (measured on the machine where we had
one, else the datasheet figure times the ratio measured on a sibling part); the model uses them.
Latencies, the L2 bandwidth and the SM load path are approximations from public microbenchmarks,
labelled as such: they set the shape of the model, not a promise.

Sources:
- [H100-DS] NVIDIA H100 Tensor Core GPU datasheet (SXM5: 3.35 TB/s HBM3, 989 TFLOP/s dense
  FP16/BF16, 495 TFLOP/s dense TF32, 67 TFLOP/s FP32, 132 SMs) and the NVIDIA H100 Hopper
  architecture whitepaper (50 MB L2 on SXM5, 228 KB shared memory per SM, 227 KB per block,
  65,536 registers, 64 warps and 32 blocks per SM, 1.98 GHz max boost).
- [H200-DS] NVIDIA H200 Tensor Core GPU datasheet (SXM: 4.8 TB/s HBM3e, same compute as H100 SXM).
- [H200-HERE] The H200 SXM lent to this project: ~4.3 TB/s device-to-device copy, ~790 TFLOP/s
  bf16 dense matmul (torch), 132 SMs, 60 MB L2 reported by the driver (device notes).
- [A100-DS] NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB: 2.04 TB/s HBM2e, 312 TFLOP/s dense
  FP16/BF16, 156 TFLOP/s TF32, 19.5 TFLOP/s FP32) and the NVIDIA A100 (Ampere) architecture
  whitepaper (108 SMs, 40 MB L2, 164 KB shared memory per SM, 163 KB per block, 1.41 GHz boost).
- [UBENCH] Approximate latencies and L2 bandwidth from public microbenchmarks (Chips and Cheese,
  "Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023; Jia et al., "Dissecting the NVIDIA
  Volta GPU Architecture via Microbenchmarking", 2018, for the method): global memory round trip
  ~500-700 ns under load, L2 hit ~250 ns. The L2 bandwidth is set so that a 128x128-tile fp16
  GEMM at cuBLAS speed is not L2-bound, which needs ~11 TB/s on H100 (2.1 GB of tile traffic in
  ~190 us); 2.3x the V100's L2 bandwidth on A100 per [A100-DS].
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuProfile:
    """Figures of one GPU model. Bandwidths in bytes/s, rates in FLOP/s, sizes in bytes."""

    name: str
    description: str
    arch: int  # compute capability as an integer (90 = sm_90): the cross-compile target
    sms: int
    clock_hz: float
    dram_peak: float
    dram_achievable: float
    l2_bytes: int
    l2_bandwidth: float
    # dense tensor-core peaks by operand type; "fp32" is the non-tensor FMA rate (FLOP/s)
    tensor_peak: dict[str, float] = field(default_factory=dict)
    tensor_achievable_fraction: float = 0.8
    fp32_peak: float = 0.0
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    shared_per_sm: int = 228 * 1024
    shared_per_block: int = 227 * 1024
    dram_latency_s: float = 650e-9
    l2_latency_s: float = 250e-9
    launch_overhead_s: float = 2.5e-6  # GPU-side gap between back-to-back kernel launches
    sm_load_bytes_per_clock: int = 64  # L2 -> SM path per SM
    sources: tuple[str, ...] = ()

    def tensor_rate(self, operand: str) -> float:
        """The dense tensor-core peak for `operand` ('fp16', 'bf16', 'tf32', 'fp8'), else the FP32 rate."""
        return self.tensor_peak.get(operand, self.fp32_peak)

    def summary(self) -> str:
        """The figures a kernel engineer tunes for, in one line (for the LLM's prompt and reports)."""
        tensor = ", ".join(f"{self.tensor_peak[k] / 1e12:.0f} TFLOP/s {k}" for k in ("fp16", "bf16", "tf32", "fp8")
                           if k in self.tensor_peak)
        return (f"{self.description} ({self.name}, sm_{self.arch}): {self.sms} SMs at {self.clock_hz / 1e9:.2f} GHz; "
                f"DRAM {self.dram_peak / 1e12:.2f} TB/s peak, ~{self.dram_achievable / 1e12:.2f} TB/s achievable; "
                f"L2 {self.l2_bytes / 2**20:.0f} MB; shared memory {self.shared_per_sm // 1024} KB per SM "
                f"({self.shared_per_block // 1024} KB per block); {self.registers_per_sm} registers and "
                f"{self.max_warps_per_sm} warps per SM; dense tensor cores {tensor}; "
                f"{self.fp32_peak / 1e12:.0f} TFLOP/s fp32")

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "sms": self.sms, "dram_peak_tb_s": self.dram_peak / 1e12,
            "dram_achievable_tb_s": self.dram_achievable / 1e12, "l2_mb": self.l2_bytes / 1e6,
            "fp16_tflops": self.tensor_rate("fp16") / 1e12,
        }


_HOPPER_TENSOR = {"fp16": 989.4e12, "bf16": 989.4e12, "tf32": 494.7e12, "fp8": 1978.9e12}

PROFILES: dict[str, GpuProfile] = {
    "h100": GpuProfile(
        name="h100",
        description="NVIDIA H100 SXM5 80 GB",
        arch=90, sms=132, clock_hz=1.98e9,
        dram_peak=3.35e12,
        dram_achievable=3.35e12 * (4.3 / 4.8),  # the copy/peak ratio measured on the H200 [H200-HERE]
        l2_bytes=50 * 1024 * 1024,
        l2_bandwidth=12e12,
        tensor_peak=dict(_HOPPER_TENSOR),
        tensor_achievable_fraction=790 / 989.4,  # [H200-HERE]: same SMs and clocks as H100 SXM
        fp32_peak=66.9e12,
        sources=("H100-DS", "H200-HERE (achievable ratios)", "UBENCH"),
    ),
    "h200": GpuProfile(
        name="h200",
        description="NVIDIA H200 SXM 141 GB",
        arch=90, sms=132, clock_hz=1.98e9,
        dram_peak=4.8e12,
        dram_achievable=4.3e12,
        l2_bytes=60 * 1024 * 1024,
        l2_bandwidth=12e12,
        tensor_peak=dict(_HOPPER_TENSOR),
        tensor_achievable_fraction=790 / 989.4,
        fp32_peak=66.9e12,
        sources=("H200-DS", "H200-HERE", "UBENCH"),
    ),
    "a100": GpuProfile(
        name="a100",
        description="NVIDIA A100 SXM4 80 GB",
        arch=80, sms=108, clock_hz=1.41e9,
        dram_peak=2.039e12,
        dram_achievable=2.039e12 * 0.88,  # typical copy efficiency of HBM2e [UBENCH]
        l2_bytes=40 * 1024 * 1024,
        l2_bandwidth=5.0e12,
        tensor_peak={"fp16": 312e12, "bf16": 312e12, "tf32": 156e12},
        tensor_achievable_fraction=0.85,
        fp32_peak=19.5e12,
        shared_per_sm=164 * 1024,
        shared_per_block=163 * 1024,
        dram_latency_s=600e-9,
        l2_latency_s=230e-9,
        sources=("A100-DS", "UBENCH"),
    ),
}

class UnknownGpu(ValueError):
    """A GPU name with no profile; the message lists the known ones."""


def get_profile(name: str) -> GpuProfile:
    try:
        return PROFILES[name.lower()]
    except KeyError:
        raise UnknownGpu(f"no GPU profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def profile_for_device(device_name: str) -> GpuProfile | None:
    """The profile of a CUDA device from its driver name ('NVIDIA H200', ...), None if unknown."""
    n = device_name.upper()
    for key in ("H200", "H100", "A100"):
        if key in n:
            return PROFILES[key.lower()]
    return None


def generous_profile() -> GpuProfile:
    """1.5x the fastest known profile: a speed-of-light bound for an unknown device that never
    rejects a legitimate time."""
    fastest = max(PROFILES.values(), key=lambda p: p.dram_peak)
    peaks = {k: 1.5 * max(p.tensor_rate(k) for p in PROFILES.values()) for k in ("fp16", "bf16", "tf32", "fp8")}
    return GpuProfile(
        name="unknown", description="unknown device (1.5x the fastest known profile)", arch=fastest.arch,
        sms=fastest.sms, clock_hz=fastest.clock_hz, dram_peak=1.5 * fastest.dram_peak,
        dram_achievable=1.5 * fastest.dram_peak, l2_bytes=fastest.l2_bytes, l2_bandwidth=fastest.l2_bandwidth,
        tensor_peak=peaks, fp32_peak=1.5 * max(p.fp32_peak for p in PROFILES.values()),
    )
