"""Arrays of structs (``Sphere[4]``, nested in a struct, of a struct that is not differentiable)
fed by a dict whose tensors have the arrays' extents before each field's element shape, against
the same maths in torch: values, gradients, the cache, a manifest, ``explain``, torch.compile
and the errors of a wrong call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_cli import cli

import slangspec
from parity import F32 as TOL
from parity import compare, leaf, twin
from slangspec.settings import compile_counts

KINDS = Path(__file__).parent / "shaders" / "kinds.slang"


@pytest.fixture(scope="module")
def kd(cache_dir):
    return slangspec.load(KINDS, cache_dir=cache_dir)


def _spheres(tdev, *batch, grads=(True, True)):
    return {
        "center": leaf(*batch, 4, 3, tdev=tdev, grad=grads[0]),
        "radius": leaf(*batch, 4, tdev=tdev, grad=grads[1]),
    }


def _volume(s, scale):
    c, r = s["center"], s["radius"]
    return (r**3 * (c * c).sum(-1) * scale).sum(-1)


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
def test_an_array_of_structs_takes_each_field_with_the_array_extent(kd, tdev, grads):
    s = _spheres(tdev, 6, grads=grads)
    twins = {k: twin(v) for k, v in s.items()}
    y = kd.total_volume(s, 0.5)
    compare(y, _volume(twins, 0.5), list(s.values()), list(twins.values()))
    mask = "".join("1" if g else "0" for g in grads) + "0"
    assert kd.total_volume.plan(s, 0.5).backward_masks[-1] == mask


def test_each_field_of_an_array_of_structs_broadcasts_on_its_own(kd, tdev):
    s = {"center": leaf(5, 4, 3, tdev=tdev), "radius": leaf(4, tdev=tdev)}
    scale = leaf(5, tdev=tdev)
    twins, st = {k: twin(v) for k, v in s.items()}, twin(scale)
    y = kd.total_volume(s, scale)
    ref = (twins["radius"] ** 3 * (twins["center"] ** 2).sum(-1) * st[:, None]).sum(-1)
    compare(y, ref, [*s.values(), scale], [*twins.values(), st])
    plan = kd.total_volume.plan(s, scale)
    assert [(a.param, a.arrays, a.elem) for a in plan.args[:2]] == [
        ("s.center", ((4,),), (4, 3)),
        ("s.radius", ((4,),), (4,)),
    ]


def test_arrays_of_structs_nest_in_structs_and_take_python_scalars(kd, tdev):
    members = {"center": leaf(5, 3, 2, 3, tdev=tdev), "radius": leaf(3, 2, tdev=tdev)}
    twins = {k: twin(v) for k, v in members.items()}
    y = kd.cluster_center({"members": members, "spread": 0.25})
    ref = (twins["center"] * twins["radius"][..., None] * 0.25).sum((1, 2))
    compare(y, ref, list(members.values()), list(twins.values()))
    source = slangspec.codegen.backward_source(
        kd.cluster_center.plan({"members": members, "spread": 0.25}), "110"
    )
    assert "s0[2].members[1].center = v0[2][1];" in source
    # radius, without the call's dimension, is every call's: its gradient is added in place
    added = (
        "slangspec_accumulate(g1, _g1 + 2 * g1_st[1] + 1 * g1_st[2], p0.d[2].members[1].radius);"
    )
    assert added in source


def test_an_array_of_structs_that_is_not_differentiable(kd, tdev):
    t = {"weight": torch.rand(6, 2, device=tdev), "id": torch.tensor([3, 1], device=tdev)}
    t["id"] = t["id"].to(torch.int32)
    x = torch.rand(6, device=tdev)
    y = kd.tagged(t, x)
    ref = (t["weight"][:, 0] + 2.0 * t["weight"][:, 1]) * x + 2.0
    torch.testing.assert_close(y, ref, **TOL)
    torch.testing.assert_close(kd.tagged({"weight": 1.0, "id": 2}, x), 3.0 * x, **TOL)


def test_wrong_arrays_of_structs_name_the_function_and_the_field(kd, tdev):
    with pytest.raises(
        ValueError,
        match=r"^kinds::tagged: argument 1 \('t.weight'\): expected a tensor whose trailing "
        r"dimensions are \(2,\) for float\[2\], got shape \(6, 3\)$",
    ):
        kd.tagged({"weight": torch.rand(6, 3, device=tdev), "id": 1}, 1.0)
    with pytest.raises(ValueError, match=r"^kinds::tagged: argument 1 \('t'\).*missing 'id'"):
        kd.tagged({"weight": torch.rand(6, 2, device=tdev)}, 1.0)
    with pytest.raises(TypeError, match=r"argument 1 \('s'\): expected a dict of the fields of"):
        kd.total_volume(torch.rand(6, 4, device=tdev), 1.0)
    with pytest.raises(
        TypeError,
        match=r"^kinds::shift_all: argument 1 \('s'\): expected an 'in' parameter for an array "
        r"of structs, got 'inout' Sphere\[2\]$",
    ):
        kd.shift_all({"center": torch.rand(2, 3, device=tdev), "radius": 1.0})
    with pytest.raises(
        TypeError,
        match=r"^kinds::sample_all: argument 1 \('s.values'\): expected a field of an array of "
        r"structs that is a value, got ITensor<float, 1> ",
    ):
        kd.sample_all({"values": torch.rand(3, device=tdev)}, 0)


def test_a_fresh_load_runs_an_array_of_structs_from_the_cache(kd, cache_dir, tdev):
    s = _spheres(tdev, 3)
    want = kd.total_volume(s, 2.0)
    before, hits = dict(compile_counts), slangspec.Cache(cache_dir).stats()["hits"]
    fresh = slangspec.load(KINDS, cache_dir=cache_dir)
    torch.testing.assert_close(fresh.total_volume(s, 2.0), want, **TOL)
    for work in ("specialize", "codegen", "front_end"):
        assert compile_counts[work] == before.get(work, 0), work
    assert slangspec.Cache(cache_dir).stats()["hits"] > hits


def test_an_array_of_structs_under_torch_compile(cache_dir, tdev):
    import torch._dynamo

    fresh = slangspec.load(KINDS, cache_dir=cache_dir)  # first looked up while torch traces
    s = _spheres(tdev, 5)
    members = {"center": leaf(5, 3, 2, 3, tdev=tdev), "radius": leaf(3, 2, tdev=tdev)}

    def f(center, radius, mc, mr):
        v = fresh.total_volume({"center": center, "radius": radius}, 0.5)
        c = fresh.cluster_center({"members": {"center": mc, "radius": mr}, "spread": 2.0})
        return v + c.sum(-1)

    inputs = [s["center"], s["radius"], members["center"], members["radius"]]
    torch._dynamo.reset()
    assert torch._dynamo.explain(f)(*inputs).graph_break_count == 0
    out = torch.compile(f, fullgraph=True)(*inputs)
    twins = [twin(t) for t in inputs]
    ref = _volume({"center": twins[0], "radius": twins[1]}, 0.5) + (
        twins[2] * twins[3][..., None] * 2.0
    ).sum((1, 2, 3))
    compare(out, ref, inputs, twins)


MANIFEST = """
[[module]]
path = "{path}"

