/* sqlite_queue.c - the two queues of the SQLite provider: fetch, ack,
 * abandon and renew on the orchestrator queue (instance locks live in
 * orchestrator_ready) and the worker queue, and client enqueue. Every write
 * is one BEGIN IMMEDIATE transaction on the writer connection, rolled back
 * whole on any failure. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sqlite/sqlite_internal.h"

#define TOKEN_MAX 64      /* "o<rowid>.<32 hex>" */
#define FETCH_ATTEMPTS 64 /* readiness repairs per fetch before giving up */

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

static int64_t after_ms(int64_t now, int64_t delay_ms)
{
    return delay_ms > 0 ? duro__add_ms(now, delay_ms) : now;
}

/* ---- lock tokens -------------------------------------------------------
 * "o<ready rowid>.<32 hex>" for an instance lock, "w<worker row id>.<32
 * hex>" for a work item: the row is found by primary key, the random part
 * makes the token unguessable and distinct per fetch. */

static int check_token(const char *token, duro_error *err)
{
    if (token == NULL || token[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock token is NULL or empty");
    return DURO_OK;
}

/* The row id of a token this provider issued with `prefix`; -1 otherwise. */
static int parse_token(const char *token, char prefix, int64_t *id)
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

static int lock_lost(const char *op, const char *why, duro_error *err)
{
    return duro_error_set(err, DURO_LOCK_LOST, 0, "sqlite %s: lock lost: %s",
                          op, why);
}

/* ---- input checks ------------------------------------------------------ */

static int check_work_item(const duro__sqlite_provider *p,
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
    if ((rc = duro__sqlite_check_id("instance id", it->instance_id, err)) ||
        (rc = duro__sqlite_check_name("name", it->name, name_required, err)) ||
        (rc = duro__sqlite_check_name("version", it->version, 0, err)) ||
        (rc = duro__sqlite_check_name("reason", it->reason, 0, err)) ||
        (rc = duro__sqlite_check_name("requested_by", it->requested_by, 0,
                                      err)) ||
        (rc = duro__sqlite_check_name("parent instance", it->parent_instance, 0,
                                      err)) ||
        (rc = duro__sqlite_check_name("event id", it->event_id, 0, err)) ||
        (rc = duro__sqlite_check_payload(p, "payload", it->payload, err)) ||
        (rc = duro__sqlite_check_payload(p, "error", it->error, err)))
        return rc;
    return DURO_OK;
}

static int check_event(const duro__sqlite_provider *p, const duro_event *ev,
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
    if ((rc = duro__sqlite_check_name("event name", ev->name, 0, err)) ||
        (rc = duro__sqlite_check_name("event version", ev->version, 0, err)) ||
        (rc = duro__sqlite_check_name("event reason", ev->reason, 0, err)) ||
        (rc = duro__sqlite_check_name("event requested_by", ev->requested_by, 0,
                                      err)) ||
        (rc = duro__sqlite_check_name("event ref_instance", ev->ref_instance, 0,
                                      err)) ||
        (rc = duro__sqlite_check_payload(p, "event payload", ev->payload,
                                         err)) ||
        (rc = duro__sqlite_check_payload(p, "event error", ev->error, err)))
        return rc;
    return DURO_OK;
}

static int check_meta(const duro__sqlite_provider *p,
                      const duro_instance_meta *m, duro_error *err)
{
    if (m->status < DURO_STATUS_PENDING || m->status > DURO_STATUS_TERMINATED)
        return duro_error_set(err, DURO_INVALID, 0,
                              "meta status %d is not a stored status",
                              m->status);
    int rc;
    if ((rc = duro__sqlite_check_name("meta name", m->name, 0, err)) ||
        (rc = duro__sqlite_check_name("meta version", m->version, 0, err)) ||
        (rc = duro__sqlite_check_name("meta parent instance",
                                      m->parent_instance, 0, err)) ||
        (rc = duro__sqlite_check_payload(p, "output", m->output, err)) ||
        (rc = duro__sqlite_check_payload(p, "error", m->error, err)) ||
        (rc = duro__sqlite_check_payload(p, "problem", m->problem, err)) ||
        (rc = duro__sqlite_check_payload(
             p, "custom status", m->custom_status_set ? m->custom_status : NULL,
             err)))
        return rc;
    return DURO_OK;
}

static int check_ack(const duro__sqlite_provider *p, const duro_orch_ack *ack,
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
        if ((rc = check_work_item(p, &ack->worker_items[i], 1, err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = check_work_item(p, &ack->orchestrator_items[i].item, 0,
                                  err)) != DURO_OK)
            return rc;
    for (size_t i = 0; i < ack->cancelled_activity_count; i++)
        if ((rc = duro__sqlite_check_id(
                 "cancelled activity instance id",
                 ack->cancelled_activities[i].instance_id, err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL)
        return check_meta(p, ack->meta, err);
    return DURO_OK;
}

/* ---- shared pieces ------------------------------------------------------ */

void *duro__sqlite_arena_grow(duro_arena *a, void *old, size_t count,
                              size_t *cap, size_t elem)
{
    size_t new_cap = *cap != 0 ? *cap * 2 : 8;
    void *grown = duro_arena_alloc(a, new_cap * elem);
    if (grown == NULL)
        return NULL;
    if (count > 0)
        memcpy(grown, old, count * elem);
    *cap = new_cap;
    return grown;
}

static const char *nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* Creates the Pending instance row of a START; *created = 0 when it exists.
 */
static int create_instance(duro__sqlite_provider *p, duro__sqlite_conn *c,
                           const duro_work_item *it, int64_t now, int *created,
                           const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_CREATE, op, err);
    if (s == NULL)
        return err->code;
    const char *parent = nonempty(it->parent_instance);
    duro__sqlite_bind_text(c, s, 1, it->instance_id);
    duro__sqlite_bind_text(c, s, 2, it->name);
    duro__sqlite_bind_text(c, s, 3, it->version);
    duro__sqlite_bind_i64(c, s, 4, now);
    duro__sqlite_bind_text(c, s, 5, parent);
    duro__sqlite_bind_u64(c, s, 6, parent != NULL ? it->parent_execution : 0);
    duro__sqlite_bind_u64(c, s, 7, parent != NULL ? it->parent_event_id : 0);
    int rc = duro__sqlite_run(p, c, s, op, err);
    if (rc == DURO_OK)
        *created = sqlite3_changes(c->db) > 0;
    return rc;
}

/* Inserts one orchestrator message and makes its instance ready by
 * visible_at (unless the instance is locked: its release recomputes). */
static int insert_message(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          const duro_work_item *it, int64_t now,
                          int64_t visible_at, const char *op, duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_i64(c, s, 1, (int64_t)it->kind);
    duro__sqlite_bind_text(c, s, 2, it->instance_id);
    duro__sqlite_bind_u64(c, s, 3, it->execution_id);
    duro__sqlite_bind_u64(c, s, 4, it->source_id);
    duro__sqlite_bind_text(c, s, 5, it->name);
    duro__sqlite_bind_text(c, s, 6, it->version);
    duro__sqlite_bind_text(c, s, 7, it->payload);
    duro__sqlite_bind_text(c, s, 8, it->error);
    duro__sqlite_bind_i64(c, s, 9, it->category);
    duro__sqlite_bind_text(c, s, 10, it->reason);
    duro__sqlite_bind_text(c, s, 11, it->requested_by);
    duro__sqlite_bind_text(c, s, 12, nonempty(it->parent_instance));
    duro__sqlite_bind_u64(c, s, 13, it->parent_execution);
    duro__sqlite_bind_u64(c, s, 14, it->parent_event_id);
    duro__sqlite_bind_i64(c, s, 15, it->fire_at_ms);
    duro__sqlite_bind_i64(c, s, 16, it->attempt);
    duro__sqlite_bind_i64(c, s, 17, it->flags);
    duro__sqlite_bind_i64(c, s, 18, it->started_ms);
    duro__sqlite_bind_i64(c, s, 19, it->finished_ms);
    duro__sqlite_bind_i64(c, s, 20, now);
    duro__sqlite_bind_i64(c, s, 21, visible_at);
    int rc = duro__sqlite_run(p, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (it->kind == DURO_WORK_CANCEL_INSTANCE) {
        /* The first request on a live instance is what status shows and
         * what the turn records (provider.h, version 4). */
        s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_CANCEL_REQUEST, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, it->instance_id);
        duro__sqlite_bind_i64(c, s, 2, now);
        duro__sqlite_bind_text(c, s, 3, it->reason);
        duro__sqlite_bind_text(c, s, 4, it->requested_by);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            return rc;
    }
    s = duro__sqlite_stmt(p, c, DURO__SQL_READY_ENQUEUE, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, it->instance_id);
    duro__sqlite_bind_i64(c, s, 2, visible_at);
    duro__sqlite_bind_i64(c, s, 3, DURO__STOPS_INSTANCE(it->kind));
    return duro__sqlite_run(p, c, s, op, err);
}

/* Sets the readiness of an instance whose lock is being released from its
 * remaining messages: ready at the earliest (but not before `hold`, an
 * abandon delay; 0 for none), or no row when nothing is queued. *queued
 * (may be NULL) says whether messages remain. */
static int settle_ready(duro__sqlite_provider *p, duro__sqlite_conn *c,
                        int64_t rowid, const char *instance_id, int64_t hold,
                        int *queued, const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_OQ_MIN_VISIBLE, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    int rc = duro__sqlite_step(p, c, s);
    if (rc != SQLITE_ROW)
        return duro__sqlite_error(c, rc, op, err);
    int any = sqlite3_column_type(s, 0) != SQLITE_NULL;
    int64_t earliest = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (queued != NULL)
        *queued = any;
    if (!any) {
        s = duro__sqlite_stmt(p, c, DURO__SQL_READY_DELETE, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_i64(c, s, 1, rowid);
        return duro__sqlite_run(p, c, s, op, err);
    }
    s = duro__sqlite_stmt(p, c, DURO__SQL_READY_SET, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_i64(c, s, 1, rowid);
    if (hold > 0)
        duro__sqlite_bind_i64(c, s, 2, hold);
    else
        duro__sqlite_bind_text(c, s, 2, NULL);
    duro__sqlite_bind_i64(c, s, 3, DURO__MAX(earliest, hold));
    return duro__sqlite_run(p, c, s, op, err);
}

/* Finds the instance held by an orchestration lock token (unexpired) and
 * copies its id into instance_id[DURO__SQLITE_NAME_MAX + 1]. */
static int check_instance_lock(duro__sqlite_provider *p, duro__sqlite_conn *c,
                               int64_t rowid, const char *token, int64_t now,
                               char *instance_id, const char *op,
                               duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_READY_HOLDER, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_i64(c, s, 1, rowid);
    duro__sqlite_bind_text(c, s, 2, token);
    int rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_DONE)
        return lock_lost(op,
                         "the token does not hold an instance lock (released, "
                         "expired and taken by another fetch, or the instance "
                         "was deleted)",
                         err);
    if (rc != SQLITE_ROW)
        return duro__sqlite_error(c, rc, op, err);
    int64_t until = sqlite3_column_int64(s, 1);
    const char *id = (const char *)sqlite3_column_text(s, 0);
    size_t n = (size_t)sqlite3_column_bytes(s, 0);
    if (id == NULL || n > DURO__SQLITE_NAME_MAX)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s: corrupt lock row", op);
    memcpy(instance_id, id, n + 1);
    sqlite3_reset(s);
    if (until <= now)
        return lock_lost(op, "the instance lock expired", err);
    return DURO_OK;
}

/* ---- reading rows into items --------------------------------------------- */

/* A row of OQ_FETCHED (columns DURO__SQLITE_QUEUE_COLUMNS). */
static int read_message(duro_arena *a, sqlite3_stmt *s, duro_work_item *it)
{
    it->kind = (duro_work_kind)sqlite3_column_int(s, 0);
    it->execution_id = (uint64_t)sqlite3_column_int64(s, 2);
    it->source_id = (uint64_t)sqlite3_column_int64(s, 3);
    it->category = sqlite3_column_int(s, 8);
    it->parent_execution = (uint64_t)sqlite3_column_int64(s, 12);
    it->parent_event_id = (uint64_t)sqlite3_column_int64(s, 13);
    it->fire_at_ms = sqlite3_column_int64(s, 14);
    it->attempt = (uint32_t)sqlite3_column_int64(s, 15);
    it->flags = (uint32_t)sqlite3_column_int64(s, 16);
    it->started_ms = sqlite3_column_int64(s, 17);
    it->finished_ms = sqlite3_column_int64(s, 18);
    if (duro__sqlite_column_text(a, s, 1, &it->instance_id) ||
        duro__sqlite_column_text(a, s, 4, &it->name) ||
        duro__sqlite_column_text(a, s, 5, &it->version) ||
        duro__sqlite_column_text(a, s, 6, &it->payload) ||
        duro__sqlite_column_text(a, s, 7, &it->error) ||
        duro__sqlite_column_text(a, s, 9, &it->reason) ||
        duro__sqlite_column_text(a, s, 10, &it->requested_by) ||
        duro__sqlite_column_text(a, s, 11, &it->parent_instance))
        return -1;
    return 0;
}

/* A row of HISTORY_READ (columns DURO__SQLITE_HISTORY_COLUMNS). */
static int read_event(duro_arena *a, sqlite3_stmt *s, duro_event *ev)
{
    ev->event_id = (uint64_t)sqlite3_column_int64(s, 0);
    ev->kind = (duro_event_kind)sqlite3_column_int(s, 1);
    ev->source_event_id = (uint64_t)sqlite3_column_int64(s, 2);
    ev->timestamp_ms = sqlite3_column_int64(s, 3);
    ev->category = sqlite3_column_int(s, 8);
    ev->ref_execution = (uint64_t)sqlite3_column_int64(s, 12);
    ev->ref_event_id = (uint64_t)sqlite3_column_int64(s, 13);
    ev->fire_at_ms = sqlite3_column_int64(s, 14);
    ev->attempt = (uint32_t)sqlite3_column_int64(s, 15);
    ev->flags = (uint32_t)sqlite3_column_int64(s, 16);
    ev->started_ms = sqlite3_column_int64(s, 17);
    ev->finished_ms = sqlite3_column_int64(s, 18);
    if (duro__sqlite_column_text(a, s, 4, &ev->name) ||
        duro__sqlite_column_text(a, s, 5, &ev->version) ||
        duro__sqlite_column_text(a, s, 6, &ev->payload) ||
        duro__sqlite_column_text(a, s, 7, &ev->error) ||
        duro__sqlite_column_text(a, s, 9, &ev->reason) ||
        duro__sqlite_column_text(a, s, 10, &ev->requested_by) ||
        duro__sqlite_column_text(a, s, 11, &ev->ref_instance))
        return -1;
    return 0;
}

int duro__sqlite_read_events(duro__sqlite_provider *p, duro__sqlite_conn *c,
                             duro_arena *a, const char *instance_id,
                             uint64_t execution_id, uint64_t after,
                             duro_event **events, size_t *count, const char *op,
                             duro_error *err)
{
    *events = NULL;
    *count = 0;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_HISTORY_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    duro__sqlite_bind_u64(c, s, 2, execution_id);
    duro__sqlite_bind_u64(c, s, 3, after);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (*count == cap) {
            *events = duro__sqlite_arena_grow(a, *events, *count, &cap,
                                              sizeof(duro_event));
            if (*events == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (read_event(a, s, &(*events)[*count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        (*count)++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    return DURO_OK;
}

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* Fills the locked instance's messages, metadata and history into item. */
static int load_orch_item(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          duro_orch_item *item, int64_t now,
                          const duro_history_cache *cache, const char *op,
                          duro_error *err)
{
    duro_arena *a = item->arena;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_FETCHED, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    duro__sqlite_bind_i64(c, s, 2, now);
    duro__sqlite_bind_text(c, s, 3, item->lock_token);
    size_t cap = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (item->message_count == cap) {
            item->messages =
                duro__sqlite_arena_grow(a, item->messages, item->message_count,
                                        &cap, sizeof(duro_work_item));
            if (item->messages == NULL)
                return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (read_message(a, s, &item->messages[item->message_count]) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        uint32_t fetches = (uint32_t)sqlite3_column_int64(s, 19);
        item->attempt = DURO__MAX(item->attempt, fetches);
        item->message_count++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);

    item->status = DURO_STATUS_NOT_FOUND;
    s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_FETCH_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_ROW) {
        item->status = sqlite3_column_int(s, 0);
        item->execution_id = (uint64_t)sqlite3_column_int64(s, 1);
        item->parent_execution = (uint64_t)sqlite3_column_int64(s, 5);
        item->parent_event_id = (uint64_t)sqlite3_column_int64(s, 6);
        item->cancel_requested_ms = sqlite3_column_int64(s, 8);
        if (duro__sqlite_column_text(a, s, 2, &item->name) ||
            duro__sqlite_column_text(a, s, 3, &item->version) ||
            duro__sqlite_column_text(a, s, 4, &item->parent_instance) ||
            duro__sqlite_column_text(a, s, 7, &item->custom_status) ||
            duro__sqlite_column_text(a, s, 9, &item->cancel_reason) ||
            duro__sqlite_column_text(a, s, 10, &item->cancelled_by) ||
            duro__sqlite_column_text(a, s, 11, &item->last_problem))
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    } else if (rc != SQLITE_DONE) {
        return duro__sqlite_error(c, rc, op, err);
    }
    sqlite3_reset(s);

    if (item->execution_id > 0) {
        s = duro__sqlite_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, item->instance_id);
        duro__sqlite_bind_u64(c, s, 2, item->execution_id);
        rc = duro__sqlite_step(p, c, s);
        if (rc == SQLITE_ROW)
            item->history_total = (uint64_t)sqlite3_column_int64(s, 0);
        else if (rc != SQLITE_DONE)
            return duro__sqlite_error(c, rc, op, err);
        sqlite3_reset(s);
    }
    item->history_offset = duro__history_offset(
        cache, item->instance_id, item->execution_id, item->history_total);
    if (item->history_total == item->history_offset)
        return DURO_OK;
    return duro__sqlite_read_events(
        p, c, a, item->instance_id, item->execution_id, item->history_offset,
        &item->history, &item->history_count, op, err);
}

/* The body of fetch_orchestration_item inside an open write transaction:
 * *out is the locked item, or NULL when nothing is visible. */
static int fetch_orch_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
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
    /* `now` (the caller's, read before it waited for the write lock) decides
     * what is visible: nothing that became fetchable while it waited. The
     * lock runs from this moment, so a wait never shortens it. */
    int64_t until = after_ms(duro__wall_ms(), lock_timeout_ms);
    int rc = DURO_OK;
    int found = 0;
    for (int attempt = 0; rc == DURO_OK && !found && attempt < FETCH_ATTEMPTS;
         attempt++) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_READY_NEXT, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, now);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = duro__sqlite_error(c, step, op, err);
            break;
        }
        int64_t rowid = sqlite3_column_int64(s, 0);
        if (duro__sqlite_column_text(a, s, 1, &item->instance_id) != 0) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        sqlite3_reset(s);

        char token_hex[33], token[TOKEN_MAX];
        duro__random_token(token_hex);
        snprintf(token, sizeof(token), "o%lld.%s", (long long)rowid, token_hex);
        item->lock_token = duro_arena_strdup(a, token);
        if (item->lock_token == NULL) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_TAG, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_text(c, s, 1, item->instance_id);
        duro__sqlite_bind_text(c, s, 2, item->lock_token);
        duro__sqlite_bind_i64(c, s, 3, now);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            break;
        if (sqlite3_changes(c->db) == 0) {
            /* Ready but nothing visible (an expired lock over delayed
             * messages): repair its readiness and look again. */
            rc = settle_ready(p, c, rowid, item->instance_id, 0, NULL, op, err);
            continue;
        }
        s = duro__sqlite_stmt(p, c, DURO__SQL_READY_LOCK, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, rowid);
        duro__sqlite_bind_text(c, s, 2, item->lock_token);
        duro__sqlite_bind_i64(c, s, 3, until);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            break;
        rc = load_orch_item(p, c, item, now, cache, op, err);
        found = rc == DURO_OK;
    }
    if (rc != DURO_OK || !found) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

int duro__sqlite_fetch_orchestration_item(duro_provider *base,
                                          int64_t lock_timeout_ms,
                                          const duro_history_cache *cache,
                                          duro_orch_item **out, duro_error *err)
{
    static const char op[] = "fetch_orchestration_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_orch_item *item = NULL;
    rc = fetch_orch_in_transaction(p, c, lock_timeout_ms, cache, now, &item, op,
                                   err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_orch_item_free(item);
        return rc;
    }
    *out = item;
    return DURO_OK;
}

/* ---- orchestrator queue: ack ----------------------------------------------
 */

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
static int current_execution(duro__sqlite_provider *p, duro__sqlite_conn *c,
                             const char *instance_id, int *exists,
                             uint64_t *execution_id, const char *op,
                             duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    int rc = duro__sqlite_step(p, c, s);
    *exists = rc == SQLITE_ROW;
    *execution_id = 0;
    if (rc == SQLITE_ROW)
        *execution_id = (uint64_t)sqlite3_column_int64(s, 0);
    else if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    sqlite3_reset(s);
    return DURO_OK;
}

/* Deletes the worker rows of cancelled activities: one DELETE per
 * (instance, execution) group, its activity ids passed as one JSON array
 * and matched through the worker_queue_activity index. */
static int cancel_activities(duro__sqlite_provider *p, duro__sqlite_conn *c,
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
        json[used++] = '[';
        while (end < count &&
               compare_cancel_refs(&sorted[start], &sorted[end]) == 0) {
            used +=
                (size_t)sprintf(json + used, "%s%lld", end > start ? "," : "",
                                (long long)sorted[end].activity_id);
            end++;
        }
        json[used++] = ']';
        json[used] = '\0';
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_CANCEL, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_text(c, s, 1, sorted[start].instance_id);
        duro__sqlite_bind_u64(c, s, 2, sorted[start].execution_id);
        duro__sqlite_bind_text(c, s, 3, json);
        rc = duro__sqlite_run(p, c, s, op, err);
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        start = end;
    }
done:
    duro__free(sorted);
    duro__free(json);
    return rc;
}

static int insert_history(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          const char *instance_id, uint64_t execution_id,
                          const duro_event *ev, const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_HISTORY_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    duro__sqlite_bind_u64(c, s, 2, execution_id);
    duro__sqlite_bind_u64(c, s, 3, ev->event_id);
    duro__sqlite_bind_i64(c, s, 4, (int64_t)ev->kind);
    duro__sqlite_bind_u64(c, s, 5, ev->source_event_id);
    duro__sqlite_bind_i64(c, s, 6, ev->timestamp_ms);
    duro__sqlite_bind_text(c, s, 7, ev->name);
    duro__sqlite_bind_text(c, s, 8, ev->version);
    duro__sqlite_bind_text(c, s, 9, ev->payload);
    duro__sqlite_bind_text(c, s, 10, ev->error);
    duro__sqlite_bind_i64(c, s, 11, ev->category);
    duro__sqlite_bind_text(c, s, 12, ev->reason);
    duro__sqlite_bind_text(c, s, 13, ev->requested_by);
    duro__sqlite_bind_text(c, s, 14, ev->ref_instance);
    duro__sqlite_bind_u64(c, s, 15, ev->ref_execution);
    duro__sqlite_bind_u64(c, s, 16, ev->ref_event_id);
    duro__sqlite_bind_i64(c, s, 17, ev->fire_at_ms);
    duro__sqlite_bind_i64(c, s, 18, ev->attempt);
    duro__sqlite_bind_i64(c, s, 19, ev->flags);
    duro__sqlite_bind_i64(c, s, 20, ev->started_ms);
    duro__sqlite_bind_i64(c, s, 21, ev->finished_ms);
    int rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
        return duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                              "sqlite %s: history event %" PRIu64
                              " of instance '%s' execution %" PRIu64
                              " already exists (duplicate event id)",
                              op, ev->event_id, instance_id, execution_id);
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    return DURO_OK;
}

static int insert_work(duro__sqlite_provider *p, duro__sqlite_conn *c,
                       const duro_work_item *it, uint64_t execution_id,
                       int64_t now, const char *op, duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, it->instance_id);
    duro__sqlite_bind_u64(c, s, 2, execution_id);
    duro__sqlite_bind_u64(c, s, 3, it->source_id);
    duro__sqlite_bind_text(c, s, 4, it->name);
    duro__sqlite_bind_text(c, s, 5, it->version);
    duro__sqlite_bind_text(c, s, 6, it->payload);
    duro__sqlite_bind_i64(c, s, 7, it->attempt);
    duro__sqlite_bind_i64(c, s, 8, now);
    return duro__sqlite_run(p, c, s, op, err);
}

/* Step 5 of an ack: orchestrator items, START items creating instances. */
static int enqueue_outbound(duro__sqlite_provider *p, duro__sqlite_conn *c,
                            const duro_outbound *out, int64_t now,
                            const char *op, duro_error *err)
{
    const duro_work_item *it = &out->item;
    int64_t visible_at = after_ms(now, out->delay_ms);
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
    const char *parent = nonempty(it->parent_instance);
    if (parent == NULL || (it->flags & DURO_START_DETACHED) != 0)
        return DURO_OK;
    /* The text starts with the code's name so tools can match on it. */
    char message[DURO__SQLITE_NAME_MAX + 96];
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
static int write_meta(duro__sqlite_provider *p, duro__sqlite_conn *c,
                      const char *instance_id, uint64_t execution_id,
                      const duro_instance_meta *m, int64_t now, const char *op,
                      duro_error *err)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = nonempty(m->parent_instance);
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    /* A continued-as-new instance runs on in its next execution. */
    duro__sqlite_bind_i64(c, s, 2, continued ? DURO_STATUS_RUNNING : m->status);
    duro__sqlite_bind_text(c, s, 3, m->name);
    duro__sqlite_bind_text(c, s, 4, m->version);
    duro__sqlite_bind_text(c, s, 5, continued ? NULL : m->output);
    duro__sqlite_bind_text(c, s, 6, m->error);
    duro__sqlite_bind_i64(c, s, 7, m->category);
    duro__sqlite_bind_i64(c, s, 8, m->custom_status_set != 0);
    duro__sqlite_bind_text(c, s, 9, m->custom_status);
    duro__sqlite_bind_text(c, s, 10, parent);
    duro__sqlite_bind_u64(c, s, 11, m->parent_execution);
    duro__sqlite_bind_u64(c, s, 12, m->parent_event_id);
    duro__sqlite_bind_i64(c, s, 13, now);
    /* An ending (continue-as-new too) replaces the problem with
     * m->problem, clearing it when NULL; otherwise only a problem given
     * is written. */
    duro__sqlite_bind_i64(c, s, 14, finished || m->problem != NULL);
    duro__sqlite_bind_text(c, s, 15, m->problem);
    int rc = duro__sqlite_run(p, c, s, op, err);
    if (rc != DURO_OK || execution_id == 0)
        return rc;
    s = duro__sqlite_stmt(p, c, DURO__SQL_EXEC_WRITE_META, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    duro__sqlite_bind_u64(c, s, 2, execution_id);
    duro__sqlite_bind_i64(c, s, 3, m->status);
    duro__sqlite_bind_text(c, s, 4, m->name);
    duro__sqlite_bind_text(c, s, 5, m->version);
    duro__sqlite_bind_text(c, s, 6, m->output);
    duro__sqlite_bind_text(c, s, 7, m->error);
    duro__sqlite_bind_i64(c, s, 8, m->category);
    if (finished)
        duro__sqlite_bind_i64(c, s, 9, now);
    else
        duro__sqlite_bind_text(c, s, 9, NULL);
    return duro__sqlite_run(p, c, s, op, err);
}

/* Step 7 of an ack: queues hold only live work. An instance that ended
 * would only drop what is still queued for it (a losing timer due in 30
 * days, a delayed START of an instance cancelled before it began), so all
 * of it goes, set-based through orchestrator_queue_instance; after a
 * continue-as-new only what names the ended execution goes. The readiness
 * row is recomputed from what remains when the lock is released. */
static int drop_dead_messages(duro__sqlite_provider *p, duro__sqlite_conn *c,
                              const char *instance_id, uint64_t execution_id,
                              int status, const char *op, duro_error *err)
{
    int continued = status == DURO_STATUS_CONTINUED_AS_NEW;
    if (!continued && !duro_status_is_terminal(status))
        return DURO_OK;
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c,
                          continued ? DURO__SQL_OQ_DELETE_EXECUTION
                                    : DURO__SQL_OQ_DELETE_INSTANCE,
                          op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    if (continued)
        duro__sqlite_bind_u64(c, s, 2, execution_id);
    return duro__sqlite_run(p, c, s, op, err);
}

/* Steps 2 (history, execution rows) of an ack. */
static int append_history(duro__sqlite_provider *p, duro__sqlite_conn *c,
                          const char *instance_id, uint64_t current,
                          uint64_t execution_id, const duro_orch_ack *ack,
                          int64_t now, const char *op, duro_error *err)
{
    uint64_t stored = 0;
    int is_new = execution_id > current;
    int rc;
    if (!is_new) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, instance_id);
        duro__sqlite_bind_u64(c, s, 2, execution_id);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_DONE)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "sqlite %s: execution %" PRIu64
                                  " of instance '%s' does not exist (current "
                                  "is %" PRIu64 ")",
                                  op, execution_id, instance_id, current);
        if (step != SQLITE_ROW)
            return duro__sqlite_error(c, step, op, err);
        stored = (uint64_t)sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
    }
    uint64_t delta = ack->history_delta_count;
    if (delta > 0 &&
        (stored > p->cfg.max_history || delta > p->cfg.max_history - stored))
        return duro_error_set(
            err, DURO_HISTORY_LIMIT, 0,
            "sqlite %s: instance '%s' execution %" PRIu64 " would hold %" PRIu64
            " events, more than max_history (%" PRIu64 ")",
            op, instance_id, execution_id, stored + delta, p->cfg.max_history);
    if (is_new) {
        const duro_instance_meta *m = ack->meta;
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_EXEC_CREATE, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, instance_id);
        duro__sqlite_bind_u64(c, s, 2, execution_id);
        duro__sqlite_bind_text(c, s, 3, m != NULL ? m->name : NULL);
        duro__sqlite_bind_text(c, s, 4, m != NULL ? m->version : NULL);
        duro__sqlite_bind_i64(c, s, 5, now);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            return rc;
        s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_SET_CURRENT, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, instance_id);
        duro__sqlite_bind_u64(c, s, 2, execution_id);
        duro__sqlite_bind_i64(c, s, 3, now);
        if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
            return rc;
    }
    for (size_t i = 0; i < ack->history_delta_count; i++)
        if ((rc = insert_history(p, c, instance_id, execution_id,
                                 &ack->history_delta[i], op, err)) != DURO_OK)
            return rc;
    return DURO_OK;
}

