"""Swarm members: any :class:`~paperstack.llm.ChatModel`, and scripted agents with known profiles.

A seat of the swarm is an :class:`AgentSpec`: a frozen model (never trained here) plus how it
is called (sampling temperature, token limit, and whether it reads the swarm's messages or, as
a *bare* agent, sees only the question). Anything that speaks the core's ``ChatModel`` protocol
sits in a seat: a :class:`~paperstack.llm.TransformersChat` tiny model, an
:class:`~paperstack.llm.OpenAIChat` client of a vLLM or ``transformers serve`` server, or a
:class:`ScriptedAgent`.

Scripted agents make the benefit of communication real but not built in: each has a
*competence profile* (:class:`Profile`), and nothing in it mentions topologies or policies.

- **Knowledge.** Whether an agent knows the answer to an instance is a fixed draw (skill per
  task kind, and per fact domain for the fact world: experts know one domain well); an agent
  that knows answers correctly with a high confidence.
- **Correlated errors.** An agent that does not know guesses, and guesses go to the
  instance's *common mistake* (the same plausible distractor, or the sum with its carries
  dropped) with probability ``attractor``: the errors of different agents are correlated, so
  adding agents to a vote stops helping (the plateau the paper starts from).
- **Calibration.** Calibrated agents report a low confidence when they guess; overconfident
  ("loud") ones report a high one either way.
- **Herding.** Given messages, an unsure agent adopts the plurality of the messages and its own
  answer with probability ``herding``: one vote per message, or weighted by the reported
  confidences for the agents that weigh confidence. An agent that knows holds its answer
  against an opposing plurality larger than its own side with probability ``conviction``
  (sycophantic herders give in to it most of the time).
  Herding makes talking a vote that amplifies the majority, the reason the paper finds random
  broadcast no better than voting.
- **Reading capacity.** An agent reads at most ``capacity`` of the messages it receives, the
  most confident first (ties in a seeded order): a long context is skimmed, and confident
  voices are the salient ones. In a broadcast among many agents the overconfident agents fill
  what is read, so talking to everyone can hurt; addressed, sparse communication does not.
  This is the toy's model of the overload the paper reports for large swarms (added in 0.2:
  without it, v0.1's swarms gained from random broadcast at N = 8 and the premise was absent).
- **Verification** (verifiable kinds only). A candidate answer whose work is shown (a ``full``
  message) is checked with probability ``verify``; a checked correct answer is adopted, a
  checked wrong one ignored. An answer alone cannot be checked.

Every draw comes from a generator seeded by the agent's seed, the instance and the call's seed,
so the same call always gets the same reply whatever order the calls come in.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestra_rl.errors import OrchestraError
from orchestra_rl.tasks import Instance, TaskEvaluator, builtin_evaluator, parse_confidence
from orchestra_rl.wire import Received, parse_prompt
from paperstack import tasks as core_tasks
from paperstack.llm import ChatModel, RuleAgent

__all__ = [
    "PROFILES",
    "AgentSpec",
    "Profile",
    "ScriptedAgent",
    "draw_profiles",
    "scripted_swarm",
]


@dataclass(frozen=True)
class AgentSpec:
    """One seat of a swarm: a frozen ``model`` and how it is called.

    ``bare`` agents are shown the question alone (a model that cannot read the swarm's format,
    such as a tiny model trained on one task); their replies are still delivered to the
    others. ``temperature`` 0 is greedy; each call gets its own seed either way, unless
    ``seeded`` is False: then no seed is sent and the backend samples from its own stream.
    That is for vLLM's CPU build (0.32.0), whose engine dies ("CPU Generator does not use
    offset") when a request with a seed has its prompt prefilled in chunks, as happens when
    many long prompts arrive at once at a server that batches several users' requests.
    """

    model: ChatModel
    name: str = ""
    temperature: float = 0.0
    max_new_tokens: int = 64
    bare: bool = False
    seeded: bool = True

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", str(getattr(self.model, "name", "agent")))
        if self.temperature < 0 or self.max_new_tokens < 1:
            raise OrchestraError(
                f"agent {self.name}: temperature must be >= 0 and max_new_tokens >= 1"
            )


@dataclass(frozen=True)
class Profile:
    """A scripted agent's competence: see the module docstring for what each field does.

    ``skill`` maps a task kind (``"addition"``) or a kind and fact domain
    (``"facts-mc:home"``) to the probability of knowing an instance; ``default_skill`` covers
    the rest.
    """

    name: str
    skill: Mapping[str, float] = field(default_factory=dict)
    default_skill: float = 0.3
    herding: float = 0.5
    overconfident: bool = False
    verify: float = 0.5
    attractor: float = 0.6
    weighs_confidence: bool = False
    conviction: float = 0.9
    capacity: int | None = 3

    def __post_init__(self) -> None:
        if self.capacity is not None and self.capacity < 1:
            raise OrchestraError(f"profile {self.name}: capacity must be >= 1 or None")

    def skill_for(self, instance: Instance) -> float:
        domain = instance.meta.get("domain")
        if domain is not None and f"{instance.kind}:{domain}" in self.skill:
            return float(self.skill[f"{instance.kind}:{domain}"])
        return float(self.skill.get(instance.kind, self.default_skill))


def _expert(domain: str) -> Profile:
    return Profile(
        f"expert-{domain}",
        skill={f"facts-mc:{domain}": 0.9, "addition": 0.75},
        default_skill=0.35,
        herding=0.3,
        verify=0.25,
        weighs_confidence=True,
        conviction=0.95,
    )


#: The population seats are drawn from, with the draw weights (see :func:`draw_profiles`).
#: Experts know one fact domain and most sums; herders know little, follow the crowd and
#: check now and then; loud agents know little, are overconfident and stubborn.
PROFILES: tuple[tuple[Profile, float], ...] = (
    (_expert("home"), 0.1),
    (_expert("work"), 0.1),
    (_expert("science"), 0.1),
    (
        Profile(
            "herder",
            default_skill=0.3,
            herding=0.85,
            verify=0.0,
            attractor=0.6,
            conviction=0.3,
        ),
        0.35,
    ),
    (
        Profile(
            "loud",
            default_skill=0.3,
            herding=0.1,
            overconfident=True,
            verify=0.0,
            attractor=0.7,
            conviction=0.95,
        ),
        0.35,
    ),
)


def draw_profiles(seats: int, seed: int) -> list[Profile]:
    """``seats`` profiles drawn from :data:`PROFILES` by ``seed``: a swarm of N agents is the
    first N seats, so a larger swarm is the smaller one plus more agents from the same
    population (nothing in the draw depends on N)."""
    rng = random.Random(f"orchestra-rl:profiles:{seed}")
    profiles = [p for p, _ in PROFILES]
    weights = [w for _, w in PROFILES]
    return rng.choices(profiles, weights=weights, k=seats)


def _unit(*parts: Any) -> float:
    """A uniform number in [0, 1) from a stable hash of ``parts`` (not Python's salted hash)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class ScriptedAgent(RuleAgent):
    """A rule-based swarm member with a :class:`Profile`, answering from an answer key.

    ``instances`` are the instances it may be asked about (its answer key, looked up by the
    question text; an unknown question is answered "Answer: none"). It implements the
    ``ChatModel`` protocol, so the runtime calls it exactly like a model.
    """

    def __init__(
        self,
        profile: Profile,
        instances: Sequence[Instance],
        seed: int = 0,
        *,
        name: str | None = None,
        evaluator: TaskEvaluator | None = None,
    ) -> None:
        super().__init__(seed, name=name or profile.name)
        self.profile = profile
        self.key: dict[str, Instance] = {inst.prompt: inst for inst in instances}
        kinds = sorted({inst.kind for inst in instances})
        self.evaluator = evaluator or builtin_evaluator(kinds or ("facts-mc",))

    def learn(self, instances: Sequence[Instance]) -> None:
        """Add instances to the answer key."""
        self.key.update({inst.prompt: inst for inst in instances})

    # --------------------------------------------------------------- the ChatModel protocol

    def sample(self, messages: list[dict[str, Any]], index: int, seed: int | None) -> str:
        """The call's ``seed`` enters the agent's draws, so a resampled call (a new seed) can
        guess differently; knowledge does not change."""
        return self._reply(messages, seed, index)

    def respond(self, messages: list[dict[str, Any]]) -> str:
        return self._reply(messages, None, 0)

    # --------------------------------------------------------------- behaviour

    def _reply(self, messages: list[dict[str, Any]], seed: int | None, sample: int) -> str:
        content = str(messages[-1].get("content", "")) if messages else ""
        question, previous, received = parse_prompt(content)
        instance = self.key.get(question)
        if instance is None or instance.example is None:
            return "Answer: none\nConfidence: 0.0\nI do not know this question."
        rng = random.Random(f"{self.seed}:{self.name}:{question}:{seed}:{sample}:{content}")
        knows = _unit(self.seed, self.name, "knows", question) < self.profile.skill_for(instance)
        gold = self._gold(instance)
        if previous is None:  # first answer (or a fresh, independent sample)
            if knows:
                return self._say(instance, gold, rng, known=True)
            return self._say(instance, self._guess(instance, rng), rng, known=False)
        return self._update(instance, gold, knows, previous, received, rng)

    def _gold(self, instance: Instance) -> str:
        if instance.kind.startswith("facts"):
            return str(instance.meta["letter"])
        return str(instance.example.answer if instance.example else "")

    def _mistake(self, instance: Instance) -> str:
        """The instance's common mistake, the same for every agent (correlated errors)."""
        if instance.kind.startswith("facts"):
            letters = [chr(65 + i) for i in range(len(instance.meta["choices"]))]
            wrong = [x for x in letters if x != instance.meta["letter"]]
            return wrong[int(_unit("mistake", instance.prompt) * len(wrong))]
        a, b = int(instance.meta["a"]), int(instance.meta["b"])
        no_carry = sum(((a // 10**k + b // 10**k) % 10) * 10**k for k in range(3))
        total = a + b
        return self._format_sum(instance, no_carry if no_carry != total else total + 10)

    @staticmethod
    def _format_sum(instance: Instance, total: int) -> str:
        task = core_tasks.Addition()
        return task.format_answer(max(0, min(total, 10 ** (task.digits + 1) - 1)))

    def _guess(self, instance: Instance, rng: random.Random) -> str:
        if rng.random() < self.profile.attractor:
            return self._mistake(instance)
        if instance.kind.startswith("facts"):
            return chr(65 + rng.randrange(len(instance.meta["choices"])))
        total = int(instance.meta["sum"]) + rng.choice((-11, -10, -1, 1, 10, 11))
        return self._format_sum(instance, total)

    def _confidence(self, rng: random.Random, known: bool) -> float:
        if self.profile.overconfident:
            return round(rng.uniform(0.85, 1.0), 1)
        if known:
            return round(rng.uniform(0.75, 1.0), 1)
        return round(rng.uniform(0.15, 0.5), 1)

    def _say(
        self, instance: Instance, answer: str, rng: random.Random, *, known: bool, why: str = ""
    ) -> str:
        confidence = self._confidence(rng, known)
        if instance.kind.startswith("facts"):
            why = why or ("I know this." if known else "I am guessing.")
        else:
            why = f"Work: {instance.prompt}{answer}"
        return f"Answer: {answer}\nConfidence: {confidence:.1f}\n{why}"

    def _weights(
        self, instance: Instance, received: Sequence[Received]
    ) -> list[tuple[str, float, bool]]:
        """``(answer, weight, work shown)`` per message: a vote each, or the reported
        confidence for agents that weigh confidence (0.5 where none is reported)."""
        out = []
        for message in received:
            answer = self.evaluator.extract(instance, message.text)
            if answer is None:
                continue
            weight = 1.0
            if self.profile.weighs_confidence:
                confidence = parse_confidence(message.text)
                weight = confidence if confidence is not None else 0.5
            out.append((answer, weight, message.granularity == "full"))
        return out

    def _read(self, received: Sequence[Received], rng: random.Random) -> list[Received]:
        """The messages this agent reads: all of them up to ``capacity``, else the
        ``capacity`` most confident (a message that states no confidence ranks at 0.5)."""
        capacity = self.profile.capacity
        if capacity is None or len(received) <= capacity:
            return list(received)
        order = list(received)
        rng.shuffle(order)  # ties in a seeded order, not by sender number
        salience = [parse_confidence(m.text) for m in order]
        rank = [c if c is not None else 0.5 for c in salience]
        ranked = sorted(range(len(order)), key=lambda j: -rank[j])
        return [order[j] for j in ranked[:capacity]]

    def _update(
        self,
        instance: Instance,
        gold: str,
        knows: bool,
        previous: str,
        received: Sequence[Received],
        rng: random.Random,
    ) -> str:
        own = self.evaluator.extract(instance, previous) or ""
        own_conf = parse_confidence(previous)
        own_weight = 1.0
        if self.profile.weighs_confidence:
            own_weight = 0.5 if own_conf is None else own_conf
        votes = self._weights(instance, self._read(received, rng))
        rejected: set[str] = set()
        if instance.kind == "addition":  # verifiable: check the candidates whose work is shown
            for answer in dict.fromkeys(a for a, _, full in votes if full and a != own):
                if rng.random() < self.profile.verify:
                    if self.evaluator.score(instance, answer) > 0:
                        return self._say(instance, answer, rng, known=True)
                    rejected.add(answer)
        tally: dict[str, float] = {}
        for answer, weight, _ in votes:
            if answer not in rejected:
                tally[answer] = tally.get(answer, 0.0) + weight
        sure = knows and own == gold
        hold = self.profile.conviction if sure else 1.0 - self.profile.herding
        if not tally or rng.random() < hold:
            return self._say(instance, own or self._guess(instance, rng), rng, known=sure)
        tally[own] = tally.get(own, 0.0) + own_weight
        choice = max(sorted(tally), key=lambda a: tally[a])
        why = "I follow the other agents." if choice != own else "Others agree with me."
        return self._say(instance, choice, rng, known=sure and choice == own, why=why)


def scripted_swarm(
    instances: Sequence[Instance], seats: int, seed: int, *, max_new_tokens: int = 64
) -> list[AgentSpec]:
    """``seats`` scripted agents drawn by ``seed`` (:func:`draw_profiles`), each knowing the
    answer key of ``instances``."""
    evaluator = builtin_evaluator(sorted({inst.kind for inst in instances}) or ("facts-mc",))
    specs = []
    for i, profile in enumerate(draw_profiles(seats, seed)):
        agent = ScriptedAgent(
            profile, instances, seed=seed * 1000 + i, name=f"{profile.name}#{i}",
            evaluator=evaluator,
        )  # fmt: skip
        specs.append(AgentSpec(agent, name=agent.name, max_new_tokens=max_new_tokens))
    return specs
