"""Orchestration context additions of issue 24: detached starts
(ctx.start_orchestration), a wait on the first of several tasks that
cancels nothing (ctx.first), and the sub-orchestration options C offers
(instance id, version)."""
import threading

import duro
import pytest
from helpers import wait_for

K = duro.EventKind


def kinds(client, instance_id):
    try:
        return [e.kind for e in client.history(instance_id)]
    except duro.NotFound:
        return []


# --- detached starts ----------------------------------------------------------


def detached_registry():
    reg = duro.Registry()

    @reg.orchestration("Worker")
    async def worker(ctx, n):
        go = await ctx.wait_event("go")
        return {"n": n, "go": go}

    @reg.activity("Step")
    def step(ctx, x):
        return x + 1

    @reg.orchestration("Launcher")
    async def launcher(ctx, n):
        ctx.start_orchestration("Worker", n, instance_id="detached-1")
        # a second start with the same id is dropped, not an error
        ctx.start_orchestration("Worker", n + 100, instance_id="detached-1")
        ctx.start_orchestration("Worker", n + 1)  # duro's id
        # turns after the start replay it (cache_size=0): no second start
        a = await ctx.call_activity("Step", n)
        b = await ctx.call_activity("Step", a)
        return b

    return reg


def test_detached_start_outlives_its_parent(db):
    reg = detached_registry()
    with duro.Runtime(db, reg, cache_size=0):
        client = duro.Client(db)
        client.start("Launcher", "L", 5)
        info = client.wait("L", timeout=30)
        assert (info.status, info.output) == ("Completed", 7)
        # the parent is done; its detached children run on, untouched
        wait_for(lambda: client.status("detached-1").status == "Running",
                 "detached-1 Running")
        h = client.history("L")
        sched = [e for e in h if e.kind == K.SUB_ORCHESTRATION_SCHEDULED]
        assert [(e.name, e.ref_instance, e.payload, e.detached)
                for e in sched] == [
            ("Worker", "detached-1", 5, True),
            ("Worker", "detached-1", 105, True),
            ("Worker", "L:1:4", 6, True)]
        assert not any(k in (K.SUB_ORCHESTRATION_COMPLETED,
                             K.SUB_ORCHESTRATION_FAILED,
                             K.SUB_ORCHESTRATION_CANCEL_REQUESTED)
                       for k in kinds(client, "L"))
        wait_for(lambda: client.status("L:1:4").status == "Running",
                 "L:1:4 Running")
        other = client.status("L:1:4")
        # a detached child is not the parent's: no parent link
        assert client.status("detached-1").parent_instance is None
        assert other.parent_instance is None
        assert len(client.list(parent_instance="L")) == 0
        client.raise_event("detached-1", "go", "now")
        done = client.wait("detached-1", timeout=30)
        assert (done.status, done.output) == ("Completed",
                                              {"n": 5, "go": "now"})
        client.raise_event("L:1:4", "go", 1)
        assert client.wait("L:1:4", timeout=30).output == {"n": 6, "go": 1}
        # one instance each: the duplicate start was dropped
        assert len(client.list(name="Worker")) == 2
    # the code still replays against its history
    client.replay(reg, "L")


def test_detached_start_survives_a_terminated_parent(db):
    reg = duro.Registry()

    @reg.orchestration("Worker")
    async def worker(ctx, _):
        return await ctx.wait_event("go")

    @reg.orchestration("Parent")
    async def parent(ctx, _):
        ctx.start_orchestration("Worker", None, instance_id="free")
        child = ctx.call_sub_orchestration("Worker", None, instance_id="tied")
        return await child

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Parent", "p")
        for i in ("free", "tied"):
            wait_for(lambda: client.status(i).status == "Running",
                     f"{i} Running")
        client.terminate("p", "stop")
        assert client.wait("p", timeout=30).status == "Terminated"
        # the attached child is terminated with its parent, the detached
        # one is not
        assert client.wait("tied", timeout=30).status == "Terminated"
        assert client.status("free").status == "Running"
        client.raise_event("free", "go", "ok")
        assert client.wait("free", timeout=30).output == "ok"


def test_start_orchestration_refusals_are_duro_errors(db):
    reg = duro.Registry()

    @reg.orchestration("Bad")
    async def bad(ctx, _):
        try:
            ctx.start_orchestration("")
        except duro.InvalidArgument as e:
            return e.errname
        return "not reached"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Bad", "b")
        info = client.wait("b", timeout=30)
    assert (info.status, info.output) == ("Completed", "DURO_INVALID")


