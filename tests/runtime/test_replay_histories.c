/* test_replay_histories.c - changing an orchestration under instances in
 * flight, end to end: histories recorded by one version of the code on a
 * real runtime, exported (duro_client_export_history) to files, then
 * replayed with no store (duro_replay_file) against changed code - without
 * a patch marker (the divergence, its execution and event), behind
 * duro_patched (clean; a runtime of the new code keeps old instances on the
 * old path and puts new ones on the new path with a marker), and with
 * duro_patch_deprecated (histories with and without the marker). Each test
 * runs on its own SQLite file. */
#include <stdio.h>
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * the orchestration "Order", in four versions of its code. v1 calls A then
 * B, then waits for "go"; the change replaces B with C. */

static int act_tag(duro_activity *a, const char *in, duro_result *out)
{
    /* "A:<in>", "B:<in>", "C:<in>" */
    char buf[256];
    snprintf(buf, sizeof(buf), "%s:%s", duro_activity_name(a), in);
    return duro_ok(out, buf);
}

/* The part every version shares: A, then `second` on A's output, then the
 * event; the output is the second call's and the event's. */
static int order_with(duro_orch *o, const char *input, duro_result *out,
                      const char *second)
{
    duro_task *a = duro_call_activity(o, "A", input);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_task *s = duro_call_activity(o, second, duro_task_output(a));
    if (duro_await(o, s) != DURO_OK)
        return duro_fail(out, duro_task_error(s));
    duro_task *go = duro_wait_event(o, "go");
    duro_await(o, go);
    return duro_ok(out, duro_sprintf(o, "%s|%s", duro_task_output(s),
                                     duro_task_output(go)));
}

static int order_v1(duro_orch *o, const char *input, duro_result *out)
{
    return order_with(o, input, out, "B");
}

/* the change made without a marker */
static int order_v2_unpatched(duro_orch *o, const char *input, duro_result *out)
{
    return order_with(o, input, out, "C");
}

/* the change behind duro_patched: asked where the code first differs */
static int order_v2_patched(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    const char *second = duro_patched(o, "use-c") ? "C" : "B";
    duro_task *s = duro_call_activity(o, second, duro_task_output(a));
    if (duro_await(o, s) != DURO_OK)
        return duro_fail(out, duro_task_error(s));
    duro_task *go = duro_wait_event(o, "go");
    duro_await(o, go);
    return duro_ok(out, duro_sprintf(o, "%s|%s", duro_task_output(s),
                                     duro_task_output(go)));
}

/* no instance of v1 is left: the old path is deleted */
static int order_v3_deprecated(duro_orch *o, const char *input,
                               duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_patch_deprecated(o, "use-c");
    duro_task *s = duro_call_activity(o, "C", duro_task_output(a));
    if (duro_await(o, s) != DURO_OK)
        return duro_fail(out, duro_task_error(s));
    duro_task *go = duro_wait_event(o, "go");
    duro_await(o, go);
    return duro_ok(out, duro_sprintf(o, "%s|%s", duro_task_output(s),
                                     duro_task_output(go)));
}

/* A registry with "Order" as fn and the three activities. */
static duro_registry *registry_of(duro_orchestration_fn fn)
{
    duro_registry *r;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "Order", NULL, fn, NULL));
    CHECK_OK(duro_registry_add_activity(r, "A", act_tag, NULL));
    CHECK_OK(duro_registry_add_activity(r, "B", act_tag, NULL));
    CHECK_OK(duro_registry_add_activity(r, "C", act_tag, NULL));
    return r;
}

static void run_with(rt_fixture *f, duro_orchestration_fn fn)
{
    duro_registry_destroy(f->reg); /* rt_init's, or NULL */
    f->reg = registry_of(fn);
    rt_start(f);
}

static void stop(rt_fixture *f)
{
    rt_stop(f);
    duro_registry_destroy(f->reg);
    f->reg = NULL;
}

/* Exports instance id's history to "<tmpdir>/<id>.json" and returns the
 * path (static rotating buffer). */
static const char *export_to_file(rt_fixture *f, const char *id)
{
    char *doc = NULL;
    CHECK_OK(duro_client_export_history(f->client, id, &doc));
    char name[128];
    snprintf(name, sizeof(name), "%s.json", id);
    const char *path = test_path(name);
    FILE *out = fopen(path, "wb");
    CHECK(out != NULL);
    CHECK_EQ(fwrite(doc, 1, strlen(doc), out), strlen(doc));
    CHECK_EQ(fclose(out), 0);
    duro_free(doc);
    return path;
}

