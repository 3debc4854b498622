/* test_cancel.c - activity cancellation end to end (issue 4): every trigger
 * (select loser, retry attempt timeout, instance cancel, failure, completion,
 * continue-as-new), the activity author's API (flag, blocking wait, pollable
 * descriptor, reason, token handed to threads), the grace period and slot
 * replacement, races between completion and cancellation, cascades to
 * children, and the client's cancel semantics. Real runtime, real SQLite
 * file, reached through the fault-injecting wrapper (faults off) so a test
 * can make a cancelling turn wait until the activity it cancels has
 * started: what an activity saw is then always checked on an activity that
 * ran. Waits are deadline-based; no assertion is about time. */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"

/* ------------------------------------------------------------------------
 * what the activities observed */

#define MAX_SEEN 2048

static struct {
    _Atomic int started;        /* activities that began */
    _Atomic int cancel_seen;    /* observed their token */
    _Atomic int returned;       /* returned from the function */
    _Atomic int token_at_start; /* token already set when they began */
    _Atomic int quick_runs;     /* runs of Quick */
    _Atomic int ignore_running; /* Ignore activities still inside */
    _Atomic int release_ignore; /* lets Ignore activities return */
    _Atomic int child_thread_saw;
    _Atomic int fd_saw;
    pthread_mutex_t lock;
    char reasons[MAX_SEEN][32];
    int reason_count;
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A turn that cancels activities commits only once this many activities
 * have started (0: at once); see gate_cancels. */
static _Atomic int gate_started;

static duro_provider *wrappers[4];
static int wrapper_count;

static void reset_seen(void)
{
    atomic_store(&gate_started, 0);
    atomic_store(&seen.started, 0);
    atomic_store(&seen.cancel_seen, 0);
    atomic_store(&seen.returned, 0);
    atomic_store(&seen.token_at_start, 0);
    atomic_store(&seen.quick_runs, 0);
    atomic_store(&seen.ignore_running, 0);
    atomic_store(&seen.release_ignore, 0);
    atomic_store(&seen.child_thread_saw, 0);
    atomic_store(&seen.fd_saw, 0);
    pthread_mutex_lock(&seen.lock);
    seen.reason_count = 0;
    pthread_mutex_unlock(&seen.lock);
}

static void note_reason(duro_activity *a)
{
    const char *r = duro_activity_cancel_reason(a);
    pthread_mutex_lock(&seen.lock);
    if (seen.reason_count < MAX_SEEN)
        snprintf(seen.reasons[seen.reason_count++], 32, "%s", r ? r : "(null)");
    pthread_mutex_unlock(&seen.lock);
}

static int reason_seen(const char *reason)
{
    int n = 0;
    pthread_mutex_lock(&seen.lock);
    for (int i = 0; i < seen.reason_count; i++)
        n += strcmp(seen.reasons[i], reason) == 0;
    pthread_mutex_unlock(&seen.lock);
    return n;
}

/* After a turn cancelled `requested` activities, gated (gate_started) to
 * commit only once they had all started: each saw its token and returned.
 * Once the counter shows the cancellations this runtime has set its tokens,
 * so a graceful shutdown now cannot change their reason; after it nothing
 * is running and every activity must have seen `reason`. */
static void started_ones_saw(rt_fixture *f, uint64_t requested,
                             const char *reason)
{
    duro_metrics m;
    WAIT_UNTIL((duro_runtime_metrics(f->rt, &m),
                m.activities_cancel_requested == requested),
               20000);
    CHECK_OK(duro_runtime_shutdown(f->rt, 20000));
    CHECK_EQ(atomic_load(&seen.started), requested);
    CHECK_EQ(atomic_load(&seen.returned), requested);
    CHECK_EQ(atomic_load(&seen.cancel_seen), requested);
    CHECK_EQ(reason_seen(reason), requested);
}

static void on_start(duro_activity *a)
{
    atomic_fetch_add(&seen.started, 1);
    if (duro_activity_cancelled(a))
        atomic_fetch_add(&seen.token_at_start, 1);
}

/* ------------------------------------------------------------------------
 * activities */

/* Cooperative: waits for its token (up to 30 s), then fails. */
static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    on_start(a);
    int cancelled = duro_activity_wait_cancelled(a, 30000);
    if (cancelled) {
        note_reason(a);
        atomic_fetch_add(&seen.cancel_seen, 1);
    }
    atomic_fetch_add(&seen.returned, 1);
    return cancelled ? duro_fail(out, "stopped on cancellation")
                     : duro_ok(out, "block finished");
}

/* Cooperative but returns SUCCESS after cancellation: must be dropped. */
static int act_succeed_late(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    on_start(a);
    if (duro_activity_wait_cancelled(a, 30000)) {
        atomic_fetch_add(&seen.cancel_seen, 1);
        note_reason(a);
    }
    atomic_fetch_add(&seen.returned, 1);
    return duro_ok(out, "late success");
}

/* Non-cooperative: ignores its token until the test releases it. */
static int act_ignore(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    on_start(a);
    atomic_fetch_add(&seen.ignore_running, 1);
    while (!atomic_load(&seen.release_ignore))
        usleep(1000);
    if (duro_activity_cancelled(a))
        atomic_fetch_add(&seen.cancel_seen, 1);
    atomic_fetch_sub(&seen.ignore_running, 1);
    atomic_fetch_add(&seen.returned, 1);
    return duro_ok(out, "ignored");
}

static int act_quick(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&seen.quick_runs, 1);
    return duro_ok(out, in ? in : "quick");
}

/* Waits in poll() on the cancellation descriptor. */
static int act_poll(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    on_start(a);
    int fd = duro_activity_cancel_fd(a);
    if (fd < 0)
        return duro_fail(out, "no cancel fd");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 30000);
    if (n == 1 && (p.revents & POLLIN)) {
        atomic_fetch_add(&seen.fd_saw, 1);
        atomic_fetch_add(&seen.cancel_seen, 1);
        note_reason(a);
    }
    atomic_fetch_add(&seen.returned, 1);
    return duro_fail(out, "poll ended");
}

