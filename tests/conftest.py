"""Shared fixtures: the device kind under test and where its torch tensors live."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

# The suite makes what CUDA builds need itself, whatever an install prepared (test_prepared.py
# tests reading prepared files).
os.environ["SLANGSPEC_PREPARED_DIR"] = os.path.join(tempfile.gettempdir(), "slangspec-unprepared")
# Processes of the suite build in-process; test_compile_server.py starts servers of its own.
os.environ["SLANGSPEC_COMPILE_SERVER"] = "off"
DEVICE_KIND = os.environ.get("SLANGSPEC_DEVICE", "vulkan")
TORCH_DEVICE = "cuda" if DEVICE_KIND == "cuda" else "cpu"


@pytest.fixture(scope="session")
def kind() -> str:
    return DEVICE_KIND


@pytest.fixture(scope="session")
def tdev() -> str:
    """The torch device that tensors passed to slangspec live on for this device kind."""
    return TORCH_DEVICE


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    """One cache for the session, so kernels compile once across tests."""
    return str(tmp_path_factory.mktemp("slangspec-cache"))


@pytest.fixture(autouse=True)
def _seed() -> None:
    import torch  # here, not at the top: pytest-xdist's controller loads this file too

    torch.manual_seed(0)


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server of this test's own."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def release_devices(under: str | None = None) -> None:
    """Release the slangpy devices (one per cache root a process uses), compilers and Slang
    sessions this process holds, or only those of cache roots ``under`` a directory: the suite
    runs in few processes, which otherwise hold every one of them to the end."""
    import gc

    from slangspec.aot import warm
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.runtime import devices, vulkan_backend

    def mine(key: object) -> bool:
        return under is None or under in repr(key)

    for table in (warm._modules, vulkan_backend._compilers, cuda_source._sessions):
        for key in [k for k in table if mine(k)]:
            del table[key]
    if under is None:
        cuda_source._spares.clear()
        # Compiled graphs and the functions their operators call hold modules, and so devices.
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
        traced = sys.modules.get("slangspec.runtime.traced")
        if traced is not None:
            traced._functions.clear()
    gc.collect()
    if under is None:
        devices.close_devices()
    else:
        with devices._lock:
            opened = [devices._devices.pop(k) for k in list(devices._devices) if mine(k)]
        for device in opened:
            device.close()
    _give_back_freed_memory()


def _give_back_freed_memory() -> None:
    """Return to the system what the released devices and sessions freed: glibc keeps freed
    heap for reuse, so a process that opened many devices (a cache root each) otherwise stays
    as large as at its peak."""
    import contextlib
    import ctypes

    with contextlib.suppress(AttributeError):  # not glibc
        ctypes.CDLL(None).malloc_trim(0)


@pytest.fixture(autouse=True, scope="module")
def _devices_released_after_each_file():
    yield
    release_devices()


@pytest.fixture(autouse=True)
def _devices_of_a_tests_own_cache_released(request):
    """A test's cache roots under its own ``tmp_path`` are of no later test: their devices go
    when it ends, not with its file."""
    own = str(request.getfixturevalue("tmp_path")) if "tmp_path" in request.fixturenames else None
    yield
    if own is not None:
        from slangspec.runtime import devices

        if any(own in directory for _, directory in devices._devices):
            release_devices(own)
