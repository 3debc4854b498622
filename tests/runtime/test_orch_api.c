/* test_orch_api.c - end-to-end tests of the public API around orchestration
 * code: the registry (duplicates, empty names, version selection and its
 * recording, user pointers), what functions return (results, failure
 * categories, bare return codes), the client (start, idempotence, delays,
 * limits, events, status through an instance's life, wait, history, list,
 * delete, prune) and the runtime handle (option validation, double start,
 * graceful shutdown, calls refused from runtime threads). Each test runs a
 * real runtime on its own SQLite file; the delayed start runs on a test
 * environment's virtual clock (duro_test_env). */
#include <pthread.h>
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * shared activities and orchestrations */

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* Returns its input. */
static int orch_echo(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* Waits for event "go" and returns its payload. */
static int orch_wait_go(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *e = duro_wait_event(o, "go");
    if (duro_await(o, e) != DURO_OK)
        return duro_fail(out, "wait failed");
    return duro_ok(out, duro_task_output(e));
}

/* Calls Echo with its input and returns the result. */
static int orch_call_echo(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Echo", in);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* The event of `kind` number `nth` (0-based) in h, or NULL. */
static char *repeat_char(char c, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ------------------------------------------------------------------------
 * registry */

TEST(registry_duplicates_and_empty_names)
{
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "O", NULL, orch_echo, NULL));
    /* NULL and "" are the same default version */
    CHECK_RC(duro_registry_add_orchestration(r, "O", "", orch_echo, NULL),
             DURO_ALREADY_EXISTS);
    CHECK_RC(duro_registry_add_orchestration(r, "O", NULL, orch_echo, NULL),
             DURO_ALREADY_EXISTS);
    CHECK_OK(duro_registry_add_orchestration(r, "O", "2", orch_echo, NULL));
    CHECK_RC(duro_registry_add_orchestration(r, "O", "2", orch_echo, NULL),
             DURO_ALREADY_EXISTS);
    CHECK(strstr(duro_errmsg(), "O") != NULL);
    CHECK_OK(duro_registry_add_orchestration(r, "P", "2", orch_echo, NULL));
    CHECK_RC(duro_registry_add_orchestration(r, "", NULL, orch_echo, NULL),
             DURO_INVALID);
    CHECK_RC(duro_registry_add_orchestration(r, NULL, "1", orch_echo, NULL),
             DURO_INVALID);
    CHECK_OK(duro_registry_add_activity(r, "A", act_echo, NULL));
    CHECK_RC(duro_registry_add_activity(r, "A", act_echo, NULL),
             DURO_ALREADY_EXISTS);
    CHECK(strstr(duro_errmsg(), "A") != NULL);
    CHECK_RC(duro_registry_add_activity(r, "", act_echo, NULL), DURO_INVALID);
    CHECK_RC(duro_registry_add_activity(r, NULL, act_echo, NULL), DURO_INVALID);
    /* an activity and an orchestration may share a name */
    CHECK_OK(duro_registry_add_activity(r, "O", act_echo, NULL));
    /* versions are limited like names: the store holds 1024 bytes */
    char *version = repeat_char('v', 1025);
    CHECK_RC(duro_registry_add_orchestration(r, "O", version, orch_echo, NULL),
             DURO_TOO_LARGE);
    CHECK(strstr(duro_errmsg(), "version") != NULL);
    version[1024] = '\0';
    CHECK_OK(duro_registry_add_orchestration(r, "O", version, orch_echo, NULL));
    free(version);
    duro_registry_destroy(r);
}

static _Atomic int ver_runs_1_2, ver_runs_1_10, ver_runs_1_11;

static int orch_ver_1_2(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&ver_runs_1_2, 1);
    return duro_ok(out, duro_sprintf(o, "v1.2:%s", duro_input(o)));
}

/* Two turns: waits for "go" so that a later turn must pick the same code. */
static int orch_ver_1_10(duro_orch *o, const char *in, duro_result *out)
{
    atomic_fetch_add(&ver_runs_1_10, 1);
    duro_task *e = duro_wait_event(o, "go");
    duro_await(o, e);
    return duro_ok(out,
                   duro_sprintf(o, "v1.10:%s:%s", in, duro_task_output(e)));
}

static int orch_ver_1_11(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    atomic_fetch_add(&ver_runs_1_11, 1);
    return duro_ok(out, "v1.11");
}

TEST(version_highest_by_default_explicit_when_asked_and_recorded)
{
    atomic_store(&ver_runs_1_2, 0);
    atomic_store(&ver_runs_1_10, 0);
    atomic_store(&ver_runs_1_11, 0);
    rt_fixture f;
    rt_init(&f, "api_version.db");
    /* strverscmp order: 1.10 > 1.2 (a plain strcmp would pick 1.2) */
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Ver", "1.2", orch_ver_1_2,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Ver", "1.10",
                                             orch_ver_1_10, NULL));
    f.opts.fiber_cache_size = 0; /* every turn replays with the chosen code */
    rt_start(&f);

    rt_start_instance(&f, "ver-default", "Ver", "a");
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "1.2";
    CHECK_OK(duro_client_start(f.client, "ver-explicit", "Ver", "b", &so));

    duro_instance_info *i = rt_wait(&f, "ver-explicit", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "v1.2:b");
    CHECK_STR(i->version, "1.2");
    duro_free(i);

    rt_wait_status(&f, "ver-default", DURO_STATUS_RUNNING, 10000);
    WAIT_UNTIL(
        rt_count_events(&f, "ver-default", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
        10000);
    CHECK_OK(duro_client_get_status(f.client, "ver-default", &i));
    CHECK_STR(i->version, "1.10");
    duro_free(i);
    duro_history *h = rt_history(&f, "ver-default");
    const duro_event *started =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_STARTED, 0);
    CHECK(started != NULL);
    CHECK_STR(started->version, "1.10");
    duro_history_free(h);

    /* A newer version appears while the instance runs: it must go on with
     * the version recorded when it started. */
    rt_stop(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Ver", "1.11",
                                             orch_ver_1_11, NULL));
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "ver-default", "go", "g"));
    i = rt_wait(&f, "ver-default", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "v1.10:a:g");
    CHECK_STR(i->version, "1.10");
    duro_free(i);
    CHECK_EQ(atomic_load(&ver_runs_1_11), 0);
    CHECK_EQ(atomic_load(&ver_runs_1_2), 1);
    CHECK_INT(atomic_load(&ver_runs_1_10), >=, 2);
    rt_done(&f);
}

/* Returns "v<the version that runs>", read from the user pointer. */
static int orch_which_version(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    return duro_ok(out,
                   duro_sprintf(o, "v%s", (const char *)duro_orch_user(o)));
}

