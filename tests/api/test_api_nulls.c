/* test_api_nulls.c - every public function (every DURO_API of duro.h,
 * duro/common.h and duro/provider.h) called with each pointer argument NULL
 * in turn, the others valid, checking the result its doc block promises: a
 * no-op, a default, DURO_INVALID or DURO_MISUSE, never a crash.
 * Orchestration-context functions run inside a real orchestration (a
 * runtime on a temporary SQLite file) and from outside one. Calls go through
 * C(), which records the function's name; the last test checks the record
 * against api_functions.h, generated from the headers at build time, so a
 * new DURO_API function fails this test until it is covered here. */
#include <pthread.h>
#include <stdlib.h>

#include "rt_util.h"

/* ------------------------------------------------------------------------
 * which public functions were called */

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static pthread_mutex_t cover_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *covered[256];
static size_t covered_count;

static void cover(const char *name)
{
    pthread_mutex_lock(&cover_lock);
    size_t i = 0;
    while (i < covered_count && strcmp(covered[i], name) != 0)
        i++;
    if (i == covered_count && covered_count < ARRAY_LEN(covered))
        covered[covered_count++] = name;
    pthread_mutex_unlock(&cover_lock);
}

/* C(fn)(args): records "fn", then calls it. */
#define C(fn) (cover(#fn), fn)

#define CHECK_ERRMSG(needle)                                                   \
    CHECK_MSG(strstr(duro_errmsg(), (needle)) != NULL,                         \
              "duro_errmsg() is '%s'; expected it to contain '%s'",            \
              duro_errmsg(), (needle))

/* A NULL format string, past the compiler's format checks. */
static const char *null_fmt(void)
{
    return NULL;
}

#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"

/* ------------------------------------------------------------------------
 * common.h and the provider helpers */

TEST(common_and_provider_helpers)
{
    CHECK_STR(C(duro_strerror)(DURO_NOT_FOUND), "not found");
    CHECK_STR(C(duro_errname)(DURO_MISUSE), "DURO_MISUSE");
    CHECK(C(duro_errmsg)() != NULL);
    CHECK_STR(C(duro_category_name)(DURO_CATEGORY_TIMEOUT), "timeout");
    CHECK_STR(C(duro_status_name)(DURO_STATUS_RUNNING), "Running");
    CHECK_EQ(C(duro_status_parse)(NULL), -1);
    CHECK_EQ(duro_status_parse("failed"), DURO_STATUS_FAILED);
    CHECK_EQ(C(duro_status_is_terminal)(DURO_STATUS_FAILED), 1);
    C(duro_free)(NULL);
    CHECK(C(duro_now_ms)() > 0);
    CHECK_STR(C(duro_event_kind_name)(DURO_EVENT_TIMER_FIRED), "TimerFired");
    /* no arguments: the library's version is the header's */
    CHECK_STR(C(duro_version)(), DURO_VERSION_STRING);
    CHECK_EQ(C(duro_version_number)(), DURO_VERSION_NUMBER);

    C(duro_error_clear)(NULL);
    CHECK_EQ(C(duro_error_set)(NULL, DURO_BUSY, 1, "x %d", 1), DURO_BUSY);
    duro_error e;
    CHECK_EQ(duro_error_set(&e, DURO_BUSY, 1, null_fmt()), DURO_BUSY);
    CHECK_STR(e.message, "");
    CHECK_EQ(e.retryable, 1);

    duro_arena *a = C(duro_arena_create)();
    CHECK(a != NULL);
    CHECK(C(duro_arena_alloc)(NULL, 8) == NULL);
    CHECK(C(duro_arena_strdup)(NULL, "x") == NULL);
    CHECK(duro_arena_strdup(a, NULL) == NULL);
    CHECK_STR(duro_arena_strdup(a, "x"), "x");
    C(duro_arena_destroy)(NULL);
    duro_arena_destroy(a);

    C(duro_orch_item_free)(NULL);
    C(duro_worker_item_free)(NULL);
    C(duro_history_free)(NULL);
    C(duro_instance_list_free)(NULL);
    C(duro_bulk_result_free)(NULL);
    CHECK_STR(C(duro_cancel_outcome_name)(DURO_CANCEL_DUPLICATE), "duplicate");
    CHECK_STR(duro_cancel_outcome_name(-1), "unknown");
    CHECK_STR(C(duro_control_name)(DURO_CONTROL_SUSPEND), "suspend");
    CHECK_STR(duro_control_name(0), "unknown");
    CHECK_STR(C(duro_control_outcome_name)(DURO_CONTROL_OUTCOME_FINISHED),
              "finished");
    CHECK_STR(duro_control_outcome_name(2), "unknown");

    duro_provider *p = (duro_provider *)&e;
    CHECK_PRC(C(duro_provider_open)(NULL, &p, &e), DURO_BAD_URL, &e);
    CHECK(p == NULL);
    const char *url = test_sqlite_url("nulls_provider.db");
    CHECK_PRC(duro_provider_open(url, NULL, &e), DURO_INVALID, &e);
    CHECK_OK(duro_provider_open(url, &p, NULL));
    CHECK(p != NULL);
    C(duro_provider_close)(p);
    C(duro_provider_close)(NULL);

    char shown[64] = "x";
    CHECK_EQ(C(duro_url_mask)(NULL, shown, sizeof(shown)), 0);
    CHECK_STR(shown, "");
    CHECK_EQ(duro_url_mask("postgres://u:p@h/d", NULL, 64), 0);
    CHECK_EQ(duro_url_mask("postgres://u:p@h/d", shown, 0), 0);
}

/* ------------------------------------------------------------------------
 * registry and option initializers */

static int orch_echo(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in);
}

/* A driver whose code returns its input at its first step. */
static int drv_start(duro_orch *o, const char *in, void *user, void **state)
{
    (void)o;
    (void)in;
    (void)user;
    *state = NULL;
    return DURO_OK;
}

static int drv_step(duro_orch *o, void *state, duro_result *out)
{
    (void)state;
    duro_ok(out, duro_input(o));
    return DURO_STEP_DONE;
}

static int act_echo(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    return duro_ok(out, in);
}

