/* pg_manage.c - the PostgreSQL provider's reads (history, instances, the
 * operators' queries and control requests, queue counts, next due time) on
 * pooled connections, and the management writes
 * (recursive delete, pruning, problems) as single transactions. Any
 * thread. */
#include <inttypes.h>
#include <string.h>

#include "providers/postgres/pg_internal.h"

static duro__pg_provider *pg_of(duro_provider *p)
{
    return (duro__pg_provider *)p;
}

static int not_found(const char *op, const char *instance_id, duro_error *err)
{
    return duro_error_set(err, DURO_NOT_FOUND, 0,
                          "postgres %s: no instance '%s'", op, instance_id);
}

/* Runs BEGIN (REPEATABLE READ READ ONLY) so several statements see one
 * snapshot. */
static int begin_read(duro__pg_provider *p, duro__pg_conn *c, const char *op,
                      duro_error *err)
{
    duro__pg_statement *s = duro__pg_stmt(p, c, DURO__SQL_BEGIN_READ, op, err);
    if (s == NULL)
        return err->code;
    return duro__pg_run(p, c, s, op, err);
}

/* The current execution of an instance; DURO_NOT_FOUND without a row. */
static int current_execution(duro__pg_provider *p, duro__pg_conn *c,
                             const char *instance_id, uint64_t *out,
                             const char *op, duro_error *err)
{
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    int rc = duro__pg_step(p, c, s);
    if (rc == DURO__PG_DONE)
        return not_found(op, instance_id, err);
    if (rc != DURO__PG_ROW)
        return duro__pg_error(c, rc, op, err);
    *out = (uint64_t)duro__pg_column_int64(s, 0);
    duro__pg_reset(s);
    return DURO_OK;
}

int duro__pg_read_history(duro_provider *base, const char *instance_id,
                          uint64_t execution_id, duro_history **out,
                          duro_error *err)
{
    static const char op[] = "read_history";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_provider *p = pg_of(base);
    duro_arena *a = duro_arena_create();
    duro_history *h = a != NULL ? duro_arena_alloc(a, sizeof(*h)) : NULL;
    if (h == NULL) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    h->arena = a;
    h->instance_id = duro_arena_strdup(a, instance_id);
    if (h->instance_id == NULL) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    rc = begin_read(p, c, op, err);
    uint64_t current = 0;
    if (rc == DURO_OK)
        rc = current_execution(p, c, instance_id, &current, op, err);
    h->execution_id = execution_id != 0 ? execution_id : current;
    if (rc == DURO_OK) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__pg_bind_text(c, s, 1, instance_id);
            duro__pg_bind_u64(c, s, 2, h->execution_id);
            int step = duro__pg_step(p, c, s);
            if (step == DURO__PG_DONE)
                rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                    "postgres %s: instance '%s' has no "
                                    "execution %" PRIu64,
                                    op, instance_id, h->execution_id);
            else if (step != DURO__PG_ROW)
                rc = duro__pg_error(c, step, op, err);
        }
    }
    if (rc == DURO_OK)
        rc = duro__pg_read_events(p, c, a, instance_id, h->execution_id, 0,
                                  &h->events, &h->count, op, err);
    duro__pg_reader_release(p, c);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = h;
    return DURO_OK;
}

int duro__pg_latest_execution_id(duro_provider *base, const char *instance_id,
                                 uint64_t *out, duro_error *err)
{
    static const char op[] = "latest_execution_id";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    rc = current_execution(p, c, instance_id, out, op, err);
    duro__pg_reader_release(p, c);
    return rc;
}

int duro__pg_read_activity_cancel_reason(duro_provider *base,
                                         const char *instance_id,
                                         uint64_t execution_id,
                                         uint64_t activity_id, char *reason,
                                         size_t reason_size, duro_error *err)
{
    static const char op[] = "read_activity_cancel_reason";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (reason == NULL || reason_size == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "reason is NULL or reason_size is 0");
    reason[0] = '\0';
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "execution_id is 0; name the execution of the "
                              "work item");
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_HISTORY_CANCEL_REASON, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_u64(c, s, 2, execution_id);
        duro__pg_bind_u64(c, s, 3, activity_id);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_ROW) {
            const char *text = (const char *)duro__pg_column_text_raw(s, 0);
            size_t n = text != NULL ? (size_t)duro__pg_column_bytes(s, 0) : 0;
            if (n > reason_size - 1)
                n = reason_size - 1;
            if (n > 0)
                memcpy(reason, text, n);
            reason[n] = '\0';
        } else if (step == DURO__PG_DONE) {
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "postgres %s: no cancellation of activity "
                                "%" PRIu64 " in execution %" PRIu64
                                " of instance '%s'",
                                op, activity_id, execution_id, instance_id);
        } else {
            rc = duro__pg_error(c, step, op, err);
        }
    }
    duro__pg_reader_release(p, c);
    if (rc != DURO_OK)
        reason[0] = '\0';
    return rc;
}

