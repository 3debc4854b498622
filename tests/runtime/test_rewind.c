/* test_rewind.c - reset and rewind end to end (issue 27): a Failed
 * instance rewound after its activity is fixed completes, keeping the
 * history before the failure; a reset to an event in the middle re-runs
 * the code from there with the code registered now; the refusals and bad
 * input; two resets of one execution racing (one wins), and a kill -9 in
 * the middle of resets (each all or nothing). Real runtime on a real store: a
 * SQLite file, or - built with REWIND_PG - a fresh schema on the PostgreSQL
 * server of the tests. Waits are deadline-based; nothing is asserted about
 * time. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef REWIND_PG
#define RT_STORE_PG
#endif
#include "rt_store.h"

#define WAIT_MS 30000

/* ------------------------------------------------------------------------
 * activities and orchestrations */

static _Atomic int fixed;      /* Flaky succeeds once set */
static _Atomic int echo_runs;  /* Echo calls */
static _Atomic int flaky_runs; /* Flaky calls */
static _Atomic int counter;    /* Count's last value */
static _Atomic int variant;    /* the code Steps runs: 1 or 2 */

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&echo_runs, 1);
    return duro_ok(out, in);
}

static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&flaky_runs, 1);
    if (!atomic_load(&fixed))
        return duro_fail(out, "flaky is broken");
    char buf[64];
    snprintf(buf, sizeof(buf), "fixed-%s", in);
    return duro_ok(out, buf);
}

static int act_count(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", atomic_fetch_add(&counter, 1) + 1);
    return duro_ok(out, buf);
}

/* a, then Flaky b, then c: a+b+c; fails when b does. */
static int orch_pay(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Echo", "a");
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, "a failed");
    duro_task *b = duro_call_activity(o, "Flaky", "b");
    if (duro_await(o, b) != DURO_OK)
        return duro_fail(out, duro_task_error(b));
    duro_task *c = duro_call_activity(o, "Echo", "c");
    if (duro_await(o, c) != DURO_OK)
        return duro_fail(out, "c failed");
    return duro_ok(out, duro_sprintf(o, "%s+%s+%s", duro_task_output(a),
                                     duro_task_output(b), duro_task_output(c)));
}

/* Count, then Echo of "v1" or, once the code changed, "v2". */
static int orch_steps(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *n = duro_call_activity(o, "Count", NULL);
    duro_await(o, n);
    duro_task *e =
        duro_call_activity(o, "Echo", atomic_load(&variant) == 2 ? "v2" : "v1");
    duro_await(o, e);
    return duro_ok(out, duro_sprintf(o, "%s/%s", duro_task_output(n),
                                     duro_task_output(e)));
}

/* Runs Pay as a child and returns its output; fails when it does. */
static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *kid = duro_call_sub_orchestration(
        o, "Pay", NULL, duro_sprintf(o, "%s-kid", duro_instance_id(o)), NULL);
    if (duro_await(o, kid) != DURO_OK)
        return duro_fail(out, duro_task_error(kid));
    return duro_ok(out, duro_sprintf(o, "parent:%s", duro_task_output(kid)));
}

/* Holds until cancelled (30 s at most), or returns at once once fixed. */
static int act_hold(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    if (atomic_load(&fixed))
        return duro_ok(out, "held");
    if (duro_activity_wait_cancelled(a, WAIT_MS))
        return duro_fail(out, "cancelled");
    return duro_ok(out, "not cancelled");
}

static int orch_hang(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Hold", in);
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

/* Waits for event "go", then echoes it. */
static int orch_wait(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *go = duro_wait_event(o, "go");
    duro_await(o, go);
    duro_task *e = duro_call_activity(o, "Echo", duro_task_output(go));
    duro_await(o, e);
    return duro_ok(out, duro_task_output(e));
}

static void setup(rt_fixture *f, const char *db)
{
    atomic_store(&fixed, 0);
    atomic_store(&echo_runs, 0);
    atomic_store(&flaky_runs, 0);
    atomic_store(&counter, 0);
    atomic_store(&variant, 1);
    rt_store_init(f, "rew", db);
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Pay", NULL, orch_pay, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Steps", NULL, orch_steps,
                                             NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Parent", NULL,
                                             orch_parent, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Hang", NULL, orch_hang, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Hold", act_hold, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Flaky", act_flaky, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Count", act_count, NULL));
}

