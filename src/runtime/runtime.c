/* runtime.c - the runtime handle: options, creation on a store, starting and
 * stopping the dispatcher threads, metrics. A runtime is driven by one
 * thread at a time; its own threads are marked so that calls which would
 * deadlock from them (shutdown, destroy) are refused with DURO_MISUSE. */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "core/fiber.h"
#include "runtime/runtime.h"
#include "providers/providers.h"

static void set_defaults(duro_runtime_options *o)
{
    memset(o, 0, sizeof(*o));
    o->version = 5;
    o->orchestration_concurrency = 2;
    o->worker_concurrency = 24;
    o->orchestration_lock_timeout_ms = 30000;
    o->worker_lock_timeout_ms = 30000;
    o->lock_renewal_ms = 2000;
    o->poll_interval_ms = 200;
    o->max_attempts = 10;
    o->max_history_events = 50000;
    o->fiber_stack_size = 256 * 1024;
    o->fiber_cache_size = 1024;
    o->cancel_grace_ms = 10000;
    o->unknown_name_retry_ms = 1000;
    o->max_payload = 1048576;
    o->log_level = DURO_LOG_WARN;
    o->cleanup_timeout_ms = 300000;
    o->orchestration_batch = 0; /* the store's (its turn_batch) */
    o->keep_executions = 10;
    o->fiber_cache_bytes = (size_t)256 * 1024 * 1024;
    o->schedules = 1;
}

/* Where each version's struct ends (its last field's end; a caller's
 * sizeof may add tail padding). */
static const size_t options_end[] = {
    0,
    offsetof(duro_runtime_options, cleanup_timeout_ms),  /* 1 */
    offsetof(duro_runtime_options, orchestration_batch), /* 2 */
    offsetof(duro_runtime_options, keep_executions),     /* 3 */
    offsetof(duro_runtime_options, schedules),           /* 4 */
    sizeof(duro_runtime_options),                        /* 5 */
};

void duro_runtime_options_init_size(duro_runtime_options *o, size_t size)
{
    if (o == NULL)
        return;
    duro_runtime_options d;
    set_defaults(&d);
    int v = 5;
    while (v > 1 && size < options_end[v])
        v--;
    d.version = v;
    memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
}

void(duro_runtime_options_init)(duro_runtime_options *o)
{
    duro_runtime_options_init_size(o, options_end[3]);
}

/* Largest fiber_stack_size: far beyond what orchestration code needs,
 * and every cached fiber reserves its stack. */
#define MAX_FIBER_STACK ((size_t)256 * 1024 * 1024)
_Static_assert(MAX_FIBER_STACK <= DURO__FIBER_MAX_STACK,
               "the fiber code must accept every valid fiber_stack_size");