/* A row of DURO__PG_INFO_COLUMNS. */
static int read_info(duro_arena *a, duro__pg_statement *s,
                     duro_instance_info *in)
{
    in->status = duro__pg_column_int(s, 3);
    in->execution_id = (uint64_t)duro__pg_column_int64(s, 4);
    in->created_ms = duro__pg_column_int64(s, 5);
    in->updated_ms = duro__pg_column_int64(s, 6);
    in->category = duro__pg_column_int(s, 9);
    in->history_count = (uint64_t)duro__pg_column_int64(s, 12);
    in->cancel_requested_ms = duro__pg_column_int64(s, 15);
    in->finished_ms = duro__pg_column_int64(s, 16);
    in->last_problem_ms = duro__pg_column_int64(s, 18);
    in->next_attempt_ms = duro__pg_column_int64(s, 19);
    if (duro__pg_column_text(a, s, 13, &in->cancel_reason) ||
        duro__pg_column_text(a, s, 14, &in->cancelled_by) ||
        duro__pg_column_text(a, s, 17, &in->last_problem) ||
        duro__pg_column_text(a, s, 0, &in->instance_id) ||
        duro__pg_column_text(a, s, 1, &in->name) ||
        duro__pg_column_text(a, s, 2, &in->version) ||
        duro__pg_column_text(a, s, 7, &in->output) ||
        duro__pg_column_text(a, s, 8, &in->error) ||
        duro__pg_column_text(a, s, 10, &in->custom_status) ||
        duro__pg_column_text(a, s, 11, &in->parent_instance))
        return -1;
    return 0;
}

/* Steps s (bound by the caller) into a new list. */
static int read_list(duro__pg_provider *p, duro__pg_conn *c,
                     duro__pg_statement *s, duro_instance_list **out,
                     const char *op, duro_error *err)
{
    duro_arena *a = duro_arena_create();
    duro_instance_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    list->arena = a;
    size_t cap = 0;
    int rc;
    while ((rc = duro__pg_step(p, c, s)) == DURO__PG_ROW) {
        if (list->count == cap) {
            list->items = duro__pg_arena_grow(a, list->items, list->count, &cap,
                                              sizeof(*list->items));
            if (list->items == NULL)
                break;
        }
        if (read_info(a, s, &list->items[list->count]) != 0) {
            list->items = NULL;
            break;
        }
        list->count++;
    }
    if (rc == DURO__PG_ROW) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    if (rc != DURO__PG_DONE) {
        duro_arena_destroy(a);
        return duro__pg_error(c, rc, op, err);
    }
    *out = list;
    return DURO_OK;
}

int duro__pg_get_instance(duro_provider *base, const char *instance_id,
                          duro_instance_list **out, duro_error *err)
{
    static const char op[] = "get_instance";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_INFO, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, instance_id);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__pg_reader_release(p, c);
    if (rc == DURO_OK && (*out)->count == 0) {
        duro_instance_list_free(*out);
        *out = NULL;
        return not_found(op, instance_id, err);
    }
    return rc;
}

