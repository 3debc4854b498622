"""The same workflow written in C (tests/python/same_history_worker.c) and in
Python (below) produces identical histories: activity calls (a failure
caught, a retry policy), a timer, an external event, a child, a select whose
loser is a cancelled activity, custom status and one continue-as-new. Each
runs on a store of its own with the same instance id, driven by the same
client code; then every execution of the instance and of its child is read
with `duro history --json` and compared event by event: kinds, names,
payloads and outputs as JSON values, ids, sources, attempts, cancel reasons.
Only times are left out, and the traceback of a Python failure (a file path
and line numbers; the C activity writes the failure's type and message as
the Python layer does). A C worker made to diverge is caught, naming the
first event that differs."""
import json
import os
import re
import selectors
import shutil
import subprocess
import time

import duro
import pytest

WORKER = os.environ.get("DURO_TEST_SAME_HISTORY_WORKER")
DURO_BIN = os.environ.get("DURO_TEST_DURO_BIN")
pytestmark = pytest.mark.skipif(
    not WORKER or not DURO_BIN,
    reason="DURO_TEST_SAME_HISTORY_WORKER and DURO_TEST_DURO_BIN are set by "
           "CTest (python_sqlite, python_postgres)")

ID = "same-1"
START_INPUT = {"round": 1, "amount": 42}

# ---------------------------------------------------------------------------
# the Python version (same_history_worker.c is the C one)

reg = duro.Registry()


@reg.activity("Fail")
def fail(ctx, order):
    raise ValueError("card declined")


@reg.activity("Flaky")
def flaky(ctx, x):
    if ctx.attempt < 3:
        raise RuntimeError(f"attempt {ctx.attempt}")
    return {"attempt": ctx.attempt, "input": x}


@reg.activity("Slow")
def slow(ctx, _):
    ctx.wait_cancelled(30)  # the select's loser: runs until cancelled
    return "slow"


@reg.activity("Double")
def double(ctx, n):
    return 2 * n


@reg.orchestration("SameChild")
async def same_child(ctx, inp):
    return {"doubled": await ctx.call_activity("Double", inp["n"])}


@reg.orchestration("SameWorkflow")
async def same_workflow(ctx, inp):
    if inp["round"] == 2:
        child = await ctx.call_sub_orchestration("SameChild", {"n": 21})
        ctx.set_custom_status({"stage": "done"})
        return {"round": 2, "carried": inp["carry"], "child": child,
                "guid": ctx.new_guid()}
    ctx.set_custom_status({"stage": "started"})
    try:
        await ctx.call_activity("Fail", {"amount": inp["amount"]})
        caught = None
    except duro.ActivityFailed as e:
        caught = [e.type, e.message, e.category]
    policy = duro.RetryPolicy(max_attempts=3, initial_delay=0.01,
                              backoff="fixed")
    flaky_out = await ctx.call_activity("Flaky", "x", retry=policy)
    await ctx.timer(0.01)
    ctx.set_custom_status({"stage": "waiting"})  # the driver raises now
    event = await ctx.wait_event("approve")
    loser = ctx.call_activity("Slow")
    quick = ctx.timer(0.01)
    winner = await ctx.any(loser, quick)
    ctx.continue_as_new({"round": 2, "carry": {
        "caught": caught, "flaky": flaky_out, "event": event,
        "timer_won": winner is quick}})


# ---------------------------------------------------------------------------
# driving and reading


def drive(url):
    """Starts the instance, raises its event once it waits for it (so the
    event's place in history does not depend on timing), waits for it."""
    client = duro.Client(url)
    client.start("SameWorkflow", ID, START_INPUT)
    deadline = time.monotonic() + 60
    while client.status(ID).custom_status != {"stage": "waiting"}:
        assert time.monotonic() < deadline, client.status(ID)
        time.sleep(0.01)
    client.raise_event(ID, "approve", {"by": "alice"})
    info = client.wait(ID, timeout=60)
    client.close()
    assert info.status == "Completed", info
    return info


