/* query.c - what both built-in providers (and the client's fallback) share
 * about query_instances and list_control_events: the input checks, which
 * index path a query takes, the bounds its statements bind, and the
 * cursors (encoded, decoded, checked). The SQL stays with each provider.
 * Pure functions; any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/providers.h"

#define NAME_MAX_BYTES 1024
/* Longer than any cursor this file makes (an id of 1024 bytes is 1366
 * characters of base64url): anything longer is refused unread. */
#define CURSOR_MAX 2048

/* Formats of the cursors: the first field names the method and the
 * format, so a cursor of one method is refused by the other. */
#define INSTANCE_CURSOR "i1"
#define EVENT_CURSOR "e1"

/* ---- base64url, no padding: the id in a cursor ---- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64_value(char c)
{
    const char *at = c != '\0' ? strchr(b64, c) : NULL;
    return at != NULL ? (int)(at - b64) : -1;
}

static void b64_encode(duro__strbuf *b, const unsigned char *s, size_t n)
{
    char out[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        size_t k = n - i >= 3 ? 3 : n - i;
        if (k > 1)
            v |= (uint32_t)s[i + 1] << 8;
        if (k > 2)
            v |= s[i + 2];
        for (size_t j = 0; j < k + 1; j++)
            out[j] = b64[(v >> (18 - 6 * j)) & 63];
        duro__strbuf_add(b, out, k + 1);
    }
}

/* Decodes the n characters at s into a new NUL-terminated string (*out,
 * duro__malloc): -1 when they are not canonical base64url (a bad
 * character or length, unused bits set) or decode to a NUL byte. */
static int b64_decode(const char *s, size_t n, char **out)
{
    *out = NULL;
    if (n % 4 == 1)
        return -1;
    char *d = duro__malloc(n * 3 / 4 + 1);
    if (d == NULL)
        return -2;
    size_t len = 0;
    for (size_t i = 0; i < n; i += 4) {
        size_t k = n - i >= 4 ? 4 : n - i;
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            int x = j < k ? b64_value(s[i + j]) : 0;
            if (x < 0) {
                duro__free(d);
                return -1;
            }
            v = (v << 6) | (uint32_t)x;
        }
        unsigned char bytes[3] = {(unsigned char)(v >> 16),
                                  (unsigned char)(v >> 8), (unsigned char)v};
        /* the bits a short group leaves over must be zero: one text per
         * id */
        if (k < 4 && bytes[k - 1] != 0) {
            duro__free(d);
            return -1;
        }
        for (size_t j = 0; j + 1 < k; j++) {
            if (bytes[j] == 0) {
                duro__free(d);
                return -1;
            }
            d[len++] = (char)bytes[j];
        }
    }
    d[len] = '\0';
    *out = d;
    return 0;
}

/* ---- the fields of a cursor ---- */

/* Reads a decimal int64 at *s ("-" and 1 to 19 digits, no leading zero:
 * one text per number) that ends at a '.', and moves *s past the '.'.
 * -1 when there is none or it overflows. */
static int read_number(const char **s, int64_t *out)
{
    const char *p = *s;
    int negative = *p == '-';
    p += negative;
    const char *digits = p;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p == digits || (p - digits > 1 && *digits == '0') || *p != '.' ||
        (negative && v == 0))
        return -1;
    *s = p + 1;
    *out = negative ? -v : v;
    return 0;
}

static int malformed(const char *provider, const char *method, const char *why,
                     duro_error *err)
{
    return duro_error_set(err, DURO_INVALID, 0,
                          "%s %s: the cursor is malformed (%s); pass a "
                          "next_cursor of this method as it came",
                          provider, method, why);
}

/* Decodes the id that ends a cursor at s; DURO_INVALID or DURO_NOMEM. */
static int read_id(const char *provider, const char *method, const char *s,
                   char **out, duro_error *err)
{
    int rc = b64_decode(s, strlen(s), out);
    if (rc == -2)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (rc != 0 || (*out)[0] == '\0' || strlen(*out) > NAME_MAX_BYTES) {
        duro__free(*out);
        *out = NULL;
        return malformed(provider, method, "its instance id", err);
    }
    return DURO_OK;
}

/* ---- input checks ---- */

