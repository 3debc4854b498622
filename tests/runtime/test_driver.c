/* test_driver.c - orchestrations run by a driver (duro_driver), end to end:
 * a driver written here in C runs a small state-machine "coroutine" per
 * orchestration (a resume point and its variables in a heap state, the
 * protothread trick), issuing activities, timers, events and children
 * through the context and waiting through step returns, as a language
 * binding drives its coroutines. The real runtime runs it on a store - a
 * SQLite file, or, built with DRIVER_PG, a fresh schema on the PostgreSQL
 * server of the tests - and the tests count what the driver was asked to
 * do: one step per new input on a warm cache, a state destroyed exactly
 * once whatever discards it (end, eviction, lost lock, shutdown,
 * continue-as-new), and the engine's rules (nondeterminism, select losers,
 * observed cancel, suspend, terminate) as for C code. The same workflow as
 * a C fiber orchestration and as a driven one gives identical histories,
 * and the store-less replayer replays both. Waits are deadline-based. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"
#ifdef DRIVER_PG
#include "pg_util.h"
#endif

#define WAIT_MS 30000

/* ------------------------------------------------------------------------
 * the store of each test */

#ifdef DRIVER_PG
static char schemas[64][64];
static int schema_count;

/* A fresh schema named after `name`; the fixture's url points at it. */
static const char *store_url(const char *name)
{
    char *schema = schemas[schema_count % 64];
    snprintf(schema, 64, "drv_%ld_%s", (long)getpid(), name);
    for (char *p = schema; *p; p++)
        if (*p == '.' || *p == '-')
            *p = '_';
    static char urls[64][4300];
    char *url = urls[schema_count % 64];
    schema_count++;
    snprintf(url, 4300, "%s%cschema=%s", pg_test_url(),
             strchr(pg_test_url(), '?') ? '&' : '?', schema);
    return url;
}

static void stores_drop(void)
{
    for (int i = 0; i < schema_count && i < 64; i++)
        pg_test_drop_schema(schemas[i]);
    schema_count = 0;
}
#else
static const char *store_url(const char *name)
{
    return test_sqlite_url(name);
}

static void stores_drop(void)
{
}
#endif

static void store_init(rt_fixture *f, const char *name)
{
    rt_init(f, name);
    f->url = store_url(name);
}

static void store_done(rt_fixture *f)
{
    rt_done(f);
    stores_drop();
}

/* ------------------------------------------------------------------------
 * what the driver was asked to do */

#define MAX_STATES 2048
#define MAX_STEP_THREADS 16

typedef struct record {
    _Atomic int ready; /* instance and execution are set */
    _Atomic int destroyed;
    _Atomic int steps; /* published after step_threads[steps - 1] */
    _Atomic int hooks_before_destroy; /* on_destroy hooks run before it */
    char instance[64];
    uint64_t execution;
    pthread_t step_threads[MAX_STEP_THREADS]; /* the thread of each step */
} record;

static record records[MAX_STATES];
static _Atomic int slots;             /* records handed out */
static _Atomic int starts;            /* states made */
static _Atomic int steps;             /* steps of every state */
static _Atomic int destroys;          /* states destroyed */
static _Atomic int hooks_run;         /* duro_orch_on_destroy hooks run */
static _Atomic int destroy_misuse_ok; /* destroy found the context refused */

static void reset_counts(void)
{
    memset(records, 0, sizeof(records));
    atomic_store(&slots, 0);
    atomic_store(&starts, 0);
    atomic_store(&steps, 0);
    atomic_store(&destroys, 0);
    atomic_store(&hooks_run, 0);
    atomic_store(&destroy_misuse_ok, 0);
}

/* Every state made was destroyed exactly once. */
static void check_each_destroyed_once(void)
{
    int n = atomic_load(&starts);
    CHECK(n <= MAX_STATES);
    CHECK_EQ(atomic_load(&slots), n);
    for (int i = 0; i < n && i < MAX_STATES; i++)
        CHECK_MSG(atomic_load(&records[i].ready) &&
                      atomic_load(&records[i].destroyed) == 1,
                  "state %d (instance '%s' execution %llu) destroyed %d "
                  "times",
                  i, records[i].instance,
                  (unsigned long long)records[i].execution,
                  atomic_load(&records[i].destroyed));
    CHECK_EQ(atomic_load(&destroys), n);
    CHECK_EQ(atomic_load(&destroy_misuse_ok), n);
}

/* The states made for instance `id`, and their steps. */
static int states_of(const char *id, int *step_count)
{
    int n = 0, s = 0;
    for (int i = 0; i < atomic_load(&slots) && i < MAX_STATES; i++)
        if (atomic_load(&records[i].ready) &&
            strcmp(records[i].instance, id) == 0) {
            n++;
            s += atomic_load(&records[i].steps);
        }
    if (step_count != NULL)
        *step_count = s;
    return n;
}

/* ------------------------------------------------------------------------
 * the driver: a coroutine is a resume point (pc) and its variables */

typedef struct coro coro;
typedef int (*program_fn)(coro *c, duro_orch *o, duro_result *out);
/* The registration's user pointer: which program a state runs. */
typedef struct program {
    program_fn fn;
} program;

struct coro {
    int pc; /* where the program resumes: 0 at first, then a line */
    int id; /* records[id] */
    program_fn fn;
    duro_orch *o; /* to check that the context refuses outside steps */
    duro_task *t[8];
    duro_task *w;
    int i, n, rc;
    const char *s;
};

/* Protothread-style resume points: CO_WAIT returns DURO_STEP_WAITING until
 * cond holds, and the next step resumes at that line. */
#define CO_BEGIN(c)                                                            \
    switch ((c)->pc) {                                                         \
    case 0:
#define CO_WAIT(c, cond)                                                       \
    do {                                                                       \
        (c)->pc = __LINE__;                                                    \
        __attribute__((fallthrough));                                          \
    case __LINE__:                                                             \
        if (!(cond))                                                           \
            return DURO_STEP_WAITING;                                          \
    } while (0)
#define CO_AWAIT(c, task) CO_WAIT(c, duro_task_state(task) != DURO_TASK_PENDING)
#define CO_END(c)                                                              \
    }                                                                          \
    (c)->pc = -1;                                                              \
    return DURO_STEP_DONE

static int drv_start(duro_orch *o, const char *input, void *user, void **state)
{
    CHECK_STR(input, duro_input(o)); /* the context works in start */
    coro *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return DURO_NOMEM;
    c->fn = ((const program *)user)->fn;
    c->o = o;
    c->id = atomic_fetch_add(&slots, 1);
    if (c->id < MAX_STATES) {
        record *r = &records[c->id];
        snprintf(r->instance, sizeof(r->instance), "%s", duro_instance_id(o));
        r->execution = duro_execution_id(o);
        atomic_store(&r->ready, 1);
    }
    atomic_fetch_add(&starts, 1);
    *state = c;
    return DURO_OK;
}

static int drv_step(duro_orch *o, void *state, duro_result *out)
{
    coro *c = state;
    CHECK(c->o == o);
    if (c->id < MAX_STATES) {
        /* one step at a time per state: the count is published after
         * the thread it counts */
        record *r = &records[c->id];
        int k = atomic_load(&r->steps);
        if (k < MAX_STEP_THREADS)
            r->step_threads[k] = pthread_self();
        atomic_store(&r->steps, k + 1);
    }
    atomic_fetch_add(&steps, 1);
    CHECK(c->pc != -1); /* never stepped after it returned DONE */
    return c->fn(c, o, out);
}

