/* pg_queue.c - the orchestrator queue of the PostgreSQL provider: its
 * claim and the dialect's ack_turns (one ack at once, or many with the
 * set-based statements of pg_batch.c, then one claim or many; a fetch is
 * an ack of no turns). Instance locks live in orchestrator_ready; the rest
 * is sql/queue.c's. Every write is one BEGIN ... COMMIT transaction on
 * one pooled connection, rolled back whole on any failure; fetches claim
 * rows with FOR UPDATE SKIP LOCKED, so concurrent fetchers (threads or
 * processes) never take the same row. Any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* What a fetch claims with: `claim` (READY_CLAIM; READY_CLAIM_ASYNC when
 * the transaction writes nothing else that must be durable) and its
 * token's random part (each locked row's token ends with it). */
typedef struct claim_with {
    duro__pg_stmt_id claim;
    const char *hex;
} claim_with;

/* duro__sql_fetch_turn's claim: one statement claims the next instance
 * and returns its messages with its metadata; then its history. */
static int claim_turn(duro__sql_store *st, duro__sql_conn *sc, void *arg,
                      duro_orch_item *item, int64_t now, int64_t until,
                      const duro_history_cache *cache, int *got, int *repair,
                      int64_t *ready_id, const char *op, duro_error *err)
{
    const claim_with *with = arg;
    duro__pg_provider *p = (duro__pg_provider *)st;
    duro__pg_conn *c = (duro__pg_conn *)sc;
    duro_arena *a = item->arena;
    duro__pg_statement *s = duro__pg_stmt(p, c, with->claim, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_claim(c, s, with->hex, now, until);
    int step = duro__pg_step(p, c, s);
    if (step != DURO__PG_ROW)
        return duro__pg_error(c, step, op, err);
    if (duro__pg_claimed_nothing(p, s))
        return DURO_OK;
    int64_t ready = duro__pg_column_int64(s, 18);
    if (duro__pg_column_text(a, s, 19, &item->instance_id) != 0 ||
        duro__pg_column_text(a, s, 20, &item->lock_token) != 0)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (duro__pg_column_null(s, 0)) {
        duro__pg_reset(s); /* ready, but nothing visible */
        *repair = 1;
        *ready_id = ready;
        return DURO_OK;
    }
    if (duro__pg_read_claimed_meta(item, s) != 0)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    int rc = duro__pg_read_claimed_messages(p, c, s, item, op, err);
    if (rc == DURO_OK)
        rc = duro__pg_load_claimed_history(p, c, item, cache, op, err);
    *got = rc == DURO_OK;
    return rc;
}

static int fetch_orch_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     duro__pg_stmt_id claim, const char *hex,
                                     int64_t lock_timeout_ms,
                                     const duro_history_cache *cache,
                                     int64_t now, duro_orch_item **out,
                                     const char *op, duro_error *err)
{
    claim_with with = {.claim = claim, .hex = hex};
    return duro__sql_fetch_turn(&p->sql, (duro__sql_conn *)c, claim_turn, &with,
                                lock_timeout_ms, cache, now, out, op, err);
}

/* ---- orchestrator queue: ack ----------------------------------------------
 */

/* The dialect's ack_turns (sql/queue.c checked the tokens and acks): one
 * ack at once, or many with the set-based statements of pg_batch.c, then
 * one claim, or many in one statement; a claim whose commit's outcome is
 * unknown is kept for release. */
int duro__pg_ack_turns(duro_provider *base, const duro__sql_turns *t,
                       duro_error *err)
{
    duro__pg_provider *p = duro__pg_of(base);
    size_t n = t->n, max_next = t->max_next;
    const char *const *lock_tokens = t->lock_tokens;
    const duro_orch_ack *acks = t->acks;
    duro_orch_item **next = t->next;
    const char *op = t->op;
    int rc = DURO_OK;
    int64_t ready_id;
    duro__pg_release_kept(p);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin_generic(p, op, &c, err)) != DURO_OK)
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
            hex, t->lock_timeout_ms, t->cache, now, &next[0], op, err);
        got = rc == DURO_OK && next[0] != NULL ? 1 : 0;
    } else if (rc == DURO_OK && max_next > 1) {
        rc = duro__pg_fetch_many_in_transaction(
            p, c,
            n == 0 ? DURO__SQL_READY_CLAIM_MANY_ASYNC
                   : DURO__SQL_READY_CLAIM_MANY,
            hex, t->lock_timeout_ms, t->cache, now, max_next, next, &got, op,
            err);
    }
    rc = duro__sql_finish_turns(&p->sql, (duro__sql_conn *)c, rc,
                                max_next > 0 ? hex : NULL, next, got, workers,
                                outbound, op, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_signal_cancels(p, cancels);
    *t->next_count = got;
    return DURO_OK;
}

/* ---- orchestrator queue: abandon, renew, enqueue ---------------------------
 */
