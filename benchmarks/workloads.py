"""Training iterations of rendering-style programs, where every pixel (call) reads the same
parameters: each in the broadcast form (the parameters a struct or an array of structs every
call takes), the tensor form (``IDiffTensor`` parameters the function indexes) and the view form
(the broadcast form's very body, written once below, over a struct of ``IDiffTensor`` members
whose subscript reads one element: what a user can write today to keep a by-value body), against
the same maths in torch eager and, for the tensor form, slangpy's functional API on the same Slang.

    SLANGPY_TORCH_BRIDGE=1 source .gpu/install.sh   # on the GPU machine
    python benchmarks/workloads.py [--device cuda] [--iters 10] [--only splat128 mlp]
    python benchmarks/workloads.py --device vulkan --small   # a check of the values, on a CPU
    python benchmarks/workloads.py --unroll ...   # the splats' loops under [ForceUnroll]
    python benchmarks/workloads.py --unroll --only splat128 --manifest DIR   # write DIR/warm.toml
    specialize warm DIR/warm.toml --arch sm_90 --cache-dir DIR/cache   # build, on any machine
    python benchmarks/workloads.py --unroll --only splat128 --cache DIR/cache   # on the GPU
    python benchmarks/workloads.py --only raster1000 --no-broadcast ...   # without that form

Workloads: a 2D Gaussian-splatting fit (1024² pixels, 128 and 512 Gaussians), a soft rasterizer
(1024², 1000 triangles) and a tiny MLP evaluated per pixel (2-16-3, weights broadcast). An
iteration is a forward, a loss against a target and a backward; each form's gradients are first
checked against torch's (float64) on a crop. Per form: the median time of an iteration after
warm-up (synchronized), the median time of its forward (to the loss, waited for before the backward
starts), and the peak memory its backward adds (``torch.cuda.max_memory_allocated`` over what was
allocated before it). The forms take turns iteration by iteration, in an order shuffled at each, so
that a shared host's drift hits them alike. ``SLANGSPEC_DETERMINISTIC`` is read as usual: set it to
measure the per-call store. A looped broadcast form's array goes to its twin as a view
(docs/calling.md), unrolled (as the MLP's) or not. Slang 2026.12 did not build the backward of
``Triangle t[1000]`` by value (24 GB within a 30-minute warm on the CPU machine); as a view it
builds and launches. A form whose kernels the driver refuses (raster1000's hand-written view keeps
722,040 bytes a thread without ``--recompute``) or that runs out of GPU memory (torch eager's
rasterizer at full size) is named, and the others measured.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

import slangspec

SPLAT_BODY = """{{
    float3 c = float3(0.0);
    {unroll}
    for (int i = 0; i < NG; i++)
    {{
        float2 d = pix - g[i].center;
        c += g[i].color * exp(-dot(d, d) * g[i].scale);
    }}
    return c;
}}"""

SPLAT = """
import slangpy;
static const int NG = {n};
struct Gaussian : IDifferentiable {{ float2 center; float scale; float3 color; }};

[Differentiable]
float at(IDiffTensor<float, 2> t, int i, int j) {{ int idx[2] = {{ i, j }}; return t[idx]; }}

[Differentiable]
float3 broadcast_form(Gaussian g[NG], no_diff float2 pix)
{body}

struct GaussianView
{{
    IDiffTensor<float, 2> centers;
    IDiffTensor<float, 1> scales;
    IDiffTensor<float, 2> colors;
    __subscript(int i) -> Gaussian
    {{
        [Differentiable] get
        {{
            int j[1] = {{ i }};
            Gaussian r;
            r.center = float2(at(centers, i, 0), at(centers, i, 1));
            r.scale = scales[j];
            r.color = float3(at(colors, i, 0), at(colors, i, 1), at(colors, i, 2));
            return r;
        }}
    }}
}};

[Differentiable]
float3 view_body(GaussianView g, no_diff float2 pix)
{body}

[Differentiable]
float3 view_form(IDiffTensor<float, 2> centers, IDiffTensor<float, 1> scales,
                 IDiffTensor<float, 2> colors, no_diff float2 pix)
{{
    GaussianView g = {{ centers, scales, colors }};
    return view_body(g, pix);
}}

