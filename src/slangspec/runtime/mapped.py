"""``Function.map``: a function's arguments placed in the call shape explicitly, as slangpy's
``Function.map`` places them, by viewing each mapped tensor."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..signatures.values import bind_names, to_torch
from ..specializer.info import FunctionInfo
from ..specializer.kinds import VALUE_KINDS

ParamLayout = tuple[tuple[str, int, bool, str], ...]
"""Per parameter: its name, the number of element dimensions a tensor fed to it has, whether
it is fed elementwise (so ``map`` can place it), and its Slang type."""


def param_layout(info: FunctionInfo) -> ParamLayout:
    elementwise = (*VALUE_KINDS, "generic")
    return tuple(
        (p.name, len(p.type.shape), p.type.kind in elementwise, p.type.name) for p in info.params
    )


class MappedFunction:
    """A function whose calls view each mapped argument so that its dimensions fall where the
    mapping says; the views carry gradients back to the arguments, and writes through them
    reach the arguments' own storage."""

    def __init__(
        self,
        target: Callable[..., Any],
        fid: str,
        layout: ParamLayout,
        dims: tuple[Sequence[int], ...],
        named: dict[str, Sequence[int]],
    ) -> None:
        names = [name for name, *_ in layout]
        if len(dims) > len(names):
            raise TypeError(f"{fid}: map: {len(dims)} mappings for {len(names)} parameters")
        mapping: dict[int, tuple[int, ...]] = {}
        typed: set[int] = set()
        for k, m in [*enumerate(dims), *((_index_of(fid, names, n), m) for n, m in named.items())]:
            if k in mapping or k in typed:
                raise TypeError(f"{fid}: map: parameter '{names[k]}' is mapped twice")
            if isinstance(m, str):
                _own_type(fid, layout[k], m)
                typed.add(k)
            else:
                mapping[k] = _dimensions(fid, names[k], m)
        self.target = target
        self.id = fid
        self.names = names
        self.mapping = mapping
        # Worked out once, so that a call torch traces is plain loops over plain data.
        self._rank = max([max(m, default=-1) + 1 for m in mapping.values()], default=0)
        self._unmapped = [(k, elem) for k, (_, elem, *_) in enumerate(layout) if k not in mapping]
        self._mapped = [
            (k, m, sorted(range(len(m)), key=m.__getitem__), layout[k]) for k, m in mapping.items()
        ]

    def __repr__(self) -> str:
        return f"<{self.id} mapped {self.mapping}>"

    def __call__(self, /, *args: Any, **keywords: Any) -> Any:
        result = keywords.pop("_result", None)
        bound = list(bind_names(self.id, self.names, args, keywords) if keywords else args)
        if any(isinstance(v, np.ndarray) for v in bound):  # placed as tensors (``_placed``)
            bound = list(to_torch(bound, getattr(self.target, "torch_device", None)))
        rank = self._rank
        for k, elem in self._unmapped:
            if k < len(bound) and isinstance(bound[k], torch.Tensor):
                rank = max(rank, bound[k].dim() - elem)
        for k, m, order, param in self._mapped:
            if k < len(bound):
                bound[k] = _placed(self.id, param, bound[k], m, order, rank)
        return self.target(*bound, _result=result)


def _index_of(fid: str, names: list[str], name: str) -> int:
    if name not in names:
        raise TypeError(
            f"{fid}: map: no parameter named {name!r}; its parameters are {', '.join(names)}"
        )
    return names.index(name)


_VECTOR_NAME = r"(bool|int|uint|half|float|double|int64_t|uint64_t)([1-4])"


def _type_name(name: str) -> str:
    """A Slang type's name as reflection writes it (``float3`` as ``vector<float,3>``)."""
    name = name.replace(" ", "")
    m = re.fullmatch(_VECTOR_NAME, name)
    return f"vector<{m.group(1)},{m.group(2)}>" if m else name


_TOKEN = r"\w+|\S"


