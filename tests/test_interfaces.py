"""Interface parameters (``float scaled_area(IShape s, float k)``) called with a struct that
conforms, named at the call by the dict's ``"_type"`` as slangpy names it, against the same
maths in torch: values, gradients, the signature and cache key naming the struct, a manifest,
``explain``, torch.compile and the errors of a wrong call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_arch_build import statuses_built_for_sm_90
from test_cli import cli
from test_cuda_step import needs_nvrtc
from test_instances import MANIFEST as METHODS
from test_struct_arrays import MANIFEST as STRUCT_ARRAYS

import slangspec
from parity import F32 as TOL
from parity import compare, leaf, twin
from slangspec.settings import compile_counts

KINDS = Path(__file__).parent / "shaders" / "kinds.slang"


@pytest.fixture(scope="module")
def kd(cache_dir):
    return slangspec.load(KINDS, cache_dir=cache_dir)


def test_a_disc_for_an_ishape_parameter(kd, tdev):
    r, k = leaf(6, tdev=tdev), leaf(6, tdev=tdev)
    rt, kt = twin(r), twin(k)
    y = kd.scaled_area({"_type": "Disc", "radius": r}, k)
    compare(y, 3.0 * rt * rt * kt, [r, k], [rt, kt])


def test_a_box_for_the_same_parameter_broadcasts_its_fields(kd, tdev):
    size, depth = leaf(5, 2, tdev=tdev), leaf(1, tdev=tdev)
    st, dt = twin(size), twin(depth)
    y = kd.scaled_area({"depth": depth, "size": size, "_type": "Box"}, 2.0)
    compare(y, st[:, 0] * st[:, 1] * dt * 2.0, [size, depth], [st, dt])


def test_the_signature_and_the_plan_name_the_struct(kd, tdev):
    r = torch.rand(6, device=tdev)
    disc = kd.scaled_area.signature({"_type": "Disc", "radius": r}, 1.0)
    assert disc == "kinds::scaled_area call {_type:@Disc,radius:[D1,S6,G0,Vx]} f"
    box = {"_type": "Box", "size": torch.rand(6, 2, device=tdev), "depth": 1.0}
    assert slangspec.signature(box) == "{_type:@Box,depth:f,size:[D2,S6,G0,Vx2]}"
    plan = kd.scaled_area.plan({"_type": "Disc", "radius": r}, 1.0)
    assert (plan.params[0].slang_type, plan.params[0].interface) == ("Disc", "IShape")
    assert plan.overload == "[Differentiable] float scaled_area(IShape s, float k)"
    from slangspec.cache_store import key_of

    keys = {
        key_of(kd.preimage("scaled_area", kd.scaled_area.signature(s, 1.0)))
        for s in (
            {"_type": "Disc", "radius": r},
            {"_type": "Box", "size": r[:, None].expand(6, 2), "depth": r},
        )
    }
    assert len(keys) == 2


def test_a_struct_parameter_takes_its_own_name_too(kd, tdev):
    s = {"_type": "Sphere", "center": torch.rand(4, 3, device=tdev), "radius": 1.0}
    with pytest.raises(
        TypeError,
        match=r"^kinds::volume_of: argument 1 \('s'\): expected the fields of Sphere \('_type' "
        r"naming it, where given\), got '_type' 'Disc'$",
    ):
        kd.volume_of({**s, "_type": "Disc"})
    torch.testing.assert_close(kd.volume_of(s), (s["center"] ** 2).sum(-1), **TOL)


def test_wrong_interface_arguments_name_the_function_the_argument_and_the_structs(kd, tdev):
    r = torch.rand(3, device=tdev)
    conforming = r"a struct that conforms to IShape \(Disc, Box, Quad\)"
    with pytest.raises(
        TypeError,
        match=r"^kinds::scaled_area: argument 1 \('s'\): expected a dict of a struct's fields "
        rf"and its name in '_type', {conforming}, got a dict of radius$",
    ):
        kd.scaled_area({"radius": r}, 1.0)
    for name in ("Plain", "Nope"):  # a struct that does not conform, and no struct at all
        with pytest.raises(
            TypeError,
            match=r"^kinds::scaled_area: argument 1 \('s'\): expected '_type' to name a struct "
            rf"of the module that conforms to IShape \(Disc, Box, Quad\), got '{name}', which is ",
        ):
            kd.scaled_area({"_type": name, "x": r}, 1.0)
    with pytest.raises(ValueError, match=r"argument 1 \('s'\): expected the fields of Disc"):
        kd.scaled_area({"_type": "Disc", "size": r}, 1.0)
    with pytest.raises(TypeError, match=r"argument 1 \('s'\): field '_type': cannot name a str"):
        kd.scaled_area({"_type": 3, "radius": r}, 1.0)
    with pytest.raises(ValueError, match=r"argument 1 \('s'\): field '_type': cannot name the"):
        kd.scaled_area({"_type": "Disc; x", "radius": r}, 1.0)
    with pytest.raises(
        TypeError,
        match=r"^kinds::framed_area: argument 1 \('f.shape'\): expected a struct field of a "
        r"struct, value or tensor type, got the interface IShape",
    ):
        kd.framed_area({"shape": {"_type": "Disc", "radius": r}, "border": 1.0})


def test_a_gradient_slang_cannot_take_through_an_interface_is_refused_by_name(kd, tdev):
    size = torch.rand(4, 2, device=tdev)
    y = kd.scaled_area({"_type": "Quad", "size": size}, 2.0)  # no gradient: it runs
    torch.testing.assert_close(y, size[:, 0] * size[:, 1] * 2.0, **TOL)
    with pytest.raises(
        TypeError,
        match=r"^kinds::scaled_area: argument 1 \('s'\): Slang \(slangpy 0.43.1's\) cannot "
        r"differentiate through the interface IShape into Quad, whose fields hold vectors",
    ):
        kd.scaled_area({"_type": "Quad", "size": size.requires_grad_()}, 2.0)


PLAIN_INTERFACE = """
import slangpy;
interface IScale { [Differentiable] float apply(float v); };
struct Twice : IScale, IDifferentiable
{
    float k;
    [Differentiable] float apply(float v) { return 2.0 * k * v; }
};
[Differentiable]
float scaled(IScale s, float v) { return s.apply(v) + v; }
"""


def test_an_interface_that_is_not_differentiable_is_named_where_a_gradient_is_lost(
    cache_dir, tdev, tmp_path
):
    """Its struct is IDifferentiable, but a value passed as the interface is not: the warning
    names the interface to make IDifferentiable, not the struct that already is."""
    path = tmp_path / "plain_interface.slang"
    path.write_text(PLAIN_INTERFACE)
    m = slangspec.load(path, cache_dir=cache_dir)
    k, v = leaf(4, tdev=tdev), leaf(4, tdev=tdev)
    with pytest.warns(
        slangspec.SlangspecWarning,
        match=r"plain_interface::scaled: interface IScale is not IDifferentiable .*make IScale ",
    ):
        y = m.scaled({"_type": "Twice", "k": k}, v)
    y.sum().backward()
    assert k.grad is None
    torch.testing.assert_close(v.grad, 2.0 * k.detach() + 1.0, **TOL)


def test_a_fresh_load_calls_the_named_struct_from_the_cache(kd, cache_dir, tdev, monkeypatch):
    from slangspec import codegen
    from slangspec.runtime import backend, module

    def refuse(*args, **kwargs):
        raise AssertionError("served from the cache, nothing is resolved or reflected")

    r = torch.rand(5, device=tdev, requires_grad=True)
    want = kd.scaled_area({"_type": "Disc", "radius": r}, 2.0)
    want.sum().backward()
    hits = slangspec.Cache(cache_dir).stats()["hits"]
    monkeypatch.setattr(codegen, "kernel_source", refuse)
    monkeypatch.setattr(backend.SlangBackend, "front_end", refuse)
    monkeypatch.setattr(module.Module, "function_overloads", refuse)
    fresh = slangspec.load(KINDS, cache_dir=cache_dir)
    again = r.detach().clone().requires_grad_()
    y = fresh.scaled_area({"_type": "Disc", "radius": again}, 2.0)
    y.sum().backward()
    torch.testing.assert_close(y, want, **TOL)
    torch.testing.assert_close(again.grad, r.grad, **TOL)
    assert slangspec.Cache(cache_dir).stats()["hits"] > hits


def test_an_interface_parameter_under_torch_compile(cache_dir, tdev):
    import torch._dynamo

    fresh = slangspec.load(KINDS, cache_dir=cache_dir)  # first looked up while torch traces

    def f(r, size):
        disc = fresh.scaled_area({"_type": "Disc", "radius": r}, 0.5)
        return disc + fresh.scaled_area({"_type": "Box", "size": size, "depth": 3.0}, 1.0)

    r, size = leaf(4, tdev=tdev), leaf(4, 2, tdev=tdev)
    torch._dynamo.reset()
    assert torch._dynamo.explain(f)(r, size).graph_break_count == 0
    out = torch.compile(f, fullgraph=True)(r, size)
    rt, st = twin(r), twin(size)
    compare(out, 1.5 * rt * rt + st[:, 0] * st[:, 1] * 3.0, [r, size], [rt, st])


def test_a_wrong_struct_name_is_the_same_error_under_torch_compile(cache_dir, tdev):
    fresh = slangspec.load(KINDS, cache_dir=cache_dir)
    compiled = torch.compile(lambda r: fresh.scaled_area({"_type": "Plain", "x": r}, 1.0))
    with pytest.raises(Exception, match=r"got 'Plain', which is not one"):
        compiled(torch.rand(3, device=tdev))


MANIFEST = """
[[module]]
path = "{path}"

