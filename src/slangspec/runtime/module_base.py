"""What a module is to the builder: its sources, cache, device and reflection, and per function
the cache key, plan and warming of each specialization, from signatures alone.

Imports neither torch nor slangpy: a warming worker that is told its device kind builds kernels
in a process that never imports torch (slangpy, imported where something is compiled, then
does not import it either). ``module.py`` adds calls with torch tensors on top.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict, TypeVar, Unpack

import xxhash

from ..cache_store import FORWARD, kernel_lease, key_of, make_room_for_slots, module_facts
from ..errors import Error, SlangspecWarning
from ..settings import check_all, configure_logging, setting
from ..signatures.function_ref import (
    CONSTRUCTOR,
    FunctionNameError,
    canonical_name,
    parse_function_ref,
)
from ..signatures.module_text import ModuleText, check_source, checked_defines
from ..signatures.preimage import module_closure, preimage
from ..signatures.reach import REACHED, reached_text
from ..signatures.text import IDENTIFIER
from ..specializer import FunctionInfo, SpecializationPlan
from .backend import Backend, needing_slang, toolchain_of
from .cache import Cache
from .devices import device_kind
from .miss_path import Builder

if TYPE_CHECKING:
    from ..specializer.reflect import Reflected

M = TypeVar("M", bound="BuildModule")
_A = TypeVar("_A")


class UnknownFunctionError(Error, AttributeError, ValueError):
    """The module has no function of that name, or the name is not one."""


def function_name(module: str, name: str) -> str:
    """The one spelling of a function name the cache keys and kernels call (``add<2, 3>`` as
    ``add<2,3>``); UnknownFunctionError for text that is not a function name."""
    try:
        return canonical_name(name)
    except FunctionNameError as exc:
        raise UnknownFunctionError(f"module '{module}': {exc}") from None


class BuildModule:
    """A Slang module as the builder sees it: ``m.fn`` is a ``BuildFunction``."""

    function_type: ClassVar[type[BuildFunction]]

    def __init__(
        self,
        name: str,
        directory: Path,
        include_paths: Sequence[Path],
        defines: dict[str, str],
        device: str | None,
        cache: Cache,
        source: str | None = None,
    ) -> None:
        self.name = name
        self.path = directory / f"{name}.slang"
        self.source = source
        self.cache = cache
        make_room_for_slots()  # for a build's module cache (``slang_path``), while this loads
        self.device_kind = device_kind(setting("SLANGSPEC_DEVICE", device, "device"))
        self.backend: Backend
        """How this module's kernels are built, chosen once as its device kind's."""
        if self.device_kind == "cuda":
            from .cuda_backend import CudaBackend

            self.backend = CudaBackend(self)
        else:
            from .vulkan_backend import VulkanBackend

            self.backend = VulkanBackend(self)
        self.builds_only = self.backend.builds_only
        """Whether this process builds kernels for an architecture and runs none
        (``SLANGSPEC_CUDA_ARCH``)."""
        self.include_paths = list(include_paths)
        """The user's include paths: the module's own directory is where its text is placed."""
        self.defines = dict(defines)
        self._slang_module: Reflected | None = None
        self._front_end_failed: Exception | None = None
        with needing_slang(f"module '{name}': the version of slangpy its cache keys cover"):
            self.toolchain = toolchain_of(cache)
        self.shaders = cache.shader_cache(self.toolchain)
        # Hashed once per module object: a running module keeps the code it loaded.
        # A source string is hashed as given: a concurrent ``cache clear`` may remove its file.
        given = self.path.read_bytes() if source is None else source.encode()
        # Slang takes the text after a line directive, where a byte-order mark is no longer
        # one: dropped, and so never keyed.
        given = given.removeprefix(codecs.BOM_UTF8)
        self.text = ModuleText(name, self.path, given.decode(errors="replace"))
        """What Slang compiles: the module's text as it was keyed."""
        self.sources = module_closure(self.path, self.include_paths, given)
        self.content = xxhash.xxh3_64_hexdigest(json.dumps(self.sources).encode())
        self.names_fact = module_facts(name, self.toolchain, self.sources, self.defines)[1]
        """Keys what the cache remembers of the functions this module's content declares."""
        self._function_sources: dict[str, dict[str, str]] = {}
        self.waits_for_reflection = True
        """Whether a CUDA process that finds another machine reflecting this module waits for
        what it notes instead of starting Slang itself; warming turns it off, since its
        workers start Slang to compile anyway and would only start later."""
        self.builder = Builder(self)
        self._functions: dict[str, BuildFunction] = {}
        self._warned_shadowed = False

    def __repr__(self) -> str:
        return f"<slangspec.{type(self).__name__} {self.name} on {self.device_kind}>"

    @property
    def device(self) -> Any:
        """slangpy's device this module's kernels run on, on Vulkan (opened on first use); on
        CUDA, kernels launch through the driver in torch's context, with no slangpy device."""
        device = getattr(self.backend, "device", None)
        if device is None:
            raise AttributeError(f"{self.name}: a {self.device_kind} module has no slangpy device")
        return device

    @property
    def device_identity(self) -> dict[str, str]:
        """The device as a cache key covers it (``devices.device_identity``)."""
        return self.backend.identity()

    @property
    def arch(self) -> str:
        """The GPU architecture CUDA kernels are built for (``sm_90``): ``SLANGSPEC_CUDA_ARCH``
        where set, else the device's, as the driver reports it."""
        return self.device_identity["arch"]

    def __getattr__(self, name: str) -> BuildFunction:
        if name.startswith("__"):
            raise AttributeError(name)
        return self[name]

    @property
    def functions(self) -> Functions:
        """The module's functions by name, whatever attribute of the module shares one:
        ``m.functions["path"]``, ``m.functions.path``, ``list(m.functions)``."""
        return Functions(self)

    def __dir__(self) -> list[str]:
        """The module's attributes and the functions it declares (``function_names``); warns
        once of a function an attribute shadows."""
        attributes = super().__dir__()
        try:
            names = self.function_names()
        except Exception:  # a module that does not compile still lists its attributes
            names = []
        shadowed = sorted(set(names) & set(attributes))
        if shadowed and not self._warned_shadowed:
            self._warned_shadowed = True
            warnings.warn(
                f"module '{self.name}': the functions {', '.join(shadowed)} share their names "
                f"with attributes of the module; call them as m[{shadowed[0]!r}] or "
                f"m.functions.{shadowed[0]}",
                SlangspecWarning,
                stacklevel=2,
            )
        return sorted({*attributes, *names})

    def function_names(self) -> list[str]:
        """The functions this module's own source declares (generic ones aside: look those up
        by name), as the cache remembers them for this content, else reflected."""
        known = self.cache.fact(self.names_fact, "functions").get("functions")
        if isinstance(known, list) and all(isinstance(n, str) for n in known):
            return known
        from ..specializer.reflect import function_names

        with needing_slang(f"module '{self.name}': the names of its functions"):
            names = function_names(self._front_end())
        self.cache.note_fact(self.names_fact, {"functions": names})
        return names

    def __getitem__(self, name: str) -> BuildFunction:
        """``m["add<4>"]``: the function named by a string, also where an attribute of the
        module has the name (``m["path"]``)."""
        if not isinstance(name, str):
            raise TypeError(f"module '{self.name}': functions are named by strings, not {name!r}")
        fn = self._functions.get(name)
        if fn is None:
            canonical = function_name(self.name, name)
            fn = self._functions.get(canonical) or self._function(canonical)
            self._functions[name] = self._functions[canonical] = fn
        return fn

    def _function(self, name: str) -> BuildFunction:
        """Function ``name``; a struct's name is its constructors (slangpy's ``Particle(...)``
        is ``m.Particle(...)``, as ``m["Particle.__init"]``)."""
        name = function_name(self.name, name)
        with needing_slang(f"module '{self.name}': whether it has a function '{name}'"):
            known = self._known(name)
            if not known and name.isidentifier():
                constructors = f"{name}.{CONSTRUCTOR}"
                if self._known(constructors):
                    return self.function_type(self, constructors)
        if not known:
            raise UnknownFunctionError(self._missing(name))
        return self.function_type(self, name)

    def _missing(self, name: str) -> str:
        """Why the module has no function ``name``: none of that name, or (for a generic
        function's name with arguments) which argument its constraints refuse."""
        missing = f"module '{self.name}' has no function '{name}'"
        ref = parse_function_ref(name)
        if ref.args is None:
            return missing
        from ..specializer.reflect import unspecialized

        with needing_slang(f"module '{self.name}': why '{name}' does not specialize"):
            why = unspecialized(self._front_end(), self.text.text, ref)
        return missing if why is None else f"module '{self.name}': '{name}': {why}"

    def _known(self, name: str) -> tuple[FunctionInfo, ...]:
        """What the cache remembers of function ``name`` for this very module content (else
        what reflection finds, remembered): a description of each of its overloads, none
        where the module lacks it."""
        known = self._remembered(name)
        if known is None:
            # CUDA machines sharing a remote tier reflect a module once, as they build a key
            # once: one served cubins never starts Slang. Elsewhere, and in a warming worker,
            # Slang starts anyway, and waiting would only delay it.
            lease: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            if self.backend.reflects_once and self.waits_for_reflection:
                name_of_lease = f"{self.functions_fact(name)}:{name}"
                lease = self.cache.leases.shared(
                    name_of_lease, lambda: self._remembered(name) is not None
                )
            with lease:
                known = self._remembered(name)
                if known is None:
                    known = self._reflect(name)
                    remembered = [info.to_json() for info in known] or False
                    self.cache.note_fact(self.functions_fact(name), {name: remembered})
        return known

    def _remembered(self, name: str) -> tuple[FunctionInfo, ...] | None:
        """What the cache remembers of function ``name`` (a description of each overload, or
        False where the module lacks it); None when nothing usable."""
        known = self.cache.fact(self.functions_fact(name), name).get(name)
        if known is False:
            return ()
        if not isinstance(known, list):
            return None
        try:
            return tuple(FunctionInfo.from_json(info) for info in known)
        except (TypeError, KeyError, ValueError):
            return None

    def _reflect(self, name: str) -> tuple[FunctionInfo, ...]:
        from ..specializer.reflect import function_overloads, has_function

        if self._slang_module is None:
            served = self.backend.described(name)
            if served is not None:
                return served
        front_end = self._front_end()
        if not has_function(front_end, name):
            return ()
        return function_overloads(front_end, self.name, name, self.text.text)

    def _front_end(self) -> Reflected:
        """The module through Slang's front-end, once: a module object keeps the text it
        loaded, so one whose text does not compile raises the same error at every later
        look-up without compiling it again."""
        if self._slang_module is None:
            if self._front_end_failed is not None:
                raise self._front_end_failed.with_traceback(None)
            try:
                self._slang_module = self.backend.front_end()
            except Exception as exc:
                if self.backend.refuses(exc):
                    self._front_end_failed = exc
                raise
        return self._slang_module

    def function_overloads(self, name: str) -> tuple[FunctionInfo, ...]:
        """The description of each overload of function ``name`` (one for most functions):
        from the cache, else reflected (the Slang front-end compiles the module on first
        use)."""
        known = self._known(name)
        if not known:
            raise UnknownFunctionError(self._missing(name))
        return known

    def function_sources(self, function: str) -> dict[str, str]:
        """The sources that key ``function``'s kernels and description: the module's, its own
        file's hash replaced by that of what the function reaches in it (``signatures.reach``),
        where that can be known for certain."""
        sources = self._function_sources.get(function)
        if sources is None:
            reached = reached_text(self.text.text, re.findall(IDENTIFIER, function))
            sources = dict(self.sources)
            if reached is not None:
                sources[self.path.name] = REACHED + xxhash.xxh3_128_hexdigest(reached.encode())
            self._function_sources[function] = sources
        return sources

    def functions_fact(self, function: str) -> str:
        """Keys what the cache remembers of whether this module has ``function``, and its
        description."""
        return module_facts(
            self.name, self.toolchain, self.function_sources(function), self.defines
        )[0]

    def preimage(self, function: str, signature: str) -> dict[str, Any]:
        """The cache-key preimage of one specialization of this module."""
        return preimage(
            toolchain=self.toolchain,
            device=self.device_identity,
            module=self.name,
            sources=self.function_sources(function),
            defines=self.defines,
            function=function,
            signature=signature,
        )

    def record(self, function: str, signature: str) -> dict[str, Any]:
        """What the warm command needs to rebuild this specialization elsewhere."""
        return {
            "module": self.name,
            "path": None if self.source is not None else str(self.path),
            "source": self.source,
            "include_paths": [str(p) for p in self.include_paths],
            "defines": self.defines,
            "function": function,
            "signature": signature,
            "device": self.device_kind,
        }


