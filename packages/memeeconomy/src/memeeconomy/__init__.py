"""memeeconomy: an agent market under economic survival pressure, with BDI ledgers, and the
MemeAgent verifier trained on them.

Agents (any :class:`paperstack.llm.ChatModel`, or scripted :class:`ScriptedInvestor` rule
agents with planted behaviour) invest in memes about events, choosing content from a hidden
five-tier harm taxonomy and a community, under low or high ("survival") pressure; every
decision is a pydantic-validated Belief-Desire-Intention record in an append-only, resumable
JSONL ledger (:func:`run_market`). :mod:`memeeconomy.metrics` measures harmful selection by
pressure, acknowledgement suppression, ranking against ethics and harm right after removals,
with intervals clustered by agent; :mod:`memeeconomy.verifier` trains MemeAgent verifiers on
the logs and compares them with zero-shot verifiers in one harness.
"""

from memeeconomy.agents import POPULATIONS, Profile, ScriptedInvestor, population
from memeeconomy.bdi import BDIRecord, ParseFailure, parse_bdi
from memeeconomy.errors import MemeEconomyError
from memeeconomy.events import COMMUNITIES, TIERS, Community, Event, load_events, shipped_events
from memeeconomy.market import PRESSURES, MarketConfig, MarketResult, run_market

__version__ = "0.3.0"

__all__ = [
    "COMMUNITIES",
    "POPULATIONS",
    "PRESSURES",
    "TIERS",
    "BDIRecord",
    "Community",
    "Event",
    "MarketConfig",
    "MarketResult",
    "MemeEconomyError",
    "ParseFailure",
    "Profile",
    "ScriptedInvestor",
    "__version__",
    "load_events",
    "parse_bdi",
    "population",
    "run_market",
    "shipped_events",
]
