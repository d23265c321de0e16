"""polyops: a cubic polynomial, evaluated by a Slang kernel whose compiled forms ship in this
package (``kernels/``, written by ``specialize cache export --for-package``)."""

from pathlib import Path

import torch

import slangspec

_HERE = Path(__file__).parent
_ops = slangspec.load(_HERE / "cubic.slang", shipped=_HERE / "kernels")


def cubic(coeffs: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """c0 + c1 x + c2 x^2 + c3 x^3 for each element of ``x``; differentiable in both."""
    return _ops.cubic(coeffs, x)
