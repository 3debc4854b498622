/* pg_queue.c - the two queues of the PostgreSQL provider: fetch, ack,
 * abandon and renew on the orchestrator queue (instance locks live in
 * orchestrator_ready) and the worker queue, and client enqueue. Every write
 * is one BEGIN ... COMMIT transaction on one pooled connection, rolled back
 * whole on any failure; fetches claim rows with FOR UPDATE SKIP LOCKED, so
 * concurrent fetchers (threads or processes) never take the same row. Any
 * thread. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/postgres/pg_internal.h"
#include "providers/postgres/pg_provider.h"

#define TOKEN_MAX 64      /* "o<ready id>.<32 hex>" */
#define FETCH_ATTEMPTS 64 /* readiness repairs per fetch before giving up */

static duro__pg_provider *pg_of(duro_provider *p)
{
    return (duro__pg_provider *)p;
}

static int64_t after_ms(int64_t now, int64_t delay_ms)
{
    return delay_ms > 0 ? duro__add_ms(now, delay_ms) : now;
}

/* ---- lock tokens -------------------------------------------------------
 * "o<ready id>.<32 hex>" for an instance lock, "w<worker row id>.<32
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
    return duro_error_set(err, DURO_LOCK_LOST, 0, "postgres %s: lock lost: %s",
                          op, why);
}

/* ---- input checks ------------------------------------------------------ */

static int check_work_item(const duro__pg_provider *p, const duro_work_item *it,
                           int worker, duro_error *err)
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

static int check_ack(const duro__pg_provider *p, const duro_orch_ack *ack,
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
        if ((rc = duro__pg_check_id("cancelled activity instance id",
                                    ack->cancelled_activities[i].instance_id,
                                    err)) != DURO_OK)
            return rc;
    if (ack->meta != NULL)
        return check_meta(p, ack->meta, err);
    return DURO_OK;
}

/* ---- shared pieces ------------------------------------------------------ */

void *duro__pg_arena_grow(duro_arena *a, void *old, size_t count, size_t *cap,
                          size_t elem)
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
static int create_instance(duro__pg_provider *p, duro__pg_conn *c,
                           const duro_work_item *it, int64_t now, int *created,
                           const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_CREATE, op, err);
    if (s == NULL)
        return err->code;
    const char *parent = nonempty(it->parent_instance);
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
static void bind_message(duro__pg_conn *c, duro__pg_statement *s,
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
    duro__pg_bind_text(c, s, 12, nonempty(it->parent_instance));
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
    bind_message(c, s, it, now, visible_at);
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

/* Sets the readiness of an instance whose lock is being released from its
 * remaining messages: ready at the earliest (but not before `hold`, an
 * abandon delay; 0 for none), or no row when nothing is queued. *queued
 * (may be NULL) says whether messages remain. */
static int settle_ready(duro__pg_provider *p, duro__pg_conn *c,
                        int64_t ready_id, const char *instance_id, int64_t hold,
                        int *queued, const char *op, duro_error *err)
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

/* Finds the instance held by an orchestration lock token (unexpired),
 * row-locking its ready row until the transaction ends, and fills *h. */
typedef struct lock_holder {
    char instance_id[DURO__PG_NAME_MAX + 1];
    int exists;       /* the instance row is there */
    uint64_t current; /* its current execution, 0 when none */
    int has_events;   /* `current` has an executions row ... */
    uint64_t events;  /* ... holding this many events */
} lock_holder;

static int lock_and_current(duro__pg_provider *p, duro__pg_conn *c,
                            int64_t ready_id, const char *token, int64_t now,
                            lock_holder *h, const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_READY_HOLDER_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_i64(c, s, 1, ready_id);
    duro__pg_bind_text(c, s, 2, token);
    int rc = duro__pg_step(p, c, s);
    if (rc == DURO__PG_DONE)
        return lock_lost(op,
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
        return lock_lost(op, "the instance lock expired", err);
    return DURO_OK;
}

/* ---- reading rows into items --------------------------------------------- */

/* A row of READY_CLAIM (columns 0..16; the run times are 35, 36). */
static int read_message(duro_arena *a, duro__pg_statement *s,
                        duro_work_item *it)
{
    it->kind = (duro_work_kind)duro__pg_column_int(s, 0);
    it->execution_id = (uint64_t)duro__pg_column_int64(s, 2);
    it->source_id = (uint64_t)duro__pg_column_int64(s, 3);
    it->category = duro__pg_column_int(s, 8);
    it->parent_execution = (uint64_t)duro__pg_column_int64(s, 12);
    it->parent_event_id = (uint64_t)duro__pg_column_int64(s, 13);
    it->fire_at_ms = duro__pg_column_int64(s, 14);
    it->attempt = (uint32_t)duro__pg_column_int64(s, 15);
    it->flags = (uint32_t)duro__pg_column_int64(s, 16);
    it->started_ms = duro__pg_column_int64(s, 35);
    it->finished_ms = duro__pg_column_int64(s, 36);
    if (duro__pg_column_text(a, s, 1, &it->instance_id) ||
        duro__pg_column_text(a, s, 4, &it->name) ||
        duro__pg_column_text(a, s, 5, &it->version) ||
        duro__pg_column_text(a, s, 6, &it->payload) ||
        duro__pg_column_text(a, s, 7, &it->error) ||
        duro__pg_column_text(a, s, 9, &it->reason) ||
        duro__pg_column_text(a, s, 10, &it->requested_by) ||
        duro__pg_column_text(a, s, 11, &it->parent_instance))
        return -1;
    return 0;
}

/* A row of HISTORY_READ (columns DURO__PG_HISTORY_COLUMNS). */
static int read_event(duro_arena *a, duro__pg_statement *s, duro_event *ev)
{
    ev->event_id = (uint64_t)duro__pg_column_int64(s, 0);
    ev->kind = (duro_event_kind)duro__pg_column_int(s, 1);
    ev->source_event_id = (uint64_t)duro__pg_column_int64(s, 2);
    ev->timestamp_ms = duro__pg_column_int64(s, 3);
    ev->category = duro__pg_column_int(s, 8);
    ev->ref_execution = (uint64_t)duro__pg_column_int64(s, 12);
    ev->ref_event_id = (uint64_t)duro__pg_column_int64(s, 13);
    ev->fire_at_ms = duro__pg_column_int64(s, 14);
    ev->attempt = (uint32_t)duro__pg_column_int64(s, 15);
    ev->flags = (uint32_t)duro__pg_column_int64(s, 16);
    ev->started_ms = duro__pg_column_int64(s, 17);
    ev->finished_ms = duro__pg_column_int64(s, 18);
    if (duro__pg_column_text(a, s, 4, &ev->name) ||
        duro__pg_column_text(a, s, 5, &ev->version) ||
        duro__pg_column_text(a, s, 6, &ev->payload) ||
        duro__pg_column_text(a, s, 7, &ev->error) ||
        duro__pg_column_text(a, s, 9, &ev->reason) ||
        duro__pg_column_text(a, s, 10, &ev->requested_by) ||
        duro__pg_column_text(a, s, 11, &ev->ref_instance))
        return -1;
    return 0;
}

/* Appends the event on s's row to (*events)[*count] in a (*cap grown as
 * needed); -1 when out of memory. */
static int append_event(duro_arena *a, duro__pg_statement *s,
                        duro_event **events, size_t *count, size_t *cap)
{
    if (*count == *cap) {
        *events =
            duro__pg_arena_grow(a, *events, *count, cap, sizeof(duro_event));
        if (*events == NULL)
            return -1;
    }
    if (read_event(a, s, &(*events)[*count]) != 0)
        return -1;
    (*count)++;
    return 0;
}

int duro__pg_read_events(duro__pg_provider *p, duro__pg_conn *c, duro_arena *a,
                         const char *instance_id, uint64_t execution_id,
                         uint64_t after, duro_event **events, size_t *count,
                         const char *op, duro_error *err)
{
    *events = NULL;
    *count = 0;
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_HISTORY_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    duro__pg_bind_u64(c, s, 2, execution_id);
    duro__pg_bind_u64(c, s, 3, after);
    size_t cap = 0;
    int rc;
    while ((rc = duro__pg_step(p, c, s)) == DURO__PG_ROW)
        if (append_event(a, s, events, count, &cap) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc != DURO__PG_DONE)
        return duro__pg_error(c, rc, op, err);
    return DURO_OK;
}

/* ---- array literals ---------------------------------------------------------
 * Statements over many rows bind each column as one PostgreSQL array
 * literal: {elem,elem,...} built in a duro__strbuf. */

static void cols_open(duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        duro__strbuf_open(&b[i], '{');
}

/* Closes n literals; 1 when any ran out of memory. */
static int cols_close(duro__strbuf *b, size_t n)
{
    int oom = 0;
    for (size_t i = 0; i < n; i++) {
        duro__strbuf_add(&b[i], "}", 1);
        oom |= b[i].oom;
    }
    return oom;
}

static void cols_free(duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        duro__free(b[i].s);
        b[i].s = NULL;
    }
}

static void col_num(duro__strbuf *b, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", (long long)v);
    duro__strbuf_sep(b);
    duro__strbuf_add(b, num, (size_t)n);
}

static void col_text(duro__strbuf *b, const char *v)
{
    duro__strbuf_sep(b);
    if (v == NULL)
        duro__strbuf_add(b, "NULL", 4);
    else
        duro__strbuf_quoted(b, v);
}

static void append_event_columns(duro__strbuf *col, const duro_event *ev);

/* Binds n closed literals as parameters 1..n of s and runs it; returns the
 * step. The caller resets s before the literals go. */
static int run_cols(duro__pg_provider *p, duro__pg_conn *c,
                    duro__pg_statement *s, duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        duro__pg_bind_text(c, s, (int)i + 1, b[i].s);
    return duro__pg_step(p, c, s);
}

/* ---- releases -------------------------------------------------------------
 * What this process may hold locked under a token that no caller will use
 * again, released by its next fetch rather than left until the lock
 * expires (orchestration_lock_timeout_ms, worker_lock_timeout_ms; 30 s by
 * default). Three ways it happens, all when the server goes away (a
 * restart, a failover, a network cut) or does not answer in time:
 * - a claim whose answer was lost: its COMMIT (or the one statement that
 *   is its own transaction) may have committed, locking items under a
 *   token only the lost answer carried. The token's random part is made
 *   here before the claim is sent ('O', 'W': its hex), so the rows whose
 *   tokens end with it can be found and released;
 * - an abandon that failed retryably ('o', 'w': its token): the runtime
 *   abandons a turn whose ack failed, or an activity it could not ack, and
 *   lets the token go whatever the abandon returns. After a restart the ack
 *   failed (connection lost), its retry and the abandon failed too (the
 *   server was still down), and the instance stayed locked: 5 to 11 of
 *   2,000 instances took 30 s more after four restarts;
 * - an activity ack committed without waiting for the flush
 *   (WQ_ACK_COMPLETE*) and lost in a server crash: its row comes back
 *   locked by the token the worker had, which it let go when the ack
 *   succeeded. The latest such acks are kept (a ring of
 *   DURO__PG_ACKED_MAX); when a connection that broke is opened again, those
 *   committed up to ACK_LOSS_MS before it broke become suspects, released
 *   in one statement (a row whose ack stood is gone: nothing to release).
 * Kept in a fixed table (the oldest dropped when full: its lock expires as
 * before), released at the start of the next fetch of either queue (one
 * atomic load when there is nothing), one thread at a time; a release that
 * fails retryably (the store still away) stays for the next fetch. */

static int abandon_orch(duro__pg_provider *p, int64_t ready_id,
                        const char *lock_token, int64_t delay_ms,
                        const char *op, duro_error *err);
static int update_work_row(duro__pg_provider *p, duro__pg_stmt_id update,
                           int64_t id, const char *token, int64_t ms,
                           int renewal, const char *op, duro_error *err);

/* Keeps a lock to release (kind and text as duro__pg_release's). */
static void keep_release(duro__pg_provider *p, char kind, const char *text,
                         int64_t delay_ms)
{
    if (strlen(text) >= sizeof(p->releases[0].text))
        return; /* not a token of this provider */
    pthread_mutex_lock(&p->release_lock);
    int known = 0;
    for (int i = 0; i < p->releases_kept && !known; i++)
        known = p->releases[i].kind == kind &&
                strcmp(p->releases[i].text, text) == 0;
    if (!known) {
        if (p->releases_kept == DURO__PG_RELEASES_MAX) {
            memmove(p->releases, p->releases + 1,
                    sizeof(p->releases[0]) * (DURO__PG_RELEASES_MAX - 1));
            p->releases_kept--;
        }
        duro__pg_release *r = &p->releases[p->releases_kept++];
        r->kind = kind;
        r->delay_ms = delay_ms;
        snprintf(r->text, sizeof(r->text), "%s", text);
        atomic_store(&p->releases_count,
                     p->releases_kept + (int)p->suspect_count);
    }
    pthread_mutex_unlock(&p->release_lock);
}

/* A claim (token hex `hex`, of kind 'O' or 'W') failed with rc: when its
 * connection was lost (DURO_STORAGE, retryable) it may have committed, so
 * what it locked is released by the next fetch. A failure that changed
 * nothing for sure (DURO_BUSY: a lock it waited for, a deadlock) keeps
 * nothing. */
static void keep_unknown_claim(duro__pg_provider *p, char kind, const char *hex,
                               int rc, const duro_error *err)
{
    if (rc == DURO_STORAGE && err->retryable)
        keep_release(p, kind, hex, 0);
}

/* Abandons every instance lock whose token ends with claim hex `hex`. */
static int release_orch_claim(duro__pg_provider *p, const char *hex,
                              const char *op, duro_error *err)
{
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_READY_CLAIMED_BY, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    char **tokens = NULL;
    size_t n = 0, cap = 0;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, hex);
        int step = duro__pg_step(p, c, s);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            if (n == cap) {
                size_t more = cap != 0 ? cap * 2 : 16;
                char **grown = duro__realloc(tokens, more * sizeof(*tokens));
                if (grown == NULL) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
                tokens = grown;
                cap = more;
            }
            tokens[n] = duro__strdup(duro__pg_column_text_raw(s, 0));
            if (tokens[n++] == NULL)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        int64_t ready_id;
        if (tokens[i] == NULL || parse_token(tokens[i], 'o', &ready_id) != 0)
            continue;
        duro_error one;
        int r = abandon_orch(p, ready_id, tokens[i], 0, op, &one);
        if (r != DURO_OK && one.retryable) {
            *err = one;
            rc = r;
        }
    }
    for (size_t i = 0; i < n; i++)
        duro__free(tokens[i]);
    duro__free(tokens);
    return rc;
}

