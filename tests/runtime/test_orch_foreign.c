/* test_orch_foreign.c - tasks used outside the orchestration context that
 * created them: one instance smuggles its task pointers to another through
 * globals, and every function that takes a task (await, select, wait-any,
 * join, cancel, the accessors) must refuse them with DURO_MISUSE, without
 * hanging, without reading the other engine's memory (live: a race TSan
 * would see; freed: a use-after-free ASan would see), and without harming
 * either instance. Each test runs a real runtime on its own SQLite file. */
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * the smuggling */

static duro_task *_Atomic smuggled_gate;  /* Holder's pending activity */
static duro_task *_Atomic smuggled_timer; /* Holder's pending timer */
static duro_task *_Atomic smuggled_done;  /* Holder's completed activity */
static duro_task *_Atomic smuggled_dead;  /* Finisher's, engine destroyed */
static _Atomic int holder_ready, gate_open;

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* Returns once the test opens the gate (or after 20 s). */
static int act_gate(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&gate_open) && test_now_ms() < end)
        test_sleep_ms(1);
    return duro_ok(out, "opened");
}

/* Publishes a completed task, a pending activity and a pending timer, then
 * waits for "release" and for its gate. */
static int orch_holder(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *done = duro_call_activity(o, "Echo", "held");
    if (duro_await(o, done) != DURO_OK)
        return duro_fail(out, "echo failed");
    duro_task *gate = duro_call_activity(o, "Gate", NULL);
    duro_task *timer = duro_timer(o, 3600 * 1000);
    atomic_store(&smuggled_done, done);
    atomic_store(&smuggled_gate, gate);
    atomic_store(&smuggled_timer, timer);
    atomic_store(&holder_ready, 1);
    duro_task *release = duro_wait_event(o, "release");
    if (duro_await(o, release) != DURO_OK)
        return duro_fail(out, "release failed");
    if (duro_await(o, gate) != DURO_OK)
        return duro_fail(out, duro_task_error(gate));
    return duro_ok(out, duro_sprintf(o, "%s+%s+%s", duro_task_output(done),
                                     duro_task_output(gate),
                                     duro_task_done(timer) ? "fired" : "-"));
}

/* Completes with a task pointer published: its engine is destroyed when the
 * execution ends. */
static int orch_finisher(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Echo", "gone");
    duro_await(o, t);
    atomic_store(&smuggled_dead, t);
    return duro_ok(out, duro_task_output(t));
}

/* "<name>=<code>" plus "!" when duro_errmsg() does not name the problem. */
static const char *rc_text(duro_orch *o, const char *name, int rc,
                           const char *needle)
{
    int named = strstr(duro_errmsg(), needle) != NULL;
    return duro_sprintf(o, "%s=%s%s", name, duro_errname(rc), named ? "" : "!");
}

/* Every function that takes a task, on foreign task f; returns the report.
 * Creates no task of its own (so a freed engine's memory cannot have been
 * reused for one of them before the checks). */
static const char *use_foreign(duro_orch *o, duro_task *f)
{
    const char *s = "";
    const char *why = "another orchestration context";
    int rc = duro_await(o, f);
    s = duro_sprintf(o, "%s%s", s, rc_text(o, "await", rc, "duro_await: "));
    s = duro_sprintf(o, "%s,%s", s, rc_text(o, "await-why", rc, why));

    duro_task *one[] = {f};
    duro_task *w = duro_select_n(o, one, 1);
    int named = strstr(duro_errmsg(), "duro_select_n: tasks[0]") != NULL;
    s = duro_sprintf(o, "%s,select=%s%s", s, duro_errname(duro_await(o, w)),
                     named ? "" : "!");
    w = duro_wait_any_n(o, one, 1);
    named = strstr(duro_errmsg(), "duro_wait_any_n: tasks[0]") != NULL;
    s = duro_sprintf(o, "%s,wait_any=%s%s", s, duro_errname(duro_await(o, w)),
                     named ? "" : "!");
    duro_task *two[] = {NULL, f};
    rc = duro_join_n(o, two, 2);
    s = duro_sprintf(o, "%s,%s", s,
                     rc_text(o, "join", rc, "duro_join_n: tasks[1]"));

    duro_cancel_task(o, f);
    named = strstr(duro_errmsg(), "duro_cancel_task: ") != NULL;
    s = duro_sprintf(o, "%s,cancel%s", s, named ? "" : "!");

    int done = duro_task_done(f);
    int failed = duro_task_failed(f);
    const char *output = duro_task_output(f);
    const char *err = duro_task_error(f);
    int category = duro_task_category(f);
    named = strstr(duro_errmsg(), "duro_task_category: ") != NULL;
    return duro_sprintf(o, "%s,read=%d/%d/%s/%s/%s%s", s, done, failed,
                        output ? output : "(null)",
                        err != NULL && strstr(err, why) != NULL ? "why" : "?",
                        duro_category_name(category), named ? "" : "!");
}

static const char *const expected_report =
    "await=DURO_MISUSE,await-why=DURO_MISUSE,select=DURO_MISUSE,"
    "wait_any=DURO_MISUSE,join=DURO_MISUSE,cancel,"
    "read=1/1/(null)/why/configuration";

/* input "live": the Holder's pending gate; "timer": its timer; "done": its
 * completed task; "dead": the Finisher's. Then mixes a foreign task with
 * one of its own, and finally works normally. */
