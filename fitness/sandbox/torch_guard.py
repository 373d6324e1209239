"""Run-time enforcement of the candidate contract inside the worker.

While ``launch`` runs, every torch function or tensor method called *from candidate code* must be
metadata, a view, or an allocation. Candidate code is any code that is not torch's, triton's or the
project's own: the first caller frame outside torch and the standard library (which only passes
calls through) decides, so code created at run time (``exec``, ``eval``, annotations evaluated by
``typing``, filename ``<string>``) counts as the candidate's. Anything else (``x.softmax()``,
``x + 1``, ``sum(x)``, ``.tolist()``, ``.copy_()``) is torch computing on the data and raises
:class:`ForbiddenOperation`, whatever alias or ``getattr`` route the lint might have missed. Calls
made by Triton's own launcher are not candidate code.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from fitness.sandbox.device_queries import DEVICE_QUERIES
from fitness.sandbox.masked_poison import poison_of
from fitness.sandbox.provenance import Provenance

# nothing that tells which kind of device holds a tensor (is_cuda, get_device, a tensor's repr or format,
# which name it; data_ptr, whose alignment does): what ran in the CPU interpreter must be what runs on the
# GPU (`fitness.check.lint`)
METADATA = {
    "size", "stride", "dim", "numel", "nelement", "element_size", "is_contiguous",
    "storage_offset", "__len__", "__index__", "is_floating_point",
    "shape", "dtype", "device", "ndim", "layout", "requires_grad", "itemsize", "nbytes",
}
VIEWS = {"view", "unsqueeze", "squeeze", "permute", "transpose", "t", "T", "mT", "expand", "unflatten",
         "view_as", "reshape", "flatten", "as_strided", "expand_as", "movedim"}
ALLOCATIONS = {
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
    "empty_strided", "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided",
    "zero_", "fill_",
}
ALLOWED = METADATA | VIEWS | ALLOCATIONS
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
FILLS = {"zero_", "fill_"}  # write a view of memory that exists: no allocation
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = __file__
_PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TRUSTED = tuple(os.path.join(_PROJECT, p) + os.sep for p in ("fitness", "evo"))
_NEUTRAL = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}
                 | {sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")})


def _triton_dir() -> str:
    import triton

    return os.path.dirname(triton.__file__) + os.sep


def is_candidate_code(filename: str, triton_dir: str) -> bool:
    """Whether a frame of `filename` (not torch's, not the standard library's) is candidate code."""
    return not (filename.startswith(_TRUSTED) or filename.startswith(triton_dir))


def _neutral(filename: str) -> bool:
    """Frames that pass a call on and decide nothing: torch's, the guard's, the standard library's."""
    if filename == _THIS_FILE or filename.startswith(_TORCH_DIR) or filename.startswith("<frozen "):
        return True
    return filename.startswith(_NEUTRAL) and "-packages" + os.sep not in filename


class ForbiddenOperation(BaseException):
    """Candidate code asked torch to compute on data (BaseException: not caught by `except Exception`)."""


def _name(func: Callable[..., Any]) -> str:
    name = getattr(func, "__name__", repr(func))
    if name in ("__get__", "__set__"):
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return str(name)


def poison_storage(t: torch.Tensor, run: int) -> None:
    """Fill the whole storage of a fresh, uninitialized tensor `t` with the check's poison for `run`
    (`fitness.sandbox.masked_poison.poison_of`: NaN or a huge value, an extreme integer)."""
    if t.is_complex() or t.element_size() == 0:
        return
    floating = t.is_floating_point()
    info = torch.finfo(t.dtype) if floating else None if t.dtype == torch.bool else torch.iinfo(t.dtype)
    value = poison_of(run, floating=floating, info=info)
    storage = t.untyped_storage()
    flat = t.new_empty(0).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
    flat.fill_(value)


class CandidateGuard(TorchFunctionMode):
    """Active while candidate code runs; `filename` is the candidate module's file. With `poison_run` (a
    check run's index), memory the candidate allocates without contents (``torch.empty`` and kin) is
    filled with that run's poison: a host allocator often hands out fresh zeroed pages where a GPU's
    caching allocator hands back what the last kernel left, so a kernel that reads scratch it never wrote
    must fail the check, not only on the GPU. Timed and modelled runs are not poisoned (a fill costs).

    In a check run the guard is also told the harness (`inputs`, `outputs`: the views ``launch`` gets),
    and records in `provenance` every allocation and host fill candidate code makes: the sanitizer
    (`fitness.check.sanitizer`) refuses a kernel argument that is none of these and tracks which bytes
    of outputs and scratch were written before they are read."""

    def __init__(self, filename: str, poison_run: int | None = None, *, inputs: Sequence[Any] | None = None,
                 outputs: Sequence[Any] | None = None) -> None:
        super().__init__()
        self.filename = filename
        self.poison_run = poison_run
        self.triton_dir = _triton_dir()
        self.initialized: set[int] = set()  # storages the candidate allocated with contents (zeros, full...)
        self.filled_bytes: list[int] = []  # bytes each such allocation or fill (zero_, fill_) wrote: a memset each
        self.provenance = Provenance.of(inputs, outputs)

    def _caller_is_candidate(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            f = frame.f_code.co_filename
            if not _neutral(f):
                return is_candidate_code(f, self.triton_dir)
            frame = frame.f_back  # type: ignore[assignment]
        return False

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if self._caller_is_candidate():
            name = _name(func)
            if name in DEVICE_QUERIES:
                raise ForbiddenOperation(
                    f"launch asked torch '{name}', which tells which kind of device holds a tensor: a kernel "
                    "must do on the GPU what it was checked doing here"
                )
            if name not in ALLOWED:
                raise ForbiddenOperation(
                    f"launch called torch '{name}' on tensor data; candidates must compute with "
                    "Triton kernels (torch only allocates, views and queries metadata)"
                )
            result = func(*args, **kwargs)
            if name in VIEWS and isinstance(result, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                if result.untyped_storage().data_ptr() != args[0].untyped_storage().data_ptr():
                    raise ForbiddenOperation(f"torch '{name}' copied the data instead of viewing it")
            if name in ALLOCATIONS and isinstance(result, torch.Tensor):
                self._record(name, result)
            return result
        return func(*args, **kwargs)

    def _record(self, name: str, t: torch.Tensor) -> None:
        if name in UNINITIALIZED:
            if self.poison_run is not None:
                poison_storage(t, self.poison_run)
            self.provenance.allocated(name, t, initialized=False)
            return
        self.initialized.add(int(t.untyped_storage().data_ptr()))
        self.filled_bytes.append(int(t.numel()) * int(t.element_size()))
        if name in FILLS:
            self.provenance.filled(t)
        else:
            self.provenance.allocated(name, t, initialized=True)


def active_guard() -> CandidateGuard | None:
    """The innermost `CandidateGuard` in force (torch keeps the stack of active function modes)."""
    for mode in reversed(_get_current_function_mode_stack()):
        if isinstance(mode, CandidateGuard):
            return mode
    return None
