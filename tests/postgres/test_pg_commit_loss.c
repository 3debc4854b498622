/* test_pg_commit_loss.c - a runtime on the PostgreSQL provider whose
 * connections drop around COMMITs (duro__pg_inject_commit_loss): every
 * third write commit until LOSSES of them were lost, after the COMMIT (it
 * stood) in one run and before it (rolled back) in the other. The runtime
 * cannot tell the two apart and must read such a failure as "maybe
 * committed" (provider.h): every instance completes with the output a run
 * without losses gives, its history holds each event once (one completion
 * per activity), nothing stays queued, and no finished instance shows a
 * problem. Main thread, plus the runtime's threads. */
#include <stdlib.h>
#include <unistd.h>

#include "pg_util.h"
#include "providers/postgres/pg_provider.h"
#include "rt_util.h"

#define INSTANCES 6
#define STEPS 5   /* fan-outs in a row */
#define FAN 3     /* activities per fan-out, awaited together */
#define LOSSES 40 /* connections dropped per run */
#define WAIT_MS 120000

static _Atomic int add_runs;

static long long add(long long v)
{
    return (v * 7 + 3) % 1000003;
}

static int act_add(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    atomic_fetch_add(&add_runs, 1);
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", add(in ? strtoll(in, NULL, 10) : 0));
    return duro_ok(out, buf);
}

/* STEPS fan-outs of FAN activities (each step's value is the sum of its
 * activities' outputs), then a wait for the event "finish": the gate
 * behind which the test lines up every instance's last turn. */
static int orch_fan(duro_orch *o, const char *in, duro_result *out)
{
    long long acc = strtoll(in, NULL, 10);
    for (int step = 0; step < STEPS; step++) {
        duro_task *t[FAN];
        for (int k = 0; k < FAN; k++)
            t[k] =
                duro_call_activity(o, "Add", duro_sprintf(o, "%lld", acc + k));
        long long sum = 0;
        for (int k = 0; k < FAN; k++) {
            if (duro_await(o, t[k]) != DURO_OK)
                return duro_fail(out, duro_task_error(t[k]));
            sum += strtoll(duro_task_output(t[k]), NULL, 10);
        }
        acc = sum % 1000003;
    }
    duro_await(o, duro_wait_event(o, "finish"));
    return duro_ok(out, duro_sprintf(o, "%lld", acc));
}

static const char *expected_output(int instance)
{
    static char buf[32];
    long long acc = instance;
    for (int step = 0; step < STEPS; step++) {
        long long sum = 0;
        for (int k = 0; k < FAN; k++)
            sum += add(acc + k);
        acc = sum % 1000003;
    }
    snprintf(buf, sizeof(buf), "%lld", acc);
    return buf;
}

#define EVENTS (2 * STEPS * FAN + 4)

/* Dense ids: Started, STEPS * FAN activities each scheduled once and
 * completed once, then the gate's EventSubscribed and EventRaised, and
 * Completed; nothing else. */
static void check_history(const duro_history *h, const char *id)
{
    static const duro_event_kind tail[] = {DURO_EVENT_EVENT_SUBSCRIBED,
                                           DURO_EVENT_EVENT_RAISED,
                                           DURO_EVENT_ORCHESTRATION_COMPLETED};
    CHECK_MSG(h->count == EVENTS, "%s: %zu events, expected %d", id, h->count,
              EVENTS);
    if (h->count != EVENTS)
        return;
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(h->events[EVENTS - 3 + i].kind == tail[i],
                  "%s: event %zu is %s", id, EVENTS - 2 + i,
                  duro_event_kind_name(h->events[EVENTS - 3 + i].kind));
    int completions[EVENTS + 1] = {0};
    for (size_t i = 0; i < EVENTS; i++) {
        const duro_event *e = &h->events[i];
        CHECK_EQ(e->event_id, i + 1);
        if (i == 0 || i >= EVENTS - 3)
            continue;
        CHECK_MSG(e->kind == DURO_EVENT_ACTIVITY_SCHEDULED ||
                      e->kind == DURO_EVENT_ACTIVITY_COMPLETED,
                  "%s: event %zu is %s", id, i + 1,
                  duro_event_kind_name(e->kind));
        uint64_t src = e->source_event_id;
        if (e->kind != DURO_EVENT_ACTIVITY_COMPLETED)
            continue;
        CHECK_MSG(src >= 1 && src < e->event_id &&
                      h->events[src - 1].kind == DURO_EVENT_ACTIVITY_SCHEDULED,
                  "%s: event %zu completes event %llu", id, i + 1,
                  (unsigned long long)src);
        if (src >= 1 && src < e->event_id)
            completions[src]++;
    }
    for (size_t i = 0; i < EVENTS; i++)
        if (h->events[i].kind == DURO_EVENT_ACTIVITY_SCHEDULED)
            CHECK_MSG(completions[i + 1] == 1,
                      "%s: activity %zu completed %d times", id, i + 1,
                      completions[i + 1]);
}

