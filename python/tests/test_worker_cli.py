"""`python3 -m duro worker MODULE:ATTRIBUTE --db URL` (duro/__main__.py):
it runs a module's registry until SIGTERM or SIGINT, serving instances
started by the `duro` command and by duro.Client, then shuts down
gracefully and exits 0 (work in flight at its deadline abandoned back to
the queue, run again by the next worker); its --help and its usage errors.
And Ctrl-C in a script whose main thread is blocked in Client.wait() with
a live Runtime: KeyboardInterrupt at once, the runtime shut down, no
hang."""
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time

import duro
import pytest

DURO_BIN = os.environ.get("DURO_TEST_DURO_BIN")

APP = textwrap.dedent("""
    import os
    import duro

    registry = duro.Registry()

    @registry.activity("Greet")
    def greet(ctx, name):
        return f"Hello, {name}!"

    @registry.activity("Hold")
    def hold(ctx, marker):
        # the first delivery runs until the worker's shutdown cancels it
        if ctx.delivery == 1:
            open(marker, "w").close()
            ctx.wait_cancelled(60)
            return "first delivery"
        return f"delivery {ctx.delivery}"

    @registry.orchestration("Hello")
    async def hello(ctx, name):
        return await ctx.call_activity("Greet", name)

    @registry.orchestration("Held")
    async def held(ctx, marker):
        return await ctx.call_activity("Hold", marker)
""")


@pytest.fixture
def app(tmp_path):
    """A directory holding the module cliapp (the workers' cwd)."""
    (tmp_path / "cliapp.py").write_text(APP)
    return tmp_path


class Lines:
    """The stderr of a process, read from its pipe with deadlines (no
    buffered reader: select() then tells the truth)."""

    def __init__(self, proc):
        self.proc = proc
        self.text = ""

    def until(self, text, seconds=60):
        deadline = time.monotonic() + seconds
        fd = self.proc.stderr.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while text not in self.text:
                left = deadline - time.monotonic()
                assert left > 0 and sel.select(left), \
                    f"no {text!r} within {seconds} s: {self.text}"
                chunk = os.read(fd, 65536)
                assert chunk, f"stderr ended before {text!r}: {self.text}"
                self.text += chunk.decode()

    def rest(self):
        self.text += self.proc.stderr.read().decode()
        return self.text


