"""slangpy 0.43.1's ``test_type_conformances.py`` (from the wheel's ``tests/slangpy_tests``),
called through slangspec: the struct that implements ``IVal`` is chosen at the call, by the
dict's ``"_type"``, for a parameter of the interface type.

Not ported as written: ``getval()`` makes its object itself (``createDynamicObject<IVal>``) and
slangpy links the conformance into the program (``fn.type_conformances([...])``); slangspec
links none, so the function takes the ``IVal`` as a parameter, and the call names its struct.
"""

from __future__ import annotations

import pytest

import slangspec

SOURCE = r"""
import "slangpy";

interface IVal {
    int get();
}

struct Get10 : IVal {
    int get() {
        return 10;
    }
}

struct Get20 : IVal {
    int get() {
        return 20;
    }
}

int getval(IVal val) {
    return val.get();
}
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("conforming", SOURCE, cache_dir=cache_dir)


def test_conformance(m):
    assert m.getval({"_type": "Get10"}).item() == 10
    assert m.getval({"_type": "Get20"}).item() == 20


def test_conformance_fail(m):
    with pytest.raises(TypeError, match=r"^conforming::getval: argument 1 \('val'\): cannot pass"):
        m.getval({})
    with pytest.raises(
        TypeError,
        match=r"^conforming::getval: argument 1 \('val'\): expected '_type' to name a struct of "
        r"the module that conforms to IVal \(Get10, Get20\), got 'IVal', which is not one$",
    ):
        m.getval({"_type": "IVal"})
