/* orchestrator.c - the orchestration dispatcher: each turn thread fetches
 * instances under their instance locks (up to orchestration_batch at once,
 * with a provider that can), runs each turn on a kept or replayed engine,
 * and commits everything the turns decided in one transaction
 * (ack_and_fetch_orchestration_items, or one ack_orchestration_item per
 * turn). After the commit it fires the tokens of cancelled activities
 * running in this process. Runs user orchestration code (on fibers, or a
 * driver's steps on the turn thread's stack); holds no lock while doing
 * so. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

typedef struct turn_ctx {
    duro_runtime *rt;
    duro_provider *p;
    duro_orch_item *item;
    duro__turn *turn;
    duro__plan plan;
    duro_work_item start; /* copy of the start message, version fixed */
    int has_start;
    const duro__orch_entry *entry;
    duro_history *full;    /* full history, when it had to be read */
    int64_t fetched_ms;    /* monotonic: when the fetch that locked the
                              item began (its lock's deadline counts from
                              it) */
    duro_orch_item **next; /* non-NULL: ack and fetch the next item in
                              one transaction (provider version 2) */
    int64_t *next_ms;      /* with next: set to when that ack began */
    int codeless;          /* decide the turn without running code */
    char limit_why[DURO_ERROR_MESSAGE_MAX]; /* which history cap applied,
                                               when DURO_HISTORY_LIMIT */
    char problem[DURO_ERROR_MESSAGE_MAX];   /* why the batch was abandoned
                                               for another try, "" if not */
    int64_t retry_at;                       /* when it comes back (wall) */
    /* the turn run_turn prepared, for its ack */
    duro_orch_ack ack;
    int64_t begin_ns;
    int warm;          /* the engine came from the cache */
    int terminal;      /* the engine was not kept */
    int had_problem;   /* the instance has a recorded problem */
    int ack_attempted; /* the common ack of its batch (1), or an earlier
                          attempt of its own ack (2), failed first, in a
                          way that may have committed */
    int ack_gave_up;   /* its ack kept failing until the lock's deadline
                          or a shutdown's (retry_ack) */
} turn_ctx;

/* The turns one thread commits together (ack_and_fetch_orchestration_items):
 * each deferred turn keeps its context and its own turn output until the
 * common ack has settled. */
typedef struct turn_batch {
    turn_ctx *ctx;
    duro__turn *turns;
    const char **tokens;
    duro_orch_ack *acks;
    size_t count, cap;
} turn_batch;

static int64_t unknown_name_delay(const duro_runtime *rt, uint32_t attempt)
{
    int64_t d = rt->opts.unknown_name_retry_ms;
    for (uint32_t i = 1; i < attempt && d < 60000; i++)
        d *= 2;
    return DURO__MIN(d, 60000);
}

/* Appends printf text to out[size] (cut to fit, always terminated). */
static void append(char *out, size_t size, const char *fmt, ...)
    DURO_PRINTF(3, 4);
static void append(char *out, size_t size, const char *fmt, ...)
{
    size_t used = strlen(out);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + used, size - used, fmt, ap);
    va_end(ap);
}

/* 1 when live runtime r registers orchestration `name` at `version`
 * (NULL: at any version, as an instance started without one runs the
 * highest a runtime has). */
static int registers(const duro_runtime_info *r, const char *name,
                     const char *version)
{
    for (size_t i = 0; i < r->orchestration_count; i++)
        if (strcmp(r->orchestrations[i].name, name) == 0 &&
            (version == NULL ||
             strcmp(r->orchestrations[i].version, version) == 0))
            return 1;
    return 0;
}

/* What the live runtimes (provider version 12) say of orchestration
 * `name` at `version`, which this runtime does not have: appends to
 * out[size] "; live runtimes: host-a:1234 (this one) has 1, 2; host-b:99
 * has 1, 2, 3" - the versions of `name` each registers, "none" when it has
 * none ("(default)" for the default version) - or, when the store cannot
 * tell, nothing. Returns 1 when another live runtime registers it: that
 * one runs it, this one passes it on. */
static int live_runtimes(duro_runtime *rt, const char *name,
                         const char *version, char *out, size_t size)
{
    duro_provider *p = rt->provider;
    if (p->version < 12 || p->list_runtimes == NULL)
        return 0;
    duro_runtime_list *list = NULL;
    duro_error err;
    if (p->list_runtimes(p, &list, &err) != DURO_OK) {
        if (err.retryable)
            DURO__COUNT(rt, m_storage_retries);
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "reading the live runtimes failed: %s", err.message);
        return 0;
    }
    int elsewhere = 0;
    append(out, size, "; live runtimes:");
    for (size_t i = 0; i < list->count; i++) {
        const duro_runtime_info *r = &list->items[i];
        int mine = strcmp(r->runtime_id, rt->runtime_id) == 0;
        if (!mine && registers(r, name, version))
            elsewhere = 1;
        char label[256];
        duro__runtime_label(r, label, sizeof(label));
        append(out, size, "%s %s%s has", i > 0 ? ";" : "", label,
               mine ? " (this one)" : "");
        int any = 0;
        for (size_t k = 0; k < r->orchestration_count; k++) {
            const duro_runtime_orchestration *o = &r->orchestrations[k];
            if (strcmp(o->name, name) != 0)
                continue;
            append(out, size, "%s %.100s", any ? "," : "",
                   o->version[0] != '\0' ? o->version : "(default)");
            any = 1;
        }
        if (!any)
            append(out, size, " none");
    }
    if (list->count == 0)
        append(out, size, " none");
    duro_runtime_list_free(list);
    return elsewhere;
}

/* The instance waits for a runtime that has its orchestration: passed on
 * without counting the delivery (provider version 12), so the runtime
 * that has it never finds it poison. */
static void pass_on(turn_ctx *c, int64_t delay_ms)
{
    duro_error err;
    int rc = c->p->pass_orchestration_item(c->p, c->item->lock_token, delay_ms,
                                           &err);
    if (rc != DURO_OK)
        duro__log(&c->rt->logger, DURO_LOG_DEBUG,
                  "passing instance '%s' on failed: %s (at the latest its "
                  "lock expires)",
                  c->item->instance_id, err.message);
}

