"""How the suite is spread over xdist workers (`--dist loadfile`, `scripts/test.sh`).

A file's tests stay on one worker (its module-scoped Ray head and evaluators are made once); the files
that share a session-scoped set-up (`tests/reports/`: a real ablation, minutes) are one unit, so that only
one worker makes it. Units start longest first, by the seconds each took in a measured run
(`tests/durations.json`, written by `python -m tests.scheduling JUNIT_XML`): otherwise a long file that
happens to come last runs alone while the other worker idles. An unknown file counts as short; stale
figures change only the order, never what runs.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

DURATIONS = Path(__file__).resolve().parent / "durations.json"
SHARED = ("tests/reports/",)  # folders whose files share a session-scoped set-up


def unit(nodeid: str) -> str:
    """The scheduling unit of a test: its file, or the folder of `SHARED` it is in."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in SHARED if path.startswith(folder)), path)


def durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def longest_first(items: list[Any]) -> list[Any]:
    """`items` (pytest items) with the units' order longest first; the order inside each unit kept."""
    seconds = durations()
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(unit(item.nodeid), i)

    def key(item: Any) -> tuple[float, int]:
        u = unit(item.nodeid)
        return -seconds.get(u, 0.0), first_seen[u]

    return sorted(items, key=key)  # stable: a unit's tests keep their order


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's file scheduling with `unit` as the scope, in collection order (which `longest_first` set)."""
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    config.option.loadscopereorder = False  # xdist's own order is by test count, not by time
    return UnitScheduling(config, log)


def from_junit(path: Path) -> dict[str, float]:
    """Seconds per unit in a JUnit XML report (pytest --junitxml)."""
    root = DURATIONS.parent.parent
    per: dict[str, float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")  # tests.test_x or tests.test_x.SomeClass
        files = ("/".join(parts[:k]) + ".py" for k in range(len(parts), 0, -1))
        u = unit(next((f for f in files if (root / f).is_file()), ".".join(parts)))
        per[u] = per.get(u, 0.0) + float(case.get("time") or 0.0)
    return {k: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {DURATIONS}")
