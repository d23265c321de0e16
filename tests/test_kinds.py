"""Every row of the table of argument kinds (``specializer.kinds.KINDS``) runs: a function of
each, eagerly and under ``torch.compile(fullgraph=True)``, static and ``dynamic=True``, with the
values torch computes and, where the kind carries a derivative, gradients that
``gradcheck`` accepts in every mode. The cases are looked up by row, so a row without one fails;
a tensor type's row has a case per name it is declared by, interface and struct alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import pytest
import torch
import torch._dynamo
import torch._functorch.config

import slangspec
from slangspec.specializer.kinds import KIND, KINDS, LEAF_KIND, LeafBinding

TOL = {"rtol": 1e-5, "atol": 1e-5}
SOURCE = """
import slangpy;

[Differentiable]
float element(float a, float2 b, float2x2 c, float[2] d)
{
    return a * b.x + b.y * c[0][1] + c[1][0] * d[1] + d[0];
}

[Differentiable]
float uniforms(float a, float2 b, float[2] c, float x) { return a * x * x + b.y * x + c[0]; }

[Differentiable]
float indexed(int i, int2 j, int[2] k, float x)
{
    return x * float(i + 3 * j.x + 7 * j.y + 11 * k[0] + 13 * k[1]);
}

[Differentiable]
void square_out(float x, out float y) { y = x * x; }

float noise(float r) { return r; }

[Differentiable]
float by_call_id(int2 id, float x) { return x * float(id.x + 10 * id.y); }

[Differentiable]
float by_thread_id(int t, float x) { return x * float(t); }

[Differentiable]
float by_hash(uint h, float x) { return x * float(h % 7u); }

[Differentiable]
float by_rand(float r, float x) { return x * r; }

float read_ITensor(ITensor<float, 1> t, int i) { return t[i] * 2.0; }
float read_Tensor(Tensor<float, 1> t, int i) { return t[i] * 2.0; }
void add_IRWTensor(IRWTensor<float, 1> o, int i, float v) { o[i] = o[i] + v; }
void add_RWTensor(RWTensor<float, 1> o, int i, float v) { o[i] = o[i] + v; }
void assign_IWTensor(IWTensor<float, 1> o, int i, float v) { o[i] = v * 3.0; }
void accumulate_AtomicTensor(AtomicTensor<float, 1> o, int i, float v) { o.add(i % 2, v); }
void assign_WTensor(WTensor<float, 1> o, int i, float v) { o[i] = v * 3.0; }
[Differentiable] float square_IDiffTensor(IDiffTensor<float, 1> t, int i) { return t[i] * t[i]; }
[Differentiable] float square_DiffTensor(DiffTensor<float, 1> t, int i) { return t[i] * t[i]; }
[Differentiable]
void square_into_IWDiffTensor(IWDiffTensor<float, 1> o, int i, float v) { o[i] = v * v; }
[Differentiable]
void square_into_WDiffTensor(WDiffTensor<float, 1> o, int i, float v) { o[i] = v * v; }

struct Pair : IDifferentiable { float a; float2 b; };

[Differentiable]
float pair_sum(Pair p, float x) { return p.a * x + p.b.y * p.b.x; }

struct Ball : IDifferentiable { float r; float2 c; };

[Differentiable]
float spread(Ball[2] b, float x) { return (b[0].r * b[1].c.y + b[1].r * b[0].c.x) * x; }

interface IShape : IDifferentiable
{
    [Differentiable]
    float area();
}

struct Disc : IShape
{
    float radius;
    [Differentiable]
    float area() { return 3.0 * radius * radius; }
};

[Differentiable]
float scaled_area(IShape s, float k) { return s.area() * k; }

[Differentiable]
T times<T : IFloat>(T a, T b) { return a * b; }

