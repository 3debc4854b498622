/* pg_ack.c - PostgreSQL's part of a turn's ack inside an open write
 * transaction: its events in one statement, and its writes gathered into
 * the statements a batch of turns shares (the writes both stores make
 * alike are sql/queue.c's). Any thread (a connection is its caller's). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* The events of a turn in one statement (one event: HISTORY_INSERT). */
int duro__pg_insert_events(duro__pg_provider *p, duro__pg_conn *c,
                           const char *instance_id, uint64_t execution_id,
                           const duro_event *events, size_t count,
                           const char *op, duro_error *err)
{
    if (count == 0)
        return DURO_OK;
    if (count == 1)
        return duro__sql_insert_history(&p->sql, (duro__sql_conn *)c,
                                        instance_id, execution_id, events, op,
                                        err);
    enum { COLUMNS = 19 };
    duro__strbuf col[COLUMNS];
    memset(col, 0, sizeof(col));
    int oom = 0;
    for (int i = 0; i < COLUMNS; i++)
        duro__strbuf_open(&col[i], '{');
    for (size_t e = 0; e < count; e++)
        duro__pg_append_event_columns(col, &events[e]);
    for (int i = 0; i < COLUMNS; i++) {
        duro__strbuf_add(&col[i], "}", 1);
        oom |= col[i].oom;
    }
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (oom)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_HISTORY_INSERT_MANY, op,
                                err)) == NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_u64(c, s, 2, execution_id);
        for (int i = 0; i < COLUMNS; i++)
            duro__pg_bind_text(c, s, 3 + i, col[i].s);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_UNIQUE)
            rc = duro_error_set(
                err, DURO_ALREADY_EXISTS, 0,
                "postgres %s: a history event among ids "
                "%" PRIu64 " .. %" PRIu64 " of instance '%s' execution %" PRIu64
                " already exists (duplicate event id)",
                op, events[0].event_id, events[count - 1].event_id, instance_id,
                execution_id);
        else if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s); /* before the buffers its values point at go */
    }
    for (int i = 0; i < COLUMNS; i++)
        duro__free(col[i].s);
    return rc;
}

void duro__pg_batch_open(duro__pg_batch_cols *b)
{
    memset(b, 0, sizeof(*b));
    duro__pg_cols_open(b->ev, DURO__PG_BATCH_EVENT_COLUMNS);
    duro__pg_cols_open(b->wq, DURO__PG_BATCH_WORK_COLUMNS);
    duro__pg_cols_open(b->st, DURO__PG_BATCH_SETTLE_COLUMNS);
    duro__pg_cols_open(b->ex, DURO__PG_BATCH_EXEC_COLUMNS);
    duro__pg_cols_open(b->mt, DURO__PG_BATCH_META_COLUMNS);
}

void duro__pg_batch_free(duro__pg_batch_cols *b)
{
    duro__pg_cols_free(b->ev, DURO__PG_BATCH_EVENT_COLUMNS);
    duro__pg_cols_free(b->wq, DURO__PG_BATCH_WORK_COLUMNS);
    duro__pg_cols_free(b->st, DURO__PG_BATCH_SETTLE_COLUMNS);
    duro__pg_cols_free(b->ex, DURO__PG_BATCH_EXEC_COLUMNS);
    duro__pg_cols_free(b->mt, DURO__PG_BATCH_META_COLUMNS);
}

/* Runs statement id over the n literals b (closed here) with `now` as
 * parameter n + 1; DURO_OK when it ran to its end. */
