/* sql.h - the SQL layer both built-in stores share (SQLite's pager over its
 * VFS is the model): what a store does is written once here, in terms of a
 * small set of primitives each dialect supplies (duro__sql_dialect), and
 * the statement texts each dialect gives for the one list of ids
 * (statements.h).
 *
 * A dialect's provider struct embeds duro__sql_store as its first member
 * (whose first member is duro_provider), so a duro_provider * of a SQL
 * store is a duro__sql_store *. Connections and statements are the
 * dialect's own (an sqlite3_stmt, a duro__pg_statement); the shared layer
 * only passes their pointers back. Thread rules are the dialect's: a
 * connection is used by one thread at a time. */
#ifndef DURO_SQL_H
#define DURO_SQL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "duro/provider.h"
#include "providers/sql/statements.h"

/* What step returns besides a failure (the dialect's own code, which only
 * its error() reads). SQLite's own values; PostgreSQL's dialect uses them
 * too. */
#define DURO__SQL_ROW 100  /* a row is ready to read */
#define DURO__SQL_DONE 101 /* no (more) rows */

#define DURO__SQL_NAME_MAX 1024 /* bytes of a name, id or reason */

typedef struct duro__sql_conn duro__sql_conn; /* a dialect's connection */
typedef struct duro__sql_stmt duro__sql_stmt; /* a dialect's statement */
typedef struct duro__sql_store duro__sql_store;
typedef struct duro__sql_sweep duro__sql_sweep; /* a sweep's set (many.c) */
typedef struct duro__sql_notifier duro__sql_notifier; /* sql/notify.c */

/* What ack_turns is given: the acks of n turns by their lock tokens
 * (checked, of this store), then up to max_next fetches into next (locked
 * for lock_timeout_ms; *next_count of them). */
typedef struct duro__sql_turns {
    size_t n;
    const char *const *lock_tokens;
    const duro_orch_ack *acks;
    int64_t lock_timeout_ms;
    const duro_history_cache *cache;
    size_t max_next;
    duro_orch_item **next;
    size_t *next_count;
    const char *op;
} duro__sql_turns;

/* The types of the queue members a dialect implements in its own files
 * (declared there as `duro__sql_ack_turns_fn duro__<dialect>_ack_turns;`);
 * their contracts are the members' below. */
typedef int duro__sql_ack_turns_fn(duro_provider *base,
                                   const duro__sql_turns *t, duro_error *err);
typedef int
duro__sql_ack_work_fn(duro_provider *base, int64_t id, const char *lock_token,
                      const duro_work_item *completion, int64_t lock_timeout_ms,
                      duro_worker_item **next, const char *op, duro_error *err);
typedef int duro__sql_fetch_work_fn(duro_provider *base,
                                    int64_t lock_timeout_ms,
                                    duro_worker_item **out, const char *op,
                                    duro_error *err);

/* The primitives. Every member is set but those whose comment says what
 * NULL means. */
