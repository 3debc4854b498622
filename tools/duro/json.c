/* json.c - the JSON side of the duro command, on jansson: strings made valid
 * UTF-8 (jansson refuses anything else), payloads embedded as JSON when they
 * parse, times as RFC 3339 UTC plus integer milliseconds, the instance
 * object, a schedule's objects, and printing one document. Single-threaded. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static json_t *checked(json_t *v)
{
    if (v == NULL) {
        fputs("duro: out of memory\n", stderr);
        exit(EXIT_FAILED);
    }
    return v;
}

json_t *jstr(const char *s)
{
    if (s == NULL)
        return json_null();
    size_t len = strlen(s), bad = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence((const unsigned char *)s + i);
        bad += n == 0;
        i += n == 0 ? 1 : n;
    }
    if (bad == 0)
        return checked(json_stringn(s, len));
    /* Each invalid byte becomes U+FFFD (3 bytes). */
    char *clean = malloc(len + 2 * bad + 1);
    if (clean == NULL)
        return checked(NULL);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence((const unsigned char *)s + i);
        if (n == 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, s + i, n);
            o += n;
            i += n;
        }
    }
    json_t *v = json_stringn(clean, o);
    free(clean);
    return checked(v);
}

json_t *jpayload(const char *s)
{
    if (s == NULL)
        return json_null();
    json_error_t error;
    json_t *v = json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &error);
    return v != NULL ? v : jstr(s);
}

json_t *jint(int64_t v)
{
    return checked(json_integer((json_int_t)v));
}

void jset(json_t *obj, const char *key, json_t *value)
{
    if (json_object_set_new(obj, key, checked(value)) != 0)
        checked(NULL);
}

void jset_time(json_t *obj, const char *key, int64_t ms)
{
    char ms_key[128];
    snprintf(ms_key, sizeof(ms_key), "%s_ms", key);
    if (ms == 0) {
        jset(obj, key, json_null());
        jset(obj, ms_key, json_null());
        return;
    }
    time_t t = (time_t)(ms / 1000);
    int rest = (int)(ms % 1000);
    if (rest < 0) {
        rest += 1000;
        t--;
    }
    struct tm tm;
    char text[64] = "";
    if (gmtime_r(&t, &tm) != NULL) {
        size_t n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(text + n, sizeof(text) - n, ".%03dZ", rest);
    }
    jset(obj, key, jstr(text));
    jset(obj, ms_key, jint(ms));
}

json_t *json_instance(const duro_instance_info *i)
{
    json_t *o = checked(json_object());
    jset(o, "id", jstr(i->instance_id));
    jset(o, "name", jstr(i->name));
    jset(o, "version", jstr(i->version));
    jset(o, "status", jstr(status_word(i->status)));
    jset(o, "cancelling", json_boolean(instance_cancelling(i)));
    jset(o, "execution_id", jint((int64_t)i->execution_id));
    jset_time(o, "created_at", i->created_ms);
    jset_time(o, "updated_at", i->updated_ms);
    jset_time(o, "finished_at", i->finished_ms);
    jset_time(o, "deadline", i->deadline_ms);
    jset(o, "output", jpayload(i->output));
    jset(o, "error", jstr(i->error));
    jset(o, "category",
         i->category != DURO_CATEGORY_NONE
             ? jstr(duro_category_name(i->category))
             : json_null());
    jset(o, "custom_status", jpayload(i->custom_status));
    jset(o, "parent_instance", jstr(i->parent_instance));
    jset(o, "history_count", jint((int64_t)i->history_count));
    jset(o, "cancel_reason", jstr(i->cancel_reason));
    jset(o, "cancelled_by", jstr(i->cancelled_by));
    jset_time(o, "cancel_requested_at", i->cancel_requested_ms);
    jset(o, "cancel_outcome", jstr(cancel_outcome(i)));
    jset(o, "last_problem", jstr(i->last_problem));
    jset_time(o, "last_problem_at", i->last_problem_ms);
    jset_time(o, "next_attempt_at", i->next_attempt_ms);
    return o;
}

int json_print(json_t *doc)
{
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (rc != 0 || fputc('\n', stdout) == EOF)
        return -1;
    return 0;
}

