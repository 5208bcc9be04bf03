import json

from memeeconomy.bdi import BDIRecord, ParseFailure, parse_bdi

GOOD = {
    "belief": {"event_understanding": "e", "audience_reaction": "a", "meme_assessment": "m"},
    "desire": {"priority": "survival", "justification": "j", "risk_tolerance": "high",
               "risk_justification": "r"},
    "intention": {"selected_meme": "ev001-A", "target_community": "r/TechTalk",
                  "reasoning": "why"},
    "risk_acknowledged": True,
}  # fmt: skip


def test_a_valid_record_parses_from_prose_or_a_fence():
    for text in (json.dumps(GOOD), "Sure.\n```json\n" + json.dumps(GOOD) + "\n```\nDone.",
                 "I pick " + json.dumps(GOOD) + " as final."):  # fmt: skip
        rec = parse_bdi(text, {"ev001-A"}, {"r/TechTalk"})
        assert isinstance(rec, BDIRecord)
        assert rec.risk_acknowledged is True


def test_failures_name_the_problem():
    assert parse_bdi("no json here").reason == "no JSON object in the reply"
    assert "invalid JSON" in parse_bdi('{"belief": }').reason
    bad = dict(GOOD, desire=dict(GOOD["desire"], priority="world_domination"))
    failure = parse_bdi(json.dumps(bad))
    assert isinstance(failure, ParseFailure)
    assert failure.reason.startswith("field desire.priority")
    extra = dict(GOOD, mood="great")
    assert "field mood" in parse_bdi(json.dumps(extra)).reason
    unoffered = parse_bdi(json.dumps(GOOD), {"ev002-A"}, {"r/TechTalk"})
    assert "not an offered meme" in unoffered.reason
    nowhere = parse_bdi(json.dumps(GOOD), {"ev001-A"}, {"r/Other"})
    assert "not a community" in nowhere.reason
    assert failure.raw == json.dumps(bad)  # the raw reply is kept for the ledger
