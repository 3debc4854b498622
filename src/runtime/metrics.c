/* metrics.c - the runtime's counters and histograms and their Prometheus
 * text exposition (format 0.0.4). Owns the per-name series tables, built
 * once from the registry copy at runtime creation; measuring points update
 * them with relaxed atomics from any runtime thread, and the writer reads
 * them from any thread without a lock. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* The label value of a turn or an activity whose name (and version) has no
 * registry entry: one fixed series, never a new one per unknown string. */
#define UNREGISTERED "(unregistered)"

/* ------------------------------------------------------------------------
 * fixed label sets and bucket bounds */

static const char *const end_names[DURO__END_COUNT] = {
    "completed", "failed", "cancelled", "continued_as_new", "terminated"};

static const char *const outcome_names[DURO__ACT_COUNT] = {
    "completed", "failed", "cancelled", "abandoned"};

static const char *const reason_names[DURO__REASON_COUNT] = {
    DURO_REASON_SELECT_LOSER,
    DURO_REASON_TASK_CANCELLED,
    DURO_REASON_INSTANCE_CANCELLED,
    DURO_REASON_INSTANCE_FAILED,
    DURO_REASON_INSTANCE_COMPLETED,
    DURO_REASON_CONTINUED_AS_NEW,
    DURO_REASON_INSTANCE_TERMINATED,
    "lock_lost",
    "shutdown",
    "instance_deleted",
    "other",
    DURO_REASON_DEADLINE};
_Static_assert(sizeof(reason_names) / sizeof(reason_names[0]) ==
                   DURO__REASON_COUNT,
               "reasons");
#define REASON_LOCK_LOST 7 /* reasons a turn never decides */
#define REASON_SHUTDOWN 8
#define REASON_INSTANCE_DELETED 9
#define REASON_OTHER 10

typedef struct buckets {
    size_t count;
    const int64_t *bounds_ns;  /* upper bounds, inclusive, increasing */
    const char *const *labels; /* the same bounds as `le` values */
} buckets;

/* A turn: from half a millisecond (a kept fiber, a small commit) to
 * seconds (a long replay, a store under load). */
static const int64_t turn_bounds[] = {
    500000,   1000000,   2500000,   5000000,   10000000,   25000000,
    50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000};
static const char *const turn_les[] = {"0.0005", "0.001", "0.0025", "0.005",
                                       "0.01",   "0.025", "0.05",   "0.1",
                                       "0.25",   "0.5",   "1",      "2.5"};
static const buckets turn_buckets = {12, turn_bounds, turn_les};

/* An activity: from a millisecond to five minutes. */
static const int64_t act_bounds[] = {
    1000000LL,     5000000LL,     10000000LL,     25000000LL,
    50000000LL,    100000000LL,   250000000LL,    500000000LL,
    1000000000LL,  2500000000LL,  5000000000LL,   10000000000LL,
    30000000000LL, 60000000000LL, 120000000000LL, 300000000000LL};
static const char *const act_les[] = {
    "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
    "1",     "2.5",   "5",    "10",    "30",   "60",  "120",  "300"};
static const buckets act_buckets = {16, act_bounds, act_les};

_Static_assert(sizeof(turn_bounds) / sizeof(turn_bounds[0]) ==
                       sizeof(turn_les) / sizeof(turn_les[0]) &&
                   sizeof(turn_les) / sizeof(turn_les[0]) <=
                       DURO__HIST_MAX_BUCKETS,
               "turn buckets");
_Static_assert(sizeof(act_bounds) / sizeof(act_bounds[0]) ==
                       sizeof(act_les) / sizeof(act_les[0]) &&
                   sizeof(act_les) / sizeof(act_les[0]) <=
                       DURO__HIST_MAX_BUCKETS,
               "activity buckets");

#define ADD(counter, n)                                                        \
    atomic_fetch_add_explicit(&(counter), (n), memory_order_relaxed)
#define LOAD(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

static void observe(duro__histogram *h, const buckets *b, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    size_t i = 0;
    while (i < b->count && ns > b->bounds_ns[i])
        i++;
    ADD(h->counts[i], 1);
    ADD(h->sum_ns, (uint64_t)ns);
}