class BuildFunction:
    """One Slang function of a module, its specializations named by call signature."""

    def __init__(self, module: BuildModule, name: str) -> None:
        self.module = module
        self.name = name
        self.id = f"{module.name}::{name}"
        self._overloads: tuple[FunctionInfo, ...] = ()

    def __repr__(self) -> str:
        return f"<slangspec.{type(self).__name__} {self.id}>"

    @property
    def overloads(self) -> tuple[FunctionInfo, ...]:
        """The description of each overload of this name: one for most functions."""
        if not self._overloads:
            with needing_slang(f"{self.id}: its description"):
                self._overloads = self.module.function_overloads(self.name)
        return self._overloads

    def agreed(
        self,
        what: str,
        of: Callable[[FunctionInfo], _A],
        overloads: Sequence[FunctionInfo] | None = None,
    ) -> _A:
        """What ``of`` makes of each overload (of ``overloads``, default all), where they all
        agree; TypeError naming ``what`` differs between them where they do not."""
        overloads = overloads or self.overloads
        made = [of(o) for o in overloads]
        if any(m != made[0] for m in made[1:]):
            listed = "".join(f"\n  {o.declaration}" for o in overloads)
            raise TypeError(f"{self.id}: its overloads differ in {what}:{listed}")
        return made[0]

    def parameter_names(self, count: int | None = None) -> list[str]:
        """The names a call's arguments go by: those of the overloads that take ``count``
        arguments, where given and some do; TypeError where those name them apart."""
        overloads = [o for o in self.overloads if count is None or len(o.params) == count]
        return list(
            self.agreed(
                "their parameters' names (pass arguments by position)",
                lambda o: [p.name for p in o.params],
                overloads,
            )
        )

    def plan_for_signature(self, signature: str) -> SpecializationPlan:
        """The specialization plan for a call-signature string, with no tensors at hand: of
        the one overload the call resolves against."""
        from ..specializer import plan_from_signature

        return plan_from_signature(self.overloads, signature)

    def cache_key(self, signature: str) -> str:
        """The disk-cache key of this function's specialization for ``signature``."""
        return key_of(self.module.preimage(self.name, signature))

    def warm(
        self, signature: str, masks: Iterable[str] | None = None
    ) -> Literal["built", "cached"]:
        """Build this specialization's forward kernel and the backward kernels of ``masks``
        (default: every mask its plan can need) into the cache, without tensors; a kernel the
        cache holds already is not loaded. Returns "built" when this process built anything,
        else "cached"."""
        builder = self.module.builder
        masks = None if masks is None else list(masks)
        # A task for the forward kernel alone (``[]``) leaves the backward to tasks of its own.
        found = builder.specialization(self.name, signature, masks != [])
        outcomes = {found.outcome}
        labels = [] if found.forward is not None else [FORWARD]
        labels += found.plan.backward_masks if masks is None else masks
        outcomes.update(
            builder.kernel(found, label)[1]
            for label in labels
            if not builder.holds(found.entry, label)
        )
        return "built" if "built" in outcomes else "cached"

    def leased_elsewhere(self, signature: str, label: str = FORWARD) -> bool:
        """Whether a process holds the remote compile lease of this specialization's kernel
        ``label`` ("forward" or a grad mask) now."""
        return self.module.cache.leases.held_elsewhere(
            kernel_lease(self.cache_key(signature), label)
        )

    def claimed(
        self, signature: str, label: str = FORWARD
    ) -> contextlib.AbstractContextManager[bool]:
        """Claim the warming of this specialization's kernel ``label`` on the remote tier,
        without waiting (see ``Leases.claim``): True within the block unless another process
        has claimed it."""
        return self.module.cache.leases.claim(
            "warm:" + kernel_lease(self.cache_key(signature), label)
        )

    def missing(self, signature: str, masks: Iterable[str] | None = None) -> list[str]:
        """What the cache lacks for this specialization ("forward" and masks), compiling
        nothing; every mask the plan can need when ``masks`` is None."""
        pre = self.module.preimage(self.name, signature)
        entry = self.module.cache.lookup(key_of(pre), pre)
        if entry is None:
            return [FORWARD, *(masks or ())]
        if masks is None:
            masks = SpecializationPlan.from_json(entry.plan_json).backward_masks
        holds = self.module.builder.holds
        return [label for label in [FORWARD, *masks] if not holds(entry, label)]


