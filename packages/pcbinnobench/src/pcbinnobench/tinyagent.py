"""The tiny-model agent: a small causal LM that turns trajectory steps into tool calls.

A 1.3M-parameter character-level Llama (``paperstack.tiny``) cannot read a 100 kB board file,
so it works inside a compact scaffold (:class:`CompactModelAgent`): each turn it is shown one
line of the prompt (a step of the expert trajectory when the prompt is guided; the objective
when it is not) and must answer with the step as a one-line command of the action language
below, which the scaffold turns into the tool call. Stand-alone numbers (coordinates,
rotations, pad numbers) are shown to the model as ``#`` and copied back by the scaffold in
order: a copy pointer, so the model spends its capacity on the structure and the words
(references, nets, parts, values) rather than on reproducing digits. The model is trained on
:class:`StepTranslation`: random ECAD steps on random references, nets, parts and
coordinates, written the way :func:`pcbinnobench.catalog.describe_action` writes them, never
the shipped tasks' own steps (those are the test). With guidance the model has the edits to
translate; without it, it has to invent them: that gap is what the demo measures.

Action language (one line)::

    delete_tracks C2 | place C2 122 105 -90 | add_track GND B.Cu 128 106.59 122 107.475
    add_via GND 122 107.475 | add_part D1 TVS_SMA SMBJ5.0A 100.5 106 90 1=+5V 2=GND
    set_value C2 2.2uF | set_footprint C1 C_0603 | set_pad_net R1 2 IN_F
    set_pin_net U1 7 GND | done
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from paperstack.tasks import Example, Task, completion_text
from paperstack.tasks.base import check_n, in_test_split, split_rng
from pcbinnobench import parts as lib
from pcbinnobench.errors import PcbBenchError
from pcbinnobench.sexpr import format_number

__all__ = [
    "CompactModelAgent",
    "StepTranslation",
    "action_to_command",
    "command_to_action",
    "prompt_lines",
]


def _f(value: Any) -> str:
    return format_number(float(value))


def action_to_command(action: Mapping[str, Any]) -> str:
    """A tool action as one line of the action language."""
    tool, a = action["tool"], action.get("args", {})
    if tool == "delete_tracks":
        return f"delete_tracks {a['ref']}"
    if tool == "place":
        return f"place {a['ref']} {_f(a['x'])} {_f(a['y'])} {_f(a.get('rotation', 0))}"
    if tool == "add_track":
        pts = " ".join(f"{_f(x)} {_f(y)}" for x, y in a["points"])
        return f"add_track {a['net']} {a.get('layer', 'F.Cu')} {pts}"
    if tool == "add_via":
        return f"add_via {a['net']} {_f(a['x'])} {_f(a['y'])}"
    if tool == "add_part":
        nets = " ".join(f"{k}={v}" for k, v in a["nets"].items())
        return (
            f"add_part {a['ref']} {a['part']} {a['value']} {_f(a['x'])} {_f(a['y'])} "
            f"{_f(a.get('rotation', 0))} {nets}"
        )
    if tool == "set_value":
        return f"set_value {a['ref']} {a['value']}"
    if tool == "set_footprint":
        return f"set_footprint {a['ref']} {a['part']}"
    if tool == "set_pad_net":
        return f"set_pad_net {a['ref']} {a['pad']} {a['net']}"
    if tool == "set_pin_net":
        return f"set_pin_net {a['ref']} {a['pin']} {a['net']}"
    if tool == "done":
        return "done"
    raise PcbBenchError(f"no command for tool {tool!r}")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise PcbBenchError(f"not a number: {text!r}") from None


def command_to_action(line: str) -> dict[str, Any]:
    """Parse one command; a malformed one is a :class:`PcbBenchError` naming it."""
    words = line.strip().split()
    if not words:
        raise PcbBenchError("empty command")
    tool, rest = words[0], words[1:]
    arity = {
        "delete_tracks": 1,
        "place": 4,
        "add_via": 3,
        "set_value": 2,
        "set_footprint": 2,
        "set_pad_net": 3,
        "set_pin_net": 3,
        "done": 0,
    }
    if tool in arity and len(rest) != arity[tool]:
        raise PcbBenchError(f"{tool} takes {arity[tool]} arguments, got {len(rest)}: {line!r}")
    if tool == "done":
        return {"tool": "done", "args": {}}
    if tool == "delete_tracks":
        return {"tool": tool, "args": {"ref": rest[0]}}
    if tool == "place":
        x, y, r = (_number(v) for v in rest[1:])
        return {"tool": tool, "args": {"ref": rest[0], "x": x, "y": y, "rotation": r}}
    if tool == "add_track":
        if len(rest) < 6 or len(rest) % 2:
            raise PcbBenchError(f"add_track takes NET LAYER and point pairs: {line!r}")
        nums = [_number(v) for v in rest[2:]]
        pts = [[nums[i], nums[i + 1]] for i in range(0, len(nums), 2)]
        return {"tool": tool, "args": {"net": rest[0], "points": pts, "layer": rest[1]}}
    if tool == "add_via":
        return {
            "tool": tool,
            "args": {"net": rest[0], "x": _number(rest[1]), "y": _number(rest[2])},
        }
    if tool == "add_part":
        if len(rest) < 6:
            raise PcbBenchError(f"add_part takes REF PART VALUE X Y ROT PAD=NET...: {line!r}")
        nets = {}
        for item in rest[6:]:
            if "=" not in item:
                raise PcbBenchError(f"add_part: expected PAD=NET, got {item!r}")
            k, v = item.split("=", 1)
            nets[k] = v
        return {
            "tool": tool,
            "args": {
                "ref": rest[0],
                "part": rest[1],
                "value": rest[2],
                "x": _number(rest[3]),
                "y": _number(rest[4]),
                "rotation": _number(rest[5]),
                "nets": nets,
            },
        }
    if tool == "set_value":
        return {"tool": tool, "args": {"ref": rest[0], "value": rest[1]}}
    if tool == "set_footprint":
        return {"tool": tool, "args": {"ref": rest[0], "part": rest[1]}}
    if tool == "set_pad_net":
        return {"tool": tool, "args": {"ref": rest[0], "pad": rest[1], "net": rest[2]}}
    if tool == "set_pin_net":
        return {"tool": tool, "args": {"ref": rest[0], "pin": rest[1], "net": rest[2]}}
    raise PcbBenchError(f"unknown command {tool!r}")


# ----------------------------------------------------------------------------- training task

_REFS = [f"{p}{i}" for p in "CRUDJQ" for i in range(1, 13)]
_NETS = [
    "GND",
    "+5V",
    "+3V3",
    "+12V",
    "+1V8",
    "VBUS",
    "IN",
    "OUT",
    "IN_F",
    "OUTB",
    "SDA",
    "SCL",
    "EN",
    "MISO",
    "MOSI",
    "SCK",
    "CS",
    "TX",
    "RX",
    "RESET",
    "LED_A",
    "GATE",
    "VREF",
    "Net-(U1-FB)",
]
_VALUES = [
    f"{m}{u}"
    for m in (
        "1",
        "2.2",
        "3.3",
        "4.7",
        "6.8",
        "10",
        "15",
        "22",
        "33",
        "47",
        "68",
        "100",
        "150",
        "220",
        "330",
        "470",
    )
    for u in ("pF", "nF", "uF", "k", "R", "M")
] + ["SMBJ5.0A", "SMBJ3.3A", "SMAJ12A", "LMV358", "24LC02", "AP2112K-3.3"]


def _coord(rng: random.Random) -> float:
    digits = rng.choice((0, 1, 2, 2, 3, 3, 4))
    return round(rng.uniform(95, 140), digits)


def random_action(rng: random.Random) -> dict[str, Any]:
    """One random ECAD step of the kinds the trajectories use."""
    kind = rng.choice(
        [
            "delete_tracks",
            "place",
            "add_track",
            "add_track",
            "add_via",
            "add_part",
            "set_value",
            "set_footprint",
            "set_pad_net",
            "set_pin_net",
        ]
    )
    ref, net = rng.choice(_REFS), rng.choice(_NETS)
    rot = rng.choice((0, 90, -90, 180))
    if kind == "delete_tracks":
        return {"tool": kind, "args": {"ref": ref}}
    if kind == "place":
        return {
            "tool": kind,
            "args": {"ref": ref, "x": _coord(rng), "y": _coord(rng), "rotation": rot},
        }
    if kind == "add_track":
        pts = [[_coord(rng), _coord(rng)] for _ in range(rng.choice((2, 2, 2, 3, 4)))]
        return {
            "tool": kind,
            "args": {"net": net, "points": pts, "layer": rng.choice(("F.Cu", "B.Cu"))},
        }
    if kind == "add_via":
        return {"tool": kind, "args": {"net": net, "x": _coord(rng), "y": _coord(rng)}}
    if kind == "add_part":
        key = rng.choice(sorted(lib.PARTS))
        pads = [p.number for p in lib.part(key).pads]
        nets = {p: rng.choice(_NETS) for p in pads[: rng.choice((2, 2, 3, 4))]}
        return {
            "tool": kind,
            "args": {
                "ref": ref,
                "part": key,
                "value": rng.choice(_VALUES),
                "x": _coord(rng),
                "y": _coord(rng),
                "rotation": rot,
                "nets": nets,
            },
        }
    if kind == "set_value":
        return {"tool": kind, "args": {"ref": ref, "value": rng.choice(_VALUES)}}
    if kind == "set_footprint":
        return {"tool": kind, "args": {"ref": ref, "part": rng.choice(sorted(lib.PARTS))}}
    if kind == "set_pad_net":
        return {"tool": kind, "args": {"ref": ref, "pad": str(rng.randint(1, 8)), "net": net}}
    return {"tool": kind, "args": {"ref": ref, "pin": str(rng.randint(1, 8)), "net": net}}


@dataclass(frozen=True)
class StepTranslation(Task):
    """Trajectory sentence -> command, on random steps (train and test split by sentence)."""

    name: ClassVar[str] = "pcb_steps"
    test_fraction: float = 0.1

    def generate(self, n: int, seed: int = 0, split: Any = "train") -> list[Example]:
        from pcbinnobench.catalog import describe_action

        rng = split_rng(self.name, seed, split)
        out: list[Example] = []
        tries = 0
        while len(out) < check_n(n) and tries < 50 * max(n, 1):
            tries += 1
            action = random_action(rng)
            sentence = describe_action(action)
            if in_test_split(sentence, self.test_fraction) != (split == "test"):
                continue
            prompt, numbers = mask_numbers(sentence)
            command = action_to_command(action)
            masked, got = mask_numbers(command)
            if got != numbers:  # the copy pointer must line up (it does for every template)
                continue
            out.append(
                Example(
                    self.name, prompt, masked, {"action": json.dumps(action), "numbers": numbers}
                )
            )
        return out

    def verify(self, example: Example, completion: str | Sequence[Mapping[str, Any]]) -> bool:
        numbers = list(example.meta.get("numbers", []))
        try:
            got = command_to_action(unmask_numbers(completion_text(completion), numbers))
            want = command_to_action(unmask_numbers(example.answer, numbers))
        except PcbBenchError:
            return False
        return got == want


# ----------------------------------------------------------------------------- scaffold

_STEP = re.compile(r"^\s*\d+\.\s+(.*\S)\s*$")
#: A stand-alone number (not part of a word like C2, 4.7nF or +5V): the scaffold hands these
#: to the model as ``#`` and puts them back, in order, into its command (a copy pointer).
NUMBER = re.compile(r"(?<![\w.+-])-?\d+(?:\.\d+)?(?![\w-]|\.\d)")


def mask_numbers(text: str) -> tuple[str, list[str]]:
    """``text`` with each stand-alone number replaced by ``#``, and the numbers in order."""
    found = NUMBER.findall(text)
    return NUMBER.sub("#", text), found