/* The body of an ack inside its transaction; *queued says whether the
 * instance still has messages after the release. */
static int ack_in_transaction(duro__sqlite_provider *p, duro__sqlite_conn *c,
                              int64_t rowid, const char *token,
                              const duro_orch_ack *ack, int64_t now,
                              int *queued, const char *op, duro_error *err)
{
    char instance_id[DURO__SQLITE_NAME_MAX + 1];
    int rc = check_instance_lock(p, c, rowid, token, now, instance_id, op, err);
    if (rc != DURO_OK)
        return rc;
    int exists;
    uint64_t current;
    rc = current_execution(p, c, instance_id, &exists, &current, op, err);
    if (rc != DURO_OK)
        return rc;
    uint64_t execution_id =
        ack->execution_id != 0 ? ack->execution_id : current;
    int writes_instance = ack->history_delta_count > 0 || ack->meta != NULL;
    if (writes_instance && !exists)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "sqlite %s: instance '%s' does not exist; only "
                              "an ack without history and meta may consume "
                              "its messages",
                              op, instance_id);
    if (writes_instance && execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "sqlite %s: ack for instance '%s' writes "
                              "history or meta but names no execution",
                              op, instance_id);
    if (writes_instance &&
        (rc = append_history(p, c, instance_id, current, execution_id, ack, now,
                             op, err)) != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->worker_item_count; i++) {
        const duro_work_item *it = &ack->worker_items[i];
        uint64_t exec = it->execution_id;
        if (exec == 0 && strcmp(it->instance_id, instance_id) == 0)
            exec = execution_id;
        if ((rc = insert_work(p, c, it, exec, now, op, err)) != DURO_OK)
            return rc;
    }
    rc = cancel_activities(p, c, instance_id, execution_id,
                           ack->cancelled_activities,
                           ack->cancelled_activity_count, op, err);
    if (rc != DURO_OK)
        return rc;
    for (size_t i = 0; i < ack->orchestrator_item_count; i++)
        if ((rc = enqueue_outbound(p, c, &ack->orchestrator_items[i], now, op,
                                   err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL &&
        (rc = write_meta(p, c, instance_id, execution_id, ack->meta, now, op,
                         err)) != DURO_OK)
        return rc;
    if (ack->meta != NULL &&
        (rc = drop_dead_messages(p, c, instance_id, execution_id,
                                 ack->meta->status, op, err)) != DURO_OK)
        return rc;
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_OQ_DELETE_TAGGED, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    duro__sqlite_bind_text(c, s, 2, token);
    if ((rc = duro__sqlite_run(p, c, s, op, err)) != DURO_OK)
        return rc;
    return settle_ready(p, c, rowid, instance_id, 0, queued, op, err);
}

/* The acks of n items, then up to max_next fetches, in one transaction
 * (ack_orchestration_item: n 1, max_next 0; ack_and_fetch_orchestration_item:
 * n 1, max_next 1; ack_and_fetch_orchestration_items: any). */
static int ack_orch(duro_provider *base, size_t n,
                    const char *const *lock_tokens, const duro_orch_ack *acks,
                    int64_t lock_timeout_ms, const duro_history_cache *cache,
                    size_t max_next, duro_orch_item **next, size_t *next_count,
                    const char *op, duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    *next_count = 0;
    if (n > 0 && acks == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "ack is NULL");
    int rc = DURO_OK;
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        rc = check_token(lock_tokens[i], err);
        if (rc == DURO_OK)
            rc = check_ack(p, &acks[i], err);
    }
    if (rc != DURO_OK)
        return rc;
    int64_t rowid;
    for (size_t i = 0; i < n; i++)
        if (parse_token(lock_tokens[i], 'o', &rowid) != 0)
            return lock_lost(
                op, "not an orchestration lock token of this store", err);
    if (max_next > 0)
        duro__sqlite_note_fetch(p, DURO_QUEUE_ORCHESTRATOR);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    size_t workers = 0, outbound = 0, got = 0;
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        int queued = 0;
        parse_token(lock_tokens[i], 'o', &rowid);
        rc = ack_in_transaction(p, c, rowid, lock_tokens[i], &acks[i], now,
                                &queued, op, err);
        workers += acks[i].worker_item_count;
        outbound += acks[i].orchestrator_item_count + (queued ? 1 : 0);
    }
    while (rc == DURO_OK && got < max_next) {
        duro_orch_item *item = NULL;
        rc = fetch_orch_in_transaction(p, c, lock_timeout_ms, cache, now, &item,
                                       op, err);
        if (item == NULL)
            break;
        next[got++] = item;
    }
    if (rc == DURO_OK) {
        rc = duro__sqlite_write_commit(p, c, op, err);
    } else {
        duro__sqlite_write_rollback(p, c);
    }
    if (rc != DURO_OK) {
        for (size_t i = 0; i < got; i++) {
            duro_orch_item_free(next[i]);
            next[i] = NULL;
        }
        return rc;
    }
    duro__sqlite_signal(p, DURO_QUEUE_WORKER, workers);
    duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, outbound);
    *next_count = got;
    return DURO_OK;
}

