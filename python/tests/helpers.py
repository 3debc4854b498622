"""What several test files share (imported as `helpers`: pytest puts this
folder on sys.path)."""
import time

import duro


def kinds(client, instance_id):
    """The kinds of the current execution's events ([] before it began: a
    started instance has no execution until its first turn)."""
    try:
        return [e.kind for e in client.history(instance_id)]
    except duro.NotFound:
        return []


def wait_for(cond, what, seconds=30):
    """Polls cond() until it is true, failing after the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