TEST(registry_and_initializers)
{
    CHECK_RC(C(duro_registry_create)(NULL), DURO_INVALID);
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    CHECK_RC(
        C(duro_registry_add_orchestration)(NULL, "O", NULL, orch_echo, NULL),
        DURO_INVALID);
    CHECK_RC(duro_registry_add_orchestration(r, NULL, "1", orch_echo, NULL),
             DURO_INVALID);
    CHECK_RC(duro_registry_add_orchestration(r, "O", "1", NULL, NULL),
             DURO_INVALID);
    CHECK_OK(duro_registry_add_orchestration(r, "O", NULL, orch_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "O", "1", orch_echo, NULL));
    CHECK_RC(C(duro_registry_add_activity)(NULL, "A", act_echo, NULL),
             DURO_INVALID);
    CHECK_RC(duro_registry_add_activity(r, NULL, act_echo, NULL), DURO_INVALID);
    CHECK_RC(duro_registry_add_activity(r, "A", NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_registry_add_activity(r, "A", act_echo, NULL));
    /* with options: NULL options are the defaults; unset or bad ones are
     * refused */
    C(duro_orchestration_options_init)(NULL);
    duro_orchestration_options oo;
    duro_orchestration_options_init(&oo);
    CHECK_EQ(oo.version, 2); /* 2: timeout_ms */
    CHECK_EQ(oo.timeout_ms, 0);
    CHECK_EQ(oo.observe_cancel, 0);
    CHECK_RC(C(duro_registry_add_orchestration_ex)(NULL, "X", NULL, orch_echo,
                                                   NULL, &oo),
             DURO_INVALID);
    CHECK_RC(
        duro_registry_add_orchestration_ex(r, NULL, NULL, orch_echo, NULL, &oo),
        DURO_INVALID);
    CHECK_RC(duro_registry_add_orchestration_ex(r, "X", NULL, NULL, NULL, &oo),
             DURO_INVALID);
    CHECK_OK(duro_registry_add_orchestration_ex(r, "X", NULL, orch_echo, NULL,
                                                NULL));
    oo.cleanup_timeout_ms = -1;
    CHECK_RC(
        duro_registry_add_orchestration_ex(r, "Y", NULL, orch_echo, NULL, &oo),
        DURO_INVALID);
    oo.cleanup_timeout_ms = 0;
    oo.version = 0;
    CHECK_RC(
        duro_registry_add_orchestration_ex(r, "Y", NULL, orch_echo, NULL, &oo),
        DURO_INVALID);
    /* driven: a NULL registry, name or driver is refused, NULL options
     * are the defaults, a NULL destroy means nothing to release */
    duro_driver d = {
        .version = DURO_DRIVER_VERSION, .start = drv_start, .step = drv_step};
    CHECK_RC(C(duro_registry_add_driven_orchestration)(NULL, "D", NULL, &d,
                                                       NULL, NULL),
             DURO_INVALID);
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, NULL, NULL, &d, NULL, NULL),
        DURO_INVALID);
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "D", NULL, NULL, NULL, NULL),
        DURO_INVALID);
    d.start = NULL;
    CHECK_RC(
        duro_registry_add_driven_orchestration(r, "D", NULL, &d, NULL, NULL),
        DURO_INVALID);
    d.start = drv_start;
    CHECK_OK(
        duro_registry_add_driven_orchestration(r, "D", NULL, &d, NULL, NULL));

    /* the replayer: NULL registry or history refused, NULL options the
     * defaults; a history of one OrchestrationStarted replays */
    C(duro_replay_options_init)(NULL);
    duro_replay_options rpo;
    duro_replay_options_init(&rpo);
    CHECK_EQ(rpo.version, 1);
    duro_event started = {.event_id = 1,
                          .kind = DURO_EVENT_ORCHESTRATION_STARTED,
                          .name = "D",
                          .version = "",
                          .payload = "in"};
    duro_history h = {.instance_id = "replayed",
                      .execution_id = 1,
                      .events = &started,
                      .count = 1};
    CHECK_RC(C(duro_replay_history)(NULL, &h, NULL), DURO_INVALID);
    CHECK_RC(duro_replay_history(r, NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_replay_history(r, &h, NULL));
    CHECK_OK(duro_replay_history(r, &h, &rpo));
    started.name = "X"; /* C code */
    CHECK_OK(duro_replay_history(r, &h, NULL));
    h.instance_id = NULL;
    CHECK_RC(duro_replay_history(r, &h, NULL), DURO_INVALID);
    /* the JSON replayer: NULL registry, document or path refused; a NULL
     * divergence is not written */
    static const char doc[] =
        "{\"format\":\"duro-history\",\"format_version\":1,"
        "\"instance_id\":\"replayed\",\"executions\":[{\"execution_id\":1,"
        "\"events\":[{\"event_id\":1,\"kind\":\"OrchestrationStarted\","
        "\"timestamp_ms\":1,\"name\":\"X\",\"payload\":\"in\"}]}]}";
    duro_replay_divergence dv;
    CHECK_RC(C(duro_replay_json)(NULL, doc, sizeof(doc) - 1, NULL, &dv),
             DURO_INVALID);
    CHECK_RC(duro_replay_json(r, NULL, 0, NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_replay_json(r, doc, sizeof(doc) - 1, NULL, NULL));
    CHECK_OK(duro_replay_json(r, doc, sizeof(doc) - 1, &rpo, &dv));
    CHECK_EQ(dv.execution_id, 0);
    CHECK_RC(C(duro_replay_file)(r, NULL, NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_replay_file(NULL, "h.json", NULL, &dv), DURO_INVALID);
    CHECK_RC(duro_replay_file(r, "/nonexistent/h.json", NULL, &dv),
             DURO_NOT_FOUND);
    C(duro_registry_destroy)(NULL);
    duro_registry_destroy(r);

    /* NULL is a no-op; a real struct gets its version and defaults */
    C(duro_runtime_options_init)(NULL);
    C(duro_runtime_options_init_size)(NULL, sizeof(duro_runtime_options));
    C(duro_start_options_init)(NULL);
    C(duro_retry_policy_init)(NULL);
    duro_runtime_options ro;
    duro_runtime_options_init(&ro);
    CHECK_EQ(ro.version, 5);
    CHECK_EQ(ro.schedules, 1);
    CHECK_EQ(ro.cleanup_timeout_ms, 300000);
    CHECK_EQ(ro.orchestration_batch, 0); /* the store's choice */
    CHECK_EQ(ro.keep_executions, 10);
    CHECK_EQ(ro.fiber_cache_bytes, (size_t)256 * 1024 * 1024);
    /* a program built against version 3's header: its struct ends before
     * keep_executions, and nothing past that is written (ASan sees an
     * allocation of exactly that size), whether it calls the function it
     * was built with or the sized one */
    size_t v3_size = offsetof(duro_runtime_options, keep_executions);
    unsigned char *v3 = malloc(v3_size);
    CHECK(v3 != NULL);
    /* fields read by copy: the compiler knows the struct does not fit */
#define V3_FIELD(member, out)                                                  \
    memcpy(&(out), v3 + offsetof(duro_runtime_options, member), sizeof(out))
    int version = 0, batch = 0;
    int64_t cleanup = 0;
    (duro_runtime_options_init)((duro_runtime_options *)(void *)v3);
    V3_FIELD(version, version);
    V3_FIELD(orchestration_batch, batch);
    CHECK_EQ(version, 3);
    CHECK_EQ(batch, 0);
    memset(v3, 0, v3_size);
    duro_runtime_options_init_size((duro_runtime_options *)(void *)v3, v3_size);
    V3_FIELD(version, version);
    V3_FIELD(cleanup_timeout_ms, cleanup);
    CHECK_EQ(version, 3);
    CHECK_EQ(cleanup, 300000);
#undef V3_FIELD
    free(v3);
    duro_start_options so;
    duro_start_options_init(&so);
    CHECK_EQ(so.version, 2); /* 2: deadline_ms, timeout_ms */
    CHECK_EQ(so.deadline_ms, 0);
    CHECK_EQ(so.timeout_ms, 0);
    duro_retry_policy rp;
    duro_retry_policy_init(&rp);
    CHECK_EQ(rp.max_attempts, 3);
}

/* ------------------------------------------------------------------------
 * runtime */

TEST(runtime_functions)
{
    duro_registry *reg = NULL;
    CHECK_OK(duro_registry_create(&reg));
    const char *url = test_sqlite_url("nulls_runtime.db");
    duro_runtime *rt = (duro_runtime *)&reg; /* must be reset to NULL */
    CHECK_RC(C(duro_runtime_create)(NULL, reg, NULL, &rt), DURO_BAD_URL);
    CHECK(rt == NULL);
    rt = (duro_runtime *)&reg;
    CHECK_RC(duro_runtime_create(url, NULL, NULL, &rt), DURO_INVALID);
    CHECK(rt == NULL);
    CHECK_RC(duro_runtime_create(url, reg, NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_runtime_create(url, reg, NULL, &rt)); /* NULL: defaults */

    duro_metrics m;
    memset(&m, 0xab, sizeof(m));
    C(duro_runtime_metrics)(NULL, &m);
    CHECK(m.turns == 0 && m.nondeterminism_errors == 0);
    C(duro_runtime_metrics)(rt, NULL);
    /* the exposition: NULL runtime or stream; the buffer variant reports
     * its length in *needed even when the call fails for size */
    CHECK_RC(C(duro_runtime_metrics_write)(NULL, stdout), DURO_INVALID);
    CHECK_RC(duro_runtime_metrics_write(rt, NULL), DURO_INVALID);
    char small[8] = "x";
    size_t needed = 99;
    CHECK_RC(
        C(duro_runtime_metrics_format)(NULL, small, sizeof(small), &needed),
        DURO_INVALID);
    CHECK_EQ(needed, 0);
    CHECK_RC(duro_runtime_metrics_format(rt, NULL, 16, &needed), DURO_INVALID);
    CHECK_EQ(needed, 0);
    CHECK_RC(duro_runtime_metrics_format(rt, NULL, 0, NULL), DURO_TOO_LARGE);
    CHECK_RC(duro_runtime_metrics_format(rt, NULL, 0, &needed), DURO_TOO_LARGE);
    CHECK(needed > 0);
    CHECK_RC(duro_runtime_metrics_format(rt, small, sizeof(small), NULL),
             DURO_TOO_LARGE);
    CHECK_STR(small, "");
    CHECK_RC(C(duro_runtime_start)(NULL), DURO_INVALID);
    CHECK_RC(C(duro_runtime_shutdown)(NULL, 0), DURO_INVALID);
    C(duro_runtime_destroy)(NULL);
    duro_runtime_destroy(rt);

    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(url, &p, &e), DURO_OK, &e);
    rt = (duro_runtime *)&reg;
    CHECK_RC(C(duro_runtime_create_with_provider)(NULL, reg, NULL, &rt),
             DURO_INVALID);
    CHECK(rt == NULL);
    CHECK_RC(duro_runtime_create_with_provider(p, NULL, NULL, &rt),
             DURO_INVALID);
    CHECK_RC(duro_runtime_create_with_provider(p, reg, NULL, NULL),
             DURO_INVALID);
    CHECK_OK(duro_runtime_create_with_provider(p, reg, NULL, &rt));
    duro_runtime_destroy(rt);
    duro_provider_close(p);
    duro_registry_destroy(reg);
}

/* ------------------------------------------------------------------------
 * client */

static int orch_wait_go(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *e = duro_wait_event(o, "go");
    duro_await(o, e);
    return duro_ok(out, duro_task_output(e));
}

TEST(client_functions)
{
    rt_fixture f;
    rt_init(&f, "nulls_client.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Echo", NULL, orch_echo, NULL));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "WaitGo", NULL,
                                             orch_wait_go, NULL));
    rt_start(&f);
    duro_client *c = f.client;

    duro_client *other = (duro_client *)&f;
    CHECK_RC(C(duro_client_create)(NULL, &other), DURO_BAD_URL);
    CHECK(other == NULL);
    CHECK_RC(duro_client_create(f.url, NULL), DURO_INVALID);
    CHECK_RC(C(duro_client_create_with_provider)(NULL, &other), DURO_INVALID);
    duro_provider *p = NULL;
    duro_error e;
    CHECK_PRC(duro_provider_open(f.url, &p, &e), DURO_OK, &e);
    CHECK_RC(duro_client_create_with_provider(p, NULL), DURO_INVALID);
    CHECK_OK(duro_client_create_with_provider(p, &other));
    duro_client_destroy(other);
    duro_provider_close(p);
    C(duro_client_destroy)(NULL);

    /* start: client, id and name required; input and options optional */
    CHECK_RC(C(duro_client_start)(NULL, "s1", "Echo", "x", NULL), DURO_INVALID);
    CHECK_RC(duro_client_start(c, NULL, "Echo", "x", NULL), DURO_INVALID);
    CHECK_RC(duro_client_start(c, "s1", NULL, "x", NULL), DURO_INVALID);
    CHECK_OK(duro_client_start(c, "s1", "Echo", NULL, NULL));
    duro_start_options so;
    duro_start_options_init(&so);
    CHECK_OK(duro_client_start(c, "s2", "Echo", "x", &so));
    rt_start_instance(&f, "w1", "WaitGo", NULL);
    rt_start_instance(&f, "w2", "WaitGo", NULL);
    rt_start_instance(&f, "w3", "WaitGo", NULL);

    /* raise: client, id and name required; payload optional */
    CHECK_RC(C(duro_client_raise_event)(NULL, "w1", "go", "p"), DURO_INVALID);
    CHECK_RC(duro_client_raise_event(c, NULL, "go", "p"), DURO_INVALID);
    CHECK_RC(duro_client_raise_event(c, "w1", NULL, "p"), DURO_INVALID);
    /* (w1 waits for "go" only, and ends when it comes: "x" first) */
    CHECK_RC(C(duro_client_raise_event_once)(NULL, "w1", "x", "p", "e1"),
             DURO_INVALID);
    CHECK_RC(duro_client_raise_event_once(c, NULL, "x", "p", "e1"),
             DURO_INVALID);
    CHECK_RC(duro_client_raise_event_once(c, "w1", NULL, "p", "e1"),
             DURO_INVALID);
    CHECK_RC(duro_client_raise_event_once(c, "w1", "x", "p", ""), DURO_INVALID);
    CHECK_OK(duro_client_raise_event_once(c, "w1", "x", NULL, NULL));
    CHECK_OK(duro_client_raise_event_once(c, "w1", "x", NULL, "e1"));
    CHECK_OK(duro_client_raise_event(c, "w1", "go", NULL));

    /* cancel: client and id required; reason and requested_by optional */
    CHECK_RC(C(duro_client_cancel)(NULL, "w2", "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_cancel(c, NULL, "r", "me"), DURO_INVALID);
    CHECK_OK(duro_client_cancel(c, "w2", NULL, "me"));
    CHECK_OK(duro_client_cancel(c, "w3", "r", NULL));

    /* cancel_many: client required; ids and results only with a count;
     * reason and requested_by optional */
    const char *nope[] = {"nope", "nope"};
    duro_cancel_result res[2];
    CHECK_RC(C(duro_client_cancel_many)(NULL, nope, 2, "r", "me", res),
             DURO_INVALID);
    CHECK_RC(duro_client_cancel_many(c, NULL, 2, "r", "me", res), DURO_INVALID);
    CHECK_RC(duro_client_cancel_many(c, nope, 2, "r", "me", NULL),
             DURO_INVALID);
    CHECK_OK(duro_client_cancel_many(c, NULL, 0, NULL, NULL, NULL));
    const char *null_id[] = {"nope", NULL};
    CHECK_RC(duro_client_cancel_many(c, null_id, 2, "r", "me", res),
             DURO_INVALID);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_NONE);
    CHECK_OK(duro_client_cancel_many(c, nope, 2, NULL, NULL, res));
    CHECK_EQ(res[0].outcome, DURO_CANCEL_NOT_FOUND);
    CHECK_EQ(res[1].outcome, DURO_CANCEL_DUPLICATE);

    /* terminate, suspend, resume: client and id required; reason and
     * requested_by optional */
    CHECK_RC(C(duro_client_terminate)(NULL, "w4", "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_terminate(c, NULL, "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_terminate(c, "nope", NULL, NULL), DURO_NOT_FOUND);
    CHECK_RC(C(duro_client_suspend)(NULL, "w4", "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_suspend(c, NULL, "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_suspend(c, "nope", NULL, NULL), DURO_NOT_FOUND);
    CHECK_RC(C(duro_client_resume)(NULL, "w4", "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_resume(c, NULL, "r", "me"), DURO_INVALID);
    CHECK_RC(duro_client_resume(c, "nope", NULL, NULL), DURO_NOT_FOUND);
    duro_control_result cres[2];
    CHECK_RC(C(duro_client_control_many)(NULL, DURO_CONTROL_TERMINATE, nope, 2,
                                         "r", "me", cres),
             DURO_INVALID);
    CHECK_RC(duro_client_control_many(c, DURO_CONTROL_TERMINATE, NULL, 2, "r",
                                      "me", cres),
             DURO_INVALID);
    CHECK_RC(duro_client_control_many(c, DURO_CONTROL_TERMINATE, nope, 2, "r",
                                      "me", NULL),
             DURO_INVALID);
    CHECK_RC(duro_client_control_many(c, 0, nope, 2, "r", "me", cres),
             DURO_INVALID);
    CHECK_OK(duro_client_control_many(c, DURO_CONTROL_SUSPEND, NULL, 0, NULL,
                                      NULL, NULL));
    CHECK_OK(duro_client_control_many(c, DURO_CONTROL_RESUME, nope, 2, NULL,
                                      NULL, cres));
    CHECK_EQ(cres[0].outcome, DURO_CONTROL_OUTCOME_NOT_FOUND);
    CHECK_EQ(cres[1].outcome, DURO_CONTROL_OUTCOME_DUPLICATE);

    /* cancel_matching and purge: client, filter and out required; reason,
     * requested_by and options optional */
    C(duro_bulk_options_init)(NULL);
    duro_bulk_options bo;
    duro_bulk_options_init(&bo);
    bo.dry_run = 1;
    duro_bulk_filter none = {0};
    none.name = "no such orchestration";
    duro_bulk_result *br = (duro_bulk_result *)&f;
    CHECK_RC(C(duro_client_cancel_matching)(NULL, &none, "r", "me", &bo, &br),
             DURO_INVALID);
    CHECK(br == NULL);
    CHECK_RC(duro_client_cancel_matching(c, NULL, "r", "me", &bo, &br),
             DURO_INVALID);
    CHECK_RC(duro_client_cancel_matching(c, &none, "r", "me", &bo, NULL),
             DURO_INVALID);
    CHECK_OK(duro_client_cancel_matching(c, &none, NULL, NULL, NULL, &br));
    CHECK_EQ(br->count, 0);
    duro_bulk_result_free(br);
    br = (duro_bulk_result *)&f;
    CHECK_RC(C(duro_client_control_matching)(NULL, DURO_CONTROL_TERMINATE,
                                             &none, "r", "me", &bo, &br),
             DURO_INVALID);
    CHECK(br == NULL);
    CHECK_RC(duro_client_control_matching(c, DURO_CONTROL_TERMINATE, NULL, "r",
                                          "me", &bo, &br),
             DURO_INVALID);
    CHECK_RC(duro_client_control_matching(c, DURO_CONTROL_TERMINATE, &none, "r",
                                          "me", &bo, NULL),
             DURO_INVALID);
    CHECK_RC(duro_client_control_matching(c, 9, &none, "r", "me", &bo, &br),
             DURO_INVALID);
    CHECK_OK(duro_client_control_matching(c, DURO_CONTROL_SUSPEND, &none, NULL,
                                          NULL, NULL, &br));
    CHECK_EQ(br->count, 0);
    duro_bulk_result_free(br);
    /* reset and rewind (version 13) */
    duro_reset_options ro;
    C(duro_reset_options_init)(NULL);
    C(duro_reset_options_init)(&ro);
    CHECK_EQ(ro.version, 2);
    duro_reset_result rr;
    CHECK_RC(C(duro_client_reset)(NULL, "x", &ro, &rr), DURO_INVALID);
    CHECK_RC(duro_client_reset(c, NULL, &ro, &rr), DURO_INVALID);
    CHECK_RC(duro_client_reset(c, "", &ro, &rr), DURO_INVALID);
    CHECK_RC(duro_client_reset(c, "no such instance", NULL, NULL),
             DURO_NOT_FOUND);
    CHECK_RC(C(duro_client_rewind)(NULL, "x", &ro, &rr), DURO_INVALID);
    CHECK_RC(duro_client_rewind(c, NULL, NULL, NULL), DURO_INVALID);
    CHECK_RC(duro_client_rewind(c, "no such instance", NULL, &rr),
             DURO_NOT_FOUND);
    CHECK_EQ(rr.execution_id, 0);
    ro.to_event_id = 3;
    CHECK_RC(duro_client_rewind(c, "x", &ro, &rr), DURO_INVALID);
    ro.to_event_id = 0;
    duro_reset_list *rl = (duro_reset_list *)&f;
    CHECK_RC(C(duro_client_reset_matching)(NULL, &none, 0, &ro, 0, &rl),
             DURO_INVALID);
    CHECK(rl == NULL);
    CHECK_RC(duro_client_reset_matching(c, NULL, 0, &ro, 0, &rl), DURO_INVALID);
    CHECK_RC(duro_client_reset_matching(c, &none, 0, &ro, 0, NULL),
             DURO_INVALID);
    none.status_mask = 1u << DURO_STATUS_RUNNING;
    CHECK_RC(duro_client_reset_matching(c, &none, 1, &ro, 0, &rl),
             DURO_INVALID);
    none.status_mask = 0;
    CHECK_RC(duro_client_reset_matching(c, &none, 1, &ro, 501, &rl),
             DURO_INVALID);
    CHECK_OK(duro_client_reset_matching(c, &none, 1, NULL, 0, &rl));
    CHECK_EQ(rl->count, 0);
    C(duro_reset_list_free)(rl);
    duro_reset_list_free(NULL);
    none.finished_before_ms = INT64_MAX;
    br = (duro_bulk_result *)&f;
    CHECK_RC(C(duro_client_purge)(NULL, &none, &bo, &br), DURO_INVALID);
    CHECK(br == NULL);
    CHECK_RC(duro_client_purge(c, NULL, &bo, &br), DURO_INVALID);
    CHECK_RC(duro_client_purge(c, &none, &bo, NULL), DURO_INVALID);
    CHECK_OK(duro_client_purge(c, &none, NULL, &br));
    CHECK_EQ(br->count, 0);
    duro_bulk_result_free(br);

    /* status and wait: client, id and out required */
    duro_instance_info *i = (duro_instance_info *)&f;
    CHECK_RC(C(duro_client_get_status)(NULL, "s1", &i), DURO_INVALID);
    CHECK(i == NULL);
    CHECK_RC(duro_client_get_status(c, NULL, &i), DURO_INVALID);
    CHECK_RC(duro_client_get_status(c, "s1", NULL), DURO_INVALID);
    CHECK_RC(C(duro_client_wait)(NULL, "s1", 10000, &i), DURO_INVALID);
    CHECK(i == NULL);
    CHECK_RC(duro_client_wait(c, NULL, 10000, &i), DURO_INVALID);
    CHECK_RC(duro_client_wait(c, "s1", 10000, NULL), DURO_INVALID);
    const char *ids[] = {"s1", "s2", "w1", "w2", "w3"};
    for (size_t k = 0; k < ARRAY_LEN(ids); k++) {
        CHECK_OK(duro_client_wait(c, ids[k], 15000, &i));
        CHECK(duro_status_is_terminal(i->status));
        duro_free(i);
    }
    CHECK_OK(duro_client_get_status(c, "w3", &i));
    CHECK_EQ(i->status, DURO_STATUS_CANCELLED);
    CHECK_STR(i->error, "r");
    duro_free(i);

    /* history and list: client, id and out required; filter optional */
    duro_history *h = (duro_history *)&f;
    CHECK_RC(C(duro_client_read_history)(NULL, "s1", 0, &h), DURO_INVALID);
    CHECK(h == NULL);
    CHECK_RC(duro_client_read_history(c, NULL, 0, &h), DURO_INVALID);
    CHECK_RC(duro_client_read_history(c, "s1", 0, NULL), DURO_INVALID);
    char *exported = (char *)&f;
    CHECK_RC(C(duro_client_export_history)(NULL, "s1", &exported),
             DURO_INVALID);
    CHECK(exported == NULL);
    CHECK_RC(duro_client_export_history(c, NULL, &exported), DURO_INVALID);
    CHECK_RC(duro_client_export_history(c, "s1", NULL), DURO_INVALID);
    CHECK_RC(duro_client_export_history(c, "no-such", &exported),
             DURO_NOT_FOUND);
    duro_instance_list *l = (duro_instance_list *)&f;
    CHECK_RC(C(duro_client_list)(NULL, NULL, &l), DURO_INVALID);
    CHECK(l == NULL);
    duro_instance_filter filter = {0};
    CHECK_RC(duro_client_list(c, &filter, NULL), DURO_INVALID);
    CHECK_OK(duro_client_list(c, NULL, &l));
    CHECK_EQ(l->count, 5);
    duro_instance_list_free(l);

    /* store stats: client and out required */
    duro_store_stats *st = (duro_store_stats *)&f;
    CHECK_RC(C(duro_client_store_stats)(NULL, &st), DURO_INVALID);
    CHECK(st == NULL);
    CHECK_RC(duro_client_store_stats(c, NULL), DURO_INVALID);
    CHECK_OK(duro_client_store_stats(c, &st));
    CHECK(st != NULL);
    duro_free(st);

    /* queries: client and out required; a NULL query is the defaults; a
     * query whose version is not set, or with bad input, is refused */
    C(duro_instance_query_init)(NULL);
    duro_instance_query iq;
    duro_instance_query_init(&iq);
    CHECK_EQ(iq.version, DURO_INSTANCE_QUERY_VERSION);
    CHECK_EQ(iq.count_max, 0);
    CHECK_EQ(iq.order, DURO_ORDER_ID);
    CHECK_EQ(iq.limit, DURO_QUERY_LIMIT_DEFAULT);
    duro_instance_page *pg = (duro_instance_page *)&f;
    CHECK_RC(C(duro_client_query)(NULL, &iq, &pg), DURO_INVALID);
    CHECK(pg == NULL);
    CHECK_RC(duro_client_query(c, &iq, NULL), DURO_INVALID);
    CHECK_OK(duro_client_query(c, NULL, &pg));
    CHECK_EQ(pg->count, 5);
    CHECK(pg->next_cursor == NULL);
    CHECK_EQ(pg->total, -1);
    C(duro_instance_page_free)(pg);
    C(duro_instance_page_free)(NULL);
    duro_runtime_list *rtl = (duro_runtime_list *)&f;
    CHECK_RC(C(duro_client_runtimes)(NULL, &rtl), DURO_INVALID);
    CHECK(rtl == NULL);
    CHECK_RC(duro_client_runtimes(c, NULL), DURO_INVALID);
    CHECK_OK(duro_client_runtimes(c, &rtl));
    CHECK(rtl != NULL);
    C(duro_runtime_list_free)(rtl);
    C(duro_runtime_list_free)(NULL);
    duro_instance_query unset;
    memset(&unset, 0, sizeof(unset));
    pg = (duro_instance_page *)&f;
    CHECK_RC(duro_client_query(c, &unset, &pg), DURO_INVALID);
    CHECK(pg == NULL);
    CHECK_ERRMSG("duro_instance_query_init");
    iq.limit = (size_t)-1;
    CHECK_RC(duro_client_query(c, &iq, &pg), DURO_INVALID);
    CHECK_ERRMSG("limit");
    iq.limit = 2;
    iq.order = 3;
    CHECK_RC(duro_client_query(c, &iq, &pg), DURO_INVALID);
    CHECK_ERRMSG("order");
    iq.order = DURO_ORDER_CREATED_DESC;
    iq.cursor = "not a cursor";
    CHECK_RC(duro_client_query(c, &iq, &pg), DURO_INVALID);
    CHECK_ERRMSG("cursor");
    iq.cursor = NULL;
    char long_name[1026];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    iq.name_prefix = long_name;
    CHECK_RC(duro_client_query(c, &iq, &pg), DURO_TOO_LARGE);
    CHECK_ERRMSG("name_prefix");
    iq.name_prefix = NULL;
    iq.count_total = 1;
    CHECK_OK(duro_client_query(c, &iq, &pg));
    CHECK_EQ(pg->count, 2);
    CHECK_EQ(pg->total, 5);
    CHECK_EQ(pg->total_capped, 0);
    CHECK(pg->next_cursor != NULL);
    duro_instance_page_free(pg);
    /* a bounded count: negative is refused; below the matches it is the
     * cap, capped; at or above them, exact; a query of version 1 ends
     * before count_max, which is then not read */
    iq.count_max = -1;
    CHECK_RC(duro_client_query(c, &iq, &pg), DURO_INVALID);
    CHECK_ERRMSG("count_max");
    iq.count_max = 3;
    CHECK_OK(duro_client_query(c, &iq, &pg));
    CHECK_EQ(pg->total, 3);
    CHECK_EQ(pg->total_capped, 1);
    duro_instance_page_free(pg);
    iq.count_max = 5;
    CHECK_OK(duro_client_query(c, &iq, &pg));
    CHECK_EQ(pg->total, 5);
    CHECK_EQ(pg->total_capped, 0);
    duro_instance_page_free(pg);
    iq.version = 1;
    iq.count_max = -1;
    CHECK_OK(duro_client_query(c, &iq, &pg));
    CHECK_EQ(pg->total, 5);
    CHECK_EQ(pg->total_capped, 0);
    duro_instance_page_free(pg);
    iq.version = DURO_INSTANCE_QUERY_VERSION;
    iq.count_max = 0;

    /* control events: the same rules */
    C(duro_control_event_query_init)(NULL);
    duro_control_event_query eq;
    duro_control_event_query_init(&eq);
    CHECK_EQ(eq.version, 1);
    CHECK_EQ(eq.limit, DURO_QUERY_LIMIT_DEFAULT);
    duro_control_event_list *el = (duro_control_event_list *)&f;
    CHECK_RC(C(duro_client_control_events)(NULL, &eq, &el), DURO_INVALID);
    CHECK(el == NULL);
    CHECK_RC(duro_client_control_events(c, &eq, NULL), DURO_INVALID);
    CHECK_OK(duro_client_control_events(c, NULL, &el));
    CHECK_INT(el->count, >=, 1); /* w3's cancel */
    C(duro_control_event_list_free)(el);
    C(duro_control_event_list_free)(NULL);
    C(duro_schedule_list_free)(NULL);
    C(duro_schedule_fire_list_free)(NULL);
    /* schedules: NULL client and spec (test_schedules covers the rest) */
    C(duro_schedule_spec_init)(NULL);
    duro_schedule_spec ss;
    duro_schedule_spec_init(&ss);
    ss.interval_ms = 1000;
    ss.orchestration = "o";
    CHECK_RC(C(duro_client_schedule_create)(NULL, "s", &ss), DURO_INVALID);
    CHECK_RC(duro_client_schedule_create(c, "s", NULL), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_update)(NULL, "s", &ss), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_pause)(NULL, "s", NULL), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_resume)(NULL, "s"), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_trigger)(NULL, "s", NULL, 0), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_delete)(NULL, "s"), DURO_INVALID);
    CHECK_RC(duro_client_schedule_delete(c, NULL), DURO_INVALID);
    duro_schedule_description *sd = (duro_schedule_description *)&f;
    CHECK_RC(C(duro_client_schedule_list)(NULL, &sd), DURO_INVALID);
    CHECK(sd == NULL);
    CHECK_RC(duro_client_schedule_list(c, NULL), DURO_INVALID);
    CHECK_RC(C(duro_client_schedule_describe)(NULL, "s", 1, 1, &sd),
             DURO_INVALID);
    CHECK_RC(duro_client_schedule_describe(c, "s", 1, 1, NULL), DURO_INVALID);
    C(duro_schedule_description_free)(NULL);
    size_t sn = 1;
    CHECK_RC(C(duro_schedule_spec_next_times)(NULL, 0, NULL, 0, &sn),
             DURO_INVALID);
    CHECK_EQ(sn, 0);
    CHECK_RC(duro_schedule_spec_next_times(&ss, 0, NULL, 0, NULL),
             DURO_INVALID);
    int32_t zoff = 7;
    CHECK_RC(C(duro_time_zone_offset)("UTC", 0, NULL), DURO_INVALID);
    CHECK_RC(duro_time_zone_offset("../etc/passwd", 0, &zoff), DURO_INVALID);
    CHECK_EQ(zoff, 0);
    CHECK_RC(duro_time_zone_offset("Nowhere/Atlantis", 0, &zoff),
             DURO_NOT_FOUND);
    CHECK_ERRMSG("Nowhere/Atlantis");
    duro_control_event_query eunset;
    memset(&eunset, 0, sizeof(eunset));
    el = (duro_control_event_list *)&f;
    CHECK_RC(duro_client_control_events(c, &eunset, &el), DURO_INVALID);
    CHECK(el == NULL);
    CHECK_ERRMSG("duro_control_event_query_init");
    eq.kind_mask = 1u << DURO_EVENT_TIMER_FIRED;
    CHECK_RC(duro_client_control_events(c, &eq, &el), DURO_INVALID);
    CHECK_ERRMSG("kind_mask");
    eq.kind_mask = 0;
    eq.requested_by = long_name;
    CHECK_RC(duro_client_control_events(c, &eq, &el), DURO_TOO_LARGE);
    CHECK_ERRMSG("requested_by");

    /* client metrics: client and stream required; the buffer variant
     * reports its length even when it fails for size */
    CHECK_RC(C(duro_client_metrics_write)(NULL, stdout), DURO_INVALID);
    CHECK_RC(duro_client_metrics_write(c, NULL), DURO_INVALID);
    char cm_small[8] = "x";
    size_t cm_needed = 99;
    CHECK_RC(C(duro_client_metrics_format)(NULL, cm_small, sizeof(cm_small),
                                           &cm_needed),
             DURO_INVALID);
    CHECK_EQ(cm_needed, 0);
    CHECK_RC(duro_client_metrics_format(c, NULL, 16, &cm_needed), DURO_INVALID);
    CHECK_RC(duro_client_metrics_format(c, NULL, 0, &cm_needed),
             DURO_TOO_LARGE);
    CHECK(cm_needed > 0);
    CHECK_RC(duro_client_metrics_format(c, cm_small, sizeof(cm_small), NULL),
             DURO_TOO_LARGE);
    CHECK_STR(cm_small, "");

    /* delete and prune: client and id required; the count is optional */
    size_t n = 0;
    CHECK_RC(C(duro_client_delete)(NULL, "s2", 0, &n), DURO_INVALID);
    CHECK_RC(duro_client_delete(c, NULL, 0, &n), DURO_INVALID);
    CHECK_OK(duro_client_delete(c, "s2", 0, NULL));
    CHECK_EQ(rt_status(&f, "s2"), DURO_STATUS_NOT_FOUND);
    CHECK_RC(C(duro_client_prune)(NULL, "s1", 1, &n), DURO_INVALID);
    CHECK_RC(duro_client_prune(c, NULL, 1, &n), DURO_INVALID);
    CHECK_OK(duro_client_prune(c, "s1", 1, NULL));
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * the test environment (tests/runtime/test_test_env.c runs it) */

