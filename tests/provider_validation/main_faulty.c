/* main_faulty.c - runs the whole provider validation suite through the
 * fault-injecting wrapper around SQLite with injection off (the wrapper must
 * be transparent), plus the wrapper's own tests: every mutating method
 * failed on its N-th call, retryably and permanently, must report exactly
 * that and leave the store unchanged without reaching the inner provider.
 * Main thread. */
#include <stdlib.h>

#include "faulty_provider.h"
#include "providers/sqlite/sqlite_provider.h"
#include "validation.h"

static duro_provider *wrap_url(const char *test_name, const char *params)
{
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s.db%s", test_path(test_name), params);
    duro_provider *inner = NULL;
    duro_error e;
    if (duro_provider_open(url, &inner, &e) != DURO_OK) {
        fprintf(stderr, "  cannot open %s: %s (%s)\n", url,
                duro_errname(e.code), e.message);
        return NULL;
    }
    duro_provider *p =
        faulty_provider_wrap_version(inner, 1, DURO_PROVIDER_VERSION);
    if (p == NULL)
        duro_provider_close(inner);
    return p;
}

static duro_provider *faulty_open(void *ctx, const char *test_name)
{
    (void)ctx;
    return wrap_url(test_name, "");
}

static duro_provider *faulty_open_with_max_history(void *ctx,
                                                   const char *test_name,
                                                   uint64_t max_history)
{
    (void)ctx;
    char params[64];
    snprintf(params, sizeof(params), "?max_history=%llu",
             (unsigned long long)max_history);
    return wrap_url(test_name, params);
}

static duro_provider *faulty_open_same(void *ctx, const char *test_name)
{
    (void)ctx;
    return wrap_url(test_name, "");
}

static void faulty_close(void *ctx, duro_provider *p)
{
    (void)ctx;
    duro_provider_close(p); /* closes the inner provider too */
}

/* Storage-step faults go to the SQLite provider inside the wrapper, so the
 * fault sweeps run through the wrapper as well. */
static void faulty_inject_fault(void *ctx, duro_provider *p, uint64_t nth_step,
                                int retryable)
{
    (void)ctx;
    duro__sqlite_inject_fault(faulty_provider_inner(p), nth_step, retryable);
}

/* ---- the wrapper's own tests -------------------------------------------
 * `outer` wraps the suite's store (itself a wrapper, `counted`) without
 * owning it: faults are armed on outer, and counted's call counts show
 * whether a call reached the provider below. */

typedef struct rig {
    duro_provider *counted; /* the suite's store */
    duro_provider *outer;   /* where faults are armed */
    pv_snapshot snap;
} rig;

/* Arms a fault on the next call of `method`, runs `call`, and checks the
 * result: exactly the injected error, nothing reached below, store
 * unchanged. */
#define EXPECT_INJECTED(r, method, retryable, call)                            \
    do {                                                                       \
        duro_error e_;                                                         \
        uint64_t below_ = faulty_provider_calls((r)->counted, method);         \
        uint64_t fired_ = faulty_provider_faults_fired((r)->outer);            \
        faulty_provider_fail_nth((r)->outer, 1, method, retryable);            \
        CHECK_PFAIL(call, (retryable) ? DURO_BUSY : DURO_STORAGE, retryable,   \
                    &e_);                                                      \
        CHECK_MSG(strstr(e_.message, faulty_method_name(method)) != NULL,      \
                  "message '%s' does not name %s", e_.message,                 \
                  faulty_method_name(method));                                 \
        CHECK_EQ(faulty_provider_calls((r)->counted, method), below_);         \
        CHECK_EQ(faulty_provider_faults_fired((r)->outer), fired_ + 1);        \
        PV_EXPECT_UNCHANGED((r)->counted, &(r)->snap);                         \
    } while (0)