static void drv_destroy(void *state, void *user)
{
    coro *c = state;
    (void)user;
    /* The context is not usable here: refused without being touched. */
    duro_task *t = duro_call_activity(c->o, "Echo", "from destroy");
    int refused =
        strstr(duro_errmsg(), "duro_call_activity: duro API misuse") != NULL;
    refused &= duro_now(c->o) == 0 && duro_task_state(t) == DURO_TASK_FAILED;
    atomic_fetch_add(&destroy_misuse_ok, refused);
    if (c->id < MAX_STATES) {
        atomic_fetch_add(&records[c->id].destroyed, 1);
        atomic_store(&records[c->id].hooks_before_destroy,
                     atomic_load(&hooks_run));
    }
    atomic_fetch_add(&destroys, 1);
    free(c);
}

static const duro_driver test_driver = {.version = DURO_DRIVER_VERSION,
                                        .start = drv_start,
                                        .step = drv_step,
                                        .destroy = drv_destroy};

/* The program of every registration, kept for as long as the tests run
 * (the registry keeps the pointer). */
static const program *program_of(program_fn fn)
{
    static program table[32];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < 32 && table[i].fn != NULL && table[i].fn != fn)
        i++;
    CHECK(i < 32);
    if (i < 32)
        table[i].fn = fn;
    pthread_mutex_unlock(&lock);
    return i < 32 ? &table[i] : NULL;
}

static void add_driven_with(duro_registry *r, const char *name, program_fn fn,
                            const duro_orchestration_options *opts)
{
    CHECK_OK(duro_registry_add_driven_orchestration(
        r, name, NULL, &test_driver, (void *)program_of(fn), opts));
}

static void add_driven(rt_fixture *f, const char *name, program_fn fn)
{
    add_driven_with(f->reg, name, fn, NULL);
}

/* ------------------------------------------------------------------------
 * activities */

static struct {
    _Atomic int block_started;
    _Atomic int block_cancelled;
    _Atomic int release_runs;
    pthread_mutex_t lock;
    char block_reason[64];
    char release_input[64];
} seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void reset_seen(void)
{
    atomic_store(&seen.block_started, 0);
    atomic_store(&seen.block_cancelled, 0);
    atomic_store(&seen.release_runs, 0);
    pthread_mutex_lock(&seen.lock);
    seen.block_reason[0] = seen.release_input[0] = '\0';
    pthread_mutex_unlock(&seen.lock);
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

/* Fails its first attempt, succeeds after. */
static int act_flaky(duro_activity *a, const char *in, duro_result *out)
{
    if (duro_activity_attempt(a) == 1)
        return duro_fail(out, "flaky: first attempt");
    return duro_ok(out, in);
}

/* Waits for its token (up to WAIT_MS) and notes why it fired. */
static int act_block(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    atomic_fetch_add(&seen.block_started, 1);
    if (!duro_activity_wait_cancelled(a, WAIT_MS))
        return duro_ok(out, "not cancelled");
    pthread_mutex_lock(&seen.lock);
    const char *r = duro_activity_cancel_reason(a);
    snprintf(seen.block_reason, sizeof(seen.block_reason), "%s",
             r ? r : "(null)");
    pthread_mutex_unlock(&seen.lock);
    atomic_fetch_add(&seen.block_cancelled, 1);
    return duro_fail(out, "cancelled");
}

static int act_release(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    pthread_mutex_lock(&seen.lock);
    snprintf(seen.release_input, sizeof(seen.release_input), "%s",
             in ? in : "(null)");
    pthread_mutex_unlock(&seen.lock);
    atomic_fetch_add(&seen.release_runs, 1);
    return duro_ok(out, "released");
}

static void add_activities(rt_fixture *f)
{
    CHECK_OK(duro_registry_add_activity(f->reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Flaky", act_flaky, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Block", act_block, NULL));
    CHECK_OK(duro_registry_add_activity(f->reg, "Release", act_release, NULL));
}

/* ------------------------------------------------------------------------
 * programs */

/* N activities one after the other (N is the input). */
static int prog_chain(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->n = atoi(duro_input(o));
    for (c->i = 0; c->i < c->n; c->i++) {
        c->t[0] = duro_call_activity(o, "Echo", duro_sprintf(o, "%d", c->i));
        CO_AWAIT(c, c->t[0]);
        CHECK_EQ(duro_task_state(c->t[0]), DURO_TASK_SUCCEEDED);
        CHECK_EQ(atoi(duro_task_output(c->t[0])), c->i);
    }
    duro_ok(out, duro_sprintf(o, "chain:%d", c->n));
    CO_END(c);
}

/* Waits for event "go" (input) times, then returns the last payload. */
static int prog_wait(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->n = duro_input(o) != NULL ? atoi(duro_input(o)) : 1;
    for (c->i = 0; c->i < c->n; c->i++) {
        c->t[0] = duro_wait_event(o, "go");
        CO_AWAIT(c, c->t[0]);
    }
    duro_ok(out, duro_task_output(c->t[0]));
    CO_END(c);
}

/* The cache tests' hog: its first step blocks its turn thread until the
 * test releases it. */
static _Atomic int hog_running[4];
static _Atomic int hog_release[4];
static pthread_t hog_thread[4];

static int prog_hog(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->n = atoi(duro_input(o));
    hog_thread[c->n] = pthread_self();
    atomic_store(&hog_running[c->n], 1);
    int64_t until = test_now_ms() + WAIT_MS;
    while (!atomic_load(&hog_release[c->n]) && test_now_ms() < until)
        test_sleep_ms(1);
    duro_ok(out, "hogged");
    CO_END(c);
}

/* A select: Block against a short timer (the timer wins, Block is
 * cancelled as a loser); then a wait-any that leaves its loser running. */
static int prog_select(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->t[0] = duro_call_activity(o, "Block", "loser");
    c->t[1] = duro_timer(o, 50);
    CHECK(duro_select_done(o, c->t, 2) == NULL); /* none done: no cancel */
    CO_WAIT(c, (c->w = duro_select_done(o, c->t, 2)) != NULL);
    CHECK(c->w == c->t[1]);
    CHECK_EQ(duro_task_state(c->t[0]), DURO_TASK_CANCELLED);
    c->t[2] = duro_call_activity(o, "Echo", "first");
    c->t[3] = duro_call_activity(o, "Block", "still running");
    CO_WAIT(c, (c->w = duro_first_done(o, &c->t[2], 2)) != NULL);
    CHECK(c->w == c->t[2]);
    CHECK_EQ(duro_task_state(c->t[3]), DURO_TASK_PENDING);
    duro_ok(out, c->w == c->t[2] ? "timer;first" : "wrong");
    CO_END(c);
}

/* Observes its cancel: the pending Block reports cancelled, and the code
 * schedules a compensation before it returns. */
static int prog_observe(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->t[0] = duro_call_activity(o, "Block", "held");
    CO_AWAIT(c, c->t[0]);
    if (duro_task_state(c->t[0]) == DURO_TASK_CANCELLED &&
        duro_cancel_requested(o)) {
        c->t[1] = duro_call_activity(o, "Release", duro_cancel_reason(o));
        CO_AWAIT(c, c->t[1]);
        duro_ok(out, "cleaned up");
    } else {
        duro_ok(out, "not cancelled");
    }
    CO_END(c);
}

/* Continues as new with input + 1 until 3, then returns. */
static int prog_continue(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->n = atoi(duro_input(o));
    c->t[0] = duro_call_activity(o, "Echo", duro_input(o));
    CO_AWAIT(c, c->t[0]);
    if (c->n < 3)
        duro_continue_as_new(o, out, duro_sprintf(o, "%d", c->n + 1));
    else
        duro_ok(out, duro_sprintf(o, "done %d", c->n));
    CO_END(c);
}

/* Deliberately nondeterministic: the activity it calls follows a global. */
static _Atomic int nd_variant;

static int prog_nd(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->t[0] =
        duro_call_activity(o, atomic_load(&nd_variant) ? "B1" : "A1", "x");
    CO_AWAIT(c, c->t[0]);
    c->t[1] = duro_wait_event(o, "go");
    CO_AWAIT(c, c->t[1]);
    duro_ok(out, "nd");
    CO_END(c);
}

/* ------------------------------------------------------------------------
 * one step per new input on a warm cache; rebuilt from history when not
 * kept */

static duro_metrics run_chains(const char *db, int instances, int n,
                               size_t cache_size, size_t cache_bytes,
                               int concurrency)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, db);
    add_activities(&f);
    add_driven(&f, "Chain", prog_chain);
    f.opts.fiber_cache_size = cache_size;
    f.opts.fiber_cache_bytes = cache_bytes;
    f.opts.orchestration_concurrency = concurrency;
    rt_start(&f);
    char id[32], in[16];
    snprintf(in, sizeof(in), "%d", n);
    for (int k = 0; k < instances; k++) {
        snprintf(id, sizeof(id), "chain-%d", k);
        rt_start_instance(&f, id, "Chain", in);
    }
    char want[32];
    snprintf(want, sizeof(want), "chain:%d", n);
    for (int k = 0; k < instances; k++) {
        snprintf(id, sizeof(id), "chain-%d", k);
        duro_instance_info *i = rt_wait(&f, id, WAIT_MS);
        CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
        CHECK_STR(i->output, want);
        duro_free(i);
        duro_history *h = rt_history(&f, id);
        CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), n);
        CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), n);
        duro_history_free(h);
    }
    duro_metrics m;
    rt_final_metrics(&f, &m);
    store_done(&f);
    check_each_destroyed_once();
    return m;
}

