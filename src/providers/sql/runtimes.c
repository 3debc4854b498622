/* runtimes.c - a SQL store's table of live runtimes (provider contract
 * version 12): register_runtime (a row written whole, with the rows no
 * longer live deleted), list_runtimes (a pure read on a reader) and
 * remove_runtime, written once over the dialect's primitives. What a
 * runtime registers is kept as JSON text, written here and read back with
 * the base's JSON reader. Any thread. */
#include <stdio.h>
#include <string.h>

#include "base/json_reader.h"
#include "providers/sql/sql.h"

/* The SQL (statements.h, DURO__SQL_RUNTIME_LIVE) spells the constant. */
_Static_assert(DURO_RUNTIME_MISSED_HEARTBEATS == 3,
               "DURO__SQL_RUNTIME_LIVE multiplies by 3");

static int nomem(duro_error *err)
{
    return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
}

/* A registered name or version: within the name limit and UTF-8 in every
 * store (the JSON it is written into is read back as UTF-8). */
static int check_text(const duro__sql_store *st, const char *op,
                      const char *what, size_t i, const char *s, int required,
                      duro_error *err)
{
    char label[64];
    snprintf(label, sizeof(label), "%s %zu", what, i);
    int rc = duro__sql_check_name(st, label, s, required, err);
    if (rc == DURO_OK && s != NULL)
        rc = duro__check_utf8_err(label, s, err);
    if (rc != DURO_OK) {
        /* the message names the method and the store, as the others do */
        char detail[DURO_ERROR_MESSAGE_MAX];
        snprintf(detail, sizeof(detail), "%s", err->message);
        duro_error_set(err, rc, 0, "%s %s: %s", st->dialect->name, op, detail);
    }
    return rc;
}

static int invalid(const duro__sql_store *st, const char *op, const char *why,
                   duro_error *err)
{
    return duro_error_set(err, DURO_INVALID, 0, "%s %s: %s", st->dialect->name,
                          op, why);
}

/* Every input rule of register_runtime (provider.h). */
static int check_info(const duro__sql_store *st, const duro_runtime_info *in,
                      const char *op, duro_error *err)
{
    if (in == NULL)
        return invalid(st, op, "info is NULL", err);
    int rc;
    if ((rc = check_text(st, op, "runtime_id", 0, in->runtime_id, 1, err)) ||
        (rc = check_text(st, op, "host", 0, in->host, 0, err)))
        return rc;
    if (in->pid < 0 || in->started_ms < 0)
        return invalid(st, op, "pid or started_ms is negative", err);
    if (in->heartbeat_every_ms < 1 ||
        in->heartbeat_every_ms > DURO_RUNTIME_HEARTBEAT_MAX_MS)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: heartbeat_every_ms %lld is outside 1 .. "
                              "%d",
                              st->dialect->name, op,
                              (long long)in->heartbeat_every_ms,
                              DURO_RUNTIME_HEARTBEAT_MAX_MS);
    if ((in->orchestrations == NULL && in->orchestration_count > 0) ||
        (in->activities == NULL && in->activity_count > 0))
        return invalid(st, op,
                       "orchestrations or activities is NULL with a "
                       "count",
                       err);
    for (size_t i = 0; i < in->orchestration_count; i++) {
        const duro_runtime_orchestration *o = &in->orchestrations[i];
        if ((rc = check_text(st, op, "orchestration name", i, o->name, 1,
                             err)) ||
            (rc = check_text(st, op, "orchestration version", i, o->version, 0,
                             err)))
            return rc;
    }
    for (size_t i = 0; i < in->activity_count; i++)
        if ((rc = check_text(st, op, "activity name", i, in->activities[i], 1,
                             err)))
            return rc;
    return DURO_OK;
}

/* The JSON texts of what in registers: [["name","version"], ...] and
 * ["name", ...]. DURO_NOMEM, or DURO_TOO_LARGE over max_payload. */
