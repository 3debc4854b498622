/* powerloss_worker.c - the child process of test_powerloss:
 *
 *   powerloss_worker run DB RECORDS SYNC CUT SEED KEEP CACHE
 *     Installs the power-loss VFS (powerloss_vfs.h) as the process default,
 *     cutting at the CUT-th write/sync call (0: never) with fates from SEED
 *     (KEEP 1: a process crash, every pending write kept), gives every
 *     connection a page cache of CACHE pages (0: SQLite's default), runs the
 *     workload of powerloss_workload.h with a runtime and a client on DB at
 *     synchronous=SYNC. Appends to RECORDS one line per acknowledged commit,
 *     written only after the call returned DURO_OK:
 *       S id             client start        R id   client raise
 *       T id exec last   a turn's ack with history up to event `last`
 *       A id exec src    an activity's completion acked
 *       C id output      the client saw the instance Completed
 *       END calls        the run finished (no cut), after `calls` calls
 *     Exits POWERLOSS_CUT_EXIT at the cut, 0 when the run finished first.
 *
 *   powerloss_worker finish DB SYNC
 *     Without the power-loss VFS: starts every instance (idempotently),
 *     raises the event again where it is still awaited, and waits until all
 *     completed with the expected outputs. Exits 0 when they did.
 *
 * The runtime reaches the store through a recording wrapper provider, so
 * turn and activity acks are recorded where they return. */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>

#include "duro.h"
#include "duro/provider.h"
#include "powerloss_vfs.h"
#include "powerloss_workload.h"

#define DEADLINE_MS 60000

static int records_fd = -1;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void record(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write per line with O_APPEND: a line is whole or absent. */
    if (records_fd >= 0 && write(records_fd, line, (size_t)n) != n)
        _exit(1);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "powerloss_worker[%ld]: %s: %s (%s)\n", (long)getpid(),
            what, duro_errname(rc), duro_errmsg());
    return 1;
}

/* ---- the recording provider ---------------------------------------------- */

#define TOKENS 1024 /* turn threads x (batch + next batch), with room */

typedef struct rec_provider {
    duro_provider base; /* first member */
    duro_provider *inner;
    pthread_mutex_t lock; /* guards tokens */
    struct {
        char token[160];
        char instance[PL_STR_MAX];
    } tokens[TOKENS]; /* lock token -> instance of the fetched items */
} rec_provider;

static rec_provider *rec_of(duro_provider *p)
{
    return (rec_provider *)p;
}

