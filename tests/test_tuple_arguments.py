"""Tuples and lists of Python numbers for vector and array parameters: one value for the whole
call, as slangpy passes them, compared with torch's own results and gradients."""

from __future__ import annotations

import pytest
import torch

import slangspec
from slangspec.aot.warm import arg_signature
from slangspec.settings import compile_counts
from slangspec.signatures.text import NumbersForm, format_arg, parse_arg

SOURCE = """
import slangpy;
[Differentiable]
float dot3(float3 a, float3 b) { return dot(a, b); }
[Differentiable]
float weigh(float[4] w, float4 x) { return w[0] * x.x * x.x + w[1] * x.y + w[2] * x.z + w[3]; }
int mix_ints(int3 v, int x) { return v.x * x * x + v.y * x + v.z; }
uint scale_uint(uint2 v, uint x) { return v.x * x + v.y; }
float masked(bool3 m, float3 x) {
    return (m.x ? x.x : 0.0) + (m.y ? x.y : 0.0) + (m.z ? x.z : 0.0);
}
struct Ray { float3 origin; float3 dir; }
[Differentiable]
float3 at(Ray r, float t) { return r.origin + r.dir * t; }
float3 shifted(ITensor<float, 1> w, float3 s, int i) { return float3(w[i], w[i], w[i]) + s; }
float scaled(float s, float x) { return s * x; }
[Differentiable]
float3 along(float3 o, float3 d, float t) { return o + d * t; }
float trace3(float3x3 m) { return m[0][0] + m[1][1] + m[2][2]; }
float spread(float3[2] v, float x) { return dot(v[0], v[1]) * x; }
int corners(int2[2] v) { return v[0].x * 10 + v[1].y; }
"""
TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 sums of a few products, computed in another order


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("tuples", SOURCE, cache_dir=cache_dir)


@pytest.mark.parametrize("a", [(1.0, -2.0, 0.5), [1.0, -2.0, 0.5], (1, -2, 0.5)])
def test_a_tuple_or_list_for_a_vector_is_uniform_and_gets_no_gradient(m, tdev, a):
    b = torch.randn(5, 3, device=tdev, requires_grad=True)
    y = m.dot3(a, b)
    ref_a = torch.tensor([float(v) for v in a], device=tdev)
    torch.testing.assert_close(y, b.detach() @ ref_a, **TOL)
    y.sum().backward()
    torch.testing.assert_close(b.grad, ref_a.expand(5, 3), **TOL)


@pytest.mark.parametrize("k", [2.5, 2])
def test_a_number_for_a_vector_is_in_every_component_eagerly_and_compiled(m, tdev, k):
    import torch._dynamo

    def f(b):
        return m.dot3(k, b)

    b = torch.randn(5, 3, device=tdev, requires_grad=True)
    y = f(b)
    torch.testing.assert_close(y, b.detach().sum(-1) * k, **TOL)
    y.sum().backward()
    torch.testing.assert_close(b.grad, torch.full_like(b, float(k)), **TOL)
    assert m.dot3.plan(k, b).args == m.dot3.plan((k, k, k), b).args  # bound alike
    b.grad = None
    torch._dynamo.reset()
    torch.compile(f, fullgraph=True)(b).sum().backward()
    torch.testing.assert_close(b.grad, torch.full_like(b, float(k)), **TOL)


def test_numbers_for_a_scalar_spread_over_a_call_dimension_eagerly_and_compiled(m, tdev):
    import torch._dynamo

    x = torch.randn(4, 3, device=tdev)
    s = [1.0, -2.0, 0.5]
    want = torch.tensor(s, device=tdev) * x
    torch.testing.assert_close(m.scaled(s, x), want, **TOL)
    torch.testing.assert_close(m.scaled(tuple(s), x), want, **TOL)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(lambda x: m.scaled(s, x), fullgraph=True)(x), want)
    origin = torch.randn(3, device=tdev, requires_grad=True)
    direction = torch.randn(3, device=tdev, requires_grad=True)
    points = m.along(origin, direction, (0.0, 1.0, 2.0))
    t = torch.tensor([0.0, 1.0, 2.0], device=tdev)
    torch.testing.assert_close(points, origin + direction * t[:, None], **TOL)
    points.sum().backward()
    torch.testing.assert_close(origin.grad, torch.full_like(origin, 3.0))
    torch.testing.assert_close(direction.grad, torch.full_like(direction, 3.0))


def test_values_are_bound_per_call_not_compiled_in(m, tdev):
    b = torch.randn(4, 3, device=tdev)
    assert m.dot3.signature((1.0, 2.0, 3.0), b) == m.dot3.signature((7.5, 0, -1.0), b)
    assert m.dot3.signature((1.0, 2.0, 3.0), b) == "tuples::dot3 call (f3) [D2,S6,G0,V43]"
    for a in ((1.0, 2.0, 3.0), (7.5, 0.0, -1.0)):
        torch.testing.assert_close(m.dot3(a, b), b @ torch.tensor(a, device=tdev), **TOL)


