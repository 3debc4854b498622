/* test_fiber.c - the fiber module: sequencing, many fibers, migration across
 * threads, destroy without unwinding, misuse, stack size, guard page (in a
 * forked child), the stack pool and lazily committed stack pages.
 * Fiber functions never CHECK (a failed CHECK longjmps out of the test, which
 * must not happen from a fiber stack): they record, the test body checks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/base.h"
#include "core/fiber.h"
#include "test.h"

#if defined(DURO_SANITIZE_BUILD) || defined(__SANITIZE_ADDRESS__) ||           \
    defined(__SANITIZE_THREAD__)
#define SANITIZER_BUILD 1
#endif

#define WAIT_MS 30000 /* deadline for every cross-thread handoff */

/* ---- helpers ---------------------------------------------------------- */

static _Thread_local int thread_tag; /* set by each test thread */

/* Reads the calling thread's tag afresh (see docs/fibers.md: code on a fiber
 * reads thread-locals only through non-inlined functions). */
__attribute__((noinline)) static int read_thread_tag(void)
{
    __asm__ volatile("" ::: "memory");
    return thread_tag;
}

__attribute__((noinline)) static void write_thread_tag(int tag)
{
    __asm__ volatile("" ::: "memory");
    thread_tag = tag;
}

/* pthread_self() is declared __attribute__((const)), so a compiler may call
 * it once and reuse the value after a yield that moved the fiber to another
 * thread. Fiber code asks through a non-inlined function instead. */
__attribute__((noinline)) static pthread_t running_thread(void)
{
    __asm__ volatile("" ::: "memory");
    return pthread_self();
}

/* Waits on c until *flag == want, with a deadline; 0 on timeout. */
static int wait_for(pthread_mutex_t *m, pthread_cond_t *c, const int *flag,
                    int want)
{
    struct timespec ts;
    duro__deadline_ts(&ts, WAIT_MS);
    while (*flag != want)
        if (pthread_cond_timedwait(c, m, &ts) == ETIMEDOUT)
            return *flag == want;
    return 1;
}

/* ---- sequencing -------------------------------------------------------- */

typedef struct exchange {
    int in;                /* written by the test between resumes */
    int out;               /* written by the fiber */
    int steps;             /* how many times the fiber ran */
    int yield_rc;          /* last duro__fiber_yield() result */
    duro__fiber *current;  /* duro__fiber_current() as seen by the fiber */
    duro__fiber *expected; /* the fiber itself */
} exchange;

static void doubling_fn(void *arg)
{
    exchange *x = arg;
    for (int i = 0; i < 3; i++) {
        x->steps++;
        x->out = x->in * 2;
        x->current = duro__fiber_current();
        x->yield_rc = duro__fiber_yield();
    }
    x->out = -1;
}

TEST(create_resume_yield_done_sequence)
{
    exchange x = {0};
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(0, doubling_fn, &x, &f));
    CHECK(f != NULL);
    x.expected = f;
    CHECK_EQ(duro__fiber_done(f), 0);
    CHECK_EQ(x.steps, 0); /* creation does not run the function */
    for (int i = 1; i <= 3; i++) {
        x.in = i * 10;
        CHECK_OK(duro__fiber_resume(f));
        CHECK_EQ(x.steps, i);
        CHECK_EQ(x.out, i * 20);
        CHECK(x.current == f);
        CHECK_EQ(duro__fiber_done(f), 0);
    }
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(x.yield_rc, DURO_OK);
    CHECK_EQ(x.out, -1);
    CHECK_EQ(x.steps, 3);
    CHECK_EQ(duro__fiber_done(f), 1);
    CHECK(duro__fiber_current() == NULL);
    duro__fiber_destroy(f);
}

typedef struct counter {
    int limit;
    int count;
    long long sum; /* of a stack local, to show it survives each switch */
} counter;

static void many_yields_fn(void *arg)
{
    counter *c = arg;
    long long local = 0;
    for (int i = 0; i < c->limit; i++) {
        local += i;
        c->count++;
        duro__fiber_yield();
    }
    c->sum = local;
}

TEST(fiber_yields_many_times)
{
    counter c = {.limit = 10000};
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(0, many_yields_fn, &c, &f));
    int resumes = 0;
    while (!duro__fiber_done(f)) {
        CHECK_OK(duro__fiber_resume(f));
        resumes++;
        CHECK(resumes <= c.limit + 1);
    }
    CHECK_EQ(resumes, c.limit + 1);
    CHECK_EQ(c.count, c.limit);
    CHECK_EQ(c.sum, (long long)c.limit * (c.limit - 1) / 2);
    duro__fiber_destroy(f);
}

