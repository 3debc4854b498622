/* sqlite_db.c - the SQLite provider's plumbing: the statement table, opening
 * connections, the schema and its migrations, running statements through the
 * fault hook, mapping SQLite errors, write transactions on the one writer
 * connection (alone, or grouped: one commit for the writes of several
 * threads), checkpoints and the pool of reader connections. Thread-safe: the
 * writer is used under write_lock, a reader by the one thread that took it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "providers/sqlite/sqlite_internal.h"
#include "providers/sqlite/sqlite_provider.h"

/* By id (statements.h): NULL for the ids this dialect has no text for. */
const char *const duro__sqlite_statement_texts[DURO__SQL_COUNT] = {
#define DURO__X(id, sql) [DURO__SQL_##id] = sql,
    DURO__SQLITE_STATEMENTS(DURO__X)
#undef DURO__X
};
#define statement_sql duro__sqlite_statement_texts

int duro__sqlite_has_statement(duro__sql_stmt_id id)
{
    return id < DURO__SQL_COUNT && statement_sql[id] != NULL;
}

/* ---- schema ----------------------------------------------------------- */

/* Migration n brings a database from version n - 1 to n. Append only; never
 * edit a migration that has shipped. */
static const char *const migrations[DURO__SQLITE_SCHEMA_VERSION] = {
    /* 1: the initial schema. */
    "CREATE TABLE instances("
    " instance_id TEXT PRIMARY KEY NOT NULL,"
    " name TEXT NOT NULL,"
    " version TEXT,"
    " status INTEGER NOT NULL,"
    " execution_id INTEGER NOT NULL DEFAULT 0,"
    " created_ms INTEGER NOT NULL,"
    " updated_ms INTEGER NOT NULL,"
    " output TEXT,"
    " error TEXT,"
    " category INTEGER NOT NULL DEFAULT 0,"
    " custom_status TEXT,"
    " parent_instance TEXT,"
    " parent_execution INTEGER NOT NULL DEFAULT 0,"
    " parent_event_id INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX instances_parent ON instances(parent_instance);"
    "CREATE INDEX instances_status ON instances(status, instance_id);"
    "CREATE INDEX instances_name ON instances(name, instance_id);"
    "CREATE TABLE executions("
    " instance_id TEXT NOT NULL,"
    " execution_id INTEGER NOT NULL,"
    " status INTEGER NOT NULL,"
    " name TEXT,"
    " version TEXT,"
    " started_ms INTEGER NOT NULL,"
    " completed_ms INTEGER,"
    " output TEXT,"
    " error TEXT,"
    " category INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(instance_id, execution_id));"
    "CREATE TABLE history("
    " instance_id TEXT NOT NULL,"
    " execution_id INTEGER NOT NULL,"
    " event_id INTEGER NOT NULL,"
    " kind INTEGER NOT NULL,"
    " source_event_id INTEGER NOT NULL DEFAULT 0,"
    " timestamp_ms INTEGER NOT NULL,"
    " name TEXT,"
    " version TEXT,"
    " payload TEXT,"
    " error TEXT,"
    " category INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT,"
    " requested_by TEXT,"
    " ref_instance TEXT,"
    " ref_execution INTEGER NOT NULL DEFAULT 0,"
    " ref_event_id INTEGER NOT NULL DEFAULT 0,"
    " fire_at_ms INTEGER NOT NULL DEFAULT 0,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " flags INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(instance_id, execution_id, event_id)) WITHOUT ROWID;"
    "CREATE TABLE orchestrator_queue("
    " id INTEGER PRIMARY KEY,"
    " instance_id TEXT NOT NULL,"
    " kind INTEGER NOT NULL,"
    " execution_id INTEGER NOT NULL DEFAULT 0,"
    " source_id INTEGER NOT NULL DEFAULT 0,"
    " name TEXT,"
    " version TEXT,"
    " payload TEXT,"
    " error TEXT,"
    " category INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT,"
    " requested_by TEXT,"
    " parent_instance TEXT,"
    " parent_execution INTEGER NOT NULL DEFAULT 0,"
    " parent_event_id INTEGER NOT NULL DEFAULT 0,"
    " fire_at_ms INTEGER NOT NULL DEFAULT 0,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " flags INTEGER NOT NULL DEFAULT 0,"
    " enqueued_ms INTEGER NOT NULL,"
    " visible_at INTEGER NOT NULL,"
    " lock_token TEXT,"
    " fetch_count INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX orchestrator_queue_instance"
    " ON orchestrator_queue(instance_id, visible_at);"
    "CREATE TABLE orchestrator_ready("
    " instance_id TEXT PRIMARY KEY NOT NULL,"
    " ready_at INTEGER NOT NULL,"
    " lock_token TEXT,"
    " locked_until INTEGER);"
    "CREATE INDEX orchestrator_ready_at ON orchestrator_ready(ready_at);"
    "CREATE TABLE worker_queue("
    " id INTEGER PRIMARY KEY,"
    " instance_id TEXT NOT NULL,"
    " execution_id INTEGER NOT NULL,"
    " activity_id INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " version TEXT,"
    " payload TEXT,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " enqueued_ms INTEGER NOT NULL,"
    " available_at INTEGER NOT NULL,"
    " lock_token TEXT,"
    " locked_until INTEGER,"
    " fetch_count INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX worker_queue_available ON worker_queue(available_at);"
    "CREATE INDEX worker_queue_activity"
    " ON worker_queue(instance_id, execution_id, activity_id);",
    /* 2: the cancellation of an activity in one probe (a worker that finds
     * its row gone reads why); partial, so only ActivityCancelRequested
     * events (kind 10) are indexed and other history inserts pay nothing. */
    "CREATE INDEX history_activity_cancel"
    " ON history(instance_id, execution_id, source_event_id)"
    " WHERE kind = 10;",
    /* 3: what status shows of cancellation, the end and problems, and the
     * purge index. Rows written before it are filled in from what the
     * store holds: an ended instance's last metadata change was its end;
     * a pending cancellation is the first queued one, in the order a turn
     * takes them; a cancelled instance's is the one its history records. */
    "ALTER TABLE instances ADD COLUMN cancel_requested_ms INTEGER;"
    "ALTER TABLE instances ADD COLUMN cancel_reason TEXT;"
    "ALTER TABLE instances ADD COLUMN cancelled_by TEXT;"
    "ALTER TABLE instances ADD COLUMN finished_ms INTEGER;"
    "ALTER TABLE instances ADD COLUMN last_problem TEXT;"
    "ALTER TABLE instances ADD COLUMN last_problem_ms INTEGER;"
    "ALTER TABLE instances ADD COLUMN next_attempt_ms INTEGER;"
    "UPDATE instances SET finished_ms = updated_ms WHERE status IN (3, 4, 5);"
    "UPDATE instances SET (cancel_requested_ms, cancel_reason, cancelled_by)"
    " = (SELECT q.enqueued_ms, q.reason, q.requested_by"
    " FROM orchestrator_queue AS q WHERE q.instance_id = instances.instance_id"
    " AND q.kind = 8 ORDER BY q.visible_at, q.id LIMIT 1)"
    " WHERE status IN (1, 2) AND EXISTS (SELECT 1 FROM orchestrator_queue AS q"
    " WHERE q.instance_id = instances.instance_id AND q.kind = 8);"
    "UPDATE instances SET (cancel_requested_ms, cancel_reason, cancelled_by)"
    " = (SELECT h.timestamp_ms, h.reason, h.requested_by FROM history AS h"
    " WHERE h.instance_id = instances.instance_id"
    " AND h.execution_id = instances.execution_id AND h.kind = 5"
    " ORDER BY h.event_id LIMIT 1) WHERE status = 5;"
    /* partial: live instances (finished_ms NULL) are not in it, so only
     * the turn that ends an instance writes it; finished_ms < ? implies
     * the partial index's condition */
    "CREATE INDEX instances_finished ON instances(status, finished_ms)"
    " WHERE finished_ms IS NOT NULL;"
    /* store stats: instances by name and status, a covering scan of this
     * index instead of the table; and the instances with a problem, a
     * partial index that a healthy instance is never in, so only
     * set_instance_problem (and the meta of an instance with a problem)
     * writes it */
    "CREATE INDEX instances_name_status ON instances(name, status);"
    "CREATE INDEX instances_problem ON instances(name, status)"
    " WHERE last_problem IS NOT NULL;",
    /* 4: when the worker ran an activity (provider contract version 6):
     * carried by its completion message to the event the turn records.
     * Rows written before read 0, "unknown". */
    "ALTER TABLE orchestrator_queue"
    " ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE orchestrator_queue"
    " ADD COLUMN finished_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE history ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE history ADD COLUMN finished_ms INTEGER NOT NULL DEFAULT 0;",
    /* 5: the instance list by name and status (duro ui, duro list) pages
     * in id order by a seek: (name, status, instance_id) instead of (name,
     * status), which made it read every instance of the name to find one
     * status. Still the store stats' covering index. */
    "DROP INDEX instances_name_status;"
    "CREATE INDEX instances_name_status"
    " ON instances(name, status, instance_id);",
    /* 6: the ids of the events raised with one (provider contract version
     * 8): a raise retried with its id is delivered once. */
    "CREATE TABLE event_ids("
    " instance_id TEXT NOT NULL,"
    " event_id TEXT NOT NULL,"
    " raised_ms INTEGER NOT NULL,"
    " PRIMARY KEY(instance_id, event_id)) WITHOUT ROWID;",
    /* 7: the operators' queries (provider contract version 10). Pages of
     * instances newest first by creation or by last change, by status and
     * by name and status: one range per status, each read by a seek from
     * the cursor's key, merged (every status's ranges are the whole
     * order); and the control requests across instances, a partial index
     * of their four kinds (OrchestrationCancelRequested 5,
     * OrchestrationTerminated 19, ExecutionSuspended 20, ExecutionResumed
     * 21), so the other history inserts pay nothing. Building them reads
     * each table once. */
    DURO__SQL_DDL_QUERY_INDEXES " WHERE " DURO__SQLITE_CONTROL_KIND ";",
    /* 8: the live runtimes (provider contract version 12): a row per
     * runtime, written at its start and at each heartbeat, deleted at its
     * clean stop or, once it missed three heartbeats, by another's write.
     * What it registers is JSON text (sql/runtimes.c), read whole. A
     * handful of rows: no index but the key. */
    "CREATE TABLE runtimes("
    " runtime_id TEXT PRIMARY KEY,"
    " host TEXT NOT NULL,"
    " pid INTEGER NOT NULL,"
    " started_ms INTEGER NOT NULL,"
    " heartbeat_ms INTEGER NOT NULL,"
    " heartbeat_every_ms INTEGER NOT NULL,"
    " orchestrations TEXT NOT NULL,"
    " activities TEXT NOT NULL) WITHOUT ROWID;",
    /* 9: the instance's deadline (provider contract version 12), shown by
     * status; the DEADLINE message on the queue is what ends the instance
     * at it. Rows written before read 0, "none". */
    "ALTER TABLE instances"
    " ADD COLUMN deadline_ms INTEGER NOT NULL DEFAULT 0;",

    /* 10: schedules (provider contract version 13): a schedule's spec and
     * the state its fires are planned from, with a row version for the
     * compare-and-set of a plan; the due ones are read from a partial index
     * of due_ms (paused ones and those with no more fires are not in it);
     * and the fires log, the newest entries of each schedule. */
    "CREATE TABLE schedules("
    " id TEXT PRIMARY KEY NOT NULL,"
    " spec TEXT NOT NULL,"
    " spec_version INTEGER NOT NULL,"
    " row_version INTEGER NOT NULL,"
    " next_ms INTEGER NOT NULL,"
    " due_ms INTEGER,"
    " buffered_ms INTEGER NOT NULL,"
    " last_instance_id TEXT,"
    " paused INTEGER NOT NULL,"
    " note TEXT,"
    " fires INTEGER NOT NULL,"
    " skips INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL,"
    " updated_ms INTEGER NOT NULL);"
    "CREATE INDEX schedules_due ON schedules(due_ms)"
    " WHERE paused = 0 AND due_ms IS NOT NULL;"
    "CREATE TABLE schedule_fires("
    " seq INTEGER PRIMARY KEY,"
    " schedule_id TEXT NOT NULL,"
    " time_ms INTEGER NOT NULL,"
    " action INTEGER NOT NULL,"
    " count INTEGER NOT NULL,"
    " instance_id TEXT,"
    " why TEXT,"
    " recorded_ms INTEGER NOT NULL);"
    "CREATE INDEX schedule_fires_schedule ON schedule_fires(schedule_id, "
    "seq);"};

