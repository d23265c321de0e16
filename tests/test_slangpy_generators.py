"""slangpy 0.43.1's generator and grid tests (slangpy_tests/test_custom_types.py and
test_grid.py), called through slangspec with torch tensors, each value compared with what
slangpy itself gives for the same call on a device of the same kind, and with the expectation
slangpy's test states.

Not ported as slangpy wrote them:

- ``test_grid_implicit_shape``: ``grid(n)`` with no extents (slangpy's ``grid(2)``, a 2-D grid
  taking its shape from the call) has no spelling here: ``slangspec.grid(n)`` is a 1-D grid of
  ``n`` points.
- ``test_grid_generic_vectors``: slangpy skips it itself.
- ``test_rand_float_uniformity``: its kernel counts into an ``RWByteAddressBuffer``, which no
  torch tensor binds to; the histogram of the same million floats is taken in torch instead.
- ``test_rand_soa``: a struct result comes back as a dict, which ``_result=`` does not take; a
  grid argument shapes the call instead.
- ``test_range``: a Python ``range`` is not an argument here; ``grid((5,), offset=(10,),
  stride=(2,))`` is its spelling, checked against slangpy's ``range``.
- ``test_wang_seq_seeds``: 2**20 threads in place of 3840 * 2160, to keep lavapipe's run short
  (no duplicate turns up in either).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import slangpy as spy
import torch
from conftest import DEVICE_KIND
from slangpy.experimental.gridarg import grid as spy_grid
from slangpy.types.randfloatarg import RandFloatArg
from slangpy.types.wanghasharg import WangHashArg, calc_wang_hash_numpy

import slangspec


@pytest.fixture(scope="module")
def spy_device():
    kind = spy.DeviceType.cuda if DEVICE_KIND == "cuda" else spy.DeviceType.vulkan
    device = spy.create_device(type=kind)
    yield device
    device.close()


_modules: dict[str, tuple[object, object]] = {}


@pytest.fixture(autouse=True, scope="module")
def _modules_dropped_with_the_file():
    """The file's modules hold their Slang sessions: they go before its devices are released."""
    yield
    _modules.clear()


def both(cache_dir, spy_device, source: str):
    """The module of ``source`` through slangspec and through slangpy."""
    if source not in _modules:
        name = f"gen{len(_modules)}"
        ours = slangspec.load_source(name, source, cache_dir=cache_dir)
        theirs = spy.Module.load_from_source(spy_device, name, source)
        _modules[source] = (ours, theirs)
    return _modules[source]


def slangpy_result(module, fn: str, arg, shape, type_name: str, np_dtype, elements: int):
    """What slangpy writes calling ``fn(arg, _result=...)`` over ``shape``."""
    results = spy.Tensor.empty(
        module.device, shape=shape, dtype=module.layout.find_type_by_name(type_name)
    )
    getattr(module, fn)(arg, _result=results)
    return results.to_numpy().view(np_dtype).reshape(*shape, elements)


def ours_result(module, fn: str, arg, shape, dtype, elements: int, tdev, scalar: bool):
    result = torch.empty(*shape, *(() if scalar else (elements,)), dtype=dtype, device=tdev)
    getattr(module, fn)(arg, _result=result)
    return result.cpu().numpy().reshape(*shape, elements)


@pytest.mark.parametrize("dimensions", [-1, 0, 1, 2, 3])
@pytest.mark.parametrize("signed", [False, True])
def test_thread_id(cache_dir, spy_device, tdev, dimensions, signed):
    inttype = "int" if signed else "uint"
    if dimensions > 0:
        type_name, elements, dims = f"{inttype}{dimensions}", dimensions, dimensions
    elif dimensions == 0:
        type_name, elements, dims = inttype, 1, 1
    else:
        type_name, elements, dims = f"{inttype}3", 3, -1
    ours, theirs = both(
        cache_dir, spy_device, f"{type_name} thread_ids({type_name} input) {{ return input; }}"
    )
    got = ours_result(
        ours,
        "thread_ids",
        slangspec.thread_id(dims),
        (128,),
        torch.int32,
        elements,
        tdev,
        dimensions == 0,
    )
    expected = [[i, 0, 0][:elements] for i in range(128)]
    np.testing.assert_array_equal(got, expected)
    np_dtype = np.int32 if signed else np.uint32
    spy_got = slangpy_result(
        theirs, "thread_ids", spy.thread_id(dims), (128,), type_name, np_dtype, elements
    )
    np.testing.assert_array_equal(got, spy_got)