static void set_flag_fn(void *arg)
{
    *(int *)arg = 42;
}

TEST(fiber_returns_without_yielding)
{
    int flag = 0;
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(0, set_flag_fn, &flag, &f));
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(flag, 42);
    CHECK_EQ(duro__fiber_done(f), 1);
    duro__fiber_destroy(f);
}

/* ---- 1,000 fibers ----------------------------------------------------- */

typedef struct worker_fiber {
    int id;
    int yields;        /* how many times to yield */
    uint64_t result;   /* computed from stack locals */
    int turns;         /* resumes seen */
    int wrong_current; /* duro__fiber_current() mismatches */
    duro__fiber *self;
} worker_fiber;

static void worker_fn(void *arg)
{
    worker_fiber *w = arg;
    volatile uint64_t acc[8];
    for (int i = 0; i < 8; i++)
        acc[i] = (uint64_t)(w->id + i);
    for (int k = 0; k < w->yields; k++) {
        w->turns++;
        if (duro__fiber_current() != w->self)
            w->wrong_current++;
        for (int i = 0; i < 8; i++)
            acc[i] = acc[i] * 3 + (uint64_t)k;
        duro__fiber_yield();
    }
    uint64_t r = 0;
    for (int i = 0; i < 8; i++)
        r ^= acc[i];
    w->result = r;
}

static uint64_t worker_expected(int id, int yields)
{
    uint64_t acc[8];
    for (int i = 0; i < 8; i++)
        acc[i] = (uint64_t)(id + i);
    for (int k = 0; k < yields; k++)
        for (int i = 0; i < 8; i++)
            acc[i] = acc[i] * 3 + (uint64_t)k;
    uint64_t r = 0;
    for (int i = 0; i < 8; i++)
        r ^= acc[i];
    return r;
}

TEST(thousand_suspended_fibers_interleaved)
{
    enum { N = 1000 };
    worker_fiber *w = calloc(N, sizeof(*w));
    duro__fiber **f = calloc(N, sizeof(*f));
    CHECK(w != NULL && f != NULL);
    for (int i = 0; i < N; i++) {
        w[i].id = i;
        w[i].yields = 1 + i % 13;
        CHECK_OK(duro__fiber_create(64 * 1024, worker_fn, &w[i], &f[i]));
        w[i].self = f[i];
    }
    /* Everyone runs once before anyone finishes: all N are suspended at
     * once. Then sweeps alternate direction so the order interleaves. */
    int alive = N, sweep = 0;
    while (alive > 0) {
        CHECK(sweep < 100);
        for (int j = 0; j < N; j++) {
            int i = (sweep % 2 == 0) ? j : N - 1 - j;
            if (duro__fiber_done(f[i]))
                continue;
            CHECK_OK(duro__fiber_resume(f[i]));
            if (duro__fiber_done(f[i]))
                alive--;
        }
        sweep++;
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(w[i].turns, w[i].yields);
        CHECK_EQ(w[i].wrong_current, 0);
        CHECK(w[i].result == worker_expected(i, w[i].yields));
        duro__fiber_destroy(f[i]);
    }
    free(w);
    free(f);
}

/* ---- migration -------------------------------------------------------- */

enum { HOPS = 3 };

typedef struct migration {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int turn; /* index of the thread whose resume is next */
    duro__fiber *fiber;
    /* Recorded by the fiber at each hop. */
    pthread_t seen_thread[HOPS];
    int seen_tag[HOPS];
    duro__fiber *seen_current[HOPS];
    void *seen_local_address[HOPS];
    int locals_ok;
    /* Recorded by the threads. */
    pthread_t thread_id[HOPS];
    int resume_rc[HOPS];
    int timed_out;
} migration;

static void migrating_fn(void *arg)
{
    migration *m = arg;
    volatile int locals[64];
    char text[16] = "hop";
    for (int i = 0; i < 64; i++)
        locals[i] = i * 7;
    for (int hop = 0; hop < HOPS; hop++) {
        m->seen_thread[hop] = running_thread();
        m->seen_tag[hop] = read_thread_tag();
        m->seen_current[hop] = duro__fiber_current();
        m->seen_local_address[hop] = (void *)&locals[0];
        for (int i = 0; i < 64; i++)
            locals[i] += hop + 1;
        text[3] = (char)('0' + hop);
        text[4] = '\0';
        if (hop + 1 < HOPS)
            duro__fiber_yield();
    }
    int ok = strcmp(text, "hop2") == 0;
    for (int i = 0; i < 64; i++)
        ok = ok && locals[i] == i * 7 + 1 + 2 + 3;
    m->locals_ok = ok;
}