static int run_batch_statement(duro__pg_provider *p, duro__pg_conn *c,
                               duro__pg_stmt_id id, duro__strbuf *b, size_t n,
                               int64_t now, const char *op, duro_error *err)
{
    if (duro__pg_cols_close(b, n))
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    duro__pg_statement *s = duro__pg_stmt(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_i64(c, s, (int)n + 1, now);
    int step = duro__pg_run_cols(p, c, s, b, n);
    int rc = step == DURO__PG_DONE ? DURO_OK : duro__pg_error(c, step, op, err);
    duro__pg_reset(s);
    return rc;
}

/* Writes the metadata gathered in b, leaving b->mt open and empty. */
int duro__pg_flush_batch_metas(duro__pg_provider *p, duro__pg_conn *c,
                               duro__pg_batch_cols *b, int64_t now,
                               const char *op, duro_error *err)
{
    if (b->metas == 0)
        return DURO_OK;
    int rc = run_batch_statement(p, c, DURO__SQL_META_WRITE_MANY, b->mt,
                                 DURO__PG_BATCH_META_COLUMNS, now, op, err);
    duro__pg_cols_free(b->mt, DURO__PG_BATCH_META_COLUMNS);
    memset(b->mt, 0, sizeof(b->mt));
    duro__pg_cols_open(b->mt, DURO__PG_BATCH_META_COLUMNS);
    b->metas = 0;
    return rc;
}

/* Writes the executions, events and work items gathered in b. */
int duro__pg_flush_batch_rows(duro__pg_provider *p, duro__pg_conn *c,
                              duro__pg_batch_cols *b, int64_t now,
                              const char *op, duro_error *err)
{
    int rc = DURO_OK;
    if (b->execs > 0 &&
        (rc = run_batch_statement(p, c, DURO__SQL_EXEC_CREATE_MANY, b->ex,
                                  DURO__PG_BATCH_EXEC_COLUMNS, now, op, err)) !=
            DURO_OK)
        return rc;
    if (duro__pg_cols_close(b->ev, DURO__PG_BATCH_EVENT_COLUMNS) ||
        duro__pg_cols_close(b->wq, DURO__PG_BATCH_WORK_COLUMNS))
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (b->events > 0 || b->works > 0) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_HISTORY_INSERT_BATCH, op, err);
        if (s == NULL)
            return err->code;
        for (int i = 0; i < DURO__PG_BATCH_WORK_COLUMNS; i++)
            duro__pg_bind_text(c, s, DURO__PG_BATCH_EVENT_COLUMNS + 1 + i,
                               b->wq[i].s);
        duro__pg_bind_i64(c, s,
                          DURO__PG_BATCH_EVENT_COLUMNS +
                              DURO__PG_BATCH_WORK_COLUMNS + 1,
                          now);
        int step =
            duro__pg_run_cols(p, c, s, b->ev, DURO__PG_BATCH_EVENT_COLUMNS);
        if (step == DURO__PG_UNIQUE)
            rc = duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                                "postgres %s: a history event of the batch "
                                "already exists (duplicate event id)",
                                op);
        else if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    return rc;
}

/* A turn's history gathered into b: room for it, its new execution, its
 * events. */
static int append_history(duro__pg_provider *p, duro__pg_conn *c,
                          const duro__sql_lock_holder *h, uint64_t execution_id,
                          const duro_orch_ack *ack, duro__pg_batch_cols *b,
                          const char *op, duro_error *err)
{
    const char *instance_id = h->instance_id;
    int rc = duro__sql_history_room(
        &p->sql, (duro__sql_conn *)c, instance_id, h->current, execution_id,
        h->has_events ? &h->events : NULL, ack->history_delta_count,
        p->cfg.max_history, op, err);
    if (rc != DURO_OK)
        return rc;
    if (execution_id > h->current) {
        const duro_instance_meta *m = ack->meta;
        duro__pg_col_text(&b->ex[0], instance_id);
        duro__pg_col_num(&b->ex[1], (int64_t)execution_id);
        duro__pg_col_text(&b->ex[2], m != NULL ? m->name : NULL);
        duro__pg_col_text(&b->ex[3], m != NULL ? m->version : NULL);
        /* a turn with metadata (a first turn's status) sets the instance's
         * current execution in its META_WRITE_MANY row (gather_meta's
         * `began`): one update of the instance row, not two */
        duro__pg_col_num(&b->ex[4], m != NULL);
        b->execs++;
    }
    for (size_t i = 0; i < ack->history_delta_count; i++) {
        duro__pg_col_text(&b->ev[0], instance_id);
        duro__pg_col_num(&b->ev[1], (int64_t)execution_id);
        duro__pg_append_event_columns(&b->ev[2], &ack->history_delta[i]);
        b->events++;
    }
    return DURO_OK;
}

/* The first writes of an ack whose lock h holds, gathered into the batch's
 * shared statements b: checks, the execution of a continue-as-new, the
 * events and the work items (sql/queue.c's write_turn writes them at
 * once). */
