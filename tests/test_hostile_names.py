"""Function names are parsed, never pasted: text that is not a function reference is an
UnknownFunctionError wherever a name is taken (calls, ``hasattr``, manifests, explain), and no
kernel holds anything of it. Also what a kernel may leave unwritten, generic constraints and
the scalar types a device does not compute."""

import json
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import slangspec
from hostile import ISSUE_NAMES, SOURCE, mangled_names
from parity import compare, leaf, twin
from slangspec.aot.warm import ManifestError, parse_manifest
from slangspec.cli import main
from slangspec.runtime.module_base import UnknownFunctionError
from slangspec.signatures.function_ref import FunctionNameError, canonical_name, parse_function_ref


def test_the_grammar_renders_canonical_names():
    assert canonical_name("add<2, 3>") == "add<2,3>"
    assert canonical_name("  f < vector < float , 3 > , 1.50 >  ") == "f<vector<float,3>,1.5>"
    assert canonical_name("f<-1, 2u, 1e3f>") == "f<-1,2u,1000.0f>"
    assert parse_function_ref("poly").args is None and parse_function_ref("g<>").args == ()
    assert canonical_name(" Particle . reset ") == "Particle.reset"
    assert canonical_name("Box<float, 2>.get<3>") == "Box<float,2>.get<3>"
    assert parse_function_ref("Particle.reset").owner == parse_function_ref("Particle")
    bad_methods = ["a.b.c", ".x", "a.", "f<a.b>", "a.3"]
    for bad in [
        *ISSUE_NAMES,
        *bad_methods,
        "",
        " ",
        "3f",
        "f<3x>",
        "a" * 600,
        "f" + "<g" * 9 + ">" * 9,
    ]:
        with pytest.raises(FunctionNameError):
            canonical_name(bad)


@pytest.fixture(scope="module")
def hn(cache_dir):
    return slangspec.load_source("hostile", SOURCE, cache_dir=cache_dir)


def _resolves(name: str) -> str | None:
    try:
        return canonical_name(name)
    except FunctionNameError:
        return None


def test_mangled_names_are_unknown_functions_and_reach_no_kernel(hn, tdev, cache_dir):
    ones = torch.ones(4, device=tdev)
    names = mangled_names() + ISSUE_NAMES
    assert len(names) >= 200
    refused = []
    for name in names:
        intended = _resolves(name)
        if intended is None:
            assert not hasattr(hn, name), name
            with pytest.raises(UnknownFunctionError, match="is not a function name"):
                hn[name]
            refused.append(name)
            continue
        if "." in intended:  # a method's name, of a struct the module does not have
            assert not hasattr(hn, name), name
            with pytest.raises(
                UnknownFunctionError, match=f"has no function '{re.escape(intended)}'"
            ):
                hn[name]
            refused.append(name)
            continue
        fn = hn[name]  # a name with only spaces added is the function it names
        assert fn.name == intended
    assert len(refused) >= 200
    r = torch.zeros(4, device=tdev)
    hn.out1(ones, ones, r)
    torch.testing.assert_close(r, torch.full_like(r, 2.0))
    hn["gadd < 3 >"](ones)
    kernels = [p.read_text() for p in Path(cache_dir).rglob("k_*.slang")]
    mine = [k for k in kernels if "import hostile;" in k]
    assert mine
    for name in refused:
        if re.search(r"[^\w\s]", name):
            assert not any(name in k for k in mine), name
    calls = {m for k in mine for m in re.findall(r"(?:bwd_diff\()?(\w+(?:<[^>(]*>)?)\)?\(v", k)}
    assert calls <= {"out1", "poly", "gadd<3>"}, calls


REFUSED = [n for n in [*ISSUE_NAMES, *mangled_names()] if _resolves(n) is None]


def test_a_mangled_name_in_a_manifest_is_refused_where_it_stands(tmp_path):
    module = tmp_path / "hostile.slang"
    module.write_text(SOURCE)
    manifest = tmp_path / "warm.toml"
    assert len(REFUSED) >= 200
    for name in REFUSED:
        manifest.write_text(
            f'[[module]]\npath = "{module}"\n\n[[module.function]]\nname = {json.dumps(name)}\n'
            'specializations = [["f32[N]", "f32[N]", "f32[N]"]]\n'
        )
        with pytest.raises(ManifestError, match="is not a function name"):
            parse_manifest(manifest)


