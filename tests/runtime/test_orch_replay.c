/* test_orch_replay.c - end-to-end tests of replay and of everything that must
 * stay the same when orchestration code re-executes: continue-as-new chains
 * (separate histories, the latest execution's status, events raised around
 * the transition), duro_now / duro_new_guid / duro_is_replaying / duro_log
 * under forced replay, cold (fiber cache 0) versus warm runs, the three kinds
 * of nondeterminism, the history cap, and compositions (long chains, wide
 * fan-out, nested children, select losers completing later, timer loops).
 * Each test runs a real runtime on its own SQLite file. */
#include <pthread.h>
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * helpers */

static duro_history *history_of(rt_fixture *f, const char *id, uint64_t exec)
{
    duro_history *h = NULL;
    if (duro_client_read_history(f->client, id, exec, &h) != DURO_OK)
        return NULL;
    return h;
}

/* Kind of the last event of an execution, 0 when unreadable or empty. */
static int last_kind(rt_fixture *f, const char *id, uint64_t exec)
{
    duro_history *h = history_of(f, id, exec);
    int k = h && h->count ? (int)h->events[h->count - 1].kind : 0;
    duro_history_free(h);
    return k;
}

static uint64_t execution_of(rt_fixture *f, const char *id)
{
    duro_instance_info *i = NULL;
    if (duro_client_get_status(f->client, id, &i) != DURO_OK)
        return 0;
    uint64_t e = i->execution_id;
    duro_free(i);
    return e;
}

static void expect_output(rt_fixture *f, const char *id, const char *expected,
                          int64_t timeout_ms)
{
    duro_instance_info *i = rt_wait(f, id, timeout_ms);
    CHECK_MSG(i->status == DURO_STATUS_COMPLETED, "instance '%s' is %s (%s)",
              id, duro_status_name(i->status), i->error ? i->error : "");
    CHECK_STR(i->output, expected);
    duro_free(i);
}

static int str_same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Same events apart from times: kinds, ids, links, names, payloads. */
static void check_same_history(const duro_history *a, const duro_history *b,
                               const char *what)
{
    CHECK_MSG(a != NULL && b != NULL, "%s: history missing", what);
    CHECK_MSG(a->count == b->count, "%s: %zu events vs %zu", what, a->count,
              b->count);
    for (size_t i = 0; i < a->count; i++) {
        const duro_event *x = &a->events[i], *y = &b->events[i];
        CHECK_MSG(x->kind == y->kind && x->event_id == y->event_id &&
                      x->source_event_id == y->source_event_id &&
                      str_same(x->name, y->name) &&
                      str_same(x->version, y->version) &&
                      str_same(x->payload, y->payload) &&
                      str_same(x->error, y->error) &&
                      x->category == y->category &&
                      str_same(x->reason, y->reason) &&
                      str_same(x->ref_instance, y->ref_instance) &&
                      x->attempt == y->attempt && x->flags == y->flags,
                  "%s: event %zu differs: %s '%s' '%s' vs %s '%s' '%s'", what,
                  i + 1, duro_event_kind_name(x->kind), x->name ? x->name : "",
                  x->payload ? x->payload : "", duro_event_kind_name(y->kind),
                  y->name ? y->name : "", y->payload ? y->payload : "");
    }
}

/* ---- gate and blocking activities ---- */

static _Atomic int gate_open, blocker_cancelled;
static pthread_mutex_t obs_lock = PTHREAD_MUTEX_INITIALIZER;
static char blocker_reason[64];

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_add_one(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", atoi(in) + 1);
    return duro_ok(out, buf);
}

static int act_fail_once(duro_activity *a, const char *in, duro_result *out)
{
    if (duro_activity_attempt(a) == 1)
        return duro_fail(out, "first attempt fails");
    return duro_ok(out, in);
}

static int act_gated(duro_activity *a, const char *in, duro_result *out)
{
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&gate_open)) {
        if (duro_activity_wait_cancelled(a, 2))
            return duro_fail(out, "cancelled while gated");
        if (test_now_ms() > end)
            return duro_fail(out, "gate never opened");
    }
    return duro_ok(out, in);
}

static int act_blocker(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    if (duro_activity_wait_cancelled(a, 20000)) {
        const char *why = duro_activity_cancel_reason(a);
        pthread_mutex_lock(&obs_lock);
        snprintf(blocker_reason, sizeof(blocker_reason), "%s",
                 why ? why : "(null)");
        pthread_mutex_unlock(&obs_lock);
        atomic_fetch_add(&blocker_cancelled, 1);
        return duro_fail(out, "blocker cancelled");
    }
    return duro_ok(out, "blocker finished");
}

static int orch_child_echo(duro_orch *o, const char *in, duro_result *out)
{
    return duro_ok(out,
                   duro_sprintf(o, "%s:%s", duro_instance_id(o), in ? in : ""));
}

/* The recorded cancel reason, copied (never CHECK while holding a lock: a
 * failed CHECK leaves the test by longjmp). */
static const char *recorded_reason(void)
{
    static char copy[64];
    pthread_mutex_lock(&obs_lock);
    snprintf(copy, sizeof(copy), "%s", blocker_reason);
    pthread_mutex_unlock(&obs_lock);
    return copy;
}

static void register_common(rt_fixture *f)
{
    atomic_store(&gate_open, 0);
    atomic_store(&blocker_cancelled, 0);
    blocker_reason[0] = '\0';
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "AddOne", act_add_one, NULL));
    CHECK_OK(
        duro_registry_add_activity(f->reg, "FailOnce", act_fail_once, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Gated", act_gated, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Blocker", act_blocker, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "ChildEcho", NULL,
                                             orch_child_echo, NULL));
}

/* ---- log sink: keeps every line ---- */

/* ---- observations made by orchestration code: one per (instance, step)
 * and pass, in the order made ---- */

typedef struct observation {
    char instance[32];
    int step;
    int64_t now;
    char guid[40];
    int replaying;
} observation;

static observation observations[2048];
static int observation_count;

static void observe(duro_orch *o, int step, int with_guid)
{
    observation ob = {
        .step = step, .now = duro_now(o), .replaying = duro_is_replaying(o)};
    snprintf(ob.instance, sizeof(ob.instance), "%s", duro_instance_id(o));
    if (with_guid)
        snprintf(ob.guid, sizeof(ob.guid), "%s", duro_new_guid(o));
    pthread_mutex_lock(&obs_lock);
    if (observation_count < 2048)
        observations[observation_count++] = ob;
    pthread_mutex_unlock(&obs_lock);
}

static void observations_reset(void)
{
    pthread_mutex_lock(&obs_lock);
    observation_count = 0;
    pthread_mutex_unlock(&obs_lock);
}

