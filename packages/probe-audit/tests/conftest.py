"""The session's ``transformers serve`` (paperstack's ``openai_server``) starts in the background
as the session begins, so its start (10-30 s of imports and model loading in the child process)
overlaps the CPU-bound tests that run before tests/test_serve.py instead of being that file's
setup time.

Only when a selected test asks for ``openai_server`` and the serving extra is installed: without
it the core's fixture skips (or fails under ``PAPERSTACK_REQUIRE_SERVER=1``) exactly as before.
The fixture below is the core's, after the background start: it waits for that start, then asks
the core's ``serve_model`` for the same server (started once per session), so a background start
that failed is simply retried in the test's own setup, with the core's error if it fails again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Seconds the session's end waits for a background start still under way (the core's server
#: start timeout is 180 s), so no server is left running when the session stops.
_JOIN_TIMEOUT = 200.0


def _wanted(session: pytest.Session) -> bool:
    from paperstack.llm.serve import serving_available

    needs = any(
        "openai_server" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("skip") is None
        for item in session.items
    )
    return needs and serving_available()


@pytest.fixture(scope="session", autouse=True)
def _server_started_early(request: pytest.FixtureRequest) -> Iterator[threading.Thread | None]:
    if not _wanted(request.session):
        yield None
        return
    serve_model = request.getfixturevalue("serve_model")
    model_dir = request.getfixturevalue("served_model_dir")

    def start() -> None:
        # a failed start is retried, and its error reported, by openai_server below
        with contextlib.suppress(Exception):
            serve_model(model_dir)

    thread = threading.Thread(target=start, name="early-transformers-serve", daemon=True)
    thread.start()
    yield thread
    # Before serve_model's own teardown (it was requested here, so it ends after this): a start
    # still under way must finish so that teardown stops the server it started.
    thread.join(_JOIN_TIMEOUT)


@pytest.fixture(scope="session")
def openai_server(
    serve_model: Any, served_model_dir: Path, _server_started_early: threading.Thread | None
) -> Any:
    """The core's ``openai_server``, once the background start above has finished."""
    if _server_started_early is not None:
        _server_started_early.join(_JOIN_TIMEOUT)
    return serve_model(served_model_dir)