static const char *instance_id(int i)
{
    static char ids[INSTANCES][16];
    snprintf(ids[i], sizeof(ids[i]), "f%d", i);
    return ids[i];
}

/* How many instances wait at the gate (phase 0) or have finished
 * (phase 1); reads only. */
static int instances_at(duro_provider *p, int phase)
{
    int n = 0;
    for (int i = 0; i < INSTANCES; i++) {
        duro_history *h = NULL;
        duro_error e;
        if (p->read_history(p, instance_id(i), 0, &h, &e) != DURO_OK)
            continue;
        int kind = phase == 0 ? DURO_EVENT_EVENT_SUBSCRIBED
                              : DURO_EVENT_ORCHESTRATION_COMPLETED;
        n += rt_count_kind(h, kind) > 0 ||
             (phase == 0 &&
              rt_count_kind(h, DURO_EVENT_ORCHESTRATION_COMPLETED) > 0);
        duro_history_free(h);
    }
    return n;
}

/* Drops a connection at every `every`-th commit (the first at the
 * `first`-th from now; 0: as already armed) until `most` were dropped or
 * every instance reached `phase` (instances_at); returns how many were
 * dropped meanwhile. */
static uint64_t inject_losses(duro_provider *p, int committed, int first,
                              int every, uint64_t most, int phase)
{
    uint64_t base = duro__pg_commit_losses(p), fired = 0;
    int64_t deadline = test_now_ms() + WAIT_MS;
    if (first > 0)
        duro__pg_inject_commit_loss(p, (uint64_t)first, committed);
    for (int64_t now = test_now_ms(), next_check = now;
         fired < most && now < deadline; now = test_now_ms()) {
        uint64_t n = duro__pg_commit_losses(p) - base;
        if (n > fired) {
            fired = n;
            if (fired < most)
                duro__pg_inject_commit_loss(p, (uint64_t)every, committed);
            continue;
        }
        if (now >= next_check) {
            if (instances_at(p, phase) == INSTANCES)
                break;
            next_check = now + 20;
        }
        test_sleep_ms(1);
    }
    duro__pg_inject_commit_loss(p, 0, 0);
    return duro__pg_commit_losses(p) - base;
}