typedef struct duro__sql_dialect {
    const char *name; /* "sqlite", "postgres": begins every message */

    /* The statement `id` on c, reset with its parameters cleared; NULL
     * with err set when it cannot be prepared (or the dialect has no text
     * for it). */
    duro__sql_stmt *(*prepare)(duro__sql_store *st, duro__sql_conn *c,
                               duro__sql_stmt_id id, const char *op,
                               duro_error *err);
    /* Runs the statement on its first call (through the fault hook), then
     * steps through its rows: DURO__SQL_ROW, DURO__SQL_DONE or a failure
     * for error(). */
    int (*step)(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s);
    /* Maps a failed step's rc to a DURO code in err (retryable when the
     * store may answer again). */
    int (*error)(duro__sql_conn *c, int rc, const char *op, duro_error *err);
    void (*reset)(duro__sql_stmt *s);
    int (*changes)(duro__sql_conn *c); /* rows the last command changed */
    int (*param_count)(duro__sql_stmt *s);
    /* Bindings (1-based): a failure is reported by the next step. Text is
     * borrowed until the statement is reset; NULL binds SQL NULL. */
    void (*bind_text)(duro__sql_conn *c, duro__sql_stmt *s, int i,
                      const char *v);
    void (*bind_i64)(duro__sql_conn *c, duro__sql_stmt *s, int i, int64_t v);
    /* Columns of the current row (0-based). */
    int64_t (*column_int64)(duro__sql_stmt *s, int col);
    int (*column_null)(duro__sql_stmt *s, int col);
    const char *(*column_text)(duro__sql_stmt *s, int col); /* NULL: NULL */
    int (*column_bytes)(duro__sql_stmt *s, int col);

    /* Write transactions: begin takes the writer (SQLite's one, a pooled
     * PostgreSQL connection) and begins; commit commits and gives it back
     * (rolling back on failure); rollback rolls back and gives it back.
     * begin_snapshot: every statement sees one snapshot (PostgreSQL's
     * REPEATABLE READ; SQLite's writer always does). */
    int (*write_begin)(duro__sql_store *st, const char *op,
                       duro__sql_conn **out, duro_error *err);
    int (*write_begin_snapshot)(duro__sql_store *st, const char *op,
                                duro__sql_conn **out, duro_error *err);
    int (*write_commit)(duro__sql_store *st, duro__sql_conn *c, const char *op,
                        duro_error *err);
    void (*write_rollback)(duro__sql_store *st, duro__sql_conn *c);
    /* A connection for reads (release ends any read transaction). */
    duro__sql_conn *(*reader_acquire)(duro__sql_store *st);
    void (*reader_release)(duro__sql_store *st, duro__sql_conn *c);
    /* A commit made `items` items of `queue` fetchable. */
    void (*signal)(duro__sql_store *st, duro_queue queue, size_t items);

    /* 1 when the dialect has a text for id: an optional step (PostgreSQL's
     * STATS_PLAN) is skipped where it has none. */
    int (*has)(duro__sql_stmt_id id);
    /* Bytes the store keeps on disk beside its tables (SQLite's WAL);
     * NULL: none (PostgreSQL's WAL is the server's). */
    int64_t (*bytes_beside)(duro__sql_store *st);
    /* The dialect's statement texts by id (NULL: none), and so the
     * statements it runs (for the tests' EXPLAIN checks). */
    const char *const *texts;

    /* sql/manage.c */
    /* Binds a LIMIT's row count; a negative v is no limit (SQLite reads a
     * negative LIMIT as none, PostgreSQL reads NULL). */
    void (*bind_limit)(duro__sql_conn *c, duro__sql_stmt *s, int i, int64_t v);

    /* ---- operations on many instances (sql/many.c) ---- */
    /* How a list of ids is bound: 1, a JSON array (SQLite's json_each
     * reads it); 0, a text[] literal (PostgreSQL's unnest). */
    int ids_json;
    const char *ids_reader; /* what reads such a list, for messages */
    /* A sweep's set, read on a snapshot of its own (duro__sql_sweep).
     * open sets conn, in_place and page and begins the snapshot; when it
     * fails nothing stays open. page gives the statement whose rows are
     * the next page (stepped until DONE or `page` rows), given `set`, the
     * set's statement prepared on conn and bound; NULL with err set when
     * it fails. close ends what open began, given the sweep's rc so far
     * (an in-place sweep commits when rc is DURO_OK and it is no dry run,
     * else rolls back), and returns rc or its own failure. */
    int (*sweep_open)(duro__sql_store *st, duro__sql_sweep *sw, const char *op,
                      duro_error *err);
    duro__sql_stmt *(*sweep_page)(duro__sql_store *st, duro__sql_sweep *sw,
                                  duro__sql_stmt *set, const char *op,
                                  duro_error *err);
    int (*sweep_close)(duro__sql_store *st, duro__sql_sweep *sw, int rc,
                       const char *op, duro_error *err);

    /* ---- sql/queue.c (the queues); a member whose comment says what
     * NULL means may be NULL ---- */
    /* Where OQ_INSERT (and PostgreSQL's WQ_ACK_COMPLETE*) take a message's
     * enqueue time, visibility time, started_ms and finished_ms: its
     * fields ?1..?17 are the same in both (duro__sql_bind_message). */
    unsigned char message_params[4];
    /* Binds a boolean (PostgreSQL: text 't' or 'f'; SQLite: 1 or 0). */
    void (*bind_flag)(duro__sql_conn *c, duro__sql_stmt *s, int i, int v);
    /* 1 when a failed step's rc is a primary key conflict. */
    int (*unique_violation)(int rc);
    /* A write transaction that goes ahead of writers waiting for theirs
     * (SQLite's one writer, for a renewal's deadline); write_begin where
     * writers do not queue so. */
    int (*write_begin_urgent)(duro__sql_store *st, const char *op,
                              duro__sql_conn **out, duro_error *err);
    /* The brackets of a list of ids bound as one text parameter: "{}" (a
     * PostgreSQL bigint[] literal) or "[]" (JSON, for SQLite's
     * json_each). */
    const char *id_list;
    /* The acks of n turns (tokens checked, of this store), then up to
     * max_next fetches, in one write transaction: PostgreSQL's set-based
     * statements, SQLite's turn by turn. */
    duro__sql_ack_turns_fn *ack_turns;
    /* The ack of work item `id` (its token checked, of this store) with
     * its completion, and with `next` the fetch of the next item. */
    duro__sql_ack_work_fn *ack_work;
    /* An abandon of a token failed retryably (kind 'o' or 'w'): the store
     * may abandon it again later (PostgreSQL's releases). NULL: not. */
    void (*abandon_failed)(duro__sql_store *st, char kind, const char *token,
                           int64_t delay_ms);
    /* A claim that took nothing answers a row whose lock token (column 8
     * of WQ_FETCH) is NULL, with when the queue's next item is due in
     * column 9 (NULL: none), handed to note_due (PostgreSQL's). NULL: a
     * claim that takes nothing answers no row (SQLite's). */
    void (*note_due)(duro__sql_store *st, duro_queue queue, int64_t due_ms);
    /* A turn's `count` events in one statement (PostgreSQL's). NULL: one
     * HISTORY_INSERT each. */
    int (*insert_events)(duro__sql_store *st, duro__sql_conn *c,
                         const char *instance_id, uint64_t execution_id,
                         const duro_event *events, size_t count, const char *op,
                         duro_error *err);
    /* Called when a turn's ack holds its lock, before it writes (a test's
     * hook; PostgreSQL's). NULL: none. */
    void (*turn_locked)(duro__sql_store *st);
    /* A claim (kind 'O' or 'W', token hex `hex`) whose commit failed with
     * rc: when its outcome is unknown the store may release what it locked
     * later (PostgreSQL's releases). NULL: a failed commit changed nothing
     * (SQLite's). */
    void (*claim_lost)(duro__sql_store *st, char kind, const char *hex, int rc,
                       const duro_error *err);
    /* 1: the reads of one call on a reader go in one read transaction
     * (BEGIN_READ: SQLite's one snapshot); 0: each statement alone
     * (PostgreSQL's pooled connection). */
    int reader_snapshot;
    /* fetch_work_item after its checks: the claim of the next work item
     * (SQLite's in a write transaction; PostgreSQL's one statement alone). */
    duro__sql_fetch_work_fn *fetch_work;

    /* ---- h-dups: the in-process wake-up (sql/notify.c) ---- */
    /* 1: a commit of n items ends n waits, not all of them (tokens, capped
     * at the waiters plus one: PostgreSQL's, whose every woken worker slot
     * would otherwise run an empty claim); 0: a commit ends every wait
     * begun before it (SQLite's). */
    int wake_counted;
    /* How long a wait waits when something is due already yet the fetch
     * before it found nothing (another transaction holds the row); 0: it
     * returns at once (SQLite's). */
    int64_t due_held_retry_ms;
    /* What ends the dialect's part of a notifier (its `own`) before the
     * notifier is freed; NULL: it has none. */
    void (*notifier_end)(duro__sql_notifier *n);

    /* ---- h-dups: open (sql/methods.c) ---- */
    size_t provider_size; /* the dialect's provider struct (this first) */
    /* Parses the URL into the dialect's config in st (zeroed before) and
     * sets st's max_payload and max_history (and the rest the URL
     * decides); on failure nothing it parsed stays allocated. */
    int (*configure)(duro__sql_store *st, const char *url, duro_error *err);

    /* ---- turn batches ---- */
    /* The provider's turn_batch (duro/provider.h, version 11): the turns a
     * runtime's thread commits together by default. */
    int turn_batch;
} duro__sql_dialect;

