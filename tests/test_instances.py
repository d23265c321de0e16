"""A struct's methods called on a batch of instances given as a dict (``m["Particle.reset"]``,
``slangspec.InstanceList``), ``this`` read, and written back where the method is
``[mutating]``, against the same maths in torch: values, gradients, the cache, a manifest,
``explain``, torch.compile and the errors of a wrong call."""

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


def _particles(tdev, n, grad=True):
    return {
        "position": leaf(n, 2, tdev=tdev, grad=grad),
        "velocity": leaf(n, 2, tdev=tdev, grad=grad),
        "size": torch.rand(n, device=tdev),
    }


def test_a_method_reads_this_and_differentiates_through_it(kd, tdev):
    p, dt = _particles(tdev, 6), leaf(6, 1, tdev=tdev)
    pt, dtt = {k: twin(v) for k, v in p.items()}, twin(dt)
    y = kd["Particle.calc_next_position"](p, dt.squeeze(1))
    ref = pt["position"] + pt["velocity"] * dtt
    compare(y, ref, [p["position"], p["velocity"], dt], [pt["position"], pt["velocity"], dtt])
    fn = kd["Particle.calc_next_position"]
    assert fn.overloads[0].declaration == (
        "[Differentiable] vector<float,2> Particle.calc_next_position(Particle this, float dt)"
    )


def test_a_mutating_method_writes_this_back_into_the_dict(kd, tdev):
    p = {k: v.detach() for k, v in _particles(tdev, 5).items()}
    kd["Particle.reset"](p, torch.tensor([1.0, 2.0], device=tdev), torch.zeros(5, 2, device=tdev))
    assert p["position"].tolist() == [[1.0, 2.0]] * 5
    assert p["velocity"].tolist() == [[0.0, 0.0]] * 5 and p["size"].tolist() == [0.5] * 5
    p["velocity"] += torch.tensor([0.0, 3.0], device=tdev)
    kd["Particle.update_position"](this=p, dt=0.5)
    assert p["position"].tolist() == [[1.0, 3.5]] * 5


def test_a_differentiable_mutating_method_carries_gradients_through_this(kd, tdev):
    v = leaf(4, 2, tdev=tdev)
    angle = leaf(4, tdev=tdev)
    vt, at = twin(v), twin(angle)
    zeros = torch.zeros(4, 2, device=tdev)
    this = {"position": zeros, "velocity": v * 1.0, "size": zeros[:, 0].clone()}
    kd["Particle.spin"](this, angle)
    c, s = torch.cos(at), torch.sin(at)
    ref = torch.stack([vt[:, 0] * c - vt[:, 1] * s, vt[:, 0] * s + vt[:, 1] * c], 1)
    compare(this["velocity"], ref, [v, angle], [vt, at])


def test_a_method_takes_whole_tensors_ints_and_no_diff_values_beside_this(kd, tdev):
    scale, w = leaf(4, tdev=tdev), leaf(4, tdev=tdev)
    st, wt = twin(scale), twin(w)
    y = kd["Gain.apply"]({"scale": scale}, w, slangspec.grid((4,)), 0.5)
    compare(y, wt * st + 0.5, [scale, w], [st, wt])


def test_an_instance_list_calls_methods_on_its_data(kd, tdev):
    particles = slangspec.InstanceList(
        kd,
        "Particle",
        {
            "position": torch.zeros(3, 2, device=tdev),
            "velocity": torch.zeros(3, 2, device=tdev),
            "size": torch.zeros(3, device=tdev),
        },
    )
    particles.reset(torch.ones(2, device=tdev), torch.tensor([0.0, 1.0], device=tdev))
    particles.update_position(1.0 / 60.0)
    torch.testing.assert_close(
        particles.position, torch.tensor([[1.0, 1.0 + 1.0 / 60.0]] * 3, device=tdev), **TOL
    )
    assert particles.size.tolist() == [0.5] * 3
    nxt = particles.calc_next_position(2.0)
    torch.testing.assert_close(nxt, particles.position + 2.0 * particles.velocity, **TOL)
    assert kd["Particle.scaled"](torch.ones(2, device=tdev), 3.0).tolist() == [3.0, 3.0]


