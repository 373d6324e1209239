"""Special input values every task is checked on, as transformations of the task's own draw.

Tasks draw smooth values, and a kernel that takes a shortcut on a value no smooth draw produces (it
skips a row whose first element is exactly 0.0, returns early on a constant row, trusts two values never
to tie) passes every such draw, though zeros are what ReLU outputs and padding are made of. So each task
is also checked on its first distribution's draw transformed into one of:

``zeros``
    exact zeros of either sign: about a third of the elements, whole rows (a quarter of them; in a
    vector, a stretch at its end, like padding);
``ties``
    every value replaced by the nearest of 16 levels drawn from the values themselves, and a quarter
    of the rows constant. Levels keep 8 significant bits, so sums of a few thousand of them are exact
    in float32 and a constant row's mean is its value: an honest kernel gets the reference's result;
``tiny`` / ``huge``
    the draw scaled by a power of two (exact) to very small / very large magnitudes: about 2^-40 /
    2^40 for float32 and bfloat16, 2^-10 (partly subnormal) / 2^13 for float16, where products and
    squares still fit float32. Where the reference's outputs would not fit the output dtype (they
    overflow it, or shrink to where its rounding exceeds the tolerance), the exponent is halved until
    they do: the magnitudes are as extreme as the reference stays meaningful;
``inf_nan``
    +inf alone, -inf alone, NaN alone and a mix in a few rows of each float input, where the float64
    reference defines the result: it runs and leaves some output element that is not NaN (a result that
    is NaN everywhere checks nothing, and NaN conventions differ). Otherwise a single +inf in one input (the last
    float input first: a bias, a cache); otherwise the plain draw, which the verdict says.

``values=V1,V2,...;apart=D1,...`` (one per candidate, `fitness.check.data_values`)
    the values a kernel's code compares its data with, and their neighbours one step up and down in the
    task's dtype: each at sparse elements, and rows whose maximum, minimum or every element is one of them
    (a row reduced before the comparison); and the differences it compares two data values at, in every
    row: an element that far below the maximum, one above the minimum, neighbours that far apart. Values
    whose reference outputs would not fit their dtype are dropped, the largest first.

Only float inputs change; integer inputs (indices, lengths) and 0-d numbers keep their draw. A task
may opt out of one with a reason (``DIST_OPT_OUT`` in a native task module, ``task.dist_opt_out`` in a
config), which the verdict shows. Imports nothing of the project but `evo.contracts.dtypes`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evo.contracts import dtypes

SPECIAL_DISTS: tuple[str, ...] = ("zeros", "ties", "tiny", "huge", "inf_nan")
VALUES = "values="  # the prefix of a candidate's own distribution: the values its code compares data with
APART = ";apart="  # and the differences between two data values it compares
TURNS = 64  # a values case's seed modulo this: the row `_placed` makes that its first chosen row takes

# log2 of the largest input magnitude each scaling aims at, per dtype (see the module docstring)
_TINY_EXP = {"float16": -10}
_HUGE_EXP = {"float16": 13}
_WIDE_EXP = 40
_LEVELS = 16
_LEVEL_BITS = 8

Values = list[np.ndarray | None]  # float64 values of each input; None: not a float input (left as drawn)
Reference = Callable[[Values], list[np.ndarray] | None]  # expected outputs on given values; None: refused


def _rows(v: np.ndarray) -> np.ndarray:
    """`v` as (rows, last dimension): a view, so writes reach `v`."""
    return v.reshape(-1, v.shape[-1])


def _some(rng: np.random.Generator, n: int, fraction: float) -> np.ndarray:
    """Indices of about `fraction` of `n` items: at least one, and never all of them when n > 1."""
    k = min(max(1, round(n * fraction)), n - 1) if n > 1 else n
    return rng.choice(n, size=k, replace=False)


def _signed_zeros(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, 0.0, -0.0)


def _zeros(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = v.copy()
    sparse = rng.random(v.shape) < 1 / 3
    out[sparse] = _signed_zeros(rng, v.shape)[sparse]
    rows = _rows(out)
    if rows.shape[0] > 1:
        rows[_some(rng, rows.shape[0], 0.25)] = -0.0 if rng.random() < 0.5 else 0.0
    elif rows.shape[1] > 1:  # a vector: zeros at its end, as padding
        rows[0, rows.shape[1] - max(1, rows.shape[1] // 8):] = 0.0
    return out


def _short(x: np.ndarray) -> np.ndarray:
    """`x` rounded to `_LEVEL_BITS` significant bits."""
    mantissa, exponent = np.frexp(x)
    return np.ldexp(np.round(mantissa * 2**_LEVEL_BITS), exponent - _LEVEL_BITS)


def _ties(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    flat = v.reshape(-1)
    levels = np.unique(_short(flat[rng.integers(0, flat.size, _LEVELS)]))
    pos = np.clip(np.searchsorted(levels, flat), 1, max(levels.size - 1, 1))
    lo, hi = levels[pos - 1], levels[np.minimum(pos, levels.size - 1)]
    out = np.where(np.abs(flat - lo) <= np.abs(hi - flat), lo, hi).reshape(v.shape)
    rows = _rows(out)
    if rows.shape[0] > 1:
        for r in _some(rng, rows.shape[0], 0.25):
            rows[r] = levels[rng.integers(0, levels.size)]
    elif rows.shape[1] > 1:
        rows[0, rows.shape[1] // 2:] = levels[rng.integers(0, levels.size)]
    return out


def _scaled(v: np.ndarray, exp: int) -> np.ndarray:
    """`v` times a power of two that brings its largest magnitude to about 2^exp (exact in binary)."""
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if top == 0.0 or not np.isfinite(top):
        return v.copy()
    return np.ldexp(v, exp - int(np.ceil(np.log2(top))))


_NONFINITE = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf, "mixed": None}


def _nonfinite(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rows of one kind each, in a random order: NaN alone, +inf alone, -inf alone, and two values drawn
    from the three (at most 4 rows, never all of them). Each kind meets a kernel on its own: a softmax that
    handles +inf and not NaN gives NaN either way in a row that holds both, and with two random values per
    row a row held NaN without +inf a third of the time, so such a kernel passed whenever the draw was
    benign. An input of one row gets one kind, drawn."""
    out = v.copy()
    rows = _rows(out)
    n = rows.shape[0]
    picked = rng.choice(n, size=min(len(_NONFINITE), n - 1), replace=False) if n > 1 else np.array([0])
    for r, kind in zip(picked, rng.permutation(list(_NONFINITE))):
        cols = rng.choice(rows.shape[1], size=min(2, rows.shape[1]), replace=False)
        if _NONFINITE[str(kind)] is None:
            for c in cols:
                rows[r, c] = rng.choice([np.inf, -np.inf, np.nan])
        else:
            rows[r, cols[0]] = _NONFINITE[str(kind)]
    return out


