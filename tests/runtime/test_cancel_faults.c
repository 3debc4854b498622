/* test_cancel_faults.c - lock renewal failures and cancellation, with the
 * fault-injecting wrapper around a real SQLite provider: retryable renewal
 * errors (database busy) never cancel an activity; a permanent one fires its
 * token ("lock_lost"), its result is discarded and its row goes back to the
 * queue, so the activity runs again and the instance still completes. */
#include <stdlib.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"

static struct {
    _Atomic int started;
    _Atomic int cancel_seen;
    _Atomic int finish; /* lets a running activity return */
    _Atomic int deliveries[8];
    char reason[32];
} seen;

/* Waits until told to finish (or cancelled); records what it saw. */
static int act_hold(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    int run = atomic_fetch_add(&seen.started, 1);
    if (run < 8)
        atomic_store(&seen.deliveries[run], (int)duro_activity_delivery(a));
    while (!atomic_load(&seen.finish)) {
        if (duro_activity_wait_cancelled(a, 5)) {
            snprintf(seen.reason, sizeof(seen.reason), "%s",
                     duro_activity_cancel_reason(a));
            atomic_fetch_add(&seen.cancel_seen, 1);
            return duro_fail(out, "cancelled");
        }
    }
    return duro_ok(out, "held and finished");
}