def test_a_tuple_for_a_fixed_size_array(m, tdev):
    w = (0.5, 2.0, -1.0, 3.0)
    x = torch.randn(6, 4, device=tdev, requires_grad=True)
    y = m.weigh(w, x)
    xt = x.detach().clone().requires_grad_(True)
    ref = w[0] * xt[:, 0] ** 2 + w[1] * xt[:, 1] + w[2] * xt[:, 2] + w[3]
    torch.testing.assert_close(y, ref.detach(), **TOL)
    y.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad, xt.grad, **TOL)


def test_int_uint_and_bool_vectors(m, tdev):
    x = torch.arange(-3, 4, dtype=torch.int32, device=tdev)
    assert m.mix_ints((2, -1, 5), x).tolist() == (2 * x * x - x + 5).tolist()
    u = torch.arange(4, dtype=torch.int32, device=tdev)
    assert m.scale_uint([3, 4], u).tolist() == (3 * u + 4).tolist()
    f = torch.randn(5, 3, device=tdev)
    mask = (True, False, True)
    torch.testing.assert_close(m.masked(mask, f), f[:, 0] + f[:, 2], **TOL)


def test_a_tuple_as_a_struct_field(m, tdev):
    t = torch.linspace(0.0, 1.0, 5, device=tdev, requires_grad=True)
    direction = torch.tensor([0.0, 1.0, 2.0], device=tdev)
    y = m.at({"origin": (1.0, 2.0, 3.0), "dir": direction}, t)
    ref = torch.tensor([1.0, 2.0, 3.0], device=tdev) + t.detach()[:, None] * direction
    torch.testing.assert_close(y, ref, **TOL)
    y.sum().backward()
    torch.testing.assert_close(t.grad, torch.full_like(t, 3.0), **TOL)


def test_a_tuple_beside_a_whole_tensor(m, tdev):
    w = torch.tensor([10.0, 20.0, 30.0], device=tdev)
    y = m.shifted(w, (1.0, 2.0, 3.0), slangspec.grid((3,)))
    torch.testing.assert_close(y, w[:, None] + torch.tensor([1.0, 2.0, 3.0], device=tdev))


def test_a_fresh_load_hits_the_cache(cache_dir, tdev):
    b = torch.randn(3, 3, device=tdev)
    first = slangspec.load_source("tuples", SOURCE, cache_dir=cache_dir)
    first.dot3((1.0, 1.0, 2.0), b)
    before, hits = dict(compile_counts), slangspec.Cache(cache_dir).stats()["hits"]
    fresh = slangspec.load_source("tuples", SOURCE, cache_dir=cache_dir)
    y = fresh.dot3((0.5, 1.0, -1.0), b)
    torch.testing.assert_close(y, b @ torch.tensor([0.5, 1.0, -1.0], device=tdev), **TOL)
    # A hit resolves no types and generates no source (on Vulkan, slangpy still builds the
    # pipeline from the cached kernel's module).
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work
    assert slangspec.Cache(cache_dir).stats()["hits"] > hits


def test_under_torch_compile_fullgraph(m, tdev):
    import torch._dynamo

    def f(b, x):
        return m.dot3((1.0, 2, -0.5), b) + m.weigh([1.0, 0.0, 2.0, 0.5], x)

    b = torch.randn(4, 3, device=tdev, requires_grad=True)
    x = torch.randn(4, 4, device=tdev, requires_grad=True)
    eager = f(b, x)
    eager.sum().backward()
    grads = [b.grad.clone(), x.grad.clone()]
    b.grad = x.grad = None
    torch._dynamo.reset()
    out = torch.compile(f, fullgraph=True)(b, x)
    torch.testing.assert_close(out, eager, **TOL)
    out.sum().backward()
    torch.testing.assert_close(b.grad, grads[0], **TOL)
    torch.testing.assert_close(x.grad, grads[1], **TOL)
    torch.testing.assert_close(grads[0], torch.tensor([1.0, 2.0, -0.5], device=tdev).expand(4, 3))


def test_manifest_specs_and_signatures_name_tuples():
    assert arg_signature("float[3]") == "(f3)"
    assert arg_signature("int[2]") == "(i2)"
    assert arg_signature("(b4)") == "(b4)"
    assert arg_signature({"origin": "float[3]", "dir": "f32[N, 3]"}) == (
        "{dir:[D2,S6,G0,Vx3],origin:(f3)}"
    )
    assert parse_arg("(f12)") == NumbersForm("f", 12)
    assert format_arg(NumbersForm("i", 3)) == "(i3)"
    for bad in ("(f0)", "(x3)", "(f)", "(f3"):
        with pytest.raises(ValueError, match="malformed argument signature"):
            parse_arg(bad)
    assert slangspec.signature((True, False)) == "(b2)"
    assert slangspec.signature([1, 2.0]) == "(f2)"


