/* pg_ack.c - the writes of the orchestrator queue inside an open write
 * transaction: a turn's ack (its events, work items, cancellations,
 * outbound messages and metadata, written at once or gathered into the
 * statements a batch of turns shares) and an enqueued message; and the
 * input checks of what they write. Any thread (a connection is its
 * caller's). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- input checks ------------------------------------------------------ */

int duro__pg_check_work_item(const duro__pg_provider *p,
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
    if ((rc = duro__pg_check_id("instance id", it->instance_id, err)) ||
        (rc = duro__pg_check_name("name", it->name, name_required, err)) ||
        (rc = duro__pg_check_name("version", it->version, 0, err)) ||
        (rc = duro__pg_check_name("reason", it->reason, 0, err)) ||
        (rc = duro__pg_check_name("requested_by", it->requested_by, 0, err)) ||
        (rc = duro__pg_check_name("parent instance", it->parent_instance, 0,
                                  err)) ||
        (rc = duro__pg_check_name("event id", it->event_id, 0, err)) ||
        (rc = duro__pg_check_payload(p, "payload", it->payload, err)) ||
        (rc = duro__pg_check_payload(p, "error", it->error, err)))
        return rc;
    return DURO_OK;
}

static int check_event(const duro__pg_provider *p, const duro_event *ev,
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
    if ((rc = duro__pg_check_name("event name", ev->name, 0, err)) ||
        (rc = duro__pg_check_name("event version", ev->version, 0, err)) ||
        (rc = duro__pg_check_name("event reason", ev->reason, 0, err)) ||
        (rc = duro__pg_check_name("event requested_by", ev->requested_by, 0,
                                  err)) ||
        (rc = duro__pg_check_name("event ref_instance", ev->ref_instance, 0,
                                  err)) ||
        (rc = duro__pg_check_payload(p, "event payload", ev->payload, err)) ||
        (rc = duro__pg_check_payload(p, "event error", ev->error, err)))
        return rc;
    return DURO_OK;
}

static int check_meta(const duro__pg_provider *p, const duro_instance_meta *m,
                      duro_error *err)
{
    if (m->status < DURO_STATUS_PENDING || m->status > DURO_STATUS_TERMINATED)
        return duro_error_set(err, DURO_INVALID, 0,
                              "meta status %d is not a stored status",
                              m->status);
    int rc;
    if ((rc = duro__pg_check_name("meta name", m->name, 0, err)) ||
        (rc = duro__pg_check_name("meta version", m->version, 0, err)) ||
        (rc = duro__pg_check_name("meta parent instance", m->parent_instance, 0,
                                  err)) ||
        (rc = duro__pg_check_payload(p, "output", m->output, err)) ||
        (rc = duro__pg_check_payload(p, "error", m->error, err)) ||
        (rc = duro__pg_check_payload(p, "problem", m->problem, err)) ||
        (rc = duro__pg_check_payload(
             p, "custom status", m->custom_status_set ? m->custom_status : NULL,
             err)))
        return rc;
    return DURO_OK;
}

