/* ui_api.c - the routes of duro ui behind the gate (ui_safety.c): the JSON
 * API /api/v1/... (docs/ui-api.md) and /metrics. Instance ids travel as
 * refs, base64url of the id's bytes, in ?ref= or a JSON body, never in the
 * path (ui_args.c). The schedules' routes are in ui_schedules.c. Shapes are the
 * CLI's (json.c, duro history --json, duro metrics
 * --json) plus "ref". Actions go through the client calls the CLI uses,
 * requested_by "ui:NAME" of the operator signed in (r->who). Runs on MHD's
 * pool threads. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui.h"

#define BIT(status) (1u << (status))
#define PAGE_MAX 1000
/* The most bytes of a payload, output, custom status or error that an
 * instance or an event carries (docs/ui-api.md): the page polls them every
 * 2 s, and a whole payload is one GET /api/v1/payload away. */
#define PREVIEW_MAX 4096

struct ui_route {
    const char *method;
    const char *path;
    int action;
    int (*run)(ui_request *r, json_t *body);
    int control; /* cancel: 0; else a duro_control */
};

/* Sets @p key of @p o to @p text (NULL: null) cut to at most @p max bytes
 * at a UTF-8 boundary, "<key>_bytes" to its whole length (null when NULL)
 * and "<key>_truncated" to whether it was cut. Uncut, a payload (@p json)
 * is its JSON value as the CLI shows it; cut, it is the text of its first
 * bytes, which cannot be JSON. */
static void set_preview(json_t *o, const char *key, const char *text,
                        size_t max, int json)
{
    char bytes_key[64], cut_key[64];
    snprintf(bytes_key, sizeof(bytes_key), "%s_bytes", key);
    snprintf(cut_key, sizeof(cut_key), "%s_truncated", key);
    size_t len = text != NULL ? strlen(text) : 0;
    if (text == NULL)
        jset(o, key, json_null());
    else if (len <= max)
        jset(o, key, json ? jpayload(text) : jstr(text));
    else {
        size_t n = max;
        /* not inside a UTF-8 sequence (at most 3 continuation bytes) */
        for (int k = 0;
             k < 3 && n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80; k++)
            n--;
        char *head = strndup(text, n);
        if (head == NULL)
            abort();
        jset(o, key, jstr(head));
        free(head);
    }
    jset(o, bytes_key, text != NULL ? jint((int64_t)len) : json_null());
    jset(o, cut_key, json_boolean(len > max));
}

/* An instance as `duro status --json` shows it, plus ref; the output and
 * the custom status cut to PREVIEW_MAX bytes (set_preview). A list item
 * (@p listed) carries neither, only their sizes, and its error is cut to
 * 512 bytes: the list shows none of them. */
static json_t *instance_json(const duro_instance_info *info, int listed)
{
    duro_instance_info bare = *info;
    bare.output = NULL;
    bare.custom_status = NULL;
    bare.error = NULL;
    json_t *o = json_instance(&bare);
    if (listed) {
        json_object_del(o, "output");
        json_object_del(o, "custom_status");
        jset(o, "output_bytes",
             info->output != NULL ? jint((int64_t)strlen(info->output))
                                  : json_null());
        jset(o, "custom_status_bytes",
             info->custom_status != NULL
                 ? jint((int64_t)strlen(info->custom_status))
                 : json_null());
        set_preview(o, "error", info->error, 512, 0);
    } else {
        set_preview(o, "output", info->output, PREVIEW_MAX, 1);
        set_preview(o, "custom_status", info->custom_status, PREVIEW_MAX, 1);
        set_preview(o, "error", info->error, PREVIEW_MAX, 0);
    }
    char *ref = ui_ref_encode(info->instance_id, strlen(info->instance_id));
    jset(o, "ref", jstr(ref));
    free(ref);
    /* the parent's exact ref: parent_instance is for display (its invalid
     * UTF-8 repaired), a link to it needs the bytes */
    if (info->parent_instance != NULL && *info->parent_instance != '\0') {
        ref =
            ui_ref_encode(info->parent_instance, strlen(info->parent_instance));
        jset(o, "parent_ref", jstr(ref));
        free(ref);
    } else {
        jset(o, "parent_ref", json_null());
    }
    return o;
}

/* Milliseconds since the epoch, or RFC 3339 UTC
 * (2026-05-01T12:00:00[.123]Z, a date that exists); 0 when absent. */
static int parse_time(const char *v, int64_t *ms)
{
    *ms = 0;
    if (v == NULL)
        return 0;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (*v >= '0' && *v <= '9' && *end == '\0') {
        *ms = n;
        return 0;
    }
    size_t len = strlen(v);
    if (len < 11 || (v[len - 1] != 'Z' && v[len - 1] != 'z'))
        return -1;
    return args_parse_iso(v, ms);
}

/* "pending,running" (or a JSON array of words) into a status mask. */
static int status_bit(const char *word, size_t len, uint32_t *mask)
{
    for (int s = 1; s <= DURO_STATUS_TERMINATED; s++) {
        if (s == DURO_STATUS_CONTINUED_AS_NEW)
            continue; /* a status of executions: no instance has it */
        const char *w = status_word(s);
        if (strlen(w) == len && strncmp(w, word, len) == 0) {
            *mask |= BIT(s);
            return 0;
        }
    }
    return -1;
}

static int parse_statuses(const char *text, uint32_t *mask)
{
    *mask = 0;
    while (text != NULL && *text) {
        size_t len = strcspn(text, ",");
        if (len == 0 || status_bit(text, len, mask) != 0)
            return -1;
        text += len + (text[len] == ',');
    }
    return 0;
}

/* ---- GET ----------------------------------------------------------------- */

static int get_summary(ui_request *r, json_t *body)
{
    (void)body;
    duro_store_stats *st = NULL;
    int rc = duro_client_store_stats(r->srv->client, &st);
    if (rc != DURO_OK)
        return ui_send_rc(r, rc, "reading the store's statistics");
    json_t *doc = metrics_json(st);
    json_t *counts = json_object();
    uint64_t by[DURO_STATUS_TERMINATED + 1] = {0}, total = 0;
    for (size_t i = 0; i < st->instance_count; i++) {
        int s = st->instances[i].status;
        if (s >= 0 && s <= DURO_STATUS_TERMINATED)
            by[s] += st->instances[i].count;
        total += st->instances[i].count;
    }
    for (int s = 1; s <= DURO_STATUS_TERMINATED; s++)
        if (s != DURO_STATUS_CONTINUED_AS_NEW || by[s] > 0)
            jset(counts, status_word(s), jint((int64_t)by[s]));
    jset(doc, "counts", counts);
    jset(doc, "total", jint((int64_t)total));
    jset(doc, "read_only", json_boolean(r->srv->read_only));
    jset(doc, "requested_by", jstr(r->who->requester));
    duro_free(st);
    return ui_send_json(r, 200, doc);
}

#define ID_MAX 1024 /* bytes of an instance id (the client's ID_MAX) */

/* The code point of the UTF-8 sequence at @p s of @p len bytes, or -1 when
 * it is not one valid sequence. */
static long utf8_code(const unsigned char *s, size_t len)
{
    static const long min[] = {0, 0, 0x80, 0x800, 0x10000};
    size_t need = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    if (need != len || (s[0] >= 0x80 && s[0] < 0xC2) || s[0] > 0xF4)
        return -1;
    long c = need == 1 ? s[0] : s[0] & (0x3F >> (need - 1));
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c < min[need] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return -1;
    return c;
}

/* The keyset to list the ids that start with @p prefix from, in
 * duro_instance_filter.after_instance (ids greater than it): a string
 * below the prefix with no id of at most ID_MAX bytes between them, so
 * the listing begins at the first matching id. Ids sort by their bytes,
 * so it is the prefix with its last character lowered by one and a tail
 * of the highest characters up to ID_MAX bytes: U+10FFFF when the prefix
 * is valid UTF-8 (a PostgreSQL store holds only that: a byte 0xFF would
 * be refused there), else bytes 0xFF. NULL: from the start. Caller frees. */
