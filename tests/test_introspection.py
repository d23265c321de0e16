"""What a user asks of a module and its functions: dir, help, inspect.signature, types."""

import importlib.resources
import inspect
import pydoc
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import slangspec
from slangspec.cli import main
from slangspec.runtime import backend
from slangspec.runtime.module import Function

SURFACE = Path(__file__).parent / "shaders" / "surface.slang"


@pytest.fixture(scope="module")
def sf(cache_dir):
    return slangspec.load(SURFACE, cache_dir=cache_dir)


def test_dir_lists_the_functions_the_module_declares(sf, cache_dir, monkeypatch):
    names = set(dir(sf))
    assert {"polynomial", "reflect_ray", "add_out", "layer_out", "scale_inout"} <= names
    assert {"cache", "device_kind"} <= names  # its attributes stay

    # Another process on this cache answers from what the cache remembers, starting no Slang.
    def refuse(*args):
        raise AssertionError("dir() started the Slang front-end")

    monkeypatch.setattr(backend.SlangBackend, "front_end", refuse)
    again = slangspec.load(SURFACE, cache_dir=cache_dir)
    assert set(again.function_names()) == set(sf.function_names())


def test_dir_of_a_module_that_does_not_compile_lists_its_attributes(tmp_path):
    broken = slangspec.load_source(
        "broken", "float f(float x) { return y; }", cache_dir=str(tmp_path)
    )
    assert "device_kind" in dir(broken) and "f" not in dir(broken)


def test_help_and_doc_show_the_slang_signature(sf):
    doc = sf.add_out.__doc__
    assert "[Differentiable] void add_out(float a, float b, out float res)" in doc
    assert "inout vector<float,3> v" in sf.scale_inout.__doc__
    assert "void add_out(float a, float b, out float res)" in pydoc.render_doc(sf.add_out)
    assert Function.__doc__.startswith("One Slang function of a module")


def test_inspect_signature_names_the_parameters(sf):
    assert str(inspect.signature(sf.polynomial)) == "(a, b, c, x, *, _result=None)"


def test_the_package_is_typed():
    assert (importlib.resources.files("slangspec") / "py.typed").is_file()


SHADOWED = """
float path(float x) { return x + 1; }
float cache(float x) { return x + 2; }
float name(float x) { return x + 3; }
float functions(float x) { return x + 4; }
"""


def test_a_function_named_like_a_module_attribute_is_callable(cache_dir, tdev, tmp_path):
    m = slangspec.load_source("shadowed", SHADOWED, cache_dir=cache_dir)
    x = torch.zeros(2, device=tdev)
    assert m["path"](x).tolist() == [1.0, 1.0]
    assert m.functions.cache(x).tolist() == [2.0, 2.0]
    assert m.functions["name"](x).tolist() == [3.0, 3.0]
    assert m["functions"](x).tolist() == [4.0, 4.0]
    assert isinstance(m.cache, slangspec.Cache) and m.name == "shadowed"
    assert sorted(m.functions) == ["cache", "functions", "name", "path"]
    assert "path" in m.functions and "nope" not in m.functions
    with pytest.warns(UserWarning, match=r"the functions cache, functions, name, path share"):
        dir(m)

    module = tmp_path / "shadowed.slang"
    module.write_text(SHADOWED)
    cache = str(cache_dir)  # the session's: a cache of its own would open a device of its own
    r = CliRunner().invoke(main, ["explain", str(module), "path", "f32[N]", "--cache-dir", cache])
    assert r.exit_code == 0 and "miss" in r.output, r.output
    manifest = tmp_path / "warm.toml"
    manifest.write_text(
        f'[[module]]\npath = "{module}"\n\n[[module.function]]\nname = "cache"\n'
        'specializations = [["f32[N]"], { x = "f32[N] grad" }]\n'
    )
    r = CliRunner().invoke(main, ["warm", str(manifest), "--jobs", "1", "--cache-dir", cache])
    assert r.exit_code == 0, r.output
