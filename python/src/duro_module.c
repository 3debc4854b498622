/* duro_module.c - duro._duro, the CPython extension under the duro package:
 * a driver (duro_driver) that runs `async def` orchestrations step by step
 * with PyIter_Send, the activity trampoline, and thin types over the
 * registry, runtime and client. Written against the Limited API (3.10).
 * Owns the coroutines of the contexts it drives; holds the GIL only inside
 * the driver's callbacks and the activity trampoline, and releases it
 * around every blocking duro call (docs/python.md). */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "duro.h"

/* ------------------------------------------------------------------------
 * module globals (one interpreter: duro_exec refuses sub-interpreters) */

static PyObject *error_type;      /* duro.Error */
static PyObject *error_classes;   /* dict: code -> subclass of Error */
static PyTypeObject *task_type;   /* _duro.Task */
static PyTypeObject *wait_type;   /* _duro.Wait */
static PyTypeObject *octx_type;   /* _duro.OrchestrationContext */
static PyTypeObject *actx_type;   /* _duro.ActivityContext */
static PyTypeObject *reg_type;    /* _duro.Registry */
static PyTypeObject *rt_type;     /* _duro.Runtime */
static PyTypeObject *client_type; /* _duro.Client */
static PyTypeObject *env_type;    /* _duro.TestEnv */

/* Set by the package's atexit hook after it shut every runtime down: from
 * then on no callback touches Python (finalization may have begun). */
static atomic_int finalizing;

/* Debug counters (tests): driver starts, steps, destroys. */
static atomic_ullong count_starts, count_steps, count_destroys;
/* ... and thread states kept by duro's threads (gil_ensure), deleted */
static atomic_ullong count_tstates_kept, count_tstates_deleted;

/* A thread of duro's (a turn thread, a worker slot) that runs Python keeps
 * one Python thread state for its whole life: PyGILState_Ensure on a thread
 * without one makes a thread state (and its frame stack, an mmap) and the
 * matching Release deletes it, at every step of a replay. gil_ensure makes
 * the first Ensure on such a thread an outer one that is never released
 * while the thread runs, so later Ensure/Release pairs only take and give
 * back the GIL; the thread's exit (a pthread key's destructor) clears and
 * deletes the state. Threads that Python made, or that
 * had a state already, are left as they are. After the atexit hook
 * (finalizing) an exiting thread does not touch Python: its state is left
 * to the interpreter's end. */
static pthread_key_t kept_tstate_key;
static pthread_once_t kept_tstate_once = PTHREAD_ONCE_INIT;
static int kept_tstate_ok;

static void kept_tstate_drop(void *p)
{
    if (atomic_load(&finalizing))
        return;
    /* Not PyGILState_Release: glibc may have emptied Python's own key of
     * this thread already (it empties each key as it passes it). */
    PyThreadState *ts = p;
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyEval_SaveThread();
    PyThreadState_Delete(ts);
    atomic_fetch_add(&count_tstates_deleted, 1);
}

static void kept_tstate_init(void)
{
    kept_tstate_ok =
        pthread_key_create(&kept_tstate_key, kept_tstate_drop) == 0;
}

static PyGILState_STATE gil_ensure(void)
{
    pthread_once(&kept_tstate_once, kept_tstate_init);
    if (kept_tstate_ok && PyGILState_GetThisThreadState() == NULL) {
        PyGILState_STATE outer = PyGILState_Ensure();
        PyThreadState *ts = PyEval_SaveThread();
        if (outer != PyGILState_UNLOCKED ||
            pthread_setspecific(kept_tstate_key, ts) != 0) {
            /* not ours to keep (cannot happen without a state before) */
            PyEval_RestoreThread(ts);
            return outer;
        }
        atomic_fetch_add(&count_tstates_kept, 1);
    }
    return PyGILState_Ensure();
}

/* Raises duro.Error (or the subclass registered for @p code) with
 * @p detail (NULL or "": duro_strerror's text). Returns NULL. */
static PyObject *raise_duro_text(int code, const char *what, const char *detail)
{
    PyObject *cls = NULL;
    PyObject *key = PyLong_FromLong(code);
    if (key && error_classes)
        cls = PyDict_GetItem(error_classes, key); /* borrowed */
    Py_XDECREF(key);
    if (!cls)
        cls = error_type;
    PyObject *msg;
    if (detail && *detail)
        msg = PyUnicode_FromFormat("%s: %s (%s)", what, detail,
                                   duro_errname(code));
    else
        msg = PyUnicode_FromFormat("%s: %s (%s)", what, duro_strerror(code),
                                   duro_errname(code));
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(cls, msg, NULL);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *c = PyLong_FromLong(code);
    PyObject *n = PyUnicode_FromString(duro_errname(code));
    if (c && n) {
        PyObject_SetAttrString(exc, "code", c);
        PyObject_SetAttrString(exc, "errname", n);
    }
    Py_XDECREF(c);
    Py_XDECREF(n);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

/* Raises duro.Error (or the subclass registered for @p code) with the
 * text of duro_errmsg() when there is one. Returns NULL. */
static PyObject *raise_duro(int code, const char *what)
{
    return raise_duro_text(code, what, duro_errmsg());
}

static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

/* ------------------------------------------------------------------------
 * OrchestrationContext: the native side of ctx. `o` is usable only while
 * in_step (inside the driver's start or step); alive turns 0 at destroy. */

typedef struct {
    PyObject_HEAD duro_orch *o;
    int in_step;
    int alive;
} octx_object;

static int octx_check(octx_object *c, const char *fn)
{
    if (!c->alive || !c->in_step || !c->o) {
        PyErr_Format(error_type,
                     "%s: orchestration context used outside the "
                     "orchestration's code (DURO_MISUSE)",
                     fn);
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject_HEAD octx_object *ctx; /* strong */
    duro_task *t;
    int state;        /* cached enum duro_task_state once done */
    PyObject *output; /* cached once done: str or None */
    PyObject *error;
    int category;
} task_object;

/* A new Task of @p cls (the pure layer's duro.Task; None: the base type)
 * for task @p t of context @p ctx. */
static PyObject *task_wrap(octx_object *ctx, duro_task *t, PyObject *cls)
{
    if (!t) /* out of memory: duro_errmsg() says so */
        return raise_duro(DURO_NOMEM, "creating a task");
    if (!cls || cls == Py_None)
        cls = (PyObject *)task_type;
    PyObject *obj = PyObject_CallNoArgs(cls);
    if (!obj)
        return NULL;
    if (!PyObject_TypeCheck(obj, task_type)) {
        Py_DECREF(obj);
        PyErr_SetString(PyExc_TypeError, "task class is not a Task");
        return NULL;
    }
    task_object *task = (task_object *)obj;
    PyObject *old = (PyObject *)task->ctx;
    Py_INCREF(ctx);
    task->ctx = ctx;
    Py_XDECREF(old);
    task->t = t;
    return obj;
}

static PyObject *task_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    task_object *task = (task_object *)alloc(tp, 0);
    if (!task)
        return NULL;
    task->ctx = NULL;
    task->t = NULL;
    task->state = DURO_TASK_PENDING;
    return (PyObject *)task;
}

static int task_traverse(PyObject *self, visitproc visit, void *arg)
{
    task_object *t = (task_object *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(t->ctx);
    Py_VISIT(t->output);
    Py_VISIT(t->error);
    return 0;
}

static int task_clear(PyObject *self)
{
    task_object *t = (task_object *)self;
    Py_CLEAR(t->ctx);
    Py_CLEAR(t->output);
    Py_CLEAR(t->error);
    return 0;
}

static void task_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    task_clear(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

/* Reads the task's state (cached once done). -1 with an exception set
 * when it cannot be read (outside the code). */
static int task_read(task_object *task)
{
    if (task->state != DURO_TASK_PENDING)
        return task->state;
    if (!task->ctx || octx_check(task->ctx, "Task") < 0)
        return -1;
    int s = duro_task_state(task->t);
    if (s == DURO_TASK_PENDING)
        return s;
    PyObject *out = str_or_none(duro_task_output(task->t));
    PyObject *err = str_or_none(duro_task_error(task->t));
    if (!out || !err) {
        Py_XDECREF(out);
        Py_XDECREF(err);
        return -1;
    }
    task->output = out;
    task->error = err;
    task->category = duro_task_category(task->t);
    task->state = s;
    return s;
}

static PyObject *task_state(PyObject *self, PyObject *unused)
{
    (void)unused;
    int s = task_read((task_object *)self);
    if (s < 0)
        return NULL;
    return PyLong_FromLong(s);
}

/* (state, output, error, category) */
static PyObject *task_outcome(PyObject *self, PyObject *unused)
{
    (void)unused;
    task_object *task = (task_object *)self;
    int s = task_read(task);
    if (s < 0)
        return NULL;
    if (s == DURO_TASK_PENDING)
        return Py_BuildValue("(iOOi)", s, Py_None, Py_None, 0);
    return Py_BuildValue("(iOOi)", s, task->output, task->error,
                         task->category);
}

static PyObject *task_cancel(PyObject *self, PyObject *unused)
{
    (void)unused;
    task_object *task = (task_object *)self;
    if (!task->ctx || octx_check(task->ctx, "Task.cancel") < 0)
        return NULL;
    duro_cancel_task(task->ctx->o, task->t);
    Py_RETURN_NONE;
}

static PyMethodDef task_methods[] = {
    {"_state", task_state, METH_NOARGS, "enum duro_task_state, no wait."},
    {"_outcome", task_outcome, METH_NOARGS,
     "(state, output, error, category) of the task."},
    {"cancel", task_cancel, METH_NOARGS,
     "Abandons the task (activities and children durably cancelled)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot task_slots[] = {
    {Py_tp_doc, "A durable task; await it inside an orchestration."},
    {Py_tp_new, task_tp_new},
    {Py_tp_dealloc, task_dealloc},
    {Py_tp_traverse, task_traverse},
    {Py_tp_clear, task_clear},
    {Py_tp_methods, task_methods},
    {0, NULL}};

static PyType_Spec task_spec = {
    "duro._duro.Task", sizeof(task_object), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, task_slots};

/* ------------------------------------------------------------------------
 * Wait: what ctx.any(), ctx.all() and ctx.first() await. kind 0: select
 * (any), 1: all, 2: the first done, losers left running (first).
 * The driver fills winner (an index into tasks) for a select. */

typedef struct {
    PyObject_HEAD PyObject *tasks; /* tuple of Task */
    int kind;
    Py_ssize_t winner; /* -1 until decided */
} wait_object;

static int wait_init(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    wait_object *w = (wait_object *)self;
    int kind;
    PyObject *tasks;
    if (!PyArg_ParseTuple(args, "iO!", &kind, &PyTuple_Type, &tasks))
        return -1;
    Py_ssize_t n = PyTuple_Size(tasks);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyObject_TypeCheck(PyTuple_GetItem(tasks, i), task_type)) {
            PyErr_SetString(PyExc_TypeError,
                            "ctx.any(), ctx.all() and ctx.first() take duro "
                            "tasks only");
            return -1;
        }
    }
    PyObject *old = w->tasks;
    Py_INCREF(tasks);
    w->tasks = tasks;
    Py_XDECREF(old);
    w->kind = kind;
    w->winner = -1;
    return 0;
}

static int wait_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((wait_object *)self)->tasks);
    return 0;
}

static int wait_clear(PyObject *self)
{
    Py_CLEAR(((wait_object *)self)->tasks);
    return 0;
}