int duro__sqlite_ack_orchestration_item(duro_provider *base,
                                        const char *lock_token,
                                        const duro_orch_ack *ack,
                                        duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    size_t none;
    return ack_orch(base, 1, &lock_token, ack, 0, NULL, 0, NULL, &none,
                    "ack_orchestration_item", err);
}

int duro__sqlite_ack_and_fetch_orchestration_item(
    duro_provider *base, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    *next = NULL;
    size_t got;
    return ack_orch(base, 1, &lock_token, ack, lock_timeout_ms, cache, 1, next,
                    &got, "ack_and_fetch_orchestration_item", err);
}

int duro__sqlite_ack_and_fetch_orchestration_items(
    duro_provider *base, size_t n, const char *const *lock_tokens,
    const duro_orch_ack *acks, int64_t lock_timeout_ms,
    const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
    size_t *next_count, duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    int rc = duro__check_batch_args(n, lock_tokens, acks, max_next, next,
                                    next_count, err);
    if (rc != DURO_OK)
        return rc;
    return ack_orch(base, n, lock_tokens, acks, lock_timeout_ms, cache,
                    max_next, next, next_count,
                    "ack_and_fetch_orchestration_items", err);
}

/* ---- orchestrator queue: abandon, renew, enqueue ---------------------------
 */

