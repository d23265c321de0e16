"""SpecializationPlan -> Slang source of the forward kernel and of each grad-mask backward kernel.

Every generated module imports the user's module and declares one compute entry point, ``main``,
whose ``uniform`` parameters are bound by dispatch. Thread ``i`` runs the call at the ``i``-th
point of the row-major call shape. Elementwise leaves arrive as pointers with per-dimension
element strides (0 along broadcast dimensions), one stride per call dimension and per dimension
of the element shape (a vector's, matrix's or array's); a struct argument is assembled field by
field from its leaves. Every output (the result, each leaf of a struct result, each ``out`` and
``inout`` parameter's) is stored row-major over the call shape and its element shape. Backward
kernels write each input's gradient over the full call shape, and dispatch sums it back to the
input's shape.

A change to what is generated for a plan bumps ``formats.CODEGEN_FORMAT``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..signatures.function_ref import (
    CONSTRUCTOR,
    FunctionRef,
    canonical_name,
    parse_function_ref,
)
from ..signatures.generators import GENERATOR
from ..signatures.scalars import SLANG
from ..signatures.text import IDENTIFIER
from ..signatures.twins import TWIN, twin_module_name
from ..specializer.kinds import KIND
from ..specializer.plan import (
    KERNEL_LOCAL,
    RESULT,
    ArgPlan,
    OutputPlan,
    ParamPlan,
    SpecializationPlan,
)
from . import parameter_names as names
from . import slang_helpers
from .element_text import member, points, subscript
from .views import view

_CONCRETE = "slangspec_concrete"
"""The function a kernel calls in place of a method, or of a function with interface
parameters: the same call as a free function of the call's types (the structs the call names
for interfaces, the struct first for a method's ``this``), which ``bwd_diff`` can
differentiate."""
_CONCRETE_PARAM = "slangspec_x"
"""What ``_CONCRETE``'s parameters are named after (``slangspec_x0``, ...): names a user's
module cannot take, since the wrapper calls the user's function, whose name its parameters
would hide."""
_ALIAS = "slangspec_type"
THREADS_PER_GROUP = 128


def _access(a: ArgPlan, point: tuple[int, ...]) -> str:
    """Where leaf ``a``'s element at ``point`` (of its ``elem``) sits within its parameter's
    value: each step of its path after the indices of the arrays of structs it is taken in,
    then the rest of ``point``: ``[2].center[1]`` of field ``center`` of a ``Sphere[4]``."""
    at, parts = 0, []
    for name, extents in zip(a.path, a.arrays or ((),) * len(a.path), strict=True):
        parts.append(f"{subscript(point[at : at + len(extents)])}.{name}")
        at += len(extents)
    return "".join(parts) + subscript(point[at:])


def _element(a: ArgPlan) -> str:
    """The element type of whole-tensor leaf ``a``: its scalar, or a vector of them."""
    return f"vector<{a.scalar}, {a.elem[0]}>" if a.elem else a.scalar


def _aliases(plan: SpecializationPlan) -> dict[str, str]:
    """The types of ``plan`` that name a type as a kernel names its own parameters and locals
    (``KERNEL_LOCAL``), each with the alias a kernel declares for it at
    module scope, where the name is still the user's type, and writes in its place."""
    texts = [p.slang_type for p in plan.params] + [a.slang_type for a in plan.args]
    hidden = [
        t
        for t in dict.fromkeys([*texts, plan.result or ""])
        if any(KERNEL_LOCAL.fullmatch(n) for n in re.findall(IDENTIFIER, t))
    ]
    return {t: f"{_ALIAS}{i}" for i, t in enumerate(hidden)}


def _lanes(a: ArgPlan) -> list[tuple[int, ...]]:
    """Every index into the arrays of structs leaf ``a`` is taken in, row-major."""
    return points(tuple(e for extents in a.arrays for e in extents))


