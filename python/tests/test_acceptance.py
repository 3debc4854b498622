"""Issue 24's acceptance program, as written there (only the database path
is the test's own: a SQLite file in the test's directory, or a schema of
the PostgreSQL server in the python_postgres run)."""


def test_process_order_runs_as_written(db):

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

    with duro.Runtime(db, reg):
        client = duro.Client(db)
        client.start("ProcessOrder", "order-1", {"amount": 42})
        client.raise_event("order-1", "approval", "alice")
        info = client.wait("order-1", timeout=10)
        assert info.status == "Completed" and info.output == {"status": "approved", "by": "alice", "charged": 42}