/* Releases every work item lock whose token ends with claim hex `hex`. */
static int release_work_claim(duro__pg_provider *p, const char *hex,
                              const char *op, duro_error *err)
{
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_WQ_RELEASE_CLAIMED, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    int released = 0;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, hex);
        duro__pg_bind_i64(c, s, 2, duro__wall_ms());
        rc = duro__pg_run(p, c, s, op, err);
        released = rc == DURO_OK ? duro__pg_changes(c) : 0;
    }
    duro__pg_reader_release(p, c);
    if (released > 0)
        duro__pg_signal(p, DURO_QUEUE_WORKER, (size_t)released);
    return rc;
}

static int release_one(duro__pg_provider *p, const duro__pg_release *r,
                       duro_error *err)
{
    int64_t id;
    duro_error_clear(err);
    switch (r->kind) {
    case 'o':
        if (parse_token(r->text, 'o', &id) != 0)
            return DURO_OK;
        return abandon_orch(p, id, r->text, r->delay_ms,
                            "abandon_orchestration_item, again", err);
    case 'w':
        if (parse_token(r->text, 'w', &id) != 0)
            return DURO_OK;
        if (update_work_row(p, DURO__SQL_WQ_ABANDON, id, r->text, r->delay_ms,
                            0, "abandon_work_item, again", err) != DURO_OK)
            return err->code;
        duro__pg_signal(p, DURO_QUEUE_WORKER, 1);
        return DURO_OK;
    case 'O':
        return release_orch_claim(p, r->text, "release of a lost claim", err);
    default:
        return release_work_claim(p, r->text, "release of a lost claim", err);
    }
}

/* How long before a connection broke an activity ack committed without
 * waiting for the flush may have been lost with the server: PostgreSQL
 * flushes such commits within 3 x wal_writer_delay (600 ms by default),
 * and a connection idle in the pool is found broken only when taken. */
#define ACK_LOSS_MS 3000

/* Remembers the tokens of n activity acks that committed without waiting
 * for the flush (the oldest forgotten beyond DURO__PG_ACKED_MAX). */
static void note_async_acks(duro__pg_provider *p, const char *const *tokens,
                            size_t n)
{
    int64_t now = duro__mono_ms();
    pthread_mutex_lock(&p->release_lock);
    if (p->acked == NULL) {
        p->acked = duro__calloc(DURO__PG_ACKED_MAX, sizeof(*p->acked));
        p->suspects = duro__calloc(DURO__PG_ACKED_MAX, sizeof(*p->suspects));
    }
    for (size_t i = 0; p->acked != NULL && p->suspects != NULL && i < n; i++) {
        if (strlen(tokens[i]) >= DURO__PG_TOKEN_MAX)
            continue;
        duro__pg_acked *a = &p->acked[p->acked_next];
        a->at_ms = now;
        snprintf(a->token, sizeof(a->token), "%s", tokens[i]);
        p->acked_next = (p->acked_next + 1) % DURO__PG_ACKED_MAX;
        if (p->acked_count < DURO__PG_ACKED_MAX)
            p->acked_count++;
    }
    pthread_mutex_unlock(&p->release_lock);
}

void duro__pg_reconnected(duro__pg_provider *p, int64_t broken_ms)
{
    pthread_mutex_lock(&p->release_lock);
    for (size_t i = 0; p->acked != NULL && i < p->acked_count; i++) {
        duro__pg_acked *a = &p->acked[i];
        if (a->token[0] == '\0' || a->at_ms < broken_ms - ACK_LOSS_MS ||
            p->suspect_count == DURO__PG_ACKED_MAX)
            continue;
        memcpy(p->suspects[p->suspect_count++], a->token, sizeof(a->token));
        a->token[0] = '\0';
    }
    atomic_store(&p->releases_count, p->releases_kept + (int)p->suspect_count);
    pthread_mutex_unlock(&p->release_lock);
}

/* Releases the rows of the suspects[0 .. n) whose tokens still hold them,
 * in one statement. */
static int release_suspects(duro__pg_provider *p,
                            char (*suspects)[DURO__PG_TOKEN_MAX], size_t n,
                            duro_error *err)
{
    static const char op[] = "release of activity acks a crash may have lost";
    duro__strbuf col[2];
    memset(col, 0, sizeof(col));
    cols_open(col, 2);
    for (size_t i = 0; i < n; i++) {
        int64_t id;
        if (parse_token(suspects[i], 'w', &id) != 0)
            continue;
        col_num(&col[0], id);
        col_text(&col[1], suspects[i]);
    }
    int rc = DURO_OK;
    int released = 0;
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = NULL;
    if (cols_close(col, 2))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_WQ_RELEASE_ACKED, op, err)) ==
             NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 3, duro__wall_ms());
        int step = run_cols(p, c, s, col, 2);
        if (step != DURO__PG_DONE && step != DURO__PG_ROW)
            rc = duro__pg_error(c, step, op, err);
        else
            released = duro__pg_changes(c);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    cols_free(col, 2);
    if (released > 0)
        duro__pg_signal(p, DURO_QUEUE_WORKER, (size_t)released);
    return rc;
}

