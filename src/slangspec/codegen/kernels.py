"""SpecializationPlan -> Slang source of the forward kernel and of each grad-mask backward kernel.

Every generated module imports the user's module and declares one compute entry point, ``main``,
whose ``uniform`` parameters are bound by dispatch. Thread ``i`` runs the call at the ``i``-th
point of the row-major call shape. Elementwise arguments arrive as pointers with per-dimension
element strides (0 along broadcast dimensions); backward kernels write each input's gradient
over the full call shape, and dispatch sums it back to the input's shape.

A change to what is generated for a plan bumps ``toolchain.CODEGEN_FORMAT``.
"""

from __future__ import annotations

from ..scalars import SLANG
from ..specializer.plan import ArgPlan, SpecializationPlan

ENTRY_POINT = "slangspec_main"
THREADS_PER_GROUP = 128


def _components(width: int) -> list[str]:
    return ["x", "y", "z", "w"][:width] if width else [""]


class _Writer:
    def __init__(self, plan: SpecializationPlan, mask: str | None) -> None:
        self.plan = plan
        self.mask = mask
        self.params: list[str] = ["uint3 _tid : SV_DispatchThreadID", "uniform uint _n"]
        self.body: list[str] = []
        if plan.call_rank:
            self.params.append(f"uniform int _shape[{plan.call_rank}]")

    def line(self, text: str) -> None:
        self.body.append("    " + text)

    def in_mask(self, i: int) -> bool:
        return self.mask is not None and self.mask[i] == "1"

    def index(self) -> None:
        rank = self.plan.call_rank
        if not rank:
            return
        self.line(f"int _idx[{rank}];")
        self.line("uint _rest = _tid.x;")
        for d in reversed(range(rank)):
            self.line(f"_idx[{d}] = int(_rest % uint(_shape[{d}]));")
            if d:
                self.line(f"_rest = _rest / uint(_shape[{d}]);")

    def value(self, i: int, a: ArgPlan) -> str:
        """Declare the argument's value for this thread; returns the expression to pass."""
        rank = self.plan.call_rank
        if a.kind == "uniform":
            self.params.append(f"uniform {a.slang_type} a{i}")
            return f"a{i}"
        if a.kind == "grid":
            comps = [f"_idx[{rank - 1 - k}]" for k in range(a.rank)]
            ctor = a.scalar if a.rank == 1 else f"{a.scalar}{a.rank}"
            return f"{ctor}({', '.join(comps)})"
        if a.kind == "tensor":
            binding = "DiffTensor" if self.in_mask(i) else a.binding
            self.params.append(f"uniform {binding}<{a.scalar}, {a.rank}> a{i}")
            return f"a{i}"
        strides = a.call_dims + (1 if a.width else 0)
        scalar = SLANG[a.scalar]
        self.params.append(f"uniform {scalar.storage}* a{i}")
        if strides:
            self.params.append(f"uniform int a{i}_st[{strides}]")
        terms = [f"_idx[{rank - a.call_dims + d}] * a{i}_st[{d}]" for d in range(a.call_dims)]
        self.line(f"int o{i} = {' + '.join(terms) if terms else '0'};")
        if a.width:
            loads = [
                scalar.load.format(f"a{i}[o{i} + {k} * a{i}_st[{a.call_dims}]]")
                for k in range(a.width)
            ]
            self.line(f"{a.slang_type} v{i} = {a.slang_type}({', '.join(loads)});")
        else:
            self.line(f"{a.slang_type} v{i} = {scalar.load.format(f'a{i}[o{i}]')};")
        return f"v{i}"

    def source(self, body_start: list[str]) -> str:
        p = self.plan
        imports = [f"import {p.module};"]
        if any(a.kind == "tensor" for a in p.args):
            imports.append("import slangpy;")
        params = ",\n    ".join(self.params)
        return "\n".join(
            [
                f"// slangspec generated: {p.function} {self.mask or 'forward'}",
                f"// {p.signature}",
                *imports,
                "",
                '[shader("compute")]',
                f"[numthreads({THREADS_PER_GROUP}, 1, 1)]",
                f"void {ENTRY_POINT}(\n    {params})",
                "{",
                *body_start,
                *self.body,
                "}",
                "",
            ]
        )


def _store_value(w: _Writer, target: str, scalar: str, width: int, expr: str) -> None:
    store = SLANG[scalar].store
    for k, c in enumerate(_components(width)):
        idx = f"_tid.x * {width} + {k}" if width else "_tid.x"
        w.line(f"{target}[{idx}] = {store.format(f'{expr}.{c}' if c else expr)};")


_GUARD = ["    if (_tid.x >= _n)", "        return;"]


def forward_source(plan: SpecializationPlan) -> str:
    """The forward kernel: one call per point of the call shape, results stored row-major."""
    w = _Writer(plan, None)
    w.index()
    values = [w.value(i, a) for i, a in enumerate(plan.args)]
    call = f"{plan.function}({', '.join(values)})"
    r = plan.returns
    if r is None:
        w.line(f"{call};")
    else:
        w.params.append(f"uniform {SLANG[r.scalar].storage}* _out")
        w.line(f"{r.slang_type} _r = {call};")
        _store_value(w, "_out", r.scalar, r.width, "_r")
    return w.source(_GUARD)


def backward_source(plan: SpecializationPlan, mask: str) -> str:
    """The backward kernel for ``mask`` (one char per argument): gradients for '1' arguments only.

    Arguments outside the mask get no gradient storage: differentiable values are passed as
    pairs with a zero derivative, whole tensors bind primal-only.
    """
    if mask not in plan.backward_masks:
        raise ValueError(f"{plan.function}: {mask!r} is not a backward mask of this plan")
    r = plan.returns
    assert r is not None
    w = _Writer(plan, mask)
    w.index()
    passed = []
    for i, a in enumerate(plan.args):
        value = w.value(i, a)
        if a.differentiable and a.kind in ("elementwise", "uniform"):
            w.line(f"var p{i} = diffPair({value});")
            value = f"p{i}"
        passed.append(value)
    # The cotangent is read in place, at its own strides: torch often hands an expanded one
    # (stride 0, from a sum) or a transposed or sliced one.
    rank = plan.call_rank
    w.params.append(f"uniform {SLANG[r.scalar].storage}* _dout")
    if rank or r.width:
        w.params.append(f"uniform int _dout_st[{rank + (1 if r.width else 0)}]")
    terms = [f"_idx[{d}] * _dout_st[{d}]" for d in range(rank)]
    w.line(f"int _od = {' + '.join(terms) if terms else '0'};")
    loads = [f"_dout[_od + {k} * _dout_st[{rank}]]" for k in range(r.width)] or ["_dout[_od]"]
    w.line(f"{r.slang_type} _d = {r.slang_type}({', '.join(loads)});")
    w.line(f"bwd_diff({plan.function})({', '.join([*passed, '_d'])});")
    for i, a in enumerate(plan.args):
        if a.kind == "elementwise" and w.in_mask(i):
            w.params.append(f"uniform {SLANG[a.scalar].storage}* g{i}")
            _store_value(w, f"g{i}", a.scalar, a.width, f"p{i}.d")
    return w.source(_GUARD)


def kernel_source(plan: SpecializationPlan, label: str) -> str:
    """The source of the kernel ``label`` names: "forward", or a backward grad mask."""
    return forward_source(plan) if label == "forward" else backward_source(plan, label)
