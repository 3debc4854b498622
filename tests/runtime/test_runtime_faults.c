/* test_runtime_faults.c - storage faults under a real runtime, through the
 * fault-injecting wrapper around SQLite: retryable and permanent failures of
 * every fetch, ack, combined ack-and-fetch, abandon and history read the
 * dispatchers make, calls that commit but report failure (lost replies), and
 * engine-cache eviction. Every scenario proves its branch was taken (faults
 * fired, call counts, log lines, metrics) and that each instance ends exactly
 * as in a fault-free run: same output, same history event by event, one
 * completion per activity. Each test runs its own runtime on its own file. */
#include <stdlib.h>
#include <time.h>

#include "faulty_provider.h"
#include "rt_util.h"

#ifdef DURO_SANITIZE_BUILD
#define CHAIN_INSTANCES 4
#define EVICT_INSTANCES 20
#else
#define CHAIN_INSTANCES 6
#define EVICT_INSTANCES 50
#endif
#define CHAIN_STEPS 4
#define EVICT_STEPS 10
#define WAIT_MS 60000

/* ------------------------------------------------------------------------
 * workloads */

static _Atomic int add_runs;
static duro_client *ping_client; /* the client of the running eviction test */

/* Deterministic arithmetic on a decimal number. */
static int act_add(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&add_runs, 1);
    long long v = in ? strtoll(in, NULL, 10) : 0;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (v * 7 + 3) % 1000003);
    return duro_ok(out, buf);
}

/* Input "<step>|<payload>": raises "ping-<step>" with <payload> on its own
 * instance before it returns, so the event is always recorded before this
 * activity's completion. */
static int act_ping(duro_activity *a, const char *in, duro_result *out)
{
    const char *bar = in ? strchr(in, '|') : NULL;
    if (bar == NULL)
        return duro_fail(out, "bad input");
    char name[48];
    snprintf(name, sizeof(name), "ping-%.*s", (int)(bar - in), in);
    int rc = duro_client_raise_event(ping_client, duro_activity_instance_id(a),
                                     name, bar + 1);
    if (rc != DURO_OK)
        return duro_failf(out, "raise failed: %s", duro_errname(rc));
    return duro_ok(out, "pinged");
}

/* CHAIN_STEPS activities in a row with a 1 ms timer after every second one,
 * then a wait for the event "finish" (the gate the tests open once every
 * fault has fired). */
static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < CHAIN_STEPS; i++) {
        duro_task *t = duro_call_activity(o, "Add", acc);
        if (duro_await(o, t) != DURO_OK)
            return duro_fail(out, duro_task_error(t));
        acc = duro_task_output(t);
        if (i % 2 == 1)
            duro_await(o, duro_timer(o, 1));
    }
    duro_task *gate = duro_wait_event(o, "finish");
    duro_await(o, gate);
    return duro_ok(out, duro_sprintf(o, "%s|%s", acc, duro_task_output(gate)));
}

/* EVICT_STEPS steps whose turns interleave with other instances': an
 * activity; an activity that raises an event, then a wait for it; a select
 * an activity wins; a select a timer wins. Every step's history is the same
 * whatever the timing. */
static int orch_steps(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < EVICT_STEPS; i++) {
        switch (i % 4) {
        case 0: {
            duro_task *t = duro_call_activity(o, "Add", acc);
            if (duro_await(o, t) != DURO_OK)
                return duro_fail(out, duro_task_error(t));
            acc = duro_task_output(t);
            break;
        }
        case 1: {
            duro_task *p =
                duro_call_activity(o, "Ping", duro_sprintf(o, "%d|%s", i, acc));
            if (duro_await(o, p) != DURO_OK)
                return duro_fail(out, duro_task_error(p));
            duro_task *ev = duro_wait_event(o, duro_sprintf(o, "ping-%d", i));
            if (duro_await(o, ev) != DURO_OK)
                return duro_fail(out, "event wait failed");
            acc = duro_sprintf(o, "%s+e", duro_task_output(ev));
            break;
        }
        case 2: {
            duro_task *a = duro_call_activity(o, "Add", acc);
            duro_task *w = duro_select(o, a, duro_wait_event(o, "never"));
            if (w != a || duro_task_failed(a))
                return duro_fail(out, "the activity lost its select");
            acc = duro_task_output(a);
            break;
        }
        default: {
            duro_task *t = duro_timer(o, 1);
            duro_task *w = duro_select(o, duro_wait_event(o, "never"), t);
            if (w != t)
                return duro_fail(out, "the timer lost its select");
            break;
        }
        }
    }
    return duro_ok(out, acc);
}

/* Runs until its token fires (a shutdown), then says why. */
static _Atomic int hold_started;
static int act_hold(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_store(&hold_started, 1);
    duro_activity_wait_cancelled(a, WAIT_MS);
    return duro_ok(out, "held");
}

static int orch_hold(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Hold", NULL);
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, "Hold failed");
    return duro_ok(out, duro_task_output(t));
}

static void register_all(rt_fixture *f)
{
    CHECK_OK(duro_registry_add_activity(f->reg, "Hold", act_hold, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "HoldOrch", NULL,
                                             orch_hold, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Add", act_add, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Ping", act_ping, NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Chain", NULL, orch_chain,
                                             NULL));
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Steps", NULL, orch_steps,
                                             NULL));
}

/* ------------------------------------------------------------------------
 * history checks */

static int str_eq(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

static const char *or_null(const char *s)
{
    return s ? s : "(null)";
}

/* The scheduling kind a completion of `kind` points at; 0 when `kind` is
 * not a completion. */
static int scheduled_kind(int kind)
{
    switch (kind) {
    case DURO_EVENT_ACTIVITY_COMPLETED:
    case DURO_EVENT_ACTIVITY_FAILED:
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
        return DURO_EVENT_ACTIVITY_SCHEDULED;
    case DURO_EVENT_TIMER_FIRED:
        return DURO_EVENT_TIMER_CREATED;
    case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        return DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED;
    default:
        return 0;
    }
}

/* Dense event ids from 1, Started first and a terminal event last, every
 * completion after the scheduling event it names and of the right kind,
 * exactly one completion per activity and at most one per timer. */
static void check_history_sane(const duro_history *h, const char *id)
{
    CHECK_MSG(h->count >= 2, "%s: %zu events", id, h->count);
    if (h->count < 2)
        return;
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    int last = h->events[h->count - 1].kind;
    CHECK_MSG(last == DURO_EVENT_ORCHESTRATION_COMPLETED ||
                  last == DURO_EVENT_ORCHESTRATION_FAILED,
              "%s: last event is %s", id, duro_event_kind_name(last));
    int *completions = calloc(h->count + 1, sizeof(int));
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        CHECK_MSG(e->event_id == i + 1, "%s: event %zu has id %llu", id, i + 1,
                  (unsigned long long)e->event_id);
        int want = scheduled_kind(e->kind);
        if (want == 0)
            continue;
        uint64_t src = e->source_event_id;
        CHECK_MSG(src >= 1 && src < e->event_id &&
                      (int)h->events[src - 1].kind == want,
                  "%s: event %llu (%s) names source %llu", id,
                  (unsigned long long)e->event_id,
                  duro_event_kind_name(e->kind), (unsigned long long)src);
        if (src >= 1 && src <= h->count &&
            e->kind != DURO_EVENT_ACTIVITY_CANCEL_REQUESTED &&
            e->kind != DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED)
            completions[src]++;
    }
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *e = &h->events[i];
        if (e->kind == DURO_EVENT_ACTIVITY_SCHEDULED)
            CHECK_MSG(completions[e->event_id] == 1,
                      "%s: activity %llu has %d completions", id,
                      (unsigned long long)e->event_id,
                      completions[e->event_id]);
        if (e->kind == DURO_EVENT_TIMER_CREATED)
            CHECK_MSG(
                completions[e->event_id] <= 1, "%s: timer %llu fired %d times",
                id, (unsigned long long)e->event_id, completions[e->event_id]);
    }
    free(completions);
}

/* The same events in the same order: kind, source, name, version, payload,
 * error, category, reason, references, attempt, flags, and a timer's delay;
 * not timestamps. */
