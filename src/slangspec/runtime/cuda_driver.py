"""Launching compiled kernels through the CUDA driver, on torch's stream, and loading them from
the cache's binaries.

A dispatch through slangpy's command encoder costs several times a driver launch on the calling
thread, more when forward and backward alternate with torch's autograd thread, and a process's
first one pays a one-time set-up. Launching the kernel's own ``CUfunction`` with its entry-point
parameters packed at their reflected offsets needs no set-up.

A kernel is built as a cubin with its parameter layout (``compile``'s CUDA build) and kept so; a
process loads it with ``cuModuleLoadData`` into torch's own (primary) context, and a later one
that finds it in the cache never imports slangpy nor starts Slang.

The driver is declared through ctypes (``cuda_api``) rather than NVIDIA's ``cuda-bindings``: the
bindings launch a little faster but take long to import, which a warm process pays before its
first launch and would win back only after tens of thousands of launches
(``benchmarks/driver_launch.py``; figures in docs/benchmarks.md).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, NamedTuple

from ..codegen import ENTRY_POINT
from ..codegen.uniforms import Layout, UniformBlock
from ..define import frozen
from .cuda_api import SIZE, CudaDriverError, P, check, driver

_BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 0  # CU_LAUNCH_PARAM_* markers of ``extra``


def _param_bytes(function: P) -> int:
    """Size of the kernel's parameter block, from the driver's view of its parameters."""
    end, index = 0, 0
    offset, size = SIZE(), SIZE()
    info = driver().cuFuncGetParamInfo
    while not info(function, index, ctypes.byref(offset), ctypes.byref(size)):
        end = max(end, offset.value + size.value)
        index += 1
    return end


@frozen
class CachedBinary:
    """A kernel as the cache keeps it for CUDA: cubin, parameter layout, threads per group,
    and the name of its ``__global__`` function in the cubin."""

    cubin: bytes
    layout: Layout
    group: int
    entry: str = ENTRY_POINT


@frozen
class Unloaded:
    """A CUDA kernel built and kept, not loaded: what a process that builds for an
    architecture (``SLANGSPEC_CUDA_ARCH``) holds of it."""

    binary: CachedBinary


class LaunchParts(NamedTuple):
    """A ``DriverKernel``'s function, threads per group, the lock guarding its parameter buffer,
    that buffer, ``cuLaunchKernel``'s ``extra`` pointing at it, and ``cuLaunchKernel``."""

    function: P
    group: int
    lock: threading.Lock
    buffer: ctypes.Array[ctypes.c_char]
    extra: ctypes.Array[P]
    launch: Any


_LOCAL_SIZE_BYTES = 3  # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
_REFUSED_FOR_MEMORY = {
    1: "more than CUDA lets a thread keep (512 KiB)",  # CUDA_ERROR_INVALID_VALUE
    2: "more than the GPU gives all the threads it keeps at once",  # CUDA_ERROR_OUT_OF_MEMORY
}
_MUCH_LOCAL_MEMORY = 16384


def launch_failed(function: P, result: int) -> None:
    """Raise the driver's refusal (``result``) to launch ``function``; where the kernel takes
    so much local memory a thread that it is the likely cause, say so and what to do."""
    try:
        check(result, "cuLaunchKernel")
    except CudaDriverError as e:
        local = ctypes.c_int()
        driver().cuFuncGetAttribute(ctypes.byref(local), _LOCAL_SIZE_BYTES, function)
        if result not in _REFUSED_FOR_MEMORY or local.value < _MUCH_LOCAL_MEMORY:
            raise
        raise CudaDriverError(
            f"{e}: the kernel takes {local.value:,} bytes of local memory a thread, "
            f"{_REFUSED_FOR_MEMORY[result]}. A backward pass keeps what "
            "each iteration of a loop computed: read the loop's values from tensors (an "
            "IDiffTensor parameter, or an array a differentiable function only indexes, which "
            "is passed as a view; docs/calling.md), or loop fewer times"
        ) from None


def _function(module: Any, name: str) -> P:
    function = P()
    check(
        driver().cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
        "cuModuleGetFunction",
    )
    return function


class DriverKernel:
    """A kernel's ``CUfunction`` and a reusable parameter buffer, which one thread at a time
    packs and launches."""

    @classmethod
    def from_binary(cls, binary: CachedBinary) -> DriverKernel:
        """Load a cached cubin; the module stays loaded for the life of the process."""
        module = P()
        check(driver().cuModuleLoadData(ctypes.byref(module), binary.cubin), "cuModuleLoadData")
        function = _function(module, binary.entry)
        return cls(function, UniformBlock(binary.layout), binary.group, module, binary)

    def __init__(
        self, function: P, block: UniformBlock, group: int, owner: Any, binary: CachedBinary
    ) -> None:
        self._owner = owner
        self.binary = binary
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
            launch_failed(self._function, result)
