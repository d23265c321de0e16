"""slangspec calls as torch operators, for code that torch.compile traces.

Eager calls go straight to a specialization's kernels. While torch traces, a call becomes one
of these custom operators instead, so that a compiled graph holds it without a break:

- ``slangspec::call`` returns the function's result;
- ``slangspec::call_outputs``, for a function with ``out``/``inout`` parameters, a written
  ``IWDiffTensor`` or a struct result, returns every output (``output_routes``); the traced
  code copies each parameter's into its tensor through autograd, as an eager call does, and
  builds the result (a dict for a struct);
- ``slangspec::call_writing`` and ``slangspec::call_writing_returning``, for a function that
  writes ``IRWTensor``/``IWTensor`` arguments, return what those arguments hold after the call
  (the kernel writes into copies), which the traced code copies back into them; the second
  also returns the function's result. Being functional, they can carry autograd: an operator
  that mutates its inputs cannot.

All take the call's arguments (dicts included) flattened into lists torch can describe
(``pack``): the tensors, whether each took part in autograd when the call was traced, the
other arguments' kinds, and their values. Their fake implementations work the outputs' shapes
and dtypes out of the specialization plan, running nothing; autograd runs
``slangspec::call_backward`` (``call_outputs_backward``: a cotangent per output), which
picks the backward kernel of the call's grad mask as eager mode does.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor

from ..signatures import call_signature
from ..signatures.text import compose_call_signature
from ..signatures.values import Packing, Unpacking, flagged, flagged_forms, row_of_class
from ..specializer.kinds import Writes, declared_kind
from ..specializer.plan import RESULT, output_routes
from .call_rows import shaping
from .call_values import leaf_reader
from .partial_writes import merged
from .shapes import broadcast
from .specialization import Specialization

if TYPE_CHECKING:
    from ..specializer import FunctionInfo, SpecializationPlan

_A = TypeVar("_A")


class Traceable(Protocol):
    """What the operators need of a slangspec function."""

    id: str
    operator_name: str | None

    @property
    def torch_device(self) -> torch.device: ...

    def plan_for_signature(self, signature: str) -> SpecializationPlan: ...

    def specialization(self, signature: str) -> Specialization: ...

    def agreed(self, what: str, of: Callable[[FunctionInfo], _A]) -> _A: ...


# The classes of the tensors torch traces a call with, in the rows' memo before any call is
# traced: torch guards a graph on the memo as tracing found it, so a class first kept there
# later would fail the guards and compile the graph again.
for _tensor_class in (torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor):
    row_of_class(_tensor_class)

_functions: dict[str, Traceable] = {}
_numbers = itertools.count()


def operator_name(fn: Traceable) -> str:
    """The name the operators know ``fn`` by in this process."""
    if fn.operator_name is None:
        fn.operator_name = f"{fn.id}#{next(_numbers)}"
        _functions[fn.operator_name] = fn
    return fn.operator_name


def _written(name: str) -> tuple[int, ...]:
    """The positions of the function's written tensor parameters (``IRWTensor``, ``RWTensor``,
    ``IWTensor``, ``WTensor``)."""
    return _functions[name].agreed("the tensors they write", _writing("itself"))


def _writing(how: Writes) -> Callable[[FunctionInfo], tuple[int, ...]]:
    """The positions of a function's parameters whose tensors a call writes ``how``."""

    def positions(info: FunctionInfo) -> tuple[int, ...]:
        rows = [declared_kind(p.type) for p in info.params]
        return tuple(k for k, row in enumerate(rows) if row is not None and row.writes == how)

    return positions


@torch._dynamo.assume_constant_result
def operator_kind(name: str) -> tuple[str, tuple[int, ...]]:
    """Which operator calls the function: "call"; "outputs" for one with more outputs than a
    plain result (``out``/``inout`` parameters, a written ``IWDiffTensor``, a struct result);
    for one that writes ``IRWTensor``/``IWTensor`` arguments "writing" or, when it also
    returns a value, "writing_returning". And the positions of the arguments it writes."""
    fn = _functions[name]
    written = _written(name)
    routes = fn.agreed("their outputs", output_routes)
    if routes and routes != ((RESULT, ()),):
        if written:
            raise TypeError(
                f"{fn.id}: a function that writes IRWTensor/IWTensor arguments and has out/inout "
                "parameters, a written differentiable tensor or a struct result cannot be "
                "called in code torch compiles; call it outside (torch.compiler.disable)"
            )
        return "outputs", ()
    if not written:
        return "call", written
    returns = fn.agreed("their results", lambda o: o.returns.kind != "void")
    return ("writing_returning" if returns else "writing"), written


