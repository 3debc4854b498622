/* schedules.c - a SQL store's schedules (provider contract version 13),
 * written once over the dialect's primitives: the rows' writes with their
 * compare-and-set on row_version, the reads (one, a page, the due ones)
 * with the last instance's status, and apply_schedule, which writes a
 * plan's fires - the instances they start (as an idempotent enqueue does),
 * the instances they stop (as cancel_instances and control_instances do),
 * the fires log - and the state after them in one transaction. Any
 * thread. */
#include <inttypes.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sql/sql.h"

static int nomem(duro_error *err)
{
    return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
}

/* A schedule id: required, at most DURO_SCHEDULE_ID_MAX bytes. */
static int check_schedule_id(const duro__sql_store *st, const char *op,
                             const char *id, duro_error *err)
{
    if (id == NULL || id[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule id is NULL or empty",
                              st->dialect->name, op);
    if (strnlen(id, DURO_SCHEDULE_ID_MAX + 1) > DURO_SCHEDULE_ID_MAX)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%s %s: schedule id is longer than %d bytes",
                              st->dialect->name, op, DURO_SCHEDULE_ID_MAX);
    return duro__sql_check_id(st, "schedule id", id, err);
}

/* The state fields every write takes: no negative time. */
static int check_state(const duro__sql_store *st, const char *op,
                       const duro_schedule_record *r, duro_error *err)
{
    if (r->next_ms < 0 || r->due_ms < 0 || r->buffered_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': a negative next_ms, "
                              "due_ms or buffered_ms",
                              st->dialect->name, op, r->id);
    return DURO_OK;
}

/* The input of create_schedule and update_schedule. */
static int check_record(const duro__sql_store *st, const char *op,
                        const duro_schedule_record *r, duro_error *err)
{
    if (r == NULL)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule record is NULL",
                              st->dialect->name, op);
    int rc = check_schedule_id(st, op, r->id, err);
    if (rc != DURO_OK)
        return rc;
    if (r->spec == NULL || r->spec[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': spec is NULL or empty",
                              st->dialect->name, op, r->id);
    if (r->spec_version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': spec_version %" PRId64
                              " (at least 1)",
                              st->dialect->name, op, r->id, r->spec_version);
    if (r->paused != 0 && r->paused != 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': paused %d (0 or 1)",
                              st->dialect->name, op, r->id, r->paused);
    if ((rc = check_state(st, op, r, err)) != DURO_OK ||
        (rc = duro__sql_check_payload(st, "schedule spec", r->spec, err)) !=
            DURO_OK ||
        (rc = duro__sql_check_payload(st, "schedule note", r->note, err)) !=
            DURO_OK)
        return rc;
    return DURO_OK;
}

/* DURO_NOT_FOUND when the schedule does not exist, else DURO_CONFLICT:
 * why a write bound to a row version changed nothing. */
static int conflict_or_missing(duro__sql_store *st, duro__sql_conn *c,
                               const char *id, int64_t expected, const char *op,
                               duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_EXISTS, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, id);
    int step = duro__sql_step(st, c, s);
    if (step != DURO__SQL_ROW && step != DURO__SQL_DONE)
        return duro__sql_error(st, c, step, op, err);
    duro__sql_reset(st, s);
    if (step == DURO__SQL_DONE)
        return duro_error_set(err, DURO_NOT_FOUND, 0, "%s %s: no schedule '%s'",
                              st->dialect->name, op, id);
    return duro_error_set(err, DURO_CONFLICT, 0,
                          "%s %s: schedule '%s' changed meanwhile (it is no "
                          "longer at row version %" PRId64 ")",
                          st->dialect->name, op, id, expected);
}

/* Binds a record's columns, ?1 .. ?9 (?9 now), for SCHEDULE_CREATE and
 * SCHEDULE_UPDATE. */
