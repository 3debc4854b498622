/* test_shutdown.c - duro_runtime_shutdown keeps its deadline while the store
 * fails: a slot whose activity returned and whose completion ack keeps
 * failing retryably stops retrying at the shutdown deadline instead of
 * running its whole backoff (21 attempts, about 7 s), and the activity's
 * row is not lost: it runs again once its lock expires. Through the
 * fault-injecting wrapper around a real SQLite file. */
#include "faulty_provider.h"
#include "rt_util.h"

#define WAIT_MS 60000

/* The wrapper whose activity acks start failing when Quick runs; NULL:
 * Quick just returns. */
static _Atomic(duro_provider *) fail_acks_of;
static _Atomic int quick_runs;

/* Returns at once; from then on every ack of a completion fails
 * retryably (ack_work_item, and ack_and_fetch_work_item, which the
 * wrapper fails as the ack it starts with). */
static int act_quick(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&quick_runs, 1);
    duro_provider *w = atomic_load(&fail_acks_of);
    if (w != NULL)
        faulty_provider_fail_always(w, FAULTY_ACK_WORK_ITEM, 1, 1);
    return duro_ok(out, "quick");
}

static int orch_once(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Quick", NULL);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static uint64_t ack_calls(duro_provider *w)
{
    return faulty_provider_calls(w, FAULTY_ACK_WORK_ITEM);
}

/* With a store of contract `version` (1: ack_work_item, 2:
 * ack_and_fetch_work_item). */
static void shutdown_during_failing_acks(int version, const char *db)
{
    rt_fixture f;
    rt_log_reset();
    atomic_store(&quick_runs, 0);
    rt_init(&f, db);
    CHECK_OK(duro_registry_add_activity(f.reg, "Quick", act_quick, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Once", NULL, orch_once, NULL));
    f.opts.worker_concurrency = 1; /* every ack attempt is this slot's */
    f.opts.worker_lock_timeout_ms = 500;
    f.opts.lock_renewal_ms = 100;
    f.opts.log_level = DURO_LOG_DEBUG;
    f.opts.log_fn = rt_log_sink;

    duro_provider *inner = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f.url, &inner, &err), DURO_OK, &err);
    duro_provider *w = faulty_provider_wrap_version(inner, 1, version);
    CHECK(w != NULL);
    atomic_store(&fail_acks_of, w);
    CHECK_OK(duro_runtime_create_with_provider(w, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "s", "Once", NULL);

    /* The first attempt failed: the slot is in its retry loop, which
     * makes 21 attempts over about 7 s when nothing stops it (the old
     * loop did so whatever happened meanwhile). A shutdown with a 200 ms
     * deadline leaves room for at most 6 more backoffs (5 + 10 + 20 + 40
     * + 80 ms, then the one the deadline cuts short); a slow machine only
     * makes them longer, so fewer. */
    WAIT_UNTIL(ack_calls(w) >= 1, WAIT_MS);
    uint64_t before = ack_calls(w);
    CHECK_RC(duro_runtime_shutdown(f.rt, 200), DURO_TIMEOUT);
    uint64_t at_return = ack_calls(w);
    CHECK_INT(at_return, <, 21);
    CHECK_INT(at_return - before, <=, 8);
    CHECK_EQ(atomic_load(&quick_runs), 1);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_WARN,
                            "shutdown: the result of activity 'Quick' "
                            "(instance 's', event 2) could not be recorded "
                            "before the shutdown deadline (faulty_provider: "
                            "injected retryable failure"),
             1);
    CHECK_EQ(rt_log_hits("will run again after its lock expires"), 1);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_ERROR, "ack of activity"), 0);
    rt_stop(&f);
    /* No thread of the runtime is left retrying. */
    CHECK_EQ(ack_calls(w), at_return);
    atomic_store(&fail_acks_of, NULL);
    duro_provider_close(w);

    /* The row stayed locked; once its lock expires a runtime on a
     * fault-free handle runs the activity again and the instance
     * completes, with one completion in its history. */
    rt_start(&f);
    duro_instance_info *i = rt_wait(&f, "s", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "quick");
    duro_free(i);
    CHECK_EQ(atomic_load(&quick_runs), 2);
    CHECK_EQ(rt_count_events(&f, "s", DURO_EVENT_ACTIVITY_COMPLETED), 1);
    rt_done(&f);
}

TEST(shutdown_stops_retrying_a_failing_ack_at_its_deadline)
{
    shutdown_during_failing_acks(2, "shutdown_ack_v2.db");
}

TEST(shutdown_stops_retrying_a_failing_ack_at_its_deadline_version_1)
{
    shutdown_during_failing_acks(1, "shutdown_ack_v1.db");
}

TEST_MAIN(T(shutdown_stops_retrying_a_failing_ack_at_its_deadline),
          T(shutdown_stops_retrying_a_failing_ack_at_its_deadline_version_1))