/* ---- a pool of connections (sql/pool.c) ---------------------------------
 * The idle connections of a store, a stack: init at open (before anything
 * that may fail), reserve room for `size` (DURO_NOMEM), give each opened
 * connection; take blocks until one is idle; destroy at close. Any
 * thread. */
typedef struct duro__sql_pool {
    pthread_mutex_t lock; /* guards idle and count */
    pthread_cond_t cond;  /* a connection was given back */
    void **idle;          /* stack of idle connections */
    int count;
} duro__sql_pool;
void duro__sql_pool_init(duro__sql_pool *pool);
int duro__sql_pool_reserve(duro__sql_pool *pool, int size);
void duro__sql_pool_destroy(duro__sql_pool *pool);
void *duro__sql_pool_take(duro__sql_pool *pool);
void duro__sql_pool_give(duro__sql_pool *pool, void *c);

/* The part of a SQL store the shared layer reads. */
struct duro__sql_store {
    duro_provider base; /* first member */
    const duro__sql_dialect *dialect;
    size_t max_payload;   /* bytes of a payload, from the URL */
    uint64_t max_history; /* events of one execution, from the URL */
    int utf8_only;        /* text that is not UTF-8 is refused (PostgreSQL
                             would fail it with 22021) */
    /* The fault hook (tests): the statements run so far, and the one to
     * fail (0: off), retryably or not. */
    _Atomic uint64_t steps;
    _Atomic uint64_t fault_at;
    _Atomic int fault_retryable;
    _Atomic uint64_t statements_prepared; /* for the tests */
    duro__sql_pool pool; /* the idle connections (SQLite's readers,
                            PostgreSQL's pooled connections) */
    /* The in-process wake-up (sql/notify.c): the notifier this process's
     * providers of the store share, and wake()'s flag. */
    duro__sql_notifier *notifier;
    _Atomic int wake_sticky; /* wake(p, 1) until wake(p, 0) */
};

static inline duro__sql_store *duro__sql_of(duro_provider *base)
{
    return (duro__sql_store *)base;
}

/* ---- the primitives, called through the dialect ------------------------ */

static inline duro__sql_stmt *duro__sql_prepare(duro__sql_store *st,
                                                duro__sql_conn *c,
                                                duro__sql_stmt_id id,
                                                const char *op, duro_error *err)
{
    return st->dialect->prepare(st, c, id, op, err);
}
static inline int duro__sql_step(duro__sql_store *st, duro__sql_conn *c,
                                 duro__sql_stmt *s)
{
    return st->dialect->step(st, c, s);
}
static inline int duro__sql_error(duro__sql_store *st, duro__sql_conn *c,
                                  int rc, const char *op, duro_error *err)
{
    return st->dialect->error(c, rc, op, err);
}
static inline void duro__sql_reset(duro__sql_store *st, duro__sql_stmt *s)
{
    st->dialect->reset(s);
}
static inline int duro__sql_changes(duro__sql_store *st, duro__sql_conn *c)
{
    return st->dialect->changes(c);
}
static inline int duro__sql_param_count(duro__sql_store *st, duro__sql_stmt *s)
{
    return st->dialect->param_count(s);
}
static inline void duro__sql_bind_text(duro__sql_store *st, duro__sql_conn *c,
                                       duro__sql_stmt *s, int i, const char *v)
{
    st->dialect->bind_text(c, s, i, v);
}
static inline void duro__sql_bind_i64(duro__sql_store *st, duro__sql_conn *c,
                                      duro__sql_stmt *s, int i, int64_t v)
{
    st->dialect->bind_i64(c, s, i, v);
}
static inline void duro__sql_bind_u64(duro__sql_store *st, duro__sql_conn *c,
                                      duro__sql_stmt *s, int i, uint64_t v)
{
    st->dialect->bind_i64(c, s, i, (int64_t)v);
}
static inline int64_t duro__sql_column_int64(duro__sql_store *st,
                                             duro__sql_stmt *s, int col)
{
    return st->dialect->column_int64(s, col);
}
static inline int duro__sql_column_int(duro__sql_store *st, duro__sql_stmt *s,
                                       int col)
{
    return (int)st->dialect->column_int64(s, col);
}
static inline int duro__sql_column_null(duro__sql_store *st, duro__sql_stmt *s,
                                        int col)
{
    return st->dialect->column_null(s, col);
}
static inline const char *duro__sql_column_text_raw(duro__sql_store *st,
                                                    duro__sql_stmt *s, int col)
{
    return st->dialect->column_text(s, col);
}
static inline int duro__sql_column_bytes(duro__sql_store *st, duro__sql_stmt *s,
                                         int col)
{
    return st->dialect->column_bytes(s, col);
}
static inline int duro__sql_write_begin(duro__sql_store *st, const char *op,
                                        duro__sql_conn **out, duro_error *err)
{
    return st->dialect->write_begin(st, op, out, err);
}
static inline int duro__sql_write_begin_snapshot(duro__sql_store *st,
                                                 const char *op,
                                                 duro__sql_conn **out,
                                                 duro_error *err)
{
    return st->dialect->write_begin_snapshot(st, op, out, err);
}
static inline int duro__sql_write_commit(duro__sql_store *st, duro__sql_conn *c,
                                         const char *op, duro_error *err)
{
    return st->dialect->write_commit(st, c, op, err);
}
static inline void duro__sql_write_rollback(duro__sql_store *st,
                                            duro__sql_conn *c)
{
    st->dialect->write_rollback(st, c);
}
/* Ends a method's write transaction by its outcome so far: rc when it
 * failed (rolled back), else the commit's. */
static inline int duro__sql_write_end(duro__sql_store *st, duro__sql_conn *c,
                                      int rc, const char *op, duro_error *err)
{
    if (rc != DURO_OK) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    return duro__sql_write_commit(st, c, op, err);
}
static inline duro__sql_conn *duro__sql_reader_acquire(duro__sql_store *st)
{
    return st->dialect->reader_acquire(st);
}
static inline void duro__sql_reader_release(duro__sql_store *st,
                                            duro__sql_conn *c)
{
    st->dialect->reader_release(st, c);
}
static inline void duro__sql_signal(duro__sql_store *st, duro_queue queue,
                                    size_t items)
{
    st->dialect->signal(st, queue, items);
}

/* ---- written once on top of them (sql/store.c) ------------------------- */

/* Counts a statement about to run for the fault hook: 0 to run it; 1 or
 * 2 when the hook fails it, retryably or not (sql/store.c). */