int duro__sqlite_abandon_orchestration_item(duro_provider *base,
                                            const char *lock_token,
                                            int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_orchestration_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    duro__sqlite_provider *p = sqlite_of(base);
    int64_t rowid;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'o', &rowid) != 0)
        return lock_lost(op, "not an orchestration lock token of this store",
                         err);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    char instance_id[DURO__SQLITE_NAME_MAX + 1];
    rc =
        check_instance_lock(p, c, rowid, lock_token, now, instance_id, op, err);
    if (rc == DURO_OK) {
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_OQ_UNTAG, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__sqlite_bind_text(c, s, 1, instance_id);
            duro__sqlite_bind_text(c, s, 2, lock_token);
            rc = duro__sqlite_run(p, c, s, op, err);
        }
    }
    if (rc == DURO_OK)
        rc = settle_ready(p, c, rowid, instance_id,
                          delay_ms > 0 ? after_ms(now, delay_ms) : 0, NULL, op,
                          err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* Updates a lock row its token still holds, unexpired, with `update`
 * (READY_RENEW: ?1 row, ?2 token, ?3 now + ms, ?4 now); fails
 * DURO_LOCK_LOST when no row matched. */
static int renew_lock(duro__sqlite_provider *p, duro__sqlite_stmt_id update,
                      int64_t rowid, const char *token, int64_t ms,
                      const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_i64(c, s, 1, rowid);
        duro__sqlite_bind_text(c, s, 2, token);
        duro__sqlite_bind_i64(c, s, 3, after_ms(now, ms));
        duro__sqlite_bind_i64(c, s, 4, now);
        rc = duro__sqlite_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && sqlite3_changes(c->db) == 0)
        rc = lock_lost(op,
                       "the row is gone (acked, cancelled or deleted), the "
                       "token differs or the lock expired",
                       err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    return duro__sqlite_write_commit(p, c, op, err);
}

int duro__sqlite_renew_orchestration_item_lock(duro_provider *base,
                                               const char *lock_token,
                                               int64_t extend_ms,
                                               duro_error *err)
{
    static const char op[] = "renew_orchestration_item_lock";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    int64_t rowid;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'o', &rowid) != 0)
        return lock_lost(op, "not an orchestration lock token of this store",
                         err);
    return renew_lock(sqlite_of(base), DURO__SQL_READY_RENEW, rowid, lock_token,
                      extend_ms, op, err);
}