/* A delivery past max_attempts runs the turn that fails the instance as
 * poison. */
static int failing_as_poison(const turn_ctx *c)
{
    return c->item->attempt > c->rt->opts.max_attempts;
}

/* Abandons the batch after a failed turn and notes why, for the instance's
 * status (process_item records it). */
static void retry_later(turn_ctx *c, int64_t delay_ms, const char *what,
                        const char *detail)
{
    if (failing_as_poison(c))
        snprintf(c->problem, sizeof(c->problem),
                 "%s while failing the instance as poison (delivery %u, past "
                 "max_attempts %u; tried again in %lld ms): %.300s",
                 what, c->item->attempt, c->rt->opts.max_attempts,
                 (long long)delay_ms, detail);
    else
        snprintf(c->problem, sizeof(c->problem),
                 "%s (delivery %u; the batch fails as poison after "
                 "max_attempts %u): %.300s",
                 what, c->item->attempt, c->rt->opts.max_attempts, detail);
    c->retry_at = duro__add_ms(duro__wall_ms(), delay_ms);
}

/* What a failed ack means, for the log and the instance's status, when
 * the forecast "fails as poison after max_attempts" does not hold: the
 * store refused the write (not retryable), so the poison failure, a write
 * too, may be refused as well; or it already was. Writes it into c->problem
 * (with the next try after delay_ms) and returns 1; 0 for the other
 * failures, which retry_later describes. */
static int refused_problem(turn_ctx *c, int rc, const duro_error *err,
                           int64_t delay_ms)
{
    unsigned attempt = c->item->attempt, max = c->rt->opts.max_attempts;
    if (failing_as_poison(c) && !err->retryable && rc == DURO_STORAGE)
        snprintf(c->problem, sizeof(c->problem),
                 "the store refuses writes: the instance cannot progress "
                 "until the store is repaired (delivered %u times, past "
                 "max_attempts %u: failing it as poison is refused too; "
                 "tried again in %lld ms): %.300s",
                 attempt, max, (long long)delay_ms, err->message);
    else if (failing_as_poison(c))
        snprintf(c->problem, sizeof(c->problem),
                 "failing the instance as poison could not be committed "
                 "(delivery %u, past max_attempts %u; tried again in %lld "
                 "ms): %.300s",
                 attempt, max, (long long)delay_ms, err->message);
    else if (!err->retryable && rc == DURO_STORAGE)
        snprintf(c->problem, sizeof(c->problem),
                 "the turn could not be committed, the store refused it "
                 "(delivery %u; tried again in %lld ms; after max_attempts "
                 "%u the instance is failed as poison, if the store takes "
                 "that write): %.300s",
                 attempt, (long long)delay_ms, max, err->message);
    else
        return 0;
    c->retry_at = duro__add_ms(duro__wall_ms(), delay_ms);
    return 1;
}

static int abandon(turn_ctx *c, int64_t delay_ms)
{
    duro_error err;
    int rc = c->p->abandon_orchestration_item(c->p, c->item->lock_token,
                                              delay_ms, &err);
    if (rc != DURO_OK)
        duro__log(&c->rt->logger, DURO_LOG_DEBUG,
                  "abandon of instance '%s' failed: %s (a provider that "
                  "can abandons it again once the store answers; at the "
                  "latest its lock expires)",
                  c->item->instance_id, err.message);
    return rc;
}

/* Consumes the batch without changing the instance. When the ack fails,
 * the batch is abandoned like a failed turn's, so it is dropped again soon
 * rather than when its lock expires. */
static void drop_batch(turn_ctx *c, const char *why)
{
    duro_orch_ack ack = {.execution_id = c->item->execution_id};
    duro_error err;
    duro__log(&c->rt->logger, DURO_LOG_DEBUG,
              "dropping %zu message(s) for instance '%s': %s",
              c->item->message_count, c->item->instance_id, why);
    int rc =
        c->p->ack_orchestration_item(c->p, c->item->lock_token, &ack, &err);
    if (rc == DURO_OK)
        return;
    duro__log(&c->rt->logger, DURO_LOG_WARN,
              "could not drop messages of instance '%s': %s",
              c->item->instance_id, err.message);
    if (rc != DURO_LOCK_LOST) {
        if (err.retryable)
            DURO__COUNT(c->rt, m_storage_retries);
        abandon(c, err.retryable ? 10 : 1000);
    }
}

static int batch_has(const duro_orch_item *item, int kind)
{
    for (size_t i = 0; i < item->message_count; i++)
        if (item->messages[i].kind == (duro_work_kind)kind)
            return 1;
    return 0;
}

/* A batch that ends the instance (a cancel, a terminate, its deadline) is
 * decided without code when need be. */
static int batch_stops(const duro_orch_item *item)
{
    return batch_has(item, DURO_WORK_CANCEL_INSTANCE) ||
           batch_has(item, DURO_WORK_TERMINATE_INSTANCE) ||
           batch_has(item, DURO_WORK_DEADLINE);
}

/* The turn can be decided without the orchestration's code: it stops the
 * instance, or the instance is suspended and stays so. */
static int codeless_possible(const duro_orch_item *item)
{
    return batch_stops(item) || (item->status == DURO_STATUS_SUSPENDED &&
                                 !batch_has(item, DURO_WORK_RESUME_INSTANCE));
}

/* The execution's whole history when the item carries only its tail. */
static int load_full_history(turn_ctx *c, const duro_event **hist,
                             size_t *count)
{
    if (c->full == NULL) {
        duro_error err;
        int rc = c->p->read_history(c->p, c->item->instance_id,
                                    c->plan.execution_id, &c->full, &err);
        if (rc != DURO_OK) {
            if (err.retryable)
                DURO__COUNT(c->rt, m_storage_retries);
            duro__log(&c->rt->logger, DURO_LOG_WARN,
                      "reading history of '%s' failed: %s",
                      c->item->instance_id, err.message);
            return rc;
        }
    }
    *hist = c->full->events;
    *count = c->full->count;
    return DURO_OK;
}

/* Gets the engine for this turn: the kept one when it matches, otherwise a
 * new one with the history it must replay. `code` is the registration whose
 * code runs, NULL for a turn decided without code. */
