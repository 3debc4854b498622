/* schedule_firing.c - the runtime's firing thread: reads the store's due
 * schedules, plans each with the pure planner (core/schedule_plan.h) from its
 * stored state, and writes the plan with apply_schedule's compare-and-set,
 * so that of every runtime planning the same state one writes it and the
 * others, refused (DURO_CONFLICT), read again. Then it sleeps until the
 * earliest next due time, a change of a schedule in this process
 * (duro__schedules_poke) or poll_interval_ms, for other processes. Owns
 * one thread per runtime; never calls user code. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/schedule_spec.h"
#include "runtime/runtime.h"

/* Actions planned per schedule at once: a longer plan (a long catch-up)
 * goes on in the next round at once. */
#define PLAN_MAX 64
/* Due schedules read per round. */
#define DUE_MAX 64
/* Compiled specs kept (all dropped when full). */
#define CACHE_MAX 256

/* ---- the wake-up of every firing thread of the process ------------------ */

static pthread_mutex_t poke_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poke_cond;
static pthread_once_t poke_once = PTHREAD_ONCE_INIT;
static uint64_t poke_generation; /* under poke_lock */

static void poke_init(void)
{
    duro__cond_init_monotonic(&poke_cond);
}

void duro__schedules_poke(void)
{
    pthread_once(&poke_once, poke_init);
    pthread_mutex_lock(&poke_lock);
    poke_generation++;
    pthread_cond_broadcast(&poke_cond);
    pthread_mutex_unlock(&poke_lock);
}

static uint64_t poke_read(void)
{
    pthread_once(&poke_once, poke_init);
    pthread_mutex_lock(&poke_lock);
    uint64_t g = poke_generation;
    pthread_mutex_unlock(&poke_lock);
    return g;
}

/* Waits up to ms, less when poked after generation `seen` was read. */
static void poke_wait(uint64_t seen, int64_t ms)
{
    struct timespec ts;
    duro__deadline_ts(&ts, ms);
    pthread_mutex_lock(&poke_lock);
    while (poke_generation == seen &&
           pthread_cond_timedwait(&poke_cond, &poke_lock, &ts) == 0)
        ;
    pthread_mutex_unlock(&poke_lock);
}

/* ---- compiled specs, by schedule id and spec version -------------------- */

typedef struct cached {
    char *id;
    int64_t spec_version;
    duro_arena *arena; /* the spec's strings */
    duro_schedule_spec spec;
    duro__schedule_compiled compiled;
} cached;

struct duro__schedules {
    duro_runtime *rt;
    pthread_t thread;
    int started;
    cached entries[CACHE_MAX];
    size_t count;
};

static void cache_clear(duro__schedules *s)
{
    for (size_t i = 0; i < s->count; i++) {
        duro__free(s->entries[i].id);
        duro_arena_destroy(s->entries[i].arena);
        duro__schedule_compiled_free(&s->entries[i].compiled);
    }
    s->count = 0;
}

/* The compiled spec of r; NULL (logged) when it cannot be compiled. */
static const cached *compiled_of(duro__schedules *s,
                                 const duro_schedule_record *r)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].spec_version == r->spec_version &&
            strcmp(s->entries[i].id, r->id) == 0)
            return &s->entries[i];
    if (s->count == CACHE_MAX)
        cache_clear(s);
    cached *c = &s->entries[s->count];
    memset(c, 0, sizeof(*c));
    duro_error err;
    duro_error_clear(&err);
    c->id = duro__strdup(r->id);
    c->arena = duro_arena_create();
    int rc = c->id == NULL || c->arena == NULL
                 ? duro_error_set(&err, DURO_NOMEM, 0, "out of memory")
                 : duro__schedule_spec_parse(r->spec, c->arena, &c->spec, &err);
    if (rc == DURO_OK)
        rc = duro__schedule_compile(c->id, &c->spec, &c->compiled, &err);
    if (rc != DURO_OK) {
        duro__log(&s->rt->logger, DURO_LOG_ERROR,
                  "schedule '%s' cannot fire: %s", r->id, err.message);
        duro__free(c->id);
        duro_arena_destroy(c->arena);
        return NULL;
    }
    c->spec_version = r->spec_version;
    s->count++;
    return c;
}

