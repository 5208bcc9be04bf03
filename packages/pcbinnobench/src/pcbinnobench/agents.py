"""The reference agents: do-nothing, oracle-patch and a scripted heuristic, as ChatModels.

All three speak the harness's action format (one JSON action per answer) through the same
:class:`~paperstack.llm.ChatModel` interface a language model uses, so they run through the
same sandbox, budgets and validators:

- :class:`DoNothingAgent` answers ``done`` at once: the floor every validator set must fail
  (a task whose checks pass untouched is a broken task).
- :class:`OracleAgent` replays the expert trajectory from the task's *hidden* package
  (``solution.json``). It is explicitly privileged: it proves every task can be passed
  through the agent tools, not that an agent can find the answer.
- :class:`HeuristicAgent` sees only what a model sees (the prompt and the tool observations).
  It first lists the files and reads the board summary; with the guided prompt it turns each
  numbered trajectory step back into a tool call (a rule-based reader of the step language);
  with the objective alone it applies two naive rules, a library footprint id or a
  capacitance named in the objective goes to the lowest-numbered part of the matching kind,
  and otherwise gives up. It measures how much the trajectory carries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from pcbinnobench import parts as lib
from pcbinnobench.errors import PcbBenchError

__all__ = ["DoNothingAgent", "HeuristicAgent", "OracleAgent", "parse_step"]

_DONE = json.dumps({"tool": "done", "args": {}})


def _messages(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return list(prompt)


def _turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


class _Scripted:
    """Shared ChatModel plumbing: ``generate`` asks :meth:`answer` once per prompt."""

    name = "scripted"

    def answer(self, messages: list[dict[str, Any]]) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def generate(self, prompts: Sequence[Any], **kwargs: Any) -> list[list[str]]:
        n = int(kwargs.get("n", 1))
        return [[self.answer(_messages(p))] * n for p in prompts]

    def logprobs(self, prompts: Sequence[Any], continuations: Sequence[str]) -> list[np.ndarray]:
        raise PcbBenchError(f"{self.name}: a scripted agent has no log-probabilities")


class DoNothingAgent(_Scripted):
    """Finishes at once, leaving the workspace as shipped."""

    name = "do-nothing"

    def answer(self, messages: list[dict[str, Any]]) -> str:
        return _DONE


class OracleAgent(_Scripted):
    """Replays a task's hidden expert trajectory, one action a turn, then ``done``."""

    name = "oracle"

    def __init__(self, solution: Sequence[dict[str, Any]]) -> None:
        self.solution = [dict(a) for a in solution]

    def answer(self, messages: list[dict[str, Any]]) -> str:
        turn = _turn(messages)
        if turn < len(self.solution):
            return json.dumps(self.solution[turn])
        return _DONE


# ----------------------------------------------------------------------------- step reader

_NUM = r"(-?\d+(?:\.\d+)?)"
_XY = rf"\(\s*{_NUM},\s*{_NUM}\)"
_STEP_LINE = re.compile(r"^\s*\d+\.\s+(.*\S)\s*$")
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("delete_tracks", re.compile(r"Rip up the tracks and vias of (\S+)\.$")),
    ("place", re.compile(rf"Move (\S+) to {_XY} with rotation {_NUM}\.$")),
    ("add_track", re.compile(r"Route (\S+) on (\S+) from (.*)\.$")),
    ("add_via", re.compile(rf"Place an? (\S+) via at {_XY}\.$")),
    (
        "add_part",
        re.compile(
            rf"Add (\S+) as part (\S+) value (\S+) at {_XY} with rotation "
            rf"{_NUM}, (.*)\.$"
        ),
    ),
    ("set_value", re.compile(r"Set the value of (\S+) to (\S+?)\.$")),
    ("set_footprint", re.compile(r"Change the footprint of (\S+) to part (\S+?)\.$")),
    ("set_pad_net", re.compile(r"Assign pad (\S+) of (\S+) to net (\S+?)\.$")),
    ("set_pin_net", re.compile(r"Connect schematic pin (\S+) of (\S+) to net (\S+?)\.$")),
]