def test_wrong_method_calls_name_the_method_and_the_argument(kd, tdev):
    particles = slangspec.InstanceList(kd, "Particle", _particles(tdev, 2, grad=False))
    with pytest.raises(slangspec.UnknownFunctionError, match=r"has no function 'Particle\.nope'"):
        particles.nope(1.0)
    with pytest.raises(AttributeError):
        particles.nope  # noqa: B018
    with pytest.raises(
        ValueError,
        match=r"^kinds::Particle.calc_next_position: argument 1 \('this'\): expected the fields "
        r"of Particle \(position, velocity, size\), got missing 'size'$",
    ):
        kd["Particle.calc_next_position"]({"position": 1.0, "velocity": (1.0, 2.0)}, 1.0)
    with pytest.raises(TypeError, match=r"argument 1 \('this'\): field 'size': cannot pass a"):
        kd["Particle.reset"]({**_particles(tdev, 2, grad=False), "size": "big"}, (1, 2), (3, 4))
    with pytest.raises(TypeError, match="expected a dict of its fields, got Tensor"):
        slangspec.InstanceList(kd, "Particle", torch.zeros(2))
    with pytest.raises(slangspec.UnknownFunctionError, match="is not a function name"):
        kd["Particle.reset.again"]


def test_a_fresh_load_calls_a_method_from_the_cache(kd, cache_dir, tdev):
    p = _particles(tdev, 3, grad=False)
    want = kd["Particle.calc_next_position"](p, 0.25)
    before, hits = dict(compile_counts), slangspec.Cache(cache_dir).stats()["hits"]
    fresh = slangspec.load(KINDS, cache_dir=cache_dir)
    torch.testing.assert_close(fresh["Particle.calc_next_position"](p, 0.25), want, **TOL)
    for work in ("specialize", "codegen", "front_end"):
        assert compile_counts[work] == before.get(work, 0), work
    assert slangspec.Cache(cache_dir).stats()["hits"] > hits


def test_methods_under_torch_compile(cache_dir, tdev):
    import torch._dynamo

    fresh = slangspec.load(KINDS, cache_dir=cache_dir)  # first looked up while torch traces

    def f(position, velocity, angle):
        this = {"position": position * 1.0, "velocity": velocity * 1.0, "size": angle * 0.0}
        fresh["Particle.spin"](this, angle)
        return slangspec.InstanceList(fresh, "Particle", this).calc_next_position(2.0).sum(-1)

    inputs = [leaf(5, 2, tdev=tdev), leaf(5, 2, tdev=tdev), leaf(5, tdev=tdev)]
    torch._dynamo.reset()
    assert torch._dynamo.explain(f)(*inputs).graph_break_count == 0
    out = torch.compile(f, fullgraph=True)(*inputs)
    pt, vt, at = (twin(t) for t in inputs)
    c, s = torch.cos(at), torch.sin(at)
    spun = torch.stack([vt[:, 0] * c - vt[:, 1] * s, vt[:, 0] * s + vt[:, 1] * c], 1)
    compare(out, (pt + 2.0 * spun).sum(-1), inputs, [pt, vt, at])


MANIFEST = """
[[module]]
path = "{path}"

[[module.function]]
name = "Particle.calc_next_position"
specializations = [
    {{ dt = "float", this = "{{position: f32[N, 2] grad, velocity: f32[N, 2], size: f32[N]}}" }},
]

[[module.function]]
name = "Particle . reset"
specializations = [
    ["{{position: f32[N, 2], velocity: f32[N, 2], size: f32[N]}}", "float[2]", "float[2]"],
]
"""


