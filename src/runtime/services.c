/* services.c - what the runtime's threads (turn threads, worker slots,
 * the activity manager) use of their runtime: the marks of its threads,
 * their waits for work and the count of those not idle (which a test
 * environment reads before it skips time), pauses and backoffs that end at
 * a shutdown's deadline, lock deadlines, the log of storage outages,
 * recorded problems, its row among the live runtimes. Below runtime.c,
 * worker.c, manager.c and orchestrator.c; calls none of them. */
#include <stdio.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "providers/providers.h"

static _Thread_local int runtime_thread;

int duro__on_runtime_thread(void)
{
    return runtime_thread;
}

void duro__mark_runtime_thread(void)
{
    runtime_thread = 1;
}

void duro__runtime_pause(duro_runtime *rt, int64_t ms)
{
    int64_t end = duro__add_ms(duro__mono_ms(), ms);
    while (!atomic_load(&rt->stop_flag)) {
        int64_t left = end - duro__mono_ms();
        if (left <= 0)
            return;
        duro__sleep_ms(DURO__MIN(left, 10));
    }
}

/* One change of rt->loops: a busy thread more (+1) or fewer (-1). */
#define LOOP_CHANGE ((uint64_t)1 << DURO__LOOPS_BUSY_BITS)

void duro__runtime_loop_enter(duro_runtime *rt)
{
    atomic_fetch_add(&rt->loops, LOOP_CHANGE + 1);
}

void duro__runtime_loop_leave(duro_runtime *rt)
{
    atomic_fetch_add(&rt->loops, LOOP_CHANGE - 1);
}

void duro__runtime_wait_for_work(duro_runtime *rt, duro_queue queue)
{
    duro_error err;
    duro__runtime_loop_leave(rt);
    rt->provider->wait_for_work(rt->provider, queue, rt->opts.poll_interval_ms,
                                &err);
    duro__runtime_loop_enter(rt);
}

int duro__runtime_loops_idle(duro_runtime *rt, uint64_t *mark)
{
    *mark = atomic_load(&rt->loops);
    return (*mark & (LOOP_CHANGE - 1)) == 0;
}

int64_t duro__runtime_deadline(duro_runtime *rt)
{
    return atomic_load(&rt->shutdown_deadline_ms);
}

int64_t duro__lock_deadline(int64_t locked_ms, int64_t timeout_ms)
{
    int64_t margin = DURO__MIN(timeout_ms / 10, (int64_t)DURO__LOCK_MARGIN_MS);
    return duro__add_ms(locked_ms, timeout_ms - margin);
}

void duro__runtime_backoff(duro_runtime *rt, int64_t ms)
{
    int64_t end = duro__add_ms(duro__mono_ms(), ms);
    for (;;) {
        int64_t left =
            DURO__MIN(end, duro__runtime_deadline(rt)) - duro__mono_ms();
        if (left <= 0)
            return;
        /* in slices: a shutdown that begins meanwhile brings the end
         * forward to its deadline */
        duro__sleep_ms(DURO__MIN(left, 10));
    }
}

void duro__runtime_storage_failed(duro_runtime *rt, duro_queue queue,
                                  const char *what, const duro_error *err,
                                  int64_t retry_ms)
{
    int retryable = err->retryable != 0;
    if (retryable)
        DURO__COUNT(rt, m_storage_retries);
    pthread_mutex_lock(&rt->storage_log_lock);
    int64_t now = duro__mono_ms();
    if (atomic_load(&rt->storage_down_ms[queue]) == 0) {
        atomic_store(&rt->storage_down_ms[queue], now);
        rt->storage_announced[queue] = 0;
    }
    /* at most one line at WARN (ERROR) per interval, whether the failures
     * come in one outage or in many short ones between successes */
    int64_t *logged = &rt->storage_logged_ms[queue][retryable];
    int64_t *suppressed_now = &rt->storage_suppressed[queue][retryable];
    int loud = *logged == 0 || now - *logged >= DURO__STORAGE_WARN_EVERY_MS;
    long long suppressed = *suppressed_now;
    if (loud) {
        *logged = now;
        *suppressed_now = 0;
        rt->storage_announced[queue] = 1;
    } else {
        (*suppressed_now)++;
    }
    pthread_mutex_unlock(&rt->storage_log_lock);
    if (!loud) {
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "%s failed: %s; retrying in %lld ms", what, err->message,
                  (long long)retry_ms);
        return;
    }
    char since[96] = "";
    if (suppressed > 0)
        snprintf(since, sizeof(since),
                 "; %lld failures since the last %s were logged at debug "
                 "level",
                 suppressed, retryable ? "warning" : "error");
    duro__log(&rt->logger, retryable ? DURO_LOG_WARN : DURO_LOG_ERROR,
              "%s failed: %s; retrying in %lld ms (further failures are "
              "logged at debug level, with %s at most every %d s%s)",
              what, err->message, (long long)retry_ms,
              retryable ? "a warning" : "an error",
              DURO__STORAGE_WARN_EVERY_MS / 1000, since);
}

