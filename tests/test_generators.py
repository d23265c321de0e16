"""Generators (call_id, thread_id, wang_hash, rand_float) and grid offsets and strides: their
signatures, values (against a reference of slangpy's formulas; tests/test_slangpy_generators.py
compares them with slangpy itself), gradients, torch.compile, the cache, warming and errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import slangspec
from slangspec.settings import compile_counts
from slangspec.signatures.generators import wang_hash_of
from slangspec.signatures.text import parse_arg, parse_call_signature

SOURCE = """
import slangpy;
uint3 hash3(uint3 v) { return v; }
uint hash1(uint v) { return v; }
float3 rand3(float3 v) { return v; }
int3 ids3(int3 v) { return v; }
int at(int2 p) { return p.x * 100 + p.y; }
float pick(int i, float v) { return v; }
[Differentiable]
float scaled(float r, float x) { return r * x; }
float half_noise(half v) { return v; }
int[2] pair(int[2] v) { return v; }
void put(out uint v, uint h) { v = h; }
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("generators", SOURCE, cache_dir=cache_dir)


def reference_hashes(count: int, width: int, seed: int, warmup: int = 0, hash_seed: bool = True):
    """slangpy's per-thread hashes, from its wanghasharg.slang: thread i starts from i * width,
    is hashed ``warmup`` times, xor the (hashed) seed, then hashed once per component."""
    seed = wang_hash_of(seed) if hash_seed else seed
    rows = []
    for i in range(count):
        h = (i * width) % 2**32
        for _ in range(warmup):
            h = wang_hash_of(h)
        h ^= seed
        row = []
        for _ in range(width):
            h = wang_hash_of(h)
            row.append(h)
        rows.append(row)
    return np.array(rows, dtype=np.uint64)


def test_signature_forms_name_the_kind_and_dims_never_values():
    assert slangspec.signature(slangspec.call_id()) == "call_id"
    assert slangspec.signature(slangspec.thread_id(2)) == "thread_id[D2]"
    assert slangspec.signature(slangspec.wang_hash(seed=1, warmup=3)) == "wang_hash"
    assert slangspec.signature(slangspec.wang_hash(seed=2)) == "wang_hash"
    assert slangspec.signature(slangspec.rand_float(-1.0, 5.0, 3)) == "rand_float[D3]"
    assert slangspec.signature(slangspec.grid((2, 3))) == "grid[D2]"
    assert slangspec.signature(slangspec.grid((2, 3), offset=(0, 0), stride=(1, 1))) == "grid[D2]"
    assert slangspec.signature(slangspec.grid((2, 3), stride=(2, 2))) == "grid[D2,strided]"
    assert slangspec.signature(slangspec.grid((2, 3), offset=(5, 5))) == "grid[D2,strided]"
    assert slangspec.signature({"a": slangspec.rand_float()}) == "{a:rand_float}"
    for text in ("call_id", "wang_hash[D3]", "grid[D2,strided]", "{a:rand_float[D2]}"):
        from slangspec.signatures.text import format_arg

        assert format_arg(parse_arg(text)) == text


def test_the_result_shape_joins_the_signature_only_for_generators(m, tdev):
    r = torch.empty(4, 3, dtype=torch.int32, device=tdev)
    assert m.hash3.signature(slangspec.wang_hash(3)) == "generators::hash3 call wang_hash[D3]"
    m.hash3(slangspec.wang_hash(3), _result=r)
    assert "generators::hash3 call wang_hash[D3] _result[D1]" in m.hash3._specs
    call = parse_call_signature("generators::hash3 call wang_hash[D3] _result[D1]")
    assert call.args[-1] == slangspec.signatures.text.ResultForm(1)


def test_wang_hash_values(m, tdev):
    for warmup, hash_seed, seed in [(0, True, 7), (2, False, 2640457667), (1, True, 0)]:
        r = torch.empty(40, 3, dtype=torch.int32, device=tdev)
        m.hash3(slangspec.wang_hash(seed=seed, warmup=warmup, hash_seed=hash_seed), _result=r)
        got = r.cpu().numpy().view(np.uint32)
        np.testing.assert_array_equal(got, reference_hashes(40, 3, seed, warmup, hash_seed))
        r1 = torch.empty(40, dtype=torch.int32, device=tdev)
        m.hash1(slangspec.wang_hash(seed=seed, warmup=warmup, hash_seed=hash_seed), _result=r1)
        expected = reference_hashes(40, 1, seed, warmup, hash_seed)[:, 0]
        np.testing.assert_array_equal(r1.cpu().numpy().view(np.uint32), expected)


