"""slangpy 0.43.1's ``test_return_types.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec with torch tensors in place of slangpy's buffers and ``ValueRef``, and the
``_result=`` forms slangpy takes besides a buffer to write into.

Not ported: ``test_returnvalue`` returns a class registered in slangpy's marshalling registry
(``tr.PYTHON_TYPES[Foo]``); slangspec has no such registry, and its nearest form,
``return_type(numpy.ndarray)``, is tested here instead.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import slangspec

SOURCE = """
struct MyStruct { int x; int y; };
struct MyStruct2 { MyStruct a; MyStruct b; }
int add_numbers(int a, int b) { return a + b; }
MyStruct make_struct(int a, int b) { return { a, b }; }
MyStruct2 make_nested(int a, int b) { return { { a, b }, { b, a } }; }
void bump(inout MyStruct v) { v.x += 1; v.y -= 1; }
void nothing(int a) {}
[Differentiable]
float square(float x) { return x * x; }
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("return_types", SOURCE, cache_dir=cache_dir)


def test_returnvalue_as_numpy(m):
    res = m.add_numbers.return_type(np.ndarray)(4, 5)
    assert isinstance(res, np.ndarray) and res.dtype == np.int32 and int(res) == 9


def test_return_struct_as_dict(m):
    res = m.make_struct(4, 5)
    assert isinstance(res, dict)
    assert int(res["x"]) == 4 and int(res["y"]) == 5
    assert m.make_struct(4, 5, _result=dict).keys() == {"x", "y"}


def test_return_nested_struct_as_dict(m):
    res = m.make_nested(4, 5)
    assert isinstance(res, dict)
    assert (int(res["a"]["x"]), int(res["a"]["y"])) == (4, 5)
    assert (int(res["b"]["x"]), int(res["b"]["y"])) == (5, 4)
    as_numpy = m.make_nested(4, 5, _result="numpy")
    assert isinstance(as_numpy["b"]["y"], np.ndarray) and int(as_numpy["b"]["y"]) == 4


def test_inout_struct_as_dict(m, tdev):
    v = {
        "x": torch.tensor(5, dtype=torch.int32, device=tdev),
        "y": torch.tensor(10, dtype=torch.int32, device=tdev),
    }
    m.bump(v)
    assert (int(v["x"]), int(v["y"])) == (6, 9)


@pytest.mark.parametrize("kind", [np.ndarray, "numpy"])
def test_a_numpy_result_of_a_vectorized_call_is_detached(m, tdev, kind):
    x = torch.linspace(-1, 1, 9, device=tdev, requires_grad=True)
    res = m.square(x, _result=kind)
    assert isinstance(res, np.ndarray) and res.shape == (9,)
    np.testing.assert_allclose(res, (x.detach() ** 2).cpu().numpy(), rtol=1e-6)


def test_torch_tensor_is_the_default_form_and_keeps_autograd(m, tdev):
    x = torch.linspace(-1, 1, 9, device=tdev, requires_grad=True)
    y = m.square.return_type(torch.Tensor)(x)
    assert isinstance(y, torch.Tensor)
    y.sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())


def test_forms_that_do_not_fit_are_refused_by_name(m):
    with pytest.raises(TypeError, match=r"^return_types::add_numbers: _result: expected a tensor"):
        m.add_numbers(4, 5, _result="tensorflow")
    with pytest.raises(TypeError, match=r"^return_types::add_numbers: _result: expected .*list"):
        m.add_numbers(4, 5, _result=list)
    with pytest.raises(TypeError, match=r"add_numbers: _result: the function returns a tensor"):
        m.add_numbers(4, 5, _result=dict)
    with pytest.raises(TypeError, match=r"^return_types::nothing: _result: .* returns nothing"):
        m.nothing(4, _result="numpy")


def test_a_numpy_result_is_refused_under_torch_compile(m, tdev):
    x = torch.linspace(-1, 1, 9, device=tdev)

    @torch.compile(fullgraph=True)
    def f(x):
        return m.square(x, _result="numpy")

    with pytest.raises(Exception, match="numpy results are for calls torch does not compile"):
        f(x)
