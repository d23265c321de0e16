"""A module that would crash Slang (2026.12 ends the process at module load on a property
accessor marked differentiable) is refused by the call, naming the place and what to write
instead, and the process lives."""

import json

import pytest

from slangspec.signatures.slang_crashes import differentiable_accessor
from workers import python

HELPER = """
struct Scaled
{
    float x;
    property float twice { [Differentiable] get { return 2 * x; } }
};
"""
SQUARE = """
[Differentiable]
float square(float x) { return x * x; }
"""
CALL = """
import json, sys, torch, slangspec
if sys.argv[3] == "source":
    m = slangspec.load_source("crashing", sys.argv[2], cache_dir=sys.argv[1])
else:
    m = slangspec.load(sys.argv[2], cache_dir=sys.argv[1])
try:
    m.square(torch.ones(3, device=m.torch_device))
except slangspec.Error as exc:
    print(json.dumps({"type": type(exc).__name__, "message": str(exc), "place": exc.place}))
"""


def refusal(*args: object) -> dict:
    done = python(CALL, *args)
    assert done.returncode == 0, f"the process ended with {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_module_given_as_text_is_refused_at_its_line(tmp_path):
    got = refusal(tmp_path / "cache", HELPER + SQUARE, "source")
    assert got["type"] == "SlangCompileError"
    assert got["place"] == "crashing.slang"
    assert (
        "crashing.slang(5): error: a property whose get is marked [Differentiable]"
        in (got["message"])
    )
    assert "write a [Differentiable] method" in got["message"]


def test_a_file_the_module_imports_is_named(tmp_path):
    (tmp_path / "scaled.slang").write_text(HELPER)
    main = tmp_path / "main.slang"
    main.write_text("import scaled;\n" + SQUARE)
    got = refusal(tmp_path / "cache", main, "file")
    assert got["place"] == str(tmp_path / "scaled.slang")
    assert f"{tmp_path / 'scaled.slang'}(5): error:" in got["message"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("struct S { property float y { [Differentiable] get { return 1; } } };", (1, "get")),
        (
            "struct S {\n property y : float { get { return 1; }\n"
            " [BackwardDifferentiable] set {} } };",
            (3, "set"),
        ),
        (
            "struct S { property float y { [TreatAsDifferentiable]\n get { return 1; } } };",
            (1, "get"),
        ),
        ("// property float y { [Differentiable] get { return 1; } }", None),
        ("/* property float y {\n [Differentiable] get { return 1; } } */", None),
        ('let s = "property float y { [Differentiable] get";', None),
        ("struct S { __subscript(int i) -> float { [Differentiable] get { return 1; } } };", None),
        ("struct S { [Differentiable] float y() { return 1; } };", None),
        ("struct S { property float y { get { return 1; } } }; [Differentiable] float f();", None),
    ],
)
def test_only_a_property_accessor_in_code_marked_differentiable_is_found(text, found):
    got = differentiable_accessor(text)
    assert (got and (got[0], got[2])) == found
