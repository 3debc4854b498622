/* test_deadline.c - instance deadlines end to end (issue 27): a deadline
 * passing while an activity runs (the activity learns "deadline", the
 * instance ends Failed with category timeout), its child ended with it,
 * a deadline surviving a runtime's restart, spanning continue-as-new,
 * already passed at the start, the registration's default, kept or
 * replaced by a rewind or reset, and the start and reset options that are
 * refused. Real runtime on a real store: a SQLite file,
 * or - built with DEADLINE_PG - a fresh schema on the PostgreSQL server of
 * the tests. Deadlines are short real ones (hundreds of ms); waits are on
 * conditions with their own deadlines. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "faulty_provider.h"
#ifdef DEADLINE_PG
#define RT_STORE_PG
#endif
#include "rt_store.h"

#define WAIT_MS 30000

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * what the activities saw */

static struct {
    _Atomic int block_started;
    _Atomic int block_cancelled;
    _Atomic int echo_runs;
    pthread_mutex_t lock;
    char reasons[16][40];
    int reason_count;
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void reset_seen(void)
{
    atomic_store(&seen.block_started, 0);
    atomic_store(&seen.block_cancelled, 0);
    atomic_store(&seen.echo_runs, 0);
    pthread_mutex_lock(&seen.lock);
    seen.reason_count = 0;
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
    if (seen.reason_count < 16)
        snprintf(seen.reasons[seen.reason_count++], 40, "%s", r ? r : "(null)");
    pthread_mutex_unlock(&seen.lock);
    atomic_fetch_add(&seen.block_cancelled, 1);
    return duro_fail(out, "cancelled");
}

/* Fails while the gate is closed, then runs as Block. */
static _Atomic int gate_closed;

static int act_gate(duro_activity *a, const char *in, duro_result *out)
{
    if (atomic_load(&gate_closed))
        return duro_fail(out, "gate closed");
    return act_block(a, in, out);
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&seen.echo_runs, 1);
    return duro_ok(out, in);
}

/* ------------------------------------------------------------------------
 * orchestrations */

/* Echo, then an activity that runs until it is cancelled. */
static int orch_busy(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Echo", in));
    duro_await(o, duro_call_activity(o, "Block", in));
    return duro_ok(out, "done");
}

/* A child that blocks, and an activity of the parent's own. */
static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *c = duro_call_sub_orchestration(
        o, "Busy", NULL, duro_sprintf(o, "%s-child", in), "c");
    duro_task *a = duro_call_activity(o, "Block", "p");
    duro_join(o, c, a);
    return duro_ok(out, "parent done");
}

/* A durable timer of an hour: only the deadline ends it. */
static int orch_sleepy(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_timer(o, 3600000));
    return duro_ok(out, "woke");
}

/* Continues as new three times ("0" .. "3"), then sleeps an hour. */
static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    int n = in != NULL ? atoi(in) : 0;
    if (n < 3)
        return duro_continue_as_new(o, out, duro_sprintf(o, "%d", n + 1));
    duro_await(o, duro_timer(o, 3600000));
    return duro_ok(out, "woke");
}

/* Observes its cancel and cleans up with an activity that blocks too. */
static int orch_careful(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Block", in));
    if (duro_cancel_requested(o))
        duro_await(o, duro_call_activity(o, "Block", "cleanup"));
    return duro_ok(out, "done");
}

/* Through the gate: fails when it fails. */
static int orch_gated(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *g = duro_call_activity(o, "Gate", in);
    if (duro_await(o, g) != DURO_OK)
        return duro_fail(out, duro_task_error(g));
    return duro_ok(out, "through");
}

static int orch_quick(duro_orch *o, const char *in, duro_result *out)
{
    duro_await(o, duro_call_activity(o, "Echo", in));
    return duro_ok(out, "quick");
}

