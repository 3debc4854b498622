/* test_smoke.c - a first end-to-end pass over the main features on a real
 * runtime and SQLite file: chaining, fan-out, timers, events, select with a
 * cancelled loser, instance cancel, children and continue-as-new, and the
 * times at which activities really ran. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_util.h"

static _Atomic int slow_started, slow_saw_cancel;

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_upper(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    char buf[256];
    size_t i = 0;
    for (; in && in[i] && i < sizeof(buf) - 1; i++)
        buf[i] = (char)(in[i] >= 'a' && in[i] <= 'z' ? in[i] - 32 : in[i]);
    buf[i] = '\0';
    return duro_ok(out, buf);
}

/* Blocks until cancelled (or 20 s). */
static int act_slow(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&slow_started, 1);
    if (duro_activity_wait_cancelled(a, 20000)) {
        atomic_fetch_add(&slow_saw_cancel, 1);
        return duro_fail(out, "cancelled");
    }
    return duro_ok(out, "slow done");
}

/* Runs about 30 ms and records when it began and ended by its own clock
 * (calls 0 and 1: "ok" completes, "fail" fails). */
static _Atomic int64_t timed_begin[2], timed_end[2];

static int act_timed(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    int fail = in != NULL && strcmp(in, "fail") == 0;
    atomic_store(&timed_begin[fail], duro_now_ms());
    usleep(30 * 1000); /* a measurable run time, not a synchronisation */
    atomic_store(&timed_end[fail], duro_now_ms());
    return fail ? duro_fail(out, "timed failure") : duro_ok(out, "timed");
}

static int orch_timed(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_call_activity(o, "Timed", "ok"));
    duro_await(o, duro_call_activity(o, "Timed", "fail"));
    return duro_ok(out, "done");
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "Echo", in);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_task *b = duro_call_activity(o, "Upper", duro_task_output(a));
    if (duro_await(o, b) != DURO_OK)
        return duro_fail(out, duro_task_error(b));
    return duro_ok(out, duro_task_output(b));
}

static int orch_fanout(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    duro_task *t[64];
    for (int i = 0; i < n; i++)
        t[i] = duro_call_activity(o, "Echo", duro_sprintf(o, "%d", i));
    if (duro_join_n(o, t, (size_t)n) != DURO_OK)
        return duro_fail(out, "a task failed");
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += atol(duro_task_output(t[i]));
    return duro_ok(out, duro_sprintf(o, "%ld", sum));
}

static int orch_timer_event(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_timer(o, 100));
    duro_task *e = duro_wait_event(o, "approve");
    duro_task *limit = duro_timer(o, 10000);
    if (duro_select(o, e, limit) == limit)
        return duro_fail(out, "no approval");
    return duro_ok(out, duro_task_output(e));
}

static int orch_select_loser(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *slow = duro_call_activity(o, "Slow", "x");
    duro_task *limit = duro_timer(o, 200);
    if (duro_select(o, slow, limit) == limit)
        return duro_ok(out, "timer won");
    return duro_ok(out, "slow won");
}

static int orch_wait_slow(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *slow = duro_call_activity(o, "Slow", "x");
    duro_await(o, slow);
    return duro_ok(out, "finished");
}

static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *c = duro_call_sub_orchestration(o, "Chain", NULL, NULL, in);
    if (duro_await(o, c) != DURO_OK)
        return duro_fail(out, duro_task_error(c));
    return duro_ok(out, duro_sprintf(o, "child said %s", duro_task_output(c)));
}

static int orch_counter(duro_orch *o, const char *in, duro_result *out)
{
    int n = atoi(in);
    if (n >= 5)
        return duro_ok(out,
                       duro_sprintf(o, "counted to %d in execution %llu", n,
                                    (unsigned long long)duro_execution_id(o)));
    duro_await(o, duro_call_activity(o, "Echo", in));
    return duro_continue_as_new(o, out, duro_sprintf(o, "%d", n + 1));
}

static void setup(rt_fixture *f, const char *db)
{
    rt_init(f, db);
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Upper", act_upper, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Slow", act_slow, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Timed", act_timed, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Timed", NULL, orch_timed,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Chain", NULL, orch_chain,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Fanout", NULL,
                                             orch_fanout, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "TimerEvent", NULL,
                                             orch_timer_event, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "SelectLoser", NULL,
                                             orch_select_loser, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "WaitSlow", NULL,
                                             orch_wait_slow, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Parent", NULL,
                                             orch_parent, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Counter", NULL,
                                             orch_counter, NULL));
    rt_start(f);
}

