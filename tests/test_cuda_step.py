"""The CUDA build without a device: generated kernels -> one CUDA source through Slang's C API,
with each entry point's parameter layout -> one cubin per architecture through NVRTC. Runs on a
machine without a GPU; what needs NVRTC is skipped where NVIDIA's NVRTC wheel is missing."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slangspec.cache_store import CacheWarning
from slangspec.cache_store.module_cache import ModuleCacheGuard
from slangspec.cache_store.module_seals import ModuleSeals
from slangspec.codegen import kernel_source
from slangspec.codegen.kernels import THREADS_PER_GROUP
from slangspec.codegen.uniforms import UniformBlock
from slangspec.compile.cuda import nvrtc
from slangspec.compile.cuda.build import build, library_dir
from slangspec.compile.cuda.cubin import cubin_problem, section_names
from slangspec.compile.cuda.cubin import sm_version as elf_arch
from slangspec.compile.cuda.source import (
    LIBRARY_FILE,
    KernelSource,
    cuda_source,
    forget,
    front_end,
    slangpy_library,
    split_prelude,
)
from slangspec.compile.slang.api import SlangCompileError, SlangSession
from slangspec.settings import compile_counts
from slangspec.signatures.module_text import ModuleText
from slangspec.specializer import FunctionInfo, ParamInfo, TypeInfo, plan_from_signature
from workers import python


def _has_nvrtc() -> bool:
    try:
        nvrtc.library_path()
    except nvrtc.NvrtcUnavailableError:
        return False
    return True


needs_nvrtc = pytest.mark.skipif(
    not _has_nvrtc(), reason="NVIDIA's NVRTC wheel is not installed (slangspec's 'cuda' extra)"
)

MODULE = """
import slangpy;
[Differentiable]
float poly(float a, float x) { return a * x * x + x; }
[Differentiable]
float mix(IDiffTensor<float, 1> a, IDiffTensor<float, 1> b, int i) { return a[i] * b[i]; }
"""
FLOAT = TypeInfo("scalar", "float", "float")
INT = TypeInfo("scalar", "int", "int")
DIFF1 = TypeInfo("tensor", "IDiffTensor<float, 1>", "float", (), "IDiffTensor", 1)


def function(module, name, *params, returns=FLOAT):
    ps = tuple(ParamInfo(n, t, nd, "in") for n, t, nd in params)
    return FunctionInfo(module, name, True, ps, returns)


POLY = function("m", "poly", ("a", FLOAT, False), ("x", FLOAT, False))
MIX = function("m", "mix", ("a", DIFF1, True), ("b", DIFF1, True), ("i", INT, True))
SIGNATURES = {
    POLY: "m::poly call [D1,S6,G1,V1] [D1,S6,G0,Vx]",
    MIX: "m::mix call [D1,S6,G1,Vx] [D1,S6,G1,Vx] grid[D1]",
}


def kernels_of(info, signature, directory):
    """The forward kernel of a plan and its first backward kernel, named for both."""
    plan = plan_from_signature(info, signature)
    made = []
    for label, suffix in (("forward", "fwd"), (plan.backward_masks[0], "bwd")):
        name = f"k_{info.name}_{suffix}"
        made.append(KernelSource(name, kernel_source(plan, label), directory / f"{name}.slang"))
    return made


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cuda_step")
    module = ModuleText("m", directory / "user" / "m.slang", MODULE)
    kernels = [k for info, sig in SIGNATURES.items() for k in kernels_of(info, sig, directory)]
    return kernels, cuda_source(module, kernels)


@pytest.fixture(scope="module")
def cubin(built):
    _, source = built
    return nvrtc.cubins(source.text, ["sm_90"], source.half)["sm_90"]


def declared_uniforms(source: str) -> list[str]:
    return re.findall(r"^\s*uniform .* (\w+)(?:\[\d+\])*[,)]?$", source, re.M)


def test_one_source_holds_each_kernel_as_an_entry_point_of_its_own(built):
    kernels, source = built
    assert list(source.entries) == [k.name for k in kernels]
    for k in kernels:
        assert re.search(rf'extern "C" __global__ void {k.name}\(', source.text)
        assert source.entries[k.name].group == THREADS_PER_GROUP
    assert "slangspec_main" not in source.text
    assert not source.half


def test_layouts_name_every_uniform_the_kernels_declare_at_sane_offsets(built):
    kernels, source = built
    for k in kernels:
        layout = source.entries[k.name].layout
        assert layout is not None, k.name
        assert [p[0] for p in layout["params"]] == declared_uniforms(k.source)
        end = 0
        for name, offset, t in layout["params"]:
            assert offset >= end, name
            if "pointer" in t:
                assert offset % 8 == 0, name
            end = offset + (8 if "pointer" in t else 4)
        assert layout["size"] >= end
        UniformBlock(layout)  # packs: well formed, fields apart


def test_a_diff_tensor_is_a_struct_of_pointers_shapes_and_strides(built):
    kernels, source = built
    text = next(k.source for k in kernels if k.name == "k_mix_bwd")
    diff = re.search(r"uniform DiffTensor<float, 1> (\w+)", text).group(1)
    layout = source.entries["k_mix_bwd"].layout
    tensor = next(t for name, _, t in layout["params"] if name == diff)
    parts = {name: t for name, _, t in tensor["struct"]}
    assert sorted(parts) == ["_grad_out", "_primal"]
    primal = {name: (offset, t) for name, offset, t in parts["_primal"]["struct"]}
    assert primal["_data"] == (0, {"pointer": True})
    assert primal["_shape"][1] == {"array": 1, "stride": 4, "element": {"scalar": "I"}}


def test_slangpys_library_read_as_ir_compiles_the_same_kernels(built, tmp_path):
    """The library compiled to IR once, then read by a compile instead of its source: the same
    entry points, at the same parameter layouts."""
    kernels, source = built
    (tmp_path / LIBRARY_FILE).write_bytes(slangpy_library())
    module = ModuleText("m", kernels[0].path.parent.parent / "user" / "m.slang", MODULE)
    again = cuda_source(module, kernels, library=tmp_path)
    assert again.entries == source.entries


def test_the_prelude_splits_off_where_its_include_guard_closes(built):
    _, source = built
    prelude, rest = split_prelude(source.text)
    assert prelude.startswith("#ifndef SLANG_CUDA_PRELUDE_H")
    assert prelude.rstrip().endswith("#endif")
    assert "__global__ void k_poly_fwd(" in rest
    with pytest.raises(ValueError, match="guarded prelude"):
        split_prelude("int x;\n#ifndef A\n#endif\n")


def elf_sections(elf: bytes) -> dict[str, bytes]:
    (shoff,) = struct.unpack_from("<Q", elf, 40)
    entsize, count, names = struct.unpack_from("<HHH", elf, 58)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize) for i in range(count)]
    strings = headers[names][4]
    sections = {}
    for h in headers:
        name = elf[strings + h[0] : elf.index(b"\0", strings + h[0])].decode()
        sections[name] = elf[h[4] : h[4] + h[5]]
    return sections


def kernel_parameters(info: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each parameter, in order, from a kernel's ``.nv.info`` section: what
    the driver's ``cuFuncGetParamInfo`` reports."""
    found, pos = [], 0
    while pos < len(info):
        form, attribute = info[pos], info[pos + 1]
        if form == 0x04:  # EIFMT_SVAL: a 16-bit size, then the value
            (size,) = struct.unpack_from("<H", info, pos + 2)
            if attribute == 0x17:  # EIATTR_KPARAM_INFO
                _, ordinal, offset, bits = struct.unpack_from("<IHHI", info, pos + 4)
                found.append((ordinal, offset, (bits >> 18) & 0x3FFF))
            pos += 4 + size
        else:
            pos += 4 if form == 0x03 else 2
    return [(offset, size) for _, offset, size in sorted(found)]


