"""slangpy 0.43.1's ``test_scalar_parameter_conversion.py`` (from the wheel's
``tests/slangpy_tests``), called through slangspec: a Python int converts to a ``float`` field or
parameter, and a list of ints to an ``Array<float, 5>``, as slangpy converts them."""

from __future__ import annotations

import slangspec


def test_scalar_to_field_conversion(cache_dir):
    source = (
        "struct Uniform { float x; }\nint scalar_to_field_test(Uniform u) { return int(u.x); }\n"
    )
    m = slangspec.load_source("scalar_to_field", source, cache_dir=cache_dir)
    assert int(m.scalar_to_field_test({"x": 512})) == 512


def test_scalar_to_parameter_conversion(cache_dir):
    source = "int scalar_to_parameter_test(float x) { return int(x); }\n"
    m = slangspec.load_source("scalar_to_parameter", source, cache_dir=cache_dir)
    assert int(m.scalar_to_parameter_test(512)) == 512


def test_array_conversion(cache_dir):
    source = "int array_test(Array<float, 5> x) { return int(x[0] + x[1] + x[2] + x[3] + x[4]); }\n"
    m = slangspec.load_source("array_conversion", source, cache_dir=cache_dir)
    assert int(m.array_test([1, 2, 3, 4, 5])) == 15