int duro__sql_fault_due(duro__sql_store *st, uint64_t *step);
/* wait_for_work's queue: DURO_OK for the orchestrator's and the
 * worker's, else DURO_INVALID in err (sql/store.c). */
int duro__sql_check_queue(duro_queue queue, duro_error *err);
/* The test hooks on any provider (nothing when it is no SQL store of the
 * dialect named): fail the nth_step-th statement from now (0: off), and
 * how many statements were prepared (sql/methods.c). */
void duro__sql_inject_fault(duro_provider *p, const char *dialect,
                            uint64_t nth_step, int retryable);
uint64_t duro__sql_statements_prepared(duro_provider *p, const char *dialect);

/* A grouped write's new leader (SQLite's group commit, PostgreSQL's
 * combined acks) whose last group carried `company` writes (more than
 * one: threads are writing side by side) waits, yielding the CPU, until as
 * many are queued (*queued) or ns nanoseconds passed; alone it never
 * waits (PostgreSQL's commit_delay and commit_siblings, by the writes just
 * seen), nor while *urgent (when not NULL: urgent writes queued) is not 0.
 * The dialect's comment says why its wait pays. */
void duro__sql_linger(_Atomic int *queued, _Atomic int *urgent, int company,
                      int64_t ns);
/* Prepares `id` and steps it to completion: DURO_OK or err. */
int duro__sql_run(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s,
                  const char *op, duro_error *err);
/* Prepares and runs `id`, which takes no parameters (BEGIN, COMMIT). */
int duro__sql_exec(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt_id id,
                   const char *op, duro_error *err);
/* A copy of a text column in the arena (NULL for SQL NULL); -1 when out of
 * memory. */
int duro__sql_column_text(duro__sql_store *st, duro_arena *a, duro__sql_stmt *s,
                          int col, const char **out);

/* Input checks of provider.h's "Input rules"; each returns DURO_OK or fills
 * err (not retryable). A store that is utf8_only also refuses text that is
 * not UTF-8 (DURO_INVALID). */
int duro__sql_check_id(const duro__sql_store *st, const char *what,
                       const char *s, duro_error *err);
int duro__sql_check_name(const duro__sql_store *st, const char *what,
                         const char *s, int required, duro_error *err);
int duro__sql_check_payload(const duro__sql_store *st, const char *what,
                            const char *s, duro_error *err);

/* A larger copy of an arena array of `count` elements (capacity doubled);
 * NULL when out of memory. */
void *duro__sql_arena_grow(duro_arena *a, void *old, size_t count, size_t *cap,
                           size_t elem);

/* Fills *item (zeroed, `size` bytes, in arena a) from the row s stands on:
 * DURO_OK, or an error in err (DURO_NOMEM: duro__sql_read_rows says so). */
typedef int (*duro__sql_row_fn)(duro__sql_store *st, duro__sql_stmt *s,
                                duro_arena *a, void *item, const char *op,
                                duro_error *err);

/* Steps s to its end, a row at a time, appending an item of `size` bytes
 * filled by row() to the arena array *items of *count; resets s however
 * it ends. DURO_OK, DURO_NOMEM, row()'s error or the step's. */
int duro__sql_read_rows(duro__sql_store *st, duro__sql_conn *c,
                        duro__sql_stmt *s, duro_arena *a, void *items,
                        size_t *count, size_t size, duro__sql_row_fn row,
                        const char *op, duro_error *err);

/* Clears err on entry, pointing it at `local` when the caller passed NULL. */
#define DURO__SQL_ERR_INIT(err, local)                                         \
    do {                                                                       \
        if ((err) == NULL)                                                     \
            (err) = &(local);                                                  \
        duro_error_clear(err);                                                 \
    } while (0)

/* The statements a dialect runs, for EXPLAIN checks: the i-th id of
 * statements.h's list it has a text for (i < the count), its name ("WQ_FETCH")
 * and its SQL (sql/statements.c). */
size_t duro__sql_statement_count(const duro__sql_dialect *d);
const char *duro__sql_statement_name(const duro__sql_dialect *d, size_t i);
const char *duro__sql_statement_sql(const duro__sql_dialect *d, size_t i);
/* The name of statement id ("WQ_FETCH"). */
const char *duro__sql_statement_id_name(duro__sql_stmt_id id);

/* ---- one object per store per process (sql/shared.c) --------------------
 * A dialect's in-process notifier embeds duro__sql_shared first; attach
 * finds the one of this process under key (refs raised) or has make(arg)
 * make it (NULL: out of memory), listed unless key is "" (a private one:
 * an in-memory database). detach lowers refs and returns 1 when it was the
 * last: the entry is out of the list and the dialect frees it. make runs
 * under the registry's lock. Any thread. */
typedef struct duro__sql_shared {
    const char *key; /* the dialect's (it lives as long as the entry) */
    pid_t pid;       /* the process that made it: after fork() a child
                        makes its own */
    int refs;        /* under the registry's lock */
    uint64_t serial; /* unique in the process (thread-local wait state) */
    struct duro__sql_shared *next;
} duro__sql_shared;
typedef struct duro__sql_registry {
    pthread_mutex_t lock;
    duro__sql_shared *head;
} duro__sql_registry;
#define DURO__SQL_REGISTRY_INIT                                                \
    {                                                                          \
        PTHREAD_MUTEX_INITIALIZER, NULL                                        \
    }
duro__sql_shared *duro__sql_shared_attach(duro__sql_registry *r,
                                          const char *key,
                                          duro__sql_shared *(*make)(void *arg),
                                          void *arg);
int duro__sql_shared_detach(duro__sql_registry *r, duro__sql_shared *s);
/* Releases s (duro__sql_shared_detach); when it was the last reference,
 * destroy(s) frees the dialect's object (sql/shared.c). s may be NULL. */
void duro__sql_shared_release(duro__sql_registry *r, duro__sql_shared *s,
                              void (*destroy)(duro__sql_shared *s));

/* ---- the in-process wake-up (sql/notify.c) ------------------------------
 * One notifier per store per process (a client and a runtime of one process
 * open their own providers on one store, and an enqueue through one must
 * wake the other), found in one registry by the dialect's name and key,
 * reference-counted by the providers that use it. A wait ends at a commit
 * made since its thread's last fetch began (wake_counted: at one that left
 * a token for it), at wake(), at its deadline, or when something on the
 * queue becomes due. Its lock is never held while taking another lock or
 * running SQL. Any thread. */