static void *child_thread(void *arg)
{
    duro_cancel_token *t = arg;
    if (duro_cancel_token_wait(t, 30000))
        atomic_fetch_add(&seen.child_thread_saw, 1);
    duro_cancel_token_release(t);
    return NULL;
}

/* Hands its token to two threads it starts, and joins them. */
static int act_spawner(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    on_start(a);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, child_thread,
                       duro_activity_cancel_token(a));
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    if (duro_activity_cancelled(a))
        atomic_fetch_add(&seen.cancel_seen, 1);
    atomic_fetch_add(&seen.returned, 1);
    return duro_fail(out, "children stopped");
}

/* ------------------------------------------------------------------------
 * orchestrations */

/* input: activity name; awaits it. */
static int orch_one(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "x");
    duro_await(o, t);
    return duro_ok(out, duro_task_failed(t) ? duro_task_error(t)
                                            : duro_task_output(t));
}

/* activity vs 200 ms timer */
static int orch_select(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "x");
    duro_task *timer = duro_timer(o, 200);
    duro_task *w = duro_select(o, t, timer);
    return duro_ok(out, w == timer ? "timer won" : "activity won");
}

/* activity vs a 30-day timer: the activity wins, the timer is the loser */
static int orch_select_long_timer(duro_orch *o, const char *in,
                                  duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "x");
    duro_task *timer = duro_timer(o, 30LL * 24 * 3600 * 1000);
    duro_task *w = duro_select(o, t, timer);
    return duro_ok(out, w == t ? "activity won" : "timer won");
}

/* retry: attempt 1 blocks until cancelled by its 200 ms timeout; attempt 2
 * is Quick (chosen through the attempt number in the activity). */
static int act_first_blocks(duro_activity *a, const char *in, duro_result *out)
{
    if (duro_activity_attempt(a) == 1)
        return act_block(a, in, out);
    atomic_fetch_add(&seen.quick_runs, 1);
    return duro_ok(out, "attempt 2 ok");
}

static int orch_retry_timeout(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 3;
    p.initial_delay_ms = 10;
    p.attempt_timeout_ms = 200;
    duro_task *t = duro_call_activity_with_retry(o, "FirstBlocks", "x", &p);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail_with(out, duro_task_category(t), duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* input: "N name": fan-out of N activities named `name`, joined. */
static int orch_fanout(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    const char *name = strchr(in, ' ') + 1;
    duro_task *t[256];
    for (int i = 0; i < n; i++)
        t[i] = duro_call_activity(o, name, duro_sprintf(o, "%d", i));
    duro_join_n(o, t, (size_t)n);
    return duro_ok(out, "all done");
}

/* schedules a Block, then fails without waiting for it */
static int orch_fail_early(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_call_activity(o, "Block", "x");
    duro_await(o, duro_timer(o, 100));
    return duro_fail(out, "gave up");
}

/* schedules a Block, then completes without waiting for it */
static int orch_complete_early(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_call_activity(o, "Block", "x");
    duro_await(o, duro_timer(o, 100));
    return duro_ok(out, "done early");
}

/* execution 1 schedules a Block and continues as new after 100 ms;
 * execution 2 completes at once */
static int orch_can(duro_orch *o, const char *in, duro_result *out)
{
    if (in != NULL && strcmp(in, "second") == 0)
        return duro_ok(out, "second execution");
    duro_call_activity(o, "Block", "x");
    duro_await(o, duro_timer(o, 100));
    return duro_continue_as_new(o, out, "second");
}

/* parent -> child -> grandchild, each waiting on a Block */
static int orch_tree(duro_orch *o, const char *in, duro_result *out)
{
    int depth = atoi(in);
    duro_task *b = duro_call_activity(o, "Block", "x");
    if (depth > 0) {
        duro_task *c = duro_call_sub_orchestration(
            o, "Tree", NULL, NULL, duro_sprintf(o, "%d", depth - 1));
        duro_join(o, b, c);
    } else {
        duro_await(o, b);
    }
    return duro_ok(out, "tree done");
}

/* a Block then a Quick in sequence */
static int orch_block_then_quick(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Block", "x");
    duro_await(o, t);
    duro_await(o, duro_call_activity(o, "Quick", "after"));
    return duro_ok(out, "sequence done");
}

static void setup(rt_fixture *f, const char *db)
{
    reset_seen();
    wrapper_count = 0; /* a failed test's: leaked with its runtime */
    rt_init(f, db);
    /* A cooperative activity returns as soon as its token fires; a grace
     * period a slow machine could exceed would make that a race. The test
     * of the grace period sets its own. */
    f->opts.cancel_grace_ms = 60000;
    duro_registry *r = f->reg;
    CHECK_OK(duro_registry_add_activity(r, "Block", act_block, NULL));
    CHECK_OK(
        duro_registry_add_activity(r, "SucceedLate", act_succeed_late, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Ignore", act_ignore, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Quick", act_quick, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Poll", act_poll, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Spawner", act_spawner, NULL));
    CHECK_OK(
        duro_registry_add_activity(r, "FirstBlocks", act_first_blocks, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "One", NULL, orch_one, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Select", NULL, orch_select, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "SelectLongTimer", NULL,
                                             orch_select_long_timer, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "RetryTimeout", NULL,
                                             orch_retry_timeout, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Fanout", NULL, orch_fanout, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "FailEarly", NULL,
                                             orch_fail_early, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "CompleteEarly", NULL,
                                             orch_complete_early, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "Can", NULL, orch_can, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "Tree", NULL, orch_tree, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "BlockThenQuick", NULL,
                                             orch_block_then_quick, NULL));
}

/* Holds a turn that cancels activities, before it commits, until
 * gate_started activities have started: the rows are still there, so the
 * activities get fetched and started first. */
static void gate_cancels(void *arg, const faulty_call *call)
{
    (void)arg;
    int want = atomic_load(&gate_started);
    if (call->after || want <= 0 || call->ack == NULL ||
        call->ack->cancelled_activity_count == 0)
        return;
    int64_t end = test_now_ms() + 20000;
    while (atomic_load(&seen.started) < want && test_now_ms() < end)
        usleep(1000);
}

/* rt_start on the wrapper, with the gate installed. */
static void start(rt_fixture *f)
{
    duro_provider *inner = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f->url, &inner, &err), DURO_OK, &err);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK(w != NULL && wrapper_count < 4);
    wrappers[wrapper_count++] = w;
    faulty_provider_set_hook(w, FAULTY_ACK_ORCHESTRATION_ITEM, gate_cancels,
                             NULL);
    CHECK_OK(duro_runtime_create_with_provider(w, f->reg, &f->opts, &f->rt));
    CHECK_OK(duro_runtime_start(f->rt));
    if (f->client == NULL)
        CHECK_OK(duro_client_create(f->url, &f->client));
}

