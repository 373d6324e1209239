"""Known-good tile configs that an Optuna study tries first, where the parameter names match.

Names are matched through aliases (BLOCK_M, BLOCK_SIZE_M and BM are one thing); a config applies
to a candidate when every block size it sets has a counterpart among the candidate's params and
every value it sets lies in the candidate's SPACE (where SPACE lists that param). Entries it sets
that the candidate lacks (GROUP_M, num_stages) are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evo.contracts.candidate import Params, ParamValue

ALIASES: dict[str, tuple[str, ...]] = {
    "BLOCK_M": ("BLOCK_M", "BLOCK_SIZE_M", "BM"),
    "BLOCK_N": ("BLOCK_N", "BLOCK_SIZE_N", "BN"),
    "BLOCK_K": ("BLOCK_K", "BLOCK_SIZE_K", "BK"),
    "GROUP_M": ("GROUP_M", "GROUP_SIZE_M", "GM"),
    "BLOCK": ("BLOCK", "BLOCK_SIZE", "XBLOCK"),
    "num_warps": ("num_warps",),
    "num_stages": ("num_stages",),
}
BLOCK_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK")


def _mm(m: int, n: int, k: int, stages: int, warps: int, group: int | None = None) -> dict[str, int]:
    cfg = {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_stages": stages, "num_warps": warps}
    return cfg | ({"GROUP_M": group} if group else {})


# The CUDA autotune list of Triton's matrix multiplication tutorial (03-matrix-multiplication).
TRITON_TUTORIAL_MATMUL = [
    _mm(128, 256, 64, 3, 8, 8), _mm(64, 256, 32, 4, 4, 8), _mm(128, 128, 32, 4, 4, 8),
    _mm(128, 64, 32, 4, 4, 8), _mm(64, 128, 32, 4, 4, 8), _mm(128, 32, 32, 4, 4, 8),
    _mm(64, 32, 32, 5, 2, 8), _mm(32, 64, 32, 5, 2, 8),
]
# A selection in the style of TorchInductor's mm configs (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps).
INDUCTOR_MM = [
    _mm(64, 64, 32, 2, 4), _mm(64, 64, 64, 3, 8), _mm(64, 128, 32, 3, 4), _mm(128, 64, 32, 3, 4),
    _mm(128, 128, 32, 2, 8), _mm(128, 128, 64, 3, 4), _mm(32, 32, 128, 2, 4), _mm(64, 64, 16, 2, 4),
]
# Row-wise and element-wise kernels with one block size (Triton's softmax tutorial picks the
# whole row and 4 to 16 warps; pointwise kernels favour 1024 with 4 warps).
ONE_BLOCK = [
    {"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 2048, "num_warps": 8}, {"BLOCK": 4096, "num_warps": 8},
    {"BLOCK": 512, "num_warps": 4}, {"BLOCK": 4096, "num_warps": 16},
]
TABLES: tuple[Sequence[Mapping[str, int]], ...] = (TRITON_TUTORIAL_MATMUL, INDUCTOR_MM, ONE_BLOCK)


def _actual_name(canonical: str, params: Mapping[str, ParamValue]) -> str | None:
    return next((a for a in ALIASES.get(canonical, (canonical,)) if a in params), None)


def translate(config: Mapping[str, int], params: Mapping[str, ParamValue],
              space: Mapping[str, list[ParamValue]]) -> Params | None:
    """`config` in the candidate's names, merged over `params`; None when it does not apply."""
    out: Params = dict(params)
    for canonical, value in config.items():
        name = _actual_name(canonical, params)
        if name is None:
            if canonical in BLOCK_KEYS:
                return None
            continue
        if name in space and value not in space[name]:
            return None
        out[name] = value
    return out


def known_configs(params: Mapping[str, ParamValue], space: Mapping[str, list[ParamValue]]) -> list[Params]:
    """Applicable known-good configs, in table order, without duplicates."""
    found: list[Params] = []
    for table in TABLES:
        for config in table:
            p = translate(config, params, space)
            if p is not None and p not in found:
                found.append(p)
    return found
