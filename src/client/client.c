/* client.c - starts, signals, cancels, inspects and waits on instances over
 * any provider, from this process or another one sharing the store. A client
 * holds no state but its provider, so it may be used from any thread at
 * once. Calls are refused (DURO_MISUSE) from orchestration code, where a
 * blocking, nondeterministic store access would break replay. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/tz.h"
#include "client/client_internal.h"
#include "client/client_metrics.h"
#include "core/core.h"
#include "duro.h"
#include "providers/providers.h"

struct duro_client {
    duro_provider *provider;
    int owns_provider;
    duro__client_metrics metrics;
};

#define ID_MAX 1024

static int misuse_check(void)
{
    if (duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "the client cannot be used from orchestration "
                          "code; use the orchestration context instead");
    return DURO_OK;
}

static int check_id(const char *what, const char *id)
{
    if (id == NULL || id[0] == '\0')
        return duro__fail(DURO_INVALID, "%s is empty", what);
    if (strlen(id) > ID_MAX)
        return duro__fail(DURO_TOO_LARGE, "%s is longer than %d bytes", what,
                          ID_MAX);
    return DURO_OK;
}

/* The checks every call starts with: a client, not called from
 * orchestration code, and (with id_what) a well-formed instance id. */
static int enter(duro_client *c, const char *id_what, const char *id)
{
    if (c == NULL)
        return duro__fail(DURO_INVALID, "client is NULL");
    int rc = misuse_check();
    if (rc == DURO_OK && id_what != NULL)
        rc = check_id(id_what, id);
    return rc;
}