int duro__pg_list_instances(duro_provider *base,
                            const duro_instance_filter *filter,
                            duro_instance_list **out, duro_error *err)
{
    static const char op[] = "list_instances";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro_instance_filter none = {0};
    const duro_instance_filter *f = filter != NULL ? filter : &none;
    int rc;
    if ((rc = duro__pg_check_name("name filter", f->name, 0, err)) ||
        (rc = duro__pg_check_name("after_instance", f->after_instance, 0, err)))
        return rc;
    /* One status is an equality the status index can serve; several are a
     * bit test on each row. */
    uint32_t mask = f->status_mask;
    int one_status = mask != 0 && (mask & (mask - 1)) == 0;
    int status = one_status ? __builtin_ctz(mask) : 0;
    int by_name = f->name != NULL;
    duro__pg_stmt_id id =
        by_name
            ? (one_status ? DURO__SQL_LIST_NAME_STATUS : DURO__SQL_LIST_NAME)
            : (one_status ? DURO__SQL_LIST_STATUS : DURO__SQL_LIST_ALL);
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = duro__pg_stmt(p, c, id, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1,
                           f->after_instance != NULL ? f->after_instance : "");
        duro__pg_bind_i64(c, s, 2, mask);
        duro__pg_bind_i64(c, s, 3, f->created_after_ms);
        duro__pg_bind_i64(c, s, 4, f->created_before_ms);
        duro__pg_bind_text(c, s, 5, f->name);
        duro__pg_bind_i64(c, s, 6, status);
        duro__pg_bind_i64(
            c, s, 7,
            f->limit == 0 || f->limit > INT64_MAX ? -1 : (int64_t)f->limit);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__pg_reader_release(p, c);
    return rc;
}

/* ---- query_instances and list_control_events --------------------------- */

/* The page and count statements of each path (DURO__PG_QUERY_STATEMENTS),
 * pages by order. */
static const duro__pg_stmt_id query_pages[DURO__QUERY_PATHS][3] = {
    /* newest first, query.c makes ALL and NAME the status paths of
     * every status: these two never run */
    {DURO__SQL_QUERY_ALL_ID, DURO__SQL_QUERY_STATUS_CREATED,
     DURO__SQL_QUERY_STATUS_UPDATED},
    {DURO__SQL_QUERY_NAME_ID, DURO__SQL_QUERY_NAME_STATUS_CREATED,
     DURO__SQL_QUERY_NAME_STATUS_UPDATED},
    {DURO__SQL_QUERY_STATUS_ID, DURO__SQL_QUERY_STATUS_CREATED,
     DURO__SQL_QUERY_STATUS_UPDATED},
    {DURO__SQL_QUERY_NAME_STATUS_ID, DURO__SQL_QUERY_NAME_STATUS_CREATED,
     DURO__SQL_QUERY_NAME_STATUS_UPDATED},
    {DURO__SQL_QUERY_PREFIX_ID, DURO__SQL_QUERY_PREFIX_CREATED,
     DURO__SQL_QUERY_PREFIX_UPDATED},
    {DURO__SQL_QUERY_PARENT_ID, DURO__SQL_QUERY_PARENT_CREATED,
     DURO__SQL_QUERY_PARENT_UPDATED},
    {DURO__SQL_QUERY_PROBLEM_ID, DURO__SQL_QUERY_PROBLEM_CREATED,
     DURO__SQL_QUERY_PROBLEM_UPDATED}};
static const duro__pg_stmt_id query_counts[DURO__QUERY_PATHS] = {
    DURO__SQL_QUERY_COUNT_ALL,    DURO__SQL_QUERY_COUNT_NAME,
    DURO__SQL_QUERY_COUNT_STATUS, DURO__SQL_QUERY_COUNT_NAME_STATUS,
    DURO__SQL_QUERY_COUNT_PREFIX, DURO__SQL_QUERY_COUNT_PARENT,
    DURO__SQL_QUERY_COUNT_PROBLEM};

/* Binds $1 .. $20 of a plan's statement (a statement ignores those it
 * does not name: every parameter is sent as text). */
static void bind_plan(duro__pg_conn *c, duro__pg_statement *s,
                      const duro__instance_plan *q)
{
    duro__pg_bind_text(c, s, 1, q->name);
    duro__pg_bind_text(c, s, 2, q->prefix);
    duro__pg_bind_text(c, s, 3, q->prefix_end);
    duro__pg_bind_text(c, s, 4, q->contains);
    duro__pg_bind_text(c, s, 5, q->parent);
    duro__pg_bind_i64(c, s, 6, q->with_problem);
    duro__pg_bind_i64(c, s, 7, q->created_from);
    duro__pg_bind_i64(c, s, 8, q->created_until);
    duro__pg_bind_i64(c, s, 9, q->mask);
    duro__pg_bind_i64(c, s, 10, q->after_key);
    duro__pg_bind_text(c, s, 11, q->after_id);
    duro__pg_bind_i64(c, s, 12, (int64_t)q->limit + 1);
    for (int k = 0; k < DURO__QUERY_ARMS; k++)
        duro__pg_bind_i64(c, s, 13 + k, q->arms[k]);
    if (q->count_rows >= 0)
        duro__pg_bind_i64(c, s, 20, q->count_rows);
    else
        duro__pg_bind_text(c, s, 20, NULL); /* LIMIT NULL: every match */
}

