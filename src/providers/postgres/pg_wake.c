/* pg_wake.c - the PostgreSQL provider's wake-up: wait_for_work, wake and
 * wait_for_cancellations, in process through a notifier shared by the
 * providers of one store, and across processes through LISTEN/NOTIFY on a
 * listener thread of the notifier's own; signal and note_* for the queues'
 * commits and fetches; the test hooks that read the notifier. Any thread. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"

/* ---- the shared notifier --------------------------------------------------
 * One per store per process (keyed by schema and connection string: a
 * client and a runtime of one process open their own providers on the same
 * store, and an enqueue through one must wake the other), reference-counted
 * by the providers that use it, found through a process-wide list.
 *
 * Across processes: each notifier has a listener thread with a connection
 * of its own (outside the pool) that LISTENs on the channel "duro_<schema>".
 * A commit that adds or releases work adds its item count to its queue's
 * pending count and pokes the thread through a pipe; the thread sends one
 * pg_notify with the pending queues and their counts ("o3", "w12", "o1w2";
 * "c" for cancelled work items, which wait_for_cancellations waits for)
 * after the commit, never inside a queue transaction (NOTIFY takes a
 * database-wide lock at commit), so bursts of commits coalesce into few
 * notifications. A notification from another backend wakes as many waiters
 * of each queue it names as it counts items (grant(), below), every
 * waiter of CANCELS, and every waiter of a queue named without a count;
 * waking every worker slot of every process for each notification made
 * the processes' empty claims outnumber their items five to one (two
 * processes, `orch_bench --procs 2`). When the listener's
 * connection is down, notifications are lost and waits fall back to
 * polling; after it reconnects every wait is woken once (work may have been
 * announced meanwhile). Lock order: the notifier's lock is never held while
 * running SQL.
 *
 * Within the process, a commit that adds n items to a queue wakes n
 * waiters, not all of them: it grants the queue n "tokens" (a wait that
 * finds one takes it and returns), capped at the number of threads waiting
 * plus one. Waking every waiter for each item made all but one of them run
 * an empty fetch (seven of eight worker slots, per activity). A token is
 * never lost: one granted while nobody waits is taken by the next wait, so
 * a thread whose fetch missed the commit fetches again; the cap is safe
 * because a thread that fetched an item fetches again before it waits. */

/* The third wait channel beside the two duro_queue values: work items
 * cancelled (deleted) by a turn, for wait_for_cancellations. */
#define CANCELS 2

/* The least time between two notifications of one process: a burst of
 * commits (hundreds a second under load) is announced a few times, not once
 * per commit, each costing the server a statement and a signal to every
 * listener; a waiter in another process learns of work at most this much
 * later. */
#define NOTIFY_GAP_MS 5

typedef struct duro__pg_notifier {
    duro__sql_shared shared; /* first member: key "schema@conninfo" (a
                                child after fork() has no listener thread
                                and makes its own) */
    pthread_mutex_t lock;
    pthread_cond_t cond[3];         /* per duro_queue, then CANCELS */
    _Atomic uint64_t generation[3]; /* raised after each commit that adds or
                                       releases work (or cancels work
                                       items: CANCELS), and by wake() */
    int tokens[2];  /* under lock: waits owed a return, per duro_queue */
    int waiters[2]; /* under lock: threads blocked in wait_for_work */
    /* the listener */
    char *conninfo;
    char channel[64]; /* "duro_<schema>", at most 63 bytes */
    int pipe_fd[2];   /* pokes the listener; -1 when none */
    pthread_t thread;
    int has_thread;
    _Atomic int stop;                    /* the listener ends */
    _Atomic int listening;               /* LISTEN is in effect */
    _Atomic size_t pending[3];           /* items committed here, to announce */
    _Atomic uint64_t received;           /* notifications from other backends */
    _Atomic uint64_t received_items[2];  /* the items they counted, per queue */
    _Atomic uint64_t announced_items[2]; /* items left to other processes */
} notifier;

static duro__sql_registry registry = DURO__SQL_REGISTRY_INIT;

/* With n->lock held: raises queue q's generation and wakes waiters for
 * `items` new items (all of them for SIZE_MAX), granting tokens to the
 * queues of wait_for_work. */