static void wait_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    wait_clear(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *wait_winner(PyObject *self, PyObject *unused)
{
    (void)unused;
    wait_object *w = (wait_object *)self;
    if (w->winner < 0 || !w->tasks)
        Py_RETURN_NONE;
    PyObject *t = PyTuple_GetItem(w->tasks, w->winner);
    Py_XINCREF(t);
    return t;
}

static PyMethodDef wait_methods[] = {
    {"_winner", wait_winner, METH_NOARGS, "The select's winner, or None."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot wait_slots[] = {
    {Py_tp_doc, "A wait on several tasks (ctx.any, ctx.all)."},
    {Py_tp_init, wait_init},
    {Py_tp_dealloc, wait_dealloc},
    {Py_tp_traverse, wait_traverse},
    {Py_tp_clear, wait_clear},
    {Py_tp_methods, wait_methods},
    {0, NULL}};

static PyType_Spec wait_spec = {
    "duro._duro.Wait", sizeof(wait_object), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, wait_slots};

/* ------------------------------------------------------------------------
 * OrchestrationContext methods */

static PyObject *octx_call_activity(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *name, *input;
    PyObject *retry, *cls;
    if (!PyArg_ParseTuple(args, "szOO", &name, &input, &retry, &cls))
        return NULL;
    if (octx_check(c, "call_activity") < 0)
        return NULL;
    duro_task *t;
    if (retry == Py_None) {
        t = duro_call_activity(c->o, name, input);
    } else {
        duro_retry_policy p;
        duro_retry_policy_init(&p);
        unsigned int attempts;
        long long initial, max_delay, attempt_timeout, total_timeout;
        if (!PyArg_ParseTuple(retry, "IiLdLLL", &attempts, &p.backoff, &initial,
                              &p.coefficient, &max_delay, &attempt_timeout,
                              &total_timeout))
            return NULL;
        p.max_attempts = attempts;
        p.initial_delay_ms = initial;
        p.max_delay_ms = max_delay;
        p.attempt_timeout_ms = attempt_timeout;
        p.total_timeout_ms = total_timeout;
        t = duro_call_activity_with_retry(c->o, name, input, &p);
    }
    return task_wrap(c, t, cls);
}

static PyObject *octx_timer(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    long long ms;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "LO", &ms, &cls))
        return NULL;
    if (octx_check(c, "timer") < 0)
        return NULL;
    return task_wrap(c, duro_timer(c->o, ms), cls);
}

static PyObject *octx_wait_event(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *name;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "sO", &name, &cls))
        return NULL;
    if (octx_check(c, "wait_event") < 0)
        return NULL;
    return task_wrap(c, duro_wait_event(c->o, name), cls);
}

static PyObject *octx_call_sub(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *name, *version, *id, *input;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "szzzO", &name, &version, &id, &input, &cls))
        return NULL;
    if (octx_check(c, "call_sub_orchestration") < 0)
        return NULL;
    return task_wrap(
        c, duro_call_sub_orchestration(c->o, name, version, id, input), cls);
}

/* ctx.start_orchestration(): a detached start (duro_start_orchestration),
 * fire-and-forget; raises duro.Error for a code other than DURO_OK. */
static PyObject *octx_start_orchestration(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *name, *version, *id, *input;
    if (!PyArg_ParseTuple(args, "szzz", &name, &version, &id, &input))
        return NULL;
    if (octx_check(c, "start_orchestration") < 0)
        return NULL;
    int rc = duro_start_orchestration(c->o, name, version, id, input);
    if (rc)
        return raise_duro(rc, "start_orchestration");
    Py_RETURN_NONE;
}

static PyObject *octx_now_ms(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "now") < 0)
        return NULL;
    return PyLong_FromLongLong(duro_now(c->o));
}

static PyObject *octx_new_guid(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "new_guid") < 0)
        return NULL;
    const char *g = duro_new_guid(c->o);
    if (!g)
        return raise_duro(DURO_NOMEM, "new_guid");
    return PyUnicode_FromString(g);
}

static PyObject *octx_set_custom_status(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *s;
    if (!PyArg_ParseTuple(args, "z", &s))
        return NULL;
    if (octx_check(c, "set_custom_status") < 0)
        return NULL;
    duro_set_custom_status(c->o, s);
    Py_RETURN_NONE;
}

/* duro_patched() / duro_patch_deprecated(): a bad id fails the execution
 * (duro's rule), so neither raises for it. */
static PyObject *octx_patched(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *id;
    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    if (octx_check(c, "patched") < 0)
        return NULL;
    return PyBool_FromLong(duro_patched(c->o, id));
}

static PyObject *octx_patch_deprecated(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    const char *id;
    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    if (octx_check(c, "patch_deprecated") < 0)
        return NULL;
    duro_patch_deprecated(c->o, id);
    Py_RETURN_NONE;
}

static PyObject *octx_instance_id(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "instance_id") < 0)
        return NULL;
    return str_or_none(duro_instance_id(c->o));
}

static PyObject *octx_is_replaying(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "is_replaying") < 0)
        return NULL;
    return PyBool_FromLong(duro_is_replaying(c->o));
}

static PyObject *octx_cancel_requested(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "cancel_requested") < 0)
        return NULL;
    return PyBool_FromLong(duro_cancel_requested(c->o));
}

static PyObject *octx_cancel_reason(PyObject *self, PyObject *unused)
{
    (void)unused;
    octx_object *c = (octx_object *)self;
    if (octx_check(c, "cancel_reason") < 0)
        return NULL;
    return str_or_none(duro_cancel_reason(c->o));
}

static PyObject *octx_log(PyObject *self, PyObject *args)
{
    octx_object *c = (octx_object *)self;
    int level;
    const char *text;
    if (!PyArg_ParseTuple(args, "is", &level, &text))
        return NULL;
    if (octx_check(c, "log") < 0)
        return NULL;
    duro_log(c->o, level, "%s", text);
    Py_RETURN_NONE;
}

static PyMethodDef octx_methods[] = {
    {"cancel_requested", octx_cancel_requested, METH_NOARGS, NULL},
    {"cancel_reason", octx_cancel_reason, METH_NOARGS, NULL},
    {"log", octx_log, METH_VARARGS, NULL},
    {"call_activity", octx_call_activity, METH_VARARGS, NULL},
    {"timer", octx_timer, METH_VARARGS, NULL},
    {"wait_event", octx_wait_event, METH_VARARGS, NULL},
    {"call_sub_orchestration", octx_call_sub, METH_VARARGS, NULL},
    {"start_orchestration", octx_start_orchestration, METH_VARARGS, NULL},
    {"now_ms", octx_now_ms, METH_NOARGS, NULL},
    {"new_guid", octx_new_guid, METH_NOARGS, NULL},
    {"set_custom_status", octx_set_custom_status, METH_VARARGS, NULL},
    {"patched", octx_patched, METH_VARARGS, NULL},
    {"patch_deprecated", octx_patch_deprecated, METH_VARARGS, NULL},
    {"instance_id", octx_instance_id, METH_NOARGS, NULL},
    {"is_replaying", octx_is_replaying, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static void plain_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyType_Slot octx_slots[] = {
    {Py_tp_doc, "The native orchestration context (see duro.Context)."},
    {Py_tp_dealloc, plain_dealloc},
    {Py_tp_methods, octx_methods},
    {0, NULL}};

static PyType_Spec octx_spec = {"duro._duro.OrchestrationContext",
                                sizeof(octx_object), 0, Py_TPFLAGS_DEFAULT,
                                octx_slots};

/* ------------------------------------------------------------------------
 * The driver */

typedef struct {
    octx_object *ctx;   /* strong */
    PyObject *coro;     /* the coroutine, strong */
    PyObject *awaiting; /* what it awaits (Task or Wait), strong, or NULL */
} drv_state;

static int drv_start(duro_orch *o, const char *input, void *user, void **state)
{
    if (atomic_load(&finalizing))
        return DURO_SHUTDOWN;
    PyGILState_STATE g = gil_ensure();
    int rc = DURO_ERROR;
    drv_state *st = NULL;
    octx_object *ctx = PyObject_New(octx_object, octx_type);
    if (!ctx)
        goto out;
    ctx->o = o;
    ctx->in_step = 1;
    ctx->alive = 1;
    PyObject *in = str_or_none(input);
    if (!in)
        goto out;
    PyObject *coro =
        PyObject_CallFunctionObjArgs((PyObject *)user, ctx, in, NULL);
    Py_DECREF(in);
    if (!coro)
        goto out;
    st = calloc(1, sizeof *st);
    if (!st) {
        Py_DECREF(coro);
        rc = DURO_NOMEM;
        goto out;
    }
    ctx->in_step = 0;
    st->ctx = ctx;
    st->coro = coro;
    ctx = NULL;
    *state = st;
    atomic_fetch_add(&count_starts, 1);
    rc = DURO_OK;
out:
    if (PyErr_Occurred())
        PyErr_Print();
    Py_XDECREF(ctx);
    PyGILState_Release(g);
    return rc;
}

/* Fails the orchestration with the current exception's text. */
static void fail_with_exception(duro_result *out, const char *what)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    PyObject *tn = type ? PyObject_GetAttrString(type, "__name__") : NULL;
    const char *sm = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
    const char *tm = tn ? PyUnicode_AsUTF8AndSize(tn, NULL) : NULL;
    PyErr_Clear();
    duro_failf(out, "%s: %s: %s", what, tm ? tm : "exception", sm ? sm : "?");
    Py_XDECREF(s);
    Py_XDECREF(tn);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Closes the coroutine (runs its finally blocks) after the code failed. */
static void close_coroutine(drv_state *st)
{
    PyObject *r = PyObject_CallMethod(st->coro, "close", NULL);
    if (!r)
        PyErr_Clear();
    Py_XDECREF(r);
}

enum { READY = 0, WAITING = 1, BAD = 2 };

/* Whether what the coroutine awaits lets it go on. */
static int check_awaiting(drv_state *st, duro_result *out)
{
    PyObject *a = st->awaiting;
    duro_orch *o = st->ctx->o;
    if (PyObject_TypeCheck(a, task_type)) {
        int s = task_read((task_object *)a);
        if (s < 0) {
            fail_with_exception(out, "awaiting a task");
            return BAD;
        }
        return s == DURO_TASK_PENDING ? WAITING : READY;
    }
    wait_object *w = (wait_object *)a;
    Py_ssize_t n = PyTuple_Size(w->tasks);
    duro_task *one[8];
    duro_task **ts = n <= 8 ? one : malloc((size_t)n * sizeof *ts);
    if (!ts) {
        duro_fail(out, "out of memory");
        return BAD;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        ts[i] = ((task_object *)PyTuple_GetItem(w->tasks, i))->t;
    int r = WAITING;
    /* kind 0 (ctx.any) cancels the losers; kind 2 (ctx.first) leaves them */
    if (w->kind == 0 || w->kind == 2) {
        const char *what = w->kind == 0 ? "ctx.any()" : "ctx.first()";
        duro_task *won = w->kind == 0 ? duro_select_done(o, ts, (size_t)n)
                                      : duro_first_done(o, ts, (size_t)n);
        if (won) {
            r = BAD;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (ts[i] == won) {
                    w->winner = i;
                    r = READY;
                    break;
                }
            }
            if (r == BAD)
                duro_failf(out, "%s: %s", what,
                           duro_task_error(won) ? duro_task_error(won)
                                                : duro_errmsg());
        } else if (n == 0) {
            duro_failf(out, "%s of no tasks", what);
            r = BAD;
        }
    } else {
        int done = duro_all_done(o, ts, (size_t)n);
        if (done == 1)
            r = READY;
        else if (done != 0) {
            duro_failf(out, "ctx.all(): %s", duro_errmsg());
            r = BAD;
        }
    }
    if (ts != one)
        free(ts);
    return r;
}

/* Sets the orchestration's result from what the pure layer's wrapper
 * returned: ("ok", output), ("fail", message) or ("continue_as_new",
 * input). */
static void set_result(duro_orch *o, duro_result *out, PyObject *r)
{
    const char *kind, *text;
    if (!PyTuple_Check(r) || !PyArg_ParseTuple(r, "sz", &kind, &text)) {
        PyErr_Clear();
        duro_fail(out, "the orchestration wrapper returned a bad result");
        return;
    }
    if (strcmp(kind, "ok") == 0)
        duro_ok(out, text);
    else if (strcmp(kind, "continue_as_new") == 0)
        duro_continue_as_new(o, out, text);
    else
        duro_fail(out, text);
}

static int drv_step(duro_orch *o, void *state, duro_result *out)
{
    if (atomic_load(&finalizing))
        return DURO_SHUTDOWN;
    drv_state *st = state;
    PyGILState_STATE g = gil_ensure();
    atomic_fetch_add(&count_steps, 1);
    st->ctx->o = o;
    st->ctx->in_step = 1;
    int rc;
    for (;;) {
        if (st->awaiting) {
            int r = check_awaiting(st, out);
            if (r == WAITING) {
                rc = DURO_STEP_WAITING;
                break;
            }
            Py_CLEAR(st->awaiting);
            if (r == BAD) {
                close_coroutine(st);
                rc = DURO_STEP_DONE;
                break;
            }
        }
        PyObject *yielded = NULL;
        PySendResult sr = PyIter_Send(st->coro, Py_None, &yielded);
        if (sr == PYGEN_NEXT) {
            if (PyObject_TypeCheck(yielded, task_type) ||
                PyObject_TypeCheck(yielded, wait_type)) {
                st->awaiting = yielded;
                continue;
            }
            PyObject *repr = PyObject_Repr(yielded);
            const char *rs = repr ? PyUnicode_AsUTF8AndSize(repr, NULL) : NULL;
            PyErr_Clear();
            duro_failf(out,
                       "the orchestration awaited %s, which is not a duro "
                       "task: await only what ctx gives (call_activity, "
                       "timer, wait_event, any, all, ...); asyncio and "
                       "other event loops are not available in "
                       "orchestrations",
                       rs ? rs : "an object");
            Py_XDECREF(repr);
            Py_DECREF(yielded);
            close_coroutine(st);
            rc = DURO_STEP_DONE;
            break;
        }
        if (sr == PYGEN_RETURN) {
            set_result(o, out, yielded);
            Py_XDECREF(yielded);
            rc = DURO_STEP_DONE;
            break;
        }
        fail_with_exception(out, "orchestration raised");
        rc = DURO_STEP_DONE;
        break;
    }
    st->ctx->in_step = 0;
    PyGILState_Release(g);
    return rc;
}

static void drv_destroy(void *state, void *user)
{
    (void)user;
    drv_state *st = state;
    if (!st)
        return;
    /* After the atexit hook: the interpreter may be finalizing, and a
     * thread taking the GIL then hangs or dies. Leak instead. */
    if (atomic_load(&finalizing))
        return;
    PyGILState_STATE g = gil_ensure();
    st->ctx->alive = 0;
    st->ctx->in_step = 0;
    st->ctx->o = NULL;
    Py_CLEAR(st->awaiting);
    Py_CLEAR(st->coro); /* a suspended coroutine is closed here */
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_CLEAR(st->ctx);
    atomic_fetch_add(&count_destroys, 1);
    PyGILState_Release(g);
    free(st);
}

static const duro_driver python_driver = {DURO_DRIVER_VERSION, drv_start,
                                          drv_step, drv_destroy};

/* ------------------------------------------------------------------------
 * Activities: the trampoline and ActivityContext */

typedef struct {
    PyObject_HEAD duro_activity *a; /* NULL once the activity returned */
} actx_object;

static int actx_check(actx_object *c)
{
    if (!c->a) {
        PyErr_SetString(error_type, "activity context used after the "
                                    "activity returned (DURO_MISUSE)");
        return -1;
    }
    return 0;
}

static PyObject *actx_get_instance_id(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return str_or_none(duro_activity_instance_id(c->a));
}

static PyObject *actx_get_name(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return str_or_none(duro_activity_name(c->a));
}

static PyObject *actx_get_attempt(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(duro_activity_attempt(c->a));
}

static PyObject *actx_get_cancelled(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return PyBool_FromLong(duro_activity_cancelled(c->a));
}

static PyObject *actx_get_delivery(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(duro_activity_delivery(c->a));
}

static PyObject *actx_get_cancel_reason(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return str_or_none(duro_activity_cancel_reason(c->a));
}

/* wait_cancelled(timeout): True when cancelled, False after timeout
 * seconds (None or < 0: no deadline); the GIL is released while it waits. */
static PyObject *actx_wait_cancelled(PyObject *self, PyObject *args)
{
    actx_object *c = (actx_object *)self;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &timeout))
        return NULL;
    if (actx_check(c) < 0)
        return NULL;
    long long timeout_ms = -1;
    if (timeout != Py_None) {
        double seconds = PyFloat_AsDouble(timeout);
        if (seconds == -1.0 && PyErr_Occurred())
            return NULL;
        timeout_ms = seconds < 0 ? -1 : (long long)(seconds * 1000.0);
    }
    duro_activity *a = c->a;
    int cancelled;
    Py_BEGIN_ALLOW_THREADS
    cancelled = duro_activity_wait_cancelled(a, timeout_ms);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(cancelled);
}

