"""Type resolution: (FunctionInfo, call signature) -> SpecializationPlan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import product
from typing import Any

from ..formats import PLAN_FORMAT, SIGNATURE_FORMAT
from ..signatures.generators import GENERATOR
from ..signatures.scalars import SLANG, SLANG_FLOATS
from ..signatures.text import (
    TYPE_KEY,
    ArgForm,
    CallSignature,
    DictForm,
    GeneratorForm,
    GridForm,
    NumbersForm,
    ResultForm,
    ScalarForm,
    TensorForm,
    TypeNameForm,
    argument_label,
    extent_class,
    extent_classes,
)
from .inference import PY_SCALARS_FOR, inferred
from .info import Direction, FunctionInfo, ParamInfo, TypeInfo
from .kinds import (
    KIND,
    TENSOR_KIND,
    UNBOUND_BUFFERS,
    UNBOUND_TENSORS,
    VALUE_KINDS,
    declared_kind,
)
from .leaf_plans import (
    arg_plan,
    element_plan,
    expected_value,
    index_width,
    lanes_of,
    output,
    takes_numbers,
    vector_width,
)
from .messages import PY_NAMES, ShapeClassError, a_dtype, a_or_an, describe, refusal, shape_text
from .plan import RESULT, ArgPlan, OutputPlan, ParamPlan, SpecializationPlan
from .sharing import shared
from .views import with_views


class _Resolver:
    def __init__(self, info: FunctionInfo) -> None:
        self.info = info
        self.fn = f"{info.module}::{info.name}"
        self.call_classes: dict[tuple[int, tuple[str, ...]], str] = {}

    def classed(self, a: ArgPlan, classes: str) -> ArgPlan:
        """``a``, the extent classes of its call dimensions noted for ``sharing.shared``."""
        self.call_classes[a.index, a.path] = classes
        return a

    def fail(self, exc: type[Exception], index: int, name: str, expected: str, got: str):
        return exc(f"{self.fn}: {argument_label(index, name)}: expected {expected}, got {got}")

    def directed(self, index: int, name: str, t: TypeInfo, direction: Direction) -> None:
        """TypeError naming the parameter where its kind is not passed in ``direction``."""
        row = declared_kind(t)
        if row is not None and direction not in row.directions:
            what = "a tensor" if row.leaf == "tensor" else a_or_an(row.name)
            allowed = " or ".join(f"'{d}'" for d in row.directions)
            expected = f"{a_or_an(allowed)} parameter for {what}"
            raise self.fail(TypeError, index, name, expected, f"'{direction}' {t.name}")

    def param(self, index: int, param: ParamInfo, form: ArgForm) -> list[ArgPlan]:
        """The leaves of one argument."""
        t = param.type
        self.directed(index, param.name, t, param.direction)
        if t.kind == "struct":
            return self.struct_leaves(index, param, t, form, (), self.carries(param))
        return [self.leaf(index, param, t, form, (), self.carries(param))]

    def bound(self, index: int, name: str, t: TypeInfo) -> None:
        """TypeError naming the parameter where ``t`` is one of slangpy's tensor types that no
        row binds (reflected as the struct or interface it is), or one of Slang's buffers."""
        base = t.name.partition("<")[0]
        for unbound, what in (
            (UNBOUND_TENSORS, "a tensor type slangspec binds"),
            (UNBOUND_BUFFERS, "a parameter type slangspec binds"),
        ):
            advice = unbound.get(base)
            if advice is not None:
                given = t.name.replace(", DefaultDataLayout>", ">")
                raise self.fail(TypeError, index, name, what, f"{given}: declare {advice}")

    def concrete(self, index: int, name: str, t: TypeInfo, form: ArgForm) -> TypeInfo:
        """The struct a value of interface ``t`` given as ``form`` is: the one of its
        conformances the dict names in ``TYPE_KEY``."""
        self.bound(index, name, t)
        names = [c.name for c in t.conformances]
        listed = ", ".join(names) if names else "the module declares none"
        named = dict(form.fields).get(TYPE_KEY) if isinstance(form, DictForm) else None
        if not isinstance(named, TypeNameForm):
            raise self.fail(
                TypeError,
                index,
                name,
                f"a dict of a struct's fields and its name in '{TYPE_KEY}', a struct that "
                f"conforms to {t.name} ({listed})",
                describe(form),
            )
        if named.name not in names:
            raise self.fail(
                TypeError,
                index,
                name,
                f"'{TYPE_KEY}' to name a struct of the module that conforms to {t.name} ({listed})",
                f"'{named.name}', which is not one",
            )
        return t.conformances[names.index(named.name)]

    def carries(self, param: ParamInfo) -> bool:
        """Whether a derivative can flow through ``param``: a parameter of a differentiable
        function, not ``no_diff``, and of a struct type only one that conforms to
        ``IDifferentiable``. Its leaves of float scalars then carry one each."""
        t = param.type
        return (
            self.info.differentiable
            and not param.no_diff
            and (t.kind != "struct" or t.differentiable)
        )

    def struct_leaves(
        self,
        index: int,
        param: ParamInfo,
        t: TypeInfo,
        form: ArgForm,
        path: tuple[str, ...],
        diff: bool,
        arrays: tuple[tuple[int, ...], ...] = (),
    ) -> list[ArgPlan]:
        """The leaves of struct ``t`` (an array of structs where it has a shape) at ``path``
        within the parameter; ``arrays`` the extents of the arrays of structs each step of
        ``path`` is taken in."""
        name = ".".join((param.name, *path))
        self.bound(index, name, t)
        if not isinstance(form, DictForm):
            raise self.fail(
                TypeError, index, name, f"a dict of the fields of {t.name}", describe(form)
            )
        given = dict(form.fields)
        named = given.pop(TYPE_KEY, None)
        element = t.name.partition("[")[0] if t.shape else t.name
        if isinstance(named, TypeNameForm) and named.name != element:
            raise self.fail(
                TypeError,
                index,
                name,
                f"the fields of {element} ('{TYPE_KEY}' naming it, where given)",
                f"'{TYPE_KEY}' '{named.name}'",
            )
        wanted = [f.name for f in t.fields]
        missing = [f for f in wanted if f not in given]
        extra = [f for f in given if f not in wanted]
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(map(repr, missing))}")
            if extra:
                problems.append(f"unknown {', '.join(map(repr, extra))}")
            raise self.fail(
                ValueError,
                index,
                name,
                f"the fields of {t.name} ({', '.join(wanted)})",
                "; ".join(problems),
            )
        leaves: list[ArgPlan] = []
        for f in t.fields:
            sub, steps = (*path, f.name), (*arrays, t.shape)
            row = declared_kind(f.type)
            if row is not None and not row.in_struct:
                full = ".".join((param.name, *sub))
                if row.leaf == "tensor":
                    expected = "a struct field of a tensor type the kernel reads"
                    got = f"{f.type.name}, which it writes (pass it as a parameter of its own)"
                else:
                    expected = "a struct field of a struct, value or tensor type"
                    got = f"the {row.name} {f.type.name} (take it as a parameter of its own)"
                raise self.fail(TypeError, index, full, expected, got)
            if f.type.kind == "struct":
                leaves += self.struct_leaves(index, param, f.type, given[f.name], sub, diff, steps)
            else:
                leaves.append(self.leaf(index, param, f.type, given[f.name], sub, diff, steps))
        return leaves

    def leaf(
        self,
        index: int,
        param: ParamInfo,
        t: TypeInfo,
        form: ArgForm,
        path: tuple[str, ...],
        may_diff: bool,
        arrays: tuple[tuple[int, ...], ...] = (),
    ) -> ArgPlan:
        name = ".".join((param.name, *path))
        base = {"param": name, "index": index, "path": path, "direction": param.direction}
        lanes = tuple(e for step in arrays for e in step)
        if lanes:
            base["arrays"] = arrays
            row = declared_kind(t)
            if row is not None and not row.in_struct_array:
                raise self.fail(
                    TypeError,
                    index,
                    name,
                    "a field of an array of structs that is a value",
                    f"{t.name} (pass a whole tensor as a parameter of its own)",
                )
            if isinstance(form, TensorForm) and t.kind in VALUE_KINDS:
                t = lanes_of(t, lanes)
        if t.kind in VALUE_KINDS:
            if param.direction == "out":
                return self.target(index, name, t, form, base)
            diff = may_diff and t.scalar in SLANG_FLOATS
            return self.value(index, name, t, form, diff, base)
        if t.kind == "tensor":
            self.directed(index, name, t, param.direction)
            return self.tensor(index, name, t, form, base)
        self.bound(index, name, t)
        if t.name.partition("<")[0] in TENSOR_KIND:
            raise self.fail(
                TypeError,
                index,
                name,
                "a tensor of numbers, vectors or matrices",
                f"{t.name}, a tensor of structs, which slangspec does not bind: take each field "
                "as a tensor of its own (Tensor<float3, 1>), or an array of structs given as a "
                "dict of the fields' tensors",
            )
        raise self.fail(
            TypeError,
            index,
            name,
            "a scalar, vector, matrix, array, struct or slangpy tensor parameter",
            f"unsupported parameter type {t.name}",
        )

    def value(
        self, index: int, name: str, t: TypeInfo, form: ArgForm, diff: bool, base: dict[str, Any]
    ) -> ArgPlan:
        inout = base["direction"] == "inout"
        if inout and base["path"] and not isinstance(form, TensorForm | DictForm):
            # A struct field written through a mutating method's this, given a Python value:
            # read as slangpy reads it, what the method writes into it dropped.
            base, inout = {**base, "direction": "in"}, False
        if isinstance(form, ScalarForm) and not inout:
            if t.kind not in ("scalar", "vector") or t.scalar not in PY_SCALARS_FOR[form.kind]:
                raise self.fail(TypeError, index, name, expected_value(t), PY_NAMES[form.kind])
            # A vector takes a number in every component, as a tuple of them binds it.
            return arg_plan(t, base, KIND["uniform"], elem=t.shape, differentiable=diff)
        if isinstance(form, NumbersForm) and not inout:
            if t.kind == "scalar" and not base["path"]:
                return self.spread(index, name, t, form, diff, base)
            return self.numbers(index, name, t, form, diff, base)
        if isinstance(form, GridForm) and not inout:
            if t.scalar not in ("int", "uint") or index_width(t) != form.rank:
                raise self.fail(
                    TypeError,
                    index,
                    name,
                    expected_value(t),
                    f"a {form.rank}-D grid (an int{form.rank} index or an int[{form.rank}])",
                )
            row = KIND["strided grid" if form.strided else "grid"]
            return arg_plan(t, base, row, rank=form.rank, call_dims=form.rank)
        if isinstance(form, GeneratorForm) and not inout:
            return self.generator(index, name, t, form, base)
        if inout and not isinstance(form, TensorForm):
            want = f"{a_dtype(SLANG[t.scalar].dtype)} tensor for {t.name}, which the call writes"
            raise self.fail(TypeError, index, name, want, describe(form))
        form = self.element_tensor(index, name, t, form)
        a = element_plan(
            t, base, form, KIND["element"], differentiable=diff, grad=diff and form.grad
        )
        return self.classed(a, form.extents[: a.call_dims])

    def generator(
        self, index: int, name: str, t: TypeInfo, form: GeneratorForm, base: dict[str, Any]
    ) -> ArgPlan:
        """A value the kernel makes per thread, of a type its row fills and of the width
        ``dims`` asks for."""
        row = GENERATOR[form.kind]
        width = index_width(t) if row.arrays else vector_width(t)
        fits = t.scalar in row.scalars and width > 0
        if not fits or (row.max_width and width > row.max_width):
            expected = f"a parameter {form.kind} fills ({row.fills})"
            raise self.fail(TypeError, index, name, expected, f"{t.name}")
        if form.dims is not None and form.dims != width:
            raise self.fail(
                TypeError,
                index,
                name,
                f"a parameter of {form.dims} component{'s' if form.dims > 1 else ''} for "
                f"{form.kind}(dims={form.dims})",
                f"{t.name}",
            )
        return arg_plan(t, base, KIND[form.kind], elem=t.shape)

    def numbers(
        self,
        index: int,
        name: str,
        t: TypeInfo,
        form: NumbersForm,
        diff: bool,
        base: dict[str, Any],
    ) -> ArgPlan:
        """A tuple of Python numbers for a vector or a one-dimensional array of scalars: one
        value for the whole call, its elements converted as a Python scalar of theirs is."""
        got = describe(form)
        if not takes_numbers(t):
            raise self.fail(TypeError, index, name, expected_value(t), got)
        if form.length != t.shape[0]:
            raise self.fail(
                TypeError, index, name, f"{t.shape[0]} numbers for {t.name}", str(form.length)
            )
        if t.scalar not in PY_SCALARS_FOR[form.kind]:
            raise self.fail(
                TypeError, index, name, f"{t.shape[0]} {t.scalar} values for {t.name}", got
            )
        return arg_plan(t, base, KIND["uniform"], elem=t.shape, differentiable=diff)

    def spread(
        self,
        index: int,
        name: str,
        t: TypeInfo,
        form: NumbersForm,
        diff: bool,
        base: dict[str, Any],
    ) -> ArgPlan:
        """A tuple of Python numbers for a scalar parameter, spread over a call dimension as
        slangpy spreads a list: a one-dimensional tensor of them (made at the call), one element
        per call point, without gradient."""
        if t.scalar not in PY_SCALARS_FOR[form.kind]:
            expected = f"numbers {t.name} takes, one per call point"
            raise self.fail(TypeError, index, name, expected, describe(form))
        a = arg_plan(
            t,
            base,
            KIND["element"],
            dtype=SLANG[t.scalar].dtype,
            rank=1,
            call_dims=1,
            differentiable=diff,
        )
        return self.classed(a, extent_class(form.length))

    def target(
        self, index: int, name: str, t: TypeInfo, form: ArgForm, base: dict[str, Any]
    ) -> ArgPlan:
        """The tensor an ``out`` parameter's value is written into."""
        form = self.element_tensor(index, name, t, form)
        a = element_plan(t, base, form, KIND["out"])
        return self.classed(a, form.extents[: a.call_dims])

    def element_tensor(self, index: int, name: str, t: TypeInfo, form: ArgForm) -> TensorForm:
        """``form`` as a tensor of ``t``'s elements: its dtype, and trailing dimensions of the
        element shape's classes (an extent past 4 is checked against the tensor itself)."""
        want = SLANG[t.scalar].dtype
        if not isinstance(form, TensorForm):
            raise self.fail(TypeError, index, name, expected_value(t), describe(form))
        if form.dtype != want:
            what = "numpy array" if form.numpy else "tensor"
            got = f"{a_dtype(form.dtype)} {what}{refusal(form.dtype)}"
            raise self.fail(TypeError, index, name, f"{a_dtype(want)} tensor", got)
        classes = extent_classes(t.shape)
        if t.shape and (form.rank < len(t.shape) or not form.extents.endswith(classes)):
            expected = f"a tensor whose trailing dimensions are {shape_text(t.shape)} for {t.name}"
            raise ShapeClassError(
                f"{self.fn}: {argument_label(index, name)}: expected {expected}, got",
                f"shape class {form.extents or '()'}",
                index,
                tuple(name.split(".")[1:]),
            )
        return form

    def tensor(
        self, index: int, name: str, t: TypeInfo, form: ArgForm, base: dict[str, Any]
    ) -> ArgPlan:
        want = SLANG[t.scalar].dtype
        rank = t.dims + len(t.shape)
        components = f" whose last dimension is {t.shape[0]} (the vector's)" if t.shape else ""
        expected = (
            f"{a_dtype(want)} tensor of rank {rank}{components} for {t.name} (or of more: the "
            "leading ones are call dimensions)"
        )
        if not isinstance(form, TensorForm):
            raise self.fail(TypeError, index, name, expected, describe(form))
        fits = form.extents.endswith(extent_classes(t.shape))
        if form.dtype != want or form.rank < rank or not fits:
            raise self.fail(TypeError, index, name, expected, describe(form))
        row = TENSOR_KIND[t.interface]
        if row.differentiable and t.scalar != "float":
            raise self.fail(TypeError, index, name, f"{t.interface}<float, D>", t.name)
        diff = row.differentiable and self.info.differentiable
        written = row.writes == "output"
        return arg_plan(
            t,
            base,
            row,
            dtype=form.dtype,
            elem=t.shape,
            rank=form.rank,
            call_dims=form.rank - rank,
            differentiable=diff,
            grad=diff and form.grad and not written,
        )

    def outputs(
        self, params: Sequence[ParamPlan], args: Sequence[ArgPlan]
    ) -> tuple[OutputPlan, ...]:
        """The result's outputs (one per leaf of a struct result), then each ``out`` and
        ``inout`` parameter's, leaf by leaf."""
        r = self.info.returns
        outputs: list[OutputPlan] = []
        if r.kind != "void":
            diff = self.info.differentiable and (r.kind != "struct" or r.differentiable)
            for path, t in self.result_leaves(r, ()):
                name = ".".join(("result", *path))
                outputs.append(output(name, RESULT, path, -1, t.name, t.scalar, t.shape, diff))
        for k, p in enumerate(params):
            whole = args[p.first] if p.count else None  # a struct of no fields has no leaf
            if whole is not None and whole.kind == "tensor" and whole.row.writes == "output":
                outputs.append(
                    output(
                        whole.param,
                        k,
                        (),
                        p.first,
                        p.slang_type,
                        whole.scalar,
                        (),
                        whole.differentiable,
                    )
                )
            if p.direction == "in":
                continue
            diff = self.carries(self.info.params[k])
            for j in range(p.first, p.first + p.count):
                a = args[j]
                outputs.append(output(a.param, k, a.path, j, a.slang_type, a.scalar, a.elem, diff))
        return tuple(outputs)

    def result_leaves(
        self, t: TypeInfo, path: tuple[str, ...]
    ) -> list[tuple[tuple[str, ...], TypeInfo]]:
        if t.kind in VALUE_KINDS:
            return [(path, t)]
        if t.kind == "struct" and t.fields and not t.shape:
            leaves = []
            for f in t.fields:
                leaves += self.result_leaves(f.type, (*path, f.name))
            return leaves
        raise TypeError(
            f"{self.fn}: unsupported return type {t.name}; expected void, a scalar, vector, "
            "matrix, array or a struct of those"
        )


