"""The language-model toy: a reference with one systematic flaw, and harmless variety.

The theorem needs a reference that RL can improve (it is wrong somewhere, but puts some mass on
the right move) and a place where confidence and progress advantage disagree. The SFT data of
the reference is multi-step arithmetic from :class:`paperstack.tasks.Arithmetic` with two
changes, fixed before any claim was computed:

- **a systematic flaw**: a multiplication step ``a*b`` whose left operand is 3, 4, 6 or 9 (44% of
  the multiplications) is written ``a*b=a*(b+1)`` with probability
  :attr:`FlawedArithmetic.flaw_prob` (0.8), and the solution goes on consistently from the
  wrong value. The reference learns to be *confidently* wrong there (about 80/20), so its own
  token probabilities hardly separate its right and wrong answers, while KL-regularised RL,
  which sees the verifier's reward, can move the 20% up;
- **harmless variety**: each step line is written ``a*b=c`` or ``a * b = c`` (spaces around the
  operator and the equals sign) with probability 1/2 each, independently. The spacing never
  changes the answer, so the optimal advantage of that choice is zero and a KL-regularised
  policy keeps the reference's odds there, while its 50/50 token lowers every confidence
  score. (A first design varied the order of the reductions instead; the tiny reference then
  also failed on many products of intermediate results, with low confidence, and its mean
  log-probability predicted success with AUROC 0.85 > 0.75: no headroom. Measured on the
  reference before any RL, so no claim was seen.)

The reduction order is the canonical one of ``Arithmetic`` (leftmost ``*`` first, then left to
right); every problem has exactly two operations over operands 1..6 (:data:`TOY_MIN_OPS` =
:data:`TOY_MAX_OPS` = 2, :data:`TOY_MAX_OPERAND` = 6: two step lines and the ``Answer:`` line;
the core's default is 2 to 4 operations over 1..9). How the sizes were fixed, each measured on
the reference alone, before any RL, on a validation seed (never a reported one):

- up to 4 operations: the reference failed a fifth of its samples on long products, not at
  the flaw, with low confidence (mean log-probability AUROC 0.83: no headroom);
- up to 3: the ``tiny`` reference needed 1200 SFT steps (51-65 min on the shared machine); at
  the 300 steps the budget allowed it solved 5% of its samples;
- two operations over 1..9, 600 steps (8 min): 24% of its samples right, failing at random on
  plain additions (``49+4=52``) more often than at the flaw (AUROC 0.785 > 0.75);
- two operations over 1..6 (650 facts for a second step instead of about 2,200), 600 steps
  (5 min), flaw on left operands 3, 6, 9: 74% right, the flaw behind 61% of the failures, yet
  AUROC 0.781: the remaining random errors are low-confidence ones;
- hence the flaw on left operands 3, 4, 6 and 9 (:data:`FLAW_OPERANDS`: 35% of the teacher's
  multiplication steps are wrong, "one step type wrong in about a third of cases", and 24% of
  its solutions take a flawed step) and :data:`SFT_STEPS` = 800 (batch 64, about 7 min).

Prompts, the test split and the verifier are those of ``Arithmetic``: the flaw lives only in
the reference's training data, and a solution is judged by the true value.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from paperstack.tasks import Arithmetic, Example
from paperstack.tasks.arithmetic import _apply
from paperstack.tasks.base import Split, check_n, in_test_split, split_rng

__all__ = [
    "FLAW_OPERANDS",
    "REAL_VARIANTS",
    "SFT_STEPS",
    "TOY_MAX_OPERAND",
    "TOY_MAX_OPS",
    "TOY_MIN_OPS",
    "FlawedArithmetic",
    "InstructedArithmetic",
    "instructed_task",
    "is_flaw_site",
    "toy_task",
]

#: Left operands of the multiplications the reference gets wrong.
FLAW_OPERANDS = (3, 4, 6, 9)
#: Operations per problem in the toy (exactly two).
TOY_MIN_OPS = 2
TOY_MAX_OPS = 2
#: Largest operand (1..6).
TOY_MAX_OPERAND = 6
#: SFT steps of the cached reference (batch 64, the core's lr 3e-3 and cosine schedule).
SFT_STEPS = 800


def toy_task() -> Arithmetic:
    """The task RL, evaluation and the verifier use: ``Arithmetic`` with the toy's sizes."""
    return Arithmetic(min_ops=TOY_MIN_OPS, max_ops=TOY_MAX_OPS, max_operand=TOY_MAX_OPERAND)


