"""The wording of resolution's errors: arguments as a message describes them."""

from __future__ import annotations

from ..errors import Error
from ..signatures.scalars import REFUSED_DTYPES
from ..signatures.text import (
    ArgForm,
    DictForm,
    GeneratorForm,
    GridForm,
    NumbersForm,
    ResultForm,
    TensorForm,
    TypeNameForm,
)

PY_NAMES = {"f": "Python float", "i": "Python int", "b": "Python bool"}
_NUMBER_NAMES = {"f": "numbers, floats among them", "i": "ints", "b": "bools"}


class ShapeClassError(Error, ValueError):
    """A tensor whose trailing dimensions are not its parameter's element shape, as far as the
    signature's extent classes tell; a call, which has the tensor (argument ``index``, at
    ``path`` in a dict), names its actual shape instead (``with_shape``)."""

    def __init__(self, head: str, got: str, index: int, path: tuple[str, ...]) -> None:
        super().__init__(f"{head} {got}")
        self.head = head
        self.index = index
        self.path = path

    def with_shape(self, shape: tuple[int, ...]) -> ValueError:
        return ValueError(f"{self.head} shape {shape}")


def a_dtype(dtype: str) -> str:
    """``dtype`` with its article: "a float32", "an int32"."""
    return f"an {dtype}" if dtype.startswith("int") else f"a {dtype}"


def a_or_an(words: str) -> str:
    """``words`` with their article: "an interface", "an 'in'", "a struct"."""
    return f"{'an' if words.strip(chr(39))[0] in 'aeiou' else 'a'} {words}"


def shape_text(shape: tuple[int, ...]) -> str:
    """``shape`` as Python writes a tuple: "(3,)", "(2, 3)"."""
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


def refusal(dtype: str) -> str:
    """Why no parameter takes tensors of ``dtype``, for a message; "" where some does."""
    return f" ({REFUSED_DTYPES[dtype]})" if dtype in REFUSED_DTYPES else ""


def describe(form: ArgForm) -> str:
    """An argument as a message names it: "a float32 tensor of rank 2", "a 2-D grid"."""
    if isinstance(form, TensorForm):
        what = "numpy array" if form.numpy else "tensor"
        return f"{a_dtype(form.dtype)} {what} of rank {form.rank}{refusal(form.dtype)}"
    if isinstance(form, GridForm):
        return f"a {form.rank}-D grid"
    if isinstance(form, GeneratorForm):
        dims = "" if form.dims is None else f" of {form.dims} components"
        return f"{form.kind}(){dims}"
    if isinstance(form, ResultForm):
        return "a _result shape"
    if isinstance(form, DictForm):
        return f"a dict of {', '.join(k for k, _ in form.fields)}"
    if isinstance(form, NumbersForm):
        return f"a tuple of {form.length} Python {_NUMBER_NAMES[form.kind]}"
    if isinstance(form, TypeNameForm):
        return f"the struct name '{form.name}'"
    return PY_NAMES[form.kind]
