"""probe-audit: PROBE auditors for policy violations of tool-using agents."""

__version__ = "0.3.3"
