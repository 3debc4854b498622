/* schedule.c - the client's schedule verbs: create, update, pause, resume,
 * trigger, delete, list and describe, over provider contract version 13.
 * Every change of a stored schedule is a read, then a write bound to the
 * row version read (retried from the read when another writer - a firing
 * runtime - came between), so no change is lost. Any thread, concurrently;
 * not from orchestration code. */
#include <inttypes.h>
#include <string.h>

#include "base/base.h"
#include "client/client_internal.h"
#include "core/schedule_spec.h"

/* Read-and-write rounds before a change gives up: each lost round means
 * another writer changed the row meanwhile. */
#define CAS_ROUNDS 20
/* Schedules read per page of a list. */
#define LIST_PAGE 500

/* The checks of every verb; *p the store's provider. */
static int enter(duro_client *c, const char *id, int need_id, duro_provider **p)
{
    int rc = duro__client_enter(c);
    if (rc != DURO_OK)
        return rc;
    *p = duro__client_provider(c);
    if ((*p)->version < 13 || (*p)->create_schedule == NULL)
        return duro__fail(DURO_UNSUPPORTED,
                          "the store's provider (contract version %d) has no "
                          "schedules (version 13)",
                          (*p)->version);
    if (need_id) {
        if (id == NULL || id[0] == '\0')
            return duro__fail(DURO_INVALID, "schedule id is empty");
        if (strlen(id) > DURO_SCHEDULE_ID_MAX)
            return duro__fail(DURO_TOO_LARGE,
                              "schedule id is longer than %d bytes",
                              DURO_SCHEDULE_ID_MAX);
    }
    return DURO_OK;
}

/* A stored schedule: its record (in list) and spec (strings in arena),
 * compiled. */
typedef struct loaded {
    duro_schedule_list *list;
    const duro_schedule_record *r;
    duro_arena *arena;
    duro_schedule_spec spec;
    duro__schedule_compiled compiled;
} loaded;

static void unload(loaded *l)
{
    duro__schedule_compiled_free(&l->compiled);
    duro_schedule_list_free(l->list);
    duro_arena_destroy(l->arena);
    memset(l, 0, sizeof(*l));
}

