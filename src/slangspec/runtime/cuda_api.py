"""The CUDA driver through ctypes: the calls every part of slangspec that touches CUDA needs, and
the primary context torch's runtime works in. Imports neither torch nor slangpy, so a process can
create its context while it imports them (``aot.pool``).
"""

from __future__ import annotations

import ctypes
import functools

from ..errors import Error

P = ctypes.c_void_p
SIZE = ctypes.c_size_t
UINT = ctypes.c_uint


class CudaDriverError(Error, RuntimeError):
    """The CUDA driver refused a call."""


@functools.cache
def driver() -> ctypes.CDLL:
    """libcuda, loaded once."""
    lib = ctypes.CDLL("libcuda.so.1")
    # cuLaunchKernel has no argtypes: converting its eleven arguments through them costs a
    # noticeable share of a launch. Callers pass pointers as ctypes values and the rest as ints
    # that fit a C int.
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(P), P, ctypes.c_char_p]
    lib.cuFuncGetParamInfo.argtypes = [P, SIZE, ctypes.POINTER(SIZE), ctypes.POINTER(SIZE)]
    lib.cuFuncGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, P]
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(P), ctypes.c_char_p]
    lib.cuLinkCreate_v2.argtypes = [UINT, P, P, ctypes.POINTER(P)]
    lib.cuLinkAddData_v2.argtypes = [P, ctypes.c_int, ctypes.c_char_p, SIZE, ctypes.c_char_p]
    lib.cuLinkAddData_v2.argtypes += [UINT, P, P]
    lib.cuLinkComplete.argtypes = [P, ctypes.POINTER(P), ctypes.POINTER(SIZE)]
    lib.cuLinkDestroy.argtypes = [P]
    lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(P), ctypes.c_int]
    lib.cuCtxSetCurrent.argtypes = [P]
    lib.cuDeviceGetName.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
    lib.cuMemsetD8Async.argtypes = [P, ctypes.c_ubyte, SIZE, P]
    return lib


def check(result: int, what: str) -> None:
    if result:
        name = ctypes.c_char_p()
        driver().cuGetErrorName(result, ctypes.byref(name))
        raise CudaDriverError(f"{what}: {(name.value or b'CUDA error').decode()} ({result})")


_COMPUTE_CAPABILITY = (75, 76)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR


def _device(ordinal: int) -> ctypes.c_int:
    lib = driver()
    check(lib.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    return device


@functools.cache
def primary_context(ordinal: int) -> int:
    """The primary context of CUDA device ``ordinal``: the one torch's runtime works in."""
    context = P()
    result = driver().cuDevicePrimaryCtxRetain(ctypes.byref(context), _device(ordinal))
    check(result, "cuDevicePrimaryCtxRetain")
    return context.value or 0


def compute_capability(ordinal: int) -> tuple[int, int]:
    """CUDA device ``ordinal``'s compute capability, as torch's ``get_device_capability``."""
    device = _device(ordinal)
    values = []
    for attribute in _COMPUTE_CAPABILITY:
        value = ctypes.c_int()
        result = driver().cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
        check(result, "cuDeviceGetAttribute")
        values.append(value.value)
    return values[0], values[1]


def make_current(context: int) -> None:
    """Make ``context`` current on the calling thread: a thread that has not used CUDA yet (torch's
    autograd thread, say) has none."""
    result = driver().cuCtxSetCurrent(context)
    if result:
        check(result, "cuCtxSetCurrent")
