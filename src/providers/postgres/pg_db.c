/* pg_db.c - the PostgreSQL provider's plumbing: the statement table,
 * connections and their pool, the schema and its migrations, running
 * statements through the fault hook, mapping PostgreSQL errors, and write
 * transactions. Thread-safe: a connection is used by the one thread that
 * took it from the pool. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"

/* What every connection sets first: the schema; no notices below warning;
 * and random_page_cost 1.1 (PostgreSQL's advice for SSDs and cached data,
 * against the default 4 for spinning disks). duro's statements read a
 * handful of rows by key from tables that stay small and hot (the queues):
 * at 4 the planner prefers scanning such a table whole to probing its
 * index - a batch claim took 2.5 ms scanning 1,000 queued instances instead
 * of 1 ms probing (test a_batch_claim_probes_indexes_among_many_instances,
 * which plans it with these settings among 1,000 ready instances). */
#define SESSION_SQL                                                            \
    "SET search_path TO \"%s\"; SET client_min_messages TO warning; "          \
    "SET random_page_cost TO 1.1"
#define SESSION_SQL_MAX 512

/* SESSION_SQL for p's schema, then the session timeouts its URL leaves to
 * duro (pg_url.c: lock_timeout, idle_in_transaction_session_timeout, and
 * statement_timeout when the URL sets it), into out[SESSION_SQL_MAX]. */
static void session_sql(const duro__pg_provider *p, char *out)
{
    /* The schema name was validated as an identifier; quoted anyway. */
    int n = snprintf(out, SESSION_SQL_MAX, SESSION_SQL, p->cfg.schema);
    for (int i = 0; i < DURO__PG_TIMEOUTS && n > 0 && n < SESSION_SQL_MAX; i++)
        if (p->cfg.session_timeouts[i] >= 0)
            n += snprintf(out + n, (size_t)(SESSION_SQL_MAX - n),
                          "; SET %s TO %lld", duro__pg_timeout_names[i],
                          (long long)p->cfg.session_timeouts[i]);
}

/* By id (statements.h): NULL for the ids this dialect has no text for. */
const char *const duro__pg_statement_texts[DURO__SQL_COUNT] = {
#define DURO__X(id, sql) [DURO__SQL_##id] = sql,
    DURO__PG_STATEMENTS(DURO__X)
#undef DURO__X
};
#define statement_sql duro__pg_statement_texts

int duro__pg_has_statement(duro__sql_stmt_id id)
{
    return id < DURO__SQL_COUNT && statement_sql[id] != NULL;
}

/* Parameters of each statement: the highest $n in its SQL, counted once. */
static int statement_params[DURO__SQL_COUNT];
static pthread_once_t params_once = PTHREAD_ONCE_INIT;
/* 1 for a statement that changes rows (the commit-loss hook counts one run
 * alone as a commit), set with statement_params. */
static unsigned char statement_writes[DURO__SQL_COUNT];
/* 1 for a statement that is planned at each run with its parameters'
 * values (PQexecParams: libpq's unnamed statement), never prepared: the
 * operators' queries (QUERY_*, CONTROL_EVENTS), whose filters are each on
 * or off. A generic plan cannot tell a filter that is off ($5 IS NULL)
 * from one that is on: it takes the matches for a handful and sorts the
 * whole range it reads (a name's 10,000 instances, for a page of 100);
 * planned with the values, a filter that is off is gone, and the page is
 * read in its order, a page long (test
 * query_pages_read_a_page_of_100000_instances). Planning costs about a
 * millisecond, which an operator's read affords; every other statement
 * stays prepared. Set with statement_params. */
static unsigned char statement_per_call[DURO__SQL_COUNT];
/* The parameter types of every statement: text (every use casts). */
static Oid text_types[DURO__PG_PARAM_MAX];

/* INSERT, DELETE or UPDATE, not counting the row locks of claims (FOR
 * UPDATE, FOR NO KEY UPDATE). */
static int sql_writes(const char *sql)
{
    if (strstr(sql, "INSERT ") != NULL || strstr(sql, "DELETE ") != NULL)
        return 1;
    for (const char *u = strstr(sql, "UPDATE "); u != NULL;
         u = strstr(u + 1, "UPDATE "))
        if (u - sql < 4 ||
            (strncmp(u - 4, "FOR ", 4) != 0 && strncmp(u - 4, "KEY ", 4) != 0))
            return 1;
    return 0;
}

static void count_params(void)
{
    for (int i = 0; i < DURO__PG_PARAM_MAX; i++)
        text_types[i] = 25;
    for (size_t i = 0; i < DURO__SQL_COUNT; i++) {
        if (statement_sql[i] == NULL)
            continue;
        int most = 0;
        for (const char *s = statement_sql[i]; *s; s++) {
            if (*s != '$' || s[1] < '0' || s[1] > '9')
                continue;
            int n = (int)strtol(s + 1, NULL, 10);
            most = n > most ? n : most;
        }
        statement_params[i] = most;
        statement_writes[i] = (unsigned char)sql_writes(statement_sql[i]);
        statement_per_call[i] =
            strncmp(duro__sql_statement_id_name(i), "QUERY_", 6) == 0 ||
            strcmp(duro__sql_statement_id_name(i), "CONTROL_EVENTS") == 0;
    }
}

/* ---- schema ----------------------------------------------------------- */

/* Migration n brings a schema from version n - 1 to n. Append only; never
 * edit a migration that has shipped. Ids, names and versions are compared
 * bytewise (COLLATE "C"), as SQLite does: id order and name order are the
 * same in both providers, whatever the database's locale. */
