/* test_orch_faults.c - end-to-end tests of how the runtime copes with what
 * goes wrong around orchestration code: names that are not registered (given
 * up on with a configuration error, or picked up when a later runtime
 * registers them), poison messages (acks that keep failing, injected through
 * the fault-injecting provider wrapper), activities that run twice after a
 * lost lock, and duplicate, stale or unknown completion messages. Each test
 * runs a real runtime on its own SQLite file. */
#include <pthread.h>
#include <stdlib.h>

#include "base/base.h"
#include "faulty_provider.h"
#include "rt_util.h"

/* ------------------------------------------------------------------------
 * helpers */

static int starts_with(const char *s, const char *prefix)
{
    return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- log sink: keeps every line ---- */

/* ---- activities and orchestrations ---- */

static _Atomic int counted_runs;
static _Atomic uint32_t late_act_delivery;

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

static int act_counted(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    (void)in;
    atomic_fetch_add(&counted_runs, 1);
    return duro_ok(out, "counted");
}

static int act_late(duro_activity *a, const char *in, duro_result *out)
{
    atomic_store(&late_act_delivery, duro_activity_delivery(a));
    char buf[64];
    snprintf(buf, sizeof(buf), "late:%s", in ? in : "");
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

/* Calls the activity named by its input. */
static int orch_call_named(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, in, "payload");
    int rc = duro_await(o, t);
    return duro_ok(out, render(o, t, rc));
}

static int orch_simple(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

static void register_common(rt_fixture *f)
{
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Counted", act_counted, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "CallNamed", NULL,
                                             orch_call_named, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Simple", "1", orch_simple,
                                             NULL));
}

/* ------------------------------------------------------------------------
 * unregistered names */

TEST(unregistered_activity_fails_with_a_configuration_error)
{
    rt_fixture f;
    rt_init(&f, "faults_unknown_activity.db");
    register_common(&f);
    f.opts.max_attempts = 4;
    f.opts.unknown_name_retry_ms = 10;
    rt_start(&f);
    rt_start_instance(&f, "ua", "CallNamed", "Nope");
    duro_instance_info *i = rt_wait(&f, "ua", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_MSG(starts_with(i->output, "DURO_FAILED|configuration|") &&
                  strstr(i->output, "'Nope'") != NULL,
              "output: %s", i->output ? i->output : "(null)");
    duro_free(i);
    duro_history *h = rt_history(&f, "ua");
    const duro_event *failed = rt_find_event(h, DURO_EVENT_ACTIVITY_FAILED, 0);
    CHECK(failed != NULL);
    CHECK_EQ(failed ? failed->category : 0, DURO_CATEGORY_CONFIGURATION);
    CHECK(failed && failed->error && strstr(failed->error, "Nope"));
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 1);
    duro_history_free(h);
    rt_done(&f);
}

TEST(unregistered_orchestration_fails_with_a_configuration_error)
{
    rt_fixture f;
    rt_init(&f, "faults_unknown_orch.db");
    register_common(&f);
    f.opts.max_attempts = 4;
    f.opts.unknown_name_retry_ms = 10;
    rt_start(&f);
    rt_start_instance(&f, "ghost", "NoSuchOrch", "x");
    duro_start_options so;
    duro_start_options_init(&so);
    so.orchestration_version = "9.9";
    CHECK_OK(duro_client_start(f.client, "ghost-version", "Simple", "x", &so));
    duro_instance_info *i = rt_wait(&f, "ghost", 15000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(i->error && strstr(i->error, "NoSuchOrch") != NULL);
    duro_free(i);
    i = rt_wait(&f, "ghost-version", 15000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(i->error && strstr(i->error, "Simple") && strstr(i->error, "9.9"));
    duro_free(i);
    /* the default (highest) version of the same name runs */
    rt_start_instance(&f, "known", "Simple", "fine");
    i = rt_wait(&f, "known", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->version, "1");
    duro_free(i);
    rt_done(&f);
}

TEST(names_registered_by_a_later_runtime_proceed_normally)
{
    rt_log_reset();
    atomic_store(&late_act_delivery, 0);
    rt_fixture f;
    rt_init(&f, "faults_late_names.db");
    register_common(&f);
    f.opts.max_attempts = 50;
    f.opts.unknown_name_retry_ms = 20;
    f.opts.log_level = DURO_LOG_WARN;
    f.opts.log_fn = rt_log_sink;
    rt_start(&f);
    rt_start_instance(&f, "late-orch", "LateOrch", "o-in");
    rt_start_instance(&f, "late-act", "CallNamed", "LateAct");
    WAIT_UNTIL(rt_log_hits("'LateOrch'") >= 1 && rt_log_hits("'LateAct'") >= 1,
               10000);
    CHECK_EQ(rt_status(&f, "late-orch"), DURO_STATUS_PENDING);
    rt_stop(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "LateOrch", NULL,
                                             orch_simple, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "LateAct", act_late, NULL));
    rt_start(&f);
    duro_instance_info *i = rt_wait(&f, "late-orch", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "o-in");
    duro_free(i);
    i = rt_wait(&f, "late-act", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "late:payload");
    duro_free(i);
    /* it had been delivered before, to a runtime that did not know it */
    CHECK_INT(atomic_load(&late_act_delivery), >=, 2);
    CHECK_EQ(rt_count_events(&f, "late-act", DURO_EVENT_ACTIVITY_FAILED), 0);
    rt_done(&f);
    rt_log_reset();
}

/* ------------------------------------------------------------------------
 * poison messages */

/* Runtime on the fault-injecting wrapper of the fixture's file. */
static duro_provider *start_on_faulty(rt_fixture *f)
{
    duro_provider *inner = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f->url, &inner, &err), DURO_OK, &err);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK(w != NULL);
    CHECK_OK(duro_runtime_create_with_provider(w, f->reg, &f->opts, &f->rt));
    CHECK_OK(duro_runtime_start(f->rt));
    CHECK_OK(duro_client_create(f->url, &f->client));
    return w;
}

