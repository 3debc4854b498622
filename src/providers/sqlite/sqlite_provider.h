/* sqlite_provider.h - test hooks of the SQLite provider: statement-reuse
 * counter, step fault injection, pragma and SQL introspection. For tests and
 * the validation suite only; every function takes a provider opened with a
 * "sqlite:" URL (any other provider is ignored). Any thread. */
#ifndef DURO_SQLITE_PROVIDER_H
#define DURO_SQLITE_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "providers/sql/sql.h"
#include "duro/provider.h"

/* How many statements the provider has prepared so far, over all its
 * connections. Flat once every statement in use has been prepared. */
uint64_t duro__sqlite_statements_prepared(duro_provider *p);

/* The virtual-machine steps (SQLITE_STMTSTATUS_VM_STEP) that the
 * statements of every connection (writer and readers) have run since they
 * were prepared, summed: how much work the provider's statements did, in
 * rows visited, not time. Nothing else may use the provider meanwhile. */
uint64_t duro__sqlite_vm_steps(duro_provider *p);

/* Checkpoints run by this provider off the writer's path (see
 * duro__sqlite_checkpoint), for tests. */
uint64_t duro__sqlite_checkpoints(duro_provider *p);

/* Sets the new WAL frames between checkpoints (what the URL's
 * checkpoint_pages sets; writers wait for a checkpoint past twice as many),
 * for a test that needs many checkpoints. Call right after opening, before
 * any other thread uses the provider. */
void duro__sqlite_set_checkpoint_frames(duro_provider *p, int frames);

/* Makes the nth_step-th sqlite3_step call from now (counting every step on
 * any connection of this provider) fail as if SQLite had returned
 * SQLITE_BUSY (retryable = 1) or SQLITE_IOERR (retryable = 0). The operation
 * then rolls back completely and reports DURO_BUSY (retryable) or
 * DURO_STORAGE (not retryable). nth_step 0 disables injection. */
void duro__sqlite_inject_fault(duro_provider *p, uint64_t nth_step,
                               int retryable);

/* Runs "PRAGMA <name>" on the writer connection and stores its integer
 * result (per-connection settings such as synchronous or busy_timeout are
 * not visible from another connection). Returns 0, or -1 on failure. */
int duro__sqlite_pragma_int(duro_provider *p, const char *name, int64_t *out);

/* The store's primitives for the shared SQL layer; the statements it runs,
 * for EXPLAIN checks, are duro__sql_statement_count/name/sql of it. */
extern const duro__sql_dialect duro__sqlite_dialect;

#endif
