"""What a user asks of a module and its functions: dir, help, inspect.signature, types."""

import importlib.resources
import inspect
import pydoc
from pathlib import Path

import pytest

import slangspec
from slangspec.runtime import miss_path
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

    monkeypatch.setattr(miss_path.Builder, "front_end", refuse)
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