@dataclass(frozen=True)
class Compared:
    """What a candidate's kernels compare their data with (`fitness.check.data_values`): input values, and
    differences between two input values (``x == tl.max(x, axis=0) - 1.0`` holds where an element is 1.0
    below its row's maximum)."""

    values: tuple[float, ...] = ()
    apart: tuple[float, ...] = ()
    unplaced: int = 0  # values and differences found past what the check places (`fitness.check.data_values`)

    def __bool__(self) -> bool:
        return bool(self.values or self.apart)


def values_dist(values: Sequence[float], apart: Sequence[float] = ()) -> str:
    """The distribution that places `values`, and pairs of elements `apart` from each other (exact: each
    number written as Python's repr reads back)."""
    text = VALUES + ",".join(repr(float(v)) for v in values)
    return text + (APART + ",".join(repr(float(d)) for d in apart) if apart else "")


def is_special(dist: str) -> bool:
    """Whether `dist` is a special distribution: one of `SPECIAL_DISTS` or a candidate's values."""
    return dist in SPECIAL_DISTS or dist.startswith(VALUES)


def _numbers(dist: str) -> tuple[list[float], list[float]]:
    """The values and the differences a `values_dist` places."""
    values, _, apart = dist[len(VALUES):].partition(APART)
    return [float(t) for t in values.split(",") if t], [float(d) for d in apart.split(",") if d]


def _rounded(x: float, dtype: str) -> float:
    with np.errstate(all="ignore"):
        return float(dtypes.to_float64(dtypes.cast(np.array([x]), dtype), dtype)[0])


def _neighbours(t: float, dtype: str) -> list[float]:
    """`t` rounded to `dtype` and the values one step below and above it there (finite ones only)."""
    with np.errstate(all="ignore"):
        r = _rounded(t, dtype)
        if not np.isfinite(r):
            return []
        if dtype == "bfloat16":
            step = abs(r) * 2.0**-7 or 2.0**-133
            near = [_rounded(r - step, dtype), r, _rounded(r + step, dtype)]
        else:
            kind = dtypes.storage_type(dtype).type
            near = [float(np.nextafter(kind(r), kind(-np.inf))), r, float(np.nextafter(kind(r), kind(np.inf)))]
    return [x for x in dict.fromkeys(near) if np.isfinite(x)]


# a row made of one value, or holding it alone among zeros (first: its sum, and what a sum picks out of the
# row, is the value), or holding it as its maximum, or its minimum
_EVERY, _ALONE, _TOP, _BOTTOM = 0, 1, 2, 3


