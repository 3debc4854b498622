/* pg_dialect.c - the primitives the shared SQL layer (sql/sql.h) runs on a
 * PostgreSQL store: pg_db.c's statements over libpq, pooled connections
 * for writes and reads, the wake-up that reaches every process (pg_wake.c's
 * signal), a sweep's cursor, the URL's config. Each is a cast around pg_db.c's
 * own function. Thread rules: pg_db.c's. */
#include "providers/postgres/pg_internal.h"
#include "providers/sql/adapt.h"
#include "providers/postgres/pg_queue.h"

_Static_assert(DURO__PG_ROW == DURO__SQL_ROW && DURO__PG_DONE == DURO__SQL_DONE,
               "the shared layer reads duro__pg_step's codes");

#define PROVIDER(st) ((duro__pg_provider *)(st))
#define CONN(c) ((duro__pg_conn *)(c))
#define STMT(s) ((duro__pg_statement *)(s))

DURO__SQL_ADAPTERS(pg, duro__pg_provider, duro__pg_conn, duro__pg_statement)
DURO__SQL_ADAPT_COLUMNS(pg, duro__pg_conn, duro__pg_statement)

DURO__SQL_ADAPT_BEGIN(write_begin_snapshot, duro__pg_write_begin_snapshot,
                      duro__pg_provider, duro__pg_conn)

/* sql/manage.c: LIMIT NULL is none (a negative LIMIT fails). */
static void bind_limit(duro__sql_conn *c, duro__sql_stmt *s, int i, int64_t v)
{
    if (v >= 0)
        duro__pg_bind_i64(CONN(c), STMT(s), i, v);
    else
        duro__pg_bind_text(CONN(c), STMT(s), i, NULL);
}

/* ---- a sweep's set (sql/many.c) --------------------------------------
 * The set is the rows of a holdable cursor, declared on a REPEATABLE READ
 * snapshot on a connection of the sweep's own, in id order; it is read a
 * page of DURO_BULK_BATCH_MAX rows at a time (SWEEP_FETCH). A real run
 * commits the cursor's transaction at once (the server keeps the rows), so
 * no transaction stays open while the batches run: each is checked again
 * and handled in one write transaction on a pooled connection, however
 * long it waits for locks, and a role's
 * idle_in_transaction_session_timeout cannot end the sweep, nor does it
 * hold back vacuum. A dry run reads the set and checks each batch within
 * the one snapshot, which ends with the call. The connection is the
 * sweep's own: a pooled one would be taken from other callers for the
 * whole sweep (and a pool of one would deadlock with the batches'
 * transactions). */

_Static_assert(DURO_BULK_BATCH_MAX == 500, "DURO__PG_SWEEP_PAGE says 500");

typedef struct pg_sweep {
    duro__pg_conn conn;
    int declared; /* the cursor is declared (by the first page) */
} pg_sweep;

static int sweep_open(duro__sql_store *st, duro__sql_sweep *sw, const char *op,
                      duro_error *err)
{
    duro__pg_provider *p = PROVIDER(st);
    pg_sweep *own = duro__calloc(1, sizeof(*own));
    if (own == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    int rc = duro__pg_conn_open(p, &own->conn, err);
    if (rc != DURO_OK) {
        duro__free(own);
        return rc;
    }
    duro__pg_statement *s =
        duro__pg_stmt(p, &own->conn, DURO__SQL_BEGIN_READ, op, err);
    rc = s != NULL ? duro__pg_run(p, &own->conn, s, op, err) : err->code;
    if (rc != DURO_OK) {
        duro__pg_conn_close(&own->conn);
        duro__free(own);
        return rc;
    }
    sw->conn = (duro__sql_conn *)&own->conn;
    sw->state = own;
    return DURO_OK;
}

/* The first page declares the cursor (set) on the snapshot; a real run
 * then commits, which keeps the cursor's rows and ends the snapshot. Each
 * page is a FETCH. */
static duro__sql_stmt *sweep_page(duro__sql_store *st, duro__sql_sweep *sw,
                                  duro__sql_stmt *set, const char *op,
                                  duro_error *err)
{
    duro__pg_provider *p = PROVIDER(st);
    pg_sweep *own = sw->state;
    duro__pg_conn *c = &own->conn;
    if (!own->declared) {
        own->declared = 1;
        int rc = duro__pg_run(p, c, STMT(set), op, err);
        if (rc == DURO_OK && !sw->dry_run) {
            duro__pg_statement *s =
                duro__pg_stmt(p, c, DURO__SQL_COMMIT, op, err);
            rc = s != NULL ? duro__pg_run(p, c, s, op, err) : err->code;
        }
        if (rc != DURO_OK)
            return NULL;
    }
    return (duro__sql_stmt *)duro__pg_stmt(p, c, DURO__SQL_SWEEP_FETCH, op,
                                           err);
}

static int sweep_close(duro__sql_store *st, duro__sql_sweep *sw, int rc,
                       const char *op, duro_error *err)
{
    (void)st;
    (void)op;
    (void)err;
    pg_sweep *own = sw->state;
    duro__pg_conn_close(&own->conn); /* ends a dry run's snapshot, the
                                        cursor */
    duro__free(own);
    return rc;
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

/* Wakes waiters here and, through the listener, in other processes. */
static void signal(duro__sql_store *st, duro_queue queue, size_t items)
{
    duro__pg_signal(PROVIDER(st), queue, items);
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

/* The URL's config (pg_url.c); text that is not UTF-8 is refused before
 * PostgreSQL fails it (22021). */
static int configure(duro__sql_store *st, const char *url, duro_error *err)
{
    duro__pg_config *cfg = &PROVIDER(st)->cfg;
    st->utf8_only = 1;
    int rc = duro__pg_parse_url(url, cfg, err);
    if (rc != DURO_OK) {
        duro__pg_config_free(cfg);
        return rc;
    }
    st->max_payload = cfg->max_payload;
    st->max_history = cfg->max_history;
    return DURO_OK;
}

const duro__sql_dialect duro__pg_dialect = {
    .name = "postgres",
    .write_begin_snapshot = write_begin_snapshot,
    /* sql/manage.c */
    .bind_limit = bind_limit,
    /* operations on many instances (sql/many.c) */
    .ids_json = 0,
    .ids_reader = "unnest",
    /* sql/queue.c (the queues) */
    .message_params = {18, 19, 24, 25}, /* now, visible_at, started, finished */
    /* writers do not queue in-process */
    .write_begin_urgent = adapt_write_begin,
    .id_list = "{}",
    .abandon_failed = abandon_failed,
    .note_due = duro__sql_note_due,
    .insert_events = insert_events,
    .turn_locked = turn_locked,
    .claim_lost = claim_lost,
    .reader_snapshot = 0, /* a pooled connection, each statement alone */
    .signal = signal,
    /* h-dups: the in-process wake-up (sql/notify.c) */
    .wake_counted = 1,       /* a commit of n items ends n waits */
    .due_held_retry_ms = 10, /* due already: look again soon */
    .notifier_end = duro__pg_notifier_end,
    /* a batch's statements are set-based: each costs its round trip and
     * executor start whatever its rows, so more turns a batch is less of
     * both a turn (chain 1.15-1.2 times at 64 against 16; bench/RESULTS.md) */
    .turn_batch = 64,
    /* .bytes_beside: none (the WAL is the server's) */
    DURO__SQL_DIALECT_NAMED(pg), /* this file's and pg_*.c's (sql/adapt.h) */
    DURO__SQL_ADAPTED            /* the casts of sql/adapt.h */
};