/* The third wait channel beside the two duro_queue values: work items
 * cancelled (deleted) by a turn, for wait_for_cancellations. */
#define DURO__SQL_CANCELS 2

struct duro__sql_notifier {
    duro__sql_shared shared; /* first member; key "<dialect>/<key>" */
    int counted;             /* the dialect's wake_counted */
    void (*end)(duro__sql_notifier *n); /* the dialect's notifier_end */
    void *own; /* the dialect's part (start makes it; NULL: none) */
    pthread_mutex_t lock;
    pthread_cond_t cond[3];         /* per duro_queue, then CANCELS */
    _Atomic uint64_t generation[3]; /* raised after each commit that adds or
                                       releases work (or cancels work
                                       items: CANCELS), and by wake() */
    int tokens[2];  /* under lock: waits owed a return, per duro_queue */
    int waiters[2]; /* under lock: threads blocked in wait_for_work */
};

/* st->notifier for key (the dialect's; "" makes a private one, as for an
 * in-memory database): the one of this process, or a new one that
 * start(n, arg) (NULL: none) gives the dialect's part (n->own); when start
 * fails, having set n->own or not, the notifier is ended and freed.
 * DURO_NOMEM when it cannot be made. */
int duro__sql_notify_attach(duro__sql_store *st, const char *key,
                            int (*start)(duro__sql_notifier *n, void *arg),
                            void *arg);
/* Lets go of st->notifier (the last provider frees it); NULL is a no-op. */
void duro__sql_notify_detach(duro__sql_store *st);
/* A commit made `items` items of channel q (a duro_queue, or
 * DURO__SQL_CANCELS) available: wakes waiters here. Returns how many
 * threads were waiting on q with no token owed them (each will take one
 * item). n may be NULL. */
size_t duro__sql_notify(duro__sql_notifier *n, int q, size_t items);
/* The dialect's signal of a store woken in process only. */
void duro__sql_notify_signal(duro__sql_store *st, duro_queue queue,
                             size_t items);
/* A fetch of `queue` begins on this thread; and, when it found nothing,
 * `due` the earliest time anything on the queue becomes due (INT64_MAX:
 * nothing queued), which the thread's next wait uses instead of asking the
 * store (the dialect's note_due). */
void duro__sql_note_fetch(duro__sql_store *st, duro_queue queue);
void duro__sql_note_due(duro__sql_store *st, duro_queue queue, int64_t due);
/* The provider methods wait_for_work, wake and wait_for_cancellations (a
 * dialect that signals DURO__SQL_CANCELS sets the last). */
int duro__sql_wait_for_work(duro_provider *base, duro_queue queue,
                            int64_t max_wait_ms, duro_error *err);
void duro__sql_wake(duro_provider *base, int sticky);
int duro__sql_wait_for_cancellations(duro_provider *base, int64_t max_wait_ms,
                                     duro_error *err);

/* ---- the store's operations written once (duro/provider.h methods) ------ */

/* sql/methods.c: sets version and every method the shared layer
 * implements (duro__sql_open then sets name and close; the dialect the
 * rest). */
void duro__sql_fill_methods(duro_provider *m);
/* A dialect's open (the provider method's skeleton): out checked
 * (DURO_INVALID) and cleared; the dialect's provider struct allocated
 * (DURO_NOMEM) and configured from url (the dialect's configure), its
 * methods filled (the shared layer's, the dialect's name, close), its pool
 * ready for connections; then open(st, concurrency, err) opens the rest
 * (concurrency: the caller's, 0 when none). When open fails, close(st)
 * closes whatever it opened (it ends with duro__sql_store_free, after the
 * dialect freed its own parts and config). *out = the provider on
 * success. */
int duro__sql_open(const duro__sql_dialect *d, const char *url, int concurrency,
                   int (*open)(duro__sql_store *st, int concurrency,
                               duro_error *err),
                   void (*close)(duro_provider *base), duro_provider **out,
                   duro_error *err);
void duro__sql_store_free(duro__sql_store *st);
/* p as the SQL store of the dialect named `dialect` ("sqlite"), NULL when
 * it is anything else (another provider, a wrapper of one): for test
 * hooks, which any provider may be passed to. */
duro__sql_store *duro__sql_store_of(duro_provider *p, const char *dialect);

/* sql/stats.c */
int duro__sql_read_store_stats(duro_provider *p, duro_store_stats **out,
                               duro_error *err);

/* sql/history.c */
/* Reads a row of HISTORY_READ's columns into ev (text copied into a); -1
 * when out of memory. */
int duro__sql_read_event(duro__sql_store *st, duro_arena *a, duro__sql_stmt *s,
                         duro_event *ev);
/* Reads the events after `after` of (instance, execution) into the arena,
 * oldest first. */
int duro__sql_read_events(duro__sql_store *st, duro__sql_conn *c, duro_arena *a,
                          const char *instance_id, uint64_t execution_id,
                          uint64_t after, duro_event **events, size_t *count,
                          const char *op, duro_error *err);

/* sql/manage.c */
int duro__sql_read_history(duro_provider *p, const char *instance_id,
                           uint64_t execution_id, duro_history **out,
                           duro_error *err);
int duro__sql_latest_execution_id(duro_provider *p, const char *instance_id,
                                  uint64_t *out, duro_error *err);
int duro__sql_read_activity_cancel_reason(duro_provider *p,
                                          const char *instance_id,
                                          uint64_t execution_id,
                                          uint64_t activity_id, char *reason,
                                          size_t reason_size, duro_error *err);
int duro__sql_get_instance(duro_provider *p, const char *instance_id,
                           duro_instance_list **out, duro_error *err);
int duro__sql_list_instances(duro_provider *p,
                             const duro_instance_filter *filter,
                             duro_instance_list **out, duro_error *err);
int duro__sql_query_instances(duro_provider *p, const duro_instance_query *q,
                              duro_instance_page **out, duro_error *err);
int duro__sql_list_control_events(duro_provider *p,
                                  const duro_control_event_query *q,
                                  duro_control_event_list **out,
                                  duro_error *err);
int duro__sql_count_messages(duro_provider *p, duro_queue queue,
                             const char *instance_id, uint64_t *out,
                             duro_error *err);
