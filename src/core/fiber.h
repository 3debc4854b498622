/* fiber.h - stackful coroutines on which orchestration functions run, so that
 * user code can await with blocking-style calls. A fiber may be resumed on a
 * different OS thread from the one it last ran on (never by two at once), and
 * a suspended fiber may be destroyed without unwinding. See docs/fibers.md. */
#ifndef DURO_FIBER_H
#define DURO_FIBER_H

#include <stddef.h>
#include <stdint.h>

typedef struct duro__fiber duro__fiber;
typedef void (*duro__fiber_fn)(void *arg);

/* Default usable stack size when duro__fiber_create() is passed 0. */
#define DURO__FIBER_DEFAULT_STACK ((size_t)256 * 1024)
/* Smallest usable stack: smaller requests are rounded up to it, so a PLT
 * lazy-binding trampoline or a sanitizer runtime call cannot overflow it. */
#define DURO__FIBER_MIN_STACK ((size_t)16 * 1024)
/* Largest stack duro__fiber_create() accepts (DURO_INVALID above it). */
#define DURO__FIBER_MAX_STACK ((size_t)1024 * 1024 * 1024)

/** Creates a suspended fiber that will run fn(arg) on its own stack of at
 * least stack_size bytes (rounded up to pages and to DURO__FIBER_MIN_STACK;
 * 0 means DURO__FIBER_DEFAULT_STACK) with an inaccessible guard page below
 * it, so an overflow dies by SIGSEGV instead of corrupting memory.
 * @param out receives the caller-owned fiber (free with
 *            duro__fiber_destroy()); set to NULL on failure.
 * @return DURO_OK; DURO_NOMEM when the struct or the stack mapping cannot be
 *         had; DURO_INVALID for a NULL fn or out, or a size above
 *         DURO__FIBER_MAX_STACK.
 * @note Any thread. */
int duro__fiber_create(size_t stack_size, duro__fiber_fn fn, void *arg,
                       duro__fiber **out);

/** Switches from the calling thread's current context into f and returns
 * when f yields or its function returns. f may have last run on another
 * thread.
 * @return DURO_OK; DURO_MISUSE when called from inside a fiber (no nesting),
 *         or when f is done or already running; DURO_INVALID for NULL.
 * @note One thread at a time per fiber: the caller guarantees that no two
 *       threads resume the same fiber at once (e.g. under a mutex). */
int duro__fiber_resume(duro__fiber *f);

/** From inside a running fiber: switches back to the duro__fiber_resume()
 * call that entered it. When this returns, the fiber has been resumed again,
 * possibly on another thread: do not keep thread-local addresses or thread
 * identity across it.
 * @return DURO_OK; DURO_MISUSE when not called on a fiber.
 * @note Only inside a fiber. */
int duro__fiber_yield(void);

/** 1 once the fiber's function has returned, else 0.
 * @note One thread at a time per fiber. */
int duro__fiber_done(const duro__fiber *f);

/** The fiber running on the calling thread, NULL on a plain thread stack.
 * @note Any thread. */
duro__fiber *duro__fiber_current(void);

/** Frees a fiber that is suspended (never started, or yielded) or done; its
 * stack is discarded without unwinding, so anything its frames own leaks.
 * NULL is a no-op. Called on a running fiber it does nothing (misuse).
 * @note One thread at a time per fiber, never from the fiber itself. */
void duro__fiber_destroy(duro__fiber *f);

/** Usable bytes of the fiber's stack (at least what was requested).
 * @note Any thread. */
size_t duro__fiber_stack_size(const duro__fiber *f);

/** Lowest usable address of the fiber's stack; the guard page is the page
 * right below it. For tests and diagnostics.
 * @note Any thread. */
void *duro__fiber_stack_base(const duro__fiber *f);

/* Stacks of one size the process-wide pool keeps for reuse (freed ones past
 * it are unmapped): a runtime's default fiber_cache_size, so the fibers of
 * instances that end together go back to the pool. */
#define DURO__FIBER_POOL_PER_SIZE 1024

/* Counters of the process-wide pool of fiber stacks. */
typedef struct duro__fiber_pool_stats {
    uint64_t stacks_mapped;   /* mmap calls that made a new stack */
    uint64_t stacks_reused;   /* creations served from the pool */
    uint64_t stacks_unmapped; /* stacks returned to the kernel */
    uint64_t stacks_pooled;   /* stacks waiting in the pool right now */
} duro__fiber_pool_stats;

/** Copies the pool counters into *out.
 * @note Any thread. */
void duro__fiber_pool_stats_get(duro__fiber_pool_stats *out);

/** Unmaps every stack waiting in the pool.
 * @note Any thread. */
void duro__fiber_pool_trim(void);

/** Name of the context-switch mechanism compiled in ("x86_64-asm" or
 * "ucontext"), for logs and benchmarks.
 * @note Any thread. */
const char *duro__fiber_mechanism(void);

#endif