@needs_nvrtc
def test_one_sm_90_cubin_holds_every_kernel(built, cubin):
    kernels, _ = built
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2  # 64-bit
    (machine,) = struct.unpack_from("<H", cubin, 18)
    assert machine == 190  # EM_CUDA
    assert elf_arch(cubin) == 90
    sections = elf_sections(cubin)
    assert {f".text.{k.name}" for k in kernels} <= set(sections)
    assert set(section_names(cubin)) == set(sections)


@needs_nvrtc
def test_a_cubin_is_checked_against_its_architecture_and_kernel(built, cubin):
    kernels, _ = built
    assert all(cubin_problem(cubin, "sm_90", k.name) is None for k in kernels)
    assert cubin_problem(cubin, "sm_80", kernels[0].name) == "it is built for sm_90, not sm_80"
    assert cubin_problem(cubin, "sm_90", "k_other") == "it holds no code of kernel k_other"
    assert "section table" in cubin_problem(cubin[:200], "sm_90", kernels[0].name)
    assert cubin_problem(b"\x7fELF" + bytes(60), "sm_90", "k") == "it is not a 64-bit ELF file"
    other = cubin[:18] + struct.pack("<H", 62) + cubin[20:]  # x86-64
    assert cubin_problem(other, "sm_90", kernels[0].name).startswith("its ELF machine is 62")


