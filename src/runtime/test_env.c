/* test_env.c - duro_test_env: a store, a client and a runtime on the virtual
 * clock (base/util.c's offset), which skips to the next due time while a
 * test waits and nothing can run. Owns the temporary store's directory and
 * the process's one claim on the clock. Used by one thread at a time; its
 * skips read the runtime's loop count (rt->loops) that the runtime's threads
 * change. */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule_spec.h"
#include "runtime/runtime.h"
#include "providers/providers.h"

/* Both lock timeouts of the default runtime options: ten years of virtual
 * time, so that no skip or advance expires the lock of a turn or activity
 * in progress (one process holds every lock: none needs taking over). */
#define TEST_LOCK_TIMEOUT_MS (10LL * 365 * 24 * 3600 * 1000)

/* The longest pause between two looks of duro_test_env_wait(): a turn or
 * an activity's end is seen within it. */
#define WAIT_PAUSE_MAX_MS 10

struct duro_test_env {
    duro_provider *provider; /* shared by the runtime and the client */
    duro_runtime *runtime;
    duro_client *client;
    char *dir;   /* the temporary store's directory, or NULL */
    int started; /* duro_test_env_start() succeeded */
};

/* The process's one environment: set while one is open. */
static atomic_int env_open;

void duro_test_env_options_init(duro_test_env_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 1;
}

/* Removes dir and the files in it (the store, its WAL and shared
 * memory); best effort. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[4096];
            if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) <
                (int)sizeof(path))
                unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* A new temporary directory in *dir and the URL of a store in it in
 * *url (both caller-owned). */
static int make_temp_store(char **dir, char **url)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    size_t size = strlen(base) + 32;
    char *d = duro__malloc(size);
    char *u = duro__malloc(size + 32);
    if (d == NULL || u == NULL) {
        duro__free(d);
        duro__free(u);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    snprintf(d, size, "%s/duro-test-env-XXXXXX", base);
    if (mkdtemp(d) == NULL) {
        int e = errno;
        int rc = duro__fail(DURO_ERROR,
                            "test env: cannot make a temporary directory in "
                            "'%s': %s",
                            base, strerror(e));
        duro__free(d);
        duro__free(u);
        return rc;
    }
    snprintf(u, size + 32, "sqlite:%s/store.db", d);
    *dir = d;
    *url = u;
    return DURO_OK;
}

static void env_free(duro_test_env *env)
{
    duro_runtime_destroy(env->runtime);
    duro_client_destroy(env->client);
    if (env->provider != NULL)
        duro_provider_close(env->provider);
    if (env->dir != NULL)
        remove_dir(env->dir);
    duro__free(env->dir);
    duro__free(env);
}

int duro_test_env_create(const duro_registry *reg,
                         const duro_test_env_options *opts, duro_test_env **out)
{
    if (out == NULL)
        return duro__fail(DURO_INVALID, "out is NULL");
    *out = NULL;
    if (reg == NULL)
        return duro__fail(DURO_INVALID, "registry is NULL");
    if (opts != NULL && opts->version < 1)
        return duro__fail(DURO_INVALID,
                          "test env options version %d is not set: call "
                          "duro_test_env_options_init() first",
                          opts->version);
    duro_runtime_options ro;
    if (opts != NULL && opts->runtime != NULL) {
        ro = *opts->runtime;
    } else {
        duro_runtime_options_init(&ro);
        ro.orchestration_lock_timeout_ms = TEST_LOCK_TIMEOUT_MS;
        ro.worker_lock_timeout_ms = TEST_LOCK_TIMEOUT_MS;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&env_open, &expected, 1))
        return duro__fail(DURO_INVALID_STATE,
                          "another test env is open in this process: the "
                          "virtual clock is the process's, one env at a time");
    duro_test_env *env = duro__calloc(1, sizeof(*env));
    if (env == NULL) {
        atomic_store(&env_open, 0);
        return duro__fail(DURO_NOMEM, "out of memory");
    }
    char *url = NULL;
    int rc = DURO_OK;
    if (opts == NULL || opts->url == NULL)
        rc = make_temp_store(&env->dir, &url);
    if (rc == DURO_OK) {
        /* the runtime's threads, its manager and the client */
        int concurrency = duro__pool_concurrency(ro.orchestration_concurrency,
                                                 ro.worker_concurrency, 2);
        duro_error err;
        rc = duro__provider_open_for(url != NULL ? url : opts->url, concurrency,
                                     &env->provider, &err);
        if (rc != DURO_OK)
            rc = duro__fail_from(&err);
    }
    duro__free(url);
    if (rc == DURO_OK &&
        (env->provider->version < 12 || env->provider->next_due == NULL))
        rc = duro__fail(DURO_UNSUPPORTED,
                        "test env: store '%s' is provider version %d: it "
                        "cannot tell when work is next due (version 12)",
                        env->provider->name, env->provider->version);
    if (rc == DURO_OK)
        rc = duro_client_create_with_provider(env->provider, &env->client);
    if (rc == DURO_OK)
        rc = duro_runtime_create_with_provider(env->provider, reg, &ro,
                                               &env->runtime);
    if (rc != DURO_OK) {
        env_free(env);
        atomic_store(&env_open, 0);
        return rc;
    }
    duro__clock_set_offset(0);
    *out = env;
    return DURO_OK;
}

