/* many.c - the operations on many instances, written once:
 * cancel_instances and control_instances (one write transaction,
 * set-based over a list of ids: a JSON array SQLite reads with json_each,
 * a text[] literal PostgreSQL unnests) and the sweeps, cancel_matching,
 * control_matching and purge_instances, which fix their set on one
 * snapshot (the dialect's sweep source) and handle it in write
 * transactions of at most DURO_BULK_BATCH_MAX instances. A cancel and a
 * control are one request (providers.h: duro__bulk_request) with their
 * message's kind and status set. Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sql/sql.h"

#define BATCH DURO_BULK_BATCH_MAX

static int nomem(duro_error *err)
{
    return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
}

/* The bulk checks' name check (providers.h: duro__check_name_fn). */
static int check_name(const void *st, const char *what, const char *s,
                      int required, duro_error *err)
{
    return duro__sql_check_name(st, what, s, required, err);
}

/* ids[0..n) as the dialect's list of ids: a JSON array or a text[]
 * literal (quotes and backslashes escaped in both; control characters in
 * JSON; other bytes, UTF-8 or not, pass through unchanged). */
static int id_list(const duro__sql_store *st, const char *const *ids, size_t n,
                   duro__strbuf *b)
{
    int json = st->dialect->ids_json;
    duro__strbuf_open(b, json ? '[' : '{');
    for (size_t i = 0; i < n; i++) {
        duro__strbuf_sep(b);
        if (json)
            duro__strbuf_json(b, ids[i]);
        else
            duro__strbuf_quoted(b, ids[i]);
    }
    duro__strbuf_add(b, json ? "]" : "}", 1);
    return b->oom ? DURO_NOMEM : DURO_OK;
}

/* Runs the statement `id` with text parameter ?1, when the dialect has
 * one: PostgreSQL locks the readiness rows of a request's instances (`ids`:
 * a list of ids or a sweep's pairs) before their instance rows, in the
 * order a turn's ack takes them (pg_internal.h: REQUEST_IDS_LOCK_READY). */
static int lock_ready(duro__sql_store *st, duro__sql_conn *c,
                      duro__sql_stmt_id id, const char *ids, const char *op,
                      duro_error *err)
{
    if (!st->dialect->has(id))
        return DURO_OK;
    duro__sql_stmt *s = duro__sql_prepare(st, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, ids);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc == DURO_OK)
        duro__sql_reset(st, s);
    return rc;
}

/* ---- cancel_instances, control_instances ----------------------------- */

/* Runs REQUEST_IDS_ENQUEUE, _READY and, for a cancel, CANCEL_IDS_MARK for
 * the ids in list ids, in that order (the last one ends what the first two
 * select); *sent receives how many messages were enqueued (a cancel: how
 * many requests were recorded). */
static int request_ids(duro__sql_store *st, duro__sql_conn *c,
                       const duro__bulk_request *r, const char *ids,
                       const char *reason, const char *by, int64_t now,
                       size_t *sent, const char *op, duro_error *err)
{
    static const duro__sql_stmt_id steps[] = {DURO__SQL_REQUEST_IDS_ENQUEUE,
                                              DURO__SQL_REQUEST_IDS_READY,
                                              DURO__SQL_CANCEL_IDS_MARK};
    size_t n = r->cancel ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        duro__sql_stmt *s = duro__sql_prepare(st, c, steps[i], op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, ids);
        duro__sql_bind_text(st, c, s, 2, reason);
        duro__sql_bind_text(st, c, s, 3, by);
        duro__sql_bind_i64(st, c, s, 4, now);
        duro__sql_bind_i64(st, c, s, 5, r->kind);
        duro__sql_bind_i64(st, c, s, 6, r->cancel);
        int rc = duro__sql_run(st, c, s, op, err);
        if (rc != DURO_OK)
            return rc;
        if (steps[i] != DURO__SQL_REQUEST_IDS_READY)
            *sent = (size_t)duro__sql_changes(st, c); /* enqueued, recorded */
    }
    return DURO_OK;
}

/* Decides request r at once for the unbegun instances in list ids (found
 * so by the dialect's UNBEGUN condition in this transaction): DECIDE_* in
 * their order. Each statement takes a prefix of the five parameters (ids,
 * kind, now, reason, requester). *decided receives how many instances it
 * ended or suspended (it must be all of them), *woken how many messages it
 * sent to parents. */