@torch._dynamo.assume_constant_result
def output_layout(
    name: str,
) -> tuple[tuple[tuple[int, tuple[str, ...]], ...], bool, tuple[int, ...]]:
    """Where the "outputs" operator's tensors go (``output_routes``), whether the result is a
    struct, and the positions of the written differentiable tensors, which a call may write
    only part of."""
    fn = _functions[name]
    return (
        fn.agreed("their outputs", output_routes),
        fn.agreed("their results", lambda o: o.returns.kind == "struct"),
        fn.agreed("the tensors they write", _writing("output")),
    )


def pack(args: Sequence[Any]) -> tuple[list[torch.Tensor], list[bool], str, list[float], list[int]]:
    """The call's arguments as operator inputs: tensors, their grad flags, one kind per
    argument, floats, ints, each value as its row of the value table (``signatures.values``)
    packs it: t tensor, f float, i int, b bool, g grid, with the grid's rank, s a strided one, r
    the call shape of ``_result=``; ``x<name>:<dims>`` a generator; a tuple or list of numbers
    their letters in parentheses, ``(fif)``. Grid extents, offsets and strides and generators' int
    fields are among the ints. A dict (a struct's fields) is flattened: each value's kind says
    where it sits, ``t@1.dir`` (argument 1, field ``dir``), ``e@...`` an empty dict,
    ``n<name>@...`` the struct a dict names (its ``"_type"``)."""
    packing = Packing(torch.is_grad_enabled())
    for k, a in enumerate(args):
        packing.index = k
        packing.add(a)
    return packing.tensors, packing.grads, ",".join(packing.kinds), packing.floats, packing.ints


def unpack(
    tensors: Sequence[Any], kinds: str, floats: Sequence[float], ints: Sequence[int]
) -> list[Any]:
    """The arguments ``pack`` flattened, dicts rebuilt; ``tensors`` may stand in for the
    tensors with anything (their grad flags, their positions)."""
    args: list[Any] = []
    source = Unpacking(tensors, floats, ints)
    for entry in kinds.split(",") if kinds else ():
        kind, _, where = entry.partition("@")
        value = source.value(kind)
        if not where:
            args.append(value)
            continue
        index, *path = where.split(".")
        if len(args) == int(index):
            args.append({})
        node = args[int(index)]
        for name in path[:-1]:
            node = node.setdefault(name, {})
        if path:
            node[path[-1]] = value
    return args


def _signature(fn: Traceable, args: list[Any], grads: Sequence[bool]) -> str:
    """The call signature the traced call had: its tensors' grad flags as they were then."""
    try:
        return compose_call_signature(fn.id, flagged_forms(args, grads))
    except Exception:
        # Off the replayed path: the error an eager call with those flags raises, which names
        # the argument.
        with torch.enable_grad():
            return call_signature(fn.id, flagged(args, grads))


def _specialization(name: str, args: list[Any], grads: Sequence[bool]) -> Specialization:
    fn = _functions[name]
    signature = _signature(fn, args, grads)
    spec = fn.specialization(signature)
    _traceable(fn, spec.plan)
    return spec


def _traceable(fn: Traceable, plan: SpecializationPlan) -> None:
    """TypeError unless the operators carry ``plan``'s calls: a function that writes
    ``IRWTensor``/``IWTensor`` arguments returns one result at most."""
    written = any(a.row.writes == "itself" for a in plan.args)
    if plan.outputs and plan.returns is None and written:
        operator_kind(fn.operator_name or operator_name(fn))  # raises, naming the function


