/* same_history_worker.c - the workflow of python/tests/test_same_history.py
 * written in C, under the same names: a runtime on URL that runs it until
 * its stdin ends (the test drives it with a Python client, as it drives the
 * Python version, and compares the two histories event by event). With
 * "diverge" the child doubles n + 1 instead of n: the test checks that the
 * comparison sees that. Owns its runtime; the activities run on duro's
 * worker threads, the orchestrations on its fibers.
 *   same_history_worker URL [diverge] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "duro.h"

static int diverge; /* set once in main, before the runtime starts */

/* ---- activities ---------------------------------------------------------- */

/* Failures are written as the Python layer writes them ({"type",
 * "message"}, its traceback aside), so the two histories can be equal. */
static int fail_activity(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    (void)input;
    return duro_fail(out, "{\"type\":\"ValueError\","
                          "\"message\":\"card declined\"}");
}

static int flaky(duro_activity *a, const char *input, duro_result *out)
{
    unsigned attempt = duro_activity_attempt(a);
    if (attempt < 3)
        return duro_failf(out,
                          "{\"type\":\"RuntimeError\","
                          "\"message\":\"attempt %u\"}",
                          attempt);
    char text[256];
    snprintf(text, sizeof(text), "{\"attempt\":%u,\"input\":%s}", attempt,
             input ? input : "null");
    return duro_ok(out, text);
}

/* The select's loser: runs until it is cancelled (its result is dropped). */
static int slow(duro_activity *a, const char *input, duro_result *out)
{
    (void)input;
    duro_activity_wait_cancelled(a, 30000);
    return duro_ok(out, "\"slow\"");
}

static int double_it(duro_activity *a, const char *input, duro_result *out)
{
    (void)a;
    char text[32];
    snprintf(text, sizeof(text), "%lld", 2 * strtoll(input, NULL, 10));
    return duro_ok(out, text);
}

/* ---- orchestrations ------------------------------------------------------ */

/* The integer @p key of the JSON object @p text, 0 when there is none. */
static long long json_int(const char *text, const char *key)
{
    json_t *doc = json_loads(text ? text : "null", JSON_DECODE_ANY, NULL);
    long long v = (long long)json_integer_value(json_object_get(doc, key));
    json_decref(doc);
    return v;
}

/* A JSON value of @p text (null when it is none). */
static json_t *json_of(const char *text)
{
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_null();
}

/* Makes @p doc the orchestration's result: output, or continue-as-new. */
static int finish(duro_orch *o, duro_result *out, json_t *doc, int again)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    const char *copy = duro_sprintf(o, "%s", text ? text : "null");
    free(text);
    return again ? duro_continue_as_new(o, out, copy) : duro_ok(out, copy);
}

static int same_child(duro_orch *o, const char *input, duro_result *out)
{
    long long n = json_int(input, "n") + (diverge ? 1 : 0);
    duro_task *t = duro_call_activity(o, "Double", duro_sprintf(o, "%lld", n));
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out,
                   duro_sprintf(o, "{\"doubled\":%s}", duro_task_output(t)));
}

/* Execution 2: a child, then the output. */
static int second_round(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *child =
        duro_call_sub_orchestration(o, "SameChild", NULL, NULL, "{\"n\":21}");
    if (duro_await(o, child) != DURO_OK)
        return duro_fail(out, duro_task_error(child));
    duro_set_custom_status(o, "{\"stage\":\"done\"}");
    const char *guid = duro_new_guid(o);
    json_t *in = json_of(input);
    json_t *carry = json_object_get(in, "carry");
    json_t *doc = json_pack("{s:i, s:O, s:o, s:s}", "round", 2, "carried",
                            carry ? carry : json_null(), "child",
                            json_of(duro_task_output(child)), "guid", guid);
    json_decref(in);
    return finish(o, out, doc, 0);
}

static int same_workflow(duro_orch *o, const char *input, duro_result *out)
{
    if (json_int(input, "round") == 2)
        return second_round(o, input, out);
    long long amount = json_int(input, "amount");
    duro_set_custom_status(o, "{\"stage\":\"started\"}");

    /* a failure caught */
    duro_task *charge = duro_call_activity(
        o, "Fail", duro_sprintf(o, "{\"amount\":%lld}", amount));
    json_t *caught = json_null();
    if (duro_await(o, charge) == DURO_FAILED) {
        json_t *err = json_of(duro_task_error(charge));
        caught = json_pack("[s, s, s]",
                           json_string_value(json_object_get(err, "type")),
                           json_string_value(json_object_get(err, "message")),
                           duro_category_name(duro_task_category(charge)));
        json_decref(err);
    }
    /* no heap memory across an await: kept as text in the arena */
    char *text = json_dumps(caught, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(caught);
    const char *caught_text = duro_sprintf(o, "%s", text ? text : "null");
    free(text);

    /* a retry policy: two failed attempts, then the third succeeds */
    duro_retry_policy policy;
    duro_retry_policy_init(&policy);
    policy.max_attempts = 3;
    policy.backoff = DURO_BACKOFF_FIXED;
    policy.initial_delay_ms = 10;
    duro_task *f = duro_call_activity_with_retry(o, "Flaky", "\"x\"", &policy);
    if (duro_await(o, f) != DURO_OK)
        return duro_fail(out, duro_task_error(f));

    duro_await(o, duro_timer(o, 10));

    /* the test raises the event once it reads this status */
    duro_set_custom_status(o, "{\"stage\":\"waiting\"}");
    duro_task *approve = duro_wait_event(o, "approve");
    if (duro_await(o, approve) != DURO_OK)
        return duro_fail(out, duro_task_error(approve));

    /* a select whose loser, a running activity, is cancelled */
    duro_task *loser = duro_call_activity(o, "Slow", NULL);
    duro_task *quick = duro_timer(o, 10);
    duro_task *winner = duro_select(o, loser, quick);

    json_t *carry = json_pack(
        "{s:o, s:o, s:o, s:b}", "caught", json_of(caught_text), "flaky",
        json_of(duro_task_output(f)), "event",
        json_of(duro_task_output(approve)), "timer_won", winner == quick);
    return finish(o, out, json_pack("{s:i, s:o}", "round", 2, "carry", carry),
                  1);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "diverge"))) {
        fprintf(stderr, "usage: same_history_worker URL [diverge]\n");
        return 2;
    }
    diverge = argc == 3;
    duro_registry *reg = NULL;
    duro_runtime *rt = NULL;
    int rc = duro_registry_create(&reg);
    if (rc == DURO_OK)
        rc = duro_registry_add_orchestration(reg, "SameWorkflow", NULL,
                                             same_workflow, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_orchestration(reg, "SameChild", NULL, same_child,
                                             NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(reg, "Fail", fail_activity, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(reg, "Flaky", flaky, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(reg, "Slow", slow, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(reg, "Double", double_it, NULL);
    if (rc == DURO_OK)
        rc = duro_runtime_create(argv[1], reg, NULL, &rt);
    if (rc == DURO_OK)
        rc = duro_runtime_start(rt);
    if (rc != DURO_OK) {
        fprintf(stderr, "same_history_worker: %s: %s\n", duro_errname(rc),
                duro_errmsg());
        duro_runtime_destroy(rt);
        duro_registry_destroy(reg);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    while (getchar() != EOF)
        ;
    rc = duro_runtime_shutdown(rt, 10000);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return rc == DURO_OK ? 0 : 1;
}