def test_rand_float_values_lie_in_the_range(m, tdev):
    r = torch.empty(500, 3, device=tdev)
    m.rand3(slangspec.rand_float(-2.0, 6.0, seed=11, warmup=1), _result=r)
    hashes = reference_hashes(500, 3, 11, warmup=1)
    expected = -2.0 + 8.0 * ((hashes & 0x7FFFFF) / float(0x800000))
    np.testing.assert_allclose(r.cpu().numpy(), expected, rtol=0, atol=1e-5)
    assert r.min() >= -2.0 and r.max() < 6.0


def test_call_id_and_thread_id_values(m, tdev):
    ids = m.ids3(
        slangspec.call_id(), _result=torch.empty(2, 3, 4, 3, dtype=torch.int32, device=tdev)
    )
    expected = np.flip(np.indices((2, 3, 4)).transpose(1, 2, 3, 0), axis=-1)
    np.testing.assert_array_equal(ids.cpu().numpy(), expected)
    ids2 = m.ids3(slangspec.call_id(), _result=torch.empty(2, 5, 3, dtype=torch.int32, device=tdev))
    expected2 = np.stack([np.indices((2, 5))[1], np.indices((2, 5))[0], np.zeros((2, 5))], -1)
    np.testing.assert_array_equal(ids2.cpu().numpy(), expected2)
    pairs = m.pair(
        slangspec.call_id(), _result=torch.empty(3, 2, 2, dtype=torch.int32, device=tdev)
    )
    np.testing.assert_array_equal(pairs.cpu().numpy(), np.indices((3, 2)).transpose(1, 2, 0))
    tid = m.ids3(
        slangspec.thread_id(), _result=torch.empty(2, 3, 3, dtype=torch.int32, device=tdev)
    )
    expected3 = np.stack([np.arange(6), np.zeros(6), np.zeros(6)], -1).reshape(2, 3, 3)
    np.testing.assert_array_equal(tid.cpu().numpy(), expected3)


def test_a_grid_shapes_a_call_with_a_generator(m, tdev):
    got = m.pick(slangspec.grid((6,)), slangspec.rand_float(seed=3))
    expected = (reference_hashes(6, 1, 3)[:, 0] & 0x7FFFFF) / float(0x800000)
    np.testing.assert_allclose(got.cpu().numpy(), expected, rtol=0, atol=1e-6)


def test_a_grid_extent_of_minus_one_is_the_calls(m, tdev):
    rows, cols = np.indices((2, 3))
    into = torch.empty(2, 3, dtype=torch.int32, device=tdev)
    got = m.at(slangspec.grid((-1, -1), offset=(5, 0)), _result=into)
    assert got is into
    np.testing.assert_array_equal(got.cpu().numpy(), cols * 100 + rows + 5)
    assert m.at.signature(slangspec.grid((-1, 3)), _result=into).endswith("grid[D2] _result[D2]")
    # Where no other argument gives the extent, the dimension has one point.
    np.testing.assert_array_equal(m.at(slangspec.grid((-1, 3))).cpu().numpy(), [[0, 100, 200]])


def test_grid_offset_and_stride(m, tdev):
    got = m.at(slangspec.grid((2, 3), offset=(10, -20), stride=(2, 3)))
    rows, cols = np.indices((2, 3))
    # x is the innermost dimension: (cols * 3 - 20), y the outer one (rows * 2 + 10)
    np.testing.assert_array_equal(got.cpu().numpy(), (cols * 3 - 20) * 100 + rows * 2 + 10)
    pairs = m.pair(slangspec.grid((2, 3), offset=(1, 2), stride=(5, 7)))
    expected = np.stack([rows * 5 + 1, cols * 7 + 2], -1)
    np.testing.assert_array_equal(pairs.cpu().numpy(), expected)


def test_a_generator_gets_no_gradient_and_the_backward_sees_its_values(m, tdev):
    x = torch.arange(1.0, 9.0, device=tdev, requires_grad=True)
    y = m.scaled(slangspec.rand_float(1.0, 2.0, seed=5), x)
    r = y.detach() / x.detach()
    assert ((r >= 1.0) & (r < 2.0)).all()
    y.sum().backward()
    torch.testing.assert_close(x.grad, r)