@needs_nvrtc
def test_layouts_put_each_parameter_where_the_compiled_kernel_takes_it(built, cubin):
    _, source = built
    sections = elf_sections(cubin)
    for name, entry in source.entries.items():
        compiled = kernel_parameters(sections[f".nv.info.{name}"])
        assert [offset for offset, _ in compiled] == [p[1] for p in entry.layout["params"]], name
        assert entry.layout["size"] == compiled[-1][0] + compiled[-1][1], name


@needs_nvrtc
def test_cubins_for_several_architectures(built):
    _, source = built
    made = nvrtc.cubins(source.text, ["sm_80", "sm_90", "sm_80"], source.half)
    assert list(made) == ["sm_80", "sm_90"]
    assert [elf_arch(c) for c in made.values()] == [80, 90]


HALF = "[Differentiable]\nhalf hpoly(half a, half x) { return a * x + x; }\n"
HALF_FN = function(
    "h",
    "hpoly",
    ("a", TypeInfo("scalar", "half", "half"), False),
    ("x", TypeInfo("scalar", "half", "half"), False),
    returns=TypeInfo("scalar", "half", "half"),
)


@needs_nvrtc
def test_a_kernel_using_half_compiles_with_the_half_header(tmp_path):
    if nvrtc.half_headers() is None:
        pytest.skip("NVIDIA's CUDA headers are not installed (slangspec's 'cuda' extra)")
    module = ModuleText("h", tmp_path / "h.slang", HALF)
    kernels = kernels_of(HALF_FN, "h::hpoly call [D1,S5,G1,Vx] [D1,S5,G0,Vx]", tmp_path)
    source = cuda_source(module, kernels)
    assert source.half
    cubin = nvrtc.cubins(source.text, ["sm_90"], source.half)["sm_90"]
    assert struct.unpack_from("<H", cubin, 18)[0] == 190


def test_a_slang_error_carries_slang_s_diagnostics(tmp_path):
    module = ModuleText("h", tmp_path / "h.slang", HALF)
    good = kernels_of(HALF_FN, "h::hpoly call [D1,S5,G1,Vx] [D1,S5,G0,Vx]", tmp_path)[0]
    bad = KernelSource(good.name, good.source.replace("hpoly(", "no_such_function("), good.path)
    with pytest.raises(SlangCompileError) as caught:
        cuda_source(module, [bad])
    assert "no_such_function" in caught.value.diagnostics
    assert str(bad.path) in caught.value.diagnostics


def test_kernel_names_must_be_distinct_identifiers(tmp_path):
    module = ModuleText("h", tmp_path / "h.slang", HALF)
    kernel = KernelSource("k_a", "", tmp_path / "k_a.slang")
    for kernels in ([kernel, kernel], [KernelSource("h", "", tmp_path / "h2.slang")], []):
        with pytest.raises(ValueError):
            cuda_source(module, kernels)
    with pytest.raises(ValueError, match="cannot name an entry point"):
        cuda_source(module, [KernelSource("k-a", "", tmp_path / "x.slang")])


@needs_nvrtc
def test_an_nvrtc_error_carries_its_log():
    with pytest.raises(nvrtc.NvrtcError) as caught:
        nvrtc.nvrtc().compile("this is not CUDA;\n", "sm_90", name="broken.cu")
    assert "broken.cu" in caught.value.log and "error" in caught.value.log
    with pytest.raises(ValueError, match="architecture"):
        nvrtc.nvrtc().compile("", "90")


