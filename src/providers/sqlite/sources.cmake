# The SQLite provider: URL parsing, connections and schema, queues,
# operations on many instances, the store's gauges, and the provider
# object (its management reads/writes: src/providers/sql/manage.c).
list(APPEND DURO_SOURCES
  src/providers/sqlite/sqlite_db.c
  src/providers/sqlite/sqlite_dialect.c
  src/providers/sqlite/sqlite_files.c
  src/providers/sqlite/sqlite_provider.c
  src/providers/sqlite/sqlite_queue.c
  src/providers/sqlite/sqlite_url.c
  src/providers/sqlite/sqlite_wake.c)
