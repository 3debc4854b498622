# The PostgreSQL provider (built when DURO_POSTGRES is ON): its URL and
# password masking, connections, pool and schema, its dialect for the
# shared SQL layer (../sql/), its own parts of the queues (batches, combined
# acks, releases), the wake-up across processes, and the provider object.
list(APPEND DURO_SOURCES
  src/providers/postgres/pg_ack.c
  src/providers/postgres/pg_arrays.c
  src/providers/postgres/pg_batch.c
  src/providers/postgres/pg_combine.c
  src/providers/postgres/pg_db.c
  src/providers/postgres/pg_dialect.c
  src/providers/postgres/pg_provider.c
  src/providers/postgres/pg_queue.c
  src/providers/postgres/pg_release.c
  src/providers/postgres/pg_rows.c
  src/providers/postgres/pg_url.c
  src/providers/postgres/pg_wake.c
  src/providers/postgres/pg_work.c)
