"""libdevice in the Triton interpreter, computed with numpy.

``triton.language.extra.libdevice`` is a module of stubs (``def erf(arg0): ...``) that the GPU compiler
replaces with the backend's library calls; the interpreter does not, so every call returned ``None``
and a kernel using ``libdevice.erf`` or ``libdevice.tanh`` (the usual way to write GELU) failed on the
CPU with "unsupported operand type(s) for +: 'float' and 'NoneType'", though it compiles and runs on a
GPU. `install` puts numpy versions of libdevice's float math in place of the stubs (in the interpreter
worker only: a GPU worker keeps the stubs the compiler needs).

Each takes float32 or float64 blocks or scalars and returns the same type, as the GPU's ``__nv_erff`` /
``__nv_erf`` do; a float16 or bfloat16 argument is refused as the GPU compiler refuses it (convert with
``.to(tl.float32)`` first). Values are computed in float64 and rounded to the argument's type, so they
are at least as exact as libdevice's (a few ulp). The ``fast_*`` approximations take float32 only, as
on the GPU; ``fast_tanhf`` (PTX ``tanh.approx.f32``, relative error up to 2^-11, far outside a float32
tolerance) has its result cut to 11 mantissa bits, so a kernel checked here is no more exact than on the
GPU (as TF32 dots are, `fitness.sandbox.interp_compat`); the others are computed exactly, within a few
ulp of the GPU's inside their ranges (``fast_sinf``/``fast_cosf``/``fast_tanf`` lose accuracy on the GPU
far outside [-pi, pi], which this does not reproduce). A libdevice function not listed here (integer
bit tricks, Bessel functions, directed roundings) raises an error that names it instead of returning
``None``.

Calls go through the interpreter's builder, so the latency model's recorder sees them: those with a
builder op of their own (exp, log, sqrt, rsqrt, sin, cos, erf, floor, ...) as that op, the same cost as
the Triton op; the others (tanh, pow, atan2, ...) as one element-wise operation each, an under-count
where the GPU spends several special-function instructions (the model has no libdevice costs yet).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fitness.sandbox.float_bits import keep_mantissa_bits

_MARK = "_evo_libdevice"
_SQRT2 = math.sqrt(2.0)
STUBS = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")

Array = np.ndarray


def _elementwise(f: Callable[..., float]) -> Callable[..., Array]:
    vf = np.vectorize(f, otypes=[np.float64])
    return lambda *xs: np.asarray(vf(*xs))


def _gamma(v: float) -> float:
    try:
        return math.gamma(v)
    except (ValueError, OverflowError):
        return math.nan if v <= 0 and v == math.floor(v) else math.inf


def _lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):
        return math.inf


_erf = _elementwise(math.erf)
_erfc = _elementwise(math.erfc)


def _rsqrt(x: Array) -> Array:
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(x)


UNARY: dict[str, Callable[[Array], Array]] = {
    "abs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh,
    "cospi": lambda x: np.cos(np.pi * x), "erf": _erf, "erfc": _erfc, "exp": np.exp,
    "exp10": lambda x: np.power(10.0, x), "exp2": np.exp2, "expm1": np.expm1, "floor": np.floor,
    "lgamma": _elementwise(_lgamma), "log": np.log, "log10": np.log10, "log1p": np.log1p, "log2": np.log2,
    "nearbyint": np.rint, "normcdf": lambda x: 0.5 * _erfc(-x / _SQRT2), "rcbrt": lambda x: 1.0 / np.cbrt(x),
    "rint": np.rint, "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "rsqrt": _rsqrt,
    "rsqrt_rn": _rsqrt, "saturatef": lambda x: np.clip(x, 0.0, 1.0), "sin": np.sin, "sinh": np.sinh,
    "sinpi": lambda x: np.sin(np.pi * x), "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "tan": np.tan, "tanh": np.tanh,
    "tgamma": _elementwise(_gamma), "trunc": np.trunc,
    "fast_cosf": np.cos, "fast_exp10f": lambda x: np.power(10.0, x), "fast_expf": np.exp, "fast_log10f": np.log10,
    "fast_log2f": np.log2, "fast_logf": np.log, "fast_sinf": np.sin, "fast_tanf": np.tan, "fast_tanhf": np.tanh,
}
BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "atan2": np.arctan2, "copysign": np.copysign, "fdim": lambda x, y: np.maximum(x - y, 0.0), "fmod": np.fmod,
    "hypot": np.hypot, "pow": np.power, "fast_powf": np.power, "nextafter": np.nextafter,
    "remainder": _elementwise(math.remainder), "fast_dividef": np.divide, "div_rn": np.divide, "add_rn": np.add,
    "sub_rn": np.subtract, "mul_rn": np.multiply,
}
TERNARY: dict[str, Callable[[Array, Array, Array], Array]] = {
    "fma": lambda x, y, z: x * y + z, "fma_rn": lambda x, y, z: x * y + z,
}
PREDICATES: dict[str, Callable[[Array], Array]] = {  # int32 results, as libdevice's __nv_isnanf...
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite, "isfinited": np.isfinite,
}


class LibdeviceError(TypeError):
    pass


# libdevice functions the interpreter's builder already has an op for: called through it, so that the
# latency model counts them as it counts `tl.exp` and the like (a transcendental op, not a free one)
BUILDER_OPS = {
    "exp": "create_exp", "fast_expf": "create_exp", "exp2": "create_exp2", "log": "create_log",
    "fast_logf": "create_log", "log2": "create_log2", "fast_log2f": "create_log2", "sqrt": "create_sqrt",
    "sqrt_rn": "create_precise_sqrt", "rsqrt": "create_rsqrt", "rsqrt_rn": "create_rsqrt", "sin": "create_sin",
    "fast_sinf": "create_sin", "cos": "create_cos", "fast_cosf": "create_cos", "erf": "create_erf",
    "floor": "create_floor", "ceil": "create_ceil", "abs": "create_fabs",
}
# name -> (numpy function, number of arguments, int32 result)
FUNCTIONS: dict[str, tuple[Callable[..., Array], int, bool]] = {
    name: (f, arity, predicate)
    for table, arity, predicate in ((UNARY, 1, False), (BINARY, 2, False), (TERNARY, 3, False), (PREDICATES, 1, True))
    for name, f in table.items()
}
APPROX_BITS = {"fast_tanhf": 11}  # float32 mantissa bits the GPU's approximation keeps (of 23)


def _extern_elementwise(self: Any, name: str, *handles: Any) -> Any:
    """A builder op (`InterpreterBuilder.create_libdevice_elementwise`) that computes libdevice's `name` on
    the operands' data; through the builder, the latency model's recorder counts it (one element-wise op)
    and carries the operands' taint to the result."""
    from triton.runtime.interpreter import TensorHandle

    f, _, predicate = FUNCTIONS[name]
    datas = [np.asarray(h.data) for h in handles]
    with np.errstate(all="ignore"):
        out = np.asarray(f(*(d.astype(np.float64) for d in datas)))
    out = np.broadcast_to(out, np.broadcast_shapes(*(d.shape for d in datas)))
    if predicate:
        import triton.language as tl

        return TensorHandle(np.ascontiguousarray(out.astype(np.int32)), tl.int32)
    result = np.ascontiguousarray(out.astype(datas[0].dtype))
    if name in APPROX_BITS:
        result = keep_mantissa_bits(result, APPROX_BITS[name])
    return TensorHandle(result, handles[0].dtype.scalar)


