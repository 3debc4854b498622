/* test_locks.c - activity lock options and renewal, end to end: options
 * whose renewal cannot keep the lock are refused; a long, healthy activity
 * keeps its lock under load (500 short chains beside it) and runs exactly
 * once; a renewal that comes after the lock expired, while no other worker
 * took the row, extends it instead of losing it; a turn that outlasts its
 * orchestration lock says so. Real runtimes on SQLite
 * files; waits have deadlines and nothing asserts how long anything took. */
#include <stdlib.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"

#define DEADLINE 60000

/* ------------------------------------------------------------------------
 * options */

static int create_with(int64_t timeout, int64_t renewal)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.worker_lock_timeout_ms = timeout;
    o.lock_renewal_ms = renewal;
    duro_runtime *rt = (duro_runtime *)&o; /* must be reset */
    int rc =
        duro_runtime_create(test_sqlite_url("locks_options.db"), reg, &o, &rt);
    if (rc == DURO_OK)
        duro_runtime_destroy(rt);
    else
        CHECK(rt == NULL);
    duro_registry_destroy(reg);
    return rc;
}

TEST(lock_renewal_over_half_the_lock_timeout_is_refused)
{
    static const struct {
        int64_t timeout, renewal;
    } bad[] = {{1000, 999}, {200, 199}, {1000, 501}, {200, 101}, {11, 6}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_RC(create_with(bad[i].timeout, bad[i].renewal), DURO_INVALID);
        /* The message names both values and the rule. */
        char want[64];
        snprintf(want, sizeof(want), "lock_renewal_ms (%lld)",
                 (long long)bad[i].renewal);
        CHECK_MSG(strstr(duro_errmsg(), want) != NULL, "message: %s",
                  duro_errmsg());
        snprintf(want, sizeof(want), "worker_lock_timeout_ms (%lld)",
                 (long long)bad[i].timeout);
        CHECK_MSG(strstr(duro_errmsg(), want) != NULL, "message: %s",
                  duro_errmsg());
        CHECK_MSG(strstr(duro_errmsg(), "half") != NULL, "message: %s",
                  duro_errmsg());
    }
    static const struct {
        int64_t timeout, renewal;
    } good[] = {{1000, 500}, {200, 100}, {30000, 2000}, {11, 5}, {10, 5}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK_OK(create_with(good[i].timeout, good[i].renewal));
}

/* ------------------------------------------------------------------------
 * a long activity beside many short chains */

#define CHAINS 500
#define CHAIN_STEPS 10

typedef struct lane {
    const char *db;
    int64_t timeout, renewal;
    rt_fixture f;
    _Atomic int long_runs;
    _Atomic int long_cancelled;
    _Atomic uint32_t long_delivery;
    _Atomic int chains_done; /* lets the long activity finish */
} lane;

/* Five seconds of work, and in any case until every chain beside it has
 * completed, so the load overlaps its whole run. */
static int act_long(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    lane *l = duro_activity_user(a);
    atomic_fetch_add(&l->long_runs, 1);
    atomic_store(&l->long_delivery, duro_activity_delivery(a));
    int64_t end = test_now_ms() + 5000;
    while (test_now_ms() < end || !atomic_load(&l->chains_done)) {
        if (duro_activity_wait_cancelled(a, 10)) {
            atomic_fetch_add(&l->long_cancelled, 1);
            return duro_fail(out, "cancelled");
        }
    }
    return duro_ok(out, "long done");
}

static int act_quick(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int orch_long(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Long", NULL);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    const char *v = in;
    for (int i = 0; i < CHAIN_STEPS; i++) {
        duro_task *t = duro_call_activity(o, "Quick", v);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        v = duro_task_output(t);
    }
    return duro_ok(out, v);
}

static void lane_start(lane *l)
{
    rt_init(&l->f, l->db);
    CHECK_OK(duro_registry_add_activity(l->f.reg, "Long", act_long, l));
    CHECK_OK(duro_registry_add_activity(l->f.reg, "Quick", act_quick, NULL));
    CHECK_OK(duro_registry_add_orchestration(l->f.reg, "LongOne", NULL,
                                             orch_long, NULL));
    CHECK_OK(duro_registry_add_orchestration(l->f.reg, "Chain", NULL,
                                             orch_chain, NULL));
    l->f.opts.worker_lock_timeout_ms = l->timeout;
    l->f.opts.lock_renewal_ms = l->renewal;
    rt_start(&l->f);
    rt_start_instance(&l->f, "long", "LongOne", NULL);
}

/* Both lock settings at once, each on its own runtime and store, so each
 * long activity also competes with the other lane's load. */
TEST(long_activity_beside_500_chains_runs_once)
{
    static lane lanes[2] = {
        {.db = "locks_1000_500.db", .timeout = 1000, .renewal = 500},
        {.db = "locks_200_100.db", .timeout = 200, .renewal = 100}};
    for (int k = 0; k < 2; k++) {
        atomic_store(&lanes[k].long_runs, 0);
        atomic_store(&lanes[k].long_cancelled, 0);
        atomic_store(&lanes[k].chains_done, 0);
        lane_start(&lanes[k]);
    }
    for (int k = 0; k < 2; k++)
        WAIT_UNTIL(atomic_load(&lanes[k].long_runs) == 1, DEADLINE);
    char id[32], in[32];
    for (int c = 0; c < CHAINS; c++) {
        for (int k = 0; k < 2; k++) {
            snprintf(id, sizeof(id), "chain-%d", c);
            snprintf(in, sizeof(in), "\"%d\"", c);
            rt_start_instance(&lanes[k].f, id, "Chain", in);
        }
    }
    for (int k = 0; k < 2; k++) {
        for (int c = 0; c < CHAINS; c++) {
            snprintf(id, sizeof(id), "chain-%d", c);
            duro_instance_info *i = rt_wait(&lanes[k].f, id, DEADLINE);
            CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
            duro_free(i);
        }
        atomic_store(&lanes[k].chains_done, 1);
    }
    for (int k = 0; k < 2; k++) {
        lane *l = &lanes[k];
        duro_instance_info *i = rt_wait(&l->f, "long", DEADLINE);
        CHECK_MSG(i->status == DURO_STATUS_COMPLETED,
                  "lock %lld/%lld: long instance %s (%s)",
                  (long long)l->timeout, (long long)l->renewal,
                  duro_status_name(i->status), i->error ? i->error : "");
        CHECK_STR(i->output, "long done");
        duro_free(i);
        CHECK_MSG(atomic_load(&l->long_runs) == 1,
                  "lock %lld/%lld: the long activity ran %d times",
                  (long long)l->timeout, (long long)l->renewal,
                  atomic_load(&l->long_runs));
        CHECK_EQ(atomic_load(&l->long_delivery), 1);
        CHECK_EQ(atomic_load(&l->long_cancelled), 0);
        /* Every scheduling completed once. The short activities are not
         * held to "never lose a lock": with a 200 ms lock, one whose ack
         * waits that long for the write lock on a loaded machine may lose
         * its row to another slot and run again (at-least-once; the lost
         * ack and any renewal of it count in activities_cancelled and
         * lock_renewal_failures). The long activity above is the one whose
         * renewals must keep its lock, and it ran once, uncancelled. */
        duro_metrics m;
        rt_final_metrics(&l->f, &m);
        CHECK_EQ(m.activities_completed, CHAINS * CHAIN_STEPS + 1);
    }
    for (int k = 0; k < 2; k++)
        rt_done(&lanes[k].f);
}

/* ------------------------------------------------------------------------
 * a renewal after expiry, before anyone took the row */

static struct {
    _Atomic int runs, cancelled, release;
    _Atomic uint32_t delivery;
    _Atomic int renew_ok;
} held;

static int act_held(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&held.runs, 1);
    atomic_store(&held.delivery, duro_activity_delivery(a));
    while (!atomic_load(&held.release)) {
        if (duro_activity_wait_cancelled(a, 5)) {
            atomic_fetch_add(&held.cancelled, 1);
            return duro_fail(out, "cancelled");
        }
    }
    return duro_ok(out, "held");
}

static int orch_held(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Held", NULL);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static void count_renewals(void *arg, const faulty_call *call)
{
    (void)arg;
    if (call->after && call->rc == DURO_OK)
        atomic_fetch_add(&held.renew_ok, 1);
}

TEST(renewal_after_expiry_of_an_untaken_lock_keeps_the_activity)
{
    memset(&held, 0, sizeof(held));
    rt_fixture f;
    rt_init(&f, "locks_untaken.db");
    CHECK_OK(duro_registry_add_activity(f.reg, "Held", act_held, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "HeldOne", NULL, orch_held,
                                             NULL));
    f.opts.worker_concurrency = 1; /* no other slot to take the row */
    f.opts.worker_lock_timeout_ms = 300;
    f.opts.lock_renewal_ms = 100;
    duro_provider *inner;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK(w != NULL);
    faulty_provider_set_hook(w, FAULTY_RENEW_WORK_ITEM_LOCK, count_renewals,
                             NULL);
    /* Every renewal fails as "busy" (which never cancels) from the start,
     * so the lock taken at the fetch is never extended... */
    faulty_provider_fail_always(w, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 1);
    CHECK_OK(duro_runtime_create_with_provider(w, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "h", "HeldOne", NULL);
    WAIT_UNTIL(atomic_load(&held.runs) == 1, DEADLINE);
    /* ...and has surely expired once the lock timeout has passed since the
     * activity started (its fetch came before); one more renewal fails
     * after that. */
    int64_t expired = test_now_ms() + f.opts.worker_lock_timeout_ms + 2;
    WAIT_UNTIL(test_now_ms() > expired, DEADLINE);
    uint64_t calls = faulty_provider_calls(w, FAULTY_RENEW_WORK_ITEM_LOCK);
    WAIT_UNTIL(faulty_provider_calls(w, FAULTY_RENEW_WORK_ITEM_LOCK) > calls,
               DEADLINE);
    CHECK_EQ(atomic_load(&held.renew_ok), 0);
    /* Storage recovers: the next renewal extends the expired lock. */
    faulty_provider_fail_always(w, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 0);
    WAIT_UNTIL(atomic_load(&held.renew_ok) >= 2, DEADLINE);
    atomic_store(&held.release, 1);
    duro_instance_info *i = rt_wait(&f, "h", DEADLINE);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "held");
    duro_free(i);
    CHECK_EQ(atomic_load(&held.runs), 1);
    CHECK_EQ(atomic_load(&held.delivery), 1);
    CHECK_EQ(atomic_load(&held.cancelled), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.lock_renewal_failures, 0);
    CHECK_EQ(m.activities_completed, 1);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * a turn longer than its lock */

static _Atomic int slow_entries;

/* The first run of its code blocks until another turn thread, having taken
 * the instance after the lock expired, runs the code too; that second run
 * returns at once. */
static int orch_blocks_once(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    if (!duro_is_replaying(o) && atomic_fetch_add(&slow_entries, 1) == 0) {
        int64_t until = test_now_ms() + DEADLINE;
        while (atomic_load(&slow_entries) < 2 && test_now_ms() < until)
            test_sleep_ms(5);
    }
    return duro_ok(out, "done");
}

/* Orchestration code that blocks its turn past orchestration_lock_timeout_ms
 * loses the lock; the discarded turn's warning says the turn ran longer
 * than the timeout (code must not block). The instance completes through
 * the other thread's turn. */
TEST(a_turn_longer_than_its_lock_says_so)
{
    rt_fixture f;
    rt_init(&f, "locks_slow_turn.db");
    rt_log_reset();
    f.opts.log_fn = rt_log_sink;
    f.opts.log_level = DURO_LOG_WARN;
    f.opts.orchestration_lock_timeout_ms = 100;
    f.opts.orchestration_concurrency = 2;
    f.opts.orchestration_batch = 1;
    CHECK_OK(duro_registry_add_orchestration(f.reg, "BlocksOnce", NULL,
                                             orch_blocks_once, NULL));
    rt_start(&f);
    rt_start_instance(&f, "slow", "BlocksOnce", NULL);
    duro_instance_info *i = rt_wait(&f, "slow", DEADLINE);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    WAIT_UNTIL(rt_log_hits_at(DURO_LOG_WARN,
                              "the turn ran longer than "
                              "orchestration_lock_timeout_ms") == 1,
               DEADLINE);
    CHECK_EQ(atomic_load(&slow_entries), 2);
    rt_done(&f);
}

TEST_MAIN(T(lock_renewal_over_half_the_lock_timeout_is_refused),
          T(a_turn_longer_than_its_lock_says_so),
          T(renewal_after_expiry_of_an_untaken_lock_keeps_the_activity),
          T(long_activity_beside_500_chains_runs_once))