int duro__pg_query_instances(duro_provider *base, const duro_instance_query *q,
                             duro_instance_page **out, duro_error *err)
{
    static const char op[] = "query_instances";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "postgres %s: out is NULL",
                              op);
    *out = NULL;
    duro__instance_plan plan;
    int rc = duro__query_plan("postgres", q, 1, &plan, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    /* a page and its total from one snapshot */
    if (plan.count_total)
        rc = begin_read(p, c, op, err);
    duro_instance_list *list = NULL;
    if (rc == DURO_OK) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, query_pages[plan.path][plan.order], op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            bind_plan(c, s, &plan);
            rc = read_list(p, c, s, &list, op, err);
        }
    }
    int64_t total = -1;
    if (rc == DURO_OK && plan.count_total) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, query_counts[plan.count_path], op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            bind_plan(c, s, &plan);
            int step = duro__pg_step(p, c, s);
            if (step == DURO__PG_ROW)
                total = duro__pg_column_int64(s, 0);
            else
                rc = duro__pg_error(c, step, op, err);
        }
    }
    duro__pg_reader_release(p, c);
    duro_instance_page *page =
        rc == DURO_OK ? duro_arena_alloc(list->arena, sizeof(*page)) : NULL;
    if (rc == DURO_OK && page == NULL)
        rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc == DURO_OK) {
        page->arena = list->arena;
        page->items = list->items;
        page->count = list->count;
        duro__query_count_finish(page, &plan, total);
        rc = duro__query_page_finish(page, &plan, err);
    }
    duro__query_plan_free(&plan);
    if (rc != DURO_OK) {
        duro_instance_list_free(list);
        return rc;
    }
    *out = page;
    return DURO_OK;
}

int duro__pg_list_control_events(duro_provider *base,
                                 const duro_control_event_query *q,
                                 duro_control_event_list **out, duro_error *err)
{
    static const char op[] = "list_control_events";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "postgres %s: out is NULL",
                              op);
    *out = NULL;
    duro__event_plan plan;
    int rc = duro__events_plan("postgres", q, 1, &plan, err);
    if (rc != DURO_OK)
        return rc;
    duro_arena *a = duro_arena_create();
    duro_control_event_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        duro__events_plan_free(&plan);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    list->arena = a;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_CONTROL_EVENTS, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_i64(c, s, 1, plan.mask);
        duro__pg_bind_text(c, s, 2, plan.requested_by);
        duro__pg_bind_i64(c, s, 3, plan.since);
        duro__pg_bind_i64(c, s, 4, plan.before_ts);
        duro__pg_bind_text(c, s, 5, plan.before_id);
        duro__pg_bind_i64(c, s, 6, plan.before_execution);
        duro__pg_bind_i64(c, s, 7, plan.before_event);
        duro__pg_bind_i64(c, s, 8, (int64_t)plan.limit + 1);
        size_t cap = 0;
        int step;
        while ((step = duro__pg_step(p, c, s)) == DURO__PG_ROW) {
            if (list->count == cap) {
                list->items = duro__pg_arena_grow(a, list->items, list->count,
                                                  &cap, sizeof(*list->items));
                if (list->items == NULL)
                    break;
            }
            duro_control_event *ev = &list->items[list->count];
            ev->execution_id = (uint64_t)duro__pg_column_int64(s, 2);
            ev->event_id = (uint64_t)duro__pg_column_int64(s, 3);
            ev->kind = duro__pg_column_int(s, 4);
            ev->timestamp_ms = duro__pg_column_int64(s, 5);
            ev->flags = (uint32_t)duro__pg_column_int64(s, 8);
            if (duro__pg_column_text(a, s, 0, &ev->instance_id) ||
                duro__pg_column_text(a, s, 1, &ev->name) ||
                duro__pg_column_text(a, s, 6, &ev->reason) ||
                duro__pg_column_text(a, s, 7, &ev->requested_by)) {
                list->items = NULL;
                break;
            }
            list->count++;
        }
        if (step == DURO__PG_ROW)
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        else if (step != DURO__PG_DONE)
            rc = duro__pg_error(c, step, op, err);
    }
    duro__pg_reader_release(p, c);
    if (rc == DURO_OK)
        rc = duro__events_finish(list, &plan, err);
    duro__events_plan_free(&plan);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = list;
    return DURO_OK;
}