[[module.function]]
name = "total_volume"
masks = "all"
specializations = [
    {{ s = {{ center = "f32[N, 4, 3] grad", radius = "f32[N, 4] grad" }}, scale = "float" }},
]

[[module.function]]
name = "cluster_center"
specializations = [
    ["{{members: {{center: f32[N, 3, 2, 3] grad, radius: f32[3, 2]}}, spread: float}}"],
]
"""


def test_a_manifest_warms_arrays_of_structs_and_explain_finds_them(tmp_path, tdev):
    cache = tmp_path / "cache"
    manifest = tmp_path / "warm.toml"
    manifest.write_text(MANIFEST.format(path=KINDS))
    warmed = cli("warm", manifest, "--cache-dir", cache, "--json")
    assert warmed.exit_code == 0, warmed.output
    assert {r["status"] for r in json.loads(warmed.stdout)} == {"built"}

    spec = "s={center: f32[N, 4, 3] grad, radius: f32[N, 4] grad}; scale=float"
    hit = cli("explain", KINDS, "total_volume", spec, "--cache-dir", cache, "--json")
    assert json.loads(hit.stdout)["hit"], hit.output
    miss = cli(
        "explain", KINDS, "total_volume", spec.replace("radius: f32[N, 4] grad", "radius: float"),
        "--cache-dir", cache,
    )  # fmt: skip
    assert "kind of argument 1 field radius" in miss.output, miss.output

    before = dict(compile_counts)
    m = slangspec.load(KINDS, cache_dir=str(cache))
    s, members = _spheres(tdev, 7), {"center": leaf(7, 3, 2, 3, tdev=tdev), "radius": 1.0}
    m.total_volume(s, 1.5).sum().backward()
    members["radius"] = torch.rand(3, 2, device=tdev)
    m.cluster_center({"members": members, "spread": 1.0}).sum().backward()
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work


def test_both_front_ends_describe_arrays_of_structs_alike(kd, tmp_path):
    """slangpy's reflection (Vulkan's front-end) and Slang's C API (CUDA's, run here without a
    GPU) describe an array of structs alike."""
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.signatures.module_text import ModuleText
    from slangspec.specializer.reflect import function_overloads

    if kd.device_kind != "vulkan":
        pytest.skip("compares against slangpy's reflection, which a Vulkan module reads")
    text = KINDS.read_text()
    c_api = cuda_source.front_end(ModuleText("kinds", KINDS, text), content="kinds")
    for name in ("total_volume", "cluster_center", "tagged"):
        mine = function_overloads(c_api, "kinds", name, text)
        assert mine == function_overloads(kd._front_end(), "kinds", name, text), name
    [info] = function_overloads(c_api, "kinds", "cluster_center", text)
    t = info.params[0].type
    assert (t.kind, t.name, t.shape, t.differentiable) == ("struct", "Cluster[3]", (3,), True)
    assert t.fields[0].type.shape == (2,)
