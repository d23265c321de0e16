"""One call signature's compiled kernels, and running them on concrete arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import slangpy as spy
import torch

from ..compiler import CompiledKernel
from ..specializer.plan import SpecializationPlan

KernelFactory = Callable[[str | None], CompiledKernel]
"""Compiles the forward kernel (None) or the backward kernel of a grad mask."""

_WRITTEN = ("RWTensor", "WTensor")


class Specialization:
    """A plan with its forward kernel and lazily compiled backward kernels.

    Everything the hot path can learn from the plan is worked out once, here.
    """

    def __init__(
        self, plan: SpecializationPlan, kernels: KernelFactory, binding: type, device: spy.Device
    ) -> None:
        self.plan = plan
        self.name = f"{plan.module}::{plan.function}"
        self.autograd = bool(plan.backward_masks)
        self._kernels = kernels
        self._forward = kernels(None)
        self._backward: dict[str, CompiledKernel] = {}
        self._binding = binding(device)
        args = plan.args
        self._tensors = [i for i, a in enumerate(args) if a.kind in ("elementwise", "tensor")]
        self._grids = [i for i, a in enumerate(args) if a.kind == "grid"]
        self._uniforms = [
            (i, _PY_TYPE[a.scalar]) for i, a in enumerate(args) if a.kind == "uniform"
        ]
        self._elementwise = [
            (i, a.call_dims, a.width) for i, a in enumerate(args) if a.kind == "elementwise"
        ]
        self._whole = [(i, a.binding in _WRITTEN) for i, a in enumerate(args) if a.kind == "tensor"]
        r = plan.returns
        self._out = None if r is None else (getattr(torch, r.dtype), (r.width,) if r.width else ())

    def backward_kernel(self, mask: str) -> CompiledKernel:
        kernel = self._backward.get(mask)
        if kernel is None:
            kernel = self._backward[mask] = self._kernels(mask)
        return kernel

    def __call__(self, args: Sequence[Any]) -> torch.Tensor | None:
        if self.autograd:
            return _SlangCall.apply(self, args, *(args[i] for i in self._tensors))
        return self.forward(args)

    def label(self, i: int) -> str:
        return f"{self.name}: argument {i} ('{self.plan.args[i].param}')"

    def check(self, bind, args: Sequence[Any]) -> None:
        """Every tensor is on the device's torch device; written tensors are not trained."""
        for i in self._tensors:
            bind.check(self.label(i), args[i])
        for i, written in self._whole:
            if written and args[i].requires_grad and torch.is_grad_enabled():
                raise ValueError(
                    f"{self.label(i)}: a tensor written by the kernel must not require grad"
                )

    def call_shape(self, args: Sequence[Any]) -> tuple[int, ...]:
        """The broadcast of every elementwise argument's call dimensions and every grid."""
        shapes = [(i, tuple(args[i].shape[:dims])) for i, dims, _ in self._elementwise]
        shapes += [(i, args[i].shape) for i in self._grids]
        try:
            return _broadcast([s for _, s in shapes])
        except ValueError:
            described = ", ".join(
                f"argument {i} ('{self.plan.args[i].param}') {s}" for i, s in shapes
            )
            raise ValueError(f"{self.name}: call shapes do not broadcast: {described}") from None

    def _bind(self, bind, args: Sequence[Any], call_shape: tuple[int, ...], mask: str | None):
        """Kernel keyword arguments shared by forward and backward kernels, and the gradient
        tensors of the whole-tensor arguments in ``mask``."""
        kw: dict[str, Any] = {"_n": _numel(call_shape)}
        if call_shape:
            kw["_shape"] = list(call_shape)
        for i, py_type in self._uniforms:
            kw[f"a{i}"] = py_type(args[i])
        for i, dims, width in self._elementwise:
            value = args[i]
            address, strides = bind.read(value)
            kw[f"a{i}"] = address
            if dims or width:
                shape = value.shape
                st = [0 if shape[d] == 1 else strides[d] for d in range(dims)]
                if width:
                    st.append(strides[dims])
                kw[f"a{i}_st"] = st
        tensor_grads: dict[int, torch.Tensor] = {}
        for i, written in self._whole:
            value = args[i]
            struct = bind.struct(value, written)
            if mask is not None and mask[i] == "1":
                grad = bind.zeros(tuple(value.shape), value.dtype, value.device)
                struct = {"_primal": struct, "_grad_out": bind.struct(grad, True)}
                tensor_grads[i] = grad
            kw[f"a{i}"] = struct
        return kw, tensor_grads

    def forward(self, args: Sequence[Any]) -> torch.Tensor | None:
        bind = self._binding.begin()
        self.check(bind, args)
        call_shape = self.call_shape(args)
        out = None
        if self._out is not None:
            dtype, tail = self._out
            device = args[self._tensors[0]].device if self._tensors else bind.torch_device
            out = bind.empty(call_shape + tail, dtype, device)
        n = _numel(call_shape)
        if n == 0:
            return out
        kw, _ = self._bind(bind, args, call_shape, None)
        if out is not None:
            kw["_out"] = bind.write(out)
        bind.dispatch(self._forward, n, kw)
        return out

    def backward(self, args: Sequence[Any], grad_out: torch.Tensor, mask: str) -> list:
        """Gradients for the arguments marked '1' in ``mask``; None for the others."""
        kernel = self.backward_kernel(mask)
        bind = self._binding.begin()
        call_shape = self.call_shape(args)
        kw, tensor_grads = self._bind(bind, args, call_shape, mask)
        grad_out = grad_out.contiguous()
        kw["_dout"], _ = bind.read(grad_out)
        grads: list[torch.Tensor | None] = [None] * len(args)
        for i, _, width in self._elementwise:
            if mask[i] == "1":
                value = args[i]
                full = bind.empty(
                    call_shape + ((width,) if width else ()), value.dtype, value.device
                )
                kw[f"g{i}"] = bind.write(full)
                grads[i] = full
        n = _numel(call_shape)
        if n:
            bind.dispatch(kernel, n, kw)
        for i, g in enumerate(grads):
            if g is not None and g.shape != args[i].shape:
                grads[i] = g.sum_to_size(args[i].shape)
        for i, g in tensor_grads.items():
            grads[i] = g
        return grads