static int decide_ids(duro__sql_store *st, duro__sql_conn *c,
                      const duro__bulk_request *r, const char *ids,
                      const char *reason, const char *by, int64_t now,
                      size_t *decided, size_t *woken, const char *op,
                      duro_error *err)
{
    static const duro__sql_stmt_id steps[] = {
        DURO__SQL_DECIDE_EXECUTIONS,      DURO__SQL_DECIDE_HISTORY,
        DURO__SQL_DECIDE_PARENT_MESSAGES, DURO__SQL_DECIDE_PARENT_READY,
        DURO__SQL_DECIDE_INSTANCES,       DURO__SQL_DECIDE_QUEUE,
        DURO__SQL_DECIDE_READY_DROP,      DURO__SQL_DECIDE_READY_SET};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++) {
        duro__sql_stmt *s = duro__sql_prepare(st, c, steps[i], op, err);
        if (s == NULL)
            return err->code;
        int params = duro__sql_param_count(st, s);
        duro__sql_bind_text(st, c, s, 1, ids);
        if (params >= 2)
            duro__sql_bind_i64(st, c, s, 2, r->kind);
        if (params >= 3)
            duro__sql_bind_i64(st, c, s, 3, now);
        if (params >= 4)
            duro__sql_bind_text(st, c, s, 4, reason);
        if (params >= 5)
            duro__sql_bind_text(st, c, s, 5, by);
        int rc = duro__sql_run(st, c, s, op, err);
        if (rc != DURO_OK)
            return rc;
        if (steps[i] == DURO__SQL_DECIDE_INSTANCES)
            *decided = (size_t)duro__sql_changes(st, c);
        else if (steps[i] == DURO__SQL_DECIDE_PARENT_MESSAGES)
            *woken = (size_t)duro__sql_changes(st, c);
    }
    return DURO_OK;
}

/* What one transaction of a request does: sends the message to the ids in
 * list send (`n_send` of them) and decides the ids in list decide at once
 * (`n_decide`), checking that each write found what the reads said.
 * *woken receives how many messages went on the orchestrator queue. */
static int send_and_decide(duro__sql_store *st, duro__sql_conn *c,
                           const duro__bulk_request *r, const char *send,
                           size_t n_send, const char *decide, size_t n_decide,
                           const char *reason, const char *by, int64_t now,
                           size_t *woken, const char *op, duro_error *err)
{
    size_t sent = 0, decided = 0, told = 0;
    int rc = DURO_OK;
    if (n_send > 0)
        rc = request_ids(st, c, r, send, reason, by, now, &sent, op, err);
    if (rc == DURO_OK && n_decide > 0)
        rc = decide_ids(st, c, r, decide, reason, by, now, &decided, &told, op,
                        err);
    if (rc != DURO_OK)
        return rc;
    if (sent != n_send || decided != n_decide)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "%s %s: %zu instances to send to and %zu "
                              "to decide, %zu sent and %zu decided",
                              st->dialect->name, op, n_send, n_decide, sent,
                              decided);
    *woken = sent + told;
    return DURO_OK;
}

/* The body of cancel_instances and control_instances inside their
 * transaction. */
