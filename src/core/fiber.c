/* fiber.c - stackful fibers: mmap'd stacks with a guard page, a small
 * hand-written context switch on x86_64 (ucontext elsewhere), sanitizer and
 * valgrind annotations, and a process-wide pool of freed stacks. A fiber runs
 * on whichever thread resumes it; the only shared state is the stack pool,
 * under its own mutex. Design notes: docs/fibers.md. */
#include "core/fiber.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"

/* ---- which switch, which tools --------------------------------------- */

/* The hand-written switch is used on x86_64 unless the build asks for
 * ucontext, or compiles for CET shadow stacks: a `ret` into a fresh fiber
 * has no shadow-stack entry, while glibc's swapcontext knows how to make
 * one. */
#if defined(__x86_64__) && !defined(DURO_FIBER_UCONTEXT) &&                    \
    !(defined(__CET__) && (__CET__ & 2))
#define FIBER_ASM_X86_64 1
#else
#include <ucontext.h>
#define FIBER_UCONTEXT 1
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FIBER_TSAN 1
#endif
#endif

#if defined(FIBER_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(FIBER_TSAN)
#if defined(__has_include)
#if __has_include(<sanitizer/tsan_interface.h>)
#include <sanitizer/tsan_interface.h>
#define FIBER_TSAN_HEADER 1
#endif
#endif
#if !defined(FIBER_TSAN_HEADER)
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif
#endif

/* Valgrind must be told which address ranges are stacks, or it takes every
 * switch for a huge stack-pointer move. The client requests are a few no-op
 * instructions when not running under valgrind. */
#if !defined(FIBER_ASAN) && !defined(FIBER_TSAN) && defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define FIBER_VALGRIND 1
#endif
#endif

/* ---- types ------------------------------------------------------------ */

enum fiber_state {
    FIBER_NEW,       /* created, never resumed */
    FIBER_SUSPENDED, /* yielded */
    FIBER_RUNNING,   /* between resume and yield/return */
    FIBER_DONE       /* fn returned */
};

typedef struct fiber_stack {
    unsigned char *low;   /* lowest usable byte; the guard page is below */
    size_t size;          /* usable bytes, a multiple of the page size */
    unsigned valgrind_id; /* VALGRIND_STACK_REGISTER id, 0 without valgrind */
} fiber_stack;

/* Saved registers of a suspended context. */
#if defined(FIBER_ASM_X86_64)
typedef struct fiber_context {
    void *sp; /* callee-saved registers and the resume address sit here */
} fiber_context;
#else
typedef struct fiber_context {
    ucontext_t uc;
} fiber_context;
#endif

struct duro__fiber {
    fiber_context context; /* the fiber's own registers while suspended */
    fiber_context caller;  /* the resumer's registers while the fiber runs;
                              written by every resume, so a fiber always
                              returns to the thread that last resumed it */
    duro__fiber_fn fn;
    void *arg;
    fiber_stack stack;
    int state; /* enum fiber_state */
#if defined(FIBER_ASAN)
    const void *caller_stack_bottom; /* the resumer's stack, for the */
    size_t caller_stack_size;        /* switch back; set on each entry */
#endif
#if defined(FIBER_TSAN)
    void *tsan_fiber;  /* this fiber's TSan context */
    void *tsan_caller; /* the resumer's TSan context, set by each resume */
#endif
};

/* ---- the thread-local current fiber ----------------------------------- */

static _Thread_local duro__fiber *running_fiber;

/* Every access to running_fiber goes through these two functions. Code on a
 * fiber may stop on one thread and continue on another; a compiler that
 * inlined the access could compute the thread-local address once and reuse
 * it after the switch, i.e. read the old thread's variable. A non-inlined
 * function computes the address afresh on each call, and the volatile asm
 * keeps the compiler from treating the call as pure and merging two calls
 * across a switch. */
__attribute__((noinline)) static duro__fiber *running_get(void)
{
    __asm__ volatile("" ::: "memory");
    return running_fiber;
}

__attribute__((noinline)) static void running_set(duro__fiber *f)
{
    __asm__ volatile("" ::: "memory");
    running_fiber = f;
}

/* ---- context switch --------------------------------------------------- */

static void fiber_main(duro__fiber *f);

#if defined(FIBER_ASM_X86_64)
/* duro__fiber_switch_context(save_sp, next_sp): pushes the callee-saved
 * registers of the System V ABI (rbp, rbx, r12-r15, and the MXCSR and x87
 * control words), stores the stack pointer in *save_sp, loads next_sp, pops
 * the same set and returns into the other context. Caller-saved registers
 * need no saving: the compiler treats this as an ordinary call.
 *
 * duro__fiber_trampoline is where a new fiber's first switch "returns" to:
 * rbx holds the fiber and r12 the entry function (see context_init). The CFI
 * marks it as the outermost frame for debuggers and unwinders. */
