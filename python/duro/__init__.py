"""duro for Python: durable orchestrations as ``async def`` functions.

Orchestrations are run by duro's engine (libduro, in C) through a driver in
the extension ``duro._duro``; this module is the thin layer that translates
payloads (JSON), exceptions and names. Semantics live in libduro.
See docs/python.md in the repository.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime as _dt
import enum
import inspect
import json
import random as _random
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

from . import _duro

__all__ = [
    "Registry",
    "Runtime",
    "Client",
    "Context",
    "ActivityContext",
    "CancelToken",
    "Task",
    "RetryPolicy",
    "InstanceInfo",
    "InstancePage",
    "Filter",
    "Outcome",
    "ManyResult",
    "BulkResult",
    "ResetResult",
    "EventKind",
    "HistoryEvent",
    "Error",
    "NotFound",
    "AlreadyExists",
    "InvalidState",
    "Timeout",
    "Nondeterminism",
    "InvalidArgument",
    "TaskFailed",
    "ActivityFailed",
    "SubOrchestrationFailed",
    "TaskCancelled",
    "replay_json",
    "replay_file",
    "TestEnv",
    "ScheduleInfo",
    "ScheduleFire",
    "ScheduleDescription",
    "schedule_next_fires",
]

__version__ = _duro.DURO_VERSION

# ---------------------------------------------------------------------------
# errors

Error = _duro.Error
Error.code = _duro.DURO_ERROR  # type: ignore[attr-defined]
Error.errname = "DURO_ERROR"  # type: ignore[attr-defined]


class NotFound(Error):  # type: ignore[misc, valid-type]
    """No such instance (DURO_NOT_FOUND)."""


class AlreadyExists(Error):  # type: ignore[misc, valid-type]
    """An instance with that id exists (DURO_ALREADY_EXISTS)."""


class InvalidState(Error):  # type: ignore[misc, valid-type]
    """Not possible in the instance's status (DURO_INVALID_STATE)."""


class Timeout(Error):  # type: ignore[misc, valid-type]
    """A wait's deadline passed (DURO_TIMEOUT)."""


class Nondeterminism(Error):  # type: ignore[misc, valid-type]
    """The code no longer matches the recorded history
    (DURO_NONDETERMINISM); the message names the event and both sides."""


class InvalidArgument(Error):  # type: ignore[misc, valid-type]
    """duro refused an argument (DURO_INVALID): a filter a bulk call does
    not accept, a live status given to ``purge``, a malformed cursor..."""


for _code, _cls in (
    (_duro.DURO_INVALID, InvalidArgument),
    (_duro.DURO_NOT_FOUND, NotFound),
    (_duro.DURO_ALREADY_EXISTS, AlreadyExists),
    (_duro.DURO_INVALID_STATE, InvalidState),
    (_duro.DURO_TIMEOUT, Timeout),
    (_duro.DURO_NONDETERMINISM, Nondeterminism),
):
    _duro._register_error(_code, _cls)


class TaskFailed(Exception):
    """A task awaited in an orchestration failed.

    ``message`` is the failure's text, ``type`` the Python exception type
    name of the activity or child that raised (None when the failure did
    not come from Python code), ``category`` duro's category ("application",
    "timeout", ...), ``traceback`` the remote traceback text when known.
    """

    def __init__(
        self,
        message: str,
        type: Optional[str] = None,
        category: str = "application",
        traceback: Optional[str] = None,
    ) -> None:
        super().__init__(f"{type}: {message}" if type else message)
        self.message = message
        self.type = type
        self.category = category
        self.traceback = traceback


class ActivityFailed(TaskFailed):
    """An activity failed (after its retries)."""


class SubOrchestrationFailed(TaskFailed):
    """A sub-orchestration failed."""


class TaskCancelled(TaskFailed):
    """The task was cancelled (a select loser, ``task.cancel()``)."""


class _ContinueAsNew(BaseException):
    def __init__(self, input: Any) -> None:
        super().__init__()
        self.input = input


_CATEGORIES = [
    "none",
    "application",
    "configuration",
    "infrastructure",
    "timeout",
    "cancelled",
]


def _encode(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value)