typedef struct hop_thread {
    migration *m;
    int index;
} hop_thread;

static void *hop_thread_main(void *arg)
{
    hop_thread *h = arg;
    migration *m = h->m;
    write_thread_tag(100 + h->index);
    pthread_mutex_lock(&m->lock);
    if (!wait_for(&m->lock, &m->cond, &m->turn, h->index)) {
        m->timed_out = 1;
        pthread_mutex_unlock(&m->lock);
        return NULL;
    }
    pthread_mutex_unlock(&m->lock);
    /* The turn protocol makes this thread the fiber's only resumer now. */
    m->thread_id[h->index] = pthread_self();
    m->resume_rc[h->index] = duro__fiber_resume(m->fiber);
    pthread_mutex_lock(&m->lock);
    m->turn++;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

TEST(fiber_migrates_across_three_threads)
{
    migration m;
    memset(&m, 0, sizeof(m));
    pthread_mutex_init(&m.lock, NULL);
    duro__cond_init_monotonic(&m.cond);
    CHECK_OK(duro__fiber_create(0, migrating_fn, &m, &m.fiber));
    pthread_t threads[HOPS];
    hop_thread h[HOPS];
    for (int i = 0; i < HOPS; i++) {
        h[i].m = &m;
        h[i].index = i;
        CHECK_EQ(pthread_create(&threads[i], NULL, hop_thread_main, &h[i]), 0);
    }
    for (int i = 0; i < HOPS; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ(m.timed_out, 0);
    CHECK_EQ(m.turn, HOPS);
    for (int i = 0; i < HOPS; i++) {
        CHECK_RC(m.resume_rc[i], DURO_OK);
        CHECK(pthread_equal(m.seen_thread[i], m.thread_id[i]));
        CHECK_EQ(m.seen_tag[i], 100 + i); /* that thread's TLS, not stale */
        CHECK(m.seen_current[i] == m.fiber);
        CHECK(m.seen_local_address[i] == m.seen_local_address[0]);
    }
    CHECK(!pthread_equal(m.thread_id[0], m.thread_id[1]));
    CHECK(!pthread_equal(m.thread_id[1], m.thread_id[2]));
    CHECK(!pthread_equal(m.thread_id[0], m.thread_id[2]));
    CHECK_EQ(m.locals_ok, 1);
    CHECK_EQ(duro__fiber_done(m.fiber), 1);
    CHECK(duro__fiber_current() == NULL);
    duro__fiber_destroy(m.fiber);
    pthread_cond_destroy(&m.cond);
    pthread_mutex_destroy(&m.lock);
}

/* Fibers in a shared run queue, resumed by whichever of four threads takes
 * them, so most resumes land on a different thread than the last one. */
enum { SHARED_FIBERS = 64, SHARED_YIELDS = 200, SHARED_THREADS = 4 };

typedef struct shared_fiber {
    duro__fiber *fiber;
    int expected_tag;  /* the resuming thread's tag, written before resume */
    int wrong_tag;     /* TLS reads that saw another thread's value */
    int wrong_current; /* duro__fiber_current() mismatches */
    int moves;         /* resumes on a different thread than the last */
    long long sum;
    long long expected_sum;
} shared_fiber;

static void shared_fn(void *arg)
{
    shared_fiber *s = arg;
    long long local = 0;
    int last_tag = read_thread_tag();
    for (int k = 0; k < SHARED_YIELDS; k++) {
        int tag = read_thread_tag();
        if (tag != s->expected_tag)
            s->wrong_tag++;
        if (tag != last_tag)
            s->moves++;
        last_tag = tag;
        if (duro__fiber_current() != s->fiber)
            s->wrong_current++;
        local += k * (long long)s->expected_sum;
        duro__fiber_yield();
    }
    s->sum = local;
}

typedef struct run_queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    shared_fiber *items[SHARED_FIBERS];
    int head, count; /* ring buffer */
    int done;        /* fibers finished */
    int errors;      /* failed resumes or timeouts */
} run_queue;

typedef struct queue_worker {
    run_queue *q;
    int tag;
} queue_worker;

static void *queue_worker_main(void *arg)
{
    queue_worker *w = arg;
    run_queue *q = w->q;
    write_thread_tag(w->tag);
    struct timespec ts;
    duro__deadline_ts(&ts, WAIT_MS);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (q->count == 0 && q->done < SHARED_FIBERS)
            if (pthread_cond_timedwait(&q->cond, &q->lock, &ts) == ETIMEDOUT) {
                q->errors++;
                pthread_mutex_unlock(&q->lock);
                return NULL;
            }
        if (q->done == SHARED_FIBERS)
            break;
        shared_fiber *s = q->items[q->head];
        q->head = (q->head + 1) % SHARED_FIBERS;
        q->count--;
        pthread_mutex_unlock(&q->lock);

        s->expected_tag = w->tag;
        int rc = duro__fiber_resume(s->fiber);

        pthread_mutex_lock(&q->lock);
        if (rc != DURO_OK)
            q->errors++;
        if (rc != DURO_OK || duro__fiber_done(s->fiber)) {
            q->done++;
        } else {
            q->items[(q->head + q->count) % SHARED_FIBERS] = s;
            q->count++;
        }
        pthread_cond_broadcast(&q->cond);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

TEST(fibers_migrate_between_four_threads)
{
    run_queue q;
    memset(&q, 0, sizeof(q));
    pthread_mutex_init(&q.lock, NULL);
    duro__cond_init_monotonic(&q.cond);
    shared_fiber s[SHARED_FIBERS];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < SHARED_FIBERS; i++) {
        s[i].expected_sum = i + 1;
        CHECK_OK(duro__fiber_create(32 * 1024, shared_fn, &s[i], &s[i].fiber));
        q.items[i] = &s[i];
    }
    q.count = SHARED_FIBERS;
    pthread_t threads[SHARED_THREADS];
    queue_worker w[SHARED_THREADS];
    for (int i = 0; i < SHARED_THREADS; i++) {
        w[i].q = &q;
        w[i].tag = 1000 + i;
        CHECK_EQ(pthread_create(&threads[i], NULL, queue_worker_main, &w[i]),
                 0);
    }
    for (int i = 0; i < SHARED_THREADS; i++)
        pthread_join(threads[i], NULL);
    CHECK_EQ(q.errors, 0);
    CHECK_EQ(q.done, SHARED_FIBERS);
    int moves = 0;
    for (int i = 0; i < SHARED_FIBERS; i++) {
        CHECK_EQ(duro__fiber_done(s[i].fiber), 1);
        CHECK_EQ(s[i].wrong_tag, 0);
        CHECK_EQ(s[i].wrong_current, 0);
        CHECK_EQ(s[i].sum, (long long)SHARED_YIELDS * (SHARED_YIELDS - 1) / 2 *
                               s[i].expected_sum);
        moves += s[i].moves;
        duro__fiber_destroy(s[i].fiber);
    }
    fprintf(stderr, "  %d resumes moved to another thread\n", moves);
    pthread_cond_destroy(&q.cond);
    pthread_mutex_destroy(&q.lock);
}

/* ---- threads with their own fibers ------------------------------------ */

enum { OWN_THREADS = 4, OWN_FIBERS = 100 };

typedef struct own_thread {
    int index;
    int errors;
} own_thread;

static void *own_thread_main(void *arg)
{
    own_thread *t = arg;
    worker_fiber w[OWN_FIBERS];
    duro__fiber *f[OWN_FIBERS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < OWN_FIBERS; i++) {
        w[i].id = t->index * OWN_FIBERS + i;
        w[i].yields = 1 + i % 50;
        if (duro__fiber_create(32 * 1024, worker_fn, &w[i], &f[i]) != DURO_OK) {
            t->errors++;
            return NULL;
        }
        w[i].self = f[i];
    }
    int alive = OWN_FIBERS;
    while (alive > 0)
        for (int i = 0; i < OWN_FIBERS; i++) {
            if (duro__fiber_done(f[i]))
                continue;
            if (duro__fiber_current() != NULL ||
                duro__fiber_resume(f[i]) != DURO_OK) {
                t->errors++;
                return NULL;
            }
            if (duro__fiber_done(f[i]))
                alive--;
        }
    for (int i = 0; i < OWN_FIBERS; i++) {
        if (w[i].turns != w[i].yields || w[i].wrong_current != 0 ||
            w[i].result != worker_expected(w[i].id, w[i].yields))
            t->errors++;
        duro__fiber_destroy(f[i]);
    }
    return NULL;
}

TEST(four_threads_run_their_own_fibers)
{
    pthread_t threads[OWN_THREADS];
    own_thread t[OWN_THREADS];
    memset(t, 0, sizeof(t));
    for (int i = 0; i < OWN_THREADS; i++) {
        t[i].index = i;
        CHECK_EQ(pthread_create(&threads[i], NULL, own_thread_main, &t[i]), 0);
    }
    for (int i = 0; i < OWN_THREADS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < OWN_THREADS; i++)
        CHECK_EQ(t[i].errors, 0);
}

/* ---- destroy ---------------------------------------------------------- */

static void must_not_run_fn(void *arg)
{
    *(int *)arg = 1;
}

/* Deep frames with live locals and (under ASan) redzones, left behind when
 * the suspended fiber is destroyed. */
__attribute__((noinline)) static int deep_then_yield(int depth,
                                                     volatile int *reached)
{
    volatile char buf[512];
    for (int i = 0; i < 512; i++)
        buf[i] = (char)(depth + i);
    if (depth == 0) {
        *reached = 1;
        duro__fiber_yield();
        *reached = 2; /* never: the fiber is destroyed while suspended */
        return buf[7];
    }
    return deep_then_yield(depth - 1, reached) + buf[depth % 512];
}

static void deep_suspend_fn(void *arg)
{
    deep_then_yield(40, arg);
}

/* Writes every byte of a big local array: on a reused stack this covers the
 * addresses where the destroyed fiber's frames and redzones were. */
static void fill_stack_fn(void *arg)
{
    volatile char big[40 * 1024];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)i;
    long sum = 0;
    for (size_t i = 0; i < sizeof(big); i += 512)
        sum += big[i];
    *(long *)arg = sum;
}

