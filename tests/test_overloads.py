"""Overload sets: each call runs the one overload its argument signature resolves against, as
slangpy picks one; none fitting and several fitting are errors that list the candidates."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

import slangspec
from slangspec import codegen
from slangspec.cli import main
from slangspec.runtime import backend, module
from slangspec.settings import compile_counts
from slangspec.specializer.reflect import function_overloads

TOL = {"rtol": 1e-6, "atol": 1e-6}

SOURCE = """
import slangpy;
[Differentiable]
float twice(float x) { return 2.0 * x; }
float twice(int x) { return 3.0 * float(x); }
[Differentiable]
float2 twice(float2 v, float s) { return v * s; }
float step(float x) { return x + 100.0; }
float sin(float x) { return 1.0; }
float pick(half x) { return 1.0; }
float pick(float x) { return 2.0; }
float named(float x) { return x; }
float named(int y) { return float(y); }
void fill(out float r, float x) { r = x; }
float fill(int x) { return float(x); }
"""


@pytest.fixture(scope="module")
def ov(cache_dir):
    return slangspec.load_source("overloads", SOURCE, cache_dir=cache_dir)


def test_each_call_runs_the_overload_its_argument_types_fit(ov, tdev):
    x = torch.tensor([1.0, -2.0, 3.5], device=tdev, requires_grad=True)
    y = ov.twice(x)
    y.sum().backward()
    torch.testing.assert_close(y.detach(), 2.0 * x.detach(), **TOL)
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0), **TOL)

    i = torch.tensor([1, 2, 7], dtype=torch.int32, device=tdev)
    torch.testing.assert_close(ov.twice(i), 3.0 * i.float(), **TOL)

    # A Python float never feeds an int parameter here: only twice(float) takes it.
    assert ov.twice(1.5).item() == pytest.approx(3.0, abs=1e-6)

    v = torch.rand(4, 2, device=tdev, requires_grad=True)
    w = ov.twice(v, 0.5)
    w.sum().backward()
    torch.testing.assert_close(w.detach(), v.detach() * 0.5, **TOL)
    torch.testing.assert_close(v.grad, torch.full_like(v, 0.5), **TOL)

    assert ov.twice(x=i).tolist() == [3.0, 6.0, 21.0]  # the overloads of one parameter name x
    with pytest.raises(TypeError, match=r"^overloads::twice: argument 2 \('s'\): "):
        ov.twice(v, object())


def test_the_plan_names_the_overload_and_two_overloads_share_no_kernel(ov, tdev):
    f = torch.ones(3, device=tdev)
    i = torch.ones(3, dtype=torch.int32, device=tdev)
    assert ov.twice.plan(f).overload == "[Differentiable] float twice(float x)"
    assert ov.twice.plan(i).overload == "float twice(int x)"
    assert ov.twice.cache_key(ov.twice.signature(f)) != ov.twice.cache_key(ov.twice.signature(i))
    doc = ov.twice.__doc__
    assert "of 3 overloads" in doc and "float twice(int x)" in doc
    assert "[Differentiable] vector<float,2> twice(vector<float,2> v, float s)" in doc


def test_no_overload_fitting_lists_every_candidate_and_why(ov, tdev):
    with pytest.raises(TypeError) as caught:
        ov.twice(torch.ones(3, dtype=torch.int64, device=tdev))
    text = str(caught.value)
    assert text.startswith(
        "overloads::twice: none of its 3 overloads takes (an int64 tensor of rank 1):\n"
    )
    assert (
        "\n  [Differentiable] float twice(float x): argument 1 ('x'): expected a float32 tensor, "
        "got an int64 tensor" in text
    )
    assert (
        "\n  float twice(int x): argument 1 ('x'): expected an int32 tensor, got an int64" in text
    )
    assert (
        "\n  [Differentiable] vector<float,2> twice(vector<float,2> v, float s): expected 2 "
        "arguments (v, s), got 1" in text
    )


def test_several_overloads_fitting_is_ambiguous_as_in_slangpy(ov, tdev):
    # slangpy takes a Python int for float and int alike, and prefers neither.
    with pytest.raises(TypeError) as caught:
        ov.twice(2)
    text = str(caught.value)
    assert "overloads::twice: the call (Python int) is ambiguous: 2 of its 3 overloads" in text
    assert "\n  [Differentiable] float twice(float x)\n  float twice(int x)\n" in text
    assert "twice(vector<float,2>" not in text
    with pytest.raises(TypeError, match=r"ambiguous.*\n  float pick\(float x\)\n  float pick\(h"):
        ov.pick(1.5)
    # A tensor of one dtype picks one.
    assert ov.pick(torch.ones(2, dtype=torch.float16, device=tdev)).tolist() == [1.0, 1.0]
    assert ov.pick(torch.ones(2, device=tdev)).tolist() == [2.0, 2.0]


def test_a_function_sharing_a_builtins_name_is_called_where_only_it_fits(ov, tdev):
    # Slang's own step takes two arguments: the module's, taking one, is the only fit.
    x = torch.tensor([1.0, 2.0], device=tdev)
    torch.testing.assert_close(ov.step(x), x + 100.0, **TOL)
    overloads = ov.step.overloads
    assert overloads[0].declaration == "float step(float x)" and not overloads[0].elsewhere
    assert all(o.elsewhere for o in overloads[1:]) and len(overloads) > 1
    # Slang's sin takes one float too: the call is ambiguous, listing the built-in.
    with pytest.raises(TypeError) as caught:
        ov.sin(x)
    text = str(caught.value)
    assert "overloads::sin: the call (a float32 tensor of rank 1) is ambiguous" in text
    assert "\n  float sin(float x)\n" in text
    assert "\n  T sin(T x) (not declared in the module: a Slang built-in, or an import's)" in text
    assert "rename the module's function" in text
    # A name the module does not declare is Slang's own, called through the module.
    torch.testing.assert_close(ov.cos(x), torch.cos(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError) as caught:
        ov.max(x, x)
    assert "is ambiguous" in str(caught.value) and "rename" not in str(caught.value)


def test_overloads_that_differ_in_names_or_outputs_say_so_where_it_matters(ov, tdev):
    i = torch.ones(2, dtype=torch.int32, device=tdev)
    assert ov.named(i).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match=r"overloads::named: its overloads differ in their param"):
        ov.named(y=i)
    r = torch.empty(2, device=tdev)
    ov.fill(r, torch.full((2,), 4.0, device=tdev))
    assert r.tolist() == [4.0, 4.0] and ov.fill(i).tolist() == [1.0, 1.0]
    # torch.compile wraps the TypeError in an error of its own.
    with pytest.raises(Exception, match=r"overloads::fill: its overloads differ in their outp"):
        torch.compile(lambda a: ov.fill(a), fullgraph=True)(i)


def test_overloads_under_torch_compile_with_gradients(ov, cache_dir, tdev):
    def f(a, b):
        return ov.twice(a) + ov.twice(b)

    fresh = slangspec.load_source("overloads", SOURCE, cache_dir=cache_dir)

    def by_keyword(a, b):  # looked up while torch traces: keywords bind as the overloads agree
        return fresh.twice(x=a) + fresh.twice(b, s=2.0)[..., 0]

    a = torch.tensor([1.0, 2.0, 3.0], device=tdev, requires_grad=True)
    b = torch.tensor([4, 5, 6], dtype=torch.int32, device=tdev)
    out = torch.compile(f, fullgraph=True)(a, b)
    out.sum().backward()
    torch.testing.assert_close(out.detach(), 2.0 * a.detach() + 3.0 * b.float(), **TOL)
    torch.testing.assert_close(a.grad, torch.full_like(a, 2.0), **TOL)

    v = torch.ones(3, 2, device=tdev)
    out = torch.compile(by_keyword, fullgraph=True)(a.detach(), v)
    torch.testing.assert_close(out, 2.0 * a.detach() + 2.0, **TOL)


def _refuse(*_args, **_kwargs):
    raise AssertionError("a process served from the cache must not reflect or resolve")


def _served_from_cache(monkeypatch) -> None:
    monkeypatch.setattr(codegen, "kernel_source", _refuse)
    monkeypatch.setattr(backend.SlangBackend, "front_end", _refuse)
    monkeypatch.setattr(module.Module, "function_overloads", _refuse)


def test_a_fresh_load_runs_each_overload_from_the_cache(tmp_path, tdev, monkeypatch):
    cache = str(tmp_path / "cache")
    f = torch.tensor([1.0, 2.0], device=tdev)
    i = torch.tensor([1, 2], dtype=torch.int32, device=tdev)
    first = slangspec.load_source("cached_overloads", SOURCE, cache_dir=cache)
    assert first.twice(f).tolist() == [2.0, 4.0] and first.twice(i).tolist() == [3.0, 6.0]
    built = compile_counts["specialize"]
    _served_from_cache(monkeypatch)
    again = slangspec.load_source("cached_overloads", SOURCE, cache_dir=cache)
    assert again.twice(f).tolist() == [2.0, 4.0] and again.twice(i).tolist() == [3.0, 6.0]
    assert compile_counts["specialize"] == built
    stored = {
        row["preimage"]["signature"]: json.loads(row["plan"])["overload"]
        for _, row in slangspec.Cache(cache).rows()
    }
    assert stored == {
        again.twice.signature(f): "[Differentiable] float twice(float x)",
        again.twice.signature(i): "float twice(int x)",
    }


def cli(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_a_manifest_warms_the_overload_its_specs_pick_and_explain_names_it(
    tmp_path, tdev, monkeypatch
):
    shader = tmp_path / "warmed_overloads.slang"
    shader.write_text(SOURCE)
    manifest = tmp_path / "warm.toml"
    manifest.write_text(f"""