/* Runs SQL text that returns no rows, outside the statement cache (open and
 * migration only). */
static int exec_sql(duro__sqlite_conn *c, const char *sql, const char *op,
                    duro_error *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return duro__sqlite_error(c, rc, op, err);
    return DURO_OK;
}

/* What the file holds: whether duro_schema exists, how many other tables,
 * indexes, views and triggers it has (SQLite's own sqlite_* tables not
 * counted), and the recorded schema version (0 without duro_schema). Reads
 * only. */
typedef struct schema_state {
    int has_table;
    int64_t others;
    int64_t version;
} schema_state;

static int read_schema_state(duro__sqlite_conn *c, schema_state *st,
                             duro_error *err)
{
    static const char sql[] =
        "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
        "name = 'duro_schema'), (SELECT count(*) FROM sqlite_master WHERE "
        "name <> 'duro_schema' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\')";
    sqlite3_stmt *s = NULL;
    memset(st, 0, sizeof(*st));
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            st->has_table = sqlite3_column_int(s, 0) != 0;
            st->others = sqlite3_column_int64(s, 1);
            rc = SQLITE_OK;
        }
        sqlite3_finalize(s);
        s = NULL;
        if (rc == SQLITE_OK && st->has_table) {
            rc = sqlite3_prepare_v2(
                c->db, "SELECT IFNULL(MAX(version), 0) FROM duro_schema", -1,
                &s, NULL);
            if (rc == SQLITE_OK) {
                rc = sqlite3_step(s);
                if (rc == SQLITE_ROW) {
                    st->version = sqlite3_column_int64(s, 0);
                    rc = SQLITE_OK;
                }
            }
        }
    }
    if (rc != SQLITE_OK) {
        duro__sqlite_error(c, rc, "open: reading the schema version", err);
        sqlite3_finalize(s);
        return err != NULL ? err->code : DURO_STORAGE;
    }
    sqlite3_finalize(s);
    return DURO_OK;
}