TEST(destroy_in_every_state)
{
    int ran = 0;
    duro__fiber *never = NULL;
    CHECK_OK(duro__fiber_create(0, must_not_run_fn, &ran, &never));
    duro__fiber_destroy(never);
    CHECK_EQ(ran, 0);

    volatile int reached = 0;
    duro__fiber *suspended = NULL;
    CHECK_OK(duro__fiber_create(64 * 1024, deep_suspend_fn, (void *)&reached,
                                &suspended));
    CHECK_OK(duro__fiber_resume(suspended));
    CHECK_EQ(reached, 1);
    CHECK_EQ(duro__fiber_done(suspended), 0);
    void *old_base = duro__fiber_stack_base(suspended);
    duro__fiber_destroy(suspended);
    CHECK_EQ(reached, 1);

    /* The pool hands the same stack to the next fiber of that size; using
     * it all must be clean (under ASan: the old redzones were unpoisoned). */
    long sum = -1;
    duro__fiber *reuse = NULL;
    CHECK_OK(duro__fiber_create(64 * 1024, fill_stack_fn, &sum, &reuse));
    CHECK(duro__fiber_stack_base(reuse) == old_base);
    CHECK_OK(duro__fiber_resume(reuse));
    CHECK_EQ(duro__fiber_done(reuse), 1);
    long expected = 0;
    for (size_t i = 0; i < 40 * 1024; i += 512)
        expected += (char)i;
    CHECK_EQ(sum, expected);
    duro__fiber_destroy(reuse);

    duro__fiber_destroy(NULL);
}

