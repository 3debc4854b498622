/* test_orch_context.c - end-to-end tests of what orchestration code can do
 * through its context: activities (plain and under retry policies with each
 * backoff, attempt and total timeouts), durable timers, external events,
 * child orchestrations (generated and explicit ids, completion, failure,
 * clashes, fire-and-forget, cancellation with the parent), select, wait_any
 * and join, custom status and the context and activity accessors. Each test
 * runs a real runtime on its own SQLite file; observations made inside
 * orchestration and activity code are recorded and checked on the main
 * thread. */
#include <pthread.h>
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * helpers */

/* A gate activities wait on; opened by the main thread. */
static _Atomic int gate_open, gated_started, gated_cancelled;

/* Recorded observations of blocking activities. */
static pthread_mutex_t obs_lock = PTHREAD_MUTEX_INITIALIZER;
static char blocker_reason[64];
static _Atomic int blocker_started, blocker_cancelled;

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

static void reset_observations(void)
{
    atomic_store(&gate_open, 0);
    atomic_store(&gated_started, 0);
    atomic_store(&gated_cancelled, 0);
    atomic_store(&blocker_started, 0);
    atomic_store(&blocker_cancelled, 0);
    pthread_mutex_lock(&obs_lock);
    blocker_reason[0] = '\0';
    pthread_mutex_unlock(&obs_lock);
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_fail(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_failf(out, "failed on '%s'", in ? in : "");
}

/* Sleeps the number of ms before ':' in its input, returns the rest: only to
 * make completions arrive out of argument order. */
static int act_delay_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    const char *colon = strchr(in, ':');
    test_sleep_ms(atoi(in));
    return duro_ok(out, colon ? colon + 1 : in);
}

/* Returns its input once the gate opens; fails when cancelled. */
static int act_gated(duro_activity *a, const char *in, duro_result *out)
{
    atomic_fetch_add(&gated_started, 1);
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&gate_open)) {
        if (duro_activity_wait_cancelled(a, 2)) {
            atomic_fetch_add(&gated_cancelled, 1);
            return duro_fail(out, "cancelled while gated");
        }
        if (test_now_ms() > end)
            return duro_fail(out, "gate never opened");
    }
    return duro_ok(out, in ? in : "gated");
}

/* Blocks until cancelled (20 s at most) and records why. */
static int act_blocker(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&blocker_started, 1);
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

static int orch_wait_go(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *e = duro_wait_event(o, "go");
    if (duro_await(o, e) != DURO_OK)
        return duro_fail(out, "wait failed");
    return duro_ok(out, duro_task_output(e));
}

/* Returns "<its instance id>:<input>". */
static int orch_child_echo(duro_orch *o, const char *in, duro_result *out)
{
    return duro_ok(out,
                   duro_sprintf(o, "%s:%s", duro_instance_id(o), in ? in : ""));
}

static int orch_child_fail(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    (void)in;
    return duro_fail_with(out, DURO_CATEGORY_INFRASTRUCTURE, "child broke");
}

static void register_common(rt_fixture *f)
{
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Fail", act_fail, NULL));
    CHECK_OK(
        duro_registry_add_activity(f->reg, "DelayEcho", act_delay_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Gated", act_gated, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Blocker", act_blocker, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "ChildEcho", NULL,
                                             orch_child_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "ChildFail", NULL,
                                             orch_child_fail, NULL));
}

/* Runs instance `id` of `orch` with `input` to a terminal status and checks
 * it completed with `expected` output. */
static void expect_output(rt_fixture *f, const char *id, const char *expected)
{
    duro_instance_info *i = rt_wait(f, id, 20000);
    CHECK_MSG(i->status == DURO_STATUS_COMPLETED, "instance '%s' is %s (%s)",
              id, duro_status_name(i->status), i->error ? i->error : "");
    CHECK_STR(i->output, expected);
    duro_free(i);
}

/* ------------------------------------------------------------------------
 * accessors */

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct probe_record {
    char instance[64], name[64], input[64];
    uint64_t execution, activity_id;
    uint32_t attempt, delivery;
    void *user;
    int runs;
} probe_record;
static probe_record probe;
static int probe_tag;

static int act_probe(duro_activity *a, const char *in, duro_result *out)
{
    pthread_mutex_lock(&probe_lock);
    snprintf(probe.instance, sizeof(probe.instance), "%s",
             duro_activity_instance_id(a));
    snprintf(probe.name, sizeof(probe.name), "%s", duro_activity_name(a));
    snprintf(probe.input, sizeof(probe.input), "%s|%s", duro_activity_input(a),
             in);
    probe.execution = duro_activity_execution_id(a);
    probe.activity_id = duro_activity_id(a);
    probe.attempt = duro_activity_attempt(a);
    probe.delivery = duro_activity_delivery(a);
    probe.user = duro_activity_user(a);
    probe.runs++;
    pthread_mutex_unlock(&probe_lock);
    return duro_ok(out, "probed");
}

/* Execution 1 continues as new; execution 2 waits a timer, then probes. */
static int orch_probe(duro_orch *o, const char *in, duro_result *out)
{
    if (duro_execution_id(o) == 1)
        return duro_continue_as_new(o, out, "second-input");
    duro_await(o, duro_timer(o, 1));
    duro_task *t = duro_call_activity(o, "Probe", "probe-input");
    duro_await(o, t);
    return duro_ok(out, duro_sprintf(o, "%s|%llu|%s|%s|%s", duro_instance_id(o),
                                     (unsigned long long)duro_execution_id(o),
                                     duro_input(o), in, duro_task_output(t)));
}

