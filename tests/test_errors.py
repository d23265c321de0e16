"""Bad input: each gets a clear error naming the function and argument, and the next valid call
still works."""

import re
import traceback
import warnings
from pathlib import Path

import click
import numpy as np
import pytest
import torch

import slangspec
from slangspec.settings import compile_counts

SHADERS = Path(__file__).parent / "shaders"


@pytest.fixture(scope="module")
def ops(cache_dir):
    return slangspec.load(SHADERS / "ops.slang", cache_dir=cache_dir)


@pytest.fixture
def valid(ops, tdev):
    """A valid call, made after each bad one to prove nothing was poisoned."""

    def call():
        x = torch.arange(4.0, device=tdev, requires_grad=True)
        y = ops.poly(x, x)
        y.sum().backward()
        torch.testing.assert_close(y, (x * x * x + 3 * x).detach())
        torch.testing.assert_close(x.grad, (3 * x * x + 3).detach())

    call()
    yield
    call()


def other_device(tdev):
    return "cpu" if tdev == "cuda" else "meta"


def test_wrong_dtype(ops, tdev, valid):
    x = torch.ones(4, dtype=torch.float64, device=tdev)
    with pytest.raises(
        TypeError,
        match=r"ops::poly: argument 2 \('x'\): expected a float32 "
        r"tensor, got a float64 tensor",
    ):
        ops.poly(torch.ones(4, device=tdev), x)


def test_wrong_rank_for_vector_parameter(ops, tdev, valid):
    with pytest.raises(
        ValueError,
        match=r"ops::scale3: argument 1 \('v'\): expected a tensor "
        r"whose trailing dimensions are \(3,\)",
    ):
        ops.scale3(torch.ones(4, device=tdev), 1.0)
    with pytest.raises(
        ValueError,
        match=r"argument 1 \('v'\): expected a tensor whose trailing "
        r"dimensions are \(3,\) for vector<float,3>, got shape \(10, 4\)$",
    ):
        ops.scale3(torch.ones(10, 4, device=tdev), 1.0)
    with pytest.raises(ValueError, match=r"got shape class x4$"):  # from a signature alone
        ops.scale3.plan(torch.ones(10, 4, device=tdev), 1.0)


def test_a_numpy_array_is_named_as_one(ops, tdev, valid):
    with pytest.raises(TypeError, match=r"expected a float32 tensor, got a float64 numpy array"):
        ops.poly(1.0, np.ones(3))


def test_tensor_on_the_wrong_device(ops, tdev, valid):
    bad = torch.ones(4, device=other_device(tdev))
    with pytest.raises(ValueError, match=r"ops::poly: argument 2 \('x'\): expected a "):
        ops.poly(torch.ones(4, device=tdev), bad)


def test_mismatched_broadcast_shapes(ops, tdev, valid):
    with pytest.raises(
        ValueError,
        match=r"ops::poly: call shapes do not broadcast: argument 1 "
        r"\('a'\) \(5,\), argument 2 \('x'\) \(6,\)",
    ):
        ops.poly(torch.ones(5, device=tdev), torch.ones(6, device=tdev))


def test_unknown_function(ops, tdev, valid):
    with pytest.raises(slangspec.UnknownFunctionError, match="module 'ops' has no function 'nope'"):
        ops.nope(torch.ones(4, device=tdev))
    with pytest.raises(ValueError):
        ops.nope(1.0)


def test_a_missing_function_is_a_missing_attribute(ops):
    assert not hasattr(ops, "nope")
    assert getattr(ops, "nope", None) is None
    with pytest.raises(AttributeError, match="module 'ops' has no function 'nope'"):
        ops.nope  # noqa: B018
    assert hasattr(ops, "poly")


def test_non_tensor_junk(ops, tdev, valid):
    with pytest.raises(TypeError, match="cannot pass a value of type str"):
        ops.poly("a", torch.ones(4, device=tdev))
    with pytest.raises(TypeError, match="cannot pass a value of type set"):
        ops.poly({1.0}, torch.ones(4, device=tdev))


def test_wrong_argument_count(ops, tdev, valid):
    with pytest.raises(TypeError, match=r"ops::poly: expected 2 arguments \(a, x\), got 3"):
        ops.poly(1.0, 2.0, 3.0)


