/* statements.h - the one list of statement ids of the SQL stores. Each
 * dialect gives the text of the ids it runs (sqlite_internal.h,
 * pg_internal.h: X(ID, sql)); an id a dialect has no text for is one the
 * shared layer asks for only through a dialect hook of that store (the
 * PostgreSQL batches, SQLite's queue tags). X(ID) */
#ifndef DURO_SQL_STATEMENTS_H
#define DURO_SQL_STATEMENTS_H

#define DURO__SQL_IDS(X)                                                       \
    X(BEGIN_WRITE)                                                             \
    X(BEGIN_READ)                                                              \
    X(BEGIN_SNAPSHOT)                                                          \
    X(COMMIT)                                                                  \
    X(ROLLBACK)                                                                \
    X(INSTANCE_CREATE)                                                         \
    X(INSTANCE_CURRENT)                                                        \
    X(INSTANCE_NAME)                                                           \
    X(INSTANCE_SET_CURRENT)                                                    \
    X(INSTANCE_WRITE_META)                                                     \
    X(INSTANCE_FETCH_META)                                                     \
    X(INSTANCE_CANCEL_REQUEST)                                                 \
    X(INSTANCE_SET_DEADLINE)                                                   \
    X(INSTANCE_SET_PROBLEM)                                                    \
    X(INSTANCE_INFO)                                                           \
    X(LIST_ALL)                                                                \
    X(LIST_NAME)                                                               \
    X(LIST_STATUS)                                                             \
    X(LIST_NAME_STATUS)                                                        \
    X(EXEC_EVENT_COUNT)                                                        \
    X(EXEC_CREATE)                                                             \
    X(EXEC_WRITE_META)                                                         \
    X(HISTORY_INSERT)                                                          \
    X(HISTORY_INSERT_MANY)                                                     \
    X(HISTORY_INSERT_BATCH)                                                    \
    X(EXEC_CREATE_MANY)                                                        \
    X(META_WRITE_MANY)                                                         \
    X(HISTORY_READ_MANY)                                                       \
    X(HISTORY_READ)                                                            \
    X(HISTORY_CANCEL_REASON)                                                   \
    X(OQ_INSERT)                                                               \
    X(EVENT_ID_RECORD)                                                         \
    X(STATS_PLAN)                                                              \
    X(OQ_TAG)                                                                  \
    X(OQ_FETCHED)                                                              \
    X(OQ_DELETE_TAGGED)                                                        \
    X(OQ_UNTAG)                                                                \
    X(OQ_UNTAG_UNCOUNT)                                                        \
    X(OQ_DELETE_INSTANCE)                                                      \
    X(OQ_DELETE_EXECUTION)                                                     \
    X(OQ_MIN_VISIBLE)                                                          \
    X(OQ_COUNT)                                                                \
    X(OQ_COUNT_INSTANCE)                                                       \
    X(READY_ENQUEUE)                                                           \
    X(READY_CLAIM)                                                             \
    X(READY_CLAIM_ASYNC)                                                       \
    X(READY_CLAIM_MANY)                                                        \
    X(READY_CLAIM_MANY_ASYNC)                                                  \
    X(READY_HOLDER_CURRENT)                                                    \
    X(READY_ACK_SETTLE)                                                        \
    X(READY_HOLDER_MANY)                                                       \
    X(READY_ACK_SETTLE_MANY)                                                   \
    X(READY_NEXT)                                                              \
    X(READY_LOCK)                                                              \
    X(READY_HOLDER)                                                            \
    X(READY_RENEW)                                                             \
    X(READY_SET)                                                               \
    X(READY_DELETE)                                                            \
    X(READY_MIN)                                                               \
    X(READY_CLAIMED_BY)                                                        \
    X(WQ_INSERT)                                                               \
    X(WQ_INSERT_MANY)                                                          \
    X(WQ_FETCH)                                                                \
    X(WQ_FETCH_ASYNC)                                                          \
    X(WQ_NEXT)                                                                 \
    X(WQ_CLAIM)                                                                \
    X(WQ_ACK)                                                                  \
    X(WQ_ACK_COMPLETE)                                                         \
    X(WQ_ACK_COMPLETE_FETCH)                                                   \
    X(WQ_ACK_COMPLETE_FETCH_MANY)                                              \
    X(WQ_HELD)                                                                 \
    X(WQ_RENEW)                                                                \
    X(WQ_ABANDON)                                                              \
    X(WQ_EXISTS)                                                               \
    X(WQ_RELEASE_ACKED)                                                        \
    X(WQ_RELEASE_CLAIMED)                                                      \
    X(WQ_CANCEL)                                                               \
    X(WQ_MIN)                                                                  \
    X(WQ_COUNT)                                                                \
    X(WQ_COUNT_INSTANCE)                                                       \
    X(DELETE_CHECK)                                                            \
    X(DELETE_HISTORY)                                                          \
    X(DELETE_EXECUTIONS)                                                       \
    X(DELETE_MESSAGES)                                                         \
    X(DELETE_READY)                                                            \
    X(DELETE_WORK)                                                             \
    X(DELETE_EVENT_IDS)                                                        \
    X(DELETE_INSTANCES)                                                        \
    X(PRUNE_HISTORY)                                                           \
    X(PRUNE_EXECUTIONS)                                                        \
    X(REQUEST_IDS_LOCK_READY)                                                  \
    X(SWEEP_REQUEST_LOCK_READY)                                                \
    X(REQUEST_IDS_READ)                                                        \
    X(REQUEST_IDS_ENQUEUE)                                                     \
    X(REQUEST_IDS_READY)                                                       \
    X(CANCEL_IDS_MARK)                                                         \
    X(DECIDE_EXECUTIONS)                                                       \
    X(DECIDE_HISTORY)                                                          \
    X(DECIDE_PARENT_MESSAGES)                                                  \
    X(DECIDE_PARENT_READY)                                                     \
    X(DECIDE_INSTANCES)                                                        \
    X(DECIDE_QUEUE)                                                            \
    X(DECIDE_READY_DROP)                                                       \
    X(DECIDE_READY_SET)                                                        \
    X(SWEEP_REQUEST_NAME)                                                      \
    X(SWEEP_REQUEST_ALL)                                                       \
    X(SWEEP_FETCH)                                                             \
    X(SWEEP_REQUEST_RECHECK)                                                   \
    X(SWEEP_PURGE_NAME)                                                        \
    X(SWEEP_PURGE_ALL)                                                         \
    X(PURGE_BATCH)                                                             \
    X(PURGE_HISTORY)                                                           \
    X(PURGE_EXECUTIONS)                                                        \
    X(PURGE_MESSAGES)                                                          \
    X(PURGE_READY)                                                             \
    X(PURGE_WORK)                                                              \
    X(PURGE_EVENT_IDS)                                                         \
    X(PURGE_INSTANCES)                                                         \
    X(STATS_SIZE)                                                              \
    X(STATS_INSTANCES)                                                         \
    X(STATS_PROBLEMS)                                                          \
    X(STATS_ORCH_QUEUED)                                                       \
    X(STATS_ORCH_WAITING)                                                      \
    X(STATS_ORCH_OLDEST)                                                       \
    X(STATS_WORKER_READY)                                                      \
    X(STATS_WORKER_LOCKED)                                                     \
    X(QUERY_ALL_ID)                                                            \
    X(QUERY_NAME_ID)                                                           \
    X(QUERY_STATUS_ID)                                                         \
    X(QUERY_STATUS_CREATED)                                                    \
    X(QUERY_STATUS_UPDATED)                                                    \
    X(QUERY_NAME_STATUS_ID)                                                    \
    X(QUERY_NAME_STATUS_CREATED)                                               \
    X(QUERY_NAME_STATUS_UPDATED)                                               \
    X(QUERY_PREFIX_ID)                                                         \
    X(QUERY_PREFIX_CREATED)                                                    \
    X(QUERY_PREFIX_UPDATED)                                                    \
    X(QUERY_PARENT_ID)                                                         \
    X(QUERY_PARENT_CREATED)                                                    \
    X(QUERY_PARENT_UPDATED)                                                    \
    X(QUERY_PROBLEM_ID)                                                        \
    X(QUERY_PROBLEM_CREATED)                                                   \
    X(QUERY_PROBLEM_UPDATED)                                                   \
    X(QUERY_COUNT_ALL)                                                         \
    X(QUERY_COUNT_NAME)                                                        \
    X(QUERY_COUNT_STATUS)                                                      \
    X(QUERY_COUNT_NAME_STATUS)                                                 \
    X(QUERY_COUNT_PREFIX)                                                      \
    X(QUERY_COUNT_PARENT)                                                      \
    X(QUERY_COUNT_PROBLEM)                                                     \
    /* schedules (sql/schedules.c) */                                          \
    X(SCHEDULE_CREATE)                                                         \
    X(SCHEDULE_UPDATE)                                                         \
    X(SCHEDULE_EXISTS)                                                         \
    X(SCHEDULE_DELETE)                                                         \
    X(SCHEDULE_FIRES_DELETE)                                                   \
    X(SCHEDULE_GET)                                                            \
    X(SCHEDULE_LIST)                                                           \
    X(SCHEDULE_DUE)                                                            \
    X(SCHEDULE_NEXT_DUE)                                                       \
    X(SCHEDULE_CLAIM)                                                          \
    X(SCHEDULE_APPLY)                                                          \
    X(SCHEDULE_FIRE_INSERT)                                                    \
    X(SCHEDULE_FIRES_TRIM)                                                     \
    X(SCHEDULE_FIRES_LIST)                                                     \
    X(CONTROL_EVENTS)                                                          \
    X(RUNTIME_UPSERT)                                                          \
    X(RUNTIME_EXPIRE)                                                          \
    X(RUNTIME_DELETE)                                                          \
    X(RUNTIME_LIST)                                                            \
    X(RESET_INSTANCE)