int duro_client_create(const char *url, duro_client **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    duro_provider *p;
    duro_error err;
    if (duro_provider_open(url, &p, &err) != DURO_OK)
        return duro__fail_from(&err);
    duro_client *c = duro__calloc(1, sizeof(*c));
    if (c == NULL) {
        duro_provider_close(p);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    c->provider = p;
    c->owns_provider = 1;
    *out = c;
    return DURO_OK;
}

int duro_client_create_with_provider(duro_provider *p, duro_client **out)
{
    if (out == NULL || p == NULL)
        return duro__fail(DURO_INVALID, "provider or out is NULL");
    *out = NULL;
    duro_client *c = duro__calloc(1, sizeof(*c));
    if (c == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    c->provider = p;
    *out = c;
    return DURO_OK;
}

void duro_client_destroy(duro_client *c)
{
    if (c == NULL)
        return;
    if (c->owns_provider)
        duro_provider_close(c->provider);
    duro__free(c);
}

void duro_start_options_init(duro_start_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 2; /* 2: deadline_ms, timeout_ms */
}

/* The deadline opts asks for (wall ms; 0: none) into *deadline, or
 * DURO_INVALID naming the field at fault. */
static int start_deadline(const duro_start_options *opts, int64_t delay,
                          int64_t *deadline)
{
    *deadline = 0;
    if (opts == NULL || opts->version < 2)
        return DURO_OK;
    if (opts->deadline_ms < 0 || opts->timeout_ms < 0)
        return duro__fail(DURO_INVALID, "start options: %s is negative (%lld)",
                          opts->deadline_ms < 0 ? "deadline_ms" : "timeout_ms",
                          (long long)(opts->deadline_ms < 0
                                          ? opts->deadline_ms
                                          : opts->timeout_ms));
    if (opts->deadline_ms > 0 && opts->timeout_ms > 0)
        return duro__fail(DURO_INVALID,
                          "start options: deadline_ms and timeout_ms are both "
                          "set; give the deadline one way");
    int64_t at = opts->deadline_ms;
    if (opts->timeout_ms > 0)
        at = duro__add_ms(duro__add_ms(duro__wall_ms(), delay),
                          opts->timeout_ms);
    /* 9999-12-31T23:59:59.999Z: what RFC 3339 can write, and far from
     * overflowing any sum a store makes with it */
    if (at > INT64_C(253402300799999))
        return duro__fail(DURO_INVALID,
                          "start options: the deadline (%lld ms) is past the "
                          "year 9999",
                          (long long)at);
    *deadline = at;
    return DURO_OK;
}

int duro_client_start(duro_client *c, const char *instance_id,
                      const char *orchestration, const char *input,
                      const duro_start_options *opts)
{
    int rc;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK ||
        (rc = check_id("orchestration name", orchestration)) != DURO_OK)
        return rc;
    /* As duro_runtime_options and duro_orchestration_options: a struct not
     * filled by its init function may hold fields this caller never set. */
    if (opts != NULL && opts->version < 1)
        return duro__fail(DURO_INVALID, "opts.version is not set: call "
                                        "duro_start_options_init() first");
    /* duro's text rule: what is stored is UTF-8 (a store may refuse
     * anything else, or keep it for every reader to trip on) */
    if ((rc = duro__check_utf8("instance id", instance_id)) != DURO_OK ||
        (rc = duro__check_utf8("orchestration name", orchestration)) !=
            DURO_OK ||
        (opts != NULL &&
         (rc = duro__check_utf8("orchestration version",
                                opts->orchestration_version)) != DURO_OK) ||
        (rc = duro__check_utf8("input", input)) != DURO_OK)
        return rc;
    duro_work_item item = {.kind = DURO_WORK_START,
                           .instance_id = instance_id,
                           .name = orchestration,
                           .payload = input};
    int64_t delay = 0;
    if (opts != NULL) {
        item.version = opts->orchestration_version;
        if (opts->idempotent)
            item.flags |= DURO_START_IDEMPOTENT;
        delay = opts->delay_ms > 0 ? opts->delay_ms : 0;
    }
    if ((rc = start_deadline(opts, delay, &item.fire_at_ms)) != DURO_OK)
        return rc;
    if (item.fire_at_ms > 0 && c->provider->version < 12)
        return duro__fail(DURO_UNSUPPORTED,
                          "a start with a deadline needs a store of provider "
                          "contract version 12; this one (%s) is version %d",
                          c->provider->name ? c->provider->name : "?",
                          c->provider->version);
    duro_error err;
    if (c->provider->enqueue_for_orchestrator(c->provider, &item, delay,
                                              &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* Status of an instance: DURO_OK with *status, DURO_NOT_FOUND, or a storage
 * error. */
static int instance_status(duro_client *c, const char *id, int *status)
{
    duro_instance_list *list = NULL;
    duro_error err;
    int rc = c->provider->get_instance(c->provider, id, &list, &err);
    if (rc == DURO_NOT_FOUND)
        return duro__fail(DURO_NOT_FOUND, "instance '%s' does not exist", id);
    if (rc != DURO_OK)
        return duro__fail_from(&err);
    *status = list->count > 0 ? list->items[0].status : DURO_STATUS_NOT_FOUND;
    duro_instance_list_free(list);
    return *status == DURO_STATUS_NOT_FOUND
               ? duro__fail(DURO_NOT_FOUND, "instance '%s' does not exist", id)
               : DURO_OK;
}

int duro_client_raise_event(duro_client *c, const char *instance_id,
                            const char *name, const char *payload)
{
    return duro_client_raise_event_once(c, instance_id, name, payload, NULL);
}

int duro_client_raise_event_once(duro_client *c, const char *instance_id,
                                 const char *name, const char *payload,
                                 const char *event_id)
{
    int rc, status;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK ||
        (rc = check_id("event name", name)) != DURO_OK ||
        (event_id != NULL &&
         (rc = check_id("event id", event_id)) != DURO_OK) ||
        (rc = duro__check_utf8("event name", name)) != DURO_OK ||
        (rc = duro__check_utf8("event id", event_id)) != DURO_OK ||
        (rc = duro__check_utf8("event payload", payload)) != DURO_OK)
        return rc;
    if (event_id != NULL && c->provider->version < 8)
        return duro__fail(DURO_INVALID,
                          "event ids need a store of provider contract "
                          "version 8 (this one: %d)",
                          c->provider->version);
    if ((rc = instance_status(c, instance_id, &status)) != DURO_OK)
        return rc;
    if (duro_status_is_terminal(status))
        return duro__fail(DURO_INVALID_STATE,
                          "instance '%s' is %s: it takes no more events",
                          instance_id, duro_status_name(status));
    duro_work_item item = {.kind = DURO_WORK_EXTERNAL_EVENT,
                           .instance_id = instance_id,
                           .name = name,
                           .payload = payload,
                           .event_id = event_id};
    duro_error err;
    if (c->provider->enqueue_for_orchestrator(c->provider, &item, 0, &err) !=
        DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* 1 when the provider has version-4 method `m`. */
#define HAS_V4(p, m) ((p)->version >= 4 && (p)->m != NULL)

static int check_reason(const char *reason, const char *requested_by)
{
    if ((reason && strlen(reason) > ID_MAX) ||
        (requested_by && strlen(requested_by) > ID_MAX))
        return duro__fail(DURO_TOO_LARGE,
                          "reason or requested_by longer than %d bytes",
                          ID_MAX);
    int rc = duro__check_utf8("reason", reason);
    return rc == DURO_OK ? duro__check_utf8("requested_by", requested_by) : rc;
}

static int unsupported(const duro_client *c, const char *what, int needed)
{
    return duro__fail(
        DURO_UNSUPPORTED,
        "%s needs a store provider of version %d implementing it; '%s' is "
        "version %d",
        what, needed, c->provider->name ? c->provider->name : "?",
        c->provider->version);
}

int duro_client_cancel(duro_client *c, const char *instance_id,
                       const char *reason, const char *requested_by)
{
    int rc, status;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK ||
        (rc = check_reason(reason, requested_by)) != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (HAS_V4(p, cancel_instances)) {
        /* The check and the request in one transaction. */
        duro_cancel_result r;
        duro_error err;
        if (p->cancel_instances(p, &instance_id, 1,
                                reason ? reason : "cancelled", requested_by, &r,
                                &err) != DURO_OK)
            return duro__fail_from(&err);
        duro__client_count_cancel(&c->metrics, r.outcome, 1);
        switch (r.outcome) {
        case DURO_CANCEL_REQUESTED:
        case DURO_CANCEL_CANCELLED:
        case DURO_CANCEL_ALREADY_CANCELLED:
            return DURO_OK; /* idempotent: the first reason stays */
        case DURO_CANCEL_NOT_FOUND:
            return duro__fail(DURO_NOT_FOUND, "instance '%s' does not exist",
                              instance_id);
        default:
            return duro__fail(DURO_INVALID_STATE,
                              "instance '%s' is already %s; nothing to cancel",
                              instance_id, duro_status_name(r.status));
        }
    }
    if ((rc = instance_status(c, instance_id, &status)) != DURO_OK) {
        if (rc == DURO_NOT_FOUND)
            duro__client_count_cancel(&c->metrics, DURO_CANCEL_NOT_FOUND, 1);
        return rc;
    }
    if (status == DURO_STATUS_CANCELLED) {
        duro__client_count_cancel(&c->metrics, DURO_CANCEL_ALREADY_CANCELLED,
                                  1);
        return DURO_OK; /* idempotent: the first reason stays */
    }
    if (duro_status_is_terminal(status)) {
        duro__client_count_cancel(&c->metrics, DURO_CANCEL_NOT_CANCELLABLE, 1);
        return duro__fail(DURO_INVALID_STATE,
                          "instance '%s' is already %s; nothing to cancel",
                          instance_id, duro_status_name(status));
    }
    duro_work_item item = {.kind = DURO_WORK_CANCEL_INSTANCE,
                           .instance_id = instance_id,
                           .reason = reason ? reason : "cancelled",
                           .requested_by = requested_by};
    duro_error err;
    if (c->provider->enqueue_for_orchestrator(c->provider, &item, 0, &err) !=
        DURO_OK)
        return duro__fail_from(&err);
    duro__client_count_cancel(&c->metrics, DURO_CANCEL_REQUESTED, 1);
    return DURO_OK;
}

/* One id of a cancel_many call and where it stands in the caller's array,
 * for finding repeated ids by sorting. */
typedef struct id_at {
    const char *id;
    size_t at;
} id_at;

static int compare_id_at(const void *x, const void *y)
{
    const id_at *a = x, *b = y;
    int c = strcmp(a->id, b->id);
    if (c != 0)
        return c;
    return (a->at > b->at) - (a->at < b->at);
}

/* What a many-ids call decided for one id: duro_cancel_result and
 * duro_control_result alike. */
typedef struct verdict {
    int outcome, status;
} verdict;

/* The batch step of decide_many: `control` 0 cancels, else a duro_control. */
static int decide_batch(duro_client *c, int control, const char *const *batch,
                        size_t n, const char *reason, const char *requested_by,
                        verdict *got, duro_error *err)
{
    duro_provider *p = c->provider;
    if (control == 0) {
        duro_cancel_result r[DURO_BULK_BATCH_MAX];
        int rc = p->cancel_instances(p, batch, n, reason, requested_by, r, err);
        for (size_t k = 0; rc == DURO_OK && k < n; k++) {
            got[k] = (verdict){r[k].outcome, r[k].status};
            duro__client_count_cancel(&c->metrics, r[k].outcome, 1);
        }
        return rc;
    }
    duro_control_result r[DURO_BULK_BATCH_MAX];
    int rc = p->control_instances(p, control, batch, n, reason, requested_by, r,
                                  err);
    for (size_t k = 0; rc == DURO_OK && k < n; k++)
        got[k] = (verdict){r[k].outcome, r[k].status};
    return rc;
}

/* The many-ids calls: each distinct id once, at its first occurrence, in
 * the caller's order, DURO_BULK_BATCH_MAX per provider call; later
 * occurrences get `duplicate` and the first one's status. v[] (count
 * entries, zeroed here) is filled batch by batch, so after a failure the
 * committed batches' verdicts stand. */
static int decide_many(duro_client *c, int control,
                       const char *const *instance_ids, size_t count,
                       const char *reason, const char *requested_by,
                       int duplicate, verdict *v)
{
    memset(v, 0, count * sizeof(*v));
    int rc = DURO_OK;
    /* first[i]: where the first occurrence of instance_ids[i] is. */
    id_at *sorted = duro__malloc(count * sizeof(*sorted));
    size_t *first = duro__malloc(count * sizeof(*first));
    const char **batch = duro__malloc(DURO_BULK_BATCH_MAX * sizeof(*batch));
    size_t *batch_at = duro__malloc(DURO_BULK_BATCH_MAX * sizeof(*batch_at));
    verdict *got = duro__malloc(DURO_BULK_BATCH_MAX * sizeof(*got));
    if (sorted == NULL || first == NULL || batch == NULL || batch_at == NULL ||
        got == NULL) {
        rc = duro__fail(DURO_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < count; i++)
        sorted[i] = (id_at){instance_ids[i], i};
    qsort(sorted, count, sizeof(*sorted), compare_id_at);
    for (size_t i = 0; i < count; i++)
        first[sorted[i].at] =
            i > 0 && strcmp(sorted[i].id, sorted[i - 1].id) == 0
                ? first[sorted[i - 1].at]
                : sorted[i].at;

    size_t next = 0;
    while (next < count) {
        size_t n = 0;
        for (; next < count && n < DURO_BULK_BATCH_MAX; next++) {
            if (first[next] != next)
                continue;
            batch[n] = instance_ids[next];
            batch_at[n++] = next;
        }
        if (n == 0)
            break;
        duro_error err;
        if (decide_batch(c, control, batch, n, reason, requested_by, got,
                         &err) != DURO_OK) {
            rc = duro__fail_from(&err);
            break;
        }
        for (size_t k = 0; k < n; k++)
            v[batch_at[k]] = got[k];
    }
    /* Later occurrences repeat the first one's status. */
    for (size_t i = 0; i < count; i++) {
        if (first[i] != i && v[first[i]].outcome != 0) {
            v[i].outcome = duplicate;
            v[i].status = v[first[i]].status;
        }
    }
done:
    duro__free(sorted);
    duro__free(first);
    duro__free(batch);
    duro__free(batch_at);
    duro__free(got);
    return rc;
}

/* The argument checks of the many-ids calls; *go = 0 when there is
 * nothing to do (count 0). */
static int enter_many(duro_client *c, const char *const *instance_ids,
                      size_t count, const char *reason,
                      const char *requested_by, const void *results, int *go)
{
    *go = 0;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK || count == 0)
        return rc;
    if (instance_ids == NULL || results == NULL)
        return duro__fail(DURO_INVALID, "instance_ids or results is NULL");
    if (count > SIZE_MAX / sizeof(id_at))
        return duro__fail(DURO_TOO_LARGE, "%zu ids", count);
    for (size_t i = 0; i < count; i++)
        if ((rc = check_id("instance id", instance_ids[i])) != DURO_OK)
            return rc;
    if ((rc = check_reason(reason, requested_by)) != DURO_OK)
        return rc;
    *go = 1;
    return DURO_OK;
}

int duro_client_cancel_many(duro_client *c, const char *const *instance_ids,
                            size_t count, const char *reason,
                            const char *requested_by,
                            duro_cancel_result *results)
{
    if (results != NULL && count > 0 && count <= SIZE_MAX / sizeof(id_at))
        memset(results, 0, count * sizeof(*results));
    int go;
    int rc =
        enter_many(c, instance_ids, count, reason, requested_by, results, &go);
    if (rc != DURO_OK || !go)
        return rc;
    if (!HAS_V4(c->provider, cancel_instances))
        return unsupported(c, "duro_client_cancel_many", 4);
    verdict *v = duro__malloc(count * sizeof(*v));
    if (v == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    rc = decide_many(c, 0, instance_ids, count, reason ? reason : "cancelled",
                     requested_by, DURO_CANCEL_DUPLICATE, v);
    for (size_t i = 0; i < count; i++)
        results[i] = (duro_cancel_result){v[i].outcome, v[i].status};
    duro__free(v);
    return rc;
}

/* ---- terminate, suspend, resume ------------------------------------------ */

#define HAS_V5(p, m) ((p)->version >= 5 && (p)->m != NULL)

static const char *control_default_reason(int control)
{
    switch (control) {
    case DURO_CONTROL_TERMINATE:
        return "terminated";
    case DURO_CONTROL_SUSPEND:
        return "suspended";
    default:
        return "resumed";
    }
}

static int check_control(int control)
{
    if (control < DURO_CONTROL_TERMINATE || control > DURO_CONTROL_RESUME)
        return duro__fail(DURO_INVALID, "unknown control %d", control);
    return DURO_OK;
}

static int control_one(duro_client *c, int control, const char *instance_id,
                       const char *reason, const char *requested_by,
                       const char *what)
{
    int rc = enter(c, "instance id", instance_id);
    if (rc == DURO_OK)
        rc = check_reason(reason, requested_by);
    if (rc != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (!HAS_V5(p, control_instances))
        return unsupported(c, what, 5);
    duro_control_result r;
    duro_error err;
    if (p->control_instances(p, control, &instance_id, 1,
                             reason ? reason : control_default_reason(control),
                             requested_by, &r, &err) != DURO_OK)
        return duro__fail_from(&err);
    if (control == DURO_CONTROL_TERMINATE &&
        r.outcome == DURO_CONTROL_OUTCOME_FINISHED &&
        r.status == DURO_STATUS_TERMINATED)
        return DURO_OK; /* idempotent, as a cancel of a cancelled one */
    switch (r.outcome) {
    case DURO_CONTROL_OUTCOME_REQUESTED:
    case DURO_CONTROL_OUTCOME_APPLIED:
        return DURO_OK;
    case DURO_CONTROL_OUTCOME_NOT_FOUND:
        return duro__fail(DURO_NOT_FOUND, "instance '%s' does not exist",
                          instance_id);
    default:
        return duro__fail(DURO_INVALID_STATE,
                          "instance '%s' is already %s; nothing to %s",
                          instance_id, duro_status_name(r.status),
                          duro_control_name(control));
    }
}

int duro_client_terminate(duro_client *c, const char *instance_id,
                          const char *reason, const char *requested_by)
{
    return control_one(c, DURO_CONTROL_TERMINATE, instance_id, reason,
                       requested_by, "duro_client_terminate");
}

int duro_client_suspend(duro_client *c, const char *instance_id,
                        const char *reason, const char *requested_by)
{
    return control_one(c, DURO_CONTROL_SUSPEND, instance_id, reason,
                       requested_by, "duro_client_suspend");
}

int duro_client_resume(duro_client *c, const char *instance_id,
                       const char *reason, const char *requested_by)
{
    return control_one(c, DURO_CONTROL_RESUME, instance_id, reason,
                       requested_by, "duro_client_resume");
}

int duro_client_control_many(duro_client *c, int control,
                             const char *const *instance_ids, size_t count,
                             const char *reason, const char *requested_by,
                             duro_control_result *results)
{
    if (results != NULL && count > 0 && count <= SIZE_MAX / sizeof(id_at))
        memset(results, 0, count * sizeof(*results));
    int go;
    int rc =
        enter_many(c, instance_ids, count, reason, requested_by, results, &go);
    if (rc == DURO_OK)
        rc = check_control(control);
    if (rc != DURO_OK || !go)
        return rc;
    if (!HAS_V5(c->provider, control_instances))
        return unsupported(c, "duro_client_control_many", 5);
    verdict *v = duro__malloc(count * sizeof(*v));
    if (v == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    rc = decide_many(c, control, instance_ids, count,
                     reason ? reason : control_default_reason(control),
                     requested_by, DURO_CONTROL_OUTCOME_DUPLICATE, v);
    for (size_t i = 0; i < count; i++)
        results[i] = (duro_control_result){v[i].outcome, v[i].status};
    duro__free(v);
    return rc;
}

void duro_bulk_options_init(duro_bulk_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 1;
}

/* The checks the two bulk calls start with. */
static int enter_bulk(duro_client *c, const duro_bulk_filter *filter,
                      duro_bulk_result **out, const char *what)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    if (filter == NULL)
        return duro__fail(DURO_INVALID, "filter is NULL");
    if ((filter->name && strlen(filter->name) > ID_MAX) ||
        (filter->version && strlen(filter->version) > ID_MAX))
        return duro__fail(DURO_TOO_LARGE,
                          "name or version filter longer than %d bytes",
                          ID_MAX);
    duro_provider *p = c->provider;
    if (p->version < 4 || p->cancel_matching == NULL ||
        p->purge_instances == NULL)
        return unsupported(c, what, 4);
    return DURO_OK;
}

int duro_client_cancel_matching(duro_client *c, const duro_bulk_filter *filter,
                                const char *reason, const char *requested_by,
                                const duro_bulk_options *opts,
                                duro_bulk_result **out)
{
    int rc = enter_bulk(c, filter, out, "duro_client_cancel_matching");
    if (rc == DURO_OK)
        rc = check_reason(reason, requested_by);
    if (rc != DURO_OK)
        return rc;
    duro_bulk_options defaults;
    duro_bulk_options_init(&defaults);
    const duro_bulk_options *o = opts != NULL ? opts : &defaults;
    duro_error err;
    duro_provider *p = c->provider;
    if (p->cancel_matching(p, filter, reason ? reason : "cancelled",
                           requested_by, o->dry_run, o->max_ids, out,
                           &err) != DURO_OK)
        return duro__fail_from(&err);
    if (!o->dry_run) {
        duro__client_count_cancel(&c->metrics, DURO_CANCEL_REQUESTED,
                                  (*out)->count - (*out)->applied);
        duro__client_count_cancel(&c->metrics, DURO_CANCEL_CANCELLED,
                                  (*out)->applied);
    }
    return DURO_OK;
}

int duro_client_control_matching(duro_client *c, int control,
                                 const duro_bulk_filter *filter,
                                 const char *reason, const char *requested_by,
                                 const duro_bulk_options *opts,
                                 duro_bulk_result **out)
{
    int rc = enter_bulk(c, filter, out, "duro_client_control_matching");
    if (rc == DURO_OK)
        rc = check_reason(reason, requested_by);
    if (rc == DURO_OK)
        rc = check_control(control);
    if (rc != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (!HAS_V5(p, control_matching))
        return unsupported(c, "duro_client_control_matching", 5);
    duro_bulk_options defaults;
    duro_bulk_options_init(&defaults);
    const duro_bulk_options *o = opts != NULL ? opts : &defaults;
    duro_error err;
    if (p->control_matching(p, control, filter,
                            reason ? reason : control_default_reason(control),
                            requested_by, o->dry_run, o->max_ids, out,
                            &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_purge(duro_client *c, const duro_bulk_filter *filter,
                      const duro_bulk_options *opts, duro_bulk_result **out)
{
    int rc = enter_bulk(c, filter, out, "duro_client_purge");
    if (rc != DURO_OK)
        return rc;
    duro_bulk_options defaults;
    duro_bulk_options_init(&defaults);
    const duro_bulk_options *o = opts != NULL ? opts : &defaults;
    duro_error err;
    duro_provider *p = c->provider;
    if (p->purge_instances(p, filter, o->dry_run, o->max_ids, out, &err) !=
        DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* A caller-owned copy of one info in a single allocation. The fields
 * version 4 appended are zero / NULL with an older provider. */
static duro_instance_info *copy_info(const duro_instance_info *src, int v4)
{
    duro_instance_info in = *src;
    if (!v4) {
        in.cancel_reason = in.cancelled_by = in.last_problem = NULL;
        in.cancel_requested_ms = in.finished_ms = 0;
        in.last_problem_ms = in.next_attempt_ms = 0;
    }
    src = &in;
    const char *strs[] = {src->instance_id,     src->name,
                          src->version,         src->output,
                          src->error,           src->custom_status,
                          src->parent_instance, src->cancel_reason,
                          src->cancelled_by,    src->last_problem};
    size_t n = sizeof(duro_instance_info);
    for (size_t i = 0; i < DURO__ARRAY_LEN(strs); i++)
        if (strs[i] != NULL)
            n += strlen(strs[i]) + 1;
    duro_instance_info *d = duro__malloc(n);
    if (d == NULL)
        return NULL;
    *d = *src;
    char *p = (char *)(d + 1);
    const char **dst[] = {&d->instance_id,     &d->name,
                          &d->version,         &d->output,
                          &d->error,           &d->custom_status,
                          &d->parent_instance, &d->cancel_reason,
                          &d->cancelled_by,    &d->last_problem};
    for (size_t i = 0; i < DURO__ARRAY_LEN(strs); i++) {
        if (strs[i] == NULL) {
            *dst[i] = NULL;
            continue;
        }
        size_t len = strlen(strs[i]) + 1;
        memcpy(p, strs[i], len);
        *dst[i] = p;
        p += len;
    }
    return d;
}

/* duro_client_get_status, saying in *retryable whether a failure of the
 * store may pass. */
static int get_status(duro_client *c, const char *instance_id,
                      duro_instance_info **out, int *retryable)
{
    *retryable = 0;
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, "instance id", instance_id);
    if (rc != DURO_OK)
        return rc;
    duro_instance_list *list = NULL;
    duro_error err;
    rc = c->provider->get_instance(c->provider, instance_id, &list, &err);
    duro_instance_info missing = {.instance_id = instance_id,
                                  .status = DURO_STATUS_NOT_FOUND};
    if (rc != DURO_OK && rc != DURO_NOT_FOUND) {
        *retryable = err.retryable;
        return duro__fail_from(&err);
    }
    const duro_instance_info *src =
        rc == DURO_OK && list->count > 0 ? &list->items[0] : &missing;
    *out = copy_info(src, c->provider->version >= 4);
    duro_instance_list_free(list);
    return *out != NULL ? DURO_OK : duro__fail(DURO_NOMEM, "out of memory");
}

int duro_client_get_status(duro_client *c, const char *instance_id,
                           duro_instance_info **out)
{
    int retryable;
    return get_status(c, instance_id, out, &retryable);
}

int duro_client_wait(duro_client *c, const char *instance_id,
                     int64_t timeout_ms, duro_instance_info **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    /* < 0: no deadline, as duro_activity_wait_cancelled() */
    int64_t deadline =
        timeout_ms < 0 ? INT64_MAX : duro__add_ms(duro__mono_ms(), timeout_ms);
    int64_t pause = 1;
    for (;;) {
        duro_instance_info *info;
        int retryable;
        int rc = get_status(c, instance_id, &info, &retryable);
        if (rc != DURO_OK) {
            /* A store that fails for a while (a restart, a lost
             * connection) does not end the wait; one still failing at the
             * deadline does, with its error. */
            int64_t left = deadline - duro__mono_ms();
            if (!retryable || left <= 0)
                return rc;
            duro__sleep_ms(DURO__MIN(pause, left));
            pause = DURO__MIN(pause * 2, 1000);
            continue;
        }
        if (duro_status_is_terminal(info->status) ||
            info->status == DURO_STATUS_NOT_FOUND) {
            *out = info;
            return info->status == DURO_STATUS_NOT_FOUND
                       ? duro__fail(DURO_NOT_FOUND,
                                    "instance '%s' does not exist", instance_id)
                       : DURO_OK;
        }
        int64_t left = deadline - duro__mono_ms();
        if (left <= 0) {
            *out = info;
            return duro__fail(DURO_TIMEOUT,
                              "instance '%s' still %s after %lld ms",
                              instance_id, duro_status_name(info->status),
                              (long long)timeout_ms);
        }
        duro_free(info);
        duro__sleep_ms(DURO__MIN(pause, left));
        pause = DURO__MIN(pause * 2, 50);
    }
}

int duro_client_read_history(duro_client *c, const char *instance_id,
                             uint64_t execution_id, duro_history **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, "instance id", instance_id);
    if (rc != DURO_OK)
        return rc;
    duro_error err;
    if (c->provider->read_history(c->provider, instance_id, execution_id, out,
                                  &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_list(duro_client *c, const duro_instance_filter *filter,
                     duro_instance_list **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    duro_instance_filter all = {0};
    duro_error err;
    if (c->provider->list_instances(c->provider, filter ? filter : &all, out,
                                    &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* ---- queries (provider contract version 10) ------------------------------ */

#define HAS_V10(p, m) ((p)->version >= 10 && (p)->m != NULL)

void duro_instance_query_init(duro_instance_query *q)
{
    if (q == NULL)
        return;
    memset(q, 0, sizeof(*q));
    q->version = DURO_INSTANCE_QUERY_VERSION;
    q->order = DURO_ORDER_ID;
    q->limit = DURO_QUERY_LIMIT_DEFAULT;
}

void duro_control_event_query_init(duro_control_event_query *q)
{
    if (q == NULL)
        return;
    memset(q, 0, sizeof(*q));
    q->version = 1;
    q->limit = DURO_QUERY_LIMIT_DEFAULT;
}

/* What of q list_instances (a store before version 10) cannot express;
 * NULL when it can express all of it. */
static const char *beyond_list(const duro_instance_query *q)
{
    if (q->order != DURO_ORDER_ID)
        return "an order other than DURO_ORDER_ID";
    if (q->name_prefix != NULL && q->name_prefix[0] != '\0')
        return "name_prefix";
    if (q->name_contains != NULL && q->name_contains[0] != '\0')
        return "name_contains";
    if (q->parent_instance != NULL)
        return "parent_instance";
    if (q->with_problem)
        return "with_problem";
    if (q->count_total)
        return "count_total";
    return NULL;
}

/* A page through list_instances, for a store of version 4 to 9 (older
 * ones lay duro_instance_info out shorter): the same rows, order and
 * cursors as query_instances gives. */
static int query_by_list(duro_client *c, const duro_instance_query *q,
                         const duro__instance_plan *plan,
                         duro_instance_page **out)
{
    duro_provider *p = c->provider;
    duro_instance_filter f = {
        .status_mask = q->status_mask,
        .name = q->name,
        .created_after_ms = q->created_after_ms,
        .created_before_ms = q->created_before_ms,
        .limit = plan->limit + 1,
        .after_instance = plan->after_id[0] != '\0' ? plan->after_id : NULL};
    duro_instance_list *list = NULL;
    duro_error err;
    if (p->list_instances(p, &f, &list, &err) != DURO_OK)
        return duro__fail_from(&err);
    duro_instance_page *page = duro_arena_alloc(list->arena, sizeof(*page));
    if (page == NULL) {
        duro_instance_list_free(list);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    page->arena = list->arena;
    page->items = list->items;
    page->count = list->count;
    page->total = -1;
    page->total_capped = 0;
    if (duro__query_page_finish(page, plan, &err) != DURO_OK) {
        duro_instance_list_free(list);
        return duro__fail_from(&err);
    }
    *out = page;
    return DURO_OK;
}

int duro_client_query(duro_client *c, const duro_instance_query *q,
                      duro_instance_page **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    duro_instance_query defaults;
    if (q == NULL) {
        duro_instance_query_init(&defaults);
        q = &defaults;
    }
    duro_provider *p = c->provider;
    /* Checked here too, so every store (and the fallback) refuses the
     * same input with the same words. */
    duro__instance_plan plan;
    duro_error err;
    if (duro__query_plan(p->name ? p->name : "store", q, 0, &plan, &err) !=
        DURO_OK) {
        duro__query_plan_free(&plan);
        return duro__fail_from(&err);
    }
    /* query version 3's filter is read from provider version 12: an
     * older provider would ignore it and list every version */
    if (plan.version != NULL && p->version < 12) {
        duro__query_plan_free(&plan);
        return unsupported(c, "duro_client_query with orchestration_version",
                           12);
    }
    if (HAS_V10(p, query_instances)) {
        duro__query_plan_free(&plan);
        if (p->query_instances(p, q, out, &err) != DURO_OK)
            return duro__fail_from(&err);
        return DURO_OK;
    }
    const char *beyond = beyond_list(q);
    if (beyond != NULL || p->version < 4) {
        duro__query_plan_free(&plan);
        return duro__fail(DURO_UNSUPPORTED,
                          "duro_client_query: %s needs a store provider of "
                          "version 10; '%s' is version %d",
                          beyond != NULL ? beyond : "a query",
                          p->name ? p->name : "?", p->version);
    }
    rc = query_by_list(c, q, &plan, out);
    duro__query_plan_free(&plan);
    return rc;
}

int duro_client_control_events(duro_client *c,
                               const duro_control_event_query *q,
                               duro_control_event_list **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    duro_control_event_query defaults;
    if (q == NULL) {
        duro_control_event_query_init(&defaults);
        q = &defaults;
    }
    duro_provider *p = c->provider;
    duro__event_plan plan;
    duro_error err;
    rc = duro__events_plan(p->name ? p->name : "store", q, 0, &plan, &err);
    duro__events_plan_free(&plan);
    if (rc != DURO_OK)
        return duro__fail_from(&err);
    if (!HAS_V10(p, list_control_events))
        return unsupported(c, "duro_client_control_events", 10);
    if (p->list_control_events(p, q, out, &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_runtimes(duro_client *c, duro_runtime_list **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (p->version < 12 || p->list_runtimes == NULL)
        return unsupported(c, "duro_client_runtimes", 12);
    duro_error err;
    if (p->list_runtimes(p, out, &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_store_stats(duro_client *c, duro_store_stats **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (!HAS_V4(p, read_store_stats))
        return unsupported(c, "duro_client_store_stats", 4);
    duro_error err;
    if (p->read_store_stats(p, out, &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_delete(duro_client *c, const char *instance_id, int force,
                       size_t *deleted)
{
    int rc = enter(c, "instance id", instance_id);
    if (rc != DURO_OK)
        return rc;
    duro_error err;
    if (c->provider->delete_instance(c->provider, instance_id, force, deleted,
                                     &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_prune(duro_client *c, const char *instance_id,
                      uint64_t keep_last, size_t *pruned)
{
    int rc = enter(c, "instance id", instance_id);
    if (rc != DURO_OK)
        return rc;
    duro_error err;
    if (c->provider->prune_executions(c->provider, instance_id, keep_last,
                                      pruned, &err) != DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* ---- metrics ---------------------------------------------------------- */

int duro_client_metrics_write(duro_client *c, FILE *out)
{
    if (c == NULL || out == NULL)
        return duro__fail(DURO_INVALID, "client or out is NULL");
    char text[1024];
    size_t len = duro__client_metrics_text(&c->metrics, text, sizeof(text));
    if (len >= sizeof(text))
        return duro__fail(DURO_ERROR, "client metrics text too long");
    if (fwrite(text, 1, len, out) != len || fflush(out) != 0)
        return duro__fail(DURO_ERROR, "writing the client's metrics failed");
    return DURO_OK;
}

int duro_client_metrics_format(duro_client *c, char *buf, size_t size,
                               size_t *needed)
{
    if (needed != NULL)
        *needed = 0;
    if (c == NULL || (buf == NULL && size > 0))
        return duro__fail(DURO_INVALID, "client is NULL, or buf with a size");
    size_t len = duro__client_metrics_text(&c->metrics, NULL, 0);
    if (needed != NULL)
        *needed = len;
    if (len >= size) {
        if (size > 0)
            buf[0] = '\0';
        return duro__fail(DURO_TOO_LARGE, "the text needs %zu bytes", len + 1);
    }
    duro__client_metrics_text(&c->metrics, buf, size);
    return DURO_OK;
}

/* ---- reset and rewind (provider version 13) ---------------------------- */

#define HAS_V13(p, m) ((p)->version >= 13 && (p)->m != NULL)
#define ENDED_MASK                                                             \
    ((1u << DURO_STATUS_COMPLETED) | (1u << DURO_STATUS_FAILED) |              \
     (1u << DURO_STATUS_CANCELLED) | (1u << DURO_STATUS_TERMINATED))

void duro_reset_options_init(duro_reset_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 2; /* 2: deadline_ms */
}

/* The request for a reset (rewind 0) or rewind (1) of one instance. */
static duro_reset_request reset_request(const char *instance_id, int rewind,
                                        const duro_reset_options *o)
{
    duro_reset_request r;
    memset(&r, 0, sizeof(r));
    r.version = 2;
    r.instance_id = instance_id;
    r.rewind = rewind;
    r.deadline_ms = o->version >= 2 ? o->deadline_ms : 0;
    r.to_event_id = o->to_event_id;
    r.execution_id = o->execution_id;
    r.reason = o->reason;
    r.requested_by = o->requested_by;
    r.dry_run = o->dry_run != 0;
    return r;
}

/* opts->deadline_ms: 0, DURO_DEADLINE_NONE, or a time after now and
 * before the year 10000. */
static int check_reset_deadline(const duro_reset_options *o)
{
    if (o->version < 2 || o->deadline_ms == 0 ||
        o->deadline_ms == DURO_DEADLINE_NONE)
        return DURO_OK;
    if (o->deadline_ms < 0)
        return duro__fail(DURO_INVALID,
                          "reset options: deadline_ms is %lld (0 keeps the "
                          "instance's, DURO_DEADLINE_NONE (-1) drops it, a "
                          "time after now sets a new one)",
                          (long long)o->deadline_ms);
    if (o->deadline_ms > INT64_C(253402300799999))
        return duro__fail(DURO_INVALID,
                          "reset options: the deadline (%lld ms) is past the "
                          "year 9999",
                          (long long)o->deadline_ms);
    if (o->deadline_ms <= duro__wall_ms()) {
        char at[40];
        duro__format_utc(at, sizeof(at), o->deadline_ms);
        return duro__fail(DURO_INVALID,
                          "reset options: the new deadline (%s) has already "
                          "passed",
                          at);
    }
    return DURO_OK;
}

static int reset_one(duro_client *c, const char *instance_id, int rewind,
                     const duro_reset_options *opts, duro_reset_result *out,
                     const char *what)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    int rc = enter(c, "instance id", instance_id);
    duro_reset_options defaults;
    duro_reset_options_init(&defaults);
    const duro_reset_options *o = opts != NULL ? opts : &defaults;
    if (rc == DURO_OK)
        rc = check_reason(o->reason, o->requested_by);
    if (rc != DURO_OK)
        return rc;
    if (o->version < 1)
        return duro__fail(DURO_INVALID,
                          "%s: options not initialized "
                          "(duro_reset_options_init)",
                          what);
    if (rewind && o->to_event_id != 0)
        return duro__fail(DURO_INVALID,
                          "%s: a rewind goes to the last good point; "
                          "to_event_id must be 0",
                          what);
    if ((rc = check_reset_deadline(o)) != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (!HAS_V13(p, reset_instance))
        return unsupported(c, what, 13);
    duro_reset_request r = reset_request(instance_id, rewind, o);
    duro_reset_result res;
    duro_error err;
    if (p->reset_instance(p, &r, &res, &err) != DURO_OK)
        return duro__fail_from(&err);
    if (out != NULL)
        *out = res;
    return DURO_OK;
}

int duro_client_reset(duro_client *c, const char *instance_id,
                      const duro_reset_options *opts, duro_reset_result *out)
{
    return reset_one(c, instance_id, 0, opts, out, "duro_client_reset");
}

int duro_client_rewind(duro_client *c, const char *instance_id,
                       const duro_reset_options *opts, duro_reset_result *out)
{
    return reset_one(c, instance_id, 1, opts, out, "duro_client_rewind");
}

void duro_reset_list_free(duro_reset_list *l)
{
    if (l == NULL)
        return;
    duro_arena_destroy(l->arena);
    duro__free(l);
}

/* The checks of duro_client_reset_matching() after enter_bulk's. */
static int check_reset_filter(const duro_bulk_filter *f,
                              const duro_reset_options *o, size_t max)
{
    if ((f->status_mask & ~ENDED_MASK) != 0)
        return duro__fail(DURO_INVALID,
                          "status_mask 0x%x: only ended instances (Completed, "
                          "Failed, Cancelled, Terminated) can be reset",
                          (unsigned)f->status_mask);
    if (f->version != NULL || f->finished_before_ms != 0)
        return duro__fail(DURO_INVALID,
                          "a reset by filter takes name, statuses and the "
                          "created range only (no version or "
                          "finished_before_ms)");
    if (f->created_after_ms < 0 || f->created_before_ms < 0)
        return duro__fail(DURO_INVALID, "a negative created bound");
    if (o->version < 1)
        return duro__fail(DURO_INVALID, "options not initialized "
                                        "(duro_reset_options_init)");
    if (o->to_event_id != 0 || o->execution_id != 0)
        return duro__fail(DURO_INVALID,
                          "a reset by filter goes to each instance's last "
                          "good point: to_event_id and execution_id must be 0");
    if (max > DURO_BULK_BATCH_MAX)
        return duro__fail(DURO_INVALID, "max %zu is over %d", max,
                          DURO_BULK_BATCH_MAX);
    int rc = check_reset_deadline(o);
    return rc != DURO_OK ? rc : check_reason(o->reason, o->requested_by);
}

/* The ids the filter selects, at most max, in id order, into l's arena. */
static int matching_ids(duro_provider *p, const duro_bulk_filter *f, size_t max,
                        duro_reset_list *l, duro_error *err)
{
    duro_instance_query q;
    duro_instance_query_init(&q);
    q.status_mask =
        f->status_mask != 0 ? f->status_mask : 1u << DURO_STATUS_FAILED;
    q.name = f->name;
    q.created_after_ms = f->created_after_ms;
    q.created_before_ms = f->created_before_ms;
    q.order = DURO_ORDER_ID;
    q.limit = max < DURO_QUERY_LIMIT_MAX ? max : DURO_QUERY_LIMIT_MAX;
    l->items = duro_arena_alloc(l->arena, max * sizeof(*l->items));
    if (l->items == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    char *cursor = NULL;
    int rc = DURO_OK;
    while (rc == DURO_OK && l->count < max) {
        q.cursor = cursor;
        duro_instance_page *page = NULL;
        rc = p->query_instances(p, &q, &page, err);
        if (rc != DURO_OK)
            break;
        for (size_t i = 0; i < page->count && l->count < max; i++) {
            const char *id =
                duro_arena_strdup(l->arena, page->items[i].instance_id);
            if (id == NULL)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
            else
                l->items[l->count++].instance_id = id;
        }
        duro__free(cursor);
        cursor = NULL;
        if (rc == DURO_OK && page->next_cursor != NULL) {
            cursor = duro__strdup(page->next_cursor);
            if (cursor == NULL)
                rc = duro_error_set(err, DURO_NOMEM, 0, "out of memory");
        }
        int more = page->next_cursor != NULL;
        duro_instance_page_free(page);
        if (!more)
            break;
    }
    duro__free(cursor);
    return rc;
}

int duro_client_reset_matching(duro_client *c, const duro_bulk_filter *filter,
                               int rewind, const duro_reset_options *opts,
                               size_t max, duro_reset_list **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int rc = enter(c, NULL, NULL);
    if (rc != DURO_OK)
        return rc;
    if (filter == NULL)
        return duro__fail(DURO_INVALID, "filter is NULL");
    if (filter->name && strlen(filter->name) > ID_MAX)
        return duro__fail(DURO_TOO_LARGE, "name filter longer than %d bytes",
                          ID_MAX);
    duro_reset_options defaults;
    duro_reset_options_init(&defaults);
    const duro_reset_options *o = opts != NULL ? opts : &defaults;
    if ((rc = check_reset_filter(filter, o, max)) != DURO_OK)
        return rc;
    duro_provider *p = c->provider;
    if (!HAS_V13(p, reset_instance) || p->query_instances == NULL)
        return unsupported(c, "duro_client_reset_matching", 13);
    duro_reset_list *l = duro__calloc(1, sizeof(*l));
    if (l == NULL || (l->arena = duro_arena_create()) == NULL) {
        duro__free(l);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    duro_error err;
    if (matching_ids(p, filter, max != 0 ? max : DURO_BULK_BATCH_MAX, l,
                     &err) != DURO_OK) {
        duro_reset_list_free(l);
        return duro__fail_from(&err);
    }
    for (size_t i = 0; i < l->count; i++) {
        duro_reset_item *it = &l->items[i];
        duro_reset_request r = reset_request(it->instance_id, rewind, o);
        it->rc = p->reset_instance(p, &r, &it->result, &err);
        if (it->rc == DURO_OK) {
            l->reset++;
        } else {
            it->message = duro_arena_strdup(l->arena, err.message);
            if (it->message == NULL) {
                duro_reset_list_free(l);
                return duro__fail(DURO_NOMEM, "out of memory");
            }
        }
    }
    *out = l;
    return DURO_OK;
}

duro_provider *duro__client_provider(duro_client *c)
{
    return c->provider;
}

int duro__client_enter(duro_client *c)
{
    return enter(c, NULL, NULL);
}
