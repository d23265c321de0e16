"""An entry point's uniform parameters, from Slang's reflection, as the ``Layout`` (of
``codegen.uniforms``) that ``UniformBlock`` packs and ``runtime.cuda_driver.DriverKernel``
launches with.

On CUDA every uniform parameter of an entry point is a parameter of its ``__global__``
function, by value (a pointer, a scalar, a ``FixedArray`` for an array, a struct for a tensor),
and the launcher hands them to the driver as one buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``), so
each sits at the offset Slang's layout gives it in uniform bytes: the reading is the one
``slang.block_layout.describe`` makes through slangpy's reflection.
"""

from __future__ import annotations

from typing import Any

from ...codegen.uniforms import Layout, Unpackable
from ...signatures.scalars import STRUCT_CODE_OF_REFLECTED
from ..slang.api import EntryPoint, TypeKind, TypeLayout


def _describe(layout: TypeLayout) -> dict[str, Any]:
    kind = layout.kind
    if kind == TypeKind.POINTER:
        return {"pointer": True}
    if kind == TypeKind.SCALAR:
        code = STRUCT_CODE_OF_REFLECTED.get(layout.scalar or "")
        if code is None:
            raise Unpackable(layout.name)
        return {"scalar": code}
    if kind == TypeKind.ARRAY:
        element = layout.element
        return {
            "array": layout.element_count,
            "stride": layout.element_stride,
            "element": _describe(element),
        }
    if kind == TypeKind.STRUCT:
        return {"struct": [[f.name, f.offset, _describe(f.type_layout)] for f in layout.fields]}
    raise Unpackable(f"{layout.name} ({kind})")


def entry_layout(entry: EntryPoint) -> Layout:
    """The parameter block of ``entry``; Unpackable when it is not plain bytes. Parameters of
    no uniform bytes (the dispatch thread id) are left out."""
    params = [p for p in entry.parameters if p.type_layout.size > 0]
    return {
        "size": max((p.offset + p.type_layout.size for p in params), default=0),
        "params": [[p.name, p.offset, _describe(p.type_layout)] for p in params],
    }
