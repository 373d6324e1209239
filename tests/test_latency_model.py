"""The latency model end to end (interpreter profile + cross-compile + roofline), on the CPU.

Pairs whose order is not in doubt must come out in that order; the model must reject what it
finds unsafe at bench size, and never needs a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import NativeTask, library_tasks
from evo.contracts.verdict import LatencySource, Status
from fitness.evaluate import Evaluator
from fitness.latency.model import ModelLatency
from fitness.latency.model_version import model_version
from fitness.sandbox.process import Worker, scrubbed_env

from .conftest import CANDIDATES, ROOT

Model = Callable[[str], ModelLatency]


# Bench sizes a quarter to a sixty-fourth of the library's: the model verifies every kernel it times
# against the reference at the bench size (interpreting its sampled programs in full), and these
# tests are about ranking, which smaller sizes keep.
BENCH = {
    "softmax": {"rows": 512, "cols": 4096},
    "layernorm": {"rows": 512, "cols": 8192},
    "matmul": {"M": 2048, "N": 2048, "K": 2048},
    "vector_add": {"n": 1 << 22},
    "reduction": {"n": 1 << 22},
    "attention": {"batch": 1, "heads": 4, "seq": 1024, "head_dim": 64},
    "attention_causal": {"batch": 1, "heads": 4, "seq": 1024, "head_dim": 64},
    "mla_decode": {"batch": 4, "heads": 64, "cache_len": 2048},
}


def small_task(name: str) -> NativeTask:
    task = NativeTask(ROOT / "evo" / "tasks" / name)
    task.bench_sizes = [BENCH[name]]
    return task


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    """ModelLatency per library task, all sharing one interpreter and one compile worker."""
    interp = Worker(device="cpu", memory_mb=4096, bench_memory_mb=4096, isolation=True)
    compiler = Worker(compile_only=True, memory_mb=4096, isolation=True)
    made: dict[str, ModelLatency] = {}

    def get(name: str) -> ModelLatency:
        if name not in made:
            made[name] = ModelLatency(small_task(name), EvaluationConfig(latency=LatencyMode.MODEL),
                                      interp_worker=interp, compile_worker=compiler)
        return made[name]

    yield get
    interp.close()
    compiler.close()


def seed(task: str, **params: object) -> Candidate:
    return Candidate.from_file(ROOT / "evo" / "tasks" / task / "seed.py", dict(params) or None)  # type: ignore[arg-type]


def test_the_model_needs_no_gpu_and_compiles_without_the_interpreter():
    compile_env = scrubbed_env("cpu", compile_only=True)
    assert compile_env["CUDA_VISIBLE_DEVICES"] == "" and "TRITON_INTERPRET" not in compile_env
    assert scrubbed_env("cpu")["TRITON_INTERPRET"] == "1"


def test_one_pass_softmax_is_modelled_faster_than_three_passes(model: Model):
    m = model("softmax")
    three = m.measure(seed("softmax"))
    one = m.measure(Candidate.from_file(ROOT / "evo/tasks/softmax/known_better.py"))
    assert three.status is Status.OK and one.status is Status.OK
    assert three.source is LatencySource.MODEL and one.source is LatencySource.MODEL
    assert one.latency_ms is not None and three.latency_ms is not None
    assert one.latency_ms * 1.5 < three.latency_ms
    assert one.speedups["seed"] == pytest.approx(three.latency_ms / one.latency_ms)
    # the three-pass kernel reads its input three times: more L2 traffic for the same DRAM minimum
    (l3,), (l1,) = three.detail["launches"], one.detail["launches"]
    assert l3["l2_bytes"] >= 2 * l1["l2_bytes"]
    assert one.roofline_fraction is not None and three.roofline_fraction is not None
    assert 0 < three.roofline_fraction < one.roofline_fraction <= 1
    assert one.detail["gpu"] == "h100" and one.detail["size"] == BENCH["softmax"]


def test_128x128_matmul_tiles_are_modelled_faster_than_16x16(model: Model):
    m = model("matmul")
    small = m.measure(seed("matmul"))
    big = m.measure(seed("matmul", BM=128, BN=128, BK=32, num_warps=4, num_stages=3))
    assert small.latency_ms is not None and big.latency_ms is not None
    assert big.latency_ms * 3 < small.latency_ms
    assert big.detail["launches"][0]["tensor_flops"] == 2 * 2048**3


def test_a_grid_that_fills_the_sms_is_modelled_faster_than_a_handful_of_programs(model: Model):
    m = model("vector_add")
    few = m.measure(Candidate.from_file(CANDIDATES / "latency/add_programs.py", {"PROGRAMS": 4}))
    many = m.measure(Candidate.from_file(CANDIDATES / "latency/add_programs.py", {"PROGRAMS": 1024}))
    assert few.latency_ms is not None and many.latency_ms is not None
    assert many.latency_ms * 5 < few.latency_ms
    assert few.detail["launches"][0]["grid"] == [4, 1, 1]
    assert few.detail["launches"][0]["bound"] == "latency"


def test_tensors_launch_fills_with_torch_are_charged_as_memset_launches(model: Model):
    # on a GPU each zero_ / zeros / fill_ in launch is a kernel of its own, timed with the rest; the model
    # charged nothing for them, so a kernel could zero any scratch (or split work behind a memset) for free
    m = model("vector_add")
    plain = seed("vector_add", BLOCK=1024, num_warps=4)
    source = plain.source.replace("    n = x.numel()\n", "    n = x.numel()\n    out.zero_()\n"
                                  "    scratch = x.new_zeros(1 << 24)\n    scratch.fill_(1.0)\n")
    filled = Candidate(source, dict(plain.params))
    a, b = m.measure(plain), m.measure(filled)
    assert a.latency_ms is not None and b.latency_ms is not None, b.reason
    assert "host_fills" not in a.detail
    n = BENCH["vector_add"]["n"]
    assert b.detail["host_fills"]["count"] == 3
    assert b.detail["host_fills"]["bytes"] == 4 * n + 2 * 4 * (1 << 24)
    gpu = m.gpu
    charged = 3 * gpu.launch_overhead_s + b.detail["host_fills"]["bytes"] / gpu.dram_achievable
    assert b.latency_ms == pytest.approx(a.latency_ms + charged * 1e3, rel=1e-6)


def test_a_spilling_config_is_modelled_slower_than_a_non_spilling_one(model: Model):
    m = model("layernorm")
    clean = m.measure(Candidate.from_file(CANDIDATES / "latency/layernorm_row.py"))
    capped = m.measure(Candidate.from_file(CANDIDATES / "latency/layernorm_row.py", {"MAXNREG": 64}))
    assert clean.detail["launches"][0]["spill_bytes"] == 0
    assert capped.detail["launches"][0]["spill_bytes"] > 0
    assert capped.latency_ms is not None and clean.latency_ms is not None
    assert capped.latency_ms > 1.1 * clean.latency_ms


def test_a_config_that_cannot_fit_the_target_is_a_compile_error(model: Model):
    r = model("matmul").measure(seed("matmul", BM=256, BN=256, BK=128, num_warps=4, num_stages=4))
    assert r.status is Status.COMPILE_ERROR
    assert "shared memory" in r.reason and "H100" in r.reason


def test_an_out_of_bounds_read_at_bench_size_is_unsafe(model: Model):
    r = model("vector_add").measure(Candidate.from_file(CANDIDATES / "latency/oob_when_large.py"))
    assert r.status is Status.UNSAFE
    assert "outside every tensor argument" in r.reason and "line" in r.reason


def test_addresses_that_depend_on_data_are_reported(model: Model):
    r = model("vector_add").measure(Candidate.from_file(CANDIDATES / "latency/data_dependent_add.py"))
    assert r.status is Status.OK and r.latency_ms is not None
    assert any("depend on loaded data" in d and "line 13" in d for d in r.detail["data_dependent"])


def test_the_model_is_deterministic(model: Model):
    c = Candidate.from_file(ROOT / "evo/tasks/reduction/known_better.py")
    first = model("reduction").measure(c)
    again = ModelLatency(small_task("reduction"), EvaluationConfig(),
                         interp_worker=model("reduction").interp, compile_worker=model("reduction").compiler)
    assert again.measure(c).latency_ms == first.latency_ms
    assert [x["kernel"] for x in first.detail["launches"]] == ["_partial_sums", "_sum_partials"]
    assert first.detail["model_version"] == model_version()  # which model made the figure


@pytest.mark.parametrize("task", library_tasks())
def test_each_known_better_kernel_is_modelled_faster_than_its_seed(model: Model, task: str):
    # issue 3: the model ranks seed and best known variant of every shipped task; on an H200 every
    # known-better kernel measured faster than its seed (1.8x softmax to 233x reduction)
    slow = model(task).measure(seed(task))
    fast = model(task).measure(Candidate.from_file(ROOT / "evo" / "tasks" / task / "known_better.py"))
    assert slow.status is Status.OK and fast.status is Status.OK, (slow.reason, fast.reason)
    assert slow.latency_ms is not None and fast.latency_ms is not None, (slow.reason, fast.reason)
    assert fast.latency_ms < slow.latency_ms
    assert fast.speedups["seed"] == pytest.approx(slow.latency_ms / fast.latency_ms)


def test_the_head_blocked_split_cache_mla_kernel_is_modelled_well_above_the_seed(shared_workers):
    """Issue 7, through the evaluator as a campaign on a CPU sees it: checked, then modelled."""
    task = small_task("mla_decode")
    settings = EvaluationConfig(timeout_s=120)
    with Evaluator(task, settings, device="cpu", **shared_workers(settings)) as ev:
        result = ev.evaluate(Candidate.from_file(ROOT / "evo/tasks/mla_decode/known_better.py"))
    assert result.status is Status.OK, result.reason
    assert result.latency_source is LatencySource.MODEL
    # the seed reloads the latent cache once per head (128 heads) in one program per (batch, head);
    # the known-better kernel loads it once per block of heads and splits long caches across programs;
    # at this reduced size (cache_len 2048) it models 6.3x to 8.8x over sampling seeds
    assert result.speedups["seed"] > 4, result.speedups


def test_every_candidate_of_a_run_is_sampled_at_the_same_programs(model: Model):
    """Common random numbers: the programs of an MLA decode step do unequal work (sequences of
    different lengths), so a sample drawn per candidate modelled identical kernels up to 14% apart,
    and a search kept whichever copy drew cheap programs."""
    m = model("mla_decode")
    source = (ROOT / "evo" / "tasks" / "mla_decode" / "seed.py").read_text()
    candidates = [Candidate.from_source(source + f"\n# copy {k}\n") for k in range(3)]
    assert len({c.id for c in candidates}) == 3
    copies = [m.measure(c) for c in candidates]
    assert all(r.latency_ms is not None for r in copies), [r.reason for r in copies]
    assert len({r.latency_ms for r in copies}) == 1, [r.latency_ms for r in copies]
    assert len({r.detail["sample_seed"] for r in copies}) == 1


def test_work_hidden_in_a_few_programs_is_sampled_and_charged(model: Model):
    # eight programs of 512 read 400 other rows each: 52 MB more than the 17 MB the others move, which the
    # sample must run one of to charge
    m = model("softmax")
    heavy = Candidate.from_file(CANDIDATES / "latency" / "heavy_rare_programs.py")
    twin = Candidate.from_source(heavy.source.replace("y.stride(0), 400,", "y.stride(0), 0,"))
    assert twin.source != heavy.source
    slow, fast = m.measure(heavy), m.measure(twin)
    assert slow.latency_ms is not None and fast.latency_ms is not None, (slow.reason, fast.reason)
    assert slow.latency_ms > 2 * fast.latency_ms, (slow.latency_ms, fast.latency_ms)