static char *prefix_floor(const char *prefix)
{
    size_t plen = strlen(prefix);
    if (plen == 0 || plen > ID_MAX)
        return NULL;
    /* the last character: the last UTF-8 sequence, else the last byte */
    const unsigned char *u = (const unsigned char *)prefix;
    size_t start = plen - 1;
    while (start > 0 && plen - start < 4 && (u[start] & 0xC0) == 0x80)
        start--;
    long c = utf8_code(u + start, plen - start);
    int utf8 = c >= 0;
    if (!utf8) {
        start = plen - 1;
        c = u[start];
    }
    char *out = malloc(ID_MAX + 1);
    if (out == NULL)
        abort();
    memcpy(out, prefix, start);
    size_t o = start;
    if (c <= 1) /* no id holds a NUL: nothing sorts between */
        goto done;
    c--;
    if (c == 0xDFFF)
        c = 0xD7FF; /* not a surrogate */
    if (!utf8 || c < 0x80) {
        out[o++] = (char)c;
    } else if (c < 0x800) {
        out[o++] = (char)(0xC0 | c >> 6);
        out[o++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out[o++] = (char)(0xE0 | c >> 12);
        out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[o++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[o++] = (char)(0xF0 | c >> 18);
        out[o++] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[o++] = (char)(0x80 | (c & 0x3F));
    }
    if (utf8) {
        while (o + 4 <= ID_MAX) {
            memcpy(out + o, "\xF4\x8F\xBF\xBF", 4);
            o += 4;
        }
    } else {
        while (o < ID_MAX)
            out[o++] = (char)0xFF;
    }
done:
    out[o] = '\0';
    if (o == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Calls @p fn for each instance @p filter lists after @p after (NULL: from
 * the start) whose id starts with @p prefix (NULL: any), in id order,
 * until @p fn returns nonzero; lists @p batch rows per call. With a prefix
 * and no @p after (or an @p after below it), listing starts at the first
 * id with the prefix (prefix_floor) and stops at the first id past it, so
 * the cost follows the matching ids, not the table. *@p rows_read (when
 * not NULL) counts the rows the store returned. DURO_OK or the list's
 * error. */
static int each_listed(duro_client *c, duro_instance_filter filter,
                       const char *after, const char *prefix, size_t batch,
                       int (*fn)(const duro_instance_info *, void *), void *arg,
                       size_t *rows_read)
{
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    char *from = plen > 0 ? prefix_floor(prefix) : NULL;
    if (after != NULL && (from == NULL || strcmp(after, from) > 0)) {
        free(from);
        from = strdup(after);
        if (from == NULL)
            abort();
    }
    int rc = DURO_OK, stop = 0;
    if (rows_read != NULL)
        *rows_read = 0;
    while (!stop) {
        duro_instance_list *page = NULL;
        rc = cli_list_page(c, &filter, batch, &from, &page);
        if (rc != DURO_OK)
            break;
        if (rows_read != NULL)
            *rows_read += page->count;
        for (size_t i = 0; i < page->count && !stop; i++) {
            int cmp =
                plen ? strncmp(page->items[i].instance_id, prefix, plen) : 0;
            if (cmp > 0 || (cmp == 0 && fn(&page->items[i], arg) != 0))
                stop = 1;
        }
        size_t n = page->count;
        duro_instance_list_free(page);
        if (n < batch || from == NULL)
            break;
    }
    free(from);
    return rc;
}

/* The statuses an instance may need attention in (attention=1). */
#define ATTENTION_STATUSES                                                     \
    (BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING) |                     \
     BIT(DURO_STATUS_SUSPENDED) | BIT(DURO_STATUS_FAILED))
#define LIVE_STATUSES                                                          \
    (BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING) |                     \
     BIT(DURO_STATUS_SUSPENDED))
/* Every instance status (an instance is never ContinuedAsNew). */
#define ALL_STATUSES (LIVE_STATUSES | ENDED_STATUSES)
#define ENDED_STATUSES                                                         \
    (BIT(DURO_STATUS_COMPLETED) | BIT(DURO_STATUS_FAILED) |                    \
     BIT(DURO_STATUS_CANCELLED) | BIT(DURO_STATUS_TERMINATED))
/* The most instances a total counts by listing (id_prefix): past it the
 * total is this and total_capped true. */
#define COUNT_CAP 10000

/* attention=1: failed, or live (pending, running, suspended) with a
 * problem a runtime recorded (the summary's "stuck"). */
static int needs_attention(const duro_instance_info *info)
{
    return info->status == DURO_STATUS_FAILED ||
           (info->last_problem != NULL &&
            !duro_status_is_terminal(info->status));
}

/* The filter of GET instances and GET counts, from the request. */
typedef struct list_args {
    uint32_t status_mask; /* 0: any */
    const char *name, *name_prefix, *name_contains, *id_prefix;
    const char *version; /* exact orchestration version; "" the default */
    char *parent;        /* parent=REF decoded (caller frees) */
    int64_t created_after_ms, created_before_ms;
    int attention;
    int order; /* duro_instance_order */
    size_t limit;
    const char *cursor;
    int count;
} list_args;

/* The first argument of the request not in its route's list, or NULL. */
/* Reads the filter (and, with @p paged, order, limit, cursor and count)
 * into @p a; -1 after queueing a 400 in *rc. */
static int parse_list_args(ui_request *r, int paged, list_args *a, int *rc)
{
    memset(a, 0, sizeof(*a));
    if (parse_statuses(ui_arg(r, "status"), &a->status_mask) != 0) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "status: a comma-separated list of pending, "
                            "running, suspended, completed, failed, "
                            "cancelled, terminated");
        return -1;
    }
    a->name = ui_arg(r, "name");
    a->name_prefix = ui_arg(r, "name_prefix");
    a->name_contains = ui_arg(r, "name_contains");
    a->id_prefix = ui_arg(r, "id_prefix");
    /* "version=" is a filter, the default version's: only an absent
     * version selects any */
    a->version =
        MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "version");
    if (parse_time(ui_arg(r, "created_after"), &a->created_after_ms) != 0 ||
        parse_time(ui_arg(r, "created_before"), &a->created_before_ms) != 0) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "created_after/created_before: milliseconds "
                            "since the epoch or RFC 3339 UTC "
                            "(2026-05-01T12:00:00Z)");
        return -1;
    }
    const char *attention = ui_arg(r, "attention");
    if (attention != NULL && strcmp(attention, "1") != 0) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "attention: 1 (failed, or live with a recorded "
                            "problem), or leave it out");
        return -1;
    }
    a->attention = attention != NULL;
    if (ui_arg(r, "parent") != NULL) {
        a->parent = ui_ref_decode(ui_arg(r, "parent"));
        if (a->parent == NULL) {
            *rc = ui_send_error(r, 400, "bad_argument",
                                "parent: the ref of an instance");
            return -1;
        }
    }
    if (a->id_prefix != NULL &&
        (a->name_prefix != NULL || a->name_contains != NULL ||
         a->parent != NULL || a->version != NULL)) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "id_prefix goes with status, name, created_*, "
                            "attention and the id order only");
        free(a->parent);
        a->parent = NULL;
        return -1;
    }
    if (!paged)
        return 0;
    uint64_t limit;
    const char *order = ui_arg(r, "order");
    const char *count = ui_arg(r, "count");
    if (ui_arg_uint(r, "limit", 50, PAGE_MAX, &limit, rc) != 0) {
        free(a->parent);
        a->parent = NULL;
        return -1;
    }
    a->limit = limit == 0 ? 50 : (size_t)limit;
    a->cursor = ui_arg(r, "cursor");
    a->order = order == NULL || strcmp(order, "id") == 0 ? DURO_ORDER_ID
               : strcmp(order, "created") == 0 ? DURO_ORDER_CREATED_DESC
               : strcmp(order, "updated") == 0 ? DURO_ORDER_UPDATED_DESC
                                               : -1;
    const char *why =
        a->order < 0 ? "order: id, created (newest first) or updated (most "
                       "recently changed first)"
        : count != NULL && strcmp(count, "1") != 0
            ? "count: 1 (count every match: total), or leave it out"
        : a->id_prefix != NULL && a->order != DURO_ORDER_ID
            ? "id_prefix lists in id order only (order=id)"
            : NULL;
    if (why != NULL) {
        *rc = ui_send_error(r, 400, "bad_argument", "%s", why);
        free(a->parent);
        a->parent = NULL;
        return -1;
    }
    a->count = count != NULL;
    return 0;
}

/* The query of @p a with @p mask as its statuses (0: any). */
static duro_instance_query query_of(const list_args *a, uint32_t mask)
{
    duro_instance_query q;
    duro_instance_query_init(&q);
    q.status_mask = mask;
    q.name = a->name;
    q.name_prefix = a->name_prefix;
    q.name_contains = a->name_contains;
    q.orchestration_version = a->version;
    q.parent_instance = a->parent;
    q.created_after_ms = a->created_after_ms;
    q.created_before_ms = a->created_before_ms;
    q.order = a->order;
    return q;
}

/* The statuses @p a selects: its status filter, narrowed by attention to
 * ATTENTION_STATUSES. 0 with *none set: nothing can match. */
static uint32_t mask_of(const list_args *a, int *none)
{
    uint32_t mask = a->status_mask;
    *none = 0;
    if (!a->attention)
        return mask;
    *none = mask != 0 && (mask & ATTENTION_STATUSES) == 0;
    return mask != 0 ? mask & ATTENTION_STATUSES : ATTENTION_STATUSES;
}

/* How many instances @p a selects among @p mask (0: any), by
 * duro_client_query's count: attention counts the live ones with a
 * problem and the failed ones (disjoint). DURO_OK or the query's error. */