def test_under_torch_compile_fullgraph(m, tdev):
    def calls(x: torch.Tensor):
        h = m.hash3(
            slangspec.wang_hash(seed=9, warmup=2),
            _result=torch.empty(5, 3, dtype=torch.int32, device=tdev),
        )
        ids = m.ids3(
            slangspec.call_id(), _result=torch.empty(2, 2, 3, dtype=torch.int32, device=tdev)
        )
        g = m.at(slangspec.grid((2, 2), offset=(1, 1), stride=(3, 3)))
        s = m.scaled(slangspec.rand_float(0.5, 1.5, seed=4), x)
        return h, ids, g, s

    x = torch.linspace(1.0, 2.0, 8, device=tdev, requires_grad=True)
    eager = calls(x)
    compiled = torch.compile(calls, fullgraph=True)(x)
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(a, b)
    compiled[3].sum().backward()
    torch.testing.assert_close(x.grad, eager[3].detach() / x.detach())


def test_a_fresh_load_finds_every_generator_call_cached(tmp_path, tdev):
    cache = str(tmp_path / "cache")

    def calls(mod):
        mod.hash3(
            slangspec.wang_hash(3, seed=1),
            _result=torch.empty(4, 3, dtype=torch.int32, device=tdev),
        )
        mod.ids3(slangspec.call_id(), _result=torch.empty(2, 2, 3, dtype=torch.int32, device=tdev))
        mod.rand3(slangspec.rand_float(), _result=torch.empty(4, 3, device=tdev))
        mod.at(slangspec.grid((2, 2), stride=(2, 2)))
        return mod.hash3(
            slangspec.thread_id(), _result=torch.empty(3, 3, dtype=torch.int32, device=tdev)
        )

    first = calls(slangspec.load_source("generators", SOURCE, cache_dir=cache))
    before = {k: compile_counts[k] for k in ("specialize", "codegen")}
    again = calls(slangspec.load_source("generators", SOURCE, cache_dir=cache))
    assert {k: compile_counts[k] for k in before} == before
    torch.testing.assert_close(first, again)


def test_a_manifest_warms_generator_calls(tmp_path, tdev):
    from slangspec.aot.warm import parse_manifest, warm

    (tmp_path / "g.slang").write_text(SOURCE.replace("import slangpy;", ""))
    (tmp_path / "warm.toml").write_text(
        '[[module]]\npath = "g.slang"\n[[module.function]]\nname = "hash3"\n'
        'specializations = [["wang_hash[3]", "_result[1]"], ["thread_id"]]\n'
        '[[module.function]]\nname = "at"\nspecializations = [["grid[2] strided"]]\n'
    )
    items = parse_manifest(tmp_path / "warm.toml")
    assert [i.signature for i in items] == [
        "g::hash3 call wang_hash[D3] _result[D1]",
        "g::hash3 call thread_id",
        "g::at call grid[D2,strided]",
    ]
    cache = str(tmp_path / "cache")
    assert [r.status for r in warm(items, cache_dir=cache)] == ["built"] * 3
    mod = slangspec.load(tmp_path / "g.slang", cache_dir=cache)
    before = compile_counts["specialize"], compile_counts["codegen"]
    mod.hash3(slangspec.wang_hash(3), _result=torch.empty(2, 3, dtype=torch.int32, device=tdev))
    mod.at(slangspec.grid((2, 2), offset=(1, 1)))
    assert (compile_counts["specialize"], compile_counts["codegen"]) == before


def fails(exc: type[Exception], message: str):
    return pytest.raises(exc, match=re.escape(message))


def test_a_generator_into_a_parameter_it_cannot_fill_names_the_argument(m, tdev):
    with fails(TypeError, "generators::pick: argument 2 ('v'): expected a parameter call_id fills"):
        m.pick(slangspec.grid((2,)), slangspec.call_id())
    with fails(TypeError, "argument 1 ('v'): expected a parameter rand_float fills (a float, or"):
        m.hash1(slangspec.rand_float(), _result=torch.empty(2, dtype=torch.int32, device=tdev))
    with fails(TypeError, "argument 1 ('v'): expected a parameter rand_float fills"):
        m.half_noise(slangspec.rand_float())
    with fails(
        TypeError,
        "generators::pair: argument 1 ('v'): expected a parameter thread_id fills (an int or "
        "uint, or a vector of 1-3), got int[2]",
    ):
        m.pair(slangspec.thread_id())
    with fails(
        TypeError,
        "generators::put: argument 1 ('v'): expected an int32 tensor, a Python int or a 1-D grid "
        "for uint, got wang_hash()",
    ):
        m.put(slangspec.wang_hash(), 1)


def test_wrong_dims_name_the_argument(m, tdev):
    with fails(
        TypeError,
        "generators::hash3: argument 1 ('v'): expected a parameter of 2 components for "
        "wang_hash(dims=2), got vector<uint,3>",
    ):
        m.hash3(slangspec.wang_hash(2), _result=torch.empty(2, 3, dtype=torch.int32, device=tdev))
    with fails(TypeError, "argument 1 ('v'): expected a parameter of 1 component for rand_float"):
        m.rand3(slangspec.rand_float(dim=1))