/* Closes the wrappers once no runtime uses them. */
static void close_wrappers(void)
{
    for (int i = 0; i < wrapper_count; i++)
        duro_provider_close(wrappers[i]);
    wrapper_count = 0;
}

static void finish(rt_fixture *f)
{
    rt_done(f);
    close_wrappers();
}

static void metrics(rt_fixture *f, duro_metrics *m)
{
    duro_runtime_metrics(f->rt, m);
}

/* Orchestrator-queue messages still waiting for `id`, read straight from
 * the store. */
static uint64_t queued_for(rt_fixture *f, const char *id)
{
    duro_provider *p;
    duro_error err;
    uint64_t n = 999;
    if (duro_provider_open(f->url, &p, &err) != DURO_OK)
        return n;
    p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, id, &n, &err);
    duro_provider_close(p);
    return n;
}

static uint64_t worker_rows(rt_fixture *f)
{
    duro_provider *p;
    duro_error err;
    uint64_t n = 999;
    if (duro_provider_open(f->url, &p, &err) != DURO_OK)
        return n;
    p->count_messages(p, DURO_QUEUE_WORKER, NULL, &n, &err);
    duro_provider_close(p);
    return n;
}

static int count_kind_named(duro_history *h, int kind, const char *reason)
{
    int n = 0;
    for (size_t i = 0; i < h->count; i++)
        if ((int)h->events[i].kind == kind &&
            (reason == NULL ||
             (h->events[i].reason && strcmp(h->events[i].reason, reason) == 0)))
            n++;
    return n;
}

/* ------------------------------------------------------------------------
 * triggers (lock-stealing design, runtime integration tests) */

TEST(select_timeout_cancels_losing_activity)
{
    rt_fixture f;
    setup(&f, "c_select.db");
    atomic_store(&gate_started, 1);
    start(&f);
    rt_start_instance(&f, "s", "Select", "Block");
    duro_instance_info *i = rt_wait(&f, "s", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "timer won"); /* not blocked by the activity */
    duro_free(i);
    started_ones_saw(&f, 1, DURO_REASON_SELECT_LOSER);
    WAIT_UNTIL(worker_rows(&f) == 0, 20000);
    duro_history *h = rt_history(&f, "s");
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                              DURO_REASON_SELECT_LOSER),
             1);
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_COMPLETED, NULL), 0);
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_FAILED, NULL), 0);
    duro_history_free(h);
    finish(&f);
}

TEST(retry_attempt_timeout_cancels_timed_out_attempt)
{
    rt_fixture f;
    setup(&f, "c_retry.db");
    atomic_store(&gate_started, 1);
    start(&f);
    rt_start_instance(&f, "r", "RetryTimeout", NULL);
    duro_instance_info *i = rt_wait(&f, "r", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "attempt 2 ok");
    duro_free(i);
    CHECK_EQ(rt_count_events(&f, "r", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 1);
    started_ones_saw(&f, 1, DURO_REASON_SELECT_LOSER);
    CHECK_EQ(atomic_load(&seen.quick_runs), 1);
    finish(&f);
}

TEST(cancel_instance_cancels_outstanding_activity)
{
    rt_fixture f;
    setup(&f, "c_instance.db");
    start(&f);
    rt_start_instance(&f, "c", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "c", "no longer needed", "alice"));
    duro_instance_info *i = rt_wait(&f, "c", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "no longer needed");
    CHECK_EQ(i->category, DURO_CATEGORY_CANCELLED);
    duro_free(i);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    CHECK_EQ(atomic_load(&seen.token_at_start), 0);
    duro_history *h = rt_history(&f, "c");
    const duro_event *req = NULL;
    for (size_t k = 0; k < h->count; k++)
        if (h->events[k].kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED)
            req = &h->events[k];
    CHECK(req != NULL);
    if (req != NULL) {
        CHECK_STR(req->reason, "no longer needed");
        CHECK_STR(req->requested_by, "alice");
    }
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    duro_history_free(h);
    finish(&f);
}

TEST(failure_cancels_outstanding_activity)
{
    rt_fixture f;
    setup(&f, "c_fail.db");
    atomic_store(&gate_started, 1);
    start(&f);
    rt_start_instance(&f, "x", "FailEarly", NULL);
    duro_instance_info *i = rt_wait(&f, "x", 20000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->error, "gave up");
    duro_free(i);
    CHECK_EQ(rt_count_events(&f, "x", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 1);
    started_ones_saw(&f, 1, DURO_REASON_INSTANCE_FAILED);
    CHECK_EQ(reason_seen(DURO_REASON_SELECT_LOSER), 0);
    WAIT_UNTIL(worker_rows(&f) == 0, 20000);
    finish(&f);
}

TEST(completion_cancels_outstanding_activity)
{
    rt_fixture f;
    setup(&f, "c_complete.db");
    atomic_store(&gate_started, 1);
    start(&f);
    rt_start_instance(&f, "x", "CompleteEarly", NULL);
    duro_instance_info *i = rt_wait(&f, "x", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    CHECK_EQ(rt_count_events(&f, "x", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 1);
    started_ones_saw(&f, 1, DURO_REASON_INSTANCE_COMPLETED);
    WAIT_UNTIL(worker_rows(&f) == 0, 20000);
    finish(&f);
}

TEST(continue_as_new_cancels_previous_execution_activity)
{
    rt_fixture f;
    setup(&f, "c_can.db");
    atomic_store(&gate_started, 1);
    start(&f);
    rt_start_instance(&f, "x", "Can", NULL);
    duro_instance_info *i = rt_wait(&f, "x", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "second execution");
    CHECK_EQ(i->execution_id, 2);
    duro_free(i);
    started_ones_saw(&f, 1, DURO_REASON_CONTINUED_AS_NEW);
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(f.client, "x", 1, &h));
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                              DURO_REASON_CONTINUED_AS_NEW),
             1);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_CONTINUED_AS_NEW);
    duro_history_free(h);
    /* nothing from execution 1 reached execution 2 */
    h = rt_history(&f, "x");
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_COMPLETED, NULL), 0);
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_FAILED, NULL), 0);
    duro_history_free(h);
    finish(&f);
}

