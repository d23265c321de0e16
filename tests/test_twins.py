"""A function's twin takes the parameters its body only indexes as generic views: the text
analysis finds them, refuses what a view cannot stand for, and the twin it writes computes what
the function does, gradients included, when a view reads the same values."""

import pytest
import torch

import slangspec
from slangspec.signatures.twins import TWIN, indexed_parameters, twin

SPLAT = """
import slangpy;
struct Gaussian : IDifferentiable { float2 center; float scale; float3 color; };

[Differentiable]
float3 splat(Gaussian g[6], no_diff float2 pix)
{
    float3 c = float3(0.0);
    for (int i = 0; i < 6; i++)
    {
        float2 d = pix - g[i].center;  // g[i] = nothing: a comment is not code
        c += g[i].color * exp(-dot(d, d) * g[i].scale);
    }
    return c;
}

interface IArrayOf<T : IDifferentiable>
{
    __subscript(int i) -> T { [Differentiable] get; }
}

[Differentiable]
float at(IDiffTensor<float, 2> t, int i, int j) { int idx[2] = { i, j }; return t[idx]; }

struct GaussianView : IArrayOf<Gaussian>
{
    IDiffTensor<float, 2> centers;
    IDiffTensor<float, 2> scales;
    IDiffTensor<float, 2> colors;
    __subscript(int i) -> Gaussian
    {
        [Differentiable] get
        {
            Gaussian r;
            r.center = float2(at(centers, i, 0), at(centers, i, 1));
            r.scale = at(scales, i, 0);
            r.color = float3(at(colors, i, 0), at(colors, i, 1), at(colors, i, 2));
            return r;
        }
    }
};
"""
VIEWED = """
[Differentiable]
float3 viewed(IDiffTensor<float, 2> centers, IDiffTensor<float, 2> scales,
              IDiffTensor<float, 2> colors, no_diff float2 pix)
{
    GaussianView g = { centers, scales, colors };
    return slangspec_twin_splat(g, pix);
}
"""


@pytest.mark.parametrize(
    ("body", "indexed"),
    [
        ("return g[0].x + g[1].y;", True),
        ("return g[0] == 1 ? g[1] : g[2];", True),
        ("float s = 0; for (int i = 0; i < 4; i++) s += g[i]; return s;", True),
        ("g[0] = 1; return g[1];", False),
        ("g[0] += 1; return g[1];", False),
        ("g[0]++; return g[1];", False),
        ("return h(g);", False),
        ("return g.getCount();", False),
    ],
)
def test_a_parameter_is_only_indexed_where_nothing_writes_or_passes_it_whole(body, indexed):
    source = f"[Differentiable] float f(float g[4], float x) {{ {body} }}"
    assert ("g" in indexed_parameters(source, "f")) is indexed


@pytest.mark.parametrize(
    "source",
    [
        "float f(float g[4]) { return g[0]; }\nfloat f(float g[2]) { return g[1]; }",
        "float f<let N : int>(float g[N]) { return g[0]; }",
        "#define K 2\nfloat f(float g[4]) { return g[K]; }",
        "float h(float g[4]) { return g[0]; }",
    ],
    ids=["overloaded", "generic", "preprocessed", "absent"],
)
def test_a_function_not_declared_once_and_plainly_has_no_twin(source):
    assert indexed_parameters(source, "f") == ()
    assert twin(source, "f", {"g": "IArrayOf<float>"}) is None


def test_members_of_a_struct_of_arrays_are_indexed_and_the_generic_list_reads_whole():
    source = (
        "[BackwardDerivative(f_bwd)]\n"
        "float f(Mlp m, IDiffTensor<float, 2> t, float x) { return m.w[0] * x + m.b[1] + h(t); }"
    )
    assert indexed_parameters(source, "f") == ("m",)
    assert indexed_parameters(source.replace("m.b[1]", "m.b"), "f") == ()
    made = twin(source, "f", {"m": "IMlp"})
    assert made is not None and made.startswith("[BackwardDerivative(f_bwd)] float ")
    assert f"{TWIN}f<V0 : IMlp>( V0 m, IDiffTensor<float, 2> t, float x)" in made


def test_the_twin_over_a_view_computes_the_function_and_its_gradients(tmp_path, tdev):
    made = twin(SPLAT, "splat", {"g": "IArrayOf<Gaussian>"})
    assert made is not None
    m = slangspec.load_source("twinned", SPLAT + made + VIEWED, cache_dir=tmp_path)
    torch.manual_seed(0)
    centers, scales = torch.rand(6, 2, device=tdev), torch.rand(6, 1, device=tdev) * 4
    colors, pix = torch.rand(6, 3, device=tdev), torch.rand(5, 5, 2, device=tdev)
    by_value = [{"center": centers[i], "scale": scales[i, 0], "color": colors[i]} for i in range(6)]
    trained = [{k: v.clone().requires_grad_() for k, v in g.items()} for g in by_value]
    y = m.splat(trained, pix)
    y.sum().backward()
    viewed = [t.clone().requires_grad_() for t in (centers, scales, colors)]
    y_twin = m.viewed(*viewed, pix)
    y_twin.sum().backward()
    torch.testing.assert_close(y_twin, y, rtol=1e-6, atol=1e-6)
    for k, (name, width) in enumerate((("center", 2), ("scale", 1), ("color", 3))):
        grads = torch.stack([g[name].grad.reshape(width) for g in trained])
        torch.testing.assert_close(viewed[k].grad, grads, rtol=1e-5, atol=1e-6)