/* The idempotent START `it` of an instance that exists: DURO_OK when the
 * instance runs the same orchestration name (version, input and status are
 * not compared), DURO_ALREADY_EXISTS naming both when not. Only on this
 * rare path, so a normal start costs no extra statement. */
static int check_idempotent_start(duro__sqlite_provider *p,
                                  duro__sqlite_conn *c,
                                  const duro_work_item *it, const char *op,
                                  duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_NAME, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, it->instance_id);
    int rc = duro__sqlite_step(p, c, s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    const char *name =
        rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
    if (name != NULL && strcmp(name, it->name) != 0)
        rc = duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                            "sqlite %s: instance '%s' already exists as "
                            "orchestration '%s' (an idempotent start of '%s' "
                            "is refused)",
                            op, it->instance_id, name, it->name);
    else
        rc = DURO_OK;
    sqlite3_reset(s);
    return rc;
}

/* Records the event id of an EXTERNAL_EVENT (version 8); *known = 1 when
 * it was recorded for the instance before (the event is not enqueued
 * again). */
static int record_event_id(duro__sqlite_provider *p, duro__sqlite_conn *c,
                           const duro_work_item *item, int64_t now, int *known,
                           const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_EVENT_ID_RECORD, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, item->instance_id);
    duro__sqlite_bind_text(c, s, 2, item->event_id);
    sqlite3_bind_int64(s, 3, now);
    int rc = duro__sqlite_step(p, c, s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    *known = sqlite3_changes(c->db) == 0;
    return DURO_OK;
}