/* A file that holds no duro store: under create=0 (or mode=ro) it is not
 * found, and nothing is written to it; under create=1 an empty file
 * becomes a store, but one holding another application's tables is
 * refused, not taken over (its journal mode would change too). */
static int check_is_store(const duro__sqlite_provider *p,
                          const schema_state *st, duro_error *err)
{
    if (st->has_table || p->cfg.memory)
        return DURO_OK; /* :memory: is always new */
    if (!p->cfg.create)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "database file %s is not a duro store (it has "
                              "no duro_schema table); nothing in it was "
                              "changed (the URL says %s)",
                              p->cfg.path,
                              p->cfg.read_only ? "mode=ro" : "create=0");
    if (st->others > 0)
        return duro_error_set(err, DURO_SCHEMA, 0,
                              "database file %s holds %lld other schema "
                              "object%s (tables, indexes, views or triggers) "
                              "but no duro_schema table: it is "
                              "another application's database, not a duro "
                              "store, and duro does not take it over; "
                              "nothing in it was changed (give duro a new "
                              "or empty file)",
                              p->cfg.path, (long long)st->others,
                              st->others == 1 ? "" : "s");
    return DURO_OK;
}

static int newer_schema(const duro__sqlite_provider *p, int64_t version,
                        duro_error *err)
{
    return duro_error_set(err, DURO_SCHEMA, 0,
                          "database %s has schema version %lld; this duro "
                          "knows versions up to %d (upgrade duro)",
                          p->cfg.path, (long long)version,
                          DURO__SQLITE_SCHEMA_VERSION);
}

/* Sets the writer's journal mode and synchronous level. Runs only after the
 * schema version check, so a database from a newer duro is left as it was.
 */
static int configure_writer(duro__sqlite_provider *p, duro__sqlite_conn *c,
                            duro_error *err)
{
    static const char *const sync_names[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
    if (!p->cfg.memory) {
        /* 2 KiB pages for a new database (an existing one keeps its own):
         * a turn dirties a page or two in each of several tables and
         * indexes, and every dirty page goes to the WAL whole, so smaller
         * pages roughly halve the bytes written per commit compared with
         * 4 KiB; rows of up to ~490 bytes still fit in a page. */
        int prc =
            exec_sql(c, "PRAGMA page_size = 2048", "open: page_size", err);
        if (prc != DURO_OK)
            return prc;
        /* The journal mode persists in the file; WAL lets the readers run
         * beside the one writer. */
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &s,
                                    NULL);
        /* Switching a new file (rollback mode) to WAL needs an exclusive
         * lock, and SQLite returns BUSY at once, without its busy handler,
         * when another process holds a lock then (several processes opening
         * one new file together). Retry within the busy timeout. */
        int64_t deadline =
            duro__add_ms(duro__mono_ms(), p->cfg.busy_timeout_ms);
        for (int64_t pause = 1; rc == SQLITE_OK;) {
            rc = sqlite3_step(s);
            if ((rc & 0xff) != SQLITE_BUSY || duro__mono_ms() >= deadline)
                break;
            sqlite3_reset(s);
            rc = SQLITE_OK;
            duro__sleep_ms(pause);
            pause = pause < 32 ? pause * 2 : 32;
        }
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(s, 0);
            if (mode == NULL || strcmp(mode, "wal") != 0) {
                duro_error_set(err, DURO_STORAGE, 0,
                               "sqlite open %s: cannot use WAL journal mode "
                               "(got %s)",
                               p->cfg.path, mode != NULL ? mode : "nothing");
                sqlite3_finalize(s);
                return DURO_STORAGE;
            }
            rc = SQLITE_OK;
        }
        if (rc != SQLITE_OK) {
            duro__sqlite_error(c, rc, "open: setting WAL journal mode", err);
            sqlite3_finalize(s);
            return err->code;
        }
        sqlite3_finalize(s);
    }
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA synchronous = %s",
             sync_names[p->cfg.synchronous]);
    return exec_sql(c, sql, "open: setting synchronous", err);
}