@pytest.mark.parametrize("dimensions", [-1, 1, 2, 3])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("array", [False, True])
def test_call_id(cache_dir, spy_device, tdev, dimensions, signed, array):
    inttype = "int" if signed else "uint"
    if dimensions > 0:
        type_name = f"int[{dimensions}]" if array else f"{inttype}{dimensions}"
        elements, dims = dimensions, dimensions
    else:
        type_name = "int[3]" if array else f"{inttype}3"
        elements, dims = 3, -1
    ours, theirs = both(
        cache_dir, spy_device, f"{type_name} call_ids({type_name} input) {{ return input; }}"
    )
    shape = (16,) * elements
    got = ours_result(
        ours, "call_ids", slangspec.call_id(dims), shape, torch.int32, elements, tdev, False
    )
    expected = np.indices(shape).reshape(elements, -1).T
    if not array and elements > 1:
        expected = np.flip(expected, axis=1)
    np.testing.assert_array_equal(got.reshape(-1, elements), expected)
    np_dtype = np.int32 if signed or array else np.uint32
    spy_got = slangpy_result(
        theirs, "call_ids", spy.call_id(dims), shape, type_name, np_dtype, elements
    )
    np.testing.assert_array_equal(got, spy_got)


def expected_hashes(count: int, width: int, seed: int, warmup: int, hash_seed: bool):
    """slangpy's test's own expectation, componentwise."""
    thread_hash = np.arange(count, dtype=np.uint32) * np.uint32(width)
    seeds = np.full((count,), seed, dtype=np.uint32)
    if hash_seed:
        seeds = calc_wang_hash_numpy(seeds)
    for _ in range(warmup):
        thread_hash = calc_wang_hash_numpy(thread_hash)
    hashes = [calc_wang_hash_numpy(thread_hash ^ seeds)]
    for _ in range(width - 1):
        hashes.append(calc_wang_hash_numpy(hashes[-1]))
    return np.stack(hashes, axis=-1)


WANG = "uint3 wang_hashes(uint3 input) { return input; }"
WANG_SCALAR = "uint wang_hashes(uint input) { return input; }"


@pytest.mark.parametrize("warmup", [0, 1, 2])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("seed", [0, 2640457667])
def test_wang_hash(cache_dir, spy_device, tdev, warmup, hash_seed, seed):
    ours, theirs = both(cache_dir, spy_device, WANG)
    arg = slangspec.wang_hash(3, seed=seed, warmup=warmup, hash_seed=hash_seed)
    got = ours_result(ours, "wang_hashes", arg, (16,), torch.int32, 3, tdev, False)
    got = got.view(np.uint32)
    np.testing.assert_array_equal(got, expected_hashes(16, 3, seed, warmup, hash_seed))
    spy_arg = WangHashArg(3, seed=seed, warmup=warmup, hash_seed=hash_seed)
    spy_got = slangpy_result(theirs, "wang_hashes", spy_arg, (16,), "uint3", np.uint32, 3)
    np.testing.assert_array_equal(got, spy_got)


@pytest.mark.parametrize("warmup", [0, 1, 2])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("seed", [0, 2640457667])
def test_wang_hash_scalar(cache_dir, spy_device, tdev, warmup, hash_seed, seed):
    ours, theirs = both(cache_dir, spy_device, WANG_SCALAR)
    arg = slangspec.wang_hash(warmup=warmup, hash_seed=hash_seed, seed=seed)
    got = ours_result(ours, "wang_hashes", arg, (16,), torch.int32, 1, tdev, True)
    got = got.view(np.uint32)
    np.testing.assert_array_equal(got, expected_hashes(16, 1, seed, warmup, hash_seed))
    spy_arg = spy.wang_hash(warmup=warmup, hash_seed=hash_seed, seed=seed)
    spy_got = slangpy_result(theirs, "wang_hashes", spy_arg, (16,), "uint", np.uint32, 1)
    np.testing.assert_array_equal(got, spy_got)


def sequential_hash_quality(hashes_of) -> float:
    hashes = hashes_of(0)
    combined = np.concatenate((hashes, hashes_of(1)))
    _, counts = np.unique(combined, return_counts=True)
    return 1 - np.sum(counts > 1) / len(hashes)


