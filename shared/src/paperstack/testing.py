"""pytest plugin shipped with paperstack-core (loaded through the ``pytest11`` entry point).

Every package marks CUDA-only tests ``@pytest.mark.gpu`` and long ones ``@pytest.mark.slow``. This
plugin registers both markers (so ``--strict-markers`` accepts them everywhere) and:

- skips ``gpu`` tests when no CUDA device is present, so one suite runs on a laptop, in CPU CI and
  on a GPU machine (torch is imported only when a ``gpu`` test was collected);
- skips ``slow`` tests unless they are asked for, by ``--run-slow`` or by a ``-m`` expression that
  names ``slow`` (``-m slow``), so a plain ``pytest`` stays the fast suite everywhere.
"""

from __future__ import annotations

import pytest

__all__ = ["cuda_available"]


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow", action="store_true", default=False, help="also run tests marked slow"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: minutes long; run with --run-slow or -m slow")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_slow = config.getoption("--run-slow") or "slow" in (config.getoption("markexpr") or "")
    if not run_slow:
        skip_slow = pytest.mark.skip(reason="slow: run with --run-slow or -m slow")
        for item in items:
            if item.get_closest_marker("slow") is not None:
                item.add_marker(skip_slow)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (marked gpu)")
    for item in gpu_items:
        item.add_marker(skip_gpu)
