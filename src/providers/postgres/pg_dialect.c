/* pg_dialect.c - the primitives the shared SQL layer (sql/sql.h) runs on a
 * PostgreSQL store: pg_db.c's statements over libpq, pooled connections
 * for writes and reads, the wake-up that reaches every process. Each is a
 * cast around pg_db.c's own function. Thread rules: pg_db.c's. */
#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_queue.h"

_Static_assert(DURO__PG_ROW == DURO__SQL_ROW && DURO__PG_DONE == DURO__SQL_DONE,
               "the shared layer reads duro__pg_step's codes");

#define PROVIDER(st) ((duro__pg_provider *)(st))
#define CONN(c) ((duro__pg_conn *)(c))
#define STMT(s) ((duro__pg_statement *)(s))

static duro__sql_stmt *prepare(duro__sql_store *st, duro__sql_conn *c,
                               duro__sql_stmt_id id, const char *op,
                               duro_error *err)
{
    return (duro__sql_stmt *)duro__pg_stmt(PROVIDER(st), CONN(c), id, op, err);
}

static int step(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s)
{
    return duro__pg_step(PROVIDER(st), CONN(c), STMT(s));
}

static int error(duro__sql_conn *c, int rc, const char *op, duro_error *err)
{
    return duro__pg_error(CONN(c), rc, op, err);
}

static void reset(duro__sql_stmt *s)
{
    duro__pg_reset(STMT(s));
}

static int changes(duro__sql_conn *c)
{
    return duro__pg_changes(CONN(c));
}

static int param_count(duro__sql_stmt *s)
{
    return duro__pg_param_count(STMT(s));
}

static void bind_text(duro__sql_conn *c, duro__sql_stmt *s, int i,
                      const char *v)
{
    duro__pg_bind_text(CONN(c), STMT(s), i, v);
}

static void bind_i64(duro__sql_conn *c, duro__sql_stmt *s, int i, int64_t v)
{
    duro__pg_bind_i64(CONN(c), STMT(s), i, v);
}

static int64_t column_int64(duro__sql_stmt *s, int col)
{
    return duro__pg_column_int64(STMT(s), col);
}

static int column_null(duro__sql_stmt *s, int col)
{
    return duro__pg_column_null(STMT(s), col);
}

static const char *column_text(duro__sql_stmt *s, int col)
{
    return duro__pg_column_text_raw(STMT(s), col);
}

static int column_bytes(duro__sql_stmt *s, int col)
{
    return duro__pg_column_bytes(STMT(s), col);
}

static int write_begin(duro__sql_store *st, const char *op,
                       duro__sql_conn **out, duro_error *err)
{
    duro__pg_conn *c = NULL;
    int rc = duro__pg_write_begin(PROVIDER(st), op, &c, err);
    *out = (duro__sql_conn *)c;
    return rc;
}

static int write_begin_snapshot(duro__sql_store *st, const char *op,
                                duro__sql_conn **out, duro_error *err)
{
    duro__pg_conn *c = NULL;
    int rc = duro__pg_write_begin_snapshot(PROVIDER(st), op, &c, err);
    *out = (duro__sql_conn *)c;
    return rc;
}

static int write_commit(duro__sql_store *st, duro__sql_conn *c, const char *op,
                        duro_error *err)
{
    return duro__pg_write_commit(PROVIDER(st), CONN(c), op, err);
}

static void write_rollback(duro__sql_store *st, duro__sql_conn *c)
{
    duro__pg_write_rollback(PROVIDER(st), CONN(c));
}

static duro__sql_conn *reader_acquire(duro__sql_store *st)
{
    return (duro__sql_conn *)duro__pg_reader_acquire(PROVIDER(st));
}

static void reader_release(duro__sql_store *st, duro__sql_conn *c)
{
    duro__pg_reader_release(PROVIDER(st), CONN(c));
}

static void signal_queue(duro__sql_store *st, duro_queue queue, size_t items)
{
    duro__pg_signal(PROVIDER(st), queue, items);
}

/* Everything the store keeps is in its tables (the WAL is the server's). */
static int64_t nothing_beside(duro__sql_store *st)
{
    (void)st;
    return 0;
}

/* ---- sql/queue.c (the queues) ---- */

static void bind_flag(duro__sql_conn *c, duro__sql_stmt *s, int i, int v)
{
    duro__pg_bind_text(CONN(c), STMT(s), i, v ? "t" : "f");
}

static int unique_violation(int rc)
{
    return rc == DURO__PG_UNIQUE;
}

/* Kept for the next fetch to abandon again (pg_release.c). */
static void abandon_failed(duro__sql_store *st, char kind, const char *token,
                           int64_t delay_ms)
{
    duro__pg_keep_release(PROVIDER(st), kind, token, delay_ms);
}

static void note_due(duro__sql_store *st, duro_queue queue, int64_t due_ms)
{
    duro__pg_note_due(PROVIDER(st), queue, due_ms);
}

static uint64_t max_history(duro__sql_store *st)
{
    return PROVIDER(st)->cfg.max_history;
}

static int insert_events(duro__sql_store *st, duro__sql_conn *c,
                         const char *instance_id, uint64_t execution_id,
                         const duro_event *events, size_t count, const char *op,
                         duro_error *err)
{
    return duro__pg_insert_events(PROVIDER(st), CONN(c), instance_id,
                                  execution_id, events, count, op, err);
}

static void turn_locked(duro__sql_store *st)
{
    duro__pg_provider *p = PROVIDER(st);
    if (p->turn_ack_locked != NULL)
        p->turn_ack_locked(p->turn_ack_locked_arg);
}

/* A claim whose commit's outcome is unknown: released by the next fetch
 * (pg_release.c). */
static void claim_lost(duro__sql_store *st, char kind, const char *hex, int rc,
                       const duro_error *err)
{
    duro__pg_keep_unknown_claim(PROVIDER(st), kind, hex, rc, err);
}

const duro__sql_dialect duro__pg_dialect = {
    .name = "postgres",
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
    .write_begin_snapshot = write_begin_snapshot,
    .write_commit = write_commit,
    .write_rollback = write_rollback,
    .reader_acquire = reader_acquire,
    .reader_release = reader_release,
    .signal = signal_queue,
    .has = duro__pg_has_statement,
    .bytes_beside = nothing_beside,
    /* sql/queue.c (the queues) */
    .message_params = {18, 19, 24, 25}, /* now, visible_at, started, finished */
    .bind_flag = bind_flag,
    .unique_violation = unique_violation,
    .write_begin_urgent = write_begin, /* writers do not queue in-process */
    .id_list = "{}",
    .ack_turns = duro__pg_ack_turns,
    .ack_work = duro__pg_ack_work,
    .abandon_failed = abandon_failed,
    .note_due = note_due,
    .max_history = max_history,
    .insert_events = insert_events,
    .turn_locked = turn_locked,
    .claim_lost = claim_lost,
    .fetch_work = duro__pg_fetch_work,
    .reader_snapshot = 0, /* a pooled connection, each statement alone */
};
