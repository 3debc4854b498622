/* sqlite_internal.h - shared by the SQLite provider's files: the provider
 * struct, its connections, the table of every SQL statement it runs, and the
 * helpers that run statements and transactions. Threading: the writer
 * connection is used only under write_lock; a reader connection by one thread
 * at a time (taken from the pool). Not installed. */
#ifndef DURO_SQLITE_INTERNAL_H
#define DURO_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "base/base.h"
#include "providers/providers.h"
#include "providers/sql/adapt.h"
#include "providers/sql/sql.h"

#define DURO__SQLITE_SCHEMA_VERSION 10 /* what this code creates and reads */
#define DURO__SQLITE_NAME_MAX 1024     /* bytes of a name, id or reason */
#define DURO__SQLITE_POOL_MAX 64       /* most reader connections */

/* Membership in a constant set, by comparisons. SQLite codes `x IN (a, b,
 * c)` - a list of more than two constants - as a probe of an ephemeral
 * b-tree that it builds again at every run of the statement (a page
 * allocated and zeroed): in the chain benchmark that cost more than the
 * rest of a history insert. The statements every turn runs, and the
 * partial index every history insert evaluates, test membership this way;
 * test_sqlite checks that they open no ephemeral table and that these
 * agree with DURO__LIVE_STATUSES and DURO__ENDED_STATUSES. */
#define DURO__SQLITE_LIVE_STATUS "(status = 1 OR status = 2 OR status = 7)"
#define DURO__SQLITE_ENDED_P2 "(?2 = 3 OR ?2 = 4 OR ?2 = 5 OR ?2 = 8)"
/* The four kinds of control request (OrchestrationCancelRequested 5,
 * OrchestrationTerminated 19, ExecutionSuspended 20, ExecutionResumed 21):
 * history_control's predicate, which CONTROL_EVENTS repeats word for word
 * so that the planner can use that index. */
#define DURO__SQLITE_CONTROL_KIND                                              \
    "(kind = 5 OR kind = 19 OR kind = 20 OR kind = 21)"

/* What the URL configures. */
typedef struct duro__sqlite_config {
    char *path;           /* file path as given to sqlite3_open_v2 */
    int memory;           /* 1 for ":memory:" */
    int synchronous;      /* 0 off, 1 normal, 2 full, 3 extra */
    int busy_timeout_ms;  /* busy handler wait for other processes */
    uint64_t max_history; /* events per execution */
    size_t max_payload;   /* bytes of a payload, error or custom status */
    int pool;             /* reader connections; 0 for :memory: */
    int create;           /* 1 (default): create a missing file; 0: a
                             missing file fails DURO_NOT_FOUND */
    int read_only;        /* mode=ro: every connection SQLITE_OPEN_READONLY,
                             no PRAGMA that writes, no migration, every
                             write refused; implies create=0 */
    int checkpoint_pages; /* WAL frames between checkpoints; the WAL
                             starts over past them (see
                             duro__sqlite_checkpoint) */
} duro__sqlite_config;

/* Parses `spec` (the URL after "sqlite:") into cfg; DURO_BAD_URL with the
 * problem named when it is malformed. Touches nothing on disk. */
int duro__sqlite_parse_url(const char *spec, duro__sqlite_config *cfg,
                           duro_error *err);
void duro__sqlite_config_free(duro__sqlite_config *cfg);

/* ---- statements ----------------------------------------------------------
 * Every statement the provider runs, prepared at most once per connection
 * (on first use) and reused with sqlite3_reset. X(ID, sql) */

/* The columns of a duro_instance_info of instance alias i (read_info in
 * sql/manage.c), and with them the table. */
#define DURO__SQLITE_INFO_SELECT                                               \
    "SELECT i.instance_id, i.name, i.version, i.status, i.execution_id, "      \
    "i.created_ms, i.updated_ms, i.output, i.error, i.category, "              \
    "i.custom_status, i.parent_instance, "                                     \
    "(SELECT IFNULL(MAX(h.event_id), 0) FROM history AS h "                    \
    "WHERE h.instance_id = i.instance_id AND h.execution_id = "                \
    "i.execution_id), "                                                        \
    "i.cancel_reason, i.cancelled_by, i.cancel_requested_ms, i.finished_ms, "  \
    "i.last_problem, i.last_problem_ms, i.next_attempt_ms, i.deadline_ms "
#define DURO__SQLITE_INFO_COLUMNS                                              \
    DURO__SQLITE_INFO_SELECT "FROM instances AS i "

#define DURO__SQLITE_LIST_FILTER                                               \
    "WHERE i.instance_id > ?1 AND (?2 = 0 OR ((?2 >> i.status) & 1)) "         \
    "AND (?3 = 0 OR i.created_ms >= ?3) AND (?4 = 0 OR i.created_ms < ?4) "

#define DURO__SQLITE_LIST_ORDER " ORDER BY i.instance_id LIMIT ?7"

/* The instance and every descendant through instances.parent_instance. */
#define DURO__SQLITE_TREE                                                      \
    "WITH RECURSIVE tree(id) AS (SELECT ?1 UNION SELECT c.instance_id "        \
    "FROM instances AS c JOIN tree ON c.parent_instance = tree.id) "

#define DURO__SQLITE_QUEUE_COLUMNS                                             \
    "kind, instance_id, execution_id, source_id, name, version, payload, "     \
    "error, category, reason, requested_by, parent_instance, "                 \
    "parent_execution, parent_event_id, fire_at_ms, attempt, flags, "          \
    "started_ms, finished_ms"

#define DURO__SQLITE_HISTORY_COLUMNS                                           \
    "event_id, kind, source_event_id, timestamp_ms, name, version, payload, "  \
    "error, category, reason, requested_by, ref_instance, ref_execution, "     \
    "ref_event_id, fire_at_ms, attempt, flags, started_ms, finished_ms"