static void bind_record(duro__sql_store *st, duro__sql_conn *c,
                        duro__sql_stmt *s, const duro_schedule_record *r,
                        int64_t now)
{
    duro__sql_bind_text(st, c, s, 1, r->id);
    duro__sql_bind_text(st, c, s, 2, r->spec);
    duro__sql_bind_i64(st, c, s, 3, r->spec_version);
    duro__sql_bind_i64(st, c, s, 4, r->next_ms);
    duro__sql_bind_i64(st, c, s, 5, r->due_ms);
    duro__sql_bind_i64(st, c, s, 6, r->buffered_ms);
    duro__sql_bind_i64(st, c, s, 7, r->paused);
    duro__sql_bind_text(st, c, s, 8, r->note);
    duro__sql_bind_i64(st, c, s, 9, now);
}

int duro__sql_create_schedule(duro_provider *base,
                              const duro_schedule_record *r, duro_error *err)
{
    static const char op[] = "create_schedule";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_record(st, op, r, err);
    if (rc != DURO_OK)
        return rc;
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_CREATE, op, err);
    if (s == NULL) {
        rc = err->code;
    } else {
        bind_record(st, c, s, r, now);
        rc = duro__sql_run(st, c, s, op, err);
        if (rc == DURO_OK && duro__sql_changes(st, c) == 0)
            rc = duro_error_set(err, DURO_ALREADY_EXISTS, 0,
                                "%s %s: schedule '%s' already exists",
                                st->dialect->name, op, r->id);
    }
    return duro__sql_write_end(st, c, rc, op, err);
}

int duro__sql_update_schedule(duro_provider *base,
                              const duro_schedule_record *r,
                              int64_t expected_row_version,
                              int64_t *row_version, duro_error *err)
{
    static const char op[] = "update_schedule";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_record(st, op, r, err);
    if (rc != DURO_OK)
        return rc;
    if (expected_row_version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: expected row version %" PRId64
                              " (at least 1)",
                              st->dialect->name, op, expected_row_version);
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_UPDATE, op, err);
    if (s == NULL) {
        rc = err->code;
    } else {
        bind_record(st, c, s, r, now);
        duro__sql_bind_i64(st, c, s, 10, expected_row_version);
        rc = duro__sql_run(st, c, s, op, err);
        if (rc == DURO_OK && duro__sql_changes(st, c) == 0)
            rc = conflict_or_missing(st, c, r->id, expected_row_version, op,
                                     err);
    }
    if ((rc = duro__sql_write_end(st, c, rc, op, err)) != DURO_OK)
        return rc;
    if (row_version != NULL)
        *row_version = expected_row_version + 1;
    return DURO_OK;
}

int duro__sql_delete_schedule(duro_provider *base, const char *id,
                              duro_error *err)
{
    static const char op[] = "delete_schedule";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_schedule_id(st, op, id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_DELETE, op, err);
    if (s == NULL) {
        rc = err->code;
    } else {
        duro__sql_bind_text(st, c, s, 1, id);
        rc = duro__sql_run(st, c, s, op, err);
        if (rc == DURO_OK && duro__sql_changes(st, c) == 0)
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "%s %s: no schedule '%s'", st->dialect->name,
                                op, id);
    }
    if (rc == DURO_OK) {
        s = duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_FIRES_DELETE, op, err);
        if (s == NULL) {
            rc = err->code;
        } else {
            duro__sql_bind_text(st, c, s, 1, id);
            rc = duro__sql_run(st, c, s, op, err);
        }
    }
    return duro__sql_write_end(st, c, rc, op, err);
}

/* ---- reads -------------------------------------------------------------- */

/* One row of SCHEDULE_GET, _LIST or _DUE into *item (a
 * duro_schedule_record). */
static int schedule_row(duro__sql_store *st, duro__sql_stmt *s, duro_arena *a,
                        void *item, const char *op, duro_error *err)
{
    (void)op;
    duro_schedule_record *r = item;
    r->spec_version = duro__sql_column_int64(st, s, 2);
    r->row_version = duro__sql_column_int64(st, s, 3);
    r->next_ms = duro__sql_column_int64(st, s, 4);
    r->due_ms = duro__sql_column_int64(st, s, 5);
    r->buffered_ms = duro__sql_column_int64(st, s, 6);
    r->last_status = duro__sql_column_int(st, s, 8);
    r->paused = duro__sql_column_int(st, s, 9);
    r->fires = duro__sql_column_int64(st, s, 11);
    r->skips = duro__sql_column_int64(st, s, 12);
    r->created_ms = duro__sql_column_int64(st, s, 13);
    r->updated_ms = duro__sql_column_int64(st, s, 14);
    if (duro__sql_column_text(st, a, s, 0, &r->id) ||
        duro__sql_column_text(st, a, s, 1, &r->spec) ||
        duro__sql_column_text(st, a, s, 7, &r->last_instance_id) ||
        duro__sql_column_text(st, a, s, 10, &r->note))
        return nomem(err);
    return DURO_OK;
}