/* The instance waits for "go" (its EventSubscribed is recorded). */
static void wait_for_go(rt_fixture *f, const char *id)
{
    WAIT_UNTIL(rt_count_events(f, id, DURO_EVENT_EVENT_SUBSCRIBED) == 1, 10000);
}

static void expect_output(rt_fixture *f, const char *id, const char *output)
{
    duro_instance_info *i = rt_wait(f, id, 10000);
    CHECK_MSG(i->status == DURO_STATUS_COMPLETED, "'%s' is %s (%s)", id,
              duro_status_name(i->status), i->error ? i->error : "");
    CHECK_STR(i->output, output);
    duro_free(i);
}

/* Records, with v1: "done" (completed) and "waiting" (B done, waiting for
 * "go"). Leaves the runtime stopped and the client open. */
static void record_v1(rt_fixture *f)
{
    run_with(f, order_v1);
    rt_start_instance(f, "done", "Order", "x");
    rt_start_instance(f, "waiting", "Order", "y");
    wait_for_go(f, "done");
    CHECK_OK(duro_client_raise_event(f->client, "done", "go", "now"));
    expect_output(f, "done", "B:A:x|now");
    wait_for_go(f, "waiting");
    stop(f);
}

static uint64_t event_id_of(const duro_history *h, int kind, const char *name)
{
    for (size_t i = 0; i < h->count; i++)
        if ((int)h->events[i].kind == kind &&
            (name == NULL || (h->events[i].name != NULL &&
                              strcmp(h->events[i].name, name) == 0)))
            return h->events[i].event_id;
    return 0;
}

/* Replays the file with fn's code: DURO_OK or the code, *dv filled. */
static int replay_with(duro_orchestration_fn fn, const char *path,
                       duro_replay_divergence *dv)
{
    duro_registry *r = registry_of(fn);
    int rc = duro_replay_file(r, path, NULL, dv);
    duro_registry_destroy(r);
    return rc;
}

/* ------------------------------------------------------------------------
 * tests */

TEST(the_export_is_the_documented_form_and_replays_with_the_same_code)
{
    rt_fixture f;
    rt_init(&f, "export.db");
    record_v1(&f);
    char *doc = NULL;
    CHECK_OK(duro_client_export_history(f.client, "done", &doc));
    static const char head[] =
        "{\"format\":\"duro-history\",\"format_version\":1,"
        "\"instance_id\":\"done\",\"executions\":[";
    CHECK_MSG(strncmp(doc, head, sizeof(head) - 1) == 0, "%.200s", doc);
    CHECK(strstr(doc, "\"kind\":\"OrchestrationStarted\"") != NULL);
    CHECK(strstr(doc, "\"payload\":\"B:A:x\"") != NULL); /* a string */
    duro_free(doc);
    duro_replay_divergence dv;
    CHECK_OK(replay_with(order_v1, export_to_file(&f, "done"), &dv));
    CHECK_EQ(dv.execution_id, 0);
    CHECK_OK(replay_with(order_v1, export_to_file(&f, "waiting"), &dv));
    rt_done(&f);
}

TEST(a_change_without_a_marker_diverges_at_the_changed_event)
{
    rt_fixture f;
    rt_init(&f, "unpatched.db");
    record_v1(&f);
    duro_history *h = rt_history(&f, "done");
    uint64_t b = event_id_of(h, DURO_EVENT_ACTIVITY_SCHEDULED, "B");
    CHECK_INT(b, >, 0);
    duro_history_free(h);
    duro_replay_divergence dv;
    const char *paths[] = {export_to_file(&f, "done"),
                           export_to_file(&f, "waiting")};
    for (size_t i = 0; i < 2; i++) {
        CHECK_RC(replay_with(order_v2_unpatched, paths[i], &dv),
                 DURO_NONDETERMINISM);
        CHECK_EQ(dv.execution_id, 1);
        CHECK_EQ(dv.event_id, b); /* the same place in both */
        const char *msg = duro_errmsg();
        char at[64];
        snprintf(at, sizeof(at), "nondeterminism at event %llu",
                 (unsigned long long)b);
        CHECK_MSG(strstr(msg, paths[i]) && strstr(msg, "execution 1 of '") &&
                      strstr(msg, at) &&
                      strstr(msg, "issued ActivityScheduled 'C'") &&
                      strstr(msg, "history has ActivityScheduled 'B'"),
                  "%s", msg);
    }
    rt_done(&f);
}

