/* sqlite_dialect.c - the primitives the shared SQL layer (sql/sql.h) runs
 * on a SQLite store: statements, steps and columns of sqlite3, the one
 * writer, the readers, a sweep's snapshot, the URL's config (the wake-up
 * is sql/notify.c's, in process only). Each is a cast around sqlite_db.c's
 * own function or sqlite3's. Thread rules: sqlite_db.c's. */
#include <string.h>
#include <sys/stat.h>

#include "providers/sql/adapt.h"
#include "providers/sqlite/sqlite_internal.h"

_Static_assert(SQLITE_ROW == DURO__SQL_ROW && SQLITE_DONE == DURO__SQL_DONE,
               "the shared layer reads sqlite3_step's codes");

#define PROVIDER(st) ((duro__sqlite_provider *)(st))
#define CONN(c) ((duro__sqlite_conn *)(c))
#define STMT(s) ((sqlite3_stmt *)(s))

DURO__SQL_ADAPTERS(sqlite, duro__sqlite_provider, duro__sqlite_conn,
                   sqlite3_stmt)

/* The statement and column primitives are sqlite3's own. */
static void adapt_reset(duro__sql_stmt *s)
{
    sqlite3_reset(STMT(s));
}

static int adapt_changes(duro__sql_conn *c)
{
    return sqlite3_changes(CONN(c)->db);
}

static int adapt_param_count(duro__sql_stmt *s)
{
    return sqlite3_bind_parameter_count(STMT(s));
}

static int64_t adapt_column_int64(duro__sql_stmt *s, int col)
{
    return sqlite3_column_int64(STMT(s), col);
}

static int adapt_column_null(duro__sql_stmt *s, int col)
{
    return sqlite3_column_type(STMT(s), col) == SQLITE_NULL;
}

static const char *adapt_column_text(duro__sql_stmt *s, int col)
{
    return (const char *)sqlite3_column_text(STMT(s), col);
}

static int adapt_column_bytes(duro__sql_stmt *s, int col)
{
    return sqlite3_column_bytes(STMT(s), col);
}

/* Bytes of the WAL file beside a file database; 0 when there is none. */
static int64_t wal_bytes(duro__sql_store *st)
{
    const duro__sqlite_provider *p = PROVIDER(st);
    if (p->cfg.memory || p->cfg.path == NULL)
        return 0;
    char *wal = duro__sprintf("%s-wal", p->cfg.path);
    if (wal == NULL)
        return 0;
    struct stat sb;
    int64_t size = stat(wal, &sb) == 0 ? (int64_t)sb.st_size : 0;
    duro__free(wal);
    return size;
}

/* ---- a sweep's set (sql/many.c) --------------------------------------
 * A file database reads the set on a read snapshot of a connection of the
 * sweep's own, so the snapshot stays while batches commit on the writer (a
 * pooled reader would be taken from other callers for the whole sweep),
 * stepping its SELECT a page of DURO_BULK_BATCH_MAX rows at a time; while
 * it is open, p->sweeps holds RESTART checkpoints back. A :memory:
 * database has only the writer: there the whole sweep is one write
 * transaction, which no other write can interleave with, and the set is
 * read whole before the first write (memory grows with it; :memory: is for
 * tests). */

static void snapshot_close(duro__sqlite_provider *p, duro__sqlite_conn *snap)
{
    duro__sqlite_conn_close(snap); /* ends the read transaction */
    atomic_fetch_sub(&p->sweeps, 1);
    duro__free(snap);
}

