/* worker.c - the worker dispatcher and the activity manager. Each worker slot
 * is a thread that fetches one ActivityExecute, runs the activity with its
 * context and acks the completion. One activity manager thread renews the
 * locks of every in-flight activity of this runtime before they expire,
 * fires an activity's cancellation token when its row is gone or taken (with
 * the reason the cancelling turn recorded, else "instance_deleted" when the
 * instance is gone, else "lock_lost"; at once when a
 * turn of this runtime cancelled it), and, when a cancelled activity
 * has not returned within the grace period, frees its slot: a new thread
 * takes the slot and the old one is abandoned (its result is discarded).
 *
 * Lock order: runtime->lock before manager->lock. The manager lock guards
 * the in-flight list and the slots' thread handles; it is never held while
 * user code or the provider runs. An abandoned thread touches only its own
 * context and its reference-counted in-flight record, so it may outlive the
 * runtime. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"

struct duro__inflight {
    _Atomic int refs; /* slot thread + manager list */
    char *lock_token;
    char *instance_id;
    uint64_t execution_id;
    uint64_t activity_id;
    char *name;
    duro_cancel_token *token;
    int64_t next_renew_ms;     /* monotonic; INT64_MAX: stop renewing */
    int64_t locked_ms;         /* monotonic: when the fetch or the last
                                  successful renewal of its lock began */
    int64_t grace_deadline_ms; /* monotonic; 0: not cancelled */
    int renewing;              /* a renewal call is in progress */
    _Atomic int phase;         /* PHASE_*: RUNNING until the function returns
                                  (DONE) or the runtime gives up (ABANDONED);
                                  decided by one compare-and-swap, so an
                                  abandoned thread never takes a runtime lock */
    int in_list;
    struct duro__slot_ctx *slot;
    duro__inflight *next;
};

typedef struct duro__slot_ctx {
    duro_runtime *rt;
    int index;
    pthread_t thread; /* under manager->lock */
    int thread_valid;
    int looked; /* the last ack fetched too, and found nothing: the queue
                   was just looked at, so wait rather than fetch again */
} slot_ctx;

enum { PHASE_RUNNING = 0, PHASE_DONE = 1, PHASE_ABANDONED = 2 };

static int running(duro__inflight *f)
{
    return atomic_load(&f->phase) == PHASE_RUNNING;
}

/* Claims a running activity for abandonment; 0 when it already returned. */
static int claim_abandon(duro__inflight *f)
{
    int expected = PHASE_RUNNING;
    return atomic_compare_exchange_strong(&f->phase, &expected,
                                          PHASE_ABANDONED);
}

/* A cancellation decided by a turn of this runtime for an activity that was
 * not registered as running at that moment. A slot may have fetched it just
 * before the turn deleted its row and not registered it yet; when it does,
 * it finds the decision here and fires at once with the real reason instead
 * of learning "lock_lost" at its next renewal. */
#define RECENT_CANCELS 4096

typedef struct recent_cancel {
    char *instance_id; /* NULL: empty entry */
    uint64_t execution_id;
    uint64_t activity_id;
    const char *reason; /* one of the static DURO_REASON_* strings */
} recent_cancel;

struct duro__manager {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    duro__inflight *head;
    /* Earliest renewal due (monotonic ms) among in-flight activities not
     * being renewed, INT64_MAX when none; written under lock, read without
     * it by slots about to fetch (see renew_overdue). */
    _Atomic int64_t next_due_ms;
    int stop;
    pthread_t thread;
    int running;
    int64_t next_check_ms; /* monotonic: the next check_held; manager only */
    _Atomic int check_now; /* the watcher heard of a cancellation */
    pthread_t watcher;     /* waits on wait_for_cancellations */
    int watching;
    recent_cancel recent[RECENT_CANCELS]; /* ring, oldest overwritten */
    size_t recent_next;
};

static void fire(duro__inflight *f, const char *reason, int64_t now,
                 int64_t grace);
static void renew_overdue(duro_runtime *rt);
static int lost_row_reason(duro_runtime *rt, const duro__inflight *f,
                           char *reason, size_t size);

static void remember_cancel(duro__manager *m, const duro_activity_ref *r,
                            const char *reason)
{
    recent_cancel *e = &m->recent[m->recent_next];
    m->recent_next = (m->recent_next + 1) % RECENT_CANCELS;
    duro__free(e->instance_id);
    e->instance_id = duro__strdup(r->instance_id);
    e->execution_id = r->execution_id;
    e->activity_id = r->activity_id;
    e->reason = reason;
}