__asm__(".pushsection .text\n"
        ".globl duro__fiber_switch_context\n"
        ".hidden duro__fiber_switch_context\n"
        ".type duro__fiber_switch_context,@function\n"
        ".p2align 4\n"
        "duro__fiber_switch_context:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size duro__fiber_switch_context,.-duro__fiber_switch_context\n"
        "\n"
        ".globl duro__fiber_trampoline\n"
        ".hidden duro__fiber_trampoline\n"
        ".type duro__fiber_trampoline,@function\n"
        ".p2align 4\n"
        "duro__fiber_trampoline:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n"
        "    movq %rbx, %rdi\n"
        "    callq *%r12\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size duro__fiber_trampoline,.-duro__fiber_trampoline\n"
        ".popsection\n");

__attribute__((visibility("hidden"))) void
duro__fiber_switch_context(void **save_sp, void *next_sp);
__attribute__((visibility("hidden"))) void duro__fiber_trampoline(void);

/* Lays out the stack so that the first switch into the fiber pops zeroed
 * registers (rbp = 0 ends frame-pointer walks), the fiber in rbx, fiber_main
 * in r12, the default MXCSR and x87 control word, and returns into the
 * trampoline with rsp 16-byte aligned, as the ABI wants before a call. */
static int context_init(duro__fiber *f)
{
    uintptr_t top = (uintptr_t)(f->stack.low + f->stack.size) & ~(uintptr_t)15;
    uintptr_t *sp = (uintptr_t *)top - 10;
    sp[0] = (uintptr_t)0x1F80 | ((uintptr_t)0x037F << 32); /* mxcsr, fcw */
    sp[1] = 0;                                             /* r15 */
    sp[2] = 0;                                             /* r14 */
    sp[3] = 0;                                             /* r13 */
    sp[4] = (uintptr_t)fiber_main;                         /* r12 */
    sp[5] = (uintptr_t)f;                                  /* rbx */
    sp[6] = 0;                                             /* rbp */
    sp[7] = (uintptr_t)duro__fiber_trampoline;             /* return */
    sp[8] = 0; /* rsp after the return: top - 16 */
    sp[9] = 0;
    f->context.sp = sp;
    return DURO_OK;
}

static void context_switch(fiber_context *save, fiber_context *next)
{
    duro__fiber_switch_context(&save->sp, next->sp);
}

#else /* FIBER_UCONTEXT */

/* makecontext passes int arguments only, so the pointer travels in two. */
static void ucontext_entry(int high, int low)
{
    uintptr_t p = ((uintptr_t)(unsigned)high << 16 << 16) | (unsigned)low;
    fiber_main((duro__fiber *)p);
}

static int context_init(duro__fiber *f)
{
    if (getcontext(&f->context.uc) != 0)
        return DURO_NOMEM;
    f->context.uc.uc_stack.ss_sp = f->stack.low;
    f->context.uc.uc_stack.ss_size = f->stack.size;
    f->context.uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)f;
    makecontext(&f->context.uc, (void (*)(void))ucontext_entry, 2,
                (int)(unsigned)(p >> 16 >> 16), (int)(unsigned)p);
    return DURO_OK;
}

static void context_switch(fiber_context *save, fiber_context *next)
{
    if (swapcontext(&save->uc, &next->uc) != 0)
        abort(); /* only fails on a bad context: memory is corrupt */
}

#endif

/* Resumer side: from the thread's own stack into f, back when f leaves. */
static void switch_into(duro__fiber *f)
{
#if defined(FIBER_TSAN)
    f->tsan_caller = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#if defined(FIBER_ASAN)
    void *fake_stack = NULL;
    __sanitizer_start_switch_fiber(&fake_stack, f->stack.low, f->stack.size);
#endif
    context_switch(&f->caller, &f->context);
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack, NULL, NULL);
#endif
}

/* Fiber side: back to whoever resumed f. When `dying`, this is the last
 * switch out and ASan may free the fiber's fake stack. When it returns, f
 * has been resumed again, maybe on another thread: nothing here may hold a
 * thread-local address across context_switch. */
static void switch_out(duro__fiber *f, int dying)
{
#if defined(FIBER_TSAN)
    __tsan_switch_to_fiber(f->tsan_caller, 0);
#endif
#if defined(FIBER_ASAN)
    void *fake_stack = NULL;
    __sanitizer_start_switch_fiber(dying ? NULL : &fake_stack,
                                   f->caller_stack_bottom,
                                   f->caller_stack_size);
#else
    (void)dying;
#endif
    context_switch(&f->context, &f->caller);
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack, &f->caller_stack_bottom,
                                    &f->caller_stack_size);
