/* adapt.h - for a dialect's file only: the adapters between the shared
 * layer's primitives (sql.h) and a dialect whose own functions follow one
 * naming, each a cast and a call, so the casts are written once.
 *
 * DURO__SQL_ADAPTERS(pfx, P, C, S) defines them for a dialect with
 * duro__<pfx>_stmt, _step, _error, _bind_text, _bind_i64, _write_begin,
 * _write_commit, _write_rollback, _reader_acquire, _reader_release and
 * _signal over its provider type P, connection type C and statement type S;
 * DURO__SQL_ADAPT_COLUMNS(pfx, C, S), the same for duro__<pfx>_reset,
 * _changes, _param_count, _column_int64, _column_null, _column_text_raw and
 * _column_bytes (a dialect over another API writes those itself, with the
 * same static names). DURO__SQL_ADAPTED is the dialect initializer's part
 * that names them all. */
#ifndef DURO_SQL_ADAPT_H
#define DURO_SQL_ADAPT_H

#include "providers/sql/sql.h"

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
    static int adapt_write_begin(duro__sql_store *st, const char *op,          \
                                 duro__sql_conn **out, duro_error *err)        \
    {                                                                          \
        C *c = NULL;                                                           \
        int rc = duro__##pfx##_write_begin((P *)st, op, &c, err);              \
        *out = (duro__sql_conn *)c;                                            \
        return rc;                                                             \
    }                                                                          \
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
    }                                                                          \
    static void adapt_signal(duro__sql_store *st, duro_queue queue,            \
                             size_t items)                                     \
    {                                                                          \
        duro__##pfx##_signal((P *)st, queue, items);                           \
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
    .reader_release = adapt_reader_release, .signal = adapt_signal

#endif
