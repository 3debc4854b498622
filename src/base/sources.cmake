list(APPEND DURO_SOURCES
  src/base/alloc.c
  src/base/arena.c
  src/base/cron.c
  src/base/error.c
  src/base/json_reader.c
  src/base/strbuf.c
  src/base/tz.c
  src/base/util.c
  src/base/version.c)