/* NULL means the highest version; "" is the version "", as duro.h says. */
TEST(version_empty_string_is_the_default_version_not_the_highest)
{
    static const char *const versions[] = {"", "1", "2", "10"};
    rt_fixture f;
    rt_init(&f, "api_version_empty.db");
    for (size_t k = 0; k < 4; k++)
        CHECK_OK(duro_registry_add_orchestration(
            f.reg, "V", versions[k], orch_which_version, (void *)versions[k]));
    rt_start(&f);
    duro_start_options so;
    duro_start_options_init(&so);
    CHECK_OK(duro_client_start(f.client, "v-null", "V", NULL, &so));
    so.orchestration_version = "";
    CHECK_OK(duro_client_start(f.client, "v-empty", "V", NULL, &so));
    so.orchestration_version = "2";
    CHECK_OK(duro_client_start(f.client, "v-2", "V", NULL, &so));
    CHECK_OK(duro_client_start(f.client, "v-noopts", "V", NULL, NULL));
    static const char *const expect[][3] = {{"v-null", "v10", "10"},
                                            {"v-empty", "v", ""},
                                            {"v-2", "v2", "2"},
                                            {"v-noopts", "v10", "10"}};
    for (size_t k = 0; k < 4; k++) {
        duro_instance_info *i = rt_wait(&f, expect[k][0], 10000);
        CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
        CHECK_STR(i->output, expect[k][1]);
        CHECK_STR(i->version, expect[k][2]);
        duro_free(i);
    }
    rt_done(&f);
}

static int orch_tag = 1, act_tag = 2;
static _Atomic(void *) seen_orch_user;
static _Atomic(void *) seen_act_user;

static int act_user(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_store(&seen_act_user, duro_activity_user(a));
    return duro_ok(out, NULL);
}

static int orch_user(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    atomic_store(&seen_orch_user, duro_orch_user(o));
    duro_await(o, duro_call_activity(o, "UserAct", NULL));
    return duro_ok(out, duro_orch_user(o) == &orch_tag ? "same" : "other");
}

TEST(user_pointers_reach_contexts)
{
    atomic_store(&seen_orch_user, NULL);
    atomic_store(&seen_act_user, NULL);
    rt_fixture f;
    rt_init(&f, "api_user.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "User", NULL, orch_user,
                                             &orch_tag));
    CHECK_OK(duro_registry_add_activity(f.reg, "UserAct", act_user, &act_tag));
    rt_start(&f);
    rt_start_instance(&f, "u", "User", NULL);
    duro_instance_info *i = rt_wait(&f, "u", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "same");
    duro_free(i);
    CHECK(atomic_load(&seen_orch_user) == &orch_tag);
    CHECK(atomic_load(&seen_act_user) == &act_tag);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * results */

static int act_ok_out(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_ok(out, "out-1");
}

static int act_ok_bare(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    (void)out;
    return DURO_OK;
}

static int act_fail_app(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_fail(out, "app broke");
}

/* Fails with the category given as input. */
static int act_fail_with(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    int cat = atoi(in);
    char msg[64];
    snprintf(msg, sizeof(msg), "broke as %s", duro_category_name(cat));
    return duro_fail_with(out, cat, msg);
}

static int act_failf(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_failf(out, "n=%d s=%s", 7, "x");
}

static int act_bare_code(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    (void)out;
    return DURO_NOT_FOUND;
}

/* Calls an activity and renders its outcome. */
static const char *outcome(duro_orch *o, const char *name, const char *in)
{
    duro_task *t = duro_call_activity(o, name, in);
    int rc = duro_await(o, t);
    if (rc == DURO_OK)
        return duro_sprintf(
            o, "ok:%s", duro_task_output(t) ? duro_task_output(t) : "(null)");
    return duro_sprintf(o, "%s:%s:%s", duro_errname(rc),
                        duro_category_name(duro_task_category(t)),
                        duro_task_error(t));
}

static int orch_results(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    const char *parts[] = {
        outcome(o, "OkOut", NULL),   outcome(o, "OkBare", NULL),
        outcome(o, "FailApp", NULL), outcome(o, "FailWith", "1"),
        outcome(o, "FailWith", "2"), outcome(o, "FailWith", "3"),
        outcome(o, "FailWith", "4"), outcome(o, "FailWith", "5"),
        outcome(o, "Failf", NULL),   outcome(o, "BareCode", NULL),
    };
    const char *s = "";
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        s = duro_sprintf(o, "%s%s%s", s, i ? "|" : "", parts[i]);
    return duro_ok(out, s);
}

