"""OrchestraRL: a learned communication policy over a swarm of frozen agents.

Two small torch policies decide, each round ``t >= 1``, who talks to whom; the agents (any
:class:`~paperstack.llm.ChatModel`) are never trained.

**Macro-Orchestrator.** It reads the swarm's context entropy ``H(t)`` (the spectral entropy of
the agents' output embeddings, :mod:`orchestra_rl.entropy`) and a context vector ``x`` (task
kind, round, budget left, agreement, mean confidence) and picks

- a *mode* ``m`` in ``settle < vote < discuss`` by learned, ordered entropy thresholds
  ``θ₁ < θ₂`` (an ordered logit)::

      p(m >= k | H, x) = σ((H - θ_k - cᵀx) / τ),   k = 1, 2

  ``settle`` ends the episode (no more calls), ``vote`` exchanges answers only, ``discuss``
  lets the Micro-Coordinators send summaries or full outputs; the thresholds say at which
  spread of opinion talking starts to pay, and the context shift ``cᵀx`` moves them per task
  kind and remaining budget;
- a *topology* in :data:`~orchestra_rl.topology.COMMUNICATING` (complete, star, ring,
  clusters, pipeline) from a softmax over ``W [H, x]``; a star's hub is the most confident
  agent.

**Micro-Coordinators.** One policy shared by every agent, on per-agent features (its
confidence, whether its answer is the plurality, the share agreeing with it, ...): whether
agent ``i`` *speaks* (Bernoulli), *whom it addresses* among its topology neighbours (a
Bernoulli per edge, on the sender's and recipient's features: a confident agent telling an
unsure one that disagrees is what should pay), and at which *granularity* (summary or full in
``discuss`` mode). Addressing sets the cost: every agent that receives a message makes one
call.

**Training.** REINFORCE with a learned value baseline over frozen agents. An episode's reward
is ``R = score - λ · calls / budget``; with ``log π`` the sum of the log-probabilities of every
decision the two policies took in the episode and ``V_φ(s₁)`` a value head on the first
round's state,

    L = -(R - V_φ(s₁)) · log π  -  β · (entropy of the decisions)  +  (R - V_φ(s₁))²

averaged over a batch of training instances (the advantage is detached in the policy term).
At evaluation the policies keep sampling (REINFORCE optimises the expected reward of the
stochastic policy, and a greedy read-out of independent Bernoulli addressing decisions can
silence the swarm entirely); the sampler is seeded per run, so an evaluation is reproducible.
``greedy=True`` gives the deterministic read-out instead.

**Spend.** Trained with a call cost, the policy learns to settle early and spends less than
the budget its baselines spend (11.5 of 24 calls at N = 8 in the toy demo), so a comparison
"at the same budget" is not one at the same spend. ``spend_floor`` (0.95 for ``orchestra
train`` and ``demo --real``) holds it to a share of the budget, in training and evaluation
alike: what it leaves unspent in a round goes to independent resamples of the least confident
agents (:func:`~orchestra_rl.baselines.fill_to_floor`). The policy still decides who talks to
whom; it can no longer win by spending less.

**Saving.** :meth:`LearnedOrchestrator.save` writes ``policy.safetensors`` (the weights) and
``policy.json`` (the kinds, ``use_entropy``, ``spend_floor``, the training settings);
:func:`load_orchestrator` reads them back for ``orchestra swarm --policy learned:DIR``. The
policy is the same for any N (the Micro-Coordinator is shared by the agents).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from orchestra_rl.baselines import fill_to_floor, hub_of
from orchestra_rl.errors import OrchestraError
from orchestra_rl.swarm import Delivery, Episode, Observation, Plan, Swarm, plurality
from orchestra_rl.tasks import Instance
from orchestra_rl.topology import COMMUNICATING, adjacency

__all__ = [
    "FORMAT",
    "MODES",
    "LearnedOrchestrator",
    "TrainConfig",
    "load_orchestrator",
    "train_orchestrator",
]

#: ``policy.json``'s format tag: a file of another format is refused in one line.
FORMAT = "orchestra-rl-policy/1"
WEIGHTS, CONFIG = "policy.safetensors", "policy.json"

#: Macro modes, in order of how much the swarm talks.
MODES: tuple[str, ...] = ("settle", "vote", "discuss")


def _context(obs: Observation, kinds: Sequence[str]) -> list[float]:
    """The macro context ``x``: task kind (one-hot), round, budget left, agreement, mean
    confidence."""
    answers = [a for a in obs.answers if a is not None]
    top = plurality(answers)
    agreement = (sum(a == top for a in answers) / len(answers)) if answers else 0.0
    conf = [c for c in obs.confidences if c is not None]
    onehot = [1.0 if obs.instance.kind == k else 0.0 for k in kinds]
    return [
        *onehot,
        obs.round / obs.max_rounds,
        obs.budget_left / obs.budget,
        agreement,
        float(np.mean(conf)) if conf else 0.0,
    ]


def _agent_features(obs: Observation, i: int) -> list[float]:
    """Per-agent features of the Micro-Coordinator."""
    answers = obs.answers
    known = [a for a in answers if a is not None]
    top = plurality(known)
    mine = answers[i]
    share = (sum(a == mine for a in known) / len(known)) if known and mine is not None else 0.0
    conf = obs.confidences[i]
    return [
        conf if conf is not None else 0.0,
        1.0 if conf is None else 0.0,
        1.0 if mine is not None and mine == top else 0.0,
        share,
        1.0 if obs.outputs[i] is not None else 0.0,
    ]


AGENT_FEATURES = 5


class _Macro(nn.Module):
    def __init__(self, context: int) -> None:
        super().__init__()
        self.theta1 = nn.Parameter(torch.tensor(0.2))
        self.log_gap = nn.Parameter(torch.tensor(-1.5))  # θ₂ = θ₁ + softplus(gap)
        self.log_tau = nn.Parameter(torch.tensor(np.log(0.1), dtype=torch.float32))
        self.shift = nn.Linear(context, 1, bias=False)
        nn.init.zeros_(self.shift.weight)
        self.topology = nn.Linear(context + 1, len(COMMUNICATING))
        nn.init.zeros_(self.topology.weight)
        nn.init.zeros_(self.topology.bias)
        self.value = nn.Sequential(nn.Linear(context + 1, 16), nn.Tanh(), nn.Linear(16, 1))

    def thresholds(self) -> torch.Tensor:
        gap = nn.functional.softplus(self.log_gap)
        return torch.stack([self.theta1, self.theta1 + gap])

    def mode_probs(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3)`` probabilities of settle / vote / discuss (the ordered logit)."""
        tau = self.log_tau.exp().clamp(min=1e-2)
        z = (h[:, None] - self.thresholds()[None, :] - self.shift(x)) / tau
        ge = torch.sigmoid(z)  # p(m >= 1), p(m >= 2); θ₁ < θ₂ keeps them ordered
        p = torch.stack([1 - ge[:, 0], ge[:, 0] - ge[:, 1], ge[:, 1]], dim=1)
        return p.clamp(min=1e-6)