static PyObject *actx_get_activity_id(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(duro_activity_id(c->a));
}

static PyObject *actx_get_execution_id(PyObject *self, void *closure)
{
    (void)closure;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(duro_activity_execution_id(c->a));
}

/* cancel_fd(): the activity's cancellation eventfd (readable once
 * cancelled), owned by duro and closed when the activity returns. The
 * async activity runner watches it with loop.add_reader. */
static PyObject *actx_cancel_fd(PyObject *self, PyObject *unused)
{
    (void)unused;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    int fd = duro_activity_cancel_fd(c->a);
    if (fd < 0)
        return raise_duro(DURO_ERROR, "ActivityContext.cancel_fd");
    return PyLong_FromLong(fd);
}

static PyObject *token_wrap(duro_cancel_token *t);

/* cancel_token(): a CancelToken holding a reference to the activity's
 * token, for threads that may outlive the activity. */
static PyObject *actx_cancel_token(PyObject *self, PyObject *unused)
{
    (void)unused;
    actx_object *c = (actx_object *)self;
    if (actx_check(c) < 0)
        return NULL;
    return token_wrap(duro_activity_cancel_token(c->a));
}

static PyMethodDef actx_methods[] = {
    {"wait_cancelled", actx_wait_cancelled, METH_VARARGS,
     "wait_cancelled(timeout=None): True once cancelled, False after "
     "timeout seconds; the GIL is released while it waits."},
    {"cancel_fd", actx_cancel_fd, METH_NOARGS,
     "The cancellation file descriptor (readable once cancelled); owned "
     "by duro: do not read or close it."},
    {"cancel_token", actx_cancel_token, METH_NOARGS,
     "A CancelToken that outlives the activity call."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef actx_getset[] = {
    {"delivery", actx_get_delivery, NULL,
     "How many times this scheduling was delivered (1 normally).", NULL},
    {"cancel_reason", actx_get_cancel_reason, NULL,
     "Why it was cancelled (\"select_loser\", ...), None before.", NULL},
    {"instance_id", actx_get_instance_id, NULL, "The instance's id.", NULL},
    {"name", actx_get_name, NULL, "The activity's name.", NULL},
    {"attempt", actx_get_attempt, NULL, "Retry attempt, 1 for the first.",
     NULL},
    {"cancelled", actx_get_cancelled, NULL,
     "True once the activity has been cancelled.", NULL},
    {"activity_id", actx_get_activity_id, NULL,
     "The event id of the ActivityScheduled this run belongs to.", NULL},
    {"execution_id", actx_get_execution_id, NULL,
     "The instance's execution id.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot actx_slots[] = {
    {Py_tp_doc, "What an activity sees of its scheduling."},
    {Py_tp_dealloc, plain_dealloc},
    {Py_tp_getset, actx_getset},
    {Py_tp_methods, actx_methods},
    {0, NULL}};

static PyType_Spec actx_spec = {"duro._duro.ActivityContext",
                                sizeof(actx_object), 0, Py_TPFLAGS_DEFAULT,
                                actx_slots};

/* ------------------------------------------------------------------------
 * CancelToken: a reference to an activity's cancellation token
 * (duro_cancel_token) that threads the activity starts may keep after it
 * returned. Released by release() or when collected; a release while a
 * wait() is under way (GIL released) is deferred to the last waiter. */

typedef struct {
    PyObject_HEAD duro_cancel_token *t; /* NULL once released */
    int waiters;                        /* wait() calls under way */
    int released;                       /* release() was called */
} token_object;

static PyTypeObject *token_type; /* _duro.CancelToken */

static PyObject *token_wrap(duro_cancel_token *t)
{
    if (!t)
        return raise_duro(DURO_INVALID, "no cancellation token");
    token_object *tk = PyObject_New(token_object, token_type);
    if (!tk) {
        duro_cancel_token_release(t);
        return NULL;
    }
    tk->t = t;
    tk->waiters = 0;
    tk->released = 0;
    return (PyObject *)tk;
}

static int token_check(token_object *tk)
{
    if (!tk->t || tk->released) {
        PyErr_SetString(error_type, "CancelToken used after release() "
                                    "(DURO_MISUSE)");
        return -1;
    }
    return 0;
}

static PyObject *token_cancelled(PyObject *self, PyObject *unused)
{
    (void)unused;
    token_object *tk = (token_object *)self;
    if (token_check(tk) < 0)
        return NULL;
    return PyBool_FromLong(duro_cancel_token_cancelled(tk->t));
}

/* wait(timeout_ms): the GIL is released while it waits; the object (held
 * by the call) keeps the token, and a concurrent release() waits for us. */
static PyObject *token_wait(PyObject *self, PyObject *args)
{
    token_object *tk = (token_object *)self;
    long long timeout_ms = -1;
    if (!PyArg_ParseTuple(args, "|L", &timeout_ms))
        return NULL;
    if (token_check(tk) < 0)
        return NULL;
    duro_cancel_token *t = tk->t;
    int fired;
    tk->waiters++;
    Py_BEGIN_ALLOW_THREADS
    fired = duro_cancel_token_wait(t, timeout_ms);
    Py_END_ALLOW_THREADS
    if (--tk->waiters == 0 && tk->released && tk->t) {
        duro_cancel_token_release(tk->t);
        tk->t = NULL;
    }
    return PyBool_FromLong(fired);
}

static PyObject *token_fd(PyObject *self, PyObject *unused)
{
    (void)unused;
    token_object *tk = (token_object *)self;
    if (token_check(tk) < 0)
        return NULL;
    int fd = duro_cancel_token_fd(tk->t);
    if (fd < 0)
        return raise_duro(DURO_ERROR, "CancelToken.fd");
    return PyLong_FromLong(fd);
}

static PyObject *token_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    token_object *tk = (token_object *)self;
    tk->released = 1;
    if (tk->t && tk->waiters == 0) {
        duro_cancel_token_release(tk->t);
        tk->t = NULL;
    }
    Py_RETURN_NONE;
}

static void token_dealloc(PyObject *self)
{
    token_object *tk = (token_object *)self;
    duro_cancel_token_release(tk->t); /* no waiter: each holds self */
    plain_dealloc(self);
}

static PyMethodDef token_methods[] = {
    {"cancelled", token_cancelled, METH_NOARGS, NULL},
    {"wait", token_wait, METH_VARARGS, NULL},
    {"fd", token_fd, METH_NOARGS, NULL},
    {"release", token_release, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot token_slots[] = {
    {Py_tp_doc, "The native cancellation token (see duro.CancelToken)."},
    {Py_tp_dealloc, token_dealloc},
    {Py_tp_methods, token_methods},
    {0, NULL}};

static PyType_Spec token_spec = {"duro._duro.CancelToken", sizeof(token_object),
                                 0, Py_TPFLAGS_DEFAULT, token_slots};

/* Runs the pure layer's activity wrapper, which returns ("ok", output) or
 * ("fail", message), on a worker thread with the GIL taken. */
static int run_activity(duro_activity *a, const char *input, duro_result *out)
{
    if (atomic_load(&finalizing))
        return duro_fail_with(out, DURO_CATEGORY_INFRASTRUCTURE,
                              "the Python interpreter is shutting down");
    PyGILState_STATE g = gil_ensure();
    actx_object *ctx = PyObject_New(actx_object, actx_type);
    int rc = DURO_FAILED;
    if (!ctx) {
        fail_with_exception(out, "activity");
        goto out;
    }
    ctx->a = a;
    PyObject *in = str_or_none(input);
    PyObject *r =
        in ? PyObject_CallFunctionObjArgs(duro_activity_user(a), ctx, in, NULL)
           : NULL;
    Py_XDECREF(in);
    ctx->a = NULL;
    Py_DECREF(ctx);
    if (!r) {
        fail_with_exception(out, "activity raised");
        goto out;
    }
    const char *kind, *text;
    if (!PyArg_ParseTuple(r, "sz", &kind, &text)) {
        fail_with_exception(out, "activity wrapper");
    } else if (strcmp(kind, "ok") == 0) {
        rc = duro_ok(out, text);
    } else {
        rc = duro_fail(out, text);
    }
    Py_DECREF(r);
out:
    PyGILState_Release(g);
    return rc;
}

/* ------------------------------------------------------------------------
 * Registry */

typedef struct {
    PyObject_HEAD duro_registry *r;
    PyObject *keep; /* list: the callables whose pointers duro holds */
} reg_object;

static int reg_init(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    reg_object *r = (reg_object *)self;
    if (!PyArg_ParseTuple(args, ""))
        return -1;
    if (r->r)
        return 0;
    r->keep = PyList_New(0);
    if (!r->keep)
        return -1;
    int rc = duro_registry_create(&r->r);
    if (rc) {
        raise_duro(rc, "Registry");
        return -1;
    }
    return 0;
}

static void reg_dealloc(PyObject *self)
{
    reg_object *r = (reg_object *)self;
    duro_registry_destroy(r->r);
    Py_XDECREF(r->keep);
    plain_dealloc(self);
}

static PyObject *reg_add_orchestration(PyObject *self, PyObject *args)
{
    reg_object *r = (reg_object *)self;
    const char *name, *version;
    PyObject *fn;
    int observe_cancel = 0;
    long long cleanup_timeout_ms = 0, timeout_ms = 0;
    if (!PyArg_ParseTuple(args, "szO|pLL", &name, &version, &fn,
                          &observe_cancel, &cleanup_timeout_ms, &timeout_ms))
        return NULL;
    if (!r->r)
        return raise_duro(DURO_INVALID, "Registry not initialized");
    duro_orchestration_options opts;
    duro_orchestration_options_init(&opts);
    opts.observe_cancel = observe_cancel;
    opts.cleanup_timeout_ms = cleanup_timeout_ms;
    opts.timeout_ms = timeout_ms;
    int rc = duro_registry_add_driven_orchestration(r->r, name, version,
                                                    &python_driver, fn, &opts);
    if (rc)
        return raise_duro(rc, "add_orchestration");
    if (PyList_Append(r->keep, fn) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *reg_add_activity(PyObject *self, PyObject *args)
{
    reg_object *r = (reg_object *)self;
    const char *name;
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "sO", &name, &fn))
        return NULL;
    if (!r->r)
        return raise_duro(DURO_INVALID, "Registry not initialized");
    int rc = duro_registry_add_activity(r->r, name, run_activity, fn);
    if (rc)
        return raise_duro(rc, "add_activity");
    if (PyList_Append(r->keep, fn) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef reg_methods[] = {
    {"add_orchestration", reg_add_orchestration, METH_VARARGS, NULL},
    {"add_activity", reg_add_activity, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot reg_slots[] = {
    {Py_tp_doc, "The native registry (see duro.Registry)."},
    {Py_tp_init, reg_init},
    {Py_tp_dealloc, reg_dealloc},
    {Py_tp_methods, reg_methods},
    {0, NULL}};

static PyType_Spec reg_spec = {"duro._duro.Registry", sizeof(reg_object), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                               reg_slots};

/* ------------------------------------------------------------------------
 * Runtime */

typedef struct {
    PyObject_HEAD duro_runtime *rt;
    PyObject *reg; /* keeps the registry's callables alive */
} rt_object;

static int rt_init(PyObject *self, PyObject *args, PyObject *kw)
{
    rt_object *rt = (rt_object *)self;
    static char *kwlist[] = {"url",
                             "registry",
                             "orchestration_concurrency",
                             "worker_concurrency",
                             "fiber_cache_size",
                             "log_level",
                             "poll_interval_ms",
                             "worker_lock_timeout_ms",
                             "lock_renewal_ms",
                             "orchestration_lock_timeout_ms",
                             "cancel_grace_ms",
                             "schedules",
                             NULL};
    const char *url;
    PyObject *reg;
    int oc = -1, wc = -1, cache = -1, level = -1, poll = -1;
    long long worker_lock = 0, renewal = 0, orch_lock = 0, grace = -1;
    int schedules = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|iiiiiLLLLp", kwlist, &url,
                                     &reg, &oc, &wc, &cache, &level, &poll,
                                     &worker_lock, &renewal, &orch_lock, &grace,
                                     &schedules))
        return -1;
    if (!PyObject_TypeCheck(reg, reg_type)) {
        PyErr_SetString(PyExc_TypeError, "registry must be a duro.Registry");
        return -1;
    }
    if (rt->rt) {
        PyErr_SetString(PyExc_RuntimeError, "Runtime already initialized");
        return -1;
    }
    duro_runtime_options o;
    duro_runtime_options_init(&o);
    if (oc >= 0)
        o.orchestration_concurrency = oc;
    if (wc >= 0)
        o.worker_concurrency = wc;
    if (cache >= 0)
        o.fiber_cache_size = (size_t)cache;
    if (level >= 0)
        o.log_level = level;
    if (poll > 0)
        o.poll_interval_ms = poll;
    if (worker_lock > 0)
        o.worker_lock_timeout_ms = worker_lock;
    if (renewal > 0)
        o.lock_renewal_ms = renewal;
    if (orch_lock > 0)
        o.orchestration_lock_timeout_ms = orch_lock;
    if (grace >= 0)
        o.cancel_grace_ms = grace;
    o.schedules = schedules;
    duro_runtime *r = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_runtime_create(url, ((reg_object *)reg)->r, &o, &r);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_duro(rc, "Runtime");
        return -1;
    }
    rt->rt = r;
    Py_INCREF(reg);
    rt->reg = reg;
    return 0;
}

static PyObject *rt_start(PyObject *self, PyObject *unused)
{
    (void)unused;
    rt_object *rt = (rt_object *)self;
    if (!rt->rt)
        return raise_duro(DURO_INVALID_STATE, "Runtime.start");
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_runtime_start(rt->rt);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Runtime.start");
    Py_RETURN_NONE;
}

static PyObject *rt_shutdown(PyObject *self, PyObject *args)
{
    rt_object *rt = (rt_object *)self;
    long long timeout_ms = 10000;
    if (!PyArg_ParseTuple(args, "|L", &timeout_ms))
        return NULL;
    if (!rt->rt)
        Py_RETURN_NONE;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_runtime_shutdown(rt->rt, timeout_ms);
    Py_END_ALLOW_THREADS
    if (rc && rc != DURO_TIMEOUT)
        return raise_duro(rc, "Runtime.shutdown");
    return PyBool_FromLong(rc == DURO_OK);
}

static PyObject *rt_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    rt_object *rt = (rt_object *)self;
    duro_runtime *r = rt->rt;
    rt->rt = NULL;
    if (r) {
        Py_BEGIN_ALLOW_THREADS
        duro_runtime_destroy(r);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* The cancellation counters of activities, beside rt_metrics' own. */
static int add_activity_metrics(PyObject *d, const duro_metrics *m)
{
    const struct {
        const char *name;
        uint64_t value;
    } items[] = {
        {"activities_cancelled", m->activities_cancelled},
        {"activities_cancel_requested", m->activities_cancel_requested},
        {"activities_abandoned", m->activities_abandoned},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(items[i].value);
        int rc = v ? PyDict_SetItemString(d, items[i].name, v) : -1;
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static PyObject *rt_metrics(PyObject *self, PyObject *unused)
{
    (void)unused;
    rt_object *rt = (rt_object *)self;
    duro_metrics m;
    memset(&m, 0, sizeof m);
    duro_runtime_metrics(rt->rt, &m);
    PyObject *d = Py_BuildValue(
        "{sKsKsKsKsKsKsK}", "turns", (unsigned long long)m.turns, "replays",
        (unsigned long long)m.replays, "fiber_cache_hits",
        (unsigned long long)m.fiber_cache_hits, "orchestrations_completed",
        (unsigned long long)m.orchestrations_completed, "orchestrations_failed",
        (unsigned long long)m.orchestrations_failed, "activities_completed",
        (unsigned long long)m.activities_completed, "nondeterminism_errors",
        (unsigned long long)m.nondeterminism_errors);
    if (d && add_activity_metrics(d, &m) < 0)
        Py_CLEAR(d);
    return d;
}

static void rt_dealloc(PyObject *self)
{
    rt_object *rt = (rt_object *)self;
    /* Never at finalization: the hook closed every runtime before. */
    if (rt->rt && !atomic_load(&finalizing)) {
        duro_runtime *r = rt->rt;
        Py_BEGIN_ALLOW_THREADS
        duro_runtime_destroy(r);
        Py_END_ALLOW_THREADS
    }
    rt->rt = NULL;
    Py_XDECREF(rt->reg);
    plain_dealloc(self);
}

static PyMethodDef rt_methods[] = {
    {"start", rt_start, METH_NOARGS, NULL},
    {"shutdown", rt_shutdown, METH_VARARGS, NULL},
    {"close", rt_close, METH_NOARGS, NULL},
    {"metrics", rt_metrics, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot rt_slots[] = {
    {Py_tp_doc, "The native runtime (see duro.Runtime)."},
    {Py_tp_init, rt_init},
    {Py_tp_dealloc, rt_dealloc},
    {Py_tp_methods, rt_methods},
    {0, NULL}};

static PyType_Spec rt_spec = {"duro._duro.Runtime", sizeof(rt_object), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                              rt_slots};

/* ------------------------------------------------------------------------
 * Client */

typedef struct {
    PyObject_HEAD duro_client *c;
    PyObject *owner; /* a TestEnv whose client c is (borrowed: the TestEnv
                        destroys it), or NULL */
} client_object;

/* The test environment (duro_test_env); see duro.TestEnv. */
typedef struct {
    PyObject_HEAD duro_test_env *env;
    PyObject *reg;  /* keeps the registry's callables alive */
    PyObject *keep; /* list: the mocks' callables duro holds */
} env_object;

static int client_init(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    client_object *cl = (client_object *)self;
    PyObject *where;
    if (!PyArg_ParseTuple(args, "O", &where))
        return -1;
    if (cl->c) {
        PyErr_SetString(PyExc_RuntimeError, "Client already initialized");
        return -1;
    }
    if (PyObject_TypeCheck(where, env_type)) {
        /* the test environment's own client, borrowed */
        env_object *e = (env_object *)where;
        if (!e->env) {
            raise_duro(DURO_INVALID_STATE, "TestEnv is closed");
            return -1;
        }
        cl->c = duro_test_env_client(e->env);
        Py_INCREF(where);
        cl->owner = where;
        return 0;
    }
    const char *url =
        PyUnicode_Check(where) ? PyUnicode_AsUTF8AndSize(where, NULL) : NULL;
    if (!url) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "url must be a str");
        return -1;
    }
    int rc;
    duro_client *c = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_create(url, &c);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_duro(rc, "Client");
        return -1;
    }
    cl->c = c;
    return 0;
}

static int client_check(client_object *cl)
{
    if (!cl->c || (cl->owner && !((env_object *)cl->owner)->env)) {
        raise_duro(DURO_INVALID_STATE, "Client is closed");
        return -1;
    }
    return 0;
}

static PyObject *client_start(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *name, *input, *version;
    long long delay_ms, deadline_ms = 0, timeout_ms = 0;
    int idempotent;
    if (!PyArg_ParseTuple(args, "sszzLp|LL", &id, &name, &input, &version,
                          &delay_ms, &idempotent, &deadline_ms, &timeout_ms))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_start_options o;
    duro_start_options_init(&o);
    o.orchestration_version = version;
    o.delay_ms = delay_ms;
    o.idempotent = idempotent;
    o.deadline_ms = deadline_ms;
    o.timeout_ms = timeout_ms;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_start(cl->c, id, name, input, &o);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.start");
    Py_RETURN_NONE;
}

static PyObject *client_raise_event(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *name, *payload, *event_id;
    if (!PyArg_ParseTuple(args, "sszz", &id, &name, &payload, &event_id))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_raise_event_once(cl->c, id, name, payload, event_id);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.raise_event");
    Py_RETURN_NONE;
}

static PyObject *client_cancel(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *reason, *by;
    if (!PyArg_ParseTuple(args, "szz", &id, &reason, &by))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_cancel(cl->c, id, reason, by);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.cancel");
    Py_RETURN_NONE;
}

static PyObject *client_terminate(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *reason, *by;
    if (!PyArg_ParseTuple(args, "szz", &id, &reason, &by))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_terminate(cl->c, id, reason, by);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.terminate");
    Py_RETURN_NONE;
}

/* reset_instance(rewind, id, to_event, execution, reason, by, dry_run,
 * deadline_ms) ->
 * (status, from_execution, execution_id, to_event_id, activities, timers,
 * children): duro_client_reset or duro_client_rewind. */
static PyObject *client_reset(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *reason, *by;
    int rewind, dry_run;
    unsigned long long to_event, execution;
    long long deadline_ms;
    if (!PyArg_ParseTuple(args, "psKKzzpL", &rewind, &id, &to_event, &execution,
                          &reason, &by, &dry_run, &deadline_ms))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_reset_options o;
    duro_reset_options_init(&o);
    o.to_event_id = to_event;
    o.execution_id = execution;
    o.reason = reason;
    o.requested_by = by;
    o.dry_run = dry_run;
    o.deadline_ms = deadline_ms;
    duro_reset_result r;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = rewind ? duro_client_rewind(cl->c, id, &o, &r)
                : duro_client_reset(cl->c, id, &o, &r);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, rewind ? "Client.rewind" : "Client.reset");
    return Py_BuildValue("(sKKKIII)", duro_status_name(r.status),
                         (unsigned long long)r.from_execution,
                         (unsigned long long)r.execution_id,
                         (unsigned long long)r.to_event_id, r.activities,
                         r.timers, r.children);
}

static PyObject *client_suspend_resume(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *reason, *by;
    int resume;
    if (!PyArg_ParseTuple(args, "pszz", &resume, &id, &reason, &by))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = resume ? duro_client_resume(cl->c, id, reason, by)
                : duro_client_suspend(cl->c, id, reason, by);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, resume ? "Client.resume" : "Client.suspend");
    Py_RETURN_NONE;
}

/* Reads an execution's history and replays it through @p registry's
 * code on this thread (duro_replay_history): None when it matches. The
 * driver takes the GIL for its steps, so it is released around the call. */
static PyObject *client_replay(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    PyObject *reg;
    const char *id;
    unsigned long long execution = 0;
    if (!PyArg_ParseTuple(args, "O!s|K", reg_type, &reg, &id, &execution))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_history *h = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_read_history(cl->c, id, (uint64_t)execution, &h);
    if (rc == DURO_OK)
        rc = duro_replay_history(((reg_object *)reg)->r, h, NULL);
    Py_END_ALLOW_THREADS
    /* duro_errmsg() first: it is valid until the next duro call */
    PyObject *result = rc ? raise_duro(rc, "replay") : Py_NewRef(Py_None);
    duro_history_free(h);
    return result;
}

/* The instance's history as the stable JSON document replay tests read
 * (duro_client_export_history), as a str. */
static PyObject *client_export_history(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    char *doc = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_export_history(cl->c, id, &doc);
    Py_END_ALLOW_THREADS
    PyObject *result =
        rc ? raise_duro(rc, "export_history") : PyUnicode_FromString(doc);
    duro_free(doc);
    return result;
}

static PyObject *info_dict(const duro_instance_info *i)
{
    PyObject *d = Py_BuildValue(
        "{sNsNsNsssKsNsNsisNsLsLsN}", "instance_id",
        str_or_none(i->instance_id), "name", str_or_none(i->name), "version",
        str_or_none(i->version), "status", duro_status_name(i->status),
        "execution_id", (unsigned long long)i->execution_id, "output",
        str_or_none(i->output), "error", str_or_none(i->error), "category",
        i->category, "custom_status", str_or_none(i->custom_status),
        "created_ms", (long long)i->created_ms, "finished_ms",
        (long long)i->finished_ms, "last_problem",
        str_or_none(i->last_problem));
    if (!d)
        return NULL;
    /* the rest of duro_instance_info (issue 24's typed rows) */
    PyObject *more = Py_BuildValue(
        "{sLsNsKsNsNsLsLsLsL}", "updated_ms", (long long)i->updated_ms,
        "parent_instance", str_or_none(i->parent_instance), "history_count",
        (unsigned long long)i->history_count, "cancel_reason",
        str_or_none(i->cancel_reason), "cancelled_by",
        str_or_none(i->cancelled_by), "cancel_requested_ms",
        (long long)i->cancel_requested_ms, "last_problem_ms",
        (long long)i->last_problem_ms, "next_attempt_ms",
        (long long)i->next_attempt_ms, "deadline_ms",
        (long long)i->deadline_ms);
    if (!more || PyDict_Update(d, more) < 0) {
        Py_XDECREF(more);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(more);
    return d;
}

static PyObject *client_status(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_instance_info *info = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_get_status(cl->c, id, &info);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.status");
    PyObject *d = info_dict(info);
    duro_free(info);
    return d;
}

/* A wait's answer, (code, info dict or None): DURO_OK or DURO_TIMEOUT;
 * raises for any other code (`what` names the call). Frees info. */
static PyObject *wait_answer(int rc, duro_instance_info *info, const char *what)
{
    if (rc && rc != DURO_TIMEOUT) {
        raise_duro(rc, what); /* reads duro_errmsg() first */
        duro_free(info);
        return NULL;
    }
    PyObject *d = info ? info_dict(info) : Py_NewRef(Py_None);
    duro_free(info);
    if (!d)
        return NULL;
    return Py_BuildValue("(iN)", rc, d);
}

/* (code, info dict or None): the caller decides what a timeout means. */
static PyObject *client_wait(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "sL", &id, &timeout_ms))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_instance_info *info = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_wait(cl->c, id, timeout_ms, &info);
    Py_END_ALLOW_THREADS
    return wait_answer(rc, info, "Client.wait");
}

static PyObject *client_history(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    unsigned long long execution = 0;
    if (!PyArg_ParseTuple(args, "s|K", &id, &execution))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_history *h = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_read_history(cl->c, id, (uint64_t)execution, &h);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.history");
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < h->count; i++) {
        const duro_event *e = &h->events[i];
        PyObject *d = Py_BuildValue(
            "{sKsssKsNsNsNsNsisLsI}", "event_id",
            (unsigned long long)e->event_id, "kind",
            duro_event_kind_name(e->kind), "source_event_id",
            (unsigned long long)e->source_event_id, "name",
            str_or_none(e->name), "payload", str_or_none(e->payload), "error",
            str_or_none(e->error), "reason", str_or_none(e->reason), "category",
            e->category, "timestamp_ms", (long long)e->timestamp_ms, "flags",
            (unsigned int)e->flags);
        /* the rest of duro_event (issue 24's typed history) */
        PyObject *more =
            d ? Py_BuildValue(
                    "{sisNsNsNsKsKsLsIsLsL}", "kind_code", (int)e->kind,
                    "version", str_or_none(e->version), "requested_by",
                    str_or_none(e->requested_by), "ref_instance",
                    str_or_none(e->ref_instance), "ref_execution",
                    (unsigned long long)e->ref_execution, "ref_event_id",
                    (unsigned long long)e->ref_event_id, "fire_at_ms",
                    (long long)e->fire_at_ms, "attempt",
                    (unsigned int)e->attempt, "started_ms",
                    (long long)e->started_ms, "finished_ms",
                    (long long)e->finished_ms)
              : NULL;
        if (!more || PyDict_Update(d, more) < 0) {
            Py_XDECREF(more);
            Py_CLEAR(d);
        } else {
            Py_DECREF(more);
        }
        if (!d || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    duro_history_free(h);
    return list;
}

/* ------------------------------------------------------------------------
 * Client: bulk operations, queries, purge (issue 24). Each call releases
 * the GIL around the duro call; results are built after it, with the GIL.
 * Every outcome and status name comes from libduro (duro_*_name). */

/* Raises for @p rc (duro_errmsg() read first) and sets @p attr on the
 * exception to @p value (stolen; may be NULL when building it failed). */
static PyObject *raise_duro_with(int rc, const char *what, const char *attr,
                                 PyObject *(*build)(void *), void *arg)
{
    raise_duro(rc, what);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *v = build(arg);
    if (v && value)
        PyObject_SetAttrString(value, attr, v);
    Py_XDECREF(v);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* The ids of @p seq (a tuple of str) as a malloc'd array of UTF-8
 * pointers borrowed from the str objects, which the tuple keeps alive. */
static const char **ids_array(PyObject *seq, size_t *count)
{
    Py_ssize_t n = PyTuple_Size(seq);
    if (n < 0)
        return NULL;
    const char **ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GetItem(seq, i);
        Py_ssize_t len;
        const char *u =
            s && PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &len) : NULL;
        if (!u) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "instance ids must be str");
            free(ids);
            return NULL;
        }
        if ((size_t)len != strlen(u)) {
            PyErr_SetString(PyExc_ValueError,
                            "an instance id holds a NUL character");
            free(ids);
            return NULL;
        }
        ids[i] = u;
    }
    *count = (size_t)n;
    return ids;
}

typedef struct {
    const char **ids;
    size_t count;
    const int *outcome; /* count entries each */
    const int *status;
    const char *(*name)(int);
} outcomes_arg;

/* [(id, outcome name, status name before the call), ...] */
static PyObject *outcomes_list(void *arg)
{
    const outcomes_arg *a = arg;
    PyObject *list = PyList_New((Py_ssize_t)a->count);
    for (size_t i = 0; list && i < a->count; i++) {
        PyObject *t = Py_BuildValue("(sss)", a->ids[i], a->name(a->outcome[i]),
                                    duro_status_name(a->status[i]));
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t); /* steals */
    }
    return list;
}

/* cancel_many(ids, reason, by) -> outcomes; control_many(control, ids,
 * reason, by) likewise (duro_client_cancel_many, _control_many). */
static PyObject *client_many(client_object *cl, int control, PyObject *seq,
                             const char *reason, const char *by)
{
    size_t n = 0;
    const char **ids = ids_array(seq, &n);
    if (!ids)
        return NULL;
    duro_cancel_result *cr = calloc(n ? n : 1, sizeof *cr);
    duro_control_result *kr = calloc(n ? n : 1, sizeof *kr);
    int *outcome = calloc(n ? n : 1, sizeof *outcome);
    int *status = calloc(n ? n : 1, sizeof *status);
    if (!cr || !kr || !outcome || !status) {
        free(cr);
        free(kr);
        free(outcome);
        free(status);
        free(ids);
        return PyErr_NoMemory();
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = control
             ? duro_client_control_many(cl->c, control, ids, n, reason, by, kr)
             : duro_client_cancel_many(cl->c, ids, n, reason, by, cr);
    Py_END_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        outcome[i] = control ? kr[i].outcome : cr[i].outcome;
        status[i] = control ? kr[i].status : cr[i].status;
    }
    outcomes_arg a = {ids, n, outcome, status,
                      control ? duro_control_outcome_name
                              : duro_cancel_outcome_name};
    PyObject *result;
    if (rc)
        result = raise_duro_with(
            rc, control ? "Client.control_many" : "Client.cancel_many",
            "outcomes", outcomes_list, &a);
    else
        result = outcomes_list(&a);
    free(cr);
    free(kr);
    free(outcome);
    free(status);
    free(ids);
    return result;
}

static PyObject *client_cancel_many(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    PyObject *seq;
    const char *reason, *by;
    if (!PyArg_ParseTuple(args, "O!zz", &PyTuple_Type, &seq, &reason, &by))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    return client_many(cl, 0, seq, reason, by);
}

static PyObject *client_control_many(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    int control;
    PyObject *seq;
    const char *reason, *by;
    if (!PyArg_ParseTuple(args, "iO!zz", &control, &PyTuple_Type, &seq, &reason,
                          &by))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    if (control == 0) {
        PyErr_SetString(PyExc_ValueError, "control 0");
        return NULL;
    }
    return client_many(cl, control, seq, reason, by);
}

/* A bulk filter from (status_mask, name, version, created_after_ms,
 * created_before_ms, finished_before_ms); strings borrowed from @p t. */
static int bulk_filter_parse(PyObject *t, duro_bulk_filter *f)
{
    memset(f, 0, sizeof *f);
    unsigned int mask;
    long long after, before, finished;
    if (!PyArg_ParseTuple(t, "IzzLLL", &mask, &f->name, &f->version, &after,
                          &before, &finished))
        return -1;
    f->status_mask = mask;
    f->created_after_ms = after;
    f->created_before_ms = before;
    f->finished_before_ms = finished;
    return 0;
}

/* (count, [ids], applied) of a bulk result */
static PyObject *bulk_tuple(const duro_bulk_result *r)
{
    PyObject *ids = PyList_New((Py_ssize_t)r->id_count);
    for (size_t i = 0; ids && i < r->id_count; i++) {
        PyObject *s = PyUnicode_FromString(r->ids[i]);
        if (!s) {
            Py_CLEAR(ids);
            break;
        }
        PyList_SetItem(ids, (Py_ssize_t)i, s);
    }
    if (!ids)
        return NULL;
    return Py_BuildValue("(KNK)", (unsigned long long)r->count, ids,
                         (unsigned long long)r->applied);
}

enum { BULK_CANCEL = 0, BULK_PURGE = -1 }; /* others: a duro_control */

/* matching(op, filter, reason, by, dry_run, max_ids) -> (count, ids,
 * applied): duro_client_cancel_matching (op 0), _control_matching (op a
 * duro_control) or duro_client_purge (op -1; reason and by unused).
 * max_ids < 0: every id. */
static PyObject *client_matching(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    int op, dry_run;
    PyObject *ft;
    const char *reason, *by;
    long long max_ids;
    if (!PyArg_ParseTuple(args, "iO!zzpL", &op, &PyTuple_Type, &ft, &reason,
                          &by, &dry_run, &max_ids))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_bulk_filter f;
    if (bulk_filter_parse(ft, &f) < 0)
        return NULL;
    duro_bulk_options o;
    duro_bulk_options_init(&o);
    o.dry_run = dry_run;
    o.max_ids = max_ids < 0 ? SIZE_MAX : (size_t)max_ids;
    duro_bulk_result *r = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (op == BULK_PURGE)
        rc = duro_client_purge(cl->c, &f, &o, &r);
    else if (op == BULK_CANCEL)
        rc = duro_client_cancel_matching(cl->c, &f, reason, by, &o, &r);
    else
        rc = duro_client_control_matching(cl->c, op, &f, reason, by, &o, &r);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_duro(rc, op == BULK_PURGE    ? "Client.purge"
                       : op == BULK_CANCEL ? "Client.cancel_matching"
                                           : "Client.control_matching");
        duro_bulk_result_free(r);
        return NULL;
    }
    PyObject *t = bulk_tuple(r);
    duro_bulk_result_free(r);
    return t;
}