int duro__sql_delete_instance(duro_provider *p, const char *instance_id,
                              int force, size_t *deleted, duro_error *err);
int duro__sql_prune_executions(duro_provider *p, const char *instance_id,
                               uint64_t keep_last, size_t *pruned,
                               duro_error *err);
int duro__sql_set_instance_problem(duro_provider *p, const char *instance_id,
                                   const char *problem, int64_t next_attempt_ms,
                                   duro_error *err);
/* The earliest time (wall ms) at which something on `queue` becomes
 * fetchable, INT64_MAX when the queue is empty (wait_for_work). */
int duro__sql_next_due(duro__sql_store *st, duro_queue queue, int64_t *out,
                       duro_error *err);
/* The provider's next_due (version 12): the earliest of both queues'. */
int duro__sql_next_due_any(duro_provider *p, int64_t *due_ms, int *any,
                           duro_error *err);
/* sql/reset.c: reset_instance (version 13). */
int duro__sql_reset_instance(duro_provider *base, const duro_reset_request *r,
                             duro_reset_result *out, duro_error *err);
/* A cancel (terminate 0) or terminate of one instance inside the caller's
 * write transaction, as cancel_instances and control_instances decide it
 * (nothing for an ended or unknown instance); *woken: messages sent
 * (sql/many.c; a schedule's overlap policy, sql/schedules.c). */
int duro__sql_request_one_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                         int terminate, const char *instance_id,
                                         const char *reason,
                                         const char *requested_by, int64_t now,
                                         size_t *woken, const char *op,
                                         duro_error *err);
/* sql/schedules.c: the schedule methods of provider contract version 13. */
int duro__sql_create_schedule(duro_provider *p, const duro_schedule_record *r,
                              duro_error *err);
int duro__sql_update_schedule(duro_provider *p, const duro_schedule_record *r,
                              int64_t expected_row_version,
                              int64_t *row_version, duro_error *err);
int duro__sql_delete_schedule(duro_provider *p, const char *id,
                              duro_error *err);
int duro__sql_get_schedule(duro_provider *p, const char *id,
                           duro_schedule_list **out, duro_error *err);
int duro__sql_list_schedules(duro_provider *p, const char *after_id,
                             size_t limit, duro_schedule_list **out,
                             duro_error *err);
int duro__sql_due_schedules(duro_provider *p, int64_t now_ms, size_t limit,
                            duro_schedule_list **out, duro_error *err);
int duro__sql_apply_schedule(duro_provider *p, const char *id,
                             int64_t expected_row_version,
                             const duro_schedule_action *actions, size_t n,
                             const duro_schedule_record *after,
                             int64_t *row_version, duro_error *err);
int duro__sql_list_schedule_fires(duro_provider *p, const char *id,
                                  size_t limit, duro_schedule_fire_list **out,
                                  duro_error *err);
/* sql/many.c: cancel_instances, control_instances, cancel_matching,
 * control_matching, purge_instances. */

/* A sweep's set as the dialect holds it between sweep_open and
 * sweep_close. */
struct duro__sql_sweep {
    int dry_run;          /* the caller's: nothing is written */
    duro__sql_conn *conn; /* open's: where the set is read (and a dry
                             run's checks run) */
    int in_place;         /* 0 unless open says 1: the batches write on
                             conn in the sweep's one transaction (SQLite's
                             :memory:, whose only connection is the
                             writer); 0, each batch is a write transaction
                             of its own */
    size_t page;          /* rows a page holds at most:
                             DURO_BULK_BATCH_MAX unless open says SIZE_MAX
                             (the set is read whole before any write) */
    void *state;          /* the dialect's */
};

int duro__sql_cancel_instances(duro_provider *p,
                               const char *const *instance_ids, size_t count,
                               const char *reason, const char *requested_by,
                               duro_cancel_result *results, duro_error *err);
int duro__sql_control_instances(duro_provider *p, int control,
                                const char *const *instance_ids, size_t count,
                                const char *reason, const char *requested_by,
                                duro_control_result *results, duro_error *err);
int duro__sql_cancel_matching(duro_provider *p, const duro_bulk_filter *filter,
                              const char *reason, const char *requested_by,
                              int dry_run, size_t max_ids,
                              duro_bulk_result **out, duro_error *err);
int duro__sql_control_matching(duro_provider *p, int control,
                               const duro_bulk_filter *filter,
                               const char *reason, const char *requested_by,
                               int dry_run, size_t max_ids,
                               duro_bulk_result **out, duro_error *err);
int duro__sql_purge_instances(duro_provider *p, const duro_bulk_filter *filter,
                              int dry_run, size_t max_ids,
                              duro_bulk_result **out, duro_error *err);
/* ---- sql/queue.c: what both stores do alike on their queues ------------ */

/* now + delay_ms (saturating), or now when there is no delay. */
static inline int64_t duro__sql_after_ms(int64_t now, int64_t delay_ms)
{
    return delay_ms > 0 ? duro__add_ms(now, delay_ms) : now;
}

/* s, or NULL when it is NULL or empty. */
static inline const char *duro__sql_nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* Lock tokens: "o<ready row id>.<32 hex>" (an instance lock), "w<worker
 * row id>.<32 hex>" (a work item). check_token refuses NULL or empty
 * (DURO_INVALID); parse_token gives the row id of a token of this store
 * with `prefix`, -1 for any other; lock_lost fills err DURO_LOCK_LOST. */
int duro__sql_check_token(const char *token, duro_error *err);
int duro__sql_parse_token(const char *token, char prefix, int64_t *id);
int duro__sql_lock_lost(const duro__sql_store *st, const char *op,
                        const char *why, duro_error *err);

/* The instance an orchestration lock token holds, unexpired
 * (READY_HOLDER, or READY_HOLDER_CURRENT, which reads the rest too; on
 * PostgreSQL it row-locks the ready row until the transaction ends). */
typedef struct duro__sql_lock_holder {
    char instance_id[DURO__SQL_NAME_MAX + 1];
    int exists;       /* the instance row is there (READY_HOLDER_CURRENT) */
    uint64_t current; /* its current execution, 0 when none (idem) */
    int has_events;   /* `current` has an executions row ... (idem) */
    uint64_t events;  /* ... holding this many events (idem) */
} duro__sql_lock_holder;

/* Fills *h for the lock `token` holds on ready row ready_id, inside the
 * caller's write transaction: DURO_LOCK_LOST when it holds none or it
 * expired by `now`. */