static int check_text(const char *provider, const char *method,
                      const char *what, const char *s, int required, int utf8,
                      duro_error *err)
{
    if (s == NULL)
        return DURO_OK;
    if (required && s[0] == '\0')
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: %s is empty (NULL: any)", provider,
                              method, what);
    if (strnlen(s, NAME_MAX_BYTES + 1) > NAME_MAX_BYTES)
        return duro_error_set(err, DURO_TOO_LARGE, 0,
                              "%s %s: %s is longer than %d bytes", provider,
                              method, what, NAME_MAX_BYTES);
    if (utf8)
        for (const unsigned char *p = (const unsigned char *)s; *p;) {
            size_t n = duro__utf8_len(p);
            if (n == 0)
                return duro_error_set(err, DURO_INVALID, 0,
                                      "%s %s: %s is not valid UTF-8 (the "
                                      "store holds UTF-8 text only)",
                                      provider, method, what);
            p += n;
        }
    return DURO_OK;
}

static int check_limit(const char *provider, const char *method, size_t limit,
                       size_t *out, duro_error *err)
{
    if (limit > DURO_QUERY_LIMIT_MAX)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: limit %zu is over %d (a negative "
                              "limit converted to size_t is too)",
                              provider, method, limit, DURO_QUERY_LIMIT_MAX);
    *out = limit == 0 ? DURO_QUERY_LIMIT_DEFAULT : limit;
    return DURO_OK;
}

static int check_flag(const char *provider, const char *method,
                      const char *what, int v, duro_error *err)
{
    if (v != 0 && v != 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: %s is %d; it is 0 or 1", provider, method,
                              what, v);
    return DURO_OK;
}

static int check_bound(const char *provider, const char *method,
                       const char *what, int64_t v, duro_error *err)
{
    if (v < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: %s is negative (%lld; 0: no bound)",
                              provider, method, what, (long long)v);
    return DURO_OK;
}

/* count_max, read from a query of version 2 on (an older caller's struct
 * ends before it). */
