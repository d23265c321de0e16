"""``@frozen`` makes of a class what ``dataclass(frozen=True)`` makes of it: the same instances,
equality, hashing, ``repr``, immutability and dataclass functions, class by class."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from slangspec.define import frozen


def _pair(**options):
    """The same class body, once as a frozen dataclass and once through ``@frozen``."""

    def body():
        class Point:
            """A point."""

            x: int
            y: float = 0.5
            label: str = dataclasses.field(default="p", compare=False, repr=False)

            def __post_init__(self) -> None:
                if self.x < 0:
                    raise ValueError("x")

            @property
            def norm(self) -> float:
                return abs(self.x) + abs(self.y)

        return Point

    return dataclasses.dataclass(frozen=True, **options)(body()), frozen(**options)(body())


@pytest.mark.parametrize("kw_only", [False, True])
def test_a_frozen_class_behaves_as_a_frozen_dataclass(kw_only):
    reference, ours = _pair(kw_only=kw_only)
    for make in ((lambda c: c(x=1)), (lambda c: c(x=2, y=1.5, label="q"))):
        a, b = make(reference), make(ours)
        assert repr(a) == repr(b)
        assert (a.x, a.y, a.label, a.norm) == (b.x, b.y, b.label, b.norm)
        assert b == make(ours) and hash(b) == hash(make(ours))
        assert hash(a) == hash(b)  # both hash the tuple of compared fields
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
        assert dataclasses.replace(b, x=7) == ours(x=7, y=b.y)
        assert copy.deepcopy(b) == b and copy.deepcopy(b) is not b
    assert ours(x=1, label="a") == ours(x=1, label="b")  # compare=False
    assert ours(x=1) != ours(x=2) and ours(x=1) != reference(x=1)
    assert ours.__match_args__ == reference.__match_args__
    for wrong in ((lambda: ours(x=-1)), (lambda: reference(x=-1))):
        with pytest.raises(ValueError, match="x"):
            wrong()
    if kw_only:
        for c in (reference, ours):
            with pytest.raises(TypeError):
                c(1)
    else:
        assert ours(1, 2.0) == ours(x=1, y=2.0)


@frozen
class Pickled:
    """Defined where pickle finds it."""

    name: str
    sizes: tuple[int, ...] = ()


def test_an_instance_survives_pickling():
    p = Pickled("a", (1, 2))
    assert pickle.loads(pickle.dumps(p)) == p


def test_its_fields_cannot_be_assigned_or_deleted():
    _, ours = _pair()
    p = ours(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="'x'"):
        p.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError, match="'y'"):
        del p.y
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.other = 3
    assert p.x == 1 and p.y == 0.5


def test_a_method_the_class_defines_is_kept():
    @frozen
    class Span:
        """Given a length, starts at 0."""

        start: int
        end: int

        def __init__(self, length: int) -> None:
            object.__setattr__(self, "start", 0)
            object.__setattr__(self, "end", length)

    assert (
        Span(3) == Span(3) and Span(3).end == 3 and repr(Span(2)).endswith("Span(start=0, end=2)")
    )


def test_what_it_does_not_make_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match=r"Bag\.items: @frozen takes fields with at most a default"):

        @frozen
        class Bag:
            items: list = dataclasses.field(default_factory=list)


KEYWORD, EMPTY = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty


def _parameters(cls):
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]


def test_classes_of_one_shape_keep_their_own_names_and_defaults():
    """Classes with as many fields of each sort share one compiled ``__init__`` shape; each
    still takes its own field names, defaults and keyword-only fields, as a dataclass does."""

    def two(name, first, second, default):
        body = {"__annotations__": {first: "int", second: "int"}, second: default}
        return type(name, (), body)

    left, right = frozen(two("Left", "a", "b", 1)), frozen(two("Right", "u", "v", 2))
    for ours, reference, names in (
        (left, dataclasses.dataclass(frozen=True)(two("Left", "a", "b", 1)), ("a", "b")),
        (right, dataclasses.dataclass(frozen=True)(two("Right", "u", "v", 2)), ("u", "v")),
    ):
        assert _parameters(ours) == _parameters(reference)
        assert ours.__init__.__qualname__ == f"{ours.__name__}.__init__"
        assert ours(5) == ours(**{names[0]: 5}) and repr(ours(5)) == repr(reference(5))
        with pytest.raises(TypeError, match=names[0]):
            ours()
    assert left.__init__.__code__.co_code == right.__init__.__code__.co_code

    @frozen(kw_only=True)
    class Options:
        """Keyword-only, with a default."""

        size: int
        mode: str = "fast"

    assert _parameters(Options) == [("size", KEYWORD, EMPTY), ("mode", KEYWORD, "fast")]
    assert Options(size=2) == Options(size=2, mode="fast") != Options(size=2, mode="slow")


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match=r"Late: a field without a default follows one with"):

        @frozen
        class Late:
            early: int = 0
            late: int