def test_wang_seq_seeds(cache_dir, spy_device, tdev):
    ours, _ = both(cache_dir, spy_device, WANG_SCALAR)

    def values(count: int, **options):
        def hashes_of(seed: int):
            result = torch.empty(count, dtype=torch.int32, device=tdev)
            ours.wang_hashes(slangspec.wang_hash(seed=seed, **options), _result=result)
            return result.cpu().numpy().view(np.uint32)

        return hashes_of

    assert sequential_hash_quality(values(16, warmup=0, hash_seed=False)) < 0.01
    assert sequential_hash_quality(values(16, warmup=0, hash_seed=True)) > 0.99999
    assert sequential_hash_quality(values(2**20, warmup=1, hash_seed=False)) > 0.99999


@pytest.mark.parametrize("warmup", [0, 1, 2])
@pytest.mark.parametrize("hash_seed", [False, True])
@pytest.mark.parametrize("seed", [0, 2640457667])
def test_rand_float(cache_dir, spy_device, tdev, warmup, hash_seed, seed):
    ours, theirs = both(cache_dir, spy_device, "float3 rand_float(float3 input) { return input; }")
    count = 1000
    arg = slangspec.rand_float(1.0, 3.0, 3, warmup=warmup, hash_seed=hash_seed, seed=seed)
    got = ours_result(ours, "rand_float", arg, (count,), torch.float32, 3, tdev, False)
    k = expected_hashes(count, 3, seed, warmup, hash_seed) & 0x7FFFFF
    np.testing.assert_allclose(got, 1.0 + 2.0 * (k / float(0x800000)), rtol=0, atol=1e-6)
    # slangpy's rand_float() drops warmup and hash_seed (it passes neither on to RandFloatArg),
    # so its test, like this one, builds the RandFloatArg itself.
    spy_arg = RandFloatArg(1.0, 3.0, 3, warmup=warmup, hash_seed=hash_seed, seed=seed)
    spy_got = slangpy_result(theirs, "rand_float", spy_arg, (count,), "float3", np.float32, 3)
    np.testing.assert_array_equal(got, spy_got)


def test_rand_float_uniformity(cache_dir, spy_device, tdev):
    bucket_size = 17
    ours, _ = both(cache_dir, spy_device, "float pick(int id, float value) { return value; }")
    count = 1000 * 1000
    values = ours.pick(slangspec.grid((count,)), slangspec.rand_float())
    buckets = torch.bincount((values * (bucket_size - 1)).int().cpu(), minlength=bucket_size)
    expected = count / (bucket_size - 1)
    for i in range(bucket_size - 1):
        assert abs(float(buckets[i]) - expected) / expected < 0.005
    assert buckets[bucket_size - 1] == 0


def test_rand_soa(cache_dir, spy_device, tdev):
    ours, _ = both(
        cache_dir,
        spy_device,
        """
struct Particle { float3 pos; float3 vel; };
Particle rand_float_soa(Particle input, int i) { return input; }
""",
    )
    particle = {
        "pos": slangspec.rand_float(-100.0, 100.0, 3, seed=0),
        "vel": slangspec.rand_float(0.0, np.pi * 2.0, 3, seed=0),
    }
    data = ours.rand_float_soa(particle, slangspec.grid((16,)))
    pos, vel = data["pos"].cpu().numpy(), data["vel"].cpu().numpy()
    assert np.all(pos >= -100.0) and np.all(pos <= 100.0)
    assert np.all(vel >= 0) and np.all(vel <= np.pi * 2)
    # Both fields hash the same thread ids with the same seed: the same unit floats.
    np.testing.assert_allclose((pos + 100.0) / 200.0, vel / (np.pi * 2.0), atol=1e-5)


def test_range(cache_dir, spy_device, tdev):
    ours, theirs = both(cache_dir, spy_device, "int range_test(int input) { return input; }")
    got = ours.range_test(slangspec.grid((5,), offset=(10,), stride=(2,)))
    assert got.tolist() == [10, 12, 14, 16, 18]
    spy_got = theirs.range_test(range(10, 20, 2)).storage.to_numpy().view("int32")
    np.testing.assert_array_equal(got.cpu().numpy(), spy_got)


