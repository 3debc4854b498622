/* ui_schedules.c - the schedules' routes of duro ui's JSON API
 * (docs/ui-api.md "Schedules"): list, describe, and create, update, pause,
 * resume, trigger and delete through duro_client_schedule_*, as `duro
 * schedule` does them, with a dry run where the command has --dry-run.
 * Schedule ids travel as refs (base64url of the id's bytes), as instance
 * ids do; a spec is the command's JSON (json.c); times are also given as
 * the schedule's zone reads them. Runs on MHD's pool threads; keeps no
 * state. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui.h"

#define FIRE_ID_SIZE (DURO_SCHEDULE_ID_MAX + 64)
#define NEXT_SHOWN 5   /* next fire times of a create, an update, a list */
#define NEXT_MAX 100   /* ?next= (duro_client_schedule_describe's most) */
#define FIRES_SHOWN 20 /* ?fires= by default */

/* ---- times ----------------------------------------------------------------
 */

/* Sets "KEY" and "KEY_ms" (jset_time) and "KEY_local", the time in the
 * schedule's zone (null for 0). */
static void set_zoned(json_t *o, const char *key, int64_t ms, const char *zone)
{
    char local_key[64], text[96];
    snprintf(local_key, sizeof(local_key), "%s_local", key);
    jset_time(o, key, ms);
    jset(o, local_key,
         ms != 0 && *text_zone_time(zone, ms, text, sizeof(text)) != '\0'
             ? jstr(text)
             : json_null());
}

static const char *zone_of(const duro_schedule_spec *s)
{
    return s->time_zone != NULL && *s->time_zone != '\0' ? s->time_zone : "UTC";
}

/* [{time, time_ms, time_local}] of @p n fire times. */
static json_t *fire_times(const int64_t *t, size_t n, const char *zone)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        set_zoned(o, "time", t[i], zone);
        json_array_append_new(arr, o);
    }
    return arr;
}

/* Sets "KEY_ref" to the ref of instance @p id (null for NULL). */
static void set_ref(json_t *o, const char *key, const char *id)
{
    if (id == NULL) {
        jset(o, key, json_null());
        return;
    }
    char *ref = ui_ref_encode(id, strlen(id));
    jset(o, key, jstr(ref));
    free(ref);
}

/* A schedule as `duro schedule list --json` shows it, plus its ref, the
 * ref of its last instance, its next fire in its zone, and its input's
 * exact text (the spec's "input" is its JSON value when it parses: a form
 * that edits it needs the text). */
static json_t *schedule_json(const duro_schedule_info *s)
{
    json_t *o = json_schedule_info(s);
    set_ref(o, "ref", s->id);
    set_ref(o, "last_instance_ref", s->last_instance_id);
    set_zoned(o, "next", s->spec.paused ? 0 : s->next_ms, zone_of(&s->spec));
    jset(o, "input_text", jstr(s->spec.input));
    return o;
}

/* ---- the spec from JSON -------------------------------------------------- */

/* The keys json_schedule_spec writes: the ones a spec is read from. */
static const char *const spec_keys[] = {
    "cron",      "interval_ms",   "offset_ms",
    "time_zone", "orchestration", "orchestration_version",
    "input",     "overlap",       "catchup_window_ms",
    "jitter_ms", "timeout_ms",    "paused",
    "note",      "start",         "start_ms",
    "end",       "end_ms",        NULL};

/* A string field: *out NULL when absent or null, else its text (borrowed).
 * -1 with @p err set for another type or a NUL inside. */
static int spec_text(json_t *o, const char *key, const char **out, char *err,
                     size_t size)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, size, "spec.%s must be a string or null", key);
        return -1;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(err, size, "spec.%s holds a NUL", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* An integer field (absent or null: @p *out unchanged). */
static int spec_int(json_t *o, const char *key, int64_t *out, char *err,
                    size_t size)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v)) {
        snprintf(err, size, "spec.%s must be an integer (milliseconds)", key);
        return -1;
    }
    *out = (int64_t)json_integer_value(v);
    return 0;
}

