"""A CUDA specialization's forward call, and its backward per grad mask, as generated Python
functions.

The generic path (``Specialization``) builds the kernel's keyword arguments as dicts, which the
block's packer then reads back by name. Here every value the block packs is read straight from
the arguments: one function allocates what the kernel writes, packs the block and launches. A
call it does not handle (a tensor on another device, an empty or oversized call, a value a
parameter cannot hold) is left to the generic path, which runs it and raises its errors.

A backward runs on torch's autograd thread, where every Python operation costs several times
what it does on the calling thread; its generated function also zeroes the whole-tensor
gradients itself and returns what autograd expects.

The source holds only names made here and integers from the plan and the kernel's layout; a
layout read from the cache chooses among those, never adds to them.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..codegen import parameter_names as names
from ..settings import setting
from ..specializer.kinds import KIND
from ..specializer.plan import SpecializationPlan
from .call_rows import uniform_value
from .cuda_api import P, check, driver
from .cuda_driver import DriverKernel, launch_failed
from .shapes import MAX_EXTENT, added_strides, contiguous_strides, gradient_copies

ForwardCall = Callable[[Sequence[Any]], "tuple[tuple[torch.Tensor, ...], tuple[int, ...]] | None"]
"""``call(args)``: the outputs (the result, if any) and the call shape, or None where the
generic path must run."""
BackwardCall = Callable[[Any, torch.Tensor], tuple["torch.Tensor | None", ...]]
"""``call(ctx, grad_out)``: what the autograd node's backward returns."""


class _Values:
    """The Python expression of each block path, and what the function reads first to form it;
    ``mask`` names the gradients of a backward kernel."""

    def __init__(self, plan: SpecializationPlan, mask: str | None = None) -> None:
        self.plan = plan
        self.mask = mask
        self.reads: dict[str, str] = {}

    def read(self, name: str, source: str) -> str:
        self.reads.setdefault(name, source)
        return name

    def of(self, path: tuple[str | int, ...]) -> str | None:
        """The expression packed at ``path``, or None for a path this does not know."""
        head, rest = path[0], path[1:]
        if head == names.THREADS and not rest:
            return "n"
        if head == names.CALL_SHAPE and _one_index(rest):
            return f"shape[{rest[0]}]"
        returns = self.mask is None and self.plan.returns is not None
        if head == names.output(0) and not rest and returns:
            return "out.data_ptr()"
        if self.mask is not None:
            if head == names.cotangent(0) and not rest:
                return self.read("pd", "dout.data_ptr()")
            if head == names.cotangent_strides(0) and _one_index(rest):
                return f"{self.read('std', 'dout.stride()')}[{rest[0]}]"
        for i, a in enumerate(self.plan.args):
            pointer = a.row.grad_binding == "pointer"
            if head == names.leaf(i):
                return self._arg(i, a.kind, rest)
            if head == names.leaf_strides(i) and pointer:
                return self._elementwise_stride(i, a.call_dims, rest)
            if head == names.gradient(i) and not rest and self._grad(i) and pointer:
                return f"g{i}.data_ptr()"
            added = head == names.gradient_strides(i) and self._grad(i) and pointer
            if added and _one_index(rest):
                return f"gst{i}[{rest[0]}]"
            if head == names.gradient_copy(i) and self._grad(i) and _one_index(rest):
                return f"gc{i}[{rest[0]}]"
        return None

    def _grad(self, i: int) -> bool:
        return self.mask is not None and self.mask[i] == "1"

    def _arg(self, i: int, kind: str, rest: tuple[str | int, ...]) -> str | None:
        if kind == "uniform" and not rest:
            return f"u{i}(t{i})"
        if kind == "uniform" and _one_index(rest):
            return f"{self.read(f'c{i}', f'u{i}(t{i})')}[{rest[0]}]"
        if kind == "elementwise" and not rest:
            return self.read(f"p{i}", f"t{i}.data_ptr()")
        if kind != "tensor" or not rest:
            return None
        if not self._grad(i):
            return self._whole(f"t{i}", i, rest)
        primal, gradient = KIND[self.plan.args[i].row.grad_binding].parts
        if rest[0] == primal:
            return self._whole(f"t{i}", i, rest[1:])
        if rest[0] == gradient:
            return self._whole(f"g{i}", i, rest[1:])
        return None

    def _whole(self, tensor: str, i: int, rest: tuple[str | int, ...]) -> str | None:
        """A field of the tensor struct of ``tensor``: argument ``i`` or its gradient, which
        has its shape and row-major strides."""
        if not rest:
            return None
        field, index = rest[0], rest[1:]
        if field == "_data" and not index:
            return self.read(f"p{tensor}", f"{tensor}.data_ptr()")
        if field == "_offset" and not index:
            return "0"
        if field == "_shape" and _one_index(index):
            return f"{self.read(f's{i}', f't{i}.shape')}[{index[0]}]"
        if field == "_strides" and _one_index(index):
            if tensor == f"t{i}":
                return f"{self.read(f'st{i}', f't{i}.stride()')}[{index[0]}]"
            shape = self.read(f"s{i}", f"t{i}.shape")
            return f"{self.read(f'gst{i}', f'strides({shape})')}[{index[0]}]"
        return None

    def _elementwise_stride(self, i: int, dims: int, rest: tuple[str | int, ...]) -> str | None:
        if not _one_index(rest):
            return None
        d = rest[0]
        strides = self.read(f"st{i}", f"t{i}.stride()")
        if d >= dims:
            return f"{strides}[{d}]"
        shape = self.read(f"s{i}", f"t{i}.shape")
        return f"(0 if {shape}[{d}] == 1 else {strides}[{d}])"


