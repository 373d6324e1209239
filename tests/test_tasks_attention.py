"""The attention and MLA decode tasks: known-better kernels pass, wrong ones fail, references hold.

The seeds and `evo check` findings of these tasks are covered by `tests/test_tasks.py`, which runs
every library task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from bench.model.attention_precision import MUST_FAIL, kernel_source
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode
from evo.contracts.native_task import TASK_LIBRARY, NativeTask
from evo.contracts.verdict import Status
from fitness.evaluate import Evaluator

TASKS = ("attention", "attention_causal", "mla_decode")
ROOT = TASK_LIBRARY.parent.parent  # the checkout (the library is evo/tasks)


@pytest.fixture(scope="module")
def evaluators() -> Iterator[dict[str, Evaluator]]:
    evs = {name: Evaluator(NativeTask(TASK_LIBRARY / name), EvaluationConfig(timeout_s=120, latency=LatencyMode.OFF),
                           device="cpu")
           for name in TASKS}
    yield evs
    for ev in evs.values():
        ev.close()


def _source(task: str, file: str) -> str:
    return (TASK_LIBRARY / task / file).read_text()


def _edited(task: str, file: str, old: str, new: str) -> Candidate:
    """The library kernel with one edit (asserted to apply, so the variant cannot silently be the original)."""
    source = _source(task, file)
    assert source.count(old) == 1, f"{old!r} not found once in {task}/{file}"
    return Candidate.from_source(source.replace(old, new))


@pytest.mark.parametrize("name", TASKS)
def test_known_better_kernel_passes(evaluators, name):
    result = evaluators[name].evaluate(Candidate.from_source(_source(name, "known_better.py")))
    assert result.status is Status.OK, result.reason
    assert result.cases_checked == len(evaluators[name].cases("full"))  # the check sizes' and beyond
    assert result.cases_checked > 2 * len(evaluators[name].task.check_sizes)


@pytest.mark.parametrize("params", [{"BM": 32, "BN": 16}, {"BM": 16, "BN": 64}])
def test_flash_attention_is_right_for_unequal_blocks(evaluators, params):
    candidate = Candidate.from_source(_source("attention_causal", "known_better.py"), params)
    result = evaluators["attention_causal"].evaluate(candidate)
    assert result.status is Status.OK, result.reason


@pytest.mark.parametrize("params", [{"NUM_SPLITS": 1}, {"NUM_SPLITS": 16, "BN": 16, "BLOCK_H": 32}])
def test_mla_split_kernel_is_right_with_any_split_count(evaluators, params):
    # 16 splits of 16-token tiles leave most splits of the short check caches empty
    candidate = Candidate.from_source(_source("mla_decode", "known_better.py"), params)
    result = evaluators["mla_decode"].evaluate(candidate)
    assert result.status is Status.OK, result.reason


@pytest.mark.parametrize("task, kernel_of", [("attention_causal", "attention"), ("attention", "attention_causal")])
def test_attention_with_the_wrong_masking_is_rejected(evaluators, task, kernel_of):
    result = evaluators[task].evaluate(Candidate.from_source(_source(kernel_of, "known_better.py")))
    assert result.status is Status.WRONG_OUTPUT
    assert "outside tolerance" in result.reason


@pytest.mark.parametrize("name", MUST_FAIL)
def test_causal_attention_mistakes_are_rejected_despite_the_wider_tolerance(evaluators, name):
    # scores rounded to float16 are the closest call: 2.2x the tolerance, on the "wide" inputs
    result = evaluators["attention_causal"].evaluate(Candidate.from_source(kernel_source(name)))
    assert result.status is Status.WRONG_OUTPUT, result.reason


def test_causal_kernels_are_within_tolerance_at_the_bench_sizes():
    """The rows a correct kernel is worst on (the first), at every (batch, head) of each bench size."""
    command = [sys.executable, "bench/model/attention_precision.py", "--kernels", "", "--bench-kernels",
               "seed,known_better", "--rows", "24", "--rms-heads", "1", "--json"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])["bench"]
    assert set(figures) == {"seed", "known_better"}
    for kernel, sizes in figures.items():
        assert len(sizes) == 2
        for size, f in sizes.items():
            assert f["ratio"] < 0.5, (kernel, size, f)  # a margin of 2x over the interpreter's rounding


def test_mla_kernel_ignoring_the_lengths_is_rejected(evaluators):
    wrong = _edited("mla_decode", "seed.py", "n = tl.load(len_ptr + b)", "n = cache_len")
    result = evaluators["mla_decode"].evaluate(wrong)
    assert result.status is Status.WRONG_OUTPUT, result.reason
    assert "outside tolerance" in result.reason


def test_mla_kernel_without_the_yarn_factor_is_rejected(evaluators):
    wrong = _edited("mla_decode", "known_better.py", "SOFTMAX_SCALE = 192**-0.5 * (0.1 * math.log(40.0) + 1.0) ** 2",
                    "SOFTMAX_SCALE = 192**-0.5")
    result = evaluators["mla_decode"].evaluate(wrong)
    assert result.status is Status.WRONG_OUTPUT, result.reason


def test_mla_kernel_reading_past_the_cache_end_is_rejected(evaluators):
    # without the mask, the last tile reads past the cache: the sanitizer stops it as it happens (before
    # the NaN of the guard zone would have made the output wrong)
    masked = "* D + d[None, :], mask=valid[:, None], other=0.0)"  # the latent cache tile load
    wrong = _edited("mla_decode", "known_better.py", masked, "* D + d[None, :])")
    result = evaluators["mla_decode"].evaluate(wrong)
    assert result.status is Status.UNSAFE and "out-of-bounds" in result.reason, result.reason


def _case(name: str, size: dict[str, int]):
    task = NativeTask(TASK_LIBRARY / name)
    task.check_sizes = [size]
    return task, task.case_data(task.cases(draws=1)[0])


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
def test_attention_reference_matches_torch_sdpa_in_float64(name):
    task, data = _case(name, {"batch": 2, "heads": 3, "seq": 29, "head_dim": 16})
    as_torch = [torch.from_numpy(t.data.astype(np.float64)) for t in data.inputs]
    assert task.torch_reference is not None
    expected = task.torch_reference(*as_torch).numpy()
    np.testing.assert_allclose(data.expected[0], expected, rtol=1e-10, atol=1e-12)


def test_mla_reference_matches_the_torch_reference_in_float64():
    task, data = _case("mla_decode", {"batch": 4, "heads": 5, "cache_len": 23})
    as_torch = [torch.from_numpy(t.data.astype(np.float64) if t.dtype == "float16" else t.data) for t in data.inputs]
    assert task.torch_reference is not None
    np.testing.assert_allclose(data.expected[0], task.torch_reference(*as_torch).numpy(), rtol=1e-10, atol=1e-12)


def test_mla_absorbed_form_equals_per_head_attention_with_up_projected_keys_and_values():
    """The task's absorbed computation is MLA: per-head attention on up-projected keys and values."""
    task = NativeTask(TASK_LIBRARY / "mla_decode")
    m = task.module
    rng = np.random.default_rng(0)
    batch, heads, cache_len, nope, v_dim = 3, 4, 19, 128, 128
    q_nope = rng.standard_normal((batch, heads, nope))
    q_rope = rng.standard_normal((batch, heads, m.ROPE_DIM))
    c_kv = rng.standard_normal((batch, cache_len, m.KV_LORA_RANK))
    k_pe = rng.standard_normal((batch, cache_len, m.ROPE_DIM))
    lengths = np.array([19, 7, 1], dtype=np.int32)
    w_uk = rng.standard_normal((heads, nope, m.KV_LORA_RANK)) / np.sqrt(m.KV_LORA_RANK)
    w_uv = rng.standard_normal((heads, v_dim, m.KV_LORA_RANK)) / np.sqrt(m.KV_LORA_RANK)

    q_latent = np.einsum("bhd,hdc->bhc", q_nope, w_uk)  # W_UK absorbed into the query
    absorbed = np.einsum("bhc,hvc->bhv", m.reference(q_latent, q_rope, c_kv, k_pe, lengths), w_uv)

    for b in range(batch):
        n = lengths[b]
        for h in range(heads):
            keys = np.concatenate([c_kv[b, :n] @ w_uk[h].T, k_pe[b, :n]], axis=1)  # (n, 192)
            values = c_kv[b, :n] @ w_uv[h].T  # (n, 128)
            query = np.concatenate([q_nope[b, h], q_rope[b, h]])
            scores = keys @ query * m.SOFTMAX_SCALE
            p = np.exp(scores - scores.max())
            np.testing.assert_allclose(absorbed[b, h], (p / p.sum()) @ values, rtol=1e-9, atol=1e-12)


def test_mla_counts_follow_the_drawn_lengths():
    task = NativeTask(TASK_LIBRARY / "mla_decode")
    size = task.bench_sizes[0]
    rng = np.random.default_rng(1)
    mean_tokens = np.mean([task.module.draw_lengths(size["batch"], size["cache_len"], rng).sum() for _ in range(400)])
    per_token = 2.0 * (2 * 512 + 64) * size["heads"]
    assert task.flops(size) == pytest.approx(per_token * mean_tokens, rel=0.02)
    cache_bytes = mean_tokens * (512 + 64) * 2
    assert cache_bytes < task.bytes_moved(size) < 1.2 * cache_bytes  # the cache read dominates
