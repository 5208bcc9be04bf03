"""minpath: chain-of-thought compression by typed reasoning graphs and minimal dependency paths.

A raw CoT becomes a Typed Reasoning Graph (typed steps, def-use edges, backtracking
invalidation, a networkx DAG); its Minimal Dependency Path (the conclusion's ancestors through
the cheapest producer per value) is re-rendered as a shorter CoT, checked to still derive the
answer (else the original is kept, and the fallback recorded), and a model is fine-tuned on it
with trl's ``SFTTrainer``.
"""

from minpath.errors import CycleError, MinPathError
from minpath.finetune import Generation, SFTSettings, TrainResult, generate, sft
from minpath.graph import (
    Compression,
    Equation,
    ModelTyper,
    RuleTyper,
    Step,
    build_graph,
    compress,
    cot_answer,
    derivable,
    min_path,
    parse_equations,
    parse_number,
    render,
    segment,
    typed_steps,
)
from minpath.natural import NaturalCoT, load_natural, score_natural
from minpath.traces import GoldTrace, Record, TraceStyle, load_jsonl, verbose_traces

__version__ = "0.3.0"

__all__ = [
    "Compression",
    "CycleError",
    "Equation",
    "Generation",
    "GoldTrace",
    "MinPathError",
    "ModelTyper",
    "NaturalCoT",
    "Record",
    "RuleTyper",
    "SFTSettings",
    "Step",
    "TraceStyle",
    "TrainResult",
    "__version__",
    "build_graph",
    "compress",
    "cot_answer",
    "derivable",
    "generate",
    "load_jsonl",
    "load_natural",
    "min_path",
    "parse_equations",
    "parse_number",
    "render",
    "score_natural",
    "segment",
    "sft",
    "typed_steps",
    "verbose_traces",
]