static void check_same_history(const duro_history *got,
                               const duro_history *want, const char *id)
{
    CHECK_MSG(got->count == want->count, "%s: %zu events, expected %zu", id,
              got->count, want->count);
    size_t n = got->count < want->count ? got->count : want->count;
    for (size_t i = 0; i < n; i++) {
        const duro_event *a = &got->events[i], *b = &want->events[i];
        int same = a->event_id == b->event_id && a->kind == b->kind &&
                   a->source_event_id == b->source_event_id &&
                   str_eq(a->name, b->name) && str_eq(a->version, b->version) &&
                   str_eq(a->payload, b->payload) &&
                   str_eq(a->error, b->error) && a->category == b->category &&
                   str_eq(a->reason, b->reason) &&
                   str_eq(a->requested_by, b->requested_by) &&
                   str_eq(a->ref_instance, b->ref_instance) &&
                   a->ref_execution == b->ref_execution &&
                   a->ref_event_id == b->ref_event_id &&
                   a->attempt == b->attempt && a->flags == b->flags &&
                   (a->kind != DURO_EVENT_TIMER_CREATED ||
                    a->fire_at_ms - a->timestamp_ms ==
                        b->fire_at_ms - b->timestamp_ms);
        if (!same) {
            CHECK_MSG(same,
                      "%s: event %zu differs: %s(src %llu, name %s, payload "
                      "%s, error %s) vs expected %s(src %llu, name %s, "
                      "payload %s, error %s)",
                      id, i + 1, duro_event_kind_name(a->kind),
                      (unsigned long long)a->source_event_id, or_null(a->name),
                      or_null(a->payload), or_null(a->error),
                      duro_event_kind_name(b->kind),
                      (unsigned long long)b->source_event_id, or_null(b->name),
                      or_null(b->payload), or_null(b->error));
            return;
        }
    }
}

/* ------------------------------------------------------------------------
 * the chain workload: run, gate, check */

static const char *instance_name(int i)
{
    static _Thread_local char buf[4][16];
    static _Thread_local int next;
    char *s = buf[next++ % 4];
    snprintf(s, 16, "i%d", i);
    return s;
}

static const char *instance_input(int i)
{
    static _Thread_local char buf[4][16];
    static _Thread_local int next;
    char *s = buf[next++ % 4];
    snprintf(s, 16, "%d", 1000 + 17 * i);
    return s;
}

static void start_chains(rt_fixture *f, int n)
{
    for (int i = 0; i < n; i++)
        rt_start_instance(f, instance_name(i), "Chain", instance_input(i));
}

/* Opens every instance's gate once it waits there (an event raised any
 * earlier would land elsewhere in history), then waits for all to end. */
static void finish_chains(rt_fixture *f, int n)
{
    for (int i = 0; i < n; i++) {
        const char *id = instance_name(i);
        WAIT_UNTIL(rt_count_events(f, id, DURO_EVENT_EVENT_SUBSCRIBED) == 1,
                   WAIT_MS);
        CHECK_OK(duro_client_raise_event(f->client, id, "finish", "done"));
    }
    for (int i = 0; i < n; i++)
        duro_free(rt_wait(f, instance_name(i), WAIT_MS));
}

/* Outputs and histories of a fault-free run, computed once. */
static struct {
    int ready;
    char *output[CHAIN_INSTANCES];
    duro_history *history[CHAIN_INSTANCES];
} baseline;

static void baseline_get(void)
{
    if (baseline.ready)
        return;
    rt_fixture f;
    rt_init(&f, "rtf_baseline.db");
    register_all(&f);
    rt_start(&f);
    start_chains(&f, CHAIN_INSTANCES);
    finish_chains(&f, CHAIN_INSTANCES);
    for (int i = 0; i < CHAIN_INSTANCES; i++) {
        duro_instance_info *info = rt_wait(&f, instance_name(i), WAIT_MS);
        CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
        baseline.output[i] = strdup(info->output ? info->output : "");
        duro_free(info);
        baseline.history[i] = rt_history(&f, instance_name(i));
        check_history_sane(baseline.history[i], instance_name(i));
    }
    rt_done(&f);
    baseline.ready = !test_failed();
}

/* Every instance completed with the fault-free output and history. */
static void check_chains(rt_fixture *f, int n)
{
    baseline_get();
    for (int i = 0; i < n && baseline.ready; i++) {
        const char *id = instance_name(i);
        duro_instance_info *info = rt_wait(f, id, WAIT_MS);
        CHECK_EQ(info->status, DURO_STATUS_COMPLETED);
        CHECK_STR(info->output, baseline.output[i]);
        duro_free(info);
        duro_history *h = rt_history(f, id);
        check_history_sane(h, id);
        check_same_history(h, baseline.history[i], id);
        duro_history_free(h);
    }
}

/* ------------------------------------------------------------------------
 * a runtime on the wrapper */

/* Options for fault runs: locks that do not expire unless a test shortens
 * them, every log line kept (debug included) in the sink. */
static void fault_options(rt_fixture *f)
{
    f->opts.orchestration_lock_timeout_ms = 30000;
    f->opts.worker_lock_timeout_ms = 30000;
    f->opts.lock_renewal_ms = 1000;
    f->opts.log_level = DURO_LOG_DEBUG;
    f->opts.log_fn = rt_log_sink;
}

static void init_faulty(rt_fixture *f, const char *db)
{
    baseline_get(); /* before add_runs is reset: it runs activities too */
    rt_log_reset();
    atomic_store(&add_runs, 0);
    rt_init(f, db);
    register_all(f);
    fault_options(f);
}

/* The wrapper, presenting contract `version`, around a new handle on the
 * fixture's store. */
static duro_provider *open_faulty(rt_fixture *f, int version)
{
    duro_provider *inner = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(f->url, &inner, &err), DURO_OK, &err);
    duro_provider *w = faulty_provider_wrap_version(inner, 1, version);
    CHECK(w != NULL);
    CHECK_EQ(w->version, version);
    return w;
}

/* Starts the runtime on the wrapper; the fixture's client uses its own,
 * fault-free handle. */
static void run_faulty(rt_fixture *f, duro_provider *w)
{
    CHECK_OK(duro_runtime_create_with_provider(w, f->reg, &f->opts, &f->rt));
    CHECK_OK(duro_runtime_start(f->rt));
    if (f->client == NULL)
        CHECK_OK(duro_client_create(f->url, &f->client));
}

static duro_provider *start_faulty(rt_fixture *f, int version)
{
    duro_provider *w = open_faulty(f, version);
    run_faulty(f, w);
    return w;
}

static void done_faulty(rt_fixture *f, duro_provider *w)
{
    rt_done(f);
    duro_provider_close(w);
}

static uint64_t fired(duro_provider *w)
{
    return faulty_provider_faults_fired(w);
}

static uint64_t calls(duro_provider *w, int method)
{
    return faulty_provider_calls(w, method);
}

/* Appends one fault (the next matching call) to the wrapper's plan. Tests
 * arm their whole plan before the work starts, so that the faults strike
 * whatever the timing of the test thread. */
static void plan(duro_provider *w, int method, int retryable, faulty_when when)
{
    CHECK(faulty_provider_queue(w, method, 1, 1, retryable, when));
}

/* ------------------------------------------------------------------------
 * 1. retryable and permanent errors of the dispatchers' calls */

/* An outage shows without flooding the log: its first retryable failure at
 * WARN and its first permanent one (`permanent_failure`) at ERROR, then the
 * fetch that succeeds again at WARN, the failures between at DEBUG. (A
 * fetch in flight as the faults were armed or changed may succeed among
 * them: then an outage of a few ms is logged before the long one.) The
 * test ran within one DURO__STORAGE_WARN_EVERY_MS (10 s) unless took_ms
 * says otherwise. */
static void check_outage_log(const char *failure, const char *permanent_failure,
                             const char *recovery, int failures, int permanent,
                             int64_t took_ms)
{
    int intervals = 1 + (int)(took_ms / 10000);
    int warned = rt_log_hits_at(DURO_LOG_WARN, failure);
    int errors = rt_log_hits_at(DURO_LOG_ERROR, permanent_failure);
    CHECK_INT(warned, >=, 1);
    CHECK_INT(warned, <=, 2 * intervals);
    CHECK_INT(errors, >=, 1);
    CHECK_INT(errors, <=, intervals);
    int recovered = rt_log_hits_at(DURO_LOG_WARN, recovery);
    CHECK_INT(recovered, >=, 1);
    CHECK_INT(recovered, <=, warned + errors);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_DEBUG, failure), failures - warned);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_DEBUG, permanent_failure),
             permanent - errors);
}

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A turn thread whose fetch fails backs off 10, 20, 40 ... ms (retryable
 * errors counted in storage_retries, permanent ones logged as errors and
 * not counted) and carries on when the store recovers. (Every permanent
 * failure used to be logged at ERROR: a dropped schema gave one line per
 * thread per second.) */
