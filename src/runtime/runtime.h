/* runtime.h - internals shared by the runtime's modules: the registry, the
 * cancellation token, the activity context, the engine cache, the worker
 * slots and activity manager, and the runtime struct that ties them together.
 *
 * Threads of a started runtime: orchestration_concurrency turn threads,
 * worker_concurrency activity slot threads (plus replacements for slots whose
 * activity ignored its cancellation past the grace period), and one activity
 * manager thread. Lock order: runtime->lock, then cache->lock, then
 * manager->lock; a token's lock is a leaf. No lock is held while user code or
 * the provider runs, except that the history-cache callback takes
 * cache->lock inside the provider's fetch. */
#ifndef DURO_RUNTIME_INTERNAL_H
#define DURO_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"
#include "runtime/metrics.h"

/* ---- registry -------------------------------------------------------- */

typedef struct duro__orch_entry {
    char *name;
    char *version;            /* "" = the default version */
    duro_orchestration_fn fn; /* C code, or NULL and: */
    duro_driver driver;       /* driven code (step set); a copy */
    void *user;
    duro_orchestration_options opts;
} duro__orch_entry;

typedef struct duro__activity_entry {
    char *name;
    duro_activity_fn fn;
    void *user;
} duro__activity_entry;

struct duro_registry {
    duro__orch_entry *orchs;
    size_t orch_count, orch_cap;
    duro__activity_entry *acts;
    size_t act_count, act_cap;
};

/* A deep copy; DURO_NOMEM. */
int duro__registry_copy(const duro_registry *src, duro_registry **out);
/* version NULL or "": the highest registered version (strverscmp). */
const duro__orch_entry *duro__registry_find_orch(const duro_registry *r,
                                                 const char *name,
                                                 const char *version);
const duro__activity_entry *duro__registry_find_activity(const duro_registry *r,
                                                         const char *name);
/* The engine configuration of entry `e` that does not depend on a
 * runtime: its code (C function or driver), user pointer and cancellation
 * options (cleanup_timeout_ms 0 when the entry has none of its own). */
void duro__registry_engine_config(const duro__orch_entry *e,
                                  duro__engine_config *cfg);

/* ---- cancellation token ------------------------------------------------ */

struct duro_cancel_token {
    _Atomic int refs;
    _Atomic int fired;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int efd;               /* eventfd, -1 until asked for; under lock */
    char reason[64];       /* first reason; written once before fired is set */
    int64_t fired_mono_ns; /* when it fired, for latency figures */
};

duro_cancel_token *duro__token_create(void); /* refs = 1; NULL on OOM */
void duro__token_retain(duro_cancel_token *t);
/* Fires the token once (later calls keep the first reason). Returns 1 when
 * this call fired it. */
int duro__token_fire(duro_cancel_token *t, const char *reason);

/* ---- activity context -------------------------------------------------- */

struct duro_activity {
    char *instance_id;
    uint64_t execution_id;
    char *name;
    uint64_t activity_id;
    uint32_t attempt;
    uint32_t delivery;
    char *input;
    void *user;
    duro_cancel_token *token;
};

/* ---- the runtime ----------------------------------------------------------
 */

typedef struct duro__engine_cache duro__engine_cache;
typedef struct duro__manager duro__manager;
typedef struct duro__inflight duro__inflight;

struct duro_runtime {
    duro_runtime_options opts;
    duro__logger logger;
    duro_provider *provider;
    int owns_provider;
    duro_registry *registry;
    duro__engine_cache *cache;
    duro__manager *manager;

    pthread_mutex_t lock;
    int started;
    int stopping;          /* dispatchers stop taking work */
    _Atomic int stop_flag; /* mirror of stopping for lock-free checks */
    /* monotonic ms by which duro_runtime_shutdown returns, set before it
     * joins anything; INT64_MAX before a shutdown (and for one without a
     * deadline). Read lock-free by the retry loops that must not outlast
     * it (duro__runtime_backoff, ack_with_retries in worker.c). */
    _Atomic int64_t shutdown_deadline_ms;
    /* completions whose ack a shutdown gave up at its deadline (the store
     * kept failing): the shutdown then returns DURO_TIMEOUT. Those given up
     * at their lock's deadline count only in metrics.m_acks_given_up. */
    _Atomic int acks_given_up;
    /* per duro_queue: monotonic ms of the first retryable failure of a
     * fetch since the last success, 0 while the store answers
     * (duro__runtime_storage_failed); written under storage_log_lock, read
     * without it by duro__runtime_storage_ok's fast path */
    _Atomic int64_t storage_down_ms[2];
    /* Guards the three below; taken only on a failed fetch, or on the
     * first success after one; nothing is taken under it (the log line is
     * written after it is released). */
    pthread_mutex_t storage_log_lock;
    /* per duro_queue, then [1] retryable failures (WARN), [0] the others
     * (ERROR): */
    int64_t storage_logged_ms[2][2];  /* last one logged at that level,
                                         0 never */
    int64_t storage_suppressed[2][2]; /* at DEBUG since then */
    int storage_announced[2];         /* this outage has a WARN or ERROR
                                         line */
    pthread_t *orch_threads;
    int orch_thread_count;
    /* worker slots (see worker.c) */
    struct duro__slot_ctx **slots;
    int slot_count;
    _Atomic int live_slot_threads; /* slot threads not yet exited */
    pthread_cond_t slots_cond;     /* signalled when a slot thread exits */

