/* crash_worker.c - the process test_crash and test_pg_crash kill: opens a
 * runtime on a given store (a SQLite file, or a SQLite or PostgreSQL URL)
 * with short lock timeouts, starts the instances of a workload
 * idempotently (every restart runs the same code), raises their external
 * events, and runs until every instance is terminal, then exits 0. Each
 * activity run appends one line to a side-effect log (O_APPEND) so the test
 * can count executions. The "chaos" workload (test_pg_chaos, whose server
 * restarts and stops for seconds) runs with lock timeouts of 15 s
 * instead, and waits for the test to cancel its Linger instances.
 *
 * crash_worker DB_PATH|URL LOG_PATH mixed|heavy|many|chaos
 *
 * A first argument that starts with "sqlite:" or "postgres" is a URL, any
 * other a SQLite file's path.
 *
 * Exit codes: 0 every instance terminal, 1 setup failure, 2 usage, 3 the
 * instances did not finish within the worker's own deadline. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "crash_workload.h"
#include "duro.h"

#define WORKER_DEADLINE_MS 120000

static int log_fd = -1;

/* One write() per line: O_APPEND makes it land whole after the others (a
 * SIGKILL cannot split a small write to a regular file). */
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

/* ---- activities ---------------------------------------------------------- */

/* Works for `ms`; 1 when cancelled meanwhile (its lock was lost). */
static int work(duro_activity *a, int64_t ms)
{
    return duro_activity_wait_cancelled(a, ms);
}