#: The real-model arm's prompt: an instruct model has never seen the toy's bare ``"3+4*2="``
#: format, so the problem comes with the solution format and one worked example (the format the
#: verifier and the step segmentation read: one ``a op b=c`` line per operation, then
#: ``Answer: N``).
INSTRUCTION = (
    "Solve the problem step by step. Write one operation per line as a op b=c, doing "
    "multiplications first and then left to right, and end with a line 'Answer: N'.\n"
    "Example problem: 2+3*4=\n3*4=12\n2+12=14\nAnswer: 14\n"
    "Problem: {expression}="
)


#: Few-shot prompt for one-operation problems (``demo --real`` variants ``one-*``).
INSTRUCTION_ONE = (
    "Solve the problem. Write the operation as a line a op b=c, then a line 'Answer: c'.\n"
    "Problem: 2+3=\n2+3=5\nAnswer: 5\n"
    "Problem: 4*2=\n4*2=8\nAnswer: 8\n"
    "Problem: {expression}="
)
#: Few-shot prompt for two-addition problems (variant ``two-add``).
INSTRUCTION_TWO_ADD = (
    "Solve the problem step by step. Write one addition per line as a+b=c, left to right, "
    "then a line 'Answer: N'.\n"
    "Problem: 2+3+4=\n2+3=5\n5+4=9\nAnswer: 9\n"
    "Problem: 1+5+2=\n1+5=6\n6+2=8\nAnswer: 8\n"
    "Problem: {expression}="
)


#: Worked examples as chat turns (variants ``*-chat``).
SHOTS_ONE = (
    ("2+3=", "2+3=5\nAnswer: 5"),
    ("4*2=", "4*2=8\nAnswer: 8"),
    ("6-1=", "6-1=5\nAnswer: 5"),
)
SHOTS_TWO_ADD = (
    ("2+3+4=", "2+3=5\n5+4=9\nAnswer: 9"),
    ("1+5+2=", "1+5=6\n6+2=8\nAnswer: 8"),
    ("4+1+3=", "4+1=5\n5+3=8\nAnswer: 8"),
)


@dataclass(frozen=True)
class InstructedArithmetic(Arithmetic):
    """The toy's problems with an instruction as the prompt, for a pretrained instruct model
    used as the reference with no SFT (``demo --real``); :data:`REAL_VARIANTS` names the
    sizes and prompts measured on SmolLM2 on validation problems."""

    name: ClassVar[str] = "instructed-arithmetic"
    min_ops: int = TOY_MIN_OPS
    max_ops: int = TOY_MAX_OPS
    max_operand: int = TOY_MAX_OPERAND
    instruction: str = INSTRUCTION
    #: Worked examples given as earlier chat turns (user: problem, assistant: solution)
    #: before the problem, where an instruction in one message is not followed.
    shots: tuple[tuple[str, str], ...] = ()

    def messages(self, example: Example) -> list[dict[str, str]]:
        """The chat prompt of ``example``: the worked examples as turns, then the problem."""
        turns: list[dict[str, str]] = []
        for problem, solution in self.shots:
            turns += [{"role": "user", "content": problem}]
            turns += [{"role": "assistant", "content": solution}]
        return [*turns, {"role": "user", "content": example.prompt}]

    def to_dataset(self, examples: Sequence[Example], conversational: bool = False) -> Any:
        """As ``Arithmetic.to_dataset``; conversational prompts carry the worked-example turns
        (what RLOO samples from)."""
        ds = super().to_dataset(examples, conversational=conversational)
        if conversational and self.shots:
            ds = ds.remove_columns("prompt").add_column(
                "prompt", [self.messages(e) for e in examples]
            )
        return ds

    def make(self, tokens: Sequence[int | str]) -> Example:
        gold = super().make(tokens)
        prompt = self.instruction.format(expression=gold.meta["expression"])
        return Example(self.name, prompt, gold.answer, gold.meta)


