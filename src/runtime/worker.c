/* worker.c - the worker slots. Each slot is a thread that fetches one
 * ActivityExecute, runs the activity with its context and acks the
 * completion; it registers the running activity with the activity manager
 * (manager.c: renewals, cancellation, freeing a slot whose cancelled
 * activity outstays its grace period) and takes it back when it returns.
 *
 * Lock order: runtime->lock before manager->lock. The manager lock guards
 * the in-flight list and the slots' thread handles; it is never held while
 * user code or the provider runs. An abandoned thread touches only its own
 * context and its reference-counted in-flight record, so it may outlive the
 * runtime. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/activities.h"

/* ------------------------------------------------------------------------
 * slot threads */

static void *slot_main(void *arg);

static int spawn_slot_thread(duro_runtime *rt, slot_ctx *s)
{
    pthread_t t;
    atomic_fetch_add(&rt->live_slot_threads, 1);
    duro__runtime_loop_enter(rt);
    if (pthread_create(&t, NULL, slot_main, s) != 0) {
        duro__runtime_loop_leave(rt);
        atomic_fetch_sub(&rt->live_slot_threads, 1);
        return DURO_ERROR;
    }
    s->thread = t;
    s->thread_valid = 1;
    return DURO_OK;
}

static void slot_exited(duro_runtime *rt)
{
    duro__runtime_loop_leave(rt);
    pthread_mutex_lock(&rt->lock);
    atomic_fetch_sub(&rt->live_slot_threads, 1);
    pthread_cond_broadcast(&rt->slots_cond);
    pthread_mutex_unlock(&rt->lock);
}

static void fill_failure(duro_work_item *c, const duro_work_item *x,
                         const char *error, int category)
{
    memset(c, 0, sizeof(*c));
    c->kind = DURO_WORK_ACTIVITY_FAILED;
    c->instance_id = x->instance_id;
    c->execution_id = x->execution_id;
    c->source_id = x->source_id;
    c->error = error;
    c->category = category;
}

/* When the lock of the item being acked was last taken or renewed: by the
 * manager's renewals while f (not NULL) is registered, else by the fetch
 * that began at claimed_ms. */
static int64_t lock_began(duro_runtime *rt, duro__inflight *f,
                          int64_t claimed_ms)
{
    if (f == NULL)
        return claimed_ms;
    pthread_mutex_lock(&rt->manager->lock);
    int64_t t = f->locked_ms;
    pthread_mutex_unlock(&rt->manager->lock);
    return t;
}

/* Acks with retries on retryable errors; with `next` (and a version-2
 * provider) the next item is fetched in the same transaction, and
 * *next_claimed_ms is set to when the attempt that fetched it began. Returns
 * the final code. A failed call may still have committed (provider.h): when
 * a retry after a retryable failure finds the row gone (DURO_LOCK_LOST),
 * the first attempt probably committed, and the result is
 * ACK_OUTCOME_UNKNOWN instead - the caller must neither count the activity
 * as cancelled nor run it again.
 *
 * The retries go on while the item's lock may still hold (an outage of the
 * store: a server restarting, stopped for a while): until
 * duro__lock_deadline of its last claim or renewal (lock_began; the
 * manager goes on renewing f meanwhile, and a renewal that succeeds moves
 * the deadline), and never more than worker_lock_timeout_ms after the
 * first failure, so a store that takes renewals but keeps refusing the ack
 * does not hold the slot for ever. Giving up earlier would throw the
 * finished result away while the lock still kept the item from anyone
 * else: it ran again once the lock expired. A shutdown also bounds them:
 * the backoff never sleeps past its deadline, and once the deadline has
 * passed after an attempt made during the shutdown, the loop gives up.
 * Either way it is logged here and counted, and the result is ACK_GAVE_UP:
 * the caller makes no more store calls for the item. Nothing is lost, as
 * activities run at least once: the row stays locked until its lock
 * expires, then this activity (`name`) runs again here or elsewhere. */
#define ACK_OUTCOME_UNKNOWN (-1)
#define ACK_GAVE_UP (-2)

