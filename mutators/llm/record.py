"""Record and replay of LLM exchanges (JSONL), so a campaign can be re-run exactly without a network.

A request is identified by the SHA-256 of its canonical JSON (model, messages, temperature,
max_tokens) and by its occurrence: the k-th time the same request is made in a run. Replay answers
the k-th identical request with the k-th recorded reply. API keys and headers are never part of a
request here, so they never reach the file.

Replay by kernel (`KernelIndex`) is looser, for comparisons between campaigns that share one record
(ablations): a request is matched by the model and the kernel its prompt shows. The k-th request
showing a kernel gets the k-th reply recorded for that kernel (cycling when there are fewer); a
kernel never recorded gets a reply recorded for another kernel of the same model, drawn by a hash
of the kernel and k (the mutator then applies it to the kernel at hand, so edits written for
another kernel may not apply: an unusable reply, as a real model's can be).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


def request_hash(request: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Exchange:
    """One recorded request and its reply."""

    hash: str
    occurrence: int
    request: dict[str, Any]
    reply: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    seconds: float
    error: str = ""  # a request that got no reply (after retries) is recorded too, so replay fails alike


class RecordFile:
    """Appends exchanges to a JSONL file and answers from the ones it holds (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, int], Exchange] = {}
        if path.is_file():
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    ex = Exchange(**json.loads(line))
                except (ValueError, TypeError) as e:
                    raise ValueError(f"{path}:{n}: not an LLM record line ({e})") from None
                self._by_key[(ex.hash, ex.occurrence)] = ex

    def __len__(self) -> int:
        return len(self._by_key)

    def find(self, digest: str, occurrence: int) -> Exchange | None:
        return self._by_key.get((digest, occurrence))

    def exchanges(self) -> list[Exchange]:
        """Every exchange held, in file order."""
        return list(self._by_key.values())

    def append(self, ex: Exchange) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(asdict(ex), sort_keys=True) + "\n")
            self._by_key[(ex.hash, ex.occurrence)] = ex


class KernelIndex:
    """Recorded exchanges by (model, shown kernel); see the module docstring."""

    def __init__(self, exchanges: Sequence[Exchange], key_of: Callable[[str, list[dict[str, str]]], str]) -> None:
        self._by_kernel: dict[str, list[Exchange]] = {}
        self._by_model: dict[str, list[Exchange]] = {}
        for ex in exchanges:
            model = str(ex.request.get("model", ""))
            self._by_kernel.setdefault(key_of(model, ex.request.get("messages", [])), []).append(ex)
            self._by_model.setdefault(model, []).append(ex)

    def find(self, model: str, key: str, occurrence: int) -> tuple[Exchange, bool] | None:
        """The reply for the `occurrence`-th request showing this kernel, and whether it was recorded
        for this very kernel (False: one recorded for another kernel); None when the model has none."""
        same = self._by_kernel.get(key)
        if same:
            return same[occurrence % len(same)], True
        pool = self._by_model.get(model)
        if not pool:
            return None
        pick = int(hashlib.sha256(f"{key}:{occurrence}".encode()).hexdigest()[:12], 16) % len(pool)
        return pool[pick], False
