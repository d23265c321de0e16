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
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch._dynamo

from ..signature_text import compose_call_signature
from ..signatures import call_signature, flagged_tensor_signature, grid, signature
from .shapes import broadcast
from .specialization import Specialization

if TYPE_CHECKING:
    from ..specializer import SpecializationPlan


class Traceable(Protocol):
    """What the operators need of a slangspec function."""

    id: str
    operator_name: str | None

    @property
    def torch_device(self) -> torch.device: ...

    def plan_for_signature(self, signature: str) -> SpecializationPlan: ...

    def specialization(self, signature: str) -> Specialization: ...


_functions: dict[str, Traceable] = {}
_numbers = itertools.count()


def operator_name(fn: Traceable) -> str:
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
                "a torch tensor, Python float/int/bool or slangspec.grid (a struct's dict, an "
                "out/inout parameter or a struct result: call it outside, torch.compiler.disable)"
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


def _signature(fn: Traceable, args: list[Any], grads: Sequence[bool]) -> str:
    """The call signature the traced call had: its tensors' grad flags as they were then."""
    flags = iter(grads)
    try:
        return compose_call_signature(
            fn.id,
            [
                flagged_tensor_signature(a, next(flags))
                if isinstance(a, torch.Tensor)
                else signature(a)
                for a in args
            ],
        )
    except Exception:
        # Off the replayed path: the error an eager call with those flags raises, which names
        # the argument.
        with torch.enable_grad():
            return call_signature(fn.id, _flagged(args, grads))


def _flagged(args: list[Any], grads: Sequence[bool]) -> list[Any]:
    """``args`` with each tensor's grad flag as the traced call had it."""
    flagged = list(args)
    g = iter(grads)
    for k, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            flagged[k] = a.detach().requires_grad_(True) if next(g) else a.detach()
    return flagged


def _specialization(name: str, args: list[Any], grads: Sequence[bool]) -> Specialization:
    fn = _functions[name]
    signature = _signature(fn, args, grads)
    spec = fn.specialization(signature)
    _traceable(fn, spec.plan)
    return spec


def _traceable(fn: Traceable, plan: SpecializationPlan) -> None:
    """TypeError unless the operators carry ``plan``'s calls: one result at most, no
    ``out``/``inout`` parameter or written differentiable tensor."""
    if plan.outputs and plan.returns is None:
        raise TypeError(
            f"{fn.id}: a function with out/inout parameters, a written differentiable tensor "
            "(IWDiffTensor) or a struct result cannot be called in code torch compiles; call it "
            "outside (torch.compiler.disable)"
        )


def _result_like(name: str, args: list[Any], grads: Sequence[bool]) -> torch.Tensor:
    """An empty tensor of the result's shape, dtype and device, from the plan alone."""
    fn = _functions[name]
    plan = fn.plan_for_signature(_signature(fn, args, grads))
    _traceable(fn, plan)
    shapes = [
        args[i].shape[: a.call_dims]
        for i, a in enumerate(plan.args)
        if a.kind in ("elementwise", "tensor")
    ]
    shapes += [args[i].shape for i, a in enumerate(plan.args) if a.kind == "grid"]
    r = plan.returns
    assert r is not None, "a function that returns nothing is called through call_writing"
    tail = r.elem
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    device = device or fn.torch_device
    return torch.empty(broadcast(shapes) + tail, dtype=getattr(torch, r.dtype), device=device)


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
    return _specialization(name, args, grads).forward(args)[0]


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
    return written, spec.forward(args)[0]


def _fake_result(name, tensors, grads, kinds, floats, ints) -> torch.Tensor:
    return _result_like(name, unpack(tensors, kinds, floats, ints), grads)


