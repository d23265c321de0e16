"""Every parameter form a slangpy user writes, against the same maths in torch: matrices,
arrays, structs (dicts), out/inout parameters, ``_result=``, every tensor type, keyword
arguments and explicit generics."""

import itertools
import warnings
from pathlib import Path

import pytest
import torch

import slangspec
from parity import F32 as TOL
from parity import assert_grads, compare, leaf, twin
from workers import python

SHADERS = Path(__file__).parent / "shaders"


@pytest.fixture(scope="module")
def sf(cache_dir):
    return slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)


# --- matrices ------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["batched", "broadcast", "transposed"])
def test_matrix_times_vector(sf, tdev, layout):
    m = leaf(6, 3, 3, tdev=tdev) if layout != "broadcast" else leaf(3, 3, tdev=tdev)
    if layout == "transposed":
        m = leaf(6, 3, 3, tdev=tdev).detach().transpose(1, 2).requires_grad_()
        assert not m.is_contiguous()
    v = leaf(6, 3, tdev=tdev)
    mt, vt = twin(m), twin(v)
    y = sf.transform(m, v)
    ref = torch.einsum("...ij,...j->...i", mt, vt)
    compare(y, ref, [m, v], [mt, vt])


def test_matrix_result_of_two_by_three(sf, tdev):
    m = leaf(4, 2, 3, tdev=tdev)
    mt = twin(m)
    y = sf.scale23(m, 2.5)
    assert y.shape == (4, 2, 3)
    ref = mt * 2.5
    compare(y, ref, [m], [mt])


def test_matrix_of_the_wrong_shape_names_the_argument(sf, tdev):
    with pytest.raises(ValueError, match=r"argument 1 \('m'\).*trailing dimensions are \(3, 3\)"):
        sf.transform(leaf(6, 3, 2, tdev=tdev), leaf(6, 3, tdev=tdev))


# --- arrays --------------------------------------------------------------------------------


def test_arrays_broadcast_and_differentiate(sf, tdev):
    a = leaf(7, 5, tdev=tdev)
    b = leaf(5, tdev=tdev)
    at, bt = twin(a), twin(b)
    y = sf.add_arrays(a, b)
    ref = at + bt
    compare(y, ref, [a, b], [at, bt])


def test_array_length_mismatch_names_expected_and_actual(sf, tdev):
    with pytest.raises(ValueError, match=r"argument 1 \('a'\).*\(5,\).*got shape \(7, 6\)"):
        sf.add_arrays(leaf(7, 6, tdev=tdev), leaf(7, 6, tdev=tdev))


def test_arrays_of_vectors_and_nested_arrays_index_in_order(sf, tdev):
    v = leaf(3, 2, 3, tdev=tdev)
    w = leaf(3, 2, 3, tdev=tdev).detach().transpose(0, 1).contiguous().transpose(0, 1)
    w.requires_grad_()
    vt, wt = twin(v), twin(w)
    y = sf.weigh(v, w)
    ref = (vt * wt).sum(dim=(1, 2))
    compare(y, ref, [v, w], [vt, wt])


# --- structs -------------------------------------------------------------------------------


def test_struct_fields_broadcast_on_their_own(sf, tdev):
    ray = {"origin": leaf(3, tdev=tdev), "dir": leaf(8, 3, tdev=tdev)}
    t = leaf(8, 1, tdev=tdev).squeeze(1).detach().requires_grad_()
    twins = {k: twin(v) for k, v in ray.items()}
    tt = twin(t)
    y = sf.at(ray, t)
    ref = twins["origin"] + twins["dir"] * tt[:, None]
    compare(y, ref, [ray["origin"], ray["dir"], t], [twins["origin"], twins["dir"], tt])


