"""The rows of the table of Python values (``values``): ``ValueRow``, what one says of its kind
of Python value, the registry the ``value_*`` modules register theirs in, and the look-ups
that dispatch on a value's row.

Plain Python, free of torch and numpy, so that a warm process reads manifests through the rows
without importing either: a row names such a type ("torch.Tensor") rather than importing it,
and touches torch only where a value of it is at hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar


class ValueRow:
    """One kind of Python value. The defaults are those of a value that nothing but a
    signature form is asked of: it has no tensors, is not packed for traced calls and has no
    manifest spelling."""

    python_types: ClassVar[tuple[type | str, ...]] = ()
    """The classes it is for, their subclasses too; a str ("torch.Tensor") names a class by
    its module and qualified name, so that the module need not be imported."""
    letters: ClassVar[str] = ""
    """The first letters of the kinds ``pack`` writes for it, which ``unpack`` reads."""
    forms: ClassVar[tuple[type, ...]] = ()
    """The parsed signature forms (``text``) it writes, which ``form_grad`` reads."""
    spelling: ClassVar[str] = ""
    """How a manifest spells it, as the message listing the spellings says; "" for none."""
    order: ClassVar[float] = 100.0
    """Where its spelling is listed among the others'."""
    reads_last: ClassVar[bool] = False
    """Whether a manifest's spec is tried as its spelling only after every other row's."""

    def form(self, value: Any, grad_on: bool) -> str:
        """The value's signature form (``grad_on``: whether grad mode is on); TypeError or
        ValueError saying what it cannot be."""
        raise NotImplementedError(f"{type(self).__name__} writes no signature form")

    def call_form(self, value: Any, grad_on: bool) -> str:
        """``form`` as a call computes it: where the call fails, it asks ``form`` again for the
        message, so this may say less."""
        return self.form(value, grad_on)

    def problem(self, value: Any) -> Exception | None:
        """Why the value has no form, where ``form`` cannot say it; None to let it."""
        return None

    def pack(self, value: Any, packing: Packing, where: str) -> None:
        """Append the value to ``packing``: its kind (then ``where``) and its numbers."""
        raise untraceable(value)

    def unpack(self, kind: str, source: Unpacking) -> Any:
        """The value ``pack`` wrote as ``kind``, its numbers read from ``source``."""
        raise NotImplementedError(f"{type(self).__name__} unpacks no kind {kind!r}")

    def read_spec(self, spec: Any) -> str | None:
        """The argument signature of a manifest's spec that spells this kind; None for one
        that does not."""
        return None

    def tensors(self, value: Any) -> list[Any]:
        """The torch tensors the value holds."""
        return []

    def to_torch(self, value: Any, device: Any) -> Any:
        """The value as a call binds it, numpy arrays in it torch tensors on ``device``."""
        return value

    def generates(self, value: Any) -> bool:
        """Whether the value holds a generator, which leaves the call shape to ``_result=``."""
        return False

    def flagged(self, value: Any, grads: Iterator[bool]) -> Any:
        """The value as a traced call had it: each of its tensors detached and requiring grad
        as the next of ``grads`` says (their flags in the order ``pack`` appends them)."""
        return value

    def flagged_form(self, value: Any, grads: Iterator[bool]) -> str:
        """The signature form the value had in a traced call (``flagged``)."""
        return self.form(self.flagged(value, grads), True)

    def form_grad(self, form: Any) -> bool:
        """Whether ``form``, one of ``forms``, has a tensor that requires grad."""
        return False


def spec_text(spec: Any) -> str | None:
    """A manifest's spec as text, stripped; None for a table of fields."""
    return spec.strip() if isinstance(spec, str) else None


class Packing:
    """A call's arguments as the lists torch's operators take, as ``pack`` fills them."""

    def __init__(self, grad_mode: bool) -> None:
        self.tensors: list[Any] = []
        self.grads: list[bool] = []
        self.kinds: list[str] = []
        self.floats: list[float] = []
        self.ints: list[int] = []
        self.grad_mode = grad_mode
        self.index = 0
        """The position of the argument being packed."""

    def add(self, value: Any, where: str = "") -> None:
        """Append ``value``, at ``where`` (a dict's field: ``@1.dir``; "" an argument)."""
        row_of(value).pack(value, self, where)


class Unpacking:
    """The lists ``Packing`` filled, read back kind by kind."""

    def __init__(self, tensors: Iterable[Any], floats: Iterable[float], ints: Iterable[int]):
        self.tensors = iter(tensors)
        self.floats = iter(floats)
        self.ints = iter(ints)

    def value(self, kind: str) -> Any:
        """The next value, packed as ``kind``."""
        return _by_letter[kind[0]].unpack(kind, self)


def untraceable(value: Any) -> TypeError:
    """The error of packing a value that a traced call cannot take."""
    return TypeError(
        f"cannot pass a value of type {type(value).__name__} in code torch compiles; expected "
        "a torch tensor, Python float/int/bool, a flat tuple or list of those, "
        "slangspec.grid, a generator or a dict of those"
    )