static size_t reason_index(const char *reason)
{
    if (reason == NULL)
        return REASON_OTHER;
    for (size_t i = 0; i < DURO__REASON_COUNT; i++)
        if (strcmp(reason, reason_names[i]) == 0)
            return i;
    return REASON_OTHER;
}

/* ------------------------------------------------------------------------
 * label values */

/* The name as a label value: `\`, `"` and newline escaped, and each byte
 * that is not valid UTF-8 replaced by U+FFFD (the format is UTF-8).
 * Caller-owned; NULL on OOM. */
static char *label_value(const char *name)
{
    size_t n = strlen(name);
    /* at most 3 bytes out per byte in (U+FFFD for one invalid byte) */
    char *out = duro__calloc(n + 1, 3);
    if (out == NULL)
        return NULL;
    const unsigned char *s = (const unsigned char *)name;
    size_t o = 0;
    while (*s != '\0') {
        size_t k = duro__utf8_len(s);
        if (k == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            s++;
        } else if (*s == '\\' || *s == '"' || *s == '\n') {
            out[o++] = '\\';
            out[o++] = *s == '\n' ? 'n' : (char)*s;
            s++;
        } else {
            memcpy(out + o, s, k);
            o += k;
            s += k;
        }
    }
    out[o] = '\0';
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct label values of `names` plus UNREGISTERED, sorted, in
 * *labels (caller-owned, *count of them), and for each name the index of
 * its label in *index. Names that give the same label value (versions of
 * one orchestration; names that differ only in invalid UTF-8; a name that
 * is UNREGISTERED) share it. */
static int build_labels(const char *const *names, size_t n, char ***labels,
                        size_t *count, uint32_t **index)
{
    *labels = NULL;
    *count = 0;
    *index = NULL;
    char **all = duro__calloc(n + 1, sizeof(char *));
    uint32_t *idx = duro__calloc(n + 1, sizeof(uint32_t));
    char **sorted = duro__calloc(n + 1, sizeof(char *));
    int rc = all && idx && sorted ? DURO_OK : DURO_NOMEM;
    for (size_t i = 0; rc == DURO_OK && i <= n; i++) {
        all[i] = label_value(i < n ? names[i] : UNREGISTERED);
        if (all[i] == NULL)
            rc = DURO_NOMEM;
    }
    size_t unique = 0;
    if (rc == DURO_OK) {
        memcpy(sorted, all, (n + 1) * sizeof(char *));
        qsort(sorted, n + 1, sizeof(char *), cmp_str);
        for (size_t i = 0; i <= n; i++)
            if (unique == 0 || strcmp(sorted[unique - 1], sorted[i]) != 0)
                sorted[unique++] = sorted[i];
        for (size_t i = 0; i <= n; i++) {
            char **hit =
                bsearch(&all[i], sorted, unique, sizeof(char *), cmp_str);
            idx[i] = (uint32_t)(hit - sorted);
        }
        /* Keep one copy of each distinct value; free the duplicates. */
        for (size_t i = 0; i <= n; i++)
            if (sorted[idx[i]] != all[i])
                duro__free(all[i]);
    } else if (all != NULL) {
        for (size_t i = 0; i <= n; i++)
            duro__free(all[i]);
    }
    duro__free(all);
    if (rc != DURO_OK) {
        duro__free(idx);
        duro__free(sorted);
        return rc;
    }
    *labels = sorted;
    *count = unique;
    *index = idx;
    return DURO_OK;
}

/* ------------------------------------------------------------------------
 * creation */

int duro__metrics_init(duro__metrics *m, const duro_registry *reg,
                       const char *provider_name, int slots_max)
{
    memset(m, 0, sizeof(*m));
    m->slots_max = slots_max;
    m->orch_entries = reg->orchs;
    m->orch_entry_count = reg->orch_count;
    m->act_entries = reg->acts;
    m->act_entry_count = reg->act_count;

    const char **names = duro__calloc(
        DURO__MAX(reg->orch_count, reg->act_count) + 1, sizeof(char *));
    if (names == NULL)
        return DURO_NOMEM;
    char **labels = NULL;
    size_t count = 0;
    for (size_t i = 0; i < reg->orch_count; i++)
        names[i] = reg->orchs[i].name;
    int rc = build_labels(names, reg->orch_count, &labels, &count,
                          &m->orch_of_entry);
    if (rc == DURO_OK) {
        m->orchs = duro__calloc(count, sizeof(*m->orchs));
        if (m->orchs == NULL)
            rc = DURO_NOMEM;
        for (size_t i = 0; i < count; i++) {
            if (m->orchs != NULL)
                m->orchs[i].label = labels[i];
            else
                duro__free(labels[i]);
        }
        m->orch_count = m->orchs ? count : 0;
        m->orch_unregistered = m->orch_of_entry[reg->orch_count];
        duro__free(labels);
    }
    if (rc == DURO_OK) {
        for (size_t i = 0; i < reg->act_count; i++)
            names[i] = reg->acts[i].name;
        rc = build_labels(names, reg->act_count, &labels, &count,
                          &m->act_of_entry);
    }
    if (rc == DURO_OK) {
        m->acts = duro__calloc(count, sizeof(*m->acts));
        if (m->acts == NULL)
            rc = DURO_NOMEM;
        for (size_t i = 0; i < count; i++) {
            if (m->acts != NULL)
                m->acts[i].label = labels[i];
            else
                duro__free(labels[i]);
        }
        m->act_count = m->acts ? count : 0;
        m->act_unregistered = m->act_of_entry[reg->act_count];
        duro__free(labels);
    }
    duro__free(names);
    if (rc == DURO_OK) {
        char *version = label_value(duro_version());
        char *provider = label_value(provider_name ? provider_name : "");
        if (version != NULL && provider != NULL)
            m->build_labels = duro__sprintf("version=\"%s\",provider=\"%s\"",
                                            version, provider);
        duro__free(version);
        duro__free(provider);
        if (m->build_labels == NULL)
            rc = DURO_NOMEM;
    }
    if (rc != DURO_OK)
        duro__metrics_free(m);
    return rc;
}

void duro__metrics_free(duro__metrics *m)
{
    for (size_t i = 0; m->orchs != NULL && i < m->orch_count; i++)
        duro__free(m->orchs[i].label);
    for (size_t i = 0; m->acts != NULL && i < m->act_count; i++)
        duro__free(m->acts[i].label);
    duro__free(m->orchs);
    duro__free(m->acts);
    duro__free(m->orch_of_entry);
    duro__free(m->act_of_entry);
    duro__free(m->build_labels);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------------
 * measuring points */

static duro__orch_series *orch_series(duro__metrics *m,
                                      const duro__orch_entry *e)
{
    size_t i = m->orch_unregistered;
    if (e != NULL && e >= m->orch_entries &&
        e < m->orch_entries + m->orch_entry_count)
        i = m->orch_of_entry[e - m->orch_entries];
    return &m->orchs[i];
}

static duro__activity_series *act_series(duro__metrics *m,
                                         const duro__activity_entry *e)
{
    size_t i = m->act_unregistered;
    if (e != NULL && e >= m->act_entries &&
        e < m->act_entries + m->act_entry_count)
        i = m->act_of_entry[e - m->act_entries];
    return &m->acts[i];
}

int64_t duro__metrics_turn_begin(void)
{
    return duro__mono_ns();
}

void duro__metrics_turn(duro__metrics *m, const duro__orch_entry *entry,
                        const duro__turn *t, int warm, int64_t begin_ns)
{
    duro__orch_series *s = orch_series(m, entry);
    ADD(s->turns, 1);
    if (t->replayed)
        ADD(s->replays, 1);
    if (warm)
        ADD(m->m_cache_hits, 1);
    switch (t->status) {
    case DURO_STATUS_COMPLETED:
        ADD(s->ends[DURO__END_COMPLETED], 1);
        break;
    case DURO_STATUS_FAILED:
        ADD(s->ends[DURO__END_FAILED], 1);
        break;
    case DURO_STATUS_CANCELLED:
        ADD(s->ends[DURO__END_CANCELLED], 1);
        break;
    case DURO_STATUS_CONTINUED_AS_NEW:
        ADD(s->ends[DURO__END_CONTINUED_AS_NEW], 1);
        break;
    case DURO_STATUS_TERMINATED:
        ADD(s->ends[DURO__END_TERMINATED], 1);
        break;
    default:
        break;
    }
    observe(&m->turn_duration, &turn_buckets, duro__mono_ns() - begin_ns);
}

void duro__metrics_cancel_requests(duro__metrics *m, const char *const *reasons,
                                   size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t k = reason_index(reasons ? reasons[i] : NULL);
        /* a turn never decides these; if one did, it is "other" */
        if (k == REASON_LOCK_LOST || k == REASON_SHUTDOWN ||
            k == REASON_INSTANCE_DELETED)
            k = REASON_OTHER;
        ADD(m->cancel_requests[k], 1);
    }
}

int64_t duro__metrics_activity_begin(duro__metrics *m)
{
    ADD(m->slots_busy, 1);
    return duro__mono_ns();
}

void duro__metrics_activity_end(duro__metrics *m,
                                const duro__activity_entry *entry,
                                int64_t begin_ns, int ran)
{
    ADD(m->slots_busy, -1);
    if (ran)
        observe(&act_series(m, entry)->duration, &act_buckets,
                duro__mono_ns() - begin_ns);
}

void duro__metrics_activity_outcome(duro__metrics *m,
                                    const duro__activity_entry *entry,
                                    int outcome)
{
    ADD(act_series(m, entry)->outcomes[outcome], 1);
}

void duro__metrics_activity_cancelled(duro__metrics *m,
                                      const duro__activity_entry *entry,
                                      const char *reason)
{
    duro__activity_series *s = act_series(m, entry);
    ADD(s->cancellations[reason_index(reason)], 1);
    ADD(s->outcomes[DURO__ACT_CANCELLED], 1);
}

void duro__metrics_activity_abandoned(duro__metrics *m, const char *name,
                                      const char *reason)
{
    const duro__activity_entry *e = NULL;
    for (size_t i = 0; name != NULL && i < m->act_entry_count; i++)
        if (strcmp(m->act_entries[i].name, name) == 0)
            e = &m->act_entries[i];
    duro__activity_series *s = act_series(m, e);
    ADD(s->cancellations[reason_index(reason)], 1);
    ADD(s->outcomes[DURO__ACT_ABANDONED], 1);
    ADD(m->slots_busy, -1);
}

/* ------------------------------------------------------------------------
 * reading */

void duro__metrics_totals(duro__metrics *m, duro_metrics *out)
{
    for (size_t i = 0; i < m->orch_count; i++) {
        duro__orch_series *s = &m->orchs[i];
        out->turns += LOAD(s->turns);
        out->replays += LOAD(s->replays);
        out->orchestrations_completed += LOAD(s->ends[DURO__END_COMPLETED]);
        out->orchestrations_failed += LOAD(s->ends[DURO__END_FAILED]);
        out->orchestrations_cancelled += LOAD(s->ends[DURO__END_CANCELLED]);
        out->orchestrations_terminated += LOAD(s->ends[DURO__END_TERMINATED]);
    }
    for (size_t i = 0; i < m->act_count; i++) {
        duro__activity_series *s = &m->acts[i];
        out->activities_completed += LOAD(s->outcomes[DURO__ACT_COMPLETED]);
        out->activities_failed += LOAD(s->outcomes[DURO__ACT_FAILED]);
        out->activities_cancelled += LOAD(s->outcomes[DURO__ACT_CANCELLED]);
        out->activities_abandoned += LOAD(s->outcomes[DURO__ACT_ABANDONED]);
    }
    for (size_t i = 0; i < DURO__REASON_COUNT; i++)
        out->activities_cancel_requested += LOAD(m->cancel_requests[i]);
    out->fiber_cache_hits = LOAD(m->m_cache_hits);
    out->poison_messages = LOAD(m->m_poison);
    out->lock_renewal_failures = LOAD(m->m_renew_failures);
    out->storage_retries = LOAD(m->m_storage_retries);
    out->nondeterminism_errors = LOAD(m->m_nondeterminism);
    out->activity_acks_given_up = LOAD(m->m_acks_given_up);
    out->turn_acks_given_up = LOAD(m->m_turn_acks_given_up);
    out->schedule_fires = LOAD(m->m_schedule_fires);
    out->schedule_skips = LOAD(m->m_schedule_skips);
    out->schedule_lag_max_ms = (uint64_t)LOAD(m->m_schedule_lag_max_ms);
}

/* Where the text goes: a stream, or a caller's buffer (the text is
 * measured in full either way; the buffer gets what fits). */
typedef struct sink {
    FILE *f;
    char *buf;
    size_t size; /* of buf, with room for the NUL */
    size_t len;  /* bytes of text so far */
    int failed;  /* a write to f failed */
} sink;

static void put(sink *s, const char *p, size_t n)
{
    if (s->f != NULL) {
        if (!s->failed && n > 0 && fwrite(p, 1, n, s->f) != n)
            s->failed = 1;
    } else if (s->len + 1 < s->size) {
        size_t room = s->size - 1 - s->len;
        memcpy(s->buf + s->len, p, n < room ? n : room);
    }
    s->len += n;
}

static void puts_(sink *s, const char *str)
{
    put(s, str, strlen(str));
}

/* Decimal digits, without printf: no locale can change them. */
static void put_u64(sink *s, uint64_t v)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(s, d + i, sizeof(d) - i);
}