void duro__runtime_storage_ok(duro_runtime *rt, duro_queue queue)
{
    if (atomic_load_explicit(&rt->storage_down_ms[queue],
                             memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&rt->storage_log_lock);
    int64_t since = atomic_exchange(&rt->storage_down_ms[queue], 0);
    int announced = rt->storage_announced[queue];
    rt->storage_announced[queue] = 0;
    pthread_mutex_unlock(&rt->storage_log_lock);
    /* a recovery is news only after an outage the log announced */
    if (since != 0)
        duro__log(&rt->logger, announced ? DURO_LOG_WARN : DURO_LOG_DEBUG,
                  "the store answers again: %s work is fetched after %lld ms "
                  "of failures",
                  queue == DURO_QUEUE_ORCHESTRATOR ? "orchestration"
                                                   : "activity",
                  (long long)(duro__mono_ms() - since));
}

void duro__runtime_set_problem(duro_runtime *rt, const char *instance_id,
                               const char *problem, int64_t next_attempt_ms)
{
    duro_provider *p = rt->provider;
    if (p->version < 4 || p->set_instance_problem == NULL)
        return;
    /* Problems are composed from parts cut to a byte count: a split
     * character would make the store refuse them. */
    char text[DURO_ERROR_MESSAGE_MAX];
    if (problem != NULL) {
        snprintf(text, sizeof(text), "%s", problem);
        duro__utf8_scrub(text);
        problem = text;
    }
    duro_error err;
    int rc = p->set_instance_problem(p, instance_id, problem,
                                     next_attempt_ms > 0 ? next_attempt_ms : 0,
                                     &err);
    if (rc != DURO_OK && rc != DURO_NOT_FOUND) {
        if (err.retryable)
            DURO__COUNT(rt, m_storage_retries);
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "recording the problem of instance '%s' failed: %s",
                  instance_id, err.message);
    }
}

void duro__runtime_label(const duro_runtime_info *r, char *out, size_t size)
{
    snprintf(out, size, "%.200s:%lld",
             r->host != NULL && r->host[0] != '\0' ? r->host : "?",
             (long long)r->pid);
}

void duro__runtime_heartbeat(duro_runtime *rt)
{
    duro_provider *p = rt->provider;
    if (p->version < 12 || p->register_runtime == NULL)
        return;
    const duro_registry *reg = rt->registry;
    /* the registry is the runtime's own copy, unchanged while it runs:
     * the row borrows its strings */
    duro_runtime_orchestration *orchs =
        duro__calloc(reg->orch_count + 1, sizeof(*orchs));
    const char **acts = duro__calloc(reg->act_count + 1, sizeof(*acts));
    if (orchs == NULL || acts == NULL) {
        duro__free(orchs);
        duro__free(acts);
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "heartbeat skipped: out of memory");
        return;
    }
    for (size_t i = 0; i < reg->orch_count; i++) {
        orchs[i].name = reg->orchs[i].name;
        orchs[i].version = reg->orchs[i].version;
    }
    for (size_t i = 0; i < reg->act_count; i++)
        acts[i] = reg->acts[i].name;
    duro_runtime_info info = {.runtime_id = rt->runtime_id,
                              .host = rt->host,
                              .pid = (int64_t)getpid(),
                              .started_ms = rt->started_ms,
                              .heartbeat_every_ms = DURO__HEARTBEAT_MS,
                              .orchestrations = orchs,
                              .orchestration_count = reg->orch_count,
                              .activities = acts,
                              .activity_count = reg->act_count};
    duro_error err;
    int rc = p->register_runtime(p, &info, &err);
    duro__free(orchs);
    duro__free(acts);
    if (rc != DURO_OK) {
        if (err.retryable)
            DURO__COUNT(rt, m_storage_retries);
        /* a store that is down says so through the fetches; a refusal
         * (a name the store cannot hold) is this runtime's to fix */
        duro__log(&rt->logger, err.retryable ? DURO_LOG_DEBUG : DURO_LOG_WARN,
                  "recording this runtime among the live runtimes failed: "
                  "%s",
                  err.message);
    }
}

void duro__runtime_unregister(duro_runtime *rt)
{
    duro_provider *p = rt->provider;
    if (p->version < 12 || p->remove_runtime == NULL)
        return;
    duro_error err;
    int rc = p->remove_runtime(p, rt->runtime_id, &err);
    if (rc != DURO_OK && rc != DURO_NOT_FOUND)
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "removing this runtime from the live runtimes failed: %s "
                  "(it counts as gone once its heartbeats stop)",
                  err.message);
}
