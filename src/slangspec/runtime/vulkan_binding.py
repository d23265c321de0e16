"""Binding CPU torch tensors to kernel parameters on Vulkan: staged through slangpy buffers,
dispatched through slangpy, results copied back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import slangpy as spy
import torch

from .shapes import contiguous_strides

if TYPE_CHECKING:
    from .backend import CompiledKernel

_USAGE = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access


def _submit(device: spy.Device, kernel: CompiledKernel, n: int, kwargs: dict[str, Any]) -> None:
    """Dispatch ``n`` threads through slangpy, writing the uniforms as one block where the layout
    allows."""
    if kernel.block is None:
        kernel.kernel.dispatch(thread_count=[n, 1, 1], **kwargs)
        return
    data = kernel.block.pack(kwargs)
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    root = compute.bind_pipeline(kernel.pipeline)
    spy.ShaderCursor(root).find_entry_point(0).set_data(data)
    compute.dispatch([n, 1, 1])
    compute.end()
    device.submit_command_buffer(encoder.finish())


class VulkanBinding:
    """One call's bindings on Vulkan: CPU tensors staged through buffers, results copied back."""

    def __init__(self, device: spy.Device) -> None:
        self.device = device
        self.torch_device = torch.device("cpu")
        self.results: list[tuple[torch.Tensor, spy.Buffer]] = []
        self.staged: list[spy.Buffer] = []  # alive until dispatch: kernels hold raw addresses

    def begin(self) -> VulkanBinding:
        """A fresh binding for one call: staging buffers and results belong to that call."""
        return VulkanBinding(self.device)

    def prepare(self, kernel: CompiledKernel) -> CompiledKernel:
        """What ``dispatch`` runs: slangpy's kernel itself."""
        return kernel

    def forward_call(self, plan: Any, kernel: CompiledKernel, call_shape: Any) -> None:
        """None: every call binds through staging buffers."""
        return None

    def backward_call(self, plan: Any, mask: str, kernel: CompiledKernel, generic: Any) -> None:
        """None: every backward binds through staging buffers."""
        return None

    def check(self, name: str, t: torch.Tensor) -> None:
        if t.device.type != "cpu":
            raise ValueError(
                f"{name}: expected a CPU tensor on the vulkan device, got a tensor on {t.device}"
            )

    def _buffer(self, t: torch.Tensor) -> spy.Buffer:
        data = t.detach().contiguous().reshape(-1).numpy().view(np.uint8)
        if data.size == 0:
            data = np.zeros(4, np.uint8)
        buf = self.device.create_buffer(data=data, usage=_USAGE)
        self.staged.append(buf)
        return buf

    def read(self, t: torch.Tensor) -> tuple[int, list[int]]:
        return self._buffer(t).device_address, list(contiguous_strides(tuple(t.shape)))

    def write(self, t: torch.Tensor) -> int:
        buf = self._buffer(t)
        self.results.append((t, buf))
        return buf.device_address

    def _struct(self, buf: spy.Buffer, t: torch.Tensor) -> dict[str, Any]:
        return {
            "_data": buf,
            "_shape": list(t.shape),
            "_strides": list(contiguous_strides(tuple(t.shape))),
            "_offset": 0,
        }

    def read_struct(self, t: torch.Tensor) -> dict[str, Any]:
        return self._struct(self._buffer(t), t)

    def write_struct(self, t: torch.Tensor) -> dict[str, Any]:
        buf = self._buffer(t)
        self.results.append((t, buf))
        return self._struct(buf, t)

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype)

    def zeroed(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        # Zeroed now: binding stages a tensor's contents before dispatch.
        return torch.zeros(shape, dtype=dtype)

    def dispatch(
        self,
        kernel: CompiledKernel,
        n: int,
        kwargs: dict[str, Any],
        zero: Sequence[torch.Tensor] = (),
    ) -> None:
        if n:
            _submit(self.device, kernel, n, kwargs)
        for t, buf in self.results:
            flat = t.detach().view(-1) if t.is_contiguous() else None
            raw = buf.to_numpy().view(np.uint8)[: t.numel() * t.element_size()]
            if flat is not None:
                flat.numpy().view(np.uint8)[:] = raw
            else:
                staged = torch.from_numpy(raw.copy()).view(t.dtype).reshape(t.shape)
                with torch.no_grad():
                    t.copy_(staged)