/* Lets the next `n` calls of `method` fail permanently, one at a time (each
 * failed ack is redelivered only after a delay, so re-arming is in time). */
static void fail_next_calls(duro_provider *w, int method, uint64_t n,
                            void (*kick)(void *), void *arg)
{
    uint64_t base = faulty_provider_faults_fired(w);
    for (uint64_t k = 1; k <= n; k++) {
        faulty_provider_fail_nth(w, 1, method, 0);
        if (k == 1 && kick != NULL)
            kick(arg);
        WAIT_UNTIL(faulty_provider_faults_fired(w) >= base + k, 20000);
    }
}

/* 99 bytes of 'p', then an Omega (2 bytes): the poison message quotes the
 * first 100 bytes of the id, which cut the Omega in two. */
#define POISON_ID                                                              \
    "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"    \
    "pppppppppppppppppppppppppppppp\xce\xa9"

static void start_simple(void *arg)
{
    rt_fixture *f = arg;
    rt_start_instance(f, POISON_ID, "Simple", "never");
}

/* Whether s is valid UTF-8 throughout (what PostgreSQL would store). */
static int valid_utf8(const char *s)
{
    while (*s != '\0') {
        size_t k = duro__utf8_len((const unsigned char *)s);
        if (k == 0)
            return 0;
        s += k;
    }
    return 1;
}

TEST(poison_orchestration_batch_fails_the_instance)
{
    rt_fixture f;
    rt_init(&f, "faults_poison_orch.db");
    register_common(&f);
    f.opts.max_attempts = 3;
    duro_provider *w = start_on_faulty(&f);
    fail_next_calls(w, FAULTY_ACK_ORCHESTRATION_ITEM, 3, start_simple, &f);
    duro_instance_info *i = rt_wait(&f, POISON_ID, 20000);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK(i->error && strstr(i->error, "poison") != NULL);
    /* valid UTF-8, though its id is cut in the middle of a character */
    CHECK_MSG(i->error && valid_utf8(i->error), "'%s'", i->error);
    /* and says why the deliveries failed: the last one's problem */
    CHECK_MSG(i->error &&
                  strstr(i->error, "the last: the turn could not be "
                                   "committed") != NULL &&
                  strstr(i->error, "injected permanent failure of ack") != NULL,
              "the cause is not in '%s'", i->error ? i->error : "(null)");
    duro_free(i);
    duro_history *h = rt_history(&f, POISON_ID);
    CHECK(h->count >= 2);
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_FAILED);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_COMPLETED), 0);
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 1);
    CHECK_EQ(faulty_provider_faults_fired(w), 3);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

/* Observes cancellation: waits for an event that never comes; when
 * cancelled, runs a cleanup activity. */
static int orch_observer(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_await(o, duro_wait_event(o, "never"));
    if (duro_cancel_requested(o))
        duro_await(o, duro_call_activity(o, "Counted", "cleanup"));
    return duro_ok(out, "done");
}

static void cancel_observer(void *arg)
{
    rt_fixture *f = arg;
    CHECK_OK(duro_client_cancel(f->client, "obs", "stop", "test"));
}