static int get_engine(turn_ctx *c, const duro__orch_entry *code,
                      duro_orch **out, const duro_event **hist,
                      size_t *hist_count, int *warm)
{
    duro_runtime *rt = c->rt;
    duro_orch_item *item = c->item;
    *out = NULL;
    *warm = 0;
    *hist = NULL;
    *hist_count = 0;
    if (c->plan.action == DURO__PLAN_RUN) {
        duro_orch *e = duro__cache_take(rt->cache, item->instance_id,
                                        c->plan.execution_id);
        /* A turn decided without code takes a fresh engine: a kept one
         * would run the code it was made with. */
        if (e != NULL && duro__engine_events(e) == item->history_offset &&
            code != NULL) {
            *out = e;
            *warm = 1;
            *hist = item->history;
            *hist_count = item->history_count;
            return DURO_OK;
        }
        duro__engine_destroy(e);
        if (item->history_offset > 0) {
            int rc = load_full_history(c, hist, hist_count);
            if (rc != DURO_OK)
                return rc;
        } else {
            *hist = item->history;
            *hist_count = item->history_count;
        }
    }
    duro__engine_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    if (c->entry != NULL) {
        duro__registry_engine_config(c->entry, &cfg);
        if (code == NULL) { /* options and version, no code */
            cfg.fn = NULL;
            memset(&cfg.driver, 0, sizeof(cfg.driver));
        }
    }
    cfg.stack_size = rt->opts.fiber_stack_size;
    cfg.max_payload = rt->opts.max_payload;
    cfg.logger = &rt->logger;
    if (cfg.cleanup_timeout_ms <= 0)
        cfg.cleanup_timeout_ms = rt->opts.cleanup_timeout_ms;
    if (rt->provider->version < 12) /* no DEADLINE messages to send */
        cfg.timeout_ms = 0;
    return duro__engine_create(&cfg, item->instance_id, c->plan.execution_id,
                               out);
}

/* Runs the turn and prepares its ack in c->ack, the engine back in the
 * cache. terminate_* set: no code runs, the execution fails with that
 * error. DURO_OK: ready to ack; otherwise the batch was abandoned for
 * another try or (DURO_HISTORY_LIMIT) the caller must end the instance. */
static int run_turn(turn_ctx *c, int terminate_status,
                    const char *terminate_error, int terminate_category)
{
    duro_runtime *rt = c->rt;
    duro__turn *turn = c->turn;
    int64_t begin_ns = duro__metrics_turn_begin();
    duro_orch *e = NULL;
    const duro_event *hist;
    size_t hist_count;
    int warm;
    const duro__orch_entry *code =
        terminate_status == 0 && !c->codeless ? c->entry : NULL;
    int rc = get_engine(c, code, &e, &hist, &hist_count, &warm);
    if (rc != DURO_OK) {
        abandon(c, 1000);
        retry_later(c, 1000, "the turn could not start", duro_strerror(rc));
        return rc;
    }
    duro__turn_reset(turn);
    duro__turn_input in = {.now_ms = duro__wall_ms(),
                           .history = hist,
                           .history_count = hist_count,
                           .start = c->has_start ? &c->start : NULL,
                           .messages = c->item->messages,
                           .message_count = c->item->message_count,
                           .terminate_status = terminate_status,
                           .terminate_error = terminate_error,
                           .terminate_category = terminate_category,
                           .suspended =
                               c->item->status == DURO_STATUS_SUSPENDED};
    rc = duro__engine_turn(e, &in, turn);
    if (rc == DURO_INVALID && warm) {
        /* The kept engine does not fit the stored history: replay. */
        duro__engine_destroy(e);
        e = NULL;
        c->plan.action = DURO__PLAN_RUN;
        rc = load_full_history(c, &hist, &hist_count);
        if (rc == DURO_OK) {
            c->item->history_offset = 0;
            rc = get_engine(c, code, &e, &hist, &hist_count, &warm);
        }
        if (rc == DURO_OK) {
            in.history = c->full->events;
            in.history_count = c->full->count;
            duro__turn_reset(turn);
            rc = duro__engine_turn(e, &in, turn);
        }
    }
    if (rc != DURO_OK) {
        /* a driver's failed start or step says what it was */
        char why[256];
        snprintf(why, sizeof(why), "%s",
                 e != NULL && duro__engine_failure(e) != NULL
                     ? duro__engine_failure(e)
                     : duro_strerror(rc));
        duro__log(&rt->logger, DURO_LOG_ERROR,
                  "turn of instance '%s' could not run: %s",
                  c->item->instance_id, why);
        duro__engine_destroy(e);
        abandon(c, 1000);
        retry_later(c, 1000, "the turn could not run", why);
        return rc;
    }
    uint64_t stored =
        c->plan.action == DURO__PLAN_RUN ? c->item->history_total : 0;
    if (terminate_status == 0 && rt->opts.max_history_events > 0 &&
        stored + turn->delta_count > rt->opts.max_history_events) {
        snprintf(c->limit_why, sizeof(c->limit_why),
                 "the execution would hold %llu events, more than the "
                 "runtime's max_history_events (%llu)",
                 (unsigned long long)(stored + turn->delta_count),
                 (unsigned long long)rt->opts.max_history_events);
        duro__engine_destroy(e);
        return DURO_HISTORY_LIMIT;
    }
    /* A failure that ends the instance is its last problem too, written
     * by the same transaction. */
    if (turn->meta_changed && turn->meta.status == DURO_STATUS_FAILED &&
        (terminate_status == DURO_STATUS_FAILED || turn->nondeterminism))
        turn->meta.problem = turn->meta.error;
    c->ack = (duro_orch_ack){.execution_id = c->plan.execution_id,
                             .history_delta = turn->delta,
                             .history_delta_count = turn->delta_count,
                             .worker_items = turn->worker_items,
                             .worker_item_count = turn->worker_count,
                             .orchestrator_items = turn->outbound,
                             .orchestrator_item_count = turn->outbound_count,
                             .meta = turn->meta_changed ? &turn->meta : NULL,
                             .cancelled_activities = turn->cancelled,
                             .cancelled_activity_count = turn->cancelled_count};
    /* The turn's output owns its strings, so the engine can go back into the
     * cache now: the next turn of this instance may be fetched by another
     * thread the moment the ack releases the lock, and must find it there.
     * If the ack fails, the engine (ahead of the store) is taken back out;
     * should another thread already hold it, the mismatch of event counts
     * makes that thread replay instead. */
    c->terminal = !duro__engine_reusable(e) || code == NULL;
    c->warm = warm;
    c->begin_ns = begin_ns;
    if (c->terminal) {
        duro__engine_destroy(e);
    } else {
        duro__cache_put(rt->cache, e);
    }
    return DURO_OK;
}