PV_TEST(wrapper_fails_the_nth_call_of_each_mutating_method)
{
    rig r;
    r.counted = pv_open();
    r.outer = faulty_provider_wrap(r.counted, 0);
    CHECK(r.outer != NULL);
    duro_provider *o = r.outer;
    duro_error e;

    /* x running with two activities and a queued event; y pending. */
    duro_work_item start = {0};
    start.kind = DURO_WORK_START;
    start.instance_id = "x";
    start.name = "orch";
    CHECK_PRC(o->enqueue_for_orchestrator(o, &start, 0, &e), DURO_OK, &e);
    duro_orch_item *a = NULL;
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &a, &e), DURO_OK, &e);
    CHECK(a != NULL);
    duro_event d[3];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < 3; i++) {
        d[i].event_id = (uint64_t)i + 1;
        d[i].kind = i == 0 ? DURO_EVENT_ORCHESTRATION_STARTED
                           : DURO_EVENT_ACTIVITY_SCHEDULED;
    }
    duro_work_item acts[2];
    memset(acts, 0, sizeof(acts));
    for (int i = 0; i < 2; i++) {
        acts[i].kind = DURO_WORK_ACTIVITY_EXECUTE;
        acts[i].instance_id = "x";
        acts[i].execution_id = 1;
        acts[i].source_id = (uint64_t)i + 2;
        acts[i].name = "act";
    }
    duro_instance_meta m = {0};
    m.status = DURO_STATUS_RUNNING;
    m.name = "orch";
    duro_orch_ack ak = {0};
    ak.execution_id = 1;
    ak.history_delta = d;
    ak.history_delta_count = 3;
    ak.worker_items = acts;
    ak.worker_item_count = 2;
    ak.meta = &m;
    CHECK_PRC(o->ack_orchestration_item(o, a->lock_token, &ak, &e), DURO_OK,
              &e);
    duro_orch_item_free(a);
    duro_work_item ev = {0};
    ev.kind = DURO_WORK_EXTERNAL_EVENT;
    ev.instance_id = "x";
    ev.name = "poke";
    CHECK_PRC(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_OK, &e);
    start.instance_id = "y";
    CHECK_PRC(o->enqueue_for_orchestrator(o, &start, 0, &e), DURO_OK, &e);

    duro_event next = {0};
    next.event_id = 4;
    next.kind = DURO_EVENT_EVENT_RAISED;
    duro_orch_ack ak2 = {0};
    ak2.execution_id = 1;
    ak2.history_delta = &next;
    ak2.history_delta_count = 1;
    duro_work_item done = {0};
    done.kind = DURO_WORK_ACTIVITY_COMPLETED;
    done.instance_id = "x";
    done.execution_id = 1;
    done.source_id = 2;

    pv_snapshot_take(r.counted, &r.snap);
    for (int retryable = 1; retryable >= 0; retryable--) {
        duro_orch_item *item = (duro_orch_item *)&r; /* must be reset */
        EXPECT_INJECTED(
            &r, FAULTY_FETCH_ORCHESTRATION_ITEM, retryable,
            o->fetch_orchestration_item(o, 60000, NULL, &item, &e_));
        CHECK(item == NULL);
        duro_worker_item *w = (duro_worker_item *)&r;
        EXPECT_INJECTED(&r, FAULTY_FETCH_WORK_ITEM, retryable,
                        o->fetch_work_item(o, 60000, &w, &e_));
        CHECK(w == NULL);
        EXPECT_INJECTED(&r, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, retryable,
                        o->enqueue_for_orchestrator(o, &ev, 0, &e_));
        size_t deleted = 0;
        EXPECT_INJECTED(&r, FAULTY_DELETE_INSTANCE, retryable,
                        o->delete_instance(o, "x", 1, &deleted, &e_));
        size_t pruned = 0;
        EXPECT_INJECTED(&r, FAULTY_PRUNE_EXECUTIONS, retryable,
                        o->prune_executions(o, "x", 1, &pruned, &e_));
        /* version 4 */
        EXPECT_INJECTED(&r, FAULTY_SET_INSTANCE_PROBLEM, retryable,
                        o->set_instance_problem(o, "x", "stuck", 0, &e_));
        const char *both[2] = {"x", "y"};
        duro_cancel_result res[2];
        memset(res, 0x5a, sizeof(res));
        EXPECT_INJECTED(&r, FAULTY_CANCEL_INSTANCES, retryable,
                        o->cancel_instances(o, both, 2, "r", "me", res, &e_));
        CHECK_EQ(res[1].outcome, DURO_CANCEL_NONE);
        duro_bulk_filter bf = {0};
        duro_bulk_result *br = (duro_bulk_result *)&r;
        EXPECT_INJECTED(&r, FAULTY_CANCEL_MATCHING, retryable,
                        o->cancel_matching(o, &bf, "r", "me", 0, 10, &br, &e_));
        CHECK(br == NULL);
        bf.finished_before_ms = INT64_MAX;
        br = (duro_bulk_result *)&r;
        EXPECT_INJECTED(&r, FAULTY_PURGE_INSTANCES, retryable,
                        o->purge_instances(o, &bf, 0, 10, &br, &e_));
        CHECK(br == NULL);
        duro_store_stats *st = (duro_store_stats *)&r;
        EXPECT_INJECTED(&r, FAULTY_READ_STORE_STATS, retryable,
                        o->read_store_stats(o, &st, &e_));
        CHECK(st == NULL);
        /* version 5 */
        duro_control_result cres[2];
        memset(cres, 0x5a, sizeof(cres));
        EXPECT_INJECTED(&r, FAULTY_CONTROL_INSTANCES, retryable,
                        o->control_instances(o, DURO_CONTROL_SUSPEND, both, 2,
                                             "r", "me", cres, &e_));
        CHECK_EQ(cres[1].outcome, DURO_CONTROL_OUTCOME_NONE);
        bf.finished_before_ms = 0;
        br = (duro_bulk_result *)&r;
        EXPECT_INJECTED(&r, FAULTY_CONTROL_MATCHING, retryable,
                        o->control_matching(o, DURO_CONTROL_TERMINATE, &bf, "r",
                                            "me", 0, 10, &br, &e_));
        CHECK(br == NULL);

        /* Token methods: hold x and one activity, then fail each. */
        CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e),
                  DURO_OK, &e);
        CHECK(item != NULL);
        CHECK_STR(item->instance_id, "x");
        CHECK_PRC(o->fetch_work_item(o, 60000, &w, &e), DURO_OK, &e);
        CHECK(w != NULL);
        pv_snapshot_free(&r.snap);
        pv_snapshot_take(r.counted, &r.snap);
        EXPECT_INJECTED(
            &r, FAULTY_ACK_ORCHESTRATION_ITEM, retryable,
            o->ack_orchestration_item(o, item->lock_token, &ak2, &e_));
        EXPECT_INJECTED(
            &r, FAULTY_ABANDON_ORCHESTRATION_ITEM, retryable,
            o->abandon_orchestration_item(o, item->lock_token, 0, &e_));
        EXPECT_INJECTED(
            &r, FAULTY_RENEW_ORCHESTRATION_ITEM_LOCK, retryable,
            o->renew_orchestration_item_lock(o, item->lock_token, 60000, &e_));
        EXPECT_INJECTED(&r, FAULTY_ACK_WORK_ITEM, retryable,
                        o->ack_work_item(o, w->lock_token, &done, &e_));
        EXPECT_INJECTED(&r, FAULTY_ABANDON_WORK_ITEM, retryable,
                        o->abandon_work_item(o, w->lock_token, 0, &e_));
        EXPECT_INJECTED(&r, FAULTY_RENEW_WORK_ITEM_LOCK, retryable,
                        o->renew_work_item_lock(o, w->lock_token, 60000, &e_));
        /* The locks are intact: the same calls now go through. */
        CHECK_PRC(
            o->renew_orchestration_item_lock(o, item->lock_token, 60000, &e),
            DURO_OK, &e);
        CHECK_PRC(o->renew_work_item_lock(o, w->lock_token, 60000, &e), DURO_OK,
                  &e);
        CHECK_PRC(o->abandon_orchestration_item(o, item->lock_token, 0, &e),
                  DURO_OK, &e);
        CHECK_PRC(o->abandon_work_item(o, w->lock_token, 0, &e), DURO_OK, &e);
        duro_orch_item_free(item);
        duro_worker_item_free(w);
        pv_snapshot_free(&r.snap);
        pv_snapshot_take(r.counted, &r.snap);
    }
    pv_snapshot_free(&r.snap);
    /* Everything still works through both wrappers. */
    duro_orch_item *item = NULL;
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "x");
    CHECK_PRC(o->ack_orchestration_item(o, item->lock_token, &ak2, &e), DURO_OK,
              &e);
    duro_orch_item_free(item);
    uint64_t n = 0;
    CHECK_PRC(o->count_messages(o, DURO_QUEUE_ORCHESTRATOR, "x", &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 0);
    duro_provider_close(o);
}

