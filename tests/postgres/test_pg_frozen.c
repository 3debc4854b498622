/* test_pg_frozen.c - a runtime frozen in the middle of a turn's ack (SIGSTOP:
 * a host stopped, or cut off, with its transaction open) holds row locks
 * that another runtime's activity acks need; the other runtime must go on
 * completing its own work while the first stays stopped, not queue behind
 * those locks.
 *
 * freeze_worker (turn threads only) runs the first turns of FANS Fan
 * instances (each schedules Quick and Slow); then this process's worker
 * runtime runs them: the Quick completions make the instances ready, the
 * worker takes them and stops itself inside its ack, their readiness rows
 * locked (the provider's hook, duro__pg_hook_turn_ack_locked). Slow
 * returns only then: its acks need those rows. Meanwhile PLAINS Plain
 * instances (two Steps) are started, for this process's turn and worker
 * runtimes alone, and must all complete while the frozen runtime stays
 * stopped; then it is continued and every instance completes.
 *
 * Two runs: with the frozen runtime's idle_in_transaction_session_timeout
 * turned off (libpq options in its URL), its locks stay held throughout, so
 * only the waiting side can make progress: a statement that waits for a
 * lock gives up after lock_timeout (DURO_BUSY, retried) and the acks that
 * do not need the held rows go through without it. With every default,
 * the server also ends the frozen session after
 * idle_in_transaction_session_timeout, releasing its locks while the
 * process is still stopped. The deadlines are generous (well under the 30 s
 * instance lock the frozen runtime holds), not a measure of speed. Main
 * thread, plus the runtimes' threads and one child process. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frozen_workload.h"
#include "pg_util.h"
#include "test.h"

#ifndef FREEZE_WORKER_PATH
#error "FREEZE_WORKER_PATH must name the freeze_worker executable"
#endif

#define FANS 4
#define PLAINS 8
#define SETUP_MS 60000    /* first turns run, the worker stopped */
#define PROGRESS_MS 25000 /* Plains done while the worker stays stopped */
#define FINISH_MS 120000  /* everything done once it continues */

static atomic_int gate_open;    /* Slow returns once set */
static atomic_int slow_running; /* Slows that have begun */

static int act_quick(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* Returns once the gate opens (or fails when cancelled). */
static int act_slow(duro_activity *a, const char *in, duro_result *out)
{
    atomic_fetch_add(&slow_running, 1);
    while (!atomic_load(&gate_open))
        if (duro_activity_wait_cancelled(a, 20))
            return duro_fail(out, "cancelled");
    return duro_ok(out, in);
}

static int act_step(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    char buf[64];
    snprintf(buf, sizeof(buf), "%.60s+", in != NULL ? in : "");
    return duro_ok(out, buf);
}

static duro_registry *make_registry(void)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(
        duro_registry_add_orchestration(reg, "Fan", NULL, frozen_fan, NULL));
    CHECK_OK(duro_registry_add_orchestration(reg, "Plain", NULL, frozen_plain,
                                             NULL));
    CHECK_OK(duro_registry_add_activity(reg, "Quick", act_quick, NULL));
    CHECK_OK(duro_registry_add_activity(reg, "Slow", act_slow, NULL));
    CHECK_OK(duro_registry_add_activity(reg, "Step", act_step, NULL));
    return reg;
}

/* How many of the n instances "<prefix><i>" are Completed. */
static int completed(duro_client *c, const char *prefix, int n)
{
    int done = 0;
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        duro_instance_info *info = NULL;
        if (duro_client_get_status(c, id, &info) == DURO_OK &&
            info->status == DURO_STATUS_COMPLETED)
            done++;
        duro_free(info);
    }
    return done;
}

/* How many Fans have scheduled both their activities. */
static int fans_scheduled(duro_client *c)
{
    int n = 0;
    for (int i = 0; i < FANS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "fan%d", i);
        duro_history *h = NULL;
        if (duro_client_read_history(c, id, 0, &h) != DURO_OK)
            continue;
        int scheduled = 0;
        for (size_t k = 0; k < h->count; k++)
            scheduled += h->events[k].kind == DURO_EVENT_ACTIVITY_SCHEDULED;
        n += scheduled == 2;
        duro_history_free(h);
    }
    return n;
}

/* Sessions named `app` in state `state` (a LIKE pattern). */
static long sessions(PGconn *pg, const char *app, const char *state)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND state LIKE '%s'",
             app, state);
    PGresult *r = PQexec(pg, sql);
    long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                 ? strtol(PQgetvalue(r, 0, 0), NULL, 10)
                 : -1;
    PQclear(r);
    return n;
}

