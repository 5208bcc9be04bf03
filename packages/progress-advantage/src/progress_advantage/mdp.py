"""The exact check: a tabular stochastic MDP where the optimal advantage is known in closed form.

A "chain with traps": positions ``0..L-1`` on a chain, a terminal goal past the end (reward 1
on entering it), a trap and a terminal failure state (the pit: the episode ends there, no
reward). The trap is a dead end: every action there is the same, and each step the trajectory
either stays in it or falls into the pit (probability ``1 - trap_stay``), so a failed episode
runs on for a random number of doomed steps after the mistake that caused it (the decisive
error is not simply the last step). In every chain position the four actions have a random
assignment of effects ``+1``, ``+2``, ``-1`` and "into the trap", and with probability ``slip``
the effect is drawn uniformly instead, so
transitions are stochastic. The reference policy is a random softmax per state, or one that
is confidently wrong in some states (see :func:`make_chain`).

Soft value iteration for the KL-regularised objective
``max_π E[Σ_t γ^t (r_t − β log π(a_t|s_t)/π_ref(a_t|s_t))]`` gives

    Q*(s,a) = R(s,a) + γ Σ_{s'} P(s'|s,a) V*(s'),
    V*(s)   = β log Σ_a π_ref(a|s) exp(Q*(s,a)/β),
    π*(a|s) = π_ref(a|s) exp((Q*(s,a) − V*(s))/β),

hence ``β log π*/π_ref = Q* − V* = A*`` exactly; :func:`evaluate_policy` re-derives ``A`` for
any policy by an independent linear solve, which is what the unit test compares to 1e-9. A
REINFORCE-with-KL policy trained from samples then shows how close a *learned* policy's
log-ratio gets to ``A*`` (Spearman). Pure numpy: the check needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from progress_advantage.errors import ProgressAdvantageError

__all__ = [
    "REFERENCE_FAMILIES",
    "ChainMDP",
    "Convergence",
    "Episodes",
    "evaluate_policy",
    "make_chain",
    "objective_gap",
    "reinforce_kl",
    "sample_episodes",
    "soft_value_iteration",
]

MOVES = (+1, +2, -1, None)  # None: into the trap


@dataclass(frozen=True)
class ChainMDP:
    """Tabular MDP: ``P[s, a, s']``, reward ``R[s, a]`` (expected, on entering the goal),
    ``terminal[s]`` (no further reward or decisions), reference policy ``ref[s, a]``."""

    P: np.ndarray
    R: np.ndarray
    terminal: np.ndarray
    ref: np.ndarray
    goal: int
    pit: int
    trap: int
    length: int
    gamma: float
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return int(self.P.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.P.shape[1])

    @property
    def chain_states(self) -> np.ndarray:
        """The decision states where actions matter (chain positions)."""
        return np.arange(self.length)


REFERENCE_FAMILIES = ("random", "confident-wrong")


def make_chain(
    length: int = 24,
    slip: float = 0.1,
    gamma: float = 0.95,
    ref_temperature: float = 1.0,
    seed: int = 0,
    reference: str = "random",
    wrong_fraction: float = 1 / 3,
    wrong_prob: float = 0.8,
    trap_stay: float = 0.5,
) -> ChainMDP:
    """A random chain with a trap and a terminal pit; ``length + 3`` states (chain, goal, pit,
    trap), 4 actions.

    ``reference`` is one of two families, declared before any claim was computed:
    ``"random"`` (a random softmax per state) and ``"confident-wrong"`` (the same, except that in
    a random ``wrong_fraction`` of the chain states the reference puts ``wrong_prob`` on the
    action that jumps into the trap: confidently wrong on some moves, which RL must unlearn).
    """
    if length < 2 or not 0 <= slip < 1 or not 0 < gamma < 1:
        raise ProgressAdvantageError(
            f"make_chain: need length >= 2, 0 <= slip < 1, 0 < gamma < 1; got {length}, {slip}, "
            f"{gamma}"
        )
    if reference not in REFERENCE_FAMILIES:
        raise ProgressAdvantageError(
            f"make_chain: reference {reference!r} is not one of {', '.join(REFERENCE_FAMILIES)}"
        )
    if not (0 <= wrong_fraction <= 1 and 0 < wrong_prob < 1):
        raise ProgressAdvantageError(
            f"make_chain: need 0 <= wrong_fraction <= 1 and 0 < wrong_prob < 1; got "
            f"{wrong_fraction}, {wrong_prob}"
        )
    rng = np.random.default_rng(seed)
    n_s, n_a = length + 3, len(MOVES)
    if not 0 <= trap_stay < 1:
        raise ProgressAdvantageError(f"make_chain: need 0 <= trap_stay < 1, got {trap_stay}")
    goal, pit, trap = length, length + 1, length + 2
    effect = np.stack([rng.permutation(n_a) for _ in range(length)])  # [L, A]: move index
    dest = np.empty((length, n_a), dtype=np.int64)  # destination of each move from each position
    for m, move in enumerate(MOVES):
        if move is None:
            dest[:, m] = trap
        else:
            to = np.arange(length) + move
            dest[:, m] = np.where(to >= length, goal, np.clip(to, 0, length - 1))
    P = np.zeros((n_s, n_a, n_s))
    pos = np.arange(length)
    for a in range(n_a):
        intended = dest[pos, effect[:, a]]
        P[pos, a, intended] += 1 - slip
        for m in range(n_a):  # slip: a uniformly random effect
            P[pos, a, dest[:, m]] += slip / n_a
    P[goal, :, goal] = 1.0
    P[pit, :, pit] = 1.0
    P[trap, :, trap] = trap_stay
    P[trap, :, pit] = 1 - trap_stay
    R = P[:, :, goal].copy()
    R[goal] = 0.0
    terminal = np.zeros(n_s, dtype=bool)
    terminal[goal] = terminal[pit] = True
    logits = rng.standard_normal((n_s, n_a)) / ref_temperature
    ref = np.exp(logits - logits.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    wrong_states = np.zeros(0, dtype=np.int64)
    if reference == "confident-wrong":
        k = round(wrong_fraction * length)
        wrong_states = np.sort(rng.choice(length, size=k, replace=False))
        pit_action = np.argmax(effect == MOVES.index(None), axis=1)  # [L]
        for s in wrong_states:
            others = np.delete(np.arange(n_a), pit_action[s])
            ref[s, pit_action[s]] = wrong_prob
            ref[s, others] = (1 - wrong_prob) * ref[s, others] / ref[s, others].sum()
    return ChainMDP(
        P=P,
        R=R,
        terminal=terminal,
        ref=ref,
        goal=goal,
        pit=pit,
        trap=trap,
        length=length,
        gamma=gamma,
        meta={
            "slip": slip,
            "seed": seed,
            "effect": effect.tolist(),
            "reference": reference,
            "wrong_states": wrong_states.tolist(),
        },
    )


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.exp(x - m).sum(axis=axis))


def soft_value_iteration(
    mdp: ChainMDP, beta: float, tol: float = 1e-14, max_iter: int = 100_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Q*, V*, π*)`` of the KL-regularised problem (equations in the module docstring).

    Iterates the soft Bellman operator, a γ-contraction, until the sup-norm change is below
    ``tol``. Terminal states have ``V* = 0``; their policy is the reference.
    """
    if not beta > 0:
        raise ProgressAdvantageError(f"beta must be > 0, got {beta}")
    log_ref = np.log(mdp.ref)
    V = np.zeros(mdp.n_states)
    live = ~mdp.terminal
    for _ in range(max_iter):
        Q = mdp.R + mdp.gamma * mdp.P @ V
        V_new = np.where(live, beta * _logsumexp(log_ref + Q / beta, axis=1), 0.0)
        done = np.max(np.abs(V_new - V)) < tol
        V = V_new
        if done:
            break
    Q = mdp.R + mdp.gamma * mdp.P @ V
    Q[~live] = 0.0
    log_pi = log_ref + (Q - V[:, None]) / beta
    log_pi -= _logsumexp(log_pi, axis=1)[:, None]  # exact already; removes rounding drift
    return Q, V, np.exp(log_pi)


def evaluate_policy(
    mdp: ChainMDP, pi: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Q^π, V^π, A^π)`` of the KL-regularised return, by one linear solve.

    ``V^π = Σ_a π (R + γ P V^π − β log π/π_ref)`` is linear in ``V^π``:
    ``(I − γ P_π) V^π = Σ_a π (R − β log π/π_ref)`` on the non-terminal states.
    """
    live = ~mdp.terminal
    log_ratio = np.log(pi) - np.log(mdp.ref)
    P_pi = np.einsum("sa,sat->st", pi, mdp.P)
    b = np.einsum("sa,sa->s", pi, mdp.R - beta * log_ratio)
    A_mat = np.eye(mdp.n_states) - mdp.gamma * P_pi
    A_mat[~live] = 0.0
    A_mat[~live, ~live] = 1.0
    b[~live] = 0.0
    V = np.linalg.solve(A_mat, b)
    Q = mdp.R + mdp.gamma * mdp.P @ V
    Q[~live] = 0.0
    return Q, V, Q - V[:, None]


@dataclass(frozen=True)
class Episodes:
    """A batch of sampled episodes of ``horizon`` steps: ``states``/``actions`` ``[B, H]``,
    ``alive[b, t]`` (the step was taken before reaching the goal), ``success[b]``, and
    ``first_error[b]`` (the step whose transition entered the trap: the decisive error, even
    when a slip rather than the action caused it; -1 if none)."""

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    alive: np.ndarray
    success: np.ndarray
    first_error: np.ndarray


def sample_episodes(
    mdp: ChainMDP,
    pi: np.ndarray,
    n: int,
    horizon: int,
    rng: np.random.Generator,
    start: np.ndarray | None = None,
) -> Episodes:
    """``n`` episodes under ``pi`` (vectorised over episodes; a loop over the ``horizon``)."""
    s = np.zeros(n, dtype=np.int64) if start is None else np.asarray(start, dtype=np.int64)
    states = np.zeros((n, horizon), dtype=np.int64)
    actions = np.zeros((n, horizon), dtype=np.int64)
    rewards = np.zeros((n, horizon))
    alive = np.zeros((n, horizon), dtype=bool)
    first_error = np.full(n, -1, dtype=np.int64)
    cum_pi = np.cumsum(pi, axis=1)
    cum_P = np.cumsum(mdp.P, axis=2)
    for t in range(horizon):
        live = ~mdp.terminal[s]
        if not live.any():  # every episode has ended: the rest stays not-alive
            break
        a = (rng.random(n)[:, None] > cum_pi[s]).sum(1).clip(max=mdp.n_actions - 1)
        nxt = (rng.random(n)[:, None] > cum_P[s, a]).sum(1).clip(max=mdp.n_states - 1)
        states[:, t], actions[:, t], alive[:, t] = s, a, live
        rewards[:, t] = np.where(live & (nxt == mdp.goal), 1.0, 0.0)
        entered = live & (nxt == mdp.trap) & (s != mdp.trap) & (first_error < 0)
        first_error[entered] = t
        s = np.where(live, nxt, s)
    return Episodes(states, actions, rewards, alive, s == mdp.goal, first_error)


@dataclass(frozen=True)
class Convergence:
    """How :func:`reinforce_kl` stopped: after ``iterations``, with the exact objective gap
    ``gap`` = mean over chain states of ``V*(s) − V^π(s)`` (KL-regularised values, exact), and
    whether that gap reached the tolerance (else the iteration cap stopped it)."""

    iterations: int
    gap: float
    converged: bool


def objective_gap(mdp: ChainMDP, pi: np.ndarray, beta: float, V_star: np.ndarray) -> float:
    """Mean over chain states of ``V*(s) − V^π(s)``: how far ``π`` is from the KL optimum."""
    _, V, _ = evaluate_policy(mdp, pi, beta)
    return float((V_star - V)[mdp.chain_states].mean())


def reinforce_kl(
    mdp: ChainMDP,
    beta: float,
    max_iterations: int = 20_000,
    batch: int = 256,
    horizon: int = 60,
    lr: float = 0.05,
    seed: int = 0,
    tol: float = 1e-3,
    check_every: int = 100,
) -> tuple[np.ndarray, Convergence]:
    """A tabular softmax policy trained by REINFORCE with the KL in the reward, to convergence.

    Each step's reward is ``r_t − β log π_θ(a_t|s_t)/π_ref(a_t|s_t)`` (the KL term inside the
    return, which is what the theorem's objective is; trl's GRPO instead adds a KL estimate to
    the loss, whose fixed point differs); returns-to-go are discounted by ``γ``; the baseline is
    the batch mean per time step; Adam on the logits, which start at ``log π_ref``
    (post-training starts from the reference), with the step size decayed as
    ``lr / sqrt(1 + it / 1000)`` so the iterates settle instead of hovering at Adam's noise
    floor. Episodes start in uniformly random chain positions so that every decision state is
    trained, and run ``horizon`` steps (``γ^60 ≈ 0.05``: the truncation hardly biases the
    discounted return) or until a terminal state.

    Stopping rule, fixed in advance: every ``check_every`` iterations the exact objective gap
    (:func:`objective_gap`, by linear solves) is computed; training stops when it is at most
    ``tol`` or after ``max_iterations``. Returns ``π_θ`` as ``[S, A]`` probabilities and how it
    stopped.
    """
    if max_iterations < 1 or batch < 1 or horizon < 1 or check_every < 1:
        raise ProgressAdvantageError(
            "reinforce_kl: max_iterations, batch, horizon and check_every must be >= 1"
        )
    _, V_star, _ = soft_value_iteration(mdp, beta)
    rng = np.random.default_rng(seed)
    theta = np.log(mdp.ref).copy()
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    b1, b2, eps = 0.9, 0.999, 1e-8
    disc = mdp.gamma ** np.arange(horizon)

    def policy() -> np.ndarray:
        pi = np.exp(theta - theta.max(1, keepdims=True))
        return pi / pi.sum(1, keepdims=True)

    gap = objective_gap(mdp, policy(), beta, V_star)
    it = 0
    while it < max_iterations and gap > tol:
        it += 1
        pi = policy()
        start = rng.integers(0, mdp.length, size=batch)
        ep = sample_episodes(mdp, pi, batch, horizon, rng, start)
        log_ratio = np.log(pi[ep.states, ep.actions]) - np.log(mdp.ref[ep.states, ep.actions])
        r = np.where(ep.alive, ep.rewards - beta * log_ratio, 0.0)
        # Discounted return-to-go, vectorised: G_t = Σ_{k>=t} γ^{k-t} r_k.
        G = np.cumsum((r * disc)[:, ::-1], axis=1)[:, ::-1] / disc
        adv = np.where(ep.alive, G - G.mean(0, keepdims=True), 0.0)
        grad = np.zeros_like(theta)
        np.add.at(grad, (ep.states, ep.actions), adv)
        np.add.at(grad, ep.states, -adv[..., None] * pi[ep.states])
        grad /= batch
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        step = lr / np.sqrt(1.0 + it / 1000.0)
        theta += step * (m / (1 - b1**it)) / (np.sqrt(v / (1 - b2**it)) + eps)
        if it % check_every == 0:
            gap = objective_gap(mdp, policy(), beta, V_star)
    return policy(), Convergence(iterations=it, gap=gap, converged=gap <= tol)