PV_TEST(wrapper_counts_calls_and_fires_once_on_the_nth_matching_call)
{
    duro_provider *counted = pv_open();
    duro_provider *o = faulty_provider_wrap(counted, 0);
    CHECK(o != NULL);
    CHECK_EQ(o->version, 6); /* faulty_provider_wrap: at most 6 */
    CHECK(strstr(o->name, counted->name) != NULL);
    duro_error e;
    duro_work_item w = {0};
    w.kind = DURO_WORK_EXTERNAL_EVENT;
    w.name = "poke";
    const char *ids[4] = {"a", "b", "c", "d"};
    uint64_t n;

    /* The 3rd enqueue fails; other methods do not count toward it. */
    faulty_provider_fail_nth(o, 3, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 1);
    for (int i = 0; i < 3; i++) {
        w.instance_id = ids[i];
        CHECK_PRC(o->count_messages(o, DURO_QUEUE_ORCHESTRATOR, NULL, &n, &e),
                  DURO_OK, &e);
        int rc = o->enqueue_for_orchestrator(o, &w, 0, &e);
        if (i < 2)
            CHECK_PRC(rc, DURO_OK, &e);
        else
            CHECK_PFAIL(rc, DURO_BUSY, 1, &e);
    }
    /* It fired once: the retry goes through. */
    CHECK_PRC(o->enqueue_for_orchestrator(o, &w, 0, &e), DURO_OK, &e);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_ENQUEUE_FOR_ORCHESTRATOR), 4);
    CHECK_EQ(faulty_provider_calls(counted, FAULTY_ENQUEUE_FOR_ORCHESTRATOR),
             3);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_COUNT_MESSAGES), 3);
    CHECK_EQ(faulty_provider_faults_fired(o), 1);
    CHECK_PRC(
        counted->count_messages(counted, DURO_QUEUE_ORCHESTRATOR, NULL, &n, &e),
        DURO_OK, &e);
    CHECK_EQ(n, 3);

    /* Any method: the 2nd call of whatever kind fails permanently. */
    faulty_provider_fail_nth(o, 2, FAULTY_ANY_METHOD, 0);
    CHECK_PRC(o->count_messages(o, DURO_QUEUE_WORKER, NULL, &n, &e), DURO_OK,
              &e);
    duro_instance_list *l = (duro_instance_list *)&w;
    CHECK_PFAIL(o->get_instance(o, "a", &l, &e), DURO_STORAGE, 0, &e);
    CHECK(l == NULL);
    CHECK_PRC(o->count_messages(o, DURO_QUEUE_WORKER, NULL, &n, &e), DURO_OK,
              &e);

    /* Disarming. */
    faulty_provider_fail_nth(o, 1, FAULTY_ANY_METHOD, 1);
    faulty_provider_fail_nth(o, 0, FAULTY_ANY_METHOD, 1);
    w.instance_id = ids[3];
    CHECK_PRC(o->enqueue_for_orchestrator(o, &w, 0, &e), DURO_OK, &e);
    CHECK_EQ(faulty_provider_faults_fired(o), 2);

    /* wake() is forwarded and counted, never failed. */
    faulty_provider_fail_nth(o, 1, FAULTY_ANY_METHOD, 1);
    o->wake(o, 0);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_WAKE), 1);
    CHECK_EQ(faulty_provider_calls(counted, FAULTY_WAKE), 1);
    CHECK_EQ(faulty_provider_faults_fired(o), 2);
    faulty_provider_fail_nth(o, 0, FAULTY_ANY_METHOD, 0);
    CHECK(faulty_provider_inner(o) == counted);
    CHECK_STR(faulty_method_name(FAULTY_ACK_WORK_ITEM), "ack_work_item");
    duro_provider_close(o);
}