static int encode(const duro__sql_store *st, const duro_runtime_info *in,
                  duro__strbuf *orchs, duro__strbuf *acts, const char *op,
                  duro_error *err)
{
    duro__strbuf_open(orchs, '[');
    for (size_t i = 0; i < in->orchestration_count; i++) {
        const duro_runtime_orchestration *o = &in->orchestrations[i];
        duro__strbuf_sep(orchs);
        duro__strbuf_add(orchs, "[", 1);
        duro__strbuf_json(orchs, o->name);
        duro__strbuf_add(orchs, ",", 1);
        duro__strbuf_json(orchs, o->version != NULL ? o->version : "");
        duro__strbuf_add(orchs, "]", 1);
    }
    duro__strbuf_add(orchs, "]", 1);
    duro__strbuf_open(acts, '[');
    for (size_t i = 0; i < in->activity_count; i++) {
        duro__strbuf_sep(acts);
        duro__strbuf_json(acts, in->activities[i]);
    }
    duro__strbuf_add(acts, "]", 1);
    if (orchs->oom || acts->oom)
        return nomem(err);
    if (orchs->len > st->max_payload || acts->len > st->max_payload)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%s %s: the names it registers take more than "
                              "max_payload (%zu bytes)",
                              st->dialect->name, op, st->max_payload);
    return DURO_OK;
}

/* The rows no longer live at now, deleted inside the caller's write
 * transaction. */
static int expire(duro__sql_store *st, duro__sql_conn *c, int64_t now,
                  const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_RUNTIME_EXPIRE, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_i64(st, c, s, 1, now);
    return duro__sql_run(st, c, s, op, err);
}

static int upsert(duro__sql_store *st, duro__sql_conn *c,
                  const duro_runtime_info *in, const char *orchs,
                  const char *acts, int64_t now, const char *op,
                  duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_RUNTIME_UPSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, in->runtime_id);
    duro__sql_bind_text(st, c, s, 2, in->host != NULL ? in->host : "");
    duro__sql_bind_i64(st, c, s, 3, in->pid);
    duro__sql_bind_i64(st, c, s, 4, in->started_ms);
    duro__sql_bind_i64(st, c, s, 5, now);
    duro__sql_bind_i64(st, c, s, 6, in->heartbeat_every_ms);
    duro__sql_bind_text(st, c, s, 7, orchs);
    duro__sql_bind_text(st, c, s, 8, acts);
    return duro__sql_run(st, c, s, op, err);
}

int duro__sql_register_runtime(duro_provider *base,
                               const duro_runtime_info *info, duro_error *err)
{
    static const char op[] = "register_runtime";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_info(st, info, op, err);
    if (rc != DURO_OK)
        return rc;
    duro__strbuf orchs = {0}, acts = {0};
    rc = encode(st, info, &orchs, &acts, op, err);
    duro__sql_conn *c = NULL;
    if (rc == DURO_OK)
        rc = duro__sql_write_begin(st, op, &c, err);
    if (rc == DURO_OK) {
        int64_t now = duro__wall_ms();
        rc = upsert(st, c, info, orchs.s, acts.s, now, op, err);
        if (rc == DURO_OK)
            rc = expire(st, c, now, op, err);
        rc = duro__sql_write_end(st, c, rc, op, err);
    }
    duro__free(orchs.s);
    duro__free(acts.s);
    return rc;
}

int duro__sql_remove_runtime(duro_provider *base, const char *runtime_id,
                             duro_error *err)
{
    static const char op[] = "remove_runtime";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_text(st, op, "runtime_id", 0, runtime_id, 1, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_RUNTIME_DELETE, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_text(st, c, s, 1, runtime_id);
        rc = duro__sql_run(st, c, s, op, err);
    }
    int found = rc == DURO_OK && duro__sql_changes(st, c) > 0;
    if (rc == DURO_OK)
        rc = expire(st, c, duro__wall_ms(), op, err);
    if ((rc = duro__sql_write_end(st, c, rc, op, err)) != DURO_OK)
        return rc;
    if (!found)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "%s %s: no runtime '%s' (never registered, or "
                              "removed as gone)",
                              st->dialect->name, op, runtime_id);
    return DURO_OK;
}

