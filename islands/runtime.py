"""Where the campaign's actors live: Ray (`islands.ray_runtime`), or this process (`islands.local_runtime`).

The campaign, the broker and the island shells speak to a `Runtime` instead of to Ray: start an actor
(`actor(cls, *args)`, whose methods are called as `handle.method.remote(...)` and give a reference),
read references (`get`, `wait_one`; in an async actor, `await ref`), kill an actor, and tell the
kinds of failure apart (`died`: the actor is gone; `failed`: its method raised; `timed_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Runtime(Protocol):
    name: str

    def actor(self, cls: type, *args: Any, name: str = "", num_cpus: float = 0.0, num_gpus: float = 0.0,
              here: bool = False, node: str = "") -> Any:
        """An actor of `cls(*args)`; `here`: on the caller's node (Ray), always so locally; `node`: on that
        node (a Ray node id) when it has room, else anywhere."""
        ...

    def get(self, refs: Any, timeout: float | None = None) -> Any: ...

    def wait_one(self, refs: Sequence[Any], timeout: float | None = None) -> Any | None:
        """One of `refs` that is ready (blocks until there is one, or `timeout` seconds: then None)."""
        ...

    def kill(self, handle: Any) -> None: ...

    def resources(self) -> dict[str, float]:
        """What is free to start actors on, for error messages."""
        ...

    def nodes(self) -> list[dict[str, Any]]:
        """The live nodes: ``{"id", "address", "resources"}`` (what each has in all, free or not)."""
        ...

    def died(self, e: BaseException) -> bool: ...

    def failed(self, e: BaseException) -> bool: ...

    def timed_out(self, e: BaseException) -> bool: ...