static const char *const migrations[DURO__PG_SCHEMA_VERSION] = {
    /* 1: the initial schema (SQLite's version 3). */
    "CREATE TABLE instances("
    " instance_id text COLLATE \"C\" PRIMARY KEY,"
    " name text COLLATE \"C\" NOT NULL,"
    " version text COLLATE \"C\","
    " status int NOT NULL,"
    " execution_id bigint NOT NULL DEFAULT 0,"
    " created_ms bigint NOT NULL,"
    " updated_ms bigint NOT NULL,"
    " output text,"
    " error text,"
    " category int NOT NULL DEFAULT 0,"
    " custom_status text,"
    " parent_instance text COLLATE \"C\","
    " parent_execution bigint NOT NULL DEFAULT 0,"
    " parent_event_id bigint NOT NULL DEFAULT 0,"
    " cancel_requested_ms bigint,"
    " cancel_reason text,"
    " cancelled_by text,"
    " finished_ms bigint,"
    " last_problem text,"
    " last_problem_ms bigint,"
    " next_attempt_ms bigint);"
    "CREATE INDEX instances_parent ON instances(parent_instance);"
    "CREATE INDEX instances_status ON instances(status, instance_id);"
    "CREATE INDEX instances_name ON instances(name, instance_id);"
    "CREATE INDEX instances_finished ON instances(status, finished_ms)"
    " WHERE finished_ms IS NOT NULL;"
    "CREATE INDEX instances_name_status ON instances(name, status);"
    "CREATE INDEX instances_problem ON instances(name, status)"
    " WHERE last_problem IS NOT NULL;"
    "CREATE TABLE executions("
    " instance_id text COLLATE \"C\" NOT NULL,"
    " execution_id bigint NOT NULL,"
    " status int NOT NULL,"
    " name text COLLATE \"C\","
    " version text COLLATE \"C\","
    " started_ms bigint NOT NULL,"
    " completed_ms bigint,"
    " output text,"
    " error text,"
    " category int NOT NULL DEFAULT 0,"
    " PRIMARY KEY(instance_id, execution_id));"
    "CREATE TABLE history("
    " instance_id text COLLATE \"C\" NOT NULL,"
    " execution_id bigint NOT NULL,"
    " event_id bigint NOT NULL,"
    " kind int NOT NULL,"
    " source_event_id bigint NOT NULL DEFAULT 0,"
    " timestamp_ms bigint NOT NULL,"
    " name text,"
    " version text,"
    " payload text,"
    " error text,"
    " category int NOT NULL DEFAULT 0,"
    " reason text,"
    " requested_by text,"
    " ref_instance text,"
    " ref_execution bigint NOT NULL DEFAULT 0,"
    " ref_event_id bigint NOT NULL DEFAULT 0,"
    " fire_at_ms bigint NOT NULL DEFAULT 0,"
    " attempt bigint NOT NULL DEFAULT 0,"
    " flags bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY(instance_id, execution_id, event_id));"
    "CREATE INDEX history_activity_cancel"
    " ON history(instance_id, execution_id, source_event_id)"
    " WHERE kind = 10;"
    "CREATE TABLE orchestrator_queue("
    " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " instance_id text COLLATE \"C\" NOT NULL,"
    " kind int NOT NULL,"
    " execution_id bigint NOT NULL DEFAULT 0,"
    " source_id bigint NOT NULL DEFAULT 0,"
    " name text,"
    " version text,"
    " payload text,"
    " error text,"
    " category int NOT NULL DEFAULT 0,"
    " reason text,"
    " requested_by text,"
    " parent_instance text,"
    " parent_execution bigint NOT NULL DEFAULT 0,"
    " parent_event_id bigint NOT NULL DEFAULT 0,"
    " fire_at_ms bigint NOT NULL DEFAULT 0,"
    " attempt bigint NOT NULL DEFAULT 0,"
    " flags bigint NOT NULL DEFAULT 0,"
    " enqueued_ms bigint NOT NULL,"
    " visible_at bigint NOT NULL,"
    " lock_token text,"
    " fetch_count int NOT NULL DEFAULT 0);"
    "CREATE INDEX orchestrator_queue_instance"
    " ON orchestrator_queue(instance_id, visible_at, id);"
    "CREATE TABLE orchestrator_ready("
    " id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,"
    " instance_id text COLLATE \"C\" PRIMARY KEY,"
    " ready_at bigint NOT NULL,"
    " lock_token text,"
    " locked_until bigint);"
    "CREATE INDEX orchestrator_ready_at ON orchestrator_ready(ready_at);"
    "CREATE TABLE worker_queue("
    " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " instance_id text COLLATE \"C\" NOT NULL,"
    " execution_id bigint NOT NULL,"
    " activity_id bigint NOT NULL,"
    " name text NOT NULL,"
    " version text,"
    " payload text,"
    " attempt bigint NOT NULL DEFAULT 0,"
    " enqueued_ms bigint NOT NULL,"
    " available_at bigint NOT NULL,"
    " lock_token text,"
    " locked_until bigint,"
    " fetch_count int NOT NULL DEFAULT 0);"
    "CREATE INDEX worker_queue_available ON worker_queue(available_at, id);"
    "CREATE INDEX worker_queue_activity"
    " ON worker_queue(instance_id, execution_id, activity_id);"
    /* The queue tables churn (every row is inserted, updated and deleted
     * within seconds): vacuum them after a fixed number of dead rows, not
     * a fraction of a table that is usually near empty, so claims do not
     * step over dead index entries. */
    "ALTER TABLE orchestrator_queue SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0);"
    "ALTER TABLE orchestrator_ready SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0);"
    "ALTER TABLE worker_queue SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 500, autovacuum_vacuum_cost_delay = 0);",
    /* 2: when the worker ran an activity (provider contract version 6),
     * carried by its completion message to the event the turn records
     * (SQLite's version 4). A constant default: no table rewrite, and rows
     * written before read 0, "unknown". */
    "ALTER TABLE orchestrator_queue"
    " ADD COLUMN started_ms bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN finished_ms bigint NOT NULL DEFAULT 0;"
    "ALTER TABLE history"
    " ADD COLUMN started_ms bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN finished_ms bigint NOT NULL DEFAULT 0;",
    /* 3 (SQLite's 5): the instance list by name and status pages in id
     * order by an index scan instead of sorting every instance of the
     * name and status. */
    "DROP INDEX instances_name_status;"
    "CREATE INDEX instances_name_status"
    " ON instances(name, status, instance_id);",
    /* 4 (SQLite's 6): the ids of the events raised with one (provider
     * contract version 8): a raise retried with its id is delivered
     * once. */
    "CREATE TABLE event_ids("
    " instance_id text COLLATE \"C\" NOT NULL,"
    " event_id text COLLATE \"C\" NOT NULL,"
    " raised_ms bigint NOT NULL,"
    " PRIMARY KEY(instance_id, event_id));",
    /* 5 (SQLite's 7): the operators' queries (provider contract version
     * 10): instances newest first by creation or last change, by status
     * and by name and status, each page one index range per status from
     * the cursor's key, merged; and the control requests across
     * instances, a partial index of their four kinds (5, 19, 20, 21), so
     * the other history inserts pay nothing. Built in the migration's
     * transaction: writers of these tables wait for the build (one pass
     * over each table). */
    DURO__SQL_DDL_QUERY_INDEXES " WHERE kind IN (5, 19, 20, 21);",
    /* 6 (PostgreSQL only): room in orchestrator_queue's pages for a claim's
     * new row versions. A claim tags each message it takes (lock_token, no
     * indexed column): a heap-only (HOT) update, no index entry, when the
     * page has room for the new version; full pages made 6 of 10 of those
     * updates write an entry in both indexes. New pages only: no rewrite,
     * no lock but the ALTER's own (SHARE UPDATE EXCLUSIVE). */
    "ALTER TABLE orchestrator_queue SET (fillfactor = 50);",
    /* 7 (SQLite's 8): the live runtimes (provider contract version 12): a
     * row per runtime, written at its start and at each heartbeat,
     * deleted at its clean stop or, once it missed three heartbeats, by
     * another's write; what it registers is JSON text, read whole. */
    "CREATE TABLE runtimes("
    " runtime_id text COLLATE \"C\" PRIMARY KEY,"
    " host text COLLATE \"C\" NOT NULL,"
    " pid bigint NOT NULL,"
    " started_ms bigint NOT NULL,"
    " heartbeat_ms bigint NOT NULL,"
    " heartbeat_every_ms bigint NOT NULL,"
    " orchestrations text NOT NULL,"
    " activities text NOT NULL);",
    /* 8 (SQLite's 9): the instance's deadline (provider contract version
     * 12), shown by status; the DEADLINE message on the queue is what ends
     * the instance at it. A constant default: no table rewrite, and rows
     * written before read 0, "none". */
    "ALTER TABLE instances"
    " ADD COLUMN deadline_ms bigint NOT NULL DEFAULT 0;",

    /* 9 (SQLite's 10): schedules (provider contract version 13): a
     * schedule's spec and state with a row version for the compare-and-set
     * of a plan, a partial index of the due ones, and the fires log. */
    "CREATE TABLE schedules("
    " id text COLLATE \"C\" PRIMARY KEY,"
    " spec text NOT NULL,"
    " spec_version bigint NOT NULL,"
    " row_version bigint NOT NULL,"
    " next_ms bigint NOT NULL,"
    " due_ms bigint,"
    " buffered_ms bigint NOT NULL,"
    " last_instance_id text COLLATE \"C\","
    " paused int NOT NULL,"
    " note text,"
    " fires bigint NOT NULL,"
    " skips bigint NOT NULL,"
    " created_ms bigint NOT NULL,"
    " updated_ms bigint NOT NULL);"
    "CREATE INDEX schedules_due ON schedules(due_ms)"
    " WHERE paused = 0 AND due_ms IS NOT NULL;"
    "CREATE TABLE schedule_fires("
    " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " schedule_id text COLLATE \"C\" NOT NULL,"
    " time_ms bigint NOT NULL,"
    " action int NOT NULL,"
    " count bigint NOT NULL,"
    " instance_id text COLLATE \"C\","
    " why text,"
    " recorded_ms bigint NOT NULL);"
    "CREATE INDEX schedule_fires_schedule ON schedule_fires(schedule_id, "
    "seq);"};