TEST(orchestration_and_activity_accessors)
{
    memset(&probe, 0, sizeof(probe));
    rt_fixture f;
    rt_init(&f, "ctx_accessors.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "Probe", act_probe, &probe_tag));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "ProbeOrch", NULL,
                                             orch_probe, NULL));
    rt_start(&f);
    rt_start_instance(&f, "acc-1", "ProbeOrch", "first-input");
    expect_output(&f, "acc-1", "acc-1|2|second-input|second-input|probed");

    duro_history *h = rt_history(&f, "acc-1");
    CHECK_EQ(h->execution_id, 2);
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0);
    CHECK(sched != NULL);
    pthread_mutex_lock(&probe_lock);
    probe_record seen = probe;
    pthread_mutex_unlock(&probe_lock);
    CHECK_STR(seen.instance, "acc-1");
    CHECK_STR(seen.name, "Probe");
    CHECK_STR(seen.input, "probe-input|probe-input");
    CHECK_EQ(seen.execution, 2);
    CHECK_EQ(seen.activity_id, sched ? sched->event_id : 0);
    CHECK_EQ(seen.activity_id, 4); /* Started, TimerCreated, TimerFired */
    CHECK_EQ(seen.attempt, 1);
    CHECK_EQ(seen.delivery, 1);
    CHECK(seen.user == &probe_tag);
    CHECK_EQ(seen.runs, 1);
    duro_history_free(h);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * retry policies */

static _Atomic int flaky_attempts[16];
static _Atomic int flaky_runs;

/* Fails until its retry attempt reaches the number in its input. */
static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    uint32_t attempt = duro_activity_attempt(a);
    int n = atomic_fetch_add(&flaky_runs, 1);
    if (n < 16)
        atomic_store(&flaky_attempts[n], (int)attempt);
    if ((int)attempt < atoi(in))
        return duro_failf(out, "failure #%u", attempt);
    char buf[32];
    snprintf(buf, sizeof(buf), "ok@%u", attempt);
    return duro_ok(out, buf);
}

static int act_fail_config(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&flaky_runs, 1);
    return duro_fail_with(out, DURO_CATEGORY_CONFIGURATION, "bad config");
}

/* Attempt 1 blocks until its timeout cancels it; later attempts succeed. */
static int act_slow_first(duro_activity *a, const char *in, duro_result *out)
{
    uint32_t attempt = duro_activity_attempt(a);
    int n = atomic_fetch_add(&flaky_runs, 1);
    if (n < 16)
        atomic_store(&flaky_attempts[n], (int)attempt);
    if (attempt == 1)
        return act_blocker(a, in, out);
    char buf[32];
    snprintf(buf, sizeof(buf), "ok@%u", attempt);
    return duro_ok(out, buf);
}

static const char *render(duro_orch *o, duro_task *t, int rc)
{
    if (rc == DURO_OK)
        return duro_task_output(t);
    return duro_sprintf(o, "%s|%s|%s", duro_errname(rc),
                        duro_category_name(duro_task_category(t)),
                        duro_task_error(t));
}

/* Input "<policy>:<activity input>:<max attempts>[:<activity>]". */
static int orch_retry(duro_orch *o, const char *in, duro_result *out)
{
    char kind[8] = "", arg[16] = "", act[32] = "Flaky";
    int max = 0;
    sscanf(in, "%7[^:]:%15[^:]:%d:%31s", kind, arg, &max, act);
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = (uint32_t)max;
    p.initial_delay_ms = 40;
    p.coefficient = 2.0;
    p.max_delay_ms = 0;
    if (strcmp(kind, "exp") == 0) {
        p.backoff = DURO_BACKOFF_EXPONENTIAL;
    } else if (strcmp(kind, "lin") == 0) {
        p.backoff = DURO_BACKOFF_LINEAR;
    } else if (strcmp(kind, "fix") == 0) {
        p.backoff = DURO_BACKOFF_FIXED;
    } else if (strcmp(kind, "cap") == 0) {
        p.backoff = DURO_BACKOFF_EXPONENTIAL;
        p.coefficient = 3.0;
        p.max_delay_ms = 100;
    } else if (strcmp(kind, "tmo") == 0) { /* per-attempt timeout */
        p.backoff = DURO_BACKOFF_FIXED;
        p.initial_delay_ms = 10;
        p.attempt_timeout_ms = 1000;
    } else if (strcmp(kind, "tot") == 0) { /* total timeout, blocking */
        p.total_timeout_ms = 300;
    } else if (strcmp(kind, "totf") == 0) { /* total timeout, fast fails */
        p.initial_delay_ms = 200;
        p.total_timeout_ms = 300;
    }
    duro_task *t = duro_call_activity_with_retry(o, act, arg, &p);
    int rc = duro_await(o, t);
    return duro_ok(out, render(o, t, rc));
}

/* Checks the attempts and the backoff delays recorded in history: each
 * TimerCreated follows the failure it retries, and fires `delays[k]` ms
 * after that failure's timestamp (the deterministic time of the turn). */
static void check_retry_history(rt_fixture *f, const char *id,
                                const int64_t *delays, int attempts,
                                int failures)
{
    duro_history *h = rt_history(f, id);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), attempts);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_CREATED), attempts - 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), failures);
    for (int k = 0; k < attempts; k++) {
        const duro_event *s =
            rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, k);
        CHECK(s != NULL);
        CHECK_EQ(s->attempt, k + 1);
        CHECK_STR(s->name, "Flaky");
    }
    int timer = 0;
    for (size_t i = 1; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        if (e->kind != DURO_EVENT_TIMER_CREATED)
            continue;
        const duro_event *prev = &h->events[i - 1];
        CHECK_MSG(prev->kind == DURO_EVENT_ACTIVITY_FAILED,
                  "TimerCreated %llu follows %s",
                  (unsigned long long)e->event_id,
                  duro_event_kind_name(prev->kind));
        CHECK_MSG(e->fire_at_ms - prev->timestamp_ms == delays[timer],
                  "backoff %d: %lld ms, expected %lld", timer,
                  (long long)(e->fire_at_ms - prev->timestamp_ms),
                  (long long)delays[timer]);
        const duro_event *fired =
            rt_find_event(h, DURO_EVENT_TIMER_FIRED, timer);
        CHECK(fired != NULL);
        CHECK_EQ(fired->source_event_id, e->event_id);
        CHECK_INT(fired->timestamp_ms, >=, e->fire_at_ms);
        timer++;
    }
    duro_history_free(h);
    for (int k = 0; k < attempts; k++)
        CHECK_EQ(atomic_load(&flaky_attempts[k]), k + 1);
    CHECK_EQ(atomic_load(&flaky_runs), attempts);
}