/* ---- one schedule ------------------------------------------------------- */

/* Plans r at now and applies the plan. *again = 1 when the plan was cut at
 * PLAN_MAX actions (more is due). */
static void fire_one(duro__schedules *s, const duro_schedule_record *r,
                     int64_t now, int *again)
{
    duro_runtime *rt = s->rt;
    const cached *c = compiled_of(s, r);
    if (c == NULL)
        return;
    const duro__schedule_rule *rule = &c->compiled.rule;
    duro__schedule_state state = {r->next_ms, r->buffered_ms,
                                  duro__status_is_live(r->last_status)};
    duro__fire_action plan[PLAN_MAX];
    duro__schedule_state after;
    size_t n = duro__schedule_plan(rule, &state, now, plan, PLAN_MAX, &after);
    if (n == 0 && after.next_ms == r->next_ms &&
        after.buffered_ms == r->buffered_ms)
        return; /* a buffered fire waits for the last instance to end */
    if (n == PLAN_MAX)
        *again = 1;

    static _Thread_local char ids[PLAN_MAX][DURO__FIRE_ID_MAX];
    char reason[DURO_SCHEDULE_ID_MAX + 40], by[DURO_SCHEDULE_ID_MAX + 16];
    snprintf(reason, sizeof(reason), "schedule %s: overlap policy", r->id);
    snprintf(by, sizeof(by), "schedule:%s", r->id);
    duro_schedule_action acts[PLAN_MAX];
    const char *last = r->last_instance_id;
    uint64_t starts = 0, skips = 0;
    int64_t lag = 0;
    for (size_t i = 0; i < n; i++) {
        duro_schedule_action *a = &acts[i];
        memset(a, 0, sizeof(*a));
        a->kind = plan[i].kind;
        a->time_ms = plan[i].time_ms;
        a->count = plan[i].kind == DURO__FIRE_SKIP ? plan[i].count : 1;
        a->why = plan[i].why;
        if (a->kind == DURO_SCHEDULE_START) {
            duro__schedule_fire_id(r->id, a->time_ms, 0, ids[i]);
            a->instance_id = ids[i];
            a->name = c->spec.orchestration;
            a->version = c->spec.orchestration_version;
            a->input = c->spec.input;
            last = ids[i];
            starts++;
            int64_t late =
                now - (a->time_ms + duro__schedule_jitter(rule, a->time_ms));
            if (late > lag)
                lag = late;
        } else if (a->kind == DURO_SCHEDULE_STOP_LAST) {
            /* The planner stops only a live last instance: there is one. */
            a->instance_id = last != NULL ? last : "";
            a->terminate = rule->overlap == DURO__OVERLAP_TERMINATE_OTHER;
            a->reason = reason;
            a->requested_by = by;
        } else if (a->kind == DURO_SCHEDULE_SKIP) {
            /* -1 (more than the planner counts) as the store counts it */
            skips += a->count > 0 ? (uint64_t)a->count : 1;
        }
    }
    duro_schedule_record next;
    memset(&next, 0, sizeof(next));
    next.id = r->id;
    next.next_ms = after.next_ms;
    next.buffered_ms = after.buffered_ms;
    next.due_ms = duro__schedule_due(rule, after.next_ms, after.buffered_ms);
    /* A start's deadline runs from its start, which the store records when
     * it applies the plan: read the clock again now, not at the round's
     * beginning (the due schedules were read and the plan made since; a
     * test's virtual clock may have been moved meanwhile). */
    int64_t start_ms = duro__wall_ms();
    for (size_t i = 0; i < n && c->spec.timeout_ms > 0; i++)
        if (acts[i].kind == DURO_SCHEDULE_START)
            acts[i].deadline_ms = duro__add_ms(start_ms, c->spec.timeout_ms);
    duro_error err;
    duro_error_clear(&err);
    int rc = rt->provider->apply_schedule(rt->provider, r->id, r->row_version,
                                          acts, n, &next, NULL, &err);
    if (rc == DURO_OK) {
        atomic_fetch_add_explicit(&rt->metrics.m_schedule_fires, starts,
                                  memory_order_relaxed);
        atomic_fetch_add_explicit(&rt->metrics.m_schedule_skips, skips,
                                  memory_order_relaxed);
        int64_t prev = atomic_load_explicit(&rt->metrics.m_schedule_lag_max_ms,
                                            memory_order_relaxed);
        while (starts > 0 && lag > prev &&
               !atomic_compare_exchange_weak(&rt->metrics.m_schedule_lag_max_ms,
                                             &prev, lag))
            ;
        if (starts > 0)
            atomic_store_explicit(&rt->metrics.m_schedule_lag_last_ms, lag,
                                  memory_order_relaxed);
    } else if (rc != DURO_CONFLICT && rc != DURO_NOT_FOUND) {
        /* CONFLICT: another runtime applied its plan of this state first;
         * NOT_FOUND: deleted meanwhile. Both are read again next round.
         * A failure is logged as the turn threads' fetches are: once per
         * outage at WARN (ERROR), the rest at DEBUG. */
        duro__runtime_storage_failed(rt, DURO_QUEUE_ORCHESTRATOR,
                                     "applying a schedule's fires", &err,
                                     rt->opts.poll_interval_ms);
    }
}