static int ack_with_retries(duro_runtime *rt, const char *name,
                            const char *token, const duro_work_item *completion,
                            duro__inflight *f, int64_t claimed_ms,
                            duro_worker_item **next, int64_t *next_claimed_ms,
                            duro_error *err)
{
    duro_provider *p = rt->provider;
    int64_t timeout = rt->opts.worker_lock_timeout_ms;
    int64_t delay = 5, first_failure = 0;
    int combined =
        next != NULL && p->version >= 2 && p->ack_and_fetch_work_item != NULL;
    for (int i = 0;; i++) {
        int stopping = duro__runtime_deadline(rt) != INT64_MAX;
        int64_t began = duro__mono_ms();
        if (next_claimed_ms != NULL)
            *next_claimed_ms = began;
        int rc = combined ? p->ack_and_fetch_work_item(p, token, completion,
                                                       timeout, next, err)
                          : p->ack_work_item(p, token, completion, err);
        if (rc == DURO_LOCK_LOST && i > 0)
            return ACK_OUTCOME_UNKNOWN;
        if (rc == DURO_OK && combined) /* activity work was fetched: after
                                          an outage, the store answers */
            duro__runtime_storage_ok(rt, DURO_QUEUE_WORKER);
        if (rc == DURO_OK || !err->retryable)
            return rc;
        int64_t now = duro__mono_ms();
        if (i == 0)
            first_failure = began;
        if (stopping && now >= duro__runtime_deadline(rt)) {
            atomic_fetch_add(&rt->acks_given_up, 1);
            DURO__COUNT(rt, m_acks_given_up);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "shutdown: the result of activity '%s' (instance '%s', "
                      "event %llu) could not be recorded before the shutdown "
                      "deadline (%s); the activity will run again after its "
                      "lock expires",
                      name, completion->instance_id,
                      (unsigned long long)completion->source_id, err->message);
            return ACK_GAVE_UP;
        }
        int64_t lock_end =
            duro__lock_deadline(lock_began(rt, f, claimed_ms), timeout);
        int64_t until =
            DURO__MIN(lock_end, duro__add_ms(first_failure, timeout));
        if (now >= until) {
            DURO__COUNT(rt, m_acks_given_up);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "the result of activity '%s' (instance '%s', event "
                      "%llu) could not be recorded in %d attempts over %lld "
                      "ms (%s); given up %s; the activity will run again "
                      "after its lock expires",
                      name, completion->instance_id,
                      (unsigned long long)completion->source_id, i + 1,
                      (long long)(now - first_failure), err->message,
                      until == lock_end
                          ? "at its lock's deadline"
                          : "a lock timeout after the first failure");
            return ACK_GAVE_UP;
        }
        DURO__COUNT(rt, m_storage_retries);
        /* the last attempt at the deadline, not a backoff after it */
        duro__runtime_backoff(rt, DURO__MIN(delay, until - now));
        delay = DURO__MIN(delay * 2, 500);
    }
}

/* Gives a work item back to the queue; the provider's code (DURO_OK, or
 * why the row stays locked until its lock expires; in err when not NULL). */
static int abandon_row(duro_runtime *rt, const char *token, int64_t delay,
                       duro_error *err)
{
    duro_error local;
    return rt->provider->abandon_work_item(rt->provider, token, delay,
                                           err != NULL ? err : &local);
}

static duro_activity *make_context(const duro_worker_item *w, void *user,
                                   duro_cancel_token *token)
{
    duro_activity *a = duro__calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->instance_id = duro__strdup(w->item.instance_id);
    a->name = duro__strdup(w->item.name);
    a->input = duro__strdup(w->item.payload);
    a->execution_id = w->item.execution_id;
    a->activity_id = w->item.source_id;
    a->attempt = w->item.attempt ? w->item.attempt : 1;
    a->delivery = w->attempt;
    a->user = user;
    a->token = token;
    if (a->instance_id == NULL || a->name == NULL ||
        (w->item.payload != NULL && a->input == NULL)) {
        duro__free(a->instance_id);
        duro__free(a->name);
        duro__free(a->input);
        duro__free(a);
        return NULL;
    }
    return a;
}

static void free_context(duro_activity *a)
{
    duro__free(a->instance_id);
    duro__free(a->name);
    duro__free(a->input);
    duro__free(a);
}

