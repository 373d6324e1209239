"""The evaluator's settings from a config's ``evaluation:`` section: one translation for every command
(`evo eval`, `evo check`, `evo run`, `evo ablate`), so a campaign evaluates exactly as `evo eval` does."""

from __future__ import annotations

from evo.contracts.config import Config
from fitness.evaluate import EvalSettings
from fitness.latency.stage import LatencyMode, LatencySettings
from fitness.latency.timer import TimerSettings


def eval_settings(cfg: Config) -> EvalSettings:
    e = cfg.evaluation
    latency = LatencySettings(
        mode=LatencyMode(e.latency), target_gpu=e.target_gpu.lower(), baselines=tuple(e.baselines),
        timer=TimerSettings(rep_ms=e.timing_rep_ms, copies=e.timing_copies),
        timeout_s=e.latency_timeout_s, memory_mb=e.memory_mb,
    )
    return EvalSettings(timeout_s=e.timeout_s, memory_mb=e.memory_mb, draws=e.draws, quick_sizes=e.quick_sizes,
                        latency=latency)
