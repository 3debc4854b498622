/* pg_provider.h - test hooks of the PostgreSQL provider: statement-reuse
 * counter, statement fault injection, lost commits, URL masking. For tests and
 * the validation suite only; every function that takes a provider ignores one
 * not opened with a postgres:// or postgresql:// URL. Any thread. */
#ifndef DURO_PG_PROVIDER_H
#define DURO_PG_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "providers/sql/sql.h"
#include "duro/provider.h"

/* How many statements the provider has prepared so far, over all its
 * connections. Flat once every statement in use has been prepared on every
 * connection. */
uint64_t duro__pg_statements_prepared(duro_provider *p);

/* Makes the nth_step-th statement run from now (counting every statement,
 * BEGIN and COMMIT included, on any connection of this provider, but not
 * ROLLBACK) fail without being sent, as a serialization failure
 * (retryable = 1: DURO_BUSY) or an internal error (retryable = 0:
 * DURO_STORAGE). The operation then rolls back completely. nth_step 0
 * disables injection. */
void duro__pg_inject_fault(duro_provider *p, uint64_t nth_step, int retryable);

/* Makes the nth_commit-th commit of a write from now (the COMMIT of a
 * write transaction, or a write statement run alone, which is its own
 * transaction; on any connection of this provider) lose its connection: with
 * committed = 1 the COMMIT (or the statement) runs and its answer is read
 * (the change stands), then the connection drops; with committed = 0 the
 * connection drops before it is sent (the server rolls the transaction
 * back). Either way the call fails as a lost connection does (DURO_STORAGE,
 * retryable, "connection lost: ..."), with the same message, and the
 * connection is reopened at its next use. nth_commit 0 disables it. */
void duro__pg_inject_commit_loss(duro_provider *p, uint64_t nth_commit,
                                 int committed);
/* How many connections duro__pg_inject_commit_loss has dropped so far. */
uint64_t duro__pg_commit_losses(duro_provider *p);

/* Calls fn(arg) on the thread that acks turns (ack_orchestration_item and
 * the ack_and_fetch calls), inside the ack's transaction, once the
 * instances' locks are taken (their readiness rows locked until the
 * transaction ends) and before anything is written: a test can stop the
 * process there (raise(SIGSTOP)) to hold those row locks as a frozen host
 * does. fn NULL removes it; without one an ack tests a pointer, nothing
 * more. Set it before any thread acks (before the runtime starts). */
void duro__pg_hook_turn_ack_locked(duro_provider *p, void (*fn)(void *arg),
                                   void *arg);

/* duro__mask_url (providers.h): url with every secret it may hold
 * replaced by "***". Every message of the provider that names its URL
 * names this form. */
size_t duro__pg_mask_url(const char *url, char *out, size_t size);
/* duro__url_scrub (providers.h): libpq's text with every secret of url
 * replaced by "***". Every message of libpq's the provider passes on is
 * scrubbed with the conninfo libpq was given. */
size_t duro__pg_scrub(const char *url, const char *text, char *out,
                      size_t size);

/* The store's primitives for the shared SQL layer; the statements it runs,
 * for EXPLAIN checks, are duro__sql_statement_count/name/sql of it. */
extern const duro__sql_dialect duro__pg_dialect;

/* 1 once the provider's listener LISTENs (work committed by other
 * processes then wakes wait_for_work at once); 0 before, or while its
 * connection is down. */
int duro__pg_listening(duro_provider *p);
/* Notifications the listener received from other backends. */
uint64_t duro__pg_notifications_received(duro_provider *p);
/* The items those notifications counted for `queue` (one without a count
 * adds SIZE_MAX). */
uint64_t duro__pg_notified_items(duro_provider *p, duro_queue queue);
/* Items of `queue` committed here that this process left to other
 * processes (announced through the listener): those no idle waiter here
 * took. */
uint64_t duro__pg_announced_items(duro_provider *p, duro_queue queue);
/* Threads blocked in wait_for_work on `queue` in this process that no
 * wake-up is owed to yet (a token granted while nobody waited, as after
 * the listener connects, is owed to the next wait and counts against
 * them). */
int duro__pg_idle_waiters(duro_provider *p, duro_queue queue);
/* The most activity acks (ack_and_fetch_work_item calls of as many
 * threads) one statement has carried on p. */
uint64_t duro__pg_combined_acks_max(duro_provider *p);
/* Activity acks queued on p for the next combined statement, waiting for
 * the one that runs (or for a thread to lead). */
int duro__pg_combine_queued(duro_provider *p);

/* The cross-process notification's payload (pg_wake.c): queues with
 * items pending and their counts ("o3w12"; "c": work items cancelled), and
 * the count a payload gives for one queue's letter (returns 0 when it does
 * not name the queue; *items SIZE_MAX when it names it without a count). */
void duro__pg_notice_format(char *out, size_t size, size_t o, size_t w,
                            size_t c);
int duro__pg_notice_count(const char *x, char letter, size_t *items);

/* The schema name the provider uses ("duro" unless schema= says). */
const char *duro__pg_schema(duro_provider *p);

#endif