/* An orchestration that observes cancellation, whose cancel turn fails to
 * commit twice (code that crashes or hangs the turn looks the same to the
 * store): the third delivery decides the cancel from history alone, so the
 * instance can always be stopped. */
TEST(a_cancel_whose_turn_keeps_failing_is_decided_without_code)
{
    atomic_store(&counted_runs, 0);
    rt_fixture f;
    rt_init(&f, "faults_cancel_codeless.db");
    register_common(&f);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    CHECK_OK(duro_registry_add_orchestration_ex(f.reg, "Observer", NULL,
                                                orch_observer, NULL, &oo));
    f.opts.max_attempts = 50;
    duro_provider *w = start_on_faulty(&f);
    rt_start_instance(&f, "obs", "Observer", NULL);
    rt_wait_status(&f, "obs", DURO_STATUS_RUNNING, 20000);
    fail_next_calls(w, FAULTY_ACK_ORCHESTRATION_ITEM, 2, cancel_observer, &f);
    duro_instance_info *i = rt_wait(&f, "obs", 20000);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "stop");
    duro_free(i);
    duro_history *h = rt_history(&f, "obs");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL);
    CHECK_EQ(req->flags, 0); /* not delivered to the code */
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_CREATED), 0);
    duro_history_free(h);
    CHECK_EQ(atomic_load(&counted_runs), 0);
    CHECK_EQ(faulty_provider_faults_fired(w), 2);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

static void start_counted(void *arg)
{
    rt_fixture *f = arg;
    rt_start_instance(f, "pa", "CallNamed", "Counted");
}

TEST(poison_activity_fails_the_activity)
{
    atomic_store(&counted_runs, 0);
    rt_fixture f;
    rt_init(&f, "faults_poison_activity.db");
    register_common(&f);
    f.opts.max_attempts = 3;
    duro_provider *w = start_on_faulty(&f);
    fail_next_calls(w, FAULTY_ACK_WORK_ITEM, 3, start_counted, &f);
    duro_instance_info *i = rt_wait(&f, "pa", 20000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_MSG(starts_with(i->output, "DURO_FAILED|infrastructure|") &&
                  strstr(i->output, "poison") != NULL &&
                  strstr(i->output, "Counted") != NULL,
              "output: %s", i->output ? i->output : "(null)");
    duro_free(i);
    CHECK_EQ(atomic_load(&counted_runs), 3); /* one run per delivery */
    duro_history *h = rt_history(&f, "pa");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 0);
    duro_history_free(h);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 1);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * duplicates */

static _Atomic int twice_runs, twice_first_started, twice_second_started;

/* The first delivery outlives its lock and waits until another slot has
 * picked the activity up again. */
static int act_twice(duro_activity *a, const char *in, duro_result *out)
{
    atomic_fetch_add(&twice_runs, 1);
    char buf[64];
    snprintf(buf, sizeof(buf), "done:%s", in ? in : "");
    if (duro_activity_delivery(a) == 1) {
        atomic_store(&twice_first_started, 1);
        int64_t end = test_now_ms() + 20000;
        while (!atomic_load(&twice_second_started) && test_now_ms() < end)
            test_sleep_ms(1);
        return duro_ok(out, buf);
    }
    atomic_store(&twice_second_started, 1);
    return duro_ok(out, buf);
}

TEST(activity_run_twice_after_a_lost_lock_completes_once)
{
    atomic_store(&twice_runs, 0);
    atomic_store(&twice_first_started, 0);
    atomic_store(&twice_second_started, 0);
    rt_fixture f;
    rt_init(&f, "faults_twice.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "Twice", act_twice, NULL));
    f.opts.worker_concurrency = 2;
    f.opts.worker_lock_timeout_ms = 300;
    f.opts.lock_renewal_ms = 100;
    duro_provider *w = start_on_faulty(&f);
    /* Every renewal fails as "busy" (never a cancellation), so the lock
     * expires and the other slot takes the row. */
    faulty_provider_fail_always(w, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 1);
    rt_start_instance(&f, "tw", "CallNamed", "Twice");
    duro_instance_info *i = rt_wait(&f, "tw", 30000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "done:payload");
    duro_free(i);
    CHECK_INT(atomic_load(&twice_runs), >=, 2);
    CHECK(atomic_load(&twice_second_started));
    duro_history *h = rt_history(&f, "tw");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 0);
    duro_history_free(h);
    rt_stop(&f);
    duro_provider_close(w);
    rt_done(&f);
}

static int orch_dup_target(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *a = duro_call_activity(o, "Echo", "real");
    duro_await(o, a);
    duro_task *t = duro_timer(o, 10);
    duro_await(o, t);
    duro_await(o, duro_wait_event(o, "go"));
    return duro_ok(out, duro_sprintf(o, "%s|%s", duro_task_output(a),
                                     duro_errname(duro_await(o, t))));
}