def test_python_scalar_of_the_wrong_kind(ops, tdev, valid):
    with pytest.raises(
        TypeError,
        match=r"ops::add_int: argument 2 \('b'\): expected .* got "
        r"Python float",
    ):
        ops.add_int(torch.ones(3, dtype=torch.int32, device=tdev), 1.5)


def test_grad_tensor_into_a_written_tensor(ops, tdev, valid):
    out = torch.zeros(4, device=tdev, requires_grad=True)
    with pytest.raises(
        ValueError,
        match=r"ops::fill: argument 1 \('o'\): a tensor written by the "
        r"kernel must not require grad",
    ):
        ops.fill(out, slangspec.grid((4,)), 1.0)


def test_bad_module_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Slang module"):
        slangspec.load(tmp_path / "missing.slang")
    bad = tmp_path / "bad-name.slang"
    bad.write_text("float f(float x) { return x; }")
    with pytest.raises(ValueError, match=r"expected a '<identifier>\.slang' file name"):
        slangspec.load(bad)
    with pytest.raises(ValueError, match="must be an identifier"):
        slangspec.load_source("no good", "float f(float x) { return x; }")


def test_slang_compile_error_is_reported_and_nothing_is_cached(cache_dir, tdev):
    m = slangspec.load_source("broken", "float f(float x) { return x +; }", cache_dir=cache_dir)
    with pytest.raises(Exception, match="broken"):
        m.f(torch.ones(3, device=tdev))
    with pytest.raises(Exception, match="broken"):
        m.f(torch.ones(3, device=tdev))


def test_an_inout_parameter_is_written_in_place_and_needs_a_tensor(cache_dir, tdev):
    m = slangspec.load_source("dirs", "void g(inout float z) { z += 1; }", cache_dir=cache_dir)
    z = torch.ones(3, device=tdev)
    m.g(z)
    torch.testing.assert_close(z, torch.full((3,), 2.0, device=tdev))
    with pytest.raises(
        TypeError,
        match=r"dirs::g: argument 1 \('z'\): expected a float32 tensor for float, which the call "
        r"writes, got Python float",
    ):
        m.g(1.0)


def test_junk_arguments_name_the_function_and_argument(ops, tdev, valid):
    x = torch.ones(4, device=tdev)
    for junk, kind in (
        (None, "NoneType"),
        ("a", "str"),
        ({1.0}, "set"),
        (1j, "complex"),
    ):
        with pytest.raises(
            TypeError,
            match=rf"^ops::poly: argument 1 \('a'\): cannot pass a value of type {kind}; "
            r"expected a torch tensor, numpy array, Python float/int/bool, a tuple or list of "
            r"those \(a vector or array\), slangspec\.grid, call_id\(\), thread_id\(\), "
            r"wang_hash\(\), rand_float\(\) or a dict of those \(a struct\)$",
        ):
            ops.poly(junk, x)
    with pytest.raises(TypeError, match=r"^ops::poly: argument 2 \('x'\): cannot pass .* NoneType"):
        ops.poly(x, None)
    with pytest.raises(TypeError, match=r"^ops::poly: argument 2 \('x'\): cannot pass .* NoneType"):
        ops.poly.signature(x, None)
    with pytest.raises(TypeError, match=r"^ops::poly: argument 2: cannot pass .* NoneType"):
        slangspec.call_signature("ops::poly", (x, None))
    with pytest.raises(slangspec.UnknownFunctionError, match="has no function 'nope'"):
        ops.nope(None)  # the function is looked up before its arguments
    bf16 = r" \(bfloat16 is not supported on Vulkan or CUDA: .*"
    bf16 += r"convert the tensor with \.float\(\)\)"
    for dtype, why in ((torch.complex64, ""), (torch.bfloat16, bf16)):
        name = str(dtype).removeprefix("torch.")
        with pytest.raises(
            TypeError,
            match=rf"^ops::poly: argument 2 \('x'\): expected a float32 tensor, got a {name} "
            rf"tensor{why}$",
        ):
            ops.poly(x, torch.ones(4, dtype=dtype, device=tdev))
    with pytest.raises(
        TypeError,
        match=r"^ops::poly: argument 2 \('x'\): cannot pass a uint16 tensor; expected a float16, "
        r"float32, float64, int32, int64, bool, int8, uint8 or int16 tensor$",
    ):
        ops.poly(x, torch.ones(4, dtype=torch.uint16, device=tdev))
    with pytest.raises(ValueError, match=r"^ops::poly: argument 2 \('x'\): .*negative"):
        ops.poly(x, np.arange(4.0, dtype=np.float32)[::-1])


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.to_sparse(),
        lambda t: t.to_sparse_csr(),
        lambda t: t.to_sparse_csc(),
        lambda t: t.to_mkldnn(),
    ],
    ids=["sparse_coo", "sparse_csr", "sparse_csc", "mkldnn"],
)
def test_non_strided_tensors_are_refused(ops, tdev, valid, make):
    a = torch.ones(1, 1, device=tdev)
    dense = torch.ones(2, 2, device=tdev)
    ops.poly(a, dense)  # the dense signature is memoized; the other layout must not hit it
    try:
        other = make(dense)
    except (RuntimeError, NotImplementedError):
        pytest.skip("this layout is not available here")
    layout = str(other.layout).removeprefix("torch.").strip("_")
    with pytest.raises(
        TypeError,
        match=rf"^ops::poly: argument 2 \('x'\): cannot pass a {layout} tensor; "
        r"expected a strided \(dense\) tensor$",
    ):
        ops.poly(a, other)