def test_a_frozen_struct_field_gets_no_gradient_storage(sf, tdev):
    ray = {"origin": leaf(8, 3, tdev=tdev, grad=False), "dir": leaf(8, 3, tdev=tdev)}
    plan = sf.at.plan(ray, 1.5)
    assert [a.param for a in plan.args] == ["r.origin", "r.dir", "t"]
    assert plan.backward_masks == ("010",)
    y = sf.at(ray, 1.5)
    y.sum().backward()
    assert ray["origin"].grad is None
    torch.testing.assert_close(ray["dir"].grad, torch.full_like(ray["dir"], 1.5), **TOL)
    source = slangspec.codegen.backward_source(plan, "010")
    assert "g1" in source and "g0" not in source


def test_nested_struct_with_a_matrix_field_and_an_array(sf, tdev):
    scene, x = _scene(tdev, 5), leaf(5, 4, tdev=tdev)
    twins = _twins(scene)
    xt = twin(x)
    y = sf.energy(scene, x, 0.5)
    ref = _energy(twins, xt, 0.5)
    compare(y, ref, [*_leaves(scene), x], [*_leaves(twins), xt])


@pytest.mark.parametrize("compiled", [False, True])
def test_whole_tensor_fields_of_a_struct(sf, tdev, compiled):
    w, bias = leaf(3, 4, tdev=tdev), torch.randn(4, device=tdev)
    wt = twin(w)

    def call(w, bias):
        return sf.layer_out({"w": w, "bias": bias, "scale": 2.0}, slangspec.grid((3, 4)))

    y = (torch.compile(call, fullgraph=True) if compiled else call)(w, bias)
    compare(y, wt * 2.0 + bias[None, :], [w], [wt])


def test_a_written_tensor_field_is_refused_clearly(sf, tdev):
    with pytest.raises(TypeError, match=r"argument 1 \('s.o'\): expected a struct field of a"):
        sf.write_sink({"o": torch.zeros(3, device=tdev)}, slangspec.grid((3,)))


def test_struct_keys_missing_or_unknown_are_named(sf, tdev):
    with pytest.raises(ValueError, match=r"argument 1 \('r'\).*missing 'dir'"):
        sf.at({"origin": leaf(3, tdev=tdev)}, 1.0)
    with pytest.raises(ValueError, match=r"unknown 'speed'"):
        sf.at({"origin": leaf(3, tdev=tdev), "dir": leaf(3, tdev=tdev), "speed": 1.0}, 1.0)
    with pytest.raises(TypeError, match=r"argument 1 \('r'\): expected a dict of the fields"):
        sf.at(leaf(3, tdev=tdev), 1.0)


def test_struct_result_comes_back_as_a_dict(sf, tdev):
    ray = {"origin": leaf(4, 3, tdev=tdev), "dir": leaf(4, 3, tdev=tdev)}
    n = torch.nn.functional.normalize(torch.randn(4, 3, device=tdev), dim=1)
    twins = {k: twin(v) for k, v in ray.items()}
    out = sf.reflect_ray(ray, n)
    assert set(out) == {"origin", "dir"}
    d = twins["dir"]
    ref_dir = d - 2.0 * (d * n).sum(1, keepdim=True) * n
    torch.testing.assert_close(out["origin"], twins["origin"], **TOL)
    torch.testing.assert_close(out["dir"], ref_dir, **TOL)
    (out["dir"].sum() + 2 * out["origin"].sum()).backward()
    (ref_dir.sum() + 2 * twins["origin"].sum()).backward()
    assert_grads(list(ray.values()), list(twins.values()))


# --- out and inout parameters, _result -----------------------------------------------------


def test_out_parameter_is_written_in_place_with_autograd(sf, tdev):
    a, b = leaf(5, tdev=tdev), leaf(5, tdev=tdev, grad=False)
    res = torch.empty(5, device=tdev)
    version = res._version
    assert sf.add_out(a, b, res) is None
    assert res._version > version
    torch.testing.assert_close(res, a.detach() + b, **TOL)
    res.backward(torch.arange(5.0, device=tdev))
    torch.testing.assert_close(a.grad, torch.arange(5.0, device=tdev))


