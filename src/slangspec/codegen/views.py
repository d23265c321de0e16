"""A parameter's view (``ParamPlan.view``): the type a kernel passes to the function's twin in
place of an array every call reads whole. Element ``i`` is read from the leaves' tensors at
their strides; in a backward kernel, its gradient is added where each leaf in the mask keeps
it, as ``slang_helpers.ACCUMULATE`` adds (into the copy of the gradient the call's number
picks, at the gradient's strides)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..define import frozen
from ..signatures.scalars import SLANG
from ..signatures.twins import ARRAY_OF
from ..specializer.plan import ParamPlan, SpecializationPlan
from . import parameter_names as names
from . import slang_helpers
from .element_text import member, points, subscript

VIEW = "slangspec_view"
"""The name of a parameter's view type, the parameter's index after it."""
_ARRAY = re.compile(r"(.+)\[\d+\]")
"""An array type, its element type first."""


@frozen
class View:
    """What a kernel declares for one view: its uniform parameters, its type's name and
    definition, the lines that fill a local of the type (``{local}`` in each), and the scalars
    whose gradients it adds."""

    params: list[str]
    name: str
    definition: str
    fills: list[str]
    scalars: set[str]


def _offset(index: str, strides: str, point: tuple[int, ...]) -> str:
    """The offset of element ``index`` of an array, at ``point`` within the element, at
    ``strides`` (the array's, then the element's dimensions')."""
    terms = [f"{index} * {strides}[0]"]
    terms += [f"{k} * {strides}[{d + 1}]" for d, k in enumerate(point)]
    return " + ".join(terms)


def view(
    plan: SpecializationPlan,
    k: int,
    p: ParamPlan,
    in_mask: Callable[[int], bool],
    typed: Callable[[str], str],
) -> View:
    """The view of parameter ``k`` (``p``) in a kernel whose mask ``in_mask`` reads, its types
    written as ``typed`` writes them."""
    rank, name = plan.call_rank, f"{VIEW}{k}"
    element = typed(_ARRAY.fullmatch(p.slang_type).group(1))
    params, fields, reads, adds, fills, scalars = [], [], [], [], [], set()
    for j in range(p.first, p.first + p.count):
        a = plan.args[j]
        leaf, strides = names.leaf(j), names.leaf_strides(j)
        storage, dims = SLANG[a.scalar].storage, len(a.elem)
        params += [f"uniform {storage}* {leaf}", f"uniform int {strides}[{dims}]"]
        fields += [f"{storage}* {leaf};", f"int {strides}[{dims}];"]
        fills.append(f"{{local}}.{leaf} = {leaf};")
        fills += [f"{{local}}.{strides}[{e}] = {strides}[{e}];" for e in range(dims)]
        for point in points(a.elem[1:]):
            value = SLANG[a.scalar].load.format(f"{leaf}[{_offset('i', strides, point)}]")
            reads.append(f"r{member(a.path)}{subscript(point)} = {value};")
        if not in_mask(j) or not a.differentiable:
            continue
        scalars.add(a.scalar)
        grad, at = names.gradient(j), f"{names.gradient(j)}_at"
        gstrides, copy = names.gradient_strides(j), names.gradient_copy(j)
        params += [
            f"uniform {storage}* {grad}",
            f"uniform int {gstrides}[{rank + dims}]",
            f"uniform uint {copy}[2]",
        ]
        fields += [f"{storage}* {grad};", f"int {at};", f"int {gstrides}[{dims}];"]
        terms = [f"int(_tid.x / {copy}[0] * {copy}[1])"]
        terms += [f"_idx[{d}] * {gstrides}[{d}]" for d in range(rank)]
        fills += [f"{{local}}.{grad} = {grad};", f"{{local}}.{at} = {' + '.join(terms)};"]
        fills += [f"{{local}}.{gstrides}[{e}] = {gstrides}[{rank + e}];" for e in range(dims)]
        for point in points(a.elem[1:]):
            offset = f"{at} + {_offset('i', gstrides, point)}"
            part = f"d{member(a.path)}{subscript(point)}"
            adds.append(f"{slang_helpers.ADD}({grad}, {offset}, {part});")
    definition = "\n".join(
        [
            f"struct {name} : {ARRAY_OF}<{element}>",
            "{",
            *(f"    {f}" for f in fields),
            f"    [BackwardDerivative(load_bwd)] {element} load(int i)",
            "    {",
            f"        {element} r{' = {}' if p.struct else ''};",
            *(f"        {line}" for line in reads),
            "        return r;",
            "    }",
            f"    void load_bwd(int i, {element}.Differential d)",
            "    {",
            *(f"        {line}" for line in adds),
            "    }",
            f"    __subscript(int i) -> {element}",
            "    {",
            "        [Differentiable] get { return load(i); }",
            "    }",
            "};",
            "",
        ]
    )
    return View(params, name, definition, fills, scalars)
