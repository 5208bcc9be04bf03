"""corrective-context: under-, proper and over-correction by in-context information.

External information (demonstrations, retrieved passages, memories) moves a model's answer by a
correction vector ``c = ŷ(with item) - ŷ(without)``; it helps only when ``c`` points against the
reasoning error ``e = ŷ - y*`` with about the error's length. :mod:`corrective_context.correction`
decomposes and classifies corrections, :mod:`~corrective_context.analytic` is the exact
linear-attention setting, :mod:`~corrective_context.learner` a trained in-context learner,
:mod:`~corrective_context.measure` measures any transformers model through its hidden states,
:mod:`~corrective_context.spaces` says in which answer spaces over-correction can occur at all
(not in probability space against a one-hot target: there ``ρ <= 1``, proved),
:mod:`~corrective_context.real` is the real-model arm (value space, SmolLM2-135M-Instruct), and
:mod:`~corrective_context.selector` selects items while the predicted correction stays proper.
"""

from corrective_context.correction import Correction, classify, decompose
from corrective_context.errors import CorrectiveContextError
from corrective_context.selector import Selection, SelectorConfig, greedy_proper, select

__version__ = "0.3.0"

__all__ = [
    "Correction",
    "CorrectiveContextError",
    "Selection",
    "SelectorConfig",
    "__version__",
    "classify",
    "decompose",
    "greedy_proper",
    "select",
]