static int check_count_max(const char *provider, const char *method,
                           const duro_instance_query *q, duro_error *err)
{
    if (q->version >= 2 && q->count_max < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: count_max is negative (%lld; 0: count "
                              "every match)",
                              provider, method, (long long)q->count_max);
    return DURO_OK;
}

/* ---- the name prefix's range ---- */

/* A string above every name of at most NAME_MAX_BYTES: 1025 bytes 0xFF
 * (bytewise), or 257 U+10FFFF (in valid UTF-8 no byte exceeds 0xF4, and
 * none after 0xF4 exceeds 0x8F, so a name is below it at its first
 * difference, and too short to have it as a prefix). */
static char *above_every_name(int utf8)
{
    size_t n = utf8 ? 257 * 4 : NAME_MAX_BYTES + 1;
    char *s = duro__malloc(n + 1);
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        s[i] = utf8 ? "\xF4\x8F\xBF\xBF"[i % 4] : '\xFF';
    s[n] = '\0';
    return s;
}

/* The least string above every string that begins with p (p itself is the
 * least one that does): the names with prefix p are exactly p <= name <
 * end. Bytewise, p without its trailing 0xFF bytes with its last byte
 * raised by one. In UTF-8 (utf8, p valid) by code point, whose order is
 * the bytes' order, so the end is valid UTF-8 too: the last code point
 * that is not U+10FFFF raised by one (past the surrogates). Nothing to
 * raise: above_every_name(). */
static char *prefix_end(const char *p, int utf8)
{
    size_t n = strlen(p);
    /* a raised code point may take one byte more (U+007F to U+0080) */
    char *e = duro__malloc(n + 2);
    if (e == NULL)
        return NULL;
    memcpy(e, p, n + 1);
    if (!utf8) {
        while (n > 0 && (unsigned char)e[n - 1] == 0xFF)
            n--;
        if (n == 0) {
            duro__free(e);
            return above_every_name(0);
        }
        e[n - 1] = (char)((unsigned char)e[n - 1] + 1);
        e[n] = '\0';
        return e;
    }
    /* the start of each code point, last first */
    while (n > 0) {
        size_t start = n - 1;
        while (start > 0 && ((unsigned char)e[start] & 0xC0) == 0x80)
            start--;
        const unsigned char *c = (const unsigned char *)e + start;
        size_t len = n - start;
        uint32_t cp = len == 1 ? c[0] : c[0] & (0x7Fu >> len);
        for (size_t i = 1; i < len; i++)
            cp = (cp << 6) | (c[i] & 0x3Fu);
        if (cp == 0x10FFFF) {
            n = start;
            continue;
        }
        cp = cp == 0xD7FF ? 0xE000 : cp + 1;
        unsigned char *o = (unsigned char *)e + start;
        if (cp < 0x80) {
            o[0] = (unsigned char)cp;
            len = 1;
        } else if (cp < 0x800) {
            o[0] = (unsigned char)(0xC0 | (cp >> 6));
            o[1] = (unsigned char)(0x80 | (cp & 0x3F));
            len = 2;
        } else if (cp < 0x10000) {
            o[0] = (unsigned char)(0xE0 | (cp >> 12));
            o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[2] = (unsigned char)(0x80 | (cp & 0x3F));
            len = 3;
        } else {
            o[0] = (unsigned char)(0xF0 | (cp >> 18));
            o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[3] = (unsigned char)(0x80 | (cp & 0x3F));
            len = 4;
        }
        e[start + len] = '\0';
        return e;
    }
    duro__free(e);
    return above_every_name(1);
}

/* ---- query_instances ---- */

static const char *const order_names[] = {"id", "created_desc", "updated_desc"};

void duro__query_plan_free(duro__instance_plan *plan)
{
    if (plan == NULL)
        return;
    duro__free(plan->prefix_end);
    duro__free(plan->after_id);
    memset(plan, 0, sizeof(*plan));
}

/* Reads q->cursor into the plan's keyset bound. */
static int read_instance_cursor(const char *provider, const char *cursor,
                                int order, duro__instance_plan *plan,
                                duro_error *err)
{
    static const char method[] = "query_instances";
    if (strnlen(cursor, CURSOR_MAX + 1) > CURSOR_MAX)
        return malformed(provider, method, "too long", err);
    const char *s = cursor;
    int64_t got_order, key;
    if (strncmp(s, INSTANCE_CURSOR ".", 3) != 0)
        return malformed(provider, method,
                         strncmp(s, EVENT_CURSOR ".", 3) == 0
                             ? "it is list_control_events'"
                             : "not one of query_instances",
                         err);
    s += 3;
    if (read_number(&s, &got_order) != 0 || got_order < DURO_ORDER_ID ||
        got_order > DURO_ORDER_UPDATED_DESC)
        return malformed(provider, method, "its order", err);
    if (got_order != order)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: the cursor is of a query in order %s; "
                              "this one is in order %s (start again without "
                              "a cursor)",
                              provider, method, order_names[got_order],
                              order_names[order]);
    if (read_number(&s, &key) != 0)
        return malformed(provider, method, "its key", err);
    duro__free(plan->after_id);
    plan->after_id = NULL;
    int rc = read_id(provider, method, s, &plan->after_id, err);
    if (rc != DURO_OK)
        return rc;
    plan->after_key = order == DURO_ORDER_ID ? 0 : key;
    return DURO_OK;
}