/* "start" (RFC 3339 UTC) or "start_ms" (ms since the epoch), or both when
 * they name the same instant (a spec read back as written). */
static int spec_time(json_t *o, const char *key, int64_t *out, char *err,
                     size_t size)
{
    char ms_key[32];
    snprintf(ms_key, sizeof(ms_key), "%s_ms", key);
    int64_t ms = 0, text_ms = 0;
    const char *text;
    if (spec_int(o, ms_key, &ms, err, size) != 0 ||
        spec_text(o, key, &text, err, size) != 0)
        return -1;
    if (text != NULL && args_parse_iso(text, &text_ms) != 0) {
        snprintf(err, size,
                 "spec.%s: expected an RFC 3339 time "
                 "(2026-05-01T12:00:00Z)",
                 key);
        return -1;
    }
    if (text != NULL && ms != 0 && text_ms != ms) {
        snprintf(err, size, "spec.%s and spec.%s name different times", key,
                 ms_key);
        return -1;
    }
    *out = text != NULL ? text_ms : ms;
    return 0;
}

/* A spec from JSON object @p o, whose keys are spec_keys (the caller
 * checked them; any left out is the default; "start" as RFC 3339 or "start_ms",
 * "end" the same; "input" a string as its text, another value as its compact
 * JSON, into
 * *@p input: caller frees with free()). Strings are borrowed from @p o. 0,
 * or -1 with @p err saying what is wrong (a wrong type, an unknown overlap
 * word): the library checks the rest. */
static int spec_read(json_t *o, duro_schedule_spec *s, char **input, char *err,
                     size_t size)
{
    duro_schedule_spec_init(s);
    *input = NULL;
    const char *overlap;
    if (spec_text(o, "cron", &s->cron, err, size) != 0 ||
        spec_text(o, "time_zone", &s->time_zone, err, size) != 0 ||
        spec_text(o, "orchestration", &s->orchestration, err, size) != 0 ||
        spec_text(o, "orchestration_version", &s->orchestration_version, err,
                  size) != 0 ||
        spec_text(o, "note", &s->note, err, size) != 0 ||
        spec_text(o, "overlap", &overlap, err, size) != 0 ||
        spec_int(o, "interval_ms", &s->interval_ms, err, size) != 0 ||
        spec_int(o, "offset_ms", &s->offset_ms, err, size) != 0 ||
        spec_int(o, "catchup_window_ms", &s->catchup_window_ms, err, size) !=
            0 ||
        spec_int(o, "jitter_ms", &s->jitter_ms, err, size) != 0 ||
        spec_int(o, "timeout_ms", &s->timeout_ms, err, size) != 0 ||
        spec_time(o, "start", &s->start_ms, err, size) != 0 ||
        spec_time(o, "end", &s->end_ms, err, size) != 0)
        return -1;
    if (s->orchestration_version != NULL && *s->orchestration_version == '\0')
        s->orchestration_version = NULL; /* "": the default, as written */
    if (overlap != NULL && (s->overlap = schedule_overlap_parse(overlap)) < 0) {
        char shown[TEXT_QUOTE_SIZE];
        snprintf(err, size,
                 "spec.overlap: '%s' is none of skip, buffer-one, allow-all, "
                 "cancel-other, terminate-other",
                 text_quote(overlap, shown, sizeof(shown)));
        return -1;
    }
    json_t *p = json_object_get(o, "paused");
    if (p != NULL && !json_is_null(p) && !json_is_boolean(p)) {
        snprintf(err, size, "spec.paused must be true or false");
        return -1;
    }
    s->paused = json_is_true(p);
    /* the input: a string is its text, any other JSON value its compact
     * JSON (as `duro start --input` and raise-event take them) */
    json_t *in = json_object_get(o, "input");
    if (json_is_string(in)) {
        if (strlen(json_string_value(in)) != json_string_length(in)) {
            snprintf(err, size, "spec.input holds a NUL");
            return -1;
        }
        *input = strdup(json_string_value(in));
    } else if (in != NULL && !json_is_null(in)) {
        *input = json_dumps(in, JSON_COMPACT | JSON_ENCODE_ANY);
    }
    if ((in != NULL && !json_is_null(in) && *input == NULL))
        abort();
    s->input = *input;
    return 0;
}

