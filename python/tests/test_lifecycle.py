"""The driver's lifetimes: one step per input on a warm cache, each
coroutine released exactly once (on completion, on eviction, at shutdown),
nondeterminism named, and an interpreter exit with a live runtime."""
import gc
import os
import subprocess
import sys
import textwrap
import time
import weakref

import duro


def has_event(client, instance_id, kind):
    """Whether the instance's history holds an event of `kind` (a Pending
    instance has no execution yet: NotFound)."""
    try:
        return any(e["kind"] == kind for e in client.history(instance_id))
    except duro.NotFound:
        return False


def chain_registry(released):
    reg = duro.Registry()

    @reg.activity("Inc")
    def inc(ctx, x):
        return x + 1

    class Marker:
        pass

    @reg.orchestration("Chain")
    async def chain(ctx, n):
        marker = Marker()  # lives in the coroutine's frame
        weakref.finalize(marker, released.append, ctx.instance_id)
        x = 0
        for _ in range(n):
            x = await ctx.call_activity("Inc", x)
        return x

    return reg


def test_warm_cache_steps_once_per_input_and_releases_once(db):
    released = []
    reg = chain_registry(released)
    before = duro._debug_counters()
    with duro.Runtime(db, reg, orchestration_concurrency=1) as rt:
        client = duro.Client(db)
        client.start("Chain", "c1", 5)
        info = client.wait("c1", timeout=20)
        metrics = rt.metrics()
    after = duro._debug_counters()
    assert (info.status, info.output) == ("Completed", 5)
    delta = {k: after[k] - before[k] for k in ("starts", "steps", "destroys")}
    # the first step (OrchestrationStarted), then one per completion
    assert delta == {"starts": 1, "steps": 6, "destroys": 1}, delta
    assert metrics["replays"] == 0, metrics
    gc.collect()
    assert released == ["c1"]


def test_without_a_cache_each_turn_replays_and_releases(db):
    released = []
    reg = chain_registry(released)
    before = duro._debug_counters()
    with duro.Runtime(db, reg, cache_size=0):
        client = duro.Client(db)
        client.start("Chain", "c1", 3)
        info = client.wait("c1", timeout=20)
    after = duro._debug_counters()
    assert (info.status, info.output) == ("Completed", 3)
    delta = {k: after[k] - before[k] for k in after}
    # 4 turns, each a new coroutine replayed from history, each released
    assert delta["starts"] == 4 and delta["destroys"] == 4, delta
    assert delta["steps"] == 1 + 2 + 3 + 4, delta
    gc.collect()
    assert released == ["c1"] * 4


def test_duro_threads_keep_one_thread_state_each_and_delete_it(db):
    # Each duro thread that runs Python keeps one thread state for its life
    # (not one per step: a replay of 40 steps per turn would make hundreds),
    # and its exit deletes it: after shutdown has joined the threads, every
    # kept state is gone. Two runtimes in a row: the second's threads keep
    # states of their own.
    reg = chain_registry([])
    for round_ in range(2):
        before = duro._debug_counters()
        with duro.Runtime(db, reg, cache_size=0, orchestration_concurrency=2,
                          worker_concurrency=2):
            client = duro.Client(db)
            client.start("Chain", f"k{round_}", 8)
            info = client.wait(f"k{round_}", timeout=30)
        after = duro._debug_counters()
        assert (info.status, info.output) == ("Completed", 8)
        delta = {k: after[k] - before[k] for k in after}
        assert delta["steps"] == sum(range(1, 10)), delta  # 45 replayed steps
        # at most one per thread of this runtime (2 turn threads, 2 slots)
        assert 1 <= delta["tstates_kept"] <= 4, delta
        assert delta["tstates_deleted"] == delta["tstates_kept"], delta


def test_shutdown_releases_suspended_coroutines(db):
    released = []
    reg = duro.Registry()

    @reg.orchestration("Waits")
    async def waits(ctx, _):
        iid = ctx.instance_id  # ctx is refused while the coroutine closes
        try:
            await ctx.wait_event("never")
        finally:
            released.append(iid)

    before = duro._debug_counters()
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        for i in range(3):
            client.start("Waits", f"w{i}")
        deadline = time.monotonic() + 10
        while duro._debug_counters()["steps"] - before["steps"] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    after = duro._debug_counters()
    assert after["destroys"] - before["destroys"] == 3
    assert sorted(released) == ["w0", "w1", "w2"]
    assert client.status("w0").status == "Running"