/* delete(id, force) -> instances deleted (duro_client_delete) */
static PyObject *client_delete(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    int force;
    if (!PyArg_ParseTuple(args, "sp", &id, &force))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    size_t deleted = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_delete(cl->c, id, force, &deleted);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.purge");
    return PyLong_FromSize_t(deleted);
}

/* query(status_mask, name, name_prefix, name_contains, parent,
 * with_problem, created_after_ms, created_before_ms, order, limit, cursor,
 * count_total, count_max) -> ([info dict], next_cursor, total,
 * total_capped) (duro_client_query) */
static PyObject *client_query(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    duro_instance_query q;
    duro_instance_query_init(&q);
    unsigned int mask;
    long long after, before, count_max;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "IzzzzpLLinzpL", &mask, &q.name, &q.name_prefix,
                          &q.name_contains, &q.parent_instance, &q.with_problem,
                          &after, &before, &q.order, &limit, &q.cursor,
                          &q.count_total, &count_max))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    q.status_mask = mask;
    q.created_after_ms = after;
    q.created_before_ms = before;
    /* a negative limit reaches duro as the huge size_t it converts to,
     * which duro refuses (DURO_INVALID), as its doc says */
    q.limit = (size_t)limit;
    q.count_max = count_max;
    duro_instance_page *page = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_query(cl->c, &q, &page);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.list");
    PyObject *items = PyList_New((Py_ssize_t)page->count);
    for (size_t i = 0; items && i < page->count; i++) {
        PyObject *d = info_dict(&page->items[i]);
        if (!d) {
            Py_CLEAR(items);
            break;
        }
        PyList_SetItem(items, (Py_ssize_t)i, d);
    }
    PyObject *t = NULL;
    if (items)
        t = Py_BuildValue("(NNLO)", items, str_or_none(page->next_cursor),
                          (long long)page->total,
                          page->total_capped ? Py_True : Py_False);
    duro_instance_page_free(page);
    return t;
}

