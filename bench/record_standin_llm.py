"""Make the LLM record that `configs/ablation_mutators.yaml` replays: hand-written STAND-IN answers,
not a language model's.

    PYTHONPATH=. python bench/record_standin_llm.py [--seeds 0] [--out configs/llm_records/softmax_standin.jsonl]

It starts the fake OpenAI-compatible server of the tests (`tests/fakes/openai_server.py`) on
127.0.0.1 and runs the base campaign of the ablation with only the LLM mutator, in record mode,
against it, once per seed; every exchange (the real prompt the mutator built, the answer) is
appended to the record. The server answers each prompt with one of the replies below, chosen by a
hash of the kernel the prompt shows: whole modules and SEARCH/REPLACE edits, good and bad, the
mix of outcomes a model gives (a faster kernel, a subtle NaN bug, an unmasked store, a missing max
subtraction, an edit that does not apply, a reply with no code). Token counts are estimated as
characters / 4 and priced like gpt-4o-mini ($0.15 / $0.60 per million tokens); answers arrive at
once, so replays cost no LLM wall time. To compare mutators with a real model, record with `mode:
record` against its endpoint instead (see the README).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evo.app.campaign import Campaign
from evo.app.campaign_setup import CampaignHooks, connect_ray, prepare_config
from evo.app.progress import PlainLog
from evo.contracts.config import BudgetConfig
from evo.contracts.config_file import load_config
from evo.contracts.mutator_config import LLMConfig
from mutators.llm_prompt import current_kernel
from tests.fakes.openai_server import FakeOpenAI, Reply

MODEL = "standin-softmax"
KEY_ENV = "EVO_STANDIN_LLM_KEY"
BASE = ROOT / "configs" / "ablation_base.yaml"

ONE_PASS = '''Each row fits in one block at these sizes, so I load it once, keep it in registers and write it once
(one read and one write instead of three reads).
```python
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"num_warps": 8}
SPACE = {"num_warps": [4, 8, 16]}


def launch(x, y, *, num_warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _softmax_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
```'''

_ONLINE = '''import triton
import triton.language as tl


@triton.jit
def _softmax_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(tl.where(m_new == -float("inf"), 0.0, m - m_new)) + EXP_TERM
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(tl.where(m == -float("inf"), -float("inf"), m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + offs, (tl.exp(x - row_max) / total).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 512, "num_warps": 4}
SPACE = {"BLOCK": [128, 256, 512, 1024, 2048], "num_warps": [2, 4, 8]}


def launch(x, y, *, BLOCK, num_warps):
    rows, cols = x.shape
    _softmax_online[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
'''

ONLINE_OK = ("An online softmax keeps a running maximum and a rescaled sum, so the max and sum passes become one: "
             "two passes over the row instead of three.\n```python\n"
             + _ONLINE.replace("EXP_TERM", 'tl.exp(tl.where(m_new == -float("inf"), -float("inf"), x - m_new))')
             + "```")
ONLINE_NAN = ("Fuse the maximum and the sum into one online pass (running max, rescaled sum).\n```python\n"
              + _ONLINE.replace("EXP_TERM", "tl.exp(x - m_new)") + "```")  # masked lanes: exp(-inf - -inf) = NaN
EXP2 = '''exp2 maps to the hardware's ex2 instruction; scale by log2(e) first.
<<<<<<< SEARCH
        s += tl.sum(tl.exp(x - m), axis=0)
=======
        s += tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0)
>>>>>>> REPLACE
<<<<<<< SEARCH
        y = tl.exp(x - m) / s
=======
        y = tl.exp2((x - m) * 1.4426950408889634) / s
>>>>>>> REPLACE'''
BIGGER_BLOCKS = '''Larger chunks mean fewer loop iterations per row.
<<<<<<< SEARCH
PARAMS = {"BLOCK": 128, "num_warps": 4}
=======
PARAMS = {"BLOCK": 1024, "num_warps": 8}
>>>>>>> REPLACE'''
NO_MAX = ONE_PASS.replace("tl.exp(x - tl.max(x, axis=0))", "tl.exp(x)").replace(
    "Each row fits in one block", "Skip the max subtraction (softmax is shift-invariant); each row fits in one block")
UNMASKED = ONE_PASS.replace(", y.to(y_ptr.dtype.element_ty), mask=mask)", ", y.to(y_ptr.dtype.element_ty))").replace(
    "Each row fits in one block", "The store mask is redundant; each row fits in one block")
NO_CODE = "Softmax is memory-bound here; the kernel is already close to optimal, I would keep it as it is."
WRONG_EDIT = '''Accumulate in registers across the loop.
<<<<<<< SEARCH
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
=======
    acc = tl.zeros((BLOCK,), dtype=tl.float16)
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, ONE_PASS), (2, ONLINE_OK), (2, ONLINE_NAN), (2, EXP2), (1, BIGGER_BLOCKS), (1, NO_MAX), (1, UNMASKED),
    (1, NO_CODE), (1, WRONG_EDIT),
)


class Responder:
    """Answers a prompt with a reply drawn by a hash of the kernel it shows and how often it was shown."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        kernel = current_kernel(body.get("messages", []))
        k = self.seen.get(kernel, 0)
        self.seen[kernel] = k + 1
        draw = int(hashlib.sha256(f"{kernel}:{k}".encode()).hexdigest()[:8], 16) % sum(w for w, _ in REPLIES)
        for weight, text in REPLIES:
            if draw < weight:
                prompt = sum(len(m.get("content", "")) for m in body.get("messages", []))
                return Reply(text, prompt_tokens=prompt // 4, completion_tokens=len(text) // 4)
            draw -= weight
        raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--out", type=Path, default=ROOT / "configs" / "llm_records" / "softmax_standin.jsonl")
    ap.add_argument("--generations", type=int, default=10)
    args = ap.parse_args(argv)
    out: Path = args.out.resolve()
    if out.exists():
        out.unlink()
    os.environ[KEY_ENV] = "standin-key-not-secret"  # the fake server accepts any key
    base = load_config(BASE)
    with FakeOpenAI(responder=Responder()) as server:
        llm = LLMConfig(model=MODEL, base_url=server.base_url, api_key_env=KEY_ENV, mode="record",
                        record_path=str(out), price_in_per_mtok=0.15, price_out_per_mtok=0.6, retries=0)
        budget = BudgetConfig(generations=args.generations)
        for seed in args.seeds:
            cfg = base.model_copy(update={"mutators": [llm], "seed": seed, "name": f"record-s{seed}",
                                          "budget": budget})
            started = connect_ray(cfg)
            log = io.StringIO()
            prepared = prepare_config(cfg, BASE.parent, output=Path("/tmp/evo-standin-record"))
            summary = Campaign(prepared, CampaignHooks(), PlainLog(log)).run()
            print(f"seed {seed}: {summary['status']}, best {summary['best'] and summary['best']['speedup_over_seed']}, "
                  f"{summary['evaluations']} evaluations, llm ${summary['llm_usd']:.4f}", flush=True)
            if started:
                import ray

                ray.shutdown()
    lines = out.read_text().splitlines() if out.exists() else []
    print(f"{len(lines)} exchanges recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