static void grant(notifier *n, int q, size_t items)
{
    atomic_fetch_add(&n->generation[q], 1);
    if (q < CANCELS) {
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

/* Wakes waiters of queue q for `items` items of another process (SIZE_MAX:
 * work of unknown size, as after a reconnected listener). */
static void bump(notifier *n, int q, size_t items)
{
    pthread_mutex_lock(&n->lock);
    grant(n, q, items);
    pthread_mutex_unlock(&n->lock);
}

static void poke(notifier *n)
{
    if (n->pipe_fd[1] >= 0) {
        ssize_t w = write(n->pipe_fd[1], "x", 1);
        (void)w; /* a full pipe already holds a poke */
    }
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* The payload of a notification: each queue with pending items as its
 * letter and count ("o3w12"), "c" when work items were cancelled. A count
 * too large for the payload's field is sent as SIZE_MAX's meaning, no
 * count. */
void duro__pg_notice_format(char *out, size_t size, size_t o, size_t w,
                            size_t c)
{
    size_t at = 0;
    out[0] = '\0';
    const struct {
        char letter;
        size_t items;
    } parts[] = {{'o', o}, {'w', w}};
    for (size_t i = 0; i < 2; i++) {
        if (parts[i].items == 0 || at >= size)
            continue;
        int k = parts[i].items >= (size_t)1 << 40
                    ? snprintf(out + at, size - at, "%c", parts[i].letter)
                    : snprintf(out + at, size - at, "%c%zu", parts[i].letter,
                               parts[i].items);
        at += k > 0 ? (size_t)k : 0;
    }
    if (c != 0 && at + 1 < size) {
        out[at++] = 'c';
        out[at] = '\0';
    }
}

/* Whether the payload `x` names queue `letter`, and how many items it
 * counts for it (SIZE_MAX when it gives no count: a payload of an older
 * version, "ow", wakes every waiter as that version meant). */
int duro__pg_notice_count(const char *x, char letter, size_t *items)
{
    const char *at = strchr(x, letter);
    if (at == NULL)
        return 0;
    *items = SIZE_MAX;
    if (at[1] >= '0' && at[1] <= '9') {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(at + 1, &end, 10);
        if (errno == 0 && v > 0 && v < SIZE_MAX)
            *items = (size_t)v;
    }
    return 1;
}

/* Notifications other backends sent: wake the queues they name. */
static void drain(notifier *n, PGconn *c)
{
    PGnotify *note;
    int self = PQbackendPID(c);
    while ((note = PQnotifies(c)) != NULL) {
        if (note->be_pid != self) {
            atomic_fetch_add(&n->received, 1);
            const char *x = note->extra != NULL && note->extra[0] != '\0'
                                ? note->extra
                                : "owc";
            size_t items;
            for (int q = 0; q < 2; q++) {
                if (duro__pg_notice_count(x, q == 0 ? 'o' : 'w', &items)) {
                    atomic_fetch_add(&n->received_items[q], items);
                    bump(n, q, items);
                }
            }
            if (duro__pg_notice_count(x, 'c', &items))
                bump(n, CANCELS, SIZE_MAX);
        }
        PQfreemem(note);
    }
}

/* Waits for the pipe (or the connection's socket, when >= 0) up to ms;
 * returns the socket's revents. */
static short wait_input(notifier *n, int sock, int ms)
{
    struct pollfd fds[2] = {{.fd = n->pipe_fd[0], .events = POLLIN},
                            {.fd = sock, .events = POLLIN}};
    if (poll(fds, sock >= 0 ? 2 : 1, ms) > 0 && (fds[0].revents & POLLIN)) {
        char buf[64];
        while (read(n->pipe_fd[0], buf, sizeof(buf)) > 0)
            ;
    }
    return sock >= 0 ? fds[1].revents : 0;
}

/* A listening connection, or NULL; *standby is set when the server is a
 * hot standby (in recovery: LISTEN is refused, SQLSTATE 25006). */
static PGconn *listen_connect(notifier *n, int *standby)
{
    *standby = 0;
    PGconn *c = PQconnectdb(n->conninfo);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, ignore_notice, NULL);
    char sql[96];
    snprintf(sql, sizeof(sql), "LISTEN \"%s\"", n->channel);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const char *state = ok ? NULL : PQresultErrorField(r, PG_DIAG_SQLSTATE);
    *standby = state != NULL && strcmp(state, "25006") == 0;
    PQclear(r);
    if (!ok) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Between tries to listen: up to 5 s after a lost connection; up to 5
 * minutes on a standby, which refuses LISTEN until it is promoted (each
 * try is an error in the server's log; reads there wait by polling). */
#define LISTEN_RETRY_MAX_MS 5000
#define LISTEN_STANDBY_RETRY_MAX_MS 300000

/* Sends one notification, on connection c, of the items committed here and
 * not announced yet (none: nothing is sent). */
static void announce(notifier *n, PGconn *c)
{
    size_t o = atomic_exchange(&n->pending[DURO_QUEUE_ORCHESTRATOR], 0);
    size_t w = atomic_exchange(&n->pending[DURO_QUEUE_WORKER], 0);
    size_t x = atomic_exchange(&n->pending[CANCELS], 0);
    if (o == 0 && w == 0 && x == 0)
        return;
    char sql[192], what[64];
    duro__pg_notice_format(what, sizeof(what), o, w, x);
    snprintf(sql, sizeof(sql), "SELECT pg_notify('%s', '%s')", n->channel,
             what);
    PQclear(PQexec(c, sql));
}

static void *listener_main(void *arg)
{
    notifier *n = arg;
    PGconn *c = NULL;
    int backoff_ms = 100;
    int64_t last_sent_ms = 0;
    while (!atomic_load(&n->stop)) {
        if (c == NULL) {
            int standby;
            if ((c = listen_connect(n, &standby)) == NULL) {
                wait_input(n, -1, backoff_ms);
                int cap =
                    standby ? LISTEN_STANDBY_RETRY_MAX_MS : LISTEN_RETRY_MAX_MS;
                backoff_ms = backoff_ms < cap / 2 ? backoff_ms * 2 : cap;
                continue;
            }
            backoff_ms = 100;
            atomic_store(&n->listening, 1);
            /* anything announced while not listening is lost: look again */
            bump(n, DURO_QUEUE_ORCHESTRATOR, SIZE_MAX);
            bump(n, DURO_QUEUE_WORKER, SIZE_MAX);
            bump(n, CANCELS, SIZE_MAX);
        }
        /* At most one notification per NOTIFY_GAP_MS: the first of a
         * burst goes at once, the rest of it together after the gap. */
        int64_t since = duro__mono_ms() - last_sent_ms;
        int any = atomic_load(&n->pending[DURO_QUEUE_ORCHESTRATOR]) ||
                  atomic_load(&n->pending[DURO_QUEUE_WORKER]) ||
                  atomic_load(&n->pending[CANCELS]);
        int hold_ms =
            any && since < NOTIFY_GAP_MS ? (int)(NOTIFY_GAP_MS - since) : 0;
        if (any && hold_ms == 0) {
            announce(n, c);
            last_sent_ms = duro__mono_ms();
        }
        drain(n, c);
        short ev =
            PQstatus(c) == CONNECTION_OK
                ? wait_input(n, PQsocket(c), hold_ms > 0 ? hold_ms : 1000)
                : POLLERR;
        if (ev != 0 && (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)) {
            atomic_store(&n->listening, 0);
            PQfinish(c);
            c = NULL;
            continue;
        }
        drain(n, c);
    }
    atomic_store(&n->listening, 0);
    PQfinish(c);
    return NULL;
}

/* The arguments of notifier_new, duro__sql_shared_attach's make. */
typedef struct notifier_args {
    const char *key;
    const duro__pg_provider *p;
} notifier_args;

static duro__sql_shared *notifier_new(void *arg)
{
    const char *key = ((notifier_args *)arg)->key;
    const duro__pg_provider *p = ((notifier_args *)arg)->p;
    notifier *n = duro__calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    char *own_key = duro__strdup(key);
    n->shared.key = own_key;
    n->conninfo = duro__strdup(p->cfg.conninfo);
    if (own_key == NULL || n->conninfo == NULL) {
        duro__free(own_key);
        duro__free(n->conninfo);
        duro__free(n);
        return NULL;
    }
    /* "duro_" and the schema, cut to an identifier's 63 bytes (two
     * schemas alike in their first 58 bytes share a channel: spurious
     * wake-ups only) */
    size_t len = strlen(p->cfg.schema);
    if (len > sizeof(n->channel) - 6)
        len = sizeof(n->channel) - 6;
    memcpy(n->channel, "duro_", 5);
    memcpy(n->channel + 5, p->cfg.schema, len);
    n->channel[5 + len] = '\0';
    pthread_mutex_init(&n->lock, NULL);
    for (int q = 0; q < 3; q++)
        duro__cond_init_monotonic(&n->cond[q]);
    n->pipe_fd[0] = n->pipe_fd[1] = -1;
    /* Without a pipe or a thread, waits poll: slower, still correct. */
    if (pipe2(n->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        n->pipe_fd[0] = n->pipe_fd[1] = -1;
    } else if (pthread_create(&n->thread, NULL, listener_main, n) == 0) {
        n->has_thread = 1;
    } else {
        close(n->pipe_fd[0]);
        close(n->pipe_fd[1]);
        n->pipe_fd[0] = n->pipe_fd[1] = -1;
    }
    return &n->shared;
}

/* The notifier for this provider's store. */
static notifier *notifier_attach(duro__pg_provider *p)
{
    size_t size = strlen(p->cfg.schema) + strlen(p->cfg.conninfo) + 2;
    char *key = duro__malloc(size);
    if (key == NULL)
        return NULL;
    snprintf(key, size, "%s@%s", p->cfg.schema, p->cfg.conninfo);
    notifier_args args = {key, p};
    notifier *n = (notifier *)duro__sql_shared_attach(&registry, key,
                                                      notifier_new, &args);
    duro__free(key);
    return n;
}

/* duro__sql_shared_release's destroy: the last provider let go. */
static void notifier_free(duro__sql_shared *s)
{
    notifier *n = (notifier *)s;
    if (n->has_thread) {
        atomic_store(&n->stop, 1);
        poke(n);
        pthread_join(n->thread, NULL);
    }
    if (n->pipe_fd[0] >= 0) {
        close(n->pipe_fd[0]);
        close(n->pipe_fd[1]);
    }
    duro__free(n->conninfo);
    pthread_mutex_destroy(&n->lock);
    for (int q = 0; q < 3; q++)
        pthread_cond_destroy(&n->cond[q]);
    duro__free((char *)n->shared.key);
    duro__free(n);
}

/* What this thread's last fetch per queue learnt: when it found nothing, the
 * earliest time anything on the queue becomes due (a delayed item, an
 * expiring lock), so the wait after it needs no query of its own. */
static _Thread_local struct {
    uint64_t serial;        /* notifier the values belong to */
    uint64_t generation[2]; /* the queue's, as the fetch began */
    int began[2];           /* generation is set */
    int64_t due[2];         /* INT64_MAX: nothing queued */
    int valid[2];           /* due is set */
} fetch_seen;

static duro__pg_provider *pg_of(duro_provider *p)
{
    return (duro__pg_provider *)p;
}

void duro__pg_note_fetch(duro__pg_provider *p, duro_queue queue)
{
    notifier *n = p->notifier;
    if (n == NULL)
        return;
    if (fetch_seen.serial != n->shared.serial) {
        fetch_seen.serial = n->shared.serial;
        fetch_seen.valid[0] = fetch_seen.valid[1] = 0;
    }
    pthread_mutex_lock(&n->lock);
    fetch_seen.generation[queue] = atomic_load(&n->generation[queue]);
    pthread_mutex_unlock(&n->lock);
    fetch_seen.began[queue] = 1;
    fetch_seen.valid[queue] = 0;
}

void duro__pg_note_due(duro__pg_provider *p, duro_queue queue, int64_t due)
{
    notifier *n = p->notifier;
    if (n == NULL || fetch_seen.serial != n->shared.serial)
        return;
    fetch_seen.due[queue] = due;
    fetch_seen.valid[queue] = 1;
}

static void signal_index(duro__pg_provider *p, int queue, size_t items);

void duro__pg_signal(duro__pg_provider *p, duro_queue queue, size_t items)
{
    signal_index(p, (int)queue, items);
}

void duro__pg_signal_cancels(duro__pg_provider *p, size_t items)
{
    signal_index(p, CANCELS, items);
}

static void signal_index(duro__pg_provider *p, int queue, size_t items)
{
    notifier *n = p->notifier;
    if (n == NULL || items == 0)
        return;
    pthread_mutex_lock(&n->lock);
    /* waiters here that no token is owed to yet: each takes one item */
    size_t idle = 0;
    if (queue < CANCELS && n->waiters[queue] > n->tokens[queue])
        idle = (size_t)(n->waiters[queue] - n->tokens[queue]);
    grant(n, queue, items);
    pthread_mutex_unlock(&n->lock);
    /* Other processes, through the listener after this commit: the items
     * no idle waiter here will take (all of them for CANCELS). A waiter
     * woken here fetches before it waits again, so an item kept here is
     * never stranded; keeping it also keeps an instance's turns on the
     * process that holds its engine. */
    size_t remote = queue == CANCELS ? items : items > idle ? items - idle : 0;
    if (queue < CANCELS)
        atomic_fetch_add(&n->announced_items[queue], remote);
    if (remote > 0 && n->has_thread &&
        atomic_fetch_add(&n->pending[queue], remote) == 0)
        poke(n);
}

/* How soon a wait looks again when something is due but the fetch before
 * it could not take it. */
#define DUE_HELD_RETRY_MS 10

int duro__pg_wait_for_work(duro_provider *base, duro_queue queue,
                           int64_t max_wait_ms, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (duro__sql_check_queue(queue, err) != DURO_OK)
        return err->code;
    duro__pg_provider *p = pg_of(base);
    notifier *n = p->notifier;
    int q = (int)queue;

    /* A token granted since this thread's fetch began (work committed
     * while it fetched, or since): go. Tokens granted before it were for
     * work that fetch could see. */
    int mine = fetch_seen.serial == n->shared.serial && fetch_seen.began[q];
    pthread_mutex_lock(&n->lock);
    uint64_t seen =
        mine ? fetch_seen.generation[q] : atomic_load(&n->generation[q]);
    int done = atomic_load(&p->wake_sticky) || max_wait_ms <= 0;
    if (!done && n->tokens[q] > 0 && atomic_load(&n->generation[q]) != seen) {
        n->tokens[q]--;
        done = 1;
    }
    pthread_mutex_unlock(&n->lock);
    if (done)
        return DURO_OK;

    /* Wait no longer than until the earliest delayed item (or expiring
     * lock) on the queue becomes due: as the empty fetch just before saw
     * it, else asked now. Later commits grant tokens. */
    int64_t wait_ms = max_wait_ms, due;
    if (fetch_seen.serial == n->shared.serial && fetch_seen.valid[q]) {
        due = fetch_seen.due[q];
        fetch_seen.valid[q] = 0;
    } else {
        int rc = duro__sql_next_due(&p->sql, queue, &due, err);
        if (rc != DURO_OK)
            return rc;
    }
    if (due != INT64_MAX) {
        int64_t until_due = due - duro__wall_ms();
        /* Due already, yet the fetch found nothing: another transaction
         * holds the row (claiming or acking it). Its outcome usually
         * grants a token; look again soon in any case. */
        if (until_due <= 0)
            until_due = DUE_HELD_RETRY_MS;
        if (until_due < wait_ms)
            wait_ms = until_due;
    }

    pthread_mutex_lock(&n->lock);
    struct timespec deadline;
    duro__deadline_ts(&deadline, wait_ms);
    while (!atomic_load(&p->wake_sticky)) {
        if (n->tokens[q] > 0 && atomic_load(&n->generation[q]) != seen) {
            n->tokens[q]--;
            break;
        }
        n->waiters[q]++;
        int timed_out = pthread_cond_timedwait(&n->cond[q], &n->lock,
                                               &deadline) == ETIMEDOUT;
        n->waiters[q]--;
        if (timed_out)
            break;
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

int duro__pg_wait_for_cancellations(duro_provider *base, int64_t max_wait_ms,
                                    duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__pg_provider *p = pg_of(base);
    notifier *n = p->notifier;
    pthread_mutex_lock(&n->lock);
    uint64_t seen = atomic_load(&n->generation[CANCELS]);
    if (cancels_seen.valid && cancels_seen.serial == n->shared.serial)
        seen = cancels_seen.generation;
    if (max_wait_ms > 0) {
        struct timespec deadline;
        duro__deadline_ts(&deadline, max_wait_ms);
        while (!atomic_load(&p->wake_sticky) &&
               atomic_load(&n->generation[CANCELS]) == seen) {
            if (pthread_cond_timedwait(&n->cond[CANCELS], &n->lock,
                                       &deadline) == ETIMEDOUT)
                break;
        }
    }
    cancels_seen.serial = n->shared.serial;
    cancels_seen.generation = atomic_load(&n->generation[CANCELS]);
    cancels_seen.valid = 1;
    pthread_mutex_unlock(&n->lock);
    return DURO_OK;
}

void duro__pg_wake(duro_provider *base, int sticky)
{
    duro__pg_provider *p = pg_of(base);
    notifier *n = p->notifier;
    atomic_store(&p->wake_sticky, sticky != 0);
    /* Other providers on the same file see a spurious return, which the
     * contract allows. */
    pthread_mutex_lock(&n->lock);
    for (int q = 0; q < 3; q++)
        grant(n, q, SIZE_MAX);
    pthread_mutex_unlock(&n->lock);
}

int duro__pg_notifier_attach(duro__pg_provider *p)
{
    p->notifier = notifier_attach(p);
    return p->notifier != NULL ? DURO_OK : DURO_NOMEM;
}

void duro__pg_notifier_flush(duro__pg_provider *p)
{
    /* A process that closes its store right after a commit (`duro cancel`)
     * must not take the commit's announcement with it: its listener may be
     * holding it (NOTIFY_GAP_MS), or not be connected yet. */
    notifier *n = p->notifier;
    for (int i = 0; n != NULL && n->has_thread && i < p->conn_count; i++) {
        PGconn *c = p->conns[i].pg;
        if (c != NULL && PQstatus(c) == CONNECTION_OK &&
            PQtransactionStatus(c) == PQTRANS_IDLE) {
            announce(n, c);
            break;
        }
    }
}

void duro__pg_notifier_detach(duro__pg_provider *p)
{
    if (p->notifier != NULL)
        duro__sql_shared_release(&registry, &p->notifier->shared,
                                 notifier_free);
    p->notifier = NULL;
}

/* ---- test hooks ------------------------------------------------------------
 */

static duro__pg_provider *hook_target(duro_provider *p)
{
    return (duro__pg_provider *)duro__sql_store_of(p, "postgres");
}

int duro__pg_listening(duro_provider *base)
{
    duro__pg_provider *p = hook_target(base);
    return p != NULL && p->notifier != NULL &&
           atomic_load(&p->notifier->listening);
}

uint64_t duro__pg_notifications_received(duro_provider *base)
{
    duro__pg_provider *p = hook_target(base);
    return p != NULL && p->notifier != NULL
               ? atomic_load(&p->notifier->received)
               : 0;
}

/* The notifier of a test hook's provider for one of the two queues; NULL
 * for anything else. */
static notifier *hook_notifier(duro_provider *base, duro_queue queue)
{
    duro__pg_provider *p = hook_target(base);
    if (p == NULL ||
        (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER))
        return NULL;
    return p->notifier;
}

uint64_t duro__pg_announced_items(duro_provider *base, duro_queue queue)
{
    notifier *n = hook_notifier(base, queue);
    return n != NULL ? atomic_load(&n->announced_items[queue]) : 0;
}

uint64_t duro__pg_notified_items(duro_provider *base, duro_queue queue)
{
    notifier *n = hook_notifier(base, queue);
    return n != NULL ? atomic_load(&n->received_items[queue]) : 0;
}

int duro__pg_idle_waiters(duro_provider *base, duro_queue queue)
{
    notifier *n = hook_notifier(base, queue);
    if (n == NULL)
        return 0;
    pthread_mutex_lock(&n->lock);
    int idle = n->waiters[queue] > n->tokens[queue]
                   ? n->waiters[queue] - n->tokens[queue]
                   : 0;
    pthread_mutex_unlock(&n->lock);
    return idle;
}
