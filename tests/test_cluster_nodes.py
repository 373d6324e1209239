"""A campaign on a cluster of several Ray nodes on this machine: a head and worker nodes started as Ray
starts them on a cluster (`ray start --head`, `ray start --address`), each its own raylet, ports and temp
dir, with declared GPUs (the evaluators check in the interpreter under them) and a custom resource
naming the node, token authentication on everywhere. The campaign begins with the evaluators Ray can
place, says what the others wait for, and takes a node that joins while it runs, and loses no evaluation
to a node lost mid-generation. (A job submitted to a head and two GPU nodes, one evaluator placed on each,
is the cluster page's test, tests/test_docs_cluster.py, which runs the page's commands as written.)"""

from __future__ import annotations

import functools
import io
import logging
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from evo.app.run.campaign import Campaign
from evo.app.run.ray_auth import reload_ray_config
from evo.contracts.history import MsgpackLog, unpack

from .conftest import ROOT
from .ray_head import RayHead, RayNode
from .test_campaign_ray import assert_nothing_evaluated_twice, campaign, events, write_config

pytestmark = pytest.mark.slow
JOINED = re.compile(r"(evaluator-\d+) joined on node ")


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def node_id(label: str) -> str:
    import ray

    return next(n["NodeID"] for n in ray.nodes() if n.get("Alive") and label in n.get("Resources", {}))


def evaluated_by(run_dir: Path) -> set[str]:
    path = run_dir / "history.msgpack"
    return {r["evaluator"] for r in MsgpackLog(path).read() if r["kind"] == "evaluation"} if path.exists() else set()


@contextmanager
def cluster(monkeypatch: pytest.MonkeyPatch, gpus: dict[str, int],
            system: dict[str, str] | None = None) -> Iterator[tuple[RayHead, list[RayNode]]]:
    """A head with one CPU and no GPU and a node per entry of `gpus` (its label, the GPUs it declares; one
    CPU each), token authentication on, and this process joined to it as the campaign's driver."""
    import ray

    head = RayHead(num_cpus=1, num_gpus=0, dashboard=False, token=secrets.token_hex(16), system=system).start()
    nodes: list[RayNode] = []
    try:
        nodes += [RayNode(head, label, num_cpus=1, num_gpus=n).start() for label, n in gpus.items()]
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            monkeypatch.setenv(key, head.env()[key])
        reload_ray_config()  # Ray reads its mode and token once per process
        ray.init(address=head.address, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
                 logging_level=logging.WARNING)
        yield head, nodes
    finally:
        ray.shutdown()
        monkeypatch.undo()
        reload_ray_config()
        for node in nodes:
            node.stop()
        head.stop()


def run_beside(c: Campaign, out: io.StringIO, action: Callable[[], None]) -> tuple[dict[str, Any], str]:
    """(summary, what it printed) of `c` run here while `action` runs beside it; the campaign is stopped
    when the action ends, and an action that failed fails the test."""
    trouble: list[BaseException] = []

    def act() -> None:
        try:
            action()
        except BaseException as e:  # reported below
            trouble.append(e)
        finally:
            c.request_stop()

    helper = threading.Thread(target=act, daemon=True)
    helper.start()
    summary = c.run()
    helper.join(timeout=60)
    text = out.getvalue()
    assert not trouble, f"{trouble[0]}\n{text[-4000:]}"
    # the campaign is to end when the action does: one that ran out of its budget first left it unfinished
    assert not helper.is_alive(), f"the campaign ended before what ran beside it did\n{text[-4000:]}"
    assert summary["status"] in ("finished", "interrupted"), text[-3000:]
    return summary, text


def test_a_campaign_begins_with_what_ray_can_place_says_what_it_waits_for_and_takes_a_node_that_joins(
        tmp_path, monkeypatch):
    # node_a declares 2 GPUs and 1 CPU: the campaign wants one evaluator per GPU (1 CPU each), Ray places one
    with cluster(monkeypatch, {"node_a": 2}) as (head, nodes):
        config = write_config(tmp_path, evaluation={"device": "auto", "timeout_s": 60}, evaluators={},
                              islands={"count": 1, "population": 3, "offspring": 2}, budget={"generations": 10**6})
        c, out = campaign(config)

        def join_a_node() -> None:
            wait_for("the campaign to begin", lambda: "beginning with 1 evaluator(s)" in out.getvalue())
            nodes.append(RayNode(head, "node_b", num_cpus=2, num_gpus=1).start())
            wait_for("an evaluator on node_b", lambda: JOINED.search(out.getvalue()) is not None)
            name = JOINED.search(out.getvalue())[1]  # type: ignore[index]
            wait_for(f"an evaluation by {name}, which joined", lambda: name in evaluated_by(c.store.path))

        _, text = run_beside(c, out, join_a_node)
        # said before it began: what each evaluator needs and what the nodes have
        said = text.split("beginning with 1 evaluator(s)", 1)[1].splitlines()[0]
        assert "1 evaluator(s) not started yet: each needs 1 CPU, 1 GPU" in said, said
        assert "room for 1" in said and "2 GPU" in said, said
        joined = events(c.store.path, "evaluator_joined")
        assert joined and joined[0]["node"] == node_id("node_b"), joined
        start = events(c.store.path, "start")[0]
        assert [e["node_id"] for e in start["evaluators"]] == [node_id("node_a")]
        names = evaluated_by(c.store.path)
        assert joined[0]["name"] in names and len(names) >= 2, names
        records = [r for r in MsgpackLog(c.store.path / "history.msgpack").read() if r["kind"] == "evaluation"]
        assert_nothing_evaluated_twice(records)


