/* manage.c - a SQL store's management reads (history, instances, the
 * operators' queries and control requests, queue counts, next due time)
 * on reader connections, and its management writes (recursive delete,
 * pruning, problems) as single write transactions, written once over the
 * dialect's primitives. Any thread. */
#include <inttypes.h>
#include <string.h>

#include "providers/providers.h"
#include "providers/sql/sql.h"

static int not_found(const duro__sql_store *p, const char *op,
                     const char *instance_id, duro_error *err)
{
    return duro_error_set(err, DURO_NOT_FOUND, 0, "%s %s: no instance '%s'",
                          p->dialect->name, op, instance_id);
}

static int nomem(duro_error *err)
{
    return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
}

/* The current execution of an instance; DURO_NOT_FOUND without a row. */
static int current_execution(duro__sql_store *p, duro__sql_conn *c,
                             const char *instance_id, uint64_t *out,
                             const char *op, duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_INSTANCE_CURRENT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(p, c, s, 1, instance_id);
    int rc = duro__sql_step(p, c, s);
    if (rc == DURO__SQL_DONE)
        return not_found(p, op, instance_id, err);
    if (rc != DURO__SQL_ROW)
        return duro__sql_error(p, c, rc, op, err);
    *out = (uint64_t)duro__sql_column_int64(p, s, 0);
    duro__sql_reset(p, s);
    return DURO_OK;
}

/* ---- history ------------------------------------------------------------ */

/* Fills h (instance_id and arena set) on a reader, in one snapshot
 * (BEGIN_READ: SQLite's BEGIN, PostgreSQL's REPEATABLE READ READ ONLY). */
static int read_history_on(duro__sql_store *p, duro__sql_conn *c,
                           duro_history *h, uint64_t execution_id,
                           const char *op, duro_error *err)
{
    uint64_t current = 0;
    int rc = duro__sql_exec(p, c, DURO__SQL_BEGIN_READ, op, err);
    if (rc == DURO_OK)
        rc = current_execution(p, c, h->instance_id, &current, op, err);
    h->execution_id = execution_id != 0 ? execution_id : current;
    if (rc != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_EXEC_EVENT_COUNT, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(p, c, s, 1, h->instance_id);
    duro__sql_bind_u64(p, c, s, 2, h->execution_id);
    int step = duro__sql_step(p, c, s);
    if (step == DURO__SQL_DONE)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "%s %s: instance '%s' has no execution %" PRIu64,
                              p->dialect->name, op, h->instance_id,
                              h->execution_id);
    if (step != DURO__SQL_ROW)
        return duro__sql_error(p, c, step, op, err);
    return duro__sql_read_events(p, c, h->arena, h->instance_id,
                                 h->execution_id, 0, &h->events, &h->count, op,
                                 err);
}

