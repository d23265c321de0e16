"""Shared fixtures: the device kind under test and where its torch tensors live."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

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
    torch.manual_seed(0)


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server of this test's own."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def release_devices() -> None:
    """Release the slangpy devices (one per cache root a process uses), compilers and Slang
    sessions this process holds: the suite runs in one process, which otherwise holds every
    one of them to the end."""
    import gc

    from slangspec import devices, warm
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.runtime import vulkan_backend

    warm._modules.clear()
    vulkan_backend._compilers.clear()
    cuda_source._sessions.clear()
    gc.collect()
    devices.close_devices()
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
