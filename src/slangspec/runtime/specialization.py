"""One call signature's compiled kernels, and running them on concrete arguments."""

from __future__ import annotations

import functools
import struct
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..codegen import parameter_names as names
from ..settings import setting
from ..signatures.scalars import SLANG
from ..signatures.text import argument_label
from ..specializer.plan import SpecializationPlan
from . import call_rows as rows
from .call_rows import Elementwise, shaping
from .call_values import finisher, leaf_reader
from .launch import Binding
from .partial_writes import unwritten_like
from .shapes import MAX_EXTENT, added_strides, broadcast, contiguous_strides, gradient_copies
from .writable import sharing, unwritable

if TYPE_CHECKING:
    from .backend import CompiledKernel
    from .cuda_call import BackwardCall
    from .cuda_driver import DriverKernel

KernelFactory = Callable[[str | None], "CompiledKernel | DriverKernel"]
"""Compiles the forward kernel (None) or the backward kernel of a grad mask."""

_MAX_THREADS = 2**32 - 1
"""The most threads one kernel runs: it numbers them with a 32-bit ``uint``."""
_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "uint": (0, 2**32 - 1)}


class Specialization:
    """A plan with its forward kernel and lazily compiled backward kernels.

    Everything the hot path can learn from the plan is worked out once, here.
    """

    def __init__(
        self,
        plan: SpecializationPlan,
        kernels: KernelFactory,
        binding: Binding,
    ) -> None:
        self.plan = plan
        self.name = f"{plan.module}::{plan.function}"
        self.autograd = bool(plan.backward_masks)
        self._kernels = kernels
        self._binding = binding
        self._forward = self._binding.prepare(kernels(None))
        self._backward: dict[str, Any] = {}
        self._grad_slots: dict[str, tuple[Elementwise, ...]] = {}
        """Per grad mask, the elementwise leaves whose gradients its backward kernel writes."""
        self._calls: dict[tuple[bool, ...], BackwardCall] = {}
        args = plan.args
        kinds = [a.row for a in args]
        self._tensors = tuple(i for i, r in enumerate(kinds) if r.reads)
        """The leaves whose tensors the kernels read: the autograd node's inputs."""
        self._trainable = tuple((i, args[i].grad) for i in self._tensors)
        self._labels = tuple((i, self.label(i)) for i, r in enumerate(kinds) if r.tensor)
        self._shaping, self._grids = shaping(plan)
        self._uniforms = rows.uniforms(plan)
        self._words = tuple((names.leaf(i), i) for i, r in enumerate(kinds) if r.words)
        """The leaves that bind uniform words: strided grids and generators with values."""
        self._elementwise = rows.elementwise(plan)
        self._whole = rows.whole_tensors(plan)
        self._copied = frozenset(w.leaf for w in self._whole if plan.sums_per_warp(w.leaf))
        """The whole tensors whose gradients backward kernels add into copies of them."""
        self._vectors = {i: a.elem[0] for i, a in enumerate(args) if a.kind == "tensor" and a.elem}
        """The whole tensors of vectors, by leaf: how many components each vector has."""
        self._diff_written = rows.written_tensors(plan)
        self._written = tuple(w.leaf for w in self._whole if w.written)
        self._in_place = tuple((i, a.elem) for i, a in enumerate(args) if a.direction != "in")
        """The leaves of ``out`` and ``inout`` parameters, which the call writes."""
        overwritten = [i for i, _ in self._in_place] + [w.leaf for w in self._diff_written]
        self._writes = (*((i, True) for i in overwritten), *((i, False) for i in self._written))
        """Every leaf whose tensor the call writes, and whether through autograd (else the
        kernel writes it itself)."""
        self._written_unread = tuple(i for i, _ in self._writes if i not in self._tensors)
        """The leaves whose tensors the call writes without reading: the autograd node keeps
        them on ctx through a detached alias, since each leads back to the node (its grad_fn), a
        cycle through autograd that Python's collector cannot free."""
        self._inout = tuple(k for k, i in enumerate(self._tensors) if args[i].direction == "inout")
        """Positions among the node's tensors of those the call also writes."""
        self._kept = tuple(i for k, i in enumerate(self._tensors) if k not in self._inout)
        """The leaves whose tensors the autograd node keeps as they are for its backward."""
        self._elements = rows.element_shapes(plan)
        only_grid = len(self._grids) == 1 and not self._shaping
        self._only_grid = self._grids[0] if only_grid else None
        """The one argument whose shape is the call shape, where no broadcast is needed."""
        self._outputs = rows.outputs(plan)
        self._cotangents = rows.cotangents(plan)
        self._not_differentiable = tuple(
            k for k, o in enumerate(plan.outputs) if not o.differentiable
        )
        self.leaves = leaf_reader(plan, binding.torch_device)
        """``leaves(args)``: the value of each leaf, read out of the dicts of struct
        arguments; None when every argument is its own leaf."""
        self.places = leaf_reader(plan)
        """``places(args)``: what ``leaves`` reads, without making tensors: for values
        standing in for the arguments (their grad flags, their positions)."""
        self.finish = finisher(plan)
        """``finish(args, outputs)``: what the call returns, after writing ``out`` and
        ``inout`` parameters' values into their tensors."""
        self._fast = binding.forward_call(plan, self._forward, self.call_shape)

    def grad_mask(self, needs_input_grad: tuple[bool, ...]) -> str:
        """The grad mask of a backward asked for ``needs_input_grad`` (the autograd node's, whose
        inputs are this specialization, the arguments, then the tensors)."""
        mask = ["0"] * len(self.plan.args)
        for (i, trainable), needed in zip(self._trainable, needs_input_grad[2:], strict=True):
            if needed and trainable:
                mask[i] = "1"
        return "".join(mask)

    def backward_call(self, needs_input_grad: tuple[bool, ...]) -> BackwardCall:
        """What the autograd node's backward runs, ``call(ctx, grad_out)``, for
        ``needs_input_grad``: the binding's own function for the kernel of its grad mask where
        it has one, else the generic path; memoized."""
        mask = self.grad_mask(needs_input_grad)
        if "1" not in mask:
            call = functools.partial(_no_grads, (None,) * (2 + len(self._tensors)))
        else:
            generic = functools.partial(self._node_backward, mask)
            kernel = self.backward_kernel(mask)
            call = self._binding.backward_call(self.plan, mask, kernel, generic) or generic
        self._calls[needs_input_grad] = call
        return call

    def _node_backward(
        self, mask: str, ctx: Any, *grad_outs: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        """The generic backward of the autograd node: arguments from ``ctx``, gradients in the
        node's input order."""
        args = list(ctx.others)
        for i, t in zip(self._tensors, ctx.saved_tensors, strict=True):
            args[i] = t
        grads = self.backward(args, grad_outs, mask, ctx.call_shape)
        return (None, None, *(grads[i] for i in self._tensors))

    def backward_kernel(self, mask: str) -> Any:
        """The backward kernel of ``mask``, compiled (or loaded) on first use."""
        kernel = self._backward.get(mask)
        if kernel is None:
            kernel = self._backward[mask] = self._binding.prepare(self._kernels(mask))
        return kernel

    def __call__(self, args: Sequence[Any]) -> Any:
        if self._writes:
            self.check_writable(args)
        if self.autograd:
            outputs = _SlangCall.apply(self, args, *(args[i] for i in self._tensors))
        else:
            outputs = self._forward_with_shape(args)[0]
        return self.finish(args, outputs)

    def check_elements(self, args: Sequence[Any]) -> None:
        """ValueError naming the leaf whose trailing dimensions are not its element shape,
        where the signature's extent classes cannot tell (an extent past 4)."""
        for e in self._elements:
            shape = tuple(args[e.leaf].shape)
            if shape[len(shape) - len(e.elem) :] != e.elem:
                raise ValueError(
                    f"{self.label(e.leaf)}: expected a tensor whose trailing dimensions are "
                    f"{e.elem} for {e.slang_type}, got shape {shape}"
                )

    def check_vectors(self, i: int, t: torch.Tensor, components: int) -> None:
        """ValueError unless tensor ``t`` of leaf ``i``, a tensor of vectors of ``components``,
        holds each vector's components side by side, at an address a vector may sit at."""
        vector_bytes = components * t.element_size() if components in (2, 4) else 1
        strides = t.stride()
        if strides[-1] != 1 or any(s % components for s in strides[:-1]):
            why = f"its vectors' components are not side by side (strides {tuple(strides)})"
        elif t.device.type == "cuda" and t.data_ptr() % vector_bytes:
            why = f"its data is not aligned to {vector_bytes} bytes, as a vector must be"
        else:
            return
        raise ValueError(
            f"{self.label(i)}: expected a tensor of vectors of {components} components for "
            f"{self.plan.args[i].slang_type}, but {why}: pass t.contiguous()"
        )

    def label(self, i: int) -> str:
        return f"{self.name}: {self._argument(i)}"

    def _argument(self, i: int) -> str:
        """Leaf ``i`` as the call's errors name it: by its parameter's position, as Python
        passed it, with a struct field's path after the parameter's name."""
        a = self.plan.args[i]
        return argument_label(a.index, a.param)

    def check(self, bind: Binding, args: Sequence[Any]) -> None:
        """Every tensor is on the device's torch device."""
        device = bind.torch_device
        for i, label in self._labels:
            if args[i].device != device:
                bind.check(label, args[i])

    def check_writable(self, args: Sequence[Any]) -> None:
        """ValueError naming a tensor the call writes that it cannot (``unwritable``, or
        ``sharing`` a tensor the autograd node keeps); asked before the node, which runs its
        forward with grad mode off."""
        recorded = (
            self.autograd
            and torch.is_grad_enabled()
            and any(args[i].requires_grad for i in self._tensors)
        )
        for i, tracked in self._writes:
            problem = unwritable(args[i], tracked)
            if problem is None and recorded:
                kept = [(self._argument(j), args[j]) for j in self._kept if j != i]
                problem = sharing(args[i], kept)
            if problem is not None:
                raise ValueError(f"{self.label(i)}: {problem}")

    def check_in_place(self, args: Sequence[Any], call_shape: tuple[int, ...]) -> None:
        """ValueError naming an ``out`` or ``inout`` tensor that is not of the call's shape."""
        for i, elem in self._in_place:
            want = (*call_shape, *elem)
            if tuple(args[i].shape) != want:
                raise ValueError(
                    f"{self.label(i)}: the call writes this tensor, so it must have the call "
                    f"shape and element shape {want}, got shape {tuple(args[i].shape)}"
                )

    def call_shape(self, args: Sequence[Any]) -> tuple[int, ...]:
        """The broadcast of every elementwise argument's call dimensions and every grid."""
        if self._only_grid is not None:
            return args[self._only_grid].shape
        shapes = [args[i].shape[:dims] for i, dims in self._shaping]
        shapes += [args[i].shape for i in self._grids]
        try:
            return broadcast(shapes)
        except ValueError:
            described = self._call_shapes(args)
            raise ValueError(f"{self.name}: call shapes do not broadcast: {described}") from None

    def _call_shapes(self, args: Sequence[Any]) -> str:
        """Each argument's part of the call shape, for messages."""
        parts = [(i, args[i].shape[:dims]) for i, dims in self._shaping]
        parts += [(i, args[i].shape) for i in self._grids]
        return ", ".join(f"{self._argument(i)} {tuple(s)}" for i, s in parts)

    def check_size(self, args: Sequence[Any], call_shape: tuple[int, ...]) -> None:
        """ValueError when a kernel's 32-bit index cannot reach every point of ``call_shape``.
        Only a call of more than ``MAX_EXTENT`` points needs it, so the hot path asks for it
        only then."""
        n = _numel(call_shape)
        extent = max(call_shape, default=0)
        if n > _MAX_THREADS:
            why = f"{n} points; a kernel runs at most {_MAX_THREADS} threads"
        elif extent > MAX_EXTENT:
            why = f"an extent of {extent}; a kernel indexes extents of at most {MAX_EXTENT}"
        else:
            return
        shape = tuple(call_shape)
        raise ValueError(f"{self.name}: call shape {shape} has {why}: {self._call_shapes(args)}")

    def blame(self, args: Sequence[Any]) -> None:
        """After binding or dispatch failed: ValueError naming the argument whose value a
        kernel parameter cannot hold (a uniform out of its type's range, a stride past 32
        bits); returns when there is none to blame."""
        for u in self._uniforms:
            i = u.leaf
            a = self.plan.args[i]
            try:
                bound = u.value(args[i])
                items = bound if a.elem else [bound]
                struct.pack(f"<{len(items)}{SLANG[a.scalar].struct_code}", *items)
            except (struct.error, OverflowError, TypeError, ValueError):
                if a.scalar in _INT_RANGES:
                    low, high = _INT_RANGES[a.scalar]
                    ints = "ints" if a.elem else "an int"
                    expected = f"{ints} from {low} to {high} for {a.slang_type}"
                else:
                    expected = f"a number {a.slang_type} can hold"
                raise ValueError(f"{self.label(i)}: expected {expected}, got {args[i]!r}") from None
        for e in self._elementwise:
            t = args[e.leaf]
            strides = [s for s, extent in zip(t.stride(), t.shape, strict=True) if extent != 1]
            if max(strides, default=0) > MAX_EXTENT:
                raise ValueError(
                    f"{self.label(e.leaf)}: expected a tensor whose element strides are at most "
                    f"{MAX_EXTENT}, got strides {tuple(t.stride())}"
                )

    def _bind(
        self,
        bind: Binding,
        args: Sequence[Any],
        call_shape: tuple[int, ...],
        n: int,
        mask: str | None,
    ) -> tuple[dict[str, Any], dict[int, torch.Tensor], list[torch.Tensor]]:
        """Kernel keyword arguments shared by forward and backward kernels (``n`` threads over
        ``call_shape``), the gradient tensors of the whole-tensor arguments in ``mask``, and
        what the dispatch must zero first (those gradients, and frozen ``DiffTensor``s'
        scratch)."""
        kw: dict[str, Any] = {names.THREADS: n}
        if call_shape:
            kw[names.CALL_SHAPE] = list(call_shape)
        for u in self._uniforms:
            kw[u.name] = u.value(args[u.leaf])
        for name, i in self._words:
            kw[name] = args[i].words()
        for e in self._elementwise:
            value = args[e.leaf]
            address, strides = bind.read(value)
            kw[e.name] = address
            dims, elem_dims = e.call_dims, e.elem_dims
            if dims or elem_dims:
                shape = value.shape
                st = [0 if shape[d] == 1 else strides[d] for d in range(dims)]
                st += strides[dims : dims + elem_dims]
                kw[e.strides] = st
        tensor_grads: dict[int, torch.Tensor] = {}
        zero: list[torch.Tensor] = []
        for w in self._whole:
            value = args[w.leaf]
            fold = self._vectors.get(w.leaf, 0) if self._vectors else 0
            if fold:
                self.check_vectors(w.leaf, value, fold)
            struct = bind.write_struct(value) if w.written else bind.read_struct(value)
            if mask is not None and mask[w.leaf] == "1":
                shape = tuple(value.shape)
                if w.leaf in self._copied:
                    shape, kw[names.gradient_copy(w.leaf)] = gradient_copies(n, shape)
                grad = bind.zeroed(shape, value.dtype)
                primal, gradient = w.grad_parts
                gradient_struct = dict(_in_vectors(bind.write_struct(grad), fold))
                if grad.dim() > value.dim():  # the first copy's shape: the kernel adds the rest
                    gradient_struct["_shape"] = list(value.shape)
                    gradient_struct["_strides"] = list(contiguous_strides(tuple(value.shape)))
                struct = {primal: _in_vectors(struct, fold), gradient: gradient_struct}
                tensor_grads[w.leaf] = grad
                zero.append(grad)
            elif w.parts:
                # A DiffTensor parameter always has a gradient: a frozen one accumulates into
                # one scratch element, at strides 0, never into storage of its size.
                scratch = bind.zeroed((max(fold, 1),), value.dtype)
                zero.append(scratch)
                sink = dict(bind.write_struct(scratch))
                sink["_shape"] = list(value.shape)
                sink["_strides"] = [0] * value.dim()
                primal, gradient = w.parts
                struct = {primal: _in_vectors(struct, fold), gradient: _in_vectors(sink, fold)}
            kw[w.name] = _in_vectors(struct, fold)
        return kw, tensor_grads, zero

    def forward(self, args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        """The call's outputs (see ``SpecializationPlan.outputs``), nothing written back."""
        return self._forward_with_shape(args)[0]

    def _forward_with_shape(
        self, args: Sequence[Any]
    ) -> tuple[tuple[torch.Tensor, ...], tuple[int, ...]]:
        """The outputs, and the call shape the backward pass reuses."""
        if self._fast is not None:
            done = self._fast(args)  # it checks the element shapes itself
            if done is not None:
                return done
        if self._elements:
            self.check_elements(args)
        bind = self._binding.begin()
        self.check(bind, args)
        call_shape = self.call_shape(args)
        if self._in_place:
            self.check_in_place(args, call_shape)
        n = _numel(call_shape)
        if n > MAX_EXTENT:
            self.check_size(args, call_shape)
        outputs = [bind.empty(call_shape + o.elem, o.dtype) for o in self._outputs]
        for w in self._diff_written:
            outputs[w.output] = unwritten_like(args[w.leaf])
        if n == 0:
            return tuple(outputs), call_shape
        try:
            kw, _, zero = self._bind(bind, args, call_shape, n, None)
            for out, o in zip(outputs, self._outputs, strict=True):
                kw[o.name] = bind.write(out)
            for w in self._diff_written:
                out = outputs[w.output]
                fold = self._vectors.get(w.leaf, 0) if self._vectors else 0
                struct = bind.write_struct(out)
                if w.parts:
                    # Its cotangent, never read by a forward kernel: one element at strides 0.
                    primal, cotangent = w.parts
                    scratch = _scratch(bind, out, fold)
                    struct = {primal: _in_vectors(struct, fold), cotangent: scratch}
                kw[w.name] = _in_vectors(struct, fold)
            bind.dispatch(self._forward, n, kw, zero)
        except Exception:
            self.blame(args)
            raise
        return tuple(outputs), call_shape

    def backward(
        self,
        args: Sequence[Any],
        grad_outs: Sequence[torch.Tensor | None],
        mask: str,
        call_shape: tuple[int, ...] | None = None,
    ) -> list:
        """Gradients for the leaves marked '1' in ``mask``, None for the others, from one
        cotangent per output (None: zero)."""
        kernel = self.backward_kernel(mask)
        bind = self._binding.begin()
        if call_shape is None:
            call_shape = self.call_shape(args)
            self.check_size(args, call_shape)
        n = _numel(call_shape)
        kw, tensor_grads, zero = self._bind(bind, args, call_shape, n, mask)
        for c in self._cotangents:
            grad_out = grad_outs[c.output]
            if grad_out is None:
                o = self._outputs[c.output]
                grad_out = torch.zeros(call_shape + o.elem, dtype=o.dtype, device=bind.torch_device)
            # Read in place at its strides, unless one is past what a 32-bit index reaches.
            if max(grad_out.stride(), default=0) > MAX_EXTENT:
                grad_out = grad_out.contiguous()
            kw[c.name], dout_strides = bind.read(grad_out)
            if dout_strides:
                kw[c.strides] = dout_strides
        for w in self._diff_written:
            cotangent = grad_outs[w.output]
            if cotangent is None:
                cotangent = torch.zeros_like(args[w.leaf])
            # Read as the gradient of what the kernel wrote. The backward kernel stores the
            # primal values again: into one scratch element, at strides 0.
            primal, gradient = w.backward_parts
            fold = self._vectors.get(w.leaf, 0) if self._vectors else 0
            read = _in_vectors(bind.read_struct(cotangent), fold)
            kw[w.name] = {primal: _scratch(bind, cotangent, fold), gradient: read}
        grads: list[torch.Tensor | None] = [None] * len(args)
        slots = self._grad_slots.get(mask)
        if slots is None:
            slots = self._grad_slots[mask] = tuple(
                e for e in self._elementwise if mask[e.leaf] == "1"
            )
        for e in slots:
            if e.accumulated:
                ordered = setting("SLANGSPEC_DETERMINISTIC")
                full, strides, copy = _accumulated(bind, args[e.leaf], e, call_shape, ordered)
                kw[e.gradient_strides] = strides
                kw[names.gradient_copy(e.leaf)] = copy
                zero.append(full)
            else:
                full = bind.empty(call_shape + e.elem, args[e.leaf].dtype)
            kw[e.gradient] = bind.write(full)
            grads[e.leaf] = full
        bind.dispatch(kernel, n, kw, zero)
        for e in slots:
            i = e.leaf
            shape = args[i].shape
            if grads[i].shape != shape:
                grads[i] = grads[i].sum_to_size(shape)
        for i, g in tensor_grads.items():
            grads[i] = g if g.dim() == args[i].dim() else g.sum(0)
        return grads


def _accumulated(
    bind: Binding,
    arg: torch.Tensor,
    e: Elementwise,
    call_shape: tuple[int, ...],
    ordered: bool,
) -> tuple[torch.Tensor, list[int], list[int]]:
    """Zeroed storage a backward kernel adds elementwise leaf ``e``'s gradient into, its
    strides per call dimension then per element dimension, and how the calls spread over its
    copies (``parameter_names.gradient_copy``): of the argument's own shape, 0 along the call
    dimensions it is broadcast over, so that calls sharing an element sum into it, in as many
    copies as ``gradient_copies`` gives; ``ordered``, one element per call, which torch then
    sums in a fixed order."""
    if ordered:
        full = bind.zeroed(call_shape + e.elem, arg.dtype)
        return full, list(contiguous_strides(tuple(full.shape))), [32, 0]
    shape = tuple(arg.shape)
    strides = added_strides(shape, e.call_dims, len(call_shape))
    storage, copy = gradient_copies(_numel(call_shape), shape)
    return bind.zeroed(storage, arg.dtype), strides, copy


def _scratch(bind: Binding, like: torch.Tensor, fold: int = 0) -> dict[str, Any]:
    """A tensor struct of ``like``'s shape over one element of scratch (strides 0), for a
    part of a tensor struct the kernel never reads (one vector of ``fold`` components, for a
    tensor of them)."""
    struct = dict(bind.read_struct(bind.empty((max(fold, 1),), like.dtype)))
    struct["_shape"] = list(like.shape)
    struct["_strides"] = [0] * like.dim()
    return _in_vectors(struct, fold)


def _in_vectors(struct: dict[str, Any], fold: int) -> dict[str, Any]:
    """The tensor struct ``struct`` of a tensor of scalars, made that of the same tensor of
    vectors of ``fold`` components (its last dimension): shape and strides count vectors.
    ``struct`` itself where ``fold`` is 0 (a tensor of scalars), or where it holds parts."""
    if not fold or "_strides" not in struct:
        return struct
    strides = [s // fold for s in struct["_strides"][:-1]]
    return {**struct, "_shape": list(struct["_shape"][:-1]), "_strides": strides}


def _no_grads(nothing: tuple[None, ...], ctx: Any, *grad_outs: torch.Tensor) -> tuple[None, ...]:
    return nothing


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _SlangCall(torch.autograd.Function):
    """The autograd node of one call: backward picks the kernel for the grads torch needs."""

    @staticmethod
    def forward(ctx, spec: Specialization, args: Sequence[Any], *tensors: torch.Tensor):
        ctx.spec = spec
        # Tensors read travel through save_for_backward; keep only the other arguments on ctx.
        others = list(args)
        for i in spec._tensors:
            others[i] = None
        for i in spec._written_unread:
            others[i] = args[i].detach()
        ctx.others = others
        if spec._inout:
            # The call's own outputs are copied into these after it returns: keep them as the
            # kernel read them.
            tensors = tuple(
                t.detach().clone() if k in spec._inout else t for k, t in enumerate(tensors)
            )
        ctx.save_for_backward(*tensors)
        outputs, ctx.call_shape = spec._forward_with_shape(args)
        if spec._not_differentiable:
            ctx.mark_non_differentiable(*(outputs[k] for k in spec._not_differentiable))
        return outputs

    @staticmethod
    def backward(ctx, *grad_outs: torch.Tensor):
        # Run as it is, never traced: autograd may enter here where torch.compile left its frame
        # hook set (a backward called past a graph break), and tracing would stage stand-ins
        # for tensors. Only a process that compiles has imported torch._dynamo, which is slow to
        # import.
        if "torch._dynamo" in sys.modules:
            return _untraced_backward()(ctx, *grad_outs)
        return _backward(ctx, *grad_outs)


@functools.cache
def _untraced_backward() -> Callable[..., tuple[torch.Tensor | None, ...]]:
    import torch._dynamo

    return torch._dynamo.disable(_backward)


def _backward(ctx: Any, *grad_outs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    """The backward of a ``_SlangCall``: the kernel of the grad mask torch asks for."""
    spec: Specialization = ctx.spec
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"{spec.name}: double backward is not supported; its backward kernel is not "
            "differentiable (drop create_graph=True)"
        )
    needs = ctx.needs_input_grad
    return (spec._calls.get(needs) or spec.backward_call(needs))(ctx, *grad_outs)