int duro__sql_read_history(duro_provider *base, const char *instance_id,
                           uint64_t execution_id, duro_history **out,
                           duro_error *err)
{
    static const char op[] = "read_history";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro_arena *a = duro_arena_create();
    duro_history *h = a != NULL ? duro_arena_alloc(a, sizeof(*h)) : NULL;
    if (h == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    h->arena = a;
    h->instance_id = duro_arena_strdup(a, instance_id);
    if (h->instance_id == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    rc = read_history_on(p, c, h, execution_id, op, err);
    duro__sql_reader_release(p, c);
    if (rc != DURO_OK) {
        duro_arena_destroy(a);
        return rc;
    }
    *out = h;
    return DURO_OK;
}

int duro__sql_latest_execution_id(duro_provider *base, const char *instance_id,
                                  uint64_t *out, duro_error *err)
{
    static const char op[] = "latest_execution_id";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    rc = current_execution(p, c, instance_id, out, op, err);
    duro__sql_reader_release(p, c);
    return rc;
}

/* Copies the reason of the cancellation event of (instance, execution,
 * activity) into reason (truncated to reason_size - 1 bytes). */
static int read_cancel_reason(duro__sql_store *p, duro__sql_conn *c,
                              const char *instance_id, uint64_t execution_id,
                              uint64_t activity_id, char *reason,
                              size_t reason_size, const char *op,
                              duro_error *err)
{
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_HISTORY_CANCEL_REASON, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(p, c, s, 1, instance_id);
    duro__sql_bind_u64(p, c, s, 2, execution_id);
    duro__sql_bind_u64(p, c, s, 3, activity_id);
    int step = duro__sql_step(p, c, s);
    if (step == DURO__SQL_DONE)
        return duro_error_set(err, DURO_NOT_FOUND, 0,
                              "%s %s: no cancellation of activity %" PRIu64
                              " in execution %" PRIu64 " of instance '%s'",
                              p->dialect->name, op, activity_id, execution_id,
                              instance_id);
    if (step != DURO__SQL_ROW)
        return duro__sql_error(p, c, step, op, err);
    const char *text = duro__sql_column_text_raw(p, s, 0);
    size_t n = text != NULL ? (size_t)duro__sql_column_bytes(p, s, 0) : 0;
    if (n > reason_size - 1)
        n = reason_size - 1;
    if (n > 0)
        memcpy(reason, text, n);
    reason[n] = '\0';
    return DURO_OK;
}

int duro__sql_read_activity_cancel_reason(duro_provider *base,
                                          const char *instance_id,
                                          uint64_t execution_id,
                                          uint64_t activity_id, char *reason,
                                          size_t reason_size, duro_error *err)
{
    static const char op[] = "read_activity_cancel_reason";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (reason == NULL || reason_size == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "reason is NULL or reason_size is 0");
    reason[0] = '\0';
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (execution_id == 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "execution_id is 0; name the execution of the "
                              "work item");
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    rc = read_cancel_reason(p, c, instance_id, execution_id, activity_id,
                            reason, reason_size, op, err);
    duro__sql_reader_release(p, c);
    if (rc != DURO_OK)
        reason[0] = '\0';
    return rc;
}

/* ---- instances ---------------------------------------------------------- */

/* A row of the INFO columns (DURO__SQLITE_INFO_COLUMNS,
 * DURO__PG_INFO_COLUMNS). */
static int read_info(duro__sql_store *p, duro_arena *a, duro__sql_stmt *s,
                     duro_instance_info *in)
{
    in->status = duro__sql_column_int(p, s, 3);
    in->execution_id = (uint64_t)duro__sql_column_int64(p, s, 4);
    in->created_ms = duro__sql_column_int64(p, s, 5);
    in->updated_ms = duro__sql_column_int64(p, s, 6);
    in->category = duro__sql_column_int(p, s, 9);
    in->history_count = (uint64_t)duro__sql_column_int64(p, s, 12);
    in->cancel_requested_ms = duro__sql_column_int64(p, s, 15);
    in->finished_ms = duro__sql_column_int64(p, s, 16);
    in->last_problem_ms = duro__sql_column_int64(p, s, 18);
    in->next_attempt_ms = duro__sql_column_int64(p, s, 19);
    in->deadline_ms = duro__sql_column_int64(p, s, 20);
    if (duro__sql_column_text(p, a, s, 13, &in->cancel_reason) ||
        duro__sql_column_text(p, a, s, 14, &in->cancelled_by) ||
        duro__sql_column_text(p, a, s, 17, &in->last_problem) ||
        duro__sql_column_text(p, a, s, 0, &in->instance_id) ||
        duro__sql_column_text(p, a, s, 1, &in->name) ||
        duro__sql_column_text(p, a, s, 2, &in->version) ||
        duro__sql_column_text(p, a, s, 7, &in->output) ||
        duro__sql_column_text(p, a, s, 8, &in->error) ||
        duro__sql_column_text(p, a, s, 10, &in->custom_status) ||
        duro__sql_column_text(p, a, s, 11, &in->parent_instance))
        return -1;
    return 0;
}

/* Steps s (bound by the caller) into a new list. */
static int read_list(duro__sql_store *p, duro__sql_conn *c, duro__sql_stmt *s,
                     duro_instance_list **out, const char *op, duro_error *err)
{
    duro_arena *a = duro_arena_create();
    duro_instance_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    list->arena = a;
    size_t cap = 0;
    int rc;
    while ((rc = duro__sql_step(p, c, s)) == DURO__SQL_ROW) {
        if (list->count == cap) {
            list->items = duro__sql_arena_grow(a, list->items, list->count,
                                               &cap, sizeof(*list->items));
            if (list->items == NULL)
                break;
        }
        if (read_info(p, a, s, &list->items[list->count]) != 0) {
            list->items = NULL;
            break;
        }
        list->count++;
    }
    if (rc == DURO__SQL_ROW) {
        duro_arena_destroy(a);
        return nomem(err);
    }
    if (rc != DURO__SQL_DONE) {
        duro_arena_destroy(a);
        return duro__sql_error(p, c, rc, op, err);
    }
    *out = list;
    return DURO_OK;
}

int duro__sql_get_instance(duro_provider *base, const char *instance_id,
                           duro_instance_list **out, duro_error *err)
{
    static const char op[] = "get_instance";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_INSTANCE_INFO, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_text(p, c, s, 1, instance_id);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__sql_reader_release(p, c);
    if (rc == DURO_OK && (*out)->count == 0) {
        duro_instance_list_free(*out);
        *out = NULL;
        return not_found(p, op, instance_id, err);
    }
    return rc;
}

int duro__sql_list_instances(duro_provider *base,
                             const duro_instance_filter *filter,
                             duro_instance_list **out, duro_error *err)
{
    static const char op[] = "list_instances";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = NULL;
    duro__sql_store *p = duro__sql_of(base);
    duro_instance_filter none = {0};
    const duro_instance_filter *f = filter != NULL ? filter : &none;
    int rc;
    if ((rc = duro__sql_check_name(p, "name filter", f->name, 0, err)) ||
        (rc = duro__sql_check_name(p, "after_instance", f->after_instance, 0,
                                   err)))
        return rc;
    /* One status is an equality the status index can serve; several are a
     * bit test on each row. */
    uint32_t mask = f->status_mask;
    int one_status = mask != 0 && (mask & (mask - 1)) == 0;
    int status = one_status ? __builtin_ctz(mask) : 0;
    int by_name = f->name != NULL;
    duro__sql_stmt_id id =
        by_name
            ? (one_status ? DURO__SQL_LIST_NAME_STATUS : DURO__SQL_LIST_NAME)
            : (one_status ? DURO__SQL_LIST_STATUS : DURO__SQL_LIST_ALL);
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    duro__sql_stmt *s = duro__sql_prepare(p, c, id, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_text(p, c, s, 1,
                            f->after_instance != NULL ? f->after_instance : "");
        duro__sql_bind_i64(p, c, s, 2, mask);
        duro__sql_bind_i64(p, c, s, 3, f->created_after_ms);
        duro__sql_bind_i64(p, c, s, 4, f->created_before_ms);
        duro__sql_bind_text(p, c, s, 5, f->name);
        duro__sql_bind_i64(p, c, s, 6, status);
        duro__sql_bind_i64(
            p, c, s, 7,
            f->limit == 0 || f->limit > INT64_MAX ? -1 : (int64_t)f->limit);
        rc = read_list(p, c, s, out, op, err);
    }
    duro__sql_reader_release(p, c);
    return rc;
}

/* ---- query_instances and list_control_events --------------------------- */

/* The page and count statements of each path (DURO__SQLITE_QUERY_STATEMENTS,
 * DURO__PG_QUERY_STATEMENTS), pages by order. */
static const duro__sql_stmt_id query_pages[DURO__QUERY_PATHS][3] = {
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
static const duro__sql_stmt_id query_counts[DURO__QUERY_PATHS] = {
    DURO__SQL_QUERY_COUNT_ALL,    DURO__SQL_QUERY_COUNT_NAME,
    DURO__SQL_QUERY_COUNT_STATUS, DURO__SQL_QUERY_COUNT_NAME_STATUS,
    DURO__SQL_QUERY_COUNT_PREFIX, DURO__SQL_QUERY_COUNT_PARENT,
    DURO__SQL_QUERY_COUNT_PROBLEM};

/* Binds what a plan's statement s uses of parameters 1 .. 21 (a
 * statement's parameters end at the highest it names). */
static void bind_plan(duro__sql_store *p, duro__sql_conn *c, duro__sql_stmt *s,
                      const duro__instance_plan *q)
{
    int n = duro__sql_param_count(p, s);
    const char *texts[] = {q->name, q->prefix, q->prefix_end, q->contains,
                           q->parent};
    for (int i = 1; i <= 5 && i <= n; i++)
        duro__sql_bind_text(p, c, s, i, texts[i - 1]);
    const int64_t numbers[] = {q->with_problem, q->created_from,
                               q->created_until, q->mask, q->after_key};
    for (int i = 6; i <= 10 && i <= n; i++)
        duro__sql_bind_i64(p, c, s, i, numbers[i - 6]);
    if (n >= 11)
        duro__sql_bind_text(p, c, s, 11, q->after_id);
    if (n >= 12)
        duro__sql_bind_i64(p, c, s, 12, (int64_t)q->limit + 1);
    for (int k = 0; k < DURO__QUERY_ARMS && 13 + k <= n; k++)
        duro__sql_bind_i64(p, c, s, 13 + k, q->arms[k]);
    if (n >= 20) /* negative: every match */
        p->dialect->bind_limit(c, s, 20, q->count_rows);
    if (n >= 21)
        duro__sql_bind_text(p, c, s, 21, q->version);
}

/* The page of plan (and its total when counted) on a reader: both from
 * one snapshot. *total is -1 when not counted. */
static int query_on(duro__sql_store *p, duro__sql_conn *c,
                    const duro__instance_plan *plan, duro_instance_list **list,
                    int64_t *total, const char *op, duro_error *err)
{
    int rc = plan->count_total
                 ? duro__sql_exec(p, c, DURO__SQL_BEGIN_READ, op, err)
                 : DURO_OK;
    if (rc != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, query_pages[plan->path][plan->order], op, err);
    if (s == NULL)
        return err->code;
    bind_plan(p, c, s, plan);
    if ((rc = read_list(p, c, s, list, op, err)) != DURO_OK ||
        !plan->count_total)
        return rc;
    s = duro__sql_prepare(p, c, query_counts[plan->count_path], op, err);
    if (s == NULL)
        return err->code;
    bind_plan(p, c, s, plan);
    int step = duro__sql_step(p, c, s);
    if (step != DURO__SQL_ROW)
        return duro__sql_error(p, c, step, op, err);
    *total = duro__sql_column_int64(p, s, 0);
    return DURO_OK;
}

int duro__sql_query_instances(duro_provider *base, const duro_instance_query *q,
                              duro_instance_page **out, duro_error *err)
{
    static const char op[] = "query_instances";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *p = duro__sql_of(base);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s %s: out is NULL",
                              p->dialect->name, op);
    *out = NULL;
    duro__instance_plan plan;
    int rc = duro__query_plan(p->dialect->name, q, p->utf8_only, &plan, err);
    if (rc != DURO_OK)
        return rc;
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    duro_instance_list *list = NULL;
    int64_t total = -1;
    rc = query_on(p, c, &plan, &list, &total, op, err);
    duro__sql_reader_release(p, c);
    duro_instance_page *page =
        rc == DURO_OK ? duro_arena_alloc(list->arena, sizeof(*page)) : NULL;
    if (rc == DURO_OK && page == NULL)
        rc = nomem(err);
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

/* Steps CONTROL_EVENTS of plan into list (its arena a). */
static int read_control_events(duro__sql_store *p, duro__sql_conn *c,
                               const duro__event_plan *plan,
                               duro_control_event_list *list, const char *op,
                               duro_error *err)
{
    duro_arena *a = list->arena;
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_CONTROL_EVENTS, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_i64(p, c, s, 1, plan->mask);
    duro__sql_bind_text(p, c, s, 2, plan->requested_by);
    duro__sql_bind_i64(p, c, s, 3, plan->since);
    duro__sql_bind_i64(p, c, s, 4, plan->before_ts);
    duro__sql_bind_text(p, c, s, 5, plan->before_id);
    duro__sql_bind_i64(p, c, s, 6, plan->before_execution);
    duro__sql_bind_i64(p, c, s, 7, plan->before_event);
    duro__sql_bind_i64(p, c, s, 8, (int64_t)plan->limit + 1);
    size_t cap = 0;
    int step;
    while ((step = duro__sql_step(p, c, s)) == DURO__SQL_ROW) {
        if (list->count == cap) {
            list->items = duro__sql_arena_grow(a, list->items, list->count,
                                               &cap, sizeof(*list->items));
            if (list->items == NULL)
                return nomem(err);
        }
        duro_control_event *ev = &list->items[list->count];
        ev->execution_id = (uint64_t)duro__sql_column_int64(p, s, 2);
        ev->event_id = (uint64_t)duro__sql_column_int64(p, s, 3);
        ev->kind = duro__sql_column_int(p, s, 4);
        ev->timestamp_ms = duro__sql_column_int64(p, s, 5);
        ev->flags = (uint32_t)duro__sql_column_int64(p, s, 8);
        if (duro__sql_column_text(p, a, s, 0, &ev->instance_id) ||
            duro__sql_column_text(p, a, s, 1, &ev->name) ||
            duro__sql_column_text(p, a, s, 6, &ev->reason) ||
            duro__sql_column_text(p, a, s, 7, &ev->requested_by)) {
            list->items = NULL;
            return nomem(err);
        }
        list->count++;
    }
    if (step != DURO__SQL_DONE)
        return duro__sql_error(p, c, step, op, err);
    return DURO_OK;
}

int duro__sql_list_control_events(duro_provider *base,
                                  const duro_control_event_query *q,
                                  duro_control_event_list **out,
                                  duro_error *err)
{
    static const char op[] = "list_control_events";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *p = duro__sql_of(base);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s %s: out is NULL",
                              p->dialect->name, op);
    *out = NULL;
    duro__event_plan plan;
    int rc = duro__events_plan(p->dialect->name, q, p->utf8_only, &plan, err);
    if (rc != DURO_OK)
        return rc;
    duro_arena *a = duro_arena_create();
    duro_control_event_list *list =
        a != NULL ? duro_arena_alloc(a, sizeof(*list)) : NULL;
    if (list == NULL) {
        duro_arena_destroy(a);
        duro__events_plan_free(&plan);
        return nomem(err);
    }
    list->arena = a;
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    rc = read_control_events(p, c, &plan, list, op, err);
    duro__sql_reader_release(p, c);
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

/* ---- queue counts ------------------------------------------------------- */

/* Runs a single-value query (bound with instance_id when not NULL) on a
 * reader. *is_null says whether the value was SQL NULL. */
static int read_value(duro__sql_store *p, duro__sql_stmt_id id,
                      const char *instance_id, int64_t *value, int *is_null,
                      const char *op, duro_error *err)
{
    duro__sql_conn *c = duro__sql_reader_acquire(p);
    duro__sql_stmt *s = duro__sql_prepare(p, c, id, op, err);
    int rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        if (instance_id != NULL)
            duro__sql_bind_text(p, c, s, 1, instance_id);
        int step = duro__sql_step(p, c, s);
        if (step == DURO__SQL_ROW) {
            *is_null = duro__sql_column_null(p, s, 0);
            *value = duro__sql_column_int64(p, s, 0);
        } else {
            rc = duro__sql_error(p, c, step, op, err);
        }
    }
    duro__sql_reader_release(p, c);
    return rc;
}

int duro__sql_count_messages(duro_provider *base, duro_queue queue,
                             const char *instance_id, uint64_t *out,
                             duro_error *err)
{
    static const char op[] = "count_messages";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (out == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "out is NULL");
    *out = 0;
    if (queue != DURO_QUEUE_ORCHESTRATOR && queue != DURO_QUEUE_WORKER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown queue %d",
                              (int)queue);
    duro__sql_store *p = duro__sql_of(base);
    int rc;
    if (instance_id != NULL &&
        (rc = duro__sql_check_id(p, "instance id", instance_id, err)) !=
            DURO_OK)
        return rc;
    duro__sql_stmt_id id;
    if (queue == DURO_QUEUE_ORCHESTRATOR)
        id = instance_id != NULL ? DURO__SQL_OQ_COUNT_INSTANCE
                                 : DURO__SQL_OQ_COUNT;
    else
        id = instance_id != NULL ? DURO__SQL_WQ_COUNT_INSTANCE
                                 : DURO__SQL_WQ_COUNT;
    int64_t n = 0;
    int is_null = 0;
    rc = read_value(p, id, instance_id, &n, &is_null, op, err);
    if (rc == DURO_OK)
        *out = (uint64_t)n;
    return rc;
}

/* The earliest time something on `queue` becomes fetchable, INT64_MAX
 * when it is empty: a ready row's ready_at (the earliest visible message of
 * its instance, or its lock's expiry) or a worker row's available_at (its
 * visibility, or its lock's expiry), from their indexes. */
static int queue_due(duro__sql_store *p, duro_queue queue, const char *op,
                     int64_t *out, duro_error *err)
{
    int64_t at = 0;
    int is_null = 1;
    int rc = read_value(
        p, queue == DURO_QUEUE_WORKER ? DURO__SQL_WQ_MIN : DURO__SQL_READY_MIN,
        NULL, &at, &is_null, op, err);
    *out = rc == DURO_OK && !is_null ? at : INT64_MAX;
    return rc;
}

int duro__sql_next_due(duro__sql_store *p, duro_queue queue, int64_t *out,
                       duro_error *err)
{
    return queue_due(p, queue, "wait_for_work", out, err);
}

int duro__sql_next_due_any(duro_provider *base, int64_t *due_ms, int *any,
                           duro_error *err)
{
    static const char op[] = "next_due";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (due_ms == NULL || any == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s is NULL",
                              due_ms == NULL ? "due_ms" : "any");
    *due_ms = 0;
    *any = 0;
    duro__sql_store *p = duro__sql_of(base);
    int64_t orch, work;
    int rc = queue_due(p, DURO_QUEUE_ORCHESTRATOR, op, &orch, err);
    if (rc == DURO_OK)
        rc = queue_due(p, DURO_QUEUE_WORKER, op, &work, err);
    if (rc != DURO_OK)
        return rc;
    int64_t due = DURO__MIN(orch, work);
    if (due != INT64_MAX) {
        *due_ms = due;
        *any = 1;
    }
    return DURO_OK;
}

/* ---- management writes -------------------------------------------------- */

/* Runs a statement bound with parameter 1 = instance_id to completion. */
static int run_for_instance(duro__sql_store *p, duro__sql_conn *c,
                            duro__sql_stmt_id id, const char *instance_id,
                            const char *op, duro_error *err)
{
    duro__sql_stmt *s = duro__sql_prepare(p, c, id, op, err);
    if (s == NULL)
        return err->code;
    duro__sql_bind_text(p, c, s, 1, instance_id);
    return duro__sql_run(p, c, s, op, err);
}

static int delete_in_transaction(duro__sql_store *p, duro__sql_conn *c,
                                 const char *instance_id, int force,
                                 size_t *deleted, const char *op,
                                 duro_error *err)
{
    uint64_t current;
    int rc = current_execution(p, c, instance_id, &current, op, err);
    if (rc != DURO_OK)
        return rc;
    if (!force) {
        duro__sql_stmt *s =
            duro__sql_prepare(p, c, DURO__SQL_DELETE_CHECK, op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(p, c, s, 1, instance_id);
        int step = duro__sql_step(p, c, s);
        if (step != DURO__SQL_ROW)
            return duro__sql_error(p, c, step, op, err);
        int64_t running = duro__sql_column_int64(p, s, 1);
        duro__sql_reset(p, s);
        if (running > 0)
            return duro_error_set(err, DURO_INVALID_STATE, 0,
                                  "%s %s: instance '%s' or %lld of its "
                                  "sub-orchestrations has not finished; "
                                  "cancel it first or delete with force",
                                  p->dialect->name, op, instance_id,
                                  (long long)running);
    }
    /* Instances last: the tree is computed from their parent links. */
    static const duro__sql_stmt_id steps[] = {
        DURO__SQL_DELETE_HISTORY,  DURO__SQL_DELETE_EXECUTIONS,
        DURO__SQL_DELETE_MESSAGES, DURO__SQL_DELETE_READY,
        DURO__SQL_DELETE_WORK,     DURO__SQL_DELETE_EVENT_IDS,
        DURO__SQL_DELETE_INSTANCES};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++)
        if ((rc = run_for_instance(p, c, steps[i], instance_id, op, err)) !=
            DURO_OK)
            return rc;
    *deleted = (size_t)duro__sql_changes(p, c);
    return DURO_OK;
}

int duro__sql_delete_instance(duro_provider *base, const char *instance_id,
                              int force, size_t *deleted, duro_error *err)
{
    static const char op[] = "delete_instance";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (deleted != NULL)
        *deleted = 0;
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    /* every statement sees one snapshot, so each computes the same tree */
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin_snapshot(p, op, &c, err)) != DURO_OK)
        return rc;
    size_t n = 0;
    rc = delete_in_transaction(p, c, instance_id, force, &n, op, err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sql_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (deleted != NULL)
        *deleted = n;
    return DURO_OK;
}

/* Deletes the executions of instance_id up to last_pruned and their
 * history; *pruned: the executions deleted. */
static int prune_in_transaction(duro__sql_store *p, duro__sql_conn *c,
                                const char *instance_id, uint64_t last_pruned,
                                size_t *pruned, const char *op, duro_error *err)
{
    static const duro__sql_stmt_id steps[] = {DURO__SQL_PRUNE_HISTORY,
                                              DURO__SQL_PRUNE_EXECUTIONS};
    for (size_t i = 0; i < DURO__ARRAY_LEN(steps); i++) {
        duro__sql_stmt *s = duro__sql_prepare(p, c, steps[i], op, err);
        if (s == NULL)
            return err->code;
        duro__sql_bind_text(p, c, s, 1, instance_id);
        duro__sql_bind_u64(p, c, s, 2, last_pruned);
        int rc = duro__sql_run(p, c, s, op, err);
        if (rc != DURO_OK)
            return rc;
    }
    *pruned = (size_t)duro__sql_changes(p, c);
    return DURO_OK;
}

int duro__sql_prune_executions(duro_provider *base, const char *instance_id,
                               uint64_t keep_last, size_t *pruned,
                               duro_error *err)
{
    static const char op[] = "prune_executions";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    if (pruned != NULL)
        *pruned = 0;
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc != DURO_OK)
        return rc;
    if (keep_last == 0)
        keep_last = 1;
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    uint64_t current = 0;
    size_t n = 0;
    rc = current_execution(p, c, instance_id, &current, op, err);
    /* Keep the current execution and the keep_last - 1 before it. */
    if (rc == DURO_OK && current > keep_last)
        rc = prune_in_transaction(p, c, instance_id, current - keep_last, &n,
                                  op, err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(p, c);
        return rc;
    }
    if ((rc = duro__sql_write_commit(p, c, op, err)) != DURO_OK)
        return rc;
    if (pruned != NULL)
        *pruned = n;
    return DURO_OK;
}

