/* schedule_plan.h - the schedule planner: a schedule's fire times (a cron
 * expression in a zone, or a fixed interval, between its start and end
 * times), their jitter, and what is due at a moment - which fires start an
 * instance, which are skipped and why, which is buffered, when the last
 * instance is stopped - under the schedule's overlap policy and catch-up
 * window. Pure: the caller reads the schedule's state from the store, plans,
 * and writes the plan and the state after it in one transaction, so every
 * runtime that plans the same state plans the same fires. Any thread. */
#ifndef DURO_CORE_SCHEDULE_PLAN_H
#define DURO_CORE_SCHEDULE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/cron.h"
#include "base/tz.h"

/* What a fire does while the instance of the last one still runs. Values
 * are stored: append only. */
enum {
    DURO__OVERLAP_SKIP = 0,         /* skip it */
    DURO__OVERLAP_BUFFER_ONE = 1,   /* start it when the last ends; one at most
                                      waits, later ones are skipped */
    DURO__OVERLAP_ALLOW_ALL = 2,    /* start it anyway */
    DURO__OVERLAP_CANCEL_OTHER = 3, /* cancel the last, start it */
    DURO__OVERLAP_TERMINATE_OTHER = 4 /* terminate the last, start it */
};

typedef struct duro__schedule_rule {
    const char *id;         /* the schedule's id: its fires' jitter */
    const duro__cron *cron; /* NULL: every interval_ms */
    const duro__tz *zone;   /* the cron expression's zone */
    int64_t interval_ms;    /* > 0 without cron: fires at offset_ms +
                               k * interval_ms since the epoch */
    int64_t offset_ms;      /* 0 .. interval_ms - 1 */
    int64_t start_ms;       /* no fire before it; 0: none */
    int64_t end_ms;         /* no fire at or after it; 0: none */
    int64_t catchup_ms;     /* a fire due longer ago than this is missed
                               (downtime), not made */
    int64_t jitter_ms;      /* a fire is due up to this much after its
                               time (0 .. jitter_ms, the same in every
                               runtime: a hash of id and time) */
    int overlap;            /* DURO__OVERLAP_* */
} duro__schedule_rule;

/* The schedule's state between plans, as the store keeps it. */
typedef struct duro__schedule_state {
    int64_t next_ms;     /* the time of the first fire not yet decided;
                            0: no more fires (past end_ms) */
    int64_t buffered_ms; /* the time of a buffered fire; 0: none */
    int last_live;       /* the instance of the last fire started has not
                            ended (Pending, Running or Suspended) */
} duro__schedule_state;

enum {
    DURO__FIRE_START = 1,    /* start the instance of the fire at time_ms */
    DURO__FIRE_SKIP = 2,     /* count missed fires, the first at time_ms */
    DURO__FIRE_BUFFER = 3,   /* keep the fire at time_ms for later */
    DURO__FIRE_STOP_LAST = 4 /* cancel or terminate (by the overlap
                                policy) the last fire's instance, before
                                the START that follows */
};

typedef struct duro__fire_action {
    int kind;
    int64_t time_ms; /* the fire's time (not its jittered due time) */
    int64_t count;   /* SKIP: fires skipped (>= 1; -1: more than the
                        planner counts, DURO__SCHEDULE_COUNT_MAX) */
    const char *why; /* SKIP: static text */
} duro__fire_action;

#define DURO__SCHEDULE_COUNT_MAX 100000

/* The first fire time strictly after `after_ms`, within start and end:
 * DURO_OK with *next_ms; DURO_NOT_FOUND when there is none. */
int duro__schedule_next(const duro__schedule_rule *r, int64_t after_ms,
                        int64_t *next_ms);

/* How long after its time the fire at time_ms is due: 0 .. jitter_ms. */
int64_t duro__schedule_jitter(const duro__schedule_rule *r, int64_t time_ms);

/* What is due at now_ms for a schedule in state *s: at most max actions
 * into out[] (returns how many), and the state after them into *after
 * (the next plan goes on from there: a caller that got max actions plans
 * again). Fires are decided in time order; each is due at its time plus
 * its jitter, and missed when due longer than catchup_ms before now_ms. */
size_t duro__schedule_plan(const duro__schedule_rule *r,
                           const duro__schedule_state *s, int64_t now_ms,
                           duro__fire_action *out, size_t max,
                           duro__schedule_state *after);

#endif