class _Micro(nn.Module):
    def __init__(self, context: int) -> None:
        super().__init__()
        self.speak = nn.Linear(AGENT_FEATURES + context + 1, 1)
        self.granularity = nn.Linear(AGENT_FEATURES + context + 1, 1)  # logit of "full"
        self.address = nn.Sequential(
            nn.Linear(2 * AGENT_FEATURES + 2, 16), nn.Tanh(), nn.Linear(16, 1)
        )
        for layer in (self.speak, self.granularity):
            nn.init.zeros_(layer.weight)
            nn.init.constant_(layer.bias, 1.0)


@dataclass(frozen=True)
class TrainConfig:
    """REINFORCE settings: ``iterations`` updates on batches of ``batch`` training instances;
    ``cost`` is λ (reward per fraction of the budget spent), ``entropy_bonus`` β."""

    iterations: int = 60
    batch: int = 32
    lr: float = 0.05
    cost: float = 0.05
    entropy_bonus: float = 0.01

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.batch < 1:
            raise OrchestraError("iterations and batch must be >= 1")
        if not self.lr > 0 or self.cost < 0 or self.entropy_bonus < 0:
            raise OrchestraError("lr must be > 0; cost and entropy_bonus >= 0")


class LearnedOrchestrator(nn.Module):
    """The Macro-Orchestrator and the Micro-Coordinators as one :class:`Policy`.

    ``kinds``: the task kinds it conditions on. ``use_entropy=False`` feeds ``H = 0``: the
    ablation that isolates what reading the context entropy adds. In ``training`` mode it
    samples and keeps the log-probabilities of each episode's decisions; in ``eval`` mode it
    samples (or, with ``greedy``, takes the most probable action) and counts which mode and
    topology it chose in :attr:`choices`.
    """

    vote = "final"

    def __init__(
        self,
        kinds: Sequence[str],
        *,
        use_entropy: bool = True,
        name: str = "",
        spend_floor: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= spend_floor <= 1.0:
            raise OrchestraError(f"spend_floor must be in [0, 1], got {spend_floor}")
        self.kinds = tuple(kinds)
        self.use_entropy = use_entropy
        self.spend_floor = float(spend_floor)
        self.trained_with: dict[str, Any] = {}
        self.greedy = False
        self.needs_entropy = use_entropy
        self.name = name or ("orchestra_rl" if use_entropy else "orchestra_rl_no_entropy")
        context = len(self.kinds) + 4
        self.macro = _Macro(context)
        self.micro = _Micro(context)
        self._rng = torch.Generator().manual_seed(0)
        self.logp: dict[str, list[torch.Tensor]] = {}
        self.entropy_terms: dict[str, list[torch.Tensor]] = {}
        self.values: dict[str, torch.Tensor] = {}
        self.choices: Counter[tuple[str, str, str]] = Counter()

    # ------------------------------------------------------------------ the Policy protocol

    def begin(self, episodes: Sequence[Episode], seed: int) -> None:
        self._rng = torch.Generator().manual_seed(int(seed))
        self.logp = {ep.instance.id: [] for ep in episodes}
        self.entropy_terms = {ep.instance.id: [] for ep in episodes}
        self.values = {}

    def plan(self, observations: Sequence[Observation], index: Sequence[int]) -> list[Plan]:
        unknown = sorted({o.instance.kind for o in observations} - set(self.kinds))
        if unknown:
            raise OrchestraError(
                f"this learned policy was trained on task kinds {', '.join(self.kinds)}; it "
                f"cannot read {', '.join(unknown)} (train one on that task)"
            )
        with torch.set_grad_enabled(self.training):
            plans = self._plan(observations)
        if self.spend_floor > 0:
            plans = [fill_to_floor(o, p, self.spend_floor) for o, p in zip(observations, plans,
                                                                          strict=True)]  # fmt: skip
        return plans

    def _sample_bernoulli(self, p: torch.Tensor) -> torch.Tensor:
        if self.training or not self.greedy:
            return (torch.rand(p.shape, generator=self._rng) < p.detach()).float()
        return (p.detach() >= 0.5).float()

    def _sample_categorical(self, p: torch.Tensor) -> torch.Tensor:
        if self.training or not self.greedy:
            return torch.multinomial(p.detach(), 1, generator=self._rng)[:, 0]
        return p.detach().argmax(dim=1)

    def _record(self, iid: str, logp: torch.Tensor, ent: torch.Tensor) -> None:
        if self.training:
            self.logp[iid].append(logp)
            self.entropy_terms[iid].append(ent)

    def _plan(self, observations: Sequence[Observation]) -> list[Plan]:
        x = torch.tensor([_context(o, self.kinds) for o in observations], dtype=torch.float32)
        h = torch.tensor(
            [float(o.entropy or 0.0) if self.use_entropy else 0.0 for o in observations],
            dtype=torch.float32,
        )
        hx = torch.cat([h[:, None], x], dim=1)
        p_mode = self.macro.mode_probs(h, x)
        p_topo = torch.softmax(self.macro.topology(hx), dim=1)
        modes = self._sample_categorical(p_mode)
        topos = self._sample_categorical(p_topo)
        if self.training:
            value = self.macro.value(hx)[:, 0]
            for k, obs in enumerate(observations):
                self.values.setdefault(obs.instance.id, value[k])
        plans = []
        for k, obs in enumerate(observations):
            iid = obs.instance.id
            mode = MODES[int(modes[k])]
            ent_mode = -(p_mode[k] * p_mode[k].log()).sum()
            self._record(iid, p_mode[k, modes[k]].log(), ent_mode)
            if mode == "settle":
                self.choices[(obs.instance.kind, mode, "none")] += int(not self.training)
                plans.append(Plan(stop=True, mode=mode, topology="none"))
                continue
            topology = COMMUNICATING[int(topos[k])]
            ent_topo = -(p_topo[k] * p_topo[k].log()).sum()
            self._record(iid, p_topo[k, topos[k]].log(), ent_topo)
            self.choices[(obs.instance.kind, mode, topology)] += int(not self.training)
            plans.append(self._micro_plan(obs, mode, topology, x[k], h[k]))
        return plans

    def _micro_plan(
        self, obs: Observation, mode: str, topology: str, x: torch.Tensor, h: torch.Tensor
    ) -> Plan:
        n = len(obs.outputs)
        iid = obs.instance.id
        hub = hub_of(obs) if topology == "star" else None
        a = adjacency(topology, n, hub or 0)
        feats = torch.tensor([_agent_features(obs, i) for i in range(n)], dtype=torch.float32)
        ctx = torch.cat([h[None], x])[None, :].expand(n, -1)
        agent_in = torch.cat([feats, ctx], dim=1)
        p_speak = torch.sigmoid(self.micro.speak(agent_in))[:, 0].clamp(1e-6, 1 - 1e-6)
        speak = self._sample_bernoulli(p_speak)
        has_edge = torch.tensor(a.any(axis=1), dtype=torch.bool)
        active = has_edge & (feats[:, 4] > 0)  # a sender needs an output and a neighbour
        self._bernoulli_terms(iid, p_speak[active], speak[active])
        granularity = ["vote"] * n
        if mode == "discuss":
            p_full = torch.sigmoid(self.micro.granularity(agent_in))[:, 0].clamp(1e-6, 1 - 1e-6)
            full = self._sample_bernoulli(p_full)
            chosen = active & (speak > 0)
            self._bernoulli_terms(iid, p_full[chosen], full[chosen])
            granularity = ["full" if f > 0 else "summary" for f in full.tolist()]
        senders, recipients = np.nonzero(a)
        edges = [
            (int(s), int(r))
            for s, r in zip(senders, recipients, strict=True)
            if bool(active[s]) and speak[s] > 0
        ]
        deliveries: list[Delivery] = []
        if edges:
            s_idx = torch.tensor([e[0] for e in edges])
            r_idx = torch.tensor([e[1] for e in edges])
            disagree = torch.tensor(
                [float(obs.answers[s] != obs.answers[r]) for s, r in edges], dtype=torch.float32
            )
            edge_in = torch.cat(
                [feats[s_idx], feats[r_idx], disagree[:, None], h.expand(len(edges))[:, None]],
                dim=1,
            )
            p_addr = torch.sigmoid(self.micro.address(edge_in))[:, 0].clamp(1e-6, 1 - 1e-6)
            addr = self._sample_bernoulli(p_addr)
            self._bernoulli_terms(iid, p_addr, addr)
            deliveries = [
                Delivery(s, r, granularity[s])
                for (s, r), on in zip(edges, addr.tolist(), strict=True)
                if on > 0
            ]
        return Plan(deliveries, mode=mode, topology=topology, hub=hub)

    def _bernoulli_terms(self, iid: str, p: torch.Tensor, sample: torch.Tensor) -> None:
        if not self.training or p.numel() == 0:
            return
        logp = (sample * p.log() + (1 - sample) * (1 - p).log()).sum()
        ent = -(p * p.log() + (1 - p) * (1 - p).log()).sum()
        self._record(iid, logp, ent)

    # ------------------------------------------------------------------ inspection

    def thresholds(self) -> tuple[float, float]:
        """The learned entropy thresholds ``(θ₁, θ₂)`` (before the context shift)."""
        t = self.macro.thresholds().detach()
        return float(t[0]), float(t[1])

    def save(self, folder: str | Path) -> Path:
        """Write ``policy.safetensors`` and ``policy.json`` into ``folder`` (created); returns
        the folder. The JSON is what :func:`load_orchestrator` needs to rebuild the modules."""
        from safetensors.torch import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(out / WEIGHTS))
        config = {
            "format": FORMAT,
            "kinds": list(self.kinds),
            "use_entropy": self.use_entropy,
            "spend_floor": self.spend_floor,
            "name": self.name,
            "thresholds": list(self.thresholds()),
            "trained_with": self.trained_with,
        }
        (out / CONFIG).write_text(json.dumps(config, indent=1) + "\n")
        return out

    def loss(self, episodes: Sequence[Episode], cost: float, entropy_bonus: float) -> Any:
        """The REINFORCE loss of a batch of episodes the policy just ran in training mode."""
        terms = []
        for ep in episodes:
            iid = ep.instance.id
            reward = ep.score - cost * ep.calls / ep.budget
            if iid not in self.values:  # no decision was taken (budget spent in round 0)
                continue
            value = self.values[iid]
            advantage = reward - value
            logp = torch.stack(self.logp[iid]).sum()
            ent = torch.stack(self.entropy_terms[iid]).sum()
            terms.append(-advantage.detach() * logp - entropy_bonus * ent + advantage**2)
        if not terms:
            return None
        return torch.stack(terms).mean()