int duro__sqlite_migrate(duro__sqlite_provider *p, duro_error *err)
{
    duro__sqlite_conn *c = &p->writer;
    schema_state st;
    int rc = read_schema_state(c, &st, err);
    if (rc != DURO_OK)
        return rc;
    if (st.version > DURO__SQLITE_SCHEMA_VERSION)
        return newer_schema(p, st.version, err);
    /* Before anything is written, the journal mode included. */
    if ((rc = check_is_store(p, &st, err)) != DURO_OK)
        return rc;
    if (p->cfg.read_only) {
        if (st.version == DURO__SQLITE_SCHEMA_VERSION)
            return DURO_OK;
        return duro_error_set(err, DURO_SCHEMA, 0,
                              "database %s has schema version %lld, older "
                              "than this duro's %d, and mode=ro does not "
                              "migrate (open it once without mode=ro, as "
                              "a user who can write it: the application, "
                              "or duro start)",
                              p->cfg.path, (long long)st.version,
                              DURO__SQLITE_SCHEMA_VERSION);
    }
    if ((rc = duro__sqlite_check_wal_files(p, 1, err)) != DURO_OK ||
        (rc = configure_writer(p, c, err)) != DURO_OK)
        return rc;
    if (st.version == DURO__SQLITE_SCHEMA_VERSION)
        return DURO_OK;

    /* Re-read inside the write transaction: another process may have
     * migrated in between. */
    rc = exec_sql(c, "BEGIN IMMEDIATE", "open: migrating the schema", err);
    if (rc != DURO_OK)
        return rc;
    rc = read_schema_state(c, &st, err);
    int64_t version = st.version;
    if (rc == DURO_OK && version > DURO__SQLITE_SCHEMA_VERSION)
        rc = newer_schema(p, version, err);
    if (rc == DURO_OK)
        rc = check_is_store(p, &st, err);
    if (rc == DURO_OK && !st.has_table)
        rc = exec_sql(c,
                      "CREATE TABLE duro_schema(version INTEGER PRIMARY KEY,"
                      " applied_ms INTEGER NOT NULL)",
                      "open: creating the schema", err);
    for (int64_t v = version + 1;
         rc == DURO_OK && v <= DURO__SQLITE_SCHEMA_VERSION; v++) {
        rc = exec_sql(c, migrations[v - 1], "open: migrating the schema", err);
        if (rc == DURO_OK) {
            char sql[128];
            snprintf(sql, sizeof(sql),
                     "INSERT INTO duro_schema(version, applied_ms) "
                     "VALUES(%lld, %lld)",
                     (long long)v, (long long)duro__wall_ms());
            rc = exec_sql(c, sql, "open: recording the schema version", err);
        }
    }
    if (rc == DURO_OK)
        rc = exec_sql(c, "COMMIT", "open: migrating the schema", err);
    if (rc != DURO_OK && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- connections ------------------------------------------------------ */

int duro__sqlite_conn_open(duro__sqlite_provider *p, duro__sqlite_conn *c,
                           int readonly, duro_error *err)
{
    memset(c, 0, sizeof(*c));
    int flags = SQLITE_OPEN_NOMUTEX |
                (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
    if (!readonly && (p->cfg.create || p->cfg.memory))
        flags |= SQLITE_OPEN_CREATE;
    /* SQLite's own (default) VFS: no layer under SQLite may defer, reorder
     * or merge its writes; its durability reasoning depends on every write
     * reaching the OS when it is made. */
    int rc = sqlite3_open_v2(p->cfg.path, &c->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (c->db == NULL)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        /* create=0 (read-only tools): a missing file is "no such store",
         * told apart from a file that exists but cannot be opened. */
        struct stat st;
        if (!p->cfg.create && (rc & 0xff) == SQLITE_CANTOPEN &&
            stat(p->cfg.path, &st) != 0 && errno == ENOENT) {
            sqlite3_close(c->db);
            c->db = NULL;
            return duro_error_set(err, DURO_NOT_FOUND, 0,
                                  "database file %s does not exist (the URL "
                                  "says %s)",
                                  p->cfg.path,
                                  p->cfg.read_only ? "mode=ro" : "create=0");
        }
        duro_error_set(err, DURO_STORAGE, 0, "sqlite open %s: %s", p->cfg.path,
                       sqlite3_errmsg(c->db));
        sqlite3_close(c->db);
        c->db = NULL;
        return DURO_STORAGE;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, p->cfg.busy_timeout_ms);
    return DURO_OK;
}

void duro__sqlite_conn_close(duro__sqlite_conn *c)
{
    if (c->db == NULL)
        return;
    for (size_t i = 0; i < DURO__SQL_COUNT; i++) {
        sqlite3_finalize(c->stmts[i]);
        c->stmts[i] = NULL;
    }
    sqlite3_close(c->db);
    c->db = NULL;
}

/* ---- statements and errors -------------------------------------------- */

sqlite3_stmt *duro__sqlite_stmt(duro__sqlite_provider *p, duro__sqlite_conn *c,
                                duro__sqlite_stmt_id id, const char *op,
                                duro_error *err)
{
    sqlite3_stmt *s = c->stmts[id];
    if (s == NULL && statement_sql[id] == NULL) {
        duro_error_set(err, DURO_UNSUPPORTED, 0,
                       "sqlite %s: no statement %s in this dialect", op,
                       duro__sql_statement_id_name(id));
        return NULL;
    }
    if (s == NULL) {
        int rc = sqlite3_prepare_v3(c->db, statement_sql[id], -1,
                                    SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK) {
            duro__sqlite_error(c, rc, op, err);
            return NULL;
        }
        c->stmts[id] = s;
        atomic_fetch_add(&p->sql.statements_prepared, 1);
    } else {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    c->used[id / 64] |= (uint64_t)1 << (id % 64);
    c->bind_rc = SQLITE_OK;
    return s;
}

int duro__sqlite_step(duro__sqlite_provider *p, duro__sqlite_conn *c,
                      sqlite3_stmt *s)
{
    if (c->bind_rc != SQLITE_OK) {
        int rc = c->bind_rc;
        c->bind_rc = SQLITE_OK;
        return rc;
    }
    int fault = duro__sql_fault_due(&p->sql, NULL);
    if (fault != 0) {
        c->injected_rc = fault == 1 ? SQLITE_BUSY : SQLITE_IOERR;
        return c->injected_rc;
    }
    return sqlite3_step(s);
}

int duro__sqlite_run(duro__sqlite_provider *p, duro__sqlite_conn *c,
                     sqlite3_stmt *s, const char *op, duro_error *err)
{
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    return DURO_OK;
}

int duro__sqlite_error(duro__sqlite_conn *c, int rc, const char *op,
                       duro_error *err)
{
    int primary = rc & 0xff;
    const char *detail;
    if (c->injected_rc != 0 && c->injected_rc == rc) {
        detail = "injected fault";
        c->injected_rc = 0;
    } else if (c->db != NULL && sqlite3_extended_errcode(c->db) == rc) {
        detail = sqlite3_errmsg(c->db);
    } else {
        detail = sqlite3_errstr(rc);
    }
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
        return duro_error_set(err, DURO_BUSY, 1, "sqlite %s: %s (%s)", op,
                              detail, sqlite3_errstr(rc));
    if (primary == SQLITE_NOMEM)
        return duro_error_set(err, DURO_NOMEM, 0, "sqlite %s: %s", op, detail);
    if (primary == SQLITE_FULL && c->db != NULL) {
        /* What it means and that it passes, for the operator who reads it
         * in a log (docs/sqlite-provider.md, "A full disk") */
        const char *file = sqlite3_db_filename(c->db, "main");
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s: %s (code %d): the file system of "
                              "%s has no room left; the failed call changed "
                              "nothing, and the store works again once "
                              "space is freed",
                              op, detail, rc,
                              file != NULL && file[0] != '\0' ? file
                                                              : "the store");
    }
    return duro_error_set(err, DURO_STORAGE, 0, "sqlite %s: %s (%s, code %d)",
                          op, detail, sqlite3_errstr(rc), rc);
}

void duro__sqlite_bind_text(duro__sqlite_conn *c, sqlite3_stmt *s, int i,
                            const char *v)
{
    int rc = v != NULL ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC)
                       : sqlite3_bind_null(s, i);
    if (rc != SQLITE_OK && c->bind_rc == SQLITE_OK)
        c->bind_rc = rc;
}

void duro__sqlite_bind_i64(duro__sqlite_conn *c, sqlite3_stmt *s, int i,
                           int64_t v)
{
    int rc = sqlite3_bind_int64(s, i, v);
    if (rc != SQLITE_OK && c->bind_rc == SQLITE_OK)
        c->bind_rc = rc;
}

int duro__sqlite_column_text(duro_arena *a, sqlite3_stmt *s, int col,
                             const char **out)
{
    const unsigned char *text = sqlite3_column_text(s, col);
    if (text == NULL) {
        *out = NULL;
        return sqlite3_column_type(s, col) == SQLITE_NULL ? 0 : -1;
    }
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    char *copy = duro_arena_alloc(a, n + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, text, n);
    copy[n] = '\0';
    *out = copy;
    return 0;
}

/* Resets every statement used since the last release, so none holds a read
 * snapshot or a borrowed binding past the call. */
static void reset_used(duro__sqlite_conn *c)
{
    for (size_t w = 0; w < DURO__ARRAY_LEN(c->used); w++) {
        uint64_t bits = c->used[w];
        while (bits != 0) {
            int b = __builtin_ctzll(bits);
            bits &= bits - 1;
            sqlite3_reset(c->stmts[w * 64 + (size_t)b]);
        }
        c->used[w] = 0;
    }
    c->bind_rc = SQLITE_OK;
    c->injected_rc = 0;
}

/* Ends the connection's transaction, if any. Not counted by the fault hook:
 * a rollback must always run. */
static void rollback(duro__sqlite_provider *p, duro__sqlite_conn *c)
{
    reset_used(c);
    if (sqlite3_get_autocommit(c->db))
        return;
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_ROLLBACK, "rollback", NULL);
    if (s != NULL)
        sqlite3_step(s);
    reset_used(c);
    if (!sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* ---- transactions ----------------------------------------------------- */

/* Runs BEGIN IMMEDIATE on the writer, whose write_lock the caller holds. */
static int write_begin_locked(duro__sqlite_provider *p, const char *op,
                              duro__sqlite_conn **out, duro_error *err)
{
    duro__sqlite_conn *c = &p->writer;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_BEGIN_WRITE, op, err);
    int rc = s != NULL ? duro__sqlite_run(p, c, s, op, err) : err->code;
    if (rc != DURO_OK) {
        rollback(p, c);
        pthread_mutex_unlock(&p->write_lock);
        return rc;
    }
    *out = c;
    return DURO_OK;
}

/* mode=ro: every write is refused before it reaches SQLite, with the
 * reason, instead of SQLite's "attempt to write a readonly database". */
static int refuse_read_only(const duro__sqlite_provider *p, const char *op,
                            duro_error *err)
{
    return duro_error_set(err, DURO_STORAGE, 0,
                          "sqlite %s: %s was opened read-only (mode=ro)", op,
                          p->cfg.path);
}

int duro__sqlite_write_begin(duro__sqlite_provider *p, const char *op,
                             duro__sqlite_conn **out, duro_error *err)
{
    if (p->cfg.read_only)
        return refuse_read_only(p, op, err);
    /* Urgent writes go first (one atomic load when there are none). */
    if (atomic_load(&p->urgent_writers) > 0) {
        pthread_mutex_lock(&p->urgent_lock);
        while (atomic_load(&p->urgent_writers) > 0)
            pthread_cond_wait(&p->urgent_cond, &p->urgent_lock);
        pthread_mutex_unlock(&p->urgent_lock);
    }
    pthread_mutex_lock(&p->write_lock);
    /* A WAL past its cap: the checkpoint first (one atomic load when it is
     * not). Checked under write_lock, so of the writers waiting for it
     * only the one whose commit crossed the cap got past; a few tries at
     * most (each ends by starting the WAL over or by finding it held
     * back). Urgent writes (renewals, a few frames each) do not wait. */
    for (int tries = 0;
         tries < 3 && p->has_checkpointer &&
         atomic_load(&p->wal_frames) >= 2 * p->checkpoint_frames &&
         atomic_load(&p->sweeps) == 0 && !atomic_load(&p->checkpoint_held_back);
         tries++) {
        pthread_mutex_unlock(&p->write_lock);
        duro__sqlite_checkpoint_behind(p);
        pthread_mutex_lock(&p->write_lock);
    }
    return write_begin_locked(p, op, out, err);
}

int duro__sqlite_write_begin_urgent(duro__sqlite_provider *p, const char *op,
                                    duro__sqlite_conn **out, duro_error *err)
{
    if (p->cfg.read_only)
        return refuse_read_only(p, op, err);
    atomic_fetch_add(&p->urgent_writers, 1);
    pthread_mutex_lock(&p->write_lock);
    if (atomic_fetch_sub(&p->urgent_writers, 1) == 1) {
        pthread_mutex_lock(&p->urgent_lock);
        pthread_cond_broadcast(&p->urgent_cond);
        pthread_mutex_unlock(&p->urgent_lock);
    }
    return write_begin_locked(p, op, out, err);
}

/* write_commit without the checkpoint after it. */
static int commit_unlock(duro__sqlite_provider *p, duro__sqlite_conn *c,
                         const char *op, duro_error *err)
{
    /* Reset every statement first: a statement still holding a row would
     * keep the transaction from committing cleanly. */
    for (size_t w = 0; w < DURO__ARRAY_LEN(c->used); w++) {
        uint64_t bits = c->used[w];
        while (bits != 0) {
            int b = __builtin_ctzll(bits);
            bits &= bits - 1;
            sqlite3_reset(c->stmts[w * 64 + (size_t)b]);
        }
    }
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_COMMIT, op, err);
    int rc = s != NULL ? duro__sqlite_run(p, c, s, op, err) : err->code;
    if (rc != DURO_OK) {
        rollback(p, c);
        pthread_mutex_unlock(&p->write_lock);
        return rc;
    }
    reset_used(c);
    pthread_mutex_unlock(&p->write_lock);
    return DURO_OK;
}

int duro__sqlite_write_commit(duro__sqlite_provider *p, duro__sqlite_conn *c,
                              const char *op, duro_error *err)
{
    int rc = commit_unlock(p, c, op, err);
    if (rc == DURO_OK)
        duro__sqlite_checkpoint(p);
    return rc;
}

/* ---- group commit -------------------------------------------------------
 * Worker slots ack their activities (and fetch the next) from many threads
 * at once, each ack a few rows; alone, each is a transaction of its own,
 * and a commit writes every page the transaction dirtied to the WAL whole:
 * a single ack wrote ~9 pages, acks in one transaction share most of
 * theirs (the queues' last pages, the indexes' hot pages). The writer is
 * serialized by write_lock anyway, so the writes that queue while one
 * thread waits for it go in with that thread's. Every write keeps its own
 * outcome, and each is as durable as before: its caller learns it only
 * after the COMMIT that carried it. */

#define GROUP_MAX 64 /* writes per shared transaction */
/* A leader whose last shared transaction carried company waits up to this
 * long for as many writes to queue before it takes write_lock (below). */
#define GROUP_LINGER_NS 100000

/* Runs g alone in a transaction of its own, on the caller's thread: a
 * write whose shared transaction failed (another write of it broke it). */
static int group_alone(duro__sqlite_provider *p, const char *op,
                       duro__sqlite_grouped *g)
{
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, g->err);
    if (rc != DURO_OK)
        return rc;
    int clean = 0;
    rc = g->run(p, c, g, &clean, g->err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        if (g->undo != NULL)
            g->undo(g);
        return rc;
    }
    rc = duro__sqlite_write_commit(p, c, op, g->err);
    if (rc != DURO_OK && g->undo != NULL)
        g->undo(g);
    return rc;
}

