"""How a call's Python arguments become its kernel's leaves, and its outputs what it returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..signatures.text import NumbersForm, parse_call_signature
from ..specializer.plan import RESULT, SpecializationPlan
from .partial_writes import merged


def leaf_reader(
    plan: SpecializationPlan, device: torch.device | None = None
) -> Callable[[Sequence[Any]], list[Any]] | None:
    """``read(args)``: the value of each of ``plan``'s leaves, read out of the dicts of its
    struct arguments; with ``device``, the numbers given for a scalar parameter as a tensor
    (on the first tensor's device, else ``device``). None when every argument is its own
    leaf as given."""
    spread = []
    if device is not None:
        forms = parse_call_signature(plan.signature).args
        spread = [
            (i, getattr(torch, a.dtype))
            for i, a in enumerate(plan.args)
            if a.kind == "elementwise" and not a.path and isinstance(forms[a.index], NumbersForm)
        ]
    if not spread and not any(p.struct for p in plan.params):
        return None
    where = [(a.index, a.path) for a in plan.args]

    def leaves(args: Sequence[Any]) -> list[Any]:
        values = []
        for index, path in where:
            value = args[index]
            for name in path:
                value = value[name]
            values.append(value)
        if spread:
            on = next((v.device for v in values if isinstance(v, torch.Tensor)), device)
            for i, dtype in spread:
                values[i] = torch.tensor(values[i], dtype=dtype, device=on)
        return values

    return leaves


def finisher(plan: SpecializationPlan) -> Callable[[Sequence[Any], Sequence[torch.Tensor]], Any]:
    """What a call returns from its outputs: the result tensor, a dict for a struct result, or
    None; each ``out``/``inout`` output is first copied into its parameter's tensor (through
    autograd, which so records that tensor as written by the call)."""
    if plan.returns is not None:
        return _first
    if not plan.outputs:
        return _nothing
    results = [(k, o.path) for k, o in enumerate(plan.outputs) if o.source == RESULT]
    written = [
        (k, o.leaf, plan.is_whole(o))
        for k, o in enumerate(plan.outputs)
        if o.source != RESULT and (plan.is_whole(o) or plan.args[o.leaf].direction != "in")
    ]  # an "in" leaf of an inout parameter is a Python value, read and left as it is

    def finish(args: Sequence[Any], outputs: Sequence[torch.Tensor]) -> Any:
        for k, leaf, partly in written:
            target = args[leaf]
            target.copy_(merged(outputs[k], target) if partly else outputs[k])
        if not results:
            return None
        if not plan.result_struct:
            return outputs[results[0][0]]
        tree: dict[str, Any] = {}
        for k, path in results:
            node = tree
            for name in path[:-1]:
                node = node.setdefault(name, {})
            node[path[-1]] = outputs[k]
        return tree

    return finish


def _first(args: Sequence[Any], outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    return outputs[0]


def _nothing(args: Sequence[Any], outputs: Sequence[torch.Tensor]) -> None:
    return None