#define DURO__SQLITE_STATEMENTS(X)                                             \
    X(BEGIN_WRITE, "BEGIN IMMEDIATE")                                          \
    X(BEGIN_READ, "BEGIN")                                                     \
    DURO__SQL_END_STATEMENTS(X)                                                \
    /* instances */                                                            \
    X(INSTANCE_CREATE,                                                         \
      "INSERT INTO instances(instance_id, name, version, status, "             \
      "execution_id, created_ms, updated_ms, category, parent_instance, "      \
      "parent_execution, parent_event_id) "                                    \
      "VALUES(?1, ?2, ?3, 1, 0, ?4, ?4, 0, ?5, ?6, ?7) "                       \
      "ON CONFLICT(instance_id) DO NOTHING")                                   \
    X(INSTANCE_CURRENT,                                                        \
      "SELECT execution_id, status, deadline_ms FROM instances "               \
      "WHERE instance_id = ?1")                                                \
    /* an idempotent START of an existing instance compares the names */       \
    X(INSTANCE_NAME, "SELECT name FROM instances WHERE instance_id = ?1")      \
    X(INSTANCE_SET_CURRENT,                                                    \
      "UPDATE instances SET execution_id = ?2, updated_ms = ?3 "               \
      "WHERE instance_id = ?1")                                                \
    X(INSTANCE_WRITE_META,                                                     \
      "UPDATE instances SET status = ?2, name = COALESCE(?3, name), "          \
      "version = COALESCE(?4, version), output = ?5, error = ?6, "             \
      "category = ?7, "                                                        \
      "custom_status = CASE WHEN ?8 THEN ?9 ELSE custom_status END, "          \
      "parent_instance = COALESCE(?10, parent_instance), "                     \
      "parent_execution = CASE WHEN ?10 IS NULL THEN parent_execution "        \
      "ELSE ?11 END, "                                                         \
      "parent_event_id = CASE WHEN ?10 IS NULL THEN parent_event_id "          \
      "ELSE ?12 END, updated_ms = ?13, "                                       \
      "execution_id = CASE WHEN ?16 <> 0 THEN ?16 ELSE execution_id END, "     \
      "finished_ms = CASE WHEN " DURO__SQLITE_ENDED_P2 " THEN ?13 "            \
      "ELSE NULL END, "                                                        \
      "last_problem = CASE WHEN ?14 THEN ?15 ELSE last_problem END, "          \
      "last_problem_ms = CASE WHEN NOT ?14 THEN last_problem_ms "              \
      "WHEN ?15 IS NULL THEN NULL ELSE ?13 END, "                              \
      "next_attempt_ms = CASE WHEN ?14 THEN NULL ELSE next_attempt_ms END "    \
      "WHERE instance_id = ?1")                                                \
    /* the last column is EXEC_EVENT_COUNT's of the current execution (NULL    \
     * when it has no row), read in the same probe */                          \
    X(INSTANCE_FETCH_META,                                                     \
      "SELECT status, execution_id, name, version, parent_instance, "          \
      "parent_execution, parent_event_id, custom_status, "                     \
      "cancel_requested_ms, cancel_reason, cancelled_by, last_problem, "       \
      "(SELECT (SELECT IFNULL(MAX(h.event_id), 0) FROM history AS h "          \
      "WHERE h.instance_id = ?1 AND h.execution_id = e.execution_id) "         \
      "FROM executions AS e WHERE e.instance_id = ?1 "                         \
      "AND e.execution_id = instances.execution_id) "                          \
      "FROM instances WHERE instance_id = ?1")                                 \
    /* a CANCEL_INSTANCE records the first request on a live instance */       \
    X(INSTANCE_CANCEL_REQUEST,                                                 \
      "UPDATE instances SET cancel_requested_ms = ?2, cancel_reason = ?3, "    \
      "cancelled_by = ?4 WHERE instance_id = ?1 "                              \
      "AND " DURO__SQLITE_LIVE_STATUS " "                                      \
      "AND cancel_requested_ms IS NULL")                                       \
    /* a DEADLINE message sets the instance's deadline, once (version 12) */   \
    X(INSTANCE_SET_DEADLINE,                                                   \
      "UPDATE instances SET deadline_ms = ?2 WHERE instance_id = ?1 "          \
      "AND deadline_ms = 0")                                                   \
    /* only a live instance (Pending, Running, Suspended) changes: an ended    \
     * one keeps the problem it ended with; the row always matches             \
     * (NOT_FOUND only when there is none) */                                  \
    X(INSTANCE_SET_PROBLEM,                                                    \
      "UPDATE instances SET "                                                  \
      "last_problem = CASE WHEN " DURO__SQLITE_LIVE_STATUS " THEN ?2 "         \
      "ELSE last_problem END, "                                                \
      "last_problem_ms = CASE WHEN NOT " DURO__SQLITE_LIVE_STATUS " "          \
      "THEN last_problem_ms WHEN ?2 IS NULL THEN NULL ELSE ?3 END, "           \
      "next_attempt_ms = CASE WHEN NOT " DURO__SQLITE_LIVE_STATUS " "          \
      "THEN next_attempt_ms WHEN ?2 IS NULL THEN NULL ELSE ?4 END "            \
      "WHERE instance_id = ?1")                                                \
    X(INSTANCE_INFO, DURO__SQLITE_INFO_COLUMNS "WHERE i.instance_id = ?1")     \
    X(LIST_ALL, DURO__SQLITE_INFO_COLUMNS DURO__SQLITE_LIST_FILTER             \
                    DURO__SQLITE_LIST_ORDER)                                   \
    X(LIST_NAME, DURO__SQLITE_INFO_COLUMNS DURO__SQLITE_LIST_FILTER            \
      "AND i.name = ?5" DURO__SQLITE_LIST_ORDER)                               \
    X(LIST_STATUS, DURO__SQLITE_INFO_COLUMNS DURO__SQLITE_LIST_FILTER          \
      "AND i.status = ?6" DURO__SQLITE_LIST_ORDER)                             \
    X(LIST_NAME_STATUS, DURO__SQLITE_INFO_COLUMNS DURO__SQLITE_LIST_FILTER     \
      "AND i.name = ?5 AND i.status = ?6" DURO__SQLITE_LIST_ORDER)             \
    /* executions and history */                                               \
    /* events of an execution (no row when the execution does not exist):      \
     * the last event id, found by one seek of history's primary key */        \
    X(EXEC_EVENT_COUNT,                                                        \
      "SELECT (SELECT IFNULL(MAX(event_id), 0) FROM history "                  \
      "WHERE instance_id = ?1 AND execution_id = ?2) FROM executions "         \
      "WHERE instance_id = ?1 AND execution_id = ?2")                          \
    X(EXEC_CREATE,                                                             \
      "INSERT INTO executions(instance_id, execution_id, status, name, "       \
      "version, started_ms, output, error, category, completed_ms) "           \
      "VALUES(?1, ?2, ?6, "                                                    \
      "COALESCE(?3, (SELECT name FROM instances WHERE instance_id = ?1)), "    \
      "COALESCE(?4, (SELECT version FROM instances WHERE instance_id = ?1)), " \
      "?5, ?7, ?8, ?9, ?10)")                                                  \
    X(EXEC_WRITE_META,                                                         \
      "UPDATE executions SET status = ?3, name = COALESCE(?4, name), "         \
      "version = COALESCE(?5, version), output = ?6, error = ?7, "             \
      "category = ?8, completed_ms = ?9 "                                      \
      "WHERE instance_id = ?1 AND execution_id = ?2")                          \
    X(HISTORY_INSERT, "INSERT INTO history(instance_id, "                      \
                      "execution_id, " DURO__SQLITE_HISTORY_COLUMNS            \
                      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "              \
                      "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "                \
                      "?17, ?18, ?19, ?20, ?21)")                              \
    X(HISTORY_READ,                                                            \
      "SELECT " DURO__SQLITE_HISTORY_COLUMNS " FROM history "                  \
      "WHERE instance_id = ?1 AND execution_id = ?2 AND event_id > ?3 "        \
      "ORDER BY event_id")                                                     \
    /* the ActivityCancelRequested (kind 10) of an activity: one probe of the  \
     * partial index history_activity_cancel (schema version 2). Named: left   \
     * to itself the planner prefers the primary key's (instance, execution)   \
     * prefix, a scan of the execution's whole history. */                     \
    X(HISTORY_CANCEL_REASON,                                                   \
      "SELECT reason FROM history INDEXED BY history_activity_cancel "         \
      "WHERE instance_id = ?1 AND execution_id = ?2 AND source_event_id = ?3 " \
      "AND kind = 10 LIMIT 1")                                                 \
    /* orchestrator queue and its per-instance readiness/lock rows */          \
    X(OQ_INSERT,                                                               \
      "INSERT INTO orchestrator_queue(" DURO__SQLITE_QUEUE_COLUMNS             \
      ", enqueued_ms, visible_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " \
      "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)")           \
    /* an event id raised once per instance (version 8): 1 row changed         \
     * when it is new */                                                       \
    X(EVENT_ID_RECORD, "INSERT INTO event_ids(instance_id, event_id, "         \
                       "raised_ms) VALUES(?1, ?2, ?3) "                        \
                       "ON CONFLICT(instance_id, event_id) DO NOTHING")        \
    X(OQ_TAG, "UPDATE orchestrator_queue SET lock_token = ?2, "                \
              "fetch_count = fetch_count + 1 "                                 \
              "WHERE instance_id = ?1 AND visible_at <= ?3")                   \
    X(OQ_FETCHED,                                                              \
      "SELECT " DURO__SQLITE_QUEUE_COLUMNS ", fetch_count "                    \
      "FROM orchestrator_queue WHERE instance_id = ?1 AND visible_at <= ?2 "   \
      "AND lock_token = ?3 ORDER BY visible_at, id")                           \
    X(OQ_DELETE_TAGGED, "DELETE FROM orchestrator_queue "                      \
                        "WHERE instance_id = ?1 AND lock_token = ?2")          \
    X(OQ_UNTAG, "UPDATE orchestrator_queue SET lock_token = NULL "             \
                "WHERE instance_id = ?1 AND lock_token = ?2")                  \
    /* pass_orchestration_item: the fetch did not count */                     \
    X(OQ_UNTAG_UNCOUNT, "UPDATE orchestrator_queue SET lock_token = NULL, "    \
                        "fetch_count = MAX(fetch_count - 1, 0) "               \
                        "WHERE instance_id = ?1 AND lock_token = ?2")          \
    /* an ack that ends the instance: nothing queued for it is live */         \
    X(OQ_DELETE_INSTANCE,                                                      \
      "DELETE FROM orchestrator_queue WHERE instance_id = ?1")                 \
    /* continue-as-new: timers and completions of the ended execution */       \
    X(OQ_DELETE_EXECUTION,                                                     \
      "DELETE FROM orchestrator_queue WHERE instance_id = ?1 "                 \
      "AND execution_id = ?2 "                                                 \
      "AND (kind BETWEEN 2 AND 4 OR kind BETWEEN 6 AND 7)")                    \
    X(OQ_MIN_VISIBLE, "SELECT MIN(visible_at) FROM orchestrator_queue "        \
                      "WHERE instance_id = ?1")                                \
    X(OQ_COUNT, "SELECT COUNT(*) FROM orchestrator_queue")                     \
    X(OQ_COUNT_INSTANCE,                                                       \
      "SELECT COUNT(*) FROM orchestrator_queue WHERE instance_id = ?1")        \
    /* ?3 1: the message stops the instance (a cancel or terminate), which     \
     * no abandon delay holds back */                                          \
    X(READY_ENQUEUE,                                                           \
      "INSERT INTO orchestrator_ready(instance_id, ready_at) VALUES(?1, ?2) "  \
      "ON CONFLICT(instance_id) DO UPDATE SET ready_at = "                     \
      "MAX(excluded.ready_at, CASE WHEN ?3 THEN 0 "                            \
      "ELSE IFNULL(locked_until, 0) END) "                                     \
      "WHERE lock_token IS NULL AND excluded.ready_at < ready_at")             \
    X(READY_NEXT, "SELECT rowid, instance_id FROM orchestrator_ready "         \
                  "WHERE ready_at <= ?1 ORDER BY ready_at LIMIT 1")            \
    X(READY_LOCK, "UPDATE orchestrator_ready SET lock_token = ?2, "            \
                  "locked_until = ?3, ready_at = ?3 WHERE rowid = ?1")         \
    /* the holder of a lock, with what an ack reads of its instance in the     \
     * same probe: its current execution, whether the instance row is there,   \
     * whether that execution's row is, and its last event id (one seek of     \
     * history's primary key) */                                               \
    X(READY_HOLDER_CURRENT,                                                    \
      "SELECT r.instance_id, r.locked_until, i.execution_id, "                 \
      "i.instance_id IS NOT NULL, EXISTS (SELECT 1 FROM executions AS e "      \
      "WHERE e.instance_id = r.instance_id "                                   \
      "AND e.execution_id = i.execution_id), "                                 \
      "(SELECT IFNULL(MAX(h.event_id), 0) FROM history AS h "                  \
      "WHERE h.instance_id = r.instance_id "                                   \
      "AND h.execution_id = i.execution_id) FROM orchestrator_ready AS r "     \
      "LEFT JOIN instances AS i ON i.instance_id = r.instance_id "             \
      "WHERE r.rowid = ?1 AND r.lock_token = ?2")                              \
    X(READY_RENEW,                                                             \
      "UPDATE orchestrator_ready SET locked_until = ?3, ready_at = ?3 "        \
      "WHERE rowid = ?1 AND lock_token = ?2 AND locked_until > ?4")            \
    X(READY_SET, "UPDATE orchestrator_ready SET lock_token = NULL, "           \
                 "locked_until = ?2, ready_at = ?3 WHERE rowid = ?1")          \
    X(READY_DELETE, "DELETE FROM orchestrator_ready WHERE rowid = ?1")         \
    X(READY_MIN, "SELECT MIN(ready_at) FROM orchestrator_ready")               \
    /* worker queue */                                                         \
    X(WQ_INSERT,                                                               \
      "INSERT INTO worker_queue(instance_id, execution_id, activity_id, "      \
      "name, version, payload, attempt, enqueued_ms, available_at) "           \
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)")                            \
    /* a fetch: the next item visible at ?1, then its claim by primary key     \
     * (?2 the token, ?3 the lock's end); two statements, not one UPDATE       \
     * ... RETURNING, which SQLite runs through an ephemeral table that it     \
     * builds at every run (half the fetch's time) */                          \
    X(WQ_NEXT, "SELECT instance_id, execution_id, activity_id, name, "         \
               "version, payload, attempt, fetch_count, id FROM worker_queue " \
               "WHERE available_at <= ?1 ORDER BY available_at, id LIMIT 1")   \
    X(WQ_CLAIM, "UPDATE worker_queue SET lock_token = ?2, locked_until = ?3, " \
                "available_at = ?3, fetch_count = fetch_count + 1 "            \
                "WHERE id = ?1")                                               \
    X(WQ_ACK, "DELETE FROM worker_queue WHERE id = ?1 AND lock_token = ?2")    \
    /* renew and abandon need only the token: an expired lock that no other    \
     * fetch took still holds the row (a fetch replaces the token) */          \
    /* check_work_item_locks: does the token still hold its row? */            \
    X(WQ_HELD, "SELECT 1 FROM worker_queue WHERE id = ?1 AND lock_token = ?2") \
    X(WQ_RENEW,                                                                \
      "UPDATE worker_queue SET locked_until = ?3, available_at = ?3 "          \
      "WHERE id = ?1 AND lock_token = ?2")                                     \
    X(WQ_ABANDON,                                                              \
      "UPDATE worker_queue SET lock_token = NULL, locked_until = NULL, "       \
      "available_at = ?3 WHERE id = ?1 AND lock_token = ?2")                   \
    X(WQ_EXISTS, "SELECT 1 FROM worker_queue WHERE id = ?1")                   \
    X(WQ_CANCEL,                                                               \
      "DELETE FROM worker_queue WHERE instance_id = ?1 AND execution_id = ?2 " \
      "AND activity_id IN (SELECT value FROM json_each(?3))")                  \
    X(WQ_MIN, "SELECT MIN(available_at) FROM worker_queue")                    \
    X(WQ_COUNT, "SELECT COUNT(*) FROM worker_queue")                           \
    X(WQ_COUNT_INSTANCE,                                                       \
      "SELECT COUNT(*) FROM worker_queue WHERE instance_id = ?1")              \
    /* management */                                                           \
    X(DELETE_CHECK, DURO__SQLITE_TREE                                          \
      "SELECT COUNT(*), IFNULL(SUM(status NOT IN (" DURO__ENDED_SQL ")), 0) "  \
      "FROM instances WHERE instance_id IN tree")                              \
    X(DELETE_HISTORY,                                                          \
      DURO__SQLITE_TREE "DELETE FROM history WHERE instance_id IN tree")       \
    X(DELETE_EXECUTIONS,                                                       \
      DURO__SQLITE_TREE "DELETE FROM executions WHERE instance_id IN tree")    \
    X(DELETE_MESSAGES, DURO__SQLITE_TREE "DELETE FROM orchestrator_queue "     \
                                         "WHERE instance_id IN tree")          \
    X(DELETE_READY, DURO__SQLITE_TREE "DELETE FROM orchestrator_ready "        \
                                      "WHERE instance_id IN tree")             \
    X(DELETE_WORK,                                                             \
      DURO__SQLITE_TREE "DELETE FROM worker_queue WHERE instance_id IN tree")  \
    X(DELETE_EVENT_IDS,                                                        \
      DURO__SQLITE_TREE "DELETE FROM event_ids WHERE instance_id IN tree")     \
    X(DELETE_INSTANCES,                                                        \
      DURO__SQLITE_TREE "DELETE FROM instances WHERE instance_id IN tree")     \
    X(PRUNE_HISTORY,                                                           \
      "DELETE FROM history WHERE instance_id = ?1 AND execution_id IN "        \
      "(SELECT execution_id FROM executions WHERE instance_id = ?1 "           \
      "AND execution_id <= ?2 AND status IN (" DURO__ENDED_SQL ", 6))")        \
    X(PRUNE_EXECUTIONS, "DELETE FROM executions WHERE instance_id = ?1 "       \
                        "AND execution_id <= ?2 "                              \
                        "AND status IN (" DURO__ENDED_SQL ", 6)")              \
    DURO__SQLITE_BULK_STATEMENTS(X)                                            \
    DURO__SQLITE_QUERY_STATEMENTS(X)                                           \
    DURO__SQLITE_RUNTIME_STATEMENTS(X)                                         \
    DURO__SQLITE_SCHEDULE_STATEMENTS(X)