/* Ends a leader's turn: wakes the first write queued meanwhile, which
 * leads next. Under group_lock. */
static void group_hand_over(duro__sqlite_provider *p)
{
    p->group_leading = 0;
    duro__sqlite_grouped *head = p->group_head;
    if (head != NULL) {
        /* Not taken, so nobody sets it done meanwhile: group_lock held */
        atomic_store_explicit(&head->state, DURO__GROUP_MAY_LEAD,
                              memory_order_release);
        duro__wake_one(&head->state);
    }
}

/* Moves the writes queued (up to GROUP_MAX in all) into batch after its n
 * first; returns the new count, *urgent set when an urgent one was taken.
 * Under group_lock. */
static size_t group_take(duro__sqlite_provider *p, duro__sqlite_grouped **batch,
                         size_t n, int *urgent)
{
    size_t was = n;
    while (p->group_head != NULL && n < GROUP_MAX) {
        batch[n] = p->group_head;
        batch[n]->taken = 1;
        if (batch[n++]->urgent) {
            atomic_fetch_sub(&p->group_urgent, 1);
            *urgent = 1;
        }
        p->group_head = p->group_head->link;
    }
    p->group_queued -= (int)(n - was);
    p->group_last = (int)n;
    if (p->group_head == NULL)
        p->group_tail = NULL;
    return n;
}

