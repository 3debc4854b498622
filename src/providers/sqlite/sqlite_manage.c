/* sqlite_manage.c - the SQLite provider's reads (history, instances, the
 * operators' queries and control requests, queue counts, next due time) on
 * reader connections, and the management writes
 * (recursive delete, pruning) as single transactions on the writer. Any
 * thread. */
#include <inttypes.h>
#include <string.h>

#include "providers/sqlite/sqlite_internal.h"

static duro__sqlite_provider *sqlite_of(duro_provider *p)
{
    return (duro__sqlite_provider *)p;
}

static int not_found(const char *op, const char *instance_id, duro_error *err)
{
    return duro_error_set(err, DURO_NOT_FOUND, 0, "sqlite %s: no instance '%s'",
                          op, instance_id);
}

/* Runs BEGIN on a reader so several statements see one snapshot. */
static int begin_read(duro__sqlite_provider *p, duro__sqlite_conn *c,
                      const char *op, duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_BEGIN_READ, op, err);
    if (s == NULL)
        return err->code;
    return duro__sqlite_run(p, c, s, op, err);
}

/* The current execution of an instance; DURO_NOT_FOUND without a row. */
static int current_execution(duro__sqlite_provider *p, duro__sqlite_conn *c,
                             const char *instance_id, uint64_t *out,
                             const char *op, duro_error *err)
{
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    int rc = duro__sqlite_step(p, c, s);
    if (rc == SQLITE_DONE)
        return not_found(op, instance_id, err);
    if (rc != SQLITE_ROW)
        return duro__sqlite_error(c, rc, op, err);
    *out = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return DURO_OK;
}

int duro__sqlite_read_history(duro_provider *base, const char *instance_id,
                              uint64_t execution_id, duro_history **out,
                              duro_error *err)
{
    static const char op[] = "read_history";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sqlite_provider *p = sqlite_of(base);
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
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    rc = begin_read(p, c, op, err);
    uint64_t current = 0;
    if (rc == DURO_OK)
        rc = current_execution(p, c, instance_id, &current, op, err);
    h->execution_id = execution_id != 0 ? execution_id : current;
    if (rc == DURO_OK) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            duro__sqlite_bind_text(c, s, 1, instance_id);
            duro__sqlite_bind_u64(c, s, 2, h->execution_id);
            int step = duro__sqlite_step(p, c, s);
            if (step == SQLITE_DONE)
                rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                    "sqlite %s: instance '%s' has no "
                                    "execution %" PRIu64,
                                    op, instance_id, h->execution_id);
            else if (step != SQLITE_ROW)
                rc = duro__sqlite_error(c, step, op, err);
        }
    }
    if (rc == DURO_OK)
        rc = duro__sqlite_read_events(p, c, a, instance_id, h->execution_id, 0,
                                      &h->events, &h->count, op, err);
    duro__sqlite_reader_release(p, c);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = h;
    return DURO_OK;
}

int duro__sqlite_latest_execution_id(duro_provider *base,
                                     const char *instance_id, uint64_t *out,
                                     duro_error *err)
{
    static const char op[] = "latest_execution_id";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    rc = current_execution(p, c, instance_id, out, op, err);
    duro__sqlite_reader_release(p, c);
    return rc;
}