def test_nondeterminism_names_both_sides(db):
    def registry(first):
        reg = duro.Registry()

        @reg.activity("A")
        def a(ctx, _):
            return "a"

        @reg.activity("B")
        def b(ctx, _):
            return "b"

        @reg.orchestration("O")
        async def o(ctx, _):
            await ctx.call_activity(first)
            await ctx.wait_event("go")

        return reg

    client = duro.Client(db)
    with duro.Runtime(db, registry("A")):
        client.start("O", "o1")
        deadline = time.monotonic() + 10
        while not has_event(client, "o1", "ActivityCompleted"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    # the code changed between runs: the new runtime replays history
    with duro.Runtime(db, registry("B")) as rt:
        client.raise_event("o1", "go")
        info = client.wait("o1", timeout=10)
        # counted after the turn's commit, which the wait may precede
        deadline = time.monotonic() + 10
        while rt.metrics()["nondeterminism_errors"] != 1:
            assert time.monotonic() < deadline, rt.metrics()
            time.sleep(0.01)
    assert info.status == "Failed"
    assert "'A'" in info.error and "'B'" in info.error, info.error


def test_exit_with_a_live_runtime_does_not_hang(db):
    script = textwrap.dedent(f"""
        import duro
        reg = duro.Registry()

        @reg.activity("Spin")
        def spin(ctx, _):
            import time
            while not ctx.cancelled:
                time.sleep(0.01)

        @reg.orchestration("O")
        async def o(ctx, _):
            ctx.call_activity("Spin")
            await ctx.wait_event("never")

        db = {db!r}
        rt = duro.Runtime(db, reg).start()
        c = duro.Client(db)
        c.start("O", "o1")
        import time
        deadline = time.monotonic() + 10
        while c.status("o1").status != "Running":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)
        print("exiting")
    """)
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-c", script], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "exiting"


def test_a_small_cache_evicts_and_resumes_and_releases_once(db):
    released = []
    reg = duro.Registry()

    @reg.orchestration("Steps")
    async def steps(ctx, n):
        iid = ctx.instance_id
        marker = type("Marker", (), {})()
        weakref.finalize(marker, released.append, iid)
        got = []
        for _ in range(n):
            got.append(await ctx.wait_event("e"))
        return got

    ids = [f"s{i}" for i in range(4)]
    before = duro._debug_counters()
    with duro.Runtime(db, reg, cache_size=1, orchestration_concurrency=2):
        client = duro.Client(db)
        for iid in ids:
            client.start("Steps", iid, 3)
        for k in range(3):
            for iid in ids:
                client.raise_event(iid, "e", k)
        infos = [client.wait(iid, timeout=20) for iid in ids]
    after = duro._debug_counters()
    assert all(i.status == "Completed" and i.output == [0, 1, 2]
               for i in infos), infos
    delta = {k: after[k] - before[k] for k in after}
    assert delta["starts"] == delta["destroys"] >= len(ids), delta
    gc.collect()
    assert sorted(released) == sorted(
        [iid for iid in ids for _ in range(released.count(iid))])
    assert len(released) == delta["starts"]


def test_a_cpu_bound_activity_keeps_its_lock(db):
    """Lock renewal runs on duro's C threads: a Python activity that keeps
    the interpreter busy for longer than its lock's timeout is neither
    delivered again nor cancelled."""
    reg = duro.Registry()

    @reg.activity("Busy")
    def busy(ctx, seconds):
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1  # pure Python: holds the GIL but for the switch interval
        return [ctx.delivery, ctx.cancelled]

    @reg.orchestration("O")
    async def o(ctx, _):
        return await ctx.call_activity("Busy", 3.0)

    with duro.Runtime(db, reg, worker_lock_timeout=1.0, lock_renewal=0.2):
        client = duro.Client(db)
        client.start("O", "o1")
        info = client.wait("o1", timeout=30)
    assert (info.status, info.output) == ("Completed", [1, False]), info


def test_an_activity_waits_for_its_cancellation_without_the_gil(db):
    reg = duro.Registry()
    seen = []

    started = []

    @reg.activity("Waits")
    def waits(ctx, _):
        started.append(True)
        seen.append([ctx.wait_cancelled(20), ctx.cancel_reason])

    @reg.orchestration("O")
    async def o(ctx, _):
        w = ctx.call_activity("Waits")
        await ctx.any(w, ctx.wait_event("stop"))
        return "event won"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        deadline = time.monotonic() + 20
        while not started:  # the activity runs: now make it lose
            assert time.monotonic() < deadline
            time.sleep(0.01)
        client.raise_event("o1", "stop")
        info = client.wait("o1", timeout=20)
        # the loser's activity saw its cancellation and returned
        while not seen:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert (info.status, info.output) == ("Completed", "event won")
    assert seen == [[True, "select_loser"]]
