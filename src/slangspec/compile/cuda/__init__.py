"""CUDA kernels without slangpy or a GPU: a module and its generated kernels through Slang to one
CUDA source with each kernel's parameter layout (``source``, ``parameter_layout``), NVRTC to a
cubin per GPU architecture (``nvrtc``, ``cubin``), joined in ``build``; and the prelude and
slangpy library files ``specialize prepare`` makes once per toolchain (``prepared``)."""
