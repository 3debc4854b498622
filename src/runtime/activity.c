/* activity.c - the activity context and its cancellation token. A token is
 * reference-counted so threads an activity starts can keep it after the
 * activity returns; firing it wakes blocked waiters and makes its eventfd
 * readable. Every function here may be called from any thread. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"

duro_cancel_token *duro__token_create(void)
{
    duro_cancel_token *t = duro__calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    atomic_init(&t->refs, 1);
    atomic_init(&t->fired, 0);
    pthread_mutex_init(&t->lock, NULL);
    duro__cond_init_monotonic(&t->cond);
    t->efd = -1;
    return t;
}

void duro__token_retain(duro_cancel_token *t)
{
    atomic_fetch_add(&t->refs, 1);
}

void duro_cancel_token_release(duro_cancel_token *t)
{
    if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    if (t->efd >= 0)
        close(t->efd);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    duro__free(t);
}

int duro__token_fire(duro_cancel_token *t, const char *reason)
{
    pthread_mutex_lock(&t->lock);
    int first = !atomic_load(&t->fired);
    if (first) {
        snprintf(t->reason, sizeof(t->reason), "%s", reason ? reason : "");
        t->fired_mono_ns = duro__mono_ns();
        atomic_store(&t->fired, 1);
        pthread_cond_broadcast(&t->cond);
        if (t->efd >= 0) {
            uint64_t one = 1;
            ssize_t n = write(t->efd, &one, sizeof(one));
            (void)n;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return first;
}

int duro_cancel_token_cancelled(duro_cancel_token *t)
{
    return t != NULL && atomic_load(&t->fired);
}

int duro_cancel_token_wait(duro_cancel_token *t, int64_t timeout_ms)
{
    if (t == NULL)
        return 0;
    if (atomic_load(&t->fired))
        return 1;
    struct timespec deadline;
    if (timeout_ms >= 0)
        duro__deadline_ts(&deadline, timeout_ms);
    pthread_mutex_lock(&t->lock);
    while (!atomic_load(&t->fired)) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&t->cond, &t->lock);
        } else if (pthread_cond_timedwait(&t->cond, &t->lock, &deadline) ==
                   ETIMEDOUT) {
            break;
        }
    }
    int fired = atomic_load(&t->fired);
    pthread_mutex_unlock(&t->lock);
    return fired;
}

int duro_cancel_token_fd(duro_cancel_token *t)
{
    if (t == NULL)
        return duro__fail(DURO_INVALID, "token is NULL"), -1;
    pthread_mutex_lock(&t->lock);
    if (t->efd < 0) {
        t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (t->efd >= 0 && atomic_load(&t->fired)) {
            uint64_t one = 1;
            ssize_t n = write(t->efd, &one, sizeof(one));
            (void)n;
        }
    }
    int fd = t->efd;
    pthread_mutex_unlock(&t->lock);
    if (fd < 0)
        duro__fail(DURO_ERROR, "eventfd: %s", strerror(errno));
    return fd;
}

/* ---- the activity context ------------------------------------------------ */

const char *duro_activity_instance_id(duro_activity *a)
{
    return a ? a->instance_id : NULL;
}

uint64_t duro_activity_execution_id(duro_activity *a)
{
    return a ? a->execution_id : 0;
}

const char *duro_activity_name(duro_activity *a)
{
    return a ? a->name : NULL;
}

uint64_t duro_activity_id(duro_activity *a)
{
    return a ? a->activity_id : 0;
}

uint32_t duro_activity_attempt(duro_activity *a)
{
    return a ? a->attempt : 0;
}

uint32_t duro_activity_delivery(duro_activity *a)
{
    return a ? a->delivery : 0;
}

const char *duro_activity_input(duro_activity *a)
{
    return a ? a->input : NULL;
}

void *duro_activity_user(duro_activity *a)
{
    return a ? a->user : NULL;
}

int duro_activity_cancelled(duro_activity *a)
{
    return a != NULL && duro_cancel_token_cancelled(a->token);
}

int duro_activity_wait_cancelled(duro_activity *a, int64_t timeout_ms)
{
    if (a == NULL)
        return 0;
    /* A reference for the wait: a thread of the activity's may be blocked
     * here when the activity returns and its context (and reference) go. */
    duro_cancel_token *t = a->token;
    duro__token_retain(t);
    int fired = duro_cancel_token_wait(t, timeout_ms);
    duro_cancel_token_release(t);
    return fired;
}

int duro_activity_cancel_fd(duro_activity *a)
{
    if (a == NULL)
        return duro__fail(DURO_INVALID, "activity is NULL"), -1;
    return duro_cancel_token_fd(a->token);
}

const char *duro_activity_cancel_reason(duro_activity *a)
{
    if (a == NULL || !atomic_load(&a->token->fired))
        return NULL;
    return a->token->reason[0] ? a->token->reason : NULL;
}

duro_cancel_token *duro_activity_cancel_token(duro_activity *a)
{
    if (a == NULL)
        return NULL;
    duro__token_retain(a->token);
    return a->token;
}
