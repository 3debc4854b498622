/* test_ops.c - the client's operations on instances, end to end with a real
 * runtime on SQLite files: what status shows of a cancellation (before the
 * turn and after, the same as history), why an instance is stuck (an
 * unregistered orchestration or activity, a turn that fails to commit,
 * nondeterminism) and that the problem clears once the cause is gone,
 * cancel many by id, cancel by filter with its dry run, purge, the store's
 * gauges, and an older provider without them. */
#include <sqlite3.h>
#include <stdlib.h>

#include "faulty_provider.h"
#include "rt_util.h"

#define WAIT_MS 15000

static int orch_wait(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_wait_event(o, "go");
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

static int orch_echo(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

static int orch_fail(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    return duro_fail(out, "no");
}

static int orch_call_x(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "X", in);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static int act_x(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* The status of `id`, caller frees; the test fails when it cannot be read. */
static duro_instance_info *status_of(duro_client *c, const char *id)
{
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(c, id, &i));
    return i;
}

/* Waits until status of `id` shows a problem containing `needle`; returns
 * the status (caller frees). */
static duro_instance_info *wait_problem(duro_client *c, const char *id,
                                        const char *needle)
{
    duro_instance_info *i = NULL;
    int64_t deadline = test_now_ms() + WAIT_MS;
    for (;;) {
        CHECK_OK(duro_client_get_status(c, id, &i));
        if (i->last_problem != NULL && strstr(i->last_problem, needle) != NULL)
            return i;
        if (test_now_ms() > deadline) {
            test_fail(__FILE__, __LINE__,
                      "'%s' shows no problem with '%s' (last: %s)", id, needle,
                      i->last_problem ? i->last_problem : "none");
            duro_free(i);
            return NULL;
        }
        duro_free(i);
        test_sleep_ms(2);
    }
}

/* Waits until `id`'s problem was recorded again after after_ms (a later
 * delivery); caller frees. */
static duro_instance_info *wait_problem_after(duro_client *c, const char *id,
                                              int64_t after_ms)
{
    duro_instance_info *i = NULL;
    int64_t deadline = test_now_ms() + WAIT_MS;
    for (;;) {
        CHECK_OK(duro_client_get_status(c, id, &i));
        if (i->last_problem_ms > after_ms)
            return i;
        duro_free(i);
        if (test_now_ms() > deadline) {
            test_fail(__FILE__, __LINE__,
                      "'%s' has no problem recorded after %lld", id,
                      (long long)after_ms);
            return NULL;
        }
        test_sleep_ms(2);
    }
}

static long long cancel_requests(duro_client *c, const char *outcome);

/* Runs `id` (orchestration Wait) until it waits for its event, then stops
 * the runtime: the instance has begun, and nothing takes a turn of it
 * until the next rt_start(). */
static void begin_and_stop(rt_fixture *f, const char *id)
{
    rt_start(f);
    rt_start_instance(f, id, "Wait", NULL);
    rt_wait_status(f, id, DURO_STATUS_RUNNING, WAIT_MS);
    duro_runtime_destroy(f->rt);
    f->rt = NULL;
}

/* ------------------------------------------------------------------------
 * cancellation as status shows it */

TEST(cancel_shows_in_status_before_the_turn_and_agrees_with_history)
{
    rt_fixture f;
    rt_init(&f, "ops_cancel_status.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(duro_client_create(f.url, &f.client));
    /* Running, waiting for an event: the request shows before its turn
     * decides it */
    begin_and_stop(&f, "w");
    int64_t t0 = duro_now_ms();
    CHECK_OK(duro_client_cancel(f.client, "w", "first", "user:alice"));
    int64_t t1 = duro_now_ms();
    CHECK_OK(duro_client_cancel(f.client, "w", "second", "user:bob"));
    duro_instance_info *i = status_of(f.client, "w");
    CHECK_EQ(i->status, DURO_STATUS_RUNNING);
    CHECK_STR(i->cancel_reason, "first");
    CHECK_STR(i->cancelled_by, "user:alice");
    CHECK_INT(i->cancel_requested_ms, >=, t0 - 2);
    CHECK_INT(i->cancel_requested_ms, <=, t1 + 2);
    CHECK_EQ(i->finished_ms, 0);
    int64_t requested = i->cancel_requested_ms;
    duro_free(i);

    rt_start(&f);
    i = rt_wait(&f, "w", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "first");
    CHECK_STR(i->cancel_reason, "first");
    CHECK_STR(i->cancelled_by, "user:alice");
    CHECK_EQ(i->cancel_requested_ms, requested);
    CHECK_INT(i->finished_ms, >=, requested);
    CHECK(i->last_problem == NULL);
    duro_free(i);
    duro_history *h = rt_history(&f, "w");
    const duro_event *ev =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(ev != NULL);
    CHECK_STR(ev->reason, "first");
    CHECK_STR(ev->requested_by, "user:alice");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED), 1);
    duro_history_free(h);
    /* Cancelled already: DURO_OK, nothing changes. */
    CHECK_OK(duro_client_cancel(f.client, "w", "third", "user:carol"));
    i = status_of(f.client, "w");
    CHECK_STR(i->cancel_reason, "first");
    duro_free(i);
    rt_done(&f);
}

/* With no runtime up, an instance that has not begun is cancelled by the
 * request itself (qo: a pending task nobody claimed is cancelled at once):
 * Cancelled when the call returns, with the request and the end in
 * history; a runtime started later runs none of its code. */
TEST(cancel_of_an_instance_that_has_not_begun_is_decided_at_once)
{
    rt_fixture f;
    rt_init(&f, "ops_cancel_at_once.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "w", "Echo", "\"in\"");
    int64_t t0 = duro_now_ms();
    CHECK_OK(duro_client_cancel(f.client, "w", "first", "user:alice"));
    int64_t t1 = duro_now_ms();
    duro_instance_info *i = status_of(f.client, "w");
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "first");
    CHECK_STR(i->cancel_reason, "first");
    CHECK_STR(i->cancelled_by, "user:alice");
    CHECK_INT(i->cancel_requested_ms, >=, t0 - 2);
    CHECK_INT(i->finished_ms, <=, t1 + 2);
    duro_free(i);
    CHECK_EQ(cancel_requests(f.client, "cancelled"), 1);
    CHECK_EQ(cancel_requests(f.client, "requested"), 0);
    CHECK_OK(duro_client_cancel(f.client, "w", "second", "user:bob"));
    CHECK_EQ(cancel_requests(f.client, "already_cancelled"), 1);
    const char *id = "w";
    duro_cancel_result r;
    CHECK_OK(duro_client_cancel_many(f.client, &id, 1, "third", NULL, &r));
    CHECK_EQ(r.outcome, DURO_CANCEL_ALREADY_CANCELLED);
    duro_history *h = rt_history(&f, "w");
    CHECK_EQ(h->count, 3);
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    CHECK_STR(h->events[0].payload, "\"in\"");
    CHECK_EQ(h->events[1].kind, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED);
    CHECK_STR(h->events[1].reason, "first");
    CHECK_STR(h->events[1].requested_by, "user:alice");
    CHECK_EQ(h->events[2].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    duro_history_free(h);
    /* A runtime started now finds nothing to do for it: an instance it
     * starts afterwards completes, and w's history stays as it was. */
    rt_start(&f);
    rt_start_instance(&f, "after", "Echo", "\"x\"");
    i = rt_wait(&f, "after", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    h = rt_history(&f, "w");
    CHECK_EQ(h->count, 3);
    duro_history_free(h);
    rt_done(&f);
}

/* Two requests whose messages a turn takes in the other order than they
 * were recorded (a clock that stepped back between two writers): history
 * and status still name the request recorded first. */
TEST(history_records_the_request_status_shows)
{
    rt_fixture f;
    rt_init(&f, "ops_cancel_order.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(duro_client_create(f.url, &f.client));
    begin_and_stop(&f, "w");
    CHECK_OK(duro_client_cancel(f.client, "w", "recorded", "user:first"));
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &p, &e), DURO_OK, &e);
    duro_work_item later = {.kind = DURO_WORK_CANCEL_INSTANCE,
                            .instance_id = "w",
                            .reason = "queued-first",
                            .requested_by = "user:second"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &later, 0, &e), DURO_OK, &e);
    duro_provider_close(p);
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(test_path("ops_cancel_order.db"), &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db,
                          "UPDATE orchestrator_queue SET visible_at = "
                          "visible_at - 60000 WHERE reason = 'queued-first'",
                          NULL, NULL, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
    rt_start(&f);
    duro_instance_info *i = rt_wait(&f, "w", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "recorded");
    CHECK_STR(i->cancelled_by, "user:first");
    duro_free(i);
    duro_history *h = rt_history(&f, "w");
    const duro_event *ev =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(ev != NULL);
    CHECK_STR(ev->reason, "recorded");
    CHECK_STR(ev->requested_by, "user:first");
    duro_history_free(h);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * cancel many by id */

/* The value of duro_cancel_requests_total{outcome="OUTCOME"} in the
 * client's metrics text; -1 when the line is missing. */
static long long cancel_requests(duro_client *c, const char *outcome)
{
    char text[2048];
    size_t needed = 0;
    CHECK_OK(duro_client_metrics_format(c, text, sizeof(text), &needed));
    CHECK_EQ(needed, strlen(text));
    char key[128];
    snprintf(key, sizeof(key), "\nduro_cancel_requests_total{outcome=\"%s\"} ",
             outcome);
    const char *at = strstr(text, key);
    return at != NULL ? strtoll(at + strlen(key), NULL, 10) : -1;
}

TEST(cancel_many_reports_one_outcome_per_id)
{
    rt_fixture f;
    rt_init(&f, "ops_cancel_many.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Fail", NULL, orch_fail, NULL));
    rt_start(&f);
    rt_start_instance(&f, "w1", "Wait", NULL);
    rt_start_instance(&f, "w2", "Wait", NULL);
    rt_start_instance(&f, "done", "Echo", "x");
    rt_start_instance(&f, "failed", "Fail", NULL);
    rt_start_instance(&f, "gone", "Wait", NULL);
    duro_free(rt_wait(&f, "done", WAIT_MS));
    duro_free(rt_wait(&f, "failed", WAIT_MS));
    /* begun: its cancel is a request (counted "requested"), not decided by
     * the call (which it was, on a loaded machine, before its first turn) */
    rt_wait_status(&f, "gone", DURO_STATUS_RUNNING, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "gone", "earlier", "user:dave"));
    duro_free(rt_wait(&f, "gone", WAIT_MS));
    rt_wait_status(&f, "w1", DURO_STATUS_RUNNING, WAIT_MS);

    const char *ids[] = {"w1", "done", "failed", "gone", "nope", "w1", "w2"};
    duro_cancel_result res[7];
    CHECK_OK(
        duro_client_cancel_many(f.client, ids, 7, "cleanup", "user:ops", res));
    static const int outcome[7] = {
        DURO_CANCEL_REQUESTED,       DURO_CANCEL_NOT_CANCELLABLE,
        DURO_CANCEL_NOT_CANCELLABLE, DURO_CANCEL_ALREADY_CANCELLED,
        DURO_CANCEL_NOT_FOUND,       DURO_CANCEL_DUPLICATE,
        DURO_CANCEL_REQUESTED};
    static const int status[7] = {DURO_STATUS_RUNNING,
                                  DURO_STATUS_COMPLETED,
                                  DURO_STATUS_FAILED,
                                  DURO_STATUS_CANCELLED,
                                  DURO_STATUS_NOT_FOUND,
                                  DURO_STATUS_RUNNING,
                                  -1 /* Pending or Running */};
    for (int k = 0; k < 7; k++) {
        CHECK_MSG(res[k].outcome == outcome[k], "%s: %s, expected %s", ids[k],
                  duro_cancel_outcome_name(res[k].outcome),
                  duro_cancel_outcome_name(outcome[k]));
        if (status[k] >= 0)
            CHECK_EQ(res[k].status, status[k]);
    }
    const char *cancelled[] = {"w1", "w2"};
    for (int k = 0; k < 2; k++) {
        duro_instance_info *i = rt_wait(&f, cancelled[k], WAIT_MS);
        CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
        CHECK_STR(i->error, "cleanup");
        CHECK_STR(i->cancelled_by, "user:ops");
        duro_free(i);
    }
    duro_instance_info *i = status_of(f.client, "gone");
    CHECK_STR(i->cancel_reason, "earlier");
    duro_free(i);
    /* The client counted each distinct request once, by outcome: "gone"
     * alone, then the batch (the repeated w1 is not a request of its
     * own). */
    CHECK_EQ(cancel_requests(f.client, "requested"), 3);
    CHECK_EQ(cancel_requests(f.client, "already_cancelled"), 1);
    CHECK_EQ(cancel_requests(f.client, "not_found"), 1);
    CHECK_EQ(cancel_requests(f.client, "invalid_status"), 2);
    /* One at a time counts the same way, errors included. */
    CHECK_RC(duro_client_cancel(f.client, "nope", NULL, NULL), DURO_NOT_FOUND);
    CHECK_RC(duro_client_cancel(f.client, "done", NULL, NULL),
             DURO_INVALID_STATE);
    CHECK_OK(duro_client_cancel(f.client, "w1", NULL, NULL));
    CHECK_EQ(cancel_requests(f.client, "not_found"), 2);
    CHECK_EQ(cancel_requests(f.client, "invalid_status"), 3);
    CHECK_EQ(cancel_requests(f.client, "already_cancelled"), 2);
    CHECK_EQ(cancel_requests(f.client, "requested"), 3);
    rt_done(&f);
}