static int orch_one(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Hold", "x");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

typedef struct faulty_fixture {
    rt_fixture f;
    duro_provider *wrapper;
} faulty_fixture;

static void start_faulty(faulty_fixture *x, const char *db)
{
    memset(&seen, 0, sizeof(seen));
    rt_init(&x->f, db);
    CHECK_OK(duro_registry_add_activity(x->f.reg, "Hold", act_hold, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(x->f.reg, "One", NULL, orch_one, NULL));
    x->f.opts.worker_lock_timeout_ms = 4000;
    x->f.opts.lock_renewal_ms = 50;
    duro_provider *inner;
    duro_error err;
    CHECK_PRC(duro_provider_open(x->f.url, &inner, &err), DURO_OK, &err);
    x->wrapper = faulty_provider_wrap(inner, 1);
    CHECK(x->wrapper != NULL);
    CHECK_OK(duro_runtime_create_with_provider(x->wrapper, x->f.reg, &x->f.opts,
                                               &x->f.rt));
    CHECK_OK(duro_runtime_start(x->f.rt));
    CHECK_OK(duro_client_create(x->f.url, &x->f.client));
}

static void done_faulty(faulty_fixture *x)
{
    rt_done(&x->f);
    duro_provider_close(x->wrapper);
}

TEST(retryable_renewal_errors_do_not_cancel)
{
    faulty_fixture x;
    start_faulty(&x, "f_retryable.db");
    rt_start_instance(&x.f, "r", "One", NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    uint64_t before =
        faulty_provider_calls(x.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK);
    faulty_provider_fail_always(x.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 1);
    /* at least 10 renewals fail as "busy" (well inside the lock timeout) */
    WAIT_UNTIL(faulty_provider_calls(x.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK) >=
                   before + 10,
               20000);
    faulty_provider_fail_always(x.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 0);
    atomic_store(&seen.finish, 1);
    duro_instance_info *i = rt_wait(&x.f, "r", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "held and finished");
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 0);
    CHECK_EQ(atomic_load(&seen.started), 1);
    duro_metrics m;
    rt_final_metrics(&x.f, &m);
    CHECK_EQ(m.lock_renewal_failures, 0);
    CHECK_INT(m.storage_retries, >=, 10);
    CHECK_EQ(m.activities_completed, 1);
    done_faulty(&x);
}

TEST(permanent_renewal_error_cancels_and_the_row_is_redelivered)
{
    faulty_fixture x;
    start_faulty(&x, "f_permanent.db");
    rt_start_instance(&x.f, "p", "One", NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    faulty_provider_fail_nth(x.wrapper, 1, FAULTY_RENEW_WORK_ITEM_LOCK, 0);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 20000);
    CHECK_STR(seen.reason, "lock_lost");
    /* the lock was lost, not the activity: it runs again, delivery 2 */
    WAIT_UNTIL(atomic_load(&seen.started) == 2, 20000);
    CHECK_EQ(atomic_load(&seen.deliveries[0]), 1);
    CHECK_EQ(atomic_load(&seen.deliveries[1]), 2);
    atomic_store(&seen.finish, 1);
    duro_instance_info *i = rt_wait(&x.f, "p", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    CHECK_EQ(rt_count_events(&x.f, "p", DURO_EVENT_ACTIVITY_COMPLETED), 1);
    CHECK_EQ(rt_count_events(&x.f, "p", DURO_EVENT_ACTIVITY_FAILED), 0);
    duro_metrics m;
    rt_final_metrics(&x.f, &m);
    CHECK_EQ(m.lock_renewal_failures, 1);
    CHECK_EQ(m.activities_cancelled, 1);
    CHECK_EQ(m.activities_completed, 1);
    done_faulty(&x);
}

/* Holds the first worker that fetches an item until the test lets it go. */
static struct {
    _Atomic int fetched, release, used;
} hold;

static void hold_after_fetch(void *arg)
{
    (void)arg;
    if (atomic_exchange(&hold.used, 1))
        return;
    atomic_store(&hold.fetched, 1);
    int64_t deadline = test_now_ms() + 30000;
    while (!atomic_load(&hold.release) && test_now_ms() < deadline)
        usleep(1000);
}

/* A slot has fetched the activity but not yet registered it when the
 * cancelling turn commits: the runtime must still act at once, with the
 * real reason, and must not start the activity (not wait for a renewal,
 * which here is 20 s away). */
TEST(cancel_between_fetch_and_start_is_not_missed)
{
    faulty_fixture x;
    memset(&hold, 0, sizeof(hold));
    memset(&seen, 0, sizeof(seen));
    rt_init(&x.f, "f_window.db");
    CHECK_OK(duro_registry_add_activity(x.f.reg, "Hold", act_hold, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(x.f.reg, "One", NULL, orch_one, NULL));
    x.f.opts.worker_lock_timeout_ms = 60000;
    x.f.opts.lock_renewal_ms = 20000;
    duro_provider *inner;
    duro_error err;
    CHECK_PRC(duro_provider_open(x.f.url, &inner, &err), DURO_OK, &err);
    x.wrapper = faulty_provider_wrap(inner, 1);
    faulty_provider_on_work_fetched(x.wrapper, hold_after_fetch, NULL);
    CHECK_OK(duro_runtime_create_with_provider(x.wrapper, x.f.reg, &x.f.opts,
                                               &x.f.rt));
    CHECK_OK(duro_runtime_start(x.f.rt));
    CHECK_OK(duro_client_create(x.f.url, &x.f.client));
    rt_start_instance(&x.f, "w", "One", NULL);
    WAIT_UNTIL(atomic_load(&hold.fetched), 20000);
    CHECK_OK(duro_client_cancel(x.f.client, "w", "in the window", NULL));
    rt_wait_status(&x.f, "w", DURO_STATUS_CANCELLED, 20000);
    /* The status is visible at the commit; the turn records its local
     * decision just after it, and counts activities_cancel_requested once it
     * has. Only then is the slot let go, so the slot surely registers after
     * the decision (the window this test is about). */
    duro_metrics m;
    WAIT_UNTIL(
        (duro_runtime_metrics(x.f.rt, &m), m.activities_cancel_requested == 1),
        10000);
    atomic_store(&hold.release, 1);
    WAIT_UNTIL((duro_runtime_metrics(x.f.rt, &m), m.activities_cancelled == 1),
               10000);
    CHECK_EQ(atomic_load(&seen.started), 0); /* never ran */
    CHECK_EQ(m.lock_renewal_failures, 0);
    CHECK_EQ(m.activities_completed + m.activities_failed, 0);
    done_faulty(&x);
}

TEST_MAIN(T(retryable_renewal_errors_do_not_cancel),
          T(cancel_between_fetch_and_start_is_not_missed),
          T(permanent_renewal_error_cancels_and_the_row_is_redelivered))
