"""Modules that import each other (``main`` imports ``helper``, which imports ``main``), as
slangpy compiles them: Slang takes such a module only read from its own file, never given as
text, so slangspec has Slang read it from its file, and refuses a file that changed since."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import slangspec
from slangspec.codegen import ENTRY_POINT
from slangspec.compile.cuda.source import KernelSource, cuda_source, front_end
from slangspec.signatures.module_text import ModuleText
from slangspec.signatures.preimage import ModuleChangedError, imported_back, unchanged

MAIN = """
import helper;
public float base_value(float x) { return x * 2; }
public float run(float x) { return helped(x); }
"""
HELPER = """
import main;
public float helped(float x) { return base_value(x) + 1; }
"""


@pytest.fixture
def pair(tmp_path: Path) -> Path:
    (tmp_path / "helper.slang").write_text(HELPER)
    main = tmp_path / "main.slang"
    main.write_text(MAIN)
    return main


def test_modules_importing_each_other_are_called(pair, tmp_path, tdev):
    m = slangspec.load(pair, cache_dir=tmp_path / "cache")
    torch.testing.assert_close(m.run(torch.tensor([3.0, 4.0], device=tdev)), torch.tensor(
        [7.0, 9.0], device=tdev
    ))  # fmt: skip


def test_the_cuda_build_takes_them_too_without_a_gpu(pair):
    text = ModuleText("main", pair, MAIN)
    assert imported_back(text, [])
    reflected = front_end(text)
    assert reflected.layout.find_function_by_name("run") is not None
    kernel = (
        f'import main;\n[shader("compute")]\n[numthreads(32, 1, 1)]\nvoid {ENTRY_POINT}('
        "uint3 t : SV_DispatchThreadID, uniform float* o) { o[t.x] = run(1.0); }\n"
    )
    built = cuda_source(text, [KernelSource("k_run", kernel, pair.parent / "k_run.slang")])
    assert "__global__ void k_run(" in built.text


def test_only_a_module_imported_back_is_read_from_its_file(pair, tmp_path):
    assert not imported_back(ModuleText("helper2", tmp_path / "helper.slang", "float f();"), [])
    lone = tmp_path / "lone.slang"
    lone.write_text("import helper;\nfloat g(float x) { return helped(x); }\n")
    assert not imported_back(ModuleText("lone", lone, lone.read_text()), [])
    assert not imported_back(ModuleText("main", tmp_path / "absent.slang", MAIN), [])


def test_a_file_changed_after_it_was_keyed_is_refused(pair):
    text = ModuleText("main", pair, MAIN)
    unchanged(text)
    pair.write_text(MAIN + "\n// edited\n")
    with pytest.raises(ModuleChangedError, match=r"module 'main': .*main\.slang changed while"):
        unchanged(text)