/* More ids than one transaction takes, repeats spread over the batches,
 * and a storage failure part-way (through the fault wrapper). */
TEST(cancel_many_batches_and_reports_repeats_across_batches)
{
    rt_fixture f;
    rt_init(&f, "ops_cancel_many_big.db");
    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK_OK(duro_client_create_with_provider(w, &f.client));
    enum { N = 1100, IDS = 1300 };
    char(*names)[16] = calloc(N + 1, sizeof(*names));
    const char **ids = calloc(IDS, sizeof(*ids));
    duro_cancel_result *res = calloc(IDS, sizeof(*res));
    CHECK(names != NULL && ids != NULL && res != NULL);
    for (int k = 0; k < N; k++) {
        snprintf(names[k], sizeof(names[k]), "m-%05d", k);
        rt_start_instance(&f, names[k], "Unrun", NULL);
    }
    snprintf(names[N], sizeof(names[N]), "missing");
    /* ids: every instance once, then 150 repeats of the first ones, 50
     * of "missing" */
    for (int k = 0; k < IDS; k++)
        ids[k] = k < N ? names[k] : k < N + 150 ? names[k - N] : names[N];

    /* The second provider call fails: the first batch stands. */
    faulty_provider_fail_nth(w, 2, FAULTY_CANCEL_INSTANCES, 1);
    CHECK_RC(duro_client_cancel_many(f.client, ids, IDS, NULL, "ops", res),
             DURO_BUSY);
    int filled = 0;
    for (int k = 0; k < IDS; k++)
        filled += res[k].outcome != DURO_CANCEL_NONE;
    CHECK_EQ(filled, DURO_BULK_BATCH_MAX + 150); /* repeats of batch 1 */
    /* no runtime: none has begun, each is cancelled at once */
    CHECK_EQ(res[0].outcome, DURO_CANCEL_CANCELLED);
    CHECK_EQ(res[N].outcome, DURO_CANCEL_DUPLICATE);
    CHECK_EQ(res[DURO_BULK_BATCH_MAX].outcome, DURO_CANCEL_NONE);
    uint64_t before = faulty_provider_calls(w, FAULTY_CANCEL_INSTANCES);

    /* Again: the first batch reports already cancelled, the rest is done. */
    CHECK_OK(duro_client_cancel_many(f.client, ids, IDS, NULL, "ops", res));
    /* distinct ids: N + 1, DURO_BULK_BATCH_MAX a call */
    CHECK_EQ(faulty_provider_calls(w, FAULTY_CANCEL_INSTANCES) - before,
             (N + 1 + DURO_BULK_BATCH_MAX - 1) / DURO_BULK_BATCH_MAX);
    for (int k = 0; k < IDS; k++) {
        int want = k < DURO_BULK_BATCH_MAX ? DURO_CANCEL_ALREADY_CANCELLED
                   : k < N                 ? DURO_CANCEL_CANCELLED
                   : k == N + 150          ? DURO_CANCEL_NOT_FOUND
                                           : DURO_CANCEL_DUPLICATE;
        CHECK_MSG(res[k].outcome == want, "#%d (%s): %s, expected %s", k,
                  ids[k], duro_cancel_outcome_name(res[k].outcome),
                  duro_cancel_outcome_name(want));
        /* the first batch (and its repeats) was Cancelled at once */
        int status = k < N + 150 ? (k < DURO_BULK_BATCH_MAX || k >= N
                                        ? DURO_STATUS_CANCELLED
                                        : DURO_STATUS_PENDING)
                                 : DURO_STATUS_NOT_FOUND;
        CHECK_EQ(res[k].status, status);
    }
    duro_instance_info *i = status_of(f.client, "m-01099");
    CHECK_STR(i->cancel_reason, "cancelled"); /* NULL reason: the default */
    CHECK_STR(i->cancelled_by, "ops");
    duro_free(i);
    free(names);
    free(ids);
    free(res);
    duro_client_destroy(f.client);
    f.client = NULL;
    duro_provider_close(w);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * cancel by filter and purge */

TEST(cancel_matching_and_purge_end_to_end)
{
    rt_fixture f;
    rt_init(&f, "ops_sweep.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Other", NULL, orch_wait, NULL));
    rt_start(&f);
    char id[32];
    for (int k = 0; k < 30; k++) {
        snprintf(id, sizeof(id), "a-%02d", k);
        rt_start_instance(&f, id, "Wait", NULL);
    }
    for (int k = 0; k < 5; k++) {
        snprintf(id, sizeof(id), "b-%02d", k);
        rt_start_instance(&f, id, "Other", NULL);
    }
    duro_bulk_filter filter = {0};
    filter.name = "Wait";
    duro_bulk_options o;
    duro_bulk_options_init(&o);
    o.dry_run = 1;
    o.max_ids = 100;
    duro_bulk_result *dry = NULL;
    CHECK_OK(duro_client_cancel_matching(f.client, &filter, "sweep", "user:ops",
                                         &o, &dry));
    CHECK_EQ(dry->count, 30);
    CHECK_EQ(cancel_requests(f.client, "requested") +
                 cancel_requests(f.client, "cancelled"),
             0); /* a dry run */
    CHECK_EQ(dry->id_count, 30);
    CHECK_STR(dry->ids[0], "a-00");
    CHECK_STR(dry->ids[29], "a-29");
    o.dry_run = 0;
    duro_bulk_result *r = NULL;
    CHECK_OK(duro_client_cancel_matching(f.client, &filter, "sweep", "user:ops",
                                         &o, &r));
    CHECK_EQ(r->count, 30);
    /* those no turn had begun yet were cancelled at once */
    CHECK_EQ(cancel_requests(f.client, "requested"), 30 - r->applied);
    CHECK_EQ(cancel_requests(f.client, "cancelled"), r->applied);
    for (size_t k = 0; k < 30; k++)
        CHECK_STR(r->ids[k], dry->ids[k]);
    duro_bulk_result_free(dry);
    duro_bulk_result_free(r);
    for (int k = 0; k < 30; k++) {
        snprintf(id, sizeof(id), "a-%02d", k);
        duro_instance_info *i = rt_wait(&f, id, WAIT_MS);
        CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
        CHECK_STR(i->cancel_reason, "sweep");
        CHECK_STR(i->cancelled_by, "user:ops");
        duro_free(i);
    }
    for (int k = 0; k < 5; k++) {
        snprintf(id, sizeof(id), "b-%02d", k);
        duro_instance_info *i = status_of(f.client, id);
        CHECK(!duro_status_is_terminal(i->status));
        CHECK_EQ(i->cancel_requested_ms, 0);
        duro_free(i);
    }

    /* Purge: never a live status; what a dry run lists goes. */
    duro_bulk_filter purge = {0};
    purge.finished_before_ms = duro_now_ms() + 1;
    purge.status_mask = 1u << DURO_STATUS_RUNNING;
    r = (duro_bulk_result *)&f;
    CHECK_RC(duro_client_purge(f.client, &purge, NULL, &r), DURO_INVALID);
    CHECK(r == NULL);
    purge.status_mask = 0;
    o.dry_run = 1;
    CHECK_OK(duro_client_purge(f.client, &purge, &o, &dry));
    CHECK_EQ(dry->count, 30);
    o.dry_run = 0;
    CHECK_OK(duro_client_purge(f.client, &purge, &o, &r));
    CHECK_EQ(r->count, 30);
    for (size_t k = 0; k < 30; k++)
        CHECK_STR(r->ids[k], dry->ids[k]);
    duro_bulk_result_free(dry);
    duro_bulk_result_free(r);
    duro_instance_list *l = NULL;
    CHECK_OK(duro_client_list(f.client, NULL, &l));
    CHECK_EQ(l->count, 5);
    duro_instance_list_free(l);
    CHECK_EQ(rt_status(&f, "a-00"), DURO_STATUS_NOT_FOUND);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * why it is stuck */

TEST(misspelt_orchestration_shows_its_problem_until_registered)
{
    rt_fixture f;
    rt_init(&f, "ops_problem_orch.db");
    f.opts.max_attempts = 1000; /* keep retrying while the test looks */
    rt_start(&f);
    int64_t t0 = duro_now_ms();
    rt_start_instance(&f, "x", "Helo", "in");
    duro_instance_info *i = wait_problem(f.client, "x", "'Helo'");
    CHECK(strstr(i->last_problem, "not registered") != NULL);
    CHECK_EQ(i->status, DURO_STATUS_PENDING);
    CHECK_INT(i->last_problem_ms, >=, t0 - 2);
    CHECK_INT(i->next_attempt_ms, >=, i->last_problem_ms);
    duro_free(i);
    /* Registered in a new runtime: it runs and the problem is gone. */
    rt_stop(&f);
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Helo", NULL, orch_echo, NULL));
    rt_start(&f);
    i = rt_wait(&f, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->last_problem == NULL);
    CHECK_EQ(i->last_problem_ms, 0);
    CHECK_EQ(i->next_attempt_ms, 0);
    duro_free(i);
    rt_done(&f);
}

TEST(orchestration_never_registered_fails_and_keeps_its_problem)
{
    rt_fixture f;
    rt_init(&f, "ops_problem_orch_final.db");
    f.opts.max_attempts = 3;
    rt_start(&f);
    rt_start_instance(&f, "x", "Nope", NULL);
    duro_instance_info *i = rt_wait(&f, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(i->last_problem != NULL && strstr(i->last_problem, "'Nope'"));
    CHECK_EQ(i->next_attempt_ms, 0);
    CHECK(i->finished_ms > 0);
    duro_free(i);
    rt_done(&f);
}

/* Worker versioning: three runtimes on one file. A has Order version 1
 * only; B has 1 and 2 but runs no turns (orchestration_concurrency 0), so
 * only A takes the instance at version 2: it is never failed there while
 * B lives - the deliveries A passes on do not count - and its status says
 * which version it waits for and who has what. C (1 and 2) runs it. With
 * B and C stopped (their rows removed), A is the only live runtime: the
 * status says so and the instance fails after max_attempts, as before. */
static duro_instance_info *
start_v2_and_wait_problem(rt_fixture *f, const char *id, const char *needle)
{
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "2";
    CHECK_OK(duro_client_start(f->client, id, "Order", "in", &so));
    return wait_problem(f->client, id, needle);
}

TEST(an_orchestration_version_another_live_runtime_has_is_left_to_it)
{
    rt_fixture a, b, c;
    rt_init(&a, "ops_versions.db");
    rt_init(&b, "ops_versions.db");
    rt_init(&c, "ops_versions.db");
    CHECK_OK(
        duro_registry_add_orchestration(a.reg, "Order", "1", orch_echo, NULL));
    for (int k = 0; k < 2; k++) {
        rt_fixture *f = k == 0 ? &b : &c;
        CHECK_OK(duro_registry_add_orchestration(f->reg, "Order", "1",
                                                 orch_echo, NULL));
        CHECK_OK(duro_registry_add_orchestration(f->reg, "Order", "2",
                                                 orch_echo, NULL));
    }
    a.opts.max_attempts = 2;
    a.opts.unknown_name_retry_ms = 5;
    b.opts.orchestration_concurrency = 0;
    b.opts.worker_concurrency = 1;
    rt_start(&a);
    rt_start(&b);
    duro_runtime_list *live = NULL;
    CHECK_OK(duro_client_runtimes(a.client, &live));
    CHECK_EQ(live->count, 2);
    duro_runtime_list_free(live);

    duro_instance_info *i =
        start_v2_and_wait_problem(&a, "x", "left to a live runtime");
    CHECK(strstr(i->last_problem, "version '2' of 'Order'") != NULL);
    CHECK_MSG(strstr(i->last_problem, " (this one) has 1;") != NULL &&
                  strstr(i->last_problem, " has 1, 2") != NULL,
              "'%s'", i->last_problem);
    int64_t seen = i->last_problem_ms;
    duro_free(i);
    /* A passes it on again and again, many more times than max_attempts:
     * never failed, never poison */
    for (int n = 0; n < 4 * 2; n++) {
        i = wait_problem_after(a.client, "x", seen);
        if (i == NULL)
            break;
        CHECK_EQ(i->status, DURO_STATUS_PENDING);
        seen = i->last_problem_ms;
        duro_free(i);
    }
    CHECK_EQ(rt_status(&a, "x"), DURO_STATUS_PENDING);
    /* a runtime that runs turns and has version 2: it runs it */
    rt_start(&c);
    i = rt_wait(&c, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "in");
    CHECK(i->last_problem == NULL);
    duro_free(i);

    /* B and C stop: their rows go; A alone */
    rt_stop(&b);
    rt_stop(&c);
    CHECK_OK(duro_client_runtimes(a.client, &live));
    CHECK_EQ(live->count, 1);
    duro_runtime_list_free(live);
    /* Between its two attempts (5 ms apart) the status says "attempt 1 of
     * 2, then the instance fails"; a poll may miss that on a loaded
     * machine, so what A alone says is checked where it stays: in the
     * error the instance fails with, and in its problem. */
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "2";
    CHECK_OK(duro_client_start(a.client, "y", "Order", "in", &so));
    i = rt_wait(&a, "y", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    const char *texts[2] = {i->error, i->last_problem};
    for (int k = 0; k < 2; k++)
        CHECK_MSG(texts[k] != NULL &&
                      strstr(texts[k], "version '2' is not registered") !=
                          NULL &&
                      strstr(texts[k], "no live runtime has it") != NULL &&
                      strstr(texts[k], " (this one) has 1") != NULL &&
                      strstr(texts[k], "1, 2") == NULL,
                  "'%s'", texts[k] ? texts[k] : "(null)");
    duro_free(i);
    rt_done(&c);
    rt_done(&b);
    rt_done(&a);
}

/* A runtime that stops without removing its row (a crash) holds its
 * versions only while its heartbeats are recent: here a row of a runtime
 * with version 2 and a 50 ms period, never renewed. While it is live, A
 * (version 1 only) passes the instance on; once it missed 3 heartbeats, A
 * retries and fails the instance as for a version no runtime has. */
TEST(a_runtime_gone_silent_holds_its_versions_until_its_heartbeats_lapse)
{
    rt_fixture a;
    rt_init(&a, "ops_versions_lapse.db");
    CHECK_OK(
        duro_registry_add_orchestration(a.reg, "Order", "1", orch_echo, NULL));
    a.opts.max_attempts = 3;
    a.opts.unknown_name_retry_ms = 5;
    rt_start(&a);
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(a.url, &p, &e), DURO_OK, &e);
    duro_runtime_orchestration v[2] = {{"Order", "1"}, {"Order", "2"}};
    duro_runtime_info gone = {.runtime_id = "crashed",
                              .host = "host-b",
                              .pid = 99,
                              .started_ms = 1,
                              .heartbeat_every_ms = 50,
                              .orchestrations = v,
                              .orchestration_count = 2};
    CHECK_PRC(p->register_runtime(p, &gone, &e), DURO_OK, &e);
    int64_t beat = duro_now_ms();
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "2";
    CHECK_OK(duro_client_start(a.client, "x", "Order", "in", &so));
    /* passed on while host-b counts as live (a machine too slow to see it
     * within its 150 ms sees only what follows) */
    duro_instance_info *i = wait_problem(a.client, "x", "'Order'");
    if (i->last_problem_ms < beat + 150)
        CHECK_MSG(strstr(i->last_problem, "left to a live runtime") != NULL &&
                      strstr(i->last_problem, "host-b:99 has 1, 2") != NULL,
                  "'%s'", i->last_problem);
    duro_free(i);
    /* then failed after its attempts, host-b no longer among the live */
    i = rt_wait(&a, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK_MSG(i->error != NULL &&
                  strstr(i->error, "no live runtime has it") != NULL &&
                  strstr(i->error, "host-b") == NULL,
              "'%s'", i->error ? i->error : "(null)");
    CHECK_INT(duro_now_ms() - beat, >=, 150);
    duro_free(i);
    /* only A is listed: the lapsed row is skipped */
    duro_runtime_list *live = NULL;
    CHECK_OK(duro_client_runtimes(a.client, &live));
    CHECK_EQ(live->count, 1);
    duro_runtime_list_free(live);
    duro_provider_close(p);
    rt_done(&a);
}

TEST(unregistered_activity_shows_its_problem_until_registered)
{
    rt_fixture f;
    rt_init(&f, "ops_problem_act.db");
    f.opts.max_attempts = 1000;
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CallX", NULL, orch_call_x,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "x", "CallX", "hi");
    duro_instance_info *i = wait_problem(f.client, "x", "activity 'X'");
    CHECK(strstr(i->last_problem, "not registered") != NULL);
    CHECK_EQ(i->status, DURO_STATUS_RUNNING);
    CHECK(i->next_attempt_ms > 0);
    duro_free(i);
    rt_stop(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "X", act_x, NULL));
    rt_start(&f);
    i = rt_wait(&f, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "hi");
    CHECK(i->last_problem == NULL);
    CHECK_EQ(i->next_attempt_ms, 0);
    duro_free(i);
    rt_done(&f);
}

static _Atomic int nd_changed;

/* Deliberately nondeterministic: reads a global the test flips. */
static int orch_nd(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(
        o, duro_call_activity(o, atomic_load(&nd_changed) ? "B" : "X", "x"));
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "done");
}

TEST(nondeterminism_fails_the_instance_and_its_problem_stays)
{
    rt_fixture f;
    rt_init(&f, "ops_problem_nd.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "ND", NULL, orch_nd, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "X", act_x, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "B", act_x, NULL));
    atomic_store(&nd_changed, 0);
    rt_start(&f);
    rt_start_instance(&f, "nd", "ND", NULL);
    WAIT_UNTIL(rt_count_events(&f, "nd", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    rt_stop(&f); /* the next turn replays */
    atomic_store(&nd_changed, 1);
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "nd", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "nd", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    duro_free(i);
    /* The runtime records the problem just after the ack that failed the
     * instance commits, so Failed can show a moment before it. */
    i = wait_problem(f.client, "nd", "nondeterminism");
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_STR(i->last_problem, i->error);
    CHECK_EQ(i->next_attempt_ms, 0);
    duro_free(i);
    /* A message that arrives later is dropped; the problem stays. */
    CHECK_RC(duro_client_raise_event(f.client, "nd", "go", NULL),
             DURO_INVALID_STATE);
    i = status_of(f.client, "nd");
    CHECK(i->last_problem != NULL);
    duro_free(i);
    rt_done(&f);
}

/* A turn that cannot commit comes back again and again (each delivery's
 * ack retried until its lock's deadline, then given up); status shows the
 * delivery count climbing, and the problem clears once a turn commits. */
TEST(failing_commits_show_a_climbing_delivery_count_until_one_commits)
{
    rt_fixture f;
    rt_init(&f, "ops_problem_poison.db");
    f.opts.max_attempts = 1000;
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    faulty_provider_fail_always(w, FAULTY_ACK_ORCHESTRATION_ITEM, 1, 1);
    CHECK_OK(duro_runtime_create_with_provider(w, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "x", "Echo", "in");
    unsigned first = 0, later = 0;
    duro_instance_info *i =
        wait_problem(f.client, "x", "could not be committed");
    const char *d = strstr(i->last_problem, "delivery ");
    CHECK(d != NULL && sscanf(d, "delivery %u", &first) == 1);
    CHECK(i->next_attempt_ms >= i->last_problem_ms);
    duro_free(i);
    int64_t deadline = test_now_ms() + WAIT_MS;
    while (later <= first && test_now_ms() < deadline) {
        i = status_of(f.client, "x");
        d = i->last_problem ? strstr(i->last_problem, "delivery ") : NULL;
        if (d != NULL)
            sscanf(d, "delivery %u", &later);
        duro_free(i);
        test_sleep_ms(2);
    }
    CHECK_MSG(later > first, "the delivery count did not climb past %u", first);
    faulty_provider_fail_always(w, FAULTY_ACK_ORCHESTRATION_ITEM, 1, 0);
    i = rt_wait(&f, "x", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->last_problem == NULL);
    duro_free(i);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * an older provider */

/* The stats entry of (name, status) in a list, NULL when absent. */
static const duro_store_count *
find_count(const duro_store_count *list, size_t n, const char *name, int status)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(list[k].name, name) == 0 && list[k].status == status)
            return &list[k];
    return NULL;
}

TEST(store_stats_end_to_end)
{
    rt_fixture f;
    rt_init(&f, "ops_stats.db");
    f.opts.max_attempts = 1000; /* "Helo" keeps its problem while we look */
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Fail", NULL, orch_fail, NULL));
    rt_start(&f);
    rt_start_instance(&f, "w1", "Wait", NULL);
    rt_start_instance(&f, "w2", "Wait", NULL);
    rt_start_instance(&f, "e1", "Echo", "hi");
    rt_start_instance(&f, "f1", "Fail", NULL);
    rt_start_instance(&f, "x", "Helo", NULL); /* never registered */
    rt_wait_status(&f, "w1", DURO_STATUS_RUNNING, WAIT_MS);
    rt_wait_status(&f, "w2", DURO_STATUS_RUNNING, WAIT_MS);
    duro_free(rt_wait(&f, "e1", WAIT_MS));
    duro_free(rt_wait(&f, "f1", WAIT_MS));
    duro_free(wait_problem(f.client, "x", "'Helo'"));
    rt_stop(&f);
    /* With no runtime: a start and an event wait, ready. */
    int64_t before = duro_now_ms();
    rt_start_instance(&f, "p1", "Echo", NULL);
    CHECK_OK(duro_client_raise_event(f.client, "w1", "go", "later"));

    duro_store_stats *st = NULL;
    CHECK_OK(duro_client_store_stats(f.client, &st));
    CHECK(st != NULL);
    CHECK_INT(st->now_ms, >=, before);
    /* Echo: Pending p1, Completed e1; Fail: Failed f1; Helo: Pending x;
     * Wait: Running w1, w2 - in name order, then status. */
    CHECK_EQ(st->instance_count, 5);
    static const struct {
        const char *name;
        int status;
        uint64_t count;
    } want[] = {{"Echo", DURO_STATUS_PENDING, 1},
                {"Echo", DURO_STATUS_COMPLETED, 1},
                {"Fail", DURO_STATUS_FAILED, 1},
                {"Helo", DURO_STATUS_PENDING, 1},
                {"Wait", DURO_STATUS_RUNNING, 2}};
    for (size_t k = 0; k < st->instance_count && k < 5; k++) {
        CHECK_STR(st->instances[k].name, want[k].name);
        CHECK_EQ(st->instances[k].status, want[k].status);
        CHECK_EQ(st->instances[k].count, want[k].count);
    }
    CHECK(find_count(st->instances, st->instance_count, "Wait",
                     DURO_STATUS_COMPLETED) == NULL);
    CHECK_EQ(st->problem_count, 1);
    CHECK_STR(st->problems[0].name, "Helo");
    CHECK_EQ(st->problems[0].status, 0);
    CHECK_EQ(st->problems[0].count, 1);
    /* x's start (held back by its retry delay, or ready), p1's start and
     * w1's event: three messages, p1's and w1's ready */
    uint64_t queued = 0;
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &p, &e), DURO_OK, &e);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, NULL, &queued, &e),
              DURO_OK, &e);
    duro_provider_close(p);
    CHECK_EQ(queued, 3);
    CHECK_EQ(st->orchestrator_ready + st->orchestrator_delayed +
                 st->orchestrator_locked,
             3);
    CHECK_INT(st->orchestrator_ready, >=, 2);
    CHECK_INT(st->orchestrator_oldest_ready_ms, >, 0);
    CHECK_INT(st->orchestrator_oldest_ready_ms, <=, st->now_ms);
    CHECK_EQ(st->worker_ready, 0);
    CHECK_EQ(st->worker_locked, 0);
    CHECK_EQ(st->worker_oldest_ready_ms, 0);
    CHECK_INT(st->store_size_bytes, >, 0);
    duro_free(st);

    /* A new runtime drains what it can: the counts follow. */
    rt_start(&f);
    duro_free(rt_wait(&f, "p1", WAIT_MS));
    duro_free(rt_wait(&f, "w1", WAIT_MS));
    CHECK_OK(duro_client_store_stats(f.client, &st));
    const duro_store_count *c = find_count(st->instances, st->instance_count,
                                           "Echo", DURO_STATUS_COMPLETED);
    CHECK(c != NULL && c->count == 2);
    c = find_count(st->instances, st->instance_count, "Wait",
                   DURO_STATUS_RUNNING);
    CHECK(c != NULL && c->count == 1);
    c = find_count(st->instances, st->instance_count, "Wait",
                   DURO_STATUS_COMPLETED);
    CHECK(c != NULL && c->count == 1);
    duro_free(st);
    rt_done(&f);
}

