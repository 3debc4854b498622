/* rt_util.h - fixture for end-to-end runtime tests: a runtime and a client on
 * a fresh SQLite file, with test-friendly options (short lock timeouts and
 * poll interval), and helpers that wait on conditions with deadlines. */
#ifndef DURO_RT_UTIL_H
#define DURO_RT_UTIL_H

#include <stdatomic.h>

#include "test.h"

typedef struct rt_fixture {
    const char *url;
    duro_registry *reg;
    duro_runtime *rt;
    duro_client *client;
    duro_runtime_options opts;
} rt_fixture;

/* Options used by rt_start: small lock timeouts and renewal interval so
 * recovery paths run quickly, warnings only. */
void rt_default_options(duro_runtime_options *o);

/* Creates the registry and the options; register, adjust f->opts, then
 * rt_start(). `db` names the SQLite file inside the test directory. */
void rt_init(rt_fixture *f, const char *db);
/* Creates and starts the runtime and the client. */
void rt_start(rt_fixture *f);
/* Shuts down and destroys the runtime only (the store stays). */
void rt_stop(rt_fixture *f);
/* Everything, including the registry. */
void rt_done(rt_fixture *f);

/* Starts an instance (fails the test on error). */
void rt_start_instance(rt_fixture *f, const char *id, const char *orch,
                       const char *input);
/* Waits for a terminal status; fails the test on timeout. Caller frees. */
duro_instance_info *rt_wait(rt_fixture *f, const char *id, int64_t timeout_ms);
/* Status (DURO_STATUS_*) right now. */
int rt_status(rt_fixture *f, const char *id);
/* Waits until the instance has the given status. */
void rt_wait_status(rt_fixture *f, const char *id, int status,
                    int64_t timeout_ms);
/* Number of events of `kind` in the current execution's history. */
int rt_count_events(rt_fixture *f, const char *id, int kind);
/* Reads the history (current execution); caller frees. */
duro_history *rt_history(rt_fixture *f, const char *id);

/* The runtime's counters once they are final: shuts the runtime down (its
 * threads update counters just after the commits a test can observe), then
 * reads them. The runtime may not be used afterwards except by rt_done. */
void rt_final_metrics(rt_fixture *f, duro_metrics *m);

/* The nth event of `kind` in h (0 = first), NULL if none. */
const duro_event *rt_find_event(const duro_history *h, int kind, int nth);
/* Events of `kind` in h. */
int rt_count_kind(const duro_history *h, int kind);

/* A log sink (duro_runtime_options.log_fn) that keeps every line, and how
 * many kept lines contain `needle`; rt_log_reset forgets them. */
void rt_log_sink(void *user, int level, const char *message);
int rt_log_hits(const char *needle);
/* The lines of one level (a DURO_LOG_* value) that hold needle. */
int rt_log_hits_at(int level, const char *needle);
void rt_log_reset(void);

#endif
