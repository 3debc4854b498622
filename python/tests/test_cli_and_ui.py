"""The `duro` command and its console, `duro ui`, on instances of Python
code: one completed, one failed, one running (waiting for an event) on a
live runtime. `duro list`, `duro status` and `duro history` show them with
their JSON outputs, the failure's text and the events' payloads as JSON
values; `duro raise` completes the waiting one; `duro ui` (signed in with
its printed login code, as the page does, over plain HTTP) lists them and
serves the instance and its history; SIGTERM stops it with exit 0."""
import base64
import json
import os
import re
import selectors
import signal
import subprocess
import time
import urllib.request

import duro
import pytest

from helpers import kinds

DURO_BIN = os.environ.get("DURO_TEST_DURO_BIN")
pytestmark = pytest.mark.skipif(
    not DURO_BIN, reason="DURO_TEST_DURO_BIN is set by CTest")

reg = duro.Registry()


@reg.activity("Charge")
def charge(ctx, order):
    if order["amount"] < 0:
        raise ValueError("negative amount")
    return {"charged": order["amount"], "currency": "EUR"}


@reg.orchestration("PyOrder")
async def py_order(ctx, order):
    receipt = await ctx.call_activity("Charge", order)
    if order.get("wait"):
        receipt["approved_by"] = await ctx.wait_event("approval")
    return receipt


def duro_cmd(db, *args):
    p = subprocess.run([DURO_BIN, "--db", db, *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, (args, p.returncode, p.stderr)
    return p.stdout


def duro_json(db, *args):
    return json.loads(duro_cmd(db, *args, "--json"))


@pytest.fixture
def store(db):
    """A live runtime with py-ok Completed, py-bad Failed and py-wait
    Running, waiting for its event."""
    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("PyOrder", "py-ok", {"amount": 42})
        client.start("PyOrder", "py-bad", {"amount": -1})
        client.start("PyOrder", "py-wait", {"amount": 7, "wait": True})
        assert client.wait("py-ok", timeout=60).status == "Completed"
        assert client.wait("py-bad", timeout=60).status == "Failed"
        deadline = time.monotonic() + 60
        while kinds(client, "py-wait")[-1:] != ["EventSubscribed"]:
            assert time.monotonic() < deadline, kinds(client, "py-wait")
            time.sleep(0.01)
        yield db, client


def test_the_duro_command_shows_python_instances(store):
    db, client = store
    text = duro_cmd(db, "list", "--name", "PyOrder")
    for iid, status in (("py-ok", "completed"), ("py-bad", "failed"),
                        ("py-wait", "running")):
        assert re.search(rf"^{iid}\s+PyOrder\s+{status}\s", text, re.M), text
    listed = duro_json(db, "list", "--name", "PyOrder")["instances"]
    assert sorted((i["id"], i["status"]) for i in listed) == [
        ("py-bad", "failed"), ("py-ok", "completed"), ("py-wait", "running")]

    ok = duro_json(db, "status", "py-ok")
    assert ok["output"] == {"charged": 42, "currency": "EUR"}, ok
    assert "output:" in duro_cmd(db, "status", "py-ok") and \
        '"currency": "EUR"' in duro_cmd(db, "status", "py-ok")
    bad = duro_json(db, "status", "py-bad")
    failure = json.loads(bad["error"])  # the Python layer's failure text
    assert (bad["status"], bad["category"]) == ("failed", "application")
    assert failure["type"] == "ActivityFailed", failure
    assert failure["message"] == "ValueError: negative amount", failure
    assert "Traceback" in failure["traceback"], failure

    events = duro_json(db, "history", "py-ok")["events"]
    assert [(e["kind"], e.get("name"), e.get("payload")) for e in events] == [
        ("OrchestrationStarted", "PyOrder", {"amount": 42}),
        ("ActivityScheduled", "Charge", {"amount": 42}),
        ("ActivityCompleted", None, {"charged": 42, "currency": "EUR"}),
        ("OrchestrationCompleted", None, {"charged": 42, "currency": "EUR"})]
    assert "ActivityCompleted" in duro_cmd(db, "history", "py-ok")
    failed = [e for e in duro_json(db, "history", "py-bad")["events"]
              if e["kind"] == "ActivityFailed"]
    assert len(failed) == 1 and \
        json.loads(failed[0]["error"])["message"] == "negative amount", failed

    # the command raises the event the Python code waits for
    duro_cmd(db, "raise", "py-wait", "approval", '"bob"')
    info = client.wait("py-wait", timeout=60)
    assert (info.status, info.output) == (
        "Completed", {"charged": 7, "currency": "EUR", "approved_by": "bob"})
    assert duro_json(db, "status", "py-wait")["output"] == info.output


def ref(instance_id):
    return base64.urlsafe_b64encode(instance_id.encode()).decode().rstrip("=")


class Console:
    """A `duro ui` on a free port, signed in with its login code."""

    def __init__(self, db):
        self.proc = subprocess.Popen(
            [DURO_BIN, "--db", db, "ui", "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(60):
                self.close()
                pytest.fail("duro ui printed nothing within 60 s")
        line = self.proc.stdout.readline()
        if not line and "unsupported" in self.proc.stderr.read():
            self.close()
            pytest.skip("duro was built without duro ui (libmicrohttpd)")
        m = re.fullmatch(r"duro ui: (http://127\.0\.0\.1:\d+)/#login=([0-9a-f]{32})\n",
                         line)
        assert m, line
        self.base, code = m.groups()
        answer = self.request("POST", "/api/v1/session", {"code": code})
        self.session = answer["session"]

    def request(self, method, path, body=None):
        headers = {"Origin": self.base}
        if getattr(self, "session", None):
            headers["X-Duro-Session"] = self.session
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data,
                                     headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200, (path, r.status)
            payload = r.read().decode()
            return json.loads(payload) if path.startswith("/api/") else payload

    def close(self):
        """SIGTERM; the exit status within a deadline."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("duro ui still ran 60 s after SIGTERM")
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


def test_duro_ui_serves_python_instances(store):
    db, client = store
    ui = Console(db)
    try:
        assert "<html" in ui.request("GET", "/").lower()
        listed = ui.request("GET", "/api/v1/instances?name=PyOrder")
        rows = {i["id"]: i for i in listed["instances"]}
        assert sorted((i, r["status"]) for i, r in rows.items()) == [
            ("py-bad", "failed"), ("py-ok", "completed"),
            ("py-wait", "running")], listed
        assert rows["py-ok"]["ref"] == ref("py-ok")

        ok = ui.request("GET", f"/api/v1/instance?ref={ref('py-ok')}")
        assert (ok["id"], ok["status"], ok["output"]) == (
            "py-ok", "completed", {"charged": 42, "currency": "EUR"}), ok
        bad = ui.request("GET", f"/api/v1/instance?ref={ref('py-bad')}")
        assert bad["category"] == "application", bad
        assert "negative amount" in bad["error"], bad

        history = ui.request("GET", f"/api/v1/history?ref={ref('py-wait')}")
        assert [(e["kind"], e.get("payload")) for e in history["events"]] == [
            ("OrchestrationStarted", {"amount": 7, "wait": True}),
            ("ActivityScheduled", {"amount": 7, "wait": True}),
            ("ActivityCompleted", {"charged": 7, "currency": "EUR"}),
            ("EventSubscribed", None)], history
        # as the Python client reads it
        assert [e["kind"] for e in history["events"]] == \
            [e["kind"] for e in client.history("py-wait")]
    finally:
        status = ui.close()
    assert status == 0
