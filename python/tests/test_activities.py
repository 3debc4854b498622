"""Activities: `async def` activities (values, failures, real asyncio I/O),
their cancellation raised at the next await with duro's reason, worker
slots freed by a cancelled activity and by the grace period, and the
cancellation of plain `def` activities (flag, wait, token)."""
import asyncio
import select
import subprocess
import sys
import textwrap
import threading
import time

import duro
import pytest

WAIT = 60  # seconds: a deadline, never a duration a test relies on


def wait_for(predicate, what, seconds=WAIT):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def run(db, reg, start, **rt):
    """Starts one instance and waits for it; returns its InstanceInfo."""
    with duro.Runtime(db, reg, **rt):
        client = duro.Client(db)
        client.start(*start)
        return client.wait(start[1], timeout=WAIT)


def test_an_async_activity_returns_its_value(db):
    """Registered directly, and through a plain decorator that hides the
    coroutine function (a def returning a coroutine)."""
    reg = duro.Registry()

    def logged(fn):
        def wrapper(ctx, value):
            return fn(ctx, value)

        return wrapper

    async def double(ctx, order):
        await asyncio.sleep(0)
        return {
            "total": order["amount"] * 2,
            "attempt": ctx.attempt,
            "name": ctx.name,
            "instance": ctx.instance_id,
            "cancelled": ctx.cancelled,
            "reason": ctx.cancel_reason,
        }

    reg.activity("Double")(double)
    reg.activity("Wrapped")(logged(double))

    @reg.orchestration("O")
    async def o(ctx, order):
        return [
            await ctx.call_activity("Double", order),
            await ctx.call_activity("Wrapped", order),
        ]

    info = run(db, reg, ("O", "o1", {"amount": 21}))
    expected = {
        "total": 42,
        "attempt": 1,
        "instance": "o1",
        "cancelled": False,
        "reason": None,
    }
    assert (info.status, info.output) == (
        "Completed",
        [dict(expected, name="Double"), dict(expected, name="Wrapped")],
    )


def test_an_async_activity_failure_is_caught_with_its_type(db):
    reg = duro.Registry()

    @reg.activity("Charge")
    async def charge(ctx, order):
        await asyncio.sleep(0)
        raise ValueError(f"card declined for {order['amount']}")

    @reg.orchestration("O")
    async def o(ctx, order):
        try:
            await ctx.call_activity("Charge", order)
        except duro.ActivityFailed as e:
            return [e.type, e.message, e.category, "in charge" in (e.traceback or "")]
        return "not reached"

    info = run(db, reg, ("O", "o1", {"amount": 7}))
    assert (info.status, info.output) == (
        "Completed",
        ["ValueError", "card declined for 7", "application", True],
    )


def test_an_async_activity_does_real_asyncio_io(db):
    """asyncio.sleep, tasks and a TCP round trip on the activity's own
    loop."""
    reg = duro.Registry()

    @reg.activity("Echo")
    async def echo(ctx, text):
        async def handle(reader, writer):
            writer.write((await reader.readline()).upper())
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        start = time.monotonic()
        slept = asyncio.create_task(asyncio.sleep(0.1, "slept"))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(text.encode() + b"\n")
        await writer.drain()
        line = await reader.readline()
        writer.close()
        server.close()
        await server.wait_closed()
        return [line.decode().strip(), await slept, time.monotonic() - start >= 0.09]

    @reg.orchestration("O")
    async def o(ctx, text):
        return await ctx.call_activity("Echo", text)

    info = run(db, reg, ("O", "o1", "hello"))
    assert (info.status, info.output) == ("Completed", ["HELLO", "slept", True])