/* ---- misuse ----------------------------------------------------------- */

typedef struct misuse {
    duro__fiber *self;
    duro__fiber *other;
    int resume_other_rc;
    int resume_self_rc;
    duro__fiber *current;
    int survived_self_destroy;
} misuse;

static void misuse_fn(void *arg)
{
    misuse *m = arg;
    m->current = duro__fiber_current();
    m->resume_other_rc = duro__fiber_resume(m->other);
    m->resume_self_rc = duro__fiber_resume(m->self);
    duro__fiber_destroy(m->self); /* ignored: it is running */
    duro__fiber_yield();
    m->survived_self_destroy = 1;
}

TEST(misuse_is_reported)
{
    CHECK(duro__fiber_current() == NULL);
    CHECK_RC(duro__fiber_yield(), DURO_MISUSE);
    CHECK_RC(duro__fiber_resume(NULL), DURO_INVALID);

    int flag = 0;
    misuse m = {0};
    CHECK_OK(duro__fiber_create(0, set_flag_fn, &flag, &m.other));
    CHECK_OK(duro__fiber_create(0, misuse_fn, &m, &m.self));
    CHECK_OK(duro__fiber_resume(m.self));
    CHECK(m.current == m.self);
    CHECK_RC(m.resume_other_rc, DURO_MISUSE);
    CHECK_RC(m.resume_self_rc, DURO_MISUSE);
    CHECK_EQ(flag, 0); /* the nested resume did not run it */
    CHECK(duro__fiber_current() == NULL);

    CHECK_OK(duro__fiber_resume(m.self));
    CHECK_EQ(m.survived_self_destroy, 1);
    CHECK_EQ(duro__fiber_done(m.self), 1);
    CHECK_RC(duro__fiber_resume(m.self), DURO_MISUSE);
    CHECK_RC(duro__fiber_resume(m.self), DURO_MISUSE);

    CHECK_OK(duro__fiber_resume(m.other));
    CHECK_EQ(flag, 42);
    CHECK_RC(duro__fiber_resume(m.other), DURO_MISUSE);
    duro__fiber_destroy(m.self);
    duro__fiber_destroy(m.other);
}

