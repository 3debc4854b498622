/* test_cancel_reasons.c - the reason a cancelled activity reads is the one
 * its cancelling turn decided, whichever path fires its token: in the same
 * process both the turn (right after its commit) and the activity manager
 * (whose renewal finds the row gone and reads the recorded reason) may fire
 * it, and both orderings are forced here with the fault-injecting wrapper's
 * hooks; in another process only the renewal can. "lock_lost" is read only
 * when the lock really was lost to another fetch, "instance_deleted" when
 * the instance was deleted with force. Real runtimes on SQLite
 * files; every wait has a deadline and no assertion is about time. */
#include <stdlib.h>
#include <unistd.h>

#include "faulty_provider.h"
#include "rt_util.h"

#define DEADLINE 20000

static struct {
    _Atomic int started;     /* runs of Hold that began */
    _Atomic int cancel_seen; /* runs that saw their token */
    _Atomic int finish;      /* lets a running Hold return */
    _Atomic int fail_wait;   /* a hook's wait ran out */
    char reason[8][32];      /* per run, what it read */
} seen;

static void reset_seen(void)
{
    memset(&seen, 0, sizeof(seen));
}

/* Waits until told to finish or cancelled; records the reason it read. */
static int act_hold(duro_activity *a, const char *in, duro_result *out)
{
    (void)in;
    int run = atomic_fetch_add(&seen.started, 1);
    while (!atomic_load(&seen.finish)) {
        if (duro_activity_wait_cancelled(a, 5)) {
            const char *r = duro_activity_cancel_reason(a);
            if (run < 8)
                snprintf(seen.reason[run], sizeof(seen.reason[run]), "%s",
                         r ? r : "(null)");
            atomic_fetch_add(&seen.cancel_seen, 1);
            return duro_fail(out, "cancelled");
        }
    }
    return duro_ok(out, "held and finished");
}

/* Calls Hold and waits for it. */
static int orch_one(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Hold", "x");
    if (duro_await(o, t) != DURO_OK)
        return duro_fail(out, duro_task_error(t));
    return duro_ok(out, duro_task_output(t));
}

/* Hold against the event "go": raising it makes Hold the select's loser. */
static int orch_select(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Hold", "x");
    duro_task *go = duro_wait_event(o, "go");
    duro_task *w = duro_select(o, t, go);
    return duro_ok(out, w == go ? "event won" : "activity won");
}

/* Hold, cancelled by the code itself (duro_cancel_task) once "go" comes. */
static int orch_cancel_task(duro_orch *o, const char *in, duro_result *out)
{
    (void)in;
    duro_task *t = duro_call_activity(o, "Hold", "x");
    duro_await(o, duro_wait_event(o, "go"));
    duro_cancel_task(o, t);
    return duro_ok(out, duro_await(o, t) == DURO_CANCELLED ? "task cancelled"
                                                           : "not cancelled");
}

static void register_all(duro_registry *r)
{
    CHECK_OK(duro_registry_add_activity(r, "Hold", act_hold, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "One", NULL, orch_one, NULL));
    CHECK_OK(
        duro_registry_add_orchestration(r, "Select", NULL, orch_select, NULL));
    CHECK_OK(duro_registry_add_orchestration(r, "CancelTask", NULL,
                                             orch_cancel_task, NULL));
}

/* Waits for cond with a deadline without failing (hooks run on runtime
 * threads and must return); records a timeout for the main thread. */
#define HOOK_WAIT(cond)                                                        \
    do {                                                                       \
        int64_t end_ = test_now_ms() + DEADLINE;                               \
        while (!(cond)) {                                                      \
            if (test_now_ms() > end_) {                                        \
                atomic_store(&seen.fail_wait, 1);                              \
                break;                                                         \
            }                                                                  \
            usleep(1000);                                                      \
        }                                                                      \
    } while (0)

/* ------------------------------------------------------------------------
 * hooks that force one ordering or the other */

static struct {
    _Atomic int hold_turn;      /* hold the cancelling turn after its commit */
    _Atomic int hold_renew;     /* hold the next renewal before it runs */
    _Atomic int turn_held;      /* 1: a turn that committed a cancellation is
                                   held; 2: it was released */
    _Atomic int turn_saw_fire;  /* ...and the token fired while it was held */
    _Atomic int renew_held;     /* 1: a renewal is held; 2: it returned */
    _Atomic int renew_saw_fire; /* ...and the token fired while it was */
    _Atomic int held_renew_rc;  /* what the held renewal then returned */
    _Atomic int renew_not_found;
    _Atomic int reason_reads;
} race;

