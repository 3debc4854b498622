/* rt_util.c - the runtime test fixture behind rt_util.h. */
#include "rt_util.h"

#include <pthread.h>
#include <stdlib.h>

void rt_default_options(duro_runtime_options *o)
{
    duro_runtime_options_init(o);
    o->orchestration_lock_timeout_ms = 2000;
    o->worker_lock_timeout_ms = 2000;
    o->lock_renewal_ms = 200;
    o->poll_interval_ms = 50;
    o->unknown_name_retry_ms = 20;
    o->cancel_grace_ms = 2000;
    o->log_level = getenv("DURO_TEST_LOG") ? DURO_LOG_DEBUG : DURO_LOG_ERROR;
}

void rt_init(rt_fixture *f, const char *db)
{
    memset(f, 0, sizeof(*f));
    f->url = test_sqlite_url(db);
    CHECK_OK(duro_registry_create(&f->reg));
    rt_default_options(&f->opts);
}

void rt_start(rt_fixture *f)
{
    CHECK_OK(duro_runtime_create(f->url, f->reg, &f->opts, &f->rt));
    CHECK_OK(duro_runtime_start(f->rt));
    if (f->client == NULL)
        CHECK_OK(duro_client_create(f->url, &f->client));
}

void rt_stop(rt_fixture *f)
{
    duro_runtime_destroy(f->rt);
    f->rt = NULL;
}

void rt_done(rt_fixture *f)
{
    rt_stop(f);
    duro_client_destroy(f->client);
    f->client = NULL;
    duro_registry_destroy(f->reg);
    f->reg = NULL;
}

void rt_start_instance(rt_fixture *f, const char *id, const char *orch,
                       const char *input)
{
    CHECK_OK(duro_client_start(f->client, id, orch, input, NULL));
}

duro_instance_info *rt_wait(rt_fixture *f, const char *id, int64_t timeout_ms)
{
    duro_instance_info *info = NULL;
    int rc = duro_client_wait(f->client, id, timeout_ms, &info);
    if (rc != DURO_OK) {
        int status = info ? info->status : -1;
        duro_free(info);
        test_fail(__FILE__, __LINE__, "waiting for '%s': %s (%s), status %s",
                  id, duro_errname(rc), duro_errmsg(),
                  duro_status_name(status));
    }
    return info;
}

int rt_status(rt_fixture *f, const char *id)
{
    duro_instance_info *info = NULL;
    if (duro_client_get_status(f->client, id, &info) != DURO_OK)
        return -1;
    int s = info->status;
    duro_free(info);
    return s;
}

void rt_wait_status(rt_fixture *f, const char *id, int status,
                    int64_t timeout_ms)
{
    WAIT_UNTIL(rt_status(f, id) == status, timeout_ms);
}

duro_history *rt_history(rt_fixture *f, const char *id)
{
    duro_history *h = NULL;
    CHECK_OK(duro_client_read_history(f->client, id, 0, &h));
    return h;
}

int rt_count_events(rt_fixture *f, const char *id, int kind)
{
    duro_history *h = NULL;
    if (duro_client_read_history(f->client, id, 0, &h) != DURO_OK)
        return -1;
    int n = 0;
    for (size_t i = 0; i < h->count; i++)
        n += (int)h->events[i].kind == kind;
    duro_history_free(h);
    return n;
}

const duro_event *rt_find_event(const duro_history *h, int kind, int nth)
{
    for (size_t i = 0; h != NULL && i < h->count; i++)
        if ((int)h->events[i].kind == kind && nth-- == 0)
            return &h->events[i];
    return NULL;
}

int rt_count_kind(const duro_history *h, int kind)
{
    int n = 0;
    for (size_t i = 0; h != NULL && i < h->count; i++)
        n += (int)h->events[i].kind == kind;
    return n;
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_lines[4096];
static int log_levels[4096];
static int log_count;

void rt_log_sink(void *user, int level, const char *message)
{
    (void)user;
    pthread_mutex_lock(&log_lock);
    if (log_count < 4096) {
        log_levels[log_count] = level;
        log_lines[log_count++] = strdup(message);
    }
    pthread_mutex_unlock(&log_lock);
}

int rt_log_hits(const char *needle)
{
    return rt_log_hits_at(-1, needle);
}

int rt_log_hits_at(int level, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_count; i++)
        n += (level < 0 || log_levels[i] == level) &&
             strstr(log_lines[i], needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    return n;
}

void rt_log_reset(void)
{
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_count; i++)
        free(log_lines[i]);
    log_count = 0;
    pthread_mutex_unlock(&log_lock);
}

void rt_final_metrics(rt_fixture *f, duro_metrics *m)
{
    duro_runtime_shutdown(f->rt, 10000);
    duro_runtime_metrics(f->rt, m);
}