/* ------------------------------------------------------------------------
 * Client: schedules (docs/schedules.md). A spec travels from the Python
 * layer as one tuple (duro._schedule_spec builds it); every description
 * is turned into dicts and lists before it is freed. */

/* Fills @p s from @p t, the tuple (cron, interval_ms, offset_ms, time_zone,
 * orchestration, version, input, overlap, catchup_window_ms or None,
 * jitter_ms, paused, note, start_ms, end_ms, timeout_ms). The strings are
 * borrowed from the tuple's str objects: the caller keeps @p t alive (an
 * argument of the call) until the duro call has returned. libduro checks
 * every value. Returns -1 with an exception set. */
static int schedule_spec_parse(PyObject *t, duro_schedule_spec *s)
{
    duro_schedule_spec_init(s);
    long long interval, offset, jitter, start, end, timeout;
    PyObject *catchup;
    if (!PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "a schedule spec must be a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(t, "zLLzszziOLpzLLL", &s->cron, &interval, &offset,
                          &s->time_zone, &s->orchestration,
                          &s->orchestration_version, &s->input, &s->overlap,
                          &catchup, &jitter, &s->paused, &s->note, &start, &end,
                          &timeout))
        return -1;
    s->interval_ms = interval;
    s->offset_ms = offset;
    s->jitter_ms = jitter;
    s->start_ms = start;
    s->end_ms = end;
    s->timeout_ms = timeout;
    if (catchup != Py_None) {
        long long ms = PyLong_AsLongLong(catchup);
        if (ms == -1 && PyErr_Occurred())
            return -1;
        s->catchup_window_ms = ms;
    }
    return 0;
}

