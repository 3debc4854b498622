/* pg_internal.h - shared by the PostgreSQL provider's files: the URL's
 * configuration, the provider struct and its connection pool, the table of
 * every SQL statement it runs, and the helpers that run statements and
 * transactions. Threading: a connection is used by one thread at a time,
 * the one that took it from the pool. Not installed. */
#ifndef DURO_PG_INTERNAL_H
#define DURO_PG_INTERNAL_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "providers/providers.h"
#include "providers/sql/adapt.h"
#include "providers/sql/sql.h"

#define DURO__PG_SCHEMA_VERSION 9 /* what this code creates and reads */
#define DURO__PG_NAME_MAX 1024    /* bytes of a name, id or reason */
#define DURO__PG_POOL_MAX 64      /* most connections */
#define DURO__PG_PARAM_MAX 29     /* most parameters of a statement */
#define DURO__PG_SCHEMA_MAX 63    /* bytes of a schema name (NAMEDATALEN-1) */

/* What the URL configures. */
typedef struct duro__pg_config {
    char *conninfo; /* the URI handed to libpq: duro's own parameters
                       removed */
    char *display;  /* the URL with its password masked, for messages */
    char schema[DURO__PG_SCHEMA_MAX + 1]; /* validated identifier */
    int pool;                             /* connections */
    int pool_given;                       /* pool= was in the URL */
    uint64_t max_history;                 /* events per execution */
    size_t max_payload; /* bytes of a payload, error or custom status */
    int create;         /* create=1 (default): a missing schema is created */
    /* Session timeouts every connection SETs (ms, 0: none; -1: SET
     * nothing, the server's, a role's or the URL's libpq options' value
     * stands): lock_timeout, statement_timeout,
     * idle_in_transaction_session_timeout. */
    int64_t session_timeouts[3];
} duro__pg_config;

/* The session timeouts duro sets (duro__pg_config.session_timeouts), by
 * their server names, and their defaults (-1: none). */
#define DURO__PG_TIMEOUTS 3
extern const char *const duro__pg_timeout_names[DURO__PG_TIMEOUTS];

/* Parses a postgres:// or postgresql:// URL into cfg; DURO_BAD_URL with
 * the problem named (and the password masked) when it is malformed.
 * Connects to nothing. */
int duro__pg_parse_url(const char *url, duro__pg_config *cfg, duro_error *err);
void duro__pg_config_free(duro__pg_config *cfg);

/* ---- statements ----------------------------------------------------------
 * Every statement the provider runs, prepared at most once per connection
 * (on first use, PQprepare) and run with PQexecPrepared. Every parameter is
 * declared text and cast where it is used, so a statement may leave some of
 * its numbered parameters unused. X(ID, sql) */

/* The columns of a duro_instance_info of instance alias i (read_info in
 * sql/manage.c), and with them the table. */
#define DURO__PG_INFO_SELECT                                                   \
    "SELECT i.instance_id, i.name, i.version, i.status, i.execution_id, "      \
    "i.created_ms, i.updated_ms, i.output, i.error, i.category, "              \
    "i.custom_status, i.parent_instance, "                                     \
    "(SELECT COALESCE(MAX(h.event_id), 0) FROM history AS h "                  \
    "WHERE h.instance_id = i.instance_id AND h.execution_id = "                \
    "i.execution_id), "                                                        \
    "i.cancel_reason, i.cancelled_by, i.cancel_requested_ms, i.finished_ms, "  \
    "i.last_problem, i.last_problem_ms, i.next_attempt_ms, i.deadline_ms "
#define DURO__PG_INFO_COLUMNS DURO__PG_INFO_SELECT "FROM instances AS i "

#define DURO__PG_LIST_FILTER                                                   \
    "WHERE i.instance_id > $1::text "                                          \
    "AND ($2::bigint = 0 OR (($2::bigint >> i.status) & 1) = 1) "              \
    "AND ($3::bigint = 0 OR i.created_ms >= $3::bigint) "                      \
    "AND ($4::bigint = 0 OR i.created_ms < $4::bigint) "

#define DURO__PG_LIST_ORDER                                                    \
    " ORDER BY i.instance_id LIMIT NULLIF($7::bigint, -1)"

/* The instance and every descendant through instances.parent_instance. */
#define DURO__PG_TREE                                                          \
    "WITH RECURSIVE tree(id) AS (SELECT $1::text COLLATE \"C\" UNION "         \
    "SELECT c.instance_id FROM instances AS c "                                \
    "JOIN tree ON c.parent_instance = tree.id) "
#define DURO__PG_IN_TREE "instance_id IN (SELECT id FROM tree)"

#define DURO__PG_QUEUE_COLUMNS                                                 \
    "kind, instance_id, execution_id, source_id, name, version, payload, "     \
    "error, category, reason, requested_by, parent_instance, "                 \
    "parent_execution, parent_event_id, fire_at_ms, attempt, flags, "          \
    "started_ms, finished_ms"

#define DURO__PG_HISTORY_COLUMNS                                               \
    "event_id, kind, source_event_id, timestamp_ms, name, version, payload, "  \
    "error, category, reason, requested_by, ref_instance, ref_execution, "     \
    "ref_event_id, fire_at_ms, attempt, flags, started_ms, finished_ms"

/* A one-row subquery that makes the rest of its transaction commit without
 * waiting for the WAL flush (synchronous_commit off, for this transaction
 * only: set_config(..., true) ends with it, also when it is the implicit
 * transaction of a single statement). Only where a server crash that loses
 * the commit (the last few hundred ms of them, at most 3 x wal_writer_delay)
 * turns into a retry that the contract allows, and nothing else:
 * - a claim that is its transaction's only write: lost, it is an expired
 *   lock (the item is fetched again; its fetch count is one lower);
 * - the ack of an activity with its completion (WQ_ACK_COMPLETE*): lost,
 *   the work item comes back and the activity runs again - at-least-once,
 *   as when a worker dies between the activity's return and its ack. The
 *   completion reaches history only through a turn, whose commit waits for
 *   the flush, and the WAL is flushed in order: a turn that read the
 *   completion makes the ack durable with it.
 * Turn acks, client calls and every other write wait for the flush (test
 * pg_claims_and_activity_acks_commit_without_waiting_for_the_flush). */
#define DURO__PG_ASYNC_ONE                                                     \
    "(SELECT set_config('synchronous_commit', 'off', true)) AS one"

/* The claim of a work item (WQ_FETCH below), its final FROM starting with
 * `one`, a one-row subquery. */
#define DURO__PG_WQ_FETCH_SQL(one)                                             \
    "WITH f AS (UPDATE worker_queue SET lock_token = 'w' || id || '.' || "     \
    "$1::text, locked_until = $2::bigint, available_at = $2::bigint, "         \
    "fetch_count = fetch_count + 1 "                                           \
    "WHERE id = (SELECT id FROM worker_queue "                                 \
    "WHERE available_at <= $3::bigint ORDER BY available_at, id LIMIT 1 "      \
    "FOR UPDATE SKIP LOCKED) "                                                 \
    "RETURNING instance_id, execution_id, activity_id, name, version, "        \
    "payload, attempt, fetch_count, lock_token) "                              \
    "SELECT f.*, CASE WHEN f.lock_token IS NULL THEN "                         \
    "(SELECT MIN(available_at) FROM worker_queue) END "                        \
    "FROM " one " LEFT JOIN f ON true"

/* The end of an orchestration claim: t (the tagged messages) returns their
 * columns, and the statement's result is the claim's columns 0..36 (see
 * READY_CLAIM), before its FROM. */
#define DURO__PG_CLAIM_RESULT                                                  \
    "RETURNING q.kind, q.instance_id, q.execution_id, q.source_id, q.name, "   \
    "q.version, q.payload, q.error, q.category, q.reason, q.requested_by, "    \
    "q.parent_instance, q.parent_execution, q.parent_event_id, "               \
    "q.fire_at_ms, q.attempt, q.flags, q.fetch_count, q.visible_at, q.id, "    \
    "q.started_ms, q.finished_ms) "                                            \
    "SELECT t.kind, t.instance_id, t.execution_id, t.source_id, t.name, "      \
    "t.version, t.payload, t.error, t.category, t.reason, t.requested_by, "    \
    "t.parent_instance, t.parent_execution, t.parent_event_id, "               \
    "t.fire_at_ms, t.attempt, t.flags, t.fetch_count, r.id, r.instance_id, "   \
    "r.lock_token, CASE WHEN r.id IS NULL THEN "                               \
    "(SELECT MIN(ready_at) FROM orchestrator_ready) END, "                     \
    "i.status, i.execution_id, i.name, i.version, i.parent_instance, "         \
    "i.parent_execution, i.parent_event_id, i.custom_status, "                 \
    "i.cancel_requested_ms, i.cancel_reason, i.cancelled_by, "                 \
    "i.last_problem, (SELECT COALESCE(MAX(h.event_id), 0) "                    \
    "FROM history AS h WHERE h.instance_id = i.instance_id "                   \
    "AND h.execution_id = i.execution_id), t.started_ms, t.finished_ms "

/* The claim of an orchestration item (READY_CLAIM below), its final FROM
 * starting with `one`, a one-row subquery. */
#define DURO__PG_READY_CLAIM_SQL(one)                                          \
    "WITH r AS (UPDATE orchestrator_ready SET lock_token = 'o' || id || "      \
    "'.' || $2::text, locked_until = $3::bigint, ready_at = $3::bigint "       \
    "WHERE id = (SELECT id FROM orchestrator_ready "                           \
    "WHERE ready_at <= $1::bigint ORDER BY ready_at LIMIT 1 "                  \
    "FOR UPDATE SKIP LOCKED) RETURNING id, instance_id, lock_token), "         \
    "t AS (UPDATE orchestrator_queue AS q SET lock_token = r.lock_token, "     \
    "fetch_count = q.fetch_count + 1 FROM r "                                  \
    "WHERE q.instance_id = r.instance_id AND q.visible_at <= "                 \
    "$1::bigint " DURO__PG_CLAIM_RESULT "FROM " one                            \
    " LEFT JOIN r ON true LEFT JOIN t ON true "                                \
    "LEFT JOIN instances AS i ON i.instance_id = r.instance_id "               \
    "ORDER BY t.visible_at, t.id"

/* The claim of up to $4 orchestration items (READY_CLAIM_MANY below), its
 * final FROM starting with `one`, a one-row subquery. The same columns as
 * READY_CLAIM, the rows of each instance together (in ready-row order:
 * a ready row is made when an instance becomes ready), its messages in
 * order; each lock token 'o' || ready id || '.' || $2. The claimed rows
 * are found by key (= ANY of the claimed ids and instances, a LATERAL
 * probe of instances): joined, the planner hashes whole tables. */
#define DURO__PG_READY_CLAIM_MANY_SQL(one)                                     \
    "WITH c AS (SELECT id FROM orchestrator_ready "                            \
    "WHERE ready_at <= $1::bigint ORDER BY ready_at LIMIT $4::int "            \
    "FOR UPDATE SKIP LOCKED), "                                                \
    "r AS (UPDATE orchestrator_ready AS o SET lock_token = 'o' || o.id || "    \
    "'.' || $2::text, locked_until = $3::bigint, ready_at = $3::bigint "       \
    "WHERE o.id = ANY(ARRAY(SELECT id FROM c)) "                               \
    "RETURNING o.id, o.instance_id, o.lock_token), "                           \
    "t AS (UPDATE orchestrator_queue AS q SET lock_token = r.lock_token, "     \
    "fetch_count = q.fetch_count + 1 FROM r "                                  \
    "WHERE q.instance_id = r.instance_id "                                     \
    "AND q.instance_id = ANY(ARRAY(SELECT instance_id FROM r)) "               \
    "AND q.visible_at <= $1::bigint " DURO__PG_CLAIM_RESULT "FROM " one        \
    " LEFT JOIN r ON true "                                                    \
    "LEFT JOIN t ON t.instance_id = r.instance_id "                            \
    "LEFT JOIN LATERAL (SELECT * FROM instances AS i0 "                        \
    "WHERE i0.instance_id = r.instance_id OFFSET 0) AS i ON true "             \
    "ORDER BY r.id, t.visible_at, t.id"

/* The kinds of message that belong to one execution (timers and
 * completions): what a continue-as-new leaves dead. */
#define DURO__PG_EXECUTION_KINDS "2, 3, 4, 6, 7"

/* An upsert of the readiness row: a new row at ready_at, or ready_at
 * lowered to it when the instance is unlocked and the message is due
 * earlier (never before the end of an abandon delay). */
#define DURO__PG_READY_UPSERT                                                  \
    DURO__PG_READY_UPSERT_HOLD("COALESCE(r.locked_until, 0)")
/* The same with the abandon delay's end as `hold` (SQL): a message that
 * stops the instance (a cancel or terminate) is not held back by it. */
#define DURO__PG_READY_UPSERT_HOLD(hold)                                       \
    "ON CONFLICT(instance_id) DO UPDATE SET ready_at = "                       \
    "GREATEST(excluded.ready_at, " hold ") "                                   \
    "WHERE r.lock_token IS NULL AND excluded.ready_at < r.ready_at"

