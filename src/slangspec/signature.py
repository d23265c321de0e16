"""Composed signatures: the only place that knows the signature format.

A signature says everything about an argument that can change the specialized kernel, and
nothing that cannot. Forms, by argument kind:

- torch tensor: ``[Dn,Sm,Gk,V...]``. ``n`` is the rank; ``m`` torch's ScalarType number
  (float16=5, float32=6, float64=7, int32=3, int64=4, bool=11, bfloat16=15); ``k`` is 1 iff the
  tensor requires grad *and* grad mode is enabled; the ``V`` run has one character per
  dimension: the extent when it is 1-4, else ``x`` (0 and above 4). Every fixed-width field
  precedes the variable-length ``V`` run, which is always last. Rank 0 is ``[D0,S6,G0,V]``.
- numpy array: ``np[Dn,Sm,G0,V...]``, the tensor form of ``torch.from_numpy(array)``.
- Python scalars: ``f`` (float), ``i`` (int), ``b`` (bool). Values never enter signatures.
- ``slangspec.grid(shape)``: ``grid[Dn]`` with ``n`` the number of grid dimensions.

A call signature is ``"<function> <mode> <arg> <arg> ..."``, space separated: the function's
identity (``module::function``), the call mode (``call``: a kernel call whose forward kernel
and per-grad-mask backward kernels are specialized from the argument signatures) and one
signature per argument. No form contains a space, so the string splits back unambiguously.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

SIGNATURE_FORMAT = 1
"""Bumped whenever any form above changes, so old cache entries are never served."""

CALL_MODE = "call"

SCALAR_TYPE_NUMBERS: dict[torch.dtype, int] = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.bfloat16: 15,
}
DTYPES_BY_NUMBER: dict[int, torch.dtype] = {v: k for k, v in SCALAR_TYPE_NUMBERS.items()}

_EXTENT_CHARS = ("x", "1", "2", "3", "4")


@dataclass(frozen=True)
class grid:
    """A per-call index source: the call runs once per point of ``shape``."""

    shape: tuple[int, ...]

    def __init__(self, shape: int | Sequence[int]) -> None:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not dims or not all(isinstance(d, int) and d >= 0 for d in dims):
            raise ValueError(f"grid shape must be one or more non-negative ints, got {shape!r}")
        object.__setattr__(self, "shape", dims)


def _v_run(shape: Sequence[int]) -> str:
    return "".join(_EXTENT_CHARS[d] if d <= 4 else "x" for d in shape)


_tensor_cache: dict[tuple[torch.Size, torch.dtype, bool], str] = {}


def tensor_signature(t: torch.Tensor) -> str:
    """``[Dn,Sm,Gk,V...]`` of a torch tensor; memoized because it sits on the hot path."""
    grad = t.requires_grad and torch.is_grad_enabled()
    key = (t.shape, t.dtype, grad)
    sig = _tensor_cache.get(key)
    if sig is None:
        number = SCALAR_TYPE_NUMBERS.get(t.dtype)
        if number is None:
            raise TypeError(f"unsupported tensor dtype {t.dtype}")
        sig = f"[D{t.dim()},S{number},G{int(grad)},V{_v_run(t.shape)}]"
        if len(_tensor_cache) < 4096:
            _tensor_cache[key] = sig
    return sig


def signature(value: Any) -> str:
    """The composed signature of one argument value, in the forms the module docstring lists."""
    if isinstance(value, torch.Tensor):
        return tensor_signature(value)
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, grid):
        return f"grid[D{len(value.shape)}]"
    if isinstance(value, np.ndarray):
        with torch.no_grad():
            return "np" + tensor_signature(torch.from_numpy(value))
    raise TypeError(
        f"cannot pass a value of type {type(value).__name__}; expected a torch tensor, numpy "
        "array, Python float/int/bool or slangspec.grid"
    )


def call_signature(function_id: str, args: Sequence[Any], mode: str = CALL_MODE) -> str:
    """The call signature: function identity, call mode, then one signature per argument."""
    return " ".join((function_id, mode, *map(signature, args)))


@dataclass(frozen=True)
class TensorForm:
    """A parsed tensor signature."""

    rank: int
    dtype: torch.dtype
    grad: bool
    extents: str
    numpy: bool = False


@dataclass(frozen=True)
class ScalarForm:
    """A parsed Python-scalar signature."""

    kind: str  # "f", "i" or "b"


@dataclass(frozen=True)
class GridForm:
    """A parsed grid signature."""

    rank: int


ArgForm = TensorForm | ScalarForm | GridForm

_TENSOR_RE = re.compile(r"(np)?\[D(\d+),S(\d+),G([01]),V([x1-4]*)\]")
_GRID_RE = re.compile(r"grid\[D(\d+)\]")


def parse_arg(text: str) -> ArgForm:
    """Parse one argument signature; raises ValueError naming what is malformed."""
    if text in ("f", "i", "b"):
        return ScalarForm(text)
    m = _GRID_RE.fullmatch(text)
    if m:
        return GridForm(int(m.group(1)))
    m = _TENSOR_RE.fullmatch(text)
    if not m:
        raise ValueError(f"malformed argument signature {text!r}")
    rank, number, extents = int(m.group(2)), int(m.group(3)), m.group(5)
    if len(extents) != rank:
        raise ValueError(f"argument signature {text!r}: rank {rank} but {len(extents)} extents")
    dtype = DTYPES_BY_NUMBER.get(number)
    if dtype is None:
        raise ValueError(f"argument signature {text!r}: unknown scalar type number {number}")
    return TensorForm(rank, dtype, m.group(4) == "1", extents, numpy=bool(m.group(1)))


@dataclass(frozen=True)
class CallSignature:
    """A parsed call signature."""

    function_id: str
    mode: str
    args: tuple[ArgForm, ...]
    text: str


def parse_call_signature(text: str) -> CallSignature:
    """Parse a call signature string back into its parts."""
    parts = text.split(" ")
    if len(parts) < 2 or "::" not in parts[0]:
        raise ValueError(
            f"malformed call signature {text!r}; expected '<module>::<function> <mode> <arg>...'"
        )
    if parts[1] != CALL_MODE:
        raise ValueError(f"call signature {text!r}: unknown call mode {parts[1]!r}")
    return CallSignature(parts[0], parts[1], tuple(parse_arg(p) for p in parts[2:]), text)
