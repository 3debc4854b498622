/* validation.c - the provider validation suite: one named test per clause of
 * duro/provider.h, run against whatever provider the factory opens. Only
 * provider methods are used (no SQL, no URLs), so the same file validates
 * every provider. Tests run on the harness's main thread; the racing and
 * wake-up tests start threads that report through the harness's CHECKs. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "validation.h"

/* Lock timeouts. LOCK_LONG never expires during a test; LOCK_SHORT is the
 * expiry under test (waited for with deadlines, never a fixed sleep). */
#define LOCK_LONG 60000
#define LOCK_SHORT 150
/* Deadline of every wait for something that should happen within
 * milliseconds; generous so sanitizer builds on a loaded machine pass. */
#define DEADLINE_MS 5000
/* Clock rounding allowed when checking that something did not happen
 * before a due time (providers keep whole milliseconds). */
#define CLOCK_SLACK_MS 2

#define ORCH DURO_QUEUE_ORCHESTRATOR
#define WORKER DURO_QUEUE_WORKER

const char *pv_test_name = "";
static const pv_factory *factory;

/* ========================================================================
 * Stores: every test gets a fresh one from the factory. Stores a failed test
 * left open are closed before the next test starts and at exit. */

#define MAX_OPEN_STORES 4
static duro_provider *open_stores[MAX_OPEN_STORES];

const pv_factory *pv_factory_get(void)
{
    return factory;
}

static void close_open_stores(void)
{
    for (int i = 0; i < MAX_OPEN_STORES; i++) {
        if (open_stores[i] != NULL) {
            factory->close(factory->ctx, open_stores[i]);
            open_stores[i] = NULL;
        }
    }
}

void pv_begin(const char *test_name)
{
    close_open_stores();
    pv_test_name = test_name;
}

void pv_end(void)
{
    close_open_stores();
}

void pv_close(duro_provider *p)
{
    for (int i = 0; i < MAX_OPEN_STORES; i++)
        if (open_stores[i] == p)
            open_stores[i] = NULL;
    if (p != NULL)
        factory->close(factory->ctx, p);
}

static uint64_t count(duro_provider *p, duro_queue q, const char *id);

static duro_provider *track_store(duro_provider *p, int check_empty)
{
    CHECK_MSG(p != NULL, "factory '%s' could not open a store for %s",
              factory->name, pv_test_name);
    int slot = -1;
    for (int i = 0; i < MAX_OPEN_STORES; i++)
        if (open_stores[i] == NULL && slot < 0)
            slot = i;
    if (slot < 0) {
        factory->close(factory->ctx, p);
        test_fail(__FILE__, __LINE__, "more than %d stores open at once",
                  MAX_OPEN_STORES);
        return NULL;
    }
    open_stores[slot] = p;
    CHECK_EQ(p->version, DURO_PROVIDER_VERSION);
    CHECK(p->name != NULL);
    /* version 11: 0 (no preference) or a batch a runtime may take */
    CHECK(p->turn_batch >= 0 && p->turn_batch <= 1024);
    if (!check_empty)
        return p;
    /* Every test starts from an empty store. */
    CHECK_EQ(count(p, ORCH, NULL), 0);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    duro_instance_list *list = NULL;
    duro_error e;
    CHECK_PRC(p->list_instances(p, &all, &list, &e), DURO_OK, &e);
    CHECK(list != NULL);
    CHECK_EQ(list->count, 0);
    duro_instance_list_free(list);
    return p;
}

duro_provider *pv_open(void)
{
    return track_store(factory->open(factory->ctx, pv_test_name), 1);
}

duro_provider *pv_open_same(void)
{
    CHECK(factory->open_same != NULL);
    return track_store(factory->open_same(factory->ctx, pv_test_name), 0);
}

duro_provider *pv_open_with_max_history(uint64_t max_history)
{
    CHECK(factory->open_with_max_history != NULL);
    return track_store(
        factory->open_with_max_history(factory->ctx, pv_test_name, max_history),
        1);
}

static size_t max_payload(void)
{
    return factory->max_payload ? factory->max_payload : (size_t)1 << 20;
}

/* ========================================================================
 * Building items and events. */

static duro_work_item work(duro_work_kind kind, const char *instance)
{
    duro_work_item w;
    memset(&w, 0, sizeof(w));
    w.kind = kind;
    w.instance_id = instance;
    return w;
}

static duro_event event(uint64_t id, duro_event_kind kind)
{
    duro_event e;
    memset(&e, 0, sizeof(e));
    e.event_id = id;
    e.kind = kind;
    e.timestamp_ms = duro_now_ms();
    return e;
}

static duro_work_item activity(const char *instance, uint64_t execution,
                               uint64_t activity_id)
{
    duro_work_item w = work(DURO_WORK_ACTIVITY_EXECUTE, instance);
    w.execution_id = execution;
    w.source_id = activity_id;
    w.name = "act";
    w.payload = "act-input";
    w.attempt = 1;
    return w;
}

static duro_activity_ref ref(const char *instance, uint64_t execution,
                             uint64_t activity_id)
{
    duro_activity_ref r = {instance, execution, activity_id};
    return r;
}

static duro_instance_meta meta(int status)
{
    duro_instance_meta m;
    memset(&m, 0, sizeof(m));
    m.status = status;
    return m;
}

static duro_orch_ack ack_of(uint64_t execution, const duro_event *delta,
                            size_t delta_count, const duro_instance_meta *m)
{
    duro_orch_ack a;
    memset(&a, 0, sizeof(a));
    a.execution_id = execution;
    a.history_delta = delta;
    a.history_delta_count = delta_count;
    a.meta = m;
    return a;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* A string of n copies of c (caller frees). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    if (s == NULL)
        return NULL;
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ========================================================================
 * Calls that must succeed (on the main thread: a failure ends the test). */

static void enqueue(duro_provider *p, const duro_work_item *w, int64_t delay)
{
    duro_error e;
    CHECK_PRC(p->enqueue_for_orchestrator(p, w, delay, &e), DURO_OK, &e);
}

static void start_named(duro_provider *p, const char *id, const char *input)
{
    duro_work_item w = work(DURO_WORK_START, id);
    w.name = "orch";
    w.version = "1.0";
    w.payload = input;
    enqueue(p, &w, 0);
}

static void start(duro_provider *p, const char *id)
{
    start_named(p, id, "\"input\"");
}

static void raise_event(duro_provider *p, const char *id, const char *payload,
                        int64_t delay)
{
    duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, id);
    w.name = "poke";
    w.payload = payload;
    enqueue(p, &w, delay);
}

static uint64_t count(duro_provider *p, duro_queue q, const char *id)
{
    duro_error e;
    uint64_t n = 999999;
    CHECK_PRC(p->count_messages(p, q, id, &n, &e), DURO_OK, &e);
    return n;
}

static duro_orch_item *fetch_orch(duro_provider *p, int64_t lock_ms)
{
    duro_error e;
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, lock_ms, NULL, &item, &e), DURO_OK,
              &e);
    if (item != NULL) {
        CHECK(item->lock_token != NULL && item->lock_token[0] != '\0');
        CHECK(item->instance_id != NULL);
        CHECK(item->message_count > 0);
        CHECK(item->attempt >= 1);
    }
    return item;
}

/* For WAIT_UNTIL: fetches once, returns 1 when something came back. */
static int try_fetch_orch(duro_provider *p, int64_t lock_ms,
                          duro_orch_item **out)
{
    *out = fetch_orch(p, lock_ms);
    return *out != NULL;
}

/* Fetches the next item and fails unless it is for `id`. */
static duro_orch_item *fetch_orch_expect(duro_provider *p, const char *id,
                                         int64_t lock_ms)
{
    duro_orch_item *item = fetch_orch(p, lock_ms);
    CHECK_MSG(item != NULL, "expected an item for '%s', fetched nothing", id);
    CHECK_STR(item->instance_id, id);
    return item;
}

/* Fetches until the item for `id` comes; items of other instances are
 * abandoned at once (raising their fetch counts). */
static duro_orch_item *fetch_orch_for(duro_provider *p, const char *id,
                                      int64_t lock_ms)
{
    duro_orch_item *others[64];
    size_t n = 0;
    duro_orch_item *found = NULL;
    while (found == NULL && n < 64) {
        duro_orch_item *item = fetch_orch(p, lock_ms);
        if (item == NULL)
            break;
        if (strcmp(item->instance_id, id) == 0)
            found = item;
        else
            others[n++] = item;
    }
    duro_error e;
    for (size_t i = 0; i < n; i++) {
        CHECK_PRC(
            p->abandon_orchestration_item(p, others[i]->lock_token, 0, &e),
            DURO_OK, &e);
        duro_orch_item_free(others[i]);
    }
    CHECK_MSG(found != NULL, "no fetchable item for '%s'", id);
    return found;
}

static void expect_no_orch(duro_provider *p)
{
    duro_orch_item *item = fetch_orch(p, LOCK_LONG);
    CHECK_MSG(item == NULL, "expected nothing fetchable, got an item for '%s'",
              item ? item->instance_id : "");
}

static duro_worker_item *fetch_work(duro_provider *p, int64_t lock_ms)
{
    duro_error e;
    duro_worker_item *w = NULL;
    CHECK_PRC(p->fetch_work_item(p, lock_ms, &w, &e), DURO_OK, &e);
    if (w != NULL) {
        CHECK(w->lock_token != NULL && w->lock_token[0] != '\0');
        CHECK_EQ(w->item.kind, DURO_WORK_ACTIVITY_EXECUTE);
        CHECK(w->attempt >= 1);
    }
    return w;
}

static int try_fetch_work(duro_provider *p, int64_t lock_ms,
                          duro_worker_item **out)
{
    *out = fetch_work(p, lock_ms);
    return *out != NULL;
}

static void expect_no_work(duro_provider *p)
{
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK_MSG(w == NULL,
              "expected no fetchable work item, got %s activity %llu",
              w ? w->item.instance_id : "",
              w ? (unsigned long long)w->item.source_id : 0ULL);
}

static void ack(duro_provider *p, const char *token, const duro_orch_ack *a)
{
    duro_error e;
    CHECK_PRC(p->ack_orchestration_item(p, token, a, &e), DURO_OK, &e);
}

static void abandon_orch(duro_provider *p, duro_orch_item *item, int64_t delay)
{
    duro_error e;
    CHECK_PRC(p->abandon_orchestration_item(p, item->lock_token, delay, &e),
              DURO_OK, &e);
}

static duro_instance_list *get(duro_provider *p, const char *id)
{
    duro_error e;
    duro_instance_list *l = NULL;
    CHECK_PRC(p->get_instance(p, id, &l, &e), DURO_OK, &e);
    CHECK(l != NULL);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].instance_id, id);
    return l;
}

static void expect_no_instance(duro_provider *p, const char *id)
{
    duro_error e;
    duro_instance_list *l = NULL;
    CHECK_PFAIL(p->get_instance(p, id, &l, &e), DURO_NOT_FOUND, 0, &e);
    duro_instance_list_free(l);
}

static duro_history *history(duro_provider *p, const char *id,
                             uint64_t execution)
{
    duro_error e;
    duro_history *h = NULL;
    CHECK_PRC(p->read_history(p, id, execution, &h, &e), DURO_OK, &e);
    CHECK(h != NULL);
    return h;
}

static size_t history_len(duro_provider *p, const char *id, uint64_t execution)
{
    duro_history *h = history(p, id, execution);
    size_t n = h->count;
    duro_history_free(h);
    return n;
}

static uint64_t latest(duro_provider *p, const char *id)
{
    duro_error e;
    uint64_t ex = 999999;
    CHECK_PRC(p->latest_execution_id(p, id, &ex, &e), DURO_OK, &e);
    return ex;
}

/* Starts `id` and runs its first turn: OrchestrationStarted plus
 * `activities` ActivityScheduled events (ids 2 ..), one worker row each,
 * status Running. The history then holds activities + 1 events. */
static void begin(duro_provider *p, const char *id, size_t activities)
{
    start(p, id);
    duro_orch_item *item = fetch_orch_for(p, id, LOCK_LONG);
    CHECK_EQ(item->status, DURO_STATUS_PENDING);
    duro_event *delta = calloc(activities + 1, sizeof(*delta));
    duro_work_item *workers = calloc(activities + 1, sizeof(*workers));
    CHECK(delta != NULL && workers != NULL);
    delta[0] = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    delta[0].name = "orch";
    delta[0].version = "1.0";
    delta[0].payload = "\"input\"";
    for (size_t i = 0; i < activities; i++) {
        delta[i + 1] = event(i + 2, DURO_EVENT_ACTIVITY_SCHEDULED);
        delta[i + 1].name = "act";
        delta[i + 1].payload = "act-input";
        delta[i + 1].attempt = 1;
        workers[i] = activity(id, 1, i + 2);
    }
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.name = "orch";
    m.version = "1.0";
    duro_orch_ack a = ack_of(1, delta, activities + 1, &m);
    a.worker_items = workers;
    a.worker_item_count = activities;
    ack(p, item->lock_token, &a);
    free(delta);
    free(workers);
    duro_orch_item_free(item);
}

/* Starts `id` and fetches its START under a long lock that stays held, as
 * a runtime busy with its first turn holds it: a cancel, terminate or
 * suspend then goes on its queue (DURO_CANCEL_REQUESTED) instead of
 * deciding it at once (provider version 9). Free the item. */
static duro_orch_item *start_held(duro_provider *p, const char *id)
{
    start(p, id);
    return fetch_orch_for(p, id, LOCK_LONG);
}

/* Raises an event for `id` and fetches its item (others abandoned). */
static duro_orch_item *poke(duro_provider *p, const char *id)
{
    raise_event(p, id, "\"poke\"", 0);
    return fetch_orch_for(p, id, LOCK_LONG);
}

/* The EventRaised events for every message of `item`, numbered after its
 * history (caller frees). */
static duro_event *events_for(const duro_orch_item *item)
{
    duro_event *d = calloc(item->message_count, sizeof(*d));
    CHECK(d != NULL);
    for (size_t i = 0; i < item->message_count; i++) {
        d[i] = event(item->history_total + 1 + i, DURO_EVENT_EVENT_RAISED);
        d[i].name = "poke";
        d[i].payload = item->messages[i].payload;
    }
    return d;
}

/* One turn of `id` that records its messages and cancels `refs`. */
static void turn_cancel(duro_provider *p, const char *id,
                        const duro_activity_ref *refs, size_t n)
{
    duro_orch_item *item = poke(p, id);
    duro_event *d = events_for(item);
    duro_orch_ack a = ack_of(item->execution_id, d, item->message_count, NULL);
    a.cancelled_activities = refs;
    a.cancelled_activity_count = n;
    ack(p, item->lock_token, &a);
    free(d);
    duro_orch_item_free(item);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Fetches and acks (no completion) every visible work item; returns their
 * "instance:activity" ids sorted and comma-separated (caller frees). */
static char *drain_work(duro_provider *p)
{
    size_t n = 0, cap = 16;
    char **ids = malloc(cap * sizeof(*ids));
    CHECK(ids != NULL);
    duro_worker_item *w;
    duro_error e;
    while ((w = fetch_work(p, LOCK_LONG)) != NULL) {
        if (n == cap) {
            cap *= 2;
            ids = realloc(ids, cap * sizeof(*ids));
            CHECK(ids != NULL);
        }
        char buf[256];
        snprintf(buf, sizeof(buf), "%s:%04llu", w->item.instance_id,
                 (unsigned long long)w->item.source_id);
        ids[n++] = xstrdup(buf);
        CHECK_PRC(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_OK, &e);
        duro_worker_item_free(w);
        CHECK_MSG(n < 100000, "fetch_work_item never runs dry");
    }
    qsort(ids, n, sizeof(*ids), compare_strings);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    char *out = malloc(len);
    CHECK(out != NULL);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(out, ",");
        strcat(out, ids[i]);
        free(ids[i]);
    }
    free(ids);
    return out;
}

#define CHECK_DRAIN(p, expected)                                               \
    do {                                                                       \
        char *got_ = drain_work(p);                                            \
        CHECK_STR(got_, expected);                                             \
        free(got_);                                                            \
    } while (0)

/* Waits until `flag` is set or timeout_ms passes, without failing (for the
 * threaded tests, whose main thread must not leave while threads run). */
static int wait_flag(_Atomic int *flag, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (!atomic_load(flag)) {
        if (test_now_ms() > deadline)
            return 0;
        test_sleep_ms(1);
    }
    return 1;
}

/* ========================================================================
 * Snapshots. */

typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_vprintf(strbuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (s == NULL)
            abort();
        b->s = s;
        b->cap = cap;
    }
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

static void sb_printf(strbuf *b, const char *fmt, ...) DURO_PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

/* A string field: NULL, short ones quoted, long ones by length and hash. */
static void sb_str(strbuf *b, const char *key, const char *v)
{
    if (v == NULL) {
        sb_printf(b, " %s=NULL", key);
    } else if (strlen(v) > 80) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (const unsigned char *c = (const unsigned char *)v; *c; c++)
            h = (h ^ *c) * 1099511628211ULL;
        sb_printf(b, " %s=<%zu bytes %016llx>", key, strlen(v),
                  (unsigned long long)h);
    } else {
        sb_printf(b, " %s=\"%s\"", key, v);
    }
}

static void dump_event(strbuf *b, const duro_event *e)
{
    sb_printf(b, "    event id=%llu kind=%d source=%llu ts=%lld",
              (unsigned long long)e->event_id, (int)e->kind,
              (unsigned long long)e->source_event_id,
              (long long)e->timestamp_ms);
    sb_str(b, "name", e->name);
    sb_str(b, "version", e->version);
    sb_str(b, "payload", e->payload);
    sb_str(b, "error", e->error);
    sb_printf(b, " category=%d", e->category);
    sb_str(b, "reason", e->reason);
    sb_str(b, "requested_by", e->requested_by);
    sb_str(b, "ref_instance", e->ref_instance);
    sb_printf(b,
              " ref_execution=%llu ref_event=%llu fire_at=%lld "
              "attempt=%u flags=%u started=%lld finished=%lld\n",
              (unsigned long long)e->ref_execution,
              (unsigned long long)e->ref_event_id, (long long)e->fire_at_ms,
              e->attempt, e->flags, (long long)e->started_ms,
              (long long)e->finished_ms);
}

static void dump_work(strbuf *b, const char *indent, const duro_work_item *w)
{
    sb_printf(b, "%swork kind=%d", indent, (int)w->kind);
    sb_str(b, "instance", w->instance_id);
    sb_printf(b, " execution=%llu source=%llu",
              (unsigned long long)w->execution_id,
              (unsigned long long)w->source_id);
    sb_str(b, "name", w->name);
    sb_str(b, "version", w->version);
    sb_str(b, "payload", w->payload);
    sb_str(b, "error", w->error);
    sb_printf(b, " category=%d", w->category);
    sb_str(b, "reason", w->reason);
    sb_str(b, "requested_by", w->requested_by);
    sb_str(b, "parent", w->parent_instance);
    sb_printf(b,
              " parent_execution=%llu parent_event=%llu fire_at=%lld "
              "attempt=%u flags=%u started=%lld finished=%lld\n",
              (unsigned long long)w->parent_execution,
              (unsigned long long)w->parent_event_id, (long long)w->fire_at_ms,
              w->attempt, w->flags, (long long)w->started_ms,
              (long long)w->finished_ms);
}

static void dump_counts(strbuf *b, duro_provider *p, const char *id)
{
    sb_printf(b, "  counts orchestrator=%llu worker=%llu\n",
              (unsigned long long)count(p, ORCH, id),
              (unsigned long long)count(p, WORKER, id));
}

typedef struct snap_entry {
    strbuf text;
    uint32_t attempt;
} snap_entry;

static int compare_entries(const void *a, const void *b)
{
    const snap_entry *x = a, *y = b;
    int c = strcmp(x->text.s, y->text.s);
    if (c != 0)
        return c;
    return (x->attempt > y->attempt) - (x->attempt < y->attempt);
}

#define SNAPSHOT_MAX_ITEMS 4096

/* Version 13: every schedule (every field) and its fires log. */
static void dump_schedules(strbuf *b, duro_provider *p)
{
    if (p->version < 13 || p->list_schedules == NULL)
        return;
    duro_error e;
    duro_schedule_list *l = NULL;
    CHECK_PRC(p->list_schedules(p, NULL, 100000, &l, &e), DURO_OK, &e);
    for (size_t i = 0; l != NULL && i < l->count; i++) {
        const duro_schedule_record *r = &l->items[i];
        sb_printf(b, "schedule");
        sb_str(b, "id", r->id);
        sb_str(b, "spec", r->spec);
        sb_str(b, "last", r->last_instance_id);
        sb_str(b, "note", r->note);
        sb_printf(b,
                  " spec_version=%lld row_version=%lld next=%lld due=%lld "
                  "buffered=%lld last_status=%d paused=%d fires=%lld "
                  "skips=%lld created=%lld updated=%lld\n",
                  (long long)r->spec_version, (long long)r->row_version,
                  (long long)r->next_ms, (long long)r->due_ms,
                  (long long)r->buffered_ms, r->last_status, r->paused,
                  (long long)r->fires, (long long)r->skips,
                  (long long)r->created_ms, (long long)r->updated_ms);
        duro_schedule_fire_list *f = NULL;
        CHECK_PRC(p->list_schedule_fires(p, r->id, 100000, &f, &e), DURO_OK,
                  &e);
        for (size_t k = 0; f != NULL && k < f->count; k++) {
            const duro_schedule_action *a = &f->items[k];
            sb_printf(b,
                      "  fire kind=%d time=%lld count=%lld status=%d "
                      "recorded=%lld",
                      a->kind, (long long)a->time_ms, (long long)a->count,
                      a->instance_status, (long long)a->recorded_ms);
            sb_str(b, "instance", a->instance_id);
            sb_str(b, "why", a->why);
            sb_printf(b, "\n");
        }
        duro_schedule_fire_list_free(f);
    }
    duro_schedule_list_free(l);
}

void pv_snapshot_take(duro_provider *p, pv_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    strbuf b = {NULL, 0, 0};
    duro_error e;

    /* Instances, latest executions, histories, per-instance counts. */
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    duro_instance_list *list = NULL;
    CHECK_PRC(p->list_instances(p, &all, &list, &e), DURO_OK, &e);
    for (size_t i = 0; i < list->count; i++) {
        const duro_instance_info *in = &list->items[i];
        sb_printf(&b, "instance");
        sb_str(&b, "id", in->instance_id);
        sb_str(&b, "name", in->name);
        sb_str(&b, "version", in->version);
        sb_printf(&b, " status=%d execution=%llu created=%lld updated=%lld",
                  in->status, (unsigned long long)in->execution_id,
                  (long long)in->created_ms, (long long)in->updated_ms);
        sb_str(&b, "output", in->output);
        sb_str(&b, "error", in->error);
        sb_printf(&b, " category=%d", in->category);
        sb_str(&b, "custom_status", in->custom_status);
        sb_str(&b, "parent", in->parent_instance);
        sb_printf(&b, " history_count=%llu",
                  (unsigned long long)in->history_count);
        sb_str(&b, "cancel_reason", in->cancel_reason);
        sb_str(&b, "cancelled_by", in->cancelled_by);
        sb_str(&b, "last_problem", in->last_problem);
        sb_printf(&b,
                  " cancel_requested=%lld finished=%lld problem_at=%lld "
                  "next_attempt=%lld deadline=%lld\n",
                  (long long)in->cancel_requested_ms,
                  (long long)in->finished_ms, (long long)in->last_problem_ms,
                  (long long)in->next_attempt_ms, (long long)in->deadline_ms);
        uint64_t ex = 0;
        int rc = p->latest_execution_id(p, in->instance_id, &ex, &e);
        sb_printf(&b, "  latest rc=%s execution=%llu\n", duro_errname(rc),
                  (unsigned long long)(rc == DURO_OK ? ex : 0));
        for (uint64_t x = 1; x <= in->execution_id + 1; x++) {
            duro_history *h = NULL;
            rc = p->read_history(p, in->instance_id, x, &h, &e);
            sb_printf(&b, "  history execution=%llu rc=%s",
                      (unsigned long long)x, duro_errname(rc));
            if (rc == DURO_OK && h != NULL) {
                sb_printf(&b, " reported_execution=%llu count=%zu\n",
                          (unsigned long long)h->execution_id, h->count);
                for (size_t k = 0; k < h->count; k++)
                    dump_event(&b, &h->events[k]);
            } else {
                sb_printf(&b, "\n");
            }
            duro_history_free(h);
        }
        dump_counts(&b, p, in->instance_id);
    }
    sb_printf(&b, "total orchestrator=%llu worker=%llu\n",
              (unsigned long long)count(p, ORCH, NULL),
              (unsigned long long)count(p, WORKER, NULL));
    dump_schedules(&b, p);

    /* Visible orchestrator messages: fetch every instance, then abandon. */
    snap_entry *entries = calloc(SNAPSHOT_MAX_ITEMS, sizeof(*entries));
    duro_orch_item **items = calloc(SNAPSHOT_MAX_ITEMS, sizeof(*items));
    duro_worker_item **rows = calloc(SNAPSHOT_MAX_ITEMS, sizeof(*rows));
    CHECK(entries != NULL && items != NULL && rows != NULL);
    size_t n_items = 0, n_rows = 0, n_entries = 0;
    for (;;) {
        duro_orch_item *it = NULL;
        CHECK_PRC(p->fetch_orchestration_item(p, LOCK_LONG, NULL, &it, &e),
                  DURO_OK, &e);
        if (it == NULL)
            break;
        for (size_t k = 0; k < n_items; k++)
            CHECK_MSG(strcmp(items[k]->instance_id, it->instance_id) != 0,
                      "snapshot: instance '%s' fetched twice while locked",
                      it->instance_id);
        CHECK_MSG(n_items < SNAPSHOT_MAX_ITEMS, "snapshot: too many items");
        items[n_items++] = it;
        snap_entry *en = &entries[n_entries++];
        en->attempt = it->attempt;
        strbuf *t = &en->text;
        sb_printf(t, "orchestrator item");
        sb_str(t, "instance", it->instance_id);
        sb_printf(t, " status=%d execution=%llu", it->status,
                  (unsigned long long)it->execution_id);
        sb_str(t, "name", it->name);
        sb_str(t, "version", it->version);
        sb_str(t, "parent", it->parent_instance);
        sb_printf(t, " parent_execution=%llu parent_event=%llu",
                  (unsigned long long)it->parent_execution,
                  (unsigned long long)it->parent_event_id);
        sb_str(t, "custom_status", it->custom_status);
        sb_str(t, "cancel_reason", it->cancel_reason);
        sb_str(t, "cancelled_by", it->cancelled_by);
        sb_str(t, "last_problem", it->last_problem);
        sb_printf(t, " cancel_requested=%lld",
                  (long long)it->cancel_requested_ms);
        sb_printf(t,
                  " history_total=%llu history_offset=%llu "
                  "history_count=%zu messages=%zu\n",
                  (unsigned long long)it->history_total,
                  (unsigned long long)it->history_offset, it->history_count,
                  it->message_count);
        for (size_t k = 0; k < it->message_count; k++)
            dump_work(t, "  ", &it->messages[k]);
        dump_counts(t, p, it->instance_id);
    }
    for (size_t k = 0; k < n_items; k++) {
        CHECK_PRC(p->abandon_orchestration_item(p, items[k]->lock_token, 0, &e),
                  DURO_OK, &e);
        duro_orch_item_free(items[k]);
    }

    /* Visible worker rows: fetch every one, then abandon. */
    for (;;) {
        duro_worker_item *w = NULL;
        CHECK_PRC(p->fetch_work_item(p, LOCK_LONG, &w, &e), DURO_OK, &e);
        if (w == NULL)
            break;
        CHECK_MSG(n_entries < SNAPSHOT_MAX_ITEMS, "snapshot: too many items");
        rows[n_rows++] = w;
        snap_entry *en = &entries[n_entries++];
        en->attempt = w->attempt;
        dump_work(&en->text, "worker row ", &w->item);
    }
    for (size_t k = 0; k < n_rows; k++) {
        CHECK_PRC(p->abandon_work_item(p, rows[k]->lock_token, 0, &e), DURO_OK,
                  &e);
        duro_worker_item_free(rows[k]);
    }

    qsort(entries, n_entries, sizeof(*entries), compare_entries);
    s->attempts = calloc(n_entries + 1, sizeof(*s->attempts));
    CHECK(s->attempts != NULL);
    for (size_t k = 0; k < n_entries; k++) {
        sb_printf(&b, "%s", entries[k].text.s);
        s->attempts[k] = entries[k].attempt;
        free(entries[k].text.s);
    }
    s->attempt_count = s->attempt_cap = n_entries;
    free(entries);
    free(items);
    free(rows);
    duro_instance_list_free(list);
    s->text = b.s ? b.s : xstrdup("");
    s->len = b.len;
    s->cap = b.cap;
}

void pv_snapshot_free(pv_snapshot *s)
{
    free(s->text);
    free(s->attempts);
    memset(s, 0, sizeof(*s));
}

/* Copies line `index` (0-based) of text into out. */
static void line_of(const char *text, size_t index, char *out, size_t size)
{
    const char *l = text;
    for (size_t i = 0; i < index && l != NULL; i++) {
        l = strchr(l, '\n');
        if (l != NULL)
            l++;
    }
    if (l == NULL || *l == '\0') {
        snprintf(out, size, "(end)");
        return;
    }
    size_t n = strcspn(l, "\n");
    if (n >= size)
        n = size - 1;
    memcpy(out, l, n);
    out[n] = '\0';
}

void pv_expect_unchanged_at(duro_provider *p, pv_snapshot *s, const char *file,
                            int line)
{
    pv_snapshot now;
    pv_snapshot_take(p, &now);
    pv_snapshot before = *s;
    *s = now;
    if (strcmp(before.text, now.text) != 0) {
        size_t ln = 0;
        for (size_t i = 0; before.text[i] && before.text[i] == now.text[i]; i++)
            if (before.text[i] == '\n')
                ln++;
        char a[600], b[600];
        line_of(before.text, ln, a, sizeof(a));
        line_of(now.text, ln, b, sizeof(b));
        pv_snapshot_free(&before);
        test_fail(file, line,
                  "store changed (first difference, line %zu):\n"
                  "    before: %s\n    after:  %s",
                  ln + 1, a, b);
        return;
    }
    if (now.attempt_count != before.attempt_count) {
        size_t was = before.attempt_count, is = now.attempt_count;
        pv_snapshot_free(&before);
        test_fail(file, line, "store changed: %zu queued items, was %zu", is,
                  was);
        return;
    }
    for (size_t k = 0; k < now.attempt_count; k++) {
        if (now.attempts[k] != before.attempts[k] + 1) {
            unsigned was = before.attempts[k], is = now.attempts[k];
            pv_snapshot_free(&before);
            test_fail(file, line,
                      "fetch count of queued item %zu changed: %u, expected "
                      "%u (only the snapshot's own fetch may raise it)",
                      k + 1, is, was + 1);
            return;
        }
    }
    pv_snapshot_free(&before);
}

/* ========================================================================
 * Activity cancellation by row deletion (lock stealing). */

PV_TEST(ack_orchestration_item_deletes_cancelled_activities)
{
    duro_provider *p = pv_open();
    begin(p, "x", 6); /* activities 2..7 */
    begin(p, "y", 2); /* the same execution and activity ids, elsewhere */
    duro_activity_ref refs[] = {
        ref("x", 1, 2),  ref("x", 1, 4),
        ref("x", 1, 6),  ref("x", 2, 3), /* another execution: matches no row */
        ref("x", 1, 99),                 /* never scheduled: not an error */
    };
    turn_cancel(p, "x", refs, 5);
    CHECK_EQ(count(p, WORKER, "x"), 3);
    CHECK_EQ(count(p, WORKER, "y"), 2);
    CHECK_DRAIN(p, "x:0003,x:0005,x:0007,y:0002,y:0003");
    CHECK_EQ(count(p, WORKER, NULL), 0);
}

PV_TEST(cancellation_of_locked_activity_causes_renewal_failure)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_EQ(w->item.source_id, 2);
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    duro_activity_ref r = ref("x", 1, 2);
    turn_cancel(p, "x", &r, 1);
    /* The row is gone, which renew tells apart from a lock taken by
     * another fetch: NOT_FOUND, not retryable. */
    CHECK_PFAIL(p->renew_work_item_lock(p, w->lock_token, LOCK_LONG, &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    duro_worker_item_free(w);
}

PV_TEST(cancellation_of_unlocked_activity_removes_from_queue)
{
    duro_provider *p = pv_open();
    begin(p, "x", 3); /* 2, 3, 4 */
    duro_activity_ref r = ref("x", 1, 3);
    turn_cancel(p, "x", &r, 1);
    CHECK_EQ(count(p, WORKER, "x"), 2);
    CHECK_DRAIN(p, "x:0002,x:0004");
    expect_no_work(p);
}

PV_TEST(ack_work_item_fails_on_cancelled_row)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_activity_ref r = ref("x", 1, 2);
    turn_cancel(p, "x", &r, 1);
    CHECK_EQ(history_len(p, "x", 1), 3);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = 2;
    done.payload = "\"result\"";
    CHECK_PFAIL(p->ack_work_item(p, w->lock_token, &done, &e), DURO_LOCK_LOST,
                0, &e);
    CHECK_PFAIL(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_LOCK_LOST, 0,
                &e);
    /* Nothing reached the orchestrator queue. */
    CHECK_EQ(count(p, ORCH, "x"), 0);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    expect_no_orch(p);
    CHECK_EQ(history_len(p, "x", 1), 3);
    duro_worker_item_free(w);
}

PV_TEST(ack_work_item_succeeds_if_row_exists)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_EQ(w->attempt, 1);
    CHECK_STR(w->item.instance_id, "x");
    CHECK_EQ(w->item.execution_id, 1);
    CHECK_EQ(w->item.source_id, 2);
    CHECK_STR(w->item.name, "act");
    CHECK_STR(w->item.payload, "act-input");
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = 2;
    done.payload = "\"result\"";
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &done, &e), DURO_OK, &e);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    /* The row is gone: the same token cannot ack twice. */
    CHECK_PFAIL(p->ack_work_item(p, w->lock_token, &done, &e), DURO_LOCK_LOST,
                0, &e);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    duro_orch_item *item = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_ACTIVITY_COMPLETED);
    CHECK_EQ(item->messages[0].execution_id, 1);
    CHECK_EQ(item->messages[0].source_id, 2);
    CHECK_STR(item->messages[0].payload, "\"result\"");
    duro_orch_item_free(item);
    duro_worker_item_free(w);
}

PV_TEST(mass_cancellation_deletes_all_activities)
{
    duro_provider *p = pv_open();
    begin(p, "x", 50);
    CHECK_EQ(count(p, WORKER, "x"), 50);
    duro_activity_ref refs[50];
    for (int i = 0; i < 50; i++)
        refs[i] = ref("x", 1, (uint64_t)i + 2);
    turn_cancel(p, "x", refs, 50);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    expect_no_work(p);
}

PV_TEST(ack_work_item_none_deletes_without_enqueue)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_PRC(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_OK, &e);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    expect_no_work(p);
    expect_no_orch(p);
    CHECK_EQ(history_len(p, "x", 1), 2);
    duro_worker_item_free(w);
}

PV_TEST(activity_scheduled_and_cancelled_in_same_ack_never_fetchable)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    duro_orch_item *item = poke(p, "x");
    duro_event d[3] = {event(2, DURO_EVENT_EVENT_RAISED),
                       event(3, DURO_EVENT_ACTIVITY_SCHEDULED),
                       event(4, DURO_EVENT_ACTIVITY_SCHEDULED)};
    d[0].name = "poke";
    d[1].name = d[2].name = "act";
    duro_work_item workers[2] = {activity("x", 1, 3), activity("x", 1, 4)};
    duro_activity_ref r = ref("x", 1, 3);
    duro_orch_ack a = ack_of(1, d, 3, NULL);
    a.worker_items = workers;
    a.worker_item_count = 2;
    a.cancelled_activities = &r;
    a.cancelled_activity_count = 1;
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    CHECK_DRAIN(p, "x:0004");
}

PV_TEST(thousand_activities_cancelled_in_one_ack)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1000);
    begin(p, "y", 3);
    CHECK_EQ(count(p, WORKER, "x"), 1000);
    duro_activity_ref *refs = calloc(1000, sizeof(*refs));
    CHECK(refs != NULL);
    for (int i = 0; i < 1000; i++)
        refs[i] = ref("x", 1, (uint64_t)i + 2);
    turn_cancel(p, "x", refs, 1000);
    free(refs);
    CHECK_EQ(count(p, WORKER, "x"), 0);
    CHECK_EQ(count(p, WORKER, "y"), 3);
    CHECK_DRAIN(p, "y:0002,y:0003,y:0004");
}

/* ---- version 2: ack and fetch in one transaction -------------------------
 * The suite validates DURO_PROVIDER_VERSION: a provider must implement
 * these (callers fall back when it does not, but the suite does not). */

static void require_v2(duro_provider *p)
{
    CHECK_MSG(p->version >= 2 && p->ack_and_fetch_orchestration_item != NULL &&
                  p->ack_and_fetch_work_item != NULL,
              "provider '%s' version %d lacks the version-2 methods", p->name,
              p->version);
}

PV_TEST(ack_and_fetch_work_item_acks_and_locks_the_next)
{
    duro_provider *p = pv_open();
    require_v2(p);
    begin(p, "x", 2);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = w->item.source_id;
    done.payload = "\"result\"";
    duro_worker_item *next = NULL;
    CHECK_PRC(p->ack_and_fetch_work_item(p, w->lock_token, &done, LOCK_LONG,
                                         &next, &e),
              DURO_OK, &e);
    CHECK(next != NULL);
    CHECK(next->item.source_id != w->item.source_id);
    CHECK_EQ(next->attempt, 1);
    /* the completion is queued, the acked row gone, the next row locked */
    CHECK_EQ(count(p, ORCH, "x"), 1);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    expect_no_work(p);
    duro_work_item done2 = done;
    done2.source_id = next->item.source_id;
    duro_worker_item *none = (duro_worker_item *)&e; /* must become NULL */
    CHECK_PRC(p->ack_and_fetch_work_item(p, next->lock_token, &done2, LOCK_LONG,
                                         &none, &e),
              DURO_OK, &e);
    CHECK(none == NULL);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    CHECK_EQ(count(p, ORCH, "x"), 2);
    duro_worker_item_free(next);
    duro_worker_item_free(w);
}

PV_TEST(ack_and_fetch_work_item_on_a_cancelled_row_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v2(p);
    begin(p, "x", 2);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_activity_ref r = ref("x", 1, w->item.source_id);
    turn_cancel(p, "x", &r, 1);
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = w->item.source_id;
    done.payload = "\"late\"";
    duro_worker_item *next = (duro_worker_item *)&e;
    CHECK_PFAIL(p->ack_and_fetch_work_item(p, w->lock_token, &done, LOCK_LONG,
                                           &next, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK(next == NULL);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    CHECK_EQ(count(p, ORCH, "x"), 0);
    /* the other activity was not taken by the failed call */
    duro_worker_item *other = fetch_work(p, LOCK_LONG);
    CHECK(other != NULL);
    duro_worker_item_free(other);
    duro_worker_item_free(w);
}

PV_TEST(ack_and_fetch_orchestration_item_acks_and_locks_the_next)
{
    duro_provider *p = pv_open();
    require_v2(p);
    start(p, "x");
    start(p, "y");
    duro_error e;
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    d.name = "orch";
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.name = "orch";
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    duro_orch_item *next = NULL;
    CHECK_PRC(p->ack_and_fetch_orchestration_item(p, a->lock_token, &ak,
                                                  LOCK_LONG, NULL, &next, &e),
              DURO_OK, &e);
    CHECK(next != NULL);
    CHECK_STR(next->instance_id, "y");
    CHECK_EQ(next->status, DURO_STATUS_PENDING);
    CHECK_EQ(history_len(p, "x", 1), 1);
    CHECK_EQ(count(p, ORCH, "x"), 0);
    expect_no_orch(p); /* y is locked by the combined call */
    /* messages that arrive for an acked instance make it the next one */
    raise_event(p, "x", "\"again\"", 0);
    duro_orch_ack empty = ack_of(0, NULL, 0, NULL);
    duro_orch_item *third = NULL;
    CHECK_PRC(p->ack_and_fetch_orchestration_item(p, next->lock_token, &empty,
                                                  LOCK_LONG, NULL, &third, &e),
              DURO_OK, &e);
    CHECK(third != NULL);
    CHECK_STR(third->instance_id, "x");
    CHECK_EQ(third->message_count, 1);
    CHECK_EQ(third->history_total, 1);
    duro_orch_item_free(third);
    duro_orch_item_free(next);
    duro_orch_item_free(a);
}

PV_TEST(ack_and_fetch_orchestration_item_with_stale_token_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v2(p);
    begin(p, "x", 1);
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_SHORT);
    duro_orch_item *b = NULL;
    WAIT_UNTIL(try_fetch_orch(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_STR(b->instance_id, "x");
    start(p, "y"); /* something the failed call must not take */
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_event d = event(3, DURO_EVENT_EVENT_RAISED);
    d.name = "poke";
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    duro_orch_item *next = (duro_orch_item *)&e;
    CHECK_PFAIL(p->ack_and_fetch_orchestration_item(p, a->lock_token, &ak,
                                                    LOCK_LONG, NULL, &next, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK(next == NULL);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* y was not taken by the failed call */
    duro_orch_item *y = fetch_orch_expect(p, "y", LOCK_LONG);
    duro_orch_item_free(y);
    duro_orch_item_free(b);
    duro_orch_item_free(a);
}

/* ---- version 8: event ids --------------------------------------------------
 * An EXTERNAL_EVENT with an event_id is enqueued once per (instance, id):
 * a raise retried after a failure that may have committed is delivered
 * once. */

static void raise_with_id(duro_provider *p, const char *id,
                          const char *event_id, const char *payload)
{
    duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, id);
    w.name = "poke";
    w.payload = payload;
    w.event_id = event_id;
    enqueue(p, &w, 0);
}

PV_TEST(an_event_id_is_enqueued_once_per_instance)
{
    duro_provider *p = pv_open();
    CHECK_MSG(p->version >= 8, "provider version %d", p->version);
    begin(p, "a", 0);
    begin(p, "b", 0);
    raise_with_id(p, "a", "k1", "\"1\"");
    raise_with_id(p, "a", "k1", "\"repeat\""); /* DURO_OK, nothing */
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "a"), 1);
    raise_with_id(p, "a", "k2", "\"2\"");
    raise_with_id(p, "b", "k1", "\"b\""); /* ids are per instance */
    raise_event(p, "a", "\"free\"", 0);   /* no id: every raise */
    raise_event(p, "a", "\"free\"", 0);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "a"), 4);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "b"), 1);

    /* delivered and consumed: the id is still known */
    duro_orch_item *item = fetch_orch_for(p, "a", LOCK_LONG);
    CHECK_EQ(item->message_count, 4);
    if (item->message_count == 4) {
        CHECK_STR(item->messages[0].payload, "\"1\"");
        CHECK_STR(item->messages[1].payload, "\"2\"");
        CHECK(item->messages[0].event_id == NULL);
    }
    duro_event *d = events_for(item);
    duro_orch_ack a = ack_of(1, d, item->message_count, NULL);
    ack(p, item->lock_token, &a);
    free(d);
    duro_orch_item_free(item);
    raise_with_id(p, "a", "k1", "\"late\"");
    raise_with_id(p, "a", "k2", "\"late\"");
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "a"), 0);

    /* deleting the instance forgets its ids: one created again under the
     * same id takes them afresh */
    duro_error e;
    size_t deleted = 0;
    CHECK_PRC(p->delete_instance(p, "a", 1, &deleted, &e), DURO_OK, &e);
    begin(p, "a", 0);
    raise_with_id(p, "a", "k1", "\"again\"");
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "a"), 1);

    /* an id is checked like a name: too long is refused, nothing changed */
    duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, "a");
    w.name = "poke";
    char *longid = repeat('x', 1025);
    w.event_id = longid;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    free(longid);
    CHECK_EQ(count(p, DURO_QUEUE_ORCHESTRATOR, "a"), 1);
}

/* ---- version 7: many turns in one transaction ----------------------------
 * The suite validates DURO_PROVIDER_VERSION, so it requires the method. */

static void require_v7(duro_provider *p)
{
    CHECK_MSG(p->version >= 7 && p->ack_and_fetch_orchestration_items != NULL,
              "provider '%s' version %d lacks the version-7 method", p->name,
              p->version);
}

/* The first turn of a fetched Pending instance: OrchestrationStarted,
 * status Running, with `workers` (0 or 1) activity scheduled as event 2. */
typedef struct first_turn {
    duro_event d[2];
    duro_instance_meta m;
    duro_work_item w;
    duro_orch_ack a;
} first_turn;

static void first_turn_of(first_turn *t, const char *id, int workers)
{
    t->d[0] = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    t->d[0].name = "orch";
    t->d[1] = event(2, DURO_EVENT_ACTIVITY_SCHEDULED);
    t->d[1].name = "act";
    t->m = meta(DURO_STATUS_RUNNING);
    t->m.name = "orch";
    t->w = activity(id, 1, 2);
    t->a = ack_of(1, t->d, workers ? 2 : 1, &t->m);
    t->a.worker_items = &t->w;
    t->a.worker_item_count = workers ? 1 : 0;
}

static void free_items(duro_orch_item **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        duro_orch_item_free(items[i]);
}

PV_TEST(ack_and_fetch_orchestration_items_acks_and_fetches_many)
{
    duro_provider *p = pv_open();
    require_v7(p);
    start(p, "x");
    start(p, "y");
    start(p, "z");
    duro_error e;
    duro_orch_item *got[4] = {NULL};
    size_t n = 99;
    /* fetch only: the two oldest instances, each with its own messages */
    CHECK_PRC(p->ack_and_fetch_orchestration_items(p, 0, NULL, NULL, LOCK_LONG,
                                                   NULL, 2, got, &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 2);
    CHECK_STR(got[0]->instance_id, "x");
    CHECK_STR(got[1]->instance_id, "y");
    for (size_t i = 0; i < 2; i++) {
        CHECK_EQ(got[i]->status, DURO_STATUS_PENDING);
        CHECK_EQ(got[i]->message_count, 1);
        CHECK_EQ(got[i]->messages[0].kind, DURO_WORK_START);
        CHECK_STR(got[i]->messages[0].instance_id, got[i]->instance_id);
        CHECK(strcmp(got[i]->lock_token, got[1 - i]->lock_token) != 0);
    }
    duro_orch_item *z = fetch_orch_expect(p, "z", LOCK_LONG);
    /* both turns in one call; nothing else is visible (z is locked) */
    first_turn tx, ty;
    first_turn_of(&tx, "x", 0);
    first_turn_of(&ty, "y", 1);
    const char *tokens[2] = {got[0]->lock_token, got[1]->lock_token};
    duro_orch_ack acks[2] = {tx.a, ty.a};
    duro_orch_item *next[4] = {NULL};
    size_t m = 99;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 2, tokens, acks, LOCK_LONG, NULL, 4, next, &m, &e),
              DURO_OK, &e);
    CHECK_EQ(m, 0);
    CHECK_EQ(history_len(p, "x", 1), 1);
    CHECK_EQ(history_len(p, "y", 1), 2);
    CHECK_EQ(count(p, ORCH, "x"), 0);
    CHECK_EQ(count(p, ORCH, "y"), 0);
    CHECK_EQ(count(p, WORKER, "x"), 0);
    CHECK_EQ(count(p, WORKER, "y"), 1);
    expect_no_orch(p); /* the acks released x and y, with nothing queued */
    /* messages that arrive for an acked instance make it a next one; an
     * ack alone (max_next 0) fetches nothing */
    raise_event(p, "x", "\"again\"", 0);
    duro_orch_ack empty = ack_of(0, NULL, 0, NULL);
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 1, (const char *const *)&z->lock_token, &empty, LOCK_LONG,
                  NULL, 4, next, &m, &e),
              DURO_OK, &e);
    CHECK_EQ(m, 1);
    CHECK_STR(next[0]->instance_id, "x");
    CHECK_EQ(next[0]->message_count, 1);
    CHECK_EQ(next[0]->history_total, 1);
    CHECK_EQ(count(p, ORCH, "z"), 0);
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 1, (const char *const *)&next[0]->lock_token, &empty,
                  LOCK_LONG, NULL, 0, NULL, &m, &e),
              DURO_OK, &e);
    CHECK_EQ(m, 0);
    CHECK_EQ(count(p, ORCH, "x"), 0);
    free_items(next, 1);
    duro_orch_item_free(z);
    free_items(got, 2);
}

/* The cache callback of a batch fetch: x's engine holds 2 events, the
 * others none. */
static uint64_t x_holds_two(void *user, const char *instance_id,
                            uint64_t execution_id)
{
    (void)user;
    (void)execution_id;
    return strcmp(instance_id, "x") == 0 ? 2 : 0;
}

/* Each item of a batch fetch carries the history its caller's cache lacks:
 * all of it for an instance the cache does not hold, the tail after what
 * it holds otherwise, in event order. */
PV_TEST(ack_and_fetch_orchestration_items_returns_each_history_tail)
{
    duro_provider *p = pv_open();
    require_v7(p);
    begin(p, "x", 3); /* 4 events */
    begin(p, "y", 2); /* 3 events */
    begin(p, "z", 0); /* 1 event */
    raise_event(p, "x", "\"e\"", 0);
    raise_event(p, "y", "\"e\"", 0);
    raise_event(p, "z", "\"e\"", 0);
    duro_history_cache hc = {.cached_events = x_holds_two, .user = NULL};
    duro_orch_item *got[4] = {NULL};
    size_t n = 0;
    duro_error e;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(p, 0, NULL, NULL, LOCK_LONG,
                                                   &hc, 4, got, &n, &e),
              DURO_OK, &e);
    CHECK_EQ(n, 3);
    for (size_t i = 0; i < n; i++) {
        const duro_orch_item *it = got[i];
        int is_x = strcmp(it->instance_id, "x") == 0;
        uint64_t total = is_x ? 4 : strcmp(it->instance_id, "y") == 0 ? 3 : 1;
        CHECK_EQ(it->history_total, total);
        CHECK_EQ(it->history_offset, is_x ? 2 : 0);
        CHECK_EQ(it->history_count, total - it->history_offset);
        for (size_t k = 0; k < it->history_count; k++)
            CHECK_EQ(it->history[k].event_id, it->history_offset + 1 + k);
        CHECK_EQ(it->message_count, 1);
    }
    free_items(got, n);
}

/* A batch with one turn over the store's history cap fails as a whole with
 * DURO_HISTORY_LIMIT and writes nothing; the other turn then commits
 * alone. */
PV_TEST(ack_and_fetch_orchestration_items_over_the_history_cap_changes_nothing)
{
    duro_provider *p = pv_open_with_max_history(3);
    require_v7(p);
    begin(p, "x", 1); /* 2 events */
    start(p, "y");
    duro_orch_item *a = poke(p, "x");
    duro_orch_item *y = fetch_orch_expect(p, "y", LOCK_LONG);
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    first_turn ty;
    first_turn_of(&ty, "y", 1);
    duro_event d[2] = {event(3, DURO_EVENT_EVENT_RAISED),
                       event(4, DURO_EVENT_ACTIVITY_SCHEDULED)};
    d[0].name = "poke";
    duro_orch_ack ax = ack_of(1, d, 2, NULL); /* 4 events: over 3 */
    const char *tokens[2] = {y->lock_token, a->lock_token};
    duro_orch_ack acks[2] = {ty.a, ax};
    duro_orch_item *next[2] = {NULL};
    size_t n = 99;
    duro_error e;
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 2, tokens, acks, LOCK_LONG, NULL, 2, next, &n, &e),
                DURO_HISTORY_LIMIT, 0, &e);
    CHECK_EQ(n, 0);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    ack(p, y->lock_token, &ty.a);
    CHECK_EQ(history_len(p, "y", 1), 2);
    CHECK_EQ(history_len(p, "x", 1), 2);
    duro_orch_item_free(y);
    duro_orch_item_free(a);
}

/* One call with turns of every shape leaves what one ack at a time would:
 * x records an event, cancels a running activity, schedules one and
 * cancels it in the same turn (never fetchable), and sends y an event; y
 * (Pending) starts with an activity; z completes, dropping a delayed
 * message nothing will read. */
PV_TEST(ack_and_fetch_orchestration_items_mixed_turns_as_one_by_one)
{
    duro_provider *p = pv_open();
    require_v7(p);
    begin(p, "x", 2);                       /* events 1..3, activities 2, 3 */
    begin(p, "z", 0);                       /* event 1 */
    raise_event(p, "z", "\"late\"", 60000); /* dead once z completes */
    start(p, "y");
    duro_orch_item *ix = poke(p, "x");
    duro_orch_item *iz = poke(p, "z");
    duro_orch_item *iy = fetch_orch_for(p, "y", LOCK_LONG);
    duro_event dx[2] = {event(4, DURO_EVENT_EVENT_RAISED),
                        event(5, DURO_EVENT_ACTIVITY_SCHEDULED)};
    dx[0].name = "poke";
    dx[1].name = "act";
    duro_work_item wx = activity("x", 1, 5);
    duro_activity_ref rx[2] = {ref("x", 1, 2), ref("x", 1, 5)};
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_EXTERNAL_EVENT, "y");
    out.item.name = "from-x";
    out.item.payload = "\"hi\"";
    duro_orch_ack ax = ack_of(1, dx, 2, NULL);
    ax.worker_items = &wx;
    ax.worker_item_count = 1;
    ax.cancelled_activities = rx;
    ax.cancelled_activity_count = 2;
    ax.orchestrator_items = &out;
    ax.orchestrator_item_count = 1;
    first_turn ty;
    first_turn_of(&ty, "y", 1);
    duro_event dz[2] = {event(2, DURO_EVENT_EVENT_RAISED),
                        event(3, DURO_EVENT_ORCHESTRATION_COMPLETED)};
    dz[0].name = "poke";
    dz[1].payload = "\"z-out\"";
    duro_instance_meta mz = meta(DURO_STATUS_COMPLETED);
    mz.output = "\"z-out\"";
    duro_orch_ack az = ack_of(1, dz, 2, &mz);
    const char *tokens[3] = {ix->lock_token, iy->lock_token, iz->lock_token};
    duro_orch_ack acks[3] = {ax, ty.a, az};
    duro_orch_item *next[4] = {NULL};
    size_t n = 99;
    duro_error e;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 3, tokens, acks, LOCK_LONG, NULL, 4, next, &n, &e),
              DURO_OK, &e);
    /* y has x's event queued: it is the one next item */
    CHECK_EQ(n, 1);
    CHECK_STR(next[0]->instance_id, "y");
    CHECK_EQ(next[0]->message_count, 1);
    CHECK_STR(next[0]->messages[0].name, "from-x");
    CHECK_STR(next[0]->messages[0].payload, "\"hi\"");
    CHECK_EQ(next[0]->history_total, 2);
    CHECK_EQ(next[0]->status, DURO_STATUS_RUNNING);
    CHECK_EQ(history_len(p, "x", 1), 5);
    CHECK_EQ(history_len(p, "y", 1), 2);
    CHECK_EQ(history_len(p, "z", 1), 3);
    duro_instance_list *l = get(p, "z");
    CHECK_EQ(l->items[0].status, DURO_STATUS_COMPLETED);
    CHECK_STR(l->items[0].output, "\"z-out\"");
    duro_instance_list_free(l);
    l = get(p, "x");
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "z"), 0); /* the delayed message went */
    CHECK_EQ(count(p, ORCH, "x"), 0);
    /* x keeps activity 3 (2 cancelled, 5 scheduled and cancelled); y has
     * its first */
    CHECK_DRAIN(p, "x:0003,y:0002");
    free_items(next, n);
    duro_orch_item_free(iy);
    duro_orch_item_free(iz);
    duro_orch_item_free(ix);
}

/* A message a turn of a batch sends reads its target as the turns before
 * it in the batch left it: x's cancel requests reach z after z's turn
 * completed it (nothing recorded) and w before w's turn completes it (the
 * request is recorded and stays), as one-by-one acks in that order. */
PV_TEST(ack_and_fetch_orchestration_items_messages_see_earlier_turns)
{
    duro_provider *p = pv_open();
    require_v7(p);
    begin(p, "x", 0);
    begin(p, "z", 0);
    begin(p, "w", 0);
    duro_orch_item *iz = poke(p, "z");
    duro_orch_item *ix = poke(p, "x");
    duro_orch_item *iw = poke(p, "w");
    duro_event d[3][2];
    duro_orch_ack acks[3];
    duro_instance_meta done = meta(DURO_STATUS_COMPLETED);
    for (int i = 0; i < 3; i++) {
        d[i][0] = event(2, DURO_EVENT_EVENT_RAISED);
        d[i][0].name = "poke";
        d[i][1] = event(3, DURO_EVENT_ORCHESTRATION_COMPLETED);
        acks[i] = ack_of(1, d[i], i == 1 ? 1 : 2, i == 1 ? NULL : &done);
    }
    duro_outbound out[2];
    memset(out, 0, sizeof(out));
    out[0].item = work(DURO_WORK_CANCEL_INSTANCE, "z");
    out[1].item = work(DURO_WORK_CANCEL_INSTANCE, "w");
    for (int i = 0; i < 2; i++) {
        out[i].item.reason = "from x";
        out[i].item.requested_by = "x";
    }
    acks[1].orchestrator_items = out;
    acks[1].orchestrator_item_count = 2;
    const char *tokens[3] = {iz->lock_token, ix->lock_token, iw->lock_token};
    duro_orch_item *next[3] = {NULL};
    size_t n = 99;
    duro_error e;
    CHECK_PRC(p->ack_and_fetch_orchestration_items(
                  p, 3, tokens, acks, LOCK_LONG, NULL, 3, next, &n, &e),
              DURO_OK, &e);
    duro_instance_list *l = get(p, "z");
    const duro_instance_info *in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_COMPLETED);
    CHECK_EQ(in->cancel_requested_ms, 0);
    CHECK(in->cancel_reason == NULL);
    duro_instance_list_free(l);
    l = get(p, "w");
    in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_COMPLETED);
    CHECK_INT(in->cancel_requested_ms, >, 0);
    CHECK_STR(in->cancel_reason, "from x");
    CHECK_STR(in->cancelled_by, "x");
    duro_instance_list_free(l);
    l = get(p, "x");
    in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    free_items(next, n);
    duro_orch_item_free(iw);
    duro_orch_item_free(ix);
    duro_orch_item_free(iz);
}

PV_TEST(ack_and_fetch_orchestration_items_refuses_bad_input)
{
    duro_provider *p = pv_open();
    require_v7(p);
    start(p, "x");
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_error e;
    duro_orch_item *got[2] = {NULL};
    size_t n = 0;
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 0, NULL, NULL, LOCK_LONG, NULL, 2, got, NULL, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 0, NULL, NULL, LOCK_LONG, NULL, 2, NULL, &n, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 0, NULL, NULL, LOCK_LONG, NULL, 1025, got, &n, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 1, NULL, NULL, LOCK_LONG, NULL, 2, got, &n, &e),
                DURO_INVALID, 0, &e);
    const char *tokens[1] = {""};
    duro_orch_ack empty = ack_of(0, NULL, 0, NULL);
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 1, tokens, &empty, LOCK_LONG, NULL, 2, got, &n, &e),
                DURO_INVALID, 0, &e);
    CHECK_EQ(n, 0);
    CHECK(got[0] == NULL);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(ack_and_fetch_orchestration_items_with_one_stale_token_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v7(p);
    begin(p, "x", 1);
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_SHORT);
    duro_orch_item *b = NULL;
    WAIT_UNTIL(try_fetch_orch(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_STR(b->instance_id, "x");
    start(p, "y");
    duro_orch_item *y = fetch_orch_expect(p, "y", LOCK_LONG);
    start(p, "z"); /* something the failed calls must not take */
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    first_turn ty;
    first_turn_of(&ty, "y", 1);
    duro_event d = event(3, DURO_EVENT_EVENT_RAISED);
    d.name = "poke";
    duro_orch_ack ax = ack_of(1, &d, 1, NULL);
    /* y's ack is good, x's token lost its lock: neither commits */
    const char *tokens[2] = {y->lock_token, a->lock_token};
    duro_orch_ack acks[2] = {ty.a, ax};
    duro_orch_item *next[2] = {NULL};
    size_t n = 99;
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 2, tokens, acks, LOCK_LONG, NULL, 2, next, &n, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_EQ(n, 0);
    CHECK(next[0] == NULL);
    PV_EXPECT_UNCHANGED(p, &s);
    /* a token given twice: the first ack releases the lock the second
     * needs */
    const char *twice[2] = {y->lock_token, y->lock_token};
    duro_orch_ack same[2] = {ty.a, ty.a};
    CHECK_PFAIL(p->ack_and_fetch_orchestration_items(
                    p, 2, twice, same, LOCK_LONG, NULL, 2, next, &n, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_EQ(n, 0);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* y's lock survived both: its ack alone commits; z was not taken */
    ack(p, y->lock_token, &ty.a);
    CHECK_EQ(history_len(p, "y", 1), 2);
    CHECK_EQ(history_len(p, "x", 1), 2);
    duro_orch_item *zz = fetch_orch_expect(p, "z", LOCK_LONG);
    duro_orch_item_free(zz);
    duro_orch_item_free(y);
    duro_orch_item_free(b);
    duro_orch_item_free(a);
}

/* ---- version 3: why a work item is gone -----------------------------------
 * The suite validates DURO_PROVIDER_VERSION, so it requires the method. */

static void require_v3(duro_provider *p)
{
    CHECK_MSG(p->version >= 3 && p->read_activity_cancel_reason != NULL,
              "provider '%s' version %d lacks the version-3 method", p->name,
              p->version);
}

/* One turn of `id` that cancels `activity_id` of its execution 1 with
 * `reason`, as the runtime does: the ActivityCancelRequested event and the
 * deletion of the row in one ack. */
static void turn_cancel_with_reason(duro_provider *p, const char *id,
                                    uint64_t activity_id, const char *reason)
{
    duro_orch_item *item = poke(p, id);
    size_t n = item->message_count;
    duro_event *d = calloc(n + 1, sizeof(*d));
    CHECK(d != NULL);
    duro_event *raised = events_for(item);
    memcpy(d, raised, n * sizeof(*d));
    free(raised);
    d[n] = event(item->history_total + n + 1,
                 DURO_EVENT_ACTIVITY_CANCEL_REQUESTED);
    d[n].source_event_id = activity_id;
    d[n].reason = reason;
    duro_activity_ref r = ref(id, 1, activity_id);
    duro_orch_ack a = ack_of(1, d, n + 1, NULL);
    a.cancelled_activities = &r;
    a.cancelled_activity_count = 1;
    ack(p, item->lock_token, &a);
    free(d);
    duro_orch_item_free(item);
}

static int read_reason(duro_provider *p, const char *id, uint64_t execution,
                       uint64_t activity, char *reason, size_t size,
                       duro_error *e)
{
    return p->read_activity_cancel_reason(p, id, execution, activity, reason,
                                          size, e);
}

PV_TEST(cancel_reason_is_read_from_the_cancel_event)
{
    duro_provider *p = pv_open();
    require_v3(p);
    begin(p, "x", 2); /* activities 2 and 3 */
    begin(p, "y", 1); /* activity 2 */
    duro_error e;
    char reason[64];
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_STR(w->item.instance_id, "x");
    CHECK_EQ(w->item.source_id, 2);
    CHECK_PFAIL(read_reason(p, "x", 1, 2, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_STR(reason, "");
    turn_cancel_with_reason(p, "x", 2, DURO_REASON_SELECT_LOSER);
    /* The row is gone and, from the same commit, the reason is there. */
    CHECK_PFAIL(p->renew_work_item_lock(p, w->lock_token, LOCK_LONG, &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_PRC(read_reason(p, "x", 1, 2, reason, sizeof(reason), &e), DURO_OK,
              &e);
    CHECK_STR(reason, DURO_REASON_SELECT_LOSER);
    /* Only that activity of that execution of that instance. */
    CHECK_PFAIL(read_reason(p, "x", 1, 3, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_PFAIL(read_reason(p, "x", 2, 2, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_PFAIL(read_reason(p, "y", 1, 2, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_PFAIL(read_reason(p, "nobody", 1, 2, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    /* An event id that is not a cancellation (the ActivityScheduled). */
    CHECK_PFAIL(read_reason(p, "x", 1, 1, reason, sizeof(reason), &e),
                DURO_NOT_FOUND, 0, &e);
    /* Another activity, another reason. */
    turn_cancel_with_reason(p, "x", 3, DURO_REASON_INSTANCE_CANCELLED);
    CHECK_PRC(read_reason(p, "x", 1, 3, reason, sizeof(reason), &e), DURO_OK,
              &e);
    CHECK_STR(reason, DURO_REASON_INSTANCE_CANCELLED);
    CHECK_PRC(read_reason(p, "x", 1, 2, reason, sizeof(reason), &e), DURO_OK,
              &e);
    CHECK_STR(reason, DURO_REASON_SELECT_LOSER);
    /* Cut to the buffer, always terminated. */
    char small[7];
    CHECK_PRC(read_reason(p, "x", 1, 2, small, sizeof(small), &e), DURO_OK, &e);
    CHECK_STR(small, "select");
    char one[1] = {'z'};
    CHECK_PRC(read_reason(p, "x", 1, 2, one, sizeof(one), &e), DURO_OK, &e);
    CHECK_EQ(one[0], '\0');
    /* Bad input. */
    CHECK_PFAIL(read_reason(p, NULL, 1, 2, reason, sizeof(reason), &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(read_reason(p, "", 1, 2, reason, sizeof(reason), &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(read_reason(p, "x", 0, 2, reason, sizeof(reason), &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(read_reason(p, "x", 1, 2, NULL, 8, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(read_reason(p, "x", 1, 2, reason, 0, &e), DURO_INVALID, 0, &e);
    duro_worker_item_free(w);
}

/* A cancelled row's id may go to a new row (SQLite reuses the highest
 * rowid): the old token's renewal still fails, not retryably, without
 * touching the new row, and the reason is still found. */
PV_TEST(renewal_after_a_cancellation_fails_whatever_took_the_rows_place)
{
    duro_provider *p = pv_open();
    require_v3(p);
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    turn_cancel_with_reason(p, "x", 2, DURO_REASON_INSTANCE_CANCELLED);
    begin(p, "y", 1); /* a new row, perhaps with the cancelled row's id */
    int rc = p->renew_work_item_lock(p, w->lock_token, LOCK_LONG, &e);
    CHECK_MSG(rc == DURO_NOT_FOUND || rc == DURO_LOCK_LOST,
              "renewing a cancelled row returned %s (%s)", duro_errname(rc),
              e.message);
    CHECK_EQ(e.retryable, 0);
    char reason[64];
    CHECK_PRC(read_reason(p, "x", 1, 2, reason, sizeof(reason), &e), DURO_OK,
              &e);
    CHECK_STR(reason, DURO_REASON_INSTANCE_CANCELLED);
    /* The new row was not locked by the old token. */
    duro_worker_item *y = fetch_work(p, LOCK_LONG);
    CHECK(y != NULL);
    CHECK_STR(y->item.instance_id, "y");
    CHECK_EQ(y->attempt, 1);
    CHECK_PFAIL(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_LOCK_LOST, 0,
                &e);
    CHECK_EQ(count(p, WORKER, "y"), 1);
    duro_worker_item_free(y);
    duro_worker_item_free(w);
}

/* Another handle (as another process) sees the cancellation and its
 * reason as soon as the cancelling ack has committed. */
PV_TEST(cancel_reason_is_visible_to_another_handle)
{
    duro_provider *p = pv_open();
    require_v3(p);
    duro_provider *q = pv_open_same();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *w = fetch_work(q, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_PRC(q->renew_work_item_lock(q, w->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    turn_cancel_with_reason(p, "x", 2, DURO_REASON_INSTANCE_COMPLETED);
    CHECK_PFAIL(q->renew_work_item_lock(q, w->lock_token, LOCK_LONG, &e),
                DURO_NOT_FOUND, 0, &e);
    char reason[64];
    CHECK_PRC(read_reason(q, "x", 1, 2, reason, sizeof(reason), &e), DURO_OK,
              &e);
    CHECK_STR(reason, DURO_REASON_INSTANCE_COMPLETED);
    duro_worker_item_free(w);
    pv_close(q);
}

/* ========================================================================
 * Locks and races. */

#define RACE_THREADS 8
#define RACE_INSTANCES 24
#define RACE_EVENTS 8 /* per instance, after its START */
#define RACE_MESSAGES (RACE_INSTANCES * (RACE_EVENTS + 1))
#define RACE_DEADLINE_MS 60000

/* Everything threads share is atomic: the provider's own synchronization
 * may be invisible to ThreadSanitizer (file locks). */
typedef struct orch_race {
    duro_provider *handles[2]; /* racers use handles[id % 2] */
    _Atomic int go, stop, producer_done;
    _Atomic int holder[RACE_INSTANCES];         /* thread id + 1, or 0 */
    _Atomic uint64_t committed[RACE_INSTANCES]; /* events in history */
    _Atomic int next_event[RACE_INSTANCES];     /* next k expected */
    _Atomic int seen[RACE_INSTANCES][RACE_EVENTS + 1];
    _Atomic int acked, overlaps, abandons, retries, finished;
} orch_race;

typedef struct racer {
    orch_race *race;
    duro_provider *p; /* the handle this thread uses */
    int id;
    pthread_t thread;
} racer;

static void *orch_producer(void *arg)
{
    racer *me = arg;
    orch_race *r = me->race;
    duro_provider *p = me->p;
    duro_error e;
    char id[32], payload[32];
    while (!atomic_load(&r->go))
        sched_yield();
    for (int i = 0; i < RACE_INSTANCES && !atomic_load(&r->stop); i++) {
        snprintf(id, sizeof(id), "race-%02d", i);
        snprintf(payload, sizeof(payload), "%d:0", i);
        duro_work_item w = work(DURO_WORK_START, id);
        w.name = "orch";
        w.payload = payload;
        int rc;
        while ((rc = p->enqueue_for_orchestrator(p, &w, 0, &e)) != DURO_OK &&
               e.retryable)
            atomic_fetch_add(&r->retries, 1);
        CHECK_PRC(rc, DURO_OK, &e);
    }
    for (int k = 1; k <= RACE_EVENTS && !atomic_load(&r->stop); k++) {
        for (int i = 0; i < RACE_INSTANCES; i++) {
            snprintf(id, sizeof(id), "race-%02d", i);
            snprintf(payload, sizeof(payload), "%d:%d", i, k);
            duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, id);
            w.name = "poke";
            w.payload = payload;
            int rc;
            while ((rc = p->enqueue_for_orchestrator(p, &w, 0, &e)) !=
                       DURO_OK &&
                   e.retryable)
                atomic_fetch_add(&r->retries, 1);
            CHECK_PRC(rc, DURO_OK, &e);
        }
    }
    atomic_store(&r->producer_done, 1);
    return NULL;
}

/* Processes one fetched item: checks exclusivity, order and history, then
 * acks it (or, now and then, abandons it). Returns 0 on a fatal error. */
static int orch_racer_turn(racer *me, duro_orch_item *it, unsigned *seed)
{
    orch_race *r = me->race;
    duro_provider *p = me->p;
    duro_error e;
    int i = -1;
    if (sscanf(it->instance_id, "race-%d", &i) != 1 || i < 0 ||
        i >= RACE_INSTANCES) {
        CHECK_MSG(0, "fetched an unknown instance '%s'", it->instance_id);
        return 0;
    }
    int free_slot = 0;
    if (!atomic_compare_exchange_strong(&r->holder[i], &free_slot,
                                        me->id + 1)) {
        atomic_fetch_add(&r->overlaps, 1);
        CHECK_MSG(0,
                  "instance %s fetched by thread %d while thread %d holds it",
                  it->instance_id, me->id, free_slot - 1);
        return 0;
    }
    CHECK_MSG(it->history_total == atomic_load(&r->committed[i]),
              "%s: history_total %llu, but %llu events were committed",
              it->instance_id, (unsigned long long)it->history_total,
              (unsigned long long)atomic_load(&r->committed[i]));
    CHECK_EQ(it->history_count, it->history_total);
    if (rand_r(seed) % 8 == 0) {
        atomic_store(&r->holder[i], 0);
        int rc;
        while ((rc = p->abandon_orchestration_item(p, it->lock_token, 0, &e)) !=
                   DURO_OK &&
               e.retryable)
            atomic_fetch_add(&r->retries, 1);
        CHECK_PRC(rc, DURO_OK, &e);
        atomic_fetch_add(&r->abandons, 1);
        return rc == DURO_OK;
    }
    duro_event *d = calloc(it->message_count, sizeof(*d));
    if (d == NULL)
        return 0;
    for (size_t j = 0; j < it->message_count; j++) {
        const duro_work_item *m = &it->messages[j];
        int mi = -1, k = -1;
        if (m->payload == NULL || sscanf(m->payload, "%d:%d", &mi, &k) != 2 ||
            mi != i || k < 0 || k > RACE_EVENTS) {
            CHECK_MSG(0, "%s: unexpected message payload '%s'", it->instance_id,
                      m->payload ? m->payload : "(null)");
            free(d);
            return 0;
        }
        int expected = atomic_load(&r->next_event[i]);
        CHECK_MSG(k == expected,
                  "%s: message %d came while %d was the oldest (FIFO)",
                  it->instance_id, k, expected);
        atomic_store(&r->next_event[i], k + 1);
        atomic_fetch_add(&r->seen[i][k], 1);
        d[j] = event(it->history_total + 1 + j,
                     k == 0 ? DURO_EVENT_ORCHESTRATION_STARTED
                            : DURO_EVENT_EVENT_RAISED);
        d[j].name = k == 0 ? "orch" : "poke";
        d[j].payload = m->payload;
    }
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.name = "orch";
    duro_orch_ack a = ack_of(1, d, it->message_count,
                             it->status == DURO_STATUS_PENDING ? &m : NULL);
    atomic_store(&r->committed[i], it->history_total + it->message_count);
    atomic_store(&r->holder[i], 0);
    int rc;
    while ((rc = p->ack_orchestration_item(p, it->lock_token, &a, &e)) !=
               DURO_OK &&
           e.retryable)
        atomic_fetch_add(&r->retries, 1);
    CHECK_PRC(rc, DURO_OK, &e);
    if (rc == DURO_OK)
        atomic_fetch_add(&r->acked, (int)it->message_count);
    free(d);
    return rc == DURO_OK;
}

static void *orch_racer(void *arg)
{
    racer *me = arg;
    orch_race *r = me->race;
    duro_provider *p = me->p;
    unsigned seed = (unsigned)me->id * 7919u + 1u;
    while (!atomic_load(&r->go))
        sched_yield();
    while (!atomic_load(&r->stop) && atomic_load(&r->acked) < RACE_MESSAGES) {
        duro_error e;
        duro_orch_item *it = NULL;
        int rc = p->fetch_orchestration_item(p, LOCK_LONG, NULL, &it, &e);
        if (rc != DURO_OK) {
            if (e.retryable) {
                atomic_fetch_add(&r->retries, 1);
                continue;
            }
            CHECK_PRC(rc, DURO_OK, &e);
            break;
        }
        if (it == NULL) {
            p->wait_for_work(p, ORCH, 5, &e);
            continue;
        }
        int ok = orch_racer_turn(me, it, &seed);
        duro_orch_item_free(it);
        if (!ok)
            break;
    }
    atomic_fetch_add(&r->finished, 1);
    return NULL;
}

/* Starts `count` threads running fn on racers[i]; on a failed start the
 * ones started are told to stop (via *stop) and joined. Sets *go. */
static int start_racers(racer *racers, int count, void *(*fn)(void *),
                        void *(*last_fn)(void *), _Atomic int *go,
                        _Atomic int *stop)
{
    int started = 0;
    for (; started < count; started++) {
        void *(*f)(void *) = started == count - 1 && last_fn ? last_fn : fn;
        if (pthread_create(&racers[started].thread, NULL, f,
                           &racers[started]) != 0)
            break;
    }
    atomic_store(go, 1);
    if (started == count)
        return 1;
    atomic_store(stop, 1);
    for (int t = 0; t < started; t++)
        pthread_join(racers[t].thread, NULL);
    return 0;
}

/* 8 threads fetch and ack turns of 24 instances while a producer enqueues
 * their messages; threads alternate between handles a and b. */
static void run_orch_race(duro_provider *a, duro_provider *b)
{
    orch_race *r = calloc(1, sizeof(*r));
    CHECK(r != NULL);
    r->handles[0] = a;
    r->handles[1] = b;
    racer racers[RACE_THREADS + 1];
    for (int t = 0; t <= RACE_THREADS; t++) {
        racers[t].race = r;
        racers[t].id = t;
        racers[t].p = r->handles[t % 2];
    }
    if (!start_racers(racers, RACE_THREADS + 1, orch_racer, orch_producer,
                      &r->go, &r->stop)) {
        free(r);
        CHECK_MSG(0, "cannot start threads");
    }
    /* No CHECK that could leave this function while threads run. */
    int64_t deadline = test_now_ms() + RACE_DEADLINE_MS;
    while (atomic_load(&r->acked) < RACE_MESSAGES && !test_failed() &&
           atomic_load(&r->finished) < RACE_THREADS && test_now_ms() < deadline)
        test_sleep_ms(5);
    atomic_store(&r->stop, 1);
    for (int t = 0; t <= RACE_THREADS; t++)
        pthread_join(racers[t].thread, NULL);
    duro_provider *p = a;

    CHECK_EQ(atomic_load(&r->overlaps), 0);
    CHECK_EQ(atomic_load(&r->producer_done), 1);
    CHECK_EQ(atomic_load(&r->acked), RACE_MESSAGES);
    for (int i = 0; i < RACE_INSTANCES; i++)
        for (int k = 0; k <= RACE_EVENTS; k++)
            CHECK_MSG(atomic_load(&r->seen[i][k]) == 1,
                      "message %d:%d processed %d times", i, k,
                      atomic_load(&r->seen[i][k]));
    CHECK_EQ(count(p, ORCH, NULL), 0);
    for (int i = 0; i < RACE_INSTANCES; i++) {
        char id[32], want[32];
        snprintf(id, sizeof(id), "race-%02d", i);
        duro_history *h = history(p, id, 1);
        CHECK_EQ(h->count, RACE_EVENTS + 1);
        for (size_t k = 0; k < h->count; k++) {
            snprintf(want, sizeof(want), "%d:%zu", i, k);
            CHECK_EQ(h->events[k].event_id, k + 1);
            CHECK_STR(h->events[k].payload, want);
        }
        duro_history_free(h);
    }
    fprintf(stderr, "  %d abandons, %d retryable errors retried\n",
            atomic_load(&r->abandons), atomic_load(&r->retries));
    free(r);
}

PV_TEST(instance_lock_is_exclusive_across_racing_fetchers)
{
    duro_provider *p = pv_open();
    run_orch_race(p, p);
}

PV_TEST(instance_lock_is_exclusive_across_handles)
{
    duro_provider *p = pv_open();
    duro_provider *q = pv_open_same();
    run_orch_race(p, q);
}

#define WORK_RACE_INSTANCES 4
#define WORK_RACE_PER_INSTANCE 500
#define WORK_RACE_ROWS (WORK_RACE_INSTANCES * WORK_RACE_PER_INSTANCE)

typedef struct work_race {
    _Atomic int go, stop;
    _Atomic int seen[WORK_RACE_ROWS];
    _Atomic int fetched, acked, retries, finished;
} work_race;

typedef struct work_racer_arg {
    work_race *race;
    duro_provider *p;
    int id;
    pthread_t thread;
} work_racer_arg;

static void *work_racer(void *arg)
{
    work_racer_arg *me = arg;
    work_race *r = me->race;
    duro_provider *p = me->p;
    while (!atomic_load(&r->go))
        sched_yield();
    while (!atomic_load(&r->stop)) {
        duro_error e;
        duro_worker_item *w = NULL;
        int rc = p->fetch_work_item(p, LOCK_LONG, &w, &e);
        if (rc != DURO_OK) {
            if (e.retryable) {
                atomic_fetch_add(&r->retries, 1);
                continue;
            }
            CHECK_PRC(rc, DURO_OK, &e);
            break;
        }
        if (w == NULL)
            break; /* every row left is held by a thread that will ack it */
        atomic_fetch_add(&r->fetched, 1);
        int i = -1;
        uint64_t a = w->item.source_id;
        if (sscanf(w->item.instance_id, "w%d", &i) != 1 || i < 0 ||
            i >= WORK_RACE_INSTANCES || a < 2 ||
            a >= 2 + WORK_RACE_PER_INSTANCE) {
            CHECK_MSG(0, "fetched an unknown row %s/%llu", w->item.instance_id,
                      (unsigned long long)a);
            duro_worker_item_free(w);
            break;
        }
        atomic_fetch_add(&r->seen[i * WORK_RACE_PER_INSTANCE + (int)(a - 2)],
                         1);
        while ((rc = p->ack_work_item(p, w->lock_token, NULL, &e)) != DURO_OK &&
               e.retryable)
            atomic_fetch_add(&r->retries, 1);
        CHECK_PRC(rc, DURO_OK, &e);
        if (rc == DURO_OK)
            atomic_fetch_add(&r->acked, 1);
        duro_worker_item_free(w);
    }
    atomic_fetch_add(&r->finished, 1);
    return NULL;
}

/* 8 threads, alternating between handles a and b, fetch and ack 2000
 * rows; each must be fetched exactly once. */
static void run_work_race(duro_provider *a, duro_provider *b)
{
    duro_provider *p = a;
    for (int i = 0; i < WORK_RACE_INSTANCES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "w%d", i);
        begin(p, id, WORK_RACE_PER_INSTANCE);
    }
    CHECK_EQ(count(p, WORKER, NULL), WORK_RACE_ROWS);
    work_race *r = calloc(1, sizeof(*r));
    CHECK(r != NULL);
    work_racer_arg args[RACE_THREADS];
    int started = 0;
    for (; started < RACE_THREADS; started++) {
        args[started].race = r;
        args[started].id = started;
        args[started].p = started % 2 ? b : a;
        if (pthread_create(&args[started].thread, NULL, work_racer,
                           &args[started]) != 0)
            break;
    }
    if (started < RACE_THREADS)
        atomic_store(&r->stop, 1);
    atomic_store(&r->go, 1);
    int64_t deadline = test_now_ms() + RACE_DEADLINE_MS;
    while (atomic_load(&r->acked) < WORK_RACE_ROWS && !test_failed() &&
           atomic_load(&r->finished) < started && test_now_ms() < deadline)
        test_sleep_ms(5);
    atomic_store(&r->stop, 1);
    for (int t = 0; t < started; t++)
        pthread_join(args[t].thread, NULL);
    if (started < RACE_THREADS) {
        free(r);
        CHECK_MSG(0, "cannot start threads");
    }
    CHECK_EQ(atomic_load(&r->fetched), WORK_RACE_ROWS);
    CHECK_EQ(atomic_load(&r->acked), WORK_RACE_ROWS);
    for (int k = 0; k < WORK_RACE_ROWS; k++)
        CHECK_MSG(atomic_load(&r->seen[k]) == 1, "row w%d/%d fetched %d times",
                  k / WORK_RACE_PER_INSTANCE, k % WORK_RACE_PER_INSTANCE + 2,
                  atomic_load(&r->seen[k]));
    CHECK_EQ(count(p, WORKER, NULL), 0);
    if (atomic_load(&r->retries) > 0)
        fprintf(stderr, "  %d retryable errors retried\n",
                atomic_load(&r->retries));
    free(r);
}

PV_TEST(racing_work_item_fetchers_never_share_a_row)
{
    duro_provider *p = pv_open();
    run_work_race(p, p);
}

PV_TEST(racing_work_item_fetchers_never_share_a_row_across_handles)
{
    duro_provider *p = pv_open();
    duro_provider *q = pv_open_same();
    run_work_race(p, q);
}

/* Lock expiry. A refetch while the lock surely holds (the check ended
 * before fetch start + timeout) must find nothing; after the timeout the
 * item comes back with a higher fetch count, never before. */

PV_TEST(orchestration_lock_expiry_redelivers_with_higher_attempt)
{
    duro_provider *p = pv_open();
    start(p, "x");
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    int64_t t0 = test_now_ms();
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_SHORT);
    CHECK_EQ(a->attempt, 1);
    CHECK_EQ(a->message_count, 2);
    duro_orch_item *b = fetch_orch(p, LOCK_LONG);
    if (b != NULL)
        CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT,
                  "'%s' fetched again while its lock held", b->instance_id);
    else
        WAIT_UNTIL(try_fetch_orch(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT - CLOCK_SLACK_MS,
              "redelivered before its lock expired");
    CHECK_STR(b->instance_id, "x");
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->message_count, 2);
    CHECK_EQ(b->messages[0].kind, DURO_WORK_START);
    CHECK_STR(b->messages[1].payload, "\"e1\"");
    CHECK(strcmp(a->lock_token, b->lock_token) != 0);
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
        DURO_LOCK_LOST, 0, &e);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, b->lock_token, &ak);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

PV_TEST(work_item_lock_expiry_redelivers_with_higher_attempt)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    int64_t t0 = test_now_ms();
    duro_worker_item *a = fetch_work(p, LOCK_SHORT);
    CHECK(a != NULL);
    CHECK_EQ(a->attempt, 1);
    duro_worker_item *b = fetch_work(p, LOCK_LONG);
    if (b != NULL)
        CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT,
                  "work item fetched again while its lock held");
    else
        WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT - CLOCK_SLACK_MS,
              "redelivered before its lock expired");
    CHECK_EQ(b->attempt, 2);
    CHECK_STR(b->item.instance_id, "x");
    CHECK_EQ(b->item.source_id, 2);
    CHECK_STR(b->item.payload, "act-input");
    CHECK(strcmp(a->lock_token, b->lock_token) != 0);
    /* The first holder lost the row: renew, abandon and ack all fail. */
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_PFAIL(p->abandon_work_item(p, a->lock_token, 0, &e), DURO_LOCK_LOST,
                0, &e);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = 2;
    CHECK_PFAIL(p->ack_work_item(p, a->lock_token, &done, &e), DURO_LOCK_LOST,
                0, &e);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    CHECK_PRC(p->ack_work_item(p, b->lock_token, &done, &e), DURO_OK, &e);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

/* Abandon. */

#define ABANDON_DELAY 500

PV_TEST(abandon_orchestration_item_with_delay_hides_it_until_due)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_error e;
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    int64_t t0 = test_now_ms();
    abandon_orch(p, a, ABANDON_DELAY);
    duro_orch_item *b = fetch_orch(p, LOCK_LONG);
    if (b != NULL)
        CHECK_MSG(test_now_ms() >= t0 + ABANDON_DELAY - CLOCK_SLACK_MS,
                  "visible before its abandon delay passed");
    CHECK_EQ(count(p, ORCH, "x"), 1);
    if (b == NULL)
        WAIT_UNTIL(try_fetch_orch(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + ABANDON_DELAY - CLOCK_SLACK_MS,
              "visible before its abandon delay passed");
    CHECK_STR(b->instance_id, "x");
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->message_count, 1);
    CHECK_EQ(b->messages[0].kind, DURO_WORK_START);
    /* The abandoned token no longer holds anything. */
    CHECK_PFAIL(p->abandon_orchestration_item(p, a->lock_token, 0, &e),
                DURO_LOCK_LOST, 0, &e);
    duro_orch_ack empty = ack_of(1, NULL, 0, NULL);
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &empty, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

PV_TEST(abandon_orchestration_item_without_delay_makes_it_fetchable_at_once)
{
    duro_provider *p = pv_open();
    start(p, "x");
    raise_event(p, "x", "\"e1\"", 0);
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    abandon_orch(p, a, 0);
    duro_orch_item *b = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->message_count, 2);
    CHECK_EQ(b->messages[0].kind, DURO_WORK_START);
    CHECK_STR(b->messages[1].payload, "\"e1\"");
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

PV_TEST(abandon_work_item_with_delay_hides_it_until_due)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_LONG);
    CHECK(a != NULL);
    int64_t t0 = test_now_ms();
    CHECK_PRC(p->abandon_work_item(p, a->lock_token, ABANDON_DELAY, &e),
              DURO_OK, &e);
    duro_worker_item *b = fetch_work(p, LOCK_LONG);
    if (b != NULL)
        CHECK_MSG(test_now_ms() >= t0 + ABANDON_DELAY - CLOCK_SLACK_MS,
                  "visible before its abandon delay passed");
    CHECK_EQ(count(p, WORKER, "x"), 1);
    if (b == NULL)
        WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + ABANDON_DELAY - CLOCK_SLACK_MS,
              "visible before its abandon delay passed");
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->item.source_id, 2);
    CHECK_PFAIL(p->abandon_work_item(p, a->lock_token, 0, &e), DURO_LOCK_LOST,
                0, &e);
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_LOCK_LOST, 0, &e);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

PV_TEST(abandon_work_item_without_delay_makes_it_fetchable_at_once)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_LONG);
    CHECK(a != NULL);
    CHECK_PRC(p->abandon_work_item(p, a->lock_token, 0, &e), DURO_OK, &e);
    duro_worker_item *b = fetch_work(p, LOCK_LONG);
    CHECK(b != NULL);
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->item.source_id, 2);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

/* Renewal. The lock is renewed every few milliseconds for several times
 * its original timeout; nobody else may fetch meanwhile. */

#define RENEW_LOCK 300
#define RENEW_EXTEND 1500
#define RENEW_SPAN (4 * RENEW_LOCK)

PV_TEST(renewing_an_orchestration_lock_keeps_it)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_error e;
    int64_t t0 = test_now_ms();
    duro_orch_item *a = fetch_orch_expect(p, "x", RENEW_LOCK);
    int renewals = 0;
    while (test_now_ms() < t0 + RENEW_SPAN) {
        CHECK_PRC(p->renew_orchestration_item_lock(p, a->lock_token,
                                                   RENEW_EXTEND, &e),
                  DURO_OK, &e);
        renewals++;
        expect_no_orch(p);
        test_sleep_ms(20);
    }
    CHECK(renewals > 1);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, a->lock_token, &ak);
    CHECK_EQ(history_len(p, "x", 1), 1);
    duro_orch_item_free(a);
}

PV_TEST(renewing_a_work_item_lock_keeps_it)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    int64_t t0 = test_now_ms();
    duro_worker_item *a = fetch_work(p, RENEW_LOCK);
    CHECK(a != NULL);
    int renewals = 0;
    while (test_now_ms() < t0 + RENEW_SPAN) {
        CHECK_PRC(p->renew_work_item_lock(p, a->lock_token, RENEW_EXTEND, &e),
                  DURO_OK, &e);
        renewals++;
        expect_no_work(p);
        test_sleep_ms(20);
    }
    CHECK(renewals > 1);
    CHECK_PRC(p->ack_work_item(p, a->lock_token, NULL, &e), DURO_OK, &e);
    CHECK_EQ(count(p, WORKER, NULL), 0);
    duro_worker_item_free(a);
}

/* Renewal after expiry. The lock was set to at most (fetch returned +
 * timeout) by the provider's clock, so once that time has passed it has
 * surely expired: waiting for it is a bound, not a guess. */

static void wait_past(int64_t t)
{
    WAIT_UNTIL(test_now_ms() > t, DEADLINE_MS);
}

PV_TEST(renewing_an_expired_orchestration_lock_fails)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_error e;
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_SHORT);
    wait_past(test_now_ms() + LOCK_SHORT + CLOCK_SLACK_MS);
    /* Expired, not yet refetched. */
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
        DURO_LOCK_LOST, 0, &e);
    /* The failed renewal did not bring the lock back. */
    duro_orch_item *b = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(b->attempt, 2);
    /* Expired and taken by another caller. */
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
        DURO_LOCK_LOST, 0, &e);
    CHECK_PRC(p->renew_orchestration_item_lock(p, b->lock_token, LOCK_LONG, &e),
              DURO_OK, &e);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    ack(p, b->lock_token, &ak);
    /* Released by the ack. */
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, b->lock_token, LOCK_LONG, &e),
        DURO_LOCK_LOST, 0, &e);
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

/* A work item's lock ends when another fetch takes the row, not when its
 * expiry passes: until then a late renewal extends it. */
PV_TEST(renewing_an_expired_but_untaken_work_item_lock_extends_it)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_SHORT);
    CHECK(a != NULL);
    wait_past(test_now_ms() + LOCK_SHORT + CLOCK_SLACK_MS);
    /* Expired, nobody took it: the renewal extends the lock. */
    CHECK_PRC(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    expect_no_work(p); /* held again, for LOCK_LONG */
    /* A short extension: others get the row once it ends, never before. */
    int64_t t0 = test_now_ms();
    CHECK_PRC(p->renew_work_item_lock(p, a->lock_token, LOCK_SHORT, &e),
              DURO_OK, &e);
    duro_worker_item *b = NULL;
    WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT - CLOCK_SLACK_MS,
              "fetched before the renewed lock expired");
    CHECK_EQ(b->attempt, 2);
    CHECK_EQ(b->item.source_id, 2);
    /* Taken now: the first holder's token is dead for good. */
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_PFAIL(p->abandon_work_item(p, a->lock_token, 0, &e), DURO_LOCK_LOST,
                0, &e);
    CHECK_PFAIL(p->ack_work_item(p, a->lock_token, NULL, &e), DURO_LOCK_LOST, 0,
                &e);
    CHECK_PRC(p->ack_work_item(p, b->lock_token, NULL, &e), DURO_OK, &e);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

PV_TEST(renewing_an_expired_and_retaken_work_item_lock_fails_lock_lost)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_SHORT);
    CHECK(a != NULL);
    duro_worker_item *b = NULL;
    WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_EQ(b->attempt, 2);
    /* The row is there under another token: LOCK_LOST, not NOT_FOUND. */
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_LOCK_LOST, 0, &e);
    /* The failed renewal took nothing from the new holder. */
    expect_no_work(p);
    CHECK_PRC(p->renew_work_item_lock(p, b->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    CHECK_PRC(p->ack_work_item(p, b->lock_token, NULL, &e), DURO_OK, &e);
    /* Acked (here by the thief): the row is gone for both tokens. */
    CHECK_PFAIL(p->renew_work_item_lock(p, b->lock_token, LOCK_LONG, &e),
                DURO_NOT_FOUND, 0, &e);
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_NOT_FOUND, 0, &e);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

PV_TEST(renewing_a_released_work_item_lock_fails_lock_lost)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_LONG);
    CHECK(a != NULL);
    CHECK_PRC(p->abandon_work_item(p, a->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    CHECK_PFAIL(p->renew_work_item_lock(p, a->lock_token, LOCK_LONG, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    duro_worker_item_free(a);
}

PV_TEST(abandoning_an_expired_but_untaken_work_item_applies_its_delay)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    duro_error e;
    duro_worker_item *a = fetch_work(p, LOCK_SHORT);
    CHECK(a != NULL);
    wait_past(test_now_ms() + LOCK_SHORT + CLOCK_SLACK_MS);
    int64_t t0 = test_now_ms();
    CHECK_PRC(p->abandon_work_item(p, a->lock_token, ABANDON_DELAY, &e),
              DURO_OK, &e);
    duro_worker_item *b = fetch_work(p, LOCK_LONG);
    if (b == NULL)
        WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + ABANDON_DELAY - CLOCK_SLACK_MS,
              "visible before its abandon delay passed");
    CHECK_EQ(b->attempt, 2);
    CHECK_PFAIL(p->abandon_work_item(p, a->lock_token, 0, &e), DURO_LOCK_LOST,
                0, &e);
    duro_worker_item_free(a);
    duro_worker_item_free(b);
}

/* Stale, unknown and failing acks. */

PV_TEST(ack_with_stale_token_fails_and_changes_nothing)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    begin(p, "y", 1);
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    int64_t t0 = test_now_ms();
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_SHORT);
    duro_orch_item *b = NULL;
    WAIT_UNTIL(try_fetch_orch(p, LOCK_LONG, &b), DEADLINE_MS);
    CHECK_MSG(test_now_ms() >= t0 + LOCK_SHORT - CLOCK_SLACK_MS,
              "refetched before the lock expired");
    CHECK_STR(b->instance_id, "x");
    CHECK_EQ(b->attempt, 2);

    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_event d[2] = {event(3, DURO_EVENT_EVENT_RAISED),
                       event(4, DURO_EVENT_ACTIVITY_SCHEDULED)};
    duro_work_item w = activity("x", 1, 4);
    duro_activity_ref r = ref("x", 1, 2);
    duro_outbound child;
    memset(&child, 0, sizeof(child));
    child.item = work(DURO_WORK_START, "z");
    child.item.name = "orch";
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    m.output = "\"stale\"";
    duro_orch_ack ak = ack_of(1, d, 2, &m);
    ak.worker_items = &w;
    ak.worker_item_count = 1;
    ak.cancelled_activities = &r;
    ak.cancelled_activity_count = 1;
    ak.orchestrator_items = &child;
    ak.orchestrator_item_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_PFAIL(p->abandon_orchestration_item(p, a->lock_token, 0, &e),
                DURO_LOCK_LOST, 0, &e);
    CHECK_PFAIL(
        p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
        DURO_LOCK_LOST, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    expect_no_instance(p, "z");
    CHECK_EQ(count(p, ORCH, "x"), 1);
    /* The current holder's ack still works, on the untouched history. */
    duro_event d2 = event(3, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack ak2 = ack_of(1, &d2, 1, NULL);
    ack(p, b->lock_token, &ak2);
    CHECK_EQ(history_len(p, "x", 1), 3);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

PV_TEST(unknown_lock_tokens_fail_lock_lost_and_change_nothing)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    const char *tokens[] = {"no-such-token",
                            "0123456789abcdef0123456789abcdef"};
    duro_event d = event(3, DURO_EVENT_EVENT_RAISED);
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = 2;
    for (size_t i = 0; i < 2; i++) {
        const char *t = tokens[i];
        CHECK_PFAIL(p->ack_orchestration_item(p, t, &ak, &e), DURO_LOCK_LOST, 0,
                    &e);
        CHECK_PFAIL(p->abandon_orchestration_item(p, t, 0, &e), DURO_LOCK_LOST,
                    0, &e);
        CHECK_PFAIL(p->renew_orchestration_item_lock(p, t, LOCK_LONG, &e),
                    DURO_LOCK_LOST, 0, &e);
        CHECK_PFAIL(p->ack_work_item(p, t, &done, &e), DURO_LOCK_LOST, 0, &e);
        CHECK_PFAIL(p->ack_work_item(p, t, NULL, &e), DURO_LOCK_LOST, 0, &e);
        CHECK_PFAIL(p->abandon_work_item(p, t, 0, &e), DURO_LOCK_LOST, 0, &e);
        CHECK_PFAIL(p->renew_work_item_lock(p, t, LOCK_LONG, &e),
                    DURO_LOCK_LOST, 0, &e);
    }
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(failing_ack_leaves_no_partial_state)
{
    duro_provider *p = pv_open();
    begin(p, "x", 2); /* events 1..3, rows 2 and 3 */
    begin(p, "y", 1);
    raise_event(p, "x", "\"e1\"", 0);
    duro_error e;
    duro_orch_item *a = fetch_orch_for(p, "x", LOCK_LONG);
    CHECK_EQ(a->history_total, 3);
    pv_snapshot s;
    pv_snapshot_take(p, &s);

    duro_event d[3] = {event(4, DURO_EVENT_EVENT_RAISED),
                       event(5, DURO_EVENT_ACTIVITY_SCHEDULED),
                       event(2, DURO_EVENT_TIMER_CREATED)};
    d[0].name = "poke";
    d[1].name = "act";
    duro_work_item w = activity("x", 1, 5);
    duro_activity_ref r = ref("x", 1, 2);
    duro_outbound out[3];
    memset(out, 0, sizeof(out));
    out[0].item = work(DURO_WORK_START, "z");
    out[0].item.name = "orch";
    out[0].item.parent_instance = "x";
    out[0].item.parent_execution = 1;
    out[0].item.parent_event_id = 5;
    out[1].item = work(DURO_WORK_TIMER_FIRED, "x");
    out[1].item.execution_id = 1;
    out[1].item.source_id = 6;
    out[2].item = work(DURO_WORK_EXTERNAL_EVENT, "y");
    out[2].item.name = "poke";
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    m.output = "\"done\"";
    m.custom_status = "cs";
    m.custom_status_set = 1;
    duro_orch_ack ak = ack_of(1, d, 3, &m);
    ak.worker_items = &w;
    ak.worker_item_count = 1;
    ak.cancelled_activities = &r;
    ak.cancelled_activity_count = 1;
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = 3;

    /* The third event repeats event id 2, already stored. */
    int rc = p->ack_orchestration_item(p, a->lock_token, &ak, &e);
    CHECK_MSG(rc != DURO_OK, "an ack repeating stored event id 2 succeeded");
    CHECK_EQ(e.code, rc);
    CHECK_MSG(e.retryable == 0,
              "duplicate event id failed with %s retryable (%s); the same "
              "call can never succeed",
              duro_errname(rc), e.message);
    PV_EXPECT_UNCHANGED(p, &s);

    /* Two events with the same id inside one delta. */
    d[2] = event(4, DURO_EVENT_TIMER_CREATED);
    rc = p->ack_orchestration_item(p, a->lock_token, &ak, &e);
    CHECK_MSG(rc != DURO_OK, "an ack with event id 4 twice succeeded");
    CHECK_MSG(e.retryable == 0, "duplicate event id failed retryably (%s)",
              e.message);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    expect_no_instance(p, "z");

    /* The token still holds the lock; the corrected ack commits it all. */
    CHECK_PRC(p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
              DURO_OK, &e);
    d[2] = event(6, DURO_EVENT_TIMER_CREATED);
    ack(p, a->lock_token, &ak);
    CHECK_EQ(history_len(p, "x", 1), 6);
    duro_instance_list *l = get(p, "x");
    CHECK_EQ(l->items[0].status, DURO_STATUS_COMPLETED);
    CHECK_STR(l->items[0].output, "\"done\"");
    CHECK_STR(l->items[0].custom_status, "cs");
    duro_instance_list_free(l);
    l = get(p, "z");
    CHECK_EQ(l->items[0].status, DURO_STATUS_PENDING);
    duro_instance_list_free(l);
    /* x completed: its own timer went with it (nothing queued for a
     * finished instance is live); the others' messages are there. */
    CHECK_EQ(count(p, ORCH, "x"), 0);
    CHECK_EQ(count(p, ORCH, "y"), 1);
    CHECK_EQ(count(p, ORCH, "z"), 1);
    CHECK_DRAIN(p, "x:0003,x:0005,y:0002");
    duro_orch_item_free(a);
}

PV_TEST(messages_arriving_while_locked_wait_for_the_next_fetch)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    raise_event(p, "x", "\"e1\"", 0);
    raise_event(p, "x", "\"e2\"", 0);
    CHECK_EQ(count(p, ORCH, "x"), 3);
    expect_no_orch(p); /* x is locked and nothing else is queued */
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, a->lock_token, &ak);
    CHECK_EQ(count(p, ORCH, "x"), 2);
    duro_orch_item *b = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(b->message_count, 2);
    CHECK_STR(b->messages[0].payload, "\"e1\"");
    CHECK_STR(b->messages[1].payload, "\"e2\"");
    CHECK_EQ(b->attempt, 1); /* never fetched before */
    CHECK_EQ(b->history_total, 1);
    CHECK_EQ(b->status, DURO_STATUS_RUNNING);
    duro_orch_item_free(a);
    duro_orch_item_free(b);
}

/* ========================================================================
 * Queues. */

#define TIMER_DELAY 400

PV_TEST(delayed_messages_stay_invisible_until_due)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    begin(p, "y", 0);
    /* x: a timer enqueued by a client call. */
    int64_t due_x = test_now_ms() + TIMER_DELAY;
    int64_t fire_x = duro_now_ms() + TIMER_DELAY;
    duro_work_item t = work(DURO_WORK_TIMER_FIRED, "x");
    t.execution_id = 1;
    t.source_id = 2;
    t.fire_at_ms = fire_x;
    enqueue(p, &t, TIMER_DELAY);
    /* y: a timer written by a turn. */
    duro_orch_item *a = poke(p, "y");
    duro_event d[2] = {event(2, DURO_EVENT_EVENT_RAISED),
                       event(3, DURO_EVENT_TIMER_CREATED)};
    d[1].fire_at_ms = duro_now_ms() + TIMER_DELAY;
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_TIMER_FIRED, "y");
    out.item.execution_id = 1;
    out.item.source_id = 3;
    out.item.fire_at_ms = d[1].fire_at_ms;
    out.delay_ms = TIMER_DELAY;
    duro_orch_ack ak = ack_of(1, d, 2, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    int64_t due_y = test_now_ms() + TIMER_DELAY;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    CHECK_EQ(count(p, ORCH, "y"), 1);
    /* A turn of x before its timer is due neither sees nor consumes it. */
    duro_orch_item *now_item = poke(p, "x");
    CHECK_EQ(now_item->message_count, 1);
    CHECK_EQ(now_item->messages[0].kind, DURO_WORK_EXTERNAL_EVENT);
    duro_event raised = event(2, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack now_ack = ack_of(1, &raised, 1, NULL);
    ack(p, now_item->lock_token, &now_ack);
    duro_orch_item_free(now_item);
    CHECK_EQ(count(p, ORCH, "x"), 1);

    int got_x = 0, got_y = 0;
    int64_t deadline = test_now_ms() + DEADLINE_MS;
    while (!(got_x && got_y)) {
        CHECK_MSG(test_now_ms() < deadline, "timers never became visible");
        duro_orch_item *it = fetch_orch(p, LOCK_LONG);
        if (it == NULL) {
            test_sleep_ms(1);
            continue;
        }
        int64_t now = test_now_ms();
        int is_x = strcmp(it->instance_id, "x") == 0;
        CHECK_MSG(now >= (is_x ? due_x : due_y) - CLOCK_SLACK_MS,
                  "timer of %s returned %lld ms early", it->instance_id,
                  (long long)((is_x ? due_x : due_y) - now));
        CHECK_EQ(it->message_count, 1);
        CHECK_EQ(it->attempt, 1); /* never part of an earlier fetch */
        const duro_work_item *m = &it->messages[0];
        CHECK_EQ(m->kind, DURO_WORK_TIMER_FIRED);
        CHECK_EQ(m->execution_id, 1);
        CHECK_EQ(m->source_id, is_x ? 2 : 3);
        CHECK_EQ(m->fire_at_ms, is_x ? fire_x : d[1].fire_at_ms);
        CHECK_MSG(!(is_x ? got_x : got_y), "timer of %s delivered twice",
                  it->instance_id);
        if (is_x)
            got_x = 1;
        else
            got_y = 1;
        duro_event fired = event(it->history_total + 1, DURO_EVENT_TIMER_FIRED);
        duro_orch_ack done = ack_of(1, &fired, 1, NULL);
        ack(p, it->lock_token, &done);
        duro_orch_item_free(it);
    }
    CHECK_EQ(count(p, ORCH, NULL), 0);
}

PV_TEST(messages_of_one_instance_come_oldest_first)
{
    duro_provider *p = pv_open();
    start(p, "x");
    char payload[32];
    for (int i = 0; i < 20; i++) {
        snprintf(payload, sizeof(payload), "m%02d", i);
        raise_event(p, "x", payload, 0);
    }
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 21);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_START);
    for (size_t i = 1; i < a->message_count; i++) {
        snprintf(payload, sizeof(payload), "m%02zu", i - 1);
        CHECK_EQ(a->messages[i].kind, DURO_WORK_EXTERNAL_EVENT);
        CHECK_STR(a->messages[i].payload, payload);
    }
    duro_orch_item_free(a);
}

PV_TEST(work_items_come_oldest_first)
{
    duro_provider *p = pv_open();
    begin(p, "x", 5); /* rows x/2 .. x/6, in that order */
    begin(p, "y", 2); /* then y/2, y/3 */
    const char *want[7] = {"x:2", "x:3", "x:4", "x:5", "x:6", "y:2", "y:3"};
    duro_error e;
    for (int i = 0; i < 7; i++) {
        duro_worker_item *w = fetch_work(p, LOCK_LONG);
        CHECK_MSG(w != NULL, "only %d of 7 rows fetchable", i);
        char got[64];
        snprintf(got, sizeof(got), "%s:%llu", w->item.instance_id,
                 (unsigned long long)w->item.source_id);
        CHECK_STR(got, want[i]);
        CHECK_PRC(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_OK, &e);
        duro_worker_item_free(w);
    }
    expect_no_work(p);
}

PV_TEST(instances_are_fetched_oldest_first_and_independently)
{
    duro_provider *p = pv_open();
    start(p, "c"); /* ids out of order: the oldest message wins */
    start(p, "a");
    start(p, "b");
    duro_orch_item *ic = fetch_orch_expect(p, "c", LOCK_LONG);
    duro_orch_item *ia = fetch_orch_expect(p, "a", LOCK_LONG);
    raise_event(p, "c", "\"late\"", 0);
    /* c's lock does not hold back b; acking a does not touch c. */
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, ia->lock_token, &ak);
    CHECK_EQ(count(p, ORCH, "c"), 2);
    duro_orch_item *ib = fetch_orch_expect(p, "b", LOCK_LONG);
    expect_no_orch(p);
    abandon_orch(p, ic, 0);
    duro_orch_item *ic2 = fetch_orch_expect(p, "c", LOCK_LONG);
    CHECK_EQ(ic2->message_count, 2);
    CHECK_EQ(ic2->messages[0].kind, DURO_WORK_START);
    CHECK_STR(ic2->messages[1].payload, "\"late\"");
    /* The highest fetch count among the messages: START's second fetch. */
    CHECK_EQ(ic2->attempt, 2);
    CHECK_EQ(ib->attempt, 1);
    duro_orch_item_free(ia);
    duro_orch_item_free(ib);
    duro_orch_item_free(ic);
    duro_orch_item_free(ic2);
}

PV_TEST(count_messages_counts_visible_delayed_and_locked)
{
    duro_provider *p = pv_open();
    begin(p, "x", 3);
    start(p, "y");
    raise_event(p, "y", "\"e\"", 0);
    raise_event(p, "x", "\"later\"", 60000);
    raise_event(p, "x", "\"now\"", 0);
    CHECK_EQ(count(p, ORCH, "x"), 2);
    CHECK_EQ(count(p, ORCH, "y"), 2);
    CHECK_EQ(count(p, ORCH, NULL), 4);
    CHECK_EQ(count(p, WORKER, "x"), 3);
    CHECK_EQ(count(p, WORKER, "y"), 0);
    CHECK_EQ(count(p, WORKER, NULL), 3);
    duro_orch_item *a = fetch_orch_for(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 1); /* the delayed one is not due */
    CHECK_STR(a->messages[0].payload, "\"now\"");
    CHECK_EQ(count(p, ORCH, "x"), 2);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_EQ(count(p, WORKER, "x"), 3);
    duro_error e;
    CHECK_PRC(p->ack_work_item(p, w->lock_token, NULL, &e), DURO_OK, &e);
    CHECK_EQ(count(p, WORKER, "x"), 2);
    raise_event(p, "ghost", "\"boo\"", 0);
    CHECK_EQ(count(p, ORCH, "ghost"), 1);
    CHECK_EQ(count(p, ORCH, NULL), 5);
    CHECK_EQ(count(p, ORCH, "nobody"), 0);
    CHECK_EQ(count(p, WORKER, "nobody"), 0);
    duro_orch_item_free(a);
    duro_worker_item_free(w);
}

PV_TEST(cancel_for_a_missing_instance_does_not_block_others)
{
    duro_provider *p = pv_open();
    duro_work_item c = work(DURO_WORK_CANCEL_INSTANCE, "ghost");
    c.reason = "stop";
    c.requested_by = "test";
    enqueue(p, &c, 0);
    start(p, "real");
    duro_orch_item *g = fetch_orch_expect(p, "ghost", LOCK_LONG);
    CHECK_EQ(g->status, DURO_STATUS_NOT_FOUND);
    CHECK_EQ(g->execution_id, 0);
    CHECK_EQ(g->history_total, 0);
    CHECK_EQ(g->history_count, 0);
    CHECK_EQ(g->message_count, 1);
    CHECK_EQ(g->messages[0].kind, DURO_WORK_CANCEL_INSTANCE);
    /* "real" is fetchable while the ghost is locked. */
    duro_orch_item *r = fetch_orch_expect(p, "real", LOCK_LONG);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, r->lock_token, &ak);
    /* No delta, no meta: consumes the message and creates nothing. */
    duro_orch_ack nothing = ack_of(0, NULL, 0, NULL);
    ack(p, g->lock_token, &nothing);
    expect_no_instance(p, "ghost");
    CHECK_EQ(count(p, ORCH, "ghost"), 0);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    duro_error e;
    uint64_t ex = 0;
    CHECK_PFAIL(p->latest_execution_id(p, "ghost", &ex, &e), DURO_NOT_FOUND, 0,
                &e);
    duro_instance_filter all;
    memset(&all, 0, sizeof(all));
    duro_instance_list *l = NULL;
    CHECK_PRC(p->list_instances(p, &all, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].instance_id, "real");
    duro_instance_list_free(l);
    duro_orch_item_free(g);
    duro_orch_item_free(r);

    /* Acked first, the ghost does not hold anything back either. */
    c.instance_id = "ghost2";
    enqueue(p, &c, 0);
    start(p, "real2");
    g = fetch_orch_expect(p, "ghost2", LOCK_LONG);
    ack(p, g->lock_token, &nothing);
    r = fetch_orch_expect(p, "real2", LOCK_LONG);
    expect_no_instance(p, "ghost2");
    duro_orch_item_free(g);
    duro_orch_item_free(r);
}

/* Queues hold only live work: the ack that ends an instance deletes what is
 * still queued for it; a continue-as-new deletes what names the ended
 * execution. */

#define THIRTY_DAYS_MS (30LL * 24 * 3600 * 1000)

/* One turn of `id` (execution 1) that creates a timer due in 30 days. */
static void turn_with_long_timer(duro_provider *p, const char *id)
{
    duro_orch_item *item = poke(p, id);
    duro_event d[2] = {
        event(item->history_total + 1, DURO_EVENT_EVENT_RAISED),
        event(item->history_total + 2, DURO_EVENT_TIMER_CREATED)};
    d[0].name = "poke";
    d[1].fire_at_ms = duro_now_ms() + THIRTY_DAYS_MS;
    duro_outbound timer;
    memset(&timer, 0, sizeof(timer));
    timer.item = work(DURO_WORK_TIMER_FIRED, id);
    timer.item.execution_id = 1;
    timer.item.source_id = d[1].event_id;
    timer.item.fire_at_ms = d[1].fire_at_ms;
    timer.delay_ms = THIRTY_DAYS_MS;
    duro_orch_ack a = ack_of(1, d, 2, NULL);
    a.orchestrator_items = &timer;
    a.orchestrator_item_count = 1;
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
}

PV_TEST(finished_instance_leaves_nothing_queued)
{
    duro_provider *p = pv_open();
    begin(p, "other", 0);
    turn_with_long_timer(p, "other"); /* must survive everything below */
    static const int statuses[3] = {DURO_STATUS_COMPLETED, DURO_STATUS_FAILED,
                                    DURO_STATUS_CANCELLED};
    for (int k = 0; k < 3; k++) {
        char id[32];
        snprintf(id, sizeof(id), "done-%d", statuses[k]);
        begin(p, id, 1); /* activity 2, still queued */
        turn_with_long_timer(p, id);
        CHECK_EQ(count(p, ORCH, id), 1);
        CHECK_EQ(count(p, WORKER, id), 1);
        /* The last turn: a message arrives while it runs; it cancels the
         * outstanding activity and ends the instance. */
        duro_orch_item *item = poke(p, id);
        raise_event(p, id, "\"during\"", 0);
        uint64_t h = item->history_total;
        duro_event d[3] = {event(h + 1, DURO_EVENT_EVENT_RAISED),
                           event(h + 2, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
                           event(h + 3, DURO_EVENT_ORCHESTRATION_COMPLETED)};
        d[0].name = "poke";
        d[1].source_event_id = 2;
        d[1].reason = DURO_REASON_INSTANCE_COMPLETED;
        duro_instance_meta m = meta(statuses[k]);
        if (statuses[k] == DURO_STATUS_FAILED) {
            d[2].kind = DURO_EVENT_ORCHESTRATION_FAILED;
            m.error = "failed";
        } else if (statuses[k] == DURO_STATUS_CANCELLED) {
            d[2].kind = DURO_EVENT_ORCHESTRATION_CANCELLED;
            m.error = "cancelled";
        }
        duro_activity_ref r = ref(id, 1, 2);
        duro_orch_ack a = ack_of(1, d, 3, &m);
        a.cancelled_activities = &r;
        a.cancelled_activity_count = 1;
        ack(p, item->lock_token, &a);
        duro_orch_item_free(item);
        CHECK_EQ(count(p, ORCH, id), 0);
        CHECK_EQ(count(p, WORKER, id), 0);
        duro_instance_list *l = get(p, id);
        CHECK_EQ(l->items[0].status, statuses[k]);
        duro_instance_list_free(l);
        expect_no_orch(p);
        /* Nothing stale is left to block the instance: a later message is
         * fetchable at once, alone. */
        raise_event(p, id, "\"late\"", 0);
        duro_orch_item *late = fetch_orch_expect(p, id, LOCK_LONG);
        CHECK_EQ(late->message_count, 1);
        CHECK_STR(late->messages[0].payload, "\"late\"");
        CHECK_EQ(late->status, statuses[k]);
        duro_orch_ack consume = ack_of(0, NULL, 0, NULL);
        ack(p, late->lock_token, &consume);
        duro_orch_item_free(late);
        CHECK_EQ(count(p, ORCH, id), 0);
    }
    CHECK_EQ(count(p, ORCH, "other"), 1);
    CHECK_EQ(count(p, ORCH, NULL), 1);
    CHECK_EQ(count(p, WORKER, NULL), 0);
}

PV_TEST(cancelled_delayed_start_instance_leaves_nothing_queued)
{
    duro_provider *p = pv_open();
    duro_work_item st = work(DURO_WORK_START, "late");
    st.name = "orch";
    enqueue(p, &st, THIRTY_DAYS_MS);
    CHECK_EQ(count(p, ORCH, "late"), 1);
    expect_no_orch(p);
    duro_work_item cancel = work(DURO_WORK_CANCEL_INSTANCE, "late");
    cancel.reason = "not needed";
    enqueue(p, &cancel, 0);
    duro_orch_item *item = fetch_orch_expect(p, "late", LOCK_LONG);
    CHECK_EQ(item->status, DURO_STATUS_PENDING);
    CHECK_EQ(item->execution_id, 0);
    CHECK_EQ(item->message_count, 1); /* the START is not visible yet */
    CHECK_EQ(item->messages[0].kind, DURO_WORK_CANCEL_INSTANCE);
    duro_event d[3] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED),
                       event(3, DURO_EVENT_ORCHESTRATION_CANCELLED)};
    d[0].name = "orch";
    d[1].reason = d[2].reason = "not needed";
    duro_instance_meta m = meta(DURO_STATUS_CANCELLED);
    m.name = "orch";
    m.error = "not needed";
    m.category = DURO_CATEGORY_CANCELLED;
    duro_orch_ack a = ack_of(1, d, 3, &m);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, ORCH, "late"), 0);
    CHECK_EQ(count(p, WORKER, "late"), 0);
    CHECK_EQ(count(p, ORCH, NULL), 0);
    duro_instance_list *l = get(p, "late");
    CHECK_EQ(l->items[0].status, DURO_STATUS_CANCELLED);
    duro_instance_list_free(l);
    expect_no_orch(p);
}

/* x's continue-as-new drops only its ending execution's messages; with
 * `batched` its turn is acked in one batch with a turn of y
 * (ack_and_fetch_orchestration_items), which goes its own way there. */
static void continue_as_new_drops_ended_messages(int batched)
{
    duro_provider *p = pv_open();
    if (batched) {
        require_v7(p);
        begin(p, "y", 0);
    }
    begin(p, "x", 0);
    turn_with_long_timer(p, "x"); /* TIMER_FIRED for execution 1 */
    duro_orch_item *a = poke(p, "x");
    /* Arriving during the turn: a late completion for execution 1 (gone
     * with it) and an event for the instance (kept for execution 2). */
    duro_work_item stale = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    stale.execution_id = 1;
    stale.source_id = 9;
    enqueue(p, &stale, 0);
    raise_event(p, "x", "\"for-next\"", 0);
    uint64_t h = a->history_total;
    duro_event d[3] = {event(h + 1, DURO_EVENT_EVENT_RAISED),
                       event(h + 2, DURO_EVENT_TIMER_CREATED),
                       event(h + 3, DURO_EVENT_CONTINUED_AS_NEW)};
    d[0].name = "poke";
    d[2].payload = "in-2";
    duro_outbound out[3];
    memset(out, 0, sizeof(out));
    out[0].item = work(DURO_WORK_CONTINUE_AS_NEW, "x");
    out[0].item.execution_id = 2;
    out[0].item.name = "orch";
    out[0].item.payload = "in-2";
    out[1].item = work(DURO_WORK_EXTERNAL_EVENT, "x");
    out[1].item.name = "poke";
    out[1].item.payload = "\"carried\"";
    out[1].item.flags = DURO_EVENT_CARRIED;
    /* a timer of the ending execution created in this very turn */
    out[2].item = work(DURO_WORK_TIMER_FIRED, "x");
    out[2].item.execution_id = 1;
    out[2].item.source_id = h + 2;
    out[2].delay_ms = THIRTY_DAYS_MS;
    duro_instance_meta m = meta(DURO_STATUS_CONTINUED_AS_NEW);
    duro_orch_ack ak = ack_of(1, d, 3, &m);
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = 3;
    if (batched) {
        duro_orch_item *iy = poke(p, "y");
        duro_event dy = event(2, DURO_EVENT_EVENT_RAISED);
        dy.name = "poke";
        const char *tokens[2] = {iy->lock_token, a->lock_token};
        duro_orch_ack acks[2] = {ack_of(1, &dy, 1, NULL), ak};
        duro_orch_item *none[1] = {NULL};
        size_t got = 99;
        duro_error e;
        CHECK_PRC(p->ack_and_fetch_orchestration_items(
                      p, 2, tokens, acks, LOCK_LONG, NULL, 0, none, &got, &e),
                  DURO_OK, &e);
        CHECK_EQ(got, 0);
        CHECK_EQ(history_len(p, "y", 1), 2);
        duro_orch_item_free(iy);
    } else {
        ack(p, a->lock_token, &ak);
    }
    duro_orch_item_free(a);
    CHECK_EQ(count(p, ORCH, "x"), 3);
    duro_orch_item *b = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(b->message_count, 3);
    int cont = 0, carried = 0, next = 0;
    for (size_t i = 0; i < b->message_count; i++) {
        const duro_work_item *w = &b->messages[i];
        CHECK(w->kind == DURO_WORK_CONTINUE_AS_NEW ||
              w->kind == DURO_WORK_EXTERNAL_EVENT);
        cont += w->kind == DURO_WORK_CONTINUE_AS_NEW && w->execution_id == 2;
        carried += w->kind == DURO_WORK_EXTERNAL_EVENT &&
                   (w->flags & DURO_EVENT_CARRIED) != 0;
        next += w->payload != NULL && strcmp(w->payload, "\"for-next\"") == 0;
    }
    CHECK_EQ(cont, 1);
    CHECK_EQ(carried, 1);
    CHECK_EQ(next, 1);
    abandon_orch(p, b, 0);
    duro_orch_item_free(b);
}

PV_TEST(continue_as_new_deletes_only_the_ended_executions_messages)
{
    continue_as_new_drops_ended_messages(0);
}

PV_TEST(ack_and_fetch_orchestration_items_continue_as_new_drops_as_alone)
{
    continue_as_new_drops_ended_messages(1);
}

/* ========================================================================
 * History and executions. */

/* Ends x's current execution with continue-as-new and runs the first turn
 * of the next one (input "in-<next>"). */
static void continue_as_new(duro_provider *p, const char *id, uint64_t next)
{
    char input[32];
    snprintf(input, sizeof(input), "in-%llu", (unsigned long long)next);
    duro_orch_item *a = poke(p, id);
    CHECK_EQ(a->execution_id, next - 1);
    duro_event d[2] = {
        event(a->history_total + 1, DURO_EVENT_EVENT_RAISED),
        event(a->history_total + 2, DURO_EVENT_CONTINUED_AS_NEW)};
    d[1].payload = input;
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_CONTINUE_AS_NEW, id);
    out.item.execution_id = next;
    out.item.name = "orch";
    out.item.version = "1.0";
    out.item.payload = input;
    duro_instance_meta m = meta(DURO_STATUS_CONTINUED_AS_NEW);
    duro_orch_ack ak = ack_of(next - 1, d, 2, &m);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);

    duro_orch_item *b = fetch_orch_for(p, id, LOCK_LONG);
    CHECK_EQ(b->message_count, 1);
    CHECK_EQ(b->messages[0].kind, DURO_WORK_CONTINUE_AS_NEW);
    CHECK_EQ(b->messages[0].execution_id, next);
    CHECK_STR(b->messages[0].payload, input);
    duro_event s = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    s.name = "orch";
    s.payload = input;
    duro_instance_meta m2 = meta(DURO_STATUS_RUNNING);
    m2.name = "orch";
    m2.version = "1.0";
    duro_orch_ack ak2 = ack_of(next, &s, 1, &m2);
    ack(p, b->lock_token, &ak2);
    duro_orch_item_free(b);
}

PV_TEST(continue_as_new_keeps_executions_apart)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    CHECK_EQ(latest(p, "x"), 1);
    /* Execution 1 ends with continue-as-new: still the current one, and
     * the instance as a whole is still running. */
    duro_orch_item *a = poke(p, "x");
    duro_event d[2] = {event(2, DURO_EVENT_EVENT_RAISED),
                       event(3, DURO_EVENT_CONTINUED_AS_NEW)};
    d[1].payload = "in-2";
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_CONTINUE_AS_NEW, "x");
    out.item.execution_id = 2;
    out.item.name = "orch";
    out.item.payload = "in-2";
    duro_instance_meta m = meta(DURO_STATUS_CONTINUED_AS_NEW);
    m.output = "\"carried\"";
    duro_orch_ack ak = ack_of(1, d, 2, &m);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    duro_instance_list *l = get(p, "x");
    CHECK_MSG(l->items[0].status == DURO_STATUS_RUNNING,
              "after a CONTINUED_AS_NEW turn the instance is %s, expected "
              "Running",
              duro_status_name(l->items[0].status));
    CHECK_EQ(l->items[0].execution_id, 1);
    CHECK_EQ(l->items[0].history_count, 3);
    duro_instance_list_free(l);
    CHECK_EQ(latest(p, "x"), 1);

    /* The next turn runs execution 2. */
    duro_orch_item *b = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(b->execution_id, 1);
    CHECK_EQ(b->history_total, 3);
    CHECK_EQ(b->messages[0].kind, DURO_WORK_CONTINUE_AS_NEW);
    duro_event s = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    s.payload = "in-2";
    duro_instance_meta m2 = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak2 = ack_of(2, &s, 1, &m2);
    ack(p, b->lock_token, &ak2);
    duro_orch_item_free(b);
    CHECK_EQ(latest(p, "x"), 2);
    l = get(p, "x");
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    CHECK_EQ(l->items[0].execution_id, 2);
    CHECK_EQ(l->items[0].history_count, 1);
    CHECK_STR(l->items[0].name, "orch");
    /* The running execution has no output: the old one's is not kept. */
    CHECK_STR(l->items[0].output, NULL);
    duro_instance_list_free(l);

    duro_history *h1 = history(p, "x", 1);
    CHECK_EQ(h1->execution_id, 1);
    CHECK_EQ(h1->count, 3);
    CHECK_EQ(h1->events[2].kind, DURO_EVENT_CONTINUED_AS_NEW);
    duro_history_free(h1);
    duro_history *h2 = history(p, "x", 2);
    CHECK_EQ(h2->execution_id, 2);
    CHECK_EQ(h2->count, 1);
    CHECK_STR(h2->events[0].payload, "in-2");
    duro_history_free(h2);
    duro_history *h0 = history(p, "x", 0); /* the current one */
    CHECK_EQ(h0->execution_id, 2);
    CHECK_EQ(h0->count, 1);
    duro_history_free(h0);
    duro_error e;
    duro_history *none = NULL;
    CHECK_PFAIL(p->read_history(p, "x", 3, &none, &e), DURO_NOT_FOUND, 0, &e);
    duro_history_free(none);
    none = NULL;
    CHECK_PFAIL(p->read_history(p, "nobody", 0, &none, &e), DURO_NOT_FOUND, 0,
                &e);
    duro_history_free(none);
    uint64_t ex = 0;
    CHECK_PFAIL(p->latest_execution_id(p, "nobody", &ex, &e), DURO_NOT_FOUND, 0,
                &e);

    /* A fetch carries only the current execution's history. */
    duro_orch_item *c = poke(p, "x");
    CHECK_EQ(c->execution_id, 2);
    CHECK_EQ(c->history_total, 1);
    CHECK_EQ(c->history_count, 1);
    CHECK_STR(c->history[0].payload, "in-2");
    duro_event r = event(2, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack ak3 = ack_of(2, &r, 1, NULL);
    ack(p, c->lock_token, &ak3);
    duro_orch_item_free(c);
    CHECK_EQ(history_len(p, "x", 1), 3);
    CHECK_EQ(history_len(p, "x", 2), 2);
}

/* Which fields each event kind uses, beyond id, kind and timestamp. */
enum {
    F_SOURCE = 1 << 0,
    F_NAME = 1 << 1,
    F_VERSION = 1 << 2,
    F_PAYLOAD = 1 << 3,
    F_ERROR = 1 << 4, /* error and category */
    F_REASON = 1 << 5,
    F_REQUESTED_BY = 1 << 6,
    F_REF = 1 << 7, /* ref_instance, ref_execution, ref_event_id */
    F_FIRE_AT = 1 << 8,
    F_ATTEMPT = 1 << 9,
    F_FLAGS = 1 << 10,
    F_REF_INSTANCE = 1 << 11, /* ref_instance only */
    F_RUN_TIMES = 1 << 12     /* version 6: started_ms, finished_ms */
};

static const unsigned event_fields[DURO_EVENT_KIND_MAX + 1] = {
    [DURO_EVENT_ORCHESTRATION_STARTED] = F_NAME | F_VERSION | F_PAYLOAD | F_REF,
    [DURO_EVENT_ORCHESTRATION_COMPLETED] = F_PAYLOAD,
    [DURO_EVENT_ORCHESTRATION_FAILED] = F_ERROR,
    [DURO_EVENT_CONTINUED_AS_NEW] = F_PAYLOAD,
    [DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED] =
        F_REASON | F_REQUESTED_BY | F_FLAGS,
    [DURO_EVENT_ORCHESTRATION_CANCELLED] = F_REASON,
    [DURO_EVENT_ACTIVITY_SCHEDULED] = F_NAME | F_PAYLOAD | F_ATTEMPT,
    [DURO_EVENT_ACTIVITY_COMPLETED] = F_SOURCE | F_PAYLOAD | F_RUN_TIMES,
    [DURO_EVENT_ACTIVITY_FAILED] = F_SOURCE | F_ERROR | F_RUN_TIMES,
    [DURO_EVENT_ACTIVITY_CANCEL_REQUESTED] = F_SOURCE | F_REASON,
    [DURO_EVENT_TIMER_CREATED] = F_FIRE_AT | F_FLAGS,
    [DURO_EVENT_TIMER_FIRED] = F_SOURCE | F_FIRE_AT,
    [DURO_EVENT_EVENT_SUBSCRIBED] = F_NAME,
    [DURO_EVENT_EVENT_RAISED] = F_NAME | F_PAYLOAD,
    [DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED] =
        F_NAME | F_VERSION | F_REF_INSTANCE | F_PAYLOAD | F_FLAGS,
    [DURO_EVENT_SUB_ORCHESTRATION_COMPLETED] = F_SOURCE | F_PAYLOAD,
    [DURO_EVENT_SUB_ORCHESTRATION_FAILED] = F_SOURCE | F_ERROR,
    [DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED] = F_SOURCE | F_REASON,
    /* version 5 */
    [DURO_EVENT_ORCHESTRATION_TERMINATED] = F_REASON | F_REQUESTED_BY,
    [DURO_EVENT_EXECUTION_SUSPENDED] = F_REASON | F_REQUESTED_BY,
    [DURO_EVENT_EXECUTION_RESUMED] = F_REASON | F_REQUESTED_BY,
    [DURO_EVENT_PATCH_MARKER] = F_NAME,
    /* version 13 */
    [DURO_EVENT_EXECUTION_RESET] = F_REASON | F_REQUESTED_BY | F_REF | F_FLAGS,
};

/* Strings live in a static table so expected events outlive the call. */
static char field_text[DURO_EVENT_KIND_MAX + 1][8][32];

static duro_event full_event(int kind)
{
    unsigned f = event_fields[kind];
    char(*t)[32] = field_text[kind];
    duro_event e = event((uint64_t)kind, (duro_event_kind)kind);
    e.timestamp_ms = 1700000000000LL + kind;
    for (int i = 0; i < 8; i++)
        snprintf(t[i], 32, "k%d-f%d", kind, i);
    if (f & F_SOURCE)
        e.source_event_id = (uint64_t)kind - 1;
    if (f & F_NAME)
        e.name = t[0];
    if (f & F_VERSION)
        e.version = t[1];
    if (f & F_PAYLOAD)
        e.payload = t[2];
    if (f & F_ERROR) {
        e.error = t[3];
        e.category = DURO_CATEGORY_APPLICATION + kind % 5;
    }
    if (f & F_REASON)
        e.reason = t[4];
    if (f & F_REQUESTED_BY)
        e.requested_by = t[5];
    if (f & (F_REF | F_REF_INSTANCE))
        e.ref_instance = t[6];
    if (f & F_REF) {
        e.ref_execution = 3;
        e.ref_event_id = 7;
    }
    if (f & F_FIRE_AT)
        e.fire_at_ms = 1800000000000LL + kind;
    if (f & F_ATTEMPT)
        e.attempt = 4;
    if (f & F_FLAGS)
        e.flags = kind == DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED
                      ? DURO_CANCEL_OBSERVED
                  : kind == DURO_EVENT_TIMER_CREATED
                      ? DURO_TIMER_CLEANUP_DEADLINE
                      : DURO_START_DETACHED;
    if (f & F_RUN_TIMES) {
        e.started_ms = 1600000000000LL + kind;
        e.finished_ms = 1600000000500LL + kind;
    }
    return e;
}

static void check_event(const duro_event *got, const duro_event *want)
{
    CHECK_EQ(got->event_id, want->event_id);
    CHECK_EQ(got->kind, want->kind);
    CHECK_EQ(got->source_event_id, want->source_event_id);
    CHECK_EQ(got->timestamp_ms, want->timestamp_ms);
    CHECK_STR(got->name, want->name);
    CHECK_STR(got->version, want->version);
    CHECK_STR(got->payload, want->payload);
    CHECK_STR(got->error, want->error);
    CHECK_EQ(got->category, want->category);
    CHECK_STR(got->reason, want->reason);
    CHECK_STR(got->requested_by, want->requested_by);
    CHECK_STR(got->ref_instance, want->ref_instance);
    CHECK_EQ(got->ref_execution, want->ref_execution);
    CHECK_EQ(got->ref_event_id, want->ref_event_id);
    CHECK_EQ(got->fire_at_ms, want->fire_at_ms);
    CHECK_EQ(got->attempt, want->attempt);
    CHECK_EQ(got->flags, want->flags);
    CHECK_EQ(got->started_ms, want->started_ms);
    CHECK_EQ(got->finished_ms, want->finished_ms);
}

PV_TEST(history_events_round_trip_every_field)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d[DURO_EVENT_KIND_MAX];
    for (int k = 1; k <= DURO_EVENT_KIND_MAX; k++)
        d[k - 1] = full_event(k);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, d, DURO_EVENT_KIND_MAX, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);

    duro_history *h = history(p, "x", 1);
    CHECK_STR(h->instance_id, "x");
    CHECK_EQ(h->count, DURO_EVENT_KIND_MAX);
    for (size_t i = 0; i < h->count; i++)
        check_event(&h->events[i], &d[i]);
    duro_history_free(h);
    duro_orch_item *b = poke(p, "x");
    CHECK_EQ(b->history_total, DURO_EVENT_KIND_MAX);
    CHECK_EQ(b->history_count, DURO_EVENT_KIND_MAX);
    for (size_t i = 0; i < b->history_count; i++)
        check_event(&b->history[i], &d[i]);
    duro_orch_item_free(b);
}

/* Which work-item fields a kind names (beyond kind and instance_id). */
enum {
    W_EXECUTION = 1 << 0,
    W_SOURCE = 1 << 1,
    W_NAME = 1 << 2,
    W_VERSION = 1 << 3,
    W_PAYLOAD = 1 << 4,
    W_ERROR = 1 << 5,  /* error and category */
    W_REASON = 1 << 6, /* reason and requested_by */
    W_PARENT = 1 << 7,
    W_FIRE_AT = 1 << 8,
    W_ATTEMPT = 1 << 9,
    W_FLAGS = 1 << 10,
    W_RUN_TIMES = 1 << 11 /* version 6: started_ms, finished_ms */
};

static const unsigned work_fields[DURO_WORK_KIND_MAX + 1] = {
    [DURO_WORK_START] = W_NAME | W_VERSION | W_PAYLOAD | W_PARENT | W_FLAGS,
    [DURO_WORK_ACTIVITY_COMPLETED] =
        W_EXECUTION | W_SOURCE | W_PAYLOAD | W_RUN_TIMES,
    [DURO_WORK_ACTIVITY_FAILED] =
        W_EXECUTION | W_SOURCE | W_ERROR | W_RUN_TIMES,
    [DURO_WORK_TIMER_FIRED] = W_EXECUTION | W_SOURCE | W_FIRE_AT,
    [DURO_WORK_EXTERNAL_EVENT] = W_NAME | W_PAYLOAD,
    [DURO_WORK_CHILD_COMPLETED] = W_EXECUTION | W_SOURCE | W_PAYLOAD,
    [DURO_WORK_CHILD_FAILED] = W_EXECUTION | W_SOURCE | W_ERROR,
    [DURO_WORK_CANCEL_INSTANCE] = W_REASON,
    [DURO_WORK_CONTINUE_AS_NEW] = W_EXECUTION | W_NAME | W_VERSION | W_PAYLOAD,
    [DURO_WORK_ACTIVITY_EXECUTE] =
        W_EXECUTION | W_SOURCE | W_NAME | W_PAYLOAD | W_ATTEMPT,
    /* version 5 */
    [DURO_WORK_TERMINATE_INSTANCE] = W_REASON,
    [DURO_WORK_SUSPEND_INSTANCE] = W_REASON,
    [DURO_WORK_RESUME_INSTANCE] = W_REASON,
};

static char work_text[DURO_WORK_KIND_MAX + 1][8][32];

static duro_work_item full_work(int kind, const char *instance)
{
    unsigned f = work_fields[kind];
    char(*t)[32] = work_text[kind];
    for (int i = 0; i < 8; i++)
        snprintf(t[i], 32, "w%d-f%d", kind, i);
    duro_work_item w = work((duro_work_kind)kind, instance);
    if (f & W_EXECUTION)
        w.execution_id = 1;
    if (f & W_SOURCE)
        w.source_id = 10 + (uint64_t)kind;
    if (f & W_NAME)
        w.name = t[0];
    if (f & W_VERSION)
        w.version = t[1];
    if (f & W_PAYLOAD)
        w.payload = t[2];
    if (f & W_ERROR) {
        w.error = t[3];
        w.category = DURO_CATEGORY_INFRASTRUCTURE;
    }
    if (f & W_REASON) {
        w.reason = t[4];
        w.requested_by = t[5];
    }
    if (f & W_PARENT) {
        w.parent_instance = t[6];
        w.parent_execution = 2;
        w.parent_event_id = 9;
    }
    if (f & W_FIRE_AT)
        w.fire_at_ms = 1800000000000LL + kind;
    if (f & W_ATTEMPT)
        w.attempt = 3;
    if (f & W_FLAGS)
        w.flags = DURO_START_DETACHED;
    if (f & W_RUN_TIMES) {
        w.started_ms = 1600000000000LL + kind;
        w.finished_ms = 1600000000700LL + kind;
    }
    return w;
}

/* Compares every field; execution_id only where the kind names it (START
 * runs execution 1 and external events and cancels are routed to the
 * current execution, so a provider may fill it in). */
static void check_work(const duro_work_item *got, const duro_work_item *want)
{
    CHECK_EQ(got->kind, want->kind);
    CHECK_STR(got->instance_id, want->instance_id);
    if (work_fields[want->kind] & W_EXECUTION)
        CHECK_EQ(got->execution_id, want->execution_id);
    CHECK_EQ(got->source_id, want->source_id);
    CHECK_STR(got->name, want->name);
    CHECK_STR(got->version, want->version);
    CHECK_STR(got->payload, want->payload);
    CHECK_STR(got->error, want->error);
    CHECK_EQ(got->category, want->category);
    CHECK_STR(got->reason, want->reason);
    CHECK_STR(got->requested_by, want->requested_by);
    CHECK_STR(got->parent_instance, want->parent_instance);
    CHECK_EQ(got->parent_execution, want->parent_execution);
    CHECK_EQ(got->parent_event_id, want->parent_event_id);
    CHECK_EQ(got->fire_at_ms, want->fire_at_ms);
    CHECK_EQ(got->attempt, want->attempt);
    CHECK_EQ(got->flags, want->flags);
    CHECK_EQ(got->started_ms, want->started_ms);
    CHECK_EQ(got->finished_ms, want->finished_ms);
}

PV_TEST(work_items_round_trip_every_field)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    begin(p, "y", 0);
    /* Through enqueue_for_orchestrator: every orchestrator kind but START
     * to x, START to a new instance. */
    duro_work_item want[DURO_WORK_CONTINUE_AS_NEW + 1];
    for (int k = DURO_WORK_ACTIVITY_COMPLETED; k <= DURO_WORK_CONTINUE_AS_NEW;
         k++) {
        want[k] = full_work(k, "x");
        enqueue(p, &want[k], 0);
    }
    want[DURO_WORK_START] = full_work(DURO_WORK_START, "kid");
    enqueue(p, &want[DURO_WORK_START], 0);
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, DURO_WORK_CONTINUE_AS_NEW - 1);
    for (size_t i = 0; i < a->message_count; i++)
        check_work(&a->messages[i], &want[i + DURO_WORK_ACTIVITY_COMPLETED]);
    duro_orch_item *kid = fetch_orch_expect(p, "kid", LOCK_LONG);
    CHECK_EQ(kid->message_count, 1);
    check_work(&kid->messages[0], &want[DURO_WORK_START]);
    duro_orch_item_free(kid);

    /* Through ack_orchestration_item: the same to y, START to "kid2", and
     * an activity to the worker queue. */
    duro_outbound out[DURO_WORK_CONTINUE_AS_NEW];
    memset(out, 0, sizeof(out));
    for (int k = DURO_WORK_ACTIVITY_COMPLETED; k <= DURO_WORK_CONTINUE_AS_NEW;
         k++) {
        want[k].instance_id = "y";
        out[k - DURO_WORK_ACTIVITY_COMPLETED].item = want[k];
    }
    want[DURO_WORK_START].instance_id = "kid2";
    out[DURO_WORK_CONTINUE_AS_NEW - 1].item = want[DURO_WORK_START];
    duro_work_item act = full_work(DURO_WORK_ACTIVITY_EXECUTE, "x");
    duro_event d[2] = {event(2, DURO_EVENT_EVENT_RAISED),
                       event(3, DURO_EVENT_ACTIVITY_SCHEDULED)};
    duro_orch_ack ak = ack_of(1, d, 2, NULL);
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = DURO_WORK_CONTINUE_AS_NEW;
    ak.worker_items = &act;
    ak.worker_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    duro_orch_item *b = fetch_orch_expect(p, "y", LOCK_LONG);
    CHECK_EQ(b->message_count, DURO_WORK_CONTINUE_AS_NEW - 1);
    for (size_t i = 0; i < b->message_count; i++)
        check_work(&b->messages[i], &want[i + DURO_WORK_ACTIVITY_COMPLETED]);
    duro_orch_item_free(b);
    kid = fetch_orch_expect(p, "kid2", LOCK_LONG);
    check_work(&kid->messages[0], &want[DURO_WORK_START]);
    duro_orch_item_free(kid);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    check_work(&w->item, &act);
    CHECK_EQ(w->attempt, 1); /* the fetch count, not the retry attempt */

    /* Through ack_work_item. */
    duro_work_item failed = full_work(DURO_WORK_ACTIVITY_FAILED, "x");
    duro_error e;
    CHECK_PRC(p->ack_work_item(p, w->lock_token, &failed, &e), DURO_OK, &e);
    duro_worker_item_free(w);
    duro_orch_item *c = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(c->message_count, 1);
    check_work(&c->messages[0], &failed);
    duro_orch_item_free(c);
}

/* Version 6: the times at which the worker ran an activity go from its
 * completion (ack_work_item, ack_and_fetch_work_item, and a client's
 * enqueue) through the fetched messages into history, where a turn's
 * events keep them through one event and many per ack, read_history and a
 * fetch's history; 0 (unknown) stays 0. */
PV_TEST(activity_run_times_round_trip_into_history)
{
    duro_provider *p = pv_open();
    CHECK_MSG(p->version >= 6, "provider '%s' version %d is below 6", p->name,
              p->version);
    begin(p, "x", 5); /* activities 2..6 */
    duro_error e;
    enum { N = 5 };
    const int64_t t0 = 1700000000123LL;
    /* per activity id 2..6: started, finished (0, 0: unknown) */
    const int64_t times[N][2] = {{t0, t0 + 250},
                                 {t0 + 10, t0 + 20},
                                 {0, 0},
                                 {t0 + 30, t0 + 31},
                                 {t0 + 40, t0 + 9000}};
    duro_work_item done[N];
    for (int i = 0; i < N; i++) {
        done[i] = work(i % 2 ? DURO_WORK_ACTIVITY_FAILED
                             : DURO_WORK_ACTIVITY_COMPLETED,
                       "x");
        done[i].execution_id = 1;
        done[i].source_id = (uint64_t)i + 2;
        if (i % 2) {
            done[i].error = "boom";
            done[i].category = DURO_CATEGORY_APPLICATION;
        } else {
            done[i].payload = "\"ok\"";
        }
        done[i].started_ms = times[i][0];
        done[i].finished_ms = times[i][1];
    }
    /* 2 by ack_work_item, 3 and 4 by ack_and_fetch_work_item, 5 by
     * ack_work_item, 6 by a client's enqueue (its row stays) */
    duro_worker_item *w = fetch_work(p, LOCK_LONG), *next = NULL;
    CHECK(w != NULL);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(w->item.source_id, (uint64_t)i + 2);
        if (i == 1 || i == 2) {
            require_v2(p);
            CHECK_PRC(p->ack_and_fetch_work_item(p, w->lock_token, &done[i],
                                                 LOCK_LONG, &next, &e),
                      DURO_OK, &e);
        } else {
            CHECK_PRC(p->ack_work_item(p, w->lock_token, &done[i], &e), DURO_OK,
                      &e);
            next = i < 3 ? fetch_work(p, LOCK_LONG) : NULL;
        }
        duro_worker_item_free(w);
        w = next;
        next = NULL;
    }
    duro_worker_item_free(w);
    enqueue(p, &done[4], 0);

    duro_orch_item *item = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(item->message_count, N);
    duro_event d[N];
    for (size_t i = 0; i < item->message_count && i < N; i++) {
        const duro_work_item *m = &item->messages[i];
        CHECK_EQ(m->source_id, i + 2);
        CHECK_EQ(m->started_ms, times[i][0]);
        CHECK_EQ(m->finished_ms, times[i][1]);
        d[i] = event(item->history_total + 1 + i,
                     m->kind == DURO_WORK_ACTIVITY_FAILED
                         ? DURO_EVENT_ACTIVITY_FAILED
                         : DURO_EVENT_ACTIVITY_COMPLETED);
        d[i].source_event_id = m->source_id;
        /* the expected events outlive the item: strings from done[] */
        d[i].payload = done[i].payload;
        d[i].error = done[i].error;
        d[i].category = m->category;
        d[i].started_ms = m->started_ms;
        d[i].finished_ms = m->finished_ms;
    }
    /* the first four in one ack (many events), the last alone (one) */
    duro_orch_ack a = ack_of(1, d, N - 1, NULL);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    item = poke(p, "x");
    a = ack_of(1, &d[N - 1], 1, NULL);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);

    duro_history *h = history(p, "x", 1);
    CHECK_EQ(h->count, 1 + 5 + N);
    for (size_t i = 0; i < h->count; i++) {
        const duro_event *ev = &h->events[i];
        int64_t want_started = 0, want_finished = 0;
        if (i >= 6) {
            check_event(ev, &d[i - 6]);
            want_started = times[i - 6][0];
            want_finished = times[i - 6][1];
        }
        CHECK_EQ(ev->started_ms, want_started);
        CHECK_EQ(ev->finished_ms, want_finished);
    }
    duro_history_free(h);
    /* a fetch's history carries them too; the new message has none */
    item = poke(p, "x");
    CHECK_EQ(item->history_count, 1 + 5 + N);
    for (size_t i = 6; i < item->history_count; i++)
        check_event(&item->history[i], &d[i - 6]);
    CHECK_EQ(item->messages[0].started_ms, 0);
    CHECK_EQ(item->messages[0].finished_ms, 0);
    duro_orch_item_free(item);
}

typedef struct cache_probe {
    uint64_t answer;
    int calls;
    char instance[64];
    uint64_t execution;
} cache_probe;

static uint64_t probe_cached_events(void *user, const char *instance_id,
                                    uint64_t execution_id)
{
    cache_probe *c = user;
    c->calls++;
    snprintf(c->instance, sizeof(c->instance), "%s",
             instance_id ? instance_id : "(null)");
    c->execution = execution_id;
    return c->answer;
}

static duro_orch_item *fetch_cached(duro_provider *p, cache_probe *probe,
                                    uint64_t answer)
{
    duro_history_cache cache = {probe_cached_events, probe};
    memset(probe, 0, sizeof(*probe));
    probe->answer = answer;
    duro_error e;
    duro_orch_item *item = NULL;
    CHECK_PRC(p->fetch_orchestration_item(p, LOCK_LONG, &cache, &item, &e),
              DURO_OK, &e);
    CHECK(item != NULL);
    CHECK_EQ(probe->calls, 1);
    CHECK_STR(probe->instance, item->instance_id);
    CHECK_EQ(probe->execution, item->execution_id);
    return item;
}

PV_TEST(history_cache_skips_events_the_caller_holds)
{
    duro_provider *p = pv_open();
    begin(p, "x", 4); /* events 1..5 */
    raise_event(p, "x", "\"e\"", 0);
    cache_probe probe;
    uint64_t answers[] = {3, 0, 5};
    for (size_t i = 0; i < 3; i++) {
        uint64_t k = answers[i];
        duro_orch_item *a = fetch_cached(p, &probe, k);
        CHECK_STR(a->instance_id, "x");
        CHECK_EQ(probe.execution, 1);
        CHECK_EQ(a->history_total, 5);
        CHECK_EQ(a->history_offset, k);
        CHECK_EQ(a->history_count, 5 - k);
        for (size_t j = 0; j < a->history_count; j++)
            CHECK_EQ(a->history[j].event_id, k + 1 + j);
        abandon_orch(p, a, 0);
        duro_orch_item_free(a);
    }
    /* The cache follows the execution: after continue-as-new it is asked
     * about execution 2. */
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d = event(6, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    continue_as_new(p, "x", 2);
    raise_event(p, "x", "\"e2\"", 0);
    a = fetch_cached(p, &probe, 1);
    CHECK_EQ(probe.execution, 2);
    CHECK_EQ(a->execution_id, 2);
    CHECK_EQ(a->history_total, 1);
    CHECK_EQ(a->history_offset, 1);
    CHECK_EQ(a->history_count, 0);
    duro_orch_item_free(a);
}

PV_TEST(history_cap_fails_with_history_limit_and_changes_nothing)
{
    duro_provider *p = pv_open_with_max_history(10);
    begin(p, "x", 7); /* 8 events */
    begin(p, "y", 0);
    duro_error e;
    duro_orch_item *a = poke(p, "x");
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_event d[3] = {event(9, DURO_EVENT_EVENT_RAISED),
                       event(10, DURO_EVENT_ACTIVITY_SCHEDULED),
                       event(11, DURO_EVENT_ACTIVITY_SCHEDULED)};
    duro_work_item w[2] = {activity("x", 1, 10), activity("x", 1, 11)};
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_EXTERNAL_EVENT, "y");
    out.item.name = "poke";
    duro_activity_ref r = ref("x", 1, 2);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.custom_status = "over";
    m.custom_status_set = 1;
    duro_orch_ack ak = ack_of(1, d, 3, &m);
    ak.worker_items = w;
    ak.worker_item_count = 2;
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ak.cancelled_activities = &r;
    ak.cancelled_activity_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_HISTORY_LIMIT, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* Up to the cap is fine. */
    ak.history_delta_count = 2;
    ak.worker_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    CHECK_EQ(history_len(p, "x", 1), 10);
    /* One past it is not. */
    duro_orch_item *b = poke(p, "x");
    pv_snapshot_take(p, &s);
    duro_event one = event(11, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack ak2 = ack_of(1, &one, 1, NULL);
    CHECK_PFAIL(p->ack_orchestration_item(p, b->lock_token, &ak2, &e),
                DURO_HISTORY_LIMIT, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    CHECK_EQ(history_len(p, "x", 1), 10);
    duro_orch_item_free(b);
}

/* ========================================================================
 * Instances. */

PV_TEST(enqueued_start_creates_a_pending_instance)
{
    duro_provider *p = pv_open();
    int64_t before = duro_now_ms();
    duro_work_item w = work(DURO_WORK_START, "x");
    w.name = "orch";
    w.version = "2.0";
    w.payload = "\"in\"";
    enqueue(p, &w, 0);
    int64_t after = duro_now_ms();
    duro_instance_list *l = get(p, "x");
    const duro_instance_info *in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_PENDING);
    CHECK_EQ(in->execution_id, 0);
    CHECK_STR(in->name, "orch");
    CHECK_STR(in->version, "2.0");
    CHECK_MSG(in->created_ms >= before && in->created_ms <= after,
              "created_ms %lld outside the enqueue call [%lld, %lld]",
              (long long)in->created_ms, (long long)before, (long long)after);
    CHECK(in->updated_ms >= in->created_ms);
    CHECK_STR(in->output, NULL);
    CHECK_STR(in->error, NULL);
    CHECK_STR(in->custom_status, NULL);
    CHECK_STR(in->parent_instance, NULL);
    CHECK_EQ(in->history_count, 0);
    duro_instance_list_free(l);
    CHECK_EQ(latest(p, "x"), 0);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->status, DURO_STATUS_PENDING);
    CHECK_EQ(a->execution_id, 0);
    CHECK_STR(a->name, "orch");
    CHECK_STR(a->version, "2.0");
    CHECK_EQ(a->history_total, 0);
    CHECK_EQ(a->history_count, 0);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_START);
    CHECK_STR(a->messages[0].payload, "\"in\"");
    duro_orch_item_free(a);
}

PV_TEST(duplicate_start_fails_and_idempotent_start_changes_nothing)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_work_item w = work(DURO_WORK_START, "x");
    w.name = "orch";
    w.payload = "\"other input\"";
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_ALREADY_EXISTS,
                0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    w.flags = DURO_START_IDEMPOTENT;
    CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    /* Still a duplicate once the instance has finished. */
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ORCHESTRATION_COMPLETED)};
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    duro_orch_ack ak = ack_of(1, d, 2, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    pv_snapshot_free(&s);
    pv_snapshot_take(p, &s);
    w.flags = 0;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_ALREADY_EXISTS,
                0, &e);
    w.flags = DURO_START_IDEMPOTENT;
    CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

/* An idempotent START compares the orchestration name (DBOS's rule: an id
 * reused for other code is a conflict), never the version, input or
 * status. */
PV_TEST(idempotent_start_of_another_name_fails_already_exists)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_work_item w = work(DURO_WORK_START, "x");
    w.name = "other";
    w.flags = DURO_START_IDEMPOTENT;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_ALREADY_EXISTS,
                0, &e);
    CHECK_MSG(strstr(e.message, "instance 'x' already exists as orchestration "
                                "'orch' (an idempotent start of 'other' is "
                                "refused)") != NULL,
              "message: %s", e.message);
    PV_EXPECT_UNCHANGED(p, &s);
    /* the same name with another version and input, delayed: nothing */
    w.name = "orch";
    w.version = "9.9";
    w.payload = "\"other input\"";
    CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 1000, &e), DURO_OK, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    /* the same once the instance has finished */
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ORCHESTRATION_FAILED)};
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    duro_orch_ack ak = ack_of(1, d, 2, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    pv_snapshot_free(&s);
    pv_snapshot_take(p, &s);
    CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
    w.name = "Orch"; /* names are compared exactly */
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_ALREADY_EXISTS,
                0, &e);
    CHECK_MSG(strstr(e.message, "'orch'") != NULL &&
                  strstr(e.message, "'Orch'") != NULL,
              "message: %s", e.message);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(start_in_ack_for_existing_instance_sends_child_failed_to_parent)
{
    duro_provider *p = pv_open();
    begin(p, "parent", 0);
    start_named(p, "child", "\"original\"");
    start_named(p, "detached", "\"original\"");
    duro_orch_item *a = poke(p, "parent");
    duro_event d[4] = {event(2, DURO_EVENT_EVENT_RAISED),
                       event(3, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED),
                       event(4, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED),
                       event(5, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED)};
    const char *kids[3] = {"child", "detached", "newkid"};
    duro_outbound out[3];
    memset(out, 0, sizeof(out));
    for (int i = 0; i < 3; i++) {
        d[i + 1].name = "orch";
        d[i + 1].ref_instance = kids[i];
        out[i].item = work(DURO_WORK_START, kids[i]);
        out[i].item.name = "orch";
        out[i].item.payload = "\"from parent\"";
        out[i].item.parent_instance = "parent";
        out[i].item.parent_execution = 1;
        out[i].item.parent_event_id = (uint64_t)i + 3;
    }
    out[1].item.flags = DURO_START_DETACHED;
    duro_orch_ack ak = ack_of(1, d, 4, NULL);
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = 3;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);

    /* The existing instances are untouched. */
    for (int i = 0; i < 2; i++) {
        duro_instance_list *l = get(p, kids[i]);
        CHECK_EQ(l->items[0].status, DURO_STATUS_PENDING);
        CHECK_STR(l->items[0].parent_instance, NULL);
        duro_instance_list_free(l);
        CHECK_EQ(count(p, ORCH, kids[i]), 1);
    }
    /* The new one exists, pending, with the parent link on its START. */
    duro_instance_list *l = get(p, "newkid");
    CHECK_EQ(l->items[0].status, DURO_STATUS_PENDING);
    duro_instance_list_free(l);
    /* Exactly one CHILD_FAILED went to the parent (none for detached). */
    CHECK_EQ(count(p, ORCH, "parent"), 1);
    duro_orch_item *b = fetch_orch_for(p, "parent", LOCK_LONG);
    CHECK_EQ(b->message_count, 1);
    const duro_work_item *f = &b->messages[0];
    CHECK_EQ(f->kind, DURO_WORK_CHILD_FAILED);
    CHECK_EQ(f->execution_id, 1);
    CHECK_EQ(f->source_id, 3);
    CHECK_EQ(f->category, DURO_CATEGORY_CONFIGURATION);
    CHECK(f->error != NULL && f->error[0] != '\0');
    duro_orch_item_free(b);
    for (int i = 0; i < 3; i++) {
        duro_orch_item *c = fetch_orch_for(p, kids[i], LOCK_LONG);
        CHECK_EQ(c->message_count, 1);
        CHECK_EQ(c->messages[0].kind, DURO_WORK_START);
        CHECK_STR(c->messages[0].payload,
                  i < 2 ? "\"original\"" : "\"from parent\"");
        if (i == 2) {
            CHECK_STR(c->messages[0].parent_instance, "parent");
            CHECK_EQ(c->messages[0].parent_execution, 1);
            CHECK_EQ(c->messages[0].parent_event_id, 5);
        }
        duro_orch_item_free(c);
    }
}

/* One turn of `id` recording its messages, writing `m` (NULL: none). */
static void turn_meta(duro_provider *p, const char *id,
                      const duro_instance_meta *m)
{
    duro_orch_item *a = poke(p, id);
    duro_event *d = events_for(a);
    duro_orch_ack ak = ack_of(a->execution_id, d, a->message_count, m);
    ack(p, a->lock_token, &ak);
    free(d);
    duro_orch_item_free(a);
}

PV_TEST(ack_meta_is_visible_through_get_instance)
{
    duro_provider *p = pv_open();
    start(p, "x");
    duro_instance_list *l = get(p, "x");
    int64_t created = l->items[0].created_ms;
    int64_t last = l->items[0].updated_ms;
    duro_instance_list_free(l);

    /* First turn: name, version, parent link, custom status. */
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.name = "orch";
    m.version = "3.1";
    m.custom_status = "cs1";
    m.custom_status_set = 1;
    m.parent_instance = "pp";
    m.parent_execution = 2;
    m.parent_event_id = 9;
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    WAIT_UNTIL(duro_now_ms() > last, DEADLINE_MS);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    l = get(p, "x");
    const duro_instance_info *in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_EQ(in->execution_id, 1);
    CHECK_STR(in->name, "orch");
    CHECK_STR(in->version, "3.1");
    CHECK_STR(in->custom_status, "cs1");
    CHECK_STR(in->parent_instance, "pp");
    CHECK_EQ(in->history_count, 1);
    CHECK_EQ(in->created_ms, created);
    CHECK_MSG(in->updated_ms > last,
              "updated_ms %lld did not advance past %lld",
              (long long)in->updated_ms, (long long)last);
    last = in->updated_ms;
    duro_instance_list_free(l);

    /* The next fetch carries the same metadata. */
    a = poke(p, "x");
    CHECK_EQ(a->status, DURO_STATUS_RUNNING);
    CHECK_STR(a->name, "orch");
    CHECK_STR(a->version, "3.1");
    CHECK_STR(a->custom_status, "cs1");
    CHECK_STR(a->parent_instance, "pp");
    CHECK_EQ(a->parent_execution, 2);
    CHECK_EQ(a->parent_event_id, 9);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);

    /* custom_status_set 0 keeps it; a later turn without a name keeps the
     * name; NULL meta leaves everything. */
    duro_instance_meta keep = meta(DURO_STATUS_RUNNING);
    keep.custom_status = "ignored";
    turn_meta(p, "x", &keep);
    turn_meta(p, "x", NULL);
    l = get(p, "x");
    in = &l->items[0];
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_STR(in->custom_status, "cs1");
    CHECK_STR(in->name, "orch");
    CHECK_STR(in->version, "3.1");
    CHECK_EQ(in->history_count, 4);
    CHECK(in->updated_ms >= last);
    last = in->updated_ms;
    duro_instance_list_free(l);

    /* Set to NULL clears it. */
    duro_instance_meta clear = meta(DURO_STATUS_RUNNING);
    clear.custom_status_set = 1;
    turn_meta(p, "x", &clear);
    l = get(p, "x");
    CHECK_STR(l->items[0].custom_status, NULL);
    CHECK(l->items[0].updated_ms >= last);
    duro_instance_list_free(l);

    /* Terminal states: completed with output, failed and cancelled with
     * error and category. */
    duro_instance_meta done = meta(DURO_STATUS_COMPLETED);
    done.output = "\"out\"";
    turn_meta(p, "x", &done);
    begin(p, "y", 0);
    duro_instance_meta failed = meta(DURO_STATUS_FAILED);
    failed.error = "boom";
    failed.category = DURO_CATEGORY_APPLICATION;
    turn_meta(p, "y", &failed);
    begin(p, "z", 0);
    duro_instance_meta cancelled = meta(DURO_STATUS_CANCELLED);
    cancelled.error = "stop";
    cancelled.category = DURO_CATEGORY_CANCELLED;
    turn_meta(p, "z", &cancelled);
    l = get(p, "x");
    CHECK_EQ(l->items[0].status, DURO_STATUS_COMPLETED);
    CHECK_STR(l->items[0].output, "\"out\"");
    CHECK_STR(l->items[0].error, NULL);
    CHECK(l->items[0].updated_ms >= last);
    CHECK(l->items[0].updated_ms >= l->items[0].created_ms);
    duro_instance_list_free(l);
    l = get(p, "y");
    CHECK_EQ(l->items[0].status, DURO_STATUS_FAILED);
    CHECK_STR(l->items[0].error, "boom");
    CHECK_EQ(l->items[0].category, DURO_CATEGORY_APPLICATION);
    duro_instance_list_free(l);
    l = get(p, "z");
    CHECK_EQ(l->items[0].status, DURO_STATUS_CANCELLED);
    CHECK_STR(l->items[0].error, "stop");
    CHECK_EQ(l->items[0].category, DURO_CATEGORY_CANCELLED);
    duro_instance_list_free(l);
}

static void list_ids(duro_provider *p, const duro_instance_filter *f, char *out,
                     size_t size)
{
    duro_error e;
    duro_instance_list *l = NULL;
    CHECK_PRC(p->list_instances(p, f, &l, &e), DURO_OK, &e);
    out[0] = '\0';
    for (size_t i = 0; i < l->count; i++) {
        if (i > 0)
            CHECK_MSG(strcmp(l->items[i - 1].instance_id,
                             l->items[i].instance_id) < 0,
                      "list not ordered by id: '%s' before '%s'",
                      l->items[i - 1].instance_id, l->items[i].instance_id);
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%s", i ? "," : "",
                 l->items[i].instance_id + 3);
    }
    duro_instance_list_free(l);
}

#define CHECK_LIST(p, f, expected)                                             \
    do {                                                                       \
        char ids_[512];                                                        \
        list_ids(p, f, ids_, sizeof(ids_));                                    \
        CHECK_STR(ids_, expected);                                             \
    } while (0)

PV_TEST(list_instances_filters_orders_and_pages)
{
    duro_provider *p = pv_open();
    /* li-00 .. li-11, created out of id order in two batches; even ids are
     * "alpha", odd "beta"; status by id % 4: pending, running, completed,
     * failed. */
    const int order[12] = {7, 2, 11, 0, 5, 9, 1, 10, 3, 8, 6, 4};
    int64_t first_batch_max = 0, second_batch_min = INT64_MAX;
    for (int n = 0; n < 12; n++) {
        int i = order[n];
        char id[16];
        snprintf(id, sizeof(id), "li-%02d", i);
        if (n == 6)
            WAIT_UNTIL(duro_now_ms() > first_batch_max, DEADLINE_MS);
        duro_work_item w = work(DURO_WORK_START, id);
        w.name = i % 2 == 0 ? "alpha" : "beta";
        enqueue(p, &w, 0);
        duro_instance_list *l = get(p, id);
        int64_t c = l->items[0].created_ms;
        duro_instance_list_free(l);
        if (n < 6 && c > first_batch_max)
            first_batch_max = c;
        if (n >= 6 && c < second_batch_min)
            second_batch_min = c;
        if (i % 4 == 0)
            continue;
        static const int status[4] = {
            0, DURO_STATUS_RUNNING, DURO_STATUS_COMPLETED, DURO_STATUS_FAILED};
        duro_orch_item *a = fetch_orch_for(p, id, LOCK_LONG);
        duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
        duro_instance_meta m = meta(status[i % 4]);
        m.name = w.name;
        duro_orch_ack ak = ack_of(1, &d, 1, &m);
        ack(p, a->lock_token, &ak);
        duro_orch_item_free(a);
    }
    CHECK(second_batch_min > first_batch_max);
    duro_instance_filter f;
    memset(&f, 0, sizeof(f));
    CHECK_LIST(p, &f, "00,01,02,03,04,05,06,07,08,09,10,11");
    f.status_mask = 1u << DURO_STATUS_RUNNING;
    CHECK_LIST(p, &f, "01,05,09");
    f.status_mask = (1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_FAILED);
    CHECK_LIST(p, &f, "00,03,04,07,08,11");
    f.status_mask = 0;
    f.name = "alpha";
    CHECK_LIST(p, &f, "00,02,04,06,08,10");
    f.status_mask = 1u << DURO_STATUS_COMPLETED;
    CHECK_LIST(p, &f, "02,06,10");
    f.status_mask = 0;
    f.name = "nope";
    CHECK_LIST(p, &f, "");
    f.name = NULL;
    /* created_after is inclusive, created_before exclusive. */
    f.created_after_ms = second_batch_min;
    CHECK_LIST(p, &f, "01,03,04,06,08,10");
    f.created_after_ms = 0;
    f.created_before_ms = second_batch_min;
    CHECK_LIST(p, &f, "00,02,05,07,09,11");
    f.created_before_ms = 0;
    f.limit = 5;
    CHECK_LIST(p, &f, "00,01,02,03,04");
    /* Paging by after_instance visits everything once. */
    f.after_instance = "li-04";
    CHECK_LIST(p, &f, "05,06,07,08,09");
    f.after_instance = "li-09";
    CHECK_LIST(p, &f, "10,11");
    f.after_instance = "li-11";
    CHECK_LIST(p, &f, "");
    f.limit = 0;
    f.after_instance = "li-05";
    CHECK_LIST(p, &f, "06,07,08,09,10,11");
    /* Filters combine with paging. */
    f.name = "beta";
    f.limit = 2;
    CHECK_LIST(p, &f, "07,09");
    /* Each item carries its fields. */
    duro_error e;
    duro_instance_list *l = NULL;
    memset(&f, 0, sizeof(f));
    CHECK_PRC(p->list_instances(p, &f, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 12);
    for (size_t i = 0; i < l->count; i++) {
        static const int status[4] = {DURO_STATUS_PENDING, DURO_STATUS_RUNNING,
                                      DURO_STATUS_COMPLETED,
                                      DURO_STATUS_FAILED};
        CHECK_EQ(l->items[i].status, status[i % 4]);
        CHECK_STR(l->items[i].name, i % 2 == 0 ? "alpha" : "beta");
        CHECK_EQ(l->items[i].execution_id, i % 4 == 0 ? 0 : 1);
    }
    duro_instance_list_free(l);
}

/* A turn of `parent` that starts `child` (a START with the parent link);
 * returns the parent's scheduling event id. */
static uint64_t start_child(duro_provider *p, const char *parent,
                            const char *child)
{
    duro_orch_item *a = poke(p, parent);
    duro_event d[2] = {
        event(a->history_total + 1, DURO_EVENT_EVENT_RAISED),
        event(a->history_total + 2, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED)};
    d[1].ref_instance = child;
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_START, child);
    out.item.name = "orch";
    out.item.parent_instance = parent;
    out.item.parent_execution = a->execution_id;
    out.item.parent_event_id = d[1].event_id;
    duro_orch_ack ak = ack_of(a->execution_id, d, 2, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    return out.item.parent_event_id;
}

/* Starts `child` from a turn of `parent` and runs the child's first turn
 * (Running, parent link in its meta, one activity). */
static void begin_child(duro_provider *p, const char *parent, const char *child)
{
    uint64_t scheduled = start_child(p, parent, child);
    duro_orch_item *b = fetch_orch_for(p, child, LOCK_LONG);
    duro_event s[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ACTIVITY_SCHEDULED)};
    duro_work_item w = activity(child, 1, 2);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.name = "orch";
    m.parent_instance = parent;
    m.parent_execution = 1;
    m.parent_event_id = scheduled;
    duro_orch_ack ak2 = ack_of(1, s, 2, &m);
    ak2.worker_items = &w;
    ak2.worker_item_count = 1;
    ack(p, b->lock_token, &ak2);
    duro_orch_item_free(b);
}

static void finish(duro_provider *p, const char *id)
{
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    turn_meta(p, id, &m);
}

PV_TEST(delete_instance_cascades_and_refuses_running_without_force)
{
    duro_provider *p = pv_open();
    begin(p, "root", 1);
    begin_child(p, "root", "kid");
    begin_child(p, "kid", "grandkid");
    /* A child that has not run yet: linked only by its START. */
    start_child(p, "kid", "pending");
    begin(p, "other", 1);
    raise_event(p, "root", "\"queued\"", 0);
    raise_event(p, "grandkid", "\"queued\"", 60000);
    raise_event(p, "other", "\"queued\"", 0);
    CHECK_EQ(count(p, WORKER, NULL), 4);
    duro_error e;
    size_t deleted = 99;

    pv_snapshot s;
    pv_snapshot_take(p, &s);
    CHECK_PFAIL(p->delete_instance(p, "root", 0, &deleted, &e),
                DURO_INVALID_STATE, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* A finished root with a running descendant is still refused. */
    finish(p, "root");
    raise_event(p, "root", "\"queued\"", 0);
    pv_snapshot_take(p, &s);
    CHECK_PFAIL(p->delete_instance(p, "root", 0, &deleted, &e),
                DURO_INVALID_STATE, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);

    deleted = 99;
    CHECK_PRC(p->delete_instance(p, "root", 1, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 4);
    const char *gone[4] = {"root", "kid", "grandkid", "pending"};
    for (int i = 0; i < 4; i++) {
        expect_no_instance(p, gone[i]);
        CHECK_EQ(count(p, ORCH, gone[i]), 0);
        CHECK_EQ(count(p, WORKER, gone[i]), 0);
        duro_history *h = NULL;
        CHECK_PFAIL(p->read_history(p, gone[i], 1, &h, &e), DURO_NOT_FOUND, 0,
                    &e);
        duro_history_free(h);
    }
    /* The unrelated instance is intact. */
    duro_instance_list *l = get(p, "other");
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    CHECK_EQ(history_len(p, "other", 1), 2);
    CHECK_EQ(count(p, ORCH, NULL), 1);
    CHECK_EQ(count(p, WORKER, NULL), 1);
    CHECK_DRAIN(p, "other:0002");

    /* A finished tree goes without force. */
    begin(p, "t1", 0);
    begin_child(p, "t1", "t2");
    finish(p, "t2");
    finish(p, "t1");
    CHECK_PRC(p->delete_instance(p, "t1", 0, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 2);
    expect_no_instance(p, "t1");
    expect_no_instance(p, "t2");
    CHECK_PRC(p->delete_instance(p, "other", 1, NULL, &e), DURO_OK, &e);
    expect_no_instance(p, "other");
}

PV_TEST(prune_executions_keeps_the_last_k)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    for (uint64_t ex = 2; ex <= 5; ex++)
        continue_as_new(p, "x", ex);
    begin(p, "y", 0);
    continue_as_new(p, "y", 2);
    CHECK_EQ(latest(p, "x"), 5);
    duro_error e;
    size_t pruned = 99;
    CHECK_PRC(p->prune_executions(p, "x", 2, &pruned, &e), DURO_OK, &e);
    CHECK_EQ(pruned, 3);
    for (uint64_t ex = 1; ex <= 3; ex++) {
        duro_history *h = NULL;
        CHECK_PFAIL(p->read_history(p, "x", ex, &h, &e), DURO_NOT_FOUND, 0, &e);
        duro_history_free(h);
    }
    duro_history *h = history(p, "x", 4);
    CHECK_EQ(h->count, 3);
    CHECK_STR(h->events[0].payload, "in-4");
    duro_history_free(h);
    h = history(p, "x", 5);
    CHECK_EQ(h->count, 1);
    CHECK_STR(h->events[0].payload, "in-5");
    duro_history_free(h);
    CHECK_EQ(latest(p, "x"), 5);
    duro_instance_list *l = get(p, "x");
    CHECK_EQ(l->items[0].execution_id, 5);
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    /* keep_last 0 behaves as 1: only the current execution stays. */
    CHECK_PRC(p->prune_executions(p, "x", 0, &pruned, &e), DURO_OK, &e);
    CHECK_EQ(pruned, 1);
    CHECK_PFAIL(p->read_history(p, "x", 4, &h, &e), DURO_NOT_FOUND, 0, &e);
    CHECK_EQ(history_len(p, "x", 5), 1);
    CHECK_PRC(p->prune_executions(p, "x", 1, &pruned, &e), DURO_OK, &e);
    CHECK_EQ(pruned, 0);
    CHECK_PRC(p->prune_executions(p, "x", 1, NULL, &e), DURO_OK, &e);
    /* Other instances are untouched. */
    CHECK_EQ(history_len(p, "y", 1), 3);
    CHECK_EQ(history_len(p, "y", 2), 1);
}

/* ========================================================================
 * Bad input. */

PV_TEST(null_and_empty_ids_and_tokens_fail_invalid_and_change_nothing)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    raise_event(p, "x", "\"e\"", 0);
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    const char *bad[2] = {NULL, ""};
    for (int i = 0; i < 2; i++) {
        const char *id = bad[i];
        duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, id);
        w.name = "poke";
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0,
                    &e);
        w = work(DURO_WORK_START, id);
        w.name = "orch";
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0,
                    &e);
        duro_history *h = NULL;
        CHECK_PFAIL(p->read_history(p, id, 0, &h, &e), DURO_INVALID, 0, &e);
        duro_history_free(h);
        uint64_t ex;
        CHECK_PFAIL(p->latest_execution_id(p, id, &ex, &e), DURO_INVALID, 0,
                    &e);
        duro_instance_list *l = NULL;
        CHECK_PFAIL(p->get_instance(p, id, &l, &e), DURO_INVALID, 0, &e);
        duro_instance_list_free(l);
        CHECK_PFAIL(p->delete_instance(p, id, 1, NULL, &e), DURO_INVALID, 0,
                    &e);
        CHECK_PFAIL(p->prune_executions(p, id, 1, NULL, &e), DURO_INVALID, 0,
                    &e);
        /* A required name. */
        w = work(DURO_WORK_START, "new");
        w.name = id;
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0,
                    &e);
        w = work(DURO_WORK_EXTERNAL_EVENT, "x");
        w.name = id;
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0,
                    &e);
        /* Tokens. */
        const char *t = bad[i];
        duro_orch_ack ak = ack_of(1, NULL, 0, NULL);
        CHECK_PFAIL(p->ack_orchestration_item(p, t, &ak, &e), DURO_INVALID, 0,
                    &e);
        CHECK_PFAIL(p->abandon_orchestration_item(p, t, 0, &e), DURO_INVALID, 0,
                    &e);
        CHECK_PFAIL(p->renew_orchestration_item_lock(p, t, LOCK_LONG, &e),
                    DURO_INVALID, 0, &e);
        CHECK_PFAIL(p->ack_work_item(p, t, NULL, &e), DURO_INVALID, 0, &e);
        CHECK_PFAIL(p->abandon_work_item(p, t, 0, &e), DURO_INVALID, 0, &e);
        CHECK_PFAIL(p->renew_work_item_lock(p, t, LOCK_LONG, &e), DURO_INVALID,
                    0, &e);
    }
    uint64_t n;
    CHECK_PFAIL(p->count_messages(p, ORCH, "", &n, &e), DURO_INVALID, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);

    /* Inside an ack: bad ids in what it writes fail the whole ack, and the
     * lock stays with the caller. */
    duro_orch_item *a = fetch_orch_for(p, "x", LOCK_LONG);
    pv_snapshot_free(&s);
    pv_snapshot_take(p, &s);
    duro_event d = event(3, DURO_EVENT_EVENT_RAISED);
    for (int i = 0; i < 2; i++) {
        duro_work_item w = activity(bad[i], 1, 4);
        duro_orch_ack ak = ack_of(1, &d, 1, NULL);
        ak.worker_items = &w;
        ak.worker_item_count = 1;
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
        duro_outbound out;
        memset(&out, 0, sizeof(out));
        out.item = work(DURO_WORK_EXTERNAL_EVENT, bad[i]);
        out.item.name = "poke";
        ak = ack_of(1, &d, 1, NULL);
        ak.orchestrator_items = &out;
        ak.orchestrator_item_count = 1;
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
        duro_activity_ref r = ref(bad[i], 1, 2);
        ak = ack_of(1, &d, 1, NULL);
        ak.cancelled_activities = &r;
        ak.cancelled_activity_count = 1;
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
    }
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    CHECK_PRC(p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
              DURO_OK, &e);
    CHECK_EQ(history_len(p, "x", 1), 2);
    duro_orch_item_free(a);
}

PV_TEST(oversized_input_fails_too_large_and_changes_nothing)
{
    duro_provider *p = pv_open();
    size_t max = max_payload();
    char *big = repeat('p', max + 1);
    char *exact = repeat('q', max);
    char *long_id = repeat('i', 1025);
    char *max_id = repeat('j', 1024);
    CHECK(big && exact && long_id && max_id);
    begin(p, "x", 1);
    raise_event(p, "x", "\"e\"", 0);
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);

    duro_work_item w = work(DURO_WORK_EXTERNAL_EVENT, "x");
    w.name = "poke";
    w.payload = big;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    w = work(DURO_WORK_START, long_id);
    w.name = "orch";
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    w = work(DURO_WORK_START, "new");
    w.name = long_id;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    w = work(DURO_WORK_EXTERNAL_EVENT, "x");
    w.name = long_id;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    duro_history *h = NULL;
    CHECK_PFAIL(p->read_history(p, long_id, 0, &h, &e), DURO_TOO_LARGE, 0, &e);
    duro_history_free(h);
    duro_instance_list *l = NULL;
    CHECK_PFAIL(p->get_instance(p, long_id, &l, &e), DURO_TOO_LARGE, 0, &e);
    duro_instance_list_free(l);
    uint64_t n;
    CHECK_PFAIL(p->count_messages(p, ORCH, long_id, &n, &e), DURO_TOO_LARGE, 0,
                &e);
    PV_EXPECT_UNCHANGED(p, &s);

    /* Completions too large for the orchestrator queue: the row stays with
     * its holder. */
    duro_worker_item *wi = fetch_work(p, LOCK_LONG);
    CHECK(wi != NULL);
    pv_snapshot_free(&s);
    pv_snapshot_take(p, &s);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = 2;
    done.payload = big;
    CHECK_PFAIL(p->ack_work_item(p, wi->lock_token, &done, &e), DURO_TOO_LARGE,
                0, &e);
    duro_work_item failed = work(DURO_WORK_ACTIVITY_FAILED, "x");
    failed.execution_id = 1;
    failed.source_id = 2;
    failed.error = big;
    failed.category = DURO_CATEGORY_APPLICATION;
    CHECK_PFAIL(p->ack_work_item(p, wi->lock_token, &failed, &e),
                DURO_TOO_LARGE, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    CHECK_EQ(count(p, WORKER, "x"), 1);

    /* Turns writing something too large fail whole. */
    duro_orch_item *a = fetch_orch_for(p, "x", LOCK_LONG);
    pv_snapshot_free(&s);
    pv_snapshot_take(p, &s);
    duro_event d = event(3, DURO_EVENT_EVENT_RAISED);
    d.payload = big;
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_TOO_LARGE, 0, &e);
    d.payload = NULL;
    duro_instance_meta m = meta(DURO_STATUS_COMPLETED);
    m.output = big;
    ak = ack_of(1, &d, 1, &m);
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_TOO_LARGE, 0, &e);
    duro_work_item act = activity("x", 1, 4);
    act.payload = big;
    ak = ack_of(1, &d, 1, NULL);
    ak.worker_items = &act;
    ak.worker_item_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_TOO_LARGE, 0, &e);
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_EXTERNAL_EVENT, "x");
    out.item.name = "poke";
    out.item.payload = big;
    ak = ack_of(1, &d, 1, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_TOO_LARGE, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    CHECK_EQ(history_len(p, "x", 1), 2);

    /* The holders still hold; the maximum sizes themselves are accepted. */
    done.payload = exact;
    CHECK_PRC(p->ack_work_item(p, wi->lock_token, &done, &e), DURO_OK, &e);
    d.payload = exact;
    ak = ack_of(1, &d, 1, NULL);
    ack(p, a->lock_token, &ak);
    duro_history *hx = history(p, "x", 1);
    CHECK_EQ(hx->count, 3);
    CHECK(hx->events[2].payload != NULL &&
          strcmp(hx->events[2].payload, exact) == 0);
    duro_history_free(hx);
    w = work(DURO_WORK_START, max_id);
    w.name = max_id;
    w.payload = exact;
    enqueue(p, &w, 0);
    duro_orch_item *b = fetch_orch_for(p, max_id, LOCK_LONG);
    CHECK(b->messages[0].payload != NULL &&
          strcmp(b->messages[0].payload, exact) == 0);
    CHECK_STR(b->messages[0].name, max_id);
    duro_orch_item_free(b);
    duro_orch_item_free(a);
    duro_worker_item_free(wi);
    free(big);
    free(exact);
    free(long_id);
    free(max_id);
}

/* ========================================================================
 * Wake-up. A waiter thread blocks with a long max wait (WAIT_MAX); the
 * main thread checks it returns within DEADLINE_MS, well before WAIT_MAX,
 * and never asserts anything tighter. The main thread uses no CHECK while a
 * waiter runs; a stuck waiter is released with a sticky wake. */

#define WAIT_MAX 10000

typedef struct waiter {
    duro_provider *p;
    duro_queue queue;
    int waits;      /* waits in a row */
    int until_item; /* then wait + fetch until an item comes */
    _Atomic int started, done, stop;
    int rc;               /* first failure, else DURO_OK */
    duro_orch_item *item; /* what the fetch got */
    int64_t fetched_at;
    pthread_t thread;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    duro_provider *p = w->p;
    duro_error e;
    atomic_store(&w->started, 1);
    for (int i = 0; i < w->waits; i++) {
        int rc = p->wait_for_work(p, w->queue, WAIT_MAX, &e);
        if (rc != DURO_OK && w->rc == DURO_OK)
            w->rc = rc;
    }
    while (w->until_item && !atomic_load(&w->stop)) {
        int rc = p->fetch_orchestration_item(p, LOCK_LONG, NULL, &w->item, &e);
        if (rc != DURO_OK) {
            w->rc = rc;
            break;
        }
        if (w->item != NULL) {
            w->fetched_at = test_now_ms();
            break;
        }
        rc = p->wait_for_work(p, w->queue, WAIT_MAX, &e);
        if (rc != DURO_OK) {
            w->rc = rc;
            break;
        }
    }
    atomic_store(&w->done, 1);
    return NULL;
}

static void waiter_start(waiter *w, duro_provider *p, duro_queue q, int waits,
                         int until_item)
{
    memset(w, 0, sizeof(*w));
    w->p = p;
    w->queue = q;
    w->waits = waits;
    w->until_item = until_item;
    w->rc = DURO_OK;
    CHECK_EQ(pthread_create(&w->thread, NULL, waiter_main, w), 0);
    if (!wait_flag(&w->started, DEADLINE_MS)) {
        /* Not started: nothing to release yet, but it must be joined. */
        pthread_join(w->thread, NULL);
        CHECK_MSG(0, "waiter thread did not start");
    }
}

/* Joins the waiter; when it has not returned, releases it first with a
 * sticky wake (then resets) and returns 0. */
static int waiter_finish(waiter *w, int returned)
{
    if (!returned) {
        atomic_store(&w->stop, 1);
        w->p->wake(w->p, 1);
    }
    pthread_join(w->thread, NULL);
    if (!returned)
        w->p->wake(w->p, 0);
    return returned;
}

/* A turn of x that schedules one more activity, with return codes instead
 * of CHECKs (a waiter may be running). */
static int add_worker_row(duro_provider *p, const char *id)
{
    duro_error e;
    duro_work_item poke_item = work(DURO_WORK_EXTERNAL_EVENT, id);
    poke_item.name = "poke";
    int rc = p->enqueue_for_orchestrator(p, &poke_item, 0, &e);
    if (rc != DURO_OK)
        return rc;
    duro_orch_item *a = NULL;
    rc = p->fetch_orchestration_item(p, LOCK_LONG, NULL, &a, &e);
    if (rc != DURO_OK || a == NULL)
        return rc != DURO_OK ? rc : DURO_NOT_FOUND;
    uint64_t next = a->history_total + a->message_count + 1;
    duro_event *d = calloc(a->message_count + 1, sizeof(*d));
    if (d == NULL) {
        duro_orch_item_free(a);
        return DURO_NOMEM;
    }
    for (size_t i = 0; i < a->message_count; i++)
        d[i] = event(a->history_total + 1 + i, DURO_EVENT_EVENT_RAISED);
    d[a->message_count] = event(next, DURO_EVENT_ACTIVITY_SCHEDULED);
    duro_work_item w = activity(id, a->execution_id, next);
    duro_orch_ack ak = ack_of(a->execution_id, d, a->message_count + 1, NULL);
    ak.worker_items = &w;
    ak.worker_item_count = 1;
    rc = p->ack_orchestration_item(p, a->lock_token, &ak, &e);
    free(d);
    duro_orch_item_free(a);
    return rc;
}

PV_TEST(wait_for_work_returns_after_an_enqueue_from_another_thread)
{
    duro_provider *p = pv_open();
    begin(p, "x", 0);
    for (int q = 0; q < 2; q++) {
        duro_queue queue = q == 0 ? ORCH : WORKER;
        waiter w;
        waiter_start(&w, p, queue, 1, 0);
        /* Keep enqueueing until the waiter returns: the first enqueue may
         * come before it blocks. */
        int returned = 0, rc = DURO_OK;
        int64_t deadline = test_now_ms() + DEADLINE_MS;
        duro_error e;
        while (!returned && rc == DURO_OK && test_now_ms() < deadline) {
            if (queue == ORCH) {
                duro_work_item it = work(DURO_WORK_EXTERNAL_EVENT, "x");
                it.name = "poke";
                rc = p->enqueue_for_orchestrator(p, &it, 0, &e);
            } else {
                rc = add_worker_row(p, "x");
            }
            returned = wait_flag(&w.done, 50);
        }
        returned = waiter_finish(&w, returned);
        CHECK_PRC(rc, DURO_OK, &e);
        CHECK_MSG(returned,
                  "wait_for_work(%s, %d ms) did not return within %d ms of "
                  "enqueues from another thread",
                  queue == ORCH ? "orchestrator" : "worker", WAIT_MAX,
                  DEADLINE_MS);
        CHECK_RC(w.rc, DURO_OK);
    }
}

PV_TEST(wait_for_work_returns_when_a_delayed_message_becomes_due)
{
    duro_provider *p = pv_open();
    for (int order = 0; order < 2; order++) {
        const char *id = order == 0 ? "x" : "y";
        waiter w;
        int64_t due = 0;
        duro_work_item it = work(DURO_WORK_EXTERNAL_EVENT, id);
        it.name = "poke";
        duro_error e;
        int rc;
        if (order == 0) { /* the waiter blocks first */
            waiter_start(&w, p, ORCH, 0, 1);
            due = test_now_ms() + TIMER_DELAY;
            rc = p->enqueue_for_orchestrator(p, &it, TIMER_DELAY, &e);
        } else { /* the message is queued first */
            due = test_now_ms() + TIMER_DELAY;
            rc = p->enqueue_for_orchestrator(p, &it, TIMER_DELAY, &e);
            waiter_start(&w, p, ORCH, 0, 1);
        }
        int returned = rc == DURO_OK && wait_flag(&w.done, DEADLINE_MS);
        returned = waiter_finish(&w, returned);
        CHECK_PRC(rc, DURO_OK, &e);
        CHECK_MSG(returned,
                  "a waiter (max wait %d ms) did not see a message due in "
                  "%d ms within %d ms",
                  WAIT_MAX, TIMER_DELAY, DEADLINE_MS);
        CHECK_RC(w.rc, DURO_OK);
        CHECK(w.item != NULL);
        CHECK_STR(w.item->instance_id, id);
        CHECK_MSG(w.fetched_at >= due - CLOCK_SLACK_MS,
                  "delayed message fetched %lld ms early",
                  (long long)(due - w.fetched_at));
        duro_orch_item_free(w.item);
    }
}

PV_TEST(sticky_wake_makes_waits_return_at_once_until_reset)
{
    duro_provider *p = pv_open();
    waiter w;
    /* A blocked wait returns on wake(p, 1). */
    waiter_start(&w, p, ORCH, 1, 0);
    p->wake(p, 1);
    int returned = waiter_finish(&w, wait_flag(&w.done, DEADLINE_MS));
    CHECK_MSG(returned, "a blocked wait_for_work ignored wake(p, 1)");
    CHECK_RC(w.rc, DURO_OK);
    /* While sticky, every later wait returns at once, on both queues. */
    waiter_start(&w, p, ORCH, 3, 0);
    returned = waiter_finish(&w, wait_flag(&w.done, DEADLINE_MS));
    CHECK_MSG(returned, "waits after wake(p, 1) blocked");
    waiter_start(&w, p, WORKER, 3, 0);
    returned = waiter_finish(&w, wait_flag(&w.done, DEADLINE_MS));
    CHECK_MSG(returned, "worker-queue waits after wake(p, 1) blocked");
    /* After the reset a wait blocks again until woken; wake(p, 0) also
     * wakes current waits (the contract's "when wake() is called"). */
    p->wake(p, 0);
    waiter_start(&w, p, ORCH, 1, 0);
    returned = 0;
    int64_t deadline = test_now_ms() + DEADLINE_MS;
    while (!returned && test_now_ms() < deadline) {
        p->wake(p, 0);
        returned = wait_flag(&w.done, 50);
    }
    returned = waiter_finish(&w, returned);
    CHECK_MSG(returned, "a blocked wait_for_work ignored wake(p, 0)");
    CHECK_RC(w.rc, DURO_OK);
}

/* ========================================================================
 * Fault sweeps through the factory's inject_fault: the operation is run
 * with a fault armed at storage step 1, 2, 3, ... until it succeeds
 * without the fault firing. Every failure must report exactly the injected
 * code and flag, and leave the whole store as it was. */

#define SWEEP_MAX_STEPS 500

typedef int (*sweep_fn)(duro_provider *p, void *arg, duro_error *e);

/* Returns the step at which the operation first succeeded. */
static uint64_t fault_sweep(duro_provider *p, const char *what, sweep_fn fn,
                            void *arg)
{
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    uint64_t step;
    int succeeded = 0;
    for (step = 1; step <= SWEEP_MAX_STEPS && !succeeded; step++) {
        /* Permanent first: a provider may absorb a retryable fault by
         * retrying internally, which would end the sweep early. */
        for (int retryable = 0; retryable < 2; retryable++) {
            duro_error e;
            duro_error_clear(&e);
            factory->inject_fault(factory->ctx, p, step, retryable);
            int rc = fn(p, arg, &e);
            factory->inject_fault(factory->ctx, p, 0, 0);
            if (rc == DURO_OK) {
                CHECK_MSG(retryable == 0,
                          "%s: step %llu failed permanently but succeeded "
                          "with a retryable fault there (fault swallowed)",
                          what, (unsigned long long)step);
                succeeded = 1;
                break;
            }
            int want = retryable ? DURO_BUSY : DURO_STORAGE;
            if (rc != want || e.code != rc || e.retryable != retryable)
                test_fail(__FILE__, __LINE__,
                          "%s with a %s fault at step %llu: returned %s "
                          "(err %s, retryable %d), expected %s retryable %d "
                          "(%s)",
                          what, retryable ? "retryable" : "permanent",
                          (unsigned long long)step, duro_errname(rc),
                          duro_errname(e.code), e.retryable, duro_errname(want),
                          retryable, e.message);
            pv_expect_unchanged_at(p, &s, __FILE__, __LINE__);
        }
    }
    pv_snapshot_free(&s);
    CHECK_MSG(succeeded, "%s: still failing after %d injected steps", what,
              SWEEP_MAX_STEPS);
    step--;
    CHECK_MSG(step >= 2, "%s: the injected fault never fired", what);
    fprintf(stderr, "  %s: %llu failing steps, each left the store unchanged\n",
            what, (unsigned long long)(step - 1));
    return step;
}

typedef struct sweep_ack {
    const char *token;
    const duro_orch_ack *ack;
} sweep_ack;

static int sweep_ack_orch(duro_provider *p, void *arg, duro_error *e)
{
    sweep_ack *s = arg;
    return p->ack_orchestration_item(p, s->token, s->ack, e);
}

PV_TEST(fault_sweep_ack_orchestration_item)
{
    duro_provider *p = pv_open();
    begin(p, "x", 3); /* rows 2, 3, 4 */
    begin(p, "y", 0);
    raise_event(p, "y", "\"e\"", 0);
    duro_orch_item *a = poke(p, "x");
    duro_event d[4] = {event(5, DURO_EVENT_EVENT_RAISED),
                       event(6, DURO_EVENT_ACTIVITY_SCHEDULED),
                       event(7, DURO_EVENT_ACTIVITY_SCHEDULED),
                       event(8, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED)};
    d[0].payload = "\"poke\"";
    d[3].ref_instance = "child";
    duro_work_item w[2] = {activity("x", 1, 6), activity("x", 1, 7)};
    duro_activity_ref r[2] = {ref("x", 1, 2), ref("x", 1, 3)};
    duro_outbound out[3];
    memset(out, 0, sizeof(out));
    out[0].item = work(DURO_WORK_START, "child");
    out[0].item.name = "orch";
    out[0].item.parent_instance = "x";
    out[0].item.parent_execution = 1;
    out[0].item.parent_event_id = 8;
    out[1].item = work(DURO_WORK_TIMER_FIRED, "x");
    out[1].item.execution_id = 1;
    out[1].item.source_id = 5;
    out[1].delay_ms = 60000;
    out[2].item = work(DURO_WORK_EXTERNAL_EVENT, "y");
    out[2].item.name = "poke";
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    m.custom_status = "swept";
    m.custom_status_set = 1;
    duro_orch_ack ak = ack_of(1, d, 4, &m);
    ak.worker_items = w;
    ak.worker_item_count = 2;
    ak.cancelled_activities = r;
    ak.cancelled_activity_count = 2;
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = 3;
    sweep_ack arg = {a->lock_token, &ak};
    fault_sweep(p, "ack_orchestration_item", sweep_ack_orch, &arg);
    duro_orch_item_free(a);
    /* Committed once, completely. */
    CHECK_EQ(history_len(p, "x", 1), 8);
    duro_instance_list *l = get(p, "x");
    CHECK_STR(l->items[0].custom_status, "swept");
    duro_instance_list_free(l);
    l = get(p, "child");
    CHECK_EQ(l->items[0].status, DURO_STATUS_PENDING);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    CHECK_EQ(count(p, ORCH, "y"), 2);
    CHECK_EQ(count(p, ORCH, "child"), 1);
    CHECK_DRAIN(p, "x:0004,x:0006,x:0007");
}

typedef struct sweep_work {
    const char *token;
    const duro_work_item *completion;
} sweep_work;

static int sweep_ack_work(duro_provider *p, void *arg, duro_error *e)
{
    sweep_work *s = arg;
    return p->ack_work_item(p, s->token, s->completion, e);
}

PV_TEST(fault_sweep_ack_work_item)
{
    duro_provider *p = pv_open();
    begin(p, "x", 2);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = w->item.source_id;
    done.payload = "\"result\"";
    sweep_work arg = {w->lock_token, &done};
    fault_sweep(p, "ack_work_item", sweep_ack_work, &arg);
    CHECK_EQ(count(p, WORKER, "x"), 1);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].source_id, w->item.source_id);
    duro_orch_item_free(a);
    duro_worker_item_free(w);
}

typedef struct ack_fetch_work_arg {
    const char *token;
    const duro_work_item *completion;
    duro_worker_item *next;
} ack_fetch_work_arg;

static int sweep_ack_fetch_work(duro_provider *p, void *arg, duro_error *e)
{
    ack_fetch_work_arg *s = arg;
    duro_worker_item_free(s->next);
    s->next = NULL;
    int rc = p->ack_and_fetch_work_item(p, s->token, s->completion, LOCK_LONG,
                                        &s->next, e);
    if (rc != DURO_OK && s->next != NULL) {
        test_fail(__FILE__, __LINE__,
                  "ack_and_fetch_work_item failed (%s) but returned an item",
                  duro_errname(rc));
        duro_worker_item_free(s->next);
        s->next = NULL;
    }
    return rc;
}

PV_TEST(fault_sweep_ack_and_fetch_work_item)
{
    duro_provider *p = pv_open();
    require_v2(p);
    begin(p, "x", 2);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_work_item done = work(DURO_WORK_ACTIVITY_COMPLETED, "x");
    done.execution_id = 1;
    done.source_id = w->item.source_id;
    done.payload = "\"result\"";
    ack_fetch_work_arg arg = {w->lock_token, &done, NULL};
    fault_sweep(p, "ack_and_fetch_work_item", sweep_ack_fetch_work, &arg);
    CHECK(arg.next != NULL);
    CHECK_EQ(count(p, ORCH, "x"), 1);
    expect_no_work(p);
    duro_worker_item_free(arg.next);
    duro_worker_item_free(w);
}

typedef struct ack_fetch_orch_arg {
    const char *token;
    const duro_orch_ack *ack;
    duro_orch_item *next;
} ack_fetch_orch_arg;

static int sweep_ack_fetch_orch(duro_provider *p, void *arg, duro_error *e)
{
    ack_fetch_orch_arg *s = arg;
    duro_orch_item_free(s->next);
    s->next = NULL;
    int rc = p->ack_and_fetch_orchestration_item(p, s->token, s->ack, LOCK_LONG,
                                                 NULL, &s->next, e);
    if (rc != DURO_OK && s->next != NULL) {
        test_fail(__FILE__, __LINE__,
                  "ack_and_fetch_orchestration_item failed (%s) but returned "
                  "an item",
                  duro_errname(rc));
        duro_orch_item_free(s->next);
        s->next = NULL;
    }
    return rc;
}

PV_TEST(fault_sweep_ack_and_fetch_orchestration_item)
{
    duro_provider *p = pv_open();
    require_v2(p);
    begin(p, "x", 2);
    start(p, "y");
    duro_orch_item *a = poke(p, "x");
    duro_event d[2] = {event(4, DURO_EVENT_EVENT_RAISED),
                       event(5, DURO_EVENT_ACTIVITY_SCHEDULED)};
    d[0].name = "poke";
    d[0].payload = "\"poke\"";
    d[1].name = "act";
    duro_work_item w = activity("x", 1, 5);
    duro_activity_ref r = ref("x", 1, 2);
    duro_orch_ack ak = ack_of(1, d, 2, NULL);
    ak.worker_items = &w;
    ak.worker_item_count = 1;
    ak.cancelled_activities = &r;
    ak.cancelled_activity_count = 1;
    ack_fetch_orch_arg arg = {a->lock_token, &ak, NULL};
    fault_sweep(p, "ack_and_fetch_orchestration_item", sweep_ack_fetch_orch,
                &arg);
    CHECK(arg.next != NULL);
    CHECK_STR(arg.next->instance_id, "y");
    CHECK_EQ(history_len(p, "x", 1), 5);
    CHECK_EQ(count(p, WORKER, "x"), 2);
    duro_orch_item_free(arg.next);
    duro_orch_item_free(a);
}

typedef struct ack_fetch_many_arg {
    const char *const *tokens;
    const duro_orch_ack *acks;
    size_t n;
    duro_orch_item *next[4];
    size_t got;
} ack_fetch_many_arg;

static int sweep_ack_fetch_many(duro_provider *p, void *arg, duro_error *e)
{
    ack_fetch_many_arg *s = arg;
    free_items(s->next, s->got);
    memset(s->next, 0, sizeof(s->next));
    s->got = 99;
    int rc = p->ack_and_fetch_orchestration_items(
        p, s->n, s->tokens, s->acks, LOCK_LONG, NULL, 4, s->next, &s->got, e);
    if (rc != DURO_OK && (s->got != 0 || s->next[0] != NULL)) {
        test_fail(__FILE__, __LINE__,
                  "ack_and_fetch_orchestration_items failed (%s) but returned "
                  "items",
                  duro_errname(rc));
        s->got = 0;
    }
    if (rc != DURO_OK)
        s->got = 0;
    return rc;
}

PV_TEST(fault_sweep_ack_and_fetch_orchestration_items)
{
    duro_provider *p = pv_open();
    require_v7(p);
    begin(p, "x", 2);
    begin(p, "w", 0);
    duro_orch_item *a = poke(p, "x");
    duro_orch_item *b = poke(p, "w");
    start(p, "y");
    duro_event d[2] = {event(4, DURO_EVENT_EVENT_RAISED),
                       event(5, DURO_EVENT_ACTIVITY_SCHEDULED)};
    d[0].name = "poke";
    d[0].payload = "\"poke\"";
    d[1].name = "act";
    duro_work_item w = activity("x", 1, 5);
    duro_activity_ref r = ref("x", 1, 2);
    duro_orch_ack ak[2] = {ack_of(1, d, 2, NULL), ack_of(1, d, 1, NULL)};
    ak[0].worker_items = &w;
    ak[0].worker_item_count = 1;
    ak[0].cancelled_activities = &r;
    ak[0].cancelled_activity_count = 1;
    duro_event dw = event(2, DURO_EVENT_EVENT_RAISED);
    dw.name = "poke";
    ak[1].history_delta = &dw;
    const char *tokens[2] = {a->lock_token, b->lock_token};
    ack_fetch_many_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.tokens = tokens;
    arg.acks = ak;
    arg.n = 2;
    fault_sweep(p, "ack_and_fetch_orchestration_items", sweep_ack_fetch_many,
                &arg);
    CHECK_EQ(arg.got, 1);
    CHECK_STR(arg.next[0]->instance_id, "y");
    CHECK_EQ(history_len(p, "x", 1), 5);
    CHECK_EQ(history_len(p, "w", 1), 2);
    CHECK_EQ(count(p, WORKER, "x"), 2);
    CHECK_EQ(count(p, ORCH, "w"), 0);
    free_items(arg.next, arg.got);
    duro_orch_item_free(b);
    duro_orch_item_free(a);
}

static int sweep_fetch_orch(duro_provider *p, void *arg, duro_error *e)
{
    duro_orch_item **out = arg;
    *out = NULL;
    int rc = p->fetch_orchestration_item(p, LOCK_LONG, NULL, out, e);
    if (rc != DURO_OK && *out != NULL) {
        test_fail(__FILE__, __LINE__,
                  "fetch_orchestration_item failed (%s) but returned an item",
                  duro_errname(rc));
        duro_orch_item_free(*out);
        *out = NULL;
    }
    return rc;
}

PV_TEST(fault_sweep_fetch_orchestration_item)
{
    duro_provider *p = pv_open();
    begin(p, "x", 2);
    raise_event(p, "x", "\"e1\"", 0);
    raise_event(p, "x", "\"e2\"", 0);
    start(p, "y");
    duro_orch_item *item = NULL;
    fault_sweep(p, "fetch_orchestration_item", sweep_fetch_orch, &item);
    CHECK(item != NULL);
    CHECK_STR(item->instance_id, "x");
    CHECK_EQ(item->message_count, 2);
    CHECK_EQ(item->history_total, 3);
    CHECK_EQ(item->history_count, 3);
    duro_orch_item *y = fetch_orch_expect(p, "y", LOCK_LONG);
    expect_no_orch(p); /* x stays locked by the successful fetch */
    duro_orch_item_free(y);
    duro_orch_item_free(item);
}

static int sweep_fetch_work(duro_provider *p, void *arg, duro_error *e)
{
    duro_worker_item **out = arg;
    *out = NULL;
    int rc = p->fetch_work_item(p, LOCK_LONG, out, e);
    if (rc != DURO_OK && *out != NULL) {
        test_fail(__FILE__, __LINE__,
                  "fetch_work_item failed (%s) but returned an item",
                  duro_errname(rc));
        duro_worker_item_free(*out);
        *out = NULL;
    }
    return rc;
}

PV_TEST(fault_sweep_fetch_work_item)
{
    duro_provider *p = pv_open();
    begin(p, "x", 3);
    duro_worker_item *w = NULL;
    fault_sweep(p, "fetch_work_item", sweep_fetch_work, &w);
    CHECK(w != NULL);
    CHECK_STR(w->item.instance_id, "x");
    CHECK_EQ(count(p, WORKER, "x"), 3);
    duro_worker_item *b = fetch_work(p, LOCK_LONG);
    duro_worker_item *c = fetch_work(p, LOCK_LONG);
    CHECK(b != NULL && c != NULL);
    expect_no_work(p); /* the swept fetch holds the third row */
    duro_worker_item_free(b);
    duro_worker_item_free(c);
    duro_worker_item_free(w);
}

static int sweep_enqueue(duro_provider *p, void *arg, duro_error *e)
{
    return p->enqueue_for_orchestrator(p, arg, 0, e);
}

PV_TEST(fault_sweep_enqueue_start)
{
    duro_provider *p = pv_open();
    begin(p, "x", 1);
    raise_event(p, "x", "\"e\"", 0);
    duro_work_item w = work(DURO_WORK_START, "new");
    w.name = "orch";
    w.payload = "\"in\"";
    fault_sweep(p, "enqueue_for_orchestrator(START)", sweep_enqueue, &w);
    duro_instance_list *l = get(p, "new");
    CHECK_EQ(l->items[0].status, DURO_STATUS_PENDING);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "new"), 1);
}

typedef struct sweep_delete {
    const char *id;
    size_t deleted;
} sweep_delete;

static int sweep_delete_fn(duro_provider *p, void *arg, duro_error *e)
{
    sweep_delete *s = arg;
    return p->delete_instance(p, s->id, 1, &s->deleted, e);
}

PV_TEST(fault_sweep_delete_instance)
{
    duro_provider *p = pv_open();
    begin(p, "root", 1);
    begin_child(p, "root", "kid");
    begin(p, "other", 1);
    raise_event(p, "root", "\"e\"", 0);
    sweep_delete arg = {"root", 0};
    fault_sweep(p, "delete_instance", sweep_delete_fn, &arg);
    CHECK_EQ(arg.deleted, 2);
    expect_no_instance(p, "root");
    expect_no_instance(p, "kid");
    CHECK_DRAIN(p, "other:0002");
}

/* ========================================================================
 * Version 4: what status shows (the first cancel request, the finish time,
 * the last problem) and operations on many instances (cancel by id, cancel
 * by filter, purge), with their dry runs and batches. */

static void require_v4(duro_provider *p)
{
    CHECK_MSG(p->version >= 4 && p->set_instance_problem != NULL &&
                  p->cancel_instances != NULL && p->cancel_matching != NULL &&
                  p->purge_instances != NULL && p->read_store_stats != NULL,
              "provider '%s' (version %d) lacks the version-4 methods", p->name,
              p->version);
}

static void enqueue_cancel(duro_provider *p, const char *id, const char *reason,
                           const char *by)
{
    duro_work_item w = work(DURO_WORK_CANCEL_INSTANCE, id);
    w.reason = reason;
    w.requested_by = by;
    enqueue(p, &w, 0);
}

/* A turn of `id` that records its messages and ends it (or keeps it
 * Running) under orchestration name `name` (NULL: unchanged). */
static void end_as(duro_provider *p, const char *id, int status,
                   const char *name)
{
    duro_instance_meta m = meta(status);
    m.name = name;
    if (status == DURO_STATUS_FAILED) {
        m.error = "boom";
        m.category = DURO_CATEGORY_APPLICATION;
    }
    turn_meta(p, id, &m);
}

/* Starts `id` of orchestration `name` at `version` and runs its first turn
 * to `status`: Running (Started only) or an end (Started and the end). */
static void run_to(duro_provider *p, const char *id, const char *name,
                   const char *version, int status)
{
    duro_work_item w = work(DURO_WORK_START, id);
    w.name = name;
    w.version = version;
    enqueue(p, &w, 0);
    duro_orch_item *a = fetch_orch_for(p, id, LOCK_LONG);
    duro_event d[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ORCHESTRATION_COMPLETED)};
    d[0].name = name;
    duro_instance_meta m = meta(status);
    m.name = name;
    m.version = version;
    if (status == DURO_STATUS_FAILED)
        d[1].kind = DURO_EVENT_ORCHESTRATION_FAILED;
    else if (status == DURO_STATUS_CANCELLED)
        d[1].kind = DURO_EVENT_ORCHESTRATION_CANCELLED;
    duro_orch_ack ak = ack_of(1, d, status == DURO_STATUS_RUNNING ? 1 : 2, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
}

/* The one instance `id`, copied field by field into *out (strings kept in
 * the list, which the caller frees). */
static duro_instance_list *status_of(duro_provider *p, const char *id,
                                     const duro_instance_info **out)
{
    duro_instance_list *l = get(p, id);
    *out = &l->items[0];
    return l;
}

/* cancel_matching (control 0) or control_matching of `control`. */
static int request_matching(duro_provider *p, int control,
                            const duro_bulk_filter *f, int dry_run,
                            size_t max_ids, const char *reason, const char *by,
                            duro_bulk_result **r, duro_error *e)
{
    if (control == 0)
        return p->cancel_matching(p, f, reason, by, dry_run, max_ids, r, e);
    return p->control_matching(p, control, f, reason, by, dry_run, max_ids, r,
                               e);
}

/* request_matching, which must succeed. */
static duro_bulk_result *bulk_request(duro_provider *p, int control,
                                      const duro_bulk_filter *f, int dry_run,
                                      size_t max_ids, const char *reason,
                                      const char *by)
{
    duro_error e;
    duro_bulk_result *r = NULL;
    CHECK_PRC(
        request_matching(p, control, f, dry_run, max_ids, reason, by, &r, &e),
        DURO_OK, &e);
    CHECK(r != NULL);
    CHECK_INT(r->id_count, <=, max_ids);
    CHECK_INT(r->id_count, <=, r->count);
    return r;
}

static duro_bulk_result *bulk_cancel(duro_provider *p,
                                     const duro_bulk_filter *f, int dry_run,
                                     size_t max_ids, const char *reason,
                                     const char *by)
{
    return bulk_request(p, 0, f, dry_run, max_ids, reason, by);
}

static duro_bulk_result *bulk_purge(duro_provider *p, const duro_bulk_filter *f,
                                    int dry_run, size_t max_ids)
{
    duro_error e;
    duro_bulk_result *r = NULL;
    CHECK_PRC(p->purge_instances(p, f, dry_run, max_ids, &r, &e), DURO_OK, &e);
    CHECK(r != NULL);
    CHECK_INT(r->id_count, <=, max_ids);
    CHECK_INT(r->id_count, <=, r->count);
    return r;
}

/* The ids of a bulk result, comma-separated (caller frees). */
static char *ids_text(const duro_bulk_result *r)
{
    size_t len = 1;
    for (size_t i = 0; i < r->id_count; i++)
        len += strlen(r->ids[i]) + 1;
    char *out = malloc(len);
    CHECK(out != NULL);
    out[0] = '\0';
    for (size_t i = 0; i < r->id_count; i++) {
        if (i > 0)
            strcat(out, ",");
        strcat(out, r->ids[i]);
    }
    return out;
}

#define CHECK_IDS(r, expected)                                                 \
    do {                                                                       \
        char *got_ = ids_text(r);                                              \
        CHECK_STR(got_, expected);                                             \
        free(got_);                                                            \
    } while (0)

/* Runs request `control` (0: cancel_matching) dry, then for real, and
 * checks that the real run did exactly what the dry run reported (at most
 * 100 ids); returns the real run's result. */
static duro_bulk_result *dry_then_real(duro_provider *p, int control,
                                       const duro_bulk_filter *f,
                                       const char *reason, const char *by)
{
    duro_bulk_result *dry = bulk_request(p, control, f, 1, 100, reason, by);
    duro_bulk_result *r = bulk_request(p, control, f, 0, 100, reason, by);
    CHECK_EQ(r->count, dry->count);
    char *dry_ids = ids_text(dry);
    CHECK_IDS(r, dry_ids);
    free(dry_ids);
    duro_bulk_result_free(dry);
    return r;
}

/* Waits until the wall clock has passed t (so later times differ). */
static void clock_past(int64_t t)
{
    WAIT_UNTIL(duro_now_ms() > t, DEADLINE_MS);
}

PV_TEST(cancel_request_is_recorded_on_the_instance)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 1);
    start(p, "pend");
    begin(p, "done", 0);
    finish(p, "done");
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "pend", &in);
    int64_t pend_updated = in->updated_ms;
    CHECK_EQ(in->cancel_requested_ms, 0);
    CHECK(in->cancel_reason == NULL && in->cancelled_by == NULL);
    duro_instance_list_free(l);

    /* The first request on a live instance is recorded with the message;
     * later ones change nothing recorded. */
    int64_t t0 = duro_now_ms();
    enqueue_cancel(p, "x", "first", "alice");
    int64_t t1 = duro_now_ms();
    l = status_of(p, "x", &in);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_INT(in->cancel_requested_ms, >=, t0 - CLOCK_SLACK_MS);
    CHECK_INT(in->cancel_requested_ms, <=, t1 + CLOCK_SLACK_MS);
    int64_t requested = in->cancel_requested_ms;
    CHECK_STR(in->cancel_reason, "first");
    CHECK_STR(in->cancelled_by, "alice");
    CHECK_EQ(in->finished_ms, 0);
    duro_instance_list_free(l);
    clock_past(requested);
    enqueue_cancel(p, "x", "second", "bob");
    l = status_of(p, "x", &in);
    CHECK_EQ(in->cancel_requested_ms, requested);
    CHECK_STR(in->cancel_reason, "first");
    CHECK_STR(in->cancelled_by, "alice");
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "x"), 2);

    /* No reason or requester: the time alone; status and updated_ms stay. */
    enqueue_cancel(p, "pend", NULL, NULL);
    l = status_of(p, "pend", &in);
    CHECK_EQ(in->status, DURO_STATUS_PENDING);
    CHECK(in->cancel_requested_ms > 0);
    CHECK(in->cancel_reason == NULL && in->cancelled_by == NULL);
    CHECK_EQ(in->updated_ms, pend_updated);
    duro_instance_list_free(l);

    /* A finished instance records nothing; a missing one is no error. */
    enqueue_cancel(p, "done", "late", "carol");
    l = status_of(p, "done", &in);
    CHECK_EQ(in->cancel_requested_ms, 0);
    CHECK(in->cancel_reason == NULL && in->cancelled_by == NULL);
    duro_instance_list_free(l);
    enqueue_cancel(p, "ghost", "r", "b");
    expect_no_instance(p, "ghost");

    /* A parent's turn that cancels its child records on the child. */
    begin(p, "parent", 0);
    begin_child(p, "parent", "kid");
    duro_orch_item *a = poke(p, "parent");
    duro_event d = event(a->history_total + 1, DURO_EVENT_EVENT_RAISED);
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_CANCEL_INSTANCE, "kid");
    out.item.reason = DURO_REASON_INSTANCE_CANCELLED;
    out.item.requested_by = "parent:parent";
    duro_orch_ack ak = ack_of(a->execution_id, &d, 1, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    l = status_of(p, "kid", &in);
    CHECK_STR(in->cancel_reason, DURO_REASON_INSTANCE_CANCELLED);
    CHECK_STR(in->cancelled_by, "parent:parent");
    CHECK(in->cancel_requested_ms > 0);
    duro_instance_list_free(l);

    /* The fetched item carries the record; the ack that cancels sets the
     * finish time and keeps it. */
    a = fetch_orch_for(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 2);
    CHECK_EQ(a->cancel_requested_ms, requested);
    CHECK_STR(a->cancel_reason, "first");
    CHECK_STR(a->cancelled_by, "alice");
    CHECK(a->last_problem == NULL);
    duro_event c[2] = {event(3, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED),
                       event(4, DURO_EVENT_ORCHESTRATION_CANCELLED)};
    c[0].reason = "first";
    c[0].requested_by = "alice";
    duro_instance_meta m = meta(DURO_STATUS_CANCELLED);
    m.error = "first";
    m.category = DURO_CATEGORY_CANCELLED;
    duro_orch_ack ak2 = ack_of(1, c, 2, &m);
    int64_t t2 = duro_now_ms();
    ack(p, a->lock_token, &ak2);
    int64_t t3 = duro_now_ms();
    duro_orch_item_free(a);
    l = status_of(p, "x", &in);
    CHECK_EQ(in->status, DURO_STATUS_CANCELLED);
    CHECK_INT(in->finished_ms, >=, t2 - CLOCK_SLACK_MS);
    CHECK_INT(in->finished_ms, <=, t3 + CLOCK_SLACK_MS);
    CHECK_EQ(in->cancel_requested_ms, requested);
    CHECK_STR(in->cancel_reason, "first");
    CHECK_STR(in->cancelled_by, "alice");
    duro_instance_list_free(l);
}

PV_TEST(finish_time_is_set_when_the_instance_ends)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "c", 0);
    begin(p, "f", 0);
    begin(p, "n", 0);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "c", &in);
    CHECK_EQ(in->finished_ms, 0);
    duro_instance_list_free(l);
    /* Running turns that change metadata leave it 0. */
    duro_instance_meta cs = meta(DURO_STATUS_RUNNING);
    cs.custom_status = "busy";
    cs.custom_status_set = 1;
    turn_meta(p, "c", &cs);
    l = status_of(p, "c", &in);
    CHECK_EQ(in->finished_ms, 0);
    duro_instance_list_free(l);
    int64_t t0 = duro_now_ms();
    finish(p, "c");
    end_as(p, "f", DURO_STATUS_FAILED, NULL);
    int64_t t1 = duro_now_ms();
    const char *ended[] = {"c", "f"};
    for (int i = 0; i < 2; i++) {
        l = status_of(p, ended[i], &in);
        CHECK(duro_status_is_terminal(in->status));
        CHECK_INT(in->finished_ms, >=, t0 - CLOCK_SLACK_MS);
        CHECK_INT(in->finished_ms, <=, t1 + CLOCK_SLACK_MS);
        CHECK_EQ(in->finished_ms, in->updated_ms);
        duro_instance_list_free(l);
    }
    /* Continue-as-new does not end the instance. */
    continue_as_new(p, "n", 2);
    l = status_of(p, "n", &in);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_EQ(in->finished_ms, 0);
    duro_instance_list_free(l);
}

PV_TEST(set_instance_problem_records_and_clears)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 0);
    start(p, "y");
    duro_error e;
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "x", &in);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->last_problem_ms, 0);
    CHECK_EQ(in->next_attempt_ms, 0);
    int64_t updated = in->updated_ms;
    duro_instance_list_free(l);

    int64_t t0 = duro_now_ms();
    CHECK_PRC(p->set_instance_problem(p, "x", "stuck on 'A'", 12345, &e),
              DURO_OK, &e);
    int64_t t1 = duro_now_ms();
    l = status_of(p, "x", &in);
    CHECK_STR(in->last_problem, "stuck on 'A'");
    CHECK_INT(in->last_problem_ms, >=, t0 - CLOCK_SLACK_MS);
    CHECK_INT(in->last_problem_ms, <=, t1 + CLOCK_SLACK_MS);
    CHECK_EQ(in->next_attempt_ms, 12345);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_EQ(in->updated_ms, updated);
    duro_instance_list_free(l);
    /* The newest replaces it; the fetched item carries it. */
    CHECK_PRC(p->set_instance_problem(p, "x", "again", 0, &e), DURO_OK, &e);
    duro_orch_item *a = poke(p, "x");
    CHECK_STR(a->last_problem, "again");
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    l = status_of(p, "x", &in);
    CHECK_STR(in->last_problem, "again");
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);
    /* Clearing zeroes all three, whatever next_attempt_ms says; clearing
     * what is clear is fine; a Pending instance takes one too. */
    CHECK_PRC(p->set_instance_problem(p, "x", NULL, 999, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "x", NULL, 0, &e), DURO_OK, &e);
    l = status_of(p, "x", &in);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->last_problem_ms, 0);
    CHECK_EQ(in->next_attempt_ms, 0);
    CHECK_EQ(in->updated_ms, updated);
    duro_instance_list_free(l);
    CHECK_PRC(p->set_instance_problem(p, "y", "waiting", 1, &e), DURO_OK, &e);

    /* Bad input and a missing instance change nothing. */
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    CHECK_PFAIL(p->set_instance_problem(p, "ghost", "p", 0, &e), DURO_NOT_FOUND,
                0, &e);
    CHECK_PFAIL(p->set_instance_problem(p, NULL, "p", 0, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->set_instance_problem(p, "", "p", 0, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->set_instance_problem(p, "x", "p", -1, &e), DURO_INVALID, 0,
                &e);
    char *long_id = repeat('i', 1025);
    char *big = repeat('b', max_payload() + 1);
    CHECK_PFAIL(p->set_instance_problem(p, long_id, "p", 0, &e), DURO_TOO_LARGE,
                0, &e);
    CHECK_PFAIL(p->set_instance_problem(p, "x", big, 0, &e), DURO_TOO_LARGE, 0,
                &e);
    free(long_id);
    free(big);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

/* The meta of a turn that fails its instance with `error` (an application
 * error) and records `problem` as its last problem. */
static duro_instance_meta failed_meta(const char *error, const char *problem)
{
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    m.error = error;
    m.category = DURO_CATEGORY_APPLICATION;
    m.problem = problem;
    return m;
}

/* A report that comes after the instance ended changes nothing: the
 * problem it ended with stays, and an instance that ended well gets none. */
PV_TEST(set_instance_problem_leaves_an_ended_instance_alone)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 0);
    begin(p, "y", 0);
    duro_error e;
    const duro_instance_info *in;
    duro_instance_meta m = failed_meta("poison", "ended with this");
    turn_meta(p, "x", &m);
    duro_instance_list *l = status_of(p, "x", &in);
    CHECK_STR(in->last_problem, "ended with this");
    int64_t at = in->last_problem_ms;
    duro_instance_list_free(l);
    turn_meta(p, "y", &(duro_instance_meta){.status = DURO_STATUS_COMPLETED});
    for (int i = 0; i < 2; i++) {
        const char *problem = i == 0 ? "late report" : NULL;
        CHECK_PRC(p->set_instance_problem(p, "x", problem, 99, &e), DURO_OK,
                  &e);
        CHECK_PRC(p->set_instance_problem(p, "y", problem, 99, &e), DURO_OK,
                  &e);
        l = status_of(p, "x", &in);
        CHECK_EQ(in->status, DURO_STATUS_FAILED);
        CHECK_STR(in->last_problem, "ended with this");
        CHECK_EQ(in->last_problem_ms, at);
        CHECK_EQ(in->next_attempt_ms, 0);
        duro_instance_list_free(l);
        l = status_of(p, "y", &in);
        CHECK_EQ(in->status, DURO_STATUS_COMPLETED);
        CHECK(in->last_problem == NULL);
        CHECK_EQ(in->last_problem_ms, 0);
        CHECK_EQ(in->next_attempt_ms, 0);
        duro_instance_list_free(l);
    }
}

PV_TEST(ack_meta_problem_is_recorded_with_the_turn)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 0);
    begin(p, "y", 0);
    duro_error e;
    const duro_instance_info *in;
    /* A planned retry recorded earlier is replaced by the ending one. */
    CHECK_PRC(p->set_instance_problem(p, "x", "retrying", 777, &e), DURO_OK,
              &e);
    int64_t t0 = duro_now_ms();
    duro_instance_meta m =
        failed_meta("nondeterminism at event 2", "nondeterminism at event 2");
    turn_meta(p, "x", &m);
    int64_t t1 = duro_now_ms();
    duro_instance_list *l = status_of(p, "x", &in);
    CHECK_EQ(in->status, DURO_STATUS_FAILED);
    CHECK_STR(in->last_problem, "nondeterminism at event 2");
    CHECK_INT(in->last_problem_ms, >=, t0 - CLOCK_SLACK_MS);
    CHECK_INT(in->last_problem_ms, <=, t1 + CLOCK_SLACK_MS);
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);

    /* problem NULL keeps what is stored. */
    CHECK_PRC(p->set_instance_problem(p, "y", "kept", 5, &e), DURO_OK, &e);
    duro_instance_meta cs = meta(DURO_STATUS_RUNNING);
    cs.custom_status = "busy";
    cs.custom_status_set = 1;
    turn_meta(p, "y", &cs);
    l = status_of(p, "y", &in);
    CHECK_STR(in->last_problem, "kept");
    CHECK_EQ(in->next_attempt_ms, 5);
    duro_instance_list_free(l);

    /* An oversized problem fails the whole ack, changing nothing. */
    duro_orch_item *a = poke(p, "y");
    duro_event *d = events_for(a);
    char *big = repeat('b', max_payload() + 1);
    duro_instance_meta bad = meta(DURO_STATUS_FAILED);
    bad.error = "boom";
    bad.problem = big;
    duro_orch_ack ak = ack_of(a->execution_id, d, a->message_count, &bad);
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_TOO_LARGE, 0, &e);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    free(big);
    free(d);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);

    /* An ending without a problem clears a stale one: continue-as-new and
     * completion alike. */
    finish(p, "y");
    l = status_of(p, "y", &in);
    CHECK_EQ(in->status, DURO_STATUS_COMPLETED);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->last_problem_ms, 0);
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);
    begin(p, "z", 0);
    CHECK_PRC(p->set_instance_problem(p, "z", "stale", 9, &e), DURO_OK, &e);
    continue_as_new(p, "z", 2);
    l = status_of(p, "z", &in);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);
}

/* check_work_item_locks: held, cancelled (gone), retaken, acked; writes
 * nothing and extends no lock. */
PV_TEST(check_work_item_locks_tells_held_from_gone_and_retaken)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 2); /* activities 2 and 3 */
    begin(p, "y", 1); /* activity 2 */
    duro_error e;
    duro_worker_item *keep = fetch_work(p, LOCK_LONG);
    duro_worker_item *cancelled = fetch_work(p, LOCK_LONG);
    duro_worker_item *short_lock = fetch_work(p, LOCK_SHORT);
    CHECK(keep != NULL && cancelled != NULL && short_lock != NULL);
    const char *tokens[5] = {keep->lock_token, cancelled->lock_token,
                             short_lock->lock_token, "not-a-token",
                             keep->lock_token};
    unsigned char held[5] = {9, 9, 9, 9, 9};
    CHECK_PRC(p->check_work_item_locks(p, tokens, 5, held, &e), DURO_OK, &e);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(held[i], i == 3 ? 0 : 1);

    /* A turn cancels one; another fetch takes the short lock once it
     * expires; the check reports both lost and the kept one held. */
    duro_activity_ref r =
        ref(cancelled->item.instance_id, cancelled->item.execution_id,
            cancelled->item.source_id);
    turn_cancel(p, cancelled->item.instance_id, &r, 1);
    duro_worker_item *thief = NULL;
    WAIT_UNTIL(try_fetch_work(p, LOCK_LONG, &thief), DEADLINE_MS);
    pv_snapshot snap;
    pv_snapshot_take(p, &snap);
    CHECK_PRC(p->check_work_item_locks(p, tokens, 3, held, &e), DURO_OK, &e);
    CHECK_EQ(held[0], 1);
    CHECK_EQ(held[1], 0);
    CHECK_EQ(held[2], 0);
    const char *t2[1] = {thief->lock_token};
    CHECK_PRC(p->check_work_item_locks(p, t2, 1, held, &e), DURO_OK, &e);
    CHECK_EQ(held[0], 1);
    PV_EXPECT_UNCHANGED(p, &snap); /* a pure read */
    pv_snapshot_free(&snap);
    /* Acked: gone for its token too. */
    CHECK_PRC(p->ack_work_item(p, keep->lock_token, NULL, &e), DURO_OK, &e);
    CHECK_PRC(p->check_work_item_locks(p, tokens, 1, held, &e), DURO_OK, &e);
    CHECK_EQ(held[0], 0);

    /* Bad input. */
    CHECK_PRC(p->check_work_item_locks(p, NULL, 0, NULL, &e), DURO_OK, &e);
    CHECK_PFAIL(p->check_work_item_locks(p, NULL, 1, held, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->check_work_item_locks(p, tokens, 1, NULL, &e), DURO_INVALID,
                0, &e);
    const char *bad[2] = {thief->lock_token, ""};
    CHECK_PFAIL(p->check_work_item_locks(p, bad, 2, held, &e), DURO_INVALID, 0,
                &e);
    bad[1] = NULL;
    CHECK_PFAIL(p->check_work_item_locks(p, bad, 2, held, &e), DURO_INVALID, 0,
                &e);
    duro_worker_item_free(keep);
    duro_worker_item_free(cancelled);
    duro_worker_item_free(short_lock);
    duro_worker_item_free(thief);
}

/* cancel_instances (control 0) or control_instances of `control`; the
 * results of either come back in res as duro_control_result (the two have
 * the same fields). */
static int request_ids(duro_provider *p, int control, const char *const *ids,
                       size_t n, const char *reason, const char *by,
                       duro_control_result *res, duro_error *e)
{
    if (control != 0)
        return p->control_instances(p, control, ids, n, reason, by, res, e);
    duro_cancel_result *c = NULL;
    if (res != NULL) {
        c = calloc(n > 0 ? n : 1, sizeof(*c));
        CHECK(c != NULL);
        for (size_t i = 0; i < n; i++) {
            c[i].outcome = res[i].outcome;
            c[i].status = res[i].status;
        }
    }
    int rc = p->cancel_instances(p, ids, n, reason, by, c, e);
    for (size_t i = 0; c != NULL && i < n; i++) {
        res[i].outcome = c[i].outcome;
        res[i].status = c[i].status;
    }
    free(c);
    return rc;
}

/* An abandon delay holds an instance's new messages back (a turn that
 * keeps failing, code registered nowhere, must not be retried for each
 * event), but not a cancel or a terminate, one at a time or in bulk: an
 * instance can always be stopped promptly. */
PV_TEST(a_cancel_or_terminate_is_not_held_back_by_an_abandon_delay)
{
    duro_provider *p = pv_open();
    duro_error e;
    const char *ids[] = {"c1", "t1", "c2", "t2"};
    for (int i = 0; i < 4; i++) {
        start(p, ids[i]);
        duro_orch_item *a = fetch_orch_expect(p, ids[i], LOCK_LONG);
        abandon_orch(p, a, 600000); /* ten minutes */
        duro_orch_item_free(a);
        raise_event(p, ids[i], "\"e\"", 0);
    }
    duro_orch_item *none = fetch_orch(p, LOCK_LONG);
    CHECK_MSG(none == NULL, "'%s' was not held by its abandon delay",
              none ? none->instance_id : "");
    duro_orch_item_free(none);
    for (int i = 0; i < 4; i++) {
        int terminate = i % 2 == 1;
        if (i < 2) { /* one message */
            duro_work_item w = work(terminate ? DURO_WORK_TERMINATE_INSTANCE
                                              : DURO_WORK_CANCEL_INSTANCE,
                                    ids[i]);
            w.reason = "stop";
            w.requested_by = "pv";
            CHECK_PRC(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_OK, &e);
        } else {
            /* the bulk calls (version 9) decide it in their own
             * transaction: no runtime holds it, it has not begun */
            duro_control_result res = {0};
            CHECK_PRC(request_ids(p, terminate ? DURO_CONTROL_TERMINATE : 0,
                                  &ids[i], 1, "stop", "pv", &res, &e),
                      DURO_OK, &e);
            CHECK_EQ(res.outcome, terminate ? (int)DURO_CONTROL_OUTCOME_APPLIED
                                            : (int)DURO_CANCEL_CANCELLED);
            const duro_instance_info *in;
            duro_instance_list *l = status_of(p, ids[i], &in);
            CHECK_EQ(in->status, terminate ? DURO_STATUS_TERMINATED
                                           : DURO_STATUS_CANCELLED);
            duro_instance_list_free(l);
            CHECK_EQ(count(p, ORCH, ids[i]), 0);
            continue;
        }
        duro_orch_item *b = fetch_orch_expect(p, ids[i], LOCK_LONG);
        CHECK_EQ(b->message_count, 3);
        CHECK_EQ(b->messages[2].kind, terminate ? DURO_WORK_TERMINATE_INSTANCE
                                                : DURO_WORK_CANCEL_INSTANCE);
        duro_orch_item_free(b);
    }
}

/* Fails unless res[i] is {outcome[i], status[i]} for each id. */
static void expect_outcomes(int control, const char *const *ids,
                            const duro_control_result *res, const int *outcome,
                            const int *status, size_t n)
{
    const char *(*name)(int) =
        control != 0 ? duro_control_outcome_name : duro_cancel_outcome_name;
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(res[i].outcome == outcome[i] && res[i].status == status[i],
                  "%s (#%zu): outcome %s status %s, expected %s %s", ids[i], i,
                  name(res[i].outcome), duro_status_name(res[i].status),
                  name(outcome[i]), duro_status_name(status[i]));
}

/* The instances the *_instances outcome tests ask about: pend Pending with
 * its START held by a runtime (the returned item: free it), fresh Pending
 * and not begun, run Running (one activity), comp, fail and canc ended so,
 * asked Running with a cancellation requested ("earlier", by "dave"). */
static duro_orch_item *outcome_fixture(duro_provider *p)
{
    duro_orch_item *held = start_held(p, "pend");
    start(p, "fresh");
    begin(p, "run", 1);
    begin(p, "comp", 0);
    finish(p, "comp");
    begin(p, "fail", 0);
    end_as(p, "fail", DURO_STATUS_FAILED, NULL);
    begin(p, "canc", 0);
    end_as(p, "canc", DURO_STATUS_CANCELLED, NULL);
    begin(p, "asked", 0);
    enqueue_cancel(p, "asked", "earlier", "dave");
    return held;
}

PV_TEST(cancel_instances_reports_one_outcome_per_id)
{
    duro_provider *p = pv_open();
    require_v4(p);
    duro_orch_item *held = outcome_fixture(p);
    const char *ids[] = {"pend",  "run", "comp",  "fail", "canc",  "asked",
                         "ghost", "run", "ghost", "pend", "fresh", "fresh"};
    enum { N = sizeof(ids) / sizeof(ids[0]) };
    static const int outcome[N] = {
        DURO_CANCEL_REQUESTED,         DURO_CANCEL_REQUESTED,
        DURO_CANCEL_NOT_CANCELLABLE,   DURO_CANCEL_NOT_CANCELLABLE,
        DURO_CANCEL_ALREADY_CANCELLED, DURO_CANCEL_ALREADY_CANCELLED,
        DURO_CANCEL_NOT_FOUND,         DURO_CANCEL_DUPLICATE,
        DURO_CANCEL_DUPLICATE,         DURO_CANCEL_DUPLICATE,
        DURO_CANCEL_CANCELLED,         DURO_CANCEL_DUPLICATE};
    static const int status[N] = {
        DURO_STATUS_PENDING,   DURO_STATUS_RUNNING,   DURO_STATUS_COMPLETED,
        DURO_STATUS_FAILED,    DURO_STATUS_CANCELLED, DURO_STATUS_RUNNING,
        DURO_STATUS_NOT_FOUND, DURO_STATUS_RUNNING,   DURO_STATUS_NOT_FOUND,
        DURO_STATUS_PENDING,   DURO_STATUS_PENDING,   DURO_STATUS_PENDING};
    duro_control_result res[N];
    duro_error e;
    int64_t t0 = duro_now_ms();
    CHECK_PRC(request_ids(p, 0, ids, N, "bulk", "ops", res, &e), DURO_OK, &e);
    int64_t t1 = duro_now_ms();
    expect_outcomes(0, ids, res, outcome, status, N);
    /* Recorded and enqueued once for each instance it cancelled; the
     * earlier request stays. */
    const duro_instance_info *in;
    const char *cancelled[] = {"pend", "run", "fresh"};
    for (int i = 0; i < 3; i++) {
        duro_instance_list *l = status_of(p, cancelled[i], &in);
        CHECK_STR(in->cancel_reason, "bulk");
        CHECK_STR(in->cancelled_by, "ops");
        CHECK_INT(in->cancel_requested_ms, >=, t0 - CLOCK_SLACK_MS);
        CHECK_INT(in->cancel_requested_ms, <=, t1 + CLOCK_SLACK_MS);
        duro_instance_list_free(l);
    }
    duro_instance_list *l = status_of(p, "asked", &in);
    CHECK_STR(in->cancel_reason, "earlier");
    CHECK_STR(in->cancelled_by, "dave");
    duro_instance_list_free(l);
    l = status_of(p, "comp", &in);
    CHECK_EQ(in->cancel_requested_ms, 0);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "pend"), 2); /* its START and the cancel */
    CHECK_EQ(count(p, ORCH, "run"), 1);
    CHECK_EQ(count(p, ORCH, "asked"), 1);
    CHECK_EQ(count(p, ORCH, "fresh"), 0); /* decided: nothing queued */
    duro_instance_list *fl = status_of(p, "fresh", &in);
    CHECK_EQ(in->status, DURO_STATUS_CANCELLED);
    duro_instance_list_free(fl);
    CHECK_EQ(count(p, ORCH, "comp") + count(p, ORCH, "fail") +
                 count(p, ORCH, "canc"),
             0);
    expect_no_instance(p, "ghost");
    /* The message carries the reason and requester, visible at once. */
    duro_orch_item *a = fetch_orch_for(p, "run", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_CANCEL_INSTANCE);
    CHECK_STR(a->messages[0].reason, "bulk");
    CHECK_STR(a->messages[0].requested_by, "ops");
    CHECK_STR(a->cancel_reason, "bulk");
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    /* Asking again: what it cancelled now counts as already cancelled. */
    CHECK_PRC(request_ids(p, 0, ids, 2, "again", NULL, res, &e), DURO_OK, &e);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    CHECK_EQ(res[1].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    CHECK_EQ(count(p, ORCH, "run"), 1);
    const char *fresh = "fresh";
    CHECK_PRC(request_ids(p, 0, &fresh, 1, "again", NULL, res, &e), DURO_OK,
              &e);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    CHECK_EQ(res[0].status, DURO_STATUS_CANCELLED);
    duro_orch_item_free(held);
}

/* cancel_instances (control 0) or control_instances refuses NULL arrays,
 * NULL, empty and oversized ids, oversized reasons and requesters, more
 * than a batch (control_instances also an unknown control), leaving the
 * results zero and the store as it was; exactly a batch works. */
static void ids_refuse_bad_input(duro_provider *p, int control)
{
    begin(p, "run", 1);
    duro_orch_item *held = start_held(p, "pend");
    duro_error e;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_control_result res[DURO_BULK_BATCH_MAX + 1];
    CHECK_PRC(request_ids(p, control, NULL, 0, NULL, NULL, NULL, &e), DURO_OK,
              &e);
    const char *ids[2] = {"run", "pend"};
    CHECK_PFAIL(request_ids(p, control, NULL, 1, "r", "b", res, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(request_ids(p, control, ids, 2, "r", "b", NULL, &e),
                DURO_INVALID, 0, &e);
    const char *with_null[3] = {"run", NULL, "pend"};
    const char *with_empty[3] = {"run", "pend", ""};
    memset(res, 0x5a, sizeof(res));
    CHECK_PFAIL(request_ids(p, control, with_null, 3, "r", "b", res, &e),
                DURO_INVALID, 0, &e);
    CHECK_EQ(res[0].outcome, 0); /* results left zero: none */
    memset(res, 0x5a, sizeof(res));
    CHECK_PFAIL(request_ids(p, control, with_empty, 3, "r", "b", res, &e),
                DURO_INVALID, 0, &e);
    CHECK_EQ(res[0].outcome, 0);
    char *long_id = repeat('i', 1025);
    char *long_text = repeat('t', 1025);
    const char *with_long[2] = {"run", long_id};
    CHECK_PFAIL(request_ids(p, control, with_long, 2, "r", "b", res, &e),
                DURO_TOO_LARGE, 0, &e);
    CHECK_PFAIL(request_ids(p, control, ids, 2, long_text, "b", res, &e),
                DURO_TOO_LARGE, 0, &e);
    CHECK_PFAIL(request_ids(p, control, ids, 2, "r", long_text, res, &e),
                DURO_TOO_LARGE, 0, &e);
    free(long_id);
    free(long_text);
    /* More than a batch in one call is refused whole. */
    const char *many[DURO_BULK_BATCH_MAX + 1];
    for (int i = 0; i <= DURO_BULK_BATCH_MAX; i++)
        many[i] = i % 2 ? "run" : "pend";
    memset(res, 0x5a, sizeof(res));
    CHECK_PFAIL(request_ids(p, control, many, DURO_BULK_BATCH_MAX + 1, "r", "b",
                            res, &e),
                DURO_TOO_LARGE, 0, &e);
    CHECK_EQ(res[0].outcome, 0);
    CHECK_EQ(res[DURO_BULK_BATCH_MAX].outcome, 0);
    /* An unknown control, whatever the count. */
    static const int bad_controls[] = {0, DURO_CONTROL_RESUME + 1, -1, 99};
    for (size_t i = 0;
         control != 0 && i < sizeof(bad_controls) / sizeof(bad_controls[0]);
         i++) {
        memset(res, 0x5a, sizeof(res));
        CHECK_PFAIL(
            p->control_instances(p, bad_controls[i], ids, 2, "r", "b", res, &e),
            DURO_INVALID, 0, &e);
        CHECK_EQ(res[0].outcome, 0);
        CHECK_EQ(res[1].status, 0);
        CHECK_PFAIL(p->control_instances(p, bad_controls[i], NULL, 0, "r", "b",
                                         NULL, &e),
                    DURO_INVALID, 0, &e);
    }
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* Exactly a batch is fine: two instances, the rest repeats. */
    CHECK_PRC(
        request_ids(p, control, many, DURO_BULK_BATCH_MAX, "r", "b", res, &e),
        DURO_OK, &e);
    int sent = control != 0 ? (int)DURO_CONTROL_OUTCOME_REQUESTED
                            : (int)DURO_CANCEL_REQUESTED;
    int duplicate = control != 0 ? (int)DURO_CONTROL_OUTCOME_DUPLICATE
                                 : (int)DURO_CANCEL_DUPLICATE;
    CHECK_EQ(res[0].outcome, sent);
    CHECK_EQ(res[1].outcome, sent);
    for (int i = 2; i < DURO_BULK_BATCH_MAX; i++)
        CHECK_EQ(res[i].outcome, duplicate);
    CHECK_EQ(res[DURO_BULK_BATCH_MAX - 1].status, DURO_STATUS_RUNNING);
    CHECK_EQ(count(p, ORCH, "run"), 1);
    CHECK_EQ(count(p, ORCH, "pend"), 2);
    duro_orch_item_free(held);
}

PV_TEST(cancel_instances_refuses_bad_input_and_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v4(p);
    ids_refuse_bad_input(p, 0);
}

/* The instances the *_matching filter tests select from: alpha a-2 (v1)
 * and a-3 (v2) Running, a-4 Completed, a-5 Running with a cancellation
 * requested, beta b-2 Running; created later, Pending alpha a-1 (v1) and
 * beta b-1. Returns the creation time of the later ones (all of the first
 * ones were created before it). */
static int64_t matching_fixture(duro_provider *p)
{
    /* First batch of creations ... */
    run_to(p, "a-2", "alpha", "v1", DURO_STATUS_RUNNING);
    run_to(p, "a-3", "alpha", "v2", DURO_STATUS_RUNNING);
    run_to(p, "a-4", "alpha", "v1", DURO_STATUS_COMPLETED);
    run_to(p, "a-5", "alpha", "v1", DURO_STATUS_RUNNING);
    enqueue_cancel(p, "a-5", "earlier", "dave");
    run_to(p, "b-2", "beta", "v1", DURO_STATUS_RUNNING);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "b-2", &in);
    int64_t first_max = in->created_ms;
    duro_instance_list_free(l);
    clock_past(first_max);
    /* ... and a second, created later: two Pending ones. */
    duro_work_item w = work(DURO_WORK_START, "a-1");
    w.name = "alpha";
    w.version = "v1";
    enqueue(p, &w, 0);
    w = work(DURO_WORK_START, "b-1");
    w.name = "beta";
    enqueue(p, &w, 0);
    l = status_of(p, "a-1", &in);
    int64_t second_min = in->created_ms;
    duro_instance_list_free(l);
    CHECK(second_min > first_max);
    return second_min;
}

PV_TEST(cancel_matching_selects_by_filter_and_a_dry_run_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v4(p);
    int64_t second_min = matching_fixture(p);
    const duro_instance_info *in;
    duro_instance_list *l;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.name = "alpha";
    duro_bulk_result *r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_EQ(r->count, 3);
    CHECK_IDS(r, "a-1,a-2,a-3");
    duro_bulk_result_free(r);
    f.version = "v2";
    r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_IDS(r, "a-3");
    duro_bulk_result_free(r);
    f.version = NULL;
    f.status_mask = 1u << DURO_STATUS_PENDING;
    r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_IDS(r, "a-1");
    duro_bulk_result_free(r);
    f.name = NULL;
    f.status_mask = 1u << DURO_STATUS_RUNNING;
    r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_IDS(r, "a-2,a-3,b-2");
    duro_bulk_result_free(r);
    /* created_after is inclusive, created_before exclusive */
    f.status_mask = 0;
    f.created_after_ms = second_min;
    r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_IDS(r, "a-1,b-1");
    duro_bulk_result_free(r);
    f.created_after_ms = 0;
    f.created_before_ms = second_min;
    r = bulk_cancel(p, &f, 1, 100, "r", "b");
    CHECK_IDS(r, "a-2,a-3,b-2");
    duro_bulk_result_free(r);
    /* The count is whole when the ids are capped. */
    f.created_before_ms = 0;
    r = bulk_cancel(p, &f, 1, 2, "r", "b");
    CHECK_EQ(r->count, 5);
    CHECK_IDS(r, "a-1,a-2");
    duro_bulk_result_free(r);
    r = bulk_cancel(p, &f, 1, 0, "r", "b");
    CHECK_EQ(r->count, 5);
    CHECK_EQ(r->id_count, 0);
    duro_bulk_result_free(r);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);

    /* The real run cancels exactly what the dry run reported. */
    memset(&f, 0, sizeof(f));
    f.name = "alpha";
    int64_t t0 = duro_now_ms();
    r = dry_then_real(p, 0, &f, "sweep", "ops");
    int64_t t1 = duro_now_ms();
    CHECK_IDS(r, "a-1,a-2,a-3");
    CHECK_EQ(r->applied, 1); /* a-1 */
    duro_bulk_result_free(r);
    const char *swept[] = {"a-1", "a-2", "a-3"};
    for (int i = 0; i < 3; i++) {
        l = status_of(p, swept[i], &in);
        CHECK_STR(in->cancel_reason, "sweep");
        CHECK_STR(in->cancelled_by, "ops");
        CHECK_INT(in->cancel_requested_ms, >=, t0 - CLOCK_SLACK_MS);
        CHECK_INT(in->cancel_requested_ms, <=, t1 + CLOCK_SLACK_MS);
        duro_instance_list_free(l);
    }
    CHECK_EQ(count(p, ORCH, "a-1"), 0); /* not begun: Cancelled at once */
    CHECK_EQ(count(p, ORCH, "a-2"), 1);
    l = status_of(p, "a-1", &in);
    CHECK_EQ(in->status, DURO_STATUS_CANCELLED);
    duro_instance_list_free(l);
    l = status_of(p, "a-5", &in);
    CHECK_STR(in->cancel_reason, "earlier");
    duro_instance_list_free(l);
    const char *kept[] = {"a-4", "b-1", "b-2"};
    for (int i = 0; i < 3; i++) {
        l = status_of(p, kept[i], &in);
        CHECK_EQ(in->cancel_requested_ms, 0);
        duro_instance_list_free(l);
    }
    CHECK_EQ(count(p, ORCH, "b-2"), 0);
    /* Nothing left to cancel. */
    r = bulk_cancel(p, &f, 0, 100, "sweep", "ops");
    CHECK_EQ(r->count, 0);
    duro_bulk_result_free(r);
}

/* Starts n Pending instances "<prefix>NNNNN" of orchestration `name`. */
static void start_many(duro_provider *p, const char *prefix, const char *name,
                       int n)
{
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%05d", prefix, i);
        duro_work_item w = work(DURO_WORK_START, id);
        w.name = name;
        enqueue(p, &w, 0);
    }
}

/* Whether request `control` (0: a cancel) reached instance `id`: its
 * cancellation is recorded, or (a control, on an instance started by
 * start_many) its message is queued beside the START. 1 yes, 0 no, -1 the
 * store failed. No CHECKs: threads call it. */
static int request_reached(duro_provider *p, int control, const char *id)
{
    duro_error e;
    if (control != 0) {
        uint64_t n = 0;
        if (p->count_messages(p, ORCH, id, &n, &e) != DURO_OK)
            return -1;
        if (n == 2)
            return 1;
        /* or decided at once (version 9): no longer Pending */
        duro_instance_list *l = NULL;
        if (p->get_instance(p, id, &l, &e) != DURO_OK)
            return -1;
        int reached = l->items[0].status != DURO_STATUS_PENDING;
        duro_instance_list_free(l);
        return reached;
    }
    duro_instance_list *l = NULL;
    if (p->get_instance(p, id, &l, &e) != DURO_OK)
        return -1;
    int reached = l->items[0].cancel_requested_ms != 0;
    duro_instance_list_free(l);
    return reached;
}

/* How many instances of orchestration `name` have a cancel request. */
static size_t requested_of(duro_provider *p, const char *name, size_t *total)
{
    duro_instance_filter f;
    memset(&f, 0, sizeof(f));
    f.name = name;
    duro_instance_list *l = NULL;
    duro_error e;
    CHECK_PRC(p->list_instances(p, &f, &l, &e), DURO_OK, &e);
    size_t n = 0;
    for (size_t i = 0; i < l->count; i++)
        n += l->items[i].cancel_requested_ms != 0;
    if (total != NULL)
        *total = l->count;
    duro_instance_list_free(l);
    return n;
}

/* A sweep of request `control` (0: cancel_matching) over more than two
 * batches: the dry run and the real run list the same ids in order, one
 * message each, another orchestration untouched. */
static void matching_handles_more_than_a_batch(duro_provider *p, int control)
{
    const int n = 2 * DURO_BULK_BATCH_MAX + 1;
    start_many(p, "g-", "many", n);
    start_many(p, "o-", "other", 20);
    /* Every other g- instance held by a runtime in its first turn (the
     * request goes on its queue); the others not begun (decided at once,
     * version 9), their STARTs held back by an abandon delay. */
    duro_orch_item **held = calloc((size_t)n, sizeof(*held));
    CHECK(held != NULL);
    int n_held = 0;
    duro_orch_item *it;
    while ((it = fetch_orch(p, LOCK_LONG)) != NULL) {
        int k = -1;
        if (sscanf(it->instance_id, "g-%d", &k) == 1 && k % 2 == 0) {
            held[n_held++] = it;
        } else {
            abandon_orch(p, it, 600000);
            duro_orch_item_free(it);
        }
    }
    CHECK_EQ(n_held, n / 2 + 1);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.name = "many";
    duro_bulk_result *dry =
        bulk_request(p, control, &f, 1, (size_t)n, "r", "b");
    CHECK_EQ(dry->count, n);
    CHECK_EQ(dry->id_count, n);
    CHECK_EQ(dry->applied, (uint64_t)(n - n_held));
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "g-%05d", i);
        CHECK_STR(dry->ids[i], id);
    }
    CHECK_EQ(count(p, ORCH, NULL), (uint64_t)(n + 20)); /* the STARTs */
    duro_bulk_result *r = bulk_request(p, control, &f, 0, (size_t)n, "r", "b");
    CHECK_EQ(r->count, n);
    CHECK_EQ(r->applied, (uint64_t)(n - n_held));
    char *a = ids_text(dry), *b = ids_text(r);
    CHECK_MSG(strcmp(a, b) == 0,
              "the real run's ids differ from the dry run's");
    free(a);
    free(b);
    duro_bulk_result_free(dry);
    duro_bulk_result_free(r);
    /* a message more for each held one, the START gone of each other */
    CHECK_EQ(count(p, ORCH, NULL), (uint64_t)(n + 20 + n_held - (n - n_held)));
    CHECK_EQ(count(p, ORCH, "g-00000"), 2);
    CHECK_EQ(count(p, ORCH, "g-00001"), 0);
    CHECK_EQ(count(p, ORCH, "o-00000"), 1);
    for (int i = 0; i < n_held; i++)
        duro_orch_item_free(held[i]);
    free(held);
    if (control == 0) {
        size_t total = 0;
        CHECK_EQ(requested_of(p, "many", &total), n);
        CHECK_EQ(total, n);
        CHECK_EQ(requested_of(p, "other", &total), 0);
        CHECK_EQ(total, 20);
    }
}

PV_TEST(cancel_matching_handles_more_than_a_batch)
{
    duro_provider *p = pv_open();
    require_v4(p);
    matching_handles_more_than_a_batch(p, 0);
}

/* Creates instances "new-NNNNN" of `name` once the sweep's first batch is
 * visible (its first id reached), until told to stop; counts those whose
 * creation ended while the sweep still ran. */
typedef struct creator {
    duro_provider *p;
    int control; /* the sweep's request (0: cancel) */
    const char *name;
    const char *first_id; /* reached by the sweep's first batch */
    char prefix[32];
    _Atomic int sweep_done;
    _Atomic int stop;
    _Atomic int created;        /* in all */
    _Atomic int created_during; /* finished while the sweep ran */
    int rc;
} creator;

static void *creator_main(void *arg)
{
    creator *c = arg;
    while (!atomic_load(&c->stop) &&
           request_reached(c->p, c->control, c->first_id) != 1)
        sched_yield();
    for (int i = 0; !atomic_load(&c->stop) && i < 100000; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%05d", c->prefix, i);
        duro_work_item w = work(DURO_WORK_START, id);
        w.name = c->name;
        duro_error e;
        int rc = c->p->enqueue_for_orchestrator(c->p, &w, 0, &e);
        if (rc != DURO_OK) {
            c->rc = rc;
            break;
        }
        atomic_fetch_add(&c->created, 1);
        if (!atomic_load(&c->sweep_done))
            atomic_fetch_add(&c->created_during, 1);
        else
            break;
    }
    return NULL;
}

/* A sweep of request `control` (0: cancel_matching) reaches exactly the
 * set that matched when it began. */
static void
matching_never_takes_instances_created_while_it_runs(duro_provider *p,
                                                     int control)
{
    /* Instances created during the sweep sort after the set ("new-" >
     * "old-"), where a sweep that read the store as it went would find
     * them. The creator starts once the first batch has committed; the
     * round repeats (under another name) until a creation landed while
     * the sweep still ran. On a loaded machine the creator may not run
     * between the first batch and the sweep's end for several rounds in a
     * row, so rounds go on until the race happened or a deadline. */
    const int n = 3 * DURO_BULK_BATCH_MAX;
    int raced = 0, round = 0;
    int64_t deadline = test_now_ms() + 60000;
    for (; !raced && (round < 5 || test_now_ms() < deadline); round++) {
        char name[32], old_prefix[32], first[64];
        snprintf(name, sizeof(name), "orch-%d", round);
        snprintf(old_prefix, sizeof(old_prefix), "old-%d-", round);
        snprintf(first, sizeof(first), "%s%05d", old_prefix, 0);
        start_many(p, old_prefix, name, n);
        creator c;
        memset(&c, 0, sizeof(c));
        c.p = p;
        c.control = control;
        c.name = name;
        c.first_id = first;
        snprintf(c.prefix, sizeof(c.prefix), "new-%d-", round);
        uint64_t queued = count(p, ORCH, NULL);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, creator_main, &c) == 0);
        duro_bulk_filter f;
        memset(&f, 0, sizeof(f));
        f.name = name;
        duro_bulk_result *r = NULL;
        duro_error e;
        int rc = request_matching(p, control, &f, 0, (size_t)n, "sweep", "ops",
                                  &r, &e);
        atomic_store(&c.sweep_done, 1);
        atomic_store(&c.stop, 1);
        pthread_join(t, NULL);
        CHECK_PRC(rc, DURO_OK, &e);
        CHECK_RC(c.rc, DURO_OK);
        /* Exactly the set that was there when it began, none begun, so
         * each decided at once (version 9), its START gone: the new
         * instances hold only their STARTs. */
        CHECK_EQ(r->count, n);
        CHECK_EQ(r->applied, n);
        CHECK_EQ(r->id_count, n);
        for (int i = 0; i < n && (size_t)i < r->id_count; i++) {
            char id[64];
            snprintf(id, sizeof(id), "%s%05d", old_prefix, i);
            CHECK_STR(r->ids[i], id);
        }
        duro_bulk_result_free(r);
        CHECK_EQ(count(p, ORCH, NULL),
                 queued - (uint64_t)n + (uint64_t)atomic_load(&c.created));
        duro_instance_filter lf;
        memset(&lf, 0, sizeof(lf));
        lf.name = name;
        duro_instance_list *l = NULL;
        CHECK_PRC(p->list_instances(p, &lf, &l, &e), DURO_OK, &e);
        CHECK_EQ(l->count, (size_t)(n + atomic_load(&c.created)));
        for (size_t i = 0; control == 0 && i < l->count; i++) {
            int old = strncmp(l->items[i].instance_id, old_prefix,
                              strlen(old_prefix)) == 0;
            CHECK_MSG((l->items[i].cancel_requested_ms != 0) == old,
                      "%s: cancel requested %lld", l->items[i].instance_id,
                      (long long)l->items[i].cancel_requested_ms);
        }
        duro_instance_list_free(l);
        raced = atomic_load(&c.created_during) > 0;
    }
    CHECK_MSG(raced,
              "in %d rounds no instance was created while a sweep ran: "
              "the race was not exercised",
              round);
}

PV_TEST(cancel_matching_never_takes_instances_created_while_it_runs)
{
    duro_provider *p = pv_open();
    require_v4(p);
    matching_never_takes_instances_created_while_it_runs(p, 0);
}

/* cancel_matching (control 0) or control_matching refuses a NULL filter
 * or out, a finish bound, an oversized reason, requester, name or
 * version; *out is left NULL. */
static void matching_refuses_bad_filters(duro_provider *p, int control)
{
    duro_error e;
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    duro_bulk_result *r = (duro_bulk_result *)&f; /* must be reset */
    CHECK_PFAIL(request_matching(p, control, NULL, 0, 10, "r", "b", &r, &e),
                DURO_INVALID, 0, &e);
    CHECK(r == NULL);
    CHECK_PFAIL(request_matching(p, control, &f, 0, 10, "r", "b", NULL, &e),
                DURO_INVALID, 0, &e);
    f.finished_before_ms = INT64_MAX;
    CHECK_PFAIL(request_matching(p, control, &f, 0, 10, "r", "b", &r, &e),
                DURO_INVALID, 0, &e);
    f.finished_before_ms = 0;
    char *long_text = repeat('t', 1025);
    CHECK_PFAIL(request_matching(p, control, &f, 0, 10, long_text, "b", &r, &e),
                DURO_TOO_LARGE, 0, &e);
    CHECK_PFAIL(request_matching(p, control, &f, 0, 10, "r", long_text, &r, &e),
                DURO_TOO_LARGE, 0, &e);
    f.name = long_text;
    CHECK_PFAIL(request_matching(p, control, &f, 0, 10, "r", "b", &r, &e),
                DURO_TOO_LARGE, 0, &e);
    f.name = NULL;
    f.version = long_text;
    CHECK_PFAIL(request_matching(p, control, &f, 1, 10, "r", "b", &r, &e),
                DURO_TOO_LARGE, 0, &e);
    CHECK(r == NULL);
    free(long_text);
}

PV_TEST(bulk_calls_refuse_bad_filters_and_change_nothing)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "run", 1);
    begin(p, "done", 0);
    finish(p, "done");
    start(p, "pend");
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_error e;
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    duro_bulk_result *r = (duro_bulk_result *)&s;
    matching_refuses_bad_filters(p, 0);
    static const uint32_t not_live[] = {1u << DURO_STATUS_COMPLETED,
                                        1u << DURO_STATUS_FAILED,
                                        1u << DURO_STATUS_CANCELLED,
                                        1u << DURO_STATUS_TERMINATED,
                                        1u << DURO_STATUS_NOT_FOUND,
                                        1u << DURO_STATUS_CONTINUED_AS_NEW,
                                        (1u << DURO_STATUS_RUNNING) |
                                            (1u << DURO_STATUS_COMPLETED)};
    for (size_t i = 0; i < sizeof(not_live) / sizeof(not_live[0]); i++) {
        f.status_mask = not_live[i];
        CHECK_PFAIL(p->cancel_matching(p, &f, "r", "b", 0, 10, &r, &e),
                    DURO_INVALID, 0, &e);
    }
    f.status_mask = 0;
    char *long_text = repeat('t', 1025);

    /* Purge: never a live status, even asked for; a finish bound always. */
    f.finished_before_ms = INT64_MAX;
    CHECK_PFAIL(p->purge_instances(p, NULL, 0, 10, &r, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->purge_instances(p, &f, 0, 10, NULL, &e), DURO_INVALID, 0,
                &e);
    static const uint32_t live[] = {1u << DURO_STATUS_PENDING,
                                    1u << DURO_STATUS_RUNNING,
                                    1u << DURO_STATUS_SUSPENDED,
                                    1u << DURO_STATUS_NOT_FOUND,
                                    1u << DURO_STATUS_CONTINUED_AS_NEW,
                                    (1u << DURO_STATUS_RUNNING) |
                                        (1u << DURO_STATUS_COMPLETED)};
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
        f.status_mask = live[i];
        CHECK_PFAIL(p->purge_instances(p, &f, 0, 10, &r, &e), DURO_INVALID, 0,
                    &e);
        CHECK_PFAIL(p->purge_instances(p, &f, 1, 10, &r, &e), DURO_INVALID, 0,
                    &e);
    }
    f.status_mask = 0;
    f.finished_before_ms = 0;
    CHECK_PFAIL(p->purge_instances(p, &f, 0, 10, &r, &e), DURO_INVALID, 0, &e);
    f.finished_before_ms = -5;
    CHECK_PFAIL(p->purge_instances(p, &f, 0, 10, &r, &e), DURO_INVALID, 0, &e);
    f.finished_before_ms = INT64_MAX;
    f.version = long_text;
    CHECK_PFAIL(p->purge_instances(p, &f, 0, 10, &r, &e), DURO_TOO_LARGE, 0,
                &e);
    CHECK(r == NULL);
    free(long_text);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(purge_deletes_finished_instances_with_their_descendants)
{
    duro_provider *p = pv_open();
    require_v4(p);
    /* p1 (job) -> p1-kid (sub): both finished long ago: both go.
     * p2 (job) -> p2-kid running: kept whole.
     * p3 (job, finished recently) -> p3-kid (job, long ago): the kid goes
     *   alone (its ancestor is not selected).
     * p4 (job) -> p4-kid (job): both selected, purged once, together.
     * live (job, running), recent (job, finished recently): kept. */
    begin(p, "p1", 0);
    begin_child(p, "p1", "p1-kid");
    begin(p, "p2", 0);
    begin_child(p, "p2", "p2-kid");
    begin(p, "p3", 0);
    begin_child(p, "p3", "p3-kid");
    begin(p, "p4", 0);
    begin_child(p, "p4", "p4-kid");
    begin(p, "live", 1);
    begin(p, "recent", 0);
    end_as(p, "live", DURO_STATUS_RUNNING, "job");
    end_as(p, "p1-kid", DURO_STATUS_COMPLETED, "sub");
    end_as(p, "p1", DURO_STATUS_COMPLETED, "job");
    end_as(p, "p2", DURO_STATUS_FAILED, "job");
    end_as(p, "p3-kid", DURO_STATUS_CANCELLED, "job");
    end_as(p, "p4-kid", DURO_STATUS_COMPLETED, "job");
    end_as(p, "p4", DURO_STATUS_COMPLETED, "job");
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "p4", &in);
    int64_t old_max = in->finished_ms;
    duro_instance_list_free(l);
    clock_past(old_max);
    end_as(p, "p3", DURO_STATUS_COMPLETED, "job");
    end_as(p, "recent", DURO_STATUS_COMPLETED, "job");
    l = status_of(p, "p3", &in);
    int64_t bound = in->finished_ms; /* exclusive: p3 itself is not old */
    duro_instance_list_free(l);
    CHECK(bound > old_max);
    /* Leftovers a finished instance may hold: a late message, the worker
     * row of an activity its last turn did not cancel. */
    raise_event(p, "p1", "\"late\"", 0);
    CHECK_EQ(count(p, WORKER, "p1-kid"), 1);
    CHECK_EQ(count(p, ORCH, "p1"), 1);

    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.name = "job";
    f.finished_before_ms = bound;
    duro_bulk_result *dry = bulk_purge(p, &f, 1, 100);
    CHECK_EQ(dry->count, 5);
    CHECK_IDS(dry, "p1,p1-kid,p3-kid,p4,p4-kid");
    /* Narrower filters. */
    f.status_mask = 1u << DURO_STATUS_CANCELLED;
    duro_bulk_result *r = bulk_purge(p, &f, 1, 100);
    CHECK_IDS(r, "p3-kid");
    duro_bulk_result_free(r);
    f.status_mask = 0;
    f.finished_before_ms = old_max; /* p4 finished at old_max: excluded */
    r = bulk_purge(p, &f, 1, 100);
    for (size_t i = 0; i < r->id_count; i++)
        CHECK(strcmp(r->ids[i], "p4") != 0);
    duro_bulk_result_free(r);
    f.finished_before_ms = bound;
    r = bulk_purge(p, &f, 1, 2);
    CHECK_EQ(r->count, 5);
    CHECK_EQ(r->id_count, 2);
    duro_bulk_result_free(r);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);

    /* The real run deletes exactly what the dry run reported. */
    r = bulk_purge(p, &f, 0, 100);
    CHECK_EQ(r->count, dry->count);
    char *dry_ids = ids_text(dry);
    CHECK_IDS(r, dry_ids);
    free(dry_ids);
    duro_bulk_result_free(r);
    duro_bulk_result_free(dry);
    const char *gone[] = {"p1", "p1-kid", "p3-kid", "p4", "p4-kid"};
    duro_error e;
    for (int i = 0; i < 5; i++) {
        expect_no_instance(p, gone[i]);
        duro_history *h = NULL;
        CHECK_PFAIL(p->read_history(p, gone[i], 1, &h, &e), DURO_NOT_FOUND, 0,
                    &e);
        CHECK_EQ(count(p, ORCH, gone[i]), 0);
        CHECK_EQ(count(p, WORKER, gone[i]), 0);
    }
    const char *kept[] = {"p2", "p2-kid", "p3", "live", "recent"};
    for (int i = 0; i < 5; i++) {
        l = get(p, kept[i]);
        duro_instance_list_free(l);
        CHECK(history_len(p, kept[i], 1) > 0);
    }
    CHECK_EQ(count(p, WORKER, "p2-kid"), 1);
    /* Nothing left to purge; a live descendant's end lets its tree go. */
    r = bulk_purge(p, &f, 0, 100);
    CHECK_EQ(r->count, 0);
    duro_bulk_result_free(r);
    end_as(p, "p2-kid", DURO_STATUS_COMPLETED, NULL);
    f.finished_before_ms = INT64_MAX;
    f.name = NULL;
    r = bulk_purge(p, &f, 0, 100);
    CHECK_IDS(r, "p2,p2-kid,p3,recent");
    duro_bulk_result_free(r);
    l = get(p, "live");
    duro_instance_list_free(l);
}

PV_TEST(purge_handles_more_than_a_batch)
{
    duro_provider *p = pv_open();
    require_v4(p);
    const int n = DURO_BULK_BATCH_MAX + 1;
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "k-%05d", i);
        run_to(p, id, "old", NULL, DURO_STATUS_COMPLETED);
    }
    run_to(p, "other-1", "new", NULL, DURO_STATUS_COMPLETED);
    run_to(p, "running-1", "old", NULL, DURO_STATUS_RUNNING);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.name = "old";
    f.finished_before_ms = INT64_MAX;
    duro_bulk_result *dry = bulk_purge(p, &f, 1, (size_t)n);
    CHECK_EQ(dry->count, n);
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "k-%05d", i);
        CHECK_STR(dry->ids[i], id);
    }
    duro_bulk_result *r = bulk_purge(p, &f, 0, (size_t)n);
    CHECK_EQ(r->count, n);
    char *a = ids_text(dry), *b = ids_text(r);
    CHECK_MSG(strcmp(a, b) == 0,
              "the real run's ids differ from the dry run's");
    free(a);
    free(b);
    duro_bulk_result_free(dry);
    duro_bulk_result_free(r);
    size_t total = 0;
    requested_of(p, "old", &total);
    CHECK_EQ(total, 1); /* running-1 */
    requested_of(p, "new", &total);
    CHECK_EQ(total, 1);
}

/* Every instance of `name` is either untouched or fully done by a bulk
 * call that failed part-way: returns how many are done. */
static size_t cancelled_consistently(duro_provider *p, const char *name,
                                     size_t n)
{
    size_t total = 0;
    size_t done = requested_of(p, name, &total);
    CHECK_EQ(total, n);
    /* Not begun, each was cancelled at once (version 9) or not at all: a
     * START for each one left, nothing for the others, which are
     * Cancelled */
    CHECK_EQ(count(p, ORCH, NULL), n - done);
    duro_instance_filter f;
    memset(&f, 0, sizeof(f));
    f.name = name;
    f.status_mask = 1u << DURO_STATUS_CANCELLED;
    duro_instance_list *l = NULL;
    duro_error e;
    CHECK_PRC(p->list_instances(p, &f, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, done);
    duro_instance_list_free(l);
    return done;
}

/* How many of ids[0..n) (instances of `name`) a purge that failed
 * part-way deleted; each is either whole or gone with its history. */
static size_t purged_consistently(duro_provider *p, const char *name,
                                  const char **ids, size_t n)
{
    size_t present = 0;
    requested_of(p, name, &present);
    if (present == n)
        return 0;
    size_t gone = 0;
    duro_error e;
    for (size_t i = 0; i < n; i++) {
        duro_instance_list *l = NULL;
        int rc = p->get_instance(p, ids[i], &l, &e);
        duro_instance_list_free(l);
        uint64_t ex = 0;
        int rc2 = p->latest_execution_id(p, ids[i], &ex, &e);
        duro_history *h = NULL;
        int rc3 = p->read_history(p, ids[i], 1, &h, &e);
        size_t events = h != NULL ? h->count : 0;
        duro_history_free(h);
        if (rc == DURO_NOT_FOUND) {
            CHECK_EQ(rc2, DURO_NOT_FOUND);
            CHECK_EQ(rc3, DURO_NOT_FOUND);
            gone++;
        } else {
            CHECK_RC(rc, DURO_OK);
            CHECK_RC(rc3, DURO_OK);
            CHECK_EQ(events, 2);
        }
    }
    CHECK_EQ(present + gone, n);
    return gone;
}

PV_TEST(cancel_failure_keeps_whole_batches)
{
    duro_provider *p = pv_open();
    require_v4(p);
    /* Three batches; faults at steps 1, 2, 4, ... until the call
     * succeeds. A failure leaves every instance untouched or fully
     * handled, and repeating the call finishes the rest exactly. Some
     * failure must come after a batch committed: the call takes at least
     * three transactions, and the doubling puts a fault in the second half
     * of its steps. */
    const size_t n = 3 * DURO_BULK_BATCH_MAX;
    start_many(p, "c-", "victim", (int)n);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.name = "victim";
    int partial = 0, succeeded = 0;
    for (uint64_t step = 1; step < (1u << 20) && !succeeded; step *= 2) {
        duro_error e;
        duro_bulk_result *r = NULL;
        factory->inject_fault(factory->ctx, p, step, step % 4 == 0);
        int rc = p->cancel_matching(p, &f, "r", "b", 0, 0, &r, &e);
        factory->inject_fault(factory->ctx, p, 0, 0);
        size_t done = cancelled_consistently(p, "victim", n);
        if (rc == DURO_OK) {
            CHECK_EQ(r->count, n);
            duro_bulk_result_free(r);
            succeeded = 1;
            break;
        }
        CHECK(r == NULL);
        CHECK(rc == DURO_BUSY || rc == DURO_STORAGE);
        if (done == 0)
            continue;
        partial = 1;
        CHECK_INT(done, <, n);
        r = bulk_cancel(p, &f, 0, 0, "r", "b");
        CHECK_EQ(r->count, n - done);
        duro_bulk_result_free(r);
        CHECK_EQ(cancelled_consistently(p, "victim", n), n);
        succeeded = 1;
    }
    CHECK(succeeded);
    CHECK_MSG(partial, "no fault fell after a committed batch");
}

PV_TEST(purge_failure_keeps_whole_batches)
{
    duro_provider *p = pv_open();
    require_v4(p);
    /* As cancel_failure_keeps_whole_batches, for purge. */
    const size_t n = 3 * DURO_BULK_BATCH_MAX;
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    int partial = 0, succeeded = 0;
    const char **ids = calloc(n, sizeof(*ids));
    CHECK(ids != NULL);
    for (size_t i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "d-%05zu", i);
        run_to(p, id, "old", NULL, DURO_STATUS_COMPLETED);
        ids[i] = xstrdup(id);
    }
    f.name = "old";
    f.finished_before_ms = INT64_MAX;
    for (uint64_t step = 1; step < (1u << 20) && !succeeded; step *= 2) {
        duro_error e;
        duro_bulk_result *r = NULL;
        factory->inject_fault(factory->ctx, p, step, step % 4 == 0);
        int rc = p->purge_instances(p, &f, 0, 0, &r, &e);
        factory->inject_fault(factory->ctx, p, 0, 0);
        size_t gone = purged_consistently(p, "old", ids, n);
        if (rc == DURO_OK) {
            CHECK_EQ(r->count, n);
            duro_bulk_result_free(r);
            succeeded = 1;
            break;
        }
        CHECK(r == NULL);
        if (gone == 0)
            continue;
        partial = 1;
        CHECK_INT(gone, <, n);
        r = bulk_purge(p, &f, 0, 0);
        CHECK_EQ(r->count, n - gone);
        duro_bulk_result_free(r);
        CHECK_EQ(purged_consistently(p, "old", ids, n), n);
        succeeded = 1;
    }
    for (size_t i = 0; i < n; i++)
        free((char *)ids[i]);
    free(ids);
    CHECK(succeeded);
    CHECK_MSG(partial, "no fault fell after a committed purge batch");
}

/* ------------------------------------------------------------------------
 * Store stats (read_store_stats). */

static duro_store_stats *stats_of(duro_provider *p)
{
    duro_error e;
    duro_store_stats *st = NULL;
    int64_t before = duro_now_ms();
    CHECK_PRC(p->read_store_stats(p, &st, &e), DURO_OK, &e);
    CHECK(st != NULL);
    CHECK_INT(st->now_ms, >=, before);
    CHECK_INT(st->now_ms, <=, duro_now_ms());
    CHECK(st->instance_count == 0 || st->instances != NULL);
    CHECK(st->problem_count == 0 || st->problems != NULL);
    CHECK_INT(st->store_size_bytes, >=, -1);
    return st;
}

/* "name/status=count,..." of a stats list. */
static void counts_text(const duro_store_count *list, size_t n, char *out,
                        size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n && used < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%s/%d=%llu",
                                 k ? "," : "", list[k].name, list[k].status,
                                 (unsigned long long)list[k].count);
}

PV_TEST(store_stats_of_an_empty_store_are_zero)
{
    duro_provider *p = pv_open();
    require_v4(p);
    duro_error e;
    CHECK_PRC(p->read_store_stats(p, NULL, &e), DURO_INVALID, &e);
    CHECK_EQ(e.retryable, 0);
    duro_store_stats *st = stats_of(p);
    CHECK_EQ(st->instance_count, 0);
    CHECK_EQ(st->problem_count, 0);
    CHECK_EQ(st->orchestrator_ready, 0);
    CHECK_EQ(st->orchestrator_delayed, 0);
    CHECK_EQ(st->orchestrator_locked, 0);
    CHECK_EQ(st->worker_ready, 0);
    CHECK_EQ(st->worker_locked, 0);
    CHECK_EQ(st->orchestrator_oldest_ready_ms, 0);
    CHECK_EQ(st->worker_oldest_ready_ms, 0);
    duro_free(st);
}

PV_TEST(store_stats_count_instances_problems_and_queue_states)
{
    duro_provider *p = pv_open();
    require_v4(p);
    duro_error e;
    /* Instances of two names in several statuses, one at a time (each is
     * the only fetchable instance when its turn runs). */
    run_to(p, "a1", "alpha", NULL, DURO_STATUS_RUNNING);
    run_to(p, "a2", "alpha", NULL, DURO_STATUS_COMPLETED);
    run_to(p, "a3", "alpha", NULL, DURO_STATUS_FAILED);
    run_to(p, "b1", "beta", NULL, DURO_STATUS_RUNNING);
    run_to(p, "b2", "beta", NULL, DURO_STATUS_RUNNING);
    run_to(p, "b3", "beta", NULL, DURO_STATUS_CANCELLED);
    /* b2 schedules four activities: rows W1..W4, visible from the ack. */
    raise_event(p, "b2", "\"go\"", 0);
    duro_orch_item *t = fetch_orch_expect(p, "b2", LOCK_LONG);
    duro_event *d = events_for(t);
    duro_work_item acts[4] = {activity("b2", 1, 10), activity("b2", 1, 11),
                              activity("b2", 1, 12), activity("b2", 1, 13)};
    duro_orch_ack ak = ack_of(t->execution_id, d, t->message_count, NULL);
    ak.worker_items = acts;
    ak.worker_item_count = 4;
    int64_t w_before = duro_now_ms();
    ack(p, t->lock_token, &ak);
    int64_t w_after = duro_now_ms();
    free(d);
    duro_orch_item_free(t);

    /* Worker rows: W1 locked, W2 locked briefly (it expires: ready again),
     * W3 abandoned with a delay (in neither count), W4 untouched. */
    duro_worker_item *w1 = fetch_work(p, LOCK_LONG);
    duro_worker_item *w2 = fetch_work(p, LOCK_SHORT);
    int64_t w2_after = duro_now_ms();
    duro_worker_item *w3 = fetch_work(p, LOCK_LONG);
    CHECK(w1 != NULL && w2 != NULL && w3 != NULL);
    CHECK_PRC(p->abandon_work_item(p, w3->lock_token, 60000, &e), DURO_OK, &e);

    /* Orchestrator messages: a1 locked with its event, and a second event
     * arriving while it is locked; b1 fetched with a short lock that
     * expires (ready again); b2 an event delayed a minute; c1 a start
     * delayed a minute (a Pending "gamma"). */
    raise_event(p, "a1", "\"e1\"", 0);
    duro_orch_item *held = fetch_orch_expect(p, "a1", LOCK_LONG);
    raise_event(p, "a1", "\"e2\"", 0);
    raise_event(p, "b1", "\"e\"", 0);
    int64_t b1_before = duro_now_ms();
    duro_orch_item *lapsed = fetch_orch_expect(p, "b1", LOCK_SHORT);
    int64_t b1_after = duro_now_ms();
    raise_event(p, "b2", "\"later\"", 60000);
    duro_work_item c1 = work(DURO_WORK_START, "c1");
    c1.name = "gamma";
    enqueue(p, &c1, 60000);
    clock_past((b1_after > w2_after ? b1_after : w2_after) + LOCK_SHORT);
    /* Pending a4 and b4: their starts are ready. */
    duro_work_item st_a4 = work(DURO_WORK_START, "a4");
    st_a4.name = "alpha";
    enqueue(p, &st_a4, 0);
    duro_work_item st_b4 = work(DURO_WORK_START, "b4");
    st_b4.name = "beta";
    enqueue(p, &st_b4, 0);
    /* Problems: counted for Pending and Running instances only. */
    CHECK_PRC(p->set_instance_problem(p, "a1", "stuck", 0, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "b1", "stuck", 0, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "b4", "stuck", 0, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "a2", "old", 0, &e), DURO_OK, &e);

    duro_store_stats *st = stats_of(p);
    char text[512];
    counts_text(st->instances, st->instance_count, text, sizeof(text));
    CHECK_STR(text, "alpha/1=1,alpha/2=1,alpha/3=1,alpha/4=1,"
                    "beta/1=1,beta/2=2,beta/5=1,gamma/1=1");
    counts_text(st->problems, st->problem_count, text, sizeof(text));
    CHECK_STR(text, "alpha/0=1,beta/0=2");
    /* ready: a4's and b4's starts, b1's event under its expired lock;
     * locked: a1's fetched event and the one that arrived since; delayed:
     * b2's event and c1's start */
    CHECK_EQ(st->orchestrator_ready, 3);
    CHECK_EQ(st->orchestrator_locked, 2);
    CHECK_EQ(st->orchestrator_delayed, 2);
    CHECK_EQ(st->orchestrator_ready + st->orchestrator_locked +
                 st->orchestrator_delayed,
             count(p, DURO_QUEUE_ORCHESTRATOR, NULL));
    /* the oldest ready instance is b1, fetchable again since its lock
     * expired (a4 and b4 came after that) */
    CHECK_INT(st->orchestrator_oldest_ready_ms, >=, b1_before + LOCK_SHORT);
    CHECK_INT(st->orchestrator_oldest_ready_ms, <=, b1_after + LOCK_SHORT);
    /* worker: W4 (visible since the ack) and W2 (expired) ready, W1
     * locked, W3 in neither */
    CHECK_EQ(st->worker_ready, 2);
    CHECK_EQ(st->worker_locked, 1);
    CHECK_EQ(count(p, DURO_QUEUE_WORKER, NULL), 4);
    CHECK_INT(st->worker_oldest_ready_ms, >=, w_before);
    CHECK_INT(st->worker_oldest_ready_ms, <=, w_after);
    duro_free(st);

    /* Acking a1 and finishing b4 moves the counts. */
    d = events_for(held);
    duro_orch_ack ak2 =
        ack_of(held->execution_id, d, held->message_count, NULL);
    ack(p, held->lock_token, &ak2);
    free(d);
    duro_orch_item_free(held);
    duro_orch_item_free(lapsed);
    CHECK_PRC(p->ack_work_item(p, w1->lock_token, NULL, &e), DURO_OK, &e);
    st = stats_of(p);
    CHECK_EQ(st->orchestrator_locked, 0);
    CHECK_EQ(st->orchestrator_ready, 4); /* a1's second event joined */
    CHECK_EQ(st->worker_locked, 0);
    CHECK_EQ(st->worker_ready, 2);
    duro_free(st);
    duro_worker_item_free(w1);
    duro_worker_item_free(w2);
    duro_worker_item_free(w3);
}

static int sweep_stats(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_store_stats *st = (duro_store_stats *)e; /* must be reset */
    int rc = p->read_store_stats(p, &st, e);
    if (rc != DURO_OK) {
        CHECK(st == NULL);
        return rc;
    }
    CHECK_EQ(st->instance_count, 1);
    CHECK_EQ(st->worker_ready, 1);
    duro_free(st);
    return rc;
}

PV_TEST(fault_sweep_read_store_stats)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 1);
    fault_sweep(p, "read_store_stats", sweep_stats, NULL);
}

/* Fault sweeps of the version-4 writes (each within one transaction: a
 * failure must leave the store exactly as it was). */

typedef struct sweep_problem_arg {
    const char *id;
    const char *problem;
} sweep_problem_arg;

static int sweep_problem(duro_provider *p, void *arg, duro_error *e)
{
    sweep_problem_arg *a = arg;
    return p->set_instance_problem(p, a->id, a->problem, 77, e);
}

PV_TEST(fault_sweep_set_instance_problem)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "x", 1);
    sweep_problem_arg arg = {"x", "stuck"};
    fault_sweep(p, "set_instance_problem", sweep_problem, &arg);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "x", &in);
    CHECK_STR(in->last_problem, "stuck");
    CHECK_EQ(in->next_attempt_ms, 77);
    duro_instance_list_free(l);
    arg.problem = NULL;
    fault_sweep(p, "set_instance_problem(clear)", sweep_problem, &arg);
    l = status_of(p, "x", &in);
    CHECK(in->last_problem == NULL);
    duro_instance_list_free(l);
}

typedef struct sweep_cancel_ids_arg {
    const char *const *ids;
    size_t n;
    int control; /* 0: cancel_instances, else control_instances */
    duro_control_result *res;
} sweep_cancel_ids_arg;

static int sweep_cancel_ids(duro_provider *p, void *arg, duro_error *e)
{
    sweep_cancel_ids_arg *a = arg;
    int rc =
        request_ids(p, a->control, a->ids, a->n, "swept", "ops", a->res, e);
    for (size_t i = 0; rc != DURO_OK && i < a->n; i++)
        CHECK_MSG(a->res[i].outcome == 0,
                  "a failed call (%s) filled result %zu", duro_errname(rc), i);
    return rc;
}

/* The fault sweep of cancel_instances (control 0) or control_instances. */
static void fault_sweep_ids(duro_provider *p, int control)
{
    begin(p, "run", 1);
    start(p, "pend");
    begin(p, "done", 0);
    finish(p, "done");
    const char *ids[] = {"run", "pend", "done", "ghost", "run"};
    duro_control_result res[5];
    sweep_cancel_ids_arg arg = {ids, 5, control, res};
    fault_sweep(p, control != 0 ? "control_instances" : "cancel_instances",
                sweep_cancel_ids, &arg);
    /* pend has not begun: decided at once (version 9), in the same
     * transaction as run's request */
    static const int cancelled[5] = {
        DURO_CANCEL_REQUESTED, DURO_CANCEL_CANCELLED,
        DURO_CANCEL_NOT_CANCELLABLE, DURO_CANCEL_NOT_FOUND,
        DURO_CANCEL_DUPLICATE};
    static const int controlled[5] = {
        DURO_CONTROL_OUTCOME_REQUESTED, DURO_CONTROL_OUTCOME_APPLIED,
        DURO_CONTROL_OUTCOME_FINISHED, DURO_CONTROL_OUTCOME_NOT_FOUND,
        DURO_CONTROL_OUTCOME_DUPLICATE};
    static const int status[5] = {DURO_STATUS_RUNNING, DURO_STATUS_PENDING,
                                  DURO_STATUS_COMPLETED, DURO_STATUS_NOT_FOUND,
                                  DURO_STATUS_RUNNING};
    expect_outcomes(control, ids, res, control != 0 ? controlled : cancelled,
                    status, 5);
    CHECK_EQ(count(p, ORCH, "run"), 1);
    CHECK_EQ(count(p, ORCH, "pend"), 0);
    CHECK_EQ(history_len(p, "pend", 1), control != 0 ? 2 : 3);
}

PV_TEST(fault_sweep_cancel_instances)
{
    duro_provider *p = pv_open();
    require_v4(p);
    fault_sweep_ids(p, 0);
}

typedef struct sweep_bulk_arg {
    int purge;
    int control; /* not purge: 0 cancel_matching, else control_matching */
    duro_bulk_filter f;
    duro_bulk_result *r;
} sweep_bulk_arg;

static int sweep_bulk(duro_provider *p, void *arg, duro_error *e)
{
    sweep_bulk_arg *a = arg;
    duro_bulk_result_free(a->r);
    a->r = NULL;
    int rc = a->purge ? p->purge_instances(p, &a->f, 0, 10, &a->r, e)
                      : request_matching(p, a->control, &a->f, 0, 10, "swept",
                                         "ops", &a->r, e);
    if (rc != DURO_OK && a->r != NULL) {
        test_fail(__FILE__, __LINE__, "a failed bulk call returned a result");
        duro_bulk_result_free(a->r);
        a->r = NULL;
    }
    return rc;
}

/* The fault sweep of cancel_matching (control 0) or control_matching. */
static void fault_sweep_matching(duro_provider *p, int control)
{
    begin(p, "a-1", 1);
    start(p, "a-2");
    begin(p, "a-3", 0);
    finish(p, "a-3");
    sweep_bulk_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.control = control;
    arg.f.name = "orch";
    fault_sweep(p, control != 0 ? "control_matching" : "cancel_matching",
                sweep_bulk, &arg);
    CHECK(arg.r != NULL);
    CHECK_EQ(arg.r->count, 2);
    CHECK_EQ(arg.r->applied, 1); /* a-2 has not begun */
    CHECK_IDS(arg.r, "a-1,a-2");
    duro_bulk_result_free(arg.r);
    CHECK_EQ(count(p, ORCH, "a-1"), 1);
    CHECK_EQ(count(p, ORCH, "a-2"), 0);
    CHECK_EQ(history_len(p, "a-2", 1), 2 + (control == 0));
}

PV_TEST(fault_sweep_cancel_matching)
{
    duro_provider *p = pv_open();
    require_v4(p);
    fault_sweep_matching(p, 0);
}

PV_TEST(fault_sweep_purge_instances)
{
    duro_provider *p = pv_open();
    require_v4(p);
    begin(p, "root", 0);
    begin_child(p, "root", "kid");
    finish(p, "kid");
    finish(p, "root");
    begin(p, "solo", 0);
    finish(p, "solo");
    begin(p, "live", 1);
    raise_event(p, "root", "\"late\"", 0);
    sweep_bulk_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.purge = 1;
    arg.f.finished_before_ms = INT64_MAX;
    fault_sweep(p, "purge_instances", sweep_bulk, &arg);
    CHECK(arg.r != NULL);
    CHECK_EQ(arg.r->count, 3);
    CHECK_IDS(arg.r, "kid,root,solo");
    duro_bulk_result_free(arg.r);
    expect_no_instance(p, "root");
    expect_no_instance(p, "kid");
    expect_no_instance(p, "solo");
    CHECK_EQ(count(p, ORCH, NULL), 0);
    CHECK_EQ(count(p, WORKER, NULL), 1); /* live's */
}

/* ========================================================================
 * Version 5: the statuses Suspended (live) and Terminated (ended) in every
 * method, the terminate, suspend and resume messages, and the two methods
 * that send them (control_instances, control_matching). */

static void require_v5(duro_provider *p)
{
    require_v4(p);
    CHECK_MSG(p->version >= 5 && p->control_instances != NULL &&
                  p->control_matching != NULL,
              "provider '%s' (version %d) lacks the version-5 methods", p->name,
              p->version);
}

/* A turn of `id` that records its messages and leaves it `status`
 * (Suspended, Terminated, ...). */
static void turn_to(duro_provider *p, const char *id, int status)
{
    duro_instance_meta m = meta(status);
    turn_meta(p, id, &m);
}

/* One instance's status, finish time and cancel record as a line. */
static void expect_status(duro_provider *p, const char *id, int status)
{
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, id, &in);
    CHECK_MSG(in->status == status, "%s is %s, expected %s", id,
              duro_status_name(in->status), duro_status_name(status));
    duro_instance_list_free(l);
}

PV_TEST(control_messages_round_trip_and_record_nothing)
{
    duro_provider *p = pv_open();
    require_v5(p);
    begin(p, "x", 0);
    begin(p, "y", 0);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "x", &in);
    int64_t updated = in->updated_ms;
    duro_instance_list_free(l);
    /* Through enqueue_for_orchestrator, every field ... */
    duro_work_item want[3];
    for (int i = 0; i < 3; i++) {
        want[i] = full_work(DURO_WORK_TERMINATE_INSTANCE + i, "x");
        enqueue(p, &want[i], 0);
    }
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->message_count, 3);
    for (size_t i = 0; i < a->message_count && i < 3; i++)
        check_work(&a->messages[i], &want[i]);
    CHECK_EQ(a->status, DURO_STATUS_RUNNING);
    CHECK_EQ(a->cancel_requested_ms, 0);
    CHECK(a->cancel_reason == NULL && a->cancelled_by == NULL);
    /* ... and through an ack (a parent terminating, suspending and
     * resuming its child). */
    duro_outbound out[3];
    memset(out, 0, sizeof(out));
    for (int i = 0; i < 3; i++) {
        out[i].item = want[i];
        out[i].item.instance_id = "y";
    }
    duro_event d = event(a->history_total + 1, DURO_EVENT_EVENT_RAISED);
    duro_orch_ack ak = ack_of(a->execution_id, &d, 1, NULL);
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = 3;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    duro_orch_item *b = fetch_orch_expect(p, "y", LOCK_LONG);
    CHECK_EQ(b->message_count, 3);
    for (size_t i = 0; i < b->message_count && i < 3; i++)
        check_work(&b->messages[i], &out[i].item);
    abandon_orch(p, b, 0);
    duro_orch_item_free(b);
    /* Neither instance records anything: no cancellation, no change. */
    const char *ids[2] = {"x", "y"};
    for (int i = 0; i < 2; i++) {
        l = status_of(p, ids[i], &in);
        CHECK_EQ(in->status, DURO_STATUS_RUNNING);
        CHECK_EQ(in->cancel_requested_ms, 0);
        CHECK(in->cancel_reason == NULL && in->cancelled_by == NULL);
        CHECK(in->last_problem == NULL);
        if (i == 0)
            CHECK_EQ(in->updated_ms, updated);
        duro_instance_list_free(l);
    }
    /* Reason and requester are checked like a cancel's. */
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    char *long_text = repeat('t', 1025);
    duro_error e;
    for (int k = DURO_WORK_TERMINATE_INSTANCE; k <= DURO_WORK_RESUME_INSTANCE;
         k++) {
        duro_work_item w = work((duro_work_kind)k, "x");
        w.reason = long_text;
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE,
                    0, &e);
        w.reason = NULL;
        w.requested_by = long_text;
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_TOO_LARGE,
                    0, &e);
    }
    free(long_text);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(orchestrator_queue_refuses_worker_and_unknown_kinds)
{
    duro_provider *p = pv_open();
    require_v5(p);
    begin(p, "x", 1);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    duro_orch_item *a = poke(p, "x");
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_error e;
    static const int bad_kinds[] = {0, DURO_WORK_ACTIVITY_EXECUTE,
                                    DURO_WORK_KIND_MAX + 1, 99, -1};
    for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
        duro_work_item bad = work((duro_work_kind)bad_kinds[i], "x");
        bad.name = "n";
        bad.execution_id = 1;
        bad.source_id = 2;
        CHECK_PFAIL(p->enqueue_for_orchestrator(p, &bad, 0, &e), DURO_INVALID,
                    0, &e);
        duro_outbound out;
        memset(&out, 0, sizeof(out));
        out.item = bad;
        duro_orch_ack ak = ack_of(a->execution_id, NULL, 0, NULL);
        ak.orchestrator_items = &out;
        ak.orchestrator_item_count = 1;
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
        CHECK_PFAIL(p->ack_work_item(p, w->lock_token, &bad, &e), DURO_INVALID,
                    0, &e);
    }
    /* The worker queue takes only its kind. */
    duro_work_item term = work(DURO_WORK_TERMINATE_INSTANCE, "x");
    duro_orch_ack ak = ack_of(a->execution_id, NULL, 0, NULL);
    ak.worker_items = &term;
    ak.worker_item_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_INVALID, 0, &e);
    /* History takes kinds 1 .. DURO_EVENT_KIND_MAX. */
    duro_event bad_events[2] = {
        event(a->history_total + 1, (duro_event_kind)0),
        event(a->history_total + 1,
              (duro_event_kind)(DURO_EVENT_KIND_MAX + 1))};
    for (int i = 0; i < 2; i++) {
        ak = ack_of(a->execution_id, &bad_events[i], 1, NULL);
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
    }
    /* And meta statuses 1 .. 8 (Terminated). */
    static const int bad_status[] = {0, DURO_STATUS_TERMINATED + 1, -1};
    for (size_t i = 0; i < sizeof(bad_status) / sizeof(bad_status[0]); i++) {
        duro_instance_meta m = meta(bad_status[i]);
        ak = ack_of(a->execution_id, NULL, 0, &m);
        CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                    DURO_INVALID, 0, &e);
    }
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    /* Both locks held through it all. */
    CHECK_PRC(p->renew_work_item_lock(p, w->lock_token, LOCK_LONG, &e), DURO_OK,
              &e);
    CHECK_PRC(p->renew_orchestration_item_lock(p, a->lock_token, LOCK_LONG, &e),
              DURO_OK, &e);
    duro_worker_item_free(w);
    duro_orch_item_free(a);
}

PV_TEST(suspended_is_live_and_terminated_ends_the_instance)
{
    duro_provider *p = pv_open();
    require_v5(p);
    begin(p, "x", 0);
    raise_event(p, "x", "\"a timer\"", 60000); /* due in a minute */
    int64_t t0 = duro_now_ms();
    turn_to(p, "x", DURO_STATUS_SUSPENDED);
    int64_t t1 = duro_now_ms();
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "x", &in);
    CHECK_EQ(in->status, DURO_STATUS_SUSPENDED);
    CHECK_INT(in->updated_ms, >=, t0 - CLOCK_SLACK_MS);
    CHECK_INT(in->updated_ms, <=, t1 + CLOCK_SLACK_MS);
    CHECK_EQ(in->finished_ms, 0);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "x"), 1); /* the delayed message stays */

    /* A suspended instance's messages are fetched like any others. */
    raise_event(p, "x", "\"while suspended\"", 0);
    enqueue(p,
            &(duro_work_item){.kind = DURO_WORK_RESUME_INSTANCE,
                              .instance_id = "x",
                              .reason = "go on"},
            0);
    duro_orch_item *a = fetch_orch_expect(p, "x", LOCK_LONG);
    CHECK_EQ(a->status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(a->message_count, 2);
    CHECK_STR(a->messages[0].payload, "\"while suspended\"");
    CHECK_EQ(a->messages[1].kind, DURO_WORK_RESUME_INSTANCE);
    CHECK_STR(a->messages[1].reason, "go on");

    /* The turn that terminates it sets the finish time and empties its
     * queue, the delayed message too. */
    duro_event d[2] = {
        event(a->history_total + 1, DURO_EVENT_EVENT_RAISED),
        event(a->history_total + 2, DURO_EVENT_ORCHESTRATION_TERMINATED)};
    d[1].reason = "enough";
    d[1].requested_by = "ops";
    duro_instance_meta m = meta(DURO_STATUS_TERMINATED);
    m.error = "enough";
    m.category = DURO_CATEGORY_CANCELLED;
    duro_orch_ack ak = ack_of(a->execution_id, d, 2, &m);
    int64_t t2 = duro_now_ms();
    ack(p, a->lock_token, &ak);
    int64_t t3 = duro_now_ms();
    duro_orch_item_free(a);
    l = status_of(p, "x", &in);
    CHECK_EQ(in->status, DURO_STATUS_TERMINATED);
    CHECK_STR(in->error, "enough");
    CHECK_INT(in->finished_ms, >=, t2 - CLOCK_SLACK_MS);
    CHECK_INT(in->finished_ms, <=, t3 + CLOCK_SLACK_MS);
    CHECK_EQ(in->finished_ms, in->updated_ms);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "x"), 0);
    expect_no_orch(p);
    duro_history *h = history(p, "x", 0);
    CHECK_EQ(h->events[h->count - 1].kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(h->events[h->count - 1].requested_by, "ops");
    duro_history_free(h);
}

PV_TEST(set_instance_problem_and_store_stats_treat_suspended_as_live)
{
    duro_provider *p = pv_open();
    require_v5(p);
    begin(p, "s", 0);
    begin(p, "t", 0);
    begin(p, "r", 0);
    turn_to(p, "s", DURO_STATUS_SUSPENDED);
    duro_error e;
    const duro_instance_info *in;
    /* A suspended instance takes a problem and its clearing. */
    int64_t t0 = duro_now_ms();
    CHECK_PRC(p->set_instance_problem(p, "s", "stuck while suspended", 42, &e),
              DURO_OK, &e);
    int64_t t1 = duro_now_ms();
    duro_instance_list *l = status_of(p, "s", &in);
    CHECK_STR(in->last_problem, "stuck while suspended");
    CHECK_INT(in->last_problem_ms, >=, t0 - CLOCK_SLACK_MS);
    CHECK_INT(in->last_problem_ms, <=, t1 + CLOCK_SLACK_MS);
    CHECK_EQ(in->next_attempt_ms, 42);
    CHECK_EQ(in->status, DURO_STATUS_SUSPENDED);
    duro_instance_list_free(l);
    /* The store counts it by its status, and its problem as live. */
    CHECK_PRC(p->set_instance_problem(p, "t", "stuck", 0, &e), DURO_OK, &e);
    duro_store_stats *st = stats_of(p);
    char text[256];
    counts_text(st->instances, st->instance_count, text, sizeof(text));
    CHECK_STR(text, "orch/2=2,orch/7=1");
    counts_text(st->problems, st->problem_count, text, sizeof(text));
    CHECK_STR(text, "orch/0=2");
    duro_free(st);
    CHECK_PRC(p->set_instance_problem(p, "s", NULL, 0, &e), DURO_OK, &e);
    l = status_of(p, "s", &in);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->last_problem_ms, 0);
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);
    /* Terminated ends it: the ending clears the problem, a late report
     * changes nothing, and its problem no longer counts. */
    CHECK_PRC(p->set_instance_problem(p, "s", "again", 7, &e), DURO_OK, &e);
    turn_to(p, "s", DURO_STATUS_TERMINATED);
    turn_to(p, "t", DURO_STATUS_TERMINATED);
    CHECK_PRC(p->set_instance_problem(p, "s", "late report", 9, &e), DURO_OK,
              &e);
    l = status_of(p, "s", &in);
    CHECK_EQ(in->status, DURO_STATUS_TERMINATED);
    CHECK(in->last_problem == NULL);
    CHECK_EQ(in->next_attempt_ms, 0);
    duro_instance_list_free(l);
    st = stats_of(p);
    counts_text(st->instances, st->instance_count, text, sizeof(text));
    CHECK_STR(text, "orch/2=1,orch/8=2");
    CHECK_EQ(st->problem_count, 0);
    duro_free(st);
}

PV_TEST(cancel_reaches_a_suspended_instance_and_not_a_terminated_one)
{
    duro_provider *p = pv_open();
    require_v5(p);
    const char *suspended[] = {"s1", "s2", "s3", "s4"};
    for (int i = 0; i < 4; i++) {
        begin(p, suspended[i], 0);
        turn_to(p, suspended[i], DURO_STATUS_SUSPENDED);
    }
    begin(p, "r", 0);
    begin(p, "t", 0);
    turn_to(p, "t", DURO_STATUS_TERMINATED);
    /* A CANCEL_INSTANCE records the request on a suspended instance. */
    enqueue_cancel(p, "s1", "one", "alice");
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "s1", &in);
    CHECK_STR(in->cancel_reason, "one");
    CHECK_STR(in->cancelled_by, "alice");
    CHECK(in->cancel_requested_ms > 0);
    duro_instance_list_free(l);
    enqueue_cancel(p, "t", "late", "bob");
    l = status_of(p, "t", &in);
    CHECK_EQ(in->cancel_requested_ms, 0);
    duro_instance_list_free(l);

    /* cancel_instances: cancellable while suspended, not once ended. */
    const char *ids[] = {"s1", "s2", "t"};
    duro_cancel_result res[3];
    duro_error e;
    CHECK_PRC(p->cancel_instances(p, ids, 3, "bulk", "ops", res, &e), DURO_OK,
              &e);
    CHECK_EQ(res[0].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    CHECK_EQ(res[0].status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(res[1].outcome, DURO_CANCEL_REQUESTED);
    CHECK_EQ(res[1].status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(res[2].outcome, DURO_CANCEL_NOT_CANCELLABLE);
    CHECK_EQ(res[2].status, DURO_STATUS_TERMINATED);
    l = status_of(p, "s2", &in);
    CHECK_STR(in->cancel_reason, "bulk");
    CHECK_STR(in->cancelled_by, "ops");
    CHECK_EQ(in->status, DURO_STATUS_SUSPENDED);
    duro_instance_list_free(l);
    CHECK_EQ(count(p, ORCH, "s2"), 1);
    CHECK_EQ(count(p, ORCH, "t"), 1); /* only the late message */

    /* cancel_matching takes Suspended when its mask holds it, not by
     * default: a suspended instance was paused on purpose. */
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.status_mask = 1u << DURO_STATUS_SUSPENDED;
    duro_bulk_result *dry = bulk_cancel(p, &f, 1, 10, "sweep", "ops");
    CHECK_IDS(dry, "s3,s4");
    duro_bulk_result_free(dry);
    f.status_mask = 0;
    dry = bulk_cancel(p, &f, 1, 10, "sweep", "ops");
    CHECK_IDS(dry, "r");
    duro_bulk_result_free(dry);
    f.status_mask = (1u << DURO_STATUS_PENDING) | (1u << DURO_STATUS_RUNNING) |
                    (1u << DURO_STATUS_SUSPENDED);
    duro_bulk_result *r = dry_then_real(p, 0, &f, "sweep", "ops");
    CHECK_IDS(r, "r,s3,s4");
    duro_bulk_result_free(r);
    l = status_of(p, "s4", &in);
    CHECK_STR(in->cancel_reason, "sweep");
    CHECK_EQ(in->status, DURO_STATUS_SUSPENDED);
    duro_instance_list_free(l);
    /* ... but never Terminated. */
    f.status_mask = 1u << DURO_STATUS_TERMINATED;
    CHECK_PFAIL(p->cancel_matching(p, &f, "r", "b", 1, 10, &r, &e),
                DURO_INVALID, 0, &e);
    CHECK(r == NULL);
}

PV_TEST(delete_and_purge_keep_suspended_and_take_terminated)
{
    duro_provider *p = pv_open();
    require_v5(p);
    /* root (Terminated) -> kid (Suspended): kept whole until the kid
     * ends; solo Terminated, done Completed, susp Suspended. */
    begin(p, "root", 0);
    begin_child(p, "root", "kid");
    turn_to(p, "kid", DURO_STATUS_SUSPENDED);
    turn_to(p, "root", DURO_STATUS_TERMINATED);
    begin(p, "solo", 0);
    turn_to(p, "solo", DURO_STATUS_TERMINATED);
    begin(p, "done", 0);
    finish(p, "done");
    begin(p, "susp", 0);
    turn_to(p, "susp", DURO_STATUS_SUSPENDED);
    duro_error e;
    size_t deleted = 99;
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    CHECK_PFAIL(p->delete_instance(p, "susp", 0, &deleted, &e),
                DURO_INVALID_STATE, 0, &e);
    CHECK_PFAIL(p->delete_instance(p, "root", 0, &deleted, &e),
                DURO_INVALID_STATE, 0, &e);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    f.finished_before_ms = INT64_MAX;
    duro_bulk_result *r = NULL;
    static const uint32_t refused[] = {1u << DURO_STATUS_SUSPENDED,
                                       (1u << DURO_STATUS_SUSPENDED) |
                                           (1u << DURO_STATUS_TERMINATED)};
    for (int i = 0; i < 2; i++) {
        f.status_mask = refused[i];
        CHECK_PFAIL(p->purge_instances(p, &f, 1, 10, &r, &e), DURO_INVALID, 0,
                    &e);
        CHECK(r == NULL);
    }
    f.status_mask = 1u << DURO_STATUS_TERMINATED;
    r = bulk_purge(p, &f, 1, 10);
    CHECK_IDS(r, "solo"); /* root stays with its live kid */
    duro_bulk_result_free(r);
    f.status_mask = 0;
    duro_bulk_result *dry = bulk_purge(p, &f, 1, 10);
    CHECK_IDS(dry, "done,solo");
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
    r = bulk_purge(p, &f, 0, 10);
    CHECK_EQ(r->count, dry->count);
    CHECK_IDS(r, "done,solo");
    duro_bulk_result_free(r);
    duro_bulk_result_free(dry);
    expect_no_instance(p, "solo");
    expect_no_instance(p, "done");
    expect_status(p, "root", DURO_STATUS_TERMINATED);
    expect_status(p, "kid", DURO_STATUS_SUSPENDED);
    expect_status(p, "susp", DURO_STATUS_SUSPENDED);
    /* Once the kid is terminated the tree goes without force; a suspended
     * instance only with force. */
    turn_to(p, "kid", DURO_STATUS_TERMINATED);
    CHECK_PRC(p->delete_instance(p, "root", 0, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 2);
    CHECK_PRC(p->delete_instance(p, "susp", 1, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 1);
    expect_no_instance(p, "kid");
    expect_no_instance(p, "susp");
}

PV_TEST(control_instances_reports_one_outcome_per_id)
{
    duro_provider *p = pv_open();
    require_v5(p);
    duro_orch_item *held = outcome_fixture(p);
    begin(p, "susp", 0);
    turn_to(p, "susp", DURO_STATUS_SUSPENDED);
    begin(p, "term", 0);
    turn_to(p, "term", DURO_STATUS_TERMINATED);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "run", &in);
    int64_t run_updated = in->updated_ms;
    duro_instance_list_free(l);
    const char *ids[] = {"pend", "run",   "susp", "comp",  "fail",  "canc",
                         "term", "ghost", "run",  "ghost", "asked", "fresh"};
    enum { N = sizeof(ids) / sizeof(ids[0]) };
    static const int outcome[N] = {
        DURO_CONTROL_OUTCOME_REQUESTED, DURO_CONTROL_OUTCOME_REQUESTED,
        DURO_CONTROL_OUTCOME_REQUESTED, DURO_CONTROL_OUTCOME_FINISHED,
        DURO_CONTROL_OUTCOME_FINISHED,  DURO_CONTROL_OUTCOME_FINISHED,
        DURO_CONTROL_OUTCOME_FINISHED,  DURO_CONTROL_OUTCOME_NOT_FOUND,
        DURO_CONTROL_OUTCOME_DUPLICATE, DURO_CONTROL_OUTCOME_DUPLICATE,
        DURO_CONTROL_OUTCOME_REQUESTED, DURO_CONTROL_OUTCOME_APPLIED};
    static const int status[N] = {
        DURO_STATUS_PENDING,    DURO_STATUS_RUNNING,   DURO_STATUS_SUSPENDED,
        DURO_STATUS_COMPLETED,  DURO_STATUS_FAILED,    DURO_STATUS_CANCELLED,
        DURO_STATUS_TERMINATED, DURO_STATUS_NOT_FOUND, DURO_STATUS_RUNNING,
        DURO_STATUS_NOT_FOUND,  DURO_STATUS_RUNNING,   DURO_STATUS_PENDING};
    duro_control_result res[N];
    memset(res, 0x5a, sizeof(res));
    duro_error e;
    CHECK_PRC(
        request_ids(p, DURO_CONTROL_TERMINATE, ids, N, "stop", "ops", res, &e),
        DURO_OK, &e);
    expect_outcomes(DURO_CONTROL_TERMINATE, ids, res, outcome, status, N);
    /* One message for each live instance, none for the rest. */
    CHECK_EQ(count(p, ORCH, "pend"), 2); /* its START and the terminate */
    CHECK_EQ(count(p, ORCH, "run"), 1);
    CHECK_EQ(count(p, ORCH, "susp"), 1);
    CHECK_EQ(count(p, ORCH, "asked"), 2); /* the cancel and the terminate */
    CHECK_EQ(count(p, ORCH, "comp") + count(p, ORCH, "fail") +
                 count(p, ORCH, "canc") + count(p, ORCH, "term") +
                 count(p, ORCH, "fresh"),
             0);
    expect_status(p, "fresh", DURO_STATUS_TERMINATED);
    expect_no_instance(p, "ghost");
    CHECK_EQ(count(p, ORCH, "ghost"), 0);
    /* Nothing is recorded on the instances. */
    l = status_of(p, "run", &in);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    CHECK_EQ(in->updated_ms, run_updated);
    CHECK_EQ(in->cancel_requested_ms, 0);
    duro_instance_list_free(l);
    l = status_of(p, "asked", &in);
    CHECK_STR(in->cancel_reason, "earlier");
    CHECK_STR(in->cancelled_by, "dave");
    duro_instance_list_free(l);
    /* Suspend and resume send their own kinds; reason and requester may
     * be NULL. */
    const char *run_id = "run", *susp_id = "susp";
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, &run_id, 1, NULL,
                                   NULL, res, &e),
              DURO_OK, &e);
    CHECK_EQ(res[0].outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_RESUME, &susp_id, 1, "go on",
                                   NULL, res, &e),
              DURO_OK, &e);
    CHECK_EQ(res[0].outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    CHECK_EQ(res[0].status, DURO_STATUS_SUSPENDED);
    /* The messages carry the kind, reason and requester, visible at
     * once, in order. */
    duro_orch_item *a = fetch_orch_for(p, "run", LOCK_LONG);
    CHECK_EQ(a->message_count, 2);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_TERMINATE_INSTANCE);
    CHECK_STR(a->messages[0].reason, "stop");
    CHECK_STR(a->messages[0].requested_by, "ops");
    CHECK_EQ(a->messages[1].kind, DURO_WORK_SUSPEND_INSTANCE);
    CHECK(a->messages[1].reason == NULL && a->messages[1].requested_by == NULL);
    CHECK_EQ(a->cancel_requested_ms, 0);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    a = fetch_orch_for(p, "susp", LOCK_LONG);
    CHECK_EQ(a->status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(a->message_count, 2);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_TERMINATE_INSTANCE);
    CHECK_EQ(a->messages[1].kind, DURO_WORK_RESUME_INSTANCE);
    CHECK_STR(a->messages[1].reason, "go on");
    CHECK(a->messages[1].requested_by == NULL);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    /* Asking again sends again: the runtime keeps the first request. */
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_TERMINATE, ids, 2, "again",
                                   NULL, res, &e),
              DURO_OK, &e);
    CHECK_EQ(res[1].outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    CHECK_EQ(count(p, ORCH, "run"), 3);
    duro_orch_item_free(held);
}

PV_TEST(control_instances_refuses_bad_input_and_changes_nothing)
{
    duro_provider *p = pv_open();
    require_v5(p);
    ids_refuse_bad_input(p, DURO_CONTROL_SUSPEND);
}

/* One status-mask case of control_matching: `ids` is what a dry run
 * selects, NULL when the mask is refused. */
typedef struct mask_case {
    int control;
    uint32_t mask;
    const char *ids;
} mask_case;

#define ST(s) (1u << DURO_STATUS_##s)

PV_TEST(control_matching_takes_the_statuses_of_its_control)
{
    duro_provider *p = pv_open();
    require_v5(p);
    start(p, "pend");
    begin(p, "run", 0);
    begin(p, "susp", 0);
    turn_to(p, "susp", DURO_STATUS_SUSPENDED);
    begin(p, "done", 0);
    finish(p, "done");
    begin(p, "term", 0);
    turn_to(p, "term", DURO_STATUS_TERMINATED);
    static const mask_case cases[] = {
        {DURO_CONTROL_TERMINATE, 0, "pend,run,susp"},
        {DURO_CONTROL_TERMINATE, ST(PENDING), "pend"},
        {DURO_CONTROL_TERMINATE, ST(RUNNING), "run"},
        {DURO_CONTROL_TERMINATE, ST(SUSPENDED), "susp"},
        {DURO_CONTROL_TERMINATE, ST(RUNNING) | ST(SUSPENDED), "run,susp"},
        {DURO_CONTROL_TERMINATE, ST(PENDING) | ST(RUNNING) | ST(SUSPENDED),
         "pend,run,susp"},
        {DURO_CONTROL_TERMINATE, ST(COMPLETED), NULL},
        {DURO_CONTROL_TERMINATE, ST(FAILED), NULL},
        {DURO_CONTROL_TERMINATE, ST(CANCELLED), NULL},
        {DURO_CONTROL_TERMINATE, ST(TERMINATED), NULL},
        {DURO_CONTROL_TERMINATE, ST(CONTINUED_AS_NEW), NULL},
        {DURO_CONTROL_TERMINATE, ST(NOT_FOUND), NULL},
        {DURO_CONTROL_TERMINATE, ST(RUNNING) | ST(TERMINATED), NULL},
        {DURO_CONTROL_SUSPEND, 0, "pend,run"},
        {DURO_CONTROL_SUSPEND, ST(PENDING), "pend"},
        {DURO_CONTROL_SUSPEND, ST(RUNNING), "run"},
        {DURO_CONTROL_SUSPEND, ST(SUSPENDED), NULL},
        {DURO_CONTROL_SUSPEND, ST(RUNNING) | ST(SUSPENDED), NULL},
        {DURO_CONTROL_SUSPEND, ST(COMPLETED), NULL},
        {DURO_CONTROL_RESUME, 0, "susp"},
        {DURO_CONTROL_RESUME, ST(SUSPENDED), "susp"},
        {DURO_CONTROL_RESUME, ST(PENDING), NULL},
        {DURO_CONTROL_RESUME, ST(RUNNING), NULL},
        {DURO_CONTROL_RESUME, ST(RUNNING) | ST(SUSPENDED), NULL},
        {DURO_CONTROL_RESUME, ST(TERMINATED), NULL},
    };
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    duro_bulk_filter f;
    memset(&f, 0, sizeof(f));
    duro_error e;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        f.status_mask = cases[i].mask;
        duro_bulk_result *r = (duro_bulk_result *)&s; /* must be reset */
        int rc = p->control_matching(p, cases[i].control, &f, "r", "b", 1, 10,
                                     &r, &e);
        if (cases[i].ids == NULL) {
            CHECK_MSG(rc == DURO_INVALID && e.code == rc && !e.retryable &&
                          r == NULL,
                      "%s with mask 0x%x: %s (%s), expected DURO_INVALID",
                      duro_control_name(cases[i].control),
                      (unsigned)cases[i].mask, duro_errname(rc), e.message);
            continue;
        }
        CHECK_MSG(rc == DURO_OK && r != NULL, "%s with mask 0x%x: %s (%s)",
                  duro_control_name(cases[i].control), (unsigned)cases[i].mask,
                  duro_errname(rc), e.message);
        char *got = ids_text(r);
        CHECK_MSG(strcmp(got, cases[i].ids) == 0,
                  "%s with mask 0x%x selected '%s', expected '%s'",
                  duro_control_name(cases[i].control), (unsigned)cases[i].mask,
                  got, cases[i].ids);
        free(got);
        duro_bulk_result_free(r);
    }
    /* An unknown control; the rest of the filter and the call as
     * cancel_matching. */
    duro_bulk_result *r = (duro_bulk_result *)&s;
    f.status_mask = 0;
    static const int bad_controls[] = {0, DURO_CONTROL_RESUME + 1, -1};
    for (size_t i = 0; i < sizeof(bad_controls) / sizeof(bad_controls[0]);
         i++) {
        CHECK_PFAIL(p->control_matching(p, bad_controls[i], &f, "r", "b", 1, 10,
                                        &r, &e),
                    DURO_INVALID, 0, &e);
        CHECK(r == NULL);
    }
    matching_refuses_bad_filters(p, DURO_CONTROL_TERMINATE);
    matching_refuses_bad_filters(p, DURO_CONTROL_RESUME);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);
}

PV_TEST(control_matching_selects_by_filter_and_a_dry_run_equals_the_real_run)
{
    duro_provider *p = pv_open();
    require_v5(p);
    int64_t second_min = matching_fixture(p);
    turn_to(p, "a-3", DURO_STATUS_SUSPENDED);
    pv_snapshot s;
    pv_snapshot_take(p, &s);
    /* Filters as cancel_matching's; a requested cancellation does not
     * keep an instance out. */
    static const struct {
        const char *name, *version;
        uint32_t mask;
        int created; /* 1: after second_min, -1: before it */
        const char *ids;
    } cases[] = {
        {"alpha", NULL, 0, 0, "a-1,a-2,a-3,a-5"},
        {"alpha", "v2", 0, 0, "a-3"},
        {"alpha", NULL, ST(PENDING), 0, "a-1"},
        {NULL, NULL, ST(RUNNING), 0, "a-2,a-5,b-2"},
        {NULL, NULL, ST(SUSPENDED), 0, "a-3"},
        {NULL, NULL, 0, 1, "a-1,b-1"},
        {NULL, NULL, 0, -1, "a-2,a-3,a-5,b-2"},
    };
    duro_bulk_filter f;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&f, 0, sizeof(f));
        f.name = cases[i].name;
        f.version = cases[i].version;
        f.status_mask = cases[i].mask;
        if (cases[i].created > 0)
            f.created_after_ms = second_min;
        else if (cases[i].created < 0)
            f.created_before_ms = second_min;
        duro_bulk_result *r =
            bulk_request(p, DURO_CONTROL_TERMINATE, &f, 1, 100, "r", "b");
        char *got = ids_text(r);
        CHECK_MSG(strcmp(got, cases[i].ids) == 0,
                  "case %zu: '%s', expected '%s'", i, got, cases[i].ids);
        free(got);
        duro_bulk_result_free(r);
    }
    /* The count is whole when the ids are capped. */
    memset(&f, 0, sizeof(f));
    duro_bulk_result *r =
        bulk_request(p, DURO_CONTROL_TERMINATE, &f, 1, 2, "r", "b");
    CHECK_EQ(r->count, 6);
    CHECK_IDS(r, "a-1,a-2");
    duro_bulk_result_free(r);
    r = bulk_request(p, DURO_CONTROL_TERMINATE, &f, 1, 0, "r", "b");
    CHECK_EQ(r->count, 6);
    CHECK_EQ(r->id_count, 0);
    duro_bulk_result_free(r);
    PV_EXPECT_UNCHANGED(p, &s);
    pv_snapshot_free(&s);

    /* The real run sends exactly what the dry run reported, and records
     * nothing on the instances. */
    f.name = "alpha";
    f.status_mask = ST(RUNNING) | ST(PENDING);
    r = dry_then_real(p, DURO_CONTROL_SUSPEND, &f, "pause", "ops");
    CHECK_IDS(r, "a-1,a-2,a-5");
    CHECK_EQ(r->applied, 1); /* a-1: not begun, Suspended at once */
    duro_bulk_result_free(r);
    CHECK_EQ(count(p, ORCH, "a-1"), 0); /* its START is in history */
    expect_status(p, "a-1", DURO_STATUS_SUSPENDED);
    CHECK_EQ(count(p, ORCH, "a-5"), 2); /* cancel, suspend */
    CHECK_EQ(count(p, ORCH, "a-3"), 0); /* Suspended: not in the mask */
    CHECK_EQ(count(p, ORCH, "b-2"), 0);
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "a-5", &in);
    CHECK_STR(in->cancel_reason, "earlier");
    duro_instance_list_free(l);
    l = status_of(p, "a-2", &in);
    CHECK_EQ(in->cancel_requested_ms, 0);
    CHECK_EQ(in->status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    duro_orch_item *a = fetch_orch_for(p, "a-2", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_SUSPEND_INSTANCE);
    CHECK_STR(a->messages[0].reason, "pause");
    CHECK_STR(a->messages[0].requested_by, "ops");
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    /* Resume reaches the suspended ones only, and is never decided at
     * once (the code of a-1 starts in its turn). */
    memset(&f, 0, sizeof(f));
    r = bulk_request(p, DURO_CONTROL_RESUME, &f, 0, 100, "go", NULL);
    CHECK_IDS(r, "a-1,a-3");
    CHECK_EQ(r->applied, 0);
    duro_bulk_result_free(r);
    CHECK_EQ(count(p, ORCH, "a-1"), 1);
    a = fetch_orch_for(p, "a-3", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_RESUME_INSTANCE);
    CHECK_STR(a->messages[0].reason, "go");
    CHECK(a->messages[0].requested_by == NULL);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
}

#undef ST

PV_TEST(control_matching_handles_more_than_a_batch)
{
    duro_provider *p = pv_open();
    require_v5(p);
    matching_handles_more_than_a_batch(p, DURO_CONTROL_TERMINATE);
}

PV_TEST(control_matching_never_takes_instances_created_while_it_runs)
{
    duro_provider *p = pv_open();
    require_v5(p);
    matching_never_takes_instances_created_while_it_runs(p,
                                                         DURO_CONTROL_SUSPEND);
}

PV_TEST(fault_sweep_control_instances)
{
    duro_provider *p = pv_open();
    require_v5(p);
    fault_sweep_ids(p, DURO_CONTROL_TERMINATE);
}

PV_TEST(fault_sweep_control_matching)
{
    duro_provider *p = pv_open();
    require_v5(p);
    fault_sweep_matching(p, DURO_CONTROL_SUSPEND);
}

/* ========================================================================
 * Version 9: a cancel, terminate or suspend of an instance that has not
 * begun (Pending, no history, its START held by no runtime) is decided in
 * the request's own transaction. */

static void require_v9(duro_provider *p)
{
    require_v5(p);
    CHECK_MSG(p->version >= 9,
              "provider '%s' is version %d: requests are not decided at once",
              p->name, p->version);
}

/* The kinds of the events of execution 1 of `id`, as "1,14,5,6". */
static void kinds_of(duro_provider *p, const char *id, char *out, size_t size)
{
    duro_history *h = history(p, id, 1);
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < h->count && len < size; i++) {
        CHECK_EQ(h->events[i].event_id, i + 1);
        len += (size_t)snprintf(out + len, size - len, "%s%d", i ? "," : "",
                                (int)h->events[i].kind);
    }
    duro_history_free(h);
}

#define CHECK_KINDS(p, id, want)                                               \
    do {                                                                       \
        char kinds_[128];                                                      \
        kinds_of(p, id, kinds_, sizeof(kinds_));                               \
        CHECK_STR(kinds_, want);                                               \
    } while (0)

/* Fails unless t0 - slack <= t <= t1 + slack. */
#define CHECK_WITHIN(t, t0, t1)                                                \
    do {                                                                       \
        CHECK_INT(t, >=, (t0)-CLOCK_SLACK_MS);                                 \
        CHECK_INT(t, <=, (t1) + CLOCK_SLACK_MS);                               \
    } while (0)

PV_TEST(unbegun_instances_are_decided_in_the_request_transaction)
{
    duro_provider *p = pv_open();
    require_v9(p);
    duro_error e;
    /* c: an event raised before the cancel; d: its START delayed an hour;
     * t: terminated; s: suspended with an event queued */
    start_named(p, "c", "\"in-c\"");
    raise_event(p, "c", "\"early\"", 0);
    duro_work_item w = work(DURO_WORK_START, "d");
    w.name = "orch";
    enqueue(p, &w, 3600000);
    start(p, "t");
    start(p, "s");
    raise_event(p, "s", "\"held\"", 0);

    int64_t t0 = duro_now_ms();
    const char *cancels[] = {"c", "d"};
    duro_cancel_result cr[2];
    CHECK_PRC(
        p->cancel_instances(p, cancels, 2, "not needed", "user:ann", cr, &e),
        DURO_OK, &e);
    const char *t_id = "t", *s_id = "s";
    duro_control_result tr, sr;
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_TERMINATE, &t_id, 1, "stop",
                                   "ops", &tr, &e),
              DURO_OK, &e);
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, &s_id, 1, "hold",
                                   "ops", &sr, &e),
              DURO_OK, &e);
    int64_t t1 = duro_now_ms();
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(cr[i].outcome, DURO_CANCEL_CANCELLED);
        CHECK_EQ(cr[i].status, DURO_STATUS_PENDING); /* before the call */
    }
    CHECK_EQ(tr.outcome, DURO_CONTROL_OUTCOME_APPLIED);
    CHECK_EQ(sr.outcome, DURO_CONTROL_OUTCOME_APPLIED);

    /* c: Cancelled, as a turn would have left it */
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, "c", &in);
    CHECK_EQ(in->status, DURO_STATUS_CANCELLED);
    CHECK_EQ(in->execution_id, 1);
    CHECK_STR(in->error, "not needed");
    CHECK_EQ(in->category, DURO_CATEGORY_CANCELLED);
    CHECK_STR(in->cancel_reason, "not needed");
    CHECK_STR(in->cancelled_by, "user:ann");
    CHECK_WITHIN(in->cancel_requested_ms, t0, t1);
    CHECK_WITHIN(in->finished_ms, t0, t1);
    CHECK_EQ(in->history_count, 4);
    duro_instance_list_free(l);
    duro_history *h = history(p, "c", 1);
    CHECK_EQ(h->count, 4);
    CHECK_EQ(h->events[0].kind, DURO_EVENT_ORCHESTRATION_STARTED);
    CHECK_STR(h->events[0].name, "orch");
    CHECK_STR(h->events[0].version, "1.0");
    CHECK_STR(h->events[0].payload, "\"in-c\"");
    CHECK(h->events[0].ref_instance == NULL);
    CHECK_EQ(h->events[1].kind, DURO_EVENT_EVENT_RAISED);
    CHECK_STR(h->events[1].name, "poke");
    CHECK_STR(h->events[1].payload, "\"early\"");
    CHECK_EQ(h->events[2].kind, DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED);
    CHECK_STR(h->events[2].reason, "not needed");
    CHECK_STR(h->events[2].requested_by, "user:ann");
    CHECK_EQ(h->events[2].flags, 0);
    CHECK_EQ(h->events[3].kind, DURO_EVENT_ORCHESTRATION_CANCELLED);
    CHECK_STR(h->events[3].reason, "not needed");
    for (size_t i = 0; i < h->count; i++)
        CHECK_WITHIN(h->events[i].timestamp_ms, t0, t1);
    duro_history_free(h);
    CHECK_EQ(latest(p, "c"), 1);
    CHECK_KINDS(p, "d", "1,5,6");

    /* t: Terminated, the request in its OrchestrationTerminated */
    l = status_of(p, "t", &in);
    CHECK_EQ(in->status, DURO_STATUS_TERMINATED);
    CHECK_STR(in->error, "stop");
    CHECK_EQ(in->category, DURO_CATEGORY_CANCELLED);
    CHECK_EQ(in->cancel_requested_ms, 0);
    CHECK_WITHIN(in->finished_ms, t0, t1);
    duro_instance_list_free(l);
    h = history(p, "t", 1);
    CHECK_EQ(h->count, 2);
    CHECK_EQ(h->events[1].kind, DURO_EVENT_ORCHESTRATION_TERMINATED);
    CHECK_STR(h->events[1].reason, "stop");
    CHECK_STR(h->events[1].requested_by, "ops");
    duro_history_free(h);

    /* s: Suspended before any code ran; the event stays queued for the
     * turn that records it */
    l = status_of(p, "s", &in);
    CHECK_EQ(in->status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(in->execution_id, 1);
    CHECK_EQ(in->finished_ms, 0);
    CHECK_EQ(in->cancel_requested_ms, 0);
    duro_instance_list_free(l);
    h = history(p, "s", 1);
    CHECK_EQ(h->count, 2);
    CHECK_EQ(h->events[1].kind, DURO_EVENT_EXECUTION_SUSPENDED);
    CHECK_STR(h->events[1].reason, "hold");
    CHECK_STR(h->events[1].requested_by, "ops");
    CHECK_EQ(h->events[1].flags, DURO_SUSPEND_BEFORE_START);
    duro_history_free(h);
    CHECK_EQ(count(p, ORCH, "s"), 1);

    /* Nothing is queued for the ended ones: the only item is s's event,
     * fetched as a Suspended instance's batch of execution 1. */
    CHECK_EQ(count(p, ORCH, NULL), 1);
    duro_orch_item *a = fetch_orch_expect(p, "s", LOCK_LONG);
    CHECK_EQ(a->status, DURO_STATUS_SUSPENDED);
    CHECK_EQ(a->execution_id, 1);
    CHECK_EQ(a->history_total, 2);
    CHECK_EQ(a->message_count, 1);
    CHECK_EQ(a->messages[0].kind, DURO_WORK_EXTERNAL_EVENT);
    CHECK_STR(a->messages[0].payload, "\"held\"");
    abandon_orch(p, a, 600000);
    duro_orch_item_free(a);
    expect_no_orch(p);

    /* Asking again: already decided. */
    CHECK_PRC(p->cancel_instances(p, cancels, 1, "again", NULL, cr, &e),
              DURO_OK, &e);
    CHECK_EQ(cr[0].outcome, DURO_CANCEL_ALREADY_CANCELLED);
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, &s_id, 1, "again",
                                   NULL, &sr, &e),
              DURO_OK, &e);
    CHECK_EQ(sr.outcome, DURO_CONTROL_OUTCOME_REQUESTED); /* a no-op turn */
    CHECK_KINDS(p, "s", "1,20");
}

PV_TEST(a_held_or_asked_instance_is_sent_the_request)
{
    duro_provider *p = pv_open();
    require_v9(p);
    duro_error e;
    /* h: its START held by a runtime in its first turn */
    duro_orch_item *held = start_held(p, "h");
    const char *h_id = "h";
    duro_cancel_result cr;
    CHECK_PRC(p->cancel_instances(p, &h_id, 1, "r", "b", &cr, &e), DURO_OK, &e);
    CHECK_EQ(cr.outcome, DURO_CANCEL_REQUESTED);
    expect_status(p, "h", DURO_STATUS_PENDING);
    CHECK_EQ(count(p, ORCH, "h"), 2);
    /* ... whose holder then gives it up: the cancel waits on its queue
     * for a turn, which a terminate does not jump (a turn records the
     * cancel first) */
    abandon_orch(p, held, 0);
    duro_orch_item_free(held);
    duro_control_result tr;
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_TERMINATE, &h_id, 1, "t",
                                   NULL, &tr, &e),
              DURO_OK, &e);
    CHECK_EQ(tr.outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    CHECK_EQ(count(p, ORCH, "h"), 3);

    /* x: a lock that expired no longer holds it; its holder's ack then
     * finds the lock gone and changes nothing */
    start(p, "x");
    duro_orch_item *late = fetch_orch_for(p, "x", LOCK_SHORT);
    const char *x_id = "x";
    int64_t expires = duro_now_ms() + LOCK_SHORT;
    WAIT_UNTIL(duro_now_ms() > expires + CLOCK_SLACK_MS, DEADLINE_MS);
    CHECK_PRC(p->cancel_instances(p, &x_id, 1, "r", "b", &cr, &e), DURO_OK, &e);
    CHECK_EQ(cr.outcome, DURO_CANCEL_CANCELLED);
    duro_event started = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &started, 1, &m);
    int rc = p->ack_orchestration_item(p, late->lock_token, &ak, &e);
    CHECK_MSG(rc == DURO_LOCK_LOST || rc == DURO_NOT_FOUND,
              "the expired holder's ack returned %s", duro_errname(rc));
    duro_orch_item_free(late);
    expect_status(p, "x", DURO_STATUS_CANCELLED);
    CHECK_KINDS(p, "x", "1,5,6");

    /* r: begun (Running) */
    begin(p, "r", 0);
    const char *r_id = "r";
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, &r_id, 1, NULL,
                                   NULL, &tr, &e),
              DURO_OK, &e);
    CHECK_EQ(tr.outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    expect_status(p, "r", DURO_STATUS_RUNNING);
}

/* A child cancelled or terminated before it began tells its parent, as
 * its turn would have: a detached one does not. */
static void child_decided_at_once(duro_provider *p, int control,
                                  const char *parent, const char *kid)
{
    begin(p, parent, 0);
    uint64_t scheduled = start_child(p, parent, kid);
    duro_error e;
    duro_control_result res;
    CHECK_PRC(request_ids(p, control, &kid, 1, "enough", "ops", &res, &e),
              DURO_OK, &e);
    CHECK_EQ(res.outcome, control != 0 ? (int)DURO_CONTROL_OUTCOME_APPLIED
                                       : (int)DURO_CANCEL_CANCELLED);
    duro_history *h = history(p, kid, 1);
    CHECK_STR(h->events[0].ref_instance, parent);
    CHECK_EQ(h->events[0].ref_execution, 1);
    CHECK_EQ(h->events[0].ref_event_id, scheduled);
    duro_history_free(h);
    duro_orch_item *a = fetch_orch_expect(p, parent, LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    const duro_work_item *m = &a->messages[0];
    CHECK_EQ(m->kind, DURO_WORK_CHILD_FAILED);
    CHECK_EQ(m->execution_id, 1);
    CHECK_EQ(m->source_id, scheduled);
    CHECK_EQ(m->category, DURO_CATEGORY_CANCELLED);
    char want[128];
    snprintf(want, sizeof(want), "child '%s' was %s: enough", kid,
             control != 0 ? "terminated" : "cancelled");
    CHECK_STR(m->error, want);
    abandon_orch(p, a, 600000);
    duro_orch_item_free(a);
    expect_no_orch(p);
}

PV_TEST(a_child_decided_at_once_tells_its_parent)
{
    duro_provider *p = pv_open();
    require_v9(p);
    child_decided_at_once(p, 0, "parent", "kid");
    child_decided_at_once(p, DURO_CONTROL_TERMINATE, "parent2", "kid2");
    duro_provider *q = p;
    /* a detached child does not */
    begin(q, "boss", 0);
    duro_work_item w = work(DURO_WORK_START, "loose");
    w.name = "orch";
    w.parent_instance = "boss";
    w.parent_execution = 1;
    w.parent_event_id = 1;
    w.flags = DURO_START_DETACHED;
    enqueue(q, &w, 0);
    duro_error e;
    const char *loose = "loose";
    duro_cancel_result cr;
    CHECK_PRC(q->cancel_instances(q, &loose, 1, NULL, NULL, &cr, &e), DURO_OK,
              &e);
    CHECK_EQ(cr.outcome, DURO_CANCEL_CANCELLED);
    duro_history *h = history(q, "loose", 1);
    CHECK_EQ(h->events[0].flags, DURO_START_DETACHED);
    duro_history_free(h);
    CHECK_EQ(count(q, ORCH, "boss"), 0);
}

typedef struct sweep_child_arg {
    int control;
} sweep_child_arg;

static int sweep_decide_child(duro_provider *p, void *arg, duro_error *e)
{
    sweep_child_arg *a = arg;
    const char *kid = "kid";
    duro_control_result res;
    return request_ids(p, a->control, &kid, 1, "enough", "ops", &res, e);
}

PV_TEST(fault_sweep_a_child_decided_at_once)
{
    duro_provider *p = pv_open();
    require_v9(p);
    begin(p, "parent", 0);
    start_child(p, "parent", "kid");
    raise_event(p, "kid", "\"early\"", 0);
    sweep_child_arg arg = {0};
    fault_sweep(p, "cancel_instances (a child, at once)", sweep_decide_child,
                &arg);
    expect_status(p, "kid", DURO_STATUS_CANCELLED);
    CHECK_KINDS(p, "kid", "1,14,5,6");
    CHECK_EQ(count(p, ORCH, "parent"), 1);
    CHECK_EQ(count(p, ORCH, "kid"), 0);
}

/* ========================================================================
 * Version 10: the operators' queries. query_instances is checked against a
 * model - every instance read with list_instances, filtered and sorted in
 * C - for many filters, each order and several page sizes; paging while
 * instances are created; list_control_events against the requests the
 * test made. */

static void require_v10(duro_provider *p)
{
    require_v9(p);
    CHECK_MSG(p->version >= 10 && p->query_instances != NULL &&
                  p->list_control_events != NULL,
              "provider '%s' (version %d) lacks the version-10 methods",
              p->name, p->version);
}

/* Starts kids[i] of orchestration names[i] from one turn of `parent`: one
 * ack creates them all, so they share created_ms (and updated_ms). */
static void start_kids(duro_provider *p, const char *parent,
                       const char *const *kids, const char *const *names,
                       size_t n)
{
    duro_orch_item *a = poke(p, parent);
    duro_event *d = calloc(n + 1, sizeof(*d));
    duro_outbound *out = calloc(n, sizeof(*out));
    CHECK(d != NULL && out != NULL);
    d[0] = event(a->history_total + 1, DURO_EVENT_EVENT_RAISED);
    d[0].name = "poke";
    for (size_t i = 0; i < n; i++) {
        d[i + 1] = event(a->history_total + 2 + i,
                         DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED);
        d[i + 1].name = names[i];
        d[i + 1].ref_instance = kids[i];
        out[i].item = work(DURO_WORK_START, kids[i]);
        out[i].item.name = names[i];
        out[i].item.parent_instance = parent;
        out[i].item.parent_execution = a->execution_id;
        out[i].item.parent_event_id = d[i + 1].event_id;
    }
    duro_orch_ack ak = ack_of(a->execution_id, d, n + 1, NULL);
    ak.orchestrator_items = out;
    ak.orchestrator_item_count = n;
    ack(p, a->lock_token, &ak);
    free(d);
    free(out);
    duro_orch_item_free(a);
}

static void start_as(duro_provider *p, const char *id, const char *name)
{
    duro_work_item w = work(DURO_WORK_START, id);
    w.name = name;
    enqueue(p, &w, 0);
}

/* The first turn of Pending `id`: OrchestrationStarted, Running, its name
 * kept. */
static void first_turn_keep_name(duro_provider *p, const char *id)
{
    duro_orch_item *a = fetch_orch_for(p, id, LOCK_LONG);
    CHECK_EQ(a->execution_id, 0);
    duro_event d = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    duro_instance_meta m = meta(DURO_STATUS_RUNNING);
    duro_orch_ack ak = ack_of(1, &d, 1, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
}

/* A query as the model reads it. */
typedef struct qspec {
    const char *what; /* for messages */
    uint32_t mask;
    const char *name, *prefix, *contains, *parent;
    int with_problem;
    int64_t after, before;
    const char *orch_version; /* query version 3 */
} qspec;

static void qspec_to_query(const qspec *q, int order, size_t limit,
                           duro_instance_query *out)
{
    memset(out, 0, sizeof(*out));
    out->version = q->orch_version != NULL ? 3 : 1;
    out->orchestration_version = q->orch_version;
    out->status_mask = q->mask;
    out->name = q->name;
    out->name_prefix = q->prefix;
    out->name_contains = q->contains;
    out->parent_instance = q->parent;
    out->with_problem = q->with_problem;
    out->created_after_ms = q->after;
    out->created_before_ms = q->before;
    out->order = order;
    out->limit = limit;
}

static int model_match(const duro_instance_info *in, const qspec *q)
{
    if (q->mask != 0 && !((q->mask >> in->status) & 1u))
        return 0;
    if (q->name != NULL && strcmp(in->name, q->name) != 0)
        return 0;
    if (q->prefix != NULL && strncmp(in->name, q->prefix, strlen(q->prefix)))
        return 0;
    if (q->contains != NULL && strstr(in->name, q->contains) == NULL)
        return 0;
    if (q->parent != NULL && (in->parent_instance == NULL ||
                              strcmp(in->parent_instance, q->parent) != 0))
        return 0;
    if (q->with_problem && in->last_problem == NULL)
        return 0;
    if (q->after != 0 && in->created_ms < q->after)
        return 0;
    if (q->before != 0 && in->created_ms >= q->before)
        return 0;
    if (q->orch_version != NULL &&
        (in->version == NULL || strcmp(in->version, q->orch_version) != 0))
        return 0;
    return 1;
}

static int model_order; /* for model_compare (main thread only) */

static int model_compare(const void *x, const void *y)
{
    const duro_instance_info *a = *(const duro_instance_info *const *)x;
    const duro_instance_info *b = *(const duro_instance_info *const *)y;
    if (model_order == DURO_ORDER_ID)
        return strcmp(a->instance_id, b->instance_id);
    int64_t ka =
        model_order == DURO_ORDER_CREATED_DESC ? a->created_ms : a->updated_ms;
    int64_t kb =
        model_order == DURO_ORDER_CREATED_DESC ? b->created_ms : b->updated_ms;
    if (ka != kb)
        return ka > kb ? -1 : 1;
    return -strcmp(a->instance_id, b->instance_id);
}

/* The ids the model selects from `all` in `order`, comma-separated, and
 * how many (caller frees). */
static char *model_ids(const duro_instance_list *all, const qspec *q, int order,
                       size_t *count)
{
    const duro_instance_info **sel = calloc(all->count + 1, sizeof(*sel));
    CHECK(sel != NULL);
    size_t n = 0;
    for (size_t i = 0; i < all->count; i++)
        if (model_match(&all->items[i], q))
            sel[n++] = &all->items[i];
    model_order = order;
    qsort(sel, n, sizeof(*sel), model_compare);
    strbuf b = {0};
    sb_printf(&b, "%s", "");
    for (size_t i = 0; i < n; i++)
        sb_printf(&b, "%s%s", i ? "," : "", sel[i]->instance_id);
    free(sel);
    *count = n;
    return b.s;
}

static duro_instance_page *query_page(duro_provider *p,
                                      const duro_instance_query *q)
{
    duro_error e;
    duro_instance_page *page = NULL;
    CHECK_PRC(p->query_instances(p, q, &page, &e), DURO_OK, &e);
    CHECK(page != NULL);
    CHECK_INT(page->count, <=, q->limit ? q->limit : DURO_QUERY_LIMIT_DEFAULT);
    return page;
}

/* Pages through q in `order`, `limit` a page, with nothing changing
 * meanwhile: every page but the last is full and has a cursor, the last
 * has none; the first counts the total when asked. Returns the ids,
 * comma-separated (caller frees). */
static char *query_ids(duro_provider *p, const qspec *q, int order,
                       size_t limit, int count_total, int64_t *total)
{
    duro_instance_query qq;
    qspec_to_query(q, order, limit, &qq);
    qq.count_total = count_total;
    strbuf b = {0};
    sb_printf(&b, "%s", "");
    char *cursor = NULL;
    size_t seen = 0;
    for (int pages = 0;; pages++) {
        CHECK_MSG(pages < 1000, "%s: more than 1000 pages", q->what);
        qq.cursor = cursor;
        duro_instance_page *page = query_page(p, &qq);
        if (pages == 0)
            *total = page->total;
        else
            CHECK_EQ(page->total, -1); /* counted on the first page only */
        CHECK_EQ(page->total_capped, 0);
        qq.count_total = 0;
        for (size_t i = 0; i < page->count; i++)
            sb_printf(&b, "%s%s", seen++ ? "," : "",
                      page->items[i].instance_id);
        free(cursor);
        cursor = NULL;
        if (page->next_cursor == NULL) {
            CHECK_MSG(page->count > 0 || pages == 0,
                      "%s: an empty page after a cursor", q->what);
            duro_instance_page_free(page);
            break;
        }
        CHECK_MSG(page->count == limit,
                  "%s (order %d, limit %zu): a page of %zu has a cursor",
                  q->what, order, limit, page->count);
        cursor = xstrdup(page->next_cursor);
        duro_instance_page_free(page);
    }
    return b.s;
}

/* Fails unless q, in each order and page size, gives what the model
 * gives for `all`. */
static void check_query(duro_provider *p, const duro_instance_list *all,
                        const qspec *q)
{
    static const size_t limits[] = {1, 2, 3, 7, 1000};
    for (int order = 0; order <= DURO_ORDER_UPDATED_DESC; order++) {
        size_t want_count;
        char *want = model_ids(all, q, order, &want_count);
        for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
            int64_t total = -2;
            int count_total = k % 2 == 0;
            char *got = query_ids(p, q, order, limits[k], count_total, &total);
            CHECK_MSG(strcmp(got, want) == 0,
                      "%s, order %d, limit %zu:\n  got  %s\n  want %s", q->what,
                      order, limits[k], got, want);
            CHECK_EQ(total, count_total ? (int64_t)want_count : -1);
            free(got);
        }
        /* a count bounded below, at and above the matches: the smaller of
         * the two, capped when more match (query version 2) */
        const int64_t n = (int64_t)want_count;
        const int64_t caps[] = {1, n - 1, n, n + 1};
        for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
            if (caps[k] < 1)
                continue;
            duro_instance_query qq;
            qspec_to_query(q, order, 2, &qq);
            qq.version = qq.version > 2 ? qq.version : 2;
            qq.count_total = 1;
            qq.count_max = caps[k];
            duro_instance_page *page = query_page(p, &qq);
            CHECK_MSG(page->total == (n < caps[k] ? n : caps[k]) &&
                          page->total_capped == (n > caps[k]),
                      "%s, order %d, count_max %lld: total %lld capped %d "
                      "(%lld match)",
                      q->what, order, (long long)caps[k],
                      (long long)page->total, page->total_capped, (long long)n);
            duro_instance_page_free(page);
        }
        free(want);
    }
}

static duro_instance_list *list_all(duro_provider *p)
{
    duro_instance_filter f;
    memset(&f, 0, sizeof(f));
    duro_error e;
    duro_instance_list *l = NULL;
    CHECK_PRC(p->list_instances(p, &f, &l, &e), DURO_OK, &e);
    return l;
}

PV_TEST(query_instances_selects_and_orders_as_a_model_does)
{
    duro_provider *p = pv_open();
    require_v10(p);
    duro_error e;
    /* Names that a LIKE would confuse, and prefixes at the edges of a
     * byte and of a code point: U+007F then U+0080, U+10FFFF. */
    static const char *const names[] = {"a%b",
                                        "a_b",
                                        "axb",
                                        "ab",
                                        "a\\b",
                                        "\xc3\xa9t\xc3\xa9",
                                        "\xc3\xaa",
                                        "\x7f"
                                        "x",
                                        "\xc2\x80",
                                        "\xf4\x8f\xbf\xbfz",
                                        "zz"};
    enum { NAMES = sizeof(names) / sizeof(names[0]) };
    begin(p, "q-root", 0);
    begin(p, "q-root2", 0);
    /* Three kids created in one ack (a tie on created_ms), then one
     * instance per name, each a clock tick later, then four more kids of
     * another parent in one ack. */
    duro_instance_list *l = get(p, "q-root2");
    clock_past(l->items[0].created_ms);
    duro_instance_list_free(l);
    const char *kids1[] = {"q-k3", "q-k1", "q-k2"};
    const char *kid_names1[] = {"a_b", "zz", "a%b"};
    start_kids(p, "q-root", kids1, kid_names1, 3);
    int64_t mid = 0;
    for (int i = 0; i < NAMES; i++) {
        char id[32];
        snprintf(id, sizeof(id), "q-%02d", i);
        start_as(p, id, names[i]);
        l = get(p, id);
        if (i == NAMES / 2)
            mid = l->items[0].created_ms;
        clock_past(l->items[0].created_ms);
        duro_instance_list_free(l);
    }
    const char *kids2[] = {"q-m2", "q-m4", "q-m1", "q-m3"};
    const char *kid_names2[] = {"ab", "ab", "a_b", "zz"};
    start_kids(p, "q-root2", kids2, kid_names2, 4);
    /* Statuses: Running, Completed, Failed (with and without a problem),
     * Cancelled, Suspended, Terminated; Pending ones stay; problems on
     * live instances; and later changes, so the last-change order differs
     * from the creation order. */
    begin(p, "q-run", 0);
    static const char *const begun[] = {"q-00", "q-01", "q-02", "q-03", "q-04",
                                        "q-05", "q-06", "q-k2", "q-m1"};
    for (size_t i = 0; i < sizeof(begun) / sizeof(begun[0]); i++)
        first_turn_keep_name(p, begun[i]);
    end_as(p, "q-00", DURO_STATUS_RUNNING, NULL);
    end_as(p, "q-01", DURO_STATUS_COMPLETED, NULL);
    end_as(p, "q-02", DURO_STATUS_FAILED, NULL);
    duro_instance_meta fm = failed_meta("poison", "gave up");
    turn_meta(p, "q-03", &fm);
    end_as(p, "q-04", DURO_STATUS_CANCELLED, NULL);
    end_as(p, "q-05", DURO_STATUS_SUSPENDED, NULL);
    end_as(p, "q-06", DURO_STATUS_TERMINATED, NULL);
    end_as(p, "q-k2", DURO_STATUS_COMPLETED, NULL);
    end_as(p, "q-m1", DURO_STATUS_SUSPENDED, NULL);
    CHECK_PRC(p->set_instance_problem(p, "q-07", "stuck", 0, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "q-m1", "held", 0, &e), DURO_OK, &e);
    CHECK_PRC(p->set_instance_problem(p, "q-root", "slow", 0, &e), DURO_OK, &e);
    l = get(p, "q-m1");
    clock_past(l->items[0].updated_ms);
    duro_instance_list_free(l);
    end_as(p, "q-root2", DURO_STATUS_RUNNING, NULL); /* changed last */

    duro_instance_list *all = list_all(p);
    CHECK_EQ(all->count, 2 + 3 + NAMES + 4 + 1);
    const uint32_t live = (1u << DURO_STATUS_PENDING) |
                          (1u << DURO_STATUS_RUNNING) |
                          (1u << DURO_STATUS_SUSPENDED);
    const uint32_t ended =
        (1u << DURO_STATUS_COMPLETED) | (1u << DURO_STATUS_FAILED) |
        (1u << DURO_STATUS_CANCELLED) | (1u << DURO_STATUS_TERMINATED);
    const qspec specs[] = {
        {.what = "everything"},
        {.what = "Running", .mask = 1u << DURO_STATUS_RUNNING},
        {.what = "Pending", .mask = 1u << DURO_STATUS_PENDING},
        {.what = "live", .mask = live},
        {.what = "ended", .mask = ended},
        {.what = "every status", .mask = live | ended},
        {.what = "ContinuedAsNew (none)",
         .mask = 1u << DURO_STATUS_CONTINUED_AS_NEW},
        {.what = "name a_b", .name = "a_b"},
        {.what = "name ab, Pending",
         .name = "ab",
         .mask = 1u << DURO_STATUS_PENDING},
        {.what = "name a_b, live", .name = "a_b", .mask = live},
        {.what = "name nope", .name = "nope"},
        {.what = "prefix a%", .prefix = "a%"},
        {.what = "prefix a_", .prefix = "a_"},
        {.what = "prefix a", .prefix = "a"},
        {.what = "prefix a\\", .prefix = "a\\"},
        {.what = "prefix e-acute", .prefix = "\xc3\xa9"},
        {.what = "prefix U+007F", .prefix = "\x7f"},
        {.what = "prefix U+10FFFF", .prefix = "\xf4\x8f\xbf\xbf"},
        {.what = "prefix empty", .prefix = ""},
        {.what = "prefix a, ended", .prefix = "a", .mask = ended},
        {.what = "contains %", .contains = "%"},
        {.what = "contains _", .contains = "_"},
        {.what = "contains \\", .contains = "\\"},
        {.what = "contains b", .contains = "b"},
        {.what = "contains b, live", .contains = "b", .mask = live},
        {.what = "contains empty", .contains = ""},
        {.what = "name ab, contains b", .name = "ab", .contains = "b"},
        {.what = "parent q-root", .parent = "q-root"},
        {.what = "parent q-root2, live", .parent = "q-root2", .mask = live},
        {.what = "parent q-root2, prefix a",
         .parent = "q-root2",
         .prefix = "a"},
        {.what = "parent nobody", .parent = "nobody"},
        {.what = "with a problem", .with_problem = 1},
        {.what = "with a problem, live", .with_problem = 1, .mask = live},
        {.what = "with a problem, Failed",
         .with_problem = 1,
         .mask = 1u << DURO_STATUS_FAILED},
        {.what = "with a problem, parent",
         .with_problem = 1,
         .parent = "q-root2"},
        {.what = "created from mid", .after = mid},
        {.what = "created before mid", .before = mid},
        {.what = "created range", .after = mid - 3, .before = mid + 3},
        {.what = "created from mid, Pending",
         .after = mid,
         .mask = 1u << DURO_STATUS_PENDING},
        {.what = "created before mid, name zz", .before = mid, .name = "zz"},
        {.what = "created before mid, prefix a", .before = mid, .prefix = "a"},
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
        check_query(p, all, &specs[i]);
    /* Spot checks of the model itself, with the ties of one ack. */
    size_t n;
    char *ids = model_ids(all, &specs[7], DURO_ORDER_CREATED_DESC, &n);
    CHECK_STR(ids, "q-m1,q-01,q-k3");
    free(ids);
    ids = model_ids(all, &specs[11], DURO_ORDER_ID, &n);
    CHECK_STR(ids, "q-00,q-k2");
    free(ids);
    ids = model_ids(all, &specs[16], DURO_ORDER_ID, &n);
    CHECK_STR(ids, "q-07");
    free(ids);
    /* Each item is what get_instance says. */
    duro_instance_query q;
    qspec_to_query(&specs[0], DURO_ORDER_UPDATED_DESC, 1000, &q);
    duro_instance_page *page = query_page(p, &q);
    CHECK_EQ(page->count, all->count);
    CHECK_STR(page->items[0].instance_id, "q-root2");
    for (size_t i = 0; i < page->count; i++) {
        duro_instance_list *one = get(p, page->items[i].instance_id);
        const duro_instance_info *a = &page->items[i], *b = &one->items[0];
        CHECK_STR(a->name, b->name);
        CHECK_EQ(a->status, b->status);
        CHECK_EQ(a->execution_id, b->execution_id);
        CHECK_EQ(a->created_ms, b->created_ms);
        CHECK_EQ(a->updated_ms, b->updated_ms);
        CHECK_EQ(a->history_count, b->history_count);
        CHECK_STR(a->error, b->error);
        CHECK_STR(a->parent_instance, b->parent_instance);
        CHECK_STR(a->last_problem, b->last_problem);
        CHECK_EQ(a->finished_ms, b->finished_ms);
        duro_instance_list_free(one);
    }
    duro_instance_page_free(page);
    duro_instance_list_free(all);
}

/* Pages of 10 through 26 instances (two and a half pages, with ties on
 * created_ms), in each order, while instances are created between pages:
 * every instance that was there is on exactly one page, none is on two;
 * new ones appear only where their key sorts after the cursor (by id),
 * never in the newest-first orders. In the last-change order an instance
 * that changes moves to the front: shown before, it is not shown again;
 * not shown yet, it is skipped (the contract says so). */
PV_TEST(query_instances_pages_once_through_while_instances_are_created)
{
    duro_provider *p = pv_open();
    require_v10(p);
    begin(p, "pg-root", 0);
    char ids[25][16];
    const char *batch[9], *names[9];
    for (int b = 0, k = 0; b < 3; b++) {
        int n = b < 2 ? 8 : 9;
        for (int i = 0; i < n; i++, k++) {
            /* ids not in creation order: the id ties break both ways */
            snprintf(ids[k], sizeof(ids[k]), "pg-%02d", (k * 7) % 25);
            batch[i] = ids[k];
            names[i] = "orch";
        }
        start_kids(p, "pg-root", batch, names, (size_t)n);
    }
    duro_instance_list *all = list_all(p);
    CHECK_EQ(all->count, 26);
    int64_t newest = 0;
    for (size_t i = 0; i < all->count; i++) {
        if (all->items[i].created_ms > newest)
            newest = all->items[i].created_ms;
        if (all->items[i].updated_ms > newest)
            newest = all->items[i].updated_ms;
    }
    int made = 0;
    for (int order = 0; order <= DURO_ORDER_UPDATED_DESC; order++) {
        /* later instances are newer than every one of `all` */
        clock_past(newest);
        duro_instance_query q;
        memset(&q, 0, sizeof(q));
        q.version = 1;
        q.order = order;
        q.limit = 10;
        char seen[64][32];
        size_t seen_n = 0;
        char *cursor = NULL;
        int pages = 0;
        const char *moved_seen = NULL, *moved_unseen = NULL;
        for (;; pages++) {
            CHECK(pages < 10);
            q.cursor = cursor;
            duro_instance_page *page = query_page(p, &q);
            for (size_t i = 0; i < page->count; i++) {
                for (size_t j = 0; j < seen_n; j++)
                    CHECK_MSG(strcmp(seen[j], page->items[i].instance_id),
                              "order %d: %s on two pages", order,
                              page->items[i].instance_id);
                CHECK(seen_n < 64);
                snprintf(seen[seen_n++], sizeof(seen[0]), "%s",
                         page->items[i].instance_id);
            }
            free(cursor);
            cursor = page->next_cursor ? xstrdup(page->next_cursor) : NULL;
            duro_instance_page_free(page);
            if (cursor == NULL)
                break;
            /* between pages: one id before every original, one after, and
             * a batch of kids in one ack */
            char a[32], z[32], k1[32], k2[32];
            snprintf(a, sizeof(a), "pa-%d", made);
            snprintf(z, sizeof(z), "pz-%d", made);
            snprintf(k1, sizeof(k1), "pa-k%d", made);
            snprintf(k2, sizeof(k2), "pg-%02d-new", made);
            made++;
            start_as(p, a, "orch");
            start_as(p, z, "orch");
            const char *kb[] = {k1, k2};
            start_kids(p, "pg-root", kb, names, 2);
            if (order == DURO_ORDER_UPDATED_DESC && pages == 0) {
                /* one shown on the first page, one not shown yet */
                moved_seen = xstrdup(seen[3]);
                for (size_t i = 0; i < all->count && !moved_unseen; i++) {
                    int shown = 0;
                    for (size_t j = 0; j < seen_n; j++)
                        shown |= !strcmp(seen[j], all->items[i].instance_id);
                    if (!shown && strcmp(all->items[i].instance_id, "pg-root"))
                        moved_unseen = xstrdup(all->items[i].instance_id);
                }
                first_turn_keep_name(p, moved_seen);
                first_turn_keep_name(p, moved_unseen);
            }
        }
        /* two and a half pages at least, each full but the last */
        CHECK_MSG(pages >= 2 && (size_t)pages == (seen_n - 1) / 10,
                  "order %d: %zu instances on %d pages", order, seen_n,
                  pages + 1);
        /* every original once, except the one that moved unseen */
        for (size_t i = 0; i < all->count; i++) {
            int times = 0;
            for (size_t j = 0; j < seen_n; j++)
                times += !strcmp(seen[j], all->items[i].instance_id);
            int want = moved_unseen != NULL &&
                               !strcmp(moved_unseen, all->items[i].instance_id)
                           ? 0
                           : 1;
            CHECK_MSG(times == want, "order %d: %s shown %d times", order,
                      all->items[i].instance_id, times);
        }
        /* new ones: by id, those after the cursor they were created at */
        for (size_t j = 0; j < seen_n; j++) {
            int original = 0;
            for (size_t i = 0; i < all->count; i++)
                original |= !strcmp(seen[j], all->items[i].instance_id);
            if (original)
                continue;
            CHECK_MSG(order == DURO_ORDER_ID,
                      "order %d: %s, created after the first page, shown",
                      order, seen[j]);
            CHECK_MSG(strncmp(seen[j], "pz-", 3) == 0,
                      "order id: %s sorts before the cursor, shown", seen[j]);
        }
        free((char *)moved_seen);
        free((char *)moved_unseen);
        /* the instances made for this order are the newest for the next */
        duro_instance_list_free(all);
        all = list_all(p);
        newest = 0;
        for (size_t i = 0; i < all->count; i++) {
            if (all->items[i].created_ms > newest)
                newest = all->items[i].created_ms;
            if (all->items[i].updated_ms > newest)
                newest = all->items[i].updated_ms;
        }
    }
    duro_instance_list_free(all);
}

/* Fails unless query q is refused with `code`, not retryably, *out NULL,
 * and a message that holds `needle`. */
static void expect_query_refused(duro_provider *p, const duro_instance_query *q,
                                 int code, const char *needle)
{
    duro_error e;
    duro_instance_page *page = (duro_instance_page *)&e;
    CHECK_PFAIL(p->query_instances(p, q, &page, &e), code, 0, &e);
    CHECK(page == NULL);
    CHECK_MSG(strstr(e.message, needle) != NULL,
              "query_instances' message '%s' does not say '%s'", e.message,
              needle);
}

PV_TEST(query_instances_refuses_bad_input_and_bad_cursors)
{
    duro_provider *p = pv_open();
    require_v10(p);
    const char *kids[] = {"b-2", "b-1", "b-3"};
    const char *names[] = {"orch", "orch", "orch"};
    begin(p, "b-root", 0);
    start_kids(p, "b-root", kids, names, 3);
    duro_instance_query q;
    memset(&q, 0, sizeof(q));
    q.version = 1;
    duro_error e;
    CHECK_PFAIL(p->query_instances(p, &q, NULL, &e), DURO_INVALID, 0, &e);
    duro_instance_page *page = (duro_instance_page *)&e;
    CHECK_PFAIL(p->query_instances(p, NULL, &page, &e), DURO_INVALID, 0, &e);
    CHECK(page == NULL);
    q.version = 0;
    expect_query_refused(p, &q, DURO_INVALID, "duro_instance_query_init");
    q.version = 1;
    q.order = 3;
    expect_query_refused(p, &q, DURO_INVALID, "order");
    q.order = -1;
    expect_query_refused(p, &q, DURO_INVALID, "order");
    q.order = 0;
    q.limit = DURO_QUERY_LIMIT_MAX + 1;
    expect_query_refused(p, &q, DURO_INVALID, "limit");
    q.limit = (size_t)-1; /* a negative limit */
    expect_query_refused(p, &q, DURO_INVALID, "limit");
    q.limit = 0;
    q.status_mask = 1u; /* NOT_FOUND is no status */
    expect_query_refused(p, &q, DURO_INVALID, "status_mask");
    q.status_mask = 1u << 9;
    expect_query_refused(p, &q, DURO_INVALID, "status_mask");
    q.status_mask = 0;
    q.with_problem = 2;
    expect_query_refused(p, &q, DURO_INVALID, "with_problem");
    q.with_problem = 0;
    q.count_total = -1;
    expect_query_refused(p, &q, DURO_INVALID, "count_total");
    q.count_total = 0;
    q.version = 2; /* count_max is read from version 2 on */
    q.count_max = -1;
    expect_query_refused(p, &q, DURO_INVALID, "count_max");
    q.version = 1;
    duro_instance_page *v1 = NULL;
    CHECK_PRC(p->query_instances(p, &q, &v1, &e), DURO_OK, &e);
    duro_instance_page_free(v1);
    q.count_max = 0;
    q.created_after_ms = -1;
    expect_query_refused(p, &q, DURO_INVALID, "created_after_ms");
    q.created_after_ms = 0;
    q.created_before_ms = -5;
    expect_query_refused(p, &q, DURO_INVALID, "created_before_ms");
    q.created_before_ms = 0;
    q.name = "";
    expect_query_refused(p, &q, DURO_INVALID, "name");
    q.name = NULL;
    q.parent_instance = "";
    expect_query_refused(p, &q, DURO_INVALID, "parent_instance");
    q.parent_instance = NULL;
    char *big = repeat('n', 1025);
    char *max = repeat('n', 1024);
    const char **fields[] = {&q.name, &q.name_prefix, &q.name_contains,
                             &q.parent_instance};
    static const char *const field_names[] = {
        "name", "name_prefix", "name_contains", "parent_instance"};
    for (int f = 0; f < 4; f++) {
        *fields[f] = big;
        expect_query_refused(p, &q, DURO_TOO_LARGE, field_names[f]);
        *fields[f] = max; /* the maximum itself is fine */
        page = query_page(p, &q);
        CHECK_EQ(page->count, 0);
        duro_instance_page_free(page);
        *fields[f] = NULL;
    }
    free(big);
    free(max);
    /* The default page, and an empty prefix and substring: no filter. */
    q.name_prefix = "";
    q.name_contains = "";
    page = query_page(p, &q);
    CHECK_EQ(page->count, 4);
    CHECK(page->next_cursor == NULL);
    CHECK_EQ(page->total, -1);
    duro_instance_page_free(page);
    q.name_prefix = q.name_contains = NULL;

    /* A real cursor works in its order, and in no other. */
    q.limit = 2;
    q.order = DURO_ORDER_CREATED_DESC;
    page = query_page(p, &q);
    CHECK(page->next_cursor != NULL);
    for (const char *c = page->next_cursor; *c; c++)
        CHECK_MSG(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789._-",
                         *c) != NULL,
                  "cursor '%s' holds '%c'", page->next_cursor, *c);
    char *created_cursor = xstrdup(page->next_cursor);
    duro_instance_page_free(page);
    q.cursor = created_cursor;
    page = query_page(p, &q);
    CHECK_EQ(page->count, 2);
    duro_instance_page_free(page);
    q.order = DURO_ORDER_ID;
    expect_query_refused(p, &q, DURO_INVALID, "order");
    q.order = DURO_ORDER_UPDATED_DESC;
    expect_query_refused(p, &q, DURO_INVALID, "order");
    q.order = DURO_ORDER_CREATED_DESC;
    /* Anything else is malformed, never a wrong page. */
    char *long_cursor = repeat('A', 5000);
    static const char *const bad[] = {"",
                                      "garbage",
                                      "i1",
                                      "i1.",
                                      "i1.1",
                                      "i1.1.",
                                      "i1.1.5",
                                      "i1.1.5.",
                                      "i1.1.5.!!!!",
                                      "i1.1.x.YQ",
                                      "i1.9.5.YQ",
                                      "i1.-1.5.YQ",
                                      "i1.01.5.YQ",
                                      "i1.1.05.YQ",
                                      "i1.1.-0.YQ",
                                      "i1.1.99999999999999999999.YQ",
                                      "i1.1.5.Y",
                                      "i1.1.5.YR",
                                      "i1.1.5.AA",
                                      "i1.1.5.YQ==",
                                      "i2.1.5.YQ",
                                      "e1.5.1.2.YQ",
                                      "i1.1.5.YQ.x",
                                      " i1.1.5.YQ"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        q.cursor = bad[i];
        expect_query_refused(p, &q, DURO_INVALID, "cursor");
    }
    q.cursor = long_cursor;
    expect_query_refused(p, &q, DURO_INVALID, "cursor");
    free(long_cursor);
    /* a well-formed cursor that names no instance still pages by key */
    q.cursor = "i1.1.5.YQ"; /* (5, "a"): nothing was created before 5 ms */
    page = query_page(p, &q);
    CHECK_EQ(page->count, 0);
    CHECK(page->next_cursor == NULL);
    duro_instance_page_free(page);
    q.order = DURO_ORDER_ID;
    q.cursor = "i1.0.0.Yi0y"; /* after "b-2" */
    page = query_page(p, &q);
    CHECK_EQ(page->count, 2);
    CHECK_STR(page->items[0].instance_id, "b-3");
    CHECK_STR(page->items[1].instance_id, "b-root");
    duro_instance_page_free(page);
    free(created_cursor);
}

/* The turn that takes the control messages queued for `id`: records each
 * as its event (reason and requester from the message), leaving the
 * instance `status`. */
static void turn_controls(duro_provider *p, const char *id, int status)
{
    duro_orch_item *a = fetch_orch_for(p, id, LOCK_LONG);
    duro_event *d = calloc(a->message_count, sizeof(*d));
    CHECK(d != NULL);
    for (size_t i = 0; i < a->message_count; i++) {
        const duro_work_item *m = &a->messages[i];
        int kind = m->kind == DURO_WORK_TERMINATE_INSTANCE
                       ? DURO_EVENT_ORCHESTRATION_TERMINATED
                   : m->kind == DURO_WORK_SUSPEND_INSTANCE
                       ? DURO_EVENT_EXECUTION_SUSPENDED
                   : m->kind == DURO_WORK_RESUME_INSTANCE
                       ? DURO_EVENT_EXECUTION_RESUMED
                       : DURO_EVENT_ORCHESTRATION_CANCEL_REQUESTED;
        d[i] = event(a->history_total + 1 + i, (duro_event_kind)kind);
        d[i].reason = m->reason;
        d[i].requested_by = m->requested_by;
    }
    duro_instance_meta m = meta(status);
    duro_orch_ack ak = ack_of(a->execution_id, d, a->message_count, &m);
    ack(p, a->lock_token, &ak);
    free(d);
    duro_orch_item_free(a);
}

static duro_control_event_list *events_page(duro_provider *p,
                                            const duro_control_event_query *q)
{
    duro_error e;
    duro_control_event_list *l = NULL;
    CHECK_PRC(p->list_control_events(p, q, &l, &e), DURO_OK, &e);
    CHECK(l != NULL);
    return l;
}

/* Every event q selects, paging `limit` at a time, as
 * "instance:execution:event:kind:reason:by:flags;" lines (caller frees). */
static char *events_text(duro_provider *p, duro_control_event_query q,
                         size_t limit)
{
    q.limit = limit;
    q.cursor = NULL;
    strbuf b = {0};
    sb_printf(&b, "%s", "");
    char *cursor = NULL;
    int64_t last_ts = INT64_MAX;
    for (int pages = 0; pages < 100; pages++) {
        q.cursor = cursor;
        duro_control_event_list *l = events_page(p, &q);
        CHECK_INT(l->count, <=, limit);
        for (size_t i = 0; i < l->count; i++) {
            const duro_control_event *ev = &l->items[i];
            CHECK_INT(ev->timestamp_ms, <=, last_ts); /* newest first */
            last_ts = ev->timestamp_ms;
            sb_printf(&b, "%s:%s:%llu:%llu:%d:%s:%s:%u;", ev->instance_id,
                      ev->name ? ev->name : "(null)",
                      (unsigned long long)ev->execution_id,
                      (unsigned long long)ev->event_id, ev->kind,
                      ev->reason ? ev->reason : "(null)",
                      ev->requested_by ? ev->requested_by : "(null)",
                      (unsigned)ev->flags);
        }
        free(cursor);
        cursor = l->next_cursor ? xstrdup(l->next_cursor) : NULL;
        if (cursor != NULL)
            CHECK_EQ(l->count, limit);
        duro_control_event_list_free(l);
        if (cursor == NULL)
            break;
    }
    CHECK(cursor == NULL);
    return b.s;
}

PV_TEST(list_control_events_says_who_did_what_and_why)
{
    duro_provider *p = pv_open();
    require_v10(p);
    duro_error e;
    /* c1, c2: Pending, cancelled at once by one call (one timestamp: the
     * tie goes by instance id, descending); t: terminated at once; s:
     * suspended before it began; r: Running, suspended, resumed and
     * terminated by turns; x: Running, cancelled by a turn (observed),
     * then deleted with its history; k: a turn records nothing of the
     * kind. */
    start_as(p, "c1", "billing");
    start_as(p, "c2", "billing");
    start_as(p, "t", "shipping");
    start_as(p, "s", "shipping");
    begin(p, "r", 0);
    begin(p, "x", 0);
    begin(p, "k", 3);
    int64_t t0 = duro_now_ms();
    const char *cs[] = {"c1", "c2"};
    duro_cancel_result cr[2];
    CHECK_PRC(p->cancel_instances(p, cs, 2, "not needed", "user:ann", cr, &e),
              DURO_OK, &e);
    CHECK_EQ(cr[0].outcome, DURO_CANCEL_CANCELLED);
    CHECK_EQ(cr[1].outcome, DURO_CANCEL_CANCELLED);
    duro_history *h = history(p, "c1", 1);
    int64_t cancel_ts = h->events[2].timestamp_ms;
    duro_history_free(h);
    clock_past(cancel_ts);
    const char *one[1];
    duro_control_result res;
    one[0] = "t";
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_TERMINATE, one, 1, "stop",
                                   "ops:bob", &res, &e),
              DURO_OK, &e);
    CHECK_EQ(res.outcome, DURO_CONTROL_OUTCOME_APPLIED);
    h = history(p, "t", 1);
    clock_past(h->events[1].timestamp_ms);
    duro_history_free(h);
    one[0] = "s";
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, one, 1, NULL,
                                   "ops:bob", &res, &e),
              DURO_OK, &e);
    CHECK_EQ(res.outcome, DURO_CONTROL_OUTCOME_APPLIED);
    h = history(p, "s", 1);
    int64_t mid = h->events[1].timestamp_ms;
    duro_history_free(h);
    clock_past(mid);
    one[0] = "r";
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_SUSPEND, one, 1, "look",
                                   "ops:cy", &res, &e),
              DURO_OK, &e);
    CHECK_EQ(res.outcome, DURO_CONTROL_OUTCOME_REQUESTED);
    turn_controls(p, "r", DURO_STATUS_SUSPENDED);
    h = history(p, "r", 1);
    clock_past(h->events[h->count - 1].timestamp_ms);
    duro_history_free(h);
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_RESUME, one, 1, "go on",
                                   "ops:cy", &res, &e),
              DURO_OK, &e);
    turn_controls(p, "r", DURO_STATUS_RUNNING);
    h = history(p, "r", 1);
    clock_past(h->events[h->count - 1].timestamp_ms);
    duro_history_free(h);
    CHECK_PRC(p->control_instances(p, DURO_CONTROL_TERMINATE, one, 1, "enough",
                                   "ops:cy", &res, &e),
              DURO_OK, &e);
    turn_controls(p, "r", DURO_STATUS_TERMINATED);
    one[0] = "x";
    duro_cancel_result xr;
    CHECK_PRC(p->cancel_instances(p, one, 1, "gone", "user:dee", &xr, &e),
              DURO_OK, &e);
    CHECK_EQ(xr.outcome, DURO_CANCEL_REQUESTED);
    turn_controls(p, "x", DURO_STATUS_RUNNING);
    end_as(p, "k", DURO_STATUS_RUNNING, NULL);
    int64_t t1 = duro_now_ms();

    /* Newest first; the two cancels decided at once share a timestamp and
     * come by instance id, descending. The instance's name is each one's;
     * r's requests are in its execution 1 at the ids its turns gave. */
    duro_control_event_query q;
    memset(&q, 0, sizeof(q));
    q.version = 1;
    const char *want = "x:orch:1:2:5:gone:user:dee:0;"
                       "r:orch:1:4:19:enough:ops:cy:0;"
                       "r:orch:1:3:21:go on:ops:cy:0;"
                       "r:orch:1:2:20:look:ops:cy:0;"
                       "s:shipping:1:2:20:(null):ops:bob:32;"
                       "t:shipping:1:2:19:stop:ops:bob:0;"
                       "c2:billing:1:2:5:not needed:user:ann:0;"
                       "c1:billing:1:2:5:not needed:user:ann:0;";
    static const size_t limits[] = {1, 2, 3, 8, 100};
    for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
        char *got = events_text(p, q, limits[k]);
        CHECK_STR(got, want);
        free(got);
    }
    duro_control_event_list *l = events_page(p, &q);
    CHECK_EQ(l->count, 8);
    CHECK(l->next_cursor == NULL);
    for (size_t i = 0; i < l->count; i++)
        CHECK_WITHIN(l->items[i].timestamp_ms, t0, t1);
    CHECK_EQ(l->items[7].timestamp_ms, cancel_ts);
    duro_control_event_list_free(l);

    /* Filters: kinds, requester, time range, and together. */
    q.kind_mask = 1u << DURO_EVENT_ORCHESTRATION_TERMINATED;
    char *got = events_text(p, q, 1);
    CHECK_STR(got, "r:orch:1:4:19:enough:ops:cy:0;"
                   "t:shipping:1:2:19:stop:ops:bob:0;");
    free(got);
    q.kind_mask = (1u << DURO_EVENT_EXECUTION_SUSPENDED) |
                  (1u << DURO_EVENT_EXECUTION_RESUMED);
    got = events_text(p, q, 2);
    CHECK_STR(got, "r:orch:1:3:21:go on:ops:cy:0;"
                   "r:orch:1:2:20:look:ops:cy:0;"
                   "s:shipping:1:2:20:(null):ops:bob:32;");
    free(got);
    q.kind_mask = DURO_CONTROL_EVENT_KINDS;
    q.requested_by = "ops:bob";
    got = events_text(p, q, 1);
    CHECK_STR(got, "s:shipping:1:2:20:(null):ops:bob:32;"
                   "t:shipping:1:2:19:stop:ops:bob:0;");
    free(got);
    q.requested_by = "ops:bo";
    got = events_text(p, q, 5);
    CHECK_STR(got, "");
    free(got);
    q.requested_by = NULL;
    q.until_ms = mid; /* before s's suspend */
    got = events_text(p, q, 2);
    CHECK_STR(got, "t:shipping:1:2:19:stop:ops:bob:0;"
                   "c2:billing:1:2:5:not needed:user:ann:0;"
                   "c1:billing:1:2:5:not needed:user:ann:0;");
    free(got);
    q.until_ms = 0;
    q.since_ms = mid; /* from s's suspend */
    q.kind_mask = 1u << DURO_EVENT_EXECUTION_SUSPENDED;
    got = events_text(p, q, 1);
    CHECK_STR(got, "r:orch:1:2:20:look:ops:cy:0;"
                   "s:shipping:1:2:20:(null):ops:bob:32;");
    free(got);
    q.since_ms = cancel_ts;
    q.until_ms = cancel_ts + 1;
    q.kind_mask = 0;
    got = events_text(p, q, 1);
    CHECK_STR(got, "c2:billing:1:2:5:not needed:user:ann:0;"
                   "c1:billing:1:2:5:not needed:user:ann:0;");
    free(got);
    q.since_ms = q.until_ms = 0;

    /* An instance deleted takes its requests with it; a request of a
     * later page survives a deletion between pages. */
    q.limit = 4;
    l = events_page(p, &q);
    CHECK(l->next_cursor != NULL);
    q.cursor = l->next_cursor;
    size_t deleted = 0;
    CHECK_PRC(p->delete_instance(p, "x", 1, &deleted, &e), DURO_OK, &e);
    CHECK_EQ(deleted, 1);
    duro_control_event_list *l2 = events_page(p, &q);
    CHECK_EQ(l2->count, 4);
    CHECK_STR(l2->items[0].instance_id, "s");
    CHECK(l2->next_cursor == NULL);
    duro_control_event_list_free(l2);
    duro_control_event_list_free(l);
    q.cursor = NULL;
    got = events_text(p, q, 100);
    CHECK(strstr(got, "x:") == NULL);
    free(got);
}

static void expect_events_refused(duro_provider *p,
                                  const duro_control_event_query *q, int code,
                                  const char *needle)
{
    duro_error e;
    duro_control_event_list *l = (duro_control_event_list *)&e;
    CHECK_PFAIL(p->list_control_events(p, q, &l, &e), code, 0, &e);
    CHECK(l == NULL);
    CHECK_MSG(strstr(e.message, needle) != NULL,
              "list_control_events' message '%s' does not say '%s'", e.message,
              needle);
}

PV_TEST(list_control_events_refuses_bad_input_and_bad_cursors)
{
    duro_provider *p = pv_open();
    require_v10(p);
    start_as(p, "a", "orch");
    start_as(p, "b", "orch");
    const char *ids[] = {"a", "b"};
    duro_cancel_result cr[2];
    duro_error e;
    CHECK_PRC(p->cancel_instances(p, ids, 2, "r", "me", cr, &e), DURO_OK, &e);
    duro_control_event_query q;
    memset(&q, 0, sizeof(q));
    CHECK_PFAIL(p->list_control_events(p, &q, NULL, &e), DURO_INVALID, 0, &e);
    duro_control_event_list *l = (duro_control_event_list *)&e;
    CHECK_PFAIL(p->list_control_events(p, NULL, &l, &e), DURO_INVALID, 0, &e);
    CHECK(l == NULL);
    expect_events_refused(p, &q, DURO_INVALID, "duro_control_event_query_init");
    q.version = 1;
    q.kind_mask = 1u << DURO_EVENT_ACTIVITY_SCHEDULED;
    expect_events_refused(p, &q, DURO_INVALID, "kind_mask");
    q.kind_mask = DURO_CONTROL_EVENT_KINDS | (1u << 6);
    expect_events_refused(p, &q, DURO_INVALID, "kind_mask");
    q.kind_mask = 0;
    q.since_ms = -1;
    expect_events_refused(p, &q, DURO_INVALID, "since_ms");
    q.since_ms = 0;
    q.until_ms = -1;
    expect_events_refused(p, &q, DURO_INVALID, "until_ms");
    q.until_ms = 0;
    q.limit = DURO_QUERY_LIMIT_MAX + 1;
    expect_events_refused(p, &q, DURO_INVALID, "limit");
    q.limit = (size_t)-1;
    expect_events_refused(p, &q, DURO_INVALID, "limit");
    q.limit = 1;
    char *big = repeat('r', 1025);
    q.requested_by = big;
    expect_events_refused(p, &q, DURO_TOO_LARGE, "requested_by");
    free(big);
    q.requested_by = NULL;
    l = events_page(p, &q);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].instance_id, "b");
    CHECK(l->next_cursor != NULL);
    char *cursor = xstrdup(l->next_cursor);
    duro_control_event_list_free(l);
    q.cursor = cursor;
    l = events_page(p, &q);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].instance_id, "a");
    CHECK(l->next_cursor == NULL);
    duro_control_event_list_free(l);
    free(cursor);
    static const char *const bad[] = {"",
                                      "x",
                                      "e1",
                                      "e1.",
                                      "e1.5",
                                      "e1.5.1",
                                      "e1.5.1.2",
                                      "e1.5.1.2.",
                                      "e1.5.1.2.@@",
                                      "e1.5.-1.2.YQ",
                                      "e1.5.1.-2.YQ",
                                      "e1.5.1.2.YR",
                                      "e1.5.1.2.AA",
                                      "e2.5.1.2.YQ",
                                      "i1.0.5.YQ",
                                      "e1.5.1.2.YQ.",
                                      "e1.5.1.YQ"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        q.cursor = bad[i];
        expect_events_refused(p, &q, DURO_INVALID, "cursor");
    }
}

typedef struct sweep_query_arg {
    int order;
} sweep_query_arg;

static int sweep_query(duro_provider *p, void *arg, duro_error *e)
{
    sweep_query_arg *a = arg;
    duro_instance_query q;
    memset(&q, 0, sizeof(q));
    q.version = 1;
    q.order = a->order;
    q.status_mask = 1u << DURO_STATUS_PENDING;
    q.count_total = 1;
    q.limit = 1;
    duro_instance_page *page = (duro_instance_page *)e; /* must be reset */
    int rc = p->query_instances(p, &q, &page, e);
    if (rc != DURO_OK) {
        CHECK(page == NULL);
        return rc;
    }
    CHECK_EQ(page->count, 1);
    CHECK_EQ(page->total, 2);
    CHECK(page->next_cursor != NULL);
    duro_instance_page_free(page);
    return rc;
}

PV_TEST(fault_sweep_query_instances)
{
    duro_provider *p = pv_open();
    require_v10(p);
    start(p, "a");
    start(p, "b");
    begin(p, "c", 0);
    sweep_query_arg arg = {DURO_ORDER_CREATED_DESC};
    fault_sweep(p, "query_instances (with count_total)", sweep_query, &arg);
}

static int sweep_events(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_control_event_query q;
    memset(&q, 0, sizeof(q));
    q.version = 1;
    duro_control_event_list *l = (duro_control_event_list *)e;
    int rc = p->list_control_events(p, &q, &l, e);
    if (rc != DURO_OK) {
        CHECK(l == NULL);
        return rc;
    }
    CHECK_EQ(l->count, 1);
    duro_control_event_list_free(l);
    return rc;
}

PV_TEST(fault_sweep_list_control_events)
{
    duro_provider *p = pv_open();
    require_v10(p);
    start(p, "a");
    const char *id = "a";
    duro_cancel_result cr;
    duro_error e;
    CHECK_PRC(p->cancel_instances(p, &id, 1, "r", "me", &cr, &e), DURO_OK, &e);
    fault_sweep(p, "list_control_events", sweep_events, NULL);
}

/* ========================================================================
 * Version 12: next_due, the earliest time a fetch could find an item. */

static void require_v12(duro_provider *p)
{
    require_v10(p);
    CHECK_MSG(p->version >= 12 && p->next_due != NULL,
              "provider '%s' (version %d) lacks the version-12 method", p->name,
              p->version);
}

/* next_due's answer, checked to lie within [lo, hi] (any 1), or none. */
static void expect_due(duro_provider *p, int any, int64_t lo, int64_t hi)
{
    duro_error e;
    int64_t due = -1;
    int got = -1;
    CHECK_PRC(p->next_due(p, &due, &got, &e), DURO_OK, &e);
    CHECK_EQ(got, any);
    if (!any) {
        CHECK_EQ(due, 0);
        return;
    }
    CHECK_MSG(due >= lo && due <= hi,
              "next_due %lld outside [%lld, %lld] (%lld ms from its bounds)",
              (long long)due, (long long)lo, (long long)hi,
              (long long)(due < lo ? lo - due : due - hi));
}

#define HOUR_MS (3600LL * 1000)

/* A start of `id` visible `delay` ms from now. */
static void start_later(duro_provider *p, const char *id, int64_t delay)
{
    duro_work_item w = work(DURO_WORK_START, id);
    w.name = "orch";
    w.version = "1.0";
    enqueue(p, &w, delay);
}

PV_TEST(next_due_is_the_earliest_visibility_or_lock_expiry_of_both_queues)
{
    duro_provider *p = pv_open();
    require_v12(p);
    duro_error e;
    int64_t due = 0;
    int any = 0;
    CHECK_PRC(p->next_due(p, NULL, &any, &e), DURO_INVALID, &e);
    CHECK_EQ(e.retryable, 0);
    CHECK_PRC(p->next_due(p, &due, NULL, &e), DURO_INVALID, &e);
    CHECK_EQ(e.retryable, 0);
    expect_due(p, 0, 0, 0); /* an empty store */

    /* A start delayed by an hour, then an event for another instance
     * delayed by ten minutes: the earlier wins, whatever the order. */
    int64_t before = duro_now_ms();
    start_later(p, "late", HOUR_MS);
    expect_due(p, 1, before + HOUR_MS, duro_now_ms() + HOUR_MS);
    before = duro_now_ms();
    start_later(p, "soon", HOUR_MS / 6);
    int64_t soon_lo = before + HOUR_MS / 6,
            soon_hi = duro_now_ms() + HOUR_MS / 6;
    expect_due(p, 1, soon_lo, soon_hi);

    /* An activity visible now on the worker queue: due now. */
    begin(p, "x", 1);
    expect_due(p, 1, 0, duro_now_ms());
    /* Locked for two hours, the row is due when its lock expires: the
     * event's ten minutes come first again. */
    duro_worker_item *wi = fetch_work(p, 2 * HOUR_MS);
    CHECK(wi != NULL);
    expect_due(p, 1, soon_lo, soon_hi);
    /* A locked instance is due at its lock's expiry too: lock "x" (its
     * event, visible now) for five minutes. */
    raise_event(p, "x", "2", 0);
    before = duro_now_ms();
    duro_orch_item *item = fetch_orch_expect(p, "x", HOUR_MS / 12);
    expect_due(p, 1, before + HOUR_MS / 12, duro_now_ms() + HOUR_MS / 12);
    duro_orch_item_free(item);
    duro_worker_item_free(wi);
}

static int sweep_next_due(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    int64_t due = -1;
    int any = -1;
    int rc = p->next_due(p, &due, &any, e);
    if (rc != DURO_OK) {
        CHECK_EQ(any, 0);
        return rc;
    }
    CHECK_EQ(any, 1);
    CHECK_INT(due, >, duro_now_ms());
    return rc;
}

PV_TEST(fault_sweep_next_due)
{
    duro_provider *p = pv_open();
    require_v12(p);
    start_later(p, "a", HOUR_MS);
    fault_sweep(p, "next_due", sweep_next_due, NULL);
}

/* ========================================================================
 * Version 12: the live runtimes, and a pass that does not count. */

static void require_v12_runtimes(duro_provider *p)
{
    require_v10(p);
    CHECK_MSG(p->version >= 12 && p->register_runtime != NULL &&
                  p->list_runtimes != NULL && p->remove_runtime != NULL &&
                  p->pass_orchestration_item != NULL,
              "provider '%s' (version %d) lacks the version-12 methods",
              p->name, p->version);
}

static const duro_runtime_orchestration rt_orchs[] = {
    {"order", "1"}, {"order", "2"}, {"ship \"fast\"\\", ""}};
static const char *const rt_acts[] = {"charge", "pack"};

static duro_runtime_info runtime_info(const char *id, const char *host,
                                      int64_t pid, int64_t started_ms)
{
    duro_runtime_info r;
    memset(&r, 0, sizeof(r));
    r.runtime_id = id;
    r.host = host;
    r.pid = pid;
    r.started_ms = started_ms;
    r.heartbeat_every_ms = 10000;
    r.orchestrations = rt_orchs;
    r.orchestration_count = 3;
    r.activities = rt_acts;
    r.activity_count = 2;
    return r;
}

static void register_rt(duro_provider *p, const duro_runtime_info *r)
{
    duro_error e;
    CHECK_PRC(p->register_runtime(p, r, &e), DURO_OK, &e);
}

static duro_runtime_list *runtimes(duro_provider *p)
{
    duro_error e;
    duro_runtime_list *l = NULL;
    CHECK_PRC(p->list_runtimes(p, &l, &e), DURO_OK, &e);
    CHECK(l != NULL);
    return l;
}

/* The runtime_id of each listed runtime, joined with ','. */
static char *runtime_ids(duro_provider *p)
{
    duro_runtime_list *l = runtimes(p);
    strbuf b = {0};
    for (size_t i = 0; l != NULL && i < l->count; i++)
        sb_printf(&b, "%s%s", i > 0 ? "," : "", l->items[i].runtime_id);
    duro_runtime_list_free(l);
    return b.s != NULL ? b.s : xstrdup("");
}

#define CHECK_RUNTIMES(p, expected)                                            \
    do {                                                                       \
        char *ids_ = runtime_ids(p);                                           \
        CHECK_STR(ids_, expected);                                             \
        free(ids_);                                                            \
    } while (0)

static int runtime_listed(duro_provider *p, const char *id)
{
    char *ids = runtime_ids(p);
    int found = strstr(ids, id) != NULL;
    free(ids);
    return found;
}

PV_TEST(runtimes_are_registered_listed_replaced_and_removed)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    CHECK_RUNTIMES(p, "");
    int64_t before = duro_now_ms();
    duro_runtime_info a = runtime_info("rt-a", "host-a", 1234, before - 50);
    duro_runtime_info b = runtime_info("rt-b", NULL, 0, before - 100);
    b.orchestration_count = 1;
    b.activities = NULL;
    b.activity_count = 0;
    register_rt(p, &a);
    register_rt(p, &b);
    /* oldest start first */
    CHECK_RUNTIMES(p, "rt-b,rt-a");
    duro_runtime_list *l = runtimes(p);
    CHECK_EQ(l->count, 2);
    CHECK(l->read_ms >= before);
    const duro_runtime_info *ra = &l->items[1], *rb = &l->items[0];
    CHECK_STR(ra->host, "host-a");
    CHECK_EQ(ra->pid, 1234);
    CHECK_EQ(ra->started_ms, before - 50);
    CHECK(ra->heartbeat_ms >= before && ra->heartbeat_ms <= l->read_ms);
    CHECK_EQ(ra->heartbeat_every_ms, 10000);
    CHECK_EQ(ra->orchestration_count, 3);
    for (size_t i = 0; i < 3 && i < ra->orchestration_count; i++) {
        CHECK_STR(ra->orchestrations[i].name, rt_orchs[i].name);
        CHECK_STR(ra->orchestrations[i].version, rt_orchs[i].version);
    }
    CHECK_EQ(ra->activity_count, 2);
    if (ra->activity_count == 2) {
        CHECK_STR(ra->activities[0], "charge");
        CHECK_STR(ra->activities[1], "pack");
    }
    CHECK_STR(rb->host, ""); /* NULL: unknown */
    CHECK_EQ(rb->orchestration_count, 1);
    CHECK_EQ(rb->activity_count, 0);
    duro_runtime_list_free(l);

    /* a heartbeat replaces the row whole: what it registers now */
    a.orchestration_count = 0;
    a.host = "host-a2";
    register_rt(p, &a);
    l = runtimes(p);
    CHECK_EQ(l->count, 2);
    if (l->count == 2) {
        CHECK_STR(l->items[1].host, "host-a2");
        CHECK_EQ(l->items[1].orchestration_count, 0);
        CHECK_EQ(l->items[1].activity_count, 2);
    }
    duro_runtime_list_free(l);

    duro_error e;
    CHECK_PRC(p->remove_runtime(p, "rt-a", &e), DURO_OK, &e);
    CHECK_RUNTIMES(p, "rt-b");
    CHECK_PFAIL(p->remove_runtime(p, "rt-a", &e), DURO_NOT_FOUND, 0, &e);
    CHECK(strstr(e.message, "rt-a") != NULL);
    /* a runtime whose row was removed writes it again at its heartbeat */
    register_rt(p, &a);
    CHECK_RUNTIMES(p, "rt-b,rt-a");
}

PV_TEST(a_runtime_that_missed_its_heartbeats_is_gone)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    enum { EVERY = 100, GONE = 3 * EVERY };
    duro_runtime_info live = runtime_info("live", "h", 1, 1);
    duro_runtime_info brief = runtime_info("brief", "h", 2, 2);
    brief.heartbeat_every_ms = EVERY; /* gone once GONE ms pass without one */
    register_rt(p, &live);
    int64_t beat = duro_now_ms(); /* at most its heartbeat_ms */
    register_rt(p, &brief);
    char *ids = runtime_ids(p);
    /* (a machine too busy to read within GONE ms checks only the rest) */
    if (duro_now_ms() - beat < GONE)
        CHECK_STR(ids, "live,brief");
    free(ids);
    WAIT_UNTIL(!runtime_listed(p, "brief"), 10000);
    CHECK(duro_now_ms() - beat >= GONE);
    CHECK_RUNTIMES(p, "live");
    /* skipped by the read, removed by the next write of any runtime */
    register_rt(p, &live);
    duro_error e;
    CHECK_PFAIL(p->remove_runtime(p, "brief", &e), DURO_NOT_FOUND, 0, &e);
    /* a heartbeat writes the row again */
    register_rt(p, &brief);
    CHECK_PRC(p->remove_runtime(p, "brief", &e), DURO_OK, &e);
    CHECK_RUNTIMES(p, "live");
}

static void expect_register_refused(duro_provider *p,
                                    const duro_runtime_info *r, int code,
                                    const char *needle)
{
    duro_error e;
    CHECK_PFAIL(p->register_runtime(p, r, &e), code, 0, &e);
    CHECK_MSG(strstr(e.message, needle) != NULL,
              "message '%s' does not name '%s'", e.message, needle);
}

PV_TEST(register_list_and_remove_runtime_refuse_bad_input)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    duro_error e;
    CHECK_PFAIL(p->register_runtime(p, NULL, &e), DURO_INVALID, 0, &e);
    duro_runtime_info r = runtime_info("", "h", 1, 1);
    expect_register_refused(p, &r, DURO_INVALID, "runtime_id");
    r.runtime_id = NULL;
    expect_register_refused(p, &r, DURO_INVALID, "runtime_id");
    char *big = repeat('x', 1025);
    CHECK(big != NULL);
    r.runtime_id = big;
    expect_register_refused(p, &r, DURO_TOO_LARGE, "runtime_id");
    r.runtime_id = "rt";
    r.host = big;
    expect_register_refused(p, &r, DURO_TOO_LARGE, "host");
    r.host = "h";
    r.pid = -1;
    expect_register_refused(p, &r, DURO_INVALID, "pid");
    r.pid = 1;
    r.started_ms = -1;
    expect_register_refused(p, &r, DURO_INVALID, "started_ms");
    r.started_ms = 1;
    r.heartbeat_every_ms = 0;
    expect_register_refused(p, &r, DURO_INVALID, "heartbeat_every_ms");
    r.heartbeat_every_ms = DURO_RUNTIME_HEARTBEAT_MAX_MS + 1;
    expect_register_refused(p, &r, DURO_INVALID, "heartbeat_every_ms");
    r.heartbeat_every_ms = 1000;
    r.orchestrations = NULL;
    expect_register_refused(p, &r, DURO_INVALID, "orchestrations");
    duro_runtime_orchestration bad[2] = {{"ok", "1"}, {NULL, "1"}};
    r.orchestrations = bad;
    r.orchestration_count = 2;
    expect_register_refused(p, &r, DURO_INVALID, "orchestration name 1");
    bad[1].name = "";
    expect_register_refused(p, &r, DURO_INVALID, "orchestration name 1");
    bad[1].name = "n";
    bad[1].version = big;
    expect_register_refused(p, &r, DURO_TOO_LARGE, "orchestration version 1");
    bad[1].version = "\xC3\x28"; /* not UTF-8, in every store */
    expect_register_refused(p, &r, DURO_INVALID, "UTF-8");
    bad[1].version = "1";
    const char *acts[] = {"a", ""};
    r.activities = acts;
    r.activity_count = 2;
    expect_register_refused(p, &r, DURO_INVALID, "activity name 1");
    r.activities = NULL;
    expect_register_refused(p, &r, DURO_INVALID, "activities");
    free(big);
    CHECK_RUNTIMES(p, ""); /* nothing written */
    r.activity_count = 0;
    register_rt(p, &r);
    CHECK_RUNTIMES(p, "rt");

    CHECK_PFAIL(p->list_runtimes(p, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->remove_runtime(p, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->remove_runtime(p, "", &e), DURO_INVALID, 0, &e);
    big = repeat('y', 1025);
    CHECK(big != NULL);
    CHECK_PFAIL(p->remove_runtime(p, big, &e), DURO_TOO_LARGE, 0, &e);
    free(big);
    CHECK_RUNTIMES(p, "rt");
}

PV_TEST(pass_orchestration_item_does_not_count_the_fetch)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    start(p, "a");
    duro_error e;
    for (int i = 0; i < 3; i++) {
        duro_orch_item *it = fetch_orch_expect(p, "a", 30000);
        CHECK_EQ(it->attempt, 1);
        CHECK_PRC(p->pass_orchestration_item(p, it->lock_token, 0, &e), DURO_OK,
                  &e);
        /* the token no longer holds */
        CHECK_PFAIL(p->pass_orchestration_item(p, it->lock_token, 0, &e),
                    DURO_LOCK_LOST, 0, &e);
        duro_orch_item_free(it);
    }
    duro_orch_item *it = fetch_orch_expect(p, "a", 30000);
    CHECK_EQ(it->attempt, 1);
    abandon_orch(p, it, 0); /* an abandon counts */
    duro_orch_item_free(it);
    it = fetch_orch_expect(p, "a", 30000);
    CHECK_EQ(it->attempt, 2);
    /* a pass with a delay hides the instance as an abandon does */
    CHECK_PRC(p->pass_orchestration_item(p, it->lock_token, 60000, &e), DURO_OK,
              &e);
    duro_orch_item_free(it);
    expect_no_orch(p);
    CHECK_EQ(count(p, ORCH, "a"), 1);
    CHECK_PFAIL(p->pass_orchestration_item(p, NULL, 0, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->pass_orchestration_item(p, "o1.nope", 0, &e), DURO_LOCK_LOST,
                0, &e);
}

/* Query version 3 (provider version 12): the orchestration version, as
 * stored - "" is the default version, an instance started without one has
 * none - alone and with every other filter, in each order, against the
 * model. */
PV_TEST(query_instances_filters_by_orchestration_version)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    duro_error e;
    run_to(p, "v-1a", "order", "1", DURO_STATUS_RUNNING);
    run_to(p, "v-1b", "order", "1", DURO_STATUS_COMPLETED);
    run_to(p, "v-def", "order", "", DURO_STATUS_FAILED);
    duro_work_item w = work(DURO_WORK_START, "v-2p"); /* waits: Pending */
    w.name = "order";
    w.version = "2";
    enqueue(p, &w, 0);
    w = work(DURO_WORK_START, "v-none"); /* no version asked */
    w.name = "order";
    enqueue(p, &w, 0);
    w = work(DURO_WORK_START, "v-ship2");
    w.name = "ship";
    w.version = "2";
    enqueue(p, &w, 0);
    duro_instance_list *l = get(p, "v-ship2");
    int64_t mid = l->items[0].created_ms;
    clock_past(mid);
    duro_instance_list_free(l);
    run_to(p, "v-2r", "order", "2", DURO_STATUS_RUNNING);
    CHECK_PRC(
        p->set_instance_problem(p, "v-2p", "waits for version '2'", 0, &e),
        DURO_OK, &e);
    duro_instance_list *all = list_all(p);
    CHECK_EQ(all->count, 7);
    const uint32_t pending = 1u << DURO_STATUS_PENDING;
    const qspec specs[] = {
        {.what = "version 1", .orch_version = "1"},
        {.what = "version 2", .orch_version = "2"},
        {.what = "the default version", .orch_version = ""},
        {.what = "version 9 (none)", .orch_version = "9"},
        {.what = "version 2, Pending", .orch_version = "2", .mask = pending},
        {.what = "version 2, name order", .orch_version = "2", .name = "order"},
        {.what = "version 2, name order, Pending",
         .orch_version = "2",
         .name = "order",
         .mask = pending},
        {.what = "version 2, prefix s", .orch_version = "2", .prefix = "s"},
        {.what = "version 2, contains r", .orch_version = "2", .contains = "r"},
        {.what = "version 2, with a problem",
         .orch_version = "2",
         .with_problem = 1},
        {.what = "version 2, created from mid",
         .orch_version = "2",
         .after = mid},
        {.what = "version 1, ended",
         .orch_version = "1",
         .mask = (1u << DURO_STATUS_COMPLETED) | (1u << DURO_STATUS_FAILED)},
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
        check_query(p, all, &specs[i]);
    duro_instance_list_free(all);

    /* a caller of query version 2 has no such field: it is not read */
    duro_instance_query q;
    memset(&q, 0, sizeof(q));
    q.version = 2;
    q.orchestration_version = "nothing has it";
    duro_instance_page *page = query_page(p, &q);
    CHECK_EQ(page->count, 7);
    duro_instance_page_free(page);
    /* bad input */
    q.version = 3;
    char *big = repeat('v', 1025);
    CHECK(big != NULL);
    q.orchestration_version = big;
    expect_query_refused(p, &q, DURO_TOO_LARGE, "orchestration_version");
    free(big);
}

static int sweep_register(duro_provider *p, void *arg, duro_error *e)
{
    const duro_runtime_info *r = arg;
    int rc = p->register_runtime(p, r, e);
    if (rc != DURO_OK)
        CHECK_RUNTIMES(p, "old"); /* nothing written, nothing expired */
    return rc;
}

static int sweep_list_runtimes(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_runtime_list *l = (duro_runtime_list *)e;
    int rc = p->list_runtimes(p, &l, e);
    if (rc != DURO_OK) {
        CHECK(l == NULL);
        return rc;
    }
    CHECK_EQ(l->count, 1);
    duro_runtime_list_free(l);
    return rc;
}

PV_TEST(fault_sweep_runtimes)
{
    duro_provider *p = pv_open();
    require_v12_runtimes(p);
    duro_runtime_info old = runtime_info("old", "h", 1, 1);
    register_rt(p, &old);
    fault_sweep(p, "list_runtimes", sweep_list_runtimes, NULL);
    duro_runtime_info r = runtime_info("new", "h", 2, 2);
    fault_sweep(p, "register_runtime", sweep_register, &r);
    CHECK_RUNTIMES(p, "old,new");
}

/* ========================================================================
 * Version 12: instance deadlines. A START may carry the instance's
 * deadline (fire_at_ms): the store writes it on the instance row and
 * enqueues a DEADLINE message due then, in the start's transaction; a
 * DEADLINE an ack sends sets the row's deadline; the message spans
 * continue-as-new and goes with the queue when the instance ends. */

static void require_v12_deadline(duro_provider *p)
{
    CHECK_MSG(p->version >= 12, "provider '%s' is version %d: no deadlines",
              p->name, p->version);
}

static void start_with_deadline(duro_provider *p, const char *id,
                                int64_t deadline, uint32_t flags)
{
    duro_work_item w = work(DURO_WORK_START, id);
    w.name = "orch";
    w.fire_at_ms = deadline;
    w.flags = flags;
    enqueue(p, &w, 0);
}

static int64_t deadline_of(duro_provider *p, const char *id)
{
    const duro_instance_info *in;
    duro_instance_list *l = status_of(p, id, &in);
    int64_t d = in->deadline_ms;
    duro_instance_list_free(l);
    return d;
}

PV_TEST(a_start_with_a_deadline_keeps_it_and_queues_its_message)
{
    duro_provider *p = pv_open();
    require_v12_deadline(p);
    int64_t now = duro_now_ms();
    int64_t later = now + 3600000, past = now - 1000;
    start_with_deadline(p, "f", later, 0);
    start_with_deadline(p, "past", past, 0);
    start(p, "none");
    CHECK_EQ(deadline_of(p, "f"), later);
    CHECK_EQ(deadline_of(p, "past"), past);
    CHECK_EQ(deadline_of(p, "none"), 0);
    CHECK_EQ(count(p, ORCH, "f"), 2); /* START, DEADLINE due in an hour */
    CHECK_EQ(count(p, ORCH, "none"), 1);
    /* an idempotent start of an existing instance changes nothing */
    start_with_deadline(p, "f", now + 60000, DURO_START_IDEMPOTENT);
    CHECK_EQ(count(p, ORCH, "f"), 2);
    CHECK_EQ(deadline_of(p, "f"), later);

    /* a deadline already passed: its message comes with the START */
    duro_orch_item *item = fetch_orch_for(p, "past", LOCK_LONG);
    CHECK_EQ(item->message_count, 2);
    int starts = 0, deadlines = 0;
    for (size_t i = 0; i < item->message_count; i++) {
        const duro_work_item *m = &item->messages[i];
        starts += m->kind == DURO_WORK_START && m->fire_at_ms == past;
        deadlines += m->kind == DURO_WORK_DEADLINE && m->fire_at_ms == past &&
                     m->execution_id == 0;
    }
    CHECK_EQ(starts, 1);
    CHECK_EQ(deadlines, 1);
    abandon_orch(p, item, 0);
    duro_orch_item_free(item);
    /* f's DEADLINE is not due: only its START is fetched */
    item = fetch_orch_for(p, "f", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_START);
    CHECK_EQ(item->messages[0].fire_at_ms, later);
    abandon_orch(p, item, 0);
    duro_orch_item_free(item);
    pv_close(p);
}

PV_TEST(a_deadline_message_spans_continue_as_new_and_ends_with_the_instance)
{
    duro_provider *p = pv_open();
    require_v12_deadline(p);
    begin(p, "r", 0);
    CHECK_EQ(deadline_of(p, "r"), 0);
    /* a turn sends the instance's deadline (a registration's default) */
    int64_t at = duro_now_ms() + 3600000;
    duro_orch_item *a = poke(p, "r");
    duro_event d = event(a->history_total + 1, DURO_EVENT_EVENT_RAISED);
    d.name = "poke";
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_DEADLINE, "r");
    out.item.fire_at_ms = at;
    out.delay_ms = 3600000;
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    CHECK_EQ(deadline_of(p, "r"), at);
    CHECK_EQ(count(p, ORCH, "r"), 1);
    /* set once: a second DEADLINE is dropped, as is one for no instance */
    duro_work_item again = work(DURO_WORK_DEADLINE, "r");
    again.fire_at_ms = at - 60000;
    enqueue(p, &again, 0);
    CHECK_EQ(deadline_of(p, "r"), at);
    CHECK_EQ(count(p, ORCH, "r"), 1);
    again.instance_id = "nobody";
    enqueue(p, &again, 0);
    CHECK_EQ(count(p, ORCH, "nobody"), 0);
    expect_no_instance(p, "nobody");

    /* continue-as-new keeps it (execution 0) */
    a = poke(p, "r");
    uint64_t h = a->history_total;
    duro_event dc[2] = {event(h + 1, DURO_EVENT_EVENT_RAISED),
                        event(h + 2, DURO_EVENT_CONTINUED_AS_NEW)};
    dc[0].name = "poke";
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_CONTINUE_AS_NEW, "r");
    out.item.execution_id = 2;
    out.item.name = "orch";
    duro_instance_meta m = meta(DURO_STATUS_CONTINUED_AS_NEW);
    ak = ack_of(1, dc, 2, &m);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    CHECK_EQ(count(p, ORCH, "r"), 2); /* CONTINUE_AS_NEW, DEADLINE */
    CHECK_EQ(deadline_of(p, "r"), at);

    /* execution 2 ends: nothing of the instance stays queued */
    a = fetch_orch_expect(p, "r", LOCK_LONG);
    CHECK_EQ(a->message_count, 1);
    duro_event de[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                        event(2, DURO_EVENT_ORCHESTRATION_COMPLETED)};
    de[0].name = "orch";
    m = meta(DURO_STATUS_COMPLETED);
    m.name = "orch";
    ak = ack_of(2, de, 2, &m);
    ack(p, a->lock_token, &ak);
    duro_orch_item_free(a);
    CHECK_EQ(count(p, ORCH, "r"), 0);
    CHECK_EQ(deadline_of(p, "r"), at);
    expect_no_orch(p);
    pv_close(p);
}

PV_TEST(a_queued_deadline_does_not_keep_a_request_from_deciding_at_once)
{
    duro_provider *p = pv_open();
    require_v12_deadline(p);
    require_v9(p);
    int64_t at = duro_now_ms() + 3600000;
    start_with_deadline(p, "u", at, 0);
    const char *ids[] = {"u"};
    duro_cancel_result cr;
    duro_error e;
    CHECK_PRC(p->cancel_instances(p, ids, 1, "no", "ops", &cr, &e), DURO_OK,
              &e);
    CHECK_EQ(cr.outcome, DURO_CANCEL_CANCELLED);
    CHECK_EQ(count(p, ORCH, "u"), 0);
    CHECK_EQ(deadline_of(p, "u"), at);
    pv_close(p);
}

PV_TEST(deadlines_refuse_bad_input_and_change_nothing)
{
    duro_provider *p = pv_open();
    require_v12_deadline(p);
    duro_error e;
    duro_work_item w = work(DURO_WORK_DEADLINE, "x");
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0, &e);
    w.fire_at_ms = -5;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0, &e);
    w = work(DURO_WORK_START, "x");
    w.name = "orch";
    w.fire_at_ms = -1;
    CHECK_PFAIL(p->enqueue_for_orchestrator(p, &w, 0, &e), DURO_INVALID, 0, &e);
    expect_no_instance(p, "x");
    CHECK_EQ(count(p, ORCH, "x"), 0);
    /* in an ack: the turn is refused whole */
    begin(p, "y", 0);
    duro_orch_item *a = poke(p, "y");
    duro_event d = event(a->history_total + 1, DURO_EVENT_EVENT_RAISED);
    d.name = "poke";
    duro_outbound out;
    memset(&out, 0, sizeof(out));
    out.item = work(DURO_WORK_DEADLINE, "y");
    duro_orch_ack ak = ack_of(1, &d, 1, NULL);
    ak.orchestrator_items = &out;
    ak.orchestrator_item_count = 1;
    CHECK_PFAIL(p->ack_orchestration_item(p, a->lock_token, &ak, &e),
                DURO_INVALID, 0, &e);
    CHECK_EQ(history_len(p, "y", 1), 1);
    CHECK_EQ(deadline_of(p, "y"), 0);
    abandon_orch(p, a, 0);
    duro_orch_item_free(a);
    pv_close(p);
}

/* ========================================================================
 * Version 13: reset_instance, an ended instance continued in a new
 * execution from a turn boundary of its current one. */

static void require_v13(duro_provider *p)
{
    require_v12(p);
    CHECK_MSG(p->version >= 13 && p->reset_instance != NULL,
              "provider '%s' (version %d) lacks the version-13 method", p->name,
              p->version);
}

/* `id` Failed at execution 1 with, after begin's Started (1) and two
 * ActivityScheduled (2, 3): EventRaised (4), ActivityCompleted of 2 (5),
 * TimerCreated firing in an hour (6), ActivityFailed of 3 (7),
 * OrchestrationFailed (8). Turn boundaries: 3, 4 and 6; the last good
 * point (before the first failure, 7) is 6. Its worker rows are gone. */
static void failed_instance(duro_provider *p, const char *id)
{
    begin(p, id, 2);
    duro_orch_item *item = poke(p, id);
    duro_event d[5];
    d[0] = event(4, DURO_EVENT_EVENT_RAISED);
    d[0].name = "poke";
    d[0].payload = "\"poke\"";
    d[1] = event(5, DURO_EVENT_ACTIVITY_COMPLETED);
    d[1].source_event_id = 2;
    d[1].payload = "\"two\"";
    d[2] = event(6, DURO_EVENT_TIMER_CREATED);
    d[2].fire_at_ms = duro_now_ms() + HOUR_MS;
    d[3] = event(7, DURO_EVENT_ACTIVITY_FAILED);
    d[3].source_event_id = 3;
    d[3].error = "broken";
    d[3].category = DURO_CATEGORY_APPLICATION;
    d[4] = event(8, DURO_EVENT_ORCHESTRATION_FAILED);
    d[4].error = "broken";
    d[4].category = DURO_CATEGORY_APPLICATION;
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    m.error = "broken";
    m.category = DURO_CATEGORY_APPLICATION;
    duro_orch_ack a = ack_of(1, d, 5, &m);
    duro_activity_ref refs[2] = {ref(id, 1, 2), ref(id, 1, 3)};
    a.cancelled_activities = refs;
    a.cancelled_activity_count = 2;
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
}

static duro_reset_request reset_req(const char *id, uint64_t to)
{
    duro_reset_request r;
    memset(&r, 0, sizeof(r));
    r.version = 1;
    r.instance_id = id;
    r.to_event_id = to;
    return r;
}

/* reset_instance fails with `code` (not retryable) and a message holding
 * `text`. */
static void expect_reset_refused(duro_provider *p, const duro_reset_request *r,
                                 int code, const char *text)
{
    duro_error e;
    duro_reset_result out;
    memset(&out, 0xff, sizeof(out));
    CHECK_PFAIL(p->reset_instance(p, r, &out, &e), code, 0, &e);
    CHECK_MSG(strstr(e.message, text) != NULL, "'%s' does not say '%s'",
              e.message, text);
    CHECK_EQ(out.execution_id, 0);
    CHECK_EQ(out.to_event_id, 0);
}

PV_TEST(reset_instance_keeps_a_prefix_and_makes_its_pending_work_live)
{
    duro_provider *p = pv_open();
    require_v13(p);
    failed_instance(p, "x");
    duro_history *old = history(p, "x", 1);
    CHECK_EQ(old->count, 8);
    CHECK_EQ(count(p, WORKER, "x"), 0);

    /* A dry run decides and changes nothing. */
    duro_reset_request r = reset_req("x", 4);
    r.dry_run = 1;
    duro_error e;
    duro_reset_result out;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.status, DURO_STATUS_FAILED);
    CHECK_EQ(out.from_execution, 1);
    CHECK_EQ(out.execution_id, 2);
    CHECK_EQ(out.to_event_id, 4);
    CHECK_EQ(out.activities, 2);
    CHECK_EQ(out.timers, 0);
    CHECK_EQ(latest(p, "x"), 1);
    CHECK_EQ(count(p, WORKER, "x"), 0);

    /* The reset: events 1 .. 4 copied as stored, then ExecutionReset. */
    r.dry_run = 0;
    r.execution_id = 1;
    r.reason = "fixed the activity";
    r.requested_by = "ops";
    int64_t before = duro_now_ms();
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.execution_id, 2);
    CHECK_EQ(out.activities, 2);
    CHECK_EQ(latest(p, "x"), 2);
    duro_history *h = history(p, "x", 2);
    CHECK_EQ(h->count, 5);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(h->events[i].event_id, i + 1);
        CHECK_EQ(h->events[i].kind, old->events[i].kind);
        CHECK_EQ(h->events[i].timestamp_ms, old->events[i].timestamp_ms);
        CHECK_STR(h->events[i].payload ? h->events[i].payload : "",
                  old->events[i].payload ? old->events[i].payload : "");
    }
    const duro_event *re = &h->events[4];
    CHECK_EQ(re->kind, DURO_EVENT_EXECUTION_RESET);
    CHECK_EQ(re->event_id, 5);
    CHECK_STR(re->reason, "fixed the activity");
    CHECK_STR(re->requested_by, "ops");
    CHECK_EQ(re->ref_execution, 1);
    CHECK_EQ(re->ref_event_id, 4);
    CHECK_EQ(re->flags, 0);
    CHECK_INT(re->timestamp_ms, >=, before);
    duro_history_free(h);
    /* Execution 1 stays readable, whole. */
    CHECK_EQ(history_len(p, "x", 1), 8);
    duro_history_free(old);

    duro_instance_list *l = get(p, "x");
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    CHECK_EQ(l->items[0].execution_id, 2);
    CHECK(l->items[0].error == NULL);
    CHECK_EQ(l->items[0].finished_ms, 0);
    CHECK_STR(l->items[0].name, "orch");
    duro_instance_list_free(l);

    /* Both activities are live again, for execution 2, as scheduled. */
    CHECK_EQ(count(p, WORKER, "x"), 2);
    uint64_t seen = 0;
    for (int i = 0; i < 2; i++) {
        duro_worker_item *w = fetch_work(p, LOCK_LONG);
        CHECK(w != NULL);
        CHECK_STR(w->item.instance_id, "x");
        CHECK_EQ(w->item.execution_id, 2);
        CHECK_STR(w->item.name, "act");
        CHECK_STR(w->item.payload, "act-input");
        CHECK_EQ(w->attempt, 1);
        seen |= 1u << w->item.source_id;
        duro_worker_item_free(w);
    }
    CHECK_EQ(seen, (1u << 2) | (1u << 3));

    /* Now Running: a second reset is refused. */
    r.execution_id = 0;
    expect_reset_refused(p, &r, DURO_INVALID_STATE, "is Running");
}

/* Acks the locked `item` (execution `execution`) with a raised event and
 * OrchestrationFailed, cancelling the activities `refs` (count n) it left
 * outstanding. */
static void fail_turn(duro_provider *p, duro_orch_item *item,
                      uint64_t execution, duro_activity_ref *refs, size_t n)
{
    uint64_t h = item->history_total;
    duro_event d[2] = {event(h + 1, DURO_EVENT_EVENT_RAISED),
                       event(h + 2, DURO_EVENT_ORCHESTRATION_FAILED)};
    d[0].name = "poke";
    d[1].error = "broken";
    d[1].category = DURO_CATEGORY_APPLICATION;
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    m.error = "broken";
    m.category = DURO_CATEGORY_APPLICATION;
    duro_orch_ack a = ack_of(execution, d, 2, &m);
    a.cancelled_activities = refs;
    a.cancelled_activity_count = n;
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
}

/* A reset's new execution runs under the instance's deadline (its
 * DEADLINE message, which the ending dropped, queued again), a new one, or
 * none (request version 2). */
PV_TEST(reset_instance_runs_under_the_instance_deadline)
{
    duro_provider *p = pv_open();
    require_v13(p);
    /* a deadline an hour away, set before the instance failed: its
     * ending dropped the DEADLINE message, the row keeps the time */
    int64_t at = duro_now_ms() + 3600000;
    duro_work_item dl = work(DURO_WORK_DEADLINE, "k");
    begin(p, "k", 2);
    dl.fire_at_ms = at;
    enqueue(p, &dl, 3600000);
    CHECK_EQ(deadline_of(p, "k"), at);
    CHECK_EQ(count(p, ORCH, "k"), 1);
    duro_activity_ref refs[2] = {ref("k", 1, 2), ref("k", 1, 3)};
    fail_turn(p, poke(p, "k"), 1, refs, 2);
    CHECK_EQ(count(p, ORCH, "k"), 0);
    CHECK_EQ(deadline_of(p, "k"), at);

    /* request version 1, and 2 with 0: the instance's own, queued again
     * (a dry run queues nothing) */
    duro_reset_request r = reset_req("k", 3);
    r.dry_run = 1;
    duro_error e;
    duro_reset_result out;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(count(p, ORCH, "k"), 0);
    r.dry_run = 0;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.execution_id, 2);
    CHECK_EQ(deadline_of(p, "k"), at);
    /* the wake-up (RESUME, now) and the DEADLINE (in an hour, execution
     * 0: it spans the executions) */
    CHECK_EQ(count(p, ORCH, "k"), 2);
    duro_orch_item *item = fetch_orch_for(p, "k", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_RESUME_INSTANCE);
    /* it fails again */
    fail_turn(p, item, 2, NULL, 0);
    CHECK_EQ(count(p, ORCH, "k"), 0);

    /* a new one (version 2) replaces it */
    r = reset_req("k", 3);
    r.version = 2;
    r.deadline_ms = at + 60000;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.execution_id, 3);
    CHECK_EQ(deadline_of(p, "k"), at + 60000);
    CHECK_EQ(count(p, ORCH, "k"), 2);
    item = fetch_orch_for(p, "k", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    fail_turn(p, item, 3, NULL, 0);

    /* -1: none, nothing queued but the wake-up */
    r.deadline_ms = -1;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.execution_id, 4);
    CHECK_EQ(deadline_of(p, "k"), 0);
    CHECK_EQ(count(p, ORCH, "k"), 1);
    pv_close(p);
}

PV_TEST(reset_instance_refuses_a_deadline_that_has_passed)
{
    duro_provider *p = pv_open();
    require_v13(p);
    /* a deadline already passed at the start: the first turn ends it,
     * as the engine records it (reason "deadline": a reset may keep
     * event 1, before the ending decided without the code) */
    int64_t past = duro_now_ms() - 1000;
    start_with_deadline(p, "q", past, 0);
    duro_orch_item *item = fetch_orch_for(p, "q", LOCK_LONG);
    duro_event d[2] = {event(1, DURO_EVENT_ORCHESTRATION_STARTED),
                       event(2, DURO_EVENT_ORCHESTRATION_FAILED)};
    d[0].name = "orch";
    d[1].error = "deadline passed";
    d[1].category = DURO_CATEGORY_TIMEOUT;
    d[1].reason = DURO_REASON_DEADLINE;
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    m.name = "orch";
    m.error = "deadline passed";
    m.category = DURO_CATEGORY_TIMEOUT;
    duro_orch_ack a = ack_of(1, d, 2, &m);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    CHECK_EQ(deadline_of(p, "q"), past);

    /* kept (version 1, or 2 with 0), dry run or not: refused */
    duro_reset_request r = reset_req("q", 1);
    expect_reset_refused(p, &r, DURO_INVALID_STATE, "has passed");
    r.version = 2;
    r.dry_run = 1;
    expect_reset_refused(p, &r, DURO_INVALID_STATE,
                         "give it a new deadline or none");
    r.dry_run = 0;
    /* not a deadline: refused as bad input */
    r.deadline_ms = -2;
    expect_reset_refused(p, &r, DURO_INVALID, "deadline_ms -2");
    r.deadline_ms = past;
    expect_reset_refused(p, &r, DURO_INVALID, "after now");
    r.deadline_ms = INT64_MAX;
    expect_reset_refused(p, &r, DURO_INVALID, "year 10000");
    CHECK_EQ(latest(p, "q"), 1);
    CHECK_EQ(deadline_of(p, "q"), past);
    CHECK_EQ(count(p, ORCH, "q"), 0);
    /* a new one or none is taken */
    r.deadline_ms = -1;
    duro_error e;
    duro_reset_result out;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.execution_id, 2);
    CHECK_EQ(deadline_of(p, "q"), 0);
    pv_close(p);
}

PV_TEST(reset_instance_rewind_goes_to_the_last_good_point)
{
    duro_provider *p = pv_open();
    require_v13(p);
    failed_instance(p, "y");
    duro_reset_request r = reset_req("y", 0);
    r.rewind = 1;
    r.requested_by = "ops";
    duro_error e;
    duro_reset_result out;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.to_event_id, 6);
    CHECK_EQ(out.activities, 1); /* 3 failed; 2 completed */
    CHECK_EQ(out.timers, 1);
    duro_history *h = history(p, "y", 2);
    CHECK_EQ(h->count, 7);
    CHECK_EQ(h->events[6].kind, DURO_EVENT_EXECUTION_RESET);
    CHECK_EQ(h->events[6].flags, DURO_RESET_REWIND);
    CHECK_EQ(h->events[6].ref_event_id, 6);
    duro_history_free(h);
    duro_worker_item *w = fetch_work(p, LOCK_LONG);
    CHECK(w != NULL);
    CHECK_EQ(w->item.source_id, 3);
    CHECK_EQ(w->item.execution_id, 2);
    duro_worker_item_free(w);
    /* A resume (which records nothing: the execution is not suspended)
     * makes a turn run at once; the timer's message waits for its fire
     * time, an hour away. */
    CHECK_EQ(count(p, ORCH, "y"), 2);
    duro_orch_item *item = fetch_orch_expect(p, "y", LOCK_LONG);
    CHECK_EQ(item->execution_id, 2);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_RESUME_INSTANCE);
    CHECK_STR(item->messages[0].requested_by, "ops");
    duro_orch_ack none = ack_of(2, NULL, 0, NULL);
    ack(p, item->lock_token, &none);
    duro_orch_item_free(item);
    CHECK_EQ(count(p, ORCH, "y"), 1);
    expect_no_orch(p);

    /* Rewind only a Failed instance; a reset of a Completed one works. */
    begin(p, "done", 0);
    finish(p, "done");
    r = reset_req("done", 0);
    r.rewind = 1;
    expect_reset_refused(p, &r, DURO_INVALID_STATE, "only a Failed instance");
    r.rewind = 0;
    r.to_event_id = 1;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.status, DURO_STATUS_COMPLETED);
    CHECK_EQ(history_len(p, "done", 2), 2);

    /* Terminated while its activity ran: the cancel request and
     * OrchestrationTerminated are the terminate's, not the code's answer,
     * so the point before them is a boundary, and the points among them
     * are not. */
    begin(p, "term", 1);
    item = poke(p, "term");
    duro_event d[2];
    d[0] = event(3, DURO_EVENT_ACTIVITY_CANCEL_REQUESTED);
    d[0].source_event_id = 2;
    d[0].reason = DURO_REASON_INSTANCE_TERMINATED;
    d[1] = event(4, DURO_EVENT_ORCHESTRATION_TERMINATED);
    d[1].reason = "stop";
    duro_instance_meta m = meta(DURO_STATUS_TERMINATED);
    duro_orch_ack a = ack_of(1, d, 2, &m);
    duro_activity_ref cancelled = ref("term", 1, 2);
    a.cancelled_activities = &cancelled;
    a.cancelled_activity_count = 1;
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    r = reset_req("term", 3);
    expect_reset_refused(p, &r, DURO_INVALID, "part of the execution's ending");
    expect_reset_refused(p, &r, DURO_INVALID,
                         "nearest point a reset may "
                         "keep up to is event 2");
    r.to_event_id = 0;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.status, DURO_STATUS_TERMINATED);
    CHECK_EQ(out.to_event_id, 2);
    CHECK_EQ(out.activities, 1);
    CHECK_EQ(count(p, WORKER, "term"), 1);
}

PV_TEST(reset_instance_refuses_what_could_not_replay)
{
    duro_provider *p = pv_open();
    require_v13(p);
    duro_error e;
    duro_reset_result out;
    duro_reset_request r = reset_req("x", 4);
    CHECK_PFAIL(p->reset_instance(p, NULL, &out, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->reset_instance(p, &r, NULL, &e), DURO_INVALID, 0, &e);
    r.version = 0;
    expect_reset_refused(p, &r, DURO_INVALID, "version");
    r = reset_req("", 4);
    CHECK_PFAIL(p->reset_instance(p, &r, &out, &e), DURO_INVALID, 0, &e);
    r = reset_req(NULL, 4);
    CHECK_PFAIL(p->reset_instance(p, &r, &out, &e), DURO_INVALID, 0, &e);
    r = reset_req("ghost", 4);
    expect_reset_refused(p, &r, DURO_NOT_FOUND, "does not exist");
    r = reset_req("x", 4);
    r.rewind = 1;
    expect_reset_refused(p, &r, DURO_INVALID, "to_event_id must be 0");

    begin(p, "live", 1);
    r = reset_req("live", 1);
    expect_reset_refused(p, &r, DURO_INVALID_STATE, "only an ended instance");

    failed_instance(p, "x");
    r = reset_req("x", 5); /* 6 is the code's answer to 5 */
    expect_reset_refused(p, &r, DURO_INVALID, "inside a turn");
    expect_reset_refused(p, &r, DURO_INVALID, "events 4 and 6");
    r.to_event_id = 1;
    expect_reset_refused(p, &r, DURO_INVALID, "event 3");
    r.to_event_id = 8;
    expect_reset_refused(p, &r, DURO_INVALID, "ending");
    r.to_event_id = 9;
    expect_reset_refused(p, &r, DURO_NOT_FOUND, "has no event 9");
    r.to_event_id = 4;
    r.execution_id = 2;
    expect_reset_refused(p, &r, DURO_INVALID_STATE, "current execution is 1");

    /* A child without a result by the point, and a suspension. */
    begin(p, "parent", 0);
    duro_orch_item *item = poke(p, "parent");
    duro_event d[6];
    d[0] = event(2, DURO_EVENT_EVENT_RAISED);
    d[0].name = "poke";
    d[1] = event(3, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED);
    d[1].name = "orch";
    d[1].ref_instance = "kid";
    d[2] = event(4, DURO_EVENT_EXECUTION_SUSPENDED);
    d[3] = event(5, DURO_EVENT_EVENT_RAISED);
    d[3].name = "poke";
    d[4] = event(6, DURO_EVENT_ORCHESTRATION_TERMINATED);
    duro_instance_meta m = meta(DURO_STATUS_TERMINATED);
    duro_orch_ack a = ack_of(1, d, 5, &m);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
    r = reset_req("parent", 3);
    expect_reset_refused(p, &r, DURO_INVALID, "sub-orchestration 'kid'");
    r.to_event_id = 4;
    expect_reset_refused(p, &r, DURO_INVALID, "suspension of event 4");
    r.to_event_id = 1; /* before the child: fine */
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.status, DURO_STATUS_TERMINATED);
    CHECK_EQ(out.activities + out.timers, 0);

    /* Refusals changed nothing. */
    CHECK_EQ(latest(p, "x"), 1);
    CHECK_EQ(latest(p, "live"), 1);
    CHECK_EQ(count(p, WORKER, "x"), 0);
}

/* Child `kid` of `parent` (execution 1, scheduled at event 3) that has
 * run: Started, ActivityScheduled (2), then by `status` OrchestrationCompleted
 * "kid-out" (Completed), ActivityFailed and OrchestrationFailed "kid broke"
 * (Failed), or nothing more (Running). */
static void child_of(duro_provider *p, const char *parent, const char *kid,
                     int status)
{
    duro_work_item w = work(DURO_WORK_START, kid);
    w.name = "orch";
    w.parent_instance = parent;
    w.parent_execution = 1;
    w.parent_event_id = 3;
    enqueue(p, &w, 0);
    duro_orch_item *item = fetch_orch_for(p, kid, LOCK_LONG);
    duro_event d[4];
    d[0] = event(1, DURO_EVENT_ORCHESTRATION_STARTED);
    d[0].name = "orch";
    d[0].ref_instance = parent;
    d[0].ref_execution = 1;
    d[0].ref_event_id = 3;
    d[1] = event(2, DURO_EVENT_ACTIVITY_SCHEDULED);
    d[1].name = "act";
    d[1].payload = "act-input";
    d[1].attempt = 1;
    size_t n = 2;
    duro_instance_meta m = meta(status);
    m.name = "orch";
    m.parent_instance = parent;
    m.parent_execution = 1;
    m.parent_event_id = 3;
    if (status == DURO_STATUS_COMPLETED) {
        d[n] = event(3, DURO_EVENT_ORCHESTRATION_COMPLETED);
        d[n++].payload = "\"kid-out\"";
        m.output = "\"kid-out\"";
    } else if (status == DURO_STATUS_FAILED) {
        d[n] = event(3, DURO_EVENT_ACTIVITY_FAILED);
        d[n].source_event_id = 2;
        d[n++].error = "act broke";
        d[n] = event(4, DURO_EVENT_ORCHESTRATION_FAILED);
        d[n].error = "kid broke";
        d[n++].category = DURO_CATEGORY_APPLICATION;
        m.error = "kid broke";
        m.category = DURO_CATEGORY_APPLICATION;
    }
    duro_orch_ack a = ack_of(1, d, n, &m);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
}

/* `parent` Failed at execution 1: Started, EventRaised (2),
 * SubOrchestrationScheduled of `kid` (3), SubOrchestrationFailed (4),
 * OrchestrationFailed (5); the last good point is 3. */
static void parent_of(duro_provider *p, const char *parent, const char *kid)
{
    begin(p, parent, 0);
    duro_orch_item *item = poke(p, parent);
    duro_event d[4];
    d[0] = event(2, DURO_EVENT_EVENT_RAISED);
    d[0].name = "poke";
    d[1] = event(3, DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED);
    d[1].name = "orch";
    d[1].ref_instance = kid;
    d[2] = event(4, DURO_EVENT_SUB_ORCHESTRATION_FAILED);
    d[2].source_event_id = 3;
    d[2].error = "kid broke";
    d[3] = event(5, DURO_EVENT_ORCHESTRATION_FAILED);
    d[3].error = "kid broke";
    duro_instance_meta m = meta(DURO_STATUS_FAILED);
    m.error = "kid broke";
    duro_orch_ack a = ack_of(1, d, 4, &m);
    ack(p, item->lock_token, &a);
    duro_orch_item_free(item);
}

/* The child's message queued for `id` (beside the reset's resume),
 * fetched and checked. */
static void expect_child_message(duro_provider *p, const char *id, int kind,
                                 const char *payload, const char *error)
{
    CHECK_EQ(count(p, ORCH, id), 2);
    duro_orch_item *item = fetch_orch_for(p, id, LOCK_LONG);
    CHECK_EQ(item->message_count, 2);
    const duro_work_item *w = &item->messages[0];
    if (w->kind == DURO_WORK_RESUME_INSTANCE)
        w = &item->messages[1];
    CHECK_EQ(w->kind, kind);
    CHECK_EQ(w->execution_id, 2);
    CHECK_EQ(w->source_id, 3);
    if (payload != NULL)
        CHECK_STR(w->payload, payload);
    if (error != NULL)
        CHECK(w->error != NULL && strstr(w->error, error) != NULL);
    abandon_orch(p, item, 0);
    duro_orch_item_free(item);
}

PV_TEST(reset_instance_settles_children_without_a_result)
{
    duro_provider *p = pv_open();
    require_v13(p);
    duro_error e;
    duro_reset_result out;

    /* An ended child gets its ending sent to the new execution. */
    parent_of(p, "p1", "k1");
    child_of(p, "p1", "k1", DURO_STATUS_COMPLETED);
    duro_reset_request r = reset_req("p1", 3);
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.children, 1);
    expect_child_message(p, "p1", DURO_WORK_CHILD_COMPLETED, "\"kid-out\"",
                         NULL);
    CHECK_EQ(latest(p, "k1"), 1);

    parent_of(p, "p2", "k2");
    child_of(p, "p2", "k2", DURO_STATUS_FAILED);
    r = reset_req("p2", 3);
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    expect_child_message(p, "p2", DURO_WORK_CHILD_FAILED, NULL, "kid broke");
    CHECK_EQ(latest(p, "k2"), 1);

    /* A rewind rewinds a Failed child with its parent, re-linked to the
     * parent's new execution; a dry run first changes nothing. */
    parent_of(p, "p3", "k3");
    child_of(p, "p3", "k3", DURO_STATUS_FAILED);
    r = reset_req("p3", 0);
    r.rewind = 1;
    r.dry_run = 1;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(out.to_event_id, 3);
    CHECK_EQ(out.children, 1);
    CHECK_EQ(latest(p, "k3"), 1);
    CHECK_EQ(latest(p, "p3"), 1);
    CHECK_EQ(count(p, WORKER, "k3"), 0);
    r.dry_run = 0;
    CHECK_PRC(p->reset_instance(p, &r, &out, &e), DURO_OK, &e);
    CHECK_EQ(latest(p, "p3"), 2);
    CHECK_EQ(latest(p, "k3"), 2);
    CHECK_EQ(count(p, ORCH, "p3"), 1); /* its resume only */
    CHECK_EQ(count(p, ORCH, "k3"), 1);
    duro_history *h = history(p, "k3", 2);
    CHECK_EQ(h->count, 3);
    CHECK_STR(h->events[0].ref_instance, "p3");
    CHECK_EQ(h->events[0].ref_execution, 2);
    CHECK_EQ(h->events[2].kind, DURO_EVENT_EXECUTION_RESET);
    CHECK_EQ(h->events[2].flags, DURO_RESET_REWIND);
    duro_history_free(h);
    duro_instance_list *l = get(p, "k3");
    CHECK_EQ(l->items[0].status, DURO_STATUS_RUNNING);
    duro_instance_list_free(l);
    duro_worker_item *wi = fetch_work(p, LOCK_LONG);
    CHECK(wi != NULL);
    CHECK_STR(wi->item.instance_id, "k3");
    CHECK_EQ(wi->item.execution_id, 2);
    duro_worker_item_free(wi);

    /* A live child is refused: its result would go to execution 1. */
    parent_of(p, "p4", "k4");
    child_of(p, "p4", "k4", DURO_STATUS_RUNNING);
    r = reset_req("p4", 0);
    r.rewind = 1;
    expect_reset_refused(p, &r, DURO_INVALID, "is Running");
    CHECK_EQ(latest(p, "p4"), 1);
}

typedef struct sweep_reset_arg {
    duro_reset_request r;
    duro_reset_result out;
} sweep_reset_arg;

static int sweep_reset(duro_provider *p, void *arg, duro_error *e)
{
    sweep_reset_arg *a = arg;
    int rc = p->reset_instance(p, &a->r, &a->out, e);
    if (rc != DURO_OK)
        CHECK_EQ(a->out.execution_id, 0);
    return rc;
}

PV_TEST(fault_sweep_reset_instance)
{
    duro_provider *p = pv_open();
    require_v13(p);
    failed_instance(p, "z");
    sweep_reset_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.r = reset_req("z", 0);
    arg.r.rewind = 1;
    /* every failing step left the store as it was: all or nothing */
    fault_sweep(p, "reset_instance", sweep_reset, &arg);
    CHECK_EQ(arg.out.execution_id, 2);
    CHECK_EQ(latest(p, "z"), 2);
    CHECK_EQ(history_len(p, "z", 2), 7);
    CHECK_EQ(count(p, WORKER, "z"), 1);
    CHECK_EQ(count(p, ORCH, "z"), 2); /* the timer, the resume */
    /* a rewind that rewinds a child too: both or neither */
    parent_of(p, "zp", "zk");
    child_of(p, "zp", "zk", DURO_STATUS_FAILED);
    memset(&arg, 0, sizeof(arg));
    arg.r = reset_req("zp", 0);
    arg.r.rewind = 1;
    fault_sweep(p, "reset_instance (with a child)", sweep_reset, &arg);
    CHECK_EQ(latest(p, "zp"), 2);
    CHECK_EQ(latest(p, "zk"), 2);
}

/* ========================================================================
 * Version 13: schedules. */

static void require_v13_schedules(duro_provider *p)
{
    require_v12(p);
    CHECK_MSG(p->version >= 13 && p->create_schedule != NULL &&
                  p->update_schedule != NULL && p->delete_schedule != NULL &&
                  p->get_schedule != NULL && p->list_schedules != NULL &&
                  p->due_schedules != NULL && p->apply_schedule != NULL &&
                  p->list_schedule_fires != NULL,
              "provider '%s' (version %d) lacks the version-13 methods",
              p->name, p->version);
}

/* A schedule record with a spec, due at `due`. */
static duro_schedule_record sched(const char *id, int64_t next, int64_t due)
{
    duro_schedule_record r;
    memset(&r, 0, sizeof(r));
    r.id = id;
    r.spec = "{\"interval_ms\":1000}";
    r.spec_version = 1;
    r.next_ms = next;
    r.due_ms = due;
    return r;
}

static void create_sched(duro_provider *p, const char *id, int64_t next,
                         int64_t due)
{
    duro_error e;
    duro_schedule_record r = sched(id, next, due);
    CHECK_PRC(p->create_schedule(p, &r, &e), DURO_OK, &e);
}

/* The schedule `id` (free the list). */
static duro_schedule_list *get_sched(duro_provider *p, const char *id)
{
    duro_error e;
    duro_schedule_list *l = NULL;
    CHECK_PRC(p->get_schedule(p, id, &l, &e), DURO_OK, &e);
    CHECK(l != NULL);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].id, id);
    return l;
}

static duro_schedule_action start_action(const char *instance, int64_t t)
{
    duro_schedule_action a;
    memset(&a, 0, sizeof(a));
    a.kind = DURO_SCHEDULE_START;
    a.time_ms = t;
    a.count = 1;
    a.instance_id = instance;
    a.name = "orch";
    a.version = "1.0";
    a.input = "\"tick\"";
    return a;
}

PV_TEST(schedules_are_created_read_listed_updated_and_deleted)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    int64_t before = duro_now_ms();
    duro_schedule_record r = sched("s1", 5000, 5100);
    r.paused = 1;
    r.note = "maintenance";
    CHECK_PRC(p->create_schedule(p, &r, &e), DURO_OK, &e);
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_ALREADY_EXISTS, 0, &e);
    create_sched(p, "s0", 7000, 7000);
    create_sched(p, "s2", 0, 0);

    duro_schedule_list *l = get_sched(p, "s1");
    const duro_schedule_record *g = &l->items[0];
    CHECK_STR(g->spec, r.spec);
    CHECK_EQ(g->spec_version, 1);
    CHECK_EQ(g->row_version, 1);
    CHECK_EQ(g->next_ms, 5000);
    CHECK_EQ(g->due_ms, 5100);
    CHECK_EQ(g->buffered_ms, 0);
    CHECK(g->last_instance_id == NULL);
    CHECK_EQ(g->last_status, DURO_STATUS_NOT_FOUND);
    CHECK_EQ(g->paused, 1);
    CHECK_STR(g->note, "maintenance");
    CHECK_EQ(g->fires, 0);
    CHECK_EQ(g->skips, 0);
    CHECK_INT(g->created_ms, >=, before);
    CHECK_EQ(g->updated_ms, g->created_ms);
    duro_schedule_list_free(l);

    /* Pages in id order. */
    CHECK_PRC(p->list_schedules(p, NULL, 2, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 2);
    CHECK_STR(l->items[0].id, "s0");
    CHECK_STR(l->items[1].id, "s1");
    duro_schedule_list_free(l);
    CHECK_PRC(p->list_schedules(p, "s1", 2, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].id, "s2");
    duro_schedule_list_free(l);

    /* An update at the row's version raises it; at another, conflicts. */
    r.spec = "{\"interval_ms\":2000}";
    r.spec_version = 2;
    r.paused = 0;
    r.note = NULL;
    int64_t version = 0;
    CHECK_PRC(p->update_schedule(p, &r, 1, &version, &e), DURO_OK, &e);
    CHECK_EQ(version, 2);
    CHECK_PFAIL(p->update_schedule(p, &r, 1, &version, &e), DURO_CONFLICT, 0,
                &e);
    r.id = "nope";
    CHECK_PFAIL(p->update_schedule(p, &r, 1, NULL, &e), DURO_NOT_FOUND, 0, &e);
    l = get_sched(p, "s1");
    CHECK_STR(l->items[0].spec, "{\"interval_ms\":2000}");
    CHECK_EQ(l->items[0].spec_version, 2);
    CHECK_EQ(l->items[0].row_version, 2);
    CHECK_EQ(l->items[0].paused, 0);
    CHECK(l->items[0].note == NULL);
    duro_schedule_list_free(l);

    CHECK_PRC(p->delete_schedule(p, "s1", &e), DURO_OK, &e);
    CHECK_PFAIL(p->delete_schedule(p, "s1", &e), DURO_NOT_FOUND, 0, &e);
    l = NULL;
    CHECK_PFAIL(p->get_schedule(p, "s1", &l, &e), DURO_NOT_FOUND, 0, &e);
    CHECK(l == NULL);
}

PV_TEST(due_schedules_are_the_unpaused_ones_due_by_now_earliest_first)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    create_sched(p, "late", 3000, 3000);
    create_sched(p, "early", 1000, 1200);
    create_sched(p, "never", 0, 0);
    duro_schedule_record r = sched("paused", 500, 500);
    r.paused = 1;
    CHECK_PRC(p->create_schedule(p, &r, &e), DURO_OK, &e);

    duro_schedule_list *l = NULL;
    CHECK_PRC(p->due_schedules(p, 1199, 10, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 0);
    CHECK_EQ(l->next_due_ms, 1200);
    duro_schedule_list_free(l);
    CHECK_PRC(p->due_schedules(p, 5000, 10, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 2);
    CHECK_STR(l->items[0].id, "early");
    CHECK_STR(l->items[1].id, "late");
    CHECK_EQ(l->next_due_ms, 0);
    duro_schedule_list_free(l);
    CHECK_PRC(p->due_schedules(p, 5000, 1, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 1);
    CHECK_STR(l->items[0].id, "early");
    duro_schedule_list_free(l);
    CHECK_PRC(p->due_schedules(p, 2000, 10, &l, &e), DURO_OK, &e);
    CHECK_EQ(l->count, 1);
    CHECK_EQ(l->next_due_ms, 3000);
    duro_schedule_list_free(l);
}

PV_TEST(apply_schedule_starts_each_fire_once_and_logs_it)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    create_sched(p, "s", 1000, 1000);
    duro_schedule_action acts[3];
    acts[0] = start_action("s@1", 1000);
    memset(&acts[1], 0, sizeof(acts[1]));
    acts[1].kind = DURO_SCHEDULE_SKIP;
    acts[1].time_ms = 2000;
    acts[1].count = 3;
    acts[1].why = "missed";
    memset(&acts[2], 0, sizeof(acts[2]));
    acts[2].kind = DURO_SCHEDULE_BUFFER;
    acts[2].time_ms = 5000;
    acts[2].count = 1;
    duro_schedule_record after = sched("s", 6000, 6010);
    after.buffered_ms = 5000;
    int64_t version = 0;
    CHECK_PRC(p->apply_schedule(p, "s", 1, acts, 3, &after, &version, &e),
              DURO_OK, &e);
    CHECK_EQ(version, 2);
    /* The same plan again, from the same version: another runtime's. */
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, acts, 3, &after, NULL, &e),
                DURO_CONFLICT, 0, &e);
    CHECK_PFAIL(p->apply_schedule(p, "x", 1, acts, 3, &after, NULL, &e),
                DURO_NOT_FOUND, 0, &e);

    /* The instance and its start message, as an enqueued start. */
    duro_instance_list *in = get(p, "s@1");
    CHECK_EQ(in->items[0].status, DURO_STATUS_PENDING);
    CHECK_STR(in->items[0].name, "orch");
    duro_instance_list_free(in);
    duro_orch_item *item = fetch_orch_for(p, "s@1", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_START);
    CHECK_STR(item->messages[0].payload, "\"tick\"");
    CHECK_STR(item->messages[0].version, "1.0");
    abandon_orch(p, item, 0);
    duro_orch_item_free(item);

    duro_schedule_list *l = get_sched(p, "s");
    const duro_schedule_record *g = &l->items[0];
    CHECK_EQ(g->row_version, 2);
    CHECK_EQ(g->next_ms, 6000);
    CHECK_EQ(g->due_ms, 6010);
    CHECK_EQ(g->buffered_ms, 5000);
    CHECK_STR(g->last_instance_id, "s@1");
    CHECK_EQ(g->last_status, DURO_STATUS_PENDING);
    CHECK_EQ(g->fires, 1);
    CHECK_EQ(g->skips, 3);
    duro_schedule_list_free(l);

    duro_schedule_fire_list *f = NULL;
    CHECK_PRC(p->list_schedule_fires(p, "s", 10, &f, &e), DURO_OK, &e);
    CHECK_EQ(f->count, 3);
    CHECK_EQ(f->items[0].kind, DURO_SCHEDULE_BUFFER);
    CHECK_EQ(f->items[1].kind, DURO_SCHEDULE_SKIP);
    CHECK_EQ(f->items[1].count, 3);
    CHECK_STR(f->items[1].why, "missed");
    CHECK_EQ(f->items[2].kind, DURO_SCHEDULE_START);
    CHECK_STR(f->items[2].instance_id, "s@1");
    CHECK_EQ(f->items[2].instance_status, DURO_STATUS_PENDING);
    CHECK_EQ(f->items[2].time_ms, 1000);
    duro_schedule_fire_list_free(f);

    /* A fire applied twice (its instance there already) starts nothing
     * more; an id taken by another orchestration is logged as skipped. */
    duro_work_item other = work(DURO_WORK_START, "s@taken");
    other.name = "other";
    enqueue(p, &other, 0);
    duro_schedule_action again[2] = {start_action("s@1", 1000),
                                     start_action("s@taken", 7000)};
    after.buffered_ms = 0;
    CHECK_PRC(p->apply_schedule(p, "s", 2, again, 2, &after, &version, &e),
              DURO_OK, &e);
    CHECK_EQ(count(p, ORCH, "s@1"), 1);
    CHECK_EQ(count(p, ORCH, "s@taken"), 1);
    l = get_sched(p, "s");
    CHECK_EQ(l->items[0].fires, 1);
    CHECK_EQ(l->items[0].skips, 4);
    CHECK_STR(l->items[0].last_instance_id, "s@1");
    duro_schedule_list_free(l);
    CHECK_PRC(p->list_schedule_fires(p, "s", 1, &f, &e), DURO_OK, &e);
    CHECK_EQ(f->count, 1);
    CHECK_EQ(f->items[0].kind, DURO_SCHEDULE_SKIP);
    CHECK_STR(f->items[0].why, "instance id taken");
    duro_schedule_fire_list_free(f);

    /* Deleting the schedule leaves its instances. */
    CHECK_PRC(p->delete_schedule(p, "s", &e), DURO_OK, &e);
    in = get(p, "s@1");
    duro_instance_list_free(in);
    CHECK_PRC(p->list_schedule_fires(p, "s", 10, &f, &e), DURO_OK, &e);
    CHECK_EQ(f->count, 0);
    duro_schedule_fire_list_free(f);
}

PV_TEST(apply_schedule_stops_the_last_instance_and_keeps_the_newest_fires)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    create_sched(p, "s", 1000, 1000);
    begin(p, "run", 0);
    duro_schedule_action a;
    memset(&a, 0, sizeof(a));
    a.kind = DURO_SCHEDULE_STOP_LAST;
    a.time_ms = 1000;
    a.count = 1;
    a.instance_id = "run";
    a.terminate = 1;
    a.reason = "schedule s: overlap policy";
    a.requested_by = "schedule:s";
    duro_schedule_record after = sched("s", 2000, 2000);
    CHECK_PRC(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e), DURO_OK,
              &e);
    duro_orch_item *item = fetch_orch_for(p, "run", LOCK_LONG);
    CHECK_EQ(item->message_count, 1);
    CHECK_EQ(item->messages[0].kind, DURO_WORK_TERMINATE_INSTANCE);
    CHECK_STR(item->messages[0].reason, "schedule s: overlap policy");
    CHECK_STR(item->messages[0].requested_by, "schedule:s");
    abandon_orch(p, item, 0);
    duro_orch_item_free(item);
    /* A cancel of an instance that has not begun decides it at once. */
    start(p, "fresh");
    a.instance_id = "fresh";
    a.terminate = 0;
    CHECK_PRC(p->apply_schedule(p, "s", 2, &a, 1, &after, NULL, &e), DURO_OK,
              &e);
    expect_status(p, "fresh", DURO_STATUS_CANCELLED);

    /* The log keeps the newest DURO_SCHEDULE_FIRES_KEPT entries. */
    int64_t version = 3;
    duro_schedule_action skip;
    memset(&skip, 0, sizeof(skip));
    skip.kind = DURO_SCHEDULE_SKIP;
    skip.count = 1;
    skip.why = "overlap";
    for (int i = 0; i < DURO_SCHEDULE_FIRES_KEPT + 5; i++) {
        skip.time_ms = 10000 + i;
        CHECK_PRC(
            p->apply_schedule(p, "s", version, &skip, 1, &after, &version, &e),
            DURO_OK, &e);
    }
    duro_schedule_fire_list *f = NULL;
    CHECK_PRC(p->list_schedule_fires(p, "s", 1000, &f, &e), DURO_OK, &e);
    CHECK_EQ(f->count, (size_t)DURO_SCHEDULE_FIRES_KEPT);
    CHECK_EQ(f->items[0].time_ms, 10000 + DURO_SCHEDULE_FIRES_KEPT + 4);
    CHECK_EQ(f->items[f->count - 1].time_ms, 10005);
    duro_schedule_fire_list_free(f);
    duro_schedule_list *l = get_sched(p, "s");
    CHECK_EQ(l->items[0].skips, DURO_SCHEDULE_FIRES_KEPT + 5);
    duro_schedule_list_free(l);
}

PV_TEST(schedule_methods_refuse_bad_input_and_change_nothing)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    create_sched(p, "s", 1000, 1000);
    pv_snapshot snap;
    pv_snapshot_take(p, &snap);
    char long_id[DURO_SCHEDULE_ID_MAX + 2];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';

    duro_schedule_record r = sched("t", 1, 1);
    CHECK_PFAIL(p->create_schedule(p, NULL, &e), DURO_INVALID, 0, &e);
    r.id = NULL;
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r.id = "";
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r.id = long_id;
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_TOO_LARGE, 0, &e);
    r = sched("t", 1, 1);
    r.spec = NULL;
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r = sched("t", -1, 1);
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r = sched("t", 1, 1);
    r.spec_version = 0;
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r = sched("t", 1, 1);
    r.paused = 2;
    CHECK_PFAIL(p->create_schedule(p, &r, &e), DURO_INVALID, 0, &e);
    r = sched("s", 1, 1);
    CHECK_PFAIL(p->update_schedule(p, &r, 0, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->update_schedule(p, NULL, 1, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->delete_schedule(p, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->delete_schedule(p, "", &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->delete_schedule(p, long_id, &e), DURO_TOO_LARGE, 0, &e);

    duro_schedule_list *l = NULL;
    CHECK_PFAIL(p->get_schedule(p, "s", NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->get_schedule(p, NULL, &l, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->list_schedules(p, NULL, 0, &l, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->list_schedules(p, NULL, 1, NULL, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->due_schedules(p, -1, 1, &l, &e), DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->due_schedules(p, 0, 0, &l, &e), DURO_INVALID, 0, &e);
    CHECK(l == NULL);
    duro_schedule_fire_list *f = NULL;
    CHECK_PFAIL(p->list_schedule_fires(p, NULL, 1, &f, &e), DURO_INVALID, 0,
                &e);
    CHECK_PFAIL(p->list_schedule_fires(p, "s", 0, &f, &e), DURO_INVALID, 0, &e);
    CHECK(f == NULL);

    duro_schedule_record after = sched("s", 2000, 2000);
    duro_schedule_action a = start_action("s@1", 1000);
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, NULL, NULL, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, NULL, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    CHECK_PFAIL(p->apply_schedule(p, "s", 0, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    a.kind = 99;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    a = start_action(NULL, 1000);
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    a = start_action("s@1", 1000);
    a.name = NULL;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    a = start_action("s@1", -5);
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    memset(&a, 0, sizeof(a));
    a.kind = DURO_SCHEDULE_STOP_LAST;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    a.instance_id = "x";
    a.terminate = 2;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    memset(&a, 0, sizeof(a));
    a.kind = DURO_SCHEDULE_SKIP;
    a.count = 0;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    after.next_ms = -1;
    CHECK_PFAIL(p->apply_schedule(p, "s", 1, NULL, 0, &after, NULL, &e),
                DURO_INVALID, 0, &e);
    PV_EXPECT_UNCHANGED(p, &snap);
    pv_snapshot_free(&snap);
}

/* Two handles (two processes) apply the same plan from the same version at
 * once, again and again: one wins each round, the other conflicts, and
 * each fire has one instance. */
typedef struct apply_racer {
    duro_provider *p;
    int round;
    int rc;
} apply_racer;

static void *apply_race(void *arg)
{
    apply_racer *r = arg;
    char instance[32];
    snprintf(instance, sizeof(instance), "s@%d", r->round);
    duro_schedule_action a = start_action(instance, r->round * 1000);
    duro_schedule_record after = sched("s", (r->round + 1) * 1000, 1);
    duro_error e;
    r->rc =
        r->p->apply_schedule(r->p, "s", r->round + 1, &a, 1, &after, NULL, &e);
    return NULL;
}

PV_TEST(apply_schedule_from_two_handles_at_once_applies_one_plan)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_provider *q = pv_open_same();
    create_sched(p, "s", 0, 1);
    for (int round = 0; round < 20; round++) {
        apply_racer racers[2] = {{p, round, -1}, {q, round, -1}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, apply_race, &racers[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        int won = (racers[0].rc == DURO_OK) + (racers[1].rc == DURO_OK);
        CHECK_MSG(won == 1, "round %d: %s and %s", round,
                  duro_errname(racers[0].rc), duro_errname(racers[1].rc));
        for (int i = 0; i < 2; i++)
            CHECK_MSG(racers[i].rc == DURO_OK || racers[i].rc == DURO_CONFLICT,
                      "round %d: %s", round, duro_errname(racers[i].rc));
    }
    duro_schedule_list *l = get_sched(p, "s");
    CHECK_EQ(l->items[0].fires, 20);
    CHECK_EQ(l->items[0].row_version, 21);
    duro_schedule_list_free(l);
    CHECK_EQ(count(p, ORCH, NULL), 20);
    pv_close(q);
}

static int sweep_apply_schedule(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_schedule_action a[2] = {start_action("s@2", 2000)};
    memset(&a[1], 0, sizeof(a[1]));
    a[1].kind = DURO_SCHEDULE_STOP_LAST;
    a[1].time_ms = 2000;
    a[1].count = 1;
    a[1].instance_id = "s@1";
    a[1].reason = "overlap";
    a[1].requested_by = "schedule:s";
    duro_schedule_record after = sched("s", 3000, 3000);
    return p->apply_schedule(p, "s", 2, a, 2, &after, NULL, e);
}

PV_TEST(fault_sweep_apply_schedule)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    duro_error e;
    create_sched(p, "s", 1000, 1000);
    duro_schedule_action a = start_action("s@1", 1000);
    duro_schedule_record after = sched("s", 2000, 2000);
    CHECK_PRC(p->apply_schedule(p, "s", 1, &a, 1, &after, NULL, &e), DURO_OK,
              &e);
    fault_sweep(p, "apply_schedule", sweep_apply_schedule, NULL);
    duro_schedule_list *l = get_sched(p, "s");
    CHECK_EQ(l->items[0].fires, 2);
    CHECK_STR(l->items[0].last_instance_id, "s@2");
    duro_schedule_list_free(l);
}

static int sweep_create_schedule(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_schedule_record r = sched("n", 9000, 9000);
    return p->create_schedule(p, &r, e);
}

static int sweep_due_schedules(duro_provider *p, void *arg, duro_error *e)
{
    (void)arg;
    duro_schedule_list *l = NULL;
    int rc = p->due_schedules(p, 5000, 10, &l, e);
    if (rc == DURO_OK)
        CHECK_EQ(l->count, 1);
    else
        CHECK(l == NULL);
    duro_schedule_list_free(l);
    return rc;
}

PV_TEST(fault_sweep_schedule_writes_and_reads)
{
    duro_provider *p = pv_open();
    require_v13_schedules(p);
    create_sched(p, "s", 1000, 1000);
    fault_sweep(p, "create_schedule", sweep_create_schedule, NULL);
    fault_sweep(p, "due_schedules", sweep_due_schedules, NULL);
}

/* ========================================================================
 * The table. */

typedef enum needs {
    NEEDS_NOTHING = 0,
    NEEDS_MAX_HISTORY = 1,  /* factory->open_with_max_history */
    NEEDS_INJECT = 2,       /* factory->inject_fault */
    NEEDS_SECOND_HANDLE = 4 /* factory->open_same */
} needs;

typedef struct pv_case {
    test_case tc;
    needs needs;
} pv_case;

#define C(name)                                                                \
    {                                                                          \
        T(name), NEEDS_NOTHING                                                 \
    }
#define C_NEEDS(name, what)                                                    \
    {                                                                          \
        T(name), what                                                          \
    }

static const pv_case suite[] = {
    /* activity cancellation (lock stealing) */
    C(ack_orchestration_item_deletes_cancelled_activities),
    C(cancellation_of_locked_activity_causes_renewal_failure),
    C(cancellation_of_unlocked_activity_removes_from_queue),
    C(ack_work_item_fails_on_cancelled_row),
    C(ack_work_item_succeeds_if_row_exists),
    C(mass_cancellation_deletes_all_activities),
    C(ack_work_item_none_deletes_without_enqueue),
    C(activity_scheduled_and_cancelled_in_same_ack_never_fetchable),
    C(thousand_activities_cancelled_in_one_ack),
    C(ack_and_fetch_work_item_acks_and_locks_the_next),
    C(ack_and_fetch_work_item_on_a_cancelled_row_changes_nothing),
    C(ack_and_fetch_orchestration_item_acks_and_locks_the_next),
    C(ack_and_fetch_orchestration_item_with_stale_token_changes_nothing),
    /* version 8: event ids */
    C(an_event_id_is_enqueued_once_per_instance),
    /* version 7: many turns in one transaction */
    C(ack_and_fetch_orchestration_items_acks_and_fetches_many),
    C(ack_and_fetch_orchestration_items_refuses_bad_input),
    C(ack_and_fetch_orchestration_items_returns_each_history_tail),
    C(ack_and_fetch_orchestration_items_mixed_turns_as_one_by_one),
    C(ack_and_fetch_orchestration_items_messages_see_earlier_turns),
    C(ack_and_fetch_orchestration_items_continue_as_new_drops_as_alone),
    C_NEEDS(
        ack_and_fetch_orchestration_items_over_the_history_cap_changes_nothing,
        NEEDS_MAX_HISTORY),
    C(ack_and_fetch_orchestration_items_with_one_stale_token_changes_nothing),
    /* version 3: why a work item is gone */
    C(cancel_reason_is_read_from_the_cancel_event),
    C(renewal_after_a_cancellation_fails_whatever_took_the_rows_place),
    C_NEEDS(cancel_reason_is_visible_to_another_handle, NEEDS_SECOND_HANDLE),
    /* locks and races */
    C(instance_lock_is_exclusive_across_racing_fetchers),
    C(racing_work_item_fetchers_never_share_a_row),
    C_NEEDS(instance_lock_is_exclusive_across_handles, NEEDS_SECOND_HANDLE),
    C_NEEDS(racing_work_item_fetchers_never_share_a_row_across_handles,
            NEEDS_SECOND_HANDLE),
    C(orchestration_lock_expiry_redelivers_with_higher_attempt),
    C(work_item_lock_expiry_redelivers_with_higher_attempt),
    C(abandon_orchestration_item_with_delay_hides_it_until_due),
    C(abandon_orchestration_item_without_delay_makes_it_fetchable_at_once),
    C(a_cancel_or_terminate_is_not_held_back_by_an_abandon_delay),
    C(abandon_work_item_with_delay_hides_it_until_due),
    C(abandon_work_item_without_delay_makes_it_fetchable_at_once),
    C(renewing_an_orchestration_lock_keeps_it),
    C(renewing_a_work_item_lock_keeps_it),
    C(renewing_an_expired_orchestration_lock_fails),
    C(renewing_an_expired_but_untaken_work_item_lock_extends_it),
    C(renewing_an_expired_and_retaken_work_item_lock_fails_lock_lost),
    C(renewing_a_released_work_item_lock_fails_lock_lost),
    C(abandoning_an_expired_but_untaken_work_item_applies_its_delay),
    C(ack_with_stale_token_fails_and_changes_nothing),
    C(unknown_lock_tokens_fail_lock_lost_and_change_nothing),
    C(failing_ack_leaves_no_partial_state),
    C(messages_arriving_while_locked_wait_for_the_next_fetch),
    /* queues */
    C(delayed_messages_stay_invisible_until_due),
    C(messages_of_one_instance_come_oldest_first),
    C(work_items_come_oldest_first),
    C(instances_are_fetched_oldest_first_and_independently),
    C(count_messages_counts_visible_delayed_and_locked),
    C(cancel_for_a_missing_instance_does_not_block_others),
    C(finished_instance_leaves_nothing_queued),
    C(cancelled_delayed_start_instance_leaves_nothing_queued),
    C(continue_as_new_deletes_only_the_ended_executions_messages),
    /* history and executions */
    C(continue_as_new_keeps_executions_apart),
    C(history_events_round_trip_every_field),
    C(work_items_round_trip_every_field),
    C(activity_run_times_round_trip_into_history),
    C(history_cache_skips_events_the_caller_holds),
    C_NEEDS(history_cap_fails_with_history_limit_and_changes_nothing,
            NEEDS_MAX_HISTORY),
    /* instances */
    C(enqueued_start_creates_a_pending_instance),
    C(duplicate_start_fails_and_idempotent_start_changes_nothing),
    C(idempotent_start_of_another_name_fails_already_exists),
    C(start_in_ack_for_existing_instance_sends_child_failed_to_parent),
    C(ack_meta_is_visible_through_get_instance),
    C(list_instances_filters_orders_and_pages),
    C(delete_instance_cascades_and_refuses_running_without_force),
    C(prune_executions_keeps_the_last_k),
    /* bad input */
    C(null_and_empty_ids_and_tokens_fail_invalid_and_change_nothing),
    C(oversized_input_fails_too_large_and_changes_nothing),
    /* wake-up */
    C(wait_for_work_returns_after_an_enqueue_from_another_thread),
    C(wait_for_work_returns_when_a_delayed_message_becomes_due),
    C(sticky_wake_makes_waits_return_at_once_until_reset),
    /* storage faults */
    C_NEEDS(fault_sweep_ack_orchestration_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_ack_work_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_ack_and_fetch_work_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_ack_and_fetch_orchestration_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_ack_and_fetch_orchestration_items, NEEDS_INJECT),
    C_NEEDS(fault_sweep_fetch_orchestration_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_fetch_work_item, NEEDS_INJECT),
    C_NEEDS(fault_sweep_enqueue_start, NEEDS_INJECT),
    C_NEEDS(fault_sweep_delete_instance, NEEDS_INJECT),
    /* version 4: status records, problems, bulk cancel and purge */
    C(cancel_request_is_recorded_on_the_instance),
    C(finish_time_is_set_when_the_instance_ends),
    C(set_instance_problem_records_and_clears),
    C(set_instance_problem_leaves_an_ended_instance_alone),
    C(ack_meta_problem_is_recorded_with_the_turn),
    C(check_work_item_locks_tells_held_from_gone_and_retaken),
    C(cancel_instances_reports_one_outcome_per_id),
    C(cancel_instances_refuses_bad_input_and_changes_nothing),
    C(cancel_matching_selects_by_filter_and_a_dry_run_changes_nothing),
    C(cancel_matching_handles_more_than_a_batch),
    C(cancel_matching_never_takes_instances_created_while_it_runs),
    C(bulk_calls_refuse_bad_filters_and_change_nothing),
    C(purge_deletes_finished_instances_with_their_descendants),
    C(purge_handles_more_than_a_batch),
    C_NEEDS(cancel_failure_keeps_whole_batches, NEEDS_INJECT),
    C_NEEDS(purge_failure_keeps_whole_batches, NEEDS_INJECT),
    C_NEEDS(fault_sweep_set_instance_problem, NEEDS_INJECT),
    C_NEEDS(fault_sweep_cancel_instances, NEEDS_INJECT),
    C_NEEDS(fault_sweep_cancel_matching, NEEDS_INJECT),
    C_NEEDS(fault_sweep_purge_instances, NEEDS_INJECT),
    /* version 4: store stats */
    C(store_stats_of_an_empty_store_are_zero),
    C(store_stats_count_instances_problems_and_queue_states),
    C_NEEDS(fault_sweep_read_store_stats, NEEDS_INJECT),
    /* version 5: Suspended and Terminated, terminate, suspend, resume */
    C(control_messages_round_trip_and_record_nothing),
    C(orchestrator_queue_refuses_worker_and_unknown_kinds),
    C(suspended_is_live_and_terminated_ends_the_instance),
    C(set_instance_problem_and_store_stats_treat_suspended_as_live),
    C(cancel_reaches_a_suspended_instance_and_not_a_terminated_one),
    C(delete_and_purge_keep_suspended_and_take_terminated),
    C(control_instances_reports_one_outcome_per_id),
    C(control_instances_refuses_bad_input_and_changes_nothing),
    C(control_matching_takes_the_statuses_of_its_control),
    C(control_matching_selects_by_filter_and_a_dry_run_equals_the_real_run),
    C(control_matching_handles_more_than_a_batch),
    C(control_matching_never_takes_instances_created_while_it_runs),
    C_NEEDS(fault_sweep_control_instances, NEEDS_INJECT),
    C_NEEDS(fault_sweep_control_matching, NEEDS_INJECT),
    /* version 9: decided at once */
    C(unbegun_instances_are_decided_in_the_request_transaction),
    C(a_held_or_asked_instance_is_sent_the_request),
    C(a_child_decided_at_once_tells_its_parent),
    C_NEEDS(fault_sweep_a_child_decided_at_once, NEEDS_INJECT),
    /* version 10: the operators' queries */
    C(query_instances_selects_and_orders_as_a_model_does),
    C(query_instances_pages_once_through_while_instances_are_created),
    C(query_instances_refuses_bad_input_and_bad_cursors),
    C(list_control_events_says_who_did_what_and_why),
    C(list_control_events_refuses_bad_input_and_bad_cursors),
    C_NEEDS(fault_sweep_query_instances, NEEDS_INJECT),
    C_NEEDS(fault_sweep_list_control_events, NEEDS_INJECT),
    /* version 12: what a virtual clock skips to */
    C(next_due_is_the_earliest_visibility_or_lock_expiry_of_both_queues),
    C_NEEDS(fault_sweep_next_due, NEEDS_INJECT),
    /* version 12: the live runtimes */
    C(runtimes_are_registered_listed_replaced_and_removed),
    C(a_runtime_that_missed_its_heartbeats_is_gone),
    C(register_list_and_remove_runtime_refuse_bad_input),
    C(pass_orchestration_item_does_not_count_the_fetch),
    C(query_instances_filters_by_orchestration_version),
    C_NEEDS(fault_sweep_runtimes, NEEDS_INJECT),
    /* version 12: instance deadlines */
    C(a_start_with_a_deadline_keeps_it_and_queues_its_message),
    C(a_deadline_message_spans_continue_as_new_and_ends_with_the_instance),
    C(a_queued_deadline_does_not_keep_a_request_from_deciding_at_once),
    C(deadlines_refuse_bad_input_and_change_nothing),
    /* version 13: reset and rewind */
    C(reset_instance_keeps_a_prefix_and_makes_its_pending_work_live),
    C(reset_instance_rewind_goes_to_the_last_good_point),
    C(reset_instance_runs_under_the_instance_deadline),
    C(reset_instance_refuses_a_deadline_that_has_passed),
    C(reset_instance_refuses_what_could_not_replay),
    C(reset_instance_settles_children_without_a_result),
    C_NEEDS(fault_sweep_reset_instance, NEEDS_INJECT),
    /* version 13: schedules */
    C(schedules_are_created_read_listed_updated_and_deleted),
    C(due_schedules_are_the_unpaused_ones_due_by_now_earliest_first),
    C(apply_schedule_starts_each_fire_once_and_logs_it),
    C(apply_schedule_stops_the_last_instance_and_keeps_the_newest_fires),
    C(schedule_methods_refuse_bad_input_and_change_nothing),
    C_NEEDS(apply_schedule_from_two_handles_at_once_applies_one_plan,
            NEEDS_SECOND_HANDLE),
    C_NEEDS(fault_sweep_apply_schedule, NEEDS_INJECT),
    C_NEEDS(fault_sweep_schedule_writes_and_reads, NEEDS_INJECT),
};

int pv_main(int argc, char **argv, const pv_factory *f, const test_case *extra,
            size_t extra_count)
{
    factory = f;
    size_t n = sizeof(suite) / sizeof(suite[0]);
    test_case *tests = calloc(n + extra_count + 1, sizeof(*tests));
    if (tests == NULL)
        return 2;
    const char *filter = argc > 1 ? argv[1] : getenv("DURO_TEST_FILTER");
    int listing = filter != NULL && strcmp(filter, "--list") == 0;
    size_t count_tests = 0;
    for (size_t i = 0; i < n; i++) {
        const char *missing = NULL;
        if ((suite[i].needs & NEEDS_MAX_HISTORY) &&
            f->open_with_max_history == NULL)
            missing = "open_with_max_history";
        if ((suite[i].needs & NEEDS_INJECT) && f->inject_fault == NULL)
            missing = "inject_fault";
        if ((suite[i].needs & NEEDS_SECOND_HANDLE) && f->open_same == NULL)
            missing = "open_same";
        if (missing == NULL) {
            tests[count_tests++] = suite[i].tc;
        } else if (!listing &&
                   (filter == NULL || strstr(suite[i].tc.name, filter))) {
            /* Said out loud, never counted as a pass. */
            fprintf(stderr, "[ SKIP ] %s (factory '%s' has no %s)\n",
                    suite[i].tc.name, f->name, missing);
        }
    }
    for (size_t i = 0; i < extra_count; i++)
        tests[count_tests++] = extra[i];
    if (!listing)
        fprintf(stderr, "provider validation suite on '%s'\n", f->name);
    int rc = test_run(argc, argv, tests, count_tests);
    close_open_stores();
    free(tests);
    return rc;
}