/* A new empty list in its arena; NULL when out of memory. */
static duro_schedule_list *new_list(void)
{
    duro_arena *a = duro_arena_create();
    duro_schedule_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        return NULL;
    }
    memset(list, 0, sizeof(*list));
    list->arena = a;
    return list;
}

/* What the three reads share: the checks of out and limit, the list, a
 * reader in one snapshot; `bind` binds the statement's parameters. */
typedef struct read_args {
    duro__sql_stmt_id id;
    const char *text; /* parameter 1, when not NULL */
    int64_t number;   /* the parameter after it */
    int has_number;
    int64_t limit; /* the last parameter, when > 0 */
    int next_due;  /* due_schedules: next_due_ms after `number` */
} read_args;

static int read_list(duro_provider *base, const read_args *q, const char *op,
                     duro_schedule_list **out, duro_error *err)
{
    duro__sql_store *st = duro__sql_of(base);
    duro_schedule_list *list = new_list();
    if (list == NULL)
        return nomem(err);
    duro__sql_conn *c = duro__sql_reader_acquire(st);
    int rc = duro__sql_exec(st, c, DURO__SQL_BEGIN_READ, op, err);
    duro__sql_stmt *s =
        rc == DURO_OK ? duro__sql_prepare(st, c, q->id, op, err) : NULL;
    if (rc == DURO_OK && s == NULL)
        rc = err->code;
    if (rc == DURO_OK) {
        int i = 1;
        if (q->text != NULL)
            duro__sql_bind_text(st, c, s, i++, q->text);
        if (q->has_number)
            duro__sql_bind_i64(st, c, s, i++, q->number);
        if (q->limit > 0)
            duro__sql_bind_i64(st, c, s, i++, q->limit);
        rc = duro__sql_read_rows(st, c, s, list->arena, &list->items,
                                 &list->count, sizeof(*list->items),
                                 schedule_row, op, err);
    }
    if (rc == DURO_OK && q->next_due) {
        s = duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_NEXT_DUE, op, err);
        if (s == NULL) {
            rc = err->code;
        } else {
            duro__sql_bind_i64(st, c, s, 1, q->number);
            int step = duro__sql_step(st, c, s);
            if (step == DURO__SQL_ROW && !duro__sql_column_null(st, s, 0))
                list->next_due_ms = duro__sql_column_int64(st, s, 0);
            if (step != DURO__SQL_ROW && step != DURO__SQL_DONE)
                rc = duro__sql_error(st, c, step, op, err);
            else
                duro__sql_reset(st, s);
        }
    }
    duro__sql_reader_release(st, c);
    if (rc != DURO_OK) {
        duro_schedule_list_free(list);
        return rc;
    }
    *out = list;
    return DURO_OK;
}

/* out must not be NULL; *out is NULL until a read succeeds. */
static int check_out(const duro__sql_store *st, const char *op, void *out,
                     size_t limit, int limited, duro_error *err)
{
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s %s: out is NULL",
                              st->dialect->name, op);
    if (limited && (limit == 0 || limit > INT64_MAX))
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: limit %zu (1 or more)", st->dialect->name,
                              op, limit);
    return DURO_OK;
}