/* After a committed turn that ended execution n with continue-as-new: when
 * n is a multiple of keep_executions, deletes the executions before the
 * last keep_executions (n among them), so a chain that continues for ever
 * keeps at most 2 x keep_executions + 1 of them. Its own transaction, after
 * the turn's: housekeeping, which a crash or a failure merely postpones to
 * the next multiple (pruning is idempotent), and every keep_executions-th
 * continue-as-new pays for it, not each one. */
static void prune_chain(turn_ctx *c)
{
    duro_runtime *rt = c->rt;
    uint64_t keep = rt->opts.keep_executions;
    uint64_t n = c->plan.execution_id;
    if (keep == 0 || n % keep != 0 || n == keep ||
        rt->provider->prune_executions == NULL)
        return;
    duro_error err;
    if (rt->provider->prune_executions(rt->provider, c->item->instance_id, keep,
                                       NULL, &err) != DURO_OK)
        duro__log(&rt->logger, err.retryable ? DURO_LOG_DEBUG : DURO_LOG_WARN,
                  "instance '%s': pruning the executions before its last "
                  "%llu failed (tried again %llu executions later): %s",
                  c->item->instance_id, (unsigned long long)keep,
                  (unsigned long long)keep, err.message);
}

/* The turn's ack failed retryably (rc, *err: an outage of the store, a
 * server restarting or stopped for a while): acks it again, alone
 * (ack_orchestration_item), backing off 5 ms doubling to 500 ms, while the
 * instance lock may still hold - until duro__lock_deadline of the fetch
 * that locked it - and no later than a shutdown's deadline. Giving up at
 * once threw the turn away: its batch came back only when the lock
 * expired (up to orchestration_lock_timeout_ms after the store answered
 * again), was replayed, and counted one more delivery towards poison. The
 * kept engine stays in the cache meanwhile: the lock keeps the instance
 * from every other thread. Returns the last result, err saying why:
 * DURO_OK; a failure that is not retryable; DURO_LOCK_LOST after a retry,
 * when an earlier attempt probably committed (c->ack_attempted is set); or
 * a retryable failure at the deadline, with c->ack_gave_up set (logged and
 * counted here). */
static int retry_ack(turn_ctx *c, int rc, duro_error *err)
{
    duro_runtime *rt = c->rt;
    int64_t until = duro__lock_deadline(c->fetched_ms,
                                        rt->opts.orchestration_lock_timeout_ms);
    int64_t first = duro__mono_ms(), delay = 5;
    int attempts = 1;
    while (rc != DURO_OK && err->retryable && rc != DURO_LOCK_LOST &&
           rc != DURO_HISTORY_LIMIT) {
        int64_t now = duro__mono_ms();
        int64_t stop = DURO__MIN(until, duro__runtime_deadline(rt));
        if (now >= stop) {
            c->ack_gave_up = 1;
            DURO__COUNT(rt, m_turn_acks_given_up);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "turn of instance '%.200s' could not be committed in "
                      "%d attempts over %lld ms (%s); given up %s; its batch "
                      "comes back when the instance lock expires",
                      c->item->instance_id, attempts, (long long)(now - first),
                      err->message,
                      stop == until ? "at its lock's deadline"
                                    : "at the shutdown's deadline");
            return rc;
        }
        DURO__COUNT(rt, m_storage_retries);
        /* the last attempt at the deadline, not a backoff after it */
        duro__runtime_backoff(rt, DURO__MIN(delay, stop - now));
        delay = DURO__MIN(delay * 2, 500);
        rc = c->p->ack_orchestration_item(c->p, c->item->lock_token, &c->ack,
                                          err);
        attempts++;
        if (rc == DURO_LOCK_LOST)
            c->ack_attempted = 2;
    }
    return rc;
}

/* What follows the ack of the turn run_turn prepared, given the ack's
 * result rc (err says why when it failed): a retryable failure is retried
 * in place while the lock may hold (retry_ack); on failure the kept engine
 * is dropped and the batch abandoned for another try (or, given up at a
 * deadline, left to its lock's expiry); on success the turn is counted and
 * the tokens of activities it cancelled here are fired. Returns the final
 * result (DURO_HISTORY_LIMIT: the store refused the turn, end the
 * instance). */
