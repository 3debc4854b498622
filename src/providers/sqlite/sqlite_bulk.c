/* sqlite_bulk.c - the SQLite provider's operations on many instances:
 * cancel_instances and control_instances (one transaction, set-based
 * through json_each) and the sweeps, cancel_matching, control_matching and
 * purge_instances, which read their set once on a snapshot and handle it
 * in write transactions of at most DURO_BULK_BATCH_MAX instances. A cancel
 * and a control are one request (providers.h: duro__bulk_request) with
 * their message's kind and status set. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "providers/sqlite/sqlite_internal.h"

#define BATCH DURO_BULK_BATCH_MAX

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

/* ---- JSON arrays of ids ----------------------------------------------
 * A batch names its instances in one JSON array bound as text. Ids are any
 * bytes but NUL: quotes, backslashes and control characters are escaped;
 * other bytes, UTF-8 or not, pass through, and json_each gives them back
 * unchanged. */

/* ---- cancel_instances, control_instances ----------------------------- */

/* Runs REQUEST_IDS_ENQUEUE, _READY and, for a cancel, CANCEL_IDS_MARK for
 * the ids in json, in that order (the last one ends what the first two
 * select); *sent receives how many messages were enqueued (a cancel: how
 * many requests were recorded). */
static int request_ids(duro__sqlite_provider *p, duro__sqlite_conn *c,
                       const duro__bulk_request *r, const char *json,
                       const char *reason, const char *by, int64_t now,
                       size_t *sent, const char *op, duro_error *err)
{
    static const duro__sqlite_stmt_id steps[] = {DURO__SQL_REQUEST_IDS_ENQUEUE,
                                                 DURO__SQL_REQUEST_IDS_READY,
                                                 DURO__SQL_CANCEL_IDS_MARK};
    size_t n = r->cancel ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, steps[i], op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, json);
        duro__sqlite_bind_text(c, s, 2, reason);
        duro__sqlite_bind_text(c, s, 3, by);
        duro__sqlite_bind_i64(c, s, 4, now);
        duro__sqlite_bind_i64(c, s, 5, r->kind);
        duro__sqlite_bind_i64(c, s, 6, r->cancel);
        int rc = duro__sqlite_run(p, c, s, op, err);
        if (rc != DURO_OK)
            return rc;
        if (steps[i] != DURO__SQL_REQUEST_IDS_READY)
            *sent = (size_t)sqlite3_changes(c->db); /* enqueued, recorded */
    }
    return DURO_OK;
}

/* Decides request r at once for the unbegun instances in json (found so
 * by DURO__SQLITE_UNBEGUN in this transaction): DECIDE_* in their order.
 * *decided receives how many instances it ended or suspended (it must be
 * all of them), *woken how many messages it sent to parents. */
static int decide_ids(duro__sqlite_provider *p, duro__sqlite_conn *c,
                      const duro__bulk_request *r, const char *json,
                      const char *reason, const char *by, int64_t now,
                      size_t *decided, size_t *woken, const char *op,
                      duro_error *err)
{
    static const duro__sqlite_stmt_id steps[] = {
        DURO__SQL_DECIDE_EXECUTIONS,      DURO__SQL_DECIDE_HISTORY,
        DURO__SQL_DECIDE_PARENT_MESSAGES, DURO__SQL_DECIDE_PARENT_READY,
        DURO__SQL_DECIDE_INSTANCES,       DURO__SQL_DECIDE_QUEUE,
        DURO__SQL_DECIDE_READY_DROP,      DURO__SQL_DECIDE_READY_SET};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++) {
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, steps[i], op, err);
        if (s == NULL)
            return err->code;
        int params = sqlite3_bind_parameter_count(s);
        duro__sqlite_bind_text(c, s, 1, json);
        if (params >= 5) {
            duro__sqlite_bind_text(c, s, 2, reason);
            duro__sqlite_bind_text(c, s, 3, by);
            duro__sqlite_bind_i64(c, s, 4, now);
            duro__sqlite_bind_i64(c, s, 5, r->kind);
        }
        int rc = duro__sqlite_run(p, c, s, op, err);
        if (rc != DURO_OK)
            return rc;
        if (steps[i] == DURO__SQL_DECIDE_INSTANCES)
            *decided = (size_t)sqlite3_changes(c->db);
        else if (steps[i] == DURO__SQL_DECIDE_PARENT_MESSAGES)
            *woken = (size_t)sqlite3_changes(c->db);
    }
    return DURO_OK;
}

