"""Kernel parameter blocks as plain data: what a cached CUDA binary is launched with."""

import json
from pathlib import Path

import torch

import slangspec
from slangspec.uniforms import UniformBlock

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


def test_layouts_survive_json_and_pack_the_same_bytes(cache_dir, tdev):
    m = slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)
    x = torch.randn(6, 3, device=tdev, requires_grad=True)
    m.scale3(x, 0.5).sum().backward()
    m.poly(torch.ones(1, device=tdev), torch.ones(4, 2, device=tdev))
    blocks = []
    for fn in (m.scale3, m.poly):
        for spec in fn._specs.values():
            kernels = [spec._forward, *spec._backward.values()]
            blocks += [k.block for k in kernels if k.block is not None]
    assert len(blocks) >= 3
    for block in blocks:
        layout = json.loads(json.dumps(block.layout))
        values = {name: sample(t, 3 * k) for k, (name, _, t) in enumerate(layout["params"])}
        again = UniformBlock(layout)
        assert again.size == block.size
        assert bytes(again.pack(values)) == bytes(block.pack(values))
