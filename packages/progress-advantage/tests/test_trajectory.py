import json

import pytest
from progress_advantage.errors import ProgressAdvantageError
from progress_advantage.trajectory import Step, Trajectory, read_trajectories, write_trajectories


def test_lines_become_steps_that_cover_the_completion():
    t = Trajectory.from_lines("3+4*2=", "4*2=8\n\n3+8=11\nAnswer: 11\n")
    assert t.step_texts() == ["4*2=8", "\n\n3+8=11", "\nAnswer: 11\n"]
    assert "".join(t.step_texts()) == t.messages[-1]["content"]


def test_turns_become_steps_and_observations_are_skipped():
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "look"},
        {"role": "user", "content": "you see a door"},
        {"role": "assistant", "content": "open door"},
    ]
    t = Trajectory.from_turns(msgs)
    assert [s.message for s in t.steps] == [1, 3]


def test_rejects_trajectory_without_step_spans():
    with pytest.raises(ProgressAdvantageError, match="no field 'steps'"):
        Trajectory.from_json({"messages": [{"role": "user", "content": "x"}]}, where="f: line 1")
    with pytest.raises(ProgressAdvantageError, match="has no steps"):
        Trajectory.from_lines("x", "\n  \n")


def test_rejects_empty_step():
    msgs = ({"role": "user", "content": "q"}, {"role": "assistant", "content": "a  b"})
    with pytest.raises(ProgressAdvantageError, match="empty step"):
        Trajectory(messages=msgs, steps=(Step(1, 1, 3),))
    with pytest.raises(ProgressAdvantageError, match="empty step"):
        Trajectory(messages=msgs, steps=(Step(1, 2, 2),))


def test_rejects_steps_in_observations_and_overlaps():
    msgs = ({"role": "user", "content": "q"}, {"role": "assistant", "content": "abcdef"})
    with pytest.raises(ProgressAdvantageError, match="only assistant"):
        Trajectory(messages=msgs, steps=(Step(0, 0, 1),))
    with pytest.raises(ProgressAdvantageError, match="overlaps"):
        Trajectory(messages=msgs, steps=(Step(1, 0, 4), Step(1, 2, 5)))
    with pytest.raises(ProgressAdvantageError, match="outside"):
        Trajectory(messages=msgs, steps=(Step(1, 0, 40),))


def test_jsonl_roundtrip_and_errors_name_file_and_line(tmp_path):
    t = Trajectory.from_lines("1+2=", "1+2=3\nAnswer: 3", id="a", group="g", success=True)
    path = write_trajectories(tmp_path / "t.jsonl", [t.with_extra(step_scores=[0.5, -0.5])])
    (back,) = read_trajectories(path)
    assert back == t.with_extra(step_scores=[0.5, -0.5])
    bad = tmp_path / "bad.jsonl"
    rec = t.to_json()
    del rec["steps"]
    bad.write_text(json.dumps(t.to_json()) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ProgressAdvantageError, match=r"bad.jsonl: line 2: no field 'steps'"):
        read_trajectories(bad)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("success", "false", "field 'success' is 'false'"),  # bool("false") would be True
        ("success", 2, "field 'success' is 2"),
        ("first_error", "abc", "field 'first_error' is 'abc'"),
        ("first_error", 7, "field 'first_error' is 7; expected the index of a step (0..1)"),
        ("first_error", -1, "field 'first_error' is -1"),
        ("first_error", True, "field 'first_error' is True"),
        ("group", ["a"], "field 'group' is ['a']"),
        ("id", {"x": 1}, "field 'id' is {'x': 1}"),
        ("answer", [3], "field 'answer' is [3]"),
    ],
)
def test_wrongly_typed_labels_are_refused_not_coerced(tmp_path, field, value, needle):
    t = Trajectory.from_lines("1+2=", "1+2=4\nAnswer: 4", id="a", group="g", success=False)
    rec = t.to_json()
    rec[field] = value
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(t.to_json()) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ProgressAdvantageError) as exc:
        read_trajectories(path)
    assert str(exc.value).startswith(f"{path}: line 2: ")
    assert needle in str(exc.value)


def test_labels_in_range_and_integer_ids_are_accepted():
    rec = Trajectory.from_lines("1+2=", "1+2=4\nAnswer: 4").to_json()
    rec.update(id=3, group=1, success=0, first_error=1, answer=4)
    t = Trajectory.from_json(rec)
    assert (t.id, t.group, t.success, t.first_error, t.answer) == ("3", "1", False, 1, "4")
    rec.update(id=None, group=None, success=None, first_error=None, answer=None)
    t = Trajectory.from_json(rec)
    assert (t.id, t.group, t.success, t.first_error, t.answer) == ("", "", None, None, None)


def test_a_message_without_a_string_role_is_refused():
    rec = Trajectory.from_lines("1+2=", "1+2=3").to_json()
    rec["messages"][1]["role"] = 5
    with pytest.raises(ProgressAdvantageError, match=r"field 'messages\[1\]' must have string"):
        Trajectory.from_json(rec, where="f: line 1")
