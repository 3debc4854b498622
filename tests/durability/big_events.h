/* big_events.h - the large external events of the kill test, shared by
 * kill_worker (which raises them and runs the orchestration that consumes
 * them) and test_durability (which computes the output a surviving
 * instance must have). Header-only (static inline). */
#ifndef DURO_BIG_EVENTS_H
#define DURO_BIG_EVENTS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BIG_EVENT_COUNT 3
#define BIG_EVENT_NAME "part"
/* URL parameter and runtime option: room for the largest event tried. */
#define BIG_MAX_PAYLOAD 8000000

/* Event i (0-based) of `bytes` bytes: letters that differ per event and per
 * position, so a page of one event in the place of another shows. */
static inline void big_event_fill(char *out, size_t bytes, int i)
{
    for (size_t j = 0; j < bytes; j++)
        out[j] = (char)('a' + (int)((j * 7 + (size_t)i * 5 + j / 2048) % 26));
    out[bytes] = '\0';
}

static inline uint32_t big_hash(uint32_t h, const char *s, size_t n)
{
    for (size_t j = 0; j < n; j++)
        h = (h ^ (uint8_t)s[j]) * 16777619u; /* FNV-1a */
    return h;
}

/* The orchestration's output for events e[0..count): their total size and
 * one hash over them in order. */
static inline void big_output(const char *const *events, int count, char *out,
                              size_t cap)
{
    uint32_t h = 2166136261u;
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        size_t n = strlen(events[i]);
        h = big_hash(h, events[i], n);
        total += n;
    }
    snprintf(out, cap, "parts=%d bytes=%zu hash=%08x", count, total,
             (unsigned)h);
}

#endif