static void reset_flaky(void)
{
    atomic_store(&flaky_runs, 0);
    for (int k = 0; k < 16; k++)
        atomic_store(&flaky_attempts[k], 0);
}

static void setup_retry(rt_fixture *f, const char *db)
{
    reset_flaky();
    reset_observations();
    rt_init(f, db);
    register_common(f);
    CHECK_OK(duro_registry_add_activity(f->reg, "Flaky", act_flaky, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "FailConfig", act_fail_config,
                                        NULL));
    CHECK_OK(
        duro_registry_add_activity(f->reg, "SlowFirst", act_slow_first, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Retry", NULL, orch_retry,
                                             NULL));
    rt_start(f);
}

TEST(retry_exponential_backoff)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_exp.db");
    rt_start_instance(&f, "r", "Retry", "exp:4:4");
    expect_output(&f, "r", "ok@4");
    static const int64_t delays[] = {40, 80, 160};
    check_retry_history(&f, "r", delays, 4, 3);
    rt_done(&f);
}

TEST(retry_linear_backoff)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_lin.db");
    rt_start_instance(&f, "r", "Retry", "lin:4:5");
    expect_output(&f, "r", "ok@4");
    static const int64_t delays[] = {40, 80, 120};
    check_retry_history(&f, "r", delays, 4, 3);
    rt_done(&f);
}

TEST(retry_fixed_backoff)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_fix.db");
    rt_start_instance(&f, "r", "Retry", "fix:4:4");
    expect_output(&f, "r", "ok@4");
    static const int64_t delays[] = {40, 40, 40};
    check_retry_history(&f, "r", delays, 4, 3);
    rt_done(&f);
}

TEST(retry_max_delay_caps_exponential_backoff)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_cap.db");
    rt_start_instance(&f, "r", "Retry", "cap:4:4");
    expect_output(&f, "r", "ok@4");
    static const int64_t delays[] = {40, 100, 100}; /* 40, 120, 360 capped */
    check_retry_history(&f, "r", delays, 4, 3);
    rt_done(&f);
}

TEST(retry_exhausted_fails_with_last_error)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_exhausted.db");
    rt_start_instance(&f, "r", "Retry", "fix:99:3");
    expect_output(&f, "r", "DURO_FAILED|application|failure #3");
    static const int64_t delays[] = {40, 40};
    check_retry_history(&f, "r", delays, 3, 3);
    rt_done(&f);
}

TEST(retry_does_not_retry_configuration_failures)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_config.db");
    rt_start_instance(&f, "r", "Retry", "fix:x:5:FailConfig");
    expect_output(&f, "r", "DURO_FAILED|configuration|bad config");
    CHECK_EQ(rt_count_events(&f, "r", DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_events(&f, "r", DURO_EVENT_TIMER_CREATED), 0);
    CHECK_EQ(atomic_load(&flaky_runs), 1);
    rt_done(&f);
}

TEST(retry_attempt_timeout_cancels_attempt_and_retries)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_attempt_timeout.db");
    rt_start_instance(&f, "r", "Retry", "tmo:x:3:SlowFirst");
    expect_output(&f, "r", "ok@2");
    /* The timed-out attempt saw its token, with a reason, if it had started
     * (cancelled between its fetch and its start, it never runs). */
    WAIT_UNTIL(atomic_load(&blocker_cancelled) == atomic_load(&blocker_started),
               10000);
    if (atomic_load(&blocker_started) == 1) {
        CHECK(recorded_reason()[0] != '\0' &&
              strcmp(recorded_reason(), "(null)") != 0);
        CHECK_EQ(atomic_load(&flaky_attempts[0]), 1);
        CHECK_EQ(atomic_load(&flaky_attempts[1]), 2);
    } else {
        CHECK_EQ(atomic_load(&flaky_attempts[0]), 2);
    }
    duro_history *h = rt_history(&f, "r");
    const duro_event *first =
        rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0);
    const duro_event *cancel =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(first != NULL && cancel != NULL);
    CHECK_EQ(cancel->source_event_id, first->event_id);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 2);
    /* the timed-out attempt never completed in history */
    for (size_t i = 0; i < h->count; i++)
        if (h->events[i].kind == DURO_EVENT_ACTIVITY_COMPLETED)
            CHECK(h->events[i].source_event_id != first->event_id);
    duro_history_free(h);
    rt_done(&f);
}