static int acked(turn_ctx *c, int rc, const duro_error *first_err)
{
    duro_runtime *rt = c->rt;
    duro__turn *turn = c->turn;
    const char *instance = c->item->instance_id;
    duro_error last = rc != DURO_OK ? *first_err : (duro_error){0};
    const duro_error *err = &last;
    if (rc != DURO_OK)
        rc = retry_ack(c, rc, &last);
    if (rc != DURO_OK) {
        if (!c->terminal)
            duro__engine_destroy(
                duro__cache_take(rt->cache, instance, c->plan.execution_id));
        if (c->ack_gave_up) {
            /* No abandon: the lock expires by itself, about now. The
             * problem says why, with that expiry as the next try (a store
             * call, best effort; none past a shutdown's deadline). */
            if (duro__runtime_deadline(rt) == INT64_MAX) {
                int64_t left =
                    duro__add_ms(c->fetched_ms,
                                 rt->opts.orchestration_lock_timeout_ms) -
                    duro__mono_ms();
                retry_later(c, left > 0 ? left : 0,
                            "the turn could not be committed", err->message);
            }
            return rc;
        }
        if (rc == DURO_HISTORY_LIMIT) {
            snprintf(c->limit_why, sizeof(c->limit_why),
                     "the store refused the turn: %.470s", err->message);
            return rc;
        }
        /* The lock began at the fetch: a turn that held it longer than
         * orchestration_lock_timeout_ms (replay, code and acks) lost it to
         * its expiry, whatever its attempts did. */
        int slow =
            rc == DURO_LOCK_LOST && duro__mono_ms() - c->fetched_ms >=
                                        rt->opts.orchestration_lock_timeout_ms;
        if (rc == DURO_LOCK_LOST && c->ack_attempted && !slow) {
            /* provider.h: a lost lock after a failed attempt means that
             * attempt probably committed */
            duro__log(&rt->logger, DURO_LOG_DEBUG,
                      "turn of instance '%s': its lock is gone after %s "
                      "failed, which probably committed it (if not, the "
                      "batch comes back when its lock expires): %s",
                      c->item->instance_id,
                      c->ack_attempted == 1 ? "the common ack"
                                            : "an earlier attempt",
                      err->message);
        } else if (rc == DURO_LOCK_LOST) {
            /* Code that blocks its turn past the lock's timeout loses the
             * lock on every delivery until the batch is poison: say so.
             * (Only in the log: the instance may be running on, its batch
             * committed by another thread, and a problem recorded now would
             * outlive it.) */
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "turn of instance '%.200s' discarded: %s%s", instance,
                      err->message,
                      slow ? " (the turn ran longer than "
                             "orchestration_lock_timeout_ms: orchestration "
                             "code must not block)"
                           : "");
        } else {
            int64_t delay = err->retryable ? 10 : 1000;
            if (err->retryable)
                DURO__COUNT(rt, m_storage_retries);
            /* A failed ack may have committed (provider.h): when the
             * abandon finds the lock gone, it probably did, and nothing is
             * retried - no problem to record (it would outlive the turn,
             * even on a finished instance). */
            int gone = abandon(c, delay) == DURO_LOCK_LOST;
            if (!refused_problem(c, rc, err, delay))
                retry_later(c, delay, "the turn could not be committed",
                            err->message);
            if (gone)
                c->problem[0] = '\0';
            /* The poison failure refused too: say what that means, not
             * that the instance fails (it cannot, until the store takes a
             * write). */
            if (failing_as_poison(c) && !err->retryable && !gone)
                duro__log(&rt->logger, DURO_LOG_ERROR, "instance '%.200s': %s",
                          instance, c->problem);
            else
                duro__log(&rt->logger,
                          err->retryable ? DURO_LOG_DEBUG : DURO_LOG_ERROR,
                          "ack of instance '%.200s' failed: %s", instance,
                          err->message);
        }
        return rc;
    }
    duro__metrics_turn(&rt->metrics, c->entry, turn, c->warm, c->begin_ns);
    if (turn->nondeterminism) {
        DURO__COUNT(rt, m_nondeterminism);
        duro__log(&rt->logger, DURO_LOG_ERROR, "instance '%s' failed: %s",
                  c->item->instance_id, turn->meta.error);
    }
    if (turn->cancelled_count > 0) {
        /* Local tokens first: once the counter shows a cancellation, this
         * runtime has already acted on it. */
        duro__workers_cancel_local(rt, turn->cancelled, turn->cancel_reasons,
                                   turn->cancelled_count);
        duro__metrics_cancel_requests(&rt->metrics, turn->cancel_reasons,
                                      turn->cancelled_count);
    }
    if (turn->meta_changed && turn->meta.status == DURO_STATUS_CONTINUED_AS_NEW)
        prune_chain(c);
    return DURO_OK;
}

/* Runs the turn and acks it (with c->next, ack_and_fetch: the next item
 * comes back in *c->next). Returns the ack's result, as acked(). */
static int run_and_ack(turn_ctx *c, int terminate_status,
                       const char *terminate_error, int terminate_category)
{
    int rc = run_turn(c, terminate_status, terminate_error, terminate_category);
    if (rc != DURO_OK)
        return rc;
    duro_error err;
    if (c->next != NULL) {
        duro_history_cache hc = {.cached_events = duro__cache_cached_events,
                                 .user = c->rt->cache};
        *c->next_ms = duro__mono_ms(); /* the next item's lock begins after */
        rc = c->p->ack_and_fetch_orchestration_item(
            c->p, c->item->lock_token, &c->ack,
            c->rt->opts.orchestration_lock_timeout_ms, &hc, c->next, &err);
    } else {
        rc = c->p->ack_orchestration_item(c->p, c->item->lock_token, &c->ack,
                                          &err);
    }
    return acked(c, rc, &err);
}

/* A version-4 store records the first cancellation requested on the
 * instance; the turn writes that one (not whichever message comes first in
 * the batch) into OrchestrationCancelRequested, so history and status name
 * the same reason and requester. */
static void use_recorded_cancel(const duro_provider *p, duro_orch_item *item)
{
    if (p->version < 4 || item->cancel_requested_ms == 0)
        return;
    for (size_t i = 0; i < item->message_count; i++) {
        duro_work_item *m = &item->messages[i];
        if (m->kind == DURO_WORK_CANCEL_INSTANCE) {
            m->reason = item->cancel_reason;
            m->requested_by = item->cancelled_by;
            return;
        }
    }
}

/* Problems and what clears them (see duro__runtime_set_problem): a batch
 * that comes back for another try - an unregistered orchestration, a turn
 * that failed to commit, a delivery count climbing because earlier
 * deliveries died unseen - is recorded with the time of the next try. A
 * failure that ends the instance (poison, nondeterminism, an orchestration
 * never registered, the history cap) is written by the ending turn's own
 * ack (meta.problem), and any other ending clears the problem in that
 * transaction, so a finished instance never shows a stale retry. A
 * committed turn of a batch delivered more than once clears the problem it
 * was fetched with: its retries are over. (A first delivery does not: a
 * problem an activity of the instance recorded is not resolved by a turn
 * for something else.) This is that clearing, given the turn's result. */
static void clear_retried_problem(turn_ctx *c, int rc)
{
    if (rc == DURO_OK && !c->turn->nondeterminism && c->had_problem &&
        c->item->attempt > 1)
        duro__runtime_set_problem(c->rt, c->item->instance_id, NULL, 0);
}