TEST(create_rejects_bad_arguments)
{
    duro__fiber *f = (duro__fiber *)&f;
    CHECK_RC(duro__fiber_create(0, NULL, NULL, &f), DURO_INVALID);
    CHECK(f == NULL);
    CHECK_RC(duro__fiber_create(0, set_flag_fn, NULL, NULL), DURO_INVALID);
    f = (duro__fiber *)&f;
    CHECK_RC(
        duro__fiber_create(DURO__FIBER_MAX_STACK + 1, set_flag_fn, NULL, &f),
        DURO_INVALID);
    CHECK(f == NULL);
    CHECK_RC(duro__fiber_create((size_t)-1, set_flag_fn, NULL, &f),
             DURO_INVALID);
}

TEST(create_reports_out_of_memory)
{
    duro__fiber *f = (duro__fiber *)&f;
    duro__alloc_fail_after(1, 0);
    int rc = duro__fiber_create(0, set_flag_fn, NULL, &f);
    duro__alloc_fail_after(0, 0);
    CHECK_RC(rc, DURO_NOMEM);
    CHECK(f == NULL);
    /* And the next one works. */
    int flag = 0;
    CHECK_OK(duro__fiber_create(0, set_flag_fn, &flag, &f));
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(flag, 42);
    duro__fiber_destroy(f);
}

/* In a child (a lowered RLIMIT_AS is not undone): a stack mapping the
 * kernel refuses comes back as DURO_NOMEM. */
TEST(create_reports_mmap_failure)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        long pages = 0;
        FILE *statm = fopen("/proc/self/statm", "r");
        if (statm == NULL || fscanf(statm, "%ld", &pages) != 1)
            _exit(10);
        fclose(statm);
        rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
        struct rlimit lim = {now + 64 * 1024 * 1024, now + 64 * 1024 * 1024};
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(11);
        duro__fiber *f = (duro__fiber *)&f;
        int rc = duro__fiber_create(512 * 1024 * 1024, set_flag_fn, NULL, &f);
        if (rc != DURO_NOMEM)
            _exit(12);
        if (f != NULL)
            _exit(13);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---- stacks ----------------------------------------------------------- */

typedef struct stack_probe {
    size_t want;          /* bytes of stack to use */
    uintptr_t top;        /* frame address of the fiber's first frame */
    size_t used;          /* deepest distance reached */
    int intact;           /* every frame's buffer survived the recursion */
    volatile int *enough; /* for the overflow: never set */
} stack_probe;

__attribute__((noinline)) static int use_stack(stack_probe *p, int depth)
{
    volatile unsigned char buf[512];
    for (int i = 0; i < 512; i++)
        buf[i] = (unsigned char)(depth * 31 + i);
    /* The frame address, not &buf: ASan's use-after-return mode moves
     * locals to a heap "fake stack". */
    size_t used = p->top - (uintptr_t)__builtin_frame_address(0);
    if (used > p->used)
        p->used = used;
    int intact = 1;
    if (used < p->want)
        intact = use_stack(p, depth + 1);
    for (int i = 0; i < 512; i++)
        intact = intact && buf[i] == (unsigned char)(depth * 31 + i);
    return intact;
}

static void use_stack_fn(void *arg)
{
    stack_probe *p = arg;
    p->top = (uintptr_t)__builtin_frame_address(0);
    p->intact = use_stack(p, 0);
}

TEST(stack_size_is_honoured)
{
    stack_probe p = {.want = 48 * 1024};
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(64 * 1024, use_stack_fn, &p, &f));
    CHECK_INT(duro__fiber_stack_size(f), >=, 64 * 1024);
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(duro__fiber_done(f), 1);
    CHECK_INT(p.used, >=, 48 * 1024);
    CHECK_EQ(p.intact, 1);
    duro__fiber_destroy(f);

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    CHECK_OK(duro__fiber_create(0, set_flag_fn, NULL, &f));
    CHECK_EQ(duro__fiber_stack_size(f), DURO__FIBER_DEFAULT_STACK);
    duro__fiber_destroy(f);
    CHECK_OK(duro__fiber_create(1, set_flag_fn, NULL, &f));
    CHECK_EQ(duro__fiber_stack_size(f), DURO__FIBER_MIN_STACK);
    duro__fiber_destroy(f);
    CHECK_OK(duro__fiber_create(100 * 1024 + 1, set_flag_fn, NULL, &f));
    CHECK_INT(duro__fiber_stack_size(f), >=, 100 * 1024 + 1);
    CHECK_EQ(duro__fiber_stack_size(f) % page, 0);
    CHECK_INT(duro__fiber_stack_size(f), <, 100 * 1024 + 1 + page);
    duro__fiber_destroy(f);
}

