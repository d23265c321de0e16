"""Scalar types: the one table of how torch dtypes, Slang scalars and reflected types relate.

Plain data, free of torch and slangpy: dtypes are named by their attribute name in ``torch``
(``float32``) and reflected scalar types by their member name in
``slangpy.TypeReflection.ScalarType``; modules that hold torch or slangpy look them up. So the
builder, which only ever sees signatures, runs in processes that import neither.
"""

from __future__ import annotations

from ..define import frozen


@frozen
class TorchScalar:
    """A torch dtype as signatures and manifests write it."""

    dtype: str  # its attribute name in torch: ``getattr(torch, dtype)``
    number: int  # torch's ScalarType number: the S field of a tensor signature
    manifest: str | None = None  # its name in a warm manifest; None: manifests cannot name it
    floating: bool = False
    refused: str = ""  # why no parameter takes tensors of it, and what to pass instead


@frozen
class SlangScalar:
    """A reflected scalar type; those with a Slang name are the ones slangspec passes."""

    reflected: str  # the member name in slangpy.TypeReflection.ScalarType
    struct_code: str  # how a uniform of this type is packed, as a ``struct`` format code
    slang: str | None = None
    dtype: str | None = None  # the dtype of the tensors passed for it, by its name in torch
    storage: str = ""  # the element type generated kernels read and write those tensors as
    load: str = "{}"  # a stored element -> the Slang value, as a format string
    store: str = "{}"  # a Slang value -> the stored element, as a format string
    py_type: type | None = None  # what a Python scalar passed for it is converted to
    devices: tuple[str, ...] = ("cuda", "vulkan")  # the device kinds that compute it right
    elsewhere: str = ""  # why the other device kinds do not


# Manifest-named dtypes first, in the order manifest errors list them.
TORCH_SCALARS = (
    TorchScalar("float16", 5, "f16", floating=True),
    TorchScalar("float32", 6, "f32", floating=True),
    TorchScalar("float64", 7, "f64", floating=True),
    TorchScalar(
        "bfloat16",
        15,
        "bf16",
        floating=True,
        refused="bfloat16 is not supported on Vulkan or CUDA: Slang 2026.12's BFloat16 is no "
        "arithmetic type, slangpy 0.43.1 cannot reflect it, and lavapipe rejects its SPIR-V; "
        "convert the tensor with .float()",
    ),
    TorchScalar("int32", 3, "i32"),
    TorchScalar("int64", 4, "i64"),
    TorchScalar("bool", 11, "bool"),
    TorchScalar("int8", 1, "i8"),
    TorchScalar("uint8", 0, "u8"),
    TorchScalar("int16", 2, "i16"),
    TorchScalar("complex64", 9),
    TorchScalar("complex128", 10),
)

# Rows: reflected name, struct code, Slang name, tensor dtype, storage type; the rest by name.
SLANG_SCALARS = (
    SlangScalar("float16", "e", "half", "float16", "half", py_type=float),
    SlangScalar("float32", "f", "float", "float32", "float", py_type=float),
    SlangScalar(
        "float64",
        "d",
        "double",
        "float64",
        "double",
        py_type=float,
        devices=("cuda",),
        elsewhere="SPIR-V defines sin, exp and the other transcendental functions for 16- and "
        "32-bit floats alone, and Vulkan drivers return wrong values for doubles",
    ),
    SlangScalar("int32", "i", "int", "int32", "int", py_type=int),
    SlangScalar(
        "uint32", "I", "uint", "int32", "int", load="uint({})", store="int({})", py_type=int
    ),
    SlangScalar("int64", "q", "int64_t", "int64", "int64_t", py_type=int),
    SlangScalar(
        "bool",
        "?",
        "bool",
        "bool",
        "uint8_t",
        load="({} != 0)",
        store="uint8_t({} ? 1 : 0)",
        py_type=bool,
    ),
    SlangScalar("uint64", "Q", "uint64_t", "int64", "int64_t", "uint64_t({})", "int64_t({})", int),
    SlangScalar("int8", "b", "int8_t", "int8", "int8_t", py_type=int),
    SlangScalar("uint8", "B", "uint8_t", "uint8", "uint8_t", py_type=int),
    SlangScalar("int16", "h", "int16_t", "int16", "int16_t", py_type=int),
    SlangScalar("uint16", "H", "uint16_t", "int16", "int16_t", "uint16_t({})", "int16_t({})", int),
)

NUMBER_OF_DTYPE: dict[str, int] = {t.dtype: t.number for t in TORCH_SCALARS}
DTYPE_OF_NUMBER: dict[int, str] = {t.number: t.dtype for t in TORCH_SCALARS}
MANIFEST_DTYPES: dict[str, str] = {t.manifest: t.dtype for t in TORCH_SCALARS if t.manifest}
FLOATING_DTYPES = frozenset(t.dtype for t in TORCH_SCALARS if t.floating)
REFUSED_DTYPES: dict[str, str] = {t.dtype: t.refused for t in TORCH_SCALARS if t.refused}

SLANG: dict[str, SlangScalar] = {s.slang: s for s in SLANG_SCALARS if s.slang}
"""The scalars slangspec passes, by Slang name."""
SLANG_FLOATS: tuple[str, ...] = tuple(
    name for name, s in SLANG.items() if s.dtype in FLOATING_DTYPES
)
SLANG_NAME_OF_REFLECTED: dict[str, str] = {s.reflected: s.slang for s in SLANG_SCALARS if s.slang}
STRUCT_CODE_OF_REFLECTED: dict[str, str] = {s.reflected: s.struct_code for s in SLANG_SCALARS}