TEST(activity_results_outputs_failures_and_categories)
{
    rt_fixture f;
    rt_init(&f, "api_results.db");
    CHECK_OK(duro_registry_add_activity(f.reg, "OkOut", act_ok_out, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "OkBare", act_ok_bare, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "FailApp", act_fail_app, NULL));
    CHECK_OK(
        duro_registry_add_activity(f.reg, "FailWith", act_fail_with, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "Failf", act_failf, NULL));
    CHECK_OK(
        duro_registry_add_activity(f.reg, "BareCode", act_bare_code, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Results", NULL,
                                             orch_results, NULL));
    rt_start(&f);
    rt_start_instance(&f, "r", "Results", NULL);
    duro_instance_info *i = rt_wait(&f, "r", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "ok:out-1"
                         "|ok:(null)"
                         "|DURO_FAILED:application:app broke"
                         "|DURO_FAILED:application:broke as application"
                         "|DURO_FAILED:configuration:broke as configuration"
                         "|DURO_FAILED:infrastructure:broke as infrastructure"
                         "|DURO_FAILED:timeout:broke as timeout"
                         "|DURO_FAILED:cancelled:broke as cancelled"
                         "|DURO_FAILED:application:n=7 s=x"
                         "|DURO_FAILED:application:not found");
    duro_free(i);
    /* the failures are recorded as such in history, with their category */
    duro_history *h = rt_history(&f, "r");
    const duro_event *e = rt_find_event(h, DURO_EVENT_ACTIVITY_FAILED, 3);
    CHECK(e != NULL);
    CHECK_EQ(e->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK_STR(e->error, "broke as infrastructure");
    e = rt_find_event(h, DURO_EVENT_ACTIVITY_COMPLETED, 1);
    CHECK(e != NULL);
    CHECK(e->payload == NULL);
    duro_history_free(h);
    rt_done(&f);
}

static int orch_fail_with(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_fail_with(out, atoi(in), "orchestration gave up");
}

static int orch_bare_code(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    (void)out;
    return DURO_TIMEOUT;
}

static int orch_bare_ok(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    (void)out;
    return DURO_OK;
}

static int orch_failf(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_failf(out, "bad input '%s'", in);
}

TEST(orchestration_results_and_categories)
{
    rt_fixture f;
    rt_init(&f, "api_orch_results.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "FailWith", NULL,
                                             orch_fail_with, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Bare", NULL,
                                             orch_bare_code, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "BareOk", NULL,
                                             orch_bare_ok, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Failf", NULL, orch_failf,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "infra", "FailWith", "3");
    rt_start_instance(&f, "timeout", "FailWith", "4");
    rt_start_instance(&f, "bare", "Bare", NULL);
    rt_start_instance(&f, "bare-ok", "BareOk", NULL);
    rt_start_instance(&f, "failf", "Failf", "zz");

    duro_instance_info *i = rt_wait(&f, "infra", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->error, "orchestration gave up");
    CHECK_EQ(i->category, DURO_CATEGORY_INFRASTRUCTURE);
    duro_free(i);
    i = rt_wait(&f, "timeout", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_TIMEOUT);
    duro_free(i);
    i = rt_wait(&f, "bare", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->error, duro_strerror(DURO_TIMEOUT));
    CHECK_EQ(i->category, DURO_CATEGORY_APPLICATION);
    duro_free(i);
    i = rt_wait(&f, "bare-ok", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->output == NULL);
    duro_free(i);
    i = rt_wait(&f, "failf", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->error, "bad input 'zz'");
    CHECK_EQ(i->category, DURO_CATEGORY_APPLICATION);
    duro_free(i);

    duro_history *h = rt_history(&f, "infra");
    CHECK(h->count > 0);
    const duro_event *last = &h->events[h->count - 1];
    CHECK_EQ(last->kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_STR(last->error, "orchestration gave up");
    CHECK_EQ(last->category, DURO_CATEGORY_INFRASTRUCTURE);
    duro_history_free(h);
    rt_done(&f);
}

/* "<code>:<duro_errmsg()>" after awaiting t, with an unrelated message
 * ("duro_log: fmt is NULL") set just before the await. */
static const char *await_errmsg(duro_orch *o, duro_task *t)
{
    duro_log(o, DURO_LOG_INFO, NULL);
    int rc = duro_await(o, t);
    return duro_sprintf(o, "%s:%s", duro_errname(rc), duro_errmsg());
}

static int act_big_output(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    char big[5000];
    memset(big, 'o', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    return duro_ok(out, big);
}

/* Every failed await, and a failed join, with what duro_errmsg() said
 * after it ("|" between cases). Awaits that suspend resume on whichever
 * turn thread runs the next turn. */
static int orch_await_errmsg(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    char big_input[5000];
    memset(big_input, 'i', sizeof(big_input) - 1);
    big_input[sizeof(big_input) - 1] = '\0';
    const char *s = await_errmsg(o, duro_call_activity(o, "", NULL));
    s = duro_sprintf(
        o, "%s|%s", s,
        await_errmsg(o, duro_call_activity(o, "FailApp", big_input)));
    s = duro_sprintf(o, "%s|%s", s,
                     await_errmsg(o, duro_call_activity(o, "FailApp", NULL)));
    s = duro_sprintf(o, "%s|%s", s,
                     await_errmsg(o, duro_call_activity(o, "BigOutput", NULL)));
    duro_task *timer = duro_timer(o, 3600 * 1000);
    duro_cancel_task(o, timer);
    s = duro_sprintf(o, "%s|%s", s, await_errmsg(o, timer));
    duro_task *ok = duro_call_activity(o, "OkOut", NULL);
    duro_task *failed = duro_call_activity(o, "FailApp", NULL);
    duro_log(o, DURO_LOG_INFO, NULL);
    int rc = duro_join(o, ok, failed);
    return duro_ok(out, duro_sprintf(o, "%s|join %s:%s", s, duro_errname(rc),
                                     duro_errmsg()));
}

/* duro_errmsg() after a failed duro_await or duro_join is the task's error
 * (it was the message of an earlier, unrelated call). */
TEST(failed_await_sets_errmsg_to_the_task_error)
{
    rt_fixture f;
    rt_init(&f, "api_await_errmsg.db");
    f.opts.max_payload = 4096;
    f.opts.orchestration_concurrency = 4;
    CHECK_OK(duro_registry_add_activity(f.reg, "OkOut", act_ok_out, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "FailApp", act_fail_app, NULL));
    CHECK_OK(
        duro_registry_add_activity(f.reg, "BigOutput", act_big_output, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "AwaitErrmsg", NULL,
                                             orch_await_errmsg, NULL));
    rt_start(&f);
    rt_start_instance(&f, "ae", "AwaitErrmsg", NULL);
    duro_instance_info *i = rt_wait(&f, "ae", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output,
              "DURO_INVALID:activity name is empty"
              "|DURO_TOO_LARGE:input of activity 'FailApp' is 4999 bytes, "
              "over the limit of 4096"
              "|DURO_FAILED:app broke"
              "|DURO_FAILED:output of activity 'BigOutput' is 4999 bytes, "
              "over the limit of 4096"
              "|DURO_CANCELLED:cancelled: task_cancelled"
              "|join DURO_FAILED:app broke");
    duro_free(i);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * client */

TEST(client_start_duplicate_and_idempotent)
{
    rt_fixture f;
    rt_init(&f, "api_dup.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    rt_start(&f);
    CHECK_OK(duro_client_start(f.client, "dup", "WaitGo", "first", NULL));
    rt_wait_status(&f, "dup", DURO_STATUS_RUNNING, 10000);
    duro_instance_info *before = NULL;
    CHECK_OK(duro_client_get_status(f.client, "dup", &before));

    CHECK_RC(duro_client_start(f.client, "dup", "WaitGo", "second", NULL),
             DURO_ALREADY_EXISTS);
    CHECK_RC(duro_client_start(f.client, "dup", "Other", "second", NULL),
             DURO_ALREADY_EXISTS);
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1;
    CHECK_OK(duro_client_start(f.client, "dup", "WaitGo", "second", &so));
    /* another orchestration under the same id is a conflict, idempotent or
     * not */
    CHECK_RC(duro_client_start(f.client, "dup", "Other", "second", &so),
             DURO_ALREADY_EXISTS);
    CHECK_MSG(strstr(duro_errmsg(),
                     "instance 'dup' already exists as orchestration "
                     "'WaitGo' (an idempotent start of 'Other' is "
                     "refused)") != NULL,
              "errmsg: %s", duro_errmsg());

    CHECK_OK(duro_client_raise_event(f.client, "dup", "go", "x"));
    duro_instance_info *i = rt_wait(&f, "dup", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "x");
    CHECK_STR(i->name, "WaitGo");
    CHECK_EQ(i->execution_id, 1);
    CHECK_EQ(i->created_ms, before->created_ms);
    duro_free(i);
    duro_free(before);
    /* still the first start: one OrchestrationStarted, with the first input */
    duro_history *h = rt_history(&f, "dup");
    CHECK_EQ(rt_count_events(&f, "dup", DURO_EVENT_ORCHESTRATION_STARTED), 1);
    CHECK_STR(h->events[0].payload, "first");
    duro_history_free(h);

    /* idempotent start of a finished instance changes nothing either */
    CHECK_OK(duro_client_start(f.client, "dup", "WaitGo", "third", &so));
    CHECK_RC(duro_client_start(f.client, "dup", "Other", "third", &so),
             DURO_ALREADY_EXISTS);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "dup", &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "x");
    duro_free(i);
    rt_done(&f);
}

/* On the test environment's virtual clock (duro_test_env): a start delayed
 * by 30 days begins not before its time, in milliseconds of real time. */
TEST(client_start_with_delay_not_before_its_time)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(
        duro_registry_add_orchestration(reg, "Echo", NULL, orch_echo, NULL));
    duro_test_env *env = NULL;
    CHECK_OK(duro_test_env_create(reg, NULL, &env));
    duro_registry_destroy(reg);
    CHECK_OK(duro_test_env_start(env));
    duro_client *c = duro_test_env_client(env);
    const int64_t delay = 30LL * 24 * 3600 * 1000;
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = delay;
    int64_t t0 = duro_now_ms();
    CHECK_OK(duro_client_start(c, "late", "Echo", "hi", &so));
    duro_instance_info *i = NULL;
    CHECK_OK(duro_test_env_wait(env, "late", 15000, &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "hi");
    duro_free(i);
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(c, "late", 0, &h));
    CHECK(h->count >= 1);
    CHECK_INT(h->events[0].timestamp_ms, >=, t0 + delay);
    duro_history_free(h);
    duro_test_env_destroy(env);
}

TEST(client_start_rejects_bad_ids_names_and_sizes)
{
    duro_client *c = NULL;
    CHECK_OK(duro_client_create(test_sqlite_url("api_bad.db"), &c));
    CHECK_RC(duro_client_start(c, "", "O", NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_start(c, NULL, "O", NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_start(c, "id", "", NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_start(c, "id", NULL, NULL, NULL), DURO_INVALID);
    char *long_id = repeat_char('i', 1025), *long_version;
    CHECK_RC(duro_client_start(c, long_id, "O", NULL, NULL), DURO_TOO_LARGE);
    CHECK(duro_errmsg()[0] != '\0');
    free(long_id);
    char *big = repeat_char('p', 1024 * 1024 + 1);
    CHECK_RC(duro_client_start(c, "big", "O", big, NULL), DURO_TOO_LARGE);
    free(big);
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = long_version = repeat_char('v', 1025);
    CHECK_RC(duro_client_start(c, "big", "O", NULL, &so), DURO_TOO_LARGE);
    CHECK(strstr(duro_errmsg(), "version") != NULL);
    free(long_version);
    /* options not filled by duro_start_options_init() (version 0, as
     * duro_runtime_options and duro_orchestration_options refuse it) */
    duro_start_options unset;
    memset(&unset, 0, sizeof(unset));
    unset.orchestration_version = "1";
    CHECK_RC(duro_client_start(c, "unset", "O", NULL, &unset), DURO_INVALID);
    CHECK_MSG(strstr(duro_errmsg(), "duro_start_options_init") != NULL,
              "errmsg: %s", duro_errmsg());
    unset.version = -1;
    CHECK_RC(duro_client_start(c, "unset", "O", NULL, &unset), DURO_INVALID);
    /* nothing was created */
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(c, "big", &i));
    CHECK_EQ(i->status, DURO_STATUS_NOT_FOUND);
    duro_free(i);
    i = NULL;
    CHECK_OK(duro_client_get_status(c, "unset", &i));
    CHECK_EQ(i->status, DURO_STATUS_NOT_FOUND);
    duro_free(i);
    CHECK_RC(duro_client_get_status(c, "", &i), DURO_INVALID);
    duro_client_destroy(c);
}

TEST(client_raise_event_unknown_finished_and_bad_name)
{
    rt_fixture f;
    rt_init(&f, "api_raise.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    rt_start(&f);
    CHECK_RC(duro_client_raise_event(f.client, "nobody", "go", "x"),
             DURO_NOT_FOUND);
    rt_start_instance(&f, "done", "Echo", "x");
    duro_free(rt_wait(&f, "done", 10000));
    CHECK_RC(duro_client_raise_event(f.client, "done", "go", "x"),
             DURO_INVALID_STATE);
    CHECK_RC(duro_client_raise_event(f.client, "done", "", "x"), DURO_INVALID);
    rt_done(&f);
}

static int orch_fail_cat(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    return duro_fail_with(out, DURO_CATEGORY_CONFIGURATION, "broken setup");
}

TEST(client_status_through_the_lifecycle)
{
    rt_fixture f;
    rt_init(&f, "api_status.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "FailCat", NULL,
                                             orch_fail_cat, NULL));
    /* client and instances before any runtime exists */
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "s-ok", "WaitGo", "in");
    rt_start_instance(&f, "s-fail", "FailCat", NULL);
    rt_start_instance(&f, "s-cancel", "WaitGo", NULL);
    rt_start_instance(&f, "s-term", "WaitGo", NULL);

    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "s-ok", &i));
    CHECK_EQ(i->status, DURO_STATUS_PENDING);
    CHECK_STR(i->instance_id, "s-ok");
    CHECK_STR(i->name, "WaitGo");
    CHECK_EQ(i->execution_id, 0);
    duro_free(i);
    /* wait with a timeout on a pending instance */
    i = NULL;
    CHECK_RC(duro_client_wait(f.client, "s-ok", 50, &i), DURO_TIMEOUT);
    CHECK(i != NULL);
    CHECK_EQ(i ? i->status : -1, DURO_STATUS_PENDING);
    duro_free(i);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "nope", &i));
    CHECK_EQ(i->status, DURO_STATUS_NOT_FOUND);
    duro_free(i);

    rt_start(&f);
    rt_wait_status(&f, "s-ok", DURO_STATUS_RUNNING, 10000);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "s-ok", &i));
    CHECK_EQ(i->execution_id, 1);
    CHECK(i->output == NULL);
    duro_free(i);
    /* wait with a timeout on a running instance: the current status */
    i = NULL;
    CHECK_RC(duro_client_wait(f.client, "s-ok", 100, &i), DURO_TIMEOUT);
    CHECK(i != NULL);
    CHECK_EQ(i ? i->status : -1, DURO_STATUS_RUNNING);
    duro_free(i);

    CHECK_OK(duro_client_raise_event(f.client, "s-ok", "go", "payload"));
    /* a negative timeout waits without a deadline (it was DURO_TIMEOUT at
     * once) */
    i = NULL;
    CHECK_OK(duro_client_wait(f.client, "s-ok", -1, &i));
    CHECK(i != NULL);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "payload");
    CHECK(i->error == NULL);
    duro_free(i);

    i = rt_wait(&f, "s-fail", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->error, "broken setup");
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(i->output == NULL);
    duro_free(i);

    rt_wait_status(&f, "s-cancel", DURO_STATUS_RUNNING, 10000);
    CHECK_OK(
        duro_client_cancel(f.client, "s-cancel", "no longer needed", "tester"));
    i = rt_wait(&f, "s-cancel", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "no longer needed");
    CHECK_EQ(i->category, DURO_CATEGORY_CANCELLED);
    duro_free(i);
    /* cancelling again keeps the first reason; a completed one refuses */
    CHECK_OK(duro_client_cancel(f.client, "s-cancel", "again", NULL));
    CHECK_RC(duro_client_cancel(f.client, "s-ok", "late", NULL),
             DURO_INVALID_STATE);
    CHECK_RC(duro_client_cancel(f.client, "nope", "x", NULL), DURO_NOT_FOUND);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "s-cancel", &i));
    CHECK_STR(i->error, "no longer needed");
    duro_free(i);
    i = NULL;
    CHECK_RC(duro_client_wait(f.client, "nope", 10, &i), DURO_NOT_FOUND);
    duro_free(i);
    /* Terminated is finished too: the wait returns */
    CHECK_OK(duro_client_terminate(f.client, "s-term", "stop", NULL));
    i = NULL;
    CHECK_OK(duro_client_wait(f.client, "s-term", -1, &i));
    CHECK_EQ(i ? i->status : -1, DURO_STATUS_TERMINATED);
    duro_free(i);
    rt_done(&f);
}