def grid_test(
    cache_dir, spy_device, tdev, dims=2, datatype="array", stride=1, offset=0, scalar=False
):
    random.seed(42)
    shape = tuple(random.randint(5, 15) for _ in range(dims))
    type_name = f"int{dims}" if datatype == "vector" else f"int[{dims}]"
    source = f"{type_name} get({type_name} input) {{ return input; }}"
    ours, theirs = both(cache_dir, spy_device, source)
    offsets = (offset,) * dims
    strides = (stride,) * dims
    got = ours.get(slangspec.grid(shape, offset=offsets, stride=strides))
    expected = np.indices(shape).transpose(*range(1, dims + 1), 0) * stride + offset
    if datatype == "vector":
        expected = np.flip(expected, axis=-1)
    np.testing.assert_array_equal(got.cpu().numpy().reshape(*shape, dims), expected)
    results = spy.Tensor.empty(
        spy_device, shape=shape, dtype=theirs.layout.find_type_by_name(type_name)
    )
    theirs.get(spy_grid(shape, offset=offsets, stride=strides), _result=results)
    spy_got = results.to_numpy().view(np.int32).reshape(*shape, dims)
    np.testing.assert_array_equal(got.cpu().numpy().reshape(*shape, dims), spy_got)
    # slangpy's grid(dims): every extent the call's, here _result's.
    into = torch.empty(*shape, dims, dtype=torch.int32, device=tdev)
    ours.get(slangspec.grid((-1,) * dims, offset=offsets, stride=strides), _result=into)
    theirs.get(spy_grid(dims, offset=offsets, stride=strides), _result=results)
    spy_got = results.to_numpy().view(np.int32).reshape(*shape, dims)
    np.testing.assert_array_equal(into.cpu().numpy(), spy_got)


@pytest.mark.parametrize("dims", [1, 2, 3, 4])
@pytest.mark.parametrize("stride", [1, 3])
def test_grid_vectors(cache_dir, spy_device, tdev, dims, stride):
    grid_test(cache_dir, spy_device, tdev, dims=dims, datatype="vector", stride=stride)


@pytest.mark.parametrize("dims", [1, 3, 6])
def test_grid_arrays(cache_dir, spy_device, tdev, dims):
    grid_test(cache_dir, spy_device, tdev, dims=dims, datatype="array")


@pytest.mark.parametrize("offsets", [-100, 50])
def test_grid_offsets(cache_dir, spy_device, tdev, offsets):
    grid_test(cache_dir, spy_device, tdev, offset=offsets)


def test_grid_offsets_into_a_scalar_as_into_a_one_component_vector(cache_dir, spy_device, tdev):
    """slangpy 0.43.1 passes a scalar parameter the bare call index, dropping the offset and
    stride it applies to an ``int1``; here a scalar gets them as an ``int1`` does in slangpy."""
    source = """
int get_scalar(int input) { return input; }
int1 get_one(int1 input) { return input; }
"""
    ours, theirs = both(cache_dir, spy_device, source)
    got = ours.get_scalar(slangspec.grid((7,), offset=(-3,), stride=(4,)))
    np.testing.assert_array_equal(got.cpu().numpy(), np.arange(7) * 4 - 3)
    results = spy.Tensor.empty(
        spy_device, shape=(7,), dtype=theirs.layout.find_type_by_name("int1")
    )
    theirs.get_one(spy_grid((7,), offset=(-3,), stride=(4,)), _result=results)
    np.testing.assert_array_equal(got.cpu().numpy(), results.to_numpy().view(np.int32).reshape(7))


@pytest.mark.parametrize("stride", [1, 3])
def test_grid_error_pass_to_bad_vector_size(cache_dir, spy_device, stride):
    ours, _ = both(cache_dir, spy_device, "int3 get(int3 input) { return input; }")
    with pytest.raises(
        TypeError,
        match=r"argument 1 \('input'\): expected .* for vector<int,3>, got a 2-D grid",
    ):
        ours.get(slangspec.grid(shape=(2, 2), stride=(stride, stride)))


@pytest.mark.parametrize("stride", [1, 3])
def test_grid_error_pass_to_bad_array_size(cache_dir, spy_device, stride):
    ours, _ = both(cache_dir, spy_device, "int3 get(int[3] input) { return 0; }")
    with pytest.raises(
        TypeError, match=r"argument 1 \('input'\): expected .* for int\[3\], got a 2-D grid"
    ):
        ours.get(slangspec.grid(shape=(2, 2), stride=(stride, stride)))
