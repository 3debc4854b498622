/* test_utf8.c - duro's text rule end to end: text that is not valid UTF-8
 * is refused where it enters duro (client calls, orchestration context
 * calls, activity and orchestration results), with DURO_INVALID or a
 * non-retryable failure naming the field and the byte, so no store ever
 * refuses it later: an activity that returns such bytes fails once, in
 * history, instead of running max_attempts times and failing as poison,
 * and nothing invalid is ever stored. Real runtime on a real store: a
 * SQLite file, or - built with UTF8_PG - a fresh schema on the PostgreSQL
 * server of the tests (which refuses invalid UTF-8 itself, SQLSTATE
 * 22021). Waits are deadline-based. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef UTF8_PG
#define RT_STORE_PG
#endif
#include "rt_store.h"

#define WAIT_MS 30000

/* ------------------------------------------------------------------------
 * what the store holds */

/* 1 when s is NULL or valid UTF-8 throughout, decided byte by byte here
 * (not by the library's validator, which is what is being tested). */
static int is_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p == NULL)
        return 1;
    while (*p) {
        unsigned c = *p, n, cp;
        if (c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            n = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            n = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            n = 4, cp = c & 0x07;
        else
            return 0;
        for (unsigned i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += n;
    }
    return 1;
}

#define CHECK_UTF8(s, what)                                                    \
    CHECK_MSG(is_utf8(s), "%s is stored and not UTF-8", what)

/* Every text field of every instance and of every event of every
 * execution is valid UTF-8: nothing invalid was stored. */
static void check_store_is_utf8(rt_fixture *f)
{
    duro_instance_list *list = NULL;
    CHECK_OK(duro_client_list(f->client, NULL, &list));
    if (list == NULL)
        return;
    for (size_t i = 0; i < list->count; i++) {
        const duro_instance_info *in = &list->items[i];
        CHECK_UTF8(in->instance_id, "an instance id");
        CHECK_UTF8(in->name, in->instance_id);
        CHECK_UTF8(in->version, in->instance_id);
        CHECK_UTF8(in->output, in->instance_id);
        CHECK_UTF8(in->error, in->instance_id);
        CHECK_UTF8(in->custom_status, in->instance_id);
        CHECK_UTF8(in->parent_instance, in->instance_id);
        duro_instance_info *st = NULL;
        CHECK_OK(duro_client_get_status(f->client, in->instance_id, &st));
        if (st != NULL) {
            CHECK_UTF8(st->cancel_reason, in->instance_id);
            CHECK_UTF8(st->cancelled_by, in->instance_id);
            CHECK_UTF8(st->last_problem, in->instance_id);
        }
        duro_free(st);
        for (uint64_t x = 1; x <= in->execution_id; x++) {
            duro_history *h = NULL;
            if (duro_client_read_history(f->client, in->instance_id, x, &h) !=
                DURO_OK)
                continue; /* pruned */
            for (size_t k = 0; k < h->count; k++) {
                const duro_event *ev = &h->events[k];
                CHECK_UTF8(ev->name, in->instance_id);
                CHECK_UTF8(ev->version, in->instance_id);
                CHECK_UTF8(ev->payload, in->instance_id);
                CHECK_UTF8(ev->error, in->instance_id);
                CHECK_UTF8(ev->reason, in->instance_id);
                CHECK_UTF8(ev->requested_by, in->instance_id);
                CHECK_UTF8(ev->ref_instance, in->instance_id);
            }
            duro_history_free(h);
        }
    }
    duro_instance_list_free(list);
}

/* ------------------------------------------------------------------------
 * activities and orchestrations */

static _Atomic int runs_bad_output, runs_bad_error, runs_bad_failf;

/* "caf" then 0xE9, a Latin-1 e-acute: byte 3 is not UTF-8. */
static int act_bad_output(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&runs_bad_output, 1);
    return duro_ok(out, "caf\xe9");
}

/* A failure message cut in the middle of a character (a truncated
 * buffer): byte 6 begins a sequence the end cuts short. */
static int act_bad_error(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&runs_bad_error, 1);
    return duro_fail(out, "boom: \xe2\x82");
}