TEST(retry_total_timeout_fails_with_category_timeout)
{
    rt_fixture f;
    setup_retry(&f, "ctx_retry_total.db");
    rt_start_instance(&f, "blocking", "Retry", "tot:x:5:Blocker");
    rt_start_instance(&f, "fast", "Retry", "totf:x:5:Fail");
    duro_instance_info *i = rt_wait(&f, "blocking", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->output != NULL &&
          strncmp(i->output, "DURO_FAILED|timeout|", 20) == 0);
    CHECK(i->output != NULL && strstr(i->output, "total timeout") != NULL);
    duro_free(i);
    i = rt_wait(&f, "fast", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->output != NULL &&
          strncmp(i->output, "DURO_FAILED|timeout|", 20) == 0);
    duro_free(i);
    /* no attempt starts past the deadline: at most 2 in 300 ms with a
       200 ms backoff */
    CHECK_INT(rt_count_events(&f, "fast", DURO_EVENT_ACTIVITY_SCHEDULED), <=,
              2);
    WAIT_UNTIL(atomic_load(&blocker_cancelled) == atomic_load(&blocker_started),
               10000);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * timers and events */

static int orch_timer(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_timer(o, atoi(in));
    int rc = duro_await(o, t);
    return duro_ok(out, rc == DURO_OK ? "fired" : "not fired");
}

TEST(durable_timer_fires_not_before_its_time)
{
    rt_fixture f;
    rt_init(&f, "ctx_timer.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Timer", NULL, orch_timer,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "t", "Timer", "300");
    expect_output(&f, "t", "fired");
    duro_history *h = rt_history(&f, "t");
    const duro_event *started =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_STARTED, 0);
    const duro_event *created = rt_find_event(h, DURO_EVENT_TIMER_CREATED, 0);
    const duro_event *fired = rt_find_event(h, DURO_EVENT_TIMER_FIRED, 0);
    CHECK(started && created && fired);
    CHECK_EQ(created->fire_at_ms, started->timestamp_ms + 300);
    CHECK_EQ(fired->source_event_id, created->event_id);
    CHECK_EQ(fired->fire_at_ms, created->fire_at_ms);
    CHECK_INT(fired->timestamp_ms, >=, created->fire_at_ms);
    duro_history_free(h);
    rt_done(&f);
}

/* A timer of INT64_MAX ms and a retry policy whose timeouts are INT64_MAX
 * mean "never", not an overflow that fires at once: a 50 ms timer wins the
 * wait, and the attempt runs until the gate opens. */
static int orch_forever(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 1;
    p.attempt_timeout_ms = INT64_MAX;
    p.total_timeout_ms = INT64_MAX;
    duro_task *gated = duro_call_activity_with_retry(o, "Gated", "open", &p);
    duro_task *never = duro_timer(o, INT64_MAX);
    duro_task *soon = duro_timer(o, 50);
    if (duro_wait_any(o, never, soon) != soon)
        return duro_fail(out, "the INT64_MAX timer fired");
    duro_set_custom_status(o, "soon fired");
    int rc = duro_await(o, gated);
    return duro_ok(out,
                   duro_sprintf(o, "%s|never %s", render(o, gated, rc),
                                duro_task_done(never) ? "fired" : "pending"));
}

static int custom_status_is(rt_fixture *f, const char *id, const char *want)
{
    duro_instance_info *i = NULL;
    if (duro_client_get_status(f->client, id, &i) != DURO_OK)
        return 0;
    int same = (want == NULL && i->custom_status == NULL) ||
               (want != NULL && i->custom_status != NULL &&
                strcmp(want, i->custom_status) == 0);
    duro_free(i);
    return same;
}

TEST(huge_durations_never_expire)
{
    reset_observations();
    rt_fixture f;
    rt_init(&f, "ctx_forever.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Forever", NULL,
                                             orch_forever, NULL));
    /* "forever" options are deadlines that never come, too */
    f.opts.orchestration_lock_timeout_ms = INT64_MAX;
    f.opts.worker_lock_timeout_ms = INT64_MAX;
    f.opts.cancel_grace_ms = INT64_MAX;
    rt_start(&f);
    rt_start_instance(&f, "fe", "Forever", NULL);
    WAIT_UNTIL(custom_status_is(&f, "fe", "soon fired") ||
                   duro_status_is_terminal(rt_status(&f, "fe")),
               10000);
    WAIT_UNTIL(atomic_load(&gated_started) == 1 ||
                   duro_status_is_terminal(rt_status(&f, "fe")),
               10000);
    CHECK_EQ(rt_status(&f, "fe"), DURO_STATUS_RUNNING);
    CHECK_EQ(rt_count_events(&f, "fe", DURO_EVENT_TIMER_FIRED), 1);
    atomic_store(&gate_open, 1);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_wait(f.client, "fe", INT64_MAX, &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "open|never pending");
    duro_free(i);
    CHECK_EQ(atomic_load(&gated_cancelled), 0);
    rt_done(&f);
}

TEST(wait_event_receives_the_payload)
{
    rt_fixture f;
    rt_init(&f, "ctx_event.db");
    register_common(&f);
    rt_start(&f);
    rt_start_instance(&f, "w", "WaitGo", NULL);
    WAIT_UNTIL(rt_count_events(&f, "w", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "w", "other", "nope"));
    CHECK_OK(duro_client_raise_event(f.client, "w", "go", "the payload"));
    expect_output(&f, "w", "the payload");
    duro_history *h = rt_history(&f, "w");
    const duro_event *sub = rt_find_event(h, DURO_EVENT_EVENT_SUBSCRIBED, 0);
    CHECK(sub != NULL);
    CHECK_STR(sub->name, "go");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_EVENT_RAISED), 2);
    duro_history_free(h);
    rt_done(&f);
}

static int orch_fifo(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    const char *got[4];
    duro_task *first = duro_wait_event(o, "e");
    duro_await(o, first);
    got[0] = duro_task_output(first);
    duro_task *other = duro_wait_event(o, "other");
    duro_task *second = duro_wait_event(o, "e");
    duro_task *third = duro_wait_event(o, "e");
    duro_join(o, other, second, third);
    got[1] = duro_task_output(second);
    got[2] = duro_task_output(third);
    got[3] = duro_task_output(other);
    return duro_ok(
        out, duro_sprintf(o, "%s,%s,%s|%s", got[0], got[1], got[2], got[3]));
}

