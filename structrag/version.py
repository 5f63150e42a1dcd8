"""The release of structrag (also in ``pyproject.toml``), importable without the package's
lazy names: what a stored digest records it was written by."""

__version__ = "0.1.0"
