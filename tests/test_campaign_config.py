"""Campaign configs and `evo run` errors: every shipped config is valid, mistakes are named."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml

from evo.app.run.progress import IslandRow, LiveTable, PlainLog, Totals
from evo.app.run.setup import CampaignHooks, actor_timeout_s, prepare
from evo.app.run.store import RunStoreError
from evo.contracts.check_cases import full_cases
from evo.contracts.config_file import ConfigError, load_config
from evo.contracts.mutator_config import MUTATOR_KINDS
from evo.contracts.task_loader import build_task
from fitness.check.reach import MAX_SIZES
from fitness.sandbox.process import STALLED_CPU_FRACTION

from .conftest import ROOT
from .islands_fakes import fake_mutator_factory
from .test_cli import evo

# ablation files (a base config and its variants) are checked in test_ablation_config.py
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml")
                 if "variants" not in (yaml.safe_load(p.read_text()) or {}))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_is_a_valid_campaign(path):
    cfg = load_config(path)
    task = build_task(cfg.task, path.parent)
    assert task.seed_source, f"{path.name}: the task needs a seed to start a campaign from"
    assert cfg.mutators and {m.kind for m in cfg.mutators} <= set(MUTATOR_KINDS)
    assert cfg.budget is not None and (cfg.budget.generations or cfg.budget.wall_time_s)


def test_every_file_a_shipped_config_points_to_exists():
    # a comment such as "settings of each kind: evo/contracts/mutator_config.py" sends a reader there
    named = {(p.name, m) for p in (ROOT / "configs").glob("*.yaml")
             for m in re.findall(r"[\w./-]+\.(?:py|yaml|md)\b", p.read_text())}
    missing = [(config, path) for config, path in named if "/" in path and not (ROOT / path).exists()
               and not (ROOT / "configs" / path).exists()]
    assert named and not missing, missing


def test_the_demo_and_cluster_configs_exist():
    names = {p.stem for p in CONFIGS}
    assert {"demo", "cluster", "softmax", "matmul", "layernorm", "reduction", "vector_add"} <= names


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_run_errors_name_the_problem_and_exit_2(tmp_path):
    p = evo("run", str(write(tmp_path, "task: {name: softmax}\n")))
    assert p.returncode == 2 and "no mutators" in p.stderr and "stoke, optuna, llm" in p.stderr
    p = evo("run", str(write(tmp_path, "task: {name: softmax}\nmutators: [{kind: optuna}]\n")))
    assert p.returncode == 2 and "no budget" in p.stderr
    assert all(k in p.stderr for k in ("generations", "evaluations", "wall_time_s", "llm_usd", "target_speedup"))
    p = evo("run", str(write(tmp_path, "task: {name: softmax}\nislands: {count: 2, popsize: 4}\n")))
    assert p.returncode == 2 and "unknown key 'islands.popsize'" in p.stderr and "population" in p.stderr
    p = evo("run", str(write(tmp_path, "task: {name: softmax}\nmutators: [{kind: gpt}]\n")))
    assert p.returncode == 2 and "'gpt'" in p.stderr and "'stoke', 'optuna', 'llm'" in p.stderr
    p = evo("run", str(write(tmp_path, "task: {name: softmax}\nbudget: {generations: null}\n")))
    assert p.returncode == 2 and "give at least one limit" in p.stderr
    p = evo("run", "--resume", str(tmp_path))
    assert p.returncode == 2 and "is not a run directory" in p.stderr
    p = evo("run")
    assert p.returncode == 2 and "give a config file, or --resume RUN_DIR" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_mutator_that_cannot_be_built_is_named_and_leaves_no_run_behind(tmp_path):
    def broken(cfg, *, run_dir, seed):
        raise RuntimeError("no API key in OPENAI_API_KEY")

    path = write(tmp_path, f"task: {{name: softmax}}\nmutators: [{{kind: optuna}}, {{kind: llm}}]\n"
                           f"budget: {{generations: 1}}\noutput_dir: {tmp_path / 'runs'}\n")
    with pytest.raises(ConfigError, match=r"mutators.0 \(kind optuna\): RuntimeError: no API key"):
        prepare(str(path), hooks=CampaignHooks(mutator_factory=broken))
    assert not list((tmp_path / "runs").iterdir())


def test_resume_accepts_a_new_budget_but_not_other_changes(tmp_path):
    hooks = CampaignHooks(mutator_factory=fake_mutator_factory)
    base = {"task": {"name": "softmax"}, "mutators": [{"kind": "optuna"}], "budget": {"generations": 2},
            "output_dir": str(tmp_path / "runs")}
    path = write(tmp_path, yaml.safe_dump(base))
    run = prepare(str(path), hooks=hooks).store.path
    changed = write(tmp_path, yaml.safe_dump({**base, "islands": {"count": 5}}))
    with pytest.raises(ConfigError, match="differs from the run's config in islands"):
        prepare(str(changed), resume=str(run), hooks=hooks)
    longer = write(tmp_path, yaml.safe_dump({**base, "budget": {"generations": 9}}))
    p = prepare(str(longer), resume=str(run), hooks=hooks)
    assert p.cfg.budget is not None and p.cfg.budget.generations == 9 and p.resumed and "budget changed" in p.notes[0]
    again = load_config(run / "config.yaml").budget
    assert again is not None and again.generations == 9


def test_resume_from_another_checkout_accepts_the_same_record_but_not_another(tmp_path):
    """A run's saved config holds the LLM record's absolute path; the same config in a moved or
    cloned checkout names the same record relative to its folder, which is no edit."""
    hooks = CampaignHooks(mutator_factory=fake_mutator_factory)
    made, here = tmp_path / "made", tmp_path / "here"
    for folder in (made, here):
        folder.mkdir()
        (folder / "rec.jsonl").write_text("")
    base = {"task": {"name": "softmax"}, "budget": {"generations": 2}, "output_dir": str(tmp_path / "runs"),
            "mutators": [{"kind": "llm", "mode": "replay", "model": "m", "record_path": "rec.jsonl"}]}
    run = prepare(str(write(made, yaml.safe_dump(base))), hooks=hooks).store.path
    assert prepare(str(write(here, yaml.safe_dump(base))), resume=str(run), hooks=hooks).resumed
    other = {**base, "mutators": [{**base["mutators"][0], "record_path": "other.jsonl"}]}  # type: ignore[index]
    with pytest.raises(ConfigError, match="differs from the run's config in mutators"):
        prepare(str(write(here, yaml.safe_dump(other))), resume=str(run), hooks=hooks)


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resume_refuses_an_edited_run_config_and_a_finished_run_unless_its_budget_grows(tmp_path):
    hooks = CampaignHooks(mutator_factory=fake_mutator_factory)
    base = {"task": {"name": "softmax"}, "mutators": [{"kind": "optuna"}], "budget": {"generations": 2},
            "output_dir": str(tmp_path / "runs")}
    run = prepare(str(write(tmp_path, yaml.safe_dump(base))), hooks=hooks).store.path
    original = (run / "config.yaml").read_text()
    edited = yaml.safe_load(original)
    edited["islands"]["count"] += 1  # behind the run's back: its checkpoints hold fewer islands
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    with pytest.raises(RunStoreError, match="edited after the run started: islands differ"):
        prepare(None, resume=str(run), hooks=hooks)
    (run / "config.yaml").write_text(original)
    finished = {"status": "finished", "stop_reason": "generation budget reached (2)"}
    (run / "summary.json").write_text(json.dumps(finished))
    with pytest.raises(ConfigError, match=r"is finished \(generation budget reached \(2\)\); resuming it would"):
        prepare(None, resume=str(run), hooks=hooks)
    assert (run / "config.yaml").read_text() == original  # a refused resume changes nothing
    before = snapshot(run)
    longer_but_other_task = write(tmp_path, yaml.safe_dump({**base, "task": {"name": "layernorm"},
                                                            "budget": {"generations": 9}}))
    with pytest.raises(ConfigError, match="differs from the run's config in task"):
        prepare(str(longer_but_other_task), resume=str(run), hooks=hooks)

    def broken(cfg, *, run_dir, seed):
        raise RuntimeError("no API key")

    longer = write(tmp_path, yaml.safe_dump({**base, "budget": {"generations": 9}}))
    with pytest.raises(ConfigError, match="no API key"):  # refused after the budget was accepted
        prepare(str(longer), resume=str(run), hooks=CampaignHooks(mutator_factory=broken))
    assert snapshot(run) == before  # not a byte written by either refusal
    edited = yaml.safe_load(original)
    edited["budget"]["generations"] = 4  # the budget may be raised in the run's own config too
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    p = prepare(None, resume=str(run), hooks=hooks)
    assert p.cfg.budget is not None and p.cfg.budget.generations == 4 and "budget changed" in p.notes[0]


def rows_and_totals():
    rows = [IslandRow(0, 3, 6, 1.5, 6.0, 20, {"wrong_output": 2}), IslandRow(1, 3, 6, None, None, 4)]
    totals = Totals(24, {"wrong_output": 2}, 7, 0.12, 42.0, 1.5, 6.0, "model", 2, 1)
    return rows, totals


def test_plain_progress_lines_say_what_each_island_did():
    out = io.StringIO()
    rows, totals = rows_and_totals()
    PlainLog(out).update(rows[0], rows, totals)
    line = out.getvalue()
    assert "island 0 gen 3" in line and "1.5 ms (model)" in line and "6.00x" in line
    assert "wrong_output=2" in line and "llm $0.12" in line


def test_the_live_table_shows_every_island_and_the_totals():
    out = io.StringIO()
    table = LiveTable(out)
    rows, totals = rows_and_totals()
    table.update(rows[1], rows, totals)
    table.close()
    text = out.getvalue()
    assert "evo campaign" in text and "6.00x" in text and "evaluations 24" in text and "LLM $0.12" in text




def test_a_limit_left_out_does_not_apply():
    from evo.contracts.config_file import parse_config

    cfg = parse_config({"task": {"name": "softmax"}, "mutators": [{"kind": "optuna"}],
                        "budget": {"evaluations": 40, "wall_time_s": 60}})
    assert cfg.budget is not None and cfg.budget.generations is None and cfg.budget.evaluations == 40
    assert parse_config({"task": {"name": "softmax"}}).budget is None  # evo eval and evo check need none


def test_an_evaluator_is_given_the_longest_its_worker_waits_before_it_counts_as_hung():
    cfg = load_config(ROOT / "configs" / "demo.yaml")
    task = build_task(cfg.task, ROOT / "configs")
    # every case of a full check (special values, bench-shaped), and the sizes it may add to reach unrun code
    cases = len(full_cases(task, draws=cfg.evaluation.draws)) + MAX_SIZES
    assert cases > len(task.cases(draws=cfg.evaluation.draws)) + MAX_SIZES
    timeout = cfg.evaluation.timeout_s

    def on(device: str) -> float:
        return actor_timeout_s(cfg.model_copy(update={"evaluation": cfg.evaluation.model_copy(
            update={"device": device})}), task)

    on_cpu, on_gpu = on("cpu"), on("cuda")
    # in the interpreter a case's timeout is CPU seconds: a busy machine's worker waits up to 4x it in wall time
    assert on_cpu >= (cases + 1) * timeout / STALLED_CPU_FRACTION
    assert (cases + 1) * 2 * timeout <= on_gpu < on_cpu  # on a GPU, wall seconds with a margin
    fixed = cfg.model_copy(update={"evaluators": cfg.evaluators.model_copy(update={"actor_timeout_s": 42.0})})
    assert actor_timeout_s(fixed, task) == 42.0
