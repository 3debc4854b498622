# The PostgreSQL provider (built when DURO_POSTGRES is ON): URL parsing and
# password masking, connections, pool and schema, queues, operations on
# many instances, the store's gauges, and the provider object (its
# management reads/writes: src/providers/sql/manage.c).
list(APPEND DURO_SOURCES
  src/providers/postgres/pg_db.c
  src/providers/postgres/pg_dialect.c
  src/providers/postgres/pg_provider.c
  src/providers/postgres/pg_queue.c
  src/providers/postgres/pg_url.c
  src/providers/postgres/pg_wake.c)
