"""The table of Python values (``slangspec.signatures.values``): a kind of Python value is one
row. A row registered here, for a type this file defines, is all a call, its signature, the
traced path's packing and a manifest's spelling need of it; unregistered, the type is refused
again."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import slangspec
from slangspec.aot.warm import arg_signature, parse_manifest
from slangspec.runtime.traced import pack, unpack
from slangspec.signatures import values
from slangspec.signatures.value_row import Packing, Unpacking, ValueRow, spec_text

SOURCE = "float scale(float k, float x) { return k * x; }\n"


class Celsius:
    """A Python type slangspec does not know: a number of degrees."""

    def __init__(self, degrees: float) -> None:
        self.degrees = degrees

    def __float__(self) -> float:
        return float(self.degrees)


class CelsiusRow(ValueRow):
    """Degrees pass as a float: form ``f``, packed as ``c`` with a float, spelled
    ``celsius``."""

    python_types = (Celsius,)
    letters = "c"
    spelling = "celsius"

    def form(self, value: Any, grad_on: bool) -> str:
        return "f"

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        packing.floats.append(float(value))
        packing.kinds.append("c" + where)

    def unpack(self, kind: str, source: Unpacking) -> Any:
        return Celsius(next(source.floats))

    def read_spec(self, spec: Any) -> str | None:
        return "f" if spec_text(spec) == "celsius" else None


@pytest.fixture
def celsius():
    row = values.register(CelsiusRow())
    yield row
    values.unregister(row)


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("values_row", SOURCE, cache_dir=cache_dir)


def test_a_registered_row_is_all_a_new_python_type_needs(celsius, m, tdev, tmp_path):
    x = torch.arange(4.0, device=tdev)
    assert slangspec.signature(Celsius(2.5)) == "f"
    assert slangspec.signature({"t": Celsius(1)}) == "{t:f}"
    assert m.scale.signature(Celsius(2.5), x) == m.scale.signature(2.5, x)
    torch.testing.assert_close(m.scale(Celsius(2.5), x), 2.5 * x)
    torch.testing.assert_close(m.scale(x=x, k=Celsius(3)), 3.0 * x)

    tensors, _, kinds, floats, ints = pack([Celsius(2.5), x, {"t": Celsius(4)}])
    assert (kinds, floats, ints) == ("c,t,c@2.t", [2.5, 4.0], [])
    back = unpack(tensors, kinds, floats, ints)
    assert isinstance(back[0], Celsius) and back[0].degrees == 2.5
    assert back[1] is x and back[2]["t"].degrees == 4.0

    (tmp_path / "values_row.slang").write_text(SOURCE)
    (tmp_path / "warm.toml").write_text(
        '[[module]]\npath = "values_row.slang"\n[[module.function]]\nname = "scale"\n'
        'specializations = [["celsius", "f32[N]"]]\n'
    )
    (item,) = parse_manifest(tmp_path / "warm.toml")
    assert item.signature == "values_row::scale call f [D1,S6,G0,Vx]"
    with pytest.raises(ValueError, match=r"_result\[n\], celsius or an argument signature$"):
        arg_signature("kelvin")


def test_an_unregistered_row_leaves_its_type_refused_again(m, tdev):
    row = values.register(CelsiusRow())
    values.unregister(row)
    with pytest.raises(TypeError, match="cannot pass a value of type Celsius"):
        slangspec.signature(Celsius(1))
    with pytest.raises(slangspec.ArgumentTypeError, match=r"argument 1 \('k'\)"):
        m.scale(Celsius(1), torch.zeros(2, device=tdev))
    with pytest.raises(TypeError, match="in code torch compiles"):
        pack([Celsius(1)])
    with pytest.raises(ValueError, match=r"_result\[n\] or an argument signature$"):
        arg_signature("celsius")


def test_a_type_or_kind_letter_has_one_row(celsius):
    class Other(CelsiusRow):
        python_types = (complex,)

    with pytest.raises(ValueError, match="kind 'c' already has a row"):
        values.register(Other())
    with pytest.raises(ValueError, match="already has a row"):
        values.register(CelsiusRow())


VECTORS = "[Differentiable] float3 shift(float3 d, float3 v) { return v * v + d; }\n"


def test_slangpys_vectors_pass_as_the_tuple_of_their_components(cache_dir, tdev):
    import slangpy as spy

    m = slangspec.load_source("values_vectors", VECTORS, cache_dir=cache_dir)
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=tdev, requires_grad=True)
    d = spy.float3(0.5, -1.0, 2.0)
    assert slangspec.signature(d) == slangspec.signature((0.5, -1.0, 2.0)) == "(f3)"
    assert m.shift.signature(d, v) == m.shift.signature((0.5, -1.0, 2.0), v)
    y = m.shift(d, v)
    y.sum().backward()
    torch.testing.assert_close(y, v.detach() ** 2 + torch.tensor([0.5, -1.0, 2.0], device=tdev))
    torch.testing.assert_close(v.grad, 2 * v.detach())
    assert slangspec.signature(spy.int2(1, 2)) == "(i2)"
    assert slangspec.signature(spy.bool3(True, False, True)) == "(b3)"
    compiled = torch.compile(lambda d, v: m.shift(d, v), fullgraph=True)
    with pytest.raises(Exception, match=r"tuple of its components") as caught:
        compiled(d, v.detach())
    assert "slangpy.float3" in str(caught.value) or "slangpy.float3" in repr(caught.getrepr())
