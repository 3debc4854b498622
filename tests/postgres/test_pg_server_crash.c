/* test_pg_server_crash.c - the PostgreSQL server crashes under running
 * runtimes. Two crash_worker processes share a schema of a cluster of this
 * test's own (not the fixture's: the other PostgreSQL tests run beside it)
 * and run the "heavy" workload (12 instances x 9 activities of 50..200 ms);
 * once activities have run, the server is stopped as a crash stops it
 * (`pg-cluster crash`: pg_ctl stop -m immediate, nothing flushed that was
 * not, then crash recovery at start). The runtimes must ride it out
 * (retryable errors, reconnects) and every instance complete exactly as
 * without the crash: test_crash's checks (exactly-once history, every
 * scheduled activity ran). In particular a claim committed without
 * waiting for the WAL flush (docs/postgres-provider.md, "Claims") and
 * lost in the crash is only a lost lock.
 *
 * Needs the server binaries (exits 77, skipped, without them). The
 * cluster's port is $DURO_PG_PORT (default 5544) plus 3 (pg_own_cluster.h);
 * it is removed at exit unless DURO_TEST_KEEP is set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_util.h"
#include "pg_own_cluster.h"
#include "test.h"

#define LINES_BEFORE_CRASH 20 /* activity runs logged before the crash */

static void kill_all(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            crash_kill_and_reap(pids[i]);
}

TEST(runtimes_ride_out_a_server_crash)
{
    char base_url[512];
    pg_own_cluster_start("pgsrv", 3, base_url, sizeof(base_url));

    char url[700], log[512], errlog[512];
    snprintf(url, sizeof(url), "%s&schema=srvcrash", base_url);
    snprintf(log, sizeof(log), "%s", test_path("srvcrash.log"));
    snprintf(errlog, sizeof(errlog), "%s", test_path("srvcrash.stderr"));
    crash_run r = {
        .url = url, .log = log, .errlog = errlog, .workload = "heavy"};
    pid_t pids[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        pids[i] = crash_spawn_worker(&r);
        if (pids[i] <= 0)
            kill_all(pids, 2);
        CHECK_MSG(pids[i] > 0, "fork failed: %s", strerror(errno));
    }

    /* activities have run, and most are still to come */
    int64_t deadline = test_now_ms() + CRASH_HOLD_DEADLINE_MS;
    while (crash_log_lines(log) < LINES_BEFORE_CRASH &&
           test_now_ms() < deadline)
        usleep(10000);
    long at_crash = crash_log_lines(log);
    if (at_crash < LINES_BEFORE_CRASH) {
        kill_all(pids, 2);
        crash_print_file(errlog, "worker stderr");
    }
    CHECK_MSG(at_crash >= LINES_BEFORE_CRASH,
              "%ld activity runs after %d ms, expected %d", at_crash,
              CRASH_HOLD_DEADLINE_MS, LINES_BEFORE_CRASH);
    int rc = pg_own_cluster("crash", NULL);
    if (rc != 0)
        kill_all(pids, 2);
    CHECK_MSG(rc == 0, "pg-cluster crash failed (%d)", rc);
    fprintf(stderr, "  server crashed and restarted after %ld activity runs\n",
            at_crash);

    deadline = test_now_ms() + CRASH_WORKERS_DEADLINE_MS;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        int exited = crash_wait_child(pids[i], deadline, &status);
        if (exited)
            pids[i] = 0;
        int ok = exited && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) {
            kill_all(pids, 2);
            crash_print_file(errlog, "worker stderr");
        }
        CHECK_MSG(ok, "worker %d: %s (status 0x%x)", i,
                  exited ? "failed" : "did not finish in time", status);
    }
    long at_end = crash_log_lines(log);
    CHECK_MSG(at_end > at_crash,
              "no activity ran after the crash (%ld runs in all)", at_end);
    crash_check_all(&r, crash_heavy, CRASH_COUNT(crash_heavy));
}

TEST_MAIN(T(runtimes_ride_out_a_server_crash))