/* Leads one shared transaction: self's write, every write queued by the
 * time write_lock is held, and those queued while they run. Called with
 * group_leading set by this thread, without group_lock. */
static void group_lead(duro__sqlite_provider *p, const char *op,
                       duro__sqlite_grouped *self)
{
    duro__sqlite_conn *c;
    duro_error begin_err;
    int rc = duro__sqlite_write_begin(p, op, &c, &begin_err);
    duro__sqlite_grouped *batch[GROUP_MAX];
    size_t n = 0;
    pthread_mutex_lock(&p->group_lock);
    if (rc != DURO_OK) {
        /* Only this write was tried: it fails, the others stay queued. */
        duro__sqlite_grouped **at = &p->group_head, *prev = NULL;
        while (*at != self) {
            prev = *at;
            at = &(*at)->link;
        }
        *at = self->link;
        if (p->group_tail == self)
            p->group_tail = prev;
        p->group_queued--;
        if (self->urgent)
            atomic_fetch_sub(&p->group_urgent, 1);
        self->rc = rc;
        *self->err = begin_err;
        atomic_store_explicit(&self->state, DURO__GROUP_DONE,
                              memory_order_relaxed); /* this thread's */
        group_hand_over(p);
        pthread_mutex_unlock(&p->group_lock);
        return;
    }
    int urgent = 0; /* an urgent write commits without the late ones */
    n = group_take(p, batch, n, &urgent);
    pthread_mutex_unlock(&p->group_lock);

    /* Run them in order; one that fails cleanly drops out alone. Writes
     * queued while these ran join before the COMMIT (unless one of these
     * is urgent): the writer does not sit idle while they wait for the next
     * transaction. */
    size_t ran = 0, written = 0;
    int broken = 0; /* a write failed and may have changed something */
    for (;;) {
        for (; ran < n && !broken; ran++) {
            int clean = 0;
            duro__sqlite_grouped *g = batch[ran];
            g->rc = g->run(p, c, g, &clean, g->err);
            if (g->rc == DURO_OK)
                written++;
            else if (!clean)
                broken = 1;
        }
        if (broken || n == GROUP_MAX || urgent)
            break;
        pthread_mutex_lock(&p->group_lock);
        size_t was = n;
        n = group_take(p, batch, n, &urgent);
        pthread_mutex_unlock(&p->group_lock);
        if (n == was)
            break;
    }
    int committed = 0;
    if (broken || written == 0) {
        duro__sqlite_write_rollback(p, c);
    } else {
        duro_error commit_err;
        rc = commit_unlock(p, c, op, &commit_err);
        committed = rc == DURO_OK;
        for (size_t i = 0; !committed && i < n; i++)
            if (batch[i]->rc == DURO_OK) {
                batch[i]->rc = rc;
                *batch[i]->err = commit_err;
            }
    }
    for (size_t i = 0; !committed && i < ran; i++)
        if (batch[i]->undo != NULL)
            batch[i]->undo(batch[i]);
    if (committed) {
        atomic_fetch_add(&p->group_transactions, 1);
        atomic_fetch_add(&p->group_writes, written);
    }

    /* The lead goes on first, and group_lock is free before the writes
     * hear their outcome: each woken writer once ran into group_lock,
     * still held while the rest were woken, and the next leader waited for
     * all of them (two more context switches a write on two cores). */
    pthread_mutex_lock(&p->group_lock);
    group_hand_over(p);
    pthread_mutex_unlock(&p->group_lock);
    for (size_t i = 0; i < n; i++) {
        /* One write alone keeps its failure; with company, a failure that
         * broke the transaction is tried again by each, alone. */
        duro__sqlite_grouped *g = batch[i];
        g->alone = broken && n > 1;
        if (g == self) {
            atomic_store_explicit(&g->state, DURO__GROUP_DONE,
                                  memory_order_relaxed);
            continue;
        }
        /* g's thread may return as soon as it sees DONE, and g (on its
         * stack) is gone: nothing of g is touched after the store but the
         * wake of its address (harmless, duro__wake_one) */
        atomic_store_explicit(&g->state, DURO__GROUP_DONE,
                              memory_order_release);
        duro__wake_one(&g->state);
    }
    if (committed)
        duro__sqlite_checkpoint(p);
}

