/* crash_workload.h - the deterministic workloads of the crash-recovery test,
 * shared by crash_worker (which runs them) and test_crash (which computes
 * what they must produce): instance groups, the string transform every
 * activity applies, and each kind's expected output and history shape.
 * Header-only (static inline) so each program compiles its own copy. */
#ifndef DURO_CRASH_WORKLOAD_H
#define DURO_CRASH_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CRASH_STR_MAX 256

typedef enum crash_kind {
    CRASH_CHAIN,    /* 10 sequential Step activities */
    CRASH_FANOUT,   /* 20 Step activities joined */
    CRASH_TIMERS,   /* 5 x (a 50..150 ms timer, then a Step) */
    CRASH_PARENT,   /* child orchestration (3 Steps), then a Step */
    CRASH_CHILD,    /* the child of CRASH_PARENT: 3 Steps */
    CRASH_RETRY,    /* Flaky under a retry policy: attempt 1 fails */
    CRASH_EVENT,    /* waits for external event "go", then a Step */
    CRASH_CONTINUE, /* 5 executions chained by continue-as-new, 1 Step each */
    CRASH_HEAVY,    /* 6 Slow activities joined, then 3 Slow in sequence */
    CRASH_HOLD,     /* one Hold activity: its first delivery blocks until
                       cancelled (its process is killed under it), a later
                       one is a Step */
    CRASH_SHORT,    /* 5 sequential Step activities */
    CRASH_LINGER    /* 2 Steps, then a timer of an hour, then a Step: it ends
                       only when cancelled (the test cancels it), and is
                       checked Cancelled */
} crash_kind;

#define CRASH_CHAIN_STEPS 10
#define CRASH_FANOUT_WIDTH 20
#define CRASH_TIMER_ROUNDS 5
#define CRASH_CHILD_STEPS 3
#define CRASH_CONTINUE_EXECUTIONS 5
#define CRASH_HEAVY_WIDTH 6
#define CRASH_HEAVY_DEPTH 3
#define CRASH_RETRY_DELAY_MS 30
#define CRASH_SHORT_STEPS 5
#define CRASH_LINGER_STEPS 2 /* before its timer */
#define CRASH_LINGER_TIMER_MS 3600000

typedef struct crash_group {
    const char *prefix; /* instance ids are "<prefix>-<k>" */
    const char *orchestration;
    int count;
    crash_kind kind;
} crash_group;

/* "mixed": 30 instances over every turn kind (plus 4 children). */
static const crash_group crash_mixed[] = {
    {"chain", "Chain", 5, CRASH_CHAIN},
    {"fan", "Fanout", 5, CRASH_FANOUT},
    {"timers", "Timers", 4, CRASH_TIMERS},
    {"parent", "Parent", 4, CRASH_PARENT},
    {"retry", "Retry", 4, CRASH_RETRY},
    {"event", "Event", 4, CRASH_EVENT},
    {"can", "Continue", 4, CRASH_CONTINUE},
};

/* "heavy": activities of 50..200 ms each, 12 x 9 of them. */
static const crash_group crash_heavy[] = {
    {"heavy", "Heavy", 12, CRASH_HEAVY},
};

#define CRASH_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* "many": 300 instances for three processes sharing one store, one of
 * them killed while it runs the one Hold activity. */
static const crash_group crash_many[] = {
    {"mchain", "Chain", 100, CRASH_CHAIN},
    {"mfan", "Fanout", 40, CRASH_FANOUT},
    {"mtimers", "Timers", 60, CRASH_TIMERS},
    {"mretry", "Retry", 40, CRASH_RETRY},
    {"mheavy", "Heavy", 59, CRASH_HEAVY},
    {"mhold", "Hold", 1, CRASH_HOLD},
};

/* "chaos": 300 instances for two processes while test_pg_chaos kills the
 * server's backends, restarts and stops the server; it cancels the Linger
 * ones (10 %), which end only so. */
static const crash_group crash_chaos[] = {
    {"xshort", "Short", 270, CRASH_SHORT},
    {"xlinger", "Linger", 30, CRASH_LINGER},
};

/* What one execution's history must hold. */
typedef struct crash_shape {
    int executions; /* of the instance; all but the last continue as new */
    int activities; /* ActivityScheduled per execution */
    int timers;     /* TimerCreated per execution */
    int failures;   /* ActivityFailed per execution */
    int children;   /* SubOrchestrationScheduled per execution */
    int events;     /* 1: at least one EventRaised */
    int cancelled;  /* 1: ends Cancelled, at any point: activities and
                       timers are at most those above, each completed at
                       most once, an activity never completed has its
                       ActivityCancelRequested */
} crash_shape;

