/* replay_json.c - duro_replay_json() and duro_replay_file(): reads an
 * exported history (docs/history-json.md; duro_client_export_history()
 * writes it) and replays each of its executions through a registry's code
 * with duro_replay_history(), with no store, saying which execution and
 * event first differ. Owns the document's arena for the call; runs the code
 * on the calling thread. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_reader.h"
#include "runtime/runtime.h"

/* The versions of the form this reader knows. */
#define FORMAT_VERSION_MAX 1
/* A file larger than this is refused before it is read. */
#define FILE_MAX ((long)1 << 30)

/* Where a reading error is, for messages: "execution 2, event 5". */
typedef struct place {
    uint64_t execution;
    size_t event; /* 1-based position in the events array; 0: none */
} place;

static int bad(const place *at, const char *fmt, ...) DURO_PRINTF(2, 3);
static int bad(const place *at, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (at->event != 0)
        return duro__fail(DURO_INVALID,
                          "not a duro history document: execution %" PRIu64
                          ", event %zu: %s",
                          at->execution, at->event, what);
    if (at->execution != 0)
        return duro__fail(DURO_INVALID,
                          "not a duro history document: execution %" PRIu64
                          ": %s",
                          at->execution, what);
    return duro__fail(DURO_INVALID, "not a duro history document: %s", what);
}

static int kind_of(const char *name)
{
    for (int k = 1; k <= DURO_EVENT_KIND_MAX; k++)
        if (strcmp(duro_event_kind_name(k), name) == 0)
            return k;
    return 0;
}

static int category_of(const char *name)
{
    for (int k = 0; k <= DURO_CATEGORY_CANCELLED; k++)
        if (strcmp(duro_category_name(k), name) == 0)
            return k;
    return -1;
}

/* A string member (NULL when absent); DURO_INVALID when of another kind. */
static int text_member(const duro__json *o, const char *key, const place *at,
                       const char **out)
{
    const duro__json *v = duro__json_get(o, key);
    *out = NULL;
    if (v == NULL || v->kind == DURO__JSON_NULL)
        return DURO_OK;
    if (v->kind != DURO__JSON_STRING)
        return bad(at, "\"%s\" is not a string", key);
    *out = v->text;
    return DURO_OK;
}

static int uint_member(const duro__json *o, const char *key, const place *at,
                       uint64_t *out)
{
    const duro__json *v = duro__json_get(o, key);
    *out = 0;
    if (v == NULL || v->kind == DURO__JSON_NULL)
        return DURO_OK;
    if (duro__json_uint(v, out) != DURO_OK)
        return bad(at, "\"%s\" is not a non-negative integer", key);
    return DURO_OK;
}

static int int_member(const duro__json *o, const char *key, const place *at,
                      int64_t *out)
{
    const duro__json *v = duro__json_get(o, key);
    *out = 0;
    if (v == NULL || v->kind == DURO__JSON_NULL)
        return DURO_OK;
    if (duro__json_int(v, out) != DURO_OK)
        return bad(at, "\"%s\" is not an integer", key);
    return DURO_OK;
}

