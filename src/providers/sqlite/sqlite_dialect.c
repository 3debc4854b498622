/* sqlite_dialect.c - the primitives the shared SQL layer (sql/sql.h) runs
 * on a SQLite store: statements, steps and columns of sqlite3, the one
 * writer, the reader pool, the in-process wake-up. Each is a cast around
 * sqlite_db.c's own function or sqlite3's. Thread rules: sqlite_db.c's. */
#include <string.h>
#include <sys/stat.h>

#include "providers/sqlite/sqlite_internal.h"

_Static_assert(SQLITE_ROW == DURO__SQL_ROW && SQLITE_DONE == DURO__SQL_DONE,
               "the shared layer reads sqlite3_step's codes");

#define PROVIDER(st) ((duro__sqlite_provider *)(st))
#define CONN(c) ((duro__sqlite_conn *)(c))
#define STMT(s) ((sqlite3_stmt *)(s))

static duro__sql_stmt *prepare(duro__sql_store *st, duro__sql_conn *c,
                               duro__sql_stmt_id id, const char *op,
                               duro_error *err)
{
    return (duro__sql_stmt *)duro__sqlite_stmt(PROVIDER(st), CONN(c), id, op,
                                               err);
}

static int step(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s)
{
    return duro__sqlite_step(PROVIDER(st), CONN(c), STMT(s));
}

static int error(duro__sql_conn *c, int rc, const char *op, duro_error *err)
{
    return duro__sqlite_error(CONN(c), rc, op, err);
}

static void reset(duro__sql_stmt *s)
{
    sqlite3_reset(STMT(s));
}

static int changes(duro__sql_conn *c)
{
    return sqlite3_changes(CONN(c)->db);
}

static int param_count(duro__sql_stmt *s)
{
    return sqlite3_bind_parameter_count(STMT(s));
}

static void bind_text(duro__sql_conn *c, duro__sql_stmt *s, int i,
                      const char *v)
{
    duro__sqlite_bind_text(CONN(c), STMT(s), i, v);
}

static void bind_i64(duro__sql_conn *c, duro__sql_stmt *s, int i, int64_t v)
{
    duro__sqlite_bind_i64(CONN(c), STMT(s), i, v);
}

static int64_t column_int64(duro__sql_stmt *s, int col)
{
    return sqlite3_column_int64(STMT(s), col);
}

static int column_null(duro__sql_stmt *s, int col)
{
    return sqlite3_column_type(STMT(s), col) == SQLITE_NULL;
}

static const char *column_text(duro__sql_stmt *s, int col)
{
    return (const char *)sqlite3_column_text(STMT(s), col);
}

static int column_bytes(duro__sql_stmt *s, int col)
{
    return sqlite3_column_bytes(STMT(s), col);
}

static int write_begin(duro__sql_store *st, const char *op,
                       duro__sql_conn **out, duro_error *err)
{
    duro__sqlite_conn *c = NULL;
    int rc = duro__sqlite_write_begin(PROVIDER(st), op, &c, err);
    *out = (duro__sql_conn *)c;
    return rc;
}

static int write_commit(duro__sql_store *st, duro__sql_conn *c, const char *op,
                        duro_error *err)
{
    return duro__sqlite_write_commit(PROVIDER(st), CONN(c), op, err);
}

static void write_rollback(duro__sql_store *st, duro__sql_conn *c)
{
    duro__sqlite_write_rollback(PROVIDER(st), CONN(c));
}

static duro__sql_conn *reader_acquire(duro__sql_store *st)
{
    return (duro__sql_conn *)duro__sqlite_reader_acquire(PROVIDER(st));
}

static void reader_release(duro__sql_store *st, duro__sql_conn *c)
{
    duro__sqlite_reader_release(PROVIDER(st), CONN(c));
}

static void signal_queue(duro__sql_store *st, duro_queue queue, size_t items)
{
    duro__sqlite_signal(PROVIDER(st), queue, items);
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
static int write_begin_urgent(duro__sql_store *st, const char *op,
                              duro__sql_conn **out, duro_error *err)
{
    duro__sqlite_conn *c = NULL;
    int rc = duro__sqlite_write_begin_urgent(PROVIDER(st), op, &c, err);
    *out = (duro__sql_conn *)c;
    return rc;
}

static uint64_t max_history(duro__sql_store *st)
{
    return PROVIDER(st)->cfg.max_history;
}

/* The writer's transactions always see one snapshot. */
const duro__sql_dialect duro__sqlite_dialect = {
    .name = "sqlite",
    .prepare = prepare,
    .step = step,
    .error = error,
    .reset = reset,
    .changes = changes,
    .param_count = param_count,
    .bind_text = bind_text,
    .bind_i64 = bind_i64,
    .column_int64 = column_int64,
    .column_null = column_null,
    .column_text = column_text,
    .column_bytes = column_bytes,
    .write_begin = write_begin,
    .write_begin_snapshot = write_begin,
    .write_commit = write_commit,
    .write_rollback = write_rollback,
    .reader_acquire = reader_acquire,
    .reader_release = reader_release,
    .signal = signal_queue,
    .has = duro__sqlite_has_statement,
    .bytes_beside = wal_bytes,
    /* sql/queue.c (the queues) */
    .message_params = {20, 21, 18, 19}, /* now, visible_at, started, finished */
    .bind_flag = bind_flag,
    .unique_violation = unique_violation,
    .write_begin_urgent = write_begin_urgent,
    .id_list = "[]",
    .ack_turns = duro__sqlite_ack_turns,
    .ack_work = duro__sqlite_ack_work,
    .abandon_failed = NULL, /* a writer in this process: nothing is lost */
    .note_due = NULL,       /* a claim that takes nothing answers no row */
    .max_history = max_history,
    .insert_events = NULL, /* one statement per event */
    .turn_locked = NULL,
    .claim_lost = NULL, /* a failed commit changed nothing */
    .fetch_work = duro__sqlite_fetch_work,
    .reader_snapshot = 1, /* one snapshot, no lock per statement */
};