_PY_TYPE = {"float": float, "half": float, "double": float, "int": int, "uint": int, "bool": bool}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """torch's broadcasting rule; ValueError when two extents clash."""
    if not shapes:
        return ()
    first = shapes[0]
    if all(s == first for s in shapes):
        return tuple(first)
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        offset = rank - len(s)
        for d, extent in enumerate(s):
            current = out[offset + d]
            if extent != current:
                if current == 1:
                    out[offset + d] = extent
                elif extent != 1:
                    raise ValueError(f"extent {extent} does not broadcast against {current}")
    return tuple(out)


class _SlangCall(torch.autograd.Function):
    """The autograd node of one call: backward picks the kernel for the grads torch needs."""

    @staticmethod
    def forward(ctx, spec: Specialization, args: Sequence[Any], *tensors: torch.Tensor):
        ctx.spec = spec
        # Tensors travel through save_for_backward; keep only the other arguments on ctx.
        ctx.others = [None if i in spec._tensors else a for i, a in enumerate(args)]
        ctx.save_for_backward(*tensors)
        return spec.forward(args)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        spec: Specialization = ctx.spec
        if torch.is_grad_enabled():
            raise RuntimeError(
                f"{spec.name}: double backward is not supported; its backward kernel is not "
                "differentiable (drop create_graph=True)"
            )
        args = list(ctx.others)
        mask = ["0"] * len(args)
        for i, t, needed in zip(
            spec._tensors, ctx.saved_tensors, ctx.needs_input_grad[2:], strict=True
        ):
            args[i] = t
            if needed and spec.plan.args[i].grad:
                mask[i] = "1"
        if "1" not in mask:
            return (None,) * (2 + len(spec._tensors))
        grads = spec.backward(args, grad_out, "".join(mask))
        return (None, None, *(grads[i] for i in spec._tensors))
