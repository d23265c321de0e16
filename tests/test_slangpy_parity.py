"""The call forms slangspec added for slangpy's users, each run through slangpy 0.43.1 on a
device of the same kind (CUDA on a GPU machine, else Vulkan) with the same values, and the two
results compared: integer widths, overloads, interface parameters given a concrete type, a
struct's methods on a batch of instances (``[mutating]`` ones written back), vectors from
tensors' trailing dimensions and numpy results.

Forms slangpy 0.43.1 refuses, so that there is nothing to compare against, and which are
tested against torch instead: a tuple for a vector (``test_tuple_arguments.py``), ``int8_t``
parameters (``test_call_surface.py``), a generic vector length inferred from a tensor
(``test_slangpy_generics.py``) and arrays of structs (``test_struct_arrays.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
import slangpy as spy
import torch
from conftest import DEVICE_KIND, TORCH_DEVICE

import slangspec

SOURCE = """
int16_t neg16(int16_t x) { return -x; }
uint8_t inc8(uint8_t x) { return x + uint8_t(1); }
int64_t add64(int64_t a, int64_t b) { return a + b; }
uint64_t mul64(uint64_t a, uint64_t b) { return a * b; }
uint16_t inc16(uint16_t a) { return a + uint16_t(1); }
uint triple(uint a) { return a * 3u; }

float twice(float x) { return 2 * x; }
float twice(int x) { return 3 * x; }

float3 scale3(float3 v, float k) { return v * k; }
float3 offset3(float3 v, float3 d) { return v + d; }
int3 offset_ints(int3 v, int3 d) { return v + d; }
float pick(float x) { return 1; }
float halve(float x) { return x / 2; }
float pick(float3 x) { return 3; }
int packed_ints(int2 a, uint3 b, bool2 c) { return a.x * 10 + a.y + int(b.z) + (c.y ? 100 : 0); }

interface IShape { float area(); };
struct Square : IShape { float side; float area() { return side * side; } };
struct Circle : IShape { float r; float area() { return 3.0 * r * r; } };
float area_of(IShape s) { return s.area(); }

