# SQLite-specific tests (URL parsing, schema, pragmas, query plans).
duro_add_test(test_sqlite LABELS provider unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite.c)