int json_print_nested(json_t *v, int depth)
{
    char *text = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(v);
    if (text == NULL)
        return -1;
    int rc = 0;
    for (const char *line = text; rc == 0 && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t n = end != NULL ? (size_t)(end - line) : strlen(line);
        if (printf("%*s%.*s%s", 2 * depth, "", (int)n, line,
                   end != NULL ? "\n" : "") < 0)
            rc = -1;
        line += n + (end != NULL);
    }
    free(text);
    return rc;
}

json_t *json_bulk(const duro_bulk_result *r, int dry_run)
{
    json_t *ids = json_array();
    for (size_t i = 0; i < r->id_count; i++)
        json_array_append_new(ids, jstr(r->ids[i]));
    json_t *doc = json_object();
    jset(doc, "dry_run", json_boolean(dry_run));
    jset(doc, "count", jint((int64_t)r->count));
    jset(doc, "ids", ids);
    return doc;
}

/* ---- schedules ----------------------------------------------------------- */

static const char *const overlap_words[] = {"skip", "buffer-one", "allow-all",
                                            "cancel-other", "terminate-other"};
#define OVERLAPS (int)(sizeof(overlap_words) / sizeof(overlap_words[0]))

const char *schedule_overlap_word(int overlap)
{
    return overlap >= 0 && overlap < OVERLAPS ? overlap_words[overlap]
                                              : "unknown";
}

int schedule_overlap_parse(const char *word)
{
    for (int i = 0; word != NULL && i < OVERLAPS; i++)
        if (strcmp(word, overlap_words[i]) == 0)
            return i;
    return -1;
}

const char *schedule_action_word(int action)
{
    switch (action) {
    case 1:
        return "started";
    case 2:
        return "skipped";
    case 3:
        return "buffered";
    case 4:
        return "stopped";
    default:
        return "unknown";
    }
}

json_t *json_schedule_spec(const duro_schedule_spec *s)
{
    json_t *o = checked(json_object());
    jset(o, "cron", s->cron != NULL ? jstr(s->cron) : json_null());
    jset(o, "interval_ms", jint(s->interval_ms));
    jset(o, "offset_ms", jint(s->offset_ms));
    jset(o, "time_zone", jstr(s->time_zone != NULL ? s->time_zone : "UTC"));
    jset(o, "orchestration", jstr(s->orchestration));
    jset(
        o, "orchestration_version",
        jstr(s->orchestration_version != NULL ? s->orchestration_version : ""));
    jset(o, "input", s->input != NULL ? jpayload(s->input) : json_null());
    jset(o, "overlap", jstr(schedule_overlap_word(s->overlap)));
    jset(o, "catchup_window_ms", jint(s->catchup_window_ms));
    jset(o, "jitter_ms", jint(s->jitter_ms));
    jset(o, "timeout_ms", jint(s->version >= 2 ? s->timeout_ms : 0));
    jset(o, "paused", json_boolean(s->paused));
    jset(o, "note", s->note != NULL ? jstr(s->note) : json_null());
    jset_time(o, "start", s->start_ms);
    jset_time(o, "end", s->end_ms);
    return o;
}

json_t *json_schedule_info(const duro_schedule_info *s)
{
    json_t *o = checked(json_object());
    jset(o, "id", jstr(s->id));
    jset(o, "spec", json_schedule_spec(&s->spec));
    jset_time(o, "next", s->spec.paused ? 0 : s->next_ms);
    jset_time(o, "buffered", s->buffered_ms);
    jset(o, "last_instance",
         s->last_instance_id != NULL ? jstr(s->last_instance_id) : json_null());
    jset(o, "last_status",
         s->last_instance_id != NULL ? jstr(status_word(s->last_status))
                                     : json_null());
    jset(o, "fires", jint(s->fires));
    jset(o, "skips", jint(s->skips));
    jset_time(o, "created", s->created_ms);
    jset_time(o, "updated", s->updated_ms);
    return o;
}

json_t *json_schedule_fire(const duro_schedule_fire *f)
{
    json_t *o = checked(json_object());
    jset(o, "action", jstr(schedule_action_word(f->action)));
    jset_time(o, "time", f->time_ms);
    jset(o, "count", jint(f->count));
    jset(o, "instance",
         f->instance_id != NULL ? jstr(f->instance_id) : json_null());
    jset(o, "instance_status",
         f->instance_id != NULL
             ? jstr(f->instance_status == 0 ? "gone"
                                            : status_word(f->instance_status))
             : json_null());
    jset(o, "why", f->why != NULL ? jstr(f->why) : json_null());
    jset_time(o, "recorded", f->recorded_ms);
    return o;
}
