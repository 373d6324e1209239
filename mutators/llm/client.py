"""The LLM transport: the `openai` client with retries, a concurrency cap, accounting and a budget.

Works against any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) through
`base_url`. The key is read from the environment variable named by `api_key_env` (checked when the
client is built, read again for the first request); it is never stored in configs, records or
logs. Modes:

- live: requests go to the endpoint;
- record: as live, and every exchange is appended to the record file;
- replay: answered from the record file only (no network, no key). With ``replay_match="exact"``
  a request that was not recorded is an error; with ``"kernel"`` it is matched by the kernel its
  prompt shows (see `mutators.llm.record.KernelIndex`), so campaigns that show the model other
  kernels (other mutators, other seeds) still share the recorded answers.

Rate limits (429), timeouts, connection errors and 5xx are retried `retries` times with
exponential backoff (``backoff_s * 2**attempt``, or the server's Retry-After when longer); other
HTTP errors (400, 401, 404) fail at once. An endpoint that is down does not cost every proposal its
retries: after `pause_after_failures` failed requests in a row the client pauses (`paused` is true;
the mutator counts as exhausted meanwhile) for `pause_s`, doubling up to `max_pause_s`, and a reply
resets it. Error messages name the endpoint (`base_url` and model). Dollars are counted from each
response's ``usage`` at the configured prices, replayed exchanges included (so a replayed campaign
stops where the original did); once `budget_usd` is spent, no new request is made.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from evo.contracts.mutator_config import LLMConfig
from mutators.llm.prompt import kernel_key
from mutators.llm.record import Exchange, KernelIndex, RecordFile, request_hash

_RETRYABLE = (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError)


class LLMError(Exception):
    """A request that produced no reply (after retries); the message says why."""


class BudgetSpent(LLMError):
    """The dollar budget is spent: no more requests."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    seconds: float
    request_hash: str
    replayed: bool
    replay_match: str = ""  # replayed: "exact", "kernel" (recorded for this kernel) or "other kernel"


@dataclass(frozen=True)
class Prices:
    in_per_mtok: float
    out_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.in_per_mtok + completion_tokens * self.out_per_mtok) / 1e6


