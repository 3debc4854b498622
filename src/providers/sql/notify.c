/* notify.c - the in-process wake-up both stores share: a notifier per store
 * per process (sql/shared.c finds it), its wait generations, the tokens a
 * counted dialect grants, and on it the methods wait_for_work, wake and
 * wait_for_cancellations and the queues' note_fetch, note_due and signal.
 * What a dialect does beyond the process (PostgreSQL's LISTEN/NOTIFY) is its
 * own, in a notifier that embeds this one first. Lock order: a notifier's
 * lock is never held while taking another lock or running SQL. Any thread. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "providers/sql/sql.h"

/* Every dialect's notifiers: keys begin with the dialect's name. */
static duro__sql_registry registry = DURO__SQL_REGISTRY_INIT;

/* The arguments of notifier_new, duro__sql_shared_attach's make. */
typedef struct notifier_args {
    const duro__sql_dialect *dialect;
    const char *key; /* "" for a private notifier */
    int (*start)(duro__sql_notifier *n, void *arg);
    void *arg;
} notifier_args;

static void notifier_free(duro__sql_shared *s)
{
    duro__sql_notifier *n = (duro__sql_notifier *)s;
    if (n->end != NULL && n->own != NULL)
        n->end(n);
    pthread_mutex_destroy(&n->lock);
    for (int q = 0; q < 3; q++)
        pthread_cond_destroy(&n->cond[q]);
    duro__free((char *)n->shared.key);
    duro__free(n);
}

static duro__sql_shared *notifier_new(void *arg)
{
    const notifier_args *a = arg;
    duro__sql_notifier *n = duro__calloc(1, sizeof(*n));
    char *key = duro__strdup(a->key);
    if (n == NULL || key == NULL) {
        duro__free(n);
        duro__free(key);
        return NULL;
    }
    n->shared.key = key;
    n->counted = a->dialect->wake_counted;
    pthread_mutex_init(&n->lock, NULL);
    for (int q = 0; q < 3; q++)
        duro__cond_init_monotonic(&n->cond[q]);
    n->end = a->dialect->notifier_end;
    if (a->start != NULL && a->start(n, a->arg) != DURO_OK) {
        notifier_free(&n->shared);
        return NULL;
    }
    return &n->shared;
}

int duro__sql_notify_attach(duro__sql_store *st, const char *key,
                            int (*start)(duro__sql_notifier *n, void *arg),
                            void *arg)
{
    char *full = NULL;
    if (key[0] != '\0') {
        size_t size = strlen(st->dialect->name) + strlen(key) + 2;
        if ((full = duro__malloc(size)) == NULL)
            return DURO_NOMEM;
        snprintf(full, size, "%s/%s", st->dialect->name, key);
    }
    notifier_args args = {st->dialect, full != NULL ? full : "", start, arg};
    st->notifier = (duro__sql_notifier *)duro__sql_shared_attach(
        &registry, args.key, notifier_new, &args);
    duro__free(full);
    return st->notifier != NULL ? DURO_OK : DURO_NOMEM;
}

void duro__sql_notify_detach(duro__sql_store *st)
{
    if (st->notifier != NULL)
        duro__sql_shared_release(&registry, &st->notifier->shared,
                                 notifier_free);
    st->notifier = NULL;
}

/* With n->lock held: raises queue q's generation and wakes waiters for
 * `items` new items (all of them for SIZE_MAX); a counted notifier grants
 * the queues of wait_for_work tokens, capped at the waiters plus one. */
static void grant(duro__sql_notifier *n, int q, size_t items)
{
    atomic_fetch_add(&n->generation[q], 1);
    if (n->counted && q < DURO__SQL_CANCELS) {
        size_t cap = (size_t)n->waiters[q] + 1;
        size_t t = (size_t)n->tokens[q];
        t = items >= cap || t >= cap - items ? cap : t + items;
        n->tokens[q] = (int)t;
    }
    if (items == 1)
        pthread_cond_signal(&n->cond[q]);
    else
        pthread_cond_broadcast(&n->cond[q]);
}

size_t duro__sql_notify(duro__sql_notifier *n, int q, size_t items)
{
    if (n == NULL || items == 0)
        return 0;
    pthread_mutex_lock(&n->lock);
    /* waiters here that no token is owed to yet: each takes one item */
    size_t idle = 0;
    if (q < DURO__SQL_CANCELS && n->waiters[q] > n->tokens[q])
        idle = (size_t)(n->waiters[q] - n->tokens[q]);
    grant(n, q, items);
    pthread_mutex_unlock(&n->lock);
    return idle;
}

void duro__sql_notify_signal(duro__sql_store *st, duro_queue queue,
                             size_t items)
{
    duro__sql_notify(st->notifier, (int)queue, items);
}

/* What this thread's last fetch per queue learnt: the queue's generation as
 * it began, so a wait after it returns when work was committed since; and,
 * when it found nothing (note_due), the earliest time anything on the queue
 * becomes due, so the wait needs no query of its own. */
static _Thread_local struct {
    uint64_t serial;        /* notifier the values belong to */
    uint64_t generation[2]; /* the queue's, as the fetch began */
    int began[2];           /* generation is set */
    int64_t due[2];         /* INT64_MAX: nothing queued */
    int due_valid[2];       /* due is set */
} fetch_seen;

/* fetch_seen for notifier n: cleared when it held another's. */
static void seen_for(const duro__sql_notifier *n)
{
    if (fetch_seen.serial != n->shared.serial) {
        memset(&fetch_seen, 0, sizeof(fetch_seen));
        fetch_seen.serial = n->shared.serial;
    }
}