TEST(warm_cache_resumes_with_one_step_per_input)
{
    const int instances = 6, n = 5;
    duro_metrics m = run_chains("warm.db", instances, n, 1024, 0, 2);
    /* one state per instance, started once, stepped once at its start and
     * once per completion, never replayed */
    CHECK_EQ(atomic_load(&starts), instances);
    CHECK_EQ(atomic_load(&steps), instances * (n + 1));
    for (int k = 0; k < instances; k++) {
        char id[32];
        int s = 0;
        snprintf(id, sizeof(id), "chain-%d", k);
        CHECK_EQ(states_of(id, &s), 1);
        CHECK_EQ(s, n + 1);
    }
    CHECK_EQ(m.replays, 0);
    CHECK_EQ(m.fiber_cache_hits, (uint64_t)(instances * n));
    CHECK_EQ(m.orchestrations_completed, (uint64_t)instances);
}

TEST(without_a_cache_every_turn_starts_a_state_and_replays)
{
    const int n = 4;
    duro_metrics m = run_chains("cold.db", 1, n, 0, 0, 2);
    /* turn k (0..n) makes a new state and steps it k + 1 times: once at
     * its start, once per recorded completion, once for the new one */
    CHECK_EQ(atomic_load(&starts), n + 1);
    CHECK_EQ(atomic_load(&steps), (n + 1) * (n + 2) / 2);
    CHECK_EQ(m.fiber_cache_hits, 0);
    CHECK_EQ(m.replays, (uint64_t)n);
}

TEST(eviction_by_cache_size_or_bytes_destroys_each_state_once)
{
    /* One kept state for three instances, then a byte bound no state
     * fits: states are evicted, destroyed once each, and the instances
     * complete by replaying. */
    duro_metrics m = run_chains("evict_one.db", 3, 4, 1, 0, 1);
    CHECK(atomic_load(&starts) >= 3);
    CHECK_EQ(m.orchestrations_completed, 3);
    m = run_chains("evict_bytes.db", 3, 4, 1024, 1, 2);
    CHECK_EQ(atomic_load(&starts), 3 * 5); /* never kept */
    CHECK_EQ(m.fiber_cache_hits, 0);
    CHECK_EQ(m.orchestrations_completed, 3);
}

/* A warm state resumed on another turn thread: two hogs block one turn
 * thread each in turn, so W's next step can only run on the other one. */
TEST(a_warm_state_resumes_on_another_turn_thread)
{
    reset_counts();
    for (int k = 0; k < 4; k++) {
        atomic_store(&hog_running[k], 0);
        atomic_store(&hog_release[k], 0);
    }
    rt_fixture f;
    store_init(&f, "migrate.db");
    add_activities(&f);
    add_driven(&f, "Wait", prog_wait);
    add_driven(&f, "Hog", prog_hog);
    f.opts.orchestration_concurrency = 2;
    f.opts.orchestration_batch = 1;
    f.opts.orchestration_lock_timeout_ms = 20000;
    rt_start(&f);
    rt_start_instance(&f, "w", "Wait", "3");
    WAIT_UNTIL(atomic_load(&records[0].steps) == 1, WAIT_MS);

    rt_start_instance(&f, "hog1", "Hog", "1");
    WAIT_UNTIL(atomic_load(&hog_running[1]), WAIT_MS); /* thread X busy */
    CHECK_OK(duro_client_raise_event(f.client, "w", "go", "1"));
    WAIT_UNTIL(atomic_load(&records[0].steps) == 2, WAIT_MS);
    pthread_t y = records[0].step_threads[1];
    CHECK(!pthread_equal(y, hog_thread[1]));

    rt_start_instance(&f, "hog2", "Hog", "2");
    WAIT_UNTIL(atomic_load(&hog_running[2]), WAIT_MS); /* Y busy now */
    CHECK(pthread_equal(hog_thread[2], y));
    atomic_store(&hog_release[1], 1); /* X free */
    CHECK_OK(duro_client_raise_event(f.client, "w", "go", "2"));
    WAIT_UNTIL(atomic_load(&records[0].steps) == 3, WAIT_MS);
    pthread_t x = records[0].step_threads[2];
    CHECK(pthread_equal(x, hog_thread[1]));
    CHECK(!pthread_equal(x, y)); /* the state moved from Y to X */
    atomic_store(&hog_release[2], 1);
    CHECK_OK(duro_client_raise_event(f.client, "w", "go", "3"));
    duro_instance_info *i = rt_wait(&f, "w", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "3");
    duro_free(i);
    CHECK_EQ(states_of("w", NULL), 1); /* warm throughout: one state */
    CHECK_EQ(atomic_load(&records[0].steps), 4);
    WAIT_UNTIL(rt_status(&f, "hog2") == DURO_STATUS_COMPLETED, WAIT_MS);
    store_done(&f);
    check_each_destroyed_once();
}

/* ------------------------------------------------------------------------
 * what discards a state: a lost lock, a shutdown, a restart */

TEST(a_lost_lock_destroys_the_state_and_the_turn_replays)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, "lock_lost.db");
    add_activities(&f);
    add_driven(&f, "Chain", prog_chain);
    duro_provider *inner, *wrapper;
    duro_error err;
    CHECK_PRC(duro_provider_open(f.url, &inner, &err), DURO_OK, &err);
    wrapper = faulty_provider_wrap(inner, 1);
    CHECK(wrapper != NULL);
    /* the second turn's ack finds its lock gone: nothing commits, the
     * kept state is dropped, the batch comes back when the lock expires */
    faulty_fault lost = {.method = FAULTY_ACK_ORCHESTRATION_ITEM,
                         .nth = 2,
                         .count = 1,
                         .retryable = 0,
                         .when = FAULTY_BEFORE_CALL,
                         .code = DURO_LOCK_LOST};
    CHECK(faulty_provider_queue_fault(wrapper, &lost));
    f.opts.orchestration_lock_timeout_ms = 1000;
    CHECK_OK(duro_runtime_create_with_provider(wrapper, f.reg, &f.opts, &f.rt));
    CHECK_OK(duro_runtime_start(f.rt));
    CHECK_OK(duro_client_create(f.url, &f.client));
    rt_start_instance(&f, "ll", "Chain", "3");
    duro_instance_info *i = rt_wait(&f, "ll", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "chain:3");
    duro_free(i);
    CHECK_EQ(faulty_provider_faults_fired(wrapper), 1);
    /* history written once */
    duro_history *h = rt_history(&f, "ll");
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_SCHEDULED), 3);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_COMPLETED), 3);
    for (size_t k = 0; k < h->count; k++)
        CHECK_EQ(h->events[k].event_id, k + 1);
    duro_history_free(h);
    /* the state of the lost turn was destroyed, a new one replayed */
    CHECK_EQ(states_of("ll", NULL), 2);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK(m.replays >= 1);
    rt_done(&f);
    duro_provider_close(wrapper);
    stores_drop();
    check_each_destroyed_once();
}