/* Checks that every re-observation of (instance, step) saw the same time
 * and GUID as the first, that the first was made live and every later one
 * while replaying. Returns how many re-observations there were. */
static int check_observations(const char *instance, int steps)
{
    static observation snap[2048];
    int count, again = 0;
    pthread_mutex_lock(&obs_lock);
    count = observation_count;
    memcpy(snap, observations, sizeof(observation) * (size_t)count);
    pthread_mutex_unlock(&obs_lock);
    for (int s = 0; s < steps; s++) {
        const observation *first = NULL;
        for (int i = 0; i < count; i++) {
            const observation *ob = &snap[i];
            if (ob->step != s || strcmp(ob->instance, instance) != 0)
                continue;
            if (first == NULL) {
                first = ob;
                CHECK_MSG(ob->replaying == 0,
                          "%s step %d: first run reported replaying", instance,
                          s);
                continue;
            }
            again++;
            CHECK_MSG(ob->now == first->now,
                      "%s step %d: duro_now %lld on replay, %lld first",
                      instance, s, (long long)ob->now, (long long)first->now);
            CHECK_MSG(strcmp(ob->guid, first->guid) == 0,
                      "%s step %d: guid %s on replay, %s first", instance, s,
                      ob->guid, first->guid);
            CHECK_MSG(ob->replaying == 1,
                      "%s step %d: re-executed code reported "
                      "duro_is_replaying() == 0 (observation %d)",
                      instance, s, i);
        }
        CHECK_MSG(first != NULL, "%s step %d never observed", instance, s);
    }
    return again;
}

/* ------------------------------------------------------------------------
 * continue-as-new */

static int orch_can_chain(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    uint64_t exec = duro_execution_id(o);
    /* a child with a generated id in every execution: ids must not clash */
    duro_task *c = duro_call_sub_orchestration(
        o, "ChildEcho", NULL, NULL,
        duro_sprintf(o, "exec%llu", (unsigned long long)exec));
    if (duro_await(o, c) != DURO_OK)
        return duro_fail(out, duro_task_error(c));
    if (n < 2)
        return duro_continue_as_new(o, out, duro_sprintf(o, "%d", n + 1));
    duro_await(o, duro_wait_event(o, "finish"));
    return duro_ok(out, duro_sprintf(o, "done n=%d exec=%llu input=%s child=%s",
                                     n, (unsigned long long)exec, duro_input(o),
                                     duro_task_output(c)));
}

TEST(continue_as_new_chain_has_separate_histories_and_latest_status)
{
    rt_fixture f;
    rt_init(&f, "replay_can_chain.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CanChain", NULL,
                                             orch_can_chain, NULL));
    rt_start(&f);
    rt_start_instance(&f, "can", "CanChain", "0");
    WAIT_UNTIL(execution_of(&f, "can") == 3 &&
                   rt_count_events(&f, "can", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               15000);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "can", &i));
    CHECK_EQ(i->status, DURO_STATUS_RUNNING);
    CHECK_EQ(i->execution_id, 3);
    CHECK_STR(i->name, "CanChain");
    duro_free(i);

    for (uint64_t e = 1; e <= 2; e++) {
        duro_history *h = history_of(&f, "can", e);
        CHECK(h != NULL);
        CHECK_EQ(h->execution_id, e);
        CHECK_EQ(h->events[0].event_id, 1);
        CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
        char in[8], next[8];
        snprintf(in, sizeof(in), "%llu", (unsigned long long)(e - 1));
        snprintf(next, sizeof(next), "%llu", (unsigned long long)e);
        CHECK_STR(h->events[0].payload, in);
        const duro_event *last = &h->events[h->count - 1];
        CHECK_EQ(last->kind, DURO_EVENT_CONTINUED_AS_NEW);
        CHECK_STR(last->payload, next);
        CHECK_EQ(rt_count_kind(h, DURO_EVENT_SUB_ORCHESTRATION_COMPLETED), 1);
        for (size_t k = 0; k < h->count; k++)
            CHECK_EQ(h->events[k].event_id, k + 1);
        duro_history_free(h);
    }
    duro_history *h = history_of(&f, "can", 0);
    CHECK(h != NULL);
    CHECK_EQ(h->execution_id, 3);
    CHECK_STR(h->events[0].payload, "2");
    duro_history_free(h);

    CHECK_OK(duro_client_raise_event(f.client, "can", "finish", NULL));
    i = rt_wait(&f, "can", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_EQ(i->execution_id, 3);
    CHECK(i->output != NULL &&
          strncmp(i->output, "done n=2 exec=3 input=2 child=", 30) == 0);
    CHECK(i->output != NULL && strstr(i->output, ":exec3") != NULL);
    duro_free(i);
    duro_instance_filter flt = {0};
    flt.name = "ChildEcho";
    flt.status_mask = 1u << DURO_STATUS_COMPLETED;
    duro_instance_list *l = NULL;
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 3);
    duro_instance_list_free(l);
    rt_done(&f);
}

/* Continues as new until execution `in` (its input: "last"), then waits
 * for "finish". */
static int orch_can_loop(duro_orch *o, const char *in, duro_result *out)
{
    uint64_t exec = duro_execution_id(o);
    duro_task *t = duro_call_activity(o, "Echo", "x");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    if (exec < (uint64_t)atoi(in))
        return duro_continue_as_new(o, out, in);
    duro_await(o, duro_wait_event(o, "finish"));
    return duro_ok(out, duro_sprintf(o, "exec=%llu", (unsigned long long)exec));
}

/* Whether execution `exec` of `id` is still stored: DURO_NOT_FOUND once it
 * was pruned; any other failure stops the test. */
static int execution_stored(rt_fixture *f, const char *id, uint64_t exec)
{
    duro_history *h = NULL;
    int rc = duro_client_read_history(f->client, id, exec, &h);
    CHECK_MSG(rc == DURO_OK || rc == DURO_NOT_FOUND,
              "history of %s execution %llu: %s (%s)", id,
              (unsigned long long)exec, duro_errname(rc), duro_errmsg());
    int stored = rc == DURO_OK && h->count > 0;
    duro_history_free(h);
    return stored;
}

/* keep_executions bounds what a chain keeps: with 3, the turns that end
 * executions 6, 9, ... prune down to the last 3, so once execution 20
 * runs, the executions up to 15 go (the prune after 18, in the thread that
 * committed 18, may still be under way: waited for), and 18..20 remain
 * (that prune keeps the last 3 of those there when it runs: they end at 18
 * at the earliest, at 20 at the latest). With 0 every execution stays. The
 * instance itself runs unchanged. */