static int count_query(duro_client *c, const list_args *a, uint32_t mask,
                       int64_t *total)
{
    int none;
    uint32_t m = mask_of(a, &none);
    if (mask != 0)
        m = m != 0 ? m & mask : mask;
    *total = 0;
    if (none || (mask != 0 && m == 0))
        return DURO_OK;
    /* counting reads every match: through the created-time index when
     * there is a window */
    list_args ordered = *a;
    ordered.order = a->created_after_ms || a->created_before_ms
                        ? DURO_ORDER_CREATED_DESC
                        : DURO_ORDER_ID;
    uint32_t parts[2] = {m, 0};
    int problem[2] = {0, 0};
    if (a->attention) {
        parts[0] = m & LIVE_STATUSES;
        problem[0] = 1;
        parts[1] = m & BIT(DURO_STATUS_FAILED);
    }
    for (int k = 0; k < 2; k++) {
        if (k == 1 && parts[1] == 0)
            break;
        if (a->attention && parts[k] == 0)
            continue;
        duro_instance_query q = query_of(&ordered, parts[k]);
        q.with_problem = problem[k];
        q.limit = 1;
        q.count_total = 1;
        duro_instance_page *pg = NULL;
        int rc = duro_client_query(c, &q, &pg);
        if (rc != DURO_OK)
            return rc;
        *total += pg->total;
        duro_instance_page_free(pg);
    }
    return DURO_OK;
}

/* get_instances' page by listing (id_prefix): up to limit rows, whether
 * one more matches; with count, every match counted up to COUNT_CAP. */
typedef struct list_page {
    json_t *items;
    size_t limit, taken;
    int more;
    char *last;
    int attention; /* only the rows needs_attention() takes */
    int counting;  /* go on past the page to count, up to COUNT_CAP */
    uint64_t counted;
    uint64_t by[DURO_STATUS_TERMINATED + 1]; /* counted, by status */
} list_page;

static int page_add(const duro_instance_info *info, void *arg)
{
    list_page *pg = arg;
    if (pg->attention && !needs_attention(info))
        return 0;
    if (pg->counting) {
        if (pg->counted == COUNT_CAP) {
            pg->counted++; /* more than COUNT_CAP */
            pg->more |= pg->taken == pg->limit;
            return 1;
        }
        pg->counted++;
        if (info->status >= 0 && info->status <= DURO_STATUS_TERMINATED)
            pg->by[info->status]++;
    }
    if (pg->taken == pg->limit) {
        pg->more = 1;
        return !pg->counting;
    }
    if (pg->items != NULL)
        json_array_append_new(pg->items, instance_json(info, 1));
    free(pg->last);
    pg->last = strdup(info->instance_id);
    pg->taken++;
    return 0;
}

/* A list answer: @p doc (stolen) with X-Duro-Rows-Read: @p rows_read, the
 * rows the store returned to make it. */
static int send_listing(ui_request *r, json_t *doc, size_t rows_read)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (text == NULL)
        return ui_queue(r, 500, NULL);
    size_t len = strlen(text);
    text[len] = '\n';
    struct MHD_Response *resp =
        ui_response(text, len + 1, "application/json", 1);
    free(text);
    if (resp != NULL) {
        char rows[32];
        snprintf(rows, sizeof(rows), "%zu", rows_read);
        MHD_add_response_header(resp, "X-Duro-Rows-Read", rows);
    }
    return ui_queue(r, 200, resp);
}

/* id_prefix: in id order over duro_client_list (which has no prefix
 * filter), from the first id with the prefix (each_listed); the cursor is
 * the ref of the page's last id. */
static int list_by_prefix(ui_request *r, const list_args *a)
{
    int none;
    duro_instance_filter filter = {0};
    filter.status_mask = mask_of(a, &none);
    filter.name = a->name;
    filter.created_after_ms = a->created_after_ms;
    filter.created_before_ms = a->created_before_ms;
    char *after = NULL;
    if (a->cursor != NULL) {
        after = ui_ref_decode(a->cursor);
        if (after == NULL)
            return ui_send_error(r, 400, "bad_argument",
                                 "cursor: not a cursor this API returned");
    }
    /* limit rows and one more, which decides next_cursor */
    list_page pg = {json_array(), a->limit, 0, 0,  NULL,
                    a->attention, 0,        0, {0}};
    size_t rows_read = 0;
    int rc = none ? DURO_OK
                  : each_listed(r->srv->client, filter, after, a->id_prefix,
                                a->limit + 1, page_add, &pg, &rows_read);
    free(after);
    uint64_t counted = 0;
    if (rc == DURO_OK && a->count && !none) {
        /* counted from the prefix's start, up to COUNT_CAP */
        list_page all = {NULL, 0, 0, 0, NULL, a->attention, 1, 0, {0}};
        size_t more_rows = 0;
        rc = each_listed(r->srv->client, filter, NULL, a->id_prefix, PAGE_MAX,
                         page_add, &all, &more_rows);
        rows_read += more_rows;
        counted = all.counted;
        free(all.last);
    }
    if (rc != DURO_OK) {
        free(pg.last);
        json_decref(pg.items);
        return ui_send_rc(r, rc, "listing instances");
    }
    json_t *doc = json_object();
    jset(doc, "instances", pg.items);
    if (pg.more && pg.last != NULL) {
        char *cursor = ui_ref_encode(pg.last, strlen(pg.last));
        jset(doc, "next_cursor", jstr(cursor));
        free(cursor);
    } else {
        jset(doc, "next_cursor", json_null());
    }
    free(pg.last);
    if (a->count) {
        jset(doc, "total",
             jint((int64_t)(counted > COUNT_CAP ? COUNT_CAP : counted)));
        jset(doc, "total_capped", json_boolean(counted > COUNT_CAP));
    }
    return send_listing(r, doc, rows_read);
}

/* The next_cursor after the first @p n rows of the query @p q from
 * @p cursor (NULL: the start): the cursor after a row amid a page. Caller
 * frees; *@p out NULL when none. */
static int cursor_after(duro_client *c, duro_instance_query q,
                        const char *cursor, size_t n, char **out)
{
    q.cursor = cursor;
    q.limit = n;
    q.count_total = 0;
    duro_instance_page *pg = NULL;
    int rc = duro_client_query(c, &q, &pg);
    *out = NULL;
    if (rc == DURO_OK && pg->next_cursor != NULL) {
        *out = strdup(pg->next_cursor);
        if (*out == NULL)
            abort();
    }
    duro_instance_page_free(pg);
    return rc;
}

#define ATTENTION_BATCH 250 /* rows a query reads at once for attention=1 */

/* Without id_prefix: duro_client_query in the order asked. attention=1
 * reads the live and failed instances in batches and keeps those that
 * need attention; its next_cursor is the query's cursor after the last
 * row kept (cursor_after), so no row is skipped or repeated. */
static int list_by_query(ui_request *r, const list_args *a)
{
    duro_client *c = r->srv->client;
    int none;
    uint32_t mask = mask_of(a, &none);
    duro_instance_query q = query_of(a, mask);
    json_t *items = json_array();
    char *next = NULL;
    size_t rows_read = 0;
    int rc = DURO_OK;
    if (!none && !a->attention) {
        q.limit = a->limit;
        q.cursor = a->cursor;
        duro_instance_page *pg = NULL;
        rc = duro_client_query(c, &q, &pg);
        if (rc == DURO_OK) {
            for (size_t i = 0; i < pg->count; i++)
                json_array_append_new(items, instance_json(&pg->items[i], 1));
            rows_read = pg->count;
            if (pg->next_cursor != NULL &&
                (next = strdup(pg->next_cursor)) == NULL)
                abort();
        }
        duro_instance_page_free(pg);
    } else if (!none) {
        char *from = a->cursor != NULL ? strdup(a->cursor) : NULL;
        char *kept_from = NULL; /* the batch of the last row kept */
        size_t kept_at = 0, taken = 0;
        int more = 0;
        while (rc == DURO_OK && !more) {
            q.cursor = from;
            q.limit = ATTENTION_BATCH;
            duro_instance_page *pg = NULL;
            rc = duro_client_query(c, &q, &pg);
            if (rc != DURO_OK)
                break;
            rows_read += pg->count;
            for (size_t i = 0; i < pg->count && !more; i++) {
                if (!needs_attention(&pg->items[i]))
                    continue;
                if (taken == a->limit) {
                    more = 1; /* one more matches: there is a next page */
                    break;
                }
                json_array_append_new(items, instance_json(&pg->items[i], 1));
                taken++;
                free(kept_from);
                kept_from = from != NULL ? strdup(from) : NULL;
                kept_at = i + 1;
            }
            char *after =
                pg->next_cursor != NULL ? strdup(pg->next_cursor) : NULL;
            duro_instance_page_free(pg);
            free(from);
            from = after;
            if (from == NULL)
                break;
        }
        free(from);
        if (rc == DURO_OK && more)
            rc = cursor_after(c, q, kept_from, kept_at, &next);
        free(kept_from);
    }
    int64_t total = 0;
    if (rc == DURO_OK && a->count)
        rc = count_query(c, a, 0, &total);
    if (rc != DURO_OK) {
        free(next);
        json_decref(items);
        return ui_send_rc(r, rc, "listing instances");
    }
    json_t *doc = json_object();
    jset(doc, "instances", items);
    jset(doc, "next_cursor", next != NULL ? jstr(next) : json_null());
    free(next);
    if (a->count) {
        jset(doc, "total", jint(total));
        jset(doc, "total_capped", json_false());
    }
    return send_listing(r, doc, rows_read);
}