def train_orchestrator(
    swarm: Swarm,
    train: Sequence[Instance],
    config: TrainConfig,
    seed: int,
    *,
    kinds: Sequence[str],
    use_entropy: bool = True,
    on_step: Any = None,
    spend_floor: float = 0.0,
) -> tuple[LearnedOrchestrator, list[float]]:
    """Train a :class:`LearnedOrchestrator` on ``train`` instances with REINFORCE; returns it
    in eval mode, and the mean reward of each update's batch. ``spend_floor`` holds it to that
    share of the budget while it learns and afterwards (see the module docstring)."""
    if not train:
        raise OrchestraError("training needs at least one instance")
    torch.manual_seed(seed)
    policy = LearnedOrchestrator(kinds, use_entropy=use_entropy, spend_floor=spend_floor)
    policy.trained_with = {
        **asdict(config), "seed": seed, "instances": len(train), "n_agents": swarm.n,
        "budget": swarm.config.budget, "max_rounds": swarm.config.max_rounds,
    }  # fmt: skip
    optim = torch.optim.Adam(policy.parameters(), lr=config.lr)
    rng = np.random.default_rng(seed)
    rewards: list[float] = []
    policy.train()
    for step in range(config.iterations):
        pick = rng.choice(len(train), size=min(config.batch, len(train)), replace=False)
        batch = [train[int(j)] for j in pick]
        episodes = swarm.run(batch, policy, seed=seed * 100_003 + step)
        loss = policy.loss(episodes, config.cost, config.entropy_bonus)
        rewards.append(
            float(np.mean([e.score - config.cost * e.calls / e.budget for e in episodes]))
        )
        if loss is not None:
            optim.zero_grad()
            loss.backward()
            optim.step()
        if on_step is not None:
            on_step(step, rewards[-1])
    policy.eval()
    policy.choices.clear()
    return policy, rewards