TEST(events_raised_before_waiting_are_kept_in_order)
{
    rt_fixture f;
    rt_init(&f, "ctx_fifo.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Fifo", NULL, orch_fifo, NULL));
    /* everything is raised before any runtime exists */
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "fifo", "Fifo", NULL);
    CHECK_OK(duro_client_raise_event(f.client, "fifo", "e", "1"));
    CHECK_OK(duro_client_raise_event(f.client, "fifo", "other", "x"));
    CHECK_OK(duro_client_raise_event(f.client, "fifo", "e", "2"));
    CHECK_OK(duro_client_raise_event(f.client, "fifo", "e", "3"));
    CHECK_OK(duro_client_raise_event(f.client, "fifo", "e", "4"));
    rt_start(&f);
    expect_output(&f, "fifo", "1,2,3|x");
    /* recorded in the order raised; "4" was never consumed: the code
       returned first */
    duro_history *h = rt_history(&f, "fifo");
    static const char *order[] = {"1", "x", "2", "3"};
    for (int k = 0; k < 4; k++) {
        const duro_event *e = rt_find_event(h, DURO_EVENT_EVENT_RAISED, k);
        CHECK(e != NULL);
        CHECK_STR(e ? e->payload : NULL, order[k]);
    }
    duro_history_free(h);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * child orchestrations */

/* Input "<child name>|<explicit id or ->|<child input>". */
static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    char name[32] = "", id[64] = "", input[32] = "";
    sscanf(in, "%31[^|]|%63[^|]|%31s", name, id, input);
    duro_task *c = duro_call_sub_orchestration(
        o, name, NULL, strcmp(id, "-") == 0 ? NULL : id, input);
    int rc = duro_await(o, c);
    return duro_ok(out, render(o, c, rc));
}

static void setup_children(rt_fixture *f, const char *db)
{
    reset_observations();
    rt_init(f, db);
    register_common(f);
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Parent", NULL,
                                             orch_parent, NULL));
    rt_start(f);
}

TEST(child_with_generated_id_completes_into_the_parent)
{
    rt_fixture f;
    setup_children(&f, "ctx_child_gen.db");
    rt_start_instance(&f, "pg", "Parent", "ChildEcho|-|hi");
    duro_instance_info *i = rt_wait(&f, "pg", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->output != NULL && strlen(i->output) > 3);
    char child[128] = "";
    if (i->output != NULL) {
        size_t n = strlen(i->output);
        CHECK(n > 3 && strcmp(i->output + n - 3, ":hi") == 0);
        snprintf(child, sizeof(child), "%.*s", (int)(n - 3), i->output);
    }
    duro_free(i);
    duro_history *h = rt_history(&f, "pg");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    const duro_event *done =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_COMPLETED, 0);
    CHECK(sched != NULL && done != NULL);
    CHECK_STR(sched->ref_instance, child);
    CHECK_STR(sched->name, "ChildEcho");
    CHECK_STR(sched->payload, "hi");
    CHECK_EQ(done->source_event_id, sched->event_id);
    /* deterministic and derived from the parent and the scheduling event */
    char suffix[32];
    snprintf(suffix, sizeof(suffix), ":%llu",
             (unsigned long long)sched->event_id);
    CHECK(strncmp(child, "pg:", 3) == 0);
    CHECK(strlen(child) > strlen(suffix) &&
          strcmp(child + strlen(child) - strlen(suffix), suffix) == 0);
    duro_history_free(h);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, child, &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->parent_instance, "pg");
    CHECK_STR(i->name, "ChildEcho");
    duro_free(i);
    rt_done(&f);
}

/* duro.h: instance_id NULL gives "<parent id>:<event id>". */
TEST(child_generated_id_is_parent_execution_and_event_id)
{
    rt_fixture f;
    setup_children(&f, "ctx_child_gen_format.db");
    rt_start_instance(&f, "pf", "Parent", "ChildEcho|-|x");
    duro_free(rt_wait(&f, "pf", 10000));
    duro_history *h = rt_history(&f, "pf");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    CHECK(sched != NULL);
    char want[64];
    snprintf(want, sizeof(want), "pf:1:%llu",
             (unsigned long long)sched->event_id);
    CHECK_STR(sched->ref_instance, want);
    duro_history_free(h);
    rt_done(&f);
}

TEST(child_with_explicit_id_completion_and_failure_propagate)
{
    rt_fixture f;
    setup_children(&f, "ctx_child_explicit.db");
    rt_start_instance(&f, "p-ok", "Parent", "ChildEcho|kid-ok|hello");
    rt_start_instance(&f, "p-fail", "Parent", "ChildFail|kid-fail|x");
    expect_output(&f, "p-ok", "kid-ok:hello");
    expect_output(&f, "p-fail", "DURO_FAILED|infrastructure|child broke");
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "kid-ok", &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->parent_instance, "p-ok");
    duro_free(i);
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "kid-fail", &i));
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK_STR(i->parent_instance, "p-fail");
    duro_free(i);
    duro_history *h = rt_history(&f, "p-fail");
    const duro_event *failed =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_FAILED, 0);
    CHECK(failed != NULL);
    CHECK_STR(failed ? failed->error : NULL, "child broke");
    CHECK_EQ(failed ? failed->category : 0, DURO_CATEGORY_INFRASTRUCTURE);
    duro_history_free(h);
    rt_done(&f);
}

/* A child version the store cannot hold fails the task (and the
 * fire-and-forget start) at once, instead of every turn of the parent. */
static int orch_long_child_version(duro_orch *o, const char *in,
                                   duro_result *out)
{
    (void)in;
    char *version = duro_orch_alloc(o, 1026);
    memset(version, 'v', 1025);
    duro_task *c =
        duro_call_sub_orchestration(o, "ChildEcho", version, NULL, "x");
    int rc = duro_await(o, c);
    int started =
        duro_start_orchestration(o, "ChildEcho", version, "lv-kid", "x");
    return duro_ok(out, duro_sprintf(o, "%s|start %s", render(o, c, rc),
                                     duro_errname(started)));
}