BuildModule.function_type = BuildFunction


class Functions:
    """A module's functions as a namespace of their own, where no attribute of the module
    shadows one."""

    def __init__(self, module: BuildModule) -> None:
        self._module = module

    def __getitem__(self, name: str) -> BuildFunction:
        return self._module[name]

    def __getattr__(self, name: str) -> BuildFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._module[name]

    def __contains__(self, name: object) -> bool:
        try:
            self._module[name]  # type: ignore[index]
        except (UnknownFunctionError, TypeError):
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        """The functions the module declares (generic ones aside: name those)."""
        return iter(self._module.function_names())

    def __dir__(self) -> list[str]:
        return self._module.function_names()


class LoadOptions(TypedDict, total=False):
    """How a module is loaded: the keywords of ``slangspec.load`` and ``load_source``."""

    device: str | None
    """``cuda`` or ``vulkan`` (default: ``SLANGSPEC_DEVICE``, else CUDA when torch sees a GPU,
    else Vulkan)."""
    include_paths: Sequence[str | os.PathLike[str]]
    """Where the module's imports resolve, beside its own directory."""
    defines: dict[str, str] | None
    """Preprocessor defines."""
    cache_dir: str | os.PathLike[str] | None
    """The cache root (default: ``SLANGSPEC_CACHE_DIR``, else the user cache directory)."""
    remote: str | None
    """The shared Redis tier behind the local cache (default: ``SLANGSPEC_REMOTE``)."""
    remote_trust_all: bool | None
    """Use ``remote`` without ``SLANGSPEC_REMOTE_SECRET``, trusting every writer of the server
    (default: ``SLANGSPEC_REMOTE_TRUST_ALL``); without a secret, it is refused otherwise."""
    shipped: str | os.PathLike[str] | None
    """A directory of kernels shipped with a package (``specialize cache export
    --for-package``), served read-only after the local cache and before any compile."""


