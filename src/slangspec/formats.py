"""Every format constant: bumped whenever what it versions changes shape or meaning, so that
nothing written under another version is ever read as this one's."""

VERSION = "0.1.0"
"""slangspec's own (``slangspec.__version__``, the package's): every cache key's toolchain
names it, so kernels made by another release are never read as this one's."""

SIGNATURE_FORMAT = 2
"""Composed signatures: bumped whenever any argument form changes."""
PLAN_FORMAT = 11
"""Specialization plans: bumped whenever a plan's fields or meaning change."""
CODEGEN_FORMAT = 11
"""Generated sources: bumped whenever they change for the same plan."""
BINARY_FORMAT = 1
"""Compiled kernels: bumped whenever the build of the same source changes (its options, the
launch bounds ``compile.cuda.registers`` adds)."""
CACHE_FORMAT = 1
"""Cache entries: bumped whenever the entry layout or the preimage changes shape."""
SHIPPED_FORMAT = "slangspec-shipped-kernels"
SHIPPED_VERSION = 1
"""Kernels a package ships (``cache_store.shipped``)."""
BUNDLE_FORMAT = "slangspec-bundle"
BUNDLE_VERSION = 2
"""Bundles of entries (``aot.bundle``); 2: entries in the travelling form, sealed by a ``mac`` over
every blob they name."""
SERVER_PROTOCOL = 2
"""The compile server's requests and replies: bumped whenever their fields or meaning change
(1: the messages before they carried an identity)."""