/* After the ack of w's completion (or failure) committed: an activity
 * delivered more than once was retried, and the problem that recorded
 * (see duro__runtime_set_problem) is over. A first delivery writes
 * nothing. */
static void resolved(duro_runtime *rt, const duro_worker_item *w)
{
    if (w->attempt > 1)
        duro__runtime_set_problem(rt, w->item.instance_id, NULL, 0);
}

/* Runs one fetched activity (its fetch began at monotonic time
 * fetched_ms, which the first renewal and the lock's deadline count from).
 * Returns 1 when this thread was abandoned while the activity ran: it must
 * then exit without touching the runtime. With `next`, a successful
 * completion ack may hand back the next item, fetched by the call that
 * began at *next_fetched_ms. */
static int run_item(slot_ctx *s, duro_worker_item *w, int64_t fetched_ms,
                    duro_worker_item **next, int64_t *next_fetched_ms)
{
    duro_runtime *rt = s->rt;
    duro__manager *m = rt->manager;
    const duro_work_item *x = &w->item;
    duro_work_item completion;
    duro_error err;
    char why[512];

    if (w->attempt > rt->opts.max_attempts) {
        snprintf(why, sizeof(why),
                 "poison message: activity '%s' was delivered %u times "
                 "without completing (max_attempts %u)",
                 x->name, w->attempt, rt->opts.max_attempts);
        duro__utf8_scrub(why); /* a name cut short by the buffer */
        fill_failure(&completion, x, why, DURO_CATEGORY_INFRASTRUCTURE);
        int rc = ack_with_retries(rt, x->name, w->lock_token, &completion, NULL,
                                  fetched_ms, NULL, NULL, &err);
        if (rc == DURO_OK) {
            /* counted and logged once it happened */
            DURO__COUNT(rt, m_poison);
            duro__log(&rt->logger, DURO_LOG_ERROR, "instance '%s': %s",
                      x->instance_id, why);
            resolved(rt, w);
        } else if (rc == DURO_STORAGE && !err.retryable) {
            /* The store refuses the failure too: the row comes back when
             * its lock expires, and is refused again until it is
             * repaired. Say that, not that the activity failed. */
            char refused[1024]; /* cut to the problem's size when set */
            snprintf(refused, sizeof(refused),
                     "the store refuses writes: the instance cannot progress "
                     "until the store is repaired (activity '%.100s', event "
                     "%llu, delivered %u times, past max_attempts %u: "
                     "failing it as poison is refused too; tried again when "
                     "its lock expires): %.300s",
                     x->name, (unsigned long long)x->source_id, w->attempt,
                     rt->opts.max_attempts, err.message);
            duro__log(&rt->logger, DURO_LOG_ERROR, "instance '%s': %s",
                      x->instance_id, refused);
            duro__runtime_set_problem(rt, x->instance_id, refused,
                                      duro__wall_ms() +
                                          rt->opts.worker_lock_timeout_ms);
        }
        return 0;
    }
    const duro__activity_entry *entry =
        duro__registry_find_activity(rt->registry, x->name);
    if (entry == NULL) {
        if (w->attempt < rt->opts.max_attempts) {
            int64_t d = rt->opts.unknown_name_retry_ms;
            for (uint32_t i = 1; i < w->attempt && d < 60000; i++)
                d *= 2;
            d = DURO__MIN(d, 60000);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "activity '%s' is not registered (instance '%s'); "
                      "retrying in %lld ms",
                      x->name, x->instance_id, (long long)d);
            snprintf(why, sizeof(why),
                     "activity '%.200s' (event %llu) is not registered in "
                     "this runtime (attempt %u of %u, then the activity "
                     "fails)",
                     x->name, (unsigned long long)x->source_id, w->attempt,
                     rt->opts.max_attempts);
            duro__runtime_set_problem(rt, x->instance_id, why,
                                      duro__wall_ms() + d);
            abandon_row(rt, w->lock_token, d, NULL);
            return 0;
        }
        snprintf(why, sizeof(why),
                 "activity '%s' is not registered (gave up after %u "
                 "attempts)",
                 x->name, w->attempt);
        duro__utf8_scrub(why); /* a name cut short by the buffer */
        fill_failure(&completion, x, why, DURO_CATEGORY_CONFIGURATION);
        if (ack_with_retries(rt, x->name, w->lock_token, &completion, NULL,
                             fetched_ms, NULL, NULL, &err) == DURO_OK) {
            duro__metrics_activity_outcome(&rt->metrics, NULL,
                                           DURO__ACT_FAILED);
            resolved(rt, w);
        }
        return 0;
    }
    if (w->attempt > 1 && rt->provider->version >= 4) {
        /* Earlier deliveries ended without a completion (a runtime that
         * stopped, a lock that was lost): if this one dies too, the
         * climbing count is visible on the instance. */
        snprintf(why, sizeof(why),
                 "activity '%.200s' (event %llu) was delivered %u times "
                 "without completing (earlier attempts stopped or lost their "
                 "lock); it fails as poison after max_attempts %u",
                 x->name, (unsigned long long)x->source_id, w->attempt,
                 rt->opts.max_attempts);
        duro__runtime_set_problem(rt, x->instance_id, why,
                                  duro__wall_ms() +
                                      rt->opts.worker_lock_timeout_ms);
    }

    duro_cancel_token *token = duro__token_create();
    duro__inflight *f = token ? duro__calloc(1, sizeof(*f)) : NULL;
    duro_activity *a = f ? make_context(w, entry->user, token) : NULL;
    if (f != NULL) {
        f->lock_token = duro__strdup(w->lock_token);
        f->instance_id = duro__strdup(x->instance_id);
        f->name = duro__strdup(x->name);
    }
    if (a == NULL || f->lock_token == NULL || f->instance_id == NULL ||
        f->name == NULL) {
        if (a != NULL)
            free_context(a);
        if (f != NULL) {
            duro__free(f->lock_token);
            duro__free(f->instance_id);
            duro__free(f->name);
            duro__free(f);
        }
        duro_cancel_token_release(token);
        abandon_row(rt, w->lock_token, 1000, NULL);
        return 0;
    }
    duro__token_retain(token); /* one for the context, one for f */
    f->token = token;
    f->execution_id = x->execution_id;
    f->activity_id = x->source_id;
    f->slot = s;
    atomic_init(&f->refs, 2);
    /* busy from before it can be abandoned: whoever ends it (this thread
     * or the manager, one compare-and-swap) counts it back */
    int64_t begin_ns = duro__metrics_activity_begin(&rt->metrics);

    pthread_mutex_lock(&m->lock);
    f->next_renew_ms = duro__add_ms(fetched_ms, duro__renew_interval(rt));
    f->locked_ms = fetched_ms;
    f->next = m->head;
    m->head = f;
    f->in_list = 1;
    if (f->next_renew_ms < atomic_load(&m->next_due_ms))
        atomic_store(&m->next_due_ms, f->next_renew_ms);
    const char *cancelled = duro__manager_take_recent_cancel(m, f);
    if (cancelled != NULL)
        duro__inflight_fire(f, cancelled, duro__mono_ms(),
                            rt->opts.cancel_grace_ms);
    if (cancelled != NULL)
        pthread_cond_signal(&m->cond); /* its grace period is watched */
    else
        duro__manager_listed(rt, f);
    pthread_mutex_unlock(&m->lock);

    duro_result res;
    duro__result_init(&res);
    int rc, ran = 0;
    int64_t started_ms = 0, finished_ms = 0; /* wall clock, for history */
    if (duro_cancel_token_cancelled(token)) {
        /* Cancelled between its fetch and now: never start it. */
        rc = duro_fail(&res, "cancelled before it started");
    } else {
        started_ms = duro__wall_ms();
        rc = entry->fn(a, a->input, &res);
        finished_ms = duro__wall_ms();
        ran = 1;
    }
    duro__result_finish(&res, rc);

    if (atomic_exchange(&f->phase, PHASE_DONE) == PHASE_ABANDONED) {
        /* The slot went to another thread: discard everything quietly. */
        duro__result_clear(&res);
        free_context(a);
        duro_cancel_token_release(token);
        duro__inflight_release(f);
        return 1;
    }
    duro__metrics_activity_end(&rt->metrics, entry, begin_ns, ran);

    if (duro_cancel_token_cancelled(token)) {
        /* Nobody waits for this result. The row is gone when a turn
         * cancelled it; when only the lock was lost it goes back to the
         * queue. Either way no completion is enqueued. */
        abandon_row(rt, f->lock_token, 0, NULL);
        duro__metrics_activity_cancelled(&rt->metrics, entry, token->reason);
        duro__log(&rt->logger, DURO_LOG_INFO,
                  "activity '%s' (instance '%s', event %llu) was cancelled "
                  "(%s); its result is discarded",
                  f->name, f->instance_id, (unsigned long long)f->activity_id,
                  token->reason);
    } else {
        memset(&completion, 0, sizeof(completion));
        completion.instance_id = x->instance_id;
        completion.execution_id = x->execution_id;
        completion.source_id = x->source_id;
        if (res.oom) {
            fill_failure(&completion, x, "out of memory building the result",
                         DURO_CATEGORY_INFRASTRUCTURE);
        } else if (res.kind == DURO__RESULT_OK ||
                   res.kind == DURO__RESULT_CONTINUE_AS_NEW) {
            completion.kind = DURO_WORK_ACTIVITY_COMPLETED;
            completion.payload = res.output;
            if (res.output != NULL &&
                strlen(res.output) > rt->opts.max_payload) {
                snprintf(why, sizeof(why),
                         "output of activity '%s' is %zu bytes, over the "
                         "limit of %zu",
                         x->name, strlen(res.output), rt->opts.max_payload);
                duro__utf8_scrub(why);
                fill_failure(&completion, x, why, DURO_CATEGORY_CONFIGURATION);
            }
        } else if (res.invalid) {
            /* The function's output or failure message is not UTF-8: it
             * fails now, once, saying so, rather than being refused by the
             * store on every ack (and run again each time). */
            snprintf(why, sizeof(why), "activity '%.200s' %s", x->name,
                     res.error);
            duro__utf8_scrub(why); /* a name cut short by the buffer */
            duro__log(&rt->logger, DURO_LOG_WARN, "instance '%s': %s",
                      x->instance_id, why);
            fill_failure(&completion, x, why, DURO_CATEGORY_CONFIGURATION);
        } else {
            const char *e = res.error ? res.error : "failed";
            if (strlen(e) > rt->opts.max_payload)
                e = "activity error message over the payload limit";
            fill_failure(&completion, x, e,
                         res.category ? res.category
                                      : DURO_CATEGORY_APPLICATION);
        }
        /* after fill_failure, which clears the completion */
        completion.started_ms = started_ms;
        completion.finished_ms = finished_ms;
        if (next != NULL)
            duro__renew_overdue(rt); /* the ack also fetches */
        rc = ack_with_retries(rt, f->name, f->lock_token, &completion, f,
                              fetched_ms, next, next_fetched_ms, &err);
        s->looked = rc == DURO_OK && next != NULL && *next == NULL &&
                    rt->provider->version >= 2 &&
                    rt->provider->ack_and_fetch_work_item != NULL;
        if (rc == DURO_OK) {
            duro__metrics_activity_outcome(&rt->metrics, entry,
                                           completion.kind ==
                                                   DURO_WORK_ACTIVITY_COMPLETED
                                               ? DURO__ACT_COMPLETED
                                               : DURO__ACT_FAILED);
            resolved(rt, w);
        } else if (rc == ACK_GAVE_UP) {
            /* The lock's deadline or a shutdown's passed (logged): no
             * abandon, no other store call that could wait too; the row's
             * lock expires. */
        } else if (rc == ACK_OUTCOME_UNKNOWN) {
            duro__log(&rt->logger, DURO_LOG_INFO,
                      "ack of activity '%s' (instance '%s', event %llu) "
                      "failed retryably and its retry found the row gone: "
                      "the failed attempt may have committed (or the "
                      "activity was cancelled meanwhile); nothing more to do",
                      f->name, f->instance_id,
                      (unsigned long long)f->activity_id);
        } else if (rc == DURO_LOCK_LOST) {
            /* Counted with the reason a cancelling turn recorded: its
             * commit may have come after the function returned, when its
             * token is no longer fired. */
            char reason[64];
            if (duro_cancel_token_cancelled(token))
                snprintf(reason, sizeof(reason), "%s", token->reason);
            else
                duro__lost_row_reason(rt, f, reason, sizeof(reason));
            duro__metrics_activity_cancelled(&rt->metrics, entry, reason);
            duro__log(&rt->logger, DURO_LOG_INFO,
                      "completion of activity '%s' (instance '%s', event "
                      "%llu) dropped: its row is gone (cancelled) or its "
                      "lock was lost",
                      f->name, f->instance_id,
                      (unsigned long long)f->activity_id);
        } else {
            duro__log(&rt->logger, DURO_LOG_ERROR,
                      "ack of activity '%s' (instance '%s') failed: %s",
                      f->name, f->instance_id, err.message);
            abandon_row(rt, f->lock_token, 1000, NULL);
        }
    }
    pthread_mutex_lock(&m->lock);
    if (f->in_list)
        duro__manager_unlist(m, f);
    pthread_mutex_unlock(&m->lock);
    duro__inflight_release(f); /* the list's reference */
    duro__result_clear(&res);
    free_context(a);
    duro_cancel_token_release(token);
    duro__inflight_release(f);
    return 0;
}