[Differentiable]
float3 tensor_form(IDiffTensor<float, 2> centers, IDiffTensor<float, 1> scales,
                   IDiffTensor<float, 2> colors, no_diff float2 pix)
{{
    float3 c = float3(0.0);
    {unroll}
    for (int i = 0; i < NG; i++)
    {{
        float2 d = pix - float2(at(centers, i, 0), at(centers, i, 1));
        float3 color = float3(at(colors, i, 0), at(colors, i, 1), at(colors, i, 2));
        int idx[1] = {{ i }};
        c += color * exp(-dot(d, d) * scales[idx]);
    }}
    return c;
}}
"""

RASTER_BODY = """{{
    float3 c = float3(0.0);
    float w = 1e-4;
    for (int i = 0; i < NT; i++)
    {{
        float k = coverage(pix, t[i].a, t[i].b, t[i].c);
        c += t[i].color * k;
        w += k;
    }}
    return c * (1.0 / w);
}}"""

RASTER = """
import slangpy;
static const int NT = {n};
static const float SIGMA = 0.002;
struct Triangle : IDifferentiable {{ float2 a; float2 b; float2 c; float3 color; }};

[Differentiable]
float at(IDiffTensor<float, 2> t, int i, int j) {{ int idx[2] = {{ i, j }}; return t[idx]; }}

[Differentiable]
float edge(float2 p, float2 a, float2 b)
{{
    float2 e = b - a;
    return (e.x * (p.y - a.y) - e.y * (p.x - a.x)) / (length(e) + 1e-6);
}}

[Differentiable]
float coverage(float2 p, float2 a, float2 b, float2 c)
{{
    float d = min(min(edge(p, a, b), edge(p, b, c)), edge(p, c, a));
    return 1.0 / (1.0 + exp(-d / SIGMA));
}}

[Differentiable]
float3 broadcast_form(Triangle t[NT], no_diff float2 pix)
{body}

struct TriangleView
{{
    IDiffTensor<float, 2> verts;
    IDiffTensor<float, 2> colors;
    __subscript(int i) -> Triangle
    {{
        [Differentiable] get
        {{
            Triangle r;
            r.a = float2(at(verts, i, 0), at(verts, i, 1));
            r.b = float2(at(verts, i, 2), at(verts, i, 3));
            r.c = float2(at(verts, i, 4), at(verts, i, 5));
            r.color = float3(at(colors, i, 0), at(colors, i, 1), at(colors, i, 2));
            return r;
        }}
    }}
}};

[Differentiable]
float3 view_body(TriangleView t, no_diff float2 pix)
{body}

[Differentiable]
float3 view_form(IDiffTensor<float, 2> verts, IDiffTensor<float, 2> colors, no_diff float2 pix)
{{
    TriangleView t = {{ verts, colors }};
    return view_body(t, pix);
}}

[Differentiable]
float3 tensor_form(IDiffTensor<float, 2> verts, IDiffTensor<float, 2> colors, no_diff float2 pix)
{{
    float3 c = float3(0.0);
    float w = 1e-4;
    for (int i = 0; i < NT; i++)
    {{
        float2 a = float2(at(verts, i, 0), at(verts, i, 1));
        float2 b = float2(at(verts, i, 2), at(verts, i, 3));
        float2 q = float2(at(verts, i, 4), at(verts, i, 5));
        float k = coverage(pix, a, b, q);
        c += float3(at(colors, i, 0), at(colors, i, 1), at(colors, i, 2)) * k;
        w += k;
    }}
    // Not c / w: Slang 2026.12's backward of a float3 over a float, both carried through a loop
    // over IDiffTensor reads, stops with "unhandled type for C/C++ emit" on CUDA and crashes
    // lavapipe's pipeline creation.
    return c * (1.0 / w);
}}
"""

MLP_BODY = """{{
    float3 out = float3(m.b2[0], m.b2[1], m.b2[2]);
    [ForceUnroll]
    for (int h = 0; h < H; h++)
    {{
        float a = tanh(m.w1[2 * h] * pix.x + m.w1[2 * h + 1] * pix.y + m.b1[h]);
        out += a * float3(m.w2[h], m.w2[H + h], m.w2[2 * H + h]);
    }}
    return out;
}}"""

MLP = """
import slangpy;
static const int H = 16;
struct Mlp : IDifferentiable {{ float w1[2 * H]; float b1[H]; float w2[3 * H]; float b2[3]; }};

