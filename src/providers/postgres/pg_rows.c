/* pg_rows.c - rows of the queues read into items: messages, history
 * events, the instance of a claim and a claimed work row, copied into the
 * item's arena. Any thread (a connection is its caller's). */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- reading rows into items --------------------------------------------- */

/* Appends the event on s's row to (*events)[*count] in a (*cap grown as
 * needed); -1 when out of memory. */
int duro__pg_append_event(duro__pg_provider *p, duro_arena *a,
                          duro__pg_statement *s, duro_event **events,
                          size_t *count, size_t *cap)
{
    if (*count == *cap) {
        *events =
            duro__sql_arena_grow(a, *events, *count, cap, sizeof(duro_event));
        if (*events == NULL)
            return -1;
    }
    if (duro__sql_read_event(&p->sql, a, (duro__sql_stmt *)s,
                             &(*events)[*count]) != 0)
        return -1;
    (*count)++;
    return 0;
}

/* Fills the locked instance's messages, metadata and history into item. */
/* The instance row of a READY_CLAIM row (columns 22..34). */
#define CLAIM_META_COLUMN 22

int duro__pg_read_claimed_meta(duro_orch_item *item, duro__pg_statement *s)
{
    duro_arena *a = item->arena;
    const int m = CLAIM_META_COLUMN;
    item->status = duro__pg_column_null(s, m) ? DURO_STATUS_NOT_FOUND
                                              : duro__pg_column_int(s, m);
    item->execution_id = (uint64_t)duro__pg_column_int64(s, m + 1);
    item->parent_execution = (uint64_t)duro__pg_column_int64(s, m + 5);
    item->parent_event_id = (uint64_t)duro__pg_column_int64(s, m + 6);
    item->cancel_requested_ms = duro__pg_column_int64(s, m + 8);
    item->history_total = item->execution_id != 0
                              ? (uint64_t)duro__pg_column_int64(s, m + 12)
                              : 0;
    if (duro__pg_column_text(a, s, m + 2, &item->name) ||
        duro__pg_column_text(a, s, m + 3, &item->version) ||
        duro__pg_column_text(a, s, m + 4, &item->parent_instance) ||
        duro__pg_column_text(a, s, m + 7, &item->custom_status) ||
        duro__pg_column_text(a, s, m + 9, &item->cancel_reason) ||
        duro__pg_column_text(a, s, m + 10, &item->cancelled_by) ||
        duro__pg_column_text(a, s, m + 11, &item->last_problem))
        return -1;
    return 0;
}

/* The history of a claimed item that the caller's cache lacks. */
int duro__pg_load_claimed_history(duro__pg_provider *p, duro__pg_conn *c,
                                  duro_orch_item *item,
                                  const duro_history_cache *cache,
                                  const char *op, duro_error *err)
{
    item->history_offset = duro__history_offset(
        cache, item->instance_id, item->execution_id, item->history_total);
    if (item->history_total == item->history_offset)
        return DURO_OK;
    return duro__sql_read_events(&p->sql, (duro__sql_conn *)c, item->arena,
                                 item->instance_id, item->execution_id,
                                 item->history_offset, &item->history,
                                 &item->history_count, op, err);
}

/* Appends the message on s's claim row to item (*cap grown as needed),
 * raising item->attempt to its fetch count; -1 when out of memory. */
int duro__pg_append_claimed_message(duro__pg_provider *p, duro_orch_item *item,
                                    duro__pg_statement *s, size_t *cap)
{
    if (item->message_count == *cap) {
        item->messages = duro__sql_arena_grow(item->arena, item->messages,
                                              item->message_count, cap,
                                              sizeof(duro_work_item));
        if (item->messages == NULL)
            return -1;
    }
    /* READY_CLAIM's columns 0..16; the run times are 35, 36 */
    if (duro__sql_read_message(&p->sql, item->arena, (duro__sql_stmt *)s, 35,
                               &item->messages[item->message_count]) != 0)
        return -1;
    uint32_t fetches = (uint32_t)duro__pg_column_int64(s, 17);
    item->attempt = DURO__MAX(item->attempt, fetches);
    item->message_count++;
    return 0;
}

/* Reads the messages of a claim whose first row s is on, and ends s. */
int duro__pg_read_claimed_messages(duro__pg_provider *p, duro__pg_conn *c,
                                   duro__pg_statement *s, duro_orch_item *item,
                                   const char *op, duro_error *err)
{
    size_t cap = 0;
    int step = DURO__PG_ROW;
    for (; step == DURO__PG_ROW; step = duro__pg_step(p, c, s))
        if (duro__pg_append_claimed_message(p, item, s, &cap) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (step != DURO__PG_DONE)
        return duro__pg_error(c, step, op, err);
    duro__pg_reset(s);
    return DURO_OK;
}

/* Binds a claim's visibility time ($1), its token's random part ($2, the
 * caller's fresh duro__random_token, which must outlive the step: the
 * caller keeps it to release what the claim locked should its outcome be
 * unknown) and its lock's end ($3). */
void duro__pg_bind_claim(duro__pg_conn *c, duro__pg_statement *s,
                         const char *token_hex, int64_t now, int64_t until)
{
    duro__pg_bind_i64(c, s, 1, now);
    duro__pg_bind_text(c, s, 2, token_hex);
    duro__pg_bind_i64(c, s, 3, until);
}

/* 1 when the claim row s is on claimed nothing (column 18 NULL), after
 * noting when the queue's next message is due (column 21; none: NULL). */
int duro__pg_claimed_nothing(duro__pg_provider *p, duro__pg_statement *s)
{
    if (!duro__pg_column_null(s, 18))
        return 0;
    duro__pg_note_due(
        p, DURO_QUEUE_ORCHESTRATOR,
        duro__pg_column_null(s, 21) ? INT64_MAX : duro__pg_column_int64(s, 21));
    return 1;
}
