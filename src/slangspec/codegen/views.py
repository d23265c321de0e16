"""A parameter's view (``ParamPlan.view``): the type a kernel passes to the function's twin in
place of an array every call reads whole. Element ``i`` is read from the leaves' tensors at
their strides; in a backward kernel, its gradient is added where each leaf in the mask keeps
it, as ``slang_helpers.ACCUMULATE`` adds (into the copy of the gradient the call's number
picks, at the gradient's strides). The subscript is recomputed in the backward pass rather
than kept: a loop over the array would otherwise keep every element it read, in the thread's
local memory (a 1000-element loop took more than a GPU could give its threads)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..define import frozen
from ..signatures.scalars import SLANG
from ..signatures.twins import ARRAY_OF, struct_of_arrays
from ..specializer.plan import ArgPlan, ParamPlan, SpecializationPlan
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
    written as ``typed`` writes them: of an array, or of a struct of arrays (a view of each
    array field, as the struct's property of its name)."""
    name, leaves = f"{VIEW}{k}", range(p.first, p.first + p.count)
    array = _ARRAY.fullmatch(p.slang_type)
    if array is not None:
        element = typed(array.group(1))
        return _array_view(
            plan, name, element, p.struct, [(j, plan.args[j].path) for j in leaves], in_mask
        )
    parts = {plan.args[j].path[0]: j for j in leaves}
    views = {
        field: _array_view(
            plan, f"{name}_{field}", _element(plan.args[j]), False, [(j, ())], in_mask
        )
        for field, j in parts.items()
    }
    lines = [f"struct {name} : {struct_of_arrays(p.slang_type)}", "{"]
    for field, v in views.items():
        lines += [
            f"    {v.name} v_{field};",
            f"    typealias F_{field} = {v.name};",
            f"    property F_{field} {field} {{ get {{ return v_{field}; }} }}",
        ]
    return View(
        [q for v in views.values() for q in v.params],
        name,
        "\n".join([*(v.definition for v in views.values()), *lines, "};", ""]),
        [
            f.replace("{local}", f"{{local}}.v_{field}")
            for field, v in views.items()
            for f in v.fills
        ],
        {s for v in views.values() for s in v.scalars},
    )


def _element(a: ArgPlan) -> str:
    """The element of an array field leaf ``a``: its scalar, or a vector of them."""
    return a.scalar if len(a.elem) == 1 else f"vector<{a.scalar}, {a.elem[1]}>"


def _array_view(
    plan: SpecializationPlan,
    name: str,
    element: str,
    struct: bool,
    leaves: list[tuple[int, tuple[str, ...]]],
    in_mask: Callable[[int], bool],
) -> View:
    """The view type ``name`` of an array of ``element`` (a struct where ``struct``), each leaf
    ``j`` of ``leaves`` the part of an element at its path."""
    rank = plan.call_rank
    params, fields, reads, adds, fills, scalars = [], [], [], [], [], set()
    for j, path in leaves:
        a = plan.args[j]
        leaf, strides = names.leaf(j), names.leaf_strides(j)
        storage, dims = SLANG[a.scalar].storage, len(a.elem)
        params += [f"uniform {storage}* {leaf}", f"uniform int {strides}[{dims}]"]
        fields += [f"{storage}* {leaf};", f"int {strides}[{dims}];"]
        fills.append(f"{{local}}.{leaf} = {leaf};")
        fills += [f"{{local}}.{strides}[{e}] = {strides}[{e}];" for e in range(dims)]
        for point in points(a.elem[1:]):
            value = SLANG[a.scalar].load.format(f"{leaf}[{_offset('i', strides, point)}]")
            reads.append(f"r{member(path)}{subscript(point)} = {value};")
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
            part = f"d{member(path)}{subscript(point)}"
            adds.append(f"{slang_helpers.ADD}({grad}, {offset}, {part});")
    definition = "\n".join(
        [
            f"struct {name} : {ARRAY_OF}<{element}>",
            "{",
            *(f"    {f}" for f in fields),
            f"    [BackwardDerivative(load_bwd)] {element} load(int i)",
            "    {",
            f"        {element} r{' = {}' if struct else ''};",
            *(f"        {line}" for line in reads),
            "        return r;",
            "    }",
            f"    void load_bwd(int i, {element}.Differential d)",
            "    {",
            *(f"        {line}" for line in adds),
            "    }",
            f"    __subscript(int i) -> {element}",
            "    {",
            "        [Differentiable] [PreferRecompute] get { return load(i); }",
            "    }",
            "};",
            "",
        ]
    )
    return View(params, name, definition, fills, scalars)