[Differentiable]
float3 broadcast_form(Mlp m, no_diff float2 pix)
{body}

[Differentiable]
float at1(IDiffTensor<float, 1> t, int i) {{ int idx[1] = {{ i }}; return t[idx]; }}

[Differentiable]
float3 tensor_form(IDiffTensor<float, 1> w1, IDiffTensor<float, 1> b1, IDiffTensor<float, 1> w2,
                   IDiffTensor<float, 1> b2, no_diff float2 pix)
{{
    float3 out = float3(at1(b2, 0), at1(b2, 1), at1(b2, 2));
    [ForceUnroll]
    for (int h = 0; h < H; h++)
    {{
        float a = tanh(at1(w1, 2 * h) * pix.x + at1(w1, 2 * h + 1) * pix.y + at1(b1, h));
        out += a * float3(at1(w2, h), at1(w2, H + h), at1(w2, 2 * H + h));
    }}
    return out;
}}

struct ArrayView
{{
    IDiffTensor<float, 1> t;
    __subscript(int i) -> float {{ [Differentiable] get {{ return at1(t, i); }} }}
}};

struct MlpView
{{
    IDiffTensor<float, 1> w1t;
    IDiffTensor<float, 1> b1t;
    IDiffTensor<float, 1> w2t;
    IDiffTensor<float, 1> b2t;
    property ArrayView w1 {{ get {{ ArrayView v = {{ w1t }}; return v; }} }}
    property ArrayView b1 {{ get {{ ArrayView v = {{ b1t }}; return v; }} }}
    property ArrayView w2 {{ get {{ ArrayView v = {{ w2t }}; return v; }} }}
    property ArrayView b2 {{ get {{ ArrayView v = {{ b2t }}; return v; }} }}
}};

[Differentiable]
float3 view_body(MlpView m, no_diff float2 pix)
{body}

[Differentiable]
float3 view_form(IDiffTensor<float, 1> w1, IDiffTensor<float, 1> b1, IDiffTensor<float, 1> w2,
                 IDiffTensor<float, 1> b2, no_diff float2 pix)
{{
    MlpView m = {{ w1, b1, w2, b2 }};
    return view_body(m, pix);
}}
"""


def recomputed(source: str) -> str:
    """``source`` with the tensor and view forms' reads marked ``[PreferRecompute]``: Slang's
    backward then reads them again instead of keeping each in the thread's local memory."""
    source = re.sub(
        r"\[Differentiable\]\n(float at1?\()", r"[Differentiable] [PreferRecompute]\n\1", source
    )
    return source.replace("[Differentiable] get", "[Differentiable] [PreferRecompute] get")


def splat_source(n: int, unroll: str = "") -> str:
    """The splatting module for ``n`` Gaussians, its loops under ``unroll`` (an attribute)."""
    return SPLAT.format(n=n, unroll=unroll, body=SPLAT_BODY.format(unroll=unroll))


def raster_source(n: int) -> str:
    return RASTER.format(n=n, body=RASTER_BODY.format())


def mlp_source() -> str:
    return MLP.format(body=MLP_BODY.format())


@dataclass
class Workload:
    name: str
    source: str
    count: int  # Gaussians or triangles; 0 for the MLP
    params: Callable[[int, str], dict[str, torch.Tensor]]
    broadcast_args: Callable[[dict[str, torch.Tensor]], tuple]  # the struct (array) argument
    tensor_args: Callable[[dict[str, torch.Tensor]], tuple]
    torch_form: Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor]