/* libpq's message on one line, as a log line needs it: each run of
 * whitespace (its "\n\tThis probably means ...") becomes one space, and
 * none is left at the end. */
static void one_line(char *msg)
{
    size_t out = 0;
    for (size_t i = 0; msg[i] != '\0'; i++) {
        if (isspace((unsigned char)msg[i])) {
            if (out > 0 && msg[out - 1] != ' ')
                msg[out++] = ' ';
        } else {
            msg[out++] = msg[i];
        }
    }
    while (out > 0 && msg[out - 1] == ' ')
        out--;
    msg[out] = '\0';
}

/* Marks c broken (reopened at its next use), noting when it was first
 * found so (p->reconnected: duro__pg_reconnected). */
static void mark_broken(duro__pg_conn *c)
{
    if (!c->broken)
        c->broken_ms = duro__mono_ms();
    c->broken = 1;
}

/* Keeps the text of a failed result in c (sqlstate and message). */
static void note_failure(duro__pg_conn *c, const PGresult *res)
{
    const char *state =
        res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(c->sqlstate, sizeof(c->sqlstate), "%s",
             state != NULL ? state : "");
    const char *msg = res != NULL ? PQresultErrorMessage(res) : NULL;
    if (msg == NULL || msg[0] == '\0')
        msg = PQerrorMessage(c->pg);
    snprintf(c->message, sizeof(c->message), "%s",
             msg != NULL ? msg : "unknown error");
    one_line(c->message);
    /* 25P03, 25P04: the server ended the session, idle in a transaction
     * (idle_in_transaction_session_timeout) or open too long
     * (transaction_timeout); libpq may not have seen the end of the
     * stream yet */
    if (PQstatus(c->pg) != CONNECTION_OK ||
        strncmp(c->sqlstate, "08", 2) == 0 || c->sqlstate[0] == '\0' ||
        strncmp(c->sqlstate, "57P", 3) == 0 ||
        strcmp(c->sqlstate, "25P03") == 0 || strcmp(c->sqlstate, "25P04") == 0)
        mark_broken(c);
}

/* Runs SQL text (no parameters, any number of statements) outside the
 * statement table: open and migrations. */
