/* pg_work.c - the worker queue of the PostgreSQL provider: fetch, check
 * and the ack of activity work items (a completion that only queues a
 * message is acked by pg_combine.c; renew and abandon are sql/queue.c's).
 * Every write is one transaction; a claim alone is its own. Any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- worker queue ----------------------------------------------------------
 */

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
    int rc = duro__sql_claim_work(&p->sql, (duro__sql_conn *)c,
                                  DURO__SQL_WQ_FETCH_ASYNC, hex,
                                  lock_timeout_ms, now, &w, op, err);
    duro__pg_reader_release(p, c);
    if (rc == DURO_OK)
        *out = w;
    else
        duro__pg_keep_unknown_claim(p, 'W', hex, rc, err);
    return rc;
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
        int rc = duro__sql_check_token(lock_tokens[i], err);
        if (rc != DURO_OK)
            return rc;
    }
    duro__pg_provider *p = duro__pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    int rc = DURO_OK;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (duro__sql_parse_token(lock_tokens[i], 'w', &id) != 0)
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

/* The dialect's ack_work (sql/queue.c checked the token and completion):
 * a completion that only queues a message in one statement (pg_combine.c),
 * any other in one transaction with the next claim. */
int duro__pg_ack_work(duro_provider *base, int64_t id, const char *lock_token,
                      const duro_work_item *completion, int64_t lock_timeout_ms,
                      duro_worker_item **next, const char *op, duro_error *err)
{
    duro__pg_provider *p = duro__pg_of(base);
    int rc;
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
    int skip = 0;
    rc = duro__sql_delete_acked_work(&p->sql, (duro__sql_conn *)c, id,
                                     lock_token, completion, now, &skip, op,
                                     err);
    duro_worker_item *w = NULL;
    char hex[33];
    duro__random_token(hex);
    if (rc == DURO_OK && next != NULL)
        rc = duro__sql_claim_work(&p->sql, (duro__sql_conn *)c,
                                  DURO__SQL_WQ_FETCH, hex, lock_timeout_ms, now,
                                  &w, op, err);
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
