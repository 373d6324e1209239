"""KernelBench problem files, accepted as they are.

A problem file defines ``class Model(nn.Module)``, module-level size constants
(``batch_size = 16``), ``get_inputs()`` and ``get_init_inputs()``. A size dict from the config
overrides the constants it names *where they are assigned*, so constants derived from them later in
the file (``input_shape = (num_classes,)``) follow.

The reference is ``Model`` run in float64 on the CPU, in training mode by default, as KernelBench's own
harness runs it (it never calls ``eval()``): BatchNorm normalizes with the batch's statistics. The config's
``model_mode: eval`` runs ``Model.eval()`` instead (running statistics, Dropout off), for inference
semantics. A forward that is random (Dropout with ``p > 0`` in training mode, ``torch.randn`` in
``forward``) is refused with its way out: no kernel can reproduce torch's random draws; tensors the forward
makes itself are float64 like the rest. A model whose layers behave differently in the
two modes has its mode written under its source in `definition_text` (what the LLM reads; part of the
task's key). The candidate receives the forward inputs (float ones rounded to the task dtype; a number
among them, as 5_Matrix_scalar_multiplication's ``s = 3.14``, as a 0-d tensor of the task dtype, or
int64 for an int, which the reference gets back as the number), then ``Model.state_dict()`` tensors in
order, then the outputs. For checking, float parameters and buffers are redrawn at random: the contract
must hold for any weights, not only the default init of ones and zeros.

Value distributions of the float forward inputs: ``as_given`` (``get_inputs()``'s own), ``wide`` (4x
them) and ``ties`` (each value replaced by the nearest of 16 values of the same draw, so values repeat
along every axis while staying in the draw's range and sign: an argmax that returns the last of equal
maxima, where torch returns the first, or a sort that is not stable, differs from the reference only
where inputs tie, which continuous random draws never do). A problem whose source names an operation
that leaves the order of equal values unspecified (``sort``, ``topk``, ``median``, ...: the
reference's own indices would be one arbitrary choice) is not checked on ties: it opts out of ties, and of
the special value distribution of that name. One that names a max, min, arg-max or max-pool (`NAN_AMBIGUOUS`)
opts out of inf_nan: torch puts NaN first there, Triton's reductions skip it. The other special values
(`evo.contracts.special_values`: zeros, tiny, huge, inf_nan) transform every float input, forward inputs
and parameters alike; a config opts out of one with a reason (``task.dist_opt_out``).
"""

from __future__ import annotations

import ast
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from evo.contracts.special_values import opt_outs
from evo.contracts.syntax import parse_expression, parse_module
from evo.contracts.task import BenchCase, Case, Size, Task, TaskError, Tensor, bench_case_from, one_line, size_key

DISTS = ("as_given", "wide", "ties")
_WIDE = 4.0
_TIE_LEVELS = 16
# torch leaves the order among equal values to these (sort/argsort unless stable=True): no `ties` for them
TIE_AMBIGUOUS = frozenset({"sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode",
                           "unique", "unique_consecutive"})
# where NaN lands among these is torch's convention (NaN counts as the largest), not Triton's (its max and min
# ignore NaN): no inf_nan for them
NAN_AMBIGUOUS = frozenset({"argmax", "argmin", "max", "min", "amax", "amin", "cummax", "cummin", "MaxPool1d",
                           "MaxPool2d", "MaxPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
                           "max_pool1d", "max_pool2d", "max_pool3d"}) | TIE_AMBIGUOUS
MODES = ("train", "eval")


def _depends_on_mode(layer: Any) -> bool:
    """Whether a layer's forward differs between train and eval mode (known by class name, so a subclass or
    a Sync/Lazy variant counts too): a norm that tracks running statistics, a Dropout with p > 0, RReLU."""
    name = type(layer).__name__
    if "BatchNorm" in name or "InstanceNorm" in name:
        return bool(getattr(layer, "track_running_stats", False))
    if "Dropout" in name:
        return float(getattr(layer, "p", 1.0)) > 0
    return "RReLU" in name


def _literal(value: Any) -> ast.expr:
    if isinstance(value, list):
        value = tuple(value)
    return parse_expression(repr(value)).body


def _assigned_constants(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _override(tree: ast.Module, size: Size, path: Path) -> ast.Module:
    known = _assigned_constants(tree)
    unknown = [k for k in size if k not in known]
    if unknown:
        raise TaskError(
            f"size names {unknown} are not module-level constants of {path.name}; "
            f"its constants: {', '.join(known) or 'none'}"
        )
    body: list[ast.stmt] = []
    for node in tree.body:
        target: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id in size:
            stmt = ast.Assign(targets=[ast.Name(target.id, ast.Store())], value=_literal(size[target.id]))
            for n in ast.walk(stmt):  # the literal takes the replaced statement's position
                ast.copy_location(n, node)
            node = stmt
        body.append(node)
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))