TEST(client_read_history_of_a_simple_orchestration)
{
    rt_fixture f;
    rt_init(&f, "api_history.db");
    CHECK_OK(duro_registry_add_activity(f.reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CallEcho", NULL,
                                             orch_call_echo, NULL));
    rt_start(&f);
    rt_start_instance(&f, "h", "CallEcho", "x");
    duro_free(rt_wait(&f, "h", 10000));
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(f.client, "h", 0, &h));
    CHECK_EQ(h->count, 4);
    CHECK_EQ(h->execution_id, 1);
    static const int kinds[] = {
        DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_ACTIVITY_SCHEDULED,
        DURO_EVENT_ACTIVITY_COMPLETED, DURO_EVENT_ORCHESTRATION_COMPLETED};
    for (size_t k = 0; k < h->count && k < 4; k++) {
        CHECK_MSG((int)h->events[k].kind == kinds[k],
                  "event %zu is %s, expected %s", k,
                  duro_event_kind_name(h->events[k].kind),
                  duro_event_kind_name(kinds[k]));
        CHECK_EQ(h->events[k].event_id, k + 1);
    }
    CHECK_STR(h->events[0].name, "CallEcho");
    CHECK_STR(h->events[0].payload, "x");
    CHECK_STR(h->events[1].name, "Echo");
    CHECK_STR(h->events[1].payload, "x");
    CHECK_EQ(h->events[2].source_event_id, 2);
    CHECK_STR(h->events[2].payload, "x");
    CHECK_STR(h->events[3].payload, "x");
    for (size_t k = 1; k < h->count; k++)
        CHECK_INT(h->events[k].timestamp_ms, >=, h->events[k - 1].timestamp_ms);
    duro_history_free(h);
    /* the same execution by number; unknown ones are NOT_FOUND */
    CHECK_OK(duro_client_read_history(f.client, "h", 1, &h));
    CHECK_EQ(h->count, 4);
    duro_history_free(h);
    CHECK_RC(duro_client_read_history(f.client, "h", 2, &h), DURO_NOT_FOUND);
    CHECK_RC(duro_client_read_history(f.client, "nobody", 0, &h),
             DURO_NOT_FOUND);
    rt_done(&f);
}