TEST(orchestration_fetch_errors_back_off_and_recover)
{
    rt_fixture f;
    init_faulty(&f, "rtf_fetch_orch.db");
    int64_t began = mono_ms();
    duro_provider *w = start_faulty(&f, 2);
    start_chains(&f, CHAIN_INSTANCES);

    faulty_provider_fail_always(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 1, 1);
    /* the fourth failure in a row of one thread waits 80 ms */
    WAIT_UNTIL(rt_log_hits("injected retryable failure of "
                           "fetch_orchestration_item; retrying in 80 ms") >= 1,
               WAIT_MS);
    faulty_provider_fail_always(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 1, 0);
    faulty_provider_fail_always(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 0, 1);
    WAIT_UNTIL(rt_log_hits("injected permanent failure of "
                           "fetch_orchestration_item; retrying in") >= 2,
               WAIT_MS);
    faulty_provider_fail_always(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 0, 0);

    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    /* each failure logged once; only the retryable ones count as retries */
    int retryable = rt_log_hits("fetch of orchestration work failed: "
                                "faulty_provider: injected retryable");
    int permanent = rt_log_hits("fetch of orchestration work failed: "
                                "faulty_provider: injected permanent");
    CHECK_EQ(fired(w), (uint64_t)(retryable + permanent));
    CHECK_EQ(m.storage_retries, retryable);
    check_outage_log("fetch of orchestration work failed: faulty_provider: "
                     "injected retryable",
                     "fetch of orchestration work failed: faulty_provider: "
                     "injected permanent",
                     "the store answers again: orchestration work", retryable,
                     permanent, mono_ms() - began);
    done_faulty(&f, w);
}

/* The same for a worker slot's fetch. */
TEST(activity_fetch_errors_back_off_and_recover)
{
    rt_fixture f;
    init_faulty(&f, "rtf_fetch_work.db");
    int64_t began = mono_ms();
    f.opts.worker_concurrency = 2;
    duro_provider *w = start_faulty(&f, 2);
    start_chains(&f, CHAIN_INSTANCES);

    uint64_t base = fired(w);
    faulty_provider_fail_always(w, FAULTY_FETCH_WORK_ITEM, 1, 1);
    WAIT_UNTIL(fired(w) >= base + 8, WAIT_MS); /* about 4 per slot */
    faulty_provider_fail_always(w, FAULTY_FETCH_WORK_ITEM, 1, 0);
    base = fired(w);
    faulty_provider_fail_always(w, FAULTY_FETCH_WORK_ITEM, 0, 1);
    WAIT_UNTIL(fired(w) >= base + 4, WAIT_MS);
    faulty_provider_fail_always(w, FAULTY_FETCH_WORK_ITEM, 0, 0);

    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    int retryable = rt_log_hits("fetch of activity work failed: "
                                "faulty_provider: injected retryable failure "
                                "of fetch_work_item");
    int permanent = rt_log_hits("fetch of activity work failed: "
                                "faulty_provider: injected permanent failure "
                                "of fetch_work_item");
    CHECK_INT(retryable, >=, 8);
    CHECK_INT(permanent, >=, 4);
    CHECK_EQ(fired(w), (uint64_t)(retryable + permanent));
    CHECK_EQ(m.storage_retries, retryable);
    check_outage_log("fetch of activity work failed: faulty_provider: "
                     "injected retryable",
                     "fetch of activity work failed: faulty_provider: "
                     "injected permanent",
                     "the store answers again: activity work", retryable,
                     permanent, mono_ms() - began);
    done_faulty(&f, w);
}

/* A store whose fetches fail every other call (a pool with some dead
 * connections, a server short of connection slots) does not flood the log:
 * failures and recoveries alternate, yet the failures show at WARN at most
 * once per DURO__STORAGE_WARN_EVERY_MS (10 s), the next one counting those
 * logged at DEBUG meanwhile, and a recovery shows at WARN only after an
 * outage a WARN announced. (Every failure and every recovery used to be
 * logged at WARN: 51 lines/s in an operator trial.) */
TEST(alternating_fetch_failures_are_warned_at_most_once_per_interval)
{
    enum { FAILURES = 16 };
    rt_fixture f;
    init_faulty(&f, "rtf_fetch_flap.db");
    duro_provider *w = start_faulty(&f, 2);
    uint64_t base = fired(w);
    int64_t began = mono_ms();
    /* one success, then one failure, FAILURES times */
    for (int i = 0; i < FAILURES; i++)
        CHECK(faulty_provider_queue(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 2, 1, 1,
                                    FAULTY_BEFORE_CALL));
    start_chains(&f, CHAIN_INSTANCES);
    finish_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) >= base + FAILURES, WAIT_MS);
    CHECK_EQ(fired(w), base + FAILURES);
    int64_t took_ms = mono_ms() - began;
    check_chains(&f, CHAIN_INSTANCES);
    const char *failure = "fetch of orchestration work failed: "
                          "faulty_provider: injected retryable";
    const char *recovery = "the store answers again: orchestration work";
    int warned = rt_log_hits_at(DURO_LOG_WARN, failure);
    /* one, and one more per interval the run took (however slow the
     * machine) */
    CHECK_INT(warned, >=, 1);
    CHECK_INT(warned, <=, 1 + (int)(took_ms / 10000) + 1);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_DEBUG, failure), FAILURES - warned);
    int recovered = rt_log_hits_at(DURO_LOG_WARN, recovery);
    CHECK_INT(recovered, >=, 1);
    CHECK_INT(recovered, <=, warned);
    CHECK_INT(rt_log_hits_at(DURO_LOG_DEBUG, recovery) + recovered, <=,
              FAILURES);
    if (warned > 1)
        CHECK(rt_log_hits_at(DURO_LOG_WARN, "failures since the last warning "
                                            "were logged at debug level") >= 1);
    done_faulty(&f, w);
}

/* A turn whose ack fails retryably (nothing committed) is acked again in
 * place (ack_orchestration_item), its lock still held; one whose ack fails
 * permanently is abandoned (back after 1 s) and runs again from the same
 * batch. With a version-2 store the first ack is the combined
 * ack-and-fetch; with version 1 it is ack_orchestration_item (there the
 * permanent fault may strike a retry). The failed turn's activities were
 * never committed, so each activity still runs exactly once. */
static void orchestration_ack_errors(int version, const char *db)
{
    rt_fixture f;
    init_faulty(&f, db);
    duro_provider *w = start_faulty(&f, version);
    int method = version >= 2 ? FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM
                              : FAULTY_ACK_ORCHESTRATION_ITEM;
    const char *name = faulty_method_name(method);
    uint64_t abandons = calls(w, FAULTY_ABANDON_ORCHESTRATION_ITEM);
    plan(w, method, 1, FAULTY_BEFORE_CALL);
    plan(w, method, 0, FAULTY_BEFORE_CALL);
    plan(w, method, 1, FAULTY_BEFORE_CALL);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 3, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);

    char needle[160];
    snprintf(needle, sizeof(needle),
             "failed: faulty_provider: injected retryable failure of %s", name);
    CHECK_EQ(rt_log_hits(needle), 0); /* retried, not given up */
    snprintf(needle, sizeof(needle),
             "failed: faulty_provider: injected permanent failure of %s", name);
    CHECK_EQ(rt_log_hits(needle), 1);
    CHECK_INT(calls(w, FAULTY_ABANDON_ORCHESTRATION_ITEM) - abandons, >=, 1);
    if (version < 2)
        CHECK_EQ(calls(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM), 0);
    else /* the retries are single acks */
        CHECK_INT(calls(w, FAULTY_ACK_ORCHESTRATION_ITEM), >=, 2);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 2);
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.turn_acks_given_up, 0);
    done_faulty(&f, w);
}

TEST(orchestration_ack_and_fetch_errors_retry_or_abandon_the_turn)
{
    orchestration_ack_errors(2, "rtf_ack_orch_v2.db");
}

TEST(orchestration_ack_errors_retry_or_abandon_the_turn_version_1)
{
    orchestration_ack_errors(1, "rtf_ack_orch_v1.db");
}

/* While the deliveries of instance 'p' it fetches are within max_attempts,
 * every ack of a turn fails retryably (an outage); the delivery that fails
 * the instance as poison is acked. */
static void ack_fails_until_poison(void *arg, const faulty_call *call)
{
    duro_provider *w = arg;
    if (!call->after || call->orch_item == NULL)
        return;
    int on = call->orch_item->attempt <= 3;
    faulty_provider_fail_always(w, FAULTY_ACK_ORCHESTRATION_ITEM, 1, on);
    faulty_provider_fail_always(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM, 1,
                                on);
}

/* Each delivery whose ack fails counts toward max_attempts, retryable or
 * not: a retryable failure is retried in place until the instance lock's
 * deadline, then given up (counted); the batch comes back when the lock
 * expires, and after max_attempts such deliveries the instance fails as
 * poison (the existing poison test covers permanent errors). */
TEST(retryable_ack_errors_count_toward_poison)
{
    rt_fixture f;
    init_faulty(&f, "rtf_poison_retryable.db");
    f.opts.max_attempts = 3;
    f.opts.orchestration_lock_timeout_ms = 300; /* each delivery gives up */
    duro_provider *w = start_faulty(&f, 2);
    faulty_provider_set_hook(w, FAULTY_FETCH_ORCHESTRATION_ITEM,
                             ack_fails_until_poison, w);
    rt_start_instance(&f, "p", "Chain", "1");
    duro_instance_info *i = rt_wait(&f, "p", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK(i->error && strstr(i->error, "poison") != NULL);
    duro_free(i);
    duro_history *h = rt_history(&f, "p");
    check_history_sane(h, "p");
    CHECK_EQ(h->count, 2); /* Started, Failed */
    duro_history_free(h);
    CHECK_EQ(atomic_load(&add_runs), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 1);
    CHECK_EQ(m.turn_acks_given_up, 3);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_WARN, "given up at its lock's deadline"),
             3);
    CHECK_INT(fired(w), >, 3 * 2); /* retried in place each time */
    CHECK_INT(m.storage_retries, >=, 3);
    done_faulty(&f, w);
}