static int exec_sql(duro__pg_conn *c, const char *sql, const char *op,
                    duro_error *err)
{
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType st = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        PQclear(res);
        return DURO_OK;
    }
    c->injected = 0;
    note_failure(c, res);
    PQclear(res);
    return duro__pg_error(c, DURO__PG_FAILED, op, err);
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* A connection, its session not set up yet (no SET run). */
static int conn_connect(duro__pg_provider *p, duro__pg_conn *c, duro_error *err)
{
    memset(c, 0, sizeof(*c));
    c->pg = PQconnectdb(p->cfg.conninfo);
    if (c->pg == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (PQstatus(c->pg) != CONNECTION_OK) {
        char msg[256]; /* libpq's text, scrubbed of the URL's secrets */
        duro__pg_scrub(p->cfg.conninfo, PQerrorMessage(c->pg), msg,
                       sizeof(msg));
        one_line(msg);
        PQfinish(c->pg);
        c->pg = NULL;
        /* A server that is down or restarting may come back; one that
         * has no connection left says so in its own words only. */
        int full = strstr(msg, "too many clients") != NULL ||
                   strstr(msg, "too many connections") != NULL ||
                   strstr(msg, "connection slots are reserved") != NULL;
        return duro_error_set(
            err, DURO_STORAGE, 1, "postgres open: cannot connect to %s: %s%s",
            p->cfg.display, msg,
            full ? " (duro opens the URL's pool= connections - by default "
                   "one per runtime thread plus one, 5 for a client - and "
                   "one to listen: lower pool=, or raise the server's "
                   "max_connections or the role's connection limit)"
                 : "");
    }
    PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
    for (size_t i = 0; i < DURO__SQL_COUNT; i++) {
        c->stmts[i].conn = c;
        c->stmts[i].id = (duro__pg_stmt_id)i;
        c->stmts[i].row = -1;
    }
    return DURO_OK;
}

/* Sets up c's session: the schema, the notices, the planner's costs, the
 * timeouts. */
static int conn_setup(duro__pg_provider *p, duro__pg_conn *c, duro_error *err)
{
    char sql[SESSION_SQL_MAX];
    session_sql(p, sql);
    int rc = exec_sql(c, sql, "open", err);
    if (rc != DURO_OK) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    return rc;
}

int duro__pg_conn_open(duro__pg_provider *p, duro__pg_conn *c, duro_error *err)
{
    int rc = conn_connect(p, c, err);
    return rc == DURO_OK ? conn_setup(p, c, err) : rc;
}

/* The backend serving c's next statement, in *pid; -1 and the server's
 * (or pooler's) message in why[] when it fails. */
static int backend_pid(duro__pg_conn *c, const char *sql, long *pid, char *why,
                       size_t size)
{
    PGresult *r = PQexec(c->pg, sql);
    int ok =
        r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok)
        *pid = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    else
        snprintf(why, size, "%s",
                 r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    PQclear(r);
    one_line(why);
    return ok ? 0 : -1;
}

/* duro__pg_conn_open_checked's check, on a connection `a` whose session is
 * not set up yet: nothing is SET before a pooler is ruled out (behind one,
 * a SET would stay on a server session another client gets next). */
static int check_sessions(duro__pg_provider *p, duro__pg_conn *a,
                          duro_error *err)
{
    duro__pg_conn b;
    int rc = conn_connect(p, &b, err);
    if (rc != DURO_OK)
        return rc;
    long a1 = -1, a2 = -1, pb = -1;
    char why[256] = "";
    int failed =
        backend_pid(a, "SELECT pg_backend_pid()", &a1, why, sizeof(why)) ||
        backend_pid(&b, "BEGIN; SELECT pg_backend_pid()", &pb, why,
                    sizeof(why)) ||
        backend_pid(a, "SELECT pg_backend_pid()", &a2, why, sizeof(why));
    PQclear(PQexec(b.pg, "ROLLBACK"));
    duro__pg_conn_close(&b);
    if (failed && PQstatus(a->pg) != CONNECTION_OK)
        return duro_error_set(err, DURO_STORAGE, 1,
                              "postgres open: %s: the connection was lost: "
                              "%s",
                              p->cfg.display, why);
    if (!failed && a1 == a2 && pb != a1)
        return DURO_OK;
    return duro_error_set(
        err, DURO_STORAGE, 0,
        "postgres open: %s: %s; duro needs one server session per "
        "connection for as long as it lasts (it sets the schema's "
        "search_path, prepares statements, takes advisory locks and "
        "LISTENs), which a pooler in transaction or statement mode (such as "
        "PgBouncer's pool_mode = transaction) does not keep: connect to the "
        "server, or through session pooling",
        p->cfg.display,
        failed ? why
               : "a connection's statements ran in more than one server "
                 "session");
}

int duro__pg_conn_open_checked(duro__pg_provider *p, duro__pg_conn *c,
                               duro_error *err)
{
    int rc = conn_connect(p, c, err);
    if (rc == DURO_OK && (rc = check_sessions(p, c, err)) != DURO_OK) {
        PQfinish(c->pg);
        c->pg = NULL;
    }
    return rc == DURO_OK ? conn_setup(p, c, err) : rc;
}

void duro__pg_conn_close(duro__pg_conn *c)
{
    for (size_t i = 0; i < DURO__SQL_COUNT; i++) {
        PQclear(c->stmts[i].result);
        c->stmts[i].result = NULL;
    }
    if (c->pg != NULL)
        PQfinish(c->pg);
    c->pg = NULL;
}

/* Reconnects a connection that broke: its prepared statements are gone. */
static void conn_reset(duro__pg_conn *c)
{
    for (size_t i = 0; i < DURO__SQL_COUNT; i++) {
        PQclear(c->stmts[i].result);
        c->stmts[i].result = NULL;
    }
    memset(c->prepared, 0, sizeof(c->prepared));
    PQreset(c->pg);
    if (PQstatus(c->pg) == CONNECTION_OK)
        c->broken = 0;
}

/* Runs a query of one row into *res (free with PQclear, also after a
 * failure). */
static int query_row(duro__pg_conn *c, const char *sql, PGresult **res,
                     duro_error *err)
{
    *res = PQexec(c->pg, sql);
    if (*res != NULL && PQresultStatus(*res) == PGRES_TUPLES_OK &&
        PQntuples(*res) == 1)
        return DURO_OK;
    note_failure(c, *res);
    return duro__pg_error(c, DURO__PG_FAILED, "open: schema version", err);
}

/* Whether the schema exists, whether it has duro_schema, and the version
 * that records (0 without the table), in statements that need no privilege
 * beyond USAGE on the schema and SELECT on duro_schema, and change
 * nothing. */
static int read_state(duro__pg_provider *p, duro__pg_conn *c, int *exists,
                      int *has_table, int64_t *version, duro_error *err)
{
    char sql[512];
    PGresult *res = NULL;
    *exists = 0;
    *has_table = 0;
    *version = 0;
    /* the name was validated as an identifier: no quote to escape */
    snprintf(sql, sizeof(sql),
             "SELECT EXISTS(SELECT 1 FROM pg_namespace WHERE nspname = '%s'), "
             "to_regclass('\"%s\".duro_schema') IS NOT NULL",
             p->cfg.schema, p->cfg.schema);
    int rc = query_row(c, sql, &res, err);
    if (rc == DURO_OK) {
        *exists = PQgetvalue(res, 0, 0)[0] == 't';
        *has_table = PQgetvalue(res, 0, 1)[0] == 't';
    }
    PQclear(res);
    if (rc != DURO_OK || !*exists || !*has_table)
        return rc;
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(MAX(version), 0) FROM \"%s\".duro_schema",
             p->cfg.schema);
    if ((rc = query_row(c, sql, &res, err)) == DURO_OK)
        *version = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return rc;
}

