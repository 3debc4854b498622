/* test_engine.c - the pure core: the replay engine, tracker and turn plan,
 * driven with histories and messages, without threads or a database. Every
 * scenario that spans turns runs twice, once with one engine kept across
 * turns (warm, like the fiber cache) and once with a fresh engine replaying
 * the whole history each turn (cold); both must produce the same history. */
#include <stdlib.h>

#include "core/core.h"
#include "core/fiber.h"
#include "test.h"

/* ------------------------------------------------------------------------
 * a tiny simulated store: the history of one execution */

typedef struct sim {
    duro_arena *arena;
    duro_event events[1024];
    size_t count;
} sim;

static void sim_init(sim *s)
{
    memset(s, 0, sizeof(*s));
    s->arena = duro_arena_create();
}

static void sim_free(sim *s)
{
    duro_arena_destroy(s->arena);
}

static const char *sdup(sim *s, const char *p)
{
    return duro_arena_strdup(s->arena, p);
}

static void sim_record(sim *s, const duro__turn *t)
{
    for (size_t i = 0; i < t->delta_count; i++) {
        duro_event e = t->delta[i];
        e.name = sdup(s, e.name);
        e.version = sdup(s, e.version);
        e.payload = sdup(s, e.payload);
        e.error = sdup(s, e.error);
        e.reason = sdup(s, e.reason);
        e.requested_by = sdup(s, e.requested_by);
        e.ref_instance = sdup(s, e.ref_instance);
        CHECK_EQ(e.event_id, s->count + 1);
        s->events[s->count++] = e;
    }
}

static int count_kind(const sim *s, int kind)
{
    int n = 0;
    for (size_t i = 0; i < s->count; i++)
        n += (int)s->events[i].kind == kind;
    return n;
}

static const duro_event *find_kind(const sim *s, int kind, int nth)
{
    for (size_t i = 0; i < s->count; i++)
        if ((int)s->events[i].kind == kind && nth-- == 0)
            return &s->events[i];
    return NULL;
}

static duro_work_item msg_done(uint64_t exec, uint64_t source, const char *out)
{
    duro_work_item m = {.kind = DURO_WORK_ACTIVITY_COMPLETED,
                        .instance_id = "i1",
                        .execution_id = exec,
                        .source_id = source,
                        .payload = out};
    return m;
}

static duro_work_item msg_failed(uint64_t exec, uint64_t source,
                                 const char *err, int category)
{
    duro_work_item m = {.kind = DURO_WORK_ACTIVITY_FAILED,
                        .instance_id = "i1",
                        .execution_id = exec,
                        .source_id = source,
                        .error = err,
                        .category = category};
    return m;
}

static duro_work_item msg_timer(uint64_t exec, uint64_t source)
{
    duro_work_item m = {.kind = DURO_WORK_TIMER_FIRED,
                        .instance_id = "i1",
                        .execution_id = exec,
                        .source_id = source};
    return m;
}

static duro_work_item msg_event(const char *name, const char *payload)
{
    duro_work_item m = {.kind = DURO_WORK_EXTERNAL_EVENT,
                        .instance_id = "i1",
                        .name = name,
                        .payload = payload};
    return m;
}

static duro_work_item msg_cancel(const char *reason)
{
    duro_work_item m = {.kind = DURO_WORK_CANCEL_INSTANCE,
                        .instance_id = "i1",
                        .reason = reason,
                        .requested_by = "tester"};
    return m;
}

static const duro_work_item start_msg = {.kind = DURO_WORK_START,
                                         .instance_id = "i1",
                                         .name = "orch",
                                         .payload = "in"};

static duro_orch *last_cold;

/* What run_turn adds to every turn: the orchestration's cancel options and
 * whether the instance was Suspended when fetched. Tests that set them
 * reset them to 0 before they end. */
static int g_observe;
static int64_t g_cleanup_ms;
static int g_suspended;
static const char *g_version; /* the registration's version */

/* One turn. warm: *e is kept and only new messages are given; cold: a new
 * engine replays the whole recorded history. */
static int run_turn(duro_orchestration_fn fn, void *user, duro_orch **warm,
                    sim *s, const duro_work_item *msgs, size_t n, int64_t now,
                    duro__turn *out)
{
    duro__engine_config cfg = {.fn = fn,
                               .user = user,
                               .max_payload = 4096,
                               .observe_cancel = g_observe,
                               .cleanup_timeout_ms = g_cleanup_ms,
                               .version = g_version};
    duro_orch *e = warm ? *warm : NULL;
    if (e == NULL) {
        CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
        if (warm)
            *warm = e;
    }
    duro__turn_reset(out);
    duro__turn_input in = {.now_ms = now,
                           .messages = msgs,
                           .message_count = n,
                           .start = s->count == 0 ? &start_msg : NULL,
                           .suspended = g_suspended};
    uint64_t known = duro__engine_events(e);
    in.history = s->events + known;
    in.history_count = s->count - known;
    int rc = duro__engine_turn(e, &in, out);
    if (rc == DURO_OK)
        sim_record(s, out);
    if (warm == NULL) {
        /* the turn's strings may point into the engine: keep it until the
         * next cold turn, as the runtime keeps it until the ack */
        duro__engine_destroy(last_cold);
        last_cold = e;
    }
    return rc;
}

static int has_worker(const duro__turn *t, const char *name)
{
    for (size_t i = 0; i < t->worker_count; i++)
        if (strcmp(t->worker_items[i].name, name) == 0)
            return 1;
    return 0;
}

static const duro_outbound *find_outbound(const duro__turn *t, int kind)
{
    for (size_t i = 0; i < t->outbound_count; i++)
        if (t->outbound[i].item.kind == (duro_work_kind)kind)
            return &t->outbound[i];
    return NULL;
}

/* ------------------------------------------------------------------------
 * orchestrations used by the tests */

static int orch_chain(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_task *b = duro_call_activity(o, "B", duro_task_output(a));
    if (duro_await(o, b) != DURO_OK)
        return duro_fail(out, duro_task_error(b));
    return duro_ok(out, duro_task_output(b));
}

static int orch_chain_changed(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    duro_await(o, a);
    duro_task *c = duro_call_activity(o, "C", "x"); /* was B */
    duro_await(o, c);
    return duro_ok(out, "changed");
}

static int orch_select(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *work = duro_call_activity(o, "Slow", "x");
    duro_task *limit = duro_timer(o, 1000);
    duro_task *w = duro_select(o, work, limit);
    if (w == limit)
        return duro_fail(out, "timed out");
    return duro_ok(out, duro_task_output(work));
}

static int orch_events(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_await(o, duro_timer(o, 10));
    duro_task *a = duro_wait_event(o, "go");
    duro_task *b = duro_wait_event(o, "go");
    duro_join(o, a, b);
    return duro_ok(out, duro_sprintf(o, "%s+%s", duro_task_output(a),
                                     duro_task_output(b)));
}

static int orch_fanout(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *t[5];
    for (int i = 0; i < 5; i++)
        t[i] = duro_call_activity(o, "Work", duro_sprintf(o, "%d", i));
    int rc = duro_join_n(o, t, 5);
    if (rc != DURO_OK)
        return duro_fail(out, "a task failed");
    return duro_ok(
        out, duro_sprintf(o, "%s%s%s%s%s", duro_task_output(t[0]),
                          duro_task_output(t[1]), duro_task_output(t[2]),
                          duro_task_output(t[3]), duro_task_output(t[4])));
}

static int orch_fail_early(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_call_activity(o, "Left", "1");
    duro_call_activity(o, "Right", "2");
    return duro_fail(out, "boom");
}

static int orch_complete_early(duro_orch *o, const char *input,
                               duro_result *out)
{
    (void)input;
    duro_call_activity(o, "Orphan", "1");
    return duro_ok(out, "done");
}

static int orch_can(duro_orch *o, const char *input, duro_result *out)
{
    duro_call_activity(o, "Pending", input);
    duro_await(o, duro_timer(o, 5));
    return duro_continue_as_new(o, out, "next");
}

static int orch_wait_forever(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *a = duro_call_activity(o, "Long", "1");
    duro_task *c = duro_call_sub_orchestration(o, "Child", NULL, NULL, "c");
    duro_join(o, a, c);
    return duro_ok(out, "never");
}

static int orch_retry(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 3;
    p.initial_delay_ms = 100;
    p.attempt_timeout_ms = 50;
    duro_task *t = duro_call_activity_with_retry(o, "Flaky", "x", &p);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail_with(out, duro_task_category(t), duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

static int orch_child(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_task *c = duro_call_sub_orchestration(o, "Child", "2", NULL, "cin");
    if (duro_await(o, c) != DURO_OK)
        return duro_fail(out, duro_task_error(c));
    duro_start_orchestration(o, "Other", NULL, "free-1", "f");
    return duro_ok(out, duro_task_output(c));
}

typedef struct det_probe {
    int64_t now[4];
    const char *guid[4];
    int replaying[4];
    int calls;
} det_probe;

static int orch_deterministic(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    det_probe *p = duro_orch_user(o);
    int k = 0;
    p->now[k] = duro_now(o);
    p->guid[k] = duro_new_guid(o);
    p->replaying[k++] = duro_is_replaying(o);
    duro_log(o, DURO_LOG_INFO, "before await");
    duro_await(o, duro_call_activity(o, "A", "1"));
    p->now[k] = duro_now(o);
    p->guid[k] = duro_new_guid(o);
    p->replaying[k++] = duro_is_replaying(o);
    duro_log(o, DURO_LOG_INFO, "after await");
    duro_set_custom_status(o, "half way");
    duro_await(o, duro_call_activity(o, "B", "2"));
    p->calls++;
    return duro_ok(out, "ok");
}

/* ------------------------------------------------------------------------
 * tests */

TEST(plan_turn_cases)
{
    duro__plan plan;
    duro_work_item start = {.kind = DURO_WORK_START, .instance_id = "x"};
    duro_work_item cancel = {.kind = DURO_WORK_CANCEL_INSTANCE};
    duro_work_item can = {.kind = DURO_WORK_CONTINUE_AS_NEW, .execution_id = 4};
    duro_work_item done = {.kind = DURO_WORK_ACTIVITY_COMPLETED};
    duro_orch_item item = {.status = DURO_STATUS_NOT_FOUND,
                           .messages = &cancel,
                           .message_count = 1};
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_DROP);

    item.status = DURO_STATUS_PENDING;
    item.messages = &start;
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_START);
    CHECK_EQ(plan.execution_id, 1);
    CHECK(plan.start == &start);

    item.messages = &done;
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_WAIT);

    item.messages = &cancel;
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_START);
    CHECK(plan.start == NULL);

    item.status = DURO_STATUS_RUNNING;
    item.execution_id = 3;
    item.messages = &can;
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_CONTINUE);
    CHECK_EQ(plan.execution_id, 4);

    can.execution_id = 3; /* stale */
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_RUN);
    CHECK_EQ(plan.execution_id, 3);

    item.status = DURO_STATUS_COMPLETED;
    duro__plan_turn(&item, &plan);
    CHECK_EQ(plan.action, DURO__PLAN_DROP);
}

