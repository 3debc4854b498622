/* adapt.h - the adapters between the shared layer's primitives (sql.h)
 * and a dialect whose own functions follow one naming, each a cast and a
 * call, so the casts are written once; and the declarations of those
 * functions, for the dialect's internal header.
 *
 * DURO__SQL_DECLARE_PRIMITIVES(pfx, P, C, S) declares them (and _run and
 * _column_text, which the dialect's own files use): their contracts are
 * the members' of duro__sql_dialect (sql.h); _run steps a statement to
 * completion (DURO_OK or err), _column_text copies a text column into an
 * arena (NULL for SQL NULL; -1 when out of memory).
 *
 * DURO__SQL_ADAPTERS(pfx, P, C, S) defines them for a dialect with
 * duro__<pfx>_stmt, _step, _error, _bind_text, _bind_i64, _write_begin,
 * _write_commit, _write_rollback, _reader_acquire and _reader_release over its
 * provider type P, connection type C and statement type S;
 * DURO__SQL_ADAPT_COLUMNS(pfx, C, S), the same for duro__<pfx>_reset,
 * _changes, _param_count, _column_int64, _column_null, _column_text_raw and
 * _column_bytes (a dialect over another API writes those itself, with the
 * same static names). DURO__SQL_ADAPTED is the dialect initializer's part
 * that names them all. */
#ifndef DURO_SQL_ADAPT_H
#define DURO_SQL_ADAPT_H

#include "providers/sql/sql.h"

#define DURO__SQL_DECLARE_PRIMITIVES(pfx, P, C, S)                             \
    S *duro__##pfx##_stmt(P *p, C *c, duro__sql_stmt_id id, const char *op,    \
                          duro_error *err);                                    \
    int duro__##pfx##_step(P *p, C *c, S *s);                                  \
    int duro__##pfx##_run(P *p, C *c, S *s, const char *op, duro_error *err);  \
    int duro__##pfx##_error(C *c, int rc, const char *op, duro_error *err);    \
    void duro__##pfx##_bind_text(C *c, S *s, int i, const char *v);            \
    void duro__##pfx##_bind_i64(C *c, S *s, int i, int64_t v);                 \
    int duro__##pfx##_column_text(duro_arena *a, S *s, int col,                \
                                  const char **out);                           \
    int duro__##pfx##_write_begin(P *p, const char *op, C **out,               \
                                  duro_error *err);                            \
    int duro__##pfx##_write_commit(P *p, C *c, const char *op,                 \
                                   duro_error *err);                           \
    void duro__##pfx##_write_rollback(P *p, C *c);                             \
    C *duro__##pfx##_reader_acquire(P *p);                                     \
    void duro__##pfx##_reader_release(P *p, C *c)

/* A write_begin-like member `name` over the dialect's fn(P *, op, C **out,
 * err): a dialect's other ways to begin (SQLite's urgent writer,
 * PostgreSQL's snapshot) are adapted by the same cast. */
#define DURO__SQL_ADAPT_BEGIN(name, fn, P, C)                                  \
    static int name(duro__sql_store *st, const char *op, duro__sql_conn **out, \
                    duro_error *err)                                           \
    {                                                                          \
        C *c = NULL;                                                           \
        int rc = fn((P *)st, op, &c, err);                                     \
        *out = (duro__sql_conn *)c;                                            \
        return rc;                                                             \
    }

