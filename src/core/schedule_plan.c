/* schedule_plan.c - the schedule planner of schedule_plan.h. Pure; any thread.
 */
#include <string.h>

#include "base/base.h"
#include "core/schedule_plan.h"

int duro__schedule_next(const duro__schedule_rule *r, int64_t after_ms,
                        int64_t *next_ms)
{
    int64_t lower = after_ms;
    if (r->start_ms > 0 && r->start_ms - 1 > lower)
        lower = r->start_ms - 1; /* the first may be at start_ms */
    int64_t next;
    if (r->cron != NULL) {
        /* whole seconds: the first second whose start is past lower */
        int64_t after_s = lower / 1000 - (lower % 1000 < 0);
        int64_t next_s;
        if (duro__cron_next(r->cron, r->zone, after_s, &next_s) != DURO_OK ||
            next_s > INT64_MAX / 1000)
            return DURO_NOT_FOUND;
        next = next_s * 1000;
    } else {
        if (r->interval_ms <= 0 || lower > INT64_MAX - 2 * r->interval_ms)
            return DURO_NOT_FOUND;
        int64_t since = lower - r->offset_ms;
        int64_t k =
            since / r->interval_ms - (since % r->interval_ms < 0); /* floor */
        next = r->offset_ms + (k + 1) * r->interval_ms;
    }
    if (r->end_ms > 0 && next >= r->end_ms)
        return DURO_NOT_FOUND;
    *next_ms = next;
    return DURO_OK;
}

int64_t duro__schedule_jitter(const duro__schedule_rule *r, int64_t time_ms)
{
    if (r->jitter_ms <= 0)
        return 0;
    /* FNV-1a over the id and the time's bytes, least significant first:
     * the same in every runtime and on every machine */
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)r->id;
         p != NULL && *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211ull;
    uint64_t t = (uint64_t)time_ms;
    for (int i = 0; i < 8; i++, t >>= 8)
        h = (h ^ (t & 0xff)) * 1099511628211ull;
    return (int64_t)(h % ((uint64_t)r->jitter_ms + 1));
}

static int64_t due(const duro__schedule_rule *r, int64_t time_ms)
{
    int64_t j = duro__schedule_jitter(r, time_ms);
    return time_ms > INT64_MAX - j ? INT64_MAX : time_ms + j;
}

static int64_t after_or_end(const duro__schedule_rule *r, int64_t time_ms)
{
    int64_t next;
    return duro__schedule_next(r, time_ms, &next) == DURO_OK ? next : 0;
}

static int missed(const duro__schedule_rule *r, int64_t time_ms, int64_t now_ms)
{
    int64_t d = due(r, time_ms);
    return d < now_ms && now_ms - d > r->catchup_ms;
}

/* The fires from time_ms on that are missed at now_ms: how many (-1:
 * more than DURO__SCHEDULE_COUNT_MAX), and the first that is not (0:
 * none left). */
static int64_t skip_missed(const duro__schedule_rule *r, int64_t time_ms,
                           int64_t now_ms, int64_t *first_kept)
{
    int64_t count = 0, t = time_ms;
    while (t != 0 && missed(r, t, now_ms) && count < DURO__SCHEDULE_COUNT_MAX) {
        count++;
        t = after_or_end(r, t);
    }
    if (t != 0 && missed(r, t, now_ms)) {
        /* Too many to count: every fire before the window's start less the
         * largest jitter is missed; go on from there. */
        int64_t edge = now_ms - r->catchup_ms - r->jitter_ms - 1;
        if (edge > t)
            t = after_or_end(r, edge);
        while (t != 0 && missed(r, t, now_ms))
            t = after_or_end(r, t);
        count = -1;
    }
    *first_kept = t;
    return count;
}

static void add(duro__fire_action *out, size_t *n, int kind, int64_t time_ms,
                int64_t count, const char *why)
{
    out[*n].kind = kind;
    out[*n].time_ms = time_ms;
    out[*n].count = count;
    out[*n].why = why;
    (*n)++;
}

size_t duro__schedule_plan(const duro__schedule_rule *r,
                           const duro__schedule_state *s, int64_t now_ms,
                           duro__fire_action *out, size_t max,
                           duro__schedule_state *after)
{
    duro__schedule_state st = *s;
    size_t n = 0;
    int live = st.last_live != 0;
    if (st.buffered_ms != 0 && !live && n < max) {
        add(out, &n, DURO__FIRE_START, st.buffered_ms, 0, NULL);
        st.buffered_ms = 0;
        live = 1;
    }
    while (n < max && st.next_ms != 0 && due(r, st.next_ms) <= now_ms) {
        int64_t t = st.next_ms;
        if (missed(r, t, now_ms)) {
            int64_t kept;
            int64_t count = skip_missed(r, t, now_ms, &kept);
            add(out, &n, DURO__FIRE_SKIP, t, count,
                "missed: due longer ago than the catch-up window");
            st.next_ms = kept;
            continue;
        }
        int start = 1;
        if (live) {
            switch (r->overlap) {
            case DURO__OVERLAP_ALLOW_ALL:
                break;
            case DURO__OVERLAP_BUFFER_ONE:
                start = 0;
                if (st.buffered_ms == 0) {
                    add(out, &n, DURO__FIRE_BUFFER, t, 0, NULL);
                    st.buffered_ms = t;
                } else {
                    add(out, &n, DURO__FIRE_SKIP, t, 1,
                        "overlap: a fire is buffered already");
                }
                break;
            case DURO__OVERLAP_CANCEL_OTHER:
            case DURO__OVERLAP_TERMINATE_OTHER:
                if (n + 2 > max) /* the stop and its start go together */
                    goto done;
                add(out, &n, DURO__FIRE_STOP_LAST, t, 0, NULL);
                break;
            default: /* DURO__OVERLAP_SKIP */
                start = 0;
                add(out, &n, DURO__FIRE_SKIP, t, 1,
                    "overlap: the last fire's instance has not ended");
                break;
            }
        }
        if (start) {
            add(out, &n, DURO__FIRE_START, t, 0, NULL);
            live = 1;
        }
        st.next_ms = after_or_end(r, t);
    }
done:
    st.last_live = live;
    *after = st;
    return n;
}
