"""The one place the package version is written."""

__version__ = "0.1.0"