static void setup(rt_fixture *f, const char *db)
{
    reset_seen();
    rt_store_init(f, "dl", db);
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Busy", NULL, orch_busy, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Parent", NULL,
                                             orch_parent, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Sleepy", NULL,
                                             orch_sleepy, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Chain", NULL, orch_chain,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Quick", NULL, orch_quick,
                                             NULL));
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "Careful", NULL,
                                                orch_careful, NULL, &oo));
    oo.observe_cancel = 0;
    oo.timeout_ms = 400;
    CHECK_OK(duro_registry_add_orchestration_ex(f->reg, "SleepyBounded", NULL,
                                                orch_sleepy, NULL, &oo));
    CHECK_OK(duro_registry_add_activity(f->reg, "Block", act_block, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Gated", NULL, orch_gated,
                                             NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Gate", act_gate, NULL));
}

static void start_with(rt_fixture *f, const char *id, const char *orch,
                       const char *input, int64_t deadline_ms,
                       int64_t timeout_ms)
{
    duro_start_options so;
    duro_start_options_init(&so);
    so.deadline_ms = deadline_ms;
    so.timeout_ms = timeout_ms;
    CHECK_OK(duro_client_start(f->client, id, orch, input, &so));
}

/* The instance ended Failed with category timeout, its error naming the
 * deadline; returns its deadline_ms. */
static int64_t check_timed_out(rt_fixture *f, const char *id)
{
    duro_instance_info *info = rt_wait(f, id, WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    CHECK_EQ(info->category, DURO_CATEGORY_TIMEOUT);
    CHECK(info->error != NULL &&
          strncmp(info->error, "deadline of ", 12) == 0 &&
          strstr(info->error, "Z passed") != NULL);
    CHECK(info->deadline_ms > 0);
    CHECK(info->finished_ms >= info->deadline_ms);
    int64_t d = info->deadline_ms;
    duro_free(info);
    return d;
}

/* ------------------------------------------------------------------------
 * tests */

TEST(a_deadline_cancels_the_running_activity_and_fails_the_instance)
{
    rt_fixture f;
    setup(&f, "dl_activity.db");
    rt_start(&f);
    int64_t before = wall_ms();
    start_with(&f, "b1", "Busy", "b1", 0, 600);
    /* visible in status from the start */
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "b1", &info));
    CHECK(info->deadline_ms >= before + 600 &&
          info->deadline_ms <= wall_ms() + 600);
    duro_free(info);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    check_timed_out(&f, "b1");
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 1, WAIT_MS);
    CHECK_EQ(reason_seen(DURO_REASON_DEADLINE), 1);
    duro_history *h = rt_history(&f, "b1");
    const duro_event *c =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(c != NULL);
    if (c != NULL)
        CHECK_STR(c->reason, DURO_REASON_DEADLINE);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_EQ(h->events[h->count - 1].category, DURO_CATEGORY_TIMEOUT);
    /* today's code replays it: the deadline's ending is not the code's */
    CHECK_OK(duro_replay_history(f.reg, h, NULL));
    duro_history_free(h);
    /* nothing of it is left queued */
    duro_store_stats *st = NULL;
    CHECK_OK(duro_client_store_stats(f.client, &st));
    CHECK_EQ(st->orchestrator_ready + st->orchestrator_delayed, 0);
    duro_free(st);
    rt_store_done(&f);
}

TEST(a_deadline_ends_the_children_too)
{
    rt_fixture f;
    setup(&f, "dl_child.db");
    rt_start(&f);
    start_with(&f, "p1", "Parent", "p1", wall_ms() + 700, 0);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 2, WAIT_MS);
    check_timed_out(&f, "p1");
    /* the child inherits no deadline: it is cancelled by its parent */
    duro_instance_info *child = rt_wait(&f, "p1-child", WAIT_MS);
    CHECK_EQ(child->status, DURO_STATUS_CANCELLED);
    CHECK_EQ(child->deadline_ms, 0);
    CHECK_STR(child->cancel_reason, DURO_REASON_DEADLINE);
    CHECK_STR(child->cancelled_by, "parent:p1");
    duro_free(child);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 2, WAIT_MS);
    CHECK_EQ(reason_seen(DURO_REASON_DEADLINE), 1); /* the parent's own */
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1); /* the child's */
    duro_history *h = rt_history(&f, "p1");
    const duro_event *c =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(c != NULL);
    if (c != NULL)
        CHECK_STR(c->reason, DURO_REASON_DEADLINE);
    CHECK_OK(duro_replay_history(f.reg, h, NULL));
    duro_history_free(h);
    rt_store_done(&f);
}

TEST(a_deadline_survives_a_restart_of_the_runtime)
{
    rt_fixture f;
    setup(&f, "dl_restart.db");
    rt_start(&f);
    start_with(&f, "s1", "Sleepy", NULL, 0, 1500);
    WAIT_UNTIL(rt_count_events(&f, "s1", DURO_EVENT_TIMER_CREATED) == 1,
               WAIT_MS);
    rt_stop(&f);
    /* a new runtime on the same store still ends it at its deadline */
    rt_start(&f);
    check_timed_out(&f, "s1");
    rt_store_done(&f);
}