static const char *const list_known[] = {
    "status", "name",          "name_prefix",    "name_contains", "id_prefix",
    "parent", "created_after", "created_before", "attention",     "order",
    "limit",  "cursor",        "count",          "version",       NULL};

static int get_instances(ui_request *r, json_t *body)
{
    (void)body;
    int rc = 0;
    list_args a;
    if (ui_known_args(r, list_known, &rc) != 0 ||
        parse_list_args(r, 1, &a, &rc) != 0)
        return rc;
    rc = a.id_prefix != NULL ? list_by_prefix(r, &a) : list_by_query(r, &a);
    free(a.parent);
    return rc;
}

/* GET counts: the instances of each status the filter selects (the
 * list's filter but status), for the page's counts. */
static int get_counts(ui_request *r, json_t *body)
{
    (void)body;
    static const char *const known[] = {"name",           "name_prefix",
                                        "name_contains",  "id_prefix",
                                        "parent",         "created_after",
                                        "created_before", "attention",
                                        "version",        NULL};
    int rc = 0;
    list_args a;
    if (ui_known_args(r, known, &rc) != 0 ||
        parse_list_args(r, 0, &a, &rc) != 0)
        return rc;
    uint64_t by[DURO_STATUS_TERMINATED + 1] = {0};
    int capped = 0;
    int drc = DURO_OK;
    size_t rows_read = 0;
    if (a.id_prefix != NULL) {
        /* by listing the prefix's range, up to COUNT_CAP */
        int none;
        duro_instance_filter filter = {0};
        filter.status_mask = mask_of(&a, &none);
        filter.name = a.name;
        filter.created_after_ms = a.created_after_ms;
        filter.created_before_ms = a.created_before_ms;
        list_page all = {NULL, 0, 0, 0, NULL, a.attention, 1, 0, {0}};
        if (!none)
            drc = each_listed(r->srv->client, filter, NULL, a.id_prefix,
                              PAGE_MAX, page_add, &all, &rows_read);
        free(all.last);
        memcpy(by, all.by, sizeof(by));
        capped = all.counted > COUNT_CAP;
    } else if (a.name_prefix == NULL && a.name_contains == NULL &&
               a.parent == NULL && a.version == NULL &&
               a.created_after_ms == 0 && a.created_before_ms == 0 &&
               !a.attention) {
        /* no filter, or an exact name: the store's counts */
        duro_store_stats *st = NULL;
        drc = duro_client_store_stats(r->srv->client, &st);
        for (size_t i = 0; drc == DURO_OK && i < st->instance_count; i++) {
            int s = st->instances[i].status;
            if ((a.name == NULL ||
                 strcmp(st->instances[i].name, a.name) == 0) &&
                s >= 0 && s <= DURO_STATUS_TERMINATED)
                by[s] += st->instances[i].count;
        }
        duro_free(st);
    } else {
        for (int s = 1; drc == DURO_OK && s <= DURO_STATUS_TERMINATED; s++) {
            if (s == DURO_STATUS_CONTINUED_AS_NEW)
                continue;
            int64_t n = 0;
            drc = count_query(r->srv->client, &a, BIT(s), &n);
            by[s] = (uint64_t)n;
        }
    }
    free(a.parent);
    if (drc != DURO_OK)
        return ui_send_rc(r, drc, "counting instances");
    json_t *counts = json_object();
    uint64_t total = 0;
    for (int s = 1; s <= DURO_STATUS_TERMINATED; s++) {
        if (s == DURO_STATUS_CONTINUED_AS_NEW)
            continue;
        jset(counts, status_word(s), jint((int64_t)by[s]));
        total += by[s];
    }
    json_t *doc = json_object();
    jset(doc, "counts", counts);
    jset(doc, "total", jint((int64_t)(capped ? COUNT_CAP : total)));
    jset(doc, "total_capped", json_boolean(capped));
    return send_listing(r, doc, rows_read);
}

/* The action words of the control events, by kind. */
static const struct {
    const char *word;
    int kind;
} control_kinds[] = {
    {"cancel", DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED},
    {"terminate", DURO_EVENT_ORCHESTRATION_TERMINATED},
    {"suspend", DURO_EVENT_EXECUTION_SUSPENDED},
    {"resume", DURO_EVENT_EXECUTION_RESUMED},
};

/* GET control-events: the operators' requests across instances, newest
 * first (duro_client_control_events), paged by next_cursor. */
static int get_control_events(ui_request *r, json_t *body)
{
    (void)body;
    static const char *const known[] = {
        "action", "requested_by", "since", "until", "limit", "cursor", NULL};
    int rc = 0;
    if (ui_known_args(r, known, &rc) != 0)
        return rc;
    duro_control_event_query q;
    duro_control_event_query_init(&q);
    for (const char *t = ui_arg(r, "action"); t != NULL && *t;) {
        size_t len = strcspn(t, ","), k = 0;
        while (k < 4 && (strlen(control_kinds[k].word) != len ||
                         strncmp(control_kinds[k].word, t, len) != 0))
            k++;
        if (k == 4)
            return ui_send_error(r, 400, "bad_argument",
                                 "action: a comma-separated list of cancel, "
                                 "terminate, suspend, resume");
        q.kind_mask |= 1u << control_kinds[k].kind;
        t += len + (t[len] == ',');
    }
    uint64_t limit;
    if (ui_arg_uint(r, "limit", 50, PAGE_MAX, &limit, &rc) != 0)
        return rc;
    q.limit = limit == 0 ? 50 : (size_t)limit;
    q.requested_by = ui_arg(r, "requested_by");
    q.cursor = ui_arg(r, "cursor");
    if (parse_time(ui_arg(r, "since"), &q.since_ms) != 0 ||
        parse_time(ui_arg(r, "until"), &q.until_ms) != 0)
        return ui_send_error(r, 400, "bad_argument",
                             "since/until: milliseconds since the epoch or "
                             "RFC 3339 UTC (2026-05-01T12:00:00Z)");
    duro_control_event_list *list = NULL;
    int drc = duro_client_control_events(r->srv->client, &q, &list);
    if (drc != DURO_OK)
        return ui_send_rc(r, drc, "reading the control requests");
    json_t *events = json_array();
    for (size_t i = 0; i < list->count; i++) {
        const duro_control_event *e = &list->items[i];
        const char *word = "?";
        for (size_t k = 0; k < 4; k++)
            if (control_kinds[k].kind == e->kind)
                word = control_kinds[k].word;
        json_t *o = json_object();
        char *ref = ui_ref_encode(e->instance_id, strlen(e->instance_id));
        jset(o, "id", jstr(e->instance_id));
        jset(o, "ref", jstr(ref));
        free(ref);
        jset(o, "name", jstr(e->name));
        jset(o, "action", jstr(word));
        jset(o, "kind", jstr(duro_event_kind_name(e->kind)));
        jset(o, "execution_id", jint((int64_t)e->execution_id));
        jset(o, "event_id", jint((int64_t)e->event_id));
        jset_time(o, "at", e->timestamp_ms);
        jset(o, "reason", jstr(e->reason));
        jset(o, "requested_by", jstr(e->requested_by));
        jset(
            o, "observed",
            json_boolean(e->kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED &&
                         (e->flags & DURO_CANCEL_OBSERVED)));
        jset(o, "before_start",
             json_boolean(e->kind == DURO_EVENT_EXECUTION_SUSPENDED &&
                          (e->flags & DURO_SUSPEND_BEFORE_START)));
        json_array_append_new(events, o);
    }
    json_t *doc = json_object();
    jset(doc, "events", events);
    jset(doc, "next_cursor",
         list->next_cursor != NULL ? jstr(list->next_cursor) : json_null());
    duro_control_event_list_free(list);
    return ui_send_json(r, 200, doc);
}

static int get_instance(ui_request *r, json_t *body)
{
    (void)body;
    int rc = 0;
    char *id = ui_need_ref(r, ui_arg(r, "ref"), "an instance", &rc);
    if (id == NULL)
        return rc;
    duro_instance_info *info = NULL;
    int drc = duro_client_get_status(r->srv->client, id, &info);
    if (drc != DURO_OK)
        rc = ui_send_rc(r, drc, "reading the instance");
    else if (info->status == DURO_STATUS_NOT_FOUND)
        rc = ui_send_error(r, 404, "not_found", "no such instance");
    else
        rc = ui_send_json(r, 200, instance_json(info, 0));
    duro_free(info);
    free(id);
    return rc;
}

/* 1 when instance @p id exists and has no execution yet (Pending, its
 * first turn not run). */
static int never_ran(ui_request *r, const char *id)
{
    duro_instance_info *info = NULL;
    int yes = duro_client_get_status(r->srv->client, id, &info) == DURO_OK &&
              info->status != DURO_STATUS_NOT_FOUND && info->execution_id == 0;
    duro_free(info);
    return yes;
}