/* Whether the instance's recorded problem holds `needle`. */
static int problem_has(rt_fixture *f, const char *id, const char *needle)
{
    duro_instance_info *i = NULL;
    if (duro_client_get_status(f->client, id, &i) != DURO_OK)
        return 0;
    int has = i->last_problem != NULL && strstr(i->last_problem, needle);
    duro_free(i);
    return has;
}

/* A store that refuses every turn's commit (a corrupted history page, say)
 * but still takes other writes: the deliveries' problem says the store
 * refused the turn and hedges the poison forecast; past max_attempts the
 * poison failure is refused too, so the problem and the log say that the
 * instance cannot progress until the store is repaired - not that it fails
 * as poison, which never comes (it said "the batch fails as poison after
 * max_attempts" at every delivery, and logged "poison message" every
 * second, for ever). Once the store takes writes again, the failure
 * commits and is counted then. */
TEST(a_store_refusing_every_turn_says_the_instance_cannot_progress)
{
    rt_fixture f;
    init_faulty(&f, "rtf_refused.db");
    f.opts.max_attempts = 2;
    duro_provider *w = start_faulty(&f, 6); /* problems are recorded from 4 */
    faulty_provider_fail_always(w, FAULTY_ACK_ORCHESTRATION_ITEM, 0, 1);
    rt_start_instance(&f, "p", "Chain", "1");
    WAIT_UNTIL(problem_has(&f, "p", "the store refused it"), WAIT_MS);
    CHECK(problem_has(&f, "p", "if the store takes that write"));
    WAIT_UNTIL(problem_has(&f, "p",
                           "cannot progress until the store is "
                           "repaired"),
               WAIT_MS);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_get_status(f.client, "p", &i));
    CHECK_EQ(i->status, DURO_STATUS_PENDING); /* no turn ever committed */
    CHECK_MSG(i->last_problem != NULL &&
                  strstr(i->last_problem, "the store refuses writes") ==
                      i->last_problem &&
                  strstr(i->last_problem, "failing it as poison is refused "
                                          "too") != NULL &&
                  strstr(i->last_problem, "injected permanent failure of "
                                          "ack") != NULL &&
                  strstr(i->last_problem, "fails as poison after") == NULL,
              "'%s'", i->last_problem ? i->last_problem : "(null)");
    duro_free(i);
    CHECK_INT(rt_log_hits_at(DURO_LOG_ERROR, "instance 'p': the store "
                                             "refuses writes: the instance "
                                             "cannot progress"),
              >=, 1);
    CHECK_EQ(rt_log_hits("poison message"), 0);

    faulty_provider_fail_always(w, FAULTY_ACK_ORCHESTRATION_ITEM, 0, 0);
    i = rt_wait(&f, "p", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_MSG(i->error && strstr(i->error, "poison message") == i->error &&
                  strstr(i->error, "the last: the store refuses writes") !=
                      NULL,
              "'%s'", i->error ? i->error : "(null)");
    duro_free(i);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_ERROR, "poison message"), 1);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 1);
    done_faulty(&f, w);
}

/* The same on the worker side: an activity whose completion the store
 * refuses runs again at every delivery; past max_attempts its poison
 * failure is refused too, and the problem and the log say the instance
 * cannot progress, not that the activity failed (counted and logged once
 * the failure commits). */
TEST(refused_activity_results_say_the_instance_cannot_progress)
{
    rt_fixture f;
    init_faulty(&f, "rtf_refused_activity.db");
    f.opts.max_attempts = 2;
    f.opts.worker_lock_timeout_ms = 1000; /* the refused poison waits */
    f.opts.lock_renewal_ms = 100;
    duro_provider *w = start_faulty(&f, 6);
    faulty_provider_fail_always(w, FAULTY_ACK_WORK_ITEM, 0, 1);
    rt_start_instance(&f, "a", "Chain", "1");
    WAIT_UNTIL(problem_has(&f, "a",
                           "cannot progress until the store is "
                           "repaired (activity 'Add'"),
               WAIT_MS);
    CHECK(problem_has(&f, "a", "failing it as poison is refused too"));
    CHECK_EQ(rt_status(&f, "a"), DURO_STATUS_RUNNING);
    CHECK_INT(rt_log_hits_at(DURO_LOG_ERROR, "instance 'a': the store "
                                             "refuses writes"),
              >=, 1);
    CHECK_EQ(rt_log_hits("poison message"), 0);

    faulty_provider_fail_always(w, FAULTY_ACK_WORK_ITEM, 0, 0);
    duro_instance_info *i = rt_wait(&f, "a", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED); /* Chain fails with it */
    CHECK_MSG(i->error && strstr(i->error, "poison message: activity 'Add'"),
              "'%s'", i->error ? i->error : "(null)");
    duro_free(i);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_ERROR, "poison message"), 1);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 1);
    done_faulty(&f, w);
}

/* A worker slot retries a failed ack in place (5, 10, 20 ... ms) while the
 * error is retryable: the activity is not run again. */
static void activity_ack_retries(int version, const char *db)
{
    rt_fixture f;
    init_faulty(&f, db);
    duro_provider *w = start_faulty(&f, version);
    int method =
        version >= 2 ? FAULTY_ACK_AND_FETCH_WORK_ITEM : FAULTY_ACK_WORK_ITEM;
    faulty_provider_arm(w, method, 1, 3, 1, FAULTY_BEFORE_CALL);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 3, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    /* every completion acked once, plus the three failed calls */
    CHECK_EQ(calls(w, FAULTY_ACK_WORK_ITEM), CHAIN_INSTANCES * CHAIN_STEPS + 3);
    if (version < 2)
        CHECK_EQ(calls(w, FAULTY_ACK_AND_FETCH_WORK_ITEM), 0);
    CHECK_EQ(rt_log_hits("ack of activity"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 3);
    CHECK_EQ(m.activities_completed, CHAIN_INSTANCES * CHAIN_STEPS);
    done_faulty(&f, w);
}

TEST(activity_ack_errors_are_retried_in_place)
{
    activity_ack_retries(2, "rtf_ack_work_v2.db");
    activity_ack_retries(1, "rtf_ack_work_v1.db");
}

/* An outage longer than the ack's old budget (21 attempts, 7.6 s) but
 * shorter than the lock: 22 failed attempts (8.1 s of backoff), the lock
 * (30 s) still held; the slot goes on retrying and its ack commits. The
 * finished result is kept: the activity ran once. (It ran twice when the
 * slot gave up after 21 attempts and abandoned the row.) */
TEST(activity_ack_retries_outlast_a_long_outage_within_the_lock)
{
    rt_fixture f;
    init_faulty(&f, "rtf_ack_work_long.db");
    f.opts.worker_concurrency = 1; /* all failed acks are one slot's */
    duro_provider *w = start_faulty(&f, 2);
    uint64_t abandons = calls(w, FAULTY_ABANDON_WORK_ITEM);
    faulty_provider_arm(w, FAULTY_ACK_WORK_ITEM, 1, 22, 1, FAULTY_BEFORE_CALL);
    start_chains(&f, 1);
    WAIT_UNTIL(fired(w) == 22, WAIT_MS);
    finish_chains(&f, 1);
    check_chains(&f, 1);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("ack of activity"), 0);
    CHECK_EQ(calls(w, FAULTY_ABANDON_WORK_ITEM) - abandons, 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 22);
    CHECK_EQ(m.activity_acks_given_up, 0);
    CHECK_EQ(m.activities_completed, CHAIN_STEPS);
    done_faulty(&f, w);
}

/* Acks of a slot that fail (retryably) until the slot gives up: at the
 * lock's deadline (a 2 s lock, a 200 ms margin) when renewals fail too (an
 * outage), or worker_lock_timeout_ms after the first failure when they do
 * not (a store that keeps the lock but refuses the ack). Nothing is
 * abandoned (a store call the outage fails too): the row comes back when
 * its lock expires, the activity runs again, and the chain completes. */
