/* powerloss_workload.h - the workload of the power-loss test, shared by
 * powerloss_worker (which runs it) and test_powerloss (which computes what
 * it must produce): the instances, the string transform of the one
 * activity, and each instance's expected output. Header-only. */
#ifndef DURO_POWERLOSS_WORKLOAD_H
#define DURO_POWERLOSS_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PL_STR_MAX 128
#define PL_CHAIN_STEPS 3
#define PL_FAN_WIDTH 3
#define PL_TIMER_MS 5
#define PL_EVENT_NAME "go"

typedef enum pl_kind {
    PL_CHAIN,  /* PL_CHAIN_STEPS sequential Steps */
    PL_FAN,    /* PL_FAN_WIDTH Steps in parallel, joined */
    PL_TIMER,  /* a timer, then a Step */
    PL_EVENT,  /* waits for external event "go", then a Step */
    PL_PARENT, /* a child orchestration (one Step), then a Step */
} pl_kind;

typedef struct pl_instance {
    const char *id; /* also its input */
    const char *orchestration;
    pl_kind kind;
} pl_instance;

static const pl_instance pl_instances[] = {
    {"chain-0", "Chain", PL_CHAIN}, {"fan-0", "Fan", PL_FAN},
    {"chain-1", "Chain", PL_CHAIN}, {"timer-0", "Timer", PL_TIMER},
    {"event-0", "Event", PL_EVENT}, {"parent-0", "Parent", PL_PARENT},
    {"fan-1", "Fan", PL_FAN},
};

#define PL_INSTANCE_COUNT (sizeof(pl_instances) / sizeof(pl_instances[0]))

/* The child of a Parent: "<parent id>-child". */
static inline void pl_child_id(const char *parent, char *out, size_t cap)
{
    snprintf(out, cap, "%s-child", parent);
}

static inline void pl_event_payload(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "go-%s", id);
}

/* The Step activity: appends one letter chosen by a hash of the input, so a
 * lost, repeated or reordered step changes the result. */
static inline void pl_step(const char *in, char *out, size_t cap)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *s = in; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    size_t len = strlen(in);
    if (cap < 2)
        return;
    if (len > cap - 2)
        len = cap - 2; /* never with this workload: strings stay short */
    memmove(out, in, len);
    out[len] = (char)('a' + (int)(h % 26));
    out[len + 1] = '\0';
}

static inline void pl_fan_input(const char *id, int i, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%d", id, i);
}

static inline void pl_expected(const pl_instance *in, char *out, size_t cap)
{
    char a[PL_STR_MAX], b[PL_STR_MAX];
    switch (in->kind) {
    case PL_CHAIN:
        snprintf(a, sizeof(a), "%s", in->id);
        for (int i = 0; i < PL_CHAIN_STEPS; i++) {
            pl_step(a, b, sizeof(b));
            memcpy(a, b, sizeof(a));
        }
        snprintf(out, cap, "%s", a);
        break;
    case PL_FAN: {
        char letters[PL_FAN_WIDTH + 1];
        for (int i = 0; i < PL_FAN_WIDTH; i++) {
            pl_fan_input(in->id, i, a, sizeof(a));
            pl_step(a, b, sizeof(b));
            letters[i] = b[strlen(b) - 1];
        }
        letters[PL_FAN_WIDTH] = '\0';
        snprintf(out, cap, "%s", letters);
        break;
    }
    case PL_TIMER:
        pl_step(in->id, out, cap);
        break;
    case PL_EVENT:
        pl_event_payload(in->id, a, sizeof(a));
        pl_step(a, out, cap);
        break;
    case PL_PARENT:
        pl_step(in->id, a, sizeof(a)); /* the child */
        pl_step(a, out, cap);
        break;
    }
}

#endif
