"""Issue #46: bounded inputs, one run per ``--out``, and no worker outliving a terminated demo."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pace_scheduler import outdir
from pace_scheduler.cli import main
from pace_scheduler.workload import MAX_SEQUENCE_TOKENS, MAX_TRACE_TOKENS

from paperstack.records import load_results


def _request(rid="a", prompt=4, serial=(2, 2)):
    return {
        "kind": "request",
        "id": rid,
        "arrival": 0,
        "prompt_tokens": prompt,
        "serial_tokens": list(serial),
        "ttft_slo": 1,
        "tpot_slo": 0.1,
    }


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _refused(capsys, argv, *needles):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_2_40_token_branch_is_refused_before_any_simulation(tmp_path, capsys):
    trace = _write(
        tmp_path / "huge.jsonl",
        [_request(), {"kind": "branch", "parent": "a", "fork": 0, "tokens": 2**40}],
    )
    started = time.perf_counter()
    _refused(
        capsys, ["simulate", "--trace", str(trace)], "record 2", "1099511627776 tokens",
        f"limit of {MAX_SEQUENCE_TOKENS}",
    )  # fmt: skip
    assert time.perf_counter() - started < 5


def test_a_prompt_or_segment_over_the_limit_is_refused(tmp_path, capsys):
    big = MAX_SEQUENCE_TOKENS + 1
    trace = _write(tmp_path / "p.jsonl", [_request(prompt=big, serial=(2,))])
    _refused(capsys, ["simulate", "--trace", str(trace)], "record 1", "'prompt_tokens'")
    trace = _write(tmp_path / "s.jsonl", [_request(serial=(big,))])
    _refused(capsys, ["simulate", "--trace", str(trace)], "'serial_tokens'", str(big))


def test_a_trace_over_the_total_limit_is_refused(tmp_path, capsys):
    n = MAX_TRACE_TOKENS // MAX_SEQUENCE_TOKENS + 1  # every prompt at the limit
    records = [_request(f"r{i}", prompt=MAX_SEQUENCE_TOKENS, serial=(1,)) for i in range(n)]
    trace = _write(tmp_path / "t.jsonl", records)
    _refused(capsys, ["simulate", "--trace", str(trace)], f"limit of {MAX_TRACE_TOKENS}")


def test_at_the_limits_a_trace_is_accepted(tmp_path):
    from pace_scheduler.workload import read_trace

    trace = _write(
        tmp_path / "ok.jsonl",
        [_request(prompt=MAX_SEQUENCE_TOKENS), {"kind": "branch", "parent": "a", "fork": 0,
                                                 "tokens": MAX_SEQUENCE_TOKENS}],
    )  # fmt: skip
    [req] = read_trace(trace)
    assert req.forks == ((MAX_SEQUENCE_TOKENS,),)


_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, f"{os.getpid()} demo\\n".encode(), 0)
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_run_into_a_locked_out_dir_is_refused_and_erases_nothing(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "--out", str(trace), "--requests", "6"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")  # the first run's (here: anything)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out / outdir.LOCK_NAME)], stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        capsys.readouterr()
        _refused(
            capsys, ["simulate", "--trace", str(trace), "--policy", "irp-off", "--out", str(out)],
            f"pid {holder.pid}", "another pace run",
        )  # fmt: skip
        assert (out / "results.json").read_text() == "{}"
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone (killed, not cleaned up): its lock died with it
    assert main(["simulate", "--trace", str(trace), "--policy", "irp-off", "--out", str(out)]) == 0
    assert load_results(out / "results.json").manifest.package == "pace-scheduler"
    outdir.release_out_dirs()
    assert not (out / outdir.LOCK_NAME).exists()


# The demo in a child process: the tiny plan with a simulated sweep long enough that SIGTERM
# lands while the pool's workers are busy.
_DEMO = """
import sys
from dataclasses import replace
sys.path[:0] = [sys.argv[2]]
from conftest import TINY_PLAN
from pace_scheduler import demo, profile
micro = profile.toy_model
profile.toy_model = lambda: micro("micro")
demo.plan = lambda quick: replace(
    TINY_PLAN, engine_requests=2, sim_requests=4000, sim_loads=(0.5, 1.0, 1.5),
)
from pace_scheduler.cli import main
raise SystemExit(main(["demo", "--workers", "2", "--seeds", "0-1", "--no-progress",
                       "--out", sys.argv[1]]))
"""


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_sigterm_to_a_demo_leaves_no_worker_behind(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", _DEMO, str(tmp_path / "out"), str(Path(__file__).parent)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        workers: set[int] = set()
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and child.poll() is None:
            workers = _children(child.pid)
            if len(workers) >= 2:  # the pool's two workers (and the resource tracker)
                break
            time.sleep(0.2)
        assert len(workers) >= 2, f"no pool started: {child.communicate()}"
        time.sleep(1.0)  # inside pool.imap
        workers |= _children(child.pid)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 143, err
        assert "terminated" in err
        assert "Traceback" not in err
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.2)
        assert not [p for p in workers if _alive(p)]
        assert not (tmp_path / "out" / "results.json").exists()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
