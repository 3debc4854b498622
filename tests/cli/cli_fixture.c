/* cli_fixture.c - puts instances into real states on a SQLite file for the
 * duro command's tests (test_cli.sh), with a real runtime:
 *   cli_fixture populate URL     hello-1, hello-2 completed (hello-2's
 *                                output not UTF-8, as an earlier duro
 *                                stored it); boom-1 failed;
 *                                wait-1..3 running (waiting for "go");
 *                                slow-1 cancelled by user:alice while its
 *                                activity ran; later-1 pending (1 h delay)
 *   cli_fixture control URL      done-1 completed; susp-1 suspended by
 *                                user:bob, then sent "go" (kept); term-1
 *                                terminated by user:carol while its
 *                                activity ran; careful-1 (observe_cancel)
 *                                cancelled by user:dave, cleaning up;
 *                                resumed-1 suspended and resumed by
 *                                user:erin; w-1..4 running (waiting for
 *                                "go"); pend-1 pending (1 h delay)
 *   (every runtime also has Chain, which continues as new while its
 *   input, a count, is above 0, and Racer, whose completing turn waits
 *   for a file: see racer())
 *   cli_fixture run URL ID=STATUS...  runs a runtime until each ID has
 *                                STATUS (a status word) and no
 *                                orchestrator message is ready or locked
 *                                (what was sent has been handled)
 *   cli_fixture newer-schema PATH  records schema version 99 in the file
 *   cli_fixture sql PATH SQL     runs SQL on the file (created if missing)
 *   cli_fixture hostile URL      for duro ui's browser tests: ids with
 *                                quotes, '<img ...>', a newline and invalid
 *                                UTF-8 (stored as an earlier duro did),
 *                                running (waiting for "go"); fan-1
 *                                completed after 5000 parallel activities
 *                                (10,002 history events); retry-1 completed,
 *                                its activity failing twice then succeeding
 *                                under a retry policy (40 ms backoff);
 *                                retry-timeout-1 completed, its first
 *                                attempt timed out (200 ms) and cancelled
 *   cli_fixture views URL        for the console's views: echo-big-1
 *                                completed, its input, output and custom
 *                                status 6000 bytes each; parent-1 running,
 *                                its children kid-1 completed and kid-2
 *                                running (waiting for "go"); stuck-1
 *                                pending, its orchestration Missing not
 *                                registered (a recorded problem);
 *                                spoof-out-1 completed and spoof-cancel-1
 *                                cancelled by "user:\u202Eecila", with bidi
 *                                and invisible characters in their
 *                                output, custom status and reason;
 *                                spoof-name-1 completed, of orchestration
 *                                "Sp\u202Eoof"
 *   cli_fixture serve URL        runs a runtime until SIGTERM/SIGINT or
 *                                until stdin closes (duro ui's browser
 *                                tests: terminate, suspend take effect)
 * Exits 0 when every instance reached its state, 1 otherwise. */
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

/* Echoes its input: hello-1's output is JSON, hello-2's is not JSON (and
 * made not UTF-8 afterwards, see not_utf8()). */
static int greet(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    return duro_ok(out, input);
}

static int explode(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    (void)input;
    return duro_fail(out, "the flux capacitor overheated");
}

static int block(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    duro_activity_wait_cancelled(a, 30000);
    return duro_fail(out, "stopped");
}

/* Fails its first two attempts: retry-1's activity. */
static int flaky(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    uint32_t attempt = duro_activity_attempt(a);
    if (attempt < 3)
        return duro_failf(out, "flaky: attempt %u failed", attempt);
    return duro_ok(out, "\"third time lucky\"");
}

/* Hangs on its first attempt until cancelled (its attempt timeout), answers
 * at once afterwards: retry-timeout-1's activity. */
static int sleepy(duro_activity *a, const char *input, duro_result *out)
{
    if (duro_activity_attempt(a) < 2) {
        duro_activity_wait_cancelled(a, 30000);
        return duro_fail(out, "stopped");
    }
    return duro_ok(out, input);
}