/* printf-style, a surrogate (CESU-8) at byte 5. */
static int act_bad_failf(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&runs_bad_failf, 1);
    return duro_failf(out, "code %s", "\xed\xa0\x80");
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* Calls the activity its input names under a retry policy of 5 attempts
 * and fails with the task's error and category. */
static int orch_call(duro_orch *o, const char *in, duro_result *out)
{
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 5;
    p.initial_delay_ms = 1;
    duro_task *t = duro_call_activity_with_retry(o, in, "x", &p);
    if (duro_await(o, t) == DURO_OK)
        return duro_ok(out, duro_task_output(t));
    return duro_fail_with(out, duro_task_category(t), duro_task_error(t));
}

static int orch_bad_output(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    return duro_ok(out, "\xff output");
}

/* Sets a custom status holding a lone surrogate, then goes on as if all
 * were well: the instance fails all the same. */
static int orch_bad_status(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_set_custom_status(o, "step \xed\xb0\x80");
    duro_task *t = duro_call_activity(o, "Echo", "after");
    duro_await(o, t);
    return duro_ok(out, "done");
}

static int orch_bad_continue(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    return duro_continue_as_new(o, out, "next \xf4\x90\x80\x80");
}

/* Every context call given text that is not UTF-8 is refused with
 * DURO_INVALID naming the field; the output lists what was not. */
static int orch_bad_calls(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    static const char *const field[] = {
        "activity 'Echo' input",
        "activity name",
        "activity 'Echo' input",
        "activity name",
        "child orchestration name",
        "child orchestration 'Child' version",
        "child orchestration 'Child' instance id",
        "child orchestration 'Child' input",
        "event name",
    };
    duro_task *t[] = {
        duro_call_activity(o, "Echo", "\xc0\xaf"),
        duro_call_activity(o, "Ec\xff", "x"),
        duro_call_activity_with_retry(o, "Echo", "a\x80", &p),
        duro_call_activity_with_retry(o, "\xfe", "a", &p),
        duro_call_sub_orchestration(o, "Ch\xc1\xbf", NULL, NULL, NULL),
        duro_call_sub_orchestration(o, "Child", "v\xff", NULL, NULL),
        duro_call_sub_orchestration(o, "Child", NULL, "kid\xff", NULL),
        duro_call_sub_orchestration(o, "Child", NULL, "kid-1", "\xe0\x80\x80"),
        duro_wait_event(o, "ev\xff"),
    };
    const char *wrong = NULL;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]) && wrong == NULL; i++) {
        int rc = duro_await(o, t[i]);
        const char *e = duro_task_error(t[i]);
        if (rc != DURO_INVALID || e == NULL || strstr(e, field[i]) == NULL ||
            strstr(e, "is not valid UTF-8 at byte") == NULL ||
            duro_task_category(t[i]) != DURO_CATEGORY_CONFIGURATION ||
            strstr(duro_errmsg(), field[i]) == NULL)
            wrong = duro_sprintf(o, "call %zu: %s, '%s'", i, duro_errname(rc),
                                 e ? e : "(null)");
    }
    const char *bad_start[][3] = {{"Ch\xff", NULL, NULL},
                                  {"Child", "\xff", NULL},
                                  {"Child", NULL, "\xff"}};
    for (size_t i = 0; i < 3 && wrong == NULL; i++) {
        int rc = duro_start_orchestration(o, bad_start[i][0], NULL,
                                          bad_start[i][1], bad_start[i][2]);
        if (rc != DURO_INVALID || strstr(duro_errmsg(), "UTF-8") == NULL)
            wrong = duro_sprintf(o, "start %zu: %s", i, duro_errname(rc));
    }
    if (wrong != NULL)
        return duro_fail(out, wrong);
    /* the context still works after the refusals */
    duro_task *ok = duro_call_activity(o, "Echo", "caf\xc3\xa9");
    if (duro_await(o, ok) != DURO_OK)
        return duro_fail(out, "Echo failed");
    return duro_ok(out, duro_task_output(ok));
}

