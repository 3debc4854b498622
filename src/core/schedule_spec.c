/* schedule_spec.c - a schedule's spec between the client, the store and the
 * runtime: checks, JSON text, the compiled rule, fire ids, due times (see
 * schedule_spec.h). Any thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/json_reader.h"
#include "core/schedule_spec.h"

void duro_schedule_spec_init(duro_schedule_spec *s)
{
    if (s == NULL)
        return;
    memset(s, 0, sizeof(*s));
    s->version = 2; /* 2: timeout_ms */
    s->overlap = DURO_OVERLAP_SKIP;
    s->catchup_window_ms = DURO_SCHEDULE_CATCHUP_DEFAULT_MS;
}

int duro__status_is_live(int status)
{
    return status == DURO_STATUS_PENDING || status == DURO_STATUS_RUNNING ||
           status == DURO_STATUS_SUSPENDED;
}

static int empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

/* Field checks that need no zone or parse. */
static int check_fields(const char *id, const duro_schedule_spec *s,
                        duro_error *err)
{
    if (id != NULL) {
        if (id[0] == '\0')
            return duro_error_set(err, DURO_INVALID, 0, "schedule id is empty");
        if (strlen(id) > DURO_SCHEDULE_ID_MAX)
            return duro_error_set(err, DURO_TOO_LARGE, 0,
                                  "schedule id is longer than %d bytes (its "
                                  "fires' instance ids add up to 32)",
                                  DURO_SCHEDULE_ID_MAX);
        if (strchr(id, '@') != NULL)
            return duro_error_set(err, DURO_INVALID, 0,
                                  "schedule id '%s' holds '@', which "
                                  "separates it from the fire time in its "
                                  "instances' ids",
                                  id);
    }
    if (s == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "schedule spec is NULL");
    if (s->version < 1)
        return duro_error_set(err, DURO_INVALID, 0,
                              "schedule spec version %d is not set (call "
                              "duro_schedule_spec_init() first)",
                              s->version);
    if (empty(s->orchestration))
        return duro_error_set(err, DURO_INVALID, 0,
                              "schedule spec has no orchestration name");
    int cron = !empty(s->cron);
    if (cron == (s->interval_ms != 0))
        return duro_error_set(err, DURO_INVALID, 0,
                              cron ? "schedule spec has both a cron "
                                     "expression and an interval"
                                   : "schedule spec has neither a cron "
                                     "expression nor an interval");
    if (!cron && s->interval_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "interval_ms %" PRId64 " is negative",
                              s->interval_ms);
    if (s->offset_ms < 0 || (cron && s->offset_ms != 0) ||
        (!cron && s->offset_ms >= s->interval_ms))
        return duro_error_set(err, DURO_INVALID, 0,
                              "offset_ms %" PRId64 " is not within 0 .. "
                              "interval_ms - 1 (and 0 with cron)",
                              s->offset_ms);
    if (s->overlap < DURO_OVERLAP_SKIP ||
        s->overlap > DURO_OVERLAP_TERMINATE_OTHER)
        return duro_error_set(err, DURO_INVALID, 0, "unknown overlap policy %d",
                              s->overlap);
    if (s->catchup_window_ms < 1000)
        return duro_error_set(err, DURO_INVALID, 0,
                              "catchup_window_ms %" PRId64
                              " is under 1000 (one second)",
                              s->catchup_window_ms);
    if (s->jitter_ms < 0 || s->start_ms < 0 || s->end_ms < 0)
        return duro_error_set(err, DURO_INVALID, 0,
                              "jitter_ms, start_ms and end_ms must not be "
                              "negative");
    if (s->end_ms != 0 && s->end_ms <= s->start_ms)
        return duro_error_set(err, DURO_INVALID, 0,
                              "end_ms %" PRId64
                              " is not after start_ms %" PRId64,
                              s->end_ms, s->start_ms);
    /* 9999-12-31 from 1970 and a margin: what a deadline may reach */
    if (s->version >= 2 &&
        (s->timeout_ms < 0 || s->timeout_ms > INT64_C(253402300799999)))
        return duro_error_set(err, DURO_INVALID, 0,
                              "timeout_ms %" PRId64
                              " is negative or past the year 9999",
                              s->timeout_ms);
    if (s->paused != 0 && s->paused != 1)
        return duro_error_set(err, DURO_INVALID, 0, "paused %d (0 or 1)",
                              s->paused);
    /* Text is checked where it enters duro (architecture.md). */
    int rc;
    if ((rc = duro__check_utf8_err("schedule id", id, err)) != DURO_OK ||
        (rc = duro__check_utf8_err("cron expression", s->cron, err)) !=
            DURO_OK ||
        (rc = duro__check_utf8_err("time zone", s->time_zone, err)) !=
            DURO_OK ||
        (rc = duro__check_utf8_err("orchestration name", s->orchestration,
                                   err)) != DURO_OK ||
        (rc = duro__check_utf8_err("orchestration version",
                                   s->orchestration_version, err)) != DURO_OK ||
        (rc = duro__check_utf8_err("input", s->input, err)) != DURO_OK ||
        (rc = duro__check_utf8_err("note", s->note, err)) != DURO_OK)
        return rc;
    return DURO_OK;
}

