"""What one function can reach in its module's text, so that its cache key covers that and not
the whole file: an edit of another function, or of a comment, leaves its kernels valid.

The text is split into top-level declarations. Functions, types, namespaces, type aliases and
``static const`` values are *named*; every other declaration (imports, extensions, shader
parameters, anything not recognised) is *common* and always reached. From the function's
name (with any explicit generic arguments) and the identifiers of every common declaration,
a named declaration is reached when an identifier of a reached declaration names it, when
one of its attributes names a reached declaration (a derivative declared for it elsewhere), or
when it is a type whose head names a reached declaration (a struct that conforms to a reached
interface, which a call may name as the concrete type of an interface parameter).
Names are matched as bare identifiers, so overloads, members and shadowing can only add to
what is reached.

When that cannot be known for certain (the preprocessor, ``__LINE__``, a module of several
files, text that does not tokenize or balance), ``reached_text`` returns None and the whole
file is keyed, as for an imported module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import Error

REACHED = "reach:"
"""How a key's hash of a module's own file starts where it hashes only what one function
reaches in it."""
_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<comment>//[^\n]*|/\*.*?\*/)
    |(?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
    |(?P<ident>[A-Za-z_]\w*)
    |(?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
    |(?P<punct>.)""",
    re.VERBOSE | re.DOTALL,
)
_UNCERTAIN_PUNCT = {"#", '"', "'", "\\"}
"""The preprocessor, and the start of a comment or string that never ends."""
_UNCERTAIN_WORDS = {"__LINE__", "__FILE__", "__COUNTER__", "__include", "implementing", "module"}
BRACKETS = {"(": ")", "[": "]", "{": "}"}
"""Each bracket that opens a group, with the one that closes it."""
CLOSING = set(BRACKETS.values())
_TYPE_WORDS = {"struct", "class", "interface", "enum", "namespace", "typealias"}
_SPACED = " "


class Uncertain(Error):
    """The text holds something whose reach this module does not follow."""


@dataclass
class _Decl:
    """One top-level declaration of a module's text."""

    text: str
    names: set[str] = field(default_factory=set)
    """What it declares; empty for a common declaration."""
    refs: set[str] = field(default_factory=set)
    attribute_refs: set[str] = field(default_factory=set)
    bases: set[str] = field(default_factory=set)
    """What a type declaration's head (before its body) names: the types it conforms to."""


def _tokens(source: str) -> list[tuple[str, str, bool]]:
    """(kind, text, whether space or a comment came before it), comments and space dropped."""
    tokens: list[tuple[str, str, bool]] = []
    spaced = False
    for m in _TOKEN.finditer(source):
        kind, text = m.lastgroup or "punct", m.group()
        if kind in ("space", "comment"):
            spaced = True
            continue
        if kind == "punct" and (
            text in _UNCERTAIN_PUNCT or (text == "/" and source.startswith("/*", m.start()))
        ):
            raise Uncertain(text)
        if kind == "ident" and text in _UNCERTAIN_WORDS:
            raise Uncertain(text)
        tokens.append((kind, text, spaced))
        spaced = False
    return tokens


def _split(tokens: list[tuple[str, str, bool]]) -> list[list[tuple[str, str, bool]]]:
    """Top-level declarations: each ends at a ``;`` or at a ``}`` that closes its body (with a
    ``;`` right after it, when there is one)."""
    decls: list[list[tuple[str, str, bool]]] = []
    current: list[tuple[str, str, bool]] = []
    stack: list[str] = []
    for i, token in enumerate(tokens):
        text = token[1]
        current.append(token)
        if token[0] != "punct":
            continue
        if text in BRACKETS:
            stack.append(BRACKETS[text])
        elif text in CLOSING:
            if not stack or stack.pop() != text:
                raise Uncertain("unbalanced " + text)
            following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
            if not stack and text == "}" and following != ";":
                decls.append(current)
                current = []
        elif text == ";" and not stack:
            decls.append(current)
            current = []
    if stack or current:
        raise Uncertain("a declaration does not end")
    return decls


def group_end(tokens: Sequence[tuple[str, str, bool]], at: int) -> int:
    """The index after the bracket group that opens at ``at``."""
    depth = 0
    for i in range(at, len(tokens)):
        text = tokens[i][1]
        if text in BRACKETS:
            depth += 1
        elif text in CLOSING:
            depth -= 1
            if depth == 0:
                return i + 1
    raise Uncertain("unbalanced group")