/* ---- GET ------------------------------------------------------------------
 */

int ui_get_schedules(ui_request *r, json_t *body)
{
    (void)body;
    static const char *const known[] = {NULL};
    int rc = 0;
    if (ui_known_args(r, known, &rc) != 0)
        return rc;
    duro_schedule_description *d = NULL;
    int drc = duro_client_schedule_list(r->srv->client, &d);
    if (drc != DURO_OK)
        return ui_send_rc(r, drc, "listing the schedules");
    json_t *arr = json_array();
    for (size_t i = 0; i < d->count; i++)
        json_array_append_new(arr, schedule_json(&d->schedules[i]));
    duro_schedule_description_free(d);
    json_t *doc = json_object();
    jset(doc, "schedules", arr);
    jset(doc, "read_only", json_boolean(r->srv->read_only));
    return ui_send_json(r, 200, doc);
}

/* GET schedule?ref=&next=&fires=: the spec and state, the next fire
 * times (in UTC and the schedule's zone) and the recent fires, newest
 * first, with their instances' refs and status now. */
int ui_get_schedule(ui_request *r, json_t *body)
{
    (void)body;
    static const char *const known[] = {"ref", "next", "fires", NULL};
    int rc = 0;
    uint64_t next, fires;
    if (ui_known_args(r, known, &rc) != 0 ||
        ui_arg_uint(r, "next", NEXT_SHOWN, NEXT_MAX, &next, &rc) != 0 ||
        ui_arg_uint(r, "fires", FIRES_SHOWN, DURO_SCHEDULE_FIRES_KEPT, &fires,
                    &rc) != 0)
        return rc;
    char *id = ui_need_ref(r, ui_arg(r, "ref"), "a schedule", &rc);
    if (id == NULL)
        return rc;
    duro_schedule_description *d = NULL;
    int drc = duro_client_schedule_describe(r->srv->client, id, (size_t)next,
                                            (size_t)fires, &d);
    free(id);
    if (drc != DURO_OK)
        return ui_send_rc(r, drc, "describing the schedule");
    const duro_schedule_info *s = &d->schedules[0];
    const char *zone = zone_of(&s->spec);
    json_t *doc = schedule_json(s);
    jset(doc, "next_fire_times",
         fire_times(d->next_times, d->next_count, zone));
    json_t *arr = json_array();
    for (size_t i = 0; i < d->fire_count; i++) {
        const duro_schedule_fire *f = &d->fires[i];
        json_t *o = json_schedule_fire(f);
        set_zoned(o, "time", f->time_ms, zone);
        set_ref(o, "instance_ref", f->instance_id);
        json_array_append_new(arr, o);
    }
    jset(doc, "recent_fires", arr);
    jset(doc, "read_only", json_boolean(r->srv->read_only));
    duro_schedule_description_free(d);
    return ui_send_json(r, 200, doc);
}

/* ---- POST -----------------------------------------------------------------
 */

/* dry_run of @p body: 0 or 1, or -1 after queueing the 400. */
static int dry_run_of(ui_request *r, json_t *body, int *rc)
{
    json_t *dj = json_object_get(body, "dry_run");
    if (dj != NULL && !json_is_boolean(dj)) {
        *rc = ui_send_error(r, 400, "bad_argument",
                            "dry_run must be true or false");
        return -1;
    }
    return json_is_true(dj);
}

/* A refused spec (the library's check: a cron expression that does not
 * parse, an unknown zone, an offset out of range, ...): 400 with the
 * library's message whole. */
static int send_bad_spec(ui_request *r, int drc)
{
    const char *detail = duro_errmsg();
    return ui_send_error(
        r, 400, "bad_spec", "%s",
        detail != NULL && *detail != '\0' ? detail : duro_strerror(drc));
}

/* create {id, spec, dry_run} and update {ref, spec, dry_run}: the spec
 * checked by the library and its next fire times computed (a dry run
 * stops there, after reading whether the id is taken, or known), then
 * duro_client_schedule_create or _update. */