TEST(child_with_a_too_long_version_fails_the_task)
{
    rt_fixture f;
    reset_observations();
    rt_init(&f, "ctx_child_long_version.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "LongVersion", NULL,
                                             orch_long_child_version, NULL));
    rt_start(&f);
    rt_start_instance(&f, "lv", "LongVersion", NULL);
    expect_output(&f, "lv",
                  "DURO_TOO_LARGE|configuration|child name, version or id is "
                  "longer than 1024 bytes|start DURO_TOO_LARGE");
    CHECK_EQ(rt_status(&f, "lv-kid"), DURO_STATUS_NOT_FOUND);
    rt_done(&f);
}

TEST(child_with_an_existing_id_fails_the_task)
{
    rt_fixture f;
    setup_children(&f, "ctx_child_clash.db");
    rt_start_instance(&f, "taken", "WaitGo", "original");
    rt_wait_status(&f, "taken", DURO_STATUS_RUNNING, 10000);
    rt_start_instance(&f, "p-clash", "Parent", "ChildEcho|taken|y");
    duro_instance_info *i = rt_wait(&f, "p-clash", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK(i->output != NULL &&
          strncmp(i->output, "DURO_FAILED|configuration|", 26) == 0);
    CHECK(i->output != NULL && strstr(i->output, "already exists") != NULL);
    CHECK(i->output != NULL && strstr(i->output, "taken") != NULL);
    duro_free(i);
    /* the existing instance is untouched */
    i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "taken", &i));
    CHECK_EQ(i->status, DURO_STATUS_RUNNING);
    CHECK_STR(i->name, "WaitGo");
    CHECK(i->parent_instance == NULL);
    duro_free(i);
    duro_history *h = rt_history(&f, "taken");
    CHECK_STR(h->events[0].payload, "original");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_STARTED), 1);
    duro_history_free(h);
    CHECK_OK(duro_client_raise_event(f.client, "taken", "go", "still mine"));
    expect_output(&f, "taken", "still mine");
    rt_done(&f);
}

static _Atomic int ff_rc = -1;

/* Starts a detached WaitGo, then completes (input "done") or waits. */
static int orch_ff_parent(duro_orch *o, const char *in, duro_result *out)
{
    const char *child = duro_sprintf(o, "%s-ff", duro_instance_id(o));
    int rc = duro_start_orchestration(o, "WaitGo", NULL, child, "ff-in");
    atomic_store(&ff_rc, rc);
    if (strcmp(in, "done") == 0)
        return duro_ok(out, "parent done");
    duro_await(o, duro_wait_event(o, "never"));
    return duro_ok(out, "woke");
}

TEST(fire_and_forget_runs_independently_of_the_parent)
{
    atomic_store(&ff_rc, -1);
    rt_fixture f;
    setup_children(&f, "ctx_ff.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "FfParent", NULL,
                                             orch_ff_parent, NULL));
    rt_stop(&f);
    rt_start(&f);
    /* a parent that completes right away */
    rt_start_instance(&f, "ffa", "FfParent", "done");
    expect_output(&f, "ffa", "parent done");
    CHECK_EQ(atomic_load(&ff_rc), DURO_OK);
    rt_wait_status(&f, "ffa-ff", DURO_STATUS_RUNNING, 10000);
    /* a parent that is cancelled */
    rt_start_instance(&f, "ffb", "FfParent", "wait");
    rt_wait_status(&f, "ffb-ff", DURO_STATUS_RUNNING, 10000);
    WAIT_UNTIL(rt_count_events(&f, "ffb", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    CHECK_OK(duro_client_cancel(f.client, "ffb", "stop", NULL));
    duro_instance_info *i = rt_wait(&f, "ffb", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    /* a cancel sent to the children would be queued before these events */
    CHECK_OK(duro_client_raise_event(f.client, "ffa-ff", "go", "a-free"));
    CHECK_OK(duro_client_raise_event(f.client, "ffb-ff", "go", "b-free"));
    expect_output(&f, "ffa-ff", "a-free");
    expect_output(&f, "ffb-ff", "b-free");
    duro_history *h = rt_history(&f, "ffb");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    CHECK(sched != NULL);
    CHECK(sched && (sched->flags & DURO_START_DETACHED));
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED),
             0);
    duro_history_free(h);
    /* and nothing came back to the completed parent */
    CHECK_EQ(rt_count_events(&f, "ffa", DURO_EVENT_SUB_ORCHESTRATION_COMPLETED),
             0);
    rt_done(&f);
}