/* Nanoseconds as seconds with nine decimals ("0.001500000"). */
static void put_seconds(sink *s, uint64_t ns)
{
    put_u64(s, ns / 1000000000u);
    char frac[10];
    uint64_t f = ns % 1000000000u;
    frac[0] = '.';
    for (int i = 9; i >= 1; i--) {
        frac[i] = (char)('0' + f % 10);
        f /= 10;
    }
    put(s, frac, sizeof(frac));
}

/* "# HELP" and "# TYPE" of a family. The HELP texts are ours and hold no
 * backslash or newline, so they need no escaping. */
static void family(sink *s, const char *name, const char *type,
                   const char *help)
{
    puts_(s, "# HELP ");
    puts_(s, name);
    puts_(s, " ");
    puts_(s, help);
    puts_(s, "\n# TYPE ");
    puts_(s, name);
    puts_(s, " ");
    puts_(s, type);
    puts_(s, "\n");
}

/* A label; the value is already escaped (label_value). */
typedef struct label {
    const char *key, *value;
} label;

/* "name[suffix]{k="v",...} ": the caller writes the value and the newline.
 * Labels with a NULL key are skipped. */
static void sample_start(sink *s, const char *name, const char *suffix,
                         const label *labels, size_t n)
{
    puts_(s, name);
    if (suffix != NULL)
        puts_(s, suffix);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (labels[i].key == NULL)
            continue;
        puts_(s, first ? "{" : ",");
        first = 0;
        puts_(s, labels[i].key);
        puts_(s, "=\"");
        puts_(s, labels[i].value);
        puts_(s, "\"");
    }
    puts_(s, first ? " " : "} ");
}