/* The reason of a remembered cancellation of f (forgetting it), or NULL. */
static const char *take_recent_cancel(duro__manager *m, duro__inflight *f)
{
    for (size_t i = 0; i < RECENT_CANCELS; i++) {
        recent_cancel *e = &m->recent[i];
        if (e->instance_id != NULL && e->activity_id == f->activity_id &&
            e->execution_id == f->execution_id &&
            strcmp(e->instance_id, f->instance_id) == 0) {
            const char *reason = e->reason;
            duro__free(e->instance_id);
            e->instance_id = NULL;
            return reason;
        }
    }
    return NULL;
}

static void inflight_release(duro__inflight *f)
{
    if (f == NULL || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    duro_cancel_token_release(f->token);
    duro__free(f->lock_token);
    duro__free(f->instance_id);
    duro__free(f->name);
    duro__free(f);
}

static void list_remove(duro__manager *m, duro__inflight *f)
{
    for (duro__inflight **pp = &m->head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == f) {
            *pp = f->next;
            f->next = NULL;
            f->in_list = 0;
            return;
        }
    }
}

static int64_t renew_interval(const duro_runtime *rt)
{
    return rt->opts.lock_renewal_ms;
}

/* ------------------------------------------------------------------------
 * slot threads */

static void *slot_main(void *arg);

static int spawn_slot_thread(duro_runtime *rt, slot_ctx *s)
{
    pthread_t t;
    atomic_fetch_add(&rt->live_slot_threads, 1);
    if (pthread_create(&t, NULL, slot_main, s) != 0) {
        atomic_fetch_sub(&rt->live_slot_threads, 1);
        return DURO_ERROR;
    }
    s->thread = t;
    s->thread_valid = 1;
    return DURO_OK;
}

static void slot_exited(duro_runtime *rt)
{
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
    f->next_renew_ms = duro__add_ms(fetched_ms, renew_interval(rt));
    f->locked_ms = fetched_ms;
    f->next = m->head;
    m->head = f;
    f->in_list = 1;
    if (f->next_renew_ms < atomic_load(&m->next_due_ms))
        atomic_store(&m->next_due_ms, f->next_renew_ms);
    const char *cancelled = take_recent_cancel(m, f);
    if (cancelled != NULL)
        fire(f, cancelled, duro__mono_ms(), rt->opts.cancel_grace_ms);
    pthread_cond_signal(&m->cond);
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
        inflight_release(f);
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
            renew_overdue(rt); /* the ack also fetches */
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
                lost_row_reason(rt, f, reason, sizeof(reason));
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
        list_remove(m, f);
    pthread_mutex_unlock(&m->lock);
    inflight_release(f); /* the list's reference */
    duro__result_clear(&res);
    free_context(a);
    duro_cancel_token_release(token);
    inflight_release(f);
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
                p->wait_for_work(p, DURO_QUEUE_WORKER,
                                 rt->opts.poll_interval_ms, &err);
            continue;
        }
        renew_overdue(rt);
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
            p->wait_for_work(p, DURO_QUEUE_WORKER, rt->opts.poll_interval_ms,
                             &err);
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
 * the activity manager */

typedef struct work_list {
    duro__inflight **items;
    size_t count, cap;
} work_list;

static int work_push(work_list *l, duro__inflight *f)
{
    duro__inflight **slot =
        duro__vec_push((void **)&l->items, &l->count, &l->cap, sizeof(*slot));
    if (slot == NULL)
        return 0;
    *slot = f;
    return 1;
}

static void fire(duro__inflight *f, const char *reason, int64_t now,
                 int64_t grace)
{
    if (duro__token_fire(f->token, reason))
        f->grace_deadline_ms = duro__add_ms(now, grace);
    f->next_renew_ms = INT64_MAX;
}

/* Why f's row is gone or no longer held (its renewal failed for good):
 * the reason a turn recorded in ActivityCancelRequested when it cancelled
 * the activity (read through a version-3 provider; the event commits with
 * the deletion of the row, so it is there when the row is gone); else
 * "instance_deleted" when the instance no longer exists (a forced delete
 * removes its rows, history and queues in one transaction and records no
 * reason, so its absence is the record); else "lock_lost": another worker
 * took the row after the lock expired (and may have acked it since). Asked
 * after LOCK_LOST too: a provider may reuse a deleted row's id, and a row
 * lost to another worker may have been cancelled since; the decided reason
 * says more. Each is a read of the store, so the activity learns the same
 * reason in this process and in another. Returns 0 (reason "lock_lost")
 * when a lookup failed retryably: the caller tries again instead of
 * guessing. */