def test_out_vector_parameter_and_its_shape_check(sf, tdev):
    a, b = leaf(4, 3, tdev=tdev), leaf(4, 3, tdev=tdev)
    res = torch.zeros(4, 3, device=tdev)
    sf.add_vectors_out(a, b, res)
    torch.testing.assert_close(res, (a + b).detach(), **TOL)
    with pytest.raises(ValueError, match=r"argument 3 \('res'\).*\(4, 3\), got shape \(1, 3\)"):
        sf.add_vectors_out(a, b, torch.zeros(1, 3, device=tdev))


def test_inout_parameter_carries_gradients_through(sf, tdev):
    x = leaf(6, 3, tdev=tdev)
    s = leaf(6, tdev=tdev)
    v = x * 1.0  # not a leaf: torch writes leaves that require grad in place for no one
    sf.scale_inout(v, s)
    xt, st = twin(x), twin(s)
    ref = xt * (st * st)[:, None]
    compare(v, ref, [x, s], [xt, st])


def test_inout_leaf_that_requires_grad_is_refused(sf, tdev):
    with pytest.raises(ValueError, match=r"argument 1 \('v'\).*must not be a leaf"):
        sf.scale_inout(leaf(2, 3, tdev=tdev), 2.0)


def test_result_into_a_given_tensor(sf, tdev):
    x = leaf(10, tdev=tdev)
    out = torch.empty(10, device=tdev)
    got = sf.polynomial(2.0, 4.0, 1.0, x, _result=out)
    assert got is out
    torch.testing.assert_close(out, 2 * x.detach() ** 2 + 4 * x.detach() + 1, **TOL)
    out.sum().backward()
    torch.testing.assert_close(x.grad, 4 * x.detach() + 4, **TOL)
    with pytest.raises(ValueError, match=r"_result: expected a float32 tensor of shape \(10,\)"):
        sf.polynomial(2.0, 4.0, 1.0, x, _result=torch.empty(3, device=tdev))


# --- tensor types --------------------------------------------------------------------------


@pytest.mark.parametrize("ga,gb", [(True, True), (True, False), (False, True)])
def test_diff_tensors_under_mixed_requires_grad(sf, tdev, ga, gb):
    a, b = leaf(9, tdev=tdev, grad=ga), leaf(9, tdev=tdev, grad=gb)
    at, bt = twin(a), twin(b)
    y = sf.through_tensors(a, b, slangspec.grid((9,)))
    ref = at * bt * bt
    compare(y, ref, [a, b], [at, bt])


@pytest.mark.parametrize("ga", [True, False])
def test_whole_tensors_loop_over_leading_dimensions(sf, tdev, ga):
    a, b = leaf(3, 9, tdev=tdev, grad=ga), leaf(9, tdev=tdev)
    at, bt = twin(a), twin(b)
    i = torch.arange(9, dtype=torch.int32, device=tdev).reshape(9, 1)
    y = sf.through_tensors(a, b, i)  # a's leading dimension is the innermost call dimension
    assert y.shape == (9, 3)
    compare(y, at.T * (bt * bt)[:, None], [a, b], [at, bt])


