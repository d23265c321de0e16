"""Scalar types: the one table of how torch dtypes, Slang scalars and reflected types relate.

Plain data, free of slangpy: reflected scalar types are named by their member name in
``slangpy.TypeReflection.ScalarType``, and modules that hold slangpy look the members up.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TorchScalar:
    """A torch dtype as signatures and manifests write it."""

    dtype: torch.dtype
    number: int  # torch's ScalarType number: the S field of a tensor signature
    manifest: str | None = None  # its name in a warm manifest; None: manifests cannot name it


@dataclass(frozen=True)
class SlangScalar:
    """A reflected scalar type; those with a Slang name are the ones slangspec passes."""

    reflected: str  # the member name in slangpy.TypeReflection.ScalarType
    struct_code: str  # how a uniform of this type is packed, as a ``struct`` format code
    slang: str | None = None
    dtype: torch.dtype | None = None  # the dtype of the tensors passed for it
    storage: str = ""  # the element type generated kernels read and write those tensors as
    load: str = "{}"  # a stored element -> the Slang value, as a format string
    store: str = "{}"  # a Slang value -> the stored element, as a format string
    py_type: type | None = None  # what a Python scalar passed for it is converted to


# Manifest-named dtypes first, in the order manifest errors list them.
TORCH_SCALARS = (
    TorchScalar(torch.float16, 5, "f16"),
    TorchScalar(torch.float32, 6, "f32"),
    TorchScalar(torch.float64, 7, "f64"),
    TorchScalar(torch.bfloat16, 15, "bf16"),
    TorchScalar(torch.int32, 3, "i32"),
    TorchScalar(torch.int64, 4, "i64"),
    TorchScalar(torch.bool, 11, "bool"),
    TorchScalar(torch.uint8, 0),
    TorchScalar(torch.int8, 1),
    TorchScalar(torch.int16, 2),
    TorchScalar(torch.complex64, 9),
    TorchScalar(torch.complex128, 10),
)

# Rows: reflected name, struct code, Slang name, tensor dtype, storage type; the rest by name.
SLANG_SCALARS = (
    SlangScalar("float16", "e", "half", torch.float16, "half", py_type=float),
    SlangScalar("float32", "f", "float", torch.float32, "float", py_type=float),
    SlangScalar("float64", "d", "double", torch.float64, "double", py_type=float),
    SlangScalar("int32", "i", "int", torch.int32, "int", py_type=int),
    SlangScalar(
        "uint32", "I", "uint", torch.int32, "int", load="uint({})", store="int({})", py_type=int
    ),
    SlangScalar(
        "bool",
        "?",
        "bool",
        torch.bool,
        "uint8_t",
        load="({} != 0)",
        store="uint8_t({} ? 1 : 0)",
        py_type=bool,
    ),
    SlangScalar("int64", "q"),
    SlangScalar("uint64", "Q"),
    SlangScalar("int8", "b"),
    SlangScalar("uint8", "B"),
    SlangScalar("int16", "h"),
    SlangScalar("uint16", "H"),
)

NUMBER_OF_DTYPE: dict[torch.dtype, int] = {t.dtype: t.number for t in TORCH_SCALARS}
DTYPE_OF_NUMBER: dict[int, torch.dtype] = {t.number: t.dtype for t in TORCH_SCALARS}
MANIFEST_DTYPES: dict[str, torch.dtype] = {t.manifest: t.dtype for t in TORCH_SCALARS if t.manifest}

SLANG: dict[str, SlangScalar] = {s.slang: s for s in SLANG_SCALARS if s.slang}
"""The scalars slangspec passes, by Slang name."""
SLANG_FLOATS: tuple[str, ...] = tuple(
    name for name, s in SLANG.items() if s.dtype is not None and s.dtype.is_floating_point
)
SLANG_NAME_OF_REFLECTED: dict[str, str] = {s.reflected: s.slang for s in SLANG_SCALARS if s.slang}
STRUCT_CODE_OF_REFLECTED: dict[str, str] = {s.reflected: s.struct_code for s in SLANG_SCALARS}