    /* What a test environment's virtual clock (test_env.c) needs to know
     * before it skips time: the loop threads (turn threads and worker slots,
     * counted from before their start to their exit or abandonment) that
     * are not idle in wait_for_work, in the low DURO__LOOPS_BUSY_BITS bits;
     * above them a count of every change, so that equal values before and
     * after a read of the store prove no thread fetched, ran or acked
     * anything meanwhile (services.c). */
    _Atomic uint64_t loops;

    /* the schedule firing thread (schedule_firing.c); NULL when not started */
    struct duro__schedules *schedules;

    /* counters and histograms, updated with relaxed atomics (metrics.c) */
    duro__metrics metrics;

    /* Its row among the live runtimes (provider version 12; services.c):
     * written at start and every DURO__HEARTBEAT_MS by the manager's
     * thread, removed at shutdown. Set at create, read-only after. */
    char runtime_id[33]; /* random hex, unique */
    char host[256];      /* gethostname(); "" when unknown */
    int64_t started_ms;  /* wall ms of duro_runtime_create */
};

/* How often a runtime writes its heartbeat; it counts as gone after
 * DURO_RUNTIME_MISSED_HEARTBEATS of them (30 s). */
#define DURO__HEARTBEAT_MS 10000

/* A runtime-wide counter of rt->metrics (m_poison, m_storage_retries ...);
 * per-name counts go through the duro__metrics_* calls. */
#define DURO__COUNT(rt, field)                                                 \
    atomic_fetch_add_explicit(&(rt)->metrics.field, 1, memory_order_relaxed)

/* 1 on a thread the runtime started (turn threads, slots, manager). */
int duro__on_runtime_thread(void);
void duro__mark_runtime_thread(void);

/* ---- engine cache (engine_cache.c) --------------------------------------- */

/* At most `capacity` engines and, when max_bytes > 0, at most max_bytes of
 * them (duro__engine_bytes, measured as each is put back). */
int duro__cache_create(size_t capacity, size_t max_bytes,
                       duro__engine_cache **out);
void duro__cache_destroy(duro__engine_cache *c); /* destroys the engines */
/* Destroys every engine kept (after releasing the lock); the cache stays
 * usable. */
void duro__cache_clear(duro__engine_cache *c);
/* Takes the engine of (instance, execution) out of the cache; NULL if none.
 * Engines of other executions of the instance are destroyed. */
duro_orch *duro__cache_take(duro__engine_cache *c, const char *instance_id,
                            uint64_t execution_id);
/* Puts an engine back (the cache owns it); may evict and destroy the least
 * recently used ones, this one too when it alone is over max_bytes. */
void duro__cache_put(duro__engine_cache *c, duro_orch *e);
/* The duro_history_cache callback (user = the cache). */
uint64_t duro__cache_cached_events(void *user, const char *instance_id,
                                   uint64_t execution_id);
size_t duro__cache_size(duro__engine_cache *c);
size_t duro__cache_bytes(duro__engine_cache *c); /* of the engines kept */

/* ---- orchestration dispatcher (orchestrator.c) ----------------------------
 */

void *duro__orchestration_thread(void *arg); /* arg: the runtime */

/* ---- worker slots and the activity manager (worker.c) -------------------- */

int duro__workers_start(duro_runtime *rt);
/* Stops fetching, waits up to timeout_ms for in-flight activities, then
 * fires and abandons what is left. Returns DURO_OK, or DURO_TIMEOUT when
 * activities were abandoned or completions could not be recorded before
 * the shutdown deadline (rt->acks_given_up). */
int duro__workers_stop(duro_runtime *rt, int64_t timeout_ms);
void duro__workers_free(duro_runtime *rt);
/* After a turn committed: fires the tokens of the cancelled activities that
 * run in this process. */
void duro__workers_cancel_local(duro_runtime *rt, const duro_activity_ref *refs,
                                const char **reasons, size_t count);

/* The loop threads' count (rt->loops): one more busy loop thread before
 * a turn thread or slot starts, one less when it exits or is abandoned. */
#define DURO__LOOPS_BUSY_BITS 20
void duro__runtime_loop_enter(duro_runtime *rt);
void duro__runtime_loop_leave(duro_runtime *rt);
/* A loop thread's wait_for_work(queue, poll_interval_ms) after a fetch
 * found nothing: the thread counts as idle while it waits. */
void duro__runtime_wait_for_work(duro_runtime *rt, duro_queue queue);
/* rt->loops now (*mark), and whether every loop thread is idle in it. */
int duro__runtime_loops_idle(duro_runtime *rt, uint64_t *mark);

