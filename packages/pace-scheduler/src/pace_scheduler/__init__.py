"""pace-scheduler: Pace, per-step admission of intra-request branches for LLM serving.

Requests that fork into independent branches can decode them concurrently, but every admitted
branch makes every co-batched step slower (the branch externality). Pace admits extra branches
each step only while the predicted step-time increase fits the batch's SLO slack budget. This
package holds the engine-independent controller, the baselines (IRP-Off, IRP-Eager, fixed
caps), a calibrated serving simulator, a profiler that fits the latency model to real steps,
and a vLLM scheduler plug-in.
"""

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

__all__ = [
    "H200_QWEN3_32B",
    "EngineConfig",
    "GlobalCap",
    "IRPEager",
    "IRPOff",
    "LatencyModel",
    "OnlinePredictor",
    "Pace",
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
