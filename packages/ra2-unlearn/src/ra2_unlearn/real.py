"""``ra2 demo --real``: RA^2 and its baselines on a real model, SmolLM2-135M-Instruct.

The fact world shows the pipeline; this arm asks whether the paper's story holds on a model
that learned its facts in pre-training. The domain to forget is one SmolLM2 already knows:
**capitals of countries**. Adjacent = the same countries' continent and official language
(benign questions about the forgotten entities); retain = every question about other
countries.

The protocol, fixed before any reported run (``preregistration.toml``, ``["demo --real"]``):

1. **Knowledge, measured first.** :data:`COUNTRIES` is split once by entity
   (:func:`country_split`): a *validation* half on which the design was decided (prompts,
   the scorer, the layer's activation norm for RMU's coefficient; its numbers are in the
   README and never reported as rows) and a *reported* half. SmolLM2 answers every candidate
   question of the reported half greedily; the ``original`` row holds its accuracy per domain
   over all candidates (the premise ``real_premise_model_knows``: it answers most capitals),
   and only the facts it answers correctly enter the forget, adjacent and retain sets, so
   every accuracy starts at 1.0 and a drop is forgetting, not ignorance.
2. **Training data is the model's own answers**: each known question's target is SmolLM2's
   greedy answer up to the gold value ("The capital of France is Paris."), so the likelihood
   baselines push down what the model says, and RA^2 has positions that *carry* the value.
3. **Calibration**, one search for every method on validation seed 1000 (not reported): the
   same learning-rate grid for all (:attr:`RealSettings.lr_grid`, weakest first), forget
   accuracy checked every ``eval_every`` steps, the first check at or below
   ``forget_target`` is the method's strength (:func:`ra2_unlearn.demo.choose_strength`).
4. **Reported seeds** 0, 1, 2 at the calibrated strengths: forget / adjacent / retain
   accuracy and validity. Every method trains the same parameters, the MLP output
   projections of layers l-2..l (l = the middle layer), so capacity is matched too.
5. **Gating** as in the toy demo: ``real_forget_matched_<b>`` is the premise of every claim
   against ``b``, the paper's premise ``real_premise_adjacent_utility_drops`` of every
   adjacent-utility claim.

Scoring (:func:`score_answer`): SmolLM2 answers in sentences, so an answer is correct when
the first value of the asked attribute that it names (any country's capital, any continent,
any language; the asked country's own name is not a value) is one of the gold value's
spellings; it is *valid* when it names some value of the attribute at all.
"""

from __future__ import annotations

import os
import random
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from paperstack.contract import Report, Run
from paperstack.records import Claim, JsonlWriter, Row
from paperstack.tasks import Example
from ra2_unlearn.config import UnlearnConfig
from ra2_unlearn.evaluate import QAScores, greedy_answers

__all__ = [
    "ATTRIBUTES",
    "COUNTRIES",
    "REAL",
    "REAL_QUICK",
    "RealSettings",
    "RealSplits",
    "country_split",
    "known_examples",
    "real_claims",
    "real_scores",
    "run_real",
    "score_answer",
]

