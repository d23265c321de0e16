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

from .reach import BRACKETS, CLOSING, Token, declarations, group_end

TWIN = "slangspec_twin_"
"""What a twin's name starts with, before the function's."""
_ASSIGNED_BY = set("+-*/%&|^")


class _Function:
    """The one top-level declaration of a function: where its name, parameters and body are."""

    def __init__(self, tokens: list[Token], name: int) -> None:
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


def _only_indexed(tokens: list[Token], start: int, name: str) -> bool:
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
    return "".join((" " if spaced else "") + text for _, text, spaced in out).strip()