int duro__query_plan(const char *provider, const duro_instance_query *q,
                     int utf8, duro__instance_plan *plan, duro_error *err)
{
    static const char method[] = "query_instances";
    memset(plan, 0, sizeof(*plan));
    if (q == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s %s: query is NULL",
                              provider, method);
    if (q->version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: query.version is not set: call "
                              "duro_instance_query_init() first",
                              provider, method);
    if (q->order < DURO_ORDER_ID || q->order > DURO_ORDER_UPDATED_DESC)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: unknown order %d (DURO_ORDER_ID, "
                              "_CREATED_DESC or _UPDATED_DESC)",
                              provider, method, q->order);
    uint32_t statuses = 0;
    for (int s = DURO_STATUS_PENDING; s <= DURO_STATUS_TERMINATED; s++)
        statuses |= 1u << s;
    if ((q->status_mask & ~statuses) != 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: status_mask 0x%x holds a bit that is "
                              "not a status (1u << 1 .. 1u << 8)",
                              provider, method, (unsigned)q->status_mask);
    int rc;
    if ((rc = check_limit(provider, method, q->limit, &plan->limit, err)) ||
        (rc = check_flag(provider, method, "with_problem", q->with_problem,
                         err)) ||
        (rc = check_flag(provider, method, "count_total", q->count_total,
                         err)) ||
        (rc = check_bound(provider, method, "created_after_ms",
                          q->created_after_ms, err)) ||
        (rc = check_bound(provider, method, "created_before_ms",
                          q->created_before_ms, err)) ||
        (rc = check_count_max(provider, method, q, err)) ||
        (rc = check_text(provider, method, "name", q->name, 1, utf8, err)) ||
        (rc = check_text(provider, method, "name_prefix", q->name_prefix, 0,
                         utf8, err)) ||
        (rc = check_text(provider, method, "name_contains", q->name_contains, 0,
                         utf8, err)) ||
        (rc = check_text(provider, method, "parent_instance",
                         q->parent_instance, 1, utf8, err)) ||
        (q->version >= 3 &&
         (rc = check_text(provider, method, "orchestration_version",
                          q->orchestration_version, 0, utf8, err))))
        return rc;

    plan->order = q->order;
    plan->name = q->name;
    plan->prefix = q->name_prefix != NULL && q->name_prefix[0] != '\0'
                       ? q->name_prefix
                       : NULL;
    plan->contains = q->name_contains != NULL && q->name_contains[0] != '\0'
                         ? q->name_contains
                         : NULL;
    plan->parent = q->parent_instance;
    /* "" is a version (the default one): only NULL is none */
    plan->version = q->version >= 3 ? q->orchestration_version : NULL;
    plan->with_problem = q->with_problem;
    plan->count_total = q->count_total;
    plan->count_max = q->version >= 2 ? q->count_max : 0;
    plan->created_from =
        q->created_after_ms > 0 ? q->created_after_ms : INT64_MIN;
    plan->created_until =
        q->created_before_ms > 0 ? q->created_before_ms : INT64_MAX;
    /* The first page: every row is after (INT64_MAX, "") in the
     * newest-first orders (no instance is created at INT64_MAX ms) and
     * after "" by id (ids are not empty). */
    plan->after_key = q->order == DURO_ORDER_ID ? 0 : INT64_MAX;
    plan->after_id = duro__strdup("");
    if (plan->prefix != NULL)
        plan->prefix_end = prefix_end(plan->prefix, utf8);
    if (plan->after_id == NULL ||
        (plan->prefix != NULL && plan->prefix_end == NULL)) {
        duro__query_plan_free(plan);
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    }
    if (q->cursor != NULL &&
        (rc = read_instance_cursor(provider, q->cursor, q->order, plan, err)) !=
            DURO_OK) {
        duro__query_plan_free(plan);
        return rc;
    }
    /* Newest first by creation, created_before_ms is the keyset's own
     * bound: (before, "") is above exactly the rows created before it, so
     * the index range starts there instead of filtering the rows above. */
    if (q->order == DURO_ORDER_CREATED_DESC && q->created_before_ms > 0 &&
        q->created_before_ms <= plan->after_key) {
        plan->after_key = q->created_before_ms;
        plan->after_id[0] = '\0';
    }

    if (plan->parent != NULL)
        plan->path = DURO__QUERY_PARENT;
    else if (plan->with_problem)
        plan->path = DURO__QUERY_PROBLEM;
    else if (plan->name != NULL)
        plan->path =
            q->status_mask != 0 ? DURO__QUERY_NAME_STATUS : DURO__QUERY_NAME;
    else if (q->status_mask != 0)
        plan->path = DURO__QUERY_STATUS;
    else if (plan->prefix != NULL)
        plan->path = DURO__QUERY_PREFIX;
    else
        plan->path = DURO__QUERY_ALL;
    /* Newest first, every status is one range of (status, key, id) or
     * (name, status, key, id): the ranges of all seven, merged, are the
     * order's index, so the store needs no (key, id) or (name, key, id)
     * index of its own (two fewer that every change of an instance must
     * write). */
    uint32_t mask = q->status_mask;
    if (q->order != DURO_ORDER_ID &&
        (plan->path == DURO__QUERY_ALL || plan->path == DURO__QUERY_NAME)) {
        plan->path = plan->path == DURO__QUERY_ALL ? DURO__QUERY_STATUS
                                                   : DURO__QUERY_NAME_STATUS;
        mask = statuses;
    }
    if (plan->path == DURO__QUERY_STATUS ||
        plan->path == DURO__QUERY_NAME_STATUS) {
        /* one range per status; status 0 (no instance holds it) fills */
        int n = 0;
        for (int s = DURO_STATUS_PENDING; s <= DURO_STATUS_TERMINATED; s++)
            if (mask & (1u << s) && s != DURO_STATUS_CONTINUED_AS_NEW)
                plan->arms[n++] = s;
        plan->mask = 0;
        /* only ContinuedAsNew asked: nothing matches; a range that finds
         * nothing keeps the statement */
        if (n == 0)
            plan->arms[n++] = DURO_STATUS_CONTINUED_AS_NEW;
    } else {
        plan->mask = q->status_mask;
    }
    /* The count. Bounded, the matches of ALL and NAME are counted as the
     * STATUS and NAME_STATUS paths' of every status (by id, those paths'
     * pages bind no arms, so the arms are free for it): their indexes
     * hold the status, the name and the creation time, so the count
     * reads count_max + 1 of their entries and checks the created bounds
     * there, never in an instance's row. Unbounded, a count reads every
     * match whichever way, and the store picks its cheapest. */
    plan->count_path = plan->path;
    plan->count_rows = -1;
    if (plan->count_max > 0) {
        plan->count_rows =
            plan->count_max < INT64_MAX ? plan->count_max + 1 : INT64_MAX;
        if (plan->path == DURO__QUERY_ALL || plan->path == DURO__QUERY_NAME) {
            plan->count_path = plan->path == DURO__QUERY_ALL
                                   ? DURO__QUERY_STATUS
                                   : DURO__QUERY_NAME_STATUS;
            int n = 0;
            for (int s = DURO_STATUS_PENDING; s <= DURO_STATUS_TERMINATED; s++)
                if (s != DURO_STATUS_CONTINUED_AS_NEW)
                    plan->arms[n++] = s;
        }
    }
    return DURO_OK;
}

