"""A worker process killed with SIGKILL in the middle of a workflow, then
restarted: the instance completes with the exact output, its history is
dense, and every scheduled activity has exactly one completion."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import duro

WORKER = textwrap.dedent("""
    import sys, time
    import duro

    reg = duro.Registry()

    @reg.activity("Step")
    def step(ctx, x):
        time.sleep(0.1)
        return x + 1

    @reg.orchestration("Chain")
    async def chain(ctx, n):
        x = 0
        for _ in range(n):
            x = await ctx.call_activity("Step", x)
        return x

    with duro.Runtime(sys.argv[1], reg, orchestration_lock_timeout=1.0,
                      worker_lock_timeout=1.0, lock_renewal=0.2):
        print("ready", flush=True)
        while True:
            time.sleep(1)
""")


def completions(client, instance_id):
    try:
        return sum(e["kind"] == "ActivityCompleted"
                   for e in client.history(instance_id))
    except duro.NotFound:
        return 0


def start_worker(db):
    p = subprocess.Popen([sys.executable, "-c", WORKER, db],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_a_worker_killed_mid_workflow_and_restarted(db):
    client = duro.Client(db)
    client.start("Chain", "k1", 8)
    first = start_worker(db)
    try:
        deadline = time.monotonic() + 30
        while completions(client, "k1") < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert client.status("k1").status == "Running"
    second = start_worker(db)
    try:
        info = client.wait("k1", timeout=60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    assert (info.status, info.output) == ("Completed", 8)
    history = client.history("k1")
    assert [e["event_id"] for e in history] == list(range(1, len(history) + 1))
    scheduled = [e["event_id"] for e in history
                 if e["kind"] == "ActivityScheduled"]
    done = [e["source_event_id"] for e in history
            if e["kind"] == "ActivityCompleted"]
    assert len(scheduled) == 8 and sorted(done) == scheduled, history
