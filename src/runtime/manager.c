/* manager.c - the activity manager: one thread per runtime that renews the
 * locks of every in-flight activity before they expire, writes the
 * runtime's heartbeat among the live runtimes (services.c), fires an
 * activity's cancellation token when its row is gone or taken (with the
 * reason the cancelling turn recorded, else "instance_deleted" when the
 * instance is gone, else "lock_lost"; at once when a turn of this runtime
 * cancelled it), and, when a cancelled activity has not returned within
 * the grace period, frees its slot (a new thread takes it, through
 * respawn, and the old one is abandoned). A watcher thread hears of
 * cancellations decided in any process. The in-flight list is the
 * manager's; worker.c's slots add and remove their activities (lock order
 * and ownership: worker.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/activities.h"

int duro__inflight_running(duro__inflight *f)
{
    return atomic_load(&f->phase) == PHASE_RUNNING;
}

/* Claims a running activity for abandonment; 0 when it already returned. */
int duro__inflight_claim_abandon(duro__inflight *f)
{
    int expected = PHASE_RUNNING;
    return atomic_compare_exchange_strong(&f->phase, &expected,
                                          PHASE_ABANDONED);
}

static void remember_cancel(duro__manager *m, const duro_activity_ref *r,
                            const char *reason)
{
    recent_cancel *e = &m->recent[m->recent_next];
    m->recent_next = (m->recent_next + 1) % RECENT_CANCELS;
    if (e->instance_id != NULL)
        m->recent_count--;
    duro__free(e->instance_id);
    e->instance_id = duro__strdup(r->instance_id);
    if (e->instance_id != NULL)
        m->recent_count++;
    e->execution_id = r->execution_id;
    e->activity_id = r->activity_id;
    e->reason = reason;
}

/* The reason of a remembered cancellation of f (forgetting it), or NULL. */
const char *duro__manager_take_recent_cancel(duro__manager *m,
                                             duro__inflight *f)
{
    /* every activity a slot runs asks: most often none is remembered */
    for (size_t i = 0; i < RECENT_CANCELS && m->recent_count > 0; i++) {
        recent_cancel *e = &m->recent[i];
        if (e->instance_id != NULL && e->activity_id == f->activity_id &&
            e->execution_id == f->execution_id &&
            strcmp(e->instance_id, f->instance_id) == 0) {
            const char *reason = e->reason;
            duro__free(e->instance_id);
            e->instance_id = NULL;
            m->recent_count--;
            return reason;
        }
    }
    return NULL;
}

