"""`evo export --as torch-op`: the operator module runs the best kernel in eager mode and under
`torch.compile(fullgraph=True)` (CPU build, Triton interpreter), and the test file written beside it
fails when the kernel is wrong."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evo.app.cli import main
from evo.app.export.shapes import output_rules
from evo.app.export.torch_op import input_names
from evo.contracts.candidate import Candidate
from evo.contracts.config import TaskConfig
from evo.contracts.native_task import NativeTask
from evo.contracts.task_files import TaskFiles
from evo.contracts.verdict import Status

from .reports.synthetic import Ev, make_run

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "tests" / "kernelbench"

# softmax without the max subtraction: right on normal logits, inf/NaN on the task's large ones
NO_MAX_SOFTMAX = '''
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


PARAMS = {"BLOCK": 4096}


def launch(x, y, *, BLOCK):
    _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
'''


def library(task: str, name: str) -> Candidate:
    return Candidate.from_source((ROOT / "evo" / "tasks" / task / name).read_text())


def run_with_best(tmp_path: Path, task: str, best: Candidate, task_cfg: TaskConfig | None = None,
                  base: Path = ROOT) -> Path:
    """A finished run of library `task` whose best (2x the seed) is `best`, keeping its task files
    (those of `task_cfg` when given, e.g. a KernelBench problem)."""
    seed = library(task, "seed.py")
    built = make_run(tmp_path, f"{task}-run", [Ev("seed", 2.0), Ev("llm", 1.0, at_s=1.0)], task=task,
                     pick=lambda i: [seed, best][i])
    files = TaskFiles.collect(task_cfg or TaskConfig(name=task), base)
    files.with_seed(seed.source).write(built.path / "inputs")
    return built.path


def export(run: Path, name: str, *extra: str) -> int:
    return main(["export", str(run), "--as", "torch-op", "--name", name, *extra])


def run_written_test(test: Path) -> subprocess.CompletedProcess[str]:
    """The written test file, run by pytest as a user would, without TRITON_INTERPRET in the environment."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                          cwd=test.parent, env=env, capture_output=True, text=True, timeout=600)


def test_the_exported_softmax_op_matches_the_reference_in_eager_mode_and_under_torch_compile(tmp_path, capsys):
    run = run_with_best(tmp_path, "softmax", library("softmax", "known_better.py"))
    assert export(run, "evotest::softmax") == 0
    module, test = run / "export" / "torch_op.py", run / "export" / "test_torch_op.py"
    assert "_evo_torch.library.custom_op('evotest::softmax'" in module.read_text()
    err = capsys.readouterr().err
    assert "inputs (x), outputs (x.shape[0], x.shape[1]) float" in err
    done = run_written_test(test)
    assert "3 passed" in done.stdout, done.stdout + done.stderr


def test_the_written_test_fails_for_a_kernel_that_is_wrong_on_some_inputs(tmp_path):
    run = run_with_best(tmp_path, "softmax", Candidate.from_source(NO_MAX_SOFTMAX))
    out = tmp_path / "ops" / "nomax.py"
    assert export(run, "evotest::nomax", "--output", str(out)) == 0
    done = run_written_test(out.with_name("test_nomax.py"))
    assert "2 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "(wide)" in done.stdout and "outside tolerance" in done.stdout


def test_a_kernelbench_op_takes_the_model_weights_after_the_inputs(tmp_path):
    """KernelBench's LayerNorm: the op's arguments are x, then the Model's weight and bias."""
    cfg = TaskConfig.model_validate(yaml.safe_load((KB / "layernorm.yaml").read_text())["task"])
    best = Candidate.from_source((ROOT / "evo" / "kernelbench_seeds" / "40_LayerNorm.py").read_text())
    run = run_with_best(tmp_path, "layernorm", best, cfg, KB)
    assert export(run, "evotest::kb_layernorm") == 0
    text = (run / "export" / "torch_op.py").read_text()
    assert 'schema="(Tensor x, Tensor weight, Tensor bias) -> Tensor"' in text
    done = run_written_test(run / "export" / "test_torch_op.py")
    assert "3 passed" in done.stdout, done.stdout + done.stderr