def test_a_select_loser_is_interrupted_at_its_await(db):
    """The losing async activity gets asyncio.CancelledError at its await
    with reason select_loser, its finally runs, and it frees the only
    worker slot long before the grace period (60 s) would."""
    reg = duro.Registry()
    started = threading.Event()
    seen = []

    @reg.activity("Loser")
    async def loser(ctx, _):
        started.set()
        try:
            await asyncio.sleep(WAIT * 10)
            seen.append("not interrupted")
        except asyncio.CancelledError as e:
            seen.append(["CancelledError", str(e), ctx.cancelled, ctx.cancel_reason])
            raise
        finally:
            seen.append("finally")

    @reg.activity("Next")
    async def next_(ctx, x):
        return x + 1

    @reg.orchestration("O")
    async def o(ctx, _):
        slow = ctx.call_activity("Loser")
        won = await ctx.any(slow, ctx.wait_event("stop"))
        return [won is slow, await ctx.call_activity("Next", 1)]

    with duro.Runtime(db, reg, worker_concurrency=1, cancel_grace=WAIT * 10):
        client = duro.Client(db)
        client.start("O", "o1")
        assert started.wait(WAIT)
        client.raise_event("o1", "stop")
        info = client.wait("o1", timeout=WAIT)
    assert (info.status, info.output) == ("Completed", [False, 2])
    assert seen == [["CancelledError", "select_loser", True, "select_loser"], "finally"]
    kinds = [(e["kind"], e["reason"]) for e in client.history("o1")]
    assert ("ActivityCancelRequested", "select_loser") in kinds


@pytest.mark.parametrize("watch", ["fd", "poll"])
def test_an_instance_cancel_interrupts_an_async_activity(db, watch, monkeypatch):
    """Through the cancel fd, and through the flag polled by the loop when
    no descriptor can be made."""
    if watch == "poll":

        def no_fd(self):
            raise duro.Error("no descriptor (test)")

        monkeypatch.setattr(duro.ActivityContext, "cancel_fd", no_fd)
    reg = duro.Registry()
    started = threading.Event()
    seen = []

    @reg.activity("Waits")
    async def waits(ctx, _):
        started.set()
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError as e:
            seen.append([str(e), ctx.cancel_reason])
            raise
        finally:
            seen.append("finally")

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.call_activity("Waits")

    with duro.Runtime(db, reg, cancel_grace=WAIT * 10):
        client = duro.Client(db)
        client.start("O", "o1")
        assert started.wait(WAIT)
        client.cancel("o1", "changed my mind")
        info = client.wait("o1", timeout=WAIT)
        wait_for(lambda: "finally" in seen, "the activity's finally")
    assert info.status == "Cancelled"
    assert seen == [["instance_cancelled", "instance_cancelled"], "finally"]


def test_an_async_activity_ignoring_its_cancel_loses_its_slot(db):
    """An activity that swallows CancelledError and blocks keeps its thread,
    but after the grace period its worker slot gets a new thread: with one
    slot, the next activity runs while the first still has not returned."""
    reg = duro.Registry()
    started, release, returned = (threading.Event() for _ in range(3))

    @reg.activity("Stubborn")
    async def stubborn(ctx, _):
        started.set()
        try:
            await asyncio.sleep(WAIT * 10)
        except asyncio.CancelledError:
            release.wait(WAIT)  # ignores it, blocking its loop
        returned.set()
        return "ignored"

    @reg.activity("Next")
    def next_(ctx, _):
        return returned.is_set()

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.any(ctx.call_activity("Stubborn"), ctx.wait_event("stop"))
        return await ctx.call_activity("Next")

    with duro.Runtime(db, reg, worker_concurrency=1, cancel_grace=0.2) as rt:
        client = duro.Client(db)
        client.start("O", "o1")
        assert started.wait(WAIT)
        client.raise_event("o1", "stop")
        info = client.wait("o1", timeout=WAIT)
        release.set()
        assert returned.wait(WAIT)
        metrics = rt.metrics()
    assert (info.status, info.output) == ("Completed", False)
    assert metrics["activities_abandoned"] == 1


