"""The scalar table is consistent with itself, with torch and with slangpy."""

import ast
import struct
from pathlib import Path

import slangpy as spy
import torch

from slangspec.signatures import scalars
from slangspec.signatures.scalars import (
    MANIFEST_DTYPES,
    NUMBER_OF_DTYPE,
    SLANG,
    SLANG_FLOATS,
    SLANG_SCALARS,
    TORCH_SCALARS,
)


def test_every_passed_scalar_takes_a_dtype_signatures_can_write():
    assert set(SLANG) == {
        *("half", "float", "double", "bool"),
        *("int8_t", "uint8_t", "int16_t", "uint16_t", "int", "uint", "int64_t", "uint64_t"),
    }
    for name, s in SLANG.items():
        assert s.dtype in NUMBER_OF_DTYPE, name
        assert s.storage and s.py_type in (float, int, bool), name
        assert s.load.count("{}") == 1 and s.store.count("{}") == 1, name
    assert set(SLANG_FLOATS) == {"half", "float", "double"}


def test_manifest_names_are_dtypes_signatures_can_write():
    assert set(MANIFEST_DTYPES.values()) <= set(NUMBER_OF_DTYPE)


def test_rows_are_unique_and_name_real_types():
    assert len({t.dtype for t in TORCH_SCALARS}) == len(TORCH_SCALARS)
    assert len({t.number for t in TORCH_SCALARS}) == len(TORCH_SCALARS)
    for t in TORCH_SCALARS:
        dtype = getattr(torch, t.dtype)
        assert isinstance(dtype, torch.dtype), t
        assert dtype.is_floating_point == t.floating, t
    assert len({s.reflected for s in SLANG_SCALARS}) == len(SLANG_SCALARS)
    for s in SLANG_SCALARS:
        assert hasattr(spy.TypeReflection.ScalarType, s.reflected), s.reflected
        assert len(s.struct_code) == 1 and struct.calcsize("<" + s.struct_code) > 0, s


def test_the_table_imports_neither_torch_nor_slangpy():
    tree = ast.parse(Path(scalars.__file__).read_text())
    modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert modules and not any(m.split(".")[0] in ("slangpy", "torch") for m in modules)
