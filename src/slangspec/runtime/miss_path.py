"""The miss path of a module's specializations, as one unit: lookup -> lease -> plan ->
codegen -> compile (the module's ``Backend``) -> keep binary -> record.

Every step says how it was served: "cached" (read from the cache), "built" (built by this
process) or "taken" (built by another process while this one waited on the lease).
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Literal, Protocol

from .. import codegen
from ..cache_store import (
    FORWARD,
    CacheWarning,
    Entry,
    binary_added,
    kernel_added,
    kernel_lease,
    key_of,
    source_name,
)
from ..define import frozen
from ..settings import compile_counts
from ..specializer import FunctionInfo, SpecializationPlan, device_problem
from .backend import Backend, Kernel, needing_slang
from .cache import Cache

_log = logging.getLogger(__name__)
Outcome = Literal["cached", "built", "taken"]


@frozen
class Specialized:
    """A specialization as the cache holds it once looked up or built: its key and preimage,
    its entry as last read, its plan, and the forward kernel when this lookup built it."""

    key: str
    preimage: dict[str, Any]
    entry: Entry
    plan: SpecializationPlan
    forward: Kernel | None
    outcome: Outcome


class Buildable(Protocol):
    """What the miss path needs of a module (``module_base.BuildModule`` is one)."""

    device_kind: str
    cache: Cache
    backend: Backend

    def function_overloads(self, name: str) -> tuple[FunctionInfo, ...]: ...

    def preimage(self, function: str, signature: str) -> dict[str, Any]: ...

    def record(self, function: str, signature: str) -> dict[str, Any]: ...


class Builder:
    """Looks up, and on a miss builds, one module's specializations and their kernels."""

    def __init__(self, module: Buildable) -> None:
        self.module = module
        self.cache = module.cache
        self.backend = module.backend
        self._fresh: dict[tuple[str, str], Kernel] = {}
        """Kernels built with a forward kernel, by (key, label), until the call asks for them."""

    def specialization(self, function: str, signature: str, backward: bool = True) -> Specialized:
        """The entry and plan of ``function`` for ``signature``, built here on a miss (on
        CUDA with the backward of every tensor that requires grad, unless ``backward`` is
        False: a warm task for the forward kernel alone, whose backward kernels are tasks of
        their own)."""
        pre = self.module.preimage(function, signature)
        key = key_of(pre)
        entry = self.cache.serve(key, pre)
        outcome: Outcome = "cached"
        if entry is None:
            with self.cache.leases.hold(key, lambda: self.cache.serve(key, pre) is not None):
                entry = self.cache.serve(key, pre)
                if entry is None:
                    what = f"{signature}: its forward kernel"
                    with needing_slang(what):
                        return self._build(function, signature, key, pre, backward)
                outcome = "taken"
                _log.info("%s: built by another process while this one waited", signature)
        try:
            plan = SpecializationPlan.from_json(entry.plan_json)
        except (ValueError, TypeError, KeyError) as exc:
            # Only a tier that cannot prove its entries (a remote one without a secret) hands
            # out such a row: built here, it is replaced there too.
            warnings.warn(
                f"slangspec cache entry {key[:12]}: its plan does not decode ({exc}); rebuilding",
                CacheWarning,
                stacklevel=3,
            )
            with self.cache.leases.hold(key, lambda: False), needing_slang(signature):
                return self._build(function, signature, key, pre, backward)
        self.cache.touch(key)
        if outcome == "cached":
            _log.debug("hit %s (key %s)", signature, key[:12])
        return Specialized(key, pre, entry, plan, None, outcome)

    def _build(
        self, function: str, signature: str, key: str, pre: dict[str, Any], backward: bool
    ) -> Specialized:
        """Resolve, generate and compile the forward kernel of a missed specialization."""
        m = self.module
        self.cache.count_miss()
        _log.info("miss %s (key %s): building it", signature, key[:12])
        start = time.perf_counter()
        compile_counts["specialize"] += 1
        overloads = m.function_overloads(function)
        described = time.perf_counter()
        from ..specializer import plan_from_signature  # a warm process never resolves

        plan = plan_from_signature(overloads, signature)
        refused = device_problem(plan, m.device_kind)
        if refused is not None:
            raise TypeError(refused)
        resolved = time.perf_counter()
        labels = [FORWARD]
        if self.backend.joins_backward and backward and plan.backward_masks:
            # The call's tensors require grad: its backward (all of them, the last mask) is
            # built with its forward, one Slang link and one NVRTC run for both.
            labels.append(plan.backward_masks[-1])
        sources = {label: codegen.kernel_source(plan, label) for label in labels}
        generated = time.perf_counter()
        built = self._compile(sources)
        done = time.perf_counter()
        also = "" if len(labels) == 1 else f", with its backward kernel for grads {labels[1]}"
        _log.info(
            "built %s: forward kernel in %.3f s%s (function description %.3f s, resolution "
            "%.4f s, code generation %.4f s, Slang compile and load %.3f s)",
            signature,
            done - start,
            also,
            described - start,
            resolved - described,
            generated - resolved,
            done - generated,
        )
        meta = {"compile_s": done - start}
        names = {label: name for label, (name, _) in built.items()}
        # The cubins go in with the row: a process waiting on this build's lease stops at the
        # row, and one without them would build its kernels again.
        binaries = {
            label: binary
            for label, (_, kernel) in built.items()
            if (binary := self.backend.binary(kernel)) is not None
        }
        entry = self.cache.insert(key, pre, plan.to_json(), names, meta, binaries)
        for label, (_, kernel) in built.items():
            if label != FORWARD:
                self._fresh[key, label] = kernel
        self.cache.publish(key)
        self.cache.record(m.record(function, signature))
        self.cache.enforce_bound()
        return Specialized(key, pre, entry, plan, built[FORWARD][1], "built")

    def kernel(self, found: Specialized, label: str) -> tuple[Kernel, Outcome]:
        """The kernel ``label`` names ("forward" or a grad mask): from the entry's cubin on
        CUDA, else compiled from the entry's source, else generated, compiled and added to the
        entry."""
        key, pre = found.key, found.preimage
        fresh = self._fresh.pop((key, label), None)
        if fresh is not None:
            return fresh, "built"
        entry: Entry | None = found.entry
        if label not in found.entry.kernels:
            entry = self.cache.serve(key, pre, label)
        cached = self._from_cache(key, label, entry)
        if cached is not None:
            return cached, "cached"

        def built() -> bool:
            latest = self.cache.serve(key, pre, label)
            name = None if latest is None else latest.kernels.get(label)
            return name is not None and self.cache.read_blob(name) is not None

        with self.cache.leases.hold(kernel_lease(key, label), built):
            entry = self.cache.serve(key, pre, label)
            cached = self._from_cache(key, label, entry, quiet=True)
            if cached is not None:
                return cached, "taken"
            start = time.perf_counter()
            piece = "forward kernel" if label == FORWARD else f"backward kernel for grads {label}"
            what = f"{found.plan.signature}: its {piece}"
            with needing_slang(what):
                source = codegen.kernel_source(found.plan, label)
                generated = time.perf_counter()
                name, kernel = self._compile({label: source})[label]
            done = time.perf_counter()
            _log.info(
                "built %s: %s in %.3f s (code generation %.4f s, Slang compile and load %.3f s)",
                found.plan.signature,
                piece,
                done - start,
                generated - start,
                done - generated,
            )
            if entry is not None:
                seconds = time.perf_counter() - start
                self.cache.amend(
                    key, kernel_added(label, name, seconds, self.backend.binary(kernel))
                )
                self.cache.publish(key)
                self.cache.enforce_bound()
            return kernel, "built"

    def holds(self, entry: Entry, label: str) -> bool:
        """Whether ``entry`` holds kernel ``label`` as a later process loads it (the backend's
        ``holds``)."""
        return self.backend.holds(entry, label)

    def _compile(self, sources: dict[str, str]) -> dict[str, tuple[str, Kernel]]:
        """Store generated sources (by label) and compile them together (the backend's
        ``compile``): each label's source name and kernel."""
        compile_counts["codegen"] += len(sources)
        names = {label: source_name(source) for label, source in sources.items()}
        kernels = self.backend.compile({names[label]: s for label, s in sources.items()})
        return {label: (name, kernels[name]) for label, name in names.items()}

    def _from_cache(
        self, key: str, label: str, entry: Entry | None, quiet: bool = False
    ) -> Kernel | None:
        """The kernel from the entry's cubin (CUDA) or its whole source; None when neither is
        there, with a warning for a damaged source unless ``quiet``."""
        if entry is None:
            return None
        loaded = self.backend.load(key, label, entry)
        if loaded is not None:
            return loaded
        name = entry.kernels.get(label)
        if name is None:
            return None
        stored = self.cache.read_blob(name)
        if stored is not None:
            try:
                kernel = self.backend.compiled({name: stored.decode()})[name]
            except Exception:
                self.backend.forget_session()
                return None  # built again from the plan, where a failure that stays is raised
            self._keep_binary(key, label, kernel)
            self.cache.enforce_bound()  # the compile kept Slang's caches and a cubin
            return kernel
        if not quiet and self.cache.names(key, name):
            warnings.warn(
                f"slangspec kernel source {name} is missing or damaged; regenerating",
                CacheWarning,
                stacklevel=3,
            )
        return None

    def _keep_binary(self, key: str, label: str, kernel: Kernel) -> None:
        """Add a kernel's binary to its entry, so later processes skip Slang entirely."""
        binary = self.backend.binary(kernel)
        if binary is not None:
            self.cache.amend(key, binary_added(label, binary))