/* The end of an item, given its turn's result rc: an instance over the
 * history limit is failed, a problem is recorded, the history freed. */
static void end_item(turn_ctx *c, int rc)
{
    duro_runtime *rt = c->rt;
    duro_orch_item *item = c->item;
    char why[512];
    if (rc == DURO_HISTORY_LIMIT) {
        snprintf(why, sizeof(why), "history limit reached: %.480s",
                 c->limit_why);
        duro__utf8_scrub(why);
        duro__log(&rt->logger, DURO_LOG_ERROR, "instance '%s': %s",
                  item->instance_id, why);
        c->next = NULL;
        rc = run_and_ack(c, DURO_STATUS_FAILED, why,
                         DURO_CATEGORY_INFRASTRUCTURE);
        if (rc == DURO_HISTORY_LIMIT) {
            /* Not even the failure's events fit under the store's cap: the
             * failing turn's effects without its history. Its activities
             * are cancelled and its children and parent told (c->turn
             * still holds that turn), so nothing it started runs on and
             * nobody waits for it; only the events are missing. */
            const duro__turn *turn = c->turn;
            duro_instance_meta meta = {.status = DURO_STATUS_FAILED,
                                       .name = item->name,
                                       .version = item->version,
                                       .error = why,
                                       .category = DURO_CATEGORY_INFRASTRUCTURE,
                                       .problem = why};
            duro_orch_ack ack = {
                .execution_id = c->plan.execution_id,
                .orchestrator_items = turn->outbound,
                .orchestrator_item_count = turn->outbound_count,
                .meta = &meta,
                .cancelled_activities = turn->cancelled,
                .cancelled_activity_count = turn->cancelled_count};
            duro_error err;
            rc = c->p->ack_orchestration_item(c->p, item->lock_token, &ack,
                                              &err);
            if (rc == DURO_OK)
                acked(c, rc, &err); /* counted, local tokens fired */
            else
                duro__log(&rt->logger, DURO_LOG_ERROR,
                          "could not fail instance '%s': %s", item->instance_id,
                          err.message);
        }
    }
    if (rc != DURO_OK && c->problem[0] != '\0')
        duro__runtime_set_problem(rt, item->instance_id, c->problem,
                                  c->retry_at);
    duro_history_free(c->full);
    c->full = NULL;
}

/* Processes one fetched item, locked by a fetch that began at monotonic
 * fetched_ms. With `batch`, a turn on the common path is run but not
 * acked: it joins the batch (finish_batch acks and ends it); otherwise
 * with `next`, its ack fetches the next item (locked by a call that began
 * at *next_ms). */
static void process_item(duro_runtime *rt, duro_orch_item *item,
                         int64_t fetched_ms, duro__turn *turn,
                         duro_orch_item **next, int64_t *next_ms,
                         turn_batch *batch)
{
    turn_ctx c = {.rt = rt,
                  .p = rt->provider,
                  .item = item,
                  .turn = turn,
                  .fetched_ms = fetched_ms};
    duro__plan_turn(item, &c.plan);
    if (c.plan.action == DURO__PLAN_DROP) {
        drop_batch(&c, c.plan.why);
        return;
    }
    if (c.plan.action == DURO__PLAN_WAIT) {
        abandon(&c, 1000);
        return;
    }
    use_recorded_cancel(c.p, item);
    int had_problem = c.p->version >= 4 && item->last_problem != NULL;
    const char *name = c.plan.start ? c.plan.start->name : item->name;
    const char *version = c.plan.start ? c.plan.start->version : item->version;
    c.entry = duro__registry_find_orch(rt->registry, name, version);
    if (c.plan.action != DURO__PLAN_RUN) {
        if (c.plan.start != NULL) {
            c.start = *c.plan.start;
        } else { /* cancelled before its delayed START became visible */
            memset(&c.start, 0, sizeof(c.start));
            c.start.kind = DURO_WORK_START;
            c.start.instance_id = item->instance_id;
            c.start.name = item->name;
            c.start.version = item->version;
        }
        if (c.entry != NULL)
            c.start.version = c.entry->version; /* the one that will run */
        c.has_start = 1;
    }

    char why[512];
    int rc;
    if (item->attempt > rt->opts.max_attempts) {
        /* The last problem recorded says why the deliveries failed (a
         * turn the store refused) */
        snprintf(why, sizeof(why),
                 "poison message: a batch of instance '%.100s' was delivered "
                 "%u times without a committed turn (max_attempts %u)%s%.300s",
                 item->instance_id, item->attempt, rt->opts.max_attempts,
                 item->last_problem != NULL ? "; the last: " : "",
                 item->last_problem != NULL ? item->last_problem : "");
        duro__utf8_scrub(why); /* stored: no character cut in two */
        rc = run_and_ack(&c, DURO_STATUS_FAILED, why,
                         DURO_CATEGORY_INFRASTRUCTURE);
        /* Counted and logged once it happened: a store that refuses the
         * failure's write too sees it tried again on every delivery, and
         * acked() logs what that means instead. */
        if (rc == DURO_OK) {
            DURO__COUNT(rt, m_poison);
            duro__log(&rt->logger, DURO_LOG_ERROR, "%s", why);
        }
    } else if (c.entry == NULL && !codeless_possible(item)) {
        if (version != NULL)
            snprintf(why, sizeof(why),
                     "orchestration '%.200s' version '%.100s' is not "
                     "registered",
                     name, version);
        else
            snprintf(why, sizeof(why),
                     "orchestration '%.200s' is not registered", name);
        /* which version it waits for, and who has what (docs/lifecycle.md:
         * "An orchestration version no runtime has") */
        char live[DURO_ERROR_MESSAGE_MAX] = "";
        if (version != NULL)
            snprintf(live, sizeof(live),
                     "; waits for version '%.100s' of '%.200s'", version, name);
        else
            snprintf(live, sizeof(live), "; waits for a runtime of '%.200s'",
                     name);
        int elsewhere = live_runtimes(rt, name, version, live, sizeof(live));
        if (elsewhere && c.p->pass_orchestration_item != NULL) {
            /* Another live runtime has it (a rolling deploy): it is that
             * runtime's, never failed here, however often it comes here. */
            int64_t delay = unknown_name_delay(rt, 1);
            duro__log(&rt->logger, DURO_LOG_DEBUG,
                      "%s here (instance '%s'); another live runtime has it: "
                      "passed on for %lld ms",
                      why, item->instance_id, (long long)delay);
            char problem[3 * DURO_ERROR_MESSAGE_MAX]; /* set_problem cuts */
            snprintf(problem, sizeof(problem),
                     "%s in this runtime; left to a live runtime that has "
                     "it%s",
                     why, live);
            duro__runtime_set_problem(rt, item->instance_id, problem,
                                      duro__wall_ms() + delay);
            pass_on(&c, delay);
            duro_history_free(c.full);
            return;
        }
        if (item->attempt < rt->opts.max_attempts) {
            int64_t delay = unknown_name_delay(rt, item->attempt);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "%s (instance '%s'); retrying in %lld ms", why,
                      item->instance_id, (long long)delay);
            char problem[3 * DURO_ERROR_MESSAGE_MAX]; /* set_problem cuts */
            snprintf(problem, sizeof(problem),
                     "%s in this runtime (attempt %u of %u, then the "
                     "instance fails)%s",
                     why, item->attempt, rt->opts.max_attempts, live);
            duro__runtime_set_problem(rt, item->instance_id, problem,
                                      duro__wall_ms() + delay);
            abandon(&c, delay);
            duro_history_free(c.full);
            return;
        }
        if (live[0] != '\0' && strstr(live, "; live runtimes:") != NULL)
            append(why, sizeof(why), "; no live runtime has it (%s)",
                   strstr(live, "live runtimes:"));
        duro__utf8_scrub(why); /* a name cut short by the buffer */
        rc = run_and_ack(&c, DURO_STATUS_FAILED, why,
                         DURO_CATEGORY_CONFIGURATION);
    } else {
        if (item->attempt > 1 && !had_problem && c.p->version >= 4) {
            /* Earlier deliveries ended without a trace (a runtime that
             * stopped, a lock that expired): if this one dies too, the
             * climbing count is visible. */
            char seen[DURO_ERROR_MESSAGE_MAX];
            snprintf(seen, sizeof(seen),
                     "a batch of instance '%.300s' was delivered %u times "
                     "without a committed turn (earlier attempts stopped or "
                     "lost their lock); it fails as poison after "
                     "max_attempts %u",
                     item->instance_id, item->attempt, rt->opts.max_attempts);
            duro__runtime_set_problem(
                rt, item->instance_id, seen,
                duro__add_ms(duro__wall_ms(),
                             rt->opts.orchestration_lock_timeout_ms));
            had_problem = 1;
        }
        /* Without its code when it has none here, and for a cancel or
         * terminate whose turn already failed twice (code that crashes or
         * hangs the turn): the instance can always be stopped. */
        c.codeless =
            c.entry == NULL || (item->attempt >= 3 && batch_stops(item));
        c.had_problem = had_problem;
        if (batch != NULL) {
            rc = run_turn(&c, 0, NULL, 0);
            if (rc == DURO_OK) {
                batch->ctx[batch->count++] = c;
                return;
            }
        } else {
            c.next = next; /* the common path may fetch the next item */
            c.next_ms = next_ms;
            rc = run_and_ack(&c, 0, NULL, 0);
            c.next = NULL;
            clear_retried_problem(&c, rc);
        }
    }
    end_item(&c, rc);
}