/* Releases what keep_release kept and the suspects, at the start of a
 * fetch; nothing (one atomic load) when there is nothing, or while another
 * thread does it. */
static void release_kept(duro__pg_provider *p)
{
    if (atomic_load_explicit(&p->releases_count, memory_order_relaxed) == 0)
        return;
    duro__pg_release todo[DURO__PG_RELEASES_MAX];
    char(*suspects)[DURO__PG_TOKEN_MAX] = NULL;
    size_t nsuspects = 0;
    pthread_mutex_lock(&p->release_lock);
    int n = p->releasing ? 0 : p->releases_kept;
    if (!p->releasing && p->suspect_count > 0) {
        suspects = duro__malloc(p->suspect_count * sizeof(*suspects));
        if (suspects != NULL) {
            nsuspects = p->suspect_count;
            memcpy(suspects, p->suspects, nsuspects * sizeof(*suspects));
            p->suspect_count = 0;
        }
    }
    if (n > 0 || nsuspects > 0) {
        memcpy(todo, p->releases, sizeof(todo[0]) * (size_t)n);
        p->releases_kept = 0;
        atomic_store(&p->releases_count, (int)p->suspect_count);
        p->releasing = 1;
    }
    pthread_mutex_unlock(&p->release_lock);
    if (n == 0 && nsuspects == 0)
        return;
    duro_error err;
    if (nsuspects > 0 &&
        release_suspects(p, suspects, nsuspects, &err) != DURO_OK &&
        err.retryable) {
        /* the store is still away: again at the next fetch */
        pthread_mutex_lock(&p->release_lock);
        for (size_t i = 0;
             i < nsuspects && p->suspect_count < DURO__PG_ACKED_MAX; i++)
            memcpy(p->suspects[p->suspect_count++], suspects[i],
                   sizeof(suspects[i]));
        atomic_store(&p->releases_count,
                     p->releases_kept + (int)p->suspect_count);
        pthread_mutex_unlock(&p->release_lock);
    }
    duro__free(suspects);
    int done = 0;
    for (; done < n; done++) {
        /* a lock gone meanwhile (expired and taken, or the claim did not
         * commit) is nothing to release; a store still away keeps the rest
         * for the next fetch */
        if (release_one(p, &todo[done], &err) != DURO_OK && err.retryable)
            break;
    }
    pthread_mutex_lock(&p->release_lock);
    p->releasing = 0;
    pthread_mutex_unlock(&p->release_lock);
    for (int i = done; i < n; i++)
        keep_release(p, todo[i].kind, todo[i].text, todo[i].delay_ms);
}

/* ---- orchestrator queue: fetch ------------------------------------------- */

/* Fills the locked instance's messages, metadata and history into item. */
/* The instance row of a READY_CLAIM row (columns 22..34). */
#define CLAIM_META_COLUMN 22

static int read_claimed_meta(duro_orch_item *item, duro__pg_statement *s)
{
    duro_arena *a = item->arena;
    const int m = CLAIM_META_COLUMN;
    item->status = duro__pg_column_null(s, m) ? DURO_STATUS_NOT_FOUND
                                              : duro__pg_column_int(s, m);
    item->execution_id = (uint64_t)duro__pg_column_int64(s, m + 1);
    item->parent_execution = (uint64_t)duro__pg_column_int64(s, m + 5);
    item->parent_event_id = (uint64_t)duro__pg_column_int64(s, m + 6);
    item->cancel_requested_ms = duro__pg_column_int64(s, m + 8);
    item->history_total = item->execution_id != 0
                              ? (uint64_t)duro__pg_column_int64(s, m + 12)
                              : 0;
    if (duro__pg_column_text(a, s, m + 2, &item->name) ||
        duro__pg_column_text(a, s, m + 3, &item->version) ||
        duro__pg_column_text(a, s, m + 4, &item->parent_instance) ||
        duro__pg_column_text(a, s, m + 7, &item->custom_status) ||
        duro__pg_column_text(a, s, m + 9, &item->cancel_reason) ||
        duro__pg_column_text(a, s, m + 10, &item->cancelled_by) ||
        duro__pg_column_text(a, s, m + 11, &item->last_problem))
        return -1;
    return 0;
}

/* The history of a claimed item that the caller's cache lacks. */
static int load_claimed_history(duro__pg_provider *p, duro__pg_conn *c,
                                duro_orch_item *item,
                                const duro_history_cache *cache, const char *op,
                                duro_error *err)
{
    item->history_offset = duro__history_offset(
        cache, item->instance_id, item->execution_id, item->history_total);
    if (item->history_total == item->history_offset)
        return DURO_OK;
    return duro__pg_read_events(p, c, item->arena, item->instance_id,
                                item->execution_id, item->history_offset,
                                &item->history, &item->history_count, op, err);
}

/* Appends the message on s's claim row to item (*cap grown as needed),
 * raising item->attempt to its fetch count; -1 when out of memory. */
static int append_claimed_message(duro_orch_item *item, duro__pg_statement *s,
                                  size_t *cap)
{
    if (item->message_count == *cap) {
        item->messages = duro__pg_arena_grow(item->arena, item->messages,
                                             item->message_count, cap,
                                             sizeof(duro_work_item));
        if (item->messages == NULL)
            return -1;
    }
    if (read_message(item->arena, s, &item->messages[item->message_count]) != 0)
        return -1;
    uint32_t fetches = (uint32_t)duro__pg_column_int64(s, 17);
    item->attempt = DURO__MAX(item->attempt, fetches);
    item->message_count++;
    return 0;
}

/* Reads the messages of a claim whose first row s is on, and ends s. */
static int read_claimed_messages(duro__pg_provider *p, duro__pg_conn *c,
                                 duro__pg_statement *s, duro_orch_item *item,
                                 const char *op, duro_error *err)
{
    size_t cap = 0;
    int step = DURO__PG_ROW;
    for (; step == DURO__PG_ROW; step = duro__pg_step(p, c, s))
        if (append_claimed_message(item, s, &cap) != 0)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (step != DURO__PG_DONE)
        return duro__pg_error(c, step, op, err);
    duro__pg_reset(s);
    return DURO_OK;
}

/* Binds a claim's visibility time ($1), its token's random part ($2, the
 * caller's fresh duro__random_token, which must outlive the step: the
 * caller keeps it to release what the claim locked should its outcome be
 * unknown) and its lock's end ($3). */
static void bind_claim(duro__pg_conn *c, duro__pg_statement *s,
                       const char *token_hex, int64_t now, int64_t until)
{
    duro__pg_bind_i64(c, s, 1, now);
    duro__pg_bind_text(c, s, 2, token_hex);
    duro__pg_bind_i64(c, s, 3, until);
}

/* 1 when the claim row s is on claimed nothing (column 18 NULL), after
 * noting when the queue's next message is due (column 21; none: NULL). */
static int claimed_nothing(duro__pg_provider *p, duro__pg_statement *s)
{
    if (!duro__pg_column_null(s, 18))
        return 0;
    duro__pg_note_due(
        p, DURO_QUEUE_ORCHESTRATOR,
        duro__pg_column_null(s, 21) ? INT64_MAX : duro__pg_column_int64(s, 21));
    return 1;
}

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
    int64_t until = after_ms(duro__wall_ms(), lock_timeout_ms);
    int rc = DURO_OK;
    int found = 0;
    for (int attempt = 0; rc == DURO_OK && !found && attempt < FETCH_ATTEMPTS;
         attempt++) {
        duro__pg_statement *s = duro__pg_stmt(p, c, claim, op, err);
        if (s == NULL) {
            rc = err->code;
            break;
        }
        bind_claim(c, s, hex, now, until);
        int step = duro__pg_step(p, c, s);
        if (step != DURO__PG_ROW) {
            rc = duro__pg_error(c, step, op, err);
            break;
        }
        if (claimed_nothing(p, s))
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
            rc = settle_ready(p, c, ready_id, item->instance_id, 0, NULL, op,
                              err);
            continue;
        }
        if (read_claimed_meta(item, s) != 0) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        rc = read_claimed_messages(p, c, s, item, op, err);
        if (rc == DURO_OK)
            rc = load_claimed_history(p, c, item, cache, op, err);
        found = rc == DURO_OK;
    }
    if (rc != DURO_OK || !found) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = item;
    return DURO_OK;
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
        return duro__pg_read_events(
            p, c, items[last]->arena, items[last]->instance_id,
            items[last]->execution_id, items[last]->history_offset,
            &items[last]->history, &items[last]->history_count, op, err);
    duro__strbuf col[3];
    memset(col, 0, sizeof(col));
    cols_open(col, 3);
    size_t *place = duro__calloc(need, sizeof(*place)); /* ord -> item */
    size_t *cap = duro__calloc(n, sizeof(*cap));
    size_t k = 0;
    for (size_t i = 0; place != NULL && i < n; i++) {
        duro_orch_item *it = items[i];
        if (it->history_total == it->history_offset)
            continue;
        place[k++] = i;
        col_text(&col[0], it->instance_id);
        col_num(&col[1], (int64_t)it->execution_id);
        col_num(&col[2], (int64_t)it->history_offset);
    }
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (place == NULL || cap == NULL || cols_close(col, 3))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_HISTORY_READ_MANY, op, err)) ==
             NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        int step = run_cols(p, c, s, col, 3);
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
            if (append_event(it->arena, s, &it->history, &it->history_count,
                             &cap[i]) != 0) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    cols_free(col, 3);
    duro__free(place);
    duro__free(cap);
    return rc;
}