static int get_history(ui_request *r, json_t *body)
{
    (void)body;
    int rc = 0;
    uint64_t execution, after, limit;
    if (ui_arg_uint(r, "execution", 0, UINT64_MAX / 2, &execution, &rc) != 0 ||
        ui_arg_uint(r, "after", 0, UINT64_MAX / 2, &after, &rc) != 0 ||
        ui_arg_uint(r, "limit", PAGE_MAX, PAGE_MAX, &limit, &rc) != 0)
        return rc;
    if (limit == 0)
        limit = PAGE_MAX;
    char *id = ui_need_ref(r, ui_arg(r, "ref"), "an instance", &rc);
    if (id == NULL)
        return rc;
    duro_history *h = NULL;
    int drc = duro_client_read_history(r->srv->client, id, execution, &h);
    if (drc == DURO_NOT_FOUND && execution == 0 && never_ran(r, id)) {
        /* Pending, its first turn not run: no execution, no events yet
         * (as duro history says), not an error. */
        json_t *doc = json_object();
        jset(doc, "ref", jstr(ui_arg(r, "ref")));
        jset(doc, "instance_id", jstr(id));
        jset(doc, "execution_id", jint(0));
        jset(doc, "events", json_array());
        jset(doc, "next_after", json_null());
        free(id);
        return ui_send_json(r, 200, doc);
    }
    if (drc != DURO_OK) {
        free(id);
        return ui_send_rc(r, drc, "reading the history");
    }
    int64_t start = h->count > 0 ? h->events[0].timestamp_ms : 0;
    /* who decided a cancellation, as duro history --json says */
    duro_instance_info *info = NULL;
    if (duro_client_get_status(r->srv->client, id, &info) != DURO_OK) {
        duro_free(info);
        info = NULL;
    }
    const char *requester, *terminator;
    history_deciders(h, info != NULL ? info->cancelled_by : NULL, &requester,
                     &terminator);
    json_t *events = json_array();
    uint64_t last = 0;
    size_t n = 0, i = 0;
    for (; i < h->count && n < limit; i++) {
        if (h->events[i].event_id <= after)
            continue;
        /* payload and error cut to PREVIEW_MAX bytes: the whole payload
         * is GET /api/v1/payload's */
        const duro_event *e = &h->events[i];
        duro_event bare = *e;
        bare.payload = NULL;
        bare.error = NULL;
        json_t *o = json_event(&bare, start, requester, terminator);
        if (e->payload != NULL)
            set_preview(o, "payload", e->payload, PREVIEW_MAX, 1);
        if (e->error != NULL)
            set_preview(o, "error", e->error, PREVIEW_MAX, 0);
        json_array_append_new(events, o);
        last = h->events[i].event_id;
        n++;
    }
    int more = 0;
    for (; i < h->count; i++)
        more |= h->events[i].event_id > after;
    json_t *doc = json_object();
    jset(doc, "ref", jstr(ui_arg(r, "ref")));
    jset(doc, "instance_id", jstr(id));
    jset(doc, "execution_id", jint((int64_t)h->execution_id));
    jset(doc, "events", events);
    jset(doc, "next_after", more ? jint((int64_t)last) : json_null());
    duro_free(info);
    duro_history_free(h);
    free(id);
    return ui_send_json(r, 200, doc);
}

/* @p text whole as a text/plain attachment named @p file (never rendered
 * by the browser). */
static int send_attachment(ui_request *r, const char *text, const char *file)
{
    struct MHD_Response *resp =
        ui_response(text, strlen(text), "text/plain; charset=utf-8", 1);
    if (resp != NULL) {
        char disposition[96];
        snprintf(disposition, sizeof(disposition),
                 "attachment; filename=\"%s\"", file);
        MHD_add_response_header(resp, "Content-Disposition", disposition);
    }
    return ui_queue(r, 200, resp);
}

/* payload?ref=&event=[&execution=]: one event's payload, whole;
 * payload?ref=&field=F: the instance's whole input (its current
 * execution's, or &execution='s: the payload of its ExecutionStarted
 * event), output, custom_status or error, of which the instance object
 * carries previews. */
static int get_payload(ui_request *r, json_t *body)
{
    (void)body;
    static const char *const fields[] = {"input", "output", "custom_status",
                                         "error", NULL};
    int rc = 0;
    uint64_t execution, event;
    if (ui_arg_uint(r, "execution", 0, UINT64_MAX / 2, &execution, &rc) != 0 ||
        ui_arg_uint(r, "event", 0, UINT64_MAX / 2, &event, &rc) != 0)
        return rc;
    const char *field = ui_arg(r, "field");
    size_t f = 0;
    while (field != NULL && fields[f] != NULL && strcmp(fields[f], field) != 0)
        f++;
    if ((event == 0) == (field == NULL) || (field != NULL && fields[f] == NULL))
        return ui_send_error(r, 400, "bad_argument",
                             "one of event (an event_id) or field (input, "
                             "output, custom_status, error)");
    if (field != NULL && f > 0 && execution != 0)
        return ui_send_error(r, 400, "bad_argument",
                             "execution: only with event or field=input (the "
                             "instance's output, custom status and error are "
                             "its current execution's)");
    char *id = ui_need_ref(r, ui_arg(r, "ref"), "an instance", &rc);
    if (id == NULL)
        return rc;
    char file[64];
    if (field != NULL && f > 0) {
        duro_instance_info *info = NULL;
        int drc = duro_client_get_status(r->srv->client, id, &info);
        const char *text = drc != DURO_OK ? NULL
                           : f == 1       ? info->output
                           : f == 2       ? info->custom_status
                                          : info->error;
        if (drc != DURO_OK)
            rc = ui_send_rc(r, drc, "reading the instance");
        else if (info->status == DURO_STATUS_NOT_FOUND)
            rc = ui_send_error(r, 404, "not_found", "no such instance");
        else if (text == NULL)
            rc = ui_send_error(r, 404, "not_found", "it has no %s", field);
        else {
            snprintf(file, sizeof(file), "%s.txt", field);
            rc = send_attachment(r, text, file);
        }
        duro_free(info);
        free(id);
        return rc;
    }
    duro_history *h = NULL;
    int drc = duro_client_read_history(r->srv->client, id, execution, &h);
    if (drc == DURO_NOT_FOUND && field != NULL && execution == 0 &&
        never_ran(r, id)) {
        free(id);
        return ui_send_error(r, 404, "not_found",
                             "it has not started: no runtime has taken its "
                             "first turn, which records its input");
    }
    free(id);
    if (drc != DURO_OK)
        return ui_send_rc(r, drc, "reading the history");
    const duro_event *e = NULL;
    for (size_t i = 0; i < h->count && e == NULL; i++)
        if (field != NULL
                ? h->events[i].kind == DURO_EVENT_ORCHESTRATION_STARTED
                : h->events[i].event_id == event)
            e = &h->events[i];
    if (e == NULL || e->payload == NULL) {
        duro_history_free(h);
        return ui_send_error(r, 404, "not_found",
                             field != NULL
                                 ? "it has no input"
                                 : "no such event, or it has no payload");
    }
    if (field != NULL)
        snprintf(file, sizeof(file), "input.txt");
    else
        snprintf(file, sizeof(file), "payload-%llu.txt",
                 (unsigned long long)event);
    rc = send_attachment(r, e->payload, file);
    duro_history_free(h);
    return rc;
}

static int get_metrics(ui_request *r, json_t *body)
{
    (void)body;
    duro_store_stats *st = NULL;
    int rc = duro_client_store_stats(r->srv->client, &st);
    if (rc != DURO_OK)
        return ui_send_rc(r, rc, "reading the store's statistics");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        duro_free(st);
        return ui_send_error(r, 500, "nomem", "out of memory");
    }
    metrics_write_text(f, st);
    fclose(f);
    duro_free(st);
    struct MHD_Response *resp =
        ui_response(text, len, "text/plain; version=0.0.4; charset=utf-8", 1);
    free(text);
    return ui_queue(r, 200, resp);
}

/* ---- actions ------------------------------------------------------------- */

static const char *control_name(int control)
{
    switch (control) {
    case DURO_CONTROL_TERMINATE:
        return "terminate";
    case DURO_CONTROL_SUSPEND:
        return "suspend";
    case DURO_CONTROL_RESUME:
        return "resume";
    default:
        return "cancel";
    }
}

/* The default reason of @p control from duro ui ("cancelled from duro ui"). */
static const char *default_reason(int control)
{
    switch (control) {
    case DURO_CONTROL_TERMINATE:
        return "terminated from duro ui";
    case DURO_CONTROL_SUSPEND:
        return "suspended from duro ui";
    case DURO_CONTROL_RESUME:
        return "resumed from duro ui";
    default:
        return "cancelled from duro ui";
    }
}

/* cancel, terminate, suspend, resume {ref, reason}: one id through
 * duro_client_cancel_many / duro_client_control_many, as the CLI. */