def torch_dtype(name: str) -> Any:
    """The torch dtype of a dtype name of `evo.contracts.dtypes`."""
    import torch

    return {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
            "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}[name]


def _to_host(t: Any, float_dtype: str) -> Tensor:
    """A torch CPU tensor as the candidate will see it (floats rounded to the task dtype)."""
    import torch

    t = t.detach().cpu().contiguous()
    if t.is_floating_point():
        r = t.to(torch_dtype(float_dtype))
        if float_dtype == "bfloat16":
            return Tensor(r.view(torch.int16).numpy().view(np.uint16).copy(), "bfloat16")
        return Tensor(r.numpy().copy(), float_dtype)
    name = str(t.dtype).replace("torch.", "")
    return Tensor(t.numpy().copy(), name)


def as_float64(t: Tensor) -> Any:
    import torch

    from evo.contracts import dtypes

    if dtypes.is_float(t.dtype):
        return torch.from_numpy(dtypes.to_float64(t.data, t.dtype))
    return torch.from_numpy(t.data.copy())


def _tied(x: Any, gen: Any) -> Any:
    """`x` with each value replaced by the nearest of `_TIE_LEVELS` values drawn from `x` itself."""
    import torch

    flat = x.detach().reshape(-1)
    if flat.numel() < 2:
        return x
    picks = torch.randint(0, flat.numel(), (_TIE_LEVELS,), generator=gen)  # not a permutation: bench sizes
    levels = torch.sort(flat[picks]).values
    pos = torch.searchsorted(levels, flat.contiguous())
    lo, hi = levels[(pos - 1).clamp(min=0)], levels[pos.clamp(max=levels.numel() - 1)]
    return torch.where((flat - lo).abs() <= (hi - flat).abs(), lo, hi).reshape(x.shape)


def _redraw(t: Any, gen: Any) -> Any:
    """Random values of the same sign pattern class as the default init."""
    import torch

    orig = t.detach().double()
    if orig.numel() == 0:
        return orig
    if bool((orig == 0).all()):
        return torch.randn(orig.shape, generator=gen, dtype=torch.float64) * 0.5
    if bool((orig > 0).all()):
        scale = float(orig.mean())
        return scale * (0.5 + torch.rand(orig.shape, generator=gen, dtype=torch.float64))
    std = float(orig.std()) if orig.numel() > 1 else abs(float(orig.flatten()[0]))
    std = std if std > 0 else 0.5
    return torch.randn(orig.shape, generator=gen, dtype=torch.float64) * std + float(orig.mean())


# torch's global random generator and default dtype are process-wide: a reference's draws and forward
# hold this, so references drawn at once on threads of one process (`evo run --executor local`, one
# thread per evaluator) neither draw from each other's generator nor see each other's default dtype.
TORCH_STATE = threading.RLock()


@contextmanager
def float64_default() -> Iterator[None]:
    """torch's default dtype float64 meanwhile (the reference runs in float64, tensors its forward makes
    itself, as torch.eye(n), too), holding `TORCH_STATE`."""
    import torch

    with TORCH_STATE:
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            yield
        finally:
            torch.set_default_dtype(default)


class KernelBenchTask(Task):
    """A KernelBench problem file with check and bench sizes from the config."""

    recomputes_reference = True

    def __init__(
        self,
        path: str | Path,
        *,
        check_sizes: list[Size],
        bench_sizes: list[Size],
        dtype: str,
        seed_source: str | None = None,
        redraw_params: bool,
        mode: str = "train",
        dist_opt_out: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise TaskError(f"KernelBench file not found: {path}")
        self.source = self.path.read_text()
        try:
            self.tree = parse_module(self.source, str(self.path))
        except SyntaxError as e:
            raise TaskError(f"{self.path.name} line {e.lineno}: {e.msg}") from None
        defined = {n.name for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in defined]
        if missing:
            raise TaskError(f"{self.path.name} is not a KernelBench problem: it lacks {', '.join(missing)}")
        if mode not in MODES:
            raise TaskError(f"KernelBench model_mode must be one of {', '.join(MODES)}, got {mode!r}")
        if dtype not in ("float32", "float16", "bfloat16", "float64"):
            raise TaskError(f"KernelBench dtype must be a float type, got {dtype!r}")
        self.name = self.path.stem
        self.dtype = dtype
        self.check_sizes = check_sizes
        self.bench_sizes = bench_sizes
        for s in [*check_sizes, *bench_sizes]:
            _override(self.tree, s, self.path)  # fail early on unknown names
        names = {n.attr for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)} | {
            n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)}
        self.dists = DISTS if not names & TIE_AMBIGUOUS else tuple(d for d in DISTS if d != "ties")
        try:
            self.dist_opt_out = opt_outs(dist_opt_out, "task.dist_opt_out")
        except ValueError as e:
            raise TaskError(str(e)) from None
        if "ties" not in self.dists:
            ambiguous = ", ".join(sorted(names & TIE_AMBIGUOUS))
            self.dist_opt_out.setdefault("ties", f"the problem uses {ambiguous}, which leave the order of equal "
                                                 "values unspecified")
        if names & NAN_AMBIGUOUS:
            self.dist_opt_out.setdefault("inf_nan", f"the problem uses {', '.join(sorted(names & NAN_AMBIGUOUS))}: "
                                                    "where NaN lands is torch's convention, and Triton's max and min "
                                                    "ignore NaN")
        self.tolerances = {}
        self.seed_source = seed_source
        self.redraw_params = redraw_params
        self.mode = mode
        self._namespaces: dict[str, dict[str, Any]] = {}
        self._forward_checked = False
        # size key -> how many items get_inputs() returns there, and which of them are numbers
        self._layouts: dict[str, tuple[int, frozenset[int]]] = {}
        self._mode_layers: list[str] | None = None

    def definition_text(self) -> str:
        """The problem's source, and under it the mode the reference runs in where the model has layers
        that behave differently in the two modes."""
        layers = self.mode_layers()
        if not layers:
            return self.source
        how = ("training mode, as KernelBench's harness runs it: BatchNorm normalizes with the statistics of "
               "the batch it is given (its running_mean/running_var inputs are not used), Dropout layers are "
               "active" if self.mode == "train" else
               "eval mode (Model.eval()): BatchNorm normalizes with its running_mean/running_var, Dropout is off")
        return f"{self.source.rstrip()}\n\n# The reference runs Model in {how} (layers: {', '.join(layers)}).\n"

    def check_forward(self) -> None:
        """Run the reference once at the first check size: a forward that fails or is random is a
        `TaskError` here, when the task is loaded, not a verdict on every candidate later."""
        if not self.check_sizes or self._forward_checked:
            return
        import torch

        size = self.check_sizes[0]
        model, inputs = self.model_and_inputs(size, 0, self.dists[0])
        args = self.reference_args(inputs[: len(inputs) - len(model.state_dict())], size)
        with TORCH_STATE:
            torch.manual_seed(0)
            outs = self.reference_outputs(model, args, size)
            torch.manual_seed(0xF0A1)  # other random draws: a random forward gives other outputs
            again = self.reference_outputs(model, args, size)
        if any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(outs, again, strict=True)):
            raise TaskError(self._random_forward_message())
        self._forward_checked = True

    def mode_layers(self) -> list[str]:
        """Class names of the model's layers whose forward depends on train/eval mode (built on `meta`)."""
        if self._mode_layers is None:
            import torch

            ns = self.namespace(self.check_sizes[0] if self.check_sizes else {})
            try:
                with torch.device("meta"):
                    model = ns["Model"](*ns["get_init_inputs"]())
            except Exception as e:
                raise TaskError(f"{self.path.name}: building Model failed: {one_line(e)}") from e
            self._mode_layers = sorted({type(m).__name__ for m in model.modules() if _depends_on_mode(m)})
        return self._mode_layers

    def constants(self) -> list[str]:
        """The module-level names a size may override, in the file's order."""
        return _assigned_constants(self.tree)

    def namespace(self, size: Size) -> dict[str, Any]:
        """The problem module executed with `size` overriding its constants."""
        key = size_key(size)
        if key not in self._namespaces:
            code = compile(_override(self.tree, size, self.path), str(self.path), "exec")
            ns: dict[str, Any] = {"__name__": f"kernelbench_{self.name}"}
            try:
                exec(code, ns)
            except Exception as e:
                raise TaskError(f"{self.path.name} failed to run: {one_line(e)}") from e
            self._namespaces[key] = ns
        return self._namespaces[key]

    def model_and_inputs(
        self, size: Size, seed: int, dist: str, *, param_seed: int | None = None
    ) -> tuple[Any, list[Tensor]]:
        """The float64 model (with the rounded parameters) and the candidate's inputs."""
        import torch

        ns = self.namespace(size)
        gen = torch.Generator().manual_seed((seed if param_seed is None else param_seed) ^ 0x5EED)
        try:
            with TORCH_STATE:  # Model's init and get_inputs() draw from torch's global generator
                torch.manual_seed(seed)
                model = ns["Model"](*ns["get_init_inputs"]())
                forward = list(ns["get_inputs"]())
        except Exception as e:
            raise TaskError(f"{self.path.name}: building Model or inputs failed: {one_line(e)}") from e
        self._layout(size, forward)
        forward = [x if isinstance(x, torch.Tensor) else
                   torch.tensor(x, dtype=torch.float64 if isinstance(x, float) else torch.int64) for x in forward]
        if dist == "wide":
            forward = [x * _WIDE if x.is_floating_point() else x for x in forward]
        elif dist == "ties":
            tie_gen = torch.Generator().manual_seed(seed ^ 0x71E5)
            forward = [_tied(x, tie_gen) if x.is_floating_point() else x for x in forward]
        try:
            state = model.state_dict()
            do_redraw = self.redraw_params or param_seed is not None
            params: list[Tensor] = []
            for name, t in state.items():
                if t.is_floating_point() and do_redraw:
                    t = _redraw(t, gen)
                host = _to_host(t, self.dtype)
                params.append(host)
                state[name] = as_float64(host).reshape(t.shape) if t.is_floating_point() else t
            model = model.double()
            model.load_state_dict(state)
            model.train(self.mode == "train")
            return model, [_to_host(x, self.dtype) for x in forward] + params
        except Exception as e:  # out of memory at a size too large for this machine, mostly
            raise TaskError(f"{self.path.name}: preparing Model's parameters and inputs at size {size} failed: "
                            f"{one_line(e)}") from e

    def _scalar_positions(self, forward: list[Any]) -> frozenset[int]:
        """Which of get_inputs()'s items are numbers (they reach launch as 0-d tensors); anything but a
        tensor or a number is a `TaskError`."""
        import torch

        scalars = set()
        for i, x in enumerate(forward):
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                scalars.add(i)
            elif not isinstance(x, torch.Tensor):
                raise TaskError(f"{self.path.name}: get_inputs() item {i} is {type(x).__name__}, "
                                "not a tensor or a number")
        return frozenset(scalars)

    def _layout(self, size: Size, forward: list[Any] | None = None) -> tuple[int, frozenset[int]]:
        """How many items get_inputs() returns at `size` and which of them are numbers: from `forward`
        (items just drawn) the first time, else from a draw on the meta device (no data), else a real one."""
        key = size_key(size)
        if key not in self._layouts:
            if forward is None:
                import torch

                get_inputs = self.namespace(size)["get_inputs"]
                with TORCH_STATE:  # a real draw moves torch's global generator
                    try:
                        with torch.device("meta"):
                            forward = list(get_inputs())
                    except Exception:  # get_inputs() needs data (a .numpy(), a .item()): draw it for real
                        try:
                            forward = list(get_inputs())
                        except Exception as e:
                            raise TaskError(f"{self.path.name}: get_inputs() failed at size {size}: "
                                            f"{one_line(e)}") from e
            self._layouts[key] = (len(forward), self._scalar_positions(forward))
        return self._layouts[key]

    def reference_args(self, forward: list[Tensor], size: Size) -> list[Any]:
        """The candidate's forward inputs at `size` as the float64 reference takes them: tensors, and the
        numbers of get_inputs() as numbers again (an op may want a Python float, as `negative_slope` does)."""
        scalars = self._layout(size)[1]
        args: list[Any] = [as_float64(t) for t in forward]
        return [a.item() if i in scalars else a for i, a in enumerate(args)]

    def _draw(self, size: Size, seed: int, dist: str) -> tuple[list[Tensor], list[np.ndarray]]:
        model, inputs = self.model_and_inputs(size, seed, dist)
        n_forward = len(inputs) - len(model.state_dict())
        return inputs, self.reference_outputs(model, self.reference_args(inputs[:n_forward], size), size)

    def _reference_on(self, size: Size, seed: int, inputs: list[Tensor]) -> list[np.ndarray]:
        """The reference on `inputs`: Model built as for the draw from `seed`, its parameters those among
        `inputs` (after the forward inputs, in `state_dict()` order)."""
        import torch

        ns = self.namespace(size)
        with TORCH_STATE:  # Model's init draws from torch's global generator (buffers outside the state too)
            torch.manual_seed(seed)
            model = ns["Model"](*ns["get_init_inputs"]())
        state = model.state_dict()
        n_forward = len(inputs) - len(state)
        for (name, t), host in zip(list(state.items()), inputs[n_forward:]):
            state[name] = as_float64(host).reshape(t.shape) if t.is_floating_point() else t
        model = model.double()
        model.load_state_dict(state)
        model.train(self.mode == "train")
        return self.reference_outputs(model, self.reference_args(inputs[:n_forward], size), size)

    def reference_outputs(self, model: Any, args: list[Any], size: Size) -> list[np.ndarray]:
        """`model`'s outputs on `args` as the reference computes them (float64, tensors it makes too)."""
        import torch

        try:
            with float64_default(), torch.no_grad():
                out = model(*args)
        except Exception as e:
            raise TaskError(f"{self.path.name}: Model's forward ({self.mode} mode) failed at size {size}: "
                            f"{one_line(e)}") from e
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [o.detach().numpy().copy() for o in outs]

    def _random_forward_message(self) -> str:
        random_layers = [n for n in self.mode_layers() if "Dropout" in n or "RReLU" in n]
        if self.mode == "train" and random_layers:
            return (f"{self.path.name}: Model's forward is random in training mode (layers: "
                    f"{', '.join(random_layers)}): two runs on the same inputs differ, so no kernel can match it (a "
                    "Dropout with p > 0 draws a new mask each call). Set `model_mode: eval` in the config's task "
                    "section to check it with Dropout off (BatchNorm then uses its running statistics), or set the "
                    "Dropout's p to 0")
        return (f"{self.path.name}: Model's forward is random ({self.mode} mode): two runs on the same inputs "
                "differ, so no kernel can match it; it draws random numbers itself (torch.randn or the like in "
                "forward): draw them in get_inputs() and pass them in, or make the problem deterministic")

    def bench_case(self, size: Size, *, data: bool = True, draw: Case | None = None) -> BenchCase:
        """Inputs as for checking; output shapes from a forward pass on the meta device."""
        import torch

        seed, dist = (draw.seed, draw.dist) if draw is not None else (self._bench_seed(size), self.dists[0])
        model, inputs = self.model_and_inputs(size, seed, dist)
        n_forward = len(inputs) - len(model.state_dict())
        try:
            with torch.device("meta"):
                meta_model = self.namespace(size)["Model"](*self.namespace(size)["get_init_inputs"]()).double()
                meta_model.train(self.mode == "train")
                args = [torch.empty(t.shape, dtype=torch.float64 if t.dtype in ("float32", "float16", "bfloat16",
                                                                                 "float64") else torch_dtype(t.dtype))
                        for t in inputs[:n_forward]]
                given = self.reference_args(inputs[:n_forward], size)
                scalars = self._layout(size)[1]
                args = [given[i] if i in scalars else a for i, a in enumerate(args)]
                out = meta_model(*args)
        except Exception as e:
            raise TaskError(f"{self.path.name}: forward on the meta device failed: {one_line(e)}") from e
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return bench_case_from(
            size, inputs, [self.dtype if o.is_floating_point() else str(o.dtype).replace("torch.", "") for o in outs],
            [tuple(o.shape) for o in outs], data,
        )

    def forward_count(self, size: Size) -> int:
        """How many of the candidate's inputs are forward inputs (the rest are Model parameters)."""
        return self._layout(size)[0]

    def scalar_positions(self, size: Size) -> list[int]:
        """Which forward inputs are numbers that `launch` receives as 0-d tensors."""
        return sorted(self._layout(size)[1])

    def bytes_moved(self, size: Size) -> float | None:
        """Minimum traffic: every input, parameter and output once (shapes found on `meta`)."""
        found = self._meta_buffers(size)
        return float(found[1]) if found is not None else None

    def buffer_sizes(self, size: Size) -> tuple[int, int]:
        """Elements and bytes of every input, parameter and output, from shapes on `meta` where it runs
        (no draw at a bench size), else from a draw."""
        return self._meta_buffers(size) or super().buffer_sizes(size)

    def _meta_buffers(self, size: Size) -> tuple[int, int] | None:
        import torch

        from evo.contracts import dtypes

        ns = self.namespace(size)
        try:
            with torch.device("meta"):
                model = ns["Model"](*ns["get_init_inputs"]())
                forward = list(ns["get_inputs"]())
                out = model(*forward)
        except Exception:
            return None
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        item = dtypes.itemsize(self.dtype)
        tensors = [t for t in [*forward, *model.state_dict().values(), *outs] if isinstance(t, torch.Tensor)]
        total = sum(t.numel() * (item if t.is_floating_point() else t.element_size()) for t in tensors)
        return sum(t.numel() for t in tensors), total

    @property
    def key(self) -> str:
        base = super().key
        return f"{base}-{hashlib.sha256(str(self.redraw_params).encode()).hexdigest()[:4]}"