int duro__pg_check_ack(const duro__pg_provider *p, const duro_orch_ack *ack,
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
        if ((rc = check_event(p, &ack->history_delta[i], err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++)
        if ((rc = duro__pg_check_work_item(p, &ack->worker_items[i], 1, err)) !=
            DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = duro__pg_check_work_item(p, &ack->orchestrator_items[i].item,
                                           0, err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->cancelled_activity_count; i++)
        if ((rc = duro__pg_check_id("cancelled activity instance id",
                                    ack->cancelled_activities[i].instance_id,
                                    err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL)
        return check_meta(p, ack->meta, err);
    return DURO_OK;
}

/* Creates the Pending instance row of a START; *created = 0 when it exists.
 */
static int create_instance(duro__pg_provider *p, duro__pg_conn *c,
                           const duro_work_item *it, int64_t now, int *created,
                           const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_CREATE, op, err);
    if (s == NULL)
        return err->code;
    const char *parent = duro__pg_nonempty(it->parent_instance);
    duro__pg_bind_text(c, s, 1, it->instance_id);
    duro__pg_bind_text(c, s, 2, it->name);
    duro__pg_bind_text(c, s, 3, it->version);
    duro__pg_bind_i64(c, s, 4, now);
    duro__pg_bind_text(c, s, 5, parent);
    duro__pg_bind_u64(c, s, 6, parent != NULL ? it->parent_execution : 0);
    duro__pg_bind_u64(c, s, 7, parent != NULL ? it->parent_event_id : 0);
    int rc = duro__pg_run(p, c, s, op, err);
    if (rc == DURO_OK)
        *created = duro__pg_changes(c) > 0;
    return rc;
}

/* Inserts one orchestrator message and makes its instance ready by
 * visible_at (unless the instance is locked: its release recomputes). */
/* Binds $1..$19, $24 and $25 of OQ_INSERT (and of the WQ_ACK_COMPLETE
 * statements): the message, enqueued at `now`, visible from visible_at. */
void duro__pg_bind_message(duro__pg_conn *c, duro__pg_statement *s,
                           const duro_work_item *it, int64_t now,
                           int64_t visible_at)
{
    duro__pg_bind_i64(c, s, 1, (int64_t)it->kind);
    duro__pg_bind_text(c, s, 2, it->instance_id);
    duro__pg_bind_u64(c, s, 3, it->execution_id);
    duro__pg_bind_u64(c, s, 4, it->source_id);
    duro__pg_bind_text(c, s, 5, it->name);
    duro__pg_bind_text(c, s, 6, it->version);
    duro__pg_bind_text(c, s, 7, it->payload);
    duro__pg_bind_text(c, s, 8, it->error);
    duro__pg_bind_i64(c, s, 9, it->category);
    duro__pg_bind_text(c, s, 10, it->reason);
    duro__pg_bind_text(c, s, 11, it->requested_by);
    duro__pg_bind_text(c, s, 12, duro__pg_nonempty(it->parent_instance));
    duro__pg_bind_u64(c, s, 13, it->parent_execution);
    duro__pg_bind_u64(c, s, 14, it->parent_event_id);
    duro__pg_bind_i64(c, s, 15, it->fire_at_ms);
    duro__pg_bind_i64(c, s, 16, it->attempt);
    duro__pg_bind_i64(c, s, 17, it->flags);
    duro__pg_bind_i64(c, s, 18, now);
    duro__pg_bind_i64(c, s, 19, visible_at);
    duro__pg_bind_i64(c, s, 24, it->started_ms);
    duro__pg_bind_i64(c, s, 25, it->finished_ms);
}

static int insert_message(duro__pg_provider *p, duro__pg_conn *c,
                          const duro_work_item *it, int64_t now,
                          int64_t visible_at, const char *op, duro_error *err)
{
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_OQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_message(c, s, it, now, visible_at);
    int rc = duro__pg_run(p, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (it->kind == DURO_WORK_CANCEL_INSTANCE) {
        /* The first request on a live instance is what status shows and
         * what the turn records (provider.h, version 4). */
        s = duro__pg_stmt(p, c, DURO__SQL_INSTANCE_CANCEL_REQUEST, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_text(c, s, 1, it->instance_id);
        duro__pg_bind_i64(c, s, 2, now);
        duro__pg_bind_text(c, s, 3, it->reason);
        duro__pg_bind_text(c, s, 4, it->requested_by);
        if ((rc = duro__pg_run(p, c, s, op, err)) != DURO_OK)
            return rc;
    }
    s = duro__pg_stmt(p, c, DURO__SQL_READY_ENQUEUE, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, it->instance_id);
    duro__pg_bind_i64(c, s, 2, visible_at);
    duro__pg_bind_text(c, s, 3, DURO__STOPS_INSTANCE(it->kind) ? "t" : "f");
    return duro__pg_run(p, c, s, op, err);
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
static int current_execution(duro__pg_provider *p, duro__pg_conn *c,
                             const char *instance_id, int *exists,
                             uint64_t *execution_id, const char *op,
                             duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    int rc = duro__pg_step(p, c, s);
    *exists = rc == DURO__PG_ROW;
    *execution_id = 0;
    if (rc == DURO__PG_ROW)
        *execution_id = (uint64_t)duro__pg_column_int64(s, 0);
    else if (rc != DURO__PG_DONE)
        return duro__pg_error(c, rc, op, err);
    duro__pg_reset(s);
    return DURO_OK;
}

/* Deletes the worker rows of cancelled activities: one DELETE per
 * (instance, execution) group, its activity ids passed as one bigint[]
 * literal and matched through the worker_queue_activity index. */
static int cancel_activities(duro__pg_provider *p, duro__pg_conn *c,
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
            rc = current_execution(p, c, refs[i].instance_id, &exists,
                                   &sorted[i].execution_id, op, err);
        }
    }
    if (rc != DURO_OK)
        goto done;
    qsort(sorted, count, sizeof(*sorted), compare_cancel_refs);
    for (size_t start = 0; start < count && rc == DURO_OK;) {
        size_t end = start, used = 0;
        json[used++] = '{';
        while (end < count &&
               compare_cancel_refs(&sorted[start], &sorted[end]) == 0) {
            used +=
                (size_t)sprintf(json + used, "%s%lld", end > start ? "," : "",
                                (long long)sorted[end].activity_id);
            end++;
        }
        json[used++] = '}';
        json[used] = '\0';
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_WQ_CANCEL, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__pg_bind_text(c, s, 1, sorted[start].instance_id);
        duro__pg_bind_u64(c, s, 2, sorted[start].execution_id);
        duro__pg_bind_text(c, s, 3, json);
        rc = duro__pg_run(p, c, s, op, err);
        duro__pg_reset(s);

        start = end;
    }
done:
    duro__free(sorted);
    duro__free(json);
    return rc;
}

static int insert_history(duro__pg_provider *p, duro__pg_conn *c,
                          const char *instance_id, uint64_t execution_id,
                          const duro_event *ev, const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_HISTORY_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    duro__pg_bind_u64(c, s, 2, execution_id);
    duro__pg_bind_u64(c, s, 3, ev->event_id);
    duro__pg_bind_i64(c, s, 4, (int64_t)ev->kind);
    duro__pg_bind_u64(c, s, 5, ev->source_event_id);
    duro__pg_bind_i64(c, s, 6, ev->timestamp_ms);
    duro__pg_bind_text(c, s, 7, ev->name);
    duro__pg_bind_text(c, s, 8, ev->version);
    duro__pg_bind_text(c, s, 9, ev->payload);
    duro__pg_bind_text(c, s, 10, ev->error);
    duro__pg_bind_i64(c, s, 11, ev->category);
    duro__pg_bind_text(c, s, 12, ev->reason);
    duro__pg_bind_text(c, s, 13, ev->requested_by);
    duro__pg_bind_text(c, s, 14, ev->ref_instance);
    duro__pg_bind_u64(c, s, 15, ev->ref_execution);
    duro__pg_bind_u64(c, s, 16, ev->ref_event_id);
    duro__pg_bind_i64(c, s, 17, ev->fire_at_ms);
    duro__pg_bind_i64(c, s, 18, ev->attempt);
    duro__pg_bind_i64(c, s, 19, ev->flags);
    duro__pg_bind_i64(c, s, 20, ev->started_ms);
    duro__pg_bind_i64(c, s, 21, ev->finished_ms);
    int rc = duro__pg_step(p, c, s);
    if (rc == DURO__PG_UNIQUE)
        return duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                              "postgres %s: history event %" PRIu64
                              " of instance '%s' execution %" PRIu64
                              " already exists (duplicate event id)",
                              op, ev->event_id, instance_id, execution_id);
    if (rc != DURO__PG_DONE)
        return duro__pg_error(c, rc, op, err);
    return DURO_OK;
}

/* The events of a turn in one statement (one event: HISTORY_INSERT). */
static int insert_events(duro__pg_provider *p, duro__pg_conn *c,
                         const char *instance_id, uint64_t execution_id,
                         const duro_event *events, size_t count, const char *op,
                         duro_error *err)
{
    if (count == 0)
        return DURO_OK;
    if (count == 1)
        return insert_history(p, c, instance_id, execution_id, events, op, err);
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

static int insert_work(duro__pg_provider *p, duro__pg_conn *c,
                       const duro_work_item *it, uint64_t execution_id,
                       int64_t now, const char *op, duro_error *err)
{
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_WQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, it->instance_id);
    duro__pg_bind_u64(c, s, 2, execution_id);
    duro__pg_bind_u64(c, s, 3, it->source_id);
    duro__pg_bind_text(c, s, 4, it->name);
    duro__pg_bind_text(c, s, 5, it->version);
    duro__pg_bind_text(c, s, 6, it->payload);
    duro__pg_bind_i64(c, s, 7, it->attempt);
    duro__pg_bind_i64(c, s, 8, now);
    return duro__pg_run(p, c, s, op, err);
}

/* Step 5 of an ack: orchestrator items, START items creating instances. */
static int enqueue_outbound(duro__pg_provider *p, duro__pg_conn *c,
                            const duro_outbound *out, int64_t now,
                            const char *op, duro_error *err)
{
    const duro_work_item *it = &out->item;
    int64_t visible_at = duro__pg_after_ms(now, out->delay_ms);
    if (it->kind != DURO_WORK_START)
        return insert_message(p, c, it, now, visible_at, op, err);
    int created = 0;
    int rc = create_instance(p, c, it, now, &created, op, err);
    if (rc != DURO_OK || created)
        return rc != DURO_OK
                   ? rc
                   : insert_message(p, c, it, now, visible_at, op, err);
    /* The child exists already: drop the START; an attached child's parent
     * learns it through a failure of its scheduling event. */
    const char *parent = duro__pg_nonempty(it->parent_instance);
    if (parent == NULL || (it->flags & DURO_START_DETACHED) != 0)
        return DURO_OK;
    /* The text starts with the code's name so tools can match on it. */
    char message[DURO__PG_NAME_MAX + 96];
    snprintf(message, sizeof(message),
             "%s: cannot start sub-orchestration: instance '%s' already exists",
             duro_errname(DURO_ALREADY_EXISTS), it->instance_id);
    duro_work_item failed = {.kind = DURO_WORK_CHILD_FAILED,
                             .instance_id = parent,
                             .execution_id = it->parent_execution,
                             .source_id = it->parent_event_id,
                             .error = message,
                             .category = DURO_CATEGORY_CONFIGURATION};
    return insert_message(p, c, &failed, now, visible_at, op, err);
}

/* Step 6 of an ack: meta on the instance row and the acked execution's row.
 */
static int write_meta(duro__pg_provider *p, duro__pg_conn *c,
                      const char *instance_id, uint64_t execution_id,
                      const duro_instance_meta *m, int64_t now, const char *op,
                      duro_error *err)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = duro__pg_nonempty(m->parent_instance);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    /* A continued-as-new instance runs on in its next execution. */
    duro__pg_bind_i64(c, s, 2, continued ? DURO_STATUS_RUNNING : m->status);
    duro__pg_bind_text(c, s, 3, m->name);
    duro__pg_bind_text(c, s, 4, m->version);
    duro__pg_bind_text(c, s, 5, continued ? NULL : m->output);
    duro__pg_bind_text(c, s, 6, m->error);
    duro__pg_bind_i64(c, s, 7, m->category);
    duro__pg_bind_i64(c, s, 8, m->custom_status_set != 0);
    duro__pg_bind_text(c, s, 9, m->custom_status);
    duro__pg_bind_text(c, s, 10, parent);
    duro__pg_bind_u64(c, s, 11, m->parent_execution);
    duro__pg_bind_u64(c, s, 12, m->parent_event_id);
    duro__pg_bind_i64(c, s, 13, now);
    /* An ending (continue-as-new too) replaces the problem with
     * m->problem, clearing it when NULL; otherwise only a problem given
     * is written. */
    duro__pg_bind_i64(c, s, 14, finished || m->problem != NULL);
    duro__pg_bind_text(c, s, 15, m->problem);
    int rc = duro__pg_run(p, c, s, op, err);
    if (rc != DURO_OK || execution_id == 0)
        return rc;
    s = duro__pg_stmt(p, c, DURO__SQL_EXEC_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    duro__pg_bind_u64(c, s, 2, execution_id);
    duro__pg_bind_i64(c, s, 3, m->status);
    duro__pg_bind_text(c, s, 4, m->name);
    duro__pg_bind_text(c, s, 5, m->version);
    duro__pg_bind_text(c, s, 6, m->output);
    duro__pg_bind_text(c, s, 7, m->error);
    duro__pg_bind_i64(c, s, 8, m->category);
    if (finished)
        duro__pg_bind_i64(c, s, 9, now);
    else
        duro__pg_bind_text(c, s, 9, NULL);
    return duro__pg_run(p, c, s, op, err);
}

/* Step 7 of an ack: queues hold only live work. An instance that ended
 * would only drop what is still queued for it (a losing timer due in 30
 * days, a delayed START of an instance cancelled before it began), so all
 * of it goes, set-based through orchestrator_queue_instance; after a
 * continue-as-new only what names the ended execution goes. The readiness
 * row is recomputed from what remains when the lock is released. */
static int drop_dead_messages(duro__pg_provider *p, duro__pg_conn *c,
                              const char *instance_id, uint64_t execution_id,
                              int status, const char *op, duro_error *err)
{
    int continued = status == DURO_STATUS_CONTINUED_AS_NEW;
    if (!continued && !duro_status_is_terminal(status))
        return DURO_OK;
    duro__pg_statement *s =
        duro__pg_stmt(p, c,
                      continued ? DURO__SQL_OQ_DELETE_EXECUTION
                                : DURO__SQL_OQ_DELETE_INSTANCE,
                      op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    if (continued)
        duro__pg_bind_u64(c, s, 2, execution_id);
    return duro__pg_run(p, c, s, op, err);
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
    if (b->events > 0) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_HISTORY_INSERT_BATCH, op, err);
        if (s == NULL)
            return err->code;
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
    if (rc == DURO_OK && b->works > 0) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_WQ_INSERT_MANY, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_i64(c, s, 8, now);
        int step =
            duro__pg_run_cols(p, c, s, b->wq, DURO__PG_BATCH_WORK_COLUMNS);
        if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    return rc;
}

static int append_history(duro__pg_provider *p, duro__pg_conn *c,
                          const duro__pg_lock_holder *h, uint64_t execution_id,
                          const duro_orch_ack *ack, int64_t now,
                          duro__pg_batch_cols *b, const char *op,
                          duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t current = h->current;
    uint64_t stored = 0;
    int is_new = execution_id > current;
    int rc;
    if (execution_id == current && h->has_events) {
        stored = h->events; /* read with the lock */
    } else if (!is_new) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_u64(c, s, 2, execution_id);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_DONE)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "postgres %s: execution %" PRIu64
                                  " of instance '%s' does not exist (current "
                                  "is %" PRIu64 ")",
                                  op, execution_id, instance_id, current);
        if (step != DURO__PG_ROW)
            return duro__pg_error(c, step, op, err);
        stored = (uint64_t)duro__pg_column_int64(s, 0);
        duro__pg_reset(s);
    }
    uint64_t delta = ack->history_delta_count;
    if (delta > 0 &&
        (stored > p->cfg.max_history || delta > p->cfg.max_history - stored))
        return duro_error_set(err, DURO_HISTORY_LIMIT, 0,
                              "postgres %s: instance '%s' execution %" PRIu64
                              " would hold %" PRIu64
                              " events, more than max_history (%" PRIu64 ")",
                              op, instance_id, execution_id, stored + delta,
                              p->cfg.max_history);
    if (is_new && b != NULL) {
        const duro_instance_meta *m = ack->meta;
        duro__pg_col_text(&b->ex[0], instance_id);
        duro__pg_col_num(&b->ex[1], (int64_t)execution_id);
        duro__pg_col_text(&b->ex[2], m != NULL ? m->name : NULL);
        duro__pg_col_text(&b->ex[3], m != NULL ? m->version : NULL);
        b->execs++;
    } else if (is_new) {
        const duro_instance_meta *m = ack->meta;
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_EXEC_CREATE, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_u64(c, s, 2, execution_id);
        duro__pg_bind_text(c, s, 3, m != NULL ? m->name : NULL);
        duro__pg_bind_text(c, s, 4, m != NULL ? m->version : NULL);
        duro__pg_bind_i64(c, s, 5, now);
        if ((rc = duro__pg_run(p, c, s, op, err)) != DURO_OK)
            return rc;
        s = duro__pg_stmt(p, c, DURO__SQL_INSTANCE_SET_CURRENT, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_u64(c, s, 2, execution_id);
        duro__pg_bind_i64(c, s, 3, now);
        if ((rc = duro__pg_run(p, c, s, op, err)) != DURO_OK)
            return rc;
    }
    if (b == NULL)
        return insert_events(p, c, instance_id, execution_id,
                             ack->history_delta, ack->history_delta_count, op,
                             err);
    for (size_t i = 0; i < ack->history_delta_count; i++) {
        duro__pg_col_text(&b->ev[0], instance_id);
        duro__pg_col_num(&b->ev[1], (int64_t)execution_id);
        duro__pg_append_event_columns(&b->ev[2], &ack->history_delta[i]);
        b->events++;
    }
    return DURO_OK;
}

/* The first writes of an ack whose lock h holds: checks, the execution of
 * a continue-as-new, the events and the work items - written at once, or
 * with b gathered into the batch's shared statements. */
int duro__pg_ack_first_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__pg_lock_holder *h,
                              const duro_orch_ack *ack, int64_t now,
                              duro__pg_batch_cols *b, const char *op,
                              duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t execution_id =
        ack->execution_id != 0 ? ack->execution_id : h->current;
    int writes_instance = ack->history_delta_count > 0 || ack->meta != NULL;
    int rc;
    if (writes_instance && !h->exists)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "postgres %s: instance '%s' does not exist; only "
                              "an ack without history and meta may consume "
                              "its messages",
                              op, instance_id);
    if (writes_instance && execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "postgres %s: ack for instance '%s' writes "
                              "history or meta but names no execution",
                              op, instance_id);
    if (writes_instance && (rc = append_history(p, c, h, execution_id, ack, now,
                                                b, op, err)) != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++) {
        const duro_work_item *it = &ack->worker_items[i];
        uint64_t exec = it->execution_id;
        if (exec == 0 && strcmp(it->instance_id, instance_id) == 0)
            exec = execution_id;
        if (b == NULL) {
            if ((rc = insert_work(p, c, it, exec, now, op, err)) != DURO_OK)
                return rc;
            continue;
        }
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
 * (META_WRITE_MANY) instead. */
static void gather_meta(duro__pg_batch_cols *b, const char *instance_id,
                        uint64_t execution_id, const duro_instance_meta *m)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = duro__pg_nonempty(m->parent_instance);
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
    b->metas++;
}

/* The rest of an ack, after its events and work items are written:
 * cancellations, outbound messages, the instance's metadata and, when it
 * ended, the messages nothing will read. */
int duro__pg_ack_other_writes(duro__pg_provider *p, duro__pg_conn *c,
                              const duro__pg_lock_holder *h,
                              const duro_orch_ack *ack, int64_t now,
                              duro__pg_batch_cols *b, const char *op,
                              duro_error *err)
{
    const char *instance_id = h->instance_id;
    uint64_t execution_id =
        ack->execution_id != 0 ? ack->execution_id : h->current;
    int rc = cancel_activities(p, c, instance_id, execution_id,
                               ack->cancelled_activities,
                               ack->cancelled_activity_count, op, err);
    if (rc != DURO_OK)
        return rc;
    /* a message reads its target's metadata (see duro__pg_batch_cols) */
    if (ack->orchestrator_item_count > 0 && b != NULL &&
        (rc = duro__pg_flush_batch_metas(p, c, b, now, op, err)) != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = enqueue_outbound(p, c, &ack->orchestrator_items[i], now, op,
                                   err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL && b != NULL)
        gather_meta(b, instance_id, execution_id, ack->meta);
    else if (ack->meta != NULL &&
             (rc = write_meta(p, c, instance_id, execution_id, ack->meta, now,
                              op, err)) != DURO_OK)
        return rc;
    if (ack->meta != NULL && b == NULL &&
        (rc = drop_dead_messages(p, c, instance_id, execution_id,
                                 ack->meta->status, op, err)) != DURO_OK)
        return rc;
    return DURO_OK;
}

/* The body of an ack inside its transaction; *queued says whether the
 * instance still has messages after the release. */
int duro__pg_ack_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                int64_t ready_id, const char *token,
                                const duro_orch_ack *ack, int64_t now,
                                int *queued, const char *op, duro_error *err)
{
    duro__pg_lock_holder h;
    int rc = duro__pg_lock_and_current(p, c, ready_id, token, now, &h, op, err);
    if (rc == DURO_OK && p->turn_ack_locked != NULL)
        p->turn_ack_locked(p->turn_ack_locked_arg); /* a test's hook */
    if (rc == DURO_OK)
        rc = duro__pg_ack_first_writes(p, c, &h, ack, now, NULL, op, err);
    if (rc == DURO_OK)
        rc = duro__pg_ack_other_writes(p, c, &h, ack, now, NULL, op, err);
    if (rc != DURO_OK)
        return rc;
    /* the consumed messages go, and the lock is released */
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_READY_ACK_SETTLE, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, h.instance_id);
    duro__pg_bind_text(c, s, 2, token);
    duro__pg_bind_i64(c, s, 3, ready_id);
    int step = duro__pg_step(p, c, s);
    if (step != DURO__PG_ROW)
        return duro__pg_error(c, step, op, err);
    *queued = !duro__pg_column_null(s, 0);
    duro__pg_reset(s);
    return DURO_OK;
}

