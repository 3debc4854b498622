# The PostgreSQL provider (built when DURO_POSTGRES is ON): URL parsing and
# password masking, connections, pool and schema, queues, management
# reads/writes, operations on many instances, the store's gauges, and the
# provider object.
list(APPEND DURO_SOURCES
  src/providers/postgres/pg_ack.c
  src/providers/postgres/pg_arrays.c
  src/providers/postgres/pg_batch.c
  src/providers/postgres/pg_bulk.c
  src/providers/postgres/pg_combine.c
  src/providers/postgres/pg_db.c
  src/providers/postgres/pg_dialect.c
  src/providers/postgres/pg_manage.c
  src/providers/postgres/pg_provider.c
  src/providers/postgres/pg_queue.c
  src/providers/postgres/pg_release.c
  src/providers/postgres/pg_rows.c
  src/providers/postgres/pg_url.c
  src/providers/postgres/pg_work.c)