[[module.function]]
name = "scaled_area"
specializations = [
    {{ s = {{ _type = "Disc", radius = "f32[N] grad" }}, k = "float" }},
    ["{{_type: Box, size: f32[N, 2] grad, depth: float}}", "f32[N]"],
]
"""


def test_a_manifest_warms_interface_calls_and_explain_names_the_struct(tmp_path, tdev):
    cache = tmp_path / "cache"
    manifest = tmp_path / "warm.toml"
    manifest.write_text(MANIFEST.format(path=KINDS))
    warmed = cli("warm", manifest, "--cache-dir", cache, "--json")
    assert warmed.exit_code == 0, warmed.output
    assert [r["status"] for r in json.loads(warmed.stdout)] == ["built", "built"]

    disc = "s={_type: Disc, radius: f32[N] grad}; k=float"
    hit = cli("explain", KINDS, "scaled_area", disc, "--cache-dir", cache, "--json")
    assert json.loads(hit.stdout)["hit"], hit.output
    box = "{_type: Box, size: f32[N, 2] grad, depth: float}; float"
    miss = cli("explain", KINDS, "scaled_area", box, "--cache-dir", cache)
    assert "struct argument 1 names: Box stored, Disc asked" in miss.output or (
        "struct argument 1 names: Disc stored, Box asked" in miss.output
    ), miss.output
    bad = cli(
        "explain", KINDS, "scaled_area", "{_type: Plain, x: float}; float", "--cache-dir", cache
    )
    assert bad.exit_code == 2 and "got 'Plain', which is not one" in bad.output

    before = dict(compile_counts)
    m = slangspec.load(KINDS, cache_dir=str(cache))
    r = torch.rand(7, device=tdev, requires_grad=True)
    m.scaled_area({"_type": "Disc", "radius": r}, 1.5).sum().backward()
    size = torch.rand(7, 2, device=tdev, requires_grad=True)
    k = torch.rand(7, device=tdev)
    m.scaled_area({"_type": "Box", "size": size, "depth": 2.0}, k).sum().backward()
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work


def test_both_front_ends_list_the_conforming_structs_alike(kd):
    """slangpy's reflection (Vulkan's front-end) and Slang's C API (CUDA's, run here without a
    GPU) describe an interface parameter, and the structs that conform to it, alike."""
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.signatures.module_text import ModuleText
    from slangspec.specializer.reflect import function_overloads

    if kd.device_kind != "vulkan":
        pytest.skip("compares against slangpy's reflection, which a Vulkan module reads")
    text = KINDS.read_text()
    c_api = cuda_source.front_end(ModuleText("kinds", KINDS, text), content="kinds")
    [info] = function_overloads(c_api, "kinds", "scaled_area", text)
    assert info == function_overloads(kd._front_end(), "kinds", "scaled_area", text)[0]
    t = info.params[0].type
    assert (t.kind, t.name) == ("interface", "IShape")
    assert [c.name for c in t.conformances] == ["Disc", "Box", "Quad"]
    assert all(c.differentiable for c in t.conformances)


def test_a_new_conforming_struct_is_a_new_description(tmp_path, tdev):
    """A struct that conforms to a function's interface is part of what the function reaches,
    so adding one (or editing one) keys the function anew."""
    source = KINDS.read_text()
    cache = str(tmp_path / "cache")
    before = slangspec.load_source("kinds", source, cache_dir=cache)
    key = before.functions_fact("scaled_area")
    grown = source + "\nstruct Dot : IShape { [Differentiable] float area() { return 0.0; } };\n"
    after = slangspec.load_source("kinds", grown, cache_dir=cache)
    assert after.functions_fact("scaled_area") != key
    assert after.functions_fact("tagged") == before.functions_fact("tagged")
    r = torch.rand(3, device=tdev)
    assert after.scaled_area({"_type": "Dot"}, r).tolist() == [0.0, 0.0, 0.0]


@needs_nvrtc
def test_interfaces_methods_and_arrays_of_structs_build_for_cuda_without_a_gpu(tmp_path):
    manifest = tmp_path / "warm.toml"
    text = MANIFEST + METHODS + STRUCT_ARRAYS
    manifest.write_text(text.format(path=KINDS))
    statuses = statuses_built_for_sm_90(manifest, tmp_path / "cache")
    assert statuses == ["built"] * 6
