/* pg_locks.c - the locks of both queues: lock tokens, the instance held by
 * a token, an instance's readiness when its lock goes, and the lock
 * updates (abandon and renew an instance lock; renew or abandon a work
 * item's). Each update is one write transaction of its own. Any thread. */
#include <stdint.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- lock tokens -------------------------------------------------------
 * "o<ready id>.<32 hex>" for an instance lock, "w<worker row id>.<32
 * hex>" for a work item: the row is found by primary key, the random part
 * makes the token unguessable and distinct per fetch. */

int duro__pg_check_token(const char *token, duro_error *err)
{
    if (token == NULL || token[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock token is NULL or empty");
    return DURO_OK;
}

/* The row id of a token this provider issued with `prefix`; -1 otherwise. */
int duro__pg_parse_token(const char *token, char prefix, int64_t *id)
{
    if (token[0] != prefix)
        return -1;
    const char *s = token + 1;
    uint64_t n = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 19) {
        n = n * 10 + (uint64_t)(*s - '0');
        s++;
        digits++;
    }
    if (digits == 0 || *s != '.' || n > INT64_MAX)
        return -1;
    s++;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    if (s[32] != '\0')
        return -1;
    *id = (int64_t)n;
    return 0;
}

int duro__pg_lock_lost(const char *op, const char *why, duro_error *err)
{
    return duro_error_set(err, DURO_LOCK_LOST, 0, "postgres %s: lock lost: %s",
                          op, why);
}

/* Finds the instance held by an orchestration lock token (unexpired),
 * row-locking its ready row until the transaction ends, and fills *h. */
int duro__pg_lock_and_current(duro__pg_provider *p, duro__pg_conn *c,
                              int64_t ready_id, const char *token, int64_t now,
                              duro__pg_lock_holder *h, const char *op,
                              duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_READY_HOLDER_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_i64(c, s, 1, ready_id);
    duro__pg_bind_text(c, s, 2, token);
    int rc = duro__pg_step(p, c, s);
    if (rc == DURO__PG_DONE)
        return duro__pg_lock_lost(
            op,
            "the token does not hold an instance lock (released, "
            "expired and taken by another fetch, or the instance "
            "was deleted)",
            err);
    if (rc != DURO__PG_ROW)
        return duro__pg_error(c, rc, op, err);
    int64_t until = duro__pg_column_int64(s, 1);
    const char *id = (const char *)duro__pg_column_text_raw(s, 0);
    size_t n = (size_t)duro__pg_column_bytes(s, 0);
    if (id == NULL || n > DURO__PG_NAME_MAX)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "postgres %s: corrupt lock row", op);
    memcpy(h->instance_id, id, n + 1);
    h->current = (uint64_t)duro__pg_column_int64(s, 2);
    h->exists = duro__pg_column_int(s, 3);
    h->has_events = duro__pg_column_int(s, 4);
    h->events = (uint64_t)duro__pg_column_int64(s, 5);
    duro__pg_reset(s);
    if (until <= now)
        return duro__pg_lock_lost(op, "the instance lock expired", err);
    return DURO_OK;
}

/* Sets the readiness of an instance whose lock is being released from its
 * remaining messages: ready at the earliest (but not before `hold`, an
 * abandon delay; 0 for none), or no row when nothing is queued. *queued
 * (may be NULL) says whether messages remain. */