int duro__sqlite_read_activity_cancel_reason(
    duro_provider *base, const char *instance_id, uint64_t execution_id,
    uint64_t activity_id, char *reason, size_t reason_size, duro_error *err)
{
    static const char op[] = "read_activity_cancel_reason";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (reason == NULL || reason_size == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "reason is NULL or reason_size is 0");
    reason[0] = '\0';
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "execution_id is 0; name the execution of the "
                              "work item");
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_HISTORY_CANCEL_REASON, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_text(c, s, 1, instance_id);
        duro__sqlite_bind_u64(c, s, 2, execution_id);
        duro__sqlite_bind_u64(c, s, 3, activity_id);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW) {
            const char *text = (const char *)sqlite3_column_text(s, 0);
            size_t n = text != NULL ? (size_t)sqlite3_column_bytes(s, 0) : 0;
            if (n > reason_size - 1)
                n = reason_size - 1;
            if (n > 0)
                memcpy(reason, text, n);
            reason[n] = '\0';
        } else if (step == SQLITE_DONE) {
            rc = duro_error_set(err, DURO_NOT_FOUND, 0,
                                "sqlite %s: no cancellation of activity "
                                "%" PRIu64 " in execution %" PRIu64
                                " of instance '%s'",
                                op, activity_id, execution_id, instance_id);
        } else {
            rc = duro__sqlite_error(c, step, op, err);
        }
    }
    duro__sqlite_reader_release(p, c);
    if (rc != DURO_OK)
        reason[0] = '\0';
    return rc;
}

/* A row of DURO__SQLITE_INFO_COLUMNS. */
static int read_info(duro_arena *a, sqlite3_stmt *s, duro_instance_info *in)
{
    in->status = sqlite3_column_int(s, 3);
    in->execution_id = (uint64_t)sqlite3_column_int64(s, 4);
    in->created_ms = sqlite3_column_int64(s, 5);
    in->updated_ms = sqlite3_column_int64(s, 6);
    in->category = sqlite3_column_int(s, 9);
    in->history_count = (uint64_t)sqlite3_column_int64(s, 12);
    in->cancel_requested_ms = sqlite3_column_int64(s, 15);
    in->finished_ms = sqlite3_column_int64(s, 16);
    in->last_problem_ms = sqlite3_column_int64(s, 18);
    in->next_attempt_ms = sqlite3_column_int64(s, 19);
    if (duro__sqlite_column_text(a, s, 13, &in->cancel_reason) ||
        duro__sqlite_column_text(a, s, 14, &in->cancelled_by) ||
        duro__sqlite_column_text(a, s, 17, &in->last_problem) ||
        duro__sqlite_column_text(a, s, 0, &in->instance_id) ||
        duro__sqlite_column_text(a, s, 1, &in->name) ||
        duro__sqlite_column_text(a, s, 2, &in->version) ||
        duro__sqlite_column_text(a, s, 7, &in->output) ||
        duro__sqlite_column_text(a, s, 8, &in->error) ||
        duro__sqlite_column_text(a, s, 10, &in->custom_status) ||
        duro__sqlite_column_text(a, s, 11, &in->parent_instance))
        return -1;
    return 0;
}