/* Runs a single-value query (bound with instance_id when not NULL) on a
 * pooled connection. *is_null says whether the value was SQL NULL. */
static int read_value(duro__pg_provider *p, duro__pg_stmt_id id,
                      const char *instance_id, int64_t *value, int *is_null,
                      const char *op, duro_error *err)
{
    duro__pg_conn *c = duro__pg_reader_acquire(p);
    duro__pg_statement *s = duro__pg_stmt(p, c, id, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        if (instance_id != NULL)
            duro__pg_bind_text(c, s, 1, instance_id);
        int step = duro__pg_step(p, c, s);
        if (step == DURO__PG_ROW) {
            *is_null = duro__pg_column_null(s, 0);
            *value = duro__pg_column_int64(s, 0);
        } else {
            rc = duro__pg_error(c, step, op, err);
        }
    }
    duro__pg_reader_release(p, c);
    return rc;
}

int duro__pg_count_messages(duro_provider *base, duro_queue queue,
                            const char *instance_id, uint64_t *out,
                            duro_error *err)
{
    static const char op[] = "count_messages";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    if (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown queue %d",
                              (int)queue);
    int rc;
    if (instance_id != NULL &&
        (rc = duro__pg_check_id("instance id", instance_id, err)) != DURO_OK)
        return rc;
    duro__pg_stmt_id id;
    if (queue == DURO_QUEUE_ORCHESTRATOR)
        id = instance_id != NULL ? DURO__SQL_OQ_COUNT_INSTANCE
                                 : DURO__SQL_OQ_COUNT;
    else
        id = instance_id != NULL ? DURO__SQL_WQ_COUNT_INSTANCE
                                 : DURO__SQL_WQ_COUNT;
    int64_t n = 0;
    int is_null = 0;
    rc = read_value(pg_of(base), id, instance_id, &n, &is_null, op, err);
    if (rc == DURO_OK)
        *out = (uint64_t)n;
    return rc;
}

int duro__pg_next_due(duro__pg_provider *p, duro_queue queue, int64_t *out,
                      duro_error *err)
{
    int64_t at = 0;
    int is_null = 1;
    int rc = read_value(
        p, queue == DURO_QUEUE_WORKER ? DURO__SQL_WQ_MIN : DURO__SQL_READY_MIN,
        NULL, &at, &is_null, "wait_for_work", err);
    *out = rc == DURO_OK && !is_null ? at : INT64_MAX;
    return rc;
}

/* Runs a statement bound with $1 = instance_id to completion. */
static int run_for_instance(duro__pg_provider *p, duro__pg_conn *c,
                            duro__pg_stmt_id id, const char *instance_id,
                            const char *op, duro_error *err)
{
    duro__pg_statement *s = duro__pg_stmt(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__pg_bind_text(c, s, 1, instance_id);
    return duro__pg_run(p, c, s, op, err);
}

static int delete_in_transaction(duro__pg_provider *p, duro__pg_conn *c,
                                 const char *instance_id, int force,
                                 size_t *deleted, const char *op,
                                 duro_error *err)
{
    uint64_t current;
    int rc = current_execution(p, c, instance_id, &current, op, err);
    if (rc != DURO_OK)
        return rc;
    if (!force) {
        duro__pg_statement *s =
            duro__pg_stmt(p, c, DURO__SQL_DELETE_CHECK, op, err);
        if (s == NULL)
            return err->code;
        duro__pg_bind_text(c, s, 1, instance_id);
        int step = duro__pg_step(p, c, s);
        if (step != DURO__PG_ROW)
            return duro__pg_error(c, step, op, err);
        int64_t running = duro__pg_column_int64(s, 1);
        duro__pg_reset(s);
        if (running > 0)
            return duro_error_set(err, DURO_INVALID_STATE, 0,
                                  "postgres %s: instance '%s' or %lld of its "
                                  "sub-orchestrations has not finished; "
                                  "cancel it first or delete with force",
                                  op, instance_id, (long long)running);
    }
    /* Instances last: the tree is computed from their parent links. */
    static const duro__pg_stmt_id steps[] = {
        DURO__SQL_DELETE_HISTORY,  DURO__SQL_DELETE_EXECUTIONS,
        DURO__SQL_DELETE_MESSAGES, DURO__SQL_DELETE_READY,
        DURO__SQL_DELETE_WORK,     DURO__SQL_DELETE_EVENT_IDS,
        DURO__SQL_DELETE_INSTANCES};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++)
        if ((rc = run_for_instance(p, c, steps[i], instance_id, op, err)) !=
            DURO_OK)
            return rc;
    *deleted = (size_t)duro__pg_changes(c);
    return DURO_OK;
}

