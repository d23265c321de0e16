"""Counts of the compile work this process did, for tests and benchmarks to read."""

from collections import Counter

compile_counts: Counter[str] = Counter()
"""What ran in this process: "specialize" (type resolution of a miss), "codegen" (a kernel
source generated), "front_end" (a user module reflected), "kernel" (a kernel compiled: through
slangpy on Vulkan, through Slang's C API and NVRTC on CUDA), "library" (slangpy's Slang library
compiled to IR for CUDA builds), "served" (a function described or a kernel built for this
process by the user's compile server)."""
