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
 * cluster's port is $DURO_PG_PORT (default 5544) plus 3; it is removed at
 * exit unless DURO_TEST_KEEP is set. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_util.h"
#include "test.h"

#ifndef DURO_PG_CLUSTER
#error "DURO_PG_CLUSTER (the path of .ci/pg-cluster) must be defined"
#endif

#define LINES_BEFORE_CRASH 20 /* activity runs logged before the crash */

static char cluster_dir[512]; /* set once the cluster was started */
static char port_env[64];

/* Runs `pg-cluster ARGS` on this test's port, ARGS formatted from fmt;
 * returns its exit status (-1 when it did not run or did not exit). The
 * command is as long as it needs: the paths in it are as long as the
 * checkout's. */
static int pg_cluster(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int pg_cluster(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *args = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (args == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(args, (size_t)n + 1, fmt, ap);
    va_end(ap);
#define PG_CLUSTER_CMD "%s sh '%s' %s"
    n = snprintf(NULL, 0, PG_CLUSTER_CMD, port_env, DURO_PG_CLUSTER, args);
    char *cmd = n >= 0 ? malloc((size_t)n + 1) : NULL;
    int st = -1;
    if (cmd != NULL) {
        snprintf(cmd, (size_t)n + 1, PG_CLUSTER_CMD, port_env, DURO_PG_CLUSTER,
                 args);
        st = system(cmd);
    }
    free(cmd);
    free(args);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static void kill_all(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            crash_kill_and_reap(pids[i]);
}

TEST(runtimes_ride_out_a_server_crash)
{
    const char *base = getenv("DURO_PG_PORT");
    snprintf(port_env, sizeof(port_env), "DURO_PG_PORT=%d",
             (base != NULL ? atoi(base) : 5544) + 3);
    char dir[512], url_file[600];
    snprintf(dir, sizeof(dir), "%s", test_path("pgsrv"));
    snprintf(url_file, sizeof(url_file), "%s.url", dir);
    int rc = pg_cluster("start '%s' '%s' >/dev/null", dir, url_file);
    if (rc == 77) {
        fprintf(stderr, "  no PostgreSQL server binaries: skipped\n");
        exit(77);
    }
    CHECK_MSG(rc == 0, "pg-cluster start failed (%d)", rc);
    snprintf(cluster_dir, sizeof(cluster_dir), "%s", dir);
    FILE *f = fopen(url_file, "r");
    CHECK_MSG(f != NULL, "no URL file %s", url_file);
    char base_url[512] = "";
    if (fgets(base_url, sizeof(base_url), f) == NULL)
        base_url[0] = '\0';
    fclose(f);
    base_url[strcspn(base_url, "\n")] = '\0';
    CHECK_MSG(base_url[0] != '\0', "empty URL file %s", url_file);

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
    while (count_lines(log) < LINES_BEFORE_CRASH && test_now_ms() < deadline)
        usleep(10000);
    long at_crash = count_lines(log);
    if (at_crash < LINES_BEFORE_CRASH) {
        kill_all(pids, 2);
        crash_print_file(errlog, "worker stderr");
    }
    CHECK_MSG(at_crash >= LINES_BEFORE_CRASH,
              "%ld activity runs after %d ms, expected %d", at_crash,
              CRASH_HOLD_DEADLINE_MS, LINES_BEFORE_CRASH);
    rc = pg_cluster("crash '%s'", dir);
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
    long at_end = count_lines(log);
    CHECK_MSG(at_end > at_crash,
              "no activity ran after the crash (%ld runs in all)", at_end);
    crash_check_all(&r, crash_heavy, CRASH_COUNT(crash_heavy));
}

/* After the test, failed or not: no worker is left running then. */
static void remove_cluster(void)
{
    if (cluster_dir[0] == '\0' || getenv("DURO_TEST_KEEP") != NULL)
        return;
    if (pg_cluster("stop '%s'", cluster_dir) != 0)
        fprintf(stderr, "  cannot stop the cluster in %s\n", cluster_dir);
}

int main(int argc, char **argv)
{
    static const test_case tests[] = {T(runtimes_ride_out_a_server_crash)};
    int rc = test_run(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
    remove_cluster();
    return rc;
}
