"""duro.TestEnv: a 30-day timer, a week's delayed start and hours of retry
backoff complete in real milliseconds because its wait skips virtual time;
advance by hand; mocked activities; bad input. Each test opens its own
environment on a temporary store (one at a time per process); with
DURO_PY_STORE=postgres one test runs it on the test server's store."""
import time

import duro
import pytest

DAY = 24 * 3600.0


def registry():
    reg = duro.Registry()

    @reg.orchestration("Month")
    async def month(ctx, _):
        began = ctx.now_ms()
        await ctx.timer(30 * DAY)
        return ctx.now_ms() - began

    @reg.orchestration("Echo")
    async def echo(ctx, x):
        return x

    @reg.activity("Charge")
    def charge(ctx, _):
        return "real"

    @reg.orchestration("Call")
    async def call(ctx, name):
        return await ctx.call_activity(name)

    @reg.activity("Flaky")
    def flaky(ctx, _):
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return "third time"

    @reg.orchestration("RetryHours")
    async def retry_hours(ctx, _):
        policy = duro.RetryPolicy(max_attempts=3, initial_delay=2 * 3600,
                                  max_delay=0)
        return await ctx.call_activity("Flaky", retry=policy)

    return reg


def test_a_30_day_timer_completes_in_milliseconds():
    with duro.TestEnv(registry()) as env:
        env.client.start("Month", "m1")
        info = env.wait("m1", timeout=20)  # 20 s of real time at most
        assert info.status == "Completed", info
        assert info.output >= 30 * DAY * 1000
        assert env.skipped >= 30 * DAY - 20


def test_a_delayed_start_and_hours_of_retry_backoff_are_skipped():
    with duro.TestEnv(registry()) as env:
        env.client.start("Echo", "later", "hi", delay=7 * DAY)
        info = env.wait("later", timeout=20)
        assert info.status == "Completed" and info.output == "hi", info
        assert env.skipped >= 7 * DAY - 20
        before = env.skipped
        env.client.start("RetryHours", "retry")
        info = env.wait("retry", timeout=20)
        assert info.status == "Completed", info
        assert info.output == "third time"
        assert env.skipped - before >= 6 * 3600 - 20  # 2 h, then 4 h


def test_advance_by_hand_fires_a_timer():
    with duro.TestEnv(registry()) as env:
        env.client.start("Month", "m2")
        deadline = time.monotonic() + 20
        while not any(e.kind == duro.EventKind.TIMER_CREATED
                      for e in _history(env, "m2")):
            assert time.monotonic() < deadline
            time.sleep(0.001)
        env.advance(30 * DAY)
        assert env.skipped == 30 * DAY
        info = env.client.wait("m2", timeout=20)  # a plain wait: no skip
        assert info.status == "Completed", info


def _history(env, instance_id):
    try:
        return env.client.history(instance_id)
    except duro.NotFound:  # not begun yet
        return []


def test_a_mock_replaces_or_adds_an_activity_by_name():
    env = duro.TestEnv(registry())
    try:
        env.mock_activity("Charge", lambda ctx, _: "mocked")

        async def refund(ctx, _):
            return "added"

        env.mock_activity("Refund", refund)
        env.start()
        with pytest.raises(duro.InvalidState):
            env.mock_activity("Charge", lambda ctx, _: "late")
        env.client.start("Call", "c", "Charge")
        env.client.start("Call", "r", "Refund")
        assert env.wait("c", timeout=20).output == "mocked"
        assert env.wait("r", timeout=20).output == "added"
    finally:
        env.close()


def test_bad_input_gets_clear_errors():
    reg = registry()
    with pytest.raises(TypeError):
        duro.TestEnv(None)
    with pytest.raises(duro.Error) as e:
        duro.TestEnv(reg, url="nosuchstore:x")
    assert e.value.errname == "DURO_BAD_URL"
    env = duro.TestEnv(reg)
    try:
        with pytest.raises(duro.InvalidState):  # one at a time
            duro.TestEnv(reg)
        with pytest.raises(duro.InvalidState):  # not started
            env.wait("x", timeout=0)
        with pytest.raises(duro.InvalidArgument):
            env.advance(-1)
        env.start()
        with pytest.raises(duro.NotFound):
            env.wait("ghost", timeout=1)
        with pytest.raises(duro.Timeout):
            env.client.start("Call", "hang", "Missing")  # never registered
            env.wait("hang", timeout=0)
    finally:
        env.close()
    with pytest.raises(duro.InvalidState):  # closed with its environment
        env.client.status("x")
    duro.TestEnv(reg).close()  # another may open now


def test_on_the_test_store(db):
    """On the store of the run (a SQLite file, or PostgreSQL's schema)."""
    with duro.TestEnv(registry(), url=db) as env:
        env.client.start("Month", "pg")
        info = env.wait("pg", timeout=20)
        assert info.status == "Completed", info
