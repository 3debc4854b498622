"""Orchestrations as async def: activities, failures, timers, events,
select and join, children, continue-as-new, custom status, determinism
helpers, and what the driver refuses."""
import json
import time

import duro
import pytest


def run(db, reg, start, raise_events=(), timeout=20, **rt):
    """Starts one instance and waits for it; returns (info, client)."""
    with duro.Runtime(db, reg, **rt):
        client = duro.Client(db)
        client.start(*start)
        for ev in raise_events:
            client.raise_event(start[1], *ev)
        info = client.wait(start[1], timeout=timeout)
        return info, client


def wait_status(client, instance_id, status, seconds=10):
    deadline = time.monotonic() + seconds
    while client.status(instance_id).status != status:
        assert time.monotonic() < deadline, client.status(instance_id)
        time.sleep(0.01)


def test_activity_failure_is_caught_in_the_orchestration(db):
    reg = duro.Registry()

    @reg.activity("Charge")
    def charge(ctx, order):
        raise ValueError(f"card declined for {order['amount']}")

    @reg.orchestration("Order")
    async def order(ctx, order):
        try:
            await ctx.call_activity("Charge", order)
        except duro.ActivityFailed as e:
            return {"type": e.type, "message": e.message, "category": e.category,
                    "tb": "ValueError" in (e.traceback or "")}
        return "not reached"

    info, _ = run(db, reg, ("Order", "o1", {"amount": 7}))
    assert info.status == "Completed", info
    assert info.output == {"type": "ValueError", "message": "card declined for 7",
                           "category": "application", "tb": True}


def test_an_uncaught_failure_fails_the_instance_with_its_type(db):
    reg = duro.Registry()

    @reg.activity("Boom")
    def boom(ctx, _):
        raise KeyError("k")

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.call_activity("Boom")

    info, _ = run(db, reg, ("O", "o1"))
    assert info.status == "Failed"
    assert info.error_type == "ActivityFailed"
    assert "KeyError" in info.error


def test_retry_policy_retries_the_activity(db):
    reg = duro.Registry()

    @reg.activity("Flaky")
    def flaky(ctx, _):
        if ctx.attempt < 3:
            raise RuntimeError(f"attempt {ctx.attempt}")
        return ctx.attempt

    @reg.orchestration("O")
    async def o(ctx, _):
        policy = duro.RetryPolicy(max_attempts=3, initial_delay=0.01)
        return await ctx.call_activity("Flaky", None, retry=policy)

    info, _ = run(db, reg, ("O", "o1"))
    assert (info.status, info.output) == ("Completed", 3)


def test_select_cancels_the_loser_and_history_shows_it(db):
    reg = duro.Registry()

    @reg.activity("Slow")
    def slow(ctx, _):
        deadline = time.monotonic() + 20
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        return "slow"

    @reg.orchestration("O")
    async def o(ctx, _):
        act = ctx.call_activity("Slow")
        t = ctx.timer(0.05)
        w = await ctx.any(act, t)
        ev = ctx.wait_event("never")
        quick = ctx.timer(0)
        w2 = await ctx.any(ev, quick)
        with pytest.raises(duro.TaskCancelled):
            act.result()
        return [w is t, w2 is quick, act.done()]

    info, client = run(db, reg, ("O", "o1"))
    assert (info.status, info.output) == ("Completed", [True, True, True])
    kinds = [(e["kind"], e["reason"]) for e in client.history("o1")]
    assert ("ActivityCancelRequested", "select_loser") in kinds
    assert not any(k == "ActivityCompleted" for k, _ in kinds)


def test_all_returns_every_result_in_order(db):
    reg = duro.Registry()

    @reg.activity("Double")
    def double(ctx, x):
        return 2 * x

    @reg.orchestration("O")
    async def o(ctx, n):
        tasks = [ctx.call_activity("Double", i) for i in range(n)]
        return await ctx.all(*tasks)

    info, _ = run(db, reg, ("O", "o1", 5))
    assert info.output == [0, 2, 4, 6, 8]


