"""slangspec calls as torch operators, for code that torch.compile traces.

Eager calls go straight to a specialization's kernels. While torch traces, a call becomes one
of these custom operators instead, so that a compiled graph holds it without a break:

- ``slangspec::call`` returns the function's result;
- ``slangspec::call_writing`` and ``slangspec::call_writing_returning``, for a function that
  writes ``IRWTensor``/``IWTensor`` arguments, return what those arguments hold after the call
  (the kernel writes into copies), which the traced code copies back into them; the second
  also returns the function's result. Being functional, they can carry autograd: an operator
  that mutates its inputs cannot.

All take the call's arguments flattened into lists torch can describe (``pack``): the tensors,
whether each took part in autograd when the call was traced, the other arguments' kinds, and
their values. Their fake implementations work the result's shape and dtype out of the
specialization plan, running nothing; autograd runs ``slangspec::call_backward``, which picks
the backward kernel of the call's grad mask as eager mode does.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch._dynamo

from ..signatures import call_signature, grid
from .specialization import Specialization, _broadcast

if TYPE_CHECKING:
    from .module import Function

_functions: dict[str, Function] = {}
_numbers = itertools.count()


def operator_name(fn: Function) -> str:
    """The name the operators know ``fn`` by in this process."""
    if fn.operator_name is None:
        fn.operator_name = f"{fn.id}#{next(_numbers)}"
        _functions[fn.operator_name] = fn
    return fn.operator_name


def _written(name: str) -> tuple[int, ...]:
    """The positions of the function's ``IRWTensor``/``IWTensor`` parameters."""
    params = _functions[name].info.params
    return tuple(k for k, p in enumerate(params) if p.type.interface in ("IRWTensor", "IWTensor"))


@torch._dynamo.assume_constant_result
def operator_kind(name: str) -> tuple[str, tuple[int, ...]]:
    """Which operator calls the function: "call", or for one that writes any of its tensor
    arguments "writing" or, when it also returns a value, "writing_returning"; and the
    positions of the arguments it writes."""
    written = _written(name)
    if not written:
        return "call", written
    returns = _functions[name].info.returns.kind != "void"
    return ("writing_returning" if returns else "writing"), written


def pack(args: Sequence[Any]) -> tuple[list[torch.Tensor], list[bool], str, list[float], list[int]]:
    """The call's arguments as operator inputs: tensors, their grad flags, one kind letter per
    argument (t tensor, f float, i int, b bool, g grid, with the grid's rank), floats, ints
    (grid extents among them)."""
    tensors: list[torch.Tensor] = []
    grads: list[bool] = []
    kinds: list[str] = []
    floats: list[float] = []
    ints: list[int] = []
    grad_mode = torch.is_grad_enabled()
    for a in args:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            grads.append(a.requires_grad and grad_mode)
            kinds.append("t")
        elif isinstance(a, bool):
            ints.append(int(a))
            kinds.append("b")
        elif isinstance(a, int):
            ints.append(a)
            kinds.append("i")
        elif isinstance(a, float):
            floats.append(a)
            kinds.append("f")
        elif isinstance(a, grid):
            ints.extend(a.shape)
            kinds.append(f"g{len(a.shape)}")
        else:
            raise TypeError(
                f"cannot pass a value of type {type(a).__name__} in code torch compiles; expected "
                "a torch tensor, Python float/int/bool or slangspec.grid"
            )
    return tensors, grads, ",".join(kinds), floats, ints


def unpack(
    tensors: Sequence[torch.Tensor], kinds: str, floats: Sequence[float], ints: Sequence[int]
) -> list[Any]:
    args: list[Any] = []
    t, f, i = iter(tensors), iter(floats), iter(ints)
    for kind in kinds.split(",") if kinds else ():
        if kind == "t":
            args.append(next(t))
        elif kind == "f":
            args.append(next(f))
        elif kind == "i":
            args.append(next(i))
        elif kind == "b":
            args.append(bool(next(i)))
        else:
            args.append(grid([next(i) for _ in range(int(kind[1:]))]))
    return args


def _signature(fn: Function, args: list[Any], grads: Sequence[bool]) -> str:
    """The call signature the traced call had: its tensors' grad flags as they were then."""
    flagged = list(args)
    with torch.enable_grad():
        g = iter(grads)
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor) and next(g):
                flagged[k] = a.detach().requires_grad_(True)
            elif isinstance(a, torch.Tensor):
                flagged[k] = a.detach()
        return call_signature(fn.id, flagged)


def _specialization(name: str, args: list[Any], grads: Sequence[bool]) -> Specialization:
    fn = _functions[name]
    signature = _signature(fn, args, grads)
    return fn._specs.get(signature) or fn._specialize(signature)


def _result_like(name: str, args: list[Any], grads: Sequence[bool]) -> torch.Tensor:
    """An empty tensor of the result's shape, dtype and device, from the plan alone."""
    fn = _functions[name]
    plan = fn.plan_for_signature(_signature(fn, args, grads))
    shapes = [
        args[i].shape[: a.call_dims] for i, a in enumerate(plan.args) if a.kind == "elementwise"
    ]
    shapes += [args[i].shape for i, a in enumerate(plan.args) if a.kind == "grid"]
    r = plan.returns
    assert r is not None, "a function that returns nothing is called through call_writing"
    tail = (r.width,) if r.width else ()
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    device = device or fn.module.torch_device
    return torch.empty(_broadcast(shapes) + tail, dtype=getattr(torch, r.dtype), device=device)


_ARGUMENTS = "str name, Tensor[] tensors, bool[] grads, str kinds, float[] floats, SymInt[] ints"


