"""Schedules from Python (docs/schedules.md): create / update / pause /
resume / trigger / delete / list / describe on a real store, a runtime
firing an interval schedule, schedule_next_fires without a store, and the
refusals - each held to what libduro reports."""
import datetime as dt
import re
import time
import zoneinfo

import duro
import pytest
from helpers import wait_for

# "<id>@2026-11-29T02:00:00Z", with .mmm when the time is not whole seconds
RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z"


def registry():
    """'Quick' returns its input; 'Waiter' waits for event 'go'."""
    reg = duro.Registry()

    @reg.orchestration("Quick")
    async def quick(ctx, n):
        return n

    @reg.orchestration("Waiter")
    async def waiter(ctx, n):
        return await ctx.wait_event("go")

    return reg


# --- create, list, describe ----------------------------------------------


def test_cron_schedule_round_trips_and_describe_matches_next_fires(db):
    client = duro.Client(db)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    client.create_schedule(
        "nightly",
        "Quick",
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        input={"region": "eu", "n": [1, 2]},
        version="2",
        overlap="buffer_one",
        catchup_window=3600,
        jitter=0.5,
        start=start,
        timeout=90,
    )
    (s,) = client.list_schedules()
    assert isinstance(s, duro.ScheduleInfo)
    assert s.id == "nightly"
    assert s.orchestration == "Quick"
    assert s.version == "2"
    assert s.cron == "30 2 * * *"
    assert s.every is None
    assert s.time_zone == "Europe/Berlin"
    assert s.input == {"region": "eu", "n": [1, 2]}
    assert s.overlap == "buffer_one"
    assert s.catchup_window == 3600.0
    assert s.jitter == 0.5
    assert s.timeout == 90.0
    assert s.start == start
    assert s.end is None
    assert s.paused is False
    assert s.last_instance_id is None and s.last_status is None
    assert (s.fires, s.skips) == (0, 0)
    assert s.created.tzinfo is not None and s.next_fire > s.created

    d = client.describe_schedule("nightly", next=5, fires=10)
    assert isinstance(d, duro.ScheduleDescription)
    assert d.schedule == s
    assert d.recent_fires == []
    assert len(d.next_fires) == 5
    assert d.next_fires[0] == s.next_fire
    # the same spec without a store plans the same times
    planned = duro.schedule_next_fires(
        "Quick",
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        start=start,
        after=s.created,
        count=5,
    )
    assert planned == d.next_fires
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    for t in planned:
        assert t.tzinfo == dt.timezone.utc
        local = t.astimezone(berlin)
        assert (local.hour, local.minute, local.second) == (2, 30, 0)
    assert all(b > a for a, b in zip(planned, planned[1:]))


def test_schedule_next_fires_of_an_interval_and_its_bounds():
    after = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    times = duro.schedule_next_fires("X", every=600, offset=60, after=after, count=3)
    assert times == [after + dt.timedelta(seconds=60 + 600 * k) for k in range(3)]
    # end bounds them: fewer than asked
    end = after + dt.timedelta(seconds=700)
    assert len(duro.schedule_next_fires("X", every=600, offset=60, after=after, end=end, count=5)) == 2
    assert duro.schedule_next_fires("X", every=600, after=after, count=0) == []
    with pytest.raises(duro.InvalidArgument, match="count"):
        duro.schedule_next_fires("X", every=600, count=-1)


# --- a runtime fires -------------------------------------------------------


def test_interval_schedule_is_fired_by_a_runtime(db):
    client = duro.Client(db)
    client.create_schedule("tick", "Quick", every=1, input=7)
    with duro.Runtime(db, registry()):

        def completed_fire():
            for f in client.describe_schedule("tick", fires=20).recent_fires:
                if f.action == "started" and f.instance_status == "Completed":
                    return f
            return None

        fire = wait_for(completed_fire, "a fire of 'tick' that completed")
        client.delete_schedule("tick")
    assert re.fullmatch(r"tick@" + RFC3339, fire.instance_id), fire.instance_id
    # the id names the fire's time
    stamp = fire.instance_id.split("@", 1)[1]
    assert dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) == fire.time
    info = client.status(fire.instance_id)
    assert info.status == "Completed"
    assert info.output == 7
    assert info.name == "Quick"


