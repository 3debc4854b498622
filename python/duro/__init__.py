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
import inspect
import json
import random as _random
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

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
    "Error",
    "NotFound",
    "AlreadyExists",
    "InvalidState",
    "Timeout",
    "Nondeterminism",
    "TaskFailed",
    "ActivityFailed",
    "SubOrchestrationFailed",
    "TaskCancelled",
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


for _code, _cls in (
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
        """Starts child orchestration ``name``; the task completes with it."""
        return self._n.call_sub_orchestration(
            name, version, instance_id, _encode(input), _ChildTask
        )

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
        try:
            value = fn(ctx, _decode(input))
            if inspect.iscoroutine(value):
                value = asyncio.run(_run_cancellable(value, ctx))
            return ("ok", _encode(value))
        except (Exception, asyncio.CancelledError) as e:
            return ("fail", _failure_text(e))

    return run


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
    ) -> Callable[[Callable], Callable]:
        """Decorator: registers an ``async def f(ctx, input)``. With
        ``observe_cancel`` a cancel is delivered to the code: its pending
        awaits raise ``TaskCancelled``, ``ctx.cancel_requested`` turns True,
        and it may run cleanup work (within ``cleanup_timeout`` seconds, 0:
        the runtime's default) before the instance ends Cancelled."""

        def deco(fn: Callable) -> Callable:
            self._native.add_orchestration(
                name or fn.__name__,
                version,
                _orchestration_starter(fn),
                observe_cancel,
                int(cleanup_timeout * 1000),
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


class Runtime:
    """Runs the registry's orchestrations and activities on the store at
    ``url`` ("sqlite:path", "postgres://..."). A context manager: entering
    starts it, leaving shuts it down. Runtimes still running when the
    interpreter exits are shut down by an atexit hook. Options left at
    their defaults (-1, 0, None) keep duro's (duro_runtime_options);
    durations are in seconds. ``cancel_grace`` is how long a cancelled
    activity may take to return before its worker slot gets a new thread
    and the old one is abandoned (default 10)."""

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
    for rt in list(_live_runtimes):
        try:
            rt.shutdown(timeout=5.0)
        except Exception:
            pass
    _duro._set_finalizing()


@dataclass
class InstanceInfo:
    """An instance's status. ``status`` is "Pending", "Running",
    "Completed", "Failed", "Cancelled", "Terminated", "Suspended" or
    "ContinuedAsNew"; ``output`` and ``custom_status`` are decoded from
    JSON; ``error`` is the failure's message, ``error_type`` its Python type
    name when it came from Python code."""

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
        )


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
    ) -> str:
        """Creates instance ``instance_id`` of ``orchestration``; returns
        the id."""
        self._native.start(
            instance_id, orchestration, _encode(input), version, int(delay * 1000), idempotent
        )
        return instance_id

    def raise_event(
        self, instance_id: str, name: str, payload: Any = None, *, event_id: Optional[str] = None
    ) -> None:
        """Raises external event ``name`` with ``payload`` (JSON-encoded);
        with ``event_id`` it is delivered at most once per id."""
        self._native.raise_event(instance_id, name, _encode(payload), event_id)

    def cancel(
        self, instance_id: str, reason: Optional[str] = None, requested_by: Optional[str] = None
    ) -> None:
        """Requests cancellation of the instance."""
        self._native.cancel(instance_id, reason, requested_by)

    def terminate(
        self, instance_id: str, reason: Optional[str] = None, requested_by: Optional[str] = None
    ) -> None:
        """Ends the instance without running its code."""
        self._native.terminate(instance_id, reason, requested_by)

    def status(self, instance_id: str) -> InstanceInfo:
        """The instance's status (status "NotFound" when there is none)."""
        return InstanceInfo._from(self._native.status(instance_id))

    def wait(self, instance_id: str, timeout: Optional[float] = None) -> InstanceInfo:
        """Waits until the instance finished; raises ``Timeout`` after
        ``timeout`` seconds (None: no deadline)."""
        ms = -1 if timeout is None else int(timeout * 1000)
        code, info = self._native.wait(instance_id, ms)
        if code == _duro.DURO_TIMEOUT:
            raise Timeout(
                f"Client.wait: {instance_id} not finished after {timeout} s "
                f"(status {info['status'] if info else '?'})"
            )
        return InstanceInfo._from(info)

    def history(self, instance_id: str, execution_id: int = 0) -> List[Dict[str, Any]]:
        """The events of an execution (0: the current one), as dicts with
        ``kind`` ("ActivityScheduled", ...), ``event_id``, ``name``,
        ``payload``, ``error``, ``reason``, ``source_event_id``."""
        return self._native.history(instance_id, execution_id)

    def suspend(
        self, instance_id: str, reason: Optional[str] = None, requested_by: Optional[str] = None
    ) -> None:
        """Suspends the instance: it takes no decisions until resumed."""
        self._native.suspend_resume(False, instance_id, reason, requested_by)

    def resume(
        self, instance_id: str, reason: Optional[str] = None, requested_by: Optional[str] = None
    ) -> None:
        """Resumes a suspended instance."""
        self._native.suspend_resume(True, instance_id, reason, requested_by)

    def replay(self, registry: Registry, instance_id: str, execution_id: int = 0) -> None:
        """Replays the recorded history of an execution (0: the current one)
        through ``registry``'s code on this thread, with no runtime: returns
        when the code still matches, raises ``Nondeterminism`` naming the
        event and both sides when it does not."""
        self._native.replay(registry._native, instance_id, execution_id)

    def close(self) -> None:
        """Releases the client's connection."""
        self._native.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _debug_counters() -> Dict[str, int]:
    """Driver starts, steps and destroys since import (for tests)."""
    return _duro._debug_counters()
