/* test_lifecycle.c - the operator's verbs end to end: a cancel that the
 * orchestration observes and cleans up after (compensations, the cleanup
 * deadline), terminate (at once, without code, children terminated), and
 * suspend / resume (messages kept in order, nothing lost, cancel and
 * terminate of a suspended instance, a restart while suspended). Real
 * runtime on a real store: a SQLite file, or - built with LIFECYCLE_PG - a
 * fresh schema on the PostgreSQL server of the tests. Waits are
 * deadline-based; nothing is asserted about time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef LIFECYCLE_PG
#define RT_STORE_PG
#endif
#include "rt_store.h"

#define WAIT_MS 30000

/* ------------------------------------------------------------------------
 * what the activities saw */

static struct {
    _Atomic int block_started;
    _Atomic int block_cancelled;
    _Atomic int release_runs;
    _Atomic int gate_started;
    _Atomic int gate_open;
    _Atomic int cleanup_code_ran;
    pthread_mutex_t lock;
    char reasons[64][40];
    int reason_count;
    char release_input[128];
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void reset_seen(void)
{
    atomic_store(&seen.block_started, 0);
    atomic_store(&seen.block_cancelled, 0);
    atomic_store(&seen.release_runs, 0);
    atomic_store(&seen.gate_started, 0);
    atomic_store(&seen.gate_open, 0);
    atomic_store(&seen.cleanup_code_ran, 0);
    pthread_mutex_lock(&seen.lock);
    seen.reason_count = 0;
    seen.release_input[0] = '\0';
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

/* Waits for its token (up to 30 s) and notes why it fired. */
static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&seen.block_started, 1);
    if (!duro_activity_wait_cancelled(a, WAIT_MS))
        return duro_ok(out, "not cancelled");
    const char *r = duro_activity_cancel_reason(a);
    pthread_mutex_lock(&seen.lock);
    if (seen.reason_count < 64)
        snprintf(seen.reasons[seen.reason_count++], 40, "%s", r ? r : "(null)");
    pthread_mutex_unlock(&seen.lock);
    atomic_fetch_add(&seen.block_cancelled, 1);
    return duro_fail(out, "cancelled");
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* The compensation: notes its input. */
static int act_release(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    pthread_mutex_lock(&seen.lock);
    snprintf(seen.release_input, sizeof(seen.release_input), "%s",
             in ? in : "(null)");
    pthread_mutex_unlock(&seen.lock);
    atomic_fetch_add(&seen.release_runs, 1);
    return duro_ok(out, "released");
}

/* Returns once the test opens the gate. */
static int act_gate(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&seen.gate_started, 1);
    int64_t until = test_now_ms() + WAIT_MS;
    while (!atomic_load(&seen.gate_open) && test_now_ms() < until &&
           !duro_activity_cancelled(a))
        test_sleep_ms(1);
    return duro_ok(out, "gate");
}

/* ------------------------------------------------------------------------
 * orchestrations */

/* An order: reserve, then charge; cancelled while charging, it releases
 * the reservation (a compensation that names the cancel's reason), waits a
 * little (a timer in cleanup), and returns. */
static int orch_order(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *reserve = duro_call_activity(o, "Echo", in);
    if (duro_await(o, reserve) != DURO_OK)
        return duro_fail(out, "reserve failed");
    duro_task *charge = duro_call_activity(o, "Block", in);
    if (duro_await(o, charge) == DURO_OK)
        return duro_ok(out, "charged");
    if (!duro_cancel_requested(o))
        return duro_fail(out, "charge failed");
    if (!duro_is_replaying(o))
        atomic_fetch_add(&seen.cleanup_code_ran, 1);
    duro_set_custom_status(o, "compensating");
    const char *why = duro_sprintf(o, "%s by %s", duro_cancel_reason(o),
                                   duro_cancel_requester(o));
    duro_task *release = duro_call_activity(o, "Release", why);
    if (duro_await(o, release) != DURO_OK)
        return duro_fail(out, "release failed");
    duro_await(o, duro_timer(o, 10));
    return duro_ok(out, "compensated");
}

