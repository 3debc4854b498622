/* registry.c - the names of orchestrations (by name and version) and
 * activities a runtime can run. A registry is used by one thread at a time;
 * the runtime keeps its own deep copy, read-only, shared by its threads. */
#include <string.h>

#include "runtime/runtime.h"

int duro_registry_create(duro_registry **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = duro__calloc(1, sizeof(duro_registry));
    return *out != NULL ? DURO_OK : duro__fail(DURO_NOMEM, "out of memory");
}

void duro_registry_destroy(duro_registry *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->orch_count; i++) {
        duro__free(r->orchs[i].name);
        duro__free(r->orchs[i].version);
    }
    for (size_t i = 0; i < r->act_count; i++)
        duro__free(r->acts[i].name);
    duro__free(r->orchs);
    duro__free(r->acts);
    duro__free(r);
}

static int check_name(const char *what, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return duro__fail(DURO_INVALID, "%s name is empty", what);
    if (strlen(name) > DURO__NAME_MAX)
        return duro__fail(DURO_TOO_LARGE, "%s name is longer than %d bytes",
                          what, DURO__NAME_MAX);
    return DURO_OK;
}

void duro_orchestration_options_init(duro_orchestration_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 2; /* 2: timeout_ms */
}

/* Adds an orchestration run by C function fn, or (fn NULL) by driver. */
static int add_orchestration(duro_registry *r, const char *name,
                             const char *version, duro_orchestration_fn fn,
                             const duro_driver *driver, void *user,
                             const duro_orchestration_options *opts)
{
    int rc = check_name("orchestration", name);
    if (rc != DURO_OK)
        return rc;
    duro_orchestration_options defaults;
    duro_orchestration_options_init(&defaults);
    if (opts == NULL)
        opts = &defaults;
    if (opts->version < 1)
        return duro__fail(DURO_INVALID,
                          "options.version is not set: call "
                          "duro_orchestration_options_init() first");
    if (opts->cleanup_timeout_ms < 0)
        return duro__fail(DURO_INVALID, "cleanup_timeout_ms is negative");
    if (opts->version >= 2 && opts->timeout_ms < 0)
        return duro__fail(
            DURO_INVALID, "orchestration '%s': timeout_ms is negative (%lld)",
            name != NULL ? name : "", (long long)opts->timeout_ms);
    if (version == NULL)
        version = "";
    /* A version the store cannot hold would fail every turn of every
     * instance started with it. */
    if (strlen(version) > DURO__NAME_MAX)
        return duro__fail(DURO_TOO_LARGE,
                          "orchestration '%s': version is longer than %d bytes",
                          name, DURO__NAME_MAX);
    for (size_t i = 0; i < r->orch_count; i++)
        if (strcmp(r->orchs[i].name, name) == 0 &&
            strcmp(r->orchs[i].version, version) == 0)
            return duro__fail(DURO_ALREADY_EXISTS,
                              "orchestration '%s' version '%s' is already "
                              "registered",
                              name, version);
    duro__orch_entry *e = duro__vec_push((void **)&r->orchs, &r->orch_count,
                                         &r->orch_cap, sizeof(*e));
    if (e == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    memset(e, 0, sizeof(*e));
    e->name = duro__strdup(name);
    e->version = duro__strdup(version);
    e->fn = fn;
    if (driver != NULL)
        e->driver = *driver;
    e->user = user;
    e->opts = defaults;
    e->opts.observe_cancel = opts->observe_cancel != 0;
    e->opts.cleanup_timeout_ms = opts->cleanup_timeout_ms;
    e->opts.timeout_ms = opts->version >= 2 ? opts->timeout_ms : 0;
    if (e->name == NULL || e->version == NULL) {
        duro__free(e->name);
        duro__free(e->version);
        r->orch_count--;
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    return DURO_OK;
}

int duro_registry_add_orchestration_ex(duro_registry *r, const char *name,
                                       const char *version,
                                       duro_orchestration_fn fn, void *user,
                                       const duro_orchestration_options *opts)
{
    if (r == NULL || fn == NULL)
        return duro__fail(DURO_INVALID, "registry or function is NULL");
    return add_orchestration(r, name, version, fn, NULL, user, opts);
}

int duro_registry_add_driven_orchestration(
    duro_registry *r, const char *name, const char *version,
    const duro_driver *driver, void *user,
    const duro_orchestration_options *opts)
{
    if (r == NULL || driver == NULL)
        return duro__fail(DURO_INVALID, "registry or driver is NULL");
    if (driver->version < 1)
        return duro__fail(DURO_INVALID,
                          "driver.version is %d: set it to "
                          "DURO_DRIVER_VERSION",
                          driver->version);
    if (driver->start == NULL || driver->step == NULL)
        return duro__fail(DURO_INVALID,
                          "the driver's start and step must be set");
    /* The callbacks this library knows; a newer struct's later ones are
     * not read. */
    duro_driver d = {.version = DURO_DRIVER_VERSION,
                     .start = driver->start,
                     .step = driver->step,
                     .destroy = driver->destroy};
    return add_orchestration(r, name, version, NULL, &d, user, opts);
}

int duro_registry_add_orchestration(duro_registry *r, const char *name,
                                    const char *version,
                                    duro_orchestration_fn fn, void *user)
{
    return duro_registry_add_orchestration_ex(r, name, version, fn, user, NULL);
}

int duro_registry_add_activity(duro_registry *r, const char *name,
                               duro_activity_fn fn, void *user)
{
    if (r == NULL || fn == NULL)
        return duro__fail(DURO_INVALID, "registry or function is NULL");
    int rc = check_name("activity", name);
    if (rc != DURO_OK)
        return rc;
    if (duro__registry_find_activity(r, name) != NULL)
        return duro__fail(DURO_ALREADY_EXISTS,
                          "activity '%s' is already registered", name);
    duro__activity_entry *e = duro__vec_push((void **)&r->acts, &r->act_count,
                                             &r->act_cap, sizeof(*e));
    if (e == NULL)
        return duro__fail(DURO_NOMEM, "out of memory");
    e->name = duro__strdup(name);
    e->fn = fn;
    e->user = user;
    if (e->name == NULL) {
        r->act_count--;
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    return DURO_OK;
}

int duro__registry_copy(const duro_registry *src, duro_registry **out)
{
    duro_registry *r;
    int rc = duro_registry_create(&r);
    if (rc != DURO_OK)
        return rc;
    for (size_t i = 0; src != NULL && i < src->orch_count && rc == DURO_OK;
         i++) {
        const duro__orch_entry *e = &src->orchs[i];
        rc = add_orchestration(r, e->name, e->version, e->fn,
                               e->fn == NULL ? &e->driver : NULL, e->user,
                               &e->opts);
    }
    for (size_t i = 0; src != NULL && i < src->act_count && rc == DURO_OK; i++)
        rc = duro_registry_add_activity(r, src->acts[i].name, src->acts[i].fn,
                                        src->acts[i].user);
    if (rc != DURO_OK) {
        duro_registry_destroy(r);
        return rc;
    }
    *out = r;
    return DURO_OK;
}

const duro__orch_entry *duro__registry_find_orch(const duro_registry *r,
                                                 const char *name,
                                                 const char *version)
{
    const duro__orch_entry *best = NULL;
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < r->orch_count; i++) {
        const duro__orch_entry *e = &r->orchs[i];
        if (strcmp(e->name, name) != 0)
            continue;
        /* NULL: the highest; "" is a version like any other (the
         * default one, and what an instance started on it records) */
        if (version != NULL) {
            if (strcmp(e->version, version) == 0)
                return e;
        } else if (best == NULL || strverscmp(e->version, best->version) > 0) {
            best = e;
        }
    }
    return best;
}

const duro__activity_entry *duro__registry_find_activity(const duro_registry *r,
                                                         const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < r->act_count; i++)
        if (strcmp(r->acts[i].name, name) == 0)
            return &r->acts[i];
    return NULL;
}

void duro__registry_engine_config(const duro__orch_entry *e,
                                  duro__engine_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->fn = e->fn;
    if (e->fn == NULL)
        cfg->driver = e->driver;
    cfg->user = e->user;
    cfg->observe_cancel = e->opts.observe_cancel;
    cfg->cleanup_timeout_ms = e->opts.cleanup_timeout_ms;
    cfg->timeout_ms = e->opts.timeout_ms;
    cfg->version = e->version;
}