def test_a_manifest_warms_methods_and_explain_finds_them(tmp_path, tdev):
    cache = tmp_path / "cache"
    manifest = tmp_path / "warm.toml"
    manifest.write_text(MANIFEST.format(path=KINDS))
    warmed = cli("warm", manifest, "--cache-dir", cache, "--json")
    assert warmed.exit_code == 0, warmed.output
    assert [r["status"] for r in json.loads(warmed.stdout)] == ["built", "built"]

    spec = "this={position: f32[N, 2] grad, velocity: f32[N, 2], size: f32[N]}; dt=float"
    fn = "Particle.calc_next_position"
    hit = cli("explain", KINDS, fn, spec, "--cache-dir", cache, "--json")
    assert json.loads(hit.stdout)["hit"], hit.output
    miss = cli("explain", KINDS, fn, spec.replace("dt=float", "dt=f32[N]"), "--cache-dir", cache)
    assert "kind of argument 2: f stored" in miss.output, miss.output

    before = dict(compile_counts)
    m = slangspec.load(KINDS, cache_dir=str(cache))
    p = _particles(tdev, 7)
    p["velocity"] = p["velocity"].detach()
    m["Particle.calc_next_position"](p, 0.5).sum().backward()
    particles = slangspec.InstanceList(m, "Particle", _particles(tdev, 7, grad=False))
    particles.reset((1.0, 2.0), (0.0, 0.0))
    assert particles.position.tolist() == [[1.0, 2.0]] * 7
    for work in ("specialize", "codegen"):
        assert compile_counts[work] == before.get(work, 0), work
    torch.testing.assert_close(p["position"].grad, torch.ones(7, 2, device=tdev), **TOL)


def test_both_front_ends_describe_methods_alike(kd):
    """slangpy's reflection (Vulkan's front-end) and Slang's C API (CUDA's, run here without a
    GPU) describe a method, its ``this`` and a static method alike."""
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.signatures.module_text import ModuleText
    from slangspec.specializer.reflect import function_overloads

    if kd.device_kind != "vulkan":
        pytest.skip("compares against slangpy's reflection, which a Vulkan module reads")
    text = KINDS.read_text()
    c_api = cuda_source.front_end(ModuleText("kinds", KINDS, text), content="kinds")
    described = {}
    for name in (
        "Particle.reset",
        "Particle.spin",
        "Particle.calc_next_position",
        "Particle.scaled",
    ):
        [info] = function_overloads(c_api, "kinds", name, text)
        assert [info] == list(function_overloads(kd._front_end(), "kinds", name, text)), name
        described[name] = [(p.name, p.direction) for p in info.params]
    assert described == {
        "Particle.reset": [("this", "inout"), ("p", "in"), ("v", "in")],
        "Particle.spin": [("this", "inout"), ("angle", "in")],
        "Particle.calc_next_position": [("this", "in"), ("dt", "in")],
        "Particle.scaled": [("x", "in"), ("k", "in")],
    }


def test_a_constructor_makes_a_struct_per_call(kd, tdev):
    """slangpy's ``Spring(...)``/``__init``: ``m["Spring.__init"]`` runs the overload its
    arguments resolve against and returns the structs as a dict of the fields' tensors; both
    front-ends describe its overloads alike, with no ``this``."""
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.signatures.module_text import ModuleText
    from slangspec.specializer.reflect import function_overloads

    a, k = torch.rand(5, 2, device=tdev), torch.rand(5, device=tdev)
    made = kd["Spring.__init"](a, k)
    torch.testing.assert_close(made["anchor"], a)
    torch.testing.assert_close(made["stiffness"], k)
    made = kd["Spring.__init"](k)
    torch.testing.assert_close(made["anchor"], torch.zeros(5, 2, device=tdev))
    torch.testing.assert_close(made["stiffness"], k)
    made = kd.Spring(k)  # slangpy's spelling: a struct's name calls its constructors
    torch.testing.assert_close(made["stiffness"], k)
    with pytest.raises(slangspec.UnknownFunctionError, match=r"Particle2\.__init"):
        kd["Particle2.__init"]
    if kd.device_kind != "vulkan":
        return
    text = KINDS.read_text()
    c_api = cuda_source.front_end(ModuleText("kinds", KINDS, text), content="kinds")
    mine = function_overloads(c_api, "kinds", "Spring.__init", text)
    assert mine == function_overloads(kd._front_end(), "kinds", "Spring.__init", text)
    assert sorted([p.name for p in o.params] for o in mine) == [["a", "k"], ["k"]]