def _decode(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # written by non-Python code: kept as it is


def _failure_text(exc: BaseException) -> str:
    return json.dumps(
        {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
    )


def _parse_failure(text: Optional[str]):
    """(type, message, traceback) of a failure's text."""
    if text:
        try:
            d = json.loads(text)
            if isinstance(d, dict) and "type" in d and "message" in d:
                return d["type"], d["message"], d.get("traceback")
        except ValueError:
            pass
    return None, text or "failed", None


# ---------------------------------------------------------------------------
# tasks


_PENDING, _SUCCEEDED, _FAILED, _CANCELLED = 0, 1, 2, 3


class Task(_duro.Task):
    """A durable task (activity, timer, event wait, child). ``await`` it in
    the orchestration that made it; tasks are scheduled when created."""

    _failure = ActivityFailed

    def __await__(self):
        yield self
        return self.result()

    def done(self) -> bool:
        """True once the task succeeded, failed or was cancelled."""
        return self._state() != _PENDING

    def result(self) -> Any:
        """The task's output decoded from JSON; raises the task's failure
        (``ActivityFailed``, ``TaskCancelled``, ...) when it did not succeed,
        and ``Error`` while it is pending."""
        state, output, error, category = self._outcome()
        if state == _SUCCEEDED:
            return _decode(output)
        if state == _PENDING:
            raise Error("the task is not done yet")
        kind, message, tb = _parse_failure(error)
        cls = TaskCancelled if state == _CANCELLED else self._failure
        raise cls(message, kind, _CATEGORIES[category], tb)


class _ActivityTask(Task):
    _failure = ActivityFailed


class _ChildTask(Task):
    _failure = SubOrchestrationFailed


class _Any(_duro.Wait):
    def __await__(self):
        yield self
        return self._winner()


class _All(_duro.Wait):
    def __await__(self):
        yield self
        return [t.result() for t in self._tasks]

    def __init__(self, kind: int, tasks: tuple) -> None:
        super().__init__(kind, tasks)
        self._tasks = tasks


@dataclass(frozen=True)
class RetryPolicy:
    """How an activity is retried (duro_retry_policy). Durations in seconds;
    0 timeouts mean none; ``backoff`` is "exponential", "linear" or
    "fixed"."""

    max_attempts: int = 3
    initial_delay: float = 1.0
    backoff: str = "exponential"
    coefficient: float = 2.0
    max_delay: float = 60.0
    attempt_timeout: float = 0.0
    total_timeout: float = 0.0

    def _native(self) -> tuple:
        kinds = {"exponential": 0, "linear": 1, "fixed": 2}
        if self.backoff not in kinds:
            raise ValueError(f"unknown backoff {self.backoff!r}")
        return (
            self.max_attempts,
            kinds[self.backoff],
            int(self.initial_delay * 1000),
            float(self.coefficient),
            int(self.max_delay * 1000),
            int(self.attempt_timeout * 1000),
            int(self.total_timeout * 1000),
        )


# ---------------------------------------------------------------------------
# contexts


class Context:
    """What an orchestration receives. Every method is deterministic: it is
    matched against history when the orchestration is replayed."""

    def __init__(self, native: Any) -> None:
        self._n = native

    @property
    def instance_id(self) -> str:
        """The instance's id."""
        return self._n.instance_id()

    @property
    def is_replaying(self) -> bool:
        """True while the code re-executes recorded history."""
        return self._n.is_replaying()

    def call_activity(
        self, name: str, input: Any = None, *, retry: Optional[RetryPolicy] = None
    ) -> Task:
        """Schedules activity ``name`` with ``input`` (JSON-encoded)."""
        return self._n.call_activity(
            name, _encode(input), retry._native() if retry else None, _ActivityTask
        )

    def call_sub_orchestration(
        self,
        name: str,
        input: Any = None,
        *,
        instance_id: Optional[str] = None,
        version: Optional[str] = None,
    ) -> Task:
        """Starts child orchestration ``name``; the task completes with it
        (its output, or ``SubOrchestrationFailed``). The options are C's
        (duro_call_sub_orchestration): ``instance_id`` None gives
        "<parent id>:<execution>:<event id>", deterministic; an id that
        already exists fails the task (``AlreadyExists`` text, category
        configuration). ``version`` None runs the highest version
        registered, "" exactly the version "". Cancelling or terminating
        the parent cancels or terminates the child; for a child that lives
        on its own use ``start_orchestration``."""
        return self._n.call_sub_orchestration(
            name, version, instance_id, _encode(input), _ChildTask
        )

    def start_orchestration(
        self,
        name: str,
        input: Any = None,
        *,
        instance_id: Optional[str] = None,
        version: Optional[str] = None,
    ) -> None:
        """Starts orchestration ``name`` detached, fire-and-forget
        (duro_start_orchestration): nothing comes back, and it is not
        cancelled, terminated or ended with this one. Recorded in history
        (SubOrchestrationScheduled with ``detached`` set) and so replay-safe:
        a replay does not start it again. ``instance_id`` None: duro's
        deterministic "<parent id>:<execution>:<event id>". When an instance
        ``instance_id`` already exists the start is dropped silently and the
        existing one is left alone (as C). ``version`` as for
        ``call_sub_orchestration``. Raises ``Error`` for what duro refuses
        at once (an empty name: ``InvalidArgument``)."""
        self._n.start_orchestration(name, version, instance_id, _encode(input))

    def timer(self, seconds: float) -> Task:
        """A durable timer firing ``seconds`` after ``now()``."""
        return self._n.timer(int(seconds * 1000), Task)

    def wait_event(self, name: str) -> Task:
        """Waits for external event ``name``; its result is the payload."""
        return self._n.wait_event(name, Task)

    def any(self, *tasks: Task) -> Any:
        """Awaitable: the first task done in history order; every other one
        is cancelled (activities and children durably). Returns the task."""
        return _Any(0, tuple(tasks))

    def first(self, *tasks: Task) -> Any:
        """Awaitable: the first task done in history order (duro_first_done);
        unlike ``any()`` the others are left running - nothing is cancelled,
        and they may be awaited later. Returns the task."""
        return _Any(2, tuple(tasks))

    def all(self, *tasks: Task) -> Any:
        """Awaitable: every task done; returns their results in order and
        raises the first failure (in argument order)."""
        return _All(1, tuple(tasks))

    def now(self) -> _dt.datetime:
        """Deterministic time (UTC): when the turn that recorded the latest
        consumed history event began."""
        return _dt.datetime.fromtimestamp(
            self._n.now_ms() / 1000.0, tz=_dt.timezone.utc
        )

    def now_ms(self) -> int:
        """``now()`` in milliseconds since the epoch."""
        return self._n.now_ms()

    def new_guid(self) -> str:
        """A deterministic GUID, the same on replay."""
        return self._n.new_guid()

    def patched(self, change_id: str) -> bool:
        """Whether this execution takes the new path of change ``change_id``
        (duro_patched): True, recording a PatchMarker, when the code
        reaches this point for the first time; False when replaying a
        history recorded before the change, so instances in flight keep
        the old path. See docs/changing-code.md."""
        return self._n.patched(change_id)

    def patch_deprecated(self, change_id: str) -> None:
        """``patched`` for when no instance from before the change remains
        (duro_patch_deprecated): records nothing, accepts histories with or
        without the marker."""
        self._n.patch_deprecated(change_id)

    def set_custom_status(self, value: Any) -> None:
        """Sets the custom status (JSON-encoded; None clears it)."""
        self._n.set_custom_status(_encode(value))

    @property
    def cancel_requested(self) -> bool:
        """True once a cancel of this instance was delivered to the code
        (orchestrations registered with ``observe_cancel=True``)."""
        return self._n.cancel_requested()

    @property
    def cancel_reason(self) -> Optional[str]:
        """The cancel's reason, None before a cancel."""
        return self._n.cancel_reason()

    def random(self) -> _random.Random:
        """A ``random.Random`` seeded from ``new_guid()``: the same numbers
        on replay."""
        return _random.Random(self.new_guid())

    def log(self, message: str, level: int = 2) -> None:
        """Logs through the runtime's log sink, never while replaying
        (``level``: 0 trace .. 4 error; 2 info)."""
        self._n.log(level, str(message))

    def continue_as_new(self, input: Any = None) -> None:
        """Ends this execution and starts the next with ``input``. Raises
        an exception that the orchestration must let through."""
        raise _ContinueAsNew(input)


class ActivityContext:
    """What an activity receives: its scheduling and its cancellation.

    Usable only while the activity runs (from the activity's thread or any
    thread it started, as duro's C context); afterwards every member raises
    ``Error``. duro cancels an activity when nobody will wait for its result
    (docs/cancellable-activities.md): ``cancelled`` turns True and
    ``cancel_reason`` says why ("instance_cancelled", "select_loser",
    "instance_terminated", "lock_lost", "shutdown", ...). The activity then
    has the runtime's grace period (``Runtime(cancel_grace=...)``) to return;
    what it returns is discarded. An ``async def`` activity is also
    interrupted: ``asyncio.CancelledError`` (its message the reason) is
    raised at its next ``await``."""

    __slots__ = ("_n",)

    def __init__(self, native: Any) -> None:
        self._n = native

    @property
    def instance_id(self) -> str:
        """The instance's id."""
        return self._n.instance_id

    @property
    def execution_id(self) -> int:
        """The instance's execution (1 for the first, +1 per
        continue-as-new)."""
        return self._n.execution_id

    @property
    def name(self) -> str:
        """The activity's name."""
        return self._n.name

    @property
    def activity_id(self) -> int:
        """The event id of the ActivityScheduled this run belongs to: with
        ``instance_id`` an idempotency key for side effects."""
        return self._n.activity_id

    @property
    def attempt(self) -> int:
        """The retry policy's attempt, 1 for the first."""
        return self._n.attempt

    @property
    def delivery(self) -> int:
        """How many times this scheduling was delivered to a worker, 1
        normally; more after a crash or an expired lock."""
        return self._n.delivery

    @property
    def cancelled(self) -> bool:
        """True once duro cancelled the activity. Non-blocking: check it
        between steps of a long loop."""
        return self._n.cancelled

    @property
    def cancel_reason(self) -> Optional[str]:
        """Why the activity was cancelled ("select_loser",
        "instance_cancelled", ...), None while it is not."""
        return self._n.cancel_reason

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the activity is cancelled (True) or ``timeout``
        seconds passed (False; None: no deadline), with the GIL released:
        use it instead of ``time.sleep``. Refused (``RuntimeError``) with a
        timeout other than 0 inside a running asyncio loop, which it would
        stall: an ``async def`` activity awaits instead (any await raises
        ``asyncio.CancelledError`` on cancellation)."""
        if timeout != 0 and asyncio._get_running_loop() is not None:
            raise RuntimeError(
                "ActivityContext.wait_cancelled() would block the event loop; "
                "an async activity sees its cancellation as "
                "asyncio.CancelledError at its next await"
            )
        return self._n.wait_cancelled(timeout)

    def cancel_fd(self) -> int:
        """A file descriptor that becomes readable on cancellation, for
        ``select``/``poll``/``loop.add_reader``. Owned by duro: do not read
        or close it; it is closed when the activity returns (a
        ``cancel_token()`` keeps its own). Raises ``Error`` when none can
        be made."""
        return self._n.cancel_fd()

    def cancel_token(self) -> "CancelToken":
        """A reference to the activity's cancellation token, for threads
        that may outlive the activity call. Release it (``with`` or
        ``release()``) when the thread is done."""
        return CancelToken(self._n.cancel_token())


class CancelToken:
    """An activity's cancellation token, kept by a thread the activity
    started (``ActivityContext.cancel_token()``); valid after the activity
    returned, until ``release()``. A context manager that releases it. Any
    thread."""

    __slots__ = ("_n",)

    def __init__(self, native: Any) -> None:
        self._n = native

    @property
    def cancelled(self) -> bool:
        """True once the activity was cancelled. Non-blocking."""
        return self._n.cancelled()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks (GIL released) until cancelled (True) or ``timeout``
        seconds passed (False; None: no deadline). The token of an activity
        that returned may never fire: wait with a timeout."""
        ms = -1 if timeout is None or timeout < 0 else int(timeout * 1000)
        return self._n.wait(ms)

    def fd(self) -> int:
        """A file descriptor readable once cancelled, owned by the token
        (do not read or close it): valid until ``release()``."""
        return self._n.fd()

    def release(self) -> None:
        """Drops the reference (idempotent); the token is unusable after."""
        self._n.release()

    def __enter__(self) -> "CancelToken":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


# ---------------------------------------------------------------------------
# registry, runtime, client


def _orchestration_starter(fn: Callable) -> Callable:
    async def run(ctx: Context, input: Optional[str]):
        try:
            result = await fn(ctx, _decode(input))
        except _ContinueAsNew as c:
            return ("continue_as_new", _encode(c.input))
        except Exception as e:  # becomes the instance's failure
            return ("fail", _failure_text(e))
        return ("ok", _encode(result))

    def start(native: Any, input: Optional[str]):
        return run(Context(native), input)

    return start


def _activity_runner(fn: Callable) -> Callable:
    """Runs an activity on the worker thread duro gave it. A plain ``def``
    is called; what an ``async def`` (or any callable returning a
    coroutine) makes is run to completion there in a fresh event loop
    (``asyncio.run``: the loop's leftover tasks are cancelled and its
    executor joined before the activity returns, so nothing of it outlives
    the call but what it handed a ``CancelToken``)."""

    def run(native: Any, input: Optional[str]):
        ctx = ActivityContext(native)
        with _activities_running:
            _activities_running.count += 1
        try:
            value = fn(ctx, _decode(input))
            if inspect.iscoroutine(value):
                value = asyncio.run(_run_cancellable(value, ctx))
            return ("ok", _encode(value))
        except (Exception, asyncio.CancelledError) as e:
            return ("fail", _failure_text(e))
        finally:
            with _activities_running:
                _activities_running.count -= 1
                _activities_running.notify_all()

    return run


class _Running(threading.Condition):
    count = 0


# Python activities under way in this process: the exit hook gives those
# that a shutdown cancelled a moment to return (their finally blocks run).
_activities_running = _Running()
_EXIT_ACTIVITY_GRACE = 2.0  # seconds, past the shutdown's own 5


_CANCEL_POLL_SECONDS = 0.05  # only when no cancel fd can be made


async def _run_cancellable(coro: Any, ctx: ActivityContext) -> Any:
    """Awaits the activity's coroutine in this task, cancelling the task
    with the reason as message as soon as duro cancels the activity: the
    activity's eventfd, watched by the loop's selector, makes it within
    milliseconds with no thread of its own."""
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    assert current is not None  # asyncio.run's main task
    task: "asyncio.Task[Any]" = current
    try:
        fd = ctx.cancel_fd()
    except Error:
        fd = -1  # out of descriptors: poll the flag instead
    poller: List[asyncio.TimerHandle] = []

    def fire() -> None:
        task.cancel(ctx.cancel_reason or "cancelled")

    def on_readable() -> None:
        loop.remove_reader(fd)  # the eventfd stays readable
        fire()

    def poll() -> None:
        if ctx.cancelled:
            fire()
        else:
            poller[:] = [loop.call_later(_CANCEL_POLL_SECONDS, poll)]

    if fd >= 0:
        loop.add_reader(fd, on_readable)
    else:
        poll()
    try:
        return await coro
    finally:
        if fd >= 0:
            loop.remove_reader(fd)
        for handle in poller:
            handle.cancel()


class Registry:
    """Orchestrations and activities by name."""

    def __init__(self) -> None:
        self._native = _duro.Registry()

    def orchestration(
        self,
        name: Optional[str] = None,
        *,
        version: Optional[str] = None,
        observe_cancel: bool = False,
        cleanup_timeout: float = 0.0,
        timeout: float = 0.0,
    ) -> Callable[[Callable], Callable]:
        """Decorator: registers an ``async def f(ctx, input)``. With
        ``observe_cancel`` a cancel is delivered to the code: its pending
        awaits raise ``TaskCancelled``, ``ctx.cancel_requested`` turns True,
        and it may run cleanup work (within ``cleanup_timeout`` seconds, 0:
        the runtime's default) before the instance ends Cancelled. With
        ``timeout`` (seconds), an instance started without a deadline of
        its own gets one that long after its first turn: when it passes,
        the instance ends Failed with category timeout
        (docs/lifecycle.md, "Deadlines")."""

        def deco(fn: Callable) -> Callable:
            self._native.add_orchestration(
                name or fn.__name__,
                version,
                _orchestration_starter(fn),
                observe_cancel,
                int(cleanup_timeout * 1000),
                int(timeout * 1000),
            )
            return fn

        return deco

    def activity(self, name: Optional[str] = None) -> Callable[[Callable], Callable]:
        """Decorator: registers an activity ``f(ctx, input)``, a plain
        ``def`` or an ``async def`` (or any callable returning a coroutine),
        run on duro's worker threads (each ``async def`` call in its own
        asyncio event loop on that thread).
        ``ctx`` is an ``ActivityContext``; the input and the return value
        are JSON; an exception fails the activity with its type, message
        and traceback."""

        def deco(fn: Callable) -> Callable:
            self._native.add_activity(name or fn.__name__, _activity_runner(fn))
            return fn

        return deco


_live_runtimes: "weakref.WeakSet[Runtime]" = weakref.WeakSet()
_live_envs: "weakref.WeakSet[TestEnv]" = weakref.WeakSet()


class Runtime:
    """Runs the registry's orchestrations and activities on the store at
    ``url`` ("sqlite:path", "postgres://..."). A context manager: entering
    starts it, leaving shuts it down. Runtimes still running when the
    interpreter exits are shut down by an atexit hook. Options left at
    their defaults (-1, 0, None) keep duro's (duro_runtime_options);
    durations are in seconds. ``cancel_grace`` is how long a cancelled
    activity may take to return before its worker slot gets a new thread
    and the old one is abandoned (default 10). ``schedules``: whether a
    thread of this runtime fires the store's due schedules (default True;
    docs/schedules.md); False leaves them to other runtimes."""

    def __init__(
        self,
        url: str,
        registry: Registry,
        *,
        orchestration_concurrency: int = -1,
        worker_concurrency: int = -1,
        cache_size: int = -1,
        log_level: int = -1,
        poll_interval: float = 0.0,
        worker_lock_timeout: float = 0.0,
        lock_renewal: float = 0.0,
        orchestration_lock_timeout: float = 0.0,
        cancel_grace: Optional[float] = None,
        schedules: bool = True,
    ) -> None:
        self._native = _duro.Runtime(
            url,
            registry._native,
            orchestration_concurrency=orchestration_concurrency,
            worker_concurrency=worker_concurrency,
            fiber_cache_size=cache_size,
            log_level=log_level,
            poll_interval_ms=int(poll_interval * 1000),
            worker_lock_timeout_ms=int(worker_lock_timeout * 1000),
            lock_renewal_ms=int(lock_renewal * 1000),
            orchestration_lock_timeout_ms=int(orchestration_lock_timeout * 1000),
            cancel_grace_ms=-1 if cancel_grace is None else int(cancel_grace * 1000),
            schedules=bool(schedules),
        )
        self._registry = registry
        _live_runtimes.add(self)

    def start(self) -> "Runtime":
        """Starts the runtime's threads."""
        self._native.start()
        return self

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stops taking work and waits up to ``timeout`` seconds for work in
        flight; False when activities had to be abandoned."""
        ok = self._native.shutdown(int(timeout * 1000))
        self._native.close()
        _live_runtimes.discard(self)
        return bool(ok)

    def metrics(self) -> Dict[str, int]:
        """A few of the runtime's counters (turns, replays, ...)."""
        return self._native.metrics()

    def __enter__(self) -> "Runtime":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


@atexit.register
def _shutdown_all() -> None:
    for env in list(_live_envs):
        try:
            env.close()
        except Exception:
            pass
    for rt in list(_live_runtimes):
        try:
            rt.shutdown(timeout=5.0)
        except Exception:
            pass
    # An activity still running was cancelled ("shutdown") and abandoned:
    # let it see that and return before the interpreter finalizes, which
    # would stop its thread wherever it next takes the GIL.
    with _activities_running:
        _activities_running.wait_for(lambda: _activities_running.count == 0, _EXIT_ACTIVITY_GRACE)
    _duro._set_finalizing()


def _ms(t: "Optional[Time]") -> int:
    """Milliseconds since the epoch of a datetime (naive: local time, as
    ``datetime.timestamp()`` reads it) or of seconds since the epoch; 0 for
    None (duro: no bound)."""
    if t is None:
        return 0
    if isinstance(t, _dt.datetime):
        return int(round(t.timestamp() * 1000))
    return int(round(float(t) * 1000))


def _when(ms: int) -> Optional[_dt.datetime]:
    return None if not ms else _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)


def _status_mask(status: Union[None, str, Iterable[str]]) -> int:
    """duro's status_mask of status names ("Running", case-insensitive,
    parsed by duro_status_parse); 0 for None."""
    if status is None:
        return 0
    names = [status] if isinstance(status, str) else list(status)
    mask = 0
    for n in names:
        code = _duro.status_code(n)
        if code < 0:
            raise ValueError(f"unknown status {n!r}")
        mask |= 1 << code
    return mask


Time = Union[_dt.datetime, float, int]
"""A point in time: a datetime, or seconds since the epoch."""


@dataclass
class InstanceInfo:
    """An instance's status (duro_instance_info). ``status`` is "Pending",
    "Running", "Completed", "Failed", "Cancelled", "Terminated",
    "Suspended" or "ContinuedAsNew"; ``output`` and ``custom_status`` are
    decoded from JSON; ``error`` is the failure's message, ``error_type``
    its Python type name when it came from Python code. Times are
    milliseconds since the epoch as duro stores them (0: not yet / never);
    ``created``, ``updated`` and ``finished`` give them as datetimes."""

    instance_id: str
    name: Optional[str]
    version: Optional[str]
    status: str
    execution_id: int
    output: Any
    error: Optional[str]
    error_type: Optional[str]
    category: str
    custom_status: Any
    last_problem: Optional[str]
    created_ms: int = 0
    updated_ms: int = 0
    finished_ms: int = 0
    parent_instance: Optional[str] = None
    history_count: int = 0
    cancel_reason: Optional[str] = None
    cancelled_by: Optional[str] = None
    cancel_requested_ms: int = 0
    last_problem_ms: int = 0
    next_attempt_ms: int = 0
    deadline_ms: int = 0

    @property
    def created(self) -> Optional[_dt.datetime]:
        """``created_ms`` as a UTC datetime."""
        return _when(self.created_ms)

    @property
    def updated(self) -> Optional[_dt.datetime]:
        """``updated_ms`` as a UTC datetime."""
        return _when(self.updated_ms)

    @property
    def finished(self) -> Optional[_dt.datetime]:
        """``finished_ms`` as a UTC datetime, None while live."""
        return _when(self.finished_ms)

    @property
    def deadline(self) -> Optional[_dt.datetime]:
        """``deadline_ms`` as a UTC datetime, None without a deadline."""
        return _when(self.deadline_ms)

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "InstanceInfo":
        etype, emsg, _ = _parse_failure(d["error"]) if d["error"] else (None, None, None)
        return cls(
            instance_id=d["instance_id"],
            name=d["name"],
            version=d["version"],
            status=d["status"],
            execution_id=d["execution_id"],
            output=_decode(d["output"]),
            error=emsg,
            error_type=etype,
            category=_CATEGORIES[d["category"]] if 0 <= d["category"] < 6 else "none",
            custom_status=_decode(d["custom_status"]),
            last_problem=d["last_problem"],
            created_ms=d["created_ms"],
            updated_ms=d["updated_ms"],
            finished_ms=d["finished_ms"],
            parent_instance=d["parent_instance"],
            history_count=d["history_count"],
            cancel_reason=d["cancel_reason"],
            cancelled_by=d["cancelled_by"],
            cancel_requested_ms=d["cancel_requested_ms"],
            last_problem_ms=d["last_problem_ms"],
            next_attempt_ms=d["next_attempt_ms"],
            deadline_ms=d.get("deadline_ms", 0),
        )


@dataclass(frozen=True)
class InstancePage:
    """One page of ``Client.list()`` (duro_instance_page): ``items`` in the
    query's order; ``next_cursor`` to pass as ``cursor`` for the next page
    (None on the last); ``total`` the count of every match when asked for
    (``count_total``), else None; ``total_capped`` True when more than
    ``total`` (the query's ``count_max``) match. Iterable over items."""

    items: Tuple[InstanceInfo, ...]
    next_cursor: Optional[str]
    total: Optional[int]
    total_capped: bool

    def __iter__(self) -> Iterator[InstanceInfo]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class Filter:
    """Which instances a bulk call selects (duro_bulk_filter): every field
    given must hold. ``status``: one status name or several (None: the
    call's default set, as duro documents per call); ``name`` and
    ``version``: exact; ``created_after`` (inclusive), ``created_before``
    and ``finished_before`` (exclusive; ``purge`` only, and required there)
    as datetimes or seconds since the epoch. duro's bulk calls select by
    these fields only (no name prefix: list first, then pass the ids)."""

    status: Union[None, str, Iterable[str]] = None
    name: Optional[str] = None
    version: Optional[str] = None
    created_after: Optional[Time] = None
    created_before: Optional[Time] = None
    finished_before: Optional[Time] = None

    def _native(self) -> tuple:
        return (
            _status_mask(self.status),
            self.name,
            self.version,
            _ms(self.created_after),
            _ms(self.created_before),
            _ms(self.finished_before),
        )


@dataclass(frozen=True)
class Outcome:
    """What a call on many ids did for one of them. ``outcome`` is duro's
    name: for cancel "requested" (the next turn decides), "cancelled"
    (decided by the call: the instance had not begun),
    "already_cancelled", "not_found", "not_cancellable", "duplicate" (the
    id came earlier in the call), "none" (not decided: the call failed
    first); for terminate, suspend and resume "requested", "applied"
    (decided by the call), "not_found", "finished", "duplicate", "none".
    ``status`` is the instance's status before the call ("NotFound")."""

    instance_id: str
    outcome: str
    status: str


@dataclass(frozen=True)
class ResetResult:
    """What ``Client.reset`` or ``Client.rewind`` did (with ``dry_run``:
    would do). ``status`` is the instance's status before ("Failed", ...);
    execution ``execution_id`` (``from_execution`` + 1) keeps events 1 ..
    ``to_event_id`` of ``from_execution``; ``activities``, ``timers`` and
    ``children`` are what runs again (docs/lifecycle.md)."""

    status: str
    from_execution: int
    execution_id: int
    to_event_id: int
    activities: int
    timers: int
    children: int
    dry_run: bool


# ---------------------------------------------------------------------------
# schedules (docs/schedules.md)

# duro_overlap by value (stored: append-only), and duro_schedule_fire.action
_OVERLAPS = ("skip", "buffer_one", "allow_all", "cancel_other", "terminate_other")
_FIRE_ACTIONS = {1: "started", 2: "skipped", 3: "buffered", 4: "stopped"}


def _invalid(what: str, detail: str) -> "InvalidArgument":
    """InvalidArgument as the extension raises it for DURO_INVALID."""
    e = InvalidArgument(f"{what}: {detail} (DURO_INVALID)")
    e.code = _duro.DURO_INVALID
    e.errname = "DURO_INVALID"
    return e


def _seconds_ms(seconds: float) -> int:
    return int(round(float(seconds) * 1000))


def _aware_ms(name: str, t: "Optional[Time]") -> int:
    """``_ms`` of a schedule's time; a naive datetime is refused (as a
    start's deadline is): it names no instant."""
    if isinstance(t, _dt.datetime) and t.tzinfo is None:
        raise ValueError(f"{name} must be an aware datetime")
    return _ms(t)


def _schedule_spec(
    what: str,
    orchestration: str,
    cron: Optional[str],
    every: Optional[float],
    offset: float,
    time_zone: Optional[str],
    input: Any,
    version: Optional[str],
    overlap: str,
    catchup_window: Optional[float],
    jitter: float,
    paused: bool,
    note: Optional[str],
    start: "Optional[Time]",
    end: "Optional[Time]",
    timeout: float,
) -> tuple:
    """The tuple the extension reads into a duro_schedule_spec (one place
    for create, update and schedule_next_fires). Only the translation
    happens here; libduro checks every value (both cron and every, or
    neither, a bad cron, an offset out of range, ...)."""
    if overlap not in _OVERLAPS:
        raise _invalid(what, f"overlap {overlap!r} is none of {', '.join(_OVERLAPS)}")
    return (
        cron,
        0 if every is None else _seconds_ms(every),
        _seconds_ms(offset),
        time_zone,
        orchestration,
        version,
        _encode(input),
        _OVERLAPS.index(overlap),
        None if catchup_window is None else _seconds_ms(catchup_window),
        _seconds_ms(jitter),
        bool(paused),
        note,
        _aware_ms("start", start),
        _aware_ms("end", end),
        _seconds_ms(timeout),
    )


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as stored (duro_schedule_info). The spec's fields as
    ``Client.create_schedule`` takes them: ``cron`` (None for an interval
    schedule) or ``every`` (seconds; None for a cron schedule), ``offset``,
    ``catchup_window``, ``jitter`` and ``timeout`` in seconds (``timeout``
    0: none), ``time_zone`` (None: UTC), ``input`` decoded from JSON,
    ``overlap`` by name, ``start``/``end`` (None: no bound). Then its state:
    ``next_fire`` the next fire time not yet decided (None past ``end``),
    ``buffered`` a buffered fire's time, ``last_instance_id`` and
    ``last_status`` (a status name) of the last instance it started (None
    before the first), ``fires`` (instances started) and ``skips`` (fires
    skipped). Times are aware UTC datetimes."""

    id: str
    orchestration: str
    version: Optional[str]
    cron: Optional[str]
    every: Optional[float]
    offset: float
    time_zone: Optional[str]
    input: Any
    overlap: str
    catchup_window: float
    jitter: float
    paused: bool
    note: Optional[str]
    start: Optional[_dt.datetime]
    end: Optional[_dt.datetime]
    timeout: float
    next_fire: Optional[_dt.datetime]
    buffered: Optional[_dt.datetime]
    last_instance_id: Optional[str]
    last_status: Optional[str]
    fires: int
    skips: int
    created: Optional[_dt.datetime]
    updated: Optional[_dt.datetime]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "ScheduleInfo":
        overlap = d["overlap"]
        return cls(
            id=d["id"],
            orchestration=d["orchestration"],
            version=d["version"],
            cron=d["cron"] or None,
            every=d["interval_ms"] / 1000.0 if not d["cron"] else None,
            offset=d["offset_ms"] / 1000.0,
            time_zone=d["time_zone"] or None,
            input=_decode(d["input"]),
            overlap=_OVERLAPS[overlap] if 0 <= overlap < len(_OVERLAPS) else str(overlap),
            catchup_window=d["catchup_window_ms"] / 1000.0,
            jitter=d["jitter_ms"] / 1000.0,
            paused=bool(d["paused"]),
            note=d["note"],
            start=_when(d["start_ms"]),
            end=_when(d["end_ms"]),
            timeout=d["timeout_ms"] / 1000.0,
            next_fire=_when(d["next_ms"]),
            buffered=_when(d["buffered_ms"]),
            last_instance_id=d["last_instance_id"],
            last_status=d["last_status"],
            fires=d["fires"],
            skips=d["skips"],
            created=_when(d["created_ms"]),
            updated=_when(d["updated_ms"]),
        )


@dataclass(frozen=True)
class ScheduleFire:
    """One entry of a schedule's recent fires (duro_schedule_fire).
    ``action``: "started" (``instance_id`` started), "skipped" (``count``
    fires, -1: more than counted; ``why`` says why), "buffered" (to start
    when the last instance ends) or "stopped" (the last instance,
    ``instance_id``, cancelled or terminated by the overlap policy).
    ``time`` is the fire's time, ``recorded`` when it was decided;
    ``instance_status`` the instance's status now (a name; None without an
    instance)."""

    action: str
    time: Optional[_dt.datetime]
    count: int
    instance_id: Optional[str]
    instance_status: Optional[str]
    why: Optional[str]
    recorded: Optional[_dt.datetime]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "ScheduleFire":
        return cls(
            action=_FIRE_ACTIONS.get(d["action"], str(d["action"])),
            time=_when(d["time_ms"]),
            count=d["count"],
            instance_id=d["instance_id"],
            instance_status=d["instance_status"],
            why=d["why"],
            recorded=_when(d["recorded_ms"]),
        )


@dataclass(frozen=True)
class ScheduleDescription:
    """``Client.describe_schedule``: the ``schedule``, its ``next_fires``
    as planned now (aware UTC datetimes; none while paused) and its
    ``recent_fires``, newest first."""

    schedule: ScheduleInfo
    next_fires: List[_dt.datetime]
    recent_fires: List[ScheduleFire]


@dataclass(frozen=True)
class ManyResult:
    """The outcomes of a cancel, terminate, suspend or resume of many ids
    (duro_client_cancel_many, duro_client_control_many), one per id given,
    in order. Iterable; ``outcome(id)`` reads one."""

    outcomes: Tuple[Outcome, ...]

    def __iter__(self) -> Iterator[Outcome]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def __getitem__(self, i: int) -> Outcome:
        return self.outcomes[i]

    def outcome(self, instance_id: str) -> str:
        """The outcome of the first occurrence of ``instance_id``."""
        for o in self.outcomes:
            if o.instance_id == instance_id:
                return o.outcome
        raise KeyError(instance_id)

    @classmethod
    def _from(cls, rows: Sequence[tuple]) -> "ManyResult":
        return cls(tuple(Outcome(*r) for r in rows))


@dataclass(frozen=True)
class BulkResult:
    """What a call by ``where=`` (duro_client_cancel_matching,
    _control_matching, duro_client_purge) or a purge did, or with
    ``dry_run`` would do now: ``count`` instances (a purge counts
    sub-orchestrations too), the first ``max_ids`` of their ``ids`` in id
    order (all by default), and of ``count``, ``applied`` how many were
    decided in the call itself instead of sent a request (instances that
    had not begun; 0 for a purge)."""

    count: int
    ids: Tuple[str, ...]
    applied: int
    dry_run: bool


class EventKind(str, enum.Enum):
    """The kind of a history event (duro_event_kind); the value is duro's
    name (duro_event_kind_name), so a kind compares equal to its name."""

    ORCHESTRATION_STARTED = "OrchestrationStarted"
    ORCHESTRATION_COMPLETED = "OrchestrationCompleted"
    ORCHESTRATION_FAILED = "OrchestrationFailed"
    CONTINUED_AS_NEW = "ContinuedAsNew"
    ORCHESTRATION_CANCEL_REQUESTED = "OrchestrationCancelRequested"
    ORCHESTRATION_CANCELLED = "OrchestrationCancelled"
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    ACTIVITY_COMPLETED = "ActivityCompleted"
    ACTIVITY_FAILED = "ActivityFailed"
    ACTIVITY_CANCEL_REQUESTED = "ActivityCancelRequested"
    TIMER_CREATED = "TimerCreated"
    TIMER_FIRED = "TimerFired"
    EVENT_SUBSCRIBED = "EventSubscribed"
    EVENT_RAISED = "EventRaised"
    SUB_ORCHESTRATION_SCHEDULED = "SubOrchestrationScheduled"
    SUB_ORCHESTRATION_COMPLETED = "SubOrchestrationCompleted"
    SUB_ORCHESTRATION_FAILED = "SubOrchestrationFailed"
    SUB_ORCHESTRATION_CANCEL_REQUESTED = "SubOrchestrationCancelRequested"
    ORCHESTRATION_TERMINATED = "OrchestrationTerminated"
    EXECUTION_SUSPENDED = "ExecutionSuspended"
    EXECUTION_RESUMED = "ExecutionResumed"
    PATCH_MARKER = "PatchMarker"
    EXECUTION_RESET = "ExecutionReset"

    def __str__(self) -> str:
        return self.value


_LEGACY_EVENT_KEYS = (
    "event_id",
    "kind",
    "source_event_id",
    "name",
    "payload",
    "error",
    "reason",
    "category",
    "timestamp_ms",
    "flags",
)


@dataclass(frozen=True)
class HistoryEvent:
    """One history event (duro_event), every field duro stores. Which fields
    a kind sets (duro/provider.h): OrchestrationStarted name, version,
    payload (input), ref_instance/ref_execution/ref_event_id (the parent);
    ActivityScheduled name, payload (input), attempt; completions
    source_event_id (their scheduling event) and payload (output) or error
    and category; ActivityCompleted/Failed started_ms, finished_ms (when
    the worker ran it); TimerCreated/Fired fire_at_ms; EventSubscribed and
    EventRaised name (and payload); SubOrchestrationScheduled name,
    version, ref_instance (the child's id), payload, ``detached``;
    cancels, terminate, suspend and resume reason and requested_by.

    ``payload`` is decoded from JSON (text that is not JSON stays a
    string); ``error`` is a failure's message, with ``error_type`` and
    ``traceback`` when Python code raised it; ``category`` is duro's
    ("none" when not a failure). Times are milliseconds since the epoch (0:
    not set); ``timestamp`` is ``timestamp_ms``, when the turn that wrote
    the event began, as a datetime.

    ``event["kind"]`` and the other keys of the dicts ``history()``
    returned before (event_id, kind, source_event_id, name, payload,
    error, reason, category, timestamp_ms, flags; payload and error as raw
    text, category as a number) still read, for older code."""

    event_id: int
    kind: EventKind
    source_event_id: int
    timestamp_ms: int
    name: Optional[str]
    version: Optional[str]
    payload: Any
    error: Optional[str]
    error_type: Optional[str]
    traceback: Optional[str]
    category: str
    reason: Optional[str]
    requested_by: Optional[str]
    ref_instance: Optional[str]
    ref_execution: int
    ref_event_id: int
    fire_at_ms: int
    attempt: int
    flags: int
    started_ms: int
    finished_ms: int
    _raw: Dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def timestamp(self) -> _dt.datetime:
        """``timestamp_ms`` as a UTC datetime."""
        return _dt.datetime.fromtimestamp(self.timestamp_ms / 1000.0, tz=_dt.timezone.utc)

    @property
    def detached(self) -> bool:
        """SubOrchestrationScheduled: started by ``start_orchestration``."""
        return bool(self.flags & _duro.DURO_START_DETACHED)

    @property
    def cancel_observed(self) -> bool:
        """OrchestrationCancelRequested: delivered to code registered with
        ``observe_cancel``."""
        return bool(self.flags & _duro.DURO_CANCEL_OBSERVED)

    @property
    def cleanup_deadline(self) -> bool:
        """TimerCreated: the deadline of an observed cancel's cleanup."""
        return bool(self.flags & _duro.DURO_TIMER_CLEANUP_DEADLINE)

    @property
    def suspended_before_start(self) -> bool:
        """ExecutionSuspended: suspended before any of its code ran."""
        return bool(self.flags & _duro.DURO_SUSPEND_BEFORE_START)

    def __getitem__(self, key: str) -> Any:
        if key not in _LEGACY_EVENT_KEYS:
            raise KeyError(key)
        return self._raw[key]

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "HistoryEvent":
        etype, emsg, tb = _parse_failure(d["error"]) if d["error"] else (None, None, None)
        return cls(
            event_id=d["event_id"],
            kind=EventKind(d["kind"]),
            source_event_id=d["source_event_id"],
            timestamp_ms=d["timestamp_ms"],
            name=d["name"],
            version=d["version"],
            payload=_decode(d["payload"]),
            error=emsg,
            error_type=etype,
            traceback=tb,
            category=_CATEGORIES[d["category"]] if 0 <= d["category"] < 6 else "none",
            reason=d["reason"],
            requested_by=d["requested_by"],
            ref_instance=d["ref_instance"],
            ref_execution=d["ref_execution"],
            ref_event_id=d["ref_event_id"],
            fire_at_ms=d["fire_at_ms"],
            attempt=d["attempt"],
            flags=d["flags"],
            started_ms=d["started_ms"],
            finished_ms=d["finished_ms"],
            _raw={k: d[k] for k in _LEGACY_EVENT_KEYS},
        )


_ORDERS = {"id": 0, "created_desc": 1, "updated_desc": 2}
_CONTROLS = {
    "terminate": _duro.DURO_CONTROL_TERMINATE,
    "suspend": _duro.DURO_CONTROL_SUSPEND,
    "resume": _duro.DURO_CONTROL_RESUME,
}
_IdOrIds = Union[str, Iterable[str], None]


# How long one wait of the main thread lasts at most before Python handles
# the signals that came meanwhile (Ctrl-C).
_WAIT_SLICE = 0.25


def _wait_handling_signals(native: Any, instance_id: str, ms: int) -> Any:
    """``native.wait(instance_id, ms)``; on the main thread in slices of at
    most _WAIT_SLICE s, so that Python handles signals between two (Ctrl-C
    raises KeyboardInterrupt: a wait in C, with the GIL released, cannot be
    interrupted). duro_client_wait returns a retryable store failure only at
    its deadline: a slice that ends in a failure at its own deadline rode
    one out, and the wait goes on until the caller's."""
    if threading.current_thread() is not threading.main_thread():
        return native.wait(instance_id, ms)
    deadline = None if ms < 0 else time.monotonic() + ms / 1000
    while True:
        began = time.monotonic()
        left = _WAIT_SLICE if deadline is None else max(0.0, deadline - began)
        last = deadline is not None and left <= _WAIT_SLICE
        try:
            code, info = native.wait(instance_id, int(min(left, _WAIT_SLICE) * 1000))
        except Error:
            if last or time.monotonic() - began < _WAIT_SLICE:
                raise
            continue
        if code != _duro.DURO_TIMEOUT or last:
            return code, info



def _reset_deadline(deadline: Optional[_dt.datetime], no_deadline: bool) -> int:
    """duro_reset_options.deadline_ms: 0 keeps the instance's, -1 none."""
    if no_deadline:
        if deadline is not None:
            raise ValueError("deadline or no_deadline, not both")
        return -1
    if deadline is None:
        return 0
    if deadline.tzinfo is None:
        raise ValueError("deadline must be an aware datetime")
    ms = int(deadline.timestamp() * 1000)
    if ms <= 0:
        raise ValueError("deadline must be after the epoch")
    return ms

class Client:
    """Starts, signals, cancels and watches instances on the store at
    ``url``. Every call releases the GIL while it waits on the store."""

    def __init__(self, url: str) -> None:
        self._native = _duro.Client(url)

    def start(
        self,
        orchestration: str,
        instance_id: str,
        input: Any = None,
        *,
        version: Optional[str] = None,
        delay: float = 0.0,
        idempotent: bool = False,
        deadline: Optional[_dt.datetime] = None,
        timeout: float = 0.0,
    ) -> str:
        """Creates instance ``instance_id`` of ``orchestration``; returns
        the id. ``deadline`` (an aware datetime) or ``timeout`` (seconds
        after the start is due, after ``delay``), at most one: when it
        passes, the instance ends Failed with category timeout, its
        activities and children cancelled (docs/lifecycle.md,
        "Deadlines")."""
        deadline_ms = 0
        if deadline is not None:
            if deadline.tzinfo is None:
                raise ValueError("deadline must be an aware datetime")
            deadline_ms = int(deadline.timestamp() * 1000)
            if deadline_ms <= 0:
                raise ValueError("deadline must be after the epoch")
        self._native.start(
            instance_id,
            orchestration,
            _encode(input),
            version,
            int(delay * 1000),
            idempotent,
            deadline_ms,
            int(timeout * 1000),
        )
        return instance_id

    def raise_event(
        self, instance_id: str, name: str, payload: Any = None, *, event_id: Optional[str] = None
    ) -> None:
        """Raises external event ``name`` with ``payload`` (JSON-encoded);
        with ``event_id`` it is delivered at most once per id."""
        self._native.raise_event(instance_id, name, _encode(payload), event_id)

    @overload
    def cancel(  # type: ignore[misc]  # a str is an Iterable[str] too
        self, instance_id: str, reason: Optional[str] = ..., requested_by: Optional[str] = ...
    ) -> None: ...

    @overload
    def cancel(
        self,
        instance_id: Iterable[str],
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
    ) -> ManyResult: ...

    @overload
    def cancel(
        self,
        instance_id: None = ...,
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
        *,
        where: Filter,
        dry_run: bool = ...,
        max_ids: Optional[int] = ...,
    ) -> BulkResult: ...

    def cancel(
        self,
        instance_id: _IdOrIds = None,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        *,
        where: Optional[Filter] = None,
        dry_run: bool = False,
        max_ids: Optional[int] = None,
    ) -> Union[None, ManyResult, BulkResult]:
        """Requests cancellation (duro_client_cancel): the instance ends
        Cancelled at its next turn, or at once when it had not begun; a
        cancelled one (or one with a cancel pending) is no error and keeps the
        first reason; a Completed or Failed one raises ``InvalidState``, an
        unknown one ``NotFound``. ``reason`` None: "cancelled".

        One id: returns None and raises duro's error. Many ids (any iterable of
        str): one call for all of them, in transactions of up to 500 ids,
        returning a ``ManyResult`` with one ``Outcome`` per id given
        (duro_client_cancel_many); an unknown or finished id is an outcome, not
        an error. ``where=Filter(...)``: every instance the filter selects when
        the call starts (status default: Pending and Running (a suspended
        instance only when asked)), returning a ``BulkResult``; with
        ``dry_run`` nothing changes and the result is exactly what a real run
        would do now. duro has no dry run for ids: ``dry_run`` needs ``where``.
        A failure part way raises with what was decided before it:
        ``.outcomes`` (many ids) - transactions that committed stand."""
        return self._verb(
            "cancel", instance_id, reason, requested_by, where, dry_run, max_ids
        )

    @overload
    def terminate(  # type: ignore[misc]  # a str is an Iterable[str] too
        self, instance_id: str, reason: Optional[str] = ..., requested_by: Optional[str] = ...
    ) -> None: ...

    @overload
    def terminate(
        self,
        instance_id: Iterable[str],
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
    ) -> ManyResult: ...

    @overload
    def terminate(
        self,
        instance_id: None = ...,
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
        *,
        where: Filter,
        dry_run: bool = ...,
        max_ids: Optional[int] = ...,
    ) -> BulkResult: ...

    def terminate(
        self,
        instance_id: _IdOrIds = None,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        *,
        where: Optional[Filter] = None,
        dry_run: bool = False,
        max_ids: Optional[int] = None,
    ) -> Union[None, ManyResult, BulkResult]:
        """Ends the instance without running its code (duro_client_terminate):
        it cancels its activities and terminates its children; ``reason`` None:
        "terminated".

        One id: returns None and raises duro's error. Many ids (any iterable of
        str): one call for all of them, in transactions of up to 500 ids,
        returning a ``ManyResult`` with one ``Outcome`` per id given
        (duro_client_control_many); an unknown or finished id is an outcome,
        not an error. ``where=Filter(...)``: every instance the filter selects
        when the call starts (status default: Pending, Running and Suspended),
        returning a ``BulkResult``; with ``dry_run`` nothing changes and the
        result is exactly what a real run would do now. duro has no dry run for
        ids: ``dry_run`` needs ``where``. A failure part way raises with what
        was decided before it: ``.outcomes`` (many ids) - transactions that
        committed stand."""
        return self._verb(
            "terminate", instance_id, reason, requested_by, where, dry_run, max_ids
        )

    @overload
    def suspend(  # type: ignore[misc]  # a str is an Iterable[str] too
        self, instance_id: str, reason: Optional[str] = ..., requested_by: Optional[str] = ...
    ) -> None: ...

    @overload
    def suspend(
        self,
        instance_id: Iterable[str],
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
    ) -> ManyResult: ...

    @overload
    def suspend(
        self,
        instance_id: None = ...,
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
        *,
        where: Filter,
        dry_run: bool = ...,
        max_ids: Optional[int] = ...,
    ) -> BulkResult: ...

    def suspend(
        self,
        instance_id: _IdOrIds = None,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        *,
        where: Optional[Filter] = None,
        dry_run: bool = False,
        max_ids: Optional[int] = None,
    ) -> Union[None, ManyResult, BulkResult]:
        """Suspends the instance (duro_client_suspend): from its next turn it
        takes no decisions and runs no code; what arrives meanwhile is kept for
        its resume.

        One id: returns None and raises duro's error. Many ids (any iterable of
        str): one call for all of them, in transactions of up to 500 ids,
        returning a ``ManyResult`` with one ``Outcome`` per id given
        (duro_client_control_many); an unknown or finished id is an outcome,
        not an error. ``where=Filter(...)``: every instance the filter selects
        when the call starts (status default: Pending and Running), returning a
        ``BulkResult``; with ``dry_run`` nothing changes and the result is
        exactly what a real run would do now. duro has no dry run for ids:
        ``dry_run`` needs ``where``. A failure part way raises with what was
        decided before it: ``.outcomes`` (many ids) - transactions that
        committed stand."""
        return self._verb(
            "suspend", instance_id, reason, requested_by, where, dry_run, max_ids
        )

    @overload
    def resume(  # type: ignore[misc]  # a str is an Iterable[str] too
        self, instance_id: str, reason: Optional[str] = ..., requested_by: Optional[str] = ...
    ) -> None: ...

    @overload
    def resume(
        self,
        instance_id: Iterable[str],
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
    ) -> ManyResult: ...

    @overload
    def resume(
        self,
        instance_id: None = ...,
        reason: Optional[str] = ...,
        requested_by: Optional[str] = ...,
        *,
        where: Filter,
        dry_run: bool = ...,
        max_ids: Optional[int] = ...,
    ) -> BulkResult: ...

    def resume(
        self,
        instance_id: _IdOrIds = None,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        *,
        where: Optional[Filter] = None,
        dry_run: bool = False,
        max_ids: Optional[int] = None,
    ) -> Union[None, ManyResult, BulkResult]:
        """Resumes a suspended instance (duro_client_resume); one that is not
        suspended is left as it is, no error.

        One id: returns None and raises duro's error. Many ids (any iterable of
        str): one call for all of them, in transactions of up to 500 ids,
        returning a ``ManyResult`` with one ``Outcome`` per id given
        (duro_client_control_many); an unknown or finished id is an outcome,
        not an error. ``where=Filter(...)``: every instance the filter selects
        when the call starts (status default: Suspended), returning a
        ``BulkResult``; with ``dry_run`` nothing changes and the result is
        exactly what a real run would do now. duro has no dry run for ids:
        ``dry_run`` needs ``where``. A failure part way raises with what was
        decided before it: ``.outcomes`` (many ids) - transactions that
        committed stand."""
        return self._verb(
            "resume", instance_id, reason, requested_by, where, dry_run, max_ids
        )

    def reset(
        self,
        instance_id: str,
        to_event: Optional[int] = None,
        *,
        execution: Optional[int] = None,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        dry_run: bool = False,
        deadline: Optional[_dt.datetime] = None,
        no_deadline: bool = False,
    ) -> ResetResult:
        """Resets an ended instance (duro_client_reset): a new execution
        keeps its current execution's events up to ``to_event`` (None: the
        last good point, before the first failure) and continues from there
        with the code registered now; what those events leave pending runs
        again. ``execution``: the execution ``to_event`` is in, which must
        still be the current one. A point inside a turn is refused
        (``InvalidArgument``, naming the nearest valid points); a live
        instance, or one another reset overtook, raises ``InvalidState``;
        an unknown instance or event ``NotFound``. ``dry_run``: checks and reports, changes
        nothing. The new execution keeps the instance's deadline (one that
        has passed raises ``InvalidState``) unless ``deadline`` (an aware
        datetime) gives a new one or ``no_deadline`` drops it."""
        return self._reset(
            False,
            instance_id,
            to_event,
            execution,
            reason,
            requested_by,
            dry_run,
            _reset_deadline(deadline, no_deadline),
        )

    def rewind(
        self,
        instance_id: str,
        *,
        reason: Optional[str] = None,
        requested_by: Optional[str] = None,
        dry_run: bool = False,
        deadline: Optional[_dt.datetime] = None,
        no_deadline: bool = False,
    ) -> ResetResult:
        """Rewinds a Failed instance (duro_client_rewind): a reset to its
        last good point, so the failed activities (or child) run again and
        it continues from there, the history before the failure kept. Any
        other status raises ``InvalidState``. ``deadline`` and
        ``no_deadline`` as for ``reset``."""
        return self._reset(
            True,
            instance_id,
            None,
            None,
            reason,
            requested_by,
            dry_run,
            _reset_deadline(deadline, no_deadline),
        )

    def _reset(
        self,
        rewind: bool,
        instance_id: str,
        to_event: Optional[int],
        execution: Optional[int],
        reason: Optional[str],
        requested_by: Optional[str],
        dry_run: bool,
        deadline_ms: int,
    ) -> ResetResult:
        for name, v in (("to_event", to_event), ("execution", execution)):
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be an event or execution id (>= 1), not {v!r}")
        row = self._native.reset_instance(
            rewind,
            instance_id,
            to_event or 0,
            execution or 0,
            reason,
            requested_by,
            dry_run,
            deadline_ms,
        )
        return ResetResult(*row, dry_run=bool(dry_run))

    def _verb(
        self,
        verb: str,
        instance_id: _IdOrIds,
        reason: Optional[str],
        requested_by: Optional[str],
        where: Optional[Filter],
        dry_run: bool,
        max_ids: Optional[int],
    ) -> Union[None, ManyResult, BulkResult]:
        control = _CONTROLS.get(verb, 0)
        if where is not None:
            if instance_id is not None:
                raise TypeError(f"Client.{verb}: give ids or where=, not both")
            count, ids, applied = self._native.matching(
                control,
                where._native(),
                reason,
                requested_by,
                dry_run,
                -1 if max_ids is None else max_ids,
            )
            return BulkResult(count, tuple(ids), applied, bool(dry_run))
        if instance_id is None:
            raise TypeError(f"Client.{verb}: an id, ids or where= is needed")
        if dry_run:
            raise ValueError(
                f"Client.{verb}: dry_run needs where= (duro has no dry run for ids)"
            )
        if isinstance(instance_id, str):
            if verb == "cancel":
                self._native.cancel(instance_id, reason, requested_by)
            elif verb == "terminate":
                self._native.terminate(instance_id, reason, requested_by)
            else:
                self._native.suspend_resume(verb == "resume", instance_id, reason, requested_by)
            return None
        ids = tuple(instance_id)
        try:
            if verb == "cancel":
                rows = self._native.cancel_many(ids, reason, requested_by)
            else:
                rows = self._native.control_many(control, ids, reason, requested_by)
        except Error as e:
            rows = getattr(e, "outcomes", None)
            if rows is not None:
                e.outcomes = ManyResult._from(rows)
            raise
        return ManyResult._from(rows)

    def status(self, instance_id: str) -> InstanceInfo:
        """The instance's status (status "NotFound" when there is none)."""
        return InstanceInfo._from(self._native.status(instance_id))

    def wait(self, instance_id: str, timeout: Optional[float] = None) -> InstanceInfo:
        """Waits until the instance finished; raises ``Timeout`` after
        ``timeout`` seconds (None: no deadline)."""
        ms = -1 if timeout is None else int(timeout * 1000)
        code, info = _wait_handling_signals(self._native, instance_id, ms)
        if code == _duro.DURO_TIMEOUT:
            raise Timeout(
                f"Client.wait: {instance_id} not finished after {timeout} s "
                f"(status {info['status'] if info else '?'})"
            )
        return InstanceInfo._from(info)

    def history(self, instance_id: str, execution_id: int = 0) -> List[HistoryEvent]:
        """The events of an execution (0: the current one) in order, as
        ``HistoryEvent``s (duro_client_read_history). ``NotFound`` for an
        unknown instance."""
        return [HistoryEvent._from(d) for d in self._native.history(instance_id, execution_id)]

    def list(
        self,
        *,
        status: Union[None, str, Iterable[str]] = None,
        name: Optional[str] = None,
        name_prefix: Optional[str] = None,
        name_contains: Optional[str] = None,
        parent_instance: Optional[str] = None,
        with_problem: bool = False,
        created_after: Optional[Time] = None,
        created_before: Optional[Time] = None,
        order: str = "id",
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        count_total: bool = False,
        count_max: int = 0,
    ) -> InstancePage:
        """One page of the instances that match every filter given
        (duro_client_query): status names, exact name, name prefix or
        substring, the children of ``parent_instance``, ``with_problem``,
        a created range (after inclusive, before exclusive). ``order``:
        "id", "created_desc" or "updated_desc"; ``limit``: page size (None:
        duro's 100; at most 1000). Page with ``cursor=page.next_cursor``:
        an instance that exists throughout and keeps its sort key is on
        exactly one page. ``count_total`` fills ``page.total``;
        ``count_max`` > 0 caps that count (``total_capped``). duro's
        refusals (a bad cursor, a limit over 1000, an empty name) raise
        ``InvalidArgument``."""
        if order not in _ORDERS:
            raise ValueError(f"unknown order {order!r} (id, created_desc, updated_desc)")
        items, next_cursor, total, capped = self._native.query(
            _status_mask(status),
            name,
            name_prefix,
            name_contains,
            parent_instance,
            with_problem,
            _ms(created_after),
            _ms(created_before),
            _ORDERS[order],
            0 if limit is None else limit,
            cursor,
            count_total,
            count_max,
        )
        return InstancePage(
            tuple(InstanceInfo._from(d) for d in items),
            next_cursor,
            None if total < 0 else total,
            bool(capped),
        )

    def list_all(self, **filters: Any) -> Iterator[InstanceInfo]:
        """Every instance ``list(**filters)`` selects, page after page
        (``limit`` is the page size; no ``cursor``)."""
        cursor = None
        while True:
            page = self.list(cursor=cursor, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def purge(
        self,
        instance_id: _IdOrIds = None,
        *,
        where: Optional[Filter] = None,
        dry_run: bool = False,
        max_ids: Optional[int] = None,
    ) -> BulkResult:
        """Deletes ended instances (Completed, Failed, Cancelled,
        Terminated) with their history and sub-orchestrations.

        ``where=Filter(...)`` (duro_client_purge): ``finished_before`` is
        required and ``status`` may name ended statuses only (None: the
        four); asking for a live status raises ``InvalidArgument`` and
        changes nothing; an instance goes only with all its children ended,
        else it is kept whole; ``dry_run`` reports exactly what a real run
        would delete now. One id (duro_client_delete without force): a live
        instance raises ``InvalidState``, an unknown one ``NotFound``. Many
        ids: one delete per id, in order (duro has no many-id purge: each
        is its own transaction); the first error is raised with
        ``.result``, the BulkResult of the ids deleted before it. ``count``
        includes the sub-orchestrations that went too; for ids, ``ids``
        are the ids given that were deleted."""
        if where is not None:
            if instance_id is not None:
                raise TypeError("Client.purge: give ids or where=, not both")
            count, ids, applied = self._native.matching(
                -1, where._native(), None, None, dry_run, -1 if max_ids is None else max_ids
            )
            return BulkResult(count, tuple(ids), applied, bool(dry_run))
        if instance_id is None:
            raise TypeError("Client.purge: an id, ids or where= is needed")
        if dry_run:
            raise ValueError("Client.purge: dry_run needs where= (duro has no dry run for ids)")
        given = [instance_id] if isinstance(instance_id, str) else list(instance_id)
        count = 0
        done: List[str] = []
        for iid in given:
            try:
                count += self._native.delete(iid, False)
            except Error as e:
                e.result = BulkResult(count, tuple(done), 0, False)
                raise
            done.append(iid)
        return BulkResult(count, tuple(done), 0, False)

    def replay(self, registry: Registry, instance_id: str, execution_id: int = 0) -> None:
        """Replays the recorded history of an execution (0: the current one)
        through ``registry``'s code on this thread, with no runtime: returns
        when the code still matches, raises ``Nondeterminism`` naming the
        event and both sides when it does not."""
        self._native.replay(registry._native, instance_id, execution_id)

    def export_history(self, instance_id: str) -> str:
        """The instance's history, every execution the store holds, as the
        stable JSON document replay tests read (duro_client_export_history;
        docs/history-json.md), what ``duro history --export`` writes."""
        return self._native.export_history(instance_id)

    def create_schedule(
        self,
        schedule_id: str,
        orchestration: str,
        *,
        cron: Optional[str] = None,
        every: Optional[float] = None,
        offset: float = 0.0,
        time_zone: Optional[str] = None,
        input: Any = None,
        version: Optional[str] = None,
        overlap: str = "skip",
        catchup_window: Optional[float] = None,
        jitter: float = 0.0,
        paused: bool = False,
        note: Optional[str] = None,
        start: "Optional[Time]" = None,
        end: "Optional[Time]" = None,
        timeout: float = 0.0,
    ) -> None:
        """Creates schedule ``schedule_id`` (duro_client_schedule_create;
        docs/schedules.md): every runtime on the store with schedules on
        starts an instance of ``orchestration`` (``version``; ``input``
        JSON-encoded) at each fire time, exactly once across them, as
        instance "<schedule_id>@<fire time, RFC 3339 UTC>". Fire times come
        from ``cron`` (5 or 6 fields or a macro such as "@daily", read in
        ``time_zone``, a tz database name; None: UTC) or from ``every``
        (seconds; fires at ``offset`` + k * ``every`` since the epoch):
        exactly one of the two. ``overlap``: what a fire does while the
        last instance still runs, one of "skip" (the default),
        "buffer_one", "allow_all", "cancel_other", "terminate_other".
        ``catchup_window`` (seconds, None: 365 days): a fire due longer ago
        than this after a downtime is skipped; ``jitter`` (seconds): each
        fire is due up to this much after its time; ``paused`` (with
        ``note``): created paused; ``start``/``end`` (aware datetimes or
        seconds since the epoch): no fire before ``start`` or from ``end``
        on; ``timeout`` (seconds, 0: none): each instance's deadline after
        its start.

        Refused: an unknown ``overlap`` (``InvalidArgument`` naming the
        choices), a naive datetime (``ValueError``), and what libduro
        refuses with its message: both ``cron`` and ``every`` or neither,
        a cron expression that does not parse (naming the field), an
        ``offset`` outside 0 .. ``every``, a catch-up window under 1 s, a
        negative jitter, ``end`` before ``start``, an empty or '@'-holding
        id, an empty orchestration name (``InvalidArgument``); a time zone
        the tz database does not hold (``NotFound``); an id over 200 bytes
        (``Error``, DURO_TOO_LARGE); a taken id (``AlreadyExists``)."""
        spec = _schedule_spec(
            "Client.create_schedule", orchestration, cron, every, offset,
            time_zone, input, version, overlap, catchup_window, jitter,
            paused, note, start, end, timeout,
        )
        self._native.schedule_put(False, schedule_id, spec)

    def update_schedule(
        self,
        schedule_id: str,
        orchestration: str,
        *,
        cron: Optional[str] = None,
        every: Optional[float] = None,
        offset: float = 0.0,
        time_zone: Optional[str] = None,
        input: Any = None,
        version: Optional[str] = None,
        overlap: str = "skip",
        catchup_window: Optional[float] = None,
        jitter: float = 0.0,
        paused: bool = False,
        note: Optional[str] = None,
        start: "Optional[Time]" = None,
        end: "Optional[Time]" = None,
        timeout: float = 0.0,
    ) -> None:
        """Replaces the whole spec of schedule ``schedule_id``
        (duro_client_schedule_update): every keyword as for
        ``create_schedule``, a keyword left out takes its default, not the
        old value. The next fire is recomputed from now; fires already
        decided stand. The refusals of ``create_schedule``, and
        ``NotFound`` for an unknown schedule."""
        spec = _schedule_spec(
            "Client.update_schedule", orchestration, cron, every, offset,
            time_zone, input, version, overlap, catchup_window, jitter,
            paused, note, start, end, timeout,
        )
        self._native.schedule_put(True, schedule_id, spec)

    def pause_schedule(self, schedule_id: str, note: Optional[str] = None) -> None:
        """Pauses schedule ``schedule_id`` (``note``: why): it fires no
        more until resumed; instances it started are not touched.
        ``NotFound`` for an unknown schedule."""
        self._native.schedule_pause(schedule_id, note)

    def resume_schedule(self, schedule_id: str) -> None:
        """Resumes schedule ``schedule_id``: its next fire is the first
        fire time after now (the pause's fire times are not made up).
        ``NotFound`` for an unknown schedule."""
        self._native.schedule_verb(0, schedule_id)

    def trigger_schedule(self, schedule_id: str) -> Optional[str]:
        """Fires schedule ``schedule_id`` now, paused or not, under its
        overlap policy: returns the started instance's id,
        "<schedule_id>@trigger-<now>", or None when the policy started
        none (it skipped or buffered the fire: describe's recent fires say
        which). ``NotFound`` for an unknown schedule."""
        return self._native.schedule_trigger(schedule_id)

    def delete_schedule(self, schedule_id: str) -> None:
        """Deletes schedule ``schedule_id`` and its fires log; instances it
        started are not touched. ``NotFound`` for an unknown schedule."""
        self._native.schedule_verb(1, schedule_id)

    def list_schedules(self) -> List[ScheduleInfo]:
        """Every schedule on the store, in id order."""
        return [ScheduleInfo._from(d) for d in self._native.schedule_list()]

    def describe_schedule(
        self, schedule_id: str, next: int = 5, fires: int = 10
    ) -> ScheduleDescription:
        """Schedule ``schedule_id`` with its ``next`` fire times as planned
        now (at most 100; none while paused) and its ``fires`` most recent
        fires, newest first, with their instances' status now (at most
        100). ``NotFound`` for an unknown schedule; ``InvalidArgument``
        for a count out of range."""
        schedules, next_ms, recent = self._native.schedule_describe(
            schedule_id, next, fires
        )
        return ScheduleDescription(
            ScheduleInfo._from(schedules[0]),
            [_dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc) for ms in next_ms],
            [ScheduleFire._from(d) for d in recent],
        )

    def close(self) -> None:
        """Releases the client's connection."""
        self._native.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TestEnv:
    """A test environment on a virtual clock (duro_test_env): a temporary
    SQLite store (or the store at ``url``), a ``client`` and a runtime for
    ``registry``. ``wait()`` waits for an instance and, whenever nothing can
    run (no turn or activity in progress, nothing due now), moves the clock
    to the next timer, delayed start, retry or deadline in the store, so a
    30-day workflow completes in milliseconds; ``advance()`` moves it by
    hand; ``mock_activity()`` replaces an activity by name before
    ``start()``. The clock is the process's as duro reads it: one TestEnv
    at a time per process. A context manager: entering starts it, leaving
    closes it (and removes a temporary store)."""

    __test__ = False  # not a pytest test class

    def __init__(self, registry: Registry, url: Optional[str] = None) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("registry must be a duro.Registry")
        self._native = _duro.TestEnv(registry._native, url)
        self._registry = registry
        client = Client.__new__(Client)
        client._native = _duro.Client(self._native)
        self._client = client
        _live_envs.add(self)

    @property
    def client(self) -> Client:
        """The environment's client (closed with it)."""
        return self._client

    def mock_activity(self, name: str, fn: Callable) -> None:
        """Runs ``fn(ctx, input)`` (a ``def`` or ``async def``, as
        ``Registry.activity``) instead of the activity registered as
        ``name``, or adds it; before ``start()`` only (``InvalidState``
        after)."""
        self._native.mock_activity(name, _activity_runner(fn))

    def start(self) -> "TestEnv":
        """Starts the runtime."""
        self._native.start()
        return self

    def advance(self, seconds: float) -> None:
        """Moves the clock ``seconds`` forward (``InvalidArgument`` when
        negative) and wakes the runtime, so what became due runs."""
        self._native.advance(int(seconds * 1000))

    @property
    def skipped(self) -> float:
        """Seconds the clock is ahead of real time (every skip and
        advance)."""
        return float(self._native.skipped_ms()) / 1000.0

    def wait(self, instance_id: str, timeout: Optional[float] = None) -> InstanceInfo:
        """``Client.wait`` that skips time: waits until the instance
        finished, at most ``timeout`` seconds of real time (None: no
        deadline; ``Timeout`` after), skipping to the next due time whenever
        nothing can run. ``NotFound`` for an unknown instance."""
        ms = -1 if timeout is None else int(timeout * 1000)
        code, info = _wait_handling_signals(self._native, instance_id, ms)
        if code == _duro.DURO_TIMEOUT:
            raise Timeout(
                f"TestEnv.wait: {instance_id} not finished after {timeout} s "
                f"(status {info['status'] if info else '?'}, "
                f"{self.skipped:.0f} s skipped)"
            )
        return InstanceInfo._from(info)

    def close(self) -> None:
        """Shuts the runtime down, closes the store (removing a temporary
        one) and gives the process its real clock back."""
        self._native.close()
        _live_envs.discard(self)

    def __enter__(self) -> "TestEnv":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def replay_json(registry: Registry, document: str) -> None:
    """Replays every execution of an exported history (the JSON document of
    ``Client.export_history``) through ``registry``'s code on this thread,
    with no store (duro_replay_json): returns when the code still matches,
    raises ``Nondeterminism`` naming the execution, the event and both sides
    when it does not, ``InvalidArgument`` for a document that is not one."""
    _duro.replay_json(registry._native, document)


def replay_file(registry: Registry, path: str) -> None:
    """``replay_json`` over the file at ``path`` (duro_replay_file): the
    replay test a team runs in CI over histories kept from production."""
    _duro.replay_file(registry._native, path)


def schedule_next_fires(
    orchestration: str,
    *,
    cron: Optional[str] = None,
    every: Optional[float] = None,
    offset: float = 0.0,
    time_zone: Optional[str] = None,
    input: Any = None,
    version: Optional[str] = None,
    overlap: str = "skip",
    catchup_window: Optional[float] = None,
    jitter: float = 0.0,
    paused: bool = False,
    note: Optional[str] = None,
    start: "Optional[Time]" = None,
    end: "Optional[Time]" = None,
    timeout: float = 0.0,
    after: "Optional[Time]" = None,
    count: int = 5,
) -> List[_dt.datetime]:
    """The first ``count`` fire times (aware UTC datetimes) after ``after``
    (an aware datetime or seconds since the epoch; None: now) of the spec
    ``Client.create_schedule`` takes, without a store
    (duro_schedule_spec_next_times; ``duro schedule create --dry-run``):
    fewer when ``end`` comes first. The refusals of ``create_schedule``'s
    checks (``InvalidArgument``, ``NotFound`` for an unknown time zone,
    ``ValueError`` for a naive datetime), and ``InvalidArgument`` for a
    ``count`` outside 0 .. 10000."""
    spec = _schedule_spec(
        "schedule_next_fires", orchestration, cron, every, offset, time_zone,
        input, version, overlap, catchup_window, jitter, paused, note, start,
        end, timeout,
    )
    after_ms = int(time.time() * 1000) if after is None else _aware_ms("after", after)
    return [
        _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)
        for ms in _duro.schedule_next_times(spec, after_ms, count)
    ]


def _debug_counters() -> Dict[str, int]:
    """Driver starts, steps and destroys since import (for tests)."""
    return _duro._debug_counters()