static inline crash_shape crash_shape_of(crash_kind k)
{
    crash_shape s = {1, 0, 0, 0, 0, 0, 0};
    switch (k) {
    case CRASH_CHAIN:
        s.activities = CRASH_CHAIN_STEPS;
        break;
    case CRASH_FANOUT:
        s.activities = CRASH_FANOUT_WIDTH;
        break;
    case CRASH_TIMERS:
        s.activities = CRASH_TIMER_ROUNDS;
        s.timers = CRASH_TIMER_ROUNDS;
        break;
    case CRASH_PARENT:
        s.activities = 1;
        s.children = 1;
        break;
    case CRASH_CHILD:
        s.activities = CRASH_CHILD_STEPS;
        break;
    case CRASH_RETRY:
        s.activities = 2; /* attempt 1 (fails) and attempt 2 */
        s.timers = 1;     /* the backoff between them */
        s.failures = 1;
        break;
    case CRASH_EVENT:
        s.activities = 1;
        s.events = 1;
        break;
    case CRASH_CONTINUE:
        s.executions = CRASH_CONTINUE_EXECUTIONS;
        s.activities = 1;
        break;
    case CRASH_HEAVY:
        s.activities = CRASH_HEAVY_WIDTH + CRASH_HEAVY_DEPTH;
        break;
    case CRASH_HOLD:
        s.activities = 1;
        break;
    case CRASH_SHORT:
        s.activities = CRASH_SHORT_STEPS;
        break;
    case CRASH_LINGER:
        s.activities = CRASH_LINGER_STEPS;
        s.timers = 1;
        s.cancelled = 1;
        break;
    }
    return s;
}

static inline uint32_t crash_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The transform of every activity: appends one letter chosen by the hash of
 * the input, so a lost, repeated or reordered step changes the result. */
static inline void crash_step(const char *in, char *out, size_t cap)
{
    size_t len = strlen(in);
    if (cap < 2)
        return;
    if (len > cap - 2)
        len = cap - 2; /* never with this workload: strings stay short */
    char letter = (char)('a' + (int)(crash_hash(in) % 26));
    memmove(out, in, len);
    out[len] = letter;
    out[len + 1] = '\0';
}

/* How long a Step or Flaky activity works on `in`: 30..130 ms, so that the
 * mixed workload runs for a few seconds and the kills land all over it. */
static inline int64_t crash_pace_ms(const char *in)
{
    return 30 + (int64_t)((crash_hash(in) >> 8) % 101);
}

/* How long a Slow activity works on `in`: 50..200 ms. */
static inline int64_t crash_slow_ms(const char *in)
{
    return 50 + (int64_t)(crash_hash(in) % 151);
}

static inline void crash_steps(const char *in, int n, char *out, size_t cap)
{
    char buf[CRASH_STR_MAX];
    snprintf(buf, sizeof(buf), "%s", in);
    for (int i = 0; i < n; i++) {
        char next[CRASH_STR_MAX];
        crash_step(buf, next, sizeof(next));
        memcpy(buf, next, sizeof(buf));
    }
    snprintf(out, cap, "%s", buf);
}

/* The input of Fanout's i-th activity, of Heavy's i-th, of Event's. */
static inline void crash_item_input(const char *id, int i, char *out,
                                    size_t cap)
{
    snprintf(out, cap, "%s/%d", id, i);
}

static inline void crash_event_payload(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "go-%s", id);
}

/* Output a completed instance of kind `k` and id `id` (its input) must
 * have. */
static inline void crash_expected(crash_kind k, const char *id, char *out,
                                  size_t cap)
{
    char buf[CRASH_STR_MAX], tmp[CRASH_STR_MAX];
    int width = k == CRASH_FANOUT ? CRASH_FANOUT_WIDTH : CRASH_HEAVY_WIDTH;
    switch (k) {
    case CRASH_CHAIN:
        crash_steps(id, CRASH_CHAIN_STEPS, out, cap);
        break;
    case CRASH_SHORT:
        crash_steps(id, CRASH_SHORT_STEPS, out, cap);
        break;
    case CRASH_LINGER: /* cancelled: no output */
        snprintf(out, cap, "%s", "");
        break;
    case CRASH_TIMERS:
        crash_steps(id, CRASH_TIMER_ROUNDS, out, cap);
        break;
    case CRASH_PARENT:
        crash_steps(id, CRASH_CHILD_STEPS + 1, out, cap);
        break;
    case CRASH_CHILD:
        crash_steps(id, CRASH_CHILD_STEPS, out, cap);
        break;
    case CRASH_RETRY:
    case CRASH_HOLD:
        crash_steps(id, 1, out, cap);
        break;
    case CRASH_EVENT:
        crash_event_payload(id, buf, sizeof(buf));
        crash_steps(buf, 1, out, cap);
        break;
    case CRASH_CONTINUE:
        crash_steps(id, CRASH_CONTINUE_EXECUTIONS, out, cap);
        break;
    case CRASH_FANOUT:
    case CRASH_HEAVY: {
        /* the last letter of each joined result, in order */
        char letters[CRASH_FANOUT_WIDTH + 1];
        for (int i = 0; i < width; i++) {
            crash_item_input(id, i, tmp, sizeof(tmp));
            crash_step(tmp, buf, sizeof(buf));
            letters[i] = buf[strlen(buf) - 1];
        }
        letters[width] = '\0';
        if (k == CRASH_FANOUT) {
            snprintf(out, cap, "%s", letters);
        } else {
            snprintf(buf, sizeof(buf), "%s:%s", id, letters);
            crash_steps(buf, CRASH_HEAVY_DEPTH, out, cap);
        }
        break;
    }
    }
}

#endif
