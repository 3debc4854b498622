/* queue.c - what both SQL stores do alike on their queues, written once:
 * lock tokens, the input checks of work items and acks, the writes of an
 * enqueue and of a turn's ack (one turn at once: its lock, history, work
 * items, cancellations, outbound messages, metadata and release), an
 * instance's readiness, the abandon and renewal of a lock, the worker
 * queue's claim, row updates and acked row; and the methods whose checks
 * and transactions are the same on both (enqueue, renew, abandon; the
 * checks of an ack before the dialect's ack_turns or ack_work). What the
 * stores do differently is asked of the dialect (the queue block of
 * duro__sql_dialect): PostgreSQL's set-based batches and combined
 * activity acks are its ack_turns and ack_work, its releases its
 * abandon_failed. Any thread (a connection by one at a time). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sql/sql.h"

/* ---- lock tokens -------------------------------------------------------
 * "o<ready row id>.<32 hex>" for an instance lock, "w<worker row id>.<32
 * hex>" for a work item: the row is found by primary key, the random part
 * makes the token unguessable and distinct per fetch. */

int duro__sql_check_token(const char *token, duro_error *err)
{
    if (token == NULL || token[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock token is NULL or empty");
    return DURO_OK;
}

/* The row id of a token this provider issued with `prefix`; -1 otherwise. */
int duro__sql_parse_token(const char *token, char prefix, int64_t *id)
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

int duro__sql_lock_lost(const duro__sql_store *st, const char *op,
                        const char *why, duro_error *err)
{
    return duro_error_set(err, DURO_LOCK_LOST, 0, "%s %s: lock lost: %s",
                          st->dialect->name, op, why);
}

/* ---- input checks ------------------------------------------------------- */

int duro__sql_check_work_item(const duro__sql_store *st,
                              const duro_work_item *it, int worker,
                              duro_error *err)
{
    if (it == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "work item is NULL");
    if (worker ? it->kind != DURO_WORK_ACTIVITY_EXECUTE
               : (it->kind < DURO_WORK_START || it->kind > DURO_WORK_KIND_MAX ||
                  it->kind == DURO_WORK_ACTIVITY_EXECUTE))
        return duro_error_set(err, DURO_INVALID, 0,
                              "work item kind %d does not belong on the %s "
                              "queue",
                              (int)it->kind,
                              worker ? "worker" : "orchestrator");
    int name_required = it->kind == DURO_WORK_START ||
                        it->kind == DURO_WORK_EXTERNAL_EVENT ||
                        it->kind == DURO_WORK_ACTIVITY_EXECUTE;
    int rc;
    if ((rc = duro__sql_check_id(st, "instance id", it->instance_id, err)) ||
        (rc = duro__sql_check_name(st, "name", it->name, name_required, err)) ||
        (rc = duro__sql_check_name(st, "version", it->version, 0, err)) ||
        (rc = duro__sql_check_name(st, "reason", it->reason, 0, err)) ||
        (rc = duro__sql_check_name(st, "requested_by", it->requested_by, 0,
                                   err)) ||
        (rc = duro__sql_check_name(st, "parent instance", it->parent_instance,
                                   0, err)) ||
        (rc = duro__sql_check_name(st, "event id", it->event_id, 0, err)) ||
        (rc = duro__sql_check_payload(st, "payload", it->payload, err)) ||
        (rc = duro__sql_check_payload(st, "error", it->error, err)))
        return rc;
    /* a deadline (version 12): a START's is optional, a DEADLINE's is what
     * it is */
    if ((it->kind == DURO_WORK_START || it->kind == DURO_WORK_DEADLINE) &&
        (it->fire_at_ms < 0 ||
         (it->kind == DURO_WORK_DEADLINE && it->fire_at_ms == 0)))
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s: deadline (fire_at_ms) is %lld; it must be "
                              "a time after the epoch, in ms",
                              it->kind == DURO_WORK_START ? "START"
                                                          : "DEADLINE",
                              (long long)it->fire_at_ms);
    return DURO_OK;
}

static int check_event(const duro__sql_store *st, const duro_event *ev,
                       duro_error *err)
{
    if (ev->kind < 1 || ev->kind > DURO_EVENT_KIND_MAX)
        return duro_error_set(err, DURO_INVALID, 0,
                              "history event %" PRIu64 " has unknown kind %d",
                              ev->event_id, (int)ev->kind);
    if (ev->event_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "history event ids are 1-based; got 0");
    int rc;
    if ((rc = duro__sql_check_name(st, "event name", ev->name, 0, err)) ||
        (rc = duro__sql_check_name(st, "event version", ev->version, 0, err)) ||
        (rc = duro__sql_check_name(st, "event reason", ev->reason, 0, err)) ||
        (rc = duro__sql_check_name(st, "event requested_by", ev->requested_by,
                                   0, err)) ||
        (rc = duro__sql_check_name(st, "event ref_instance", ev->ref_instance,
                                   0, err)) ||
        (rc = duro__sql_check_payload(st, "event payload", ev->payload, err)) ||
        (rc = duro__sql_check_payload(st, "event error", ev->error, err)))
        return rc;
    return DURO_OK;
}

static int check_meta(const duro__sql_store *st, const duro_instance_meta *m,
                      duro_error *err)
{
    if (m->status < DURO_STATUS_PENDING || m->status > DURO_STATUS_TERMINATED)
        return duro_error_set(err, DURO_INVALID, 0,
                              "meta status %d is not a stored status",
                              m->status);
    int rc;
    if ((rc = duro__sql_check_name(st, "meta name", m->name, 0, err)) ||
        (rc = duro__sql_check_name(st, "meta version", m->version, 0, err)) ||
        (rc = duro__sql_check_name(st, "meta parent instance",
                                   m->parent_instance, 0, err)) ||
        (rc = duro__sql_check_payload(st, "output", m->output, err)) ||
        (rc = duro__sql_check_payload(st, "error", m->error, err)) ||
        (rc = duro__sql_check_payload(st, "problem", m->problem, err)) ||
        (rc = duro__sql_check_payload(
             st, "custom status",
             m->custom_status_set ? m->custom_status : NULL, err)))
        return rc;
    return DURO_OK;
}

int duro__sql_check_ack(const duro__sql_store *st, const duro_orch_ack *ack,
                        duro_error *err)
{
    if (ack == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "ack is NULL");
    if ((ack->history_delta_count > 0 && ack->history_delta == NULL) ||
        (ack->worker_item_count > 0 && ack->worker_items == NULL) ||
        (ack->orchestrator_item_count > 0 && ack->orchestrator_items == NULL) ||
        (ack->cancelled_activity_count > 0 &&
         ack->cancelled_activities == NULL))
        return duro_error_set(err, DURO_INVALID, 0,
                              "ack has a count without its array");
    int rc;
    for (size_t i = 0; i < ack->history_delta_count; i++)
        if ((rc = check_event(st, &ack->history_delta[i], err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++)
        if ((rc = duro__sql_check_work_item(st, &ack->worker_items[i], 1,
                                            err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = duro__sql_check_work_item(
                 st, &ack->orchestrator_items[i].item, 0, err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->cancelled_activity_count; i++)
        if ((rc = duro__sql_check_id(st, "cancelled activity instance id",
                                     ack->cancelled_activities[i].instance_id,
                                     err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL)
        return check_meta(st, ack->meta, err);
    return DURO_OK;
}

/* ---- the writes of an enqueue and of an ack ----------------------------- */

/* Creates the Pending instance row of a START; *created = 0 when it exists.
 */
static int create_instance(duro__sql_store *st, duro__sql_conn *c,
                           const duro_work_item *it, int64_t now, int *created,
                           const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_INSTANCE_CREATE, op, err);
    if (s == NULL)
        return err->code;
    const char *parent = duro__sql_nonempty(it->parent_instance);
    duro__sql_bind_text(st, c, s, 1, it->instance_id);
    duro__sql_bind_text(st, c, s, 2, it->name);
    duro__sql_bind_text(st, c, s, 3, it->version);
    duro__sql_bind_i64(st, c, s, 4, now);
    duro__sql_bind_text(st, c, s, 5, parent);
    duro__sql_bind_u64(st, c, s, 6, parent != NULL ? it->parent_execution : 0);
    duro__sql_bind_u64(st, c, s, 7, parent != NULL ? it->parent_event_id : 0);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc == DURO_OK)
        *created = duro__sql_changes(st, c) > 0;
    return rc;
}

/* The DEADLINE message of a START that created its instance with a
 * deadline (version 12): execution 0, so continue-as-new keeps it; visible
 * at the deadline, or at once when that has passed. Its insert writes the
 * deadline on the new row. */
static int enqueue_deadline(duro__sql_store *st, duro__sql_conn *c,
                            const duro_work_item *start, int64_t now,
                            const char *op, duro_error *err)
{
    if (start->fire_at_ms <= 0)
        return DURO_OK;
    duro_work_item d = {.kind = DURO_WORK_DEADLINE,
                        .instance_id = start->instance_id,
                        .fire_at_ms = start->fire_at_ms};
    return duro__sql_insert_message(st, c, &d, now,
                                    DURO__MAX(now, start->fire_at_ms), op, err);
}

void duro__sql_bind_message(duro__sql_store *st, duro__sql_conn *c,
                            duro__sql_stmt *s, const duro_work_item *it,
                            int64_t now, int64_t visible_at)
{
    const unsigned char *at = st->dialect->message_params;
    duro__sql_bind_i64(st, c, s, 1, (int64_t)it->kind);
    duro__sql_bind_text(st, c, s, 2, it->instance_id);
    duro__sql_bind_u64(st, c, s, 3, it->execution_id);
    duro__sql_bind_u64(st, c, s, 4, it->source_id);
    duro__sql_bind_text(st, c, s, 5, it->name);
    duro__sql_bind_text(st, c, s, 6, it->version);
    duro__sql_bind_text(st, c, s, 7, it->payload);
    duro__sql_bind_text(st, c, s, 8, it->error);
    duro__sql_bind_i64(st, c, s, 9, it->category);
    duro__sql_bind_text(st, c, s, 10, it->reason);
    duro__sql_bind_text(st, c, s, 11, it->requested_by);
    duro__sql_bind_text(st, c, s, 12, duro__sql_nonempty(it->parent_instance));
    duro__sql_bind_u64(st, c, s, 13, it->parent_execution);
    duro__sql_bind_u64(st, c, s, 14, it->parent_event_id);
    duro__sql_bind_i64(st, c, s, 15, it->fire_at_ms);
    duro__sql_bind_i64(st, c, s, 16, it->attempt);
    duro__sql_bind_i64(st, c, s, 17, it->flags);
    duro__sql_bind_i64(st, c, s, at[0], now);
    duro__sql_bind_i64(st, c, s, at[1], visible_at);
    duro__sql_bind_i64(st, c, s, at[2], it->started_ms);
    duro__sql_bind_i64(st, c, s, at[3], it->finished_ms);
}

/* Inserts one orchestrator message (enqueued at `now`, visible from
 * visible_at) and makes its instance ready by visible_at (unless the
 * instance is locked: its release recomputes). */
int duro__sql_insert_message(duro__sql_store *st, duro__sql_conn *c,
                             const duro_work_item *it, int64_t now,
                             int64_t visible_at, const char *op,
                             duro_error *err)
{
    duro__sql_stmt *s;
    int rc;
    if (it->kind == DURO_WORK_DEADLINE) {
        /* An instance has one deadline, set once (version 12): by its
         * start, or by a turn from its registration; a DEADLINE for an
         * instance that has one (or does not exist) is dropped here. */
        s = duro__sql_prepare(st, c, DURO__SQL_INSTANCE_SET_DEADLINE, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, it->instance_id);
        duro__sql_bind_i64(st, c, s, 2, it->fire_at_ms);
        if ((rc = duro__sql_run(st, c, s, op, err)) != DURO_OK)
            return rc;
        if (duro__sql_changes(st, c) == 0)
            return DURO_OK;
    }
    s = duro__sql_prepare(st, c, DURO__SQL_OQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_message(st, c, s, it, now, visible_at);
    rc = duro__sql_run(st, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (it->kind == DURO_WORK_CANCEL_INSTANCE) {
        /* The first request on a live instance is what status shows and
         * what the turn records (provider.h, version 4). */
        s = duro__sql_prepare(st, c, DURO__SQL_INSTANCE_CANCEL_REQUEST, op,
                              err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, it->instance_id);
        duro__sql_bind_i64(st, c, s, 2, now);
        duro__sql_bind_text(st, c, s, 3, it->reason);
        duro__sql_bind_text(st, c, s, 4, it->requested_by);
        if ((rc = duro__sql_run(st, c, s, op, err)) != DURO_OK)
            return rc;
    }
    s = duro__sql_prepare(st, c, DURO__SQL_READY_ENQUEUE, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, it->instance_id);
    duro__sql_bind_i64(st, c, s, 2, visible_at);
    st->dialect->bind_flag(c, s, 3, DURO__STOPS_INSTANCE(it->kind));
    return duro__sql_run(st, c, s, op, err);
}

/* Sets the readiness of an instance whose lock is being released from its
 * remaining messages: ready at the earliest (but not before `hold`, an
 * abandon delay; 0 for none), or no row when nothing is queued. *queued
 * (may be NULL) says whether messages remain. */
int duro__sql_settle_ready(duro__sql_store *st, duro__sql_conn *c,
                           int64_t ready_id, const char *instance_id,
                           int64_t hold, int *queued, const char *op,
                           duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_OQ_MIN_VISIBLE, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    int rc = duro__sql_step(st, c, s);
    if (rc != DURO__SQL_ROW)
        return duro__sql_error(st, c, rc, op, err);
    int any = !duro__sql_column_null(st, s, 0);
    int64_t earliest = duro__sql_column_int64(st, s, 0);
    duro__sql_reset(st, s);
    if (queued != NULL)
        *queued = any;
    if (!any) {
        s = duro__sql_prepare(st, c, DURO__SQL_READY_DELETE, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_i64(st, c, s, 1, ready_id);
        return duro__sql_run(st, c, s, op, err);
    }
    s = duro__sql_prepare(st, c, DURO__SQL_READY_SET, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_i64(st, c, s, 1, ready_id);
    if (hold > 0)
        duro__sql_bind_i64(st, c, s, 2, hold);
    else
        duro__sql_bind_text(st, c, s, 2, NULL);
    duro__sql_bind_i64(st, c, s, 3, DURO__MAX(earliest, hold));
    return duro__sql_run(st, c, s, op, err);
}

typedef struct cancel_ref {
    const char *instance_id;
    uint64_t execution_id;
    uint64_t activity_id;
} cancel_ref;

static int compare_cancel_refs(const void *x, const void *y)
{
    const cancel_ref *a = x, *b = y;
    int c = strcmp(a->instance_id, b->instance_id);
    if (c != 0)
        return c;
    return a->execution_id < b->execution_id   ? -1
           : a->execution_id > b->execution_id ? 1
                                               : 0;
}

/* The current execution of an instance, 0 when it has none or no row. */
int duro__sql_current_execution(duro__sql_store *st, duro__sql_conn *c,
                                const char *instance_id, int *exists,
                                uint64_t *execution_id, const char *op,
                                duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    int rc = duro__sql_step(st, c, s);
    *exists = rc == DURO__SQL_ROW;
    *execution_id = 0;
    if (rc == DURO__SQL_ROW)
        *execution_id = (uint64_t)duro__sql_column_int64(st, s, 0);
    else if (rc != DURO__SQL_DONE)
        return duro__sql_error(st, c, rc, op, err);
    duro__sql_reset(st, s);
    return DURO_OK;
}

/* Deletes the worker rows of cancelled activities: one DELETE per
 * (instance, execution) group, its activity ids passed as one bigint[]
 * literal and matched through the worker_queue_activity index. */
int duro__sql_cancel_activities(duro__sql_store *st, duro__sql_conn *c,
                                const char *instance_id, uint64_t execution_id,
                                const duro_activity_ref *refs, size_t count,
                                const char *op, duro_error *err)
{
    if (count == 0)
        return DURO_OK;
    cancel_ref *sorted = duro__malloc(count * sizeof(*sorted));
    char *json = duro__malloc(count * 22 + 3);
    int rc = DURO_OK;
    if (sorted == NULL || json == NULL) {
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        sorted[i].instance_id = refs[i].instance_id;
        sorted[i].execution_id = refs[i].execution_id;
        sorted[i].activity_id = refs[i].activity_id;
        if (sorted[i].execution_id != 0)
            continue;
        if (strcmp(refs[i].instance_id, instance_id) == 0) {
            sorted[i].execution_id = execution_id;
        } else {
            int exists;
            rc =
                duro__sql_current_execution(st, c, refs[i].instance_id, &exists,
                                            &sorted[i].execution_id, op, err);
        }
    }
    if (rc != DURO_OK)
        goto done;
    qsort(sorted, count, sizeof(*sorted), compare_cancel_refs);
    for (size_t start = 0; start < count && rc == DURO_OK;) {
        size_t end = start, used = 0;
        json[used++] = st->dialect->id_list[0];
        while (end < count &&
               compare_cancel_refs(&sorted[start], &sorted[end]) == 0) {
            used +=
                (size_t)sprintf(json + used, "%s%lld", end > start ? "," : "",
                                (long long)sorted[end].activity_id);
            end++;
        }
        json[used++] = st->dialect->id_list[1];
        json[used] = '\0';
        duro__sql_stmt *s =
            duro__sql_prepare(st, c, DURO__SQL_WQ_CANCEL, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sql_bind_text(st, c, s, 1, sorted[start].instance_id);
        duro__sql_bind_u64(st, c, s, 2, sorted[start].execution_id);
        duro__sql_bind_text(st, c, s, 3, json);
        rc = duro__sql_run(st, c, s, op, err);
        duro__sql_reset(st, s);

        start = end;
    }
done:
    duro__free(sorted);
    duro__free(json);
    return rc;
}

int duro__sql_insert_history(duro__sql_store *st, duro__sql_conn *c,
                             const char *instance_id, uint64_t execution_id,
                             const duro_event *ev, const char *op,
                             duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_HISTORY_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    duro__sql_bind_u64(st, c, s, 2, execution_id);
    duro__sql_bind_u64(st, c, s, 3, ev->event_id);
    duro__sql_bind_i64(st, c, s, 4, (int64_t)ev->kind);
    duro__sql_bind_u64(st, c, s, 5, ev->source_event_id);
    duro__sql_bind_i64(st, c, s, 6, ev->timestamp_ms);
    duro__sql_bind_text(st, c, s, 7, ev->name);
    duro__sql_bind_text(st, c, s, 8, ev->version);
    duro__sql_bind_text(st, c, s, 9, ev->payload);
    duro__sql_bind_text(st, c, s, 10, ev->error);
    duro__sql_bind_i64(st, c, s, 11, ev->category);
    duro__sql_bind_text(st, c, s, 12, ev->reason);
    duro__sql_bind_text(st, c, s, 13, ev->requested_by);
    duro__sql_bind_text(st, c, s, 14, ev->ref_instance);
    duro__sql_bind_u64(st, c, s, 15, ev->ref_execution);
    duro__sql_bind_u64(st, c, s, 16, ev->ref_event_id);
    duro__sql_bind_i64(st, c, s, 17, ev->fire_at_ms);
    duro__sql_bind_i64(st, c, s, 18, ev->attempt);
    duro__sql_bind_i64(st, c, s, 19, ev->flags);
    duro__sql_bind_i64(st, c, s, 20, ev->started_ms);
    duro__sql_bind_i64(st, c, s, 21, ev->finished_ms);
    int rc = duro__sql_step(st, c, s);
    if (st->dialect->unique_violation(rc))
        return duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                              "%s %s: history event %" PRIu64
                              " of instance '%s' execution %" PRIu64
                              " already exists (duplicate event id)",
                              st->dialect->name, op, ev->event_id, instance_id,
                              execution_id);
    if (rc != DURO__SQL_DONE)
        return duro__sql_error(st, c, rc, op, err);
    return DURO_OK;
}

int duro__sql_insert_work(duro__sql_store *st, duro__sql_conn *c,
                          const duro_work_item *it, uint64_t execution_id,
                          int64_t now, const char *op, duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(st, c, DURO__SQL_WQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, it->instance_id);
    duro__sql_bind_u64(st, c, s, 2, execution_id);
    duro__sql_bind_u64(st, c, s, 3, it->source_id);
    duro__sql_bind_text(st, c, s, 4, it->name);
    duro__sql_bind_text(st, c, s, 5, it->version);
    duro__sql_bind_text(st, c, s, 6, it->payload);
    duro__sql_bind_i64(st, c, s, 7, it->attempt);
    duro__sql_bind_i64(st, c, s, 8, now);
    return duro__sql_run(st, c, s, op, err);
}

/* Step 5 of an ack: orchestrator items, START items creating instances. */
int duro__sql_enqueue_outbound(duro__sql_store *st, duro__sql_conn *c,
                               const duro_outbound *out, int64_t now,
                               const char *op, duro_error *err)
{
    const duro_work_item *it = &out->item;
    int64_t visible_at = duro__sql_after_ms(now, out->delay_ms);
    if (it->kind != DURO_WORK_START)
        return duro__sql_insert_message(st, c, it, now, visible_at, op, err);
    int created = 0;
    int rc = create_instance(st, c, it, now, &created, op, err);
    if (rc == DURO_OK && created &&
        (rc = duro__sql_insert_message(st, c, it, now, visible_at, op, err)) ==
            DURO_OK)
        rc = enqueue_deadline(st, c, it, now, op, err);
    if (rc != DURO_OK || created)
        return rc;
    /* The child exists already: drop the START; an attached child's parent
     * learns it through a failure of its scheduling event. */
    const char *parent = duro__sql_nonempty(it->parent_instance);
    if (parent == NULL || (it->flags & DURO_START_DETACHED) != 0)
        return DURO_OK;
    /* The text starts with the code's name so tools can match on it. */
    char message[DURO__SQL_NAME_MAX + 96];
    snprintf(message, sizeof(message),
             "%s: cannot start sub-orchestration: instance '%s' already exists",
             duro_errname(DURO_ALREADY_EXISTS), it->instance_id);
    duro_work_item failed = {.kind = DURO_WORK_CHILD_FAILED,
                             .instance_id = parent,
                             .execution_id = it->parent_execution,
                             .source_id = it->parent_event_id,
                             .error = message,
                             .category = DURO_CATEGORY_CONFIGURATION};
    return duro__sql_insert_message(st, c, &failed, now, visible_at, op, err);
}

/* Step 6 of an ack: meta on the instance row and the acked execution's row.
 * `began`: the turn began execution_id (create_execution wrote its row
 * with this meta and left the instance's current execution to this
 * update: one write of each row, not two). */
int duro__sql_write_meta(duro__sql_store *st, duro__sql_conn *c,
                         const char *instance_id, uint64_t execution_id,
                         int began, const duro_instance_meta *m, int64_t now,
                         const char *op, duro_error *err)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = duro__sql_nonempty(m->parent_instance);
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_INSTANCE_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    /* A continued-as-new instance runs on in its next execution. */
    duro__sql_bind_i64(st, c, s, 2,
                       continued ? DURO_STATUS_RUNNING : m->status);
    duro__sql_bind_text(st, c, s, 3, m->name);
    duro__sql_bind_text(st, c, s, 4, m->version);
    duro__sql_bind_text(st, c, s, 5, continued ? NULL : m->output);
    duro__sql_bind_text(st, c, s, 6, m->error);
    duro__sql_bind_i64(st, c, s, 7, m->category);
    duro__sql_bind_i64(st, c, s, 8, m->custom_status_set != 0);
    duro__sql_bind_text(st, c, s, 9, m->custom_status);
    duro__sql_bind_text(st, c, s, 10, parent);
    duro__sql_bind_u64(st, c, s, 11, m->parent_execution);
    duro__sql_bind_u64(st, c, s, 12, m->parent_event_id);
    duro__sql_bind_i64(st, c, s, 13, now);
    /* An ending (continue-as-new too) replaces the problem with
     * m->problem, clearing it when NULL; otherwise only a problem given
     * is written. */
    duro__sql_bind_i64(st, c, s, 14, finished || m->problem != NULL);
    duro__sql_bind_text(st, c, s, 15, m->problem);
    duro__sql_bind_u64(st, c, s, 16, began ? execution_id : 0);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc != DURO_OK || execution_id == 0 || began)
        return rc;
    s = duro__sql_prepare(st, c, DURO__SQL_EXEC_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    duro__sql_bind_u64(st, c, s, 2, execution_id);
    duro__sql_bind_i64(st, c, s, 3, m->status);
    duro__sql_bind_text(st, c, s, 4, m->name);
    duro__sql_bind_text(st, c, s, 5, m->version);
    duro__sql_bind_text(st, c, s, 6, m->output);
    duro__sql_bind_text(st, c, s, 7, m->error);
    duro__sql_bind_i64(st, c, s, 8, m->category);
    if (finished)
        duro__sql_bind_i64(st, c, s, 9, now);
    else
        duro__sql_bind_text(st, c, s, 9, NULL);
    return duro__sql_run(st, c, s, op, err);
}

/* Step 7 of an ack: queues hold only live work. An instance that ended
 * would only drop what is still queued for it (a losing timer due in 30
 * days, a delayed START of an instance cancelled before it began), so all
 * of it goes, set-based through orchestrator_queue_instance; after a
 * continue-as-new only what names the ended execution goes. The readiness
 * row is recomputed from what remains when the lock is released. */
int duro__sql_drop_dead_messages(duro__sql_store *st, duro__sql_conn *c,
                                 const char *instance_id, uint64_t execution_id,
                                 int status, const char *op, duro_error *err)
{
    int continued = status == DURO_STATUS_CONTINUED_AS_NEW;
    if (!continued && !duro_status_is_terminal(status))
        return DURO_OK;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c,
                          continued ? DURO__SQL_OQ_DELETE_EXECUTION
                                    : DURO__SQL_OQ_DELETE_INSTANCE,
                          op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    if (continued)
        duro__sql_bind_u64(st, c, s, 2, execution_id);
    return duro__sql_run(st, c, s, op, err);
}

/* The idempotent START `it` of an instance that exists: DURO_OK when the
 * instance runs the same orchestration name (version, input and status are
 * not compared), DURO_ALREADY_EXISTS naming both when not. Only on this
 * rare path, so a normal start costs no extra statement. */
static int check_idempotent_start(duro__sql_store *st, duro__sql_conn *c,
                                  const duro_work_item *it, const char *op,
                                  duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_INSTANCE_NAME, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, it->instance_id);
    int rc = duro__sql_step(st, c, s);
    if (rc != DURO__SQL_ROW && rc != DURO__SQL_DONE)
        return duro__sql_error(st, c, rc, op, err);
    const char *name = rc == DURO__SQL_ROW && !duro__sql_column_null(st, s, 0)
                           ? duro__sql_column_text_raw(st, s, 0)
                           : NULL;
    if (name != NULL && strcmp(name, it->name) != 0)
        rc = duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                            "%s %s: instance '%s' already exists as "
                            "orchestration '%s' (an idempotent start of '%s' "
                            "is refused)",
                            st->dialect->name, op, it->instance_id, name,
                            it->name);
    else
        rc = DURO_OK;
    duro__sql_reset(st, s);
    return rc;
}

/* Records the event id of an EXTERNAL_EVENT (version 8); *known = 1 when
 * it was recorded for the instance before (the event is not enqueued
 * again). */
static int record_event_id(duro__sql_store *st, duro__sql_conn *c,
                           const duro_work_item *item, int64_t now, int *known,
                           const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_EVENT_ID_RECORD, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, item->instance_id);
    duro__sql_bind_text(st, c, s, 2, item->event_id);
    duro__sql_bind_i64(st, c, s, 3, now);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc == DURO_OK)
        *known = duro__sql_changes(st, c) == 0;
    return rc;
}

/* Creates the instance of a START (failing when it exists, unless
 * idempotent and of the same name: *skip = 1), records an event's id (one
 * already recorded: *skip = 1) and enqueues an item; inside a
 * transaction. */
int duro__sql_enqueue_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                     const duro_work_item *item, int64_t now,
                                     int64_t visible_at, int *skip,
                                     const char *op, duro_error *err)
{
    *skip = 0;
    if (item->kind == DURO_WORK_START) {
        int created = 0;
        int rc = create_instance(st, c, item, now, &created, op, err);
        if (rc != DURO_OK)
            return rc;
        if (!created) {
            if (item->flags & DURO_START_IDEMPOTENT) {
                *skip = 1;
                return check_idempotent_start(st, c, item, op, err);
            }
            return duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                                  "%s %s: instance '%s' already exists",
                                  st->dialect->name, op, item->instance_id);
        }
    }
    if (item->kind == DURO_WORK_EXTERNAL_EVENT && item->event_id != NULL) {
        int rc = record_event_id(st, c, item, now, skip, op, err);
        if (rc != DURO_OK || *skip)
            return rc;
    }
    int rc = duro__sql_insert_message(st, c, item, now, visible_at, op, err);
    if (rc == DURO_OK && item->kind == DURO_WORK_START)
        rc = enqueue_deadline(st, c, item, now, op, err);
    return rc;
}

/* ---- rows, and the worker queue's claim and row updates ----------------- */

int duro__sql_read_message(duro__sql_store *st, duro_arena *a,
                           duro__sql_stmt *s, int times_col, duro_work_item *it)
{
    it->kind = (duro_work_kind)duro__sql_column_int(st, s, 0);
    it->execution_id = (uint64_t)duro__sql_column_int64(st, s, 2);
    it->source_id = (uint64_t)duro__sql_column_int64(st, s, 3);
    it->category = duro__sql_column_int(st, s, 8);
    it->parent_execution = (uint64_t)duro__sql_column_int64(st, s, 12);
    it->parent_event_id = (uint64_t)duro__sql_column_int64(st, s, 13);
    it->fire_at_ms = duro__sql_column_int64(st, s, 14);
    it->attempt = (uint32_t)duro__sql_column_int64(st, s, 15);
    it->flags = (uint32_t)duro__sql_column_int64(st, s, 16);
    it->started_ms = duro__sql_column_int64(st, s, times_col);
    it->finished_ms = duro__sql_column_int64(st, s, times_col + 1);
    if (duro__sql_column_text(st, a, s, 1, &it->instance_id) ||
        duro__sql_column_text(st, a, s, 4, &it->name) ||
        duro__sql_column_text(st, a, s, 5, &it->version) ||
        duro__sql_column_text(st, a, s, 6, &it->payload) ||
        duro__sql_column_text(st, a, s, 7, &it->error) ||
        duro__sql_column_text(st, a, s, 9, &it->reason) ||
        duro__sql_column_text(st, a, s, 10, &it->requested_by) ||
        duro__sql_column_text(st, a, s, 11, &it->parent_instance))
        return -1;
    return 0;
}

/* The row WQ_FETCH returned, into a worker item. */
int duro__sql_read_work_row(duro__sql_store *st, duro_arena *a,
                            duro__sql_stmt *s, duro_worker_item *w)
{
    duro_work_item *it = &w->item;
    it->kind = DURO_WORK_ACTIVITY_EXECUTE;
    it->execution_id = (uint64_t)duro__sql_column_int64(st, s, 1);
    it->source_id = (uint64_t)duro__sql_column_int64(st, s, 2);
    it->attempt = (uint32_t)duro__sql_column_int64(st, s, 6);
    w->attempt = (uint32_t)duro__sql_column_int64(st, s, 7);
    if (duro__sql_column_text(st, a, s, 0, &it->instance_id) ||
        duro__sql_column_text(st, a, s, 3, &it->name) ||
        duro__sql_column_text(st, a, s, 4, &it->version) ||
        duro__sql_column_text(st, a, s, 5, &it->payload) ||
        duro__sql_column_text(st, a, s, 8, &w->lock_token))
        return -1;
    return 0;
}

int duro__sql_claim_work(duro__sql_store *st, duro__sql_conn *c,
                         duro__sql_stmt_id claim, const char *token_hex,
                         int64_t lock_timeout_ms, int64_t now,
                         duro_worker_item **out, const char *op,
                         duro_error *err)
{
    *out = NULL;
    duro_arena *a = NULL;
    duro_worker_item *w = NULL;
    duro__sql_stmt *s = duro__sql_prepare(st, c, claim, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_text(st, c, s, 1, token_hex);
        /* visible by the caller's `now` (read before it waited for the
         * write lock), locked from this moment: a wait never shortens the
         * lock (a lock born expired was taken by the next fetch) */
        duro__sql_bind_i64(
            st, c, s, 2, duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms));
        duro__sql_bind_i64(st, c, s, 3, now);
        int step = duro__sql_step(st, c, s);
        if (step == DURO__SQL_ROW && st->dialect->note_due != NULL &&
            duro__sql_column_null(st, s, 8)) {
            st->dialect->note_due(st, DURO_QUEUE_WORKER,
                                  duro__sql_column_null(st, s, 9)
                                      ? INT64_MAX
                                      : duro__sql_column_int64(st, s, 9));
            step = duro__sql_step(st, c, s);
        } else if (step == DURO__SQL_ROW) {
            a = duro_arena_create();
            w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
            if (w == NULL ||
                (w->arena = a, duro__sql_read_work_row(st, a, s, w) != 0))
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            else
                step = duro__sql_step(st, c, s);
        }
        if (rc == DURO_OK && step != DURO__SQL_DONE)
            rc = duro__sql_error(st, c, step, op, err);
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

/* Updates the worker row the token still holds (expired or not: only
 * another fetch, which replaces the token, ends a work item's lock) with
 * `update` (WQ_RENEW with `renewal`, or WQ_ABANDON: 1 row, 2 token, 3
 * now + ms). When no row matched, a probe by primary key tells a row that
 * is gone (DURO_NOT_FOUND for a renewal, else DURO_LOCK_LOST) from one that
 * another fetch took or that was released (DURO_LOCK_LOST). PostgreSQL's
 * row ids come from an identity column and are never reused; SQLite's are
 * rowids: after the row with the highest id is deleted, the next insert
 * may reuse its id, so a gone row can read as taken (provider.h allows
 * it). */
int duro__sql_update_work_row(duro__sql_store *st, duro__sql_stmt_id update,
                              int64_t id, const char *token, int64_t ms,
                              int renewal, const char *op, duro_error *err)
{
    duro__sql_conn *c;
    /* A renewal has a deadline: it goes ahead of writers that arrive while
     * it waits (where the dialect can: SQLite's one writer), and extends
     * from when it runs, not from when it asked. */
    int rc = renewal ? st->dialect->write_begin_urgent(st, op, &c, err)
                     : duro__sql_write_begin(st, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__sql_stmt *s = duro__sql_prepare(st, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_i64(st, c, s, 1, id);
        duro__sql_bind_text(st, c, s, 2, token);
        duro__sql_bind_i64(st, c, s, 3, duro__sql_after_ms(now, ms));
        rc = duro__sql_run(st, c, s, op, err);
    }
    if (rc == DURO_OK && duro__sql_changes(st, c) == 0) {
        s = duro__sql_prepare(st, c, DURO__SQL_WQ_EXISTS, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        int step = DURO__SQL_DONE;
        if (rc == DURO_OK) {
            duro__sql_bind_i64(st, c, s, 1, id);
            step = duro__sql_step(st, c, s);
            if (step != DURO__SQL_ROW && step != DURO__SQL_DONE)
                rc = duro__sql_error(st, c, step, op, err);
        }
        if (rc == DURO_OK && step == DURO__SQL_DONE && renewal)
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "%s %s: the work item is gone (cancelled "
                                "by a turn, acked, or its instance deleted)",
                                st->dialect->name, op);
        else if (rc == DURO_OK && step == DURO__SQL_DONE)
            rc = duro__sql_lock_lost(
                st, op,
                "the work item is gone (cancelled by a turn, "
                "acked, or its instance deleted)",
                err);
        else if (rc == DURO_OK)
            rc = duro__sql_lock_lost(
                st, op,
                "another fetch took the work item after the lock "
                "expired, or it was released",
                err);
    }
    if (rc != DURO_OK) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    return duro__sql_write_commit(st, c, op, err);
}

/* ---- renewals and enqueue (methods) ------------------------------------- */

/* Updates a lock row its token still holds, unexpired, with `update`
 * (READY_RENEW: 1 row, 2 token, 3 now + ms, 4 now); fails
 * DURO_LOCK_LOST when no row matched. */
static int renew_lock(duro__sql_store *st, duro__sql_stmt_id update,
                      int64_t ready_id, const char *token, int64_t ms,
                      const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    int rc = duro__sql_write_begin(st, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_stmt *s = duro__sql_prepare(st, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_i64(st, c, s, 1, ready_id);
        duro__sql_bind_text(st, c, s, 2, token);
        duro__sql_bind_i64(st, c, s, 3, duro__sql_after_ms(now, ms));
        duro__sql_bind_i64(st, c, s, 4, now);
        rc = duro__sql_run(st, c, s, op, err);
    }
    if (rc == DURO_OK && duro__sql_changes(st, c) == 0)
        rc = duro__sql_lock_lost(
            st, op,
            "the row is gone (acked, cancelled or deleted), the "
            "token differs or the lock expired",
            err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    return duro__sql_write_commit(st, c, op, err);
}

int duro__sql_renew_orchestration_item_lock(duro_provider *base,
                                            const char *lock_token,
                                            int64_t extend_ms, duro_error *err)
{
    static const char op[] = "renew_orchestration_item_lock";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int64_t ready_id;
    int rc = duro__sql_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_parse_token(lock_token, 'o', &ready_id) != 0)
        return duro__sql_lock_lost(
            st, op, "not an orchestration lock token of this store", err);
    return renew_lock(st, DURO__SQL_READY_RENEW, ready_id, lock_token,
                      extend_ms, op, err);
}

int duro__sql_renew_work_item_lock(duro_provider *base, const char *lock_token,
                                   int64_t extend_ms, duro_error *err)
{
    static const char op[] = "renew_work_item_lock";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int64_t id;
    int rc = duro__sql_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_parse_token(lock_token, 'w', &id) != 0)
        return duro__sql_lock_lost(
            st, op, "not a work item lock token of this store", err);
    return duro__sql_update_work_row(st, DURO__SQL_WQ_RENEW, id, lock_token,
                                     extend_ms, 1, op, err);
}

int duro__sql_enqueue_for_orchestrator(duro_provider *base,
                                       const duro_work_item *item,
                                       int64_t delay_ms, duro_error *err)
{
    static const char op[] = "enqueue_for_orchestrator";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = duro__sql_check_work_item(st, item, 0, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    int skip = 0;
    rc = duro__sql_enqueue_in_transaction(
        st, c, item, now, duro__sql_after_ms(now, delay_ms), &skip, op, err);
    if (rc != DURO_OK || skip) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    if ((rc = duro__sql_write_commit(st, c, op, err)) != DURO_OK)
        return rc;
    duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* ---- instance locks ---------------------------------------------------- */

int duro__sql_hold_lock(duro__sql_store *st, duro__sql_conn *c,
                        int64_t ready_id, const char *token, int64_t now,
                        duro__sql_lock_holder *h, const char *op,
                        duro_error *err)
{
    int current = st->dialect->has(DURO__SQL_READY_HOLDER_CURRENT);
    duro__sql_stmt *s = duro__sql_prepare(
        st, c,
        current ? DURO__SQL_READY_HOLDER_CURRENT : DURO__SQL_READY_HOLDER, op,
        err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_i64(st, c, s, 1, ready_id);
    duro__sql_bind_text(st, c, s, 2, token);
    int rc = duro__sql_step(st, c, s);
    if (rc == DURO__SQL_DONE)
        return duro__sql_lock_lost(
            st, op,
            "the token does not hold an instance lock (released, "
            "expired and taken by another fetch, or the instance "
            "was deleted)",
            err);
    if (rc != DURO__SQL_ROW)
        return duro__sql_error(st, c, rc, op, err);
    int64_t until = duro__sql_column_int64(st, s, 1);
    const char *id = duro__sql_column_text_raw(st, s, 0);
    size_t n = (size_t)duro__sql_column_bytes(st, s, 0);
    if (id == NULL || n > DURO__SQL_NAME_MAX)
        return duro_error_set(err, DURO_STORAGE, 0, "%s %s: corrupt lock row",
                              st->dialect->name, op);
    memcpy(h->instance_id, id, n + 1);
    if (current) {
        h->current = (uint64_t)duro__sql_column_int64(st, s, 2);
        h->exists = duro__sql_column_int(st, s, 3);
        h->has_events = duro__sql_column_int(st, s, 4);
        h->events = (uint64_t)duro__sql_column_int64(st, s, 5);
    }
    duro__sql_reset(st, s);
    if (until <= now)
        return duro__sql_lock_lost(st, op, "the instance lock expired", err);
    return DURO_OK;
}

int duro__sql_abandon_orch(duro__sql_store *st, int64_t ready_id,
                           const char *lock_token, int64_t delay_ms,
                           const char *op, duro_error *err)
{
    return duro__sql_release_orch(st, ready_id, lock_token, delay_ms, 0, op,
                                  err);
}

int duro__sql_release_orch(duro__sql_store *st, int64_t ready_id,
                           const char *lock_token, int64_t delay_ms,
                           int uncount, const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    int rc = duro__sql_write_begin(st, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_lock_holder h;
    rc = duro__sql_hold_lock(st, c, ready_id, lock_token, now, &h, op, err);
    if (rc == DURO_OK) {
        duro__sql_stmt *s = duro__sql_prepare(
            st, c, uncount ? DURO__SQL_OQ_UNTAG_UNCOUNT : DURO__SQL_OQ_UNTAG,
            op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__sql_bind_text(st, c, s, 1, h.instance_id);
            duro__sql_bind_text(st, c, s, 2, lock_token);
            rc = duro__sql_run(st, c, s, op, err);
        }
    }
    if (rc == DURO_OK)
        rc = duro__sql_settle_ready(
            st, c, ready_id, h.instance_id,
            delay_ms > 0 ? duro__sql_after_ms(now, delay_ms) : 0, NULL, op,
            err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    if ((rc = duro__sql_write_commit(st, c, op, err)) != DURO_OK)
        return rc;
    duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* ---- pieces of the fetches' and acks' transactions -------------------- */

int duro__sql_history_room(duro__sql_store *st, duro__sql_conn *c,
                           const char *instance_id, uint64_t current,
                           uint64_t execution_id, const uint64_t *known,
                           size_t delta, uint64_t max_history, const char *op,
                           duro_error *err)
{
    uint64_t stored = 0;
    if (execution_id == current && known != NULL) {
        stored = *known; /* read with the lock */
    } else if (execution_id <= current) {
        duro__sql_stmt *s =
            duro__sql_prepare(st, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, instance_id);
        duro__sql_bind_u64(st, c, s, 2, execution_id);
        int step = duro__sql_step(st, c, s);
        if (step == DURO__SQL_DONE)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "%s %s: execution %" PRIu64
                                  " of instance '%s' does not exist (current "
                                  "is %" PRIu64 ")",
                                  st->dialect->name, op, execution_id,
                                  instance_id, current);
        if (step != DURO__SQL_ROW)
            return duro__sql_error(st, c, step, op, err);
        stored = (uint64_t)duro__sql_column_int64(st, s, 0);
        duro__sql_reset(st, s);
    }
    if (delta > 0 && (stored > max_history || delta > max_history - stored))
        return duro_error_set(err, DURO_HISTORY_LIMIT, 0,
                              "%s %s: instance '%s' execution %" PRIu64
                              " would hold %" PRIu64
                              " events, more than max_history (%" PRIu64 ")",
                              st->dialect->name, op, instance_id, execution_id,
                              stored + (uint64_t)delta, max_history);
    return DURO_OK;
}

int duro__sql_create_execution(duro__sql_store *st, duro__sql_conn *c,
                               const char *instance_id, uint64_t execution_id,
                               const duro_instance_meta *m, int64_t now,
                               const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_EXEC_CREATE, op, err);
    if (s == NULL)
        return err->code;
    int finished = m != NULL && (m->status == DURO_STATUS_CONTINUED_AS_NEW ||
                                 duro_status_is_terminal(m->status));
    duro__sql_bind_text(st, c, s, 1, instance_id);
    duro__sql_bind_u64(st, c, s, 2, execution_id);
    duro__sql_bind_text(st, c, s, 3, m != NULL ? m->name : NULL);
    duro__sql_bind_text(st, c, s, 4, m != NULL ? m->version : NULL);
    duro__sql_bind_i64(st, c, s, 5, now);
    /* the row as write_meta's EXEC_WRITE_META would leave it */
    duro__sql_bind_i64(st, c, s, 6,
                       m != NULL ? m->status : DURO_STATUS_RUNNING);
    duro__sql_bind_text(st, c, s, 7, m != NULL ? m->output : NULL);
    duro__sql_bind_text(st, c, s, 8, m != NULL ? m->error : NULL);
    duro__sql_bind_i64(st, c, s, 9, m != NULL ? m->category : 0);
    if (finished)
        duro__sql_bind_i64(st, c, s, 10, now);
    else
        duro__sql_bind_text(st, c, s, 10, NULL);
    int rc = duro__sql_run(st, c, s, op, err);
    /* with a meta, write_meta makes it the instance's current execution */
    if (rc != DURO_OK || m != NULL)
        return rc;
    s = duro__sql_prepare(st, c, DURO__SQL_INSTANCE_SET_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, instance_id);
    duro__sql_bind_u64(st, c, s, 2, execution_id);
    duro__sql_bind_i64(st, c, s, 3, now);
    return duro__sql_run(st, c, s, op, err);
}

int duro__sql_delete_acked_work(duro__sql_store *st, duro__sql_conn *c,
                                int64_t id, const char *lock_token,
                                const duro_work_item *completion, int64_t now,
                                int *skip, const char *op, duro_error *err)
{
    *skip = 0;
    duro__sql_stmt *s = duro__sql_prepare(st, c, DURO__SQL_WQ_ACK, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_i64(st, c, s, 1, id);
        duro__sql_bind_text(st, c, s, 2, lock_token);
        rc = duro__sql_run(st, c, s, op, err);
    }
    /* No row deleted: the activity was cancelled (row deleted by a turn) or
     * its expired lock was taken by another fetch. Enqueue nothing. */
    if (rc == DURO_OK && duro__sql_changes(st, c) == 0)
        rc = duro__sql_lock_lost(st, op,
                                 "the work item is gone (cancelled or acked) "
                                 "or its lock was taken by another fetch",
                                 err);
    if (rc == DURO_OK && completion != NULL)
        rc = duro__sql_enqueue_in_transaction(st, c, completion, now, now, skip,
                                              op, err);
    return rc;
}

int duro__sql_ack_work_in_transaction(duro__sql_store *st, int64_t id,
                                      const char *lock_token,
                                      const duro_work_item *completion,
                                      int64_t lock_timeout_ms,
                                      duro_worker_item **next, const char *op,
                                      duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    int rc = duro__sql_write_begin(st, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    int skip = 0;
    rc = duro__sql_delete_acked_work(st, c, id, lock_token, completion, now,
                                     &skip, op, err);
    duro_worker_item *w = NULL;
    char hex[33];
    if (next != NULL)
        duro__random_token(hex);
    if (rc == DURO_OK && next != NULL)
        rc = duro__sql_claim_work(st, c, DURO__SQL_WQ_FETCH, hex,
                                  lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(st, c);
        return rc;
    }
    if ((rc = duro__sql_write_commit(st, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        if (next != NULL && st->dialect->claim_lost != NULL)
            st->dialect->claim_lost(st, 'W', hex, rc, err);
        return rc;
    }
    if (completion != NULL && !skip)
        duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

#define FETCH_ATTEMPTS 64 /* readiness repairs per fetch before giving up */

int duro__sql_fetch_turn(duro__sql_store *st, duro__sql_conn *c,
                         duro__sql_claim_fn claim, void *arg,
                         int64_t lock_timeout_ms,
                         const duro_history_cache *cache, int64_t now,
                         duro_orch_item **out, const char *op, duro_error *err)
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
    /* `now` decides what is visible: nothing that became fetchable while
     * the caller waited. The lock runs from this moment, so a wait never
     * shortens it. */
    int64_t until = duro__sql_after_ms(duro__wall_ms(), lock_timeout_ms);
    int rc = DURO_OK;
    int found = 0;
    for (int attempt = 0; rc == DURO_OK && !found && attempt < FETCH_ATTEMPTS;
         attempt++) {
        int repair = 0;
        int64_t ready_id = 0;
        rc = claim(st, c, arg, item, now, until, cache, &found, &repair,
                   &ready_id, op, err);
        if (rc != DURO_OK || found)
            break;
        if (!repair)
            break; /* nothing is ready */
        /* Ready but nothing visible (an expired lock over delayed
         * messages): repair its readiness and look again. */
        rc = duro__sql_settle_ready(st, c, ready_id, item->instance_id, 0, NULL,
                                    op, err);
    }
    if (rc != DURO_OK || !found) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

int duro__sql_finish_turns(duro__sql_store *st, duro__sql_conn *c, int rc,
                           const char *claim_hex, duro_orch_item **next,
                           size_t got, size_t workers, size_t outbound,
                           const char *op, duro_error *err)
{
    if (rc == DURO_OK) {
        rc = duro__sql_write_commit(st, c, op, err);
        if (rc != DURO_OK && claim_hex != NULL &&
            st->dialect->claim_lost != NULL)
            st->dialect->claim_lost(st, 'O', claim_hex, rc, err);
    } else {
        duro__sql_write_rollback(st, c);
    }
    if (rc != DURO_OK) {
        for (size_t i = 0; i < got; i++) {
            duro_orch_item_free(next[i]);
            next[i] = NULL;
        }
        return rc;
    }
    duro__sql_signal(st, DURO_QUEUE_WORKER, workers);
    duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, outbound);
    return DURO_OK;
}

/* ---- the ack of one turn ------------------------------------------------ */

uint64_t duro__sql_item_execution(const duro_work_item *it,
                                  const char *instance_id,
                                  uint64_t execution_id)
{
    if (it->execution_id == 0 && strcmp(it->instance_id, instance_id) == 0)
        return execution_id;
    return it->execution_id;
}

int duro__sql_check_turn(const duro__sql_store *st,
                         const duro__sql_lock_holder *h,
                         const duro_orch_ack *ack, uint64_t *execution_id,
                         const char *op, duro_error *err)
{
    *execution_id = ack->execution_id != 0 ? ack->execution_id : h->current;
    int writes_instance = ack->history_delta_count > 0 || ack->meta != NULL;
    if (writes_instance && !h->exists)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "%s %s: instance '%s' does not exist; only "
                              "an ack without history and meta may consume "
                              "its messages",
                              st->dialect->name, op, h->instance_id);
    if (writes_instance && *execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: ack for instance '%s' writes "
                              "history or meta but names no execution",
                              st->dialect->name, op, h->instance_id);
    return DURO_OK;
}

/* A turn's history: room for it, its new execution, its events. */
static int write_history(duro__sql_store *st, duro__sql_conn *c,
                         const duro__sql_lock_holder *h, uint64_t execution_id,
                         const duro_orch_ack *ack, int64_t now, const char *op,
                         duro_error *err)
{
    const char *instance_id = h->instance_id;
    int rc = duro__sql_history_room(
        st, c, instance_id, h->current, execution_id,
        h->has_events ? &h->events : NULL, ack->history_delta_count,
        st->max_history, op, err);
    if (rc == DURO_OK && execution_id > h->current)
        rc = duro__sql_create_execution(st, c, instance_id, execution_id,
                                        ack->meta, now, op, err);
    if (rc == DURO_OK && st->dialect->insert_events != NULL)
        return st->dialect->insert_events(st, c, instance_id, execution_id,
                                          ack->history_delta,
                                          ack->history_delta_count, op, err);
    for (size_t i = 0; i < ack->history_delta_count && rc == DURO_OK; i++)
        rc = duro__sql_insert_history(st, c, instance_id, execution_id,
                                      &ack->history_delta[i], op, err);
    return rc;
}

/* A turn's writes, in their order: history, work items, cancellations,
 * outbound messages, metadata and, when it ended, the messages nothing will
 * read. */
static int write_turn(duro__sql_store *st, duro__sql_conn *c,
                      const duro__sql_lock_holder *h, const duro_orch_ack *ack,
                      int64_t now, const char *op, duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t execution_id;
    int rc = duro__sql_check_turn(st, h, ack, &execution_id, op, err);
    if (rc != DURO_OK)
        return rc;
    if ((ack->history_delta_count > 0 || ack->meta != NULL) &&
        (rc = write_history(st, c, h, execution_id, ack, now, op, err)) !=
            DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++) {
        const duro_work_item *it = &ack->worker_items[i];
        uint64_t exec = duro__sql_item_execution(it, instance_id, execution_id);
        if ((rc = duro__sql_insert_work(st, c, it, exec, now, op, err)) !=
            DURO_OK)
            return rc;
    }
    rc = duro__sql_cancel_activities(st, c, instance_id, execution_id,
                                     ack->cancelled_activities,
                                     ack->cancelled_activity_count, op, err);
    if (rc != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = duro__sql_enqueue_outbound(st, c, &ack->orchestrator_items[i],
                                             now, op, err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL &&
        (rc = duro__sql_write_meta(st, c, instance_id, execution_id,
                                   execution_id > h->current, ack->meta, now,
                                   op, err)) != DURO_OK)
        return rc;
    if (ack->meta != NULL && (rc = duro__sql_drop_dead_messages(
                                  st, c, instance_id, execution_id,
                                  ack->meta->status, op, err)) != DURO_OK)
        return rc;
    return DURO_OK;
}

int duro__sql_ack_turn(duro__sql_store *st, duro__sql_conn *c, int64_t ready_id,
                       const char *token, const duro_orch_ack *ack, int64_t now,
                       int *queued, const char *op, duro_error *err)
{
    duro__sql_lock_holder h;
    memset(&h, 0, sizeof(h));
    int rc = duro__sql_hold_lock(st, c, ready_id, token, now, &h, op, err);
    /* a holder that does not read the instance's execution: one statement
     * more */
    if (rc == DURO_OK && !st->dialect->has(DURO__SQL_READY_HOLDER_CURRENT))
        rc = duro__sql_current_execution(st, c, h.instance_id, &h.exists,
                                         &h.current, op, err);
    if (rc == DURO_OK && st->dialect->turn_locked != NULL)
        st->dialect->turn_locked(st); /* a test's hook */
    if (rc == DURO_OK)
        rc = write_turn(st, c, &h, ack, now, op, err);
    if (rc != DURO_OK)
        return rc;
    /* the consumed messages go, and the lock is released: in one statement
     * where the dialect has it */
    if (st->dialect->has(DURO__SQL_READY_ACK_SETTLE)) {
        duro__sql_stmt *s =
            duro__sql_prepare(st, c, DURO__SQL_READY_ACK_SETTLE, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, h.instance_id);
        duro__sql_bind_text(st, c, s, 2, token);
        duro__sql_bind_i64(st, c, s, 3, ready_id);
        int step = duro__sql_step(st, c, s);
        if (step != DURO__SQL_ROW)
            return duro__sql_error(st, c, step, op, err);
        *queued = !duro__sql_column_null(st, s, 0);
        duro__sql_reset(st, s);
        return DURO_OK;
    }
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_OQ_DELETE_TAGGED, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, h.instance_id);
    duro__sql_bind_text(st, c, s, 2, token);
    if ((rc = duro__sql_run(st, c, s, op, err)) != DURO_OK)
        return rc;
    return duro__sql_settle_ready(st, c, ready_id, h.instance_id, 0, queued, op,
                                  err);
}

/* ---- the methods of the acks and abandons ------------------------------- */

/* The checks of n acks and their tokens, before any transaction. */
static int check_turns(duro__sql_store *st, size_t n,
                       const char *const *lock_tokens,
                       const duro_orch_ack *acks, const char *op,
                       duro_error *err)
{
    if (n > 0 && acks == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "ack is NULL");
    int rc = DURO_OK;
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        rc = duro__sql_check_token(lock_tokens[i], err);
        if (rc == DURO_OK)
            rc = duro__sql_check_ack(st, &acks[i], err);
    }
    if (rc != DURO_OK)
        return rc;
    int64_t ready_id;
    for (size_t i = 0; i < n; i++)
        if (duro__sql_parse_token(lock_tokens[i], 'o', &ready_id) != 0)
            return duro__sql_lock_lost(
                st, op, "not an orchestration lock token of this store", err);
    return DURO_OK;
}

/* The dialect's ack_turns, its fetches (if any) noted first: a commit
 * from now on ends the thread's next wait. */
static int dialect_turns(duro_provider *base, const duro__sql_turns *t,
                         duro_error *err)
{
    duro__sql_store *st = duro__sql_of(base);
    if (t->max_next > 0)
        duro__sql_note_fetch(st, DURO_QUEUE_ORCHESTRATOR);
    return st->dialect->ack_turns(base, t, err);
}

/* The acks of n items, then up to max_next fetches, in one transaction
 * (ack_orchestration_item: n 1, max_next 0; ack_and_fetch_orchestration_item:
 * n 1, max_next 1; ack_and_fetch_orchestration_items: any). */
static int ack_turns(duro_provider *base, size_t n,
                     const char *const *lock_tokens, const duro_orch_ack *acks,
                     int64_t lock_timeout_ms, const duro_history_cache *cache,
                     size_t max_next, duro_orch_item **next, size_t *next_count,
                     const char *op, duro_error *err)
{
    duro__sql_store *st = duro__sql_of(base);
    *next_count = 0;
    int rc = check_turns(st, n, lock_tokens, acks, op, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_turns t = {n,     lock_tokens, acks, lock_timeout_ms,
                         cache, max_next,    next, next_count,
                         op};
    return dialect_turns(base, &t, err);
}

int duro__sql_ack_orchestration_item(duro_provider *base,
                                     const char *lock_token,
                                     const duro_orch_ack *ack, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    size_t none;
    return ack_turns(base, 1, &lock_token, ack, 0, NULL, 0, NULL, &none,
                     "ack_orchestration_item", err);
}

int duro__sql_ack_and_fetch_orchestration_item(
    duro_provider *base, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    *next = NULL;
    size_t got;
    return ack_turns(base, 1, &lock_token, ack, lock_timeout_ms, cache, 1, next,
                     &got, "ack_and_fetch_orchestration_item", err);
}

int duro__sql_ack_and_fetch_orchestration_items(
    duro_provider *base, size_t n, const char *const *lock_tokens,
    const duro_orch_ack *acks, int64_t lock_timeout_ms,
    const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
    size_t *next_count, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    int rc = duro__check_batch_args(n, lock_tokens, acks, max_next, next,
                                    next_count, err);
    if (rc != DURO_OK)
        return rc;
    return ack_turns(base, n, lock_tokens, acks, lock_timeout_ms, cache,
                     max_next, next, next_count,
                     "ack_and_fetch_orchestration_items", err);
}

/* ack_work_item, and with `next` the fetch of the next item in the same
 * transaction (ack_and_fetch_work_item): the checks, then the dialect's. */
static int ack_work(duro_provider *base, const char *lock_token,
                    const duro_work_item *completion, int64_t lock_timeout_ms,
                    duro_worker_item **next, const char *op, duro_error *err)
{
    duro__sql_store *st = duro__sql_of(base);
    int64_t id;
    if (next != NULL)
        *next = NULL;
    int rc = duro__sql_check_token(lock_token, err);
    if (rc == DURO_OK && completion != NULL)
        rc = duro__sql_check_work_item(st, completion, 0, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_parse_token(lock_token, 'w', &id) != 0)
        return duro__sql_lock_lost(
            st, op, "not a work item lock token of this store", err);
    return st->dialect->ack_work(base, id, lock_token, completion,
                                 lock_timeout_ms, next, op, err);
}

int duro__sql_ack_work_item(duro_provider *base, const char *lock_token,
                            const duro_work_item *completion, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    return ack_work(base, lock_token, completion, 0, NULL, "ack_work_item",
                    err);
}

int duro__sql_ack_and_fetch_work_item(duro_provider *base,
                                      const char *lock_token,
                                      const duro_work_item *completion,
                                      int64_t lock_timeout_ms,
                                      duro_worker_item **next, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    return ack_work(base, lock_token, completion, lock_timeout_ms, next,
                    "ack_and_fetch_work_item", err);
}

int duro__sql_abandon_work_item(duro_provider *base, const char *lock_token,
                                int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_work_item";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int64_t id;
    int rc = duro__sql_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_parse_token(lock_token, 'w', &id) != 0)
        return duro__sql_lock_lost(
            st, op, "not a work item lock token of this store", err);
    rc = duro__sql_update_work_row(st, DURO__SQL_WQ_ABANDON, id, lock_token,
                                   delay_ms, 0, op, err);
    if (rc == DURO_OK)
        duro__sql_signal(st, DURO_QUEUE_WORKER, 1);
    /* the caller lets the token go either way: where the store can, it is
     * abandoned again later */
    if (rc != DURO_OK && err->retryable && st->dialect->abandon_failed != NULL)
        st->dialect->abandon_failed(st, 'w', lock_token, delay_ms);
    return rc;
}

/* abandon_orchestration_item, and (uncount) pass_orchestration_item. */
static int release_orchestration_item(duro_provider *base,
                                      const char *lock_token, int64_t delay_ms,
                                      int uncount, const char *op,
                                      duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int64_t ready_id;
    int rc = duro__sql_check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_parse_token(lock_token, 'o', &ready_id) != 0)
        return duro__sql_lock_lost(
            st, op, "not an orchestration lock token of this store", err);
    rc = duro__sql_release_orch(st, ready_id, lock_token, delay_ms, uncount, op,
                                err);
    /* The caller lets the token go either way: when the store could not be
     * reached (or waited for), a store that can abandons it again later
     * (a pass then counts: the fetch count is a bound, not a ledger). */
    if (rc != DURO_OK && err->retryable && st->dialect->abandon_failed != NULL)
        st->dialect->abandon_failed(st, 'o', lock_token, delay_ms);
    return rc;
}

int duro__sql_abandon_orchestration_item(duro_provider *base,
                                         const char *lock_token,
                                         int64_t delay_ms, duro_error *err)
{
    return release_orchestration_item(base, lock_token, delay_ms, 0,
                                      "abandon_orchestration_item", err);
}

int duro__sql_pass_orchestration_item(duro_provider *base,
                                      const char *lock_token, int64_t delay_ms,
                                      duro_error *err)
{
    return release_orchestration_item(base, lock_token, delay_ms, 1,
                                      "pass_orchestration_item", err);
}

/* A fetch is an ack of no turns with one fetch (the same transaction). */
int duro__sql_fetch_orchestration_item(duro_provider *base,
                                       int64_t lock_timeout_ms,
                                       const duro_history_cache *cache,
                                       duro_orch_item **out, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    size_t got;
    duro__sql_turns t = {0, NULL, NULL, lock_timeout_ms,           cache,
                         1, out,  &got, "fetch_orchestration_item"};
    return dialect_turns(base, &t, err);
}

int duro__sql_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                              duro_worker_item **out, duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    return duro__sql_of(base)->dialect->fetch_work(base, lock_timeout_ms, out,
                                                   "fetch_work_item", err);
}

/* One primary-key probe per token on a reader (in one snapshot where the
 * dialect reads so); no write. */
int duro__sql_check_work_item_locks(duro_provider *base,
                                    const char *const *lock_tokens,
                                    size_t count, unsigned char *held,
                                    duro_error *err)
{
    static const char op[] = "check_work_item_locks";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
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
    duro__sql_store *st = duro__sql_of(base);
    duro__sql_conn *c = duro__sql_reader_acquire(st);
    int rc = st->dialect->reader_snapshot
                 ? duro__sql_exec(st, c, DURO__SQL_BEGIN_READ, op, err)
                 : DURO_OK;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (duro__sql_parse_token(lock_tokens[i], 'w', &id) != 0)
            continue;
        duro__sql_stmt *s =
            duro__sql_prepare(st, c, DURO__SQL_WQ_HELD, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sql_bind_i64(st, c, s, 1, id);
        duro__sql_bind_text(st, c, s, 2, lock_tokens[i]);
        int step = duro__sql_step(st, c, s);
        if (step == DURO__SQL_ROW)
            held[i] = 1;
        else if (step != DURO__SQL_DONE)
            rc = duro__sql_error(st, c, step, op, err);
        duro__sql_reset(st, s);
    }
    duro__sql_reader_release(st, c);
    return rc;
}