def test_a_missing_nvrtc_names_the_cuda_extra(monkeypatch):
    monkeypatch.setattr(nvrtc, "_nvidia_roots", lambda: [])
    with pytest.raises(nvrtc.NvrtcUnavailableError, match="'cuda' extra"):
        nvrtc.library_path()
    with pytest.raises(nvrtc.NvrtcUnavailableError, match="'cuda' extra"):
        nvrtc.Nvrtc()


@needs_nvrtc
def test_nvrtc_says_its_version():
    major, minor = nvrtc.nvrtc().version
    assert major >= 12 and minor >= 0


SLANGPY_SIDE = {
    "vulkan_compiler.py": "Vulkan builds go through slangpy's device",
    "slangpy_install.py": "it imports slangpy only where it cannot read slangpy's install",
}
"""The modules of the compile path that may import slangpy, and why."""


def test_modules_of_the_cuda_step_need_neither_torch_nor_a_slangpy_device():
    compile_dir = Path(nvrtc.__file__).parent
    for path in compile_dir.glob("*.py"):
        if path.name in SLANGPY_SIDE:
            continue
        text = path.read_text()
        assert not re.search(r"^\s*(import|from) (torch|slangpy)\b", text, re.M), path.name


@needs_nvrtc
def test_a_build_is_a_cubin_with_its_entry_layout_and_group_reading_a_sealed_library(tmp_path):
    """``cuda.build``: slangpy's library compiled into the module cache once, sealed; read
    back by a build; damaged, removed and compiled again."""
    guard = ModuleCacheGuard(ModuleSeals(tmp_path / "slang"), None, "")
    toolchain = {"slang": "test"}
    before = compile_counts["library"]
    library = library_dir(guard, toolchain, {})
    assert library_dir(guard, toolchain, {}) == library
    assert compile_counts["library"] == before + 1
    assert library.is_relative_to(guard.root) and (library / LIBRARY_FILE).is_file()
    assert ModuleSeals(guard.root).damaged() == []
    assert library_dir(guard, {"slang": "another"}, {}) != library  # keyed by the toolchain

    module = ModuleText("m", tmp_path / "user" / "m.slang", MODULE)
    kernels = kernels_of(MIX, SIGNATURES[MIX], tmp_path)
    made = build(module, kernels, [], {}, "sm_90", library)
    alone = cuda_source(module, kernels, library=library)
    assert len({b.cubin for b in made.values()}) == 1  # one NVRTC run for both
    for kernel in kernels:
        built = made[kernel.name]
        assert built.entry == kernel.name and built.group == THREADS_PER_GROUP
        assert elf_arch(built.cubin) == 90
        assert built.layout == alone.entries[kernel.name].layout
        compiled = kernel_parameters(elf_sections(built.cubin)[f".nv.info.{kernel.name}"])
        assert [offset for offset, _ in compiled] == [p[1] for p in built.layout["params"]]

    with open(library / LIBRARY_FILE, "r+b") as f:
        f.seek(1000)
        f.write(b"damaged")
    with pytest.warns(CacheWarning, match="no longer matches"):
        assert library_dir(guard, toolchain, {}) == library
    assert compile_counts["library"] == before + 3
    assert ModuleSeals(guard.root).damaged() == []


def test_a_forgotten_module_is_loaded_afresh(tmp_path):
    from slangspec.compile.cuda import source as cs
    from slangspec.compile.slang.api import global_session

    module = ModuleText("m", tmp_path / "m.slang", "float f(float x) { return x; }\n")
    cs.front_end(module, content="one")
    cs.front_end(module, content="one")  # the same session, kept
    held = [k for k in cs._sessions if k[-2:] == (module, "one")]
    assert len(held) == 1
    global_session().run(cs.forget, module, "one")
    assert not [k for k in cs._sessions if k[-2:] == (module, "one")]
    again = cs.front_end(module, content="one")
    assert again.layout.find_function_by_name("f") is not None