/* Runs the chain orchestration through three turns, warm or cold. */
static void chain_scenario(int warm_mode, sim *s)
{
    duro_orch *e = NULL;
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    duro_orch **w = warm_mode ? &e : NULL;
    CHECK_OK(run_turn(orch_chain, NULL, w, s, NULL, 0, 1000, &t));
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    CHECK_EQ(t.worker_count, 1);
    CHECK(has_worker(&t, "A"));
    CHECK_STR(t.worker_items[0].payload, "in");
    CHECK_EQ(t.worker_items[0].source_id, 2);

    duro_work_item m = msg_done(1, 2, "a-out");
    CHECK_OK(run_turn(orch_chain, NULL, w, s, &m, 1, 2000, &t));
    CHECK(has_worker(&t, "B"));
    CHECK_STR(t.worker_items[0].payload, "a-out");
    CHECK_EQ(t.replayed, warm_mode ? 0 : 1);

    m = msg_done(1, 4, "b-out");
    CHECK_OK(run_turn(orch_chain, NULL, w, s, &m, 1, 3000, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(t.meta.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "b-out");
    CHECK_STR(t.meta.name, "orch");
    CHECK_EQ(t.cancelled_count, 0);
    duro__turn_free(&t);
    duro__engine_destroy(e);
}

TEST(chain_warm_and_cold_give_the_same_history)
{
    sim warm, cold;
    sim_init(&warm);
    sim_init(&cold);
    chain_scenario(1, &warm);
    chain_scenario(0, &cold);
    CHECK_EQ(warm.count, 6);
    CHECK_EQ(cold.count, warm.count);
    for (size_t i = 0; i < warm.count; i++) {
        CHECK_EQ(warm.events[i].kind, cold.events[i].kind);
        CHECK_STR(warm.events[i].name, cold.events[i].name);
        CHECK_STR(warm.events[i].payload, cold.events[i].payload);
        CHECK_EQ(warm.events[i].source_event_id,
                 cold.events[i].source_event_id);
        CHECK_EQ(warm.events[i].timestamp_ms, cold.events[i].timestamp_ms);
    }
    const int kinds[] = {
        DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_ACTIVITY_SCHEDULED,
        DURO_EVENT_ACTIVITY_COMPLETED,    DURO_EVENT_ACTIVITY_SCHEDULED,
        DURO_EVENT_ACTIVITY_COMPLETED,    DURO_EVENT_ORCHESTRATION_COMPLETED};
    for (size_t i = 0; i < 6; i++)
        CHECK_EQ(warm.events[i].kind, kinds[i]);
    sim_free(&warm);
    sim_free(&cold);
}

TEST(nondeterminism_different_command)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, &m, 1, 2, &t));
    /* history: Started, Scheduled A, Completed A, Scheduled B. The changed
     * code schedules C where history has B. */
    m = msg_done(1, 4, "b");
    CHECK_OK(run_turn(orch_chain_changed, NULL, NULL, &s, &m, 1, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_EQ(t.nondeterminism, 1);
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CONFIGURATION);
    CHECK_MSG(strstr(t.meta.error, "event 4") != NULL &&
                  strstr(t.meta.error, "'C'") != NULL &&
                  strstr(t.meta.error, "'B'") != NULL,
              "error names the position and both sides: %s", t.meta.error);
    /* B is still outstanding in history: the failure cancels it. */
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_EQ(t.cancelled[0].activity_id, 4);
    const duro_event *c =
        find_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(c != NULL);
    CHECK_STR(c->reason, DURO_REASON_INSTANCE_FAILED);
    duro__turn_free(&t);
    sim_free(&s);
}

/* The nondeterminism message quotes 42 bytes of an input: an input with
 * a two-byte character across that cut gives a message that is still
 * valid UTF-8 (PostgreSQL refuses anything else, and the failing turn would
 * never commit). */
TEST(nondeterminism_message_is_valid_utf8_when_an_input_is_cut)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    /* A's output, B's input: 41 bytes, then a u-umlaut at bytes 41-42 */
    duro_work_item m =
        msg_done(1, 2, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xc3\xbcyyyy");
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, &m, 1, 2, &t));
    m = msg_done(1, 4, "b");
    CHECK_OK(run_turn(orch_chain_changed, NULL, NULL, &s, &m, 1, 3, &t));
    CHECK_EQ(t.nondeterminism, 1);
    for (const char *p = t.meta.error; *p != '\0';) {
        size_t k = duro__utf8_len((const unsigned char *)p);
        CHECK_MSG(k > 0, "invalid UTF-8 at byte %zu of '%s'",
                  (size_t)(p - t.meta.error), t.meta.error);
        p += k;
    }
    CHECK(strstr(t.meta.error, "xxxxxxxx") != NULL); /* the input is quoted */
    duro__turn_free(&t);
    sim_free(&s);
}

static int orch_waits_on_timer(duro_orch *o, const char *input,
                               duro_result *out)
{
    (void)input;
    duro_await(o, duro_timer(o, 5));
    return duro_ok(out, "t");
}

TEST(nondeterminism_waiting_where_history_has_a_command)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    /* replay with code that creates a timer where history has an
     * ActivityScheduled */
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_waits_on_timer, NULL, NULL, &s, &m, 1, 2, &t));
    CHECK_EQ(t.nondeterminism, 1);
    CHECK(strstr(t.meta.error, "TimerCreated") != NULL);
    CHECK(strstr(t.meta.error, "ActivityScheduled 'A'") != NULL);
    duro__turn_free(&t);
    sim_free(&s);
}

static int orch_returns_at_once(duro_orch *o, const char *input,
                                duro_result *out)
{
    (void)o;
    (void)input;
    return duro_ok(out, "quick");
}

TEST(nondeterminism_returned_while_history_continues)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_returns_at_once, NULL, NULL, &s, &m, 1, 2, &t));
    CHECK_EQ(t.nondeterminism, 1);
    CHECK(strstr(t.meta.error, "returned") != NULL);
    duro__turn_free(&t);
    sim_free(&s);
}

static void select_scenario(int warm_mode, sim *s)
{
    duro_orch *e = NULL;
    duro_orch **w = warm_mode ? &e : NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_select, NULL, w, s, NULL, 0, 1000, &t));
    CHECK_EQ(t.worker_count, 1);
    const duro_outbound *timer = find_outbound(&t, DURO_WORK_TIMER_FIRED);
    CHECK(timer != NULL);
    CHECK_EQ(timer->delay_ms, 1000);
    CHECK_EQ(timer->item.fire_at_ms, 2000);
    duro_work_item m = msg_timer(1, 3);
    CHECK_OK(run_turn(orch_select, NULL, w, s, &m, 1, 2000, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_STR(t.meta.error, "timed out");
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_EQ(t.cancelled[0].activity_id, 2);
    CHECK_STR(t.cancelled[0].instance_id, "i1");
    duro__turn_free(&t);
    duro__engine_destroy(e);
}

TEST(select_loser_activity_is_cancelled_once)
{
    sim a, b;
    sim_init(&a);
    sim_init(&b);
    select_scenario(1, &a);
    select_scenario(0, &b);
    CHECK_EQ(a.count, b.count);
    CHECK_EQ(count_kind(&a, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 1);
    const duro_event *c =
        find_kind(&a, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK_STR(c->reason, DURO_REASON_SELECT_LOSER);
    CHECK_EQ(c->source_event_id, 2);
    /* cancel recorded before the terminal event */
    CHECK_EQ(a.events[a.count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    sim_free(&a);
    sim_free(&b);
}

static int orch_select_then_wait(duro_orch *o, const char *input,
                                 duro_result *out)
{
    (void)input;
    duro_task *work = duro_call_activity(o, "Slow", "x");
    duro_task *limit = duro_timer(o, 1000);
    duro_select(o, work, limit);
    duro_await(o, duro_timer(o, 5000));
    return duro_ok(out, duro_task_error(work));
}

TEST(select_loser_replay_adds_no_second_cancel)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(
        run_turn(orch_select_then_wait, NULL, NULL, &s, NULL, 0, 1000, &t));
    duro_work_item m = msg_timer(1, 3);
    CHECK_OK(run_turn(orch_select_then_wait, NULL, NULL, &s, &m, 1, 2000, &t));
    CHECK_EQ(t.cancelled_count, 1);
    /* the losing activity completes late, then the second timer fires; the
     * cold replays must not cancel it again */
    m = msg_done(1, 2, "late");
    CHECK_OK(run_turn(orch_select_then_wait, NULL, NULL, &s, &m, 1, 2500, &t));
    CHECK_EQ(t.cancelled_count, 0);
    CHECK_EQ(t.delta_count, 1); /* the late completion, recorded */
    CHECK_EQ(t.delta[0].kind, DURO_EVENT_ACTIVITY_COMPLETED);
    m = msg_timer(1, 6);
    CHECK_OK(run_turn(orch_select_then_wait, NULL, NULL, &s, &m, 1, 7000, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "cancelled: select_loser");
    CHECK_EQ(t.cancelled_count, 0);
    CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 1);
    duro__turn_free(&t);
    sim_free(&s);
}

static void events_scenario(int warm_mode, sim *s)
{
    duro_orch *e = NULL;
    duro_orch **w = warm_mode ? &e : NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_events, NULL, w, s, NULL, 0, 1000, &t));
    /* both events arrive while the code still waits on its timer */
    duro_work_item m[2] = {msg_event("go", "first"), msg_event("go", "second")};
    CHECK_OK(run_turn(orch_events, NULL, w, s, m, 2, 1001, &t));
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    duro_work_item f = msg_timer(1, 2);
    CHECK_OK(run_turn(orch_events, NULL, w, s, &f, 1, 1020, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "first+second");
    duro__turn_free(&t);
    duro__engine_destroy(e);
}

TEST(events_raised_before_waiting_are_kept_in_order)
{
    sim a, b;
    sim_init(&a);
    sim_init(&b);
    events_scenario(1, &a);
    events_scenario(0, &b);
    CHECK_EQ(a.count, b.count);
    CHECK_EQ(count_kind(&a, DURO_EVENT_EVENT_RAISED), 2);
    CHECK_EQ(count_kind(&a, DURO_EVENT_EVENT_SUBSCRIBED), 2);
    sim_free(&a);
    sim_free(&b);
}

TEST(fanout_join_keeps_argument_order)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_fanout, NULL, &e, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.worker_count, 5);
    /* completions arrive in reverse order, in two batches */
    duro_work_item m1[3] = {msg_done(1, 6, "4"), msg_done(1, 5, "3"),
                            msg_done(1, 4, "2")};
    CHECK_OK(run_turn(orch_fanout, NULL, &e, &s, m1, 3, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    duro_work_item m2[3] = {msg_done(1, 3, "1"), msg_done(1, 2, "0"),
                            msg_done(1, 2, "dup")};
    CHECK_OK(run_turn(orch_fanout, NULL, &e, &s, m2, 3, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "01234");
    /* the duplicate completion was dropped, not recorded */
    CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_COMPLETED), 5);
    duro__engine_destroy(e);
    /* a cold replay of the same history reaches the same result */
    sim cold;
    sim_init(&cold);
    for (size_t i = 0; i + 1 < s.count; i++)
        cold.events[cold.count++] = s.events[i];
    cold.count--; /* drop the last completion so it comes as a message */
    duro_work_item last = msg_done(1, 2, "0");
    CHECK_OK(run_turn(orch_fanout, NULL, NULL, &cold, &last, 1, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "01234");
    duro__turn_free(&t);
    sim_free(&s);
    sim_free(&cold);
}

TEST(stale_and_unknown_messages_are_dropped)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    duro_work_item m[3] = {msg_done(7, 2, "other execution"),
                           msg_done(1, 99, "unknown source"),
                           msg_timer(1, 2) /* kind mismatch */};
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, m, 3, 2, &t));
    CHECK_EQ(t.delta_count, 0);
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(failure_cancels_every_outstanding_activity)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_fail_early, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_EQ(t.worker_count, 2);    /* scheduled in this turn ... */
    CHECK_EQ(t.cancelled_count, 2); /* ... and cancelled in the same ack */
    CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 2);
    CHECK_STR(find_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 1)->reason,
              DURO_REASON_INSTANCE_FAILED);
    CHECK_EQ(s.events[s.count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_EQ(s.events[s.count - 1].category, DURO_CATEGORY_APPLICATION);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(completion_with_outstanding_activity_cancels_it)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_complete_early, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_STR(find_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0)->reason,
              DURO_REASON_INSTANCE_COMPLETED);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(continue_as_new_cancels_and_carries_events_over)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_can, NULL, &e, &s, NULL, 0, 1, &t));
    duro_work_item m[2] = {msg_event("later", "p1"), msg_timer(1, 3)};
    CHECK_OK(run_turn(orch_can, NULL, &e, &s, m, 2, 10, &t));
    CHECK_EQ(t.status, DURO_STATUS_CONTINUED_AS_NEW);
    CHECK_EQ(t.meta.status, DURO_STATUS_CONTINUED_AS_NEW);
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_STR(find_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0)->reason,
              DURO_REASON_CONTINUED_AS_NEW);
    const duro_outbound *next = find_outbound(&t, DURO_WORK_CONTINUE_AS_NEW);
    CHECK(next != NULL);
    CHECK_EQ(next->item.execution_id, 2);
    CHECK_STR(next->item.payload, "next");
    CHECK_STR(next->item.name, "orch");
    const duro_outbound *carried = find_outbound(&t, DURO_WORK_EXTERNAL_EVENT);
    CHECK(carried != NULL);
    CHECK_STR(carried->item.name, "later");
    CHECK_STR(carried->item.payload, "p1");
    CHECK(carried > next); /* after the CONTINUE_AS_NEW message */
    CHECK_EQ(s.events[s.count - 1].kind, DURO_EVENT_CONTINUED_AS_NEW);
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