def resolve(info: FunctionInfo, call: CallSignature) -> SpecializationPlan:
    """Resolve every argument of ``call`` against ``info``'s parameters."""
    fn = f"{info.module}::{info.name}"
    if call.function_id != fn:
        raise ValueError(f"call signature is for {call.function_id}, not {fn}")
    declaration = info.declaration
    given = call.args
    shaped = isinstance(given[-1], ResultForm) if given else False
    if shaped:
        given = given[:-1]
    if len(given) != len(info.params) or any(isinstance(f, ResultForm) for f in given):
        raise TypeError(
            f"{fn}: expected {len(info.params)} arguments "
            f"({', '.join(p.name for p in info.params)}), got {len(given)}"
        )
    info = inferred(info, call)
    resolver = _Resolver(info)
    params: list[ParamPlan] = []
    leaves: list[ArgPlan] = []
    for k, (p, form) in enumerate(zip(info.params, given, strict=True)):
        interface = p.type.name if p.type.kind == "interface" else ""
        if interface:
            resolver.directed(k, p.name, p.type, p.direction)
            p = replace(p, type=resolver.concrete(k, p.name, p.type, form))
        mine = resolver.param(k, p, form)
        if interface and any(a.grad for a in mine) and _has_vectors(p.type):
            raise TypeError(
                f"{fn}: {argument_label(k, p.name)}: Slang (slangpy 0.43.1's) cannot "
                f"differentiate through the interface {interface} into {p.type.name}, whose "
                "fields hold vectors or matrices (it stops on an internal error); pass its "
                "tensors without grad, or declare such fields as arrays (float[3])"
            )
        struct = p.type.kind == "struct"
        diff = resolver.carries(p) and (
            struct or (p.type.kind in VALUE_KINDS and p.type.scalar in SLANG_FLOATS)
        )
        params.append(
            ParamPlan(
                p.name, p.type.name, p.direction, struct, diff, len(leaves), len(mine), interface
            )
        )
        leaves += mine
    if shaped:
        leaves.append(_result_leaf(fn, info, len(params), call.args[-1].rank))
    call_rank = max((a.call_dims for a in leaves), default=0)
    for a in leaves:
        if a.binding == "call_id":
            _check_call_id(fn, a, call_rank)
    args = shared(leaves, call_rank, resolver.call_classes)
    outputs = resolver.outputs(params, args)
    capable = [i for i, a in enumerate(args) if a.differentiable and a.grad]
    masks: list[str] = []
    if any(o.differentiable for o in outputs):
        for bits in product("01", repeat=len(capable)):
            if "1" in bits:
                chosen = {c for c, b in zip(capable, bits, strict=True) if b == "1"}
                masks.append("".join("1" if i in chosen else "0" for i in range(len(args))))
    r = info.returns
    plan = SpecializationPlan(
        PLAN_FORMAT,
        SIGNATURE_FORMAT,
        call.text,
        info.module,
        info.name,
        declaration,
        info.differentiable,
        tuple(params),
        args,
        call_rank,
        "" if r.kind == "void" else r.name,
        r.kind == "struct",
        outputs,
        tuple(masks),
        info.call_ids,
    )
    return with_views(info, plan)