void duro__sql_note_fetch(duro__sql_store *st, duro_queue queue)
{
    duro__sql_notifier *n = st->notifier;
    if (n == NULL)
        return;
    seen_for(n);
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    fetch_seen.began[queue] = 1;
    fetch_seen.due_valid[queue] = 0;
}

void duro__sql_note_due(duro__sql_store *st, duro_queue queue, int64_t due)
{
    duro__sql_notifier *n = st->notifier;
    if (n == NULL || fetch_seen.serial != n->shared.serial)
        return;
    fetch_seen.due[queue] = due;
    fetch_seen.due_valid[queue] = 1;
}

/* With n->lock held: whether a wait on q that saw generation `seen` ends:
 * a commit since (on a counted notifier, one that left a token, taken). */
static int work_since(duro__sql_notifier *n, int q, uint64_t seen)
{
    if (atomic_load(&n->generation[q]) == seen)
        return 0;
    if (!n->counted)
        return 1;
    if (n->tokens[q] == 0)
        return 0;
    n->tokens[q]--;
    return 1;
}

int duro__sql_wait_for_work(duro_provider *base, duro_queue queue,
                            int64_t max_wait_ms, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (duro__sql_check_queue(queue, err) != DURO_OK)
        return err->code;
    duro__sql_store *st = duro__sql_of(base);
    duro__sql_notifier *n = st->notifier;
    int q = (int)queue;

    /* Baseline: the generation as this thread's last fetch began, else the
     * current one. A commit after it ends the wait (on a counted notifier,
     * a token it left: tokens granted before the fetch were for work that
     * fetch could see). */
    int mine = fetch_seen.serial == n->shared.serial && fetch_seen.began[q];
    pthread_mutex_lock(&n->lock);
    uint64_t seen =
        mine ? fetch_seen.generation[q] : atomic_load(&n->generation[q]);
    int done = atomic_load(&st->wake_sticky) || max_wait_ms <= 0 ||
               work_since(n, q, seen);
    pthread_mutex_unlock(&n->lock);
    if (done && n->counted)
        return DURO_OK;

    /* Wait no longer than until the earliest delayed item (or expiring
     * lock) on the queue becomes due: as the empty fetch just before saw
     * it, else asked now. */
    int64_t wait_ms = max_wait_ms, due = INT64_MAX;
    if (!done && fetch_seen.serial == n->shared.serial &&
        fetch_seen.due_valid[q]) {
        due = fetch_seen.due[q];
        fetch_seen.due_valid[q] = 0;
    } else if (!done) {
        int rc = duro__sql_next_due(st, queue, &due, err);
        if (rc != DURO_OK)
            return rc;
    }
    if (!done && due != INT64_MAX) {
        int64_t until_due = due - duro__wall_ms();
        /* Due already, yet the fetch found nothing: another transaction
         * holds the row (claiming or acking it), or it is fetchable now. */
        if (until_due <= 0)
            until_due = st->dialect->due_held_retry_ms;
        if (until_due < wait_ms)
            wait_ms = until_due;
        done = wait_ms <= 0;
    }

    pthread_mutex_lock(&n->lock);
    if (!done) {
        struct timespec deadline;
        duro__deadline_ts(&deadline, wait_ms);
        while (!atomic_load(&st->wake_sticky) && !work_since(n, q, seen)) {
            n->waiters[q]++;
            int timed_out = pthread_cond_timedwait(&n->cond[q], &n->lock,
                                                   &deadline) == ETIMEDOUT;
            n->waiters[q]--;
            if (timed_out)
                break;
        }
    }
    if (!n->counted) {
        /* The next wait needs a newer commit than the ones seen now. */
        seen_for(n);
        fetch_seen.generation[q] = atomic_load(&n->generation[q]);
        fetch_seen.began[q] = 1;
    }
    pthread_mutex_unlock(&n->lock);
    return DURO_OK;
}

/* The CANCELS generation this thread saw at its last wait_for_cancellations,
 * so a cancellation committed between two waits ends the second at once. */
static _Thread_local struct {
    uint64_t serial;
    uint64_t generation;
    int valid;
} cancels_seen;

int duro__sql_wait_for_cancellations(duro_provider *base, int64_t max_wait_ms,
                                     duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    duro__sql_notifier *n = st->notifier;
    int q = DURO__SQL_CANCELS;
    pthread_mutex_lock(&n->lock);
    uint64_t seen = atomic_load(&n->generation[q]);
    if (cancels_seen.valid && cancels_seen.serial == n->shared.serial)
        seen = cancels_seen.generation;
    if (max_wait_ms > 0) {
        struct timespec deadline;
        duro__deadline_ts(&deadline, max_wait_ms);
        while (!atomic_load(&st->wake_sticky) &&
               atomic_load(&n->generation[q]) == seen) {
            if (pthread_cond_timedwait(&n->cond[q], &n->lock, &deadline) ==
                ETIMEDOUT)
                break;
        }
    }
    cancels_seen.serial = n->shared.serial;
    cancels_seen.generation = atomic_load(&n->generation[q]);
    cancels_seen.valid = 1;
    pthread_mutex_unlock(&n->lock);
    return DURO_OK;
}

void duro__sql_wake(duro_provider *base, int sticky)
{
    duro__sql_store *st = duro__sql_of(base);
    duro__sql_notifier *n = st->notifier;
    atomic_store(&st->wake_sticky, sticky != 0);
    /* Other providers on the same store see a spurious return, which the
     * contract allows. */
    pthread_mutex_lock(&n->lock);
    for (int q = 0; q < 3; q++)
        grant(n, q, SIZE_MAX);
    pthread_mutex_unlock(&n->lock);
}
