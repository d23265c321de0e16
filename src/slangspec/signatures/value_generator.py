"""The row of the table of Python values (``values``) for generators (``generators``):
``call_id()``, ``thread_id()``, ``wang_hash()`` and ``rand_float()``."""

from __future__ import annotations

import functools
import re
from typing import Any

from .generators import GENERATOR, GENERATOR_CLASS, Generator, packed, rebuilt
from .text import GeneratorForm, format_arg, parse_arg
from .value_row import Packing, Unpacking, ValueRow, register, spec_text

_GENERATOR_SPEC = rf"({'|'.join(GENERATOR)})(?:\[([1-9]\d*)\])?"


@functools.cache
def _generator_form(kind: str, dims: int) -> str:
    return format_arg(GeneratorForm(kind, None if dims == -1 else dims))


class GeneratorRow(ValueRow):
    """A generator: its name, with ``[Dn]`` where ``dims`` is given; packed as
    ``x<name>:<dims>`` (its int and float fields among the numbers); spelled by its name, with
    ``[n]`` for its dims."""

    python_types = (Generator,)
    letters = "x"
    forms = (GeneratorForm,)
    spelling = f"a generator ({', '.join(GENERATOR)}, each with [n] for its dims)"
    order = 4

    def form(self, value: Any, grad_on: bool) -> str:
        return _generator_form(value.kind, value.dims)

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        ints, floats = packed(value)
        packing.ints.extend(ints)
        packing.floats.extend(floats)
        packing.kinds.append(f"x{value.kind}:{value.dims}{where}")

    def unpack(self, kind: str, source: Unpacking) -> Any:
        name, _, dims = kind[1:].partition(":")
        cls = GENERATOR_CLASS[name]
        ints = [next(source.ints) for _ in cls.int_fields]
        floats = [next(source.floats) for _ in cls.float_fields]
        return rebuilt(name, int(dims), ints, floats)

    def read_spec(self, spec: Any) -> str | None:
        text = spec_text(spec)
        if text is None:
            return None
        m = re.fullmatch(_GENERATOR_SPEC, text)
        if m:
            return format_arg(GeneratorForm(m.group(1), int(m.group(2)) if m.group(2) else None))
        if text.split("[")[0] in GENERATOR:
            parse_arg(text)
            return text
        return None

    def generates(self, value: Any) -> bool:
        return True


register(GeneratorRow())