void duro__inflight_release(duro__inflight *f)
{
    if (f == NULL || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    duro_cancel_token_release(f->token);
    duro__free(f->lock_token);
    duro__free(f->instance_id);
    duro__free(f->name);
    duro__free(f);
}

void duro__manager_unlist(duro__manager *m, duro__inflight *f)
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

int64_t duro__renew_interval(const duro_runtime *rt)
{
    return rt->opts.lock_renewal_ms;
}

/* ------------------------------------------------------------------------
 * the activity manager */

int duro__work_push(work_list *l, duro__inflight *f)
{
    duro__inflight **slot =
        duro__vec_push((void **)&l->items, &l->count, &l->cap, sizeof(*slot));
    if (slot == NULL)
        return 0;
    *slot = f;
    return 1;
}

void duro__inflight_fire(duro__inflight *f, const char *reason, int64_t now,
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
int duro__lost_row_reason(duro_runtime *rt, const duro__inflight *f,
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
        if (rc != DURO_OK && !err.retryable && duro__inflight_running(f))
            known = duro__lost_row_reason(rt, f, reason, sizeof(reason));
        int64_t t = duro__mono_ms();
        pthread_mutex_lock(&m->lock);
        f->renewing = 0;
        if (rc == DURO_OK) {
            f->locked_ms = start; /* an ack's retries may go on until
                                     the lock's new deadline */
            if (f->next_renew_ms != INT64_MAX)
                f->next_renew_ms = start + duro__renew_interval(rt);
        } else if (err.retryable || !known) {
            /* Busy storage is not a lost lock: try again soon. */
            DURO__COUNT(rt, m_storage_retries);
            if (f->next_renew_ms != INT64_MAX)
                f->next_renew_ms =
                    t + DURO__MIN(duro__renew_interval(rt), (int64_t)250);
        } else if (duro__inflight_running(f)) {
            DURO__COUNT(rt, m_renew_failures);
            duro__inflight_fire(f, reason, t, rt->opts.cancel_grace_ms);
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
        duro__inflight_release(f);
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
    return can_check(rt) &&
           rt->opts.poll_interval_ms < duro__renew_interval(rt);
}

void duro__manager_listed(duro_runtime *rt, const duro__inflight *f)
{
    duro__manager *m = rt->manager;
    /* A manager that is awake sees f when it next computes its wait. */
    int64_t need = f->next_renew_ms;
    if (checks_held(rt))
        need = DURO__MIN(
            need, duro__add_ms(duro__mono_ms(), rt->opts.poll_interval_ms));
    if (m->sleep_until_ms > need)
        pthread_cond_signal(&m->cond);
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
        n += duro__inflight_running(f) && f->grace_deadline_ms == 0;
    duro__inflight **batch = n ? duro__malloc(n * sizeof(*batch)) : NULL;
    const char **tokens = n ? duro__malloc(n * sizeof(*tokens)) : NULL;
    unsigned char *held = n ? duro__malloc(n) : NULL;
    if (batch == NULL || tokens == NULL || held == NULL)
        n = 0; /* nothing to check, or no memory: the renewal still will */
    size_t k = 0;
    for (duro__inflight *f = m->head; f != NULL && k < n; f = f->next) {
        if (!duro__inflight_running(f) || f->grace_deadline_ms > 0)
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
        if (rc == DURO_OK && !held[i] && duro__inflight_running(g) &&
            duro__lost_row_reason(rt, g, reason, sizeof(reason))) {
            pthread_mutex_lock(&m->lock);
            if (duro__inflight_running(g) && g->grace_deadline_ms == 0) {
                duro__inflight_fire(g, reason, duro__mono_ms(),
                                    rt->opts.cancel_grace_ms);
                duro__log(&rt->logger, DURO_LOG_INFO,
                          "activity '%s' (instance '%s', event %llu): its row "
                          "is gone or taken; signalling cancellation (%s)",
                          g->name, g->instance_id,
                          (unsigned long long)g->activity_id, reason);
            }
            pthread_mutex_unlock(&m->lock);
        }
        duro__inflight_release(g);
    }
    duro__free(batch);
    duro__free(tokens);
    duro__free(held);
}

/* Called by a slot before a fetch: renews what is overdue, so this slot
 * cannot take a row of this runtime whose lock expired for lack of a
 * timely renewal. One atomic load when nothing is. */
void duro__renew_overdue(duro_runtime *rt)
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
                duro__inflight_running(f) && duro__work_push(&give_up, f)) {
                if (duro__inflight_claim_abandon(f))
                    atomic_fetch_add(&f->refs, 1);
                else
                    give_up.count--;
            }
        }
        for (size_t i = 0; i < give_up.count; i++)
            duro__manager_unlist(m, give_up.items[i]);
        pthread_mutex_unlock(&m->lock);

        renew_due(rt);
        /* the runtime's row among the live runtimes: one small write a
         * period, on this thread because it always runs */
        if (duro__mono_ms() >= m->next_heartbeat_ms) {
            duro__runtime_heartbeat(rt);
            m->next_heartbeat_ms =
                duro__add_ms(duro__mono_ms(), DURO__HEARTBEAT_MS);
        }
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
            duro__runtime_loop_leave(rt);
            if (!atomic_load(&rt->stop_flag) && m->respawn(rt, s) != DURO_OK)
                duro__log(&rt->logger, DURO_LOG_ERROR,
                          "could not start a replacement worker thread");
            pthread_mutex_unlock(&m->lock);
            pthread_mutex_lock(&rt->lock);
            pthread_cond_broadcast(&rt->slots_cond);
            pthread_mutex_unlock(&rt->lock);
            duro__inflight_release(f); /* the list's reference */
            duro__inflight_release(f); /* ours */
        }

        pthread_mutex_lock(&m->lock);
        publish_next_due(m);
        int64_t next = atomic_load(&m->next_due_ms);
        int any_running = 0;
        for (duro__inflight *f = m->head; f != NULL; f = f->next) {
            if (f->grace_deadline_ms > 0 && duro__inflight_running(f) &&
                f->grace_deadline_ms < next)
                next = f->grace_deadline_ms;
            if (f->grace_deadline_ms == 0 && duro__inflight_running(f))
                any_running = 1;
        }
        if (any_running && checks_held(rt) && m->next_check_ms < next)
            next = m->next_check_ms;
        if (m->next_heartbeat_ms < next)
            next = m->next_heartbeat_ms;
        if (m->stop)
            break;
        if (atomic_load(&m->check_now))
            next = 0; /* told while this round ran */
        int64_t awake_ms = duro__mono_ms();
        int64_t wait = next == INT64_MAX ? 60000 : next - awake_ms;
        if (wait > 0) {
            struct timespec ts;
            duro__deadline_ts(&ts, wait);
            m->sleep_until_ms = awake_ms + wait;
            pthread_cond_timedwait(&m->cond, &m->lock, &ts);
            m->sleep_until_ms = 0;
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
            any = duro__inflight_running(f) && f->grace_deadline_ms == 0;
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
        } else if (duro__inflight_running(f)) {
            duro__inflight_fire(f, reason, now, rt->opts.cancel_grace_ms);
            fired = 1;
        }
    }
    if (fired)
        pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------------
 * start and stop */

int duro__manager_start(duro_runtime *rt,
                        int (*respawn)(duro_runtime *rt, slot_ctx *s))
{
    duro__manager *m = duro__calloc(1, sizeof(*m));
    if (m == NULL)
        return DURO_NOMEM;
    pthread_mutex_init(&m->lock, NULL);
    duro__cond_init_monotonic(&m->cond);
    atomic_init(&m->next_due_ms, INT64_MAX);
    /* duro_runtime_start wrote the first heartbeat */
    m->next_heartbeat_ms = duro__add_ms(duro__mono_ms(), DURO__HEARTBEAT_MS);
    m->respawn = respawn;
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
    return DURO_OK;
}

void duro__manager_stop(duro_runtime *rt)
{
    duro__manager *m = rt->manager;
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
}

void duro__manager_free(duro_runtime *rt)
{
    duro__manager *m = rt->manager;
    if (m == NULL)
        return;
    while (m->head != NULL) {
        duro__inflight *f = m->head;
        duro__manager_unlist(m, f);
        duro__inflight_release(f);
    }
    for (size_t i = 0; i < RECENT_CANCELS; i++)
        duro__free(m->recent[i].instance_id);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    duro__free(m);
    rt->manager = NULL;
}