/* The ack of a work item with its completion (WQ_ACK_COMPLETE*): the row
 * goes ($20 id, $21 token); only if it went is the completion ($1..$19 and
 * its run times $24, $25, as OQ_INSERT) queued and its instance made ready. The
 * worker row being deleted is excluded from a claim in the same statement
 * ($20): it is still in the statement's snapshot, and locked by it. */
#define DURO__PG_WQ_ACK_CTE                                                    \
    "WITH a AS (DELETE FROM worker_queue WHERE id = $20::bigint "              \
    "AND lock_token = $21::text RETURNING id), "                               \
    "q AS (INSERT INTO orchestrator_queue(" DURO__PG_QUEUE_COLUMNS             \
    ", enqueued_ms, visible_at) SELECT $1::int, $2::text, $3::bigint, "        \
    "$4::bigint, $5::text, $6::text, $7::text, $8::text, $9::int, "            \
    "$10::text, $11::text, $12::text, $13::bigint, $14::bigint, "              \
    "$15::bigint, $16::bigint, $17::bigint, $24::bigint, $25::bigint, "        \
    "$18::bigint, $19::bigint FROM a), "                                       \
    "r AS (INSERT INTO orchestrator_ready AS r(instance_id, ready_at) "        \
    "SELECT $2::text, $19::bigint FROM a " DURO__PG_READY_UPSERT               \
    " RETURNING 1) "

/* A condition that is always true and makes the claim that carries it wait
 * until r (the readiness upsert of an ack's CTEs) has run: a one-time
 * filter (no column in it), evaluated before the claim's scan locks a row.
 * Without it the claim ran first, and an ack that then waited for its
 * instance's readiness row (held by another session, up to lock_timeout)
 * held the item it had claimed from every other fetch meanwhile. */
#define DURO__PG_AFTER_R "(SELECT COUNT(*) FROM r) >= 0 "