static int schema_too_new(duro__pg_provider *p, int64_t version,
                          duro_error *err)
{
    return duro_error_set(err, DURO_SCHEMA, 0,
                          "postgres open: schema \"%s\" of %s is version "
                          "%lld, newer than this library's (%d)",
                          p->cfg.schema, p->cfg.display, (long long)version,
                          DURO__PG_SCHEMA_VERSION);
}

static int schema_missing(duro__pg_provider *p, duro_error *err)
{
    return duro_error_set(err, DURO_NOT_FOUND, 0,
                          "postgres open: schema \"%s\" does not exist in "
                          "%s; nothing was created (create=0)",
                          p->cfg.schema, p->cfg.display);
}

/* create=0 on a schema that exists but holds no duro store (no
 * duro_schema): nothing is created in it. */
static int schema_not_a_store(duro__pg_provider *p, duro_error *err)
{
    return duro_error_set(err, DURO_NOT_FOUND, 0,
                          "postgres open: schema \"%s\" in %s holds no duro "
                          "store (it has no duro_schema table); nothing was "
                          "created (create=0)",
                          p->cfg.schema, p->cfg.display);
}

int duro__pg_migrate(duro__pg_provider *p, duro__pg_conn *c, duro_error *err)
{
    static const char op[] = "open: migrate";
    char sql[512];
    /* A current schema is the common case: it is opened with reads alone,
     * so a role with only data rights (USAGE on the schema, DML on its
     * tables, no CREATE) can use a store it could not have created. */
    int exists = 0, has_table = 0;
    int64_t version = 0;
    int rc = read_state(p, c, &exists, &has_table, &version, err);
    if (rc != DURO_OK)
        return rc;
    if (version > DURO__PG_SCHEMA_VERSION)
        return schema_too_new(p, version, err);
    if (exists && version == DURO__PG_SCHEMA_VERSION)
        return DURO_OK;
    if (!exists && !p->cfg.create)
        return schema_missing(p, err);
    if (!has_table && !p->cfg.create)
        return schema_not_a_store(p, err);

    /* A migration waits as long as it takes, for the lock below and for
     * the tables' locks, as before duro set timeouts: the processes opening
     * a store at once wait for the one migrating it, however long that
     * takes on a large store. SET LOCAL ends with the transaction. */
    if ((rc = exec_sql(c,
                       "BEGIN; SET LOCAL lock_timeout TO 0; "
                       "SET LOCAL statement_timeout TO 0",
                       op, err)) != DURO_OK)
        return rc;
    /* Every process opening the schema at once queues here; the first
     * migrates, the others find it done. The lock ends with the
     * transaction. What was read above is read again under it. */
    snprintf(sql, sizeof(sql),
             "SELECT pg_advisory_xact_lock(hashtextextended('duro.migrate.' "
             "|| '%s', 0))",
             p->cfg.schema);
    if ((rc = exec_sql(c, sql, op, err)) == DURO_OK)
        rc = read_state(p, c, &exists, &has_table, &version, err);
    if (rc == DURO_OK && version > DURO__PG_SCHEMA_VERSION)
        rc = schema_too_new(p, version, err);
    if (rc == DURO_OK && exists && !has_table && !p->cfg.create)
        rc = schema_not_a_store(p, err);
    if (rc == DURO_OK && !exists) {
        if (!p->cfg.create)
            rc = schema_missing(p, err);
        else {
            snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS \"%s\"",
                     p->cfg.schema);
            rc = exec_sql(c, sql, op, err);
        }
    }
    if (rc == DURO_OK && version == 0)
        rc = exec_sql(c,
                      "CREATE TABLE IF NOT EXISTS duro_schema("
                      " version int PRIMARY KEY, applied_ms bigint NOT NULL)",
                      op, err);
    for (int64_t v = version + 1; rc == DURO_OK && v <= DURO__PG_SCHEMA_VERSION;
         v++) {
        rc = exec_sql(c, migrations[v - 1], op, err);
        snprintf(sql, sizeof(sql),
                 "INSERT INTO duro_schema(version, applied_ms) "
                 "VALUES(%lld, %lld)",
                 (long long)v, (long long)duro__wall_ms());
        if (rc == DURO_OK)
            rc = exec_sql(c, sql, op, err);
    }
    if (rc == DURO_OK)
        return exec_sql(c, "COMMIT", op, err);
    PGresult *res = PQexec(c->pg, "ROLLBACK");
    PQclear(res);
    return rc;
}

/* ---- statements --------------------------------------------------------- */

duro__pg_statement *duro__pg_stmt(duro__pg_provider *p, duro__pg_conn *c,
                                  duro__pg_stmt_id id, const char *op,
                                  duro_error *err)
{
    pthread_once(&params_once, count_params);
    if (statement_sql[id] == NULL) {
        duro_error_set(err, DURO_UNSUPPORTED, 0,
                       "postgres %s: no statement %s in this dialect", op,
                       duro__sql_statement_id_name(id));
        return NULL;
    }
    duro__pg_statement *s = &c->stmts[id];
    PQclear(s->result);
    s->result = NULL;
    s->row = -1;
    s->ran = 0;
    memset(s->values, 0, sizeof(s->values));
    if (statement_per_call[id] || (c->prepared[id / 64] & (1ull << (id % 64))))
        return s;
    if (c->broken) {
        duro_error_set(err, DURO_STORAGE, 1, "postgres %s: connection lost: %s",
                       op, c->message);
        return NULL;
    }
    int n = statement_params[id];
    char name[16];
    snprintf(name, sizeof(name), "d%d", (int)id);
    PGresult *res = PQprepare(c->pg, name, statement_sql[id], n, text_types);
    if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
        c->injected = 0;
        note_failure(c, res);
        PQclear(res);
        duro__pg_error(c, DURO__PG_FAILED, op, err);
        return NULL;
    }
    PQclear(res);
    c->prepared[id / 64] |= 1ull << (id % 64);
    atomic_fetch_add(&p->sql.statements_prepared, 1);
    return s;
}

