"""Recorded vLLM scheduler interface for the tests (see ../README.md); not vLLM."""

RECORDED = True