# --- ctx.first: the first done, nothing cancelled -----------------------------


def test_first_leaves_the_loser_running_to_completion(db):
    reg = duro.Registry()
    release = threading.Event()

    @reg.activity("Fast")
    def fast(ctx, _):
        return "fast"

    @reg.activity("Slow")
    def slow(ctx, _):
        # held until the test saw the orchestration take Fast as the winner
        assert release.wait(timeout=60), "never released"
        return "slow"

    @reg.orchestration("O")
    async def o(ctx, _):
        s = ctx.call_activity("Slow")
        f = ctx.call_activity("Fast")
        w = await ctx.first(s, f)
        ctx.set_custom_status({"winner": w.result(), "slow_done": s.done()})
        return [w is f, await s, f.result()]

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        wait_for(lambda: client.status("o1").custom_status is not None,
                 "the first() decision")
        assert client.status("o1").custom_status == {"winner": "fast",
                                                     "slow_done": False}
        release.set()
        info = client.wait("o1", timeout=30)
    assert (info.status, info.output) == ("Completed", [True, "slow", "fast"])
    h = client.history("o1")
    ks = [e.kind for e in h]
    assert K.ACTIVITY_CANCEL_REQUESTED not in ks
    completed = [e.payload for e in h if e.kind == K.ACTIVITY_COMPLETED]
    assert completed == ["fast", "slow"]


def test_first_keeps_an_event_wait_that_any_would_drop(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        ev = ctx.wait_event("late")
        t = ctx.timer(0)
        w = await ctx.first(ev, t)
        assert w is t and not ev.done()
        ctx.set_custom_status("timer first")
        return await ev  # still subscribed: receives the event

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        wait_for(lambda: client.status("o1").custom_status == "timer first",
                 "timer first")
        client.raise_event("o1", "late", {"x": 1})
        info = client.wait("o1", timeout=30)
    assert (info.status, info.output) == ("Completed", {"x": 1})
    assert K.EVENT_RAISED in kinds(client, "o1")


def test_first_of_no_tasks_fails_the_instance(db):
    reg = duro.Registry()

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.first()

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        info = client.wait("o1", timeout=30)
    assert info.status == "Failed"
    assert "ctx.first() of no tasks" in info.error
    with pytest.raises(TypeError):
        duro.Context(None).first("not a task")


# --- sub-orchestration options ------------------------------------------------


def test_sub_orchestration_id_and_version_are_honoured(db):
    reg = duro.Registry()

    @reg.orchestration("Kid")
    async def kid_default(ctx, n):
        return ["", n]

    @reg.orchestration("Kid", version="1")
    async def kid1(ctx, n):
        return ["1", n]

    @reg.orchestration("Kid", version="2")
    async def kid2(ctx, n):
        return ["2", n]

    @reg.orchestration("Parent")
    async def parent(ctx, _):
        pinned = await ctx.call_sub_orchestration("Kid", 1, instance_id="k1",
                                                  version="1")
        highest = await ctx.call_sub_orchestration("Kid", 2)
        default = await ctx.call_sub_orchestration("Kid", 3, version="",
                                                   instance_id="k3")
        try:
            await ctx.call_sub_orchestration("Kid", 4, instance_id="k1")
            dup = "not reached"
        except duro.SubOrchestrationFailed as e:
            dup = e.category
        return [pinned, highest, default, dup]

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Parent", "p")
        info = client.wait("p", timeout=30)
    assert (info.status, info.output) == (
        "Completed", [["1", 1], ["2", 2], ["", 3], "configuration"])
    sched = [(e.ref_instance, e.version) for e in client.history("p")
             if e.kind == K.SUB_ORCHESTRATION_SCHEDULED]
    assert sched == [("k1", "1"), ("p:1:4", None), ("k3", ""), ("k1", None)]
    for iid, version in (("k1", "1"), ("p:1:4", "2"), ("k3", "")):
        kid = client.status(iid)
        assert (kid.parent_instance, kid.version, kid.status) == (
            "p", version, "Completed")
    failed = [e for e in client.history("p")
              if e.kind == K.SUB_ORCHESTRATION_FAILED]
    assert len(failed) == 1 and "exists" in failed[0].error
