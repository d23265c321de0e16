"""The compile path, which the JIT, ``warm`` and the compile server all call the same way.

On CUDA, without slangpy or a GPU: a module's reflection and its generated kernels through
Slang's C API (``reflection``, ``com_session``, ``cuda_source``) -> one CUDA source with each
kernel's parameter layout -> a cubin per GPU architecture (NVRTC, ``nvrtc``), joined in
``cuda_build``; what ``specialize prepare`` makes (``prepared``); the compile server that keeps
it warm (``server``, ``server_client``). On Vulkan, through slangpy (``vulkan_compiler``). The
toolchain's identity (``toolchain``, ``slangpy_install``) and ``warm``'s worker processes
(``warm_pool``)."""
