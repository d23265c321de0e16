"""The names of a generated kernel's parameters: code generation declares them, dispatch binds
them, a CUDA call packs them by them. Leaves are numbered by their place in the plan's
``args``, outputs by theirs in its ``outputs``."""

ENTRY_POINT = "slangspec_main"
"""The kernel's own name."""
THREADS = "_n"
"""How many threads run the call: one per point of the call shape."""
CALL_SHAPE = "_shape"


def leaf(j: int) -> str:
    """Leaf ``j``'s value: its pointer, uniform value or words, or tensor struct."""
    return f"a{j}"


def leaf_strides(j: int) -> str:
    """The element strides of elementwise leaf ``j``: per call dimension, then per element
    dimension."""
    return f"a{j}_st"


def gradient(j: int) -> str:
    """Where a backward kernel stores elementwise leaf ``j``'s gradient, per call point, or adds
    it (``SpecializationPlan.accumulates``)."""
    return f"g{j}"


def gradient_strides(j: int) -> str:
    """The strides at which a backward kernel adds elementwise leaf ``j``'s gradient in place:
    per call dimension (0 along those the leaf is broadcast over), then per element
    dimension."""
    return f"g{j}_st"


def gradient_copy(j: int) -> str:
    """How leaf ``j``'s gradient, which a backward kernel adds into (a whole tensor's, where
    ``SpecializationPlan.sums_per_warp``; an elementwise leaf's, where it ``accumulates``), is
    spread over copies of it: the calls that add into one copy, and the elements between copies
    (0 for one copy)."""
    return f"g{j}_copy"


def output(k: int) -> str:
    """Where a forward kernel stores output ``k``, per call point."""
    return f"_out{k}"


def cotangent(k: int) -> str:
    """Output ``k``'s cotangent, which backward kernels read."""
    return f"_dout{k}"


def cotangent_strides(k: int) -> str:
    return f"_dout{k}_st"