int duro__sql_hold_lock(duro__sql_store *st, duro__sql_conn *c,
                        int64_t ready_id, const char *token, int64_t now,
                        duro__sql_lock_holder *h, const char *op,
                        duro_error *err);
/* abandon_orchestration_item of a token of this store (ready row
 * ready_id) in a write transaction of its own: its messages untagged, its
 * lock released, the instance ready after delay_ms. */
int duro__sql_abandon_orch(duro__sql_store *st, int64_t ready_id,
                           const char *lock_token, int64_t delay_ms,
                           const char *op, duro_error *err);
/* The same; with uncount the fetch count of the messages it held goes back
 * by one (pass_orchestration_item). */
int duro__sql_release_orch(duro__sql_store *st, int64_t ready_id,
                           const char *lock_token, int64_t delay_ms,
                           int uncount, const char *op, duro_error *err);

/* Input checks of a work item (for the worker queue when `worker`) and of
 * an ack: DURO_OK or err (not retryable). */
int duro__sql_check_work_item(const duro__sql_store *st,
                              const duro_work_item *it, int worker,
                              duro_error *err);
int duro__sql_check_ack(const duro__sql_store *st, const duro_orch_ack *ack,
                        duro_error *err);

/* The current execution of an instance (0 when it has none or no row);
 * *exists says whether it has a row. */
int duro__sql_current_execution(duro__sql_store *st, duro__sql_conn *c,
                                const char *instance_id, int *exists,
                                uint64_t *execution_id, const char *op,
                                duro_error *err);

/* Binds a message's parameters (OQ_INSERT's): it, enqueued at now,
 * visible from visible_at. */
void duro__sql_bind_message(duro__sql_store *st, duro__sql_conn *c,
                            duro__sql_stmt *s, const duro_work_item *it,
                            int64_t now, int64_t visible_at);

/* Writes inside the caller's write transaction on c. */
int duro__sql_insert_message(duro__sql_store *st, duro__sql_conn *c,
                             const duro_work_item *it, int64_t now,
                             int64_t visible_at, const char *op,
                             duro_error *err);
int duro__sql_enqueue_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                     const duro_work_item *item, int64_t now,
                                     int64_t visible_at, int *skip,
                                     const char *op, duro_error *err);
int duro__sql_settle_ready(duro__sql_store *st, duro__sql_conn *c,
                           int64_t ready_id, const char *instance_id,
                           int64_t hold, int *queued, const char *op,
                           duro_error *err);
int duro__sql_cancel_activities(duro__sql_store *st, duro__sql_conn *c,
                                const char *instance_id, uint64_t execution_id,
                                const duro_activity_ref *refs, size_t count,
                                const char *op, duro_error *err);
int duro__sql_insert_history(duro__sql_store *st, duro__sql_conn *c,
                             const char *instance_id, uint64_t execution_id,
                             const duro_event *ev, const char *op,
                             duro_error *err);
int duro__sql_insert_work(duro__sql_store *st, duro__sql_conn *c,
                          const duro_work_item *it, uint64_t execution_id,
                          int64_t now, const char *op, duro_error *err);
int duro__sql_enqueue_outbound(duro__sql_store *st, duro__sql_conn *c,
                               const duro_outbound *out, int64_t now,
                               const char *op, duro_error *err);
int duro__sql_write_meta(duro__sql_store *st, duro__sql_conn *c,
                         const char *instance_id, uint64_t execution_id,
                         int began, const duro_instance_meta *m, int64_t now,
                         const char *op, duro_error *err);
int duro__sql_drop_dead_messages(duro__sql_store *st, duro__sql_conn *c,
                                 const char *instance_id, uint64_t execution_id,
                                 int status, const char *op, duro_error *err);

/* A turn's history: whether execution_id (the current one is `current`;
 * `known`, when not NULL, its event count read with the lock) has room for
 * delta more events under max_history (DURO_HISTORY_LIMIT when not;
 * DURO_INVALID for an older execution that does not exist); and the row of
 * a new execution, written with m's status and outcome (NULL: running),
 * made the instance's current one here when m is NULL, else by
 * duro__sql_write_meta (began). */
int duro__sql_history_room(duro__sql_store *st, duro__sql_conn *c,
                           const char *instance_id, uint64_t current,
                           uint64_t execution_id, const uint64_t *known,
                           size_t delta, uint64_t max_history, const char *op,
                           duro_error *err);
int duro__sql_create_execution(duro__sql_store *st, duro__sql_conn *c,
                               const char *instance_id, uint64_t execution_id,
                               const duro_instance_meta *m, int64_t now,
                               const char *op, duro_error *err);

/* One claim of an instance for duro__sql_fetch_turn, the store's own: it
 * locks the next visible instance by `now` until `until` and fills item
 * (its arena given) with it: *got = 1; or finds an instance ready with
 * nothing visible (an expired lock over delayed messages): *repair = 1,
 * *ready_id its ready row and item->instance_id set; or neither when
 * nothing is ready. */
typedef int (*duro__sql_claim_fn)(duro__sql_store *st, duro__sql_conn *c,
                                  void *arg, duro_orch_item *item, int64_t now,
                                  int64_t until,
                                  const duro_history_cache *cache, int *got,
                                  int *repair, int64_t *ready_id,
                                  const char *op, duro_error *err);
/* The body of fetch_orchestration_item inside an open write transaction:
 * claims (claim with arg) until one locks an item or nothing is ready,
 * repairing the readiness of instances ready with nothing visible (up to
 * a bound); *out the locked item or NULL. `now` (the caller's, read before
 * it waited for the writer) decides what is visible; the lock runs from
 * when the claim runs. */
int duro__sql_fetch_turn(duro__sql_store *st, duro__sql_conn *c,
                         duro__sql_claim_fn claim, void *arg,
                         int64_t lock_timeout_ms,
                         const duro_history_cache *cache, int64_t now,
                         duro_orch_item **out, const char *op, duro_error *err);

/* The end of ack_turns' transaction on c: committed when rc is DURO_OK
 * (a claim with token hex claim_hex, NULL for none, whose commit fails is
 * the dialect's claim_lost), else rolled back; on failure next[0 .. got)
 * are freed; on success the worker and orchestrator queues' wake-ups. */