static void sample(sink *s, const char *name, const label *labels, size_t n,
                   uint64_t v)
{
    sample_start(s, name, NULL, labels, n);
    put_u64(s, v);
    puts_(s, "\n");
}

/* A gauge of milliseconds, written in seconds ("1.234"). */
static void sample_seconds(sink *s, const char *name, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    char text[40];
    snprintf(text, sizeof(text), "%lld.%03lld", (long long)(ms / 1000),
             (long long)(ms % 1000));
    sample_start(s, name, NULL, NULL, 0);
    puts_(s, text);
    puts_(s, "\n");
}

/* The samples of one histogram series: cumulative buckets in increasing
 * `le`, +Inf equal to _count (both from the same reads of the bucket
 * counts), _sum in seconds, _count. `key`/`value`: its one label, or a
 * NULL key for none. */
static void histogram(sink *s, const char *name, const char *key,
                      const char *value, duro__histogram *h, const buckets *b)
{
    uint64_t counts[DURO__HIST_MAX_BUCKETS + 1];
    for (size_t i = 0; i <= b->count; i++)
        counts[i] = LOAD(h->counts[i]);
    uint64_t sum_ns = LOAD(h->sum_ns);
    uint64_t total = 0;
    for (size_t i = 0; i <= b->count; i++) {
        total += counts[i];
        label l[2] = {{key, value},
                      {"le", i < b->count ? b->labels[i] : "+Inf"}};
        sample_start(s, name, "_bucket", l, 2);
        put_u64(s, total);
        puts_(s, "\n");
    }
    label l = {key, value};
    sample_start(s, name, "_sum", &l, 1);
    put_seconds(s, sum_ns);
    puts_(s, "\n");
    sample_start(s, name, "_count", &l, 1);
    put_u64(s, total);
    puts_(s, "\n");
}

