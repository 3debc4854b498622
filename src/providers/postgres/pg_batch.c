/* pg_batch.c - the set-based part of ack_and_fetch_orchestration_items:
 * the acks of many turns with their locks, events, work items and
 * releases in one statement each, and the claim of many instances in one
 * statement with their histories in another. Inside the caller's write
 * transaction; any thread. */
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* The locks of n tokens (ready ids ids[]), row-locked as
 * duro__sql_hold_lock does, into h[]: DURO_LOCK_LOST when any is not held
 * or expired. */
static int lock_many(duro__pg_provider *p, duro__pg_conn *c, size_t n,
                     const int64_t *ids, const char *const *tokens, int64_t now,
                     duro__sql_lock_holder *h, const char *op, duro_error *err)
{
    /* a lock given twice: the first ack would release what the second
     * needs (the statement would return its row twice) */
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (ids[i] == ids[j])
                return duro__sql_lock_lost(
                    &p->sql, op, "the same instance lock twice in one call",
                    err);
    duro__strbuf col[2];
    memset(col, 0, sizeof(col));
    duro__pg_cols_open(col, 2);
    for (size_t i = 0; i < n; i++) {
        duro__pg_col_num(&col[0], ids[i]);
        duro__pg_col_text(&col[1], tokens[i]);
    }
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (duro__pg_cols_close(col, 2))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_READY_HOLDER_MANY, op, err)) ==
             NULL)
        rc = err->code;
    size_t held = 0;
    if (rc == DURO_OK) {
        int step = duro__pg_run_cols(p, c, s, col, 2);
        for (; step == DURO__PG_ROW; step = duro__pg_step(p, c, s)) {
            int64_t ord = duro__pg_column_int64(s, 0);
            const char *id = (const char *)duro__pg_column_text_raw(s, 1);
            size_t len = (size_t)duro__pg_column_bytes(s, 1);
            if (ord < 1 || (size_t)ord > n || id == NULL ||
                len > DURO__PG_NAME_MAX || h[ord - 1].instance_id[0] != '\0') {
                rc = duro_error_set(err, DURO_STORAGE, 0,
                                    "postgres %s: corrupt lock row", op);
                break;
            }
            duro__sql_lock_holder *x = &h[ord - 1];
            memcpy(x->instance_id, id, len + 1);
            x->current = (uint64_t)duro__pg_column_int64(s, 3);
            x->exists = duro__pg_column_int(s, 4);
            x->has_events = duro__pg_column_int(s, 5);
            x->events = (uint64_t)duro__pg_column_int64(s, 6);
            if (duro__pg_column_int64(s, 2) <= now)
                x->instance_id[0] = '\0'; /* expired: not held */
            else
                held++;
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    duro__pg_cols_free(col, 2);
    if (rc == DURO_OK && held < n)
        rc = duro__sql_lock_lost(
            &p->sql, op,
            "a token does not hold an instance lock (released, "
            "expired and taken by another fetch, the instance "
            "deleted, or the token given twice)",
            err);
    return rc;
}

/* The acks of n >= 2 turns in the open transaction: their locks in one
 * statement, their events and work items in one each, the rest of each
 * ack on its own (rare: cancellations, outbound messages, metadata), and
 * the release of all locks in one. *queued: instances that still have
 * messages. The same writes, in an order with the same outcome, as n
 * duro__sql_ack_turn calls: each instance's events and work items
 * before its cancellations (an activity scheduled and cancelled in one turn),
 * every release last. */
int duro__pg_ack_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     size_t n, const char *const *tokens,
                                     const duro_orch_ack *acks, int64_t now,
                                     size_t *queued, const char *op,
                                     duro_error *err)
{
    *queued = 0;
    int64_t *ids = duro__calloc(n, sizeof(*ids));
    duro__sql_lock_holder *h = duro__calloc(n, sizeof(*h));
    duro__pg_batch_cols b;
    duro__pg_batch_open(&b);
    int rc = DURO_OK;
    if (ids == NULL || h == NULL) {
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        duro__sql_parse_token(tokens[i], 'o', &ids[i]);
    if ((rc = lock_many(p, c, n, ids, tokens, now, h, op, err)) != DURO_OK)
        goto done;
    if (p->turn_ack_locked != NULL)
        p->turn_ack_locked(p->turn_ack_locked_arg); /* a test's hook */
    for (size_t i = 0; i < n && rc == DURO_OK; i++)
        rc = duro__pg_ack_first_writes(p, c, &h[i], &acks[i], &b, op, err);
    if (rc == DURO_OK)
        rc = duro__pg_flush_batch_rows(p, c, &b, now, op, err);
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        rc = duro__pg_ack_other_writes(p, c, &h[i], &acks[i], now, &b, op, err);
        duro__pg_col_text(&b.st[0], h[i].instance_id);
        duro__pg_col_text(&b.st[1], tokens[i]);
        duro__pg_col_num(&b.st[2], ids[i]);
    }
    if (rc == DURO_OK)
        rc = duro__pg_flush_batch_metas(p, c, &b, now, op, err);
    if (rc == DURO_OK &&
        duro__pg_cols_close(b.st, DURO__PG_BATCH_SETTLE_COLUMNS))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_READY_ACK_SETTLE_MANY, op, err);
        if (s == NULL) {
            rc = err->code;
        } else {
            int step =
                duro__pg_run_cols(p, c, s, b.st, DURO__PG_BATCH_SETTLE_COLUMNS);
            if (step == DURO__PG_ROW)
                *queued = (size_t)duro__pg_column_int64(s, 0);
            else
                rc = duro__pg_error(c, step, op, err);
            duro__pg_reset(s);
        }
    }
done:
    duro__pg_batch_free(&b);
    duro__free(ids);
    duro__free(h);
    return rc;
}