int duro__sql_set_instance_problem(duro_provider *base, const char *instance_id,
                                   const char *problem, int64_t next_attempt_ms,
                                   duro_error *err)
{
    static const char op[] = "set_instance_problem";
    duro_error local;
    DURO__SQL_ERR_INIT(err, local);
    duro__sql_store *p = duro__sql_of(base);
    int rc = duro__sql_check_id(p, "instance id", instance_id, err);
    if (rc == DURO_OK)
        rc = duro__sql_check_payload(p, "problem", problem, err);
    if (rc != DURO_OK)
        return rc;
    if (next_attempt_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "next_attempt_ms is negative (%lld)",
                              (long long)next_attempt_ms);
    int64_t now = duro__wall_ms();
    duro__sql_conn *c;
    if ((rc = duro__sql_write_begin(p, op, &c, err)) != DURO_OK)
        return rc;
    duro__sql_stmt *s =
        duro__sql_prepare(p, c, DURO__SQL_INSTANCE_SET_PROBLEM, op, err);
    rc = s != NULL ? DURO_OK : err->code;
    if (rc == DURO_OK) {
        duro__sql_bind_text(p, c, s, 1, instance_id);
        duro__sql_bind_text(p, c, s, 2, problem);
        duro__sql_bind_i64(p, c, s, 3, now);
        duro__sql_bind_i64(p, c, s, 4, next_attempt_ms);
        rc = duro__sql_run(p, c, s, op, err);
    }
    if (rc == DURO_OK && duro__sql_changes(p, c) == 0)
        rc = not_found(p, op, instance_id, err);
    if (rc != DURO_OK) {
        duro__sql_write_rollback(p, c);
        return rc;
    }
    return duro__sql_write_commit(p, c, op, err);
}
