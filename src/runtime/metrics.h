/* metrics.h - the runtime's counters and histograms, and their Prometheus
 * text exposition (metrics.c). The tables of per-name series are built once
 * from the runtime's registry copy when the runtime is created and never
 * change; every update is a relaxed atomic add, without a lock or an
 * allocation, and may come from any thread of the runtime. */
#ifndef DURO_RUNTIME_METRICS_H
#define DURO_RUNTIME_METRICS_H

#include <stdatomic.h>
#include <stdio.h>

#include "core/core.h"

struct duro__orch_entry;
struct duro__activity_entry;

/* A histogram: one atomic count per bucket (not cumulative; cumulated when
 * written, so the +Inf bucket always equals _count) and the sum in
 * nanoseconds. The bounds are fixed per family (metrics.c). */
#define DURO__HIST_MAX_BUCKETS 16
typedef struct duro__histogram {
    _Atomic uint64_t counts[DURO__HIST_MAX_BUCKETS + 1]; /* last: +Inf */
    _Atomic uint64_t sum_ns;
} duro__histogram;

/* How an orchestration execution ended (label status), and how an activity
 * run ended (label outcome). */
enum {
    DURO__END_COMPLETED,
    DURO__END_FAILED,
    DURO__END_CANCELLED,
    DURO__END_CONTINUED_AS_NEW,
    DURO__END_TERMINATED,
    DURO__END_COUNT
};
enum {
    DURO__ACT_COMPLETED,
    DURO__ACT_FAILED,
    DURO__ACT_CANCELLED,
    DURO__ACT_ABANDONED,
    DURO__ACT_COUNT
};
/* The fixed set of cancellation reasons (label reason): the DURO_REASON_*
 * strings, lock_lost, shutdown, instance_deleted, and other for any other
 * string. */
#define DURO__REASON_COUNT 12

typedef struct duro__orch_series {
    char *label; /* the label value, escaped, valid UTF-8 */
    _Atomic uint64_t turns, replays;
    _Atomic uint64_t ends[DURO__END_COUNT];
} duro__orch_series;

typedef struct duro__activity_series {
    char *label;
    _Atomic uint64_t outcomes[DURO__ACT_COUNT];
    _Atomic uint64_t cancellations[DURO__REASON_COUNT];
    duro__histogram duration;
} duro__activity_series;

/* Embedded in struct duro_runtime. The m_* counters are runtime-wide and
 * counted with DURO__COUNT (runtime.h). */
typedef struct duro__metrics {
    /* One series per distinct label value, sorted by it, including
     * "(unregistered)" (its index in *_unregistered), where a turn or an
     * activity without a registry entry counts. *_of_entry maps the index
     * of a registry entry (entry - registry->orchs) to its series. */
    duro__orch_series *orchs;
    size_t orch_count, orch_unregistered;
    uint32_t *orch_of_entry;
    const struct duro__orch_entry *orch_entries;
    size_t orch_entry_count;
    duro__activity_series *acts;
    size_t act_count, act_unregistered;
    uint32_t *act_of_entry;
    const struct duro__activity_entry *act_entries;
    size_t act_entry_count;

    duro__histogram turn_duration;
    _Atomic uint64_t cancel_requests[DURO__REASON_COUNT];
    _Atomic int64_t slots_busy;
    int slots_max;
    char *build_labels; /* version="...",provider="..." */

    _Atomic uint64_t m_cache_hits, m_poison, m_renew_failures,
        m_storage_retries, m_nondeterminism;
    /* activity completions and turns whose ack was given up: the store
     * kept failing until the lock's deadline (duro__lock_deadline) or a
     * shutdown's; they run again */
    _Atomic uint64_t m_acks_given_up, m_turn_acks_given_up;
    /* schedules (schedule_firing.c): instances started and fires skipped by
     * this runtime's plans, and how late a fire started after its due time (the
     * largest, and the last) */
    _Atomic uint64_t m_schedule_fires, m_schedule_skips;
    _Atomic int64_t m_schedule_lag_max_ms, m_schedule_lag_last_ms;
} duro__metrics;

/* Builds the tables from the runtime's registry copy (which must outlive
 * them and never change). DURO_NOMEM. */
int duro__metrics_init(duro__metrics *m, const duro_registry *reg,
                       const char *provider_name, int slots_max);
void duro__metrics_free(duro__metrics *m);

/* ---- measuring points (no lock, no allocation) -------------------------- */

/* A monotonic timestamp to pass to duro__metrics_turn. */
int64_t duro__metrics_turn_begin(void);
/* After a turn committed: its orchestration (NULL: not registered), what it
 * did (replayed, how the execution ended), whether it resumed a kept
 * engine, and the time since begin_ns. */
void duro__metrics_turn(duro__metrics *m, const struct duro__orch_entry *entry,
                        const duro__turn *t, int warm, int64_t begin_ns);
/* After a turn committed the cancellation of `count` activities, with
 * their reasons (NULL: unknown). */
void duro__metrics_cancel_requests(duro__metrics *m, const char *const *reasons,
                                   size_t count);

/* A slot begins an activity (before it can be abandoned); returns a
 * monotonic timestamp for duro__metrics_activity_end. */
int64_t duro__metrics_activity_begin(duro__metrics *m);
/* The slot's thread is done with the activity (it was not abandoned);
 * `ran`: the function ran, and its time since begin_ns is observed. */
void duro__metrics_activity_end(duro__metrics *m,
                                const struct duro__activity_entry *entry,
                                int64_t begin_ns, int ran);
/* An activity run ended DURO__ACT_COMPLETED or DURO__ACT_FAILED (entry
 * NULL: not registered). */
void duro__metrics_activity_outcome(duro__metrics *m,
                                    const struct duro__activity_entry *entry,
                                    int outcome);
/* An activity run ended cancelled, for `reason` (NULL: other). */
void duro__metrics_activity_cancelled(duro__metrics *m,
                                      const struct duro__activity_entry *entry,
                                      const char *reason);
/* The runtime gave up on a cancelled activity that did not return (past its
 * grace period, or at shutdown) and freed its slot. Finds the series by
 * name: a rare path. */
void duro__metrics_activity_abandoned(duro__metrics *m, const char *name,
                                      const char *reason);

/* ---- reading ----------------------------------------------------------- */

/* The duro_metrics view (duro_runtime_metrics): sums over the series. */
void duro__metrics_totals(duro__metrics *m, duro_metrics *out);

/* Writes the exposition to f, or into buf (snprintf-style: at most size
 * bytes with the NUL; *len gets the full length). Returns DURO_OK, or
 * DURO_ERROR when writing to f failed. */
int duro__metrics_expose(duro__metrics *m, FILE *f, char *buf, size_t size,
                         size_t *len);

#endif
