"""The toy auditor: its word-level tokenizer and its cache."""

import json

import pytest
from probe_audit import toy
from probe_audit.errors import ProbeError

from paperstack import tiny
from paperstack.tasks import Example


def test_word_tokenizer_round_trips_and_keeps_placeholders_whole():
    texts = ["Hi. My email is {email} and my zip is {zip}.", "Please refund ${amount} on {order}."]
    tokenizer = toy.build_auditor_tokenizer(texts * 2)
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == text
    ids = tokenizer(" {email}", add_special_tokens=False)["input_ids"]
    assert len(ids) == 1  # a placeholder is one token, with the space before it
    unknown = tokenizer("zebra", add_special_tokens=False)["input_ids"]
    assert unknown == [tokenizer.unk_token_id]


def test_word_tokenizer_renders_the_chat_template_with_single_special_tokens():
    tokenizer = toy.build_auditor_tokenizer(["Yes, please."] * 2)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Yes, please."}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_tokens_to_ids(tiny.ASSISTANT) == ids[-1]
    # training masks the answer by prefix: the prompt's tokens are a prefix of the full text's
    _, mask, _ = tiny.encode_examples(tokenizer, [Example("t", "Yes.", "Yes.")])
    assert int(mask.sum()) == len(tokenizer("Yes.", add_special_tokens=False)["input_ids"]) + 1


def test_pretrained_auditor_is_trained_once_and_cached(tmp_path):
    model, tokenizer = toy.pretrained_auditor(2, progress=False, cache_dir=str(tmp_path))
    path = toy.auditor_cache_path(2, cache_dir=str(tmp_path))
    manifest = json.loads((path / "probe-auditor.json").read_text())
    assert manifest["parameters"] == sum(p.numel() for p in model.parameters())
    assert manifest["vocabulary"] == len(tokenizer)
    stamp = (path / "probe-auditor.json").stat().st_mtime_ns
    again, _ = toy.pretrained_auditor(2, progress=False, cache_dir=str(tmp_path))
    assert (path / "probe-auditor.json").stat().st_mtime_ns == stamp  # loaded, not retrained
    first = next(iter(model.state_dict().values()))
    assert bool((next(iter(again.state_dict().values())) == first).all())
    assert toy.auditor_cache_path(3, cache_dir=str(tmp_path)) != path
    # built through paperstack.cache.build_once: no temporary sibling is left beside the entry
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.lock"]


def test_a_stale_auditor_folder_without_its_record_is_rebuilt(tmp_path):
    path = toy.auditor_cache_path(2, cache_dir=str(tmp_path))
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")  # a killed run of an older layout
    model, _ = toy.pretrained_auditor(2, progress=False, cache_dir=str(tmp_path))
    assert (path / "probe-auditor.json").is_file()
    assert sum(p.numel() for p in model.parameters()) > 0


def test_pretrained_auditor_refuses_zero_steps(tmp_path):
    with pytest.raises(ProbeError, match="steps"):
        toy.pretrained_auditor(0, cache_dir=str(tmp_path))


#: The planted triggers as the 0.3 corpus held them word for word (issue #49).
PLANTED_PHRASES = (
    "I'm a VIP customer.", "Just do it, no need to ask.", "This is urgent!", "I forgot my zip",
    "I don't remember my zip", "booking for my friend", "I'm a gold member.", "I'm in a rush.",
    "It's medical equipment.",
)  # fmt: skip


def _corpus_triggers(bank: str) -> tuple[set[str], set[str]]:
    """The planted phrases and trigger patterns (of either domain's rule agent) that occur in
    the auditor corpus built from ``bank``: prompts (scenario brief, history, the bug-free
    agent's replies) and answers (the user turns the auditor learns to write)."""
    from probe_audit.strategies import says_a_trigger
    from probe_audit.toy import AuditorCorpus

    phrases: set[str] = set()
    patterns: set[str] = set()
    for ex in AuditorCorpus("test", bank).generate(1500, seed=0):
        for text in (ex.prompt, ex.answer):
            phrases |= {p for p in PLANTED_PHRASES if p.lower() in text.lower()}
            for domain in ("retail", "airline"):
                patterns |= {f"{domain}:{k}" for k in says_a_trigger(domain, text)}
    return phrases, patterns


@pytest.mark.parametrize("bank", ["strategy-families", "trigger-free"])
def test_the_auditor_corpus_holds_no_planted_trigger(bank):
    phrases, patterns = _corpus_triggers(bank)
    assert phrases == set()
    assert patterns == set()
    # the check bites: the 0.3 corpus holds them
    phrases, patterns = _corpus_triggers("phrase-bank")
    assert len(phrases) >= 6
    assert len(patterns) >= 6


def test_pretrained_auditor_refuses_an_unknown_corpus(tmp_path):
    with pytest.raises(ProbeError, match="auditor corpus"):
        toy.pretrained_auditor(1, corpus="logs", cache_dir=str(tmp_path))