static int act_step(duro_activity *a, const char *in, duro_result *out)
{
    char buf[CRASH_STR_MAX];
    log_run(a);
    if (work(a, crash_pace_ms(in ? in : "")))
        return duro_fail(out, "cancelled");
    crash_step(in ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

/* Fails its first retry-policy attempt, succeeds (as Step) afterwards. */
static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    log_run(a);
    if (work(a, crash_pace_ms(in ? in : "")))
        return duro_fail(out, "cancelled");
    if (duro_activity_attempt(a) == 1)
        return duro_fail(out, "the first attempt always fails");
    char buf[CRASH_STR_MAX];
    crash_step(in ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

/* Step after 50..200 ms of "work"; gives up when cancelled (lock lost). */
static int act_slow(duro_activity *a, const char *in, duro_result *out)
{
    log_run(a);
    if (work(a, crash_slow_ms(in ? in : "")))
        return duro_fail(out, "cancelled");
    char buf[CRASH_STR_MAX];
    crash_step(in ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

/* Blocks on its first delivery until cancelled (the test kills its process
 * under it, so only a re-delivery to another process finishes it); a
 * later delivery is a Step at once. */
static int act_hold(duro_activity *a, const char *in, duro_result *out)
{
    log_run(a);
    if (duro_activity_delivery(a) == 1 && work(a, WORKER_DEADLINE_MS))
        return duro_fail(out, "cancelled");
    char buf[CRASH_STR_MAX];
    crash_step(in ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

/* ---- orchestrations ------------------------------------------------------ */

/* Awaits `name(input)`; NULL (with *out failed) when it did not succeed. */
static const char *call(duro_orch *o, const char *name, const char *input,
                        duro_result *out)
{
    duro_task *t = duro_call_activity(o, name, input);
    if (duro_await(o, t) != DURO_OK) {
        duro_failf(out, "%s failed: %s", name,
                   duro_task_error(t) ? duro_task_error(t) : "?");
        return NULL;
    }
    return duro_task_output(t);
}

static int steps(duro_orch *o, const char *name, const char *in, int n,
                 duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < n; i++)
        if ((acc = call(o, name, acc, out)) == NULL)
            return DURO_FAILED;
    return duro_ok(out, acc);
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    return steps(o, "Step", in, CRASH_CHAIN_STEPS, out);
}

static int orch_child(duro_orch *o, const char *in, duro_result *out)
{
    return steps(o, "Step", in, CRASH_CHILD_STEPS, out);
}

/* Joins `width` activities on "<id>/<i>" and returns their last letters. */
static const char *fan(duro_orch *o, const char *name, const char *id,
                       int width, duro_result *out)
{
    duro_task *t[CRASH_FANOUT_WIDTH];
    char letters[CRASH_FANOUT_WIDTH + 1];
    char input[CRASH_STR_MAX];
    for (int i = 0; i < width; i++) {
        crash_item_input(id, i, input, sizeof(input));
        t[i] = duro_call_activity(o, name, input);
    }
    if (duro_join_n(o, t, (size_t)width) != DURO_OK) {
        duro_fail(out, "a fanned-out activity failed");
        return NULL;
    }
    for (int i = 0; i < width; i++) {
        const char *r = duro_task_output(t[i]);
        size_t len = r ? strlen(r) : 0;
        letters[i] = len > 0 ? r[len - 1] : '?';
    }
    letters[width] = '\0';
    return duro_sprintf(o, "%s", letters);
}

static int orch_fanout(duro_orch *o, const char *in, duro_result *out)
{
    const char *letters = fan(o, "Step", in, CRASH_FANOUT_WIDTH, out);
    return letters ? duro_ok(out, letters) : DURO_FAILED;
}

static int orch_timers(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < CRASH_TIMER_ROUNDS; i++) {
        duro_task *t = duro_timer(o, 50 + 25 * i);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, "a timer failed");
        if ((acc = call(o, "Step", acc, out)) == NULL)
            return DURO_FAILED;
    }
    return duro_ok(out, acc);
}

static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *c = duro_call_sub_orchestration(o, "Child", NULL, NULL, in);
    if (duro_await(o, c) != DURO_OK)
        return duro_failf(out, "child failed: %s",
                          duro_task_error(c) ? duro_task_error(c) : "?");
    const char *r = call(o, "Step", duro_task_output(c), out);
    return r ? duro_ok(out, r) : DURO_FAILED;
}

static int orch_retry(duro_orch *o, const char *in, duro_result *out)
{
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 3;
    p.backoff = DURO_BACKOFF_FIXED;
    p.initial_delay_ms = CRASH_RETRY_DELAY_MS;
    duro_task *t = duro_call_activity_with_retry(o, "Flaky", in, &p);
    if (duro_await(o, t) != DURO_OK)
        return duro_failf(out, "Flaky failed: %s",
                          duro_task_error(t) ? duro_task_error(t) : "?");
    return duro_ok(out, duro_task_output(t));
}

/* Waits for one "go"; a second raise (a restarted worker raises again) is
 * never consumed, so it cannot change the result. */
static int orch_event(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *e = duro_wait_event(o, "go");
    if (duro_await(o, e) != DURO_OK)
        return duro_fail(out, "event wait failed");
    const char *r = call(o, "Step", duro_task_output(e), out);
    return r ? duro_ok(out, r) : DURO_FAILED;
}

static int orch_continue(duro_orch *o, const char *in, duro_result *out)
{
    const char *r = call(o, "Step", in, out);
    if (r == NULL)
        return DURO_FAILED;
    if (duro_execution_id(o) < CRASH_CONTINUE_EXECUTIONS)
        return duro_continue_as_new(o, out, r);
    return duro_ok(out, r);
}

static int orch_heavy(duro_orch *o, const char *in, duro_result *out)
{
    const char *letters = fan(o, "Slow", in, CRASH_HEAVY_WIDTH, out);
    if (letters == NULL)
        return DURO_FAILED;
    return steps(o, "Slow", duro_sprintf(o, "%s:%s", in, letters),
                 CRASH_HEAVY_DEPTH, out);
}

static int orch_hold(duro_orch *o, const char *in, duro_result *out)
{
    return steps(o, "Hold", in, 1, out);
}

static int orch_short(duro_orch *o, const char *in, duro_result *out)
{
    return steps(o, "Step", in, CRASH_SHORT_STEPS, out);
}

/* Ends only cancelled: its timer fires in an hour. */
static int orch_linger(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < CRASH_LINGER_STEPS; i++)
        if ((acc = call(o, "Step", acc, out)) == NULL)
            return DURO_FAILED;
    if (duro_await(o, duro_timer(o, CRASH_LINGER_TIMER_MS)) != DURO_OK)
        return duro_fail(out, "the timer failed");
    const char *r = call(o, "Step", acc, out);
    return r ? duro_ok(out, r) : DURO_FAILED;
}

/* ---- main ---------------------------------------------------------------- */

static int register_all(duro_registry *r)
{
    static const struct {
        const char *name;
        duro_orchestration_fn fn;
    } orchs[] = {{"Chain", orch_chain},   {"Child", orch_child},
                 {"Fanout", orch_fanout}, {"Timers", orch_timers},
                 {"Parent", orch_parent}, {"Retry", orch_retry},
                 {"Event", orch_event},   {"Continue", orch_continue},
                 {"Heavy", orch_heavy},   {"Hold", orch_hold},
                 {"Short", orch_short},   {"Linger", orch_linger}};
    int rc = DURO_OK;
    for (size_t i = 0; rc == DURO_OK && i < CRASH_COUNT(orchs); i++)
        rc = duro_registry_add_orchestration(r, orchs[i].name, NULL,
                                             orchs[i].fn, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(r, "Step", act_step, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(r, "Flaky", act_flaky, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(r, "Slow", act_slow, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(r, "Hold", act_hold, NULL);
    return rc;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "crash_worker[%ld]: %s: %s (%s)\n", (long)getpid(), what,
            duro_errname(rc), duro_errmsg());
    return 1;
}

/* A storage error that a retry may not meet: the server restarting under
 * test_pg_server_crash. */
static int retryable(int rc)
{
    return rc == DURO_STORAGE || rc == DURO_BUSY;
}

/* Creates the runtime (client 0) or the client (1), again while that fails
 * retryably and `until` (duro_now_ms) has not passed. */
static int open_retrying(duro_runtime **rt, duro_client **c, const char *url,
                         const duro_registry *reg,
                         const duro_runtime_options *o, int client,
                         int64_t until)
{
    for (;;) {
        int rc = client ? duro_client_create(url, c)
                        : duro_runtime_create(url, reg, o, rt);
        if (!retryable(rc) || duro_now_ms() >= until)
            return rc;
        usleep(50000);
    }
}

/* Starts every instance (idempotently: a start retried after a lost reply
 * finds its instance) and raises the events of the Event instances that
 * are not finished yet. */
static int start_instances(duro_client *c, const crash_group *groups,
                           size_t ngroups)
{
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1;
    char id[64], payload[CRASH_STR_MAX];
    for (size_t g = 0; g < ngroups; g++) {
        for (int k = 0; k < groups[g].count; k++) {
            snprintf(id, sizeof(id), "%s-%d", groups[g].prefix, k);
            int rc;
            int64_t until = duro_now_ms() + WORKER_DEADLINE_MS;
            while (retryable(rc = duro_client_start(
                                 c, id, groups[g].orchestration, id, &so)) &&
                   duro_now_ms() < until)
                usleep(50000);
            if (rc != DURO_OK)
                return fail("start", rc);
        }
    }
    for (size_t g = 0; g < ngroups; g++) {
        if (groups[g].kind != CRASH_EVENT)
            continue;
        for (int k = 0; k < groups[g].count; k++) {
            snprintf(id, sizeof(id), "%s-%d", groups[g].prefix, k);
            duro_instance_info *info = NULL;
            int rc = duro_client_get_status(c, id, &info);
            if (rc != DURO_OK)
                return fail("get_status", rc);
            int done = duro_status_is_terminal(info->status);
            duro_free(info);
            if (done)
                continue;
            crash_event_payload(id, payload, sizeof(payload));
            rc = duro_client_raise_event(c, id, "go", payload);
            /* finished in between: nothing to raise */
            if (rc != DURO_OK && rc != DURO_INVALID_STATE)
                return fail("raise_event", rc);
        }
    }
    return 0;
}

static int wait_all(duro_client *c, const crash_group *groups, size_t ngroups)
{
    int64_t deadline = duro_now_ms() + WORKER_DEADLINE_MS;
    char id[64];
    for (size_t g = 0; g < ngroups; g++) {
        for (int k = 0; k < groups[g].count; k++) {
            snprintf(id, sizeof(id), "%s-%d", groups[g].prefix, k);
            int64_t left = deadline - duro_now_ms();
            duro_instance_info *info = NULL;
            int rc = duro_client_wait(c, id, left > 0 ? left : 0, &info);
            duro_free(info);
            if (retryable(rc) && duro_now_ms() < deadline) {
                usleep(50000);
                k--; /* the same instance again */
                continue;
            }
            if (rc == DURO_TIMEOUT)
                return 3;
            if (rc != DURO_OK)
                return fail("wait", rc);
        }
    }
    return 0;
}

/* The store's URL: `arg` itself when it is one (sqlite:, postgres:// or
 * postgresql://), else sqlite:PATH. */
static void store_url(const char *arg, char *url, size_t cap)
{
    if (strncmp(arg, "sqlite:", 7) == 0 || strncmp(arg, "postgres", 8) == 0)
        snprintf(url, cap, "%s", arg);
    else
        snprintf(url, cap, "sqlite:%s", arg);
}

int main(int argc, char **argv)
{
    if (argc != 4 ||
        (strcmp(argv[3], "mixed") != 0 && strcmp(argv[3], "heavy") != 0 &&
         strcmp(argv[3], "many") != 0 && strcmp(argv[3], "chaos") != 0)) {
        fprintf(stderr, "usage: crash_worker DB_PATH|URL LOG_PATH "
                        "mixed|heavy|many|chaos\n");
        return 2;
    }
    const crash_group *groups = crash_mixed;
    size_t ngroups = CRASH_COUNT(crash_mixed);
    int chaos = strcmp(argv[3], "chaos") == 0;
    if (strcmp(argv[3], "heavy") == 0) {
        groups = crash_heavy;
        ngroups = CRASH_COUNT(crash_heavy);
    } else if (strcmp(argv[3], "many") == 0) {
        groups = crash_many;
        ngroups = CRASH_COUNT(crash_many);
    } else if (chaos) {
        groups = crash_chaos;
        ngroups = CRASH_COUNT(crash_chaos);
    }
    char url[4200];
    store_url(argv[1], url, sizeof(url));
    log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror(argv[2]);
        return 1;
    }

    duro_runtime_options o;
    duro_runtime_options_init(&o);
    o.orchestration_lock_timeout_ms = 500;
    o.worker_lock_timeout_ms = 500;
    o.lock_renewal_ms = 100;
    if (chaos) {
        /* A result finished while the server is down for 10 s is still
         * acked afterwards, and the backends killed every 2 s do not make
         * every lock expire. */
        o.orchestration_lock_timeout_ms = 15000;
        o.worker_lock_timeout_ms = 15000;
        o.lock_renewal_ms = 2000;
    }
    o.poll_interval_ms = 20;
    o.cancel_grace_ms = 2000;
    /* Every kill raises the delivery count of what was in flight; a Slow
     * activity killed on each of its deliveries would be declared poison
     * after the default 10. Poison detection is policy, not what this test
     * is about, so it is pushed out of reach. */
    o.max_attempts = 1000;
    o.log_level = getenv("DURO_TEST_LOG") ? DURO_LOG_DEBUG : DURO_LOG_ERROR;

    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    int result = 1, rc;
    /* Opening a store connects to it (and creates its schema): a server
     * restarting, or a backend killed meanwhile, is retried. */
    int64_t until = duro_now_ms() + WORKER_DEADLINE_MS;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = register_all(reg)) != DURO_OK) {
        fail("registry", rc);
    } else if ((rc = open_retrying(&rt, &c, url, reg, &o, 0, until)) !=
               DURO_OK) {
        fail("runtime_create", rc);
    } else if ((rc = open_retrying(&rt, &c, url, reg, &o, 1, until)) !=
               DURO_OK) {
        fail("client_create", rc);
    } else if ((rc = duro_runtime_start(rt)) != DURO_OK) {
        fail("runtime_start", rc);
    } else if ((result = start_instances(c, groups, ngroups)) == 0) {
        result = wait_all(c, groups, ngroups);
    }
    if (rt != NULL && (rc = duro_runtime_shutdown(rt, 5000)) != DURO_OK)
        fail("shutdown", rc);
    duro_runtime_destroy(rt);
    duro_client_destroy(c);
    duro_registry_destroy(reg);
    close(log_fd);
    return result;
}