static void on_ack(void *arg, const faulty_call *call)
{
    (void)arg;
    if (!call->after || call->rc != DURO_OK || call->ack == NULL ||
        call->ack->cancelled_activity_count == 0 ||
        !atomic_exchange(&race.hold_turn, 0))
        return;
    /* Committed: the row is gone, the reason recorded. The local fire comes
     * only after this returns, so the token can fire meanwhile only through
     * the manager's renewal. */
    atomic_store(&race.turn_held, 1);
    HOOK_WAIT(atomic_load(&seen.cancel_seen) == 1);
    atomic_store(&race.turn_saw_fire, atomic_load(&seen.cancel_seen) == 1);
    atomic_store(&race.turn_held, 2); /* released */
}

static void on_renew(void *arg, const faulty_call *call)
{
    (void)arg;
    if (call->after) {
        if (call->rc == DURO_NOT_FOUND)
            atomic_fetch_add(&race.renew_not_found, 1);
        if (atomic_load(&race.renew_held) == 1) {
            atomic_store(&race.held_renew_rc, call->rc);
            atomic_store(&race.renew_held, 2);
        }
        return;
    }
    if (!atomic_exchange(&race.hold_renew, 0))
        return;
    /* Before the renewal reaches the store: the turn commits and fires the
     * token locally while this renewal waits. */
    atomic_store(&race.renew_held, 1);
    HOOK_WAIT(atomic_load(&seen.cancel_seen) == 1);
    atomic_store(&race.renew_saw_fire, atomic_load(&seen.cancel_seen) == 1);
}

static void on_reason(void *arg, const faulty_call *call)
{
    (void)arg;
    if (call->after && call->rc == DURO_OK)
        atomic_fetch_add(&race.reason_reads, 1);
}

typedef struct fixture {
    rt_fixture f;
    duro_provider *wrapper;
} fixture;

/* One runtime doing both sides on the wrapper, renewing every 20 ms. */
static void start_one(fixture *x, const char *db)
{
    reset_seen();
    memset(&race, 0, sizeof(race));
    rt_init(&x->f, db);
    register_all(x->f.reg);
    x->f.opts.worker_lock_timeout_ms = 4000;
    x->f.opts.lock_renewal_ms = 20;
    duro_provider *inner;
    duro_error err;
    CHECK_PRC(duro_provider_open(x->f.url, &inner, &err), DURO_OK, &err);
    x->wrapper = faulty_provider_wrap(inner, 1);
    CHECK(x->wrapper != NULL);
    faulty_provider_set_hook(x->wrapper, FAULTY_ACK_ORCHESTRATION_ITEM, on_ack,
                             NULL);
    faulty_provider_set_hook(x->wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, on_renew,
                             NULL);
    faulty_provider_set_hook(x->wrapper, FAULTY_READ_ACTIVITY_CANCEL_REASON,
                             on_reason, NULL);
    CHECK_OK(duro_runtime_create_with_provider(x->wrapper, x->f.reg, &x->f.opts,
                                               &x->f.rt));
    CHECK_OK(duro_runtime_start(x->f.rt));
    CHECK_OK(duro_client_create(x->f.url, &x->f.client));
}

static void done_one(fixture *x)
{
    rt_stop(&x->f);
    duro_provider_close(x->wrapper);
    rt_done(&x->f);
}

/* Starts `orch` and, once Hold runs, cancels it the way `orch` expects:
 * a client cancel for One, a client terminate for "Terminate" (One,
 * terminated), the event "go" for Select and CancelTask. */
static void start_and_cancel(rt_fixture *f, const char *id, const char *orch)
{
    int terminate = strcmp(orch, "Terminate") == 0;
    rt_start_instance(f, id, terminate ? "One" : orch, NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, DEADLINE);
    if (strcmp(orch, "One") == 0)
        CHECK_OK(duro_client_cancel(f->client, id, "stop", NULL));
    else if (terminate)
        CHECK_OK(duro_client_terminate(f->client, id, "stop", NULL));
    else
        CHECK_OK(duro_client_raise_event(f->client, id, "go", NULL));
}