/* 1 once the child stopped (WIFSTOPPED), -1 when it exited, 0 neither
 * before the deadline. */
static int wait_stopped(pid_t pid, int64_t deadline)
{
    for (;;) {
        int st = 0;
        pid_t w = waitpid(pid, &st, WUNTRACED | WNOHANG);
        if (w == pid)
            return WIFSTOPPED(st) ? 1 : -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (test_now_ms() >= deadline)
            return 0;
        test_sleep_ms(2);
    }
}

/* The child's exit status once it exited, -1 at the deadline. */
static int wait_exit(pid_t pid, int64_t deadline)
{
    for (;;) {
        int st = 0;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0 && errno != EINTR)
            return -1;
        if (test_now_ms() >= deadline)
            return -1;
        test_sleep_ms(2);
    }
}

static pid_t child;            /* freeze_worker, until reaped */
static char child_errlog[600]; /* its stderr */

/* Kills and reaps the child (stopped or not), and shows its stderr. */
static void kill_child(void)
{
    if (child <= 0)
        return;
    kill(child, SIGKILL);
    kill(child, SIGCONT);
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR)
        ;
    child = 0;
    test_print_file(child_errlog, "freeze_worker stderr", 100);
}

/* A failed check ends the test (the harness jumps out): the child goes
 * first, or it would outlive the test stopped, holding its output open. */
#define CHILD_CHECK(cond, ...)                                                 \
    do {                                                                       \
        if (!(cond)) {                                                         \
            kill_child();                                                      \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                        \
        }                                                                      \
    } while (0)
