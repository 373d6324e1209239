"""The campaign config schema: the one declaration of every setting, its default and its constraints.

YAML is validated by these pydantic models (`evo.contracts.config_file`) with ``extra="forbid"``: a
misspelled key or a wrong type is a clear error naming the key and the valid choices, never a
silent default. The validated models are also the runtime settings: the evaluator, the latency
stage, the islands and each mutator are built from their section, so no default is written twice.
Secrets are named by environment variable (``api_key_env``), never stored in configs or run
directories.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import Field, model_validator

from evo.contracts import dtypes
from evo.contracts.gpus import PROFILES
from evo.contracts.mutator_config import MutatorConfig, SelectionConfig, Strict
from evo.contracts.special_values import opt_outs


class LatencyMode(str, Enum):
    """``auto`` measures on CUDA and models a target GPU elsewhere; ``model`` models even on CUDA."""

    AUTO = "auto"
    MODEL = "model"
    OFF = "off"


class Baseline(str, Enum):
    """What a candidate's latency is compared with, timed in the same worker session."""

    SEED = "seed"
    TORCH = "torch"
    TORCH_COMPILE = "torch_compile"


class Topology(str, Enum):
    """Where migrants go: ring (the next island), random (a random other island each time), full (all)."""

    RING = "ring"
    RANDOM = "random"
    FULL = "full"


class SizesConfig(Strict):
    """Sizes that override a task's constants: `check` for correctness, `bench` for latency.
    `bench_weights` (one positive number per bench size) makes the fitness the weighted geometric
    mean of the latencies at every bench size; without it, the latency at the first bench size (and
    a task module's own ``BENCH_WEIGHTS`` apply only to its own bench sizes)."""

    check: list[dict[str, Any]] = Field(min_length=1)
    bench: list[dict[str, Any]] = Field(default_factory=list)
    bench_weights: list[float] | None = None

    @model_validator(mode="after")
    def _weights_match(self) -> SizesConfig:
        if self.bench_weights is not None:
            if not self.bench:
                raise ValueError("bench_weights needs the bench sizes they weigh (sizes.bench)")
            if len(self.bench_weights) != len(self.bench):
                raise ValueError(f"{len(self.bench_weights)} bench_weights for {len(self.bench)} bench sizes")
            if any(not w > 0 for w in self.bench_weights):
                raise ValueError(f"bench_weights must be positive, not {self.bench_weights}")
        return self