static int orch_thief(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *f = strcmp(in, "live") == 0    ? atomic_load(&smuggled_gate)
                   : strcmp(in, "timer") == 0 ? atomic_load(&smuggled_timer)
                   : strcmp(in, "done") == 0  ? atomic_load(&smuggled_done)
                                              : atomic_load(&smuggled_dead);
    const char *report = use_foreign(o, f);

    /* mixed with a task of its own: refused before anything is waited for
     * or cancelled, so its own task goes on */
    duro_task *own = duro_call_activity(o, "Echo", "mine");
    duro_task *mixed[] = {own, f};
    duro_task *w = duro_select_n(o, mixed, 2);
    int own_pending = !duro_task_done(own);
    int join_rc = duro_join_n(o, mixed, 2);
    w = duro_wait_any_n(o, mixed, 2);
    int rc = duro_await(o, own);
    return duro_ok(out, duro_sprintf(o, "%s|%s/%s/%d/%s/%s", report,
                                     duro_errname(duro_await(o, w)),
                                     duro_errname(join_rc), own_pending,
                                     duro_errname(rc), duro_task_output(own)));
}

static void register_all(rt_fixture *f)
{
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Gate", act_gate, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Holder", NULL,
                                             orch_holder, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Finisher", NULL,
                                             orch_finisher, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Thief", NULL, orch_thief,
                                             NULL));
}

static void reset_globals(void)
{
    atomic_store(&smuggled_gate, NULL);
    atomic_store(&smuggled_timer, NULL);
    atomic_store(&smuggled_done, NULL);
    atomic_store(&smuggled_dead, NULL);
    atomic_store(&holder_ready, 0);
    atomic_store(&gate_open, 0);
}

static void check_thief(rt_fixture *f, const char *id, const char *input)
{
    rt_start_instance(f, id, "Thief", input);
    duro_instance_info *i = rt_wait(f, id, 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    char full[512];
    snprintf(full, sizeof(full), "%s|DURO_MISUSE/DURO_MISUSE/1/DURO_OK/mine",
             expected_report);
    CHECK_STR(i->output, full);
    duro_free(i);
    /* the thief's own activity ran to completion, never cancelled */
    CHECK_EQ(rt_count_events(f, id, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 0);
    CHECK_EQ(rt_count_events(f, id, DURO_EVENT_ACTIVITY_COMPLETED), 1);
}

/* ------------------------------------------------------------------------
 * tests */

TEST(tasks_of_a_live_instance_are_refused_and_it_is_unharmed)
{
    reset_globals();
    rt_fixture f;
    rt_init(&f, "foreign_live.db");
    register_all(&f);
    rt_start(&f);
    rt_start_instance(&f, "holder", "Holder", NULL);
    WAIT_UNTIL(atomic_load(&holder_ready), 15000);
    /* the holder is suspended, waiting for "release", with its gate
     * activity and its timer pending */
    WAIT_UNTIL(rt_count_events(&f, "holder", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               15000);

    check_thief(&f, "thief-live", "live");
    check_thief(&f, "thief-timer", "timer");
    check_thief(&f, "thief-done", "done");

    /* read from a plain thread: refused without reading the holder's
     * memory (which its turn thread owns) */
    duro_task *g = atomic_load(&smuggled_gate);
    CHECK_EQ(duro_task_done(g), 1);
    CHECK_EQ(duro_task_failed(g), 1);
    CHECK(strstr(duro_errmsg(), "outside orchestration code") != NULL);
    CHECK(duro_task_output(g) == NULL);
    CHECK(strstr(duro_task_error(g), "another orchestration context") != NULL);
    CHECK_EQ(duro_task_category(g), DURO_CATEGORY_CONFIGURATION);

    /* the holder goes on as if nothing happened: nothing of it was
     * cancelled, and its tasks complete normally */
    CHECK_EQ(rt_status(&f, "holder"), DURO_STATUS_RUNNING);
    atomic_store(&gate_open, 1);
    CHECK_OK(duro_client_raise_event(f.client, "holder", "release", NULL));
    duro_instance_info *i = rt_wait(&f, "holder", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "held+opened+-");
    duro_free(i);
    CHECK_EQ(
        rt_count_events(&f, "holder", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 0);
    CHECK_EQ(rt_count_events(&f, "holder", DURO_EVENT_ACTIVITY_COMPLETED), 2);
    rt_done(&f);
}

TEST(tasks_of_a_destroyed_engine_are_refused_without_reading_them)
{
    reset_globals();
    rt_fixture f;
    rt_init(&f, "foreign_dead.db");
    register_all(&f);
    rt_start(&f);
    rt_start_instance(&f, "fin", "Finisher", NULL);
    duro_instance_info *i = rt_wait(&f, "fin", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "gone");
    duro_free(i);
    /* the runtime destroyed the finished execution's engine before its
     * last ack, so the task's memory is freed now: ASan reports any read */
    CHECK(atomic_load(&smuggled_dead) != NULL);
    check_thief(&f, "thief-dead", "dead");

    duro_task *d = atomic_load(&smuggled_dead);
    CHECK_EQ(duro_task_done(d), 1);
    CHECK_EQ(duro_task_failed(d), 1);
    CHECK(duro_task_output(d) == NULL);
    CHECK_EQ(duro_task_category(d), DURO_CATEGORY_CONFIGURATION);
    rt_done(&f);
}

TEST_MAIN(T(tasks_of_a_live_instance_are_refused_and_it_is_unharmed),
          T(tasks_of_a_destroyed_engine_are_refused_without_reading_them))