TEST(a_patched_change_replays_keeps_old_instances_and_marks_new_ones)
{
    rt_fixture f;
    rt_init(&f, "patched.db");
    record_v1(&f);
    duro_replay_divergence dv;
    const char *done = export_to_file(&f, "done");
    CHECK_OK(replay_with(order_v2_patched, done, &dv));
    CHECK_OK(replay_with(order_v2_patched, export_to_file(&f, "waiting"), &dv));

    /* deployed: the waiting instance stays on B; a new one takes C */
    run_with(&f, order_v2_patched);
    CHECK_OK(duro_client_raise_event(f.client, "waiting", "go", "later"));
    expect_output(&f, "waiting", "B:A:y|later");
    CHECK_EQ(rt_count_events(&f, "waiting", DURO_EVENT_PATCH_MARKER), 0);
    rt_start_instance(&f, "new", "Order", "z");
    wait_for_go(&f, "new");
    CHECK_OK(duro_client_raise_event(f.client, "new", "go", "soon"));
    expect_output(&f, "new", "C:A:z|soon");
    duro_history *h = rt_history(&f, "new");
    const duro_event *m = rt_find_event(h, DURO_EVENT_PATCH_MARKER, 0);
    CHECK(m != NULL);
    CHECK_STR(m->name, "use-c");
    /* right before the command of the new path */
    CHECK_EQ(m->event_id + 1,
             event_id_of(h, DURO_EVENT_ACTIVITY_SCHEDULED, "C"));
    uint64_t marker = m->event_id;
    duro_history_free(h);
    stop(&f);

    /* the histories of both paths replay with v2; the new one's marker is
     * in the export, and v1 (which does not ask for it) diverges there */
    const char *fresh = export_to_file(&f, "new");
    CHECK_OK(replay_with(order_v2_patched, fresh, &dv));
    CHECK_OK(replay_with(order_v2_patched, export_to_file(&f, "waiting"), &dv));
    CHECK_RC(replay_with(order_v1, fresh, &dv), DURO_NONDETERMINISM);
    CHECK_EQ(dv.event_id, marker);
    CHECK_MSG(strstr(duro_errmsg(), "history has PatchMarker 'use-c'"), "%s",
              duro_errmsg());
    rt_done(&f);
}

TEST(a_deprecated_patch_replays_histories_with_and_without_the_marker)
{
    rt_fixture f;
    rt_init(&f, "deprecated.db");
    /* recorded by v2 (new path, marker) and by v3 (no marker) */
    run_with(&f, order_v2_patched);
    rt_start_instance(&f, "v2", "Order", "p");
    wait_for_go(&f, "v2");
    CHECK_OK(duro_client_raise_event(f.client, "v2", "go", "1"));
    expect_output(&f, "v2", "C:A:p|1");
    stop(&f);
    run_with(&f, order_v3_deprecated);
    rt_start_instance(&f, "v3", "Order", "q");
    wait_for_go(&f, "v3");
    CHECK_OK(duro_client_raise_event(f.client, "v3", "go", "2"));
    expect_output(&f, "v3", "C:A:q|2");
    CHECK_EQ(rt_count_events(&f, "v3", DURO_EVENT_PATCH_MARKER), 0);
    stop(&f);
    duro_replay_divergence dv;
    const char *with = export_to_file(&f, "v2");
    const char *without = export_to_file(&f, "v3");
    CHECK_OK(replay_with(order_v3_deprecated, with, &dv));
    CHECK_OK(replay_with(order_v3_deprecated, without, &dv));
    /* v2 reads v3's history as one from before the change (old path, B):
     * the deprecation is for when no such instance remains */
    CHECK_RC(replay_with(order_v2_patched, without, &dv), DURO_NONDETERMINISM);
    rt_done(&f);
}