/* schedule_put(update, id, spec): duro_client_schedule_create or
 * duro_client_schedule_update. */
static PyObject *client_schedule_put(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    int update;
    const char *id;
    PyObject *spec_tuple;
    if (!PyArg_ParseTuple(args, "psO", &update, &id, &spec_tuple))
        return NULL;
    duro_schedule_spec spec;
    if (schedule_spec_parse(spec_tuple, &spec) < 0 || client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = update ? duro_client_schedule_update(cl->c, id, &spec)
                : duro_client_schedule_create(cl->c, id, &spec);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, update ? "Client.update_schedule"
                                     : "Client.create_schedule");
    Py_RETURN_NONE;
}

static PyObject *client_schedule_pause(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id, *note;
    if (!PyArg_ParseTuple(args, "sz", &id, &note))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_schedule_pause(cl->c, id, note);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.pause_schedule");
    Py_RETURN_NONE;
}

/* schedule_verb(verb, id): 0 resume, 1 delete. */
static PyObject *client_schedule_verb(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    int verb;
    const char *id;
    if (!PyArg_ParseTuple(args, "is", &verb, &id))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = verb ? duro_client_schedule_delete(cl->c, id)
              : duro_client_schedule_resume(cl->c, id);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, verb ? "Client.delete_schedule"
                                   : "Client.resume_schedule");
    Py_RETURN_NONE;
}

/* The started instance's id, None when the overlap policy started none
 * (duro gives "" then). */