static void *slot_main(void *arg)
{
    slot_ctx *s = arg;
    duro_runtime *rt = s->rt;
    duro_provider *p = rt->provider;
    duro__mark_runtime_thread();
    int64_t backoff = 0;
    duro_worker_item *w = NULL; /* fetched with the previous ack */
    int64_t fetched_ms = 0;     /* when w was fetched (monotonic) */
    while (!atomic_load(&rt->stop_flag)) {
        duro_error err;
        if (w != NULL) {
            duro_worker_item *next = NULL;
            int64_t next_fetched_ms = duro__mono_ms();
            s->looked = 0;
            int gone = run_item(s, w, fetched_ms, &next, &next_fetched_ms);
            duro_worker_item_free(w);
            w = next;
            fetched_ms = next_fetched_ms;
            if (gone)
                return NULL; /* abandoned: the runtime may already be gone */
            if (w == NULL && s->looked)
                duro__runtime_wait_for_work(rt, DURO_QUEUE_WORKER);
            continue;
        }
        duro__renew_overdue(rt);
        fetched_ms = duro__mono_ms(); /* the lock begins after this */
        int rc =
            p->fetch_work_item(p, rt->opts.worker_lock_timeout_ms, &w, &err);
        if (rc != DURO_OK) {
            backoff = backoff == 0 ? 10 : DURO__MIN(backoff * 2, 1000);
            duro__runtime_storage_failed(
                rt, DURO_QUEUE_WORKER, "fetch of activity work", &err, backoff);
            duro__runtime_pause(rt, backoff);
            continue;
        }
        duro__runtime_storage_ok(rt, DURO_QUEUE_WORKER);
        backoff = 0;
        if (w == NULL)
            duro__runtime_wait_for_work(rt, DURO_QUEUE_WORKER);
    }
    if (w != NULL) {
        /* Fetched with the last ack as the runtime stopped: let it go. */
        abandon_row(rt, w->lock_token, 0, NULL);
        duro_worker_item_free(w);
    }
    slot_exited(rt);
    return NULL;
}

