"""An order cancelled half-way runs its compensations: reserve the items,
charge the card, ship. The orchestration is registered with
observe_cancel=True, so a cancel is delivered to its code: the await in
progress (Ship, which waits for the warehouse) raises duro.TaskCancelled,
and the code undoes what was done, newest first - refund the charge, then
release the reservation - before the instance ends Cancelled. History
records every step and every compensation; the custom status says which
ran.

The script starts one order, cancels it once it is shipping, waits, and
prints the outcome and the compensations that ran (read from history).

    python3 examples/python/order_compensation.py [URL]   (default sqlite:orders.db)
"""
import json
import sys
import time
import uuid

import duro

reg = duro.Registry()


@reg.activity("Reserve")
def reserve(ctx, order):
    return {"reservation": f"R-{order['id']}", "items": order["items"]}


@reg.activity("Release")
def release(ctx, reservation):
    return f"released {len(reservation['items'])} items of {reservation['reservation']}"


@reg.activity("Charge")
def charge(ctx, order):
    return {"charge": f"C-{order['id']}", "amount": order["amount"]}


@reg.activity("Refund")
def refund(ctx, payment):
    return f"refunded {payment['amount']:.2f} EUR of {payment['charge']}"


@reg.activity("Ship")
def ship(ctx, order):
    # waits for the warehouse; a cancel of the order stops the wait
    if ctx.wait_cancelled(60):
        raise RuntimeError(f"shipping stopped: {ctx.cancel_reason}")
    return {"parcel": f"P-{order['id']}"}


@reg.orchestration("OrderWithCompensation", observe_cancel=True)
async def order_with_compensation(ctx, order):
    undo = []  # (activity, input) of each step done, to run newest first
    try:
        reservation = await ctx.call_activity("Reserve", order)
        undo.append(("Release", reservation))
        payment = await ctx.call_activity("Charge", order)
        undo.append(("Refund", payment))
        ctx.set_custom_status({"stage": "shipping"})
        parcel = await ctx.call_activity("Ship", order)
        ctx.set_custom_status({"stage": "shipped"})
        return {"status": "shipped", **parcel}
    except duro.TaskCancelled:
        if not ctx.cancel_requested:
            raise  # a task cancelled for another reason: not handled here
        ctx.log(f"order {order['id']} cancelled ({ctx.cancel_reason}): "
                f"undoing {len(undo)} steps")
        done = []
        for activity, step in reversed(undo):
            done.append(await ctx.call_activity(activity, step))
        ctx.set_custom_status({"stage": "compensated", "compensations": done})
        return {"status": "compensated", "compensations": done}


def main(url):
    with duro.Runtime(url, reg):
        client = duro.Client(url)
        order_id = uuid.uuid4().hex[:8]  # a new order per run
        iid = client.start("OrderWithCompensation", f"order-{order_id}",
                           {"id": order_id, "items": ["book", "lamp"],
                            "amount": 42.5})
        deadline = time.monotonic() + 30
        while (client.status(iid).custom_status or {}).get("stage") != "shipping":
            if time.monotonic() > deadline:
                print(f"{iid}: never reached shipping", file=sys.stderr)
                return 1
            time.sleep(0.01)
        client.cancel(iid, "customer changed their mind", requested_by="example")
        info = client.wait(iid, timeout=30)

    history = client.history(iid)
    scheduled = {e["event_id"]: e["name"] for e in history
                 if e["kind"] == "ActivityScheduled"}
    steps, ran = [], []
    for e in history:
        name = scheduled.get(e["source_event_id"])
        if e["kind"] == "ActivityCompleted" and name in ("Refund", "Release"):
            ran.append((name, json.loads(e["payload"])))
        elif e["kind"] == "ActivityCompleted":
            steps.append(f"{name} done")
        elif e["kind"] == "ActivityCancelRequested":
            steps.append(f"{name} cancelled ({e['reason']})")
    print(f"{iid}: {info.status} ({info.error})")
    print("  steps:", ", ".join(steps))
    print("  compensations:", "; ".join(f"{n}: {out}" for n, out in ran))
    ok = info.status == "Cancelled" and [n for n, _ in ran] == ["Refund", "Release"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:orders.db"))