def _simple(plan: SpecializationPlan) -> bool:
    """Whether the plan's calls are what these functions generate: no tensor the call writes
    (an ``RWTensor``, an ``out`` or ``inout`` parameter's), no whole tensor of vectors, and at
    most one output, the result."""
    return (plan.returns is not None or not plan.outputs) and not any(
        a.row.writes or a.direction != "in" or (a.kind == "tensor" and a.elem) for a in plan.args
    )


def _one_index(rest: tuple[str | int, ...]) -> bool:
    return len(rest) == 1 and isinstance(rest[0], int)


def _namespace(kernel: DriverKernel, torch_device: torch.device, make_current: Callable) -> dict:
    """What every generated function reads besides its arguments."""
    parts = kernel.parts()
    return {
        "dev": torch_device,
        "MAX": MAX_EXTENT,
        "strides": contiguous_strides,
        "empty": torch.empty_strided,
        "make_current": make_current,
        "raw_stream": torch._C._cuda_getCurrentRawStream,
        "index": torch_device.index,
        "P": P,
        "check": check,
        "launch_failed": launch_failed,
        "pack_into": struct.Struct(kernel.block.format).pack_into,
        "buffer": parts.buffer,
        "lock": parts.lock,
        "launch": parts.launch,
        "function": parts.function,
        "extra": parts.extra,
        "G": parts.group,
        "BadValue": (struct.error, OverflowError, TypeError, ValueError),
    }


def _uniforms(plan: SpecializationPlan, namespace: dict[str, Any]) -> None:
    for i, a in enumerate(plan.args):
        if a.row.leaf == "uniform":
            namespace[f"u{i}"] = uniform_value(a)


def _size_check(plan: SpecializationPlan, refused: str) -> list[str]:
    """``n`` from the call shape; a larger call needs the generic path's size check."""
    n = " * ".join(f"shape[{d}]" for d in range(plan.call_rank)) or "1"
    return [f"n = {n}", "if not 0 < n <= MAX:", f"    return {refused}"]


