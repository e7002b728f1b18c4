"""The package version, on its own so a module can name it without importing all of quipu."""

__version__ = "0.1.0"
