"""How a kernel writes the parts of a value: every index of an element shape, an index as
subscripts, a field path as members."""

from __future__ import annotations

from itertools import product


def points(elem: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every index of an element shape, row-major; one empty index for a scalar."""
    return list(product(*(range(e) for e in elem)))


def subscript(index: tuple[int, ...]) -> str:
    return "".join(f"[{k}]" for k in index)


def member(path: tuple[str, ...]) -> str:
    return "".join(f".{name}" for name in path)