/* Acks the batch's turns in one transaction and fetches up to max_next
 * items with them (next, *next_count); then ends each turn as its own ack
 * would have. When the common ack fails, each turn is acked alone: the
 * single acks sort out which failed and why (a lost lock, the history
 * limit), and one that committed unseen finds its lock gone. */
static void finish_batch(duro_runtime *rt, turn_batch *b, size_t max_next,
                         duro_orch_item **next, size_t *next_count,
                         int64_t *next_ms)
{
    duro_provider *p = rt->provider;
    duro_history_cache hc = {.cached_events = duro__cache_cached_events,
                             .user = rt->cache};
    duro_error err;
    *next_count = 0;
    for (size_t i = 0; i < b->count; i++) {
        b->tokens[i] = b->ctx[i].item->lock_token;
        b->acks[i] = b->ctx[i].ack;
    }
    *next_ms = duro__mono_ms(); /* the next items' locks begin after */
    int rc = p->ack_and_fetch_orchestration_items(
        p, b->count, b->tokens, b->acks, rt->opts.orchestration_lock_timeout_ms,
        &hc, max_next, next, next_count, &err);
    if (rc != DURO_OK)
        duro__log(&rt->logger, DURO_LOG_DEBUG,
                  "ack of %zu turn(s) failed (%s); acking them one by one",
                  b->count, err.message);
    for (size_t i = 0; i < b->count; i++) {
        turn_ctx *c = &b->ctx[i];
        int one = rc;
        duro_error one_err = err;
        if (rc != DURO_OK) {
            /* provider.h: only these failures are certain to have
             * changed nothing; after any other the common ack may have
             * committed */
            c->ack_attempted = rc != DURO_LOCK_LOST &&
                               rc != DURO_HISTORY_LIMIT &&
                               rc != DURO_INVALID_STATE &&
                               rc != DURO_ALREADY_EXISTS && rc != DURO_INVALID;
            one = p->ack_orchestration_item(p, c->item->lock_token, &c->ack,
                                            &one_err);
        }
        one = acked(c, one, &one_err);
        clear_retried_problem(c, one);
        end_item(c, one);
    }
    b->count = 0;
}

static void batch_free(turn_batch *b)
{
    for (size_t i = 0; i < b->cap; i++)
        duro__turn_free(&b->turns[i]);
    duro__free(b->turns);
    duro__free(b->ctx);
    duro__free(b->tokens);
    duro__free(b->acks);
}