/* Up to max items with one claim (READY_CLAIM_MANY, or its _ASYNC form as
 * the transaction's only write; token hex `hex`) inside an open write
 * transaction: next[0 .. *got), distinct instances, oldest first. An
 * instance claimed with nothing visible has its readiness repaired and is
 * left out. */
static int fetch_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     duro__pg_stmt_id claim, const char *hex,
                                     int64_t lock_timeout_ms,
                                     const duro_history_cache *cache,
                                     int64_t now, size_t max,
                                     duro_orch_item **next, size_t *got,
                                     const char *op, duro_error *err)
{
    *got = 0;
    int64_t until = after_ms(duro__wall_ms(), lock_timeout_ms);
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
        bind_claim(c, s, hex, now, until);
        duro__pg_bind_i64(c, s, 4, (int64_t)max);
        duro_orch_item *item = NULL;
        int64_t item_ready = -1;
        size_t cap = 0;
        int step = duro__pg_step(p, c, s);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            if (claimed_nothing(p, s))
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
                    read_claimed_meta(item, s) != 0) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
            }
            if (append_claimed_message(item, s, &cap) != 0) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE && step != DURO__PG_ROW)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    for (size_t i = 0; i < repairs && rc == DURO_OK; i++)
        rc = settle_ready(p, c, repair_ids[i], repair_names[i], 0, NULL, op,
                          err);
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
    duro__pg_provider *p = pg_of(base);
    release_kept(p);
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
        keep_unknown_claim(p, 'O', hex, rc, err);
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

/* Appends one element to each of the 19 array literals of
 * HISTORY_INSERT_MANY ($3..$21). */
static void append_event_columns(duro__strbuf *col, const duro_event *ev)
{
    const int64_t ints[] = {(int64_t)ev->event_id,
                            (int64_t)ev->kind,
                            (int64_t)ev->source_event_id,
                            ev->timestamp_ms,
                            ev->category,
                            (int64_t)ev->ref_execution,
                            (int64_t)ev->ref_event_id,
                            ev->fire_at_ms,
                            (int64_t)ev->attempt,
                            (int64_t)ev->flags,
                            ev->started_ms,
                            ev->finished_ms};
    /* column index of each, in DURO__PG_HISTORY_COLUMNS order */
    static const int int_cols[] = {0, 1, 2, 3, 8, 12, 13, 14, 15, 16, 17, 18};
    const char *const texts[] = {ev->name,        ev->version, ev->payload,
                                 ev->error,       ev->reason,  ev->requested_by,
                                 ev->ref_instance};
    static const int text_cols[] = {4, 5, 6, 7, 9, 10, 11};
    for (size_t i = 0; i < DURO__ARRAY_LEN(int_cols); i++) {
        char num[24];
        int n = snprintf(num, sizeof(num), "%lld", (long long)ints[i]);
        duro__strbuf_sep(&col[int_cols[i]]);
        duro__strbuf_add(&col[int_cols[i]], num, (size_t)n);
    }
    for (size_t i = 0; i < DURO__ARRAY_LEN(text_cols); i++) {
        duro__strbuf *b = &col[text_cols[i]];
        duro__strbuf_sep(b);
        if (texts[i] == NULL)
            duro__strbuf_add(b, "NULL", 4);
        else
            duro__strbuf_quoted(b, texts[i]);
    }
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
        append_event_columns(col, &events[e]);
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
    const char *parent = nonempty(m->parent_instance);
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

/* ---- the statements a batch of turns shares --------------------------------
 * ack_and_fetch_orchestration_items writes the executions, events, work
 * items and metadata of all its turns in one statement each
 * (EXEC_CREATE_MANY, HISTORY_INSERT_BATCH, WQ_INSERT_MANY, META_WRITE_MANY)
 * and releases all their locks in one (READY_ACK_SETTLE_MANY): each column
 * a PostgreSQL array literal bound as one parameter.
 *
 * The batch must change what one-by-one acks in its order would. Within a
 * turn's own rows the order of its writes does not matter; across turns
 * the only write that reads another instance's metadata is a message to it
 * (enqueue_outbound: a start meets an existing instance, a cancel request
 * records itself on a live one), so the metadata gathered so far is
 * written before each such message. */

enum {
    EVENT_COLUMNS = 21,
    WORK_COLUMNS = 7,
    SETTLE_COLUMNS = 3,
    EXEC_COLUMNS = 4,
    META_COLUMNS = 18
};

typedef struct batch_cols {
    duro__strbuf ev[EVENT_COLUMNS]; /* instance, execution, then as
                                       HISTORY_INSERT_MANY's arrays */
    duro__strbuf wq[WORK_COLUMNS];
    duro__strbuf st[SETTLE_COLUMNS]; /* instance, token, ready id */
    duro__strbuf ex[EXEC_COLUMNS];   /* as EXEC_CREATE_MANY's arrays */
    duro__strbuf mt[META_COLUMNS];   /* as META_WRITE_MANY's arrays */
    size_t events, works, execs, metas;
} batch_cols;

static void batch_open(batch_cols *b)
{
    memset(b, 0, sizeof(*b));
    cols_open(b->ev, EVENT_COLUMNS);
    cols_open(b->wq, WORK_COLUMNS);
    cols_open(b->st, SETTLE_COLUMNS);
    cols_open(b->ex, EXEC_COLUMNS);
    cols_open(b->mt, META_COLUMNS);
}

static void batch_free(batch_cols *b)
{
    cols_free(b->ev, EVENT_COLUMNS);
    cols_free(b->wq, WORK_COLUMNS);
    cols_free(b->st, SETTLE_COLUMNS);
    cols_free(b->ex, EXEC_COLUMNS);
    cols_free(b->mt, META_COLUMNS);
}

/* Runs statement id over the n literals b (closed here) with `now` as
 * parameter n + 1; DURO_OK when it ran to its end. */
static int run_batch_statement(duro__pg_provider *p, duro__pg_conn *c,
                               duro__pg_stmt_id id, duro__strbuf *b, size_t n,
                               int64_t now, const char *op, duro_error *err)
{
    if (cols_close(b, n))
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    duro__pg_statement *s = duro__pg_stmt(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_i64(c, s, (int)n + 1, now);
    int step = run_cols(p, c, s, b, n);
    int rc = step == DURO__PG_DONE ? DURO_OK : duro__pg_error(c, step, op, err);
    duro__pg_reset(s);
    return rc;
}

/* Writes the metadata gathered in b, leaving b->mt open and empty. */
static int flush_batch_metas(duro__pg_provider *p, duro__pg_conn *c,
                             batch_cols *b, int64_t now, const char *op,
                             duro_error *err)
{
    if (b->metas == 0)
        return DURO_OK;
    int rc = run_batch_statement(p, c, DURO__SQL_META_WRITE_MANY, b->mt,
                                 META_COLUMNS, now, op, err);
    cols_free(b->mt, META_COLUMNS);
    memset(b->mt, 0, sizeof(b->mt));
    cols_open(b->mt, META_COLUMNS);
    b->metas = 0;
    return rc;
}

/* Writes the executions, events and work items gathered in b. */
static int flush_batch_rows(duro__pg_provider *p, duro__pg_conn *c,
                            batch_cols *b, int64_t now, const char *op,
                            duro_error *err)
{
    int rc = DURO_OK;
    if (b->execs > 0 &&
        (rc = run_batch_statement(p, c, DURO__SQL_EXEC_CREATE_MANY, b->ex,
                                  EXEC_COLUMNS, now, op, err)) != DURO_OK)
        return rc;
    if (cols_close(b->ev, EVENT_COLUMNS) || cols_close(b->wq, WORK_COLUMNS))
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (b->events > 0) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_HISTORY_INSERT_BATCH, op, err);
        if (s == NULL)
            return err->code;
        int step = run_cols(p, c, s, b->ev, EVENT_COLUMNS);
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
        int step = run_cols(p, c, s, b->wq, WORK_COLUMNS);
        if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
        duro__pg_reset(s);
    }
    return rc;
}

static int append_history(duro__pg_provider *p, duro__pg_conn *c,
                          const lock_holder *h, uint64_t execution_id,
                          const duro_orch_ack *ack, int64_t now, batch_cols *b,
                          const char *op, duro_error *err)
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
        col_text(&b->ex[0], instance_id);
        col_num(&b->ex[1], (int64_t)execution_id);
        col_text(&b->ex[2], m != NULL ? m->name : NULL);
        col_text(&b->ex[3], m != NULL ? m->version : NULL);
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
        col_text(&b->ev[0], instance_id);
        col_num(&b->ev[1], (int64_t)execution_id);
        append_event_columns(&b->ev[2], &ack->history_delta[i]);
        b->events++;
    }
    return DURO_OK;
}

/* The first writes of an ack whose lock h holds: checks, the execution of
 * a continue-as-new, the events and the work items - written at once, or
 * with b gathered into the batch's shared statements. */
static int ack_first_writes(duro__pg_provider *p, duro__pg_conn *c,
                            const lock_holder *h, const duro_orch_ack *ack,
                            int64_t now, batch_cols *b, const char *op,
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
        col_text(&b->wq[0], it->instance_id);
        col_num(&b->wq[1], (int64_t)exec);
        col_num(&b->wq[2], (int64_t)it->source_id);
        col_text(&b->wq[3], it->name);
        col_text(&b->wq[4], it->version);
        col_text(&b->wq[5], it->payload);
        col_num(&b->wq[6], (int64_t)it->attempt);
        b->works++;
    }
    return DURO_OK;
}

