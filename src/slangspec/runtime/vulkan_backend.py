"""Building Vulkan kernels: a module reflected and its kernels compiled through slangpy's own
session on its device, which slangpy's shader cache keeps; kernels are compiled from their
stored sources in each process, and dispatched through slangpy (``vulkan_binding``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend import Apart, Kernel, SlangBackend, Sources
from .devices import open_device

if TYPE_CHECKING:
    import slangpy as spy
    import torch

    from ..cache_store import Entry
    from ..compile import Compiler, SlangpyFrontEnd
    from ..specializer import FunctionInfo
    from .vulkan_binding import VulkanBinding

_compilers: dict[tuple[int, str], Compiler] = {}


class VulkanBackend(SlangBackend):
    """A module's Vulkan build, on slangpy's device, which it opens on first use."""

    builds_only = False
    reflects_once = False
    joins_backward = False

    def __init__(self, module: Sources) -> None:
        super().__init__(module)
        self._device: spy.Device | None = None
        self._compiler: Compiler | None = None
        self._identity: dict[str, str] | None = None

    @property
    def device(self) -> spy.Device:
        """slangpy's Vulkan device, opened on first use."""
        if self._device is None:
            # Slang reads the module cache once the device is open: what a remote tier has for
            # it is fetched now, and written while the device opens.
            shaders = self.module.shaders
            self._device = self.module_guard.check_while(lambda: open_device("vulkan", shaders))
        return self._device

    @property
    def compiler(self) -> Compiler:
        """The compiler on ``device``, shared by every module of that device and cache."""
        if self._compiler is None:
            from ..compile import Compiler

            files = self.module.cache.files
            key = (id(self.device), str(files.module_cache))
            compiler = _compilers.get(key)
            if compiler is None:
                compiler = _compilers[key] = Compiler(
                    self.device, files.module_cache, files.kernel_dir, self.module_guard
                )
            self._compiler = compiler
        return self._compiler

    def identity(self) -> dict[str, str]:
        """The adapter of the device."""
        if self._identity is None:
            self._identity = {"kind": "vulkan", "adapter": self.device.info.adapter_name}
        return self._identity

    def torch_device(self) -> torch.device:
        import torch

        return torch.device("cpu")

    def binding(self, torch_device: torch.device) -> VulkanBinding:
        from .vulkan_binding import VulkanBinding

        return VulkanBinding(self.device)

    def described(self, function: str) -> tuple[FunctionInfo, ...] | None:
        """None: a Vulkan process reflects its modules itself."""
        return None

    def holds(self, entry: Entry, label: str) -> bool:
        """Whether ``entry`` holds kernel ``label``'s source intact (as a farther tier's entry
        is, whole, when it is read)."""
        name = entry.kernels.get(label)
        if entry.far:
            return name is not None
        return name is not None and self.module.cache.read_blob(name) is not None

    def _front_end(self, apart: Apart | None) -> SlangpyFrontEnd:
        m = self.module
        if apart is None:
            return self.compiler.front_end(m.text, m.include_paths, m.defines, m.content)
        from ..compile import Compiler

        private, include_paths, text = apart
        compiler = Compiler(self.device, private / "slang", private)
        return compiler.front_end(text, include_paths, m.defines, m.content)

    def forget_session(self) -> None:
        m = self.module
        self.compiler.forget_session(m.text, m.include_paths, m.defines, m.content)

    def compiled(self, sources: dict[str, str], apart: Apart | None = None) -> dict[str, Kernel]:
        """Compile the kernels ``sources`` holds (by name) on the device, or ``apart`` from the
        cache (which then notes nothing of them): by name."""
        m = self.module
        if apart is None:
            compiler, paths, text = self.compiler, m.include_paths, m.text
        else:
            from ..compile import Compiler

            private, paths, text = apart
            compiler = Compiler(self.device, private / "slang", private)
        kernels: dict[str, Kernel] = {}
        with m.shaders.lock:
            for name, source in sources.items():
                kernels[name] = compiler.kernel(name, source, text, paths, m.defines, m.content)
            m.shaders.publish(self.device.shader_cache_stats.miss_count)
        if not apart:
            # slangpy may write a module's compiled IR after loading it returns: count it again.
            m.cache.files.note_module_cache()
        return kernels

    def binary(self, kernel: Kernel) -> dict[str, Any] | None:
        """None: slangpy's shader cache keeps what a Vulkan kernel compiles to."""
        return None

    def load(self, key: str, label: str, entry: Entry) -> Kernel | None:
        """None: a Vulkan kernel is compiled from its stored source."""
        return None