int duro__sql_get_schedule(duro_provider *base, const char *id,
                           duro_schedule_list **out, duro_error *err)
{
    static const char op[] = "get_schedule";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_out(st, op, out, 0, 0, err);
    if (rc != DURO_OK)
        return rc;
    *out = NULL;
    if ((rc = check_schedule_id(st, op, id, err)) != DURO_OK)
        return rc;
    read_args q = {.id = DURO__SQL_SCHEDULE_GET, .text = id};
    duro_schedule_list *list = NULL;
    if ((rc = read_list(base, &q, op, &list, err)) != DURO_OK)
        return rc;
    if (list->count == 0) {
        duro_schedule_list_free(list);
        return duro_error_set(err, DURO_NOT_FOUND, 0, "%s %s: no schedule '%s'",
                              st->dialect->name, op, id);
    }
    *out = list;
    return DURO_OK;
}

int duro__sql_list_schedules(duro_provider *base, const char *after_id,
                             size_t limit, duro_schedule_list **out,
                             duro_error *err)
{
    static const char op[] = "list_schedules";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_out(st, op, out, limit, 1, err);
    if (rc != DURO_OK)
        return rc;
    *out = NULL;
    if (after_id != NULL && after_id[0] != '\0' &&
        (rc = check_schedule_id(st, op, after_id, err)) != DURO_OK)
        return rc;
    read_args q = {.id = DURO__SQL_SCHEDULE_LIST,
                   .text = after_id != NULL ? after_id : "",
                   .limit = (int64_t)limit};
    return read_list(base, &q, op, out, err);
}

int duro__sql_due_schedules(duro_provider *base, int64_t now_ms, size_t limit,
                            duro_schedule_list **out, duro_error *err)
{
    static const char op[] = "due_schedules";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_out(st, op, out, limit, 1, err);
    if (rc != DURO_OK)
        return rc;
    *out = NULL;
    if (now_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: now_ms %" PRId64 " is negative",
                              st->dialect->name, op, now_ms);
    read_args q = {.id = DURO__SQL_SCHEDULE_DUE,
                   .number = now_ms,
                   .has_number = 1,
                   .limit = (int64_t)limit,
                   .next_due = 1};
    return read_list(base, &q, op, out, err);
}

/* One row of SCHEDULE_FIRES_LIST into *item (a duro_schedule_action). */
static int fire_row(duro__sql_store *st, duro__sql_stmt *s, duro_arena *a,
                    void *item, const char *op, duro_error *err)
{
    (void)op;
    duro_schedule_action *f = item;
    f->kind = duro__sql_column_int(st, s, 0);
    f->time_ms = duro__sql_column_int64(st, s, 1);
    f->count = duro__sql_column_int64(st, s, 2);
    f->recorded_ms = duro__sql_column_int64(st, s, 5);
    f->instance_status = duro__sql_column_int(st, s, 6);
    if (duro__sql_column_text(st, a, s, 3, &f->why) ||
        duro__sql_column_text(st, a, s, 4, &f->instance_id))
        return nomem(err);
    return DURO_OK;
}

int duro__sql_list_schedule_fires(duro_provider *base, const char *id,
                                  size_t limit, duro_schedule_fire_list **out,
                                  duro_error *err)
{
    static const char op[] = "list_schedule_fires";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_out(st, op, out, limit, 1, err);
    if (rc != DURO_OK)
        return rc;
    *out = NULL;
    if ((rc = check_schedule_id(st, op, id, err)) != DURO_OK)
        return rc;
    duro_arena *a = duro_arena_create();
    duro_schedule_fire_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    memset(list, 0, sizeof(*list));
    list->arena = a;
    duro__sql_conn *c = duro__sql_reader_acquire(st);
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_FIRES_LIST, op, err);
    rc = s == NULL ? err->code : DURO_OK;
    if (rc == DURO_OK) {
        duro__sql_bind_text(st, c, s, 1, id);
        duro__sql_bind_i64(st, c, s, 2, (int64_t)limit);
        rc = duro__sql_read_rows(st, c, s, a, &list->items, &list->count,
                                 sizeof(*list->items), fire_row, op, err);
    }
    duro__sql_reader_release(st, c);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = list;
    return DURO_OK;
}

/* ---- apply_schedule ----------------------------------------------------- */