/* Counts with continue-as-new up to its input's target: "n/target". */
static int orch_count_to(duro_orch *o, const char *in, duro_result *out)
{
    int n = 0, target = 0;
    sscanf(in, "%d/%d", &n, &target);
    if (n >= target)
        return duro_ok(out, duro_sprintf(o, "reached %d", n));
    return duro_continue_as_new(o, out,
                                duro_sprintf(o, "%d/%d", n + 1, target));
}

/* Starts a child that waits for "go" and then waits itself. */
static int orch_parent_of_waiter(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *c = duro_call_sub_orchestration(
        o, "WaitGo", NULL, duro_sprintf(o, "%s-kid", in), NULL);
    duro_await(o, c);
    return duro_ok(out, duro_task_output(c));
}

TEST(client_list_delete_and_prune)
{
    rt_fixture f;
    rt_init(&f, "api_manage.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "FailCat", NULL,
                                             orch_fail_cat, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CountTo", NULL,
                                             orch_count_to, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Parent", NULL,
                                             orch_parent_of_waiter, NULL));
    rt_start(&f);
    rt_start_instance(&f, "l-a", "Echo", "a");
    rt_start_instance(&f, "l-b", "WaitGo", NULL);
    rt_start_instance(&f, "l-c", "FailCat", NULL);
    rt_start_instance(&f, "l-d", "CountTo", "1/4");
    rt_start_instance(&f, "l-p", "Parent", "l-p");
    duro_free(rt_wait(&f, "l-a", 10000));
    duro_free(rt_wait(&f, "l-c", 10000));
    duro_free(rt_wait(&f, "l-d", 10000));
    rt_wait_status(&f, "l-b", DURO_STATUS_RUNNING, 10000);
    rt_wait_status(&f, "l-p-kid", DURO_STATUS_RUNNING, 10000);

    duro_instance_list *l = NULL;
    CHECK_OK(duro_client_list(f.client, NULL, &l));
    CHECK_EQ(l->count, 6);
    for (size_t k = 1; k < l->count; k++)
        CHECK(strcmp(l->items[k - 1].instance_id, l->items[k].instance_id) < 0);
    duro_instance_list_free(l);

    duro_instance_filter flt = {0};
    flt.status_mask = 1u << DURO_STATUS_COMPLETED;
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 2);
    if (l->count == 2) {
        CHECK_STR(l->items[0].instance_id, "l-a");
        CHECK_STR(l->items[1].instance_id, "l-d");
    }
    duro_instance_list_free(l);

    memset(&flt, 0, sizeof(flt));
    flt.name = "WaitGo";
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 2); /* l-b and the child l-p-kid */
    duro_instance_list_free(l);

    memset(&flt, 0, sizeof(flt));
    flt.limit = 2;
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 2);
    flt.after_instance = l->count == 2 ? "l-b" : NULL;
    duro_instance_list_free(l);
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 2);
    if (l->count == 2) {
        CHECK_STR(l->items[0].instance_id, "l-c");
        CHECK_STR(l->items[1].instance_id, "l-d");
    }
    duro_instance_list_free(l);

    /* delete: a running one only with force; children go with the parent */
    size_t deleted = 99;
    CHECK_RC(duro_client_delete(f.client, "l-b", 0, &deleted),
             DURO_INVALID_STATE);
    CHECK_EQ(rt_status(&f, "l-b"), DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_delete(f.client, "l-b", 1, &deleted));
    CHECK_EQ(deleted, 1);
    CHECK_EQ(rt_status(&f, "l-b"), DURO_STATUS_NOT_FOUND);
    CHECK_OK(duro_client_delete(f.client, "l-a", 0, &deleted));
    CHECK_EQ(deleted, 1);
    CHECK_OK(duro_client_delete(f.client, "l-p", 1, &deleted));
    CHECK_EQ(deleted, 2);
    CHECK_EQ(rt_status(&f, "l-p-kid"), DURO_STATUS_NOT_FOUND);
    CHECK_RC(duro_client_delete(f.client, "l-a", 0, &deleted), DURO_NOT_FOUND);

    /* prune: l-d ran executions 1..4 */
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "l-d", &i));
    CHECK_EQ(i->execution_id, 4);
    CHECK_STR(i->output, "reached 4");
    duro_free(i);
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(f.client, "l-d", 1, &h));
    duro_history_free(h);
    size_t pruned = 99;
    CHECK_OK(duro_client_prune(f.client, "l-d", 2, &pruned));
    CHECK_EQ(pruned, 2);
    CHECK_RC(duro_client_read_history(f.client, "l-d", 1, &h), DURO_NOT_FOUND);
    CHECK_RC(duro_client_read_history(f.client, "l-d", 2, &h), DURO_NOT_FOUND);
    CHECK_OK(duro_client_read_history(f.client, "l-d", 3, &h));
    CHECK_STR(h->events[0].payload, "3/4");
    duro_history_free(h);
    CHECK_OK(duro_client_read_history(f.client, "l-d", 0, &h));
    CHECK_EQ(h->execution_id, 4);
    duro_history_free(h);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "l-d", &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "reached 4");
    duro_free(i);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * runtime */