int forty_two() { return 42; }
"""


@dataclass(frozen=True)
class Case:
    """A call of one function: ``call(fn, *inputs)``, on ``inputs(tdev)``; ``want(*inputs)``
    what torch computes (None where only the modes are compared: hashes, random floats)."""

    function: str
    call: Callable[..., torch.Tensor]
    inputs: Callable[[str], tuple[torch.Tensor, ...]]
    want: Callable[..., torch.Tensor] | None
    differentiable: bool = True


def randn(*shape: int) -> Callable[[str], torch.Tensor]:
    return lambda tdev: torch.randn(*shape, device=tdev)


def inputs(*makers: Callable[[str], torch.Tensor]) -> Callable[[str], tuple[torch.Tensor, ...]]:
    return lambda tdev: tuple(make(tdev) for make in makers)


def indexed_want(x: torch.Tensor, offset=(0, 0), stride=(1, 1)) -> torch.Tensor:
    """``indexed`` at each point (row ``r``, column ``c``) of ``x``: ``i`` is ``c``, a vector's
    ``.x`` the innermost dimension (``c``), an array's elements in dimension order."""
    rows, cols = x.shape
    r = offset[0] + stride[0] * torch.arange(rows, device=x.device)[:, None]
    c = offset[1] + stride[1] * torch.arange(cols, device=x.device)[None, :]
    return x * (c + 3 * c + 7 * r + 11 * r + 13 * c)


def grid_of(x: torch.Tensor, **strided) -> tuple:
    """Grids over ``x``'s two dimensions for ``indexed``: a 1-D one over the last, for ``i``;
    a 2-D one for ``j`` and ``k``."""
    one = {k: v[1:] for k, v in strided.items()}
    return slangspec.grid(x.shape[1:], **one), slangspec.grid(x.shape, **strided)


STRIDED = {"offset": (1, 2), "stride": (2, 3)}


def whole(x: torch.Tensor) -> slangspec.grid:
    """A grid over ``x``'s one dimension, indexing a whole tensor."""
    return slangspec.grid((x.shape[0],))


def tensor_case(name: str) -> Case:
    """The case of the tensor type ``name``: it reads, writes, or writes as the call's output,
    a tensor of one dimension."""
    if name in ("ITensor", "Tensor"):
        return Case(
            f"read_{name}", lambda f, x: f(x, whole(x)), inputs(randn(6)), lambda x: x * 2, False
        )
    if name in ("IRWTensor", "RWTensor"):

        def add(f, x):
            o = x + 1.0
            f(o, whole(x), x)
            return o

        return Case(f"add_{name}", add, inputs(randn(6)), lambda x: x * 2 + 1, False)
    if name in ("IWTensor", "WTensor"):

        def assign(f, x):
            o = torch.zeros_like(x)
            f(o, whole(x), x)
            return o

        return Case(f"assign_{name}", assign, inputs(randn(6)), lambda x: x * 3, False)
    if name == "AtomicTensor":

        def accumulate(f, x):
            o = torch.zeros(2, device=x.device)
            f(o, whole(x), x)
            return o

        return Case(
            "accumulate_AtomicTensor",
            accumulate,
            inputs(randn(6)),
            lambda x: torch.stack([x[0::2].sum(), x[1::2].sum()]),
            False,
        )
    if name in ("IDiffTensor", "DiffTensor"):
        return Case(
            f"square_{name}", lambda f, x: f(x, whole(x)), inputs(randn(6)), lambda x: x * x
        )

    def square_into(f, x):
        o = torch.zeros_like(x)
        f(o, whole(x), x)
        return o

    return Case(f"square_into_{name}", square_into, inputs(randn(6)), lambda x: x * x)