/* write_meta's and drop_dead_messages' writes gathered into b
 * (META_WRITE_MANY) instead. */
static void gather_meta(batch_cols *b, const char *instance_id,
                        uint64_t execution_id, const duro_instance_meta *m)
{
    int continued = m->status == DURO_STATUS_CONTINUED_AS_NEW;
    int finished = continued || duro_status_is_terminal(m->status);
    const char *parent = nonempty(m->parent_instance);
    col_text(&b->mt[0], instance_id);
    col_num(&b->mt[1], (int64_t)execution_id);
    col_num(&b->mt[2], continued ? DURO_STATUS_RUNNING : m->status);
    col_num(&b->mt[3], m->status);
    col_text(&b->mt[4], m->name);
    col_text(&b->mt[5], m->version);
    col_text(&b->mt[6], continued ? NULL : m->output);
    col_text(&b->mt[7], m->output);
    col_text(&b->mt[8], m->error);
    col_num(&b->mt[9], m->category);
    col_num(&b->mt[10], m->custom_status_set != 0);
    col_text(&b->mt[11], m->custom_status);
    col_text(&b->mt[12], parent);
    col_num(&b->mt[13], (int64_t)m->parent_execution);
    col_num(&b->mt[14], (int64_t)m->parent_event_id);
    col_num(&b->mt[15], finished || m->problem != NULL);
    col_text(&b->mt[16], m->problem);
    col_num(&b->mt[17], finished);
    b->metas++;
}

/* The rest of an ack, after its events and work items are written:
 * cancellations, outbound messages, the instance's metadata and, when it
 * ended, the messages nothing will read. */
static int ack_other_writes(duro__pg_provider *p, duro__pg_conn *c,
                            const lock_holder *h, const duro_orch_ack *ack,
                            int64_t now, batch_cols *b, const char *op,
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
    /* a message reads its target's metadata (see batch_cols) */
    if (ack->orchestrator_item_count > 0 && b != NULL &&
        (rc = flush_batch_metas(p, c, b, now, op, err)) != DURO_OK)
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
static int ack_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                              int64_t ready_id, const char *token,
                              const duro_orch_ack *ack, int64_t now,
                              int *queued, const char *op, duro_error *err)
{
    lock_holder h;
    int rc = lock_and_current(p, c, ready_id, token, now, &h, op, err);
    if (rc == DURO_OK && p->turn_ack_locked != NULL)
        p->turn_ack_locked(p->turn_ack_locked_arg); /* a test's hook */
    if (rc == DURO_OK)
        rc = ack_first_writes(p, c, &h, ack, now, NULL, op, err);
    if (rc == DURO_OK)
        rc = ack_other_writes(p, c, &h, ack, now, NULL, op, err);
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

/* The locks of n tokens (ready ids ids[]), row-locked as lock_and_current
 * does, into h[]: DURO_LOCK_LOST when any is not held or expired. */
static int lock_many(duro__pg_provider *p, duro__pg_conn *c, size_t n,
                     const int64_t *ids, const char *const *tokens, int64_t now,
                     lock_holder *h, const char *op, duro_error *err)
{
    /* a lock given twice: the first ack would release what the second
     * needs (the statement would return its row twice) */
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (ids[i] == ids[j])
                return lock_lost(op, "the same instance lock twice in one call",
                                 err);
    duro__strbuf col[2];
    memset(col, 0, sizeof(col));
    cols_open(col, 2);
    for (size_t i = 0; i < n; i++) {
        col_num(&col[0], ids[i]);
        col_text(&col[1], tokens[i]);
    }
    int rc = DURO_OK;
    duro__pg_statement *s = NULL;
    if (cols_close(col, 2))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_READY_HOLDER_MANY, op, err)) ==
             NULL)
        rc = err->code;
    size_t held = 0;
    if (rc == DURO_OK) {
        int step = run_cols(p, c, s, col, 2);
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
            lock_holder *x = &h[ord - 1];
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
    cols_free(col, 2);
    if (rc == DURO_OK && held < n)
        rc = lock_lost(op,
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
 * ack_in_transaction calls: each instance's events and work items before
 * its cancellations (an activity scheduled and cancelled in one turn),
 * every release last. */
static int ack_many_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                   size_t n, const char *const *tokens,
                                   const duro_orch_ack *acks, int64_t now,
                                   size_t *queued, const char *op,
                                   duro_error *err)
{
    *queued = 0;
    int64_t *ids = duro__calloc(n, sizeof(*ids));
    lock_holder *h = duro__calloc(n, sizeof(*h));
    batch_cols b;
    batch_open(&b);
    int rc = DURO_OK;
    if (ids == NULL || h == NULL) {
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        parse_token(tokens[i], 'o', &ids[i]);
    if ((rc = lock_many(p, c, n, ids, tokens, now, h, op, err)) != DURO_OK)
        goto done;
    if (p->turn_ack_locked != NULL)
        p->turn_ack_locked(p->turn_ack_locked_arg); /* a test's hook */
    for (size_t i = 0; i < n && rc == DURO_OK; i++)
        rc = ack_first_writes(p, c, &h[i], &acks[i], now, &b, op, err);
    if (rc == DURO_OK)
        rc = flush_batch_rows(p, c, &b, now, op, err);
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        rc = ack_other_writes(p, c, &h[i], &acks[i], now, &b, op, err);
        col_text(&b.st[0], h[i].instance_id);
        col_text(&b.st[1], tokens[i]);
        col_num(&b.st[2], ids[i]);
    }
    if (rc == DURO_OK)
        rc = flush_batch_metas(p, c, &b, now, op, err);
    if (rc == DURO_OK && cols_close(b.st, SETTLE_COLUMNS))
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_READY_ACK_SETTLE_MANY, op, err);
        if (s == NULL) {
            rc = err->code;
        } else {
            int step = run_cols(p, c, s, b.st, SETTLE_COLUMNS);
            if (step == DURO__PG_ROW)
                *queued = (size_t)duro__pg_column_int64(s, 0);
            else
                rc = duro__pg_error(c, step, op, err);
            duro__pg_reset(s);
        }
    }