struct Particle
{
    float3 pos;
    float3 vel;
    [mutating] void step(float dt) { pos += vel * dt; }
    float speed() { return length(vel); }
};
"""


@pytest.fixture(scope="module")
def spy_module():
    kind = spy.DeviceType.cuda if DEVICE_KIND == "cuda" else spy.DeviceType.vulkan
    device = spy.create_device(type=kind)
    yield spy.Module.load_from_source(device, "parity_forms", SOURCE)
    device.close()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return slangspec.load_source("parity_forms", SOURCE, cache_dir=tmp_path_factory.mktemp("cache"))


def _tensor(array: np.ndarray) -> torch.Tensor:
    """``array`` as a torch tensor on the test device; an unsigned type wider than a byte as
    the signed dtype of its width, which slangspec binds it to."""
    signed = {np.uint16: np.int16, np.uint32: np.int32, np.uint64: np.int64}
    kind = signed.get(array.dtype.type)
    held = array.view(kind) if kind is not None else array
    return torch.from_numpy(held.copy()).to(TORCH_DEVICE)


def _same(got: torch.Tensor, want: np.ndarray) -> None:
    got_array = got.cpu().numpy()
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got_array.view(want.dtype), want)
    else:
        np.testing.assert_allclose(got_array, want, rtol=1e-5, atol=1e-6)


INTEGERS = {
    "neg16": [np.array([1, -2, 3, 32767, -32768], dtype=np.int16)],
    "inc8": [np.array([0, 1, 254, 255], dtype=np.uint8)],
    "add64": [
        np.array([1, 2**40, -(2**62)], dtype=np.int64),
        np.array([3, 4, -(2**62)], dtype=np.int64),
    ],
    "mul64": [
        np.array([3, 2**40, 2**63], dtype=np.uint64),
        np.array([5, 2**20, 2], dtype=np.uint64),
    ],
    "inc16": [np.array([1, 40000, 65535], dtype=np.uint16)],
    "triple": [np.array([3, 2**31, 2**32 - 1], dtype=np.uint32)],
}


@pytest.mark.parametrize("function", sorted(INTEGERS))
def test_integer_widths_as_slangpy(spy_module, ours, function):
    args = INTEGERS[function]
    want = getattr(spy_module, function)(*args, _result="numpy")
    _same(ours[function](*map(_tensor, args)), want)


@pytest.mark.parametrize(
    "value", [np.array([1.5, -2.0], dtype=np.float32), np.array([2, -7], dtype=np.int32)]
)
def test_overload_chosen_as_slangpy_chooses(spy_module, ours, value):
    want = spy_module.twice(value, _result="numpy")
    _same(ours.twice(_tensor(value)), want)


def test_slangpys_vectors_as_slangpy(spy_module, ours):
    v = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    d = spy.float3(0.5, -1.0, 2.0)
    _same(ours.offset3(_tensor(v), d), spy_module.offset3(v, d, _result="numpy"))
    args = (spy.int2(3, 4), spy.uint3(0, 0, 7), spy.bool2(False, True))
    assert int(ours.packed_ints(*args)) == spy_module.packed_ints(*args) == 141


@pytest.mark.parametrize("k", [2.5, 2])
def test_a_number_for_a_vector_is_in_every_component_as_slangpy(spy_module, ours, k):
    v = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    _same(ours.offset3(_tensor(v), k), spy_module.offset3(v, k, _result="numpy"))
    want = spy_module.offset_ints(spy.int3(1, 2, 3), 4)
    assert ours.offset_ints(spy.int3(1, 2, 3), 4).tolist() == [want.x, want.y, want.z]


def test_a_number_for_overloads_of_a_scalar_and_a_vector_is_ambiguous_as_in_slangpy(
    spy_module, ours
):
    with pytest.raises(Exception, match="pick"):
        spy_module.pick(2.0)
    with pytest.raises(TypeError, match=r"is ambiguous: 2 of its 2 overloads take it"):
        ours.pick(2.0)


def test_a_list_or_vector_for_a_scalar_is_spread_over_the_call_as_slangpy(spy_module, ours):
    for values in ([1.0, 3.0, -5.0], spy.float3(1.0, 3.0, -5.0)):
        want = spy_module.halve(values, _result="numpy")
        _same(ours.halve(values), want)


def test_vectors_from_trailing_dimensions_and_numpy_results(spy_module, ours):
    v = np.random.default_rng(1).random((6, 3), dtype=np.float32)
    want = spy_module.scale3(v, 2.5, _result="numpy")
    got = ours.scale3(_tensor(v), 2.5, _result="numpy")
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_numpy_array_as_result_is_written_as_slangpy_writes_it(spy_module, ours):
    v = np.random.default_rng(2).random((4, 3), dtype=np.float32)
    want, got = np.zeros_like(v), np.zeros_like(v)
    spy_module.scale3(v, 2.0, _result=want)
    assert ours.scale3(v, 2.0, _result=got) is got
    np.testing.assert_allclose(got, want, rtol=1e-6)
    wrong = np.zeros((1000, 3), dtype=np.float64)
    with pytest.raises(
        ValueError,
        match=r"^parity_forms::scale3: _result: expected a numpy array of float32 and shape "
        r"\(4, 3\), got a ndarray of float64 and shape \(1000, 3\)$",
    ):
        ours.scale3(v, 2.0, _result=wrong)


def test_map_takes_numpy_arrays_and_python_scalars_as_slangpy(spy_module, ours):
    v = np.random.default_rng(3).random((2, 3), dtype=np.float32)
    d = np.random.default_rng(4).random((5, 3), dtype=np.float32)
    want = spy_module.offset3.map((0,), (1,))(v, d, _result="numpy")
    got = ours.offset3.map((0,), (1,))(v, d)
    assert tuple(got.shape) == (2, 5, 3)
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-6)
    want = spy_module.scale3.map((0,), ())(v, 2.0, _result="numpy")
    np.testing.assert_allclose(ours.scale3.map((0,), ())(v, 2.0).cpu().numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("shape, fields", [("Square", {"side": 1}), ("Circle", {"r": 1})])
def test_interface_given_a_concrete_type_as_slangpy(spy_module, ours, shape, fields):
    rng = np.random.default_rng(2)
    values = {name: rng.random(5, dtype=np.float32) for name in fields}
    want = spy_module.area_of({"_type": shape, **values}, _result="numpy")
    got = ours.area_of({"_type": shape, **{k: _tensor(v) for k, v in values.items()}})
    _same(got, want)


def _particles(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.random((7, 3), dtype=np.float32) for name in ("pos", "vel")}


def test_instance_method_as_slangpy(spy_module, ours):
    particles = _particles(3)
    want = spy_module.Particle.speed(particles, _result="numpy")
    this = {k: _tensor(v) for k, v in particles.items()}
    _same(ours["Particle.speed"](this), want)
    _same(slangspec.InstanceList(ours, "Particle", this).speed(), want)


def test_mutating_method_writes_back_as_slangpy(spy_module, ours):
    particles = _particles(4)
    device = spy_module.device_module.session.device
    theirs = {k: spy.Tensor.from_numpy(device, v.copy()) for k, v in particles.items()}
    spy_module.Particle.step(theirs, 0.5)
    this = {k: _tensor(v) for k, v in particles.items()}
    ours["Particle.step"](this, 0.5)
    for name in particles:
        _same(this[name], theirs[name].to_numpy())


ATOMIC = """
import slangpy;
void splat(int i, float v, AtomicTensor<float, 1> acc) { acc.add(i % 3, v); }
"""


def test_an_atomic_tensor_accumulates_as_slangpys(tmp_path):
    kind = spy.DeviceType.cuda if DEVICE_KIND == "cuda" else spy.DeviceType.vulkan
    index = np.arange(10, dtype=np.int32)
    values = np.linspace(-1.0, 2.0, 10, dtype=np.float32)
    device = spy.create_device(type=kind)
    try:
        theirs = spy.Module.load_from_source(device, "parity_atomic", ATOMIC)
        acc = spy.Tensor.zeros(device, shape=(3,), dtype="float")
        index_t, values_t = (spy.Tensor.from_numpy(device, a) for a in (index, values))
        theirs.splat(index_t, values_t, acc)
        want = acc.to_numpy()
    finally:
        device.close()
    ours = slangspec.load_source("parity_atomic", ATOMIC, cache_dir=tmp_path)
    got = torch.zeros(3, device=TORCH_DEVICE)
    ours.splat(_tensor(index), _tensor(values), got)
    _same(got, want)


CALL_IDS = """
import slangpy;
int2 where_am_i(float x)
{
    CallShapeInfo c = CallShapeInfo::get_call_id();
    return int2(c.shape[0], c.shape[1]);
}
float weighted(float x) { return x * float(CallShapeInfo::get_call_id().shape[0] + 1); }
"""


def test_a_called_function_reads_the_call_index_as_from_slangpy(tmp_path):
    kind = spy.DeviceType.cuda if DEVICE_KIND == "cuda" else spy.DeviceType.vulkan
    x = np.random.default_rng(2).random((2, 3), dtype=np.float32)
    device = spy.create_device(type=kind)
    try:
        theirs = spy.Module.load_from_source(device, "parity_call_ids", CALL_IDS)
        want_where = theirs.where_am_i(x, _result="numpy")
        want_weighted = theirs.weighted(x, _result="numpy")
    finally:
        device.close()
    ours = slangspec.load_source("parity_call_ids", CALL_IDS, cache_dir=tmp_path)
    _same(ours.where_am_i(_tensor(x)), want_where)
    _same(ours.weighted(_tensor(x)), want_weighted)
