/* test_pg_chaos.c - the fault run of issue 23, in the suite. Two
 * crash_worker processes run the "chaos" workload (crash_workload.h: 270
 * chains of 5 Steps, and 30 "Linger" chains that end only when cancelled)
 * on a cluster of this test's own, while this process, the client,
 *   - kills every backend of duro's (application_name "duro": the
 *     runtimes', the client's, their listeners) with pg_terminate_backend
 *     0.5 s in and then every 2 s, to the end (the first fault waits for a
 *     round that killed some);
 *   - restarts the server (pg-cluster restart: pg_ctl stop, then start)
 *     -m fast once 10 % of the activities have run, -m immediate (a crash:
 *     crash recovery, claims and activity acks that were committed without
 *     the WAL flush may be lost) at 25 %, and stops it -m fast for 10 s at
 *     40 %;
 *   - cancels the 30 Linger instances (10 %) one by one between 5 % and 75 %
 *     of the run, retrying through the outages.
 * No operator acts. The workers must exit 0 (every instance ended) and the
 * end state must be exact (crash_check_all): every chain Completed with its
 * output, every Linger Cancelled, dense histories (event ids 1..n, no gap,
 * no duplicate), one completion per scheduled activity (a cancelled one's
 * cancelled instead), every scheduled activity run (at least once), empty
 * queues. About 30-60 s. Needs the server binaries (77, skipped, without
 * them); the cluster's port is $DURO_PG_PORT + 7. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crash_util.h"
#include "pg_own_cluster.h"
#include "test.h"

#define KILL_FIRST_MS 500 /* the killer's first round, once workers run */
#define KILL_EVERY_MS 2000
#define STOP_MS 10000           /* the server stopped this long */
#define STAGE_DEADLINE_MS 90000 /* for the run to reach each next fault */

/* The activity runs of a run without faults: what the fault points and
 * the cancels are fractions of. */
#define RUNS (270 * CRASH_SHORT_STEPS + 30 * CRASH_LINGER_STEPS)

typedef struct chaos {
    char killer_conninfo[800];
    char url[800];
    char log[512];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    /* the killer's */
    long killed, rounds, round_failures;
    /* the canceller's */
    int cancelled, cancel_rc;
    char cancel_error[512];
} chaos;

static int stopping(chaos *x)
{
    pthread_mutex_lock(&x->lock);
    int s = x->stop;
    pthread_mutex_unlock(&x->lock);
    return s;
}

/* Waits up to ms unless told to stop; under x->lock. */
static void pause_locked(chaos *x, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (!x->stop &&
           pthread_cond_timedwait(&x->cond, &x->lock, &ts) != ETIMEDOUT)
        ;
}

/* The server's notices to the killer's connection ("terminating
 * connection due to immediate shutdown command") are expected. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Every KILL_EVERY_MS, terminates every backend of duro's through a
 * connection of its own (reconnected after the server restarted). */
static void *killer_main(void *arg)
{
    chaos *x = arg;
    PGconn *conn = NULL;
    pthread_mutex_lock(&x->lock);
    for (int64_t wait = KILL_FIRST_MS; !x->stop; wait = KILL_EVERY_MS) {
        pause_locked(x, wait);
        if (x->stop)
            break;
        pthread_mutex_unlock(&x->lock);
        if (conn != NULL && PQstatus(conn) != CONNECTION_OK) {
            PQfinish(conn);
            conn = NULL;
        }
        if (conn == NULL) {
            conn = PQconnectdb(x->killer_conninfo);
            if (conn != NULL)
                PQsetNoticeProcessor(conn, quiet, NULL);
        }
        PGresult *res = NULL;
        if (conn != NULL && PQstatus(conn) == CONNECTION_OK)
            res = PQexec(conn, "SELECT count(*) FILTER (WHERE "
                               "pg_terminate_backend(pid)) FROM "
                               "pg_stat_activity WHERE application_name = "
                               "'duro'");
        int ok = res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK &&
                 PQntuples(res) == 1;
        long n = ok ? atol(PQgetvalue(res, 0, 0)) : 0;
        PQclear(res);
        if (!ok) { /* the server is down or restarting: next round */
            PQfinish(conn);
            conn = NULL;
        }
        pthread_mutex_lock(&x->lock);
        x->killed += n;
        x->rounds += ok;
        x->round_failures += !ok;
    }
    pthread_mutex_unlock(&x->lock);
    PQfinish(conn);
    return NULL;
}

static int retryable(int rc)
{
    return rc == DURO_STORAGE || rc == DURO_BUSY;
}

