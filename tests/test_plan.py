"""Type resolution and code generation from plain data: no device, no compiler."""

import json

import pytest
import torch

from slangspec.codegen import backward_source, forward_source
from slangspec.signatures import call_signature
from slangspec.specializer import (
    FunctionInfo,
    ParamInfo,
    SpecializationPlan,
    TypeInfo,
    plan_from_signature,
)

FLOAT = TypeInfo("scalar", "float", "float")
FLOAT3 = TypeInfo("vector", "vector<float,3>", "float", (3,))
INT = TypeInfo("scalar", "int", "int")
DIFF1 = TypeInfo("tensor", "IDiffTensor<float, 1>", "float", (), "IDiffTensor", 1)


def fn(name, *params, returns=FLOAT, differentiable=True):
    ps = tuple(ParamInfo(n, t, nd, "in") for n, t, nd in params)
    return FunctionInfo("m", name, differentiable, ps, returns)


POLY = fn("poly", ("a", FLOAT, False), ("x", FLOAT, False))
SCALE = fn("scale", ("v", FLOAT3, False), ("s", FLOAT, False), returns=FLOAT3)
MIX = fn("mix", ("a", DIFF1, True), ("b", DIFF1, True), ("i", INT, True))


def test_plan_is_plain_json_data_and_round_trips():
    sig = "m::poly call [D1,S6,G1,V1] [D1,S6,G0,Vx]"
    plan = plan_from_signature(POLY, sig)
    text = plan.to_json()
    assert json.loads(text)["signature"] == sig
    assert SpecializationPlan.from_json(text) == plan
    a, x = plan.args
    assert (a.kind, a.broadcast, a.grad) == ("elementwise", True, True)
    assert (x.kind, x.broadcast, x.grad) == ("elementwise", False, False)
    assert plan.call_rank == 1
    assert plan.backward_masks == ("10",)


def test_plan_from_signature_matches_plan_from_tensors():
    a = torch.zeros(1, requires_grad=True)
    x = torch.zeros(100)
    assert plan_from_signature(POLY, call_signature("m::poly", (a, x))) == plan_from_signature(
        POLY, "m::poly call [D1,S6,G1,V1] [D1,S6,G0,Vx]"
    )


@pytest.mark.parametrize(
    ("shapes", "shared"),
    [
        ("[D1,S6,G1,V1] [D1,S6,G1,V1]", (False, False)),
        ("[D1,S6,G1,V1] [D2,S6,G1,V11]", (False, False)),
        ("[D1,S6,G1,V1] (f1)", (False, False)),
        ("[D1,S6,G1,V1] [D1,S6,G1,V4]", (True, False)),
        ("[D1,S6,G1,V1] [D2,S6,G1,V31]", (True, False)),
        ("[D1,S6,G1,Vx] [D2,S6,G1,V1x]", (False, False)),
        ("[D1,S6,G1,Vx] [D2,S6,G1,Vx1]", (True, True)),
        ("[D1,S6,G1,V1] (f2)", (True, False)),
    ],
)
def test_a_leaf_is_shared_only_where_another_argument_widens_the_call(shapes, shared):
    """Calls share a leaf's elements (its gradient is added into) along a dimension it lacks or
    holds once only where another argument may give that dimension an extent past 1; a call of
    extents all 1 stores its gradients."""
    plan = plan_from_signature(POLY, f"m::poly call {shapes}")
    assert tuple(a.broadcast for a in plan.args) == shared
    assert tuple(plan.accumulates(a) for a in plan.args) == shared


def test_every_grad_mask_of_the_trainable_arguments():
    f3 = fn("f3", ("a", FLOAT, False), ("b", FLOAT, False), ("c", FLOAT, False))
    plan = plan_from_signature(f3, "m::f3 call [D1,S6,G1,Vx] [D1,S6,G1,Vx] [D1,S6,G1,Vx]")
    assert sorted(plan.backward_masks) == ["001", "010", "011", "100", "101", "110", "111"]
    frozen = plan_from_signature(f3, "m::f3 call [D1,S6,G0,Vx] [D1,S6,G1,Vx] [D1,S6,G0,Vx]")
    assert frozen.backward_masks == ("010",)
    none = plan_from_signature(f3, "m::f3 call [D1,S6,G0,Vx] [D1,S6,G0,Vx] [D1,S6,G0,Vx]")
    assert none.backward_masks == ()