def test_timer_event_now_guid_and_custom_status(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        before = ctx.now()
        guid = ctx.new_guid()
        ctx.set_custom_status({"stage": "waiting"})
        await ctx.timer(0.2)
        after = ctx.now()
        got = await ctx.wait_event("go")
        ctx.set_custom_status({"stage": "done"})
        return {"waited": (after - before).total_seconds() >= 0.2,
                "guid": len(guid), "event": got, "id": ctx.instance_id}

    info, _ = run(db, reg, ("O", "o1"), raise_events=[("go", {"x": 1})])
    assert info.status == "Completed", info
    assert info.output == {"waited": True, "guid": 36, "event": {"x": 1},
                           "id": "o1"}
    assert info.custom_status == {"stage": "done"}


def test_sub_orchestration_and_continue_as_new(db):
    reg = duro.Registry()

    @reg.orchestration("Child")
    async def child(ctx, x):
        if x == "bad":
            raise ValueError("bad child")
        return x + 1

    @reg.orchestration("Counter")
    async def counter(ctx, n):
        if n < 3:
            ctx.continue_as_new(n + 1)
        got = await ctx.call_sub_orchestration("Child", n)
        try:
            await ctx.call_sub_orchestration("Child", "bad")
        except duro.SubOrchestrationFailed as e:
            return [got, e.type]

    info, _ = run(db, reg, ("Counter", "c1", 0))
    assert info.status == "Completed", info
    assert info.output == [4, "ValueError"]
    assert info.execution_id == 4


def test_awaiting_something_else_fails_naming_it(db):
    reg = duro.Registry()

    class Foreign:
        def __await__(self):
            yield "a-foreign-future"

    @reg.orchestration("O")
    async def o(ctx, _):
        await Foreign()

    info, _ = run(db, reg, ("O", "o1"))
    assert info.status == "Failed"
    assert "'a-foreign-future'" in info.error
    assert "not a duro task" in info.error


def test_asyncio_sleep_fails_the_instance(db):
    import asyncio

    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        await asyncio.sleep(0)

    info, _ = run(db, reg, ("O", "o1"))
    assert info.status == "Failed"
    assert "awaited None, which is not a duro task" in info.error


def test_a_cancelled_instance(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.wait_event("never")

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        wait_status(client, "o1", "Running")
        client.cancel("o1", "changed my mind")
        info = client.wait("o1", timeout=10)
    assert info.status == "Cancelled"
    assert info.category == "cancelled"


def test_a_cancelled_instance_drops_its_pending_activity(db):
    # One worker slot, held by instance a's activity: instance b's activity
    # is queued, not started, when b is cancelled. The cancelling turn
    # deletes its row: it never runs, even once the slot is free, and b's
    # history says it was cancelled and why.
    import threading

    hold = threading.Event()
    ran = {"Hold": 0, "Pending": 0, "Marker": 0}
    reg = duro.Registry()

    def activity(name):
        def body(ctx, x):
            ran[name] += 1
            if name == "Hold":
                assert hold.wait(60), "never released"
            return x

        reg.activity(name)(body)

    for name in ran:
        activity(name)

    @reg.orchestration("Call")
    async def call(ctx, name):
        return await ctx.call_activity(name, name)

    with duro.Runtime(db, reg, worker_concurrency=1):
        client = duro.Client(db)
        client.start("Call", "a", "Hold")
        deadline = time.monotonic() + 30
        while ran["Hold"] == 0:
            assert time.monotonic() < deadline, "Hold never started"
            time.sleep(0.01)
        client.start("Call", "b", "Pending")
        def scheduled():
            try:
                return any(e.kind == "ActivityScheduled"
                           for e in client.history("b"))
            except duro.NotFound:  # no execution before the first turn
                return False

        deadline = time.monotonic() + 30
        while not scheduled():
            assert time.monotonic() < deadline, "b never scheduled"
            time.sleep(0.01)
        client.cancel("b", "changed my mind")
        try:
            assert client.wait("b", timeout=30).status == "Cancelled"
        finally:
            hold.set()
        assert client.wait("a", timeout=30).output == "Hold"
        # the slot is free again: a later activity runs, b's does not
        client.start("Call", "c", "Marker")
        assert client.wait("c", timeout=30).output == "Marker"
    assert ran == {"Hold": 1, "Pending": 0, "Marker": 1}, ran
    history = client.history("b")
    names = {e.event_id: e.name for e in history
             if e.kind == "ActivityScheduled"}
    cancels = [(names.get(e.source_event_id), e.reason) for e in history
               if e.kind == "ActivityCancelRequested"]
    assert cancels == [("Pending", "instance_cancelled")], history


def test_client_errors_carry_duro_codes(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.wait_event("never")

    client = duro.Client(db)
    client.start("O", "o1")
    with pytest.raises(duro.AlreadyExists) as e:
        client.start("O", "o1")
    assert e.value.code == 5 and e.value.errname == "DURO_ALREADY_EXISTS"
    assert isinstance(e.value, duro.Error)
    with pytest.raises(duro.NotFound):
        client.raise_event("nobody", "x")
    assert client.status("nobody").status == "NotFound"
    with pytest.raises(duro.Timeout):
        client.wait("o1", timeout=0.05)
    with pytest.raises(duro.Error) as e:
        duro.Client("nosuchscheme:x")
    assert e.value.errname == "DURO_BAD_URL"
    client.terminate("o1", "test")
    assert client.wait("o1", timeout=5).status == "Terminated"


def test_observed_cancel_runs_a_compensation(db):
    reg = duro.Registry()

    @reg.activity("Refund")
    def refund(ctx, what):
        return f"refunded {what}"

    @reg.orchestration("O", observe_cancel=True)
    async def o(ctx, order):
        try:
            await ctx.wait_event("shipped")
        except duro.TaskCancelled:
            assert ctx.cancel_requested
            ctx.log(f"cancelled: {ctx.cancel_reason}")
            await ctx.call_activity("Refund", [order, ctx.cancel_reason])
            return "compensated"
        return "shipped"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1", 42)
        wait_status(client, "o1", "Running")
        client.cancel("o1", "customer asked")
        info = client.wait("o1", timeout=10)
    assert info.status == "Cancelled"
    done = [json.loads(e["payload"]) for e in client.history("o1")
            if e["kind"] == "ActivityCompleted"]
    assert done == ["refunded [42, 'customer asked']"], done


def test_suspend_and_resume(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        return await ctx.wait_event("go")

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        wait_status(client, "o1", "Running")
        client.suspend("o1", "hold on")
        # applied by the instance's next turn
        wait_status(client, "o1", "Suspended")
        client.raise_event("o1", "go", "went")
        with pytest.raises(duro.Timeout):
            client.wait("o1", timeout=0.3)
        client.resume("o1")
        info = client.wait("o1", timeout=10)
    assert (info.status, info.output) == ("Completed", "went")


def test_random_is_the_same_on_replay(db):
    reg = duro.Registry()

    @reg.activity("Echo")
    def echo(ctx, x):
        return x

    @reg.orchestration("O")
    async def o(ctx, _):
        x = ctx.random().randint(0, 10**9)
        y = await ctx.call_activity("Echo", x)
        z = await ctx.call_activity("Echo", x)
        return [x, y, z]

    # no cache: every turn replays from history, drawing again
    info, _ = run(db, reg, ("O", "o1"), cache_size=0)
    assert info.status == "Completed", info
    assert info.output[0] == info.output[1] == info.output[2]


def test_the_store_less_replayer(db):
    def registry(name):
        reg = duro.Registry()

        @reg.activity(name)
        def act(ctx, x):
            return x

        @reg.orchestration("O")
        async def o(ctx, x):
            return await ctx.call_activity(name, x)

        return reg

    good = registry("A")
    info, client = run(db, good, ("O", "o1", 5))
    assert info.output == 5
    client.replay(good, "o1")  # the code still matches its history
    with pytest.raises(duro.Nondeterminism) as e:
        client.replay(registry("B"), "o1")
    assert "'A'" in str(e.value) and "'B'" in str(e.value), str(e.value)
    assert e.value.errname == "DURO_NONDETERMINISM"


def test_patched_keeps_recorded_runs_on_the_old_path(db):
    def registry(patched):
        reg = duro.Registry()

        @reg.activity("Old")
        def old(ctx, x):
            return "old"

        @reg.activity("New")
        def new(ctx, x):
            return "new"

        @reg.orchestration("O")
        async def o(ctx, x):
            if patched and ctx.patched("use-new"):
                return await ctx.call_activity("New", x)
            return await ctx.call_activity("Old", x)

        return reg

    info, client = run(db, registry(False), ("O", "p1", 1))
    assert info.output == "old"
    client.replay(registry(True), "p1")  # recorded before: the old path
    info, client = run(db, registry(True), ("O", "p2", 1))
    assert info.output == "new"
    kinds = [e.kind for e in client.history("p2")]
    assert duro.EventKind.PATCH_MARKER in kinds, kinds
    with pytest.raises(duro.Nondeterminism) as e:
        client.replay(registry(False), "p2")
    assert "PatchMarker 'use-new'" in str(e.value), str(e.value)


def test_exported_histories_replay_without_a_store(db, tmp_path):
    def registry(second):
        reg = duro.Registry()

        @reg.activity(second)
        def act(ctx, x):
            return x

        @reg.orchestration("O")
        async def o(ctx, x):
            return await ctx.call_activity(second, x)

        return reg

    info, client = run(db, registry("A"), ("O", "x1", 7))
    doc = client.export_history("x1")
    assert json.loads(doc)["executions"][0]["events"][0]["kind"] == "OrchestrationStarted"
    duro.replay_json(registry("A"), doc)
    path = tmp_path / "x1.json"
    path.write_text(doc, encoding="utf-8")
    duro.replay_file(registry("A"), str(path))
    with pytest.raises(duro.Nondeterminism) as e:
        duro.replay_file(registry("B"), str(path))
    assert "execution 1 of 'x1'" in str(e.value) and "'B'" in str(e.value)
    with pytest.raises(duro.InvalidArgument):
        duro.replay_json(registry("A"), "{}")
