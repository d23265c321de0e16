"""What crashes the Slang slangspec runs (slangpy 0.43.1's, 2026.12) instead of being refused,
found in a module's files before Slang reads them: a property accessor marked differentiable
(``[Differentiable] get``, or ``set``, or any ``...Differentiable`` attribute there) ends the
process at module load, even unused. A call refuses it instead, naming the place and what to
write, and the process lives."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from .module_text import ModuleText
from .preimage import module_files

_HIDDEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)
"""Comments and strings, which a scan must not read as code."""
_PROPERTY = re.compile(r"\bproperty\b[^{};]*\{")
_ACCESSOR = re.compile(r"\[\s*(\w*Differentiable)\b[^\]]*\]\s*(get|set)\b")


def _blanked(text: str) -> str:
    """``text`` with its comments and strings as spaces, its lines where they were."""
    return _HIDDEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _block_end(text: str, start: int) -> int:
    """Where the brace block whose ``{`` is just before ``start`` closes (the end of ``text``
    where it never does)."""
    depth = 1
    for at in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        if depth == 0:
            return at
    return len(text)


def differentiable_accessor(text: str) -> tuple[int, str, str] | None:
    """The line, attribute and accessor (``get`` or ``set``) of the first property accessor
    ``text`` marks differentiable; None where there is none."""
    if "property" not in text or "Differentiable" not in text:
        return None
    plain = _blanked(text)
    for head in _PROPERTY.finditer(plain):
        found = _ACCESSOR.search(plain, head.end(), _block_end(plain, head.end()))
        if found is not None:
            return plain.count("\n", 0, found.start()) + 1, found.group(1), found.group(2)
    return None


def known_crash(module: ModuleText, search: Sequence[Path]) -> str | None:
    """Diagnostics, as Slang writes an error on one line, for the first construct in ``module``
    or a file it imports that would crash Slang; None where there is none."""
    for path, data in module_files(module.path, search, module.text.encode()):
        found = differentiable_accessor(data.decode("utf-8", errors="replace"))
        if found is not None:
            line, attribute, accessor = found
            return (
                f"{path}({line}): error: a property whose {accessor} is marked [{attribute}] "
                f"crashes Slang 2026.12 (the Slang of slangpy 0.43.1) as it loads the module; "
                f"write a [{attribute}] method, or a __subscript whose {accessor} is "
                f"[{attribute}], instead\n"
            )
    return None