#: (country, capital, continent, official language); "A|B" lists the answers counted right
#: (spellings, or either of two official languages), the first one is the training target.
#: Countries whose official language or continent is contested or plural beyond a short list
#: (Switzerland, Belgium, ...) are left out.
COUNTRIES: tuple[tuple[str, str, str, str], ...] = (
    ("France", "Paris", "Europe", "French"),
    ("Germany", "Berlin", "Europe", "German"),
    ("Italy", "Rome", "Europe", "Italian"),
    ("Spain", "Madrid", "Europe", "Spanish"),
    ("Portugal", "Lisbon", "Europe", "Portuguese"),
    ("the United Kingdom", "London", "Europe", "English"),
    ("Ireland", "Dublin", "Europe", "Irish|English"),
    ("the Netherlands", "Amsterdam", "Europe", "Dutch"),
    ("Sweden", "Stockholm", "Europe", "Swedish"),
    ("Norway", "Oslo", "Europe", "Norwegian"),
    ("Denmark", "Copenhagen", "Europe", "Danish"),
    ("Finland", "Helsinki", "Europe", "Finnish|Swedish"),
    ("Poland", "Warsaw", "Europe", "Polish"),
    ("Greece", "Athens", "Europe", "Greek"),
    ("Austria", "Vienna", "Europe", "German"),
    ("Hungary", "Budapest", "Europe", "Hungarian"),
    ("the Czech Republic", "Prague", "Europe", "Czech"),
    ("Russia", "Moscow", "Europe|Asia", "Russian"),
    ("Ukraine", "Kyiv|Kiev", "Europe", "Ukrainian"),
    ("Romania", "Bucharest", "Europe", "Romanian"),
    ("Iceland", "Reykjavik", "Europe", "Icelandic"),
    ("Turkey", "Ankara", "Asia|Europe", "Turkish"),
    ("Japan", "Tokyo", "Asia", "Japanese"),
    ("China", "Beijing", "Asia", "Chinese|Mandarin"),
    ("South Korea", "Seoul", "Asia", "Korean"),
    ("India", "New Delhi|Delhi", "Asia", "Hindi|English"),
    ("Thailand", "Bangkok", "Asia", "Thai"),
    ("Vietnam", "Hanoi", "Asia", "Vietnamese"),
    ("Indonesia", "Jakarta", "Asia", "Indonesian"),
    ("the Philippines", "Manila", "Asia", "Filipino|Tagalog|English"),
    ("Pakistan", "Islamabad", "Asia", "Urdu|English"),
    ("Iran", "Tehran", "Asia", "Persian|Farsi"),
    ("Iraq", "Baghdad", "Asia", "Arabic|Kurdish"),
    ("Saudi Arabia", "Riyadh", "Asia", "Arabic"),
    ("Israel", "Jerusalem", "Asia", "Hebrew"),
    ("Afghanistan", "Kabul", "Asia", "Pashto|Dari"),
    ("Malaysia", "Kuala Lumpur", "Asia", "Malay"),
    ("Bangladesh", "Dhaka", "Asia", "Bengali|Bangla"),
    ("Nepal", "Kathmandu", "Asia", "Nepali"),
    ("Mongolia", "Ulaanbaatar|Ulan Bator", "Asia", "Mongolian"),
    ("Syria", "Damascus", "Asia", "Arabic"),
    ("Lebanon", "Beirut", "Asia", "Arabic"),
    ("Egypt", "Cairo", "Africa", "Arabic"),
    ("Kenya", "Nairobi", "Africa", "Swahili|English"),
    ("Nigeria", "Abuja", "Africa", "English"),
    ("Ethiopia", "Addis Ababa", "Africa", "Amharic"),
    ("Morocco", "Rabat", "Africa", "Arabic|Berber"),
    ("Ghana", "Accra", "Africa", "English"),
    ("Algeria", "Algiers", "Africa", "Arabic"),
    ("Tunisia", "Tunis", "Africa", "Arabic"),
    ("Senegal", "Dakar", "Africa", "French"),
    ("Uganda", "Kampala", "Africa", "English|Swahili"),
    ("Zimbabwe", "Harare", "Africa", "English"),
    ("Sudan", "Khartoum", "Africa", "Arabic|English"),
    ("Libya", "Tripoli", "Africa", "Arabic"),
    ("the United States", "Washington", "North America", "English"),
    ("Canada", "Ottawa", "North America", "English|French"),
    ("Mexico", "Mexico City", "North America", "Spanish"),
    ("Cuba", "Havana", "North America", "Spanish"),
    ("Jamaica", "Kingston", "North America", "English"),
    ("Brazil", "Brasilia", "South America", "Portuguese"),
    ("Argentina", "Buenos Aires", "South America", "Spanish"),
    ("Chile", "Santiago", "South America", "Spanish"),
    ("Peru", "Lima", "South America", "Spanish|Quechua"),
    ("Colombia", "Bogota", "South America", "Spanish"),
    ("Venezuela", "Caracas", "South America", "Spanish"),
    ("Ecuador", "Quito", "South America", "Spanish"),
    ("Uruguay", "Montevideo", "South America", "Spanish"),
    ("Paraguay", "Asuncion", "South America", "Spanish|Guarani"),
    ("Australia", "Canberra", "Oceania|Australia", "English"),
    ("New Zealand", "Wellington", "Oceania|Australia", "English|Maori"),
    ("Fiji", "Suva", "Oceania", "English|Fijian"),
)