@pytest.fixture
def precompiled(monkeypatch):
    """Nothing precompiled yet in this process, as in a fresh one, and every NVRTC run's
    options noted."""
    monkeypatch.setattr(nvrtc, "_precompiled", {})
    runs: list[list[str]] = []
    original = nvrtc.Nvrtc._cubin

    def noted(self, source, flags, name, headers, arch):
        runs.append(list(flags))
        return original(self, source, flags, name, headers, arch)

    monkeypatch.setattr(nvrtc.Nvrtc, "_cubin", noted)
    return runs


@needs_nvrtc
def test_a_kept_prelude_is_precompiled_and_the_cubin_stays_the_same(built, cubin, precompiled):
    _, source = built
    prelude = split_prelude(source.text)[0]
    nvrtc.warm_up("sm_90", prelude)
    assert nvrtc.nvrtc().compile(source.text, "sm_90", source.half) == cubin
    assert "-pch" in precompiled[0], "the warm-up precompiles it"
    assert "-pch" in precompiled[-1], "the compile reads it"


@needs_nvrtc
def test_preludes_precompiled_for_two_architectures_both_serve(built, precompiled):
    _, source = built
    plain = nvrtc.cubins(source.text, ["sm_90", "sm_80"], source.half)
    prelude = split_prelude(source.text)[0]
    nvrtc.warm_up("sm_90", prelude)
    nvrtc.warm_up("sm_80", prelude)
    assert nvrtc.cubins(source.text, ["sm_90", "sm_80"], source.half) == plain
    assert sum("-pch" in run for run in precompiled) == 4, "two made, two read"


@needs_nvrtc
def test_a_precompiled_prelude_whose_directory_went_compiles_without_it(built, cubin, precompiled):
    _, source = built
    nvrtc.warm_up("sm_90", split_prelude(source.text)[0])
    made = nvrtc._precompiled["sm_90"]
    assert made.begins(source.text)
    shutil.rmtree(made.options[1].partition("=")[2])  # a cleaner of the temporary directory
    assert nvrtc.nvrtc().compile(source.text, "sm_90", source.half) == cubin
    assert "sm_90" not in nvrtc._precompiled and "-pch" not in precompiled[-1]


@needs_nvrtc
def test_a_prelude_other_than_the_precompiled_one_compiles_without_it(built, cubin, precompiled):
    _, source = built
    prelude = split_prelude(source.text)[0]
    # It compiles, to other code: each thread would index by its block.
    export = "#define SLANG_PRELUDE_EXPORT\n"
    other = prelude.replace(export, export + "#define threadIdx blockIdx\n")
    assert other != prelude
    nvrtc.warm_up("sm_90", other)
    assert nvrtc.nvrtc().compile(source.text, "sm_90", source.half) == cubin
    assert "-pch" in precompiled[0] and "-pch" not in precompiled[-1]


@needs_nvrtc
def test_a_build_keeps_its_prelude_for_the_next_process(tmp_path, built, precompiled):
    kernels, source = built
    module = ModuleText("m", tmp_path / "user" / "m.slang", MODULE)
    kept = tmp_path / "modules" / "p" / "0" / "slang-cuda-prelude.h"
    poly = [k for k in kernels if k.name.startswith("k_poly")]
    first = build(module, poly, (), {}, "sm_90", None, prelude=kept)
    assert kept.read_text() == split_prelude(source.text)[0]
    kept.write_text("damaged")  # neither used nor harmful: kept whole again by the next build
    nvrtc.warm_up("sm_90", kept.read_text())
    assert build(module, poly, (), {}, "sm_90", None, prelude=kept) == first
    assert kept.read_text() == split_prelude(source.text)[0]


def test_precompiled_headers_of_processes_no_longer_running_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(nvrtc.tempfile, "gettempdir", lambda: str(tmp_path))
    parent = tmp_path / f"slangspec-nvrtc-{os.getuid()}"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for pid in (gone.pid, os.getppid()):
        (parent / str(pid)).mkdir(parents=True)
        (parent / str(pid) / "x.pch").write_bytes(b"pch")
    mine = nvrtc._pch_directory()
    assert mine.parent == parent / str(os.getpid()) and mine.is_dir()
    assert not (parent / str(gone.pid)).exists()
    assert (parent / str(os.getppid()) / "x.pch").exists(), "a running process's is left"


