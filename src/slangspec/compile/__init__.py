"""The CUDA build without slangpy or a GPU, which the JIT, ``warm`` and package exports all call:
a module's reflection and its generated kernels through Slang's C API (``reflection``,
``com_session``, ``cuda_source``) -> one CUDA source with each kernel's parameter layout -> a
cubin per GPU architecture (NVRTC, ``nvrtc``), joined in ``cuda_build``."""
