"""``vllm.v1.request``: the fields of ``Request`` and ``RequestStatus`` the plug-in reads."""

from __future__ import annotations

import enum
from typing import Any


class RequestStatus(enum.IntEnum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED


class SamplingParams:
    def __init__(self, max_tokens: int = 16, extra_args: dict[str, Any] | None = None) -> None:
        self.max_tokens = max_tokens
        self.extra_args = extra_args


class Request:
    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams,
        arrival_time: float = 0.0,
    ) -> None:
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.sampling_params = sampling_params
        self.arrival_time = arrival_time
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.output_token_ids: list[int] = []
        self.max_tokens = sampling_params.max_tokens

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)
