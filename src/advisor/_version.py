"""The package version, importable from every layer (the root package is the top one)."""

__version__ = "0.1.0"
