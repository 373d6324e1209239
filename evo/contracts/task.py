"""The task contract: what a candidate must compute, on which sizes, to which tolerance.

A task gives a reference (numpy or torch on CPU, evaluated in float64), an input generator, check
sizes (including awkward ones: 1, primes, non-multiples of any block size), bench sizes, the dtype
and a tolerance per dtype, a seed candidate, and optionally FLOP and byte counts.

Two formats are accepted: the native one (`evo.contracts.native_task`, the task library in ``evo/tasks/``) and
KernelBench problem files (`evo.contracts.kernelbench`). Both produce :class:`CaseData`: inputs already
rounded to the dtypes the candidate receives, and the expected outputs computed in float64 from
exactly those rounded values.

Tolerance: an output element passes when ``|out - ref| <= atol * rms(ref) + rtol * |ref|``.
``atol`` is in units of the output's RMS magnitude, so one tolerance serves outputs of any scale
(a softmax over 4096 columns has values near 2e-4; an absolute 1e-5 would hide an fp16 downgrade).
NaN matches NaN and an infinity matches the same infinity.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from abc import ABC, abstractmethod

import numpy as np

from evo.contracts import dtypes
from evo.contracts.case import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE
from evo.contracts.case import EXACT as EXACT
from evo.contracts.case import BenchCase as BenchCase
from evo.contracts.case import Case as Case
from evo.contracts.case import CaseData as CaseData
from evo.contracts.case import Size as Size
from evo.contracts.case import TaskError as TaskError
from evo.contracts.case import Tensor as Tensor
from evo.contracts.case import Tolerance as Tolerance
from evo.contracts.case import bench_case_from as bench_case_from
from evo.contracts.case import default_tolerance as default_tolerance
from evo.contracts.case import one_line as one_line
from evo.contracts.case import size_key as size_key
from evo.contracts.odd_sizes import odd_size
from evo.contracts.special_values import is_special, special_draw

# the rules that pick a full check's cases beyond the check sizes (`evo.contracts.check_cases`): part of the
# task key, so that verdicts cached under other rules are not taken for this check's
CHECK_RULES = "bench-shaped cases of at most 2^20 elements; special values zeros,ties,tiny,huge,inf_nan: v1"


class Task(ABC):
    """A computation a candidate must reproduce. Subclasses supply `_draw`."""

    name: str
    dtype: str
    check_sizes: list[Size]
    bench_sizes: list[Size]
    dists: tuple[str, ...]
    tolerances: dict[str, Tolerance]
    seed_source: str | None
    tolerance_override: Tolerance | None = None
    # fitness over several bench sizes: weight by size (`size_key`); see `fitness_sizes`
    bench_weights: dict[str, float] | None = None
    # the named shape list the bench sizes come from (`evo.contracts.workload`), if any
    workload: str | None = None
    # `bench_fingerprint` of the task's own bench sizes and weights (None: it has none of its own)
    default_bench: str | None = None
    # whether `_reference_on` recomputes the reference on given inputs (needed for special values)
    recomputes_reference = False

    def __init__(self) -> None:
        self._cache: dict[Case, CaseData] = {}
        self._buffers: dict[str, tuple[int, int]] = {}
        # special value distributions (`evo.contracts.special_values`) the task is not checked on, and why
        self.dist_opt_out: dict[str, str] = {}

    def fitness_sizes(self) -> list[tuple[int, float]]:
        """(index into `bench_sizes`, weight) of every size the fitness covers: each bench size that has a
        weight (`bench_weights`), whose latencies combine as a weighted geometric mean; without weights
        (or none for the present bench sizes), the first bench size alone, as a plain latency."""
        weights = self.bench_weights or {}
        weighted = [(i, float(weights[size_key(s)])) for i, s in enumerate(self.bench_sizes) if size_key(s) in weights]
        return weighted or ([(0, 1.0)] if self.bench_sizes else [])

    def set_bench_weights(self, weights: list[float] | None) -> None:
        """Weights for `bench_sizes`, in their order (None: fitness at the first bench size only)."""
        if weights is None:
            self.bench_weights = None
            return
        if len(weights) != len(self.bench_sizes):
            raise TaskError(f"task {self.name}: {len(weights)} bench weights for {len(self.bench_sizes)} bench sizes")
        if not all(isinstance(w, (int, float)) and w > 0 and math.isfinite(w) for w in weights):
            raise TaskError(f"task {self.name}: bench weights must be positive numbers, not {weights}")
        self.bench_weights = {size_key(s): float(w) for s, w in zip(self.bench_sizes, weights)}

    def bench_fingerprint(self) -> str:
        """A short hash of where the fitness is measured: the weighted bench sizes."""
        sizes = [(self.bench_sizes[i], w) for i, w in self.fitness_sizes()]
        return hashlib.sha256(json.dumps(sizes, sort_keys=True).encode()).hexdigest()[:10]

    @property
    def bench_tag(self) -> str:
        """'' when the fitness is measured at the task's own bench sizes and weights; else the workload
        (``workload-NAME``) or ``sizes-HASH``: results (a cached sweep) compare only under one tag."""
        fingerprint = self.bench_fingerprint()
        if fingerprint == self.default_bench:
            return ""
        return f"workload-{self.workload}" if self.workload else f"sizes-{fingerprint}"

    @property
    def tolerance(self) -> Tolerance:
        return self.tolerance_for(self.dtype)

    @abstractmethod
    def definition_text(self) -> str:
        """The text that defines the task (reference source), for the key and for prompts."""

    @abstractmethod
    def _draw(self, size: Size, seed: int, dist: str) -> tuple[list[Tensor], list[np.ndarray]]:
        """Inputs (rounded to the candidate's dtypes) and float64/int expected outputs."""

    def flops(self, size: Size) -> float | None:
        return None

    def bytes_moved(self, size: Size) -> float | None:
        return None

    @property
    def key(self) -> str:
        """Content hash of everything that defines what a correct candidate computes."""
        h = hashlib.sha256()
        for part in (
            self.definition_text(),
            self.dtype,
            json.dumps(self.check_sizes, sort_keys=True),
            json.dumps(sorted((k, v.atol, v.rtol) for k, v in self.tolerances.items())),
            repr(self.tolerance_override),
            ",".join(self.dists),
            CHECK_RULES,
            json.dumps(self.dist_opt_out, sort_keys=True),
        ):
            h.update(part.encode())
            h.update(b"\0")
        return f"{self.name}-{h.hexdigest()[:12]}"

    def cases(self, sizes: list[Size] | None = None, *, draws: int, every_dist: bool = True) -> list[Case]:
        """Check cases: per size, `draws` input draws cycling through the distributions.

        With `every_dist` (the default, and what every full check uses) there are at least as many
        draws as distributions, so `draws: 1` in a config cannot skip the inputs a distribution
        exists for (softmax's large logits); only the cheap check inside a STOKE chain opts out.
        """
        n = max(draws, 1)
        if every_dist:
            n = max(n, len(self.dists))
        out = []
        for size in self.check_sizes if sizes is None else sizes:
            skey = size_key(size)
            for k in range(n):
                digest = hashlib.sha256(f"{self.name}|{skey}|{k}".encode()).digest()
                seed = int.from_bytes(digest[:4], "little")
                out.append(Case(skey, k, seed, self.dists[k % len(self.dists)]))
        return out

    def bench_cases(self, secret: int) -> list[Case]:
        """One case per bench size, drawn like the check's (a distribution among the task's), from a
        seed derived from `secret`: what bench-size verification compares, unpredictable by a kernel."""
        out = []
        for size in self.bench_sizes:
            skey = size_key(size)
            digest = hashlib.sha256(f"{self.name}|bench|{skey}|{secret}".encode()).digest()
            seed = int.from_bytes(digest[:4], "little")
            out.append(Case(skey, 0, seed, self.dists[digest[4] % len(self.dists)]))
        return out

    def every_dist(self, cases: list[Case]) -> list[Case]:
        """`cases` (`bench_cases`, `odd_cases`), each followed by a draw of its size under each of the task's
        other distributions (seeds derived from its own): what verification compares. One distribution can
        leave most elements below the tolerance (a peaked softmax's near-zero values, which a wrong element
        hides among); the others compare them."""
        out: list[Case] = []
        for case in cases:
            out.append(case)
            others = [d for d in self.dists if d != case.dist]
            out += [Case(case.size_json, k, (case.seed + 7919 * k) & 0xFFFFFFFF, d) for k, d in enumerate(others, 1)]
        return out

    def odd_cases(self, secret: int) -> list[Case]:
        """One case per bench size at a size between the check sizes and it (`evo.contracts.odd_sizes`),
        drawn from a seed derived from `secret`; none for a bench size no larger than the check sizes."""
        out: list[Case] = []
        known = {size_key(s) for s in [*self.check_sizes, *self.bench_sizes]}
        for size in self.bench_sizes:
            digest = hashlib.sha256(f"{self.name}|odd|{size_key(size)}|{secret}".encode()).digest()
            seed = int.from_bytes(digest[:8], "little")
            odd = odd_size(self.check_sizes, size, random.Random(seed))
            if odd is None or size_key(odd) in known:
                continue
            known.add(size_key(odd))
            out.append(Case(size_key(odd), 0, seed & 0xFFFFFFFF, self.dists[digest[8] % len(self.dists)]))
        return out

    def case_data(self, case: Case) -> CaseData:
        """Inputs and expected outputs of a case, computed once per task object."""
        if case not in self._cache:
            note = ""
            if is_special(case.dist) and case.dist not in self.dists:
                inputs, expected, note = self._special_draw(case.size, case.seed, case.dist)
            else:
                inputs, expected = self._draw(case.size, case.seed, case.dist)
            out_dtypes = [self.output_dtype(e) for e in expected]
            shapes = [tuple(e.shape) for e in expected]
            self._cache[case] = CaseData(case, inputs, expected, out_dtypes, shapes, note)
        return self._cache[case]

    def _reference_on(self, size: Size, seed: int, inputs: list[Tensor]) -> list[np.ndarray]:
        """The expected outputs on `inputs` (those of a draw at `size` from `seed`, values changed)."""
        raise NotImplementedError(f"task {self.name} cannot recompute its reference on given inputs")

    def _special_draw(self, size: Size, seed: int, dist: str) -> tuple[list[Tensor], list[np.ndarray], str]:
        """A draw of the first distribution turned into special values (`evo.contracts.special_values`)."""
        inputs, base = self._draw(size, seed, self.dists[0])

        def tensors(values: list[np.ndarray | None]) -> list[Tensor]:
            return [t if v is None else Tensor(np.ascontiguousarray(dtypes.cast(v, t.dtype)), t.dtype)
                    for t, v in zip(inputs, values)]

        def reference(values: list[np.ndarray | None]) -> list[np.ndarray] | None:
            try:
                with np.errstate(all="ignore"):  # inf - inf is NaN, as the special values intend
                    return [np.asarray(e) for e in self._reference_on(size, seed, tensors(values))]
            except Exception:  # the reference refuses such values: the case keeps its plain draw
                return None

        out_dtypes = [self.output_dtype(e) for e in base]
        values, expected, note = special_draw(
            dist, [dtypes.to_float64(t.data, t.dtype) if dtypes.is_float(t.dtype) else None for t in inputs], base,
            reference, seed=seed, dtype=self.dtype, out_dtypes=out_dtypes,
            atols=[self.tolerance_for(d).atol for d in out_dtypes])
        return tensors(values), expected, note

    def buffer_sizes(self, size: Size) -> tuple[int, int]:
        """Elements and bytes of all inputs and outputs of a case at `size` (shapes only: no reference run
        where the task can avoid one)."""
        key = size_key(size)
        if key not in self._buffers:
            bench = self.bench_case(size, data=False)
            shapes = [*zip(bench.input_shapes, (t.dtype for t in bench.inputs)),
                      *zip(bench.output_shapes, bench.output_dtypes)]
            counts = [(math.prod(s), math.prod(s) * dtypes.itemsize(d)) for s, d in shapes]
            self._buffers[key] = (sum(c for c, _ in counts), sum(b for _, b in counts))
        return self._buffers[key]

    def bench_case(self, size: Size, *, data: bool = True, draw: Case | None = None) -> BenchCase:
        """Inputs at `size` and the output layout: those of `draw` (one of `bench_cases`) when given,
        else of a fixed draw (first distribution).

        This default draws a whole case, reference included; subclasses override it with
        something cheaper where they can (the reference at bench sizes can be slow).
        """
        seed, dist = (draw.seed, draw.dist) if draw is not None else (self._bench_seed(size), self.dists[0])
        inputs, expected = self._draw(size, seed, dist)
        return bench_case_from(size, inputs, [self.output_dtype(e) for e in expected],
                           [tuple(e.shape) for e in expected], data)

    def _bench_seed(self, size: Size) -> int:
        digest = hashlib.sha256(f"{self.name}|bench|{size_key(size)}".encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def output_dtype(self, expected: np.ndarray) -> str:
        """Float outputs are in the task dtype; integer and bool outputs keep theirs."""
        if np.issubdtype(expected.dtype, np.floating):
            return self.dtype
        return dtypes.numpy_name(expected.dtype)

    def tolerance_for(self, dtype: str) -> Tolerance:
        if not dtypes.is_float(dtype):
            return EXACT
        if self.tolerance_override is not None:
            return self.tolerance_override
        return self.tolerances.get(dtype, default_tolerance(dtype))

    def describe(self) -> str:
        return (
            f"task {self.name}: dtype {self.dtype}, check sizes {self.check_sizes}, "
            f"bench sizes {self.bench_sizes}"
        )