int duro__schedule_compile(const char *id, const duro_schedule_spec *spec,
                           duro__schedule_compiled *out, duro_error *err)
{
    duro_error local;
    if (err == NULL)
        err = &local;
    duro_error_clear(err);
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    int rc = check_fields(id, spec, err);
    if (rc != DURO_OK)
        return rc;
    duro__schedule_compiled c;
    memset(&c, 0, sizeof(c));
    if (!empty(spec->cron)) {
        char why[160];
        rc = duro__cron_parse(spec->cron, &c.cron, why, sizeof(why));
        if (rc != DURO_OK)
            return duro_error_set(err, rc, 0, "cron expression '%.300s': %s",
                                  spec->cron, why);
    }
    const char *zone = empty(spec->time_zone) ? "UTC" : spec->time_zone;
    if ((rc = duro__tz_load(zone, &c.zone, err)) != DURO_OK) {
        if (rc == DURO_NOT_FOUND)
            duro_error_set(err, DURO_NOT_FOUND, 0,
                           "time zone '%.300s' is not in the tz database",
                           zone);
        return rc;
    }
    if (out == NULL) {
        duro__tz_free(c.zone);
        return DURO_OK;
    }
    *out = c;
    duro__schedule_rule *r = &out->rule;
    r->id = id;
    r->cron = empty(spec->cron) ? NULL : &out->cron;
    r->zone = out->zone;
    r->interval_ms = spec->interval_ms;
    r->offset_ms = spec->offset_ms;
    r->start_ms = spec->start_ms;
    r->end_ms = spec->end_ms;
    r->catchup_ms = spec->catchup_window_ms;
    r->jitter_ms = spec->jitter_ms;
    r->overlap = spec->overlap;
    return DURO_OK;
}

void duro__schedule_compiled_free(duro__schedule_compiled *c)
{
    if (c != NULL) {
        duro__tz_free(c->zone);
        c->zone = NULL;
    }
}

/* ---- JSON text ---------------------------------------------------------- */

static void add_text(duro__strbuf *b, const char *key, const char *v)
{
    if (v == NULL)
        return;
    duro__strbuf_sep(b);
    duro__strbuf_json(b, key);
    duro__strbuf_add(b, ":", 1);
    duro__strbuf_json(b, v);
}

static void add_int(duro__strbuf *b, const char *key, int64_t v)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "%" PRId64, v);
    duro__strbuf_sep(b);
    duro__strbuf_json(b, key);
    duro__strbuf_add(b, ":", 1);
    duro__strbuf_add(b, num, (size_t)n);
}

void duro__schedule_spec_json(const duro_schedule_spec *s, duro__strbuf *b)
{
    duro__strbuf_open(b, '{');
    add_text(b, "cron", empty(s->cron) ? NULL : s->cron);
    add_int(b, "interval_ms", s->interval_ms);
    add_int(b, "offset_ms", s->offset_ms);
    add_text(b, "time_zone", empty(s->time_zone) ? NULL : s->time_zone);
    add_text(b, "orchestration", s->orchestration);
    add_text(b, "orchestration_version", s->orchestration_version);
    add_text(b, "input", s->input);
    add_int(b, "overlap", s->overlap);
    add_int(b, "catchup_window_ms", s->catchup_window_ms);
    add_int(b, "jitter_ms", s->jitter_ms);
    add_int(b, "start_ms", s->start_ms);
    add_int(b, "end_ms", s->end_ms);
    if (s->version >= 2 && s->timeout_ms > 0)
        add_int(b, "timeout_ms", s->timeout_ms);
    duro__strbuf_add(b, "}", 1);
}

static int get_text(const duro__json *o, const char *key, const char **out)
{
    const duro__json *v = duro__json_get(o, key);
    *out = NULL;
    if (v == NULL)
        return DURO_OK;
    if (v->kind != DURO__JSON_STRING)
        return DURO_INVALID;
    *out = v->text;
    return DURO_OK;
}

static int get_int(const duro__json *o, const char *key, int64_t *out)
{
    const duro__json *v = duro__json_get(o, key);
    *out = 0;
    return v == NULL ? DURO_OK : duro__json_int(v, out);
}