static int lost_row_reason(duro_runtime *rt, const duro__inflight *f,
                           char *reason, size_t size)
{
    duro_provider *p = rt->provider;
    duro_error err;
    int rc;
    if (p->version >= 3 && p->read_activity_cancel_reason != NULL) {
        rc = p->read_activity_cancel_reason(p, f->instance_id, f->execution_id,
                                            f->activity_id, reason, size, &err);
        if (rc == DURO_OK && reason[0] != '\0')
            return 1;
        if (rc != DURO_OK && err.retryable) {
            snprintf(reason, size, "%s", "lock_lost");
            return 0;
        }
        if (rc != DURO_OK && rc != DURO_NOT_FOUND)
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "activity '%s' (instance '%s', event %llu): reading "
                      "its cancellation failed: %s",
                      f->name, f->instance_id,
                      (unsigned long long)f->activity_id, err.message);
    }
    snprintf(reason, size, "%s", "lock_lost");
    uint64_t execution;
    rc = p->latest_execution_id(p, f->instance_id, &execution, &err);
    if (rc == DURO_NOT_FOUND)
        snprintf(reason, size, "%s", "instance_deleted");
    else if (rc != DURO_OK && err.retryable)
        return 0;
    return 1;
}

/* Publishes the earliest renewal due; under m->lock. */
static void publish_next_due(duro__manager *m)
{
    int64_t next = INT64_MAX;
    for (duro__inflight *f = m->head; f != NULL; f = f->next)
        if (!f->renewing && f->next_renew_ms < next)
            next = f->next_renew_ms;
    atomic_store(&m->next_due_ms, next);
}

/* Renews every lock that is due, most overdue first, one at a time, and
 * acts on the outcomes. Runs on the manager every round, and on a slot
 * thread that is about to fetch while a renewal is overdue (renew_overdue):
 * whichever thread of the runtime has the CPU keeps its locks, so a slot of
 * this runtime never takes a row whose lock expired only because the
 * manager was not scheduled in time. A renewal is claimed just before it
 * runs, so one that waits (for the store, or for the CPU) never holds back
 * the others: another thread takes them. Takes m->lock; calls the provider
 * without it. */
static void renew_due(duro_runtime *rt)
{
    duro__manager *m = rt->manager;
    duro_provider *p = rt->provider;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        int64_t now = duro__mono_ms();
        duro__inflight *f = NULL;
        for (duro__inflight *g = m->head; g != NULL; g = g->next)
            if (!g->renewing && g->next_renew_ms <= now &&
                (f == NULL || g->next_renew_ms < f->next_renew_ms))
                f = g;
        if (f != NULL) {
            f->renewing = 1;
            atomic_fetch_add(&f->refs, 1);
        }
        publish_next_due(m);
        pthread_mutex_unlock(&m->lock);
        if (f == NULL)
            return;

        duro_error err;
        /* The lock now runs from a moment after `start`; scheduling the
         * next renewal from `start` keeps the margin before expiry at
         * timeout - interval however long this call waited. */
        int64_t start = duro__mono_ms();
        int rc = p->renew_work_item_lock(p, f->lock_token,
                                         rt->opts.worker_lock_timeout_ms, &err);
        /* The row is gone (NOT_FOUND) or held by another token
         * (LOCK_LOST): find out whether a turn cancelled it. A turn of
         * this runtime fires the token itself right after its commit;
         * both paths give the decided reason, whichever comes first. */
        char reason[64] = "lock_lost";
        int known = 1;
        if (rc != DURO_OK && !err.retryable && running(f))
            known = lost_row_reason(rt, f, reason, sizeof(reason));
        int64_t t = duro__mono_ms();
        pthread_mutex_lock(&m->lock);
        f->renewing = 0;
        if (rc == DURO_OK) {
            f->locked_ms = start; /* an ack's retries may go on until
                                     the lock's new deadline */
            if (f->next_renew_ms != INT64_MAX)
                f->next_renew_ms = start + renew_interval(rt);
        } else if (err.retryable || !known) {
            /* Busy storage is not a lost lock: try again soon. */
            DURO__COUNT(rt, m_storage_retries);
            if (f->next_renew_ms != INT64_MAX)
                f->next_renew_ms =
                    t + DURO__MIN(renew_interval(rt), (int64_t)250);
        } else if (running(f)) {
            DURO__COUNT(rt, m_renew_failures);
            fire(f, reason, t, rt->opts.cancel_grace_ms);
            /* the store's message guesses why the row is gone; the reason
             * read from history knows, unless the lock was really lost */
            if (strcmp(reason, "lock_lost") == 0)
                duro__log(&rt->logger, DURO_LOG_INFO,
                          "activity '%s' (instance '%s', event %llu): lock "
                          "renewal failed (%s); signalling cancellation (%s)",
                          f->name, f->instance_id,
                          (unsigned long long)f->activity_id, err.message,
                          reason);
            else
                duro__log(&rt->logger, DURO_LOG_INFO,
                          "activity '%s' (instance '%s', event %llu): its row "
                          "is gone, cancelled (%s); signalling cancellation",
                          f->name, f->instance_id,
                          (unsigned long long)f->activity_id, reason);
        } else {
            f->next_renew_ms = INT64_MAX;
        }
        if (f->next_renew_ms < atomic_load(&m->next_due_ms))
            atomic_store(&m->next_due_ms, f->next_renew_ms);
        /* a retry may be due before the manager's next wake-up, and a
         * fired token's grace period is the manager's to watch */
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
        inflight_release(f);
    }
}

