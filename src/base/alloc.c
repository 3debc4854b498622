/* alloc.c - the library's one allocator: malloc with a fault-injection hook
 * so tests can make any allocation fail, and the string and growable-array
 * helpers built on it. Thread-safe (atomic counters). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Allocations are counted only while injection is on: a counter every
 * allocation of every thread added to was one cache line all of them
 * fought over (1 % of the chain benchmark's samples, bench/RESULTS.md,
 * stop 35). */
static _Atomic uint64_t alloc_calls; /* while injection is on */
static _Atomic uint64_t fail_at; /* 0: off; fail when alloc_calls reaches it */
static _Atomic int fail_sticky;

void duro__alloc_fail_after(uint64_t n, int sticky)
{
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_at, n == 0 ? 0 : atomic_load(&alloc_calls) + n);
}

static int should_fail(void)
{
    uint64_t at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (at == 0)
        return 0;
    uint64_t call = atomic_fetch_add(&alloc_calls, 1) + 1;
    if (call == at)
        return 1;
    return call > at && atomic_load(&fail_sticky);
}

void *duro__malloc(size_t size)
{
    if (should_fail() || size > DURO__ALLOC_MAX)
        return NULL;
    return malloc(size == 0 ? 1 : size);
}

void *duro__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    if (size != 0 && count > DURO__ALLOC_MAX / size)
        return NULL;
    return calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);
}

void *duro__realloc(void *p, size_t size)
{
    if (should_fail() || size > DURO__ALLOC_MAX)
        return NULL;
    return realloc(p, size == 0 ? 1 : size);
}

void duro__free(void *p)
{
    free(p);
}

void duro_free(void *p)
{
    free(p);
}

char *duro__strdup(const char *s)
{
    if (s == NULL)
        return NULL;
    return duro__strndup(s, strlen(s));
}

char *duro__strndup(const char *s, size_t n)
{
    if (s == NULL || n > DURO__ALLOC_MAX)
        return NULL;
    char *d = duro__malloc(n + 1);
    if (d == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *duro__vsprintf(const char *fmt, va_list ap)
{
    if (fmt == NULL)
        return NULL;
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return NULL;
    char *s = duro__malloc((size_t)n + 1);
    if (s == NULL)
        return NULL;
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *duro__sprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = duro__vsprintf(fmt, ap);
    va_end(ap);
    return s;
}

void *duro__vec_push(void **data, size_t *count, size_t *cap, size_t elem_size)
{
    if (*count == *cap) {
        /* The doubled capacity, in elements and in bytes, must not pass
         * DURO__ALLOC_MAX (which also keeps both products from wrapping). */
        if (elem_size == 0 || *cap > DURO__ALLOC_MAX / 2 / elem_size)
            return NULL;
        size_t ncap = *cap ? *cap * 2 : 8;
        if (ncap > DURO__ALLOC_MAX / elem_size)
            return NULL;
        void *nd = duro__realloc(*data, ncap * elem_size);
        if (nd == NULL)
            return NULL;
        *data = nd;
        *cap = ncap;
    }
    void *p = (char *)*data + *count * elem_size;
    memset(p, 0, elem_size);
    (*count)++;
    return p;
}
