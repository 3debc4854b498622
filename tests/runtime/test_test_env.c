/* test_test_env.c - duro_test_env: a 30-day timer, a delayed start, retry
 * backoffs of hours and a cleanup deadline finish in real milliseconds
 * because the wait skips virtual time; an attempt timeout fires on a manual
 * advance while its activity runs (time never skips then); mocked
 * activities; bad input. Each test opens its own environment (one at a time
 * per process). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_util.h"

#define HOUR_MS (3600LL * 1000)
#define DAY_MS (24 * HOUR_MS)
/* The real-time deadline of a test's waits, for what takes milliseconds:
 * generous, for sanitizer builds on a loaded machine. A skip that failed
 * would take days, not seconds. */
#define REAL_LIMIT_MS 20000

/* The real wall clock, ms since the epoch (duro_now_ms() is virtual). */
static int64_t real_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int orch_sleep_30_days(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    int64_t began = duro_now(o);
    if (duro_await(o, duro_timer(o, 30 * DAY_MS)) != DURO_OK)
        return duro_fail(out, "timer failed");
    return duro_ok(out,
                   duro_sprintf(o, "%lld", (long long)(duro_now(o) - began)));
}

static int orch_echo(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* Calls activity `in` once and returns its output. */
static int orch_call(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "x");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* "Flaky" under a retry policy of 2 h then 4 h between its 3 attempts. */
static int orch_retry_hours(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 3;
    p.initial_delay_ms = 2 * HOUR_MS;
    p.coefficient = 2.0;
    p.max_delay_ms = 0;
    duro_task *t = duro_call_activity_with_retry(o, "Flaky", "x", &p);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* "Hang" with one attempt of at most an hour: the output says how the
 * attempt ended ("timeout" or "finished"). */
static int orch_attempt_timeout(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_retry_policy p;
    duro_retry_policy_init(&p);
    p.max_attempts = 1;
    p.attempt_timeout_ms = HOUR_MS;
    duro_task *t = duro_call_activity_with_retry(o, "Hang", "x", &p);
    if (duro_await(o, t) == DURO_OK)
        return duro_ok(out, "finished");
    return duro_ok(out, duro_task_category(t) == DURO_CATEGORY_TIMEOUT
                            ? "timeout"
                            : duro_task_error(t));
}

/* Observes its cancel, then "cleans up" for a day: its cleanup deadline
 * (an hour) terminates it first. */
static int orch_slow_cleanup(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *never = duro_wait_event(o, "never");
    if (duro_await(o, never) == DURO_OK)
        return duro_ok(out, "event");
    duro_await(o, duro_timer(o, DAY_MS));
    return duro_ok(out, "cleaned up");
}

static int act_real(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_ok(out, "real");
}

static int act_mock(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    return duro_ok(out, (const char *)duro_activity_user(a));
}

static _Atomic int flaky_calls;

static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&flaky_calls, 1);
    if (duro_activity_attempt(a) < 3)
        return duro_fail(out, "not yet");
    return duro_ok(out, "third time");
}

static _Atomic int hang_started, hang_cancelled;

/* Runs until cancelled (or 20 s of real time). */
static int act_hang(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_store(&hang_started, 1);
    if (duro_activity_wait_cancelled(a, REAL_LIMIT_MS)) {
        atomic_store(&hang_cancelled, 1);
        return duro_fail(out, "cancelled");
    }
    return duro_ok(out, "finished");
}

