from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slangspec
from slangspec.signatures import call_signature
from slangspec.signatures.scalars import DTYPE_OF_NUMBER, NUMBER_OF_DTYPE
from slangspec.signatures.text import (
    GridForm,
    ScalarForm,
    TensorForm,
    binds_converted,
    call_arguments,
    compose_call_signature,
    extent_class,
    extent_classes,
    format_arg,
    parse_arg,
    parse_call_signature,
)


def test_documented_examples():
    assert slangspec.signature(torch.zeros(1024, 3, requires_grad=True)) == "[D2,S6,G1,Vx3]"
    with torch.no_grad():
        assert slangspec.signature(torch.zeros(1024, 3, requires_grad=True)) == "[D2,S6,G0,Vx3]"
    assert slangspec.signature(torch.zeros(())) == "[D0,S6,G0,V]"
    assert slangspec.signature(torch.zeros(8, 5, dtype=torch.float16)) == "[D2,S5,G0,Vxx]"
    assert slangspec.signature(torch.zeros(8, 5)) == "[D2,S6,G0,Vxx]"


def test_extent_classes():
    assert slangspec.signature(torch.zeros(0, 1, 2, 3, 4, 5)) == "[D6,S6,G0,Vx1234x]"


def test_torch_scalar_type_numbers():
    expected = {
        torch.float32: 6,
        torch.float16: 5,
        torch.float64: 7,
        torch.int32: 3,
        torch.int64: 4,
        torch.bool: 11,
        torch.bfloat16: 15,
    }
    for dtype, number in expected.items():
        assert NUMBER_OF_DTYPE[str(dtype).removeprefix("torch.")] == number
        assert slangspec.signature(torch.zeros(9, dtype=dtype)) == f"[D1,S{number},G0,Vx]"


def test_grad_bit_needs_grad_mode():
    t = torch.zeros(3, requires_grad=True)
    assert ",G1," in slangspec.signature(t)
    with torch.no_grad():
        assert ",G0," in slangspec.signature(t)
    assert ",G0," in slangspec.signature(t.detach())


def test_other_argument_forms():
    assert slangspec.signature(1.5) == "f"
    assert slangspec.signature(3) == "i"
    assert slangspec.signature(True) == "b"
    assert slangspec.signature(slangspec.grid((16, 4))) == "grid[D2]"
    assert slangspec.signature(slangspec.grid(7)) == "grid[D1]"
    assert slangspec.signature(np.zeros((40, 3), np.float32)) == "np[D2,S6,G0,Vx3]"


def test_junk_is_a_type_error():
    with pytest.raises(TypeError, match="cannot pass a value of type str"):
        slangspec.signature("nope")
    with pytest.raises(TypeError, match="cannot pass a uint16 tensor; expected a float16, "):
        slangspec.signature(torch.zeros(2, dtype=torch.uint16))
    with pytest.raises(TypeError, match="cannot pass a sparse_coo tensor; expected a strided"):
        slangspec.signature(torch.zeros(2).to_sparse())
    with pytest.raises(ValueError, match="grid shape"):
        slangspec.grid(())


def test_grad_bit_is_per_tensor_in_call_signatures():
    a = torch.zeros(8, requires_grad=True)
    b = torch.zeros(8)
    yes_no = call_signature("m::f", (a, b))
    no_yes = call_signature("m::f", (b, a))
    assert yes_no != no_yes
    assert yes_no == "m::f call [D1,S6,G1,Vx] [D1,S6,G0,Vx]"
    assert no_yes == "m::f call [D1,S6,G0,Vx] [D1,S6,G1,Vx]"


dtypes = st.sampled_from(
    [
        torch.float32,
        torch.float16,
        torch.float64,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.bfloat16,
    ]
)
shapes = st.lists(st.integers(min_value=0, max_value=7), min_size=0, max_size=5)


def _classes(shape):
    return tuple(d if 1 <= d <= 4 else "x" for d in shape)


# The suite runs beside heavy compiles: a slow draw is the machine's load, not the strategy's.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes, dtypes, st.booleans(), shapes, dtypes, st.booleans())
def test_signature_is_injective_over_rank_dtype_grad_and_extent_classes(s1, d1, g1, s2, d2, g2):
    t1 = torch.zeros(s1, dtype=d1, requires_grad=g1 and d1.is_floating_point)
    t2 = torch.zeros(s2, dtype=d2, requires_grad=g2 and d2.is_floating_point)
    key1 = (len(s1), d1, t1.requires_grad, _classes(s1))
    key2 = (len(s2), d2, t2.requires_grad, _classes(s2))
    assert (slangspec.signature(t1) == slangspec.signature(t2)) == (key1 == key2)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes, dtypes, st.booleans())
