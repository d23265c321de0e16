"""Generators: arguments that make a value per thread in the kernel (its call index, its thread
id, a hash of that, a random float) instead of reading one, as slangpy 0.43.1's ``call_id()``,
``thread_id()``, ``wang_hash()`` and ``rand_float()`` do, with the same values.

``GENERATOR`` is the one table of what each takes and fills; the classes are what a caller
passes. Plain data, free of torch and slangpy, so the builder reads it from signatures alone.
A generator's options that change the kernel (``dims``) are in its signature form; its values
(seeds, ranges, warmup counts) are uniform words of the kernel, so one kernel serves them all.
"""

from __future__ import annotations

import math
import struct
from typing import Any, ClassVar

from ..define import frozen

_UINT32 = 2**32
FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_ROUNDS_TO_INF = FLOAT32_MAX + 2.0**103
"""The least magnitude a float32 rounds to infinity (half its last step past the largest);
compared, not packed, so that torch.compile traces a ``rand_float`` made in compiled code."""
DEFAULT_SEED = 2640457667
"""slangpy's default seed for ``wang_hash`` and ``rand_float``."""


@frozen
class GeneratorKind:
    """What a generator fills: parameters of ``scalars`` (a scalar, or a vector of at most
    ``max_width`` components; arrays too where ``arrays``), and how many uniform words its
    values take."""

    scalars: tuple[str, ...]
    max_width: int
    arrays: bool
    words: int
    fills: str  # the parameters it fills, for messages


GENERATOR: dict[str, GeneratorKind] = {
    "call_id": GeneratorKind(("int", "uint"), 0, True, 0, "an int or uint, a vector or array"),
    "thread_id": GeneratorKind(("int", "uint"), 3, False, 0, "an int or uint, or a vector of 1-3"),
    "wang_hash": GeneratorKind(("int", "uint"), 3, False, 2, "an int or uint, or a vector of 1-3"),
    "rand_float": GeneratorKind(("float",), 3, False, 4, "a float, or a vector of 1-3 floats"),
}
"""The generators, by the name their signature form and their function have."""


def wang_hash_of(value: int) -> int:
    """Thomas Wang's 32-bit integer hash, as slangpy's kernels compute it."""
    value = (value ^ 61) ^ (value >> 16)
    value = (value * 9) % _UINT32
    value ^= value >> 4
    value = (value * 0x27D4EB2D) % _UINT32
    return value ^ (value >> 15)


def float_bits(value: float) -> int:
    """The bits of ``value`` as a float32, as a uniform word holds it."""
    return int.from_bytes(struct.pack("<f", value), "little")


def _dims(dims: Any, what: str) -> int:
    if isinstance(dims, tuple | list):
        raise ValueError(
            f"{what}: dims must be an int; for a call index of a given shape use "
            "slangspec.grid(shape)"
        )
    if isinstance(dims, bool) or not isinstance(dims, int) or dims == 0 or dims < -1:
        raise ValueError(
            f"{what}: dims must be -1 (the parameter's) or a positive int, got {dims!r}"
        )
    return dims