_rows: list[ValueRow] = []
_by_class: dict[type, ValueRow] = {}
_by_name: dict[str, ValueRow] = {}
_by_letter: dict[str, ValueRow] = {}
ROW_OF: dict[type, ValueRow] = {}
"""The row of each type looked up so far, subclasses included: ``row_of``'s memo, which the hot
path reads first."""


def register(row: ValueRow) -> ValueRow:
    """Add ``row`` to the table; ValueError where one of its types or letters has a row."""
    for t in row.python_types:
        if (_by_name.get(t) if isinstance(t, str) else _by_class.get(t)) is not None:
            raise ValueError(f"register {type(row).__name__}: {t} already has a row")
    for letter in row.letters:
        if letter in _by_letter:
            raise ValueError(f"register {type(row).__name__}: kind {letter!r} already has a row")
    for t in row.python_types:
        if isinstance(t, str):
            _by_name[t] = row
        else:
            _by_class[t] = row
    _by_letter.update(dict.fromkeys(row.letters, row))
    _rows.append(row)
    _forget_rows_found()
    return row


def unregister(row: ValueRow) -> None:
    """Take ``row`` out of the table."""
    _rows.remove(row)
    tables: tuple[dict[Any, ValueRow], ...] = (_by_class, _by_name, _by_letter)
    for table in tables:
        for key in [k for k, r in table.items() if r is row]:
            del table[key]
    _forget_rows_found()


def _forget_rows_found() -> None:
    """Empty ``ROW_OF`` but for the classes rows name: a call torch compiles finds those there
    without walking a class's bases, which torch cannot trace."""
    ROW_OF.clear()
    ROW_OF.update(_by_class)


def row_of(value: Any) -> ValueRow:
    """The row of ``value``: its class's, else the nearest base class's."""
    return row_of_class(type(value))


def row_of_class(cls: type) -> ValueRow:
    """The row of values of class ``cls``, found once and kept in ``ROW_OF``."""
    row = ROW_OF.get(cls)
    if row is None:
        for c in cls.__mro__:
            row = _by_class.get(c) or _by_name.get(f"{c.__module__}.{c.__qualname__}")
            if row is not None:
                break
        assert row is not None, "every class has object's row"
        ROW_OF[cls] = row
    return row


def tensors_of(values: Iterable[Any]) -> list[Any]:
    """The torch tensors among ``values``, inside dicts too."""
    return [t for v in values for t in row_of(v).tensors(v)]


def to_torch(values: Sequence[Any], device: Any) -> tuple[Any, ...]:
    """``values`` as a call binds them: every numpy array, inside dicts too, a torch tensor on
    the device of the first torch tensor among them, else on ``device``."""
    device = next((t.device for t in tensors_of(values)), None) or device
    return tuple(row_of(v).to_torch(v, device) for v in values)


def flagged(values: Iterable[Any], grads: Iterable[bool]) -> list[Any]:
    """``values`` as a traced call had them, their tensors' grad flags ``grads`` in the order
    packing appends them (``ValueRow.flagged``)."""
    flags = iter(grads)
    return [row_of(v).flagged(v, flags) for v in values]


def flagged_forms(values: Iterable[Any], grads: Iterable[bool]) -> list[str]:
    """The signature forms ``values`` had in a traced call (``ValueRow.flagged_form``)."""
    flags = iter(grads)
    return [row_of(v).flagged_form(v, flags) for v in values]


def generates(value: Any) -> bool:
    """Whether ``value`` holds a generator."""
    return row_of(value).generates(value)


def form_grad(form: Any) -> bool:
    """Whether a parsed signature form has a tensor that requires grad, in a dict's fields too."""
    for row in _rows:
        if isinstance(form, row.forms):
            return row.form_grad(form)
    return False


def spec_signature(spec: Any) -> str:
    """One argument spec of a manifest's grammar (``warm``) -> its argument signature."""
    if not isinstance(spec, str | dict):
        raise ValueError(f"argument spec {spec!r}: expected a string or a table of fields")
    for row in sorted(_rows, key=lambda r: r.reads_last):
        signature = row.read_spec(spec)
        if signature is not None:
            return signature
    spellings = ", ".join(r.spelling for r in sorted(_rows, key=lambda r: r.order) if r.spelling)
    raise ValueError(f"argument spec {spec!r}: expected {spellings} or an argument signature")


class _Unpassable(ValueRow):
    """Every value of no other row's type: none has a form."""

    python_types = (object,)

    def form(self, value: Any, grad_on: bool) -> str:
        raise TypeError(
            f"cannot pass a value of type {type(value).__name__}; expected a torch tensor, numpy "
            "array, Python float/int/bool, a tuple or list of those (a vector or array), "
            "slangspec.grid, call_id(), thread_id(), wang_hash(), rand_float() or a dict of "
            "those (a struct)"
        )


register(_Unpassable())