TEST(test_env_functions)
{
    duro_test_env_options o;
    C(duro_test_env_options_init)(NULL);
    duro_test_env_options_init(&o);
    CHECK_EQ(o.version, 1);
    duro_registry *r = NULL;
    CHECK_OK(duro_registry_create(&r));
    duro_test_env *env = NULL;
    CHECK_RC(C(duro_test_env_create)(NULL, &o, &env), DURO_INVALID);
    CHECK_RC(duro_test_env_create(r, &o, NULL), DURO_INVALID);
    CHECK(env == NULL);
    CHECK_RC(C(duro_test_env_mock_activity)(NULL, "A", act_echo, NULL),
             DURO_INVALID);
    CHECK_RC(C(duro_test_env_start)(NULL), DURO_INVALID);
    CHECK(C(duro_test_env_client)(NULL) == NULL);
    CHECK_RC(C(duro_test_env_advance)(NULL, 0), DURO_INVALID);
    CHECK_EQ(C(duro_test_env_skipped_ms)(NULL), 0);
    duro_instance_info *i = NULL;
    CHECK_RC(C(duro_test_env_wait)(NULL, "x", 0, &i), DURO_INVALID);
    C(duro_test_env_destroy)(NULL);
    /* with an environment: each pointer argument NULL */
    CHECK_OK(duro_test_env_create(r, NULL, &env));
    CHECK_RC(duro_test_env_mock_activity(env, NULL, act_echo, NULL),
             DURO_INVALID);
    CHECK_RC(duro_test_env_mock_activity(env, "A", NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_test_env_mock_activity(env, "A", act_echo, NULL));
    CHECK(duro_test_env_client(env) != NULL);
    CHECK_OK(duro_test_env_start(env));
    CHECK_RC(duro_test_env_wait(env, NULL, 0, &i), DURO_INVALID);
    CHECK_RC(duro_test_env_wait(env, "x", 0, NULL), DURO_INVALID);
    duro_test_env_destroy(env);
    duro_registry_destroy(r);
}

/* ------------------------------------------------------------------------
 * inside an activity */

static int act_user_tag, orch_user_tag; /* registration user pointers */

/* Fails or succeeds through a result function given a NULL text. */
static int act_result_nulls(duro_activity *a, const char *in, duro_result *out)
{
    (void)a;
    CHECK_RC(C(duro_ok)(NULL, "x"), DURO_INVALID);
    CHECK_RC(C(duro_fail)(NULL, "x"), DURO_INVALID);
    CHECK_RC(C(duro_fail_with)(NULL, DURO_CATEGORY_APPLICATION, "x"),
             DURO_INVALID);
    CHECK_RC(C(duro_failf)(NULL, "%d", 1), DURO_INVALID);
    if (strcmp(in, "fail") == 0)
        return duro_fail(out, NULL);
    if (strcmp(in, "fail_with") == 0)
        return duro_fail_with(out, DURO_CATEGORY_CONFIGURATION, NULL);
    if (strcmp(in, "failf") == 0)
        return duro_failf(out, null_fmt());
    return duro_ok(out, NULL);
}

static int act_context_nulls(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    CHECK(C(duro_activity_instance_id)(NULL) == NULL);
    CHECK_STR(duro_activity_instance_id(a), "nulls");
    CHECK_EQ(C(duro_activity_execution_id)(NULL), 0);
    CHECK_EQ(duro_activity_execution_id(a), 1);
    CHECK(C(duro_activity_name)(NULL) == NULL);
    CHECK_STR(duro_activity_name(a), "ContextNulls");
    CHECK_EQ(C(duro_activity_id)(NULL), 0);
    CHECK(duro_activity_id(a) > 0);
    CHECK_EQ(C(duro_activity_attempt)(NULL), 0);
    CHECK_EQ(duro_activity_attempt(a), 1);
    CHECK_EQ(C(duro_activity_delivery)(NULL), 0);
    CHECK_EQ(duro_activity_delivery(a), 1);
    CHECK(C(duro_activity_input)(NULL) == NULL);
    CHECK_STR(duro_activity_input(a), "in");
    CHECK(C(duro_activity_user)(NULL) == NULL);
    CHECK(duro_activity_user(a) == &act_user_tag);
    CHECK_EQ(C(duro_activity_cancelled)(NULL), 0);
    CHECK_EQ(duro_activity_cancelled(a), 0);
    CHECK_EQ(C(duro_activity_wait_cancelled)(NULL, -1), 0);
    CHECK_EQ(duro_activity_wait_cancelled(a, 0), 0);
    CHECK_EQ(C(duro_activity_cancel_fd)(NULL), -1);
    CHECK_ERRMSG("activity is NULL");
    CHECK(duro_activity_cancel_fd(a) >= 0);
    CHECK(C(duro_activity_cancel_reason)(NULL) == NULL);
    CHECK(duro_activity_cancel_reason(a) == NULL);
    CHECK(C(duro_activity_cancel_token)(NULL) == NULL);

    duro_cancel_token *t = duro_activity_cancel_token(a);
    CHECK(t != NULL);
    CHECK_EQ(C(duro_cancel_token_cancelled)(NULL), 0);
    CHECK_EQ(duro_cancel_token_cancelled(t), 0);
    CHECK_EQ(C(duro_cancel_token_wait)(NULL, -1), 0);
    CHECK_EQ(duro_cancel_token_wait(t, 0), 0);
    CHECK_EQ(C(duro_cancel_token_fd)(NULL), -1);
    CHECK_ERRMSG("token is NULL");
    CHECK(duro_cancel_token_fd(t) >= 0);
    C(duro_cancel_token_release)(NULL);
    duro_cancel_token_release(t);
    return duro_ok(out, "context-ok");
}

/* ------------------------------------------------------------------------
 * inside an orchestration */

static int orch_child(duro_orch *o, const char *in, duro_result *out)
{
    (void)o;
    return duro_ok(out, in ? in : "(none)");
}

static const char *outcome(duro_orch *o, duro_task *t)
{
    int rc = duro_await(o, t);
    return duro_sprintf(o, "%s:%s:%s", duro_errname(rc),
                        duro_task_output(t) ? duro_task_output(t) : "-",
                        duro_task_error(t) ? duro_task_error(t) : "-");
}

/* A task from a call with a NULL context: failed with DURO_MISUSE, and
 * duro_errmsg() names the call. */
#define CHECK_MISUSE_TASK(o, call, fn)                                         \
    do {                                                                       \
        duro_task *t_ = (call);                                                \
        CHECK_ERRMSG(fn ": duro API misuse");                                  \
        CHECK(duro_task_failed(t_));                                           \
        CHECK_RC(duro_await((o), t_), DURO_MISUSE);                            \
    } while (0)

/* A task that failed at once with DURO_INVALID. */
#define CHECK_INVALID_TASK(o, call)                                            \
    do {                                                                       \
        duro_task *t_ = (call);                                                \
        CHECK(duro_task_failed(t_));                                           \
        CHECK_EQ(duro_task_category(t_), DURO_CATEGORY_CONFIGURATION);         \
        CHECK_RC(duro_await((o), t_), DURO_INVALID);                           \
    } while (0)

static void noop_hook(void *arg)
{
    (void)arg;
}

static void context_functions_with_null_context(duro_orch *o, duro_result *out,
                                                duro_task *done)
{
    duro_retry_policy pol;
    duro_retry_policy_init(&pol);
    duro_task *one[] = {done};
    CHECK_MISUSE_TASK(o, C(duro_call_activity)(NULL, "Echo", "x"),
                      "duro_call_activity");
    CHECK_MISUSE_TASK(o,
                      C(duro_call_activity_with_retry)(NULL, "Echo", "x", &pol),
                      "duro_call_activity_with_retry");
    CHECK_MISUSE_TASK(o, C(duro_timer)(NULL, 5), "duro_timer");
    CHECK_MISUSE_TASK(o, C(duro_wait_event)(NULL, "e"), "duro_wait_event");
    CHECK_MISUSE_TASK(
        o, C(duro_call_sub_orchestration)(NULL, "Child", NULL, "nulls-c0", "x"),
        "duro_call_sub_orchestration");
    CHECK_RC(C(duro_start_orchestration)(NULL, "Child", NULL, "nulls-d0", "x"),
             DURO_MISUSE);
    CHECK_ERRMSG("duro_start_orchestration: ");
    CHECK_RC(C(duro_await)(NULL, done), DURO_MISUSE);
    CHECK_ERRMSG("duro_await: ");
    CHECK_MISUSE_TASK(o, C(duro_select_n)(NULL, one, 1), "duro_select_n");
    CHECK_MISUSE_TASK(o, C(duro_wait_any_n)(NULL, one, 1), "duro_wait_any_n");
    CHECK_RC(C(duro_join_n)(NULL, one, 1), DURO_MISUSE);
    CHECK_ERRMSG("duro_join_n: ");
    C(duro_cancel_task)(NULL, done);
    CHECK_ERRMSG("duro_cancel_task: ");
    CHECK_RC(C(duro_continue_as_new)(NULL, out, "x"), DURO_MISUSE);
    CHECK_ERRMSG("duro_continue_as_new: ");
    CHECK_EQ(C(duro_now)(NULL), 0);
    CHECK_ERRMSG("duro_now: ");
    CHECK(C(duro_new_guid)(NULL) == NULL);
    CHECK_ERRMSG("duro_new_guid: ");
    C(duro_set_custom_status)(NULL, "s");
    CHECK_ERRMSG("duro_set_custom_status: ");
    C(duro_log)(NULL, DURO_LOG_ERROR, "x %d", 1);
    CHECK_ERRMSG("duro_log: ");
    CHECK(C(duro_orch_alloc)(NULL, 8) == NULL);
    CHECK_ERRMSG("duro_orch_alloc: ");
    CHECK(C(duro_sprintf)(NULL, "x %d", 1) == NULL);
    CHECK_ERRMSG("duro_sprintf: ");
    CHECK(C(duro_instance_id)(NULL) == NULL);
    CHECK_ERRMSG("duro_instance_id: ");
    CHECK_EQ(C(duro_execution_id)(NULL), 0);
    CHECK_ERRMSG("duro_execution_id: ");
    CHECK(C(duro_input)(NULL) == NULL);
    CHECK_ERRMSG("duro_input: ");
    CHECK_EQ(C(duro_is_replaying)(NULL), 0);
    CHECK_ERRMSG("duro_is_replaying: ");
    CHECK_EQ(C(duro_patched)(NULL, "change"), 0);
    CHECK_ERRMSG("duro_patched: ");
    C(duro_patch_deprecated)(NULL, "change");
    CHECK_ERRMSG("duro_patch_deprecated: ");
    CHECK(C(duro_orch_user)(NULL) == NULL);
    CHECK_ERRMSG("duro_orch_user: ");
    CHECK_EQ(C(duro_cancel_requested)(NULL), 0);
    CHECK_ERRMSG("duro_cancel_requested: ");
    CHECK(C(duro_cancel_reason)(NULL) == NULL);
    CHECK_ERRMSG("duro_cancel_reason: ");
    CHECK(C(duro_cancel_requester)(NULL) == NULL);
    CHECK_ERRMSG("duro_cancel_requester: ");
    CHECK_MISUSE_TASK(o, C(duro_first_done)(NULL, one, 1), "duro_first_done");
    CHECK_MISUSE_TASK(o, C(duro_select_done)(NULL, one, 1), "duro_select_done");
    CHECK_RC(C(duro_all_done)(NULL, one, 1), DURO_MISUSE);
    CHECK_ERRMSG("duro_all_done: ");
    CHECK_RC(C(duro_orch_on_destroy)(NULL, noop_hook, NULL), DURO_MISUSE);
    CHECK_ERRMSG("duro_orch_on_destroy: ");
}

static int orch_nulls(duro_orch *o, const char *in, duro_result *out)
{
    /* a completed task to pass where a task is needed */
    duro_task *done = duro_call_activity(o, "Echo", "done");
    CHECK_OK(duro_await(o, done));

    context_functions_with_null_context(o, out, done);

    /* the other pointer arguments NULL, the context valid */
    CHECK_INVALID_TASK(o, duro_call_activity(o, NULL, "x"));
    duro_task *no_input = duro_call_activity(o, "Echo", NULL);

    duro_retry_policy pol;
    duro_retry_policy_init(&pol);
    pol.max_attempts = 1;
    CHECK_INVALID_TASK(o, duro_call_activity_with_retry(o, NULL, "x", &pol));
    CHECK_INVALID_TASK(o, duro_call_activity_with_retry(o, "Echo", "x", NULL));
    duro_task *retry_no_input =
        duro_call_activity_with_retry(o, "Echo", NULL, &pol);

    CHECK_INVALID_TASK(o, duro_wait_event(o, NULL));

    CHECK_INVALID_TASK(
        o, duro_call_sub_orchestration(o, NULL, NULL, "nulls-c1", "x"));
    duro_task *c_no_version =
        duro_call_sub_orchestration(o, "Child", NULL, "nulls-c2", "v");
    duro_task *c_no_id = duro_call_sub_orchestration(o, "Child", "", NULL, "i");
    duro_task *c_no_input =
        duro_call_sub_orchestration(o, "Child", "", "nulls-c3", NULL);

    CHECK_RC(duro_start_orchestration(o, NULL, NULL, "nulls-d1", "x"),
             DURO_INVALID);
    CHECK_OK(duro_start_orchestration(o, "Child", NULL, "nulls-d2", "x"));
    CHECK_OK(duro_start_orchestration(o, "Child", "", NULL, "x"));
    CHECK_OK(duro_start_orchestration(o, "Child", "", "nulls-d3", NULL));

    CHECK_RC(duro_await(o, NULL), DURO_INVALID);
    CHECK_ERRMSG("task is NULL");

    duro_task *with_null[] = {NULL, done};
    CHECK(duro_select_n(o, NULL, 2) == NULL);
    CHECK_ERRMSG("duro_select_n: tasks is NULL");
    CHECK(duro_select_n(o, with_null, 2) == done);
    CHECK(duro_select(o, done, NULL) == done);
    CHECK(duro_wait_any_n(o, NULL, 2) == NULL);
    CHECK_ERRMSG("duro_wait_any_n: tasks is NULL");
    CHECK(duro_wait_any_n(o, with_null, 2) == done);
    CHECK(duro_wait_any(o, NULL, done) == done);
    CHECK_RC(duro_join_n(o, NULL, 2), DURO_INVALID);
    CHECK_ERRMSG("duro_join_n: tasks is NULL");
    CHECK_OK(duro_join_n(o, NULL, 0));
    CHECK_RC(duro_join_n(o, with_null, 2), DURO_INVALID);
    CHECK_ERRMSG("duro_join_n: tasks[0] is NULL");
    CHECK_RC(duro_join(o, done, NULL), DURO_INVALID);

    duro_cancel_task(o, NULL); /* a no-op */

    /* the waits a driver asks without blocking */
    CHECK(duro_first_done(o, NULL, 2) == NULL);
    CHECK_ERRMSG("duro_first_done: tasks is NULL");
    CHECK(duro_first_done(o, with_null, 2) == done);
    CHECK(duro_first_done(o, NULL, 0) == NULL);
    CHECK(duro_select_done(o, NULL, 2) == NULL);
    CHECK_ERRMSG("duro_select_done: tasks is NULL");
    CHECK(duro_select_done(o, with_null, 2) == done);
    CHECK_RC(duro_all_done(o, NULL, 2), DURO_INVALID);
    CHECK_ERRMSG("duro_all_done: tasks is NULL");
    CHECK_EQ(duro_all_done(o, with_null, 2), 1);
    CHECK_EQ(duro_all_done(o, NULL, 0), 1);
    CHECK_EQ(C(duro_task_state)(NULL), DURO_TASK_PENDING);
    CHECK_EQ(duro_task_state(done), DURO_TASK_SUCCEEDED);
    CHECK_RC(duro_orch_on_destroy(o, NULL, NULL), DURO_INVALID);
    CHECK_OK(duro_orch_on_destroy(o, noop_hook, NULL));

    CHECK_EQ(C(duro_task_done)(NULL), 0);
    CHECK_EQ(C(duro_task_failed)(NULL), 0);
    CHECK(C(duro_task_output)(NULL) == NULL);
    CHECK(C(duro_task_error)(NULL) == NULL);
    CHECK_EQ(C(duro_task_category)(NULL), DURO_CATEGORY_NONE);
    CHECK_EQ(duro_task_done(done), 1);
    CHECK_STR(duro_task_output(done), "done");

    CHECK_RC(duro_continue_as_new(o, NULL, "x"), DURO_INVALID);
    CHECK_OK(duro_continue_as_new(o, out, NULL)); /* replaced below */

    duro_set_custom_status(o, "set");
    duro_set_custom_status(o, NULL); /* clears it */
    duro_log(o, DURO_LOG_ERROR, null_fmt());
    CHECK_ERRMSG("duro_log: fmt is NULL");
    CHECK(duro_sprintf(o, null_fmt()) == NULL);
    CHECK_ERRMSG("duro_sprintf: fmt is NULL");
    CHECK(duro_orch_alloc(o, 8) != NULL);
    CHECK(duro_new_guid(o) != NULL);
    CHECK(duro_now(o) > 0);
    CHECK_STR(duro_instance_id(o), "nulls");
    CHECK_EQ(duro_execution_id(o), 1);
    CHECK_STR(duro_input(o), in);
    CHECK(duro_orch_user(o) == &orch_user_tag);
    (void)duro_is_replaying(o);
    CHECK_EQ(duro_cancel_requested(o), 0);
    CHECK(duro_cancel_reason(o) == NULL);
    CHECK(duro_cancel_requester(o) == NULL);

    /* the valid calls did their work */
    duro_task *act = duro_call_activity(o, "ContextNulls", "in");
    duro_task *r_fail = duro_call_activity(o, "ResultNulls", "fail");
    duro_task *r_with = duro_call_activity(o, "ResultNulls", "fail_with");
    duro_task *r_failf = duro_call_activity(o, "ResultNulls", "failf");
    duro_task *r_ok = duro_call_activity(o, "ResultNulls", "ok");
    duro_task *results[] = {
        no_input, retry_no_input, c_no_version, c_no_id, c_no_input,
        act,      r_fail,         r_with,       r_failf, r_ok};
    const char *report = "";
    for (size_t k = 0; k < ARRAY_LEN(results); k++)
        report = duro_sprintf(o, "%s%s|", report, outcome(o, results[k]));
    report = duro_sprintf(o, "%s%s", report,
                          duro_category_name(duro_task_category(r_with)));
    return duro_ok(out, report);
}

TEST(orchestration_and_activity_contexts_inside)
{
    rt_fixture f;
    rt_init(&f, "nulls_inside.db");
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Nulls", NULL, orch_nulls,
                                             &orch_user_tag));
    CHECK_OK(duro_registry_add_orchestration(f.reg, "Child", NULL, orch_child,
                                             NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "Echo", act_echo, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "ContextNulls",
                                        act_context_nulls, &act_user_tag));
    CHECK_OK(duro_registry_add_activity(f.reg, "ResultNulls", act_result_nulls,
                                        NULL));
    rt_start(&f);
    rt_start_instance(&f, "nulls", "Nulls", "the input");
    duro_instance_info *i = rt_wait(&f, "nulls", 30000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "DURO_OK:-:-"
                         "|DURO_OK:-:-"
                         "|DURO_OK:v:-"
                         "|DURO_OK:i:-"
                         "|DURO_OK:(none):-"
                         "|DURO_OK:context-ok:-"
                         "|DURO_FAILED:-:failed"
                         "|DURO_FAILED:-:failed"
                         "|DURO_FAILED:-:failed"
                         "|DURO_OK:-:-"
                         "|configuration");
    CHECK(i->custom_status == NULL);
    duro_free(i);
    /* the fire-and-forget children with NULL id, version or input ran */
    const char *detached[] = {"nulls-d2", "nulls-d3"};
    for (size_t k = 0; k < ARRAY_LEN(detached); k++) {
        i = rt_wait(&f, detached[k], 15000);
        CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
        duro_free(i);
    }
    /* nothing was started for the calls that were refused */
    CHECK_EQ(rt_status(&f, "nulls-c0"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "nulls-c1"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "nulls-d0"), DURO_STATUS_NOT_FOUND);
    CHECK_EQ(rt_status(&f, "nulls-d1"), DURO_STATUS_NOT_FOUND);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * outside an orchestration: a parked context used from the test thread */

