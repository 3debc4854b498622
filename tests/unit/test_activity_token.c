/* test_activity_token.c - the activity's cancellation token across the end
 * of the activity: a thread the activity started, blocked in
 * duro_activity_wait_cancelled() when the activity returns (its context
 * and the context's token reference freed), still wakes when the token
 * fires, on a token that is still alive. No runtime: the context and the
 * references are made as the worker makes them. */
#include <pthread.h>
#include <stdatomic.h>

#include "runtime/runtime.h"
#include "test.h"

static duro_activity *shared_a;
static _Atomic int waiter_result = -1;

static void *waiter(void *arg)
{
    (void)arg;
    atomic_store(&waiter_result, duro_activity_wait_cancelled(shared_a, 60000));
    return NULL;
}

TEST(a_wait_under_way_when_the_activity_returns_ends_normally)
{
    duro_cancel_token *t = duro__token_create(); /* the context's reference */
    CHECK(t != NULL);
    duro__token_retain(t); /* the manager's, which fires it later */
    duro_activity *a = duro__calloc(1, sizeof(*a));
    CHECK(a != NULL);
    a->token = t;
    shared_a = a;
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, waiter, NULL), 0);
    /* the waiter holds a reference of its own once it waits */
    WAIT_UNTIL(atomic_load(&t->refs) == 3, 30000);
    /* the activity returns: its context and reference go */
    shared_a = NULL;
    duro__free(a);
    duro_cancel_token_release(t);
    CHECK_EQ(atomic_load(&waiter_result), -1); /* still waiting */
    /* the manager fires the token (a late cancel) and lets it go */
    duro__token_fire(t, "instance_cancelled");
    duro_cancel_token_release(t);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(atomic_load(&waiter_result), 1);
}

TEST_MAIN(T(a_wait_under_way_when_the_activity_returns_ends_normally))