/* Breaks option number `which`; returns the word its message must name, or
 * NULL past the last one. */
static const char *break_option(int which, duro_runtime_options *o)
{
    switch (which) {
    case 0:
        o->version = 0;
        return "version";
    case 1:
        o->orchestration_concurrency = -1;
        return "orchestration_concurrency";
    case 2:
        o->orchestration_concurrency = 100000;
        return "orchestration_concurrency";
    case 3: /* one side may be 0, not both: the runtime would run nothing */
        o->orchestration_concurrency = 0;
        o->worker_concurrency = 0;
        return "worker_concurrency";
    case 4:
        o->worker_concurrency = -3;
        return "worker_concurrency";
    case 5:
        o->orchestration_lock_timeout_ms = 0;
        return "lock timeout";
    case 6:
        o->worker_lock_timeout_ms = -1;
        return "lock";
    case 7:
        o->lock_renewal_ms = 0;
        return "lock_renewal_ms";
    case 8:
        o->lock_renewal_ms = o->worker_lock_timeout_ms;
        return "lock_renewal_ms";
    case 9:
        o->poll_interval_ms = 0;
        return "poll_interval_ms";
    case 10:
        o->max_attempts = 0;
        return "max_attempts";
    case 11:
        o->cancel_grace_ms = -1;
        return "cancel_grace_ms";
    case 12:
        o->unknown_name_retry_ms = -5;
        return "unknown_name_retry_ms";
    case 13:
        o->max_payload = 0;
        return "max_payload";
    case 14:
        o->orchestration_batch = -1;
        return "orchestration_batch";
    case 15:
        o->orchestration_batch = 1025;
        return "orchestration_batch";
    case 16: /* accepted once, then every turn failed "invalid argument" */
        o->fiber_stack_size = SIZE_MAX / 2;
        return "fiber_stack_size";
    case 17:
        o->fiber_stack_size = (size_t)1 << 40; /* 1 TiB */
        return "fiber_stack_size";
    case 18:
        o->fiber_stack_size = 1;
        return "fiber_stack_size";
    default:
        return NULL;
    }
}

TEST(runtime_options_validation)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    const char *url = test_sqlite_url("api_options.db");
    int cases = 0;
    for (int k = 0;; k++) {
        duro_runtime_options o;
        duro_runtime_options_init(&o);
        const char *word = break_option(k, &o);
        if (word == NULL)
            break;
        cases++;
        duro_runtime *rt = (duro_runtime *)&o; /* must be reset to NULL */
        int rc = duro_runtime_create(url, reg, &o, &rt);
        CHECK_MSG(rc == DURO_INVALID, "option case %d (%s): %s", k, word,
                  duro_errname(rc));
        CHECK_MSG(rt == NULL, "option case %d: *out not NULL", k);
        CHECK_MSG(strstr(duro_errmsg(), word) != NULL,
                  "option case %d: message '%s' does not name '%s'", k,
                  duro_errmsg(), word);
        if (rc == DURO_OK)
            duro_runtime_destroy(rt);
    }
    CHECK_EQ(cases, 19);
    /* the defaults and the fixture's options are valid */
    duro_runtime *rt = NULL;
    CHECK_OK(duro_runtime_create(url, reg, NULL, &rt));
    duro_runtime_destroy(rt);
    duro_runtime_options o;
    rt_default_options(&o);
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    duro_runtime_destroy(rt);
    /* a caller built against version 2 has no orchestration_batch: what
     * lies there is not read (the default applies) */
    o.version = 2;
    o.orchestration_batch = -7;
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    duro_runtime_destroy(rt);
    o.version = 3;
    o.orchestration_batch = 1; /* one instance per transaction */
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    duro_runtime_destroy(rt);
    /* a version-3 caller's struct ends before keep_executions: nothing past
     * it is read (ASan sees an allocation of exactly that size) */
    size_t v3_size = offsetof(duro_runtime_options, keep_executions);
    duro_runtime_options *v3 = malloc(v3_size);
    CHECK(v3 != NULL);
    memcpy(v3, &o, v3_size);
    CHECK_OK(duro_runtime_create(url, reg, v3, &rt));
    duro_runtime_destroy(rt);
    free(v3);
    /* the ends of the fiber stack range are valid */
    o.fiber_stack_size = 16 * 1024;
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    duro_runtime_destroy(rt);
    o.fiber_stack_size = 256 * 1024 * 1024;
    CHECK_OK(duro_runtime_create(url, reg, &o, &rt));
    duro_runtime_destroy(rt);
    CHECK_RC(duro_runtime_create(url, NULL, &o, &rt), DURO_INVALID);
    CHECK_RC(duro_runtime_create("nosuchscheme:x", reg, &o, &rt), DURO_BAD_URL);
    /* a string that is not a URL is not echoed where a password may sit */
    static const char *const not_urls[][2] = {
        {"host=db user=app password=S3cret", "libpq key=value string"},
        {"dbname=app password=S3cret", "libpq key=value string"},
        {"postgres:app:S3cret@db/app", "scheme 'postgres:'"},
        {"postgresql:/app:S3cret@db/app", "scheme 'postgresql:'"},
        {"postgress://app:S3cret@db/app", "postgress://app:***@db/app"},
        {"host=db password=S3cret options=http://x", "key=value string"},
        {"S3cret.db", "has no scheme"},
    };
    for (size_t k = 0; k < sizeof(not_urls) / sizeof(not_urls[0]); k++) {
        CHECK_RC(duro_runtime_create(not_urls[k][0], reg, &o, &rt),
                 DURO_BAD_URL);
        CHECK_MSG(strstr(duro_errmsg(), "S3cret") == NULL &&
                      strstr(duro_errmsg(), not_urls[k][1]) != NULL,
                  "'%s': %s", not_urls[k][1], duro_errmsg());
    }
    duro_registry_destroy(reg);
}