/* Whether the provider can check rows (version 4, check_work_item_locks). */
static int can_check(const duro_runtime *rt)
{
    const duro_provider *p = rt->provider;
    return p->version >= 4 && p->check_work_item_locks != NULL;
}

/* Whether the manager checks its rows at the poll interval, between
 * renewals: a provider that can, and renewals rarer than polls. */
static int checks_held(const duro_runtime *rt)
{
    return can_check(rt) && rt->opts.poll_interval_ms < renew_interval(rt);
}

/* Learns, at the poll interval, that a running activity's row is gone or
 * taken - cancelled by a turn in another process, most often - without
 * waiting for its next renewal: one read of every in-flight token (a keyed
 * lookup each, no write), then the decided reason for each lost one, as a
 * failed renewal would. The renewal stays the fallback and what keeps the
 * lock. Manager thread; takes m->lock, calls the provider without it. */
static void check_held(duro_runtime *rt)
{
    duro__manager *m = rt->manager;
    duro_provider *p = rt->provider;
    pthread_mutex_lock(&m->lock);
    size_t n = 0;
    for (duro__inflight *f = m->head; f != NULL; f = f->next)
        n += running(f) && f->grace_deadline_ms == 0;
    duro__inflight **batch = n ? duro__malloc(n * sizeof(*batch)) : NULL;
    const char **tokens = n ? duro__malloc(n * sizeof(*tokens)) : NULL;
    unsigned char *held = n ? duro__malloc(n) : NULL;
    if (batch == NULL || tokens == NULL || held == NULL)
        n = 0; /* nothing to check, or no memory: the renewal still will */
    size_t k = 0;
    for (duro__inflight *f = m->head; f != NULL && k < n; f = f->next) {
        if (!running(f) || f->grace_deadline_ms > 0)
            continue; /* returned, or already told */
        atomic_fetch_add(&f->refs, 1);
        batch[k] = f;
        tokens[k++] = f->lock_token;
    }
    pthread_mutex_unlock(&m->lock);
    n = k;
    duro_error err;
    int rc =
        n > 0 ? p->check_work_item_locks(p, tokens, n, held, &err) : DURO_OK;
    if (rc != DURO_OK && err.retryable)
        DURO__COUNT(rt, m_storage_retries);
    else if (rc != DURO_OK)
        duro__log(&rt->logger, DURO_LOG_WARN,
                  "checking in-flight activity locks failed: %s", err.message);
    for (size_t i = 0; i < n; i++) {
        duro__inflight *g = batch[i];
        char reason[64];
        if (rc == DURO_OK && !held[i] && running(g) &&
            lost_row_reason(rt, g, reason, sizeof(reason))) {
            pthread_mutex_lock(&m->lock);
            if (running(g) && g->grace_deadline_ms == 0) {
                fire(g, reason, duro__mono_ms(), rt->opts.cancel_grace_ms);
                duro__log(&rt->logger, DURO_LOG_INFO,
                          "activity '%s' (instance '%s', event %llu): its row "
                          "is gone or taken; signalling cancellation (%s)",
                          g->name, g->instance_id,
                          (unsigned long long)g->activity_id, reason);
            }
            pthread_mutex_unlock(&m->lock);
        }
        inflight_release(g);
    }
    duro__free(batch);
    duro__free(tokens);
    duro__free(held);
}