def duro_json(url, *args):
    p = subprocess.run([DURO_BIN, "--db", url, *args, "--json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (args, p.returncode, p.stderr)
    return json.loads(p.stdout)


def is_time(key):
    return key in ("timestamp", "fire_at", "started", "finished") or \
        key.endswith(("_at", "_ms"))


def canonical(obj):
    """The comparable form of an event or a status: times left out (a
    timer's delay kept: fire_at - timestamp, both from duro's now), the
    traceback of a Python failure left out, payloads as JSON values; text
    with sorted keys, so true and 1 or 1 and 1.0 stay different."""
    out = {k: v for k, v in obj.items() if not is_time(k)}
    if obj.get("kind") == "TimerCreated":  # its delay is no time
        out["delay_ms"] = obj["fire_at_ms"] - obj["timestamp_ms"]
    if isinstance(out.get("error"), str):
        try:
            err = json.loads(out["error"])
        except ValueError:
            err = out["error"]
        if isinstance(err, dict):
            err.pop("traceback", None)
        out["error"] = err
    return json.dumps(out, sort_keys=True)


def histories(url, instance_id):
    """[(instance id, execution, [canonical event...], status)] of every
    execution of the instance and, depth first, of the children it
    scheduled."""
    status = duro_json(url, "status", instance_id)
    out = []
    for execution in range(1, status["execution_id"] + 1):
        doc = duro_json(url, "history", instance_id,
                        "--execution", str(execution))
        events = doc["events"]
        assert [e["event_id"] for e in events] == \
            list(range(1, len(events) + 1)), events
        out.append((instance_id, execution, events, canonical(status)))
        for e in events:
            if e["kind"] == "SubOrchestrationScheduled":
                out += histories(url, e["ref_instance"])
    return out


def differences(c_side, py_side):
    """The first difference between two histories() as a message, or
    None: events first, then the instances' statuses."""
    c_keys = [(i, x) for i, x, _, _ in c_side]
    py_keys = [(i, x) for i, x, _, _ in py_side]
    if c_keys != py_keys:
        return f"executions differ: C {c_keys}, Python {py_keys}"
    for (iid, ex, c_events, c_status), (_, _, py_events, py_status) in \
            zip(c_side, py_side):
        for n, (a, b) in enumerate(zip(c_events, py_events), 1):
            if canonical(a) != canonical(b):
                return (f"{iid} execution {ex} event {n}:\n  C:      "
                        f"{canonical(a)}\n  Python: {canonical(b)}")
        if len(c_events) != len(py_events):
            return (f"{iid} execution {ex}: C has {len(c_events)} events, "
                    f"Python {len(py_events)}")
    for (iid, _, _, c_status), (_, _, _, py_status) in zip(c_side, py_side):
        if c_status != py_status:
            return f"{iid} status:\n  C:      {c_status}\n  Python: {py_status}"
    return None


# ---------------------------------------------------------------------------
# stores


def _psql():
    bindir = os.environ.get("DURO_PG_BINDIR")
    if bindir and os.access(os.path.join(bindir, "psql"), os.X_OK):
        return os.path.join(bindir, "psql")
    return shutil.which("psql")


@pytest.fixture
def c_db(db, tmp_path):
    """A second store beside the test's db: a SQLite file, or the db's
    PostgreSQL schema with "_c" appended (dropped after)."""
    if db.startswith("sqlite:"):
        yield f"sqlite:{tmp_path}/c-side.db"
        return
    m = re.search(r"schema=([a-z0-9_]+)", db)
    assert m, db
    schema = m.group(1) + "_c"
    yield db.replace(m.group(0), f"schema={schema}")
    psql = _psql()
    if psql:  # best effort, as conftest's db
        base = re.sub(r"[?&]schema=[a-z0-9_]+", "", db)
        subprocess.run([psql, "-q", "-d", base, "-c",
                        f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       capture_output=True, timeout=60)


def read_line(proc, seconds):
    """proc's next stdout line within a deadline ('' at its end)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        assert sel.select(seconds), f"no line from {proc.args} in {seconds} s"
    finally:
        sel.close()
    return proc.stdout.readline()


def run_c(url, *extra):
    """Runs the C worker on url while drive() runs the workflow."""
    worker = subprocess.Popen([WORKER, url, *extra], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(worker, 30).strip() == "ready"
        info = drive(url)
    finally:
        worker.stdin.close()  # the worker shuts down at the end of stdin
        try:
            worker.wait(timeout=30)
        finally:
            if worker.returncode is None:
                worker.kill()
                worker.wait()
    assert worker.returncode == 0
    return info


def run_python(url):
    with duro.Runtime(url, reg):
        return drive(url)


# ---------------------------------------------------------------------------
# the tests


def test_c_and_python_histories_are_identical(db, c_db):
    c_info = run_c(c_db)
    py_info = run_python(db)
    c_side, py_side = histories(c_db, ID), histories(db, ID)
    assert differences(c_side, py_side) is None, differences(c_side, py_side)
    # ... and the histories hold what the workflow is meant to exercise
    assert [(i, x) for i, x, _, _ in py_side] == \
        [(ID, 1), (ID, 2), (f"{ID}:2:2", 1)]
    first = py_side[0][2]
    kinds = [e["kind"] for e in first]
    assert kinds.count("ActivityFailed") == 3  # Fail, Flaky twice
    assert [e.get("attempt") for e in first
            if e.get("name") == "Flaky"] == [1, 2, 3]
    assert {"TimerFired", "EventSubscribed", "EventRaised",
            "ContinuedAsNew"} <= set(kinds)
    assert [(e["reason"], first[e["source_event_id"] - 1]["name"])
            for e in first if e["kind"] == "ActivityCancelRequested"] == \
        [("select_loser", "Slow")]
    assert not any(e["kind"] == "ActivityCompleted" and
                   first[e["source_event_id"] - 1]["name"] == "Slow"
                   for e in first)
    for info in (c_info, py_info):
        assert info.execution_id == 2
        assert info.custom_status == {"stage": "done"}
        assert info.output["carried"] == {
            "caught": ["ValueError", "card declined", "application"],
            "flaky": {"attempt": 3, "input": "x"},
            "event": {"by": "alice"}, "timer_won": True}
        assert info.output["child"] == {"doubled": 42}
    assert c_info.output == py_info.output  # the same guid too


def test_a_divergent_side_is_caught(db, c_db):
    run_c(c_db, "diverge")  # the C child doubles 22, not 21
    run_python(db)
    said = differences(histories(c_db, ID), histories(db, ID))
    assert said is not None
    # the first difference in order: the child's output, in the parent
    assert said.startswith(f"{ID} execution 2 event 3:"), said
    assert '{"doubled": 44}' in said and '{"doubled": 42}' in said, said