TEST(shutdown_destroys_every_kept_state_once)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, "shutdown.db");
    add_activities(&f);
    add_driven(&f, "Wait", prog_wait);
    rt_start(&f);
    const int live = 5;
    char id[32];
    for (int k = 0; k < live; k++) {
        snprintf(id, sizeof(id), "live-%d", k);
        rt_start_instance(&f, id, "Wait", "1");
    }
    for (int k = 0; k < live; k++) {
        snprintf(id, sizeof(id), "live-%d", k);
        WAIT_UNTIL(rt_count_events(&f, id, DURO_EVENT_EVENT_SUBSCRIBED) == 1,
                   WAIT_MS);
    }
    WAIT_UNTIL(atomic_load(&steps) == live, WAIT_MS);
    CHECK_EQ(atomic_load(&starts), live);
    CHECK_EQ(atomic_load(&destroys), 0); /* all kept, suspended */
    /* the shutdown itself releases them, on this thread */
    CHECK_OK(duro_runtime_shutdown(f.rt, 10000));
    CHECK_EQ(atomic_load(&destroys), live);
    rt_stop(&f);
    CHECK_EQ(atomic_load(&destroys), live); /* not again at destroy */
    /* a new runtime (other turn threads) replays them: new states */
    rt_start(&f);
    for (int k = 0; k < live; k++) {
        snprintf(id, sizeof(id), "live-%d", k);
        CHECK_OK(duro_client_raise_event(f.client, id, "go", id));
    }
    for (int k = 0; k < live; k++) {
        snprintf(id, sizeof(id), "live-%d", k);
        duro_instance_info *i = rt_wait(&f, id, WAIT_MS);
        CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
        CHECK_STR(i->output, id);
        duro_free(i);
        CHECK_EQ(states_of(id, NULL), 2);
    }
    store_done(&f);
    CHECK_EQ(atomic_load(&starts), 2 * live);
    check_each_destroyed_once();
}

TEST(nondeterminism_of_driven_code_names_both_sides)
{
    reset_counts();
    atomic_store(&nd_variant, 0);
    rt_fixture f;
    store_init(&f, "nd.db");
    add_activities(&f);
    CHECK_OK(duro_registry_add_activity(f.reg, "A1", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "B1", act_echo, NULL));
    add_driven(&f, "ND", prog_nd);
    rt_start(&f);
    rt_start_instance(&f, "nd", "ND", NULL);
    WAIT_UNTIL(rt_count_events(&f, "nd", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    rt_stop(&f); /* the kept state goes; the next runtime replays */
    atomic_store(&nd_variant, 1);
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "nd", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "nd", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_EQ(i->category, DURO_CATEGORY_CONFIGURATION);
    const char *e = i->error ? i->error : "";
    CHECK_MSG(strstr(e, "nondeterminism at event 2") &&
                  strstr(e, "ActivityScheduled 'B1'") &&
                  strstr(e, "history has ActivityScheduled 'A1'"),
              "error: %s", e);
    duro_free(i);
    duro_metrics m;
    rt_final_metrics(&f, &m);
    CHECK_EQ(m.nondeterminism_errors, 1);
    store_done(&f);
    CHECK_EQ(atomic_load(&starts), 2);
    check_each_destroyed_once();
}

/* ------------------------------------------------------------------------
 * the engine's rules, as for C code */

TEST(select_losers_are_cancelled_as_by_duro_select)
{
    reset_counts();
    reset_seen();
    rt_fixture f;
    store_init(&f, "select.db");
    add_activities(&f);
    add_driven(&f, "Select", prog_select);
    rt_start(&f);
    rt_start_instance(&f, "sel", "Select", NULL);
    duro_instance_info *i = rt_wait(&f, "sel", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "timer;first");
    duro_free(i);
    duro_history *h = rt_history(&f, "sel");
    const duro_event *blk = rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 0);
    const duro_event *c0 =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 0);
    CHECK(blk != NULL && c0 != NULL);
    if (blk && c0) {
        CHECK_STR(blk->name, "Block");
        CHECK_EQ(c0->source_event_id, blk->event_id);
        CHECK_STR(c0->reason, "select_loser");
    }
    /* the wait-any's loser was left running: cancelled only as the
     * instance completed */
    const duro_event *blk2 = rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 2);
    const duro_event *c1 =
        rt_find_event(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED, 1);
    CHECK(blk2 != NULL && c1 != NULL);
    if (blk2 && c1) {
        CHECK_STR(blk2->payload, "still running");
        CHECK_EQ(c1->source_event_id, blk2->event_id);
        CHECK_STR(c1->reason, "instance_completed");
    }
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED), 2);
    duro_history_free(h);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) ==
                   atomic_load(&seen.block_started),
               WAIT_MS);
    store_done(&f);
    check_each_destroyed_once();
}

TEST(an_observed_cancel_reaches_the_steps_which_clean_up)
{
    reset_counts();
    reset_seen();
    rt_fixture f;
    store_init(&f, "observe.db");
    add_activities(&f);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    add_driven_with(f.reg, "Observe", prog_observe, &oo);
    rt_start(&f);
    rt_start_instance(&f, "obs", "Observe", NULL);
    WAIT_UNTIL(atomic_load(&seen.block_started) == 1, WAIT_MS);
    CHECK_OK(duro_client_cancel(f.client, "obs", "customer asked", "tests"));
    duro_instance_info *i = rt_wait(&f, "obs", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.release_runs), 1);
    pthread_mutex_lock(&seen.lock);
    CHECK_STR(seen.release_input, "customer asked");
    pthread_mutex_unlock(&seen.lock);
    WAIT_UNTIL(atomic_load(&seen.block_cancelled) == 1, WAIT_MS);
    pthread_mutex_lock(&seen.lock);
    CHECK_STR(seen.block_reason, "instance_cancelled");
    pthread_mutex_unlock(&seen.lock);
    duro_history *h = rt_history(&f, "obs");
    const duro_event *req =
        rt_find_event(h, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED, 0);
    CHECK(req != NULL && (req->flags & DURO_CANCEL_OBSERVED));
    const duro_event *rel = rt_find_event(h, DURO_EVENT_ACTIVITY_SCHEDULED, 1);
    CHECK(rel != NULL && rel->name && strcmp(rel->name, "Release") == 0);
    CHECK_EQ(rt_count_kind(h, DURO_EVENT_ORCHESTRATION_CANCELLED), 1);
    duro_history_free(h);
    /* one state: stepped at its start, at the cancel, at the release */
    int s = 0;
    CHECK_EQ(states_of("obs", &s), 1);
    CHECK_EQ(s, 3);
    store_done(&f);
    check_each_destroyed_once();
}

