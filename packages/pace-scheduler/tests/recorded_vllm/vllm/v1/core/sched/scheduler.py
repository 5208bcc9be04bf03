"""``vllm.v1.core.sched.scheduler.Scheduler``: the recorded signatures and a behaviour model.

``__init__(vllm_config, kv_cache_config, structured_output_manager, block_size, mm_registry=...,
include_finished_set=False, log_stats=False)``; ``schedule(throttle_prefills=False)``;
``update_from_output(scheduler_output, model_runner_output)``; ``add_request(request)``;
``finish_requests(request_ids, finished_status)``; ``get_num_unfinished_requests()``;
attributes ``requests``, ``waiting`` (``add_request``, ``__len__``), ``running``,
``block_size``, ``max_num_running_reqs``, ``max_num_scheduled_tokens``,
``kv_cache_manager.block_pool.get_num_free_blocks()``, ``scheduler_config``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import Request, RequestStatus


class _Queue(deque):  # FCFSRequestQueue
    def add_request(self, request: Request) -> None:
        self.append(request)

    def remove_requests(self, requests: Iterable[Request]) -> None:
        for r in list(requests):
            if r in self:
                self.remove(r)


class _BlockPool:
    def __init__(self, num_blocks: int) -> None:
        self.free = num_blocks

    def get_num_free_blocks(self) -> int:
        return self.free


class _KVCacheManager:
    def __init__(self, num_blocks: int) -> None:
        self.block_pool = _BlockPool(num_blocks)


class Scheduler:
    def __init__(
        self,
        vllm_config: Any,
        kv_cache_config: Any,
        structured_output_manager: Any,
        block_size: int,
        mm_registry: Any = None,
        include_finished_set: bool = False,
        log_stats: bool = False,
    ) -> None:
        self.vllm_config = vllm_config
        self.scheduler_config = vllm_config.scheduler_config
        self.max_num_running_reqs = self.scheduler_config.max_num_seqs
        self.max_num_scheduled_tokens = self.scheduler_config.max_num_batched_tokens
        self.block_size = block_size
        self.requests: dict[str, Request] = {}
        self.waiting = _Queue()
        self.running: list[Request] = []
        self.kv_cache_manager = _KVCacheManager(kv_cache_config.num_blocks)
        self._blocks: dict[str, int] = {}
        self.finished_req_ids: set[str] = set()

    def add_request(self, request: Request) -> None:
        self.waiting.add_request(request)
        self.requests[request.request_id] = request

    def _need(self, request: Request, tokens: int) -> int:
        want = -(-tokens // self.block_size)
        return max(want - self._blocks.get(request.request_id, 0), 0)

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        out = SchedulerOutput(finished_req_ids=self.finished_req_ids)
        self.finished_req_ids = set()
        budget = self.max_num_scheduled_tokens
        pool = self.kv_cache_manager.block_pool
        for request in self.running:
            n = min(max(request.num_tokens - request.num_computed_tokens, 1), budget)
            need = self._need(request, request.num_computed_tokens + n)
            if n <= 0 or need > pool.free:
                continue
            pool.free -= need
            self._blocks[request.request_id] = self._blocks.get(request.request_id, 0) + need
            out.num_scheduled_tokens[request.request_id] = n
            budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.max_num_running_reqs:
            request = self.waiting[0]
            n = min(request.num_prompt_tokens, budget)
            need = self._need(request, n)
            if need > pool.free:
                break
            self.waiting.popleft()
            pool.free -= need
            self._blocks[request.request_id] = need
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            out.num_scheduled_tokens[request.request_id] = n
            budget -= n
        for rid, n in out.num_scheduled_tokens.items():  # _update_after_schedule
            self.requests[rid].num_computed_tokens += n
        return out

    def update_from_output(self, scheduler_output: SchedulerOutput, model_runner_output: Any):
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.num_computed_tokens >= request.num_tokens:
                request.output_token_ids.append(7)
            if request.num_output_tokens >= request.max_tokens:
                request.status = RequestStatus.FINISHED_LENGTH_CAPPED
                self._free(request)
        return {}

    def _free(self, request: Request) -> None:
        if request in self.running:
            self.running.remove(request)
        self.kv_cache_manager.block_pool.free += self._blocks.pop(request.request_id, 0)
        self.requests.pop(request.request_id, None)
        self.finished_req_ids.add(request.request_id)

    def finish_requests(self, request_ids: Any, finished_status: RequestStatus) -> list[Request]:
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids or self.requests)
        out = []
        for rid in ids:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            self.waiting.remove_requests([request])
            request.status = finished_status
            self._free(request)
            out.append(request)
        return out

    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0