static const char *expected_reason(const char *orch)
{
    return strcmp(orch, "One") == 0          ? DURO_REASON_INSTANCE_CANCELLED
           : strcmp(orch, "Terminate") == 0  ? DURO_REASON_INSTANCE_TERMINATED
           : strcmp(orch, "CancelTask") == 0 ? DURO_REASON_TASK_CANCELLED
                                             : DURO_REASON_SELECT_LOSER;
}

/* The turn commits the cancellation and is held before it fires the token
 * itself; the manager's next renewal finds the row gone, reads the
 * recorded reason and fires first. */
static void renewal_fires_first(const char *orch)
{
    fixture x;
    start_one(&x, strcmp(orch, "One") == 0 ? "r_renew_one.db"
                                           : "r_renew_select.db");
    atomic_store(&race.hold_turn, 1);
    start_and_cancel(&x.f, "i", orch);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    WAIT_UNTIL(atomic_load(&race.turn_held) == 2, DEADLINE);
    duro_instance_info *i = rt_wait(&x.f, "i", DEADLINE);
    CHECK_EQ(i->status, strcmp(orch, "One") == 0 ? DURO_STATUS_CANCELLED
                                                 : DURO_STATUS_COMPLETED);
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.fail_wait), 0);
    /* The ordering happened: the token fired while the turn was held. */
    CHECK_EQ(atomic_load(&race.turn_saw_fire), 1);
    CHECK_INT(atomic_load(&race.renew_not_found), >=, 1);
    CHECK_INT(atomic_load(&race.reason_reads), >=, 1);
    /* ...and the activity read the decided reason. */
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_STR(seen.reason[0], expected_reason(orch));
    duro_metrics m;
    rt_final_metrics(&x.f, &m);
    CHECK_EQ(m.lock_renewal_failures, 1);
    CHECK_EQ(m.activities_cancelled, 1);
    done_one(&x);
}

/* A renewal is held before it reaches the store while the turn commits and
 * fires the token locally; released, it finds the row gone (NOT_FOUND) and
 * changes nothing. */
static void local_fires_first(const char *orch)
{
    fixture x;
    start_one(&x, strcmp(orch, "One") == 0 ? "r_local_one.db"
                                           : "r_local_select.db");
    rt_start_instance(&x.f, "i", orch, NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, DEADLINE);
    atomic_store(&race.hold_renew, 1);
    WAIT_UNTIL(atomic_load(&race.renew_held) == 1, DEADLINE);
    if (strcmp(orch, "One") == 0)
        CHECK_OK(duro_client_cancel(x.f.client, "i", "stop", NULL));
    else
        CHECK_OK(duro_client_raise_event(x.f.client, "i", "go", NULL));
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    WAIT_UNTIL(atomic_load(&race.renew_held) == 2, DEADLINE);
    duro_instance_info *i = rt_wait(&x.f, "i", DEADLINE);
    CHECK_EQ(i->status, strcmp(orch, "One") == 0 ? DURO_STATUS_CANCELLED
                                                 : DURO_STATUS_COMPLETED);
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.fail_wait), 0);
    /* The ordering happened: the token fired while the renewal was held,
     * and that renewal then found the row gone. */
    CHECK_EQ(atomic_load(&race.renew_saw_fire), 1);
    CHECK_EQ(atomic_load(&race.held_renew_rc), DURO_NOT_FOUND);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_STR(seen.reason[0], expected_reason(orch));
    done_one(&x);
}

TEST(same_process_renewal_first_reads_instance_cancelled)
{
    renewal_fires_first("One");
}

TEST(same_process_renewal_first_reads_select_loser)
{
    renewal_fires_first("Select");
}

TEST(same_process_local_fire_first_reads_instance_cancelled)
{
    local_fires_first("One");
}

TEST(same_process_local_fire_first_reads_select_loser)
{
    local_fires_first("Select");
}

/* ------------------------------------------------------------------------
 * another process: orchestrations in runtime `a`, activities in runtime `b`
 * on its own provider, so no turn can fire b's tokens */

typedef struct split {
    rt_fixture a, b;
    duro_provider *wrapper; /* b's provider */
} split;