def parse_step(step: str) -> dict[str, Any] | None:
    """One trajectory sentence as a tool action, or None when no rule reads it."""
    text = step.strip()
    for tool, pattern in _PATTERNS:
        m = pattern.match(text)
        if m is None:
            continue
        g = m.groups()
        if tool == "delete_tracks":
            return {"tool": tool, "args": {"ref": g[0]}}
        if tool == "place":
            return {
                "tool": tool,
                "args": {"ref": g[0], "x": float(g[1]), "y": float(g[2]), "rotation": float(g[3])},
            }
        if tool == "add_track":
            points = [[float(x), float(y)] for x, y in re.findall(_XY, g[2])]
            return {"tool": tool, "args": {"net": g[0], "layer": g[1], "points": points}}
        if tool == "add_via":
            return {"tool": tool, "args": {"net": g[0], "x": float(g[1]), "y": float(g[2])}}
        if tool == "add_part":
            nets = dict(re.findall(r"pad (\S+) to ([^,\s]+)", g[6]))
            return {
                "tool": tool,
                "args": {
                    "ref": g[0],
                    "part": g[1],
                    "value": g[2],
                    "x": float(g[3]),
                    "y": float(g[4]),
                    "rotation": float(g[5]),
                    "nets": nets,
                },
            }
        if tool == "set_value":
            return {"tool": tool, "args": {"ref": g[0], "value": g[1]}}
        if tool == "set_footprint":
            return {"tool": tool, "args": {"ref": g[0], "part": g[1]}}
        if tool == "set_pad_net":
            return {"tool": tool, "args": {"pad": g[0], "ref": g[1], "net": g[2]}}
        return {"tool": tool, "args": {"pin": g[0], "ref": g[1], "net": g[2]}}
    return None


_LIB_ID = re.compile(r"\b([A-Za-z_]+:[A-Za-z0-9_.\-]+[A-Za-z0-9])")
_CAPACITANCE = re.compile(r"\b(\d+(?:\.\d+)?)\s*([pnu])F\b")
_REF = re.compile(r"^([A-Z]+)(\d+) ", re.M)


def _refs(summary: str, prefix: str) -> list[str]:
    found = [(int(num), f"{p}{num}") for p, num in _REF.findall(summary) if p == prefix]
    return [ref for _, ref in sorted(found)]


class HeuristicAgent(_Scripted):
    """Reads the prompt and the tool observations only (see the module docstring)."""

    name = "heuristic"

    def answer(self, messages: list[dict[str, Any]]) -> str:
        turn = _turn(messages)
        if turn == 0:
            return json.dumps({"tool": "list_files", "args": {}})
        observations = [str(m["content"]) for m in messages if m.get("role") == "user"]
        if turn == 1:
            board = re.search(r"(\S+\.kicad_pcb) \(", observations[-1])
            if board is None:
                return _DONE
            return json.dumps({"tool": "summary", "args": {"path": board.group(1)}})
        summary = observations[2] if len(observations) > 2 else ""
        plan = self.plan(observations[0], summary)
        step = turn - 2
        return json.dumps(plan[step]) if step < len(plan) else _DONE

    def plan(self, prompt: str, summary: str) -> list[dict[str, Any]]:
        steps = [m.group(1) for line in prompt.splitlines() if (m := _STEP_LINE.match(line))]
        steps = [s for s in steps if s.rstrip(".").lower() != "finish"]
        if steps:
            return [a for a in (parse_step(s) for s in steps) if a is not None]
        return self._objective_rules(prompt, summary)

    @staticmethod
    def _objective_rules(prompt: str, summary: str) -> list[dict[str, Any]]:
        lib_id = _LIB_ID.search(prompt)
        if lib_id is not None:
            part = lib.part_for_footprint(lib_id.group(1))
            if part is not None:
                refs = _refs(summary, part.prefix)
                if refs:
                    return [{"tool": "set_footprint", "args": {"ref": refs[0], "part": part.key}}]
        cap = _CAPACITANCE.search(prompt)
        if cap is not None:
            refs = _refs(summary, "C")
            if refs:
                value = f"{cap.group(1)}{cap.group(2)}F"
                return [{"tool": "set_value", "args": {"ref": refs[0], "value": value}}]
        return []
