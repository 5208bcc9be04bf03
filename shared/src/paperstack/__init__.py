"""paperstack-core: the thin shared core of the paperstack packages.

Only what three or more method packages need lives here:

- :mod:`paperstack.records`: run manifest, ``results.json`` schema with claims judged by the
  interval of their difference, crash-safe JSONL, atomic writes.
- :mod:`paperstack.stats`: confidence intervals for the numbers and the differences reports judge.
- :mod:`paperstack.contract`: the command line every package keeps (demo, bench, common flags).
- :mod:`paperstack.checkpoint`: model folders loaded with one-line errors.
- :mod:`paperstack.progress`: progress bars on a terminal, periodic lines elsewhere.
- :mod:`paperstack.report`: results to Markdown tables and matplotlib figures.
- :mod:`paperstack.tasks`: synthetic tasks with exact verifiers (Countdown, arithmetic, facts).
- :mod:`paperstack.tiny` (extra ``torch``): tiny Llama-style models and their local tokenizer.
- :mod:`paperstack.llm` (extras ``torch``, ``http``, ``serve``): one protocol for a model that
  chats and scores; a real ``transformers serve`` for tests; a cost ledger.
- :mod:`paperstack.embed` (extra ``embed``): sentence embeddings from all-MiniLM-L6-v2, offline.

Importing :mod:`paperstack` imports none of the heavy libraries.
"""

from paperstack.errors import PaperstackError

__version__ = "0.3.0"

__all__ = ["PaperstackError", "__version__"]