static void start_split(split *s, const char *db)
{
    reset_seen();
    memset(&race, 0, sizeof(race));
    rt_init(&s->a, db);
    register_all(s->a.reg);
    s->a.opts.worker_concurrency = 0;
    memset(&s->b, 0, sizeof(s->b));
    s->b.url = s->a.url;
    CHECK_OK(duro_registry_create(&s->b.reg));
    register_all(s->b.reg);
    rt_default_options(&s->b.opts);
    s->b.opts.orchestration_concurrency = 0;
    s->b.opts.worker_concurrency = 1; /* no idle slot of b to take the row */
    s->b.opts.worker_lock_timeout_ms = 300;
    s->b.opts.lock_renewal_ms = 50;
    s->b.opts.log_fn = rt_log_sink;
    s->b.opts.log_level = DURO_LOG_INFO;
    rt_log_reset();
    rt_start(&s->a);
    duro_provider *inner;
    duro_error err;
    CHECK_PRC(duro_provider_open(s->a.url, &inner, &err), DURO_OK, &err);
    s->wrapper = faulty_provider_wrap(inner, 1);
    CHECK(s->wrapper != NULL);
    faulty_provider_set_hook(s->wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, on_renew,
                             NULL);
    CHECK_OK(duro_runtime_create_with_provider(s->wrapper, s->b.reg, &s->b.opts,
                                               &s->b.rt));
    CHECK_OK(duro_runtime_start(s->b.rt));
}

static void done_split(split *s)
{
    rt_stop(&s->b);
    duro_provider_close(s->wrapper);
    rt_done(&s->b);
    rt_done(&s->a);
}

static void other_process_reads_db(const char *orch, const char *db)
{
    split s;
    start_split(&s, db);
    start_and_cancel(&s.a, "i", orch);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_STR(seen.reason[0], expected_reason(orch));
    CHECK_INT(atomic_load(&race.renew_not_found), >=, 1);
    /* b's line names the reason read from history, not the store's guess
     * at why the row is gone ("another fetch took the work item after the
     * lock expired, or it was released") */
    char by_renewal[96], by_check[128];
    snprintf(by_renewal, sizeof(by_renewal), "its row is gone, cancelled (%s)",
             expected_reason(orch));
    snprintf(by_check, sizeof(by_check),
             "its row is gone or taken; signalling cancellation (%s)",
             expected_reason(orch));
    /* (the line comes just after the token fires) */
    WAIT_UNTIL(rt_log_hits(by_renewal) + rt_log_hits(by_check) >= 1, DEADLINE);
    CHECK_EQ(rt_log_hits(by_renewal) + rt_log_hits(by_check), 1);
    CHECK_EQ(rt_log_hits("lock renewal failed"), 0);
    duro_instance_info *i = rt_wait(&s.a, "i", DEADLINE);
    duro_free(i);
    duro_metrics m;
    rt_final_metrics(&s.b, &m);
    CHECK_EQ(m.lock_renewal_failures, 1);
    done_split(&s);
}

static void other_process_reads(const char *orch)
{
    other_process_reads_db(orch, strcmp(orch, "One") == 0
                                     ? "r_split_one.db"
                                     : "r_split_select.db");
}

TEST(other_process_reads_instance_cancelled)
{
    other_process_reads("One");
}

TEST(other_process_reads_select_loser)
{
    other_process_reads("Select");
}

/* What the activity reads for a duro_cancel_task and a terminate, beside
 * the turn and in another process (these were checked only through
 * counters). */
static void reads_in_both(const char *orch, const char *db_one,
                          const char *db_split)
{
    fixture x;
    start_one(&x, db_one);
    start_and_cancel(&x.f, "i", orch);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_STR(seen.reason[0], expected_reason(orch));
    duro_instance_info *i = rt_wait(&x.f, "i", DEADLINE);
    CHECK_EQ(i->status, strcmp(orch, "Terminate") == 0 ? DURO_STATUS_TERMINATED
                                                       : DURO_STATUS_COMPLETED);
    if (strcmp(orch, "CancelTask") == 0)
        CHECK_STR(i->output, "task cancelled");
    duro_free(i);
    done_one(&x);
    other_process_reads_db(orch, db_split);
}

TEST(task_cancel_reads_task_cancelled_in_both_processes)
{
    reads_in_both("CancelTask", "r_task_one.db", "r_task_split.db");
}

TEST(terminate_reads_instance_terminated_in_both_processes)
{
    reads_in_both("Terminate", "r_term_one.db", "r_term_split.db");
}

/* A forced delete of a live instance removes its activity's row with the
 * rest and records no reason: the activity reads "instance_deleted", not
 * "lock_lost", whether it runs in the runtime beside the deleting client
 * or in another. */