/* What one transaction of a request does: sends the message to the ids in
 * send (json, `n_send` of them) and decides the ids in decide at once
 * (`n_decide`), checking that each write found what the reads said.
 * *woken receives how many messages went on the orchestrator queue. */
static int send_and_decide(duro__sqlite_provider *p, duro__sqlite_conn *c,
                           const duro__bulk_request *r, const char *send,
                           size_t n_send, const char *decide, size_t n_decide,
                           const char *reason, const char *by, int64_t now,
                           size_t *woken, const char *op, duro_error *err)
{
    size_t sent = 0, decided = 0, told = 0;
    int rc = DURO_OK;
    if (n_send > 0)
        rc = request_ids(p, c, r, send, reason, by, now, &sent, op, err);
    if (rc == DURO_OK && n_decide > 0)
        rc = decide_ids(p, c, r, decide, reason, by, now, &decided, &told, op,
                        err);
    if (rc != DURO_OK)
        return rc;
    if (sent != n_send || decided != n_decide)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s: %zu instances to send to and %zu "
                              "to decide, %zu sent and %zu decided",
                              op, n_send, n_decide, sent, decided);
    *woken = sent + told;
    return DURO_OK;
}

/* The body of cancel_instances and control_instances inside their
 * transaction. */
static int request_instances_in_transaction(
    duro__sqlite_provider *p, duro__sqlite_conn *c, const duro__bulk_request *r,
    const char *const *instance_ids, const char *json, size_t count,
    const char *reason, const char *by, int64_t now, duro__bulk_decision *found,
    size_t *woken, const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_REQUEST_IDS_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, json);
    duro__sqlite_bind_i64(c, s, 2, now);
    size_t seen = 0;
    duro__bulk_split ids;
    duro__bulk_split_open(&ids, 1);
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        int64_t key = sqlite3_column_int64(s, 0);
        if (key < 0 || (uint64_t)key >= count) {
            duro__bulk_split_free(&ids);
            return duro_error_set(err, DURO_STORAGE, 0,
                                  "sqlite %s: json_each gave index %lld of %zu",
                                  op, (long long)key, count);
        }
        int status = sqlite3_column_type(s, 1) == SQLITE_NULL
                         ? DURO_STATUS_NOT_FOUND
                         : sqlite3_column_int(s, 1);
        int action = duro__bulk_decide(
            r, &found[key], status, sqlite3_column_int(s, 2) != 0,
            sqlite3_column_int64(s, 3) == 1, sqlite3_column_int(s, 4) != 0);
        if (action != DURO__BULK_SKIP)
            duro__bulk_split_add(&ids, instance_ids[key], action);
        seen++;
    }
    if (rc != SQLITE_DONE) {
        duro__bulk_split_free(&ids);
        return duro__sqlite_error(c, rc, op, err);
    }
    sqlite3_reset(s);
    if (seen != count)
        rc = duro_error_set(err, DURO_STORAGE, 0,
                            "sqlite %s: json_each gave %zu ids of %zu", op,
                            seen, count);
    else if (duro__bulk_split_close(&ids) != DURO_OK)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    else
        rc = send_and_decide(p, c, r, ids.send.s, ids.n_send, ids.decide.s,
                             ids.n_decide, reason, by, now, woken, op, err);
    duro__bulk_split_free(&ids);
    return rc;
}

/* cancel_instances and control_instances: request r of each instance;
 * results (count duro_cancel_result or duro_control_result) get the
 * decisions. */
