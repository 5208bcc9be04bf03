"""debate-ledger: auditable multi-agent debate on multiple-choice questions.

Debate hides two opposite mechanisms behind final accuracy: it rescues wrong initial majorities
(correction) and destroys right ones (collapse). This package records every debate as a
transition ledger, replays interventions on both sides of that trade-off, screens families for
collapse risk with exact permutation statistics, and rebuilds every table from the ledger alone.
"""

from debate_ledger.coders import CODERS, code_answer
from debate_ledger.families import DEMO_FAMILIES, Family, ScriptedDebater, simulate
from debate_ledger.ledger import DebateArrays, Transitions, from_rows, transitions
from debate_ledger.prompts import DebatePrompts
from debate_ledger.rebuild import rebuild
from debate_ledger.replay import replay_all
from debate_ledger.runner import DebateConfig, run_debates
from debate_ledger.schemas import LedgerError, LedgerRow, Question, read_ledger, read_questions
from debate_ledger.screen import associate, spearman_exact_p, spearman_rho

__version__ = "0.2.0"

__all__ = [
    "CODERS",
    "DEMO_FAMILIES",
    "DebateArrays",
    "DebateConfig",
    "DebatePrompts",
    "Family",
    "LedgerError",
    "LedgerRow",
    "Question",
    "ScriptedDebater",
    "Transitions",
    "__version__",
    "associate",
    "code_answer",
    "from_rows",
    "read_ledger",
    "read_questions",
    "rebuild",
    "replay_all",
    "run_debates",
    "simulate",
    "spearman_exact_p",
    "spearman_rho",
    "transitions",
]