static void deleted_reads_instance_deleted(rt_fixture *orchestrations,
                                           rt_fixture *activities)
{
    rt_start_instance(orchestrations, "i", "One", NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, DEADLINE);
    size_t deleted = 0;
    CHECK_OK(duro_client_delete(orchestrations->client, "i", 1, &deleted));
    CHECK_EQ(deleted, 1);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    CHECK_EQ(atomic_load(&seen.started), 1);
    CHECK_STR(seen.reason[0], "instance_deleted");
    duro_metrics m;
    rt_final_metrics(activities, &m);
    CHECK_EQ(m.activities_cancelled, 1);
    CHECK_EQ(m.activities_completed, 0);
}

TEST(same_process_delete_reads_instance_deleted)
{
    fixture x;
    start_one(&x, "r_delete_one.db");
    deleted_reads_instance_deleted(&x.f, &x.f);
    done_one(&x);
}

TEST(other_process_delete_reads_instance_deleted)
{
    split s;
    start_split(&s, "r_delete_split.db");
    deleted_reads_instance_deleted(&s.a, &s.b);
    done_split(&s);
}

static int try_fetch(duro_provider *p, duro_worker_item **w)
{
    duro_error e;
    CHECK_PRC(p->fetch_work_item(p, 60000, w, &e), DURO_OK, &e);
    return *w != NULL;
}

/* A lock really lost: b's renewals fail as "busy" until its lock expired
 * and another holder (the test's own handle, as a third process) took the
 * row; b's next renewal then finds another token there, no cancellation in
 * history, and reads "lock_lost". The row goes back, b runs it again, and
 * the instance completes. */
TEST(lock_lost_to_another_fetch_reads_lock_lost)
{
    split s;
    start_split(&s, "r_lost.db");
    faulty_provider_fail_always(s.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 1);
    rt_start_instance(&s.a, "i", "One", NULL);
    WAIT_UNTIL(atomic_load(&seen.started) == 1, DEADLINE);
    duro_provider *thief;
    duro_error e;
    CHECK_PRC(duro_provider_open(s.a.url, &thief, &e), DURO_OK, &e);
    duro_worker_item *w = NULL;
    /* Fetchable only once b's lock (never renewed) has expired. */
    WAIT_UNTIL(try_fetch(thief, &w), DEADLINE);
    CHECK_EQ(w->attempt, 2);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 0); /* busy is not a loss */
    faulty_provider_fail_always(s.wrapper, FAULTY_RENEW_WORK_ITEM_LOCK, 1, 0);
    WAIT_UNTIL(atomic_load(&seen.cancel_seen) == 1, DEADLINE);
    CHECK_STR(seen.reason[0], "lock_lost");
    CHECK_EQ(atomic_load(&race.renew_not_found), 0);
    /* Give the row back; b runs the activity again and it completes. */
    CHECK_PRC(thief->abandon_work_item(thief, w->lock_token, 0, &e), DURO_OK,
              &e);
    duro_worker_item_free(w);
    duro_provider_close(thief);
    WAIT_UNTIL(atomic_load(&seen.started) == 2, DEADLINE);
    atomic_store(&seen.finish, 1);
    duro_instance_info *i = rt_wait(&s.a, "i", DEADLINE);
    CHECK_EQ(i->status, DURO_STATUS_COMPLETED);
    CHECK_STR(i->output, "held and finished");
    duro_free(i);
    CHECK_EQ(atomic_load(&seen.cancel_seen), 1);
    CHECK_EQ(rt_count_events(&s.a, "i", DURO_EVENT_ACTIVITY_CANCEL_REQUESTED),
             0);
    done_split(&s);
}

TEST_MAIN(T(same_process_renewal_first_reads_instance_cancelled),
          T(task_cancel_reads_task_cancelled_in_both_processes),
          T(terminate_reads_instance_terminated_in_both_processes),
          T(same_process_renewal_first_reads_select_loser),
          T(same_process_local_fire_first_reads_instance_cancelled),
          T(same_process_local_fire_first_reads_select_loser),
          T(other_process_reads_instance_cancelled),
          T(other_process_reads_select_loser),
          T(lock_lost_to_another_fetch_reads_lock_lost),
          T(same_process_delete_reads_instance_deleted),
          T(other_process_delete_reads_instance_deleted))