TEST(mass_cancellation_of_fanout_in_one_ack)
{
    rt_fixture f;
    setup(&f, "c_mass.db");
    f.opts.worker_concurrency = 64;
    start(&f);
    rt_start_instance(&f, "m", "Fanout", "60 Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 60, 30000);
    CHECK_OK(duro_client_cancel(f.client, "m", "stop all", NULL));
    duro_instance_info *i = rt_wait(&f, "m", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    WAIT_UNTIL(atomic_load(&seen.returned) == 60, 30000);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 60);
    duro_history *h = rt_history(&f, "m");
    /* all 60 cancel requests were written by one turn: same timestamp,
     * contiguous, right before the terminal event */
    int cancels = 0;
    int64_t ts = -1;
    int same = 1;
    for (size_t k = 0; k < h->count; k++) {
        if (h->events[k].kind != DURO_EVENT_ACTIVITY_CANCEL_REQUESTED)
            continue;
        cancels++;
        if (ts < 0)
            ts = h->events[k].timestamp_ms;
        same &= h->events[k].timestamp_ms == ts;
    }
    CHECK_EQ(cancels, 60);
    CHECK(same);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    CHECK_EQ(h->events[h->count - 62].kind,
             DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED);
    duro_history_free(h);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 60);
    CHECK_EQ(queued_for(&f, "m"), 0);
    CHECK_EQ(worker_rows(&f), 0);
    /* no completion was enqueued after the cancellation; the counters are
     * read once final (the turn counts its cancel requests after it fired
     * the tokens, so an activity can return before they move) */
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.activities_cancelled, 60);
    CHECK_EQ(m.activities_completed + m.activities_failed, 0);
    CHECK_EQ(m.activities_cancel_requested, 60);
    finish(&f);
}

/* ------------------------------------------------------------------------
 * the activity author's side, grace period, edge cases */

TEST(token_not_set_at_start_and_reason_is_known)
{
    rt_fixture f;
    setup(&f, "c_start.db");
    start(&f);
    rt_start_instance(&f, "a", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.token_at_start), 0);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 0);
    CHECK_OK(duro_client_cancel(f.client, "a", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    finish(&f);
}

TEST(pollable_descriptor_becomes_readable)
{
    rt_fixture f;
    setup(&f, "c_fd.db");
    start(&f);
    rt_start_instance(&f, "p", "One", "Poll");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "p", "fd test", NULL));
    WAIT_UNTIL(atomic_load(&seen.fd_saw) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    finish(&f);
}

TEST(child_threads_see_the_token)
{
    rt_fixture f;
    setup(&f, "c_threads.db");
    start(&f);
    rt_start_instance(&f, "t", "One", "Spawner");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "t", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.child_thread_saw) == 2, 20000);
    WAIT_UNTIL(atomic_load(&seen.returned) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 1);
    finish(&f);
}

TEST(activity_exits_within_grace_period)
{
    rt_fixture f;
    setup(&f, "c_grace_ok.db");
    start(&f);
    rt_start_instance(&f, "g", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "g", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.returned) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 1);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.activities_cancelled, 1);
    CHECK_EQ(m.activities_abandoned, 0);
    finish(&f);
}

/* A worker-concurrency-1 runtime whose only slot is held by a cancelled
 * activity that ignores its token runs the next activity within grace + 1 s:
 * the slot is freed, the thread abandoned, its late result discarded. */
TEST(ignored_cancellation_frees_the_slot_after_grace)
{
    rt_fixture f;
    setup(&f, "c_grace_slot.db");
    f.opts.worker_concurrency = 1;
    f.opts.cancel_grace_ms = 500;
    start(&f);
    rt_start_instance(&f, "stuck", "One", "Ignore");
    WAIT_UNTIL(atomic_load(&seen.ignore_running) == 1, 20000);
    rt_start_instance(&f, "next", "One", "Quick");
    CHECK_OK(duro_client_cancel(f.client, "stuck", NULL, NULL));
    rt_wait_status(&f, "stuck", DURO_STATUS_CANCELLED, 20000);
    /* the next activity runs while the stuck one is still inside: its slot
     * was given to a new thread */
    WAIT_UNTIL(atomic_load(&seen.quick_runs) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.ignore_running), 1);
    duro_instance_info *i = rt_wait(&f, "next", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    duro_metrics m;
    metrics(&f, &m);
    CHECK_EQ(m.activities_abandoned, 1);
    /* let the abandoned thread finish; its result is discarded */
    atomic_store(&seen.release_ignore, 1);
    WAIT_UNTIL(atomic_load(&seen.ignore_running) == 0, 20000);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 1); /* it was told */
    CHECK_EQ(rt_count_events(&f, "stuck", DURO_EVENT_ACTIVITY_COMPLETED), 0);
    CHECK_EQ(queued_for(&f, "stuck"), 0);
    finish(&f);
}

