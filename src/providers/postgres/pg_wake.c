/* pg_wake.c - the PostgreSQL provider's wake-up across processes: the
 * notifier of sql/notify.c (in process, shared by the providers of one
 * store) with a LISTEN/NOTIFY listener thread of its own; the dialect's
 * signal, which wakes waiters here and announces what they will not take to
 * the other processes; the test hooks that read the notifier. Any thread. */
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

/* ---- the notifier ---------------------------------------------------------
 * sql/notify.c's, one per store per process (keyed by schema and connection
 * string), with this file's listener as its own part.
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
 * of each queue it names as it counts items (sql/notify.c's grant), every
 * waiter of CANCELS, and every waiter of a queue named without a count;
 * waking every worker slot of every process for each notification made
 * the processes' empty claims outnumber their items five to one (two
 * processes, `orch_bench --procs 2`). When the listener's
 * connection is down, notifications are lost and waits fall back to
 * polling; after it reconnects every wait is woken once (work may have been
 * announced meanwhile). Lock order: the notifier's lock is never held while
 * running SQL.
 *
 * Within the process (sql/notify.c, as the dialect's wake_counted asks), a
 * commit that adds n items to a queue wakes n waiters, not all of them: it
 * grants the queue n "tokens" (a wait that
 * finds one takes it and returns), capped at the number of threads waiting
 * plus one. Waking every waiter for each item made all but one of them run
 * an empty fetch (seven of eight worker slots, per activity). A token is
 * never lost: one granted while nobody waits is taken by the next wait, so
 * a thread whose fetch missed the commit fetches again; the cap is safe
 * because a thread that fetched an item fetches again before it waits. */

#define CANCELS DURO__SQL_CANCELS

/* The least time between two notifications of one process: a burst of
 * commits (hundreds a second under load) is announced a few times, not once
 * per commit, each costing the server a statement and a signal to every
 * listener; a waiter in another process learns of work at most this much
 * later. */
#define NOTIFY_GAP_MS 5

/* The dialect's part of a notifier (its `own`). */
typedef struct duro__pg_notifier {
    duro__sql_notifier *base; /* key "schema@conninfo" (a child after
                                 fork() has no listener thread and makes
                                 its own) */
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

/* Wakes waiters of queue q for `items` items of another process (SIZE_MAX:
 * work of unknown size, as after a reconnected listener). */
static void bump(notifier *n, int q, size_t items)
{
    duro__sql_notify(n->base, q, items);
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

/* duro__sql_notify_attach's start: the listener's connection string,
 * channel, pipe and thread. */
static int notifier_start(duro__sql_notifier *base, void *arg)
{
    const duro__pg_provider *p = arg;
    notifier *n = duro__calloc(1, sizeof(*n));
    if (n == NULL)
        return DURO_NOMEM;
    n->base = base;
    base->own = n;
    n->pipe_fd[0] = n->pipe_fd[1] = -1;
    if ((n->conninfo = duro__strdup(p->cfg.conninfo)) == NULL)
        return DURO_NOMEM;
    /* "duro_" and the schema, cut to an identifier's 63 bytes (two
     * schemas alike in their first 58 bytes share a channel: spurious
     * wake-ups only) */
    size_t len = strlen(p->cfg.schema);
    if (len > sizeof(n->channel) - 6)
        len = sizeof(n->channel) - 6;
    memcpy(n->channel, "duro_", 5);
    memcpy(n->channel + 5, p->cfg.schema, len);
    n->channel[5 + len] = '\0';
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
    return DURO_OK;
}

/* The dialect's notifier_end: the listener stopped, its pipe closed. */
void duro__pg_notifier_end(duro__sql_notifier *base)
{
    notifier *n = base->own;
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
    duro__free(n);
}

static notifier *notifier_of(duro__pg_provider *p)
{
    return p->sql.notifier != NULL ? p->sql.notifier->own : NULL;
}

static void signal_index(duro__pg_provider *p, int queue, size_t items)
{
    notifier *n = notifier_of(p);
    if (n == NULL || items == 0)
        return;
    /* waiters here that no token is owed to yet: each takes one item */
    size_t idle = duro__sql_notify(n->base, queue, items);
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

void duro__pg_signal(duro__pg_provider *p, duro_queue queue, size_t items)
{
    signal_index(p, (int)queue, items);
}

void duro__pg_signal_cancels(duro__pg_provider *p, size_t items)
{
    signal_index(p, CANCELS, items);
}

int duro__pg_notifier_attach(duro__pg_provider *p)
{
    size_t size = strlen(p->cfg.schema) + strlen(p->cfg.conninfo) + 2;
    char *key = duro__malloc(size);
    if (key == NULL)
        return DURO_NOMEM;
    snprintf(key, size, "%s@%s", p->cfg.schema, p->cfg.conninfo);
    int rc = duro__sql_notify_attach(&p->sql, key, notifier_start, p);
    duro__free(key);
    return rc;
}

void duro__pg_notifier_flush(duro__pg_provider *p)
{
    /* A process that closes its store right after a commit (`duro cancel`)
     * must not take the commit's announcement with it: its listener may be
     * holding it (NOTIFY_GAP_MS), or not be connected yet. */
    notifier *n = notifier_of(p);
    for (int i = 0; n != NULL && n->has_thread && i < p->conn_count; i++) {
        PGconn *c = p->conns[i].pg;
        if (c != NULL && PQstatus(c) == CONNECTION_OK &&
            PQtransactionStatus(c) == PQTRANS_IDLE) {
            announce(n, c);
            break;
        }
    }
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
    return p != NULL && notifier_of(p) != NULL &&
           atomic_load(&notifier_of(p)->listening);
}

uint64_t duro__pg_notifications_received(duro_provider *base)
{
    duro__pg_provider *p = hook_target(base);
    return p != NULL && notifier_of(p) != NULL
               ? atomic_load(&notifier_of(p)->received)
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
    return notifier_of(p);
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
    duro__sql_notifier *b = n->base;
    pthread_mutex_lock(&b->lock);
    int idle = b->waiters[queue] > b->tokens[queue]
                   ? b->waiters[queue] - b->tokens[queue]
                   : 0;
    pthread_mutex_unlock(&b->lock);
    return idle;
}
