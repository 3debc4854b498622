/* error.c - the error, category, status and event-kind name tables, provider
 * error helpers, and the thread-local detail behind duro_errmsg(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

const char *duro_strerror(int rc)
{
    switch (rc) {
#define DURO__X(name, value, text)                                             \
    case value:                                                                \
        return text;
        DURO_ERROR_TABLE(DURO__X)
#undef DURO__X
    }
    return "unknown error code";
}

const char *duro_errname(int rc)
{
    switch (rc) {
#define DURO__X(name, value, text)                                             \
    case value:                                                                \
        return #name;
        DURO_ERROR_TABLE(DURO__X)
#undef DURO__X
    }
    return "DURO_UNKNOWN_CODE";
}

const char *duro_category_name(int category)
{
    static const char *const names[] = {"none",          "application",
                                        "configuration", "infrastructure",
                                        "timeout",       "cancelled"};
    if (category < 0 || (size_t)category >= DURO__ARRAY_LEN(names))
        return "unknown";
    return names[category];
}

static const char *const status_names[] = {
    "NotFound",  "Pending",        "Running",   "Completed", "Failed",
    "Cancelled", "ContinuedAsNew", "Suspended", "Terminated"};

const char *duro_status_name(int status)
{
    if (status < 0 || (size_t)status >= DURO__ARRAY_LEN(status_names))
        return "Unknown";
    return status_names[status];
}

int duro_status_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < DURO__ARRAY_LEN(status_names); i++)
        if (strcasecmp(name, status_names[i]) == 0)
            return (int)i;
    return -1;
}

int duro_status_is_terminal(int status)
{
    return status == DURO_STATUS_COMPLETED || status == DURO_STATUS_FAILED ||
           status == DURO_STATUS_CANCELLED || status == DURO_STATUS_TERMINATED;
}

const char *duro_event_kind_name(int kind)
{
    static const char *const names[] = {"Unknown",
                                        "OrchestrationStarted",
                                        "OrchestrationCompleted",
                                        "OrchestrationFailed",
                                        "ContinuedAsNew",
                                        "OrchestrationCancelRequested",
                                        "OrchestrationCancelled",
                                        "ActivityScheduled",
                                        "ActivityCompleted",
                                        "ActivityFailed",
                                        "ActivityCancelRequested",
                                        "TimerCreated",
                                        "TimerFired",
                                        "EventSubscribed",
                                        "EventRaised",
                                        "SubOrchestrationScheduled",
                                        "SubOrchestrationCompleted",
                                        "SubOrchestrationFailed",
                                        "SubOrchestrationCancelRequested",
                                        "OrchestrationTerminated",
                                        "ExecutionSuspended",
                                        "ExecutionResumed",
                                        "PatchMarker",
                                        "ExecutionReset"};
    if (kind < 0 || (size_t)kind >= DURO__ARRAY_LEN(names))
        return "Unknown";
    return names[kind];
}

const char *duro_cancel_outcome_name(int outcome)
{
    static const char *const names[] = {
        "none",      "requested",       "already_cancelled",
        "not_found", "not_cancellable", "duplicate",
        "cancelled"};
    if (outcome < 0 || (size_t)outcome >= DURO__ARRAY_LEN(names))
        return "unknown";
    return names[outcome];
}

const char *duro_control_name(int control)
{
    static const char *const names[] = {"unknown", "terminate", "suspend",
                                        "resume"};
    if (control < 1 || (size_t)control >= DURO__ARRAY_LEN(names))
        return "unknown";
    return names[control];
}

const char *duro_control_outcome_name(int outcome)
{
    /* 2 is not an outcome (the values follow duro_cancel_outcome's) */
    static const char *const names[] = {"none",      "requested", "unknown",
                                        "not_found", "finished",  "duplicate",
                                        "applied"};
    if (outcome < 0 || (size_t)outcome >= DURO__ARRAY_LEN(names))
        return "unknown";
    return names[outcome];
}

void duro_error_clear(duro_error *err)
{
    if (err == NULL)
        return;
    err->code = DURO_OK;
    err->retryable = 0;
    err->message[0] = '\0';
}

int duro_error_set(duro_error *err, int code, int retryable, const char *fmt,
                   ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    err->retryable = retryable;
    if (fmt == NULL) {
        err->message[0] = '\0';
    } else {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- thread-local last error ------------------------------------------ */

static _Thread_local char last_errmsg[DURO_ERROR_MESSAGE_MAX];

const char *duro_errmsg(void)
{
    return last_errmsg;
}

void duro__errmsg_clear(void)
{
    last_errmsg[0] = '\0';
}

int duro__fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_errmsg, sizeof(last_errmsg), fmt, ap);
    va_end(ap);
    return rc;
}

int duro__fail_from(const duro_error *err)
{
    if (err->message[0] != '\0')
        snprintf(last_errmsg, sizeof(last_errmsg), "%s", err->message);
    else
        snprintf(last_errmsg, sizeof(last_errmsg), "%s",
                 duro_strerror(err->code));
    return err->code;
}