static int request_instances(duro_provider *base, const duro__bulk_request *r,
                             const char *const *instance_ids, size_t count,
                             const char *reason, const char *requested_by,
                             void *results, duro_error *err)
{
    const char *op = r->op_instances;
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    int rc = duro__bulk_check_instances(r, "sqlite", instance_ids, count,
                                        reason, requested_by, results,
                                        duro__sqlite_check_name, err);
    if (rc != DURO_OK || count == 0)
        return rc;
    duro__strbuf json = {0};
    duro__strbuf_open(&json, '[');
    for (size_t i = 0; i < count; i++) {
        duro__strbuf_sep(&json);
        duro__strbuf_json(&json, instance_ids[i]);
    }
    duro__strbuf_add(&json, "]", 1);
    duro__bulk_decision *found = duro__calloc(count, sizeof(*found));
    if (json.oom || found == NULL) {
        duro__free(json.s);
        duro__free(found);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    duro__sqlite_provider *p = sqlite_of(base);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    size_t sent = 0;
    rc = duro__sqlite_write_begin(p, op, &c, err);
    if (rc == DURO_OK) {
        rc = request_instances_in_transaction(p, c, r, instance_ids, json.s,
                                              count, reason, requested_by, now,
                                              found, &sent, op, err);
        if (rc == DURO_OK)
            rc = duro__sqlite_write_commit(p, c, op, err);
        else
            duro__sqlite_write_rollback(p, c);
    }
    if (rc == DURO_OK) {
        memcpy(results, found, count * sizeof(*found));
        duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, sent);
    }
    duro__free(found);
    duro__free(json.s);
    return rc;
}

int duro__sqlite_cancel_instances(duro_provider *base,
                                  const char *const *instance_ids, size_t count,
                                  const char *reason, const char *requested_by,
                                  duro_cancel_result *results, duro_error *err)
{
    return request_instances(base, &duro__bulk_cancel, instance_ids, count,
                             reason, requested_by, results, err);
}

int duro__sqlite_control_instances(duro_provider *base, int control,
                                   const char *const *instance_ids,
                                   size_t count, const char *reason,
                                   const char *requested_by,
                                   duro_control_result *results,
                                   duro_error *err)
{
    duro__bulk_request r = duro__bulk_control(control);
    return request_instances(base, &r, instance_ids, count, reason,
                             requested_by, results, err);
}

/* ---- sweeps ----------------------------------------------------------
 * The set is read once, in id order, by one SELECT on a read snapshot: a
 * connection of the sweep's own (file databases), so the snapshot stays
 * while batches commit on the writer, and instances created after it began
 * are never seen. Each batch of at most BATCH ids is then checked again and
 * handled in one write transaction. Memory holds one batch at a time. A
 * :memory: database has only the writer: there the whole sweep is one
 * transaction, which no other write can interleave with, and the set is
 * read whole before the first write (memory grows with it; :memory: is for
 * tests). */

typedef struct sweep {
    duro__sqlite_provider *p;
    const char *op;
    const duro__bulk_request *req; /* cancel_matching, control_matching;
                                      NULL: purge_instances */
    const duro_bulk_filter *f;
    int statuses[DURO__BULK_STATUSES_MAX]; /* the mask's statuses, the first
                                              repeated to fill */
    const char *reason, *by;
    int dry_run;
    size_t max_ids;
    duro_bulk_result *res;
    size_t ids_cap;
    duro__sqlite_conn *snap; /* where the set is read (and dry runs run) */
    int64_t now;
    size_t woken; /* messages the sweep put on the orchestrator queue */
} sweep;

/* One row of the set: an id and its instance's creation time (together
 * they tell the instance from one created later under the same id). */
typedef struct member {
    const char *id;
    int64_t created_ms;
    int unbegun; /* a request sweep: decided at once (when its kind is) */
} member;

static void bind_if(duro__sqlite_conn *c, sqlite3_stmt *s, int i, int64_t v)
{
    if (i <= sqlite3_bind_parameter_count(s))
        duro__sqlite_bind_i64(c, s, i, v);
}

static void bind_text_if(duro__sqlite_conn *c, sqlite3_stmt *s, int i,
                         const char *v)
{
    if (i <= sqlite3_bind_parameter_count(s))
        duro__sqlite_bind_text(c, s, i, v);
}

/* Binds the filter as the SWEEP_* statements and PURGE_BATCH number it
 * (name at ?1 in the former, ?9 in the latter; 0: none). */
