import json

import pytest
from memeeconomy import MemeEconomyError
from memeeconomy.events import COMMUNITIES, TIERS, load_events, shipped_events


def test_shipped_events_cover_every_tier_and_topic():
    events = shipped_events()
    assert len(events) >= 60
    topics = {e.topic for e in events}
    assert topics == {t for c in COMMUNITIES for t in c.topics}
    for e in events:
        assert sorted(o.tier for o in e.options) == sorted(TIERS)
    # harm pays in most events: the tier-5 option has the highest base karma in ~70% of them
    top = sum(max(e.options, key=lambda o: o.base_karma).tier == 5 for e in events)
    assert 0.6 <= top / len(events) <= 0.8


def _write(path, events):
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")


def _event(**kw):
    base = shipped_events().events[0].model_dump()
    base.update(kw)
    return base


def test_own_events_load_from_jsonl_and_json(tmp_path):
    _write(tmp_path / "e.jsonl", [_event(id="x1"), _event(id="x2")])
    assert load_events(tmp_path / "e.jsonl").ids == ["x1", "x2"]
    (tmp_path / "e.json").write_text(json.dumps([_event(id="y")]))
    assert load_events(tmp_path / "e.json").ids == ["y"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json\n", "line 1: not valid JSON"),
        (json.dumps({k: v for k, v in _event().items() if k != "article"}) + "\n",
         "line 1: field article"),
        (json.dumps(_event(options=[{"id": "a", "tier": 9, "description": "d",
                                     "base_karma": 1}] * 2)) + "\n", "field options.0.tier"),
        ("", "no events"),
        ("[1]", "event 0: expected a JSON object"),
    ],
)  # fmt: skip
def test_malformed_event_files_are_one_line_naming_file_and_field(tmp_path, content, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(MemeEconomyError) as exc:
        load_events(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert needle in msg
    assert "\n" not in msg


def test_folder_missing_file_and_repeated_ids_are_one_line(tmp_path):
    with pytest.raises(MemeEconomyError, match="is a folder"):
        load_events(tmp_path)
    with pytest.raises(MemeEconomyError, match="no such events file"):
        load_events(tmp_path / "nope.jsonl")
    _write(tmp_path / "d.jsonl", [_event(id="z"), _event(id="z")])
    with pytest.raises(MemeEconomyError, match="'z' appears twice"):
        load_events(tmp_path / "d.jsonl")


def _karma_line(value):
    """One event whose first option's base_karma is ``value`` written verbatim into the JSON."""
    options = [dict(o, base_karma=123456789) for o in _event()["options"]]
    return json.dumps(_event(options=options)).replace("123456789", value, 1) + "\n"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("Infinity", "field options.0.base_karma: Input should be a finite number"),
        ("NaN", "field options.0.base_karma: Input should be a finite number"),
        ("1e999", "field options.0.base_karma: Input should be a finite number"),
        ("1e12", "field options.0.base_karma: Input should be less than or equal to 1000000000"),
        ("-Infinity", "field options.0.base_karma: Input should be"),
    ],
)
def test_non_finite_or_huge_base_karma_is_refused(tmp_path, value, needle):
    """Issue #46: ``base_karma: Infinity`` was accepted and ranked every agent "inf"."""
    path = tmp_path / "e.jsonl"
    path.write_text(_event_line_ok() + _karma_line(value))
    with pytest.raises(MemeEconomyError) as exc:
        load_events(path)
    assert str(exc.value).startswith(f"{path}: line 2: ")
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def _event_line_ok():
    return json.dumps(_event(id="ok")) + "\n"


def test_the_base_karma_limit_is_inclusive(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(_karma_line("1e9"))
    assert load_events(path).events[0].options[0].base_karma == 1e9


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_deeply_nested_json_is_one_line(tmp_path, name):
    path = tmp_path / name
    path.write_text("[" * 100_000 if name.endswith(".json") else '{"a": ' * 100_000)
    with pytest.raises(MemeEconomyError, match="nested too deeply"):
        load_events(path)
