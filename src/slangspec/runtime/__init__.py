"""The JIT runtime: modules, functions, dispatch and autograd glue (``module.py``), and what the
builder sees of a module (``build.py``, which warming workers use without torch)."""