def _declared(tokens: list[tuple[str, str, bool]]) -> set[str]:
    """The names a declaration (its attributes skipped) declares; empty for a common one."""
    words = [t[1] for t in tokens]
    head = len(words)
    for i, w in enumerate(words):
        if w in ("(", "{", "=", ";"):
            head = i
            break
    before = words[:head]
    if "import" in before or "extension" in before or "using" in before:
        return set()
    for i, w in enumerate(before):
        if w in _TYPE_WORDS and i + 1 < len(before) and tokens[i + 1][0] == "ident":
            if w == "enum":  # its cases may be named bare
                return {t[1] for t in tokens if t[0] == "ident"}
            return {before[i + 1]}
    if head < len(words) and words[head] == "(":
        i = head - 1
        if i >= 0 and words[i] == ">":  # explicit generic parameters: f<T>(...)
            depth = 0
            while i >= 0:
                depth += {">": 1, "<": -1}.get(words[i], 0)
                i -= 1
                if depth == 0:
                    break
        if i >= 0 and tokens[i][0] == "ident":
            return {words[i]}
        return set()
    if head < len(words) and words[head] == "=" and "static" in before and "const" in before:
        i = head - 1
        while i >= 0 and words[i] == "]":  # an array: K[3] = ...
            while i >= 0 and words[i] != "[":
                i -= 1
            i -= 1
        if i >= 0 and tokens[i][0] == "ident":
            return {words[i]}
    return set()


def _attributes_end(tokens: list[tuple[str, str, bool]]) -> int:
    """Where a declaration's leading attributes (``[Differentiable]`` and the like) end."""
    at = 0
    while at < len(tokens) and tokens[at][1] == "[":
        at = group_end(tokens, at)
    return at


def _decl(tokens: list[tuple[str, str, bool]]) -> _Decl:
    at = _attributes_end(tokens)
    attribute_refs = {t[1] for t in tokens[:at] if t[0] == "ident"}
    text = joined(tokens)
    rest = tokens[at:]
    head = next((i for i, t in enumerate(rest) if t[1] in ("{", ";")), len(rest))
    typed = any(t[1] in _TYPE_WORDS for t in rest[:head])
    return _Decl(
        text,
        _declared(rest),
        {t[1] for t in tokens if t[0] == "ident"},
        attribute_refs,
        {t[1] for t in rest[:head] if t[0] == "ident"} if typed else set(),
    )


Token = tuple[str, str, bool]
"""A token of a module's text: its kind, its text, and whether space or a comment came before."""


def joined(tokens: Sequence[Token]) -> str:
    """The text of ``tokens``, one space where space or a comment stood before a token."""
    return "".join((_SPACED if spaced else "") + t for _, t, spaced in tokens).strip()


@functools.lru_cache(maxsize=8)
def declarations(source: str) -> tuple[tuple[frozenset[str], tuple[Token, ...]], ...] | None:
    """The top-level declarations of ``source``, each with the names it declares (none for a
    common one) and its tokens; None where that cannot be known for certain. Split once for
    the last few texts: describing one function, or compiling its kernels, looks at its
    module's declarations many times."""
    try:
        return tuple(
            (frozenset(_declared(tokens[_attributes_end(tokens) :])), tuple(tokens))
            for tokens in _split(_tokens(source))
        )
    except Uncertain:
        return None


def reached_text(source: str, roots: Iterable[str]) -> str | None:
    """The declarations of ``source`` that names in ``roots`` can reach, in their order, with
    comments and the amount of space dropped; None when that cannot be known for certain."""
    try:
        decls = [_decl(tokens) for tokens in _split(_tokens(source))]
    except Uncertain:
        return None
    reached = [not d.names for d in decls]
    names = set(roots)  # used by what is reached: what they name is reached too
    declared: set[str] = set()  # declared by what is reached: attributes naming them reach
    for d in decls:
        if not d.names:
            names |= d.refs
    grew = True
    while grew:
        grew = False
        for i, d in enumerate(decls):
            if reached[i] or not (
                d.names & names or (d.attribute_refs | d.bases - d.names) & declared
            ):
                continue
            reached[i] = True
            names |= d.refs
            declared |= d.names
            grew = True
    return "\n".join(d.text for d, r in zip(decls, reached, strict=True) if r)
