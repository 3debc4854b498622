/* store.c - what the SQL layer writes once on top of a dialect's
 * primitives: running a statement to completion, copying a text column,
 * the input checks, growing arena arrays, a grouped write's linger. Any
 * thread (a connection by one at a time). */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "providers/sql/sql.h"

void duro__sql_linger(_Atomic int *queued, _Atomic int *urgent, int company,
                      int64_t ns)
{
    if (company <= 1)
        return;
    int64_t until = duro__mono_ns() + ns;
    while (atomic_load(queued) < company &&
           (urgent == NULL || atomic_load(urgent) == 0) &&
           duro__mono_ns() < until)
        sched_yield();
}

int duro__sql_run(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt *s,
                  const char *op, duro_error *err)
{
    int rc;
    while ((rc = duro__sql_step(st, c, s)) == DURO__SQL_ROW) {
    }
    if (rc != DURO__SQL_DONE)
        return duro__sql_error(st, c, rc, op, err);
    return DURO_OK;
}

int duro__sql_exec(duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt_id id,
                   const char *op, duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(st, c, id, op, err);
    return s != NULL ? duro__sql_run(st, c, s, op, err) : err->code;
}

int duro__sql_column_text(duro__sql_store *st, duro_arena *a, duro__sql_stmt *s,
                          int col, const char **out)
{
    const char *text = duro__sql_column_text_raw(st, s, col);
    if (text == NULL) {
        *out = NULL;
        return duro__sql_column_null(st, s, col) ? 0 : -1;
    }
    size_t n = (size_t)duro__sql_column_bytes(st, s, col);
    char *copy = duro_arena_alloc(a, n + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, text, n);
    copy[n] = '\0';
    *out = copy;
    return 0;
}

/* Text a store refuses unless it is UTF-8 (st->utf8_only): DURO_INVALID,
 * "<dialect>: <what>" naming the field. */
static int check_text(const duro__sql_store *st, const char *what,
                      const char *s, duro_error *err)
{
    if (!st->utf8_only || s == NULL)
        return DURO_OK;
    char field[96];
    snprintf(field, sizeof(field), "%s: %s", st->dialect->name, what);
    return duro__check_utf8_err(field, s, err);
}

int duro__sql_check_id(const duro__sql_store *st, const char *what,
                       const char *s, duro_error *err)
{
    if (s == NULL || s[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0, "%s is NULL or empty",
                              what);
    return duro__sql_check_name(st, what, s, 0, err);
}

int duro__sql_check_name(const duro__sql_store *st, const char *what,
                         const char *s, int required, duro_error *err)
{
    if (required)
        return duro__sql_check_id(st, what, s, err);
    if (s != NULL && strnlen(s, DURO__SQL_NAME_MAX + 1) > DURO__SQL_NAME_MAX)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%s is longer than %d bytes", what,
                              DURO__SQL_NAME_MAX);
    return check_text(st, what, s, err);
}

int duro__sql_check_payload(const duro__sql_store *st, const char *what,
                            const char *s, duro_error *err)
{
    if (s != NULL && strnlen(s, st->max_payload + 1) > st->max_payload)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%s is larger than max_payload (%zu bytes)", what,
                              st->max_payload);
    return check_text(st, what, s, err);
}

void *duro__sql_arena_grow(duro_arena *a, void *old, size_t count, size_t *cap,
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

int duro__sql_read_rows(duro__sql_store *st, duro__sql_conn *c,
                        duro__sql_stmt *s, duro_arena *a, void *items,
                        size_t *count, size_t size, duro__sql_row_fn row,
                        const char *op, duro_error *err)
{
    void **array = items; /* the caller's `T *` as a `void *` */
    size_t cap = *count;
    int rc = DURO_OK, step;
    while ((step = duro__sql_step(st, c, s)) == DURO__SQL_ROW) {
        if (*count == cap) {
            *array = duro__sql_arena_grow(a, *array, *count, &cap, size);
            if (*array == NULL) {
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
                break;
            }
        }
        void *item = (char *)*array + *count * size;
        memset(item, 0, size);
        if ((rc = row(st, s, a, item, op, err)) != DURO_OK)
            break;
        (*count)++;
    }
    if (rc == DURO_OK && step != DURO__SQL_DONE)
        rc = duro__sql_error(st, c, step, op, err);
    duro__sql_reset(st, s);
    return rc;
}

int duro__sql_fault_due(duro__sql_store *st, uint64_t *step)
{
    uint64_t n = atomic_fetch_add(&st->steps, 1) + 1;
    uint64_t at = atomic_load(&st->fault_at);
    if (step != NULL)
        *step = n;
    if (at == 0 || n != at)
        return 0;
    atomic_store(&st->fault_at, 0);
    return atomic_load(&st->fault_retryable) ? 1 : 2;
}

int duro__sql_check_queue(duro_queue queue, duro_error *err)
{
    if (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown queue %d",
                              (int)queue);
    return DURO_OK;
}