#define DURO__PG_STATEMENTS(X)                                                 \
    X(BEGIN_WRITE, "BEGIN")                                                    \
    X(BEGIN_READ, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")           \
    X(BEGIN_SNAPSHOT, "BEGIN ISOLATION LEVEL REPEATABLE READ")                 \
    DURO__SQL_END_STATEMENTS(X)                                                \
    /* instances */                                                            \
    X(INSTANCE_CREATE,                                                         \
      "INSERT INTO instances(instance_id, name, version, status, "             \
      "execution_id, created_ms, updated_ms, category, parent_instance, "      \
      "parent_execution, parent_event_id) "                                    \
      "VALUES($1::text, $2::text, $3::text, 1, 0, $4::bigint, $4::bigint, 0, " \
      "$5::text, $6::bigint, $7::bigint) "                                     \
      "ON CONFLICT(instance_id) DO NOTHING")                                   \
    X(INSTANCE_CURRENT,                                                        \
      "SELECT execution_id, status, deadline_ms FROM instances "               \
      "WHERE instance_id = $1::text")                                          \
    /* an idempotent START of an existing instance compares the names */       \
    X(INSTANCE_NAME,                                                           \
      "SELECT name FROM instances WHERE instance_id = $1::text")               \
    X(INSTANCE_SET_CURRENT,                                                    \
      "UPDATE instances SET execution_id = $2::bigint, updated_ms = "          \
      "$3::bigint WHERE instance_id = $1::text")                               \
    X(INSTANCE_WRITE_META,                                                     \
      "UPDATE instances SET status = $2::int, "                                \
      "name = COALESCE($3::text, name), "                                      \
      "version = COALESCE($4::text, version), output = $5::text, "             \
      "error = $6::text, category = $7::int, "                                 \
      "custom_status = CASE WHEN $8::int <> 0 THEN $9::text "                  \
      "ELSE custom_status END, "                                               \
      "parent_instance = COALESCE($10::text, parent_instance), "               \
      "parent_execution = CASE WHEN $10::text IS NULL THEN parent_execution "  \
      "ELSE $11::bigint END, "                                                 \
      "parent_event_id = CASE WHEN $10::text IS NULL THEN parent_event_id "    \
      "ELSE $12::bigint END, updated_ms = $13::bigint, "                       \
      "execution_id = CASE WHEN $16::bigint <> 0 THEN $16::bigint "            \
      "ELSE execution_id END, "                                                \
      "finished_ms = CASE WHEN $2::int IN (" DURO__ENDED_SQL                   \
      ") THEN $13::bigint "                                                    \
      "ELSE NULL END, "                                                        \
      "last_problem = CASE WHEN $14::int <> 0 THEN $15::text "                 \
      "ELSE last_problem END, "                                                \
      "last_problem_ms = CASE WHEN $14::int = 0 THEN last_problem_ms "         \
      "WHEN $15::text IS NULL THEN NULL ELSE $13::bigint END, "                \
      "next_attempt_ms = CASE WHEN $14::int <> 0 THEN NULL "                   \
      "ELSE next_attempt_ms END "                                              \
      "WHERE instance_id = $1::text")                                          \
    /* a CANCEL_INSTANCE records the first request on a live instance */       \
    X(INSTANCE_CANCEL_REQUEST,                                                 \
      "UPDATE instances SET cancel_requested_ms = $2::bigint, "                \
      "cancel_reason = $3::text, cancelled_by = $4::text "                     \
      "WHERE instance_id = $1::text AND status IN (" DURO__LIVE_SQL ") "       \
      "AND cancel_requested_ms IS NULL")                                       \
    /* a DEADLINE message sets the instance's deadline, once (version 12) */   \
    X(INSTANCE_SET_DEADLINE,                                                   \
      "UPDATE instances SET deadline_ms = $2::bigint "                         \
      "WHERE instance_id = $1::text AND deadline_ms = 0")                      \
    /* as SQLite's: only a live instance changes */                            \
    X(INSTANCE_SET_PROBLEM,                                                    \
      "UPDATE instances SET "                                                  \
      "last_problem = CASE WHEN status IN (" DURO__LIVE_SQL ") "               \
      "THEN $2::text ELSE last_problem END, "                                  \
      "last_problem_ms = CASE WHEN status NOT IN (" DURO__LIVE_SQL ") "        \
      "THEN last_problem_ms "                                                  \
      "WHEN $2::text IS NULL THEN NULL ELSE $3::bigint END, "                  \
      "next_attempt_ms = CASE WHEN status NOT IN (" DURO__LIVE_SQL ") "        \
      "THEN next_attempt_ms "                                                  \
      "WHEN $2::text IS NULL THEN NULL ELSE $4::bigint END "                   \
      "WHERE instance_id = $1::text")                                          \
    X(INSTANCE_INFO, DURO__PG_INFO_COLUMNS "WHERE i.instance_id = $1::text")   \
    X(LIST_ALL,                                                                \
      DURO__PG_INFO_COLUMNS DURO__PG_LIST_FILTER DURO__PG_LIST_ORDER)          \
    X(LIST_NAME, DURO__PG_INFO_COLUMNS DURO__PG_LIST_FILTER                    \
      "AND i.name = $5::text" DURO__PG_LIST_ORDER)                             \
    X(LIST_STATUS, DURO__PG_INFO_COLUMNS DURO__PG_LIST_FILTER                  \
      "AND i.status = $6::int" DURO__PG_LIST_ORDER)                            \
    X(LIST_NAME_STATUS, DURO__PG_INFO_COLUMNS DURO__PG_LIST_FILTER             \
      "AND i.name = $5::text AND i.status = $6::int" DURO__PG_LIST_ORDER)      \
    /* executions and history */                                               \
    X(EXEC_EVENT_COUNT,                                                        \
      "SELECT (SELECT COALESCE(MAX(event_id), 0) FROM history "                \
      "WHERE instance_id = $1::text AND execution_id = $2::bigint) "           \
      "FROM executions "                                                       \
      "WHERE instance_id = $1::text AND execution_id = $2::bigint")            \
    X(EXEC_CREATE,                                                             \
      "INSERT INTO executions(instance_id, execution_id, status, name, "       \
      "version, started_ms, output, error, category, completed_ms) "           \
      "VALUES($1::text, $2::bigint, $6::int, "                                 \
      "COALESCE($3::text, (SELECT name FROM instances "                        \
      "WHERE instance_id = $1::text)), "                                       \
      "COALESCE($4::text, (SELECT version FROM instances "                     \
      "WHERE instance_id = $1::text)), $5::bigint, $7::text, $8::text, "       \
      "$9::int, $10::bigint)")                                                 \
    X(EXEC_WRITE_META,                                                         \
      "UPDATE executions SET status = $3::int, "                               \
      "name = COALESCE($4::text, name), "                                      \
      "version = COALESCE($5::text, version), output = $6::text, "             \
      "error = $7::text, category = $8::int, completed_ms = $9::bigint "       \
      "WHERE instance_id = $1::text AND execution_id = $2::bigint")            \
    X(HISTORY_INSERT,                                                          \
      "INSERT INTO history(instance_id, "                                      \
      "execution_id, " DURO__PG_HISTORY_COLUMNS                                \
      ") VALUES($1::text, $2::bigint, $3::bigint, "                            \
      "$4::int, $5::bigint, $6::bigint, $7::text, $8::text, $9::text, "        \
      "$10::text, $11::int, $12::text, $13::text, $14::text, $15::bigint, "    \
      "$16::bigint, $17::bigint, $18::bigint, $19::bigint, $20::bigint, "      \
      "$21::bigint)")                                                          \
    /* many events in one statement: $3..$21 are arrays, one element per       \
     * event, of the columns DURO__PG_HISTORY_COLUMNS in order */              \
    X(HISTORY_INSERT_MANY,                                                     \
      "INSERT INTO history(instance_id, "                                      \
      "execution_id, " DURO__PG_HISTORY_COLUMNS                                \
      ") SELECT $1::text, $2::bigint, u.* FROM unnest($3::bigint[], "          \
      "$4::int[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], "        \
      "$9::text[], $10::text[], $11::int[], $12::text[], $13::text[], "        \
      "$14::text[], $15::bigint[], $16::bigint[], $17::bigint[], "             \
      "$18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[]) AS u")      \
    /* the events of many instances: HISTORY_INSERT_MANY with the instance     \
     * ids ($1) and executions ($2) arrays too; and with them the work items   \
     * of those turns, one statement for both tables (one executor start and   \
     * one round trip fewer a batch): WQ_INSERT's $1..$7 as arrays in          \
     * $22..$28, $29 the time. Either set may be empty ({} literals). */       \
    X(HISTORY_INSERT_BATCH,                                                    \
      "WITH w AS (INSERT INTO worker_queue(instance_id, execution_id, "        \
      "activity_id, name, version, payload, attempt, enqueued_ms, "            \
      "available_at) SELECT u.*, $29::bigint, $29::bigint FROM "               \
      "unnest($22::text[], $23::bigint[], $24::bigint[], $25::text[], "        \
      "$26::text[], $27::text[], $28::bigint[]) AS u) "                        \
      "INSERT INTO history(instance_id, "                                      \
      "execution_id, " DURO__PG_HISTORY_COLUMNS                                \
      ") SELECT u.* FROM unnest($1::text[], $2::bigint[], $3::bigint[], "      \
      "$4::int[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], "        \
      "$9::text[], $10::text[], $11::int[], $12::text[], $13::text[], "        \
      "$14::text[], $15::bigint[], $16::bigint[], $17::bigint[], "             \
      "$18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[]) AS u")      \
    /* the executions that turns of a batch begin (EXEC_CREATE and             \
     * INSTANCE_SET_CURRENT of each, in one statement): $1 instances, $2       \
     * executions, $3 names, $4 versions (NULL: the instance's), $5 1 where    \
     * the turn's META_WRITE_MANY sets the instance's execution instead (one   \
     * row version and its index entries fewer: a first turn writes its        \
     * status too), $6 now. The INSERT reads the instance rows as they were    \
     * before the UPDATE, which changes neither name nor version. */           \
    X(EXEC_CREATE_MANY,                                                        \
      "WITH k AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], " \
      "$4::text[], $5::int[]) "                                                \
      "AS k(instance_id, execution_id, name, version, later)), "               \
      "x AS (INSERT INTO executions(instance_id, execution_id, status, name, " \
      "version, started_ms, category) SELECT k.instance_id, k.execution_id, "  \
      "2, COALESCE(k.name, i.name), COALESCE(k.version, i.version), "          \
      "$6::bigint, 0 FROM k LEFT JOIN instances AS i "                         \
      "ON i.instance_id = k.instance_id) "                                     \
      "UPDATE instances AS i SET execution_id = k.execution_id, "              \
      "updated_ms = $6::bigint FROM k WHERE i.instance_id = k.instance_id "    \
      "AND k.later = 0")                                                       \
    /* the metadata that turns of a batch write (INSTANCE_WRITE_META and       \
     * EXEC_WRITE_META of each), and the messages their endings leave dead     \
     * (OQ_DELETE_INSTANCE, or OQ_DELETE_EXECUTION after a continue-as-new),   \
     * in one statement: $1..$18 arrays, one element per turn, as the          \
     * columns of k below ($3 the instance's status, $4 the execution's; $7    \
     * the instance's output, $8 the execution's; $18 1 when the execution     \
     * ended; $19 the execution the turn began, whose EXEC_CREATE_MANY left    \
     * the instance's current execution to this statement, else 0); $20        \
     * now. No execution row changes where $2 is 0. */                         \
    X(META_WRITE_MANY,                                                         \
      "WITH k AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], "  \
      "$4::int[], $5::text[], $6::text[], $7::text[], $8::text[], "            \
      "$9::text[], $10::int[], $11::int[], $12::text[], $13::text[], "         \
      "$14::bigint[], $15::bigint[], $16::int[], $17::text[], $18::int[], "    \
      "$19::bigint[]) "                                                        \
      "AS k(instance_id, execution_id, istatus, estatus, name, version, "      \
      "ioutput, eoutput, error, category, cs_set, cs, parent, "                \
      "parent_execution, parent_event_id, problem_set, problem, finished, "    \
      "began)), "                                                              \
      "e AS (UPDATE executions AS e SET status = k.estatus, "                  \
      "name = COALESCE(k.name, e.name), "                                      \
      "version = COALESCE(k.version, e.version), output = k.eoutput, "         \
      "error = k.error, category = k.category, completed_ms = CASE WHEN "      \
      "k.finished <> 0 THEN $20::bigint ELSE NULL END FROM k "                 \
      "WHERE k.execution_id <> 0 AND e.instance_id = k.instance_id "           \
      "AND e.execution_id = k.execution_id), "                                 \
      "d AS (DELETE FROM orchestrator_queue AS q USING k "                     \
      "WHERE q.instance_id = k.instance_id AND (k.estatus IN "                 \
      "(" DURO__ENDED_SQL ") OR (k.estatus = 6 "                               \
      "AND q.execution_id = k.execution_id "                                   \
      "AND q.kind IN (" DURO__PG_EXECUTION_KINDS ")))) "                       \
      "UPDATE instances AS i SET status = k.istatus, "                         \
      "execution_id = CASE WHEN k.began <> 0 THEN k.began "                    \
      "ELSE i.execution_id END, "                                              \
      "name = COALESCE(k.name, i.name), "                                      \
      "version = COALESCE(k.version, i.version), output = k.ioutput, "         \
      "error = k.error, category = k.category, "                               \
      "custom_status = CASE WHEN k.cs_set <> 0 THEN k.cs "                     \
      "ELSE i.custom_status END, "                                             \
      "parent_instance = COALESCE(k.parent, i.parent_instance), "              \
      "parent_execution = CASE WHEN k.parent IS NULL "                         \
      "THEN i.parent_execution ELSE k.parent_execution END, "                  \
      "parent_event_id = CASE WHEN k.parent IS NULL "                          \
      "THEN i.parent_event_id ELSE k.parent_event_id END, "                    \
      "updated_ms = $20::bigint, "                                             \
      "finished_ms = CASE WHEN k.istatus IN (" DURO__ENDED_SQL ") "            \
      "THEN $20::bigint ELSE NULL END, "                                       \
      "last_problem = CASE WHEN k.problem_set <> 0 THEN k.problem "            \
      "ELSE i.last_problem END, "                                              \
      "last_problem_ms = CASE WHEN k.problem_set = 0 THEN i.last_problem_ms "  \
      "WHEN k.problem IS NULL THEN NULL ELSE $20::bigint END, "                \
      "next_attempt_ms = CASE WHEN k.problem_set <> 0 THEN NULL "              \
      "ELSE i.next_attempt_ms END "                                            \
      "FROM k WHERE i.instance_id = k.instance_id")                            \
    /* the history tails of many claimed items in one statement: $1            \
     * instances, $2 executions, $3 the events already held (arrays in the     \
     * same order); rows DURO__PG_HISTORY_COLUMNS, then (column 19) the        \
     * 1-based place of their item, in item and event order */                 \
    X(HISTORY_READ_MANY,                                                       \
      "SELECT h.*, k.ord FROM unnest($1::text[], $2::bigint[], $3::bigint[]) " \
      "WITH ORDINALITY AS k(instance_id, execution_id, after, ord) "           \
      "CROSS JOIN LATERAL (SELECT " DURO__PG_HISTORY_COLUMNS " FROM history "  \
      "WHERE instance_id = k.instance_id AND execution_id = k.execution_id "   \
      "AND event_id > k.after ORDER BY event_id OFFSET 0) AS h "               \
      "ORDER BY k.ord, h.event_id")                                            \
    X(HISTORY_READ,                                                            \
      "SELECT " DURO__PG_HISTORY_COLUMNS " FROM history "                      \
      "WHERE instance_id = $1::text AND execution_id = $2::bigint "            \
      "AND event_id > $3::bigint ORDER BY event_id")                           \
    /* the ActivityCancelRequested (kind 10) of an activity: one probe of the  \
     * partial index history_activity_cancel */                                \
    X(HISTORY_CANCEL_REASON,                                                   \
      "SELECT reason FROM history WHERE instance_id = $1::text "               \
      "AND execution_id = $2::bigint AND source_event_id = $3::bigint "        \
      "AND kind = 10 LIMIT 1")                                                 \
    /* orchestrator queue and its per-instance readiness/lock rows */          \
    /* the completion's run times are $24, $25, as in DURO__PG_WQ_ACK_CTE */   \
    X(OQ_INSERT,                                                               \
      "INSERT INTO orchestrator_queue(" DURO__PG_QUEUE_COLUMNS                 \
      ", enqueued_ms, visible_at) VALUES($1::int, $2::text, $3::bigint, "      \
      "$4::bigint, $5::text, $6::text, $7::text, $8::text, $9::int, "          \
      "$10::text, $11::text, $12::text, $13::bigint, $14::bigint, "            \
      "$15::bigint, $16::bigint, $17::bigint, $24::bigint, $25::bigint, "      \
      "$18::bigint, $19::bigint)")                                             \
    X(OQ_UNTAG, "UPDATE orchestrator_queue SET lock_token = NULL "             \
                "WHERE instance_id = $1::text AND lock_token = $2::text")      \
    /* pass_orchestration_item: the fetch did not count */                     \
    X(OQ_UNTAG_UNCOUNT,                                                        \
      "UPDATE orchestrator_queue SET lock_token = NULL, "                      \
      "fetch_count = GREATEST(fetch_count - 1, 0) "                            \
      "WHERE instance_id = $1::text AND lock_token = $2::text")                \
    /* an ack that ends the instance: nothing queued for it is live */         \
    X(OQ_DELETE_INSTANCE,                                                      \
      "DELETE FROM orchestrator_queue WHERE instance_id = $1::text")           \
    /* continue-as-new: timers and completions of the ended execution */       \
    X(OQ_DELETE_EXECUTION,                                                     \
      "DELETE FROM orchestrator_queue WHERE instance_id = $1::text "           \
      "AND execution_id = $2::bigint AND kind IN (" DURO__PG_EXECUTION_KINDS   \
      ")")                                                                     \
    X(OQ_MIN_VISIBLE, "SELECT MIN(visible_at) FROM orchestrator_queue "        \
                      "WHERE instance_id = $1::text")                          \
    X(OQ_COUNT, "SELECT COUNT(*) FROM orchestrator_queue")                     \
    X(OQ_COUNT_INSTANCE, "SELECT COUNT(*) FROM orchestrator_queue "            \
                         "WHERE instance_id = $1::text")                       \
    X(READY_ENQUEUE,                                                           \
      "INSERT INTO orchestrator_ready AS r(instance_id, "                      \
      "ready_at) VALUES($1::text, $2::bigint) " DURO__PG_READY_UPSERT_HOLD(    \
          "CASE WHEN $3::bool THEN 0 ELSE COALESCE(r.locked_until, 0) END"))   \
    /* the whole claim in one statement: lock the oldest ready instance no     \
     * other transaction is claiming or releasing ($1 now, $2 token hex, $3    \
     * locked until), tag its visible messages with the token and return       \
     * them in order (columns 0..17: DURO__PG_QUEUE_COLUMNS, fetch_count),     \
     * with the ready row's id, instance id and token (18..20), the            \
     * instance row and its event count (22..34) and the messages' run times   \
     * (35, 36: started_ms, finished_ms). An instance ready with               \
     * nothing visible gives one row of NULL messages; no instance, one row    \
     * with only column 21: the earliest ready_at (NULL: none) */              \
    X(READY_CLAIM, DURO__PG_READY_CLAIM_SQL("(SELECT 1) AS one"))              \
    /* the same as a transaction's only write (fetch_orchestration_item):      \
     * its commit does not wait for the WAL flush (DURO__PG_ASYNC_ONE) */      \
    X(READY_CLAIM_ASYNC, DURO__PG_READY_CLAIM_SQL(DURO__PG_ASYNC_ONE))         \
    /* up to $4 instances at once (ack_and_fetch_orchestration_items): rows    \
     * as READY_CLAIM's, each instance's together */                           \
    X(READY_CLAIM_MANY, DURO__PG_READY_CLAIM_MANY_SQL("(SELECT 1) AS one"))    \
    X(READY_CLAIM_MANY_ASYNC,                                                  \
      DURO__PG_READY_CLAIM_MANY_SQL(DURO__PG_ASYNC_ONE))                       \
    /* the lock of an instance, its current execution, whether that has a      \
     * row and how many events it holds; the ready row is locked until the     \
     * transaction ends ($1 ready id, $2 token) */                             \
    X(READY_HOLDER_CURRENT,                                                    \
      "SELECT r.instance_id, r.locked_until, i.execution_id, "                 \
      "i.instance_id IS NOT NULL, EXISTS (SELECT 1 FROM executions AS e "      \
      "WHERE e.instance_id = r.instance_id "                                   \
      "AND e.execution_id = i.execution_id), "                                 \
      "(SELECT COALESCE(MAX(h.event_id), 0) FROM history AS h "                \
      "WHERE h.instance_id = r.instance_id "                                   \
      "AND h.execution_id = i.execution_id) FROM orchestrator_ready AS r "     \
      "LEFT JOIN instances AS i ON i.instance_id = r.instance_id "             \
      "WHERE r.id = $1::bigint AND r.lock_token = $2::text FOR UPDATE OF r")   \
    /* the end of an ack: delete the messages it consumed ($1 instance, $2     \
     * token) and release the lock of ready row $3: ready at the earliest      \
     * remaining message, or no row when none remains. Returns that time.      \
     * The deleted messages are still in the statement's snapshot, hence       \
     * the token test in m. */                                                 \
    X(READY_ACK_SETTLE,                                                        \
      "WITH d AS (DELETE FROM orchestrator_queue WHERE instance_id = "         \
      "$1::text "                                                              \
      "AND lock_token = $2::text), "                                           \
      "m AS (SELECT MIN(visible_at) AS v FROM orchestrator_queue "             \
      "WHERE instance_id = $1::text AND lock_token IS DISTINCT FROM "          \
      "$2::text), "                                                            \
      "x AS (DELETE FROM orchestrator_ready WHERE id = $3::bigint "            \
      "AND (SELECT v FROM m) IS NULL), "                                       \
      "u AS (UPDATE orchestrator_ready SET lock_token = NULL, "                \
      "locked_until = NULL, ready_at = (SELECT v FROM m) "                     \
      "WHERE id = $3::bigint AND (SELECT v FROM m) IS NOT NULL) "              \
      "SELECT v FROM m")                                                       \
    /* many turns in one transaction (ack_and_fetch_orchestration_items):      \
     * READY_HOLDER_CURRENT for the ready ids $1 and tokens $2 (arrays, in     \
     * the same order), one row per lock still held, with its 1-based place    \
     * first; locked in instance id order, as every statement that locks       \
     * several readiness rows, so that two never wait for each other */        \
    X(READY_HOLDER_MANY,                                                       \
      "SELECT k.ord, r.instance_id, r.locked_until, i.execution_id, "          \
      "i.instance_id IS NOT NULL, EXISTS (SELECT 1 FROM executions AS e "      \
      "WHERE e.instance_id = r.instance_id "                                   \
      "AND e.execution_id = i.execution_id), "                                 \
      "(SELECT COALESCE(MAX(h.event_id), 0) FROM history AS h "                \
      "WHERE h.instance_id = r.instance_id "                                   \
      "AND h.execution_id = i.execution_id) "                                  \
      "FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY "                 \
      "AS k(id, token, ord) "                                                  \
      "JOIN orchestrator_ready AS r ON r.id = k.id AND r.lock_token = "        \
      "k.token "                                                               \
      "LEFT JOIN instances AS i ON i.instance_id = r.instance_id "             \
      "ORDER BY r.instance_id FOR UPDATE OF r")                                \
    /* READY_ACK_SETTLE for many instances ($1 instance ids, $2 tokens, $3     \
     * ready ids: arrays in the same order); returns how many still have       \
     * messages */                                                             \
    X(READY_ACK_SETTLE_MANY,                                                   \
      "WITH k AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) " \
      "AS k(instance_id, token, ready_id)), "                                  \
      "d AS (DELETE FROM orchestrator_queue AS q USING k "                     \
      "WHERE q.instance_id = k.instance_id AND q.lock_token = k.token), "      \
      "m AS (SELECT k.ready_id, (SELECT MIN(q.visible_at) "                    \
      "FROM orchestrator_queue AS q WHERE q.instance_id = k.instance_id "      \
      "AND q.lock_token IS DISTINCT FROM k.token) AS v FROM k), "              \
      "x AS (DELETE FROM orchestrator_ready AS r USING m "                     \
      "WHERE r.id = m.ready_id AND m.v IS NULL), "                             \
      "u AS (UPDATE orchestrator_ready AS r SET lock_token = NULL, "           \
      "locked_until = NULL, ready_at = m.v FROM m "                            \
      "WHERE r.id = m.ready_id AND m.v IS NOT NULL) "                          \
      "SELECT COUNT(m.v) FROM m")                                              \
    /* renewals never wait for a row lock (NOWAIT: 55P03, DURO_BUSY,           \
     * retried soon): a renewal queued behind a session that holds the row     \
     * (stopped in the middle of its transaction) held up every renewal of     \
     * its runtime after it */                                                 \
    X(READY_RENEW,                                                             \
      "UPDATE orchestrator_ready SET locked_until = $3::bigint, "              \
      "ready_at = $3::bigint WHERE id = (SELECT id FROM orchestrator_ready "   \
      "WHERE id = $1::bigint AND lock_token = $2::text "                       \
      "AND locked_until > $4::bigint FOR NO KEY UPDATE NOWAIT)")               \
    X(READY_SET, "UPDATE orchestrator_ready SET lock_token = NULL, "           \
                 "locked_until = $2::bigint, ready_at = $3::bigint "           \
                 "WHERE id = $1::bigint")                                      \
    X(READY_DELETE, "DELETE FROM orchestrator_ready WHERE id = $1::bigint")    \
    X(READY_MIN, "SELECT MIN(ready_at) FROM orchestrator_ready")               \
    /* the locks a claim whose outcome is unknown may hold ($1 its token       \
     * hex; its answer was lost, so no caller holds them): pg_release.c.       \
     * A scan of the table, on that rare path only */                          \
    X(READY_CLAIMED_BY, "SELECT lock_token FROM orchestrator_ready "           \
                        "WHERE lock_token IS NOT NULL "                        \
                        "AND right(lock_token, 33) = '.' || $1::text")         \
    /* worker queue */                                                         \
    X(WQ_INSERT,                                                               \
      "INSERT INTO worker_queue(instance_id, execution_id, activity_id, "      \
      "name, version, payload, attempt, enqueued_ms, available_at) "           \
      "VALUES($1::text, $2::bigint, $3::bigint, $4::text, $5::text, "          \
      "$6::text, $7::bigint, $8::bigint, $8::bigint)")                         \
    /* the claim: the oldest fetchable row no other transaction holds; one     \
     * row, the claimed item's columns, or NULLs and (column 9) the earliest   \
     * time a row becomes due when none was claimable */                       \
    X(WQ_FETCH, DURO__PG_WQ_FETCH_SQL("(SELECT 1) AS one"))                    \
    /* the same as its own transaction (fetch_work_item): its commit does      \
     * not wait for the WAL flush (DURO__PG_ASYNC_ONE) */                      \
    X(WQ_FETCH_ASYNC, DURO__PG_WQ_FETCH_SQL(DURO__PG_ASYNC_ONE))               \
    X(WQ_ACK, "DELETE FROM worker_queue WHERE id = $1::bigint "                \
              "AND lock_token = $2::text")                                     \
    /* ack with a completion, one statement: delete the row the token          \
     * holds ($20, $21) and, only if it did, enqueue the completion ($1..$19,  \
     * $24, $25 as OQ_INSERT) and make its instance ready. Returns the rows    \
     * deleted. */                                                             \
    X(WQ_ACK_COMPLETE, DURO__PG_WQ_ACK_CTE                                     \
      "SELECT (SELECT COUNT(*) FROM a) FROM " DURO__PG_ASYNC_ONE)              \
    /* the same, then the claim of WQ_FETCH ($22 token, $23 locked until,      \
     * visible by $18) when the ack deleted its row: one row, the claimed      \
     * item's columns (NULL when none), the rows deleted, and when nothing     \
     * was claimed the earliest time another row becomes due */                \
    X(WQ_ACK_COMPLETE_FETCH, DURO__PG_WQ_ACK_CTE                               \
      ", f AS (UPDATE worker_queue SET lock_token = 'w' || id || '.' || "      \
      "$22::text, locked_until = $23::bigint, available_at = $23::bigint, "    \
      "fetch_count = fetch_count + 1 "                                         \
      "WHERE id = (SELECT id FROM worker_queue "                               \
      "WHERE available_at <= $18::bigint AND id <> $20::bigint "               \
      "AND " DURO__PG_AFTER_R                                                  \
      "ORDER BY available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "             \
      "AND EXISTS (SELECT 1 FROM a) "                                          \
      "RETURNING instance_id, execution_id, activity_id, name, version, "      \
      "payload, attempt, fetch_count, lock_token) "                            \
      "SELECT f.*, (SELECT COUNT(*) FROM a), CASE WHEN f.lock_token IS NULL "  \
      "THEN (SELECT MIN(available_at) FROM worker_queue "                      \
      "WHERE id <> $20::bigint) END FROM " DURO__PG_ASYNC_ONE                  \
      " LEFT JOIN f ON true")                                                  \
    /* the acks of many activities from as many threads, with their            \
     * completions, and the claims of as many next items, in one statement     \
     * (ack_and_fetch_work_item, combined): $1 row ids, $2 tokens, $3..$21     \
     * the completions' DURO__PG_QUEUE_COLUMNS as arrays, $22 now, $23 the     \
     * token hex, $24 locked until. Rows: (columns 9, 10) part 0 with an       \
     * acked row id (NULL when none was), part 1 with a claimed item in        \
     * columns 0..8 as WQ_FETCH's, part 2 with the earliest due time when      \
     * nothing was claimed. Commits without waiting for the flush, as          \
     * WQ_ACK_COMPLETE_FETCH (DURO__PG_ASYNC_ONE). */                          \
    X(WQ_ACK_COMPLETE_FETCH_MANY,                                              \
      "WITH k AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], "  \
      "$4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], "       \
      "$9::text[], $10::text[], $11::int[], $12::text[], $13::text[], "        \
      "$14::text[], $15::bigint[], $16::bigint[], $17::bigint[], "             \
      "$18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[]) "           \
      "AS k(id, token, " DURO__PG_QUEUE_COLUMNS ")), "                         \
      "a AS (DELETE FROM worker_queue AS w USING k "                           \
      "WHERE w.id = k.id AND w.lock_token = k.token RETURNING w.id), "         \
      "q AS (INSERT INTO orchestrator_queue(" DURO__PG_QUEUE_COLUMNS           \
      ", enqueued_ms, visible_at) SELECT k.kind, k.instance_id, "              \
      "k.execution_id, k.source_id, k.name, k.version, k.payload, k.error, "   \
      "k.category, k.reason, k.requested_by, k.parent_instance, "              \
      "k.parent_execution, k.parent_event_id, k.fire_at_ms, k.attempt, "       \
      "k.flags, k.started_ms, k.finished_ms, $22::bigint, $22::bigint "        \
      "FROM k JOIN a ON a.id = k.id), "                                        \
      "r AS (INSERT INTO orchestrator_ready AS r(instance_id, ready_at) "      \
      "SELECT DISTINCT k.instance_id, $22::bigint FROM k JOIN a "              \
      "ON a.id = k.id ORDER BY 1 " DURO__PG_READY_UPSERT " RETURNING 1), "     \
      "c AS (SELECT id FROM worker_queue WHERE available_at <= $22::bigint "   \
      "AND id <> ALL($1::bigint[]) AND " DURO__PG_AFTER_R                      \
      "ORDER BY available_at, id "                                             \
      "LIMIT (SELECT COUNT(*) FROM a) FOR UPDATE SKIP LOCKED), "               \
      "f AS (UPDATE worker_queue AS w SET lock_token = 'w' || w.id || '.' "    \
      "|| $23::text, locked_until = $24::bigint, available_at = $24::bigint, " \
      "fetch_count = w.fetch_count + 1 WHERE w.id = ANY(ARRAY(SELECT id "      \
      "FROM c)) RETURNING w.instance_id, w.execution_id, w.activity_id, "      \
      "w.name, w.version, w.payload, w.attempt, w.fetch_count, "               \
      "w.lock_token) "                                                         \
      "SELECT NULL::text, NULL::bigint, NULL::bigint, NULL::text, "            \
      "NULL::text, NULL::text, NULL::bigint, NULL::int, NULL::text, 0, a.id "  \
      "FROM " DURO__PG_ASYNC_ONE " LEFT JOIN a ON true "                       \
      "UNION ALL SELECT f.*, 1, NULL FROM f "                                  \
      "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "      \
      "NULL, 2, (SELECT MIN(available_at) FROM worker_queue "                  \
      "WHERE id <> ALL($1::bigint[])) WHERE NOT EXISTS (SELECT 1 FROM f)")     \
    /* renew and abandon need only the token: an expired lock that no other    \
     * fetch took still holds the row (a fetch replaces the token); a          \
     * renewal never waits for the row's lock (NOWAIT, as READY_RENEW) */      \
    X(WQ_RENEW,                                                                \
      "UPDATE worker_queue SET locked_until = $3::bigint, "                    \
      "available_at = $3::bigint WHERE id = (SELECT id FROM worker_queue "     \
      "WHERE id = $1::bigint AND lock_token = $2::text "                       \
      "FOR NO KEY UPDATE NOWAIT)")                                             \
    X(WQ_ABANDON,                                                              \
      "UPDATE worker_queue SET lock_token = NULL, locked_until = NULL, "       \
      "available_at = $3::bigint WHERE id = $1::bigint "                       \
      "AND lock_token = $2::text")                                             \
    X(WQ_EXISTS, "SELECT 1 FROM worker_queue WHERE id = $1::bigint")           \
    /* WQ_ABANDON of rows by their tokens ($1 row ids, $2 tokens: arrays in    \
     * the same order; $3 available from): the rows of activity acks a         \
     * server crash may have lost (pg_release.c) */                            \
    X(WQ_RELEASE_ACKED,                                                        \
      "UPDATE worker_queue AS w SET lock_token = NULL, locked_until = NULL, "  \
      "available_at = $3::bigint FROM unnest($1::bigint[], $2::text[]) "       \
      "AS k(id, token) WHERE w.id = k.id AND w.lock_token = k.token")          \
    /* WQ_ABANDON of every row a claim whose outcome is unknown may have       \
     * locked ($1 its token hex, $2 available from), as READY_CLAIMED_BY */    \
    X(WQ_RELEASE_CLAIMED,                                                      \
      "UPDATE worker_queue SET lock_token = NULL, locked_until = NULL, "       \
      "available_at = $2::bigint WHERE lock_token IS NOT NULL "                \
      "AND right(lock_token, 33) = '.' || $1::text")                           \
    /* check_work_item_locks: does the token still hold its row? */            \
    X(WQ_HELD, "SELECT 1 FROM worker_queue WHERE id = $1::bigint "             \
               "AND lock_token = $2::text")                                    \
    X(WQ_CANCEL,                                                               \
      "DELETE FROM worker_queue WHERE instance_id = $1::text "                 \
      "AND execution_id = $2::bigint AND activity_id = ANY($3::bigint[])")     \
    X(WQ_MIN, "SELECT MIN(available_at) FROM worker_queue")                    \
    X(WQ_COUNT, "SELECT COUNT(*) FROM worker_queue")                           \
    X(WQ_COUNT_INSTANCE,                                                       \
      "SELECT COUNT(*) FROM worker_queue WHERE instance_id = $1::text")        \
    /* management */                                                           \
    X(DELETE_CHECK, DURO__PG_TREE                                              \
      "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status NOT IN "                 \
      "(" DURO__ENDED_SQL ") "                                                 \
      "THEN 1 ELSE 0 END), 0) FROM instances WHERE " DURO__PG_IN_TREE)         \
    X(DELETE_HISTORY,                                                          \
      DURO__PG_TREE "DELETE FROM history WHERE " DURO__PG_IN_TREE)             \
    X(DELETE_EXECUTIONS,                                                       \
      DURO__PG_TREE "DELETE FROM executions WHERE " DURO__PG_IN_TREE)          \
    X(DELETE_MESSAGES,                                                         \
      DURO__PG_TREE "DELETE FROM orchestrator_queue WHERE " DURO__PG_IN_TREE)  \
    X(DELETE_READY,                                                            \
      DURO__PG_TREE "DELETE FROM orchestrator_ready WHERE " DURO__PG_IN_TREE)  \
    X(DELETE_WORK,                                                             \
      DURO__PG_TREE "DELETE FROM worker_queue WHERE " DURO__PG_IN_TREE)        \
    X(DELETE_EVENT_IDS,                                                        \
      DURO__PG_TREE "DELETE FROM event_ids WHERE " DURO__PG_IN_TREE)           \
    X(DELETE_INSTANCES,                                                        \
      DURO__PG_TREE "DELETE FROM instances WHERE " DURO__PG_IN_TREE)           \
    X(PRUNE_HISTORY,                                                           \
      "DELETE FROM history WHERE instance_id = $1::text AND execution_id IN "  \
      "(SELECT execution_id FROM executions WHERE instance_id = $1::text "     \
      "AND execution_id <= $2::bigint AND status IN (" DURO__ENDED_SQL         \
      ", 6))")                                                                 \
    X(PRUNE_EXECUTIONS,                                                        \
      "DELETE FROM executions WHERE instance_id = $1::text "                   \
      "AND execution_id <= $2::bigint AND status IN (" DURO__ENDED_SQL ", 6)") \
    DURO__PG_BULK_STATEMENTS(X)                                                \
    DURO__PG_QUERY_STATEMENTS(X)                                               \
    DURO__PG_RUNTIME_STATEMENTS(X)                                             \
    DURO__PG_SCHEDULE_STATEMENTS(X)