[[module]]
path = "{shader}"

[[module.function]]
name = "twice"
specializations = [["f32[N] grad"], ["i32[N]"], ["f32[N, 2]", "float"]]
""")
    cache = tmp_path / "cache"
    warmed = cli("warm", manifest, "--cache-dir", cache, "--json")
    assert warmed.exit_code == 0, warmed.output
    assert len(json.loads(warmed.stdout)) == 3

    explained = cli("explain", shader, "twice", "i32[N]", "--cache-dir", cache, "--json")
    result = json.loads(explained.stdout)
    assert result["hit"] and result["overload"] == "float twice(int x)"
    text = cli("explain", shader, "twice", "f32[N] grad", "--cache-dir", cache).output
    assert "overload   [Differentiable] float twice(float x)" in text
    refused = cli("explain", shader, "twice", "i64[N]", "--cache-dir", cache)
    assert refused.exit_code == 2 and "none of its 3 overloads takes" in refused.output

    _served_from_cache(monkeypatch)
    m = slangspec.load(shader, cache_dir=str(cache))
    x = torch.arange(6.0, device=tdev, requires_grad=True)  # N past any extent class of its own
    y = m.twice(x)
    y.sum().backward()
    torch.testing.assert_close(y.detach(), 2.0 * x.detach(), **TOL)
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0), **TOL)
    i = torch.arange(6, dtype=torch.int32, device=tdev)
    torch.testing.assert_close(m.twice(i), 3.0 * i.float(), **TOL)
    torch.testing.assert_close(
        m.twice(torch.ones(6, 2, device=tdev), 4.0), torch.full((6, 2), 4.0, device=tdev), **TOL
    )


def test_both_front_ends_describe_overloads_alike(ov, tmp_path):
    """slangpy's reflection (Vulkan's front-end) and Slang's C API (CUDA's, run here without a
    GPU) give the same descriptions, overloads, built-ins and their order included."""
    from slangspec.compile.cuda import source as cuda_source
    from slangspec.signatures.module_text import ModuleText

    if ov.device_kind != "vulkan":
        pytest.skip("compares against slangpy's reflection, which a Vulkan module reads")
    c_api = cuda_source.front_end(
        ModuleText("overloads", tmp_path / "overloads.slang", SOURCE), content="overloads"
    )
    slangpy_front_end = ov._front_end()
    for name in ("twice", "step", "sin", "pick", "named", "fill"):
        mine = function_overloads(c_api, "overloads", name, SOURCE)
        assert mine == function_overloads(slangpy_front_end, "overloads", name, SOURCE), name
        assert mine == ov[name].overloads, name
    assert [o.declaration for o in function_overloads(c_api, "overloads", "twice", SOURCE)] == [
        "[Differentiable] float twice(float x)",
        "[Differentiable] vector<float,2> twice(vector<float,2> v, float s)",
        "float twice(int x)",
    ]