def unmask_numbers(text: str, numbers: Sequence[str]) -> str:
    """Put ``numbers`` back into the ``#`` slots of ``text`` in order (missing ones stay)."""
    it = iter(numbers)
    return re.sub(r"#", lambda m: next(it, "#"), text)


def prompt_lines(prompt: str) -> list[str]:
    """The steps a compact agent is shown: the numbered trajectory lines (minus the final
    "Finish."), or, for an objective-only prompt, its first sentence."""
    steps = [m.group(1) for line in prompt.splitlines() if (m := _STEP.match(line))]
    steps = [s for s in steps if s.rstrip(".").lower() != "finish"]
    if steps:
        return steps
    first = prompt.strip().split(". ")[0].strip()
    return [first[:300]] if first else []


class CompactModelAgent:
    """A :class:`~paperstack.llm.ChatModel` scaffold around a small model.

    It reads the task prompt (the first user message), shows the inner model one step at a
    time (the line for the current turn), and returns the model's command as a JSON action;
    after the last line it answers ``done``. The inner model sees nothing else: not the
    files, not the observations, not the hidden package.
    """

    def __init__(self, model: Any, name: str | None = None, max_new_tokens: int = 96) -> None:
        self.model = model
        self.name = name or f"compact({getattr(model, 'name', 'model')})"
        self.max_new_tokens = max_new_tokens
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def generate(self, prompts: Sequence[Any], **kwargs: Any) -> list[list[str]]:
        out = []
        for prompt in prompts:
            messages = list(prompt)
            task_prompt = next(str(m["content"]) for m in messages if m["role"] == "user")
            turn = sum(1 for m in messages if m["role"] == "assistant")
            lines = prompt_lines(task_prompt)
            if turn >= len(lines):
                out.append(['{"tool": "done", "args": {}}'])
                continue
            masked, numbers = mask_numbers(lines[turn])
            text = self.model.generate(
                [[{"role": "user", "content": masked}]],
                max_new_tokens=self.max_new_tokens,
                temperature=0.0,
            )[0][0]
            self.prompt_tokens += len(masked)
            self.completion_tokens += len(text)
            first = str(text).splitlines()[0] if str(text) else ""
            try:
                action = command_to_action(unmask_numbers(first, numbers))
                out.append([json.dumps(action)])
            except PcbBenchError as exc:
                out.append([f"(unparseable command: {exc})"])
        return out

    def logprobs(self, prompts: Sequence[Any], continuations: Sequence[str]) -> list[np.ndarray]:
        return list(self.model.logprobs(prompts, continuations))