static void token_put_raw(rec_provider *r, const char *token,
                          const char *instance)
{
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < TOKENS; i++) {
        if (r->tokens[i].token[0] == '\0') {
            snprintf(r->tokens[i].token, sizeof(r->tokens[i].token), "%s",
                     token);
            snprintf(r->tokens[i].instance, sizeof(r->tokens[i].instance), "%s",
                     instance);
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

static void token_put(rec_provider *r, const duro_orch_item *item)
{
    if (item != NULL)
        token_put_raw(r, item->lock_token, item->instance_id);
}

/* The instance of a token (and forgets it); "" when unknown. */
static void token_take(rec_provider *r, const char *token, char *out,
                       size_t cap)
{
    out[0] = '\0';
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < TOKENS; i++) {
        if (strcmp(r->tokens[i].token, token) == 0) {
            snprintf(out, cap, "%s", r->tokens[i].instance);
            r->tokens[i].token[0] = '\0';
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

static void record_turn(const char *instance, const duro_orch_ack *ack)
{
    if (instance[0] == '\0' || ack->history_delta_count == 0)
        return;
    const duro_event *last = &ack->history_delta[ack->history_delta_count - 1];
    record("T %s %llu %llu", instance, (unsigned long long)ack->execution_id,
           (unsigned long long)last->event_id);
}

static void record_activity(const duro_work_item *completion)
{
    if (completion == NULL)
        return;
    record("A %s %llu %llu", completion->instance_id,
           (unsigned long long)completion->execution_id,
           (unsigned long long)completion->source_id);
}

static void r_close(duro_provider *p)
{
    rec_provider *r = rec_of(p);
    duro_provider_close(r->inner);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static int r_fetch_orch(duro_provider *p, int64_t lock_ms,
                        const duro_history_cache *cache, duro_orch_item **out,
                        duro_error *err)
{
    rec_provider *r = rec_of(p);
    int rc =
        r->inner->fetch_orchestration_item(r->inner, lock_ms, cache, out, err);
    if (rc == DURO_OK)
        token_put(r, *out);
    return rc;
}

static int r_ack_orch(duro_provider *p, const char *token,
                      const duro_orch_ack *ack, duro_error *err)
{
    rec_provider *r = rec_of(p);
    char instance[PL_STR_MAX];
    token_take(r, token, instance, sizeof(instance));
    int rc = r->inner->ack_orchestration_item(r->inner, token, ack, err);
    if (rc == DURO_OK)
        record_turn(instance, ack);
    return rc;
}

static int r_abandon_orch(duro_provider *p, const char *token, int64_t delay,
                          duro_error *err)
{
    rec_provider *r = rec_of(p);
    char instance[PL_STR_MAX];
    token_take(r, token, instance, sizeof(instance));
    return r->inner->abandon_orchestration_item(r->inner, token, delay, err);
}

static int r_renew_orch(duro_provider *p, const char *token, int64_t ms,
                        duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->renew_orchestration_item_lock(r->inner, token, ms, err);
}

static int r_enqueue(duro_provider *p, const duro_work_item *item,
                     int64_t delay, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->enqueue_for_orchestrator(r->inner, item, delay, err);
}

static int r_fetch_work(duro_provider *p, int64_t lock_ms,
                        duro_worker_item **out, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->fetch_work_item(r->inner, lock_ms, out, err);
}

static int r_renew_work(duro_provider *p, const char *token, int64_t ms,
                        duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->renew_work_item_lock(r->inner, token, ms, err);
}

static int r_ack_work(duro_provider *p, const char *token,
                      const duro_work_item *completion, duro_error *err)
{
    rec_provider *r = rec_of(p);
    int rc = r->inner->ack_work_item(r->inner, token, completion, err);
    if (rc == DURO_OK)
        record_activity(completion);
    return rc;
}

static int r_abandon_work(duro_provider *p, const char *token, int64_t delay,
                          duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->abandon_work_item(r->inner, token, delay, err);
}

static int r_read_history(duro_provider *p, const char *id, uint64_t exec,
                          duro_history **out, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->read_history(r->inner, id, exec, out, err);
}

static int r_latest(duro_provider *p, const char *id, uint64_t *out,
                    duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->latest_execution_id(r->inner, id, out, err);
}

static int r_get_instance(duro_provider *p, const char *id,
                          duro_instance_list **out, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->get_instance(r->inner, id, out, err);
}

static int r_list(duro_provider *p, const duro_instance_filter *f,
                  duro_instance_list **out, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->list_instances(r->inner, f, out, err);
}

static int r_count(duro_provider *p, duro_queue q, const char *id,
                   uint64_t *out, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->count_messages(r->inner, q, id, out, err);
}

static int r_delete(duro_provider *p, const char *id, int force, size_t *n,
                    duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->delete_instance(r->inner, id, force, n, err);
}

static int r_prune(duro_provider *p, const char *id, uint64_t keep, size_t *n,
                   duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->prune_executions(r->inner, id, keep, n, err);
}

static int r_wait(duro_provider *p, duro_queue q, int64_t ms, duro_error *err)
{
    rec_provider *r = rec_of(p);
    return r->inner->wait_for_work(r->inner, q, ms, err);
}

static void r_wake(duro_provider *p, int sticky)
{
    rec_provider *r = rec_of(p);
    r->inner->wake(r->inner, sticky);
}

static int r_ack_fetch_orch(duro_provider *p, const char *token,
                            const duro_orch_ack *ack, int64_t lock_ms,
                            const duro_history_cache *cache,
                            duro_orch_item **next, duro_error *err)
{
    rec_provider *r = rec_of(p);
    char instance[PL_STR_MAX];
    token_take(r, token, instance, sizeof(instance));
    int rc = r->inner->ack_and_fetch_orchestration_item(
        r->inner, token, ack, lock_ms, cache, next, err);
    if (rc == DURO_OK) {
        record_turn(instance, ack);
        token_put(r, *next);
    }
    return rc;
}

/* Several turns in one transaction: each recorded once the call returned
 * OK; on failure the tokens are kept for the one-turn acks that follow. */
static int r_ack_fetch_many(duro_provider *p, size_t n,
                            const char *const *tokens,
                            const duro_orch_ack *acks, int64_t lock_ms,
                            const duro_history_cache *cache, size_t max_next,
                            duro_orch_item **next, size_t *next_count,
                            duro_error *err)
{
    rec_provider *r = rec_of(p);
    char(*instances)[PL_STR_MAX] = NULL;
    if (n > 0 && (instances = calloc(n, sizeof(*instances))) == NULL)
        return duro_error_set(err, DURO_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < n; i++)
        token_take(r, tokens[i], instances[i], sizeof(instances[i]));
    int rc = r->inner->ack_and_fetch_orchestration_items(
        r->inner, n, tokens, acks, lock_ms, cache, max_next, next, next_count,
        err);
    for (size_t i = 0; i < n; i++) {
        if (rc == DURO_OK)
            record_turn(instances[i], &acks[i]);
        else if (instances[i][0] != '\0')
            token_put_raw(r, tokens[i], instances[i]);
    }
    if (rc == DURO_OK)
        for (size_t i = 0; i < *next_count; i++)
            token_put(r, next[i]);
    free(instances);
    return rc;
}

static int r_ack_fetch_work(duro_provider *p, const char *token,
                            const duro_work_item *completion, int64_t lock_ms,
                            duro_worker_item **next, duro_error *err)
{
    rec_provider *r = rec_of(p);
    int rc = r->inner->ack_and_fetch_work_item(r->inner, token, completion,
                                               lock_ms, next, err);
    if (rc == DURO_OK)
        record_activity(completion);
    return rc;
}

static duro_provider *rec_wrap(duro_provider *inner)
{
    rec_provider *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->inner = inner;
    pthread_mutex_init(&r->lock, NULL);
    duro_provider *m = &r->base;
    m->version = inner->version < DURO_PROVIDER_VERSION ? inner->version
                                                        : DURO_PROVIDER_VERSION;
    m->name = "recording";
    m->turn_batch = inner->turn_batch;
    m->close = r_close;
    m->fetch_orchestration_item = r_fetch_orch;
    m->ack_orchestration_item = r_ack_orch;
    m->abandon_orchestration_item = r_abandon_orch;
    m->renew_orchestration_item_lock = r_renew_orch;
    m->enqueue_for_orchestrator = r_enqueue;
    m->fetch_work_item = r_fetch_work;
    m->renew_work_item_lock = r_renew_work;
    m->ack_work_item = r_ack_work;
    m->abandon_work_item = r_abandon_work;
    m->read_history = r_read_history;
    m->latest_execution_id = r_latest;
    m->get_instance = r_get_instance;
    m->list_instances = r_list;
    m->count_messages = r_count;
    m->delete_instance = r_delete;
    m->prune_executions = r_prune;
    m->wait_for_work = r_wait;
    m->wake = r_wake;
    if (inner->ack_and_fetch_orchestration_item != NULL)
        m->ack_and_fetch_orchestration_item = r_ack_fetch_orch;
    if (inner->ack_and_fetch_work_item != NULL)
        m->ack_and_fetch_work_item = r_ack_fetch_work;
    if (m->version >= 7 && inner->ack_and_fetch_orchestration_items != NULL)
        m->ack_and_fetch_orchestration_items = r_ack_fetch_many;
    return m;
}

/* ---- the workload -------------------------------------------------------- */

static int act_step(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    char buf[PL_STR_MAX];
    pl_step(in != NULL ? in : "", buf, sizeof(buf));
    return duro_ok(out, buf);
}

static const char *call_step(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t = duro_call_activity(o, "Step", in);
    if (duro_await(o, t) != DURO_OK) {
        duro_failf(out, "Step failed: %s",
                   duro_task_error(t) ? duro_task_error(t) : "?");
        return NULL;
    }
    return duro_task_output(t);
}

static int orch_chain(duro_orch *o, const char *in, duro_result *out)
{
    const char *acc = in;
    for (int i = 0; i < PL_CHAIN_STEPS; i++)
        if ((acc = call_step(o, acc, out)) == NULL)
            return DURO_FAILED;
    return duro_ok(out, acc);
}

static int orch_fan(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *t[PL_FAN_WIDTH];
    char input[PL_STR_MAX], letters[PL_FAN_WIDTH + 1];
    for (int i = 0; i < PL_FAN_WIDTH; i++) {
        pl_fan_input(in, i, input, sizeof(input));
        t[i] = duro_call_activity(o, "Step", input);
    }
    if (duro_join_n(o, t, PL_FAN_WIDTH) != DURO_OK)
        return duro_fail(out, "a fanned-out Step failed");
    for (int i = 0; i < PL_FAN_WIDTH; i++) {
        const char *r = duro_task_output(t[i]);
        size_t len = r != NULL ? strlen(r) : 0;
        letters[i] = len > 0 ? r[len - 1] : '?';
    }
    letters[PL_FAN_WIDTH] = '\0';
    return duro_ok(out, letters);
}

static int orch_timer(duro_orch *o, const char *in, duro_result *out)
{
    if (duro_await(o, duro_timer(o, PL_TIMER_MS)) != DURO_OK)
        return duro_fail(out, "the timer failed");
    const char *r = call_step(o, in, out);
    return r != NULL ? duro_ok(out, r) : DURO_FAILED;
}

static int orch_event(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *e = duro_wait_event(o, PL_EVENT_NAME);
    if (duro_await(o, e) != DURO_OK)
        return duro_fail(out, "the event wait failed");
    const char *r = call_step(o, duro_task_output(e), out);
    return r != NULL ? duro_ok(out, r) : DURO_FAILED;
}

static int orch_child(duro_orch *o, const char *in, duro_result *out)
{
    const char *r = call_step(o, in, out);
    return r != NULL ? duro_ok(out, r) : DURO_FAILED;
}

static int orch_parent(duro_orch *o, const char *in, duro_result *out)
{
    char child[PL_STR_MAX];
    pl_child_id(in, child, sizeof(child));
    duro_task *c = duro_call_sub_orchestration(o, "Child", NULL, child, in);
    if (duro_await(o, c) != DURO_OK)
        return duro_failf(out, "the child failed: %s",
                          duro_task_error(c) ? duro_task_error(c) : "?");
    const char *r = call_step(o, duro_task_output(c), out);
    return r != NULL ? duro_ok(out, r) : DURO_FAILED;
}

static int register_all(duro_registry *reg)
{
    static const struct {
        const char *name;
        duro_orchestration_fn fn;
    } orchs[] = {{"Chain", orch_chain},   {"Fan", orch_fan},
                 {"Timer", orch_timer},   {"Event", orch_event},
                 {"Parent", orch_parent}, {"Child", orch_child}};
    int rc = DURO_OK;
    for (size_t i = 0; rc == DURO_OK && i < sizeof(orchs) / sizeof(orchs[0]);
         i++)
        rc = duro_registry_add_orchestration(reg, orchs[i].name, NULL,
                                             orchs[i].fn, NULL);
    if (rc == DURO_OK)
        rc = duro_registry_add_activity(reg, "Step", act_step, NULL);
    return rc;
}

static void runtime_options(duro_runtime_options *o)
{
    duro_runtime_options_init(o);
    /* Locks left by a cut process expire soon, so the finish run does not
     * wait long for them. */
    o->orchestration_lock_timeout_ms = 300;
    o->worker_lock_timeout_ms = 300;
    o->lock_renewal_ms = 100;
    o->poll_interval_ms = 50;
    o->max_attempts = 1000; /* re-deliveries after cuts are not poison */
    o->log_level = getenv("DURO_TEST_LOG") ? DURO_LOG_DEBUG : DURO_LOG_ERROR;
}

/* With `cache_pages` > 0 every connection of this process gets a page cache
 * that small (an auto-extension runs on each open), so that turns spill
 * dirty pages to the WAL before their commit and rewrite them: the path on
 * which SQLite rewrites frame headers after the commit frame. */
static int cache_pages;

static int small_cache(sqlite3 *db, char **err, const void *api)
{
    (void)err;
    (void)api;
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA cache_size = %d", cache_pages);
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static void on_cut(void *arg, uint64_t call)
{
    (void)arg;
    record("CUT %llu", (unsigned long long)call);
}

/* Starts every instance and raises the event (records each acknowledged
 * call), then waits for all; with `finish` the starts are idempotent and
 * the event is raised only where it is still awaited. */
static int drive(duro_client *c, int finish)
{
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = finish;
    char payload[PL_STR_MAX];
    for (size_t i = 0; i < PL_INSTANCE_COUNT; i++) {
        const pl_instance *in = &pl_instances[i];
        int rc = duro_client_start(c, in->id, in->orchestration, in->id, &so);
        if (rc != DURO_OK)
            return fail("start", rc);
        record("S %s", in->id);
    }
    for (size_t i = 0; i < PL_INSTANCE_COUNT; i++) {
        const pl_instance *in = &pl_instances[i];
        if (in->kind != PL_EVENT)
            continue;
        if (finish) {
            duro_instance_info *info = NULL;
            int rc = duro_client_get_status(c, in->id, &info);
            if (rc != DURO_OK)
                return fail("get_status", rc);
            int done = duro_status_is_terminal(info->status);
            duro_free(info);
            if (done)
                continue;
        }
        pl_event_payload(in->id, payload, sizeof(payload));
        int rc = duro_client_raise_event(c, in->id, PL_EVENT_NAME, payload);
        /* Finishing, the runtime already runs: an instance whose event was
         * raised before the cut may complete between the status read above
         * and this raise. It completes only after its event, so it is
         * done. */
        if (finish && rc == DURO_INVALID_STATE)
            continue;
        if (rc != DURO_OK)
            return fail("raise_event", rc);
        record("R %s", in->id);
    }
    int64_t deadline = duro_now_ms() + DEADLINE_MS;
    for (size_t i = 0; i < PL_INSTANCE_COUNT; i++) {
        const pl_instance *in = &pl_instances[i];
        duro_instance_info *info = NULL;
        int64_t left = deadline - duro_now_ms();
        int rc = duro_client_wait(c, in->id, left > 0 ? left : 0, &info);
        if (rc != DURO_OK) {
            duro_free(info);
            return fail("wait", rc);
        }
        char expected[PL_STR_MAX];
        pl_expected(in, expected, sizeof(expected));
        int ok = info->status == DURO_STATUS_COMPLETED &&
                 info->output != NULL && strcmp(info->output, expected) == 0;
        if (ok)
            record("C %s %s", in->id, info->output);
        else
            fprintf(stderr,
                    "powerloss_worker: %s is %s with output \"%s\" (error "
                    "\"%s\"), expected \"%s\"\n",
                    in->id, duro_status_name(info->status),
                    info->output ? info->output : "",
                    info->error ? info->error : "", expected);
        duro_free(info);
        if (!ok)
            return 1;
    }
    return 0;
}

static int run(const char *db, const char *sync, int finish)
{
    char url[1024];
    snprintf(url, sizeof(url), "sqlite:%s?synchronous=%s", db, sync);
    duro_runtime_options o;
    runtime_options(&o);
    duro_registry *reg = NULL;
    duro_provider *inner = NULL, *p = NULL;
    duro_runtime *rt = NULL;
    duro_client *c = NULL;
    duro_error e;
    int rc, result = 1;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = register_all(reg)) != DURO_OK) {
        fail("registry", rc);
    } else if ((rc = duro_provider_open(url, &inner, &e)) != DURO_OK) {
        fprintf(stderr, "powerloss_worker: open %s: %s (%s)\n", url,
                duro_errname(rc), e.message);
    } else if ((p = rec_wrap(inner)) == NULL) {
        duro_provider_close(inner);
        fail("wrap", DURO_NOMEM);
    } else if ((rc = duro_runtime_create_with_provider(p, reg, &o, &rt)) !=
               DURO_OK) {
        fail("runtime_create", rc);
    } else if ((rc = duro_client_create(url, &c)) != DURO_OK) {
        fail("client_create", rc);
    } else if ((rc = duro_runtime_start(rt)) != DURO_OK) {
        fail("runtime_start", rc);
    } else {
        result = drive(c, finish);
    }
    if (rt != NULL && (rc = duro_runtime_shutdown(rt, 5000)) != DURO_OK &&
        result == 0)
        result = fail("shutdown", rc);
    duro_runtime_destroy(rt);
    duro_client_destroy(c);
    duro_provider_close(p);
    duro_registry_destroy(reg);
    return result;
}

int main(int argc, char **argv)
{
    if (argc == 9 && strcmp(argv[1], "run") == 0) {
        cache_pages = atoi(argv[8]);
        if (cache_pages > 0)
            sqlite3_auto_extension((void (*)(void))small_cache);
        records_fd =
            open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (records_fd < 0) {
            perror(argv[3]);
            return 1;
        }
        powerloss_config cfg = {.cut_at = strtoull(argv[5], NULL, 10),
                                .seed = strtoull(argv[6], NULL, 10),
                                .keep_pending = atoi(argv[7]),
                                .on_cut = on_cut};
        if (powerloss_vfs_install(&cfg) != 0) {
            fprintf(stderr, "powerloss_worker: cannot install the VFS\n");
            return 1;
        }
        int result = run(argv[2], argv[4], 0);
        if (result == 0)
            record("END %llu", (unsigned long long)powerloss_vfs_calls());
        close(records_fd);
        return result;
    }
    if (argc == 4 && strcmp(argv[1], "finish") == 0)
        return run(argv[2], argv[3], 1);
    fprintf(stderr, "usage: powerloss_worker run DB RECORDS SYNC CUT SEED "
                    "KEEP CACHE\n       powerloss_worker finish DB SYNC\n");
    return 2;
}
