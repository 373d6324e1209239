"""Build a `Task` from the ``task:`` section of a config."""

from __future__ import annotations

from pathlib import Path

from evo.contracts.config import TaskConfig
from evo.contracts.config_file import ConfigError, resolve_path
from evo.contracts.kernelbench import KernelBenchTask
from evo.contracts.kernelbench_seeds import shipped_seed
from evo.contracts.native_task import TASK_LIBRARY, NativeTask, library_tasks
from evo.contracts.task import Task, TaskError, Tolerance


def build_task(cfg: TaskConfig, base_dir: Path, *, check_forward: bool = True) -> Task:
    """The task the config names. `check_forward` runs a KernelBench problem's reference once (a forward
    that fails or is random is refused here); a process given a task the driver already checked (an
    evaluator, an island) passes False rather than run it again."""
    task: Task
    if cfg.kernelbench:
        assert cfg.sizes is not None
        path = resolve_path(cfg.kernelbench, base_dir, "task.kernelbench")
        shipped = None if cfg.seed else shipped_seed(path)  # none given: the one evo ships for the problem
        seed = (resolve_path(cfg.seed, base_dir, "task.seed").read_text() if cfg.seed
                else shipped.read_text() if shipped is not None else None)
        problem = KernelBenchTask(
            path, check_sizes=cfg.sizes.check, bench_sizes=cfg.sizes.bench or cfg.sizes.check,
            dtype=cfg.dtype or "float32", seed_source=seed, redraw_params=cfg.redraw_params,
            mode=cfg.model_mode, dist_opt_out=cfg.dist_opt_out,
        )
        if check_forward:
            problem.check_forward()
        task = problem
    else:
        if cfg.name:
            folder = TASK_LIBRARY / cfg.name
            if not (folder / "task.py").is_file():
                valid = ", ".join(library_tasks())
                raise ConfigError(f"task.name: no task {cfg.name!r} in the library; valid: {valid}")
            path = folder
        else:
            assert cfg.path is not None
            path = resolve_path(cfg.path, base_dir, "task.path")
        task = NativeTask(path, dtype=cfg.dtype)
        if cfg.sizes is not None:
            try:
                task.check_size_names(cfg.sizes.check, "task.sizes.check")
                task.check_size_names(cfg.sizes.bench or [], "task.sizes.bench")
            except TaskError as e:
                raise ConfigError(str(e)) from e
            task.check_sizes = cfg.sizes.check
            task.bench_sizes = cfg.sizes.bench or task.bench_sizes
        if cfg.workload is not None:
            try:
                task.use_workload(cfg.workload)
            except TaskError as e:
                raise ConfigError(f"task.workload: {e}") from e
        if cfg.seed:
            task.seed_source = resolve_path(cfg.seed, base_dir, "task.seed").read_text()
        task.dist_opt_out = {**task.dist_opt_out, **(cfg.dist_opt_out or {})}
    if cfg.sizes is not None and cfg.sizes.bench_weights is not None:
        task.set_bench_weights(cfg.sizes.bench_weights)
    if cfg.tolerance is not None:
        task.tolerance_override = Tolerance(cfg.tolerance.atol, cfg.tolerance.rtol)
    return task
