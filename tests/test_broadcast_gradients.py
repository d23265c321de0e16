"""Gradients of arguments that many calls share (broadcast over the call: an extent of 1, fewer
dimensions than the call, a struct's or an array of structs' fields given once), which the
backward kernel adds in place into storage of the argument's shape, compared with the same
maths in torch; and ``SLANGSPEC_DETERMINISTIC=1``, which stores them per call for torch to
sum in a fixed order."""

from __future__ import annotations

import pytest
import torch

import slangspec

SOURCE = """
[Differentiable]
float times(float a, float b) { return a * b; }

struct Gaussian : IDifferentiable
{
    float2 center;
    float scale;
    float3 color;
}

[Differentiable]
float shade(Gaussian g, float2 pix)
{
    float2 d = pix - g.center;
    return (g.color.x + 2.0 * g.color.y + 3.0 * g.color.z) * exp(-dot(d, d) * g.scale);
}

[Differentiable]
float3 splat(Gaussian g[4], float2 pix)
{
    float3 c = float3(0.0);
    [ForceUnroll]
    for (int i = 0; i < 4; i++)
    {
        float2 d = pix - g[i].center;
        c += g[i].color * exp(-dot(d, d) * g[i].scale);
    }
    return c;
}
"""
TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums over thousands of calls, in another order


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("broadcast_gradients", SOURCE, cache_dir=cache_dir)


def leaf(*shape: int, tdev: str) -> torch.Tensor:
    return torch.rand(shape, device=tdev).requires_grad_()


def twin(t: torch.Tensor) -> torch.Tensor:
    """A float64 copy of ``t`` for the reference maths."""
    return t.detach().double().requires_grad_()


def pixels(n: int, tdev: str) -> torch.Tensor:
    axis = torch.linspace(0.0, 1.0, n, device=tdev)
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1)


def gaussians(tdev: str, *lanes: int) -> dict[str, torch.Tensor]:
    return {
        "center": leaf(*lanes, 2, tdev=tdev),
        "scale": (torch.rand(lanes, device=tdev) * 4 + 1).requires_grad_(),
        "color": leaf(*lanes, 3, tdev=tdev),
    }


def shade_ref(g: dict[str, torch.Tensor], pix: torch.Tensor) -> torch.Tensor:
    d = pix - g["center"]
    weight = torch.tensor([1.0, 2.0, 3.0], dtype=pix.dtype, device=pix.device)
    return (g["color"] * weight).sum(-1) * torch.exp(-(d * d).sum(-1) * g["scale"])


def splat_ref(g: dict[str, torch.Tensor], pix: torch.Tensor) -> torch.Tensor:
    d = pix[..., None, :] - g["center"]  # (..., 4, 2)
    w = torch.exp(-(d * d).sum(-1) * g["scale"])  # (..., 4)
    return (g["color"] * w[..., None]).sum(-2)


def same_gradients(ours: list[torch.Tensor], theirs: list[torch.Tensor]) -> None:
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad.double(), b.grad, **TOL)


@pytest.mark.parametrize(
    "a_shape", [(96, 1), (80,), (), (1, 1)], ids=["extent 1", "fewer dims", "one element", "1x1"]
)
def test_a_tensor_broadcast_over_the_call(m, tdev, a_shape):
    a, b = leaf(*a_shape, tdev=tdev), leaf(96, 80, tdev=tdev)
    ref_a, ref_b = twin(a), twin(b)
    y = m.times(a, b)
    y.sum().backward()
    (ref_a * ref_b).sum().backward()
    same_gradients([a, b], [ref_a, ref_b])


def test_a_struct_every_call_reads(m, tdev):
    g, pix = gaussians(tdev), pixels(64, tdev)
    ref = {k: twin(v) for k, v in g.items()}
    y = m.shade(g, pix)
    torch.testing.assert_close(y.double(), shade_ref(ref, pix.double()), **TOL)
    (y * y).sum().backward()
    (shade_ref(ref, pix.double()) ** 2).sum().backward()
    same_gradients(list(g.values()), list(ref.values()))


def one_dict_per_struct(g: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """slangpy's spelling of an array of structs: a list of dicts, views of ``g``'s tensors."""
    return [{k: v[i] for k, v in g.items()} for i in range(len(g["scale"]))]


@pytest.mark.parametrize(
    "spelled", [lambda g: g, one_dict_per_struct], ids=["dict of fields", "list of dicts"]
)
def test_an_array_of_structs_every_call_reads_eagerly_and_compiled(m, tdev, spelled):
    import torch._dynamo

    g, pix = gaussians(tdev, 4), pixels(48, tdev)
    ref = {k: twin(v) for k, v in g.items()}
    m.splat(spelled(g), pix).sum().backward()
    splat_ref(ref, pix.double()).sum().backward()
    same_gradients(list(g.values()), list(ref.values()))
    eager = [t.grad.clone() for t in g.values()]
    for t in g.values():
        t.grad = None
    torch._dynamo.reset()
    torch.compile(lambda g, p: m.splat(g, p).sum(), fullgraph=True)(spelled(g), pix).backward()
    for t, want in zip(g.values(), eager, strict=True):
        torch.testing.assert_close(t.grad, want, **TOL)


def test_per_call_arguments_are_stored_and_shared_ones_added(m, tdev):
    pix = pixels(64, tdev)
    g = {
        "center": leaf(1, 1, 2, tdev=tdev),  # extents of 1: shared
        "scale": (torch.rand(64, 64, device=tdev) * 4 + 1).requires_grad_(),  # one per pixel
        "color": leaf(3, tdev=tdev),  # without the call's dimensions: shared
    }
    source = slangspec.codegen.backward_source(m.shade.plan(g, pix), "1110")
    assert "slangspec_accumulate(g0, " in source
    assert "g1[_tid.x] = " in source
    assert "slangspec_accumulate(g2, " in source
    ref = {k: twin(v) for k, v in g.items()}
    m.shade(g, pix).sum().backward()
    shade_ref(ref, pix.double()).sum().backward()
    same_gradients(list(g.values()), list(ref.values()))


def test_deterministic_gradients_are_the_same_bit_for_bit(m, tdev, monkeypatch):
    g, pix = gaussians(tdev, 4), pixels(48, tdev)

    def gradients() -> list[torch.Tensor]:
        for t in g.values():
            t.grad = None
        m.splat(g, pix).sum().backward()
        return [t.grad.clone() for t in g.values()]

    in_place = gradients()
    monkeypatch.setenv("SLANGSPEC_DETERMINISTIC", "1")
    first, second = gradients(), gradients()
    for a, b, c in zip(first, second, in_place, strict=True):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, **TOL)
