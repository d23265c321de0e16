"""Arrays every call reads whole, passed to the function's twin as views: each element read
from the argument's tensors as the body indexes it, its gradient added in place, never the
whole array held by every call. The values and gradients are the by-value call's and torch's;
what a view cannot stand for is called by value, as declared."""

from __future__ import annotations

import pytest
import torch

import slangspec
from slangspec.compile import SlangCompileError
from slangspec.signatures.twins import (
    ARRAY_OF,
    STRUCT,
    TWIN,
    imported_twins,
    struct_arrays,
    twin_module,
    twin_module_name,
    viewed_arrays,
)

SOURCE = """
struct Gaussian : IDifferentiable { float2 center; float scale; float3 color; }

[Differentiable]
float3 splat(Gaussian g[5], no_diff float2 pix)
{
    float3 c = float3(0.0);
    for (int i = 0; i < 5; i++)
    {
        float2 d = pix - g[i].center;
        c += g[i].color * exp(-dot(d, d) * g[i].scale);
    }
    return c;
}

[Differentiable]
float3 splat_whole(Gaussian g[5], no_diff float2 pix) { return splat(g, pix); }

[Differentiable]
float poly(float w[4], float x)
{
    float acc = 0.0;
    float p = 1.0;
    for (int i = 0; i < 4; i++)
    {
        acc += w[i] * p;
        p *= x;
    }
    return acc;
}

struct Poly : IDifferentiable { float a[4]; float3 c[2]; }

[Differentiable]
float3 soa(Poly q, float x)
{
    float acc = 0.0;
    float p = 1.0;
    for (int i = 0; i < 4; i++)
    {
        acc += q.a[i] * p;
        p *= x;
    }
    // float3(acc) rather than acc: here Slang 2026.12's backward of acc * float3, acc carried
    // through the loop, gave NaN gradients, by value and through a view alike.
    return float3(acc, acc, acc) * (q.c[0] + 2.0 * q.c[1]);
}

[Differentiable]
void twice(inout float v) { v = 2.0 * v; }

[Differentiable]
float doubled(float w[4], float x)
{
    float acc = 0.0;
    for (int i = 0; i < 4; i++)
    {
        twice(w[i]);
        acc += w[i] * x;
    }
    return acc;
}
"""
TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums over thousands of calls, in another order


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("views", SOURCE, cache_dir=cache_dir)


def gaussians(tdev: str, *lead: int) -> dict[str, torch.Tensor]:
    return {
        "center": torch.rand(*lead, 5, 2, device=tdev).requires_grad_(),
        "scale": (torch.rand(*lead, 5, device=tdev) * 4 + 1).requires_grad_(),
        "color": torch.rand(*lead, 5, 3, device=tdev).requires_grad_(),
    }


def pixels(n: int, tdev: str) -> torch.Tensor:
    axis = torch.linspace(0.0, 1.0, n, device=tdev)
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1)


def splat_ref(g: dict[str, torch.Tensor], pix: torch.Tensor) -> torch.Tensor:
    d = pix[..., None, :] - g["center"]
    w = torch.exp(-(d * d).sum(-1) * g["scale"])
    return (g["color"] * w[..., None]).sum(-2)


def doubled_leaves(g: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().double().requires_grad_() for k, v in g.items()}


def test_the_twin_of_each_function_whose_arrays_are_only_indexed():
    functions = ("splat", "splat_whole", "poly", "soa", "twice", "doubled")
    made = {f: twin_module("views", SOURCE, f) for f in functions}
    # splat_whole passes g whole; twice has no array
    assert sorted(f for f, t in made.items() if t) == ["doubled", "poly", "soa", "splat"]
    assert (
        f"\n[Differentiable] float3 {TWIN}splat<V0 : slangspec_IArrayOf<Gaussian>>( V0 g,"
        in made["splat"].text
    )


def test_an_array_every_call_reads_goes_to_the_twin_as_a_view(m, tdev):
    g, pix = gaussians(tdev), pixels(8, tdev)
    w, x = torch.rand(4, device=tdev), torch.rand(64, device=tdev)
    assert [p.view for p in m.splat.plan(g, pix).params] == [True, False]
    assert [p.view for p in m.poly.plan(w, x).params] == [True, False]
    assert [p.view for p in m.splat_whole.plan(g, pix).params] == [False, False]
    plan = m.splat.plan(g, pix)
    source = slangspec.codegen.backward_source(plan, plan.backward_masks[-1])
    assert f"bwd_diff({TWIN}splat)(s0, " in source
    assert "g0[_tid.x" not in source  # no gradient stored per call