#endif
}

static void fiber_main(duro__fiber *f)
{
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(NULL, &f->caller_stack_bottom,
                                    &f->caller_stack_size);
#endif
    f->fn(f->arg);
    f->state = FIBER_DONE;
    switch_out(f, 1);
    abort(); /* a done fiber is never resumed */
}

/* ---- stacks and the stack pool ---------------------------------------- */

#define POOL_CLASSES 8 /* distinct stack sizes kept at once */
/* Stacks kept per size (fiber.h): the stacks of a burst of instances that
 * end together go back to the pool, not to munmap, whose TLB shootdown
 * interrupts every CPU the process runs on (~16 us a stack on the 2-core VM
 * of bench/RESULTS.md, on the turn thread that ended the instance), and the
 * next burst takes them. A pooled stack keeps the pages its fiber touched:
 * never more than the live fibers held a moment before.
 * duro__fiber_pool_trim() unmaps them. */
#define POOL_PER_CLASS DURO__FIBER_POOL_PER_SIZE

typedef struct pool_class {
    size_t size;  /* usable bytes of every stack here; 0 = unused */
    size_t count; /* stacks[0..count) are waiting */
    fiber_stack stacks[POOL_PER_CLASS];
} pool_class;

/* A leaf lock: nothing else is locked while it is held. It guards pool and
 * pool_stats. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_class pool[POOL_CLASSES];
static duro__fiber_pool_stats pool_stats;

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* The usable size for a request, or 0 when it is out of range. */
static size_t stack_size_round(size_t requested)
{
    size_t page = page_size();
    size_t size = requested == 0 ? DURO__FIBER_DEFAULT_STACK : requested;
    if (size > DURO__FIBER_MAX_STACK)
        return 0;
    if (size < DURO__FIBER_MIN_STACK)
        size = DURO__FIBER_MIN_STACK;
    return (size + page - 1) / page * page;
}

static void stack_unmap(fiber_stack *s)
{
#if defined(FIBER_VALGRIND)
    VALGRIND_STACK_DEREGISTER(s->valgrind_id);
#endif
    size_t guard = page_size();
    munmap(s->low - guard, s->size + guard);
}

static int stack_acquire(size_t size, fiber_stack *out)
{
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < POOL_CLASSES; i++) {
        pool_class *c = &pool[i];
        if (c->size == size && c->count > 0) {
            *out = c->stacks[--c->count];
            pool_stats.stacks_reused++;
            pool_stats.stacks_pooled--;
            pthread_mutex_unlock(&pool_lock);
            return DURO_OK;
        }
    }
    pthread_mutex_unlock(&pool_lock);

    /* Pages are committed on first touch, so a deep stack costs address
     * space, not memory, until a fiber really goes deep. */
    size_t guard = page_size();
    unsigned char *base =
        mmap(NULL, size + guard, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
        return duro__fail(DURO_NOMEM, "fiber: cannot map a %zu-byte stack",
                          size);
    if (mprotect(base, guard, PROT_NONE) != 0) {
        munmap(base, size + guard);
        return duro__fail(DURO_NOMEM, "fiber: cannot protect a guard page");
    }
#if defined(MADV_NOHUGEPAGE)
    /* Where transparent huge pages are "always", the first touch of a big
     * stack could commit 2 MiB at once; stacks grow a page at a time. */
    if (size >= (size_t)2 * 1024 * 1024)
        madvise(base + guard, size, MADV_NOHUGEPAGE);
#endif
    out->low = base + guard;
    out->size = size;
    out->valgrind_id = 0;
#if defined(FIBER_VALGRIND)
    out->valgrind_id = VALGRIND_STACK_REGISTER(out->low, out->low + size);
#endif
    pthread_mutex_lock(&pool_lock);
    pool_stats.stacks_mapped++;
    pthread_mutex_unlock(&pool_lock);
    return DURO_OK;
}