TEST(child_of_a_cancelled_parent_is_cancelled)
{
    rt_fixture f;
    setup_children(&f, "ctx_child_cancel.db");
    rt_start_instance(&f, "wc", "Parent", "WaitGo|wc-kid|x");
    rt_wait_status(&f, "wc-kid", DURO_STATUS_RUNNING, 10000);
    CHECK_OK(duro_client_cancel(f.client, "wc", "parent stopped", "tester"));
    duro_instance_info *i = rt_wait(&f, "wc", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    i = rt_wait(&f, "wc-kid", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_EQ(i->category, DURO_CATEGORY_CANCELLED);
    duro_free(i);
    duro_history *h = rt_history(&f, "wc");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_STR(req ? req->reason : NULL, DURO_REASON_INSTANCE_CANCELLED);
    duro_history_free(h);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * select, wait_any, join */

static int orch_sel_act_timer(duro_orch *o, const char *in, duro_result *out)
{
    int fast = strcmp(in, "fast") == 0;
    duro_task *a = fast ? duro_call_activity(o, "Echo", "quick")
                        : duro_call_activity(o, "Blocker", NULL);
    duro_task *t = duro_timer(o, fast ? 30000 : 100);
    duro_task *w = duro_select(o, a, t);
    if (w == a)
        return duro_ok(out,
                       duro_sprintf(o, "activity:%s", duro_task_output(a)));
    return duro_ok(out, w == t && duro_task_failed(a) ? "timer" : "?");
}

static int orch_sel_ev_timer(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *e = duro_wait_event(o, "go");
    duro_task *t = duro_timer(o, atoi(in));
    duro_task *w = duro_select(o, e, t);
    if (w == e)
        return duro_ok(out, duro_sprintf(o, "event:%s", duro_task_output(e)));
    return duro_ok(out, w == t ? "timer" : "?");
}

static int orch_sel_child_timer(duro_orch *o, const char *in, duro_result *out)
{
    int fast = strcmp(in, "fast") == 0;
    duro_task *c =
        fast ? duro_call_sub_orchestration(o, "ChildEcho", NULL, NULL, "c")
             : duro_call_sub_orchestration(o, "WaitGo", NULL, "sct-slow-kid",
                                           NULL);
    duro_task *t = duro_timer(o, fast ? 30000 : 100);
    duro_task *w = duro_select(o, c, t);
    if (w == c)
        return duro_ok(out, duro_sprintf(o, "child:%s", duro_task_output(c)));
    return duro_ok(out, w == t ? "timer" : "?");
}

TEST(select_activity_event_and_child_against_timers)
{
    rt_fixture f;
    reset_observations();
    rt_init(&f, "ctx_select_mix.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "SelAct", NULL,
                                             orch_sel_act_timer, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "SelEv", NULL,
                                             orch_sel_ev_timer, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "SelChild", NULL,
                                             orch_sel_child_timer, NULL));
    rt_start(&f);
    rt_start_instance(&f, "act-fast", "SelAct", "fast");
    rt_start_instance(&f, "act-slow", "SelAct", "slow");
    rt_start_instance(&f, "ev-raised", "SelEv", "30000");
    rt_start_instance(&f, "ev-silent", "SelEv", "100");
    rt_start_instance(&f, "child-fast", "SelChild", "fast");
    rt_start_instance(&f, "child-slow", "SelChild", "slow");
    WAIT_UNTIL(rt_count_events(&f, "ev-raised", DURO_EVENT_EVENT_SUBSCRIBED) ==
                   1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "ev-raised", "go", "p"));

    expect_output(&f, "act-fast", "activity:quick");
    expect_output(&f, "act-slow", "timer");
    expect_output(&f, "ev-raised", "event:p");
    expect_output(&f, "ev-silent", "timer");
    expect_output(&f, "child-slow", "timer");

    /* child-fast's child id is generated: find it in history */
    duro_history *h = rt_history(&f, "child-fast");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    char want[160] = "";
    if (sched != NULL)
        snprintf(want, sizeof(want), "child:%s:c", sched->ref_instance);
    duro_history_free(h);
    expect_output(&f, "child-fast", want);

    /* the losers were cancelled durably */
    CHECK_EQ(
        rt_count_events(&f, "act-fast", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
        0);
    h = rt_history(&f, "act-slow");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_STR(req ? req->reason : NULL, DURO_REASON_SELECT_LOSER);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED) +
                 rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED),
             0);
    duro_history_free(h);
    WAIT_UNTIL(atomic_load(&blocker_cancelled) == atomic_load(&blocker_started),
               10000);
    if (atomic_load(&blocker_started) == 1)
        CHECK_STR(recorded_reason(), DURO_REASON_SELECT_LOSER);

    h = rt_history(&f, "child-slow");
    req = rt_find_event(h, DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_STR(req ? req->reason : NULL, DURO_REASON_SELECT_LOSER);
    duro_history_free(h);
    duro_instance_info *i = rt_wait(&f, "sct-slow-kid", 10000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    rt_done(&f);
}

/* Both tasks finish while the code waits for "release"; then select must
 * pick the one that finished first in history, not the first argument. */
static int orch_sel_order(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Gated", "act");
    duro_task *e = duro_wait_event(o, "go");
    duro_await(o, duro_wait_event(o, "release"));
    int both = duro_task_done(a) && duro_task_done(e);
    duro_task *w = duro_select(o, a, e);
    return duro_ok(out, duro_sprintf(o, "%s%s", w == a ? "activity" : "event",
                                     both ? "" : " (not both done)"));
}

TEST(select_picks_the_winner_by_history_order)
{
    rt_fixture f;
    reset_observations();
    rt_init(&f, "ctx_select_order.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "SelOrder", NULL,
                                             orch_sel_order, NULL));
    f.opts.fiber_cache_size = 0; /* the deciding turn replays everything */
    rt_start(&f);

    /* event first, then the activity */
    rt_start_instance(&f, "ev-first", "SelOrder", NULL);
    WAIT_UNTIL(rt_count_events(&f, "ev-first", DURO_EVENT_EVENT_SUBSCRIBED) ==
                   2,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "ev-first", "go", "g"));
    WAIT_UNTIL(rt_count_events(&f, "ev-first", DURO_EVENT_EVENT_RAISED) == 1,
               10000);
    atomic_store(&gate_open, 1);
    WAIT_UNTIL(rt_count_events(&f, "ev-first", DURO_EVENT_ACTIVITY_COMPLETED) ==
                   1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "ev-first", "release", NULL));
    expect_output(&f, "ev-first", "event");

    /* the activity first, then the event */
    atomic_store(&gate_open, 0);
    rt_start_instance(&f, "act-first", "SelOrder", NULL);
    WAIT_UNTIL(rt_count_events(&f, "act-first", DURO_EVENT_EVENT_SUBSCRIBED) ==
                   2,
               10000);
    WAIT_UNTIL(atomic_load(&gated_started) == 2, 10000);
    atomic_store(&gate_open, 1);
    WAIT_UNTIL(
        rt_count_events(&f, "act-first", DURO_EVENT_ACTIVITY_COMPLETED) == 1,
        10000);
    CHECK_OK(duro_client_raise_event(f.client, "act-first", "go", "g"));
    WAIT_UNTIL(rt_count_events(&f, "act-first", DURO_EVENT_EVENT_RAISED) == 1,
               10000);
    CHECK_OK(duro_client_raise_event(f.client, "act-first", "release", NULL));
    expect_output(&f, "act-first", "activity");
    rt_done(&f);
}

