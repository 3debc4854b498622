/* sqlite_wake.c - the SQLite provider's in-process wake-up: wait_for_work
 * and wake, through a notifier shared by every provider of this process on
 * the same database file; signal and note_fetch for the queues' commits
 * and fetches. (Another process's commits are found by the waits' polling
 * of the store.) Any thread. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "providers/sqlite/sqlite_internal.h"

/* ---- the shared notifier --------------------------------------------------
 * One per database file per process (sql/shared.c), reference-counted by
 * the providers that use it. */

typedef struct duro__sqlite_notifier {
    duro__sql_shared shared; /* first member; its key is key[] */
    char key[64];            /* "dev:ino", or "" for a private one */
    pthread_mutex_t lock;
    pthread_cond_t cond[2];         /* per duro_queue */
    _Atomic uint64_t generation[2]; /* raised after each commit that adds or
                                       releases work, and by wake() */
} notifier;

static duro__sql_registry registry = DURO__SQL_REGISTRY_INIT;

/* duro__sql_shared_attach's make: arg is the key. */
static duro__sql_shared *notifier_new(void *arg)
{
    notifier *n = duro__calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    snprintf(n->key, sizeof(n->key), "%s", (const char *)arg);
    n->shared.key = n->key;
    pthread_mutex_init(&n->lock, NULL);
    duro__cond_init_monotonic(&n->cond[0]);
    duro__cond_init_monotonic(&n->cond[1]);
    return &n->shared;
}

/* The notifier for this provider's database file (keyed by device and
 * inode: one per file per process; every :memory: database its own). */
static notifier *notifier_attach(duro__sqlite_provider *p)
{
    char key[64] = "";
    const char *file = sqlite3_db_filename(p->writer.db, "main");
    struct stat st;
    if (file != NULL && file[0] != '\0' && stat(file, &st) == 0)
        snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    return (notifier *)duro__sql_shared_attach(&registry, key, notifier_new,
                                               key);
}

/* duro__sql_shared_release's destroy: the last provider let go. */
static void notifier_free(duro__sql_shared *s)
{
    notifier *n = (notifier *)s;
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cond[0]);
    pthread_cond_destroy(&n->cond[1]);
    duro__free(n);
}

/* The wake generation each thread saw at its last fetch per queue, so a wait
 * after an empty fetch returns at once when work was committed in between.
 */
static _Thread_local struct {
    uint64_t serial; /* notifier the values belong to */
    uint64_t generation[2];
    int valid[2];
} fetch_seen;

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

void duro__sqlite_note_fetch(duro__sqlite_provider *p, duro_queue queue)
{
    notifier *n = p->notifier;
    if (n == NULL)
        return;
    if (fetch_seen.serial != n->shared.serial) {
        fetch_seen.serial = n->shared.serial;
        fetch_seen.valid[0] = fetch_seen.valid[1] = 0;
    }
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    fetch_seen.valid[queue] = 1;
}

void duro__sqlite_signal(duro__sqlite_provider *p, duro_queue queue,
                         size_t items)
{
    notifier *n = p->notifier;
    if (n == NULL || items == 0)
        return;
    pthread_mutex_lock(&n->lock);
    atomic_fetch_add(&n->generation[queue], 1);
    if (items == 1)
        pthread_cond_signal(&n->cond[queue]);
    else
        pthread_cond_broadcast(&n->cond[queue]);
    pthread_mutex_unlock(&n->lock);
}

int duro__sqlite_wait_for_work(duro_provider *base, duro_queue queue,
                               int64_t max_wait_ms, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (duro__sql_check_queue(queue, err) != DURO_OK)
        return err->code;
    duro__sqlite_provider *p = sqlite_of(base);
    notifier *n = p->notifier;

    /* Baseline: what this thread's last fetch saw, else the current
     * generation. Any commit after it ends the wait. */
    pthread_mutex_lock(&n->lock);
    uint64_t now_generation = atomic_load(&n->generation[queue]);
    uint64_t seen = now_generation;
    if (fetch_seen.serial == n->shared.serial && fetch_seen.valid[queue])
        seen = fetch_seen.generation[queue];
    int done = atomic_load(&p->wake_sticky) || seen != now_generation ||
               max_wait_ms <= 0;
    pthread_mutex_unlock(&n->lock);

    int64_t wait_ms = max_wait_ms;
    if (!done) {
        /* Wait no longer than until the earliest delayed item (or expiring
         * lock) on the queue becomes due. */
        int64_t due;
        int rc = duro__sql_next_due(&p->sql, queue, &due, err);
        if (rc != DURO_OK)
            return rc;
        if (due != INT64_MAX) {
            int64_t until_due = due - duro__wall_ms();
            if (until_due <= 0)
                done = 1;
            else if (until_due < wait_ms)
                wait_ms = until_due;
        }
    }

    pthread_mutex_lock(&n->lock);
    if (!done) {
        struct timespec deadline;
        duro__deadline_ts(&deadline, wait_ms);
        while (!atomic_load(&p->wake_sticky) &&
               atomic_load(&n->generation[queue]) == seen) {
            if (pthread_cond_timedwait(&n->cond[queue], &n->lock, &deadline) ==
                ETIMEDOUT)
                break;
        }
    }
    /* The next wait needs a newer commit than the ones seen now. */
    fetch_seen.serial = n->shared.serial;
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    fetch_seen.valid[queue] = 1;
    pthread_mutex_unlock(&n->lock);
    return DURO_OK;
}

void duro__sqlite_wake(duro_provider *base, int sticky)
{
    duro__sqlite_provider *p = sqlite_of(base);
    notifier *n = p->notifier;
    atomic_store(&p->wake_sticky, sticky != 0);
    /* Other providers on the same file see a spurious return, which the
     * contract allows. */
    pthread_mutex_lock(&n->lock);
    for (int q = 0; q < 2; q++) {
        atomic_fetch_add(&n->generation[q], 1);
        pthread_cond_broadcast(&n->cond[q]);
    }
    pthread_mutex_unlock(&n->lock);
}

int duro__sqlite_notifier_attach(duro__sqlite_provider *p)
{
    p->notifier = notifier_attach(p);
    return p->notifier != NULL ? DURO_OK : DURO_NOMEM;
}

void duro__sqlite_notifier_detach(duro__sqlite_provider *p)
{
    if (p->notifier != NULL)
        duro__sql_shared_release(&registry, &p->notifier->shared,
                                 notifier_free);
    p->notifier = NULL;
}