static int any_payload(const duro_history *h, const char *payload)
{
    for (size_t i = 0; i < h->count; i++)
        if ((h->events[i].payload &&
             strcmp(h->events[i].payload, payload) == 0) ||
            (h->events[i].error && strcmp(h->events[i].error, payload) == 0))
            return 1;
    return 0;
}

TEST(duplicate_stale_and_unknown_messages_are_ignored)
{
    rt_fixture f;
    rt_init(&f, "faults_duplicates.db");
    register_common(&f);
    CHECK_OK(duro_registry_add_orchestration(f.reg, "DupTarget", NULL,
                                             orch_dup_target, NULL));
    rt_start(&f);
    rt_start_instance(&f, "dt", "DupTarget", NULL);
    WAIT_UNTIL(rt_count_events(&f, "dt", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               10000);
    duro_history *h = rt_history(&f, "dt");
    const duro_event *sched =
        rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0);
    const duro_event *timer = rt_find_event(h, DURO_EVENT_TIMER_CREATED, 0);
    uint64_t act_id = sched ? sched->event_id : 0;
    uint64_t timer_id = timer ? timer->event_id : 0;
    int64_t fire_at = timer ? timer->fire_at_ms : 0;
    duro_history_free(h);
    CHECK(act_id != 0 && timer_id != 0);

    duro_provider *p = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f.url, &p, &err), DURO_OK, &err);
    const duro_work_item msgs[] = {
        {.kind = DURO_WORK_ACTIVITY_COMPLETED,
         .instance_id = "dt",
         .execution_id = 1,
         .source_id = act_id,
         .payload = "fake"},
        {.kind = DURO_WORK_ACTIVITY_FAILED,
         .instance_id = "dt",
         .execution_id = 1,
         .source_id = act_id,
         .error = "fake failure",
         .category = DURO_CATEGORY_APPLICATION},
        {.kind = DURO_WORK_TIMER_FIRED,
         .instance_id = "dt",
         .execution_id = 1,
         .source_id = timer_id,
         .fire_at_ms = fire_at},
        {.kind = DURO_WORK_ACTIVITY_COMPLETED,
         .instance_id = "dt",
         .execution_id = 7,
         .source_id = act_id,
         .payload = "stale"},
        {.kind = DURO_WORK_ACTIVITY_COMPLETED,
         .instance_id = "dt",
         .execution_id = 1,
         .source_id = 999,
         .payload = "unknown"},
        {.kind = DURO_WORK_CHILD_COMPLETED,
         .instance_id = "dt",
         .execution_id = 1,
         .source_id = act_id,
         .payload = "wrong kind"},
    };
    for (size_t k = 0; k < sizeof(msgs) / sizeof(msgs[0]); k++)
        CHECK_PRC(p->enqueue_for_orchestrator(p, &msgs[k], 0, &err), DURO_OK,
                  &err);
    uint64_t queued = 1;
    WAIT_UNTIL(p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, "dt", &queued,
                                 &err) == DURO_OK &&
                   queued == 0,
               10000);
    duro_provider_close(p);
    CHECK_EQ(rt_status(&f, "dt"), DURO_STATUS_RUNNING);
    CHECK_OK(duro_client_raise_event(f.client, "dt", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "dt", 10000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "real|DURO_OK");
    duro_free(i);
    h = rt_history(&f, "dt");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_FAILED), 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_TIMER_FIRED), 1);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_SUB_ORCHESTRATION_COMPLETED), 0);
    CHECK(!any_payload(h, "fake"));
    CHECK(!any_payload(h, "fake failure"));
    CHECK(!any_payload(h, "stale"));
    CHECK(!any_payload(h, "unknown"));
    CHECK(!any_payload(h, "wrong kind"));
    for (size_t k = 0; k < h->count; k++)
        CHECK_EQ(h->events[k].event_id, k + 1);
    duro_history_free(h);
    rt_done(&f);
}

TEST_MAIN(T(unregistered_activity_fails_with_a_configuration_error),
          T(unregistered_orchestration_fails_with_a_configuration_error),
          T(names_registered_by_a_later_runtime_proceed_normally),
          T(poison_orchestration_batch_fails_the_instance),
          T(poison_activity_fails_the_activity),
          T(a_cancel_whose_turn_keeps_failing_is_decided_without_code),
          T(activity_run_twice_after_a_lost_lock_completes_once),
          T(duplicate_stale_and_unknown_messages_are_ignored))