int duro__pg_param_count(duro__pg_statement *s)
{
    pthread_once(&params_once, count_params);
    return statement_params[s->id];
}

void duro__pg_reset(duro__pg_statement *s)
{
    PQclear(s->result);
    s->result = NULL;
    s->row = -1;
    s->ran = 0;
}

int duro__pg_changes(duro__pg_conn *c)
{
    return (int)c->changes;
}

/* The commit-loss hook (duro__pg_inject_commit_loss), asked at every commit
 * of a write: the COMMIT of a write transaction, or a write statement run
 * alone. */
enum { LOSS_NONE, LOSS_BEFORE, LOSS_AFTER };

static int commit_loss(duro__pg_provider *p)
{
    uint64_t n = atomic_fetch_add(&p->commits, 1) + 1;
    if (atomic_load(&p->commit_loss_at) != n ||
        !atomic_compare_exchange_strong(&p->commit_loss_at, &n, 0))
        return LOSS_NONE;
    return atomic_load(&p->commit_loss_committed) ? LOSS_AFTER : LOSS_BEFORE;
}

/* Drops c's connection as a network failure would - both directions shut,
 * so the server ends the session, rolling back what it has not committed -
 * and marks it broken: the failure maps to a lost connection, and the slot
 * reconnects at its next use. */
static int drop_connection(duro__pg_provider *p, duro__pg_conn *c)
{
    shutdown(PQsocket(c->pg), SHUT_RDWR);
    atomic_fetch_add(&p->commit_losses, 1);
    mark_broken(c);
    c->injected = 0;
    c->sqlstate[0] = '\0';
    snprintf(c->message, sizeof(c->message),
             "server closed the connection unexpectedly (injected)");
    return DURO__PG_FAILED;
}

/* Counts a statement about to run for the fault hook; 1 when the hook
 * fails it (c then holds the injected failure). */
static int inject(duro__pg_provider *p, duro__pg_conn *c)
{
    uint64_t step;
    int fault = duro__sql_fault_due(&p->sql, &step);
    if (fault == 0)
        return 0;
    c->injected = fault;
    snprintf(c->sqlstate, sizeof(c->sqlstate), "%s",
             c->injected == 1 ? "40001" : "XX000");
    snprintf(c->message, sizeof(c->message), "injected fault at step %llu",
             (unsigned long long)step);
    return 1;
}

/* Sends statement id - prepared as `name`, or its text when it is planned
 * per call - with its n values. */
static int send_statement(PGconn *pg, duro__pg_stmt_id id, const char *name,
                          int n, const char *const *values)
{
    if (statement_per_call[id])
        return PQsendQueryParams(pg, statement_sql[id], n, text_types, values,
                                 NULL, NULL, 0);
    return PQsendQueryPrepared(pg, name, n, values, NULL, NULL, 0);
}

/* Runs statement id (prepared as `name`) after the BEGIN that c owes
 * (with_begin) and c->begin_then, in one round trip (libpq's pipeline mode:
 * BEGIN, the setting, the statement, a sync). Without the BEGIN the
 * statement is still its own transaction, begin_then's too: the messages
 * before a sync run in one implicit transaction, which the sync commits.
 * Returns the statement's result, or the BEGIN's or the setting's when that
 * failed, or NULL when the connection failed. */
static PGresult *exec_after_begin(duro__pg_conn *c, int with_begin,
                                  duro__pg_stmt_id id, const char *name, int n,
                                  const char *const *values)
{
    PGconn *pg = c->pg;
    if (!PQenterPipelineMode(pg))
        return NULL;
    PGresult *begin = NULL, *then = NULL, *res = NULL, *x;
    const char *then_sql = c->begin_then;
    c->begin_then = NULL;
    if ((!with_begin ||
         PQsendQueryParams(pg, c->begin_sql, 0, NULL, NULL, NULL, 0, 0)) &&
        (then_sql == NULL ||
         PQsendQueryParams(pg, then_sql, 0, NULL, NULL, NULL, 0, 0)) &&
        send_statement(pg, id, name, n, values) && PQpipelineSync(pg)) {
        /* each query's results end with NULL; then the sync's */
        if (!with_begin)
            begin = PQmakeEmptyPGresult(pg, PGRES_COMMAND_OK);
        else if ((begin = PQgetResult(pg)) != NULL)
            while ((x = PQgetResult(pg)) != NULL)
                PQclear(x);
        if (then_sql != NULL && (then = PQgetResult(pg)) != NULL)
            while ((x = PQgetResult(pg)) != NULL)
                PQclear(x);
        if ((res = PQgetResult(pg)) != NULL)
            while ((x = PQgetResult(pg)) != NULL)
                PQclear(x);
        PQclear(PQgetResult(pg)); /* PGRES_PIPELINE_SYNC */
    }
    if (!PQexitPipelineMode(pg))
        mark_broken(c);
    if (begin != NULL && PQresultStatus(begin) != PGRES_COMMAND_OK) {
        PQclear(then);
        PQclear(res);
        return begin;
    }
    PQclear(begin);
    if (then_sql != NULL &&
        (then == NULL || (PQresultStatus(then) != PGRES_COMMAND_OK &&
                          PQresultStatus(then) != PGRES_TUPLES_OK))) {
        PQclear(res);
        return then; /* its failure, or NULL: the connection failed */
    }
    PQclear(then);
    return begin != NULL ? res : (PQclear(res), NULL);
}