TEST(a_deadline_spans_continue_as_new)
{
    rt_fixture f;
    setup(&f, "dl_chain.db");
    rt_start(&f);
    start_with(&f, "c1", "Chain", "0", 0, 800);
    int64_t d = check_timed_out(&f, "c1");
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "c1", &info));
    CHECK_EQ(info->execution_id, 4); /* it ended the last of the chain */
    CHECK_EQ(info->deadline_ms, d);
    duro_free(info);
    rt_store_done(&f);
}

TEST(a_deadline_already_passed_ends_the_instance_without_its_code)
{
    rt_fixture f;
    setup(&f, "dl_past.db");
    rt_start(&f);
    start_with(&f, "past", "Busy", "x", wall_ms() - 60000, 0);
    check_timed_out(&f, "past");
    CHECK_EQ(atomic_load(&seen.echo_runs), 0);
    CHECK_EQ(rt_count_events(&f, "past", DURO_EVENT_ACTIVITY_SCHEDULED), 0);
    /* a delayed start whose deadline comes first never runs either */
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = 3600000;
    so.timeout_ms = 1; /* after the delay: not yet */
    CHECK_OK(duro_client_start(f.client, "late", "Busy", "x", &so));
    so.timeout_ms = 0;
    so.deadline_ms = wall_ms() + 200; /* before the delay ends */
    CHECK_OK(duro_client_start(f.client, "early", "Busy", "x", &so));
    check_timed_out(&f, "early");
    CHECK_EQ(rt_status(&f, "late"), DURO_STATUS_PENDING);
    CHECK_EQ(atomic_load(&seen.echo_runs), 0);
    rt_store_done(&f);
}

TEST(an_instance_that_finishes_first_keeps_no_deadline_message)
{
    rt_fixture f;
    setup(&f, "dl_first.db");
    rt_start(&f);
    start_with(&f, "q1", "Quick", "q", 0, 3600000);
    duro_instance_info *info = rt_wait(&f, "q1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK(info->deadline_ms > 0);
    duro_free(info);
    duro_store_stats *st = NULL;
    CHECK_OK(duro_client_store_stats(f.client, &st));
    CHECK_EQ(st->orchestrator_ready + st->orchestrator_delayed, 0);
    duro_free(st);
    rt_store_done(&f);
}

TEST(the_registration_gives_a_default_deadline)
{
    rt_fixture f;
    setup(&f, "dl_registered.db");
    rt_start(&f);
    rt_start_instance(&f, "r1", "SleepyBounded", NULL);
    int64_t d = check_timed_out(&f, "r1");
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "r1", &info));
    CHECK(d >= info->created_ms + 400);
    duro_free(info);
    /* a start's own deadline wins over the registration's */
    start_with(&f, "r2", "SleepyBounded", NULL, 0, 3600000);
    WAIT_UNTIL(rt_count_events(&f, "r2", DURO_EVENT_TIMER_CREATED) == 1,
               WAIT_MS);
    CHECK_EQ(rt_status(&f, "r2"), DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_get_status(f.client, "r2", &info));
    CHECK(info->deadline_ms > wall_ms() + 3000000);
    duro_free(info);
    rt_store_done(&f);
}

/* A deadline is not held back by a suspension: it ends the instance as
 * it would a running one. The registration's deadline of an instance
 * suspended before it began runs from the resume, where its code starts. */
TEST(a_deadline_ends_a_suspended_instance_too)
{
    rt_fixture f;
    setup(&f, "dl_suspended.db");
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "sb", "SleepyBounded", NULL);
    CHECK_OK(duro_client_suspend(f.client, "sb", "not yet", "ops"));
    CHECK_EQ(rt_status(&f, "sb"), DURO_STATUS_SUSPENDED); /* at once */
    rt_start(&f);
    start_with(&f, "s2", "Sleepy", NULL, 0, 800);
    WAIT_UNTIL(rt_count_events(&f, "s2", DURO_EVENT_TIMER_CREATED) == 1,
               WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "s2", NULL, NULL));
    rt_wait_status(&f, "s2", DURO_STATUS_SUSPENDED, WAIT_MS);
    check_timed_out(&f, "s2");

    CHECK_EQ(rt_status(&f, "sb"), DURO_STATUS_SUSPENDED);
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "sb", &info));
    CHECK_EQ(info->deadline_ms, 0); /* nothing ran: no deadline yet */
    duro_free(info);
    int64_t resumed = wall_ms();
    CHECK_OK(duro_client_resume(f.client, "sb", NULL, NULL));
    int64_t d = check_timed_out(&f, "sb");
    CHECK(d >= resumed + 400 - 50); /* from the resume's turn */
    rt_store_done(&f);
}