/* Passes its input to Echo and ends as Echo did. */
static int orch_pass_on(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Echo", in);
    if (duro_await(o, t) == DURO_OK)
        return duro_ok(out, duro_task_output(t));
    return duro_fail_with(out, duro_task_category(t), duro_task_error(t));
}

static int orch_child(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* Waits for event "go" and returns its payload. */
static int orch_waiter(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_wait_event(o, "go");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, "no go");
    return duro_ok(out, duro_task_output(t));
}

static void register_all(rt_fixture *f)
{
    CHECK_OK(
        duro_registry_add_activity(f->reg, "BadOutput", act_bad_output, NULL));
    CHECK_OK(
        duro_registry_add_activity(f->reg, "BadError", act_bad_error, NULL));
    CHECK_OK(
        duro_registry_add_activity(f->reg, "BadFailf", act_bad_failf, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f->reg, "Call", NULL, orch_call, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "BadOutputOrch", NULL,
                                             orch_bad_output, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "BadStatus", NULL,
                                             orch_bad_status, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "BadContinue", NULL,
                                             orch_bad_continue, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "BadCalls", NULL,
                                             orch_bad_calls, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Child", NULL, orch_child,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "PassOn", NULL,
                                             orch_pass_on, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Waiter", NULL,
                                             orch_waiter, NULL));
}

/* ------------------------------------------------------------------------
 * tests */

/* Checks that instance `id` (orchestration Call of `activity`) failed
 * with `expected` as its error, category configuration, after exactly one
 * run of the activity, recorded as one ActivityScheduled and one
 * ActivityFailed saying the same. */
static void check_failed_once(rt_fixture *f, const char *id,
                              const char *activity, const char *expected,
                              _Atomic int *runs)
{
    rt_start_instance(f, id, "Call", activity);
    duro_instance_info *info = rt_wait(f, id, WAIT_MS);
    if (info == NULL)
        return;
    CHECK_MSG(info->status == DURO_STATUS_FAILED, "%s is %s (%s)", id,
              duro_status_name(info->status),
              info->output ? "an output" : "no output");
    CHECK_STR(info->error, expected);
    CHECK_EQ(info->category, DURO_CATEGORY_CONFIGURATION);
    duro_free(info);
    CHECK_EQ(atomic_load(runs), 1);
    duro_history *h = rt_history(f, id);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 1);
    const duro_event *ev = rt_find_event(h, DURO_EVENT_ACTIVITY_FAILED, 0);
    if (ev != NULL) {
        CHECK_STR(ev->error, expected);
        CHECK_EQ(ev->category, DURO_CATEGORY_CONFIGURATION);
    }
    duro_history_free(h);
}

/* An activity whose output, failure message or printf-style failure is not
 * UTF-8 fails at once - one run, one ActivityFailed, category
 * configuration (a retry policy does not retry it), the field and the byte
 * named - instead of being refused by the store on every ack (PostgreSQL:
 * max_attempts runs, then a poison failure that named no cause) or stored
 * as it is (SQLite). */
TEST(an_activity_returning_invalid_utf8_fails_once_naming_the_cause)
{
    rt_fixture f;
    rt_store_init(&f, "utf8", "act.db");
    register_all(&f);
    rt_start(&f);
    atomic_store(&runs_bad_output, 0);
    atomic_store(&runs_bad_error, 0);
    atomic_store(&runs_bad_failf, 0);
    check_failed_once(&f, "out-1", "BadOutput",
                      "activity 'BadOutput' output is not valid UTF-8 at "
                      "byte 3 (0xE9)",
                      &runs_bad_output);
    check_failed_once(&f, "err-1", "BadError",
                      "activity 'BadError' failure message is not valid "
                      "UTF-8 at byte 6 (0xE2)",
                      &runs_bad_error);
    check_failed_once(&f, "failf-1", "BadFailf",
                      "activity 'BadFailf' failure message is not valid "
                      "UTF-8 at byte 5 (0xED)",
                      &runs_bad_failf);
    /* the instances ended: nothing runs again */
    CHECK_EQ(atomic_load(&runs_bad_output), 1);
    check_store_is_utf8(&f);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.activities_failed, 3);
    rt_store_done(&f);
}