/* Cleanup that never finishes on its own. */
static int orch_slow_cleanup(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Block", in));
    if (duro_cancel_requested(o))
        duro_await(o, duro_call_activity(o, "Block", "cleanup"));
    return duro_ok(out, "done");
}

static int orch_child_block(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Block", in));
    return duro_ok(out, "child done");
}

/* A parent with a child and an activity of its own, both blocking. */
static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *c = duro_call_sub_orchestration(
        o, "ChildBlock", NULL, duro_sprintf(o, "%s-child", in), "c");
    duro_task *a = duro_call_activity(o, "Block", "p");
    duro_join(o, c, a);
    if (duro_cancel_requested(o) && !duro_is_replaying(o))
        atomic_fetch_add(&seen.cleanup_code_ran, 1);
    return duro_ok(out, "parent done");
}

/* Gate, then After, then two events: what a suspension must hold back. */
static int orch_gated(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *g = duro_call_activity(o, "Gate", "g");
    duro_await(o, g);
    duro_task *after = duro_call_activity(o, "Echo", "after");
    duro_await(o, after);
    duro_task *e1 = duro_wait_event(o, "e");
    duro_task *e2 = duro_wait_event(o, "e");
    duro_join(o, e1, e2);
    return duro_ok(out,
                   duro_sprintf(o, "%s+%s+%s+%s", duro_task_output(g),
                                duro_task_output(after), duro_task_output(e1),
                                duro_task_output(e2)));
}

/* Echo once, then complete ("done") or, with input "can", continue as new
 * (input "again", which runs Echo and continues again, forever). */
static int orch_echo_then(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Echo", "x"));
    if (in != NULL && strcmp(in, "done") != 0)
        return duro_continue_as_new(o, out, "again");
    return duro_ok(out, "done");
}

static void setup(rt_fixture *f, const char *db, int64_t cleanup_ms)
{
    reset_seen();
    rt_store_init(f, "life", db);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "Order", NULL,
                                                orch_order, NULL, &oo));
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "Parent", NULL,
                                                orch_parent, NULL, &oo));
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "Gated", NULL,
                                                orch_gated, NULL, &oo));
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "EchoThen", NULL,
                                                orch_echo_then, NULL, &oo));
    oo.cleanup_timeout_ms = cleanup_ms;
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "SlowCleanup", NULL,
                                                orch_slow_cleanup, NULL, &oo));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "ChildBlock", NULL,
                                             orch_child_block, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Block", act_block, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Release", act_release, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Gate", act_gate, NULL));
}

/* ------------------------------------------------------------------------
 * cancel with cleanup */

TEST(cancel_runs_the_compensations_of_an_observing_orchestration)
{
    rt_fixture f;
    setup(&f, "life_cleanup.db", 0);
    rt_start(&f);
    rt_start_instance(&f, "order-1", "Order", "o1");
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "order-1", "customer changed mind",
                                "support"));
    duro_instance_info *info = rt_wait(&f, "order-1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_CANCELLED);
    CHECK_STR(info->error, "customer changed mind");
    CHECK_STR(info->cancel_reason, "customer changed mind");
    CHECK_STR(info->cancelled_by, "support");
    CHECK_STR(info->custom_status, "compensating");
    duro_free(info);
    /* the running charge learned it; the compensation ran, told why */
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    CHECK_EQ(atomic_load(&seen.release_runs), 1);
    pthread_mutex_lock(&seen.lock);
    CHECK_STR(seen.release_input, "customer changed mind by support");
    pthread_mutex_unlock(&seen.lock);
    /* history tells the whole story, in order */
    duro_history *h = rt_history(&f, "order-1");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_EQ(req->flags, DURO_CANCEL_OBSERVED);
    CHECK_STR(req->requested_by, "support");
    const duro_event *acr =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(acr != NULL && acr->event_id == req->event_id + 1);
    CHECK_STR(acr->reason, DURO_REASON_INSTANCE_CANCELLED);
    const duro_event *deadline = rt_find_event(h, DURO_EVENT_TIMER_CREATED, 0);
    CHECK(deadline != NULL);
    CHECK_EQ(deadline->flags, DURO_TIMER_CLEANUP_DEADLINE);
    const duro_event *rel = rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 2);
    CHECK(rel != NULL && rel->event_id > deadline->event_id);
    CHECK_STR(rel->name, "Release");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_CREATED), 2); /* + cleanup's */
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    CHECK_STR(h->events[h->count - 1].reason, "customer changed mind");
    duro_history_free(h);
    /* a second cancel of the cancelled instance is idempotent */
    CHECK_OK(duro_client_cancel(f.client, "order-1", "again", "support"));
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.orchestrations_cancelled, 1);
    CHECK_EQ(m.orchestrations_terminated, 0);
    rt_store_done(&f);
}

