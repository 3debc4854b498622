/* pool.c - a stack of idle connections both stores keep (SQLite's readers,
 * PostgreSQL's connections): a thread takes one for the length of its
 * reads or transaction and gives it back; a taker waits while none is
 * idle. The connections are the dialect's; the pool holds their pointers.
 * Any thread; its lock is taken with no other held but the dialect's
 * outer ones (sqlite's write_lock). */
#include "providers/sql/sql.h"

void duro__sql_pool_init(duro__sql_pool *pool)
{
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->cond, NULL);
    pool->idle = NULL;
    pool->count = 0;
}

int duro__sql_pool_reserve(duro__sql_pool *pool, int size)
{
    pool->idle = duro__calloc((size_t)size, sizeof(*pool->idle));
    return pool->idle != NULL ? DURO_OK : DURO_NOMEM;
}

void duro__sql_pool_destroy(duro__sql_pool *pool)
{
    duro__free(pool->idle);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->cond);
}

void *duro__sql_pool_take(duro__sql_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    while (pool->count == 0)
        pthread_cond_wait(&pool->cond, &pool->lock);
    void *c = pool->idle[--pool->count];
    pthread_mutex_unlock(&pool->lock);
    return c;
}

void duro__sql_pool_give(duro__sql_pool *pool, void *c)
{
    pthread_mutex_lock(&pool->lock);
    pool->idle[pool->count++] = c;
    pthread_cond_signal(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
}