int duro__pg_settle_ready(duro__pg_provider *p, duro__pg_conn *c,
                          int64_t ready_id, const char *instance_id,
                          int64_t hold, int *queued, const char *op,
                          duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_OQ_MIN_VISIBLE, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    int rc = duro__pg_step(p, c, s);
    if (rc != DURO__PG_ROW)
        return duro__pg_error(c, rc, op, err);
    int any = !duro__pg_column_null(s, 0);
    int64_t earliest = duro__pg_column_int64(s, 0);
    duro__pg_reset(s);
    if (queued != NULL)
        *queued = any;
    if (!any) {
        s = duro__pg_stmt(p, c, DURO__SQL_READY_DELETE, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_i64(c, s, 1, ready_id);
        return duro__pg_run(p, c, s, op, err);
    }
    s = duro__pg_stmt(p, c, DURO__SQL_READY_SET, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_i64(c, s, 1, ready_id);
    if (hold > 0)
        duro__pg_bind_i64(c, s, 2, hold);
    else
        duro__pg_bind_text(c, s, 2, NULL);
    duro__pg_bind_i64(c, s, 3, DURO__MAX(earliest, hold));
    return duro__pg_run(p, c, s, op, err);
}

/* abandon_orchestration_item of a token this provider issued (ready row
 * ready_id): its messages untagged, its lock released, the instance ready
 * after delay_ms. */
int duro__pg_abandon_orch(duro__pg_provider *p, int64_t ready_id,
                          const char *lock_token, int64_t delay_ms,
                          const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    int rc = duro__pg_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_lock_holder h;
    rc =
        duro__pg_lock_and_current(p, c, ready_id, lock_token, now, &h, op, err);
    const char *instance_id = h.instance_id;
    if (rc == DURO_OK) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_OQ_UNTAG, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__pg_bind_text(c, s, 1, instance_id);
            duro__pg_bind_text(c, s, 2, lock_token);
            rc = duro__pg_run(p, c, s, op, err);
        }
    }
    if (rc == DURO_OK)
        rc = duro__pg_settle_ready(
            p, c, ready_id, instance_id,
            delay_ms > 0 ? duro__pg_after_ms(now, delay_ms) : 0, NULL, op, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* Updates a lock row its token still holds, unexpired, with `update`
 * (READY_RENEW: $1 row, $2 token, $3 now + ms, $4 now); fails
 * DURO_LOCK_LOST when no row matched. */
int duro__pg_renew_lock(duro__pg_provider *p, duro__pg_stmt_id update,
                        int64_t ready_id, const char *token, int64_t ms,
                        const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    int rc = duro__pg_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_statement *s = duro__pg_stmt(p, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 1, ready_id);
        duro__pg_bind_text(c, s, 2, token);
        duro__pg_bind_i64(c, s, 3, duro__pg_after_ms(now, ms));
        duro__pg_bind_i64(c, s, 4, now);
        rc = duro__pg_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && duro__pg_changes(c) == 0)
        rc = duro__pg_lock_lost(
            op,
            "the row is gone (acked, cancelled or deleted), the "
            "token differs or the lock expired",
            err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    return duro__pg_write_commit(p, c, op, err);
}

/* Updates the worker row the token still holds (expired or not: only
 * another fetch, which replaces the token, ends a work item's lock) with
 * `update` (WQ_RENEW with `renewal`, or WQ_ABANDON: $1 row, $2 token, $3
 * now + ms). When no row matched, a probe by primary key tells a row that
 * is gone (DURO_NOT_FOUND for a renewal, else DURO_LOCK_LOST) from one that
 * another fetch took or that was released (DURO_LOCK_LOST). Row ids come
 * from an identity column and are never reused. */
int duro__pg_update_work_row(duro__pg_provider *p, duro__pg_stmt_id update,
                             int64_t id, const char *token, int64_t ms,
                             int renewal, const char *op, duro_error *err)
{
    duro__pg_conn *c;
    /* A renewal extends from when it runs, not from when it asked. */
    int rc = duro__pg_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__pg_statement *s = duro__pg_stmt(p, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 1, id);
        duro__pg_bind_text(c, s, 2, token);
        duro__pg_bind_i64(c, s, 3, duro__pg_after_ms(now, ms));
        rc = duro__pg_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && duro__pg_changes(c) == 0) {
        s = duro__pg_stmt(p, c, DURO__SQL_WQ_EXISTS, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        int step = DURO__PG_DONE;
        if (rc == DURO_OK) {
            duro__pg_bind_i64(c, s, 1, id);
            step = duro__pg_step(p, c, s);
            if (step != DURO__PG_ROW && step != DURO__PG_DONE)
                rc = duro__pg_error(c, step, op, err);
        }
        if (rc == DURO_OK && step == DURO__PG_DONE && renewal)
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "postgres %s: the work item is gone (cancelled "
                                "by a turn, acked, or its instance deleted)",
                                op);
        else if (rc == DURO_OK && step == DURO__PG_DONE)
            rc = duro__pg_lock_lost(
                op,
                "the work item is gone (cancelled by a turn, "
                "acked, or its instance deleted)",
                err);
        else if (rc == DURO_OK)
            rc = duro__pg_lock_lost(
                op,
                "another fetch took the work item after the lock "
                "expired, or it was released",
                err);
    }
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    return duro__pg_write_commit(p, c, op, err);
}
