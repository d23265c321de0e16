"""Binding torch tensors to kernel parameters and dispatching, per device kind.

CUDA binds torch CUDA memory in place and launches through the driver on torch's current
stream, in torch's own context: no slangpy. Vulkan (``vulkan_binding``) stages CPU tensors
through slangpy buffers, dispatches through slangpy, and copies results back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch

from .cuda_api import P, check, driver
from .cuda_driver import DriverKernel
from .shapes import contiguous_strides

if TYPE_CHECKING:
    from ..specializer.plan import SpecializationPlan
    from .cuda_call import BackwardCall, ForwardCall


class Binding(Protocol):
    """How one device kind binds torch tensors to kernel parameters and dispatches.

    ``begin`` returns the binding of one call (a binding that keeps per-call state returns a
    fresh one); the other methods bind that call's tensors and run its kernel.
    """

    torch_device: torch.device

    def begin(self) -> Binding: ...

    def prepare(self, kernel: Any) -> Any:
        """What ``dispatch`` runs for ``kernel``, worked out once per kernel."""
        ...

    def forward_call(
        self,
        plan: SpecializationPlan,
        kernel: Any,
        call_shape: Callable[[Sequence[Any]], tuple[int, ...]],
    ) -> ForwardCall | None:
        """A function running ``plan``'s prepared forward ``kernel`` on arguments faster than
        binding them one by one, where this binding has one; it returns None for a call it
        leaves to the generic path."""
        ...

    def backward_call(
        self, plan: SpecializationPlan, mask: str, kernel: Any, generic: BackwardCall
    ) -> BackwardCall | None:
        """The autograd node's backward for the grads of ``mask`` through ``plan``'s prepared
        backward ``kernel``, where this binding has its own; it leaves the calls it does not
        handle to ``generic``."""
        ...

    def check(self, name: str, t: torch.Tensor) -> None:
        """ValueError naming ``name`` when ``t`` is not on this binding's device."""
        ...

    def read(self, t: torch.Tensor) -> tuple[int, Sequence[int]]:
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

    def zeroed(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Storage that holds zeros once it has been passed to ``dispatch`` in ``zero``."""
        ...

    def dispatch(
        self, kernel: Any, n: int, kwargs: dict[str, Any], zero: Sequence[torch.Tensor] = ()
    ) -> None:
        """Zero the ``zeroed`` tensors in ``zero``, then run ``n`` threads of a prepared kernel
        (none when ``n`` is 0) with ``kwargs`` as its parameters."""
        ...


class CudaBinding:
    """Bindings on CUDA: pointers into torch's own memory; holds no per-call state."""

    def __init__(self, torch_device: torch.device, context: int) -> None:
        self.torch_device = torch_device
        self.context = context
        self._context = P(context)
        self._set_current = driver().cuCtxSetCurrent
        self._memset = driver().cuMemsetD8Async

    def begin(self) -> CudaBinding:
        return self

    def prepare(self, kernel: Any) -> DriverKernel:
        """What ``dispatch`` launches: the kernel's CUDA function, as every CUDA kernel is."""
        assert isinstance(kernel, DriverKernel), "CUDA kernels are built as driver kernels"
        return kernel

    def forward_call(
        self,
        plan: SpecializationPlan,
        kernel: DriverKernel,
        call_shape: Callable[[Sequence[Any]], tuple[int, ...]],
    ) -> ForwardCall | None:
        from .cuda_call import forward_call

        return forward_call(plan, kernel, self.torch_device, self._make_current, call_shape)

    def backward_call(
        self, plan: SpecializationPlan, mask: str, kernel: DriverKernel, generic: BackwardCall
    ) -> BackwardCall | None:
        from .cuda_call import backward_call

        return backward_call(plan, mask, kernel, self.torch_device, self._make_current, generic)

    def check(self, name: str, t: torch.Tensor) -> None:
        if t.device != self.torch_device:
            raise ValueError(
                f"{name}: expected a tensor on {self.torch_device} (the device slangspec "
                f"shares with torch), got a tensor on {t.device}"
            )

    def read(self, t: torch.Tensor) -> tuple[int, Sequence[int]]:
        """Address and element strides of an input, in place."""
        return t.data_ptr(), t.stride()

    def write(self, t: torch.Tensor) -> int:
        """Address of a tensor the kernel writes."""
        return t.data_ptr()

    def read_struct(self, t: torch.Tensor) -> dict[str, Any]:
        # The packer only indexes shape and strides: torch's own tuples serve.
        return {"_data": t.data_ptr(), "_shape": t.shape, "_strides": t.stride(), "_offset": 0}

    write_struct = read_struct

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        # empty_strided: torch.empty parses its arguments its way, at about twice the cost.
        strides = contiguous_strides(shape)
        return torch.empty_strided(shape, strides, dtype=dtype, device=self.torch_device)

    def zeroed(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Zeroed at dispatch by a driver memset on torch's stream, cheaper than the fill kernel
        torch's own ``zero_`` launches."""
        return self.empty(shape, dtype)

    def dispatch(
        self,
        kernel: DriverKernel,
        n: int,
        kwargs: dict[str, Any],
        zero: Sequence[torch.Tensor] = (),
    ) -> None:
        self._make_current()
        stream = torch._C._cuda_getCurrentRawStream(self.torch_device.index)
        for t in zero:
            size = t.numel() * t.element_size()
            if size:
                result = self._memset(t.data_ptr(), 0, size, stream)
                if result:
                    check(result, "cuMemsetD8Async")
        if n:
            kernel.launch(n, kwargs, stream)

    def _make_current(self) -> None:
        # Once per call, after its allocations: torch's device guard may leave another device's
        # context current, and a thread that has not used CUDA yet has none.
        result = self._set_current(self._context)
        if result:
            check(result, "cuCtxSetCurrent")
