/* pg_arrays.c - PostgreSQL array literals: statements over many rows bind
 * each column as one literal, {elem,elem,...}, built in a duro__strbuf.
 * Owns nothing; any thread (a literal is its caller's). */
#include <stdio.h>
#include <string.h>

#include "providers/postgres/pg_queue.h"

/* ---- array literals ---------------------------------------------------------
 * Statements over many rows bind each column as one PostgreSQL array
 * literal: {elem,elem,...} built in a duro__strbuf. */

void duro__pg_cols_open(duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        duro__strbuf_open(&b[i], '{');
}

/* Closes n literals; 1 when any ran out of memory. */
int duro__pg_cols_close(duro__strbuf *b, size_t n)
{
    int oom = 0;
    for (size_t i = 0; i < n; i++) {
        duro__strbuf_add(&b[i], "}", 1);
        oom |= b[i].oom;
    }
    return oom;
}

void duro__pg_cols_free(duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        duro__free(b[i].s);
        b[i].s = NULL;
    }
}

void duro__pg_col_num(duro__strbuf *b, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", (long long)v);
    duro__strbuf_sep(b);
    duro__strbuf_add(b, num, (size_t)n);
}

void duro__pg_col_text(duro__strbuf *b, const char *v)
{
    duro__strbuf_sep(b);
    if (v == NULL)
        duro__strbuf_add(b, "NULL", 4);
    else
        duro__strbuf_quoted(b, v);
}

/* Binds n closed literals as parameters 1..n of s and runs it; returns the
 * step. The caller resets s before the literals go. */
int duro__pg_run_cols(duro__pg_provider *p, duro__pg_conn *c,
                      duro__pg_statement *s, duro__strbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        duro__pg_bind_text(c, s, (int)i + 1, b[i].s);
    return duro__pg_step(p, c, s);
}

/* Appends one element to each of the 19 array literals of
 * HISTORY_INSERT_MANY ($3..$21). */
void duro__pg_append_event_columns(duro__strbuf *col, const duro_event *ev)
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
