"""pace-scheduler: Pace, per-step admission of intra-request branches for LLM serving.

Requests that fork into independent branches can decode them concurrently, but every admitted
branch makes every co-batched step slower (the branch externality). Pace admits extra branches
each step only while the predicted step-time increase fits the batch's SLO slack budget. This
package holds the engine-independent controller, the baselines (IRP-Off, IRP-Eager, fixed
caps), Pace as a scheduler of transformers' continuous-batching engine (``EngineSession``,
imported on first use: it loads transformers), a serving simulator with a spec-derived H200
latency model, and a vLLM scheduler plug-in.
"""

from typing import Any

from pace_scheduler.admission import PaceConfig, PaceController, StepView
from pace_scheduler.errors import PaceSchedulerError
from pace_scheduler.latency import H200_QWEN3_32B, LatencyModel, OnlinePredictor, StepFeatures, fit
from pace_scheduler.policies import (
    GlobalCap,
    IRPEager,
    IRPOff,
    Pace,
    PerRequestCap,
    Policy,
    make_policy,
)
from pace_scheduler.simulator import EngineConfig, RunResult, simulate
from pace_scheduler.workload import RequestSpec, WorkloadConfig, generate, read_trace, write_trace

__version__ = "0.2.0"

_ENGINE = ("EngineSession", "EngineSetup", "PaceCBScheduler")


def __getattr__(name: str) -> Any:
    """The engine classes, imported only when asked for (``--help`` stays instant)."""
    if name in _ENGINE:
        from pace_scheduler import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'pace_scheduler' has no attribute {name!r}")


__all__ = [
    "H200_QWEN3_32B",
    "EngineConfig",
    "EngineSession",
    "EngineSetup",
    "GlobalCap",
    "IRPEager",
    "IRPOff",
    "LatencyModel",
    "OnlinePredictor",
    "Pace",
    "PaceCBScheduler",
    "PaceConfig",
    "PaceController",
    "PaceSchedulerError",
    "PerRequestCap",
    "Policy",
    "RequestSpec",
    "RunResult",
    "StepFeatures",
    "StepView",
    "WorkloadConfig",
    "__version__",
    "fit",
    "generate",
    "make_policy",
    "read_trace",
    "simulate",
    "write_trace",
]