static int orch_wait_any(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Gated", "late");
    duro_task *t = duro_timer(o, 50);
    duro_task *w = duro_wait_any(o, a, t);
    const char *first = w == t ? "timer" : w == a ? "activity" : "?";
    int rc = duro_await(o, a);
    return duro_ok(out, duro_sprintf(o, "%s,%s", first, render(o, a, rc)));
}

TEST(wait_any_leaves_the_other_tasks_running)
{
    rt_fixture f;
    reset_observations();
    rt_init(&f, "ctx_wait_any.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitAny", NULL,
                                             orch_wait_any, NULL));
    rt_start(&f);
    rt_start_instance(&f, "wa", "WaitAny", NULL);
    WAIT_UNTIL(rt_count_events(&f, "wa", DURO_EVENT_TIMER_FIRED) == 1, 10000);
    atomic_store(&gate_open, 1);
    expect_output(&f, "wa", "timer,late");
    CHECK_EQ(rt_count_events(&f, "wa", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
             0);
    CHECK_EQ(atomic_load(&gated_started), 1);
    CHECK_EQ(atomic_load(&gated_cancelled), 0);
    rt_done(&f);
}

static int orch_join(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    /* completions arrive in reverse argument order */
    duro_task *a1 = duro_call_activity(o, "DelayEcho", "150:one");
    duro_task *a2 = duro_call_activity(o, "DelayEcho", "75:two");
    duro_task *a3 = duro_call_activity(o, "DelayEcho", "0:three");
    int rc_all = duro_join(o, a1, a2, a3);
    duro_task *ok = duro_call_activity(o, "Echo", "fine");
    duro_task *cancelled = duro_timer(o, 60000);
    duro_cancel_task(o, cancelled);
    duro_task *failed = duro_call_activity(o, "Fail", "f");
    int rc1 = duro_join(o, ok, cancelled, failed);
    int rc2 = duro_join(o, ok, failed, cancelled);
    int rc3 = duro_join(o, ok);
    return duro_ok(out, duro_sprintf(o, "%s:%s,%s,%s|%s|%s|%s|%s|%s",
                                     duro_errname(rc_all), duro_task_output(a1),
                                     duro_task_output(a2), duro_task_output(a3),
                                     duro_errname(rc1), duro_errname(rc2),
                                     duro_errname(rc3), duro_task_output(ok),
                                     duro_task_error(failed)));
}

TEST(join_returns_results_in_order_and_first_failure_code)
{
    rt_fixture f;
    rt_init(&f, "ctx_join.db");
    register_common(&f);
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Join", NULL, orch_join, NULL));
    rt_start(&f);
    rt_start_instance(&f, "j", "Join", NULL);
    expect_output(&f, "j",
                  "DURO_OK:one,two,three|DURO_CANCELLED|DURO_FAILED|DURO_OK|"
                  "fine|failed on 'f'");
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * custom status */

static int orch_custom(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_set_custom_status(o, "stage-1");
    duro_await(o, duro_wait_event(o, "go"));
    duro_set_custom_status(o, "stage-2");
    duro_await(o, duro_wait_event(o, "go"));
    duro_set_custom_status(o, NULL);
    return duro_ok(out, "done");
}

TEST(custom_status_is_visible_and_can_be_cleared)
{
    rt_fixture f;
    rt_init(&f, "ctx_custom.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Custom", NULL, orch_custom,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "cs", "Custom", NULL);
    WAIT_UNTIL(custom_status_is(&f, "cs", "stage-1"), 10000);
    CHECK_EQ(rt_status(&f, "cs"), DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_raise_event(f.client, "cs", "go", NULL));
    WAIT_UNTIL(custom_status_is(&f, "cs", "stage-2"), 10000);
    CHECK_OK(duro_client_raise_event(f.client, "cs", "go", NULL));
    expect_output(&f, "cs", "done");
    CHECK(custom_status_is(&f, "cs", NULL));
    rt_done(&f);
}

TEST_MAIN(T(orchestration_and_activity_accessors), T(retry_exponential_backoff),
          T(retry_linear_backoff), T(retry_fixed_backoff),
          T(retry_max_delay_caps_exponential_backoff),
          T(retry_exhausted_fails_with_last_error),
          T(retry_does_not_retry_configuration_failures),
          T(retry_attempt_timeout_cancels_attempt_and_retries),
          T(retry_total_timeout_fails_with_category_timeout),
          T(durable_timer_fires_not_before_its_time),
          T(huge_durations_never_expire), T(wait_event_receives_the_payload),
          T(events_raised_before_waiting_are_kept_in_order),
          T(child_with_generated_id_completes_into_the_parent),
          T(child_generated_id_is_parent_execution_and_event_id),
          T(child_with_explicit_id_completion_and_failure_propagate),
          T(child_with_an_existing_id_fails_the_task),
          T(child_with_a_too_long_version_fails_the_task),
          T(fire_and_forget_runs_independently_of_the_parent),
          T(child_of_a_cancelled_parent_is_cancelled),
          T(select_activity_event_and_child_against_timers),
          T(select_picks_the_winner_by_history_order),
          T(wait_any_leaves_the_other_tasks_running),
          T(join_returns_results_in_order_and_first_failure_code),
          T(custom_status_is_visible_and_can_be_cleared))