/* One event object into *e (strings borrowed from the document). */
static int read_event(const duro__json *o, const place *at, duro_event *e)
{
    if (o->kind != DURO__JSON_OBJECT)
        return bad(at, "an event is not an object");
    memset(e, 0, sizeof(*e));
    const char *kind, *category;
    uint64_t attempt, flags;
    int rc = uint_member(o, "event_id", at, &e->event_id);
    if (rc == DURO_OK)
        rc = text_member(o, "kind", at, &kind);
    if (rc == DURO_OK && kind == NULL)
        rc = bad(at, "the event has no \"kind\"");
    if (rc == DURO_OK && (e->kind = (duro_event_kind)kind_of(kind)) == 0)
        rc = bad(at, "unknown event kind \"%s\" (a newer duro's?)", kind);
    if (rc == DURO_OK)
        rc = int_member(o, "timestamp_ms", at, &e->timestamp_ms);
    if (rc == DURO_OK)
        rc = uint_member(o, "source_event_id", at, &e->source_event_id);
    if (rc == DURO_OK)
        rc = text_member(o, "name", at, &e->name);
    if (rc == DURO_OK)
        rc = text_member(o, "version", at, &e->version);
    if (rc == DURO_OK)
        rc = text_member(o, "payload", at, &e->payload);
    if (rc == DURO_OK)
        rc = text_member(o, "error", at, &e->error);
    if (rc == DURO_OK)
        rc = text_member(o, "category", at, &category);
    if (rc == DURO_OK && category != NULL &&
        (e->category = category_of(category)) < 0)
        rc = bad(at, "unknown category \"%s\"", category);
    if (rc == DURO_OK)
        rc = text_member(o, "reason", at, &e->reason);
    if (rc == DURO_OK)
        rc = text_member(o, "requested_by", at, &e->requested_by);
    if (rc == DURO_OK)
        rc = text_member(o, "ref_instance", at, &e->ref_instance);
    if (rc == DURO_OK)
        rc = uint_member(o, "ref_execution", at, &e->ref_execution);
    if (rc == DURO_OK)
        rc = uint_member(o, "ref_event_id", at, &e->ref_event_id);
    if (rc == DURO_OK)
        rc = int_member(o, "fire_at_ms", at, &e->fire_at_ms);
    if (rc == DURO_OK)
        rc = uint_member(o, "attempt", at, &attempt);
    if (rc == DURO_OK)
        rc = uint_member(o, "flags", at, &flags);
    if (rc == DURO_OK && (attempt > UINT32_MAX || flags > UINT32_MAX))
        rc = bad(at, "\"attempt\" or \"flags\" is over 2^32 - 1");
    if (rc == DURO_OK)
        rc = int_member(o, "started_ms", at, &e->started_ms);
    if (rc == DURO_OK)
        rc = int_member(o, "finished_ms", at, &e->finished_ms);
    e->attempt = (uint32_t)attempt;
    e->flags = (uint32_t)flags;
    return rc;
}

/* Replays one execution; on nondeterminism, the event id the message
 * names. The core's nondeterminism messages all begin "nondeterminism at
 * event N" (engine.c, replay.c): that N is the first event that differs. */
static int replay_one(const duro_registry *reg, const duro_history *h,
                      const duro_replay_options *opts, uint64_t *event_id)
{
    *event_id = 0;
    int rc = duro_replay_history(reg, h, opts);
    if (rc == DURO_NONDETERMINISM) {
        unsigned long long n;
        if (sscanf(duro_errmsg(), "nondeterminism at event %llu", &n) == 1)
            *event_id = (uint64_t)n;
    }
    return rc;
}