def _call(name: str, args: tuple[Any, ...]) -> Any:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    items: list[Any] = []
    dtypes, block = set(), False
    for a in args:
        if isinstance(a, tl.constexpr):
            a = a.value
        if isinstance(a, tl.core.tensor):
            dtypes.add(a.dtype)
            block = block or a.type.is_block()
        elif not isinstance(a, (bool, int, float)):
            raise LibdeviceError(f"libdevice.{name} got {type(a).__name__}, not a tensor or a number")
        items.append(a)
    if len(dtypes) > 1:
        raise LibdeviceError(f"libdevice.{name} got values of different types ({', '.join(map(str, dtypes))}): "
                             "convert them to one type first, as the GPU compiler requires")
    dtype = dtypes.pop() if dtypes else tl.float32  # constants alone are float32 there too
    if name.startswith("fast_") and dtype != tl.float32:
        raise LibdeviceError(f"libdevice.{name} takes float32 values only (as on the GPU), not {dtype}")
    if dtype not in (tl.float32, tl.float64):
        raise LibdeviceError(f"libdevice.{name} takes float32 or float64 values, not {dtype}: convert with "
                             f".to(tl.float32) first (the GPU compiler has no {dtype} version either)")
    npt = np.float32 if dtype == tl.float32 else np.float64
    handles = [a.handle if isinstance(a, tl.core.tensor) else interp.TensorHandle(np.array([a], dtype=npt), dtype)
               for a in items]
    builder = interp.interpreter_builder
    op = BUILDER_OPS.get(name)
    if op is not None and hasattr(builder, op):
        out = getattr(builder, op)(handles[0])
    else:
        out = builder.create_libdevice_elementwise(name, *handles)
    rtype = tl.int32 if FUNCTIONS[name][2] else dtype
    shape = list(np.asarray(out.data).shape)
    return tl.core.tensor(out, tl.block_type(rtype, shape) if block else rtype)


def _function(name: str, arity: int) -> Callable[..., Any]:
    def libdevice_function(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("_semantic", None)
        if kwargs or len(args) != arity:
            raise LibdeviceError(f"libdevice.{name} takes {arity} positional argument(s)")
        return _call(name, args)

    libdevice_function.__name__ = name
    return libdevice_function


def _missing(name: str) -> Callable[..., Any]:
    def libdevice_function(*args: Any, **kwargs: Any) -> Any:
        raise LibdeviceError(f"libdevice.{name} is not available in the Triton interpreter (the CPU check), "
                             "only on a GPU; the float math functions are (erf, tanh, exp, pow, ...)")

    libdevice_function.__name__ = name
    return libdevice_function


def install() -> int:
    """Replace the libdevice stubs (both module spellings) with the numpy versions, and every other
    function of theirs with one that says it is missing; returns how many functions work. Idempotent."""
    import importlib

    from triton.runtime import interpreter as interp

    builder_class: Any = interp.InterpreterBuilder
    builder_class.create_libdevice_elementwise = _extern_elementwise
    for module_name in STUBS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if getattr(module, _MARK, False):
            continue
        for name in [n for n in dir(module) if not n.startswith("_")]:
            if callable(getattr(module, name)) and getattr(getattr(module, name), "__module__", "") in STUBS:
                setattr(module, name, _function(name, FUNCTIONS[name][1]) if name in FUNCTIONS else _missing(name))
        setattr(module, _MARK, True)
    return len(FUNCTIONS)
