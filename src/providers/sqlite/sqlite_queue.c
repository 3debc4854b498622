/* sqlite_queue.c - the two queues of the SQLite provider: fetch, ack and
 * abandon on the orchestrator queue (instance locks live in
 * orchestrator_ready) and the worker queue; what both stores do alike
 * (enqueue, renew, the writes of an ack) is sql/queue.c's. Every write is
 * one BEGIN IMMEDIATE transaction on the writer connection, rolled back
 * whole on any failure. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sqlite/sqlite_internal.h"

#define TOKEN_MAX 64      /* "o<rowid>.<32 hex>" */
#define FETCH_ATTEMPTS 64 /* readiness repairs per fetch before giving up */

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

/* ---- shared pieces ------------------------------------------------------
 * Lock tokens, input checks and the writes both stores make alike are
 * sql/queue.c's. */

void *duro__sqlite_arena_grow(duro_arena *a, void *old, size_t count,
                              size_t *cap, size_t elem)
{
    return duro__sql_arena_grow(a, old, count, cap, elem);
}

/* ---- reading rows into items --------------------------------------------- */

/* A row of HISTORY_READ (columns DURO__SQLITE_HISTORY_COLUMNS). */
static int read_event(duro_arena *a, sqlite3_stmt *s, duro_event *ev)
{
    ev->event_id = (uint64_t)sqlite3_column_int64(s, 0);
    ev->kind = (duro_event_kind)sqlite3_column_int(s, 1);
    ev->source_event_id = (uint64_t)sqlite3_column_int64(s, 2);
    ev->timestamp_ms = sqlite3_column_int64(s, 3);
    ev->category = sqlite3_column_int(s, 8);
    ev->ref_execution = (uint64_t)sqlite3_column_int64(s, 12);
    ev->ref_event_id = (uint64_t)sqlite3_column_int64(s, 13);
    ev->fire_at_ms = sqlite3_column_int64(s, 14);
    ev->attempt = (uint32_t)sqlite3_column_int64(s, 15);
    ev->flags = (uint32_t)sqlite3_column_int64(s, 16);
    ev->started_ms = sqlite3_column_int64(s, 17);
    ev->finished_ms = sqlite3_column_int64(s, 18);
    if (duro__sqlite_column_text(a, s, 4, &ev->name) ||
        duro__sqlite_column_text(a, s, 5, &ev->version) ||
        duro__sqlite_column_text(a, s, 6, &ev->payload) ||
        duro__sqlite_column_text(a, s, 7, &ev->error) ||
        duro__sqlite_column_text(a, s, 9, &ev->reason) ||
        duro__sqlite_column_text(a, s, 10, &ev->requested_by) ||
        duro__sqlite_column_text(a, s, 11, &ev->ref_instance))
        return -1;
    return 0;
}