TEST(result_after_cancellation_is_always_dropped)
{
    rt_fixture f;
    setup(&f, "c_drop.db");
    start(&f);
    rt_start_instance(&f, "ok", "One", "SucceedLate");
    rt_start_instance(&f, "bad", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 2, 20000);
    CHECK_OK(duro_client_cancel(f.client, "ok", NULL, NULL));
    CHECK_OK(duro_client_cancel(f.client, "bad", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.returned) == 2, 20000);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 2);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 2);
    duro_metrics m;
    WAIT_UNTIL((metrics(&f, &m), m.activities_cancelled == 2), 20000);
    CHECK_EQ(m.activities_completed + m.activities_failed, 0);
    CHECK_EQ(queued_for(&f, "ok"), 0);
    CHECK_EQ(queued_for(&f, "bad"), 0);
    CHECK_EQ(rt_count_events(&f, "ok", DURO_EVENT_ACTIVITY_COMPLETED), 0);
    CHECK_EQ(rt_count_events(&f, "bad", DURO_EVENT_ACTIVITY_FAILED), 0);
    finish(&f);
}

TEST(activity_completed_before_cancel_is_processed_normally)
{
    rt_fixture f;
    setup(&f, "c_before.db");
    start(&f);
    rt_start_instance(&f, "q", "One", "Quick");
    duro_instance_info *i = rt_wait(&f, "q", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    duro_history *before = rt_history(&f, "q");
    /* cancel after completion changes nothing */
    CHECK_RC(duro_client_cancel(f.client, "q", "too late", NULL),
             DURO_INVALID_STATE);
    duro_history *after = rt_history(&f, "q");
    CHECK_EQ(after->count, before->count);
    CHECK_EQ(rt_status(&f, "q"), DURO_STATUS_COMPLETED);
    CHECK_EQ(rt_count_events(&f, "q", DURO_EVENT_ACTIVITY_COMPLETED), 1);
    CHECK_EQ(rt_count_events(&f, "q", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 0);
    duro_history_free(before);
    duro_history_free(after);
    finish(&f);
}

TEST(three_parallel_activities_all_cancelled)
{
    rt_fixture f;
    setup(&f, "c_three.db");
    start(&f);
    rt_start_instance(&f, "p3", "Fanout", "3 Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 3, 20000);
    CHECK_OK(duro_client_cancel(f.client, "p3", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 3, 20000);
    CHECK_EQ(atomic_load(&seen.started), 3);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 3);
    finish(&f);
}

TEST(cancel_before_start_runs_nothing)
{
    rt_fixture f;
    setup(&f, "c_prestart.db");
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "early", "One", "Quick");
    CHECK_EQ(rt_status(&f, "early"), DURO_STATUS_PENDING);
    CHECK_OK(duro_client_cancel(f.client, "early", "changed my mind", NULL));
    start(&f);
    duro_instance_info *i = rt_wait(&f, "early", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "changed my mind");
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.quick_runs), 0);
    CHECK_EQ(worker_rows(&f), 0);
    finish(&f);
}

TEST(pending_activity_whose_row_was_deleted_never_starts)
{
    rt_fixture f;
    setup(&f, "c_pending.db");
    f.opts.worker_concurrency = 1;
    start(&f);
    /* the only slot is busy with a Block of another instance */
    rt_start_instance(&f, "busy", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    rt_start_instance(&f, "queued", "Fanout", "5 Quick");
    WAIT_UNTIL(rt_count_events(&f, "queued", DURO_EVENT_ACTIVITY_SCHEDULED) ==
                   5,
               20000);
    CHECK_OK(duro_client_cancel(f.client, "queued", NULL, NULL));
    rt_wait_status(&f, "queued", DURO_STATUS_CANCELLED, 20000);
    CHECK_OK(duro_client_cancel(f.client, "busy", NULL, NULL));
    rt_wait_status(&f, "busy", DURO_STATUS_CANCELLED, 20000);
    WAIT_UNTIL(worker_rows(&f) == 0, 20000);
    CHECK_EQ(atomic_load(&seen.quick_runs), 0);
    finish(&f);
}

TEST(cancel_twice_keeps_the_first_reason)
{
    rt_fixture f;
    setup(&f, "c_twice.db");
    start(&f);
    rt_start_instance(&f, "t", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "t", "first", "a"));
    CHECK_OK(duro_client_cancel(f.client, "t", "second", "b"));
    duro_instance_info *i = rt_wait(&f, "t", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "first");
    duro_free(i);
    CHECK_OK(duro_client_cancel(f.client, "t", "third", "c"));
    i = rt_wait(&f, "t", 20000);
    CHECK_STR(i->error, "first");
    duro_free(i);
    CHECK_EQ(
        rt_count_events(&f, "t", DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED), 1);
    finish(&f);
}

TEST(cancel_unknown_instance_is_not_found)
{
    rt_fixture f;
    setup(&f, "c_unknown.db");
    start(&f);
    CHECK_RC(duro_client_cancel(f.client, "nobody", NULL, NULL),
             DURO_NOT_FOUND);
    CHECK(strstr(duro_errmsg(), "nobody") != NULL);
    CHECK_RC(duro_client_cancel(f.client, "", NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_cancel(f.client, NULL, NULL, NULL), DURO_INVALID);
    CHECK_EQ(rt_status(&f, "nobody"), DURO_STATUS_NOT_FOUND);
    finish(&f);
}

TEST(parent_cancel_cascades_to_children)
{
    rt_fixture f;
    setup(&f, "c_tree.db");
    start(&f);
    rt_start_instance(&f, "root", "Tree", "2");
    /* root, child and grandchild each run a Block */
    WAIT_UNTIL(atomic_load(&seen.started) == 3, 20000);
    CHECK_OK(duro_client_cancel(f.client, "root", "tree down", NULL));
    rt_wait_status(&f, "root", DURO_STATUS_CANCELLED, 20000);
    rt_wait_status(&f, "root:1:3", DURO_STATUS_CANCELLED, 20000);
    rt_wait_status(&f, "root:1:3:1:3", DURO_STATUS_CANCELLED, 20000);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 3, 20000);
    CHECK_EQ(atomic_load(&seen.started), 3);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 3);
    CHECK_EQ(rt_count_events(&f, "root",
                             DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED),
             1);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "root:1:3", &i));
    CHECK_STR(i->error, DURO_REASON_INSTANCE_CANCELLED);
    duro_free(i);
    finish(&f);
}

/* Same process: the token fires right after the cancelling turn commits,
 * not at a renewal: the first renewal is due 5 minutes after the fetch,
 * past every deadline here, so only the turn can have fired it. */
