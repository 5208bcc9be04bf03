"""The task format and the sandbox: the hidden package is never reachable from an agent run."""

import json
import os

import pytest
from pcbinnobench.catalog import TASKS, build_task
from pcbinnobench.harness import run_episode
from pcbinnobench.tasks import LEVELS, TaskSetError, load_tasks
from pcbinnobench.tools import Sandbox, SandboxError, tree_digest


def test_twelve_tasks_of_every_kind_with_two_prompt_levels(tasks):
    assert len(tasks) >= 12
    kinds = {t.kind for t in tasks}
    assert {
        "decap_move",
        "add_tvs",
        "swap_footprint",
        "fix_net",
        "add_connector",
        "change_value",
    } <= kinds
    for t in tasks:
        assert set(t.prompts) == set(LEVELS)
        assert "Expert trajectory" in t.prompt("guided")
        assert "Expert trajectory" not in t.prompt("objective")
        assert t.prompt("objective").strip() in t.prompt("guided")


def test_hidden_package_lives_apart_from_the_workspace(tasks):
    for t in tasks:
        files = {p.name for p in t.workspace.rglob("*")}
        assert not files & {"validators.json", "solution.json", "ground_truth", "original"}
        assert t.hidden not in t.workspace.parents
        assert t.workspace not in t.hidden.parents
        assert (t.hidden / "validators.json").is_file()
        assert (t.hidden / "solution.json").is_file()


def test_a_rebuild_is_byte_identical(tmp_path, taskset):
    spec = next(s for s in TASKS if s.id == "eeprom_add_j2")
    build_task(spec, tmp_path / "tasks", tmp_path / "hidden")
    for side in ("tasks", "hidden"):
        assert tree_digest(tmp_path / side / spec.id) == tree_digest(taskset / side / spec.id)


class _Snoop:
    """An agent that tries every way out of the sandbox towards the hidden package."""

    name = "snoop"

    def __init__(self, task):
        hid = task.hidden
        self.actions = [
            {"tool": "read_file", "args": {"path": str(hid / "solution.json")}},
            {"tool": "read_file", "args": {"path": "../../hidden/" + task.id + "/solution.json"}},
            {
                "tool": "read_file",
                "args": {"path": os.path.relpath(hid / "solution.json", task.workspace)},
            },
            {"tool": "list_files", "args": {}},
            {"tool": "read_file", "args": {"path": "~/solution.json"}},
            {"tool": "write_file", "args": {"path": "../escape.txt", "content": "x"}},
            {"tool": "done", "args": {}},
        ]
        self.observations = []

    def generate(self, prompts, **kwargs):
        messages = prompts[0]
        self.observations = [m["content"] for m in messages if m["role"] == "user"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return [[json.dumps(self.actions[min(turn, len(self.actions) - 1)])]]

    def logprobs(self, prompts, continuations):
        raise NotImplementedError


def test_the_hidden_package_is_unreadable_from_the_sandbox(task):
    agent = _Snoop(task)
    ep = run_episode(task, agent, "objective")
    secret = (task.hidden / "solution.json").read_text(encoding="utf-8")
    observations = agent.observations[1:]
    assert len(observations) == 6
    for obs, action in zip(observations, agent.actions, strict=False):
        if action["tool"] == "list_files":
            assert "solution" not in obs
            assert "validators" not in obs
        else:
            assert "error:" in obs, (action, obs)
    assert not any(secret[:40] in obs for obs in observations)
    assert not ep.passed


def test_symlinks_are_not_copied_into_the_sandbox(tmp_path, task):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "board.kicad_pcb").write_text("(kicad_pcb (version 20241229))\n")
    (ws / "peek").symlink_to(task.hidden / "solution.json")
    with Sandbox(ws) as box:
        assert not (box.root / "peek").exists()
        with pytest.raises(SandboxError):
            box.resolve("/etc/passwd")
        with pytest.raises(SandboxError):
            box.resolve("../ws/board.kicad_pcb")


def test_bad_task_sets_are_one_error(tmp_path, taskset):
    with pytest.raises(TaskSetError, match="no such task-set"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(TaskSetError, match="no tasks/ folder"):
        load_tasks(tmp_path)
    with pytest.raises(TaskSetError, match="unknown task"):
        load_tasks(taskset, ["nope"])
    broken = tmp_path / "set"
    (broken / "tasks" / "t1").mkdir(parents=True)
    (broken / "hidden").mkdir()
    (broken / "tasks" / "t1" / "task.json").write_text("{not json")
    with pytest.raises(TaskSetError, match="not JSON"):
        load_tasks(broken)