/* The live runtimes (sql/runtimes.c; provider contract version 12), as
 * SQLite's. */
#define DURO__PG_RUNTIME_STATEMENTS(X)                                         \
    X(RUNTIME_UPSERT,                                                          \
      "INSERT INTO runtimes(" DURO__SQL_RUNTIME_COLUMNS ") "                   \
      "VALUES($1::text, $2::text, $3::bigint, $4::bigint, $5::bigint, "        \
      "$6::bigint, $7::text, $8::text) " DURO__SQL_RUNTIME_UPSERT_SET)         \
    X(RUNTIME_EXPIRE,                                                          \
      "DELETE FROM runtimes WHERE NOT (" DURO__SQL_RUNTIME_LIVE "$1::bigint)") \
    X(RUNTIME_DELETE, "DELETE FROM runtimes WHERE runtime_id = $1::text")      \
    X(RUNTIME_LIST, "SELECT " DURO__SQL_RUNTIME_COLUMNS " FROM runtimes "      \
                    "WHERE " DURO__SQL_RUNTIME_LIVE "$1::bigint "              \
                    "ORDER BY started_ms, runtime_id")

/* Schedules (sql/schedules.c, provider contract version 13). */
#define DURO__PG_SCHEDULE_STATEMENTS(X)                                        \
    X(SCHEDULE_CREATE,                                                         \
      "INSERT INTO schedules(id, spec, spec_version, row_version, next_ms, "   \
      "due_ms, buffered_ms, paused, note, fires, skips, created_ms, "          \
      "updated_ms) VALUES($1::text, $2::text, $3::bigint, 1, $4::bigint, "     \
      "NULLIF($5::bigint, 0), $6::bigint, $7::int, $8::text, 0, 0, "           \
      "$9::bigint, $9::bigint) ON CONFLICT(id) DO NOTHING")                    \
    X(SCHEDULE_UPDATE,                                                         \
      "UPDATE schedules SET spec = $2::text, spec_version = $3::bigint, "      \
      "next_ms = $4::bigint, due_ms = NULLIF($5::bigint, 0), buffered_ms = "   \
      "$6::bigint, paused = $7::int, note = $8::text, updated_ms = "           \
      "$9::bigint, row_version = $10::bigint + 1 WHERE id = $1::text AND "     \
      "row_version = $10::bigint")                                             \
    X(SCHEDULE_EXISTS, "SELECT 1 FROM schedules WHERE id = $1::text")          \
    X(SCHEDULE_DELETE, "DELETE FROM schedules WHERE id = $1::text")            \
    X(SCHEDULE_FIRES_DELETE,                                                   \
      "DELETE FROM schedule_fires WHERE schedule_id = $1::text")               \
    X(SCHEDULE_GET,                                                            \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "COALESCE(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "             \
      "COALESCE(i.status, 0), s.paused, s.note, s.fires, s.skips, "            \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.id = $1::text")      \
    X(SCHEDULE_LIST,                                                           \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "COALESCE(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "             \
      "COALESCE(i.status, 0), s.paused, s.note, s.fires, s.skips, "            \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.id > $1::text "      \
      "ORDER BY s.id LIMIT $2::bigint")                                        \
    X(SCHEDULE_DUE,                                                            \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "COALESCE(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "             \
      "COALESCE(i.status, 0), s.paused, s.note, s.fires, s.skips, "            \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.paused = 0 AND "     \
      "s.due_ms <= $1::bigint ORDER BY s.due_ms LIMIT $2::bigint")             \
    X(SCHEDULE_NEXT_DUE,                                                       \
      "SELECT MIN(due_ms) FROM schedules WHERE paused = 0 AND due_ms > "       \
      "$1::bigint")                                                            \
    X(SCHEDULE_CLAIM,                                                          \
      "UPDATE schedules SET row_version = $2::bigint + 1 WHERE id = "          \
      "$1::text AND row_version = $2::bigint")                                 \
    X(SCHEDULE_APPLY,                                                          \
      "UPDATE schedules SET next_ms = $2::bigint, due_ms = "                   \
      "NULLIF($3::bigint, 0), buffered_ms = $4::bigint, last_instance_id = "   \
      "COALESCE($5::text, last_instance_id), fires = fires + $6::bigint, "     \
      "skips = skips + $7::bigint, updated_ms = $8::bigint WHERE id = "        \
      "$1::text")                                                              \
    X(SCHEDULE_FIRE_INSERT,                                                    \
      "INSERT INTO schedule_fires(schedule_id, time_ms, action, count, "       \
      "instance_id, why, recorded_ms) VALUES($1::text, $2::bigint, $3::int, "  \
      "$4::bigint, $5::text, $6::text, $7::bigint)")                           \
    X(SCHEDULE_FIRES_TRIM,                                                     \
      "DELETE FROM schedule_fires WHERE schedule_id = $1::text AND seq <= "    \
      "(SELECT seq FROM schedule_fires WHERE schedule_id = $1::text ORDER "    \
      "BY seq DESC LIMIT 1 OFFSET $2::bigint)")                                \
    X(SCHEDULE_FIRES_LIST,                                                     \
      "SELECT f.action, f.time_ms, f.count, f.why, f.instance_id, "            \
      "f.recorded_ms, COALESCE(i.status, 0) FROM schedule_fires AS f LEFT "    \
      "JOIN instances AS i ON i.instance_id = f.instance_id WHERE "            \
      "f.schedule_id = $1::text ORDER BY f.seq DESC LIMIT $2::bigint")

/* Operations on many instances (sql/many.c). cancel_instances,
 * control_instances and the deletes of a purge name their instances in
 * $1, a text[] array; the sweeps' batches are JSON arrays of [id,
 * created_ms] pairs, so an instance deleted and created again under the
 * same id after the sweep began is not taken for the one that matched.
 *
 * A request (cancel, terminate, suspend, resume) goes to a live instance;
 * a cancel only to one with no cancellation requested ($6 = 1 there). */
#define DURO__PG_REQUESTABLE                                                   \
    "status IN (" DURO__LIVE_SQL ") "                                          \
    "AND ($6::int = 0 OR cancel_requested_ms IS NULL) "

#define DURO__PG_REQUEST_IDS                                                   \
    "FROM instances WHERE instance_id = ANY($1::text[]) "                      \
    "AND " DURO__PG_REQUESTABLE

/* A sweep's selection: $1 name, $2..$4 and $11 statuses, $5 version (NULL:
 * any), $6 created after (0: none), $7 created before (0: none), $8
 * finished before (purge), $12 1: only instances with no cancellation
 * requested (cancel_matching). It is declared as the holdable cursor
 * duro_sweep (DURO__PG_SWEEP_DECLARE) and read DURO_BULK_BATCH_MAX rows at
 * a time (SWEEP_FETCH). */
#define DURO__PG_SWEEP_STATUS "status IN ($2::int, $3::int, $4::int, $11::int) "
#define DURO__PG_SWEEP_COMMON                                                  \
    "AND ($5::text IS NULL OR version = $5::text) "                            \
    "AND ($6::bigint = 0 OR created_ms >= $6::bigint) "                        \
    "AND ($7::bigint = 0 OR created_ms < $7::bigint) "                         \
    "ORDER BY instance_id"
#define DURO__PG_SWEEP_DECLARE                                                 \
    "DECLARE duro_sweep NO SCROLL CURSOR WITH HOLD FOR "                       \
    "SELECT instance_id, created_ms FROM instances WHERE "
/* ... and a request's, which also says which have not begun ($13 now) */
#define DURO__PG_SWEEP_DECLARE_REQUEST                                         \
    "DECLARE duro_sweep NO SCROLL CURSOR WITH HOLD FOR "                       \
    "SELECT instance_id, created_ms, " DURO__SQL_UNBEGUN(                      \
        "instances", "$13::bigint") "::int FROM instances WHERE "
/* DURO_BULK_BATCH_MAX, as SQL text */
#define DURO__PG_SWEEP_PAGE "500"
#define DURO__PG_SWEEP_REQUEST                                                 \
    DURO__PG_SWEEP_STATUS "AND ($12::int = 0 OR cancel_requested_ms IS "       \
                          "NULL) " DURO__PG_SWEEP_COMMON
#define DURO__PG_SWEEP_PURGE                                                   \
    DURO__PG_SWEEP_STATUS "AND finished_ms < "                                 \
                          "$8::bigint " DURO__PG_SWEEP_COMMON

/* Whether instance alias `t` matches a purge filter (parameters as for the
 * sweep, $1 being the batch, $9 the name). */
#define DURO__PG_PURGE_MATCH(t)                                                \
    t "." DURO__PG_SWEEP_STATUS "AND " t ".finished_ms < $8::bigint "          \
      "AND ($9::text IS NULL OR " t ".name = $9::text) "                       \
      "AND ($5::text IS NULL OR " t ".version = $5::text) "                    \
      "AND ($6::bigint = 0 OR " t ".created_ms >= $6::bigint) "                \
      "AND ($7::bigint = 0 OR " t ".created_ms < $7::bigint)"

/* Deciding unbegun instances at once (provider version 9), set-based, as
 * SQLite's DURO__SQLITE_DECIDE_STATEMENTS (see there), with the parameters
 * in the same order, so that each statement takes a prefix of them: $1 the
 * ids (text[], found DURO__SQL_UNBEGUN in this transaction, their readiness
 * and instance rows locked), $2 the request's kind (8 cancel, 11
 * terminate, 12 suspend), $3 now, $4 reason, $5 requester. */
#define DURO__PG_DECIDE_IDS(t)                                                 \
    t ".instance_id = ANY($1::text[]) AND " t ".status = 1 AND " t             \
      ".execution_id = 0"
#define DURO__PG_DECIDE_START(i)                                               \
    "orchestrator_queue AS s ON s.id = (SELECT MIN(q.id) FROM "                \
    "orchestrator_queue AS q WHERE q.instance_id = " i ".instance_id "         \
    "AND q.kind = 1)"
#define DURO__PG_DECIDE_STATUS                                                 \
    "CASE $2::int WHEN 8 THEN 5 WHEN 11 THEN 8 ELSE 7 END"
#define DURO__PG_DECIDE_ERROR                                                  \
    "CASE $2::int WHEN 8 THEN COALESCE($4::text, '') WHEN 11 THEN "            \
    "COALESCE($4::text, 'terminated') END"
#define DURO__PG_DECIDE_PARENT                                                 \
    "$2::int IN (8, 11) AND NULLIF(s.parent_instance, '') IS NOT NULL "        \
    "AND (s.flags & 2) = 0"
#define DURO__PG_DECIDE_STATEMENTS(X)                                          \
    X(DECIDE_EXECUTIONS,                                                       \
      "INSERT INTO executions(instance_id, execution_id, status, name, "       \
      "version, started_ms, completed_ms, error, category) "                   \
      "SELECT instance_id, 1, " DURO__PG_DECIDE_STATUS ", name, version, "     \
      "$3::bigint, CASE WHEN $2::int = 12 THEN NULL ELSE $3::bigint "          \
      "END, " DURO__PG_DECIDE_ERROR                                            \
      ", CASE WHEN $2::int = 12 THEN 0 ELSE 5 END "                            \
      "FROM instances WHERE " DURO__PG_DECIDE_IDS("instances"))                \
    X(DECIDE_HISTORY,                                                          \
      "WITH t AS (SELECT instance_id, name, version, parent_instance, "        \
      "parent_execution, parent_event_id FROM instances "                      \
      "WHERE " DURO__PG_DECIDE_IDS(                                            \
          "instances") "), "                                                   \
                       "ev AS (SELECT q.instance_id, q.name, q.payload, "      \
                       "ROW_NUMBER() OVER "                                    \
                       "(PARTITION BY q.instance_id ORDER BY q.id) AS n "      \
                       "FROM t JOIN orchestrator_queue AS q ON q.instance_id " \
                       "= t.instance_id "                                      \
                       "WHERE q.kind = 5 AND q.name IS NOT NULL AND $2::int "  \
                       "<> 12), "                                              \
                       "k AS (SELECT t.instance_id, (SELECT COUNT(*) FROM ev " \
                       "WHERE ev.instance_id = t.instance_id) AS n FROM t), "  \
                       "x(off, kind, by_, flags, req) AS (VALUES (0, 5, "      \
                       "true, 0, 8), "                                         \
                       "(1, 6, false, 0, 8), (0, 19, true, 0, 11), (0, 20, "   \
                       "true, 32, 12)) "                                       \
                       "INSERT INTO history(instance_id, execution_id, "       \
                       "event_id, kind, "                                      \
                       "timestamp_ms, name, version, payload, reason, "        \
                       "requested_by, "                                        \
                       "ref_instance, ref_execution, ref_event_id, flags) "    \
                       "SELECT t.instance_id, 1, 1, 1, $3::bigint, "           \
                       "COALESCE(s.name, t.name), "                            \
                       "CASE WHEN s.id IS NULL THEN t.version ELSE s.version " \
                       "END, s.payload, "                                      \
                       "NULL::text, NULL::text, "                              \
                       "NULLIF(COALESCE(s.parent_instance, "                   \
                       "t.parent_instance), ''), "                             \
                       "COALESCE(s.parent_execution, t.parent_execution), "    \
                       "COALESCE(s.parent_event_id, t.parent_event_id), "      \
                       "COALESCE(s.flags, 0) & 2 FROM t LEFT "                 \
                       "JOIN " DURO__PG_DECIDE_START(                          \
                           "t") " UNION ALL SELECT instance_id, 1, 1 + n, "    \
                                "14, $3::bigint, name, NULL, "                 \
                                "payload, NULL, NULL, NULL, 0, 0, 0 FROM ev "  \
                                "UNION ALL SELECT k.instance_id, 1, 2 + k.n "  \
                                "+ x.off, x.kind, "                            \
                                "$3::bigint, NULL, NULL, NULL, CASE x.kind "   \
                                "WHEN 6 THEN "                                 \
                                "COALESCE($4::text, '') WHEN 19 THEN "         \
                                "COALESCE($4::text, 'terminated') "            \
                                "ELSE $4::text END, CASE WHEN x.by_ THEN "     \
                                "$5::text END, NULL, 0, 0, "                   \
                                "x.flags FROM k CROSS JOIN x WHERE x.req = "   \
                                "$2::int")                                     \
    X(DECIDE_PARENT_MESSAGES,                                                  \
      "INSERT INTO orchestrator_queue(kind, instance_id, execution_id, "       \
      "source_id, error, category, enqueued_ms, visible_at) "                  \
      "SELECT 7, s.parent_instance, s.parent_execution, s.parent_event_id, "   \
      "'child ''' || i.instance_id || ''' was ' || CASE $2::int WHEN 8 THEN "  \
      "'cancelled' ELSE 'terminated' END || ': ' || " DURO__PG_DECIDE_ERROR    \
      ", 5, $3::bigint, $3::bigint FROM instances AS i "                       \
      "JOIN " DURO__PG_DECIDE_START("i") " WHERE " DURO__PG_DECIDE_IDS(        \
          "i") " AND " DURO__PG_DECIDE_PARENT)                                 \
    X(DECIDE_PARENT_READY,                                                     \
      "INSERT INTO orchestrator_ready AS r(instance_id, ready_at) "            \
      "SELECT DISTINCT s.parent_instance, $3::bigint FROM instances AS i "     \
      "JOIN " DURO__PG_DECIDE_START("i") " WHERE " DURO__PG_DECIDE_IDS(        \
          "i") " AND " DURO__PG_DECIDE_PARENT                                  \
               " ORDER BY 1 " DURO__PG_READY_UPSERT_HOLD(                      \
                   "COALESCE(r.locked_until, 0)"))                             \
    X(DECIDE_INSTANCES,                                                        \
      "UPDATE instances SET status = " DURO__PG_DECIDE_STATUS ", "             \
      "execution_id = 1, updated_ms = $3::bigint, output = NULL, "             \
      "error = " DURO__PG_DECIDE_ERROR ", "                                    \
      "category = CASE WHEN $2::int = 12 THEN 0 ELSE 5 END, "                  \
      "finished_ms = CASE WHEN $2::int = 12 THEN NULL ELSE $3::bigint END, "   \
      "cancel_requested_ms = CASE WHEN $2::int = 8 THEN $3::bigint "           \
      "ELSE cancel_requested_ms END, "                                         \
      "cancel_reason = CASE WHEN $2::int = 8 THEN $4::text "                   \
      "ELSE cancel_reason END, "                                               \
      "cancelled_by = CASE WHEN $2::int = 8 THEN $5::text "                    \
      "ELSE cancelled_by END, "                                                \
      "last_problem = CASE WHEN $2::int = 12 THEN last_problem END, "          \
      "last_problem_ms = CASE WHEN $2::int = 12 THEN last_problem_ms END, "    \
      "next_attempt_ms = CASE WHEN $2::int = 12 THEN next_attempt_ms END "     \
      "WHERE " DURO__PG_DECIDE_IDS("instances"))                               \
    X(DECIDE_QUEUE,                                                            \
      "DELETE FROM orchestrator_queue WHERE instance_id = ANY($1::text[]) "    \
      "AND ($2::int <> 12 OR kind = 1)")                                       \
    X(DECIDE_READY_DROP,                                                       \
      "DELETE FROM orchestrator_ready AS r WHERE r.instance_id = "             \
      "ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q " \
      "WHERE q.instance_id = r.instance_id)")                                  \
    X(DECIDE_READY_SET,                                                        \
      "UPDATE orchestrator_ready AS r SET lock_token = NULL, "                 \
      "locked_until = NULL, ready_at = (SELECT MIN(q.visible_at) FROM "        \
      "orchestrator_queue AS q WHERE q.instance_id = r.instance_id) "          \
      "WHERE r.instance_id = ANY($1::text[])")

#define DURO__PG_BULK_STATEMENTS(X)                                            \
    /* cancel_instances, control_instances: each id's state, its instance row  \
     * locked; rank > 1 marks a repeated id */                                 \
    /* first, the readiness rows of those instances, in id order: a turn's     \
     * ack locks its instance's readiness row before its instance row, so a    \
     * request that locked instance rows first and then upserted readiness     \
     * would deadlock with an ack ending the same instance */                  \
    X(REQUEST_IDS_LOCK_READY,                                                  \
      "SELECT 1 FROM orchestrator_ready WHERE instance_id = ANY($1::text[]) "  \
      "ORDER BY instance_id FOR UPDATE")                                       \
    X(SWEEP_REQUEST_LOCK_READY,                                                \
      "SELECT 1 FROM orchestrator_ready WHERE instance_id IN "                 \
      "(SELECT j.v->>0 FROM json_array_elements($1::json) AS j(v)) "           \
      "ORDER BY instance_id FOR UPDATE")                                       \
    X(REQUEST_IDS_READ,                                                        \
      "WITH locked AS (SELECT instance_id, status, execution_id, "             \
      "cancel_requested_ms "                                                   \
      "FROM instances WHERE instance_id = ANY($1::text[]) "                    \
      "ORDER BY instance_id FOR UPDATE) "                                      \
      "SELECT j.k - 1, l.status, "                                             \
      "(l.cancel_requested_ms IS NOT NULL)::int, "                             \
      "ROW_NUMBER() OVER (PARTITION BY j.v ORDER BY j.k), "                    \
      "(l.instance_id IS NOT NULL AND " DURO__SQL_UNBEGUN(                     \
          "l",                                                                 \
          "$2::bigint") ")::int "                                              \
                        "FROM unnest($1::text[]) WITH ORDINALITY AS j(v, k) "  \
                        "LEFT JOIN locked AS l ON l.instance_id = j.v ORDER "  \
                        "BY j.k")                                              \
    /* the writes of a request, set-based: the message ($5 its kind, $2        \
     * reason, $3 requester, $4 now), the instance's readiness (as             \
     * READY_ENQUEUE) and, for a cancel, the record; in this order: the last   \
     * one ends what the first two select */                                   \
    X(REQUEST_IDS_ENQUEUE,                                                     \
      "INSERT INTO orchestrator_queue(kind, instance_id, reason, "             \
      "requested_by, enqueued_ms, visible_at) "                                \
      "SELECT $5::int, instance_id, $2::text, $3::text, $4::bigint, "          \
      "$4::bigint " DURO__PG_REQUEST_IDS)                                      \
    X(REQUEST_IDS_READY,                                                       \
      "INSERT INTO orchestrator_ready AS r(instance_id, ready_at) "            \
      "SELECT instance_id, $4::bigint " DURO__PG_REQUEST_IDS                   \
      " ORDER BY 1 " DURO__PG_READY_UPSERT_HOLD(                               \
          "CASE WHEN $5::int IN " DURO__STOP_KINDS " THEN 0 ELSE "             \
          "COALESCE(r.locked_until, 0) END"))                                  \
    DURO__PG_DECIDE_STATEMENTS(X)                                              \
    X(CANCEL_IDS_MARK,                                                         \
      "UPDATE instances SET cancel_requested_ms = $4::bigint, "                \
      "cancel_reason = $2::text, cancelled_by = $3::text "                     \
      "WHERE instance_id = ANY($1::text[]) AND " DURO__PG_REQUESTABLE)         \
    /* cancel_matching, control_matching: the set, as of one snapshot */       \
    X(SWEEP_REQUEST_NAME, DURO__PG_SWEEP_DECLARE_REQUEST                       \
      "name = $1::text AND " DURO__PG_SWEEP_REQUEST)                           \
    X(SWEEP_REQUEST_ALL,                                                       \
      DURO__PG_SWEEP_DECLARE_REQUEST DURO__PG_SWEEP_REQUEST)                   \
    X(SWEEP_FETCH, "FETCH " DURO__PG_SWEEP_PAGE " FROM duro_sweep")            \
    /* ... and which of a batch are still the same instances, in the mask      \
     * (and for a cancel, with no cancellation requested) */                   \
    X(SWEEP_REQUEST_RECHECK,                                                   \
      "SELECT i.instance_id, " DURO__SQL_UNBEGUN(                              \
          "i",                                                                 \
          "$13::bigint") "::int "                                              \
                         "FROM json_array_elements($1::json) "                 \
                         "WITH ORDINALITY AS j(v, k) JOIN instances AS i "     \
                         "ON i.instance_id = (j.v->>0) "                       \
                         "WHERE i.created_ms = (j.v->>1)::bigint "             \
                         "AND i." DURO__PG_SWEEP_STATUS                        \
                         "AND ($12::int = 0 OR i.cancel_requested_ms IS "      \
                         "NULL) "                                              \
                         "ORDER BY j.k FOR UPDATE OF i")                       \
    /* purge_instances: the set, as of one snapshot */                         \
    X(SWEEP_PURGE_NAME,                                                        \
      DURO__PG_SWEEP_DECLARE "name = $1::text AND " DURO__PG_SWEEP_PURGE)      \
    X(SWEEP_PURGE_ALL, DURO__PG_SWEEP_DECLARE DURO__PG_SWEEP_PURGE)            \
    /* ... and what a batch deletes: each picked instance (still the same,     \
     * still matching) that has no matching ancestor, with all its             \
     * descendants, when every one of them is finished */                      \
    X(PURGE_BATCH,                                                             \
      "WITH RECURSIVE "                                                        \
      "pick(id) AS (SELECT i.instance_id FROM json_array_elements($1::json) "  \
      "AS j(v) JOIN instances AS i ON i.instance_id = (j.v->>0) "              \
      "WHERE i.created_ms = (j.v->>1)::bigint "                                \
      "AND " DURO__PG_PURGE_MATCH(                                             \
          "i") "), "                                                           \
               "up(pick, id) AS (SELECT k.id, i.parent_instance FROM pick AS " \
               "k "                                                            \
               "JOIN instances AS i ON i.instance_id = k.id "                  \
               "WHERE i.parent_instance IS NOT NULL UNION "                    \
               "SELECT up.pick, i.parent_instance FROM up "                    \
               "JOIN instances AS i ON i.instance_id = up.id "                 \
               "WHERE i.parent_instance IS NOT NULL), "                        \
               "top(id) AS (SELECT id FROM pick WHERE id NOT IN (SELECT "      \
               "up.pick "                                                      \
               "FROM up JOIN instances AS a ON a.instance_id = up.id "         \
               "WHERE " DURO__PG_PURGE_MATCH(                                  \
                   "a") ")), " DURO__SQL_PURGE_TREES                           \
                        "JOIN instances AS x ON x.instance_id = t.id "         \
                        "WHERE x.status NOT IN (" DURO__ENDED_SQL              \
                        ")) ORDER BY id")                                      \
    /* the deletes of a purge batch, $1 the ids (instances last) */            \
    X(PURGE_HISTORY,                                                           \
      "DELETE FROM history WHERE instance_id = ANY($1::text[])")               \
    X(PURGE_EXECUTIONS,                                                        \
      "DELETE FROM executions WHERE instance_id = ANY($1::text[])")            \
    X(PURGE_MESSAGES,                                                          \
      "DELETE FROM orchestrator_queue WHERE instance_id = ANY($1::text[])")    \
    X(PURGE_READY,                                                             \
      "DELETE FROM orchestrator_ready WHERE instance_id = ANY($1::text[])")    \
    X(PURGE_WORK,                                                              \
      "DELETE FROM worker_queue WHERE instance_id = ANY($1::text[])")          \
    X(PURGE_EVENT_IDS,                                                         \
      "DELETE FROM event_ids WHERE instance_id = ANY($1::text[])")             \
    X(PURGE_INSTANCES,                                                         \
      "DELETE FROM instances WHERE instance_id = ANY($1::text[])")             \
    /* an event id raised once per instance (version 8): a row when it is      \
     * new */                                                                  \
    X(EVENT_ID_RECORD,                                                         \
      "INSERT INTO event_ids(instance_id, event_id, raised_ms) "               \
      "VALUES($1::text, $2::text, $3::bigint) "                                \
      "ON CONFLICT(instance_id, event_id) DO NOTHING")                         \
    /* read_store_stats, one snapshot (sql/stats.c). Every count reads         \
     * index entries only, never a queue's or instances' rows, whose size      \
     * grows with payloads: STATS_PLAN turns sequential scans off for the      \
     * snapshot's transaction, where the planner would read a whole heap       \
     * for a count (it prices a full index scan's pages as random reads). */   \
    X(STATS_PLAN, "SELECT set_config('enable_seqscan', 'off', true)")          \
    X(STATS_SIZE,                                                              \
      "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint "        \
      "FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "   \
      "WHERE n.nspname = current_schema() AND c.relkind = 'r'")                \
    /* instances_name_status, read in its order: no sort */                    \
    X(STATS_INSTANCES, "SELECT name, status, COUNT(*) FROM instances "         \
                       "GROUP BY name, status ORDER BY name, status")          \
    X(STATS_PROBLEMS,                                                          \
      "SELECT name, COUNT(*) FROM instances "                                  \
      "WHERE last_problem IS NOT NULL AND status IN (" DURO__LIVE_SQL ") "     \
      "GROUP BY name ORDER BY name")                                           \
    /* the messages, and those visible at $1: orchestrator_queue_instance's    \
     * entries (it holds visible_at) */                                        \
    X(STATS_ORCH_QUEUED,                                                       \
      "SELECT COUNT(*), COUNT(*) FILTER (WHERE visible_at <= $1::bigint) "     \
      "FROM orchestrator_queue")                                               \
    /* the visible messages of instances not fetchable at $1, and of those     \
     * the locked ones. An instance's ready_at is its lock's expiry while      \
     * locked, else its earliest message's visibility or, later, the end of    \
     * an abandon delay (locked_until): so of the instances ready_at's index   \
     * finds after $1 (timers' too), only the locked and the held can have a   \
     * visible message, and only theirs probe the messages' index. The         \
     * other visible messages are ready: every message's instance has a        \
     * readiness row (an enqueue upserts it, an ack deletes it with the last   \
     * message). */                                                            \
    X(STATS_ORCH_WAITING,                                                      \
      "SELECT COUNT(*), COUNT(*) FILTER (WHERE r.lock_token IS NOT NULL) "     \
      "FROM orchestrator_ready AS r "                                          \
      "JOIN orchestrator_queue AS q ON q.instance_id = r.instance_id "         \
      "AND q.visible_at <= $1::bigint WHERE r.ready_at > $1::bigint "          \
      "AND (r.lock_token IS NOT NULL OR r.locked_until > $1::bigint)")         \
    /* since when the oldest fetchable instance with a visible message has     \
     * been fetchable (NULL: none): the first such in ready_at's index */      \
    X(STATS_ORCH_OLDEST,                                                       \
      "SELECT (SELECT r.ready_at FROM orchestrator_ready AS r "                \
      "WHERE r.ready_at <= $1::bigint AND EXISTS (SELECT 1 "                   \
      "FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id "      \
      "AND q.visible_at <= $1::bigint) ORDER BY r.ready_at LIMIT 1)")          \
    X(STATS_WORKER_READY,                                                      \
      "SELECT COUNT(*), MIN(available_at) FROM worker_queue "                  \
      "WHERE available_at <= $1::bigint")                                      \
    /* available_at is the lock's expiry while locked */                       \
    X(STATS_WORKER_LOCKED,                                                     \
      "SELECT COUNT(*) FROM worker_queue WHERE available_at > $1::bigint "     \
      "AND lock_token IS NOT NULL")

/* query_instances (sql/manage.c; the plan and its bounds: query.c), as
 * SQLite's (sqlite_internal.h, DURO__SQLITE_QUERY_STATEMENTS): the same
 * parameters ($1 .. $21), paths and shapes. Text compares bytewise: the
 * columns are COLLATE "C", which the parameters take from them. strpos
 * finds a substring of valid UTF-8 where its bytes are. These statements
 * are planned at each run with their values (statement_per_call in
 * pg_db.c): a filter that is off is gone from the plan - the created
 * bounds too, written so that the bound of none ($7 INT64_MIN, $8
 * INT64_MAX) folds to true, so that a range that needs only the status,
 * name and id is an index-only scan of the index that has them in the
 * page's order (kept, the bounds made every candidate a heap fetch, and
 * the planner read a name's and status's first page through the primary
 * key, stepping over the 100,000 instances created before its first
 * match) - and the planner weighs the created bounds with the column's
 * statistics, so none needs SQLite's unary + to keep a range off the
 * wrong index. The version ($21) is such a filter too: off, it is gone
 * from the plan, which keeps its index-only scans. Every parameter is sent
 * as text (text_types in pg_db.c): a text one needs no cast, and a status
 * range (7 of them in one statement) none of the characters a cast takes,
 * to stay within C's 4095 characters. */
#define DURO__PG_Q_FILTER                                                      \
    "($1::text IS NULL OR i.name = $1::text) "                                 \
    "AND ($5::text IS NULL OR i.parent_instance = $5::text) "                  \
    "AND ($6::int = 0 OR i.last_problem IS NOT NULL) "                         \
    "AND ($9::bigint = 0 OR (($9::bigint >> i.status) & 1) = 1) "              \
    "AND " DURO__PG_Q_FILTER_ARM
#define DURO__PG_Q_FILTER_ARM                                                  \
    "($21 IS NULL OR i.version = $21) "                                        \
    "AND ($2 IS NULL OR (i.name >= $2 AND i.name < $3)) "                      \
    "AND ($4 IS NULL OR strpos(i.name, $4) > 0) "                              \
    "AND ($7::bigint < 0 OR i.created_ms >= $7::bigint) "                      \
    "AND ($8::bigint = 9223372036854775807 OR i.created_ms < $8::bigint) "
#define DURO__PG_Q_KEYSET_ID "i.instance_id > $11::text "
#define DURO__PG_Q_KEYSET_CREATED                                              \
    "(i.created_ms, i.instance_id) < ($10::bigint, $11::text) "
#define DURO__PG_Q_KEYSET_UPDATED                                              \
    "(i.updated_ms, i.instance_id) < ($10::bigint, $11::text) "
#define DURO__PG_Q_ORDER_ID "i.instance_id"
#define DURO__PG_Q_ORDER_CREATED "i.created_ms DESC, i.instance_id DESC"
#define DURO__PG_Q_ORDER_UPDATED "i.updated_ms DESC, i.instance_id DESC"
#define DURO__PG_Q_KEY_ID "0::bigint"
#define DURO__PG_Q_KEY_CREATED "i.created_ms"
#define DURO__PG_Q_KEY_UPDATED "i.updated_ms"
#define DURO__PG_Q_OUTER_ID "pg.pid"
#define DURO__PG_Q_OUTER_CREATED "pg.pk DESC, pg.pid DESC"
#define DURO__PG_Q_OUTER_UPDATED "pg.pk DESC, pg.pid DESC"
#define DURO__PG_Q_WHERE_F(F, drive, o)                                        \
    "WHERE " drive DURO__PG_Q_KEYSET_##o                                       \
        "AND " F "ORDER BY " DURO__PG_Q_ORDER_##o " LIMIT $12::bigint"
#define DURO__PG_Q_ORDERED(drive, o)                                           \
    DURO__PG_INFO_COLUMNS DURO__PG_Q_WHERE_F(DURO__PG_Q_FILTER, drive, o)
#define DURO__PG_Q_JOINED(chosen, o)                                           \
    DURO__PG_INFO_SELECT "FROM (" chosen ") AS pg "                            \
                         "JOIN instances AS i ON i.instance_id = pg.pid "      \
                         "ORDER BY " DURO__PG_Q_OUTER_##o " LIMIT $12::bigint"
#define DURO__PG_Q_CHOOSE_F(F, drive, o)                                       \
    "SELECT i.instance_id AS pid, " DURO__PG_Q_KEY_##o                         \
        " AS pk "                                                              \
        "FROM instances AS i " DURO__PG_Q_WHERE_F(F, drive, o)
#define DURO__PG_Q_SORTED(drive, o)                                            \
    DURO__PG_Q_JOINED(DURO__PG_Q_CHOOSE_F(DURO__PG_Q_FILTER, drive, o), o)
#define DURO__PG_Q_ARM(k, name, o)                                             \
    "(" DURO__PG_Q_CHOOSE_F(DURO__PG_Q_FILTER_ARM,                             \
                            name "i.status = $" k "::int AND ", o) ")"
#define DURO__PG_Q_ARMS(name, o)                                               \
    DURO__PG_Q_JOINED(                                                         \
        DURO__SQL_UNION7(                                                      \
            DURO__PG_Q_ARM("13", name, o), DURO__PG_Q_ARM("14", name, o),      \
            DURO__PG_Q_ARM("15", name, o), DURO__PG_Q_ARM("16", name, o),      \
            DURO__PG_Q_ARM("17", name, o), DURO__PG_Q_ARM("18", name, o),      \
            DURO__PG_Q_ARM("19", name, o)),                                    \
        o)
#define DURO__PG_Q_ALL(o) DURO__PG_Q_ORDERED("", o)
#define DURO__PG_Q_NAME(o) DURO__PG_Q_ORDERED("i.name = $1::text AND ", o)
#define DURO__PG_Q_STATUS(o) DURO__PG_Q_ARMS("", o)
#define DURO__PG_Q_NAME_STATUS(o) DURO__PG_Q_ARMS("i.name = $1::text AND ", o)
#define DURO__PG_Q_PREFIX(o)                                                   \
    DURO__PG_Q_SORTED("i.name >= $2::text AND i.name < $3::text AND ", o)
#define DURO__PG_Q_PARENT(o)                                                   \
    DURO__PG_Q_SORTED("i.parent_instance = $5::text AND ", o)
#define DURO__PG_Q_PROBLEM(o)                                                  \
    DURO__PG_Q_SORTED("i.last_problem IS NOT NULL AND ", o)
/* A count reads at most $20 matches (NULL: every one; LIMIT NULL is no
 * limit, and the planner drops it): a bounded count stops in its index. */
#define DURO__PG_Q_COUNT(drive)                                                \
    "SELECT COUNT(*) FROM (SELECT 1 FROM instances AS i WHERE " drive          \
        DURO__PG_Q_FILTER "LIMIT $20::bigint) AS m"
#define DURO__PG_Q_STATUSES                                                    \
    "i.status IN ($13::int, $14::int, $15::int, $16::int, $17::int, "          \
    "$18::int, $19::int) "
/* The paths' statements (sql/statements.h), then the counts. */
#define DURO__PG_QUERY_STATEMENTS(X)                                           \
    DURO__SQL_QUERY_PATHS(X, DURO__PG_Q)                                       \
    X(QUERY_COUNT_ALL, DURO__PG_Q_COUNT(""))                                   \
    X(QUERY_COUNT_NAME, DURO__PG_Q_COUNT("i.name = $1::text AND "))            \
    X(QUERY_COUNT_STATUS, DURO__PG_Q_COUNT(DURO__PG_Q_STATUSES "AND "))        \
    X(QUERY_COUNT_NAME_STATUS,                                                 \
      DURO__PG_Q_COUNT("i.name = $1::text AND " DURO__PG_Q_STATUSES "AND "))   \
    X(QUERY_COUNT_PREFIX,                                                      \
      DURO__PG_Q_COUNT("i.name >= $2::text AND i.name < $3::text AND "))       \
    X(QUERY_COUNT_PARENT,                                                      \
      DURO__PG_Q_COUNT("i.parent_instance = $5::text AND "))                   \
    X(QUERY_COUNT_PROBLEM,                                                     \
      DURO__PG_Q_COUNT("i.last_problem IS NOT NULL AND "))                     \
    /* list_control_events, as SQLite's CONTROL_EVENTS; history_control is     \
     * a partial index of the four kinds as written here */                    \
    X(CONTROL_EVENTS,                                                          \
      "SELECT h.instance_id, i.name, h.execution_id, h.event_id, h.kind, "     \
      "h.timestamp_ms, h.reason, h.requested_by, h.flags "                     \
      "FROM history AS h LEFT JOIN instances AS i "                            \
      "ON i.instance_id = h.instance_id "                                      \
      "WHERE h.kind IN (5, 19, 20, 21) "                                       \
      "AND (h.timestamp_ms, h.instance_id, h.execution_id, h.event_id) "       \
      "< ($4::bigint, $5::text, $6::bigint, $7::bigint) "                      \
      "AND h.timestamp_ms >= $3::bigint "                                      \
      "AND ($1::bigint = 0 OR (($1::bigint >> h.kind) & 1) = 1) "              \
      "AND ($2::text IS NULL OR h.requested_by = $2::text) "                   \
      "ORDER BY h.timestamp_ms DESC, h.instance_id DESC, "                     \
      "h.execution_id DESC, h.event_id DESC LIMIT $8::bigint")                 \
    /* a reset (version 13): the ended instance $1 at execution $3 moves to    \
     * execution $2, Running, its ending and requests cleared, a rewound       \
     * child's parent link moved to $5 (0: kept), its deadline cleared (a      \
     * DEADLINE message sets the one it runs under); 0 rows when another       \
     * reset or a turn changed it first (the compare-and-set) */               \
    X(RESET_INSTANCE,                                                          \
      "UPDATE instances SET status = 2, execution_id = $2::bigint, "           \
      "output = NULL, error = NULL, category = 0, updated_ms = $4::bigint, "   \
      "finished_ms = NULL, last_problem = NULL, last_problem_ms = NULL, "      \
      "next_attempt_ms = NULL, cancel_requested_ms = NULL, "                   \
      "cancel_reason = NULL, cancelled_by = NULL, deadline_ms = 0, "           \
      "parent_execution = CASE WHEN $5::bigint <> 0 THEN $5::bigint "          \
      "ELSE parent_execution END "                                             \
      "WHERE instance_id = $1::text AND execution_id = $3::bigint "            \
      "AND status IN (3, 4, 5, 8)")

/* The ids are the shared list's (statements.h); the texts above are this
 * dialect's. */
typedef duro__sql_stmt_id duro__pg_stmt_id;
/* 1 when this dialect has a text for id. */
int duro__pg_has_statement(duro__sql_stmt_id id);
/* The texts by id (NULL: none). */
extern const char *const duro__pg_statement_texts[DURO__SQL_COUNT];

/* What duro__pg_step returns. */
#define DURO__PG_FAILED 1   /* the statement failed: see the connection */
#define DURO__PG_ROW 100    /* a row is ready to read */
#define DURO__PG_DONE 101   /* no (more) rows */
#define DURO__PG_UNIQUE 102 /* failed on a unique constraint (23505) */

/* ---- connections and the provider ---------------------------------------- */

struct duro__pg_conn;

/* A statement of one connection: its parameters for the next run and the
 * result of the last one, read row by row like a cursor. */
typedef struct duro__pg_statement {
    struct duro__pg_conn *conn;
    duro__pg_stmt_id id;
    const char *values[DURO__PG_PARAM_MAX]; /* NULL: SQL NULL */
    char numbers[DURO__PG_PARAM_MAX][24];   /* text of bound integers */
    PGresult *result;                       /* of the last run, or NULL */
    int row;                                /* current row, -1 before */
    int ran;                                /* 1 once run since bound */
} duro__pg_statement;

typedef struct duro__pg_conn {
    PGconn *pg;
    int64_t broken_ms; /* when it was found broken (monotonic) */
    duro__pg_statement stmts[DURO__SQL_COUNT];
    uint64_t prepared[(DURO__SQL_COUNT + 63) / 64]; /* PQprepare done */
    int64_t changes;   /* rows the last command changed */
    int broken;        /* reset before the next use */
    int begin_pending; /* a BEGIN is owed: it goes with the next statement
                          (begin_sql), in one round trip */
    const char *begin_sql;
    const char *begin_then; /* sent after begin_sql in its round trip, or
                               NULL (duro__pg_write_begin_generic) */
    int injected;           /* the last failure was injected: 1 retryable,
                               2 not */
    char sqlstate[6];       /* of the last failure, "" when none */
    char message[512];      /* of the last failure */
} duro__pg_conn;

/* A lock this process may hold under a token no caller will use again
 * (pg_release.c): kept until a fetch releases it. */
#define DURO__PG_RELEASES_MAX 64
#define DURO__PG_TOKEN_MAX 64 /* "w<row id>.<32 hex>", with its NUL */
#define DURO__PG_ACKED_MAX 512
typedef struct duro__pg_acked {
    int64_t at_ms;                  /* when it committed (monotonic) */
    char token[DURO__PG_TOKEN_MAX]; /* "" once taken as a suspect */
} duro__pg_acked;
#define DURO__PG_CONTENDED_MAX 16
typedef struct duro__pg_release {
    char kind;        /* 'o' / 'w': an instance or work item lock token an
                         abandon failed to release; 'O' / 'W': the hex of a
                         claim of unknown outcome (its rows' tokens end
                         with it) */
    int64_t delay_ms; /* the abandon's delay ('o', 'w') */
    char text[64];    /* the token, or the claim's 32 hex digits */
} duro__pg_release;

typedef struct duro__pg_provider {
    duro__sql_store sql; /* first member (its first: duro_provider) */
    duro__pg_config cfg;

    /* Lock order: the pool's lock, then nothing; the notifier's lock is
     * never held while taking another lock or running SQL. */
    /* the pooled connections (idle ones in sql.pool) */
    duro__pg_conn *conns;
    int conn_count;

    _Atomic uint64_t commits;          /* write COMMITs, for the loss hook */
    _Atomic uint64_t commit_loss_at;   /* lose the connection at this COMMIT;
                                          0: off */
    _Atomic int commit_loss_committed; /* 1: after the COMMIT, 0: before */
    _Atomic uint64_t commit_losses;    /* connections the hook dropped */
    /* duro__pg_hook_turn_ack_locked: called inside a turn's ack once its
     * locks are taken; NULL (the default) calls nothing. Set before any
     * thread acks. */
    void (*turn_ack_locked)(void *arg);
    void *turn_ack_locked_arg;
    /* duro__pg_reconnected, set at open: pg_db.c calls it through this
     * pointer when it opens a broken connection again (the releases are
     * above the connections; a call up would be a loop). */
    void (*reconnected)(struct duro__pg_provider *p, int64_t broken_ms);

    /* Activity acks of many slot threads in one statement: callers queue
     * their acks; whoever finds no statement running takes the queue and
     * runs it for all (pg_combine.c). */
    pthread_mutex_t combine_lock;
    pthread_cond_t combine_cond; /* a combined statement finished */
    struct duro__pg_wq_req *combine_head, *combine_tail;
    int combine_busy;           /* a statement is running */
    _Atomic int combine_queued; /* acks in the queue */
    int combine_last; /* acks the last statement took (combine_lock) */
    _Atomic uint64_t combine_max;        /* most acks one statement carried */
    _Atomic uint64_t combine_statements; /* statements of more than one */
    /* Rows whose ack gave up waiting for a lock (lock_timeout): their next
     * acks run alone, outside the combined statements, so that one waiting
     * again holds up no other. Under combine_lock. */
    int64_t contended[DURO__PG_CONTENDED_MAX];
    int contended_count;

    /* Locks left held by tokens no caller will use again, released by the
     * next fetch (pg_release.c). Lock order: release_lock, then
     * nothing; no SQL under it. */
    pthread_mutex_t release_lock;
    duro__pg_release releases[DURO__PG_RELEASES_MAX];
    int releases_kept;          /* entries of releases[], under the lock */
    int releasing;              /* a thread is releasing them */
    _Atomic int releases_count; /* releases_kept + suspect_count, read
                                   without the lock */
    /* The latest activity acks committed without waiting for the flush
     * (a ring, allocated at the first), and those a server crash may have
     * lost, to release: under release_lock. */
    duro__pg_acked *acked;
    size_t acked_next, acked_count;
    char (*suspects)[DURO__PG_TOKEN_MAX];
    size_t suspect_count;
} duro__pg_provider;

/* Connections: connect (search_path set to the schema), close. */
int duro__pg_conn_open(duro__pg_provider *p, duro__pg_conn *c, duro_error *err);
void duro__pg_conn_close(duro__pg_conn *c);
/* Checks, without DDL, that the schema exists at this code's version; only
 * when it is missing or behind, creates (unless the URL says create=0: then
 * a missing schema fails DURO_NOT_FOUND) or migrates it under a
 * transaction-level advisory lock, checking again under the lock. */
int duro__pg_migrate(duro__pg_provider *p, duro__pg_conn *c, duro_error *err);
/* duro__pg_conn_open, after checking that each connection keeps one
 * server session: refuses (DURO_STORAGE, not retryable) a pooler that hands
 * a connection's transactions to other sessions, where the schema's
 * search_path, the prepared statements and LISTEN would go astray. The new
 * connection `a`, before its session is set up, and another one opened for
 * the check each ask which backend serves them, `a` before, while and after
 * the other holds a transaction open. A pooler that reuses the session `a`
 * just released (PgBouncer does) hands it to the other, so `a` is served by
 * another one; a server session per connection always answers the same for
 * `a` and another for the other. */
int duro__pg_conn_open_checked(duro__pg_provider *p, duro__pg_conn *c,
                               duro_error *err);

/* The primitives over libpq (pg_db.c; sql/adapt.h declares them, their
 * contracts are sql.h's): stmt frees the statement's last result; step
 * returns DURO__PG_ROW, DURO__PG_DONE or a failure; error maps
 * serialization failures, deadlocks and lock timeouts to DURO_BUSY
 * (retryable), a lost connection to DURO_STORAGE (retryable), the rest to
 * DURO_STORAGE; bound text is borrowed until the statement runs;
 * write_begin takes a connection from the pool and runs BEGIN, commit and
 * rollback return it; a reader is a pooled connection in autocommit
 * unless the caller begins a read transaction. */
DURO__SQL_DECLARE_PRIMITIVES(pg, duro__pg_provider, duro__pg_conn,
                             duro__pg_statement);
/* Frees the statement's result. */
void duro__pg_reset(duro__pg_statement *s);
/* Rows the last command run on c changed. */
int duro__pg_changes(duro__pg_conn *c);
/* Parameters of a statement (the highest $n in its SQL). */
int duro__pg_param_count(duro__pg_statement *s);
/* Binds v as the same 64 bits (read back with a cast). */
void duro__pg_bind_u64(duro__pg_conn *c, duro__pg_statement *s, int i,
                       uint64_t v);

/* Columns of the current row. */
int64_t duro__pg_column_int64(duro__pg_statement *s, int col);
int duro__pg_column_int(duro__pg_statement *s, int col);
int duro__pg_column_null(duro__pg_statement *s, int col);
const char *duro__pg_column_text_raw(duro__pg_statement *s, int col);
int duro__pg_column_bytes(duro__pg_statement *s, int col);

/* duro__pg_write_begin for a transaction of set-based statements whose
 * plans do not depend on their parameters' values (a turn batch): its
 * statements run with generic plans (SET LOCAL plan_cache_mode, sent in
 * the BEGIN's round trip), so that each is not planned again at every
 * bind. */
int duro__pg_write_begin_generic(duro__pg_provider *p, const char *op,
                                 duro__pg_conn **out, duro_error *err);
/* write_begin at REPEATABLE READ: every statement sees one snapshot, and
 * a row another transaction changed since fails the call DURO_BUSY
 * (retryable). For multi-statement writes that recompute a set (the tree
 * of delete_instance), which must be the same set in every statement. */
int duro__pg_write_begin_snapshot(duro__pg_provider *p, const char *op,
                                  duro__pg_conn **out, duro_error *err);

/* Connection c of p was opened again after it broke (at c->broken_ms):
 * the activity acks p committed without waiting for the flush shortly
 * before may have been lost with the server, leaving their rows locked by
 * their tokens; the next fetch releases them (pg_release.c).
 * Runs no SQL. */
void duro__pg_reconnected(duro__pg_provider *p, int64_t broken_ms);

/* ---- the wake-up (pg_wake.c) ------------------------------------------- */

/* The notifier of p's store (sql/notify.c's, with the listener): attach
 * at open (DURO_NOMEM when it cannot be made); flush before closing the
 * pool (sends an announcement the listener still holds); the dialect's
 * notifier_end stops the listener when the last provider lets go. */
int duro__pg_notifier_attach(duro__pg_provider *p);
void duro__pg_notifier_flush(duro__pg_provider *p);
void duro__pg_notifier_end(duro__sql_notifier *n);

/* Wakes wait_for_work on `queue` after a commit that made `items` items
 * fetchable: one waiter per item here, and as many in every other process
 * (through the listener's notification). */
void duro__pg_signal(duro__pg_provider *p, duro_queue queue, size_t items);
/* Work items were cancelled by a commit: wakes wait_for_cancellations here
 * and, through the listener, in every process. */
void duro__pg_signal_cancels(duro__pg_provider *p, size_t items);
/* A fetch of `queue` begins on this thread; it found nothing, and `due` is
 * the earliest time anything on the queue becomes due (sql/notify.c). */
static inline void duro__pg_note_fetch(duro__pg_provider *p, duro_queue queue)
{
    duro__sql_note_fetch(&p->sql, queue);
}
static inline void duro__pg_note_due(duro__pg_provider *p, duro_queue queue,
                                     int64_t due)
{
    duro__sql_note_due(&p->sql, queue, due);
}

/* The dialect's queue members (pg_queue.c; ack_work and fetch_work: pg_work.c;
 * contracts: sql/sql.h). */
duro__sql_ack_turns_fn duro__pg_ack_turns;
duro__sql_ack_work_fn duro__pg_ack_work;
duro__sql_fetch_work_fn duro__pg_fetch_work;

/* The primitives of the shared SQL layer on this store (pg_dialect.c). */
extern const duro__sql_dialect duro__pg_dialect;

#endif
