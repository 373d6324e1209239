"""The campaign's Ray metrics: what the driver records (fake instruments), and what a real head's
Prometheus endpoint shows after a short campaign with fake evaluators."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest

from evo.app.run.metrics import CampaignMetrics, Instruments
from evo.app.run.progress import Totals

from .ray_head import joined_head
from .test_campaign_ray import campaign, write_config


class Recorded:
    """A fake gauge or counter: every call, as (value, tags)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, dict[str, str]]] = []

    def set(self, value: float, tags: dict[str, str]) -> None:
        self.calls.append((value, tags))

    def inc(self, value: float, tags: dict[str, str]) -> None:
        self.calls.append((value, tags))


def totals(elapsed_s: float, evaluations: int, failures: dict[str, int], best: float | None,
           busy: float | None = None) -> Totals:
    return Totals(evaluations, failures, 0, 0.0, elapsed_s, None, best, "model", 2, 0, busy)


def test_the_driver_records_best_speedup_recent_rate_and_counts_only_what_is_new():
    best, rate, evaluations, failures, busy = Recorded(), Recorded(), Recorded(), Recorded(), Recorded()
    m = CampaignMetrics("softmax", "softmax-1", warn=pytest.fail,
                        make=lambda: Instruments(best, rate, evaluations, failures, busy), window_s=60)
    tags = {"campaign": "softmax", "run": "softmax-1"}
    m.record(totals(10, 4, {"timeout": 1}, None))
    m.record(totals(20, 24, {"timeout": 1, "wrong": 2}, 1.5, 0.75))
    m.record(totals(100, 34, {"timeout": 3, "wrong": 2}, 2.0, 0.5))
    assert best.calls == [(1.5, tags), (2.0, tags)]
    assert busy.calls == [(0.75, tags), (0.5, tags)]  # none before the evaluators had work
    # 20 evaluations in 10 s; then 10 in the 80 s since the last sample over a minute old
    assert rate.calls == [(0.0, tags), (2.0, tags), (0.125, tags)]
    assert evaluations.calls == [(4, tags), (20, tags), (10, tags)]
    assert failures.calls == [
        (1, {**tags, "status": "timeout"}), (2, {**tags, "status": "wrong"}), (2, {**tags, "status": "timeout"})]


def test_metrics_that_fail_are_reported_once_and_never_stop_the_run():
    said: list[str] = []

    def unavailable() -> Instruments:
        raise RuntimeError("no metrics agent")

    m = CampaignMetrics("c", "r", warn=said.append, make=unavailable)
    m.record(totals(1, 1, {}, 1.0))
    assert len(said) == 1 and "no metrics agent" in said[0] and "goes on" in said[0]

    class Broken(Recorded):
        def set(self, value: float, tags: dict[str, str]) -> None:
            raise ValueError("bad tag")

    said.clear()
    broken = Instruments(Broken(), Broken(), Recorded(), Recorded())
    m = CampaignMetrics("c", "r", warn=said.append, make=lambda: broken)
    m.record(totals(1, 1, {}, 1.0))
    m.record(totals(2, 2, {}, 1.0))
    assert len(said) == 1 and "could not be recorded" in said[0]


SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text page, as (name, labels, value)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        if (m := SAMPLE.match(line)) and not line.startswith("#"):
            out.append((m["name"], dict(LABEL.findall(m["labels"] or "")), float(m["value"])))
    return out


@pytest.mark.slow
def test_a_campaign_shows_its_metrics_on_the_heads_prometheus_endpoint(tmp_path):
    with joined_head() as head:
        config = write_config(tmp_path, name="metrics-test", budget={"generations": 1}, evaluators={"count": 1},
                              islands={"count": 1, "population": 3, "offspring": 2})
        c, out = campaign(config)
        summary = c.run()
        assert summary["status"] == "finished" and "Ray metrics" not in out.getvalue(), out.getvalue()
        run = Path(summary["run_dir"]).name
        failures = {**summary["failures"], **summary["proposal_failures"]}
        url = f"http://127.0.0.1:{head.ports['metrics-export-port']}/metrics"

        def ours() -> dict[tuple[str, str], float]:
            return {(name, labels.get("status", "")): value for name, labels, value in scrape(url)
                    if name.startswith("ray_evo_campaign_") and labels.get("campaign") == "metrics-test"
                    and labels.get("run") == run}

        # the driver's core worker reports to the node's metrics agent every few seconds
        deadline, seen = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            try:
                seen = ours()
            except OSError:
                seen = {}
            if seen.get(("ray_evo_campaign_evaluations_total", "")) == summary["evaluations"] and all(
                    seen.get(("ray_evo_campaign_failures_total", s)) == n for s, n in failures.items()):
                break
            time.sleep(1)
        assert seen.get(("ray_evo_campaign_evaluations_total", "")) == summary["evaluations"] > 0, seen
        assert {s: seen.get(("ray_evo_campaign_failures_total", s)) for s in failures} == failures, seen
        best = seen[("ray_evo_campaign_best_speedup", "")]
        assert best == pytest.approx(summary["best"]["speedup_over_seed"], rel=1e-3) and best > 1.0  # the faster fake
        assert seen[("ray_evo_campaign_evaluations_per_second", "")] > 0, seen
        assert 0 < seen[("ray_evo_campaign_evaluator_busy_fraction", "")] <= 1, seen