/* An orchestration whose output, custom status or continue-as-new input
 * is not UTF-8 fails with a reason naming the field and the byte. */
TEST(an_orchestration_with_invalid_utf8_results_fails_with_a_clear_reason)
{
    rt_fixture f;
    rt_store_init(&f, "utf8", "orch.db");
    register_all(&f);
    rt_start(&f);
    static const struct {
        const char *id, *orch, *error;
    } cases[] = {
        {"o-out", "BadOutputOrch",
         "orchestration 'BadOutputOrch' output is not valid UTF-8 at byte 0 "
         "(0xFF)"},
        {"o-status", "BadStatus",
         "orchestration 'BadStatus' custom status is not valid UTF-8 at "
         "byte 5 (0xED)"},
        {"o-continue", "BadContinue",
         "orchestration 'BadContinue' continue-as-new input is not valid "
         "UTF-8 at byte 5 (0xF4)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        rt_start_instance(&f, cases[i].id, cases[i].orch, NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        duro_instance_info *info = rt_wait(&f, cases[i].id, WAIT_MS);
        if (info == NULL)
            continue;
        CHECK_MSG(info->status == DURO_STATUS_FAILED, "%s is %s", cases[i].id,
                  duro_status_name(info->status));
        CHECK_STR(info->error, cases[i].error);
        CHECK_EQ(info->category, DURO_CATEGORY_CONFIGURATION);
        CHECK(info->custom_status == NULL);
        CHECK_EQ(info->execution_id, 1);
        duro_free(info);
        duro_history *h = rt_history(&f, cases[i].id);
        const duro_event *ev =
            rt_find_event(h, DURO_EVENT_ORCHESTRATION_FAILED, 0);
        CHECK(ev != NULL && ev->error != NULL &&
              strcmp(ev->error, cases[i].error) == 0);
        duro_history_free(h);
    }
    /* the activity scheduled after the bad custom status was cancelled
     * with the failure, or never scheduled */
    check_store_is_utf8(&f);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.orchestrations_failed, 3);
    rt_store_done(&f);
}

/* Activity, retry, child, detached start and event-wait calls given text
 * that is not UTF-8 are refused in the code (a task failed with
 * DURO_INVALID, category configuration, naming the field) and record
 * nothing; the instance goes on. */
TEST(context_calls_refuse_invalid_utf8_and_record_nothing)
{
    rt_fixture f;
    rt_store_init(&f, "utf8", "calls.db");
    register_all(&f);
    rt_start(&f);
    rt_start_instance(&f, "calls-1", "BadCalls", NULL);
    duro_instance_info *info = rt_wait(&f, "calls-1", WAIT_MS);
    if (info != NULL) {
        CHECK_MSG(info->status == DURO_STATUS_COMPLETED, "%s: %s",
                  duro_status_name(info->status),
                  info->error ? info->error : "");
        CHECK_STR(info->output, "caf\xc3\xa9");
    }
    duro_free(info);
    duro_history *h = rt_history(&f, "calls-1");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED), 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_EVENT_SUBSCRIBED), 0);
    duro_history_free(h);
    CHECK_EQ(rt_status(&f, "kid-1"), DURO_STATUS_NOT_FOUND);
    check_store_is_utf8(&f);
    rt_store_done(&f);
}

/* Client calls refuse text that is not UTF-8 with DURO_INVALID, naming
 * the field and the byte, and change nothing: no instance, no event, no
 * request. */