static PyObject *client_schedule_trigger(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    if (!PyArg_ParseTuple(args, "s", &id))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    /* a trigger's id: the schedule's, "@trigger-" and an RFC 3339 time */
    char started[DURO_SCHEDULE_ID_MAX + 64];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_schedule_trigger(cl->c, id, started, sizeof(started));
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.trigger_schedule");
    if (!started[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(started);
}

/* A schedule as a dict: the spec's fields as stored (times in ms, overlap
 * as its number), last_status None for none, every string copied. */
static PyObject *schedule_info_dict(const duro_schedule_info *i)
{
    const duro_schedule_spec *s = &i->spec;
    PyObject *d = Py_BuildValue(
        "{sNsNsNsNsLsLsNsNsisLsLsOsNsLsLsL}", "id", str_or_none(i->id),
        "orchestration", str_or_none(s->orchestration), "version",
        str_or_none(s->orchestration_version), "cron", str_or_none(s->cron),
        "interval_ms", (long long)s->interval_ms, "offset_ms",
        (long long)s->offset_ms, "time_zone", str_or_none(s->time_zone),
        "input", str_or_none(s->input), "overlap", s->overlap,
        "catchup_window_ms", (long long)s->catchup_window_ms, "jitter_ms",
        (long long)s->jitter_ms, "paused", s->paused ? Py_True : Py_False,
        "note", str_or_none(s->note), "start_ms", (long long)s->start_ms,
        "end_ms", (long long)s->end_ms, "timeout_ms", (long long)s->timeout_ms);
    if (!d)
        return NULL;
    PyObject *more = Py_BuildValue(
        "{sLsLsNsNsLsLsLsL}", "next_ms", (long long)i->next_ms, "buffered_ms",
        (long long)i->buffered_ms, "last_instance_id",
        str_or_none(i->last_instance_id), "last_status",
        i->last_status == DURO_STATUS_NOT_FOUND
            ? Py_NewRef(Py_None)
            : PyUnicode_FromString(duro_status_name(i->last_status)),
        "fires", (long long)i->fires, "skips", (long long)i->skips,
        "created_ms", (long long)i->created_ms, "updated_ms",
        (long long)i->updated_ms);
    if (!more || PyDict_Update(d, more) < 0) {
        Py_XDECREF(more);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(more);
    return d;
}

static PyObject *schedule_fire_dict(const duro_schedule_fire *f)
{
    return Py_BuildValue(
        "{sisLsLsNsNsNsL}", "action", f->action, "time_ms",
        (long long)f->time_ms, "count", (long long)f->count, "instance_id",
        str_or_none(f->instance_id), "instance_status",
        f->instance_id && f->instance_status != DURO_STATUS_NOT_FOUND
            ? PyUnicode_FromString(duro_status_name(f->instance_status))
            : Py_NewRef(Py_None),
        "why", str_or_none(f->why), "recorded_ms", (long long)f->recorded_ms);
}

/* (schedules, next_times, fires) of @p d as lists of dicts and of ms, all
 * copied: nothing of @p d outlives it. */
static PyObject *schedule_description_tuple(const duro_schedule_description *d)
{
    PyObject *schedules = PyList_New((Py_ssize_t)d->count);
    PyObject *next = PyList_New((Py_ssize_t)d->next_count);
    PyObject *fires = PyList_New((Py_ssize_t)d->fire_count);
    if (!schedules || !next || !fires)
        goto fail;
    for (size_t i = 0; i < d->count; i++) {
        PyObject *v = schedule_info_dict(&d->schedules[i]);
        if (!v)
            goto fail;
        PyList_SetItem(schedules, (Py_ssize_t)i, v);
    }
    for (size_t i = 0; i < d->next_count; i++) {
        PyObject *v = PyLong_FromLongLong((long long)d->next_times[i]);
        if (!v)
            goto fail;
        PyList_SetItem(next, (Py_ssize_t)i, v);
    }
    for (size_t i = 0; i < d->fire_count; i++) {
        PyObject *v = schedule_fire_dict(&d->fires[i]);
        if (!v)
            goto fail;
        PyList_SetItem(fires, (Py_ssize_t)i, v);
    }
    return Py_BuildValue("(NNN)", schedules, next, fires);
fail:
    Py_XDECREF(schedules);
    Py_XDECREF(next);
    Py_XDECREF(fires);
    return NULL;
}

/* schedule_list() -> the schedules' dicts, in id order. */
static PyObject *client_schedule_list(PyObject *self, PyObject *unused)
{
    (void)unused;
    client_object *cl = (client_object *)self;
    if (client_check(cl) < 0)
        return NULL;
    duro_schedule_description *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_schedule_list(cl->c, &d);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.list_schedules");
    PyObject *t = schedule_description_tuple(d);
    duro_schedule_description_free(d);
    if (!t)
        return NULL;
    PyObject *schedules = Py_NewRef(PyTuple_GetItem(t, 0));
    Py_DECREF(t);
    return schedules;
}

/* schedule_describe(id, next_count, fire_count) -> (schedules, next_times,
 * fires); a negative count reaches duro as the huge size_t it converts to,
 * which duro refuses (DURO_INVALID). */
static PyObject *client_schedule_describe(PyObject *self, PyObject *args)
{
    client_object *cl = (client_object *)self;
    const char *id;
    Py_ssize_t next_count, fire_count;
    if (!PyArg_ParseTuple(args, "snn", &id, &next_count, &fire_count))
        return NULL;
    if (client_check(cl) < 0)
        return NULL;
    duro_schedule_description *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_client_schedule_describe(cl->c, id, (size_t)next_count,
                                       (size_t)fire_count, &d);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "Client.describe_schedule");
    PyObject *t = schedule_description_tuple(d);
    duro_schedule_description_free(d);
    return t;
}

static PyObject *client_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    client_object *cl = (client_object *)self;
    duro_client *c = cl->c;
    cl->c = NULL;
    if (c && !cl->owner) {
        Py_BEGIN_ALLOW_THREADS
        duro_client_destroy(c);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void client_dealloc(PyObject *self)
{
    client_object *cl = (client_object *)self;
    if (cl->c && !cl->owner && !atomic_load(&finalizing))
        duro_client_destroy(cl->c);
    cl->c = NULL;
    Py_CLEAR(cl->owner);
    plain_dealloc(self);
}

static PyMethodDef client_methods[] = {
    {"start", client_start, METH_VARARGS, NULL},
    {"raise_event", client_raise_event, METH_VARARGS, NULL},
    {"cancel", client_cancel, METH_VARARGS, NULL},
    {"terminate", client_terminate, METH_VARARGS, NULL},
    {"reset_instance", client_reset, METH_VARARGS, NULL},
    {"status", client_status, METH_VARARGS, NULL},
    {"wait", client_wait, METH_VARARGS, NULL},
    {"history", client_history, METH_VARARGS, NULL},
    {"suspend_resume", client_suspend_resume, METH_VARARGS, NULL},
    {"replay", client_replay, METH_VARARGS, NULL},
    {"export_history", client_export_history, METH_VARARGS, NULL},
    {"cancel_many", client_cancel_many, METH_VARARGS, NULL},
    {"control_many", client_control_many, METH_VARARGS, NULL},
    {"matching", client_matching, METH_VARARGS, NULL},
    {"delete", client_delete, METH_VARARGS, NULL},
    {"query", client_query, METH_VARARGS, NULL},
    {"schedule_put", client_schedule_put, METH_VARARGS, NULL},
    {"schedule_pause", client_schedule_pause, METH_VARARGS, NULL},
    {"schedule_verb", client_schedule_verb, METH_VARARGS, NULL},
    {"schedule_trigger", client_schedule_trigger, METH_VARARGS, NULL},
    {"schedule_list", client_schedule_list, METH_NOARGS, NULL},
    {"schedule_describe", client_schedule_describe, METH_VARARGS, NULL},
    {"close", client_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot client_slots[] = {
    {Py_tp_doc, "The native client (see duro.Client)."},
    {Py_tp_init, client_init},
    {Py_tp_dealloc, client_dealloc},
    {Py_tp_methods, client_methods},
    {0, NULL}};

static PyType_Spec client_spec = {"duro._duro.Client", sizeof(client_object), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                                  client_slots};

/* ------------------------------------------------------------------------
 * TestEnv: duro_test_env, the virtual clock; every rule is libduro's */

static int env_init(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)kw;
    env_object *e = (env_object *)self;
    PyObject *reg;
    const char *url = NULL;
    if (!PyArg_ParseTuple(args, "O|z", &reg, &url))
        return -1;
    if (!PyObject_TypeCheck(reg, reg_type)) {
        PyErr_SetString(PyExc_TypeError, "registry must be a duro.Registry");
        return -1;
    }
    if (e->env) {
        PyErr_SetString(PyExc_RuntimeError, "TestEnv already initialized");
        return -1;
    }
    if (!e->keep && !(e->keep = PyList_New(0)))
        return -1;
    duro_test_env_options o;
    duro_test_env_options_init(&o);
    o.url = url;
    duro_test_env *env = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_test_env_create(((reg_object *)reg)->r, &o, &env);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_duro(rc, "TestEnv");
        return -1;
    }
    e->env = env;
    Py_INCREF(reg);
    e->reg = reg;
    return 0;
}

static int env_check(env_object *e)
{
    if (!e->env) {
        raise_duro(DURO_INVALID_STATE, "TestEnv is closed");
        return -1;
    }
    return 0;
}

static PyObject *env_mock_activity(PyObject *self, PyObject *args)
{
    env_object *e = (env_object *)self;
    const char *name;
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "sO", &name, &fn))
        return NULL;
    if (env_check(e) < 0)
        return NULL;
    int rc = duro_test_env_mock_activity(e->env, name, run_activity, fn);
    if (rc)
        return raise_duro(rc, "TestEnv.mock_activity");
    if (PyList_Append(e->keep, fn) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *env_start(PyObject *self, PyObject *unused)
{
    (void)unused;
    env_object *e = (env_object *)self;
    if (env_check(e) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_test_env_start(e->env);
    Py_END_ALLOW_THREADS
    if (rc)
        return raise_duro(rc, "TestEnv.start");
    Py_RETURN_NONE;
}

static PyObject *env_advance(PyObject *self, PyObject *args)
{
    env_object *e = (env_object *)self;
    long long ms;
    if (!PyArg_ParseTuple(args, "L", &ms))
        return NULL;
    if (env_check(e) < 0)
        return NULL;
    int rc = duro_test_env_advance(e->env, ms);
    if (rc)
        return raise_duro(rc, "TestEnv.advance");
    Py_RETURN_NONE;
}

static PyObject *env_skipped_ms(PyObject *self, PyObject *unused)
{
    (void)unused;
    env_object *e = (env_object *)self;
    if (env_check(e) < 0)
        return NULL;
    return PyLong_FromLongLong(duro_test_env_skipped_ms(e->env));
}

/* (code, info) as Client.wait: DURO_OK or DURO_TIMEOUT; raises else. */
static PyObject *env_wait(PyObject *self, PyObject *args)
{
    env_object *e = (env_object *)self;
    const char *id;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "sL", &id, &timeout_ms))
        return NULL;
    if (env_check(e) < 0)
        return NULL;
    duro_instance_info *info = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_test_env_wait(e->env, id, timeout_ms, &info);
    Py_END_ALLOW_THREADS
    return wait_answer(rc, info, "TestEnv.wait");
}

static PyObject *env_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    env_object *e = (env_object *)self;
    duro_test_env *env = e->env;
    e->env = NULL; /* its borrowed clients are closed with it */
    if (env) {
        Py_BEGIN_ALLOW_THREADS
        duro_test_env_destroy(env);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void env_dealloc(PyObject *self)
{
    env_object *e = (env_object *)self;
    /* Never at finalization: the atexit hook closed it before. */
    if (e->env && !atomic_load(&finalizing)) {
        duro_test_env *env = e->env;
        Py_BEGIN_ALLOW_THREADS
        duro_test_env_destroy(env);
        Py_END_ALLOW_THREADS
    }
    e->env = NULL;
    Py_XDECREF(e->reg);
    Py_XDECREF(e->keep);
    plain_dealloc(self);
}

static PyMethodDef env_methods[] = {
    {"mock_activity", env_mock_activity, METH_VARARGS, NULL},
    {"start", env_start, METH_NOARGS, NULL},
    {"advance", env_advance, METH_VARARGS, NULL},
    {"skipped_ms", env_skipped_ms, METH_NOARGS, NULL},
    {"wait", env_wait, METH_VARARGS, NULL},
    {"close", env_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyType_Slot env_slots[] = {
    {Py_tp_doc, "The native test environment (see duro.TestEnv)."},
    {Py_tp_init, env_init},
    {Py_tp_dealloc, env_dealloc},
    {Py_tp_methods, env_methods},
    {0, NULL}};

static PyType_Spec env_spec = {"duro._duro.TestEnv", sizeof(env_object), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                               env_slots};

/* ------------------------------------------------------------------------
 * module functions */

static PyObject *mod_set_finalizing(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    atomic_store(&finalizing, 1);
    Py_RETURN_NONE;
}

static PyObject *mod_debug_counters(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue(
        "{sKsKsKsKsK}", "starts",
        (unsigned long long)atomic_load(&count_starts), "steps",
        (unsigned long long)atomic_load(&count_steps), "destroys",
        (unsigned long long)atomic_load(&count_destroys), "tstates_kept",
        (unsigned long long)atomic_load(&count_tstates_kept), "tstates_deleted",
        (unsigned long long)atomic_load(&count_tstates_deleted));
}

static PyObject *mod_register_error(PyObject *self, PyObject *args)
{
    (void)self;
    int code;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "iO", &code, &cls))
        return NULL;
    PyObject *key = PyLong_FromLong(code);
    if (!key)
        return NULL;
    int rc = PyDict_SetItem(error_classes, key, cls);
    Py_DECREF(key);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *mod_errname(PyObject *self, PyObject *args)
{
    (void)self;
    int code;
    if (!PyArg_ParseTuple(args, "i", &code))
        return NULL;
    return PyUnicode_FromString(duro_errname(code));
}

/* status_code(name) -> duro_status, -1 when unknown (duro_status_parse) */
static PyObject *mod_status_code(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    return PyLong_FromLong(duro_status_parse(name));
}

/* event_kind_name(kind) -> duro_event_kind_name(kind) */
static PyObject *mod_event_kind_name(PyObject *self, PyObject *args)
{
    (void)self;
    int kind;
    if (!PyArg_ParseTuple(args, "i", &kind))
        return NULL;
    return PyUnicode_FromString(duro_event_kind_name(kind));
}

/* replay_json(registry, document) / replay_file(registry, path): an
 * exported history replayed through the registry's code on this thread
 * (duro_replay_json, duro_replay_file), the GIL released around it (the
 * driver takes it for each step): None, or raises with duro's message. */
static PyObject *mod_replay_exported(PyObject *args, int file)
{
    PyObject *reg;
    const char *text;
    Py_ssize_t len = 0;
    if (file ? !PyArg_ParseTuple(args, "O!s", reg_type, &reg, &text)
             : !PyArg_ParseTuple(args, "O!s#", reg_type, &reg, &text, &len))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = file ? duro_replay_file(((reg_object *)reg)->r, text, NULL, NULL)
              : duro_replay_json(((reg_object *)reg)->r, text, (size_t)len,
                                 NULL, NULL);
    Py_END_ALLOW_THREADS
    return rc ? raise_duro(rc, file ? "replay_file" : "replay_json")
              : Py_NewRef(Py_None);
}

static PyObject *mod_replay_json(PyObject *self, PyObject *args)
{
    (void)self;
    return mod_replay_exported(args, 0);
}

static PyObject *mod_replay_file(PyObject *self, PyObject *args)
{
    (void)self;
    return mod_replay_exported(args, 1);
}

/* At most this many fire times per schedule_next_times call: the buffer is
 * the binding's, so the binding bounds it (describe's own bound is 100). */
#define NEXT_TIMES_MAX 10000

/* schedule_next_times(spec, after_ms, count) -> [ms, ...]
 * (duro_schedule_spec_next_times: no store). */
static PyObject *mod_schedule_next_times(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *spec_tuple;
    long long after_ms;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OLn", &spec_tuple, &after_ms, &count))
        return NULL;
    duro_schedule_spec spec;
    if (schedule_spec_parse(spec_tuple, &spec) < 0)
        return NULL;
    if (count < 0 || count > NEXT_TIMES_MAX) {
        char detail[96];
        snprintf(detail, sizeof(detail), "count %zd is not in 0 .. %d", count,
                 NEXT_TIMES_MAX);
        return raise_duro_text(DURO_INVALID, "schedule_next_fires", detail);
    }
    int64_t *times = PyMem_Malloc(((size_t)count + 1) * sizeof(int64_t));
    if (!times)
        return PyErr_NoMemory();
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = duro_schedule_spec_next_times(&spec, after_ms, times, (size_t)count,
                                       &n);
    Py_END_ALLOW_THREADS
    PyObject *list =
        rc ? raise_duro(rc, "schedule_next_fires") : PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLongLong((long long)times[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SetItem(list, (Py_ssize_t)i, v);
    }
    PyMem_Free(times);
    return list;
}

static PyMethodDef mod_methods[] = {
    {"schedule_next_times", mod_schedule_next_times, METH_VARARGS,
     "duro_schedule_spec_next_times(spec, after_ms, count)."},
    {"status_code", mod_status_code, METH_VARARGS,
     "duro_status_parse(name): the status's code, -1 when unknown."},
    {"event_kind_name", mod_event_kind_name, METH_VARARGS,
     "duro_event_kind_name(kind)."},
    {"_set_finalizing", mod_set_finalizing, METH_NOARGS,
     "From now on no duro thread touches Python (the atexit hook)."},
    {"_debug_counters", mod_debug_counters, METH_NOARGS,
     "Driver starts, steps and destroys since import (tests)."},
    {"_register_error", mod_register_error, METH_VARARGS,
     "The Error subclass raised for a duro code."},
    {"errname", mod_errname, METH_VARARGS, "duro_errname(code)."},
    {"replay_json", mod_replay_json, METH_VARARGS,
     "duro_replay_json(registry, document)."},
    {"replay_file", mod_replay_file, METH_VARARGS,
     "duro_replay_file(registry, path)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef duro_module = {
    PyModuleDef_HEAD_INIT,
    "duro._duro",
    "The native part of duro (see the duro package).",
    0,
    mod_methods,
    NULL, /* m_slots: set by PyInit__duro (duro_slots) */
    NULL,
    NULL,
    NULL};

static PyTypeObject *add_type(PyObject *m, PyType_Spec *spec, PyObject *base,
                              const char *name)
{
    PyObject *t = PyType_FromSpecWithBases(spec, base);
    if (!t)
        return NULL;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, t) < 0) {
        Py_DECREF(t);
        Py_DECREF(t);
        return NULL;
    }
    return (PyTypeObject *)t;
}

/* ------------------------------------------------------------------------
 * one interpreter only: the module's state is process-wide (the globals
 * above) and its callbacks take the GIL with PyGILState_Ensure, which knows
 * the main interpreter only. With multi-phase init the exec slot runs in
 * every interpreter that imports the module (a single-phase module would be
 * copied into a sub-interpreter without running any code of ours), so it
 * refuses all but the main one (id 0; the Limited API 3.10 has no
 * PyInterpreterState_Main nor the 3.12 slot Py_mod_multiple_interpreters).
 * A second import in the main interpreter (sys.modules emptied, a reload)
 * gets the objects of the first one, as a single-phase module would. */

static PyObject *first_dict; /* the first module's names, dunders left out */

static int module_init(PyObject *m);

static int duro_exec(PyObject *m)
{
    if (PyInterpreterState_GetID(PyInterpreterState_Get()) != 0) {
        PyErr_SetString(PyExc_ImportError,
                        "duro._duro cannot be imported in a sub-interpreter: "
                        "its state is process-wide and its threads call "
                        "Python through PyGILState_Ensure; import duro in "
                        "the main interpreter only");
        return -1;
    }
    if (first_dict)
        return PyDict_Update(PyModule_GetDict(m), first_dict);
    if (module_init(m) < 0)
        return -1;
    PyObject *names = PyDict_New(), *key, *value;
    Py_ssize_t pos = 0;
    if (!names)
        return -1;
    while (PyDict_Next(PyModule_GetDict(m), &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
        if (!name) {
            Py_DECREF(names);
            return -1;
        }
        if (strncmp(name, "__", 2) == 0)
            continue;
        if (PyDict_SetItem(names, key, value) < 0) {
            Py_DECREF(names);
            return -1;
        }
    }
    first_dict = names;
    return 0;
}

static PyModuleDef_Slot duro_slots[] = {{Py_mod_exec, (void *)duro_exec},
                                        {0, NULL}};

PyMODINIT_FUNC PyInit__duro(void);

PyMODINIT_FUNC PyInit__duro(void)
{
    duro_module.m_slots = duro_slots;
    return PyModuleDef_Init(&duro_module);
}

/* The first import's body of duro_exec: the types, Error and constants. */
static int module_init(PyObject *m)
{
    error_type = PyErr_NewExceptionWithDoc(
        "duro.Error",
        "A duro call failed; .code is duro's error code, .errname its name.",
        NULL, NULL);
    error_classes = PyDict_New();
    if (!error_type || !error_classes)
        goto fail;
    Py_INCREF(error_type);
    if (PyModule_AddObject(m, "Error", error_type) < 0)
        goto fail;
    if (!(task_type = add_type(m, &task_spec, NULL, "Task")) ||
        !(wait_type = add_type(m, &wait_spec, NULL, "Wait")) ||
        !(octx_type = add_type(m, &octx_spec, NULL, "OrchestrationContext")) ||
        !(actx_type = add_type(m, &actx_spec, NULL, "ActivityContext")) ||
        !(token_type = add_type(m, &token_spec, NULL, "CancelToken")) ||
        !(reg_type = add_type(m, &reg_spec, NULL, "Registry")) ||
        !(rt_type = add_type(m, &rt_spec, NULL, "Runtime")) ||
        !(client_type = add_type(m, &client_spec, NULL, "Client")) ||
        !(env_type = add_type(m, &env_spec, NULL, "TestEnv")))
        goto fail;
#define CODE(name, value, text)                                                \
    if (PyModule_AddIntConstant(m, #name, value) < 0)                          \
        goto fail;
    DURO_ERROR_TABLE(CODE)
#undef CODE
    if (PyModule_AddIntConstant(m, "DURO_CONTROL_TERMINATE",
                                DURO_CONTROL_TERMINATE) < 0 ||
        PyModule_AddIntConstant(m, "DURO_CONTROL_SUSPEND",
                                DURO_CONTROL_SUSPEND) < 0 ||
        PyModule_AddIntConstant(m, "DURO_CONTROL_RESUME", DURO_CONTROL_RESUME) <
            0 ||
        PyModule_AddIntConstant(m, "DURO_EVENT_KIND_MAX", DURO_EVENT_KIND_MAX) <
            0 ||
        PyModule_AddIntConstant(m, "DURO_START_DETACHED", DURO_START_DETACHED) <
            0 ||
        PyModule_AddIntConstant(m, "DURO_CANCEL_OBSERVED",
                                DURO_CANCEL_OBSERVED) < 0 ||
        PyModule_AddIntConstant(m, "DURO_TIMER_CLEANUP_DEADLINE",
                                DURO_TIMER_CLEANUP_DEADLINE) < 0 ||
        PyModule_AddIntConstant(m, "DURO_SUSPEND_BEFORE_START",
                                DURO_SUSPEND_BEFORE_START) < 0)
        goto fail;
    if (PyModule_AddStringConstant(m, "DURO_VERSION", duro_version()) < 0)
        goto fail;
    return 0;
fail:
    return -1;
}
