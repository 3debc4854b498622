"""The order workflow of issue 24 in Python: charge, then wait for an
approval or 30 s, whichever comes first (the other is cancelled).

    python3 examples/python/process_order.py [URL]   (default sqlite:orders.db)
"""
import sys

import duro

reg = duro.Registry()


@reg.activity("Charge")
def charge(ctx, order):
    return {"charged": order["amount"]}


@reg.orchestration("ProcessOrder")
async def process_order(ctx, order):
    first = await ctx.call_activity("Charge", order)
    approval = ctx.wait_event("approval")
    timeout = ctx.timer(30)
    winner = await ctx.any(approval, timeout)
    if winner is timeout:
        return {"status": "expired", **first}
    return {"status": "approved", "by": approval.result(), **first}


def main(url):
    with duro.Runtime(url, reg):
        client = duro.Client(url)
        iid = client.start("ProcessOrder", f"order-{new_id()}", {"amount": 42})
        client.raise_event(iid, "approval", "alice")
        info = client.wait(iid, timeout=10)
        print(f"{iid}: {info.status} {info.output}")
        for e in client.history(iid):
            print(f"  {e['event_id']:3} {e['kind']}")
        return 0 if info.status == "Completed" else 1


def new_id():
    """A new instance id per run, so the example runs again on one file."""
    import uuid

    return uuid.uuid4().hex[:8]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:orders.db"))
