/* test_pg_outage.c - activities that finish while the PostgreSQL server is
 * down are recorded once it is back, not run again. A runtime in this
 * process (default locks: 30 s) runs 8 chains of 5 Steps (crash_workload.h,
 * "Short") on a cluster of this test's own; each chain's first Step waits
 * until the server has been stopped (pg_ctl stop -m fast), then returns, so
 * that 8 finished results meet the outage. The server stays down for 12 s:
 * longer than an ack's old retry budget (21 attempts, ~7.6 s, after which
 * the row was abandoned and the activity ran again once its lock expired),
 * well inside the lock. Then it starts again, and every instance must
 * complete with crash_check_all's exact checks (outputs, dense histories,
 * one completion per activity, empty queues) and every activity body must
 * have run exactly once: the side-effect log holds one line per scheduled
 * activity. Main thread, plus the runtime's threads. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "crash_util.h"
#include "pg_own_cluster.h"
#include "test.h"

#define INSTANCES 8
#define OUTAGE_MS 12000    /* the server down, after the results were in */
#define OLD_BUDGET_MS 7600 /* what 21 attempts of the old ack retry took */
#define WAIT_MS 120000

static const crash_group groups[] = {{"out", "Short", INSTANCES, CRASH_SHORT}};

static int log_fd = -1;
static _Atomic int held;      /* first Steps waiting for the outage */
static _Atomic int gate_open; /* the server is down: they may return */
static _Atomic int returned;  /* first Steps that returned */

/* One line per run, as crash_worker writes it (crash_check_all reads it). */
static void log_run(duro_activity *a)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "%ld %s %llu %llu %u %u %s\n",
                     (long)getpid(), duro_activity_instance_id(a),
                     (unsigned long long)duro_activity_execution_id(a),
                     (unsigned long long)duro_activity_id(a),
                     duro_activity_attempt(a), duro_activity_delivery(a),
                     duro_activity_name(a));
    if (n > 0 && (size_t)n < sizeof(line)) {
        ssize_t w;
        do
            w = write(log_fd, line, (size_t)n);
        while (w < 0 && errno == EINTR);
    }
}

/* crash_step; a chain's first Step (event 2) on its first delivery waits
 * for the gate first (a later delivery - the activity run again - does
 * not, and the test fails on its log line). */
static int act_step(duro_activity *a, const char *in, duro_result *out)
{
    log_run(a);
    if (duro_activity_id(a) == 2 && duro_activity_delivery(a) == 1) {
        atomic_fetch_add(&held, 1);
        int64_t end = test_now_ms() + WAIT_MS;
        while (!atomic_load(&gate_open) && test_now_ms() < end)
            if (duro_activity_wait_cancelled(a, 5))
                return duro_fail(out, "cancelled");
        atomic_fetch_add(&returned, 1);
    }
    char buf[CRASH_STR_MAX];
    crash_step(in ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

static int orch_short(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < CRASH_SHORT_STEPS; i++) {
        duro_task *t = duro_call_activity(o, "Step", acc);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t) ? duro_task_error(t)
                                                     : "Step failed");
        acc = duro_task_output(t);
    }
    return duro_ok(out, acc);
}

/* A storage failure a retry may not meet (the server restarting). */
static int retryable(int rc)
{
    return rc == DURO_STORAGE || rc == DURO_BUSY;
}

TEST(results_finished_during_a_server_stop_are_recorded_once)
{
    char base[512], url[700], log[512];
    pg_own_cluster_start("pgout", 6, base, sizeof(base));
    snprintf(url, sizeof(url), "%s&schema=outage", base);
    snprintf(log, sizeof(log), "%s", test_path("outage.log"));
    log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    CHECK_MSG(log_fd >= 0, "%s: %s", log, strerror(errno));

    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(
        duro_registry_add_orchestration(reg, "Short", NULL, orch_short, NULL));
    CHECK_OK(duro_registry_add_activity(reg, "Step", act_step, NULL));
    duro_runtime_options o;
    duro_runtime_options_init(&o); /* locks of 30 s, renewed every 2 s */
    o.worker_concurrency = INSTANCES;
    o.poll_interval_ms = 50;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    CHECK_OK(duro_client_create(url, &c));
    CHECK_OK(duro_runtime_start(rt));
    char id[64];
    for (int k = 0; k < INSTANCES; k++) {
        snprintf(id, sizeof(id), "out-%d", k);
        CHECK_OK(duro_client_start(c, id, "Short", id, NULL));
    }

    WAIT_UNTIL(atomic_load(&held) == INSTANCES, WAIT_MS);
    int64_t t0 = test_now_ms();
    CHECK_EQ(pg_own_cluster("down", "fast"), 0);
    int64_t down = test_now_ms();
    atomic_store(&gate_open, 1);
    WAIT_UNTIL(atomic_load(&returned) == INSTANCES, WAIT_MS);
    int64_t results = test_now_ms();
    /* The outage's length, not a synchronisation: the acks of the 8
     * results fail meanwhile (nothing can be recorded), longer than their
     * old retry budget. */
    test_sleep_ms(OUTAGE_MS);
    duro_metrics m;
    duro_runtime_metrics(rt, &m);
    CHECK_EQ(m.activities_completed, 0);
    CHECK_INT(m.storage_retries, >=, INSTANCES);
    CHECK_EQ(pg_own_cluster("up", NULL), 0);
    int64_t up = test_now_ms();
    fprintf(stderr,
            "  server stopped in %lld ms, down %lld ms, %lld ms after the "
            "results (the old budget: %d ms)\n",
            (long long)(down - t0), (long long)(up - down),
            (long long)(up - results), OLD_BUDGET_MS);
    CHECK_INT(up - results, >, OLD_BUDGET_MS);

    int64_t deadline = test_now_ms() + WAIT_MS;
    for (int k = 0; k < INSTANCES; k++) {
        snprintf(id, sizeof(id), "out-%d", k);
        int rc;
        for (;;) {
            duro_instance_info *info = NULL;
            int64_t left = deadline - test_now_ms();
            rc = duro_client_wait(c, id, left > 0 ? left : 0, &info);
            duro_free(info);
            if (!retryable(rc) || test_now_ms() >= deadline)
                break;
            test_sleep_ms(50);
        }
        CHECK_MSG(rc == DURO_OK, "waiting for %s: %s (%s)", id,
                  duro_errname(rc), duro_errmsg());
    }
    fprintf(stderr, "  all %d instances ended %lld ms after the restart\n",
            INSTANCES, (long long)(test_now_ms() - up));
    CHECK_OK(duro_runtime_shutdown(rt, 10000));
    duro_runtime_metrics(rt, &m);
    /* every result was recorded, none given up */
    CHECK_EQ(m.activity_acks_given_up, 0);
    CHECK_EQ(m.activities_completed, INSTANCES * CRASH_SHORT_STEPS);

    crash_run r = {.url = url, .log = log};
    crash_check_all(&r, groups, CRASH_COUNT(groups));
    /* every scheduled activity ran (crash_check_all), and the log has no
     * more lines than there are activities: each body ran exactly once */
    CHECK_EQ(crash_log_lines(log), INSTANCES * CRASH_SHORT_STEPS);

    duro_runtime_destroy(rt);
    duro_client_destroy(c);
    duro_registry_destroy(reg);
    close(log_fd);
}

TEST_MAIN(T(results_finished_during_a_server_stop_are_recorded_once))
