"""One thread for torch (CI and the dev machine are 2 shared cores) and small shared fixtures."""

from __future__ import annotations

import pytest

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the controller and simulator need no torch
    pass

from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel
from pace_scheduler.workload import RequestSpec


@pytest.fixture
def h200() -> LatencyModel:
    return H200_QWEN3_32B.latency_model()


def request(
    rid: str = "r0",
    arrival: float = 0.0,
    serial: tuple[int, ...] = (4, 4),
    forks: tuple[tuple[int, ...], ...] = ((6, 6, 6),),
    tpot: float = 0.05,
    ttft: float = 1.0,
    prompt: int = 32,
) -> RequestSpec:
    return RequestSpec(
        id=rid,
        arrival=arrival,
        prompt_tokens=prompt,
        serial_tokens=serial,
        forks=forks,
        ttft_slo=ttft,
        tpot_slo=tpot,
    )
