/* batch.c - what both providers' batched turn calls share: the cached part
 * of a history, and the checks of a batch's arguments. Below the
 * providers. Any thread. */
#include "base/base.h"
#include "providers/providers.h"

uint64_t duro__history_offset(const duro_history_cache *cache,
                              const char *instance_id, uint64_t execution_id,
                              uint64_t total)
{
    uint64_t cached = 0;
    if (cache != NULL && cache->cached_events != NULL)
        cached = cache->cached_events(cache->user, instance_id, execution_id);
    return cached <= total ? cached : 0;
}

int duro__check_batch_args(size_t n, const char *const *lock_tokens,
                           const duro_orch_ack *acks, size_t max_next,
                           duro_orch_item **next, size_t *next_count,
                           duro_error *err)
{
    if (next_count == NULL)
        return duro_error_set(err, DURO_INVALID, 0, "next_count is NULL");
    *next_count = 0;
    if (n > DURO__BATCH_MAX || max_next > DURO__BATCH_MAX)
        return duro_error_set(err, DURO_INVALID, 0,
                              "at most %d acks and %d fetches in one call",
                              DURO__BATCH_MAX, DURO__BATCH_MAX);
    if ((n > 0 && (lock_tokens == NULL || acks == NULL)) ||
        (max_next > 0 && next == NULL))
        return duro_error_set(err, DURO_INVALID, 0,
                              "lock_tokens, acks or next is NULL");
    return DURO_OK;
}