/* Called by a slot before a fetch: renews what is overdue, so this slot
 * cannot take a row of this runtime whose lock expired for lack of a
 * timely renewal. One atomic load when nothing is. */
static void renew_overdue(duro_runtime *rt)
{
    duro__manager *m = rt->manager;
    if (duro__mono_ms() < atomic_load(&m->next_due_ms))
        return;
    renew_due(rt);
}

static void *manager_main(void *arg)
{
    duro_runtime *rt = arg;
    duro__manager *m = rt->manager;
    duro__mark_runtime_thread();
    work_list give_up = {0};
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        int64_t now = duro__mono_ms();
        give_up.count = 0;
        for (duro__inflight *f = m->head; f != NULL; f = f->next) {
            if (f->grace_deadline_ms > 0 && now >= f->grace_deadline_ms &&
                running(f) && work_push(&give_up, f)) {
                if (claim_abandon(f))
                    atomic_fetch_add(&f->refs, 1);
                else
                    give_up.count--;
            }
        }
        for (size_t i = 0; i < give_up.count; i++)
            list_remove(m, give_up.items[i]);
        pthread_mutex_unlock(&m->lock);

        renew_due(rt);
        int told = atomic_exchange(&m->check_now, 0);
        if ((told && can_check(rt)) ||
            (checks_held(rt) && duro__mono_ms() >= m->next_check_ms)) {
            check_held(rt);
            m->next_check_ms =
                duro__add_ms(duro__mono_ms(), rt->opts.poll_interval_ms);
        }

        for (size_t i = 0; i < give_up.count; i++) {
            duro__inflight *f = give_up.items[i];
            slot_ctx *s = f->slot;
            duro__metrics_activity_abandoned(&rt->metrics, f->name,
                                             f->token->reason);
            duro__log(&rt->logger, DURO_LOG_WARN,
                      "activity '%s' (instance '%s', event %llu) ignored its "
                      "cancellation for %lld ms; its worker slot is freed "
                      "and the thread abandoned",
                      f->name, f->instance_id,
                      (unsigned long long)f->activity_id,
                      (long long)rt->opts.cancel_grace_ms);
            pthread_mutex_lock(&m->lock);
            pthread_t old = s->thread;
            int had = s->thread_valid;
            s->thread_valid = 0;
            if (had)
                pthread_detach(old);
            /* The abandoned thread no longer counts as a slot thread. */
            atomic_fetch_sub(&rt->live_slot_threads, 1);
            if (!atomic_load(&rt->stop_flag) &&
                spawn_slot_thread(rt, s) != DURO_OK)
                duro__log(&rt->logger, DURO_LOG_ERROR,
                          "could not start a replacement worker thread");
            pthread_mutex_unlock(&m->lock);
            pthread_mutex_lock(&rt->lock);
            pthread_cond_broadcast(&rt->slots_cond);
            pthread_mutex_unlock(&rt->lock);
            inflight_release(f); /* the list's reference */
            inflight_release(f); /* ours */
        }

        pthread_mutex_lock(&m->lock);
        publish_next_due(m);
        int64_t next = atomic_load(&m->next_due_ms);
        int any_running = 0;
        for (duro__inflight *f = m->head; f != NULL; f = f->next) {
            if (f->grace_deadline_ms > 0 && running(f) &&
                f->grace_deadline_ms < next)
                next = f->grace_deadline_ms;
            if (f->grace_deadline_ms == 0 && running(f))
                any_running = 1;
        }
        if (any_running && checks_held(rt) && m->next_check_ms < next)
            next = m->next_check_ms;
        if (m->stop)
            break;
        if (atomic_load(&m->check_now))
            next = 0; /* told while this round ran */
        int64_t wait = next == INT64_MAX ? 60000 : next - duro__mono_ms();
        if (wait > 0) {
            struct timespec ts;
            duro__deadline_ts(&ts, wait);
            pthread_cond_timedwait(&m->cond, &m->lock, &ts);
        }
    }
    pthread_mutex_unlock(&m->lock);
    duro__free(give_up.items);
    return NULL;
}

/* Waits for word of cancellations decided in any process (the provider's
 * wait_for_cancellations) and has the manager check its in-flight rows at
 * once when activities are running. Exits when the runtime stops (the
 * shutdown's sticky wake() ends the wait). */