static int sweep_open(duro__sql_store *st, duro__sql_sweep *sw, const char *op,
                      duro_error *err)
{
    duro__sqlite_provider *p = PROVIDER(st);
    if (p->cfg.memory) {
        duro__sqlite_conn *c = NULL;
        int rc = duro__sqlite_write_begin(p, op, &c, err);
        sw->conn = (duro__sql_conn *)c;
        sw->in_place = 1;
        sw->page = SIZE_MAX;
        return rc;
    }
    duro__sqlite_conn *snap = duro__calloc(1, sizeof(*snap));
    if (snap == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    int rc = duro__sqlite_conn_open(p, snap, 1, err);
    if (rc != DURO_OK) {
        duro__free(snap);
        return rc;
    }
    atomic_fetch_add(&p->sweeps, 1);
    sqlite3_stmt *s = duro__sqlite_stmt(p, snap, DURO__SQL_BEGIN_READ, op, err);
    rc = s != NULL ? duro__sqlite_run(p, snap, s, op, err) : err->code;
    if (rc != DURO_OK) {
        snapshot_close(p, snap);
        return rc;
    }
    sw->conn = (duro__sql_conn *)snap;
    sw->state = snap;
    return DURO_OK;
}

/* The SELECT's rows are the set: each page steps on from the last. */
static duro__sql_stmt *sweep_page(duro__sql_store *st, duro__sql_sweep *sw,
                                  duro__sql_stmt *set, const char *op,
                                  duro_error *err)
{
    (void)st;
    (void)sw;
    (void)op;
    (void)err;
    return set;
}

static int sweep_close(duro__sql_store *st, duro__sql_sweep *sw, int rc,
                       const char *op, duro_error *err)
{
    duro__sqlite_provider *p = PROVIDER(st);
    if (!sw->in_place) {
        snapshot_close(p, sw->state);
        return rc;
    }
    if (rc == DURO_OK && !sw->dry_run)
        return duro__sqlite_write_commit(p, CONN(sw->conn), op, err);
    duro__sqlite_write_rollback(p, CONN(sw->conn));
    return rc;
}

/* ---- sql/queue.c (the queues) ---- */

static void bind_flag(duro__sql_conn *c, duro__sql_stmt *s, int i, int v)
{
    duro__sqlite_bind_i64(CONN(c), STMT(s), i, v);
}

static int unique_violation(int rc)
{
    return rc == SQLITE_CONSTRAINT_PRIMARYKEY;
}

/* A renewal's writer: ahead of the writers that wait for the one writer. */
DURO__SQL_ADAPT_BEGIN(write_begin_urgent, duro__sqlite_write_begin_urgent,
                      duro__sqlite_provider, duro__sqlite_conn)

/* The URL's config (sqlite_url.c). */
static int configure(duro__sql_store *st, const char *url, duro_error *err)
{
    duro__sqlite_config *cfg = &PROVIDER(st)->cfg;
    int rc = duro__sqlite_parse_url(url, cfg, err);
    if (rc != DURO_OK)
        duro__sqlite_config_free(cfg);
    st->max_payload = cfg->max_payload;
    st->max_history = cfg->max_history;
    return rc;
}

/* The writer's transactions always see one snapshot. */
const duro__sql_dialect duro__sqlite_dialect = {
    .name = "sqlite",
    .write_begin_snapshot = adapt_write_begin, /* one writer: one snapshot */
    .bytes_beside = wal_bytes,
    /* sql/manage.c */
    .bind_limit = adapt_bind_i64, /* a negative LIMIT is none */
    /* operations on many instances (sql/many.c) */
    .ids_json = 1,
    .ids_reader = "json_each",
    /* sql/queue.c (the queues) */
    .message_params = {20, 21, 18, 19}, /* now, visible_at, started, finished */
    .write_begin_urgent = write_begin_urgent,
    .id_list = "[]",
    /* NULL (left out): abandon_failed (a writer in this process: nothing is
     * lost), note_due (a claim that takes nothing answers no row),
     * insert_events (one statement per event), turn_locked, claim_lost (a
     * failed commit changed nothing), notifier_end (no part of its own) */
    .reader_snapshot = 1,              /* one snapshot, no lock per statement */
    .signal = duro__sql_notify_signal, /* in process only */
    /* h-dups: the in-process wake-up (sql/notify.c) */
    .wake_counted = 0,      /* a commit ends every wait before it */
    .due_held_retry_ms = 0, /* due already: the wait returns at once */
    /* one turn write carries every instance the slots made ready since the
     * last commit: chain / floor 0.284 at 16 slots and a batch of 16, 0.297
     * at 16 and 64, 0.302-0.316 at 24 (the default) and 64
     * (bench/RESULTS.md, stop 36) */
    .turn_batch = 64,
    DURO__SQL_DIALECT_NAMED(sqlite), /* this file's, sqlite_*.c's (adapt.h) */
    DURO__SQL_ADAPTED                /* the casts of sql/adapt.h */
};