TEST(a_second_cancel_during_the_cleanup_changes_nothing)
{
    rt_fixture f;
    setup(&f, "life_second.db", 60000);
    rt_start(&f);
    rt_start_instance(&f, "slow-1", "SlowCleanup", "s");
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "slow-1", "first", "a"));
    /* the cleanup's own activity runs */
    WAIT_UNTIL(atomic_load(&seen.block_started) == 2, WAIT_MS);
    CHECK_EQ(rt_status(&f, "slow-1"), DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_cancel(f.client, "slow-1", "second", "b"));
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "slow-1", &info));
    CHECK_STR(info->cancel_reason, "first");
    CHECK_STR(info->cancelled_by, "a");
    duro_free(info);
    CHECK_EQ(rt_count_events(&f, "slow-1",
                             DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED),
             1);
    /* terminate ends the cleanup at once */
    CHECK_OK(duro_client_terminate(f.client, "slow-1", "enough", "ops"));
    info = rt_wait(&f, "slow-1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    CHECK_STR(info->error, "enough");
    duro_free(info);
    WAIT_UNTIL(reason_seen(DURO_REASON_INSTANCE_TERMINATED) == 1, WAIT_MS);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    CHECK_EQ(rt_count_events(&f, "slow-1",
                             DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED),
             1);
    rt_store_done(&f);
}

TEST(a_cleanup_past_its_deadline_is_terminated)
{
    rt_fixture f;
    setup(&f, "life_deadline.db", 300);
    rt_start(&f);
    rt_start_instance(&f, "slow-2", "SlowCleanup", "s");
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "slow-2", "stop", "ops"));
    duro_instance_info *info = rt_wait(&f, "slow-2", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    CHECK(strstr(info->error, "cleanup deadline passed") != NULL);
    CHECK(strstr(info->error, "stop") != NULL);
    duro_free(info);
    /* the cleanup's activity was cancelled as the instance ended */
    WAIT_UNTIL(reason_seen(DURO_REASON_INSTANCE_TERMINATED) == 1, WAIT_MS);
    duro_history *h = rt_history(&f, "slow-2");
    const duro_event *end = &h->events[h->count - 1];
    CHECK_EQ(end->kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(end->requested_by, "duro");
    const duro_event *timer = rt_find_event(h, DURO_EVENT_TIMER_CREATED, 0);
    CHECK(timer != NULL && (timer->flags & DURO_TIMER_CLEANUP_DEADLINE));
    CHECK(rt_find_event(h, DURO_EVENT_TIMER_FIRED, 0) != NULL);
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.orchestrations_terminated, 1);
    rt_store_done(&f);
}

/* ------------------------------------------------------------------------
 * terminate */

