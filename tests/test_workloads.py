"""Named shape lists (`task.workload`): the library's lists parse and name their sources, a config
picks one and the fitness weighs its shapes, bad lists and bad configs fail with a message that
names the problem, and a workload's results are never compared with the default bench sizes'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from evo.app.cli import main
from evo.app.run.sweep_ref import reference_of, sweep_key
from evo.contracts.candidate import Candidate
from evo.contracts.config import EvaluationConfig, LatencyMode, SizesConfig, TaskConfig
from evo.contracts.config_file import ConfigError
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.task import TaskError
from evo.contracts.task_loader import build_task
from evo.contracts.workload import parse_workloads
from fitness.evaluate import Evaluator

GOOD: dict[str, Any] = {"source": "a model's config.json", "bench": [{"n": 8}, {"n": 64}], "weights": [1.0, 3.0]}


def test_every_library_workload_parses_names_its_source_and_weighs_every_shape():
    seen = 0
    for name in library_tasks():
        task = NativeTask(TASK_LIBRARY / name)
        key, default = task.key, task.bench_sizes
        assert task.bench_tag == ""
        for w in task.workloads.values():
            seen += 1
            assert len(w.source) > 20 and len(w.bench) == len(w.weights) >= 2
            task.use_workload(w.name)
            assert task.bench_sizes == w.bench
            assert task.fitness_sizes() == list(enumerate(w.weights))  # every shape counts
            assert task.key == key  # what a correct kernel computes is unchanged
            assert task.bench_tag == f"workload-{w.name}" and w.name in task.describe()
        fresh = NativeTask(TASK_LIBRARY / name)
        assert fresh.bench_sizes == default and fresh.workload is None
    # softmax, layernorm, matmul (2), reduction, vector_add, mla_decode
    assert seen >= 7


@pytest.mark.parametrize("change, message", [
    ({"source": ""}, "'source' must say where"),
    ({"bench": []}, "non-empty list"),
    ({"bench": [{"n": 8}, {"m": 8}]}, "must give exactly \\['n'\\]"),
    ({"bench": [{"n": 8}, {"n": 0}]}, "positive integers"),
    ({"bench": [{"n": 8}, {"n": 8.0}]}, "positive integers"),
    ({"bench": [{"n": 8}, {"n": True}]}, "positive integers"),
    ({"bench": [{"n": 8}, {"n": 8}]}, "listed twice"),
    ({"weights": [1.0]}, "one weight per bench size \\(2\\)"),
    ({"weights": [1.0, 0.0]}, "positive numbers"),
    ({"weights": [1.0, float("inf")]}, "positive numbers"),
    ({"shapes": []}, "unknown key\\(s\\) \\['shapes'\\]"),
])
def test_a_bad_workload_is_refused_naming_the_workload_and_the_problem(change, message):
    with pytest.raises(TaskError, match=f"workload 'serving'.*{message}"):
        parse_workloads({"serving": {**GOOD, **change}}, {"n"}, "evo/tasks/x/workloads.yaml")
    with pytest.raises(TaskError, match="must map workload names"):
        parse_workloads([GOOD], {"n"}, "evo/tasks/x/workloads.yaml")
    assert parse_workloads({"serving": {k: v for k, v in GOOD.items() if k != "weights"}}, {"n"},
                           "x")["serving"].weights == [1.0, 1.0]  # equal weights by default


def _task_folder(tmp_path: Path, workloads: str) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    for f in ("task.py", "seed.py"):
        (folder / f).write_text((TASK_LIBRARY / "vector_add" / f).read_text())
    (folder / "workloads.yaml").write_text(workloads)
    return folder


def test_a_native_task_reads_the_workloads_file_beside_it_and_reports_bad_yaml_with_its_path(tmp_path):
    folder = _task_folder(tmp_path, yaml.safe_dump({"serving": GOOD}))
    task = build_task(TaskConfig(path=str(folder), workload="serving"), tmp_path)
    assert task.bench_sizes == [{"n": 8}, {"n": 64}] and task.fitness_sizes() == [(0, 1.0), (1, 3.0)]
    (folder / "workloads.yaml").write_text("serving: [unclosed")
    with pytest.raises(TaskError, match=r"workloads\.yaml: not valid YAML"):
        NativeTask(folder)


def test_a_config_picks_a_workload_and_wrong_or_conflicting_choices_say_what_is_wrong(tmp_path):
    task = build_task(TaskConfig(name="matmul", workload="llama3-8b-decode"), tmp_path)
    assert [s["M"] for s in task.bench_sizes] == [64] * 4
    assert task.fitness_sizes() == [(0, 1.5), (1, 1.0), (2, 7.0), (3, 3.5)]
    with pytest.raises(ConfigError, match=r"task\.workload: .*no workload 'llama3-70b'; valid: "
                       r"llama3-8b-prefill, llama3-8b-decode"):
        build_task(TaskConfig(name="matmul", workload="llama3-70b"), tmp_path)
    with pytest.raises(ConfigError, match=r"no workload 'x'; valid: gpt2-short"):
        build_task(TaskConfig(name="attention_causal", workload="x"), tmp_path)
    bare = tmp_path / "bare"  # a task folder with no workloads file
    bare.mkdir()
    for f in ("task.py", "seed.py"):
        (bare / f).write_text((TASK_LIBRARY / "vector_add" / f).read_text())
    with pytest.raises(ConfigError, match=r"no workload 'x'; valid: none \(no .*bare/workloads\.yaml\)"):
        build_task(TaskConfig(path=str(bare), workload="x"), tmp_path)
    with pytest.raises(ValidationError, match=r"either workload or sizes\.bench"):
        TaskConfig(name="matmul", workload="llama3-8b-decode",
                   sizes=SizesConfig(check=[{"M": 1, "N": 1, "K": 1}], bench=[{"M": 8, "N": 8, "K": 8}]))
    with pytest.raises(ValidationError, match="workload is for library and native tasks"):
        TaskConfig(kernelbench="p.py", workload="w", sizes=SizesConfig(check=[{"n": 1}]))
    # check sizes may still be overridden beside a workload
    small = build_task(TaskConfig(name="vector_add", workload="llm-residual",
                                  sizes=SizesConfig(check=[{"n": 5}])), tmp_path)
    assert small.check_sizes == [{"n": 5}] and len(small.bench_sizes) == 3


def test_the_bench_tag_keeps_workloads_and_overridden_sizes_apart_from_the_task_s_own_bench(tmp_path):
    own = build_task(TaskConfig(name="softmax"), tmp_path)
    same = build_task(TaskConfig(name="softmax", sizes=SizesConfig(check=[{"rows": 1, "cols": 1}],
                                                                    bench=[{"rows": 4096, "cols": 4096}])), tmp_path)
    other = build_task(TaskConfig(name="softmax", sizes=SizesConfig(check=[{"rows": 1, "cols": 1}],
                                                                     bench=[{"rows": 8, "cols": 8}])), tmp_path)
    serving = build_task(TaskConfig(name="softmax", workload="llm-serving"), tmp_path)
    assert own.bench_tag == same.bench_tag == ""  # the same sizes spelled out are the same bench
    assert other.bench_tag.startswith("sizes-") and serving.bench_tag == "workload-llm-serving"
    # a cached sweep at the default sizes is not a reference for a workload's run, and the other way round
    sweeps = tmp_path / "sweeps.json"
    sweeps.write_text(json.dumps({sweep_key(own.key, "model", "h100"): {"best_speedup": 2.0},
                                  sweep_key(own.key, "model", "h100", serving.bench_tag): {"best_speedup": 5.0}}))

    def summary(tag: str | None) -> dict[str, Any]:
        s = {"task_key": own.key, "latency_source": "model", "best": {"latency_gpu": "h100"}}
        return s if tag is None else {**s, "bench_tag": tag}

    assert reference_of(summary(None), sweeps) == {"best_speedup": 2.0}  # a summary from before workloads
    assert reference_of(summary(""), sweeps) == {"best_speedup": 2.0}
    assert reference_of(summary(serving.bench_tag), sweeps) == {"best_speedup": 5.0}
    assert reference_of(summary(other.bench_tag), sweeps) is None


def test_a_workload_fitness_models_every_shape_with_its_weight(tmp_path, shared_workers):
    task = build_task(TaskConfig(name="vector_add", workload="llm-residual",
                                 sizes=SizesConfig(check=[{"n": 1}, {"n": 17}, {"n": 1000}])), tmp_path)
    settings = EvaluationConfig(device="cpu", latency=LatencyMode.MODEL, timeout_s=120)
    assert task.seed_source is not None
    with Evaluator(task, settings, device="cpu", secret=3, **shared_workers(settings)) as ev:
        r = ev.evaluate(Candidate.from_source(task.seed_source))
    assert r.ok and r.latency_ms is not None, r.reason
    shapes = r.latency_detail["shapes"]
    assert [s["size"] for s in shapes] == task.bench_sizes and [s["weight"] for s in shapes] == [1.0] * 3
    # a residual add is memory-bound: a bigger shape takes longer
    assert shapes[0]["latency_ms"] < shapes[1]["latency_ms"] < shapes[2]["latency_ms"]


def test_evo_tasks_lists_bench_sizes_workloads_and_their_sources(capsys):
    assert main(["tasks", "matmul", "mla_decode"]) == 0
    out = capsys.readouterr().out
    assert "matmul (float16): bench M 4096, N 4096, K 4096\n" in out
    assert "  workload llama3-8b-decode: M 64, N 6144, K 4096 (weight 1.5);" in out
    assert "from: Llama-3-8B linear layers" in out
    assert "cache_len 32768; the fitness times the first only" in out  # no weights in the module
    assert "workload deepseek-v3-serving:" in out
    assert main(["tasks", "matmull"]) == 2
    assert "no task 'matmull' in the library; valid: attention" in capsys.readouterr().err


def test_the_workload_table_gives_each_shape_then_the_fitness_and_leaves_unknown_speedups_blank():
    from bench.model.workload_table import rows_of
    from evo.contracts.verdict import Evaluation, Status

    shapes = [{"size": {"n": 8}, "weight": 1.0, "latency_ms": 0.5, "speedups": {"seed": 2.0}, "bound": "dram"},
              {"size": {"n": 64}, "weight": 3.0, "latency_ms": 2.0, "speedups": {}, "bound": "latency"}]
    ev = Evaluation("c", "k", "cpu", Status.OK, latency_ms=1.41, speedups={}, latency_detail={"shapes": shapes})
    assert rows_of("t", "w", "seed", ev) == [
        ["t", "w", "seed", "n 8", "1", "0.5", "2.00x", "dram"],
        ["t", "w", "seed", "n 64", "3", "2", "", "latency"],  # the seed had no latency at that shape
        ["t", "w", "seed", "fitness (weighted geomean)", "", "1.41", "", ""],
    ]
    one = Evaluation("c", "k", "cpu", Status.OK, latency_ms=0.25, speedups={"seed": 4.0},
                     latency_detail={"size": {"n": 8}, "launches": [{"bound": "dram"}]})
    assert rows_of("t", "w", "x", one) == [["t", "w", "x", "n 8", "1", "0.25", "4.00x", "dram"]]
    failed = Evaluation("c", "k", "cpu", Status.WRONG_OUTPUT, reason="output 0 wrong at n 8")
    assert rows_of("t", "w", "x", failed) == [["t", "w", "x", "", "", "", "", "wrong_output: output 0 wrong at n 8"]]


def test_a_campaign_at_a_workload_says_so_and_records_it_in_its_summary(tmp_path):
    import io

    from evo.app.run.campaign import Campaign
    from evo.app.run.progress import PlainLog
    from evo.app.run.setup import prepare

    from .campaign_job import FAKE_HOOKS
    from .test_campaign_ray import write_config

    folder = tmp_path / "softmax"  # the library's softmax with shapes the interpreter models in seconds
    folder.mkdir()
    for f in ("task.py", "seed.py"):
        (folder / f).write_text((TASK_LIBRARY / "softmax" / f).read_text())
    (folder / "workloads.yaml").write_text(yaml.safe_dump({"small": {
        "source": "two small shapes for a test", "bench": [{"rows": 64, "cols": 512}, {"rows": 16, "cols": 2048}],
        "weights": [1, 2]}}, sort_keys=False))
    config = write_config(tmp_path, task={"path": str(folder), "workload": "small",
                                          "sizes": {"check": [{"rows": 1, "cols": 1}, {"rows": 7, "cols": 131}]}},
                          budget={"generations": 1})
    out = io.StringIO()
    summary = Campaign(prepare(str(config), hooks=FAKE_HOOKS), FAKE_HOOKS, PlainLog(out), "local").run()
    assert summary["status"] == "finished", out.getvalue()
    assert summary["workload"] == "small" and summary["bench_tag"] == "workload-small"
    assert ("workload small: fitness over 2 shapes, rows 64, cols 512 (weight 1); rows 16, cols 2048 (weight 2)"
            in out.getvalue())
    assert [s["size"] for s in summary["best"]["shapes"]] == [{"rows": 64, "cols": 512}, {"rows": 16, "cols": 2048}]


def test_the_prompt_names_the_shapes_the_fitness_times_with_their_weights(tmp_path):
    from mutators.llm.prompt import task_lines

    decode = build_task(TaskConfig(name="matmul", workload="llama3-8b-decode"), tmp_path)
    line = task_lines(decode)[0]
    assert "timed on: M 64, N 6144, K 4096 (weight 1.5); M 64, N 4096, K 4096 (weight 1);" in line
    assert line.endswith("(the fitness is the weighted geometric mean; workload llama3-8b-decode)")
    plain = task_lines(build_task(TaskConfig(name="mla_decode"), tmp_path))[0]
    assert plain.endswith("timed on: batch 64, heads 128, cache_len 8192")  # unweighted: the first size alone


def test_config_sizes_name_the_tasks_parameters_and_a_size_its_code_fails_at_is_named(tmp_path):
    """A native task's sizes in a config give exactly the parameters of the task's own sizes (a typo was
    a KeyError traceback from inside the task module, an extra name was silently ignored); a size at which
    the task's inputs() or reference() fails is a TaskError naming the task, the size and the error."""
    def softmax(check: list[dict[str, Any]], bench: list[dict[str, Any]] | None = None) -> NativeTask:
        task = build_task(TaskConfig(name="softmax", sizes=SizesConfig(check=check, bench=bench or [])), tmp_path)
        assert isinstance(task, NativeTask)
        return task

    with pytest.raises(ConfigError, match=r"task\.sizes\.check\[1\]: \{'rows': 2\} lacks cols \(task softmax's "
                                          r"sizes give cols, rows\)"):
        softmax([{"rows": 1, "cols": 3}, {"rows": 2}])
    with pytest.raises(ConfigError, match=r"task\.sizes\.bench\[0\]: .* has colums, which it does not take"):
        softmax([{"rows": 1, "cols": 3}], [{"rows": 2, "cols": 8, "colums": 8}])
    empty = softmax([{"rows": 2, "cols": 0}])
    with pytest.raises(TaskError, match=r"task softmax: reference\(\) failed at size \{.*'cols': 0.*\}: "
                                        r"ValueError: zero-size array"):
        empty.case_data(empty.cases(draws=1)[0])
    negative = softmax([{"rows": -2, "cols": 3}])
    with pytest.raises(TaskError, match=r"task softmax: inputs\(\) failed at size \{.*'rows': -2.*\}: ValueError"):
        negative.case_data(negative.cases(draws=1)[0])
