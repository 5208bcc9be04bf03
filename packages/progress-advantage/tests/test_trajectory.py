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