def _gaussians(n: int, dev: str) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(n)
    return {
        "center": torch.rand(n, 2, generator=g).to(dev),
        "scale": (torch.rand(n, generator=g) * 40 + 10).to(dev),
        "color": torch.rand(n, 3, generator=g).to(dev),
    }


def _splat_torch(p: dict[str, torch.Tensor], pix: torch.Tensor) -> torch.Tensor:
    d = pix[..., None, :] - p["center"]
    w = torch.exp(-(d * d).sum(-1) * p["scale"])
    return (w[..., None] * p["color"]).sum(-2)


def _triangles(n: int, dev: str) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(n)
    centers = torch.rand(n, 1, 2, generator=g)
    verts = centers + (torch.rand(n, 3, 2, generator=g) - 0.5) * 0.2
    return {"verts": verts.reshape(n, 6).to(dev), "color": torch.rand(n, 3, generator=g).to(dev)}


def _raster_torch(p: dict[str, torch.Tensor], pix: torch.Tensor, sigma: float = 0.002):
    v = p["verts"].reshape(-1, 3, 2)
    px = pix[..., None, :]

    def edge(a, b):
        e = b - a
        cross = e[..., 0] * (px[..., 1] - a[..., 1]) - e[..., 1] * (px[..., 0] - a[..., 0])
        return cross / (e.norm(dim=-1) + 1e-6)

    a, b, c = v[:, 0], v[:, 1], v[:, 2]
    d = torch.minimum(torch.minimum(edge(a, b), edge(b, c)), edge(c, a))
    k = torch.sigmoid(d / sigma)
    return (k[..., None] * p["color"]).sum(-2) / (k.sum(-1, keepdim=True) + 1e-4)


def _mlp(_: int, dev: str) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(16)
    return {
        "w1": (torch.randn(32, generator=g) * 2).to(dev),
        "b1": torch.randn(16, generator=g).to(dev),
        "w2": (torch.randn(48, generator=g) * 0.3).to(dev),
        "b2": torch.randn(3, generator=g).to(dev),
    }


def _mlp_torch(p: dict[str, torch.Tensor], pix: torch.Tensor) -> torch.Tensor:
    w1, w2 = p["w1"].reshape(16, 2), p["w2"].reshape(3, 16)
    return torch.tanh(pix @ w1.T + p["b1"]) @ w2.T + p["b2"]


def workloads(small: bool, unroll: bool = False, recompute: bool = False) -> list[Workload]:
    counts = (8, 16, 24) if small else (128, 512, 1000)
    made = []
    for n in counts[:2]:
        made.append(
            Workload(
                f"splat{n}",
                splat_source(n, "[ForceUnroll]" if unroll else ""),
                n,
                _gaussians,
                lambda p: (p,),
                lambda p: (p["center"], p["scale"], p["color"]),
                _splat_torch,
            )
        )
    made.append(
        Workload(
            f"raster{counts[2]}",
            raster_source(counts[2]),
            counts[2],
            _triangles,
            lambda p: (_triangle_dict(p),),
            lambda p: (p["verts"], p["color"]),
            _raster_torch,
        )
    )
    made.append(
        Workload(
            "mlp",
            mlp_source(),
            0,
            _mlp,
            lambda p: (p,),
            lambda p: (p["w1"], p["b1"], p["w2"], p["b2"]),
            _mlp_torch,
        )
    )
    if recompute:
        for w in made:
            w.source = recomputed(w.source)
    return made


def _triangle_dict(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    v = p["verts"]
    return {"a": v[:, 0:2], "b": v[:, 2:4], "c": v[:, 4:6], "color": p["color"]}


def pixels(side: int, dev: str) -> torch.Tensor:
    axis = (torch.arange(side, device=dev, dtype=torch.float32) + 0.5) / side
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1)


def leaves(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().requires_grad_() for k, v in p.items()}


def _did_not_run(workload: str, form: str, e: Exception) -> None:
    print(f"{workload:10s} {form:10s} did not run: {str(e).splitlines()[0][:160]}")


