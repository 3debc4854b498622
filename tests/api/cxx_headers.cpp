// cxx_headers.cpp - compiled (not run) by the cxx_headers_* tests: every
// public header included from C++ and every macro of duro.h expanded, with
// tasks, NULL and nullptr, so a header change that breaks C++ fails CTest.
#include "duro.h"
#include "duro/common.h"
#include "duro/provider.h"

namespace
{

int orchestration(duro_orch *o, const char *, duro_result *out)
{
    duro_task *a = duro_timer(o, 1);
    duro_task *b = duro_call_activity(o, "A", nullptr);
    duro_task *w = duro_select(o, a, b);
    duro_task *x = duro_wait_any(o, a, NULL, b);
    int rc = duro_join(o, a, b, nullptr);
    duro_task *one = duro_select(o, a);
    duro_log(o, DURO_LOG_INFO, "%d %p %p", rc, static_cast<void *>(x),
             static_cast<void *>(one));
    return duro_ok(out, duro_task_output(w));
}

// A driver: the step waits without blocking (duro_task_state is both a
// function and an enum's name, as stat is in C).
int drv_start(duro_orch *o, const char *, void *, void **state)
{
    *state = duro_timer(o, 1);
    return DURO_OK;
}

int drv_step(duro_orch *o, void *state, duro_result *out)
{
    duro_task *t = static_cast<duro_task *>(state);
    duro_task *const both[] = {t, nullptr};
    if (duro_task_state(t) == DURO_TASK_PENDING ||
        duro_first_done(o, both, 2) == nullptr ||
        duro_all_done(o, both, 2) != 1 ||
        duro_select_done(o, both, 2) == nullptr)
        return DURO_STEP_WAITING;
    enum duro_task_state s = DURO_TASK_SUCCEEDED;
    duro_ok(out, s == duro_task_state(t) ? "fired" : "not");
    return DURO_STEP_DONE;
}

int activity(duro_activity *a, const char *in, duro_result *out)
{
    duro_cancel_token *t = duro_activity_cancel_token(a);
    duro_cancel_token_release(t);
    return duro_failf(out, "%s", in);
}

} // namespace

int main()
{
    duro_registry *r = nullptr;
    if (duro_registry_create(&r) != DURO_OK)
        return 1;
    duro_registry_add_orchestration(r, "O", nullptr, orchestration, nullptr);
    duro_registry_add_activity(r, "A", activity, nullptr);
    duro_driver d = {DURO_DRIVER_VERSION, drv_start, drv_step, nullptr};
    duro_registry_add_driven_orchestration(r, "D", nullptr, &d, nullptr,
                                           nullptr);
    duro_registry_destroy(r);
    duro_error err;
    duro_error_clear(&err);
    static_assert(DURO_VERSION_NUMBER == DURO_VERSION_MAJOR * 10000 +
                                             DURO_VERSION_MINOR * 100 +
                                             DURO_VERSION_PATCH,
                  DURO_VERSION_STRING);
    if (duro_version_number() != DURO_VERSION_NUMBER || !duro_version())
        return 1;
    return duro_status_is_terminal(DURO_STATUS_COMPLETED) ? 0 : 1;
}
