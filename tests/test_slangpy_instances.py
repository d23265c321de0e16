"""slangpy 0.43.1's ``test_instances.py`` (from the wheel's ``tests/slangpy_tests``), called
through slangspec: a struct's methods on a batch of instances given as a dict of torch tensors
(``slangspec.InstanceList``, or ``m["Particle.reset"]`` with the dict as ``this``), a
``[mutating]`` method's ``this`` written back into them, and gradients through torch autograd
in place of slangpy's ``bwds``. A field of a mutating method's ``this`` given as a Python value
is read and not written back, as slangpy does. Instances start from torch tensors:
``construct`` calls the struct's constructor (``m["Particle.__init"]``) and writes what it makes
into the instances' tensors, broadcast over the batch where its arguments are uniform.

Not ported:
- ``test_this_interface``, ``test_packed_vs_unpacked_cache``, ``test_custom_instance_list``:
  slangpy's ``get_this``/``update_this`` protocol, which slangspec does not have (pass the dict).
- ``test_loose_instance_as_buffer``, ``test_pass_nested_instance_to_function``: a buffer of
  structs (``Tensor.empty(dtype=Particle)``, ``InstanceTensor``); slangspec takes a struct's
  fields as tensors.
"""

from __future__ import annotations

import pytest
import torch

import slangspec
from parity import F32 as TOL

SOURCE = """
struct Material : IDifferentiable
{
    float3 color;
    float3 emission;
};

struct Particle : IDifferentiable
{
    float2 position;
    float2 velocity;
    float size;
    Material material;

    __init(float2 position, float2 velocity)
    {
        this.position = position;
        this.velocity = velocity;
        this.size = 0.5;
        this.material.color = float3(1.0);
        this.material.emission = float3(0.0);
    }

    [mutating]
    void reset(float2 position, float2 velocity)
    {
        this.position = position;
        this.velocity = velocity;
        this.size = 0.5;
        this.material.color = float3(1.0);
        this.material.emission = float3(0.0);
    }

    [Differentiable]
    float2 calc_next_position(float dt) { return position + velocity * dt; }

    [mutating]
    void update_position(float dt) { position = calc_next_position(dt); }
};

float2[4] get_particle_quad(Particle p)
{
    float2 dir = length(p.velocity) < 0.01 ? float2(0.0, 1.0) : p.velocity;
    float2 up = normalize(dir) * p.size;
    float2 right = float2(-up.y, up.x);
    float2[4] corners = { p.position + right + up, p.position - right + up,
                          p.position - right - up, p.position + right - up };
    return corners;
}
"""


@pytest.fixture(scope="module")
def m(cache_dir):
    return slangspec.load_source("instances", SOURCE, cache_dir=cache_dir)


def particles(n: int, tdev: str) -> dict:
    """The fields of ``n`` particles, as uninitialised storage."""
    return {
        "position": torch.full((n, 2), 9999.0, device=tdev),
        "velocity": torch.full((n, 2), 9999.0, device=tdev),
        "size": torch.full((n,), 9999.0, device=tdev),
        "material": {
            "color": torch.full((n, 3), 9999.0, device=tdev),
            "emission": torch.full((n, 3), 9999.0, device=tdev),
        },
    }


def test_this_interface_soa(m, tdev):
    this = particles(1, tdev)
    m["Particle.reset"](this, (1.0, 2.0), (3.0, 4.0))
    assert this["position"].tolist() == [[1.0, 2.0]]
    assert this["velocity"].tolist() == [[3.0, 4.0]]
    assert this["size"].tolist() == [0.5]
    assert this["material"]["color"].tolist() == [[1.0, 1.0, 1.0]]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_python_values_in_a_mutated_this_are_read_and_left_as_they_are(m, tdev, compiled):
    import torch._dynamo

    this = particles(2, tdev)
    this["velocity"], this["size"] = (3.0, 4.0), 2.0
    this["position"] = torch.tensor([[1.0, 2.0], [5.0, 6.0]], device=tdev)
    update = m["Particle.update_position"]
    if compiled:
        torch._dynamo.reset()
        update = torch.compile(update, fullgraph=True)
    update(this, 0.5)
    assert this["position"].tolist() == [[2.5, 4.0], [6.5, 8.0]]
    assert this["velocity"] == (3.0, 4.0) and this["size"] == 2.0