/* Creates the instance of a START (failing when it exists, unless
 * idempotent and of the same name: *skip = 1), records an event's id (one
 * already recorded: *skip = 1) and enqueues an item; inside a
 * transaction. */
static int enqueue_in_transaction(duro__sqlite_provider *p,
                                  duro__sqlite_conn *c,
                                  const duro_work_item *item, int64_t now,
                                  int64_t visible_at, int *skip, const char *op,
                                  duro_error *err)
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
                                  "sqlite %s: instance '%s' already exists", op,
                                  item->instance_id);
        }
    }
    if (item->kind == DURO_WORK_EXTERNAL_EVENT && item->event_id != NULL) {
        int rc = record_event_id(p, c, item, now, skip, op, err);
        if (rc != DURO_OK || *skip)
            return rc;
    }
    return insert_message(p, c, item, now, visible_at, op, err);
}

int duro__sqlite_enqueue_for_orchestrator(duro_provider *base,
                                          const duro_work_item *item,
                                          int64_t delay_ms, duro_error *err)
{
    static const char op[] = "enqueue_for_orchestrator";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    duro__sqlite_provider *p = sqlite_of(base);
    int rc = check_work_item(p, item, 0, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    int skip = 0;
    rc = enqueue_in_transaction(p, c, item, now, after_ms(now, delay_ms), &skip,
                                op, err);
    if (rc != DURO_OK || skip) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* ---- worker queue ----------------------------------------------------------
 */

/* The row WQ_FETCH returned, into a worker item. */
static int read_work_row(duro_arena *a, sqlite3_stmt *s, duro_worker_item *w)
{
    duro_work_item *it = &w->item;
    it->kind = DURO_WORK_ACTIVITY_EXECUTE;
    it->execution_id = (uint64_t)sqlite3_column_int64(s, 1);
    it->source_id = (uint64_t)sqlite3_column_int64(s, 2);
    it->attempt = (uint32_t)sqlite3_column_int64(s, 6);
    w->attempt = (uint32_t)sqlite3_column_int64(s, 7);
    if (duro__sqlite_column_text(a, s, 0, &it->instance_id) ||
        duro__sqlite_column_text(a, s, 3, &it->name) ||
        duro__sqlite_column_text(a, s, 4, &it->version) ||
        duro__sqlite_column_text(a, s, 5, &it->payload) ||
        duro__sqlite_column_text(a, s, 8, &w->lock_token))
        return -1;
    return 0;
}

/* The body of fetch_work_item inside an open write transaction. */
static int fetch_work_in_transaction(duro__sqlite_provider *p,
                                     duro__sqlite_conn *c,
                                     int64_t lock_timeout_ms, int64_t now,
                                     duro_worker_item **out, const char *op,
                                     duro_error *err)
{
    *out = NULL;
    char token_hex[33];
    duro__random_token(token_hex);
    duro_arena *a = NULL;
    duro_worker_item *w = NULL;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_FETCH, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_text(c, s, 1, token_hex);
        /* visible by the caller's `now` (read before it waited for the
         * write lock), locked from this moment: a wait never shortens the
         * lock (a lock born expired was taken by the next fetch) */
        duro__sqlite_bind_i64(c, s, 2,
                              after_ms(duro__wall_ms(), lock_timeout_ms));
        duro__sqlite_bind_i64(c, s, 3, now);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW) {
            a = duro_arena_create();
            w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
            if (w == NULL || (w->arena = a, read_work_row(a, s, w) != 0))
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            else
                step = duro__sqlite_step(p, c, s);
        }
        if (rc == DURO_OK && step != SQLITE_DONE)
            rc = duro__sqlite_error(c, step, op, err);
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

int duro__sqlite_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                                 duro_worker_item **out, duro_error *err)
{
    static const char op[] = "fetch_work_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    int rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    duro_worker_item *w = NULL;
    rc = fetch_work_in_transaction(p, c, lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

/* Updates the worker row the token still holds (expired or not: only
 * another fetch, which replaces the token, ends a work item's lock) with
 * `update` (WQ_RENEW with `renewal`, or WQ_ABANDON: ?1 row, ?2 token, ?3
 * now + ms). When no row matched, a probe by primary key tells a row that
 * is gone (DURO_NOT_FOUND for a renewal, else DURO_LOCK_LOST) from one that
 * another fetch took or that was released (DURO_LOCK_LOST). Row ids are
 * rowids: after the row with the highest id is deleted, the next insert
 * may reuse its id, so a gone row can read as taken (provider.h allows
 * it). */
static int update_work_row(duro__sqlite_provider *p,
                           duro__sqlite_stmt_id update, int64_t id,
                           const char *token, int64_t ms, int renewal,
                           const char *op, duro_error *err)
{
    duro__sqlite_conn *c;
    /* A renewal has a deadline: it goes ahead of writers that arrive while
     * it waits, and extends from when it runs, not from when it asked. */
    int rc = renewal ? duro__sqlite_write_begin_urgent(p, op, &c, err)
                     : duro__sqlite_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, update, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_i64(c, s, 1, id);
        duro__sqlite_bind_text(c, s, 2, token);
        duro__sqlite_bind_i64(c, s, 3, after_ms(now, ms));
        rc = duro__sqlite_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && sqlite3_changes(c->db) == 0) {
        s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_EXISTS, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        int step = SQLITE_DONE;
        if (rc == DURO_OK) {
            duro__sqlite_bind_i64(c, s, 1, id);
            step = duro__sqlite_step(p, c, s);
            if (step != SQLITE_ROW && step != SQLITE_DONE)
                rc = duro__sqlite_error(c, step, op, err);
        }
        if (rc == DURO_OK && step == SQLITE_DONE && renewal)
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "sqlite %s: the work item is gone (cancelled "
                                "by a turn, acked, or its instance deleted)",
                                op);
        else if (rc == DURO_OK && step == SQLITE_DONE)
            rc = lock_lost(op,
                           "the work item is gone (cancelled by a turn, "
                           "acked, or its instance deleted)",
                           err);
        else if (rc == DURO_OK)
            rc = lock_lost(op,
                           "another fetch took the work item after the lock "
                           "expired, or it was released",
                           err);
    }
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    return duro__sqlite_write_commit(p, c, op, err);
}

int duro__sqlite_renew_work_item_lock(duro_provider *base,
                                      const char *lock_token, int64_t extend_ms,
                                      duro_error *err)
{
    static const char op[] = "renew_work_item_lock";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    int64_t id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'w', &id) != 0)
        return lock_lost(op, "not a work item lock token of this store", err);
    return update_work_row(sqlite_of(base), DURO__SQL_WQ_RENEW, id, lock_token,
                           extend_ms, 1, op, err);
}