static int request_instances_in_transaction(
    duro__sql_store *st, duro__sql_conn *c, const duro__bulk_request *r,
    const char *const *instance_ids, const char *ids, size_t count,
    const char *reason, const char *by, int64_t now, duro__bulk_decision *found,
    size_t *woken, const char *op, duro_error *err)
{
    const char *reader = st->dialect->ids_reader;
    int rc = lock_ready(st, c, DURO__SQL_REQUEST_IDS_LOCK_READY, ids, op, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_REQUEST_IDS_READ, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, ids);
    duro__sql_bind_i64(st, c, s, 2, now);
    size_t seen = 0;
    duro__bulk_split got;
    duro__bulk_split_open(&got, st->dialect->ids_json);
    while ((rc = duro__sql_step(st, c, s)) == DURO__SQL_ROW) {
        int64_t key = duro__sql_column_int64(st, s, 0);
        if (key < 0 || (uint64_t)key >= count) {
            duro__bulk_split_free(&got);
            return duro_error_set(
                err, DURO_STORAGE, 0, "%s %s: %s gave index %lld of %zu",
                st->dialect->name, op, reader, (long long)key, count);
        }
        int status = duro__sql_column_null(st, s, 1)
                         ? DURO_STATUS_NOT_FOUND
                         : duro__sql_column_int(st, s, 1);
        int action = duro__bulk_decide(r, &found[key], status,
                                       duro__sql_column_int(st, s, 2) != 0,
                                       duro__sql_column_int64(st, s, 3) == 1,
                                       duro__sql_column_int(st, s, 4) != 0);
        if (action != DURO__BULK_SKIP)
            duro__bulk_split_add(&got, instance_ids[key], action);
        seen++;
    }
    if (rc != DURO__SQL_DONE) {
        duro__bulk_split_free(&got);
        return duro__sql_error(st, c, rc, op, err);
    }
    duro__sql_reset(st, s);
    if (seen != count)
        rc = duro_error_set(err, DURO_STORAGE, 0,
                            "%s %s: %s gave %zu ids of %zu", st->dialect->name,
                            op, reader, seen, count);
    else if (duro__bulk_split_close(&got) != DURO_OK)
        rc = nomem(err);
    else
        rc = send_and_decide(st, c, r, got.send.s, got.n_send, got.decide.s,
                             got.n_decide, reason, by, now, woken, op, err);
    duro__bulk_split_free(&got);
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
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = duro__bulk_check_instances(r, st->dialect->name, instance_ids,
                                        count, reason, requested_by, results,
                                        check_name, st, err);
    if (rc != DURO_OK || count == 0)
        return rc;
    duro__strbuf ids = {0};
    int listed = id_list(st, instance_ids, count, &ids);
    duro__bulk_decision *found = duro__calloc(count, sizeof(*found));
    if (listed != DURO_OK || found == NULL) {
        duro__free(ids.s);
        duro__free(found);
        return nomem(err);
    }
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    size_t sent = 0;
    rc = duro__sql_write_begin(st, op, &c, err);
    if (rc == DURO_OK) {
        rc = request_instances_in_transaction(st, c, r, instance_ids, ids.s,
                                              count, reason, requested_by, now,
                                              found, &sent, op, err);
        if (rc == DURO_OK)
            rc = duro__sql_write_commit(st, c, op, err);
        else
            duro__sql_write_rollback(st, c);
    }
    if (rc == DURO_OK) {
        memcpy(results, found, count * sizeof(*found));
        duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, sent);
    }
    duro__free(found);
    duro__free(ids.s);
    return rc;
}

int duro__sql_request_one_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                         int terminate, const char *instance_id,
                                         const char *reason,
                                         const char *requested_by, int64_t now,
                                         size_t *woken, const char *op,
                                         duro_error *err)
{
    duro__bulk_request control = duro__bulk_control(DURO_CONTROL_TERMINATE);
    const duro__bulk_request *r = terminate ? &control : &duro__bulk_cancel;
    duro__strbuf ids = {0};
    if (id_list(st, &instance_id, 1, &ids) != DURO_OK) {
        duro__free(ids.s);
        return nomem(err);
    }
    duro__bulk_decision found = {0};
    int rc = request_instances_in_transaction(st, c, r, &instance_id, ids.s, 1,
                                              reason, requested_by, now, &found,
                                              woken, op, err);
    duro__free(ids.s);
    return rc;
}

int duro__sql_cancel_instances(duro_provider *base,
                               const char *const *instance_ids, size_t count,
                               const char *reason, const char *requested_by,
                               duro_cancel_result *results, duro_error *err)
{
    return request_instances(base, &duro__bulk_cancel, instance_ids, count,
                             reason, requested_by, results, err);
}

int duro__sql_control_instances(duro_provider *base, int control,
                                const char *const *instance_ids, size_t count,
                                const char *reason, const char *requested_by,
                                duro_control_result *results, duro_error *err)
{
    duro__bulk_request r = duro__bulk_control(control);
    return request_instances(base, &r, instance_ids, count, reason,
                             requested_by, results, err);
}