static void *watcher_main(void *arg)
{
    duro_runtime *rt = arg;
    duro__manager *m = rt->manager;
    duro_provider *p = rt->provider;
    duro__mark_runtime_thread();
    while (!atomic_load(&rt->stop_flag)) {
        duro_error err;
        int rc = p->wait_for_cancellations(p, 1000, &err);
        if (atomic_load(&rt->stop_flag))
            break;
        if (rc != DURO_OK) {
            /* The store is unreachable; the poll-interval checks and the
             * renewals still run. Try again after a poll interval (or
             * stop: the shutdown joins this thread). */
            duro__runtime_pause(rt, rt->opts.poll_interval_ms);
            continue;
        }
        pthread_mutex_lock(&m->lock);
        int any = 0;
        for (duro__inflight *f = m->head; f != NULL && !any; f = f->next)
            any = running(f) && f->grace_deadline_ms == 0;
        if (any) {
            atomic_store(&m->check_now, 1);
            pthread_cond_signal(&m->cond);
        }
        pthread_mutex_unlock(&m->lock);
    }
    return NULL;
}

void duro__workers_cancel_local(duro_runtime *rt, const duro_activity_ref *refs,
                                const char **reasons, size_t count)
{
    duro__manager *m = rt->manager;
    if (m == NULL || count == 0)
        return;
    int64_t now = duro__mono_ms();
    int fired = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < count; i++) {
        const char *reason = reasons ? reasons[i] : "cancelled";
        duro__inflight *f = m->head;
        while (f != NULL && !(refs[i].activity_id == f->activity_id &&
                              refs[i].execution_id == f->execution_id &&
                              strcmp(refs[i].instance_id, f->instance_id) == 0))
            f = f->next;
        if (f == NULL) {
            remember_cancel(m, &refs[i], reason);
        } else if (running(f)) {
            fire(f, reason, now, rt->opts.cancel_grace_ms);
            fired = 1;
        }
    }
    if (fired)
        pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------------
 * start and stop */

int duro__workers_start(duro_runtime *rt)
{
    duro__manager *m = duro__calloc(1, sizeof(*m));
    if (m == NULL)
        return DURO_NOMEM;
    pthread_mutex_init(&m->lock, NULL);
    duro__cond_init_monotonic(&m->cond);
    atomic_init(&m->next_due_ms, INT64_MAX);
    rt->manager = m;
    if (pthread_create(&m->thread, NULL, manager_main, rt) != 0)
        return duro__fail(DURO_ERROR, "could not start the activity manager");
    m->running = 1;
    duro_provider *p = rt->provider;
    atomic_init(&m->check_now, 0);
    if (rt->opts.worker_concurrency > 0 && p->version >= 4 &&
        p->wait_for_cancellations != NULL && can_check(rt)) {
        if (pthread_create(&m->watcher, NULL, watcher_main, rt) != 0)
            return duro__fail(DURO_ERROR,
                              "could not start the cancellation watcher");
        m->watching = 1;
    }
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
            if (!claim_abandon(f))
                continue;
            fire(f, "shutdown", now, rt->opts.cancel_grace_ms);
            if (work_push(&left, f))
                atomic_fetch_add(&f->refs, 1);
            slot_ctx *s = f->slot;
            if (s->thread_valid) {
                pthread_detach(s->thread);
                s->thread_valid = 0;
                atomic_fetch_sub(&rt->live_slot_threads, 1);
            }
        }
        for (size_t i = 0; i < left.count; i++) {
            list_remove(m, left.items[i]);
            inflight_release(left.items[i]); /* the list's reference */
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
            inflight_release(left.items[i]);
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

    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->running) {
        pthread_join(m->thread, NULL);
        m->running = 0;
    }
    if (m->watching) {
        pthread_join(m->watcher, NULL);
        m->watching = 0;
    }
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
    duro__manager *m = rt->manager;
    if (m != NULL) {
        while (m->head != NULL) {
            duro__inflight *f = m->head;
            list_remove(m, f);
            inflight_release(f);
        }
        for (size_t i = 0; i < RECENT_CANCELS; i++)
            duro__free(m->recent[i].instance_id);
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        duro__free(m);
        rt->manager = NULL;
    }
    for (int i = 0; rt->slots != NULL && i < rt->slot_count; i++)
        duro__free(rt->slots[i]);
    duro__free(rt->slots);
    rt->slots = NULL;
}