int duro__pg_ack_first_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__sql_lock_holder *h,
                              const duro_orch_ack *ack, duro__pg_batch_cols *b,
                              const char *op, duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t execution_id;
    int rc = duro__sql_check_turn(&p->sql, h, ack, &execution_id, op, err);
    if (rc != DURO_OK)
        return rc;
    if ((ack->history_delta_count > 0 || ack->meta != NULL) &&
        (rc = append_history(p, c, h, execution_id, ack, b, op, err)) !=
            DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++) {
        const duro_work_item *it = &ack->worker_items[i];
        uint64_t exec = duro__sql_item_execution(it, instance_id, execution_id);
        duro__pg_col_text(&b->wq[0], it->instance_id);
        duro__pg_col_num(&b->wq[1], (int64_t)exec);
        duro__pg_col_num(&b->wq[2], (int64_t)it->source_id);
        duro__pg_col_text(&b->wq[3], it->name);
        duro__pg_col_text(&b->wq[4], it->version);
        duro__pg_col_text(&b->wq[5], it->payload);
        duro__pg_col_num(&b->wq[6], (int64_t)it->attempt);
        b->works++;
    }
    return DURO_OK;
}

/* write_meta's and drop_dead_messages' writes gathered into b
 * (META_WRITE_MANY) instead; `began` is the execution the turn began
 * (append_history left the instance's current execution to this row), or
 * 0. */
static void gather_meta(duro__pg_batch_cols *b, const char *instance_id,
                        uint64_t execution_id, uint64_t began,
                        const duro_instance_meta *m)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = duro__sql_nonempty(m->parent_instance);
    duro__pg_col_text(&b->mt[0], instance_id);
    duro__pg_col_num(&b->mt[1], (int64_t)execution_id);
    duro__pg_col_num(&b->mt[2], continued ? DURO_STATUS_RUNNING : m->status);
    duro__pg_col_num(&b->mt[3], m->status);
    duro__pg_col_text(&b->mt[4], m->name);
    duro__pg_col_text(&b->mt[5], m->version);
    duro__pg_col_text(&b->mt[6], continued ? NULL : m->output);
    duro__pg_col_text(&b->mt[7], m->output);
    duro__pg_col_text(&b->mt[8], m->error);
    duro__pg_col_num(&b->mt[9], m->category);
    duro__pg_col_num(&b->mt[10], m->custom_status_set != 0);
    duro__pg_col_text(&b->mt[11], m->custom_status);
    duro__pg_col_text(&b->mt[12], parent);
    duro__pg_col_num(&b->mt[13], (int64_t)m->parent_execution);
    duro__pg_col_num(&b->mt[14], (int64_t)m->parent_event_id);
    duro__pg_col_num(&b->mt[15], finished || m->problem != NULL);
    duro__pg_col_text(&b->mt[16], m->problem);
    duro__pg_col_num(&b->mt[17], finished);
    duro__pg_col_num(&b->mt[18], (int64_t)began);
    b->metas++;
}

/* The rest of an ack in a batch, after its events and work items are
 * written: cancellations, outbound messages (after the metadata gathered
 * so far), and its metadata gathered into b (META_WRITE_MANY also drops
 * the messages nothing will read when it ended). */
int duro__pg_ack_other_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__sql_lock_holder *h,
                              const duro_orch_ack *ack, int64_t now,
                              duro__pg_batch_cols *b, const char *op,
                              duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t execution_id =
        ack->execution_id != 0 ? ack->execution_id : h->current;
    int rc = duro__sql_cancel_activities(
        &p->sql, (duro__sql_conn *)c, instance_id, execution_id,
        ack->cancelled_activities, ack->cancelled_activity_count, op, err);
    if (rc != DURO_OK)
        return rc;
    /* a message reads its target's metadata (see duro__pg_batch_cols) */
    if (ack->orchestrator_item_count > 0 &&
        (rc = duro__pg_flush_batch_metas(p, c, b, now, op, err)) != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = duro__sql_enqueue_outbound(&p->sql, (duro__sql_conn *)c,
                                             &ack->orchestrator_items[i], now,
                                             op, err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL)
        gather_meta(b, instance_id, execution_id,
                    execution_id > h->current ? execution_id : 0, ack->meta);
    return DURO_OK;
}