static int check_action(const duro__sql_store *st, const char *op,
                        const char *id, size_t i, const duro_schedule_action *a,
                        duro_error *err)
{
    const char *name = st->dialect->name;
    if (a->kind < DURO_SCHEDULE_START || a->kind > DURO_SCHEDULE_STOP_LAST)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': action %zu has unknown "
                              "kind %d",
                              name, op, id, i, a->kind);
    if (a->time_ms < 0 || (a->kind == DURO_SCHEDULE_SKIP && a->count == 0) ||
        a->count < -1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: schedule '%s': action %zu has a "
                              "negative time or a count of %" PRId64,
                              name, op, id, i, a->count);
    int rc;
    if (a->kind == DURO_SCHEDULE_START) {
        if ((rc = duro__sql_check_id(st, "fire's instance id", a->instance_id,
                                     err)) != DURO_OK ||
            (rc = duro__sql_check_name(st, "fire's orchestration name", a->name,
                                       1, err)) != DURO_OK ||
            (rc = duro__sql_check_name(st, "fire's orchestration version",
                                       a->version, 0, err)) != DURO_OK ||
            (rc = duro__sql_check_payload(st, "fire's input", a->input, err)) !=
                DURO_OK)
            return rc;
    } else if (a->kind == DURO_SCHEDULE_STOP_LAST) {
        if ((rc = duro__sql_check_id(st, "stopped instance id", a->instance_id,
                                     err)) != DURO_OK ||
            (rc = duro__sql_check_name(st, "reason", a->reason, 0, err)) !=
                DURO_OK ||
            (rc = duro__sql_check_name(st, "requested_by", a->requested_by, 0,
                                       err)) != DURO_OK)
            return rc;
        if (a->terminate != 0 && a->terminate != 1)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "%s %s: schedule '%s': action %zu: "
                                  "terminate %d (0 or 1)",
                                  name, op, id, i, a->terminate);
    }
    return duro__sql_check_name(st, "why", a->why, 0, err);
}

/* Appends one fires-log entry. */
static int log_fire(duro__sql_store *st, duro__sql_conn *c, const char *id,
                    const duro_schedule_action *a, int kind, const char *why,
                    int64_t now, const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_FIRE_INSERT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, id);
    duro__sql_bind_i64(st, c, s, 2, a->time_ms);
    duro__sql_bind_i64(st, c, s, 3, kind);
    duro__sql_bind_i64(st, c, s, 4, kind == DURO_SCHEDULE_SKIP ? a->count : 1);
    duro__sql_bind_text(st, c, s, 5,
                        kind == DURO_SCHEDULE_START ||
                                kind == DURO_SCHEDULE_STOP_LAST ||
                                a->kind == DURO_SCHEDULE_START
                            ? a->instance_id
                            : NULL);
    duro__sql_bind_text(st, c, s, 6, why);
    duro__sql_bind_i64(st, c, s, 7, now);
    return duro__sql_run(st, c, s, op, err);
}

/* Starts the instance of a START action as an idempotent enqueue does
 * (*sent counts it when it is new); *taken = 1 when its id is an instance
 * of another orchestration. */
static int start_fire(duro__sql_store *st, duro__sql_conn *c,
                      const duro_schedule_action *a, int64_t now, int *taken,
                      size_t *sent, const char *op, duro_error *err)
{
    duro_work_item item;
    memset(&item, 0, sizeof(item));
    item.kind = DURO_WORK_START;
    item.instance_id = a->instance_id;
    item.name = a->name;
    item.version = a->version;
    item.payload = a->input;
    item.fire_at_ms = a->deadline_ms; /* a START's deadline (version 12) */
    item.flags = DURO_START_IDEMPOTENT;
    int skip = 0;
    *taken = 0;
    int rc = duro__sql_enqueue_in_transaction(st, c, &item, now, now, &skip, op,
                                              err);
    if (rc == DURO_ALREADY_EXISTS) {
        /* A synthetic error of a read: the transaction goes on. */
        *taken = 1;
        return DURO_OK;
    }
    if (rc == DURO_OK && !skip)
        (*sent)++;
    return rc;
}