/* A new leader whose last shared transaction carried `company` writes
 * (more than one: threads are writing side by side) gives them the time to
 * queue theirs, up to GROUP_LINGER_NS, before it takes write_lock: the
 * writes of other threads a moment behind (a worker slot back from a
 * short activity, a turn thread finishing its batch) then share its
 * commit instead of each paying a commit of their own right after, which
 * on this write path costs far more than the wait (a commit writes every
 * page it dirtied, ~4 us each; the queues' hot pages are shared). It
 * yields the CPU meanwhile, which those threads may be waiting for. A
 * write of a thread alone (the last transaction carried only one write)
 * never waits: PostgreSQL's commit_delay and commit_siblings, by the
 * writes just seen. Nor while an urgent write is queued: a cancellation
 * reaches its activity no later for the company. */
static void group_linger(duro__sqlite_provider *p, int company)
{
    duro__sql_linger(&p->group_queued, &p->group_urgent, company,
                     GROUP_LINGER_NS);
}

int duro__sqlite_write_grouped(duro__sqlite_provider *p, const char *op,
                               duro__sqlite_grouped *g)
{
    if (p->cfg.read_only)
        return refuse_read_only(p, op, g->err);
    g->rc = DURO_OK;
    atomic_init(&g->state, DURO__GROUP_WAITING);
    g->alone = 0;
    g->taken = 0;
    g->link = NULL;
    pthread_mutex_lock(&p->group_lock);
    if (p->group_tail != NULL)
        p->group_tail->link = g;
    else
        p->group_head = g;
    p->group_tail = g;
    p->group_queued++;
    if (g->urgent)
        atomic_fetch_add(&p->group_urgent, 1);
    for (;;) {
        if (!g->taken && !p->group_leading) {
            p->group_leading = 1;
            int company = p->group_last;
            pthread_mutex_unlock(&p->group_lock);
            group_linger(p, company);
            group_lead(p, op, g);
            if (atomic_load_explicit(&g->state, memory_order_relaxed) ==
                DURO__GROUP_DONE) /* this thread's own write: set by it */
                break;
            pthread_mutex_lock(&p->group_lock);
            continue;
        }
        pthread_mutex_unlock(&p->group_lock);
        int state;
        while ((state = atomic_load_explicit(
                    &g->state, memory_order_acquire)) == DURO__GROUP_WAITING)
            duro__wake_wait(&g->state, DURO__GROUP_WAITING);
        /* handed the lead: back to waiting, unless a leader took the write
         * and set it done in between (then the CAS fails: done) */
        if (state == DURO__GROUP_DONE ||
            !atomic_compare_exchange_strong_explicit(
                &g->state, &state, DURO__GROUP_WAITING, memory_order_acquire,
                memory_order_acquire))
            break;
        pthread_mutex_lock(&p->group_lock);
    }
    if (g->alone)
        return group_alone(p, op, g);
    return g->rc;
}

/* ---- checkpoints ------------------------------------------------------
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses the
 * threshold, holding the write lock for as long as it copies pages back and
 * syncs (~17 ms every few thousand commits: a fifth of the writer's time
 * under load). A checkpoint does not need the write lock, so it runs here,
 * after the commit, on its own connection, while other threads write.
 *
 * The WAL must also stay small: it is disk space the store takes beside the
 * database, and a checkpoint grows the database by what it copies. It
 * starts over (is rewritten from its first frame) only at a write that
 * finds every frame copied back and no reader on it; under a load that
 * never pauses, a checkpoint that runs beside the writers never finds that,
 * so the WAL would grow for ever. Hence the policy below: every
 * cfg.checkpoint_pages new frames a PASSIVE checkpoint, and when commits
 * went on while it ran, a RESTART under write_lock to copy the rest and
 * make the next write start the WAL over. journal_size_limit then cuts the
 * file back at that write, so space a sweep or a large transaction took is
 * given back. */

/* How long a RESTART checkpoint waits for the writer and for readers of
 * older snapshots (its connection's busy timeout). While it waits, SQLite
 * holds every new writer back, in every process: it must not wait long. A
 * reader it cannot outwait (a bulk sweep of another provider or process
 * holds its snapshot across batches; a long read elsewhere) makes it give
 * up after this, having copied what it could; a later one catches up. */
#define CHECKPOINT_WAIT_MS 100

/* Frames committed during a PASSIVE checkpoint that a RESTART may copy
 * while every writer waits; past them, another PASSIVE copies first. */
#define TAIL_FRAMES 256

static int wal_hook(void *arg, sqlite3 *db, const char *schema, int frames)
{
    (void)db;
    (void)schema;
    duro__sqlite_provider *p = arg;
    atomic_store(&p->wal_frames, frames);
    return SQLITE_OK;
}