static void bind_filter(sweep *w, duro__sqlite_conn *c, sqlite3_stmt *s,
                        int name_at)
{
    static const int status_at[DURO__BULK_STATUSES_MAX] = {2, 3, 4, 11};
    const duro_bulk_filter *f = w->f;
    if (name_at > 0)
        duro__sqlite_bind_text(c, s, name_at, f->name);
    for (int i = 0; i < DURO__BULK_STATUSES_MAX; i++)
        bind_if(c, s, status_at[i], w->statuses[i]);
    bind_text_if(c, s, 5, f->version);
    bind_if(c, s, 6, f->created_after_ms);
    bind_if(c, s, 7, f->created_before_ms);
    bind_if(c, s, 8, f->finished_before_ms);
    bind_if(c, s, 12, w->req != NULL && w->req->cancel);
    bind_if(c, s, 13, w->now);
}

/* Appends ids[0..n) to the result's list while it holds fewer than
 * max_ids. */
static int keep_ids(sweep *w, const char *const *ids, size_t n)
{
    duro_bulk_result *r = w->res;
    duro_arena *a = r->arena;
    for (size_t i = 0; i < n && r->id_count < w->max_ids; i++) {
        if (r->id_count == w->ids_cap) {
            r->ids = duro__sqlite_arena_grow(a, r->ids, r->id_count,
                                             &w->ids_cap, sizeof(*r->ids));
            if (r->ids == NULL)
                return DURO_NOMEM;
        }
        if ((r->ids[r->id_count] = duro_arena_strdup(a, ids[i])) == NULL)
            return DURO_NOMEM;
        r->id_count++;
    }
    return DURO_OK;
}

/* Runs a statement whose first column is an id (bound by the caller) and
 * collects the ids into `out` (strings in arena `a`). */
static int collect_ids(duro__sqlite_provider *p, duro__sqlite_conn *c,
                       sqlite3_stmt *s, duro_arena *a, const char ***out,
                       size_t *count, const char *op, duro_error *err)
{
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    int rc;
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (*count == cap &&
            (*out = duro__sqlite_arena_grow(a, (void *)*out, *count, &cap,
                                            sizeof(**out))) == NULL)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        if (duro__sqlite_column_text(a, s, 0, &(*out)[*count]) != 0 ||
            (*out)[*count] == NULL)
            return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        (*count)++;
    }
    if (rc != SQLITE_DONE)
        return duro__sqlite_error(c, rc, op, err);
    sqlite3_reset(s);
    return DURO_OK;
}

/* The batch as [[id, created_ms], ...]. */
static int members_json(const member *m, size_t n, duro__strbuf *b)
{
    duro__strbuf_open(b, '[');
    for (size_t i = 0; i < n; i++) {
        char num[32];
        duro__strbuf_sep(b);
        duro__strbuf_add(b, "[", 1);
        duro__strbuf_json(b, m[i].id);
        int len =
            snprintf(num, sizeof(num), ",%lld]", (long long)m[i].created_ms);
        duro__strbuf_add(b, num, (size_t)len);
    }
    duro__strbuf_add(b, "]", 1);
    return b->oom ? DURO_NOMEM : DURO_OK;
}

static int ids_json(const char *const *ids, size_t n, duro__strbuf *b)
{
    duro__strbuf_open(b, '[');
    for (size_t i = 0; i < n; i++) {
        duro__strbuf_sep(b);
        duro__strbuf_json(b, ids[i]);
    }
    duro__strbuf_add(b, "]", 1);
    return b->oom ? DURO_NOMEM : DURO_OK;
}

/* A cancel_matching or control_matching batch on the writer, inside its
 * transaction: which members are still the same instances, still to be
 * sent the request (and which of them have not begun, to be decided at
 * once), then the request; *done receives them, *applied how many of them
 * were decided. */
