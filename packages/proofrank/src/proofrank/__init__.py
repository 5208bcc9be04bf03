"""proofrank: proof quality beyond correctness (conciseness, computational ease, cognitive
simplicity, diversity, adaptivity), behind a correctness gate, over any ChatModel."""

from proofrank.agreement import cohen_kappa, judge_agreement
from proofrank.errors import ProofRankError
from proofrank.judges import Assessment, JudgeFailure, JudgeRequest, LLMJudge, RuleJudge
from proofrank.leaderboard import ProverRun, evaluate, pairwise_load, proxy_correctness_correlation
from proofrank.problems import Problem, ProblemSet, load_problems, shipped_problems
from proofrank.provers import ScriptedProver, scripted_provers
from proofrank.scoring import ProofScore, score_proof
from proofrank.taxonomy import DEFAULT_TAXONOMY, Taxonomy

__version__ = "0.3.0"

__all__ = [
    "DEFAULT_TAXONOMY",
    "Assessment",
    "JudgeFailure",
    "JudgeRequest",
    "LLMJudge",
    "Problem",
    "ProblemSet",
    "ProofRankError",
    "ProofScore",
    "ProverRun",
    "RuleJudge",
    "ScriptedProver",
    "Taxonomy",
    "__version__",
    "cohen_kappa",
    "evaluate",
    "judge_agreement",
    "load_problems",
    "pairwise_load",
    "proxy_correctness_correlation",
    "score_proof",
    "scripted_provers",
    "shipped_problems",
]