/* One round: every due schedule. *next_due: the earliest due time after
 * now (0: none); *again: go on at once. */
static int round_once(duro__schedules *s, int64_t now, int64_t *next_due,
                      int *again)
{
    duro_runtime *rt = s->rt;
    duro_schedule_list *due = NULL;
    duro_error err;
    duro_error_clear(&err);
    int rc =
        rt->provider->due_schedules(rt->provider, now, DUE_MAX, &due, &err);
    if (rc != DURO_OK) {
        duro__runtime_storage_failed(rt, DURO_QUEUE_ORCHESTRATOR,
                                     "reading the due schedules", &err,
                                     rt->opts.poll_interval_ms);
        return rc;
    }
    duro__runtime_storage_ok(rt, DURO_QUEUE_ORCHESTRATOR);
    *next_due = due->next_due_ms;
    /* Planned at the earlier of the two clock readings: a clock set back
     * meanwhile (a test's virtual clock) must not make a schedule created
     * after it due at the time read before. */
    int64_t after = duro__wall_ms();
    if (after < now)
        now = after;
    for (size_t i = 0; i < due->count && !atomic_load(&rt->stop_flag); i++)
        fire_one(s, &due->items[i], now, again);
    duro_schedule_list_free(due);
    return DURO_OK;
}

static void *schedule_thread(void *arg)
{
    duro__schedules *s = arg;
    duro_runtime *rt = s->rt;
    duro__mark_runtime_thread();
    while (!atomic_load(&rt->stop_flag)) {
        uint64_t seen = poke_read();
        int64_t now = duro__wall_ms();
        int64_t next_due = 0;
        int again = 0;
        round_once(s, now, &next_due, &again);
        if (again || atomic_load(&rt->stop_flag))
            continue;
        int64_t wait = rt->opts.poll_interval_ms;
        if (next_due > 0) {
            int64_t until = next_due - duro__wall_ms();
            if (until < wait)
                wait = until > 0 ? until : 0;
        }
        if (wait > 0)
            poke_wait(seen, wait);
    }
    cache_clear(s);
    return NULL;
}

int duro__schedules_start(duro_runtime *rt)
{
    duro_provider *p = rt->provider;
    if (!rt->opts.schedules || rt->opts.orchestration_concurrency == 0 ||
        p->version < 13 || p->due_schedules == NULL ||
        p->apply_schedule == NULL)
        return DURO_OK;
    duro__schedules *s = duro__calloc(1, sizeof(*s));
    if (s == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    s->rt = rt;
    if (pthread_create(&s->thread, NULL, schedule_thread, s) != 0) {
        duro__free(s);
        return duro__fail(DURO_ERROR, "could not start the schedule thread");
    }
    s->started = 1;
    rt->schedules = s;
    return DURO_OK;
}

void duro__schedules_stop(duro_runtime *rt)
{
    duro__schedules *s = rt->schedules;
    if (s == NULL)
        return;
    duro__schedules_poke(); /* stop_flag is set: its wait ends */
    pthread_join(s->thread, NULL);
    duro__free(s);
    rt->schedules = NULL;
}
