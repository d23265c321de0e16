"""Building kernels, per device kind: the ``Backend`` protocol that each kind's build side
implements (``cuda_backend``, ``vulkan_backend``), the twin of ``launch.Binding``, and what both
share (``SlangBackend``): Slang brought up or said missing (``needing_slang``), and Slang run
against a cache that a concurrent ``cache clear`` or eviction may change under it.

The backends are the runtime's only way to the compile path, through its face
(``slangspec.compile``): the rest of the runtime imports none of it.
"""

from __future__ import annotations

import abc
import contextlib
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeGuard, TypeVar

from ..errors import SlangspecWarning
from ..settings import setting
from ..signatures.module_text import ModuleText
from .devices import DeviceUnavailableError

if TYPE_CHECKING:
    import torch

    from ..cache_store import Entry, ModuleCacheGuard, ShaderSnapshots
    from ..compile import CompiledKernel as CompiledKernel
    from ..compile import SlangCompileError
    from ..specializer import FunctionInfo
    from ..specializer.reflect import Reflected
    from .cache import Cache
    from .cuda_driver import DriverKernel, Unloaded
    from .launch import Binding

RETRIES = 2
T = TypeVar("T")
Kernel: TypeAlias = "CompiledKernel | DriverKernel | Unloaded"
Apart: TypeAlias = "tuple[Path, list[Path], ModuleText]"


class SlangUnavailableError(DeviceUnavailableError):
    """Something the cache lacks must be built or reflected, and slangpy cannot be brought up
    to do it."""


@contextlib.contextmanager
def needing_slang(what: str) -> Iterator[None]:
    """Within the block, a failure to import slangpy, open its device or find and load the
    Slang library its install carries says that ``what`` was not in the cache."""
    try:
        yield
    except SlangUnavailableError:
        raise
    except DeviceUnavailableError as exc:
        raise SlangUnavailableError(f"{what} is not in the cache and needs slangpy: {exc}") from exc
    except ImportError as exc:
        raise SlangUnavailableError(
            f"{what} is not in the cache and needs slangpy, which cannot be imported ({exc})"
        ) from exc
    except RuntimeError as exc:
        if not _slang_library_error(exc):
            raise
        raise SlangUnavailableError(
            f"{what} is not in the cache and needs slangpy's Slang library, which cannot be "
            f"used ({exc})"
        ) from exc


def _slang_library_error(exc: RuntimeError) -> bool:
    """Whether ``exc`` says that Slang's library cannot be found or loaded."""
    # Imported here: only a process that builds through Slang's C API has it, and raises it.
    from ..compile import SlangLibraryError

    return isinstance(exc, SlangLibraryError)


def toolchain_of(memo: Cache) -> dict[str, Any]:
    """The formats and versions a module's cache keys cover besides its code
    (``compile.toolchain``), slangpy's found through ``memo`` when it knows them."""
    from ..compile import toolchain

    return toolchain(memo)


class Sources(Protocol):
    """What a backend builds from (``module_base.BuildModule`` is one): the module's text as
    keyed, where its imports resolve, its defines, the hash its Slang session is known by, the
    cache it builds into and the toolchain that cache's keys cover."""

    name: str
    source: str | None
    """The module's text where it was given as a string (``load_source``), else None."""
    text: ModuleText
    include_paths: list[Path]
    defines: dict[str, str]
    content: str
    cache: Cache
    toolchain: dict[str, Any]
    shaders: ShaderSnapshots