def _with_copies(name: str, args: list[Any]) -> tuple[list[Any], list[torch.Tensor]]:
    """``args`` with a copy in place of each argument the function writes, and the copies."""
    args = list(args)
    copies = []
    for k in _written(name):
        args[k] = args[k].clone()
        copies.append(args[k])
    return args, copies


def _forward(name, tensors, grads, kinds, floats, ints) -> torch.Tensor:
    args = unpack(tensors, kinds, floats, ints)
    return _specialization(name, args, grads).forward(args)


def _forward_writing(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    args, written = _with_copies(name, args)
    spec.forward(args)
    return written


def _forward_writing_returning(
    name, tensors, grads, kinds, floats, ints
) -> tuple[list[torch.Tensor], torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    args, written = _with_copies(name, args)
    return written, spec.forward(args)


def _fake_result(name, tensors, grads, kinds, floats, ints) -> torch.Tensor:
    return _result_like(name, unpack(tensors, kinds, floats, ints), grads)


def _fake_written(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    return [torch.empty_like(args[k]) for k in _written(name)]


def _fake_written_returning(name, tensors, grads, kinds, floats, ints):
    args = unpack(tensors, kinds, floats, ints)
    return [torch.empty_like(args[k]) for k in _written(name)], _result_like(name, args, grads)


def _operator(op: str, forward: Any, fake: Any, returns: str) -> Any:
    defined = torch.library.custom_op(
        f"slangspec::{op}", forward, mutates_args=(), schema=f"({_ARGUMENTS}) -> {returns}"
    )
    defined.register_fake(fake)
    return defined


call = _operator("call", _forward, _fake_result, "Tensor")
call_writing = _operator("call_writing", _forward_writing, _fake_written, "Tensor[]")
call_writing_returning = _operator(
    "call_writing_returning",
    _forward_writing_returning,
    _fake_written_returning,
    "(Tensor[], Tensor)",
)


@torch.library.custom_op(
    "slangspec::call_backward",
    mutates_args=(),
    schema=f"({_ARGUMENTS}, Tensor grad_out) -> Tensor[]",
)
def call_backward(name, tensors, grads, kinds, floats, ints, grad_out) -> list[torch.Tensor]:
    """Gradients of the tensors whose grad flag is set, in order."""
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    # A backward kernel re-runs the function's writes: into copies, never into saved inputs.
    args, _ = _with_copies(name, args)
    mask = ["0"] * len(args)
    positions = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for k, g in zip(positions, grads, strict=True):
        if g and spec.plan.args[k].grad:
            mask[k] = "1"
    computed = spec.backward(args, grad_out, "".join(mask)) if "1" in mask else [None] * len(args)
    return [
        computed[k] if computed[k] is not None else torch.zeros_like(args[k])
        for k, g in zip(positions, grads, strict=True)
        if g
    ]


@call_backward.register_fake
def _(name, tensors, grads, kinds, floats, ints, grad_out):
    return [torch.empty_like(t) for t, g in zip(tensors, grads, strict=True) if g]


def _setup(ctx: Any, inputs: tuple, output: Any) -> None:
    name, tensors, grads, kinds, floats, ints = inputs
    ctx.save_for_backward(*tensors)
    ctx.call = (name, grads, kinds, floats, ints)


def _backward(ctx: Any, grad_out: torch.Tensor) -> tuple:
    name, grads, kinds, floats, ints = ctx.call
    if grad_out is None:
        return None, [None] * len(grads), None, None, _none_like(floats), _none_like(ints)
    tensors = list(ctx.saved_tensors)
    computed = iter(call_backward(name, tensors, grads, kinds, floats, ints, grad_out))
    tensor_grads = [next(computed) if g else None for g in grads]
    # Shaped as the inputs: torch takes lists of tensors apart, and empty lists, but
    # holds any other list whole.
    return None, tensor_grads, None, None, _none_like(floats), _none_like(ints)


def _none_like(values: list) -> list | None:
    return [] if not values else None


def _setup_writing_returning(ctx: Any, inputs: tuple, output: Any) -> None:
    """As ``_setup``, keeping what the written arguments hold after the call, as eager mode's
    backward sees them: the traced code copies it into them, which the inputs' saved
    versions would not survive."""
    name, tensors, grads, kinds, floats, ints = inputs
    saved = list(tensors)
    positions = [k for k, kind in enumerate(kinds.split(",")) if kind == "t"]
    for k, value in zip(_written(name), output[0], strict=True):
        saved[positions.index(k)] = value
    _setup(ctx, (name, saved, grads, kinds, floats, ints), output)


def _backward_writing_returning(ctx: Any, _written: list, grad_out: torch.Tensor) -> tuple:
    return _backward(ctx, grad_out)


call.register_autograd(_backward, setup_context=_setup)
call_writing_returning.register_autograd(
    _backward_writing_returning, setup_context=_setup_writing_returning
)


def traced_call(name: str, *args: Any) -> torch.Tensor | None:
    """The function ``name`` names, called on ``args`` as an operator torch can trace."""
    tensors, grads, kinds, floats, ints = pack(args)
    kind, written = operator_kind(name)
    if kind == "call":
        return call(name, tensors, grads, kinds, floats, ints)
    result = None
    if kind == "writing":
        values = call_writing(name, tensors, grads, kinds, floats, ints)
    else:
        values, result = call_writing_returning(name, tensors, grads, kinds, floats, ints)
    # In place, as the kernel writes in eager mode: torch orders every use of them around it.
    # Not differentiable, as there: a written tensor does not take part in autograd.
    for k, value in zip(written, values, strict=True):
        args[k].copy_(value.detach())
    return result
