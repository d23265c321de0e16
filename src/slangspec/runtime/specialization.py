"""One call signature's compiled kernels, and running them on concrete arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import slangpy as spy
import torch

from ..specializer.plan import ArgPlan, SpecializationPlan

KernelFactory = Callable[[str | None], spy.ComputeKernel]
"""Compiles the forward kernel (None) or the backward kernel of a grad mask."""


class Specialization:
    """A plan with its forward kernel and lazily compiled backward kernels."""

    def __init__(
        self, plan: SpecializationPlan, kernels: KernelFactory, binding: type, device: spy.Device
    ) -> None:
        self.plan = plan
        self._kernels = kernels
        self._forward = kernels(None)
        self._backward: dict[str, spy.ComputeKernel] = {}
        self._binding = binding
        self._device = device
        self.autograd = bool(plan.backward_masks)
        self.name = f"{plan.module}::{plan.function}"

    def backward_kernel(self, mask: str) -> spy.ComputeKernel:
        kernel = self._backward.get(mask)
        if kernel is None:
            kernel = self._backward[mask] = self._kernels(mask)
        return kernel

    def __call__(self, args: Sequence[Any]) -> torch.Tensor | None:
        if self.autograd:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            return _SlangCall.apply(self, list(args), *tensors)
        return self.forward(args)

    def _label(self, i: int) -> str:
        return f"{self.name}: argument {i} ('{self.plan.args[i].param}')"

    def _call_shape(self, args: Sequence[Any]) -> tuple[int, ...]:
        shapes = []
        for i, (a, value) in enumerate(zip(self.plan.args, args, strict=True)):
            if a.kind == "elementwise":
                shapes.append((i, tuple(value.shape[: a.call_dims])))
            elif a.kind == "grid":
                shapes.append((i, value.shape))
        try:
            return tuple(torch.broadcast_shapes(*(s for _, s in shapes)))
        except RuntimeError:
            described = ", ".join(
                f"argument {i} ('{self.plan.args[i].param}') {s}" for i, s in shapes
            )
            raise ValueError(f"{self.name}: call shapes do not broadcast: {described}") from None

    def _bind(self, bind, args: Sequence[Any], call_shape: tuple[int, ...], mask: str | None):
        """Kernel keyword arguments shared by forward and backward kernels, and the gradient
        tensors of the whole-tensor arguments in ``mask``."""
        kw: dict[str, Any] = {"_n": _numel(call_shape)}
        tensor_grads: dict[int, torch.Tensor] = {}
        if call_shape:
            kw["_shape"] = list(call_shape)
        for i, (a, value) in enumerate(zip(self.plan.args, args, strict=True)):
            if a.kind == "uniform":
                kw[f"a{i}"] = _uniform(a, value)
            elif a.kind == "elementwise":
                address, strides = bind.read(value)
                kw[f"a{i}"] = address
                st = _broadcast_strides(a, tuple(value.shape), strides)
                if st:
                    kw[f"a{i}_st"] = st
            elif a.kind == "tensor":
                struct = bind.struct(value, writable=a.binding in ("RWTensor", "WTensor"))
                if mask is not None and mask[i] == "1":
                    grad = bind.zeros(tuple(value.shape), value.dtype, value.device)
                    struct = {"_primal": struct, "_grad_out": bind.struct(grad, writable=True)}
                    tensor_grads[i] = grad
                kw[f"a{i}"] = struct
        return kw, tensor_grads

    def check(self, bind, args: Sequence[Any]) -> None:
        for i, (a, value) in enumerate(zip(self.plan.args, args, strict=True)):
            if isinstance(value, torch.Tensor):
                bind.check(self._label(i), value)
                if (
                    a.kind == "tensor"
                    and a.binding in ("RWTensor", "WTensor")
                    and value.requires_grad
                    and torch.is_grad_enabled()
                ):
                    raise ValueError(
                        f"{self._label(i)}: a tensor written by the kernel must not require grad"
                    )

    def forward(self, args: Sequence[Any]) -> torch.Tensor | None:
        bind = self._binding(self._device)
        self.check(bind, args)
        call_shape = self._call_shape(args)
        r = self.plan.returns
        out = None
        if r is not None:
            shape = call_shape + ((r.width,) if r.width else ())
            out = bind.empty(shape, getattr(torch, r.dtype), _torch_device(args, bind))
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
        bind = self._binding(self._device)
        call_shape = self._call_shape(args)
        grads: list[torch.Tensor | None] = [None] * len(args)
        n = _numel(call_shape)
        kw, tensor_grads = self._bind(bind, args, call_shape, mask)
        grad_out = grad_out.contiguous()
        kw["_dout"], _ = bind.read(grad_out)
        for i, a in enumerate(self.plan.args):
            if mask[i] == "1" and a.kind == "elementwise":
                full = bind.empty(
                    call_shape + ((a.width,) if a.width else ()), args[i].dtype, args[i].device
                )
                kw[f"g{i}"] = bind.write(full)
                grads[i] = full
        if n:
            bind.dispatch(kernel, n, kw)
        for i, a in enumerate(self.plan.args):
            if mask[i] != "1":
                continue
            if a.kind == "tensor":
                grads[i] = tensor_grads[i]
            elif grads[i].shape != args[i].shape:
                grads[i] = grads[i].sum_to_size(args[i].shape)
        return grads


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _torch_device(args: Sequence[Any], bind) -> torch.device:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
    return bind.torch_device


def _uniform(a: ArgPlan, value: Any) -> Any:
    if a.scalar in ("float", "half", "double"):
        return float(value)
    if a.scalar == "bool":
        return bool(value)
    return int(value)


def _broadcast_strides(a: ArgPlan, shape: tuple[int, ...], strides: list[int]) -> list[int]:
    """Element strides over the argument's call dimensions (0 where it broadcasts), then the
    vector component stride."""
    st = [0 if shape[d] == 1 else strides[d] for d in range(a.call_dims)]
    if a.width:
        st.append(strides[a.call_dims])
    return st


_SAVED = object()
"""Stands in for a tensor argument in ctx.args; the tensor itself goes through saved_tensors."""


class _SlangCall(torch.autograd.Function):
    """The autograd node of one call: backward picks the kernel for the grads torch needs."""

    @staticmethod
    def forward(ctx, spec: Specialization, args: list, *tensors: torch.Tensor):
        ctx.spec = spec
        ctx.args = [_SAVED if isinstance(a, torch.Tensor) else a for a in args]
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
        saved = iter(ctx.saved_tensors)
        args = [next(saved) if a is _SAVED else a for a in ctx.args]
        needs = iter(ctx.needs_input_grad[2:])
        mask = "".join(
            "1" if isinstance(value, torch.Tensor) and next(needs) and a.grad else "0"
            for a, value in zip(spec.plan.args, args, strict=True)
        )
        grads = spec.backward(args, grad_out, mask) if "1" in mask else [None] * len(args)
        tensor_grads = (g for g, v in zip(grads, args, strict=True) if isinstance(v, torch.Tensor))
        return (None, None, *tensor_grads)