def test_a_view_computes_what_the_array_by_value_does(m, tdev):
    g, pix = gaussians(tdev), pixels(24, tdev)
    by_value = {k: v.detach().clone().requires_grad_() for k, v in g.items()}
    ref = doubled_leaves(g)
    cot = torch.rand(24, 24, 3, device=tdev)
    y, y_whole = m.splat(g, pix), m.splat_whole(by_value, pix)
    torch.testing.assert_close(y, y_whole, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(y.double(), splat_ref(ref, pix.double()), **TOL)
    (y * cot).sum().backward()
    (y_whole * cot).sum().backward()
    (splat_ref(ref, pix.double()) * cot.double()).sum().backward()
    for k in g:
        torch.testing.assert_close(g[k].grad, by_value[k].grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g[k].grad.double(), ref[k].grad, **TOL)


def test_an_array_of_scalars_as_a_view(m, tdev):
    w = torch.rand(4, device=tdev).requires_grad_()
    x = torch.rand(300, device=tdev).requires_grad_()
    rw, rx = w.detach().double().requires_grad_(), x.detach().double().requires_grad_()
    y = m.poly(w, x)
    want = sum(rw[i] * rx**i for i in range(4))
    torch.testing.assert_close(y.double(), want, **TOL)
    y.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(w.grad.double(), rw.grad, **TOL)
    torch.testing.assert_close(x.grad.double(), rx.grad, **TOL)


def test_a_struct_of_arrays_as_a_view(m, tdev):
    q = {
        "a": torch.rand(4, device=tdev).requires_grad_(),
        "c": torch.rand(2, 3, device=tdev).requires_grad_(),
    }
    x = torch.rand(200, device=tdev).requires_grad_()
    assert [p.view for p in m.soa.plan(q, x).params] == [True, False]
    ref = doubled_leaves(q)
    rx = x.detach().double().requires_grad_()
    y = m.soa(q, x)
    acc = sum(ref["a"][i] * rx**i for i in range(4))
    want = acc[:, None] * (ref["c"][0] + 2.0 * ref["c"][1])
    torch.testing.assert_close(y.double(), want, **TOL)
    cot = torch.rand_like(y)
    (y * cot).sum().backward()
    (want * cot.double()).sum().backward()
    for k in q:
        torch.testing.assert_close(q[k].grad.double(), ref[k].grad, **TOL)
    torch.testing.assert_close(x.grad.double(), rx.grad, **TOL)


def test_an_unrolled_loop_views_its_arrays_as_a_loop_does():
    looped = (
        "float f(float w[4]) { float a = 0.0; for (int i = 0; i < 4; i++) a += w[i]; return a; }"
    )
    assert viewed_arrays(looped, "f") == {"w": "float"}
    for attribute in ("[ForceUnroll]", "[unroll]"):
        unrolled = looped.replace("for (", f"{attribute} for (")
        assert viewed_arrays(unrolled, "f") == {"w": "float"}


def test_a_struct_of_arrays_is_read_from_its_declaration():
    source = "struct S { float a[4]; float3 b; int c[2]; float f(int i) { return a[i]; } };"
    assert struct_arrays(source, "S") == {"a": "float", "c": "int"}
    assert viewed_arrays(SOURCE, "soa") == {"q": STRUCT + "Poly"}
    body = "float g(S s) { return s.b.x + s.a[0]; }"  # a field that is no array: by value
    assert viewed_arrays(source + body, "g") == {}


def test_a_twin_slang_refuses_leaves_its_function_by_value_and_the_others_viewed(m, tdev):
    w = torch.rand(4, device=tdev).requires_grad_()
    x = torch.rand(50, device=tdev)
    assert [p.view for p in m.doubled.plan(w, x).params] == [False, False]
    assert [p.view for p in m.poly.plan(w, x).params] == [True, False]
    m.doubled(w, x).sum().backward()
    torch.testing.assert_close(w.grad, torch.full_like(w, 2.0 * x.sum().item()), **TOL)


def test_per_call_arrays_are_passed_by_value(m, tdev):
    g, pix = gaussians(tdev, 6, 6), pixels(6, tdev)
    assert [p.view for p in m.splat.plan(g, pix).params] == [False, False]
    ref = doubled_leaves(g)
    m.splat(g, pix).sum().backward()
    splat_ref(ref, pix.double()).sum().backward()
    for k in g:
        torch.testing.assert_close(g[k].grad.double(), ref[k].grad, **TOL)


def test_an_error_in_the_module_is_slangs_own_at_its_line(tmp_path):
    broken = SOURCE.replace("float p = 1.0;", "float p = 1.0 +;")
    line = broken[: broken.index("1.0 +;")].count("\n") + 1
    m = slangspec.load_source("views_broken", broken, cache_dir=str(tmp_path))
    with pytest.raises(SlangCompileError) as caught:
        m.poly(torch.rand(4), torch.rand(3))
    assert f"views_broken.slang:{line}:" in caught.value.first_error


def test_a_twins_module_imports_the_module_and_what_it_imports():
    source = "import slangpy;\n" + SOURCE
    made = twin_module("views", source, "poly")
    assert made.name == twin_module_name("views", "poly")
    assert made.viewed == {"w": "float"}
    text = made.text
    assert text.splitlines()[:2] == ["import views;", "import slangpy;"]
    assert f"{TWIN}poly<V0 : {ARRAY_OF}<float>>" in text
    assert twin_module("views", source, "splat_whole") is None
    kernel = f"import views;\nimport {twin_module_name('views', 'poly')};\n"
    assert imported_twins("views", kernel) == ["poly"]
