"""Rows of the table of Python values (``values``) for arrays: torch tensors and numpy arrays.

Free of torch and numpy at import: a tensor's form is read off its own attributes, and what
needs torch imports it where an array is at hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .scalars import MANIFEST_DTYPES, NUMBER_OF_DTYPE, SLANG
from .text import IDENTIFIER, TensorForm, extent_classes, format_arg, parse_arg
from .value_row import Packing, Unpacking, ValueRow, register, spec_text

_PASSED = list(dict.fromkeys(s.dtype for s in SLANG.values()))
_PASSED_DTYPES = f"{', '.join(_PASSED[:-1])} or {_PASSED[-1]}"
"""The dtypes some parameter takes, for messages: "float16, float32, ... or bool"."""
_TENSOR_SPEC = r"(\w+)\[([^\]]*)\](?:\s+(grad|nograd))?"
_DIM = rf"\d+|{IDENTIFIER}"
_NAMED_EXTENT = 5  # a named dimension is an extent larger than 4

TENSOR_FORMS: dict[tuple[Any, ...], str] = {}
"""The form of each (shape, dtype, grad bit, layout) seen: tensors' forms sit on the hot path."""


def flagged_tensor_signature(t: Any, grad: bool) -> str:
    """``[Dn,Sm,Gk,V...]`` of a torch tensor with grad bit ``grad``: as a traced call, which
    knows which of its tensors took part in autograd, names them. The layout is in the memo's
    key so that only strided tensors, checked on a miss, ever hit."""
    key = (t.shape, t.dtype, grad, t.layout)
    try:
        sig = TENSOR_FORMS.get(key)
    except TypeError:  # sizes torch is tracing symbolically do not hash
        return _tensor_form(t, grad)
    if sig is None:
        sig = _tensor_form(t, grad)
        if len(TENSOR_FORMS) < 4096:
            TENSOR_FORMS[key] = sig
    return sig


def _tensor_form(t: Any, grad: bool) -> str:
    if str(t.layout) != "torch.strided":
        layout = str(t.layout).removeprefix("torch.").strip("_")
        raise TypeError(f"cannot pass a {layout} tensor; expected a strided (dense) tensor")
    name = str(t.dtype).removeprefix("torch.")
    if name not in NUMBER_OF_DTYPE:
        article = "an" if name.startswith("int") else "a"
        raise TypeError(f"cannot pass {article} {name} tensor; expected a {_PASSED_DTYPES} tensor")
    return format_arg(TensorForm(t.dim(), name, grad, extent_classes(t.shape)))


class TensorRow(ValueRow):
    """A torch tensor: ``[Dn,Sm,Gk,V...]``, packed as ``t``, spelled ``dtype[dims] grad``."""

    python_types = ("torch.Tensor",)
    letters = "t"
    forms = (TensorForm,)
    spelling = f"dtype[dims] [grad|nograd] (dtype one of {', '.join(MANIFEST_DTYPES)})"
    order = 0
    reads_last = True  # its dtype[dims] reads bool[3] too, a tuple's spelling

    def form(self, value: Any, grad_on: bool) -> str:
        return flagged_tensor_signature(value, grad_on and value.requires_grad)

    call_form = form  # a dict's tensor fields are on the hot path: no hop through the default

    def problem(self, value: Any) -> Exception | None:
        if value.is_nested:
            return TypeError("cannot pass a nested tensor; expected a strided (dense) tensor")
        return None

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        packing.tensors.append(value)
        packing.grads.append(value.requires_grad and packing.grad_mode)
        packing.kinds.append("t" + where)

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return next(source.tensors)

    def flagged(self, value: Any, grads: Iterator[bool]) -> Any:
        return value.detach().requires_grad_(True) if next(grads) else value.detach()

    def flagged_form(self, value: Any, grads: Iterator[bool]) -> str:
        return flagged_tensor_signature(value, next(grads))

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None:
            return None
        if text.startswith("["):
            parse_arg(text)
            return text
        m = re.fullmatch(_TENSOR_SPEC, text)
        if not m or m.group(1) not in MANIFEST_DTYPES:
            return None
        dims = [d.strip() for d in m.group(2).split(",")] if m.group(2).strip() else []
        for d in dims:
            if not re.fullmatch(_DIM, d):
                raise ValueError(f"argument spec {spec!r}: dimension {d!r} is not an int or a name")
        shape = [int(d) if d.isdigit() else _NAMED_EXTENT for d in dims]
        dtype = MANIFEST_DTYPES[m.group(1)]
        grad = m.group(3) == "grad"
        return format_arg(TensorForm(len(shape), dtype, grad, extent_classes(shape)))

    def tensors(self, value: Any) -> list[Any]:
        return [value]

    def form_grad(self, form: Any) -> bool:
        return form.grad


class NumpyRow(ValueRow):
    """A numpy array: ``np[Dn,Sm,G0,V...]``, the form of ``torch.from_numpy(array)``, bound as
    that tensor on the call's device. Not packed: a traced call takes no numpy array."""

    python_types = ("numpy.ndarray",)

    def form(self, value: Any, grad_on: bool) -> str:
        import torch

        return "np" + flagged_tensor_signature(torch.from_numpy(value), False)

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None or not text.startswith("np["):
            return None
        parse_arg(text)
        return text

    def to_torch(self, value: Any, device: Any) -> Any:
        import torch

        return torch.from_numpy(value).to(device)


register(TensorRow())
register(NumpyRow())
