"""The per-task search table (bench/search/search_table.py) and the ablation report's references: finished
runs of an ablation against the cached sweep of the seed's SPACE and the known-better kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.search import run_curves, search_table
from evo.app.ablation.config import load_ablation
from evo.app.ablation.report import ablation_doc
from evo.app.ablation.runner import STATE_FILE, AblationState, RunStatus
from evo.app.run.sweep_ref import sweep_key

from .reports.synthetic import Ev, make_run

TASK_KEY = "softmax-synthetic"
MODEL = "m1"  # the latency model version of the synthetic runs


@pytest.fixture(autouse=True)
def no_shipped_curves(tmp_path, monkeypatch):
    """The table reads the saved curves of bench/data/ unless told otherwise: here, a file of the test's."""
    monkeypatch.setattr(run_curves, "RUNS", tmp_path / "saved-runs.jsonl")


def ablation(tmp_path: Path, runs: dict[str, list[list[Ev]]], *, swept: bool = True,
             task: dict[str, str] | None = None, sweep_model: str = MODEL) -> tuple[Path, Path]:
    """An ablation file, its directory with the given finished runs (variant -> one history per
    seed) and a sweeps file with the task's sweep (2.0x, unless not `swept`) and known-better (4.0x),
    both modelled by `sweep_model`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"name": "b", "task": task or {"name": "softmax"},
                                                        "mutators": [{"kind": "stoke"}]}))
    variants = {v: ({} if v == "evolution" else {"mutators": [{"kind": "sweep", "order": "random"}]}) for v in runs}
    path = tmp_path / "search.yaml"
    baseline = "random-search" if "random-search" in runs else next(iter(runs))
    path.write_text(yaml.safe_dump({"name": "search-softmax", "base": "base.yaml", "baseline": baseline,
                                    "seeds": list(range(len(next(iter(runs.values()))))),
                                    "budget": {"evaluations": 10}, "output_dir": str(tmp_path / "out"),
                                    "variants": variants}))
    ab = load_ablation(path)
    directory = ab.directory()
    state = AblationState.load(directory, ab)
    for spec in ab.runs():
        built = make_run(directory / "runs", spec.key, runs[spec.variant][spec.seed])
        summary = json.loads((built.path / "summary.json").read_text())
        summary.update(task_key=TASK_KEY, latency_source="model", best={"latency_gpu": "h100"})
        (built.path / "summary.json").write_text(json.dumps(summary))
        entry = state.runs[spec.key]
        entry.status, entry.run_dir = RunStatus.FINISHED, str(built.path)
    state.save()
    assert (directory / STATE_FILE).is_file()
    ref = {"task": "softmax", "task_key": TASK_KEY, "latency_source": "model", "gpu": "h100", "points": 35,
           "known_better_speedup": 4.0, "known_better_model_version": sweep_model}
    if swept:
        ref.update(best_speedup=2.0, evaluations=35, seconds=60.0, draws_to_95=4.0, model_version=sweep_model)
    sweeps = tmp_path / "sweeps.json"
    sweeps.write_text(json.dumps({sweep_key(TASK_KEY, "model", "h100"): ref}))
    return path, sweeps


def climb(*latencies: float) -> list[Ev]:
    """The seed at 1 ms, then one evaluation per latency, 10 s apart, modelled by model version MODEL."""
    detail = {"model_version": MODEL}
    return [Ev("seed", 1.0, 0.0, generation=0, detail=detail)] + [
        Ev("stoke", x, 10.0 * (i + 1), detail=detail) for i, x in enumerate(latencies)]


def test_each_strategy_is_set_against_the_sweep_and_the_known_better_kernel(tmp_path, capsys):
    # evolution: 2.5x at its 2nd evaluation (the seed is the 1st), 2.6x at its 4th (95% of it, 2.47x, was
    # reached at the 2nd); random search: 2.0x (the sweep's best) at its 3rd
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.4, 0.9, 1 / 2.6)] * 3,
                                       "random-search": [climb(0.9, 0.5, 0.7)] * 3})
    out = tmp_path / "table.md"
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--markdown", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_text().strip() == text.strip()
    rows = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in text.splitlines() if line.startswith("| softmax")}
    evo, rnd = rows["search-softmax/evolution"], rows["search-softmax/random-search"]
    assert evo[3:] == ["3", "2.600x [2.600x-2.600x]", "2.000x", "30.0% above the sweep", "3 of 3", "4.000x",
                       "35.0% below the known-better kernel", "2 [2-2]", "10 [10-10]", MODEL]
    assert rnd[5:8] == ["2.000x", "the same as the sweep (within 1%)", "0 of 3"]
    assert rnd[-3:] == ["3 [3-3]", "20 [20-20]", MODEL]
    assert "MODELLED" in text and "versions of the latency model" not in text


def test_a_task_given_by_its_folder_is_named_after_it(tmp_path, capsys):
    example = Path(__file__).resolve().parent.parent / "examples" / "row_moments"
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.4)], "random-search": [climb(0.5)]},
                            task={"path": str(example)})
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "search-softmax/" in line]
    assert len(rows) == 2 and all(line.startswith("| row_moments |") for line in rows), rows


def test_a_task_too_large_to_sweep_says_so_and_the_report_names_only_the_known_better(tmp_path, capsys):
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.5)], "random-search": [climb(0.8)]}, swept=False)
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "evolution" in line)
    assert "not swept" in row and "50.0% below the known-better kernel" in row
    ab = load_ablation(path)
    _, _, tables = ablation_doc(ab, AblationState.load(ab.directory(), ab), sweeps)
    assert "known-better kernel: 4.000x (evolution 50.0% below" in tables
    assert "exhaustive sweep" not in tables


def test_the_ablation_report_says_how_each_variant_compares_with_the_cached_sweep(tmp_path):
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.4)] * 2, "random-search": [climb(0.5)] * 2})
    ab = load_ablation(path)
    state = AblationState.load(ab.directory(), ab)
    assert "sweep" not in ablation_doc(ab, state, tmp_path / "no-sweeps.json")[2]
    doc, _, tables = ablation_doc(ab, state, sweeps)
    assert ("exhaustive sweep of the seed's SPACE (35 points): 2.000x (evolution 25.0% above the sweep; "
            "random-search the same as the sweep (within 1%))") in tables
    assert any("exhaustive sweep" in getattr(b, "text", "") for b in doc.blocks)  # in the report too


def test_runs_above_the_sweep_count_only_those_above_it_by_more_than_the_models_noise(tmp_path, capsys):
    # against the sweep's 2.0x: 2.5x and 2.03x are above it, 2.0x and 2.016x (within 1%) are not
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.4), climb(1 / 2.03), climb(0.5), climb(1 / 2.016)]})
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    row = next([c.strip() for c in line.split("|")[1:-1]] for line in capsys.readouterr().out.splitlines()
               if "search-softmax/evolution" in line)
    assert row[3] == "4" and row[7] == "2 of 4", row


def test_a_sweep_modelled_by_another_model_version_is_not_compared(tmp_path, capsys):
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.4)] * 2, "random-search": [climb(0.5)] * 2},
                            sweep_model="m0")
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    row = next([c.strip() for c in line.split("|")[1:-1]] for line in capsys.readouterr().out.splitlines()
               if "search-softmax/evolution" in line)
    assert row[5:10] == ["2.000x", "not compared (model m0)", "-", "4.000x", "not compared (model m0)"], row
    ab = load_ablation(path)
    tables = ablation_doc(ab, AblationState.load(ab.directory(), ab), sweeps)[2]
    assert "2.000x (not compared: the cached figure was modelled by latency model m0, the run(s) by m1" in tables
    assert "above the sweep" not in tables


def test_without_finished_runs_the_table_says_what_to_run(tmp_path, capsys):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"name": "b", "task": {"name": "softmax"}}))
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "base": "base.yaml", "baseline": "v", "seeds": [0],
                                    "budget": {"evaluations": 5}, "output_dir": str(tmp_path / "none"),
                                    "variants": {"v": {}}}))
    assert search_table.main([str(path)]) == 1
    assert "evo ablate" in capsys.readouterr().err


def test_keep_holds_the_rows_of_strategies_without_runs_here_and_names_them(tmp_path, capsys):
    # the earlier table: evolution and random search; this machine has only new evolution runs
    path, sweeps = ablation(tmp_path / "before", {"evolution": [climb(0.5)] * 2, "random-search": [climb(0.8)] * 2})
    earlier = tmp_path / "earlier.md"
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--markdown", str(earlier)]) == 0
    capsys.readouterr()
    path, sweeps = ablation(tmp_path / "after", {"evolution": [climb(0.4)] * 3})
    out = tmp_path / "table.md"
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--keep", str(earlier), "--markdown", str(out)]) == 0
    text = capsys.readouterr().out
    rows = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in text.splitlines() if line.startswith("| softmax")}
    assert set(rows) == {"search-softmax/evolution", "search-softmax/random-search"}
    assert rows["search-softmax/evolution"][3:5] == ["3", "2.500x [2.500x-2.500x]"]  # the new runs, not the kept 2.0x
    assert rows["search-softmax/random-search"][3:5] == ["2", "1.250x [1.250x-1.250x]"]  # kept as it was
    assert "Kept from the earlier table" in text and "search-softmax/random-search." in text
    assert "MODELLED" in text and out.read_text().strip() == text.strip()
    # the kept rows stay in the order the table is always in: random search (a baseline) after evolution
    order = [line.split("|")[2].strip() for line in text.splitlines() if line.startswith("| softmax")]
    assert order == ["search-softmax/evolution", "search-softmax/random-search"]


def test_the_model_column_names_each_rows_model_version_and_the_note_says_when_they_differ(tmp_path, capsys):
    def at(version: str, *latencies: float) -> list[Ev]:
        return [Ev(e.mutator, e.latency_ms, e.at_s, generation=e.generation, detail={"model_version": version})
                for e in climb(*latencies)]

    path, sweeps = ablation(tmp_path / "one", {"evolution": [at("aaaa", 0.5)] * 2, "random-search": [at("aaaa", 0.8)]
                                               * 2})
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    text = capsys.readouterr().out
    assert all(line.rstrip().endswith("| aaaa |") for line in text.splitlines() if line.startswith("| softmax"))
    assert "versions of the latency model" not in text
    path, sweeps = ablation(tmp_path / "two", {"evolution": [at("aaaa", 0.5), at("bbbb", 0.5)],
                                               "random-search": [at("aaaa", 0.8)] * 2})
    assert search_table.main([str(path), "--sweeps", str(sweeps)]) == 0
    text = capsys.readouterr().out
    assert "| aaaa, bbbb |" in text
    assert "The rows come from 2 versions of the latency model (the model column: aaaa, bbbb)" in text


def test_keep_reads_a_table_from_before_the_model_column_as_unrecorded(tmp_path, capsys):
    path, sweeps = ablation(tmp_path / "before", {"evolution": [climb(0.5)] * 2, "random-search": [climb(0.8)] * 2})
    earlier = tmp_path / "earlier.md"
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--markdown", str(earlier)]) == 0
    capsys.readouterr()
    lines = earlier.read_text().splitlines()  # the same table without its last column, as written before it
    earlier.write_text("\n".join(line.rsplit("|", 2)[0] + "|" if line.startswith("|") else line for line in lines))
    path, sweeps = ablation(tmp_path / "after", {"evolution": [climb(0.4)] * 3})
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--keep", str(earlier)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "random-search" in line)
    assert row.startswith("| softmax |") and row.rstrip().endswith("| 2 [2-2] | 10 [10-10] | unrecorded |"), row


def test_keep_refuses_a_file_that_is_not_such_a_table(tmp_path, capsys):
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.5)], "random-search": [climb(0.8)]})
    other = tmp_path / "notes.md"
    other.write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--keep", str(other)]) == 2
    assert "--keep" in capsys.readouterr().err
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--keep", str(tmp_path / "missing.md")]) == 2


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in text.splitlines() if line.startswith("| softmax")}


def test_saved_curves_stand_in_for_runs_a_checkout_no_longer_has_and_seeds_add_up(tmp_path, capsys):
    import shutil

    runs = tmp_path / "curves.jsonl"
    path, sweeps = ablation(tmp_path / "a", {"evolution": [climb(0.4, 0.9, 1 / 2.6), climb(0.5)],
                                             "random-search": [climb(0.9, 0.5, 0.7), climb(0.8)]})
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--save"]) == 0
    first = _rows(capsys.readouterr().out)
    saved = run_curves.load(runs)
    assert sorted(saved) == [("search-softmax", v, s) for v in ("evolution", "random-search") for s in (0, 1)]
    assert saved[("search-softmax", "evolution", 0)].points == ((1, 0.0, 1.0), (2, 10.0, 2.5), (4, 30.0, 2.6))
    # a fresh checkout: no ablation directory; the rows come back from the saved curves, figure for figure
    ab = load_ablation(path)
    shutil.rmtree(ab.directory())
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 0
    assert _rows(capsys.readouterr().out) == first
    # another session ran seed 2 of evolution only: it joins the two saved seeds
    state = AblationState.load(ab.directory(), ab)
    built = make_run(ab.directory() / "runs", "evolution-s2", climb(0.25))
    summary = json.loads((built.path / "summary.json").read_text())
    summary.update(task_key=TASK_KEY, latency_source="model", best={"latency_gpu": "h100"})
    (built.path / "summary.json").write_text(json.dumps(summary))
    text = path.read_text().replace("seeds:\n- 0\n- 1\n", "seeds:\n- 0\n- 1\n- 2\n")
    path.write_text(text)
    ab = load_ablation(path)
    state = AblationState.load(ab.directory(), ab)
    state.runs["evolution-s2"].status, state.runs["evolution-s2"].run_dir = RunStatus.FINISHED, str(built.path)
    state.save()
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--save"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["search-softmax/evolution"][3:5] == ["3", "2.600x [2.300x-3.300x]"]  # 2.6, 2.0 saved; 4.0 here
    assert rows["search-softmax/random-search"] == first["search-softmax/random-search"]
    assert len(run_curves.load(runs)) == 5


def test_a_saved_curve_of_a_variant_whose_config_changed_is_set_aside(tmp_path, capsys):
    import shutil

    runs = tmp_path / "curves.jsonl"
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.5)], "random-search": [climb(0.8)]})
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--save"]) == 0
    capsys.readouterr()
    shutil.rmtree(load_ablation(path).directory())
    path.write_text(path.read_text().replace("evaluations: 10", "evaluations: 12"))  # every variant's budget
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 1  # nothing to show
    path.write_text(path.read_text().replace("evaluations: 12", "evaluations: 10"))
    cfg = yaml.safe_load(path.read_text())
    cfg["variants"]["evolution"] = {"islands": {"population": 6}}
    path.write_text(yaml.safe_dump(cfg))
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 0
    text = capsys.readouterr().out
    assert set(_rows(text)) == {"search-softmax/random-search"}
    assert "Set aside (their variant's config changed since they ran): search-softmax/evolution seed 0." in text


def test_saved_curves_replace_kept_rows_and_a_broken_curves_file_is_refused(tmp_path, capsys):
    runs = tmp_path / "curves.jsonl"
    path, sweeps = ablation(tmp_path / "before", {"evolution": [climb(0.5)] * 2, "random-search": [climb(0.8)] * 2})
    earlier = tmp_path / "earlier.md"
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--markdown", str(earlier)]) == 0
    path, sweeps = ablation(tmp_path / "after", {"evolution": [climb(0.4)] * 2, "random-search": [climb(0.9)] * 2})
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--save"]) == 0
    capsys.readouterr()
    import shutil

    shutil.rmtree(load_ablation(path).directory())
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--keep", str(earlier)]) == 0
    text = capsys.readouterr().out
    assert _rows(text)["search-softmax/evolution"][4] == "2.500x [2.500x-2.500x]" and "Kept from" not in text
    runs.write_text(runs.read_text() + "{not json\n")
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 2
    assert f"{runs}:5: not a run curve" in capsys.readouterr().err


def test_a_saved_curve_counts_after_the_schema_gains_a_key_and_not_after_its_config_changes(tmp_path, capsys):
    """A config key added since a curve was saved (at its default) changes `config_hash` as today's schema
    computes it; the curve keeps its config as written, read again by today's schema, so it still counts.
    A kept config that differs from the variant's now is set aside as before, and so is a curve saved
    before configs were kept whose hash no longer matches."""
    import shutil

    runs = tmp_path / "curves.jsonl"
    path, sweeps = ablation(tmp_path, {"evolution": [climb(0.5)], "random-search": [climb(0.8)]})
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs), "--save"]) == 0
    first = _rows(capsys.readouterr().out)
    shutil.rmtree(load_ablation(path).directory())
    lines = [json.loads(line) for line in runs.read_text().splitlines()]
    assert all(c["config"]["budget"]["evaluations"] == 10 and "seed" in c["config"] for c in lines)
    for c in lines:
        c["config_hash"] = "hashed-by-an-old-schema"
    lines[1]["config"]["budget"]["evaluations"] = 12  # random-search's run: another experiment
    runs.write_text("".join(json.dumps(c) + "\n" for c in lines))
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 0
    text = capsys.readouterr().out
    assert _rows(text) == {"search-softmax/evolution": first["search-softmax/evolution"]}
    assert "Set aside (their variant's config changed since they ran): search-softmax/random-search seed 0." in text
    del lines[0]["config"]  # saved before configs were kept: only the hash can tell, and it differs
    runs.write_text("".join(json.dumps(c) + "\n" for c in lines))
    assert search_table.main([str(path), "--sweeps", str(sweeps), "--runs", str(runs)]) == 1


def test_every_shipped_curve_counts_for_the_shipped_ablation_files(monkeypatch):
    """bench/data/ablation_runs.jsonl holds the figures of the shipped search table: a change that sets them
    aside (a variant edited, or a config key added in a way its kept config cannot absorb) must be seen
    here, not found later in a table that quietly fell back to its kept rows."""
    monkeypatch.undo()  # the shipped curves, not the fixture's empty file
    saved = run_curves.load(run_curves.RUNS)
    assert saved, run_curves.RUNS
    stale: list[str] = []
    for path in [p for p in search_table.DEFAULTS if p.name not in search_table.SKIP]:
        found = search_table.rows_of(path, Path("/nonexistent"), search_table.SWEEPS, saved)
        stale += found.stale
    assert not stale, stale
