/* crash_util.h - what the crash-recovery tests share (test_crash on SQLite
 * files, test_pg_crash on a PostgreSQL schema): crash_worker processes, the
 * checks of a finished workload against its store and side-effect log, and
 * the three-process scenario. Main test thread only: a failed check ends
 * the test. */
#ifndef DURO_CRASH_UTIL_H
#define DURO_CRASH_UTIL_H

#include <sys/types.h>

#include "crash_workload.h"
#include "test.h"

#define CRASH_WORKERS 3 /* processes of the scenario */
/* Deadlines of the scenario: until a worker starts the Hold activity, and
 * until every worker has exited (longer than crash_worker's own deadline,
 * so that a worker that times out says so itself). */
#define CRASH_HOLD_DEADLINE_MS 60000
#define CRASH_WORKERS_DEADLINE_MS 150000

typedef struct crash_run {
    const char *url;    /* the store, crash_worker's first argument */
    const char *log;    /* side-effect log */
    const char *errlog; /* the workers' stderr, appended */
    const char *workload;
} crash_run;

/* Starts crash_worker on r's store, log and workload, its stderr appended
 * to r->errlog. Returns its pid, or -1 when fork failed. */
pid_t crash_spawn_worker(const crash_run *r);

/* Polls for the child's exit until deadline_ms (monotonic, test clock).
 * Returns 1 with *status filled when it exited, 0 on timeout. */
int crash_wait_child(pid_t pid, int64_t deadline_ms, int *status);

/* SIGKILLs the child and reaps it. */
void crash_kill_and_reap(pid_t pid);

/* Copies the first 200 lines of a file to stderr, under a title. */
void crash_print_file(const char *path, const char *title);

/* Lines in the file at path (the activity runs a side-effect log holds so
 * far); 0 when it cannot be opened. */
long crash_log_lines(const char *path);

/* Checks the store of a finished run of `groups` through a client on
 * r->url: every instance Completed with its expected output (a Linger one
 * Cancelled), every execution's history exactly-once (ids without gaps or
 * duplicates, each scheduling completed once - in a cancelled instance at
 * most once, else cancelled - the shape the workload implies), no other
 * instance, empty queues; and through r->log that every scheduled activity
 * ran at least once (unless cancelled first) and nothing else ran. */
void crash_check_all(const crash_run *r, const crash_group *groups,
                     size_t ngroups);

/* Three crash_worker processes share the store `url` and the 300
 * orchestrations of the "many" workload; the one running the Hold activity
 * (which only a re-delivery can finish) is SIGKILLed in the middle of it
 * and started again. Every worker must exit 0 (every instance terminal),
 * the Hold activity must have been re-delivered to another process once its
 * lock expired, and crash_check_all must pass. */
void crash_three_processes_one_killed(const char *url, const char *log,
                                      const char *errlog);

#endif