TEST(keep_executions_bounds_the_executions_a_chain_keeps)
{
    for (int keep = 3; keep >= 0; keep -= 3) {
        rt_fixture f;
        rt_init(&f, keep ? "replay_keep3.db" : "replay_keep0.db");
        register_common(&f);
        CHECK_OK(duro_registry_add_orchestration(f.reg, "CanLoop", NULL,
                                                 orch_can_loop, NULL));
        f.opts.keep_executions = (uint32_t)keep;
        rt_start(&f);
        rt_start_instance(&f, "loop", "CanLoop", "20");
        WAIT_UNTIL(
            execution_of(&f, "loop") == 20 &&
                rt_count_events(&f, "loop", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
            30000);
        if (keep > 0)
            for (uint64_t e = 1; e <= 15; e++)
                WAIT_UNTIL(!execution_stored(&f, "loop", e), 30000);
        for (uint64_t e = 1; e <= 20; e++)
            if (keep == 0 || e >= 18)
                CHECK_MSG(execution_stored(&f, "loop", e),
                          "keep %d: execution %llu is gone", keep,
                          (unsigned long long)e);
        CHECK_OK(duro_client_raise_event(f.client, "loop", "finish", NULL));
        expect_output(&f, "loop", "exec=20", 10000);
        rt_done(&f);
    }
}

/* Ten activities in a row, their outputs joined. */
static int orch_ten_steps(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    const char *acc = "";
    for (int k = 0; k < 10; k++) {
        duro_task *t = duro_call_activity(o, "Echo", duro_sprintf(o, "%d", k));
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        acc = duro_sprintf(o, "%s%s", acc, duro_task_output(t));
    }
    return duro_ok(out, acc);
}

/* fiber_cache_bytes bounds what the cache keeps: with 1 byte no engine is
 * kept, so every turn after an instance's first replays its history (and
 * the outputs are the same); with the default, turns resume kept fibers. */
TEST(fiber_cache_bytes_bounds_the_suspended_orchestrations_kept)
{
    for (int bounded = 1; bounded >= 0; bounded--) {
        rt_fixture f;
        rt_init(&f, bounded ? "replay_cache_1b.db" : "replay_cache_dflt.db");
        register_common(&f);
        CHECK_OK(duro_registry_add_orchestration(f.reg, "TenSteps", NULL,
                                                 orch_ten_steps, NULL));
        if (bounded)
            f.opts.fiber_cache_bytes = 1;
        rt_start(&f);
        char id[16];
        for (int i = 0; i < 5; i++) {
            snprintf(id, sizeof(id), "ten-%d", i);
            rt_start_instance(&f, id, "TenSteps", NULL);
        }
        for (int i = 0; i < 5; i++) {
            snprintf(id, sizeof(id), "ten-%d", i);
            expect_output(&f, id, "0123456789", 20000);
        }
        duro_metrics m;
        rt_final_metrics(&f, &m);
        if (bounded) {
            CHECK_EQ(m.fiber_cache_hits, 0);
            CHECK_MSG(m.replays >= 5 * 10, "%llu replays",
                      (unsigned long long)m.replays);
        } else {
            CHECK_MSG(m.fiber_cache_hits >= 5, "%llu cache hits",
                      (unsigned long long)m.fiber_cache_hits);
        }
        rt_done(&f);
    }
}

static int orch_can_events(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    if (duro_execution_id(o) == 1) {
        duro_await(o, duro_wait_event(o, "go"));
        return duro_continue_as_new(o, out, "next");
    }
    const char *got[3];
    for (int k = 0; k < 3; k++) {
        duro_task *d = duro_wait_event(o, "data");
        duro_await(o, d);
        got[k] = duro_task_output(d);
    }
    return duro_ok(out,
                   duro_sprintf(o, "%s,%s,%s|exec=%llu", got[0], got[1], got[2],
                                (unsigned long long)duro_execution_id(o)));
}

static void setup_can_events(rt_fixture *f, const char *db)
{
    rt_init(f, db);
    register_common(f);
    CHECK_OK(duro_registry_add_orchestration(f->reg, "CanEvents", NULL,
                                             orch_can_events, NULL));
    rt_start(f);
}

TEST(continue_as_new_events_raised_after_the_transition_reach_it)
{
    rt_fixture f;
    setup_can_events(&f, "replay_can_events_after.db");
    rt_start_instance(&f, "ce", "CanEvents", NULL);
    WAIT_UNTIL(rt_count_events(&f, "ce", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "ce", "go", NULL));
    WAIT_UNTIL(last_kind(&f, "ce", 1) == DURO_EVENT_CONTINUED_AS_NEW, 10000);
    /* execution 2 may not have run its first turn yet */
    CHECK_OK(duro_client_raise_event(f.client, "ce", "data", "a"));
    CHECK_OK(duro_client_raise_event(f.client, "ce", "data", "b"));
    CHECK_OK(duro_client_raise_event(f.client, "ce", "data", "c"));
    expect_output(&f, "ce", "a,b,c|exec=2", 10000);
    rt_done(&f);
}

/* The trigger of the continue-as-new and later events arrive in one batch:
 * the events after the trigger belong to the next execution. */
TEST(continue_as_new_events_in_the_triggering_batch_are_not_lost)
{
    rt_fixture f;
    setup_can_events(&f, "replay_can_events_batch.db");
    rt_start_instance(&f, "cb", "CanEvents", NULL);
    WAIT_UNTIL(rt_count_events(&f, "cb", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    rt_stop(&f);
    CHECK_OK(duro_client_raise_event(f.client, "cb", "go", NULL));
    CHECK_OK(duro_client_raise_event(f.client, "cb", "data", "a"));
    CHECK_OK(duro_client_raise_event(f.client, "cb", "data", "b"));
    CHECK_OK(duro_client_raise_event(f.client, "cb", "data", "c"));
    rt_start(&f);
    expect_output(&f, "cb", "a,b,c|exec=2", 8000);
    rt_done(&f);
}

static _Atomic int can_hold, can_entered, can_release;

/* Execution 1 receives "data" before "go" without consuming it, so it is
 * carried over; while the continuing turn runs, another "data" is raised. */
static int orch_can_order(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    if (duro_execution_id(o) == 1) {
        duro_await(o, duro_wait_event(o, "go"));
        if (!duro_is_replaying(o) && atomic_exchange(&can_hold, 0)) {
            atomic_store(&can_entered, 1);
            int64_t end = test_now_ms() + 10000;
            while (!atomic_load(&can_release) && test_now_ms() < end)
                test_sleep_ms(1);
        }
        return duro_continue_as_new(o, out, "next");
    }
    duro_task *x = duro_wait_event(o, "data");
    duro_await(o, x);
    duro_task *y = duro_wait_event(o, "data");
    duro_await(o, y);
    return duro_ok(out, duro_sprintf(o, "%s,%s", duro_task_output(x),
                                     duro_task_output(y)));
}

TEST(continue_as_new_carries_unconsumed_events_in_raise_order)
{
    atomic_store(&can_hold, 0);
    atomic_store(&can_entered, 0);
    atomic_store(&can_release, 0);
    rt_fixture f;
    rt_init(&f, "replay_can_order.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CanOrder", NULL,
                                             orch_can_order, NULL));
    rt_start(&f);
    rt_start_instance(&f, "co", "CanOrder", NULL);
    WAIT_UNTIL(rt_count_events(&f, "co", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "co", "data", "a"));
    WAIT_UNTIL(rt_count_events(&f, "co", DURO_EVENT_EVENT_RAISED) == 1, 10000);
    atomic_store(&can_hold, 1);
    CHECK_OK(duro_client_raise_event(f.client, "co", "go", NULL));
    WAIT_UNTIL(atomic_load(&can_entered), 10000);
    /* raised after "a", while the turn that continues as new runs */
    CHECK_OK(duro_client_raise_event(f.client, "co", "data", "b"));
    atomic_store(&can_release, 1);
    expect_output(&f, "co", "a,b", 10000);
    rt_done(&f);
}

static int orch_can_cancels(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    if (duro_execution_id(o) == 2)
        return duro_ok(out, "second");
    duro_call_activity(o, "Blocker", NULL); /* never awaited */
    duro_await(o, duro_timer(o, 100));
    return duro_continue_as_new(o, out, NULL);
}

TEST(continue_as_new_cancels_outstanding_activities)
{
    rt_fixture f;
    rt_init(&f, "replay_can_cancels.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CanCancels", NULL,
                                             orch_can_cancels, NULL));
    rt_start(&f);
    rt_start_instance(&f, "cc", "CanCancels", NULL);
    expect_output(&f, "cc", "second", 10000);
    duro_history *h = history_of(&f, "cc", 1);
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_STR(req ? req->reason : NULL, DURO_REASON_CONTINUED_AS_NEW);
    duro_history_free(h);
    WAIT_UNTIL(atomic_load(&blocker_cancelled) == 1, 10000);
    CHECK_STR(recorded_reason(), DURO_REASON_CONTINUED_AS_NEW);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * determinism helpers under replay */

/* Observes duro_now and a GUID at the start and after each of 4 activities;
 * returns them all. */
static int orch_now_guid(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    const char *s = "";
    for (int k = 0; k <= 4; k++) {
        if (k > 0)
            duro_await(o,
                       duro_call_activity(o, "Echo", duro_sprintf(o, "%d", k)));
        int64_t now = duro_now(o);
        const char *g = duro_new_guid(o);
        observation ob = {
            .step = k, .now = now, .replaying = duro_is_replaying(o)};
        snprintf(ob.instance, sizeof(ob.instance), "%s|%s", duro_instance_id(o),
                 in);
        snprintf(ob.guid, sizeof(ob.guid), "%s", g);
        pthread_mutex_lock(&obs_lock);
        if (observation_count < 2048)
            observations[observation_count++] = ob;
        pthread_mutex_unlock(&obs_lock);
        s = duro_sprintf(o, "%s%s%lld/%s", s, k ? "," : "", (long long)now, g);
    }
    return duro_ok(out, s);
}

/* Parses "now/guid,now/guid,..." into arrays. */
static int parse_now_guid(const char *s, int64_t *nows, char guids[][40],
                          int max)
{
    int n = 0;
    while (s != NULL && *s && n < max) {
        long long v = 0;
        char g[40] = "";
        if (sscanf(s, "%lld/%36[0-9a-f-]", &v, g) != 2)
            break;
        nows[n] = v;
        snprintf(guids[n], 40, "%s", g);
        n++;
        s = strchr(s, ',');
        if (s)
            s++;
    }
    return n;
}

static int is_guid(const char *g)
{
    static const int dash[] = {8, 13, 18, 23};
    if (strlen(g) != 36)
        return 0;
    for (int i = 0, d = 0; i < 36; i++) {
        if (d < 4 && i == dash[d]) {
            if (g[i] != '-')
                return 0;
            d++;
        } else if (!((g[i] >= '0' && g[i] <= '9') ||
                     (g[i] >= 'a' && g[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

/* Runs NowGuid as "ng" on its own file with the given cache size; returns
 * the output (caller frees) and checks duro_now against history. */
static char *run_now_guid(const char *db, size_t cache, const char *tag)
{
    rt_fixture f;
    rt_init(&f, db);
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "NowGuid", NULL,
                                             orch_now_guid, NULL));
    f.opts.fiber_cache_size = cache;
    rt_start(&f);
    rt_start_instance(&f, "ng", "NowGuid", tag);
    duro_instance_info *i = rt_wait(&f, "ng", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    char *output = i->output ? strdup(i->output) : NULL;
    duro_free(i);
    int64_t nows[5];
    char guids[5][40];
    CHECK_EQ(parse_now_guid(output, nows, guids, 5), 5);
    duro_history *h = rt_history(&f, "ng");
    /* duro_now: when the turn that recorded the latest consumed event
       began */
    const duro_event *st =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_STARTED, 0);
    CHECK(st != NULL);
    CHECK_EQ(nows[0], st->timestamp_ms);
    for (int k = 1; k < 5; k++) {
        const duro_event *c =
            rt_find_event(h, DURO_EVENT_ACTIVITY_COMPLETED, k - 1);
        CHECK(c != NULL);
        CHECK_MSG(nows[k] == c->timestamp_ms,
                  "%s step %d: duro_now %lld, ActivityCompleted at %lld", tag,
                  k, (long long)nows[k], (long long)c->timestamp_ms);
    }
    for (int k = 0; k < 5; k++) {
        CHECK_MSG(is_guid(guids[k]), "not a guid: %s", guids[k]);
        for (int j = 0; j < k; j++)
            CHECK(strcmp(guids[j], guids[k]) != 0);
    }
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    if (cache == 0)
        CHECK_INT(m.replays, >, 0);
    rt_done(&f);
    return output;
}

TEST(now_and_guid_are_the_same_on_replay_warm_and_cold)
{
    observations_reset();
    char *warm = run_now_guid("replay_now_warm.db", 1024, "warm");
    char *cold = run_now_guid("replay_now_cold.db", 0, "cold");
    /* every replay of the cold run saw the values of the first pass */
    CHECK_INT(check_observations("ng|cold", 5), >, 0);
    check_observations("ng|warm", 5); /* whatever replays happened */
    /* same instance id and execution: same GUIDs warm and cold */
    int64_t wn[5], cn[5];
    char wg[5][40], cg[5][40];
    CHECK_EQ(parse_now_guid(warm, wn, wg, 5), 5);
    CHECK_EQ(parse_now_guid(cold, cn, cg, 5), 5);
    for (int k = 0; k < 5; k++)
        CHECK_STR(wg[k], cg[k]);
    free(warm);
    free(cold);
}

/* Observes at the start, after two activities, after a timer (with an event
 * wait already issued, so no command follows before the next wait) and
 * after the event; logs at each of these points. */
static int orch_observed(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    observe(o, 0, 0);
    duro_log(o, DURO_LOG_WARN, "LOGMARK start");
    duro_await(o, duro_call_activity(o, "Echo", "1"));
    observe(o, 1, 0);
    duro_log(o, DURO_LOG_WARN, "LOGMARK step 1");
    duro_await(o, duro_call_activity(o, "Echo", "2"));
    observe(o, 2, 0);
    duro_log(o, DURO_LOG_WARN, "LOGMARK step 2");
    duro_task *t = duro_timer(o, 1);
    duro_task *e = duro_wait_event(o, "go");
    duro_await(o, t);
    observe(o, 3, 0);
    duro_log(o, DURO_LOG_WARN, "LOGMARK after-timer");
    duro_await(o, e);
    observe(o, 4, 0);
    duro_log(o, DURO_LOG_WARN, "LOGMARK after-event");
    duro_log(o, DURO_LOG_DEBUG, "LOGMARK below the level");
    return duro_ok(out, "observed");
}

static void run_observed(rt_fixture *f, const char *db)
{
    observations_reset();
    rt_log_reset();
    rt_init(f, db);
    register_common(f);
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Observed", NULL,
                                             orch_observed, NULL));
    f->opts.fiber_cache_size = 0; /* every turn replays */
    f->opts.log_level = DURO_LOG_WARN;
    f->opts.log_fn = rt_log_sink;
    rt_start(f);
    rt_start_instance(f, "obs", "Observed", NULL);
    WAIT_UNTIL(rt_count_events(f, "obs", DURO_EVENT_TIMER_FIRED) == 1, 10000);
    CHECK_OK(duro_client_raise_event(f->client, "obs", "go", NULL));
    expect_output(f, "obs", "observed", 10000);
}

TEST(is_replaying_is_true_exactly_when_code_re_executes)
{
    rt_fixture f;
    run_observed(&f, "replay_is_replaying.db");
    CHECK_INT(check_observations("obs", 5), >=, 8);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.replays, >=, 4);
    rt_done(&f);
}

TEST(log_is_written_once_per_logical_call_under_replay)
{
    rt_fixture f;
    run_observed(&f, "replay_log.db");
    static const char *marks[] = {"LOGMARK start", "LOGMARK step 1",
                                  "LOGMARK step 2", "LOGMARK after-timer",
                                  "LOGMARK after-event"};
    for (size_t k = 0; k < 5; k++)
        CHECK_MSG(rt_log_hits(marks[k]) == 1, "'%s' logged %d times", marks[k],
                  rt_log_hits(marks[k]));
    CHECK_EQ(rt_log_hits("LOGMARK below the level"), 0);
    CHECK_EQ(rt_log_hits("LOGMARK"), 5);
    rt_done(&f);
    rt_log_reset();
}

/* ------------------------------------------------------------------------
 * cold versus warm */

static int orch_multi(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Echo", "step1");
    duro_await(o, a);
    duro_await(o, duro_timer(o, 10));
    duro_task *c =
        duro_call_sub_orchestration(o, "ChildEcho", NULL, NULL, "kid");
    duro_await(o, c);
    const char *g = duro_new_guid(o);
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.initial_delay_ms = 10;
    p.backoff = DURO_BACKOFF_FIXED;
    duro_task *r = duro_call_activity_with_retry(o, "FailOnce", g, &p);
    duro_await(o, r);
    duro_task *e = duro_wait_event(o, "go");
    duro_await(o, e);
    duro_task *fan[5];
    for (int k = 0; k < 5; k++)
        fan[k] = duro_call_activity(o, "Echo", duro_sprintf(o, "f%d", k));
    duro_join_n(o, fan, 5);
    const char *s = duro_sprintf(o, "%s|%s|%s|%s|%s", duro_task_output(a),
                                 duro_task_output(c), g, duro_task_output(r),
                                 duro_task_output(e));
    for (int k = 0; k < 5; k++)
        s = duro_sprintf(o, "%s|%s", s, duro_task_output(fan[k]));
    return duro_ok(out, s);
}

typedef struct multi_run {
    char *output;
    duro_history *parent, *child;
    duro_metrics metrics;
} multi_run;

static void run_multi(const char *db, size_t cache, multi_run *r)
{
    memset(r, 0, sizeof(*r));
    rt_fixture f;
    rt_init(&f, db);
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Multi", NULL, orch_multi,
                                             NULL));
    f.opts.fiber_cache_size = cache;
    /* one slot: the fan-out completes in the same order in both runs */
    f.opts.worker_concurrency = 1;
    rt_start(&f);
    rt_start_instance(&f, "multi", "Multi", NULL);
    WAIT_UNTIL(rt_count_events(&f, "multi", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               15000);
    CHECK_OK(duro_client_raise_event(f.client, "multi", "go", "went"));
    duro_instance_info *i = rt_wait(&f, "multi", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    r->output = i->output ? strdup(i->output) : NULL;
    duro_free(i);
    r->parent = rt_history(&f, "multi");
    const duro_event *s =
        rt_find_event(r->parent, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    CHECK(s != NULL);
    r->child = rt_history(&f, s->ref_instance);
    rt_final_metrics(&f, &r->metrics);
    rt_done(&f);
}

TEST(cold_cache_gives_the_same_outputs_and_histories_as_warm)
{
    multi_run warm, cold;
    run_multi("replay_multi_warm.db", 1024, &warm);
    run_multi("replay_multi_cold.db", 0, &cold);
    CHECK(warm.output != NULL);
    CHECK_STR(warm.output, cold.output);
    check_same_history(warm.parent, cold.parent, "parent");
    check_same_history(warm.child, cold.child, "child");
    CHECK_INT(rt_count_kind(warm.parent, DURO_EVENT_ACTIVITY_FAILED), ==, 1);
    CHECK_INT(cold.metrics.replays, >, 0);
    CHECK_EQ(cold.metrics.fiber_cache_hits, 0);
    CHECK_INT(warm.metrics.fiber_cache_hits, >, 0);
    CHECK_EQ(warm.metrics.nondeterminism_errors, 0);
    CHECK_EQ(cold.metrics.nondeterminism_errors, 0);
    free(warm.output);
    free(cold.output);
    duro_history_free(warm.parent);
    duro_history_free(warm.child);
    duro_history_free(cold.parent);
    duro_history_free(cold.child);
}

/* ------------------------------------------------------------------------
 * nondeterminism */

static int orch_nd_original(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_call_activity(o, "A1", "x"));
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "original");
}

static int orch_nd_other_activity(duro_orch *o, const char *in,
                                  duro_result *out)
{
    (void)in;
    duro_await(o, duro_call_activity(o, "B1", "x"));
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "changed");
}

static int orch_nd_timer(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_timer(o, 10));
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "changed");
}

