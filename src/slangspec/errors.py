"""The one family of slangspec's exceptions: every error slangspec raises of its own is a
``slangspec.Error`` (and, where it is one, a ``TypeError``, ``ValueError`` or ``RuntimeError``
too), and every warning it gives a ``slangspec.SlangspecWarning``."""


class Error(Exception):
    """An error slangspec raises of its own."""


class SlangspecWarning(UserWarning):
    """A warning slangspec gives of its own."""
