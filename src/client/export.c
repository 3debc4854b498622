/* export.c - duro_client_export_history(): an instance's history, every
 * execution the store still holds, as the stable JSON document of
 * docs/history-json.md, which duro_replay_json() reads back (the writer
 * and the reader of that form are these two files). Owns nothing past the
 * call; any thread, like every client call. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "duro.h"

/* The form's version: bumped only for a change a reader of version 1
 * cannot read; fields may be added without it (readers ignore what they
 * do not know). */
#define EXPORT_FORMAT_VERSION 1

static void add(duro__strbuf *b, const char *s)
{
    duro__strbuf_add(b, s, strlen(s));
}

/* ,"key": */
static void field_key(duro__strbuf *b, const char *key)
{
    add(b, ",\"");
    add(b, key);
    add(b, "\":");
}

/* ,"key":"value" for a string that is set (an empty one included). */
static void text_field(duro__strbuf *b, const char *key, const char *v)
{
    if (v == NULL)
        return;
    field_key(b, key);
    duro__strbuf_json(b, v);
}

/* ,"key":n for a number that is not 0. */
static void int_field(duro__strbuf *b, const char *key, int64_t v)
{
    if (v == 0)
        return;
    char n[32];
    snprintf(n, sizeof(n), "%" PRId64, v);
    field_key(b, key);
    add(b, n);
}

static void uint_field(duro__strbuf *b, const char *key, uint64_t v)
{
    if (v == 0)
        return;
    char n[32];
    snprintf(n, sizeof(n), "%" PRIu64, v);
    field_key(b, key);
    add(b, n);
}

/* The first of an event's strings that is not valid UTF-8 (which JSON
 * cannot carry: the export refuses rather than change it), or NULL. */
static const char *bad_text(const duro_event *e)
{
    const char *const fields[] = {e->name,        e->version, e->payload,
                                  e->error,       e->reason,  e->requested_by,
                                  e->ref_instance};
    const char *const names[] = {"name",        "version", "payload",
                                 "error",       "reason",  "requested_by",
                                 "ref_instance"};
    for (size_t i = 0; i < DURO__ARRAY_LEN(fields); i++)
        if (fields[i] != NULL &&
            duro__utf8_check(fields[i], strlen(fields[i])) != strlen(fields[i]))
            return names[i];
    return NULL;
}

static void event_json(duro__strbuf *b, const duro_event *e)
{
    char head[96];
    snprintf(head, sizeof(head),
             "{\"event_id\":%" PRIu64 ",\"kind\":", e->event_id);
    add(b, head);
    duro__strbuf_json(b, duro_event_kind_name(e->kind));
    char ts[48];
    snprintf(ts, sizeof(ts), ",\"timestamp_ms\":%" PRId64, e->timestamp_ms);
    add(b, ts);
    uint_field(b, "source_event_id", e->source_event_id);
    text_field(b, "name", e->name);
    text_field(b, "version", e->version);
    text_field(b, "payload", e->payload);
    text_field(b, "error", e->error);
    if (e->category != 0)
        text_field(b, "category", duro_category_name(e->category));
    text_field(b, "reason", e->reason);
    text_field(b, "requested_by", e->requested_by);
    text_field(b, "ref_instance", e->ref_instance);
    uint_field(b, "ref_execution", e->ref_execution);
    uint_field(b, "ref_event_id", e->ref_event_id);
    int_field(b, "fire_at_ms", e->fire_at_ms);
    uint_field(b, "attempt", e->attempt);
    uint_field(b, "flags", e->flags);
    int_field(b, "started_ms", e->started_ms);
    int_field(b, "finished_ms", e->finished_ms);
    add(b, "}");
}

int duro_client_export_history(duro_client *c, const char *instance_id,
                               char **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    duro_instance_info *info = NULL;
    int rc = duro_client_get_status(c, instance_id, &info);
    if (rc != DURO_OK)
        return rc; /* duro_errmsg() says why */
    if (info->status == DURO_STATUS_NOT_FOUND) {
        duro_free(info);
        return duro__fail(DURO_NOT_FOUND, "no instance '%s'", instance_id);
    }
    uint64_t current = info->execution_id;
    duro_free(info);
    duro__strbuf b = {0};
    char head[64];
    snprintf(head, sizeof(head),
             "{\"format\":\"duro-history\",\"format_version\":%d,"
             "\"instance_id\":",
             EXPORT_FORMAT_VERSION);
    add(&b, head);
    duro__strbuf_json(&b, instance_id);
    add(&b, ",\"executions\":[");
    int first = 1;
    for (uint64_t x = 1; x <= current && rc == DURO_OK; x++) {
        duro_history *h = NULL;
        rc = duro_client_read_history(c, instance_id, x, &h);
        if (rc == DURO_NOT_FOUND) {
            /* pruned (keep_executions, duro prune): not in the document */
            rc = DURO_OK;
            continue;
        }
        if (rc != DURO_OK)
            break;
        char ex[64];
        snprintf(ex, sizeof(ex),
                 "%s\n{\"execution_id\":%" PRIu64 ",\"events\":[",
                 first ? "" : ",", x);
        add(&b, ex);
        first = 0;
        for (size_t i = 0; i < h->count && rc == DURO_OK; i++) {
            const char *bad = bad_text(&h->events[i]);
            if (bad != NULL) {
                rc = duro__fail(DURO_INVALID,
                                "event %" PRIu64 " of execution %" PRIu64
                                " of '%s' has a %s that is not valid UTF-8 "
                                "(an older duro stored it): JSON cannot "
                                "carry it unchanged, so it is not exported",
                                h->events[i].event_id, x, instance_id, bad);
                break;
            }
            add(&b, i == 0 ? "\n " : ",\n ");
            event_json(&b, &h->events[i]);
        }
        add(&b, "]}");
        duro_history_free(h);
    }
    add(&b, "]}\n");
    if (rc == DURO_OK && b.oom)
        rc = duro__fail(DURO_NOMEM, "out of memory");
    if (rc != DURO_OK) {
        duro__free(b.s);
        return rc;
    }
    *out = b.s;
    return DURO_OK;
}