static int batch_init(turn_batch *b, size_t cap)
{
    memset(b, 0, sizeof(*b));
    b->ctx = duro__calloc(cap, sizeof(*b->ctx));
    b->turns = duro__calloc(cap, sizeof(*b->turns));
    b->tokens = duro__calloc(cap, sizeof(*b->tokens));
    b->acks = duro__calloc(cap, sizeof(*b->acks));
    if (b->ctx == NULL || b->turns == NULL || b->tokens == NULL ||
        b->acks == NULL) {
        batch_free(b);
        return DURO_NOMEM;
    }
    for (; b->cap < cap; b->cap++)
        if (duro__turn_init(&b->turns[b->cap]) != DURO_OK) {
            batch_free(b);
            return DURO_NOMEM;
        }
    return DURO_OK;
}

/* A failed fetch: counted when retryable, logged, and the thread backs off
 * 10, 20, 40 ... ms up to 1 s (*backoff, reset by the caller on success). */
static void fetch_failed(duro_runtime *rt, const duro_error *err,
                         int64_t *backoff)
{
    *backoff = *backoff == 0 ? 10 : DURO__MIN(*backoff * 2, 1000);
    duro__runtime_storage_failed(rt, DURO_QUEUE_ORCHESTRATOR,
                                 "fetch of orchestration work", err, *backoff);
    duro__runtime_pause(rt, *backoff);
}

/* A turn thread that fetches up to `cap` instances at once and commits
 * their turns together (provider version 7). */
static void batch_loop(duro_runtime *rt, turn_batch *b)
{
    duro_provider *p = rt->provider;
    size_t cap = b->cap;
    duro_orch_item **items = duro__calloc(cap, sizeof(*items));
    duro_orch_item **next = duro__calloc(cap, sizeof(*next));
    if (items == NULL || next == NULL) {
        duro__log(&rt->logger, DURO_LOG_ERROR,
                  "orchestration thread: out of memory");
        duro__free(items);
        duro__free(next);
        return;
    }
    duro_history_cache hc = {.cached_events = duro__cache_cached_events,
                             .user = rt->cache};
    size_t count = 0;
    int64_t backoff = 0;
    int64_t items_ms = 0, next_ms = 0; /* when their fetches began */
    while (!atomic_load(&rt->stop_flag)) {
        duro_error err;
        if (count == 0) {
            items_ms = duro__mono_ms();
            int rc = p->ack_and_fetch_orchestration_items(
                p, 0, NULL, NULL, rt->opts.orchestration_lock_timeout_ms, &hc,
                cap, items, &count, &err);
            if (rc != DURO_OK) {
                fetch_failed(rt, &err, &backoff);
                continue;
            }
            duro__runtime_storage_ok(rt, DURO_QUEUE_ORCHESTRATOR);
            backoff = 0;
            if (count == 0)
                duro__runtime_wait_for_work(rt, DURO_QUEUE_ORCHESTRATOR);
            continue;
        }
        for (size_t i = 0; i < count; i++)
            process_item(rt, items[i], items_ms, &b->turns[b->count], NULL,
                         NULL, b);
        size_t got = 0;
        if (b->count > 0)
            finish_batch(rt, b, atomic_load(&rt->stop_flag) ? 0 : cap, next,
                         &got, &next_ms);
        for (size_t i = 0; i < count; i++)
            duro_orch_item_free(items[i]);
        duro_orch_item **t = items;
        items = next;
        next = t;
        count = got;
        items_ms = next_ms;
    }
    for (size_t i = 0; i < count; i++) {
        /* Fetched with the last acks as the runtime stopped: let them go. */
        duro_error err;
        p->abandon_orchestration_item(p, items[i]->lock_token, 0, &err);
        duro_orch_item_free(items[i]);
    }
    duro__free(items);
    duro__free(next);
}

/* A turn thread's life (duro__orchestration_thread). */
static void turn_thread(duro_runtime *rt)
{
    duro_provider *p = rt->provider;
    if (rt->opts.orchestration_batch > 1 && p->version >= 7 &&
        p->ack_and_fetch_orchestration_items != NULL) {
        turn_batch b;
        if (batch_init(&b, (size_t)rt->opts.orchestration_batch) != DURO_OK) {
            duro__log(&rt->logger, DURO_LOG_ERROR,
                      "orchestration thread: out of memory");
            return;
        }
        batch_loop(rt, &b);
        batch_free(&b);
        return;
    }
    duro__turn turn;
    if (duro__turn_init(&turn) != DURO_OK) {
        duro__log(&rt->logger, DURO_LOG_ERROR,
                  "orchestration thread: out of memory");
        return;
    }
    duro_history_cache hc = {.cached_events = duro__cache_cached_events,
                             .user = rt->cache};
    int combined = p->version >= 2 && p->ack_and_fetch_orchestration_item;
    int64_t backoff = 0;
    duro_orch_item *item = NULL; /* fetched with the previous ack */
    int64_t item_ms = 0;         /* when the fetch of item began */
    while (!atomic_load(&rt->stop_flag)) {
        duro_error err;
        if (item != NULL) {
            duro_orch_item *next = NULL;
            int64_t next_ms = 0;
            process_item(rt, item, item_ms, &turn, combined ? &next : NULL,
                         &next_ms, NULL);
            duro_orch_item_free(item);
            item = next;
            item_ms = next_ms;
            continue;
        }
        item_ms = duro__mono_ms();
        int rc = p->fetch_orchestration_item(
            p, rt->opts.orchestration_lock_timeout_ms, &hc, &item, &err);
        if (rc != DURO_OK) {
            fetch_failed(rt, &err, &backoff);
            continue;
        }
        duro__runtime_storage_ok(rt, DURO_QUEUE_ORCHESTRATOR);
        backoff = 0;
        if (item == NULL)
            duro__runtime_wait_for_work(rt, DURO_QUEUE_ORCHESTRATOR);
    }
    if (item != NULL) {
        /* Fetched with the last ack as the runtime stopped: let it go. */
        duro_error err;
        p->abandon_orchestration_item(p, item->lock_token, 0, &err);
        duro_orch_item_free(item);
    }
    duro__turn_free(&turn);
}

void *duro__orchestration_thread(void *arg)
{
    duro_runtime *rt = arg;
    duro__mark_runtime_thread();
    turn_thread(rt);
    duro__runtime_loop_leave(rt); /* entered by duro_runtime_start */
    return NULL;
}