static int check_options(const duro_runtime_options *o)
{
    if (o->version < 1)
        return duro__fail(DURO_INVALID, "options.version is not set: call "
                                        "duro_runtime_options_init() first");
    if (o->version >= 2 && o->cleanup_timeout_ms <= 0)
        return duro__fail(DURO_INVALID, "cleanup_timeout_ms must be > 0");
    if (o->version >= 3 &&
        (o->orchestration_batch < 0 || o->orchestration_batch > 1024))
        return duro__fail(DURO_INVALID, "orchestration_batch must be 0..1024 "
                                        "(0: the store's choice)");
    if (o->orchestration_concurrency < 0 || o->orchestration_concurrency > 256)
        return duro__fail(DURO_INVALID,
                          "orchestration_concurrency must be 0..256");
    if (o->worker_concurrency < 0 || o->worker_concurrency > 4096)
        return duro__fail(DURO_INVALID, "worker_concurrency must be 0..4096");
    if (o->orchestration_concurrency == 0 && o->worker_concurrency == 0)
        return duro__fail(DURO_INVALID,
                          "orchestration_concurrency and worker_concurrency "
                          "are both 0: the runtime would run nothing");
    if (o->orchestration_lock_timeout_ms < 10 || o->worker_lock_timeout_ms < 10)
        return duro__fail(DURO_INVALID, "lock timeouts must be >= 10 ms");
    if (o->lock_renewal_ms < 1)
        return duro__fail(DURO_INVALID, "lock_renewal_ms must be >= 1");
    /* A renewal is due lock_renewal_ms after the previous one and must land
     * before the lock expires, worker_lock_timeout_ms after it: the half
     * left over is the margin for a late renewal (a busy store, a loaded
     * machine). With less, a healthy long activity loses its lock to another
     * worker, runs again and is eventually failed as poison. */
    if (o->lock_renewal_ms > o->worker_lock_timeout_ms / 2)
        return duro__fail(DURO_INVALID,
                          "lock_renewal_ms (%lld) must be at most half of "
                          "worker_lock_timeout_ms (%lld), i.e. <= %lld: "
                          "renewals need a margin before the lock expires",
                          (long long)o->lock_renewal_ms,
                          (long long)o->worker_lock_timeout_ms,
                          (long long)(o->worker_lock_timeout_ms / 2));
    if (o->poll_interval_ms < 1)
        return duro__fail(DURO_INVALID, "poll_interval_ms must be >= 1");
    if (o->version >= 5 && o->schedules != 0 && o->schedules != 1)
        return duro__fail(DURO_INVALID, "schedules must be 0 or 1");
    if (o->max_attempts < 1)
        return duro__fail(DURO_INVALID, "max_attempts must be >= 1");
    if (o->cancel_grace_ms < 0 || o->unknown_name_retry_ms < 0)
        return duro__fail(DURO_INVALID,
                          "cancel_grace_ms and unknown_name_retry_ms must "
                          "be >= 0");
    if (o->max_payload < 1)
        return duro__fail(DURO_INVALID, "max_payload must be >= 1");
    /* Checked here: the fiber code would refuse it on every turn. */
    if (o->fiber_stack_size < DURO__FIBER_MIN_STACK ||
        o->fiber_stack_size > MAX_FIBER_STACK)
        return duro__fail(DURO_INVALID,
                          "fiber_stack_size (%zu) must be %zu..%zu bytes "
                          "(16 KiB..256 MiB)",
                          o->fiber_stack_size, DURO__FIBER_MIN_STACK,
                          MAX_FIBER_STACK);
    return DURO_OK;
}

static int create(duro_provider *p, int owns, const duro_registry *reg,
                  const duro_runtime_options *opts, duro_runtime **out)
{
    duro_runtime_options defaults;
    if (opts == NULL) {
        duro_runtime_options_init(&defaults);
        opts = &defaults;
    }
    int rc = check_options(opts);
    if (rc != DURO_OK)
        return rc;
    /* A runtime on a store it cannot write would start and then retry
     * every fetch for ever: fail now, with the reason. */
    duro_error werr;
    if (duro__provider_check_writable(p, &werr) != DURO_OK)
        return duro__fail_from(&werr);
    duro_runtime *rt = duro__calloc(1, sizeof(*rt));
    if (rt == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    if (opts->version >= 5) {
        rt->opts = *opts;
    } else {
        /* a caller built against an older version has no fields past its
         * version's last: those keep their defaults */
        duro_runtime_options_init(&rt->opts);
        memcpy(&rt->opts, opts, options_end[opts->version]);
    }
    if (rt->opts.orchestration_batch == 0)
        rt->opts.orchestration_batch =
            p->version >= 11 && p->turn_batch >= 1 && p->turn_batch <= 1024
                ? p->turn_batch
                : 16;
    rt->logger.level = opts->log_level;
    rt->logger.fn = opts->log_fn;
    rt->logger.user = opts->log_user;
    rt->provider = p;
    rt->owns_provider = owns;
    duro__random_token(rt->runtime_id);
    if (gethostname(rt->host, sizeof(rt->host)) != 0)
        rt->host[0] = '\0';
    rt->host[sizeof(rt->host) - 1] = '\0';
    rt->started_ms = duro__wall_ms();
    atomic_init(&rt->shutdown_deadline_ms, INT64_MAX);
    pthread_mutex_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->storage_log_lock, NULL);
    duro__cond_init_monotonic(&rt->slots_cond);
    rc = duro__registry_copy(reg, &rt->registry);
    if (rc == DURO_OK)
        rc = duro__metrics_init(&rt->metrics, rt->registry, p->name,
                                opts->worker_concurrency);
    if (rc == DURO_OK)
        rc = duro__cache_create(rt->opts.fiber_cache_size,
                                rt->opts.fiber_cache_bytes, &rt->cache);
    if (rc != DURO_OK) {
        rt->owns_provider = 0;
        duro_runtime_destroy(rt);
        return duro__fail(rc, "out of memory");
    }
    *out = rt;
    return DURO_OK;
}