TEST(local_cancel_does_not_wait_for_renewal)
{
    rt_fixture f;
    setup(&f, "c_local.db");
    f.opts.worker_lock_timeout_ms = 600000;
    f.opts.lock_renewal_ms = 300000;
    start(&f);
    rt_start_instance(&f, "l", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "l", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 20000);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.lock_renewal_failures, 0);
    finish(&f);
}

/* A client and a runtime in one process open separate providers on the
 * same file; the client's enqueues still wake the runtime at once. With a
 * 60 s poll interval, anything but in-process wake-up would blow the
 * deadlines below. */
TEST(client_enqueues_wake_the_runtime_in_the_same_process)
{
    rt_fixture f;
    setup(&f, "c_wake.db");
    f.opts.poll_interval_ms = 60000;
    start(&f);
    rt_start_instance(&f, "w", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "w", NULL, NULL));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 20000);
    rt_wait_status(&f, "w", DURO_STATUS_CANCELLED, 20000);
    finish(&f);
}

/* Two runtimes on one file, each with its own provider (as two processes
 * would be): a runs orchestrations only, b only the Block activity, with
 * the given renewal and poll intervals. Returns when both have started. */
static void setup_cross(rt_fixture *a, rt_fixture *b, const char *db,
                        int64_t lock_timeout_ms, int64_t renewal_ms,
                        int64_t poll_ms)
{
    setup(a, db);
    memset(b, 0, sizeof(*b));
    b->url = a->url;
    CHECK_OK(duro_registry_create(&b->reg));
    CHECK_OK(duro_registry_add_activity(b->reg, "Block", act_block, NULL));
    rt_default_options(&b->opts);
    if (lock_timeout_ms > 0)
        b->opts.worker_lock_timeout_ms = lock_timeout_ms;
    b->opts.lock_renewal_ms = renewal_ms;
    b->opts.poll_interval_ms = poll_ms;
    b->opts.orchestration_concurrency = 0; /* activities only */
    duro_registry_destroy(a->reg);
    CHECK_OK(duro_registry_create(&a->reg));
    CHECK_OK(
        duro_registry_add_orchestration(a->reg, "One", NULL, orch_one, NULL));
    a->opts.worker_concurrency = 0; /* orchestrations only */
    start(a);
    start(b);
}

/* b's activity is cancelled by a's turn; returns b's lock renewal failures
 * after checking the reason it saw was the decided one. */
static uint64_t cancel_across(rt_fixture *a, rt_fixture *b)
{
    rt_start_instance(a, "x", "One", "Block");
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 30000);
    CHECK_OK(duro_client_cancel(a->client, "x", "stop it", "user:test"));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, 30000);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    CHECK_EQ(reason_seen("lock_lost"), 0);
    rt_wait_status(a, "x", DURO_STATUS_CANCELLED, 30000);
    duro_metrics m;
    rt_final_metrics(b, &m);
    rt_done(b);
    rt_done(a);
    close_wrappers();
    return m.lock_renewal_failures;
}

/* Another runtime on the same file (and its own provider) runs the
 * activity: it learns of the cancellation when its renewal finds the row
 * gone, and reads the reason the cancelling turn recorded. It polls no more
 * often than it renews, so no check of the rows runs between renewals: the
 * renewal is what tells (the fallback). */
TEST(cross_runtime_cancel_through_renewal)
{
    rt_fixture a, b;
    setup_cross(&a, &b, "c_cross.db", 0, 100, 100);
    CHECK_EQ(cancel_across(&a, &b), 1);
}

/* The same, with renewals far apart: the runtime running the activity
 * learns of the cancellation from its check of the in-flight rows at the
 * poll interval (a read), long before a renewal would tell it - the test's
 * deadline is shorter than one renewal interval, and no renewal fails. */
TEST(cross_runtime_cancel_noticed_by_the_poll_check)
{
    rt_fixture a, b;
    setup_cross(&a, &b, "c_cross_check.db", 120000, 60000, 50);
    CHECK_EQ(cancel_across(&a, &b), 0); /* no renewal told it */
}

/* Completion and cancellation race: whichever commits first wins; history
 * never holds both a completion and a cancel request for one activity.
 * Many instances are cancelled while their activities run and complete, in
 * whatever interleaving the machine gives; the two orderings of one
 * activity's completion and cancellation are forced in the two tests that
 * follow, so both are run whatever the machine does. */
static int act_jitter(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    usleep((useconds_t)(atoi(in) % 7) * 1000);
    return duro_ok(out, in);
}

TEST(completion_versus_cancellation_race_stays_consistent)
{
    rt_fixture f;
    setup(&f, "c_race.db");
    CHECK_OK(duro_registry_add_activity(f.reg, "Jitter", act_jitter, NULL));
    f.opts.worker_concurrency = 8;
    start(&f);
    enum { N = 40 };
    char id[32];
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "race-%d", k);
        rt_start_instance(&f, id, "Fanout", "4 Jitter");
    }
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "race-%d", k);
        usleep((useconds_t)(k % 5) * 1000);
        int rc = duro_client_cancel(f.client, id, "race", NULL);
        CHECK_MSG(rc == DURO_OK || rc == DURO_INVALID_STATE, "cancel: %s",
                  duro_errname(rc));
    }
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "race-%d", k);
        duro_instance_info *i = rt_wait(&f, id, 30000);
        CHECK(i->status == DURO_STATUS_CANCELLED ||
              i->status == DURO_STATUS_COMPLETED);
        duro_free(i);
        duro_history *h = rt_history(&f, id);
        /* per activity: exactly one of completed / cancel requested */
        for (size_t e = 0; e < h->count; e++) {
            if (h->events[e].kind != DURO_EVENT_ACTIVITY_SCHEDULED)
                continue;
            uint64_t src = h->events[e].event_id;
            int done = 0, cancel = 0;
            for (size_t g = 0; g < h->count; g++) {
                if (h->events[g].source_event_id != src)
                    continue;
                done += h->events[g].kind == DURO_EVENT_ACTIVITY_COMPLETED;
                cancel +=
                    h->events[g].kind == DURO_EVENT_ACTIVITY_CANCEL_REQUESTED;
            }
            CHECK_MSG(done + cancel == 1,
                      "%s activity %llu: %d completions, %d cancels", id,
                      (unsigned long long)src, done, cancel);
        }
        /* event ids dense: no duplicate history */
        for (size_t e = 0; e < h->count; e++)
            CHECK_EQ(h->events[e].event_id, e + 1);
        duro_history_free(h);
    }
    WAIT_UNTIL(worker_rows(&f) == 0, 20000);
    finish(&f);
}