static int orch_nd_early(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    return duro_ok(out, "early");
}

/* Runs version A of "ND" to its event wait, restarts with `changed` under
 * the same name and version, and checks the instance fails with a
 * nondeterminism error naming event 2 and containing `want1` and
 * `want2`. */
static void run_nondeterminism(const char *db, duro_orchestration_fn changed,
                               const char *want1, const char *want2)
{
    rt_fixture f;
    rt_init(&f, db);
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "A1", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "B1", act_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "ND", "1", orch_nd_original,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "nd", "ND", NULL);
    WAIT_UNTIL(rt_count_events(&f, "nd", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    rt_stop(&f);
    duro_registry_destroy(f.reg);
    CHECK_OK(duro_registry_create(&f.reg));
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "A1", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "B1", act_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "ND", "1", changed, NULL));
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "nd", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "nd", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    const char *err = i->error ? i->error : "";
    CHECK_MSG(strstr(err, "nondeterminism") && strstr(err, "event 2") &&
                  strstr(err, want1) && strstr(err, want2),
              "error '%s' should name event 2, '%s' and '%s'", err, want1,
              want2);
    duro_free(i);
    duro_history *h = rt_history(&f, "nd");
    CHECK(h->count > 0);
    const duro_event *last = &h->events[h->count - 1];
    CHECK_EQ(last->kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_EQ(last->category, DURO_CATEGORY_CONFIGURATION);
    /* the recorded history is kept as it was */
    CHECK_STR(h->events[1].name, "A1");
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.nondeterminism_errors, 1);
    rt_done(&f);
}