void duro__query_count_finish(duro_instance_page *page,
                              const duro__instance_plan *plan, int64_t counted)
{
    page->total_capped = 0;
    page->total = plan->count_total ? counted : -1;
    if (plan->count_total && plan->count_max > 0 && counted > plan->count_max) {
        page->total = plan->count_max;
        page->total_capped = 1;
    }
}

int duro__query_page_finish(duro_instance_page *page,
                            const duro__instance_plan *plan, duro_error *err)
{
    page->next_cursor = NULL;
    if (page->count <= plan->limit)
        return DURO_OK;
    page->count = plan->limit;
    const duro_instance_info *last = &page->items[plan->limit - 1];
    int64_t key = plan->order == DURO_ORDER_CREATED_DESC   ? last->created_ms
                  : plan->order == DURO_ORDER_UPDATED_DESC ? last->updated_ms
                                                           : 0;
    duro__strbuf b = {0};
    char head[64];
    int n = snprintf(head, sizeof(head), INSTANCE_CURSOR ".%d.%lld.",
                     plan->order, (long long)key);
    duro__strbuf_add(&b, head, (size_t)n);
    b64_encode(&b, (const unsigned char *)last->instance_id,
               strlen(last->instance_id));
    duro__strbuf_add(&b, "", 0);
    char *cursor = b.oom ? NULL : duro_arena_strdup(page->arena, b.s);
    duro__free(b.s);
    if (cursor == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    page->next_cursor = cursor;
    return DURO_OK;
}

/* ---- list_control_events ---- */

void duro__events_plan_free(duro__event_plan *plan)
{
    if (plan == NULL)
        return;
    duro__free(plan->before_id);
    memset(plan, 0, sizeof(*plan));
}

static int read_event_cursor(const char *provider, const char *cursor,
                             duro__event_plan *plan, duro_error *err)
{
    static const char method[] = "list_control_events";
    if (strnlen(cursor, CURSOR_MAX + 1) > CURSOR_MAX)
        return malformed(provider, method, "too long", err);
    const char *s = cursor;
    if (strncmp(s, EVENT_CURSOR ".", 3) != 0)
        return malformed(provider, method,
                         strncmp(s, INSTANCE_CURSOR ".", 3) == 0
                             ? "it is query_instances'"
                             : "not one of list_control_events",
                         err);
    s += 3;
    int64_t ts, execution, event;
    if (read_number(&s, &ts) != 0 || read_number(&s, &execution) != 0 ||
        read_number(&s, &event) != 0 || execution < 0 || event < 0)
        return malformed(provider, method, "its key", err);
    duro__free(plan->before_id);
    plan->before_id = NULL;
    int rc = read_id(provider, method, s, &plan->before_id, err);
    if (rc != DURO_OK)
        return rc;
    plan->before_ts = ts;
    plan->before_execution = execution;
    plan->before_event = event;
    return DURO_OK;
}

int duro__events_plan(const char *provider, const duro_control_event_query *q,
                      int utf8, duro__event_plan *plan, duro_error *err)
{
    static const char method[] = "list_control_events";
    memset(plan, 0, sizeof(*plan));
    if (q == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "%s %s: query is NULL",
                              provider, method);
    if (q->version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "%s %s: query.version is not set: call "
                              "duro_control_event_query_init() first",
                              provider, method);
    if ((q->kind_mask & ~DURO_CONTROL_EVENT_KINDS) != 0)
        return duro_error_set(
            err, DURO_INVALID, 0,
            "%s %s: kind_mask 0x%x holds a kind that is not a control "
            "request (OrchestrationCancelRequested, OrchestrationTerminated, "
            "ExecutionSuspended, ExecutionResumed)",
            provider, method, (unsigned)q->kind_mask);
    int rc;
    if ((rc = check_limit(provider, method, q->limit, &plan->limit, err)) ||
        (rc = check_bound(provider, method, "since_ms", q->since_ms, err)) ||
        (rc = check_bound(provider, method, "until_ms", q->until_ms, err)) ||
        (rc = check_text(provider, method, "requested_by", q->requested_by, 0,
                         utf8, err)))
        return rc;
    plan->mask = q->kind_mask == DURO_CONTROL_EVENT_KINDS ? 0 : q->kind_mask;
    plan->requested_by = q->requested_by;
    plan->since = q->since_ms > 0 ? q->since_ms : INT64_MIN;
    /* The first page: every event is before (INT64_MAX, "", 0, 0). */
    plan->before_ts = INT64_MAX;
    plan->before_id = duro__strdup("");
    if (plan->before_id == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    if (q->cursor != NULL &&
        (rc = read_event_cursor(provider, q->cursor, plan, err)) != DURO_OK) {
        duro__events_plan_free(plan);
        return rc;
    }
    /* until_ms as the keyset's bound: (until, "", 0, 0) is above exactly
     * the events before it. */
    if (q->until_ms > 0 && q->until_ms <= plan->before_ts) {
        plan->before_ts = q->until_ms;
        plan->before_id[0] = '\0';
        plan->before_execution = plan->before_event = 0;
    }
    return DURO_OK;
}

int duro__events_finish(duro_control_event_list *list,
                        const duro__event_plan *plan, duro_error *err)
{
    list->next_cursor = NULL;
    if (list->count <= plan->limit)
        return DURO_OK;
    list->count = plan->limit;
    const duro_control_event *last = &list->items[plan->limit - 1];
    duro__strbuf b = {0};
    char head[96];
    int n = snprintf(head, sizeof(head), EVENT_CURSOR ".%lld.%llu.%llu.",
                     (long long)last->timestamp_ms,
                     (unsigned long long)last->execution_id,
                     (unsigned long long)last->event_id);
    duro__strbuf_add(&b, head, (size_t)n);
    b64_encode(&b, (const unsigned char *)last->instance_id,
               strlen(last->instance_id));
    duro__strbuf_add(&b, "", 0);
    char *cursor = b.oom ? NULL : duro_arena_strdup(list->arena, b.s);
    duro__free(b.s);
    if (cursor == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    list->next_cursor = cursor;
    return DURO_OK;
}
