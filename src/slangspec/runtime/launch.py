"""Binding torch tensors to kernel parameters and dispatching, per device kind.

CUDA binds torch CUDA memory in place and launches through the driver on torch's current
stream, in torch's own context: no slangpy. Vulkan (``vulkan_binding``) stages CPU tensors
through slangpy buffers, dispatches through slangpy, and copies results back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from ..cuda_api import make_current
from .cuda_driver import DriverKernel

if TYPE_CHECKING:
    from ..compiler import CompiledKernel


class Binding(Protocol):
    """How one device kind binds torch tensors to kernel parameters and dispatches.

    ``begin`` returns the binding of one call (a binding that keeps per-call state returns a
    fresh one); the other methods bind that call's tensors and run its kernel.
    """

    torch_device: torch.device

    def begin(self) -> Binding: ...

    def prepare(self, kernel: CompiledKernel | DriverKernel) -> Any:
        """What ``dispatch`` runs for ``kernel``, worked out once per kernel."""
        ...

    def check(self, name: str, t: torch.Tensor) -> None:
        """ValueError naming ``name`` when ``t`` is not on this binding's device."""
        ...

    def read(self, t: torch.Tensor) -> tuple[int, list[int]]:
        """Address and element strides of a tensor the kernel reads."""
        ...

    def write(self, t: torch.Tensor) -> int:
        """Address of a tensor the kernel writes, row-major contiguous."""
        ...

    def read_struct(self, t: torch.Tensor) -> dict[str, Any]:
        """A whole tensor the kernel reads, as slangpy's tensor struct."""
        ...

    def write_struct(self, t: torch.Tensor) -> dict[str, Any]:
        """A whole tensor the kernel writes, as slangpy's tensor struct."""
        ...

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor: ...

    def zeros(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor: ...

    def dispatch(self, kernel: Any, n: int, kwargs: dict[str, Any]) -> None:
        """Run ``n`` threads of a prepared kernel with ``kwargs`` as its parameters."""
        ...


class CudaBinding:
    """Bindings on CUDA: pointers into torch's own memory; holds no per-call state."""

    def __init__(self, torch_device: torch.device, context: int) -> None:
        self.torch_device = torch_device
        self.context = context

    def begin(self) -> CudaBinding:
        return self

    def prepare(self, kernel: CompiledKernel | DriverKernel) -> DriverKernel:
        """What ``dispatch`` launches: the kernel's CUDA function (a kernel loaded from the
        cache's binaries already is one)."""
        if isinstance(kernel, DriverKernel):
            return kernel
        return DriverKernel.from_compiled(kernel)

    def check(self, name: str, t: torch.Tensor) -> None:
        if t.device != self.torch_device:
            raise ValueError(
                f"{name}: expected a tensor on {self.torch_device} (the device slangspec "
                f"shares with torch), got a tensor on {t.device}"
            )

    def read(self, t: torch.Tensor) -> tuple[int, list[int]]:
        """Address and element strides of an input, in place."""
        return t.data_ptr(), list(t.stride())

    def write(self, t: torch.Tensor) -> int:
        """Address of a tensor the kernel writes."""
        return t.data_ptr()

    def read_struct(self, t: torch.Tensor) -> dict[str, Any]:
        return {
            "_data": t.data_ptr(),
            "_shape": list(t.shape),
            "_strides": list(t.stride()),
            "_offset": 0,
        }

    write_struct = read_struct

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=self.torch_device)

    def zeros(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=self.torch_device)

    def dispatch(self, kernel: DriverKernel, n: int, kwargs: dict[str, Any]) -> None:
        # A thread that has not used CUDA yet has no current context.
        make_current(self.context)
        kernel.launch(n, kwargs, torch._C._cuda_getCurrentRawStream(self.torch_device.index))