/* ---- sweeps ----------------------------------------------------------
 * The set is read once, in id order, on a snapshot the dialect's sweep
 * source holds (duro__sql_sweep), so instances created after it began are
 * never seen; it comes a page at a time, so memory holds one page. Each
 * batch of at most BATCH members is then checked again and handled in one
 * write transaction of its own, unless the source says the batches write
 * in its one transaction (in_place: SQLite's :memory:, whose set is one
 * page read whole before the first write). A dry run checks each batch on
 * the source's snapshot. A member is an id with its instance's creation
 * time: a batch names its members in a JSON array of [id, created_ms]
 * pairs, so an instance deleted and created again under the same id after
 * the sweep began is not taken for the one that matched. */

typedef struct sweep {
    duro__sql_store *st;
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
    duro__sql_sweep *src; /* where the set is read (and dry runs run) */
    int64_t now;
    size_t woken; /* messages an in-place sweep put on the orchestrator
                     queue, signalled once it commits */
} sweep;

/* One row of the set: an id and its instance's creation time (together
 * they tell the instance from one created later under the same id). */
typedef struct member {
    const char *id;
    int64_t created_ms;
    int unbegun; /* a request sweep: decided at once (when its kind is) */
} member;

static void bind_if(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s,
                    int i, int64_t v)
{
    if (i <= duro__sql_param_count(st, s))
        duro__sql_bind_i64(st, c, s, i, v);
}

static void bind_text_if(duro__sql_store *st, duro__sql_conn *c,
                         duro__sql_stmt *s, int i, const char *v)
{
    if (i <= duro__sql_param_count(st, s))
        duro__sql_bind_text(st, c, s, i, v);
}

/* Binds the filter as the SWEEP_* statements and PURGE_BATCH number it
 * (name at 1 in the former, 9 in the latter; 0: none). */
static void bind_filter(sweep *w, duro__sql_conn *c, duro__sql_stmt *s,
                        int name_at)
{
    static const int status_at[DURO__BULK_STATUSES_MAX] = {2, 3, 4, 11};
    duro__sql_store *st = w->st;
    const duro_bulk_filter *f = w->f;
    if (name_at > 0)
        duro__sql_bind_text(st, c, s, name_at, f->name);
    for (int i = 0; i < DURO__BULK_STATUSES_MAX; i++)
        bind_if(st, c, s, status_at[i], w->statuses[i]);
    bind_text_if(st, c, s, 5, f->version);
    bind_if(st, c, s, 6, f->created_after_ms);
    bind_if(st, c, s, 7, f->created_before_ms);
    bind_if(st, c, s, 8, f->finished_before_ms);
    bind_if(st, c, s, 12, w->req != NULL && w->req->cancel);
    bind_if(st, c, s, 13, w->now);
}

/* Appends ids[0..n) to the result's list while it holds fewer than
 * max_ids. */
static int keep_ids(sweep *w, const char *const *ids, size_t n)
{
    duro_bulk_result *r = w->res;
    duro_arena *a = r->arena;
    for (size_t i = 0; i < n && r->id_count < w->max_ids; i++) {
        if (r->id_count == w->ids_cap) {
            r->ids = duro__sql_arena_grow(a, r->ids, r->id_count, &w->ids_cap,
                                          sizeof(*r->ids));
            if (r->ids == NULL)
                return DURO_NOMEM;
        }
        if ((r->ids[r->id_count] = duro_arena_strdup(a, ids[i])) == NULL)
            return DURO_NOMEM;
        r->id_count++;
    }
    return DURO_OK;
}

/* Appends a copy of text column 0 of s's row to (*ids)[*n] (arena a). */
static int add_id(duro__sql_store *st, duro__sql_stmt *s, duro_arena *a,
                  const char ***ids, size_t *n, size_t *cap)
{
    if (*n == *cap && (*ids = duro__sql_arena_grow(a, (void *)*ids, *n, cap,
                                                   sizeof(**ids))) == NULL)
        return DURO_NOMEM;
    if (duro__sql_column_text(st, a, s, 0, &(*ids)[*n]) != 0 ||
        (*ids)[*n] == NULL)
        return DURO_NOMEM;
    (*n)++;
    return DURO_OK;
}

/* Runs a statement whose first column is an id (bound by the caller) and
 * collects the ids into `out` (strings in arena `a`). */