int duro_replay_json(const duro_registry *reg, const char *json, size_t len,
                     const duro_replay_options *opts,
                     duro_replay_divergence *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "duro_replay_json called from orchestration code");
    if (reg == NULL || json == NULL)
        return duro__fail(DURO_INVALID, "registry or document is NULL");
    duro_arena *arena = duro_arena_create();
    if (arena == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    const duro__json *doc;
    char err[200];
    place at = {0};
    int rc = duro__json_parse(json, len, arena, &doc, err, sizeof(err));
    if (rc != DURO_OK) {
        rc = strstr(err, "out of memory") != NULL
                 ? duro__fail(DURO_NOMEM, "out of memory")
                 : duro__fail(DURO_INVALID, "not valid JSON: %s", err);
        duro_arena_destroy(arena);
        return rc;
    }
    const char *format, *instance_id;
    uint64_t version;
    const duro__json *executions = duro__json_get(doc, "executions");
    if (doc->kind != DURO__JSON_OBJECT)
        rc = bad(&at, "the document is not a JSON object");
    if (rc == DURO_OK)
        rc = text_member(doc, "format", &at, &format);
    if (rc == DURO_OK && (format == NULL || strcmp(format, "duro-history")))
        rc = bad(&at, "\"format\" is not \"duro-history\"");
    if (rc == DURO_OK)
        rc = uint_member(doc, "format_version", &at, &version);
    if (rc == DURO_OK && (version < 1 || version > FORMAT_VERSION_MAX))
        rc = bad(&at,
                 "\"format_version\" %" PRIu64 " is not one this duro reads "
                 "(1..%d)",
                 version, FORMAT_VERSION_MAX);
    if (rc == DURO_OK)
        rc = text_member(doc, "instance_id", &at, &instance_id);
    if (rc == DURO_OK && (instance_id == NULL || instance_id[0] == '\0'))
        rc = bad(&at, "\"instance_id\" is missing or empty");
    if (rc == DURO_OK &&
        (executions == NULL || executions->kind != DURO__JSON_ARRAY))
        rc = bad(&at, "\"executions\" is not an array");
    for (const duro__json *x = rc == DURO_OK ? executions->first : NULL;
         x != NULL && rc == DURO_OK; x = x->next) {
        at.event = 0;
        at.execution = 0;
        if (x->kind != DURO__JSON_OBJECT) {
            rc = bad(&at, "an execution is not an object");
            break;
        }
        uint64_t execution_id;
        rc = uint_member(x, "execution_id", &at, &execution_id);
        if (rc != DURO_OK)
            break;
        at.execution = execution_id;
        const duro__json *events = duro__json_get(x, "events");
        if (execution_id == 0) {
            rc = bad(&at, "an execution has no \"execution_id\"");
            break;
        }
        if (events == NULL || events->kind != DURO__JSON_ARRAY) {
            rc = bad(&at, "\"events\" is not an array");
            break;
        }
        if (events->count == 0)
            continue; /* nothing recorded yet: nothing to replay */
        duro_event *ev =
            duro_arena_alloc(arena, events->count * sizeof(duro_event));
        if (ev == NULL) {
            rc = duro__fail(DURO_NOMEM, "out of memory");
            break;
        }
        size_t n = 0;
        for (const duro__json *e = events->first; e != NULL && rc == DURO_OK;
             e = e->next) {
            at.event = n + 1;
            rc = read_event(e, &at, &ev[n++]);
        }
        if (rc != DURO_OK)
            break;
        duro_history h = {.instance_id = instance_id,
                          .execution_id = execution_id,
                          .events = ev,
                          .count = n};
        uint64_t event_id;
        rc = replay_one(reg, &h, opts, &event_id);
        if (rc != DURO_OK) {
            char msg[DURO_ERROR_MESSAGE_MAX];
            snprintf(msg, sizeof(msg), "%s", duro_errmsg());
            if (out != NULL) {
                out->execution_id = execution_id;
                out->event_id = event_id;
            }
            rc = duro__fail(rc, "execution %" PRIu64 " of '%s': %s",
                            execution_id, instance_id, msg);
        }
    }
    duro_arena_destroy(arena);
    return rc;
}

int duro_replay_file(const duro_registry *reg, const char *path,
                     const duro_replay_options *opts,
                     duro_replay_divergence *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (reg == NULL || path == NULL)
        return duro__fail(DURO_INVALID, "registry or path is NULL");
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return duro__fail(errno == ENOENT ? DURO_NOT_FOUND : DURO_INVALID,
                          "cannot open '%s': %s", path, strerror(errno));
    char *text = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    int rc = DURO_OK;
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        rc = duro__fail(DURO_INVALID, "cannot read '%s': %s", path,
                        strerror(errno));
    else if (size > FILE_MAX)
        rc = duro__fail(DURO_TOO_LARGE, "'%s' is %ld bytes, over 1 GiB", path,
                        size);
    else if ((text = duro__malloc((size_t)size + 1)) == NULL)
        rc = duro__fail(DURO_NOMEM, "out of memory");
    else if (fread(text, 1, (size_t)size, f) != (size_t)size)
        rc = duro__fail(DURO_INVALID, "cannot read '%s'", path);
    fclose(f);
    if (rc == DURO_OK) {
        text[size] = '\0';
        rc = duro_replay_json(reg, text, (size_t)size, opts, out);
        if (rc != DURO_OK) {
            char msg[DURO_ERROR_MESSAGE_MAX];
            snprintf(msg, sizeof(msg), "%s", duro_errmsg());
            rc = duro__fail(rc, "%s: %s", path, msg);
        }
    }
    duro__free(text);
    return rc;
}