def test_explain_refuses_a_mangled_name(tmp_path):
    module = tmp_path / "hostile.slang"
    module.write_text(SOURCE)
    for name in REFUSED:
        # After "--", as a name that begins with "-" must be given to any click command.
        cache = ["--cache-dir", str(tmp_path / "c")]
        r = CliRunner().invoke(main, ["explain", *cache, "--", str(module), name, "f32[N]"])
        assert r.exit_code == 2, r.output
        assert "is not a function name" in r.output


def test_a_call_signature_names_a_function_as_slangspec_spells_it(hn):
    with pytest.raises(ValueError, match="'poly;x' is not a function name"):
        hn.poly.plan_for_signature("hostile::poly;x call [D1,S6,G0,Vx] [D1,S6,G0,Vx]")
    with pytest.raises(ValueError, match="is not '<module>::<function>'"):
        hn.poly.plan_for_signature("hostile::gadd<03> call [D1,S6,G0,Vx]")


def test_a_stored_plan_naming_another_call_fails_verify(hn, tdev, tmp_path):
    """An entry whose plan names text that is not its function (a poisoned or hand-edited
    row) is not what code generation makes of it: verify drops it."""
    from slangspec.runtime.cache import regenerate_source

    x = torch.ones(4, device=tdev)
    plan = hn.poly.plan(x, x)
    pre = {"module": "hostile", "function": plan.function, "signature": plan.signature}
    poisoned = json.dumps({**json.loads(plan.to_json()), "function": "poly;//"})
    with pytest.raises(ValueError, match="not a function name"):
        regenerate_source(poisoned, {**pre, "function": "poly;//"}, "forward")


@pytest.mark.parametrize("fn", ["skips", "skips_some"])
def test_an_out_parameter_the_function_does_not_assign_is_zero(hn, tdev, fn):
    a = -torch.ones(2048, device=tdev)
    r = torch.full((2048,), 7.0, device=tdev)
    getattr(hn, fn)(a, r)
    assert torch.equal(r, torch.zeros_like(r))


def test_an_unassigned_struct_field_is_zero(hn, tdev):
    a = torch.arange(512.0, device=tdev)
    p = {"x": torch.full((512,), 7.0, device=tdev), "y": torch.full((512,), 7.0, device=tdev)}
    hn.skips_field(a, p)
    torch.testing.assert_close(p["x"], a)
    assert torch.equal(p["y"], torch.zeros_like(a))


def test_an_int_tensor_for_a_float_generic_is_refused(hn, tdev):
    x = torch.tensor([16777217], dtype=torch.int32, device=tdev)
    with pytest.raises(
        TypeError,
        match=r"hostile::gmul: argument 1 \('a'\): an int32 tensor of rank 1 makes the generic "
        r"type T int, which does not conform to IFloat \(T takes double, float, half\)",
    ):
        hn.gmul(x, x)
    y = torch.tensor([1.5, 2.0], device=tdev)
    torch.testing.assert_close(hn.gmul(y, y), y * y)


def test_explicit_generic_arguments_that_break_a_constraint_say_so(hn):
    with pytest.raises(UnknownFunctionError, match=r"int does not conform to IFloat"):
        hn["gmul<int>"]
    assert not hasattr(hn, "gmul<int>")
    with pytest.raises(UnknownFunctionError, match=r"Nope is not a type it knows"):
        hn["gmul<Nope>"]
    with pytest.raises(UnknownFunctionError, match="has no function 'nothere<int>'"):
        hn["nothere<int>"]