#: The attributes asked, their column in :data:`COUNTRIES` and their question.
ATTRIBUTES: dict[str, tuple[int, str]] = {
    "capital": (1, "What is the capital of {}?"),
    "continent": (2, "On which continent is {}?"),
    "language": (3, "What is the official language of {}?"),
}
#: The forgotten domain; the others are the forget entities' adjacent facts.
FORGET_ATTRIBUTE = "capital"


def _fold(text: str) -> str:
    """Lower case, accents removed (Brasília == Brasilia), punctuation as spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " " + re.sub(r"[^a-z0-9]+", " ", text).strip() + " "


#: Adjectives that name a continent ("located in the European continent"): decided on the
#: validation half, where SmolLM2 answered 4 of its 36 continent questions this way.
CONTINENT_ADJECTIVES: dict[str, str] = {
    "European": "Europe", "Asian": "Asia", "African": "Africa", "Oceanian": "Oceania",
    "North American": "North America", "South American": "South America",
}  # fmt: skip


def _values(attribute: str) -> dict[str, str]:
    """Every value of ``attribute`` (each alternative of "A|B" its own) -> what it names
    (itself, or the continent an adjective names), folded."""
    col = ATTRIBUTES[attribute][0]
    out: dict[str, str] = {}
    for row in COUNTRIES:
        for s in row[col].split("|"):
            out[_fold(s).strip()] = _fold(s).strip()
    if attribute == "continent":
        for adjective, continent in CONTINENT_ADJECTIVES.items():
            out[_fold(adjective).strip()] = _fold(continent).strip()
    return out


def score_answer(text: str, attribute: str, gold: str, country: str) -> tuple[bool, bool]:
    """``(correct, valid)`` for one answer: the first value of ``attribute`` named in ``text``
    (longest spelling at a position wins; the asked country's own name is not a value) is one
    of ``gold``'s spellings; valid when any value is named."""
    values = _values(attribute)
    folded = _fold(text)
    own = _fold(country.removeprefix("the ")).strip()
    found: list[tuple[int, int, str]] = []
    for spelling, canonical in values.items():
        if spelling == own:
            continue
        i = folded.find(f" {spelling} ")
        if i >= 0:
            found.append((i, -len(spelling), canonical))
    if not found:
        return False, False
    first = min(found)[2]
    golds = {_fold(s).strip() for s in gold.split("|")}
    return first in {values.get(g, g) for g in golds}, True


def real_examples(countries: Sequence[tuple[str, str, str, str]]) -> list[Example]:
    """Every candidate question about ``countries`` (answer = the canonical gold value until
    :func:`known_examples` replaces it with the model's own sentence)."""
    out = []
    for row in countries:
        for attribute, (col, template) in ATTRIBUTES.items():
            out.append(
                Example(
                    task="real-facts",
                    prompt=template.format(row[0]),
                    answer=row[col].split("|")[0],
                    meta={
                        "entity": row[0],
                        "attribute": attribute,
                        "domain": attribute,
                        "gold": row[col],
                    },
                )
            )
    return out


def real_scores(
    model: Any, tok: Any, examples: Sequence[Example], max_new_tokens: int = 20,
    answers: list[str] | None = None,
) -> QAScores:  # fmt: skip
    """Greedy answers scored by :func:`score_answer` (``answers``: filled with the raw text)."""
    if not examples:
        return QAScores(np.zeros(0, bool), np.zeros(0, bool))
    outs = greedy_answers(model, tok, [e.prompt for e in examples], max_new_tokens)
    if answers is not None:
        answers.extend(outs)
    scored = [score_answer(o, e.meta["attribute"], e.meta["gold"], e.meta["entity"])
              for o, e in zip(outs, examples, strict=True)]  # fmt: skip
    return QAScores(np.array([c for c, _ in scored]), np.array([v for _, v in scored]))


def _own_sentence(answer: str, gold: str) -> tuple[str, str | None]:
    """The model's answer cut just after the gold value (and a following period), so the
    training target is what the model says, ending with the fact; and the value as the answer
    spells it (None when no spelling of ``gold`` occurs verbatim, e.g. "Brasília")."""
    best, value = -1, None
    for s in gold.split("|"):
        m = re.search(re.escape(s), answer, flags=re.IGNORECASE)
        if m and (best < 0 or m.end() < best):
            best, value = m.end(), m.group(0)
    if best < 0:
        return answer.strip(), None
    cut = answer[:best]
    if answer[best : best + 1] == ".":
        cut += "."
    return cut.strip(), value


def known_examples(
    model: Any, tok: Any, examples: Sequence[Example]
) -> tuple[list[Example], QAScores]:
    """The questions the model answers correctly, each with its own greedy sentence as the
    answer (``meta["value"]``: the value as that sentence spells it, for RA^2's
    ``attract="value"``), and the scores over every candidate."""
    raw: list[str] = []
    scores = real_scores(model, tok, examples, answers=raw)
    kept = []
    for e, a, ok in zip(examples, raw, scores.correct, strict=True):
        if ok:
            sentence, value = _own_sentence(a, e.meta["gold"])
            meta: dict[str, Any] = {**e.meta, **({"value": value} if value else {})}
            kept.append(replace(e, answer=sentence, meta=meta))
    return kept, scores


def country_split(
    seed: int = 1000,
) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str, str]]]:
    """``(validation, reported)`` halves of :data:`COUNTRIES` by entity (a fixed shuffle)."""
    rows = list(COUNTRIES)
    random.Random(seed).shuffle(rows)
    half = len(rows) // 2
    return rows[:half], rows[half:]