TEST(terminate_ends_at_once_without_code_and_terminates_children)
{
    rt_fixture f;
    setup(&f, "life_terminate.db", 0);
    rt_start(&f);
    rt_start_instance(&f, "p1", "Parent", "p1");
    WAIT_UNTIL(atomic_load(&seen.block_started) == 2, WAIT_MS);
    CHECK_EQ(duro_client_terminate(f.client, "nope", NULL, NULL),
             DURO_NOT_FOUND);
    CHECK_OK(duro_client_terminate(f.client, "p1", "runaway", "ops"));
    CHECK_OK(duro_client_terminate(f.client, "p1", "twice", "ops"));
    duro_instance_info *info = rt_wait(&f, "p1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    CHECK_STR(info->error, "runaway");
    CHECK_EQ(info->category, DURO_CATEGORY_CANCELLED);
    duro_free(info);
    info = rt_wait(&f, "p1-child", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    duro_free(info);
    /* both activities learned it; the observing parent's code did not run */
    WAIT_UNTIL(reason_seen(DURO_REASON_INSTANCE_TERMINATED) == 2, WAIT_MS);
    CHECK_EQ(atomic_load(&seen.cleanup_code_ran), 0);
    duro_history *h = rt_history(&f, "p1");
    const duro_event *end = &h->events[h->count - 1];
    CHECK_EQ(end->kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(end->reason, "runaway");
    CHECK_STR(end->requested_by, "ops");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED), 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED),
             1);
    duro_history_free(h);
    h = rt_history(&f, "p1-child");
    end = &h->events[h->count - 1];
    CHECK_EQ(end->kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(end->requested_by, "parent:p1");
    duro_history_free(h);
    /* terminating it again is idempotent; an instance that ended any
     * other way cannot be terminated; no finished instance can be
     * suspended, resumed or cancelled */
    CHECK_OK(duro_client_terminate(f.client, "p1", NULL, NULL));
    CHECK_EQ(duro_client_suspend(f.client, "p1", NULL, NULL),
             DURO_INVALID_STATE);
    CHECK_EQ(duro_client_resume(f.client, "p1", NULL, NULL),
             DURO_INVALID_STATE);
    CHECK_EQ(duro_client_cancel(f.client, "p1", NULL, NULL),
             DURO_INVALID_STATE);
    rt_store_done(&f);
}

static int has_problem(rt_fixture *f, const char *id)
{
    duro_instance_info *i = NULL;
    int got = duro_client_get_status(f->client, id, &i) == DURO_OK &&
              i->last_problem != NULL;
    duro_free(i);
    return got;
}

TEST(terminate_works_on_an_orchestration_that_is_not_registered)
{
    rt_fixture f;
    setup(&f, "life_unregistered.db", 0);
    f.opts.max_attempts = 1000; /* it would otherwise fail on its own */
    rt_start(&f);
    rt_start_instance(&f, "ghost", "NotRegisteredHere", "x");
    /* the runtime retries it, recording why */
    WAIT_UNTIL(has_problem(&f, "ghost"), WAIT_MS);
    CHECK_OK(duro_client_terminate(f.client, "ghost", "no such code", "ops"));
    duro_instance_info *info = rt_wait(&f, "ghost", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    CHECK_STR(info->error, "no such code");
    CHECK(info->last_problem == NULL); /* the ending cleared it */
    duro_free(info);
    rt_store_done(&f);
}

/* ------------------------------------------------------------------------
 * suspend and resume */

static int history_count(rt_fixture *f, const char *id, int kind)
{
    return rt_count_events(f, id, kind);
}

TEST(suspend_keeps_messages_in_order_until_resume)
{
    rt_fixture f;
    setup(&f, "life_suspend.db", 0);
    rt_start(&f);
    rt_start_instance(&f, "g1", "Gated", NULL);
    WAIT_UNTIL(atomic_load(&seen.gate_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "g1", "investigating", "alice"));
    rt_wait_status(&f, "g1", DURO_STATUS_SUSPENDED, WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "g1", "again", "alice"));
    /* the running activity finishes; events arrive; all are recorded in
     * order, and the code does not move on */
    atomic_store(&seen.gate_open, 1);
    WAIT_UNTIL(history_count(&f, "g1", DURO_EVENT_ACTIVITY_COMPLETED) == 1,
               WAIT_MS);
    CHECK_OK(duro_client_raise_event(f.client, "g1", "e", "one"));
    CHECK_OK(duro_client_raise_event(f.client, "g1", "e", "two"));
    WAIT_UNTIL(history_count(&f, "g1", DURO_EVENT_EVENT_RAISED) == 2, WAIT_MS);
    CHECK_EQ(rt_status(&f, "g1"), DURO_STATUS_SUSPENDED);
    CHECK_EQ(history_count(&f, "g1", DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(history_count(&f, "g1", DURO_EVENT_EXECUTION_SUSPENDED), 1);
    /* resumed: the kept messages are consumed in the order they came */
    CHECK_OK(duro_client_resume(f.client, "g1", "fixed", "bob"));
    duro_instance_info *info = rt_wait(&f, "g1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "gate+after+one+two");
    duro_free(info);
    duro_history *h = rt_history(&f, "g1");
    const duro_event *sus = rt_find_event(h, DURO_EVENT_EXECUTION_SUSPENDED, 0);
    const duro_event *res = rt_find_event(h, DURO_EVENT_EXECUTION_RESUMED, 0);
    const duro_event *done = rt_find_event(h, DURO_EVENT_ACTIVITY_COMPLETED, 0);
    const duro_event *one = rt_find_event(h, DURO_EVENT_EVENT_RAISED, 0);
    const duro_event *two = rt_find_event(h, DURO_EVENT_EVENT_RAISED, 1);
    CHECK(sus && res && done && one && two);
    CHECK_STR(sus->reason, "investigating");
    CHECK_STR(sus->requested_by, "alice");
    CHECK_STR(res->reason, "fixed");
    CHECK_STR(res->requested_by, "bob");
    CHECK(sus->event_id < done->event_id && done->event_id < one->event_id &&
          one->event_id < two->event_id && two->event_id < res->event_id);
    CHECK_STR(one->payload, "one");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_EXECUTION_SUSPENDED), 1);
    duro_history_free(h);
    CHECK_EQ(duro_client_terminate(f.client, "g1", NULL, NULL),
             DURO_INVALID_STATE); /* Completed */
    rt_store_done(&f);
}

/* With no runtime holding it, an instance that has not begun is suspended
 * (and terminated) by the request itself: no code runs until it is
 * resumed - a delayed one too, whose delay ends with the suspension - and
 * what arrives meanwhile is kept for the code in order. */
TEST(an_instance_suspended_before_its_first_turn_runs_no_code_until_resumed)
{
    rt_fixture f;
    setup(&f, "life_suspend_first.db", 0);
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "g3", "Gated", NULL);
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = 3600000;
    CHECK_OK(duro_client_start(f.client, "g4", "Gated", NULL, &so));
    rt_start_instance(&f, "g5", "Gated", NULL);
    const char *ids[] = {"g3", "g4"};
    duro_control_result res[2];
    CHECK_OK(duro_client_control_many(f.client, DURO_CONTROL_SUSPEND, ids, 2,
                                      "not yet", "ops", res));
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(res[i].outcome, DURO_CONTROL_OUTCOME_APPLIED);
        CHECK_EQ(rt_status(&f, ids[i]), DURO_STATUS_SUSPENDED);
    }
    CHECK_OK(duro_client_terminate(f.client, "g5", "never mind", "ops"));
    CHECK_EQ(rt_status(&f, "g5"), DURO_STATUS_TERMINATED);

    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "g3", "e", "one"));
    WAIT_UNTIL(history_count(&f, "g3", DURO_EVENT_EVENT_RAISED) == 1, WAIT_MS);
    /* the event's turn ran no code */
    CHECK_EQ(atomic_load(&seen.gate_started), 0);
    CHECK_EQ(history_count(&f, "g3", DURO_EVENT_ACTIVITY_SCHEDULED), 0);
    CHECK_EQ(rt_status(&f, "g3"), DURO_STATUS_SUSPENDED);

    /* resumed: the code starts, with the event kept for it */
    atomic_store(&seen.gate_open, 1);
    CHECK_OK(duro_client_resume(f.client, "g3", "go", "ops"));
    WAIT_UNTIL(history_count(&f, "g3", DURO_EVENT_ACTIVITY_COMPLETED) == 2,
               WAIT_MS);
    CHECK_OK(duro_client_raise_event(f.client, "g3", "e", "two"));
    duro_instance_info *info = rt_wait(&f, "g3", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "gate+after+one+two");
    CHECK(info->version != NULL); /* the version that ran, pinned */
    duro_free(info);
    duro_history *h = rt_history(&f, "g3");
    CHECK(h->count > 5);
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    CHECK_EQ(h->events[1].kind, DURO_EVENT_EXECUTION_SUSPENDED);
    CHECK_EQ(h->events[1].flags, DURO_SUSPEND_BEFORE_START);
    CHECK_STR(h->events[1].reason, "not yet");
    CHECK_EQ(h->events[2].kind, DURO_EVENT_EVENT_RAISED);
    CHECK_EQ(h->events[3].kind, DURO_EVENT_EXECUTION_RESUMED);
    CHECK_EQ(h->events[4].kind, DURO_EVENT_ACTIVITY_SCHEDULED);
    duro_history_free(h);

    /* the delayed one starts when resumed */
    CHECK_OK(duro_client_resume(f.client, "g4", NULL, NULL));
    WAIT_UNTIL(history_count(&f, "g4", DURO_EVENT_ACTIVITY_COMPLETED) == 2,
               WAIT_MS);
    CHECK_OK(duro_client_raise_event(f.client, "g4", "e", "a"));
    CHECK_OK(duro_client_raise_event(f.client, "g4", "e", "b"));
    info = rt_wait(&f, "g4", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "gate+after+a+b");
    duro_free(info);
    CHECK_EQ(atomic_load(&seen.gate_started), 2); /* not g5 */
    rt_store_done(&f);
}