static duro_registry *registry(void)
{
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_OK(duro_registry_add_orchestration(r, "Sleep30Days", NULL,
                                             orch_sleep_30_days, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "Call", NULL, orch_call, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "RetryHours", NULL,
                                             orch_retry_hours, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "AttemptTimeout", NULL,
                                             orch_attempt_timeout, NULL));
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    oo.cleanup_timeout_ms = HOUR_MS;
    CHECK_OK(duro_registry_add_orchestration_ex(r, "SlowCleanup", NULL,
                                                orch_slow_cleanup, NULL, &oo));
    CHECK_OK(duro_registry_add_activity(r, "Charge", act_real, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Flaky", act_flaky, NULL));
    CHECK_OK(duro_registry_add_activity(r, "Hang", act_hang, NULL));
    return r;
}

/* An environment on a temporary store with the registry above, started. */
static duro_test_env *env_open_started(void)
{
    duro_registry *r = registry();
    duro_test_env *env = NULL;
    CHECK_OK(duro_test_env_create(r, NULL, &env));
    duro_registry_destroy(r);
    CHECK_OK(duro_test_env_start(env));
    return env;
}

/* Waits (skipping time) for `id` to end with `status`; returns its info
 * (caller frees). */
static duro_instance_info *wait_for(duro_test_env *env, const char *id,
                                    int status)
{
    duro_instance_info *i = NULL;
    CHECK_OK(duro_test_env_wait(env, id, REAL_LIMIT_MS, &i));
    CHECK_MSG(i->status == status, "'%s' ended %s (%s), not %s", id,
              duro_status_name(i->status), i->output ? i->output : "",
              duro_status_name(status));
    return i;
}

/* Polls, without skipping, until `id` has `status` (real deadline). */
static void poll_status(duro_test_env *env, const char *id, int status)
{
    int64_t deadline = test_now_ms() + REAL_LIMIT_MS;
    for (;;) {
        duro_instance_info *i = NULL;
        CHECK_OK(duro_client_get_status(duro_test_env_client(env), id, &i));
        int now = i->status;
        duro_free(i);
        if (now == status)
            return;
        CHECK_MSG(test_now_ms() < deadline, "'%s' is %s, never %s", id,
                  duro_status_name(now), duro_status_name(status));
        test_sleep_ms(1);
    }
}

/* ------------------------------------------------------------------------
 * time skipping */

TEST(a_30_day_timer_fires_in_milliseconds)
{
    duro_test_env *env = env_open_started();
    int64_t real0 = test_now_ms(), virtual0 = duro_now_ms();
    CHECK_OK(duro_client_start(duro_test_env_client(env), "month",
                               "Sleep30Days", NULL, NULL));
    duro_instance_info *i = wait_for(env, "month", DURO_STATUS_COMPLETED);
    int64_t real = test_now_ms() - real0;
    /* the orchestration saw 30 days pass; the clock moved at least that */
    CHECK_INT(atoll(i->output), >=, 30 * DAY_MS);
    /* (less the real time that passed between the timer's creation and
     * the skip) */
    CHECK_INT(duro_test_env_skipped_ms(env), >=, 30 * DAY_MS - real);
    CHECK_INT(duro_now_ms() - virtual0, >=, 30 * DAY_MS);
    /* (no bound on real time is asserted: the wait's deadline,
     * REAL_LIMIT_MS, is one, and 30 days do not fit in it) */
    duro_free(i);
    duro_test_env_destroy(env);
    /* the process has its real clock back */
    CHECK_INT(duro_now_ms() - real_wall_ms(), <, HOUR_MS);
}

TEST(a_delayed_start_begins_at_its_time)
{
    duro_test_env *env = env_open_started();
    duro_start_options so;
    duro_start_options_init(&so);
    so.delay_ms = 7 * DAY_MS;
    int64_t t0 = duro_now_ms();
    CHECK_OK(duro_client_start(duro_test_env_client(env), "later", "Echo", "hi",
                               &so));
    duro_instance_info *i = wait_for(env, "later", DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "hi");
    duro_free(i);
    duro_history *h = NULL;
    CHECK_OK(
        duro_client_read_history(duro_test_env_client(env), "later", 0, &h));
    CHECK(h->count >= 1);
    CHECK_INT(h->events[0].timestamp_ms, >=, t0 + 7 * DAY_MS);
    duro_history_free(h);
    duro_test_env_destroy(env);
}

TEST(retry_backoffs_of_hours_pass_at_once)
{
    atomic_store(&flaky_calls, 0);
    duro_test_env *env = env_open_started();
    CHECK_OK(duro_client_start(duro_test_env_client(env), "retry", "RetryHours",
                               NULL, NULL));
    duro_instance_info *i = wait_for(env, "retry", DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "third time");
    CHECK_EQ(atomic_load(&flaky_calls), 3);
    /* 2 h, then 4 h of backoff */
    CHECK_INT(duro_test_env_skipped_ms(env), >=, 6 * HOUR_MS - REAL_LIMIT_MS);
    duro_free(i);
    duro_test_env_destroy(env);
}

TEST(a_cleanup_deadline_terminates_a_slow_cleanup)
{
    duro_test_env *env = env_open_started();
    duro_client *c = duro_test_env_client(env);
    CHECK_OK(duro_client_start(c, "slow", "SlowCleanup", NULL, NULL));
    /* Running, so the cancel is observed by the code (a Pending instance
     * is cancelled at once) */
    poll_status(env, "slow", DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_cancel(c, "slow", "stop", "test"));
    duro_instance_info *i = wait_for(env, "slow", DURO_STATUS_TERMINATED);
    duro_free(i);
    /* the deadline (1 h) came before the cleanup's day */
    int64_t skipped = duro_test_env_skipped_ms(env);
    CHECK_INT(skipped, >=, HOUR_MS - REAL_LIMIT_MS);
    CHECK_INT(skipped, <, DAY_MS - HOUR_MS);
    duro_test_env_destroy(env);
}

/* ------------------------------------------------------------------------
 * by hand, and never while an activity runs */

TEST(an_attempt_timeout_fires_on_an_advance_while_its_activity_runs)
{
    atomic_store(&hang_started, 0);
    atomic_store(&hang_cancelled, 0);
    duro_test_env *env = env_open_started();
    CHECK_OK(duro_client_start(duro_test_env_client(env), "hang",
                               "AttemptTimeout", NULL, NULL));
    WAIT_UNTIL(atomic_load(&hang_started), REAL_LIMIT_MS);
    /* A wait skips nothing while the activity runs. */
    duro_instance_info *i = NULL;
    CHECK_RC(duro_test_env_wait(env, "hang", 50, &i), DURO_TIMEOUT);
    CHECK(i != NULL);
    CHECK_EQ(i->status, DURO_STATUS_RUNNING);
    duro_free(i);
    CHECK_EQ(duro_test_env_skipped_ms(env), 0);
    /* By hand: the hour passes, the attempt times out and is cancelled;
     * its lock (ten years by default) does not expire. */
    CHECK_OK(duro_test_env_advance(env, HOUR_MS));
    i = wait_for(env, "hang", DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "timeout");
    duro_free(i);
    /* the token fired (the instance may end before the activity returns) */
    WAIT_UNTIL(atomic_load(&hang_cancelled), REAL_LIMIT_MS);
    CHECK_EQ(duro_test_env_skipped_ms(env), HOUR_MS);
    duro_test_env_destroy(env);
}

TEST(advance_by_hand_fires_a_timer_without_a_skipping_wait)
{
    duro_test_env *env = env_open_started();
    duro_client *c = duro_test_env_client(env);
    CHECK_OK(duro_client_start(c, "month", "Sleep30Days", NULL, NULL));
    /* the timer is in history (a plain wait skips nothing) */
    poll_status(env, "month", DURO_STATUS_RUNNING);
    int64_t deadline = test_now_ms() + REAL_LIMIT_MS;
    for (int timers = 0; timers == 0;) {
        duro_history *h = NULL;
        CHECK_OK(duro_client_read_history(c, "month", 0, &h));
        timers = rt_count_kind(h, DURO_EVENT_TIMER_CREATED);
        duro_history_free(h);
        CHECK_MSG(timers > 0 || test_now_ms() < deadline,
                  "no TimerCreated within %d ms", REAL_LIMIT_MS);
        if (timers == 0)
            test_sleep_ms(1);
    }
    CHECK_OK(duro_test_env_advance(env, 29 * DAY_MS));
    CHECK_OK(duro_test_env_advance(env, 0));
    CHECK_OK(duro_test_env_advance(env, DAY_MS));
    CHECK_EQ(duro_test_env_skipped_ms(env), 30 * DAY_MS);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_wait(c, "month", REAL_LIMIT_MS, &i));
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_INT(atoll(i->output), >=, 30 * DAY_MS);
    duro_free(i);
    duro_test_env_destroy(env);
}

/* ------------------------------------------------------------------------
 * mocks */

TEST(a_mock_replaces_or_adds_an_activity_by_name)
{
    duro_registry *r = registry();
    duro_test_env *env = NULL;
    CHECK_OK(duro_test_env_create(r, NULL, &env));
    duro_registry_destroy(r);
    CHECK_OK(
        duro_test_env_mock_activity(env, "Charge", act_mock, (void *)"mocked"));
    CHECK_OK(
        duro_test_env_mock_activity(env, "Refund", act_mock, (void *)"added"));
    /* instances may be started before the runtime */
    duro_client *c = duro_test_env_client(env);
    CHECK_OK(duro_client_start(c, "charge", "Call", "Charge", NULL));
    CHECK_OK(duro_test_env_start(env));
    CHECK_RC(duro_test_env_mock_activity(env, "Charge", act_real, NULL),
             DURO_INVALID_STATE);
    CHECK(strstr(duro_errmsg(), "before duro_test_env_start") != NULL);
    CHECK_OK(duro_client_start(c, "refund", "Call", "Refund", NULL));
    duro_instance_info *i = wait_for(env, "charge", DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "mocked");
    duro_free(i);
    i = wait_for(env, "refund", DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "added");
    duro_free(i);
    duro_test_env_destroy(env);
}

/* ------------------------------------------------------------------------
 * bad input */

TEST(bad_input_gets_clear_errors)
{
    duro_registry *r = registry();
    duro_test_env *env = (duro_test_env *)r; /* must be reset */
    duro_instance_info *i = NULL;
    CHECK_RC(duro_test_env_create(NULL, NULL, &env), DURO_INVALID);
    CHECK(env == NULL);
    CHECK_RC(duro_test_env_create(r, NULL, NULL), DURO_INVALID);
    duro_test_env_options o;
    memset(&o, 0, sizeof(o));
    CHECK_RC(duro_test_env_create(r, &o, &env), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "duro_test_env_options_init") != NULL);
    duro_test_env_options_init(&o);
    CHECK_EQ(o.version, 1);
    CHECK(o.url == NULL && o.runtime == NULL);
    o.url = "nosuchstore:x";
    CHECK_RC(duro_test_env_create(r, &o, &env), DURO_BAD_URL);
    CHECK(env == NULL);
    duro_runtime_options ro;
    duro_runtime_options_init(&ro);
    ro.worker_concurrency = -1;
    o.url = NULL;
    o.runtime = &ro;
    CHECK_RC(duro_test_env_create(r, &o, &env), DURO_INVALID);
    CHECK(env == NULL);

    /* NULL environments */
    CHECK_RC(duro_test_env_mock_activity(NULL, "A", act_mock, NULL),
             DURO_INVALID);
    CHECK_RC(duro_test_env_start(NULL), DURO_INVALID);
    CHECK(duro_test_env_client(NULL) == NULL);
    CHECK_RC(duro_test_env_advance(NULL, 1), DURO_INVALID);
    CHECK_EQ(duro_test_env_skipped_ms(NULL), 0);
    CHECK_RC(duro_test_env_wait(NULL, "x", 0, &i), DURO_INVALID);
    CHECK(i == NULL);
    duro_test_env_destroy(NULL);
    duro_test_env_options_init(NULL);

    CHECK_OK(duro_test_env_create(r, NULL, &env));
    /* one environment at a time: the clock is the process's */
    duro_test_env *second = NULL;
    CHECK_RC(duro_test_env_create(r, NULL, &second), DURO_INVALID_STATE);
    CHECK(second == NULL);
    CHECK(strstr(duro_errmsg(), "one env at a time") != NULL);
    CHECK_RC(duro_test_env_mock_activity(env, NULL, act_mock, NULL),
             DURO_INVALID);
    CHECK_RC(duro_test_env_mock_activity(env, "", act_mock, NULL),
             DURO_INVALID);
    CHECK_RC(duro_test_env_mock_activity(env, "A", NULL, NULL), DURO_INVALID);
    char *long_name = malloc(1026);
    CHECK(long_name != NULL);
    memset(long_name, 'n', 1025);
    long_name[1025] = '\0';
    CHECK_RC(duro_test_env_mock_activity(env, long_name, act_mock, NULL),
             DURO_TOO_LARGE);
    free(long_name);
    CHECK_RC(duro_test_env_wait(env, "x", 0, &i), DURO_INVALID_STATE);
    CHECK(strstr(duro_errmsg(), "before duro_test_env_start") != NULL);
    CHECK_RC(duro_test_env_advance(env, -1), DURO_INVALID);
    CHECK(strstr(duro_errmsg(), "only moves forward") != NULL);
    CHECK_EQ(duro_test_env_skipped_ms(env), 0);
    CHECK_OK(duro_test_env_start(env));
    CHECK_RC(duro_test_env_start(env), DURO_INVALID_STATE);
    CHECK_RC(duro_test_env_wait(env, NULL, 0, &i), DURO_INVALID);
    CHECK_RC(duro_test_env_wait(env, "x", 0, NULL), DURO_INVALID);
    /* an unknown instance */
    CHECK_RC(duro_test_env_wait(env, "ghost", 1000, &i), DURO_NOT_FOUND);
    CHECK(i != NULL);
    CHECK_EQ(i->status, DURO_STATUS_NOT_FOUND);
    duro_free(i);
    duro_test_env_destroy(env);
    /* closed: another may open */
    CHECK_OK(duro_test_env_create(r, NULL, &env));
    duro_test_env_destroy(env);
    duro_registry_destroy(r);
}

TEST_MAIN(T(a_30_day_timer_fires_in_milliseconds),
          T(a_delayed_start_begins_at_its_time),
          T(retry_backoffs_of_hours_pass_at_once),
          T(a_cleanup_deadline_terminates_a_slow_cleanup),
          T(an_attempt_timeout_fires_on_an_advance_while_its_activity_runs),
          T(advance_by_hand_fires_a_timer_without_a_skipping_wait),
          T(a_mock_replaces_or_adds_an_activity_by_name),
          T(bad_input_gets_clear_errors))
