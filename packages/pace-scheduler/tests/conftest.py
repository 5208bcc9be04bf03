"""One thread for torch (CI and the dev machine are 2 shared cores) and small shared fixtures."""

from __future__ import annotations

import pytest

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the controller and simulator need no torch
    pass

from pace_scheduler import demo
from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel
from pace_scheduler.profile import ProfileConfig
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


#: The demo's plan cut to a few requests, loads and policies (tests/test_commands.py, the
#: conformance suite's in-process runs).
TINY_PLAN = demo.DemoPlan(
    engine_loads=(1.0,),
    engine_requests=4,
    engine_seeds=2,
    engine_policies=("irp-off", "irp-eager", "pace"),
    engine_caps=("global-2",),
    sim_loads=(0.5, 1.0),
    sim_requests=10,
    sim_policies=("irp-off", "irp-eager", "pace"),
    sim_caps=("cap-2", "global-8"),
    profile=ProfileConfig(batch_sizes=(1, 2, 4), contexts=(8, 32), new_tokens=3),
    validation_seeds=(100,),
)


@pytest.fixture
def tiny_demo(monkeypatch):
    """The demo on TINY_PLAN and the micro toy model: the whole pipeline in seconds."""
    from pace_scheduler import profile

    micro = profile.toy_model

    monkeypatch.setattr(demo, "plan", lambda quick: TINY_PLAN)
    monkeypatch.setattr(profile, "toy_model", lambda: micro("micro"))
