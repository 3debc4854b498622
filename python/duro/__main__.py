"""``python3 -m duro worker MODULE[:ATTRIBUTE] [--db URL] [options]``: a
worker process that runs a registry's orchestrations and activities until
SIGTERM or SIGINT, then shuts down gracefully and exits 0.

MODULE is imported as ``import`` would (the current directory first, as
``python3 -m`` puts it on ``sys.path``); ATTRIBUTE names its
``duro.Registry`` (dotted for a nested one), and may be left out when the
module holds exactly one. The store is ``--db URL``, else ``$DURO_DB``,
else ``sqlite:duro.db``, as for the ``duro`` command.

SIGTERM and SIGINT get a handler that does nothing but lets CPython write
the signal's number to a wakeup pipe, which the main thread reads (with the
GIL released): whichever thread the kernel picks to take the signal, the
main thread wakes. No signal is blocked, so the processes an activity
starts inherit no mask. The first one starts the shutdown, which stops
taking work and waits up to ``--shutdown-timeout`` seconds for what is in
flight; the process then exits 0."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import select
import signal
import sys
from typing import List, Optional

import duro

_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4, "off": 5}
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


class _UsageError(Exception):
    pass


def _say(text: str) -> None:
    print(f"duro worker: {text}", file=sys.stderr, flush=True)


def _masked(url: str) -> str:
    """``url`` without a password (``user:***@``, ``password=***``)."""
    url = re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)
    return re.sub(r"((?:^|[?&])password=)[^&]*", r"\1***", url)


def _find_registry(target: str) -> duro.Registry:
    """The Registry that ``target`` (MODULE[:ATTRIBUTE]) names."""
    module_name, _, attribute = target.partition(":")
    if not module_name:
        raise _UsageError(f"{target!r}: expected MODULE[:ATTRIBUTE]")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if e.name and (module_name == e.name or
                       module_name.startswith(e.name + ".")):
            raise _UsageError(f"cannot import {module_name!r}: {e}") from e
        raise  # an import inside the module failed: its traceback says where
    if attribute:
        obj = module
        for part in attribute.split("."):
            if not hasattr(obj, part):
                raise _UsageError(
                    f"module {module_name!r} has no attribute {attribute!r}")
            obj = getattr(obj, part)
        if not isinstance(obj, duro.Registry):
            raise _UsageError(f"{target} is not a duro.Registry: its type "
                              f"is {type(obj).__name__}")
        return obj
    found = sorted(name for name, value in vars(module).items()
                   if isinstance(value, duro.Registry))
    if len(found) != 1:
        raise _UsageError(
            f"module {module_name!r} holds "
            f"{'no duro.Registry' if not found else 'several: ' + ', '.join(found)}"
            f": name one ({module_name}:ATTRIBUTE)")
    return getattr(module, found[0])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m duro",
        description="duro for Python: run a registry's orchestrations and "
                    "activities.")
    parser.add_argument("--version", action="version",
                        version=f"duro {duro.__version__}")
    verbs = parser.add_subparsers(dest="verb", title="verbs", metavar="VERB")
    w = verbs.add_parser(
        "worker", help="run a worker until SIGTERM or SIGINT",
        description="Runs a duro.Runtime on the store with the registry "
                    "MODULE[:ATTRIBUTE] names until SIGTERM or SIGINT, then "
                    "shuts it down gracefully (exit 0). Options left out "
                    "keep duro's defaults.")
    w.add_argument("target", metavar="MODULE[:ATTRIBUTE]",
                   help="the module to import and its duro.Registry "
                        "(ATTRIBUTE may be left out when the module holds "
                        "exactly one)")
    w.add_argument("--db", metavar="URL",
                   default=os.environ.get("DURO_DB") or "sqlite:duro.db",
                   help="the store (default: $DURO_DB, else sqlite:duro.db)")
    w.add_argument("--orchestration-concurrency", type=int, default=-1,
                   metavar="N", help="turns run at once (turn threads)")
    w.add_argument("--worker-concurrency", "--concurrency", type=int,
                   default=-1, metavar="N",
                   help="activities run at once (worker slots)")
    w.add_argument("--cache-size", type=int, default=-1, metavar="N",
                   help="orchestrations kept in memory between turns "
                        "(0: replay every turn)")
    w.add_argument("--poll-interval", type=float, default=0.0, metavar="S",
                   help="seconds between two polls of the store when idle")
    w.add_argument("--log-level", choices=list(_LEVELS),
                   default=None, help="the runtime's log level (default "
                                      "warn)")
    w.add_argument("--shutdown-timeout", type=float, default=10.0,
                   metavar="S", help="how long a shutdown waits for work in "
                                     "flight (default 10)")
    return parser


def _catch_stop_signals() -> int:
    """Makes SIGTERM and SIGINT write their number to a pipe; returns the
    pipe's read end. From here on they no longer end the process."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)
    return read_end


def _wait_for_a_stop_signal(read_end: int) -> int:
    """Blocks until SIGTERM or SIGINT came (also before this call); returns
    its number."""
    while True:
        select.select([read_end], [], [])  # retried after a handler (PEP 475)
        for number in os.read(read_end, 64):
            if number in _STOP_SIGNALS:
                return number


def _worker(args: argparse.Namespace) -> int:
    # First: a signal that comes while the module loads or the runtime
    # starts stops the worker once it runs, never kills it half-way.
    stop = _catch_stop_signals()
    registry = _find_registry(args.target)
    for name in ("orchestration_concurrency", "worker_concurrency",
                 "cache_size"):
        if getattr(args, name) < -1:
            raise _UsageError(f"--{name.replace('_', '-')} must be >= 0")
    runtime = duro.Runtime(
        args.db, registry,
        orchestration_concurrency=args.orchestration_concurrency,
        worker_concurrency=args.worker_concurrency,
        cache_size=args.cache_size,
        poll_interval=args.poll_interval,
        log_level=-1 if args.log_level is None else _LEVELS[args.log_level])
    runtime.start()
    _say(f"running {args.target} on {_masked(args.db)} (pid {os.getpid()}); "
         f"SIGTERM or SIGINT stops it")
    got = _wait_for_a_stop_signal(stop)
    _say(f"{signal.Signals(got).name}: shutting down (waits up to "
         f"{args.shutdown_timeout:g} s for work in flight)")
    if not runtime.shutdown(timeout=args.shutdown_timeout):
        _say("activities still running at the deadline were abandoned "
             "(they run again elsewhere)")
    _say("stopped")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; returns the exit status (0 ok, 1 failed, 2
    usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verb != "worker":
        parser.error("expected a verb: worker")
    try:
        return _worker(args)
    except _UsageError as e:
        _say(str(e))
        return 2
    except duro.Error as e:
        _say(f"{getattr(e, 'errname', 'DURO_ERROR')}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
