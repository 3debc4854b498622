/* engine_cache.c - suspended orchestration engines kept between turns, so the
 * next turn of an instance resumes its fiber (or its driver's state) instead
 * of replaying history. A
 * map from instance id to engine, bounded in engines and in bytes (an engine
 * grows with its history: about 200 bytes per event), with
 * least-recently-used eviction.
 * Thread-safe under one mutex; an engine is owned by the cache while in it
 * and by exactly one turn thread while taken out. Engines are destroyed
 * (which runs user code: destroy hooks, a driver's destroy) only after the
 * mutex is released. */
#include <string.h>

#include "runtime/runtime.h"

typedef struct node {
    duro_orch *engine;
    const char *key; /* the engine's instance id */
    uint64_t hash;
    size_t bytes; /* duro__engine_bytes when it was put */
    struct node *bucket_next;
    struct node *lru_prev, *lru_next; /* head = most recent */
} node;

struct duro__engine_cache {
    pthread_mutex_t lock;
    size_t capacity;
    size_t count;
    size_t max_bytes; /* 0: no bound */
    size_t bytes;     /* of the engines kept */
    node **buckets;
    size_t bucket_count; /* power of two */
    node *lru_head, *lru_tail;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int duro__cache_create(size_t capacity, size_t max_bytes,
                       duro__engine_cache **out)
{
    duro__engine_cache *c = duro__calloc(1, sizeof(*c));
    if (c == NULL)
        return DURO_NOMEM;
    c->capacity = capacity;
    c->max_bytes = max_bytes;
    c->bucket_count = 64;
    while (c->bucket_count < capacity * 2 && c->bucket_count < (1u << 20))
        c->bucket_count *= 2;
    c->buckets = duro__calloc(c->bucket_count, sizeof(node *));
    if (c->buckets == NULL) {
        duro__free(c);
        return DURO_NOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return DURO_OK;
}

static void lru_unlink(duro__engine_cache *c, node *n)
{
    if (n->lru_prev)
        n->lru_prev->lru_next = n->lru_next;
    else
        c->lru_head = n->lru_next;
    if (n->lru_next)
        n->lru_next->lru_prev = n->lru_prev;
    else
        c->lru_tail = n->lru_prev;
    n->lru_prev = n->lru_next = NULL;
}

static void lru_push_front(duro__engine_cache *c, node *n)
{
    n->lru_prev = NULL;
    n->lru_next = c->lru_head;
    if (c->lru_head)
        c->lru_head->lru_prev = n;
    c->lru_head = n;
    if (c->lru_tail == NULL)
        c->lru_tail = n;
}

static node **find_slot(duro__engine_cache *c, const char *key, uint64_t h)
{
    node **pp = &c->buckets[h & (c->bucket_count - 1)];
    while (*pp != NULL && !((*pp)->hash == h && strcmp((*pp)->key, key) == 0))
        pp = &(*pp)->bucket_next;
    return pp;
}

/* Removes n from the map and the LRU list; the caller owns n. */
static void detach(duro__engine_cache *c, node *n)
{
    node **pp = find_slot(c, n->key, n->hash);
    if (*pp == n)
        *pp = n->bucket_next;
    lru_unlink(c, n);
    c->count--;
    c->bytes -= n->bytes;
}

void duro__cache_destroy(duro__engine_cache *c)
{
    if (c == NULL)
        return;
    node *n = c->lru_head;
    while (n != NULL) {
        node *next = n->lru_next;
        duro__engine_destroy(n->engine);
        duro__free(n);
        n = next;
    }
    duro__free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    duro__free(c);
}

void duro__cache_clear(duro__engine_cache *c)
{
    pthread_mutex_lock(&c->lock);
    node *n = c->lru_head;
    c->lru_head = c->lru_tail = NULL;
    memset(c->buckets, 0, c->bucket_count * sizeof(node *));
    c->count = 0;
    c->bytes = 0;
    pthread_mutex_unlock(&c->lock);
    while (n != NULL) {
        node *next = n->lru_next;
        duro__engine_destroy(n->engine);
        duro__free(n);
        n = next;
    }
}

duro_orch *duro__cache_take(duro__engine_cache *c, const char *instance_id,
                            uint64_t execution_id)
{
    uint64_t h = hash_str(instance_id);
    duro_orch *e = NULL, *stale = NULL;
    pthread_mutex_lock(&c->lock);
    node *n = *find_slot(c, instance_id, h);
    if (n != NULL) {
        detach(c, n);
        if (duro__engine_execution(n->engine) == execution_id)
            e = n->engine;
        else
            stale = n->engine;
    }
    pthread_mutex_unlock(&c->lock);
    duro__engine_destroy(stale);
    duro__free(n);
    return e;
}

void duro__cache_put(duro__engine_cache *c, duro_orch *e)
{
    if (c->capacity == 0) {
        duro__engine_destroy(e);
        return;
    }
    node *n = duro__calloc(1, sizeof(*n));
    if (n == NULL) {
        duro__engine_destroy(e);
        return;
    }
    n->engine = e;
    n->key = duro__engine_instance(e);
    n->hash = hash_str(n->key);
    n->bytes = duro__engine_bytes(e);
    node *old = NULL, *evicted = NULL; /* evicted: a list through lru_next */
    pthread_mutex_lock(&c->lock);
    node **pp = find_slot(c, n->key, n->hash);
    if (*pp != NULL) {
        old = *pp;
        detach(c, old);
        pp = find_slot(c, n->key, n->hash);
    }
    n->bucket_next = *pp;
    *pp = n;
    lru_push_front(c, n);
    c->count++;
    c->bytes += n->bytes;
    while (c->count > c->capacity ||
           (c->max_bytes > 0 && c->bytes > c->max_bytes)) {
        node *t = c->lru_tail;
        detach(c, t);
        t->lru_next = evicted;
        evicted = t;
    }
    pthread_mutex_unlock(&c->lock);
    if (old != NULL) {
        duro__engine_destroy(old->engine);
        duro__free(old);
    }
    while (evicted != NULL) {
        node *next = evicted->lru_next;
        duro__engine_destroy(evicted->engine);
        duro__free(evicted);
        evicted = next;
    }
}

uint64_t duro__cache_cached_events(void *user, const char *instance_id,
                                   uint64_t execution_id)
{
    duro__engine_cache *c = user;
    uint64_t h = hash_str(instance_id), events = 0;
    pthread_mutex_lock(&c->lock);
    node *n = *find_slot(c, instance_id, h);
    if (n != NULL && duro__engine_execution(n->engine) == execution_id)
        events = duro__engine_events(n->engine);
    pthread_mutex_unlock(&c->lock);
    return events;
}

size_t duro__cache_size(duro__engine_cache *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

size_t duro__cache_bytes(duro__engine_cache *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->bytes;
    pthread_mutex_unlock(&c->lock);
    return n;
}