static int must_not_run(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    (void)out;
    abort();
}

TEST(cancel_decided_from_history_without_running_code)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_wait_forever, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.worker_count, 1);
    const duro_outbound *child = find_outbound(&t, DURO_WORK_START);
    CHECK(child != NULL);
    CHECK_STR(child->item.instance_id, "i1:1:3");
    CHECK_STR(child->item.parent_instance, "i1");
    CHECK_EQ(child->item.parent_event_id, 3);
    /* cold engine whose code would abort if run: the cancel is decided from
     * history alone; a completion earlier in the batch is recorded first */
    duro_work_item m[2] = {msg_done(1, 2, "finished"),
                           msg_cancel("user asked")};
    CHECK_OK(run_turn(must_not_run, NULL, NULL, &s, m, 2, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_EQ(t.ran_code, 0);
    CHECK_EQ(t.cancelled_count, 0); /* the activity had completed */
    const duro_outbound *cc = find_outbound(&t, DURO_WORK_CANCEL_INSTANCE);
    CHECK(cc != NULL);
    CHECK_STR(cc->item.instance_id, "i1:1:3");
    CHECK_STR(cc->item.requested_by, "parent:i1");
    const duro_event *req =
        find_kind(&s, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_STR(req->reason, "user asked");
    CHECK_STR(req->requested_by, "tester");
    CHECK_EQ(count_kind(&s, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED), 1);
    CHECK_EQ(s.events[s.count - 1].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    CHECK_STR(t.meta.error, "user asked");
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CANCELLED);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(cancel_of_outstanding_activity_on_warm_engine)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_wait_forever, NULL, &e, &s, NULL, 0, 1, &t));
    duro_work_item m = msg_cancel("stop");
    CHECK_OK(run_turn(orch_wait_forever, NULL, &e, &s, &m, 1, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_EQ(t.cancelled[0].activity_id, 2);
    CHECK(duro__engine_terminal(e));
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(terminate_without_code_for_poison)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_wait_forever, NULL, NULL, &s, NULL, 0, 1, &t));
    duro__engine_config cfg = {.fn = NULL};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
    duro__turn_reset(&t);
    duro__turn_input in = {.now_ms = 5,
                           .history = s.events,
                           .history_count = s.count,
                           .terminate_status = DURO_STATUS_FAILED,
                           .terminate_error = "poison",
                           .terminate_category = DURO_CATEGORY_INFRASTRUCTURE};
    CHECK_OK(duro__engine_turn(e, &in, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_EQ(t.meta.category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK_EQ(t.cancelled_count, 1);
    CHECK(find_outbound(&t, DURO_WORK_CANCEL_INSTANCE) != NULL);
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(retry_with_attempt_timeout_and_backoff)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, NULL, 0, 1000, &t));
    CHECK_EQ(t.worker_count, 1);
    CHECK_EQ(t.worker_items[0].attempt, 1);
    /* attempt 1 times out: its timer (event 3) fires first */
    duro_work_item m = msg_timer(1, 3);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1050, &t));
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_EQ(t.cancelled[0].activity_id, 2);
    CHECK_STR(find_kind(&s, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0)->reason,
              DURO_REASON_SELECT_LOSER);
    const duro_outbound *backoff = find_outbound(&t, DURO_WORK_TIMER_FIRED);
    CHECK(backoff != NULL);
    CHECK_EQ(backoff->delay_ms, 100);
    uint64_t backoff_id = backoff->item.source_id;
    /* backoff fires: attempt 2 is scheduled */
    m = msg_timer(1, backoff_id);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1150, &t));
    CHECK_EQ(t.worker_count, 1);
    CHECK_EQ(t.worker_items[0].attempt, 2);
    uint64_t attempt2 = t.worker_items[0].source_id;
    /* attempt 2 fails with an application error: backoff 200 ms */
    m = msg_failed(1, attempt2, "nope", DURO_CATEGORY_APPLICATION);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1160, &t));
    backoff = find_outbound(&t, DURO_WORK_TIMER_FIRED);
    CHECK(backoff != NULL);
    CHECK_EQ(backoff->delay_ms, 200);
    m = msg_timer(1, backoff->item.source_id);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1360, &t));
    CHECK_EQ(t.worker_items[0].attempt, 3);
    uint64_t attempt3 = t.worker_items[0].source_id;
    m = msg_done(1, attempt3, "third time");
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1370, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "third time");
    duro__engine_destroy(e);
    /* the whole history replays cold to the same decisions */
    sim cold;
    sim_init(&cold);
    for (size_t i = 0; i + 2 < s.count; i++)
        cold.events[cold.count++] = s.events[i];
    CHECK_EQ(cold.events[cold.count - 1].kind, DURO_EVENT_TIMER_CREATED);
    duro_work_item last = msg_done(1, attempt3, "third time");
    CHECK_OK(run_turn(orch_retry, NULL, NULL, &cold, &last, 1, 1370, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(t.nondeterminism, 0);
    duro__turn_free(&t);
    sim_free(&s);
    sim_free(&cold);
}

TEST(retry_exhausted_and_configuration_errors)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, NULL, 0, 1000, &t));
    duro_work_item m =
        msg_failed(1, 2, "no such activity", DURO_CATEGORY_CONFIGURATION);
    CHECK_OK(run_turn(orch_retry, NULL, &e, &s, &m, 1, 1001, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CONFIGURATION);
    CHECK_STR(t.meta.error, "no such activity");
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

/* Policies duro.h calls invalid fail the task with DURO_INVALID and a
 * message naming the field; nothing is scheduled. */
#define BAD_POLICIES 4
static struct {
    int rc[BAD_POLICIES];
    char error[BAD_POLICIES][200];
} policy_seen;

static int orch_bad_policies(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    for (int k = 0; k < BAD_POLICIES; k++) {
        duro_retry_policy p;
        duro_retry_policy_init(&p);
        if (k == 0)
            p.version = 0;
        else if (k == 1)
            p.backoff = 9;
        else if (k == 2)
            p.max_delay_ms = -1;
        else
            p.coefficient = 0.5;
        duro_task *t = duro_call_activity_with_retry(o, "A", "x", &p);
        policy_seen.rc[k] = duro_await(o, t);
        snprintf(policy_seen.error[k], sizeof(policy_seen.error[k]), "%s",
                 duro_task_error(t) ? duro_task_error(t) : "");
    }
    return duro_ok(out, "fine");
}

TEST(retry_invalid_policies_fail_the_task)
{
    static const char *const words[BAD_POLICIES] = {
        "version", "backoff", "max_delay_ms", "coefficient"};
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    memset(&policy_seen, 0, sizeof(policy_seen));
    CHECK_OK(run_turn(orch_bad_policies, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(t.worker_count, 0);
    for (int k = 0; k < BAD_POLICIES; k++) {
        CHECK_MSG(policy_seen.rc[k] == DURO_INVALID, "policy %d: %s", k,
                  duro_errname(policy_seen.rc[k]));
        CHECK_MSG(strstr(policy_seen.error[k], words[k]) != NULL,
                  "policy %d: '%s' does not name '%s'", k, policy_seen.error[k],
                  words[k]);
    }
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(child_orchestration_round_trip)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_child, NULL, &e, &s, NULL, 0, 1, &t));
    const duro_outbound *st = find_outbound(&t, DURO_WORK_START);
    CHECK(st != NULL);
    CHECK_STR(st->item.name, "Child");
    CHECK_STR(st->item.version, "2");
    CHECK_STR(st->item.payload, "cin");
    duro_work_item m = {.kind = DURO_WORK_CHILD_COMPLETED,
                        .instance_id = "i1",
                        .execution_id = 1,
                        .source_id = st->item.parent_event_id,
                        .payload = "child-out"};
    CHECK_OK(run_turn(orch_child, NULL, &e, &s, &m, 1, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "child-out");
    st = find_outbound(&t, DURO_WORK_START);
    CHECK(st != NULL);
    CHECK_STR(st->item.instance_id, "free-1");
    CHECK(st->item.flags & DURO_START_DETACHED);
    CHECK(st->item.parent_instance == NULL);
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(child_reports_to_parent)
{
    sim s;
    sim_init(&s);
    duro__engine_config cfg = {.fn = orch_complete_early};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, "child-1", 1, &e));
    duro__turn t;
    duro__turn_init(&t);
    duro_work_item st = {.kind = DURO_WORK_START,
                         .instance_id = "child-1",
                         .name = "Child",
                         .parent_instance = "parent",
                         .parent_execution = 3,
                         .parent_event_id = 9};
    duro__turn_input in = {.now_ms = 1, .start = &st};
    CHECK_OK(duro__engine_turn(e, &in, &t));
    const duro_outbound *back = find_outbound(&t, DURO_WORK_CHILD_COMPLETED);
    CHECK(back != NULL);
    CHECK_STR(back->item.instance_id, "parent");
    CHECK_EQ(back->item.execution_id, 3);
    CHECK_EQ(back->item.source_id, 9);
    CHECK_STR(back->item.payload, "done");
    CHECK_STR(t.meta.parent_instance, "parent");
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

static int logged;
static void count_log(void *user, int level, const char *message)
{
    (void)user;
    (void)level;
    (void)message;
    logged++;
}

TEST(now_guid_replaying_and_log_are_replay_safe)
{
    duro__logger lg = {.level = DURO_LOG_INFO, .fn = count_log};
    det_probe live = {0}, replay = {0};
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    duro__engine_config cfg = {
        .fn = orch_deterministic, .user = &live, .logger = &lg};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
    duro__turn_input in = {.now_ms = 5000, .start = &start_msg};
    logged = 0;
    CHECK_OK(duro__engine_turn(e, &in, &t));
    sim_record(&s, &t);
    duro_work_item m = msg_done(1, 2, "x");
    duro__turn_reset(&t);
    in = (duro__turn_input){.now_ms = 9000, .messages = &m, .message_count = 1};
    CHECK_OK(duro__engine_turn(e, &in, &t));
    sim_record(&s, &t);
    CHECK_EQ(logged, 2);
    CHECK(t.meta.custom_status_set);
    CHECK_STR(t.meta.custom_status, "half way");
    CHECK_EQ(live.now[0], 5000);
    CHECK_EQ(live.now[1], 9000);
    CHECK_EQ(live.replaying[0], 0);
    CHECK_EQ(live.replaying[1], 0);
    char g0[40], g1[40];
    snprintf(g0, sizeof(g0), "%s", live.guid[0]);
    snprintf(g1, sizeof(g1), "%s", live.guid[1]);
    CHECK(strcmp(g0, g1) != 0);
    CHECK_EQ(strlen(g0), 36);
    duro__engine_destroy(e);

    /* cold replay of the same history: same values, marked replaying, no
     * log lines for the replayed part */
    cfg.user = &replay;
    CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
    duro__turn_reset(&t);
    duro_work_item m2 = msg_done(1, 4, "y");
    in = (duro__turn_input){.now_ms = 12000,
                            .history = s.events,
                            .history_count = s.count,
                            .messages = &m2,
                            .message_count = 1};
    logged = 0;
    CHECK_OK(duro__engine_turn(e, &in, &t));
    CHECK_EQ(logged, 0);
    CHECK_EQ(replay.now[0], 5000);
    CHECK_EQ(replay.now[1], 9000);
    CHECK_EQ(replay.replaying[0], 1);
    CHECK_EQ(replay.replaying[1], 1);
    CHECK_STR(replay.guid[0], g0);
    CHECK_STR(replay.guid[1], g1);
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

/* Results observed on the fiber, checked on the main stack afterwards (a
 * failed CHECK must not longjmp off a fiber). */
static struct {
    int big_failed, big_rc, big_category, empty_rc;
} seen;

static int orch_escape(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    duro_task *t = duro_call_activity(o, "A", big);
    seen.big_failed = duro_task_failed(t);
    seen.big_rc = duro_await(o, t);
    seen.big_category = duro_task_category(t);
    seen.empty_rc = duro_await(o, duro_call_activity(o, "", "x"));
    return duro_ok(out, "fine");
}

TEST(misuse_and_bad_input_fail_tasks_not_the_process)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_escape, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(t.worker_count, 0);
    CHECK_EQ(seen.big_failed, 1);
    CHECK_RC(seen.big_rc, DURO_TOO_LARGE);
    CHECK_EQ(seen.big_category, DURO_CATEGORY_CONFIGURATION);
    CHECK_RC(seen.empty_rc, DURO_INVALID);
    /* the context used outside its fiber (here: after the engine is gone
     * would be use-after-free, so use a live engine from the main stack) */
    duro__engine_config cfg = {.fn = orch_wait_forever};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
    duro__turn_input in = {.now_ms = 1, .start = &start_msg};
    duro__turn_reset(&t);
    CHECK_OK(duro__engine_turn(e, &in, &t));
    duro_task *bad = duro_call_activity(e, "A", "x");
    CHECK(duro_task_failed(bad));
    CHECK_EQ(duro_await(e, bad), DURO_MISUSE);
    CHECK(duro_timer(e, 5) == bad);
    CHECK_RC(duro_start_orchestration(e, "X", NULL, NULL, NULL), DURO_MISUSE);
    CHECK(duro_instance_id(e) == NULL);
    CHECK_EQ(duro__engine_events(e), 3);
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

/* Names and ids over 1024 bytes that code makes are refused when the task
 * is created (DURO_TOO_LARGE), not by the store on every delivery of the
 * turn: an event name, and a child's default id ("<id>:<exec>:<event>")
 * from an instance whose id is near the limit. Observed on the fiber. */
static struct {
    int event_rc, child_rc, start_rc, explicit_failed;
} long_seen;

static int orch_long_names(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    char name[1026];
    memset(name, 'e', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    long_seen.event_rc = duro_await(o, duro_wait_event(o, name));
    long_seen.child_rc =
        duro_await(o, duro_call_sub_orchestration(o, "C", NULL, NULL, NULL));
    long_seen.start_rc = duro_start_orchestration(o, "C", NULL, NULL, NULL);
    long_seen.explicit_failed = duro_task_failed(
        duro_call_sub_orchestration(o, "C", NULL, "child-1", NULL));
    return duro_ok(out, "handled");
}

TEST(names_and_default_child_ids_over_the_limit_fail_their_tasks)
{
    char id[1022]; /* 1021 bytes: with ":1:2" the default id is 1025 */
    memset(id, 'p', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    memset(&long_seen, 0, sizeof(long_seen));
    duro__engine_config cfg = {.fn = orch_long_names, .max_payload = 4096};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, id, 1, &e));
    duro__turn t;
    duro__turn_init(&t);
    duro_work_item start = start_msg;
    start.instance_id = id;
    duro__turn_input in = {.now_ms = 1, .start = &start};
    CHECK_OK(duro__engine_turn(e, &in, &t));
    CHECK_RC(long_seen.event_rc, DURO_TOO_LARGE);
    CHECK_RC(long_seen.child_rc, DURO_TOO_LARGE);
    CHECK_RC(long_seen.start_rc, DURO_TOO_LARGE);
    CHECK_EQ(long_seen.explicit_failed, 0);
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    /* only the child with an explicit id was started */
    size_t starts = 0;
    for (size_t i = 0; i < t.outbound_count; i++)
        starts += t.outbound[i].item.kind == DURO_WORK_START;
    CHECK_EQ(starts, 1);
    duro__engine_destroy(e);
    duro__turn_free(&t);
}

/* duro_orch_alloc with sizes whose arithmetic would wrap: each must be
 * NULL (not a small block the code then overruns), and the engine must go
 * on (a refused size is not out of memory). Observed on the fiber, checked
 * on the main stack. */
static const size_t huge_ks[] = {0, 1, 15, 16, 17, 40, 41, 4096, 4097};
static struct {
    int non_null; /* how many huge requests returned a block */
    int too_large;
    int small_ok;
} huge_seen;

static int orch_huge_alloc(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    for (size_t i = 0; i < sizeof(huge_ks) / sizeof(huge_ks[0]); i++) {
        if (duro_orch_alloc(o, SIZE_MAX - huge_ks[i]) != NULL)
            huge_seen.non_null++;
        else if (strstr(duro_errmsg(), "duro_orch_alloc") != NULL)
            huge_seen.too_large++;
    }
    if (duro_orch_alloc(o, (size_t)PTRDIFF_MAX + 1) != NULL)
        huge_seen.non_null++;
    unsigned char *p = duro_orch_alloc(o, 64);
    huge_seen.small_ok = p != NULL && p[63] == 0;
    duro_task *t = duro_call_activity(o, "A", "x");
    duro_await(o, t);
    return duro_ok(out, duro_task_output(t));
}

TEST(orch_alloc_refuses_sizes_that_overflow)
{
    memset(&huge_seen, 0, sizeof(huge_seen));
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    duro_orch *e = NULL;
    CHECK_OK(run_turn(orch_huge_alloc, NULL, &e, &s, NULL, 0, 1, &t));
    CHECK_EQ(huge_seen.non_null, 0);
    CHECK_EQ(huge_seen.too_large, (int)(sizeof(huge_ks) / sizeof(huge_ks[0])));
    CHECK(huge_seen.small_ok);
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    CHECK(has_worker(&t, "A"));
    duro_work_item done = msg_done(1, 2, "fine");
    CHECK_OK(run_turn(orch_huge_alloc, NULL, &e, &s, &done, 1, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "fine");
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

static int orch_big_output(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    static char big[5000];
    memset(big, 'y', sizeof(big) - 1);
    return duro_ok(out, big);
}

TEST(orchestration_output_over_limit_fails_clearly)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    CHECK_OK(run_turn(orch_big_output, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CONFIGURATION);
    CHECK(strstr(t.meta.error, "over the limit of 4096") != NULL);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(tracker_classifies_completions)
{
    duro__tracker tr;
    duro__tracker_init(&tr);
    duro_arena *a = duro_arena_create();
    duro_event ev[] = {
        {.event_id = 1, .kind = DURO_EVENT_ORCHESTRATION_STARTED},
        {.event_id = 2, .kind = DURO_EVENT_ACTIVITY_SCHEDULED},
        {.event_id = 3, .kind = DURO_EVENT_ACTIVITY_SCHEDULED},
        {.event_id = 4,
         .kind = DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
         .source_event_id = 3},
    };
    for (size_t i = 0; i < 4; i++)
        CHECK_OK(duro__tracker_apply(&tr, &ev[i], a));
    duro_event done2 = {.event_id = 5,
                        .kind = DURO_EVENT_ACTIVITY_COMPLETED,
                        .source_event_id = 2};
    duro_event done3 = {.event_id = 5,
                        .kind = DURO_EVENT_ACTIVITY_COMPLETED,
                        .source_event_id = 3};
    duro_event fired2 = {
        .event_id = 5, .kind = DURO_EVENT_TIMER_FIRED, .source_event_id = 2};
    CHECK_EQ(duro__tracker_classify(&tr, &done2), DURO__MSG_APPLY);
    CHECK_EQ(duro__tracker_classify(&tr, &done3), DURO__MSG_LATE);
    CHECK_EQ(duro__tracker_classify(&tr, &fired2), DURO__MSG_UNKNOWN);
    CHECK_OK(duro__tracker_apply(&tr, &done2, a));
    done2.event_id = 6;
    CHECK_EQ(duro__tracker_classify(&tr, &done2), DURO__MSG_DUPLICATE);
    duro_event gap = {.event_id = 9, .kind = DURO_EVENT_TIMER_CREATED};
    CHECK_RC(duro__tracker_apply(&tr, &gap, a), DURO_INVALID);
    duro__tracker_free(&tr);
    duro_arena_destroy(a);
}

TEST(engine_rejects_history_that_does_not_fit)
{
    duro__engine_config cfg = {.fn = orch_chain};
    duro_orch *e;
    CHECK_OK(duro__engine_create(&cfg, "i1", 1, &e));
    duro__turn t;
    duro__turn_init(&t);
    duro_event h = {.event_id = 2, .kind = DURO_EVENT_ACTIVITY_SCHEDULED};
    duro__turn_input in = {.now_ms = 1, .history = &h, .history_count = 1};
    CHECK_RC(duro__engine_turn(e, &in, &t), DURO_INVALID);
    duro_event h1 = {.event_id = 1, .kind = DURO_EVENT_TIMER_CREATED};
    in.history = &h1;
    CHECK_RC(duro__engine_turn(e, &in, &t), DURO_INVALID);
    duro__engine_destroy(e);
    duro__turn_free(&t);
}

/* ------------------------------------------------------------------------
 * observed cancellation, terminate, suspend and resume */

static duro_work_item msg_control(int kind, const char *reason)
{
    duro_work_item m = {.kind = (duro_work_kind)kind,
                        .instance_id = "i1",
                        .reason = reason,
                        .requested_by = "operator"};
    return m;
}

typedef struct saga_probe {
    int charge_rc;
    const char *reason, *by;
} saga_probe;

/* reserve, then charge; when cancelled while charging, release the
 * reservation (a compensation) and return */
static int orch_saga(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    saga_probe *p = duro_orch_user(o);
    duro_task *reserve = duro_call_activity(o, "Reserve", "r");
    if (duro_await(o, reserve) != DURO_OK)
        return duro_fail(out, "reserve failed");
    duro_task *charge = duro_call_activity(o, "Charge", "c");
    p->charge_rc = duro_await(o, charge);
    if (p->charge_rc == DURO_CANCELLED && duro_cancel_requested(o)) {
        p->reason = duro_cancel_reason(o);
        p->by = duro_cancel_requester(o);
        duro_task *undo = duro_call_activity(o, "Release", p->reason);
        duro_await(o, undo);
        return duro_ok(out, "compensated");
    }
    return duro_ok(out, "done");
}

static void saga_scenario(int warm_mode, sim *s)
{
    duro_orch *e = NULL;
    duro_orch **w = warm_mode ? &e : NULL;
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    saga_probe probe = {0};
    g_observe = 1;
    g_cleanup_ms = 60000;
    CHECK_OK(run_turn(orch_saga, &probe, w, s, NULL, 0, 1000, &t));
    duro_work_item m = msg_done(1, 2, "reserved");
    CHECK_OK(run_turn(orch_saga, &probe, w, s, &m, 1, 2000, &t));
    CHECK(has_worker(&t, "Charge"));

    /* the cancel reaches the code: Charge is cancelled durably, the await
     * reports DURO_CANCELLED, and the compensation is scheduled */
    m = msg_cancel("customer changed mind");
    CHECK_OK(run_turn(orch_saga, &probe, w, s, &m, 1, 3000, &t));
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    CHECK_EQ(probe.charge_rc, DURO_CANCELLED);
    CHECK_STR(probe.reason, "customer changed mind");
    CHECK_STR(probe.by, "tester");
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_EQ(t.cancelled[0].activity_id, 4);
    CHECK_STR(t.cancel_reasons[0], DURO_REASON_INSTANCE_CANCELLED);
    CHECK(has_worker(&t, "Release"));
    CHECK_STR(t.worker_items[0].payload, "customer changed mind");
    const duro_outbound *deadline = find_outbound(&t, DURO_WORK_TIMER_FIRED);
    CHECK(deadline != NULL);
    CHECK_EQ(deadline->item.fire_at_ms, 3000 + 60000);

    /* a second cancel during the cleanup changes nothing */
    m = msg_cancel("again");
    CHECK_OK(run_turn(orch_saga, &probe, w, s, &m, 1, 3500, &t));
    CHECK_EQ(t.delta_count, 0);
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);

    /* the compensation completes: the instance ends Cancelled, with the
     * first cancel's reason */
    const duro_event *rel = find_kind(s, DURO_EVENT_ACTIVITY_SCHEDULED, 2);
    CHECK(rel != NULL);
    m = msg_done(1, rel->event_id, "released");
    CHECK_OK(run_turn(orch_saga, &probe, w, s, &m, 1, 4000, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_STR(t.meta.error, "customer changed mind");
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CANCELLED);
    g_observe = 0;
    g_cleanup_ms = 0;
    duro__engine_destroy(e);
    duro__turn_free(&t);
}

TEST(observed_cancel_runs_cleanup_and_replays_the_same)
{
    sim warm, cold;
    sim_init(&warm);
    sim_init(&cold);
    saga_scenario(1, &warm);
    saga_scenario(0, &cold);
    const int kinds[] = {DURO_EVENT_ORCHESTRATION_STARTED,
                         DURO_EVENT_ACTIVITY_SCHEDULED,
                         DURO_EVENT_ACTIVITY_COMPLETED,
                         DURO_EVENT_ACTIVITY_SCHEDULED,
                         DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                         DURO_EVENT_ACTIVITY_CANCEL_REQUESTED,
                         DURO_EVENT_TIMER_CREATED,
                         DURO_EVENT_ACTIVITY_SCHEDULED,
                         DURO_EVENT_ACTIVITY_COMPLETED,
                         DURO_EVENT_ORCHESTRATION_CANCELLED};
    CHECK_EQ(warm.count, sizeof(kinds) / sizeof(kinds[0]));
    CHECK_EQ(cold.count, warm.count);
    for (size_t i = 0; i < warm.count; i++) {
        CHECK_EQ(warm.events[i].kind, kinds[i]);
        CHECK_EQ(cold.events[i].kind, warm.events[i].kind);
        CHECK_EQ(cold.events[i].flags, warm.events[i].flags);
        CHECK_STR(cold.events[i].reason, warm.events[i].reason);
        CHECK_EQ(cold.events[i].fire_at_ms, warm.events[i].fire_at_ms);
    }
    CHECK_EQ(warm.events[4].flags, DURO_CANCEL_OBSERVED);
    CHECK_STR(warm.events[4].requested_by, "tester");
    CHECK_EQ(warm.events[6].flags, DURO_TIMER_CLEANUP_DEADLINE);
    CHECK_STR(warm.events[9].reason, "customer changed mind");
    sim_free(&warm);
    sim_free(&cold);
}

/* one activity, then return (*mode 0) or continue as new (*mode 1) */
static int orch_one_then(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    const int *mode = duro_orch_user(o);
    duro_await(o, duro_call_activity(o, "A", "1"));
    return *mode == 1 ? duro_continue_as_new(o, out, "next")
                      : duro_ok(out, "done");
}

/* A cancel fetched in the same batch as the completion that lets the code
 * return still ends the instance Cancelled, whether the code observes
 * cancellation or not, and whatever the code returned (a continue-as-new
 * too: the next execution is not started). It used to be dropped when the
 * code observed cancellation: the instance completed, or continued as new
 * with the cancel lost for good (the store refuses a second request once
 * one is recorded). */
TEST(a_cancel_after_the_code_returned_in_the_same_batch_still_cancels)
{
    for (int observe = 0; observe <= 1; observe++) {
        for (int mode = 0; mode <= 1; mode++) {
            sim s;
            sim_init(&s);
            duro_orch *e = NULL;
            duro__turn t;
            CHECK_OK(duro__turn_init(&t));
            g_observe = observe;
            g_cleanup_ms = observe ? 60000 : 0;
            CHECK_OK(run_turn(orch_one_then, &mode, &e, &s, NULL, 0, 1000, &t));
            CHECK(has_worker(&t, "A"));
            duro_work_item m[2] = {msg_done(1, 2, "a"), msg_cancel("stop")};
            CHECK_OK(run_turn(orch_one_then, &mode, &e, &s, m, 2, 2000, &t));
            CHECK_MSG(t.status == DURO_STATUS_CANCELLED,
                      "observe %d, mode %d: status %d", observe, mode,
                      t.status);
            CHECK_STR(t.meta.error, "stop");
            CHECK(find_outbound(&t, DURO_WORK_CONTINUE_AS_NEW) == NULL);
            const int kinds[] = {DURO_EVENT_ORCHESTRATION_STARTED,
                                 DURO_EVENT_ACTIVITY_SCHEDULED,
                                 DURO_EVENT_ACTIVITY_COMPLETED,
                                 DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED,
                                 DURO_EVENT_ORCHESTRATION_CANCELLED};
            CHECK_EQ(s.count, sizeof(kinds) / sizeof(kinds[0]));
            for (size_t i = 0; i < s.count && i < 5; i++)
                CHECK_EQ(s.events[i].kind, kinds[i]);
            const duro_event *req =
                find_kind(&s, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
            CHECK(req != NULL && strcmp(req->requested_by, "tester") == 0);
            duro__engine_destroy(e);
            duro__turn_free(&t);
            sim_free(&s);
        }
    }
    g_observe = 0;
    g_cleanup_ms = 0;
}

/* A suspend fetched after the code continued as new in the same batch goes
 * to the next execution (it used to be dropped, though the client was told
 * the instance would be suspended). */
TEST(a_suspend_after_a_continue_as_new_in_the_same_batch_is_carried_over)
{
    sim s;
    sim_init(&s);
    duro_orch *e = NULL;
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    int mode = 1;
    CHECK_OK(run_turn(orch_one_then, &mode, &e, &s, NULL, 0, 1000, &t));
    duro_work_item m[3] = {msg_done(1, 2, "a"),
                           msg_control(DURO_WORK_SUSPEND_INSTANCE, "hold"),
                           msg_event("ev", "p")};
    CHECK_OK(run_turn(orch_one_then, &mode, &e, &s, m, 3, 2000, &t));
    CHECK_EQ(t.status, DURO_STATUS_CONTINUED_AS_NEW);
    CHECK_EQ(t.outbound_count, 3);
    if (t.outbound_count == 3) {
        CHECK_EQ(t.outbound[0].item.kind, DURO_WORK_CONTINUE_AS_NEW);
        CHECK_EQ(t.outbound[1].item.kind, DURO_WORK_SUSPEND_INSTANCE);
        CHECK_EQ(t.outbound[1].item.execution_id, 2);
        CHECK_STR(t.outbound[1].item.reason, "hold");
        CHECK_STR(t.outbound[1].item.requested_by, "operator");
        CHECK_EQ(t.outbound[1].item.flags, 0);
        CHECK_EQ(t.outbound[2].item.kind, DURO_WORK_EXTERNAL_EVENT);
        CHECK_EQ(t.outbound[2].item.flags, DURO_EVENT_CARRIED);
    }
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
}

/* cleanup that never ends: the deadline terminates the instance */
static int orch_stuck_cleanup(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    duro_await(o, duro_call_activity(o, "Work", "w"));
    if (duro_cancel_requested(o))
        duro_await(o, duro_wait_event(o, "never"));
    duro_call_activity(o, "Undo", "u"); /* outstanding when terminated */
    duro_await(o, duro_wait_event(o, "never"));
    return duro_ok(out, "x");
}

TEST(cleanup_deadline_terminates_and_replay_keeps_the_recorded_deadline)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    g_observe = 1;
    g_cleanup_ms = 500;
    CHECK_OK(run_turn(orch_stuck_cleanup, NULL, NULL, &s, NULL, 0, 1000, &t));
    duro_work_item m = msg_cancel("stop");
    CHECK_OK(run_turn(orch_stuck_cleanup, NULL, NULL, &s, &m, 1, 2000, &t));
    const duro_event *timer = find_kind(&s, DURO_EVENT_TIMER_CREATED, 0);
    CHECK(timer != NULL);
    CHECK_EQ(timer->fire_at_ms, 2500);
    CHECK_EQ(timer->flags, DURO_TIMER_CLEANUP_DEADLINE);
    /* replayed with a different option: the recorded deadline stands and
     * replay stays deterministic */
    g_cleanup_ms = 99999;
    m = msg_event("other", "x");
    CHECK_OK(run_turn(orch_stuck_cleanup, NULL, NULL, &s, &m, 1, 2100, &t));
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    m = msg_timer(1, timer->event_id);
    CHECK_OK(run_turn(orch_stuck_cleanup, NULL, NULL, &s, &m, 1, 2600, &t));
    CHECK_EQ(t.status, DURO_STATUS_TERMINATED);
    CHECK_EQ(t.meta.category, DURO_CATEGORY_CANCELLED);
    CHECK(strstr(t.meta.error, "cleanup deadline passed") != NULL);
    const duro_event *end = &s.events[s.count - 1];
    CHECK_EQ(end->kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(end->requested_by, "duro");
    g_observe = 0;
    g_cleanup_ms = 0;
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(terminate_ends_without_code_and_terminates_children)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    g_observe = 1; /* terminate never asks the code, observing or not */
    CHECK_OK(run_turn(orch_wait_forever, NULL, NULL, &s, NULL, 0, 1, &t));
    duro_work_item m[2] = {msg_done(1, 2, "finished-late"),
                           msg_control(DURO_WORK_TERMINATE_INSTANCE, "broken")};
    m[0].source_id = 99; /* unknown: dropped, not recorded */
    CHECK_OK(run_turn(must_not_run, NULL, NULL, &s, m, 2, 2, &t));
    CHECK_EQ(t.ran_code, 0);
    CHECK_EQ(t.status, DURO_STATUS_TERMINATED);
    CHECK_EQ(t.meta.status, DURO_STATUS_TERMINATED);
    CHECK_STR(t.meta.error, "broken");
    CHECK_EQ(t.cancelled_count, 1);
    CHECK_STR(t.cancel_reasons[0], DURO_REASON_INSTANCE_TERMINATED);
    const duro_outbound *child =
        find_outbound(&t, DURO_WORK_TERMINATE_INSTANCE);
    CHECK(child != NULL);
    CHECK_STR(child->item.instance_id, "i1:1:3");
    CHECK_STR(child->item.requested_by, "parent:i1");
    CHECK(find_outbound(&t, DURO_WORK_CANCEL_INSTANCE) == NULL);
    const duro_event *end = &s.events[s.count - 1];
    CHECK_EQ(end->kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(end->reason, "broken");
    CHECK_STR(end->requested_by, "operator");
    g_observe = 0;
    duro__turn_free(&t);
    sim_free(&s);
}

static void suspend_scenario(int warm_mode, sim *s)
{
    duro_orch *e = NULL;
    duro_orch **w = warm_mode ? &e : NULL;
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    CHECK_OK(run_turn(orch_events, NULL, w, s, NULL, 0, 1000, &t));
    duro_work_item m = msg_timer(1, 2);
    CHECK_OK(run_turn(orch_events, NULL, w, s, &m, 1, 1100, &t));
    /* suspended twice in one batch: one event; a resume of a running
     * instance before it is a no-op */
    duro_work_item sus[3] = {
        msg_control(DURO_WORK_RESUME_INSTANCE, "not suspended"),
        msg_control(DURO_WORK_SUSPEND_INSTANCE, "investigating"),
        msg_control(DURO_WORK_SUSPEND_INSTANCE, "twice")};
    CHECK_OK(run_turn(orch_events, NULL, w, s, sus, 3, 1200, &t));
    CHECK_EQ(t.status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(t.meta_changed, 1);
    CHECK_EQ(t.meta.status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(t.delta_count, 1);
    CHECK_EQ(t.delta[0].kind, DURO_EVENT_EXECUTION_SUSPENDED);
    CHECK_STR(t.delta[0].reason, "investigating");

    /* while suspended, events are recorded in arrival order and the code
     * does not run (a cold engine does not even replay it) */
    g_suspended = 1;
    duro_work_item ev[2] = {msg_event("go", "first"),
                            msg_event("go", "second")};
    CHECK_OK(run_turn(warm_mode ? orch_events : must_not_run, NULL, w, s, ev, 1,
                      1300, &t));
    CHECK_EQ(t.status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(t.worker_count + t.outbound_count, 0);
    CHECK_EQ(t.ran_code, 0);
    CHECK_OK(run_turn(warm_mode ? orch_events : must_not_run, NULL, w, s,
                      ev + 1, 1, 1400, &t));
    CHECK_EQ(t.ran_code, 0);
    CHECK_EQ(t.status, DURO_STATUS_SUSPENDED);

    /* resumed: the code consumes both, in order, and completes */
    m = msg_control(DURO_WORK_RESUME_INSTANCE, "fixed");
    CHECK_OK(run_turn(orch_events, NULL, w, s, &m, 1, 1500, &t));
    g_suspended = 0;
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "first+second");
    duro__engine_destroy(e);
    duro__turn_free(&t);
}

TEST(suspend_keeps_inputs_in_order_until_resume)
{
    sim warm, cold;
    sim_init(&warm);
    sim_init(&cold);
    suspend_scenario(1, &warm);
    suspend_scenario(0, &cold);
    const int kinds[] = {
        DURO_EVENT_ORCHESTRATION_STARTED, DURO_EVENT_TIMER_CREATED,
        DURO_EVENT_TIMER_FIRED,           DURO_EVENT_EVENT_SUBSCRIBED,
        DURO_EVENT_EVENT_SUBSCRIBED,      DURO_EVENT_EXECUTION_SUSPENDED,
        DURO_EVENT_EVENT_RAISED,          DURO_EVENT_EVENT_RAISED,
        DURO_EVENT_EXECUTION_RESUMED,     DURO_EVENT_ORCHESTRATION_COMPLETED};
    CHECK_EQ(warm.count, sizeof(kinds) / sizeof(kinds[0]));
    CHECK_EQ(cold.count, warm.count);
    for (size_t i = 0; i < warm.count; i++) {
        CHECK_EQ(warm.events[i].kind, kinds[i]);
        CHECK_EQ(cold.events[i].kind, kinds[i]);
        CHECK_STR(cold.events[i].payload, warm.events[i].payload);
    }
    CHECK_STR(warm.events[6].payload, "first");
    CHECK_STR(warm.events[8].reason, "fixed");
    CHECK_STR(warm.events[8].requested_by, "operator");
    sim_free(&warm);
    sim_free(&cold);
}

TEST(a_suspended_instance_is_cancelled_at_once_even_when_observing)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    saga_probe probe = {0};
    g_observe = 1;
    g_cleanup_ms = 1000;
    CHECK_OK(run_turn(orch_saga, &probe, NULL, &s, NULL, 0, 1, &t));
    duro_work_item sus = msg_control(DURO_WORK_SUSPEND_INSTANCE, "hold");
    CHECK_OK(run_turn(orch_saga, &probe, NULL, &s, &sus, 1, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_SUSPENDED);
    g_suspended = 1;
    duro_work_item m = msg_cancel("give up");
    CHECK_OK(run_turn(must_not_run, NULL, NULL, &s, &m, 1, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_EQ(t.cancelled_count, 1); /* Reserve */
    const duro_event *req =
        find_kind(&s, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_EQ(req->flags, 0); /* not delivered to the code */
    /* a resume in the batch before a terminate is recorded too */
    sim s3;
    sim_init(&s3);
    g_suspended = 0;
    CHECK_OK(run_turn(orch_saga, &probe, NULL, &s3, NULL, 0, 1, &t));
    CHECK_OK(run_turn(orch_saga, &probe, NULL, &s3, &sus, 1, 2, &t));
    g_suspended = 1;
    duro_work_item rt[2] = {msg_control(DURO_WORK_RESUME_INSTANCE, "back"),
                            msg_control(DURO_WORK_TERMINATE_INSTANCE, "end")};
    CHECK_OK(run_turn(must_not_run, NULL, NULL, &s3, rt, 2, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_TERMINATED);
    CHECK_EQ(count_kind(&s3, DURO_EVENT_EXECUTION_RESUMED), 1);
    CHECK_EQ(s3.events[s3.count - 1].kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    sim_free(&s3);
    /* suspended in the same batch as the cancel: also at once, on a warm
     * engine whose code is live */
    sim s2;
    sim_init(&s2);
    duro_orch *e = NULL;
    g_suspended = 0;
    CHECK_OK(run_turn(orch_saga, &probe, &e, &s2, NULL, 0, 1, &t));
    duro_work_item both[2] = {sus, m};
    CHECK_OK(run_turn(orch_saga, &probe, &e, &s2, both, 2, 2, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_EQ(count_kind(&s2, DURO_EVENT_TIMER_CREATED), 0); /* no cleanup */
    g_observe = 0;
    g_cleanup_ms = 0;
    duro__engine_destroy(e);
    duro__turn_free(&t);
    sim_free(&s);
    sim_free(&s2);
}

/* A store that suspends an instance before any runtime began it writes
 * OrchestrationStarted (no version: the start asked for none) and a
 * flagged ExecutionSuspended; the code starts at the resume, the
 * registration's version is taken, and a replay from scratch starts it at
 * the same place. */
static void seed_suspended_before_start(sim *s, uint32_t flags)
{
    duro_event started = {.event_id = 1,
                          .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                          .timestamp_ms = 100,
                          .name = "orch",
                          .payload = "in"};
    duro_event suspended = {.event_id = 2,
                            .kind = DURO_EVENT_EXECUTION_SUSPENDED,
                            .timestamp_ms = 100,
                            .reason = "not yet",
                            .requested_by = "operator",
                            .flags = flags};
    s->events[s->count++] = started;
    s->events[s->count++] = suspended;
}

static void suspended_before_start_scenario(int warm_mode, sim *s)
{
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    seed_suspended_before_start(s, DURO_SUSPEND_BEFORE_START);
    g_version = "2.0";
    /* an event while suspended: recorded, no code */
    g_suspended = 1;
    duro_work_item ev = msg_event("go", "first");
    CHECK_OK(run_turn(must_not_run, NULL, NULL, s, &ev, 1, 1000, &t));
    CHECK_EQ(t.status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(t.ran_code, 0);
    /* the resume starts the code: its first command follows the resume,
     * its clock is the resume's */
    duro_orch *e = NULL;
    duro_work_item m = msg_control(DURO_WORK_RESUME_INSTANCE, "go on");
    CHECK_OK(run_turn(orch_events, NULL, &e, s, &m, 1, 5000, &t));
    g_suspended = 0;
    CHECK_EQ(t.status, DURO_STATUS_RUNNING);
    CHECK_EQ(t.ran_code, 1);
    CHECK_EQ(t.meta_changed, 1);
    CHECK_STR(t.meta.version, "2.0");
    CHECK_EQ(t.delta_count, 2);
    CHECK_EQ(t.delta[0].kind, DURO_EVENT_EXECUTION_RESUMED);
    CHECK_EQ(t.delta[1].kind, DURO_EVENT_TIMER_CREATED);
    CHECK_EQ(t.delta[1].fire_at_ms, 5010);
    CHECK_EQ(duro__engine_reusable(e), 1);
    if (!warm_mode) {
        duro__engine_destroy(e);
        e = NULL;
    }
    /* the timer and the second event: a warm engine goes on, a cold one
     * replays from the start and must start the code at the resume */
    duro_work_item more[2] = {msg_timer(1, 5), msg_event("go", "second")};
    CHECK_OK(run_turn(orch_events, NULL, warm_mode ? &e : NULL, s, more, 2,
                      6000, &t));
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "first+second");
    g_version = NULL;
    duro__engine_destroy(e);
    duro__turn_free(&t);
}

TEST(an_instance_suspended_before_it_began_starts_its_code_at_the_resume)
{
    sim warm, cold;
    sim_init(&warm);
    sim_init(&cold);
    suspended_before_start_scenario(1, &warm);
    suspended_before_start_scenario(0, &cold);
    CHECK_EQ(cold.count, warm.count);
    for (size_t i = 0; i < warm.count; i++)
        CHECK_EQ(cold.events[i].kind, warm.events[i].kind);
    CHECK_EQ(warm.events[2].kind, DURO_EVENT_EVENT_RAISED);
    CHECK_EQ(warm.events[3].kind, DURO_EVENT_EXECUTION_RESUMED);
    sim_free(&warm);
    sim_free(&cold);

    /* without the flag (a suspend recorded by a turn after the code ran),
     * the code starts at OrchestrationStarted as it always did: such a
     * history, whose code issued nothing before the suspend, replays */
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    seed_suspended_before_start(&s, 0);
    g_suspended = 1;
    duro_work_item m = msg_control(DURO_WORK_RESUME_INSTANCE, "go on");
    CHECK_OK(run_turn(orch_events, NULL, NULL, &s, &m, 1, 5000, &t));
    g_suspended = 0;
    CHECK_EQ(t.nondeterminism, 1); /* it issued its timer before the
                                      recorded suspend */
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(nondeterministic_code_can_still_be_cancelled)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    duro__turn_init(&t);
    g_observe = 1;
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, NULL, 0, 1, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &s, &m, 1, 2, &t));
    /* the code changed: replay would fail; the cancel still ends it */
    m = msg_cancel("cannot replay");
    CHECK_OK(run_turn(orch_chain_changed, NULL, NULL, &s, &m, 1, 3, &t));
    CHECK_EQ(t.status, DURO_STATUS_CANCELLED);
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_EQ(t.cancelled_count, 1); /* B */
    g_observe = 0;
    duro__turn_free(&t);
    sim_free(&s);
}

/* ------------------------------------------------------------------------
 * the store-less replayer (duro__engine_replay, behind
 * duro_replay_history) */

static int orch_chain_other_output(duro_orch *o, const char *input,
                                   duro_result *out)
{
    orch_chain(o, input, out);
    return duro_ok(out, "other");
}

static int replay_sim(duro_orchestration_fn fn, const sim *s, char *msg,
                      size_t size)
{
    duro__engine_config cfg = {
        .fn = fn, .max_payload = 4096, .cleanup_timeout_ms = 1000};
    duro_history h = {.instance_id = "i1",
                      .execution_id = 1,
                      .events = (duro_event *)s->events,
                      .count = s->count};
    return duro__engine_replay(&cfg, &h, msg, size);
}

TEST(replayer_matches_recorded_runs_and_names_what_changed)
{
    sim s;
    sim_init(&s);
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    duro_orch *warm = NULL;
    char msg[512];
    CHECK_OK(run_turn(orch_chain, NULL, &warm, &s, NULL, 0, 1000, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_chain, NULL, &warm, &s, &m, 1, 2000, &t));
    /* still running: replays; a changed command is named with both sides */
    CHECK_OK(replay_sim(orch_chain, &s, msg, sizeof(msg)));
    CHECK_RC(replay_sim(orch_chain_changed, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    CHECK_MSG(strstr(msg, "nondeterminism at event 4") &&
                  strstr(msg, "issued ActivityScheduled 'C'") &&
                  strstr(msg, "history has ActivityScheduled 'B'"),
              "%s", msg);
    m = msg_done(1, 4, "b");
    CHECK_OK(run_turn(orch_chain, NULL, &warm, &s, &m, 1, 3000, &t));
    CHECK_EQ(count_kind(&s, DURO_EVENT_ORCHESTRATION_COMPLETED), 1);
    /* completed: the code must end there, the same way */
    CHECK_OK(replay_sim(orch_chain, &s, msg, sizeof(msg)));
    CHECK_RC(replay_sim(orch_chain_other_output, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    CHECK_MSG(strstr(msg, "nondeterminism at event 6: the orchestration "
                          "ended with OrchestrationCompleted (output "
                          "\"other\") but history has "
                          "OrchestrationCompleted (output \"b\")"),
              "%s", msg);
    CHECK_RC(replay_sim(orch_complete_early, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    /* failed by the code (category application): compared too */
    {
        sim f;
        sim_init(&f);
        duro_orch *w2 = NULL;
        CHECK_OK(run_turn(orch_chain, NULL, &w2, &f, NULL, 0, 1000, &t));
        duro_work_item fail =
            msg_failed(1, 2, "card declined", DURO_CATEGORY_APPLICATION);
        CHECK_OK(run_turn(orch_chain, NULL, &w2, &f, &fail, 1, 2000, &t));
        CHECK_EQ(count_kind(&f, DURO_EVENT_ORCHESTRATION_FAILED), 1);
        CHECK_OK(replay_sim(orch_chain, &f, msg, sizeof(msg)));
        CHECK_RC(replay_sim(orch_chain_other_output, &f, msg, sizeof(msg)),
                 DURO_NONDETERMINISM);
        CHECK_MSG(strstr(msg, "ended with OrchestrationCompleted (output "
                              "\"other\") but history has "
                              "OrchestrationFailed (application, error "
                              "\"card declined\")"),
                  "%s", msg);
        duro__engine_destroy(w2);
        sim_free(&f);
    }
    /* a history that is not one: refused with the reason */
    sim bad = s;
    bad.events[2].event_id = 7;
    CHECK_RC(replay_sim(orch_chain, &bad, msg, sizeof(msg)), DURO_INVALID);
    CHECK(strstr(msg, "event 3 of the history has id 7") != NULL);
    duro__engine_destroy(warm);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(replayer_leaves_out_inputs_a_cancel_recorded_without_the_code)
{
    /* A completion and a cancel in one batch of code that does not observe
     * cancellation: the completion is recorded, the code never sees it.
     * Replaying it to the code would issue B where history has the
     * cancel's events. */
    sim s;
    sim_init(&s);
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    duro_orch *warm = NULL;
    char msg[512];
    CHECK_OK(run_turn(orch_chain, NULL, &warm, &s, NULL, 0, 1000, &t));
    duro_work_item batch[] = {msg_done(1, 2, "a"), msg_cancel("stop")};
    CHECK_OK(run_turn(orch_chain, NULL, &warm, &s, batch, 2, 2000, &t));
    CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_COMPLETED), 1);
    CHECK_EQ(count_kind(&s, DURO_EVENT_ORCHESTRATION_CANCELLED), 1);
    CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_OK(replay_sim(orch_chain, &s, msg, sizeof(msg)));
    /* what came before is still checked */
    CHECK_RC(replay_sim(orch_events, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    duro__engine_destroy(warm);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(release_last_cold_engine)
{
    duro__engine_destroy(last_cold);
    last_cold = NULL;
    CHECK(last_cold == NULL);
}

/* ------------------------------------------------------------------------
 * patch markers (duro_patched, duro_patch_deprecated) */

/* v2 of orch_chain: B became C behind the change "use-c" */
static int orch_patched(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    duro_await(o, a);
    int patched = duro_patched(o, "use-c");
    /* asked again: the same answer, nothing more recorded */
    CHECK_EQ(duro_patched(o, "use-c"), patched);
    duro_task *b =
        duro_call_activity(o, patched ? "C" : "B", duro_task_output(a));
    duro_await(o, b);
    return duro_ok(out, patched ? "new" : "old");
}

/* v3: no instance of v1 is left; the old path is gone */
static int orch_deprecated(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    duro_await(o, a);
    duro_patch_deprecated(o, "use-c");
    duro_await(o, duro_call_activity(o, "C", duro_task_output(a)));
    return duro_ok(out, "new");
}

/* another change id where v2 recorded "use-c" */
static int orch_other_patch(duro_orch *o, const char *input, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "A", input);
    duro_await(o, a);
    int patched = duro_patched(o, "use-d");
    duro_await(o,
               duro_call_activity(o, patched ? "D" : "B", duro_task_output(a)));
    return duro_ok(out, "other");
}

/* the change asked before A instead of after it */
static int orch_moved_patch(duro_orch *o, const char *input, duro_result *out)
{
    int patched = duro_patched(o, "use-c");
    duro_task *a = duro_call_activity(o, "A", input);
    duro_await(o, a);
    duro_await(o,
               duro_call_activity(o, patched ? "C" : "B", duro_task_output(a)));
    return duro_ok(out, "moved");
}

static const char *g_patch_id;
static int orch_patched_id(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    CHECK_EQ(duro_patched(o, g_patch_id), 1);
    return duro_ok(out, "patched");
}

static int orch_bad_patch(duro_orch *o, const char *input, duro_result *out)
{
    (void)input;
    CHECK_EQ(duro_patched(o, g_patch_id), 0);
    CHECK_MSG(strstr(duro_errmsg(), "change id") != NULL, "%s", duro_errmsg());
    duro_await(o, duro_call_activity(o, "A", "never recorded"));
    return duro_ok(out, "unreached");
}

/* Runs orch_chain (v1) or orch_patched (v2) through its first turn and
 * A's completion: Started, Scheduled A, Completed A, then (v2) the marker
 * and Scheduled C, or (v1) Scheduled B. */
static void record_until_second_call(duro_orchestration_fn fn, int warm_mode,
                                     sim *s)
{
    duro_orch *e = NULL;
    duro_orch **w = warm_mode ? &e : NULL;
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    CHECK_OK(run_turn(fn, NULL, w, s, NULL, 0, 1000, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(fn, NULL, w, s, &m, 1, 2000, &t));
    CHECK_EQ(t.nondeterminism, 0);
    duro__turn_free(&t);
    duro__engine_destroy(e);
}

/* One more turn of fn over s: the second activity (event id `source`)
 * completes. */
static void finish_second_call(duro_orchestration_fn fn, sim *s,
                               uint64_t source, duro__turn *t)
{
    duro_work_item m = msg_done(1, source, "done");
    CHECK_OK(run_turn(fn, NULL, NULL, s, &m, 1, 3000, t));
}

TEST(patched_records_a_marker_live_and_takes_the_new_path)
{
    for (int warm_mode = 0; warm_mode < 2; warm_mode++) {
        sim s;
        sim_init(&s);
        record_until_second_call(orch_patched, warm_mode, &s);
        /* Started, Scheduled A, Completed A, PatchMarker, Scheduled C: the
         * marker once, though the code asked twice */
        CHECK_EQ(s.count, 5);
        CHECK_EQ(s.events[3].kind, DURO_EVENT_PATCH_MARKER);
        CHECK_STR(s.events[3].name, "use-c");
        CHECK_EQ(s.events[3].timestamp_ms, 2000);
        CHECK_EQ(s.events[4].kind, DURO_EVENT_ACTIVITY_SCHEDULED);
        CHECK_STR(s.events[4].name, "C");
        CHECK_EQ(count_kind(&s, DURO_EVENT_PATCH_MARKER), 1);
        /* replayed (cold), the marker is consumed: true again, completes */
        duro__turn t;
        CHECK_OK(duro__turn_init(&t));
        finish_second_call(orch_patched, &s, 5, &t);
        CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
        CHECK_STR(t.meta.output, "new");
        CHECK_EQ(count_kind(&s, DURO_EVENT_PATCH_MARKER), 1);
        char msg[512];
        CHECK_OK(replay_sim(orch_patched, &s, msg, sizeof(msg)));
        duro__turn_free(&t);
        sim_free(&s);
    }
}

TEST(patched_is_false_over_a_history_recorded_before_the_change)
{
    sim s;
    sim_init(&s);
    record_until_second_call(orch_chain, 0, &s); /* v1: Scheduled B */
    CHECK_EQ(s.count, 4);
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    /* v2 over v1's history: the old path, nothing recorded */
    finish_second_call(orch_patched, &s, 4, &t);
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_STR(t.meta.output, "old");
    CHECK_EQ(count_kind(&s, DURO_EVENT_PATCH_MARKER), 0);
    char msg[512];
    CHECK_OK(replay_sim(orch_patched, &s, msg, sizeof(msg)));
    /* an instance of v1 still waiting on A takes the new path when its
     * code first reaches the change under v2 */
    sim w;
    sim_init(&w);
    CHECK_OK(run_turn(orch_chain, NULL, NULL, &w, NULL, 0, 1000, &t));
    duro_work_item m = msg_done(1, 2, "a");
    CHECK_OK(run_turn(orch_patched, NULL, NULL, &w, &m, 1, 2000, &t));
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_EQ(w.events[3].kind, DURO_EVENT_PATCH_MARKER);
    CHECK_STR(w.events[4].name, "C");
    duro__turn_free(&t);
    sim_free(&w);
    sim_free(&s);
}

TEST(patch_deprecated_accepts_histories_with_and_without_the_marker)
{
    char msg[512];
    sim s2;
    sim_init(&s2);
    record_until_second_call(orch_patched, 0, &s2); /* with the marker */
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    finish_second_call(orch_deprecated, &s2, 5, &t);
    CHECK_EQ(t.nondeterminism, 0);
    CHECK_STR(t.meta.output, "new");
    CHECK_OK(replay_sim(orch_deprecated, &s2, msg, sizeof(msg)));
    /* live, it records nothing */
    sim s3;
    sim_init(&s3);
    record_until_second_call(orch_deprecated, 0, &s3);
    CHECK_EQ(count_kind(&s3, DURO_EVENT_PATCH_MARKER), 0);
    CHECK_EQ(s3.count, 4);
    CHECK_STR(s3.events[3].name, "C");
    finish_second_call(orch_deprecated, &s3, 4, &t);
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_OK(replay_sim(orch_deprecated, &s3, msg, sizeof(msg)));
    /* and v2 replays v3's history (no marker): the old path, B, where
     * history has C - the deprecation is only safe once v1 is gone */
    CHECK_RC(replay_sim(orch_patched, &s3, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    duro__turn_free(&t);
    sim_free(&s3);
    sim_free(&s2);
}

TEST(patch_marker_mismatches_are_nondeterminism_naming_both_sides)
{
    char msg[512];
    sim s;
    sim_init(&s);
    record_until_second_call(orch_patched, 0, &s);
    /* the code no longer asks for the change */
    CHECK_RC(replay_sim(orch_chain, &s, msg, sizeof(msg)), DURO_NONDETERMINISM);
    CHECK_MSG(strstr(msg, "nondeterminism at event 4: the orchestration "
                          "issued ActivityScheduled 'B'") &&
                  strstr(msg, "but history has PatchMarker 'use-c'"),
              "%s", msg);
    /* another id at that point: both ids named */
    CHECK_RC(replay_sim(orch_other_patch, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    CHECK_MSG(strstr(msg, "event 4") &&
                  strstr(msg, "history has PatchMarker 'use-c' (at this "
                              "point the code asked for patch 'use-d', not "
                              "'use-c')"),
              "%s", msg);
    /* asked in another place: the marker meets the old path's command */
    CHECK_RC(replay_sim(orch_moved_patch, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    CHECK_MSG(strstr(msg, "event 4") && strstr(msg, "PatchMarker 'use-c'"),
              "%s", msg);
    /* the code returns, or waits, where history has the marker */
    CHECK_RC(replay_sim(orch_returns_at_once, &s, msg, sizeof(msg)),
             DURO_NONDETERMINISM);
    CHECK(strstr(msg, "history continues with ActivityScheduled 'A'"));
    /* in a live turn, the instance fails with the same message */
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    finish_second_call(orch_chain, &s, 5, &t);
    CHECK_EQ(t.nondeterminism, 1);
    CHECK_EQ(t.status, DURO_STATUS_FAILED);
    CHECK_MSG(strstr(t.meta.error, "history has PatchMarker 'use-c'"), "%s",
              t.meta.error);
    duro__turn_free(&t);
    sim_free(&s);
}

TEST(patch_ids_that_are_empty_long_or_not_utf8_fail_the_execution)
{
    char long_id[DURO_PATCH_ID_MAX + 2];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    const struct {
        const char *id, *says;
    } cases[] = {
        {"", "duro_patched: the change id is empty"},
        {NULL, "duro_patched: the change id is empty"},
        {long_id, "longer than DURO_PATCH_ID_MAX (255)"},
        {"bad\xff", "duro_patched change id is not valid UTF-8 at byte 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sim s;
        sim_init(&s);
        duro__turn t;
        CHECK_OK(duro__turn_init(&t));
        g_patch_id = cases[i].id;
        CHECK_OK(run_turn(orch_bad_patch, NULL, NULL, &s, NULL, 0, 1, &t));
        CHECK_EQ(t.status, DURO_STATUS_FAILED);
        CHECK_EQ(t.meta.category, DURO_CATEGORY_CONFIGURATION);
        CHECK_MSG(strstr(t.meta.error, cases[i].says), "case %zu: %s", i,
                  t.meta.error);
        CHECK_EQ(count_kind(&s, DURO_EVENT_PATCH_MARKER), 0);
        CHECK_EQ(count_kind(&s, DURO_EVENT_ACTIVITY_SCHEDULED), 0);
        duro__turn_free(&t);
        sim_free(&s);
    }
    /* over a recorded history: where the replay stops, with the reason;
     * and a history that ends first (the code runs on live) too */
    {
        sim rec;
        sim_init(&rec);
        record_until_second_call(orch_chain, 0, &rec);
        char msg[512];
        g_patch_id = "";
        CHECK_RC(replay_sim(orch_bad_patch, &rec, msg, sizeof(msg)),
                 DURO_NONDETERMINISM);
        CHECK_MSG(strstr(msg, "nondeterminism at event 2: before reaching it "
                              "the code failed: duro_patched: the change id "
                              "is empty"),
                  "%s", msg);
        duro__turn t;
        CHECK_OK(duro__turn_init(&t));
        duro_work_item m = msg_done(1, 4, "b");
        CHECK_OK(run_turn(orch_bad_patch, NULL, NULL, &rec, &m, 1, 9, &t));
        CHECK_EQ(t.status, DURO_STATUS_FAILED);
        CHECK_MSG(strstr(t.meta.error, "the change id is empty"), "%s",
                  t.meta.error);
        rec.count = 1; /* OrchestrationStarted only */
        CHECK_RC(replay_sim(orch_bad_patch, &rec, msg, sizeof(msg)),
                 DURO_INVALID);
        CHECK_MSG(strstr(msg, "the code fails the execution: duro_patched: "
                              "the change id is empty"),
                  "%s", msg);
        duro__turn_free(&t);
        sim_free(&rec);
    }
    /* exactly DURO_PATCH_ID_MAX bytes is fine */
    long_id[DURO_PATCH_ID_MAX] = '\0';
    g_patch_id = long_id;
    sim s;
    sim_init(&s);
    duro__turn t;
    CHECK_OK(duro__turn_init(&t));
    CHECK_OK(run_turn(orch_patched_id, NULL, NULL, &s, NULL, 0, 1, &t));
    CHECK_EQ(t.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(count_kind(&s, DURO_EVENT_PATCH_MARKER), 1);
    duro__turn_free(&t);
    sim_free(&s);
    g_patch_id = NULL;
}

TEST_MAIN(
    T(plan_turn_cases), T(chain_warm_and_cold_give_the_same_history),
    T(nondeterminism_different_command),
    T(names_and_default_child_ids_over_the_limit_fail_their_tasks),
    T(nondeterminism_message_is_valid_utf8_when_an_input_is_cut),
    T(nondeterminism_waiting_where_history_has_a_command),
    T(nondeterminism_returned_while_history_continues),
    T(select_loser_activity_is_cancelled_once),
    T(select_loser_replay_adds_no_second_cancel),
    T(events_raised_before_waiting_are_kept_in_order),
    T(fanout_join_keeps_argument_order),
    T(stale_and_unknown_messages_are_dropped),
    T(failure_cancels_every_outstanding_activity),
    T(completion_with_outstanding_activity_cancels_it),
    T(continue_as_new_cancels_and_carries_events_over),
    T(cancel_decided_from_history_without_running_code),
    T(cancel_of_outstanding_activity_on_warm_engine),
    T(terminate_without_code_for_poison),
    T(retry_with_attempt_timeout_and_backoff),
    T(retry_exhausted_and_configuration_errors),
    T(retry_invalid_policies_fail_the_task), T(child_orchestration_round_trip),
    T(child_reports_to_parent), T(now_guid_replaying_and_log_are_replay_safe),
    T(misuse_and_bad_input_fail_tasks_not_the_process),
    T(orchestration_output_over_limit_fails_clearly),
    T(orch_alloc_refuses_sizes_that_overflow),
    T(tracker_classifies_completions),
    T(engine_rejects_history_that_does_not_fit),
    T(observed_cancel_runs_cleanup_and_replays_the_same),
    T(cleanup_deadline_terminates_and_replay_keeps_the_recorded_deadline),
    T(terminate_ends_without_code_and_terminates_children),
    T(suspend_keeps_inputs_in_order_until_resume),
    T(a_suspended_instance_is_cancelled_at_once_even_when_observing),
    T(an_instance_suspended_before_it_began_starts_its_code_at_the_resume),
    T(nondeterministic_code_can_still_be_cancelled),
    T(a_cancel_after_the_code_returned_in_the_same_batch_still_cancels),
    T(a_suspend_after_a_continue_as_new_in_the_same_batch_is_carried_over),
    T(replayer_matches_recorded_runs_and_names_what_changed),
    T(replayer_leaves_out_inputs_a_cancel_recorded_without_the_code),
    T(patched_records_a_marker_live_and_takes_the_new_path),
    T(patched_is_false_over_a_history_recorded_before_the_change),
    T(patch_deprecated_accepts_histories_with_and_without_the_marker),
    T(patch_marker_mismatches_are_nondeterminism_naming_both_sides),
    T(patch_ids_that_are_empty_long_or_not_utf8_fail_the_execution),
    T(release_last_cold_engine))