int duro__pg_delete_instance(duro_provider *base, const char *instance_id,
                             int force, size_t *deleted, duro_error *err)
{
    static const char op[] = "delete_instance";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (deleted != NULL)
        *deleted = 0;
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin_snapshot(p, op, &c, err)) != DURO_OK)
        return rc;
    size_t n = 0;
    rc = delete_in_transaction(p, c, instance_id, force, &n, op, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (deleted != NULL)
        *deleted = n;
    return DURO_OK;
}

int duro__pg_prune_executions(duro_provider *base, const char *instance_id,
                              uint64_t keep_last, size_t *pruned,
                              duro_error *err)
{
    static const char op[] = "prune_executions";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    if (pruned != NULL)
        *pruned = 0;
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (keep_last == 0)
        keep_last = 1;
    duro__pg_provider *p = pg_of(base);
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    uint64_t current = 0;
    size_t n = 0;
    rc = current_execution(p, c, instance_id, &current, op, err);
    /* Keep the current execution and the keep_last - 1 before it. */
    if (rc == DURO_OK && current > keep_last) {
        uint64_t last_pruned = current - keep_last;
        static const duro__pg_stmt_id steps[] = {DURO__SQL_PRUNE_HISTORY,
                                                 DURO__SQL_PRUNE_EXECUTIONS};
        for (size_t i = 0; i < DURO__ARRAY_LEN(steps) && rc == DURO_OK; i++) {
            duro__pg_statement *s = duro__pg_stmt(p, c, steps[i], op, err);
            rc = s != NULL ? DURO_OK : err->code;
            if (rc == DURO_OK) {
                duro__pg_bind_text(c, s, 1, instance_id);
                duro__pg_bind_u64(c, s, 2, last_pruned);
                rc = duro__pg_run(p, c, s, op, err);
            }
        }
        if (rc == DURO_OK)
            n = (size_t)duro__pg_changes(c);
    }
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__pg_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (pruned != NULL)
        *pruned = n;
    return DURO_OK;
}

int duro__pg_set_instance_problem(duro_provider *base, const char *instance_id,
                                  const char *problem, int64_t next_attempt_ms,
                                  duro_error *err)
{
    static const char op[] = "set_instance_problem";
    duro_error local;
    DURO__PG_ERR_INIT(err, local);
    duro__pg_provider *p = pg_of(base);
    int rc = duro__pg_check_id("instance id", instance_id, err);
    if (rc == DURO_OK)
        rc = duro__pg_check_payload(p, "problem", problem, err);
    if (rc != DURO_OK)
        return rc;
    if (next_attempt_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "next_attempt_ms is negative (%lld)",
                              (long long)next_attempt_ms);
    int64_t now = duro__wall_ms();
    duro__pg_conn *c;
    if ((rc = duro__pg_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    duro__pg_statement *s =
        duro__pg_stmt(p, c, DURO__SQL_INSTANCE_SET_PROBLEM, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__pg_bind_text(c, s, 1, instance_id);
        duro__pg_bind_text(c, s, 2, problem);
        duro__pg_bind_i64(c, s, 3, now);
        duro__pg_bind_i64(c, s, 4, next_attempt_ms);
        rc = duro__pg_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && duro__pg_changes(c) == 0)
        rc = not_found(op, instance_id, err);
    if (rc != DURO_OK) {
        duro__pg_write_rollback(p, c);
        return rc;
    }
    return duro__pg_write_commit(p, c, op, err);
}
