/* turn.c - the output buffers of one turn, and the plan that says what a
 * fetched batch means before any code runs. Pure; one thread at a time. */
#include <string.h>

#include "core/core.h"

int duro__turn_init(duro__turn *t)
{
    memset(t, 0, sizeof(*t));
    t->arena = duro_arena_create();
    return t->arena != NULL ? DURO_OK : DURO_NOMEM;
}

void duro__turn_free(duro__turn *t)
{
    duro__free(t->delta);
    duro__free(t->worker_items);
    duro__free(t->outbound);
    duro__free(t->cancelled);
    duro__free(t->cancel_reasons);
    duro_arena_destroy(t->arena);
    memset(t, 0, sizeof(*t));
}

void duro__turn_reset(duro__turn *t)
{
    duro_arena *fresh = duro_arena_create();
    if (fresh != NULL) {
        duro_arena_destroy(t->arena);
        t->arena = fresh;
    }
    /* Without a fresh arena the old one is kept: it only grows. */
    t->delta_count = 0;
    t->worker_count = 0;
    t->outbound_count = 0;
    t->cancelled_count = 0;
    t->reasons_count = 0;
    memset(&t->meta, 0, sizeof(t->meta));
    t->status = 0;
    t->meta_changed = 0;
    t->nondeterminism = 0;
    t->ran_code = 0;
    t->replayed = 0;
}

void duro__plan_turn(const duro_orch_item *item, duro__plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    const duro_work_item *start = NULL, *cont = NULL;
    int has_cancel = 0;
    for (size_t i = 0; i < item->message_count; i++) {
        const duro_work_item *m = &item->messages[i];
        if (m->kind == DURO_WORK_START && start == NULL)
            start = m;
        else if (m->kind == DURO_WORK_CONTINUE_AS_NEW &&
                 m->execution_id == item->execution_id + 1 && cont == NULL)
            cont = m;
        else if (m->kind == DURO_WORK_CANCEL_INSTANCE ||
                 m->kind == DURO_WORK_TERMINATE_INSTANCE ||
                 m->kind == DURO_WORK_DEADLINE)
            has_cancel = 1;
    }
    switch (item->status) {
    case DURO_STATUS_NOT_FOUND:
        plan->action = DURO__PLAN_DROP;
        plan->why = "no such instance";
        return;
    case DURO_STATUS_PENDING:
        if (start != NULL && item->execution_id == 0) {
            plan->action = DURO__PLAN_START;
            plan->execution_id = 1;
            plan->start = start;
        } else if (has_cancel && item->execution_id == 0) {
            /* Cancelled, or past its deadline, before its (delayed) START
             * became visible: the execution begins and ends in this turn. */
            plan->action = DURO__PLAN_START;
            plan->execution_id = 1;
        } else if (item->execution_id == 0) {
            plan->action = DURO__PLAN_WAIT;
            plan->why = "instance not started yet";
        } else {
            plan->action = DURO__PLAN_RUN;
            plan->execution_id = item->execution_id;
        }
        return;
    case DURO_STATUS_RUNNING:
    case DURO_STATUS_SUSPENDED: /* decided by the engine (it records the
                                   batch without running code) */
        if (cont != NULL) {
            plan->action = DURO__PLAN_CONTINUE;
            plan->execution_id = item->execution_id + 1;
            plan->start = cont;
        } else {
            plan->action = DURO__PLAN_RUN;
            plan->execution_id = item->execution_id;
        }
        return;
    default:
        plan->action = DURO__PLAN_DROP;
        plan->why = "instance already finished";
        return;
    }
}