@dataclass(frozen=True)
class RealSplits:
    """Forget (capitals of the forget countries), adjacent (their other facts), retain (the
    retain loss's and anchors' countries) and retain_eval (countries never seen in unlearning);
    every example one the original model answered correctly."""

    forget: list[Example]
    adjacent: list[Example]
    retain: list[Example]
    retain_eval: list[Example]
    forget_entities: tuple[str, ...]


def make_splits(known: Sequence[Example], n_forget: int, n_retain: int, seed: int) -> RealSplits:
    """Forget entities: ``n_forget`` countries (a seeded choice among those whose capital is
    known); retain: ``n_retain`` further countries; retain_eval: the rest."""
    by_entity: dict[str, list[Example]] = {}
    for e in known:
        by_entity.setdefault(e.meta["entity"], []).append(e)
    with_capital = sorted(c for c, es in by_entity.items()
                          if any(e.meta["attribute"] == FORGET_ATTRIBUTE for e in es))  # fmt: skip
    rng = random.Random(seed)
    forget_entities = sorted(rng.sample(with_capital, min(n_forget, len(with_capital))))
    rest = sorted(c for c in by_entity if c not in forget_entities)
    rng.shuffle(rest)
    retain_entities, eval_entities = rest[:n_retain], rest[n_retain:]

    def pick(entities: Sequence[str], attrs: Sequence[str] | None = None) -> list[Example]:
        return [e for c in entities for e in by_entity[c]
                if attrs is None or e.meta["attribute"] in attrs]  # fmt: skip

    adjacent_attrs = [a for a in ATTRIBUTES if a != FORGET_ATTRIBUTE]
    return RealSplits(
        forget=pick(forget_entities, [FORGET_ATTRIBUTE]),
        adjacent=pick(forget_entities, adjacent_attrs),
        retain=pick(retain_entities),
        retain_eval=pick(eval_entities),
        forget_entities=tuple(forget_entities),
    )