def test_python_ints_must_fit_32_bits(ops, tdev, valid):
    t = torch.ones(3, dtype=torch.int32, device=tdev)
    for b in (2**70, 2**31, -(2**31) - 1):
        with pytest.raises(
            ValueError,
            match=r"^ops::add_int: argument 2 \('b'\): expected an int from -2147483648 to "
            rf"2147483647 for int, got {b}$",
        ):
            ops.add_int(t, b)
    for a in (-1, 2**32, 2**70):
        with pytest.raises(
            ValueError,
            match=r"^ops::twice: argument 1 \('a'\): expected an int from 0 to 4294967295 for "
            rf"uint, got {a}$",
        ):
            ops.twice(a)
    v = torch.ones(3, device=tdev)
    with pytest.raises(ValueError, match=r"^ops::mix2: argument 3 \('i'\): expected an int from"):
        ops.mix2(v, v, 2**40)  # whole tensors: bound by name on Vulkan, packed on CUDA
    with pytest.raises(ValueError, match=r"^ops::poly: argument 1 \('a'\): expected a number "):
        ops.poly(10**400, v)
    with pytest.raises(ValueError, match=r"^ops::hpoly: argument 1 \('a'\): expected a number "):
        ops.hpoly(1e6, v.half())
    # The ends of each range still pass.
    assert ops.add_int(t, 2**31 - 1).tolist() == [-(2**31)] * 3
    assert ops.add_int(t, -(2**31)).tolist() == [-(2**31) + 1] * 3
    assert ops.twice(2**32 - 1).item() == -2
    assert ops.poly(1e30, torch.zeros(1, device=tdev)).item() == pytest.approx(3e30)


def test_call_shapes_past_a_32_bit_thread_index_are_refused(ops, cache_dir, tdev, valid):
    out = torch.zeros(4, device=tdev)
    with pytest.raises(
        ValueError,
        match=r"^ops::fill: call shape \(1099511627776,\) has 1099511627776 points; a kernel "
        r"runs at most 4294967295 threads: argument 2 \('i'\) \(1099511627776,\)$",
    ):
        ops.fill(out, slangspec.grid((2**40,)), 1.0)
    with pytest.raises(
        ValueError,
        match=r"^ops::fill: call shape \(2147483653,\) has an extent of 2147483653; a kernel "
        r"indexes extents of at most 2147483647: argument 2 \('i'\) \(2147483653,\)$",
    ):
        ops.fill(out, slangspec.grid((2**31 + 5,)), 1.0)
    m = slangspec.load_source("touch2", "void touch(int2 p, float v) {}", cache_dir=cache_dir)
    with pytest.raises(ValueError, match=r"^touch2::touch: call shape \(65536, 65537\) has "):
        m.touch(slangspec.grid((2**16, 2**16 + 1)), 1.0)
    m.touch(slangspec.grid((3, 2)), 1.0)