static int request_batch(sweep *w, duro__sqlite_conn *c, const char *pairs,
                         duro_arena *a, const char ***done, size_t *n,
                         size_t *applied, size_t *woken, duro_error *err)
{
    duro__sqlite_provider *p = w->p;
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_SWEEP_REQUEST_RECHECK, w->op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, pairs);
    bind_filter(w, c, s, 0);
    size_t cap = 0;
    duro__bulk_split ids;
    duro__bulk_split_open(&ids, 1);
    int rc = DURO_OK, step;
    while ((step = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (*n == cap &&
            (*done = duro__sqlite_arena_grow(a, (void *)*done, *n, &cap,
                                             sizeof(**done))) == NULL) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        if (duro__sqlite_column_text(a, s, 0, &(*done)[*n]) != 0 ||
            (*done)[*n] == NULL) {
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            break;
        }
        int decide =
            duro__bulk_decides_unbegun(w->req) && sqlite3_column_int(s, 1) != 0;
        duro__bulk_split_add(&ids, (*done)[*n],
                             decide ? DURO__BULK_DECIDE : DURO__BULK_SEND);
        (*n)++;
    }
    if (rc == DURO_OK && step != SQLITE_DONE)
        rc = duro__sqlite_error(c, step, w->op, err);
    sqlite3_reset(s);
    if (rc == DURO_OK && *n > 0) {
        if (duro__bulk_split_close(&ids) != DURO_OK)
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        else
            rc = send_and_decide(p, c, w->req, ids.send.s, ids.n_send,
                                 ids.decide.s, ids.n_decide, w->reason, w->by,
                                 w->now, woken, w->op, err);
        *applied = ids.n_decide;
    }
    duro__bulk_split_free(&ids);
    return rc;
}

/* What a purge batch deletes (PURGE_BATCH), on c: the writer in a real
 * run, the snapshot in a dry run. */
static int purge_select(sweep *w, duro__sqlite_conn *c, const char *pairs,
                        duro_arena *a, const char ***ids, size_t *n,
                        duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(w->p, c, DURO__SQL_PURGE_BATCH, w->op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, pairs);
    bind_filter(w, c, s, 9);
    return collect_ids(w->p, c, s, a, ids, n, w->op, err);
}

/* A purge batch on the writer, inside its transaction. */
static int purge_batch(sweep *w, duro__sqlite_conn *c, const char *pairs,
                       duro_arena *a, duro__strbuf *plain, const char ***done,
                       size_t *n, duro_error *err)
{
    duro__sqlite_provider *p = w->p;
    int rc = purge_select(w, c, pairs, a, done, n, err);
    if (rc != DURO_OK || *n == 0)
        return rc;
    if (ids_json(*done, *n, plain) != DURO_OK)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    /* Instances last, as delete_instance does. */
    static const duro__sqlite_stmt_id steps[] = {
        DURO__SQL_PURGE_HISTORY,  DURO__SQL_PURGE_EXECUTIONS,
        DURO__SQL_PURGE_MESSAGES, DURO__SQL_PURGE_READY,
        DURO__SQL_PURGE_WORK,     DURO__SQL_PURGE_EVENT_IDS,
        DURO__SQL_PURGE_INSTANCES};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++) {
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, steps[i], w->op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, plain->s);
        if ((rc = duro__sqlite_run(p, c, s, w->op, err)) != DURO_OK)
            return rc;
    }
    if ((size_t)sqlite3_changes(c->db) != *n)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "sqlite %s: %zu instances to delete, %d deleted",
                              w->op, *n, sqlite3_changes(c->db));
    return DURO_OK;
}

/* Handles one batch of members. `own_transaction`: a real run on a file
 * database, where each batch is a transaction of its own on the writer;
 * otherwise the caller's transaction (or snapshot) is used. */
