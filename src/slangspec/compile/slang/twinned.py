"""The modules of the twins (``signatures.twins``) a set of kernels imports, made from their
user module's text, for a session to load before it compiles the kernels."""

from __future__ import annotations

from collections.abc import Iterable

from ...signatures.module_text import ModuleText
from ...signatures.twins import imported_twins, twin_module


def twin_modules(module: ModuleText, kernels: Iterable[str]) -> dict[str, str]:
    """Each twin module the kernel sources ``kernels`` import, by name, with its text."""
    made = {}
    for kernel in kernels:
        for function in imported_twins(module.name, kernel):
            twin = twin_module(module.name, module.text, function)
            if twin is not None:
                made[twin.name] = twin.text
    return made
