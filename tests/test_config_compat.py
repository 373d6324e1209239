"""Runs and ablations made before a config key existed, or from another checkout, still resume: a key
added since, at its default, is no edit of the run's config, nor is the same record file at another
absolute path; a real change is still refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evo.app.ablation.config import load_ablation
from evo.app.ablation.runner import AblationState, RunEntry, RunStatus
from evo.app.run import inputs as run_inputs
from evo.app.run.store import RunStore, RunStoreError
from evo.contracts.config_file import ConfigError, load_config

from .test_ablation_config import write


def _without_workload(config: dict[str, Any]) -> dict[str, Any]:
    """The config as written before `task.workload` existed."""
    task = {k: v for k, v in config["task"].items() if k != "workload"}
    return {**config, "task": task}


def test_a_run_written_before_a_key_existed_reads_as_its_default_and_a_real_edit_is_still_found(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"task": {"name": "softmax"}, "output_dir": str(tmp_path)}))
    store = RunStore.create(tmp_path / "runs", load_config(tmp_path / "c.yaml"), config_dir=tmp_path)
    info = json.loads((store.path / "run.json").read_text())
    old = _without_workload(info["config"])
    info["config"] = old
    (store.path / "run.json").write_text(json.dumps(info))
    (store.path / "config.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    assert store.config().task.workload is None  # resumes
    edited = {**old, "islands": {**old["islands"], "count": old["islands"]["count"] + 1}}
    (store.path / "config.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    with pytest.raises(RunStoreError, match="edited after the run started: islands differ"):
        store.config()


def _finished_run(tmp_path: Path, state: AblationState, key: str, config: dict[str, Any], old_hash: str,
                  config_dir: Path | None = None) -> None:
    run_dir = tmp_path / "runs" / key
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if config_dir is not None:
        (run_dir / "run.json").write_text(json.dumps({"config_dir": str(config_dir)}))
    entry = state.runs[key]
    state.runs[key] = RunEntry(entry.variant, entry.seed, old_hash, RunStatus.FINISHED, run_dir=str(run_dir))


def test_an_ablation_from_before_a_key_existed_resumes_and_a_changed_variant_is_still_refused(tmp_path):
    ab = load_ablation(write(tmp_path, {"a": {}, "b": {"islands": {"count": 1}}}))
    directory = ab.directory()
    state = AblationState.load(directory, ab)
    spec = next(s for s in ab.runs() if s.key == "a-s0")
    before = _without_workload(spec.config.model_dump(mode="json"))
    _finished_run(tmp_path, state, "a-s0", before, "0123456789abcdef")  # a hash of the older schema's dump
    state.save()
    again = AblationState.load(directory, ab)
    assert again.runs["a-s0"].status is RunStatus.FINISHED
    assert again.runs["a-s0"].config_hash == spec.config_hash()  # taken from the file, kept from now on
    changed = {**before, "islands": {**before["islands"], "population": 9}}
    _finished_run(tmp_path, again, "b-s0", changed, "fedcba9876543210")
    again.save()
    with pytest.raises(ConfigError, match="the config of b-s0 changed since"):
        AblationState.load(directory, ab)


def test_an_ablation_run_made_from_another_checkout_is_the_same_run_and_another_record_is_not(tmp_path):
    """The LLM record path is absolute in a run's saved config; what identifies it is the path
    relative to the config's folder, so the same files in another clone or worktree resume."""
    variants = {"a": {"mutators": [{"kind": "llm", "mode": "replay", "model": "m", "record_path": "rec.jsonl"}]}}
    made, here = tmp_path / "made", tmp_path / "here"
    made.mkdir(), here.mkdir()
    out = {"output_dir": str(tmp_path / "out")}
    ab_made = load_ablation(write(made, variants, **out))
    spec_made = next(s for s in ab_made.runs() if s.key == "a-s0")
    assert spec_made.config.mutators[0].record_path == str(made / "rec.jsonl")  # type: ignore[union-attr]
    state = AblationState.load(ab_made.directory(), ab_made)
    _finished_run(tmp_path, state, "a-s0", spec_made.config.model_dump(mode="json"), spec_made.config_hash(),
                  config_dir=made)
    state.save()

    ab_here = load_ablation(write(here, variants, **out))
    spec_here = next(s for s in ab_here.runs() if s.key == "a-s0")
    assert spec_here.config_hash() == spec_made.config_hash()  # the same hash from either checkout
    assert AblationState.load(ab_here.directory(), ab_here).runs["a-s0"].status is RunStatus.FINISHED

    other = {"a": {"mutators": [{"kind": "llm", "mode": "replay", "model": "m", "record_path": "other.jsonl"}]}}
    ab_other = load_ablation(write(here, other, **out))
    with pytest.raises(ConfigError, match="the config of a-s0 changed since"):
        AblationState.load(ab_other.directory(), ab_other)


def test_an_ablation_whose_replay_record_changed_under_its_runs_is_refused(tmp_path):
    """A resumed run replays the record copy it kept, so a new record would mix two sets of answers in
    one variant: the ablation says which record changed. A run with no kept copy is not judged."""
    variants = {"a": {"mutators": [{"kind": "llm", "mode": "replay", "model": "m", "record_path": "rec.jsonl"}]}}
    ab = load_ablation(write(tmp_path, variants))
    record = tmp_path / "rec.jsonl"
    record.write_text('{"reply": "one answer"}\n')
    state = AblationState.load(ab.directory(), ab)
    spec = next(s for s in ab.runs() if s.key == "a-s0")
    _finished_run(tmp_path, state, "a-s0", spec.config.model_dump(mode="json"), spec.config_hash(),
                  config_dir=tmp_path)
    state.save()
    assert AblationState.load(ab.directory(), ab).runs["a-s0"].status is RunStatus.FINISHED  # nothing kept yet
    kept = run_inputs.record_copy(Path(state.runs["a-s0"].run_dir), 0, str(record))
    kept.parent.mkdir(parents=True)
    kept.write_bytes(record.read_bytes())
    assert AblationState.load(ab.directory(), ab).runs["a-s0"].status is RunStatus.FINISHED  # the same answers
    record.write_text('{"reply": "another answer"}\n')
    with pytest.raises(ConfigError, match=r"the replay record of a-s0 \(.*rec\.jsonl\) is not the one"):
        AblationState.load(ab.directory(), ab)