static duro_history *history_of(rt_fixture *f, const char *id, uint64_t ex)
{
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(f->client, id, ex, &h));
    CHECK(h != NULL);
    return h;
}

/* duro_client_* fails with `code` and duro_errmsg() holds `text`. */
#define CHECK_REFUSED(call, code, text)                                        \
    do {                                                                       \
        CHECK_RC((call), (code));                                              \
        CHECK_MSG(strstr(duro_errmsg(), (text)) != NULL,                       \
                  "'%s' does not say '%s'", duro_errmsg(), (text));            \
    } while (0)

/* ------------------------------------------------------------------------
 * tests */

TEST(rewind_retries_the_failed_activity_and_the_instance_completes)
{
    rt_fixture f;
    setup(&f, "rewind_pay.db");
    rt_start(&f);
    rt_start_instance(&f, "p1", "Pay", NULL);
    duro_instance_info *info = rt_wait(&f, "p1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    CHECK_EQ(info->execution_id, 1);
    duro_free(info);
    duro_history *before = history_of(&f, "p1", 1);
    /* Started, Scheduled a, Completed a, Scheduled b, Failed b, Failed */
    CHECK_EQ(before->count, 6);
    CHECK_EQ(before->events[4].kind, DURO_EVENT_ACTIVITY_FAILED);
    CHECK_EQ(atomic_load(&echo_runs), 1);

    /* Fixed; a dry run says where it would go and changes nothing. */
    atomic_store(&fixed, 1);
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.dry_run = 1;
    duro_reset_result r;
    CHECK_OK(duro_client_rewind(f.client, "p1", &o, &r));
    CHECK_EQ(r.to_event_id, 4);
    CHECK_EQ(r.activities, 1);
    CHECK_EQ(r.execution_id, 2);
    CHECK_EQ(rt_status(&f, "p1"), DURO_STATUS_FAILED);

    o.dry_run = 0;
    o.reason = "flaky fixed";
    o.requested_by = "ops";
    CHECK_OK(duro_client_rewind(f.client, "p1", &o, &r));
    info = rt_wait(&f, "p1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "a+fixed-b+c");
    CHECK_EQ(info->execution_id, 2);
    CHECK(info->error == NULL);
    duro_free(info);
    /* a ran once: the history before the failure was kept */
    CHECK_EQ(atomic_load(&echo_runs), 2); /* a, then c */
    CHECK_EQ(atomic_load(&flaky_runs), 2);

    duro_history *after = history_of(&f, "p1", 2);
    CHECK_INT(after->count, >=, 5);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(after->events[i].kind, before->events[i].kind);
        CHECK_EQ(after->events[i].timestamp_ms, before->events[i].timestamp_ms);
    }
    const duro_event *re = &after->events[4];
    CHECK_EQ(re->kind, DURO_EVENT_EXECUTION_RESET);
    CHECK_STR(re->reason, "flaky fixed");
    CHECK_STR(re->requested_by, "ops");
    CHECK_EQ(re->ref_execution, 1);
    CHECK_EQ(re->ref_event_id, 4);
    CHECK_EQ(re->flags, DURO_RESET_REWIND);
    CHECK_EQ(after->events[5].kind, DURO_EVENT_ACTIVITY_COMPLETED);
    CHECK_EQ(after->events[5].source_event_id, 4);
    duro_history_free(after);
    /* the failed execution stays readable, whole */
    duro_history *again = history_of(&f, "p1", 1);
    CHECK_EQ(again->count, 6);
    duro_history_free(again);
    duro_history_free(before);
    /* the reset execution replays without a store (ExecutionReset is an
     * input with no effect), and so does the exported document of both */
    duro_history *two = history_of(&f, "p1", 2);
    CHECK_OK(duro_replay_history(f.reg, two, NULL));
    duro_history_free(two);
    char *doc = NULL;
    CHECK_OK(duro_client_export_history(f.client, "p1", &doc));
    CHECK(strstr(doc, "\"kind\":\"ExecutionReset\"") != NULL);
    CHECK(strstr(doc, "\"ref_event_id\":4") != NULL);
    duro_replay_divergence div;
    int rrc = duro_replay_json(f.reg, doc, strlen(doc), NULL, &div);
    duro_free(doc);
    CHECK_OK(rrc);

    /* Completed now: a rewind is refused, a reset is not. */
    CHECK_REFUSED(duro_client_rewind(f.client, "p1", NULL, NULL),
                  DURO_INVALID_STATE, "only a Failed instance");
    rt_store_done(&f);
}

TEST(rewind_of_a_parent_rewinds_its_failed_child)
{
    rt_fixture f;
    setup(&f, "rewind_parent.db");
    rt_start(&f);
    rt_start_instance(&f, "par", "Parent", NULL);
    duro_instance_info *info = rt_wait(&f, "par", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    duro_free(info);
    info = rt_wait(&f, "par-kid", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    duro_free(info);

    atomic_store(&fixed, 1);
    duro_reset_result r;
    CHECK_OK(duro_client_rewind(f.client, "par", NULL, &r));
    CHECK_EQ(r.children, 1);
    info = rt_wait(&f, "par", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "parent:a+fixed-b+c");
    CHECK_EQ(info->execution_id, 2);
    duro_free(info);
    info = rt_wait(&f, "par-kid", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_EQ(info->execution_id, 2);
    duro_free(info);
    /* the child kept its first activity: a ran once, then c */
    CHECK_EQ(atomic_load(&echo_runs), 2);
    rt_store_done(&f);
}

TEST(a_terminated_instance_reset_runs_its_cancelled_activity_again)
{
    rt_fixture f;
    setup(&f, "rewind_term.db");
    rt_start(&f);
    rt_start_instance(&f, "h1", "Hang", NULL);
    WAIT_UNTIL(rt_count_events(&f, "h1", DURO_EVENT_ACTIVITY_SCHEDULED) == 1,
               WAIT_MS);
    CHECK_OK(duro_client_terminate(f.client, "h1", "stuck", "ops"));
    duro_instance_info *info = rt_wait(&f, "h1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    duro_free(info);
    /* Started, Scheduled, its cancel request, Terminated: the last good
     * point is before the terminate's events */
    atomic_store(&fixed, 1);
    duro_reset_options o;
    duro_reset_options_init(&o);
    duro_reset_result r;
    CHECK_OK(duro_client_reset(f.client, "h1", &o, &r));
    CHECK_EQ(r.to_event_id, 2);
    CHECK_EQ(r.activities, 1);
    info = rt_wait(&f, "h1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "held");
    duro_free(info);
    rt_store_done(&f);
}

/* Terminated before it began (a delayed start, decided in the request's
 * transaction): history is Started and Terminated, and no code ever ran.
 * Reset to its start, nothing is pending, yet its code must run: the
 * reset's resume makes a turn run at once. */
TEST(an_instance_terminated_before_it_began_runs_its_code_after_a_reset)
{
    rt_fixture f;
    setup(&f, "rewind_unbegun.db");
    rt_start(&f);
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = 3600 * 1000;
    CHECK_OK(duro_client_start(f.client, "late", "Pay", NULL, &so));
    CHECK_OK(duro_client_terminate(f.client, "late", "never mind", "ops"));
    duro_instance_info *info = rt_wait(&f, "late", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_TERMINATED);
    duro_free(info);
    CHECK_EQ(rt_count_events(&f, "late", DURO_EVENT_ACTIVITY_SCHEDULED), 0);
    atomic_store(&fixed, 1);
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.to_event_id = 1;
    duro_reset_result r;
    CHECK_OK(duro_client_reset(f.client, "late", &o, &r));
    CHECK_EQ(r.activities + r.timers + r.children, 0);
    info = rt_wait(&f, "late", WAIT_MS);
    CHECK_MSG(info->status == DURO_STATUS_COMPLETED, "ended %s: %s",
              duro_status_name(info->status), info->error ? info->error : "");
    CHECK_STR(info->output, "a+fixed-b+c");
    duro_free(info);
    rt_store_done(&f);
}

TEST(reset_to_an_event_in_the_middle_reruns_the_current_code_from_there)
{
    rt_fixture f;
    setup(&f, "rewind_steps.db");
    rt_start(&f);
    rt_start_instance(&f, "s1", "Steps", NULL);
    duro_instance_info *info = rt_wait(&f, "s1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "1/v1");
    duro_free(info);

    /* The code changes after Count; reset to just after Count was
     * scheduled (event 2): Count runs again, then the new code. */
    atomic_store(&variant, 2);
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.to_event_id = 2;
    o.execution_id = 1;
    o.requested_by = "dev";
    duro_reset_result r;
    CHECK_OK(duro_client_reset(f.client, "s1", &o, &r));
    CHECK_EQ(r.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(r.to_event_id, 2);
    CHECK_EQ(r.activities, 1);
    info = rt_wait(&f, "s1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "2/v2");
    CHECK_EQ(info->execution_id, 2);
    duro_free(info);
    duro_history *h = history_of(&f, "s1", 2);
    const duro_event *re = rt_find_event(h, DURO_EVENT_EXECUTION_RESET, 0);
    CHECK(re != NULL && re->event_id == 3 && re->flags == 0);
    CHECK_STR(re->requested_by, "dev");
    CHECK(re->reason == NULL);
    duro_history_free(h);

    /* A reset of an execution that is no longer current is refused: the
     * compare-and-set of a reset that came second. */
    CHECK_REFUSED(duro_client_reset(f.client, "s1", &o, NULL),
                  DURO_INVALID_STATE, "current execution is 2");
    /* Reset again, of execution 2, to its very start: Count and Echo run
     * again; the reset of a reset keeps its ExecutionReset. */
    o.execution_id = 2;
    o.to_event_id = 3;
    CHECK_OK(duro_client_reset(f.client, "s1", &o, &r));
    info = rt_wait(&f, "s1", WAIT_MS);
    CHECK_EQ(info->execution_id, 3);
    CHECK_STR(info->output, "3/v2");
    duro_free(info);
    rt_store_done(&f);
}

TEST(reset_refuses_what_could_not_replay_and_bad_input)
{
    rt_fixture f;
    setup(&f, "rewind_refusals.db");
    rt_start(&f);
    rt_start_instance(&f, "w1", "Wait", NULL);
    rt_wait_status(&f, "w1", DURO_STATUS_RUNNING, WAIT_MS);
    WAIT_UNTIL(rt_count_events(&f, "w1", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    duro_reset_options o;
    duro_reset_options_init(&o);
    /* a live instance */
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL),
                  DURO_INVALID_STATE, "is Running");
    CHECK_REFUSED(duro_client_rewind(f.client, "w1", &o, NULL),
                  DURO_INVALID_STATE, "only a Failed instance");
    CHECK_OK(duro_client_raise_event(f.client, "w1", "go", "\"hi\""));
    duro_instance_info *info = rt_wait(&f, "w1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    duro_free(info);
    /* Started, Subscribed, Raised, Scheduled, Completed, Completed */
    o.to_event_id = 3; /* inside a turn: Scheduled answers Raised */
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL), DURO_INVALID,
                  "inside a turn");
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL), DURO_INVALID,
                  "events 2 and 4");
    o.to_event_id = 99;
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL), DURO_NOT_FOUND,
                  "has no event 99");
    o.to_event_id = 6;
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL), DURO_INVALID,
                  "ending");
    o.to_event_id = 2;
    o.execution_id = 7; /* an event of another execution */
    CHECK_REFUSED(duro_client_reset(f.client, "w1", &o, NULL),
                  DURO_INVALID_STATE, "current execution is 1");
    o.execution_id = 0;
    /* bad input */
    CHECK_RC(duro_client_reset(NULL, "w1", &o, NULL), DURO_INVALID);
    CHECK_RC(duro_client_reset(f.client, NULL, &o, NULL), DURO_INVALID);
    CHECK_RC(duro_client_reset(f.client, "", &o, NULL), DURO_INVALID);
    CHECK_REFUSED(duro_client_reset(f.client, "ghost", &o, NULL),
                  DURO_NOT_FOUND, "does not exist");
    CHECK_REFUSED(duro_client_rewind(f.client, "w1", &o, NULL), DURO_INVALID,
                  "to_event_id must be 0");
    duro_reset_options bad;
    memset(&bad, 0, sizeof(bad));
    CHECK_RC(duro_client_reset(f.client, "w1", &bad, NULL), DURO_INVALID);
    /* nothing changed */
    CHECK_EQ(rt_status(&f, "w1"), DURO_STATUS_COMPLETED);
    duro_history *h = history_of(&f, "w1", 0);
    CHECK_EQ(h->execution_id, 1);
    duro_history_free(h);

    /* The event subscription of the kept point simply waits again. */
    o.to_event_id = 2;
    CHECK_OK(duro_client_reset(f.client, "w1", &o, NULL));
    rt_wait_status(&f, "w1", DURO_STATUS_RUNNING, WAIT_MS);
    CHECK_OK(duro_client_raise_event(f.client, "w1", "go", "\"again\""));
    info = rt_wait(&f, "w1", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
    CHECK_STR(info->output, "\"again\"");
    duro_free(info);
    rt_store_done(&f);
}

TEST(rewind_by_filter_with_a_dry_run)
{
    rt_fixture f;
    setup(&f, "rewind_matching.db");
    rt_start(&f);
    rt_start_instance(&f, "m1", "Pay", NULL);
    rt_start_instance(&f, "m2", "Pay", NULL);
    rt_start_instance(&f, "m3", "Steps", NULL);
    for (int i = 1; i <= 3; i++) {
        char id[8];
        snprintf(id, sizeof(id), "m%d", i);
        duro_free(rt_wait(&f, id, WAIT_MS));
    }
    duro_bulk_filter filter;
    memset(&filter, 0, sizeof(filter));
    filter.name = "Pay";
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.dry_run = 1;
    duro_reset_list *l = NULL;
    CHECK_OK(duro_client_reset_matching(f.client, &filter, 1, &o, 0, &l));
    CHECK_EQ(l->count, 2);
    CHECK_EQ(l->reset, 2);
    CHECK_STR(l->items[0].instance_id, "m1");
    CHECK_STR(l->items[1].instance_id, "m2");
    CHECK_EQ(l->items[0].result.to_event_id, 4);
    duro_reset_list_free(l);
    CHECK_EQ(rt_status(&f, "m1"), DURO_STATUS_FAILED);

    atomic_store(&fixed, 1);
    o.dry_run = 0;
    o.requested_by = "ops";
    /* Completed ones too: m3 is refused by the rewind, the others go */
    filter.name = NULL;
    filter.status_mask =
        (1u << DURO_STATUS_FAILED) | (1u << DURO_STATUS_COMPLETED);
    CHECK_OK(duro_client_reset_matching(f.client, &filter, 1, &o, 0, &l));
    CHECK_EQ(l->count, 3);
    CHECK_EQ(l->reset, 2);
    CHECK_EQ(l->items[2].rc, DURO_INVALID_STATE);
    CHECK(l->items[2].message != NULL &&
          strstr(l->items[2].message, "only a Failed") != NULL);
    duro_reset_list_free(l);
    for (int i = 1; i <= 2; i++) {
        char id[8];
        snprintf(id, sizeof(id), "m%d", i);
        duro_instance_info *info = rt_wait(&f, id, WAIT_MS);
        CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
        CHECK_STR(info->output, "a+fixed-b+c");
        duro_free(info);
    }
    rt_store_done(&f);
}

/* Two resets of the same execution at once: the compare-and-set lets
 * exactly one win; the other is refused, changing nothing. */
typedef struct racer {
    rt_fixture *f;
    pthread_barrier_t *go;
    int rc;
} racer;

static void *race_reset(void *arg)
{
    racer *r = arg;
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.execution_id = 1;
    o.to_event_id = 2;
    pthread_barrier_wait(r->go);
    r->rc = duro_client_reset(r->f->client, "race", &o, NULL);
    return NULL;
}

TEST(two_resets_of_one_execution_racing_one_wins)
{
    rt_fixture f;
    setup(&f, "rewind_race.db");
    rt_start(&f);
    rt_start_instance(&f, "race", "Pay", NULL);
    duro_free(rt_wait(&f, "race", WAIT_MS));
    rt_stop(&f); /* nothing runs the reset instance meanwhile */
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    racer a = {&f, &go, -1}, b = {&f, &go, -1};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, race_reset, &a) == 0);
    CHECK(pthread_create(&tb, NULL, race_reset, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&go);
    CHECK_MSG((a.rc == DURO_OK) != (b.rc == DURO_OK),
              "one reset must win and one be refused: %s and %s",
              duro_errname(a.rc), duro_errname(b.rc));
    CHECK_EQ(a.rc == DURO_OK ? b.rc : a.rc, DURO_INVALID_STATE);
    duro_instance_info *info = NULL;
    CHECK_OK(duro_client_get_status(f.client, "race", &info));
    CHECK_EQ(info->execution_id, 2);
    duro_free(info);
    duro_history *h = history_of(&f, "race", 2);
    CHECK_EQ(h->count, 3); /* Started, Scheduled a, ExecutionReset */
    duro_history_free(h);
    rt_store_done(&f);
}

#ifndef REWIND_PG
#define KILL_INSTANCES 120

/* The child of a kill round: rewinds kill-0 .. kill-119 in turn, writing a
 * byte to `out` after each; the parent kills it at some point. */
static void rewind_all(const char *url, int out)
{
    duro_client *c = NULL;
    if (duro_client_create(url, &c) != DURO_OK)
        _exit(3);
    for (int i = 0; i < KILL_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kill-%d", i);
        if (duro_client_rewind(c, id, NULL, NULL) != DURO_OK)
            _exit(4);
        if (write(out, "r", 1) != 1)
            _exit(5);
    }
    _exit(0);
}

/* kill -9 while another process rewinds instance after instance: every
 * instance is then either untouched (Failed at execution 1, nothing of
 * execution 2) or rewound whole (Running at execution 2, its history and
 * its activity's row there) - never a part. */
TEST(a_kill_during_resets_leaves_each_whole_or_untouched)
{
    rt_fixture f;
    setup(&f, "rewind_kill.db");
    rt_start(&f);
    for (int i = 0; i < KILL_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kill-%d", i);
        rt_start_instance(&f, id, "Pay", NULL);
    }
    for (int i = 0; i < KILL_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kill-%d", i);
        duro_free(rt_wait(&f, id, WAIT_MS));
    }
    rt_stop(&f);
    duro_client_destroy(f.client);
    f.client = NULL;

    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        rewind_all(f.url, fds[1]);
    }
    close(fds[1]);
    /* let a few rewinds commit, then kill it inside a later one */
    char got;
    int done = 0;
    while (done < 7 && read(fds[0], &got, 1) == 1)
        done++;
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    close(fds[0]);
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "the rewinding process ended before the kill (status %d)", st);

    CHECK_OK(duro_client_create(f.url, &f.client));
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &p, &e), DURO_OK, &e);
    int rewound = 0;
    for (int i = 0; i < KILL_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kill-%d", i);
        duro_instance_info *info = NULL;
        CHECK_OK(duro_client_get_status(f.client, id, &info));
        uint64_t rows = 99;
        CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, id, &rows, &e),
                  DURO_OK, &e);
        duro_history *two = NULL;
        int hrc = duro_client_read_history(f.client, id, 2, &two);
        if (info->execution_id == 2) {
            rewound++;
            CHECK_OK(hrc);
            CHECK_EQ(info->status, DURO_STATUS_RUNNING);
            CHECK_EQ(two->count, 5);
            CHECK_EQ(two->events[4].kind, DURO_EVENT_EXECUTION_RESET);
            CHECK_EQ(rows, 1);
        } else {
            CHECK_EQ(info->execution_id, 1);
            CHECK_EQ(info->status, DURO_STATUS_FAILED);
            CHECK_RC(hrc, DURO_NOT_FOUND); /* no execution 2 at all */
            CHECK_EQ(rows, 0);
        }
        duro_history_free(two);
        duro_free(info);
    }
    CHECK_INT(rewound, >=, 7);
    CHECK_INT(rewound, <, KILL_INSTANCES);
    duro_provider_close(p);

    /* what the kill left runs on: the rewound ones fail again */
    rt_start(&f);
    for (int i = 0; i < KILL_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kill-%d", i);
        duro_instance_info *info = rt_wait(&f, id, WAIT_MS);
        CHECK_EQ(info->status, DURO_STATUS_FAILED);
        duro_free(info);
    }
    rt_store_done(&f);
}
#define KILL_CASE , T(a_kill_during_resets_leaves_each_whole_or_untouched)
#else
#define KILL_CASE
#endif

TEST_MAIN(T(rewind_retries_the_failed_activity_and_the_instance_completes),
          T(rewind_of_a_parent_rewinds_its_failed_child),
          T(a_terminated_instance_reset_runs_its_cancelled_activity_again),
          T(an_instance_terminated_before_it_began_runs_its_code_after_a_reset),
          T(reset_to_an_event_in_the_middle_reruns_the_current_code_from_there),
          T(reset_refuses_what_could_not_replay_and_bad_input),
          T(rewind_by_filter_with_a_dry_run),
          T(two_resets_of_one_execution_racing_one_wins) KILL_CASE)