int duro__schedule_spec_parse(const char *json, duro_arena *a,
                              duro_schedule_spec *out, duro_error *err)
{
    duro_schedule_spec_init(out);
    char why[128];
    const duro__json *o = NULL;
    if (json == NULL ||
        duro__json_parse(json, strlen(json), a, &o, why, sizeof(why)) !=
            DURO_OK ||
        o->kind != DURO__JSON_OBJECT)
        return duro_error_set(err, DURO_INVALID, 0,
                              "a stored schedule spec is not a JSON object");
    int64_t overlap = 0;
    if (get_text(o, "cron", &out->cron) ||
        get_text(o, "time_zone", &out->time_zone) ||
        get_text(o, "orchestration", &out->orchestration) ||
        get_text(o, "orchestration_version", &out->orchestration_version) ||
        get_text(o, "input", &out->input) ||
        get_int(o, "interval_ms", &out->interval_ms) ||
        get_int(o, "offset_ms", &out->offset_ms) ||
        get_int(o, "overlap", &overlap) ||
        get_int(o, "catchup_window_ms", &out->catchup_window_ms) ||
        get_int(o, "jitter_ms", &out->jitter_ms) ||
        get_int(o, "start_ms", &out->start_ms) ||
        get_int(o, "end_ms", &out->end_ms) ||
        get_int(o, "timeout_ms", &out->timeout_ms) || overlap < 0 ||
        overlap > 100)
        return duro_error_set(err, DURO_INVALID, 0,
                              "a stored schedule spec has a field of the "
                              "wrong type");
    out->overlap = (int)overlap;
    return DURO_OK;
}

/* ---- fire ids and due times --------------------------------------------- */

void duro__schedule_fire_id(const char *id, int64_t time_ms, int trigger,
                            char *out)
{
    int64_t s = time_ms / 1000 - (time_ms % 1000 < 0);
    int ms = (int)(time_ms - s * 1000);
    int64_t days = s / 86400 - (s % 86400 < 0);
    int64_t in_day = s - days * 86400;
    int64_t year;
    int month, day;
    duro__civil_from_days(days, &year, &month, &day);
    char frac[8] = "";
    if (ms != 0)
        snprintf(frac, sizeof(frac), ".%03d", ms);
    snprintf(out, DURO__FIRE_ID_MAX,
             "%s@%s%04" PRId64 "-%02d-%02dT%02d:%02d:%02d%sZ", id,
             trigger ? "trigger-" : "", year, month, day, (int)(in_day / 3600),
             (int)(in_day / 60 % 60), (int)(in_day % 60), frac);
}

int64_t duro__schedule_first(const duro__schedule_rule *r, int64_t after_ms)
{
    int64_t next = 0;
    return duro__schedule_next(r, after_ms, &next) == DURO_OK ? next : 0;
}

int64_t duro__schedule_due(const duro__schedule_rule *r, int64_t next_ms,
                           int64_t buffered_ms)
{
    if (buffered_ms != 0)
        return buffered_ms;
    if (next_ms == 0)
        return 0;
    return next_ms + duro__schedule_jitter(r, next_ms);
}

int duro_schedule_spec_next_times(const duro_schedule_spec *spec,
                                  int64_t after_ms, int64_t *out, size_t max,
                                  size_t *count)
{
    if (count != NULL)
        *count = 0;
    if (count == NULL || (out == NULL && max > 0))
        return duro__fail(DURO_INVALID, "count or out is NULL");
    duro__schedule_compiled c;
    duro_error err;
    int rc = duro__schedule_compile(NULL, spec, &c, &err);
    if (rc != DURO_OK)
        return duro__fail(rc, "%s", err.message);
    int64_t t = after_ms;
    size_t n = 0;
    while (n < max && duro__schedule_next(&c.rule, t, &t) == DURO_OK)
        out[n++] = t;
    *count = n;
    duro__schedule_compiled_free(&c);
    return DURO_OK;
}

int duro_time_zone_offset(const char *time_zone, int64_t at_ms,
                          int32_t *offset_s)
{
    if (offset_s != NULL)
        *offset_s = 0;
    if (offset_s == NULL)
        return duro__fail(DURO_INVALID, "offset_s is NULL");
    const char *zone = empty(time_zone) ? "UTC" : time_zone;
    duro__tz *z = NULL;
    duro_error err;
    int rc = duro__tz_load(zone, &z, &err);
    if (rc == DURO_NOT_FOUND)
        return duro__fail(rc, "time zone '%.300s' is not in the tz database",
                          zone);
    if (rc != DURO_OK)
        return duro__fail(rc, "time zone '%.300s': %s", zone, err.message);
    /* seconds, rounded down: an instant before the epoch is in the second
     * that began before it */
    int64_t t = at_ms >= 0 ? at_ms / 1000 : -((-at_ms + 999) / 1000);
    *offset_s = duro__tz_offset(z, t);
    duro__tz_free(z);
    return DURO_OK;
}