static int handle_batch(sweep *w, const member *m, size_t count,
                        int own_transaction, duro_error *err)
{
    if (count == 0)
        return DURO_OK;
    duro__sqlite_provider *p = w->p;
    duro_arena *a = duro_arena_create();
    duro__strbuf pairs = {0}, plain = {0};
    int rc = a != NULL && members_json(m, count, &pairs) == DURO_OK
                 ? DURO_OK
                 : duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    const char **done = NULL;
    size_t n = 0, applied = 0, woken = 0;
    if (rc == DURO_OK && w->dry_run) {
        if (w->req == NULL) {
            rc = purge_select(w, w->snap, pairs.s, a, &done, &n, err);
        } else {
            /* the SELECT already took only the instances to send to, and
             * said which it would decide at once */
            done = duro_arena_alloc(a, count * sizeof(*done));
            if (done == NULL)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            for (size_t i = 0; rc == DURO_OK && i < count; i++) {
                done[n++] = m[i].id;
                applied += duro__bulk_decides_unbegun(w->req) && m[i].unbegun;
            }
        }
    } else if (rc == DURO_OK) {
        duro__sqlite_conn *c = &p->writer;
        if (own_transaction)
            rc = duro__sqlite_write_begin(p, w->op, &c, err);
        if (rc == DURO_OK) {
            w->now = duro__wall_ms();
            rc = w->req == NULL
                     ? purge_batch(w, c, pairs.s, a, &plain, &done, &n, err)
                     : request_batch(w, c, pairs.s, a, &done, &n, &applied,
                                     &woken, err);
            if (own_transaction && rc == DURO_OK)
                rc = duro__sqlite_write_commit(p, c, w->op, err);
            else if (own_transaction)
                duro__sqlite_write_rollback(p, c);
        }
        if (rc == DURO_OK && own_transaction && w->req != NULL)
            duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, woken);
        w->woken += woken;
    }
    if (rc == DURO_OK) {
        w->res->count += n;
        w->res->applied += applied;
        if (keep_ids(w, done, n) != DURO_OK)
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    duro__free(pairs.s);
    duro__free(plain.s);
    duro_arena_destroy(a);
    return rc;
}

/* Steps the set's SELECT, collecting `batch` members at a time (SIZE_MAX:
 * all of them, for :memory:) and handing them to handle_batch in batches
 * of at most BATCH. */
static int read_and_handle(sweep *w, sqlite3_stmt *s, size_t batch,
                           int own_transaction, duro_error *err)
{
    duro__sqlite_provider *p = w->p;
    duro__sqlite_conn *c = w->snap;
    duro_arena *a = duro_arena_create();
    member *m = NULL;
    size_t n = 0, cap = 0;
    int rc = a != NULL ? DURO_OK
                       : duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    int step = SQLITE_ROW;
    while (rc == DURO_OK && step == SQLITE_ROW) {
        step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW) {
            if (n == cap) {
                size_t new_cap = cap ? cap * 2 : 64;
                member *grown = duro__realloc(m, new_cap * sizeof(*m));
                if (grown == NULL) {
                    rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                    break;
                }
                m = grown;
                cap = new_cap;
            }
            m[n].created_ms = sqlite3_column_int64(s, 1);
            m[n].unbegun =
                sqlite3_column_count(s) > 2 && sqlite3_column_int(s, 2) != 0;
            if (duro__sqlite_column_text(a, s, 0, &m[n].id) != 0 ||
                m[n].id == NULL) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
            n++;
        } else if (step != SQLITE_DONE) {
            rc = duro__sqlite_error(c, step, w->op, err);
            break;
        }
        if (rc == DURO_OK && (n == batch || (step == SQLITE_DONE && n > 0))) {
            if (step == SQLITE_DONE)
                sqlite3_reset(s); /* the set is read: no cursor while
                                     handling (the :memory: case writes on
                                     this same connection) */
            for (size_t at = 0; rc == DURO_OK && at < n; at += BATCH)
                rc = handle_batch(w, m + at, DURO__MIN(n - at, (size_t)BATCH),
                                  own_transaction, err);
            n = 0;
            duro_arena_destroy(a);
            a = duro_arena_create();
            if (a == NULL && rc == DURO_OK)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
    }
    sqlite3_reset(s);
    duro__free(m);
    duro_arena_destroy(a);
    return rc;
}