def _opened(
    options: LoadOptions, cache: Cache | None
) -> tuple[str | None, list[Path], dict[str, str], Cache]:
    """The device, include paths, defines and cache ``options`` name; TypeError naming a keyword
    that is not an option."""
    unknown = sorted(set(options) - LoadOptions.__optional_keys__)
    if unknown:
        known = ", ".join(sorted(LoadOptions.__optional_keys__))
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}; a module takes {known}")
    check_all()
    configure_logging()
    if cache is None:
        cache = Cache.for_running(
            options.get("cache_dir"),
            options.get("remote"),
            shipped=options.get("shipped"),
            remote_trust_all=options.get("remote_trust_all"),
        )
    includes = [Path(i).resolve() for i in options.get("include_paths", ())]
    return options.get("device"), includes, checked_defines(options.get("defines") or {}), cache


def load_module(
    kind: type[M],
    path: str | os.PathLike[str],
    *,
    cache: Cache | None = None,
    **options: Unpack[LoadOptions],
) -> M:
    """A ``kind`` of module for the Slang module at ``path`` (see ``slangspec.load``), run from
    ``cache`` when given, else from the one ``options`` name."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no Slang module at {p}")
    if p.suffix != ".slang" or not re.fullmatch(IDENTIFIER, p.stem):
        raise ValueError(f"{p}: expected a '<identifier>.slang' file name")
    device, includes, defines, cache = _opened(options, cache)
    return kind(p.stem, p.resolve().parent, includes, defines, device, cache)


def load_module_source(
    kind: type[M],
    name: str,
    source: str,
    *,
    cache: Cache | None = None,
    **options: Unpack[LoadOptions],
) -> M:
    """A ``kind`` of module for a source string (see ``slangspec.load_source``), run from
    ``cache`` when given, else from the one ``options`` name."""
    if not re.fullmatch(IDENTIFIER, name):
        raise ValueError(f"module name {name!r} must be an identifier")
    check_source(name, source)
    device, includes, defines, cache = _opened(options, cache)
    path = cache.files.write_module(name, source)
    return kind(name, path.parent, includes, defines, device, cache, source)