/* A cleanup after an observed cancel is bounded by the deadline too: the
 * instance fails at it, the cleanup's activity cancelled with "deadline". */
TEST(a_deadline_ends_a_cleanup_after_a_cancel)
{
    rt_fixture f;
    setup(&f, "dl_cleanup.db");
    rt_start(&f);
    start_with(&f, "k1", "Careful", "k1", 0, 3000);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "k1", "changed my mind", "ops"));
    WAIT_UNTIL(atomic_load(&seen.block_started) == 2, WAIT_MS);
    check_timed_out(&f, "k1");
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 2, WAIT_MS);
    CHECK_EQ(reason_seen(DURO_REASON_INSTANCE_CANCELLED), 1);
    CHECK_EQ(reason_seen(DURO_REASON_DEADLINE), 1);
    rt_store_done(&f);
}

/* A store older than contract version 12 has no DEADLINE message: a
 * start's deadline is refused, naming why, and a registration's is not
 * sent. */
TEST(an_older_store_refuses_a_start_deadline_and_gets_no_registered_one)
{
    rt_fixture f;
    setup(&f, "dl_older.db");
    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap_version(inner, 1, 11);
    CHECK(w != NULL);
    duro_client *old = NULL;
    CHECK_OK(duro_client_create_with_provider(w, &old));
    duro_start_options so;
    duro_start_options_init(&so);
    so.timeout_ms = 1000;
    CHECK_EQ(duro_client_start(old, "o1", "Sleepy", NULL, &so),
             DURO_UNSUPPORTED);
    CHECK(strstr(duro_errmsg(), "version 12") != NULL);
    CHECK_OK(duro_client_start(old, "o2", "SleepyBounded", NULL, NULL));
    duro_runtime *rt = NULL;
    CHECK_OK(duro_runtime_create_with_provider(w, f.reg, &f.opts, &rt));
    CHECK_OK(duro_runtime_start(rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    WAIT_UNTIL(rt_count_events(&f, "o2", DURO_EVENT_TIMER_CREATED) == 1,
               WAIT_MS);
    /* the first turn committed: it sent no deadline */
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "o2", &info));
    CHECK_EQ(info->deadline_ms, 0);
    CHECK_EQ(info->status, DURO_STATUS_RUNNING);
    duro_free(info);
    duro_runtime_destroy(rt);
    duro_client_destroy(old);
    duro_provider_close(w);
    CHECK_EQ(rt_status(&f, "o1"), DURO_STATUS_NOT_FOUND);
    rt_store_done(&f);
}

/* The instance's current execution and deadline. */
static void instance_now(rt_fixture *f, const char *id, uint64_t *execution,
                         int64_t *deadline)
{
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f->client, id, &info));
    if (info == NULL)
        return;
    *execution = info->execution_id;
    *deadline = info->deadline_ms;
    duro_free(info);
}

/* Messages the store holds for later (a DEADLINE is one until it is due). */
static uint64_t delayed_messages(rt_fixture *f)
{
    duro_store_stats *st = NULL;
    CHECK_OK(duro_client_store_stats(f->client, &st));
    uint64_t n = st != NULL ? st->orchestrator_delayed : 0;
    duro_free(st);
    return n;
}

