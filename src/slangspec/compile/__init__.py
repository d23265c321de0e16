"""The CUDA build without slangpy's device or a GPU: generated kernels -> one CUDA source and
each kernel's parameter layout (Slang's C API, ``cuda_source``) -> a cubin per GPU architecture
(NVRTC, ``nvrtc``)."""
