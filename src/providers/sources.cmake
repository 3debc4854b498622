# What the providers share: the URL dispatcher (open.c, above them), the
# helpers below them, and the shared SQL layer (sql/) both stores run on.
list(APPEND DURO_SOURCES
  src/providers/batch.c
  src/providers/bulk.c
  src/providers/open.c
  src/providers/query.c
  src/providers/reset_plan.c
  src/providers/url.c
  src/providers/sql/history.c
  src/providers/sql/manage.c
  src/providers/sql/methods.c
  src/providers/sql/statements.c
  src/providers/sql/many.c
  src/providers/sql/notify.c
  src/providers/sql/pool.c
  src/providers/sql/queue.c
  src/providers/sql/reset.c
  src/providers/sql/runtimes.c
  src/providers/sql/schedules.c
  src/providers/sql/shared.c
  src/providers/sql/stats.c
  src/providers/sql/store.c)
