/* frozen_workload.h - the orchestrations test_pg_frozen and freeze_worker
 * share (one definition, so that both processes replay them alike): Fan
 * runs Quick and Slow at once and waits for Quick, then Slow; Plain is two
 * Steps in a row. The activities are each process's own. Only inside the
 * runtime's callbacks. */
#ifndef DURO_FROZEN_WORKLOAD_H
#define DURO_FROZEN_WORKLOAD_H

#include "duro.h"

static int frozen_fan(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *quick = duro_call_activity(o, "Quick", in);
    duro_task *slow = duro_call_activity(o, "Slow", in);
    if (duro_await(o, quick) != DURO_OK)
        return duro_fail(out, duro_task_error(quick));
    if (duro_await(o, slow) != DURO_OK)
        return duro_fail(out, duro_task_error(slow));
    return duro_ok(out, duro_task_output(slow));
}

static int frozen_plain(duro_orch *o, const char *in, duro_result *out)
{
    duro_task *a = duro_call_activity(o, "Step", in);
    if (duro_await(o, a) != DURO_OK)
        return duro_fail(out, duro_task_error(a));
    duro_task *b = duro_call_activity(o, "Step", duro_task_output(a));
    if (duro_await(o, b) != DURO_OK)
        return duro_fail(out, duro_task_error(b));
    return duro_ok(out, duro_task_output(b));
}

#endif