/* One snapshot on a reader, one primary-key probe per token. */
int duro__sqlite_check_work_item_locks(duro_provider *base,
                                       const char *const *lock_tokens,
                                       size_t count, unsigned char *held,
                                       duro_error *err)
{
    static const char op[] = "check_work_item_locks";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (count == 0)
        return DURO_OK;
    if (lock_tokens == NULL || held == NULL)
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock_tokens or held is NULL");
    for (size_t i = 0; i < count; i++) {
        int rc = check_token(lock_tokens[i], err);
        if (rc != DURO_OK)
            return rc;
    }
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_BEGIN_READ, op, err);
    int rc = s != NULL ? duro__sqlite_run(p, c, s, op, err) : err->code;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (parse_token(lock_tokens[i], 'w', &id) != 0)
            continue;
        s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_HELD, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        duro__sqlite_bind_i64(c, s, 1, id);
        duro__sqlite_bind_text(c, s, 2, lock_tokens[i]);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW)
            held[i] = 1;
        else if (step != SQLITE_DONE)
            rc = duro__sqlite_error(c, step, op, err);
        sqlite3_reset(s);
    }
    duro__sqlite_reader_release(p, c);
    return rc;
}

/* ack_work_item, and with `next` the fetch of the next item in the same
 * transaction (ack_and_fetch_work_item). */
