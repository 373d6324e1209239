"""The run directory: append-only logs that survive a kill, atomic checkpoints."""

from __future__ import annotations

from evo.app.run.store import RunStore
from evo.contracts.config import BudgetConfig, Config, TaskConfig
from evo.contracts.history import MsgpackLog, pack, unpack


def test_a_record_cut_short_is_dropped_and_cut_off_before_appending(tmp_path):
    log = MsgpackLog(tmp_path / "h.msgpack")
    for i in range(3):
        log.append({"i": i, "text": "x" * 100})
    with open(log.path, "ab") as f:
        f.write(pack({"i": 3, "text": "y" * 100})[:40])  # as if killed mid-write
    assert [r["i"] for r in log.read()] == [0, 1, 2]
    assert log.repair() == 3
    log.append({"i": 4})
    assert [r["i"] for r in log.read()] == [0, 1, 2, 4]


def test_checkpoints_are_complete_or_absent_and_only_the_last_two_are_kept(tmp_path):
    config = Config(name="demo", task=TaskConfig(name="softmax"), budget=BudgetConfig(generations=1))
    store = RunStore.create(tmp_path, config, config_dir=tmp_path)
    assert store.latest_checkpoint() is None
    for gen in range(1, 5):
        store.write_checkpoint(gen, {"generation": gen}, {0: pack({"g": gen}), 1: pack({"g": -gen})})
    (store.checkpoints / "gen-000009").mkdir()  # a checkpoint killed before its driver file: ignored
    cp = store.latest_checkpoint()
    assert cp is not None and cp.generation == 4 and cp.driver == {"generation": 4}
    assert {i: unpack(b) for i, b in cp.islands.items()} == {0: {"g": 4}, 1: {"g": -4}}
    assert sorted(p.name for p in store.checkpoints.glob("gen-*")) == ["gen-000003", "gen-000004", "gen-000009"]
    again = RunStore.open(store.path)
    assert again.config() == config and again.config_dir() == tmp_path