class LLMClient:
    """Chat completions with retries, a semaphore, accounting, budget, record and replay."""

    def __init__(self, cfg: LLMConfig, *, record_path: Path | None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """`record_path` is the record file of the record and replay modes (unused when live)."""
        mode, api_key_env = cfg.mode, cfg.api_key_env
        if mode in ("record", "replay") and record_path is None:
            raise ValueError(f"llm mode {mode!r} needs a record path")
        if mode == "replay" and not (record_path and record_path.is_file()):
            raise ValueError(f"llm replay: record file not found: {record_path}")
        if mode != "replay" and not os.environ.get(api_key_env):
            raise ValueError(f"llm: environment variable {api_key_env} is not set (api_key_env names the variable "
                             "holding the API key; local servers accept any non-empty value)")
        self.model, self.base_url, self.api_key_env = cfg.model, cfg.base_url, api_key_env
        self.temperature, self.max_tokens = cfg.temperature, cfg.max_tokens
        self.timeout_s, self.retries, self.backoff_s = cfg.timeout_s, cfg.retries, cfg.backoff_s
        self.prices = Prices(cfg.price_in_per_mtok, cfg.price_out_per_mtok)
        self.budget_usd, self.mode = cfg.budget_usd, mode
        self.record = RecordFile(record_path) if record_path is not None and mode != "live" else None
        self.replay_match = cfg.replay_match
        self.kernels = (KernelIndex(self.record.exchanges(), kernel_key)
                        if self.record is not None and mode == "replay" and cfg.replay_match == "kernel" else None)
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(cfg.max_concurrent)
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self.occurrences: dict[str, int] = {}
        self.spent_usd = 0.0
        self.prompt_tokens = self.completion_tokens = 0
        self.requests = self.retried = self.failed = 0
        self.pause_after, self.pause_s, self.max_pause_s = cfg.pause_after_failures, cfg.pause_s, cfg.max_pause_s
        self.replay_misses = 0  # replayed requests the record file had no reply for
        self.consecutive_failures = 0
        self.pauses = 0  # pauses since the last reply (each one twice as long as the one before)
        self.paused_total = 0  # every pause of the run
        self.paused_until = 0.0  # time.monotonic() until which no request is sent
        self._clock: Callable[[], float] = time.monotonic

    @property
    def endpoint(self) -> str:
        return f"{self.base_url or 'https://api.openai.com/v1'} (model {self.model})"

    @property
    def paused(self) -> bool:
        return self._clock() < self.paused_until

    def _failed_request(self) -> str:
        """Count a request that got no reply; returns a note when it starts a pause ('' otherwise)."""
        with self._lock:
            self.failed += 1
            self.consecutive_failures += 1
            if self.consecutive_failures < self.pause_after or self.paused:
                return ""
            wait = min(self.pause_s * 2**self.pauses, self.max_pause_s)
            self.pauses += 1
            self.paused_total += 1
            self.consecutive_failures = 0
            self.paused_until = self._clock() + wait
            return (f"; {self.pause_after} requests in a row failed: LLM requests to {self.endpoint} pause for "
                    f"{wait:.0f} s")

    def _replied(self) -> None:
        with self._lock:
            self.consecutive_failures = 0
            self.pauses = 0

    @property
    def budget_spent(self) -> bool:
        return self.budget_usd is not None and self.spent_usd >= self.budget_usd

    def request_of(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """What identifies a request (and is recorded): everything sent except credentials."""
        return {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}

    def reserve(self, messages: list[dict[str, str]]) -> tuple[str, int]:
        """The request's hash (replay by kernel: the kernel's) and occurrence number; call in a
        deterministic order before sending."""
        if self.kernels is not None:
            digest = kernel_key(self.model, messages)
        else:
            digest = request_hash(self.request_of(messages))
        with self._lock:
            k = self.occurrences.get(digest, 0)
            self.occurrences[digest] = k + 1
        return digest, k

    def complete(self, messages: list[dict[str, str]], ticket: tuple[str, int] | None = None) -> Completion:
        """One reply to `messages`; raises LLMError (BudgetSpent when the budget is spent)."""
        digest, occurrence = ticket or self.reserve(messages)
        if self.budget_spent:
            raise BudgetSpent(f"LLM budget spent: ${self.spent_usd:.4f} of ${self.budget_usd:.4f}")
        if self.mode == "replay":
            return self._replay(digest, occurrence)
        if self.paused:
            raise LLMError(f"LLM requests to {self.endpoint} are paused for {self.paused_until - self._clock():.0f} s "
                           "more after repeated failures")
        started = time.monotonic()
        try:
            response = self._send(self.request_of(messages))
        except LLMError as e:
            if self.record is not None:
                self.record.append(Exchange(digest, occurrence, self.request_of(messages), "", 0, 0, 0.0,
                                            time.monotonic() - started, str(e)))
            raise
        self._replied()
        usage = response.usage
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        text = (response.choices[0].message.content or "") if response.choices else ""
        done = Completion(text, p_tok, c_tok, self.prices.cost(p_tok, c_tok), time.monotonic() - started,
                          digest, False)
        if self.record is not None:
            self.record.append(Exchange(digest, occurrence, self.request_of(messages), text, p_tok, c_tok,
                                        done.cost_usd, done.seconds))
        return self._account(done)

    def _replay(self, digest: str, occurrence: int) -> Completion:
        assert self.record is not None
        if self.kernels is not None:
            found = self.kernels.find(self.model, digest, occurrence)
            if found is None:
                self._missed()
                raise LLMError(f"llm replay: {self.record.path} holds no reply of model {self.model!r}")
            ex, same_kernel = found
            how = "kernel" if same_kernel else "other kernel"
        else:
            hit = self.record.find(digest, occurrence)
            if hit is None:
                self._missed()
                raise LLMError(f"llm replay: no recorded reply for request {digest[:12]} #{occurrence} "
                               f"in {self.record.path}")
            ex, how = hit, "exact"
        if ex.error:
            raise LLMError(ex.error)
        return self._account(Completion(ex.reply, ex.prompt_tokens, ex.completion_tokens, ex.cost_usd,
                                        ex.seconds, digest, True, how))

    def _missed(self) -> None:
        with self._lock:
            self.replay_misses += 1

    def _account(self, c: Completion) -> Completion:
        with self._lock:
            self.requests += 1
            self.spent_usd += c.cost_usd
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
        return c

    def _openai(self) -> openai.OpenAI:
        if self._client is None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise LLMError(f"environment variable {self.api_key_env} is not set (it names the API key; "
                               "local servers accept any non-empty value)")
            # Retries are ours (counted, with our backoff), so the client's own are off.
            self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
        return self._client

    def _send(self, request: dict[str, Any]) -> Any:
        client = self._openai()
        last = ""
        for attempt in range(self.retries + 1):
            try:
                with self._slots:
                    return client.chat.completions.create(**request)
            except _RETRYABLE as e:
                last = f"{type(e).__name__}: {e}"
                if attempt == self.retries:
                    break
                with self._lock:
                    self.retried += 1
                self._sleep(self._delay(e, attempt))
            except openai.APIStatusError as e:
                note = self._failed_request()
                raise LLMError(f"{self.endpoint} refused the request: HTTP {e.status_code}: {e.message}"
                               f"{note}") from None
        note = self._failed_request()
        raise LLMError(f"no reply from {self.endpoint} after {self.retries + 1} attempts: {last}{note}")

    def _delay(self, error: Exception, attempt: int) -> float:
        delay = self.backoff_s * 2**attempt
        response = getattr(error, "response", None)
        if response is not None:
            try:
                delay = max(delay, float(response.headers.get("retry-after", 0)))
            except (TypeError, ValueError):
                pass
        return min(delay, 60.0)

    def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "retried": self.retried, "failed": self.failed,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "spent_usd": round(self.spent_usd, 6), "budget_usd": self.budget_usd, "mode": self.mode,
                "pauses": self.paused_total, "endpoint": self.endpoint, "replay_misses": self.replay_misses}