/* Waits for cond until ms pass, then CHILD_CHECKs it. */
#define CHILD_WAIT(cond, ms)                                                   \
    do {                                                                       \
        int64_t deadline_ = test_now_ms() + (ms);                              \
        while (!(cond) && test_now_ms() < deadline_)                           \
            test_sleep_ms(5);                                                  \
        CHILD_CHECK(cond, "timed out after %lld ms waiting for %s",            \
                    (long long)(ms), #cond);                                   \
    } while (0)

/* The scenario; `frozen_params` are appended to the frozen runtime's URL,
 * `session_ends` says whether the server is expected to end its session
 * (its idle_in_transaction_session_timeout is on). */
static void frozen_runtime(const char *name, const char *frozen_params,
                           int session_ends)
{
    char schema[64], url[4300], frozen_url[4600], app[64], arm[600];
    snprintf(schema, sizeof(schema), "pgfrozen_%ld_%s", (long)getpid(), name);
    snprintf(url, sizeof(url), "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
    snprintf(app, sizeof(app), "duro_frozen_%ld", (long)getpid());
    snprintf(frozen_url, sizeof(frozen_url), "%s&application_name=%s%s", url,
             app, frozen_params);
    snprintf(arm, sizeof(arm), "%s", test_path("arm"));
    snprintf(child_errlog, sizeof(child_errlog), "%s",
             test_path("freeze_worker.stderr"));
    unlink(arm);
    atomic_store(&gate_open, 0);
    atomic_store(&slow_running, 0);
    PGconn *pg = pg_test_connect();
    CHECK(pg != NULL);
    if (pg == NULL)
        return;

    duro_client *c = NULL;
    CHECK_OK(duro_client_create(url, &c));
    for (int i = 0; i < FANS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "fan%d", i);
        CHECK_OK(duro_client_start(c, id, "Fan", "f", NULL));
    }
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(child_errlog, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execl(FREEZE_WORKER_PATH, FREEZE_WORKER_PATH, frozen_url, arm,
              (char *)NULL);
        _exit(127);
    }
    CHECK_MSG(pid > 0, "fork: %s", strerror(errno));
    if (pid <= 0) {
        duro_client_destroy(c);
        PQfinish(pg);
        return;
    }
    child = pid;
    /* its first turns: every Fan has scheduled Quick and Slow, which no
     * one runs yet */
    CHILD_WAIT(fans_scheduled(c) == FANS, SETUP_MS);
    FILE *f = fopen(arm, "w");
    CHILD_CHECK(f != NULL, "cannot create %s", arm);
    if (f != NULL)
        fclose(f);

    /* this process's activity slots: the Quicks complete, the frozen
     * worker takes their turns and stops inside the ack */
    duro_registry *reg = make_registry();
    duro_runtime_options wo;
    duro_runtime_options_init(&wo);
    wo.orchestration_concurrency = 0;
    wo.worker_concurrency = 8;
    wo.poll_interval_ms = 50;
    wo.log_level = getenv("DURO_TEST_LOG") ? DURO_LOG_DEBUG : DURO_LOG_ERROR;
    duro_runtime *workers = NULL, *turns = NULL;
    CHILD_CHECK(duro_runtime_create(url, reg, &wo, &workers) == DURO_OK &&
                    duro_runtime_start(workers) == DURO_OK,
                "worker runtime: %s", duro_errmsg());
    int stopped = wait_stopped(pid, test_now_ms() + SETUP_MS);
    CHILD_CHECK(stopped == 1, "freeze_worker did not stop inside an ack (%d)",
                stopped);
    CHILD_WAIT(atomic_load(&slow_running) >= FANS, SETUP_MS);
    /* the precondition: its ack's transaction is open, its locks held */
    CHILD_CHECK(sessions(pg, app, "idle in transaction%") >= 1,
                "the stopped worker has no session idle in a transaction");

    /* Slow returns: its acks need the rows the frozen ack locked. Plain
     * instances, for this process's runtimes alone, must complete. */
    atomic_store(&gate_open, 1);
    duro_runtime_options to;
    duro_runtime_options_init(&to);
    to.orchestration_concurrency = 2;
    to.worker_concurrency = 0;
    to.poll_interval_ms = 50;
    to.log_level = wo.log_level;
    CHILD_CHECK(duro_runtime_create(url, reg, &to, &turns) == DURO_OK &&
                    duro_runtime_start(turns) == DURO_OK,
                "turn runtime: %s", duro_errmsg());
    int64_t t0 = test_now_ms();
    for (int i = 0; i < PLAINS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "plain%d", i);
        CHILD_CHECK(duro_client_start(c, id, "Plain", "p", NULL) == DURO_OK,
                    "start %s: %s", id, duro_errmsg());
    }
    CHILD_WAIT(completed(c, "plain", PLAINS) == PLAINS, PROGRESS_MS);
    fprintf(stderr,
            "  %s: %d of %d Plain instances completed in %lld ms while the "
            "other runtime stayed stopped\n",
            name, completed(c, "plain", PLAINS), PLAINS,
            (long long)(test_now_ms() - t0));
    if (session_ends) {
        /* the server ends the stopped runtime's session, and its locks go
         * with it */
        CHILD_WAIT(sessions(pg, app, "idle in transaction%") == 0, PROGRESS_MS);
    } else {
        /* the progress above was made beside locks still held */
        CHILD_CHECK(sessions(pg, app, "idle in transaction%") >= 1,
                    "the stopped worker's transaction ended: the progress "
                    "may have come from that");
    }
    /* still there, stopped */
    CHILD_CHECK(waitpid(pid, &(int){0}, WNOHANG) == 0,
                "freeze_worker exited while stopped");

    /* continued, it finishes its ack (or finds its session gone and
     * retries); every instance completes */
    kill(pid, SIGCONT);
    CHILD_WAIT(completed(c, "fan", FANS) == FANS, FINISH_MS);
    kill(pid, SIGTERM);
    int exit_code = wait_exit(pid, test_now_ms() + SETUP_MS);
    if (exit_code >= 0)
        child = 0;
    CHILD_CHECK(exit_code == 0, "freeze_worker exited %d", exit_code);
    duro_runtime_destroy(turns);
    duro_runtime_destroy(workers);
    duro_registry_destroy(reg);
    duro_client_destroy(c);
    PQfinish(pg);
    if (!test_failed() && getenv("DURO_TEST_KEEP") == NULL)
        pg_test_drop_schema(schema);
}

/* Its locks stay held (the frozen session is never ended): the waiting
 * side gives up and retries rather than queue behind them. */
TEST(a_stopped_runtime_holding_locks_does_not_stall_another)
{
    frozen_runtime("held",
                   "&options=-c%20idle_in_transaction_session_timeout%3D0", 0);
}

/* Every default: the server also ends the stopped runtime's session. */
TEST(a_stopped_runtime_s_session_is_ended_and_the_other_goes_on)
{
    frozen_runtime("ended", "", 1);
}

TEST_MAIN(T(a_stopped_runtime_holding_locks_does_not_stall_another),
          T(a_stopped_runtime_s_session_is_ended_and_the_other_goes_on))