/* Steps s (bound by the caller) into a new list. */
static int read_list(duro__sqlite_provider *p, duro__sqlite_conn *c,
                     sqlite3_stmt *s, duro_instance_list **out, const char *op,
                     duro_error *err)
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
    while ((rc = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
        if (list->count == cap) {
            list->items = duro__sqlite_arena_grow(a, list->items, list->count,
                                                  &cap, sizeof(*list->items));
            if (list->items == NULL)
                break;
        }
        if (read_info(a, s, &list->items[list->count]) != 0) {
            list->items = NULL;
            break;
        }
        list->count++;
    }
    if (rc == SQLITE_ROW) {
        duro_arena_destroy(a);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    if (rc != SQLITE_DONE) {
        duro_arena_destroy(a);
        return duro__sqlite_error(c, rc, op, err);
    }
    *out = list;
    return DURO_OK;
}

int duro__sqlite_get_instance(duro_provider *base, const char *instance_id,
                              duro_instance_list **out, duro_error *err)
{
    static const char op[] = "get_instance";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_INFO, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_text(c, s, 1, instance_id);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__sqlite_reader_release(p, c);
    if (rc == DURO_OK && (*out)->count == 0) {
        duro_instance_list_free(*out);
        *out = NULL;
        return not_found(op, instance_id, err);
    }
    return rc;
}

int duro__sqlite_list_instances(duro_provider *base,
                                const duro_instance_filter *filter,
                                duro_instance_list **out, duro_error *err)
{
    static const char op[] = "list_instances";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro_instance_filter none = {0};
    const duro_instance_filter *f = filter != NULL ? filter : &none;
    int rc;
    if ((rc = duro__sqlite_check_name("name filter", f->name, 0, err)) ||
        (rc = duro__sqlite_check_name("after_instance", f->after_instance, 0,
                                      err)))
        return rc;
    /* One status is an equality the status index can serve; several are a
     * bit test on each row. */
    uint32_t mask = f->status_mask;
    int one_status = mask != 0 && (mask & (mask - 1)) == 0;
    int status = one_status ? __builtin_ctz(mask) : 0;
    int by_name = f->name != NULL;
    duro__sqlite_stmt_id id =
        by_name
            ? (one_status ? DURO__SQL_LIST_NAME_STATUS : DURO__SQL_LIST_NAME)
            : (one_status ? DURO__SQL_LIST_STATUS : DURO__SQL_LIST_ALL);
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, id, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_text(
            c, s, 1, f->after_instance != NULL ? f->after_instance : "");
        duro__sqlite_bind_i64(c, s, 2, mask);
        duro__sqlite_bind_i64(c, s, 3, f->created_after_ms);
        duro__sqlite_bind_i64(c, s, 4, f->created_before_ms);
        duro__sqlite_bind_text(c, s, 5, f->name);
        duro__sqlite_bind_i64(c, s, 6, status);
        duro__sqlite_bind_i64(
            c, s, 7,
            f->limit == 0 || f->limit > INT64_MAX ? -1 : (int64_t)f->limit);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__sqlite_reader_release(p, c);
    return rc;
}

/* ---- query_instances and list_control_events --------------------------- */

/* The page and count statements of each path (DURO__SQLITE_QUERY_STATEMENTS),
 * pages by order. */
static const duro__sqlite_stmt_id query_pages[DURO__QUERY_PATHS][3] = {
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
static const duro__sqlite_stmt_id query_counts[DURO__QUERY_PATHS] = {
    DURO__SQL_QUERY_COUNT_ALL,    DURO__SQL_QUERY_COUNT_NAME,
    DURO__SQL_QUERY_COUNT_STATUS, DURO__SQL_QUERY_COUNT_NAME_STATUS,
    DURO__SQL_QUERY_COUNT_PREFIX, DURO__SQL_QUERY_COUNT_PARENT,
    DURO__SQL_QUERY_COUNT_PROBLEM};

/* Binds what a plan's statement s uses of ?1 .. ?20 (a statement's
 * parameters end at the highest it names). */
static void bind_plan(duro__sqlite_conn *c, sqlite3_stmt *s,
                      const duro__instance_plan *q)
{
    int n = sqlite3_bind_parameter_count(s);
    const char *texts[] = {q->name, q->prefix, q->prefix_end, q->contains,
                           q->parent};
    for (int i = 1; i <= 5 && i <= n; i++)
        duro__sqlite_bind_text(c, s, i, texts[i - 1]);
    const int64_t numbers[] = {q->with_problem, q->created_from,
                               q->created_until, q->mask, q->after_key};
    for (int i = 6; i <= 10 && i <= n; i++)
        duro__sqlite_bind_i64(c, s, i, numbers[i - 6]);
    if (n >= 11)
        duro__sqlite_bind_text(c, s, 11, q->after_id);
    if (n >= 12)
        duro__sqlite_bind_i64(c, s, 12, (int64_t)q->limit + 1);
    for (int k = 0; k < DURO__QUERY_ARMS && 13 + k <= n; k++)
        duro__sqlite_bind_i64(c, s, 13 + k, q->arms[k]);
    if (n >= 20) /* a negative LIMIT is none: every match */
        duro__sqlite_bind_i64(c, s, 20, q->count_rows);
}

int duro__sqlite_query_instances(duro_provider *base,
                                 const duro_instance_query *q,
                                 duro_instance_page **out, duro_error *err)
{
    static const char op[] = "query_instances";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "sqlite %s: out is NULL",
                              op);
    *out = NULL;
    duro__instance_plan plan;
    int rc = duro__query_plan("sqlite", q, 0, &plan, err);
    if (rc != DURO_OK)
        return rc;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    /* a page and its total from one snapshot */
    if (plan.count_total)
        rc = begin_read(p, c, op, err);
    duro_instance_list *list = NULL;
    if (rc == DURO_OK) {
        sqlite3_stmt *s = duro__sqlite_stmt(
            p, c, query_pages[plan.path][plan.order], op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            bind_plan(c, s, &plan);
            rc = read_list(p, c, s, &list, op, err);
        }
    }
    int64_t total = -1;
    if (rc == DURO_OK && plan.count_total) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, query_counts[plan.count_path], op, err);
        rc = s != NULL ? DURO_OK : err->code;
        if (rc == DURO_OK) {
            bind_plan(c, s, &plan);
            int step = duro__sqlite_step(p, c, s);
            if (step == SQLITE_ROW)
                total = sqlite3_column_int64(s, 0);
            else
                rc = duro__sqlite_error(c, step, op, err);
        }
    }
    duro__sqlite_reader_release(p, c);
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