/* The live runtimes (sql/runtimes.c; provider contract version 12). */
#define DURO__SQLITE_RUNTIME_STATEMENTS(X)                                     \
    X(RUNTIME_UPSERT,                                                          \
      "INSERT INTO runtimes(" DURO__SQL_RUNTIME_COLUMNS ") "                   \
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) " DURO__SQL_RUNTIME_UPSERT_SET)  \
    X(RUNTIME_EXPIRE,                                                          \
      "DELETE FROM runtimes WHERE NOT (" DURO__SQL_RUNTIME_LIVE "?1)")         \
    X(RUNTIME_DELETE, "DELETE FROM runtimes WHERE runtime_id = ?1")            \
    X(RUNTIME_LIST, "SELECT " DURO__SQL_RUNTIME_COLUMNS " FROM runtimes "      \
                    "WHERE " DURO__SQL_RUNTIME_LIVE "?1 "                      \
                    "ORDER BY started_ms, runtime_id")

/* Schedules (sql/schedules.c, provider contract version 13). */
#define DURO__SQLITE_SCHEDULE_STATEMENTS(X)                                    \
    X(SCHEDULE_CREATE,                                                         \
      "INSERT INTO schedules(id, spec, spec_version, row_version, next_ms, "   \
      "due_ms, buffered_ms, paused, note, fires, skips, created_ms, "          \
      "updated_ms) VALUES(?1, ?2, ?3, 1, ?4, NULLIF(?5, 0), ?6, ?7, ?8, 0, "   \
      "0, ?9, ?9) ON CONFLICT(id) DO NOTHING")                                 \
    X(SCHEDULE_UPDATE,                                                         \
      "UPDATE schedules SET spec = ?2, spec_version = ?3, next_ms = ?4, "      \
      "due_ms = NULLIF(?5, 0), buffered_ms = ?6, paused = ?7, note = ?8, "     \
      "updated_ms = ?9, row_version = ?10 + 1 WHERE id = ?1 AND row_version "  \
      "= ?10")                                                                 \
    X(SCHEDULE_EXISTS, "SELECT 1 FROM schedules WHERE id = ?1")                \
    X(SCHEDULE_DELETE, "DELETE FROM schedules WHERE id = ?1")                  \
    X(SCHEDULE_FIRES_DELETE,                                                   \
      "DELETE FROM schedule_fires WHERE schedule_id = ?1")                     \
    X(SCHEDULE_GET,                                                            \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "IFNULL(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "               \
      "IFNULL(i.status, 0), s.paused, s.note, s.fires, s.skips, "              \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.id = ?1")            \
    X(SCHEDULE_LIST,                                                           \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "IFNULL(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "               \
      "IFNULL(i.status, 0), s.paused, s.note, s.fires, s.skips, "              \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.id > ?1 ORDER BY "   \
      "s.id LIMIT ?2")                                                         \
    X(SCHEDULE_DUE,                                                            \
      "SELECT s.id, s.spec, s.spec_version, s.row_version, s.next_ms, "        \
      "IFNULL(s.due_ms, 0), s.buffered_ms, s.last_instance_id, "               \
      "IFNULL(i.status, 0), s.paused, s.note, s.fires, s.skips, "              \
      "s.created_ms, s.updated_ms FROM schedules AS s LEFT JOIN instances "    \
      "AS i ON i.instance_id = s.last_instance_id WHERE s.paused = 0 AND "     \
      "s.due_ms <= ?1 ORDER BY s.due_ms LIMIT ?2")                             \
    X(SCHEDULE_NEXT_DUE,                                                       \
      "SELECT MIN(due_ms) FROM schedules WHERE paused = 0 AND due_ms > ?1")    \
    X(SCHEDULE_CLAIM,                                                          \
      "UPDATE schedules SET row_version = ?2 + 1 WHERE id = ?1 AND "           \
      "row_version = ?2")                                                      \
    X(SCHEDULE_APPLY,                                                          \
      "UPDATE schedules SET next_ms = ?2, due_ms = NULLIF(?3, 0), "            \
      "buffered_ms = ?4, last_instance_id = COALESCE(?5, last_instance_id), "  \
      "fires = fires + ?6, skips = skips + ?7, updated_ms = ?8 WHERE id = "    \
      "?1")                                                                    \
    X(SCHEDULE_FIRE_INSERT,                                                    \
      "INSERT INTO schedule_fires(schedule_id, time_ms, action, count, "       \
      "instance_id, why, recorded_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)")     \
    X(SCHEDULE_FIRES_TRIM,                                                     \
      "DELETE FROM schedule_fires WHERE schedule_id = ?1 AND seq <= (SELECT "  \
      "seq FROM schedule_fires WHERE schedule_id = ?1 ORDER BY seq DESC "      \
      "LIMIT 1 OFFSET ?2)")                                                    \
    X(SCHEDULE_FIRES_LIST,                                                     \
      "SELECT f.action, f.time_ms, f.count, f.why, f.instance_id, "            \
      "f.recorded_ms, IFNULL(i.status, 0) FROM schedule_fires AS f LEFT "      \
      "JOIN instances AS i ON i.instance_id = f.instance_id WHERE "            \
      "f.schedule_id = ?1 ORDER BY f.seq DESC LIMIT ?2")

/* Operations on many instances (sql/many.c). A batch names its
 * instances in ?1, a JSON array read with json_each: plain ids for
 * cancel_instances and control_instances, [id, created_ms] pairs for the
 * sweeps, so an instance deleted and created again under the same id after
 * the sweep began is not taken for the one that matched. Lookups go
 * through the primary key: the unary + keeps the planner off the status
 * indexes, which would range over every instance of a status for each id.
 *
 * A request (cancel, terminate, suspend, resume) goes to a live instance;
 * a cancel only to one with no cancellation requested (?6 = 1 there). */
#define DURO__SQLITE_REQUESTABLE                                               \
    "+status IN (" DURO__LIVE_SQL ") "                                         \
    "AND (?6 = 0 OR cancel_requested_ms IS NULL) "

#define DURO__SQLITE_REQUEST_IDS                                               \
    "FROM instances WHERE instance_id IN (SELECT value FROM json_each(?1)) "   \
    "AND " DURO__SQLITE_REQUESTABLE

/* A sweep's selection: ?1 name, ?2..?4 and ?11 statuses, ?5 version
 * (NULL: any), ?6 created after (0: none), ?7 created before (0: none), ?8
 * finished before (purge), ?12 1: only instances with no cancellation
 * requested (cancel_matching). */
#define DURO__SQLITE_SWEEP_COMMON                                              \
    "AND (?5 IS NULL OR version = ?5) AND (?6 = 0 OR created_ms >= ?6) "       \
    "AND (?7 = 0 OR created_ms < ?7) ORDER BY instance_id"
#define DURO__SQLITE_SWEEP_REQUEST                                             \
    "status IN (?2, ?3, ?4, ?11) AND (?12 = 0 OR cancel_requested_ms IS "      \
    "NULL) " DURO__SQLITE_SWEEP_COMMON
#define DURO__SQLITE_SWEEP_PURGE                                               \
    "status IN (?2, ?3, ?4, ?11) AND finished_ms < "                           \
    "?8 " DURO__SQLITE_SWEEP_COMMON

/* Whether instance alias `t` matches a purge filter (parameters as for the
 * sweep, ?1 being the batch). */
#define DURO__SQLITE_PURGE_MATCH(t)                                            \
    "+" t ".status IN (?2, ?3, ?4, ?11) AND +" t ".finished_ms < ?8 "          \
    "AND (?9 IS NULL OR " t ".name = ?9) "                                     \
    "AND (?5 IS NULL OR " t ".version = ?5) "                                  \
    "AND (?6 = 0 OR " t ".created_ms >= ?6) "                                  \
    "AND (?7 = 0 OR " t ".created_ms < ?7)"

/* Deciding unbegun instances at once (provider version 9), set-based: ?1
 * the JSON array of ids (found DURO__SQL_UNBEGUN in this transaction),
 * ?2 the request's kind (8 cancel, 11 terminate, 12 suspend), ?3 now, ?4
 * reason, ?5 requester (PostgreSQL's order, where each statement takes a
 * prefix of them). The statements write what a runtime's turn would
 * have written (engine.c: stop_without_code, terminate), in this order:
 * each before DECIDE_INSTANCES reads the ids' instances still Pending with
 * no execution, which DECIDE_INSTANCES ends. Execution 1 begins with
 * OrchestrationStarted from the START message (with the version the start
 * asked for: no runtime resolved it); a cancel or terminate records the
 * external events queued meanwhile in arrival order, as a turn records a
 * batch's inputs before what stops it, then its request and its end, tells
 * the parent as a turn's end does, and deletes what was queued; a suspend
 * records ExecutionSuspended with DURO_SUSPEND_BEFORE_START, drops only
 * the START (its content is in history) and leaves what else is queued
 * for the turns that record it while suspended. */
#define DURO__SQLITE_DECIDE_IDS(t)                                             \
    t ".instance_id IN (SELECT value FROM json_each(?1)) AND +" t ".status = " \
      "1 AND " t ".execution_id = 0"
#define DURO__SQLITE_DECIDE_START(i)                                           \
    "orchestrator_queue AS s ON s.id = (SELECT MIN(id) FROM "                  \
    "orchestrator_queue WHERE instance_id = " i ".instance_id AND kind = 1)"
/* the status, error and category of the decision, as a turn's meta */
#define DURO__SQLITE_DECIDE_STATUS                                             \
    "CASE ?2 WHEN 8 THEN 5 WHEN 11 THEN 8 ELSE 7 END"
#define DURO__SQLITE_DECIDE_ERROR                                              \
    "CASE ?2 WHEN 8 THEN IFNULL(?4, '') WHEN 11 THEN IFNULL(?4, "              \
    "'terminated') END"
#define DURO__SQLITE_DECIDE_PARENT                                             \
    "?2 IN (8, 11) AND NULLIF(s.parent_instance, '') IS NOT NULL "             \
    "AND (s.flags & 2) = 0"
#define DURO__SQLITE_DECIDE_STATEMENTS(X)                                             \
    X(DECIDE_EXECUTIONS,                                                              \
      "INSERT INTO executions(instance_id, execution_id, status, name, "              \
      "version, started_ms, completed_ms, error, category) "                          \
      "SELECT instance_id, 1, " DURO__SQLITE_DECIDE_STATUS ", name, version, "        \
      "?3, CASE WHEN ?2 = 12 THEN NULL ELSE ?3 "                                      \
      "END, " DURO__SQLITE_DECIDE_ERROR                                               \
      ", CASE WHEN ?2 = 12 THEN 0 ELSE 5 END "                                        \
      "FROM instances WHERE " DURO__SQLITE_DECIDE_IDS("instances"))                   \
    X(DECIDE_HISTORY,                                                                 \
      "WITH t AS (SELECT instance_id, name, version, parent_instance, "               \
      "parent_execution, parent_event_id FROM instances "                             \
      "WHERE " DURO__SQLITE_DECIDE_IDS(                                               \
          "instances") "), "                                                          \
                       "ev AS (SELECT q.instance_id, q.name, q.payload, "             \
                       "ROW_NUMBER() OVER "                                           \
                       "(PARTITION BY q.instance_id ORDER BY q.id) AS n "             \
                       "FROM t CROSS JOIN orchestrator_queue AS q "                   \
                       "ON q.instance_id = t.instance_id "                            \
                       "WHERE q.kind = 5 AND q.name IS NOT NULL AND ?2 <> "           \
                       "12), "                                                        \
                       "k AS (SELECT t.instance_id, (SELECT COUNT(*) FROM ev "        \
                       "WHERE ev.instance_id = t.instance_id) AS n FROM t), "         \
                       "x(off, kind, by, flags, req) AS (VALUES (0, 5, 1, 0, "        \
                       "8), "                                                         \
                       "(1, 6, 0, 0, 8), (0, 19, 1, 0, 11), (0, 20, 1, 32, "          \
                       "12)) "                                                        \
                       "INSERT INTO history(instance_id, execution_id, "              \
                       "event_id, kind, "                                             \
                       "timestamp_ms, name, version, payload, reason, "               \
                       "requested_by, "                                               \
                       "ref_instance, ref_execution, ref_event_id, flags) "           \
                       "SELECT t.instance_id, 1, 1, 1, ?3, COALESCE(s.name, "         \
                       "t.name), "                                                    \
                       "CASE WHEN s.id IS NULL THEN t.version ELSE s.version "        \
                       "END, s.payload, "                                             \
                       "NULL, NULL, NULLIF(COALESCE(s.parent_instance, "              \
                       "t.parent_instance), "                                         \
                       "''), COALESCE(s.parent_execution, "                           \
                       "t.parent_execution), "                                        \
                       "COALESCE(s.parent_event_id, t.parent_event_id), "             \
                       "IFNULL(s.flags, 0) & 2 FROM t LEFT "                          \
                       "JOIN " DURO__SQLITE_DECIDE_START(                             \
                           "t") " UNION ALL SELECT instance_id, 1, 1 + n, "           \
                                "14, ?3, name, NULL, "                                \
                                "payload, NULL, NULL, NULL, 0, 0, 0 FROM ev "         \
                                "UNION ALL SELECT k.instance_id, 1, 2 + k.n "         \
                                "+ x.off, x.kind, "                                   \
                                "?3, NULL, NULL, NULL, CASE x.kind WHEN 6 "           \
                                "THEN IFNULL(?4, '') "                                \
                                "WHEN 19 THEN IFNULL(?4, 'terminated') ELSE "         \
                                "?4 END, "                                            \
                                "CASE WHEN x.by THEN ?5 END, NULL, 0, 0, "            \
                                "x.flags "                                            \
                                "FROM k CROSS JOIN x WHERE x.req = ?2")               \
    /* a cancelled or terminated child tells its parent (not a detached               \
     * one) as engine.c's terminate() does; then the parent's readiness, as           \
     * READY_ENQUEUE for a message that does not stop it */                           \
    X(DECIDE_PARENT_MESSAGES,                                                         \
      "INSERT INTO orchestrator_queue(kind, instance_id, execution_id, "              \
      "source_id, error, category, enqueued_ms, visible_at) "                         \
      "SELECT 7, s.parent_instance, s.parent_execution, s.parent_event_id, "          \
      "'child ''' || i.instance_id || ''' was ' || CASE ?2 WHEN 8 THEN "              \
      "'cancelled' ELSE 'terminated' END || ': ' "                                    \
      "|| " DURO__SQLITE_DECIDE_ERROR ", 5, ?3, ?3 FROM instances AS i "              \
      "JOIN " DURO__SQLITE_DECIDE_START(                                              \
          "i") " WHERE " DURO__SQLITE_DECIDE_IDS("i") " AND"                          \
                                                      " " DURO__SQLITE_DECIDE_PARENT) \
    X(DECIDE_PARENT_READY,                                                            \
      "INSERT INTO orchestrator_ready(instance_id, ready_at) "                        \
      "SELECT DISTINCT s.parent_instance, ?3 FROM instances AS i "                    \
      "JOIN " DURO__SQLITE_DECIDE_START(                                              \
          "i") " WHERE " DURO__SQLITE_DECIDE_IDS("i") " AND"                          \
                                                      " " DURO__SQLITE_DECIDE_PARENT  \
                                                      " "                             \
                                                      "ON "                           \
                                                      "CONFLICT(instance_id) "        \
                                                      "DO UPDATE SET "                \
                                                      "ready_at = "                   \
                                                      "MAX(excluded.ready_at,"        \
                                                      " IFNULL(locked_until, "        \
                                                      "0)) "                          \
                                                      "WHERE lock_token IS "          \
                                                      "NULL AND "                     \
                                                      "excluded.ready_at < "          \
                                                      "ready_at")                     \
    X(DECIDE_INSTANCES,                                                               \
      "UPDATE instances SET status = " DURO__SQLITE_DECIDE_STATUS ", "                \
      "execution_id = 1, updated_ms = ?3, output = NULL, "                            \
      "error = " DURO__SQLITE_DECIDE_ERROR ", "                                       \
      "category = CASE WHEN ?2 = 12 THEN 0 ELSE 5 END, "                              \
      "finished_ms = CASE WHEN ?2 = 12 THEN NULL ELSE ?3 END, "                       \
      "cancel_requested_ms = CASE WHEN ?2 = 8 THEN ?3 "                               \
      "ELSE cancel_requested_ms END, "                                                \
      "cancel_reason = CASE WHEN ?2 = 8 THEN ?4 ELSE cancel_reason END, "             \
      "cancelled_by = CASE WHEN ?2 = 8 THEN ?5 ELSE cancelled_by END, "               \
      "last_problem = CASE WHEN ?2 = 12 THEN last_problem END, "                      \
      "last_problem_ms = CASE WHEN ?2 = 12 THEN last_problem_ms END, "                \
      "next_attempt_ms = CASE WHEN ?2 = 12 THEN next_attempt_ms END "                 \
      "WHERE " DURO__SQLITE_DECIDE_IDS("instances"))                                  \
    X(DECIDE_QUEUE,                                                                   \
      "DELETE FROM orchestrator_queue WHERE instance_id IN "                          \
      "(SELECT value FROM json_each(?1)) AND (?2 <> 12 OR kind = 1)")                 \
    /* readiness from what remains, unlocked (a runtime whose lock had                \
     * expired finds it gone at its ack) */                                           \
    X(DECIDE_READY_DROP,                                                              \
      "DELETE FROM orchestrator_ready WHERE instance_id IN "                          \
      "(SELECT value FROM json_each(?1)) AND NOT EXISTS (SELECT 1 FROM "              \
      "orchestrator_queue AS q "                                                      \
      "WHERE q.instance_id = orchestrator_ready.instance_id)")                        \
    X(DECIDE_READY_SET,                                                               \
      "UPDATE orchestrator_ready SET lock_token = NULL, locked_until = NULL, "        \
      "ready_at = (SELECT MIN(q.visible_at) FROM orchestrator_queue AS q "            \
      "WHERE q.instance_id = orchestrator_ready.instance_id) "                        \
      "WHERE instance_id IN (SELECT value FROM json_each(?1))")

#define DURO__SQLITE_BULK_STATEMENTS(X)                                        \
    /* cancel_instances, control_instances: each id's state; rank > 1 marks a  \
     * repeated id */                                                          \
    X(REQUEST_IDS_READ,                                                        \
      "SELECT j.key, i.status, i.cancel_requested_ms IS NOT NULL, "            \
      "ROW_NUMBER() OVER (PARTITION BY j.value ORDER BY j.key), "              \
      "i.instance_id IS NOT NULL AND " DURO__SQL_UNBEGUN(                      \
          "i", "?2") " "                                                       \
                     "FROM json_each(?1) AS j "                                \
                     "LEFT JOIN instances AS i ON i.instance_id = j.value "    \
                     "ORDER BY j.key")                                         \
    /* the writes of a request, set-based: the message (?5 its kind, ?2        \
     * reason, ?3 requester, ?4 now), the instance's readiness (as             \
     * READY_ENQUEUE) and, for a cancel, the record; in this order: the last   \
     * one ends what the first two select */                                   \
    X(REQUEST_IDS_ENQUEUE,                                                     \
      "INSERT INTO orchestrator_queue(kind, instance_id, reason, "             \
      "requested_by, enqueued_ms, visible_at) "                                \
      "SELECT ?5, instance_id, ?2, ?3, ?4, ?4 " DURO__SQLITE_REQUEST_IDS)      \
    X(REQUEST_IDS_READY,                                                       \
      "INSERT INTO orchestrator_ready(instance_id, ready_at) "                 \
      "SELECT instance_id, ?4 " DURO__SQLITE_REQUEST_IDS                       \
      "ON CONFLICT(instance_id) DO UPDATE SET ready_at = "                     \
      "MAX(excluded.ready_at, CASE WHEN ?5 IN " DURO__STOP_KINDS " THEN 0 "    \
      "ELSE IFNULL(locked_until, 0) END) "                                     \
      "WHERE lock_token IS NULL AND excluded.ready_at < ready_at")             \
    X(CANCEL_IDS_MARK,                                                         \
      "UPDATE instances SET cancel_requested_ms = ?4, cancel_reason = ?2, "    \
      "cancelled_by = ?3 WHERE instance_id IN "                                \
      "(SELECT value FROM json_each(?1)) AND " DURO__SQLITE_REQUESTABLE)       \
    DURO__SQLITE_DECIDE_STATEMENTS(X)                                          \
    /* cancel_matching, control_matching: the set, read once on a snapshot */  \
    X(SWEEP_REQUEST_NAME,                                                      \
      "SELECT instance_id, created_ms, " DURO__SQL_UNBEGUN(                    \
          "instances", "?13") " FROM instances WHERE name = ?1 "               \
                              "AND " DURO__SQLITE_SWEEP_REQUEST)               \
    X(SWEEP_REQUEST_ALL,                                                       \
      "SELECT instance_id, created_ms, " DURO__SQL_UNBEGUN(                    \
          "instances",                                                         \
          "?13") " FROM instances WHERE " DURO__SQLITE_SWEEP_REQUEST)          \
    /* ... and which of a batch are still the same instances, in the mask      \
     * (and for a cancel, with no cancellation requested) */                   \
    X(SWEEP_REQUEST_RECHECK,                                                   \
      "SELECT i.instance_id, " DURO__SQL_UNBEGUN(                              \
          "i", "?13") " "                                                      \
                      "FROM json_each(?1) AS j CROSS JOIN instances AS i "     \
                      "ON i.instance_id = json_extract(j.value, '$[0]') "      \
                      "WHERE i.created_ms = json_extract(j.value, '$[1]') "    \
                      "AND +i.status IN (?2, ?3, ?4, ?11) "                    \
                      "AND (?12 = 0 OR i.cancel_requested_ms IS NULL) ORDER "  \
                      "BY j.key")                                              \
    /* purge_instances: the set, read once on a snapshot */                    \
    X(SWEEP_PURGE_NAME, "SELECT instance_id, created_ms FROM instances "       \
                        "WHERE name = ?1 AND " DURO__SQLITE_SWEEP_PURGE)       \
    X(SWEEP_PURGE_ALL, "SELECT instance_id, created_ms FROM instances "        \
                       "WHERE " DURO__SQLITE_SWEEP_PURGE)                      \
    /* ... and what a batch deletes: each picked instance (still the same,     \
     * still matching) that has no matching ancestor, with all its             \
     * descendants, when every one of them is finished */                      \
    X(PURGE_BATCH,                                                             \
      "WITH RECURSIVE "                                                        \
      "pick(id) AS (SELECT i.instance_id FROM json_each(?1) AS j "             \
      "CROSS JOIN instances AS i "                                             \
      "ON i.instance_id = json_extract(j.value, '$[0]') "                      \
      "WHERE i.created_ms = json_extract(j.value, '$[1]') "                    \
      "AND " DURO__SQLITE_PURGE_MATCH(                                         \
          "i") "), "                                                           \
               "up(pick, id) AS (SELECT k.id, i.parent_instance FROM pick AS " \
               "k "                                                            \
               "CROSS JOIN instances AS i ON i.instance_id = k.id "            \
               "WHERE i.parent_instance IS NOT NULL UNION "                    \
               "SELECT up.pick, i.parent_instance FROM up "                    \
               "CROSS JOIN instances AS i ON i.instance_id = up.id "           \
               "WHERE i.parent_instance IS NOT NULL), "                        \
               "top(id) AS (SELECT id FROM pick WHERE id NOT IN (SELECT "      \
               "up.pick "                                                      \
               "FROM up CROSS JOIN instances AS a ON a.instance_id = up.id "   \
               "WHERE " DURO__SQLITE_PURGE_MATCH(                              \
                   "a") ")), " DURO__SQL_PURGE_TREES                           \
                        "CROSS JOIN instances AS x ON x.instance_id = t.id "   \
                        "WHERE x.status NOT IN (" DURO__ENDED_SQL              \
                        ")) ORDER BY id")                                      \
    /* the deletes of a purge batch, ?1 the ids (instances last) */            \
    X(PURGE_HISTORY, "DELETE FROM history WHERE instance_id IN "               \
                     "(SELECT value FROM json_each(?1))")                      \
    X(PURGE_EXECUTIONS, "DELETE FROM executions WHERE instance_id IN "         \
                        "(SELECT value FROM json_each(?1))")                   \
    X(PURGE_MESSAGES, "DELETE FROM orchestrator_queue WHERE instance_id IN "   \
                      "(SELECT value FROM json_each(?1))")                     \
    X(PURGE_READY, "DELETE FROM orchestrator_ready WHERE instance_id IN "      \
                   "(SELECT value FROM json_each(?1))")                        \
    X(PURGE_WORK, "DELETE FROM worker_queue WHERE instance_id IN "             \
                  "(SELECT value FROM json_each(?1))")                         \
    X(PURGE_EVENT_IDS, "DELETE FROM event_ids WHERE instance_id IN "           \
                       "(SELECT value FROM json_each(?1))")                    \
    X(PURGE_INSTANCES, "DELETE FROM instances WHERE instance_id IN "           \
                       "(SELECT value FROM json_each(?1))")                    \
    /* read_store_stats, one snapshot on a reader (sql/stats.c) */             \
    X(STATS_SIZE, "SELECT pc.page_count * ps.page_size "                       \
                  "FROM pragma_page_count() AS pc, pragma_page_size() AS ps")  \
    X(STATS_INSTANCES, "SELECT name, status, COUNT(*) FROM instances "         \
                       "GROUP BY name, status ORDER BY name, status")          \
    X(STATS_PROBLEMS,                                                          \
      "SELECT name, COUNT(*) FROM instances INDEXED BY instances_problem "     \
      "WHERE last_problem IS NOT NULL AND status IN (" DURO__LIVE_SQL ") "     \
      "GROUP BY name ORDER BY name")                                           \
    /* the messages, and those visible at ?1: orchestrator_queue_instance's    \
     * entries (it holds visible_at), never the rows and their payloads */     \
    X(STATS_ORCH_QUEUED,                                                       \
      "SELECT COUNT(*), SUM(CASE WHEN visible_at <= ?1 THEN 1 ELSE 0 END) "    \
      "FROM orchestrator_queue INDEXED BY orchestrator_queue_instance")        \
    /* the visible messages of instances not fetchable at ?1, and of those     \
     * the locked ones: as PostgreSQL's (pg_internal.h), only the locked and   \
     * the held among the instances ready_at's index finds after ?1 probe      \
     * the messages' index; the other visible messages are ready. */           \
    X(STATS_ORCH_WAITING,                                                      \
      "SELECT COUNT(*), "                                                      \
      "SUM(CASE WHEN r.lock_token IS NOT NULL THEN 1 ELSE 0 END) "             \
      "FROM orchestrator_ready AS r "                                          \
      "JOIN orchestrator_queue AS q ON q.instance_id = r.instance_id "         \
      "AND q.visible_at <= ?1 WHERE r.ready_at > ?1 "                          \
      "AND (r.lock_token IS NOT NULL OR r.locked_until > ?1)")                 \
    /* since when the oldest fetchable instance with a visible message has     \
     * been fetchable (NULL: none): the first such in ready_at's index */      \
    X(STATS_ORCH_OLDEST,                                                       \
      "SELECT (SELECT r.ready_at FROM orchestrator_ready AS r "                \
      "WHERE r.ready_at <= ?1 AND EXISTS (SELECT 1 "                           \
      "FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id "      \
      "AND q.visible_at <= ?1) ORDER BY r.ready_at LIMIT 1)")                  \
    X(STATS_WORKER_READY, "SELECT COUNT(*), MIN(available_at) "                \
                          "FROM worker_queue WHERE available_at <= ?1")        \
    /* available_at is the lock's expiry while locked */                       \
    X(STATS_WORKER_LOCKED,                                                     \
      "SELECT COUNT(*) FROM worker_queue WHERE available_at > ?1 "             \
      "AND lock_token IS NOT NULL")

/* query_instances (sql/manage.c; the plan and its bounds: query.c).
 * Parameters: ?1 name (NULL: any), ?2 and ?3 the name prefix's range
 * (NULL: none), ?4 the substring (NULL: none), ?5 parent (NULL: any), ?6
 * 1: only with a problem, ?7 and ?8 created from (inclusive) and until
 * (exclusive), ?9 statuses checked row by row (0: any), ?10 and ?11 the
 * keyset (the rows after (?10, ?11) in the order), ?12 the rows to read
 * (a page and one), ?13 .. ?19 the statuses of a STATUS path (0: none),
 * ?21 the orchestration version (NULL: any; query version 3).
 * A path writes the term its index serves as it is; every other filter is
 * a term that its NULL or 0 parameter makes true (DURO__SQLITE_Q_FILTER),
 * which no index serves. The version (?21) is read through the primary
 * key in a subquery of i.instance_id, only when asked for: named in the
 * term itself, a column the query indexes lack would make every path's
 * index non-covering, and the planner would leave the (name, status,
 * created) ranges for worse ones. The created bounds are an index range
 * in the created order only: elsewhere a unary + keeps the planner on the
 * order's index. Ordered paths (ALL and NAME by id, and each status range
 * of STATUS and NAME_STATUS, which newest first serve ALL and NAME too,
 * with every status) read their index in the order and stop after ?12
 * rows; the others (PREFIX, PARENT, PROBLEM, named by INDEXED BY) read
 * their index's rows and sort them, the instance ids and keys only. A
 * page that joins the rows it chose with their info sorts those again, at
 * most 7 x ?12 rows. */
#define DURO__SQLITE_Q_FILTER(cr)                                              \
    "(?1 IS NULL OR i.name = ?1) "                                             \
    "AND (?5 IS NULL OR i.parent_instance = ?5) "                              \
    "AND (?6 = 0 OR i.last_problem IS NOT NULL) "                              \
    "AND (?9 = 0 OR ((?9 >> i.status) & 1)) "                                  \
    "AND " DURO__SQLITE_Q_FILTER_ARM(cr)
/* What a status range checks: the plan's precedence leaves a STATUS path
 * no parent or problem, and its name drives or is absent (a statement
 * must stay within C's 4095 characters). */
#define DURO__SQLITE_Q_FILTER_ARM(cr)                                          \
    "(?2 IS NULL OR (i.name >= ?2 AND i.name < ?3)) "                          \
    "AND (?4 IS NULL OR instr(CAST(i.name AS BLOB), CAST(?4 AS BLOB)) > 0) "   \
    "AND " cr "i.created_ms >= ?7 AND " cr "i.created_ms < ?8 "                \
    "AND (?21 IS NULL OR (SELECT version FROM instances "                      \
    "WHERE instance_id = i.instance_id) = ?21) "
/* per order: the keyset, the ORDER BY, the sort key, the outer ORDER BY
 * of a joined page, the created bounds' prefix */
#define DURO__SQLITE_Q_KEYSET_ID "i.instance_id > ?11 "
#define DURO__SQLITE_Q_KEYSET_CREATED                                          \
    "(i.created_ms, i.instance_id) < (?10, ?11) "
#define DURO__SQLITE_Q_KEYSET_UPDATED                                          \
    "(i.updated_ms, i.instance_id) < (?10, ?11) "
#define DURO__SQLITE_Q_ORDER_ID "i.instance_id"
#define DURO__SQLITE_Q_ORDER_CREATED "i.created_ms DESC, i.instance_id DESC"
#define DURO__SQLITE_Q_ORDER_UPDATED "i.updated_ms DESC, i.instance_id DESC"
#define DURO__SQLITE_Q_KEY_ID "0"
#define DURO__SQLITE_Q_KEY_CREATED "i.created_ms"
#define DURO__SQLITE_Q_KEY_UPDATED "i.updated_ms"
#define DURO__SQLITE_Q_OUTER_ID "pg.pid"
#define DURO__SQLITE_Q_OUTER_CREATED "pg.pk DESC, pg.pid DESC"
#define DURO__SQLITE_Q_OUTER_UPDATED "pg.pk DESC, pg.pid DESC"
#define DURO__SQLITE_Q_CR_ID "+"
#define DURO__SQLITE_Q_CR_CREATED ""
#define DURO__SQLITE_Q_CR_UPDATED "+"
/* the WHERE of path term `drive` in order o with filter F, and its ORDER
 * BY and LIMIT */
#define DURO__SQLITE_Q_WHERE_F(F, drive, o)                                    \
    "WHERE " drive DURO__SQLITE_Q_KEYSET_##o                                   \
        "AND " F(DURO__SQLITE_Q_CR_##o) "ORDER BY " DURO__SQLITE_Q_ORDER_##o   \
        " LIMIT ?12"
#define DURO__SQLITE_Q_WHERE(drive, o)                                         \
    DURO__SQLITE_Q_WHERE_F(DURO__SQLITE_Q_FILTER, drive, o)
/* a page read in its order from the index `drive` serves */
#define DURO__SQLITE_Q_ORDERED(drive, o)                                       \
    DURO__SQLITE_INFO_COLUMNS DURO__SQLITE_Q_WHERE(drive, o)
/* the ids and keys a path chose (alias pg: pid, pk) joined with their
 * instances */
#define DURO__SQLITE_Q_JOINED(chosen, o)                                       \
    DURO__SQLITE_INFO_SELECT                                                   \
    "FROM (" chosen ") AS pg "                                                 \
    "CROSS JOIN instances AS i ON i.instance_id = pg.pid "                     \
    "ORDER BY " DURO__SQLITE_Q_OUTER_##o " LIMIT ?12"
#define DURO__SQLITE_Q_CHOOSE_F(F, from, drive, o)                             \
    "SELECT i.instance_id AS pid, " DURO__SQLITE_Q_KEY_##o                     \
        " AS pk "                                                              \
        "FROM " from " " DURO__SQLITE_Q_WHERE_F(F, drive, o)
#define DURO__SQLITE_Q_CHOOSE(from, drive, o)                                  \
    DURO__SQLITE_Q_CHOOSE_F(DURO__SQLITE_Q_FILTER, from, drive, o)
/* a sorted path: every row of index `index` that `drive` selects */
#define DURO__SQLITE_Q_SORTED(index, drive, o)                                 \
    DURO__SQLITE_Q_JOINED(                                                     \
        DURO__SQLITE_Q_CHOOSE("instances AS i INDEXED BY " index, drive, o),   \
        o)
/* the STATUS paths: one ordered range per status ?13 .. ?19, merged */
#define DURO__SQLITE_Q_ARM(k, name, o)                                         \
    "SELECT * FROM (" DURO__SQLITE_Q_CHOOSE_F(                                 \
        DURO__SQLITE_Q_FILTER_ARM, "instances AS i",                           \
        name "i.status = ?" k " AND ", o) ")"
#define DURO__SQLITE_Q_ARMS(name, o)                                           \
    DURO__SQLITE_Q_JOINED(DURO__SQL_UNION7(DURO__SQLITE_Q_ARM("13", name, o),  \
                                           DURO__SQLITE_Q_ARM("14", name, o),  \
                                           DURO__SQLITE_Q_ARM("15", name, o),  \
                                           DURO__SQLITE_Q_ARM("16", name, o),  \
                                           DURO__SQLITE_Q_ARM("17", name, o),  \
                                           DURO__SQLITE_Q_ARM("18", name, o),  \
                                           DURO__SQLITE_Q_ARM("19", name, o)), \
                          o)
#define DURO__SQLITE_Q_ALL(o) DURO__SQLITE_Q_ORDERED("", o)
#define DURO__SQLITE_Q_NAME(o) DURO__SQLITE_Q_ORDERED("i.name = ?1 AND ", o)
#define DURO__SQLITE_Q_STATUS(o) DURO__SQLITE_Q_ARMS("", o)
#define DURO__SQLITE_Q_NAME_STATUS(o) DURO__SQLITE_Q_ARMS("i.name = ?1 AND ", o)
#define DURO__SQLITE_Q_PREFIX(o)                                               \
    DURO__SQLITE_Q_SORTED("instances_name",                                    \
                          "i.name >= ?2 AND i.name < ?3 AND ", o)
#define DURO__SQLITE_Q_PARENT(o)                                               \
    DURO__SQLITE_Q_SORTED("instances_parent", "i.parent_instance = ?5 AND ", o)
#define DURO__SQLITE_Q_PROBLEM(o)                                              \
    DURO__SQLITE_Q_SORTED("instances_problem",                                 \
                          "i.last_problem IS NOT NULL AND ", o)
/* total: the matches of a path, at most ?20 of them (a negative LIMIT is
 * none: every one) */
#define DURO__SQLITE_Q_COUNT_CR(from, drive, cr)                               \
    "SELECT COUNT(*) FROM (SELECT 1 FROM " from " WHERE " drive                \
    DURO__SQLITE_Q_FILTER(cr) "LIMIT ?20)"
#define DURO__SQLITE_Q_COUNT(from, drive)                                      \
    DURO__SQLITE_Q_COUNT_CR(from, drive, "+")
#define DURO__SQLITE_Q_STATUSES                                                \
    "i.status IN (?13, ?14, ?15, ?16, ?17, ?18, ?19) "
/* The paths' statements (sql/statements.h), then the counts. */
#define DURO__SQLITE_QUERY_STATEMENTS(X)                                       \
    DURO__SQL_QUERY_PATHS(X, DURO__SQLITE_Q)                                   \
    X(QUERY_COUNT_ALL, DURO__SQLITE_Q_COUNT_CR("instances AS i", "", ""))      \
    X(QUERY_COUNT_NAME,                                                        \
      DURO__SQLITE_Q_COUNT("instances AS i", "i.name = ?1 AND "))              \
    X(QUERY_COUNT_STATUS,                                                      \
      DURO__SQLITE_Q_COUNT("instances AS i", DURO__SQLITE_Q_STATUSES "AND "))  \
    X(QUERY_COUNT_NAME_STATUS,                                                 \
      DURO__SQLITE_Q_COUNT("instances AS i",                                   \
                           "i.name = ?1 AND " DURO__SQLITE_Q_STATUSES "AND ")) \
    X(QUERY_COUNT_PREFIX,                                                      \
      DURO__SQLITE_Q_COUNT("instances AS i INDEXED BY instances_name",         \
                           "i.name >= ?2 AND i.name < ?3 AND "))               \
    X(QUERY_COUNT_PARENT,                                                      \
      DURO__SQLITE_Q_COUNT("instances AS i INDEXED BY instances_parent",       \
                           "i.parent_instance = ?5 AND "))                     \
    X(QUERY_COUNT_PROBLEM,                                                     \
      DURO__SQLITE_Q_COUNT("instances AS i INDEXED BY instances_problem",      \
                           "i.last_problem IS NOT NULL AND "))                 \
    /* list_control_events: ?1 kinds checked row by row (0: the four), ?2      \
     * requester (NULL: any), ?3 since (inclusive), ?4 .. ?7 the keyset (the   \
     * events below it in the order), ?8 the rows to read. The four kinds as   \
     * written let history_control, a partial index of them alone, serve. */   \
    X(CONTROL_EVENTS,                                                          \
      "SELECT h.instance_id, i.name, h.execution_id, h.event_id, h.kind, "     \
      "h.timestamp_ms, h.reason, h.requested_by, h.flags "                     \
      "FROM history AS h LEFT JOIN instances AS i "                            \
      "ON i.instance_id = h.instance_id "                                      \
      "WHERE " DURO__SQLITE_CONTROL_KIND " "                                   \
      "AND (h.timestamp_ms, h.instance_id, h.execution_id, h.event_id) "       \
      "< (?4, ?5, ?6, ?7) AND h.timestamp_ms >= ?3 "                           \
      "AND (?1 = 0 OR ((?1 >> h.kind) & 1)) "                                  \
      "AND (?2 IS NULL OR h.requested_by = ?2) "                               \
      "ORDER BY h.timestamp_ms DESC, h.instance_id DESC, "                     \
      "h.execution_id DESC, h.event_id DESC LIMIT ?8")                         \
    /* a reset (version 13): the ended instance ?1 at execution ?3 moves to    \
     * execution ?2, Running, its ending and requests cleared, a rewound       \
     * child's parent link moved to ?5 (0: kept), its deadline cleared (a      \
     * DEADLINE message sets the one it runs under); 0 rows when another       \
     * reset or a turn changed it first (the compare-and-set) */               \
    X(RESET_INSTANCE,                                                          \
      "UPDATE instances SET status = 2, execution_id = ?2, output = NULL, "    \
      "error = NULL, category = 0, updated_ms = ?4, finished_ms = NULL, "      \
      "last_problem = NULL, last_problem_ms = NULL, next_attempt_ms = NULL, "  \
      "cancel_requested_ms = NULL, cancel_reason = NULL, "                     \
      "cancelled_by = NULL, deadline_ms = 0, parent_execution = "              \
      "CASE WHEN ?5 <> 0 THEN ?5 ELSE parent_execution END "                   \
      "WHERE instance_id = ?1 AND execution_id = ?3 "                          \
      "AND status IN (3, 4, 5, 8)")

/* The ids are the shared list's (statements.h); the texts above are this
 * dialect's. */
typedef duro__sql_stmt_id duro__sqlite_stmt_id;
/* 1 when this dialect has a text for id. */
int duro__sqlite_has_statement(duro__sql_stmt_id id);
/* The texts by id (NULL: none). */
extern const char *const duro__sqlite_statement_texts[DURO__SQL_COUNT];

/* ---- connections and the provider ---------------------------------------- */

typedef struct duro__sqlite_conn {
    sqlite3 *db;
    sqlite3_stmt *stmts[DURO__SQL_COUNT];       /* prepared on first use */
    uint64_t used[(DURO__SQL_COUNT + 63) / 64]; /* reset when released */
    int bind_rc;     /* first failed bind since the last step */
    int injected_rc; /* the fault hook's code, until reported */
} duro__sqlite_conn;

typedef struct duro__sqlite_provider {
    duro__sql_store sql; /* first member (its first: duro_provider) */
    duro__sqlite_config cfg;

    /* Lock order: write_lock, then the pool's lock, group_lock or the
     * notifier's lock; group_lock, then a grouped write's wait_lock; the
     * notifier's lock and a wait_lock are never held while taking another
     * lock; urgent_lock and checkpoint_lock are taken only without
     * write_lock. */
    pthread_mutex_t write_lock; /* held for every use of `writer` */
    duro__sqlite_conn writer;
    /* Group commit (duro__sqlite_write_grouped): the writes queued for the
     * next shared transaction, and whether a thread is leading one. Under
     * group_lock, which is held only to queue and take writes. */
    pthread_mutex_t group_lock;
    struct duro__sqlite_grouped *group_head, *group_tail;
    int group_leading;
    _Atomic int group_queued; /* writes in the queue (written under
                                 group_lock) */
    int group_last;           /* writes in the last shared transaction */
    _Atomic int group_urgent; /* urgent writes in the queue (idem) */
    _Atomic uint64_t group_transactions; /* shared transactions committed */
    _Atomic uint64_t group_writes;       /* writes they carried */
    /* Urgent writes (work-item lock renewals: they have a deadline, the
     * rest is throughput) go first: while one waits for write_lock, other
     * writers wait on urgent_cond before taking it, so no fetch that began
     * after the renewal (and may see the lock expired) gets in ahead of it.
     * urgent_lock is taken only without write_lock. */
    _Atomic int urgent_writers; /* urgent writes waiting for write_lock */
    pthread_mutex_t urgent_lock;
    pthread_cond_t urgent_cond;

    /* the pooled readers (idle ones in sql.pool) */
    duro__sqlite_conn *readers;
    int reader_count;

    /* WAL checkpoints off the writer's path (file databases). The writer's
     * automatic checkpoint is replaced by a WAL hook that records the WAL's
     * size; after a commit has released write_lock, the committing thread
     * checkpoints on a connection of its own (one thread at a time) once
     * enough new frames have accumulated. See duro__sqlite_checkpoint. */
    duro__sqlite_conn checkpointer;
    int has_checkpointer;
    pthread_mutex_t checkpoint_lock;
    _Atomic int wal_frames;           /* WAL size after the last commit */
    _Atomic uint64_t checkpoints;     /* run so far, for tests */
    int checkpointed;                 /* frames backfilled by the last
                                         checkpoint (under checkpoint_lock) */
    int64_t restart_after_ms;         /* no RESTART checkpoint before (one
                                         gave up; under checkpoint_lock) */
    int checkpoint_frames;            /* new frames between checkpoints
                                         (cfg.checkpoint_pages; a test may
                                         lower it right after open) */
    _Atomic int checkpoint_held_back; /* the last checkpoint could not
                                         catch up (a RESTART gave up for a
                                         reader, or it failed): writers
                                         past the cap do not wait */
    _Atomic int sweeps;               /* bulk sweeps holding a snapshot open
                                         (no RESTART checkpoint meanwhile) */

} duro__sqlite_provider;

/* Connections. conn_open applies busy_timeout; conn_close finalizes the
 * connection's statements. */
int duro__sqlite_conn_open(duro__sqlite_provider *p, duro__sqlite_conn *c,
                           int readonly, duro_error *err);
void duro__sqlite_conn_close(duro__sqlite_conn *c);
/* Checks the schema version (DURO_SCHEMA for a newer database, left
 * untouched), then sets the writer's journal mode and synchronous level and
 * creates or migrates the schema. */
int duro__sqlite_migrate(duro__sqlite_provider *p, duro_error *err);
/* A file that exists, is not empty and does not begin with SQLite's magic
 * header is refused (DURO_SCHEMA) before anything opens it: SQLite would
 * take one shorter than its header for an empty database. */
int duro__sqlite_check_is_database(duro__sqlite_provider *p, duro_error *err);

/* A user's name, or "uid N" without one, for messages (sqlite_files.c). */
void duro__sqlite_user_name(uid_t uid, char *out, size_t size);

/* Refuses (DURO_STORAGE, the reason and the way out in the message) to let
 * SQLite create the file's -wal and -shm where that would fail (directory
 * not writable) or lock the file's owner out (another user would own
 * them). opened = 0: before the writer opens the file (a file in WAL
 * mode); 1: before the writer switches a file in rollback mode to WAL. */
int duro__sqlite_check_wal_files(duro__sqlite_provider *p, int opened,
                                 duro_error *err);

/* The primitives on SQLite (sqlite_db.c; sql/adapt.h declares them, their
 * contracts are sql.h's): step is sqlite3_step through the fault hook;
 * error maps BUSY/LOCKED to DURO_BUSY (retryable), the rest to
 * DURO_STORAGE with SQLite's message; bindings record their first failure
 * in c->bind_rc for the next step, text bound SQLITE_STATIC (every
 * statement is reset before the call returns); write_begin takes
 * write_lock and runs BEGIN IMMEDIATE, commit and rollback release it;
 * readers (below) are pooled read-only connections. */
DURO__SQL_DECLARE_PRIMITIVES(sqlite, duro__sqlite_provider, duro__sqlite_conn,
                             sqlite3_stmt);
/* write_begin for a write with a deadline: it takes write_lock before any
 * writer that arrives while it waits. */
int duro__sqlite_write_begin_urgent(duro__sqlite_provider *p, const char *op,
                                    duro__sqlite_conn **out, duro_error *err);

/* A write that may share its transaction with the writes other threads
 * make at the same time: group commit. The caller fills run (and undo),
 * err and its own fields around it, and calls duro__sqlite_write_grouped;
 * the rest is the provider's. */
typedef struct duro__sqlite_grouped duro__sqlite_grouped;
enum { DURO__GROUP_WAITING, DURO__GROUP_MAY_LEAD, DURO__GROUP_DONE };
struct duro__sqlite_grouped {
    /* The write, inside the transaction on the writer c (under write_lock,
     * on whichever thread leads it); returns DURO_OK or fills err. With a
     * failure, *clean = 1 says it changed nothing: the transaction goes
     * on with the others' writes; any other failure rolls all of it back. */
    int (*run)(duro__sqlite_provider *p, duro__sqlite_conn *c,
               duro__sqlite_grouped *g, int *clean, duro_error *err);
    /* The transaction in which run ran did not commit: let go of what run
     * made outside the store (an item it fetched). May be NULL. */
    void (*undo)(duro__sqlite_grouped *g);
    duro_error *err; /* the caller's: the outcome's detail */
    /* the caller's: 1 for a write whose outcome a running activity waits
     * for (a turn that cancels activities): while it is queued no leader
     * waits for company */
    int urgent;
    /* the provider's. A waiting thread sleeps on its own word (state,
     * duro__wake_wait), not on group_lock nor any lock: a leader tells each
     * write of its batch the outcome after it has handed the lead on and
     * let group_lock go, so a woken writer neither waits for group_lock nor
     * holds up the next leader, and it does not go back to sleep on a lock
     * its waker holds (a condition variable's wait re-takes its mutex:
     * half the slots' context switches once). rc and alone are written
     * before state becomes DONE (release) and read after (acquire). */
    int rc;
    int alone;         /* the shared transaction failed: run again alone */
    int taken;         /* under group_lock: in a leader's batch */
    _Atomic int state; /* DURO__GROUP_WAITING, _MAY_LEAD (handed the lead:
                          the queue's head), _DONE (the outcome is known) */
    duro__sqlite_grouped *link;
};

/* Runs g in a write transaction together with the grouped writes that
 * other threads queue meanwhile: one thread (the first to find none
 * leading) takes write_lock, then every write queued by then, runs each
 * and commits them together, with those queued while they run; the others
 * wait for their outcome. (When the last such transaction carried several
 * writes and no urgent one is queued, the leader first gives the threads
 * writing beside it up to 100 us to queue as many.) One
 * write alone runs exactly as write_begin, run, write_commit would (the
 * fault hook sees the same steps). A write that fails cleanly fails
 * alone; when one fails otherwise, the transaction rolls back and each
 * write of it runs again alone, on its own thread; when the commit fails,
 * every write of it fails with the commit's error. Returns g's outcome
 * (g->err set on failure). Any thread; not under write_lock. */
int duro__sqlite_write_grouped(duro__sqlite_provider *p, const char *op,
                               duro__sqlite_grouped *g);

/* Reader connections (reader_acquire, reader_release): a pooled read-only
 * one, or the writer (under write_lock) when the database is :memory: or
 * pool=0. release resets the statements used and ends any read
 * transaction. */

/* Checkpoints the WAL when enough frames accumulated since the last
 * checkpoint, unless another thread is checkpointing. Call without
 * write_lock held (after a commit). */
void duro__sqlite_checkpoint(duro__sqlite_provider *p);
/* For a writer about to begin while the WAL is past twice the interval:
 * waits for the checkpoint running, or runs one. Call without write_lock
 * held. */
void duro__sqlite_checkpoint_behind(duro__sqlite_provider *p);
/* Installs the WAL hook on the writer (replacing SQLite's autocheckpoint)
 * and sets its journal_size_limit. */
int duro__sqlite_checkpoint_setup(duro__sqlite_provider *p, duro_error *err);
/* The writer's journal_size_limit for a checkpoint interval of
 * checkpoint_pages frames of page_size bytes: the WAL file is cut back to
 * it when the WAL starts over. */
int64_t duro__sqlite_wal_limit_bytes(int checkpoint_pages, int64_t page_size);

/* The dialect's queue members (sqlite_queue.c; contracts: sql/sql.h). */
duro__sql_ack_turns_fn duro__sqlite_ack_turns;
duro__sql_ack_work_fn duro__sqlite_ack_work;
duro__sql_fetch_work_fn duro__sqlite_fetch_work;

/* The primitives of the shared SQL layer on this store (sqlite_dialect.c). */
extern const duro__sql_dialect duro__sqlite_dialect;

#endif