static void stack_release(fiber_stack *s)
{
#if defined(FIBER_ASAN)
    /* Frames that never returned (a destroyed suspended fiber, or the last
     * frames of a done one) leave poisoned redzones in the shadow; the next
     * user of these addresses, a fiber or a later mmap, must not see them. */
    ASAN_UNPOISON_MEMORY_REGION(s->low, s->size);
#endif
    pthread_mutex_lock(&pool_lock);
    pool_class *slot = NULL;
    for (size_t i = 0; i < POOL_CLASSES; i++) {
        if (pool[i].size == s->size) {
            slot = &pool[i];
            break;
        }
        if (pool[i].count == 0 && slot == NULL)
            slot = &pool[i]; /* an empty class may take a new size */
    }
    if (slot != NULL && slot->count < POOL_PER_CLASS) {
        slot->size = s->size;
        slot->stacks[slot->count++] = *s;
        pool_stats.stacks_pooled++;
        pthread_mutex_unlock(&pool_lock);
        return;
    }
    pool_stats.stacks_unmapped++;
    pthread_mutex_unlock(&pool_lock);
    stack_unmap(s);
}

void duro__fiber_pool_stats_get(duro__fiber_pool_stats *out)
{
    pthread_mutex_lock(&pool_lock);
    *out = pool_stats;
    pthread_mutex_unlock(&pool_lock);
}

void duro__fiber_pool_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < POOL_CLASSES; i++) {
        while (pool[i].count > 0) {
            stack_unmap(&pool[i].stacks[--pool[i].count]);
            pool_stats.stacks_pooled--;
            pool_stats.stacks_unmapped++;
        }
        pool[i].size = 0;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* ---- the API ---------------------------------------------------------- */

int duro__fiber_create(size_t stack_size, duro__fiber_fn fn, void *arg,
                       duro__fiber **out)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || fn == NULL)
        return duro__fail(DURO_INVALID, "duro__fiber_create: NULL %s",
                          out == NULL ? "out" : "fn");
    size_t size = stack_size_round(stack_size);
    if (size == 0)
        return duro__fail(DURO_INVALID,
                          "duro__fiber_create: stack of %zu bytes is above "
                          "the %zu-byte limit",
                          stack_size, DURO__FIBER_MAX_STACK);
    duro__fiber *f = duro__calloc(1, sizeof(*f));
    if (f == NULL)
        return duro__fail(DURO_NOMEM, "duro__fiber_create: out of memory");
    int rc = stack_acquire(size, &f->stack);
    if (rc != DURO_OK) {
        duro__free(f);
        return rc;
    }
    f->fn = fn;
    f->arg = arg;
    f->state = FIBER_NEW;
    rc = context_init(f);
    if (rc != DURO_OK) {
        stack_release(&f->stack);
        duro__free(f);
        return duro__fail(rc, "duro__fiber_create: cannot make a context");
    }
#if defined(FIBER_TSAN)
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
    *out = f;
    return DURO_OK;
}

int duro__fiber_resume(duro__fiber *f)
{
    if (f == NULL)
        return duro__fail(DURO_INVALID, "duro__fiber_resume: NULL fiber");
    if (running_get() != NULL)
        return duro__fail(DURO_MISUSE,
                          "duro__fiber_resume: called from inside a fiber");
    if (f->state == FIBER_DONE)
        return duro__fail(DURO_MISUSE, "duro__fiber_resume: fiber is done");
    if (f->state == FIBER_RUNNING)
        return duro__fail(DURO_MISUSE,
                          "duro__fiber_resume: fiber is already running");
    f->state = FIBER_RUNNING;
    running_set(f);
    switch_into(f);
    running_set(NULL);
    return DURO_OK;
}

int duro__fiber_yield(void)
{
    duro__fiber *f = running_get();
    if (f == NULL)
        return duro__fail(DURO_MISUSE, "duro__fiber_yield: not on a fiber");
    f->state = FIBER_SUSPENDED;
    switch_out(f, 0);
    /* Resumed, perhaps on another thread; the resumer has already made f
     * that thread's running fiber. */
    return DURO_OK;
}

int duro__fiber_done(const duro__fiber *f)
{
    return f != NULL && f->state == FIBER_DONE;
}

__attribute__((noinline)) duro__fiber *duro__fiber_current(void)
{
    return running_get();
}

void duro__fiber_destroy(duro__fiber *f)
{
    if (f == NULL || f->state == FIBER_RUNNING)
        return; /* freeing a running stack would pull it from under it */
#if defined(FIBER_TSAN)
    __tsan_destroy_fiber(f->tsan_fiber);
#endif
    stack_release(&f->stack);
    duro__free(f);
}

size_t duro__fiber_stack_size(const duro__fiber *f)
{
    return f != NULL ? f->stack.size : 0;
}

void *duro__fiber_stack_base(const duro__fiber *f)
{
    return f != NULL ? f->stack.low : NULL;
}

const char *duro__fiber_mechanism(void)
{
#if defined(FIBER_ASM_X86_64)
    return "x86_64-asm";
#else
    return "ucontext";
#endif
}