TEST(a_suspended_instance_stays_suspended_across_a_restart)
{
    rt_fixture f;
    setup(&f, "life_restart.db", 0);
    rt_start(&f);
    rt_start_instance(&f, "g2", "Gated", NULL);
    WAIT_UNTIL(atomic_load(&seen.gate_started) == 1, WAIT_MS);
    atomic_store(&seen.gate_open, 1);
    WAIT_UNTIL(history_count(&f, "g2", DURO_EVENT_ACTIVITY_COMPLETED) == 2,
               WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "g2", NULL, NULL));
    rt_wait_status(&f, "g2", DURO_STATUS_SUSPENDED, WAIT_MS);
    rt_stop(&f);
    /* a new runtime (nothing cached) records what arrives, runs no code */
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "g2", "e", "a"));
    CHECK_OK(duro_client_raise_event(f.client, "g2", "e", "b"));
    WAIT_UNTIL(history_count(&f, "g2", DURO_EVENT_EVENT_RAISED) == 2, WAIT_MS);
    CHECK_EQ(rt_status(&f, "g2"), DURO_STATUS_SUSPENDED);
    CHECK_OK(duro_client_resume(f.client, "g2", NULL, NULL));
    duro_instance_info *info = rt_wait(&f, "g2", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "gate+after+a+b");
    duro_free(info);
    rt_store_done(&f);
}