TEST(runtime_start_twice_is_invalid_state)
{
    rt_fixture f;
    rt_init(&f, "api_start_twice.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    /* a shutdown before any start does nothing: the runtime still starts */
    CHECK_OK(duro_runtime_create(f.url, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_shutdown(f.rt, 5000));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    CHECK_RC(duro_runtime_start(f.rt), DURO_INVALID_STATE);
    CHECK_MSG(strstr(duro_errmsg(), "already started") != NULL, "errmsg: %s",
              duro_errmsg());
    /* and it still works */
    rt_start_instance(&f, "e", "Echo", "x");
    duro_instance_info *i = rt_wait(&f, "e", 10000);
    CHECK_STR(i->output, "x");
    duro_free(i);
    CHECK_OK(duro_runtime_shutdown(f.rt, 5000));
    CHECK_OK(duro_runtime_shutdown(f.rt, 5000)); /* second: nothing to do */
    /* a shut-down runtime says so instead of "already started" */
    CHECK_RC(duro_runtime_start(f.rt), DURO_INVALID_STATE);
    CHECK_MSG(strstr(duro_errmsg(), "shut down") != NULL, "errmsg: %s",
              duro_errmsg());
    rt_done(&f);
}

/* Graceful shutdown: "Finisher" returns as soon as the shutdown begins and
 * must be acked; "Stubborn" waits for its token on its first delivery and
 * must be returned to the queue and run again by the next runtime. */
static _Atomic int shutdown_begun, fin_runs, fin_started, stub_runs,
    stub_started, stub_first_returned;
static _Atomic uint32_t stub_second_delivery;
static char stub_reason[64];

static int act_finisher(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&fin_runs, 1);
    atomic_store(&fin_started, 1);
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&shutdown_begun) && test_now_ms() < end)
        test_sleep_ms(1);
    return duro_ok(out, "a");
}

static int act_stubborn(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&stub_runs, 1);
    if (duro_activity_delivery(a) == 1) {
        atomic_store(&stub_started, 1);
        int cancelled = duro_activity_wait_cancelled(a, 20000);
        const char *why = duro_activity_cancel_reason(a);
        snprintf(stub_reason, sizeof(stub_reason), "%s",
                 cancelled && why ? why : "(not cancelled)");
        atomic_store(&stub_first_returned, 1);
        return duro_ok(out, "stale");
    }
    atomic_store(&stub_second_delivery, duro_activity_delivery(a));
    return duro_ok(out, "b");
}

static int orch_two_inflight(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Finisher", NULL);
    duro_task *b = duro_call_activity(o, "Stubborn", NULL);
    if (duro_join(o, a, b) != DURO_OK)
        return duro_fail(out, "a task failed");
    return duro_ok(out, duro_sprintf(o, "%s+%s", duro_task_output(a),
                                     duro_task_output(b)));
}

TEST(graceful_shutdown_acks_finished_and_requeues_unfinished)
{
    atomic_store(&shutdown_begun, 0);
    atomic_store(&fin_runs, 0);
    atomic_store(&fin_started, 0);
    atomic_store(&stub_runs, 0);
    atomic_store(&stub_started, 0);
    atomic_store(&stub_first_returned, 0);
    atomic_store(&stub_second_delivery, 0);
    stub_reason[0] = '\0';
    rt_fixture f;
    rt_init(&f, "api_shutdown.db");
    f.opts.worker_concurrency = 4;
    CHECK_OK(duro_registry_add_activity(f.reg, "Finisher", act_finisher, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "Stubborn", act_stubborn, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "TwoInflight", NULL,
                                             orch_two_inflight, NULL));
    rt_start(&f);
    rt_start_instance(&f, "sd", "TwoInflight", NULL);
    WAIT_UNTIL(atomic_load(&fin_started) && atomic_load(&stub_started), 10000);
    atomic_store(&shutdown_begun, 1);
    CHECK_RC(duro_runtime_shutdown(f.rt, 1500), DURO_TIMEOUT);
    rt_stop(&f);
    WAIT_UNTIL(atomic_load(&stub_first_returned), 10000);
    CHECK_STR(stub_reason, "shutdown");
    CHECK_EQ(atomic_load(&fin_runs), 1);
    CHECK_EQ(atomic_load(&stub_runs), 1);
    CHECK_EQ(rt_status(&f, "sd"), DURO_STATUS_RUNNING);

    rt_start(&f);
    duro_instance_info *i = rt_wait(&f, "sd", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "a+b");
    duro_free(i);
    CHECK_EQ(atomic_load(&fin_runs), 1);  /* acked before: not run again */
    CHECK_EQ(atomic_load(&stub_runs), 2); /* returned to the queue: ran again */
    CHECK_EQ(atomic_load(&stub_second_delivery), 2);
    CHECK_EQ(rt_count_events(&f, "sd", DURO_EVENT_ACTIVITY_COMPLETED), 2);
    rt_done(&f);
}

static duro_runtime *_Atomic current_rt;
static duro_client *_Atomic current_client;
static _Atomic int misuse_rc = -1;

static int act_shutdown_self(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_store(&misuse_rc,
                 duro_runtime_shutdown(atomic_load(&current_rt), 1000));
    return duro_ok(out, "returned");
}

TEST(shutdown_from_an_activity_is_misuse)
{
    atomic_store(&misuse_rc, -1);
    rt_fixture f;
    rt_init(&f, "api_shutdown_misuse.db");
    CHECK_OK(
        duro_registry_add_activity(f.reg, "Echo", act_shutdown_self, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CallEcho", NULL,
                                             orch_call_echo, NULL));
    rt_start(&f);
    atomic_store(&current_rt, f.rt);
    rt_start_instance(&f, "m", "CallEcho", NULL);
    duro_instance_info *i = rt_wait(&f, "m", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "returned");
    duro_free(i);
    CHECK_EQ(atomic_load(&misuse_rc), DURO_MISUSE);
    /* the runtime still runs */
    rt_start_instance(&f, "m2", "CallEcho", NULL);
    duro_free(rt_wait(&f, "m2", 10000));
    atomic_store(&current_rt, NULL);
    rt_done(&f);
}