def check(w: Workload, forms: dict[str, Callable], dev: str) -> dict[str, Callable]:
    """Each form's gradients against torch's in float64, on a crop of the image; the forms
    that ran (one whose kernels do not launch is named, with why, and left out)."""
    pix = pixels(32, dev)
    base = w.params(w.count, dev)
    ref = {k: v.double().requires_grad_() for k, v in base.items()}
    target = torch.rand(32, 32, 3, device=dev, dtype=torch.float64)
    ((w.torch_form(ref, pix.double()) - target) ** 2).mean().backward()
    ran = {}
    for name, form in forms.items():
        p = leaves(base)
        try:
            ((form(p, pix) - target.float()) ** 2).mean().backward()
        except Exception as e:  # a launch the driver refuses, through slangspec or slangpy
            _did_not_run(w.name, name, e)
            continue
        ran[name] = form
        for k, v in p.items():
            err = (v.grad.double() - ref[k].grad).abs().max().item()
            scale = ref[k].grad.abs().max().item() + 1e-12
            if err > 1e-3 * scale + 1e-6:
                raise AssertionError(f"{w.name} {name}: gradient of {k} off by {err:.3g}")
    return ran


def measure(
    workload: str, forms: dict[str, Callable], params, pix, target, iters: int, sync
) -> dict:
    """Median seconds per iteration, median seconds of its forward (to the loss, waited for
    before the backward starts), and peak extra bytes of the backward, per form, the forms taking
    turns in an order shuffled at each step; a form that runs out of GPU memory (torch's soft
    rasterizer at full size) is named and left out."""
    times: dict[str, list[float]] = {name: [] for name in forms}
    forwards: dict[str, list[float]] = {name: [] for name in forms}
    peaks: dict[str, int] = {name: 0 for name in forms}
    cuda = torch.cuda.is_available() and pix.is_cuda
    order, shuffle = list(forms), random.Random(0).shuffle
    for step in range(iters + 2):
        shuffle(order)  # so that no form always runs first, or after the same one
        for name in order:
            if name not in times:
                continue
            form = forms[name]
            p = leaves(params)
            sync()
            start = time.perf_counter()
            try:
                loss = ((form(p, pix) - target) ** 2).mean()
                sync()
                forward = time.perf_counter() - start
                if cuda:
                    before = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                loss.backward()
                sync()
            except torch.OutOfMemoryError as e:
                _did_not_run(workload, name, e)
                del times[name]
                torch.cuda.empty_cache()
                continue
            took = time.perf_counter() - start
            if cuda:
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated() - before)
            if step >= 2:  # the first two compile and warm up
                times[name].append(took)
                forwards[name].append(forward)
    return {
        name: (statistics.median(times[name]), statistics.median(forwards[name]), peaks[name])
        for name in times
    }


def module_file(w: Workload, where: Path) -> Path:
    """``w``'s Slang source written into ``where``: a module the JIT and ``specialize warm``
    key alike."""
    path = where / f"workload_{w.name}.slang"
    path.write_text(w.source)
    return path