/* A cancel queued behind the completion that lets an observing
 * orchestration's code return (complete, or continue as new): the turn
 * fetches both, and the instance ends Cancelled in it, without a next
 * execution. Runtimes of orchestrations only, then of workers only, queue
 * the two messages while no turn runs. (The cancel used to be dropped: the
 * instance completed, or continued as new for ever, never cancellable
 * again since the store keeps only the first request.) */
TEST(a_cancel_queued_behind_the_completion_that_ends_the_code_cancels)
{
    static const char *const inputs[] = {"done", "can"};
    for (int k = 0; k < 2; k++) {
        rt_fixture f;
        setup(&f, k == 0 ? "life_batch_done.db" : "life_batch_can.db", 0);
        const char *id = inputs[k];
        f.opts.worker_concurrency = 0;
        rt_start(&f);
        rt_start_instance(&f, id, "EchoThen", inputs[k]);
        WAIT_UNTIL(history_count(&f, id, DURO_EVENT_ACTIVITY_SCHEDULED) == 1,
                   WAIT_MS);
        rt_stop(&f);
        f.opts.worker_concurrency = 1;
        f.opts.orchestration_concurrency = 0;
        rt_start(&f);
        duro_metrics m = {0};
        for (int64_t end = test_now_ms() + WAIT_MS;
             m.activities_completed < 1 && test_now_ms() < end;
             test_sleep_ms(5))
            duro_runtime_metrics(f.rt, &m);
        CHECK_EQ(m.activities_completed, 1);
        rt_stop(&f); /* the completion is queued, no turn took it */
        CHECK_OK(duro_client_cancel(f.client, id, "stop", "ops"));
        f.opts.orchestration_concurrency = 1;
        rt_start(&f);
        duro_instance_info *info = rt_wait(&f, id, WAIT_MS);
        CHECK_MSG(info->status == DURO_STATUS_CANCELLED, "%s: %s", id,
                  duro_status_name(info->status));
        CHECK_EQ(info->execution_id, 1);
        CHECK_STR(info->error, "stop");
        duro_free(info);
        duro_history *h = rt_history(&f, id);
        CHECK(h != NULL && h->count >= 3);
        if (h != NULL && h->count >= 3) {
            CHECK_EQ(h->events[h->count - 3].kind,
                     DURO_EVENT_ACTIVITY_COMPLETED);
            CHECK_EQ(h->events[h->count - 2].kind,
                     DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED);
            CHECK_EQ(h->events[h->count - 1].kind,
                     DURO_EVENT_ORCHESTRATION_CANCELLED);
        }
        duro_history_free(h);
        rt_store_done(&f);
    }
}