static int collect_ids(duro__sql_store *st, duro__sql_conn *c,
                       duro__sql_stmt *s, duro_arena *a, const char ***out,
                       size_t *count, const char *op, duro_error *err)
{
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    int rc;
    while ((rc = duro__sql_step(st, c, s)) == DURO__SQL_ROW)
        if (add_id(st, s, a, out, count, &cap) != DURO_OK)
            return nomem(err);
    if (rc != DURO__SQL_DONE)
        return duro__sql_error(st, c, rc, op, err);
    duro__sql_reset(st, s);
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

/* A cancel_matching or control_matching batch inside its transaction:
 * which members are still the same instances, still to be sent the
 * request (and which of them have not begun, to be decided at once), then
 * the request; *done receives them, *applied how many of them were
 * decided. */
static int request_batch(sweep *w, duro__sql_conn *c, const char *pairs,
                         duro_arena *a, const char ***done, size_t *n,
                         size_t *applied, size_t *woken, duro_error *err)
{
    duro__sql_store *st = w->st;
    int rc = lock_ready(st, c, DURO__SQL_SWEEP_REQUEST_LOCK_READY, pairs, w->op,
                        err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SWEEP_REQUEST_RECHECK, w->op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, pairs);
    bind_filter(w, c, s, 0);
    size_t cap = 0;
    duro__bulk_split got;
    duro__bulk_split_open(&got, st->dialect->ids_json);
    int step;
    while ((step = duro__sql_step(st, c, s)) == DURO__SQL_ROW) {
        if (add_id(st, s, a, done, n, &cap) != DURO_OK) {
            rc = nomem(err);
            break;
        }
        int decide = duro__bulk_decides_unbegun(w->req) &&
                     duro__sql_column_int(st, s, 1) != 0;
        duro__bulk_split_add(&got, (*done)[*n - 1],
                             decide ? DURO__BULK_DECIDE : DURO__BULK_SEND);
    }
    if (rc == DURO_OK && step != DURO__SQL_DONE)
        rc = duro__sql_error(st, c, step, w->op, err);
    duro__sql_reset(st, s);
    if (rc == DURO_OK && *n > 0) {
        if (duro__bulk_split_close(&got) != DURO_OK)
            rc = nomem(err);
        else
            rc = send_and_decide(st, c, w->req, got.send.s, got.n_send,
                                 got.decide.s, got.n_decide, w->reason, w->by,
                                 w->now, woken, w->op, err);
        *applied = got.n_decide;
    }
    duro__bulk_split_free(&got);
    return rc;
}

/* What a purge batch deletes (PURGE_BATCH), on c: the batch's transaction
 * in a real run, the snapshot in a dry run. */
static int purge_select(sweep *w, duro__sql_conn *c, const char *pairs,
                        duro_arena *a, const char ***ids, size_t *n,
                        duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(w->st, c, DURO__SQL_PURGE_BATCH, w->op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(w->st, c, s, 1, pairs);
    bind_filter(w, c, s, 9);
    return collect_ids(w->st, c, s, a, ids, n, w->op, err);
}

/* A purge batch inside its transaction. */
static int purge_batch(sweep *w, duro__sql_conn *c, const char *pairs,
                       duro_arena *a, duro__strbuf *plain, const char ***done,
                       size_t *n, duro_error *err)
{
    duro__sql_store *st = w->st;
    int rc = purge_select(w, c, pairs, a, done, n, err);
    if (rc != DURO_OK || *n == 0)
        return rc;
    if (id_list(st, *done, *n, plain) != DURO_OK)
        return nomem(err);
    /* Instances last, as delete_instance does. */
    static const duro__sql_stmt_id steps[] = {
        DURO__SQL_PURGE_HISTORY,  DURO__SQL_PURGE_EXECUTIONS,
        DURO__SQL_PURGE_MESSAGES, DURO__SQL_PURGE_READY,
        DURO__SQL_PURGE_WORK,     DURO__SQL_PURGE_EVENT_IDS,
        DURO__SQL_PURGE_INSTANCES};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++) {
        duro__sql_stmt *s = duro__sql_prepare(st, c, steps[i], w->op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, plain->s);
        if ((rc = duro__sql_run(st, c, s, w->op, err)) != DURO_OK)
            return rc;
    }
    if ((size_t)duro__sql_changes(st, c) != *n)
        return duro_error_set(
            err, DURO_STORAGE, 0, "%s %s: %zu instances to delete, %d deleted",
            st->dialect->name, w->op, *n, duro__sql_changes(st, c));
    return DURO_OK;
}

/* Handles one batch of members: in a real run, in a write transaction of
 * its own (or in place, in the source's); a dry run reads the source's
 * snapshot. */
static int handle_batch(sweep *w, const member *m, size_t count,
                        duro_error *err)
{
    if (count == 0)
        return DURO_OK;
    duro__sql_store *st = w->st;
    duro_arena *a = duro_arena_create();
    duro__strbuf pairs = {0}, plain = {0};
    int rc = a != NULL && members_json(m, count, &pairs) == DURO_OK
                 ? DURO_OK
                 : nomem(err);
    const char **done = NULL;
    size_t n = 0, applied = 0, woken = 0;
    if (rc == DURO_OK && w->dry_run) {
        if (w->req == NULL) {
            rc = purge_select(w, w->src->conn, pairs.s, a, &done, &n, err);
        } else {
            /* the SELECT already took only the instances to send to, and
             * said which it would decide at once */
            done = duro_arena_alloc(a, count * sizeof(*done));
            if (done == NULL)
                rc = nomem(err);
            for (size_t i = 0; rc == DURO_OK && i < count; i++) {
                done[n++] = m[i].id;
                applied += duro__bulk_decides_unbegun(w->req) && m[i].unbegun;
            }
        }
    } else if (rc == DURO_OK) {
        int own = !w->src->in_place;
        duro__sql_conn *c = w->src->conn;
        if (own)
            rc = duro__sql_write_begin(st, w->op, &c, err);
        if (rc == DURO_OK) {
            w->now = duro__wall_ms();
            rc = w->req == NULL
                     ? purge_batch(w, c, pairs.s, a, &plain, &done, &n, err)
                     : request_batch(w, c, pairs.s, a, &done, &n, &applied,
                                     &woken, err);
            if (own && rc == DURO_OK)
                rc = duro__sql_write_commit(st, c, w->op, err);
            else if (own)
                duro__sql_write_rollback(st, c);
        }
        if (rc == DURO_OK && own && w->req != NULL)
            duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, woken);
        w->woken += woken;
    }
    if (rc == DURO_OK) {
        w->res->count += n;
        w->res->applied += applied;
        if (keep_ids(w, done, n) != DURO_OK)
            rc = nomem(err);
    }
    duro__free(pairs.s);
    duro__free(plain.s);
    duro_arena_destroy(a);
    return rc;
}