def test_a_number_among_a_kernelbench_problems_inputs_is_a_python_number_in_the_op(tmp_path):
    """5_Matrix_scalar_multiplication's forward takes (A, s: float): so does the op, which hands s to the
    kernel as the 0-d tensor it was checked with; another s gives A * s, not A * 3.14."""
    cfg = TaskConfig.model_validate(yaml.safe_load((KB / "scalar.yaml").read_text())["task"])
    best = Candidate.from_source((ROOT / "evo" / "kernelbench_seeds" / "5_Matrix_scalar_multiplication.py").read_text())
    run = run_with_best(tmp_path, "vector_add", best, cfg, KB)
    assert export(run, "evotest::kb_scale") == 0
    module = run / "export" / "torch_op.py"
    assert 'schema="(Tensor A, float s) -> Tensor"' in module.read_text()
    done = run_written_test(run / "export" / "test_torch_op.py")
    assert "3 passed" in done.stdout, done.stdout + done.stderr
    call = (f"import torch; from evo.app.export.check import load_module; load_module(__import__('pathlib').Path("
            f"{str(module)!r})); a = torch.randn(3, 5); "
            "print(torch.equal(torch.ops.evotest.kb_scale(a, -2.5), a * -2.5))")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    other = subprocess.run([sys.executable, "-c", call], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert other.stdout.strip() == "True", other.stdout + other.stderr


def test_input_names_that_the_generated_code_also_uses_do_not_shadow_it(tmp_path):
    """vector_add with launch(t, dt, out): names a generated op's own loop and dtype variables could take."""
    source = library("vector_add", "known_better.py").source
    head, launch = source.split("def launch(", 1)
    source = head + "def launch(" + launch.replace("x", "t").replace("y", "dt")
    assert "def launch(t, dt, out" in source
    run = run_with_best(tmp_path, "vector_add", Candidate.from_source(source))
    assert export(run, "evotest::add_t_dt") == 0
    assert 'schema="(Tensor t, Tensor dt) -> Tensor"' in (run / "export" / "torch_op.py").read_text()
    done = run_written_test(run / "export" / "test_torch_op.py")
    assert "3 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(("task", "want"), [
    ("matmul", ["(a.shape[0], b.shape[1]) float"]),
    ("reduction", ["() float"]),
    ("mla_decode", ["(q_latent.shape[0], q_latent.shape[1], q_latent.shape[2]) float"]),
    ("layernorm", ["(x.shape[0], x.shape[1]) float"]),
])
def test_output_shapes_follow_the_inputs_as_the_check_sizes_show(task, want):
    t = NativeTask(ROOT / "evo" / "tasks" / task)
    first = t.case_data(t.cases(draws=1, every_dist=False)[0])
    names = input_names(library(task, "seed.py"), len(first.inputs))
    assert [r.describe(names) for r in output_rules(t)] == want


def test_bad_export_requests_end_in_one_line_naming_the_problem(tmp_path, capsys):
    run = run_with_best(tmp_path, "softmax", library("softmax", "known_better.py"))
    assert export(run, "no-namespace") == 2
    assert "expected NAMESPACE::OP" in capsys.readouterr().err
    assert export(tmp_path / "nowhere", "a::b") == 2
    assert "not a run directory" in capsys.readouterr().err
    assert export(run, "a::b", "--output", str(tmp_path / "op.txt")) == 2
    assert "expected a .py file" in capsys.readouterr().err
    rejected = make_run(tmp_path, "rejected", [Ev("seed", None, status=Status.WRONG_OUTPUT)]).path
    assert export(rejected, "a::b") == 2
    assert "no kernel of this run passed" in capsys.readouterr().err
    shutil.rmtree(run / "inputs")
    assert export(run, "a::b") == 2
    err = capsys.readouterr().err
    assert "keeps no copy of its task" in err and "Traceback" not in err
