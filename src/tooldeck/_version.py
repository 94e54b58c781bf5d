"""The package's version, apart from ``tooldeck/__init__.py`` so any room can read it."""

__version__ = "0.1.0"