def _launch(packed: list[str], refused: str, zero: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Make the context current (after the call's allocations: torch's device guard may leave
    another context current), zero each (address, bytes) of ``zero`` on torch's stream, pack,
    launch."""
    lines = ["make_current()", "stream = P(raw_stream(index))"]
    for address, size in zero:
        lines += [
            f"size = {size}",
            "if size:",
            f"    result = memset({address}, 0, size, stream)",
            "    if result:",
            "        check(result, 'cuMemsetD8Async')",
        ]
    lines += [
        "with lock:",
        "    try:",
        f"        pack_into(buffer, 0, {', '.join(packed)})",
        "    except BadValue:",
        f"        return {refused}",
        "    result = launch(function, (n + G - 1) // G, 1, 1, G, 1, 1, 0, stream, None, extra)",
        "if result:",
        "    launch_failed(function, result)",
    ]
    return lines


def _compiled(name: str, parameters: str, body: list[str], namespace: dict[str, Any]) -> Any:
    source = f"def {name}({parameters}):\n" + "".join(f"    {line}\n" for line in body)
    exec(source, namespace)
    return namespace[name]


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
    if not _simple(plan):
        return None
    values = _Values(plan)
    packed = [values.of(path) for path in kernel.block.paths]
    if None in packed:
        return None
    tensors = [i for i, a in enumerate(args) if a.row.tensor]
    body = [f"{', '.join(f't{i}' for i in range(len(args)))}, = args"] if args else []
    if tensors:
        body.append(f"if {' or '.join(f't{i}.device != dev' for i in tensors)}:")
        body.append("    return None")
    for i, a in enumerate(args):
        if a.row.tensor and any(e > 4 for e in a.elem):
            # An element extent the signature cannot vouch for: the generic path names it.
            body.append(f"if t{i}.shape[{-len(a.elem)}:] != {a.elem}:")
            body.append("    return None")
    body.append("shape = call_shape(args)")
    body += _size_check(plan, "None")
    namespace = _namespace(kernel, torch_device, make_current)
    namespace["call_shape"] = call_shape
    _uniforms(plan, namespace)
    r = plan.returns
    if r is None:
        body.append("outputs = ()")
    else:
        namespace["dtype"] = getattr(torch, r.dtype)
        tail = f" + {r.elem}" if r.elem else ""
        body.append(f"oshape = shape{tail}")
        body.append("out = empty(oshape, strides(oshape), dtype=dtype, device=dev)")
        body.append("outputs = (out,)")
    body += [f"{name} = {source}" for name, source in values.reads.items()]
    body += _launch(packed, "None")
    body.append("return outputs, shape")
    return _compiled("call", "args", body, namespace)


def backward_call(
    plan: SpecializationPlan,
    mask: str,
    kernel: DriverKernel,
    torch_device: torch.device,
    make_current: Callable[[], None],
    generic: BackwardCall,
) -> BackwardCall | None:
    """The backward of ``plan`` for the gradients in ``mask``, through that mask's ``kernel``,
    as the autograd node runs it: ``call(ctx, grad_out)`` reads the arguments the node saved
    and returns a gradient per tensor, leaving what it does not handle to ``generic``. None
    when the layout holds what this does not generate."""
    args = plan.args
    if not _simple(plan) or plan.returns is None:
        return None
    values = _Values(plan, mask)
    wholes = [i for i, a in enumerate(args) if mask[i] == "1" and a.row.leaf == "tensor"]
    # Read before the allocations: a whole tensor's shape and its gradient's strides, which
    # the block packs too; the cotangent's strides, to check.
    early = []
    for i in wholes:
        early.append(values.read(f"s{i}", f"t{i}.shape"))
        early.append(values.read(f"gst{i}", f"strides(s{i})"))
    strided = any(path[0] == names.cotangent_strides(0) for path in kernel.block.paths)
    if strided:
        early.append(values.read("std", "dout.stride()"))
    packed = [values.of(path) for path in kernel.block.paths]
    if None in packed:
        return None
    tensors = [i for i, a in enumerate(args) if a.row.reads]  # the node's saved tensors
    uniforms = [i for i, a in enumerate(args) if a.row.leaf == "uniform"]
    refused = "generic(ctx, dout)"
    body = [f"{''.join(f't{i}, ' for i in tensors)}= ctx.saved_tensors"]
    if uniforms:
        body.append("others = ctx.others")
        body += [f"t{i} = others[{i}]" for i in uniforms]
    body.append("shape = ctx.call_shape")
    body += _size_check(plan, refused)
    namespace = _namespace(kernel, torch_device, make_current)
    namespace["generic"] = generic
    namespace["memset"] = driver().cuMemsetD8Async
    added = [i for i, a in enumerate(args) if mask[i] == "1" and plan.accumulates(a)]
    if added:
        # The per-call store that SLANGSPEC_DETERMINISTIC asks for is the generic path's.
        namespace["added_strides"] = added_strides
        namespace["ordered"] = functools.partial(setting, "SLANGSPEC_DETERMINISTIC")
        body[:0] = ["if ordered():", f"    return {refused}"]
    _uniforms(plan, namespace)
    body += [f"{name} = {values.reads[name]}" for name in early]
    if strided:
        # Read in place at its strides, unless one is past what a 32-bit index reaches.
        body += ["if max(std, default=0) > MAX:", f"    return {refused}"]
    namespace["copied"] = gradient_copies
    zero, summed, copied = [], [], []
    for i, a in enumerate(args):
        if mask[i] != "1":
            continue
        namespace[f"dtype{i}"] = dtype = getattr(torch, a.dtype)
        pointer = a.row.grad_binding == "pointer"
        if pointer and not plan.accumulates(a):
            tail = f" + {a.elem}" if a.elem else ""
            body.append(f"gs{i} = shape{tail}")
            body.append(f"g{i} = empty(gs{i}, strides(gs{i}), dtype=dtype{i}, device=dev)")
            summed.append(i)
        elif pointer or plan.sums_per_warp(i):
            if pointer:
                # Added into by the kernel in place, at strides 0 where it is broadcast, in the
                # copy of it the call's number picks.
                body.append(f"gst{i} = added_strides(t{i}.shape, {a.call_dims}, {plan.call_rank})")
                body.append(f"gs{i}, gc{i} = copied(n, t{i}.shape)")
            else:
                # The copies of the gradient, each of the tensor's shape and strides (``gst``).
                body.append(f"gs{i}, gc{i} = copied(n, s{i})")
            body.append(f"g{i} = empty(gs{i}, strides(gs{i}), dtype=dtype{i}, device=dev)")
            size = f"g{i}.numel() * {dtype.itemsize}"
            zero.append((values.read(f"pg{i}", f"g{i}.data_ptr()"), size))
            copied.append(i)
        else:
            body.append(f"g{i} = empty(s{i}, gst{i}, dtype=dtype{i}, device=dev)")
            size = " * ".join([*(f"s{i}[{d}]" for d in range(a.rank)), str(dtype.itemsize)])
            # The address the block packs for the gradient, read once for both.
            zero.append((values.read(f"pg{i}", f"g{i}.data_ptr()"), size))
    body += [f"{name} = {source}" for name, source in values.reads.items() if name not in early]
    body += _launch(packed, refused, zero)
    for i in summed:
        body.append(f"if g{i}.shape != t{i}.shape:")
        body.append(f"    g{i} = g{i}.sum_to_size(t{i}.shape)")
    for i in copied:
        body.append(f"if gc{i}[1]:")
        body.append(f"    g{i} = g{i}.sum(0)")
    grads = [f"g{i}" if mask[i] == "1" else "None" for i in tensors]
    body.append(f"return None, None, {', '.join(grads)}")
    return _compiled("backward", "ctx, dout", body, namespace)
