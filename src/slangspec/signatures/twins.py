"""A function's twin: its declaration again, attributes and body unchanged, with some parameters
taken as generic types instead of the arrays or structs of arrays they were declared as. Given a
view (a type that reads one element at a time and adds each read's gradient where it belongs),
Slang's backward of the twin never holds the whole parameter in every thread, as the backward
of a parameter taken by value does.

Made from the module's own text, and only for parameters the body does nothing with but index:
``g[i]`` (an array), ``m.w[i]`` (a struct of arrays), each followed by any member or index but
never assigned to, incremented, or passed whole. The text is split as ``reach`` splits it; a
function not declared exactly once at the top level, or declared generic, has no twin.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..define import frozen
from .reach import BRACKETS, CLOSING, Token, declarations, group_end, joined

TWIN = "slangspec_twin_"
"""What a twin's name starts with, before the function's."""
ARRAY_OF = "slangspec_IArrayOf"
"""The interface a twin's array parameters are bound by: one element at a time, differentiably.
Twins' modules are generated sources: a change to what they hold bumps
``formats.CODEGEN_FORMAT``."""
ARRAY_INTERFACE = f"""interface {ARRAY_OF}<T : IDifferentiable>
{{
    __subscript(int i) -> T {{ [Differentiable] get; }}
}}"""
STRUCT = "struct "
"""What ``viewed_arrays`` writes before the name of a struct of arrays it views."""
_PLAIN_MODIFIERS = {"in"}
_ASSIGNED_BY = set("+-*/%&|^")


class _Function:
    """The one top-level declaration of a function: where its name, parameters and body are."""

    def __init__(self, tokens: Sequence[Token], name: int) -> None:
        self.tokens = tokens
        self.name = name
        self.params_end = group_end(tokens, name + 1)
        self.body = next(
            (i for i in range(self.params_end, len(tokens)) if tokens[i][1] == "{"), len(tokens)
        )
        self.params: list[tuple[int, int]] = []
        start, depth = name + 2, 0
        for i in range(name + 2, self.params_end - 1):
            text = tokens[i][1]
            # A parameter list holds no comparison: '<' and '>' there bracket generic arguments.
            depth += (text in BRACKETS or text == "<") - (text in CLOSING or text == ">")
            if text == "," and depth == 0:
                self.params.append((start, i))
                start = i + 1
        if start < self.params_end - 1:
            self.params.append((start, self.params_end - 1))

    def param_name(self, span: tuple[int, int]) -> str | None:
        """The name a parameter declares: its last identifier outside brackets, before any
        default value or semantic."""
        name = None
        i = span[0]
        while i < span[1]:
            kind, text, _ = self.tokens[i]
            if text in (":", "="):
                break
            if text in BRACKETS:
                i = group_end(self.tokens, i)
                continue
            if kind == "ident":
                name = text
            i += 1
        return name


def _function(source: str, function: str) -> _Function | None:
    found = [tokens for names, tokens in declarations(source) or [] if function in names]
    if len(found) != 1:
        return None
    tokens = found[0]
    for i, (kind, text, _) in enumerate(tokens[:-1]):
        if kind == "ident" and text == function and tokens[i + 1][1] in ("(", "<"):
            return _Function(tokens, i) if tokens[i + 1][1] == "(" else None
    return None


def _only_indexed(tokens: Sequence[Token], start: int, name: str) -> bool:
    """Whether every use of ``name`` in ``tokens`` from ``start`` on is an index of it, or of
    one of its members, that nothing assigns to or increments."""
    for i in range(start, len(tokens)):
        kind, text, _ = tokens[i]
        if kind != "ident" or text != name or (i and tokens[i - 1][1] == "."):
            continue
        at = i + 1
        if at + 1 < len(tokens) and tokens[at][1] == "." and tokens[at + 1][0] == "ident":
            at += 2
        if at >= len(tokens) or tokens[at][1] != "[":
            return False
        while at < len(tokens) and tokens[at][1] in ("[", "."):
            at = group_end(tokens, at) if tokens[at][1] == "[" else at + 2
        after = [t[1] for t in tokens[at : at + 2]]
        before = [t[1] for t in tokens[max(i - 2, 0) : i]]
        assigned = after[:1] == ["="] and after[1:] != ["="]
        compound = len(after) == 2 and after[0] in _ASSIGNED_BY and after[1] == "="
        stepped = after in (["+", "+"], ["-", "-"]) or before in (["+", "+"], ["-", "-"])
        if assigned or compound or stepped:
            return False
    return True


def indexed_parameters(source: str, function: str) -> tuple[str, ...]:
    """The parameters of ``function``, declared once at the top level of ``source``, that its
    body only indexes (see the module's description); none where it has no twin."""
    f = _function(source, function)
    if f is None:
        return ()
    names = [f.param_name(span) for span in f.params]
    return tuple(n for n in names if n and _only_indexed(f.tokens, f.body, n))


def twin(source: str, function: str, generic: dict[str, str]) -> str | None:
    """The twin of ``function`` whose parameters named in ``generic`` take a generic type bound
    by the interface ``generic`` gives each (text of the caller's own); None where one of them
    is not a parameter the body only indexes."""
    f = _function(source, function)
    if f is None or not set(generic) <= set(indexed_parameters(source, function)):
        return None
    tokens = f.tokens
    bounds = []
    replaced: dict[int, tuple[int, list[Token]]] = {}
    for span in f.params:
        name = f.param_name(span)
        if name in generic:
            kind = f"V{len(bounds)}"
            bounds.append(f"{kind} : {generic[name]}")
            replaced[span[0]] = (span[1], [("ident", kind, True), ("ident", name, True)])
    out: list[Token] = [*tokens[: f.name], ("ident", TWIN + function, True)]
    out += [("punct", "<" + ", ".join(bounds) + ">", False)]
    i = f.name + 1
    while i < len(tokens):
        if i in replaced:
            end, instead = replaced[i]
            out += instead
            i = end
            continue
        out.append(tokens[i])
        i += 1
    return joined(out)


def _array_element(f: _Function, span: tuple[int, int], name: str) -> str | None:
    """The element type of a parameter declared as a one-dimensional array (``T g[N]`` or
    ``T[N] g``), as its text writes it; None for any other parameter, or one with a modifier
    other than ``in``."""
    tokens = f.tokens[span[0] : span[1]]
    words = [t[1] for t in tokens]
    if words[0] in _PLAIN_MODIFIERS:
        tokens, words = tokens[1:], words[1:]
    if words.count("[") != 1 or words.count(name) != 1 or any(w in (":", "=") for w in words):
        return None
    bracket, at = words.index("["), words.index(name)
    element = tokens[: min(bracket, at)]
    if not element or element[0][0] != "ident" or element[0][1] in _MODIFIERS:
        return None
    if bracket < at and (group_end(tokens, bracket) != at or at != len(words) - 1):
        return None
    if at < bracket and (bracket != at + 1 or group_end(tokens, bracket) != len(words)):
        return None
    return joined(element)


_MODIFIERS = {"out", "inout", "ref", "no_diff", "const", "uniform", "static", "constref"}
_NOT_FIELDS = {"static", "typealias", "property", "__init", "__subscript", "struct", "interface"}


def struct_arrays(source: str, struct: str) -> dict[str, str]:
    """The one-dimensional array fields of the struct ``struct`` declared once at the top level
    of ``source``, each with its element type as the text writes it."""
    found = [
        tokens
        for names, tokens in declarations(source) or []
        if names == {struct} and any(t[1] == "struct" for t in tokens)
    ]
    if len(found) != 1:
        return {}
    tokens = found[0]
    body = next((i for i, t in enumerate(tokens) if t[1] == "{"), None)
    if body is None:
        return {}
    fields: dict[str, str] = {}
    start, i, end = body + 1, body + 1, group_end(tokens, body) - 1
    while i < end:
        text = tokens[i][1]
        if text in BRACKETS:
            i = group_end(tokens, i)
            continue
        if text == ";":
            member = tokens[start:i]
            words = [t[1] for t in member]
            if (
                len(words) >= 5
                and words[-1] == "]"
                and words.count("[") == 1
                and group_end(member, words.index("[")) == len(words)
                and member[words.index("[") - 1][0] == "ident"
                and not set(words) & _NOT_FIELDS
                and "(" not in words
            ):
                at = words.index("[")
                fields[words[at - 1]] = joined(member[: at - 1])
            start = i + 1
        i += 1
    return fields


def _members_used(tokens: Sequence[Token], start: int, name: str) -> set[str]:
    """The members of ``name`` the tokens from ``start`` on name (``name.member``)."""
    return {
        tokens[i + 2][1]
        for i in range(start, len(tokens) - 2)
        if tokens[i][1] == name
        and tokens[i + 1][1] == "."
        and tokens[i + 2][0] == "ident"
        and (not i or tokens[i - 1][1] != ".")
    }


def viewed_arrays(source: str, function: str) -> dict[str, str]:
    """The parameters of ``function`` a twin takes as views, each with what it views: a
    one-dimensional array its body only indexes, with its element type; a struct whose array
    fields are all its body reads of it, each indexed (a struct of arrays), with ``STRUCT``
    and the struct's name. Empty where the function has no twin."""
    f = _function(source, function)
    if f is None:
        return {}
    indexed = set(indexed_parameters(source, function))
    found = {}
    for span in f.params:
        name = f.param_name(span)
        if name not in indexed:
            continue
        element = _array_element(f, span, name)
        if element is not None:
            found[name] = element
            continue
        words = [t[1] for t in f.tokens[span[0] : span[1]] if t[1] not in _PLAIN_MODIFIERS]
        if len(words) == 2 and words[1] == name and f.tokens[span[1] - 2][0] == "ident":
            fields = struct_arrays(source, words[0])
            used = _members_used(f.tokens, f.body, name)
            if fields and used and used <= set(fields):
                found[name] = STRUCT + words[0]
    return found


def struct_of_arrays(struct: str) -> str:
    """The interface a twin's struct-of-arrays parameter of type ``struct`` is bound by: each
    array field a property whose type is bound by ``ARRAY_OF`` of its element."""
    return f"slangspec_IViewOf_{struct}"


def _interfaces(source: str, viewed: dict[str, str]) -> list[str]:
    """``ARRAY_INTERFACE`` and the interface of each struct of arrays in ``viewed``."""
    made = [ARRAY_INTERFACE]
    for struct in sorted({v[len(STRUCT) :] for v in viewed.values() if v.startswith(STRUCT)}):
        lines = [f"interface {struct_of_arrays(struct)}", "{"]
        for field, element in struct_arrays(source, struct).items():
            lines += [
                f"    associatedtype F_{field} : {ARRAY_OF}<{element}>;",
                f"    property F_{field} {field} {{ get; }}",
            ]
        made.append("\n".join([*lines, "}"]))
    return made


def _bounds(viewed: dict[str, str]) -> dict[str, str]:
    return {
        p: struct_of_arrays(v[len(STRUCT) :]) if v.startswith(STRUCT) else f"{ARRAY_OF}<{v}>"
        for p, v in viewed.items()
    }


def twin_module_name(module: str, function: str) -> str:
    """The name of the module that holds the twin of ``function`` of ``module``."""
    return f"{module}__{TWIN}{function}"


@frozen
class TwinModule:
    """The module that holds a function's twin: its name and text, and the parameters the twin
    takes as views, each with what it views (``viewed_arrays``)."""

    name: str
    text: str
    viewed: dict[str, str]


def twin_module(module: str, source: str, function: str) -> TwinModule | None:
    """The module that holds the twin of ``function`` of module ``module`` (whose text is
    ``source``): the module and what it imports imported, ``ARRAY_INTERFACE``, the twin; None
    where the function has no twin."""
    viewed = viewed_arrays(source, function)
    made = twin(source, function, _bounds(viewed)) if viewed else None
    if made is None:
        return None
    imports = [
        joined(tokens)
        for names, tokens in declarations(source) or []
        if not names and tokens[0][1] in ("import", "__exported")
    ]
    text = "\n".join([f"import {module};", *imports, *_interfaces(source, viewed), made, ""])
    return TwinModule(twin_module_name(module, function), text, viewed)


def imported_twins(module: str, kernel: str) -> list[str]:
    """The functions of ``module`` whose twins' modules the kernel source ``kernel`` imports."""
    prefix = f"import {twin_module_name(module, '')}"
    return [
        line[len(prefix) : -1]
        for line in kernel.splitlines()
        if line.startswith(prefix) and line.endswith(";")
    ]