def _patterns(plain: Sequence[float], near: Sequence[float]) -> list[tuple[float, int]]:
    """The rows `_placed` makes, in the order it makes them: the values the code writes as whole rows, alone
    among zeros (first), as maxima, as minima, then their neighbours (a vector's one row takes one of these
    per case)."""
    return [(t, p) for group in (plain, near) for p in (_EVERY, _ALONE, _TOP, _BOTTOM) for t in group]


def _placed(v: np.ndarray, targets: Sequence[float], patterns: Sequence[tuple[float, int]], apart: Sequence[float],
            rng: np.random.Generator, turn: int, kind: type[np.floating]) -> np.ndarray:
    """`v` holding each of `targets` at sparse elements, and half of its rows (never all; a vector's
    single row) each made after one of `patterns`, from the `turn`-th on; and in every row a few
    elements one of `apart` (d) below its maximum and above its minimum, and pairs of neighbours (0, d)
    and (d, 0). Differences are taken in `kind`, the type a kernel computes in, so that the kernel's own
    subtraction gives them exactly."""
    out = v.copy()
    flat = out.reshape(-1)
    if targets:
        picked = _some(rng, flat.size, 0.25) if flat.size > len(targets) else np.arange(flat.size)
        flat[picked] = np.resize(np.asarray(targets, dtype=np.float64), picked.size)
    rows = _rows(out)
    chosen = sorted(_some(rng, rows.shape[0], 0.5)) if rows.shape[0] > 1 else [0]
    alone: set[int] = set()
    for j, r in enumerate(chosen if patterns else []):
        t, pattern = patterns[(turn + j) % len(patterns)]  # case k's first row takes the k-th: none is skipped
        spread = np.abs(rows[r] - np.median(rows[r]))
        if pattern == _ALONE:  # its sum is t: no difference is placed in it
            rows[r] = 0.0
            rows[r, 0] = t
            alone.add(r)
            continue
        rows[r] = t if pattern == _EVERY else (t - spread if pattern == _TOP else t + spread)
        rows[r, rng.integers(0, rows.shape[1])] = t
    for r in range(rows.shape[0] if apart and rows.shape[1] >= 8 else 0):  # a few elements of every other row
        if r in alone:
            continue
        row, d = rows[r], kind(abs(apart[(turn + r) % len(apart)]))
        c, e = 2 * rng.choice(row.size // 2, size=2, replace=False)
        row[c], row[c + 1], row[e], row[e + 1] = 0.0, float(d), float(d), 0.0
        used = {int(c), int(c) + 1, int(e), int(e) + 1}
        for top, sign in ((True, -1), (False, 1)):  # never the element that is the maximum (minimum) itself
            at = int(np.argmax(row) if top else np.argmin(row))
            free = [i for i in range(row.size) if i not in used and i != at]
            i = int(rng.choice(free))
            row[i] = float(kind(kind(row[at]) + sign * d))
            used.add(i)
    return out


def _transformable(v: np.ndarray | None) -> bool:
    return v is not None and v.ndim > 0 and v.size > 0


def _one_inf(values: Values, index: int, rng: np.random.Generator) -> Values:
    """`values` with a single +inf in input `index`."""
    out = [None if v is None else v.copy() for v in values]
    target = out[index]
    assert target is not None
    target.reshape(-1)[rng.integers(0, target.size)] = np.inf
    return out


def transform(dist: str, values: Values, rng: np.random.Generator, *, exp: int = 0) -> Values:
    """`values` under the special distribution `dist` (`exp`: the scaling's exponent for tiny/huge)."""
    out: Values = []
    for v in values:
        if v is None or not _transformable(v):
            out.append(v)
            continue
        if dist == "zeros":
            out.append(_zeros(v, rng))
        elif dist == "ties":
            out.append(_ties(v, rng))
        elif dist in ("tiny", "huge"):
            out.append(_scaled(v, exp))
        elif dist == "inf_nan":
            out.append(_nonfinite(v, rng))
        else:
            raise ValueError(f"unknown special distribution {dist!r}; valid: {', '.join(SPECIAL_DISTS)}")
    return out


def _start_exp(dist: str, dtype: str) -> int:
    return _TINY_EXP.get(dtype, -_WIDE_EXP) if dist == "tiny" else _HUGE_EXP.get(dtype, _WIDE_EXP)


def _rms(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.sqrt(np.mean(np.square(finite)))) if finite.size else 0.0


def meaningful(dist: str, expected: Sequence[np.ndarray], base: Sequence[np.ndarray], out_dtypes: Sequence[str],
               atols: Sequence[float]) -> bool:
    """Whether the reference's float outputs under a scaling fit their dtypes: no overflow (room of 4x),
    and for tiny, no shrinking past where the dtype's smallest step outgrows the tolerance."""
    for got, was, dtype, atol in zip(expected, base, out_dtypes, atols):
        if not dtypes.is_float(dtype) or not np.issubdtype(got.dtype, np.floating):
            continue
        info = np.finfo(np.float32 if dtype == "bfloat16" else dtypes.storage_type(dtype))
        if np.any(np.isfinite(was) & ~np.isfinite(got)) or (got.size and np.nanmax(np.abs(got)) > float(info.max) / 4):
            return False
        floor = 16 * float(info.smallest_subnormal) / atol if atol > 0 else 0.0
        if dist == "tiny" and _rms(got) < min(_rms(was), floor):
            return False
    return True


def special_draw(dist: str, values: Values, base: list[np.ndarray], reference: Reference, *, seed: int,
                 dtype: str, out_dtypes: Sequence[str],
                 atols: Sequence[float]) -> tuple[Values, list[np.ndarray], str]:
    """The values of a case of special distribution `dist` made from a task's draw (`values`, with `base` its
    expected outputs), the reference's outputs on them (the module docstring says how magnitudes and
    infinities are chosen), and why the draw was left as it is where nothing meaningful was left ('' else)."""
    if dist in ("tiny", "huge"):
        exp = _start_exp(dist, dtype)
        while exp != 0:
            scaled = transform(dist, values, np.random.default_rng(seed), exp=exp)
            expected = reference(scaled)
            if expected is not None and meaningful(dist, expected, base, out_dtypes, atols):
                return scaled, expected, ""
            exp = int(exp / 2)
        return values, base, f"no {dist} magnitude leaves the reference's outputs within their dtype"
    if dist.startswith(VALUES):
        return _values_draw(dist, values, base, reference, seed=seed, dtype=dtype, out_dtypes=out_dtypes, atols=atols)
    if dist == "inf_nan":
        rng = np.random.default_rng(seed)
        tries = [transform(dist, values, rng)] + [  # then a single +inf in one input, the last first
            _one_inf(values, i, rng) for i in reversed(range(len(values))) if _transformable(values[i])]
        for marked in tries:
            expected = reference(marked)
            if expected is not None and _defined(expected):
                return marked, expected, ""
        return values, base, "the reference's outputs are NaN everywhere (or it refuses) on inputs holding inf or NaN"
    if dist not in SPECIAL_DISTS:
        raise ValueError(f"unknown special distribution {dist!r}; valid: {', '.join(SPECIAL_DISTS)}")
    changed = transform(dist, values, np.random.default_rng(seed))
    expected = reference(changed)
    if expected is None:
        return values, base, f"the reference refuses {dist} inputs"
    return changed, expected, ""


def _values_draw(dist: str, values: Values, base: list[np.ndarray], reference: Reference, *, seed: int, dtype: str,
                 out_dtypes: Sequence[str], atols: Sequence[float]) -> tuple[Values, list[np.ndarray], str]:
    """`special_draw` of a candidate's values (`values_dist`): the largest are dropped until the reference's
    outputs fit their dtypes."""
    wanted, apart = _numbers(dist)
    targets = sorted(dict.fromkeys(n for t in wanted for n in _neighbours(t, dtype)), key=abs)
    kind = np.float64 if dtype == "float64" else np.float32
    while targets or apart:
        rng = np.random.default_rng(seed)
        plain = [t for t in dict.fromkeys(_rounded(w, dtype) for w in wanted) if t in targets]
        patterns = _patterns(plain, [t for t in targets if t not in plain])
        placed: Values = [_placed(v, targets, patterns, apart, rng, seed % TURNS, kind)
                          if v is not None and _transformable(v) else v for v in values]
        expected = reference(placed)
        if expected is not None and meaningful("huge", expected, base, out_dtypes, atols):
            return placed, expected, ""
        if not targets:
            break
        targets = [t for t in targets if abs(t) < abs(targets[-1]) / 2]  # a factor of two at a time
    return values, base, "no value the code compares with leaves the reference's outputs within their dtype"


def opt_outs(raw: object, where: str) -> dict[str, str]:
    """A task's opt-outs ({distribution: reason}) checked: known special distributions, each with a reason."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must map special distributions to reasons, not be a {type(raw).__name__}")
    for name, why in raw.items():
        if name not in SPECIAL_DISTS:
            raise ValueError(f"{where}: no special distribution {name!r}; valid: {', '.join(SPECIAL_DISTS)}")
        if not isinstance(why, str) or not why.strip():
            raise ValueError(f"{where}: opting out of {name!r} needs a reason (a non-empty string)")
    return {str(k): str(v).strip() for k, v in raw.items()}


def _defined(expected: Sequence[np.ndarray]) -> bool:
    """Some element of the float outputs is not NaN (integer outputs count as defined)."""
    floats = [e for e in expected if np.issubdtype(e.dtype, np.floating)]
    return not floats or any(bool((~np.isnan(e)).any()) for e in floats)