def start_worker(app, db, *args):
    p = subprocess.Popen(
        [sys.executable, "-m", "duro", "worker", *args, "--db", db],
        cwd=app, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    lines = Lines(p)
    try:
        lines.until("SIGTERM or SIGINT stops it")
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p, lines


def stop(p, lines, sig, seconds=60):
    """Sends sig; the exit status within the deadline, and stderr."""
    p.send_signal(sig)
    try:
        p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail(f"the worker still ran {seconds} s after "
                    f"{signal.Signals(sig).name}: {lines.text}")
    return p.returncode, lines.rest()


def wait_for_file(path, seconds=60):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


@pytest.mark.skipif(not DURO_BIN, reason="DURO_TEST_DURO_BIN is set by CTest")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_worker_serves_until_a_signal_then_exits_0(app, db, sig):
    p, lines = start_worker(app, db, "cliapp:registry",
                            "--worker-concurrency", "2")
    try:
        # an instance started by the duro command, one by a client
        cli = subprocess.run([DURO_BIN, "--db", db, "start", "Hello", "by-cli",
                              "--input", '"cli"'],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        client = duro.Client(db)
        client.start("Hello", "by-client", "client")
        for iid, out in (("by-cli", "Hello, cli!"),
                         ("by-client", "Hello, client!")):
            info = client.wait(iid, timeout=60)
            assert (info.status, info.output) == ("Completed", out), info
    finally:
        code, said = stop(p, lines, sig)
    name = signal.Signals(sig).name
    assert code == 0, said
    assert f"{name}: shutting down" in said and "stopped" in said, said


@pytest.mark.skipif(not DURO_BIN, reason="DURO_TEST_DURO_BIN is set by CTest")
def test_work_in_flight_at_the_deadline_runs_again_in_the_next_worker(app, db):
    marker = str(app / "held")
    p, lines = start_worker(app, db, "cliapp", "--shutdown-timeout", "0.2")
    client = duro.Client(db)
    client.start("Held", "held-1", marker)
    try:
        wait_for_file(marker)  # the activity runs
    finally:
        code, said = stop(p, lines, signal.SIGTERM)
    assert code == 0, said
    assert "abandoned" in said, said
    assert client.status("held-1").status == "Running"
    p, lines = start_worker(app, db, "cliapp:registry")
    try:
        info = client.wait("held-1", timeout=60)
    finally:
        code, said = stop(p, lines, signal.SIGINT)
    assert (info.status, info.output) == ("Completed", "delivery 2"), info
    assert code == 0, said


def run_cli(app, *args):
    return subprocess.run([sys.executable, "-m", "duro", *args], cwd=app,
                          capture_output=True, text=True, timeout=60)


def test_help_and_usage_errors(app):
    h = run_cli(app, "worker", "--help")
    assert h.returncode == 0, h.stderr
    for option in ("MODULE[:ATTRIBUTE]", "--db URL", "--worker-concurrency",
                   "--orchestration-concurrency", "--shutdown-timeout"):
        assert option in h.stdout, h.stdout
    top = run_cli(app, "--help")
    assert top.returncode == 0 and "worker" in top.stdout, top
    (app / "two.py").write_text("import duro\na = duro.Registry()\n"
                                "b = duro.Registry()\nc = 1\n")
    (app / "none.py").write_text("x = 1\n")
    for args, said in (
            ((), "expected a verb"),
            (("worker",), "MODULE[:ATTRIBUTE]"),
            (("worker", "nosuchmodule:registry"),
             "cannot import 'nosuchmodule'"),
            (("worker", "cliapp:nothing"), "no attribute 'nothing'"),
            (("worker", "cliapp:greet"),
             "not a duro.Registry: its type is function"),
            (("worker", "two"), "several: a, b"),
            (("worker", "none"), "holds no duro.Registry"),
            (("worker", "two:c"), "not a duro.Registry: its type is int"),
            (("worker", "cliapp", "--worker-concurrency", "x"), "invalid int")):
        r = run_cli(app, *args)
        assert r.returncode == 2 and said in r.stderr, (args, r)
    r = run_cli(app, "worker", "cliapp", "--db", "nosuchscheme:x")
    assert r.returncode == 1 and "DURO_BAD_URL" in r.stderr, r


SCRIPT = textwrap.dedent("""
    import sys
    import duro

    reg = duro.Registry()

    @reg.orchestration("Wait")
    async def wait(ctx, _):
        return await ctx.wait_event("never")

    db = sys.argv[1]
    try:
        with duro.Runtime(db, reg):
            client = duro.Client(db)
            client.start("Wait", "w1")
            print("waiting", flush=True)
            client.wait("w1")  # no deadline: only Ctrl-C ends it
    finally:
        print(f"live runtimes: {len(duro._live_runtimes)}", flush=True)
""")


def test_ctrl_c_in_a_script_blocked_in_client_wait(db):
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, db],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(p.stdout, selectors.EVENT_READ)
            assert sel.select(60), "the script never waited"
        assert p.stdout.readline() == "waiting\n"
        # the client's wait has begun (or is about to): either way the
        # interrupt must end it
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"still running 30 s after SIGINT: {out} {err}")
    # KeyboardInterrupt went up through the with (which shut the runtime
    # down) and ended the interpreter as Python does: killed by SIGINT
    assert p.returncode == -signal.SIGINT, (p.returncode, err)
    assert "KeyboardInterrupt" in err, err
    assert "Fatal Python error" not in err and "Segmentation" not in err, err
    assert out == "live runtimes: 0\n", out


def test_a_wait_in_slices_keeps_its_result_and_its_deadline(db):
    # Client.wait on the main thread waits in slices of 0.25 s (for Ctrl-C):
    # a wait across several slices still ends with the instance, and one
    # with a timeout not before the timeout
    reg = duro.Registry()

    @reg.orchestration("Late")
    async def late(ctx, seconds):
        await ctx.timer(seconds)
        return "late"

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("Late", "late-1", 0.8)
        client.start("Late", "late-2", 3600)
        info = client.wait("late-1")
        assert (info.status, info.output) == ("Completed", "late")
        began = time.monotonic()
        with pytest.raises(duro.Timeout):
            client.wait("late-2", timeout=0.6)
        assert time.monotonic() - began >= 0.59
        with pytest.raises(duro.Timeout):
            client.wait("late-2", timeout=0)
        client.terminate("late-2")
