#!/usr/bin/env python3
"""pty_run.py [--expect TEXT | --send TEXT]... -- CMD [ARGS...]

Runs CMD with a new pseudo-terminal as its stdin, stdout and stderr (its
controlling terminal), as a person at a terminal would, for test_cli.sh:
duro's confirmation prompt and bash's completion need a terminal. The
steps run in order: --expect TEXT waits until what CMD has printed since
the previous --expect holds TEXT (10 s at most), --send TEXT types TEXT
(\\n, \\t, \\r, \\x04 and other backslash escapes are understood). Then it
reads until CMD closes the terminal (30 s at most) and prints on stdout
everything CMD printed (the terminal's echo of what was typed included),
and exits with CMD's exit status: 124 when an --expect was not met or CMD
did not end in time (it is killed), 125 for a bad command line.
"""
import os
import pty
import select
import signal
import sys
import time


def usage():
    sys.stderr.write(__doc__)
    sys.exit(125)


def main():
    args = sys.argv[1:]
    steps = []
    while args and args[0] != "--":
        if len(args) < 2 or args[0] not in ("--expect", "--send"):
            usage()
        text = args[1].encode("utf-8").decode("unicode_escape").encode("latin-1")
        steps.append((args[0], text))
        args = args[2:]
    if len(args) < 2:
        usage()
    command = args[1:]
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    seen = b""  # everything printed
    mark = 0  # where the next --expect starts looking

    def read_some(deadline):
        """Reads what is there until the deadline; False at end of file."""
        nonlocal seen
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        ready, _, _ = select.select([fd], [], [], min(left, 0.1))
        if not ready:
            return True
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the other side is closed
            return False
        if not data:
            return False
        seen += data
        return True

    def give_up(why):
        sys.stdout.buffer.write(seen)
        sys.stdout.flush()
        sys.stderr.write("pty_run: %s\n" % why)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit(124)

    for kind, text in steps:
        if kind == "--send":
            os.write(fd, text)
            continue
        deadline = time.monotonic() + 10
        while text not in seen[mark:]:
            if time.monotonic() >= deadline or not read_some(deadline):
                give_up("%r not printed within 10 s" % text)
        mark = seen.index(text, mark) + len(text)
    deadline = time.monotonic() + 30
    while read_some(deadline):
        if time.monotonic() >= deadline:
            give_up("the command did not end within 30 s")
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    sys.stdout.buffer.write(seen)
    sys.stdout.flush()
    sys.exit(os.waitstatus_to_exitcode(status) if status else 0)


if __name__ == "__main__":
    main()