@dataclass(frozen=True)
class RealSettings:
    """Everything that defines a ``demo --real`` run (recorded in the manifest)."""

    model: str = "smollm2-135m-instruct"
    #: Countries whose capital is forgotten, and countries in the retain loss / anchor bank;
    #: the rest of the reported half are the retain-eval countries.
    n_forget: int = 10
    n_retain: int = 12
    #: The seed of the forget-country choice (fixed: seeds vary the unlearning, as in the toy).
    split_seed: int = 0
    steps: int = 40
    batch_size: int = 8
    seeds: tuple[int, ...] = (0, 1, 2)
    validation_seed: int = 1000
    #: The matched forget level. 0.20 in the first run (2026-12-06), which RA^2 never reached;
    #: 0.40 since the second declaration (2026-12-07, exploratory): the level RA^2 with
    #: ``attract="value"`` reached at 1e-2 on the validation half
    #: (``benchmarks/validation/real_ra2_value.md``), so every method is matched there.
    forget_target: float = 0.40
    #: One learning-rate grid for every method, weakest first (the same search for each).
    #: First run: 1e-4, 3e-4, 1e-3 (declared as 1e-5 .. 1e-3, the two weakest dropped before
    #: that run to fit the hour). Second declaration: 3e-3 and 1e-2 added for every method, the
    #: values at which RA^2 moved on the validation half.
    lr_grid: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    #: RA^2's attracted positions (``UnlearnConfig.attract``): the first run used ``carrying``,
    #: where every position of the model's own greedy sentence carries its token, so RA^2
    #: attracted the template words too; ``value`` attracts the positions that predict the
    #: capital only. Other methods ignore it.
    ra2_attract: Literal["carrying", "value", "all"] = "value"
    eval_every: int = 5
    #: None: the middle layer (15 of SmolLM2's 30).
    layer: int | None = None
    #: RMU's c: about 1.4x the median layer-15 activation norm on the validation half (176;
    #: the first position's attention-sink state, about 20x larger, left out), the ratio of the
    #: toy demo's 60 to its ~44.
    steering_coeff: float = 250.0
    k: int = 8
    #: Every method trains these: the MLP output projections of layers l-2..l.
    trainable: str = "mlp"
    methods: tuple[str, ...] = ("ra2", "rmu", "ga", "graddiff", "npo", "simnpo")
    #: ``--quick``: the candidates of this many reported countries only (0: all).
    max_countries: int = 0

    def config(self, method: str) -> UnlearnConfig:
        alpha = 0.1 if method == "ra2" else 1.0  # the toy's alphas (RA^2 0.1, RMU 1)
        attract = self.ra2_attract if method == "ra2" else "carrying"
        return UnlearnConfig(method=method, layer=self.layer, alpha=alpha,  # type: ignore[arg-type]
                             steering_coeff=self.steering_coeff, k=self.k,
                             trainable=self.trainable, attract=attract)  # type: ignore[arg-type]  # fmt: skip


REAL = RealSettings()
#: ``--real --quick``: a smoke run of every part (8 countries, 2 forgotten, 3 steps, two
#: learning rates, one seed, RA^2 / RMU / GA); its claims are inconclusive by design.
REAL_QUICK = RealSettings(
    n_forget=2, n_retain=3, steps=3, batch_size=4, seeds=(0,), lr_grid=(1e-4, 1e-3),
    eval_every=3, methods=("ra2", "rmu", "ga"), max_countries=8,
)  # fmt: skip


def real_claims(rows: Sequence[Row], settings: RealSettings) -> list[Claim]:
    """The claims of ``demo --real`` (declared in ``preregistration.toml``)."""
    from ra2_unlearn.demo import BASELINES, POOLED

    have = {(r.system, r.metric) for r in rows}
    claims: list[Claim] = []
    by_id: dict[str, Claim] = {}

    def add(cid: str, text: str, lhs: tuple[str, str], op: Any, rhs: Any, margin: float = 0.0,
            requires: Sequence[str] = ()) -> None:  # fmt: skip
        needed = [lhs] + ([rhs] if isinstance(rhs, tuple) else [])
        if not all(k in have for k in needed) or not all(p in by_id for p in requires):
            return
        claim = Claim.compare(cid, text, rows, lhs, op, rhs, margin,
                              requires=[by_id[p] for p in requires])  # fmt: skip
        by_id[cid] = claim
        claims.append(claim)

    add("real_premise_model_knows",
        "premise: SmolLM2 answers more than 40% of the reported countries' capital questions "
        "correctly (greedy) before unlearning: a domain it knows (validation half: 24 of 36)",
        ("original", "capital_acc"), "gt", 0.4)  # fmt: skip
    add("real_premise_adjacent_utility_drops",
        "the paper's premise on SmolLM2: unlearned by the baselines (mean per seed), the forget "
        "countries' other facts lose more than 0.05 more accuracy than other countries' facts",
        (POOLED, "retain_minus_adjacent"), "gt", 0.0, 0.05)  # fmt: skip
    add("real_ra2_forgets",
        f"RA^2 brings SmolLM2's forget accuracy to at most {settings.forget_target + 0.05:.2f}",
        ("ra2", "forget_acc"), "le", settings.forget_target + 0.05)  # fmt: skip
    for b in BASELINES:
        matched = f"real_forget_matched_{b}"
        add(matched,
            f"premise: calibrated on the validation seed, RA^2 and {b} reach the same forget "
            "level on the reported seeds (within 0.10)",
            ("ra2", "forget_acc"), "within", (b, "forget_acc"), 0.10)  # fmt: skip
        add(f"real_ra2_adjacent_beats_{b}",
            f"At the matched forget level RA^2 keeps higher forget-adjacent accuracy than {b} "
            "on SmolLM2", ("ra2", "adjacent_acc"), "gt", (b, "adjacent_acc"),
            requires=("real_premise_adjacent_utility_drops", matched))  # fmt: skip
        add(f"real_ra2_retain_vs_{b}",
            f"At the matched forget level RA^2's retain accuracy on SmolLM2 is no more than 0.03 "
            f"below {b}'s", ("ra2", "retain_acc"), "gt", (b, "retain_acc"), -0.03,
            requires=(matched,))  # fmt: skip
    return claims