int duro__sqlite_checkpoint_setup(duro__sqlite_provider *p, duro_error *err)
{
    /* The checkpoint connection must have read the database once to know
     * it is in WAL mode; it syncs like the writer. */
    static const char *const sync_names[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
    char sql[96];
    snprintf(sql, sizeof(sql),
             "PRAGMA synchronous = %s; SELECT count(*) FROM sqlite_master",
             sync_names[p->cfg.synchronous]);
    int rc =
        exec_sql(&p->checkpointer, sql, "open: checkpoint connection", err);
    if (rc != DURO_OK)
        return rc;
    sqlite3_busy_timeout(p->checkpointer.db, CHECKPOINT_WAIT_MS);
    p->checkpoint_frames = p->cfg.checkpoint_pages;
    /* The writer's first commit after the WAL started over truncates the
     * file to this size (when it is larger): what a checkpoint interval
     * fills, twice over. Per connection, and only the writer writes WAL
     * frames. (A file of 4 KiB pages made by an older duro keeps them.) */
    int64_t page_size = 0;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(p->writer.db, "PRAGMA page_size", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        page_size = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (page_size <= 0)
        page_size = 4096;
    snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %lld",
             (long long)duro__sqlite_wal_limit_bytes(p->cfg.checkpoint_pages,
                                                     page_size));
    rc = exec_sql(&p->writer, sql, "open: journal_size_limit", err);
    if (rc != DURO_OK)
        return rc;
    sqlite3_wal_hook(p->writer.db, wal_hook, p);
    return DURO_OK;
}

int64_t duro__sqlite_wal_limit_bytes(int checkpoint_pages, int64_t page_size)
{
    /* a WAL header of 32 bytes, then frames of a 24-byte header and a page */
    return 32 + 2 * (int64_t)checkpoint_pages * (24 + page_size);
}

/* Runs a checkpoint when the WAL holds checkpoint_frames frames more than
 * the last one copied, the WAL having `frames` frames after the last
 * commit; with `behind`, when it holds twice the interval at all, and then
 * it ends with a RESTART. The caller holds checkpoint_lock. */
static void checkpoint_locked(duro__sqlite_provider *p, int frames, int behind)
{
    int every = p->checkpoint_frames;
    if (frames < p->checkpointed)
        p->checkpointed = 0; /* the WAL was rewound since */
    behind = behind && frames >= 2 * every;
    if (frames - p->checkpointed < every && !behind)
        return;
    /* PASSIVE copies what it can without waiting for anyone. When it copied
     * everything and nothing was committed meanwhile, the next write starts
     * the WAL over by itself. Otherwise (commits went on while it copied,
     * as under a load that never pauses) RESTART copies the rest, waits (at
     * most CHECKPOINT_WAIT_MS) for the readers still on the WAL and lets the
     * next write start it over. While it waits, every new writer waits too,
     * so it is not tried when it cannot succeed: while a sweep of this
     * provider holds its snapshot, within a second of one that gave up,
     * and - unless writers wait past the cap - when PASSIVE copied nothing
     * new and not everything (a reader holds an old snapshot: a bulk sweep
     * of another provider or process between two of its batches, a long
     * read elsewhere; or a short read that the RESTART of a writer past
     * the cap then outwaits). The WAL then grows until the reader is gone;
     * the next checkpoint catches up, and journal_size_limit gives the
     * space back when the WAL starts over. */
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(p->checkpointer.db, NULL,
                                       SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    int64_t now = duro__mono_ms();
    int moving = done == log || done > p->checkpointed;
    /* (a transaction of this provider may be under way unseen: then the
     * WAL does not start over, and the next checkpoint or a writer past
     * the cap, which always ends with RESTART, catches up) */
    int caught_up =
        !behind && done == log && atomic_load(&p->wal_frames) <= log;
    int restart = rc == SQLITE_OK && (moving || behind) && !caught_up &&
                  atomic_load(&p->sweeps) == 0 && now >= p->restart_after_ms;
    /* RESTART holds every writer back while it copies what was committed
     * since the PASSIVE began (under a steady load as much as PASSIVE took
     * time to copy: several milliseconds of commits) and syncs. A second
     * and third PASSIVE copy that tail while the writers go on, so that
     * RESTART is left the few frames committed during the last one. Not
     * for a writer past the cap: the others wait for it, nothing is
     * committed meanwhile. */
    for (int pass = 0; restart && !behind && pass < 2 &&
                       atomic_load(&p->wal_frames) - done > TAIL_FRAMES;
         pass++) {
        int before = done;
        rc = sqlite3_wal_checkpoint_v2(p->checkpointer.db, NULL,
                                       SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        if (rc != SQLITE_OK || done <= before)
            break; /* a reader holds the rest back: RESTART waits for it */
    }
    restart = restart && rc == SQLITE_OK;
    if (restart) {
        /* Under write_lock: this provider's writers would wait anyway, and
         * RESTART need not win SQLite's write lock from them (its busy
         * handler polls, and a writer that never pauses would keep taking
         * the lock back). */
        pthread_mutex_lock(&p->write_lock);
        rc = sqlite3_wal_checkpoint_v2(p->checkpointer.db, NULL,
                                       SQLITE_CHECKPOINT_RESTART, &log, &done);
        /* Every frame is copied and no reader is on the WAL: the next
         * write starts it over (no commit of this provider comes between,
         * it waits for write_lock; another process's commit would set the
         * count again through the hook of our next commit). */
        if (rc == SQLITE_OK)
            atomic_store(&p->wal_frames, 0);
        pthread_mutex_unlock(&p->write_lock);
        if (rc == SQLITE_BUSY)
            p->restart_after_ms = now + 1000;
    }
    /* Writers past the cap wait only for a checkpoint that can catch up:
     * not within a second of a RESTART that a reader made give up, nor
     * while checkpoints fail (a full disk: the database cannot grow). */
    atomic_store(&p->checkpoint_held_back,
                 (rc != SQLITE_OK && rc != SQLITE_BUSY) ||
                     now < p->restart_after_ms);
    if (rc == SQLITE_OK || rc == SQLITE_BUSY)
        p->checkpointed = done > 0 ? done : p->checkpointed;
    atomic_fetch_add(&p->checkpoints, 1);
}

void duro__sqlite_checkpoint(duro__sqlite_provider *p)
{
    if (!p->has_checkpointer)
        return;
    int frames = atomic_load(&p->wal_frames);
    if (frames < p->checkpoint_frames ||
        pthread_mutex_trylock(&p->checkpoint_lock) != 0)
        return;
    checkpoint_locked(p, frames, 0);
    pthread_mutex_unlock(&p->checkpoint_lock);
}

void duro__sqlite_checkpoint_behind(duro__sqlite_provider *p)
{
    /* Past twice the interval the checkpoints have fallen behind the
     * writers (a checkpoint's copies and syncs are slower than commits that
     * wait for no disk, at synchronous=normal): a writer waits for the one
     * running, or runs one, before it writes. Writes are serialized by
     * write_lock, so the WAL passes the cap by at most the transaction that
     * crossed it (per provider: each knows the WAL's size from its own last
     * commit) and the renewals that skip this. Not when the checkpoint
     * cannot catch up (a reader held the WAL back for longer than a RESTART
     * waits, or checkpoints fail): writers would wait for nothing. */
    if (atomic_load(&p->sweeps) > 0 || atomic_load(&p->checkpoint_held_back))
        return;
    pthread_mutex_lock(&p->checkpoint_lock);
    checkpoint_locked(p, atomic_load(&p->wal_frames), 1);
    pthread_mutex_unlock(&p->checkpoint_lock);
}

void duro__sqlite_write_rollback(duro__sqlite_provider *p, duro__sqlite_conn *c)
{
    rollback(p, c);
    pthread_mutex_unlock(&p->write_lock);
}

duro__sqlite_conn *duro__sqlite_reader_acquire(duro__sqlite_provider *p)
{
    if (p->reader_count == 0) {
        pthread_mutex_lock(&p->write_lock);
        return &p->writer;
    }
    return duro__sql_pool_take(&p->sql.pool);
}

void duro__sqlite_reader_release(duro__sqlite_provider *p, duro__sqlite_conn *c)
{
    rollback(p, c);
    if (c == &p->writer) {
        pthread_mutex_unlock(&p->write_lock);
        return;
    }
    duro__sql_pool_give(&p->sql.pool, c);
}