/* Waits until the run has made `runs` activity runs, or the test stops. */
static int wait_for_runs(chaos *x, long runs)
{
    while (crash_log_lines(x->log) < runs) {
        pthread_mutex_lock(&x->lock);
        pause_locked(x, 20);
        int s = x->stop;
        pthread_mutex_unlock(&x->lock);
        if (s)
            return 0;
    }
    return 1;
}

/* Cancels the Linger instances one by one, the k-th of n once the run has
 * made (5 + 70 k / n) % of its activity runs; a retryable failure (a killed
 * backend, the server down) is retried until the cancel is recorded. */
static void *canceller_main(void *arg)
{
    chaos *x = arg;
    const crash_group *g = &crash_chaos[1];
    duro_client *c = NULL;
    int rc = DURO_OK;
    for (int k = 0; k < g->count && !stopping(x); k++) {
        if (!wait_for_runs(x, (long)RUNS * (5 + 70 * k / g->count) / 100))
            break;
        char id[64];
        snprintf(id, sizeof(id), "%s-%d", g->prefix, k);
        do {
            if (c == NULL)
                rc = duro_client_create(x->url, &c);
            if (c != NULL)
                rc = duro_client_cancel(c, id, "chaos", "test_pg_chaos");
            if (retryable(rc)) {
                pthread_mutex_lock(&x->lock);
                pause_locked(x, 50);
                pthread_mutex_unlock(&x->lock);
            }
        } while (retryable(rc) && !stopping(x));
        pthread_mutex_lock(&x->lock);
        if (rc == DURO_OK) {
            x->cancelled++;
        } else if (x->cancel_rc == DURO_OK) {
            x->cancel_rc = rc;
            snprintf(x->cancel_error, sizeof(x->cancel_error), "%s: %s (%s)",
                     id, duro_errname(rc), duro_errmsg());
        }
        pthread_mutex_unlock(&x->lock);
    }
    duro_client_destroy(c);
    return NULL;
}

static pid_t workers[2]; /* running (not reaped yet) when > 0 */
static const char *errlog;
static chaos *threads_of; /* the killer and canceller run for it */
static pthread_t killer, canceller;

/* Stops and joins the killer and the canceller, when they run. */
static void stop_threads(void)
{
    chaos *x = threads_of;
    if (x == NULL)
        return;
    pthread_mutex_lock(&x->lock);
    x->stop = 1;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    pthread_join(killer, NULL);
    pthread_join(canceller, NULL);
    threads_of = NULL;
}

static void kill_workers(void)
{
    for (int i = 0; i < 2; i++) {
        if (workers[i] > 0)
            crash_kill_and_reap(workers[i]);
        workers[i] = 0;
    }
}

/* Unless cond: stops the threads, kills the workers, prints their stderr
 * and fails the test (which ends it: nothing of it is left running). */
#define CHAOS_CHECK(cond, ...)                                                 \
    do {                                                                       \
        if (!(cond)) {                                                         \
            stop_threads();                                                    \
            kill_workers();                                                    \
            crash_print_file(errlog, "worker stderr");                         \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                        \
        }                                                                      \
    } while (0)

/* Waits until the run has made `runs` activity runs; fails the test when a
 * worker exits first or the deadline passes. */
static void await_runs(chaos *x, long runs, const char *before)
{
    int64_t deadline = test_now_ms() + STAGE_DEADLINE_MS;
    long have;
    while ((have = crash_log_lines(x->log)) < runs) {
        for (int i = 0; i < 2; i++) {
            int status = 0;
            int gone = waitpid(workers[i], &status, WNOHANG) == workers[i];
            if (gone)
                workers[i] = 0;
            CHAOS_CHECK(!gone, "worker %d exited (status 0x%x) before %s", i,
                        status, before);
        }
        CHAOS_CHECK(test_now_ms() < deadline,
                    "%ld activity runs after %d ms, %ld expected before %s",
                    have, STAGE_DEADLINE_MS, runs, before);
        test_sleep_ms(10);
    }
}

/* Waits until the killer has terminated a backend of duro's (its first
 * round comes KILL_FIRST_MS in): the first fault waits for it, so that a
 * run fast enough to end within a few of the killer's rounds (the others
 * falling in the outages) still meets one. */
static void await_kill(chaos *x)
{
    int64_t deadline = test_now_ms() + STAGE_DEADLINE_MS;
    pthread_mutex_lock(&x->lock);
    while (x->killed == 0 && !x->stop && test_now_ms() < deadline)
        pause_locked(x, 20);
    long killed = x->killed;
    pthread_mutex_unlock(&x->lock);
    CHAOS_CHECK(killed > 0, "no backend killed in %d ms", STAGE_DEADLINE_MS);
}

