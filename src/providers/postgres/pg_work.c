/* pg_work.c - the worker queue of the PostgreSQL provider: fetch, renew,
 * check, ack and abandon of activity work items (a completion that only
 * queues a message is acked by pg_combine.c). Every write is one
 * transaction; a claim alone is its own. Any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- worker queue ----------------------------------------------------------
 */

/* The body of fetch_work_item inside an open write transaction; `claim`
 * is WQ_FETCH, or WQ_FETCH_ASYNC when the claim is its own transaction;
 * token_hex its token's random part (duro__random_token). */
static int fetch_work_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     duro__pg_stmt_id claim,
                                     const char *token_hex,
                                     int64_t lock_timeout_ms, int64_t now,
                                     duro_worker_item **out, const char *op,
                                     duro_error *err)
{
    *out = NULL;
    duro_arena *a = NULL;
    duro_worker_item *w = NULL;
    duro__pg_statement *s = duro__pg_stmt(p, c, claim, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, token_hex);
        /* visible by the caller's `now` (read before it waited for the
         * write lock), locked from this moment: a wait never shortens the
         * lock (a lock born expired was taken by the next fetch) */
        duro__pg_bind_i64(c, s, 2,
                          duro__pg_after_ms(duro__wall_ms(), lock_timeout_ms));
        duro__pg_bind_i64(c, s, 3, now);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_ROW && duro__pg_column_null(s, 8)) {
            duro__pg_note_due(p, DURO_QUEUE_WORKER,
                              duro__pg_column_null(s, 9)
                                  ? INT64_MAX
                                  : duro__pg_column_int64(s, 9));
            step = duro__pg_step(p, c, s);
        } else if (step == DURO__PG_ROW) {
            a = duro_arena_create();
            w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
            if (w == NULL ||
                (w->arena = a, duro__pg_read_work_row(a, s, w) != 0))
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            else
                step = duro__pg_step(p, c, s);
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

int duro__pg_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                             duro_worker_item **out, duro_error *err)
{
    static const char op[] = "fetch_work_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__pg_provider *p = duro__pg_of(base);
    duro__pg_release_kept(p);
    duro__pg_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    /* The claim is one statement: run alone, it is its own transaction
     * (one round trip instead of BEGIN, claim, COMMIT; most fetches of an
     * idle worker find nothing). */
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro_worker_item *w = NULL;
    char hex[33];
    duro__random_token(hex);
    int rc = fetch_work_in_transaction(p, c, DURO__SQL_WQ_FETCH_ASYNC, hex,
                                       lock_timeout_ms, now, &w, op, err);
    duro__pg_reader_release(p, c);
    if (rc == DURO_OK)
        *out = w;
    else
        duro__pg_keep_unknown_claim(p, 'W', hex, rc, err);
    return rc;
}

int duro__pg_renew_work_item_lock(duro_provider *base, const char *lock_token,
                                  int64_t extend_ms, duro_error *err)
{
    static const char op[] = "renew_work_item_lock";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    int64_t id;
    int rc = duro__pg_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__pg_parse_token(lock_token, 'w', &id) != 0)
        return duro__pg_lock_lost(
            op, "not a work item lock token of this store", err);
    return duro__pg_update_work_row(duro__pg_of(base), DURO__SQL_WQ_RENEW, id,
                                    lock_token, extend_ms, 1, op, err);
}

/* One primary-key probe per token on a pooled connection; no write. */
int duro__pg_check_work_item_locks(duro_provider *base,
                                   const char *const *lock_tokens, size_t count,
                                   unsigned char *held, duro_error *err)
{
    static const char op[] = "check_work_item_locks";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (count == 0)
        return DURO_OK;
    if (lock_tokens == NULL || held == NULL)
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock_tokens or held is NULL");
    for (size_t i = 0; i < count; i++) {
        int rc = duro__pg_check_token(lock_tokens[i], err);
        if (rc != DURO_OK)
            return rc;
    }
    duro__pg_provider *p = duro__pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    int rc = DURO_OK;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (duro__pg_parse_token(lock_tokens[i], 'w', &id) != 0)
            continue;
        duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_WQ_HELD, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__pg_bind_i64(c, s, 1, id);
        duro__pg_bind_text(c, s, 2, lock_tokens[i]);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_ROW)
            held[i] = 1;
        else if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    return rc;
}