int duro__pg_step(duro__pg_provider *p, duro__pg_conn *c, duro__pg_statement *s)
{
    if (!s->ran) {
        s->ran = 1;
        s->row = -1;
        c->injected = 0;
        /* the owed BEGIN counts as the step before this statement */
        int with_begin = c->begin_pending;
        int pipelined = with_begin || c->begin_then != NULL;
        c->begin_pending = 0;
        if (with_begin && inject(p, c))
            return DURO__PG_FAILED;
        if (s->id != DURO__SQL_ROLLBACK && inject(p, c))
            return DURO__PG_FAILED;
        /* a write run alone is its own transaction: its commit */
        int loss = statement_writes[s->id] && !with_begin &&
                           PQtransactionStatus(c->pg) == PQTRANS_IDLE
                       ? commit_loss(p)
                       : LOSS_NONE;
        if (loss == LOSS_BEFORE)
            return drop_connection(p, c);
        char name[16];
        snprintf(name, sizeof(name), "d%d", (int)s->id);
        int n = statement_params[s->id];
        s->result =
            pipelined
                ? exec_after_begin(c, with_begin, s->id, name, n, s->values)
            : statement_per_call[s->id]
                ? PQexecParams(c->pg, statement_sql[s->id], n, text_types,
                               s->values, NULL, NULL, 0)
                : PQexecPrepared(c->pg, name, n, s->values, NULL, NULL, 0);
        ExecStatusType st =
            s->result != NULL ? PQresultStatus(s->result) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            note_failure(c, s->result);
            PQclear(s->result);
            s->result = NULL;
            return strcmp(c->sqlstate, "23505") == 0 ? DURO__PG_UNIQUE
                                                     : DURO__PG_FAILED;
        }
        if (loss == LOSS_AFTER) {
            PQclear(s->result);
            s->result = NULL;
            return drop_connection(p, c);
        }
        const char *changed = PQcmdTuples(s->result);
        c->changes = changed[0] != '\0' ? strtoll(changed, NULL, 10) : 0;
    }
    if (s->result == NULL)
        return DURO__PG_DONE;
    s->row++;
    if (s->row < PQntuples(s->result))
        return DURO__PG_ROW;
    return DURO__PG_DONE;
}

int duro__pg_run(duro__pg_provider *p, duro__pg_conn *c, duro__pg_statement *s,
                 const char *op, duro_error *err)
{
    int rc = duro__pg_step(p, c, s);
    if (rc == DURO__PG_ROW || rc == DURO__PG_DONE)
        return DURO_OK;
    return duro__pg_error(c, rc, op, err);
}

int duro__pg_error(duro__pg_conn *c, int rc, const char *op, duro_error *err)
{
    (void)rc;
    if (c->injected == 1)
        return duro_error_set(err, DURO_BUSY, 1, "postgres %s: %s", op,
                              c->message);
    if (c->injected == 2)
        return duro_error_set(err, DURO_STORAGE, 0, "postgres %s: %s", op,
                              c->message);
    if (c->broken)
        return duro_error_set(err, DURO_STORAGE, 1,
                              "postgres %s: connection lost: %s", op,
                              c->message);
    /* serialization failure, deadlock, lock not available, too many
     * connections, statement or lock timeout: the same call may succeed */
    static const char *const busy[] = {"40001", "40P01", "55P03", "53300",
                                       "57014"};
    for (size_t i = 0; i < DURO__ARRAY_LEN(busy); i++)
        if (strcmp(c->sqlstate, busy[i]) == 0)
            return duro_error_set(
                err, DURO_BUSY, 1, "postgres %s: %s (%s)%s", op, c->message,
                c->sqlstate,
                strcmp(c->sqlstate, "55P03") == 0
                    ? "; another session holds a row it needs (lock_timeout, "
                      "a URL parameter, bounds the wait): retried"
                    : "");
    if (strcmp(c->sqlstate, "53200") == 0) /* out of memory */
        return duro_error_set(err, DURO_NOMEM, 0, "postgres %s: %s", op,
                              c->message);
    /* what the server's words leave to guess */
    const char *hint =
        strcmp(c->sqlstate, "25006") == 0
            ? "; the server takes no writes here (a hot standby, or "
              "default_transaction_read_only): write through the primary"
        : strcmp(c->sqlstate, "42501") == 0
            ? "; the role lacks a privilege duro needs: see the grants in "
              "docs/postgres-provider.md (Schema)"
            : "";
    return duro_error_set(err, DURO_STORAGE, 0, "postgres %s: %s (%s)%s", op,
                          c->message, c->sqlstate, hint);
}

void duro__pg_bind_text(duro__pg_conn *c, duro__pg_statement *s, int i,
                        const char *v)
{
    (void)c;
    if (i >= 1 && i <= DURO__PG_PARAM_MAX)
        s->values[i - 1] = v;
}

void duro__pg_bind_i64(duro__pg_conn *c, duro__pg_statement *s, int i,
                       int64_t v)
{
    (void)c;
    if (i < 1 || i > DURO__PG_PARAM_MAX)
        return;
    snprintf(s->numbers[i - 1], sizeof(s->numbers[i - 1]), "%lld",
             (long long)v);
    s->values[i - 1] = s->numbers[i - 1];
}

void duro__pg_bind_u64(duro__pg_conn *c, duro__pg_statement *s, int i,
                       uint64_t v)
{
    duro__pg_bind_i64(c, s, i, (int64_t)v);
}

int64_t duro__pg_column_int64(duro__pg_statement *s, int col)
{
    if (s->result == NULL || s->row < 0 || PQgetisnull(s->result, s->row, col))
        return 0;
    const char *v = PQgetvalue(s->result, s->row, col);
    if (v[0] == 't')
        return 1;
    if (v[0] == 'f')
        return 0;
    return strtoll(v, NULL, 10);
}

int duro__pg_column_int(duro__pg_statement *s, int col)
{
    return (int)duro__pg_column_int64(s, col);
}

int duro__pg_column_null(duro__pg_statement *s, int col)
{
    return s->result == NULL || s->row < 0 ||
           PQgetisnull(s->result, s->row, col);
}

const char *duro__pg_column_text_raw(duro__pg_statement *s, int col)
{
    if (duro__pg_column_null(s, col))
        return NULL;
    return PQgetvalue(s->result, s->row, col);
}

int duro__pg_column_bytes(duro__pg_statement *s, int col)
{
    if (duro__pg_column_null(s, col))
        return 0;
    return PQgetlength(s->result, s->row, col);
}

int duro__pg_column_text(duro_arena *a, duro__pg_statement *s, int col,
                         const char **out)
{
    const char *v = duro__pg_column_text_raw(s, col);
    if (v == NULL) {
        *out = NULL;
        return 0;
    }
    *out = duro_arena_strdup(a, v);
    return *out == NULL ? -1 : 0;
}

