"""Ablation files: patches merged into the base, every variant validated before anything runs,
clear errors naming the variant and the key; the shipped ablation loads and builds as shipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from evo.app.ablation.config import deep_merge, load_ablation
from evo.app.ablation.runner import preflight
from evo.app.cli import main
from evo.contracts.config_file import ConfigError
from evo.contracts.native_task import TASK_LIBRARY

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "configs" / "ablation_mutators.yaml"


def write(tmp_path: Path, variants: dict, **top: object) -> Path:
    base = {"name": "b", "task": {"name": "softmax"}, "islands": {"count": 2, "population": 4},
            "mutators": [{"kind": "stoke"}, {"kind": "optuna"}], "selection": {"policy": "fixed"}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    data = {"name": "t", "base": "base.yaml", "baseline": next(iter(variants)), "seeds": [0, 1],
            "budget": {"generations": 2}, "output_dir": str(tmp_path / "out"), "variants": variants, **top}
    path = tmp_path / "ablation.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_mappings_merge_key_by_key_and_lists_and_scalars_replace():
    base: dict[str, Any] = {"islands": {"count": 2, "migration": {"interval": 2, "top_k": 1}},
                            "mutators": [{"kind": "stoke"}], "seed": 0}
    patch = {"islands": {"migration": {"top_k": 3}}, "mutators": [{"kind": "llm"}], "selection": None}
    merged = deep_merge(base, patch)
    assert merged == {"islands": {"count": 2, "migration": {"interval": 2, "top_k": 3}},
                      "mutators": [{"kind": "llm"}], "seed": 0, "selection": None}
    assert base["islands"]["migration"]["top_k"] == 1  # the base is not modified


def test_each_variant_is_the_patched_base_with_the_ablations_seed_and_budget(tmp_path):
    path = write(tmp_path, {"base": {}, "one-island": {"islands": {"count": 1}},
                            "stoke": {"mutators": [{"kind": "stoke", "chain_length": 3}],
                                      "selection": {"policy": "ucb1"}}})
    ab = load_ablation(path)
    assert ab.variants["base"].islands.count == 2 and ab.variants["one-island"].islands.count == 1
    assert ab.variants["one-island"].islands.population == 4  # merged, not replaced
    assert [m.kind for m in ab.variants["stoke"].mutators] == ["stoke"]
    assert ab.variants["stoke"].selection.policy == "ucb1" and ab.variants["base"].selection.policy == "fixed"
    runs = ab.runs()
    assert [r.key for r in runs] == ["base-s0", "one-island-s0", "stoke-s0", "base-s1", "one-island-s1", "stoke-s1"]
    assert {r.config.budget.generations for r in runs if r.config.budget} == {2}
    assert [r.config.seed for r in runs[:3]] == [0, 0, 0]
    assert runs[0].config_hash() != runs[3].config_hash()  # another seed, another config
    assert ab.directory() == (tmp_path / "out" / "t").resolve()


@pytest.mark.parametrize(("variants", "top", "message"), [
    ({"a": {}, "b": {"islands": {"cont": 3}}}, {}, "variants.b: unknown key 'islands.cont' (valid keys here: count"),
    ({"a": {}, "b": {"mutators": [{"kind": "stokee"}]}}, {}, "variants.b: mutators.0"),
    ({"a": {}, "b": {"budget": {"generations": 9}}}, {}, "variants.b: budget is set by the ablation"),
    ({"a": {}, "b": {"seed": 3}}, {}, "variants.b: seed is set by the ablation"),
    ({"a": {}}, {"baseline": "z"}, "baseline 'z' is not a variant (variants: a)"),
    ({"a": {}}, {"seedz": [1]}, "unknown key 'seedz'"),
    ({"a b": {}}, {}, "variant names must be"),
])
def test_a_bad_file_is_an_error_naming_the_key_and_nothing_runs(tmp_path, variants, top, message):
    path = write(tmp_path, variants, **top)
    with pytest.raises(ConfigError) as err:
        load_ablation(path)
    assert message in str(err.value)
    assert main(["ablate", str(path)]) == 2
    assert not (tmp_path / "out").exists()


def test_a_variant_whose_mutator_cannot_be_built_fails_before_any_run(tmp_path, monkeypatch):
    monkeypatch.delenv("EVO_TEST_ABSENT_KEY", raising=False)
    path = write(tmp_path, {"a": {}, "live": {"mutators": [{"kind": "llm", "api_key_env": "EVO_TEST_ABSENT_KEY"}]}})
    with pytest.raises(ConfigError, match=r"variants\.live: mutators\.0 .*EVO_TEST_ABSENT_KEY is not set"):
        preflight(load_ablation(path))
    assert main(["ablate", str(path)]) == 2
    assert not (tmp_path / "out").exists()


def test_a_selection_keeps_the_runs_of_its_variants_and_seeds_and_names_what_the_file_lacks(tmp_path, capsys):
    ab = load_ablation(write(tmp_path, {"a": {}, "b": {"islands": {"count": 1}}, "c": {}}))
    assert [r.key for r in ab.select(["c", "a"], [1])] == ["a-s1", "c-s1"]
    assert [r.key for r in ab.select(["b"])] == ["b-s0", "b-s1"]
    assert [r.key for r in ab.select(seeds=[0])] == ["a-s0", "b-s0", "c-s0"]
    assert ab.select() == ab.runs()
    with pytest.raises(ConfigError, match=r"no variant 'z' \(variants: a, b, c\)"):
        ab.select(["a", "z"])
    with pytest.raises(ConfigError, match=r"no seed 7 \(seeds: 0, 1\)"):
        ab.select(seeds=[7])
    capsys.readouterr()
    assert main(["ablate", str(ab.source), "--variant", "z"]) == 2
    assert "no variant 'z'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_broken_variant_that_is_not_selected_does_not_stop_the_others(tmp_path, monkeypatch):
    monkeypatch.delenv("EVO_TEST_ABSENT_KEY", raising=False)
    path = write(tmp_path, {"a": {}, "live": {"mutators": [{"kind": "llm", "api_key_env": "EVO_TEST_ABSENT_KEY"}]}})
    preflight(load_ablation(path), variants=["a"])  # no error: `live` is not built
    with pytest.raises(ConfigError, match=r"variants\.live"):
        preflight(load_ablation(path), variants=["a", "live"])


def test_the_shipped_ablation_compares_every_mutator_subset_with_the_llm_replayed(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # replay needs no key
    ab = load_ablation(SHIPPED)
    kinds = {name: sorted(m.kind for m in cfg.mutators) for name, cfg in ab.variants.items()}
    assert kinds == {"llm": ["llm"], "stoke": ["stoke"], "optuna": ["optuna"], "llm-stoke": ["llm", "stoke"],
                     "llm-optuna": ["llm", "optuna"], "stoke-optuna": ["optuna", "stoke"],
                     "all-fixed": ["llm", "optuna", "stoke"], "all-bandit": ["llm", "optuna", "stoke"],
                     "random-search": ["sweep"], "grid-sweep": ["sweep"]}
    assert [m.order for v in ("random-search", "grid-sweep") for m in ab.variants[v].mutators  # type: ignore[union-attr]
            ] == ["random", "grid"]
    assert ab.variants["all-fixed"].selection.policy == "fixed"
    assert ab.variants["all-bandit"].selection.policy == "ucb1"
    llms = [m for cfg in ab.variants.values() for m in cfg.mutators if m.kind == "llm"]
    assert {(m.mode, m.replay_match) for m in llms} == {("replay", "kernel")}
    assert all(m.record_path and Path(m.record_path).is_file() for m in llms)
    assert len(ab.runs()) == 10 * len(ab.cfg.seeds)
    preflight(ab)  # every variant's task and mutators build, with no key and no network


# the search ablations on tasks outside the library: `examples/<name>`, given by path
EXAMPLE_ABLATIONS = ["row_moments"]
SEARCH_ABLATIONS = sorted(p.stem for p in (ROOT / "configs" / "ablation_search").glob("*.yaml")
                          if p.stem != "base" and p.stem not in EXAMPLE_ABLATIONS)


def test_there_is_a_search_ablation_for_each_library_task():
    assert set(SEARCH_ABLATIONS) == {p.name for p in TASK_LIBRARY.iterdir() if (p / "task.py").is_file()}


@pytest.mark.parametrize("example", EXAMPLE_ABLATIONS)
def test_the_example_search_ablations_run_their_example_task(example: str):
    ab = load_ablation(ROOT / "configs" / "ablation_search" / f"{example}.yaml")
    assert set(ab.variants) == {"evolution", "random-search"}
    for cfg in ab.variants.values():
        assert cfg.task.name is None and cfg.task.path is not None
        assert (ab.base_dir / cfg.task.path).resolve() == (ROOT / "examples" / example).resolve()
    assert sorted(m.kind for m in ab.variants["evolution"].mutators) == ["optuna", "stoke"]
    assert ab.cfg.baseline == "random-search" and len(ab.cfg.seeds) == 5
    preflight(ab)


@pytest.mark.parametrize("task", SEARCH_ABLATIONS)
def test_the_shipped_search_ablations_set_their_task_in_every_variant(task):
    ab = load_ablation(ROOT / "configs" / "ablation_search" / f"{task}.yaml")
    names = ["evolution", "random-search", "evolution-llm-standin"]
    assert {name: cfg.task.name for name, cfg in ab.variants.items()} == dict.fromkeys(names, task)
    # the stand-in LLM's answers for this task replayed, beside the same STOKE and Optuna
    llm = ab.variants["evolution-llm-standin"]
    assert sorted(m.kind for m in llm.mutators) == ["llm", "optuna", "stoke"]
    (m,) = [m for m in llm.mutators if m.kind == "llm"]
    assert (m.mode, m.replay_match, m.model) == ("replay", "kernel", f"standin-{task}")
    assert m.record_path and Path(m.record_path).name == f"{task}_standin.jsonl"
    assert Path(m.record_path).is_file()
    assert sorted(m.kind for m in ab.variants["evolution"].mutators) == ["optuna", "stoke"]
    assert [(m.kind, m.order) for m in ab.variants["random-search"].mutators  # type: ignore[union-attr]
            ] == [("sweep", "random")]
    assert ab.cfg.baseline == "random-search" and len(ab.cfg.seeds) == 5
    preflight(ab)