class _Writer:
    def __init__(self, plan: SpecializationPlan, mask: str | None) -> None:
        self.plan = plan
        self.mask = mask
        self.params = ["uint3 _tid : SV_DispatchThreadID", f"uniform uint {names.THREADS}"]
        self.body: list[str] = []
        self.helpers: dict[str, str] = {}
        self.aliases = _aliases(plan)
        if plan.call_rank:
            self.params.append(f"uniform int {names.CALL_SHAPE}[{plan.call_rank}]")

    def line(self, text: str) -> None:
        self.body.append("    " + text)

    def typed(self, text: str) -> str:
        """How the kernel writes the type ``text``: itself, or its alias (``_aliases``)."""
        return self.aliases.get(text, text)

    def in_mask(self, j: int) -> bool:
        return self.mask is not None and self.mask[j] == "1"

    def index(self) -> None:
        rank = self.plan.call_rank
        if not rank:
            return
        self.line(f"int _idx[{rank}];")
        self.line("uint _rest = _tid.x;")
        shape = names.CALL_SHAPE
        for d in reversed(range(rank)):
            self.line(f"_idx[{d}] = int(_rest % uint({shape}[{d}]));")
            if d:
                self.line(f"_rest = _rest / uint({shape}[{d}]);")
        if self.plan.call_ids:
            self.call_ids(rank)

    def call_ids(self, rank: int) -> None:
        """Set slangpy's call index, which ``CallShapeInfo::get_call_id()`` reads: from the
        thread's number over the call shape's row-major strides, as slangpy's own kernels do
        with no call groups."""
        shape = names.CALL_SHAPE
        self.line(f"int _call_strides[{rank}];")
        self.line(f"_call_strides[{rank - 1}] = 1;")
        for d in reversed(range(rank - 1)):
            self.line(f"_call_strides[{d}] = _call_strides[{d + 1}] * {shape}[{d + 1}];")
        self.line(
            f"init_thread_local_call_shape_info<{rank}>(0, int3(0, 0, 0), int3(int(_tid.x), 0, 0), "
            f"_call_strides, {shape}, {shape});"
        )

    def read(
        self,
        target: str,
        offset: str,
        pointer: str,
        strides: str,
        call_dims: int,
        scalar: str,
        elem: tuple[int, ...],
        declare: str = "",
    ) -> None:
        """Read ``target`` from ``pointer`` at per-dimension ``strides``: the last ``call_dims``
        call dimensions, then the element shape's, element by element. ``declare`` names the
        type ``target`` is declared as; without it ``target`` exists already (a struct's
        field). ``offset`` names the variable that holds the element's offset."""
        rank = self.plan.call_rank
        terms = [f"_idx[{rank - call_dims + d}] * {strides}[{d}]" for d in range(call_dims)]
        self.line(f"int {offset} = {' + '.join(terms) if terms else '0'};")
        load = SLANG[scalar].load
        if declare and not elem:
            self.line(f"{declare} {target} = {load.format(f'{pointer}[{offset}]')};")
            return
        if declare:
            self.line(f"{declare} {target};")
        for point in points(elem):
            at = " + ".join(
                [offset, *(f"{k} * {strides}[{call_dims + d}]" for d, k in enumerate(point))]
            )
            self.line(f"{target}{subscript(point)} = {load.format(f'{pointer}[{at}]')};")

    def value(self, j: int, a: ArgPlan) -> str:
        """Declare leaf ``j``'s value for this thread; returns the expression to pass."""
        name = names.leaf(j)
        if a.kind == "uniform" and a.elem:
            # Tuples of numbers bind as arrays of scalars, which every parameter layout packs.
            self.params.append(f"uniform {a.scalar} {name}[{a.elem[0]}]")
            self.line(f"{self.typed(a.slang_type)} v{j};")
            for k in range(a.elem[0]):
                self.line(f"v{j}[{k}] = {name}[{k}];")
            return f"v{j}"
        if a.kind == "uniform":
            self.params.append(f"uniform {self.typed(a.slang_type)} {name}")
            return name
        if a.kind == "grid":
            return self.grid(j, a)
        if a.kind == "generator":
            return self.generated(j, a)
        if a.kind == "tensor":
            binding = self.tensor_binding(j, a)
            struct_rank = a.rank - len(a.elem)
            self.params.append(f"uniform {binding}<{_element(a)}, {struct_rank}> {name}")
            if a.call_dims:
                return self.slice(j, a, binding)
            if self.in_mask(j) and self.plan.sums_per_warp(j):
                self.helpers[slang_helpers.WAVE_TENSOR] = slang_helpers.WAVE_DIFF_TENSOR
                copy = names.gradient_copy(j)
                self.params.append(f"uniform uint {copy}[2]")
                at = f"int(_tid.x / {copy}[0] * {copy}[1])"
                self.line(f"{slang_helpers.WAVE_TENSOR}<{struct_rank}> w{j} = {{ {name}, {at} }};")
                return f"w{j}"
            return name
        if a.kind == "target":
            self.line(f"{self.typed(a.slang_type)} v{j} = {{}};")
            return f"v{j}"
        self.params.append(f"uniform {SLANG[a.scalar].storage}* {name}")
        dims = a.call_dims + len(a.elem)
        strides = names.leaf_strides(j)
        if dims:
            self.params.append(f"uniform int {strides}[{dims}]")
        declare = self.typed(a.slang_type)
        self.read(f"v{j}", f"v{j}_o", name, strides, a.call_dims, a.scalar, a.elem, declare)
        return f"v{j}"

    def tensor_binding(self, j: int, a: ArgPlan) -> str:
        """The tensor struct whole-tensor leaf ``j`` binds as in this kernel (see ``Kind``)."""
        row = a.row
        if self.in_mask(j):
            return row.grad_binding
        if self.mask is not None and row.backward_binding:
            return row.backward_binding
        return a.binding

    def grid(self, j: int, a: ArgPlan) -> str:
        """The point of grid leaf ``j`` (its dimensions the call's last ``a.rank``): a vector's
        ``.x`` the innermost dimension, an array's elements in dimension order, each
        ``offset + index * stride`` from the uniform words of a strided grid."""
        rank, name = self.plan.call_rank, names.leaf(j)
        dims = [f"_idx[{rank - a.rank + d}]" for d in range(a.rank)]
        if a.binding == "strided_index":
            self.params.append(f"uniform uint {name}[{2 * a.rank}]")
            dims = [
                f"int({name}[{d}]) + {i} * int({name}[{a.rank + d}])" for d, i in enumerate(dims)
            ]
        if a.slang_type.endswith("]"):
            return self.components(j, a, [f"{a.scalar}({i})" for i in dims])
        if a.binding == "index":
            ctor = a.scalar if a.rank == 1 else f"{a.scalar}{a.rank}"
            return f"{ctor}({', '.join(reversed(dims))})"
        return self.components(j, a, [f"{a.scalar}({i})" for i in reversed(dims)])

    def components(self, j: int, a: ArgPlan, values: list[str]) -> str:
        """Declare leaf ``j``'s value component by component (a scalar: its one value)."""
        if a.slang_type == a.scalar:
            self.line(f"{a.slang_type} v{j} = {values[0]};")
            return f"v{j}"
        self.line(f"{self.typed(a.slang_type)} v{j};")
        for k, value in enumerate(values):
            self.line(f"v{j}[{k}] = {value};")
        return f"v{j}"

    def generated(self, j: int, a: ArgPlan) -> str:
        """The value generator leaf ``j`` makes for this thread, as slangpy's do: see
        ``signatures.generators``."""
        width = a.elem[0] if a.elem else 1
        if a.binding == "call_id":
            rank = self.plan.call_rank
            if a.slang_type.endswith("]"):
                ids = [f"_idx[{d}]" for d in range(rank)]
            else:
                ids = [f"_idx[{rank - 1 - k}]" for k in range(rank)] + ["0"] * (width - rank)
            return self.components(j, a, [f"{a.scalar}({i})" for i in ids])
        if a.binding == "thread_id":
            return self.components(j, a, [f"{a.scalar}(_tid.{c})" for c in "xyz"[:width]])
        name = names.leaf(j)
        self.params.append(f"uniform uint {name}[{GENERATOR[a.binding].words}]")
        self.helpers["wang"] = slang_helpers.WANG_HASH
        self.line(f"uint h{j} = _tid.x * {width}u;")
        self.line(f"for (uint w{j} = 0; w{j} < {name}[1]; w{j}++)")
        self.line(f"    h{j} = {slang_helpers.WANG}(h{j});")
        self.line(f"h{j} = h{j} ^ {name}[0];")
        hashes = []
        for k in range(width):
            self.line(f"h{j} = {slang_helpers.WANG}(h{j});")
            self.line(f"uint h{j}_{k} = h{j};")
            hashes.append(f"h{j}_{k}")
        if a.binding == "wang_hash":
            return self.components(j, a, [f"{a.scalar}({h})" for h in hashes])
        unit = [f"float({h} & 0x7FFFFFu) / float(0x800000)" for h in hashes]
        ends = f"asfloat({name}[2]), asfloat({name}[3])"
        return self.components(j, a, [f"lerp({ends}, {u})" for u in unit])

    def slice(self, j: int, a: ArgPlan, binding: str) -> str:
        """Tensor leaf ``j`` past its leading ``call_dims`` dimensions, at this thread's index
        there (index 0 along a dimension of size 1, which broadcasts)."""
        rank, lead, dims = self.plan.call_rank, a.call_dims, a.rank - a.call_dims - len(a.elem)
        self.line(f"{binding}<{_element(a)}, {dims}> v{j};")
        for part in [f".{p}" for p in KIND[binding].parts] or [""]:
            whole, mine = f"{names.leaf(j)}{part}", f"v{j}{part}"
            self.line(f"{mine}._data = {whole}._data;")
            at = [
                f"min(uint(_idx[{rank - lead + d}]), {whole}._shape[{d}] - 1)" for d in range(lead)
            ]
            terms = [f"{i} * {whole}._strides[{d}]" for d, i in enumerate(at)]
            self.line(f"{mine}._offset = {' + '.join([f'{whole}._offset', *terms])};")
            for d in range(dims):
                self.line(f"{mine}._shape[{d}] = {whole}._shape[{lead + d}];")
                self.line(f"{mine}._strides[{d}] = {whole}._strides[{lead + d}];")
        return f"v{j}"

    def argument(self, k: int, p: ParamPlan) -> str:
        """The expression passed for parameter ``k``: its one leaf's value, or a struct
        assembled from its leaves."""
        leaves = range(p.first, p.first + p.count)
        if p.view:
            return self.view(k, p)
        if not p.struct:
            return self.value(p.first, self.plan.args[p.first])
        self.line(f"{self.typed(p.slang_type)} s{k}{' = {}' if p.direction == 'out' else ''};")
        for j in leaves:
            a = self.plan.args[j]
            if a.kind == "target":
                continue
            value = self.value(j, a)
            # A tensor's value holds one element per struct of the arrays; any other the one
            # value every struct takes.
            each = a.kind == "elementwise"
            for lane in _lanes(a):
                at = _access(a, lane) if a.arrays else member(a.path)
                self.line(f"s{k}{at} = {value}{subscript(lane) if each else ''};")
        return f"s{k}"

    def view(self, k: int, p: ParamPlan) -> str:
        """Declare parameter ``k``'s view (``ParamPlan.view``, ``views.view``)."""
        made = view(self.plan, k, p, self.in_mask, self.typed)
        self.params += made.params
        for scalar in made.scalars:
            self.helpers[f"accumulate {scalar}"] = slang_helpers.accumulate(scalar)
        self.helpers[made.name] = made.definition
        self.line(f"{made.name} s{k};")
        for line in made.fills:
            self.line(line.format(local=f"s{k}"))
        return f"s{k}"

    def store(
        self,
        target: str,
        scalar: str,
        elem: tuple[int, ...],
        expr: str,
        leaf: ArgPlan | None = None,
    ) -> None:
        """Store the value ``expr`` (of ``scalar`` over ``elem``) row-major into ``target``;
        with ``leaf``, ``expr`` is a value of its parameter, where the leaf sits."""
        self.params.append(f"uniform {SLANG[scalar].storage}* {target}")
        every = points(elem)
        store = SLANG[scalar].store
        for flat, point in enumerate(every):
            at = f"_tid.x * {len(every)} + {flat}" if elem else "_tid.x"
            value = expr + (subscript(point) if leaf is None else _access(leaf, point))
            self.line(f"{target}[{at}] = {store.format(value)};")

    def accumulate(self, j: int, a: ArgPlan, expr: str) -> None:
        """Add the value ``expr`` of leaf ``j``'s parameter into its gradient, where the leaf
        sits in it, at the gradient's strides: per call dimension, then per element dimension
        (``parameter_names.gradient_strides``), in the copy of it the call's number picks
        (``parameter_names.gradient_copy``)."""
        rank, name, strides = self.plan.call_rank, names.gradient(j), names.gradient_strides(j)
        copy = names.gradient_copy(j)
        self.params.append(f"uniform {SLANG[a.scalar].storage}* {name}")
        self.params.append(f"uniform int {strides}[{rank + len(a.elem)}]")
        self.params.append(f"uniform uint {copy}[2]")
        self.helpers[f"accumulate {a.scalar}"] = slang_helpers.accumulate(a.scalar)
        terms = [f"int(_tid.x / {copy}[0] * {copy}[1])"]
        terms += [f"_idx[{d}] * {strides}[{d}]" for d in range(rank)]
        self.line(f"int _g{j} = {' + '.join(terms)};")
        for point in points(a.elem):
            at = " + ".join(
                [f"_g{j}", *(f"{k} * {strides}[{rank + d}]" for d, k in enumerate(point))]
            )
            self.line(f"{slang_helpers.ADD}({name}, {at}, {expr}{_access(a, point)});")

    def cotangent(self, o: int, out: OutputPlan, target: str) -> None:
        """Read output ``o``'s cotangent into ``target`` (declared), at its own strides: torch
        often hands an expanded one (stride 0, from a sum) or a transposed or sliced one."""
        rank, name, strides = self.plan.call_rank, names.cotangent(o), names.cotangent_strides(o)
        self.params.append(f"uniform {SLANG[out.scalar].storage}* {name}")
        if rank + len(out.elem):
            self.params.append(f"uniform int {strides}[{rank + len(out.elem)}]")
        self.read(target, f"_do{o}", name, strides, rank, out.scalar, out.elem)

    def source(self, body_start: list[str]) -> str:
        p = self.plan
        imports = [f"import {p.module};"]
        if any(q.view for q in p.params):
            imports.append(f"import {twin_module_name(p.module, _callee(p))};")
        if p.call_ids or any(a.kind == "tensor" for a in p.args):
            imports.append("import slangpy;")
        if p.call_ids:
            # slangpy's link-time constants of the call shape, as its kernels define them.
            imports += [
                f"export static const int call_data_len = {p.call_rank};",
                "export static const int call_group_size = 1;",
                "export static const int[call_data_len] call_group_strides = {};",
                "export static const int[call_data_len] call_group_shape_vector = {};",
            ]
        params = ",\n    ".join(self.params)
        aliases = [f"typealias {alias} = {t};" for t, alias in self.aliases.items()]
        concrete = _concrete(p, self.typed)
        return "\n".join(
            [
                f"// slangspec generated: {_callee(p)} {self.mask or 'forward'}",
                f"// {p.signature}",
                *imports,
                *aliases,
                "",
                *self.helpers.values(),
                *concrete,
                '[shader("compute")]',
                f"[numthreads({THREADS_PER_GROUP}, 1, 1)]",
                f"void {names.ENTRY_POINT}(\n    {params})",
                "{",
                *body_start,
                *self.body,
                "}",
                "",
            ]
        )