done:
    batch_free(&b);
    duro__free(ids);
    duro__free(h);
    return rc;
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
    duro__pg_provider *p = pg_of(base);
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
    int64_t ready_id;
    for (size_t i = 0; i < n; i++)
        if (parse_token(lock_tokens[i], 'o', &ready_id) != 0)
            return lock_lost(
                op, "not an orchestration lock token of this store", err);
    release_kept(p);
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
        parse_token(lock_tokens[0], 'o', &ready_id);
        rc = ack_in_transaction(p, c, ready_id, lock_tokens[0], &acks[0], now,
                                &queued, op, err);
        outbound += queued ? 1 : 0;
    } else if (n > 1) {
        size_t queued = 0;
        rc = ack_many_in_transaction(p, c, n, lock_tokens, acks, now, &queued,
                                     op, err);
        outbound += queued;
    }
    /* Claims alone (no ack) need not wait for the WAL flush. */
    if (rc == DURO_OK && max_next == 1) {
        rc = fetch_orch_in_transaction(
            p, c, n == 0 ? DURO__SQL_READY_CLAIM_ASYNC : DURO__SQL_READY_CLAIM,
            hex, lock_timeout_ms, cache, now, &next[0], op, err);
        got = rc == DURO_OK && next[0] != NULL ? 1 : 0;
    } else if (rc == DURO_OK && max_next > 1) {
        rc = fetch_many_in_transaction(p, c,
                                       n == 0 ? DURO__SQL_READY_CLAIM_MANY_ASYNC
                                              : DURO__SQL_READY_CLAIM_MANY,
                                       hex, lock_timeout_ms, cache, now,
                                       max_next, next, &got, op, err);
    }
    if (rc == DURO_OK) {
        rc = duro__pg_write_commit(p, c, op, err);
        if (rc != DURO_OK && max_next > 0)
            keep_unknown_claim(p, 'O', hex, rc, err);
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

int duro__pg_ack_orchestration_item(duro_provider *base, const char *lock_token,
                                    const duro_orch_ack *ack, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    size_t none;
    return ack_orch(base, 1, &lock_token, ack, 0, NULL, 0, NULL, &none,
                    "ack_orchestration_item", err);
}

int duro__pg_ack_and_fetch_orchestration_item(
    duro_provider *base, const char *lock_token, const duro_orch_ack *ack,
    int64_t lock_timeout_ms, const duro_history_cache *cache,
    duro_orch_item **next, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    *next = NULL;
    size_t got;
    return ack_orch(base, 1, &lock_token, ack, lock_timeout_ms, cache, 1, next,
                    &got, "ack_and_fetch_orchestration_item", err);
}

int duro__pg_ack_and_fetch_orchestration_items(
    duro_provider *base, size_t n, const char *const *lock_tokens,
    const duro_orch_ack *acks, int64_t lock_timeout_ms,
    const duro_history_cache *cache, size_t max_next, duro_orch_item **next,
    size_t *next_count, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
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

/* abandon_orchestration_item of a token this provider issued (ready row
 * ready_id): its messages untagged, its lock released, the instance ready
 * after delay_ms. */
static int abandon_orch(duro__pg_provider *p, int64_t ready_id,
                        const char *lock_token, int64_t delay_ms,
                        const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    int rc = duro__pg_write_begin(p, op, &c, err);
    if (rc != DURO_OK)
        return rc;
    lock_holder h;
    rc = lock_and_current(p, c, ready_id, lock_token, now, &h, op, err);
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
        rc = settle_ready(p, c, ready_id, instance_id,
                          delay_ms > 0 ? after_ms(now, delay_ms) : 0, NULL, op,
                          err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

int duro__pg_abandon_orchestration_item(duro_provider *base,
                                        const char *lock_token,
                                        int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_orchestration_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    duro__pg_provider *p = pg_of(base);
    int64_t ready_id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'o', &ready_id) != 0)
        return lock_lost(op, "not an orchestration lock token of this store",
                         err);
    rc = abandon_orch(p, ready_id, lock_token, delay_ms, op, err);
    /* The caller lets the token go either way: when the store could not be
     * reached (or waited for), the provider abandons it again later. */
    if (rc != DURO_OK && err->retryable)
        keep_release(p, 'o', lock_token, delay_ms);
    return rc;
}

/* Updates a lock row its token still holds, unexpired, with `update`
 * (READY_RENEW: $1 row, $2 token, $3 now + ms, $4 now); fails
 * DURO_LOCK_LOST when no row matched. */
static int renew_lock(duro__pg_provider *p, duro__pg_stmt_id update,
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
        duro__pg_bind_i64(c, s, 3, after_ms(now, ms));
        duro__pg_bind_i64(c, s, 4, now);
        rc = duro__pg_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && duro__pg_changes(c) == 0)
        rc = lock_lost(op,
                       "the row is gone (acked, cancelled or deleted), the "
                       "token differs or the lock expired",
                       err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    return duro__pg_write_commit(p, c, op, err);
}

int duro__pg_renew_orchestration_item_lock(duro_provider *base,
                                           const char *lock_token,
                                           int64_t extend_ms, duro_error *err)
{
    static const char op[] = "renew_orchestration_item_lock";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    int64_t ready_id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'o', &ready_id) != 0)
        return lock_lost(op, "not an orchestration lock token of this store",
                         err);
    return renew_lock(pg_of(base), DURO__SQL_READY_RENEW, ready_id, lock_token,
                      extend_ms, op, err);
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
static int enqueue_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
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

int duro__pg_enqueue_for_orchestrator(duro_provider *base,
                                      const duro_work_item *item,
                                      int64_t delay_ms, duro_error *err)
{
    static const char op[] = "enqueue_for_orchestrator";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    duro__pg_provider *p = pg_of(base);
    int rc = check_work_item(p, item, 0, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    int skip = 0;
    rc = enqueue_in_transaction(p, c, item, now, after_ms(now, delay_ms), &skip,
                                op, err);
    if (rc != DURO_OK || skip) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    return DURO_OK;
}

/* ---- worker queue ----------------------------------------------------------
 */

/* The row WQ_FETCH returned, into a worker item. */
static int read_work_row(duro_arena *a, duro__pg_statement *s,
                         duro_worker_item *w)
{
    duro_work_item *it = &w->item;
    it->kind = DURO_WORK_ACTIVITY_EXECUTE;
    it->execution_id = (uint64_t)duro__pg_column_int64(s, 1);
    it->source_id = (uint64_t)duro__pg_column_int64(s, 2);
    it->attempt = (uint32_t)duro__pg_column_int64(s, 6);
    w->attempt = (uint32_t)duro__pg_column_int64(s, 7);
    if (duro__pg_column_text(a, s, 0, &it->instance_id) ||
        duro__pg_column_text(a, s, 3, &it->name) ||
        duro__pg_column_text(a, s, 4, &it->version) ||
        duro__pg_column_text(a, s, 5, &it->payload) ||
        duro__pg_column_text(a, s, 8, &w->lock_token))
        return -1;
    return 0;
}

/* The body of fetch_work_item inside an open write transaction; `claim`
 * is WQ_FETCH, or WQ_FETCH_ASYNC when the claim is its own transaction;
 * token_hex its token's random part (duro__random_token). */
static int fetch_work_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                     duro__pg_stmt_id claim,
                                     const char *token_hex,
                                     int64_t lock_timeout_ms, int64_t now,
                                     duro_worker_item **out, const char *op,
                                     duro_error *err)
{
    *out = NULL;
    duro_arena *a = NULL;
    duro_worker_item *w = NULL;
    duro__pg_statement *s = duro__pg_stmt(p, c, claim, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, token_hex);
        /* visible by the caller's `now` (read before it waited for the
         * write lock), locked from this moment: a wait never shortens the
         * lock (a lock born expired was taken by the next fetch) */
        duro__pg_bind_i64(c, s, 2, after_ms(duro__wall_ms(), lock_timeout_ms));
        duro__pg_bind_i64(c, s, 3, now);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_ROW && duro__pg_column_null(s, 8)) {
            duro__pg_note_due(p, DURO_QUEUE_WORKER,
                              duro__pg_column_null(s, 9)
                                  ? INT64_MAX
                                  : duro__pg_column_int64(s, 9));
            step = duro__pg_step(p, c, s);
        } else if (step == DURO__PG_ROW) {
            a = duro_arena_create();
            w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
            if (w == NULL || (w->arena = a, read_work_row(a, s, w) != 0))
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            else
                step = duro__pg_step(p, c, s);
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w;
    return DURO_OK;
}

int duro__pg_fetch_work_item(duro_provider *base, int64_t lock_timeout_ms,
                             duro_worker_item **out, duro_error *err)
{
    static const char op[] = "fetch_work_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__pg_provider *p = pg_of(base);
    release_kept(p);
    duro__pg_note_fetch(p, DURO_QUEUE_WORKER);
    int64_t now = duro__wall_ms();
    /* The claim is one statement: run alone, it is its own transaction
     * (one round trip instead of BEGIN, claim, COMMIT; most fetches of an
     * idle worker find nothing). */
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro_worker_item *w = NULL;
    char hex[33];
    duro__random_token(hex);
    int rc = fetch_work_in_transaction(p, c, DURO__SQL_WQ_FETCH_ASYNC, hex,
                                       lock_timeout_ms, now, &w, op, err);
    duro__pg_reader_release(p, c);
    if (rc == DURO_OK)
        *out = w;
    else
        keep_unknown_claim(p, 'W', hex, rc, err);
    return rc;
}

/* Updates the worker row the token still holds (expired or not: only
 * another fetch, which replaces the token, ends a work item's lock) with
 * `update` (WQ_RENEW with `renewal`, or WQ_ABANDON: $1 row, $2 token, $3
 * now + ms). When no row matched, a probe by primary key tells a row that
 * is gone (DURO_NOT_FOUND for a renewal, else DURO_LOCK_LOST) from one that
 * another fetch took or that was released (DURO_LOCK_LOST). Row ids come
 * from an identity column and are never reused. */
static int update_work_row(duro__pg_provider *p, duro__pg_stmt_id update,
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
        duro__pg_bind_i64(c, s, 3, after_ms(now, ms));
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
        duro__pg_write_rollback(p, c);
        return rc;
    }
    return duro__pg_write_commit(p, c, op, err);
}

