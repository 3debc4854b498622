list(APPEND DURO_SOURCES
  src/providers/batch.c
  src/providers/bulk.c
  src/providers/open.c
  src/providers/query.c
  src/providers/url.c
  src/providers/sql/queue.c
  src/providers/sql/stats.c
  src/providers/sql/store.c)