static int post_create_or_update(ui_request *r, json_t *body, int update)
{
    static const char *const create_keys[] = {"id", "spec", "dry_run", NULL};
    static const char *const update_keys[] = {"ref", "spec", "dry_run", NULL};
    int rc = 0, dry_run;
    const char *given;
    if (ui_known_keys(r, body, "body", update ? update_keys : create_keys,
                      &rc) != 0 ||
        ui_body_text(r, body, "", update ? "ref" : "id", &given, &rc) != 0 ||
        (dry_run = dry_run_of(r, body, &rc)) < 0)
        return rc;
    char *id = NULL;
    if (update) {
        if ((id = ui_need_ref(r, given, "a schedule", &rc)) == NULL)
            return rc;
    } else if (given == NULL) {
        return ui_send_error(r, 400, "bad_argument", "id is required");
    } else if ((id = strdup(given)) == NULL) {
        abort();
    }
    json_t *sj = json_object_get(body, "spec");
    duro_schedule_spec spec;
    char *input = NULL, err[512];
    if (!json_is_object(sj)) {
        free(id);
        return ui_send_error(r, 400, "bad_argument",
                             sj == NULL ? "spec is required"
                                        : "spec must be an object");
    }
    if (ui_known_keys(r, sj, "spec", spec_keys, &rc) != 0) {
        free(id);
        return rc;
    }
    if (spec_read(sj, &spec, &input, err, sizeof(err)) != 0) {
        free(id);
        return ui_send_error(r, 400, "bad_argument", "%s", err);
    }
    if (spec.note != NULL && !spec.paused) {
        free(input);
        free(id);
        return ui_send_error(r, 400, "bad_argument",
                             "spec.note goes with spec.paused");
    }
    int64_t next[NEXT_SHOWN];
    size_t n = 0;
    int sent = 0; /* a refusal was queued (rc its MHD result) */
    int drc = duro_schedule_spec_next_times(&spec, ui_wall_ms(), next,
                                            NEXT_SHOWN, &n);
    if (drc == DURO_INVALID || drc == DURO_NOT_FOUND || drc == DURO_TOO_LARGE) {
        rc = send_bad_spec(r, drc);
        sent = 1;
    } else if (drc != DURO_OK) {
        rc = ui_send_rc(r, drc, "checking the spec");
        sent = 1;
    } else if (dry_run) {
        /* what the real one would meet: the id taken, or unknown */
        duro_schedule_description *d = NULL;
        drc = duro_client_schedule_describe(r->srv->client, id, 0, 0, &d);
        duro_schedule_description_free(d);
        char shown[TEXT_QUOTE_SIZE];
        if (!update && drc == DURO_OK) {
            rc = ui_send_error(r, 409, "already_exists",
                               "schedule %s already exists (update changes "
                               "it)",
                               text_quote(id, shown, sizeof(shown)));
            sent = 1;
        } else if (drc != DURO_OK && !(!update && drc == DURO_NOT_FOUND)) {
            rc = ui_send_rc(r, drc, update ? "update" : "create");
            sent = 1;
        }
    } else {
        drc = update ? duro_client_schedule_update(r->srv->client, id, &spec)
                     : duro_client_schedule_create(r->srv->client, id, &spec);
        if (drc == DURO_INVALID || drc == DURO_TOO_LARGE)
            rc = send_bad_spec(r, drc);
        else if (drc != DURO_OK)
            rc = ui_send_rc(r, drc, update ? "update" : "create");
        else
            ui_log_action(r, update ? "schedule update" : "schedule create", id,
                          update ? "updated" : "created");
        sent = drc != DURO_OK;
    }
    if (!sent) {
        json_t *doc = json_object();
        jset(doc, "id", jstr(id));
        set_ref(doc, "ref", id);
        jset(doc, "dry_run", json_boolean(dry_run));
        jset(doc, update ? "updated" : "created", json_boolean(!dry_run));
        jset(doc, "spec", json_schedule_spec(&spec));
        jset(doc, "next_fire_times",
             fire_times(next, spec.paused ? 0 : n, zone_of(&spec)));
        jset(doc, "requested_by", jstr(r->who->requester));
        rc = ui_send_json(r, 200, doc);
    }
    free(input);
    free(id);
    return rc;
}