/* The families, in a fixed order, each one contiguous. Cancel requests by
 * outcome (duro_cancel_requests_total{outcome}) belong to the client's
 * bulk cancel: a client has no runtime, so they are counted and written on
 * the client side; a family the runtime counts is one more block here. */
static void write_all(duro__metrics *m, sink *s)
{
    const char *name;

    name = "duro_build_info";
    family(s, name, "gauge",
           "Always 1; the duro library version and the store's provider.");
    puts_(s, name);
    puts_(s, "{");
    puts_(s, m->build_labels);
    puts_(s, "} 1\n");

    name = "duro_orchestration_turns_total";
    family(s, name, "counter",
           "Committed orchestration turns, by orchestration name.");
    for (size_t i = 0; i < m->orch_count; i++) {
        label l = {"orchestration", m->orchs[i].label};
        sample(s, name, &l, 1, LOAD(m->orchs[i].turns));
    }

    name = "duro_orchestration_replays_total";
    family(s, name, "counter",
           "Committed turns that replayed history through the code (no "
           "kept fiber), by orchestration name.");
    for (size_t i = 0; i < m->orch_count; i++) {
        label l = {"orchestration", m->orchs[i].label};
        sample(s, name, &l, 1, LOAD(m->orchs[i].replays));
    }

    name = "duro_orchestration_completions_total";
    family(s, name, "counter",
           "Executions ended by this runtime's turns, by orchestration name "
           "and how they ended.");
    for (size_t i = 0; i < m->orch_count; i++) {
        for (size_t k = 0; k < DURO__END_COUNT; k++) {
            label l[2] = {{"orchestration", m->orchs[i].label},
                          {"status", end_names[k]}};
            sample(s, name, l, 2, LOAD(m->orchs[i].ends[k]));
        }
    }

    name = "duro_orchestration_turn_duration_seconds";
    family(s, name, "histogram",
           "Time of a committed turn, from taking its engine to the end of "
           "its commit.");
    histogram(s, name, NULL, NULL, &m->turn_duration, &turn_buckets);

    name = "duro_fiber_cache_hits_total";
    family(s, name, "counter",
           "Committed turns that resumed a kept orchestration fiber instead "
           "of replaying.");
    sample(s, name, NULL, 0, LOAD(m->m_cache_hits));

    name = "duro_nondeterminism_errors_total";
    family(s, name, "counter",
           "Executions failed because the code did not replay its history.");
    sample(s, name, NULL, 0, LOAD(m->m_nondeterminism));

    name = "duro_poison_messages_total";
    family(s, name, "counter",
           "Batches and activities failed after max_attempts deliveries.");
    sample(s, name, NULL, 0, LOAD(m->m_poison));

    name = "duro_activity_executions_total";
    family(s, name, "counter",
           "Activity runs that ended, by activity name and outcome "
           "(abandoned: cancelled and not returned in time).");
    for (size_t i = 0; i < m->act_count; i++) {
        for (size_t k = 0; k < DURO__ACT_COUNT; k++) {
            label l[2] = {{"activity", m->acts[i].label},
                          {"outcome", outcome_names[k]}};
            sample(s, name, l, 2, LOAD(m->acts[i].outcomes[k]));
        }
    }

    name = "duro_activity_cancellations_total";
    family(s, name, "counter",
           "Activity runs that ended cancelled or abandoned, by activity "
           "name and the cancellation's reason.");
    for (size_t i = 0; i < m->act_count; i++) {
        for (size_t k = 0; k < DURO__REASON_COUNT; k++) {
            label l[2] = {{"activity", m->acts[i].label},
                          {"reason", reason_names[k]}};
            sample(s, name, l, 2, LOAD(m->acts[i].cancellations[k]));
        }
    }

    name = "duro_activity_cancel_requests_total";
    family(s, name, "counter",
           "Activities this runtime's turns cancelled, by the decision's "
           "reason.");
    for (size_t k = 0; k < DURO__REASON_COUNT; k++) {
        if (k == REASON_LOCK_LOST || k == REASON_SHUTDOWN ||
            k == REASON_INSTANCE_DELETED)
            continue;
        label l = {"reason", reason_names[k]};
        sample(s, name, &l, 1, LOAD(m->cancel_requests[k]));
    }

    name = "duro_activity_duration_seconds";
    family(s, name, "histogram",
           "Time an activity function ran, by activity name.");
    for (size_t i = 0; i < m->act_count; i++)
        histogram(s, name, "activity", m->acts[i].label, &m->acts[i].duration,
                  &act_buckets);

    name = "duro_activity_slots_busy";
    family(s, name, "gauge", "Worker slots running an activity now.");
    int64_t busy = LOAD(m->slots_busy);
    sample(s, name, NULL, 0, busy > 0 ? (uint64_t)busy : 0);

    name = "duro_activity_slots_max";
    family(s, name, "gauge", "Worker slots (worker_concurrency).");
    sample(s, name, NULL, 0, (uint64_t)m->slots_max);

    name = "duro_lock_renewal_failures_total";
    family(s, name, "counter",
           "Activity lock renewals that found the row gone or taken.");
    sample(s, name, NULL, 0, LOAD(m->m_renew_failures));

    name = "duro_storage_retries_total";
    family(s, name, "counter", "Retryable storage errors.");
    sample(s, name, NULL, 0, LOAD(m->m_storage_retries));

    name = "duro_activity_acks_given_up_total";
    family(s, name, "counter",
           "Activity results not recorded: the store kept failing until the "
           "lock's deadline or a shutdown's; the activity runs again.");
    sample(s, name, NULL, 0, LOAD(m->m_acks_given_up));

    name = "duro_turn_acks_given_up_total";
    family(s, name, "counter",
           "Turns not committed: the store kept failing until the instance "
           "lock's deadline or a shutdown's; the turn runs again.");
    sample(s, name, NULL, 0, LOAD(m->m_turn_acks_given_up));

    name = "duro_schedule_fires_total";
    family(s, name, "counter",
           "Instances this runtime started for schedules' fires.");
    sample(s, name, NULL, 0, LOAD(m->m_schedule_fires));

    name = "duro_schedule_skips_total";
    family(s, name, "counter",
           "Schedule fires this runtime skipped (overlap, missed beyond the "
           "catch-up window).");
    sample(s, name, NULL, 0, LOAD(m->m_schedule_skips));

    name = "duro_schedule_lag_max_seconds";
    family(s, name, "gauge",
           "The latest a schedule's fire started after its due time.");
    sample_seconds(s, name, LOAD(m->m_schedule_lag_max_ms));

    name = "duro_schedule_lag_last_seconds";
    family(s, name, "gauge",
           "How late the last fire this runtime started was.");
    sample_seconds(s, name, LOAD(m->m_schedule_lag_last_ms));
}

int duro__metrics_expose(duro__metrics *m, FILE *f, char *buf, size_t size,
                         size_t *len)
{
    sink s = {.f = f, .buf = buf, .size = size};
    write_all(m, &s);
    if (f == NULL && size > 0)
        buf[s.len < size ? s.len : size - 1] = '\0';
    if (len != NULL)
        *len = s.len;
    if (f != NULL && (s.failed || fflush(f) != 0))
        return DURO_ERROR;
    return DURO_OK;
}