/* The operators' query indexes (provider contract version 10), the same
 * DDL in both stores' migrations (SQLite's 7, PostgreSQL's 5); each ends
 * the last, a partial index of the four control kinds, with its WHERE. A
 * shipped migration's text: never edit. */
#define DURO__SQL_DDL_QUERY_INDEXES                                            \
    "CREATE INDEX instances_status_created"                                    \
    " ON instances(status, created_ms, instance_id);"                          \
    "CREATE INDEX instances_status_updated"                                    \
    " ON instances(status, updated_ms, instance_id);"                          \
    "CREATE INDEX instances_name_status_created"                               \
    " ON instances(name, status, created_ms, instance_id);"                    \
    "CREATE INDEX instances_name_status_updated"                               \
    " ON instances(name, status, updated_ms, instance_id);"                    \
    "CREATE INDEX history_control"                                             \
    " ON history(timestamp_ms, instance_id, execution_id, event_id)"

/* An instance (alias t) that has not begun, which a cancel, terminate or
 * suspend decides at once (provider version 9): Pending, no execution yet,
 * no runtime holding its lock (held: a token whose lock has not expired
 * at NOW, an SQL expression), and no earlier request queued that a turn
 * would have to record first. The same SQL in both stores. */
#define DURO__SQL_UNBEGUN(t, NOW)                                              \
    "(" t ".status = 1 AND " t ".execution_id = 0 AND NOT EXISTS (SELECT 1 "   \
    "FROM orchestrator_ready AS r WHERE r.instance_id = " t ".instance_id "    \
    "AND r.lock_token IS NOT NULL AND r.locked_until > " NOW ") "              \
    "AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q "                   \
    "WHERE q.instance_id = " t ".instance_id AND q.kind IN (8, 11, 12, 13)))"

