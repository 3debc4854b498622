/* replayer.c - duro_replay_history(): replays a recorded execution through
 * the code a registry holds for it, with no store and no runtime (the core's
 * duro__engine_replay does the work). Owns nothing past the call; runs the
 * code on the calling thread. */
#include <string.h>

#include "runtime/runtime.h"

void duro_replay_options_init(duro_replay_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->version = 1;
    o->max_payload = (size_t)1024 * 1024; /* the runtime's default */
    o->fiber_stack_size = 256 * 1024;
}

int duro_replay_history(const duro_registry *reg, const duro_history *h,
                        const duro_replay_options *opts)
{
    if (duro__engine_in_code())
        return duro__fail(DURO_MISUSE,
                          "duro_replay_history called from orchestration "
                          "code");
    if (reg == NULL || h == NULL)
        return duro__fail(DURO_INVALID, "registry or history is NULL");
    duro_replay_options defaults;
    duro_replay_options_init(&defaults);
    if (opts == NULL)
        opts = &defaults;
    if (opts->version < 1)
        return duro__fail(DURO_INVALID, "options.version is not set: call "
                                        "duro_replay_options_init() first");
    if (h->count == 0 || h->events == NULL)
        return duro__fail(DURO_INVALID, "the history is empty");
    const duro_event *start = &h->events[0];
    if (start->kind != DURO_EVENT_ORCHESTRATION_STARTED)
        return duro__fail(DURO_INVALID,
                          "the history begins with %s, not "
                          "OrchestrationStarted",
                          duro_event_kind_name(start->kind));
    const duro__orch_entry *e =
        duro__registry_find_orch(reg, start->name, start->version);
    if (e == NULL) {
        /* "" is the default version: named as such, not as '' */
        if (start->version != NULL && start->version[0] == '\0')
            return duro__fail(DURO_NOT_FOUND,
                              "orchestration '%s' (its default version) is "
                              "not registered",
                              start->name ? start->name : "");
        if (start->version != NULL)
            return duro__fail(DURO_NOT_FOUND,
                              "orchestration '%s' version '%s' is not "
                              "registered",
                              start->name ? start->name : "", start->version);
        return duro__fail(DURO_NOT_FOUND,
                          "orchestration '%s' is not registered",
                          start->name ? start->name : "");
    }
    duro__engine_config cfg;
    duro__registry_engine_config(e, &cfg);
    cfg.stack_size = opts->fiber_stack_size;
    cfg.max_payload = opts->max_payload;
    if (cfg.cleanup_timeout_ms <= 0)
        cfg.cleanup_timeout_ms = 300000; /* the runtime's default; a
                                            recorded deadline wins */
    char msg[DURO_ERROR_MESSAGE_MAX];
    int rc = duro__engine_replay(&cfg, h, msg, sizeof(msg));
    if (rc != DURO_OK)
        return duro__fail(rc, "%s", msg);
    return DURO_OK;
}