def test_a_function_that_is_not_differentiable_warns_once_of_the_gradient_it_drops(cache_dir, tdev):
    fresh = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)
    t = torch.ones(3, 4, device=tdev, requires_grad=True)
    match = r"surface::read_tensor is not \[Differentiable\], so argument 1 \('t'\) requiring"
    with pytest.warns(UserWarning, match=match):
        fresh.read_tensor(t, slangspec.grid((3, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.read_tensor(torch.ones(2, 2, device=tdev, requires_grad=True), slangspec.grid((2, 2)))
        fresh.read_tensor(t.detach(), slangspec.grid((3, 4)))


def test_tensor_rwtensor_and_wtensor(sf, tdev):
    t = torch.arange(12.0, device=tdev).reshape(3, 4)
    y = sf.read_tensor(t, slangspec.grid((3, 4)))
    torch.testing.assert_close(y, t * 2)  # .x is the innermost dimension, as slangpy indexes
    o = torch.ones(4, device=tdev)
    sf.write_rw(o, slangspec.grid((4,)), 2.0)
    torch.testing.assert_close(o, torch.full((4,), 3.0, device=tdev))
    sf.write_w(o, slangspec.grid((4,)), 2.0)
    torch.testing.assert_close(o, torch.full((4,), 6.0, device=tdev))


def test_a_written_differentiable_interface_tensor_carries_gradients(sf, tdev):
    v, w = leaf(5, tdev=tdev), torch.randn(5, device=tdev)
    vt = twin(v)
    o = torch.full((6,), 7.0, device=tdev)
    sf.write_wdiff(o, slangspec.grid((5,)), v)
    ref = torch.cat([vt * vt, torch.full((1,), 7.0, device=tdev)])
    torch.testing.assert_close(o, ref.detach(), **TOL)  # the element not written keeps its value
    (o[:5] * w).sum().backward()
    (ref[:5] * w).sum().backward()
    torch.testing.assert_close(v.grad, vt.grad, **TOL)


@pytest.mark.parametrize("grad", [True, False])
def test_a_written_diff_tensor_takes_its_cotangent_in_backward(sf, tdev, grad):
    x, w = leaf(4, tdev=tdev, grad=grad), torch.randn(4, device=tdev)
    y = torch.zeros(4, device=tdev)
    sf.square_into(x, y, slangspec.grid((4,)))
    torch.testing.assert_close(y, 3 * x.detach() ** 2, **TOL)
    assert y.requires_grad == grad
    if grad:
        (y * w).sum().backward()
        torch.testing.assert_close(x.grad, 6 * x.detach() * w, **TOL)
    with pytest.raises(ValueError, match=r"argument 2 \('y'\): the call writes this tensor"):
        sf.square_into(x, torch.zeros(4, device=tdev, requires_grad=True), slangspec.grid((4,)))


# --- keywords and generics -----------------------------------------------------------------


def test_keyword_arguments_bind_like_python(sf, tdev):
    x = torch.randn(6, device=tdev)
    want = sf.polynomial(1.0, 2.0, 3.0, x)
    torch.testing.assert_close(sf.polynomial(1.0, 2.0, x=x, c=3.0), want)
    torch.testing.assert_close(sf.polynomial(c=3.0, b=2.0, a=1.0, x=x), want)
    fid = "surface::polynomial"
    with pytest.raises(TypeError, match=f"{fid}: got an unexpected keyword argument 'y'"):
        sf.polynomial(1.0, 2.0, 3.0, y=x)
    with pytest.raises(TypeError, match=f"{fid}: got multiple values for argument 'a'"):
        sf.polynomial(1.0, 2.0, 3.0, a=x)
    with pytest.raises(TypeError, match=f"{fid}: missing argument 'c'"):
        sf.polynomial(1.0, b=2.0, x=x)


def test_signature_and_plan_take_what_the_call_takes(sf, tdev):
    x = torch.randn(6, device=tdev)
    positional = sf.polynomial.signature(1.0, 2.0, 3.0, x)
    assert sf.polynomial.signature(c=3.0, b=2.0, a=1.0, x=x) == positional
    assert sf.polynomial.plan(1.0, 2.0, x=x, c=3.0) == sf.polynomial.plan(1.0, 2.0, 3.0, x)
    with pytest.raises(TypeError, match="surface::polynomial: missing argument 'c'"):
        sf.polynomial.signature(1.0, b=2.0, x=x)
    # With a generator, _result= gives the call its shape, and so its signature.
    into = torch.empty(3, device=tdev)
    shaped = sf.polynomial.signature(1.0, 2.0, 3.0, slangspec.rand_float(), _result=into)
    assert shaped != sf.polynomial.signature(1.0, 2.0, 3.0, slangspec.rand_float())
    assert "_result[D1]" in shaped


def test_explicit_generics_have_one_spelling(sf, tdev):
    a, b = torch.randn(5, 4, device=tdev), torch.randn(5, 4, device=tdev)
    spaced, tight = getattr(sf, "add_generic< 4 >"), sf["add_generic<4>"]
    assert spaced is tight
    assert spaced.signature(a, b).startswith("surface::add_generic<4> call ")
    torch.testing.assert_close(spaced(a, b), a + b)


def test_generic_types_are_inferred_from_the_arguments(sf, tdev):
    a, b = leaf(7, tdev=tdev), leaf(7, tdev=tdev, grad=False)
    at, bt = twin(a), twin(b)
    assert sf.mul_add.plan(a, b, 2.0).result == "float"
    compare(sf.mul_add(a, b, 2.0), at * bt + 2.0, [a, b], [at, bt])
    with pytest.raises(TypeError, match=r"\('b'\): expected float for the generic type T"):
        sf.mul_add(a, b.half(), 2.0)
    with pytest.raises(TypeError, match=r"argument 3 \('c'\): expected a tensor or Python scalar"):
        sf.mul_add(a, b, slangspec.grid((7,)))


# --- explicit dimension mapping ------------------------------------------------------------


def test_map_places_dimensions_for_an_outer_product(sf, tdev):
    a, b = leaf(5, tdev=tdev), leaf(3, tdev=tdev)
    at, bt = twin(a), twin(b)
    y = sf.mul_add.map((0,), (1,))(a, b, 1.0)
    assert y.shape == (5, 3)
    compare(y, at[:, None] * bt[None, :] + 1.0, [a, b], [at, bt])
    by_name = sf.mul_add.map(b=(1,), a=(0,))(a=a.detach(), b=b.detach(), c=1.0)
    torch.testing.assert_close(by_name, y.detach())


def test_map_transposes_with_element_dimensions_after(sf, tdev):
    m, v = leaf(4, 6, 3, 3, tdev=tdev), leaf(4, 6, 3, tdev=tdev)
    mt, vt = twin(m), twin(v)
    y = sf.transform.map((1, 0), (1, 0))(m, v)
    assert y.shape == (6, 4, 3)
    ref = torch.einsum("ijrc,ijc->jir", mt, vt)
    compare(y, ref, [m, v], [mt, vt])


def test_map_writes_an_out_parameter_through_its_view(sf, tdev):
    a, b = torch.randn(5, device=tdev), torch.randn(3, device=tdev)
    res = torch.zeros(5, 3, device=tdev)
    sf.add_out.map((0,), (1,), (0, 1))(a, b, res)
    torch.testing.assert_close(res, a[:, None] + b[None, :])


def test_map_mistakes_name_the_parameter(sf, tdev):
    a = torch.randn(5, 2, device=tdev)
    with pytest.raises(ValueError, match=r"parameter 'a': the mapping \(0,\) names 1 dim"):
        sf.mul_add.map((0,))(a, a, 1.0)
    with pytest.raises(TypeError, match=r"map: the type mappings give generic T two values"):
        sf.mul_add.map("float", "half")
    with pytest.raises(TypeError, match=r"map: no parameter named 'z'"):
        sf.mul_add.map(z=(0,))
    with pytest.raises(TypeError, match=r"parameter 'b': expected a tuple of distinct"):
        sf.mul_add.map((0,), (1, 1))
    with pytest.raises(TypeError, match=r"parameter 'c': only a tensor fed elementwise"):
        sf.mul_add.map(c=(0,))(a, a, 1.0)
    # A value mapped to no dimension is one every call takes whole, as in slangpy.
    torch.testing.assert_close(sf.mul_add.map(c=())(a, a, 1.0), sf.mul_add(a, a, 1.0))
    one = torch.tensor(1.0, device=tdev)  # a tensor of no dimensions, mapped to none
    torch.testing.assert_close(sf.mul_add.map(c=())(a, a, one), sf.mul_add(a, a, 1.0))


# --- every grad mask of a function mixing the new forms ------------------------------------


def _scene(tdev, n, dtype=torch.float32, grads=(True, True, True)):
    return {
        "body": {
            "mass": leaf(n, tdev=tdev, dtype=dtype, grad=grads[0]),
            "frame": leaf(n, 3, 3, tdev=tdev, dtype=dtype, grad=grads[1]),
        },
        "weights": leaf(4, tdev=tdev, dtype=dtype, grad=grads[2]),
    }


def _twins(scene):
    return {
        "body": {k: twin(v) for k, v in scene["body"].items()},
        "weights": twin(scene["weights"]),
    }


def _leaves(scene):
    return [scene["body"]["mass"], scene["body"]["frame"], scene["weights"]]


def _energy(s, x, k):
    c = torch.einsum("nij,nj->ni", s["body"]["frame"], x[:, :3])
    return s["body"]["mass"] * (c * c).sum(1) * k + (s["weights"] * x).sum(1)


MASKS = ["".join(m) for m in itertools.product("01", repeat=4) if "1" in m]


@pytest.mark.parametrize("mask", MASKS)
def test_every_grad_mask_of_struct_matrix_array_and_scalar(sf, tdev, mask):
    grads = tuple(g == "1" for g in mask)
    scene = _scene(tdev, 3, grads=grads[:3])
    x = leaf(3, 4, tdev=tdev, grad=grads[3])
    twins, xt = _twins(scene), twin(x)
    y = sf.energy(scene, x, 0.75)
    ref = _energy(twins, xt, 0.75)
    compare(y, ref, [*_leaves(scene), x], [*_leaves(twins), xt])


@pytest.mark.parametrize(
    "mask", ["".join(m) for m in itertools.product("01", repeat=3) if "1" in m]
)
def test_gradcheck_in_float64_of_struct_array_and_scalar(sf, kind, tdev, mask):
    if kind != "cuda":
        pytest.skip("float64 kernels are CUDA's")
    f64 = torch.float64
    mass = leaf(4, tdev=tdev, dtype=f64, grad=mask[0] == "1")
    frame = leaf(4, 3, 3, tdev=tdev, dtype=f64, grad=mask[0] == "1")
    x = leaf(4, 3, tdev=tdev, dtype=f64, grad=mask[1] == "1")
    k = leaf(4, tdev=tdev, dtype=f64, grad=mask[2] == "1")

    def f(mass, frame, x, k):
        return sf.energy_d({"mass": mass, "frame": frame}, x, k)

    assert torch.autograd.gradcheck(f, (mass, frame, x, k), eps=1e-6, atol=1e-5)


# --- torch.compile and a warm process ------------------------------------------------------


def test_matrices_arrays_and_keywords_compile_without_graph_breaks(sf, tdev):
    import torch._dynamo

    def f(m, v, a, b):
        return sf.transform(m=m, v=v).sum(1) + sf.add_arrays(a, b).sum(1)

    m, v, a, b = (
        leaf(4, 3, 3, tdev=tdev),
        leaf(4, 3, tdev=tdev),
        leaf(4, 5, tdev=tdev),
        leaf(5, tdev=tdev),
    )
    eager = f(m, v, a, b)
    eager.sum().backward()
    eager_grads = [t.grad.clone() for t in (m, v, a, b)]
    for t in (m, v, a, b):
        t.grad = None
    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(m, v, a, b)
    assert explained.graph_break_count == 0
    out = torch.compile(f, fullgraph=True)(m, v, a, b)
    torch.testing.assert_close(out, eager, **TOL)
    out.sum().backward()
    for t, g in zip((m, v, a, b), eager_grads, strict=True):
        torch.testing.assert_close(t.grad, g, **TOL)


def test_keywords_map_and_inferred_generics_compile_before_any_eager_call(cache_dir, tdev):
    import torch._dynamo

    fresh = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)

    def f(a, b, x):
        outer = fresh.mul_add.map(b=(1,), a=(0,))(a, b, c=1.0)
        return outer.sum(0) + fresh.polynomial(1.0, 2.0, x=x, c=3.0)

    a, b, x = leaf(5, tdev=tdev), leaf(3, tdev=tdev), leaf(3, tdev=tdev)
    torch._dynamo.reset()
    assert torch._dynamo.explain(f)(a, b, x).graph_break_count == 0
    assert not fresh._functions  # explain looked nothing up eagerly
    out = torch.compile(f, fullgraph=True)(a, b, x)
    out.sum().backward()
    grads = [t.grad.clone() for t in (a, b, x)]
    at, bt, xt = twin(a), twin(b), twin(x)
    ref = (at[:, None] * bt[None, :] + 1.0).sum(0) + (xt * xt + 2.0 * xt + 3.0)
    ref.sum().backward()
    torch.testing.assert_close(out, ref.detach(), **TOL)
    for g, t in zip(grads, (at, bt, xt), strict=True):
        torch.testing.assert_close(g, t.grad, **TOL)


WARM = """
import sys, torch, slangspec
from slangspec import codegen
from slangspec.runtime import backend, module
def refuse(*a, **k):
    raise AssertionError("a warm process must not resolve, generate or reflect")
if sys.argv[3:] == ["warm"]:
    codegen.kernel_source = refuse
    backend.SlangBackend.front_end = module.Module.function_overloads = refuse
sf = slangspec.load(sys.argv[2], cache_dir=sys.argv[1])
dev = "cuda" if sf.device_kind == "cuda" else "cpu"
torch.manual_seed(1)
scene = {"body": {"mass": torch.rand(3, device=dev), "frame": torch.rand(3, 3, 3, device=dev)},
         "weights": torch.rand(4, device=dev, requires_grad=True)}
x = torch.rand(3, 4, device=dev, requires_grad=True)
y = sf.energy(scene, x, 0.5)
y.sum().backward()
res = torch.empty(3, device=dev)
sf.add_out(torch.ones(3, device=dev), torch.ones(3, device=dev), res)
print(float(y.sum()), float(x.grad.sum()), float(res.sum()))
"""


def test_a_warm_process_runs_the_new_forms_from_the_cache(tmp_path):
    cache = str(tmp_path / "cache")
    path = str(SHADERS / "surface.slang")

    def run(*mode):
        out = python(WARM, cache, path, *mode)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.splitlines()[-1]  # slangpy may print warnings of its own first

    assert run() == run("warm")


def _every_output_form(sf, ray, n, a, b, v, s, x):
    """A struct dict and a struct result, an out and an inout parameter, a written
    differentiable tensor: each form a compiled graph must carry."""
    out = sf.reflect_ray(ray, n)
    res = torch.zeros_like(a)
    sf.add_out(a, b, res)
    v = v * 1.0
    sf.scale_inout(v, s)
    o = torch.zeros(x.shape[0] + 1, device=x.device)
    sf.write_wdiff(o, slangspec.grid(tuple(x.shape)), x)
    return out["dir"].sum(1) + 2 * out["origin"].sum(1) + res + v.sum(1) + o[:-1]


def test_structs_out_inout_and_written_tensors_compile_without_graph_breaks(cache_dir, tdev):
    import torch._dynamo

    fresh = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)  # nothing looked up
    n = torch.nn.functional.normalize(torch.randn(4, 3, device=tdev), dim=1)
    inputs = {
        "ray": {"origin": leaf(4, 3, tdev=tdev), "dir": leaf(4, 3, tdev=tdev)},
        "n": n,
        "a": leaf(4, tdev=tdev),
        "b": leaf(4, tdev=tdev, grad=False),
        "v": leaf(4, 3, tdev=tdev),
        "s": leaf(4, tdev=tdev),
        "x": leaf(4, tdev=tdev),
    }
    leaves = [*inputs["ray"].values(), inputs["a"], inputs["v"], inputs["s"], inputs["x"]]

    def f(**kw):
        return _every_output_form(fresh, **kw)

    torch._dynamo.reset()
    assert torch._dynamo.explain(f)(**inputs).graph_break_count == 0
    compiled = torch.compile(f, fullgraph=True)(**inputs)
    w = torch.randn(4, device=tdev)
    (compiled * w).sum().backward()
    grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    eager = _every_output_form(fresh, **inputs)
    (eager * w).sum().backward()
    torch.testing.assert_close(compiled, eager, **TOL)
    for t, g in zip(leaves, grads, strict=True):
        torch.testing.assert_close(t.grad, g, **TOL)


def test_output_routes_known_from_the_function_are_the_plans_outputs(sf, tdev):
    from slangspec.specializer.plan import output_routes

    t, t3, g = torch.ones(4, device=tdev), torch.ones(4, 3, device=tdev), slangspec.grid((4,))
    calls = [
        (sf.reflect_ray, ({"origin": t3, "dir": t3}, t3)),
        (sf.add_out, (t, t, t)),
        (sf.scale_inout, (t3, t)),
        (sf.write_wdiff, (t, g, t)),
        (sf.polynomial, (1.0, 2.0, 3.0, t)),
        (sf.write_rw, (t, g, 1.0)),
    ]
    for fn, args in calls:
        plan = fn.plan(*args)
        assert output_routes(*fn.overloads) == tuple((o.source, o.path) for o in plan.outputs), fn


def test_a_nested_struct_dict_compiles_and_differentiates(sf, tdev):
    scene, x = _scene(tdev, 3, grads=(True, False, True)), leaf(3, 4, tdev=tdev)
    twins, xt = _twins(scene), twin(x)
    y = torch.compile(lambda s, x: sf.energy(s, x, 0.75), fullgraph=True)(scene, x)
    compare(y, _energy(twins, xt, 0.75), [*_leaves(scene), x], [*_leaves(twins), xt])


def test_a_spaced_generic_name_is_one_function_under_torch_compile_too(cache_dir, tdev):
    fresh = slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)  # nothing looked up

    def f(a, b):
        return fresh["add_generic< 2 >"](a, b) * 2

    a, b = torch.randn(3, 2, device=tdev), torch.randn(3, 2, device=tdev)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b), (a + b) * 2)