TEST(client_calls_refuse_invalid_utf8_and_change_nothing)
{
    rt_fixture f;
    rt_store_init(&f, "utf8", "client.db");
    register_all(&f);
    rt_start(&f);
    duro_client *c = f.client;

    /* starts */
    CHECK_RC(duro_client_start(c, "s-1", "Child", "{\"k\":\"\xe9\"}", NULL),
             DURO_INVALID);
    CHECK_STR(duro_errmsg(), "input is not valid UTF-8 at byte 6 (0xE9)");
    CHECK_RC(duro_client_start(c, "s-\xff", "Child", NULL, NULL), DURO_INVALID);
    CHECK_STR(duro_errmsg(), "instance id is not valid UTF-8 at byte 2 (0xFF)");
    CHECK_RC(duro_client_start(c, "s-2", "Ch\xc0\xaf", NULL, NULL),
             DURO_INVALID);
    CHECK_STR(duro_errmsg(),
              "orchestration name is not valid UTF-8 at byte 2 (0xC0)");
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "1\xed\xa0\x80";
    CHECK_RC(duro_client_start(c, "s-3", "Child", NULL, &so), DURO_INVALID);
    CHECK_STR(duro_errmsg(),
              "orchestration version is not valid UTF-8 at byte 1 (0xED)");
    CHECK_EQ(rt_status(&f, "s-1"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "s-2"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "s-3"), DURO_STATUS_NOT_FOUND);

    /* events, to an instance that waits for one */
    rt_start_instance(&f, "w-1", "Waiter", NULL);
    rt_wait_status(&f, "w-1", DURO_STATUS_RUNNING, WAIT_MS);
    CHECK_RC(duro_client_raise_event(c, "w-1", "go", "\x80"), DURO_INVALID);
    CHECK_STR(duro_errmsg(), "event payload is not valid UTF-8 at byte 0 "
                             "(0x80)");
    CHECK_RC(duro_client_raise_event(c, "w-1", "g\xf5", "x"), DURO_INVALID);
    CHECK_STR(duro_errmsg(), "event name is not valid UTF-8 at byte 1 (0xF5)");
    CHECK_RC(duro_client_raise_event_once(c, "w-1", "go", "x", "id-\xff"),
             DURO_INVALID);
    CHECK_STR(duro_errmsg(), "event id is not valid UTF-8 at byte 3 (0xFF)");

    /* requests: reasons and requesters */
    CHECK_RC(duro_client_cancel(c, "w-1", "why \xff", NULL), DURO_INVALID);
    CHECK_STR(duro_errmsg(), "reason is not valid UTF-8 at byte 4 (0xFF)");
    CHECK_RC(duro_client_cancel(c, "w-1", NULL, "ops\xe2\x82"), DURO_INVALID);
    CHECK_STR(duro_errmsg(),
              "requested_by is not valid UTF-8 at byte 3 (0xE2)");
    CHECK_RC(duro_client_terminate(c, "w-1", "\xff", NULL), DURO_INVALID);
    CHECK_RC(duro_client_suspend(c, "w-1", NULL, "\xff"), DURO_INVALID);
    CHECK_RC(duro_client_resume(c, "w-1", "\xff", NULL), DURO_INVALID);
    const char *ids[] = {"w-1"};
    duro_cancel_result cr[1];
    CHECK_RC(duro_client_cancel_many(c, ids, 1, "\xff", NULL, cr),
             DURO_INVALID);
    duro_control_result xr[1];
    CHECK_RC(duro_client_control_many(c, DURO_CONTROL_TERMINATE, ids, 1, NULL,
                                      "\xff", xr),
             DURO_INVALID);
    duro_bulk_filter bf;
    memset(&bf, 0, sizeof(bf));
    bf.name = "Waiter";
    duro_bulk_result *br = NULL;
    CHECK_RC(duro_client_cancel_matching(c, &bf, "\xff", NULL, NULL, &br),
             DURO_INVALID);
    CHECK(br == NULL);
    CHECK_RC(duro_client_control_matching(c, DURO_CONTROL_SUSPEND, &bf, NULL,
                                          "\xff", NULL, &br),
             DURO_INVALID);
    CHECK(br == NULL);

    /* none of it happened: the instance still waits, no event, no
     * request */
    duro_instance_info *st = NULL;
    CHECK_OK(duro_client_get_status(c, "w-1", &st));
    if (st != NULL) {
        CHECK_EQ(st->status, DURO_STATUS_RUNNING);
        CHECK_EQ(st->cancel_requested_ms, 0);
    }
    duro_free(st);
    /* a valid event completes it, the only one delivered */
    CHECK_OK(duro_client_raise_event(c, "w-1", "go", "caf\xc3\xa9"));
    duro_instance_info *info = rt_wait(&f, "w-1", WAIT_MS);
    if (info != NULL) {
        CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
        CHECK_STR(info->output, "caf\xc3\xa9");
    }
    duro_free(info);
    duro_history *h = rt_history(&f, "w-1");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_EVENT_RAISED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED), 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_EXECUTION_SUSPENDED), 0);
    duro_history_free(h);
    check_store_is_utf8(&f);
    rt_store_done(&f);
}