static void activity_ack_gives_up_at_the_deadline(int renewals_too,
                                                  const char *db)
{
    rt_fixture f;
    init_faulty(&f, db);
    f.opts.worker_concurrency = 1;
    f.opts.worker_lock_timeout_ms = 2000;
    f.opts.lock_renewal_ms = 500;
    duro_provider *w = start_faulty(&f, 2);
    uint64_t abandons = calls(w, FAULTY_ABANDON_WORK_ITEM);
    faulty_provider_fail_always(w, FAULTY_ACK_WORK_ITEM, 1, 1);
    if (renewals_too)
        faulty_provider_fail_always(w, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 1);
    int64_t began = mono_ms();
    start_chains(&f, 1);
    const char *gave_up = renewals_too
                              ? "given up at its lock's deadline"
                              : "given up a lock timeout after the first "
                                "failure";
    WAIT_UNTIL(rt_log_hits_at(DURO_LOG_WARN, gave_up) == 1, WAIT_MS);
    int64_t took = mono_ms() - began;
    faulty_provider_fail_always(w, FAULTY_ACK_WORK_ITEM, 1, 0);
    faulty_provider_fail_always(w, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 0);
    /* not before the lock's deadline: 2 s less the margin, from the fetch
     * (after began) or the first failed ack */
    CHECK_INT(took, >=, 1800);
    finish_chains(&f, 1);
    check_chains(&f, 1);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_STEPS + 1);
    CHECK_EQ(calls(w, FAULTY_ABANDON_WORK_ITEM) - abandons, 0);
    CHECK_EQ(rt_log_hits("ack of activity"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.activity_acks_given_up, 1);
    CHECK_INT(m.storage_retries, >=, 8); /* 5, 10 ... 500 ms, then 500s */
    done_faulty(&f, w);
}

TEST(activity_ack_retries_end_at_the_lock_deadline)
{
    activity_ack_gives_up_at_the_deadline(1, "rtf_ack_work_deadline.db");
}

TEST(activity_ack_retries_end_a_lock_timeout_after_the_first_failure)
{
    activity_ack_gives_up_at_the_deadline(0, "rtf_ack_work_renewed.db");
}

/* A permanent ack error abandons the row at once (back after 1 s; the
 * activity runs again). When that abandon fails too, the row comes back
 * when its lock expires. On the orchestration side, a turn whose ack and
 * abandon both fail comes back when the instance lock expires. */
TEST(abandon_after_failed_acks_and_failed_abandons)
{
    rt_fixture f;
    init_faulty(&f, "rtf_abandon.db");
    f.opts.orchestration_lock_timeout_ms = 1000;
    f.opts.worker_lock_timeout_ms = 1000;
    f.opts.lock_renewal_ms = 100;
    duro_provider *w = start_faulty(&f, 2);
    /* activity: a permanent ack error, the abandon works; then a permanent
     * ack error whose abandon fails too. orchestration: a permanent ack
     * error (a retryable one is retried in place) whose abandon fails
     * too. */
    plan(w, FAULTY_ACK_WORK_ITEM, 0, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ACK_WORK_ITEM, 0, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ABANDON_WORK_ITEM, 0, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ACK_ORCHESTRATION_ITEM, 0, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ABANDON_ORCHESTRATION_ITEM, 1, FAULTY_BEFORE_CALL);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 5, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(rt_log_hits("failed: faulty_provider: injected permanent failure "
                         "of ack_and_fetch_work_item"),
             2);
    CHECK_EQ(calls(w, FAULTY_ABANDON_WORK_ITEM), 2);
    CHECK_EQ(rt_log_hits("failed: faulty_provider: injected retryable failure "
                         "of abandon_orchestration_item (a provider that can "
                         "abandons it again"),
             1);
    /* the two rows whose acks failed ran twice */
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS + 2);
    done_faulty(&f, w);
}

/* An activity still running at the shutdown deadline is returned to the
 * queue, and the log says so only when it was: when the abandon fails (the
 * store is down), the log says it was not. */
TEST(shutdown_says_whether_an_unfinished_activity_went_back)
{
    for (int fail = 0; fail < 2; fail++) {
        rt_fixture f;
        init_faulty(&f, fail ? "rtf_shutdown_fail.db" : "rtf_shutdown.db");
        atomic_store(&hold_started, 0);
        duro_provider *w = start_faulty(&f, 2);
        if (fail)
            plan(w, FAULTY_ABANDON_WORK_ITEM, 1, FAULTY_BEFORE_CALL);
        rt_start_instance(&f, "h", "HoldOrch", NULL);
        WAIT_UNTIL(atomic_load(&hold_started), WAIT_MS);
        CHECK_RC(duro_runtime_shutdown(f.rt, 200), DURO_TIMEOUT);
        int back = rt_log_hits_at(DURO_LOG_WARN,
                                  "activity 'Hold' (instance 'h') did not "
                                  "finish in time; returned to the queue");
        int not_back = rt_log_hits_at(
            DURO_LOG_WARN, "activity 'Hold' (instance 'h') did not finish in "
                           "time; not returned to the queue (faulty_provider: "
                           "injected retryable failure of abandon_work_item)");
        CHECK_EQ(back, fail ? 0 : 1);
        CHECK_EQ(not_back, fail ? 1 : 0);
        CHECK_EQ(fired(w), (uint64_t)fail);
        done_faulty(&f, w);
    }
}

/* Messages for an instance that does not exist are consumed by an empty
 * ack; when that ack fails, the batch is abandoned and dropped next time. */
TEST(dropping_a_batch_survives_ack_errors)
{
    rt_fixture f;
    init_faulty(&f, "rtf_drop.db");
    duro_provider *w = start_faulty(&f, 2);
    duro_provider *inner = faulty_provider_inner(w);
    duro_work_item ev = {.kind = DURO_WORK_EXTERNAL_EVENT,
                         .instance_id = "ghost",
                         .name = "boo"};
    duro_error err;
    for (int retryable = 1; retryable >= 0; retryable--) {
        uint64_t base = fired(w);
        faulty_provider_arm(w, FAULTY_ACK_ORCHESTRATION_ITEM, 1, 1, retryable,
                            FAULTY_BEFORE_CALL);
        CHECK_PRC(inner->enqueue_for_orchestrator(inner, &ev, 0, &err), DURO_OK,
                  &err);
        uint64_t queued = 1;
        WAIT_UNTIL(inner->count_messages(inner, DURO_QUEUE_ORCHESTRATOR,
                                         "ghost", &queued, &err) == DURO_OK &&
                       queued == 0,
                   20000);
        CHECK_EQ(fired(w), base + 1);
    }
    CHECK_EQ(rt_log_hits("could not drop messages of instance 'ghost'"), 2);
    CHECK_INT(rt_log_hits("dropping 1 message(s) for instance 'ghost'"), >=, 4);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 1);
    done_faulty(&f, w);
}

/* When the kept engine no longer matches what the fetch skipped (evicted
 * between the fetch and the turn; forced here by understating the cache),
 * the turn reads the whole history. A failed read abandons the turn, which
 * runs again. */
TEST(history_read_errors_abandon_the_turn)
{
    rt_fixture f;
    init_faulty(&f, "rtf_read_history.db");
    duro_provider *w = start_faulty(&f, 2);
    faulty_provider_understate_cache(w, 1);
    plan(w, FAULTY_READ_HISTORY, 1, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_READ_HISTORY, 0, FAULTY_BEFORE_CALL);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("failed: faulty_provider: injected retryable failure "
                         "of read_history"),
             1);
    CHECK_EQ(rt_log_hits("failed: faulty_provider: injected permanent failure "
                         "of read_history"),
             1);
    CHECK_INT(calls(w, FAULTY_READ_HISTORY), >, 2);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 1);
    CHECK_INT(m.replays, >, 0);
    CHECK_EQ(m.fiber_cache_hits, 0); /* every kept engine was refused */
    done_faulty(&f, w);
}

/* An ack that reports DURO_LOCK_LOST: the turn is discarded without an
 * abandon (the lock is not ours any more) and the batch comes back when the
 * lock expires; an activity's completion is dropped and counted as
 * cancelled, and the row (its lock never renewed again) comes back and runs
 * a second time. */
TEST(lock_lost_acks_discard_the_turn_or_the_completion)
{
    rt_fixture f;
    init_faulty(&f, "rtf_lock_lost.db");
    f.opts.orchestration_lock_timeout_ms = 1000;
    f.opts.worker_lock_timeout_ms = 1000;
    f.opts.lock_renewal_ms = 100;
    duro_provider *w = start_faulty(&f, 2);
    const faulty_fault turn = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                               .nth = 1,
                               .code = DURO_LOCK_LOST};
    const faulty_fault row = {
        .method = FAULTY_ACK_WORK_ITEM, .nth = 1, .code = DURO_LOCK_LOST};
    CHECK(faulty_provider_queue_fault(w, &turn));
    CHECK(faulty_provider_queue_fault(w, &row));
    uint64_t abandons = calls(w, FAULTY_ABANDON_ORCHESTRATION_ITEM);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS + 1);
    CHECK_EQ(rt_log_hits("discarded: faulty_provider: injected permanent "
                         "failure of ack_and_fetch_orchestration_item"),
             1);
    CHECK_EQ(rt_log_hits("dropped: its row is gone"), 1);
    CHECK_EQ(calls(w, FAULTY_ABANDON_ORCHESTRATION_ITEM), abandons);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.activities_cancelled, 1);
    done_faulty(&f, w);
}

