"""CUDA source -> cubin per GPU architecture through NVRTC (ctypes), with no CUDA install, no
driver and no GPU: the library and the CUDA headers come from NVIDIA's wheels, the ones the
``cuda`` extra installs or the ones a CUDA build of torch carries.

Options are the ones Slang gives NVRTC for its CUDA output (C++17, warnings off, and for code
that uses ``half`` the CUDA headers with the prelude's half support turned on); the
architecture is a real one (``sm_90``), so NVRTC writes SASS and nothing is left to the
driver's JIT.

Slang writes its CUDA prelude (about 300,000 characters) at the head of every source, and
reading it is most of a small kernel's NVRTC time. ``warm_up`` given the prelude a cache kept
from an earlier build precompiles it (NVRTC's ``-pch``) on a thread while Slang works; a later
compile whose source begins with that same text includes it as a header and reads the
precompiled one instead. The cubin is the same byte for byte.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
import re
import shutil
import stat
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...cache_store import process_gone
from ...errors import Error

_NVIDIA_LIBRARIES = ("cu13/lib/libnvrtc.so.13*", "cuda_nvrtc/lib/libnvrtc.so.*")
"""Where NVIDIA's wheels put NVRTC under their ``nvidia`` package, newest CUDA first: the CUDA 13
wheels share one directory, the CUDA 12 ones have one per component."""
_NVIDIA_HEADERS = ("cu13/include", "cuda_runtime/include")
_HALF_HEADER = "cuda_fp16.h"
_ARCH = re.compile(r"sm_\d+[af]?\Z")
BASE_OPTIONS = ("-std=c++17", "-w")
_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t
PRELUDE_HEADER = "slang-cuda-prelude.h"
"""The name a source includes its prelude by when the prelude is precompiled."""
_INCLUDE_PRELUDE = f'#include "{PRELUDE_HEADER}"\n'


class NvrtcUnavailableError(Error, RuntimeError):
    """NVRTC cannot be found or loaded."""


class NvrtcError(Error, RuntimeError):
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
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The cubin of ``source`` for ``arch``, with ``options`` added to ``options(arch,
        half)`` and ``headers`` (by name) for it to include; NvrtcError carrying NVRTC's log
        when it does not compile. A source that begins with a prelude ``warm_up`` precompiled
        for ``arch`` reads the precompiled one."""
        flags = [*self.options(arch, half), *options]
        precompiled = _precompiled.get(arch)
        plain = half or options or headers
        if precompiled is not None and not plain and precompiled.begins(source):
            body = _INCLUDE_PRELUDE + source[len(precompiled.prelude) :]
            with precompiled.lock:  # NVRTC may write a precompiled header on a mismatch
                try:
                    return self._cubin(
                        body, [*flags, *precompiled.options], name, precompiled.headers, arch
                    )
                except NvrtcError:
                    # Its directory removed under it, say: compiled as without it from now on,
                    # and a source that does not compile says so plainly.
                    _precompiled.pop(arch, None)
        return self._cubin(source, flags, name, headers or {}, arch)

    def _cubin(
        self, source: str, flags: list[str], name: str, headers: Mapping[str, str], arch: str
    ) -> bytes:
        lib, program = self._lib, _P()
        count = len(headers)
        texts = (ctypes.c_char_p * count)(*(t.encode() for t in headers.values()))
        names = (ctypes.c_char_p * count)(*(n.encode() for n in headers))
        created = lib.nvrtcCreateProgram(
            ctypes.byref(program), source.encode(), name.encode(), count, texts, names
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

    def precompile(self, prelude: str, arch: str, directory: Path) -> bool:
        """Whether NVRTC precompiled ``prelude`` for ``arch`` into ``directory`` (False where
        this NVRTC has no ``-pch``, or its heap for it ran out)."""
        flags = [*self.options(arch), "-pch", f"--pch-dir={directory}"]
        try:
            headers = {PRELUDE_HEADER: prelude}
            self._cubin(_INCLUDE_PRELUDE, flags, "slangspec_prelude.cu", headers, arch)
        except NvrtcError:
            return False
        return any(Path(directory).iterdir())


@functools.cache
def nvrtc() -> Nvrtc:
    """The process's NVRTC, loaded on first use."""
    return Nvrtc()


_WARM_UP = 'extern "C" __global__ void slangspec_warm_up() {}\n'


def _pch_directory() -> Path:
    """A new directory for NVRTC's precompiled headers (about 30 MB each), in this process's
    own in one of the user's under the temporary directory, where those of processes no
    longer running (killed, or ended without running exit handlers, as pool workers do) are
    removed first."""
    parent = Path(tempfile.gettempdir()) / f"slangspec-nvrtc-{os.getuid()}"
    parent.mkdir(mode=0o700, exist_ok=True)
    found = parent.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        return Path(tempfile.mkdtemp(prefix="slangspec-nvrtc-"))
    for child in parent.iterdir():
        if not child.name.isdigit() or process_gone(int(child.name)):
            shutil.rmtree(child, ignore_errors=True)
    mine = parent / str(os.getpid())
    mine.mkdir(mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=mine))