static duro_orch *_Atomic parked_o;
static duro_result *_Atomic parked_out;
static duro_task *_Atomic parked_task;

static int orch_park(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Echo", "parked");
    duro_await(o, t);
    duro_task *go = duro_wait_event(o, "go");
    atomic_store(&parked_task, t);
    atomic_store(&parked_out, out);
    atomic_store(&parked_o, o);
    duro_await(o, go);
    atomic_store(&parked_o, NULL);
    return duro_ok(out, duro_task_output(go));
}

/* Every context function with a context that is not running on this
 * thread's fiber, each pointer argument NULL in turn. */
static void context_functions_outside(duro_orch *o, duro_result *out,
                                      duro_task *t)
{
    duro_retry_policy pol;
    duro_retry_policy_init(&pol);
    duro_task *one[] = {t};
    const char *names[] = {"Echo", NULL};
    for (size_t k = 0; k < ARRAY_LEN(names); k++) {
        const char *name = names[k];
        CHECK_MISUSE_TASK(o, duro_call_activity(o, name, "x"),
                          "duro_call_activity");
        CHECK_MISUSE_TASK(o, duro_call_activity(o, name, NULL),
                          "duro_call_activity");
        CHECK_MISUSE_TASK(o, duro_call_activity_with_retry(o, name, "x", &pol),
                          "duro_call_activity_with_retry");
        CHECK_MISUSE_TASK(o, duro_call_activity_with_retry(o, name, "x", NULL),
                          "duro_call_activity_with_retry");
        CHECK_MISUSE_TASK(o, duro_call_activity_with_retry(o, name, NULL, &pol),
                          "duro_call_activity_with_retry");
        CHECK_MISUSE_TASK(o, duro_wait_event(o, name), "duro_wait_event");
        CHECK_MISUSE_TASK(
            o, duro_call_sub_orchestration(o, name, NULL, NULL, NULL),
            "duro_call_sub_orchestration");
        CHECK_RC(duro_start_orchestration(o, name, NULL, NULL, NULL),
                 DURO_MISUSE);
        CHECK_ERRMSG("duro_start_orchestration: ");
    }
    CHECK_MISUSE_TASK(o, duro_timer(o, 5), "duro_timer");
    CHECK_RC(duro_await(o, t), DURO_MISUSE);
    CHECK_ERRMSG("duro_await: ");
    CHECK_RC(duro_await(o, NULL), DURO_INVALID);
    CHECK_MISUSE_TASK(o, duro_select_n(o, one, 1), "duro_select_n");
    CHECK(duro_select_n(o, NULL, 1) == NULL);
    CHECK_MISUSE_TASK(o, duro_wait_any_n(o, one, 1), "duro_wait_any_n");
    CHECK(duro_wait_any_n(o, NULL, 1) == NULL);
    CHECK_RC(duro_join_n(o, one, 1), DURO_MISUSE);
    CHECK_RC(duro_join_n(o, NULL, 1), DURO_MISUSE);
    duro_cancel_task(o, t);
    CHECK_ERRMSG("duro_cancel_task: ");
    duro_cancel_task(o, NULL);
    /* read from a plain thread: as a task failed with DURO_MISUSE */
    CHECK_EQ(duro_task_done(t), 1);
    CHECK_ERRMSG("duro_task_done: called outside orchestration code");
    CHECK_EQ(duro_task_failed(t), 1);
    CHECK(duro_task_output(t) == NULL);
    CHECK(duro_task_error(t) != NULL);
    CHECK_EQ(duro_task_category(t), DURO_CATEGORY_CONFIGURATION);
    CHECK_RC(duro_continue_as_new(o, out, "x"), DURO_MISUSE);
    CHECK_RC(duro_continue_as_new(o, NULL, "x"), DURO_MISUSE);
    CHECK_RC(duro_continue_as_new(o, out, NULL), DURO_MISUSE);
    CHECK_EQ(duro_now(o), 0);
    CHECK(duro_new_guid(o) == NULL);
    duro_set_custom_status(o, "outside");
    duro_set_custom_status(o, NULL);
    CHECK_ERRMSG("duro_set_custom_status: ");
    duro_log(o, DURO_LOG_ERROR, "x");
    duro_log(o, DURO_LOG_ERROR, null_fmt());
    CHECK_ERRMSG("duro_log: duro API misuse");
    CHECK(duro_orch_alloc(o, 8) == NULL);
    CHECK(duro_sprintf(o, "x") == NULL);
    CHECK(duro_sprintf(o, null_fmt()) == NULL);
    CHECK_ERRMSG("duro_sprintf: duro API misuse");
    CHECK(duro_instance_id(o) == NULL);
    CHECK_EQ(duro_execution_id(o), 0);
    CHECK(duro_input(o) == NULL);
    CHECK_EQ(duro_is_replaying(o), 0);
    CHECK_EQ(duro_patched(o, "change"), 0);
    CHECK_ERRMSG("duro_patched: duro API misuse");
    CHECK(duro_orch_user(o) == NULL);
    CHECK_ERRMSG("duro_orch_user: ");
    CHECK_EQ(duro_task_state(t), DURO_TASK_FAILED);
    CHECK_ERRMSG("duro_task_state: called outside orchestration code");
    CHECK_MISUSE_TASK(o, duro_first_done(o, one, 1), "duro_first_done");
    CHECK(duro_first_done(o, NULL, 1) == NULL);
    CHECK_MISUSE_TASK(o, duro_select_done(o, one, 1), "duro_select_done");
    CHECK(duro_select_done(o, NULL, 1) == NULL);
    CHECK_RC(duro_all_done(o, one, 1), DURO_MISUSE);
    CHECK_RC(duro_all_done(o, NULL, 1), DURO_MISUSE);
    CHECK_RC(duro_orch_on_destroy(o, noop_hook, NULL), DURO_MISUSE);
    CHECK_RC(duro_orch_on_destroy(o, NULL, NULL), DURO_MISUSE);
}