/* An ack the store refuses with DURO_HISTORY_LIMIT (its own cap): the
 * runtime fails the instance instead; when even that ack does not fit, it
 * records the status alone; when that fails too, it logs it and the batch
 * comes back when its lock expires (and here, the faults gone, the
 * instance simply goes on). */
/* duro_client_wait rides out a store that fails retryably for a while (a
 * restart, a lost connection) instead of returning its first error; one
 * still failing at the deadline ends the wait with that error, and a
 * failure that is not retryable ends it at once. The client's store is a
 * fault-injecting handle on the runtime's file. */
static int orch_quick(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

TEST(client_wait_rides_out_retryable_store_failures)
{
    rt_fixture f;
    rt_init(&f, "rtf_client_wait.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Quick", NULL, orch_quick,
                                             NULL));
    rt_start(&f);
    rt_start_instance(&f, "w", "Quick", "done");
    duro_free(rt_wait(&f, "w", 60000));

    duro_provider *inner = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &inner, &e), DURO_OK, &e);
    duro_provider *w = faulty_provider_wrap(inner, 1);
    CHECK(w != NULL);
    duro_client *c = NULL;
    CHECK_OK(duro_client_create_with_provider(w, &c));

    /* three retryable failures, then the answer */
    faulty_provider_arm(w, FAULTY_GET_INSTANCE, 1, 3, 1, FAULTY_BEFORE_CALL);
    duro_instance_info *i = NULL;
    CHECK_OK(duro_client_wait(c, "w", 60000, &i));
    CHECK(i != NULL && i->status == DURO_STATUS_COMPLETED);
    CHECK_STR(i ? i->output : NULL, "done");
    duro_free(i);
    CHECK_EQ(faulty_provider_calls(w, FAULTY_GET_INSTANCE), 4);

    /* still failing at the deadline: that failure, no status */
    faulty_provider_fail_always(w, FAULTY_GET_INSTANCE, 1, 1);
    i = NULL;
    CHECK_RC(duro_client_wait(c, "w", 100, &i), DURO_BUSY);
    CHECK(i == NULL);
    faulty_provider_fail_always(w, FAULTY_GET_INSTANCE, 1, 0);

    /* not retryable: at once, one call */
    uint64_t before = faulty_provider_calls(w, FAULTY_GET_INSTANCE);
    faulty_provider_arm(w, FAULTY_GET_INSTANCE, 1, 1, 0, FAULTY_BEFORE_CALL);
    CHECK_RC(duro_client_wait(c, "w", 60000, &i), DURO_STORAGE);
    CHECK(i == NULL);
    CHECK_EQ(faulty_provider_calls(w, FAULTY_GET_INSTANCE), before + 1);

    duro_client_destroy(c);
    duro_provider_close(w);
    rt_done(&f);
}

TEST(history_limit_from_the_store_fails_the_instance)
{
    rt_fixture f;
    init_faulty(&f, "rtf_history_limit.db");
    f.opts.orchestration_lock_timeout_ms = 1000;
    duro_provider *w = start_faulty(&f, 2);
    /* the third turn's ack and the failing turn's ack both hit the cap */
    const faulty_fault limit = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                                .nth = 3,
                                .count = 2,
                                .code = DURO_HISTORY_LIMIT};
    CHECK(faulty_provider_queue_fault(w, &limit));
    rt_start_instance(&f, "capped", "Chain", "5");
    duro_instance_info *info = rt_wait(&f, "capped", WAIT_MS);
    CHECK_EQ(info->status, DURO_STATUS_FAILED);
    CHECK_EQ(info->category, DURO_CATEGORY_INFRASTRUCTURE);
    CHECK_MSG(info->error && strstr(info->error, "history limit reached"),
              "error: %s", or_null(info->error));
    duro_free(info);
    CHECK_EQ(fired(w), 2);
    duro_history *h = rt_history(&f, "capped");
    /* two turns committed; the status was recorded without events */
    CHECK_EQ(h->count, 4);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_FAILED), 0);
    duro_history_free(h);

    /* the same, and the status-only ack fails as well */
    CHECK(faulty_provider_queue_fault(w, &limit));
    CHECK(faulty_provider_queue(w, FAULTY_ACK_ORCHESTRATION_ITEM, 1, 1, 0,
                                FAULTY_BEFORE_CALL));
    start_chains(&f, 1);
    WAIT_UNTIL(fired(w) == 5, WAIT_MS);
    finish_chains(&f, 1);
    check_chains(&f, 1);
    CHECK_EQ(rt_log_hits("could not fail instance 'i0'"), 1);
    CHECK_EQ(rt_log_hits("history limit reached"), 2); /* one per instance */
    done_faulty(&f, w);
}

/* Turns acked together (provider version 7) whose common ack fails, before
 * it reaches the store, retryably or not: nothing was committed, and the
 * runtime acks each turn alone, at once. The instances end as in a
 * fault-free run, each activity run once. The STARTs are queued before the
 * runtime starts, so the first fetch takes several instances. */
TEST(batched_turn_ack_errors_fall_back_to_one_turn_acks)
{
    rt_fixture f;
    init_faulty(&f, "rtf_batch_errors.db");
    duro_provider *w = open_faulty(&f, 7);
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    plan(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS, 1, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS, 0, FAULTY_BEFORE_CALL);
    plan(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS, 1, FAULTY_BEFORE_CALL);
    run_faulty(&f, w);
    WAIT_UNTIL(fired(w) == 3, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_INT(faulty_provider_max_batch(w), >=, 2);
    CHECK_EQ(rt_log_hits("acking them one by one"), 3);
    /* every failed batch's turns were acked alone, none lost its lock */
    CHECK_INT(calls(w, FAULTY_ACK_ORCHESTRATION_ITEM), >=, 3);
    CHECK_EQ(rt_log_hits("discarded"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.orchestrations_failed, 0);
    done_faulty(&f, w);
}

/* A batch refused for one turn's size (DURO_HISTORY_LIMIT, the store's
 * cap) must not fail the other instances of the batch: the turns are acked
 * one by one, and here - the refusal injected, no turn really over any
 * cap - every instance goes on and ends as in a fault-free run. */
TEST(a_batch_over_the_history_cap_fails_no_instance_by_itself)
{
    rt_fixture f;
    init_faulty(&f, "rtf_batch_limit.db");
    duro_provider *w = open_faulty(&f, 7);
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    const faulty_fault limit = {.method =
                                    FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS,
                                .nth = 1,
                                .count = 2,
                                .code = DURO_HISTORY_LIMIT};
    CHECK(faulty_provider_queue_fault(w, &limit));
    run_faulty(&f, w);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("acking them one by one"), 2);
    CHECK_EQ(rt_log_hits("history limit reached"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.orchestrations_failed, 0);
    done_faulty(&f, w);
}

/* ------------------------------------------------------------------------
 * 3. calls that commit but report failure (the reply was lost) */

/* A committed turn reported as failed: the runtime drops its kept engine
 * (the next turn replays from the store, which has the turn). Reported
 * retryably, the ack's retry finds the lock already released and takes
 * the turn as probably committed; reported permanently, its abandon finds
 * the lock released. With the combined call, the next item the lost reply
 * carried stays locked until its lock expires, then runs. Nothing is run
 * twice: the lost next item had not run. */
static void committed_orchestration_acks(int version, const char *db)
{
    rt_fixture f;
    init_faulty(&f, db);
    f.opts.orchestration_lock_timeout_ms = 1000; /* lost items come back */
    duro_provider *w = open_faulty(&f, version);
    int method = version >= 2 ? FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEM
                              : FAULTY_ACK_ORCHESTRATION_ITEM;
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    /* The STARTs are all queued before the runtime starts: the first turn's
     * ack-and-fetch locks the next one, and its reply is lost. */
    if (version >= 2)
        plan(w, method, 1, FAULTY_AFTER_COMMIT_WITH_ITEM);
    plan(w, method, 1, FAULTY_AFTER_COMMIT);
    plan(w, method, 0, FAULTY_AFTER_COMMIT);
    uint64_t faults = version >= 2 ? 3 : 2;
    run_faulty(&f, w);
    WAIT_UNTIL(fired(w) == faults, WAIT_MS);
    /* the after-commit faults on combined calls may lose next items too */
    CHECK_INT(faulty_provider_items_discarded(w), >=, version >= 2 ? 1 : 0);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    char needle[160];
    snprintf(needle, sizeof(needle), "failure of %s after it committed",
             faulty_method_name(method));
    CHECK_EQ(rt_log_hits(needle), 1); /* the permanent one */
    /* which was followed by an abandon the store refused; the retryable
     * ones by a retry that found the lock gone */
    CHECK_EQ(rt_log_hits("at the latest its lock expires)"), 1);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_DEBUG,
                            "its lock is gone after an earlier attempt "
                            "failed, which probably committed it"),
             (int)faults - 1);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, version >= 2 ? 2 : 1); /* retryable */
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.orchestrations_failed, 0);
    done_faulty(&f, w);
}