# --- trigger ---------------------------------------------------------------


def test_trigger_starts_an_instance_that_completes(db):
    client = duro.Client(db)
    client.create_schedule("yearly", "Quick", cron="0 0 1 1 *", input="hi")
    with duro.Runtime(db, registry()):
        started = client.trigger_schedule("yearly")
        assert started is not None
        assert re.fullmatch(r"yearly@trigger-" + RFC3339, started), started
        info = client.wait(started, timeout=30)
    assert info.status == "Completed"
    assert info.output == "hi"
    s = client.describe_schedule("yearly").schedule
    assert s.last_instance_id == started
    assert s.fires == 1


def test_trigger_with_overlap_skip_skips_while_the_last_runs(db):
    client = duro.Client(db)
    client.create_schedule("w", "Waiter", cron="0 0 1 1 *", overlap="skip")
    with duro.Runtime(db, registry()):
        first = client.trigger_schedule("w")
        assert first is not None
        wait_for(lambda: client.status(first).status == "Running", f"{first} Running")
        assert client.trigger_schedule("w") is None
        d = client.describe_schedule("w")
        assert [f.action for f in d.recent_fires] == ["skipped", "started"]
        skipped, began = d.recent_fires
        assert skipped.instance_id is None
        assert skipped.count == 1
        assert "overlap" in skipped.why
        assert began.instance_id == first
        assert began.instance_status == "Running"
        assert d.schedule.skips == 1
        assert d.schedule.last_status == "Running"
        client.raise_event(first, "go", "done")
        assert client.wait(first, timeout=30).output == "done"
    # the last ended: a trigger starts again
    again = client.trigger_schedule("w")
    assert again is not None and again != first


# --- pause, resume, update, delete ----------------------------------------


def test_pause_resume_update_delete(db):
    client = duro.Client(db)
    client.create_schedule("job", "Quick", cron="0 3 * * *")
    client.pause_schedule("job", note="maintenance")
    d = client.describe_schedule("job")
    assert d.schedule.paused is True
    assert d.schedule.note == "maintenance"
    assert d.next_fires == []

    client.resume_schedule("job")
    d = client.describe_schedule("job")
    assert d.schedule.paused is False
    assert len(d.next_fires) == 5
    assert all((t.hour, t.minute) == (3, 0) for t in d.next_fires)

    client.update_schedule("job", "Quick", cron="15 4 * * *", overlap="allow_all", input=[1])
    d = client.describe_schedule("job", next=3)
    assert d.schedule.cron == "15 4 * * *"
    assert d.schedule.overlap == "allow_all"
    assert d.schedule.input == [1]
    assert len(d.next_fires) == 3
    assert all((t.hour, t.minute) == (4, 15) for t in d.next_fires)

    # an interval replaces the cron expression
    client.update_schedule("job", "Quick", every=90, offset=30)
    s = client.describe_schedule("job").schedule
    assert (s.cron, s.every, s.offset) == (None, 90.0, 30.0)

    client.delete_schedule("job")
    assert client.list_schedules() == []
    with pytest.raises(duro.NotFound):
        client.describe_schedule("job")


def test_list_is_in_id_order(db):
    client = duro.Client(db)
    for sid in ("b", "c", "a"):
        client.create_schedule(sid, "Quick", every=3600)
    assert [s.id for s in client.list_schedules()] == ["a", "b", "c"]


# --- refusals --------------------------------------------------------------