def test_call_id_needs_a_call_shape_of_its_rank(m, tdev):
    with fails(
        TypeError,
        "generators::ids3: argument 1 ('v'): call_id into vector<int,3> needs a call shape, "
        "from another argument or from _result=, got a 0-D call",
    ):
        m.ids3(slangspec.call_id())
    with fails(
        TypeError,
        "generators::ids3: argument 1 ('v'): call_id into vector<int,3> needs an int[N], or an "
        "intN or int(N+1) vector, for an N-D call, got a 1-D call",
    ):
        m.ids3(slangspec.call_id(), _result=torch.empty(4, 3, dtype=torch.int32, device=tdev))


def test_bad_grid_offsets_and_strides(m):
    with fails(ValueError, "grid stride must be 2 ints (one per dimension of the shape)"):
        slangspec.grid((2, 3), stride=(1,))
    with fails(ValueError, "grid offset must be 1 int (one per dimension of the shape)"):
        slangspec.grid((2,), offset=(1.5,))
    with fails(TypeError, "generators::pair: argument 1 ('v'): expected an int32 tensor"):
        m.pair(slangspec.grid((2, 3, 4), stride=(1, 2, 3)))
    with fails(ValueError, "grid offset must be 1 int (one per dimension of the shape) from"):
        slangspec.grid((2,), offset=1.5)


def test_a_grid_shape_is_ints_and_nothing_else():
    for shape, shown in (
        (2.5, "2.5"),
        ((True,), "(True,)"),
        ((2, False), "(2, False)"),
        (None, "None"),
        ("ab", "'ab'"),
        ((), "()"),
        ((2, -2), "(2, -2)"),
    ):
        with fails(
            ValueError,
            "grid shape must be a non-negative int or a sequence of one or more (-1 for an "
            f"extent the other arguments give), got {shown}",
        ):
            slangspec.grid(shape)
    assert slangspec.grid(torch.Size([2, 3])).shape == slangspec.grid([2, 3]).shape == (2, 3)


def test_bad_generator_options():
    with fails(ValueError, "wang_hash: seed must be an int from 0 to 4294967295, got -1"):
        slangspec.wang_hash(seed=-1)
    with fails(ValueError, "rand_float: warmup must be a non-negative int, got 1.5"):
        slangspec.rand_float(warmup=1.5)
    with fails(ValueError, "call_id: dims must be an int; for a call index of a given shape"):
        slangspec.call_id((2, 2))
    with fails(ValueError, "thread_id: dims must be -1 (the parameter's) or a positive int"):
        slangspec.thread_id(0)
    with fails(ValueError, "rand_float: min must be a number, got 'a'"):
        slangspec.rand_float("a")
    float32 = "a finite number a float32 can hold (from -3.4028235e+38 to 3.4028235e+38)"
    for options, shown in (
        ({"max": 1e300}, "max must be {}, got 1e+300"),
        ({"min": -(10**400)}, "min must be {}, got -1" + "0" * 400),
        ({"min": float("nan")}, "min must be {}, got nan"),
        ({"max": float("inf")}, "max must be {}, got inf"),
    ):
        with fails(ValueError, "rand_float: " + shown.format(float32)):
            slangspec.rand_float(**options)
    slangspec.rand_float(-3.4028235e38, 3.4028235e38)  # float32's ends, as numpy shows them
    for make in (slangspec.wang_hash, slangspec.rand_float):
        for bad in ("no", 2, None):
            with fails(ValueError, f"{make.kind}: hash_seed must be True or False, got {bad!r}"):
                make(hash_seed=bad)
    assert slangspec.wang_hash(hash_seed=0).hash_seed is False


def test_explain_names_a_stored_generator_call_and_how_another_differs(tmp_path, tdev):
    from slangspec.aot.explain import explain

    mod = slangspec.load_source("explained", SOURCE, cache_dir=str(tmp_path / "cache"))
    mod.at(slangspec.grid((2, 2), offset=(1, 0)))
    mod.hash3(slangspec.wang_hash(3), _result=torch.empty(2, 3, dtype=torch.int32, device=tdev))
    assert explain(mod.at, "explained::at call grid[D2,strided]")["hit"]
    assert explain(mod.hash3, "explained::hash3 call wang_hash[D3] _result[D1]")["hit"]
    missed = explain(mod.at, "explained::at call grid[D2]")
    assert not missed["hit"]
    assert "kind of argument 1: grid[D2,strided] stored, grid[D2] asked" in str(missed["nearest"])
