"""How a function is named: one grammar, ``name`` or ``name<arg, ...>``, where each generic
argument is an integer or floating-point literal or a type (an identifier, itself optionally
generic), and a struct's method after its struct and a dot, ``Particle.reset``. A name is
parsed, never pasted: Slang, slangpy, cache keys and generated kernels see only the canonical
text ``FunctionRef.text`` renders from the parsed parts."""

from __future__ import annotations

import re

from ..define import frozen
from ..errors import Error

MAX_LENGTH = 512
"""The longest name accepted, in characters."""
MAX_DEPTH = 8
"""How deeply generic arguments may nest (``f<vector<float,3>>`` is 2)."""

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?:[A-Za-z]+)?(?![\w.]))"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[<>,.]))"
)
_INTEGER = r"([+-]?\d+)([uUlL]*)"
_FLOAT = r"([+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)([fFhHlL]?)"


CONSTRUCTOR = "__init"
"""The name a struct's constructors go by (``m["Particle.__init"]``), slangpy's ``__init``;
Slang reflects them as ``$init`` and a kernel calls them as ``Particle(...)``."""


class FunctionNameError(Error, ValueError):
    """Text that is not a function reference."""


@frozen
class Literal:
    """A number among generic arguments, kept as its canonical spelling."""

    text: str


@frozen
class FunctionRef:
    """A parsed function or type reference: an identifier and, when it was written with angle
    brackets, its generic arguments; for a method, the struct it is a method of."""

    name: str
    args: tuple[FunctionRef | Literal, ...] | None = None
    owner: FunctionRef | None = None

    @property
    def text(self) -> str:
        """The canonical spelling: no spaces, numbers as their values print."""
        owner = "" if self.owner is None else f"{self.owner.text}."
        if self.args is None:
            return owner + self.name
        return f"{owner}{self.name}<{','.join(a.text for a in self.args)}>"


def _number(token: str) -> Literal:
    m = re.fullmatch(_INTEGER, token)
    if m:
        return Literal(f"{int(m.group(1))}{m.group(2).lower()}")
    m = re.fullmatch(_FLOAT, token)
    if m:
        return Literal(f"{float(m.group(1))!r}{m.group(2).lower()}")
    raise FunctionNameError(f"{token!r} is not a number Slang reads")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, what: str) -> FunctionNameError:
        return FunctionNameError(
            f"{self.text!r} is not a function name: {what} at character {self.at}; expected "
            "an identifier, optionally with generic arguments ('f<float, 3>'), or a struct's "
            "method ('Particle.reset')"
        )

    def token(self) -> tuple[str, str] | None:
        """The next token as (kind, text), consumed; None at the end."""
        if self.text[self.at :].strip() == "":
            self.at = len(self.text)
            return None
        m = _TOKEN.match(self.text, self.at)
        if m is None or m.lastgroup is None:
            rest = self.text[self.at :].lstrip()
            self.at = len(self.text) - len(rest)
            raise self.fail(f"unexpected {rest[:1]!r}")
        self.at = m.end()
        return m.lastgroup, m.group(m.lastgroup)

    def peek(self) -> str | None:
        at = self.at
        try:
            got = self.token()
        finally:
            self.at = at
        return got[1] if got and got[0] == "punct" else None

    def reference(self, depth: int) -> FunctionRef:
        got = self.token()
        if got is None or got[0] != "ident":
            raise self.fail("no identifier" if got is None else f"unexpected {got[1]!r}")
        name = got[1]
        if self.peek() != "<":
            return FunctionRef(name)
        if depth >= MAX_DEPTH:
            raise self.fail(f"generic arguments nested deeper than {MAX_DEPTH}")
        self.token()
        args: list[FunctionRef | Literal] = []
        if self.peek() == ">":
            self.token()
            return FunctionRef(name, ())
        while True:
            args.append(self.argument(depth + 1))
            got = self.token()
            if got == ("punct", ">"):
                return FunctionRef(name, tuple(args))
            if got != ("punct", ","):
                raise self.fail("unclosed '<'" if got is None else f"unexpected {got[1]!r}")

    def argument(self, depth: int) -> FunctionRef | Literal:
        at = self.at
        got = self.token()
        if got is not None and got[0] == "number":
            return _number(got[1])
        self.at = at
        return self.reference(depth)


def parse_function_ref(text: str) -> FunctionRef:
    """The function reference ``text`` spells; FunctionNameError for anything else."""
    if not isinstance(text, str):
        raise FunctionNameError(f"a function is named by a string, not {text!r}")
    if len(text) > MAX_LENGTH:
        raise FunctionNameError(f"a function name of {len(text)} characters (at most {MAX_LENGTH})")
    parser = _Parser(text)
    ref = parser.reference(0)
    rest = parser.token()
    if rest == ("punct", "."):
        method = parser.reference(0)
        ref = FunctionRef(method.name, method.args, ref)
        rest = parser.token()
    if rest is not None:
        raise parser.fail(f"unexpected {rest[1]!r} after the name")
    return ref


def canonical_name(text: str) -> str:
    """The canonical spelling of the function reference ``text``; FunctionNameError when it
    is not one."""
    return parse_function_ref(text).text
