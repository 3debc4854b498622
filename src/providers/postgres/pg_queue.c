/* pg_queue.c - the orchestrator queue of the PostgreSQL provider: fetch
 * and ack (one turn, or many with the set-based statements of pg_batch.c;
 * instance locks live in orchestrator_ready; enqueue, renew and abandon
 * are sql/queue.c's). Every write is one BEGIN ... COMMIT transaction on
 * one pooled connection, rolled back whole on any failure; fetches claim
 * rows with FOR UPDATE SKIP LOCKED, so concurrent fetchers (threads or
 * processes) never take the same row. Any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

#define FETCH_ATTEMPTS 64 /* readiness repairs per fetch before giving up */

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* The body of fetch_orchestration_item inside an open write transaction:
 * one `claim` (READY_CLAIM; READY_CLAIM_ASYNC when the transaction writes
 * nothing else that must be durable) with token hex `hex` (each locked
 * row's token ends with it), then the item's metadata and history. *out is
 * the locked item, or NULL when nothing is visible. */
static int fetch_orch_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     duro__pg_stmt_id claim, const char *hex,
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
    /* `now` (the caller's, read before it waited for a connection) decides
     * what is visible: nothing that became fetchable while it waited. The
     * lock runs from this moment, so a wait never shortens it. */
    int64_t until = duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms);
    int rc = DURO_OK;
    int found = 0;
    for (int attempt = 0; rc == DURO_OK && !found && attempt < FETCH_ATTEMPTS;
         attempt++) {
        duro__pg_statement *s = duro__pg_stmt(p, c, claim, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__pg_bind_claim(c, s, hex, now, until);
        int step = duro__pg_step(p, c, s);
        if (step != DURO__PG_ROW) {
            rc = duro__pg_error(c, step, op, err);
            break;
        }
        if (duro__pg_claimed_nothing(p, s))
            break;
        int64_t ready_id = duro__pg_column_int64(s, 18);
        if (duro__pg_column_text(a, s, 19, &item->instance_id) != 0 ||
            duro__pg_column_text(a, s, 20, &item->lock_token) != 0) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        if (duro__pg_column_null(s, 0)) {
            /* Ready but nothing visible (an expired lock over delayed
             * messages): repair its readiness and look again. */
            duro__pg_reset(s);
            rc = duro__sql_settle_ready(&p->sql, (duro__sql_conn *)c, ready_id,
                                        item->instance_id, 0, NULL, op, err);
            continue;
        }
        if (duro__pg_read_claimed_meta(item, s) != 0) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        rc = duro__pg_read_claimed_messages(p, c, s, item, op, err);
        if (rc == DURO_OK)
            rc = duro__pg_load_claimed_history(p, c, item, cache, op, err);
        found = rc == DURO_OK;
    }
    if (rc != DURO_OK || !found) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

int duro__pg_fetch_orchestration_item(duro_provider *base,
                                      int64_t lock_timeout_ms,
                                      const duro_history_cache *cache,
                                      duro_orch_item **out, duro_error *err)
{
    static const char op[] = "fetch_orchestration_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__pg_provider *p = duro__pg_of(base);
    duro__pg_release_kept(p);
    duro__pg_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    int rc = duro__pg_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_orch_item *item = NULL;
    char hex[33];
    duro__random_token(hex);
    /* Its writes are the claim and readiness repairs, which a later fetch
     * redoes: its commit need not wait for the WAL flush. */
    rc = fetch_orch_in_transaction(p, c, DURO__SQL_READY_CLAIM_ASYNC, hex,
                                   lock_timeout_ms, cache, now, &item, op, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK) {
        duro_orch_item_free(item);
        duro__pg_keep_unknown_claim(p, 'O', hex, rc, err);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

/* ---- orchestrator queue: ack ----------------------------------------------
 */

/* The dialect's ack_turns (sql/queue.c checked the tokens and acks): one
 * ack at once, or many with the set-based statements of pg_batch.c, then
 * one claim, or many in one statement; a claim whose commit's outcome is
 * unknown is kept for release. */
int duro__pg_ack_turns(duro_provider *base, size_t n,
                       const char *const *lock_tokens,
                       const duro_orch_ack *acks, int64_t lock_timeout_ms,
                       const duro_history_cache *cache, size_t max_next,
                       duro_orch_item **next, size_t *next_count,
                       const char *op, duro_error *err)
{
    duro__pg_provider *p = duro__pg_of(base);
    int rc = DURO_OK;
    int64_t ready_id;
    duro__pg_release_kept(p);
    if (max_next > 0)
        duro__pg_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    char hex[33];
    duro__random_token(hex);
    size_t workers = 0, outbound = 0, cancels = 0, got = 0;
    for (size_t i = 0; i < n; i++) {
        workers += acks[i].worker_item_count;
        outbound += acks[i].orchestrator_item_count;
        cancels += acks[i].cancelled_activity_count;
    }
    if (n == 1) {
        int queued = 0;
        duro__sql_parse_token(lock_tokens[0], 'o', &ready_id);
        rc =
            duro__sql_ack_turn(&p->sql, (duro__sql_conn *)c, ready_id,
                               lock_tokens[0], &acks[0], now, &queued, op, err);
        outbound += queued ? 1 : 0;
    } else if (n > 1) {
        size_t queued = 0;
        rc = duro__pg_ack_many_in_transaction(p, c, n, lock_tokens, acks, now,
                                              &queued, op, err);
        outbound += queued;
    }
    /* Claims alone (no ack) need not wait for the WAL flush. */
    if (rc == DURO_OK && max_next == 1) {
        rc = fetch_orch_in_transaction(
            p, c, n == 0 ? DURO__SQL_READY_CLAIM_ASYNC : DURO__SQL_READY_CLAIM,
            hex, lock_timeout_ms, cache, now, &next[0], op, err);
        got = rc == DURO_OK && next[0] != NULL ? 1 : 0;
    } else if (rc == DURO_OK && max_next > 1) {
        rc = duro__pg_fetch_many_in_transaction(
            p, c,
            n == 0 ? DURO__SQL_READY_CLAIM_MANY_ASYNC
                   : DURO__SQL_READY_CLAIM_MANY,
            hex, lock_timeout_ms, cache, now, max_next, next, &got, op, err);
    }
    if (rc == DURO_OK) {
        rc = duro__pg_write_commit(p, c, op, err);
        if (rc != DURO_OK && max_next > 0)
            duro__pg_keep_unknown_claim(p, 'O', hex, rc, err);
    } else {
        duro__pg_write_rollback(p, c);
    }
    if (rc != DURO_OK) {
        for (size_t i = 0; i < got; i++) {
            duro_orch_item_free(next[i]);
            next[i] = NULL;
        }
        return rc;
    }
    duro__pg_signal(p, DURO_QUEUE_WORKER, workers);
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, outbound);
    duro__pg_signal_cancels(p, cancels);
    *next_count = got;
    return DURO_OK;
}

/* ---- orchestrator queue: abandon, renew, enqueue ---------------------------
 */