TEST(orchestration_context_outside)
{
    atomic_store(&parked_o, NULL);
    rt_fixture f;
    rt_init(&f, "nulls_outside.db");
    CHECK_OK(
        duro_registry_add_orchestration(f.reg, "Park", NULL, orch_park, NULL));
    CHECK_OK(duro_registry_add_activity(f.reg, "Echo", act_echo, NULL));
    rt_start(&f);
    rt_start_instance(&f, "park", "Park", NULL);
    WAIT_UNTIL(atomic_load(&parked_o) != NULL, 15000);
    context_functions_outside(atomic_load(&parked_o), atomic_load(&parked_out),
                              atomic_load(&parked_task));
    /* and with no context at all */
    context_functions_outside(NULL, NULL, atomic_load(&parked_task));
    CHECK_OK(duro_client_raise_event(f.client, "park", "go", "went"));
    duro_instance_info *i = rt_wait(&f, "park", 15000);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "went");
    CHECK(i->custom_status == NULL);
    duro_free(i);
    /* none of the refused calls reached the instance */
    CHECK_EQ(rt_count_events(&f, "park", DURO_EVENT_ACTIVITY_SCHEDULED), 1);
    CHECK_EQ(rt_count_events(&f, "park", DURO_EVENT_TIMER_CREATED), 0);
    CHECK_EQ(rt_count_events(&f, "park", DURO_EVENT_EVENT_SUBSCRIBED), 1);
    CHECK_EQ(
        rt_count_events(&f, "park", DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED), 0);
    rt_done(&f);
}

