"""debate-ledger: auditable multi-agent debate on multiple-choice questions.

Debate hides two opposite mechanisms behind final accuracy: it rescues wrong initial majorities
(correction) and destroys right ones (collapse). This package records every debate as a
transition ledger, replays interventions on both sides of that trade-off, screens families for
collapse risk with exact permutation statistics, compares debate with a call-matched majority
vote, and rebuilds every table from the ledger alone.
"""

from debate_ledger.coders import CODERS, DEFAULT_CODER, code_answer
from debate_ledger.families import DEMO_MODELS, Profile, ScriptedDebater, simulate
from debate_ledger.ledger import (
    DebateArrays,
    Transitions,
    from_rows,
    majority_vote,
    transitions,
)
from debate_ledger.prompts import CHAT_PROMPTS, TINY_PROMPTS, DebatePrompts
from debate_ledger.rebuild import rebuild
from debate_ledger.replay import replay_all
from debate_ledger.runner import DebateConfig, RunResult, config_hash, run_debates
from debate_ledger.schemas import LedgerError, LedgerRow, Question, read_ledger, read_questions
from debate_ledger.screen import (
    associate,
    partial_exact_p,
    spearman_exact_p,
    spearman_p,
    spearman_rho,
)

__version__ = "0.3.0"

__all__ = [
    "CHAT_PROMPTS",
    "CODERS",
    "DEFAULT_CODER",
    "DEMO_MODELS",
    "TINY_PROMPTS",
    "DebateArrays",
    "DebateConfig",
    "DebatePrompts",
    "LedgerError",
    "LedgerRow",
    "Profile",
    "Question",
    "RunResult",
    "ScriptedDebater",
    "Transitions",
    "__version__",
    "associate",
    "code_answer",
    "config_hash",
    "from_rows",
    "majority_vote",
    "partial_exact_p",
    "read_ledger",
    "read_questions",
    "rebuild",
    "replay_all",
    "run_debates",
    "simulate",
    "spearman_exact_p",
    "spearman_p",
    "spearman_rho",
    "transitions",
]