/* ---- after-commit faults, consecutive faults, version, cache ---------- */

static uint64_t cached_four(void *user, const char *instance_id,
                            uint64_t execution_id)
{
    (void)user;
    (void)instance_id;
    (void)execution_id;
    return 4;
}

static uint64_t messages_of(duro_provider *p, duro_queue q, const char *id)
{
    uint64_t n = 0;
    duro_error e;
    CHECK_PRC(p->count_messages(p, q, id, &n, &e), DURO_OK, &e);
    return n;
}

PV_TEST(wrapper_after_commit_faults_commit_and_lose_the_reply)
{
    duro_provider *counted = pv_open();
    duro_provider *o = faulty_provider_wrap(counted, 0);
    CHECK(o != NULL);
    duro_error e;

    /* enqueue: the START commits, the caller sees DURO_BUSY */
    duro_work_item start = {0};
    start.kind = DURO_WORK_START;
    start.name = "orch";
    start.instance_id = "b";
    faulty_provider_arm(o, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 1, 1, 1,
                        FAULTY_AFTER_COMMIT);
    CHECK_PFAIL(o->enqueue_for_orchestrator(o, &start, 0, &e), DURO_BUSY, 1,
                &e);
    CHECK(strstr(e.message, "after it committed") != NULL);
    CHECK_EQ(faulty_provider_calls(counted, FAULTY_ENQUEUE_FOR_ORCHESTRATOR),
             1);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 1);
    start.instance_id = "c";
    CHECK_PRC(o->enqueue_for_orchestrator(o, &start, 0, &e), DURO_OK, &e);

    /* ack_and_fetch_orchestration_item: b's turn commits (three
     * activities), c comes back locked but is freed unseen */
    duro_orch_item *item = NULL;
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "b");
    duro_event d[4];
    memset(d, 0, sizeof(d));
    duro_work_item acts[3];
    memset(acts, 0, sizeof(acts));
    for (int i = 0; i < 4; i++) {
        d[i].event_id = (uint64_t)i + 1;
        d[i].kind = i == 0 ? DURO_EVENT_ORCHESTRATION_STARTED
                           : DURO_EVENT_ACTIVITY_SCHEDULED;
        if (i > 0) {
            acts[i - 1].kind = DURO_WORK_ACTIVITY_EXECUTE;
            acts[i - 1].instance_id = "b";
            acts[i - 1].execution_id = 1;
            acts[i - 1].source_id = (uint64_t)i + 1;
            acts[i - 1].name = "act";
        }
    }
    duro_instance_meta m = {0};
    m.status = DURO_STATUS_RUNNING;
    m.name = "orch";
    duro_orch_ack ak = {0};
    ak.execution_id = 1;
    ak.history_delta = d;
    ak.history_delta_count = 4;
    ak.worker_items = acts;
    ak.worker_item_count = 3;
    ak.meta = &m;
    faulty_provider_arm(o, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM, 1, 1, 0,
                        FAULTY_AFTER_COMMIT);
    duro_orch_item *next = (duro_orch_item *)&e; /* must be reset */
    CHECK_PFAIL(o->ack_and_fetch_orchestration_item(o, item->lock_token, &ak,
                                                    60000, NULL, &next, &e),
                DURO_STORAGE, 0, &e);
    CHECK(next == NULL);
    CHECK_EQ(faulty_provider_items_discarded(o), 1);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM),
             1);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_ACK_ORCHESTRATION_ITEM), 1);
    duro_orch_item_free(item);
    uint64_t exec = 0;
    CHECK_PRC(counted->latest_execution_id(counted, "b", &exec, &e), DURO_OK,
              &e);
    CHECK_EQ(exec, 1);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 0);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_WORKER, "b"), 3);
    /* c is held by a token nobody has */
    item = (duro_orch_item *)&e;
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item == NULL);

    /* ack_work_item: the completion is queued, the row is gone */
    duro_worker_item *w = NULL;
    CHECK_PRC(o->fetch_work_item(o, 60000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    duro_work_item done = {0};
    done.kind = DURO_WORK_ACTIVITY_COMPLETED;
    done.instance_id = "b";
    done.execution_id = 1;
    done.source_id = w->item.source_id;
    faulty_provider_arm(o, FAULTY_ACK_WORK_ITEM, 1, 1, 1, FAULTY_AFTER_COMMIT);
    CHECK_PFAIL(o->ack_work_item(o, w->lock_token, &done, &e), DURO_BUSY, 1,
                &e);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 1);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_WORKER, "b"), 2);
    /* a retry of the committed ack finds the row gone */
    CHECK_PFAIL(o->ack_work_item(o, w->lock_token, &done, &e), DURO_LOCK_LOST,
                0, &e);
    duro_worker_item_free(w);

    /* An after-commit fault whose inner call fails stays armed. */
    CHECK_PRC(o->fetch_work_item(o, 60000, &w, &e), DURO_OK, &e);
    CHECK(w != NULL);
    done.source_id = w->item.source_id;
    uint64_t fired = faulty_provider_faults_fired(o);
    faulty_provider_arm(o, FAULTY_ACK_WORK_ITEM, 1, 1, 0, FAULTY_AFTER_COMMIT);
    duro_worker_item *none = NULL;
    CHECK_PFAIL(
        o->ack_and_fetch_work_item(o, "no-such-token", &done, 60000, &none, &e),
        DURO_LOCK_LOST, 0, &e);
    CHECK(none == NULL);
    CHECK_EQ(faulty_provider_faults_fired(o), fired);
    /* ack_and_fetch_work_item: commits, the third row is freed unseen */
    duro_worker_item *wn = (duro_worker_item *)&e;
    duro_worker_item *held = w;
    w = NULL;
    CHECK_PFAIL(
        o->ack_and_fetch_work_item(o, held->lock_token, &done, 60000, &wn, &e),
        DURO_STORAGE, 0, &e);
    CHECK(wn == NULL);
    CHECK_EQ(faulty_provider_faults_fired(o), fired + 1);
    CHECK_EQ(faulty_provider_items_discarded(o), 2);
    CHECK_EQ(faulty_provider_calls(o, FAULTY_ACK_AND_FETCH_WORK_ITEM), 2);
    duro_worker_item_free(held);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 2);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_WORKER, "b"), 1);
    CHECK_PRC(o->fetch_work_item(o, 60000, &wn, &e), DURO_OK, &e);
    CHECK(wn == NULL); /* locked by the lost reply */

    /* Consecutive faults: the 2nd and 3rd enqueues fail, the 4th works. */
    duro_work_item ev = {0};
    ev.kind = DURO_WORK_EXTERNAL_EVENT;
    ev.instance_id = "b";
    ev.name = "poke";
    faulty_provider_arm(o, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 2, 2, 1,
                        FAULTY_BEFORE_CALL);
    CHECK_PRC(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_OK, &e);
    CHECK_PFAIL(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_BUSY, 1, &e);
    CHECK_PFAIL(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_BUSY, 1, &e);
    CHECK_PRC(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_OK, &e);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 4);
    /* A queued plan, and a fault reporting another code. */
    const faulty_fault lost = {.method = FAULTY_ENQUEUE_FOR_ORCHESTRATOR,
                               .nth = 1,
                               .code = DURO_LOCK_LOST};
    CHECK(faulty_provider_queue(o, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 2, 1, 1,
                                FAULTY_BEFORE_CALL));
    CHECK(faulty_provider_queue_fault(o, &lost));
    CHECK_PRC(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_OK, &e);
    CHECK_PFAIL(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_BUSY, 1, &e);
    CHECK_PFAIL(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_LOCK_LOST, 0,
                &e);
    CHECK_PRC(o->enqueue_for_orchestrator(o, &ev, 0, &e), DURO_OK, &e);
    CHECK_EQ(messages_of(counted, DURO_QUEUE_ORCHESTRATOR, "b"), 6);

    /* Understated cache: b holds 4 events; the cache says 4, the provider
     * hears 3. */
    duro_history_cache hc = {.cached_events = cached_four, .user = NULL};
    faulty_provider_understate_cache(o, 1);
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, &hc, &item, &e), DURO_OK,
              &e);
    CHECK(item != NULL);
    CHECK_STR(item ? item->instance_id : NULL, "b");
    CHECK_EQ(item ? item->history_offset : 0, 3);
    CHECK_EQ(item ? item->history_count : 0, 1);
    CHECK_PRC(o->abandon_orchestration_item(o, item->lock_token, 0, &e),
              DURO_OK, &e);
    duro_orch_item_free(item);
    faulty_provider_understate_cache(o, 0);
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, &hc, &item, &e), DURO_OK,
              &e);
    CHECK_EQ(item ? item->history_offset : 0, 4);
    duro_orch_item_free(item);

    /* With-item faults let fetches that find nothing through. */
    fired = faulty_provider_faults_fired(o);
    faulty_provider_arm(o, FAULTY_FETCH_ORCHESTRATION_ITEM, 1, 1, 1,
                        FAULTY_AFTER_COMMIT_WITH_ITEM);
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item == NULL);
    CHECK_EQ(faulty_provider_faults_fired(o), fired);
    start.instance_id = "d";
    CHECK_PRC(o->enqueue_for_orchestrator(o, &start, 0, &e), DURO_OK, &e);
    item = (duro_orch_item *)&e;
    CHECK_PFAIL(o->fetch_orchestration_item(o, 60000, NULL, &item, &e),
                DURO_BUSY, 1, &e);
    CHECK(item == NULL);
    CHECK_EQ(faulty_provider_faults_fired(o), fired + 1);
    CHECK_EQ(faulty_provider_items_discarded(o), 3);
    CHECK_PRC(o->fetch_orchestration_item(o, 60000, NULL, &item, &e), DURO_OK,
              &e);
    CHECK(item == NULL); /* d is held by the lost reply */

    /* The version-4 writes: committed, reported failed, outputs cleared. */
    const char *ids[1] = {"c"};
    duro_cancel_result res[1] = {{7, 7}};
    faulty_provider_arm(o, FAULTY_CANCEL_INSTANCES, 1, 1, 1,
                        FAULTY_AFTER_COMMIT);
    CHECK_PFAIL(o->cancel_instances(o, ids, 1, "r", "me", res, &e), DURO_BUSY,
                1, &e);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_NONE);
    duro_instance_list *l = NULL;
    CHECK_PRC(counted->get_instance(counted, "c", &l, &e), DURO_OK, &e);
    CHECK_STR(l->items[0].cancel_reason, "r"); /* it did commit */
    duro_instance_list_free(l);
    CHECK_PRC(o->cancel_instances(o, ids, 1, "again", NULL, res, &e), DURO_OK,
              &e);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    duro_bulk_filter bf = {0};
    bf.name = "orch";
    duro_bulk_result *br = (duro_bulk_result *)&e;
    faulty_provider_arm(o, FAULTY_CANCEL_MATCHING, 1, 1, 0,
                        FAULTY_AFTER_COMMIT);
    CHECK_PFAIL(o->cancel_matching(o, &bf, "swept", NULL, 0, 10, &br, &e),
                DURO_STORAGE, 0, &e);
    CHECK(br == NULL);
    CHECK_PRC(o->cancel_matching(o, &bf, "swept", NULL, 1, 10, &br, &e),
              DURO_OK, &e);
    CHECK_EQ(br->count, 0); /* what it committed is done */
    duro_bulk_result_free(br);
    duro_provider_close(o);

    /* A wrapper presenting version 1 hides the combined methods. */
    duro_provider *v1 = faulty_provider_wrap_version(counted, 0, 1);
    CHECK(v1 != NULL);
    CHECK_EQ(v1->version, 1);
    CHECK(v1->ack_and_fetch_orchestration_item == NULL);
    CHECK(v1->ack_and_fetch_work_item == NULL);
    CHECK(v1->ack_orchestration_item != NULL);
    duro_provider_close(v1);
    /* ... and one presenting version 3 the version-4 ones. */
    v1 = faulty_provider_wrap_version(counted, 0, 3);
    CHECK_EQ(v1->version, 3);
    CHECK(v1->read_activity_cancel_reason != NULL);
    CHECK(v1->set_instance_problem == NULL && v1->cancel_instances == NULL &&
          v1->cancel_matching == NULL && v1->purge_instances == NULL &&
          v1->read_store_stats == NULL);
    CHECK(v1->control_instances == NULL && v1->control_matching == NULL);
    duro_provider_close(v1);
    /* ... and one presenting version 4 the version-5 ones. */
    v1 = faulty_provider_wrap_version(counted, 0, 4);
    CHECK_EQ(v1->version, 4);
    CHECK(v1->cancel_instances != NULL && v1->cancel_matching != NULL);
    CHECK(v1->control_instances == NULL && v1->control_matching == NULL);
    duro_provider_close(v1);
    v1 = faulty_provider_wrap_version(counted, 0, 99);
    CHECK_EQ(v1->version, counted->version);
    CHECK(v1->control_instances != NULL && v1->control_matching != NULL);
    CHECK(v1->ack_and_fetch_orchestration_items != NULL);
    duro_provider_close(v1);
    /* the plain wrapper presents version 6 at most: one turn per ack */
    v1 = faulty_provider_wrap(counted, 0);
    CHECK_EQ(v1->version, 6);
    CHECK(v1->ack_and_fetch_orchestration_items == NULL);
    CHECK(v1->control_instances != NULL);
    duro_provider_close(v1);
}

int main(int argc, char **argv)
{
    static const pv_factory factory = {
        .name = "faulty(sqlite)",
        .open = faulty_open,
        .open_with_max_history = faulty_open_with_max_history,
        .open_same = faulty_open_same,
        .close = faulty_close,
        .inject_fault = faulty_inject_fault,
        .max_payload = 0,
        .ctx = NULL,
    };
    static const test_case extra[] = {
        T(wrapper_fails_the_nth_call_of_each_mutating_method),
        T(wrapper_counts_calls_and_fires_once_on_the_nth_matching_call),
        T(wrapper_after_commit_faults_commit_and_lose_the_reply),
    };
    return pv_main(argc, argv, &factory, extra,
                   sizeof(extra) / sizeof(extra[0]));
}