def _concrete(plan: SpecializationPlan, typed: Callable[[str], str]) -> list[str]:
    """The definition of ``_CONCRETE`` for a plan that needs it (``SpecializationPlan.wrapped``),
    its types written as ``typed`` writes them; none for another."""
    if not plan.wrapped:
        return []
    declared = []
    for k, p in enumerate(plan.params):
        frozen = plan.differentiable and p.direction == "in" and not p.differentiable
        direction = "" if p.direction == "in" else f"{p.direction} "
        declared.append(
            f"{'no_diff ' if frozen else ''}{direction}{typed(p.slang_type)} {_CONCRETE_PARAM}{k}"
        )
    passed = [f"{_CONCRETE_PARAM}{k}" for k in range(len(plan.params))]
    callee, ref = _callee(plan), parse_function_ref(plan.function)
    if ref.owner is not None and plan.params and plan.params[0].name == "this":
        method = FunctionRef(ref.name, ref.args).text
        call = f"{passed[0]}.{method}({', '.join(passed[1:])})"
    elif ref.owner is not None and ref.name == CONSTRUCTOR:
        call = f"{ref.owner.text}({', '.join(passed)})"
    else:
        call = f"{callee}({', '.join(passed)})"
    return [
        *(["[Differentiable]"] if plan.differentiable else []),
        f"{typed(plan.result) if plan.result else 'void'} {_CONCRETE}({', '.join(declared)})",
        "{",
        f"    {'return ' if plan.result else ''}{call};",
        "}",
        "",
    ]