def load_orchestrator(folder: str | Path) -> LearnedOrchestrator:
    """The policy :meth:`LearnedOrchestrator.save` wrote into ``folder``, in eval mode. A
    missing or foreign file is one :class:`OrchestraError` line naming it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(folder)
    config_path, weights_path = path / CONFIG, path / WEIGHTS
    try:
        config = json.loads(config_path.read_text())
    except FileNotFoundError:
        raise OrchestraError(
            f"{path}: no {CONFIG} here; give the folder `orchestra train --out` wrote"
        ) from None
    except (OSError, ValueError) as exc:
        raise OrchestraError(f"{config_path}: cannot read it ({exc})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise OrchestraError(f"{config_path}: not an orchestra-rl policy (format {FORMAT})")
    try:
        policy = LearnedOrchestrator(
            [str(k) for k in config["kinds"]],
            use_entropy=bool(config["use_entropy"]),
            name=str(config.get("name") or ""),
            spend_floor=float(config.get("spend_floor", 0.0)),
        )
        state = load_file(str(weights_path))
        policy.load_state_dict(state)
    except FileNotFoundError:
        raise OrchestraError(f"{path}: {WEIGHTS} is missing") from None
    except (KeyError, TypeError, ValueError, RuntimeError, SafetensorError) as exc:
        what = " ".join(str(exc).split())[:160]
        raise OrchestraError(f"{path}: the saved policy does not load ({what})") from None
    policy.trained_with = dict(config.get("trained_with") or {})
    policy.eval()
    return policy
