/* shared.c - one object per store per process, found by key: the
 * in-process notifiers of sql/notify.c (a client and a runtime of one process
 * open their own providers on one store, and an enqueue through one must
 * wake the other). Reference-counted by the providers that use it; made by
 * its owner, freed by it when the last one lets go. Any thread. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "providers/sql/sql.h"

static _Atomic uint64_t next_serial = 1;

duro__sql_shared *duro__sql_shared_attach(duro__sql_registry *r,
                                          const char *key,
                                          duro__sql_shared *(*make)(void *arg),
                                          void *arg)
{
    pthread_mutex_lock(&r->lock);
    pid_t self = getpid();
    duro__sql_shared *s = key[0] != '\0' ? r->head : NULL;
    while (s != NULL && (s->pid != self || strcmp(s->key, key) != 0))
        s = s->next;
    if (s != NULL) {
        s->refs++;
    } else if ((s = make(arg)) != NULL) {
        s->refs = 1;
        s->pid = self;
        s->serial = atomic_fetch_add(&next_serial, 1);
        if (key[0] != '\0') {
            s->next = r->head;
            r->head = s;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return s;
}

int duro__sql_shared_detach(duro__sql_registry *r, duro__sql_shared *s)
{
    pthread_mutex_lock(&r->lock);
    int last = --s->refs == 0;
    if (last) {
        duro__sql_shared **at = &r->head;
        while (*at != NULL && *at != s)
            at = &(*at)->next;
        if (*at == s)
            *at = s->next;
    }
    pthread_mutex_unlock(&r->lock);
    return last;
}

void duro__sql_shared_release(duro__sql_registry *r, duro__sql_shared *s,
                              void (*destroy)(duro__sql_shared *s))
{
    if (s != NULL && duro__sql_shared_detach(r, s))
        destroy(s);
}