def _outputs_like(name: str, args: list[Any], grads: Sequence[bool]) -> list[torch.Tensor]:
    """Empty tensors of the outputs' shapes, dtypes and device, from the plan alone."""
    fn = _functions[name]
    plan = fn.plan_for_signature(_signature(fn, args, grads))
    _traceable(fn, plan)
    reader = leaf_reader(plan, fn.torch_device)
    leaves = reader(args) if reader is not None else args
    leading, whole = shaping(plan)
    shapes = [leaves[i].shape[:dims] for i, dims in leading]
    call_shape = broadcast(shapes + [leaves[i].shape for i in whole])
    device = next((a.device for a in leaves if isinstance(a, torch.Tensor)), None)
    device = device or fn.torch_device
    return [
        torch.empty_like(leaves[o.leaf])
        if plan.is_whole(o)
        else torch.empty(call_shape + o.elem, dtype=getattr(torch, o.dtype), device=device)
        for o in plan.outputs
    ]


def _result_like(name: str, args: list[Any], grads: Sequence[bool]) -> torch.Tensor:
    """An empty tensor of the result's shape, dtype and device, from the plan alone."""
    outputs = _outputs_like(name, args, grads)
    assert outputs, "a function that returns nothing is called through call_writing"
    return outputs[0]


_ARGUMENTS = "str name, Tensor[] tensors, bool[] grads, str kinds, float[] floats, SymInt[] ints"


def _with_copies(name: str, args: list[Any]) -> tuple[list[Any], list[torch.Tensor]]:
    """``args`` with a copy in place of each argument the function writes, and the copies."""
    args = list(args)
    copies = []
    for k in _written(name):
        args[k] = args[k].clone()
        copies.append(args[k])
    return args, copies


def _places(spec: Specialization, values: list[Any]) -> list[Any]:
    """Values standing in for the arguments (grad flags, positions), read as the leaves are."""
    return spec.places(values) if spec.places is not None else values


def _leaves(spec: Specialization, args: list[Any]) -> list[Any]:
    """The value of each leaf of ``spec``'s plan, read out of dicts."""
    return spec.leaves(args) if spec.leaves is not None else args


def _forward(name, tensors, grads, kinds, floats, ints) -> torch.Tensor:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    return spec.forward(_leaves(spec, args))[0]