TEST(a_rewind_before_the_deadline_runs_under_the_same_deadline)
{
    rt_fixture f;
    setup(&f, "dl_rewind_keep.db");
    rt_start(&f);
    atomic_store(&gate_closed, 1);
    /* long enough for the gate's failure to come first on a loaded
     * machine; the rewound execution then waits for it */
    start_with(&f, "g1", "Gated", "g1", 0, 5000);
    duro_instance_info *info = rt_wait(&f, "g1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    CHECK_EQ(info->category, DURO_CATEGORY_APPLICATION);
    int64_t deadline = info->deadline_ms;
    CHECK(deadline > 0);
    duro_free(info);
    /* the ending dropped the DEADLINE message */
    CHECK_EQ(delayed_messages(&f), 0);
    atomic_store(&gate_closed, 0);
    duro_reset_options ro;
    duro_reset_options_init(&ro);
    ro.reason = "gate open";
    CHECK_OK(duro_client_rewind(f.client, "g1", &ro, NULL));
    uint64_t execution = 0;
    int64_t now_deadline = 0;
    instance_now(&f, "g1", &execution, &now_deadline);
    CHECK_EQ(execution, 2);
    CHECK_EQ(now_deadline, deadline);
    /* the gate now blocks until the same deadline ends it */
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_EQ(check_timed_out(&f, "g1"), deadline);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 1, WAIT_MS);
    CHECK_EQ(reason_seen(DURO_REASON_DEADLINE), 1);
    rt_store_done(&f);
}

TEST(a_reset_after_the_deadline_needs_a_new_one_or_none)
{
    rt_fixture f;
    setup(&f, "dl_reset_passed.db");
    rt_start(&f);
    start_with(&f, "p1", "Busy", "p1", 0, 300);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    int64_t first = check_timed_out(&f, "p1");
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 1, WAIT_MS);

    /* keeping the passed deadline would end it again at once: refused,
     * dry run or not, saying what to do, and nothing changes */
    duro_reset_options ro;
    duro_reset_options_init(&ro);
    for (int dry = 0; dry < 2; dry++) {
        ro.dry_run = dry;
        CHECK_EQ(duro_client_rewind(f.client, "p1", &ro, NULL),
                 DURO_INVALID_STATE);
        CHECK(strstr(duro_errmsg(), "deadline") != NULL &&
              strstr(duro_errmsg(), "has passed") != NULL &&
              strstr(duro_errmsg(), "new deadline or none") != NULL);
        CHECK_EQ(duro_client_reset(f.client, "p1", &ro, NULL),
                 DURO_INVALID_STATE);
    }
    ro.dry_run = 0;
    /* options of version 1 have no deadline_ms: the instance's is kept */
    ro.version = 1;
    ro.deadline_ms = wall_ms() + 60000;
    CHECK_EQ(duro_client_rewind(f.client, "p1", &ro, NULL), DURO_INVALID_STATE);
    ro.version = 2;
    /* a deadline that is not one */
    ro.deadline_ms = -5;
    CHECK_EQ(duro_client_rewind(f.client, "p1", &ro, NULL), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "deadline_ms is -5") != NULL);
    ro.deadline_ms = wall_ms() - 1000;
    CHECK_EQ(duro_client_rewind(f.client, "p1", &ro, NULL), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "already passed") != NULL);
    uint64_t execution = 0;
    int64_t deadline = 0;
    instance_now(&f, "p1", &execution, &deadline);
    CHECK_EQ(execution, 1);
    CHECK_EQ(deadline, first);
    CHECK_EQ(rt_status(&f, "p1"), DURO_STATUS_FAILED);

    /* a new deadline: the rewound execution ends at it */
    atomic_store(&seen.block_started, 0);
    atomic_store(&seen.block_cancelled, 0);
    int64_t second = wall_ms() + 400;
    ro.deadline_ms = second;
    /* the deadline's ending was decided without the code: the rewind goes
     * to where the code waited (Block scheduled, event 4), not to before
     * the turn that scheduled it */
    duro_reset_result res;
    CHECK_OK(duro_client_rewind(f.client, "p1", &ro, &res));
    CHECK_EQ(res.to_event_id, 4);
    CHECK_EQ(res.activities, 1);
    instance_now(&f, "p1", &execution, &deadline);
    CHECK_EQ(execution, 2);
    CHECK_EQ(deadline, second);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_EQ(check_timed_out(&f, "p1"), second);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 1, WAIT_MS);

    /* none: it runs on with no deadline, and none is queued */
    atomic_store(&seen.block_started, 0);
    ro.deadline_ms = DURO_DEADLINE_NONE;
    CHECK_OK(duro_client_reset(f.client, "p1", &ro, NULL));
    instance_now(&f, "p1", &execution, &deadline);
    CHECK_EQ(execution, 3);
    CHECK_EQ(deadline, 0);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_EQ(rt_status(&f, "p1"), DURO_STATUS_RUNNING);
    CHECK_EQ(delayed_messages(&f), 0);
    CHECK_OK(duro_client_terminate(f.client, "p1", "test over", NULL));
    rt_wait_status(&f, "p1", DURO_STATUS_TERMINATED, WAIT_MS);
    rt_store_done(&f);
}

