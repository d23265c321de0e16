"""Whether a call may write a tensor in place: what its memory and autograd allow."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def unwritable(t: torch.Tensor, tracked: bool = True) -> str | None:
    """Why a call cannot write ``t`` in place, None when it can: its elements share memory (an
    expanded tensor's), or, with grad mode on, it requires grad where autograd cannot record the
    write: a leaf, written through autograd (``tracked``), or any tensor the kernel writes
    itself."""
    expanded = [
        d for d, (n, s) in enumerate(zip(t.shape, t.stride(), strict=True)) if n > 1 and s == 0
    ]
    if expanded:
        return (
            "the call writes this tensor, so its elements must not share memory, as an expanded "
            f"tensor's do (stride 0 in dimension {expanded[0]}): pass a clone"
        )
    if not (t.requires_grad and torch.is_grad_enabled()):
        return None
    if not tracked:
        return "a tensor written by the kernel must not require grad"
    if t.is_leaf:
        return (
            "the call writes this tensor in place, so it must not be a leaf that requires grad "
            "(pass a clone, or one without grad)"
        )
    return None


def sharing(t: torch.Tensor, kept: Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """Why a call cannot write ``t``, which shares memory with one of the tensors autograd keeps
    for the call's backward (``kept``, each with its name in messages), changing what the
    backward reads; None when it shares none."""
    for name, k in kept:
        if _overlap(t, k):
            return (
                f"the call writes this tensor, which shares memory with {name}, a tensor "
                "autograd keeps for the backward pass: pass a clone"
            )
    return None


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the bytes ``a`` and ``b`` span meet."""
    if a.device != b.device or a.is_meta or not a.numel() or not b.numel():
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def _span(t: torch.Tensor) -> tuple[int, int]:
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()
