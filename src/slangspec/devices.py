"""Which slangpy device a call runs on: the ``device=`` argument, ``SLANGSPEC_DEVICE``, else CUDA
when torch sees a GPU and slangpy can open it, else Vulkan; and what identifies that device in a
cache key."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

import slangpy as spy
import torch

DEVICE_KINDS = ("cuda", "vulkan")
_TYPES = {"cuda": spy.DeviceType.cuda, "vulkan": spy.DeviceType.vulkan}


class ShaderCache(Protocol):
    """Where a Vulkan device keeps target code and pipelines: ``checkout()`` gives the directory
    (called only when a Vulkan device opens), ``size`` its bound in bytes, and ``directory``
    names the cache it belongs to."""

    directory: Path
    size: int

    def checkout(self) -> Path: ...


class DeviceUnavailableError(RuntimeError):
    """No slangpy device of the requested (or any) kind could be opened."""


_devices: dict[tuple[str, str], spy.Device] = {}
cuda_torch_device: torch.device | None = None
"""The torch CUDA device whose context the slangpy CUDA device shares, once opened."""
_lock = threading.Lock()


def _open(kind: str, shaders: ShaderCache) -> spy.Device:
    # Sources are content-addressed and keyed by us; slangpy's file watcher would rebuild every
    # session whenever a generated kernel lands on an include path.
    options: dict[str, object] = {"enable_hot_reload": False}
    if kind == "cuda":
        # No shader cache: the cache keeps each kernel's cubin itself, and a shader-cache hit
        # would skip the code generation that cubin is captured from.
        if not torch.cuda.is_available():
            raise DeviceUnavailableError("cuda: torch sees no CUDA device")
        torch.cuda.init()
        torch.cuda.current_stream()
        # Share torch's context so torch CUDA memory is addressable by our kernels in place.
        handles = spy.get_cuda_current_context_native_handles()
        global cuda_torch_device
        cuda_torch_device = torch.device("cuda", torch.cuda.current_device())
        return spy.Device(type=spy.DeviceType.cuda, existing_device_handles=handles, **options)
    return spy.Device(
        type=_TYPES[kind],
        shader_cache_path=shaders.checkout(),
        shader_cache_size=shaders.size,
        **options,
    )


def open_device(kind: str, shaders: ShaderCache) -> spy.Device:
    """The process-wide slangpy device of ``kind`` that keeps target code in ``shaders``
    (Vulkan; CUDA keeps none), opened on first use."""
    with _lock:
        device = _devices.get((kind, str(shaders.directory)))
        if device is None:
            try:
                device = _open(kind, shaders)
            except DeviceUnavailableError:
                raise
            except Exception as exc:
                raise DeviceUnavailableError(f"{kind}: {exc}") from exc
            _devices[(kind, str(shaders.directory))] = device
        return device


def opened() -> bool:
    """Whether this process has opened any device (and so must not fork)."""
    return bool(_devices) or torch.cuda.is_initialized()


def torch_device(kind: str) -> torch.device:
    """The torch device whose tensors a slangspec device of ``kind`` takes and returns."""
    if kind == "cuda":
        assert cuda_torch_device is not None, "open the cuda device first"
        return cuda_torch_device
    return torch.device("cpu")


def device_identity(kind: str, device: spy.Device) -> dict[str, str]:
    """The device type and the target it compiles for, as a cache key covers them."""
    identity = {"kind": kind, "adapter": device.info.adapter_name}
    if kind == "cuda":
        major, minor = torch.cuda.get_device_capability()
        identity["arch"] = f"sm_{major}{minor}"
    return identity


def select_device(requested: str | None, shaders: ShaderCache) -> tuple[str, spy.Device]:
    """Resolve the device kind by the documented order and open it (see ``open_device``)."""
    name = requested or os.environ.get("SLANGSPEC_DEVICE") or None
    if name is not None:
        name = name.lower()
        if name not in DEVICE_KINDS:
            source = "device=" if requested else "SLANGSPEC_DEVICE="
            raise ValueError(
                f"{source}{name!r} is not a device kind; expected one of {DEVICE_KINDS}"
            )
        return name, open_device(name, shaders)
    failures = []
    for kind in DEVICE_KINDS:
        try:
            return kind, open_device(kind, shaders)
        except DeviceUnavailableError as exc:
            failures.append(str(exc))
    raise DeviceUnavailableError("no usable device; tried " + "; ".join(failures))