def _has_vectors(t: TypeInfo) -> bool:
    """Whether struct ``t`` holds a vector or a matrix (an array of them included), in its
    fields' structs too."""
    return any(
        _has_vectors(f.type)
        if f.type.kind == "struct"
        else "vector<" in f.type.name or "matrix<" in f.type.name
        for f in t.fields
    )


def _result_leaf(fn: str, info: FunctionInfo, index: int, rank: int) -> ArgPlan:
    """The leaf of the call shape a ``_result=`` tensor gives a call with generators: a grid
    bound to no parameter."""
    r = info.returns
    if r.kind not in VALUE_KINDS:
        raise TypeError(f"{fn}: _result: the function returns {r.name}, not a tensor")
    base = {"param": "_result", "index": index}
    return arg_plan(r, base, KIND["result shape"], rank=rank, call_dims=rank)


def _check_call_id(fn: str, a: ArgPlan, call_rank: int) -> None:
    """TypeError naming ``a``, a call_id, where its parameter does not hold an index of a call
    of ``call_rank`` dimensions: a vector of as many components (or one more, which is 0), an
    array of as many, a scalar for a 1-D call."""
    width = a.elem[0] if a.elem else 1
    if not a.elem:
        fits = call_rank == 1
    elif a.slang_type.endswith("]"):
        fits = width == call_rank
    else:
        fits = width in (call_rank, call_rank + 1)
    if fits:
        return
    need = "an int[N], or an intN or int(N+1) vector, for an N-D call"
    if not call_rank:
        need = "a call shape, from another argument or from _result="
    raise TypeError(
        f"{fn}: {argument_label(a.index, a.param)}: call_id into {a.slang_type} needs {need}, "
        f"got a {call_rank}-D call"
    )
