"""The JIT runtime: modules, functions, dispatch and autograd glue."""

from .module import Function, Module, UnknownFunctionError, load, load_source

__all__ = ["Function", "Module", "UnknownFunctionError", "load", "load_source"]