def test_a_warm_manifest_builds_what_a_call_then_finds(tmp_path, tdev):
    from slangspec.aot.warm import parse_manifest, warm

    source = tmp_path / "tw.slang"
    source.write_text(SOURCE)
    manifest = tmp_path / "warm.toml"
    manifest.write_text(f"""
[[module]]
path = "{source}"

[[module.function]]
name = "dot3"
specializations = [["float[3]", "f32[N, 3]"]]
""")
    cache_dir = str(tmp_path / "cache")
    items = parse_manifest(manifest)
    assert [item.signature for item in items] == ["tw::dot3 call (f3) [D2,S6,G0,Vx3]"]
    assert [r.status for r in warm(items, cache_dir=cache_dir)] == ["built"]
    before = dict(compile_counts)
    b = torch.randn(7, 3, device=tdev)
    y = slangspec.load(source, cache_dir=cache_dir).dot3((1.0, 0.0, 1.0), b)
    torch.testing.assert_close(y, b[:, 0] + b[:, 2], **TOL)
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work


def test_nested_lists_bind_as_the_numpy_array_of_them(m, tdev):
    """Rows of numbers for an array of vectors (or, over a vector parameter, one vector per
    call): the numpy array of them, float32 where a float is among them, else int32."""
    rows = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    x = torch.tensor([1.0, 2.0], device=tdev)
    torch.testing.assert_close(m.spread(rows, x), 32.0 * x)
    assert m.corners(((1, 2), (3, 4))).item() == 14
    lengths = m.dot3(rows, (1.0, 1.0, 1.0))  # two calls, one row each
    torch.testing.assert_close(lengths, torch.tensor([6.0, 15.0], device=tdev))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda m, t: m.dot3((1.0, 2.0), t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): expected 3 numbers for vector<float,3>, got 2$",
        ),
        (
            lambda m, t: m.weigh((1.0, 2.0, 3.0, 4.0, 5.0), t),
            TypeError,
            r"^tuples::weigh: argument 1 \('w'\): expected 4 numbers for float\[4\], got 5$",
        ),
        (
            lambda m, t: m.dot3(((1.0, 2.0), 3.0, 4.0), t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): cannot pass a ragged nested tuple",
        ),
        (
            lambda m, t: m.dot3([1.0, "2", 3.0], t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): cannot pass a list holding a value of type str",
        ),
        (
            lambda m, t: m.dot3((), t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): cannot pass an empty tuple",
        ),
        (
            lambda m, t: m.masked((True, 1, 0), t),
            TypeError,
            r"^tuples::masked: argument 1 \('m'\): cannot pass a tuple mixing bools and numbers",
        ),
        (
            lambda m, t: m.scaled((True, False), t[:, 0]),
            TypeError,
            r"^tuples::scaled: argument 1 \('s'\): expected numbers float takes, one per call "
            r"point, got a tuple of 2 Python bools$",
        ),
        (
            lambda m, t: m.mix_ints((1.0, 2, 3), t[:, 0].int()),
            TypeError,
            r"^tuples::mix_ints: argument 1 \('v'\): expected 3 int values for vector<int,3>, "
            r"got a tuple of 3 Python numbers, floats among them$",
        ),
        (
            lambda m, t: m.dot3(True, t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): expected a float32 tensor whose trailing "
            r"dimensions are \(3,\) or a tuple of 3 numbers for vector<float,3>, got Python bool$",
        ),
        (
            lambda m, t: m.mix_ints(2.5, t[:, 0].int()),
            TypeError,
            r"^tuples::mix_ints: argument 1 \('v'\): expected an int32 tensor whose trailing "
            r"dimensions are \(3,\) or a tuple of 3 numbers for vector<int,3>, got Python float$",
        ),
        (
            lambda m, t: m.dot3((True, False, True), t),
            TypeError,
            r"^tuples::dot3: argument 1 \('a'\): expected 3 float values for vector<float,3>, "
            r"got a tuple of 3 Python bools$",
        ),
        (
            lambda m, t: m.trace3(tuple(range(9))),
            TypeError,
            r"^tuples::trace3: argument 1 \('m'\): expected a float32 tensor whose trailing "
            r"dimensions are \(3, 3\) for .*, got a tuple of 9 Python ints$",
        ),
    ],
)
def test_bad_tuples_are_named(m, tdev, call, error, message):
    with pytest.raises(error, match=message):
        call(m, torch.ones(4, 3, device=tdev))