int duro__sqlite_read_events(duro__sqlite_provider *p, duro__sqlite_conn *c,
                             duro_arena *a, const char *instance_id,
                             uint64_t execution_id, uint64_t after,
                             duro_event **events, size_t *count, const char *op,
                             duro_error *err)
{
    *events = NULL;
    *count = 0;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_HISTORY_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    duro__sqlite_bind_u64(c, s, 2, execution_id);
    duro__sqlite_bind_u64(c, s, 3, after);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (*count == cap) {
            *events = duro__sqlite_arena_grow(a, *events, *count, &cap,
                                              sizeof(duro_event));
            if (*events == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (read_event(a, s, &(*events)[*count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        (*count)++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    return DURO_OK;
}

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* Fills the locked instance's messages, metadata and history into item. */
static int load_orch_item(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          duro_orch_item *item, int64_t now,
                          const duro_history_cache *cache, const char *op,
                          duro_error *err)
{
    duro_arena *a = item->arena;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_FETCHED, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    duro__sqlite_bind_i64(c, s, 2, now);
    duro__sqlite_bind_text(c, s, 3, item->lock_token);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (item->message_count == cap) {
            item->messages =
                duro__sqlite_arena_grow(a, item->messages, item->message_count,
                                        &cap, sizeof(duro_work_item));
            if (item->messages == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        /* OQ_FETCHED's columns: DURO__SQLITE_QUEUE_COLUMNS, the run times
         * 17 and 18 */
        if (duro__sql_read_message(&p->sql, a, (duro__sql_stmt *)s, 17,
                                   &item->messages[item->message_count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        uint32_t fetches = (uint32_t)sqlite3_column_int64(s, 19);
        item->attempt = DURO__MAX(item->attempt, fetches);
        item->message_count++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);

    item->status = DURO_STATUS_NOT_FOUND;
    s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_FETCH_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_ROW) {
        item->status = sqlite3_column_int(s, 0);
        item->execution_id = (uint64_t)sqlite3_column_int64(s, 1);
        item->parent_execution = (uint64_t)sqlite3_column_int64(s, 5);
        item->parent_event_id = (uint64_t)sqlite3_column_int64(s, 6);
        item->cancel_requested_ms = sqlite3_column_int64(s, 8);
        if (duro__sqlite_column_text(a, s, 2, &item->name) ||
            duro__sqlite_column_text(a, s, 3, &item->version) ||
            duro__sqlite_column_text(a, s, 4, &item->parent_instance) ||
            duro__sqlite_column_text(a, s, 7, &item->custom_status) ||
            duro__sqlite_column_text(a, s, 9, &item->cancel_reason) ||
            duro__sqlite_column_text(a, s, 10, &item->cancelled_by) ||
            duro__sqlite_column_text(a, s, 11, &item->last_problem))
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    } else if (rc != SQLITE_DONE) {
        return duro__sqlite_error(c, rc, op, err);
    }
    sqlite3_reset(s);

    if (item->execution_id > 0) {
        s = duro__sqlite_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, item->instance_id);
        duro__sqlite_bind_u64(c, s, 2, item->execution_id);
        rc = duro__sqlite_step(p, c, s);
        if (rc == SQLITE_ROW)
            item->history_total = (uint64_t)sqlite3_column_int64(s, 0);
        else if (rc != SQLITE_DONE)
            return duro__sqlite_error(c, rc, op, err);
        sqlite3_reset(s);
    }
    item->history_offset = duro__history_offset(
        cache, item->instance_id, item->execution_id, item->history_total);
    if (item->history_total == item->history_offset)
        return DURO_OK;
    return duro__sqlite_read_events(
        p, c, a, item->instance_id, item->execution_id, item->history_offset,
        &item->history, &item->history_count, op, err);
}

/* The body of fetch_orchestration_item inside an open write transaction:
 * *out is the locked item, or NULL when nothing is visible. */
static int fetch_orch_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
                                     int64_t lock_timeout_ms,
                                     const duro_history_cache *cache,
                                     int64_t now, duro_orch_item **out,
                                     const char *op, duro_error *err)
{
    *out = NULL;
    duro_arena *a = duro_arena_create();
    duro_orch_item *item =
        a != NULL ? duro_arena_alloc(a, sizeof(*item)) : NULL;
    if (item == NULL) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    item->arena = a;
    /* `now` (the caller's, read before it waited for the write lock) decides
     * what is visible: nothing that became fetchable while it waited. The
     * lock runs from this moment, so a wait never shortens it. */
    int64_t until = duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms);
    int rc = DURO_OK;
    int found = 0;
    for (int attempt = 0; rc == DURO_OK && !found && attempt < FETCH_ATTEMPTS;
         attempt++) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_READY_NEXT, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, now);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = duro__sqlite_error(c, step, op, err);
            break;
        }
        int64_t rowid = sqlite3_column_int64(s, 0);
        if (duro__sqlite_column_text(a, s, 1, &item->instance_id) != 0) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        sqlite3_reset(s);

        char token_hex[33], token[TOKEN_MAX];
        duro__random_token(token_hex);
        snprintf(token, sizeof(token), "o%lld.%s", (long long)rowid, token_hex);
        item->lock_token = duro_arena_strdup(a, token);
        if (item->lock_token == NULL) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_TAG, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_text(c, s, 1, item->instance_id);
        duro__sqlite_bind_text(c, s, 2, item->lock_token);
        duro__sqlite_bind_i64(c, s, 3, now);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            break;
        if (sqlite3_changes(c->db) == 0) {
            /* Ready but nothing visible (an expired lock over delayed
             * messages): repair its readiness and look again. */
            rc = duro__sql_settle_ready(&p->sql, (duro__sql_conn *)c, rowid,
                                        item->instance_id, 0, NULL, op, err);
            continue;
        }
        s = duro__sqlite_stmt(p, c, DURO__SQL_READY_LOCK, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, rowid);
        duro__sqlite_bind_text(c, s, 2, item->lock_token);
        duro__sqlite_bind_i64(c, s, 3, until);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            break;
        rc = load_orch_item(p, c, item, now, cache, op, err);
        found = rc == DURO_OK;
    }
    if (rc != DURO_OK || !found) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

int duro__sqlite_fetch_orchestration_item(duro_provider *base,
                                          int64_t lock_timeout_ms,
                                          const duro_history_cache *cache,
                                          duro_orch_item **out, duro_error *err)
{
    static const char op[] = "fetch_orchestration_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_orch_item *item = NULL;
    rc = fetch_orch_in_transaction(p, c, lock_timeout_ms, cache, now, &item, op,
                                   err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_orch_item_free(item);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

/* ---- orchestrator queue: ack ----------------------------------------------
 */

/* The dialect's ack_turns (sql/queue.c checked the tokens and acks): the
 * acks one by one, then up to max_next fetches, in one transaction. */
int duro__sqlite_ack_turns(duro_provider *base, size_t n,
                           const char *const *lock_tokens,
                           const duro_orch_ack *acks, int64_t lock_timeout_ms,
                           const duro_history_cache *cache, size_t max_next,
                           duro_orch_item **next, size_t *next_count,
                           const char *op, duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    int rc = DURO_OK;
    int64_t rowid;
    if (max_next > 0)
        duro__sqlite_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    size_t workers = 0, outbound = 0, got = 0;
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        int queued = 0;
        duro__sql_parse_token(lock_tokens[i], 'o', &rowid);
        rc =
            duro__sql_ack_turn(&p->sql, (duro__sql_conn *)c, rowid,
                               lock_tokens[i], &acks[i], now, &queued, op, err);
        workers += acks[i].worker_item_count;
        outbound += acks[i].orchestrator_item_count + (queued ? 1 : 0);
    }
    while (rc == DURO_OK && got < max_next) {
        duro_orch_item *item = NULL;
        rc = fetch_orch_in_transaction(p, c, lock_timeout_ms, cache, now, &item,
                                       op, err);
        if (item == NULL)
            break;
        next[got++] = item;
    }
    if (rc == DURO_OK) {
        rc = duro__sqlite_write_commit(p, c, op, err);
    } else {
        duro__sqlite_write_rollback(p, c);
    }
    if (rc != DURO_OK) {
        for (size_t i = 0; i < got; i++) {
            duro_orch_item_free(next[i]);
            next[i] = NULL;
        }
        return rc;
    }
    duro__sqlite_signal(p, DURO_QUEUE_WORKER, workers);
    duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, outbound);
    *next_count = got;
    return DURO_OK;
}

/* ---- orchestrator queue: abandon, renew, enqueue ---------------------------
 */

/* ---- worker queue ----------------------------------------------------------
 */

/* The body of fetch_work_item inside an open write transaction. */
static int fetch_work_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
                                     int64_t lock_timeout_ms, int64_t now,
                                     duro_worker_item **out, const char *op,
                                     duro_error *err)
{
    char token_hex[33];
    duro__random_token(token_hex);
    return duro__sql_claim_work(&p->sql, (duro__sql_conn *)c,
                                DURO__SQL_WQ_FETCH, token_hex, lock_timeout_ms,
                                now, out, op, err);
}

int duro__sqlite_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                                 duro_worker_item **out, duro_error *err)
{
    static const char op[] = "fetch_work_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_worker_item *w = NULL;
    rc = fetch_work_in_transaction(p, c, lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

/* One snapshot on a reader, one primary-key probe per token. */
int duro__sqlite_check_work_item_locks(duro_provider *base,
                                       const char *const *lock_tokens,
                                       size_t count, unsigned char *held,
                                       duro_error *err)
{
    static const char op[] = "check_work_item_locks";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (count == 0)
        return DURO_OK;
    if (lock_tokens == NULL || held == NULL)
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock_tokens or held is NULL");
    for (size_t i = 0; i < count; i++) {
        int rc = duro__sql_check_token(lock_tokens[i], err);
        if (rc != DURO_OK)
            return rc;
    }
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_BEGIN_READ, op, err);
    int rc = s != NULL ? duro__sqlite_run(p, c, s, op, err) : err->code;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (duro__sql_parse_token(lock_tokens[i], 'w', &id) != 0)
            continue;
        s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_HELD, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, id);
        duro__sqlite_bind_text(c, s, 2, lock_tokens[i]);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW)
            held[i] = 1;
        else if (step != SQLITE_DONE)
            rc = duro__sqlite_error(c, step, op, err);
        sqlite3_reset(s);
    }
    duro__sqlite_reader_release(p, c);
    return rc;
}

/* ack_work_item, and with `next` the fetch of the next item in the same
 * transaction (ack_and_fetch_work_item). */
/* The dialect's ack_work (sql/queue.c checked the token and completion):
 * the row's delete, the completion's enqueue and with `next` the next
 * claim, in one transaction. */
int duro__sqlite_ack_work(duro_provider *base, int64_t id,
                          const char *lock_token,
                          const duro_work_item *completion,
                          int64_t lock_timeout_ms, duro_worker_item **next,
                          const char *op, duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    int rc;
    if (next != NULL)
        duro__sqlite_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    int skip = 0;
    rc = duro__sql_delete_acked_work(&p->sql, (duro__sql_conn *)c, id,
                                     lock_token, completion, now, &skip, op,
                                     err);
    duro_worker_item *w = NULL;
    if (rc == DURO_OK && next != NULL)
        rc = fetch_work_in_transaction(p, c, lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        return rc;
    }
    if (completion != NULL && !skip)
        duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}
