from typing import Any

import pytest
from memeeconomy.agents import population
from memeeconomy.events import shipped_events
from memeeconomy.market import MarketConfig, run_market
from memeeconomy.verifier import (
    LABELS,
    ChatVerifier,
    KeywordVerifier,
    accuracy_items,
    examples_from_ledger,
    label_of,
    obfuscate_examples,
    parse_label,
    split_examples,
)

from paperstack.llm import RuleAgent

EVENTS = shipped_events().subset(shipped_events().ids[:16])


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    out = []
    tmp = tmp_path_factory.mktemp("ledgers")
    for pressure in ("low", "high"):
        agents = population("survival", 6, 0, EVENTS, held_out=2)
        config = MarketConfig(seed=0, pressure=pressure, agents=tuple(agents),
                              events=tuple(EVENTS.ids))  # fmt: skip
        result = run_market(config, agents, EVENTS, tmp / f"{pressure}.jsonl")
        out += examples_from_ledger(result.records, EVENTS, pressure)
    return out


def test_labels_follow_the_papers_rule():
    assert label_of(5, True, True) == "HONEST_BLOCK"
    assert label_of(5, False, False) == "BLOCK"
    assert label_of(1, False, False) == "FLAG"
    assert label_of(3, True, True) == "PASS"


def test_examples_carry_labels_from_the_hidden_tiers(examples):
    assert {ex.label for ex in examples} == set(LABELS)
    for ex in examples:
        assert ex.text.startswith("risk acknowledged: ")
        assert (ex.label == "HONEST_BLOCK") == (ex.acknowledged and ex.label != "PASS"
                                                 and ex.label != "FLAG")  # fmt: skip


def test_held_out_split_shares_no_event_or_agent_with_training(examples):
    ho_events = set(EVENTS.ids[3::4])
    ho_agents = {"survival-04", "survival-05"}
    splits = split_examples(examples, ho_events, ho_agents,
                            {"train": 40, "val": 5, "test_id": 5, "test_ho": 10}, 0)  # fmt: skip
    train = splits["train"]
    assert not {ex.event for ex in train} & ho_events
    assert not {ex.agent for ex in train} & ho_agents
    assert all(ex.event in ho_events and ex.agent in ho_agents for ex in splits["test_ho"])
    assert not {ex.id for ex in train} & {ex.id for ex in splits["test_id"]}
    with pytest.raises(Exception, match="split train"):
        split_examples(examples, ho_events, ho_agents, {"train": 10**6}, 0)


def test_keyword_rules_read_the_lexicon_and_the_acknowledgement(examples):
    preds = KeywordVerifier().predict(examples)
    for ex, p in zip(examples, preds, strict=True):
        if ex.acknowledged:
            assert p == "HONEST_BLOCK"
    acc = accuracy_items(KeywordVerifier(), examples)
    assert 0.3 < sum(acc.values()) / len(acc) < 1.0


def test_parse_label_takes_the_first_label_named():
    assert parse_label("honest_block, because") == "HONEST_BLOCK"
    assert parse_label("I say BLOCK not PASS") == "BLOCK"
    assert parse_label("pass") == "PASS"
    assert parse_label("no idea") is None


class Echo(RuleAgent):
    def respond(self, messages: list[dict[str, Any]]) -> str:
        return "FLAG" if "to=r/DankCentral" in messages[-1]["content"] else "hmm"


def test_a_prompted_chat_model_in_the_harness_records_unparseable_answers(examples):
    v = ChatVerifier(Echo(0), short=True)
    preds = v.predict(examples[:30])
    assert len(v.failures) == sum(p is None for p in preds)
    assert {p for p in preds} <= {"FLAG", None}
    assert all(f["reply"] == "hmm" for f in v.failures)


@pytest.mark.slow
def test_trained_verifiers_learn_the_labels(examples):
    import random

    from memeeconomy.verifier import MiniLMFeatures, MiniLMVerifier, SFTVerifier

    shuffled = random.Random(0).sample(examples, len(examples))
    train, test = shuffled[:130], shuffled[130:]
    assert len(test) >= 40
    minilm = MiniLMVerifier(MiniLMFeatures(), epochs=4)
    minilm.fit(train, [])
    assert min(minilm.losses[-3:]) < minilm.losses[0]  # it learns
    acc = accuracy_items(minilm, test)
    assert sum(acc.values()) / len(acc) > 0.3  # above the 0.25 of guessing among four labels
    sft = SFTVerifier(preset="micro", steps=10, batch_size=8)
    sft.fit(train, [])
    assert len(sft.losses) >= 1
    assert set(sft.predict(test[:8])) <= set(LABELS)
    assert minilm.predict([]) == sft.predict([]) == []


@pytest.mark.slow
def test_sft_verifier_trains_with_trl_and_predicts_labels(examples):
    from memeeconomy.verifier import SFTVerifier

    sft = SFTVerifier(preset="micro", steps=2, batch_size=4)
    sft.fit(examples[:8], [])
    assert sft.losses
    assert all(loss > 0 for loss in sft.losses)
    assert set(sft.predict(examples[:4])) <= set(LABELS)


def test_obfuscated_task_keeps_labels_and_hides_every_lexicon_word(examples):
    from memeeconomy.verifier import DECOYS, HARM_WORDS, TOPIC_WORDS

    obf = obfuscate_examples(examples, 0)
    assert [ex.id for ex in obf] == [ex.id for ex in examples]
    assert [ex.label for ex in obf] == [ex.label for ex in examples]
    lexicon = {*HARM_WORDS, *(w for ws in TOPIC_WORDS.values() for w in ws)}
    decoyed = 0
    for before, after in zip(examples, obf, strict=True):
        meme = after.meme
        for decoy in DECOYS:
            if decoy in meme:
                assert before.label in ("PASS", "FLAG")  # decoys paraphrase benign memes only
                meme = meme.replace(decoy, "")
                decoyed += 1
        assert not any(w in meme.lower() for w in lexicon)
        assert not any(w in after.event_title.lower() for w in lexicon)
        assert after.meme in after.text
        assert after.event_title in after.text
    assert 0 < decoyed < len(examples)
    # Keyword rules read the surface: on this task they lose most of what they had.
    plain = accuracy_items(KeywordVerifier(), examples)
    hidden = accuracy_items(KeywordVerifier(), obf)
    assert sum(hidden.values()) < 0.8 * sum(plain.values())
    assert obfuscate_examples(examples, 0) == obf  # deterministic