TEST(a_version_3_provider_has_no_bulk_calls)
{
    rt_fixture f;
    rt_init(&f, "ops_v3.db");
    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap_version(inner, 1, 3);
    CHECK_OK(duro_client_create_with_provider(w, &f.client));
    rt_start_instance(&f, "x", "Wait", NULL);
    const char *ids[1] = {"x"};
    duro_cancel_result res[1];
    CHECK_RC(duro_client_cancel_many(f.client, ids, 1, NULL, NULL, res),
             DURO_UNSUPPORTED);
    duro_bulk_filter filter = {0};
    duro_bulk_result *r = NULL;
    CHECK_RC(
        duro_client_cancel_matching(f.client, &filter, NULL, NULL, NULL, &r),
        DURO_UNSUPPORTED);
    filter.finished_before_ms = INT64_MAX;
    CHECK_RC(duro_client_purge(f.client, &filter, NULL, &r), DURO_UNSUPPORTED);
    duro_store_stats *st = (duro_store_stats *)&filter;
    CHECK_RC(duro_client_store_stats(f.client, &st), DURO_UNSUPPORTED);
    CHECK(st == NULL);
    /* The one-instance cancel takes the version-3 way; status leaves the
     * version-4 fields empty. */
    CHECK_OK(duro_client_cancel(f.client, "x", "r", "me"));
    duro_instance_info *i = status_of(f.client, "x");
    CHECK_EQ(i->status, DURO_STATUS_PENDING);
    CHECK(i->cancel_reason == NULL && i->cancelled_by == NULL);
    CHECK_EQ(i->cancel_requested_ms, 0);
    duro_free(i);
    CHECK_RC(duro_client_cancel(f.client, "ghost", NULL, NULL), DURO_NOT_FOUND);
    CHECK_EQ(cancel_requests(f.client, "requested"), 1);
    CHECK_EQ(cancel_requests(f.client, "not_found"), 1);
    CHECK_EQ(cancel_requests(f.client, "already_cancelled"), 0);
    duro_client_destroy(f.client);
    f.client = NULL;
    duro_provider_close(w);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * the operators' queries (provider contract version 10) */

/* The control events the client lists, newest first, as
 * "instance:kind:reason:by;" (caller frees). */
static char *control_events_text(duro_client *c,
                                 const duro_control_event_query *q)
{
    duro_control_event_list *l = NULL;
    CHECK_OK(duro_client_control_events(c, q, &l));
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    CHECK(out != NULL);
    out[0] = '\0';
    for (size_t i = 0; i < l->count; i++) {
        const duro_control_event *ev = &l->items[i];
        len += (size_t)snprintf(out + len, cap - len, "%s:%s:%d:%s:%s;",
                                ev->instance_id, ev->name, ev->kind,
                                ev->reason ? ev->reason : "-",
                                ev->requested_by ? ev->requested_by : "-");
        CHECK(len < cap);
    }
    CHECK(l->next_cursor == NULL);
    duro_control_event_list_free(l);
    return out;
}

/* Who did what, as a runtime's turns and the requests decided at once
 * record it, and the instances a console lists: stuck ones, newest
 * changes first. */
TEST(queries_and_control_events_end_to_end)
{
    rt_fixture f;
    rt_init(&f, "ops_queries.db");
    f.opts.max_attempts = 1000; /* "Helo" keeps its problem while we look */
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Wait", NULL, orch_wait, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    rt_start(&f);
    rt_start_instance(&f, "w1", "Wait", NULL);
    rt_start_instance(&f, "w2", "Wait", NULL);
    rt_start_instance(&f, "e1", "Echo", "\"hi\"");
    rt_start_instance(&f, "x", "Helo", NULL); /* never registered */
    rt_wait_status(&f, "w1", DURO_STATUS_RUNNING, WAIT_MS);
    rt_wait_status(&f, "w2", DURO_STATUS_RUNNING, WAIT_MS);
    duro_free(rt_wait(&f, "e1", WAIT_MS));
    duro_free(wait_problem(f.client, "x", "'Helo'"));
    duro_client *c = f.client;
    CHECK_OK(duro_client_cancel(c, "w1", "no longer needed", "user:ann"));
    duro_free(rt_wait(&f, "w1", WAIT_MS));
    CHECK_OK(duro_client_suspend(c, "w2", "look", "ops:cy"));
    rt_wait_status(&f, "w2", DURO_STATUS_SUSPENDED, WAIT_MS);
    CHECK_OK(duro_client_resume(c, "w2", NULL, "ops:cy"));
    rt_wait_status(&f, "w2", DURO_STATUS_RUNNING, WAIT_MS);
    CHECK_OK(duro_client_terminate(c, "w2", "enough", "ops:cy"));
    duro_free(rt_wait(&f, "w2", WAIT_MS));
    rt_stop(&f);
    /* no runtime: a cancel decided at once, later than everything above
     * (at the same millisecond the instance id would order them) */
    duro_instance_info *w2 = status_of(c, "w2");
    WAIT_UNTIL(duro_now_ms() > w2->updated_ms, WAIT_MS);
    duro_free(w2);
    rt_start_instance(&f, "late", "Echo", NULL);
    CHECK_OK(duro_client_cancel(c, "late", NULL, "user:bob"));

    duro_control_event_query eq;
    duro_control_event_query_init(&eq);
    char *got = control_events_text(c, &eq);
    CHECK_STR(got, "late:Echo:5:cancelled:user:bob;"
                   "w2:Wait:19:enough:ops:cy;"
                   "w2:Wait:21:resumed:ops:cy;"
                   "w2:Wait:20:look:ops:cy;"
                   "w1:Wait:5:no longer needed:user:ann;");
    free(got);
    eq.requested_by = "user:ann";
    got = control_events_text(c, &eq);
    CHECK_STR(got, "w1:Wait:5:no longer needed:user:ann;");
    free(got);

    /* stuck now: live with a problem; the newest change first */
    duro_instance_query q;
    duro_instance_query_init(&q);
    q.with_problem = 1;
    q.status_mask = (1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_RUNNING) |
                    (1u << DURO_STATUS_SUSPENDED);
    q.count_total = 1;
    duro_instance_page *page = NULL;
    CHECK_OK(duro_client_query(c, &q, &page));
    CHECK_EQ(page->count, 1);
    CHECK_EQ(page->total, 1);
    CHECK_STR(page->items[0].instance_id, "x");
    CHECK(strstr(page->items[0].last_problem, "'Helo'") != NULL);
    duro_instance_page_free(page);
    duro_instance_query_init(&q);
    q.order = DURO_ORDER_UPDATED_DESC;
    q.limit = 2;
    CHECK_OK(duro_client_query(c, &q, &page));
    CHECK_EQ(page->count, 2);
    CHECK_STR(page->items[0].instance_id, "late");
    CHECK_STR(page->items[1].instance_id, "w2");
    CHECK(page->next_cursor != NULL);
    q.cursor = page->next_cursor;
    duro_instance_page *next = NULL;
    CHECK_OK(duro_client_query(c, &q, &next));
    CHECK_EQ(next->count, 2);
    CHECK_STR(next->items[0].instance_id, "w1");
    duro_instance_page_free(next);
    duro_instance_page_free(page);
    rt_done(&f);
}

/* A store of provider contract version 9 has no query_instances: the
 * client answers through list_instances what it can express (id order,
 * statuses, exact name, created range, paging with the same cursors) and
 * refuses the rest, naming it. */
TEST(an_older_provider_answers_the_queries_list_instances_can)
{
    rt_fixture f;
    rt_init(&f, "ops_query_v9.db");
    CHECK_OK(duro_client_create(f.url, &f.client));
    static const char *const ids[] = {"a1", "a2", "a3", "b1", "b2"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        rt_start_instance(&f, ids[i], ids[i][0] == 'a' ? "A" : "B", NULL);
    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap_version(inner, 1, 9);
    CHECK(w->query_instances == NULL);
    duro_client *old = NULL;
    CHECK_OK(duro_client_create_with_provider(w, &old));

    /* the same pages as a version-10 store gives, cursors interchangeable */
    duro_instance_query q;
    duro_instance_query_init(&q);
    q.name = "A";
    q.status_mask = 1u << DURO_STATUS_PENDING;
    q.limit = 2;
    duro_instance_page *a = NULL, *b = NULL;
    CHECK_OK(duro_client_query(old, &q, &a));
    CHECK_OK(duro_client_query(f.client, &q, &b));
    CHECK_EQ(a->count, 2);
    CHECK_EQ(b->count, 2);
    CHECK_STR(a->items[0].instance_id, "a1");
    CHECK_STR(a->items[1].instance_id, "a2");
    CHECK_EQ(a->total, -1);
    CHECK_STR(a->next_cursor, b->next_cursor);
    q.cursor = b->next_cursor;
    duro_instance_page *rest = NULL;
    CHECK_OK(duro_client_query(old, &q, &rest));
    CHECK_EQ(rest->count, 1);
    CHECK_STR(rest->items[0].instance_id, "a3");
    CHECK(rest->next_cursor == NULL);
    duro_instance_page_free(rest);
    duro_instance_page_free(a);
    duro_instance_page_free(b);
    q.cursor = "i1.1.5.YQ"; /* another order's: refused as by a store */
    CHECK_RC(duro_client_query(old, &q, &a), DURO_INVALID);
    CHECK(a == NULL);

    /* the rest: DURO_UNSUPPORTED, naming what needs version 10 */
    const char *why[] = {"order",           "name_prefix",  "name_contains",
                         "parent_instance", "with_problem", "count_total"};
    for (int k = 0; k < 6; k++) {
        duro_instance_query_init(&q);
        switch (k) {
        case 0:
            q.order = DURO_ORDER_CREATED_DESC;
            break;
        case 1:
            q.name_prefix = "a";
            break;
        case 2:
            q.name_contains = "a";
            break;
        case 3:
            q.parent_instance = "a1";
            break;
        case 4:
            q.with_problem = 1;
            break;
        default:
            q.count_total = 1;
        }
        a = (duro_instance_page *)&q;
        CHECK_RC(duro_client_query(old, &q, &a), DURO_UNSUPPORTED);
        CHECK(a == NULL);
        CHECK_MSG(strstr(duro_errmsg(), why[k]) != NULL &&
                      strstr(duro_errmsg(), "version 10") != NULL,
                  "'%s'", duro_errmsg());
    }
    duro_control_event_list *l = (duro_control_event_list *)&q;
    CHECK_RC(duro_client_control_events(old, NULL, &l), DURO_UNSUPPORTED);
    CHECK(l == NULL);
    /* bad input is refused as bad input first */
    duro_instance_query_init(&q);
    q.limit = 5000;
    CHECK_RC(duro_client_query(old, &q, &a), DURO_INVALID);
    duro_client_destroy(old);
    duro_provider_close(w);

    /* before version 4 an instance list is laid out shorter: nothing */
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    w = faulty_provider_wrap_version(inner, 1, 3);
    CHECK_OK(duro_client_create_with_provider(w, &old));
    duro_instance_query_init(&q);
    CHECK_RC(duro_client_query(old, &q, &a), DURO_UNSUPPORTED);
    duro_client_destroy(old);
    duro_provider_close(w);
    rt_done(&f);
}

TEST_MAIN(
    T(cancel_shows_in_status_before_the_turn_and_agrees_with_history),
    T(cancel_of_an_instance_that_has_not_begun_is_decided_at_once),
    T(history_records_the_request_status_shows),
    T(cancel_many_reports_one_outcome_per_id),
    T(cancel_many_batches_and_reports_repeats_across_batches),
    T(cancel_matching_and_purge_end_to_end), T(store_stats_end_to_end),
    T(misspelt_orchestration_shows_its_problem_until_registered),
    T(orchestration_never_registered_fails_and_keeps_its_problem),
    T(an_orchestration_version_another_live_runtime_has_is_left_to_it),
    T(a_runtime_gone_silent_holds_its_versions_until_its_heartbeats_lapse),
    T(unregistered_activity_shows_its_problem_until_registered),
    T(nondeterminism_fails_the_instance_and_its_problem_stays),
    T(failing_commits_show_a_climbing_delivery_count_until_one_commits),
    T(a_version_3_provider_has_no_bulk_calls),
    T(queries_and_control_events_end_to_end),
    T(an_older_provider_answers_the_queries_list_instances_can))
