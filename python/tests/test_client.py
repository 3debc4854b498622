"""The client of issue 24: cancel / terminate / suspend / resume of one id,
many ids and by filter (with dry runs), list with paging and counts, purge,
delayed and versioned starts, typed history - each held to what the C
client reports."""
import datetime as dt
import time

import duro
import pytest

from duro import _duro
from helpers import kinds, wait_for


def waiter_registry():
    """'Waiter' waits for event 'go' and returns its payload; 'Quick'
    returns at once."""
    reg = duro.Registry()

    @reg.orchestration("Waiter")
    async def waiter(ctx, n):
        return await ctx.wait_event("go")

    @reg.orchestration("Quick")
    async def quick(ctx, n):
        return n

    return reg


def start_running(client, ids, name="Waiter"):
    for i in ids:
        client.start(name, i, i)
    for i in ids:
        wait_for(lambda: client.status(i).status == "Running", f"{i} Running")


def statuses(client, ids):
    return {i: client.status(i).status for i in ids}


# --- cancel -------------------------------------------------------------


def test_cancel_many_reports_one_outcome_per_id(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        start_running(client, ["w1", "w2"])
        client.start("Quick", "q1", 1)
        client.wait("q1", timeout=30)
        res = client.cancel(["w1", "nope", "w2", "w1", "q1"], "bulk", "ops")
        assert isinstance(res, duro.ManyResult)
        assert [(o.instance_id, o.outcome, o.status) for o in res] == [
            ("w1", "requested", "Running"),
            ("nope", "not_found", "NotFound"),
            ("w2", "requested", "Running"),
            ("w1", "duplicate", "Running"),
            ("q1", "not_cancellable", "Completed"),
        ]
        for i in ("w1", "w2"):
            info = client.wait(i, timeout=30)
            assert (info.status, info.cancel_reason, info.cancelled_by) == (
                "Cancelled", "bulk", "ops")
        # again: what was cancelled reports already_cancelled
        again = client.cancel(["w1", "w2"])
        assert [o.outcome for o in again] == ["already_cancelled"] * 2
        assert again.outcome("w2") == "already_cancelled"


def test_cancel_many_of_instances_not_begun_decides_them_at_once(db):
    client = duro.Client(db)  # no runtime: nothing begins
    for i in ("p1", "p2"):
        client.start("Waiter", i)
    res = client.cancel(["p1", "p2"], "early")
    assert [(o.outcome, o.status) for o in res] == [
        ("cancelled", "Pending"), ("cancelled", "Pending")]
    assert statuses(client, ["p1", "p2"]) == {"p1": "Cancelled",
                                              "p2": "Cancelled"}


def test_cancel_by_filter_dry_run_changes_nothing_then_the_real_run(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        ids = [f"w{i}" for i in range(5)]
        start_running(client, ids)
        client.start("Quick", "q1", 1)
        client.wait("q1", timeout=30)
        where = duro.Filter(name="Waiter")
        dry = client.cancel(where=where, dry_run=True, reason="r")
        assert (dry.count, dry.ids, dry.applied, dry.dry_run) == (
            5, tuple(ids), 0, True)
        assert statuses(client, ids) == {i: "Running" for i in ids}
        for i in ids:
            info = client.status(i)
            assert info.cancel_requested_ms == 0 and info.cancel_reason is None
            assert duro.EventKind.ORCHESTRATION_CANCEL_REQUESTED not in kinds(
                client, i)
        real = client.cancel(where=where, reason="r", max_ids=2)
        assert (real.count, real.ids, real.dry_run) == (
            5, tuple(ids[:2]), False)
        for i in ids:
            assert client.wait(i, timeout=30).status == "Cancelled"
        assert client.status("q1").status == "Completed"
        # nothing left to select
        assert client.cancel(where=where).count == 0


def test_bulk_refusals_are_duro_errors(db):
    client = duro.Client(db)
    client.start("Waiter", "w1")
    # cancel_matching takes no finished_before: DURO_INVALID
    with pytest.raises(duro.InvalidArgument) as e:
        client.cancel(where=duro.Filter(finished_before=time.time()))
    assert e.value.code == _duro.DURO_INVALID
    assert e.value.errname == "DURO_INVALID"
    with pytest.raises(duro.InvalidArgument):
        client.cancel(where=duro.Filter(status="Completed"))
    with pytest.raises(ValueError):
        client.cancel(["w1"], dry_run=True)
    with pytest.raises(ValueError):
        duro.Filter(status="Nonsense")._native()
    with pytest.raises(duro.NotFound):
        client.cancel("nope")
    assert client.status("w1").status == "Pending"


# --- terminate, suspend, resume ---------------------------------------------


def test_suspend_resume_terminate_many(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        ids = ["a", "b", "c"]
        start_running(client, ids)
        res = client.suspend(ids + ["nope"], "hold", "ops")
        assert [(o.outcome, o.status) for o in res] == [
            ("requested", "Running")] * 3 + [("not_found", "NotFound")]
        for i in ids:
            wait_for(lambda: client.status(i).status == "Suspended",
                     f"{i} Suspended")
            ev = [e for e in client.history(i)
                  if e.kind == duro.EventKind.EXECUTION_SUSPENDED]
            assert [(e.reason, e.requested_by) for e in ev] == [
                ("hold", "ops")]
        res = client.resume(["a", "b"])
        assert [o.outcome for o in res] == ["requested"] * 2
        for i in ("a", "b"):
            wait_for(lambda: client.status(i).status == "Running",
                     f"{i} Running")
        assert client.status("c").status == "Suspended"
        res = client.terminate(["a", "c", "a"], "stop")
        assert [(o.outcome, o.status) for o in res] == [
            ("requested", "Running"), ("requested", "Suspended"),
            ("duplicate", "Running")]
        for i in ("a", "c"):
            assert client.wait(i, timeout=30).status == "Terminated"
        assert client.terminate(["a"]).outcome("a") == "finished"
        client.raise_event("b", "go", "done")
        info = client.wait("b", timeout=30)
        assert (info.status, info.output) == ("Completed", "done")


def test_suspend_resume_terminate_by_filter_with_dry_runs(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        ids = [f"x{i}" for i in range(4)]
        start_running(client, ids)
        where = duro.Filter(name="Waiter")
        dry = client.suspend(where=where, dry_run=True)
        assert (dry.count, dry.ids, dry.dry_run) == (4, tuple(ids), True)
        assert statuses(client, ids) == {i: "Running" for i in ids}
        assert all(duro.EventKind.EXECUTION_SUSPENDED not in kinds(client, i)
                   for i in ids)
        assert client.suspend(where=where).count == 4
        for i in ids:
            wait_for(lambda: client.status(i).status == "Suspended",
                     f"{i} Suspended")
        # resume selects Suspended only; a dry run changes nothing
        dry = client.resume(where=duro.Filter(name="Waiter"), dry_run=True)
        assert dry.count == 4
        assert statuses(client, ids) == {i: "Suspended" for i in ids}
        # a created range: only instances created from now on
        late = time.time() + 3600
        assert client.resume(where=duro.Filter(created_after=late)).count == 0
        assert client.resume(where=where).count == 4
        for i in ids:
            wait_for(lambda: client.status(i).status == "Running",
                     f"{i} Running")
        dry = client.terminate(where=where, dry_run=True)
        assert dry.count == 4
        assert statuses(client, ids) == {i: "Running" for i in ids}
        real = client.terminate(where=where, reason="bye")
        assert (real.count, real.dry_run) == (4, False)
        for i in ids:
            info = client.wait(i, timeout=30)
            assert info.status == "Terminated"
            ev = client.history(i)[-1]
            assert (ev.kind, ev.reason) == (
                duro.EventKind.ORCHESTRATION_TERMINATED, "bye")


def test_one_id_verbs_keep_their_c_errors(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Quick", "q1", 1)
        client.wait("q1", timeout=30)
        for verb in (client.cancel, client.terminate, client.suspend,
                     client.resume):
            with pytest.raises(duro.InvalidState) as e:
                verb("q1")
            assert e.value.errname == "DURO_INVALID_STATE"
        start_running(client, ["w"])
        assert client.resume("w") is None  # not suspended: DURO_OK
        assert client.status("w").status == "Running"
        assert duro.EventKind.EXECUTION_RESUMED not in kinds(client, "w")


# --- list ---------------------------------------------------------------------


def test_list_pages_cover_every_instance_exactly_once(db):
    client = duro.Client(db)
    ids = [f"inst-{i:02}" for i in range(23)]
    for i in ids:
        client.start("Alpha" if i < "inst-10" else "Beta", i, None)
    seen, pages, cursor = [], 0, None
    while True:
        page = client.list(limit=5, cursor=cursor, count_total=True)
        assert page.total == 23 and not page.total_capped
        assert len(page) <= 5
        seen += [info.instance_id for info in page]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids  # id order, each once
    assert pages == 5
    assert [i.instance_id for i in client.list_all(limit=7)] == ids
    first = client.list(limit=1)
    info = first.items[0]
    assert isinstance(info, duro.InstanceInfo)
    assert (info.instance_id, info.name, info.status) == ("inst-00", "Alpha",
                                                          "Pending")
    assert info.created_ms > 0 and info.finished_ms == 0
    assert first.total is None
    # filters: name, prefix, substring, status
    assert len(client.list(name="Beta", limit=100)) == 13
    assert len(client.list(name_prefix="Al", limit=100)) == 10
    assert len(client.list(name_contains="et", limit=100)) == 13
    assert len(client.list(status="Running")) == 0
    assert len(client.list(status=["pending", "Running"])) == 23
    # a capped count
    capped = client.list(limit=2, count_total=True, count_max=10)
    assert (capped.total, capped.total_capped) == (10, True)
    # newest first
    newest = [i.instance_id for i in client.list_all(order="created_desc")]
    assert sorted(newest) == ids and len(newest) == 23
    created = [i.created_ms for i in client.list_all(order="created_desc")]
    assert created == sorted(created, reverse=True)
    with pytest.raises(duro.InvalidArgument):
        client.list(cursor="not-a-cursor")
    with pytest.raises(duro.InvalidArgument):
        client.list(limit=1001)


def test_list_by_parent_and_created_range(db):
    reg = duro.Registry()

    @reg.orchestration("Kid")
    async def kid(ctx, n):
        return n

    @reg.orchestration("Parent")
    async def parent(ctx, _):
        return await ctx.all(*(ctx.call_sub_orchestration("Kid", i)
                               for i in range(3)))

    client = duro.Client(db)
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    with duro.Runtime(db, reg):
        client.start("Parent", "p")
        assert client.wait("p", timeout=30).output == [0, 1, 2]
    kids = client.list(parent_instance="p")
    assert [k.instance_id for k in kids] == ["p:1:2", "p:1:3", "p:1:4"]
    assert all(k.parent_instance == "p" and k.status == "Completed"
               for k in kids)
    assert len(client.list(created_after=before)) == 4
    assert len(client.list(created_before=before)) == 0


# --- purge --------------------------------------------------------------------


def test_purge_removes_ended_instances_and_refuses_live_ones(db):
    reg = waiter_registry()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        for i in ("q1", "q2", "q3"):
            client.start("Quick", i, 1)
            client.wait(i, timeout=30)
        start_running(client, ["live"])
        later = time.time() + 60
        # live statuses are refused, nothing changes
        with pytest.raises(duro.InvalidArgument) as e:
            client.purge(where=duro.Filter(status="Running",
                                           finished_before=later))
        assert e.value.errname == "DURO_INVALID"
        with pytest.raises(duro.InvalidArgument):
            client.purge(where=duro.Filter())  # finished_before required
        # one live id: DURO_INVALID_STATE, as duro_client_delete
        with pytest.raises(duro.InvalidState):
            client.purge("live")
        dry = client.purge(where=duro.Filter(finished_before=later),
                           dry_run=True)
        assert (dry.count, dry.ids, dry.dry_run) == (3, ("q1", "q2", "q3"),
                                                     True)
        assert statuses(client, ["q1", "q2", "q3"]) == {
            i: "Completed" for i in ("q1", "q2", "q3")}
        assert client.purge("q1").count == 1
        assert client.status("q1").status == "NotFound"
        with pytest.raises(duro.NotFound):
            client.purge("q1")
        res = client.purge(where=duro.Filter(name="Quick",
                                             finished_before=later))
        assert (res.count, res.ids) == (2, ("q2", "q3"))
        assert statuses(client, ["q2", "q3", "live"]) == {
            "q2": "NotFound", "q3": "NotFound", "live": "Running"}
        # many ids: the first error carries what went before it
        client.start("Quick", "q4", 1)
        client.wait("q4", timeout=30)
        with pytest.raises(duro.InvalidState) as e:
            client.purge(["q4", "live"])
        assert e.value.result.ids == ("q4",)
        assert client.status("q4").status == "NotFound"
        assert client.status("live").status == "Running"


def test_purge_takes_children_and_counts_them(db):
    reg = duro.Registry()

    @reg.orchestration("Kid")
    async def kid(ctx, n):
        return n

    @reg.orchestration("Parent")
    async def parent(ctx, _):
        return await ctx.call_sub_orchestration("Kid", 1, instance_id="kid")

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Parent", "p")
        client.wait("p", timeout=30)
    res = client.purge(["p"])
    assert (res.count, res.ids) == (2, ("p",))
    assert client.status("kid").status == "NotFound"


# --- start with delay and version ---------------------------------------------


def test_start_with_delay_and_version(db):
    reg = duro.Registry()

    @reg.orchestration("V", version="1")
    async def v1(ctx, _):
        return "v1"

    @reg.orchestration("V", version="2")
    async def v2(ctx, _):
        return "v2"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("V", "latest")
        client.start("V", "pinned", version="1")
        client.start("V", "later", delay=2.0)
        assert client.status("later").status == "Pending"
        assert client.wait("latest", timeout=30).output == "v2"
        assert client.wait("pinned", timeout=30).output == "v1"
        info = client.wait("later", timeout=30)
        assert info.output == "v2"
        started = client.history("later")[0]
        assert started.kind == duro.EventKind.ORCHESTRATION_STARTED
        assert started.timestamp_ms - info.created_ms >= 2000
        with pytest.raises(duro.AlreadyExists):
            client.start("V", "pinned")
        assert client.start("V", "pinned", idempotent=True) == "pinned"


# --- deadlines ------------------------------------------------------------------


def test_a_deadline_fails_the_instance_with_category_timeout(db):
    import datetime

    reg = duro.Registry()

    @reg.orchestration("Sleepy")
    async def sleepy(ctx, _):
        await ctx.timer(3600)
        return "woke"

    @reg.orchestration("Bounded", timeout=0.3)
    async def bounded(ctx, _):
        await ctx.timer(3600)
        return "woke"

    client = duro.Client(db)
    with pytest.raises(duro.InvalidArgument):
        client.start("Sleepy", "bad", timeout=-1.0)
    with pytest.raises(duro.InvalidArgument):
        client.start("Sleepy", "bad", timeout=1.0,
                     deadline=datetime.datetime.now(datetime.timezone.utc))
    with pytest.raises(ValueError):
        client.start("Sleepy", "bad", deadline=datetime.datetime.now())
    assert client.status("bad").status == "NotFound"
    with duro.Runtime(db, reg):
        client.start("Sleepy", "s", timeout=0.4)
        client.start("Bounded", "b")
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        client.start("Sleepy", "later", deadline=at)
        assert client.status("s").deadline is not None
        assert abs(client.status("later").deadline_ms - at.timestamp() * 1000) < 2
        for i in ("s", "b"):
            info = client.wait(i, timeout=30)
            assert (info.status, info.category) == ("Failed", "timeout")
            assert info.error.startswith("deadline of ") and info.error.endswith("Z passed")
            assert info.deadline_ms > 0
        assert client.status("later").status == "Running"


# --- typed history ------------------------------------------------------------


def test_event_kinds_are_duros_names():
    names = [_duro.event_kind_name(k)
             for k in range(1, _duro.DURO_EVENT_KIND_MAX + 1)]
    assert [k.value for k in duro.EventKind] == names


def test_typed_history_of_activity_timer_event_and_child(db):
    reg = duro.Registry()

    @reg.activity("Charge")
    def charge(ctx, order):
        return {"charged": order["amount"]}

    @reg.orchestration("Kid", version="3")
    async def kid(ctx, n):
        return n * 2

    @reg.orchestration("Flow")
    async def flow(ctx, order):
        charged = await ctx.call_activity("Charge", order)
        await ctx.timer(0.01)
        who = await ctx.wait_event("approval")
        doubled = await ctx.call_sub_orchestration("Kid", 21,
                                                   instance_id="kid-1")
        return {"charged": charged, "who": who, "kid": doubled}

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Flow", "f1", {"amount": 5})
        wait_for(lambda: duro.EventKind.EVENT_SUBSCRIBED in kinds(client, "f1"),
                 "EventSubscribed")
        client.raise_event("f1", "approval", {"by": "alice"})
        info = client.wait("f1", timeout=30)
    assert info.output == {"charged": {"charged": 5}, "who": {"by": "alice"},
                           "kid": 42}
    h = client.history("f1")
    K = duro.EventKind
    assert [e.kind for e in h] == [
        K.ORCHESTRATION_STARTED, K.ACTIVITY_SCHEDULED, K.ACTIVITY_COMPLETED,
        K.TIMER_CREATED, K.TIMER_FIRED, K.EVENT_SUBSCRIBED, K.EVENT_RAISED,
        K.SUB_ORCHESTRATION_SCHEDULED, K.SUB_ORCHESTRATION_COMPLETED,
        K.ORCHESTRATION_COMPLETED]
    assert all(isinstance(e, duro.HistoryEvent) for e in h)
    assert [e.event_id for e in h] == list(range(1, 11))
    started, sched, done, tc, tf, sub, raised, child, child_done, end = h
    assert (started.name, started.payload) == ("Flow", {"amount": 5})
    assert (sched.name, sched.payload, sched.attempt) == (
        "Charge", {"amount": 5}, 1)
    assert (done.source_event_id, done.payload) == (2, {"charged": 5})
    assert done.started_ms > 0 and done.finished_ms >= done.started_ms
    assert tc.fire_at_ms > 0 and tf.source_event_id == 4
    assert tf.fire_at_ms == tc.fire_at_ms
    assert (sub.name, raised.name, raised.payload) == (
        "approval", "approval", {"by": "alice"})
    assert (child.name, child.version, child.ref_instance, child.payload,
            child.detached) == ("Kid", None, "kid-1", 21, False)
    assert (child_done.source_event_id, child_done.payload) == (8, 42)
    assert end.payload == info.output
    assert end.category == "none" and end.error is None
    assert all(e.timestamp_ms > 0 for e in h)
    assert h[0].timestamp.tzinfo is not None
    # the child's OrchestrationStarted links back to its parent
    kid_started = client.history("kid-1")[0]
    assert (kid_started.ref_instance, kid_started.ref_execution,
            kid_started.ref_event_id) == ("f1", 1, 8)
    assert kid_started.version == "3"
    # the dict keys older code reads still work
    assert (h[2]["kind"], h[2]["source_event_id"], h[2]["payload"]) == (
        "ActivityCompleted", 2, '{"charged": 5}')
    with pytest.raises(KeyError):
        h[0]["ref_instance"]


def test_typed_history_of_failures_and_control_requests(db):
    reg = duro.Registry()

    @reg.activity("Boom")
    def boom(ctx, _):
        raise KeyError("k")

    @reg.orchestration("Fails")
    async def fails(ctx, _):
        try:
            await ctx.call_activity("Boom")
        except duro.ActivityFailed:
            pass
        return await ctx.wait_event("never")

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Fails", "f")
        wait_for(lambda: duro.EventKind.EVENT_SUBSCRIBED in kinds(client, "f"),
                 "EventSubscribed")
        client.suspend("f", "pause", "alice")
        wait_for(lambda: client.status("f").status == "Suspended", "Suspended")
        client.resume("f", "go on", "bob")
        wait_for(lambda: client.status("f").status == "Running", "Running")
        client.cancel("f", "enough", "carol")
        assert client.wait("f", timeout=30).status == "Cancelled"
    h = client.history("f")
    failed = next(e for e in h if e.kind == duro.EventKind.ACTIVITY_FAILED)
    assert (failed.error_type, failed.error, failed.category) == (
        "KeyError", "'k'", "application")
    assert "KeyError" in failed.traceback
    control = [(e.kind.value, e.reason, e.requested_by) for e in h
               if e.requested_by]
    assert control == [
        ("ExecutionSuspended", "pause", "alice"),
        ("ExecutionResumed", "go on", "bob"),
        ("OrchestrationCancelRequested", "enough", "carol"),
    ]
    assert h[-1].kind == duro.EventKind.ORCHESTRATION_CANCELLED
    info = client.status("f")
    assert (info.cancel_reason, info.cancelled_by) == ("enough", "carol")
    assert info.cancel_requested_ms > 0 and info.finished_ms > 0
    assert info.finished is not None and info.history_count == len(h)


def test_rewind_and_reset(db):
    """A Failed instance rewound once its activity is fixed completes in
    execution 2, the failure kept in execution 1; resets refused with
    duro's errors."""
    fixed = {"on": False}
    reg = duro.Registry()

    @reg.activity("Flaky")
    def flaky(ctx, x):
        if not fixed["on"]:
            raise RuntimeError("flaky is broken")
        return x + 1

    @reg.orchestration("Job")
    async def job(ctx, x):
        return await ctx.call_activity("Flaky", x)

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Job", "j1", 1)
        assert client.wait("j1", timeout=20).status == "Failed"
        r = client.rewind("j1", dry_run=True)
        assert r == duro.ResetResult("Failed", 1, 2, 2, 1, 0, 0, True), r
        assert client.status("j1").status == "Failed"
        fixed["on"] = True
        r = client.rewind("j1", reason="fixed", requested_by="py")
        assert (r.execution_id, r.activities, r.dry_run) == (2, 1, False)
        info = client.wait("j1", timeout=20)
        assert (info.status, info.output) == ("Completed", 2)
        assert duro.EventKind.EXECUTION_RESET in kinds(client, "j1")
        reset = [e for e in client.history("j1") if e.kind == "ExecutionReset"][0]
        assert (reset.reason, reset.requested_by) == ("fixed", "py")
        with pytest.raises(duro.InvalidState):
            client.rewind("j1")  # Completed now
        with pytest.raises(duro.InvalidArgument, match="inside a turn"):
            client.reset("j1", 1)
        with pytest.raises(duro.NotFound):
            client.reset("j1", 99)
        with pytest.raises(duro.InvalidState, match="current execution is 2"):
            client.reset("j1", 2, execution=1)
        with pytest.raises(ValueError):
            client.reset("j1", 0)
        # back to the start of execution 2: Flaky runs again
        r = client.reset("j1", 3, execution=2)
        assert r.execution_id == 3
        assert client.wait("j1", timeout=20).output == 2
        # deadlines: a new one, then one that has passed is refused
        # unless dropped
        soon = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        r = client.reset("j1", 3, execution=3, deadline=soon)
        assert client.status("j1").deadline_ms == int(soon.timestamp() * 1000)
        assert client.wait("j1", timeout=20).status == "Completed"
        with pytest.raises(duro.InvalidArgument, match="already passed"):
            client.rewind("j1", deadline=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
        with pytest.raises(ValueError):
            client.reset("j1", 3, deadline=soon, no_deadline=True)
        r = client.reset("j1", 3, no_deadline=True)
        assert r.execution_id == 5
        assert client.status("j1").deadline_ms == 0
        assert client.wait("j1", timeout=20).status == "Completed"
