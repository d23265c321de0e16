"""Tensors a call writes only part of, through autograd.

A kernel writes a differentiable tensor (``IWDiffTensor``, ``WDiffTensor``) at the indices its
code chooses, which may be a few elements of it. The call's output starts out as a marker value
in every element, so that afterwards the elements still holding it are the ones the call left
alone: those keep what the tensor held before, and their gradient passes to it, as torch's own
``t[i] = v`` does.

The marker is a signalling NaN with a fixed payload. Arithmetic never yields one (it quiets
NaNs), so only a kernel that copies that very bit pattern out of its inputs could write it.
"""

from __future__ import annotations

import torch

_MARKERS = {
    torch.float32: (torch.int32, 0x7FA5A5A5),
    torch.float64: (torch.int64, 0x7FF4A5A5A5A5A5A5),
    torch.float16: (torch.int16, 0x7D5A),
    torch.bfloat16: (torch.int16, 0x7FA5),
}
"""Per float dtype: the integer dtype of its width, and its marker's bits."""


def unwritten_like(t: torch.Tensor) -> torch.Tensor:
    """A tensor of ``t``'s shape, dtype and device whose every element is the marker, for a
    kernel to write into; a copy of ``t`` where its dtype has no marker (no gradient flows
    through it)."""
    marker = _MARKERS.get(t.dtype)
    if marker is None:
        return t.detach().clone()
    bits, value = marker
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.view(bits).fill_(value)
    return out


def merged(written: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """What a tensor holds after a call that wrote ``written`` (``unwritten_like`` it, then the
    kernel's writes) into it while it held ``before``: the call's elements where it wrote,
    ``before``'s elsewhere, each taking its own gradient."""
    marker = _MARKERS.get(written.dtype)
    if marker is None:
        return written
    bits, value = marker
    return torch.where(written.view(bits) != value, written, before)