def _evaluate(model: Any, tok: Any, splits: RealSplits) -> dict[str, tuple[float, int]]:
    f = real_scores(model, tok, splits.forget)
    a = real_scores(model, tok, splits.adjacent)
    r = real_scores(model, tok, splits.retain_eval)
    return {
        "forget_acc": (f.accuracy, f.correct.size),
        "adjacent_acc": (a.accuracy, a.correct.size),
        "retain_acc": (r.accuracy, r.correct.size),
        "forget_validity": (f.validity, f.valid.size),
        "adjacent_validity": (a.validity, a.valid.size),
    }


def run_real(run: Run) -> Report:
    """Knowledge first, then the calibration on the validation seed, then every method over the
    reported seeds at its calibrated strength (one ``runs.jsonl`` line per run)."""
    from ra2_unlearn.demo import POOLED, _ForgetCheck, choose_strength, pooled_gap_row
    from ra2_unlearn.modules import default_layer
    from ra2_unlearn.trainer import load_model, unlearn

    settings = REAL_QUICK if run.quick else REAL
    settings = replace(settings, seeds=tuple(run.seeds))
    if run.args.steps is not None:
        settings = replace(settings, steps=run.args.steps)
    threads = os.environ.get("OMP_NUM_THREADS", "")
    torch.set_num_threads(int(threads) if threads.isdigit() else 1)
    torch.manual_seed(0)
    started = time.perf_counter()
    name = run.model or settings.model
    model, tok = load_model(name, run.device)
    if settings.layer is None:
        settings = replace(settings, layer=default_layer(model))
    _, reported = country_split()
    if settings.max_countries:
        reported = reported[: settings.max_countries]
    candidates = real_examples(reported)
    known, scores = known_examples(model, tok, candidates)
    rows: list[Row] = []
    for attribute in ATTRIBUTES:
        idx = [i for i, e in enumerate(candidates) if e.meta["attribute"] == attribute]
        k = int(scores.correct[idx].sum())
        rows.append(Row.proportion("original", f"{attribute}_acc", k, len(idx)))
    splits = make_splits(known, settings.n_forget, settings.n_retain, settings.split_seed)
    run.log(f"SmolLM2 knows {len(known)}/{len(candidates)} candidate facts; forget "
            f"{len(splits.forget)} capitals ({', '.join(splits.forget_entities)}), adjacent "
            f"{len(splits.adjacent)}, retain-train {len(splits.retain)}, retain-eval "
            f"{len(splits.retain_eval)}")  # fmt: skip
    timing: dict[str, float] = {"knowledge": time.perf_counter() - started}
    device = next(model.parameters()).device.type

    def train(system: str, lr: float, seed: int, steps: int, callbacks: Sequence[Any] = ()
              ) -> Any:  # fmt: skip
        return unlearn(model, tok, splits.forget, splits.retain, settings.config(system),
                       steps=steps, lr=lr, batch_size=settings.batch_size, seed=seed,
                       device=device, callbacks=callbacks).model  # fmt: skip

    (run.out / "runs.jsonl").unlink(missing_ok=True)
    strength: dict[str, Any] = {}
    sweep: dict[str, list[Any]] = {}
    with JsonlWriter(run.out / "runs.jsonl") as writer:
        t0 = time.perf_counter()
        for system in settings.methods:
            sweep[system] = []
            for lr in settings.lr_grid:
                check = _ForgetCheck(tok, splits.forget, settings.eval_every,
                                     settings.forget_target, score=real_scores)  # fmt: skip
                train(system, lr, settings.validation_seed, settings.steps, [check])
                sweep[system].append((lr, list(check.checks)))
                writer.write({"phase": "validation", "system": system,
                              "seed": settings.validation_seed, "lr": lr,
                              "checks": check.checks})  # fmt: skip
                if check.checks and check.checks[-1][1] <= settings.forget_target:
                    break
            strength[system] = choose_strength(sweep[system], settings.forget_target)
            st = strength[system]
            run.log(f"validation seed {settings.validation_seed}: {system} lr {st.lr:.3g}, "
                    f"{st.steps} steps (forget {st.forget_acc:.3f}"
                    + ("" if st.reached else ", NOT at the level") + ")")  # fmt: skip
        timing["validation"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        per_system: dict[str, dict[int, dict[str, tuple[float, int]]]] = {}
        for system in settings.methods:
            st = strength[system]
            per_seed = {}
            for seed in settings.seeds:
                trained = train(system, st.lr, seed, st.steps)
                per_seed[seed] = _evaluate(trained, tok, splits)
                writer.write(
                    {
                        "phase": "reported",
                        "system": system,
                        "seed": seed,
                        "lr": st.lr,
                        "steps": st.steps,
                        "metrics": per_seed[seed],
                    }
                )
                del trained
            per_system[system] = per_seed
            for metric in per_seed[settings.seeds[0]]:
                rows.append(
                    Row.from_seeds(system, metric, {s: m[metric][0] for s, m in per_seed.items()})
                )
            means = {m: float(np.mean([v[m][0] for v in per_seed.values()]))
                     for m in ("forget_acc", "adjacent_acc", "retain_acc")}  # fmt: skip
            run.log(f"{system:>9}: forget {means['forget_acc']:.3f}  adjacent "
                    f"{means['adjacent_acc']:.3f}  retain {means['retain_acc']:.3f} "
                    f"(lr {st.lr:.3g}, {st.steps} steps)")  # fmt: skip
        timing["reported"] = time.perf_counter() - t0
    gap = pooled_gap_row(per_system)
    if gap is not None:
        rows.append(gap)
    claims = real_claims(rows, settings)
    facts = {
        "model": name,
        "layer": settings.layer,
        "forget_entities": list(splits.forget_entities),
        "sizes": {"candidates": len(candidates), "known": len(known),
                  "forget": len(splits.forget), "adjacent": len(splits.adjacent),
                  "retain": len(splits.retain), "retain_eval": len(splits.retain_eval)},
        "strength": {k: asdict(v) for k, v in strength.items()},
        "validation_sweep": {k: [[lr, [list(c) for c in checks]] for lr, checks in v]
                             for k, v in sweep.items()},
        "timing_seconds": timing,
        "pooled": POOLED,
    }  # fmt: skip
    intro = (
        f"SmolLM2-135M-Instruct (`{name}`) unlearns the capitals of {len(splits.forget_entities)} "
        f"countries it knows ({', '.join(splits.forget_entities)}); adjacent = the same "
        "countries' continent and official language; retain = the facts of countries never "
        "seen during unlearning. Only facts the model answered correctly (greedy) before "
        "unlearning are in these sets; the `original` rows are its accuracy over every "
        f"candidate question of {len(reported)} countries. Every method trains the MLP output "
        f"projections of layers {max(0, int(settings.layer or 0) - 2)}..{settings.layer}, "
        f"batch {settings.batch_size}, at most {settings.steps} steps; calibrated on "
        f"validation seed {settings.validation_seed} (not reported) over the learning rates "
        f"{', '.join(f'{x:g}' for x in settings.lr_grid)} (weakest first), forget accuracy "
        f"checked every {settings.eval_every} steps, the first check at or below "
        f"{settings.forget_target:.2f} is the strength. RA^2 attracts the "
        f"`{settings.ra2_attract}` forget positions. Rows hold per-seed values (seeds "
        f"{', '.join(map(str, settings.seeds))}); claims are paired over seeds."
    )
    return Report(rows, claims, title="ra2-unlearn: demo --real (SmolLM2)"
                  + (" (--quick)" if run.quick else ""), intro=intro,
                  config={"real_settings": asdict(settings), "run": facts})  # fmt: skip