/* Calls the client and the runtime from orchestration code and reports the
 * codes. */
static int orch_client_misuse(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_client *c = atomic_load(&current_client);
    duro_instance_info *info = NULL;
    duro_history *h = NULL;
    duro_instance_list *l = NULL;
    duro_store_stats *st = NULL;
    int rcs[] = {
        duro_client_get_status(c, "other", &info),
        duro_client_start(c, "spawned", "Echo", NULL, NULL),
        duro_client_raise_event(c, "other", "go", NULL),
        duro_client_cancel(c, "other", NULL, NULL),
        duro_client_wait(c, "other", 10, &info),
        duro_client_read_history(c, "other", 0, &h),
        duro_client_list(c, NULL, &l),
        duro_client_store_stats(c, &st),
        duro_runtime_shutdown(atomic_load(&current_rt), 0),
        duro_runtime_start(atomic_load(&current_rt)),
    };
    duro_free(info);
    duro_history_free(h);
    duro_instance_list_free(l);
    duro_free(st);
    const char *s = "";
    for (size_t k = 0; k < sizeof(rcs) / sizeof(rcs[0]); k++)
        s = duro_sprintf(o, "%s%s%s", s, k ? "," : "", duro_errname(rcs[k]));
    return duro_ok(out, s);
}

TEST(client_and_runtime_calls_from_orchestration_are_misuse)
{
    rt_fixture f;
    rt_init(&f, "api_client_misuse.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Misuse", NULL,
                                             orch_client_misuse, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    rt_start(&f);
    atomic_store(&current_rt, f.rt);
    atomic_store(&current_client, f.client);
    rt_start_instance(&f, "other", "WaitGo", NULL);
    /* "other" must be running (waiting for "go") before the misuse, so that
     * still finding it running afterwards shows the cancel did nothing */
    WAIT_UNTIL(rt_status(&f, "other") == DURO_STATUS_RUNNING, 10000);
    rt_start_instance(&f, "mis", "Misuse", NULL);
    duro_instance_info *i = rt_wait(&f, "mis", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "DURO_MISUSE,DURO_MISUSE,DURO_MISUSE,DURO_MISUSE,"
                         "DURO_MISUSE,DURO_MISUSE,DURO_MISUSE,DURO_MISUSE,"
                         "DURO_MISUSE,DURO_MISUSE");
    duro_free(i);
    /* none of it took effect */
    CHECK_EQ(rt_status(&f, "spawned"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "other"), DURO_STATUS_RUNNING);
    CHECK_EQ(rt_count_events(&f, "other", DURO_EVENT_EVENT_RAISED), 0);
    CHECK_OK(duro_client_raise_event(f.client, "other", "go", "fine"));
    i = rt_wait(&f, "other", 10000);
    CHECK_STR(i->output, "fine");
    duro_free(i);
    atomic_store(&current_rt, NULL);
    atomic_store(&current_client, NULL);
    rt_done(&f);
}

/* The orchestration context used from an activity's thread while the
 * orchestration is suspended (kept in the fiber cache). */
static duro_orch *_Atomic parked_orch;
static char ctx_misuse_report[256];
static _Atomic int ctx_misuse_done;

static int act_ctx_misuse(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    duro_orch *o = atomic_load(&parked_orch);
    duro_task *t = duro_call_activity(o, "Echo", "x");
    int await_rc = duro_await(o, t);
    duro_task *tm = duro_timer(o, 10);
    duro_task *ev = duro_wait_event(o, "e");
    int start_rc = duro_start_orchestration(o, "Echo", NULL, "sneaky", NULL);
    int join_rc = duro_join_n(o, &t, 1);
    snprintf(ctx_misuse_report, sizeof(ctx_misuse_report),
             "%s|%d|%s|%d|%d|%s|%s|%s|%d|%d|%d|%d", duro_errname(await_rc),
             duro_task_failed(t), duro_errname(duro_await(o, tm)),
             duro_task_failed(ev), duro_task_done(ev), duro_errname(start_rc),
             duro_errname(join_rc),
             duro_instance_id(o) ? duro_instance_id(o) : "(null)",
             (int)duro_execution_id(o), (int)duro_now(o), duro_is_replaying(o),
             duro_new_guid(o) != NULL);
    atomic_store(&ctx_misuse_done, 1);
    return duro_ok(out, "done");
}

static int orch_park(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    atomic_store(&parked_orch, o);
    duro_task *t = duro_call_activity(o, "CtxMisuse", NULL);
    duro_await(o, t);
    atomic_store(&parked_orch, NULL);
    return duro_ok(out, duro_task_output(t));
}

TEST(orchestration_context_from_another_thread_is_misuse)
{
    atomic_store(&ctx_misuse_done, 0);
    ctx_misuse_report[0] = '\0';
    rt_fixture f;
    rt_init(&f, "api_ctx_misuse.db");
    CHECK_OK(
        duro_registry_add_activity(f.reg, "CtxMisuse", act_ctx_misuse, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "Echo", act_echo, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Park", NULL, orch_park, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    rt_start(&f);
    rt_start_instance(&f, "park", "Park", NULL);
    duro_instance_info *i = rt_wait(&f, "park", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "done");
    duro_free(i);
    CHECK(atomic_load(&ctx_misuse_done));
    CHECK_STR(ctx_misuse_report, "DURO_MISUSE|1|DURO_MISUSE|1|1|DURO_MISUSE|"
                                 "DURO_MISUSE|(null)|0|0|0|0");
    /* nothing was scheduled or started on its behalf */
    CHECK_EQ(rt_count_events(&f, "park", DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_events(&f, "park", DURO_EVENT_TIMER_CREATED), 0);
    CHECK_EQ(rt_status(&f, "sneaky"), DURO_STATUS_NOT_FOUND);
    rt_done(&f);
}

TEST_MAIN(T(registry_duplicates_and_empty_names),
          T(version_empty_string_is_the_default_version_not_the_highest),
          T(version_highest_by_default_explicit_when_asked_and_recorded),
          T(user_pointers_reach_contexts),
          T(activity_results_outputs_failures_and_categories),
          T(orchestration_results_and_categories),
          T(failed_await_sets_errmsg_to_the_task_error),
          T(client_start_duplicate_and_idempotent),
          T(client_start_with_delay_not_before_its_time),
          T(client_start_rejects_bad_ids_names_and_sizes),
          T(client_raise_event_unknown_finished_and_bad_name),
          T(client_status_through_the_lifecycle),
          T(client_read_history_of_a_simple_orchestration),
          T(client_list_delete_and_prune), T(runtime_options_validation),
          T(runtime_start_twice_is_invalid_state),
          T(graceful_shutdown_acks_finished_and_requeues_unfinished),
          T(shutdown_from_an_activity_is_misuse),
          T(client_and_runtime_calls_from_orchestration_are_misuse),
          T(orchestration_context_from_another_thread_is_misuse))