/* Reads the set page by page (`set`: its statement, prepared and bound)
 * and hands each page to handle_batch in batches of at most BATCH. */
static int read_and_handle(sweep *w, duro__sql_stmt *set, duro_error *err)
{
    duro__sql_store *st = w->st;
    duro__sql_sweep *src = w->src;
    duro__sql_conn *c = src->conn;
    member *m = NULL;
    size_t cap = 0;
    duro__sql_stmt *s = NULL;
    int rc = DURO_OK, step = DURO__SQL_ROW;
    while (rc == DURO_OK && step == DURO__SQL_ROW) {
        duro_arena *a = duro_arena_create();
        if (a == NULL) {
            rc = nomem(err);
            break;
        }
        if ((s = st->dialect->sweep_page(st, src, set, w->op, err)) == NULL) {
            rc = err->code;
            duro_arena_destroy(a);
            break;
        }
        size_t n = 0;
        while (n < src->page &&
               (step = duro__sql_step(st, c, s)) == DURO__SQL_ROW) {
            if (n == cap) {
                size_t new_cap = cap ? cap * 2 : 64;
                member *grown = duro__realloc(m, new_cap * sizeof(*m));
                if (grown == NULL) {
                    rc = nomem(err);
                    break;
                }
                m = grown;
                cap = new_cap;
            }
            m[n].created_ms = duro__sql_column_int64(st, s, 1);
            m[n].unbegun =
                w->req != NULL && duro__sql_column_int(st, s, 2) != 0;
            if (duro__sql_column_text(st, a, s, 0, &m[n].id) != 0 ||
                m[n].id == NULL) {
                rc = nomem(err);
                break;
            }
            n++;
        }
        if (rc == DURO_OK && step != DURO__SQL_ROW && step != DURO__SQL_DONE)
            rc = duro__sql_error(st, c, step, w->op, err);
        if (step == DURO__SQL_DONE)
            duro__sql_reset(st, s); /* the set is read: no cursor while
                                       handling (an in-place sweep writes
                                       on this same connection) */
        for (size_t at = 0; rc == DURO_OK && at < n; at += BATCH)
            rc = handle_batch(w, m + at, DURO__MIN(n - at, (size_t)BATCH), err);
        duro_arena_destroy(a);
    }
    if (s != NULL)
        duro__sql_reset(st, s);
    duro__free(m);
    return rc;
}

