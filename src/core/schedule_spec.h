/* schedule_spec.h - a schedule's spec (duro_schedule_spec) between the
 * client, the store and the runtime: its checks with their messages, its
 * JSON text (what the store keeps, opaque to it), its compiled form for
 * the planner (the cron expression parsed, the zone loaded), the ids of
 * its fires' instances, and the due time a state stores. Pure but for the
 * zone's file read; any thread. */
#ifndef DURO_CORE_SCHEDULE_SPEC_H
#define DURO_CORE_SCHEDULE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "core/schedule_plan.h"
#include "duro.h"

/* The bytes of a fire's instance id: the schedule id, '@', "trigger-" and
 * a time "2026-11-29T02:00:00.123Z", and the NUL. */
#define DURO__FIRE_ID_MAX (DURO_SCHEDULE_ID_MAX + 64)

/* A spec compiled for the planner. `rule` points into this struct: do
 * not copy it. */
typedef struct duro__schedule_compiled {
    duro__schedule_rule rule;
    duro__cron cron;
    duro__tz *zone; /* owned */
} duro__schedule_compiled;

/* Checks id (NULL: not checked) and spec and compiles them into *out
 * (free with duro__schedule_compiled_free). DURO_OK, or err (see
 * duro_client_schedule_create's errors). out may be NULL: checks only. */
int duro__schedule_compile(const char *id, const duro_schedule_spec *spec,
                           duro__schedule_compiled *out, duro_error *err);
void duro__schedule_compiled_free(duro__schedule_compiled *c);

/* The spec as JSON text into b (every field, strings escaped). */
void duro__schedule_spec_json(const duro_schedule_spec *spec, duro__strbuf *b);

/* The spec of JSON text (as duro__schedule_spec_json wrote it) into *out,
 * its strings in arena a. DURO_OK, or DURO_INVALID in err. */
int duro__schedule_spec_parse(const char *json, duro_arena *a,
                              duro_schedule_spec *out, duro_error *err);

/* The id of the instance of the fire at time_ms ("<id>@2026-11-29T02:00:00Z",
 * ".mmm" before the Z when not whole seconds; "<id>@trigger-<time>" for a
 * trigger) into out[DURO__FIRE_ID_MAX]. */
void duro__schedule_fire_id(const char *id, int64_t time_ms, int trigger,
                            char *out);

/* The first fire strictly after after_ms; 0 when none. */
int64_t duro__schedule_first(const duro__schedule_rule *r, int64_t after_ms);

/* The due_ms a store keeps for a state: a buffered fire's time (due
 * whenever the last instance has ended), else the next fire's jittered
 * time, 0 when there is none. */
int64_t duro__schedule_due(const duro__schedule_rule *r, int64_t next_ms,
                           int64_t buffered_ms);

/* Wakes every firing thread of the process: a schedule was created or
 * changed (runtime/schedule_firing.c). Any thread. */
void duro__schedules_poke(void);

/* The live statuses: Pending, Running, Suspended. */
int duro__status_is_live(int status);

#endif