def _forward_outputs(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    return list(spec.forward(_leaves(spec, args)))


def _forward_writing(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    args, written = _with_copies(name, args)
    spec.forward(_leaves(spec, args))
    return written


def _forward_writing_returning(
    name, tensors, grads, kinds, floats, ints
) -> tuple[list[torch.Tensor], torch.Tensor]:
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    args, written = _with_copies(name, args)
    return written, spec.forward(_leaves(spec, args))[0]


def _fake_result(name, tensors, grads, kinds, floats, ints) -> torch.Tensor:
    return _result_like(name, unpack(tensors, kinds, floats, ints), grads)


def _fake_outputs(name, tensors, grads, kinds, floats, ints) -> list[torch.Tensor]:
    return _outputs_like(name, unpack(tensors, kinds, floats, ints), grads)


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
    torch.library.register_fake(f"slangspec::{op}", _reporting(fake), lib=_LIBRARY)
    return getattr(torch.ops.slangspec, op).default


def _reporting(fake: Callable[..., Any]) -> Callable[..., Any]:
    """``fake`` raising a bad argument's TypeError or ValueError, while torch compiles, as the
    cause of the graph break it is: torch makes a TypeError the cause of what it raises, but
    raises a ValueError's message as a RuntimeError of its own, from None."""

    @functools.wraps(fake)
    def reporting(*args: Any) -> Any:
        try:
            return fake(*args)
        except (TypeError, ValueError) as exc:
            if not torch.compiler.is_compiling():
                raise
            raise torch._dynamo.exc.Unsupported(str(exc)) from exc

    return reporting


def _backward_forward(name, tensors, grads, kinds, floats, ints, grad_out) -> list[torch.Tensor]:
    """Gradients of the tensors whose grad flag is set, in order, from the result's
    cotangent."""
    return _outputs_backward(name, tensors, grads, kinds, floats, ints, [grad_out])


def _outputs_backward(name, tensors, grads, kinds, floats, ints, grad_outs) -> list[torch.Tensor]:
    """As ``_backward_forward``, from one cotangent per output (None: zero)."""
    args = unpack(tensors, kinds, floats, ints)
    spec = _specialization(name, args, grads)
    # A backward kernel re-runs the function's writes: into copies, never into saved inputs.
    args, _ = _with_copies(name, args)
    leaves = _leaves(spec, args)
    flags = _places(spec, unpack(grads, kinds, floats, ints))
    positions = _places(spec, unpack(range(len(tensors)), kinds, floats, ints))
    fed = [i for i, a in enumerate(spec.plan.args) if a.row.reads]
    mask = ["0"] * len(leaves)
    for i in fed:
        if flags[i] and spec.plan.args[i].grad:
            mask[i] = "1"
    by_position: dict[int, torch.Tensor] = {}
    if "1" in mask:
        computed = spec.backward(leaves, grad_outs, "".join(mask))
        by_position = {positions[i]: computed[i] for i in fed if computed[i] is not None}
    return [
        by_position[j] if j in by_position else torch.zeros_like(t)
        for j, (t, g) in enumerate(zip(tensors, grads, strict=True))
        if g
    ]


def _fake_backward(name, tensors, grads, kinds, floats, ints, grad_out) -> list[torch.Tensor]:
    return [torch.empty_like(t) for t, g in zip(tensors, grads, strict=True) if g]


call = _define("call", _forward, _fake_result, "Tensor")
call_outputs = _define("call_outputs", _forward_outputs, _fake_outputs, "Tensor[]")
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
call_outputs_backward = _define(
    "call_outputs_backward",
    _outputs_backward,
    _fake_backward,
    "Tensor[]",
    ", Tensor?[] grad_outs",
)


def _below_autograd(op, keyset, name, tensors, grads, kinds, floats, ints) -> Any:
    """``op`` called on a call's packed arguments with the keys of ``keyset`` past autograd's:
    what an autograd kernel runs once it has recorded the call, or where nothing is recorded."""
    below = keyset & torch._C._after_autograd_keyset
    return op.redispatch(below, name, tensors, grads, kinds, floats, ints)


def _gradients(
    ctx: Any, grads: Sequence[bool], computed: Iterable[torch.Tensor] | None
) -> tuple[torch.Tensor | None, ...]:
    """What the backward of a Function that recorded a call returns: None for each of its
    inputs before the call's tensors, then, per tensor, the next of ``computed`` where its flag
    in ``grads`` is set, else None; None for every tensor where ``computed`` is None."""
    leading = (None,) * (len(ctx.needs_input_grad) - len(grads))
    if computed is None:
        return (*leading, *([None] * len(grads)))
    each = iter(computed)
    return (*leading, *(next(each) if g else None for g in grads))


class _Recorded(torch.autograd.Function):
    """A call autograd records, whose backward is ``slangspec::call_backward``. ``op``'s
    outputs come flat: what the written arguments hold after the call (``written`` of them),
    then the result."""

    @staticmethod
    def forward(ctx, op, keyset, written, name, grads, kinds, floats, ints, *tensors):
        out = _below_autograd(op, keyset, name, list(tensors), grads, kinds, floats, ints)
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
        if grad_out is None:
            return _gradients(ctx, grads, None)
        tensors = list(ctx.saved_tensors)
        computed = call_backward(name, tensors, grads, kinds, floats, ints, grad_out)
        return _gradients(ctx, grads, computed)


_LIBRARY.define("snapshot(Tensor t) -> Tensor")
_LIBRARY.impl("snapshot", torch.clone, "CompositeExplicitAutograd")
torch.library.register_fake("slangspec::snapshot", torch.empty_like, lib=_LIBRARY)
_snapshot = torch.ops.slangspec.snapshot.default
"""A copy of a tensor as it is now, which a compiled graph keeps: of a tensor the call's
outputs are then copied into, a clone would be recomputed from that tensor in the backward
graph, and torch would save the tensor itself, which the copy then changes."""


class _RecordedOutputs(torch.autograd.Function):
    """A call of the "outputs" operator autograd records: one cotangent per output."""

    @staticmethod
    def forward(ctx, op, keyset, name, grads, kinds, floats, ints, *tensors):
        outputs = _below_autograd(op, keyset, name, list(tensors), grads, kinds, floats, ints)
        # The traced code copies outputs into these arguments: keep them as the call read them.
        written = _overwritten(name, kinds)
        ctx.save_for_backward(*(_snapshot(t) if j in written else t for j, t in enumerate(tensors)))
        ctx.call = (name, grads, kinds, floats, ints)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        name, grads, kinds, floats, ints = ctx.call
        if all(g is None for g in grad_outputs):
            return _gradients(ctx, grads, None)
        tensors = list(ctx.saved_tensors)
        cotangents = list(grad_outputs)
        computed = call_outputs_backward(name, tensors, grads, kinds, floats, ints, cotangents)
        return _gradients(ctx, grads, computed)


def _overwritten(name: str, kinds: str) -> set[int]:
    """The positions among the packed tensors of those the call's outputs are copied into:
    in ``out``/``inout`` arguments and written differentiable tensors."""
    routes = _functions[name].agreed("their outputs", output_routes)
    written = {k for k, _ in routes if k != RESULT}
    found: set[int] = set()
    count = tensors = 0  # arguments and tensors seen so far
    for entry in kinds.split(",") if kinds else ():
        kind, _, where = entry.partition("@")
        index = int(where.split(".")[0]) if where else count
        count = max(count, index + 1)
        if kind == "t":
            if index in written:
                found.add(tensors)
            tensors += 1
    return found


def _autograd(op: Any, written: bool) -> None:
    """Record calls of ``op`` for autograd where a tensor of theirs takes part in it; else (a
    compiled graph's replay runs with grad off) go straight to the call."""

    def kernel(keyset, name, tensors, grads, kinds, floats, ints):
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            flat = _Recorded.apply(op, keyset, written, name, grads, kinds, floats, ints, *tensors)
            return (list(flat[:-1]), flat[-1]) if written else flat[0]
        return _below_autograd(op, keyset, name, tensors, grads, kinds, floats, ints)

    _LIBRARY.impl(op._schema.name.split("::")[1], kernel, "Autograd", with_keyset=True)


_autograd(call, written=False)
_autograd(call_writing_returning, written=True)


def _outputs_kernel(keyset, name, tensors, grads, kinds, floats, ints):
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return list(
            _RecordedOutputs.apply(call_outputs, keyset, name, grads, kinds, floats, ints, *tensors)
        )
    return _below_autograd(call_outputs, keyset, name, tensors, grads, kinds, floats, ints)


_LIBRARY.impl("call_outputs", _outputs_kernel, "Autograd", with_keyset=True)


def traced_call(name: str, *args: Any) -> Any:
    """The function ``name`` names, called on ``args`` as an operator torch can trace."""
    tensors, grads, kinds, floats, ints = pack(args)
    kind, written = operator_kind(name)
    if kind == "call":
        return call(name, tensors, grads, kinds, floats, ints)
    if kind == "outputs":
        outputs = call_outputs(name, tensors, grads, kinds, floats, ints)
        return _finish(args, outputs, *output_layout(name))
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


def _finish(
    args: Sequence[Any],
    outputs: Sequence[torch.Tensor],
    routes: tuple[tuple[int, tuple[str, ...]], ...],
    result_struct: bool,
    partly: tuple[int, ...],
) -> Any:
    """As an eager call finishes: each output of a parameter copied into its tensor (through
    autograd; of a written differentiable tensor, at ``partly``, what the call wrote of it),
    then the result, a dict for a struct."""
    result: Any = None
    for out, (source, path) in zip(outputs, routes, strict=True):
        if source != RESULT:
            target = args[source]
            for key in path:
                target = target[key]
            if isinstance(target, torch.Tensor):  # else a Python value, which the call reads
                target.copy_(merged(out, target) if source in partly else out)
        elif not result_struct:
            result = out
        else:
            if result is None:
                result = {}
            node = result
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = out
    return result