/* What a row registers, from its JSON texts into r (in arena a): -1 when
 * out of memory, -2 when the text is not what encode() writes. */
static int decode(duro_arena *a, const char *orchs, const char *acts,
                  duro_runtime_info *r)
{
    char why[128];
    const duro__json *o = NULL, *v = NULL;
    if (orchs == NULL || acts == NULL ||
        duro__json_parse(orchs, strlen(orchs), a, &o, why, sizeof(why)) !=
            DURO_OK ||
        duro__json_parse(acts, strlen(acts), a, &v, why, sizeof(why)) !=
            DURO_OK ||
        o->kind != DURO__JSON_ARRAY || v->kind != DURO__JSON_ARRAY)
        return -2;
    duro_runtime_orchestration *os =
        duro_arena_alloc(a, (o->count + 1) * sizeof(*os));
    const char **names = duro_arena_alloc(a, (v->count + 1) * sizeof(*names));
    if (os == NULL || names == NULL)
        return -1;
    size_t n = 0;
    for (const duro__json *e = o->first; e != NULL; e = e->next, n++) {
        if (e->kind != DURO__JSON_ARRAY || e->count != 2 ||
            e->first->kind != DURO__JSON_STRING ||
            e->first->next->kind != DURO__JSON_STRING)
            return -2;
        os[n].name = e->first->text;
        os[n].version = e->first->next->text;
    }
    r->orchestrations = os;
    r->orchestration_count = n;
    n = 0;
    for (const duro__json *e = v->first; e != NULL; e = e->next, n++) {
        if (e->kind != DURO__JSON_STRING)
            return -2;
        names[n] = e->text;
    }
    r->activities = names;
    r->activity_count = n;
    return 0;
}

/* One row of RUNTIME_LIST into *item (a duro_runtime_info). */
static int runtime_row(duro__sql_store *st, duro__sql_stmt *s, duro_arena *a,
                       void *item, const char *op, duro_error *err)
{
    duro_runtime_info *r = item;
    r->pid = duro__sql_column_int64(st, s, 2);
    r->started_ms = duro__sql_column_int64(st, s, 3);
    r->heartbeat_ms = duro__sql_column_int64(st, s, 4);
    r->heartbeat_every_ms = duro__sql_column_int64(st, s, 5);
    const char *orchs, *acts;
    if (duro__sql_column_text(st, a, s, 0, &r->runtime_id) ||
        duro__sql_column_text(st, a, s, 1, &r->host) ||
        duro__sql_column_text(st, a, s, 6, &orchs) ||
        duro__sql_column_text(st, a, s, 7, &acts))
        return nomem(err);
    int bad = decode(a, orchs, acts, r);
    if (bad == -1)
        return nomem(err);
    if (bad != 0)
        return duro_error_set(err, DURO_STORAGE, 0,
                              "%s %s: the row of runtime '%s' holds what "
                              "no runtime writes (its registrations are "
                              "not duro's JSON)",
                              st->dialect->name, op, r->runtime_id);
    return DURO_OK;
}

int duro__sql_list_runtimes(duro_provider *base, duro_runtime_list **out,
                            duro_error *err)
{
    static const char op[] = "list_runtimes";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    if (out == NULL)
        return invalid(st, op, "out is NULL", err);
    *out = NULL;
    duro_arena *a = duro_arena_create();
    duro_runtime_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    memset(list, 0, sizeof(*list));
    list->arena = a;
    list->read_ms = duro__wall_ms();
    duro__sql_conn *c = duro__sql_reader_acquire(st);
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_RUNTIME_LIST, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_i64(st, c, s, 1, list->read_ms);
        rc = duro__sql_read_rows(st, c, s, a, &list->items, &list->count,
                                 sizeof(*list->items), runtime_row, op, err);
    }
    duro__sql_reader_release(st, c);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = list;
    return DURO_OK;
}