TEST(committed_orchestration_ack_and_fetch_reported_as_failed)
{
    committed_orchestration_acks(2, "rtf_committed_orch_v2.db");
}

TEST(committed_orchestration_acks_reported_as_failed_version_1)
{
    committed_orchestration_acks(1, "rtf_committed_orch_v1.db");
}

/* orchestration_batch 0 (the default) takes the store's turn_batch
 * (provider version 11); an explicit one wins; a provider of an older
 * version, or one with no preference, gets 16. The runtime's first fetch
 * asks for a whole batch. */
static uint64_t batch_asked(int version, int turn_batch, int option)
{
    rt_fixture f;
    char db[64];
    snprintf(db, sizeof(db), "rtf_turn_batch_%d_%d_%d.db", version, turn_batch,
             option);
    init_faulty(&f, db);
    f.opts.orchestration_batch = option;
    duro_provider *w = open_faulty(&f, version);
    w->turn_batch = turn_batch; /* read only from version 11 */
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    run_faulty(&f, w);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    uint64_t asked = faulty_provider_max_next(w);
    done_faulty(&f, w);
    return asked;
}

TEST(the_store_chooses_the_turn_batch_unless_the_options_do)
{
    CHECK_EQ(batch_asked(11, 3, 0), 3);
    CHECK_EQ(batch_asked(11, 3, 2), 2);
    CHECK_EQ(batch_asked(11, 0, 0), 16);
    CHECK_EQ(batch_asked(10, 3, 0), 16);
}

/* Turns acked together whose common ack committed but was reported as
 * failed (the reply was lost): each turn's own ack then finds its lock
 * gone and the turn is discarded (it is in the store; the kept engine is
 * dropped, the next turn replays); the next items the lost reply carried
 * come back when their locks expire. Nothing runs twice, nothing is
 * lost. */
TEST(committed_batched_turn_acks_reported_as_failed)
{
    rt_fixture f;
    init_faulty(&f, "rtf_batch_committed.db");
    f.opts.orchestration_lock_timeout_ms = 1000; /* lost items come back */
    /* One turn thread, batches of 2: its first fetch takes 2 of the STARTs
     * (4 or 6), so its first ack finds 2 more ready and returns them as
     * next items - whose loss the first fault needs - whatever the timing.
     * (With two turn threads the first fetches could take all 4 STARTs of
     * a sanitizer build, and the acks then find next items only if
     * activities happened to complete in time: under load, once in ~30
     * runs, none did before the chains reached their gates.) */
    f.opts.orchestration_concurrency = 1;
    f.opts.orchestration_batch = 2;
    duro_provider *w = open_faulty(&f, 7);
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    plan(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS, 1,
         FAULTY_AFTER_COMMIT_WITH_ITEM);
    plan(w, FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS, 0, FAULTY_AFTER_COMMIT);
    run_faulty(&f, w);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    CHECK_INT(faulty_provider_items_discarded(w), >=, 1);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("acking them one by one"), 2);
    /* each turn of the two lost replies was taken as probably committed,
     * not retried, and logged at DEBUG (a WARN alarmed operators after
     * killed backends, though the turns were in the store) */
    const char *gone = "its lock is gone after the common ack failed, which "
                       "probably committed it";
    CHECK_INT(rt_log_hits_at(DURO_LOG_DEBUG, gone), >=, 2);
    CHECK_EQ(rt_log_hits("discarded: "), 0);
    CHECK_EQ(rt_log_hits("could not be committed"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.poison_messages, 0);
    CHECK_EQ(m.orchestrations_failed, 0);
    done_faulty(&f, w);
}

/* Turns acked together whose common ack fails DURO_LOCK_LOST (certain to
 * have changed nothing) and one of which then loses its lock when acked
 * alone: that turn is discarded at WARN, as a lost lock is, and not taken
 * for a commit whose reply was lost. It comes back when its lock expires. */
TEST(a_batched_turn_whose_lock_is_lost_is_discarded_at_warn)
{
    rt_fixture f;
    init_faulty(&f, "rtf_batch_lock_lost.db");
    f.opts.orchestration_lock_timeout_ms = 1000; /* the lost one comes back */
    duro_provider *w = open_faulty(&f, 7);
    CHECK_OK(duro_client_create(f.url, &f.client));
    start_chains(&f, CHAIN_INSTANCES);
    const faulty_fault common = {.method =
                                     FAULTY_ACK_AND_FETCH_ORCHESTRATION_ITEMS,
                                 .nth = 1,
                                 .code = DURO_LOCK_LOST};
    const faulty_fault alone = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                                .nth = 1,
                                .code = DURO_LOCK_LOST};
    CHECK(faulty_provider_queue_fault(w, &common));
    CHECK(faulty_provider_queue_fault(w, &alone));
    run_faulty(&f, w);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("acking them one by one"), 1);
    CHECK_EQ(rt_log_hits_at(DURO_LOG_WARN, "discarded: "), 1);
    CHECK_EQ(rt_log_hits("which probably committed it"), 0);
    done_faulty(&f, w);
}

/* Holds the first activity a slot fetches until another row is queued, so
 * that the slot's ack-and-fetch locks a next item. */
static _Atomic int held_once;

static void hold_until_backlog(void *arg)
{
    duro_provider *inner = arg;
    if (atomic_exchange(&held_once, 1))
        return;
    int64_t end = test_now_ms() + WAIT_MS;
    uint64_t n = 0;
    duro_error err;
    while (test_now_ms() < end &&
           (inner->count_messages(inner, DURO_QUEUE_WORKER, NULL, &n, &err) !=
                DURO_OK ||
            n < 2))
        test_sleep_ms(1);
}

/* A committed activity ack reported as failed: a retryable report makes
 * the slot retry, which finds the row gone (DURO_LOCK_LOST) - the outcome
 * is unknown to the runtime, and it must neither count the activity as
 * cancelled nor run it again; a permanent report abandons a row that is
 * already gone. The completion was enqueued exactly once either way. A lost
 * next item (combined call) stays locked until its lock expires, then runs
 * for the first time. */
static void committed_activity_acks(int version, const char *db)
{
    rt_fixture f;
    init_faulty(&f, db);
    f.opts.worker_lock_timeout_ms = 1000; /* lost items come back */
    f.opts.lock_renewal_ms = 100;
    f.opts.worker_concurrency = 1; /* rows queue up behind the one slot */
    duro_provider *w = open_faulty(&f, version);
    int method =
        version >= 2 ? FAULTY_ACK_AND_FETCH_WORK_ITEM : FAULTY_ACK_WORK_ITEM;
    atomic_store(&held_once, 0);
    faulty_provider_on_work_fetched(w, hold_until_backlog,
                                    faulty_provider_inner(w));
    if (version >= 2)
        plan(w, method, 0, FAULTY_AFTER_COMMIT_WITH_ITEM);
    plan(w, method, 1, FAULTY_AFTER_COMMIT);
    plan(w, method, 0, FAULTY_AFTER_COMMIT);
    uint64_t faults = version >= 2 ? 3 : 2;
    run_faulty(&f, w);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == faults, WAIT_MS);
    /* the after-commit faults on combined calls may lose next items too */
    CHECK_INT(faulty_provider_items_discarded(w), >=, version >= 2 ? 1 : 0);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("may have committed"), 1);
    CHECK_EQ(rt_log_hits("injected permanent failure of"), (int)faults - 1);
    CHECK_EQ(rt_log_hits("dropped: its row is gone"), 0);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_INT(m.storage_retries, >=, 1);
    CHECK_EQ(m.activities_cancelled, 0);
    /* a completion whose ack reply was lost is not counted */
    CHECK_EQ(m.activities_completed + faults,
             (uint64_t)(CHAIN_INSTANCES * CHAIN_STEPS));
    done_faulty(&f, w);
}

TEST(committed_activity_ack_and_fetch_reported_as_failed)
{
    committed_activity_acks(2, "rtf_committed_work_v2.db");
}

TEST(committed_activity_acks_reported_as_failed_version_1)
{
    committed_activity_acks(1, "rtf_committed_work_v1.db");
}

/* A client start or raise that committed but reported failure: the start
 * is there (a plain retry gets DURO_ALREADY_EXISTS, an idempotent retry
 * DURO_OK) and the event was delivered (a caller that retried it would
 * deliver it twice: events carry no identity the store could check). */
