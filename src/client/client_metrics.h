/* client_metrics.h - what a client counts (its cancellation requests by
 * outcome) and their Prometheus text (client_metrics.c). Counters are
 * relaxed atomics: a client is used from any thread at once. */
#ifndef DURO_CLIENT_METRICS_H
#define DURO_CLIENT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The outcome label of duro_cancel_requests_total, in the seed's words. */
enum {
    DURO__CANCEL_REQ_REQUESTED,         /* the request was recorded */
    DURO__CANCEL_REQ_CANCELLED,         /* decided at once: Cancelled */
    DURO__CANCEL_REQ_ALREADY_CANCELLED, /* cancelled, or a request pending */
    DURO__CANCEL_REQ_NOT_FOUND,         /* no such instance */
    DURO__CANCEL_REQ_INVALID_STATUS,    /* Completed or Failed */
    DURO__CANCEL_REQ_COUNT
};

typedef struct duro__client_metrics {
    _Atomic uint64_t cancel_requests[DURO__CANCEL_REQ_COUNT];
} duro__client_metrics;

/* Counts @p n requests with a provider outcome (duro_cancel_outcome);
 * DURO_CANCEL_NONE and DURO_CANCEL_DUPLICATE are not requests of their own
 * and count nothing. */
void duro__client_count_cancel(duro__client_metrics *m, int outcome,
                               uint64_t n);

/* The exposition into buf, snprintf-style: at most size bytes with the
 * NUL; returns the full length without it. */
size_t duro__client_metrics_text(duro__client_metrics *m, char *buf,
                                 size_t size);

#endif