/* The history tails of n claimed items that the caller's cache lacks, in
 * one statement (one item: HISTORY_READ). */
static int load_claimed_histories(duro__pg_provider *p, duro__pg_conn *c,
                                  duro_orch_item **items, size_t n,
                                  const duro_history_cache *cache,
                                  const char *op, duro_error *err)
{
    size_t need = 0, last = 0;
    for (size_t i = 0; i < n; i++) {
        duro_orch_item *it = items[i];
        it->history_offset = duro__history_offset(
            cache, it->instance_id, it->execution_id, it->history_total);
        if (it->history_total != it->history_offset) {
            need++;
            last = i;
        }
    }
    if (need == 0)
        return DURO_OK;
    if (need == 1)
        return duro__sql_read_events(
            &p->sql, (duro__sql_conn *)c, items[last]->arena,
            items[last]->instance_id, items[last]->execution_id,
            items[last]->history_offset, &items[last]->history,
            &items[last]->history_count, op, err);
    duro__strbuf col[3];
    memset(col, 0, sizeof(col));
    duro__pg_cols_open(col, 3);
    size_t *place = duro__calloc(need, sizeof(*place)); /* ord -> item */
    size_t *cap = duro__calloc(n, sizeof(*cap));
    size_t k = 0;
    for (size_t i = 0; place != NULL && i < n; i++) {
        duro_orch_item *it = items[i];
        if (it->history_total == it->history_offset)
            continue;
        place[k++] = i;
        duro__pg_col_text(&col[0], it->instance_id);
        duro__pg_col_num(&col[1], (int64_t)it->execution_id);
        duro__pg_col_num(&col[2], (int64_t)it->history_offset);
    }
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (place == NULL || cap == NULL || duro__pg_cols_close(col, 3))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_HISTORY_READ_MANY, op, err)) ==
             NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        int step = duro__pg_run_cols(p, c, s, col, 3);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            int64_t ord = duro__pg_column_int64(s, 19);
            if (ord < 1 || (size_t)ord > need) {
                rc = duro_error_set(err, DURO_STORAGE, 0,
                                    "postgres %s: corrupt history row", op);
                break;
            }
            size_t i = place[ord - 1];
            duro_orch_item *it = items[i];
            if (duro__pg_append_event(p, it->arena, s, &it->history,
                                      &it->history_count, &cap[i]) != 0) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    duro__pg_cols_free(col, 3);
    duro__free(place);
    duro__free(cap);
    return rc;
}

/* Up to max items with one claim (READY_CLAIM_MANY, or its _ASYNC form as
 * the transaction's only write; token hex `hex`) inside an open write
 * transaction: next[0 .. *got), distinct instances, oldest first. An
 * instance claimed with nothing visible has its readiness repaired and is
 * left out. */
int duro__pg_fetch_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                       duro__pg_stmt_id claim, const char *hex,
                                       int64_t lock_timeout_ms,
                                       const duro_history_cache *cache,
                                       int64_t now, size_t max,
                                       duro_orch_item **next, size_t *got,
                                       const char *op, duro_error *err)
{
    *got = 0;
    int64_t until = duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms);
    duro_arena *scratch = duro_arena_create(); /* repairs' instance ids */
    int64_t *repair_ids = duro__calloc(max, sizeof(*repair_ids));
    const char **repair_names = duro__calloc(max, sizeof(*repair_names));
    size_t repairs = 0;
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (scratch == NULL || repair_ids == NULL || repair_names == NULL)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, claim, op, err)) == NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_claim(c, s, hex, now, until);
        duro__pg_bind_i64(c, s, 4, (int64_t)max);
        duro_orch_item *item = NULL;
        int64_t item_ready = -1;
        size_t cap = 0;
        int step = duro__pg_step(p, c, s);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            if (duro__pg_claimed_nothing(p, s))
                continue;
            int64_t ready_id = duro__pg_column_int64(s, 18);
            if (duro__pg_column_null(s, 0)) {
                /* ready but nothing visible (an expired lock over delayed
                 * messages): its readiness is repaired below */
                if (repairs == max ||
                    duro__pg_column_text(scratch, s, 19,
                                         &repair_names[repairs]) != 0) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
                repair_ids[repairs++] = ready_id;
                continue;
            }
            if (item == NULL || ready_id != item_ready) {
                duro_arena *a = *got < max ? duro_arena_create() : NULL;
                item = a != NULL ? duro_arena_alloc(a, sizeof(*item)) : NULL;
                if (item == NULL) {
                    duro_arena_destroy(a);
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
                item->arena = a;
                next[(*got)++] = item;
                item_ready = ready_id;
                cap = 0;
                if (duro__pg_column_text(a, s, 19, &item->instance_id) != 0 ||
                    duro__pg_column_text(a, s, 20, &item->lock_token) != 0 ||
                    duro__pg_read_claimed_meta(item, s) != 0) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
            }
            if (duro__pg_append_claimed_message(p, item, s, &cap) != 0) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE && step != DURO__PG_ROW)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    for (size_t i = 0; i < repairs && rc == DURO_OK; i++)
        rc = duro__sql_settle_ready(&p->sql, (duro__sql_conn *)c, repair_ids[i],
                                    repair_names[i], 0, NULL, op, err);
    if (rc == DURO_OK)
        rc = load_claimed_histories(p, c, next, *got, cache, op, err);
    if (rc != DURO_OK) {
        for (size_t i = 0; i < *got; i++) {
            duro_orch_item_free(next[i]);
            next[i] = NULL;
        }
        *got = 0;
    }
    duro_arena_destroy(scratch);
    duro__free(repair_ids);
    duro__free((void *)repair_names);
    return rc;
}
