"""``vllm.v1.core.sched.output.SchedulerOutput``: the field the plug-in reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SchedulerOutput:
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    finished_req_ids: set[str] = field(default_factory=set)