def test_a_function_with_no_parameters_runs(cache_dir, tdev):
    m = slangspec.load_source(
        "noparams",
        "float seven() { return 7.0; }\nT number<T : IInteger>() { return T(42); }",
        cache_dir=cache_dir,
    )
    assert m.seven().item() == 7.0 and m.seven().device.type == tdev
    got = m["number<int>"]()
    assert got.dtype == torch.int32 and got.item() == 42


def test_a_python_scalar_takes_the_type_a_tensor_gives_its_generic(sf, kind, tdev):
    x = torch.arange(3.0, dtype=torch.float64, device=tdev)
    plan = sf.mul_add.plan(x, x, 1.5)
    assert [p.slang_type for p in plan.params] == ["double"] * 3 and plan.result == "double"
    with pytest.raises(TypeError, match=r"argument 2 \('b'\): expected double for the generic"):
        sf.mul_add(x, x.float(), 1.5)
    if kind == "cuda":
        torch.testing.assert_close(sf.mul_add(x, x, 1.5), x * x + 1.5)


def test_int64_tensors_and_python_ints_pass_as_int64_t(cache_dir, tdev):
    m = slangspec.load_source(
        "wide",
        "int64_t add64(int64_t a, int64_t b) { return a + b; }\n"
        "T gadd<T : IInteger>(T a, T b) { return a + b; }\n",
        cache_dir=cache_dir,
    )
    a = torch.tensor([1, 2, 3], device=tdev)  # torch's default integer dtype, int64
    b = torch.tensor([10, 20, 2**40], device=tdev)
    assert m.add64(a, b).dtype == torch.int64
    assert torch.equal(m.add64(a, b), a + b)
    assert torch.equal(m.gadd(a, b), a + b)
    assert torch.equal(m.add64(a, 2**33), a + 2**33)
