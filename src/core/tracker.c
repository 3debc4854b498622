/* tracker.c - what each scheduling event of one execution is and whether it
 * is still outstanding: the basis of "which activities does this turn
 * cancel" and of duplicate-completion filtering. Pure; one thread at a time. */
#include <string.h>

#include "core/core.h"

void duro__tracker_init(duro__tracker *t)
{
    memset(t, 0, sizeof(*t));
}

void duro__tracker_free(duro__tracker *t)
{
    duro__free(t->slots);
    duro__tracker_init(t);
}

int duro__event_is_command(int kind)
{
    switch (kind) {
    case DURO_EVENT_ORCHESTRATION_STARTED:
    case DURO_EVENT_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_ORCHESTRATION_FAILED:
    case DURO_EVENT_CONTINUED_AS_NEW:
    case DURO_EVENT_ORCHESTRATION_CANCELLED:
    case DURO_EVENT_ORCHESTRATION_TERMINATED:
    case DURO_EVENT_ACTIVITY_SCHEDULED:
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
    case DURO_EVENT_TIMER_CREATED:
    case DURO_EVENT_EVENT_SUBSCRIBED:
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
    case DURO_EVENT_PATCH_MARKER:
        return 1;
    default:
        return 0;
    }
}

int duro__event_is_terminal(int kind)
{
    return kind == DURO_EVENT_ORCHESTRATION_COMPLETED ||
           kind == DURO_EVENT_ORCHESTRATION_FAILED ||
           kind == DURO_EVENT_CONTINUED_AS_NEW ||
           kind == DURO_EVENT_ORCHESTRATION_CANCELLED ||
           kind == DURO_EVENT_ORCHESTRATION_TERMINATED;
}

/* The slot kind a completion event must point at. */
static int completion_slot_kind(int kind)
{
    switch (kind) {
    case DURO_EVENT_ACTIVITY_COMPLETED:
    case DURO_EVENT_ACTIVITY_FAILED:
    case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
        return DURO__SLOT_ACTIVITY;
    case DURO_EVENT_TIMER_FIRED:
        return DURO__SLOT_TIMER;
    case DURO_EVENT_SUB_ORCHESTRATION_COMPLETED:
    case DURO_EVENT_SUB_ORCHESTRATION_FAILED:
    case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
        return DURO__SLOT_CHILD;
    default:
        return DURO__SLOT_NONE;
    }
}

static duro__slot *source_slot(const duro__tracker *t, const duro_event *e)
{
    int want = completion_slot_kind(e->kind);
    if (want == DURO__SLOT_NONE || e->source_event_id == 0 ||
        e->source_event_id > t->count)
        return NULL;
    duro__slot *s = &t->slots[e->source_event_id];
    return s->kind == want ? s : NULL;
}

int duro__tracker_classify(const duro__tracker *t, const duro_event *e)
{
    const duro__slot *s = source_slot(t, e);
    if (s == NULL)
        return DURO__MSG_UNKNOWN;
    switch (s->state) {
    case DURO__SLOT_PENDING:
        return DURO__MSG_APPLY;
    case DURO__SLOT_CANCEL_REQUESTED:
        return DURO__MSG_LATE;
    default:
        return DURO__MSG_DUPLICATE;
    }
}

int duro__tracker_apply(duro__tracker *t, const duro_event *e,
                        duro_arena *arena)
{
    if (e->event_id != t->count + 1)
        return DURO_INVALID;
    if (e->event_id >= t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        while (ncap <= e->event_id)
            ncap *= 2;
        duro__slot *ns = duro__realloc(t->slots, ncap * sizeof(*ns));
        if (ns == NULL)
            return DURO_NOMEM;
        memset(ns + t->cap, 0, (ncap - t->cap) * sizeof(*ns));
        t->slots = ns;
        t->cap = ncap;
    }
    duro__slot *self = &t->slots[e->event_id];
    memset(self, 0, sizeof(*self));
    switch (e->kind) {
    case DURO_EVENT_ACTIVITY_SCHEDULED:
        self->kind = DURO__SLOT_ACTIVITY;
        self->state = DURO__SLOT_PENDING;
        break;
    case DURO_EVENT_TIMER_CREATED:
        self->kind = DURO__SLOT_TIMER;
        self->state = DURO__SLOT_PENDING;
        break;
    case DURO_EVENT_EVENT_SUBSCRIBED:
        self->kind = DURO__SLOT_EVENT_WAIT;
        self->state = DURO__SLOT_PENDING;
        break;
    case DURO_EVENT_SUB_ORCHESTRATION_SCHEDULED:
        self->kind = (e->flags & DURO_START_DETACHED) ? DURO__SLOT_DETACHED
                                                      : DURO__SLOT_CHILD;
        self->state = self->kind == DURO__SLOT_CHILD ? DURO__SLOT_PENDING
                                                     : DURO__SLOT_DONE;
        if (e->ref_instance != NULL) {
            self->child_instance = duro_arena_strdup(arena, e->ref_instance);
            if (self->child_instance == NULL)
                return DURO_NOMEM;
        }
        break;
    default:
        break;
    }
    if (duro__event_is_terminal(e->kind))
        t->terminal = 1;
    duro__slot *src = source_slot(t, e);
    if (src != NULL) {
        switch (e->kind) {
        case DURO_EVENT_ACTIVITY_CANCEL_REQUESTED:
        case DURO_EVENT_SUB_ORCHESTRATION_CANCEL_REQUESTED:
            if (src->state == DURO__SLOT_PENDING)
                src->state = DURO__SLOT_CANCEL_REQUESTED;
            break;
        default: /* a completion */
            if (src->state == DURO__SLOT_PENDING)
                src->state = DURO__SLOT_DONE;
            else if (src->state == DURO__SLOT_CANCEL_REQUESTED)
                src->state = DURO__SLOT_LATE;
            break;
        }
    }
    t->count = e->event_id;
    return DURO_OK;
}
