"""orchestra-rl."""

__version__ = "0.3.0"