def _called(plan: SpecializationPlan) -> str:
    """The function a kernel calls: the plan's, its twin where it passes views, or
    ``_CONCRETE`` standing for it."""
    if plan.wrapped:
        return _CONCRETE
    return TWIN + _callee(plan) if any(p.view for p in plan.params) else _callee(plan)


def _output_value(plan: SpecializationPlan, exprs: list[str], o: OutputPlan) -> str:
    base = "_r" if o.source == RESULT else exprs[o.source]
    return base + member(o.path)


def _callee(plan: SpecializationPlan) -> str:
    """The function a kernel calls, rendered from its parsed name; ValueError for a plan whose
    module or function is not canonically named, or whose signature is more than one line, so
    no other text of a plan reaches the source."""
    callee = canonical_name(plan.function)
    if callee != plan.function:
        raise ValueError(f"plan names function {plan.function!r}, not as {callee!r} spells it")
    module = plan.module
    if not (module.isascii() and module.isidentifier()) or not plan.signature.isprintable():
        raise ValueError(f"plan names module {plan.module!r} or signature {plan.signature!r}")
    return callee


_GUARD = [f"    if (_tid.x >= {names.THREADS})", "        return;"]


def forward_source(plan: SpecializationPlan) -> str:
    """The forward kernel: one call per point of the call shape, outputs stored row-major."""
    w = _Writer(plan, None)
    w.index()
    exprs = [w.argument(k, p) for k, p in enumerate(plan.params)]
    call = f"{_called(plan)}({', '.join(exprs)})"
    w.line(f"{w.typed(plan.result)} _r = {call};" if plan.result else f"{call};")
    for o, out in enumerate(plan.outputs):
        if not plan.is_whole(out):
            w.store(names.output(o), out.scalar, out.elem, _output_value(plan, exprs, out))
    return w.source(_GUARD)


