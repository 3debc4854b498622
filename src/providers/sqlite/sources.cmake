# The SQLite provider: URL parsing, connections and schema, queues,
# management reads/writes, operations on many instances, the store's
# gauges, and the provider object.
list(APPEND DURO_SOURCES
  src/providers/sqlite/sqlite_db.c
  src/providers/sqlite/sqlite_dialect.c
  src/providers/sqlite/sqlite_manage.c
  src/providers/sqlite/sqlite_provider.c
  src/providers/sqlite/sqlite_queue.c
  src/providers/sqlite/sqlite_url.c)
