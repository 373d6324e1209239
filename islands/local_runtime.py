"""The `Runtime` in this process, for `evo run --executor local` (one machine, no Ray).

An actor is its object and one thread: calls run one at a time in call order, as on Ray. An actor
whose class has coroutine methods (the broker) gets an event loop on its thread instead, and its
calls run as tasks on that loop. A reference is a `concurrent.futures.Future` that can also be
awaited. The heavy work stays out of this process: each evaluator's `Evaluator` runs candidates in
its own sandboxed worker subprocess. Killing an actor fails its pending calls and every later one
(`LocalActorDied`) and closes the object (an evaluator's worker is killed, which ends a hung check).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any


class LocalActorDied(RuntimeError):
    """The actor was killed (or its constructor raised): the call never ran."""


class LocalTaskError(RuntimeError):
    """An actor's method raised; the message is the original error's."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class LocalTimeout(TimeoutError):
    pass


class Ref(concurrent.futures.Future[Any]):
    """A call's result: wait on it (`result`) or await it (in an async actor)."""

    def __await__(self) -> Any:
        return asyncio.wrap_future(self).__await__()

    def settle(self, source: concurrent.futures.Future[Any] | asyncio.Future[Any]) -> None:
        """Take `source`'s outcome (unless this reference was cancelled or failed already)."""
        if self.done():
            return
        try:
            if source.cancelled():
                self.cancel()
                return
            error = source.exception()
            if error is None:
                self.set_result(source.result())
            else:
                self.set_exception(error if isinstance(error, LocalActorDied) else LocalTaskError(error))
        except concurrent.futures.InvalidStateError:
            pass  # settled meanwhile (killed, cancelled)


def _is_async(cls: type) -> bool:
    return any(inspect.iscoroutinefunction(getattr(cls, n, None)) for n in dir(cls) if not n.startswith("__"))


class _Method:
    def __init__(self, actor: LocalActor, name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> Ref:
        return self.actor.call(self.name, args, kwargs)


class LocalActor:
    """A handle: `handle.method.remote(...)` -> `Ref`."""

    _ids = itertools.count()

    def __init__(self, cls: type, args: tuple[Any, ...], name: str) -> None:
        self._name = name or f"{cls.__name__}-{next(self._ids)}"
        self._dead = False
        self._lock = threading.Lock()
        self._pending: set[Ref] = set()
        self._async = _is_async(cls)
        self._loop: asyncio.AbstractEventLoop | None = None
        # a daemon thread: a call that hangs for good (a hung evaluator) must not keep the process alive
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None] = \
            queue.SimpleQueue()
        if self._async:
            loop = asyncio.new_event_loop()
            self._loop = loop
            threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
            self._obj: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(_construct(cls, args), loop)
            concurrent.futures.wait([self._obj])  # built before any call runs on the loop (which must not block)
        else:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()
            self._obj = concurrent.futures.Future()
            self._queue.put((lambda: cls(*args), self._obj))

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self, name)

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Ref:
        ref = Ref()
        with self._lock:
            if self._dead:
                ref.set_exception(LocalActorDied(f"actor {self._name} is dead"))
                return ref
            self._pending.add(ref)
        ref.add_done_callback(self._pending.discard)
        if self._loop is not None:
            loop = self._loop

            def start() -> None:
                task = asyncio.ensure_future(_invoke_async(self._obj, method, args, kwargs))
                task.add_done_callback(ref.settle)

            loop.call_soon_threadsafe(start)
        else:
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            done.add_done_callback(ref.settle)
            self._queue.put((lambda: _invoke(self._obj, method, args, kwargs), done))
        return ref

    def _serve(self) -> None:
        """The actor's thread: its calls, one at a time, in call order, until killed."""
        while (item := self._queue.get()) is not None:
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            if self._dead:  # killed while this call waited: it never runs
                future.set_exception(LocalActorDied(f"actor {self._name} was killed"))
                continue
            try:
                future.set_result(fn())
            except BaseException as e:
                future.set_exception(e)

    def kill(self) -> None:
        with self._lock:
            if self._dead:
                return
            self._dead = True
            pending = list(self._pending)
        for ref in pending:
            try:
                ref.set_exception(LocalActorDied(f"actor {self._name} was killed"))
            except concurrent.futures.InvalidStateError:
                pass
        self._queue.put(None)  # the thread ends after the call it is in (if that ever returns)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._obj.done() and self._obj.exception() is None:
            close = getattr(self._obj.result(), "close", None)
            if callable(close) and not inspect.iscoroutinefunction(close):
                # from its own thread: a hung call holds the actor's thread
                threading.Thread(target=_quietly, args=(close,), name=f"{self._name}-close", daemon=True).start()


async def _construct(cls: type, args: tuple[Any, ...]) -> Any:
    return cls(*args)


def _target(obj: concurrent.futures.Future[Any], method: str) -> Callable[..., Any]:
    try:
        instance = obj.result()
    except Exception as e:
        raise LocalActorDied(f"the actor could not be created: {type(e).__name__}: {e}") from e
    return getattr(instance, method)


def _invoke(obj: concurrent.futures.Future[Any], method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _target(obj, method)(*args, **kwargs)


async def _invoke_async(obj: concurrent.futures.Future[Any], method: str, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    result = _target(obj, method)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        pass


class LocalRuntime:
    name = "local"

    def actor(self, cls: type, *args: Any, name: str = "", num_cpus: float = 0.0, num_gpus: float = 0.0,
              here: bool = False, node: str = "") -> LocalActor:
        return LocalActor(cls, args, name)

    def get(self, refs: Any, timeout: float | None = None) -> Any:
        if isinstance(refs, list):
            return [self.get(r, timeout) for r in refs]
        try:
            return refs.result(timeout)
        except concurrent.futures.TimeoutError:
            raise LocalTimeout(f"no result within {timeout} s") from None

    def wait_one(self, refs: Sequence[Any], timeout: float | None = None) -> Any | None:
        concurrent.futures.wait(list(refs), timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        return next((r for r in refs if r.done()), None)

    def kill(self, handle: Any) -> None:
        handle.kill()

    def resources(self) -> dict[str, float]:
        return {"CPU": float(os.cpu_count() or 1)}

    def nodes(self) -> list[dict[str, Any]]:
        return [{"id": "local", "address": "127.0.0.1", "resources": self.resources()}]

    def died(self, e: BaseException) -> bool:
        return isinstance(e, LocalActorDied)

    def failed(self, e: BaseException) -> bool:
        return isinstance(e, LocalTaskError)

    def timed_out(self, e: BaseException) -> bool:
        return isinstance(e, (asyncio.TimeoutError, TimeoutError))