int duro__pool_concurrency(int orchestration_concurrency,
                           int worker_concurrency, int others)
{
    if (orchestration_concurrency < 0 || worker_concurrency < 0 ||
        orchestration_concurrency > 256 || worker_concurrency > 4096)
        return 0;
    return orchestration_concurrency +
           DURO__MIN(worker_concurrency, DURO__POOL_SLOTS) + others;
}

int duro_runtime_create(const char *url, const duro_registry *reg,
                        const duro_runtime_options *opts, duro_runtime **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    if (reg == NULL)
        return duro__fail(DURO_INVALID, "registry is NULL");
    /* Threads that may use the store at once: every turn thread, the worker
     * slots up to DURO__POOL_SLOTS (duro__pool_concurrency) and the activity
     * manager (renewals, cancellation checks). A provider with a connection
     * pool sizes it from this. Options that create() will refuse size
     * nothing. */
    duro_runtime_options defaults;
    duro_runtime_options_init(&defaults);
    /* Fields of version 1 only: a caller's struct of an older version is
     * shorter than this one, and must not be read past its end. */
    const duro_runtime_options *o = opts != NULL ? opts : &defaults;
    int concurrency = duro__pool_concurrency(o->orchestration_concurrency,
                                             o->worker_concurrency, 1);
    duro_provider *p;
    duro_error err;
    int rc = duro__provider_open_for(url, concurrency, &p, &err);
    if (rc != DURO_OK)
        return duro__fail_from(&err);
    rc = create(p, 1, reg, opts, out);
    if (rc != DURO_OK)
        duro_provider_close(p);
    return rc;
}

int duro_runtime_create_with_provider(duro_provider *p,
                                      const duro_registry *reg,
                                      const duro_runtime_options *opts,
                                      duro_runtime **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    if (p == NULL || reg == NULL)
        return duro__fail(DURO_INVALID, "provider or registry is NULL");
    if (p->version < 1)
        return duro__fail(DURO_UNSUPPORTED, "provider version %d < 1",
                          p->version);
    return create(p, 0, reg, opts, out);
}