def test_fixed_width_fields_precede_the_v_run(shape, dtype, grad):
    t = torch.zeros(shape, dtype=dtype, requires_grad=grad and dtype.is_floating_point)
    sig = slangspec.signature(t)
    fields = sig[1:-1].split(",")
    assert [f[0] for f in fields] == ["D", "S", "G", "V"]
    assert fields[-1] == "V" + "".join(str(c) for c in _classes(shape))
    form = parse_arg(sig)
    name = str(dtype).removeprefix("torch.")
    assert form == TensorForm(len(shape), name, t.requires_grad, fields[-1][1:])


def test_parse_round_trip():
    sig = call_signature("poly::f", (torch.zeros(4, 3), 1.0, 2, False, slangspec.grid((2, 2))))
    call = parse_call_signature(sig)
    assert call.function_id == "poly::f"
    assert call.args[1:] == (ScalarForm("f"), ScalarForm("i"), ScalarForm("b"), GridForm(2))
    assert set(DTYPE_OF_NUMBER) == set(NUMBER_OF_DTYPE.values())


@pytest.mark.parametrize(
    "bad",
    ["[D2,S6,G1,Vx]", "[D1,S99,G0,Vx]", "[D1,S6,G2,Vx]", "tensor", "[D1,S6,Vx]", "[D1,S6,G0,V5]"],
)
def test_malformed_argument_signatures(bad):
    with pytest.raises(ValueError, match="argument signature"):
        parse_arg(bad)


def test_a_dict_naming_its_struct_has_the_name_among_its_fields():
    value = {"radius": torch.zeros(3), "_type": "ns::Disc"}
    text = slangspec.signature(value)
    assert text == "{_type:@ns::Disc,radius:[D1,S6,G0,V3]}"
    assert format_arg(parse_arg(text)) == text
    assert call_signature("m::f", (value,)) == f"m::f call {text}"
    for bad in ("{_type:Disc,r:f}", "{_type:@a<b>,r:f}", "{r:@Disc}", "@Disc"):
        with pytest.raises(ValueError):
            parse_arg(bad)
    with pytest.raises(ValueError, match="field '_type': cannot name the struct 'a b'"):
        slangspec.signature({"_type": "a b"})


def test_malformed_call_signatures():
    with pytest.raises(ValueError, match="malformed call signature"):
        parse_call_signature("f call f")
    with pytest.raises(ValueError, match="unknown call mode"):
        parse_call_signature("m::f jump f")


def test_extent_rule():
    assert "".join(extent_class(d) for d in (0, 1, 2, 3, 4, 5, 1000)) == "x1234xx"
    assert extent_classes((0, 1, 2, 3, 4, 5)) == "x1234x"
    assert extent_classes(()) == ""


@pytest.mark.parametrize(
    "text",
    ["[D0,S6,G0,V]", "[D3,S5,G1,Vx2x]", "np[D2,S11,G0,V4x]", "grid[D3]", "f", "i", "b"],
)
def test_format_arg_is_the_inverse_of_parse_arg(text):
    assert format_arg(parse_arg(text)) == text


def test_parse_arg_is_the_inverse_of_format_arg():
    forms = [
        TensorForm(2, "bfloat16", True, "1x"),
        TensorForm(1, "int64", False, "3", numpy=True),
        GridForm(1),
        ScalarForm("i"),
    ]
    for form in forms:
        assert parse_arg(format_arg(form)) == form


def test_composed_call_signatures_split_back():
    args = ("[D1,S6,G1,Vx]", "f", "grid[D2]")
    text = compose_call_signature("m::f", args)
    assert text == "m::f call [D1,S6,G1,Vx] f grid[D2]"
    call = parse_call_signature(text)
    assert (call.function_id, tuple(map(format_arg, call.args))) == ("m::f", args)
    assert call_arguments(text) == "[D1,S6,G1,Vx] f grid[D2]"
    assert call_arguments(compose_call_signature("m::g", ())) == ""
    assert parse_call_signature(compose_call_signature("m::g", ())).args == ()


def test_binds_converted():
    t = torch.zeros(3)
    assert binds_converted(call_signature("m::f", (t, np.zeros(3, np.float32))))
    listed = call_signature("m::f", ([{"a": t}, {"a": t}],))
    assert listed == "m::f call [{a:[D2,S6,G0,V23]}]" and binds_converted(listed)
    fields = "{a:[D2,S6,G0,V23]}"
    assert parse_arg(f"[{fields}]") == replace(parse_arg(fields), listed=True)
    assert format_arg(parse_arg("[{a:f}]")) == "[{a:f}]"
    assert not binds_converted(call_signature("np::inp", (t, 1.0, {"a": t}, slangspec.grid(3))))
