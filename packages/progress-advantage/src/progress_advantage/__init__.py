"""progress-advantage: step-level scores from an RL policy and its reference, for free.

An RL-post-trained policy with KL coefficient ``β`` satisfies ``β log π_RL/π_ref ≈ A*``, the
optimal advantage; summed over a step's tokens it scores the step without a value network or
step labels. The public API is re-exported here; the heavy parts (torch, trl) load lazily.
"""

from progress_advantage.aggregate import aggregate_steps, aggregate_trajectory
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.scoring import (
    ChatModelScorer,
    LogRatioScorer,
    TokenScores,
    progress_advantage,
)
from progress_advantage.trajectory import Step, Trajectory, read_trajectories, write_trajectories

__version__ = "0.3.0"

__all__ = [
    "ChatModelScorer",
    "LogRatioScorer",
    "ProgressAdvantageError",
    "Step",
    "TokenScores",
    "Trajectory",
    "__version__",
    "aggregate_steps",
    "aggregate_trajectory",
    "progress_advantage",
    "read_trajectories",
    "write_trajectories",
]