def test_vector_parameters_consume_the_last_dimension():
    plan = plan_from_signature(SCALE, "m::scale call [D2,S6,G1,Vx3] f")
    v, s = plan.args
    assert (v.elem, v.call_dims, s.kind) == ((3,), 1, "uniform")
    assert plan.returns.elem == (3,)
    with pytest.raises(ValueError, match=r"argument 1 \('v'\): expected a tensor whose trailing"):
        plan_from_signature(SCALE, "m::scale call [D2,S6,G1,Vx4] f")


def test_dtype_and_kind_errors_name_the_function_argument_and_expectation():
    with pytest.raises(
        TypeError,
        match=r"m::poly: argument 2 \('x'\): expected a float32 tensor, "
        r"got a float16 tensor",
    ):
        plan_from_signature(POLY, "m::poly call f [D1,S5,G0,Vx]")
    with pytest.raises(TypeError, match=r"m::poly: expected 2 arguments \(a, x\), got 1"):
        plan_from_signature(POLY, "m::poly call f")
    with pytest.raises(TypeError, match=r"argument 1 \('a'\): expected a float32 tensor of rank 1"):
        plan_from_signature(MIX, "m::mix call [D0,S6,G1,V] [D1,S6,G0,Vx] grid[D1]")
    with pytest.raises(TypeError, match=r"argument 3 \('i'\).*got a 2-D grid"):
        plan_from_signature(MIX, "m::mix call [D1,S6,G1,Vx] [D1,S6,G0,Vx] grid[D2]")


def test_backward_source_binds_only_masked_inputs_with_gradients():
    plan = plan_from_signature(MIX, "m::mix call [D1,S6,G1,Vx] [D1,S6,G1,Vx] grid[D1]")
    assert sorted(plan.backward_masks) == ["010", "100", "110"]
    src = backward_source(plan, "100")
    assert "uniform DiffTensor<float, 1> a0" in src
    assert "uniform PrimalTensor<float, 1> a1" in src
    # The tensor with a gradient reaches the function as the warp-summing IDiffTensor, adding
    # into the copy of its gradient the call's number picks.
    assert "slangspec_WaveDiffTensor<1> w0 = { a0, int(_tid.x / g0_copy[0] * g0_copy[1]) };" in src
    assert "uniform uint g0_copy[2]" in src and "g1_copy" not in src
    assert "bwd_diff(mix)(w0, a1, int(_idx[0]), _d);" in src
    fwd = forward_source(plan)
    assert "DiffTensor" not in fwd.replace("PrimalTensor", "")


def test_elementwise_backward_allocates_gradients_only_inside_the_mask():
    f3 = fn("f3", ("a", FLOAT, False), ("b", FLOAT, False), ("c", FLOAT, False))
    plan = plan_from_signature(f3, "m::f3 call [D1,S6,G1,Vx] [D1,S6,G1,Vx] [D1,S6,G1,Vx]")
    src = backward_source(plan, "101")
    assert "uniform float* g0" in src and "uniform float* g2" in src
    assert "g1" not in src
    with pytest.raises(ValueError, match="not a backward mask"):
        backward_source(plan, "000")


def test_a_function_description_survives_json_and_refuses_anything_else():
    assert FunctionInfo.from_json(json.loads(json.dumps(SCALE.to_json()))) == SCALE
    garbled = SCALE.to_json()
    garbled["params"][0]["type"]["shape"] = ["three"]
    with pytest.raises(ValueError):
        FunctionInfo.from_json(garbled)
    garbled["params"][0]["type"]["shape"] = [3]
    garbled["params"][0]["type"]["fields"] = [["a", {"kind": "scalar"}]]
    with pytest.raises(ValueError):
        FunctionInfo.from_json(garbled)
    with pytest.raises(ValueError):
        FunctionInfo.from_json({**SCALE.to_json(), "extra": 1})
    with pytest.raises(ValueError):
        FunctionInfo.from_json({**SCALE.to_json(), "differentiable": "yes"})
    with pytest.raises((TypeError, KeyError)):
        FunctionInfo.from_json({"module": "m"})