int ui_post_schedule_create(ui_request *r, json_t *body)
{
    return post_create_or_update(r, body, 0);
}
int ui_post_schedule_update(ui_request *r, json_t *body)
{
    return post_create_or_update(r, body, 1);
}

typedef enum { PAUSE, RESUME, TRIGGER, DELETE } change_kind;

static const char *const change_words[] = {"paused", "resumed", "triggered",
                                           "deleted"};

/* pause {ref, note, dry_run}, resume, trigger and delete {ref, dry_run}:
 * the schedule read first (an unknown one is 404, a dry run too), then
 * the change, as `duro schedule VERB` does. Pausing and deleting never
 * touch the instances the schedule started, and the answer says so. */
static int post_change(ui_request *r, json_t *body, change_kind kind)
{
    static const char *const pause_keys[] = {"ref", "note", "dry_run", NULL};
    static const char *const keys[] = {"ref", "dry_run", NULL};
    int rc = 0, dry_run;
    const char *ref, *note;
    if (ui_known_keys(r, body, "body", kind == PAUSE ? pause_keys : keys,
                      &rc) != 0 ||
        ui_body_text(r, body, "", "ref", &ref, &rc) != 0 ||
        ui_body_text(r, body, "", "note", &note, &rc) != 0 ||
        (dry_run = dry_run_of(r, body, &rc)) < 0)
        return rc;
    char *id = ui_need_ref(r, ref, "a schedule", &rc);
    if (id == NULL)
        return rc;
    char fire[FIRE_ID_SIZE] = "";
    duro_schedule_description *d = NULL;
    int drc = duro_client_schedule_describe(r->srv->client, id, 0, 0, &d);
    if (drc == DURO_OK && !dry_run) {
        switch (kind) {
        case PAUSE:
            drc = duro_client_schedule_pause(r->srv->client, id, note);
            break;
        case RESUME:
            drc = duro_client_schedule_resume(r->srv->client, id);
            break;
        case TRIGGER:
            drc = duro_client_schedule_trigger(r->srv->client, id, fire,
                                               sizeof(fire));
            break;
        case DELETE:
            drc = duro_client_schedule_delete(r->srv->client, id);
            break;
        }
    }
    if (drc != DURO_OK) {
        duro_schedule_description_free(d);
        rc = ui_send_rc(r, drc, change_words[kind]);
        free(id);
        return rc;
    }
    if (!dry_run)
        ui_log_action(r, "schedule", id,
                      kind == TRIGGER && fire[0] != '\0' ? fire
                                                         : change_words[kind]);
    json_t *doc = json_object();
    jset(doc, "id", jstr(id));
    jset(doc, "ref", jstr(ref));
    jset(doc, "dry_run", json_boolean(dry_run));
    jset(doc, "action", jstr(change_words[kind]));
    jset(doc, "was_paused", json_boolean(d->schedules[0].spec.paused));
    if (kind == TRIGGER) {
        const char *started = !dry_run && fire[0] != '\0' ? fire : NULL;
        jset(doc, "instance", jstr(started));
        set_ref(doc, "instance_ref", started);
    }
    if (kind == PAUSE || kind == DELETE)
        jset(doc, "note", jstr("instances it already started are not touched"));
    jset(doc, "requested_by", jstr(r->who->requester));
    duro_schedule_description_free(d);
    free(id);
    return ui_send_json(r, 200, doc);
}

int ui_post_schedule_pause(ui_request *r, json_t *body)
{
    return post_change(r, body, PAUSE);
}
int ui_post_schedule_resume(ui_request *r, json_t *body)
{
    return post_change(r, body, RESUME);
}
int ui_post_schedule_trigger(ui_request *r, json_t *body)
{
    return post_change(r, body, TRIGGER);
}
int ui_post_schedule_delete(ui_request *r, json_t *body)
{
    return post_change(r, body, DELETE);
}
