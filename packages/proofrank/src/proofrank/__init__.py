"""proofrank (placeholder during build)."""
__version__ = "0.1.0"
