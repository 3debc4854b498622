/* stats.c - read_store_stats, written once: the store's gauges (instances
 * by name and status, problems, queue states, size on disk) in one read
 * transaction on a reader (a snapshot: SQLite's BEGIN on a reader,
 * PostgreSQL's REPEATABLE READ READ ONLY), packed into one caller-owned
 * allocation. PostgreSQL first sets its plan (STATS_PLAN: the counts read
 * index entries, never the rows). Any thread; holds no lock a writer
 * waits for (with a reader pool). */
#include <stdint.h>
#include <string.h>

#include "providers/sql/sql.h"

/* One row of a count list while it is read: the name is a copy of its own
 * until everything is packed into the caller's allocation. */
typedef struct row {
    char *name;
    int status;
    uint64_t count;
} row;

typedef struct rows {
    row *items;
    size_t count, cap;
    size_t name_bytes; /* sum of strlen + 1 */
} rows;

static void rows_free(rows *r)
{
    for (size_t i = 0; i < r->count; i++)
        duro__free(r->items[i].name);
    duro__free(r->items);
    memset(r, 0, sizeof(*r));
}

static int nomem(duro_error *err)
{
    return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
}

/* Runs a statement without parameters whose rows are (name, [status,]
 * count) and appends them to out; status_col < 0: no status column. */
static int read_rows(duro__sql_store *p, duro__sql_conn *c,
                     duro__sql_stmt_id id, int status_col, rows *out,
                     const char *op, duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    int count_col = status_col < 0 ? 1 : 2;
    int rc;
    while ((rc = duro__sql_step(p, c, s)) == DURO__SQL_ROW) {
        const char *text = duro__sql_column_text_raw(p, s, 0);
        size_t n = text != NULL ? (size_t)duro__sql_column_bytes(p, s, 0) : 0;
        row *r = duro__vec_push((void **)&out->items, &out->count, &out->cap,
                                sizeof(*out->items));
        if (r == NULL)
            return nomem(err);
        /* an empty name stands for one not known (never NULL) */
        r->name = duro__strndup(text != NULL ? text : "", n);
        if (r->name == NULL)
            return nomem(err);
        r->status = status_col < 0 ? 0 : duro__sql_column_int(p, s, status_col);
        r->count = (uint64_t)duro__sql_column_int64(p, s, count_col);
        out->name_bytes += n + 1;
    }
    if (rc != DURO__SQL_DONE)
        return duro__sql_error(p, c, rc, op, err);
    duro__sql_reset(p, s);
    return DURO_OK;
}

/* Runs a statement bound to now (?1, when it has a parameter) that returns
 * one row and reads up to two integer columns of it (NULL reads as 0). */
static int read_one(duro__sql_store *p, duro__sql_conn *c, duro__sql_stmt_id id,
                    int64_t now, int64_t *a, int64_t *b, const char *op,
                    duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    if (duro__sql_param_count(p, s) > 0)
        duro__sql_bind_i64(p, c, s, 1, now);
    int rc = duro__sql_step(p, c, s);
    if (rc == DURO__SQL_DONE)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "%s %s: an aggregate returned no row",
                              p->dialect->name, op);
    if (rc != DURO__SQL_ROW)
        return duro__sql_error(p, c, rc, op, err);
    *a = duro__sql_column_int64(p, s, 0);
    if (b != NULL)
        *b = duro__sql_column_int64(p, s, 1);
    duro__sql_reset(p, s);
    return DURO_OK;
}

/* The stats and both lists in one allocation: the struct, the two arrays,
 * then the names. NULL when out of memory or the size would wrap. */
static duro_store_stats *pack(const duro_store_stats *v, const rows *inst,
                              const rows *prob)
{
    size_t entries = inst->count + prob->count;
    size_t names = inst->name_bytes + prob->name_bytes;
    if (entries >
        (DURO__ALLOC_MAX - sizeof(duro_store_stats)) / sizeof(duro_store_count))
        return NULL;
    size_t size = sizeof(duro_store_stats) + entries * sizeof(duro_store_count);
    if (names > DURO__ALLOC_MAX - size)
        return NULL;
    size += names;
    unsigned char *block = duro__malloc(size);
    if (block == NULL)
        return NULL;
    duro_store_stats *out = (duro_store_stats *)block;
    *out = *v;
    duro_store_count *counts =
        (duro_store_count *)(block + sizeof(duro_store_stats));
    char *text = (char *)(counts + entries);
    const rows *lists[2] = {inst, prob};
    for (int l = 0; l < 2; l++) {
        duro_store_count *first = counts;
        for (size_t i = 0; i < lists[l]->count; i++) {
            const row *r = &lists[l]->items[i];
            size_t n = strlen(r->name) + 1;
            memcpy(text, r->name, n);
            counts->name = text;
            counts->status = r->status;
            counts->count = r->count;
            counts++;
            text += n;
        }
        if (l == 0) {
            out->instances = lists[l]->count > 0 ? first : NULL;
            out->instance_count = lists[l]->count;
        } else {
            out->problems = lists[l]->count > 0 ? first : NULL;
            out->problem_count = lists[l]->count;
        }
    }
    return out;
}