/* The idempotent START `it` of an instance that exists: DURO_OK when the
 * instance runs the same orchestration name (version, input and status are
 * not compared), DURO_ALREADY_EXISTS naming both when not. Only on this
 * rare path, so a normal start costs no extra statement. */
static int check_idempotent_start(duro__pg_provider *p, duro__pg_conn *c,
                                  const duro_work_item *it, const char *op,
                                  duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_NAME, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, it->instance_id);
    int rc = duro__pg_step(p, c, s);
    if (rc != DURO__PG_ROW && rc != DURO__PG_DONE)
        return duro__pg_error(c, rc, op, err);
    const char *name = rc == DURO__PG_ROW && !duro__pg_column_null(s, 0)
                           ? duro__pg_column_text_raw(s, 0)
                           : NULL;
    if (name != NULL && strcmp(name, it->name) != 0)
        rc = duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                            "postgres %s: instance '%s' already exists as "
                            "orchestration '%s' (an idempotent start of '%s' "
                            "is refused)",
                            op, it->instance_id, name, it->name);
    else
        rc = DURO_OK;
    duro__pg_reset(s);
    return rc;
}

/* Records the event id of an EXTERNAL_EVENT (version 8); *known = 1 when
 * it was recorded for the instance before (the event is not enqueued
 * again). */