TEST(chains_end_exactly_through_killed_backends_restarts_and_a_stop)
{
    int64_t t0 = test_now_ms();
    chaos x;
    memset(&x, 0, sizeof(x));
    pthread_mutex_init(&x.lock, NULL);
    pthread_cond_init(&x.cond, NULL);
    char base[512];
    pg_own_cluster_start("pgchaos", 7, base, sizeof(base));
    snprintf(x.killer_conninfo, sizeof(x.killer_conninfo),
             "%s&application_name=duro_chaos", base);
    snprintf(x.url, sizeof(x.url), "%s&schema=chaos", base);
    snprintf(x.log, sizeof(x.log), "%s", test_path("chaos.log"));
    errlog = test_path("chaos.stderr");
    crash_run r = {
        .url = x.url, .log = x.log, .errlog = errlog, .workload = "chaos"};

    /* The client starts every instance before the workers do (they start
     * them again, idempotently): a cancel never meets one not yet there. */
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(x.url, &c));
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1;
    for (size_t g = 0; g < CRASH_COUNT(crash_chaos); g++) {
        for (int k = 0; k < crash_chaos[g].count; k++) {
            char id[64];
            snprintf(id, sizeof(id), "%s-%d", crash_chaos[g].prefix, k);
            CHECK_OK(duro_client_start(c, id, crash_chaos[g].orchestration, id,
                                       &so));
        }
    }
    duro_client_destroy(c);

    for (int i = 0; i < 2; i++) {
        workers[i] = crash_spawn_worker(&r);
        CHAOS_CHECK(workers[i] > 0, "fork failed: %s", strerror(errno));
    }
    CHAOS_CHECK(pthread_create(&killer, NULL, killer_main, &x) == 0,
                "cannot start the killer thread");
    if (pthread_create(&canceller, NULL, canceller_main, &x) != 0) {
        pthread_mutex_lock(&x.lock);
        x.stop = 1;
        pthread_mutex_unlock(&x.lock);
        pthread_join(killer, NULL);
        CHAOS_CHECK(0, "cannot start the canceller thread");
    }
    threads_of = &x;

    static const struct {
        int percent;
        const char *verb, *mode;
    } faults[] = {{10, "restart", "fast"},
                  {25, "restart", "immediate"},
                  {40, "down", "fast"}};
    int64_t stopped_at = 0, started_at = 0;
    int rc = 0;
    for (size_t i = 0; i < CRASH_COUNT(faults) && rc == 0; i++) {
        char what[64];
        snprintf(what, sizeof(what), "%s -m %s", faults[i].verb,
                 faults[i].mode);
        await_runs(&x, (long)RUNS * faults[i].percent / 100, what);
        if (i == 0)
            await_kill(&x);
        rc = pg_own_cluster(faults[i].verb, faults[i].mode);
        fprintf(stderr, "  %s at %ld activity runs, %lld ms in: %d\n", what,
                crash_log_lines(x.log), (long long)(test_now_ms() - t0), rc);
        if (rc == 0 && strcmp(faults[i].verb, "down") == 0) {
            stopped_at = test_now_ms();
            test_sleep_ms(STOP_MS); /* the outage's length */
            rc = pg_own_cluster("up", NULL);
            started_at = test_now_ms();
            fprintf(stderr, "  up after %lld ms: %d\n",
                    (long long)(started_at - stopped_at), rc);
        }
    }

    CHAOS_CHECK(rc == 0, "pg-cluster failed (%d)", rc);
    int64_t deadline = test_now_ms() + CRASH_WORKERS_DEADLINE_MS;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        int exited = crash_wait_child(workers[i], deadline, &status);
        if (exited)
            workers[i] = 0;
        CHAOS_CHECK(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                    "worker %d: %s (status 0x%x)", i,
                    exited ? "failed" : "did not finish in time", status);
    }
    stop_threads();
    fprintf(stderr,
            "  workers done %lld ms in; %ld backends killed in %ld rounds "
            "(%ld rounds while the server was away); %d cancelled\n",
            (long long)(test_now_ms() - t0), x.killed, x.rounds,
            x.round_failures, x.cancelled);
    CHECK_MSG(x.cancel_rc == DURO_OK, "a cancel failed: %s", x.cancel_error);
    CHECK_EQ(x.cancelled, crash_chaos[1].count);
    CHECK_INT(x.killed, >, 0);
    crash_check_all(&r, crash_chaos, CRASH_COUNT(crash_chaos));
    fprintf(stderr, "  checked %lld ms in\n", (long long)(test_now_ms() - t0));
    pthread_cond_destroy(&x.cond);
    pthread_mutex_destroy(&x.lock);
}

TEST_MAIN(T(chains_end_exactly_through_killed_backends_restarts_and_a_stop))