static int run_sweep(sweep *w, duro_bulk_result **out, duro_error *err)
{
    duro__sql_store *st = w->st;
    const char *op = w->op;
    int by_name = w->f->name != NULL;
    duro__sql_stmt_id select =
        w->req == NULL
            ? (by_name ? DURO__SQL_SWEEP_PURGE_NAME : DURO__SQL_SWEEP_PURGE_ALL)
            : (by_name ? DURO__SQL_SWEEP_REQUEST_NAME
                       : DURO__SQL_SWEEP_REQUEST_ALL);
    duro_arena *a = duro_arena_create();
    w->res = a != NULL ? duro_arena_alloc(a, sizeof(*w->res)) : NULL;
    if (w->res == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    w->res->arena = a;
    w->now = duro__wall_ms(); /* the set's: which have not begun */
    /* pages of a batch, written batch by batch, unless the dialect says
     * otherwise */
    duro__sql_sweep src = {
        .dry_run = w->dry_run, .in_place = 0, .page = DURO_BULK_BATCH_MAX};
    int rc = st->dialect->sweep_open(st, &src, op, err);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    w->src = &src;
    duro__sql_stmt *set = duro__sql_prepare(st, src.conn, select, op, err);
    rc = set != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        bind_filter(w, src.conn, set, 1);
        rc = read_and_handle(w, set, err);
    }
    rc = st->dialect->sweep_close(st, &src, rc, op, err);
    if (rc == DURO_OK && src.in_place && !w->dry_run && w->req != NULL)
        duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, w->woken);
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
    DURO__SQL_ERR_INIT(err, local);
    sweep w = {.st = duro__sql_of(base),
               .op = r->op_matching,
               .req = r,
               .f = filter,
               .reason = reason,
               .by = requested_by,
               .dry_run = dry_run != 0,
               .max_ids = max_ids};
    int rc = duro__bulk_check_matching(r, w.st->dialect->name, filter, reason,
                                       requested_by, out, w.statuses,
                                       check_name, w.st, err);
    return rc != DURO_OK ? rc : run_sweep(&w, out, err);
}

int duro__sql_cancel_matching(duro_provider *base,
                              const duro_bulk_filter *filter,
                              const char *reason, const char *requested_by,
                              int dry_run, size_t max_ids,
                              duro_bulk_result **out, duro_error *err)
{
    return request_matching(base, &duro__bulk_cancel, filter, reason,
                            requested_by, dry_run, max_ids, out, err);
}

int duro__sql_control_matching(duro_provider *base, int control,
                               const duro_bulk_filter *filter,
                               const char *reason, const char *requested_by,
                               int dry_run, size_t max_ids,
                               duro_bulk_result **out, duro_error *err)
{
    duro__bulk_request r = duro__bulk_control(control);
    return request_matching(base, &r, filter, reason, requested_by, dry_run,
                            max_ids, out, err);
}

int duro__sql_purge_instances(duro_provider *base,
                              const duro_bulk_filter *filter, int dry_run,
                              size_t max_ids, duro_bulk_result **out,
                              duro_error *err)
{
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    sweep w = {.st = duro__sql_of(base),
               .op = "purge_instances",
               .f = filter,
               .dry_run = dry_run != 0,
               .max_ids = max_ids};
    int rc = duro__bulk_check_purge(w.st->dialect->name, filter, out,
                                    w.statuses, check_name, w.st, err);
    return rc != DURO_OK ? rc : run_sweep(&w, out, err);
}