class ToleranceConfig(Strict):
    """Pass when |out - ref| <= atol * rms(ref) + rtol * |ref| (atol in units of the output's RMS)."""

    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class TaskConfig(Strict):
    """Which computation to optimize: a library task (`name`), a native task module (`path`),
    or a KernelBench problem file (`kernelbench`, which needs `sizes`). `workload` benches a native
    task at one of the named shape lists of its ``workloads.yaml`` instead of its ``BENCH_SIZES``."""

    name: str | None = None
    path: str | None = None
    kernelbench: str | None = None
    sizes: SizesConfig | None = None
    workload: str | None = None
    dtype: str | None = None
    seed: str | None = None
    tolerance: ToleranceConfig | None = None
    redraw_params: bool = True
    # a KernelBench Model runs in training mode, as KernelBench's harness runs it (BatchNorm with the batch's
    # statistics); eval: Model.eval() (running statistics, Dropout off)
    model_mode: Literal["train", "eval"] = "train"
    # special input values (evo.contracts.special_values) the task is not checked on: {distribution: reason},
    # the reason shown in every verdict (a native task module declares its own in DIST_OPT_OUT)
    dist_opt_out: dict[str, str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TaskConfig:
        given = [k for k in ("name", "path", "kernelbench") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of name, path, kernelbench (got {given or 'none'})")
        if self.kernelbench and self.sizes is None:
            raise ValueError("a kernelbench task needs sizes: {check: [...], bench: [...]}")
        if self.model_mode != "train" and not self.kernelbench:
            raise ValueError("model_mode is for kernelbench tasks (a KernelBench Model's train/eval mode)")
        if self.workload is not None:
            if self.kernelbench:
                raise ValueError("workload is for library and native tasks; a kernelbench task gives sizes.bench")
            if self.sizes is not None and (self.sizes.bench or self.sizes.bench_weights is not None):
                raise ValueError("give either workload or sizes.bench/bench_weights, not both: "
                                 "the workload is the bench sizes")
        if self.dtype is not None and self.dtype not in dtypes.FLOAT_DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {', '.join(dtypes.FLOAT_DTYPES)}")
        opt_outs(self.dist_opt_out, "dist_opt_out")
        return self


class TimerConfig(Strict):
    """CUDA timing of one subject: `warmup_reps` untimed runs, then repetitions filling `rep_ms`
    (at least `min_reps`, at most `max_reps`), spread over `copies` input copies."""

    warmup_reps: int = Field(default=3, ge=0)
    rep_ms: float = Field(default=100.0, gt=0)
    min_reps: int = Field(default=10, ge=1)
    max_reps: int = Field(default=500, ge=1)
    copies: int = Field(default=4, ge=1, le=16)


class SpinUpConfig(Strict):
    """Keep the GPU busy before a timing (an idle GPU is clocked down): chunks of fixed work until
    `settle_chunks` in a row are no faster (within `tolerance`) than the best so far, after at least
    `min_ms` and at most `max_ms`."""

    min_ms: float = Field(default=200.0, ge=0)
    max_ms: float = Field(default=2000.0, gt=0)
    settle_chunks: int = Field(default=3, ge=1)
    tolerance: float = Field(default=0.02, ge=0)


class EvaluationConfig(Strict):
    """How candidates are checked and timed (the evaluator's runtime settings).

    latency: ``auto`` measures on CUDA and models a ``target_gpu`` elsewhere; ``model`` models
    even on CUDA; ``off`` skips the latency stage. ``baselines`` are timed in the same worker
    session as each candidate (on CUDA; the model has only the seed). ``timer`` times full
    evaluations, ``quick_timer`` quick ones; ``spin_up_first`` runs before the first timed subject
    of a worker session, ``spin_up`` before every later timing. ``timing_rep_ms`` and
    ``timing_copies`` are accepted as shorthands for ``timer.rep_ms`` and ``timer.copies``.

    Timeouts (``timeout_s``, ``latency_timeout_s``, ``verify_timeout_s``) are the worker's CPU seconds in
    the interpreter (it waits up to four times as long on a busy machine before calling the worker stalled,
    `fitness.sandbox.process`), so a verdict does not depend on the machine's other work; on a GPU they
    are wall seconds.

    Verification at the bench size (see `fitness.latency.model`): the model interprets
    ``profile_samples`` random programs per launch (and one per edge of the grid), running loops of
    up to ``profile_full_loop`` iterations in full (and every loop of ``profile_full_programs`` of
    them, up to ``profile_full_iterations`` loop iterations per program), and compares what they
    stored with the reference. A full run at every bench size (``evo eval``, an island's best; the
    model's own when the sample left nothing to compare) may take ``verify_timeout_s``; in the
    interpreter, one the model estimates to take longer is not started (the verdict says so).
    ``profile_memory_mb`` caps the address space the worker may add for bench-size buffers
    (documented in docs/concepts/latency.md; a candidate that needs more is a ``crash``). ``sanitize`` runs the
    interpreter's race and bounds sanitizer during the check (`fitness.check.sanitizer`); turning it
    off is for measuring its cost (``bench/infra/verification_cost.py``), not for campaigns.

    ``isolation`` confines every evaluation worker by the operating system (Landlock and seccomp, see
    `fitness.sandbox.isolation`); turn it off only to diagnose a worker that cannot start. Where the
    kernel lacks a part, verdicts and the summary record what the worker had (``sandbox``);
    ``require_isolation`` makes that a startup error instead of a warning.
    """

    device: Literal["auto", "cpu", "cuda"] = "auto"
    timeout_s: float = Field(default=60.0, gt=0)
    memory_mb: int = Field(default=4096, ge=256)
    draws: int = Field(default=2, ge=1, le=16)
    quick_sizes: int = Field(default=2, ge=1)
    latency: LatencyMode = LatencyMode.AUTO
    target_gpu: str = "h100"
    baselines: list[Baseline] = Field(default_factory=lambda: list(Baseline))
    timer: TimerConfig = TimerConfig()
    quick_timer: TimerConfig = TimerConfig(warmup_reps=2, rep_ms=20.0, min_reps=5, max_reps=100)
    spin_up_first: SpinUpConfig = SpinUpConfig()
    spin_up: SpinUpConfig = SpinUpConfig(min_ms=20.0, max_ms=500.0)
    latency_timeout_s: float = Field(default=300.0, gt=0)
    verify_timeout_s: float = Field(default=900.0, gt=0)
    profile_samples: int = Field(default=6, ge=1)
    profile_full_loop: int = Field(default=1024, ge=3)
    profile_full_programs: int = Field(default=2, ge=1)
    profile_full_iterations: int = Field(default=16384, ge=1)
    profile_memory_mb: int = Field(default=4096, ge=256)
    sanitize: bool = True
    isolation: bool = True
    require_isolation: bool = False

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("timing_rep_ms" in data or "timing_copies" in data):
            data = dict(data)
            timer = dict(data.get("timer") or {})
            for short, key in (("timing_rep_ms", "rep_ms"), ("timing_copies", "copies")):
                if short in data:
                    timer[key] = data.pop(short)
            data["timer"] = timer
        return data

    @model_validator(mode="after")
    def _known_gpu(self) -> EvaluationConfig:
        if self.target_gpu.lower() not in PROFILES:
            raise ValueError(f"target_gpu {self.target_gpu!r} is not one of {', '.join(sorted(PROFILES))}")
        return self


class MigrationConfig(Strict):
    """Every `interval` generations each island sends copies of its `top_k` best to its neighbours
    under `topology`."""

    interval: int = Field(default=2, ge=1)
    top_k: int = Field(default=1, ge=0)
    topology: Topology = Topology.RING


class IslandsConfig(Strict):
    """The island populations. Each generation an island draws `offspring` parents by tournament,
    each parent goes to one mutator, and the best `population` of parents and children survive.
    The last `recent_failures` failed children are shown to mutators (the LLM's "what went wrong").
    `structure_share`: at most this share of the population (rounded up, at least one) is given to one
    kernel structure (its source without params) while kernels of other structures are left to take
    the other places, so one structure's param variants cannot take a population over; 1 turns it off."""

    count: int = Field(default=2, ge=1)
    population: int = Field(default=8, ge=1)
    offspring: int = Field(default=4, ge=1)
    tournament_size: int = Field(default=3, ge=1)
    hall_of_fame: int = Field(default=5, ge=1)
    recent_failures: int = Field(default=8, ge=1)
    structure_share: float = Field(default=0.5, gt=0, le=1)
    migration: MigrationConfig = MigrationConfig()


class EvaluatorsConfig(Strict):
    """Evaluator actors, each owning one evaluation worker. `placement: auto` gives one actor per GPU
    (`num_gpus=1`, so timings never share a GPU) when the cluster has GPUs, else CPU actors.
    `count` defaults to the number of GPUs (gpu) or CPUs (cpu) in the cluster.

    `compile_ahead`: preparer processes per evaluator node that lint new candidates and, on a GPU
    node, compile their kernels before an evaluator takes them, so a GPU's timing slot does not wait
    for Triton's compiler (`fitness.prepare`). Default: on GPU evaluators, up to 4 per node from the
    CPUs the evaluators leave free; none for CPU evaluators (the interpreter compiles nothing). 0
    turns it off."""

    placement: Literal["auto", "gpu", "cpu"] = "auto"
    count: int | None = Field(default=None, ge=1)
    cpus_per_evaluator: float = Field(default=1.0, gt=0)
    compile_ahead: int | None = Field(default=None, ge=0, le=64)
    # default: from evaluation.timeout_s, the case count and the device (evo.app.run.setup.actor_timeout_s)
    actor_timeout_s: float | None = Field(default=None, gt=0)


BUDGET_KEYS = ("generations", "evaluations", "wall_time_s", "llm_usd", "target_speedup")


class BudgetConfig(Strict):
    """The campaign stops at the first limit reached; a limit left out does not apply, and at least
    one must be given. `evaluations` counts every evaluation done (full and quick);
    `target_speedup` is over the seed."""

    generations: int | None = Field(default=None, ge=0)
    evaluations: int | None = Field(default=None, ge=1)
    wall_time_s: float | None = Field(default=None, gt=0)
    llm_usd: float | None = Field(default=None, ge=0)
    target_speedup: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _some_limit(self) -> BudgetConfig:
        if all(getattr(self, k) is None for k in BUDGET_KEYS):
            raise ValueError(f"give at least one limit ({', '.join(BUDGET_KEYS)})")
        return self


class Config(Strict):
    """The top level of a config file. `evo eval` and `evo check` use `task` and `evaluation`;
    `evo run` uses everything and needs a `budget`."""

    name: str = Field(default="campaign", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = 0
    task: TaskConfig
    evaluation: EvaluationConfig = EvaluationConfig()
    islands: IslandsConfig = IslandsConfig()
    evaluators: EvaluatorsConfig = EvaluatorsConfig()
    mutators: list[MutatorConfig] = Field(default_factory=list)
    selection: SelectionConfig = SelectionConfig()
    budget: BudgetConfig | None = None
    checkpoint_interval: int = Field(default=1, ge=1)  # generations between checkpoints
    output_dir: str = "runs"  # run directories go here (relative: to the working directory)