static int ack_work(duro_provider *base, const char *lock_token,
                    const duro_work_item *completion, int64_t lock_timeout_ms,
                    duro_worker_item **next, const char *op, duro_error *err)
{
    duro__sqlite_provider *p = sqlite_of(base);
    int64_t id;
    if (next != NULL)
        *next = NULL;
    int rc = check_token(lock_token, err);
    if (rc == DURO_OK && completion != NULL)
        rc = check_work_item(p, completion, 0, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'w', &id) != 0)
        return lock_lost(op, "not a work item lock token of this store", err);
    if (next != NULL)
        duro__sqlite_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_WQ_ACK, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_i64(c, s, 1, id);
        duro__sqlite_bind_text(c, s, 2, lock_token);
        rc = duro__sqlite_run(p, c, s, op, err);
    }
    /* No row deleted: the activity was cancelled (row deleted by a turn) or
     * its expired lock was taken by another fetch. Enqueue nothing. */
    if (rc == DURO_OK && sqlite3_changes(c->db) == 0)
        rc = lock_lost(op,
                       "the work item is gone (cancelled or acked) or its "
                       "lock was taken by another fetch",
                       err);
    int skip = 0;
    if (rc == DURO_OK && completion != NULL)
        rc = enqueue_in_transaction(p, c, completion, now, now, &skip, op, err);
    duro_worker_item *w = NULL;
    if (rc == DURO_OK && next != NULL)
        rc = fetch_work_in_transaction(p, c, lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        return rc;
    }
    if (completion != NULL && !skip)
        duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

int duro__sqlite_ack_work_item(duro_provider *base, const char *lock_token,
                               const duro_work_item *completion,
                               duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    return ack_work(base, lock_token, completion, 0, NULL, "ack_work_item",
                    err);
}

int duro__sqlite_ack_and_fetch_work_item(duro_provider *base,
                                         const char *lock_token,
                                         const duro_work_item *completion,
                                         int64_t lock_timeout_ms,
                                         duro_worker_item **next,
                                         duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    return ack_work(base, lock_token, completion, lock_timeout_ms, next,
                    "ack_and_fetch_work_item", err);
}

int duro__sqlite_abandon_work_item(duro_provider *base, const char *lock_token,
                                   int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_work_item";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    duro__sqlite_provider *p = sqlite_of(base);
    int64_t id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'w', &id) != 0)
        return lock_lost(op, "not a work item lock token of this store", err);
    rc = update_work_row(p, DURO__SQL_WQ_ABANDON, id, lock_token, delay_ms, 0,
                         op, err);
    if (rc == DURO_OK)
        duro__sqlite_signal(p, DURO_QUEUE_WORKER, 1);
    return rc;
}