def write_manifest(chosen: list[Workload], where: Path, kind: str, broadcast: bool = True) -> Path:
    """A ``specialize warm`` manifest of the calls ``chosen``'s Slang forms make (one signature
    each, the crop's and the image's alike, every parameter trained; all but the broadcast form
    without ``broadcast``), beside their modules."""
    pix = pixels(8, "cpu")
    blocks = []
    for w in chosen:
        path = module_file(w, where)
        m = slangspec.load(str(path), device=kind)
        params = leaves(w.params(w.count, "cpu"))
        functions = []
        calls = [("broadcast_form", w.broadcast_args(params))] if broadcast else []
        calls += [(name, w.tensor_args(params)) for name in ("tensor_form", "view_form")]
        for name, args in calls:
            plan = getattr(m, name).plan(*args, pix)
            mask = max(plan.backward_masks, key=lambda mask: mask.count("1"))
            functions.append(
                f'[[module.function]]\nname = "{name}"\nmasks = ["{mask}"]\n'
                f"specializations = [{json.dumps(plan.signature)}]\n"
            )
        blocks.append(f'[[module]]\npath = "{path.name}"\n\n' + "\n".join(functions))
    manifest = where / "warm.toml"
    manifest.write_text("\n".join(blocks))
    return manifest


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=["cuda", "vulkan"], default=None)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--small", action="store_true", help="small sizes: check the values anywhere")
    p.add_argument("--only", nargs="+", default=None, help="workloads by name")
    p.add_argument("--no-slangpy", action="store_true")
    p.add_argument(
        "--no-broadcast",
        action="store_true",
        help="skip the broadcast form (raster1000's: Slang runs out of memory building it)",
    )
    p.add_argument(
        "--unroll",
        action="store_true",
        help="the splats' loops (both forms) under [ForceUnroll], as docs/calling.md advises",
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help="the tensor and view forms' reads under [PreferRecompute], as docs/calling.md advises",
    )
    p.add_argument("--cache", type=Path, default=None, help="the cache to use (default: a new one)")
    p.add_argument(
        "--manifest",
        type=Path,
        default=None,
        help="write the modules and a `specialize warm` manifest of their calls here, and stop",
    )
    args = p.parse_args()
    kind = args.device or ("cuda" if torch.cuda.is_available() else "vulkan")
    dev = "cuda" if kind == "cuda" else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    side = 64 if args.small else 1024
    chosen = [
        w
        for w in workloads(args.small, args.unroll, args.recompute)
        if not args.only or w.name in args.only
    ]
    if args.manifest is not None:
        args.manifest.mkdir(parents=True, exist_ok=True)
        print(f"wrote {write_manifest(chosen, args.manifest, kind, not args.no_broadcast)}")
        return
    cache = str(args.cache or tempfile.mkdtemp(prefix="slangspec-workloads-"))
    sources = Path(tempfile.mkdtemp(prefix="slangspec-workload-modules-"))
    spy_device = None
    if kind == "cuda" and not args.no_slangpy:
        import slangpy as spy

        spy_device = spy.create_torch_device(type=spy.DeviceType.cuda)
    print(f"{'workload':10s} {'form':10s} {'ms/iter':>9s} {'fwd ms':>8s} {'bwd MiB':>9s}   ratios")
    for w in chosen:
        m = slangspec.load(str(module_file(w, sources)), device=kind, cache_dir=cache)
        forms: dict[str, Callable] = {
            "broadcast": lambda p, pix, m=m, w=w: m.broadcast_form(*w.broadcast_args(p), pix),
            "tensor": lambda p, pix, m=m, w=w: m.tensor_form(*w.tensor_args(p), pix),
            "view": lambda p, pix, m=m, w=w: m.view_form(*w.tensor_args(p), pix),
            "torch": w.torch_form,
        }
        if args.no_broadcast:
            del forms["broadcast"]
        if spy_device is not None:
            import slangpy as spy

            theirs = spy.Module.load_from_source(spy_device, f"workload_{w.name}", w.source)
            forms["slangpy"] = lambda p, pix, t=theirs, w=w: t.tensor_form(*w.tensor_args(p), pix)
        forms = check(w, {k: v for k, v in forms.items() if k != "torch"}, dev)
        forms["torch"] = w.torch_form
        if "tensor" not in forms:
            continue
        pix = pixels(side, dev)
        target = torch.rand(side, side, 3, device=dev)
        results = measure(w.name, forms, w.params(w.count, dev), pix, target, args.iters, sync)
        tensor_time, _, tensor_peak = results["tensor"]
        for name, (seconds, forward, peak) in results.items():
            ratios = [f"/tensor {seconds / tensor_time:5.2f}"]
            if peak and tensor_peak:
                ratios.append(f"mem/tensor {peak / tensor_peak:5.2f}")
            if "torch" in results:
                ratios.append(f"/torch {seconds / results['torch'][0]:5.2f}")
            if "slangpy" in results:
                ratios.append(f"/slangpy {seconds / results['slangpy'][0]:5.2f}")
            print(
                f"{w.name:10s} {name:10s} {seconds * 1e3:9.2f} {forward * 1e3:8.2f} "
                f"{peak / 2**20:9.1f}   " + "  ".join(ratios)
            )


if __name__ == "__main__":
    main()