/* ---- the pool and transactions ------------------------------------------ */

/* Whether the server has closed idle connection c while it sat in the pool
 * (a restart, pg_terminate_backend, idle_session_timeout): one
 * non-blocking peek at its socket, no round trip. An idle connection is
 * sent nothing unasked (pooled connections do not LISTEN), so anything
 * there - the end of the stream, an error, or bytes (the FATAL a backend
 * sends before it exits, with the end of the stream behind it) - means the
 * session is over or about to be. A false alarm costs one reconnect. libpq's
 * PQconsumeInput alone would not do: it reads the FATAL, not the end behind
 * it, and keeps the status CONNECTION_OK. */
static int closed_by_server(duro__pg_conn *c)
{
    int sock = PQsocket(c->pg);
    if (sock < 0 || PQstatus(c->pg) != CONNECTION_OK)
        return 1;
    char byte;
    ssize_t n = recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    return 1;
}

/* Reconnects broken connection c and sets its session up again; when that
 * fails, c stays broken and its message says why the reconnect failed (not
 * the failure that broke it, which may be long past). */
static void reconnect(duro__pg_provider *p, duro__pg_conn *c)
{
    conn_reset(c);
    if (!c->broken) {
        char sql[SESSION_SQL_MAX];
        session_sql(p, sql);
        PGresult *res = PQexec(c->pg, sql);
        if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
            c->broken = 1;
        PQclear(res);
    }
    if (!c->broken && p->reconnected != NULL)
        p->reconnected(p, c->broken_ms);
    if (c->broken) {
        char why[256];
        duro__pg_scrub(p->cfg.conninfo, PQerrorMessage(c->pg), why,
                       sizeof(why));
        one_line(why);
        c->sqlstate[0] = '\0';
        /* the URL cut so that a long one leaves room for the reason */
        snprintf(c->message, sizeof(c->message),
                 "cannot reconnect to %.200s: %s", p->cfg.display,
                 why[0] != '\0' ? why : "unknown error");
    }
}

static duro__pg_conn *acquire(duro__pg_provider *p)
{
    duro__pg_conn *c = duro__sql_pool_take(&p->sql.pool);
    /* c is this thread's now: its socket is peeked at by no one else */
    if (!c->broken && closed_by_server(c))
        mark_broken(c);
    if (c->broken)
        reconnect(p, c);
    return c;
}

static void rollback(duro__pg_provider *p, duro__pg_conn *c)
{
    (void)p;
    c->begin_pending = 0; /* never sent: nothing to roll back */
    c->begin_then = NULL;
    for (size_t i = 0; i < DURO__SQL_COUNT; i++)
        if (c->stmts[i].result != NULL)
            duro__pg_reset(&c->stmts[i]);
    if (c->broken || PQtransactionStatus(c->pg) == PQTRANS_IDLE)
        return;
    /* Simple protocol, outside the fault hook: a ROLLBACK always runs,
     * whatever state the transaction is in. */
    PGresult *res = PQexec(c->pg, "ROLLBACK");
    PQclear(res);
    if (PQstatus(c->pg) != CONNECTION_OK ||
        PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        mark_broken(c);
}

static void release(duro__pg_provider *p, duro__pg_conn *c)
{
    rollback(p, c);
    duro__sql_pool_give(&p->sql.pool, c);
}

static int begin_with(duro__pg_provider *p, duro__pg_stmt_id begin,
                      const char *op, duro__pg_conn **out, duro_error *err)
{
    duro__pg_conn *c = acquire(p);
    if (c->broken) {
        duro_error_set(err, DURO_STORAGE, 1, "postgres %s: connection lost: %s",
                       op, c->message);
        release(p, c);
        *out = NULL;
        return err->code;
    }
    /* Sent with the transaction's first statement, in the same round
     * trip. */
    c->begin_pending = 1;
    c->begin_sql = statement_sql[begin];
    c->begin_then = NULL;
    *out = c;
    return DURO_OK;
}

int duro__pg_write_begin(duro__pg_provider *p, const char *op,
                         duro__pg_conn **out, duro_error *err)
{
    return begin_with(p, DURO__SQL_BEGIN_WRITE, op, out, err);
}

int duro__pg_write_begin_generic(duro__pg_provider *p, const char *op,
                                 duro__pg_conn **out, duro_error *err)
{
    int rc = begin_with(p, DURO__SQL_BEGIN_WRITE, op, out, err);
    /* plan_cache_mode is PostgreSQL 12's; an older server plans as before */
    if (rc == DURO_OK && PQserverVersion((*out)->pg) >= 120000)
        (*out)->begin_then = "SET LOCAL plan_cache_mode TO force_generic_plan";
    return rc;
}

int duro__pg_write_begin_snapshot(duro__pg_provider *p, const char *op,
                                  duro__pg_conn **out, duro_error *err)
{
    return begin_with(p, DURO__SQL_BEGIN_SNAPSHOT, op, out, err);
}

int duro__pg_write_commit(duro__pg_provider *p, duro__pg_conn *c,
                          const char *op, duro_error *err)
{
    for (size_t i = 0; i < DURO__SQL_COUNT; i++)
        if (c->stmts[i].result != NULL)
            duro__pg_reset(&c->stmts[i]);
    int loss = commit_loss(p);
    if (loss == LOSS_BEFORE) {
        int rc = duro__pg_error(c, drop_connection(p, c), op, err);
        release(p, c);
        return rc;
    }
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_COMMIT, op, err);
    int rc = s != NULL ? duro__pg_run(p, c, s, op, err) : err->code;
    if (s == NULL && rc == DURO_OK)
        rc = duro_error_set(err, DURO_STORAGE, 1,
                            "postgres %s: connection lost", op);
    if (loss == LOSS_AFTER && rc == DURO_OK)
        rc = duro__pg_error(c, drop_connection(p, c), op, err);
    release(p, c);
    return rc;
}

void duro__pg_write_rollback(duro__pg_provider *p, duro__pg_conn *c)
{
    release(p, c);
}

duro__pg_conn *duro__pg_reader_acquire(duro__pg_provider *p)
{
    return acquire(p);
}

void duro__pg_reader_release(duro__pg_provider *p, duro__pg_conn *c)
{
    release(p, c);
}