static volatile int recursion_limit = 1 << 30;

__attribute__((noinline)) static int recurse_deep(int depth)
{
    volatile char buf[256];
    buf[0] = (char)depth;
    buf[255] = (char)depth;
    if (depth >= recursion_limit)
        return buf[0];
    return recurse_deep(depth + 1) + buf[255];
}

static void overflow_fn(void *arg)
{
    (void)arg;
    recurse_deep(0);
}

static int guard_pipe_fd = -1;
static uintptr_t guard_low, guard_high;

/* On the alternate stack: reports whether the fault hit the guard page, then
 * restores the default action; the faulting write repeats and kills the
 * process with SIGSEGV. */
static void guard_segv_handler(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t a = (uintptr_t)info->si_addr;
    char c = (a >= guard_low && a < guard_high) ? 'G' : 'X';
    ssize_t n = write(guard_pipe_fd, &c, 1);
    (void)n;
    signal(sig, SIG_DFL);
}

TEST(stack_overflow_hits_guard_page)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        guard_pipe_fd = fds[1];
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        duro__fiber *f = NULL;
        if (duro__fiber_create(DURO__FIBER_MIN_STACK, overflow_fn, NULL, &f) !=
            DURO_OK)
            _exit(20);
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        guard_high = (uintptr_t)duro__fiber_stack_base(f);
        guard_low = guard_high - page;
        static char alt_stack[64 * 1024];
        stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof(alt_stack)};
        if (sigaltstack(&ss, NULL) != 0)
            _exit(21);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = guard_segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, NULL) != 0)
            _exit(22);
        duro__fiber_resume(f);
        _exit(23); /* survived an unbounded recursion: no guard */
    }
    close(fds[1]);
    char c = '?';
    ssize_t n = read(fds[0], &c, 1);
    close(fds[0]);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    int exact = n == 1 && c == 'G' && WIFSIGNALED(status) &&
                WTERMSIG(status) == SIGSEGV;
#if defined(SANITIZER_BUILD)
    if (!exact) {
        /* The sanitizer's own SIGSEGV handling won; all that can be said is
         * that the child did not run on past its stack. */
        CHECK(WIFSIGNALED(status) ||
              (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
               WEXITSTATUS(status) != 23));
        fprintf(stderr, "  guard-page SIGSEGV check skipped under sanitizer "
                        "(child ended abnormally)\n");
        return;
    }
#endif
    CHECK_MSG(exact,
              "child: fault report '%c' (read %zd; 'G' = in the guard "
              "page), status 0x%x; expected a guard-page fault and death "
              "by SIGSEGV",
              c, n, (unsigned)status);
}

TEST(stack_pool_reuses_stacks)
{
    enum { ROUNDS = 10000 };
    duro__fiber_pool_stats before, after;
    duro__fiber_pool_stats_get(&before);
    int flag = 0, failures = 0;
    for (int i = 0; i < ROUNDS; i++) {
        duro__fiber *f = NULL;
        if (duro__fiber_create(48 * 1024, set_flag_fn, &flag, &f) != DURO_OK) {
            failures++;
            continue;
        }
        if (i % 2 == 0 &&
            (duro__fiber_resume(f) != DURO_OK || !duro__fiber_done(f)))
            failures++;
        duro__fiber_destroy(f);
    }
    duro__fiber_pool_stats_get(&after);
    CHECK_EQ(failures, 0);
    CHECK_EQ(flag, 42);
    CHECK_INT(after.stacks_mapped - before.stacks_mapped, <=, 1);
    CHECK_INT(after.stacks_reused - before.stacks_reused, >=, ROUNDS - 1);
    CHECK_INT(after.stacks_pooled, >=, 1);

    /* The pool is bounded per size: freeing more at once than it keeps
     * pools DURO__FIBER_POOL_PER_SIZE of them and unmaps the rest. */
    enum { OVER = 50, MANY = DURO__FIBER_POOL_PER_SIZE + OVER };
    duro__fiber **f = calloc(MANY, sizeof(*f));
    CHECK(f != NULL);
    duro__fiber_pool_trim();
    for (int i = 0; i < MANY; i++)
        CHECK_OK(duro__fiber_create(40 * 1024, set_flag_fn, NULL, &f[i]));
    duro__fiber_pool_stats_get(&before);
    CHECK_EQ(before.stacks_pooled, 0);
    for (int i = 0; i < MANY; i++)
        duro__fiber_destroy(f[i]);
    free(f);
    duro__fiber_pool_stats_get(&after);
    CHECK_EQ(after.stacks_pooled, DURO__FIBER_POOL_PER_SIZE);
    CHECK_EQ(after.stacks_unmapped - before.stacks_unmapped, OVER);
    duro__fiber_pool_stats_get(&before);
    duro__fiber_pool_trim();
    duro__fiber_pool_stats_get(&after);
    CHECK_EQ(after.stacks_pooled, 0);
    CHECK_EQ(after.stacks_unmapped - before.stacks_unmapped,
             before.stacks_pooled);
}