def test_bad_specs_are_refused_with_libduros_message(db):
    client = duro.Client(db)
    with pytest.raises(duro.InvalidArgument, match="buffer_one") as e:
        client.create_schedule("s", "Quick", every=60, overlap="sometimes")
    assert e.value.errname == "DURO_INVALID"
    with pytest.raises(duro.InvalidArgument):
        client.create_schedule("s", "Quick", cron="* * * * *", every=60)
    with pytest.raises(duro.InvalidArgument):
        client.create_schedule("s", "Quick")
    with pytest.raises(duro.InvalidArgument, match="minute") as e:
        client.create_schedule("s", "Quick", cron="61 * * * *")
    with pytest.raises(duro.NotFound, match="Mars/Olympus"):
        client.create_schedule("s", "Quick", cron="0 3 * * *", time_zone="Mars/Olympus")
    with pytest.raises(duro.InvalidArgument):
        client.create_schedule("", "Quick", every=60)
    with pytest.raises(duro.InvalidArgument):
        client.create_schedule("s", "", every=60)
    with pytest.raises(duro.InvalidArgument):
        client.create_schedule("s", "Quick", every=60, offset=60)
    with pytest.raises(ValueError, match="aware"):
        client.create_schedule("s", "Quick", every=60, start=dt.datetime(2030, 1, 1))
    # none of those made a schedule
    assert client.list_schedules() == []
    client.create_schedule("s", "Quick", every=60)
    with pytest.raises(duro.AlreadyExists):
        client.create_schedule("s", "Quick", every=60)
    with pytest.raises(duro.InvalidArgument):
        client.describe_schedule("s", next=101)
    with pytest.raises(duro.InvalidArgument):
        client.describe_schedule("s", fires=-1)
    # the same checks without a store
    with pytest.raises(duro.InvalidArgument, match="minute"):
        duro.schedule_next_fires("Quick", cron="61 * * * *")
    with pytest.raises(duro.NotFound, match="Mars/Olympus"):
        duro.schedule_next_fires("Quick", cron="0 3 * * *", time_zone="Mars/Olympus")
    with pytest.raises(duro.InvalidArgument, match="terminate_other"):
        duro.schedule_next_fires("Quick", every=60, overlap="never")
    with pytest.raises(ValueError, match="aware"):
        duro.schedule_next_fires("Quick", every=60, after=dt.datetime(2030, 1, 1))


def test_unknown_schedule_is_not_found_for_every_verb(db):
    client = duro.Client(db)
    calls = {
        "update": lambda: client.update_schedule("nope", "Quick", every=60),
        "pause": lambda: client.pause_schedule("nope", note="x"),
        "resume": lambda: client.resume_schedule("nope"),
        "trigger": lambda: client.trigger_schedule("nope"),
        "delete": lambda: client.delete_schedule("nope"),
        "describe": lambda: client.describe_schedule("nope"),
    }
    for verb, call in calls.items():
        with pytest.raises(duro.NotFound) as e:
            call()
        assert e.value.errname == "DURO_NOT_FOUND", verb


# --- a runtime that does not fire them ----------------------------------


def test_a_runtime_with_schedules_off_leaves_them_to_others(db):
    client = duro.Client(db)
    client.create_schedule("tick", "Quick", every=0.2, input=1)
    due = client.describe_schedule("tick").schedule.next_fire
    with duro.Runtime(db, registry(), schedules=False):
        # Past the first fire time by more than two intervals (a runtime
        # that fires wakes for a due schedule, it does not wait that long):
        # this one made none. Waiting can only miss a fire made late, never
        # see one that was not made.
        margin = dt.timedelta(seconds=0.5)
        while dt.datetime.now(dt.timezone.utc) < due + margin:
            time.sleep(0.05)
        assert client.describe_schedule("tick").schedule.fires == 0
        # the same store, a runtime that fires: the schedule was due
        with duro.Runtime(db, registry()):
            wait_for(
                lambda: client.describe_schedule("tick").schedule.fires > 0,
                "a fire by the runtime with schedules on",
            )
    client.delete_schedule("tick")
