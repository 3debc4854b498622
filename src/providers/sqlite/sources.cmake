# The SQLite provider: its URL, connections and schema, its dialect for
# the shared SQL layer (../sql/, which also holds its wake-up), its own
# parts of the queues, the file checks, and the provider object.
list(APPEND DURO_SOURCES
  src/providers/sqlite/sqlite_db.c
  src/providers/sqlite/sqlite_dialect.c
  src/providers/sqlite/sqlite_files.c
  src/providers/sqlite/sqlite_provider.c
  src/providers/sqlite/sqlite_queue.c
  src/providers/sqlite/sqlite_url.c)
