"""slangpy 0.43.1's ``test_interfaces.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec: an interface parameter (a generic interface's, ``ITest<float, 2>``) takes a
struct the call names, which slangpy names through a marshall registered for a Python class
and slangspec through the dict's ``"_type"``, as slangpy's dicts name structs.

Not ported: the custom ``Marshall`` itself (``FooImpl``, registered in slangpy's type
registry): slangspec has no type registry; a dict names the struct instead.
"""

from __future__ import annotations

import pytest

import slangspec

SOURCE = """
import slangpy;

interface ITest<T, let N : int> {
    float sentinel();
}
interface IFoo {}

struct Test2f : ITest<float, 2> {
    float sentinel() { return 42.0f; }
}
struct Test3i : ITest<int, 3> {
    float sentinel() { return 0.0f; }
}

float bar(IFoo x) {
    return 0.0f;
}
float foo(ITest<float, 2> x) {
    return x.sentinel();
}
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("interfaces", SOURCE, cache_dir=cache_dir)


def test_specialization(m):
    test2f, test3i = {"_type": "Test2f"}, {"_type": "Test3i"}
    with pytest.raises(TypeError, match=r"conforms to IFoo \(the module declares none\)"):
        m.bar(test3i)
    with pytest.raises(TypeError, match=r"conforms to ITest<float, 2> \(Test2f\), got 'Test3i'"):
        m.foo(test3i)
    assert m.foo(test2f).item() == 42.0