int duro__pg_renew_work_item_lock(duro_provider *base, const char *lock_token,
                                  int64_t extend_ms, duro_error *err)
{
    static const char op[] = "renew_work_item_lock";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    int64_t id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'w', &id) != 0)
        return lock_lost(op, "not a work item lock token of this store", err);
    return update_work_row(pg_of(base), DURO__SQL_WQ_RENEW, id, lock_token,
                           extend_ms, 1, op, err);
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
        int rc = check_token(lock_tokens[i], err);
        if (rc != DURO_OK)
            return rc;
    }
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    int rc = DURO_OK;
    for (size_t i = 0; i < count && rc == DURO_OK; i++) {
        int64_t id;
        held[i] = 0;
        if (parse_token(lock_tokens[i], 'w', &id) != 0)
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

/* ack_work_item, and with `next` the fetch of the next item in the same
 * transaction (ack_and_fetch_work_item). */
/* ack_work for the common case, a completion that only queues a message:
 * one statement (WQ_ACK_COMPLETE, or WQ_ACK_COMPLETE_FETCH with `next`),
 * run alone as its own transaction. */
static int ack_work_one(duro__pg_provider *p, int64_t id,
                        const char *lock_token,
                        const duro_work_item *completion,
                        int64_t lock_timeout_ms, duro_worker_item **next,
                        const char *op, duro_error *err)
{
    int64_t now = duro__wall_ms();
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c,
                      next != NULL ? DURO__SQL_WQ_ACK_COMPLETE_FETCH
                                   : DURO__SQL_WQ_ACK_COMPLETE,
                      op, err);
    if (s == NULL) {
        duro__pg_reader_release(p, c);
        return err->code;
    }
    bind_message(c, s, completion, now, now);
    duro__pg_bind_i64(c, s, 20, id);
    duro__pg_bind_text(c, s, 21, lock_token);
    char token_hex[33];
    duro__random_token(token_hex);
    if (next != NULL) {
        duro__pg_bind_text(c, s, 22, token_hex);
        duro__pg_bind_i64(c, s, 23, after_ms(duro__wall_ms(), lock_timeout_ms));
    }
    int rc = DURO_OK;
    duro_worker_item *w = NULL;
    int step = duro__pg_step(p, c, s);
    if (step != DURO__PG_ROW) {
        rc = duro__pg_error(c, step, op, err);
    } else if (duro__pg_column_int64(s, next != NULL ? 9 : 0) == 0) {
        /* Nothing deleted, so nothing queued and nothing claimed. */
        rc = lock_lost(op,
                       "the work item is gone (cancelled or acked) or its "
                       "lock was taken by another fetch",
                       err);
    } else if (next != NULL && duro__pg_column_null(s, 0)) {
        duro__pg_note_due(p, DURO_QUEUE_WORKER,
                          duro__pg_column_null(s, 10)
                              ? INT64_MAX
                              : duro__pg_column_int64(s, 10));
    } else if (next != NULL) {
        duro_arena *a = duro_arena_create();
        w = a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
        if (w == NULL || (w->arena = a, read_work_row(a, s, w) != 0)) {
            /* committed: the claimed item is released by the next fetch */
            duro_arena_destroy(a);
            w = NULL;
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            keep_release(p, 'W', token_hex, 0);
        }
    }
    duro__pg_reader_release(p, c);
    if (rc != DURO_OK && next != NULL)
        keep_unknown_claim(p, 'W', token_hex, rc, err);
    if (rc != DURO_OK)
        return rc;
    note_async_acks(p, &lock_token, 1); /* committed without the flush */
    duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

/* ---- activity acks of many threads, one statement ------------------------
 * Worker slots ack their activities and claim their next ones from many
 * threads at once; on a server each statement costs an executor start, a
 * round trip and a commit. A slot queues its ack (a duro__pg_wq_req on its
 * stack); whoever finds no combined statement running takes every queued
 * ack with its lock timeout (up to COMBINE_MAX) and runs them as one
 * WQ_ACK_COMPLETE_FETCH_MANY, then marks them done; the others wait on
 * combine_cond. Acks that arrive while a statement runs go together in
 * the next. No thread waits for a statement that does not carry its ack
 * unless one is already running, so one ack alone costs what it did
 * before (WQ_ACK_COMPLETE_FETCH). Each ack gets its own outcome: acked,
 * or DURO_LOCK_LOST when its row was gone; the claimed items go one to
 * each acked caller.
 * A statement may wait for a readiness row another session holds (a
 * runtime stopped in the middle of its ack), up to lock_timeout; it must
 * hold up no ack but its own: a combined statement that fails DURO_BUSY
 * (nothing changed) has each of its acks run again alone on its own
 * thread; an ack that gave up waiting runs alone until it goes through
 * (p->contended); and an ack queued behind a statement that runs longer
 * than COMBINE_WAIT_MS runs alone instead of waiting on. */

#define COMBINE_MAX 64

typedef struct duro__pg_wq_req {
    int64_t id;
    const char *token;
    const duro_work_item *completion;
    int64_t lock_timeout_ms;
    int done;  /* under combine_lock */
    int taken; /* in a leader's batch, under combine_lock */
    int alone; /* the combined statement failed, changing nothing: the
                  caller runs its ack alone */
    int rc;
    duro_error err;
    duro_worker_item *next;
    struct duro__pg_wq_req *link;
} wq_req;

static const char gone_msg[] = "the work item is gone (cancelled or acked) or "
                               "its lock was taken by another fetch";

/* Runs n >= 2 queued acks as one statement; fills each one's outcome. */
static void run_combined(duro__pg_provider *p, wq_req **all, size_t count,
                         const char *op)
{
    enum { K_COLUMNS = 21 };
    /* A row acked twice at once with one token (used by two threads): the
     * second finds it gone, as it would after the first. With two tokens -
     * the current holder's, and an old one whose claim a server crash lost
     * (its ack retried after the restart, while the row was claimed again)
     * - the second runs alone after this statement: in it, both would be
     * joined to the one row deleted and queue two completions, and dropping
     * it instead (as before) dropped the holder's completion, the row left
     * locked by a token no one held until it expired. */
    wq_req *batch[COMBINE_MAX];
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const wq_req *same = NULL;
        for (size_t j = 0; j < n && same == NULL; j++)
            if (batch[j]->id == all[i]->id)
                same = batch[j];
        if (same != NULL && strcmp(same->token, all[i]->token) == 0)
            all[i]->rc = lock_lost(op, gone_msg, &all[i]->err);
        else if (same != NULL)
            all[i]->alone = 1;
        else
            batch[n++] = all[i];
    }
    duro__strbuf col[K_COLUMNS];
    memset(col, 0, sizeof(col));
    cols_open(col, K_COLUMNS);
    for (size_t i = 0; i < n; i++) {
        const duro_work_item *it = batch[i]->completion;
        col_num(&col[0], batch[i]->id);
        col_text(&col[1], batch[i]->token);
        col_num(&col[2], (int64_t)it->kind);
        col_text(&col[3], it->instance_id);
        col_num(&col[4], (int64_t)it->execution_id);
        col_num(&col[5], (int64_t)it->source_id);
        col_text(&col[6], it->name);
        col_text(&col[7], it->version);
        col_text(&col[8], it->payload);
        col_text(&col[9], it->error);
        col_num(&col[10], it->category);
        col_text(&col[11], it->reason);
        col_text(&col[12], it->requested_by);
        col_text(&col[13], nonempty(it->parent_instance));
        col_num(&col[14], (int64_t)it->parent_execution);
        col_num(&col[15], (int64_t)it->parent_event_id);
        col_num(&col[16], it->fire_at_ms);
        col_num(&col[17], (int64_t)it->attempt);
        col_num(&col[18], (int64_t)it->flags);
        col_num(&col[19], it->started_ms);
        col_num(&col[20], it->finished_ms);
        batch[i]->rc = DURO_LOCK_LOST; /* until its row is reported acked */
    }
    duro_error err;
    int rc = DURO_OK;
    int64_t now = duro__wall_ms();
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = NULL;
    duro_worker_item *claimed[COMBINE_MAX];
    size_t claims = 0, acked = 0;
    int64_t due = INT64_MAX;
    int due_known = 0;
    char token_hex[33];
    duro__random_token(token_hex);
    if (cols_close(col, K_COLUMNS))
        rc = duro_error_set(&err, DURO_NOMEM, 0, "out of memory");
    else if ((s = duro__pg_stmt(p, c, DURO__SQL_WQ_ACK_COMPLETE_FETCH_MANY, op,
                                &err)) == NULL)
        rc = err.code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 22, now);
        duro__pg_bind_text(c, s, 23, token_hex);
        duro__pg_bind_i64(c, s, 24,
                          after_ms(duro__wall_ms(), batch[0]->lock_timeout_ms));
        int step = run_cols(p, c, s, col, K_COLUMNS);
        for (; step == DURO__PG_ROW && rc == DURO_OK;
             step = duro__pg_step(p, c, s)) {
            int part = duro__pg_column_int(s, 9);
            if (part == 0 && !duro__pg_column_null(s, 10)) {
                int64_t id = duro__pg_column_int64(s, 10);
                for (size_t i = 0; i < n; i++)
                    if (batch[i]->id == id && batch[i]->rc != DURO_OK) {
                        batch[i]->rc = DURO_OK;
                        acked++;
                        break;
                    }
            } else if (part == 1 && claims < COMBINE_MAX) {
                duro_arena *a = duro_arena_create();
                duro_worker_item *w =
                    a != NULL ? duro_arena_alloc(a, sizeof(*w)) : NULL;
                if (w == NULL || (w->arena = a, read_work_row(a, s, w) != 0)) {
                    /* committed: the claimed items are released by the
                     * next fetch */
                    duro_arena_destroy(a);
                    rc = duro_error_set(&err, DURO_NOMEM, 0, "out of memory");
                    keep_release(p, 'W', token_hex, 0);
                    break;
                }
                claimed[claims++] = w;
            } else if (part == 2) {
                due_known = 1;
                due = duro__pg_column_null(s, 10)
                          ? INT64_MAX
                          : duro__pg_column_int64(s, 10);
            }
        }
        if (rc == DURO_OK && step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, &err);
        duro__pg_reset(s);
    }
    duro__pg_reader_release(p, c);
    cols_free(col, K_COLUMNS);
    if (rc != DURO_OK) {
        for (size_t i = 0; i < claims; i++)
            duro_worker_item_free(claimed[i]);
        if (rc == DURO_BUSY) {
            /* It changed nothing (a lock it waited for too long, a
             * deadlock): one ack's row held by another session must not
             * fail the others, so each runs alone, on its own thread. */
            for (size_t i = 0; i < n; i++)
                batch[i]->alone = 1;
            return;
        }
        /* the statement failed as a whole: every ack gets its error (one
         * whose connection was lost may have committed: provider.h) */
        for (size_t i = 0; i < n; i++) {
            batch[i]->rc = rc;
            batch[i]->err = err;
        }
        keep_unknown_claim(p, 'W', token_hex, rc, &err);
        return;
    }
    size_t given = 0, k = 0;
    const char *acked_tokens[COMBINE_MAX];
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->rc != DURO_OK) {
            lock_lost(op, gone_msg, &batch[i]->err);
            continue;
        }
        acked_tokens[k++] = batch[i]->token;
        batch[i]->next = given < claims ? claimed[given++] : NULL;
    }
    note_async_acks(p, acked_tokens, k); /* committed without the flush */
    for (; given < claims; given++)      /* cannot happen: one claim per ack */
        duro_worker_item_free(claimed[given]);
    if (due_known)
        duro__pg_note_due(p, DURO_QUEUE_WORKER, due);
    if (acked > 0)
        duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, acked);
    uint64_t seen = atomic_load(&p->combine_max);
    while (n > seen &&
           !atomic_compare_exchange_weak(&p->combine_max, &seen, (uint64_t)n))
        ;
    atomic_fetch_add(&p->combine_statements, 1);
}

/* Where row `id` is in p->contended, or -1; under combine_lock. */
static int contended_at(duro__pg_provider *p, int64_t id)
{
    for (int i = 0; i < p->contended_count; i++)
        if (p->contended[i] == id)
            return i;
    return -1;
}

/* Remembers whether row id's ack gave up waiting for a lock (rc
 * DURO_BUSY): then its next attempt runs alone (the oldest such row is
 * forgotten when DURO__PG_CONTENDED_MAX are); any other outcome forgets
 * it. */