class Backend(Protocol):
    """How one device kind builds: describes a module's functions, runs its front-end, compiles
    generated kernels, forgets a failed session, holds and serves their binaries, loads them,
    and makes the binding that runs them."""

    builds_only: bool
    """Whether this process builds kernels for an architecture and runs none."""
    reflects_once: bool
    """Whether processes sharing a remote tier reflect a module once, the others waiting for
    what the first notes instead of starting Slang."""
    joins_backward: bool
    """Whether a call's backward kernel is built with its forward, in one compile."""

    def identity(self) -> dict[str, str]:
        """The device as a cache key covers it: its kind and what its kernels are built for."""
        ...

    def torch_device(self) -> torch.device:
        """The torch device whose tensors the module takes and returns."""
        ...

    def binding(self, torch_device: torch.device) -> Binding:
        """The binding that runs this backend's kernels on ``torch_device``."""
        ...

    def described(self, function: str) -> tuple[FunctionInfo, ...] | None:
        """Each overload of ``function`` as something other than this process's own front-end
        reflects it; None when it is left to ``front_end``."""
        ...

    def front_end(self) -> Reflected:
        """The module through the Slang front-end, for reflection."""
        ...

    def compile(self, sources: dict[str, str]) -> dict[str, Kernel]:
        """The generated kernels ``sources`` holds (by name), stored and compiled together."""
        ...

    def compiled(self, sources: dict[str, str], apart: Apart | None = None) -> dict[str, Kernel]:
        """The kernels ``sources`` holds (by name) compiled once, in the cache or ``apart``."""
        ...

    def forget_session(self) -> None:
        """Drop the module's Slang session after a failed build: it keeps what it loaded."""
        ...

    def holds(self, entry: Entry, label: str) -> bool:
        """Whether ``entry`` holds kernel ``label`` as a later process loads it."""
        ...

    def binary(self, kernel: Kernel) -> dict[str, Any] | None:
        """The kernel's binary, written, as its entry lists it; None where it has none."""
        ...

    def load(self, key: str, label: str, entry: Entry) -> Kernel | None:
        """Kernel ``label`` from the binary ``entry`` holds; None where it holds none usable."""
        ...


class StillCompilingWarning(SlangspecWarning):
    """Slang has been compiling one module's kernels for ``SLANGSPEC_COMPILE_WARN``."""


@contextlib.contextmanager
def _watched(module: str) -> Iterator[None]:
    """Within the block, a warning from a timer if Slang takes longer than
    ``SLANGSPEC_COMPILE_WARN``: Slang 2026.12 never returns from some backward passes, and a
    process waiting on it says nothing otherwise."""
    after = setting("SLANGSPEC_COMPILE_WARN")
    timer = threading.Timer(after, _still_compiling, (module, after))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _still_compiling(module: str, after: float) -> None:
    warnings.warn(
        f"module '{module}': Slang has been compiling for {after:g} s and has not finished. "
        "Slang 2026.12 never finishes the backward pass of a function that reads a "
        "differentiable tensor inside a branch, or a loop whose bound the call passes "
        "(slangpy issue 1167): read the element before the branch. SLANGSPEC_COMPILE_WARN sets "
        "this wait.",
        StillCompilingWarning,
        stacklevel=1,
    )