static void run_with_losses(int committed)
{
    char schema[64], url[4200];
    snprintf(schema, sizeof(schema), "pgloss_%ld_%d", (long)getpid(),
             committed);
    snprintf(url, sizeof(url), "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
    duro_provider *p = NULL;
    duro_error err;
    CHECK_PRC(duro_provider_open(url, &p, &err), DURO_OK, &err);
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    CHECK_OK(duro_registry_add_activity(reg, "Add", act_add, NULL));
    CHECK_OK(duro_registry_add_orchestration(reg, "Fan", NULL, orch_fan, NULL));
    duro_runtime_options o;
    rt_default_options(&o);
    o.orchestration_lock_timeout_ms = 1000; /* lost items come back soon */
    o.worker_lock_timeout_ms = 1000;
    o.lock_renewal_ms = 200;
    /* few idle fetches, so that most losses hit turns and activities: a
     * wait ends at a commit of this process, or when a lock expires */
    o.orchestration_concurrency = 2;
    o.worker_concurrency = 2;
    o.poll_interval_ms = 1000;
    /* Losses are injected on purpose, up to every second commit: an
     * instance whose claims keep being the lost commits is re-delivered
     * more often than the default max_attempts (10) and would end as
     * poison. Poison handling is tested elsewhere (test_orch_faults); here
     * every instance must complete. */
    o.max_attempts = 1000;
    o.log_level = DURO_LOG_DEBUG;
    o.log_fn = rt_log_sink;
    rt_log_reset();
    atomic_store(&add_runs, 0);
    duro_runtime *rt = NULL;
    duro_client *c = NULL; /* on its own provider: its commits are not lost */
    CHECK_OK(duro_client_create(url, &c));
    for (int i = 0; i < INSTANCES; i++) {
        char in[16];
        snprintf(in, sizeof(in), "%d", i);
        CHECK_OK(duro_client_start(c, instance_id(i), "Fan", in, NULL));
    }
    CHECK_OK(duro_runtime_create_with_provider(p, reg, &o, &rt));
    CHECK_OK(duro_runtime_start(rt));
    /* the fan-outs: every third commit until LOSSES were lost */
    uint64_t steps_lost = inject_losses(p, committed, 3, 3, LOSSES, 0);
    WAIT_UNTIL(instances_at(p, 0) == INSTANCES, WAIT_MS);
    /* the last turns, lined up: the first commit after the events (which
     * may carry every last turn at once, batched), then every second. The
     * losses are counted from here: one may fire while the events are
     * raised, before inject_losses begins to count. */
    uint64_t ends_base = duro__pg_commit_losses(p);
    duro__pg_inject_commit_loss(p, 1, committed);
    for (int i = 0; i < INSTANCES; i++)
        CHECK_OK(duro_client_raise_event(c, instance_id(i), "finish", "go"));
    inject_losses(p, committed, 0, 2, LOSSES, 1);
    uint64_t ends_lost = duro__pg_commit_losses(p) - ends_base;
    for (int i = 0; i < INSTANCES; i++) {
        const char *id = instance_id(i);
        duro_instance_info *info = NULL;
        CHECK_OK(duro_client_wait(c, id, WAIT_MS, &info));
        CHECK_MSG(info->status == DURO_STATUS_COMPLETED, "%s is %s: %s", id,
                  duro_status_name(info->status),
                  info->error ? info->error : "");
        CHECK_STR(info->output, expected_output(i));
        /* a turn whose commit was lost after it committed is not a
         * problem, and a finished instance shows none */
        CHECK_MSG(info->last_problem == NULL, "%s shows a problem: %s", id,
                  info->last_problem ? info->last_problem : "");
        duro_free(info);
        duro_history *h = NULL;
        CHECK_PRC(p->read_history(p, id, 0, &h, &err), DURO_OK, &err);
        check_history(h, id);
        duro_history_free(h);
    }
    fprintf(stderr,
            "  %s: %llu + %llu connections dropped; logged: %d failed turn "
            "acks, %d activity acks of unknown outcome, %d failed fetches; "
            "%d activity runs for %d activities\n",
            committed ? "after COMMIT" : "before COMMIT",
            (unsigned long long)steps_lost, (unsigned long long)ends_lost,
            rt_log_hits("ack of instance"), rt_log_hits("may have committed"),
            rt_log_hits("work failed: postgres"), atomic_load(&add_runs),
            INSTANCES * STEPS * FAN);
    CHECK(steps_lost > 0 && ends_lost > 0);
    CHECK_INT(atomic_load(&add_runs), >=, INSTANCES * STEPS * FAN);
    duro_runtime_destroy(rt);
    uint64_t queued = 1;
    CHECK_PRC(
        p->count_messages(p, DURO_QUEUE_ORCHESTRATOR, NULL, &queued, &err),
        DURO_OK, &err);
    CHECK_EQ(queued, 0);
    CHECK_PRC(p->count_messages(p, DURO_QUEUE_WORKER, NULL, &queued, &err),
              DURO_OK, &err);
    CHECK_EQ(queued, 0);
    duro_client_destroy(c);
    duro_registry_destroy(reg);
    duro_provider_close(p);
    pg_test_drop_schema(schema);
}

TEST(runtime_survives_connections_lost_after_commit)
{
    run_with_losses(1);
}

TEST(runtime_survives_connections_lost_before_commit)
{
    run_with_losses(0);
}

TEST_MAIN(T(runtime_survives_connections_lost_after_commit),
          T(runtime_survives_connections_lost_before_commit))