static void note_contended(duro__pg_provider *p, int64_t id, int rc)
{
    pthread_mutex_lock(&p->combine_lock);
    int at = contended_at(p, id);
    if (rc == DURO_BUSY && at < 0) {
        if (p->contended_count == DURO__PG_CONTENDED_MAX) {
            memmove(p->contended, p->contended + 1,
                    sizeof(p->contended[0]) * (DURO__PG_CONTENDED_MAX - 1));
            p->contended_count--;
        }
        p->contended[p->contended_count++] = id;
    } else if (rc != DURO_BUSY && at >= 0) {
        memmove(p->contended + at, p->contended + at + 1,
                sizeof(p->contended[0]) *
                    (size_t)(p->contended_count - at - 1));
        p->contended_count--;
    }
    pthread_mutex_unlock(&p->combine_lock);
}

/* An ack that may wait for a row another session holds (its last attempt
 * did, or the combined statement it was in did): alone, so that it holds
 * up no other ack while it waits. (Its claim of the next item runs after
 * its readiness upsert, DURO__PG_AFTER_R: it holds no item meanwhile.) */
static int ack_apart(duro__pg_provider *p, int64_t id, const char *lock_token,
                     const duro_work_item *completion, int64_t lock_timeout_ms,
                     duro_worker_item **next, const char *op, duro_error *err)
{
    int rc = ack_work_one(p, id, lock_token, completion, lock_timeout_ms, next,
                          op, err);
    note_contended(p, id, rc);
    return rc;
}

/* Removes r from the combine queue; under combine_lock. */
static void unqueue(duro__pg_provider *p, wq_req *r)
{
    wq_req *prev = NULL;
    for (wq_req *x = p->combine_head; x != NULL; prev = x, x = x->link) {
        if (x != r)
            continue;
        if (prev != NULL)
            prev->link = r->link;
        else
            p->combine_head = r->link;
        if (p->combine_tail == r)
            p->combine_tail = prev;
        return;
    }
}

/* How long a queued ack waits for the statement running before it runs
 * its own, alone: a combined statement takes milliseconds, unless it waits
 * for a row another session holds (up to lock_timeout), and the acks
 * queued behind it are not held up by that. */
#define COMBINE_WAIT_MS 1000

/* ack_work_one for an ack with its completion and the next claim, run
 * together with the acks other threads make at the same time. */
static int ack_work_combined(duro__pg_provider *p, int64_t id,
                             const char *lock_token,
                             const duro_work_item *completion,
                             int64_t lock_timeout_ms, duro_worker_item **next,
                             const char *op, duro_error *err)
{
    wq_req me = {.id = id,
                 .token = lock_token,
                 .completion = completion,
                 .lock_timeout_ms = lock_timeout_ms};
    pthread_mutex_lock(&p->combine_lock);
    if (contended_at(p, id) >= 0) {
        /* it waited for a row lock last time: alone, holding up no other
         * ack while it may wait again */
        pthread_mutex_unlock(&p->combine_lock);
        return ack_apart(p, id, lock_token, completion, lock_timeout_ms, next,
                         op, err);
    }
    if (p->combine_tail != NULL)
        p->combine_tail->link = &me;
    else
        p->combine_head = &me;
    p->combine_tail = &me;
    struct timespec give_up;
    duro__deadline_ts(&give_up, COMBINE_WAIT_MS);
    while (!me.done) {
        if (p->combine_busy) {
            if (me.taken) {
                pthread_cond_wait(&p->combine_cond, &p->combine_lock);
            } else if (pthread_cond_timedwait(&p->combine_cond,
                                              &p->combine_lock,
                                              &give_up) == ETIMEDOUT &&
                       !me.taken && !me.done) {
                /* the running statement is held up: not behind it */
                unqueue(p, &me);
                pthread_mutex_unlock(&p->combine_lock);
                return ack_apart(p, id, lock_token, completion, lock_timeout_ms,
                                 next, op, err);
            }
            continue;
        }
        /* lead: take the queued acks that share the first one's lock
         * timeout (the claim sets one for all) */
        p->combine_busy = 1;
        wq_req *batch[COMBINE_MAX];
        size_t n = 0;
        int64_t timeout = p->combine_head->lock_timeout_ms;
        wq_req **at = &p->combine_head;
        p->combine_tail = NULL;
        while (*at != NULL) {
            wq_req *r = *at;
            if (n < COMBINE_MAX && r->lock_timeout_ms == timeout) {
                r->taken = 1;
                batch[n++] = r;
                *at = r->link;
            } else {
                p->combine_tail = r;
                at = &r->link;
            }
        }
        pthread_mutex_unlock(&p->combine_lock);
        if (n == 1)
            batch[0]->rc = ack_apart(
                p, batch[0]->id, batch[0]->token, batch[0]->completion,
                batch[0]->lock_timeout_ms, &batch[0]->next, op, &batch[0]->err);
        else
            run_combined(p, batch, n, op);
        pthread_mutex_lock(&p->combine_lock);
        for (size_t i = 0; i < n; i++)
            batch[i]->done = 1;
        p->combine_busy = 0;
        pthread_cond_broadcast(&p->combine_cond);
    }
    pthread_mutex_unlock(&p->combine_lock);
    if (me.alone)
        return ack_apart(p, id, lock_token, completion, lock_timeout_ms, next,
                         op, err);
    if (me.rc != DURO_OK) {
        *err = me.err;
        return me.rc;
    }
    *next = me.next;
    return DURO_OK;
}

int duro__pg_combine_queued(duro_provider *base)
{
    duro__pg_provider *p = pg_of(base);
    pthread_mutex_lock(&p->combine_lock);
    int n = 0;
    for (const wq_req *r = p->combine_head; r != NULL; r = r->link)
        n++;
    pthread_mutex_unlock(&p->combine_lock);
    return n;
}

static int ack_work_at_once(duro__pg_provider *p, int64_t id,
                            const char *lock_token,
                            const duro_work_item *completion,
                            int64_t lock_timeout_ms, duro_worker_item **next,
                            const char *op, duro_error *err)
{
    if (next == NULL)
        return ack_work_one(p, id, lock_token, completion, lock_timeout_ms,
                            NULL, op, err);
    return ack_work_combined(p, id, lock_token, completion, lock_timeout_ms,
                             next, op, err);
}

static int ack_work(duro_provider *base, const char *lock_token,
                    const duro_work_item *completion, int64_t lock_timeout_ms,
                    duro_worker_item **next, const char *op, duro_error *err)
{
    duro__pg_provider *p = pg_of(base);
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
    release_kept(p);
    if (next != NULL)
        duro__pg_note_fetch(p, DURO_QUEUE_WORKER);
    if (completion != NULL && completion->kind != DURO_WORK_START &&
        completion->kind != DURO_WORK_CANCEL_INSTANCE)
        return ack_work_at_once(p, id, lock_token, completion, lock_timeout_ms,
                                next, op, err);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_WQ_ACK, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 1, id);
        duro__pg_bind_text(c, s, 2, lock_token);
        rc = duro__pg_run(p, c, s, op, err);
    }
    /* No row deleted: the activity was cancelled (row deleted by a turn) or
     * its expired lock was taken by another fetch. Enqueue nothing. */
    if (rc == DURO_OK && duro__pg_changes(c) == 0)
        rc = lock_lost(op,
                       "the work item is gone (cancelled or acked) or its "
                       "lock was taken by another fetch",
                       err);
    int skip = 0;
    if (rc == DURO_OK && completion != NULL)
        rc = enqueue_in_transaction(p, c, completion, now, now, &skip, op, err);
    duro_worker_item *w = NULL;
    char hex[33];
    duro__random_token(hex);
    if (rc == DURO_OK && next != NULL)
        rc = fetch_work_in_transaction(p, c, DURO__SQL_WQ_FETCH, hex,
                                       lock_timeout_ms, now, &w, op, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK) {
        duro_worker_item_free(w);
        if (next != NULL)
            keep_unknown_claim(p, 'W', hex, rc, err);
        return rc;
    }
    if (completion != NULL && !skip)
        duro__pg_signal(p, DURO_QUEUE_ORCHESTRATOR, 1);
    if (next != NULL)
        *next = w;
    return DURO_OK;
}

int duro__pg_ack_work_item(duro_provider *base, const char *lock_token,
                           const duro_work_item *completion, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    return ack_work(base, lock_token, completion, 0, NULL, "ack_work_item",
                    err);
}

int duro__pg_ack_and_fetch_work_item(duro_provider *base,
                                     const char *lock_token,
                                     const duro_work_item *completion,
                                     int64_t lock_timeout_ms,
                                     duro_worker_item **next, duro_error *err)
{
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (next == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next is NULL");
    return ack_work(base, lock_token, completion, lock_timeout_ms, next,
                    "ack_and_fetch_work_item", err);
}

int duro__pg_abandon_work_item(duro_provider *base, const char *lock_token,
                               int64_t delay_ms, duro_error *err)
{
    static const char op[] = "abandon_work_item";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    duro__pg_provider *p = pg_of(base);
    int64_t id;
    int rc = check_token(lock_token, err);
    if (rc != DURO_OK)
        return rc;
    if (parse_token(lock_token, 'w', &id) != 0)
        return lock_lost(op, "not a work item lock token of this store", err);
    rc = update_work_row(p, DURO__SQL_WQ_ABANDON, id, lock_token, delay_ms, 0,
                         op, err);
    if (rc == DURO_OK)
        duro__pg_signal(p, DURO_QUEUE_WORKER, 1);
    /* the caller lets the token go either way: abandoned again later */
    if (rc != DURO_OK && err->retryable)
        keep_release(p, 'w', lock_token, delay_ms);
    return rc;
}