TEST(chain_fanout_child_and_continue_as_new)
{
    rt_fixture f;
    setup(&f, "smoke1.db");
    rt_start_instance(&f, "chain", "Chain", "hello");
    rt_start_instance(&f, "fan", "Fanout", "50");
    rt_start_instance(&f, "parent", "Parent", "kid");
    rt_start_instance(&f, "count", "Counter", "0");
    duro_instance_info *i = rt_wait(&f, "chain", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "HELLO");
    duro_free(i);
    i = rt_wait(&f, "fan", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "1225");
    duro_free(i);
    i = rt_wait(&f, "parent", 10000);
    CHECK_STR(i->output, "child said KID");
    duro_free(i);
    i = rt_wait(&f, "count", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "counted to 5 in execution 6");
    CHECK_EQ(i->execution_id, 6);
    duro_free(i);
    rt_done(&f);
}

TEST(timer_then_event_raised_early)
{
    rt_fixture f;
    setup(&f, "smoke2.db");
    rt_start_instance(&f, "te", "TimerEvent", NULL);
    /* raised while the orchestration still waits on its first timer */
    CHECK_OK(duro_client_raise_event(f.client, "te", "approve", "yes"));
    duro_instance_info *i = rt_wait(&f, "te", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "yes");
    duro_free(i);
    rt_done(&f);
}

TEST(select_loser_activity_sees_its_token)
{
    rt_fixture f;
    atomic_store(&slow_started, 0);
    atomic_store(&slow_saw_cancel, 0);
    setup(&f, "smoke3.db");
    rt_start_instance(&f, "sel", "SelectLoser", NULL);
    duro_instance_info *i = rt_wait(&f, "sel", 10000);
    CHECK_STR(i->output, "timer won");
    duro_free(i);
    CHECK_EQ(rt_count_events(&f, "sel", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
             1);
    /* if the loser had started, it saw its token (a loser cancelled between
     * its fetch and its start never runs) */
    WAIT_UNTIL(atomic_load(&slow_saw_cancel) == atomic_load(&slow_started),
               10000);
    rt_done(&f);
}

TEST(cancel_instance_cancels_running_activity)
{
    rt_fixture f;
    atomic_store(&slow_started, 0);
    atomic_store(&slow_saw_cancel, 0);
    setup(&f, "smoke4.db");
    rt_start_instance(&f, "c", "WaitSlow", NULL);
    WAIT_UNTIL(atomic_load(&slow_started) == 1, 10000);
    CHECK_OK(duro_client_cancel(f.client, "c", "user asked", "tester"));
    duro_instance_info *i = rt_wait(&f, "c", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "user asked");
    duro_free(i);
    WAIT_UNTIL(atomic_load(&slow_saw_cancel) == 1, 10000);
    duro_metrics m;
    WAIT_UNTIL(
        (duro_runtime_metrics(f.rt, &m),
         m.activities_cancel_requested == 1 && m.activities_cancelled == 1),
        10000);
    rt_done(&f);
}

/* ActivityCompleted and ActivityFailed record when the worker ran the
 * function: after the turn that scheduled it began, around the function's
 * own measurement of its run, before the turn that recorded it began. Only
 * orderings are asserted (one wall clock, one host). */
TEST(activity_events_record_when_the_worker_ran_them)
{
    rt_fixture f;
    setup(&f, "smoke5.db");
    rt_start_instance(&f, "timed", "Timed", NULL);
    duro_instance_info *i = rt_wait(&f, "timed", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    duro_free(i);
    duro_history *h = rt_history(&f, "timed");
    for (int k = 0; k < 2; k++) {
        const duro_event *sched =
            rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, k);
        const duro_event *done = rt_find_event(
            h,
            k == 0 ? DURO_EVENT_ACTIVITY_COMPLETED : DURO_EVENT_ACTIVITY_FAILED,
            0);
        CHECK(sched != NULL && done != NULL);
        if (sched == NULL || done == NULL)
            break;
        CHECK_EQ(done->source_event_id, sched->event_id);
        int64_t begin = atomic_load(&timed_begin[k]);
        int64_t end = atomic_load(&timed_end[k]);
        CHECK(begin > 0 && end >= begin);
        CHECK_INT(sched->timestamp_ms, <=, done->started_ms);
        CHECK_INT(done->started_ms, <=, begin);
        CHECK_INT(end, <=, done->finished_ms);
        CHECK_INT(done->finished_ms - done->started_ms, >=, end - begin);
        CHECK_INT(done->finished_ms, <=, done->timestamp_ms);
        /* only completions carry them */
        CHECK_EQ(sched->started_ms, 0);
        CHECK_EQ(sched->finished_ms, 0);
    }
    duro_history_free(h);
    rt_done(&f);
}

TEST_MAIN(T(chain_fanout_child_and_continue_as_new),
          T(timer_then_event_raised_early),
          T(select_loser_activity_sees_its_token),
          T(cancel_instance_cancels_running_activity),
          T(activity_events_record_when_the_worker_ran_them))
