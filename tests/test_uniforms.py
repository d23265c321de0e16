"""Kernel parameter blocks as plain data: what a cached CUDA binary is launched with."""

import json
import struct
import time
from pathlib import Path

import pytest
import torch

import slangspec
from slangspec.codegen.uniforms import UniformBlock, Unpackable

SHADERS = Path(__file__).parent / "shaders"


def sample(t, seed: int):
    """A value for every leaf of a layout type, distinct per leaf."""
    if "pointer" in t:
        return 0x1000 + seed
    if "scalar" in t:
        return seed % 2 == 1 if t["scalar"] == "?" else seed
    if "array" in t:
        return [sample(t["element"], seed + k) for k in range(t["array"])]
    return {name: sample(ft, seed + 10 * k) for k, (name, _, ft) in enumerate(t["struct"])}


def expected(t, off: int, value):
    """(offset, struct code, value) for every leaf, walked independently of the packer."""
    if "pointer" in t:
        return [(off, "<Q", value)]
    if "scalar" in t:
        return [(off, "<" + t["scalar"], value)]
    if "array" in t:
        out = []
        for k in range(t["array"]):
            out += expected(t["element"], off + k * t["stride"], value[k])
        return out
    out = []
    for name, field_off, ft in t["struct"]:
        out += expected(ft, off + field_off, value[name])
    return out


def test_layouts_survive_json_and_pack_every_value_at_its_offset(cache_dir, tdev):
    m = slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)
    x = torch.randn(6, 3, device=tdev, requires_grad=True)
    m.scale3(x, 0.5).sum().backward()
    m.poly(torch.ones(1, device=tdev), torch.ones(4, 2, device=tdev))
    a, b = (torch.randn(8, device=tdev, requires_grad=True) for _ in range(2))
    m.mix2(a, b, slangspec.grid((8,))).sum().backward()  # tensor structs: packable on CUDA
    blocks = []
    for fn in (m.scale3, m.poly, m.mix2):
        for spec in fn._specs.values():
            kernels = [spec._forward, *spec._backward.values()]
            blocks += [k.block for k in kernels if k.block is not None]
    assert len(blocks) >= 3
    for block in blocks:
        layout = json.loads(json.dumps(block.layout))
        values = {name: sample(t, 3 * k) for k, (name, _, t) in enumerate(layout["params"])}
        again = UniformBlock(layout)
        assert again.size == block.size
        packed = bytes(again.pack(values))
        assert packed == bytes(block.pack(values))
        leaves = [
            leaf for name, off, t in layout["params"] for leaf in expected(t, off, values[name])
        ]
        assert leaves
        for off, code, value in leaves:
            (read,) = struct.unpack_from(code, packed, off)
            assert read == value, (off, code)


@pytest.mark.parametrize(
    "params",
    [
        [["x", 0, {"scalar": "s"}]],  # a struct code that is not a scalar's
        [["x", 0, {"scalar": "f"}], ["y", 2, {"scalar": "f"}]],  # fields overlap
        [["x", 16, {"scalar": "d"}]],  # past the block's size
    ],
)
def test_tampered_layouts_are_refused(params):
    with pytest.raises(Unpackable):
        UniformBlock({"size": 16, "params": params})


def _floats(count: int, stride: int = 4) -> dict:
    return {"array": count, "stride": stride, "element": {"scalar": "f"}}


@pytest.mark.parametrize(
    "layout",
    [
        {"size": 4 << 17, "params": [["x", 0, _floats(1 << 17)]]},  # far too many leaves
        {"size": 64 * 260, "params": [["x", 0, _floats(64, 260) | {"element": _floats(65)}]]},
        {"size": 16, "params": [["x", 0, _floats(-1)]]},  # a negative count
        {"size": 16, "params": [["x", 0, _floats("2")]]},  # counts, offsets, sizes are ints
        {"size": 16, "params": [["x", 0, _floats(2.0)]]},
        {"size": 16, "params": [["x", 0, _floats(True)]]},
        {"size": 16, "params": [["x", 0, _floats(2, "4")]]},
        {"size": 16, "params": [["x", "0", {"scalar": "f"}]]},
        {"size": 16, "params": [["x", 0, {"struct": [["y", 4.0, {"scalar": "f"}]]}]]},
        {"size": "16", "params": [["x", 0, {"scalar": "f"}]]},
        {"size": 16, "params": [["x", 0, {"scalar": ["f"]}]]},
        {"size": 16, "params": [[0, 0, {"scalar": "f"}]]},  # names are strings
        {"size": 16, "params": [["x", 0, {"bits": 3}]]},  # no such type
        {"size": 16, "params": "x"},
        {"size": 16, "params": [["x", 0]]},
        {"size": None, "params": [["x", 0, {"scalar": "f"}]]},
    ],
)
def test_oversized_or_malformed_layouts_are_refused_before_packing(layout):
    start = time.perf_counter()
    with pytest.raises(Unpackable):
        UniformBlock(layout)
    assert time.perf_counter() - start < 0.5


def test_deeply_nested_layouts_are_refused():
    t = {"scalar": "f"}
    for _ in range(100):
        t = {"struct": [["f", 0, t]]}
    with pytest.raises(Unpackable):
        UniformBlock({"size": 4, "params": [["x", 0, t]]})


def test_names_in_a_layout_stay_data():
    name = "x'] + __import__('os').getpid() + kw['"
    block = UniformBlock({"size": 4, "params": [[name, 0, {"scalar": "i"}]]})
    buf = bytearray(4)
    block.pack_into(buf, {name: 7})
    assert struct.unpack("<i", buf) == (7,)
