"""Make the LLM records that the ablations replay: hand-written STAND-IN answers,
not a language model's.

    PYTHONPATH=. python bench/search/record_standin_llm.py [--task TASK] [--workload NAME] [--seeds 0] \
        [--out RECORD.jsonl]

(TASK: one with stand-in answers in `bench/search/standin_replies/`.)

It starts the fake OpenAI-compatible server of the tests (`tests/fakes/openai_server.py`) on 127.0.0.1
and runs the base campaign of the ablation with only the LLM mutator, in record mode, against it, once
per seed (at the task's `--workload` when given: attention's ablation runs at `bert-base`, where one
modelled evaluation takes seconds instead of minutes, causal attention's at `gpt2-short`, MLA decode's
at `small-batch`); every exchange (the real prompt the mutator built, the answer) is appended to the record (by default
`configs/llm_records/TASK_standin.jsonl`, under the model name `standin-TASK`). The server answers each
prompt with one of the task's replies in `bench/search/standin_replies/`, chosen by a hash of the kernel the
prompt shows: whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives (a
faster kernel, a subtle numerical bug, an unmasked store, an edit that does not apply, a reply with no
code). Token counts are estimated as characters / 4 and priced like gpt-4o-mini ($0.15 / $0.60 per
million tokens); answers arrive at once, so replays cost no LLM wall time. To compare mutators with a
real model, record with `mode: record` against its endpoint instead (see docs/how-to/llm.md).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.search.standin_replies import REPLIES_BY_TASK
from evo.app.run.campaign import Campaign
from evo.app.run.progress import PlainLog
from evo.app.run.setup import CampaignHooks, connect_ray, prepare_config
from evo.contracts.config import BudgetConfig, TaskConfig
from evo.contracts.config_file import load_config
from evo.contracts.mutator_config import LLMConfig
from mutators.llm.prompt import current_kernel
from tests.fakes.openai_server import FakeOpenAI, Reply

KEY_ENV = "EVO_STANDIN_LLM_KEY"
BASE = ROOT / "configs" / "ablation_base.yaml"
RECORDS = ROOT / "configs" / "llm_records"


def model_name(task: str) -> str:
    """The model name a task's stand-in answers are recorded under (the ablations' `llm.model`)."""
    return f"standin-{task}"


class Responder:
    """Answers a prompt with a reply drawn by a hash of the kernel it shows and how often it was shown."""

    def __init__(self, replies: tuple[tuple[int, str], ...]) -> None:
        self.replies = replies
        self.seen: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        kernel = current_kernel(body.get("messages", []))
        k = self.seen.get(kernel, 0)
        self.seen[kernel] = k + 1
        draw = int(hashlib.sha256(f"{kernel}:{k}".encode()).hexdigest()[:8], 16) % sum(w for w, _ in self.replies)
        for weight, text in self.replies:
            if draw < weight:
                prompt = sum(len(m.get("content", "")) for m in body.get("messages", []))
                return Reply(text, prompt_tokens=prompt // 4, completion_tokens=len(text) // 4)
            draw -= weight
        raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(REPLIES_BY_TASK), default="softmax")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--out", type=Path, help="default: configs/llm_records/TASK_standin.jsonl")
    ap.add_argument("--generations", type=int, default=10)
    ap.add_argument("--workload", help="bench the task at this workload of its workloads.yaml")
    args = ap.parse_args(argv)
    out: Path = (args.out or RECORDS / f"{args.task}_standin.jsonl").resolve()
    if out.exists():
        out.unlink()
    os.environ[KEY_ENV] = "standin-key-not-secret"  # the fake server accepts any key
    base = load_config(BASE)
    with FakeOpenAI(responder=Responder(REPLIES_BY_TASK[args.task])) as server:
        llm = LLMConfig(model=model_name(args.task), base_url=server.base_url, api_key_env=KEY_ENV, mode="record",
                        record_path=str(out), price_in_per_mtok=0.15, price_out_per_mtok=0.6, retries=0)
        budget = BudgetConfig(generations=args.generations)
        for seed in args.seeds:
            cfg = base.model_copy(update={"mutators": [llm], "seed": seed, "name": f"record-{args.task}-s{seed}",
                                          "budget": budget, "task": TaskConfig(name=args.task, workload=args.workload)})
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
