"""CUDA source -> cubin per GPU architecture through NVRTC (ctypes), with no CUDA install, no
driver and no GPU: the library and the CUDA headers come from NVIDIA's wheels, the ones the
``cuda`` extra installs or the ones a CUDA build of torch carries.

Options are the ones Slang gives NVRTC for its CUDA output (C++17, warnings off, and for code
that uses ``half`` the CUDA headers with the prelude's half support turned on); the
architecture is a real one (``sm_90``), so NVRTC writes SASS and nothing is left to the
driver's JIT.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import re
import threading
from collections.abc import Sequence
from pathlib import Path

_NVIDIA_LIBRARIES = ("cu13/lib/libnvrtc.so.13*", "cuda_nvrtc/lib/libnvrtc.so.*")
"""Where NVIDIA's wheels put NVRTC under their ``nvidia`` package, newest CUDA first: the CUDA 13
wheels share one directory, the CUDA 12 ones have one per component."""
_NVIDIA_HEADERS = ("cu13/include", "cuda_runtime/include")
_HALF_HEADER = "cuda_fp16.h"
_ARCH = re.compile(r"sm_\d+[af]?\Z")
BASE_OPTIONS = ("-std=c++17", "-w")
_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t


class NvrtcUnavailableError(RuntimeError):
    """NVRTC cannot be found or loaded."""


class NvrtcError(RuntimeError):
    """NVRTC refused a source; ``log`` is its compile log."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


def is_arch(text: str) -> bool:
    """Whether ``text`` names a GPU architecture as NVRTC takes it (``sm_90``, ``sm_90a``)."""
    return _ARCH.match(text) is not None


def _nvidia_roots() -> list[Path]:
    """The directories of the ``nvidia`` namespace package that NVIDIA's wheels install into."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def library_path() -> Path:
    """NVRTC from NVIDIA's wheels; NvrtcUnavailableError naming the ``cuda`` extra when none
    is installed."""
    for pattern in _NVIDIA_LIBRARIES:
        for root in _nvidia_roots():
            found = sorted(root.glob(pattern))
            if found:
                return found[0]
    raise NvrtcUnavailableError(
        "NVRTC is not installed: install slangspec's 'cuda' extra "
        "(pip install 'slangspec[cuda]'), which brings NVIDIA's nvidia-cuda-nvrtc-cu12 wheel"
    )


def half_headers() -> Path | None:
    """The directory holding ``cuda_fp16.h`` and the headers it includes, from NVIDIA's
    wheels; None when none is installed."""
    for name in _NVIDIA_HEADERS:
        for root in _nvidia_roots():
            if (root / name / _HALF_HEADER).is_file():
                return root / name
    return None


def _string(lib: ctypes.CDLL, program: _P, size_call: str, call: str) -> bytes:
    size = _SIZE()
    getattr(lib, size_call)(program, ctypes.byref(size))
    buffer = ctypes.create_string_buffer(size.value)
    getattr(lib, call)(program, buffer)
    return buffer.raw


class Nvrtc:
    """An NVRTC library: its version and compiles to cubin. NVRTC compiles separate programs on
    several threads at once, and ctypes lets go of the GIL while it does."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or library_path()
        try:
            lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise NvrtcUnavailableError(f"cannot load NVRTC from {self.path}: {exc}") from exc
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(_P),
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            _P,
            _P,
        ]
        lib.nvrtcCompileProgram.argtypes = [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(_P)]
        for name in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize"):
            getattr(lib, name).argtypes = [_P, ctypes.POINTER(_SIZE)]
        for name in ("nvrtcGetProgramLog", "nvrtcGetCUBIN"):
            getattr(lib, name).argtypes = [_P, ctypes.c_char_p]
        self._lib = lib
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)
        """NVRTC's (major, minor) version, for keys: it decides the code of every cubin."""
        self.half_headers = half_headers()

    def _check(self, result: int, what: str, log: str = "") -> None:
        if result:
            name = (self._lib.nvrtcGetErrorString(result) or b"NVRTC error").decode()
            raise NvrtcError(f"{what}: {name} ({result})", log)

    def options(self, arch: str, half: bool = False) -> list[str]:
        """The options a compile for ``arch`` (``sm_90``) passes; with ``half``, for code that
        uses ``half`` (reading NVIDIA's half header costs about a third more time)."""
        if not is_arch(arch):
            raise ValueError(f"{arch!r} is not a GPU architecture such as 'sm_90'")
        options = [*BASE_OPTIONS, f"-arch={arch}"]
        if half:
            if self.half_headers is None:
                raise NvrtcUnavailableError(
                    "the code uses half and NVIDIA's CUDA headers are not installed: install "
                    "slangspec's 'cuda' extra, which brings nvidia-cuda-runtime-cu12"
                )
            options += [f"-I{self.half_headers}", "-DSLANG_CUDA_ENABLE_HALF"]
        return options

    def compile(
        self,
        source: str,
        arch: str,
        half: bool = False,
        options: Sequence[str] = (),
        name: str = "slangspec.cu",
    ) -> bytes:
        """The cubin of ``source`` for ``arch``, with ``options`` added to ``options(arch,
        half)``; NvrtcError carrying NVRTC's log when it does not compile."""
        lib, program = self._lib, _P()
        flags = [*self.options(arch, half), *options]
        created = lib.nvrtcCreateProgram(
            ctypes.byref(program), source.encode(), name.encode(), 0, None, None
        )
        self._check(created, "nvrtcCreateProgram")
        try:
            array = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
            failed = lib.nvrtcCompileProgram(program, len(flags), array)
            if failed:
                log = _string(lib, program, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog")
                text = log.rstrip(b"\0").decode(errors="replace")
                self._check(failed, f"NVRTC could not compile {name} for {arch}", text)
            return _string(lib, program, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))


@functools.cache
def nvrtc() -> Nvrtc:
    """The process's NVRTC, loaded on first use."""
    return Nvrtc()


_WARM_UP = 'extern "C" __global__ void slangspec_warm_up() {}\n'


@functools.cache
def warm_up(arch: str) -> threading.Thread:
    """Start NVRTC (its first compile in a process costs about 0.2 s more than later ones) on
    a thread of its own, once per process, so that it starts while Slang does; the thread
    ends once it has, and a failure is left to the compile that needs NVRTC to report."""

    def run() -> None:
        with contextlib.suppress(NvrtcError, NvrtcUnavailableError, ValueError):
            nvrtc().compile(_WARM_UP, arch, name="slangspec_warm_up.cu")

    thread = threading.Thread(target=run, name="slangspec-nvrtc-warm-up", daemon=True)
    thread.start()
    return thread


def cubins(
    source: str, archs: Sequence[str], half: bool = False, compiler: Nvrtc | None = None
) -> dict[str, bytes]:
    """One cubin of ``source`` (which uses ``half`` or not) per architecture in ``archs``, by
    architecture."""
    compiler = compiler or nvrtc()
    return {arch: compiler.compile(source, arch, half) for arch in dict.fromkeys(archs)}