def generic_arguments(
    fid: str,
    layout: ParamLayout,
    generics: Sequence[str],
    dims: tuple[Any, ...],
    named: dict[str, Any],
) -> tuple[str, ...] | None:
    """The generic arguments that type mappings give a generic function, in its declared
    order (``map("float3")`` for ``vector<float, N>`` gives ``N`` = 3, ``map("float")`` for
    ``T`` gives ``float``); None where no mapping names a generic's type. TypeError for
    mappings that give one generic two values, or leave one unnamed."""
    names = [name for name, *_ in layout]
    typed = [(k, m) for k, m in enumerate(dims) if isinstance(m, str)]
    typed += [(names.index(n), m) for n, m in named.items() if isinstance(m, str) and n in names]
    given: dict[str, str] = {}
    for k, m in typed:
        declared = layout[k][3]
        for generic, value in _unified(declared, m, generics).items():
            if given.setdefault(generic, value) != value:
                raise TypeError(
                    f"{fid}: map: the type mappings give generic {generic} two values, "
                    f"{given[generic]} and {value}"
                )
    if not given:
        return None
    missing = [g for g in generics if g not in given]
    if missing:
        raise TypeError(
            f"{fid}: map: the type mappings name no type for generic {', '.join(missing)}; "
            f'name every generic argument explicitly (m["{fid.partition("::")[2]}<...>"])'
        )
    return tuple(given[g] for g in generics)


def _unified(declared: str, mapped: str, generics: Sequence[str]) -> dict[str, str]:
    """The values of ``generics`` that make type ``declared`` read as ``mapped``; {} where it
    has none of them or they do not fit (``_own_type`` then says so)."""
    if declared in generics:
        return {declared: mapped.replace(" ", "")}
    pattern, seen = [], set()
    for token in re.findall(_TOKEN, declared):
        if token in generics and token not in seen:
            seen.add(token)
            pattern.append(f"(?P<{token}>[^,<>]+)")
        elif token in generics:
            pattern.append(f"(?P={token})")
        else:
            pattern.append(re.escape(token))
    if not seen:
        return {}
    found = re.fullmatch("".join(pattern), _type_name(mapped))
    return {} if found is None else found.groupdict()


def _own_type(fid: str, param: tuple[str, int, bool, str], m: str) -> None:
    """A type mapping (slangpy's ``map("int64_t")``) that gives no generic an argument: taken
    where it names the parameter's own type, which it leaves as it is; a TypeError otherwise."""
    name, *_, slang_type = param
    if _type_name(m) != _type_name(slang_type):
        raise TypeError(
            f"{fid}: map: parameter '{name}': slangpy's type mapping ({m!r}) is taken only where "
            f"it names the parameter's own type ({slang_type}) or one its generics make "
            '(map("float3") for vector<float, N>)'
        )


def _dimensions(fid: str, name: str, m: Any) -> tuple[int, ...]:
    if isinstance(m, int):
        m = (m,)
    ok = isinstance(m, tuple | list) and all(type(d) is int and d >= 0 for d in m)
    if not ok or len(set(m)) != len(m):
        raise TypeError(
            f"{fid}: map: parameter '{name}': expected a tuple of distinct call dimensions "
            f"(ints from 0), got {m!r}"
        )
    return tuple(m)


def _placed(
    fid: str,
    param: tuple[str, int, bool, str],
    value: Any,
    m: tuple[int, ...],
    order: list[int],
    rank: int,
) -> Any:
    """``value`` viewed with its call dimensions at ``m``'s places among ``rank`` (size 1
    elsewhere), its element dimensions after them; ``order`` sorts ``m``."""
    name, elem, elementwise, slang_type = param
    if not m and not isinstance(value, torch.Tensor):
        return value  # no dimensions to place: a value every call takes whole
    if not isinstance(value, torch.Tensor) or not elementwise:
        raise TypeError(
            f"{fid}: map: parameter '{name}': only a tensor fed elementwise can be mapped, "
            f"got {type(value).__name__} for {slang_type}"
        )
    calls = value.dim() - elem
    if calls != len(m):
        raise ValueError(
            f"{fid}: map: parameter '{name}': the mapping {m} names {len(m)} dimensions, but "
            f"a tensor of shape {tuple(value.shape)} has {calls} besides the element shape "
            f"of {slang_type}"
        )
    value = value.permute((*order, *range(calls, value.dim())))
    for d in range(rank):
        if d not in m:
            value = value.unsqueeze(d)
    return value
