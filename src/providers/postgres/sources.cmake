# The PostgreSQL provider (built when DURO_POSTGRES is ON), a line per part:
# its URL and password masking, connections, pool and schema, and its
# dialect for the shared SQL layer (../sql/) with the rows and arrays it
# reads; its own parts of the queues (the turn's claim, set-based batches,
# acks, the work claim, combined acks, releases); the wake-up across
# processes and the provider object. Several paths a line: python/setup.py
# finds each path by itself.
list(APPEND DURO_SOURCES
  src/providers/postgres/pg_url.c src/providers/postgres/pg_db.c
  src/providers/postgres/pg_dialect.c src/providers/postgres/pg_rows.c
  src/providers/postgres/pg_arrays.c
  src/providers/postgres/pg_queue.c src/providers/postgres/pg_batch.c
  src/providers/postgres/pg_ack.c src/providers/postgres/pg_work.c
  src/providers/postgres/pg_combine.c src/providers/postgres/pg_release.c
  src/providers/postgres/pg_wake.c src/providers/postgres/pg_provider.c)
