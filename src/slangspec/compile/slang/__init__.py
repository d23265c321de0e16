"""Slang itself: its C API (``api``), a COM session over it that links and emits kernels
(``com_session``), reflection of a module's functions through it (``reflection``), where
slangpy's install and its Slang library are and which versions they are (``slangpy_install``),
and the Vulkan build through slangpy's own session (``vulkan_compiler``)."""