int duro__sql_finish_turns(duro__sql_store *st, duro__sql_conn *c, int rc,
                           const char *claim_hex, duro_orch_item **next,
                           size_t got, size_t workers, size_t outbound,
                           const char *op, duro_error *err);

/* A turn's ack (sql/queue.c writes it at once; PostgreSQL's batches
 * gather the same writes): check_turn refuses an ack that writes history
 * or meta to an instance that is gone or without an execution, and gives
 * the execution it writes; ack_turn is the whole ack of the lock `token`
 * holds on ready row ready_id inside the caller's write transaction: the
 * lock, the turn's writes in their order, the consumed messages deleted
 * and the lock released (*queued: the instance still has messages). */
/* The execution a turn's work item `it` runs in: its own, or, when it
 * names none (0) and is the turn's instance's, the turn's execution. */
uint64_t duro__sql_item_execution(const duro_work_item *it,
                                  const char *instance_id,
                                  uint64_t execution_id);
int duro__sql_check_turn(const duro__sql_store *st,
                         const duro__sql_lock_holder *h,
                         const duro_orch_ack *ack, uint64_t *execution_id,
                         const char *op, duro_error *err);
int duro__sql_ack_turn(duro__sql_store *st, duro__sql_conn *c, int64_t ready_id,
                       const char *token, const duro_orch_ack *ack, int64_t now,
                       int *queued, const char *op, duro_error *err);

/* ack_work in one write transaction of its own: the acked row deleted,
 * its completion enqueued and with `next` the next item claimed (WQ_FETCH),
 * committed; then the orchestrator queue's wake-up. */
int duro__sql_ack_work_in_transaction(duro__sql_store *st, int64_t id,
                                      const char *lock_token,
                                      const duro_work_item *completion,
                                      int64_t lock_timeout_ms,
                                      duro_worker_item **next, const char *op,
                                      duro_error *err);

/* An acked work item's row deleted by its token (DURO_LOCK_LOST when the
 * token no longer holds it) and its completion enqueued (*skip = 1 when
 * there is nothing to enqueue: an idempotent start, an event id seen). */
int duro__sql_delete_acked_work(duro__sql_store *st, duro__sql_conn *c,
                                int64_t id, const char *lock_token,
                                const duro_work_item *completion, int64_t now,
                                int *skip, const char *op, duro_error *err);

/* A queue row's message (columns 0..16 as OQ_INSERT's first parameters,
 * started_ms and finished_ms at times_col and times_col + 1) into it,
 * copied into a; -1 when out of memory. */
int duro__sql_read_message(duro__sql_store *st, duro_arena *a,
                           duro__sql_stmt *s, int times_col,
                           duro_work_item *it);

/* The worker queue: a claimed row (WQ_FETCH's columns) into w, -1 when out
 * of memory; and a row update by token in its own write transaction
 * (WQ_RENEW with `renewal`, or WQ_ABANDON). */
int duro__sql_read_work_row(duro__sql_store *st, duro_arena *a,
                            duro__sql_stmt *s, duro_worker_item *w);
/* The claim of the next work item (`claim`: WQ_FETCH or a dialect's form
 * of it) on c with token hex token_hex (duro__random_token), visible by
 * `now`, locked for lock_timeout_ms from when it runs: *out, or NULL when
 * nothing is visible. */
int duro__sql_claim_work(duro__sql_store *st, duro__sql_conn *c,
                         duro__sql_stmt_id claim, const char *token_hex,
                         int64_t lock_timeout_ms, int64_t now,
                         duro_worker_item **out, const char *op,
                         duro_error *err);
int duro__sql_update_work_row(duro__sql_store *st, duro__sql_stmt_id update,
                              int64_t id, const char *token, int64_t ms,
                              int renewal, const char *op, duro_error *err);

/* The methods (duro/provider.h) that are the same on both stores. */
int duro__sql_enqueue_for_orchestrator(duro_provider *base,
                                       const duro_work_item *item,
                                       int64_t delay_ms, duro_error *err);
int duro__sql_renew_orchestration_item_lock(duro_provider *base,
                                            const char *lock_token,
                                            int64_t extend_ms, duro_error *err);
int duro__sql_renew_work_item_lock(duro_provider *base, const char *lock_token,
                                   int64_t extend_ms, duro_error *err);
int duro__sql_ack_orchestration_item(duro_provider *base,
                                     const char *lock_token,
                                     const duro_orch_ack *ack, duro_error *err);
int duro__sql_ack_and_fetch_orchestration_item(
    duro_provider *base, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err);
int duro__sql_ack_and_fetch_orchestration_items(
    duro_provider *base, size_t n, const char *const *lock_tokens,
    const duro_orch_ack *acks, int64_t lock_timeout_ms,
    const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
    size_t *next_count, duro_error *err);
int duro__sql_ack_work_item(duro_provider *base, const char *lock_token,
                            const duro_work_item *completion, duro_error *err);
int duro__sql_ack_and_fetch_work_item(duro_provider *base,
                                      const char *lock_token,
                                      const duro_work_item *completion,
                                      int64_t lock_timeout_ms,
                                      duro_worker_item **next, duro_error *err);
int duro__sql_abandon_work_item(duro_provider *base, const char *lock_token,
                                int64_t delay_ms, duro_error *err);
int duro__sql_fetch_orchestration_item(duro_provider *base,
                                       int64_t lock_timeout_ms,
                                       const duro_history_cache *cache,
                                       duro_orch_item **out, duro_error *err);
int duro__sql_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                              duro_worker_item **out, duro_error *err);
int duro__sql_check_work_item_locks(duro_provider *base,
                                    const char *const *lock_tokens,
                                    size_t count, unsigned char *held,
                                    duro_error *err);
int duro__sql_abandon_orchestration_item(duro_provider *base,
                                         const char *lock_token,
                                         int64_t delay_ms, duro_error *err);
int duro__sql_pass_orchestration_item(duro_provider *base,
                                      const char *lock_token, int64_t delay_ms,
                                      duro_error *err);

/* sql/runtimes.c: the live runtimes (provider contract version 12). */
int duro__sql_register_runtime(duro_provider *base,
                               const duro_runtime_info *info, duro_error *err);
int duro__sql_list_runtimes(duro_provider *base, duro_runtime_list **out,
                            duro_error *err);
int duro__sql_remove_runtime(duro_provider *base, const char *runtime_id,
                             duro_error *err);

#endif