/* The schedule firing thread (schedule_firing.c): started by duro_runtime_start
 * unless opts.schedules is 0, orchestration_concurrency is 0 or the store
 * has no schedules (provider version < 13); stopped by shutdown after
 * stop_flag is set. */
typedef struct duro__schedules duro__schedules;
int duro__schedules_start(duro_runtime *rt);
void duro__schedules_stop(duro_runtime *rt);

/* Sleeps up to ms unless the runtime is stopping (returns early). */
void duro__runtime_pause(duro_runtime *rt, int64_t ms);

/* The monotonic ms by which a shutdown in progress returns; INT64_MAX
 * before a shutdown. One atomic load. */
int64_t duro__runtime_deadline(duro_runtime *rt);

/* Until when an ack may still find the lock of the item it acks, for a
 * lock taken or renewed by a call that began at monotonic locked_ms with
 * timeout_ms: the store's lock began after locked_ms, so it lasts at least
 * until locked_ms + timeout_ms; a margin (a tenth of the timeout, at most
 * DURO__LOCK_MARGIN_MS) leaves the last attempt time to reach the store.
 * The ack retries of worker slots and turn threads stop there: past it,
 * another process may have taken the item and run it again. */
#define DURO__LOCK_MARGIN_MS 1000
int64_t duro__lock_deadline(int64_t locked_ms, int64_t timeout_ms);

/* The store calls a runtime may make at once, which sizes a provider's
 * connection pool (PostgreSQL's default pool=): one per turn thread, one
 * per worker slot up to DURO__POOL_SLOTS, and `others` (the activity
 * manager; a test environment's client too). Slots beyond DURO__POOL_SLOTS
 * share the connections: a slot holds one only for a store call (an ack,
 * a fetch), not while its activity runs, and with 16 slots 8 connections
 * carried the chain benchmark as fast as 16 did (bench/RESULTS.md, stop
 * 35), while each connection is a server process a DBA pays for.
 * 0 for options that create() refuses: they size nothing. */
#define DURO__POOL_SLOTS 8
int duro__pool_concurrency(int orchestration_concurrency,
                           int worker_concurrency, int others);

/* Sleeps ms between two attempts of a retry that still runs while the
 * runtime stops (an activity's ack): the whole ms before a shutdown, never
 * past its deadline once one has begun (also when it begins during the
 * sleep). Unlike duro__runtime_pause it does not return at once when the
 * runtime is stopping, so such a loop keeps its pace instead of spinning;
 * the loop decides itself when to give up (duro__runtime_deadline). */
void duro__runtime_backoff(duro_runtime *rt, int64_t ms);

/* A failed fetch of a runtime thread on `queue` (`what` names it: "fetch of
 * activity work"; retried in retry_ms, which the line says), counted in
 * storage_retries when retryable. An outage shows at the default log level
 * without flooding it, however its failures and successes alternate and
 * however many threads fail: a retryable failure on the queue is logged at
 * WARN, one that is not (a dropped schema, a revoked right) at ERROR, when
 * none of its kind was for DURO__STORAGE_WARN_EVERY_MS (the line counts
 * those logged at DEBUG since), else at DEBUG; duro__runtime_storage_ok()
 * logs the recovery at WARN only after an outage that such a line
 * announced. */
#define DURO__STORAGE_WARN_EVERY_MS 10000
void duro__runtime_storage_failed(duro_runtime *rt, duro_queue queue,
                                  const char *what, const duro_error *err,
                                  int64_t retry_ms);
/* A fetch on `queue` succeeded: ends an outage the log announced. One
 * atomic load when there was none. */
void duro__runtime_storage_ok(duro_runtime *rt, duro_queue queue);

/* Records (problem not NULL) or clears (NULL) why the runtime cannot make
 * progress with an instance, through set_instance_problem (provider
 * version 4; a no-op with an older one). next_attempt_ms is wall-clock
 * time, 0 when no retry is planned. Best effort: a failure is logged, not
 * returned (the problem is a diagnostic; the work goes on either way).
 * Called only on failure paths and to clear a problem seen: never on a
 * healthy turn or activity. */
void duro__runtime_set_problem(duro_runtime *rt, const char *instance_id,
                               const char *problem, int64_t next_attempt_ms);

/* The runtime's row among the live runtimes (register_runtime, provider
 * version 12; a no-op with an older one): what it runs from its registry,
 * where it runs, its heartbeat. Best effort, as a problem: a failure is
 * logged, and the next heartbeat writes the row again. heartbeat: at
 * start and then every DURO__HEARTBEAT_MS; unregister: at shutdown, after
 * the last heartbeat. */
void duro__runtime_heartbeat(duro_runtime *rt);
void duro__runtime_unregister(duro_runtime *rt);

/* How a live runtime is named to people: "host:pid" ("?" for an unknown
 * host), into out[size]. */
void duro__runtime_label(const duro_runtime_info *r, char *out, size_t size);

#endif