/* The body of apply_schedule inside its transaction. */
static int apply_in_transaction(duro__sql_store *st, duro__sql_conn *c,
                                const char *id, int64_t expected,
                                const duro_schedule_action *actions, size_t n,
                                const duro_schedule_record *after, int64_t now,
                                size_t *sent, const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_CLAIM, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, id);
    duro__sql_bind_i64(st, c, s, 2, expected);
    int rc = duro__sql_run(st, c, s, op, err);
    if (rc != DURO_OK)
        return rc;
    if (duro__sql_changes(st, c) == 0)
        return conflict_or_missing(st, c, id, expected, op, err);
    const char *last = NULL;
    int64_t fires = 0, skips = 0;
    for (size_t i = 0; i < n && rc == DURO_OK; i++) {
        const duro_schedule_action *a = &actions[i];
        int kind = a->kind;
        const char *why = a->why;
        if (kind == DURO_SCHEDULE_START) {
            int taken = 0;
            size_t was = *sent;
            rc = start_fire(st, c, a, now, &taken, sent, op, err);
            if (rc == DURO_OK && taken) {
                kind = DURO_SCHEDULE_SKIP;
                why = "instance id taken";
                skips++;
            } else {
                /* A fire applied again (its instance there) is no new
                 * fire. */
                last = a->instance_id;
                fires += *sent > was;
            }
        } else if (kind == DURO_SCHEDULE_SKIP) {
            skips += a->count > 0 ? a->count : 1;
        } else if (kind == DURO_SCHEDULE_STOP_LAST) {
            size_t woken = 0;
            rc = duro__sql_request_one_in_transaction(
                st, c, a->terminate, a->instance_id, a->reason, a->requested_by,
                now, &woken, op, err);
            *sent += woken;
        }
        if (rc == DURO_OK)
            rc = log_fire(st, c, id, a, kind, why, now, op, err);
    }
    if (rc != DURO_OK)
        return rc;
    if (n > 0) {
        s = duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_FIRES_TRIM, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(st, c, s, 1, id);
        duro__sql_bind_i64(st, c, s, 2, DURO_SCHEDULE_FIRES_KEPT);
        if ((rc = duro__sql_run(st, c, s, op, err)) != DURO_OK)
            return rc;
    }
    s = duro__sql_prepare(st, c, DURO__SQL_SCHEDULE_APPLY, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(st, c, s, 1, id);
    duro__sql_bind_i64(st, c, s, 2, after->next_ms);
    duro__sql_bind_i64(st, c, s, 3, after->due_ms);
    duro__sql_bind_i64(st, c, s, 4, after->buffered_ms);
    duro__sql_bind_text(st, c, s, 5, last);
    duro__sql_bind_i64(st, c, s, 6, fires);
    duro__sql_bind_i64(st, c, s, 7, skips);
    duro__sql_bind_i64(st, c, s, 8, now);
    return duro__sql_run(st, c, s, op, err);
}

int duro__sql_apply_schedule(duro_provider *base, const char *id,
                             int64_t expected_row_version,
                             const duro_schedule_action *actions, size_t n,
                             const duro_schedule_record *after,
                             int64_t *row_version, duro_error *err)
{
    static const char op[] = "apply_schedule";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *st = duro__sql_of(base);
    int rc = check_schedule_id(st, op, id, err);
    if (rc != DURO_OK)
        return rc;
    if (after == NULL || (n > 0 && actions == NULL))
        return duro_error_set(
            err, DURO_INVALID, 0, "%s %s: schedule '%s': %s is NULL",
            st->dialect->name, op, id, after == NULL ? "after" : "actions");
    if (expected_row_version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: expected row version %" PRId64
                              " (at least 1)",
                              st->dialect->name, op, expected_row_version);
    if ((rc = check_state(st, op, after, err)) != DURO_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = check_action(st, op, id, i, &actions[i], err)) != DURO_OK)
            return rc;
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(st, op, &c, err)) != DURO_OK)
        return rc;
    size_t sent = 0;
    rc = apply_in_transaction(st, c, id, expected_row_version, actions, n,
                              after, now, &sent, op, err);
    if ((rc = duro__sql_write_end(st, c, rc, op, err)) != DURO_OK)
        return rc;
    if (sent > 0)
        duro__sql_signal(st, DURO_QUEUE_ORCHESTRATOR, sent);
    if (row_version != NULL)
        *row_version = expected_row_version + 1;
    return DURO_OK;
}