def _seed(seed: Any, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < _UINT32:
        raise ValueError(f"{what}: seed must be an int from 0 to {_UINT32 - 1}, got {seed!r}")
    return seed


def _warmup(warmup: Any, what: str) -> int:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < _UINT32:
        raise ValueError(f"{what}: warmup must be a non-negative int, got {warmup!r}")
    return warmup


def _hash_seed(hash_seed: Any, what: str) -> bool:
    if not isinstance(hash_seed, int) or hash_seed not in (0, 1):
        raise ValueError(f"{what}: hash_seed must be True or False, got {hash_seed!r}")
    return bool(hash_seed)


def _bound(value: Any, name: str) -> float:
    """A bound of ``rand_float``'s range, as the float32 its uniform word holds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"rand_float: {name} must be a number, got {value!r}")
    try:
        bound = float(value)
    except OverflowError:
        bound = math.inf
    if abs(bound) < _FLOAT32_ROUNDS_TO_INF:
        return bound
    raise ValueError(
        f"rand_float: {name} must be a finite number a float32 can hold (from "
        f"{-FLOAT32_MAX:.8g} to {FLOAT32_MAX:.8g}), got {value!r}"
    )


class Generator:
    """A value made per thread in the kernel. ``dims`` is the width of the vector it fills (-1:
    the parameter's); ``words()`` the uniform words its values bind as."""

    kind: ClassVar[str]
    int_fields: ClassVar[tuple[str, ...]] = ()
    float_fields: ClassVar[tuple[str, ...]] = ()
    dims: int

    def words(self) -> list[int]:
        return []

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"slangspec.{self.kind}({fields})"


class call_id(Generator):
    """The thread's index in the call shape: a vector's ``.x`` is the innermost dimension (a
    vector one wider than the call's rank ends in 0), an array's elements are in dimension
    order, a scalar is the index of a 1-D call."""

    kind = "call_id"

    def __init__(self, dims: int = -1) -> None:
        self.dims = _dims(dims, "call_id")


class thread_id(Generator):
    """The kernel's dispatch thread id: ``(i, 0, 0)`` for the thread of the ``i``-th point of
    the call shape, row-major."""

    kind = "thread_id"

    def __init__(self, dims: int = -1) -> None:
        self.dims = _dims(dims, "thread_id")


class wang_hash(Generator):
    """A 32-bit hash per thread and component: of the thread id times the vector's width,
    hashed ``warmup`` times, xor the seed (itself hashed once where ``hash_seed``), then hashed
    once per component, each from the one before."""

    kind = "wang_hash"
    int_fields = ("seed", "warmup", "hash_seed")

    def __init__(
        self, dim: int = -1, seed: int = DEFAULT_SEED, warmup: int = 0, hash_seed: bool = True
    ) -> None:
        self.dims = _dims(dim, "wang_hash")
        self.seed = _seed(seed, "wang_hash")
        self.warmup = _warmup(warmup, "wang_hash")
        self.hash_seed = _hash_seed(hash_seed, "wang_hash")

    def words(self) -> list[int]:
        return [wang_hash_of(self.seed) if self.hash_seed else self.seed, self.warmup]


class rand_float(Generator):
    """A float per thread and component in ``[min, max)``: ``wang_hash``'s hash, its low 23 bits
    over 2**23, interpolated from ``min`` to ``max``."""

    kind = "rand_float"
    int_fields = ("seed", "warmup", "hash_seed")
    float_fields = ("min", "max")

    def __init__(
        self,
        min: float = 0.0,
        max: float = 1.0,
        dim: int = -1,
        seed: int = DEFAULT_SEED,
        warmup: int = 0,
        hash_seed: bool = True,
    ) -> None:
        self.min = _bound(min, "min")
        self.max = _bound(max, "max")
        self.dims = _dims(dim, "rand_float")
        self.seed = _seed(seed, "rand_float")
        self.warmup = _warmup(warmup, "rand_float")
        self.hash_seed = _hash_seed(hash_seed, "rand_float")

    def words(self) -> list[int]:
        seed = wang_hash_of(self.seed) if self.hash_seed else self.seed
        return [seed, self.warmup, float_bits(self.min), float_bits(self.max)]


GENERATOR_CLASS: dict[str, type[Generator]] = {
    cls.kind: cls for cls in (call_id, thread_id, wang_hash, rand_float)
}


def rebuilt(kind: str, dims: int, ints: list[int], floats: list[float]) -> Generator:
    """The generator ``kind`` with ``dims`` and its fields' values, as ``packed`` lists them."""
    cls = GENERATOR_CLASS[kind]
    value = cls.__new__(cls)
    value.dims = dims
    for name, v in zip(cls.int_fields, ints, strict=True):
        setattr(value, name, bool(v) if name == "hash_seed" else v)
    for name, v in zip(cls.float_fields, floats, strict=True):
        setattr(value, name, v)
    return value


def packed(value: Generator) -> tuple[list[int], list[float]]:
    """The int and float fields of ``value``, in the order ``rebuilt`` reads them."""
    ints = [int(getattr(value, name)) for name in value.int_fields]
    return ints, [getattr(value, name) for name in value.float_fields]
