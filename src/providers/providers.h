/* providers.h - constructors of the built-in providers, behind
 * duro_provider_open()'s URL dispatch. */
#ifndef DURO_PROVIDERS_H
#define DURO_PROVIDERS_H

#include "duro/provider.h"

/* `spec` is what follows "sqlite:" in the URL: a path or ":memory:",
 * optionally followed by "?key=value&...". */
int duro__sqlite_open(const char *spec, duro_provider **out, duro_error *err);

/* Where a fetch's history starts for a caller whose cache holds events of
 * instance_id's execution: what the cache says it holds, or 0 when that is
 * more than the store's `total` (a stale cache: the instance was deleted
 * and recreated), so everything is sent. */
uint64_t duro__history_offset(const duro_history_cache *cache,
                              const char *instance_id, uint64_t execution_id,
                              uint64_t total);

/* Copies url into out[size] (always terminated, cut to fit) with its
 * password replaced by "***": the userinfo's (scheme://user:***@host/...,
 * up to the last '@' before the query) and a password=... parameter.
 * Returns the length written. Any thread. */
size_t duro__mask_url(const char *url, char *out, size_t size);

/* `url` is the whole postgres:// or postgresql:// URL (libpq's connection
 * URI plus duro's own parameters: schema, pool, max_history,
 * max_payload). `concurrency` > 0: how many threads of the caller may use
 * the store at once, which sizes the connection pool unless the URL says
 * pool=; 0: the default pool. */
int duro__pg_open(const char *url, int concurrency, duro_provider **out,
                  duro_error *err);

/* duro_provider_open() for a caller with `concurrency` threads that may use
 * the store at once (a runtime): a provider with a connection pool sizes
 * it from that unless its URL sizes it. */
int duro__provider_open_for(const char *url, int concurrency,
                            duro_provider **out, duro_error *err);

#endif