/* One activity, its completion and its cancellation, in a chosen order
 * (hooks on the wrapper; `order` says which side is held until the other
 * has committed). */
static struct {
    _Atomic int order;        /* ORDER_*; 0: off */
    _Atomic int acked;        /* 1: the completion's ack returned */
    _Atomic int ack_rc;       /* what it returned */
    _Atomic int committed;    /* 1: the cancelling turn committed */
    _Atomic int held_other;   /* the held side saw the other commit first */
    _Atomic int release_gate; /* lets Gate return */
    _Atomic int ack_waiting;  /* its result is in, its ack held */
    _Atomic int gate_started;
} order;

enum { ORDER_CANCEL_FIRST = 1, ORDER_COMPLETION_FIRST = 2 };

/* Returns when released, ignoring its token: its result races the turn. */
static int act_gate(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_store(&order.gate_started, 1);
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&order.release_gate) && test_now_ms() < end)
        usleep(1000);
    return duro_ok(out, "gate done");
}

#define ORDER_WAIT(cond)                                                       \
    do {                                                                       \
        int64_t end_ = test_now_ms() + 20000;                                  \
        while (!(cond) && test_now_ms() < end_)                                \
            usleep(1000);                                                      \
    } while (0)

static void order_on_ack_work(void *arg, const faulty_call *call)
{
    (void)arg;
    int mode = atomic_load(&order.order);
    if (mode == 0 || call->completion == NULL)
        return;
    if (!call->after) {
        if (mode == ORDER_CANCEL_FIRST) {
            /* The result is in; hold its ack until the turn that cancels
             * the activity has committed (deleting the row). */
            atomic_store(&order.ack_waiting, 1);
            ORDER_WAIT(atomic_load(&order.committed));
            atomic_store(&order.held_other, atomic_load(&order.committed));
        }
        return;
    }
    atomic_store(&order.ack_rc, call->rc);
    atomic_store(&order.acked, 1);
}

static void order_on_ack_orch(void *arg, const faulty_call *call)
{
    gate_cancels(arg, call);
    int mode = atomic_load(&order.order);
    if (mode == 0 || call->ack == NULL ||
        call->ack->cancelled_activity_count == 0)
        return;
    if (!call->after) {
        if (mode == ORDER_COMPLETION_FIRST) {
            /* The turn has decided to cancel the running activity; before
             * it commits, let the activity return and its ack commit. */
            atomic_store(&order.release_gate, 1);
            ORDER_WAIT(atomic_load(&order.acked));
            atomic_store(&order.held_other, atomic_load(&order.acked));
        }
        return;
    }
    if (call->rc == DURO_OK)
        atomic_store(&order.committed, 1);
}

static void run_order(int mode, const char *db)
{
    rt_fixture f;
    setup(&f, db);
    memset(&order, 0, sizeof(order));
    CHECK_OK(duro_registry_add_activity(f.reg, "Gate", act_gate, NULL));
    start(&f);
    duro_provider *w = wrappers[wrapper_count - 1];
    faulty_provider_set_hook(w, FAULTY_ACK_ORCHESTRATION_ITEM,
                             order_on_ack_orch, NULL);
    faulty_provider_set_hook(w, FAULTY_ACK_WORK_ITEM, order_on_ack_work, NULL);
    atomic_store(&order.order, mode);
    rt_start_instance(&f, "o", "One", "Gate");
    WAIT_UNTIL(atomic_load(&order.gate_started), 20000);
    if (mode == ORDER_CANCEL_FIRST) {
        /* it returns before the cancellation, its ack waits for it */
        atomic_store(&order.release_gate, 1);
        WAIT_UNTIL(atomic_load(&order.ack_waiting), 20000);
    }
    CHECK_OK(duro_client_cancel(f.client, "o", NULL, NULL));
    duro_instance_info *i = rt_wait(&f, "o", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    WAIT_UNTIL(atomic_load(&order.acked), 20000);
    /* the ordering happened */
    CHECK_EQ(atomic_load(&order.held_other), 1);
    duro_history *h = rt_history(&f, "o");
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                              DURO_REASON_INSTANCE_CANCELLED),
             1);
    CHECK_EQ(count_kind_named(h, DURO_EVENT_ACTIVITY_COMPLETED, NULL), 0);
    duro_history_free(h);
    CHECK_EQ(queued_for(&f, "o"), 0);
    CHECK_EQ(worker_rows(&f), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    if (mode == ORDER_CANCEL_FIRST) {
        /* the row was gone: the ack failed and enqueued nothing */
        CHECK_EQ(atomic_load(&order.ack_rc), DURO_LOCK_LOST);
        CHECK_EQ(m.activities_cancelled, 1);
        CHECK_EQ(m.activities_completed, 0);
    } else {
        /* the ack took the row and enqueued the completion; the turn's
         * deletion found nothing, and the completion went with the
         * finished instance's queue */
        CHECK_EQ(atomic_load(&order.ack_rc), DURO_OK);
        CHECK_EQ(m.activities_completed, 1);
        CHECK_EQ(m.activities_cancelled, 0);
    }
    atomic_store(&order.order, 0);
    finish(&f);
}

TEST(cancellation_committed_before_the_completion_drops_it)
{
    run_order(ORDER_CANCEL_FIRST, "c_order_cancel.db");
}

TEST(completion_committed_before_the_cancellation_is_not_recorded)
{
    run_order(ORDER_COMPLETION_FIRST, "c_order_completion.db");
}

/* 100 orchestrations x 5 activities cancelled at once; afterwards new work
 * flows at full speed again. */