TEST(nondeterminism_a_different_activity)
{
    run_nondeterminism("replay_nd_activity.db", orch_nd_other_activity,
                       "ActivityScheduled 'B1'", "ActivityScheduled 'A1'");
}

TEST(nondeterminism_a_timer_instead_of_an_activity)
{
    run_nondeterminism("replay_nd_timer.db", orch_nd_timer, "TimerCreated",
                       "ActivityScheduled 'A1'");
}

TEST(nondeterminism_returning_early)
{
    run_nondeterminism("replay_nd_early.db", orch_nd_early, "returned",
                       "ActivityScheduled 'A1'");
}

static _Atomic int nd_variant;

/* Deliberately nondeterministic: reads a global that the test flips. */
static int orch_nd_toggle(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(
        o, duro_call_activity(o, atomic_load(&nd_variant) ? "B1" : "A1", "x"));
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, "toggled");
}

TEST(nondeterminism_found_by_replay_without_restart)
{
    atomic_store(&nd_variant, 0);
    rt_fixture f;
    rt_init(&f, "replay_nd_toggle.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "A1", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "B1", act_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Toggle", NULL,
                                             orch_nd_toggle, NULL));
    f.opts.fiber_cache_size = 0;
    rt_start(&f);
    rt_start_instance(&f, "tg", "Toggle", NULL);
    WAIT_UNTIL(rt_count_events(&f, "tg", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    atomic_store(&nd_variant, 1);
    CHECK_OK(duro_client_raise_event(f.client, "tg", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "tg", 10000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(i->error && strstr(i->error, "event 2") && strstr(i->error, "'B1'") &&
          strstr(i->error, "'A1'"));
    duro_free(i);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.nondeterminism_errors, 1);
    CHECK_EQ(m.orchestrations_failed, 1);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * history cap */

static int orch_looper(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    for (int k = 0; k < 1000; k++)
        duro_await(o, duro_call_activity(o, "Echo", duro_sprintf(o, "%d", k)));
    return duro_ok(out, "no limit");
}

TEST(history_cap_fails_the_instance_without_truncating_history)
{
    rt_fixture f;
    rt_init(&f, "replay_cap.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Looper", NULL, orch_looper,
                                             NULL));
    f.opts.max_history_events = 20;
    rt_start(&f);
    rt_start_instance(&f, "loop", "Looper", NULL);
    duro_instance_info *i = rt_wait(&f, "loop", 15000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK(i->error && strstr(i->error, "history limit") != NULL);
    duro_free(i);
    duro_history *h = rt_history(&f, "loop");
    CHECK(h->count > 0);
    /* whole turns only: ids dense, every scheduled activity resolved or
       cancelled, ending with the failure */
    for (size_t k = 0; k < h->count; k++)
        CHECK_EQ(h->events[k].event_id, k + 1);
    const duro_event *last = &h->events[h->count - 1];
    CHECK_EQ(last->kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK(last->error && strstr(last->error, "history limit") != NULL);
    CHECK_INT(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), >=, 5);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED),
             rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED) +
                 rt_count_kind(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED));
    CHECK_INT(h->count, <=, 20 + 2);
    duro_history_free(h);
    rt_done(&f);
}