static int post_control(ui_request *r, json_t *body, int control)
{
    static const char *const body_keys[] = {"ref", "reason", NULL};
    int rc = 0;
    const char *ref, *reason;
    if (ui_known_keys(r, body, "body", body_keys, &rc) != 0 ||
        ui_body_text(r, body, "", "ref", &ref, &rc) != 0 ||
        ui_body_text(r, body, "", "reason", &reason, &rc) != 0)
        return rc;
    char *id = ui_need_ref(r, ref, "an instance", &rc);
    if (id == NULL)
        return rc;
    const char *verb = control_name(control);
    if (reason == NULL)
        reason = default_reason(control);
    const char *const ids[1] = {id};
    int outcome = 0, status = 0, drc;
    const char *name;
    if (control == 0) {
        duro_cancel_result res = {0};
        drc = duro_client_cancel_many(r->srv->client, ids, 1, reason,
                                      r->who->requester, &res);
        outcome = res.outcome;
        status = res.status;
        name = duro_cancel_outcome_name(outcome);
    } else {
        duro_control_result res = {0};
        drc = duro_client_control_many(r->srv->client, control, ids, 1, reason,
                                       r->who->requester, &res);
        outcome = res.outcome;
        status = res.status;
        name = duro_control_outcome_name(outcome);
    }
    if (drc != DURO_OK) {
        free(id);
        return ui_send_rc(r, drc, verb);
    }
    ui_log_action(r, verb, id, name);
    int not_found = control == 0 ? outcome == DURO_CANCEL_NOT_FOUND
                                 : outcome == DURO_CONTROL_OUTCOME_NOT_FOUND;
    int finished = control == 0 ? outcome == DURO_CANCEL_NOT_CANCELLABLE
                                : outcome == DURO_CONTROL_OUTCOME_FINISHED &&
                                      !(control == DURO_CONTROL_TERMINATE &&
                                        status == DURO_STATUS_TERMINATED);
    if (not_found) {
        free(id);
        return ui_send_error(r, 404, "not_found", "no such instance");
    }
    if (finished) {
        free(id);
        return ui_send_error(r, 409, "invalid_state",
                             "it has finished (%s); nothing to %s",
                             status_word(status), verb);
    }
    json_t *doc = json_object();
    jset(doc, "ref", jstr(ref));
    jset(doc, "id", jstr(id));
    jset(doc, "outcome", jstr(name));
    jset(doc, "status", jstr(status_word(status)));
    jset(doc, "requested_by", jstr(r->who->requester));
    jset(doc, "reason", jstr(reason));
    free(id);
    return ui_send_json(r, 200, doc);
}

static int post_cancel(ui_request *r, json_t *body)
{
    return post_control(r, body, 0);
}
static int post_terminate(ui_request *r, json_t *body)
{
    return post_control(r, body, DURO_CONTROL_TERMINATE);
}
static int post_suspend(ui_request *r, json_t *body)
{
    return post_control(r, body, DURO_CONTROL_SUSPEND);
}
static int post_resume(ui_request *r, json_t *body)
{
    return post_control(r, body, DURO_CONTROL_RESUME);
}

/* raise-event {ref, name, payload, event_id}: event_id (optional) raises
 * it once per id (duro_client_raise_event_once); a JSON string is stored as
 * its text
 * (the page sends the JSON typed as a string: "hello" typed is stored as
 * "hello", quotes included), any other JSON value as its compact JSON;
 * absent or null: no payload. */
static int post_raise(ui_request *r, json_t *body)
{
    static const char *const body_keys[] = {"ref", "name", "payload",
                                            "event_id", NULL};
    int rc = 0;
    const char *ref, *name, *event_id;
    if (ui_known_keys(r, body, "body", body_keys, &rc) != 0 ||
        ui_body_text(r, body, "", "ref", &ref, &rc) != 0 ||
        ui_body_text(r, body, "", "name", &name, &rc) != 0 ||
        ui_body_text(r, body, "", "event_id", &event_id, &rc) != 0)
        return rc;
    if (name == NULL)
        return ui_send_error(r, 400, "bad_argument", "name is required");
    char *id = ui_need_ref(r, ref, "an instance", &rc);
    if (id == NULL)
        return rc;
    json_t *p = json_object_get(body, "payload");
    char *payload = NULL;
    if (json_is_string(p))
        payload = strndup(json_string_value(p), json_string_length(p));
    else if (p != NULL && !json_is_null(p))
        payload = json_dumps(p, JSON_COMPACT | JSON_ENCODE_ANY);
    if (payload != NULL &&
        strlen(payload) !=
            (json_is_string(p) ? json_string_length(p) : strlen(payload))) {
        free(payload);
        free(id);
        return ui_send_error(r, 400, "bad_argument", "payload holds a NUL");
    }
    int drc = duro_client_raise_event_once(r->srv->client, id, name, payload,
                                           event_id);
    free(payload);
    if (drc != DURO_OK) {
        free(id);
        return ui_send_rc(r, drc, "raising the event");
    }
    ui_log_action(r, "raise-event", id, "raised");
    json_t *doc = json_object();
    jset(doc, "ref", jstr(ref));
    jset(doc, "id", jstr(id));
    jset(doc, "raised", jstr(name));
    free(id);
    return ui_send_json(r, 200, doc);
}

/* An id of the body (to_event_id, execution_id): absent or 0 is 0 (the
 * default), else a positive integer; anything else queues 400 naming the
 * key and returns -1. */