/* ------------------------------------------------------------------------
 * start and stop */

int duro__workers_start(duro_runtime *rt)
{
    int rc0 = duro__manager_start(rt, spawn_slot_thread);
    if (rc0 != DURO_OK)
        return rc0;
    duro__manager *m = rt->manager;
    rt->slot_count = rt->opts.worker_concurrency;
    rt->slots = duro__calloc((size_t)rt->slot_count, sizeof(slot_ctx *));
    if (rt->slots == NULL)
        return DURO_NOMEM;
    for (int i = 0; i < rt->slot_count; i++) {
        slot_ctx *s = duro__calloc(1, sizeof(*s));
        if (s == NULL)
            return DURO_NOMEM;
        s->rt = rt;
        s->index = i;
        rt->slots[i] = s;
        pthread_mutex_lock(&m->lock);
        int rc = spawn_slot_thread(rt, s);
        pthread_mutex_unlock(&m->lock);
        if (rc != DURO_OK)
            return duro__fail(DURO_ERROR, "could not start worker threads");
    }
    return DURO_OK;
}

int duro__workers_stop(duro_runtime *rt, int64_t timeout_ms)
{
    duro__manager *m = rt->manager;
    if (m == NULL)
        return DURO_OK;
    int result = DURO_OK;
    struct timespec deadline;
    duro__deadline_ts(&deadline, timeout_ms);
    pthread_mutex_lock(&rt->lock);
    while (atomic_load(&rt->live_slot_threads) > 0) {
        if (pthread_cond_timedwait(&rt->slots_cond, &rt->lock, &deadline) !=
                0 &&
            atomic_load(&rt->live_slot_threads) > 0) {
            break;
        }
    }
    pthread_mutex_unlock(&rt->lock);

    if (atomic_load(&rt->live_slot_threads) > 0) {
        /* Out of time: every activity still running is told to stop, its
         * row goes back to the queue for another worker, and its thread is
         * left behind. */
        result = DURO_TIMEOUT;
        work_list left = {0};
        int64_t now = duro__mono_ms();
        pthread_mutex_lock(&m->lock);
        for (duro__inflight *f = m->head; f != NULL; f = f->next) {
            if (!duro__inflight_claim_abandon(f))
                continue;
            duro__inflight_fire(f, "shutdown", now, rt->opts.cancel_grace_ms);
            if (duro__work_push(&left, f))
                atomic_fetch_add(&f->refs, 1);
            slot_ctx *s = f->slot;
            if (s->thread_valid) {
                pthread_detach(s->thread);
                s->thread_valid = 0;
                atomic_fetch_sub(&rt->live_slot_threads, 1);
                duro__runtime_loop_leave(rt);
            }
        }
        for (size_t i = 0; i < left.count; i++) {
            duro__manager_unlist(m, left.items[i]);
            duro__inflight_release(left.items[i]); /* the list's reference */
        }
        pthread_mutex_unlock(&m->lock);
        for (size_t i = 0; i < left.count; i++) {
            duro_error err;
            int back =
                abandon_row(rt, left.items[i]->lock_token, 0, &err) == DURO_OK;
            duro__metrics_activity_abandoned(&rt->metrics, left.items[i]->name,
                                             left.items[i]->token->reason);
            if (back)
                duro__log(&rt->logger, DURO_LOG_WARN,
                          "shutdown: activity '%s' (instance '%s') did not "
                          "finish in time; returned to the queue",
                          left.items[i]->name, left.items[i]->instance_id);
            else
                duro__log(&rt->logger, DURO_LOG_WARN,
                          "shutdown: activity '%s' (instance '%s') did not "
                          "finish in time; not returned to the queue (%s)",
                          left.items[i]->name, left.items[i]->instance_id,
                          err.message);
            duro__inflight_release(left.items[i]);
        }
        duro__free(left.items);
        /* Slot threads between items exit on their own, and one still
         * recording a completion gives up at the deadline after its
         * current attempt (ack_with_retries); wait for them. */
        pthread_mutex_lock(&rt->lock);
        while (atomic_load(&rt->live_slot_threads) > 0)
            pthread_cond_wait(&rt->slots_cond, &rt->lock);
        pthread_mutex_unlock(&rt->lock);
    }

    duro__manager_stop(rt);
    for (int i = 0; i < rt->slot_count; i++) {
        slot_ctx *s = rt->slots ? rt->slots[i] : NULL;
        if (s != NULL && s->thread_valid) {
            pthread_join(s->thread, NULL);
            s->thread_valid = 0;
        }
    }
    /* Completions left unrecorded run again: not a clean stop either. */
    if (atomic_load(&rt->acks_given_up) > 0)
        result = DURO_TIMEOUT;
    return result;
}

void duro__workers_free(duro_runtime *rt)
{
    duro__manager_free(rt);
    for (int i = 0; rt->slots != NULL && i < rt->slot_count; i++)
        duro__free(rt->slots[i]);
    duro__free(rt->slots);
    rt->slots = NULL;
}
