"""slangpy 0.43.1's ``test_modules.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec on the wheel's ``test_modules.slang``: a struct's methods, read-only and
``[mutating]``, and a free function of the struct, on particles given as dicts of their fields'
tensors (slangpy's buffers of ``Particle`` are a tensor per field here).

Not ported as written: slangpy's ``m.Particle(...)`` constructor (``m["Particle.__init"]``)
returns the particle as a dict of its fields' tensors. slangpy's structure-of-arrays case passes
Python values for the fields a ``[mutating]`` method only reads, as the port does.
"""

from __future__ import annotations

import pytest
import torch
from slangpy_wheel import wheel_shader

import slangspec

SHADER = wheel_shader("test_modules.slang")


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load(SHADER, cache_dir=cache_dir)


def particles(tdev: str, position=(0.0, 0.0), velocity=(0.0, 0.0)) -> dict:
    """One particle, every field a tensor with a leading dimension of 1 (a call's)."""
    return {
        "position": torch.tensor([position], device=tdev),
        "velocity": torch.tensor([velocity], device=tdev),
        "size": torch.zeros(1, device=tdev),
        "material": {
            "color": torch.zeros(1, 3, device=tdev),
            "emission": torch.ones(1, 3, device=tdev),
        },
    }


def test_create_module(m):
    for name in ("Particle.reset", "Particle.calc_next_position", "Particle.update_position"):
        assert isinstance(m[name], slangspec.Function)
    assert isinstance(m.get_particle_quad, slangspec.Function)
    assert isinstance(m["Particle.__init"], slangspec.Function)


def assert_set_up(p: dict) -> None:
    """The particle as ``__init(float2(1, 2), float2(3, 4))`` makes it."""
    assert p["position"].tolist() == [[1.0, 2.0]]
    assert p["velocity"].tolist() == [[3.0, 4.0]]
    assert p["size"].tolist() == [0.5]
    assert p["material"]["color"].tolist() == [[1.0, 1.0, 1.0]]
    assert p["material"]["emission"].tolist() == [[0.0, 0.0, 0.0]]


def test_construct_particle(m, tdev):
    assert_set_up(
        m.Particle(torch.tensor([[1.0, 2.0]], device=tdev), torch.tensor([[3.0, 4.0]], device=tdev))
    )


def test_reset_particle_as_its_constructor(m, tdev):
    p = particles(tdev)
    m["Particle.reset"](p, (1.0, 2.0), (3.0, 4.0))
    assert_set_up(p)


def test_call_read_only_func(m, tdev):
    p = particles(tdev, velocity=(0.1, 0.2))
    torch.testing.assert_close(
        m["Particle.calc_next_position"](p, 0.5), torch.tensor([[0.05, 0.1]], device=tdev)
    )


def test_call_mutable_func(m, tdev):
    p = particles(tdev, velocity=(0.1, 0.2))
    m["Particle.update_position"](p, 0.5)
    torch.testing.assert_close(p["position"], torch.tensor([[0.05, 0.1]], device=tdev))


def test_read_back_with_global_func(m, tdev):
    p = particles(tdev, velocity=(0.0, 0.2))
    m["Particle.reset"](p, (0.0, 0.0), (0.0, 0.2))
    m["Particle.update_position"](p, 0.5)
    quad = m.get_particle_quad(p)
    want = [[[-0.5, 0.6], [0.5, 0.6], [0.5, -0.4], [-0.5, -0.4]]]
    torch.testing.assert_close(quad, torch.tensor(want, device=tdev))


def test_soa_particles(m, tdev):
    p = particles(tdev, velocity=(1.0, 0.0))
    p["size"] = torch.full((1,), 0.5, device=tdev)
    m["Particle.update_position"](p, 0.5)
    assert p["position"].tolist() == [[0.5, 0.0]]
    soa = {**p, "velocity": (1.0, 0.0)}
    m["Particle.update_position"](soa, 0.5)
    assert soa["position"].tolist() == [[1.0, 0.0]] and soa["velocity"] == (1.0, 0.0)