def call_ids(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Each point's index along ``dim`` of ``x``."""
    shape = [1] * x.dim()
    shape[dim] = x.shape[dim]
    return torch.arange(x.shape[dim], device=x.device).reshape(shape)


def out_call(f, x):
    y = torch.empty_like(x)
    f(x, y)
    return y


CASES: dict[str, list[Case]] = {
    "element": [
        Case(
            "element",
            lambda f, a, b, c, d: f(a, b, c, d),
            inputs(randn(4), randn(4, 2), randn(4, 2, 2), randn(4, 2)),
            lambda a, b, c, d: a * b[:, 0] + b[:, 1] * c[:, 0, 1] + c[:, 1, 0] * d[:, 1] + d[:, 0],
        )
    ],
    "uniform": [
        Case(
            "uniforms",
            lambda f, x: f(1.5, (0.5, -2.0), [3.0, 4.0], x),
            inputs(randn(5)),
            lambda x: 1.5 * x * x - 2.0 * x + 3.0,
        )
    ],
    "grid": [
        Case(
            "indexed",
            lambda f, x: f(*grid_of(x), grid_of(x)[1], x),
            inputs(randn(3, 4)),
            indexed_want,
        )
    ],
    "strided grid": [
        Case(
            "indexed",
            lambda f, x: f(*grid_of(x, **STRIDED), grid_of(x, **STRIDED)[1], x),
            inputs(randn(3, 4)),
            lambda x: indexed_want(x, **STRIDED),
        )
    ],
    "result shape": [
        Case(
            "noise",
            lambda f, x: f(slangspec.rand_float(seed=3), _result=torch.empty_like(x)),
            inputs(randn(7)),
            None,
            False,
        )
    ],
    "out": [Case("square_out", out_call, inputs(randn(5)), lambda x: x * x)],
    "call_id": [
        Case(
            "by_call_id",
            lambda f, x: f(slangspec.call_id(), x),
            inputs(randn(3, 4)),
            lambda x: x * (call_ids(x, 1) + 10 * call_ids(x, 0)),
        )
    ],
    "thread_id": [
        Case(
            "by_thread_id",
            lambda f, x: f(slangspec.thread_id(), x),
            inputs(randn(6)),
            lambda x: x * torch.arange(6, device=x.device),
        )
    ],
    "wang_hash": [
        Case("by_hash", lambda f, x: f(slangspec.wang_hash(seed=5), x), inputs(randn(6)), None)
    ],
    "rand_float": [
        Case("by_rand", lambda f, x: f(slangspec.rand_float(seed=7), x), inputs(randn(6)), None)
    ],
    **{
        row.name: [tensor_case(name) for name in row.names] for row in KINDS if row.leaf == "tensor"
    },
    "struct": [
        Case(
            "pair_sum",
            lambda f, a, b, x: f({"a": a, "b": b}, x),
            inputs(randn(4), randn(4, 2), randn(4)),
            lambda a, b, x: a * x + b[:, 1] * b[:, 0],
        )
    ],
    "array of structs": [
        Case(
            "spread",
            lambda f, r, c, x: f({"r": r, "c": c}, x),
            inputs(randn(3, 2), randn(3, 2, 2), randn(3)),
            lambda r, c, x: (r[:, 0] * c[:, 1, 1] + r[:, 1] * c[:, 0, 0]) * x,
        )
    ],
    "interface": [
        Case(
            "scaled_area",
            lambda f, r, k: f({"_type": "Disc", "radius": r}, k),
            inputs(randn(4), randn(4)),
            lambda r, k: 3.0 * r * r * k,
        )
    ],
    "generic": [Case("times", lambda f, a, b: f(a, b), inputs(randn(4), randn(4)), torch.mul)],
}


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("kinds_table", SOURCE, cache_dir=cache_dir)


def gradcheck(f: Callable[..., torch.Tensor], leaves: list[torch.Tensor]) -> None:
    """``gradcheck`` in float32, which every tensor type and device takes."""
    assert torch.autograd.gradcheck(f, leaves, eps=1e-3, atol=1e-2, rtol=1e-2, nondet_tol=1e-5)


@pytest.mark.filterwarnings("ignore:Input #:UserWarning")
@pytest.mark.parametrize("row", [row.name for row in KINDS])
# gradcheck takes gradients twice from one graph, which a compiled backward that donates its
# buffers refuses.
@torch._functorch.config.patch(donated_buffer=False)
def test_every_kind_runs_eagerly_and_compiled_with_gradients(m, tdev, row):
    cases = CASES[row]  # a row with no case fails here
    if KIND[row].leaf == "tensor":
        assert {c.function.rpartition("_")[2] for c in cases} == set(KIND[row].names)
    for case in cases:
        fn = m[case.function]

        def run(*xs: torch.Tensor, case: Case = case, fn=fn) -> torch.Tensor:
            return case.call(fn, *xs)

        values = case.inputs(tdev)
        eager = run(*values)
        if case.want is not None:
            torch.testing.assert_close(eager, case.want(*values), **TOL)
        leaves = [v.clone().requires_grad_(case.differentiable) for v in values]
        modes = [run]
        for options in ({"fullgraph": True}, {"fullgraph": True, "dynamic": True}):
            torch._dynamo.reset()
            modes.append(torch.compile(run, **options))
        for mode in modes:
            torch.testing.assert_close(mode(*values), eager, **TOL)
            y = mode(*leaves)
            assert y.requires_grad == case.differentiable, case.function
            if case.differentiable:
                gradcheck(mode, leaves)


def test_every_binding_has_one_row_and_rows_name_only_rows():
    leaves = [row for row in KINDS if row.leaf is not None]
    assert len(LEAF_KIND) == len(leaves)
    assert sorted(row.binding for row in leaves if row.binding != "none") == sorted(
        b for b in get_args(LeafBinding) if b != "none"
    )
    for row in KINDS:
        for named in (row.grad_binding, row.backward_binding):
            assert named in ("", "pointer") or KIND[named].leaf == "tensor", row.name
        assert len(row.parts) in (0, 2), row.name


def test_a_function_of_no_parameters_runs(m, tdev):
    for mode in (m.forty_two, torch.compile(lambda: m.forty_two(), fullgraph=True)):
        torch.testing.assert_close(mode(), torch.tensor(42, dtype=torch.int32, device=tdev))


def test_a_call_whose_only_argument_is_a_generator_takes_the_result_shape(m, tdev):
    def f(r):
        return m.noise(slangspec.rand_float(2.0, 3.0, seed=1), _result=r)

    for mode in (f, torch.compile(f, fullgraph=True)):
        got = mode(torch.empty(2, 3, device=tdev))
        assert got.shape == (2, 3) and bool(((got >= 2.0) & (got < 3.0)).all())


class _Recorded(Exception):
    """Raised by a function that only notes how a case calls it."""


def _how_called(case: Case) -> tuple[tuple, dict]:
    """The arguments ``case`` calls its function with, the function not run."""
    calls = []

    def record(*args, **keywords):
        calls.append((args, keywords))
        raise _Recorded

    with pytest.raises(_Recorded):
        case.call(record, *case.inputs("cpu"))
    return calls[0]


# What the kernels name of Slang itself and of slangpy's library, besides the tensor types the
# table of kinds binds.
SLANG_WORDS = {
    *("Differentiable", "SV_DispatchThreadID", "compute", "numthreads", "shader", "uniform"),
    *("for", "if", "return", "void", "asfloat", "lerp"),
    *("int", "int2", "uint", "uint3", "float"),
}


def test_every_name_a_kernel_declares_is_its_own(m):
    """A kernel's own parameters and locals (``a0``, ``v1``, ``_idx``, ...) hide any type or
    function of the user's module of the same name, so codegen writes such a type through an
    alias and calls such a function through a wrapper (``KERNEL_LOCAL``), and names the rest
    ``slangspec_...``. Each kind's kernels, forward and backward, name nothing else besides
    the call's own types and function and Slang's words: a new local outside ``KERNEL_LOCAL``
    fails here, not on the first module that declares a type of its name."""
    from slangspec.cache_store import FORWARD
    from slangspec.codegen import kernel_source, slang_helpers
    from slangspec.signatures.text import IDENTIFIER
    from slangspec.specializer.plan import KERNEL_LOCAL

    bindings = {
        name
        for row in KINDS
        for name in (row.binding, row.grad_binding, row.backward_binding, *row.names)
        if name
    }
    unowned: dict[str, str] = {}
    for case in (case for cases in CASES.values() for case in cases):
        args, keywords = _how_called(case)
        plan = m[case.function].plan(*args, **keywords)
        types = [plan.function, plan.result or ""]
        types += [p.slang_type for p in plan.params] + [a.slang_type for a in plan.args]
        theirs = set(re.findall(IDENTIFIER, " ".join(types)))
        helpers = [slang_helpers.WANG_HASH, slang_helpers.WAVE_DIFF_TENSOR]
        helpers += [slang_helpers.accumulate(a.scalar) for a in plan.args]
        for label in (FORWARD, *plan.backward_masks):
            text = kernel_source(plan, label)
            for helper in helpers:  # a helper's body names no type or function of the user's
                text = text.replace(helper, "")
            text = re.sub(r"(?m)^\s*(//|import ).*$", "", text)
            text = re.sub(rf"\.\s*{IDENTIFIER}|\b\d\w*", "", text)  # fields, methods, numbers
            for name in set(re.findall(IDENTIFIER, text)):
                if not (
                    name in theirs
                    or name in bindings
                    or name in SLANG_WORDS
                    or name.startswith("slangspec_")
                    or KERNEL_LOCAL.fullmatch(name)
                ):
                    unowned.setdefault(name, f"{case.function} {label}")
    assert unowned == {}