/* The failure names the cap that applied: the runtime's option above, the
 * store's URL parameter here (the runtime's own cap is left far higher). */
TEST(history_cap_of_the_store_is_named_in_the_failure)
{
    rt_fixture f;
    rt_init(&f, "replay_store_cap.db");
    char url[600];
    snprintf(url, sizeof(url), "%s?max_history=3", f.url);
    f.url = url;
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Looper", NULL, orch_looper,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "scap", "Looper", NULL);
    duro_instance_info *i = rt_wait(&f, "scap", 15000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK(i->error != NULL);
    CHECK_MSG(strstr(i->error, "max_history (3)") != NULL &&
                  strstr(i->error, "50000") == NULL,
              "error: %s", i->error);
    duro_free(i);
    rt_done(&f);
}

TEST(history_cap_of_the_runtime_is_named_in_the_failure)
{
    rt_fixture f;
    rt_init(&f, "replay_rt_cap.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Looper", NULL, orch_looper,
                                             NULL));
    f.opts.max_history_events = 7;
    rt_start(&f);
    rt_start_instance(&f, "rcap", "Looper", NULL);
    duro_instance_info *i = rt_wait(&f, "rcap", 15000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK(i->error != NULL);
    CHECK_MSG(strstr(i->error, "max_history_events (7)") != NULL, "error: %s",
              i->error);
    duro_free(i);
    rt_done(&f);
}

/* The store's cap reached where not even the failure's events fit: a
 * fan-out of CAP_FAN activities fills the store's cap of CAP_EVENTS but one
 * event (OrchestrationStarted and the schedules), the first two complete
 * once the others run, and those wait for their cancellation. The turn of those
 * two completions is refused, and so is the failure (a cancel per waiting
 * activity and OrchestrationFailed): the instance is still failed with
 * the failing turn's effects - the waiting activities are cancelled, the
 * parent learns of it. */
#define CAP_FAN 10
#define CAP_EVENTS (CAP_FAN + 2)

static _Atomic int cap_waiting;   /* activities waiting for a cancel */
static _Atomic int cap_cancelled; /* ... that saw it, as instance_failed */
static _Atomic int cap_started;

static int act_cap(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    if (atomic_fetch_add(&cap_started, 1) < 2) {
        /* once the others wait: their cancellation is what is tested */
        int64_t deadline = test_now_ms() + 60000;
        while (atomic_load(&cap_waiting) < CAP_FAN - 2 &&
               test_now_ms() < deadline)
            duro_activity_wait_cancelled(a, 1);
        return duro_ok(out, "quick");
    }
    atomic_fetch_add(&cap_waiting, 1);
    /* returns at the cancellation; the test's deadline is far below */
    if (duro_activity_wait_cancelled(a, 120000) &&
        strcmp(duro_activity_cancel_reason(a), "instance_failed") == 0)
        atomic_fetch_add(&cap_cancelled, 1);
    return duro_ok(out, "late");
}

static int orch_cap_fan(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t[CAP_FAN];
    for (int k = 0; k < CAP_FAN; k++)
        t[k] = duro_call_activity(o, "CapAct", NULL);
    if (duro_join_n(o, t, CAP_FAN) != DURO_OK)
        return duro_fail(out, duro_errmsg());
    return duro_ok(out, "all done");
}

static int orch_cap_parent(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *c =
        duro_call_sub_orchestration(o, "CapFan", NULL, "cap-child", NULL);
    if (duro_await(o, c) != DURO_OK)
        return duro_ok(out, "child failed");
    return duro_ok(out, "child completed");
}

TEST(store_cap_with_no_room_for_the_failure_still_cancels_and_tells)
{
    rt_fixture f;
    rt_init(&f, "replay_cap_full.db");
    char url[600];
    snprintf(url, sizeof(url), "%s?max_history=%d", f.url, CAP_EVENTS);
    f.url = url;
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "CapAct", act_cap, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CapFan", NULL,
                                             orch_cap_fan, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "CapParent", NULL,
                                             orch_cap_parent, NULL));
    f.opts.worker_concurrency = CAP_FAN; /* every activity runs at once */
    rt_start(&f);
    rt_start_instance(&f, "cap-parent", "CapParent", NULL);

    /* The parent learns of its child's end... */
    expect_output(&f, "cap-parent", "child failed", 60000);
    duro_instance_info *i = rt_wait(&f, "cap-child", 1000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_MSG(i->error && strstr(i->error, "history limit reached"),
              "error: %s", i->error ? i->error : "(none)");
    duro_free(i);
    /* ...and every activity still waiting is cancelled, none left queued */
    WAIT_UNTIL(atomic_load(&cap_cancelled) == CAP_FAN - 2, 60000);
    CHECK_EQ(atomic_load(&cap_waiting), CAP_FAN - 2);
    duro_history *h = rt_history(&f, "cap-child");
    CHECK_INT(h->count, <=, CAP_EVENTS);
    duro_history_free(h);
    uint64_t left = 1;
    duro_error e;
    duro_provider *p = NULL;
    CHECK_PRC(duro_provider_open(f.url, &p, &e), DURO_OK, &e);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, "cap-child", &left, &e),
              DURO_OK, &e);
    CHECK_EQ(left, 0);
    duro_provider_close(p);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * compositions */

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    const char *v = in;
    for (int k = 0; k < 20; k++) {
        duro_task *t = duro_call_activity(o, "AddOne", v);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        v = duro_task_output(t);
    }
    return duro_ok(out, v);
}

