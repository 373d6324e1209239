"""The `Runtime` on Ray: actors are Ray actors, references are ObjectRefs. Stateless, so it travels
to the broker actor with its arguments."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any


class RayRuntime:
    name = "ray"

    def actor(self, cls: type, *args: Any, name: str = "", num_cpus: float = 0.0, num_gpus: float = 0.0,
              here: bool = False, node: str = "") -> Any:
        import ray

        options: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": 0}
        if here or (node and node != "local"):
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                node_id=node or ray.get_runtime_context().get_node_id(), soft=not here)
        return ray.remote(cls).options(**options).remote(*args)

    def get(self, refs: Any, timeout: float | None = None) -> Any:
        import ray

        return ray.get(refs, timeout=timeout)

    def wait_one(self, refs: Sequence[Any], timeout: float | None = None) -> Any | None:
        import ray

        ready, _ = ray.wait(list(refs), num_returns=1, timeout=timeout)
        return ready[0] if ready else None

    def kill(self, handle: Any) -> None:
        import ray

        ray.kill(handle, no_restart=True)

    def resources(self) -> dict[str, float]:
        import ray

        return {k: float(v) for k, v in ray.available_resources().items()}

    def nodes(self) -> list[dict[str, Any]]:
        import ray

        return [{"id": n["NodeID"], "address": n.get("NodeManagerAddress", ""),
                 "resources": {k: float(v) for k, v in n.get("Resources", {}).items()}}
                for n in ray.nodes() if n.get("Alive")]

    def died(self, e: BaseException) -> bool:
        """The actor is gone: it died, or Ray's memory monitor killed its worker (an `OutOfMemoryError`,
        not a `RayActorError`, though the actor is as dead: it is restored or replaced like any other)."""
        from ray.exceptions import OutOfMemoryError, RayActorError

        return isinstance(e, (RayActorError, OutOfMemoryError))

    def failed(self, e: BaseException) -> bool:
        from ray.exceptions import RayActorError, RayTaskError

        return isinstance(e, RayTaskError) and not isinstance(e, RayActorError)

    def timed_out(self, e: BaseException) -> bool:
        from ray.exceptions import GetTimeoutError

        return isinstance(e, (asyncio.TimeoutError, GetTimeoutError))
