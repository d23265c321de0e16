"""Which device kind a call runs on: the ``device=`` argument, ``SLANGSPEC_DEVICE``, else CUDA
when torch sees a GPU, else Vulkan; the CUDA device torch works on and its architecture; and
slangpy's Vulkan device, opened when something must be compiled or dispatched. What identifies
a device in a cache key is its build backend's (``cuda_backend``, ``vulkan_backend``).

Settings reach it as values its callers read (``settings.setting``): it reads none itself,
and knows nothing of the cache.

Nothing here imports slangpy until a device is opened: a CUDA process whose kernels are all
cached launches them through the driver and never needs one. Nor torch until a default device
kind or torch's device is asked for: a warming worker, told its kind, never imports it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import Error
from .cuda_api import compute_capability

if TYPE_CHECKING:
    import slangpy as spy
    import torch


class ShaderCache(Protocol):
    """Where a Vulkan device keeps target code and pipelines: ``checkout()`` gives the directory
    (called only when a Vulkan device opens), ``size`` its bound in bytes, and ``directory``
    names the cache it belongs to."""

    directory: Path
    size: int

    def checkout(self) -> Path: ...


class DeviceUnavailableError(Error, RuntimeError):
    """No device of the requested (or any) kind can be used, or slangpy cannot open one."""


_devices: dict[tuple[str, str], spy.Device] = {}
_cuda_torch_device: torch.device | None = None
_lock = threading.Lock()


def _open(kind: str, shaders: ShaderCache) -> spy.Device:
    import slangpy as spy

    if kind != "vulkan":
        raise ValueError("slangspec opens slangpy devices for Vulkan only")
    # Sources are content-addressed and keyed by us; slangpy's file watcher would rebuild every
    # session whenever a generated kernel lands on an include path.
    return spy.Device(
        type=spy.DeviceType.vulkan,
        shader_cache_path=shaders.checkout(),
        shader_cache_size=shaders.size,
        enable_hot_reload=False,
    )


def open_device(kind: str, shaders: ShaderCache) -> spy.Device:
    """The process-wide slangpy device of ``kind`` (Vulkan: CUDA builds through ``compile``
    and launches through the driver, with no slangpy device) that keeps target code in
    ``shaders``, opened on first use."""
    with _lock:
        device = _devices.get((kind, str(shaders.directory)))
        if device is None:
            try:
                device = _open(kind, shaders)
            except ImportError as exc:
                raise DeviceUnavailableError(f"{kind}: slangpy cannot be imported ({exc})") from exc
            except Exception as exc:
                raise DeviceUnavailableError(f"{kind}: {exc}") from exc
            if not _devices:
                # Registered after torch's own exit handlers, so it runs before them.
                atexit.register(close_devices)
            _devices[(kind, str(shaders.directory))] = device
        return device


def close_devices() -> None:
    """Close every device this process opened, its pending work done first. Run at exit: a
    CUDA device shares torch's context, and one left to the interpreter's teardown can be
    destroyed after that context is, which crashes the process after its work is done."""
    with _lock:
        opened_devices = list(_devices.values())
        _devices.clear()
    if opened_devices and _torch_cuda_initialized():
        sys.modules["torch"].cuda.synchronize()
    for device in opened_devices:
        device.close()


def _torch_cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def opened() -> bool:
    """Whether this process has opened any device (and so must not fork)."""
    return bool(_devices) or _torch_cuda_initialized()


def cuda_torch_device() -> torch.device:
    """The torch device whose tensors a CUDA module takes and returns: torch's current device
    when slangspec first used CUDA."""
    import torch

    global _cuda_torch_device
    with _lock:
        if _cuda_torch_device is None:
            if not torch.cuda.is_available():
                raise DeviceUnavailableError("cuda: torch sees no CUDA device")
            torch.cuda.init()
            _cuda_torch_device = torch.device("cuda", torch.cuda.current_device())
        return _cuda_torch_device


def cuda_ordinal() -> int:
    """The CUDA device slangspec uses: torch's (``torch_device``) in a process that has imported
    torch, else device 0, which is torch's current device in a new process."""
    return cuda_torch_device().index if sys.modules.get("torch") is not None else 0


def cuda_arch(ordinal: int, given: str | None) -> str:
    """The architecture CUDA kernels are built for: ``given`` (``SLANGSPEC_CUDA_ARCH`` as read)
    where set, else that of CUDA device ``ordinal`` as the driver reports it (``sm_90``)."""
    if given is not None:
        return given
    major, minor = compute_capability(ordinal)
    return f"sm_{major}{minor}"


GPU_DRIVER_NODES = ("/dev/nvidiactl", "/dev/dxg", "/dev/kfd")
"""Device nodes of the drivers through which torch can see a GPU (NVIDIA's, WSL's, ROCm's)."""


def gpu_driver_present() -> bool:
    """Whether a GPU driver has a device node: without one torch cannot see a GPU, so it is not
    imported to be asked."""
    return any(os.path.exists(node) for node in GPU_DRIVER_NODES)


def device_kind(requested: str | None) -> str:
    """The device kind by the documented order: ``requested``, the kind ``device=`` else
    ``SLANGSPEC_DEVICE`` asks for as read (``settings.setting("SLANGSPEC_DEVICE", device,
    "device")``), when either does; else CUDA when torch sees a GPU, else Vulkan. Opens
    nothing."""
    if requested is None:
        if not gpu_driver_present():
            return "vulkan"
        import torch

        return "cuda" if torch.cuda.is_available() else "vulkan"
    return requested