static int orch_fan(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    duro_task **t = duro_orch_alloc(o, sizeof(duro_task *) * (size_t)n);
    if (t == NULL)
        return duro_fail(out, "no memory");
    for (int k = 0; k < n; k++)
        t[k] = duro_call_activity(o, "Echo", duro_sprintf(o, "%d", k));
    if (duro_join_n(o, t, (size_t)n) != DURO_OK)
        return duro_fail(out, "a task failed");
    long sum = 0;
    for (int k = 0; k < n; k++)
        sum += atol(duro_task_output(t[k]));
    return duro_ok(out, duro_sprintf(o, "%ld", sum));
}

static int orch_nest(duro_orch *o, const char *in, duro_result *out)
{
    int depth = atoi(in);
    if (depth <= 1)
        return duro_ok(out, "L1");
    duro_task *c = duro_call_sub_orchestration(
        o, "Nest", NULL, NULL, duro_sprintf(o, "%d", depth - 1));
    if (duro_await(o, c) != DURO_OK)
        return duro_fail(out, duro_task_error(c));
    return duro_ok(out, duro_sprintf(o, "L%d(%s)", depth, duro_task_output(c)));
}

static int orch_timer_loop(duro_orch *o, const char *in, duro_result *out)
{
    int n = 0;
    for (int k = 0; k < atoi(in); k++)
        n += duro_await(o, duro_timer(o, 20)) == DURO_OK;
    return duro_ok(out, duro_sprintf(o, "%d", n));
}