static int hello(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Greet", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* A change behind a patch marker: greets twice where it once greeted
 * once (the browser tests' timeline shows the marker). */
static int patched(duro_orch *o, const char *input, duro_result *out)
{
    if (duro_patched(o, "greet-twice")) {
        duro_task *first = duro_call_activity(o, "Greet", input);
        if (duro_await(o, first) != DURO_OK)
            return duro_fail(out, duro_task_error(first));
    }
    return hello(o, input, out);
}

static int boom(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Explode", input);
    if (duro_await(o, t) != DURO_OK)
        return duro_failf(out, "explode: %s", duro_task_error(t));
    return duro_ok(out, NULL);
}

static int waiter(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *t = duro_wait_event(o, "go");
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

static int slow(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Block", input);
    duro_await(o, t);
    return duro_ok(out, NULL);
}

/* Calls Flaky under a retry policy: attempts 1 and 2 fail, each followed
 * by a 40 ms backoff timer, attempt 3 succeeds. */
static int retrying(duro_orch *o, const char *input, duro_result *out)
{
    duro_retry_policy policy;
    duro_retry_policy_init(&policy);
    policy.max_attempts = 3;
    policy.backoff = DURO_BACKOFF_FIXED;
    policy.initial_delay_ms = 40;
    duro_task *t = duro_call_activity_with_retry(o, "Flaky", input, &policy);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* Calls Sleepy with a 200 ms attempt timeout: attempt 1 times out (and is
 * cancelled), attempt 2 succeeds after a 20 ms backoff (up to 5 attempts, so
 * that a loaded machine still ends completed). */
static int retrying_timeout(duro_orch *o, const char *input, duro_result *out)
{
    duro_retry_policy policy;
    duro_retry_policy_init(&policy);
    policy.max_attempts = 5;
    policy.backoff = DURO_BACKOFF_FIXED;
    policy.initial_delay_ms = 20;
    policy.attempt_timeout_ms = 200;
    duro_task *t = duro_call_activity_with_retry(o, "Sleepy", input, &policy);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* Calls Greet FANOUT times at once and waits for all: a timeline of 10,002
 * events (started, 5000 scheduled, 5000 completed, completed). */
#define FANOUT 5000
static int fanout(duro_orch *o, const char *input, duro_result *out)
{
    static duro_task *tasks[FANOUT];
    for (size_t i = 0; i < FANOUT; i++)
        tasks[i] = duro_call_activity(o, "Greet", input);
    if (duro_join_n(o, tasks, FANOUT) != DURO_OK)
        return duro_fail(out, "a greeting failed");
    return duro_ok(out, NULL);
}

static void sleep_ms(long ms);

/* Waits for "go"; the turn that takes it (not a replay) creates the file
 * INPUT.in-turn and holds until the file INPUT.release exists (30 s at
 * most), then completes the instance. A cancel or terminate sent in
 * between arrives while the turn that completes the instance runs: the
 * race "cancel vs complete", which the request loses. */
static int racer(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *t = duro_wait_event(o, "go");
    duro_await(o, t);
    if (!duro_is_replaying(o) && input != NULL) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.in-turn", input);
        FILE *f = fopen(path, "w");
        if (f != NULL)
            fclose(f);
        snprintf(path, sizeof(path), "%s.release", input);
        for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++)
            sleep_ms(10);
    }
    return duro_ok(out, "\"raced\"");
}

/* Continues as new while its input, a count, is above 0: "4" makes
 * executions 1 to 5, the last one completed. */
static int chain(duro_orch *o, const char *input, duro_result *out)
{
    int left = input != NULL ? atoi(input) : 0;
    if (left <= 0)
        return duro_ok(out, "\"end\"");
    char next[16];
    snprintf(next, sizeof(next), "%d", left - 1);
    return duro_continue_as_new(o, out, next);
}

/* Echo: its custom status is its input, which it returns. */
static int echo(duro_orch *o, const char *input, duro_result *out)
{
    duro_set_custom_status(o, input);
    return duro_ok(out, input);
}

/* Parent: kid-1 (Hello) then kid-2 (Waiter, waits for "go"). */
static int parent(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *a =
        duro_call_sub_orchestration(o, "Hello", NULL, "kid-1", "\"kid\"");
    duro_await(o, a);
    duro_task *b =
        duro_call_sub_orchestration(o, "Waiter", NULL, "kid-2", NULL);
    if (duro_await(o, b) != DURO_OK)
        return duro_fail(out, duro_task_error(b));
    return duro_ok(out, duro_task_output(b));
}

/* Registered with observe_cancel: a cancel while it waits for "go" is
 * delivered to it, and its cleanup waits for "undone". */
static int careful(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *t = duro_wait_event(o, "go");
    if (duro_await(o, t) == DURO_OK)
        return duro_ok(out, duro_task_output(t));
    duro_task *undo = duro_wait_event(o, "undone");
    duro_await(o, undo);
    return duro_ok(out, "\"compensated\"");
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to 30 s for @p id to reach @p status with at least @p events
 * history events. */
static int reach(duro_client *c, const char *id, int status, uint64_t events)
{
    for (int i = 0; i < 3000; i++) {
        duro_instance_info *info = NULL;
        if (duro_client_get_status(c, id, &info) == DURO_OK &&
            info->status == status && info->history_count >= events) {
            duro_free(info);
            return 0;
        }
        duro_free(info);
        sleep_ms(10);
    }
    fprintf(stderr, "cli_fixture: %s never became %s\n", id,
            duro_status_name(status));
    return -1;
}

/* A runtime with every orchestration and activity, started, and a client:
 * on failure reports and returns 1 (what was made is still freed by
 * stop()). */
typedef struct world {
    duro_registry *reg;
    duro_runtime *rt;
    duro_client *c;
} world;

static int begin(const char *url, world *w)
{
    duro_orchestration_options observe;
    duro_orchestration_options_init(&observe);
    observe.observe_cancel = 1;
    if (duro_registry_create(&w->reg) != DURO_OK ||
        duro_registry_add_orchestration(w->reg, "Hello", NULL, hello, NULL) ||
        duro_registry_add_orchestration(w->reg, "Boom", NULL, boom, NULL) ||
        duro_registry_add_orchestration(w->reg, "Patched", NULL, patched,
                                        NULL) ||
        duro_registry_add_orchestration(w->reg, "Waiter", NULL, waiter, NULL) ||
        duro_registry_add_orchestration(w->reg, "Slow", NULL, slow, NULL) ||
        duro_registry_add_orchestration(w->reg, "Fanout", NULL, fanout, NULL) ||
        duro_registry_add_orchestration(w->reg, "Chain", NULL, chain, NULL) ||
        duro_registry_add_orchestration(w->reg, "Racer", NULL, racer, NULL) ||
        duro_registry_add_orchestration(w->reg, "Retry", NULL, retrying,
                                        NULL) ||
        duro_registry_add_orchestration(w->reg, "RetryTimeout", NULL,
                                        retrying_timeout, NULL) ||
        duro_registry_add_orchestration_ex(w->reg, "Careful", NULL, careful,
                                           NULL, &observe) ||
        duro_registry_add_orchestration(w->reg, "Echo", NULL, echo, NULL) ||
        duro_registry_add_orchestration(w->reg, "Sp\xe2\x80\xaeoof", NULL, echo,
                                        NULL) ||
        duro_registry_add_orchestration(w->reg, "Parent", NULL, parent, NULL) ||
        duro_registry_add_activity(w->reg, "Greet", greet, NULL) ||
        duro_registry_add_activity(w->reg, "Explode", explode, NULL) ||
        duro_registry_add_activity(w->reg, "Block", block, NULL) ||
        duro_registry_add_activity(w->reg, "Flaky", flaky, NULL) ||
        duro_registry_add_activity(w->reg, "Sleepy", sleepy, NULL) ||
        duro_runtime_create(url, w->reg, NULL, &w->rt) != DURO_OK ||
        duro_client_create(url, &w->c) != DURO_OK ||
        duro_runtime_start(w->rt) != DURO_OK) {
        fprintf(stderr, "cli_fixture: setup: %s\n", duro_errmsg());
        return 1;
    }
    return 0;
}

static void stop(world *w)
{
    if (w->rt != NULL)
        duro_runtime_shutdown(w->rt, 10000);
    duro_runtime_destroy(w->rt);
    duro_client_destroy(w->c);
    duro_registry_destroy(w->reg);
}

/* Start options that delay the start by an hour: the instance stays
 * pending. */
static duro_start_options an_hour_later(void)
{
    duro_start_options o;
    duro_start_options_init(&o);
    o.delay_ms = 3600 * 1000;
    return o;
}

/* 1 when a call failed: reports it. */
static int failed_call(int rc, const char *what)
{
    if (rc != DURO_OK)
        fprintf(stderr, "cli_fixture: %s: %s\n", what, duro_errmsg());
    return rc != DURO_OK;
}

/* duro refuses text that is not UTF-8 where it enters (README, "Text is
 * UTF-8"), but a SQLite store written by an earlier duro may hold it, and
 * the command must show such a store: these two put it there as those
 * versions did. start_raw starts an instance through the provider itself
 * (SQLite stores the bytes as given; a runtime then runs it like any
 * other); not_utf8 rewrites, with SQL, the marker "~ff~" in what an
 * instance stored (output, history payloads) into the bytes FF FE. */
static int start_raw(const char *url, const char *id, const char *name)
{
    duro_provider *p = NULL;
    duro_error err;
    int rc = duro_provider_open(url, &p, &err);
    duro_work_item item = {
        .kind = DURO_WORK_START, .instance_id = id, .name = name};
    if (rc == DURO_OK)
        rc = p->enqueue_for_orchestrator(p, &item, 0, &err);
    if (rc != DURO_OK)
        fprintf(stderr, "cli_fixture: start %s: %s\n", name, err.message);
    duro_provider_close(p);
    return rc != DURO_OK;
}

static int run_sql(const char *path, const char *sql);

static int not_utf8(const char *url, const char *id)
{
    char sql[1024];
    static const char ff[] = "replace(%s, '~ff~', CAST(X'FFFE' AS TEXT))";
    char out[128], payload[128];
    snprintf(out, sizeof(out), ff, "output");
    snprintf(payload, sizeof(payload), ff, "payload");
    snprintf(sql, sizeof(sql),
             "UPDATE instances SET output = %s WHERE instance_id = '%s';"
             "UPDATE executions SET output = %s WHERE instance_id = '%s';"
             "UPDATE history SET payload = %s WHERE instance_id = '%s';",
             out, id, out, id, payload, id);
    char path[1024];
    snprintf(path, sizeof(path), "%.*s",
             (int)strcspn(url + strlen("sqlite:"), "?"),
             url + strlen("sqlite:"));
    return run_sql(path, sql);
}

static int populate(const char *url)
{
    world w = {0};
    int failed = begin(url, &w);
    duro_client *c = w.c;
    duro_start_options later = an_hour_later();
    if (!failed &&
        (duro_client_start(c, "hello-1", "Hello", "{\"greeting\":\"hi\"}",
                           NULL) ||
         duro_client_start(c, "hello-2", "Hello", "not json ~ff~ bytes",
                           NULL) ||
         duro_client_start(c, "boom-1", "Boom", NULL, NULL) ||
         duro_client_start(c, "wait-1", "Waiter", NULL, NULL) ||
         duro_client_start(c, "wait-2", "Waiter", NULL, NULL) ||
         duro_client_start(c, "wait-3", "Waiter", NULL, NULL) ||
         duro_client_start(c, "slow-1", "Slow", "\"job\"", NULL) ||
         duro_client_start(c, "later-1", "Hello", "\"tomorrow\"", &later))) {
        fprintf(stderr, "cli_fixture: start: %s\n", duro_errmsg());
        failed = 1;
    }
    if (!failed)
        failed = reach(c, "hello-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "hello-2", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "boom-1", DURO_STATUS_FAILED, 0) ||
                 reach(c, "wait-1", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "wait-2", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "wait-3", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "slow-1", DURO_STATUS_RUNNING, 2);
    if (!failed &&
        duro_client_cancel(c, "slow-1", "bad deploy", "user:alice") != DURO_OK)
        failed = 1;
    if (!failed)
        failed = reach(c, "slow-1", DURO_STATUS_CANCELLED, 0);
    stop(&w);
    /* hello-2's output is not UTF-8, as an earlier duro stored it */
    if (!failed)
        failed = not_utf8(url, "hello-2");
    return failed ? 1 : 0;
}

/* Waits up to 30 s until the history of @p id has an event of @p kind
 * with @p flag (0: any). */
static int reach_event(duro_client *c, const char *id, int kind, uint32_t flag)
{
    for (int i = 0; i < 3000; i++) {
        duro_history *h = NULL;
        int found = 0;
        if (duro_client_read_history(c, id, 0, &h) == DURO_OK)
            for (size_t k = 0; k < h->count; k++)
                found |= (int)h->events[k].kind == kind &&
                         (h->events[k].flags & flag) == flag;
        duro_history_free(h);
        if (found)
            return 0;
        sleep_ms(10);
    }
    fprintf(stderr, "cli_fixture: %s never recorded %s\n", id,
            duro_event_kind_name(kind));
    return -1;
}

static int control(const char *url)
{
    world w = {0};
    int failed = begin(url, &w);
    duro_client *c = w.c;
    duro_start_options later = an_hour_later();
    static const char *const waiters[] = {"susp-1", "resumed-1", "w-1",
                                          "w-2",    "w-3",       "w-4"};
    for (size_t i = 0; !failed && i < sizeof(waiters) / sizeof(*waiters); i++)
        failed = failed_call(
            duro_client_start(c, waiters[i], "Waiter", NULL, NULL), "start");
    if (!failed)
        failed =
            failed_call(duro_client_start(c, "done-1", "Hello", "\"x\"", NULL),
                        "start") ||
            failed_call(duro_client_start(c, "term-1", "Slow", "\"job\"", NULL),
                        "start") ||
            failed_call(
                duro_client_start(c, "careful-1", "Careful", NULL, NULL),
                "start") ||
            failed_call(
                duro_client_start(c, "pend-1", "Hello", "\"later\"", &later),
                "start");
    for (size_t i = 0; !failed && i < sizeof(waiters) / sizeof(*waiters); i++)
        failed = reach(c, waiters[i], DURO_STATUS_RUNNING, 2);
    if (!failed)
        failed = reach(c, "done-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "term-1", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "careful-1", DURO_STATUS_RUNNING, 2);
    /* careful-1: told of its cancel, cleaning up */
    if (!failed)
        failed = failed_call(duro_client_cancel(c, "careful-1", "rollback",
                                                "user:dave"),
                             "cancel") ||
                 reach_event(c, "careful-1",
                             DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                             DURO_CANCEL_OBSERVED) ||
                 reach_event(c, "careful-1", DURO_EVENT_TIMER_CREATED,
                             DURO_TIMER_CLEANUP_DEADLINE) ||
                 reach(c, "careful-1", DURO_STATUS_RUNNING, 0);
    /* susp-1: suspended, then an event it keeps until resumed */
    if (!failed)
        failed =
            failed_call(
                duro_client_suspend(c, "susp-1", "maintenance", "user:bob"),
                "suspend") ||
            reach(c, "susp-1", DURO_STATUS_SUSPENDED, 0) ||
            failed_call(duro_client_raise_event(c, "susp-1", "go", "\"early\""),
                        "raise") ||
            reach_event(c, "susp-1", DURO_EVENT_EVENT_RAISED, 0);
    /* term-1: terminated while its activity runs */
    if (!failed)
        failed = failed_call(
                     duro_client_terminate(c, "term-1", "stuck", "user:carol"),
                     "terminate") ||
                 reach(c, "term-1", DURO_STATUS_TERMINATED, 0);
    /* resumed-1: suspended and resumed */
    if (!failed)
        failed =
            failed_call(duro_client_suspend(c, "resumed-1", NULL, "user:erin"),
                        "suspend") ||
            reach(c, "resumed-1", DURO_STATUS_SUSPENDED, 0) ||
            failed_call(
                duro_client_resume(c, "resumed-1", "all clear", "user:erin"),
                "resume") ||
            reach_event(c, "resumed-1", DURO_EVENT_EXECUTION_RESUMED, 0) ||
            reach(c, "resumed-1", DURO_STATUS_RUNNING, 0);
    stop(&w);
    return failed ? 1 : 0;
}

/* Waits up to 30 s until the runtime has handled every visible
 * orchestrator message. */
static int drained(duro_client *c)
{
    for (int i = 0; i < 3000; i++) {
        duro_store_stats *st = NULL;
        int done = duro_client_store_stats(c, &st) == DURO_OK &&
                   st->orchestrator_ready == 0 && st->orchestrator_locked == 0;
        duro_free(st);
        if (done)
            return 0;
        sleep_ms(10);
    }
    fprintf(stderr, "cli_fixture: orchestrator messages left unhandled\n");
    return -1;
}

/* Runs a runtime until each "ID=STATUS" holds and the messages are
 * handled. */
static int run(const char *url, int count, char **targets)
{
    world w = {0};
    int failed = begin(url, &w);
    for (int i = 0; !failed && i < count; i++) {
        char id[256], word[64];
        if (sscanf(targets[i], "%255[^=]=%63[a-z_]", id, word) != 2) {
            fprintf(stderr, "cli_fixture: bad target '%s'\n", targets[i]);
            failed = 1;
            break;
        }
        int status = duro_status_parse(word);
        if (status <= 0) {
            fprintf(stderr, "cli_fixture: unknown status in '%s'\n",
                    targets[i]);
            failed = 1;
            break;
        }
        failed = reach(w.c, id, status, 0);
    }
    if (!failed)
        failed = drained(w.c);
    stop(&w);
    return failed ? 1 : 0;
}

static int newer_schema(const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "INSERT INTO duro_schema VALUES(99, 0)", NULL,
                          NULL, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "cli_fixture: %s: %s\n", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : 1;
}

static int run_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "cli_fixture: %s: %s\n", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : 1;
}

static int hostile(const char *url)
{
    static const char *const ids[] = {"a\"<img src=x onerror=alert(1)>\nb",
                                      "quote'\"-1", "<script>alert(2)</script>",
                                      "bad-\xff\xfe-utf8"};
    world w = {0};
    int failed = begin(url, &w);
    /* the last id is not UTF-8: started as an earlier duro did */
    for (size_t i = 0; !failed && i < sizeof(ids) / sizeof(*ids); i++)
        failed = i + 1 < sizeof(ids) / sizeof(*ids)
                     ? failed_call(
                           duro_client_start(w.c, ids[i], "Waiter", NULL, NULL),
                           "start")
                     : start_raw(url, ids[i], "Waiter");
    /* the retried calls first: behind fan-1's 5000 activities,
     * retry-timeout-1's second attempt would wait past its timeout */
    if (!failed)
        failed = failed_call(
                     duro_client_start(w.c, "retry-1", "Retry", "\"r\"", NULL),
                     "start") ||
                 failed_call(duro_client_start(w.c, "retry-timeout-1",
                                               "RetryTimeout", "\"t\"", NULL),
                             "start") ||
                 reach(w.c, "retry-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(w.c, "retry-timeout-1", DURO_STATUS_COMPLETED, 0) ||
                 failed_call(
                     duro_client_start(w.c, "fan-1", "Fanout", "\"x\"", NULL),
                     "start");
    for (size_t i = 0; !failed && i < sizeof(ids) / sizeof(*ids); i++)
        failed = reach(w.c, ids[i], DURO_STATUS_RUNNING, 2);
    if (!failed)
        failed = reach(w.c, "fan-1", DURO_STATUS_COMPLETED, 0);
    stop(&w);
    return failed ? 1 : 0;
}

/* Waits up to 30 s for @p id to have a last problem recorded. */
static int reach_problem(duro_client *c, const char *id)
{
    for (int i = 0; i < 3000; i++) {
        duro_instance_info *info = NULL;
        int found = duro_client_get_status(c, id, &info) == DURO_OK &&
                    info->last_problem != NULL;
        duro_free(info);
        if (found)
            return 0;
        sleep_ms(10);
    }
    fprintf(stderr, "cli_fixture: %s never had a problem recorded\n", id);
    return -1;
}

static int views(const char *url)
{
    enum { LONG_BYTES = 6000 };
    char big[LONG_BYTES + 1];
    /* a JSON string of 6000 bytes: "line 0001 ...\n" lines */
    size_t o = 0;
    big[o++] = '"';
    for (int line = 1; o + 40 < LONG_BYTES; line++)
        o += (size_t)snprintf(big + o, sizeof(big) - o,
                              "line %04d of a long value\\n", line);
    while (o < LONG_BYTES - 1)
        big[o++] = 'z';
    big[o++] = '"';
    big[o] = '\0';
    /* U+202E (right-to-left override) and U+200B (zero width space) */
    static const char spoof[] = "\"out:\xe2\x80\xae"
                                "evil\xe2\x80\x8b\"";
    world w = {0};
    int failed = begin(url, &w);
    duro_client *c = w.c;
    if (!failed)
        failed =
            failed_call(duro_client_start(c, "echo-big-1", "Echo", big, NULL),
                        "start") ||
            failed_call(duro_client_start(c, "parent-1", "Parent", NULL, NULL),
                        "start") ||
            failed_call(duro_client_start(c, "stuck-1", "Missing", NULL, NULL),
                        "start") ||
            failed_call(
                duro_client_start(c, "spoof-out-1", "Echo", spoof, NULL),
                "start") ||
            failed_call(
                duro_client_start(c, "spoof-cancel-1", "Waiter", NULL, NULL),
                "start") ||
            failed_call(duro_client_start(c, "spoof-name-1",
                                          "Sp\xe2\x80\xaeoof", "\"n\"", NULL),
                        "start");
    if (!failed)
        failed = reach(c, "echo-big-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "kid-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "kid-2", DURO_STATUS_RUNNING, 2) ||
                 reach(c, "spoof-out-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "spoof-name-1", DURO_STATUS_COMPLETED, 0) ||
                 reach(c, "spoof-cancel-1", DURO_STATUS_RUNNING, 2) ||
                 reach_problem(c, "stuck-1");
    if (!failed)
        failed =
            failed_call(duro_client_cancel(c, "spoof-cancel-1",
                                           "re\xe2\x80\xaenosae\xe2\x80\x8bx",
                                           "user:\xe2\x80\xae"
                                           "ecila"),
                        "cancel") ||
            reach(c, "spoof-cancel-1", DURO_STATUS_CANCELLED, 0);
    stop(&w);
    return failed ? 1 : 0;
}

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static int serve(const char *url)
{
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    world w = {0};
    int failed = begin(url, &w);
    while (!failed && !stopping) {
        struct pollfd in = {0, POLLIN, 0};
        if (poll(&in, 1, 100) > 0) {
            char buf[64];
            if (read(0, buf, sizeof(buf)) <= 0)
                break;
        }
    }
    stop(&w);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "populate") == 0)
        return populate(argv[2]);
    if (argc == 3 && strcmp(argv[1], "control") == 0)
        return control(argv[2]);
    if (argc >= 4 && strcmp(argv[1], "run") == 0)
        return run(argv[2], argc - 3, argv + 3);
    if (argc == 3 && strcmp(argv[1], "newer-schema") == 0)
        return newer_schema(argv[2]);
    if (argc == 4 && strcmp(argv[1], "sql") == 0)
        return run_sql(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "hostile") == 0)
        return hostile(argv[2]);
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    if (argc == 3 && strcmp(argv[1], "views") == 0)
        return views(argv[2]);
    fprintf(stderr, "usage: cli_fixture populate URL | control URL | run URL "
                    "ID=STATUS[:EVENTS]... | newer-schema PATH | hostile URL | "
                    "serve URL | views URL\n");
    return 2;
}