TEST(a_suspended_instance_is_not_stepped_until_resumed)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, "suspend.db");
    add_activities(&f);
    add_driven(&f, "Wait", prog_wait);
    rt_start(&f);
    rt_start_instance(&f, "sus", "Wait", "2");
    WAIT_UNTIL(rt_count_events(&f, "sus", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    CHECK_OK(duro_client_suspend(f.client, "sus", "maintenance", "tests"));
    rt_wait_status(&f, "sus", DURO_STATUS_SUSPENDED, WAIT_MS);
    CHECK_OK(duro_client_raise_event(f.client, "sus", "go", "first"));
    CHECK_OK(duro_client_raise_event(f.client, "sus", "go", "second"));
    WAIT_UNTIL(rt_count_events(&f, "sus", DURO_EVENT_EVENT_RAISED) == 2,
               WAIT_MS);
    CHECK_EQ(atomic_load(&steps), 1); /* held, not handed over */
    CHECK_EQ(rt_status(&f, "sus"), DURO_STATUS_SUSPENDED);
    CHECK_OK(duro_client_resume(f.client, "sus", NULL, "tests"));
    duro_instance_info *i = rt_wait(&f, "sus", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "second");
    duro_free(i);
    /* one step per held input, in order, on the kept state */
    int s = 0;
    CHECK_EQ(states_of("sus", &s), 1);
    CHECK_EQ(s, 3);
    store_done(&f);
    check_each_destroyed_once();
}

TEST(terminate_ends_the_instance_without_a_step_and_destroys_the_state)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, "terminate.db");
    add_activities(&f);
    add_driven(&f, "Wait", prog_wait);
    rt_start(&f);
    rt_start_instance(&f, "term", "Wait", "1");
    WAIT_UNTIL(rt_count_events(&f, "term", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    CHECK_EQ(atomic_load(&starts), 1);
    CHECK_OK(duro_client_terminate(f.client, "term", "stop it", "tests"));
    duro_instance_info *i = rt_wait(&f, "term", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_TERMINATED);
    duro_free(i);
    /* the terminate's turn ended the kept context without stepping it
     * (a terminate is decided from history alone), and destroyed it */
    WAIT_UNTIL(atomic_load(&destroys) == 1, WAIT_MS);
    CHECK_EQ(atomic_load(&steps), 1);
    CHECK_EQ(atomic_load(&starts), 1);
    store_done(&f);
    check_each_destroyed_once();
}

TEST(continue_as_new_destroys_the_state_and_starts_a_new_one)
{
    reset_counts();
    rt_fixture f;
    store_init(&f, "continue.db");
    add_activities(&f);
    add_driven(&f, "Continue", prog_continue);
    rt_start(&f);
    rt_start_instance(&f, "can", "Continue", "0");
    duro_instance_info *i = rt_wait(&f, "can", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "done 3");
    CHECK_EQ(i->execution_id, 4);
    duro_free(i);
    store_done(&f);
    /* one state per execution, each destroyed when its execution ended */
    CHECK_EQ(atomic_load(&starts), 4);
    for (int k = 0; k < 4; k++) {
        CHECK_STR(records[k].instance, "can");
        CHECK_EQ(records[k].execution, (uint64_t)(k + 1));
        CHECK_EQ(atomic_load(&records[k].steps), 2);
    }
    check_each_destroyed_once();
}

/* ------------------------------------------------------------------------
 * misuse: waiting inside a step, the context outside one */

static duro_orch *_Atomic parked_o;
static duro_task *_Atomic parked_task;
static duro_client *_Atomic step_client;
static duro_runtime *_Atomic step_runtime;

static void count_hook(void *arg)
{
    (void)arg;
    atomic_fetch_add(&hooks_run, 1);
}

static int prog_misuse(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->t[0] = duro_call_activity(o, "Echo", "e");
    /* the four calls that wait refuse, at once, whatever the task */
    c->s = duro_sprintf(o, "%s", duro_errname(duro_await(o, c->t[0])));
    CHECK_MSG(strstr(duro_errmsg(), "must not wait") != NULL, "%s",
              duro_errmsg());
    c->w = duro_select_n(o, c->t, 1);
    c->s = duro_sprintf(o, "%s,%s", c->s,
                        duro_task_state(c->w) == DURO_TASK_FAILED &&
                                strstr(duro_errmsg(), "must not wait")
                            ? "select-refused"
                            : "select-waited");
    c->w = duro_wait_any_n(o, c->t, 1);
    c->s = duro_sprintf(o, "%s,%s", c->s,
                        duro_task_state(c->w) == DURO_TASK_FAILED
                            ? "wait-any-refused"
                            : "wait-any-waited");
    c->s =
        duro_sprintf(o, "%s,%s", c->s, duro_errname(duro_join_n(o, c->t, 1)));
    /* nor may a step use the client or stop the runtime */
    {
        duro_instance_info *info = NULL;
        c->s = duro_sprintf(o, "%s,%s", c->s,
                            duro_errname(duro_client_get_status(
                                atomic_load(&step_client), "mis", &info)));
        c->s = duro_sprintf(
            o, "%s,%s", c->s,
            duro_errname(duro_runtime_shutdown(atomic_load(&step_runtime), 0)));
        c->s =
            duro_sprintf(o, "%s,%s", c->s,
                         duro_errname(duro_replay_history(NULL, NULL, NULL)));
    }
    CHECK_OK(duro_orch_on_destroy(o, count_hook, NULL));
    CHECK_RC(duro_orch_on_destroy(o, NULL, NULL), DURO_INVALID);
    CO_AWAIT(c, c->t[0]);
    c->t[1] = duro_wait_event(o, "go");
    atomic_store(&parked_task, c->t[0]);
    atomic_store(&parked_o, o);
    CO_AWAIT(c, c->t[1]);
    atomic_store(&parked_o, NULL);
    duro_ok(out, c->s);
    CO_END(c);
}

TEST(waiting_in_a_step_and_the_context_outside_one_are_misuse)
{
    reset_counts();
    atomic_store(&parked_o, NULL);
    rt_fixture f;
    store_init(&f, "misuse.db");
    add_activities(&f);
    add_driven(&f, "Misuse", prog_misuse);
    rt_start(&f);
    atomic_store(&step_client, f.client);
    atomic_store(&step_runtime, f.rt);
    rt_start_instance(&f, "mis", "Misuse", NULL);
    WAIT_UNTIL(atomic_load(&parked_o) != NULL, WAIT_MS);
    duro_orch *o = atomic_load(&parked_o);
    duro_task *t = atomic_load(&parked_task);
    duro_task *one[] = {t};
    /* between steps, from another thread: refused, never touched */
    duro_task *x = duro_call_activity(o, "Echo", "outside");
    CHECK(strstr(duro_errmsg(), "duro_call_activity: duro API misuse"));
    CHECK_EQ(duro_task_state(x), DURO_TASK_FAILED);
    CHECK_EQ(duro_now(o), 0);
    CHECK(strstr(duro_errmsg(), "duro_now: duro API misuse"));
    CHECK_EQ(duro_task_state(t), DURO_TASK_FAILED);
    CHECK(strstr(duro_errmsg(), "duro_task_state: called outside "
                                "orchestration code"));
    CHECK_EQ(duro_task_state(duro_first_done(o, one, 1)), DURO_TASK_FAILED);
    CHECK(strstr(duro_errmsg(), "duro_first_done: duro API misuse"));
    CHECK_EQ(duro_task_state(duro_select_done(o, one, 1)), DURO_TASK_FAILED);
    CHECK_RC(duro_all_done(o, one, 1), DURO_MISUSE);
    CHECK_RC(duro_orch_on_destroy(o, count_hook, NULL), DURO_MISUSE);
    CHECK_OK(duro_client_raise_event(f.client, "mis", "go", NULL));
    duro_instance_info *i = rt_wait(&f, "mis", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "DURO_MISUSE,select-refused,wait-any-refused,"
                         "DURO_MISUSE,DURO_MISUSE,DURO_MISUSE,DURO_MISUSE");
    duro_free(i);
    /* none of the refused calls reached history */
    CHECK_EQ(rt_count_events(&f, "mis", DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    store_done(&f);
    /* the hook ran once, before the driver's destroy */
    CHECK_EQ(atomic_load(&hooks_run), 1);
    CHECK_EQ(atomic_load(&records[0].hooks_before_destroy), 1);
    check_each_destroyed_once();
}

/* duro_orch_on_destroy() from C code on a fiber: the hook frees what the
 * code held across its awaits, once per context, whatever discards it. */
static _Atomic int c_hook_frees;

static void free_hook(void *arg)
{
    free(arg);
    atomic_fetch_add(&c_hook_frees, 1);
}

static int orch_holds_heap(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    char *held = malloc(64);
    if (held == NULL || duro_orch_on_destroy(o, free_hook, held) != DURO_OK) {
        free(held);
        return duro_fail(out, "no memory");
    }
    snprintf(held, 64, "held");
    duro_task *go = duro_wait_event(o, "go");
    duro_await(o, go);
    return duro_ok(out, duro_sprintf(o, "%s %s", held, duro_task_output(go)));
}

TEST(on_destroy_hooks_of_c_code_run_once_per_context)
{
    atomic_store(&c_hook_frees, 0);
    rt_fixture f;
    store_init(&f, "c_hooks.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Holds", NULL,
                                             orch_holds_heap, NULL));
    rt_start(&f);
    rt_start_instance(&f, "h1", "Holds", NULL);
    rt_start_instance(&f, "h2", "Holds", NULL);
    WAIT_UNTIL(rt_count_events(&f, "h1", DURO_EVENT_EVENT_SUBSCRIBED) == 1 &&
                   rt_count_events(&f, "h2", DURO_EVENT_EVENT_SUBSCRIBED) == 1,
               WAIT_MS);
    CHECK_EQ(atomic_load(&c_hook_frees), 0); /* both suspended, kept */
    CHECK_OK(duro_client_raise_event(f.client, "h1", "go", "a"));
    duro_instance_info *i = rt_wait(&f, "h1", WAIT_MS);
    CHECK_STR(i->output, "held a");
    duro_free(i);
    WAIT_UNTIL(atomic_load(&c_hook_frees) == 1, WAIT_MS); /* h1 ended */
    rt_stop(&f); /* h2's suspended fiber is dropped: its hook frees */
    CHECK_EQ(atomic_load(&c_hook_frees), 2);
    f.opts.fiber_cache_size = 0; /* every turn a new context */
    rt_start(&f);
    CHECK_OK(duro_client_raise_event(f.client, "h2", "go", "b"));
    i = rt_wait(&f, "h2", WAIT_MS);
    CHECK_STR(i->output, "held b");
    duro_free(i);
    store_done(&f);
    CHECK_EQ(atomic_load(&c_hook_frees), 3);
}

/* ------------------------------------------------------------------------
 * the same workflow in C and driven: identical histories; the replayer */

static int orch_child(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

static void golden_policy(duro_retry_policy *p)
{
    duro_retry_policy_init(p);
    p->max_attempts = 3;
    p->initial_delay_ms = 10;
}

/* The workflow in C: every kind of command, waits that cannot race (the
 * test raises "go" and "stop" at known points). */
static int orch_golden(duro_orch *o, const char *in, duro_result *out)
{
    duro_retry_policy p;
    golden_policy(&p);
    const char *guid = duro_new_guid(o);
    duro_task *a =
        duro_call_activity(o, "Echo", duro_sprintf(o, "%s|%s", in, guid));
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_set_custom_status(o, "after-a");
    duro_task *c = duro_call_activity_with_retry(o, "Flaky", "c", &p);
    duro_await(o, c);
    duro_task *b = duro_call_activity(o, "Echo", "b");
    duro_task *go = duro_wait_event(o, "go");
    duro_join(o, b, go);
    duro_task *blk = duro_call_activity(o, "Block", "g");
    duro_task *stop = duro_wait_event(o, "stop");
    duro_task *w = duro_select(o, blk, stop);
    duro_task *x = duro_call_activity(o, "Echo", "x");
    duro_task *never = duro_wait_event(o, "never");
    duro_task *first = duro_wait_any(o, x, never);
    duro_task *kid = duro_call_sub_orchestration(o, "Child", NULL, NULL, "kid");
    duro_await(o, kid);
    duro_await(o, duro_timer(o, 10));
    duro_start_orchestration(o, "Child", NULL, NULL, "detached");
    duro_set_custom_status(o, "done");
    return duro_ok(out, duro_sprintf(o, "%s;%s;%s;%s;%s;%s;%s",
                                     duro_task_output(a), duro_task_output(c),
                                     duro_task_output(b), duro_task_output(go),
                                     w == stop ? duro_task_output(stop) : "blk",
                                     first == x ? duro_task_output(x) : "never",
                                     duro_task_output(kid)));
}

/* The same workflow as a driven coroutine. */
static int prog_golden(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->s = duro_new_guid(o);
    c->t[0] = duro_call_activity(o, "Echo",
                                 duro_sprintf(o, "%s|%s", duro_input(o), c->s));
    CO_AWAIT(c, c->t[0]);
    if (duro_task_state(c->t[0]) != DURO_TASK_SUCCEEDED) {
        duro_fail(out, duro_task_error(c->t[0]));
        return DURO_STEP_DONE;
    }
    duro_set_custom_status(o, "after-a");
    {
        duro_retry_policy p;
        golden_policy(&p);
        c->t[1] = duro_call_activity_with_retry(o, "Flaky", "c", &p);
    }
    CO_AWAIT(c, c->t[1]);
    c->t[2] = duro_call_activity(o, "Echo", "b");
    c->t[3] = duro_wait_event(o, "go");
    CO_WAIT(c, (c->rc = duro_all_done(o, &c->t[2], 2)) != 0);
    CHECK_EQ(c->rc, 1);
    c->t[4] = duro_call_activity(o, "Block", "g");
    c->t[5] = duro_wait_event(o, "stop");
    CO_WAIT(c, (c->w = duro_select_done(o, &c->t[4], 2)) != NULL);
    c->s = c->w == c->t[5] ? duro_task_output(c->t[5]) : "blk";
    c->t[6] = duro_call_activity(o, "Echo", "x");
    c->t[7] = duro_wait_event(o, "never");
    CO_WAIT(c, (c->w = duro_first_done(o, &c->t[6], 2)) != NULL);
    c->s = duro_sprintf(o, "%s;%s", c->s,
                        c->w == c->t[6] ? duro_task_output(c->t[6]) : "never");
    c->t[4] = duro_call_sub_orchestration(o, "Child", NULL, NULL, "kid");
    CO_AWAIT(c, c->t[4]);
    c->s = duro_sprintf(o, "%s;%s", c->s, duro_task_output(c->t[4]));
    c->t[5] = duro_timer(o, 10);
    CO_AWAIT(c, c->t[5]);
    duro_start_orchestration(o, "Child", NULL, NULL, "detached");
    duro_set_custom_status(o, "done");
    duro_ok(out,
            duro_sprintf(o, "%s;%s;%s;%s;%s", duro_task_output(c->t[0]),
                         duro_task_output(c->t[1]), duro_task_output(c->t[2]),
                         duro_task_output(c->t[3]), c->s));
    CO_END(c);
}

/* Runs "Golden" (registered by the caller, C or driven) as instance
 * "golden" on the fixture's store to its end, raising its events at
 * points where nothing else can race them. */
static void run_golden(rt_fixture *f)
{
    rt_start(f);
    rt_start_instance(f, "golden", "Golden", "in");
    /* a, c's second attempt and b completed: then "go" */
    WAIT_UNTIL(rt_count_events(f, "golden", DURO_EVENT_ACTIVITY_COMPLETED) == 3,
               WAIT_MS);
    CHECK_OK(duro_client_raise_event(f->client, "golden", "go", "went"));
    WAIT_UNTIL(rt_count_events(f, "golden", DURO_EVENT_EVENT_SUBSCRIBED) == 2,
               WAIT_MS);
    CHECK_OK(duro_client_raise_event(f->client, "golden", "stop", "stopped"));
    duro_instance_info *i = rt_wait(f, "golden", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->custom_status, "done");
    duro_free(i);
}

static void register_golden(rt_fixture *f, int driven)
{
    add_activities(f);
    CHECK_OK(duro_registry_add_orchestration(f->reg, "Child", NULL, orch_child,
                                             NULL));
    if (driven)
        add_driven(f, "Golden", prog_golden);
    else
        CHECK_OK(duro_registry_add_orchestration(f->reg, "Golden", NULL,
                                                 orch_golden, NULL));
}

static int str_same(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/* The timestamp of the TimerCreated a timer event belongs to. */
static int64_t timer_base(const duro_history *h, const duro_event *e)
{
    uint64_t id =
        e->kind == DURO_EVENT_TIMER_CREATED ? e->event_id : e->source_event_id;
    return id >= 1 && id <= h->count ? h->events[id - 1].timestamp_ms : 0;
}

/* Field by field, times aside: timestamp_ms, started_ms and finished_ms
 * are when things ran; a timer's fire_at_ms is compared as its delay from
 * the turn that created it. */
static void check_same_history(const duro_history *x, const duro_history *y,
                               const char *what)
{
    CHECK_MSG(x->count == y->count, "%s: %zu events vs %zu", what, x->count,
              y->count);
    for (size_t k = 0; k < x->count && k < y->count; k++) {
        const duro_event *a = &x->events[k], *b = &y->events[k];
        int same =
            a->event_id == b->event_id && a->kind == b->kind &&
            a->source_event_id == b->source_event_id &&
            str_same(a->name, b->name) && str_same(a->version, b->version) &&
            str_same(a->payload, b->payload) && str_same(a->error, b->error) &&
            a->category == b->category && str_same(a->reason, b->reason) &&
            str_same(a->requested_by, b->requested_by) &&
            str_same(a->ref_instance, b->ref_instance) &&
            a->ref_execution == b->ref_execution &&
            a->ref_event_id == b->ref_event_id && a->attempt == b->attempt &&
            a->flags == b->flags &&
            (a->fire_at_ms == 0) == (b->fire_at_ms == 0) &&
            (a->fire_at_ms == 0 || a->fire_at_ms - timer_base(x, a) ==
                                       b->fire_at_ms - timer_base(y, b));
        CHECK_MSG(same, "%s: event %zu differs: %s '%s' '%s' vs %s '%s' '%s'",
                  what, k + 1, duro_event_kind_name(a->kind),
                  a->name ? a->name : "", a->payload ? a->payload : "",
                  duro_event_kind_name(b->kind), b->name ? b->name : "",
                  b->payload ? b->payload : "");
    }
}

TEST(the_same_workflow_in_c_and_driven_gives_identical_histories)
{
    reset_counts();
    reset_seen();
    rt_fixture fc, fd;
    store_init(&fc, "golden_c.db");
    register_golden(&fc, 0);
    run_golden(&fc);
    store_init(&fd, "golden_driven.db");
    register_golden(&fd, 1);
    run_golden(&fd);

    duro_instance_info *ic = rt_wait(&fc, "golden", WAIT_MS);
    duro_instance_info *id = rt_wait(&fd, "golden", WAIT_MS);
    CHECK_STR(ic->output, id->output);
    CHECK_MSG(strstr(ic->output, "in|") == ic->output &&
                  strstr(ic->output, ";c;b;went;stopped;x;kid") != NULL,
              "output: %s", ic->output);
    duro_free(ic);
    duro_free(id);
    duro_history *hc = rt_history(&fc, "golden");
    duro_history *hd = rt_history(&fd, "golden");
    check_same_history(hc, hd, "golden");
    CHECK(hc->count >= 20);
    /* and the children's */
    const duro_event *kid =
        rt_find_event(hc, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 0);
    const duro_event *det =
        rt_find_event(hc, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED, 1);
    CHECK(kid != NULL && det != NULL);
    const char *kids[] = {kid ? kid->ref_instance : NULL,
                          det ? det->ref_instance : NULL};
    for (int k = 0; k < 2 && kids[k] != NULL; k++) {
        duro_instance_info *ci = rt_wait(&fc, kids[k], WAIT_MS);
        duro_instance_info *di = rt_wait(&fd, kids[k], WAIT_MS);
        duro_free(ci);
        duro_free(di);
        duro_history *kc = rt_history(&fc, kids[k]);
        duro_history *kd = rt_history(&fd, kids[k]);
        check_same_history(kc, kd, kids[k]);
        duro_history_free(kc);
        duro_history_free(kd);
    }

    /* the replayer: each history replays through either form of the code
     * (C on a fiber, driven on this thread's stack), with no store */
    duro_registry *rc, *rd;
    CHECK_OK(duro_registry_create(&rc));
    CHECK_OK(duro_registry_create(&rd));
    CHECK_OK(
        duro_registry_add_orchestration(rc, "Golden", NULL, orch_golden, NULL));
    add_driven_with(rd, "Golden", prog_golden, NULL);
    int before = atomic_load(&starts);
    CHECK_OK(duro_replay_history(rc, hc, NULL));
    CHECK_OK(duro_replay_history(rc, hd, NULL));
    CHECK_OK(duro_replay_history(rd, hc, NULL));
    CHECK_OK(duro_replay_history(rd, hd, NULL));
    /* two replays of the driven code: two states, destroyed on return */
    CHECK_EQ(atomic_load(&starts), before + 2);
    CHECK_EQ(atomic_load(&destroys), atomic_load(&starts));
    duro_registry_destroy(rc);
    duro_registry_destroy(rd);
    duro_history_free(hc);
    duro_history_free(hd);
    rt_done(&fc);
    store_done(&fd);
    check_each_destroyed_once();
}

/* A changed program for the replayer: the second activity differs. */
static int prog_golden_changed(coro *c, duro_orch *o, duro_result *out)
{
    CO_BEGIN(c);
    c->t[0] = duro_call_activity(
        o, "Echo", duro_sprintf(o, "%s|%s", duro_input(o), duro_new_guid(o)));
    CO_AWAIT(c, c->t[0]);
    c->t[1] = duro_call_activity(o, "Echo", "not flaky");
    CO_AWAIT(c, c->t[1]);
    duro_ok(out, "changed");
    CO_END(c);
}

/* Returns another output at the same point as the recorded code. */
static int prog_chain_other_output(coro *c, duro_orch *o, duro_result *out)
{
    int rc = prog_chain(c, o, out);
    if (rc == DURO_STEP_DONE)
        duro_ok(out, "another output");
    return rc;
}

TEST(the_replayer_reports_changed_code_as_nondeterminism)
{
    reset_counts();
    reset_seen();
    rt_fixture f;
    store_init(&f, "replayer.db");
    register_golden(&f, 1);
    add_driven(&f, "Chain", prog_chain);
    add_driven(&f, "Wait", prog_wait);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    oo.observe_cancel = 1;
    add_driven_with(f.reg, "Observe", prog_observe, &oo);
    run_golden(&f);
    rt_start_instance(&f, "ch", "Chain", "2");
    rt_start_instance(&f, "waiting", "Wait", "1");
    rt_start_instance(&f, "term", "Wait", "1");
    rt_start_instance(&f, "obs", "Observe", NULL);
    duro_free(rt_wait(&f, "ch", WAIT_MS));
    WAIT_UNTIL(
        rt_count_events(&f, "waiting", DURO_EVENT_EVENT_SUBSCRIBED) == 1 &&
            rt_count_events(&f, "term", DURO_EVENT_EVENT_SUBSCRIBED) == 1 &&
            atomic_load(&seen.block_started) >= 1,
        WAIT_MS);
    CHECK_OK(duro_client_terminate(f.client, "term", NULL, "tests"));
    CHECK_OK(duro_client_cancel(f.client, "obs", "undo", "tests"));
    duro_free(rt_wait(&f, "term", WAIT_MS));
    duro_free(rt_wait(&f, "obs", WAIT_MS));
    duro_history *golden = rt_history(&f, "golden");
    duro_history *chain = rt_history(&f, "ch");
    duro_history *waiting = rt_history(&f, "waiting");
    duro_history *term = rt_history(&f, "term");
    duro_history *obs = rt_history(&f, "obs");

    /* the registry the histories were made with replays all of them:
     * completed, still waiting, terminated, cancelled with a cleanup */
    CHECK_OK(duro_replay_history(f.reg, golden, NULL));
    CHECK_OK(duro_replay_history(f.reg, chain, NULL));
    CHECK_OK(duro_replay_history(f.reg, waiting, NULL));
    CHECK_OK(duro_replay_history(f.reg, term, NULL));
    CHECK_OK(duro_replay_history(f.reg, obs, NULL));

    duro_registry *changed;
    CHECK_OK(duro_registry_create(&changed));
    add_driven_with(changed, "Golden", prog_golden_changed, NULL);
    add_driven_with(changed, "Chain", prog_chain_other_output, NULL);
    CHECK_RC(duro_replay_history(changed, golden, NULL), DURO_NONDETERMINISM);
    CHECK_MSG(strstr(duro_errmsg(), "nondeterminism at event 4") &&
                  strstr(duro_errmsg(), "ActivityScheduled 'Echo' (input "
                                        "\"not flaky\"") &&
                  strstr(duro_errmsg(), "history has ActivityScheduled "
                                        "'Flaky'"),
              "message: %s", duro_errmsg());
    CHECK_RC(duro_replay_history(changed, chain, NULL), DURO_NONDETERMINISM);
    CHECK_MSG(strstr(duro_errmsg(), "ended with OrchestrationCompleted "
                                    "(output \"another output\")") &&
                  strstr(duro_errmsg(), "history has OrchestrationCompleted "
                                        "(output \"chain:2\")"),
              "message: %s", duro_errmsg());
    /* not registered: named */
    CHECK_RC(duro_replay_history(changed, waiting, NULL), DURO_NOT_FOUND);
    CHECK(strstr(duro_errmsg(), "'Wait'") != NULL);
    /* not a history */
    duro_history empty = {.instance_id = "x"};
    CHECK_RC(duro_replay_history(f.reg, &empty, NULL), DURO_INVALID);
    duro_history tail = *chain;
    tail.events++;
    tail.count--;
    CHECK_RC(duro_replay_history(f.reg, &tail, NULL), DURO_INVALID);
    duro_replay_options ro;
    duro_replay_options_init(&ro);
    CHECK_OK(duro_replay_history(f.reg, chain, &ro));
    ro.version = 0;
    CHECK_RC(duro_replay_history(f.reg, chain, &ro), DURO_INVALID);
    duro_registry_destroy(changed);
    duro_history_free(golden);
    duro_history_free(chain);
    duro_history_free(waiting);
    duro_history_free(term);
    duro_history_free(obs);
    store_done(&f);
    check_each_destroyed_once();
}

/* ------------------------------------------------------------------------
 * a driver's failed start or step: the turn is tried again */

static _Atomic int fail_starts_left, fail_steps_left;

static int flaky_start(duro_orch *o, const char *input, void *user,
                       void **state)
{
    if (atomic_fetch_sub(&fail_starts_left, 1) > 0)
        return DURO_ERROR;
    return drv_start(o, input, user, state);
}

static int flaky_step(duro_orch *o, void *state, duro_result *out)
{
    if (atomic_fetch_sub(&fail_steps_left, 1) > 0)
        return DURO_NOMEM;
    return drv_step(o, state, out);
}

TEST(a_failed_start_or_step_is_retried_like_a_turn_that_could_not_run)
{
    reset_counts();
    atomic_store(&fail_starts_left, 1);
    atomic_store(&fail_steps_left, 1);
    rt_fixture f;
    store_init(&f, "failing_driver.db");
    add_activities(&f);
    duro_driver d = test_driver;
    d.start = flaky_start;
    d.step = flaky_step;
    CHECK_OK(duro_registry_add_driven_orchestration(
        f.reg, "Chain", NULL, &d, (void *)program_of(prog_chain), NULL));
    f.opts.max_attempts = 3;
    rt_start(&f);
    rt_start_instance(&f, "fd", "Chain", "1");
    duro_instance_info *i = rt_wait(&f, "fd", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "chain:1");
    duro_free(i);
    /* the start that failed made no state; the step that failed lost its
     * state, destroyed once; the third try ran */
    CHECK_EQ(atomic_load(&starts), 2);
    CHECK_EQ(atomic_load(&destroys), 2);
    /* a step that always fails: poison after max_attempts, the failure
     * naming the callback and its code */
    atomic_store(&fail_steps_left, 1000);
    rt_start_instance(&f, "fd-poison", "Chain", "1");
    i = rt_wait(&f, "fd-poison", WAIT_MS);
    CHECK_EQ(i->status, DURO_STATUS_FAILED);
    CHECK_MSG(i->error && strstr(i->error, "poison message") &&
                  strstr(i->error, "the driver's step failed: it returned 2 "
                                   "(DURO_NOMEM)"),
              "error: %s", i->error ? i->error : "(null)");
    duro_free(i);
    store_done(&f);
    CHECK_EQ(states_of("fd-poison", NULL), 3); /* one per delivery */
    check_each_destroyed_once();
}

TEST(registering_a_driver_checks_it)
{
    duro_registry *r;
    CHECK_OK(duro_registry_create(&r));
    duro_driver d = test_driver;
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "D", NULL, NULL, NULL, NULL),
        DURO_INVALID);
    d.version = 0;
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "D", NULL, &d, NULL, NULL),
        DURO_INVALID);
    d = test_driver;
    d.step = NULL;
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "D", NULL, &d, NULL, NULL),
        DURO_INVALID);
    d = test_driver;
    d.destroy = NULL; /* nothing to release: allowed */
    CHECK_OK(
        duro_registry_add_driven_orchestration(r, "D", NULL, &d, NULL, NULL));
    CHECK_RC(duro_registry_add_orchestration(r, "D", NULL, orch_child, NULL),
             DURO_ALREADY_EXISTS);
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "", NULL, &d, NULL, NULL),
        DURO_INVALID);
    duro_registry_destroy(r);
}

TEST_MAIN(T(warm_cache_resumes_with_one_step_per_input),
          T(without_a_cache_every_turn_starts_a_state_and_replays),
          T(eviction_by_cache_size_or_bytes_destroys_each_state_once),
          T(a_warm_state_resumes_on_another_turn_thread),
          T(a_lost_lock_destroys_the_state_and_the_turn_replays),
          T(shutdown_destroys_every_kept_state_once),
          T(nondeterminism_of_driven_code_names_both_sides),
          T(select_losers_are_cancelled_as_by_duro_select),
          T(an_observed_cancel_reaches_the_steps_which_clean_up),
          T(a_suspended_instance_is_not_stepped_until_resumed),
          T(terminate_ends_the_instance_without_a_step_and_destroys_the_state),
          T(continue_as_new_destroys_the_state_and_starts_a_new_one),
          T(waiting_in_a_step_and_the_context_outside_one_are_misuse),
          T(on_destroy_hooks_of_c_code_run_once_per_context),
          T(the_same_workflow_in_c_and_driven_gives_identical_histories),
          T(the_replayer_reports_changed_code_as_nondeterminism),
          T(a_failed_start_or_step_is_retried_like_a_turn_that_could_not_run),
          T(registering_a_driver_checks_it))