WAITER = """
import json, sys
import torch
import slangspec
from slangspec.cache_store import cache as cache_module
from slangspec.settings import compile_counts
from slangspec.runtime.module_base import BuildModule, load_module
from slangspec.signatures import call_signature

shader, lib, root, hooked = sys.argv[1:5]


def module():
    cache = slangspec.Cache(root)
    return load_module(BuildModule, shader, include_paths=[lib], cache=cache, device="cuda")


builder, waiter = module(), module()
signature = call_signature(builder.poly.id, (torch.ones(1, requires_grad=True), torch.ones(7)))
seen = {}
if hooked == "amend":  # the forward alone first: the backward is then built after its entry
    seen["forward"] = builder.poly.warm(signature, [])
original = getattr(cache_module.CacheStore, hooked)


def hook(self, *args, **kwargs):
    result = original(self, *args, **kwargs)
    if "waiter" not in seen:  # where a process waiting on the lease stops waiting
        before = dict(compile_counts)
        seen["waiter"] = waiter.poly.warm(signature)
        seen["compiled"] = {k: n - before.get(k, 0) for k, n in compile_counts.items()}
    return result


setattr(cache_module.CacheStore, hooked, hook)
seen["builder"] = builder.poly.warm(signature)
print(json.dumps(seen))
"""


def waited(cache: Path, hooked: str) -> dict:
    """What a waiter found (``WAITER``), looking when the builder's ``Cache.<hooked>`` has
    changed the row, in an sm_90 build with no GPU."""
    here = Path(__file__).parent
    shader, lib = here / "shaders" / "cached.slang", here / "slang_lib"
    env = {**os.environ, "SLANGSPEC_DEVICE": "cuda", "SLANGSPEC_CUDA_ARCH": "sm_90"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = python(WAITER, shader, lib, cache, hooked, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["builder"] == "built" and seen.get("forward", "built") == "built", seen
    return seen


@needs_nvrtc
def test_a_process_that_finds_the_row_of_a_build_finds_its_cubins_with_it(tmp_path):
    """A process waiting on a build's lease stops as soon as the entry's row is there: the
    row comes with the build's cubins, or the waiter builds every kernel again (one cubin a
    kernel) and the build's own cubin ends up referenced by no entry."""
    seen = waited(tmp_path / "cache", "insert")
    assert seen["waiter"] == "cached" and not any(seen["compiled"].values()), seen
    verified = subprocess.run(
        [sys.executable, "-m", "slangspec", "cache", "verify", "--cache-dir", tmp_path / "cache"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.returncode == 0, verified.stdout[-2000:]


@needs_nvrtc
def test_a_process_that_finds_a_backward_kernel_in_its_row_finds_its_cubin_with_it(tmp_path):
    """The same for a backward kernel built after its forward: a waiter stops waiting when the
    row names the kernel's source, so the row names its cubin in the same change, or the
    waiter compiles the kernel again from that source."""
    seen = waited(tmp_path / "cache", "amend")
    assert seen["waiter"] == "cached" and not any(seen["compiled"].values()), seen


def test_a_front_end_let_go_while_slangs_thread_is_busy_is_released_without_waiting(tmp_path):
    """The garbage collector runs a front end's finalizer on whatever thread allocates, inside
    whatever lock that thread holds (one was the Slang thread's own queue lock, and the
    process hung): the release is queued for Slang's thread, never waited for."""
    owner = SlangSession()
    module = ModuleText("let_go", tmp_path / "let_go.slang", "float f(float x) { return x; }")
    front = front_end(module, session=owner)
    session = front._keep.session
    forget(module, "")
    busy, go = threading.Event(), threading.Event()
    threading.Thread(target=owner.run, args=(lambda: busy.set() or go.wait(60),)).start()
    busy.wait()
    unblock = threading.Timer(20, go.set)
    unblock.start()
    del front
    waited = go.is_set()
    go.set()
    unblock.cancel()
    assert not waited, "letting go of a front end waited for Slang's busy thread"
    owner.run(lambda: None)
    assert session._handle == 0, "the session was never released"