int duro__sqlite_list_control_events(duro_provider *base,
                                     const duro_control_event_query *q,
                                     duro_control_event_list **out,
                                     duro_error *err)
{
    static const char op[] = "list_control_events";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "sqlite %s: out is NULL",
                              op);
    *out = NULL;
    duro__event_plan plan;
    int rc = duro__events_plan("sqlite", q, 0, &plan, err);
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
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_CONTROL_EVENTS, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_i64(c, s, 1, plan.mask);
        duro__sqlite_bind_text(c, s, 2, plan.requested_by);
        duro__sqlite_bind_i64(c, s, 3, plan.since);
        duro__sqlite_bind_i64(c, s, 4, plan.before_ts);
        duro__sqlite_bind_text(c, s, 5, plan.before_id);
        duro__sqlite_bind_i64(c, s, 6, plan.before_execution);
        duro__sqlite_bind_i64(c, s, 7, plan.before_event);
        duro__sqlite_bind_i64(c, s, 8, (int64_t)plan.limit + 1);
        size_t cap = 0;
        int step;
        while ((step = duro__sqlite_step(p, c, s)) == SQLITE_ROW) {
            if (list->count == cap) {
                list->items = duro__sqlite_arena_grow(
                    a, list->items, list->count, &cap, sizeof(*list->items));
                if (list->items == NULL)
                    break;
            }
            duro_control_event *ev = &list->items[list->count];
            ev->execution_id = (uint64_t)sqlite3_column_int64(s, 2);
            ev->event_id = (uint64_t)sqlite3_column_int64(s, 3);
            ev->kind = sqlite3_column_int(s, 4);
            ev->timestamp_ms = sqlite3_column_int64(s, 5);
            ev->flags = (uint32_t)sqlite3_column_int64(s, 8);
            if (duro__sqlite_column_text(a, s, 0, &ev->instance_id) ||
                duro__sqlite_column_text(a, s, 1, &ev->name) ||
                duro__sqlite_column_text(a, s, 6, &ev->reason) ||
                duro__sqlite_column_text(a, s, 7, &ev->requested_by)) {
                list->items = NULL;
                break;
            }
            list->count++;
        }
        if (step == SQLITE_ROW)
            rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        else if (step != SQLITE_DONE)
            rc = duro__sqlite_error(c, step, op, err);
    }
    duro__sqlite_reader_release(p, c);
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
 * reader. *is_null says whether the value was SQL NULL. */