def test_loose_instance_soa(m, tdev):
    instance = slangspec.InstanceList(m, "Particle", particles(1, tdev))
    instance.construct((1.0, 2.0), (3.0, 4.0))
    assert instance.position.tolist() == [[1.0, 2.0]]
    assert instance.velocity.tolist() == [[3.0, 4.0]]
    assert instance.material["color"].tolist() == [[1.0, 1.0, 1.0]]
    instance.reset((0.0, 0.0), (0.0, 1.0))
    instance.update_position(1.0)
    assert instance.position.tolist() == [[0.0, 1.0]]


def quads(position: torch.Tensor, velocity: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """``get_particle_quad`` in torch."""
    still = velocity.norm(dim=1, keepdim=True) < 0.01
    direction = torch.where(still, torch.tensor([0.0, 1.0], device=velocity.device), velocity)
    up = torch.nn.functional.normalize(direction, dim=1) * size[:, None]
    right = torch.stack([-up[:, 1], up[:, 0]], 1)
    corners = [right + up, -right + up, -right - up, right - up]
    return torch.stack([position + c for c in corners], 1)


def test_pass_instance_to_function(m, tdev):
    n = 1000
    data = particles(n, tdev)
    velocity = torch.rand(n, 2, device=tdev) * 2.0 - 1.0
    instances = slangspec.InstanceList(m, "Particle", data)
    instances.construct(position=(10.0, 10.0), velocity=velocity)
    instances.update_position(dt=1.0 / 60.0)
    expected = 10.0 + velocity / 60.0
    torch.testing.assert_close(instances.position, expected, **TOL)
    out = torch.empty(n, 4, 2, device=tdev)
    m.get_particle_quad(data, _result=out)
    torch.testing.assert_close(out, quads(expected, velocity, data["size"]), **TOL)


class ExtendedInstanceList(slangspec.InstanceList):
    def __init__(self, module: slangspec.Module, tdev: str) -> None:
        super().__init__(module, "Particle", particles(1000, tdev))

    def update(self) -> None:
        self.update_position(1.0 / 60.0)


def test_extended_instance_list(m, tdev):
    instances = ExtendedInstanceList(m, tdev)
    instances.reset((10.0, 10.0), (0.0, 1.0))
    instances.update()
    want = torch.tensor([10.0, 10.0 + 1.0 / 60.0], device=tdev).expand(1000, 2)
    torch.testing.assert_close(instances.position, want, **TOL)


def test_backwards_diff(m, tdev):
    n = 1000
    data = particles(n, tdev)
    velocity = torch.rand(n, 2, device=tdev) * 2.0 - 1.0
    slangspec.InstanceList(m, "Particle", data).reset((10.0, 10.0), velocity)
    position = data["position"].requires_grad_()
    data["velocity"].requires_grad_()
    dts = torch.full((n,), 1.0 / 60.0, device=tdev, requires_grad=True)
    next_positions = m["Particle.calc_next_position"](data, dts)
    next_positions.backward(torch.ones(n, 2, device=tdev))
    torch.testing.assert_close(next_positions, 10.0 + velocity / 60.0, **TOL)
    assert torch.equal(position.grad, torch.ones(n, 2, device=tdev))
    torch.testing.assert_close(
        data["velocity"].grad, torch.full((n, 2), 1.0 / 60.0, device=tdev), **TOL
    )
    torch.testing.assert_close(dts.grad, velocity.sum(1), **TOL)
    assert data["size"].grad is None
