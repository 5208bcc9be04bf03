"""``vllm.v1.core.sched.async_scheduler.AsyncScheduler(Scheduler)`` (same interface)."""

from vllm.v1.core.sched.scheduler import Scheduler


class AsyncScheduler(Scheduler):
    pass
