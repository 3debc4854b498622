list(APPEND DURO_SOURCES
  src/providers/sqlite/sqlite_provider.c)