static int ack_work(duro_provider *base, const char *lock_token,
                    const duro_work_item *completion, int64_t lock_timeout_ms,
                    duro_worker_item **next, const char *op, duro_error *err)
{
    duro__pg_provider *p = duro__pg_of(base);
    int64_t id;
    if (next != NULL)
        *next = NULL;
    int rc = duro__pg_check_token(lock_token, err);
    if (rc == DURO_OK && completion != NULL)
        rc = duro__pg_check_work_item(p, completion, 0, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__pg_parse_token(lock_token, 'w', &id) != 0)
        return duro__pg_lock_lost(
            op, "not a work item lock token of this store", err);
    duro__pg_release_kept(p);
    if (next != NULL)
        duro__pg_note_fetch(p, DURO_QUEUE_WORKER);
    if (completion != NULL && completion->kind != DURO_WORK_START &&
        completion->kind != DURO_WORK_CANCEL_INSTANCE)
        return duro__pg_ack_work_at_once(p, id, lock_token, completion,
                                         lock_timeout_ms, next, op, err);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_WQ_ACK, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 1, id);
        duro__pg_bind_text(c, s, 2, lock_token);
        rc = duro__pg_run(p, c, s, op, err);
    }
    /* No row deleted: the activity was cancelled (row deleted by a turn) or
     * its expired lock was taken by another fetch. Enqueue nothing. */
    if (rc == DURO_OK && duro__pg_changes(c) == 0)
        rc = duro__pg_lock_lost(
            op,
            "the work item is gone (cancelled or acked) or its "
            "lock was taken by another fetch",
            err);
    int skip = 0;
    if (rc == DURO_OK && completion != NULL)
        rc = duro__pg_enqueue_in_transaction(p, c, completion, now, now, &skip,
                                             op, err);
    duro_worker_item *w = NULL;
    char hex[33];
    duro__random_token(hex);
    if (rc == DURO_OK && next != NULL)
        rc = fetch_work_in_transaction(p, c, DURO__SQL_WQ_FETCH, hex,
                                       lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        if (next != NULL)
            duro__pg_keep_unknown_claim(p, 'W', hex, rc, err);
        return rc;
    }
    if (completion != NULL && !skip)
        duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

int duro__pg_ack_work_item(duro_provider *base, const char *lock_token,
                           const duro_work_item *completion, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    return ack_work(base, lock_token, completion, 0, NULL, "ack_work_item",
                    err);
}

int duro__pg_ack_and_fetch_work_item(duro_provider *base,
                                     const char *lock_token,
                                     const duro_work_item *completion,
                                     int64_t lock_timeout_ms,
                                     duro_worker_item **next, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    return ack_work(base, lock_token, completion, lock_timeout_ms, next,
                    "ack_and_fetch_work_item", err);
}

int duro__pg_abandon_work_item(duro_provider *base, const char *lock_token,
                               int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_work_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    duro__pg_provider *p = duro__pg_of(base);
    int64_t id;
    int rc = duro__pg_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__pg_parse_token(lock_token, 'w', &id) != 0)
        return duro__pg_lock_lost(
            op, "not a work item lock token of this store", err);
    rc = duro__pg_update_work_row(p, DURO__SQL_WQ_ABANDON, id, lock_token,
                                  delay_ms, 0, op, err);
    if (rc == DURO_OK)
        duro__pg_signal(p, DURO_QUEUE_WORKER, 1);
    /* the caller lets the token go either way: abandoned again later */
    if (rc != DURO_OK && err->retryable)
        duro__pg_keep_release(p, 'w', lock_token, delay_ms);
    return rc;
}