def test_a_def_activity_polling_cancelled_sees_a_terminate(db):
    reg = duro.Registry()
    started = threading.Event()
    seen = []

    @reg.activity("Polls")
    def polls(ctx, _):
        before = [ctx.cancelled, ctx.cancel_reason, ctx.wait_cancelled(0)]
        started.set()
        deadline = time.monotonic() + WAIT
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.append(before + [ctx.cancelled, ctx.cancel_reason, ctx.wait_cancelled(0)])

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.call_activity("Polls")

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        assert started.wait(WAIT)
        client.terminate("o1", "enough")
        info = client.wait("o1", timeout=WAIT)
        wait_for(lambda: seen, "the activity to see its cancellation")
    assert info.status == "Terminated"
    assert seen == [[False, None, False, True, "instance_terminated", True]]


def test_a_def_activity_waits_with_a_timeout_and_hands_out_a_token(db):
    """wait_cancelled(timeout) returns False when the time passes and True
    on cancellation; a CancelToken given to a thread sees the same
    cancellation (flag, wait, fd) and outlives the activity."""
    reg = duro.Registry()
    started = threading.Event()
    seen = []
    thread_saw = []

    @reg.activity("Waits")
    def waits(ctx, _):
        token = ctx.cancel_token()

        def part():
            with token:
                fired = token.wait(WAIT)
                readable = select.select([token.fd()], [], [], WAIT)[0]
                thread_saw.append([fired, token.cancelled, bool(readable)])

        threading.Thread(target=part).start()
        timed_out = ctx.wait_cancelled(0.01)
        started.set()
        seen.append([timed_out, ctx.wait_cancelled(WAIT), ctx.cancel_reason])

    @reg.orchestration("O")
    async def o(ctx, _):
        await ctx.any(ctx.call_activity("Waits"), ctx.wait_event("stop"))
        return "event won"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("O", "o1")
        assert started.wait(WAIT)
        client.raise_event("o1", "stop")
        info = client.wait("o1", timeout=WAIT)
        wait_for(lambda: seen and thread_saw, "the activity and its thread")
    assert (info.status, info.output) == ("Completed", "event won")
    assert seen == [[False, True, "select_loser"]]
    assert thread_saw == [[True, True, True]]


def test_context_misuse_is_refused(db):
    """A blocking wait inside an async activity's loop is refused, and a
    context or token used after its end raises duro.Error."""
    reg = duro.Registry()
    kept = []

    @reg.activity("A")
    async def a(ctx, _):
        kept.append(ctx)
        token = ctx.cancel_token()
        token.release()
        errors = []
        try:
            ctx.wait_cancelled(1)
        except RuntimeError:
            errors.append("wait refused")
        try:
            token.cancelled
        except duro.Error:
            errors.append("token released")
        return errors + [ctx.wait_cancelled(0)]

    @reg.orchestration("O")
    async def o(ctx, _):
        return await ctx.call_activity("A")

    info = run(db, reg, ("O", "o1"))
    assert (info.status, info.output) == (
        "Completed",
        ["wait refused", "token released", False],
    )
    with pytest.raises(duro.Error):
        kept[0].cancelled


def test_an_async_activity_at_interpreter_exit_is_cancelled(db):
    """The atexit hook shuts the runtime down; past its 5 s deadline the
    running async activity gets CancelledError("shutdown"), its finally
    runs, and the process exits 0."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys, threading
        import duro
        reg = duro.Registry()
        started = threading.Event()

        @reg.activity("Waits")
        async def waits(ctx, _):
            started.set()
            try:
                await asyncio.sleep(600)
            except asyncio.CancelledError as e:
                print("cancelled", e, ctx.cancel_reason)
                raise
            finally:
                print("finally")
                sys.stdout.flush()

        @reg.orchestration("O")
        async def o(ctx, _):
            await ctx.call_activity("Waits")

        db = {db!r}
        rt = duro.Runtime(db, reg).start()
        duro.Client(db).start("O", "o1")
        assert started.wait({WAIT})
        print("exiting")
        sys.stdout.flush()
        """
    )
    p = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n") == [
        "exiting",
        "cancelled shutdown shutdown",
        "finally",
        "",
    ], p.stdout