static int run_sweep(sweep *w, duro_bulk_result **out, duro_error *err)
{
    duro__sqlite_provider *p = w->p;
    const char *op = w->op;
    int by_name = w->f->name != NULL;
    duro__sqlite_stmt_id select =
        w->req == NULL
            ? (by_name ? DURO__SQL_SWEEP_PURGE_NAME : DURO__SQL_SWEEP_PURGE_ALL)
            : (by_name ? DURO__SQL_SWEEP_REQUEST_NAME
                       : DURO__SQL_SWEEP_REQUEST_ALL);
    duro_arena *a = duro_arena_create();
    w->res = a != NULL ? duro_arena_alloc(a, sizeof(*w->res)) : NULL;
    if (w->res == NULL) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    w->res->arena = a;
    w->now = duro__wall_ms(); /* the set's: which have not begun */
    int rc;
    if (p->cfg.memory) {
        /* One transaction on the only connection (see above). */
        duro__sqlite_conn *c;
        if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK) {
            duro_arena_destroy(a);
            return rc;
        }
        w->snap = c;
        sqlite3_stmt *s = duro__sqlite_stmt(p, c, select, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            bind_filter(w, c, s, 1);
            rc = read_and_handle(w, s, SIZE_MAX, 0, err);
        }
        if (rc == DURO_OK && !w->dry_run)
            rc = duro__sqlite_write_commit(p, c, op, err);
        else
            duro__sqlite_write_rollback(p, c);
        if (rc == DURO_OK && !w->dry_run && w->req != NULL)
            duro__sqlite_signal(p, DURO_QUEUE_ORCHESTRATOR, w->woken);
    } else {
        /* A snapshot connection of the sweep's own: a pooled reader would
         * be taken from other callers for the whole sweep. */
        duro__sqlite_conn snap;
        rc = duro__sqlite_conn_open(p, &snap, 1, err);
        if (rc != DURO_OK) {
            duro_arena_destroy(a);
            return rc;
        }
        atomic_fetch_add(&p->sweeps, 1);
        w->snap = &snap;
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, &snap, DURO__SQL_BEGIN_READ, op, err);
        rc = s != NULL ? duro__sqlite_run(p, &snap, s, op, err) : err->code;
        if (rc == DURO_OK) {
            s = duro__sqlite_stmt(p, &snap, select, op, err);
            rc = s != NULL ? DURO_OK : err->code;
        }
        if (rc == DURO_OK) {
            bind_filter(w, &snap, s, 1);
            rc = read_and_handle(w, s, BATCH, 1, err);
        }
        duro__sqlite_conn_close(&snap); /* ends the read transaction */
        atomic_fetch_sub(&p->sweeps, 1);
    }
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = w->res;
    return DURO_OK;
}

/* cancel_matching and control_matching: request r of every instance the
 * filter selects. */
static int request_matching(duro_provider *base, const duro__bulk_request *r,
                            const duro_bulk_filter *filter, const char *reason,
                            const char *requested_by, int dry_run,
                            size_t max_ids, duro_bulk_result **out,
                            duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    sweep w = {.p = sqlite_of(base),
               .op = r->op_matching,
               .req = r,
               .f = filter,
               .reason = reason,
               .by = requested_by,
               .dry_run = dry_run != 0,
               .max_ids = max_ids};
    int rc = duro__bulk_check_matching(r, "sqlite", filter, reason,
                                       requested_by, out, w.statuses,
                                       duro__sqlite_check_name, err);
    return rc != DURO_OK ? rc : run_sweep(&w, out, err);
}

int duro__sqlite_cancel_matching(duro_provider *base,
                                 const duro_bulk_filter *filter,
                                 const char *reason, const char *requested_by,
                                 int dry_run, size_t max_ids,
                                 duro_bulk_result **out, duro_error *err)
{
    return request_matching(base, &duro__bulk_cancel, filter, reason,
                            requested_by, dry_run, max_ids, out, err);
}

int duro__sqlite_control_matching(duro_provider *base, int control,
                                  const duro_bulk_filter *filter,
                                  const char *reason, const char *requested_by,
                                  int dry_run, size_t max_ids,
                                  duro_bulk_result **out, duro_error *err)
{
    duro__bulk_request r = duro__bulk_control(control);
    return request_matching(base, &r, filter, reason, requested_by, dry_run,
                            max_ids, out, err);
}

int duro__sqlite_purge_instances(duro_provider *base,
                                 const duro_bulk_filter *filter, int dry_run,
                                 size_t max_ids, duro_bulk_result **out,
                                 duro_error *err)
{
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    sweep w = {.p = sqlite_of(base),
               .op = "purge_instances",
               .f = filter,
               .dry_run = dry_run != 0,
               .max_ids = max_ids};
    int rc = duro__bulk_check_purge("sqlite", filter, out, w.statuses,
                                    duro__sqlite_check_name, err);
    return rc != DURO_OK ? rc : run_sweep(&w, out, err);
}
