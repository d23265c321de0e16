"""The compile path, which the JIT, ``warm`` and the compile server all call the same way.

Its rooms: ``slang`` (Slang's C API, the COM session that links and emits kernels, reflection,
slangpy's install and its Slang library, and the Vulkan build through slangpy's own session);
``cuda`` (a module and its kernels to one CUDA source with each kernel's parameter layout, NVRTC
to a cubin per GPU architecture, joined in ``cuda.build``; the files ``specialize prepare``
makes); ``server`` (the compile server that keeps it warm, its client, messages and place);
and beside them the toolchain's identity (``toolchain_identity``).

What the rest of slangspec uses of it is named here, and only here: no module outside the
package imports one of its rooms' modules by path. Each name is imported on first use: a warm
process keys its kernels with the toolchain's identity and imports no Slang, slangpy or NVRTC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..define import lazy_face

if TYPE_CHECKING:
    from .cuda.build import BuiltKernel as BuiltKernel
    from .cuda.build import build as build
    from .cuda.build import library_dir as library_dir
    from .cuda.build import prelude_path as prelude_path
    from .cuda.build import stored_prelude as stored_prelude
    from .cuda.cubin import cubin_problem as cubin_problem
    from .cuda.nvrtc import warm_up as warm_up
    from .cuda.prepared import DEFAULT_ROOT as DEFAULT_ROOT
    from .cuda.prepared import FILES as FILES
    from .cuda.prepared import Prepared as Prepared
    from .cuda.prepared import directory_of as directory_of
    from .cuda.prepared import prepare as prepare
    from .cuda.prepared import prepared as prepared
    from .cuda.source import LIBRARY as LIBRARY
    from .cuda.source import KernelSource as KernelSource
    from .cuda.source import forget as forget
    from .cuda.source import front_end as front_end
    from .server import client as server_client  # noqa: F401
    from .server import serve as compile_server  # noqa: F401
    from .server.messages import KernelText as KernelText
    from .server.messages import ModuleSource as ModuleSource
    from .server.messages import Request as Request
    from .server.messages import identity as identity
    from .slang.api import SlangCompileError as SlangCompileError
    from .slang.api import SlangLibraryError as SlangLibraryError
    from .slang.api import global_session as global_session
    from .slang.reflection import FrontEnd as FrontEnd
    from .slang.slangpy_install import find_install as find_install
    from .slang.slangpy_install import slangpy_versions as slangpy_versions
    from .slang.slangpy_install import wheel_stamp as wheel_stamp
    from .slang.vulkan_compiler import CompiledKernel as CompiledKernel
    from .slang.vulkan_compiler import Compiler as Compiler
    from .slang.vulkan_compiler import SlangpyFrontEnd as SlangpyFrontEnd
    from .toolchain_identity import FORMATS as FORMATS
    from .toolchain_identity import toolchain as toolchain

_WHOLE = {
    "compile_server": ".server.serve",
    "server_client": ".server.client",
}
"""Families of functions named whole, by the module that holds them."""
_HOME = {
    "BuiltKernel": ".cuda.build",
    "build": ".cuda.build",
    "library_dir": ".cuda.build",
    "prelude_path": ".cuda.build",
    "stored_prelude": ".cuda.build",
    "cubin_problem": ".cuda.cubin",
    "warm_up": ".cuda.nvrtc",
    "DEFAULT_ROOT": ".cuda.prepared",
    "FILES": ".cuda.prepared",
    "Prepared": ".cuda.prepared",
    "directory_of": ".cuda.prepared",
    "prepare": ".cuda.prepared",
    "prepared": ".cuda.prepared",
    "LIBRARY": ".cuda.source",
    "KernelSource": ".cuda.source",
    "forget": ".cuda.source",
    "front_end": ".cuda.source",
    "KernelText": ".server.messages",
    "ModuleSource": ".server.messages",
    "Request": ".server.messages",
    "identity": ".server.messages",
    "SlangCompileError": ".slang.api",
    "SlangLibraryError": ".slang.api",
    "global_session": ".slang.api",
    "FrontEnd": ".slang.reflection",
    "find_install": ".slang.slangpy_install",
    "slangpy_versions": ".slang.slangpy_install",
    "wheel_stamp": ".slang.slangpy_install",
    "CompiledKernel": ".slang.vulkan_compiler",
    "Compiler": ".slang.vulkan_compiler",
    "SlangpyFrontEnd": ".slang.vulkan_compiler",
    "FORMATS": ".toolchain_identity",
    "toolchain": ".toolchain_identity",
}

__all__ = sorted([*_WHOLE, *_HOME])

__getattr__, __dir__ = lazy_face(globals(), _HOME, _WHOLE)