static int record_event_id(duro__pg_provider *p, duro__pg_conn *c,
                           const duro_work_item *item, int64_t now, int *known,
                           const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_EVENT_ID_RECORD, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, item->instance_id);
    duro__pg_bind_text(c, s, 2, item->event_id);
    duro__pg_bind_i64(c, s, 3, now);
    int rc = duro__pg_run(p, c, s, op, err);
    if (rc == DURO_OK)
        *known = duro__pg_changes(c) == 0;
    return rc;
}

/* Creates the instance of a START (failing when it exists, unless
 * idempotent and of the same name: *skip = 1), records an event's id (one
 * already recorded: *skip = 1) and enqueues an item; inside a
 * transaction. */
int duro__pg_enqueue_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                    const duro_work_item *item, int64_t now,
                                    int64_t visible_at, int *skip,
                                    const char *op, duro_error *err)
{
    *skip = 0;
    if (item->kind == DURO_WORK_START) {
        int created = 0;
        int rc = create_instance(p, c, item, now, &created, op, err);
        if (rc != DURO_OK)
            return rc;
        if (!created) {
            if (item->flags & DURO_START_IDEMPOTENT) {
                *skip = 1;
                return check_idempotent_start(p, c, item, op, err);
            }
            return duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                                  "postgres %s: instance '%s' already exists",
                                  op, item->instance_id);
        }
    }
    if (item->kind == DURO_WORK_EXTERNAL_EVENT && item->event_id != NULL) {
        int rc = record_event_id(p, c, item, now, skip, op, err);
        if (rc != DURO_OK || *skip)
            return rc;
    }
    return insert_message(p, c, item, now, visible_at, op, err);
}