# the head notices a node whose raylet is gone after about 10 refused health checks a second apart (by
# default after about 15 s); a node alive but slow still gets 10 s per check
FAST_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "10",
              "RAY_health_check_timeout_ms": "10000"}
GENERATION = re.compile(r"island \d+ gen (\d+):")


def generations(text: str) -> int:
    return len(GENERATION.findall(text))


def joined_at_least(out: io.StringIO, n: int) -> bool:
    return len(JOINED.findall(out.getvalue())) >= n


def more_generations(out: io.StringIO, seen: int) -> bool:
    return generations(out.getvalue()) > seen


def test_a_node_lost_three_times_at_different_points_loses_no_evaluation_and_none_twice(tmp_path, monkeypatch):
    from evo.app.report.data import load_run
    from evo.app.report.stats import timeline

    lost: list[str] = []
    with cluster(monkeypatch, {"node_a": 1, "node_b0": 1}, system=FAST_DEATH) as (head, nodes):
        # no budget the test could meet first: once the search has nothing new to evaluate, a generation takes
        # milliseconds, and 200 of them ran out before the head declared the third node dead (under load)
        config = write_config(tmp_path, evaluation={"device": "auto", "timeout_s": 60}, evaluators={},
                              islands={"count": 2, "population": 3, "offspring": 3}, budget={"generations": 10**6})
        c, out = campaign(config)
        points = random.Random(41).sample([0.2, 0.8, 1.5, 2.5, 4.0], 3)  # seconds into a generation

        def lose_the_node_three_times() -> None:
            wait_for("both evaluators", lambda: "evaluating on" in out.getvalue())
            for k, delay in enumerate(points):
                label = f"node_b{k}"
                if k:  # the replacement of the lost node's evaluator, placed on the node that took its place
                    wait_for(f"an evaluator on {label}", functools.partial(joined_at_least, out, k))
                seen = generations(out.getvalue())
                wait_for("a generation to begin", functools.partial(more_generations, out, seen))
                time.sleep(delay)
                lost.append(node_id(label))
                nodes[-1].kill()
                nodes.append(RayNode(head, f"node_b{k + 1}", num_cpus=1, num_gpus=1).start())
            wait_for("the last replacement", functools.partial(joined_at_least, out, len(points)))
            # a node's loss is said once the head has declared it dead (~10 s after the kill with FAST_DEATH),
            # which may come after its evaluator's replacement has joined
            wait_for("the three losses said", lambda: out.getvalue().count(" lost (it had evaluator-") >= len(points))
            seen = generations(out.getvalue()) + 1
            wait_for("a generation after it", functools.partial(more_generations, out, seen))

        _, text = run_beside(c, out, lose_the_node_three_times)
        run_dir = c.store.path
        records = [r for r in MsgpackLog(run_dir / "history.msgpack").read() if r["kind"] == "evaluation"]
        assert_nothing_evaluated_twice(records)
        # no evaluation lost: every individual the islands hold (at their last checkpoint) was recorded
        checkpoint = c.store.latest_checkpoint()
        assert checkpoint is not None
        held = {ind["candidate"]["id"] for state in checkpoint.islands.values()
                for ind in unpack(state)["population"]}
        assert held and held <= {r["candidate"]["id"] for r in records}
        assert all(r["evaluation"]["status"] in ("ok", "wrong_output", "compile_error", "lint_error", "unsafe",
                                                 "timeout", "crash") for r in records)
        redone = [r for r in records if any("died" in i or "did not answer" in i
                                            for i in r["evaluation"].get("incidents") or [])]
        for r in redone:  # evaluated again elsewhere: the verdict is not an infrastructure failure
            assert r["evaluation"]["status"] != "crash" or "died" not in r["evaluation"]["reason"], r
        node_lost = events(run_dir, "node_lost")
        said = [line for line in text.splitlines() if " lost (it had " in line]
        replaced, joined = events(run_dir, "evaluator_replaced"), events(run_dir, "evaluator_joined")
        # in full under "Captured stdout" should an assertion below fail (pytest shortens its own message)
        print(f"lost: {lost}\nnode_lost: {node_lost}\nreplaced: {replaced}\njoined: {joined}\nsaid: {said}\n{text}")
        assert sorted(e["node"] for e in node_lost) == sorted(lost), (node_lost, lost, said, text[-3000:])
        assert {e["node"] for e in replaced} >= set(lost)
        moments = timeline(load_run(run_dir))
        assert sum(m.what == "node lost" for m in moments) == 3
        assert sum(m.what == "evaluator joined" for m in moments) >= 3, (joined, JOINED.findall(text), text[-3000:])
        assert text.count(" lost (it had evaluator-") == 3, text[-3000:]
        assert not events(run_dir, "evaluator_unavailable"), text[-3000:]