TEST(cancel_and_terminate_work_on_a_suspended_instance)
{
    rt_fixture f;
    setup(&f, "life_suspended_stop.db", 0);
    rt_start(&f);
    rt_start_instance(&f, "o1", "Order", "o1");
    rt_start_instance(&f, "o2", "Order", "o2");
    WAIT_UNTIL(atomic_load(&seen.block_started) == 2, WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "o1", NULL, NULL));
    CHECK_OK(duro_client_suspend(f.client, "o2", NULL, NULL));
    rt_wait_status(&f, "o1", DURO_STATUS_SUSPENDED, WAIT_MS);
    rt_wait_status(&f, "o2", DURO_STATUS_SUSPENDED, WAIT_MS);
    /* a suspended instance runs no code: the cancel ends it at once,
     * without its compensation */
    CHECK_OK(duro_client_cancel(f.client, "o1", "drop it", "ops"));
    CHECK_OK(duro_client_terminate(f.client, "o2", "kill it", "ops"));
    duro_instance_info *info = rt_wait(&f, "o1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_CANCELLED);
    duro_free(info);
    info = rt_wait(&f, "o2", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    duro_free(info);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 2, WAIT_MS);
    CHECK_EQ(atomic_load(&seen.release_runs), 0);
    CHECK_EQ(atomic_load(&seen.cleanup_code_ran), 0);
    duro_history *h = rt_history(&f, "o1");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL && req->flags == 0);
    duro_history_free(h);
    rt_store_done(&f);
}

TEST_MAIN(
    T(cancel_runs_the_compensations_of_an_observing_orchestration),
    T(a_second_cancel_during_the_cleanup_changes_nothing),
    T(a_cleanup_past_its_deadline_is_terminated),
    T(terminate_ends_at_once_without_code_and_terminates_children),
    T(terminate_works_on_an_orchestration_that_is_not_registered),
    T(suspend_keeps_messages_in_order_until_resume),
    T(a_cancel_queued_behind_the_completion_that_ends_the_code_cancels),
    T(a_suspended_instance_stays_suspended_across_a_restart),
    T(an_instance_suspended_before_its_first_turn_runs_no_code_until_resumed),
    T(cancel_and_terminate_work_on_a_suspended_instance))