def _fake_written(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    return [torch.empty_like(args[k]) for k in _written(name)]


def _fake_written_returning(name, tensors, grads, kinds, floats, ints):
    args = unpack(tensors, kinds, floats, ints)
    return [torch.empty_like(args[k]) for k in _written(name)], _result_like(name, args, grads)


_LIBRARY = torch.library.Library("slangspec", "FRAGMENT")


def _define(op: str, forward: Any, fake: Any, returns: str, extra: str = "") -> Any:
    """Operator ``slangspec::op``: ``forward`` on every device, ``fake`` while tracing.

    Defined through the library itself, not ``torch.library.custom_op``: a compiled graph
    calls its operators on every replay, and custom_op's Python layers (its autograd wrapper
    runs even with grad off) cost each call more than the call itself.
    """
    _LIBRARY.define(f"{op}({_ARGUMENTS}{extra}) -> {returns}")
    _LIBRARY.impl(op, forward, "CompositeExplicitAutograd")
    torch.library.register_fake(f"slangspec::{op}", fake, lib=_LIBRARY)
    return getattr(torch.ops.slangspec, op).default


def _backward_forward(name, tensors, grads, kinds, floats, ints, grad_out) -> list[torch.Tensor]:
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
    computed = spec.backward(args, [grad_out], "".join(mask)) if "1" in mask else [None] * len(args)
    return [
        computed[k] if computed[k] is not None else torch.zeros_like(args[k])
        for k, g in zip(positions, grads, strict=True)
        if g
    ]


def _fake_backward(name, tensors, grads, kinds, floats, ints, grad_out) -> list[torch.Tensor]:
    return [torch.empty_like(t) for t, g in zip(tensors, grads, strict=True) if g]


call = _define("call", _forward, _fake_result, "Tensor")
call_writing = _define("call_writing", _forward_writing, _fake_written, "Tensor[]")
call_writing_returning = _define(
    "call_writing_returning",
    _forward_writing_returning,
    _fake_written_returning,
    "(Tensor[], Tensor)",
)
call_backward = _define(
    "call_backward", _backward_forward, _fake_backward, "Tensor[]", ", Tensor grad_out"
)


class _Recorded(torch.autograd.Function):
    """A call autograd records, whose backward is ``slangspec::call_backward``. ``op``'s
    outputs come flat: what the written arguments hold after the call (``written`` of them),
    then the result."""

    @staticmethod
    def forward(ctx, op, keyset, written, name, grads, kinds, floats, ints, *tensors):
        below = keyset & torch._C._after_autograd_keyset
        out = op.redispatch(below, name, list(tensors), grads, kinds, floats, ints)
        values, result = out if written else ([], out)
        saved = list(tensors)
        if values:
            # The written arguments as the call left them, as eager mode's backward sees them:
            # the traced code copies these into them, which the saved inputs would not survive.
            positions = [k for k, kind in enumerate(kinds.split(",")) if kind == "t"]
            for k, value in zip(_written(name), values, strict=True):
                saved[positions.index(k)] = value
            ctx.mark_non_differentiable(*values)
        ctx.save_for_backward(*saved)
        ctx.call = (name, grads, kinds, floats, ints)
        return (*values, result)

    @staticmethod
    def backward(ctx, *grad_outputs):
        name, grads, kinds, floats, ints = ctx.call
        grad_out = grad_outputs[-1]
        none = (None,) * 8
        if grad_out is None:
            return (*none, *([None] * len(grads)))
        tensors = list(ctx.saved_tensors)
        computed = iter(call_backward(name, tensors, grads, kinds, floats, ints, grad_out))
        return (*none, *(next(computed) if g else None for g in grads))


def _autograd(op: Any, written: bool) -> None:
    """Record calls of ``op`` for autograd where a tensor of theirs takes part in it; else (a
    compiled graph's replay runs with grad off) go straight to the call."""

    def kernel(keyset, name, tensors, grads, kinds, floats, ints):
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            flat = _Recorded.apply(op, keyset, written, name, grads, kinds, floats, ints, *tensors)
            return (list(flat[:-1]), flat[-1]) if written else flat[0]
        below = keyset & torch._C._after_autograd_keyset
        return op.redispatch(below, name, tensors, grads, kinds, floats, ints)

    _LIBRARY.impl(op._schema.name.split("::")[1], kernel, "Autograd", with_keyset=True)


_autograd(call, written=False)
_autograd(call_writing_returning, written=True)


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
