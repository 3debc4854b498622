/* arena.c - bump allocator: many small allocations freed at once. Items that
 * providers hand to the runtime live in one arena each. An arena is used by
 * one thread at a time. */
#include <string.h>

#include "base/base.h"

#define ARENA_BLOCK 4096

typedef struct arena_block {
    struct arena_block *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
} arena_block;

struct duro_arena {
    arena_block *head;
    size_t bytes; /* of its blocks, headers included */
};

duro_arena *duro_arena_create(void)
{
    return duro__calloc(1, sizeof(duro_arena));
}

void duro_arena_destroy(duro_arena *a)
{
    if (a == NULL)
        return;
    arena_block *b = a->head;
    while (b != NULL) {
        arena_block *next = b->next;
        duro__free(b);
        b = next;
    }
    duro__free(a);
}

void *duro_arena_alloc(duro_arena *a, size_t size)
{
    /* Checked before rounding: size + 15 and the block header must not
     * wrap around. */
    if (a == NULL || size > DURO__ALLOC_MAX)
        return NULL;
    size = (size + 15) & ~(size_t)15;
    arena_block *b = a->head;
    if (b == NULL || b->size - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = duro__malloc(sizeof(arena_block) + cap);
        if (b == NULL)
            return NULL;
        b->size = cap;
        b->used = 0;
        a->bytes += sizeof(arena_block) + cap;
        /* A large one-off block goes behind the head so the head's free
         * space stays usable for small allocations. */
        if (size > ARENA_BLOCK && a->head != NULL) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

size_t duro__arena_bytes(const duro_arena *a)
{
    return a != NULL ? a->bytes : 0;
}

char *duro_arena_strdup(duro_arena *a, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = duro_arena_alloc(a, n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void duro_orch_item_free(duro_orch_item *item)
{
    if (item != NULL)
        duro_arena_destroy(item->arena);
}

void duro_worker_item_free(duro_worker_item *item)
{
    if (item != NULL)
        duro_arena_destroy(item->arena);
}

void duro_history_free(duro_history *h)
{
    if (h != NULL)
        duro_arena_destroy(h->arena);
}

void duro_instance_list_free(duro_instance_list *list)
{
    if (list != NULL)
        duro_arena_destroy(list->arena);
}

void duro_bulk_result_free(duro_bulk_result *r)
{
    if (r != NULL)
        duro_arena_destroy(r->arena);
}

void duro_instance_page_free(duro_instance_page *page)
{
    if (page != NULL)
        duro_arena_destroy(page->arena);
}

void duro_control_event_list_free(duro_control_event_list *list)
{
    if (list != NULL)
        duro_arena_destroy(list->arena);
}

void duro_runtime_list_free(duro_runtime_list *list)
{
    if (list != NULL)
        duro_arena_destroy(list->arena);
}

void duro_schedule_list_free(duro_schedule_list *list)
{
    if (list != NULL)
        duro_arena_destroy(list->arena);
}

void duro_schedule_fire_list_free(duro_schedule_fire_list *list)
{
    if (list != NULL)
        duro_arena_destroy(list->arena);
}