TEST(an_instance_its_deadline_ended_while_it_slept_rewinds_to_its_timer)
{
    rt_fixture f;
    setup(&f, "dl_rewind_sleep.db");
    rt_start(&f);
    start_with(&f, "s1", "Sleepy", NULL, 0, 300);
    check_timed_out(&f, "s1");
    /* the ending records why: reason "deadline" */
    duro_history *h = rt_history(&f, "s1");
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK(h->events[h->count - 1].reason != NULL &&
          strcmp(h->events[h->count - 1].reason, DURO_REASON_DEADLINE) == 0);
    uint64_t timer_event = h->events[h->count - 2].event_id;
    CHECK_EQ(h->events[h->count - 2].kind, DURO_EVENT_TIMER_CREATED);
    duro_history_free(h);
    /* the point before the deadline's ending is a boundary: the hour's
     * timer is armed again, and the new deadline ends it once more */
    duro_reset_options ro;
    duro_reset_options_init(&ro);
    int64_t next = wall_ms() + 400;
    ro.deadline_ms = next;
    duro_reset_result res;
    CHECK_OK(duro_client_rewind(f.client, "s1", &ro, &res));
    CHECK_EQ(res.to_event_id, timer_event);
    CHECK_EQ(res.timers, 1);
    CHECK_EQ(check_timed_out(&f, "s1"), next);
    h = rt_history(&f, "s1");
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_OK(duro_replay_history(f.reg, h, NULL));
    duro_history_free(h);
    rt_store_done(&f);
}

TEST(bad_deadlines_are_refused)
{
    rt_fixture f;
    setup(&f, "dl_bad.db");
    CHECK_OK(duro_client_create(f.url, &f.client));
    duro_start_options so;
    duro_start_options_init(&so);
    so.timeout_ms = -1;
    CHECK_EQ(duro_client_start(f.client, "x", "Busy", NULL, &so), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "timeout_ms is negative") != NULL);
    so.timeout_ms = 0;
    so.deadline_ms = -5;
    CHECK_EQ(duro_client_start(f.client, "x", "Busy", NULL, &so), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "deadline_ms is negative") != NULL);
    so.deadline_ms = wall_ms() + 1000;
    so.timeout_ms = 1000;
    CHECK_EQ(duro_client_start(f.client, "x", "Busy", NULL, &so), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "both") != NULL);
    so.deadline_ms = 0;
    so.timeout_ms = INT64_MAX;
    CHECK_EQ(duro_client_start(f.client, "x", "Busy", NULL, &so), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "year 9999") != NULL);
    /* nothing was created */
    CHECK_EQ(rt_status(&f, "x"), DURO_STATUS_NOT_FOUND);
    /* a caller built against options version 1 has no such fields: what
     * lies beyond them is not read */
    so.version = 1;
    so.deadline_ms = -5;
    so.timeout_ms = -5;
    CHECK_OK(duro_client_start(f.client, "v1", "Busy", NULL, &so));
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "v1", &info));
    CHECK_EQ(info->deadline_ms, 0);
    duro_free(info);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.timeout_ms = -1;
    CHECK_EQ(duro_registry_add_orchestration_ex(f.reg, "Neg", NULL, orch_busy,
                                                NULL, &oo),
             DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "timeout_ms is negative") != NULL);
    rt_store_done(&f);
}

TEST_MAIN(T(a_deadline_cancels_the_running_activity_and_fails_the_instance),
          T(a_deadline_ends_the_children_too),
          T(a_deadline_survives_a_restart_of_the_runtime),
          T(a_deadline_spans_continue_as_new),
          T(a_deadline_already_passed_ends_the_instance_without_its_code),
          T(an_instance_that_finishes_first_keeps_no_deadline_message),
          T(the_registration_gives_a_default_deadline),
          T(a_deadline_ends_a_suspended_instance_too),
          T(a_deadline_ends_a_cleanup_after_a_cancel),
          T(an_older_store_refuses_a_start_deadline_and_gets_no_registered_one),
          T(a_rewind_before_the_deadline_runs_under_the_same_deadline),
          T(a_reset_after_the_deadline_needs_a_new_one_or_none),
          T(an_instance_its_deadline_ended_while_it_slept_rewinds_to_its_timer),
          T(bad_deadlines_are_refused))