class SlangBackend(abc.ABC):
    """What the backends share: Slang run against the cache (``_retried``), or apart from it,
    with the user's own errors named as the user named the module."""

    def __init__(self, module: Sources) -> None:
        self.module = module
        self._module_guard: ModuleCacheGuard | None = None
        self._crash_checked = False

    @property
    def module_guard(self) -> ModuleCacheGuard:
        """slangpy's module cache, sealed and shared (``Cache.module_cache_guard``)."""
        if self._module_guard is None:
            m = self.module
            self._module_guard = m.cache.module_cache_guard(m.toolchain)
        return self._module_guard

    @abc.abstractmethod
    def compiled(self, sources: dict[str, str], apart: Apart | None = None) -> dict[str, Kernel]:
        """Compile the kernels ``sources`` holds (by name) for the module's device, or ``apart``
        from the cache (which then notes nothing of them): by name."""

    @abc.abstractmethod
    def forget_session(self) -> None:
        """Drop the module's Slang session after a failed build: it keeps what it loaded."""

    @abc.abstractmethod
    def _front_end(self, apart: Apart | None) -> Reflected:
        """The module through Slang's front-end once, in the cache or ``apart`` from it."""

    def compile(self, sources: dict[str, str]) -> dict[str, Kernel]:
        """Store generated sources (by name) and compile them together (see ``_retried``)."""
        self._refuse_known_crash()
        cache = self.module.cache

        def attempt() -> dict[str, Kernel]:
            for source in sources.values():
                cache.write_blob("source", source)
            self._module_written()
            return self.compiled(sources)

        def apart() -> dict[str, Kernel]:
            with self._apart() as apart:
                kernels = self.compiled(sources, apart)
            # Kept if they can be; a later process regenerates them from the plan if not.
            with contextlib.suppress(OSError):
                for source in sources.values():
                    cache.write_blob("source", source)
            return kernels

        def lost() -> bool:
            return any(cache.read_blob(name) is None for name in sources)

        return self._retried(attempt, lost, apart)

    def front_end(self) -> Reflected:
        """The user's module through the Slang front-end, for reflection (see ``_retried``)."""

        def apart() -> Reflected:
            with self._apart() as apart:
                return self._front_end(apart)

        def attempt() -> Reflected:
            self._module_written()
            return self._front_end(None)

        self._refuse_known_crash()
        module = self._retried(attempt, lambda: False, apart)
        self.module.cache.files.note_module_cache()
        return module

    def _refuse_known_crash(self) -> None:
        """``SlangCompileError`` where the module or a file it imports holds what crashes
        Slang (``signatures.slang_crashes``), before Slang reads them; checked once."""
        if self._crash_checked:
            return
        from ..compile import SlangCompileError
        from ..signatures.slang_crashes import known_crash

        m = self.module
        found = known_crash(m.text, m.include_paths)
        if found is not None:
            raise self._named(SlangCompileError(found), m.text.path)
        self._crash_checked = True

    def _module_written(self) -> None:
        """A module given as a source string, written where Slang finds it, again when a
        ``cache clear`` in any process removed it."""
        if self.module.source is not None:
            self.module.cache.files.write_module(self.module.name, self.module.source)

    def _retried(
        self, attempt: Callable[[], T], lost: Callable[[], bool], apart: Callable[[], T]
    ) -> T:
        """``attempt()``; when it fails while a concurrent ``cache clear`` or eviction removes
        files under it (the cache's layout changed, or ``lost()`` says so), again in a fresh
        Slang session, up to ``RETRIES`` times; then, or at once when nothing changed (what it
        read from the cache may be half-written or stale), once ``apart()`` from the cache
        root, whose failure is the build's. Slang refusing the user's own sources
        (``_users_error``) is the build's failure at once: no retry would read them otherwise."""
        files = self.module.cache.files
        tries = 0
        with _watched(self.module.name):
            while True:
                tries += 1
                layout = files.layout_id()
                try:
                    return attempt()
                except Exception as exc:
                    self.forget_session()
                    refused = self._users_error(exc)
                    if refused is not None:
                        raise refused from None
                    changed = lost() or files.layout_id() != layout
                    if not changed or tries > RETRIES:
                        return apart()

    @staticmethod
    def refuses(exc: Exception) -> TypeGuard[SlangCompileError]:
        """Whether ``exc`` is Slang refusing a module's sources (``SlangCompileError``)."""
        from ..compile import SlangCompileError

        return isinstance(exc, SlangCompileError)

    def _users_error(self, exc: Exception) -> SlangCompileError | None:
        """``exc`` naming the module as the user did (``_named``) where it is Slang refusing
        the user's own sources: its first error one in their text (``in_the_text``), placed in
        the module's text, or in a file of the module's directory or include paths outside the
        cache root; else None."""
        if not self.refuses(exc) or exc.place is None or not exc.in_the_text:
            return None
        m = self.module
        place = Path(exc.place)
        if place != m.text.path:
            homes = [*m.include_paths, *([] if m.source is not None else [m.text.path.parent])]
            place = place.resolve()
            if place.is_relative_to(m.cache.root.resolve()) or not any(
                place.is_relative_to(home.resolve()) for home in homes
            ):
                return None
        return self._named(exc, m.text.path)

    def _named(self, exc: SlangCompileError, path: Path) -> SlangCompileError:
        """``exc``, the module's file ``path`` named as the user named the module: a file given
        to ``load`` is its own path, a module given to ``load_source`` (written in the cache,
        or apart from it) ``<name>.slang``."""
        m = self.module
        return exc if m.source is None else exc.naming(path, f"{m.name}.slang")

    @contextlib.contextmanager
    def _apart(self) -> Iterator[Apart]:
        """A private directory, include paths and module text that read and write nothing under
        the cache root: the Slang module cache (``slang`` in it), the kernel directory and the
        place of a module given as a source string are the private directory."""
        from ..compile import SlangCompileError

        m = self.module
        root = m.cache.root.resolve()
        with tempfile.TemporaryDirectory(prefix="slangspec-apart-") as directory:
            private = Path(directory)
            outside = [p for p in m.include_paths if not p.resolve().is_relative_to(root)]
            text = m.text
            if m.source is not None:
                text = ModuleText(m.name, private / f"{m.name}.slang", m.source)
            try:
                yield private, outside, text
            except SlangCompileError as exc:
                raise self._named(exc, text.path) from None