#define DURO__SQL_ADAPTERS(pfx, P, C, S)                                       \
    static duro__sql_stmt *adapt_prepare(                                      \
        duro__sql_store *st, duro__sql_conn *c, duro__sql_stmt_id id,          \
        const char *op, duro_error *err)                                       \
    {                                                                          \
        return (duro__sql_stmt *)duro__##pfx##_stmt((P *)st, (C *)c, id, op,   \
                                                    err);                      \
    }                                                                          \
    static int adapt_step(duro__sql_store *st, duro__sql_conn *c,              \
                          duro__sql_stmt *s)                                   \
    {                                                                          \
        return duro__##pfx##_step((P *)st, (C *)c, (S *)s);                    \
    }                                                                          \
    static int adapt_error(duro__sql_conn *c, int rc, const char *op,          \
                           duro_error *err)                                    \
    {                                                                          \
        return duro__##pfx##_error((C *)c, rc, op, err);                       \
    }                                                                          \
    static void adapt_bind_text(duro__sql_conn *c, duro__sql_stmt *s, int i,   \
                                const char *v)                                 \
    {                                                                          \
        duro__##pfx##_bind_text((C *)c, (S *)s, i, v);                         \
    }                                                                          \
    static void adapt_bind_i64(duro__sql_conn *c, duro__sql_stmt *s, int i,    \
                               int64_t v)                                      \
    {                                                                          \
        duro__##pfx##_bind_i64((C *)c, (S *)s, i, v);                          \
    }                                                                          \
    DURO__SQL_ADAPT_BEGIN(adapt_write_begin, duro__##pfx##_write_begin, P, C)  \
    static int adapt_write_commit(duro__sql_store *st, duro__sql_conn *c,      \
                                  const char *op, duro_error *err)             \
    {                                                                          \
        return duro__##pfx##_write_commit((P *)st, (C *)c, op, err);           \
    }                                                                          \
    static void adapt_write_rollback(duro__sql_store *st, duro__sql_conn *c)   \
    {                                                                          \
        duro__##pfx##_write_rollback((P *)st, (C *)c);                         \
    }                                                                          \
    static duro__sql_conn *adapt_reader_acquire(duro__sql_store *st)           \
    {                                                                          \
        return (duro__sql_conn *)duro__##pfx##_reader_acquire((P *)st);        \
    }                                                                          \
    static void adapt_reader_release(duro__sql_store *st, duro__sql_conn *c)   \
    {                                                                          \
        duro__##pfx##_reader_release((P *)st, (C *)c);                         \
    }

#define DURO__SQL_ADAPT_COLUMNS(pfx, C, S)                                     \
    static void adapt_reset(duro__sql_stmt *s)                                 \
    {                                                                          \
        duro__##pfx##_reset((S *)s);                                           \
    }                                                                          \
    static int adapt_changes(duro__sql_conn *c)                                \
    {                                                                          \
        return duro__##pfx##_changes((C *)c);                                  \
    }                                                                          \
    static int adapt_param_count(duro__sql_stmt *s)                            \
    {                                                                          \
        return duro__##pfx##_param_count((S *)s);                              \
    }                                                                          \
    static int64_t adapt_column_int64(duro__sql_stmt *s, int col)              \
    {                                                                          \
        return duro__##pfx##_column_int64((S *)s, col);                        \
    }                                                                          \
    static int adapt_column_null(duro__sql_stmt *s, int col)                   \
    {                                                                          \
        return duro__##pfx##_column_null((S *)s, col);                         \
    }                                                                          \
    static const char *adapt_column_text(duro__sql_stmt *s, int col)           \
    {                                                                          \
        return duro__##pfx##_column_text_raw((S *)s, col);                     \
    }                                                                          \
    static int adapt_column_bytes(duro__sql_stmt *s, int col)                  \
    {                                                                          \
        return duro__##pfx##_column_bytes((S *)s, col);                        \
    }

/* The dialect initializer's part that every dialect fills alike: the
 * functions of its files named duro__<pfx>_has_statement, _statement_texts,
 * _ack_turns, _ack_work, _fetch_work, the size of duro__<pfx>_provider,
 * and the statics of its dialect file named sweep_open, sweep_page,
 * sweep_close, bind_flag, unique_violation and configure. */
#define DURO__SQL_DIALECT_NAMED(pfx)                                           \
    .has = duro__##pfx##_has_statement,                                        \
    .texts = duro__##pfx##_statement_texts, .sweep_open = sweep_open,          \
    .sweep_page = sweep_page, .sweep_close = sweep_close,                      \
    .bind_flag = bind_flag, .unique_violation = unique_violation,              \
    .ack_turns = duro__##pfx##_ack_turns, .ack_work = duro__##pfx##_ack_work,  \
    .fetch_work = duro__##pfx##_fetch_work,                                    \
    .provider_size = sizeof(duro__##pfx##_provider), .configure = configure

#define DURO__SQL_ADAPTED                                                      \
    .prepare = adapt_prepare, .step = adapt_step, .error = adapt_error,        \
    .reset = adapt_reset, .changes = adapt_changes,                            \
    .param_count = adapt_param_count, .bind_text = adapt_bind_text,            \
    .bind_i64 = adapt_bind_i64, .column_int64 = adapt_column_int64,            \
    .column_null = adapt_column_null, .column_text = adapt_column_text,        \
    .column_bytes = adapt_column_bytes, .write_begin = adapt_write_begin,      \
    .write_commit = adapt_write_commit,                                        \
    .write_rollback = adapt_write_rollback,                                    \
    .reader_acquire = adapt_reader_acquire,                                    \
    .reader_release = adapt_reader_release

#endif