static int read_value(duro__sqlite_provider *p, duro__sqlite_stmt_id id,
                      const char *instance_id, int64_t *value, int *is_null,
                      const char *op, duro_error *err)
{
    duro__sqlite_conn *c = duro__sqlite_reader_acquire(p);
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, id, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        if (instance_id != NULL)
            duro__sqlite_bind_text(c, s, 1, instance_id);
        int step = duro__sqlite_step(p, c, s);
        if (step == SQLITE_ROW) {
            *is_null = sqlite3_column_type(s, 0) == SQLITE_NULL;
            *value = sqlite3_column_int64(s, 0);
        } else {
            rc = duro__sqlite_error(c, step, op, err);
        }
    }
    duro__sqlite_reader_release(p, c);
    return rc;
}

int duro__sqlite_count_messages(duro_provider *base, duro_queue queue,
                                const char *instance_id, uint64_t *out,
                                duro_error *err)
{
    static const char op[] = "count_messages";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    if (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown queue %d",
                              (int)queue);
    int rc;
    if (instance_id != NULL &&
        (rc = duro__sqlite_check_id("instance id", instance_id, err)) !=
            DURO_OK)
        return rc;
    duro__sqlite_stmt_id id;
    if (queue == DURO_QUEUE_ORCHESTRATOR)
        id = instance_id != NULL ? DURO__SQL_OQ_COUNT_INSTANCE
                                 : DURO__SQL_OQ_COUNT;
    else
        id = instance_id != NULL ? DURO__SQL_WQ_COUNT_INSTANCE
                                 : DURO__SQL_WQ_COUNT;
    int64_t n = 0;
    int is_null = 0;
    rc = read_value(sqlite_of(base), id, instance_id, &n, &is_null, op, err);
    if (rc == DURO_OK)
        *out = (uint64_t)n;
    return rc;
}

int duro__sqlite_next_due(duro__sqlite_provider *p, duro_queue queue,
                          int64_t *out, duro_error *err)
{
    int64_t at = 0;
    int is_null = 1;
    int rc = read_value(
        p, queue == DURO_QUEUE_WORKER ? DURO__SQL_WQ_MIN : DURO__SQL_READY_MIN,
        NULL, &at, &is_null, "wait_for_work", err);
    *out = rc == DURO_OK && !is_null ? at : INT64_MAX;
    return rc;
}

/* Runs a statement bound with ?1 = instance_id to completion. */
static int run_for_instance(duro__sqlite_provider *p, duro__sqlite_conn *c,
                            duro__sqlite_stmt_id id, const char *instance_id,
                            const char *op, duro_error *err)
{
    sqlite3_stmt *s = duro__sqlite_stmt(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__sqlite_bind_text(c, s, 1, instance_id);
    return duro__sqlite_run(p, c, s, op, err);
}

static int delete_in_transaction(duro__sqlite_provider *p, duro__sqlite_conn *c,
                                 const char *instance_id, int force,
                                 size_t *deleted, const char *op,
                                 duro_error *err)
{
    uint64_t current;
    int rc = current_execution(p, c, instance_id, &current, op, err);
    if (rc != DURO_OK)
        return rc;
    if (!force) {
        sqlite3_stmt *s =
            duro__sqlite_stmt(p, c, DURO__SQL_DELETE_CHECK, op, err);
        if (s == NULL)
            return err->code;
        duro__sqlite_bind_text(c, s, 1, instance_id);
        int step = duro__sqlite_step(p, c, s);
        if (step != SQLITE_ROW)
            return duro__sqlite_error(c, step, op, err);
        int64_t running = sqlite3_column_int64(s, 1);
        sqlite3_reset(s);
        if (running > 0)
            return duro_error_set(err, DURO_INVALID_STATE, 0,
                                  "sqlite %s: instance '%s' or %lld of its "
                                  "sub-orchestrations has not finished; "
                                  "cancel it first or delete with force",
                                  op, instance_id, (long long)running);
    }
    /* Instances last: the tree is computed from their parent links. */
    static const duro__sqlite_stmt_id steps[] = {
        DURO__SQL_DELETE_HISTORY,  DURO__SQL_DELETE_EXECUTIONS,
        DURO__SQL_DELETE_MESSAGES, DURO__SQL_DELETE_READY,
        DURO__SQL_DELETE_WORK,     DURO__SQL_DELETE_EVENT_IDS,
        DURO__SQL_DELETE_INSTANCES};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++)
        if ((rc = run_for_instance(p, c, steps[i], instance_id, op, err)) !=
            DURO_OK)
            return rc;
    *deleted = (size_t)sqlite3_changes(c->db);
    return DURO_OK;
}