TEST(sequential_fan_out_nested_and_timer_loop)
{
    rt_fixture f;
    rt_init(&f, "replay_compose.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Chain", NULL, orch_chain,
                                             NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Fan", NULL, orch_fan, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Nest", NULL, orch_nest, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "TimerLoop", NULL,
                                             orch_timer_loop, NULL));
    rt_start(&f);
    rt_start_instance(&f, "chain", "Chain", "0");
    rt_start_instance(&f, "fan", "Fan", "100");
    rt_start_instance(&f, "nest", "Nest", "3");
    rt_start_instance(&f, "timers", "TimerLoop", "10");
    expect_output(&f, "chain", "20", 30000);
    expect_output(&f, "fan", "4950", 30000);
    expect_output(&f, "nest", "L3(L2(L1))", 30000);
    expect_output(&f, "timers", "10", 30000);

    duro_history *h = rt_history(&f, "chain");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 20);
    for (int k = 0; k < 20; k++) {
        const duro_event *c =
            rt_find_event(h, DURO_EVENT_ACTIVITY_COMPLETED, k);
        char want[8];
        snprintf(want, sizeof(want), "%d", k + 1);
        CHECK_STR(c ? c->payload : NULL, want);
    }
    duro_history_free(h);
    h = rt_history(&f, "fan");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 100);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 100);
    duro_history_free(h);

    /* three instances, each the parent of the next */
    duro_instance_filter flt = {0};
    flt.name = "Nest";
    duro_instance_list *l = NULL;
    CHECK_OK(duro_client_list(f.client, &flt, &l));
    CHECK_EQ(l->count, 3);
    int roots = 0;
    for (size_t k = 0; k < l->count; k++) {
        const duro_instance_info *x = &l->items[k];
        CHECK_EQ(x->status, DURO_STATUS_COMPLETED);
        if (x->parent_instance == NULL) {
            roots++;
            continue;
        }
        int found = 0;
        for (size_t j = 0; j < l->count; j++)
            found |= strcmp(l->items[j].instance_id, x->parent_instance) == 0;
        CHECK(found);
    }
    CHECK_EQ(roots, 1);
    duro_instance_list_free(l);

    h = rt_history(&f, "timers");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_CREATED), 10);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_FIRED), 10);
    for (int k = 0; k < 10; k++) {
        const duro_event *c = rt_find_event(h, DURO_EVENT_TIMER_CREATED, k);
        const duro_event *x = rt_find_event(h, DURO_EVENT_TIMER_FIRED, k);
        CHECK(c && x);
        CHECK_EQ(x->source_event_id, c->event_id);
        CHECK_INT(x->timestamp_ms, >=, c->fire_at_ms);
        if (k > 0) {
            const duro_event *prev =
                rt_find_event(h, DURO_EVENT_TIMER_FIRED, k - 1);
            CHECK_INT(c->fire_at_ms, >=, prev->timestamp_ms + 20);
        }
    }
    duro_history_free(h);
    rt_done(&f);
}

/* wait_any's loser completes later, while the code waits on something
 * else; every turn replays through it. */
static int orch_any_later(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Gated", "slow");
    duro_task *t = duro_timer(o, 20);
    duro_task *w = duro_wait_any(o, a, t);
    duro_await(o, duro_wait_event(o, "go"));
    int rc = duro_await(o, a);
    duro_task *b = duro_call_activity(o, "Echo", "after");
    duro_await(o, b);
    return duro_ok(out,
                   duro_sprintf(o, "%s|%s|%s", w == t ? "timer" : "activity",
                                rc == DURO_OK ? duro_task_output(a) : "failed",
                                duro_task_output(b)));
}

/* select's loser is cancelled; its completion still arrives later. */
static int orch_select_late(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Blocker", NULL);
    duro_task *t = duro_timer(o, 50);
    duro_task *w = duro_select(o, a, t);
    duro_await(o, duro_wait_event(o, "go"));
    duro_task *b = duro_call_activity(o, "Echo", "after");
    duro_await(o, b);
    return duro_ok(out,
                   duro_sprintf(o, "%s|%s|%d|%s", w == t ? "timer" : "activity",
                                duro_task_output(b), duro_task_failed(a),
                                duro_errname(duro_await(o, a))));
}

TEST(select_losers_completing_later_replay_deterministically)
{
    rt_fixture f;
    rt_init(&f, "replay_losers.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "AnyLater", NULL,
                                             orch_any_later, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "SelectLate", NULL,
                                             orch_select_late, NULL));
    f.opts.fiber_cache_size = 0;
    rt_start(&f);

    rt_start_instance(&f, "al", "AnyLater", NULL);
    WAIT_UNTIL(rt_count_events(&f, "al", DURO_EVENT_TIMER_FIRED) == 1, 10000);
    atomic_store(&gate_open, 1);
    WAIT_UNTIL(rt_count_events(&f, "al", DURO_EVENT_ACTIVITY_COMPLETED) == 1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "al", "go", NULL));
    expect_output(&f, "al", "timer|slow|after", 10000);

    rt_start_instance(&f, "sl", "SelectLate", NULL);
    WAIT_UNTIL(
        rt_count_events(&f, "sl", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED) == 1,
        10000);
    duro_history *h = rt_history(&f, "sl");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0);
    uint64_t loser = sched ? sched->event_id : 0;
    duro_history_free(h);
    /* the loser's worker finished just as it lost: its completion is
       queued after the cancellation */
    duro_provider *p = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f.url, &p, &err), DURO_OK, &err);
    duro_work_item late = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                           .instance_id = "sl",
                           .execution_id = 1,
                           .source_id = loser,
                           .payload = "late"};
    CHECK_PRC(p->enqueue_for_orchestrator(p, &late, 0, &err), DURO_OK, &err);
    uint64_t queued = 1;
    WAIT_UNTIL((p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "sl", &queued,
                                  &err) == DURO_OK &&
                queued == 0),
               10000);
    duro_provider_close(p);
    CHECK_OK(duro_client_raise_event(f.client, "sl", "go", NULL));
    expect_output(&f, "sl", "timer|after|1|DURO_CANCELLED", 10000);
    h = rt_history(&f, "sl");
    const duro_event *cancel =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(cancel != NULL);
    for (size_t k = 0; k < h->count; k++)
        if (h->events[k].kind == DURO_EVENT_ACTIVITY_COMPLETED &&
            h->events[k].source_event_id == loser)
            CHECK_INT(h->events[k].event_id, >, cancel->event_id);
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.nondeterminism_errors, 0);
    CHECK_INT(m.replays, >, 0);
    rt_done(&f);
}

TEST_MAIN(T(continue_as_new_chain_has_separate_histories_and_latest_status),
          T(continue_as_new_events_raised_after_the_transition_reach_it),
          T(continue_as_new_events_in_the_triggering_batch_are_not_lost),
          T(continue_as_new_carries_unconsumed_events_in_raise_order),
          T(continue_as_new_cancels_outstanding_activities),
          T(keep_executions_bounds_the_executions_a_chain_keeps),
          T(fiber_cache_bytes_bounds_the_suspended_orchestrations_kept),
          T(now_and_guid_are_the_same_on_replay_warm_and_cold),
          T(is_replaying_is_true_exactly_when_code_re_executes),
          T(log_is_written_once_per_logical_call_under_replay),
          T(cold_cache_gives_the_same_outputs_and_histories_as_warm),
          T(nondeterminism_a_different_activity),
          T(nondeterminism_a_timer_instead_of_an_activity),
          T(nondeterminism_returning_early),
          T(nondeterminism_found_by_replay_without_restart),
          T(history_cap_fails_the_instance_without_truncating_history),
          T(history_cap_of_the_store_is_named_in_the_failure),
          T(history_cap_of_the_runtime_is_named_in_the_failure),
          T(store_cap_with_no_room_for_the_failure_still_cancels_and_tells),
          T(sequential_fan_out_nested_and_timer_loop),
          T(select_losers_completing_later_replay_deterministically))