/* ------------------------------------------------------------------------
 * coverage: every DURO_API function of the headers was called above */

static const char *const api_functions[] = {
#define DURO_API_FUNCTION(name) #name,
#include "api_functions.h"
#undef DURO_API_FUNCTION
};

TEST(every_public_function_was_called)
{
    size_t missing = 0;
    for (size_t i = 0; i < ARRAY_LEN(api_functions); i++) {
        int found = 0;
        pthread_mutex_lock(&cover_lock);
        for (size_t k = 0; k < covered_count && !found; k++)
            found = strcmp(covered[k], api_functions[i]) == 0;
        pthread_mutex_unlock(&cover_lock);
        if (!found) {
            fprintf(stderr, "  not called with NULL arguments: %s\n",
                    api_functions[i]);
            missing++;
        }
    }
    CHECK_MSG(missing == 0,
              "%zu of %zu public functions are not covered by "
              "test_api_nulls.c (when running a filtered subset, run the "
              "whole binary: each test records what it calls)",
              missing, ARRAY_LEN(api_functions));
    /* and nothing was recorded that is not a public function */
    CHECK_EQ(covered_count, ARRAY_LEN(api_functions));
    CHECK_INT(ARRAY_LEN(api_functions), >=, 96);
}

TEST_MAIN(T(common_and_provider_helpers), T(registry_and_initializers),
          T(runtime_functions), T(client_functions), T(test_env_functions),
          T(orchestration_and_activity_contexts_inside),
          T(orchestration_context_outside), T(every_public_function_was_called))