int duro_test_env_mock_activity(duro_test_env *env, const char *name,
                                duro_activity_fn fn, void *user)
{
    if (env == NULL || fn == NULL)
        return duro__fail(DURO_INVALID, "test env or function is NULL");
    if (env->started)
        return duro__fail(DURO_INVALID_STATE,
                          "test env: mock activities before "
                          "duro_test_env_start(); the runtime runs already");
    if (name == NULL || name[0] == '\0')
        return duro__fail(DURO_INVALID, "activity name is empty or NULL");
    duro_registry *r = env->runtime->registry;
    duro__activity_entry *e =
        (duro__activity_entry *)duro__registry_find_activity(r, name);
    if (e == NULL)
        return duro_registry_add_activity(r, name, fn, user);
    e->fn = fn;
    e->user = user;
    return DURO_OK;
}

int duro_test_env_start(duro_test_env *env)
{
    if (env == NULL)
        return duro__fail(DURO_INVALID, "test env is NULL");
    if (env->started)
        return duro__fail(DURO_INVALID_STATE, "test env already started");
    int rc = duro_runtime_start(env->runtime);
    if (rc == DURO_OK)
        env->started = 1;
    return rc;
}

duro_client *duro_test_env_client(duro_test_env *env)
{
    return env != NULL ? env->client : NULL;
}

/* Moves the clock ms forward and wakes every wait of the runtime, which
 * then fetches what became due. */
static void move_clock(duro_test_env *env, int64_t ms)
{
    duro__clock_set_offset(duro__add_ms(duro__clock_offset(), ms));
    env->provider->wake(env->provider, 0);
    duro__schedules_poke();
}

/* The schedules' part of the next due time (provider version 13): *due
 * and *any lowered to the earliest due schedule's time. 0 when a schedule
 * is due now that is not only waiting for its last instance to end (a
 * buffered fire): the firing thread takes it, no skip. */
static int schedules_due(duro_test_env *env, int64_t now, int64_t *due,
                         int *any)
{
    duro_provider *p = env->provider;
    if (p->version < 13 || p->due_schedules == NULL)
        return 1;
    duro_schedule_list *l = NULL;
    duro_error err;
    if (p->due_schedules(p, now, 64, &l, &err) != DURO_OK)
        return 0;
    int idle = 1;
    for (size_t i = 0; i < l->count; i++)
        if (l->items[i].buffered_ms == 0)
            idle = 0;
    if (idle && l->next_due_ms > 0 && (!*any || l->next_due_ms < *due)) {
        *due = l->next_due_ms;
        *any = 1;
    }
    duro_schedule_list_free(l);
    return idle;
}

int duro_test_env_advance(duro_test_env *env, int64_t ms)
{
    if (env == NULL)
        return duro__fail(DURO_INVALID, "test env is NULL");
    if (ms < 0)
        return duro__fail(DURO_INVALID,
                          "test env: advance by %lld ms: time only moves "
                          "forward",
                          (long long)ms);
    if (ms > 0)
        move_clock(env, ms);
    return DURO_OK;
}

int64_t duro_test_env_skipped_ms(duro_test_env *env)
{
    return env != NULL ? duro__clock_offset() : 0;
}

/* Skips to the next due time when nothing can run: every loop thread of
 * the runtime idle in its wait, before and after the store's answer (the
 * loop count unchanged between: no fetch, turn, activity or ack happened
 * meanwhile, so the answer is the state they left), and nothing due now.
 * Returns 1 when the clock moved. A failure of the store is no skip (the
 * wait looks again). */
static int try_skip(duro_test_env *env)
{
    uint64_t before, after;
    if (!duro__runtime_loops_idle(env->runtime, &before))
        return 0;
    int64_t due = 0;
    int any = 0;
    duro_error err;
    if (env->provider->next_due(env->provider, &due, &any, &err) != DURO_OK ||
        !schedules_due(env, duro__wall_ms(), &due, &any) || !any)
        return 0;
    if (!duro__runtime_loops_idle(env->runtime, &after) || after != before)
        return 0;
    int64_t now = duro__wall_ms();
    if (due <= now)
        return 0; /* fetchable now: the runtime's threads take it */
    move_clock(env, due - now);
    return 1;
}

int duro_test_env_wait(duro_test_env *env, const char *instance_id,
                       int64_t timeout_ms, duro_instance_info **out)
{
    if (out != NULL)
        *out = NULL;
    if (env == NULL || instance_id == NULL || out == NULL)
        return duro__fail(DURO_INVALID, "test env, instance id or out is NULL");
    if (duro__on_runtime_thread() || duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "duro_test_env_wait called from a thread of the "
                          "runtime (an activity or orchestration)");
    if (!env->started)
        return duro__fail(DURO_INVALID_STATE,
                          "test env: duro_test_env_wait before "
                          "duro_test_env_start(): nothing would run");
    int64_t deadline =
        timeout_ms < 0 ? INT64_MAX : duro__add_ms(duro__mono_ms(), timeout_ms);
    int64_t pause = 1;
    for (;;) {
        int64_t left = deadline - duro__mono_ms();
        /* 0 looks once: the status now, DURO_TIMEOUT while it runs */
        int rc = duro_client_wait(env->client, instance_id, 0, out);
        if (rc != DURO_TIMEOUT || left <= 0) {
            if (rc == DURO_TIMEOUT)
                rc = duro__fail(DURO_TIMEOUT,
                                "test env: instance '%s' still %s after %lld "
                                "ms (%lld ms of virtual time skipped)",
                                instance_id, duro_status_name((*out)->status),
                                (long long)timeout_ms,
                                (long long)duro__clock_offset());
            return rc;
        }
        duro_free(*out);
        *out = NULL;
        if (try_skip(env)) {
            pause = 1;
            continue;
        }
        duro__sleep_ms(DURO__MIN(pause, left));
        pause = DURO__MIN(pause * 2, WAIT_PAUSE_MAX_MS);
    }
}

void duro_test_env_destroy(duro_test_env *env)
{
    if (env == NULL)
        return;
    env_free(env);
    duro__clock_set_offset(0);
    atomic_store(&env_open, 0);
}