int duro__sqlite_delete_instance(duro_provider *base, const char *instance_id,
                                 int force, size_t *deleted, duro_error *err)
{
    static const char op[] = "delete_instance";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (deleted != NULL)
        *deleted = 0;
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    size_t n = 0;
    rc = delete_in_transaction(p, c, instance_id, force, &n, op, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (deleted != NULL)
        *deleted = n;
    return DURO_OK;
}

int duro__sqlite_prune_executions(duro_provider *base, const char *instance_id,
                                  uint64_t keep_last, size_t *pruned,
                                  duro_error *err)
{
    static const char op[] = "prune_executions";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    if (pruned != NULL)
        *pruned = 0;
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (keep_last == 0)
        keep_last = 1;
    duro__sqlite_provider *p = sqlite_of(base);
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    uint64_t current = 0;
    size_t n = 0;
    rc = current_execution(p, c, instance_id, &current, op, err);
    /* Keep the current execution and the keep_last - 1 before it. */
    if (rc == DURO_OK && current > keep_last) {
        uint64_t last_pruned = current - keep_last;
        static const duro__sqlite_stmt_id steps[] = {
            DURO__SQL_PRUNE_HISTORY, DURO__SQL_PRUNE_EXECUTIONS};
        for (size_t i = 0; i < DURO__ARRAY_LEN(steps) && rc == DURO_OK; i++) {
            sqlite3_stmt *s = duro__sqlite_stmt(p, c, steps[i], op, err);
            rc = s != NULL ? DURO_OK : err->code;
            if (rc == DURO_OK) {
                duro__sqlite_bind_text(c, s, 1, instance_id);
                duro__sqlite_bind_u64(c, s, 2, last_pruned);
                rc = duro__sqlite_run(p, c, s, op, err);
            }
        }
        if (rc == DURO_OK)
            n = (size_t)sqlite3_changes(c->db);
    }
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sqlite_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (pruned != NULL)
        *pruned = n;
    return DURO_OK;
}

int duro__sqlite_set_instance_problem(duro_provider *base,
                                      const char *instance_id,
                                      const char *problem,
                                      int64_t next_attempt_ms, duro_error *err)
{
    static const char op[] = "set_instance_problem";
    duro_error local;
    DURO__SQLITE_ERR_INIT(err, local);
    duro__sqlite_provider *p = sqlite_of(base);
    int rc = duro__sqlite_check_id("instance id", instance_id, err);
    if (rc == DURO_OK)
        rc = duro__sqlite_check_payload(p, "problem", problem, err);
    if (rc != DURO_OK)
        return rc;
    if (next_attempt_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "next_attempt_ms is negative (%lld)",
                              (long long)next_attempt_ms);
    int64_t now = duro__wall_ms();
    duro__sqlite_conn *c;
    if ((rc = duro__sqlite_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    sqlite3_stmt *s =
        duro__sqlite_stmt(p, c, DURO__SQL_INSTANCE_SET_PROBLEM, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sqlite_bind_text(c, s, 1, instance_id);
        duro__sqlite_bind_text(c, s, 2, problem);
        duro__sqlite_bind_i64(c, s, 3, now);
        duro__sqlite_bind_i64(c, s, 4, next_attempt_ms);
        rc = duro__sqlite_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && sqlite3_changes(c->db) == 0)
        rc = not_found(op, instance_id, err);
    if (rc != DURO_OK) {
        duro__sqlite_write_rollback(p, c);
        return rc;
    }
    return duro__sqlite_write_commit(p, c, op, err);
}
