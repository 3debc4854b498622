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

#include <stddef.h>
#include <stdint.h>

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

/* The primitives. Every member is set. */
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
    /* Bytes the store keeps on disk beside its tables (SQLite's WAL); 0
     * when none. */
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
} duro__sql_dialect;

/* The part of a SQL store the shared layer reads. */
struct duro__sql_store {
    duro_provider base; /* first member */
    const duro__sql_dialect *dialect;
    size_t max_payload; /* bytes of a payload, from the URL */
    int utf8_only;      /* text that is not UTF-8 is refused (PostgreSQL
                           would fail it with 22021) */
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

/* ---- the store's operations written once (duro/provider.h methods) ------ */

/* sql/methods.c: sets version and every method the shared layer
 * implements; the dialect sets name, close and the rest after it. */
void duro__sql_fill_methods(duro_provider *m);
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

#endif
