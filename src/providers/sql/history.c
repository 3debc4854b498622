/* history.c - reading an execution's history rows (HISTORY_READ, the
 * columns DURO__SQLITE_HISTORY_COLUMNS / DURO__PG_HISTORY_COLUMNS) into an
 * arena, written once: read_history and the queues' fetches share it. Any
 * thread (a connection by one at a time). */
#include "providers/sql/sql.h"

int duro__sql_read_event(duro__sql_store *p, duro_arena *a, duro__sql_stmt *s,
                         duro_event *ev)
{
    ev->event_id = (uint64_t)duro__sql_column_int64(p, s, 0);
    ev->kind = (duro_event_kind)duro__sql_column_int(p, s, 1);
    ev->source_event_id = (uint64_t)duro__sql_column_int64(p, s, 2);
    ev->timestamp_ms = duro__sql_column_int64(p, s, 3);
    ev->category = duro__sql_column_int(p, s, 8);
    ev->ref_execution = (uint64_t)duro__sql_column_int64(p, s, 12);
    ev->ref_event_id = (uint64_t)duro__sql_column_int64(p, s, 13);
    ev->fire_at_ms = duro__sql_column_int64(p, s, 14);
    ev->attempt = (uint32_t)duro__sql_column_int64(p, s, 15);
    ev->flags = (uint32_t)duro__sql_column_int64(p, s, 16);
    ev->started_ms = duro__sql_column_int64(p, s, 17);
    ev->finished_ms = duro__sql_column_int64(p, s, 18);
    if (duro__sql_column_text(p, a, s, 4, &ev->name) ||
        duro__sql_column_text(p, a, s, 5, &ev->version) ||
        duro__sql_column_text(p, a, s, 6, &ev->payload) ||
        duro__sql_column_text(p, a, s, 7, &ev->error) ||
        duro__sql_column_text(p, a, s, 9, &ev->reason) ||
        duro__sql_column_text(p, a, s, 10, &ev->requested_by) ||
        duro__sql_column_text(p, a, s, 11, &ev->ref_instance))
        return -1;
    return 0;
}

int duro__sql_read_events(duro__sql_store *p, duro__sql_conn *c, duro_arena *a,
                          const char *instance_id, uint64_t execution_id,
                          uint64_t after, duro_event **events, size_t *count,
                          const char *op, duro_error *err)
{
    *events = NULL;
    *count = 0;
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_HISTORY_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(p, c, s, 1, instance_id);
    duro__sql_bind_u64(p, c, s, 2, execution_id);
    duro__sql_bind_u64(p, c, s, 3, after);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sql_step(p, c, s)) == DURO__SQL_ROW) {
        if (*count == cap) {
            *events = duro__sql_arena_grow(a, *events, *count, &cap,
                                           sizeof(duro_event));
            if (*events == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (duro__sql_read_event(p, a, s, &(*events)[*count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        (*count)++;
    }
    if (rc != DURO__SQL_DONE)
        return duro__sql_error(p, c, rc, op, err);
    return DURO_OK;
}