def backward_source(plan: SpecializationPlan, mask: str) -> str:
    """The backward kernel for ``mask`` (one char per leaf): gradients for '1' leaves only.

    Leaves outside the mask get no gradient storage: differentiable values are passed as
    pairs with a zero derivative, whole tensors bind primal-only.
    """
    if mask not in plan.backward_masks:
        raise ValueError(f"{plan.function}: {mask!r} is not a backward mask of this plan")
    w = _Writer(plan, mask)
    w.index()
    # The cotangent of each output, gathered per owner: the result (``_d``) or a parameter
    # (``d<k>``), a struct's field by field into its Differential.
    declared: set[str] = set()
    for o, out in enumerate(plan.outputs):
        if not out.differentiable or plan.is_whole(out):
            continue
        if out.source == RESULT:
            name, t, struct = "_d", plan.result, plan.result_struct
        else:
            p = plan.params[out.source]
            name, t, struct = f"d{out.source}", p.slang_type, p.struct
        if name not in declared:
            declared.add(name)
            w.line(f"{w.typed(t)}{'.Differential' if struct else ''} {name};")
        w.cotangent(o, out, name + member(out.path))
    passed = []
    for k, p in enumerate(plan.params):
        if p.direction == "out":
            if p.differentiable:
                passed.append(f"d{k}")
            continue
        value = w.argument(k, p)
        if p.differentiable and not p.view:
            d = f", d{k}" if p.direction == "inout" else ""
            w.line(f"var p{k} = diffPair({value}{d});")
            value = f"p{k}"
        passed.append(value)
    if "_d" in declared:
        passed.append("_d")
    w.line(f"bwd_diff({_called(plan)})({', '.join(passed)});")
    for k, p in enumerate(plan.params):
        for j in range(p.first, p.first + p.count):
            a = plan.args[j]
            if w.in_mask(j) and a.row.grad_binding == "pointer" and not p.view:
                if plan.accumulates(a):
                    w.accumulate(j, a, f"p{k}.d")
                else:
                    w.store(names.gradient(j), a.scalar, a.elem, f"p{k}.d", a)
    return w.source(_GUARD)


def kernel_source(plan: SpecializationPlan, label: str) -> str:
    """The source of the kernel ``label`` names: "forward", or a backward grad mask."""
    return forward_source(plan) if label == "forward" else backward_source(plan, label)