/* The instance queries' paths (query_instances), written once over a
 * dialect's path macros Q_ALL(o), Q_NAME(o), Q_STATUS(o) ... Q_PROBLEM(o)
 * (Q its prefix, o ID, CREATED or UPDATED): X(id, text) for each, in
 * duro__query_path order (sql/manage.c indexes them by path and order).
 * UNION7 joins the seven arms of a STATUS path, one per status. */
#define DURO__SQL_UNION7(a, b, c, d, e, f, g)                                  \
    a " UNION ALL " b " UNION ALL " c " UNION ALL " d " UNION ALL " e          \
      " UNION ALL " f " UNION ALL " g
#define DURO__SQL_Q3(X, Q, P)                                                  \
    X(QUERY_##P##_ID, Q##_##P(ID))                                             \
    X(QUERY_##P##_CREATED, Q##_##P(CREATED))                                   \
    X(QUERY_##P##_UPDATED, Q##_##P(UPDATED))
#define DURO__SQL_QUERY_PATHS(X, Q)                                            \
    X(QUERY_ALL_ID, Q##_ALL(ID))                                               \
    X(QUERY_NAME_ID, Q##_NAME(ID))                                             \
    DURO__SQL_Q3(X, Q, STATUS)                                                 \
    DURO__SQL_Q3(X, Q, NAME_STATUS)                                            \
    DURO__SQL_Q3(X, Q, PREFIX)                                                 \
    DURO__SQL_Q3(X, Q, PARENT)                                                 \
    DURO__SQL_Q3(X, Q, PROBLEM)

/* The live runtimes (provider contract version 12): a row is live while
 * heartbeat_ms + DURO_RUNTIME_MISSED_HEARTBEATS (3) x heartbeat_every_ms
 * is not before the time the statement binds, written after it. The same
 * SQL in both stores. */
#define DURO__SQL_RUNTIME_LIVE "heartbeat_ms + 3 * heartbeat_every_ms >= "
#define DURO__SQL_RUNTIME_COLUMNS                                              \
    "runtime_id, host, pid, started_ms, heartbeat_ms, heartbeat_every_ms, "    \
    "orchestrations, activities"
/* A runtime's row written again (its start after a crash under the same
 * id, every heartbeat): every column but the key. */
#define DURO__SQL_RUNTIME_UPSERT_SET                                           \
    "ON CONFLICT(runtime_id) DO UPDATE SET host = excluded.host, "             \
    "pid = excluded.pid, started_ms = excluded.started_ms, "                   \
    "heartbeat_ms = excluded.heartbeat_ms, "                                   \
    "heartbeat_every_ms = excluded.heartbeat_every_ms, "                       \
    "orchestrations = excluded.orchestrations, "                               \
    "activities = excluded.activities"

/* The statements both stores spell alike. */
#define DURO__SQL_END_STATEMENTS(X)                                            \
    X(COMMIT, "COMMIT")                                                        \
    X(ROLLBACK, "ROLLBACK")

/* A purge's trees: every instance under the roots in top(id), and of them
 * those whose whole tree has ended (the ids, in order); the same SQL in
 * both stores after the roots' pick. */
#define DURO__SQL_PURGE_TREES                                                  \
    "tree(root, id) AS (SELECT id, id FROM top UNION "                         \
    "SELECT tree.root, c.instance_id FROM tree "                               \
    "JOIN instances AS c ON c.parent_instance = tree.id) "                     \
    "SELECT id FROM tree WHERE root NOT IN (SELECT "                           \
    "t.root FROM tree AS t "

typedef enum duro__sql_stmt_id {
#define DURO__X(id) DURO__SQL_##id,
    DURO__SQL_IDS(DURO__X)
#undef DURO__X
        DURO__SQL_COUNT
} duro__sql_stmt_id;

#endif
