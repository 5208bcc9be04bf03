"""pcbinnobench: executable KiCad design-and-upgrade tasks for LLM agents."""

__version__ = "0.3.0"