#ifndef UTF8_PG
/* A SQLite store written by an earlier duro may hold text that is not
 * UTF-8, an instance in flight among it: its input, and an activity its
 * code scheduled with that input, recorded in history and queued. The
 * runtime runs it: the replay accepts the recorded command (refusing it
 * would be nondeterminism: a command refused live is never recorded, so
 * only an earlier duro's can match), the activity's output - the same
 * bytes - is refused, and the instance fails naming that cause. */
TEST(an_instance_stored_by_an_earlier_duro_replays_and_fails_clearly)
{
    rt_fixture f;
    rt_store_init(&f, "utf8", "legacy.db");
    register_all(&f);
    duro_provider *p = NULL;
    duro_error e;
    CHECK_OK(duro_provider_open(f.url, &p, &e));
    if (p == NULL)
        return;
    duro_work_item start = {.kind = DURO_WORK_START,
                            .instance_id = "legacy-1",
                            .name = "PassOn",
                            .payload = "caf\xe9"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &start, 0, &e), DURO_OK, &e);
    duro_orch_item *it = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, 30000, NULL, &it, &e), DURO_OK,
              &e);
    CHECK(it != NULL);
    if (it != NULL) {
        int64_t now = duro_now_ms();
        duro_event delta[2] = {
            {.kind = DURO_EVENT_ORCHESTRATION_STARTED,
             .event_id = 1,
             .timestamp_ms = now,
             .name = "PassOn",
             .payload = "caf\xe9"},
            {.kind = DURO_EVENT_ACTIVITY_SCHEDULED,
             .event_id = 2,
             .timestamp_ms = now,
             .name = "Echo",
             .payload = "caf\xe9",
             .attempt = 1},
        };
        duro_work_item work = {.kind = DURO_WORK_ACTIVITY_EXECUTE,
                               .instance_id = "legacy-1",
                               .execution_id = 1,
                               .source_id = 2,
                               .name = "Echo",
                               .payload = "caf\xe9",
                               .attempt = 1};
        duro_instance_meta meta = {.status = DURO_STATUS_RUNNING,
                                   .name = "PassOn"};
        duro_orch_ack ack = {.execution_id = 1,
                             .history_delta = delta,
                             .history_delta_count = 2,
                             .worker_items = &work,
                             .worker_item_count = 1,
                             .meta = &meta};
        CHECK_PRC(p->ack_orchestration_item(p, it->lock_token, &ack, &e),
                  DURO_OK, &e);
    }
    duro_orch_item_free(it);
    duro_provider_close(p);

    rt_start(&f);
    duro_instance_info *info = rt_wait(&f, "legacy-1", WAIT_MS);
    if (info != NULL) {
        CHECK_MSG(info->status == DURO_STATUS_FAILED, "legacy-1 is %s: %s",
                  duro_status_name(info->status),
                  info->error ? info->error : "");
        CHECK_STR(info->error, "activity 'Echo' output is not valid UTF-8 at "
                               "byte 3 (0xE9)");
        CHECK_EQ(info->category, DURO_CATEGORY_CONFIGURATION);
    }
    duro_free(info);
    duro_history *h = rt_history(&f, "legacy-1");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 1);
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.nondeterminism_errors, 0);
    rt_store_done(&f);
}
#define SQLITE_ONLY_TESTS                                                      \
    , T(an_instance_stored_by_an_earlier_duro_replays_and_fails_clearly)
#else
#define SQLITE_ONLY_TESTS
#endif

TEST_MAIN(
    T(an_activity_returning_invalid_utf8_fails_once_naming_the_cause),
    T(an_orchestration_with_invalid_utf8_results_fails_with_a_clear_reason),
    T(context_calls_refuse_invalid_utf8_and_record_nothing),
    T(client_calls_refuse_invalid_utf8_and_change_nothing) SQLITE_ONLY_TESTS)
