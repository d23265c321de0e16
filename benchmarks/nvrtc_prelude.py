"""How much of a CUDA kernel's compile is NVRTC reading Slang's CUDA prelude, and what a
precompiled header of that prelude would save, in one process and across processes.

    python benchmarks/nvrtc_prelude.py [--repeat 3]        # CUDA only

Slang writes each CUDA kernel as one source, its prelude (the same text for every kernel of a
Slang release) followed by the kernel's own code, and slangpy hands that source to NVRTC. This
script has slangspec generate ``mix2``'s forward and backward kernels (as
``compile_threads.py`` does), compiles them through slangpy with the CUDA source dumped, and
splits each source where the two stop agreeing: the prelude. It then calls NVRTC itself (the
library Slang loaded) on

- the whole source, as Slang does;
- the prelude alone;
- the kernel's own code after ``#include`` of the prelude with NVRTC's precompiled headers
  (``-pch``): the first compile in a process writes the header, later ones read it;
- the same in a fresh process, given the header files the first process wrote;
- the two whole sources at once on two threads (NVRTC is called without the GIL).

Times are medians of ``--repeat``; each way's PTX is compared with the whole source's.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from compile_threads import ENTRY, HERE, bench_session, kernel_sources

PRELUDE = "slang_prelude.h"


class Nvrtc:
    """NVRTC through ctypes: a source to PTX, timed."""

    def __init__(self, library: str) -> None:
        self.lib = ctypes.CDLL(library)

    def compile(
        self, source: str, options: list[str], name: str = "kernel.cu"
    ) -> tuple[float, bytes | None, str]:
        """(seconds, PTX or None, log) of compiling ``source``."""
        lib, program = self.lib, ctypes.c_void_p()
        start = time.perf_counter()
        created = lib.nvrtcCreateProgram(
            ctypes.byref(program), source.encode(), name.encode(), 0, None, None
        )
        if created != 0:
            raise RuntimeError(f"nvrtcCreateProgram returned {created}")
        try:
            flags = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            failed = lib.nvrtcCompileProgram(program, len(options), flags)
            seconds = time.perf_counter() - start
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            ptx = None
            if not failed:
                lib.nvrtcGetPTXSize(program, ctypes.byref(size))
                text = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetPTX(program, text)
                ptx = text.raw
            return seconds, ptx, log.value.decode(errors="replace")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))


def loaded_nvrtc() -> str:
    """The NVRTC library this process has loaded (Slang loads it on its first CUDA compile)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "libnvrtc.so" in path:
            return path
    raise SystemExit("no NVRTC library is loaded: compile a CUDA kernel through slangpy first")