static int body_id(ui_request *r, json_t *body, const char *key, uint64_t *out,
                   int *rc)
{
    json_t *v = json_object_get(body, key);
    *out = 0;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "%s must be an integer of at least 0 (leave it "
                            "out, or 0, for the default)",
                            key);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* reset {ref, execution_id, to_event_id, deadline_ms, reason, dry_run} and
 * rewind {ref, execution_id, deadline_ms, reason, dry_run}: one id through
 * duro_client_reset /
 * duro_client_rewind, as `duro reset` and `duro rewind`; deadline_ms is
 * duro_reset_options' (0 or absent: the instance's own, -1: none, else a
 * new one, ms since the epoch); execution_id is
 * the execution the caller looked at (a page's dry run), so that an apply
 * another reset overtook is refused rather than done to a newer one. A point
 * the library refuses (DURO_INVALID: inside a turn, a child without its result,
 * ...) is 409 with its message whole: the request was well formed, the history
 * is what refuses it, and the message names the points one may go to. */
static int post_reset_verb(ui_request *r, json_t *body, int rewind)
{
    static const char *const reset_keys[] = {
        "ref",    "execution_id", "to_event_id", "deadline_ms",
        "reason", "dry_run",      NULL};
    static const char *const rewind_keys[] = {
        "ref", "execution_id", "deadline_ms", "reason", "dry_run", NULL};
    int rc = 0;
    const char *ref, *reason;
    duro_reset_options o;
    duro_reset_options_init(&o);
    if (ui_known_keys(r, body, "body", rewind ? rewind_keys : reset_keys,
                      &rc) != 0 ||
        ui_body_text(r, body, "", "ref", &ref, &rc) != 0 ||
        ui_body_text(r, body, "", "reason", &reason, &rc) != 0 ||
        body_id(r, body, "to_event_id", &o.to_event_id, &rc) != 0 ||
        body_id(r, body, "execution_id", &o.execution_id, &rc) != 0)
        return rc;
    json_t *dj = json_object_get(body, "dry_run");
    if (dj != NULL && !json_is_boolean(dj))
        return ui_send_error(r, 400, "bad_argument",
                             "dry_run must be true or false");
    json_t *dl = json_object_get(body, "deadline_ms");
    if (dl != NULL && (!json_is_integer(dl) || json_integer_value(dl) < -1))
        return ui_send_error(r, 400, "bad_argument",
                             "deadline_ms must be 0 (the instance's own), -1 "
                             "(none) or a time in ms since the epoch");
    o.deadline_ms = dl != NULL ? (int64_t)json_integer_value(dl) : 0;
    char *id = ui_need_ref(r, ref, "an instance", &rc);
    if (id == NULL)
        return rc;
    const char *verb = rewind ? "rewind" : "reset";
    o.reason = reason != NULL ? reason
               : rewind       ? "rewound from duro ui"
                              : "reset from duro ui";
    o.requested_by = r->who->requester;
    o.dry_run = json_is_true(dj);
    duro_reset_result res = {0};
    int drc = rewind ? duro_client_rewind(r->srv->client, id, &o, &res)
                     : duro_client_reset(r->srv->client, id, &o, &res);
    if (drc == DURO_INVALID) {
        const char *detail = duro_errmsg();
        rc = ui_send_error(
            r, 409, "invalid", "%s: %s", verb,
            detail != NULL && *detail != '\0' ? detail : duro_strerror(drc));
        free(id);
        return rc;
    }
    if (drc != DURO_OK) {
        free(id);
        return ui_send_rc(r, drc, verb);
    }
    if (!o.dry_run) {
        char what[96];
        snprintf(what, sizeof(what),
                 "to event %llu of execution %llu; execution %llu",
                 (unsigned long long)res.to_event_id,
                 (unsigned long long)res.from_execution,
                 (unsigned long long)res.execution_id);
        ui_log_action(r, verb, id, what);
    }
    json_t *doc = json_object();
    jset(doc, "ref", jstr(ref));
    jset(doc, "id", jstr(id));
    jset(doc, "dry_run", json_boolean(o.dry_run));
    jset(doc, "was", jstr(status_word(res.status)));
    jset(doc, "from_execution", jint((int64_t)res.from_execution));
    jset(doc, "execution_id", jint((int64_t)res.execution_id));
    jset(doc, "to_event_id", jint((int64_t)res.to_event_id));
    jset(doc, "activities", jint(res.activities));
    jset(doc, "timers", jint(res.timers));
    jset(doc, "children", jint(res.children));
    jset(doc, "requested_by", jstr(r->who->requester));
    jset(doc, "reason", jstr(o.reason));
    free(id);
    return ui_send_json(r, 200, doc);
}

static int post_reset(ui_request *r, json_t *body)
{
    return post_reset_verb(r, body, 0);
}
static int post_rewind(ui_request *r, json_t *body)
{
    return post_reset_verb(r, body, 1);
}

/* bulk/cancel with filter.id_prefix: what cancel_matching does, over the
 * listing (the provider's bulk filter has no prefix): Pending and Running
 * instances with no cancellation requested yet, counted (dry run) or
 * cancelled with duro_client_cancel_many in batches. */
typedef struct prefix_bulk {
    ui_request *r;
    int dry_run;
    const char *reason;
    uint64_t by[2]; /* pending, running */
    json_t *sample;
    char *batch[DURO_BULK_BATCH_MAX];
    size_t count;
    uint64_t cancelled;
    int rc;
} prefix_bulk;

static int prefix_flush(prefix_bulk *b)
{
    if (b->count == 0)
        return 0;
    duro_cancel_result res[DURO_BULK_BATCH_MAX];
    memset(res, 0, sizeof(res));
    b->rc = duro_client_cancel_many(b->r->srv->client,
                                    (const char *const *)b->batch, b->count,
                                    b->reason, b->r->who->requester, res);
    for (size_t i = 0; i < b->count; i++) {
        b->cancelled +=
            b->rc == DURO_OK && (res[i].outcome == DURO_CANCEL_REQUESTED ||
                                 res[i].outcome == DURO_CANCEL_CANCELLED);
        free(b->batch[i]);
    }
    b->count = 0;
    return b->rc != DURO_OK;
}

static int prefix_one(const duro_instance_info *info, void *arg)
{
    prefix_bulk *b = arg;
    if (info->cancel_requested_ms != 0)
        return 0; /* cancelling already: cancel_matching skips it too */
    if (b->dry_run) {
        b->by[info->status == DURO_STATUS_RUNNING]++;
        if (json_array_size(b->sample) < 20) {
            json_t *o = json_object();
            char *ref =
                ui_ref_encode(info->instance_id, strlen(info->instance_id));
            jset(o, "id", jstr(info->instance_id));
            jset(o, "ref", jstr(ref));
            free(ref);
            json_array_append_new(b->sample, o);
        }
        return 0;
    }
    b->batch[b->count] = strdup(info->instance_id);
    if (b->batch[b->count] == NULL)
        abort();
    if (++b->count == DURO_BULK_BATCH_MAX)
        return prefix_flush(b);
    return 0;
}

/* The sample of a dry run: ids and refs of @p res, up to 20 in all. */
static void sample_add(json_t *sample, const duro_bulk_result *res)
{
    for (size_t i = 0; i < res->id_count && json_array_size(sample) < 20; i++) {
        json_t *o = json_object();
        char *ref = ui_ref_encode(res->ids[i], strlen(res->ids[i]));
        jset(o, "id", jstr(res->ids[i]));
        jset(o, "ref", jstr(ref));
        free(ref);
        json_array_append_new(sample, o);
    }
}

/* bulk/cancel {filter:{name, status, created_after_ms, created_before_ms,
 * id_prefix}, reason, dry_run | as_of_ms}. */
static int post_bulk_cancel(ui_request *r, json_t *body)
{
    static const char *const body_keys[] = {"filter", "reason", "dry_run",
                                            "as_of_ms", NULL};
    static const char *const filter_keys[] = {
        "name",      "status", "created_after_ms", "created_before_ms",
        "id_prefix", NULL};
    int rc = 0;
    json_t *f = json_object_get(body, "filter");
    if (ui_known_keys(r, body, "body", body_keys, &rc) != 0)
        return rc;
    if (f != NULL && !json_is_object(f))
        return ui_send_error(r, 400, "bad_argument",
                             "filter must be an object");
    if (f != NULL && ui_known_keys(r, f, "filter", filter_keys, &rc) != 0)
        return rc;
    duro_bulk_filter filter = {0};
    const char *prefix, *reason;
    if (ui_body_text(r, f, "filter.", "name", &filter.name, &rc) != 0 ||
        ui_body_text(r, f, "filter.", "id_prefix", &prefix, &rc) != 0 ||
        ui_body_text(r, body, "", "reason", &reason, &rc) != 0)
        return rc;
    json_t *st = json_object_get(f, "status");
    if (json_is_array(st) && json_array_size(st) == 0)
        return ui_send_error(r, 400, "bad_argument",
                             "filter.status is empty (leave it out for "
                             "pending and running)");
    if (json_is_array(st)) {
        size_t i;
        json_t *w;
        json_array_foreach(st, i, w)
        {
            if (!json_is_string(w) ||
                status_bit(json_string_value(w), json_string_length(w),
                           &filter.status_mask) != 0)
                return ui_send_error(r, 400, "bad_argument",
                                     "filter.status: status words");
        }
    } else if (st != NULL) {
        return ui_send_error(r, 400, "bad_argument",
                             "filter.status must be an array");
    }
    if ((filter.status_mask &
         ~(BIT(DURO_STATUS_PENDING) | BIT(DURO_STATUS_RUNNING))) != 0)
        return ui_send_error(r, 400, "bad_argument",
                             "only pending and running instances can be "
                             "cancelled");
    json_t *ca = json_object_get(f, "created_after_ms"),
           *cb = json_object_get(f, "created_before_ms");
    if ((ca && !json_is_integer(ca)) || (cb && !json_is_integer(cb)))
        return ui_send_error(r, 400, "bad_argument",
                             "filter.created_after_ms/created_before_ms: "
                             "integers");
    filter.created_after_ms = ca ? json_integer_value(ca) : 0;
    filter.created_before_ms = cb ? json_integer_value(cb) : 0;
    json_t *dj = json_object_get(body, "dry_run");
    if (dj != NULL && !json_is_boolean(dj))
        return ui_send_error(r, 400, "bad_argument",
                             "dry_run must be true or false");
    int dry_run = json_is_true(dj);
    json_t *as_of = json_object_get(body, "as_of_ms");
    if (reason == NULL)
        reason = default_reason(0);
    int64_t bound;
    if (dry_run) {
        duro_store_stats *now = NULL;
        int64_t now_ms = duro_now_ms();
        if (duro_client_store_stats(r->srv->client, &now) == DURO_OK)
            now_ms = now->now_ms;
        duro_free(now);
        bound = now_ms + 1;
    } else if (!json_is_integer(as_of) || json_integer_value(as_of) <= 0) {
        return ui_send_error(r, 400, "bad_argument",
                             "as_of_ms is required to apply: the as_of_ms "
                             "of a dry run (only instances created before "
                             "it are cancelled)");
    } else {
        bound = json_integer_value(as_of);
    }
    /* Only instances created before the preview's moment: what is started
     * between the preview and the apply is not touched. */
    if (filter.created_before_ms == 0 || filter.created_before_ms > bound)
        filter.created_before_ms = bound;

    int words[] = {DURO_STATUS_PENDING, DURO_STATUS_RUNNING};
    uint64_t by[2] = {0, 0}, done = 0;
    json_t *sample = json_array();
    int drc = DURO_OK;
    if (prefix != NULL) {
        duro_instance_filter lf = {0};
        lf.status_mask = filter.status_mask ? filter.status_mask
                                            : BIT(DURO_STATUS_PENDING) |
                                                  BIT(DURO_STATUS_RUNNING);
        lf.name = filter.name;
        lf.created_after_ms = filter.created_after_ms;
        lf.created_before_ms = filter.created_before_ms;
        prefix_bulk *b = calloc(1, sizeof(*b));
        if (b == NULL)
            abort();
        b->r = r;
        b->dry_run = dry_run;
        b->reason = reason;
        b->sample = sample;
        drc = each_listed(r->srv->client, lf, NULL, prefix, DURO_BULK_BATCH_MAX,
                          prefix_one, b, NULL);
        if (drc == DURO_OK && b->rc == DURO_OK)
            prefix_flush(b);
        if (drc == DURO_OK)
            drc = b->rc;
        for (size_t i = 0; i < b->count; i++)
            free(b->batch[i]);
        by[0] = b->by[0];
        by[1] = b->by[1];
        done = b->cancelled;
        free(b);
    } else {
        duro_bulk_options bo;
        duro_bulk_options_init(&bo);
        bo.dry_run = dry_run;
        bo.max_ids = dry_run ? 20 : 0;
        for (size_t k = 0; k < 2 && drc == DURO_OK; k++) {
            if (!dry_run && k > 0)
                break; /* one call applies to both statuses */
            duro_bulk_filter one = filter;
            if (dry_run) {
                if (filter.status_mask && !(filter.status_mask & BIT(words[k])))
                    continue;
                one.status_mask = BIT(words[k]);
            }
            duro_bulk_result *res = NULL;
            drc = duro_client_cancel_matching(r->srv->client, &one, reason,
                                              r->who->requester, &bo, &res);
            if (drc != DURO_OK)
                break;
            by[k] = res->count;
            done = res->count;
            sample_add(sample, res);
            duro_bulk_result_free(res);
        }
    }
    if (drc != DURO_OK) {
        json_decref(sample);
        return ui_send_rc(r, drc, dry_run ? "counting" : "cancelling");
    }
    json_t *doc = json_object();
    jset(doc, "dry_run", json_boolean(dry_run));
    if (dry_run) {
        json_t *bys = json_object();
        jset(bys, "pending", jint((int64_t)by[0]));
        jset(bys, "running", jint((int64_t)by[1]));
        jset(doc, "matched", jint((int64_t)(by[0] + by[1])));
        jset(doc, "by_status", bys);
        jset(doc, "sample", sample);
    } else {
        json_decref(sample);
        char what[64];
        snprintf(what, sizeof(what), "%llu cancelled",
                 (unsigned long long)done);
        ui_log_action(r, "bulk cancel",
                      prefix        ? prefix
                      : filter.name ? filter.name
                                    : "(any name)",
                      what);
        jset(doc, "cancelled", jint((int64_t)done));
    }
    jset(doc, "as_of_ms", jint(bound));
    return ui_send_json(r, 200, doc);
}

/* bulk/control {action, refs: [ref...], reason}: the selected instances,
 * at most DURO_BULK_BATCH_MAX, in one duro_client_cancel_many or
 * duro_client_control_many call (so one batch of transactions, as the
 * CLI's `duro cancel ID...`). Every ref is decoded before anything
 * changes: one bad ref refuses the whole request. */
static int post_bulk_control(ui_request *r, json_t *body)
{
    static const char *const body_keys[] = {"action", "refs", "reason", NULL};
    int rc = 0;
    const char *action, *reason;
    if (ui_known_keys(r, body, "body", body_keys, &rc) != 0 ||
        ui_body_text(r, body, "", "action", &action, &rc) != 0 ||
        ui_body_text(r, body, "", "reason", &reason, &rc) != 0)
        return rc;
    int control = -1;
    if (action != NULL && strcmp(action, "cancel") == 0)
        control = 0;
    else if (action != NULL && strcmp(action, "terminate") == 0)
        control = DURO_CONTROL_TERMINATE;
    else if (action != NULL && strcmp(action, "suspend") == 0)
        control = DURO_CONTROL_SUSPEND;
    else if (action != NULL && strcmp(action, "resume") == 0)
        control = DURO_CONTROL_RESUME;
    if (control < 0)
        return ui_send_error(r, 400, "bad_argument",
                             "action: cancel, terminate, suspend or resume");
    json_t *refs = json_object_get(body, "refs");
    size_t n = json_is_array(refs) ? json_array_size(refs) : 0;
    if (n == 0 || n > DURO_BULK_BATCH_MAX)
        return ui_send_error(r, 400, "bad_argument",
                             "refs: an array of 1 to %d refs",
                             DURO_BULK_BATCH_MAX);
    char **ids = calloc(n, sizeof(*ids));
    if (ids == NULL)
        abort();
    size_t got = 0;
    for (; got < n; got++) {
        json_t *v = json_array_get(refs, got);
        ids[got] =
            json_is_string(v) ? ui_ref_decode(json_string_value(v)) : NULL;
        if (ids[got] == NULL) {
            rc = ui_send_error(r, 400, "bad_argument",
                               "refs[%zu] is not base64url of an instance id",
                               got);
            break;
        }
    }
    duro_cancel_result *cres = NULL;
    duro_control_result *tres = NULL;
    int drc = DURO_OK;
    if (reason == NULL)
        reason = default_reason(control);
    if (got == n) {
        if (control == 0) {
            cres = calloc(n, sizeof(*cres));
            if (cres == NULL)
                abort();
            drc = duro_client_cancel_many(r->srv->client,
                                          (const char *const *)ids, n, reason,
                                          r->who->requester, cres);
        } else {
            tres = calloc(n, sizeof(*tres));
            if (tres == NULL)
                abort();
            drc = duro_client_control_many(r->srv->client, control,
                                           (const char *const *)ids, n, reason,
                                           r->who->requester, tres);
        }
        if (drc != DURO_OK)
            rc = ui_send_rc(r, drc, control_name(control));
    }
    if (got == n && drc == DURO_OK) {
        json_t *results = json_array();
        size_t changed = 0;
        for (size_t i = 0; i < n; i++) {
            int outcome = cres ? cres[i].outcome : tres[i].outcome;
            int status = cres ? cres[i].status : tres[i].status;
            changed += cres ? outcome == DURO_CANCEL_REQUESTED ||
                                  outcome == DURO_CANCEL_CANCELLED
                            : outcome == DURO_CONTROL_OUTCOME_REQUESTED ||
                                  outcome == DURO_CONTROL_OUTCOME_APPLIED;
            json_t *o = json_object();
            jset(o, "ref", jstr(json_string_value(json_array_get(refs, i))));
            jset(o, "id", jstr(ids[i]));
            jset(o, "outcome",
                 jstr(cres ? duro_cancel_outcome_name(outcome)
                           : duro_control_outcome_name(outcome)));
            jset(o, "status", jstr(status_word(status)));
            json_array_append_new(results, o);
        }
        char what[64];
        snprintf(what, sizeof(what), "%zu of %zu changed", changed, n);
        ui_log_action(r, control == 0 ? "bulk cancel" : "bulk control",
                      control == 0 ? "(selected)" : control_name(control),
                      what);
        json_t *doc = json_object();
        jset(doc, "action", jstr(control_name(control)));
        jset(doc, "requested_by", jstr(r->who->requester));
        jset(doc, "reason", jstr(reason));
        jset(doc, "changed", jint((int64_t)changed));
        jset(doc, "results", results);
        rc = ui_send_json(r, 200, doc);
    }
    for (size_t i = 0; i < got && i < n; i++)
        free(ids[i]);
    free(ids);
    free(cres);
    free(tres);
    return rc;
}

/* ---- the table ----------------------------------------------------------- */

static const ui_route routes[] = {
    {"GET", "/api/v1/summary", 0, get_summary, 0},
    {"GET", "/api/v1/instances", 0, get_instances, 0},
    {"GET", "/api/v1/counts", 0, get_counts, 0},
    {"GET", "/api/v1/control-events", 0, get_control_events, 0},
    {"GET", "/api/v1/instance", 0, get_instance, 0},
    {"GET", "/api/v1/history", 0, get_history, 0},
    {"GET", "/api/v1/payload", 0, get_payload, 0},
    {"GET", "/metrics", 0, get_metrics, 0},
    {"POST", "/api/v1/cancel", 1, post_cancel, 0},
    {"POST", "/api/v1/terminate", 1, post_terminate, 0},
    {"POST", "/api/v1/suspend", 1, post_suspend, 0},
    {"POST", "/api/v1/resume", 1, post_resume, 0},
    {"POST", "/api/v1/raise-event", 1, post_raise, 0},
    {"POST", "/api/v1/reset", 1, post_reset, 0},
    {"POST", "/api/v1/rewind", 1, post_rewind, 0},
    {"POST", "/api/v1/bulk/cancel", 1, post_bulk_cancel, 0},
    {"POST", "/api/v1/bulk/control", 1, post_bulk_control, 0},
    /* schedules (ui_schedules.c) */
    {"GET", "/api/v1/schedules", 0, ui_get_schedules, 0},
    {"GET", "/api/v1/schedule", 0, ui_get_schedule, 0},
    {"POST", "/api/v1/schedule/create", 1, ui_post_schedule_create, 0},
    {"POST", "/api/v1/schedule/update", 1, ui_post_schedule_update, 0},
    {"POST", "/api/v1/schedule/pause", 1, ui_post_schedule_pause, 0},
    {"POST", "/api/v1/schedule/resume", 1, ui_post_schedule_resume, 0},
    {"POST", "/api/v1/schedule/trigger", 1, ui_post_schedule_trigger, 0},
    {"POST", "/api/v1/schedule/delete", 1, ui_post_schedule_delete, 0},
    /* sign-in (ui_auth.c) */
    {"POST", "/api/v1/session", 0, ui_auth_post_session, 0},
    {"POST", "/api/v1/logout", 0, ui_auth_post_logout, 0},
    {"POST", "/api/v1/login-code", 0, ui_auth_post_login_code, 0},
};

const ui_route *ui_route_find(const char *path, const char *method,
                              int *method_ok)
{
    *method_ok = 1;
    int known = 0;
    /* HEAD is GET without the body (MHD drops it) */
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strcmp(routes[i].path, path) != 0)
            continue;
        known = 1;
        if (strcmp(routes[i].method, m) == 0)
            return &routes[i];
    }
    *method_ok = !known;
    return NULL;
}

int ui_route_is_action(const ui_route *route)
{
    return route->action;
}

int ui_route_needs(const ui_route *route)
{
    return route->run == ui_auth_post_session      ? UI_NEEDS_NOTHING
           : route->run == ui_auth_post_login_code ? UI_NEEDS_BEARER
                                                   : UI_NEEDS_SIGNIN;
}

int ui_route_run(const ui_route *route, ui_request *r, json_t *body)
{
    return route->run(r, body);
}