TEST(documents_that_are_not_histories_are_refused_with_where)
{
    duro_registry *r = registry_of(order_v1);
    duro_replay_divergence dv;
    static const struct {
        const char *doc, *says;
    } cases[] = {
        {"", "not valid JSON: line 1, column 1: expected a value"},
        {"{\"format\":\"duro-history\",\n \"format_version\":1,]",
         "not valid JSON: line 2, column 21: expected a member name"},
        {"[]", "the document is not a JSON object"},
        {"{\"format\":\"x\"}", "\"format\" is not \"duro-history\""},
        {"{\"format\":\"duro-history\",\"format_version\":2}",
         "\"format_version\" 2 is not one this duro reads"},
        {"{\"format\":\"duro-history\",\"format_version\":1,"
         "\"instance_id\":\"i\",\"executions\":[{\"execution_id\":1,"
         "\"events\":[{\"event_id\":1,\"kind\":\"Nope\"}]}]}",
         "execution 1, event 1: unknown event kind \"Nope\""},
        {"{\"format\":\"duro-history\",\"format_version\":1,"
         "\"instance_id\":\"i\",\"executions\":[{\"execution_id\":1,"
         "\"events\":[{\"event_id\":-1,\"kind\":\"OrchestrationStarted\"}]}]"
         "}",
         "\"event_id\" is not a non-negative integer"},
        {"{\"format\":\"duro-history\",\"format_version\":1,"
         "\"instance_id\":\"i\",\"executions\":[{\"execution_id\":1,"
         "\"events\":[{\"event_id\":1,\"kind\":\"OrchestrationStarted\","
         "\"name\":\"Gone\"}]}]}",
         "orchestration 'Gone' is not registered"},
        {"{\"format\":\"duro-history\",\"format_version\":1,"
         "\"instance_id\":\"i\",\"executions\":[{\"execution_id\":1,"
         "\"events\":[{\"event_id\":1,\"kind\":\"OrchestrationStarted\","
         "\"name\":\"Gone\",\"version\":\"\"}]}]}",
         "orchestration 'Gone' (its default version) is not registered"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc =
            duro_replay_json(r, cases[i].doc, strlen(cases[i].doc), NULL, &dv);
        CHECK_MSG(rc != DURO_OK && strstr(duro_errmsg(), cases[i].says),
                  "case %zu: %s: %s", i, duro_errname(rc), duro_errmsg());
    }
    /* the reader's own limits: nesting, trailing text, bytes that are not
     * UTF-8, a lone surrogate, a bad number */
    char deep[200];
    memset(deep, '[', 70);
    memset(deep + 70, ']', 70);
    deep[140] = '\0';
    const struct {
        const char *doc, *says;
    } reader[] = {
        {deep, "nested deeper than 64 levels"},
        {"{} x", "line 1, column 4: text after the document's end"},
        {"{\"a\":\"\xff\"}", "a string is not valid UTF-8"},
        {"{\"a\":\"\\udc00\"}", "a lone low surrogate"},
        {"{\"a\":01}", "expected ',' or '}'"},
        {"{\"a\":1.}", "a digit after its '.'"},
        {"{\"a\":\"x", "the string does not end"},
    };
    for (size_t i = 0; i < sizeof(reader) / sizeof(reader[0]); i++) {
        int rc = duro_replay_json(r, reader[i].doc, strlen(reader[i].doc), NULL,
                                  &dv);
        CHECK_MSG(rc == DURO_INVALID && strstr(duro_errmsg(), reader[i].says),
                  "reader case %zu: %s: %s", i, duro_errname(rc),
                  duro_errmsg());
    }
    /* escapes and surrogate pairs decode; \u0000 cannot be a C string */
    static const char esc[] =
        "{\"format\":\"duro-history\",\"format_version\":1,\"instance_id\":"
        "\"i\\u00e9\\ud83d\\ude00\",\"executions\":[]}";
    CHECK_OK(duro_replay_json(r, esc, sizeof(esc) - 1, NULL, &dv));
    static const char nul[] =
        "{\"format\":\"duro-history\",\"format_version\":1,\"instance_id\":"
        "\"i\\u0000\",\"executions\":[]}";
    CHECK_RC(duro_replay_json(r, nul, sizeof(nul) - 1, NULL, &dv),
             DURO_INVALID);
    duro_registry_destroy(r);
}

TEST_MAIN(T(the_export_is_the_documented_form_and_replays_with_the_same_code),
          T(a_change_without_a_marker_diverges_at_the_changed_event),
          T(a_patched_change_replays_keeps_old_instances_and_marks_new_ones),
          T(a_deprecated_patch_replays_histories_with_and_without_the_marker),
          T(documents_that_are_not_histories_are_refused_with_where))