#: Task variants for ``demo --real`` (name -> task), measured on SmolLM2-135M-Instruct at
#: temperature 1 on validation problems by ``benchmarks/real_task_probe.py``.
REAL_VARIANTS: dict[str, InstructedArithmetic] = {
    "two-op": InstructedArithmetic(),
    "one-op": InstructedArithmetic(min_ops=1, max_ops=1, instruction=INSTRUCTION_ONE),
    "one-add": InstructedArithmetic(min_ops=1, max_ops=1, ops="+", instruction=INSTRUCTION_ONE),
    "two-add": InstructedArithmetic(ops="+", instruction=INSTRUCTION_TWO_ADD),
    "one-op-chat": InstructedArithmetic(
        min_ops=1, max_ops=1, instruction="{expression}=", shots=SHOTS_ONE
    ),
    "two-add-chat": InstructedArithmetic(ops="+", instruction="{expression}=", shots=SHOTS_TWO_ADD),
}


def instructed_task(variant: str = "two-op") -> Arithmetic:
    """The real-model arm's task: the :data:`REAL_VARIANTS` entry ``variant``."""
    if variant not in REAL_VARIANTS:
        raise ValueError(
            f"unknown instructed task variant {variant!r}; known: {list(REAL_VARIANTS)}"
        )
    return REAL_VARIANTS[variant]


def is_flaw_site(a: int, op: str, b: int) -> bool:
    """Whether the step ``a op b`` is one the reference was taught wrong."""
    return op == "*" and a in FLAW_OPERANDS


@dataclass(frozen=True)
class FlawedArithmetic(Arithmetic):
    """The reference's SFT data: ``Arithmetic`` prompts, solutions with the flaw and random
    spacing (``meta["value"]`` stays the true value, so :meth:`verify` is exact)."""

    name: ClassVar[str] = "flawed-arithmetic"
    min_ops: int = TOY_MIN_OPS
    max_ops: int = TOY_MAX_OPS
    max_operand: int = TOY_MAX_OPERAND
    flaw_prob: float = 0.8
    spaced_prob: float = 0.5

    def teacher_steps(
        self, tokens: Sequence[int | str], rng: random.Random
    ) -> tuple[list[str], bool]:
        """The SFT solution's step lines, and whether it took a flawed step."""
        toks: list[int | str] = list(tokens)
        steps: list[str] = []
        flawed = False
        while len(toks) > 1:
            ops = [(i, toks[i]) for i in range(1, len(toks), 2)]
            i = next((i for i, op in ops if op == "*"), ops[0][0])
            a, op, b = int(toks[i - 1]), str(toks[i]), int(toks[i + 1])
            c = _apply(a, op, b)
            if is_flaw_site(a, op, b) and rng.random() < self.flaw_prob:
                c, flawed = a * (b + 1), True
            spaced = rng.random() < self.spaced_prob
            steps.append(f"{a} {op} {b} = {c}" if spaced else f"{a}{op}{b}={c}")
            toks[i - 1 : i + 2] = [c]
        return steps, flawed

    def make_taught(self, tokens: Sequence[int | str], rng: random.Random) -> Example:
        """An example whose ``answer`` is the flawed teacher's solution."""
        gold = super().make(tokens)
        steps, flawed = self.teacher_steps(tokens, rng)
        written = _value_of_steps(steps, tokens)
        answer = "\n".join([*steps, f"Answer: {written}"])
        meta = {**gold.meta, "taught_flawed": flawed}
        return Example(self.name, gold.prompt, answer, meta)

    def generate(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` taught examples; the expressions are split by the same hash as ``Arithmetic``."""
        rng = split_rng(self.name, seed, split)
        teacher = random.Random(f"{self.name}-teacher-{seed}-{split}")
        want_test = split == "test"
        out: list[Example] = []
        while len(out) < check_n(n):
            k = rng.randint(self.min_ops, self.max_ops)
            tokens: list[int | str] = [rng.randint(1, self.max_operand)]
            for _ in range(k):
                tokens += [rng.choice(self.ops), rng.randint(1, self.max_operand)]
            if in_test_split(tuple(tokens), self.test_fraction) == want_test:
                out.append(self.make_taught(tokens, teacher))
        return out


def _value_of_steps(steps: Sequence[str], tokens: Sequence[int | str]) -> int:
    """The value the written steps arrive at: the right-hand side of the last step."""
    if not steps:
        return int(tokens[0])
    return int(steps[-1].split("=")[-1].strip())