def test_double_math_is_refused_on_vulkan_and_right_on_cuda(kind, tdev, cache_dir):
    m = slangspec.load_source(
        "dmath",
        "[Differentiable] double dsin(double x) { return sin(x) + exp(x); }",
        cache_dir=cache_dir,
    )
    x = torch.linspace(-2.0, 2.0, 33, dtype=torch.float64, device=tdev, requires_grad=True)
    if kind == "vulkan":
        with pytest.raises(
            TypeError, match=r"dmath::dsin: argument 1 \('x'\): double is computed on cuda only"
        ):
            m.dsin(x)
        return
    torch.testing.assert_close(m.dsin(x), torch.sin(x) + torch.exp(x), rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(m.dsin, (x,))


NAMED_LIKE_LOCALS = """
import slangpy;
[Differentiable]
float v1(float a, float b) { return a * b + a; }
[Differentiable]
float g0(float a, float b) { return a * b - b; }
[Differentiable]
float _d(float a, float b) { return a - b * b; }
[Differentiable]
float p1(IDiffTensor<float, 1> w, float x)
{
    float s = 0.0;
    for (int i = 0; i < 4; i++)
    {
        int idx[1] = { i };
        s += w[idx] * x;
    }
    return s;
}
interface IScale : IDifferentiable { [Differentiable] float apply(float v); };
struct Twice : IScale
{
    float k;
    [Differentiable] float apply(float v) { return 2.0 * k * v; }
};
[Differentiable]
float x0(IScale s, float v) { return s.apply(v) + v; }
"""


def test_functions_named_like_the_kernels_own_locals(cache_dir, tdev, tmp_path):
    # v1, g0, p1 and _d are also what the kernels call the second argument's value, the first's
    # gradient, the second parameter's differential pair and the result's cotangent; a function
    # with an interface parameter is called through a wrapper, which must not name one x0.
    path = tmp_path / "named_like_locals.slang"
    path.write_text(NAMED_LIKE_LOCALS)
    m = slangspec.load(path, cache_dir=cache_dir)
    a, b = leaf(5, tdev=tdev), leaf(5, tdev=tdev)
    at, bt = twin(a), twin(b)
    compare(m.v1(a, b), at * bt + at, [a, b], [at, bt])
    a, b = leaf(5, tdev=tdev), leaf(5, tdev=tdev)
    at, bt = twin(a), twin(b)
    compare(m.g0(a, b), at * bt - bt, [a, b], [at, bt])
    a, b = leaf(5, tdev=tdev), leaf(5, tdev=tdev)
    at, bt = twin(a), twin(b)
    compare(m._d(a, b), at - bt * bt, [a, b], [at, bt])
    w, x = leaf(4, tdev=tdev), leaf(6, tdev=tdev)
    wt, xt = twin(w), twin(x)
    compare(m.p1(w, x), wt.sum() * xt, [w, x], [wt, xt])
    k, v = leaf(5, tdev=tdev), leaf(5, tdev=tdev)
    kt, vt = twin(k), twin(v)
    compare(m.x0({"_type": "Twice", "k": k}, v), 2 * kt * vt + vt, [k, v], [kt, vt])


TYPES_NAMED_LIKE_LOCALS = """
import slangpy;
struct a0 : IDifferentiable { float x; float y; };
struct p1 : IDifferentiable { float a; };
struct _d : IDifferentiable { float s; float t; };
struct x1 : IDifferentiable { float k; };
struct s0 : IDifferentiable
{
    float w;
    [Differentiable] float scaled(float v) { return w * v; }
};
[Differentiable]
_d spread(a0 p, p1 q, x1 r)
{
    _d o;
    o.s = p.x * q.a + r.k;
    o.t = p.y * r.k;
    return o;
}
[Differentiable]
float weigh(a0 p[2], float k) { return (p[0].x + p[1].y) * k; }
"""


def test_structs_named_like_the_kernels_own_locals(cache_dir, tdev, tmp_path):
    # a0, p1 and _d also name the kernels' first pointer, second differential pair and the
    # result's cotangent; x1 a parameter of the wrapper a method is called through.
    path = tmp_path / "types_named_like_locals.slang"
    path.write_text(TYPES_NAMED_LIKE_LOCALS)
    m = slangspec.load(path, cache_dir=cache_dir)
    x, y, a, k = (leaf(5, tdev=tdev) for _ in range(4))
    xt, yt, at, kt = (twin(t) for t in (x, y, a, k))
    out = m.spread({"x": x, "y": y}, {"a": a}, {"k": k})
    ref = torch.stack([xt * at + kt, yt * kt])
    compare(torch.stack([out["s"], out["t"]]), ref, [x, y, a, k], [xt, yt, at, kt])
    p, k = {"x": leaf(3, 2, tdev=tdev), "y": leaf(3, 2, tdev=tdev)}, leaf(3, tdev=tdev)
    pt, kt = {n: twin(t) for n, t in p.items()}, twin(k)
    ref = (pt["x"][:, 0] + pt["y"][:, 1]) * kt
    compare(m.weigh(p, k), ref, [*p.values(), k], [*pt.values(), kt])
    w, v = leaf(4, tdev=tdev), leaf(4, tdev=tdev)
    wt, vt = twin(w), twin(v)
    compare(m["s0.scaled"]({"w": w}, v), wt * vt, [w, v], [wt, vt])