static void touch_little_fn(void *arg)
{
    volatile char small[256];
    small[0] = 1;
    small[255] = 2;
    *(int *)arg = small[0] + small[255];
    duro__fiber_yield();
}

TEST(untouched_stack_pages_are_not_committed)
{
    duro__fiber_pool_trim(); /* a fresh mapping, not a used pooled one */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (size_t)4 * 1024 * 1024;
    int out = 0;
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(size, touch_little_fn, &out, &f));
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(out, 3);
    size_t pages = duro__fiber_stack_size(f) / page;
    unsigned char *vec = malloc(pages);
    CHECK(vec != NULL);
    CHECK_EQ(mincore(duro__fiber_stack_base(f), pages * page, vec), 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    free(vec);
    fprintf(stderr, "  %zu of %zu stack pages resident\n", resident, pages);
    CHECK_INT(resident, >=, 1);
    CHECK_INT(resident, <=, 16);
    duro__fiber_destroy(f);
    duro__fiber_pool_trim();
}

#if defined(__x86_64__)
typedef struct fp_state {
    unsigned before, after; /* rounding bits seen by the fiber */
} fp_state;

static void rounding_fn(void *arg)
{
    fp_state *s = arg;
    _mm_setcsr((_mm_getcsr() & ~0x6000u) | 0x4000u); /* round up */
    s->before = _mm_getcsr() & 0x6000u;
    duro__fiber_yield();
    s->after = _mm_getcsr() & 0x6000u;
    _mm_setcsr(_mm_getcsr() & ~0x6000u);
}

/* MXCSR is callee-saved: a fiber's rounding mode must not leak into the
 * thread that resumed it, and must survive the fiber's own suspension. */
TEST(floating_point_control_is_per_context)
{
    unsigned mine = _mm_getcsr() & 0x6000u;
    fp_state s = {0, 0};
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(0, rounding_fn, &s, &f));
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(s.before, 0x4000u);
    CHECK_EQ(_mm_getcsr() & 0x6000u, mine);
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(s.after, 0x4000u);
    CHECK_EQ(_mm_getcsr() & 0x6000u, mine);
    duro__fiber_destroy(f);
}
#else
TEST(floating_point_control_is_per_context)
{
    fprintf(stderr, "  skipped: MXCSR check is x86_64 only\n");
}
#endif

/* ---- cost ------------------------------------------------------------- */

static void ping_fn(void *arg)
{
    volatile int *stop = arg;
    while (!*stop)
        duro__fiber_yield();
}

/* Not a timed test: prints the cost of one resume + yield round trip. */
TEST(round_trip_cost)
{
    enum { ROUNDS = 200000 };
    volatile int stop = 0;
    duro__fiber *f = NULL;
    CHECK_OK(duro__fiber_create(0, ping_fn, (void *)&stop, &f));
    for (int i = 0; i < 1000; i++)
        CHECK_OK(duro__fiber_resume(f));
    int64_t start = duro__mono_ns();
    for (int i = 0; i < ROUNDS; i++)
        duro__fiber_resume(f);
    int64_t ns = duro__mono_ns() - start;
    stop = 1;
    CHECK_OK(duro__fiber_resume(f));
    CHECK_EQ(duro__fiber_done(f), 1);
    duro__fiber_destroy(f);
    fprintf(stderr, "  resume+yield round trip: %.1f ns (%s)\n",
            (double)ns / ROUNDS, duro__fiber_mechanism());
}

TEST_MAIN(T(create_resume_yield_done_sequence), T(fiber_yields_many_times),
          T(fiber_returns_without_yielding),
          T(thousand_suspended_fibers_interleaved),
          T(fiber_migrates_across_three_threads),
          T(fibers_migrate_between_four_threads),
          T(four_threads_run_their_own_fibers), T(destroy_in_every_state),
          T(misuse_is_reported), T(create_rejects_bad_arguments),
          T(create_reports_out_of_memory), T(create_reports_mmap_failure),
          T(stack_size_is_honoured), T(stack_overflow_hits_guard_page),
          T(stack_pool_reuses_stacks),
          T(untouched_stack_pages_are_not_committed),
          T(floating_point_control_is_per_context), T(round_trip_cost))
