/* client.c - starts, signals, cancels, inspects and waits on instances over
 * any provider, from this process or another one sharing the store. A client
 * holds no state but its provider, so it may be used from any thread at
 * once. Calls are refused (DURO_MISUSE) from orchestration code, where a
 * blocking, nondeterministic store access would break replay. */
#include <string.h>

#include "base/base.h"
#include "core/fiber.h"
#include "duro.h"

struct duro_client {
    duro_provider *provider;
    int owns_provider;
};

#define ID_MAX 1024

static int misuse_check(void)
{
    if (duro__fiber_current() != NULL)
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
    o->version = 1;
}

int duro_client_start(duro_client *c, const char *instance_id,
                      const char *orchestration, const char *input,
                      const duro_start_options *opts)
{
    int rc;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK ||
        (rc = check_id("orchestration name", orchestration)) != DURO_OK)
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
    int rc, status;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK ||
        (rc = check_id("event name", name)) != DURO_OK)
        return rc;
    if ((rc = instance_status(c, instance_id, &status)) != DURO_OK)
        return rc;
    if (duro_status_is_terminal(status))
        return duro__fail(DURO_INVALID_STATE,
                          "instance '%s' is %s: it takes no more events",
                          instance_id, duro_status_name(status));
    duro_work_item item = {.kind = DURO_WORK_EXTERNAL_EVENT,
                           .instance_id = instance_id,
                           .name = name,
                           .payload = payload};
    duro_error err;
    if (c->provider->enqueue_for_orchestrator(c->provider, &item, 0, &err) !=
        DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

int duro_client_cancel(duro_client *c, const char *instance_id,
                       const char *reason, const char *requested_by)
{
    int rc, status;
    if ((rc = enter(c, "instance id", instance_id)) != DURO_OK)
        return rc;
    if ((reason && strlen(reason) > ID_MAX) ||
        (requested_by && strlen(requested_by) > ID_MAX))
        return duro__fail(DURO_TOO_LARGE,
                          "reason or requested_by longer than %d bytes",
                          ID_MAX);
    if ((rc = instance_status(c, instance_id, &status)) != DURO_OK)
        return rc;
    if (status == DURO_STATUS_CANCELLED)
        return DURO_OK; /* idempotent: the first reason stays */
    if (duro_status_is_terminal(status))
        return duro__fail(DURO_INVALID_STATE,
                          "instance '%s' is already %s; nothing to cancel",
                          instance_id, duro_status_name(status));
    duro_work_item item = {.kind = DURO_WORK_CANCEL_INSTANCE,
                           .instance_id = instance_id,
                           .reason = reason ? reason : "cancelled",
                           .requested_by = requested_by};
    duro_error err;
    if (c->provider->enqueue_for_orchestrator(c->provider, &item, 0, &err) !=
        DURO_OK)
        return duro__fail_from(&err);
    return DURO_OK;
}

/* A caller-owned copy of one info in a single allocation. */
static duro_instance_info *copy_info(const duro_instance_info *src)
{
    const char *strs[] = {src->instance_id,    src->name,  src->version,
                          src->output,         src->error, src->custom_status,
                          src->parent_instance};
    size_t n = sizeof(duro_instance_info);
    for (size_t i = 0; i < DURO__ARRAY_LEN(strs); i++)
        if (strs[i] != NULL)
            n += strlen(strs[i]) + 1;
    duro_instance_info *d = duro__malloc(n);
    if (d == NULL)
        return NULL;
    *d = *src;
    char *p = (char *)(d + 1);
    const char **dst[] = {&d->instance_id,    &d->name,  &d->version,
                          &d->output,         &d->error, &d->custom_status,
                          &d->parent_instance};
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

int duro_client_get_status(duro_client *c, const char *instance_id,
                           duro_instance_info **out)
{
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
    if (rc != DURO_OK && rc != DURO_NOT_FOUND)
        return duro__fail_from(&err);
    const duro_instance_info *src =
        rc == DURO_OK && list->count > 0 ? &list->items[0] : &missing;
    *out = copy_info(src);
    duro_instance_list_free(list);
    return *out != NULL ? DURO_OK : duro__fail(DURO_NOMEM, "out of memory");
}

int duro_client_wait(duro_client *c, const char *instance_id,
                     int64_t timeout_ms, duro_instance_info **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    int64_t deadline = duro__mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int64_t pause = 1;
    for (;;) {
        duro_instance_info *info;
        int rc = duro_client_get_status(c, instance_id, &info);
        if (rc != DURO_OK)
            return rc;
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