/* Every statement of the snapshot, in order. The first read starts the
 * snapshot; now is read after it, so no commit the snapshot misses can
 * have happened before now. */
static int read_all(duro__sql_store *p, duro__sql_conn *c, duro_store_stats *v,
                    rows *inst, rows *prob, const char *op, duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(p, c, DURO__SQL_BEGIN_READ, op, err);
    if (s == NULL)
        return err->code;
    int rc = duro__sql_run(p, c, s, op, err);
    if (rc == DURO_OK && p->dialect->has(DURO__SQL_STATS_PLAN))
        rc = duro__sql_exec(p, c, DURO__SQL_STATS_PLAN, op, err);
    int64_t pages = 0, total = 0, ready = 0, oldest = 0, locked = 0;
    if (rc == DURO_OK)
        rc = read_one(p, c, DURO__SQL_STATS_SIZE, 0, &pages, NULL, op, err);
    v->now_ms = duro__wall_ms();
    int64_t now = v->now_ms;
    if (rc == DURO_OK)
        rc = read_rows(p, c, DURO__SQL_STATS_INSTANCES, 1, inst, op, err);
    if (rc == DURO_OK)
        rc = read_rows(p, c, DURO__SQL_STATS_PROBLEMS, -1, prob, op, err);
    /* ready: the visible messages but those of instances not fetchable */
    int64_t visible = 0, waiting = 0;
    if (rc == DURO_OK)
        rc = read_one(p, c, DURO__SQL_STATS_ORCH_QUEUED, now, &total, &visible,
                      op, err);
    if (rc == DURO_OK)
        rc = read_one(p, c, DURO__SQL_STATS_ORCH_WAITING, now, &waiting,
                      &locked, op, err);
    if (rc == DURO_OK)
        rc = read_one(p, c, DURO__SQL_STATS_ORCH_OLDEST, now, &oldest, NULL, op,
                      err);
    if (rc != DURO_OK)
        return rc;
    ready = visible > waiting ? visible - waiting : 0;
    v->orchestrator_ready = (uint64_t)ready;
    v->orchestrator_locked = (uint64_t)locked;
    v->orchestrator_delayed =
        total > ready + locked ? (uint64_t)(total - ready - locked) : 0;
    v->orchestrator_oldest_ready_ms = ready > 0 ? oldest : 0;
    rc = read_one(p, c, DURO__SQL_STATS_WORKER_READY, now, &ready, &oldest, op,
                  err);
    if (rc == DURO_OK)
        rc = read_one(p, c, DURO__SQL_STATS_WORKER_LOCKED, now, &locked, NULL,
                      op, err);
    if (rc != DURO_OK)
        return rc;
    v->worker_ready = (uint64_t)ready;
    v->worker_locked = (uint64_t)locked;
    v->worker_oldest_ready_ms = ready > 0 ? oldest : 0;
    /* the tables and their indexes (PostgreSQL's with TOAST), and what the
     * store keeps beside them (SQLite's WAL) */
    v->store_size_bytes = pages;
    if (p->dialect->bytes_beside != NULL)
        v->store_size_bytes += p->dialect->bytes_beside(p);
    return DURO_OK;
}

int duro__sql_read_store_stats(duro_provider *base, duro_store_stats **out,
                               duro_error *err)
{
    static const char op[] = "read_store_stats";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sql_store *p = duro__sql_of(base);
    duro_store_stats v;
    memset(&v, 0, sizeof(v));
    rows inst = {0}, prob = {0};
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    int rc = read_all(p, c, &v, &inst, &prob, op, err);
    duro__sql_reader_release(p, c);
    if (rc == DURO_OK) {
        *out = pack(&v, &inst, &prob);
        if (*out == NULL)
            rc = nomem(err);
    }
    rows_free(&inst);
    rows_free(&prob);
    return rc;
}