TEST(high_concurrency_cancellation_and_recovery)
{
    rt_fixture f;
    setup(&f, "c_load.db");
    f.opts.worker_concurrency = 16;
    start(&f);
    enum { N = 100 };
    char id[32];
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "load-%d", k);
        rt_start_instance(&f, id, "Fanout", "5 Block");
    }
    WAIT_UNTIL(atomic_load(&seen.started) == 16, 30000);
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "load-%d", k);
        CHECK_OK(duro_client_cancel(f.client, id, "load shed", NULL));
    }
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "load-%d", k);
        rt_wait_status(&f, id, DURO_STATUS_CANCELLED, 30000);
    }
    /* Every cancellation recorded in history has been acted on locally (the
     * counter moves after the tokens are set); then every activity that
     * started must return having seen its token. */
    uint64_t recorded = 0;
    for (int k = 0; k < N; k++) {
        snprintf(id, sizeof(id), "load-%d", k);
        recorded += (uint64_t)rt_count_events(
            &f, id, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED);
    }
    CHECK(recorded >= 16);
    duro_metrics m;
    WAIT_UNTIL((metrics(&f, &m), m.activities_cancel_requested == recorded),
               30000);
    WAIT_UNTIL(atomic_load(&seen.returned) == atomic_load(&seen.started) &&
                   atomic_load(&seen.cancel_seen) == atomic_load(&seen.started),
               30000);
    WAIT_UNTIL(worker_rows(&f) == 0, 30000);
    metrics(&f, &m);
    CHECK_EQ(m.activities_completed, 0);
    CHECK_EQ(m.activities_abandoned, 0);
    /* throughput recovers: 50 fresh instances all complete */
    for (int k = 0; k < 50; k++) {
        snprintf(id, sizeof(id), "after-%d", k);
        rt_start_instance(&f, id, "Fanout", "2 Quick");
    }
    for (int k = 0; k < 50; k++) {
        snprintf(id, sizeof(id), "after-%d", k);
        duro_instance_info *i = rt_wait(&f, id, 30000);
        CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
        duro_free(i);
    }
    CHECK_EQ(atomic_load(&seen.quick_runs), 100);
    finish(&f);
}

/* Queues hold only live work: the losing 30-day timer goes with the
 * instance that finished, in the same transaction. */
TEST(finished_instance_leaves_its_losing_timer_nowhere)
{
    rt_fixture f;
    setup(&f, "c_timer_gone.db");
    start(&f);
    rt_start_instance(&f, "t", "SelectLongTimer", "Quick");
    duro_instance_info *i = rt_wait(&f, "t", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "activity won");
    duro_free(i);
    CHECK_EQ(rt_count_events(&f, "t", DURO_EVENT_TIMER_CREATED), 1);
    CHECK_EQ(queued_for(&f, "t"), 0);
    CHECK_EQ(worker_rows(&f), 0);
    finish(&f);
}

/* ...and the START of a delayed-start instance cancelled before it began. */
TEST(cancelled_delayed_start_leaves_nothing_queued)
{
    rt_fixture f;
    setup(&f, "c_delayed_gone.db");
    CHECK_OK(duro_client_create(f.url, &f.client));
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = 30LL * 24 * 3600 * 1000;
    CHECK_OK(duro_client_start(f.client, "later", "One", "Quick", &so));
    CHECK_EQ(queued_for(&f, "later"), 1);
    start(&f);
    CHECK_OK(duro_client_cancel(f.client, "later", "not needed", NULL));
    duro_instance_info *i = rt_wait(&f, "later", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    CHECK_EQ(queued_for(&f, "later"), 0);
    CHECK_EQ(atomic_load(&seen.quick_runs), 0);
    finish(&f);
}

TEST(sequence_after_cancel_has_no_leftover_work)
{
    rt_fixture f;
    setup(&f, "c_seq.db");
    start(&f);
    rt_start_instance(&f, "s", "BlockThenQuick", NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, 20000);
    CHECK_OK(duro_client_cancel(f.client, "s", NULL, NULL));
    rt_wait_status(&f, "s", DURO_STATUS_CANCELLED, 20000);
    WAIT_UNTIL(atomic_load(&seen.returned) == 1, 20000);
    CHECK_EQ(atomic_load(&seen.quick_runs), 0);
    CHECK_EQ(queued_for(&f, "s"), 0);
    finish(&f);
}

TEST_MAIN(T(select_timeout_cancels_losing_activity),
          T(retry_attempt_timeout_cancels_timed_out_attempt),
          T(cancel_instance_cancels_outstanding_activity),
          T(failure_cancels_outstanding_activity),
          T(completion_cancels_outstanding_activity),
          T(continue_as_new_cancels_previous_execution_activity),
          T(mass_cancellation_of_fanout_in_one_ack),
          T(token_not_set_at_start_and_reason_is_known),
          T(pollable_descriptor_becomes_readable),
          T(child_threads_see_the_token), T(activity_exits_within_grace_period),
          T(ignored_cancellation_frees_the_slot_after_grace),
          T(result_after_cancellation_is_always_dropped),
          T(activity_completed_before_cancel_is_processed_normally),
          T(three_parallel_activities_all_cancelled),
          T(cancel_before_start_runs_nothing),
          T(pending_activity_whose_row_was_deleted_never_starts),
          T(cancel_twice_keeps_the_first_reason),
          T(cancel_unknown_instance_is_not_found),
          T(parent_cancel_cascades_to_children),
          T(local_cancel_does_not_wait_for_renewal),
          T(client_enqueues_wake_the_runtime_in_the_same_process),
          T(cross_runtime_cancel_through_renewal),
          T(cross_runtime_cancel_noticed_by_the_poll_check),
          T(completion_versus_cancellation_race_stays_consistent),
          T(cancellation_committed_before_the_completion_drops_it),
          T(completion_committed_before_the_cancellation_is_not_recorded),
          T(high_concurrency_cancellation_and_recovery),
          T(finished_instance_leaves_its_losing_timer_nowhere),
          T(cancelled_delayed_start_leaves_nothing_queued),
          T(sequence_after_cancel_has_no_leftover_work))