TEST(committed_client_calls_reported_as_failed)
{
    rt_fixture f;
    init_faulty(&f, "rtf_committed_client.db");
    duro_provider *w = start_faulty(&f, 2);
    duro_client *c = NULL;
    CHECK_OK(duro_client_create_with_provider(w, &c));
    duro_start_options idem;
    duro_start_options_init(&idem);
    idem.idempotent = 1;
    for (int i = 0; i < CHAIN_INSTANCES; i++) {
        const char *id = instance_name(i);
        if (i < 2) {
            faulty_provider_arm(w, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 1, 1,
                                i == 0, FAULTY_AFTER_COMMIT);
            CHECK_RC(duro_client_start(c, id, "Chain", instance_input(i), NULL),
                     i == 0 ? DURO_BUSY : DURO_STORAGE);
            CHECK_RC(duro_client_start(c, id, "Chain", instance_input(i), NULL),
                     DURO_ALREADY_EXISTS);
            CHECK_OK(
                duro_client_start(c, id, "Chain", instance_input(i), &idem));
        } else {
            CHECK_OK(
                duro_client_start(c, id, "Chain", instance_input(i), NULL));
        }
    }
    for (int i = 0; i < CHAIN_INSTANCES; i++) {
        const char *id = instance_name(i);
        WAIT_UNTIL(rt_count_events(&f, id, DURO_EVENT_EVENT_SUBSCRIBED) == 1,
                   WAIT_MS);
        if (i < 2) {
            faulty_provider_arm(w, FAULTY_ENQUEUE_FOR_ORCHESTRATOR, 1, 1,
                                i == 0, FAULTY_AFTER_COMMIT);
            CHECK_RC(duro_client_raise_event(c, id, "finish", "done"),
                     i == 0 ? DURO_BUSY : DURO_STORAGE);
        } else {
            CHECK_OK(duro_client_raise_event(c, id, "finish", "done"));
        }
    }
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(fired(w), 4);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    duro_client_destroy(c);
    done_faulty(&f, w);
}

/* A fetch that locked an item and lost its reply: the item comes back when
 * its lock expires (delivery 2) and runs once. */
TEST(lost_fetch_replies_come_back_after_the_lock_expires)
{
    rt_fixture f;
    init_faulty(&f, "rtf_lost_fetch.db");
    f.opts.orchestration_lock_timeout_ms = 1000;
    f.opts.worker_lock_timeout_ms = 1000;
    f.opts.lock_renewal_ms = 100;
    duro_provider *w = start_faulty(&f, 2);
    plan(w, FAULTY_FETCH_ORCHESTRATION_ITEM, 1, FAULTY_AFTER_COMMIT_WITH_ITEM);
    plan(w, FAULTY_FETCH_WORK_ITEM, 0, FAULTY_AFTER_COMMIT_WITH_ITEM);
    start_chains(&f, CHAIN_INSTANCES);
    WAIT_UNTIL(fired(w) == 2, WAIT_MS);
    CHECK_EQ(faulty_provider_items_discarded(w), 2);
    finish_chains(&f, CHAIN_INSTANCES);
    check_chains(&f, CHAIN_INSTANCES);
    CHECK_EQ(atomic_load(&add_runs), CHAIN_INSTANCES * CHAIN_STEPS);
    CHECK_EQ(rt_log_hits("failure of fetch_orchestration_item after it "
                         "committed"),
             1);
    CHECK_EQ(rt_log_hits("failure of fetch_work_item after it committed"), 1);
    done_faulty(&f, w);
}

/* ------------------------------------------------------------------------
 * 2. engine-cache eviction */

typedef struct eviction_run {
    size_t cache_size; /* (size_t)-1: the default */
    duro_metrics m;
    char *output[EVICT_INSTANCES];
    duro_history *history[EVICT_INSTANCES];
} eviction_run;

/* Creates every instance before the runtime starts, so all first turns
 * come before any second turn: with a cache of one or two engines, most
 * instances find theirs evicted at their second turn. */
static void run_steps(eviction_run *r, const char *db)
{
    rt_fixture f;
    rt_init(&f, db);
    register_all(&f);
    f.opts.orchestration_lock_timeout_ms = 30000;
    f.opts.worker_lock_timeout_ms = 30000;
    f.opts.lock_renewal_ms = 1000;
    if (r->cache_size != (size_t)-1)
        f.opts.fiber_cache_size = r->cache_size;
    CHECK_OK(duro_client_create(f.url, &f.client));
    ping_client = f.client;
    for (int i = 0; i < EVICT_INSTANCES; i++)
        rt_start_instance(&f, instance_name(i), "Steps", instance_input(i));
    rt_start(&f);
    for (int i = 0; i < EVICT_INSTANCES; i++) {
        duro_instance_info *info = rt_wait(&f, instance_name(i), WAIT_MS);
        CHECK_MSG(info->status == DURO_STATUS_COMPLETED, "%s: %s (%s)",
                  instance_name(i), duro_status_name(info->status),
                  or_null(info->error));
        r->output[i] = strdup(info->output ? info->output : "");
        duro_free(info);
        r->history[i] = rt_history(&f, instance_name(i));
        check_history_sane(r->history[i], instance_name(i));
    }
    rt_final_metrics(&f, &r->m);
    rt_done(&f);
    ping_client = NULL;
}

TEST(engine_cache_eviction_keeps_histories_identical)
{
    static eviction_run runs[4];
    const size_t sizes[4] = {0, 1, 2, (size_t)-1};
    const int n = EVICT_INSTANCES;
    for (int r = 0; r < 4 && !test_failed(); r++) {
        char db[64];
        snprintf(db, sizeof(db), "rtf_evict_%d.db", r);
        memset(&runs[r], 0, sizeof(runs[r]));
        runs[r].cache_size = sizes[r];
        run_steps(&runs[r], db);
    }
    for (int r = 0; r < 4 && !test_failed(); r++) {
        const duro_metrics *m = &runs[r].m;
        /* every turn but an instance's first resumes a kept engine or
         * replays */
        CHECK_MSG(m->fiber_cache_hits + m->replays + (uint64_t)n == m->turns,
                  "cache %d: %llu hits + %llu replays + %d first turns != "
                  "%llu turns",
                  (int)sizes[r], (unsigned long long)m->fiber_cache_hits,
                  (unsigned long long)m->replays, n,
                  (unsigned long long)m->turns);
        switch (r) {
        case 0: /* nothing is kept */
            CHECK_EQ(m->fiber_cache_hits, 0);
            CHECK_INT(m->replays, >, 0);
            break;
        case 1:
        case 2: /* all first turns come first: most second turns replay;
                   the last instance's last turn finds its engine */
            CHECK_INT(m->replays, >=, n / 2);
            CHECK_INT(m->fiber_cache_hits, >=, 1);
            break;
        default: /* nothing is evicted */
            CHECK_EQ(m->replays, 0);
            break;
        }
        for (int i = 0; i < n; i++) {
            CHECK_STR(runs[r].output[i], runs[0].output[i]);
            check_same_history(runs[r].history[i], runs[0].history[i],
                               instance_name(i));
        }
    }
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < n; i++) {
            free(runs[r].output[i]);
            duro_history_free(runs[r].history[i]);
        }
}

TEST_MAIN(T(orchestration_fetch_errors_back_off_and_recover),
          T(activity_fetch_errors_back_off_and_recover),
          T(alternating_fetch_failures_are_warned_at_most_once_per_interval),
          T(orchestration_ack_and_fetch_errors_retry_or_abandon_the_turn),
          T(orchestration_ack_errors_retry_or_abandon_the_turn_version_1),
          T(retryable_ack_errors_count_toward_poison),
          T(a_store_refusing_every_turn_says_the_instance_cannot_progress),
          T(refused_activity_results_say_the_instance_cannot_progress),
          T(activity_ack_errors_are_retried_in_place),
          T(activity_ack_retries_outlast_a_long_outage_within_the_lock),
          T(activity_ack_retries_end_at_the_lock_deadline),
          T(activity_ack_retries_end_a_lock_timeout_after_the_first_failure),
          T(abandon_after_failed_acks_and_failed_abandons),
          T(shutdown_says_whether_an_unfinished_activity_went_back),
          T(dropping_a_batch_survives_ack_errors),
          T(history_read_errors_abandon_the_turn),
          T(lock_lost_acks_discard_the_turn_or_the_completion),
          T(client_wait_rides_out_retryable_store_failures),
          T(history_limit_from_the_store_fails_the_instance),
          T(committed_orchestration_ack_and_fetch_reported_as_failed),
          T(committed_orchestration_acks_reported_as_failed_version_1),
          T(committed_activity_ack_and_fetch_reported_as_failed),
          T(committed_activity_acks_reported_as_failed_version_1),
          T(committed_client_calls_reported_as_failed),
          T(batched_turn_ack_errors_fall_back_to_one_turn_acks),
          T(a_batch_over_the_history_cap_fails_no_instance_by_itself),
          T(committed_batched_turn_acks_reported_as_failed),
          T(the_store_chooses_the_turn_batch_unless_the_options_do),
          T(a_batched_turn_whose_lock_is_lost_is_discarded_at_warn),
          T(lost_fetch_replies_come_back_after_the_lock_expires),
          T(engine_cache_eviction_keeps_histories_identical))