int duro_runtime_start(duro_runtime *rt)
{
    if (rt == NULL)
        return duro__fail(DURO_INVALID, "runtime is NULL");
    if (duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "duro_runtime_start called from orchestration code");
    pthread_mutex_lock(&rt->lock);
    if (rt->stopping) {
        pthread_mutex_unlock(&rt->lock);
        return duro__fail(DURO_INVALID_STATE,
                          "runtime was shut down and cannot start again; "
                          "create a new runtime");
    }
    if (rt->started) {
        pthread_mutex_unlock(&rt->lock);
        return duro__fail(DURO_INVALID_STATE, "runtime already started");
    }
    rt->started = 1;
    pthread_mutex_unlock(&rt->lock);
    rt->provider->wake(rt->provider, 0);
    /* listed among the live runtimes before it takes any work; the
     * manager's thread keeps the row fresh */
    duro__runtime_heartbeat(rt);
    int rc = duro__workers_start(rt);
    if (rc != DURO_OK) {
        duro_runtime_shutdown(rt, 0);
        return rc;
    }
    rt->orch_threads = duro__calloc((size_t)rt->opts.orchestration_concurrency,
                                    sizeof(pthread_t));
    if (rt->orch_threads == NULL) {
        duro_runtime_shutdown(rt, 0);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    for (int i = 0; i < rt->opts.orchestration_concurrency; i++) {
        duro__runtime_loop_enter(rt);
        if (pthread_create(&rt->orch_threads[i], NULL,
                           duro__orchestration_thread, rt) != 0) {
            duro__runtime_loop_leave(rt);
            duro_runtime_shutdown(rt, 0);
            return duro__fail(DURO_ERROR,
                              "could not start orchestration threads");
        }
        rt->orch_thread_count++;
    }
    if ((rc = duro__schedules_start(rt)) != DURO_OK) {
        duro_runtime_shutdown(rt, 0);
        return rc;
    }
    return DURO_OK;
}

int duro_runtime_shutdown(duro_runtime *rt, int64_t timeout_ms)
{
    if (rt == NULL)
        return duro__fail(DURO_INVALID, "runtime is NULL");
    if (duro__on_runtime_thread() || duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "duro_runtime_shutdown called from a thread of the "
                          "runtime (an activity or orchestration); it would "
                          "wait for itself");
    pthread_mutex_lock(&rt->lock);
    if (!rt->started || rt->stopping) {
        pthread_mutex_unlock(&rt->lock);
        return DURO_OK;
    }
    rt->stopping = 1;
    /* The deadline first: a slot that sees the stop flag finds it set. */
    int64_t start = duro__mono_ms();
    atomic_store(&rt->shutdown_deadline_ms, duro__add_ms(start, timeout_ms));
    atomic_store(&rt->stop_flag, 1);
    pthread_mutex_unlock(&rt->lock);
    rt->provider->wake(rt->provider, 1);
    duro__schedules_stop(rt);
    for (int i = 0; i < rt->orch_thread_count; i++)
        pthread_join(rt->orch_threads[i], NULL);
    rt->orch_thread_count = 0;
    /* A runtime never runs again once shut down: the suspended
     * orchestrations it kept are released now, on this thread (drivers'
     * destroy callbacks, duro_orch_on_destroy hooks), not at destroy. */
    duro__cache_clear(rt->cache);
    int64_t left = duro__add_ms(timeout_ms, -(duro__mono_ms() - start));
    int rc = duro__workers_stop(rt, left > 0 ? left : 0);
    /* after the manager's last heartbeat: nothing writes the row again */
    duro__runtime_unregister(rt);
    if (rc != DURO_OK)
        duro__fail(rc, "activities still running at the shutdown deadline "
                       "were returned to the queue, or their completions "
                       "could not be recorded in time: they run again");
    return rc;
}

void duro_runtime_destroy(duro_runtime *rt)
{
    if (rt == NULL)
        return;
    if (duro__on_runtime_thread() || duro__engine_in_code()) {
        duro__fail(DURO_MISUSE, "duro_runtime_destroy called from a runtime "
                                "thread; ignored");
        return;
    }
    if (rt->started)
        duro_runtime_shutdown(rt, rt->opts.cancel_grace_ms);
    duro__workers_free(rt);
    duro__cache_destroy(rt->cache);
    /* the stacks of its fibers, pooled as they were destroyed, go back to
     * the kernel (another runtime of the process maps them again) */
    duro__fiber_pool_trim();
    duro__metrics_free(&rt->metrics);
    duro_registry_destroy(rt->registry);
    if (rt->owns_provider)
        duro_provider_close(rt->provider);
    duro__free(rt->orch_threads);
    pthread_cond_destroy(&rt->slots_cond);
    pthread_mutex_destroy(&rt->lock);
    pthread_mutex_destroy(&rt->storage_log_lock);
    duro__free(rt);
}

void duro_runtime_metrics(duro_runtime *rt, duro_metrics *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (rt == NULL)
        return;
    duro__metrics_totals(&rt->metrics, out);
}

int duro_runtime_metrics_write(duro_runtime *rt, FILE *out)
{
    if (rt == NULL || out == NULL)
        return duro__fail(DURO_INVALID, "runtime or stream is NULL");
    if (duro__metrics_expose(&rt->metrics, out, NULL, 0, NULL) != DURO_OK)
        return duro__fail(DURO_ERROR, "writing the metrics failed: %s",
                          strerror(errno));
    return DURO_OK;
}

int duro_runtime_metrics_format(duro_runtime *rt, char *buf, size_t size,
                                size_t *needed)
{
    if (needed != NULL)
        *needed = 0;
    if (rt == NULL)
        return duro__fail(DURO_INVALID, "runtime is NULL");
    if (buf == NULL && size > 0)
        return duro__fail(DURO_INVALID, "buf is NULL but size is %zu", size);
    size_t len = 0;
    duro__metrics_expose(&rt->metrics, NULL, buf, size, &len);
    if (needed != NULL)
        *needed = len;
    if (len >= size) {
        if (size > 0)
            buf[0] = '\0'; /* never a part of the text */
        return duro__fail(DURO_TOO_LARGE,
                          "the metrics text is %zu bytes; the buffer holds "
                          "%zu with the NUL",
                          len, size);
    }
    return DURO_OK;
}