static int load(duro_provider *p, const char *id, loaded *l)
{
    memset(l, 0, sizeof(*l));
    duro_error err;
    duro_error_clear(&err);
    int rc = p->get_schedule(p, id, &l->list, &err);
    if (rc != DURO_OK)
        return duro__fail_from(&err);
    l->r = &l->list->items[0];
    l->arena = duro_arena_create();
    if (l->arena == NULL) {
        unload(l);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    rc = duro__schedule_spec_parse(l->r->spec, l->arena, &l->spec, &err);
    if (rc == DURO_OK)
        rc = duro__schedule_compile(l->r->id, &l->spec, &l->compiled, &err);
    if (rc != DURO_OK) {
        unload(l);
        return duro__fail(rc, "schedule '%s': %s", id, err.message);
    }
    l->spec.paused = l->r->paused;
    l->spec.note = l->r->note;
    return DURO_OK;
}

/* The spec's JSON text (free b.s with duro__free). */
static int spec_text(const duro_schedule_spec *spec, duro__strbuf *b)
{
    memset(b, 0, sizeof(*b));
    duro__schedule_spec_json(spec, b);
    if (b->oom) {
        duro__free(b->s);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    return DURO_OK;
}

int duro_client_schedule_create(duro_client *c, const char *id,
                                const duro_schedule_spec *spec)
{
    duro_provider *p;
    int rc = enter(c, id, 0, &p);
    if (rc != DURO_OK)
        return rc;
    duro__schedule_compiled compiled;
    duro_error err;
    if ((rc = duro__schedule_compile(id == NULL ? "" : id, spec, &compiled,
                                     &err)) != DURO_OK)
        return duro__fail(rc, "%s", err.message);
    duro__strbuf text;
    if ((rc = spec_text(spec, &text)) != DURO_OK) {
        duro__schedule_compiled_free(&compiled);
        return rc;
    }
    int64_t next = duro__schedule_first(&compiled.rule, duro__wall_ms());
    duro_schedule_record r;
    memset(&r, 0, sizeof(r));
    r.id = id;
    r.spec = text.s;
    r.spec_version = 1;
    r.next_ms = next;
    r.due_ms = duro__schedule_due(&compiled.rule, next, 0);
    r.paused = spec->paused;
    r.note = spec->paused ? spec->note : NULL;
    rc = p->create_schedule(p, &r, &err);
    duro__free(text.s);
    duro__schedule_compiled_free(&compiled);
    if (rc != DURO_OK)
        return duro__fail_from(&err);
    duro__schedules_poke();
    return DURO_OK;
}

/* What a change writes, from the schedule loaded: `change` edits the
 * record (and may set a new spec text). */
typedef int (*change_fn)(loaded *l, duro_schedule_record *r, void *arg,
                         duro__strbuf *text);

static int change(duro_client *c, const char *id, change_fn fn, void *arg)
{
    duro_provider *p;
    int rc = enter(c, id, 1, &p);
    if (rc != DURO_OK)
        return rc;
    for (int round = 0; round < CAS_ROUNDS; round++) {
        loaded l;
        if ((rc = load(p, id, &l)) != DURO_OK)
            return rc;
        duro_schedule_record r = *l.r;
        duro__strbuf text = {0};
        rc = fn(&l, &r, arg, &text);
        duro_error err;
        duro_error_clear(&err);
        if (rc == DURO_OK) {
            rc = p->update_schedule(p, &r, l.r->row_version, NULL, &err);
            if (rc != DURO_OK && rc != DURO_CONFLICT)
                rc = duro__fail_from(&err);
        }
        duro__free(text.s);
        unload(&l);
        if (rc != DURO_CONFLICT) {
            if (rc == DURO_OK)
                duro__schedules_poke();
            return rc;
        }
    }
    return duro__fail(DURO_CONFLICT,
                      "schedule '%s' kept changing meanwhile (%d rounds)", id,
                      CAS_ROUNDS);
}

static int update_change(loaded *l, duro_schedule_record *r, void *arg,
                         duro__strbuf *text)
{
    const duro_schedule_spec *spec = arg;
    duro__schedule_compiled compiled;
    duro_error err;
    int rc = duro__schedule_compile(l->r->id, spec, &compiled, &err);
    if (rc != DURO_OK)
        return duro__fail(rc, "%s", err.message);
    if ((rc = spec_text(spec, text)) == DURO_OK) {
        r->spec = text->s;
        r->spec_version = l->r->spec_version + 1;
        r->next_ms = duro__schedule_first(&compiled.rule, duro__wall_ms());
        r->due_ms =
            duro__schedule_due(&compiled.rule, r->next_ms, r->buffered_ms);
        r->paused = spec->paused;
        r->note = spec->paused ? spec->note : NULL;
    }
    duro__schedule_compiled_free(&compiled);
    return rc;
}

int duro_client_schedule_update(duro_client *c, const char *id,
                                const duro_schedule_spec *spec)
{
    duro_error err;
    int rc = duro__client_enter(c);
    if (rc == DURO_OK &&
        (rc = duro__schedule_compile(id, spec, NULL, &err)) != DURO_OK)
        return duro__fail(rc, "%s", err.message);
    return rc != DURO_OK ? rc
                         : change(c, id, update_change, (void *)(size_t)spec);
}

static int pause_change(loaded *l, duro_schedule_record *r, void *arg,
                        duro__strbuf *text)
{
    (void)l;
    (void)text;
    r->paused = 1;
    r->note = arg;
    return DURO_OK;
}

int duro_client_schedule_pause(duro_client *c, const char *id, const char *note)
{
    int rc = duro__client_enter(c);
    if (rc == DURO_OK)
        rc = duro__check_utf8("note", note);
    return rc != DURO_OK ? rc
                         : change(c, id, pause_change, (void *)(size_t)note);
}

static int resume_change(loaded *l, duro_schedule_record *r, void *arg,
                         duro__strbuf *text)
{
    (void)arg;
    (void)text;
    if (!l->r->paused)
        return DURO_OK;
    r->paused = 0;
    r->note = NULL;
    r->next_ms = duro__schedule_first(&l->compiled.rule, duro__wall_ms());
    r->due_ms =
        duro__schedule_due(&l->compiled.rule, r->next_ms, r->buffered_ms);
    return DURO_OK;
}

int duro_client_schedule_resume(duro_client *c, const char *id)
{
    return change(c, id, resume_change, NULL);
}

int duro_client_schedule_delete(duro_client *c, const char *id)
{
    duro_provider *p;
    int rc = enter(c, id, 1, &p);
    if (rc != DURO_OK)
        return rc;
    duro_error err;
    if (p->delete_schedule(p, id, &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_schedule_trigger(duro_client *c, const char *id,
                                 char *instance_id, size_t size)
{
    if (instance_id != NULL && size > 0)
        instance_id[0] = '\0';
    duro_provider *p;
    int rc = enter(c, id, 1, &p);
    if (rc != DURO_OK)
        return rc;
    if (instance_id != NULL && size < DURO__FIRE_ID_MAX)
        return duro__fail(DURO_INVALID,
                          "instance_id holds %zu bytes; a trigger's id needs "
                          "up to %d",
                          size, DURO__FIRE_ID_MAX);
    char fire_id[DURO__FIRE_ID_MAX];
    char reason[DURO_SCHEDULE_ID_MAX + 40], by[DURO_SCHEDULE_ID_MAX + 16];
    snprintf(reason, sizeof(reason), "schedule %s: overlap policy", id);
    snprintf(by, sizeof(by), "schedule:%s", id);
    for (int round = 0; round < CAS_ROUNDS; round++) {
        loaded l;
        if ((rc = load(p, id, &l)) != DURO_OK)
            return rc;
        const duro_schedule_record *r = l.r;
        int64_t now = duro__wall_ms();
        duro__schedule_fire_id(id, now, 1, fire_id);
        duro_schedule_action a[2];
        memset(a, 0, sizeof(a));
        size_t n = 0;
        int live = duro__status_is_live(r->last_status);
        duro_schedule_record after = *r;
        int start = 1;
        if (live) {
            switch (l.spec.overlap) {
            case DURO_OVERLAP_ALLOW_ALL:
                break;
            case DURO_OVERLAP_BUFFER_ONE:
                start = 0;
                a[n].time_ms = now;
                a[n].count = 1;
                if (r->buffered_ms == 0) {
                    a[n++].kind = DURO_SCHEDULE_BUFFER;
                    after.buffered_ms = now;
                } else {
                    a[n].kind = DURO_SCHEDULE_SKIP;
                    a[n++].why = "trigger: a fire is buffered already";
                }
                break;
            case DURO_OVERLAP_CANCEL_OTHER:
            case DURO_OVERLAP_TERMINATE_OTHER:
                a[n].kind = DURO_SCHEDULE_STOP_LAST;
                a[n].time_ms = now;
                a[n].count = 1;
                a[n].instance_id = r->last_instance_id;
                a[n].terminate = l.spec.overlap == DURO_OVERLAP_TERMINATE_OTHER;
                a[n].reason = reason;
                a[n++].requested_by = by;
                break;
            default:
                start = 0;
                a[n].kind = DURO_SCHEDULE_SKIP;
                a[n].time_ms = now;
                a[n].count = 1;
                a[n++].why =
                    "trigger: overlap: the last fire's instance has not ended";
                break;
            }
        }
        if (start) {
            a[n].kind = DURO_SCHEDULE_START;
            a[n].time_ms = now;
            a[n].count = 1;
            a[n].why = "trigger";
            a[n].instance_id = fire_id;
            a[n].name = l.spec.orchestration;
            a[n].version = l.spec.orchestration_version;
            a[n].deadline_ms = l.spec.timeout_ms > 0
                                   ? duro__add_ms(now, l.spec.timeout_ms)
                                   : 0;
            a[n++].input = l.spec.input;
        }
        after.due_ms = duro__schedule_due(&l.compiled.rule, after.next_ms,
                                          after.buffered_ms);
        duro_error err;
        duro_error_clear(&err);
        rc = p->apply_schedule(p, id, r->row_version, a, n, &after, NULL, &err);
        unload(&l);
        if (rc == DURO_CONFLICT)
            continue;
        if (rc != DURO_OK)
            return duro__fail_from(&err);
        if (start && instance_id != NULL)
            snprintf(instance_id, size, "%s", fire_id);
        duro__schedules_poke();
        return DURO_OK;
    }
    return duro__fail(DURO_CONFLICT,
                      "schedule '%s' kept changing meanwhile (%d rounds)", id,
                      CAS_ROUNDS);
}

/* ---- list and describe -------------------------------------------------- */

/* Copies record r (and its parsed spec) into info, strings in arena a. */
static int info_of(duro_arena *a, const duro_schedule_record *r,
                   duro_schedule_info *info)
{
    memset(info, 0, sizeof(*info));
    duro_error err;
    char *spec_text = duro_arena_strdup(a, r->spec);
    info->id = duro_arena_strdup(a, r->id);
    if (spec_text == NULL || info->id == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    if (duro__schedule_spec_parse(spec_text, a, &info->spec, &err) != DURO_OK)
        return duro__fail(DURO_STORAGE, "schedule '%s': %s", r->id,
                          err.message);
    info->spec.paused = r->paused;
    info->spec.note = r->note != NULL ? duro_arena_strdup(a, r->note) : NULL;
    info->next_ms = r->next_ms;
    info->buffered_ms = r->buffered_ms;
    info->last_instance_id = r->last_instance_id != NULL
                                 ? duro_arena_strdup(a, r->last_instance_id)
                                 : NULL;
    info->last_status = r->last_status;
    info->fires = r->fires;
    info->skips = r->skips;
    info->created_ms = r->created_ms;
    info->updated_ms = r->updated_ms;
    return DURO_OK;
}

static duro_schedule_description *new_description(void)
{
    duro_arena *a = duro_arena_create();
    duro_schedule_description *d =
        a != NULL ? duro_arena_alloc(a, sizeof(*d)) : NULL;
    if (d == NULL) {
        duro_arena_destroy(a);
        return NULL;
    }
    memset(d, 0, sizeof(*d));
    d->internal_ = a;
    return d;
}

void duro_schedule_description_free(duro_schedule_description *d)
{
    if (d != NULL)
        duro_arena_destroy(d->internal_);
}

int duro_client_schedule_list(duro_client *c, duro_schedule_description **out)
{
    if (out != NULL)
        *out = NULL;
    duro_provider *p;
    int rc = enter(c, NULL, 0, &p);
    if (rc != DURO_OK)
        return rc;
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    duro_schedule_description *d = new_description();
    if (d == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    duro_arena *a = d->internal_;
    size_t cap = 0;
    const char *after = NULL;
    for (;;) {
        duro_schedule_list *page = NULL;
        duro_error err;
        if (p->list_schedules(p, after, LIST_PAGE, &page, &err) != DURO_OK) {
            duro_schedule_description_free(d);
            return duro__fail_from(&err);
        }
        for (size_t i = 0; i < page->count && rc == DURO_OK; i++) {
            if (d->count == cap) {
                size_t ncap = cap == 0 ? 16 : cap * 2;
                duro_schedule_info *grown =
                    duro_arena_alloc(a, ncap * sizeof(*grown));
                if (grown == NULL) {
                    rc = duro__fail(DURO_NOMEM, "out of memory");
                    break;
                }
                if (d->count > 0)
                    memcpy(grown, d->schedules, d->count * sizeof(*grown));
                d->schedules = grown;
                cap = ncap;
            }
            rc = info_of(a, &page->items[i], &d->schedules[d->count]);
            if (rc == DURO_OK)
                d->count++;
        }
        size_t got = page->count;
        duro_schedule_list_free(page);
        if (rc != DURO_OK) {
            duro_schedule_description_free(d);
            return rc;
        }
        if (got < LIST_PAGE)
            break;
        after = d->schedules[d->count - 1].id;
    }
    *out = d;
    return DURO_OK;
}

int duro_client_schedule_describe(duro_client *c, const char *id,
                                  size_t next_count, size_t fire_count,
                                  duro_schedule_description **out)
{
    if (out != NULL)
        *out = NULL;
    duro_provider *p;
    int rc = enter(c, id, 1, &p);
    if (rc != DURO_OK)
        return rc;
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    if (next_count > 100 || fire_count > DURO_SCHEDULE_FIRES_KEPT)
        return duro__fail(DURO_INVALID,
                          "next_count %zu (at most 100) or fire_count %zu (at "
                          "most %d)",
                          next_count, fire_count, DURO_SCHEDULE_FIRES_KEPT);
    loaded l;
    if ((rc = load(p, id, &l)) != DURO_OK)
        return rc;
    duro_schedule_description *d = new_description();
    duro_arena *a = d != NULL ? d->internal_ : NULL;
    if (d != NULL)
        d->schedules = duro_arena_alloc(a, sizeof(*d->schedules));
    if (d == NULL || d->schedules == NULL ||
        (next_count > 0 && (d->next_times = duro_arena_alloc(
                                a, next_count * sizeof(int64_t))) == NULL)) {
        unload(&l);
        duro_schedule_description_free(d);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    rc = info_of(a, l.r, &d->schedules[0]);
    d->count = rc == DURO_OK;
    /* The next fire times as the planner will decide them: from the
     * stored next one on (none while paused: resuming starts from then). */
    int64_t t = l.r->next_ms;
    for (size_t i = 0;
         rc == DURO_OK && i < next_count && t != 0 && !l.r->paused; i++) {
        d->next_times[d->next_count++] = t;
        if (duro__schedule_next(&l.compiled.rule, t, &t) != DURO_OK)
            t = 0;
    }
    unload(&l);
    duro_schedule_fire_list *fires = NULL;
    duro_error err;
    if (rc == DURO_OK && fire_count > 0 &&
        p->list_schedule_fires(p, id, fire_count, &fires, &err) != DURO_OK)
        rc = duro__fail_from(&err);
    if (rc == DURO_OK && fires != NULL && fires->count > 0) {
        d->fires = duro_arena_alloc(a, fires->count * sizeof(*d->fires));
        if (d->fires == NULL)
            rc = duro__fail(DURO_NOMEM, "out of memory");
        for (size_t i = 0; rc == DURO_OK && i < fires->count; i++) {
            const duro_schedule_action *f = &fires->items[i];
            duro_schedule_fire *o = &d->fires[i];
            o->action = f->kind;
            o->time_ms = f->time_ms;
            o->count = f->count;
            o->instance_id = f->instance_id != NULL
                                 ? duro_arena_strdup(a, f->instance_id)
                                 : NULL;
            o->instance_status = f->instance_status;
            o->why = f->why != NULL ? duro_arena_strdup(a, f->why) : NULL;
            o->recorded_ms = f->recorded_ms;
            d->fire_count++;
        }
    }
    duro_schedule_fire_list_free(fires);
    if (rc != DURO_OK) {
        duro_schedule_description_free(d);
        return rc;
    }
    *out = d;
    return DURO_OK;
}
