/* client_metrics.c - a client's counters in the Prometheus text exposition
 * format 0.0.4: duro_cancel_requests_total{outcome}, every outcome written
 * from the start, at 0. Any thread. */
#include <stdio.h>

#include "client/client_metrics.h"
#include "duro/provider.h"

static const char *const outcome_label[DURO__CANCEL_REQ_COUNT] = {
    "requested", "cancelled", "already_cancelled", "not_found",
    "invalid_status"};

void duro__client_count_cancel(duro__client_metrics *m, int outcome, uint64_t n)
{
    int i;
    switch (outcome) {
    case DURO_CANCEL_REQUESTED:
        i = DURO__CANCEL_REQ_REQUESTED;
        break;
    case DURO_CANCEL_CANCELLED:
        i = DURO__CANCEL_REQ_CANCELLED;
        break;
    case DURO_CANCEL_ALREADY_CANCELLED:
        i = DURO__CANCEL_REQ_ALREADY_CANCELLED;
        break;
    case DURO_CANCEL_NOT_FOUND:
        i = DURO__CANCEL_REQ_NOT_FOUND;
        break;
    case DURO_CANCEL_NOT_CANCELLABLE:
        i = DURO__CANCEL_REQ_INVALID_STATUS;
        break;
    default:
        return;
    }
    atomic_fetch_add_explicit(&m->cancel_requests[i], n, memory_order_relaxed);
}

size_t duro__client_metrics_text(duro__client_metrics *m, char *buf,
                                 size_t size)
{
    size_t len = 0;
#define PUT(...)                                                               \
    do {                                                                       \
        int n_ = snprintf(len < size ? buf + len : NULL,                       \
                          len < size ? size - len : 0, __VA_ARGS__);           \
        if (n_ > 0)                                                            \
            len += (size_t)n_;                                                 \
    } while (0)
    PUT("# HELP duro_cancel_requests_total Instance cancellation requests "
        "made through this client, by outcome (one per distinct instance "
        "id; a cancel by filter counts the instances it cancelled).\n"
        "# TYPE duro_cancel_requests_total counter\n");
    for (int i = 0; i < DURO__CANCEL_REQ_COUNT; i++)
        PUT("duro_cancel_requests_total{outcome=\"%s\"} %llu\n",
            outcome_label[i],
            (unsigned long long)atomic_load_explicit(&m->cancel_requests[i],
                                                     memory_order_relaxed));
#undef PUT
    return len;
}
