"""Kernels keyed by what their function reaches in its module: an edit elsewhere in the module
leaves them valid, and any edit of what they reach replaces them. The tests share the session's
cache: each cache a process opens keeps a slangpy device of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import slangspec
from slangspec.settings import compile_counts
from slangspec.signatures.reach import reached_text

MODULE = """import other;
static const float K = 2.0;
struct Pair { float a; float b; };
[Differentiable] float helper(float x) { return x * K; }
[Differentiable] float f(float x) { return helper(x); }
[Differentiable] float g(Pair p) { return p.a * p.b; }
[Differentiable] float h(float x) { return twice(x); }
T pick<T>(T a, T b) { return a; }
float k(float x) { return pick<float>(x, 1.0); }
// the end
"""
OTHER = "[Differentiable] float twice(float x) { return 2.0 * x; }\n"
FUNCTIONS = ("f", "g", "h", "k")

EDITS = {
    "f's own body": (("return helper(x);", "return helper(x) + 1.0;"), {"f"}),
    "a helper f calls": (("return x * K;", "return x * K * K;"), {"f"}),
    "a constant f's helper reads": (("K = 2.0", "K = 3.0"), {"f"}),
    "a struct g takes": (("float b; }", "float b; float c; }"), {"g"}),
    "a generic k calls": (("return a; }", "return b; }"), {"k"}),
    "a comment": (("// the end", "// the very end"), set()),
    "the space between tokens": (("{ return a; }", "{\n    return a;\n}"), set()),
    "a new function nothing calls": (("// the end", "float unused() { return K; }"), set()),
    "an overload of f's helper": (("// the end", "float helper(int x) { return 0.0; }"), {"f"}),
    "a derivative declared for f": (
        (
            "// the end",
            "[ForwardDerivativeOf(f)] DifferentialPair<float> f_fwd(DifferentialPair<float> x)"
            " { return diffPair(x.p, x.d); }",
        ),
        {"f"},
    ),
    "a global shader parameter": (("// the end", "uniform float scale;"), set(FUNCTIONS)),
    "an extension": (
        ("// the end", "extension Pair { float sum() { return a + b; } }"),
        set(FUNCTIONS),
    ),
    "the preprocessor": (("// the end", "#define SCALE 2"), set(FUNCTIONS)),
}


def keys(directory: Path, cache: str) -> dict[str, str]:
    m = slangspec.load(directory / "mod.slang", cache_dir=cache)
    return {name: getattr(m, name).cache_key("signature") for name in FUNCTIONS}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_replaces_the_keys_of_what_reaches_it_and_no_others(tmp_path, cache_dir, edit):
    (old, new), changed = EDITS[edit]
    (tmp_path / "other.slang").write_text(OTHER)
    (tmp_path / "mod.slang").write_text(MODULE)
    before = keys(tmp_path, cache_dir)
    assert old in MODULE
    (tmp_path / "mod.slang").write_text(MODULE.replace(old, new))
    after = keys(tmp_path, cache_dir)
    assert {n for n in FUNCTIONS if before[n] != after[n]} == changed


def test_an_edit_of_an_imported_module_replaces_every_key(tmp_path, cache_dir):
    (tmp_path / "other.slang").write_text(OTHER)
    (tmp_path / "mod.slang").write_text(MODULE)
    before = keys(tmp_path, cache_dir)
    (tmp_path / "other.slang").write_text(OTHER.replace("2.0", "3.0"))
    after = keys(tmp_path, cache_dir)
    assert all(before[n] != after[n] for n in FUNCTIONS)


@pytest.mark.parametrize(
    "text",
    [
        "float f() { return 1.0; }\n/* never closed",
        'float f() { return "never closed; }',
        "float f() { return 1.0; }\nfloat g() {",
        "float f() { return __LINE__; }",
        "implementing whole;\nfloat f() { return 1.0; }",
    ],
    ids=["comment", "string", "brace", "__LINE__", "several files"],
)
def test_text_whose_reach_is_uncertain_is_keyed_whole(text):
    assert reached_text(text, ["f"]) is None


EDITED = """import slangpy;
[Differentiable] float f(IDiffTensor<float, 1> a, int i) { return a[i] * a[i]; }
[Differentiable] float g(float x) { return 3.0 * x; }
"""


def test_after_an_edit_only_the_edited_function_is_built_again(tmp_path, cache_dir, tdev, kind):
    cache = cache_dir
    path = tmp_path / "edited.slang"
    path.write_text(EDITED)
    a = torch.arange(4.0, device=tdev, requires_grad=True)

    def both(m):
        y = m.f(a, slangspec.grid((4,)))
        z = m.g(a)
        (y.sum() + z.sum()).backward()
        return y.detach(), z.detach()

    both(slangspec.load(path, cache_dir=cache))
    a.grad = None
    path.write_text(EDITED.replace("3.0 * x", "4.0 * x"))
    m = slangspec.load(path, cache_dir=cache)
    compile_counts.clear()
    y = m.f(a, slangspec.grid((4,)))
    y.sum().backward()
    # f, untouched, compiles nothing: its entry, its description and (on CUDA) its cubins are
    # served; Vulkan compiles its stored kernels against the module's new text.
    assert compile_counts["specialize"] == compile_counts["codegen"] == 0
    if kind == "cuda":
        assert compile_counts["front_end"] == compile_counts["kernel"] == 0
    torch.testing.assert_close(y.detach(), a.detach() ** 2)
    torch.testing.assert_close(a.grad, 2 * a.detach())
    z = m.g(a)
    assert compile_counts["specialize"] == 1
    torch.testing.assert_close(z.detach(), 4.0 * a.detach())
