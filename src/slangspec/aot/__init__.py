"""Ahead of time: the warm manifest and its scheduler, the worker pool, bundles, kernels shipped in
a package, and explain."""
