"""Launching compiled kernels through the CUDA driver, on torch's stream, and loading them from
the cache's binaries.

A dispatch through slangpy's command encoder costs several times a driver launch on the calling
thread, more when forward and backward alternate with torch's autograd thread, and a process's
first one pays a one-time set-up. Launching the kernel's own ``CUfunction`` with its entry-point
parameters packed at their reflected offsets needs no set-up.

A kernel slangpy compiled is kept as a cubin with its parameter layout; a later process loads
that with ``cuModuleLoadData`` into torch's own (primary) context and never imports slangpy nor
starts Slang, which for a module importing slangpy's own library is slow even when every Slang
cache is warm, and never opens slangpy's CUDA device.

The driver is declared through ctypes (``cuda_api``) rather than NVIDIA's ``cuda-bindings``: the
bindings launch a little faster but take long to import, which a warm process pays before its
first launch and would win back only after tens of thousands of launches
(``benchmarks/driver_launch.py``; figures in docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..codegen import ENTRY_POINT
from ..cuda_api import SIZE, CudaDriverError, P, check, driver
from ..uniforms import Layout, UniformBlock

if TYPE_CHECKING:
    from ..compiler import CompiledKernel

_BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 0  # CU_LAUNCH_PARAM_* markers of ``extra``
_INPUT_PTX = 1  # CU_JIT_INPUT_PTX


def _param_bytes(function: P) -> int:
    """Size of the kernel's parameter block, from the driver's view of its parameters."""
    end, index = 0, 0
    offset, size = SIZE(), SIZE()
    info = driver().cuFuncGetParamInfo
    while not info(function, index, ctypes.byref(offset), ctypes.byref(size)):
        end = max(end, offset.value + size.value)
        index += 1
    return end


def cubin_from_ptx(ptx: bytes) -> bytes:
    """PTX compiled for the current context's GPU, so that loading it needs no JIT."""
    lib = driver()
    state = P()
    check(lib.cuLinkCreate_v2(0, None, None, ctypes.byref(state)), "cuLinkCreate")
    try:
        text = ptx if ptx.endswith(b"\0") else ptx + b"\0"
        check(
            lib.cuLinkAddData_v2(state, _INPUT_PTX, text, len(text), b"kernel.ptx", 0, None, None),
            "cuLinkAddData",
        )
        image, size = P(), SIZE()
        check(lib.cuLinkComplete(state, ctypes.byref(image), ctypes.byref(size)), "cuLinkComplete")
        return ctypes.string_at(image, size.value)
    finally:
        lib.cuLinkDestroy(state)


@dataclass(frozen=True)
class CachedBinary:
    """A kernel as the cache keeps it for CUDA: cubin, parameter layout, threads per group."""

    cubin: bytes
    layout: Layout
    group: int


class LaunchParts(NamedTuple):
    """A ``DriverKernel``'s function, threads per group, the lock guarding its parameter buffer,
    that buffer, ``cuLaunchKernel``'s ``extra`` pointing at it, and ``cuLaunchKernel``."""

    function: P
    group: int
    lock: threading.Lock
    buffer: ctypes.Array[ctypes.c_char]
    extra: ctypes.Array[P]
    launch: Any


def _function(module: Any) -> P:
    function = P()
    check(
        driver().cuModuleGetFunction(ctypes.byref(function), module, ENTRY_POINT.encode()),
        "cuModuleGetFunction",
    )
    return function


class DriverKernel:
    """A kernel's ``CUfunction`` and a reusable parameter buffer, which one thread at a time
    packs and launches."""

    @classmethod
    def from_compiled(cls, kernel: CompiledKernel) -> DriverKernel:
        """The function in the CUDA module slangpy loaded for ``kernel``."""
        if kernel.block is None:
            raise CudaDriverError("kernel parameters are not plain data; cannot launch directly")
        function = _function(kernel.pipeline.native_handle.value)
        # ``kernel`` holds slangpy's pipeline, which owns the CUDA module.
        return cls(function, kernel.block, kernel.group, owner=kernel)

    @classmethod
    def from_binary(cls, binary: CachedBinary) -> DriverKernel:
        """Load a cached cubin; the module stays loaded for the life of the process."""
        module = P()
        check(driver().cuModuleLoadData(ctypes.byref(module), binary.cubin), "cuModuleLoadData")
        return cls(_function(module), UniformBlock(binary.layout), binary.group, owner=module)

    def __init__(self, function: P, block: UniformBlock, group: int, owner: Any) -> None:
        self._owner = owner
        self.block = block
        self._function = function
        size = _param_bytes(function)
        if size < block.size:
            raise CudaDriverError(
                f"kernel takes {size} bytes of parameters; its layout needs {block.size}"
            )
        self._group = group
        self._launch = driver().cuLaunchKernel
        self._lock = threading.Lock()
        self._buffer = ctypes.create_string_buffer(max(size, 1))
        self._size = SIZE(size)
        self._extra = (P * 5)(
            _BUFFER_POINTER,
            ctypes.addressof(self._buffer),
            _BUFFER_SIZE,
            ctypes.addressof(self._size),
            _END,
        )

    def parts(self) -> LaunchParts:
        """What a generated call needs to pack this kernel's block and launch it itself."""
        return LaunchParts(
            self._function, self._group, self._lock, self._buffer, self._extra, self._launch
        )

    def launch(self, n: int, kwargs: dict[str, Any], stream: int) -> None:
        """Run ``n`` threads on ``stream`` with ``kwargs`` as the entry-point parameters."""
        groups = (n + self._group - 1) // self._group
        with self._lock:
            self.block.pack_into(self._buffer, kwargs)
            result = self._launch(
                self._function, groups, 1, 1, self._group, 1, 1, 0, P(stream), None, self._extra
            )
        if result:
            check(result, "cuLaunchKernel")