def cuda_includes() -> list[str]:
    """Where cuda_fp16.h and its kind are, as Slang tells NVRTC."""
    roots = [os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    return [f"-I{root}/include" for root in roots if root and Path(root, "include").is_dir()]


def split(sources: list[str]) -> tuple[str, list[str]]:
    """The lines every source starts with, and what each has after them."""
    lines = [s.splitlines(keepends=True) for s in sources]
    common = 0
    while all(len(ls) > common for ls in lines) and len({ls[common] for ls in lines}) == 1:
        common += 1
    return "".join(lines[0][:common]), ["".join(ls[common:]) for ls in lines]


FRESH = """
import sys, json
sys.path.insert(0, sys.argv[1])
from nvrtc_prelude import Nvrtc
nvrtc = Nvrtc(sys.argv[2])
options = json.loads(sys.argv[4])
source = open(sys.argv[3]).read()
for _ in range(2):
    seconds, ptx, log = nvrtc.compile(source, options)
    print(seconds, ptx is not None, "incompatible precompiled header" in log)
"""


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="slangspec-nvrtc-"))
    kernels = kernel_sources("cuda", work / "cache")[:2]

    import slangpy as spy

    device = spy.Device(type=spy.DeviceType.cuda, enable_compilation_reports=True)
    module_cache, dumps = work / "ir", work / "dumps"
    module_cache.mkdir()
    dumps.mkdir()
    session = bench_session(device, module_cache)
    print("| kernel | through slangpy | Slang | NVRTC, as Slang calls it |")
    print("| --- | ---: | ---: | ---: |")
    sources, ptxs = [], []
    for kernel, label in zip(kernels, ("forward", "backward"), strict=True):
        prefix = f"{dumps}/{label}-"
        start = time.perf_counter()
        module = session.load_module_from_source(
            kernel.stem, kernel.read_text(), str(work / kernel.name)
        )
        link = {"dump_intermediates": True, "dump_intermediates_prefix": prefix}
        program = session.link_program([module], [module.entry_point(ENTRY)], link_options=link)
        device.create_compute_kernel(program).pipeline  # noqa: B018
        seconds = time.perf_counter() - start
        report = program.get_compilation_report()
        print(
            f"| {label} | {seconds * 1000:.0f} ms | {report['compile_slang_time'] * 1000:.0f} ms"
            f" | {report['compile_downstream_time'] * 1000:.0f} ms |"
        )
        sources.append(next(dumps.glob(f"{label}-*.cu")).read_text())
        ptxs.append(next(dumps.glob(f"{label}-*.ptx")).read_bytes())

    prelude, own = split(sources)
    print(
        f"\nEach source: {len(sources[0]):,} and {len(sources[1]):,} characters, of which the "
        f"prelude is {len(prelude):,}; the kernels' own code: {len(own[0]):,} and "
        f"{len(own[1]):,}.\n"
    )
    target = re.search(rb"\.target\s+sm_(\d+)", ptxs[0])
    arch = [f"-arch=compute_{target.group(1).decode()}"] if target else []
    base = [*arch, *cuda_includes(), f"-I{work}", "-diag-suppress=1444,222"]
    (work / PRELUDE).write_text(prelude)
    headers = work / "pch"
    headers.mkdir()
    pch = [*base, "-pch", f"--pch-dir={headers}", "--instantiate-templates-in-pch=true"]
    included = [f'#include "{PRELUDE}"\n{code}' for code in own]
    nvrtc = Nvrtc(loaded_nvrtc())
    whole = [nvrtc.compile(s, base)[1] for s in sources]

    def timed(source: str, flags: list[str]) -> float:
        return statistics.median(nvrtc.compile(source, flags)[0] for _ in range(args.repeat))

    rows = [
        ("the whole source", timed(sources[0], base), "as Slang"),
        ("the prelude alone", timed(prelude, base), ""),
    ]
    first, ptx, _ = nvrtc.compile(included[0], pch)
    rows.append(("own code, writing the precompiled prelude", first, _same(ptx, whole[0])))
    seconds, ptx, _ = nvrtc.compile(included[1], pch)
    rows.append(("the other kernel, reading it", seconds, _same(ptx, whole[1])))
    rows.append(("either kernel, reading it again", timed(included[0], pch), ""))
    fresh_source = work / "fresh.cu"
    fresh_source.write_text(included[1])
    command = [sys.executable, "-c", FRESH, str(HERE), nvrtc.lib._name, str(fresh_source)]
    out = subprocess.run([*command, json.dumps(pch)], capture_output=True, text=True, check=True)
    for what, line in zip(("first", "second"), out.stdout.splitlines(), strict=True):
        seconds, compiled, refused = line.split()
        notes = [] if compiled == "True" else ["failed"]
        notes += ["header written by another process refused"] if refused == "True" else []
        rows.append((f"a fresh process, its {what} compile", float(seconds), "; ".join(notes)))
    pair = [0.0, 0.0]

    def one(i: int) -> None:
        pair[i] = nvrtc.compile(sources[i], base)[0]

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    both = time.perf_counter() - start
    rows.append(
        ("both whole sources, two threads at once", both, f"each {pair[0]:.3f}, {pair[1]:.3f} s")
    )
    print("| NVRTC compiles | ms | note |")
    print("| --- | ---: | --- |")
    for what, seconds, note in rows:
        print(f"| {what} | {seconds * 1000:.0f} | {note} |")


def _same(ptx: bytes | None, whole: bytes | None) -> str:
    if ptx is None:
        return "failed"
    return "same PTX" if ptx == whole else "different PTX"


if __name__ == "__main__":
    main()
