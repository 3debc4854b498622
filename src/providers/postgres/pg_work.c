/* pg_work.c - the worker queue of the PostgreSQL provider: the dialect's
 * fetch_work (the claim alone, its own transaction) and ack_work (a
 * completion that only queues a message is acked by pg_combine.c; the rest
 * of the worker queue is sql/queue.c's). Any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- worker queue ----------------------------------------------------------
 */

/* The dialect's fetch_work. */
int duro__pg_fetch_work(duro_provider *base, int64_t lock_timeout_ms,
                        duro_worker_item **out, const char *op, duro_error *err)
{
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

/* The dialect's ack_work (sql/queue.c checked the token and completion):
 * a completion that only queues a message in one statement (pg_combine.c),
 * any other in one transaction with the next claim. */
int duro__pg_ack_work(duro_provider *base, int64_t id, const char *lock_token,
                      const duro_work_item *completion, int64_t lock_timeout_ms,
                      duro_worker_item **next, const char *op, duro_error *err)
{
    duro__pg_provider *p = duro__pg_of(base);
    duro__pg_release_kept(p);
    if (next != NULL)
        duro__pg_note_fetch(p, DURO_QUEUE_WORKER);
    if (completion != NULL && completion->kind != DURO_WORK_START &&
        completion->kind != DURO_WORK_CANCEL_INSTANCE)
        return duro__pg_ack_work_at_once(p, id, lock_token, completion,
                                         lock_timeout_ms, next, op, err);
    return duro__sql_ack_work_in_transaction(
        &p->sql, id, lock_token, completion, lock_timeout_ms, next, op, err);
}
