"""A CUDA specialization's forward call as one generated Python function.

The generic path (``Specialization``) builds the kernel's keyword arguments as dicts, which the
block's packer then reads back by name. Here every value the block packs is read straight from
the arguments: one function checks devices, allocates the output, packs the block and launches.
A call it does not handle (a tensor on another device, an empty or oversized call, a value a
parameter cannot hold) returns None before launching, and the generic path runs that call and
raises its errors.

The source holds only names made here and integers from the plan and the kernel's layout; a
layout read from the cache chooses among those, never adds to them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..cuda_api import P, check
from ..scalars import SLANG
from ..specializer.plan import WRITTEN, SpecializationPlan
from .cuda_driver import DriverKernel
from .launch import contiguous_strides
from .specialization import MAX_EXTENT

ForwardCall = Callable[[Sequence[Any]], "tuple[torch.Tensor | None, tuple[int, ...]] | None"]
"""``call(args)``: the output and the call shape, or None where the generic path must run."""


class _Values:
    """The Python expression of each block path, and what the function reads first to form it."""

    def __init__(self, plan: SpecializationPlan) -> None:
        self.plan = plan
        self.reads: dict[str, str] = {}

    def read(self, name: str, source: str) -> str:
        self.reads.setdefault(name, source)
        return name

    def of(self, path: tuple[str | int, ...]) -> str | None:
        """The expression packed at ``path``, or None for a path this does not know."""
        head, rest = path[0], path[1:]
        if head == "_n" and not rest:
            return "n"
        if head == "_shape" and len(rest) == 1 and isinstance(rest[0], int):
            return f"shape[{rest[0]}]"
        if head == "_out" and not rest and self.plan.returns is not None:
            return "out.data_ptr()"
        for i, a in enumerate(self.plan.args):
            if head == f"a{i}":
                return self._arg(i, a.kind, rest)
            if head == f"a{i}_st" and a.kind == "elementwise":
                return self._elementwise_stride(i, a.call_dims, rest)
        return None

    def _arg(self, i: int, kind: str, rest: tuple[str | int, ...]) -> str | None:
        if kind == "uniform" and not rest:
            return f"u{i}(t{i})"
        if kind == "elementwise" and not rest:
            return self.read(f"p{i}", f"t{i}.data_ptr()")
        if kind != "tensor" or not rest:
            return None
        field, index = rest[0], rest[1:]
        if field == "_data" and not index:
            return self.read(f"p{i}", f"t{i}.data_ptr()")
        if field == "_offset" and not index:
            return "0"
        if field in ("_shape", "_strides") and len(index) == 1 and isinstance(index[0], int):
            if field == "_shape":
                return f"{self.read(f's{i}', f't{i}.shape')}[{index[0]}]"
            return f"{self.read(f'st{i}', f't{i}.stride()')}[{index[0]}]"
        return None

    def _elementwise_stride(self, i: int, dims: int, rest: tuple[str | int, ...]) -> str | None:
        if len(rest) != 1 or not isinstance(rest[0], int):
            return None
        d = rest[0]
        strides = self.read(f"st{i}", f"t{i}.stride()")
        if d == dims:
            return f"{strides}[{d}]"
        if d > dims:
            return None
        shape = self.read(f"s{i}", f"t{i}.shape")
        return f"(0 if {shape}[{d}] == 1 else {strides}[{d}])"


def forward_call(
    plan: SpecializationPlan,
    kernel: DriverKernel,
    torch_device: torch.device,
    make_current: Callable[[], None],
    call_shape: Callable[[Sequence[Any]], tuple[int, ...]],
) -> ForwardCall | None:
    """The forward call of ``plan`` through ``kernel`` on ``torch_device``; ``make_current``
    makes its driver context current and ``call_shape`` broadcasts the arguments' call shapes.
    None when the plan or the layout holds what this does not generate."""
    args = plan.args
    if any(a.kind == "tensor" and a.binding in WRITTEN for a in args):
        return None
    values = _Values(plan)
    packed = [values.of(path) for path in kernel.block.paths]
    if None in packed:
        return None
    tensors = [i for i, a in enumerate(args) if a.kind in ("elementwise", "tensor")]
    parts = kernel.parts()
    names = [f"t{i}" for i in range(len(args))]
    body = [f"{', '.join(names)}, = args"]
    if tensors:
        body.append(f"if {' or '.join(f't{i}.device != dev' for i in tensors)}:")
        body.append("    return None")
    body.append("shape = call_shape(args)")
    body.append(f"n = {' * '.join(f'shape[{d}]' for d in range(plan.call_rank)) or '1'}")
    # Larger calls need the generic path's size check.
    body += ["if not 0 < n <= MAX:", "    return None"]
    namespace: dict[str, Any] = {
        "dev": torch_device,
        "call_shape": call_shape,
        "MAX": MAX_EXTENT,
        "strides": contiguous_strides,
        "empty": torch.empty_strided,
        "make_current": make_current,
        "raw_stream": torch._C._cuda_getCurrentRawStream,
        "index": torch_device.index,
        "P": P,
        "check": check,
        "pack_into": struct.Struct(kernel.block.format).pack_into,
        "buffer": parts.buffer,
        "lock": parts.lock,
        "launch": parts.launch,
        "function": parts.function,
        "extra": parts.extra,
        "G": parts.group,
        "BadValue": (struct.error, OverflowError, TypeError, ValueError),
    }
    for i, a in enumerate(args):
        if a.kind == "uniform":
            namespace[f"u{i}"] = SLANG[a.scalar].py_type
    r = plan.returns
    if r is None:
        body.append("out = None")
    else:
        namespace["dtype"] = getattr(torch, r.dtype)
        tail = f" + ({r.width},)" if r.width else ""
        body.append(f"oshape = shape{tail}")
        body.append("out = empty(oshape, strides(oshape), dtype=dtype, device=dev)")
    body += [f"{name} = {source}" for name, source in values.reads.items()]
    # After the output's allocation: torch's device guard may leave another context current.
    body += [
        "make_current()",
        "stream = P(raw_stream(index))",
        "with lock:",
        "    try:",
        f"        pack_into(buffer, 0, {', '.join(packed)})",
        "    except BadValue:",
        "        return None",
        "    result = launch(function, (n + G - 1) // G, 1, 1, G, 1, 1, 0, stream, None, extra)",
        "if result:",
        "    check(result, 'cuLaunchKernel')",
        "return out, shape",
    ]
    source = "def call(args):\n" + "".join(f"    {line}\n" for line in body)
    exec(source, namespace)
    return namespace["call"]