def _remove(directory: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, whose parent still reads it
        shutil.rmtree(directory, ignore_errors=True)


_threads: list[threading.Thread] = []
"""NVRTC's threads, which a fork waits for."""


class _Precompiled:
    """``prelude`` being precompiled for ``arch`` on a thread of its own, into a directory of
    the process's (removed at exit)."""

    def __init__(self, prelude: str, arch: str) -> None:
        self.prelude = prelude
        self.headers = {PRELUDE_HEADER: prelude}
        directory = _pch_directory()
        weakref.finalize(self, _remove, directory, os.getpid())
        self.options = ("-pch", f"--pch-dir={directory}")
        self.lock = threading.Lock()
        self._made = False
        self._thread = threading.Thread(
            target=self._make, args=(arch, directory), name="slangspec-nvrtc", daemon=True
        )
        self._thread.start()
        _threads.append(self._thread)

    def _make(self, arch: str, directory: Path) -> None:
        with contextlib.suppress(NvrtcError, NvrtcUnavailableError, ValueError, OSError):
            self._made = nvrtc().precompile(self.prelude, arch, directory)

    def begins(self, source: str) -> bool:
        """Whether ``source`` begins with the prelude and it was precompiled (waiting for the
        thread that does it)."""
        if not source.startswith(self.prelude):
            return False
        self._thread.join()
        return self._made


_precompiled: dict[str, _Precompiled] = {}
_warmed: set[str] = set()


def precompiled_archs() -> list[str]:
    """The architectures this process holds the CUDA prelude precompiled for."""
    return list(_precompiled)


def warm_up(arch: str, prelude: str | None = None) -> None:
    """Start NVRTC (its first compile in a process costs about 0.2 s more than later ones) on
    a thread of its own, so that it starts while Slang works: with ``prelude``, by
    precompiling it for ``arch`` (once per process and architecture), else by compiling an
    empty kernel (once). A failure is left to the compile that needs NVRTC to report."""
    if arch in _precompiled:
        return
    if prelude is not None:
        with contextlib.suppress(OSError):  # no directory for it: NVRTC starts as without one
            _precompiled[arch] = _Precompiled(prelude, arch)
            return
    if arch not in _warmed:
        _warmed.add(arch)

        def run() -> None:
            with contextlib.suppress(NvrtcError, NvrtcUnavailableError, ValueError):
                nvrtc().compile(_WARM_UP, arch, name="slangspec_warm_up.cu")

        thread = threading.Thread(target=run, name="slangspec-nvrtc", daemon=True)
        thread.start()
        _threads.append(thread)


def _wait_for_threads() -> None:
    # A child forked while NVRTC works on another thread would find its locks held forever.
    for thread in _threads:
        thread.join()


def _forget_in_child() -> None:
    _precompiled.clear()
    _warmed.clear()
    _threads.clear()


os.register_at_fork(before=_wait_for_threads, after_in_child=_forget_in_child)


def cubins(
    source: str, archs: Sequence[str], half: bool = False, compiler: Nvrtc | None = None
) -> dict[str, bytes]:
    """One cubin of ``source`` (which uses ``half`` or not) per architecture in ``archs``, by
    architecture."""
    compiler = compiler or nvrtc()
    return {arch: compiler.compile(source, arch, half) for arch in dict.fromkeys(archs)}