def test_size_and_duration_settings_parse_alike():
    from slangspec import settings
    from slangspec.cli import common

    for text, size in (
        ("1048576", 1 << 20),
        ("512K", 512 << 10),
        ("500m", 500 << 20),
        ("2G", 2 << 30),
        ("500MiB", 500 << 20),
        ("2gb", 2 << 30),
        (" 1.5 K ", 1536),
    ):
        assert settings.parse_size(text) == size
    for text, seconds in (("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800)):
        assert settings.parse_duration(text) == seconds
    assert settings.parse_duration("2W") == 2 * 604800
    for bad in ("", "lots", "-1", "1X", "1e3"):
        with pytest.raises(ValueError, match=r"expected a size like 1048576, 500M or 2G"):
            settings.parse_size(bad)
    with pytest.raises(ValueError, match=r"expected a duration like 90s, 15m, 12h or 7d"):
        settings.parse_duration("soon")
    with pytest.raises(click.BadParameter, match=r"'big': expected a size"):
        common.parse_size(None, None, "big")


def test_size_and_lease_settings_take_units(monkeypatch):
    from slangspec.cache_store import location

    monkeypatch.setenv("SLANGSPEC_CACHE_SIZE", "1G")
    assert location.size_bound() == 1 << 30
    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", "2m")
    assert location.lease_seconds() == 120
    monkeypatch.setenv("SLANGSPEC_CACHE_LEASE", "garbage")
    with pytest.raises(
        ValueError, match=r"^SLANGSPEC_CACHE_LEASE='garbage': expected a number of seconds > 0"
    ):
        location.lease_seconds()


def test_cache_dir_that_is_a_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("")
    given, where = re.escape(str(path)), re.escape(str(path.resolve()))
    with pytest.raises(
        ValueError,
        match=rf"^cache_dir='{given}': '{where}' is a file, not a directory; expected a directory",
    ):
        slangspec.load(SHADERS / "ops.slang", cache_dir=path)
    with pytest.raises(ValueError, match=r"^cache_dir='.*': '.*' is a file"):
        slangspec.load_source("inline", "float f(float x) { return x; }", cache_dir=path)


def test_a_module_that_does_not_compile_fails_at_its_first_use_naming_the_line(tmp_path):
    path = tmp_path / "broken.slang"
    path.write_text("float f(float x) { return y; }\n")
    m = slangspec.load(path, cache_dir=str(tmp_path / "c"))  # loading reads no Slang
    for use in (lambda: hasattr(m, "g"), lambda: m.f(1.0)):
        with pytest.raises(slangspec.SlangCompileError, match=r"broken.slang:1:27"):
            use()


BROKEN = "float f(float x) {\n  return x +;\n}\n"


def test_a_module_that_does_not_compile_is_compiled_once_and_said_once_as_the_user_named_it(
    cache_dir, tmp_path, tdev, monkeypatch
):
    """Slang's diagnostics, once, at the place the user wrote: a ``load_source`` module by its
    name, a file by its path, an imported file by its path; one front-end compile each."""
    from slangspec.runtime.module_base import BuildModule, load_module_source

    lib, own = tmp_path / "lib", tmp_path / "own.slang"
    lib.mkdir()
    (lib / "faulty.slang").write_text(BROKEN.replace("float f(", "float helper("))
    own.write_text(BROKEN)
    importer = "import faulty;\nfloat f(float x) { return helper(x); }\n"
    x = torch.ones(3, device=tdev)
    source = slangspec.load_source("broken", BROKEN, cache_dir=cache_dir)
    path = slangspec.load(own, cache_dir=cache_dir)
    imports = slangspec.load_source("importer", importer, include_paths=[lib], cache_dir=cache_dir)
    monkeypatch.setenv("SLANGSPEC_CUDA_ARCH", "sm_90")  # CUDA's build: no GPU needed
    cuda = load_module_source(
        BuildModule, "broken_cuda", BROKEN, device="cuda", cache_dir=cache_dir
    )
    uses = [
        (lambda: source.f(x), "broken.slang"),
        (lambda: path.f(x), str(own)),
        (lambda: imports.f(x), str(lib / "faulty.slang")),
        (lambda: cuda["f"], "broken_cuda.slang"),
    ]
    for use, file in uses:
        before = compile_counts["front_end"]
        with pytest.raises(slangspec.SlangCompileError) as caught:
            use()
        assert compile_counts["front_end"] == before + 1
        error = caught.value
        where = f"{file}:2:13"
        assert error.first_error == f"{where}: error[E20002]: syntax error"
        told = "".join(traceback.format_exception(error))
        for text in (str(error), told):
            assert text.count(where) == text.count("error[E20002]") == 1, told
        assert "slangspec-apart" not in told


def test_a_module_that_does_not_compile_is_not_compiled_again_at_later_look_ups(
    cache_dir, monkeypatch
):
    from slangspec.runtime.module_base import BuildModule, load_module_source

    monkeypatch.setenv("SLANGSPEC_CUDA_ARCH", "sm_90")  # CUDA's build counts its front-ends
    m = load_module_source(BuildModule, "broken_again", BROKEN, device="cuda", cache_dir=cache_dir)
    before = compile_counts["front_end"]
    for name in ("f", "g", "f"):
        with pytest.raises(slangspec.SlangCompileError, match=r"broken_again.slang:2:13"):
            m[name]
    assert compile_counts["front_end"] == before + 1


def test_a_compile_past_its_wait_warns_naming_the_module(tmp_path, tdev, monkeypatch):
    """Slang 2026.12 never returns from some backward passes: a compile that takes longer
    than SLANGSPEC_COMPILE_WARN says so from a timer, naming the module and the way round."""
    monkeypatch.setenv("SLANGSPEC_COMPILE_WARN", "0.001")
    m = slangspec.load_source("slow", "float f(float x) { return x * 3.0; }", cache_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(
            m.f(torch.ones(2, device=tdev)), torch.full((2,), 3.0, device=tdev)
        )
    told = [w for w in caught if issubclass(w.category, slangspec.StillCompilingWarning)]
    assert told, [str(w.message) for w in caught]
    assert "module 'slow': Slang has been compiling for 0.001 s" in str(told[0].message)
    assert "read the element before the branch" in str(told[0].message)


@pytest.fixture(scope="module")
def sf(cache_dir):
    return slangspec.load(SHADERS / "surface.slang", cache_dir=cache_dir)


def test_a_result_tensor_is_checked_as_an_out_parameter_is(ops, tdev, valid):
    x = torch.arange(4.0, device=tdev, requires_grad=True)
    with pytest.raises(
        ValueError,
        match=r"^ops::poly: _result: the call writes this tensor in place, so it must not be a "
        r"leaf that requires grad \(pass a clone, or one without grad\)$",
    ):
        ops.poly(x, x, _result=torch.zeros(4, device=tdev, requires_grad=True))


def test_an_expanded_tensor_is_never_written(ops, sf, tdev, valid):
    def expanded(*shape):
        return torch.zeros(1, *shape[1:], device=tdev).expand(*shape)

    a, b = torch.ones(5, device=tdev, requires_grad=True), torch.ones(5, device=tdev)
    grid = slangspec.grid
    calls = [
        ("surface::add_out: argument 3 ('res')", lambda: sf.add_out(a, b, expanded(5))),
        ("surface::scale_inout: argument 1 ('v')", lambda: sf.scale_inout(expanded(5, 3), 2.0)),
        ("ops::fill: argument 1 ('o')", lambda: ops.fill(expanded(4), grid((4,)), 1.0)),
        ("surface::write_wdiff: argument 1 ('o')", lambda: sf.write_wdiff(expanded(6), grid(5), a)),
        ("ops::poly: _result", lambda: ops.poly(b, b, _result=expanded(5))),
    ]
    for where, call in calls:
        with pytest.raises(
            ValueError,
            match=rf"^{re.escape(where)}: the call writes this tensor, so its elements must not "
            r"share memory, as an expanded tensor's do \(stride 0 in dimension 0\): pass a clone$",
        ):
            call()


def test_a_written_tensor_must_not_share_memory_with_what_autograd_keeps(ops, sf, tdev, valid):
    a = torch.ones(5, device=tdev, requires_grad=True)
    b, big = torch.ones(5, device=tdev), torch.zeros(10, device=tdev)
    x = torch.arange(4.0, device=tdev, requires_grad=True)
    y = x * 1
    calls = [
        ("surface::add_out: argument 3 ('res')", "argument 2 ('b')", lambda: sf.add_out(a, b, b)),
        (
            "surface::add_out: argument 3 ('res')",
            "argument 2 ('b')",
            lambda: sf.add_out(a, big[:5], big[3:8]),
        ),
        (
            "ops::note: argument 1 ('o')",
            "argument 3 ('x')",
            lambda: ops.note(x.detach(), slangspec.grid((4,)), x),
        ),
        ("ops::poly: _result", "argument 1 ('a')", lambda: ops.poly(y, x, _result=y)),
    ]
    for where, kept, call in calls:
        with pytest.raises(
            ValueError,
            match=rf"^{re.escape(where)}: the call writes this tensor, which shares memory with "
            rf"{re.escape(kept)}, a tensor autograd keeps for the backward pass: pass a clone$",
        ):
            call()
    with torch.no_grad():  # no backward pass: the write may land where the call read
        sf.add_out(a, b, b)
    torch.testing.assert_close(b, torch.full((5,), 2.0, device=tdev))


def test_self_is_a_parameter_name_like_any_other(ops, cache_dir, tdev, valid):
    x = torch.ones(3, device=tdev)
    with pytest.raises(
        TypeError, match=r"^ops::poly: got an unexpected keyword argument 'self'; its parameters "
    ):
        ops.poly(x, self=x)
    with pytest.raises(TypeError, match=r"^ops::poly: got an unexpected keyword argument 'self'"):
        ops.poly.map((0,))(x, self=x)
    with pytest.raises(TypeError, match=r"^ops::poly: map: no parameter named 'self'"):
        ops.poly.map(self=(0,))
    m = slangspec.load_source(
        "selfish", "float twice(float self) { return self * 2.0; }", cache_dir=cache_dir
    )
    torch.testing.assert_close(m.twice(self=x), 2 * x)


def test_a_byte_order_mark_is_not_part_of_a_module(cache_dir, tmp_path, tdev):
    text = "float twice_bom(float x) { return x * 2.0; }\n"
    marked, plain = tmp_path / "marked.slang", tmp_path / "plain" / "marked.slang"
    marked.write_text("\ufeff" + text, encoding="utf-8")
    plain.parent.mkdir()
    plain.write_text(text, encoding="utf-8")
    x = torch.ones(3, device=tdev)
    m = slangspec.load(marked, cache_dir=cache_dir)
    torch.testing.assert_close(m.twice_bom(x), 2 * x)
    signature = m.twice_bom.signature(x)
    same = slangspec.load(plain, cache_dir=cache_dir).twice_bom.cache_key(signature)
    assert m.twice_bom.cache_key(signature) == same
    s = slangspec.load_source("marked_source", "\ufeff" + text, cache_dir=cache_dir)
    torch.testing.assert_close(s.twice_bom(x), 2 * x)


def test_a_source_that_is_not_text_names_the_module_and_position(cache_dir):
    with pytest.raises(
        ValueError,
        match=r"^module 'lone': its source is not UTF-8 text: a lone surrogate '\\udc80' at "
        r"line 2, column 3$",
    ):
        slangspec.load_source("lone", "float f();\n//\udc80\n", cache_dir=cache_dir)


def test_defines_are_identifiers_with_one_line_values(cache_dir, tmp_path):
    source = "float f(float x) { return x; }"
    for defines, problem in (
        ({"X;}\nvoid evil(){": "1"}, r"'X;}\\nvoid evil\(\){': expected an identifier"),
        ({"": "1"}, r"'': expected an identifier"),
        ({"K": "1\n2"}, r"'K': expected a value of one line .*, got '1\\n2'"),
        ({"K": "1\r"}, r"'K': expected a value of one line"),
        ({"K": "1\0"}, r"'K': expected a value of one line"),
    ):
        with pytest.raises(ValueError, match=rf"^define {problem}"):
            slangspec.load_source("defined", source, defines=defines, cache_dir=cache_dir)
        with pytest.raises(ValueError, match=rf"^define {problem}"):
            slangspec.load(SHADERS / "ops.slang", defines=defines, cache_dir=cache_dir)
    from slangspec.aot.warm import ManifestError, parse_manifest

    manifest = tmp_path / "warm.toml"
    manifest.write_text(
        f'[[module]]\npath = "{SHADERS / "ops.slang"}"\ndefines = {{ K = "1\\n2" }}\n\n'
        '[[module.function]]\nname = "poly"\nspecializations = [["f32[N]", "f32[N]"]]\n'
    )
    with pytest.raises(ManifestError, match=r"warm.toml:3:1: define 'K': expected a value of one"):
        parse_manifest(manifest)


def test_every_error_numbers_an_argument_as_the_call_wrote_it(cache_dir, tdev):
    """Arguments count from 1, in the order the call wrote them, and a struct's fields are not
    arguments of their own: the signature's, the plan's and the call's errors agree."""
    m = slangspec.load_source(
        "numbering",
        "struct Light { float3 dir; float power; };\n"
        "float shade(float a, float b, Light light, float c) "
        "{ return a + b + light.power + light.dir.x + c; }\n",
        cache_dir=cache_dir,
    )
    one = torch.ones(4, device=tdev)
    light = {"dir": torch.ones(4, 3, device=tdev), "power": torch.ones(5, device=tdev)}
    with pytest.raises(
        ValueError,
        match=r"^numbering::shade: call shapes do not broadcast: argument 1 \('a'\) \(4,\), "
        r"argument 2 \('b'\) \(4,\), argument 3 \('light.dir'\) \(4,\), argument 3 "
        r"\('light.power'\) \(5,\), argument 4 \('c'\) \(4,\)$",
    ):
        m.shade(one, one, light, one)
    light["power"] = torch.ones(4, dtype=torch.float16, device=tdev)
    with pytest.raises(TypeError, match=r"^numbering::shade: argument 3 \('light.power'\): exp"):
        m.shade(one, one, light, one)
    light["power"] = None
    with pytest.raises(TypeError, match=r"^numbering::shade: argument 3 \('light'\): field "):
        m.shade(one, one, light, one)
    with pytest.raises(TypeError, match=r"^numbering::shade: argument 4 \('c'\): cannot pass"):
        m.shade(one, one, {**light, "power": one}, None)


def test_a_function_named_like_a_slang_builtin_lists_the_builtin_where_the_call_fits_both(
    cache_dir, tdev
):
    m = slangspec.load_source(
        "builtin_names",
        "float step(float x, float y) { return x + y; }\nfloat twice(float x) { return 2 * x; }\n"
        "float twice(int x) { return 2.0 * x; }\n",
        cache_dir=cache_dir,
    )
    x = torch.ones(2, device=tdev)
    with pytest.raises(
        TypeError,
        match=r"(?s)builtin_names::step: the call .* is ambiguous.*"
        r"\n  T step\(T y, T x\) \(not declared in the module: a Slang built-in",
    ):
        m.step(x, x)
    with pytest.raises(TypeError, match=r"builtin_names::twice: none of its 2 overloads takes"):
        m.twice(torch.ones(2, dtype=torch.float16, device=tdev))


def test_every_exception_of_the_package_is_one_family():
    """Every exception class slangspec defines is a ``slangspec.Error``, every warning a
    ``slangspec.SlangspecWarning``: ``except slangspec.Error`` catches whatever it raises of
    its own."""
    import importlib
    import inspect
    import pkgutil

    found = []
    for info in pkgutil.walk_packages(slangspec.__path__, "slangspec."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                family = slangspec.SlangspecWarning if issubclass(cls, Warning) else slangspec.Error
                found.append(cls)
                assert issubclass(cls, family), f"{info.name}.{cls.__name__}"
    assert len(found) > 20


def test_every_warning_the_package_gives_is_of_its_family():
    """Each ``warnings.warn`` in the source names a ``slangspec.SlangspecWarning``: a filter on
    the family sees every warning slangspec gives, a lost gradient's too."""
    import ast
    import importlib

    src = Path(slangspec.__file__).parent
    wrong = []
    for path in sorted(src.rglob("*.py")):
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn"
        ]
        if not calls:
            continue
        name = ".".join(("slangspec", *path.relative_to(src).with_suffix("").parts))
        module = importlib.import_module(name.removesuffix(".__init__"))
        for call in calls:
            given = call.args[1:2] or [k.value for k in call.keywords if k.arg == "category"]
            category = eval(ast.unparse(given[0]), vars(module)) if given else UserWarning
            if not issubclass(category, slangspec.SlangspecWarning):
                wrong.append(f"{name}:{call.lineno} warns a {category.__name__}")
    assert wrong == []
