"""pall-lns: process-aware large neighbourhood search (PALL) for large MILPs on SCIP.

An ensemble of evolved neighbourhood operators is driven by a selector that reads the
optimisation history (operators tried, rewards, search state); sub-MIPs are solved by SCIP and
the selector (a fine-tuned LM in the paper's configuration, :mod:`pall_lns.lm`) runs
asynchronously in its own worker process. Importing this package imports neither the solvers nor
torch: they are loaded when a model is read or an LM is used.
"""

__version__ = "0.3.0"

from pall_lns.errors import PallError
from pall_lns.generators import generate
from pall_lns.instance import Instance, read_instance
from pall_lns.lns import LnsConfig, LnsResult, run_lns
from pall_lns.operators import OperatorSpec, default_pool
from pall_lns.selectors import (
    EpsilonGreedySelector,
    Exp3Selector,
    FixedSelector,
    LearnedSelector,
    LLMSelector,
    RandomSelector,
    UCBSelector,
    load_default,
)

__all__ = [
    "EpsilonGreedySelector",
    "Exp3Selector",
    "FixedSelector",
    "Instance",
    "LLMSelector",
    "LearnedSelector",
    "LnsConfig",
    "LnsResult",
    "OperatorSpec",
    "PallError",
    "RandomSelector",
    "UCBSelector",
    "__version__",
    "default_pool",
    "generate",
    "load_default",
    "read_instance",
    "run_lns",
]
