# SQLite-specific tests (URL parsing, schema, pragmas, query plans).
duro_add_test(test_sqlite LABELS provider unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite.c)
# Stores opened by users other than their owner (needs root and the users
# daemon and nobody: exits 77, skipped, without them).
duro_add_test(test_sqlite_access LABELS provider SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite_access.c)
set_tests_properties(test_sqlite_access PROPERTIES SKIP_RETURN_CODE 77)
# The WAL under a runtime: its size stays under the checkpoint policy's
# bound, and space a reader made it take is given back.
duro_add_test(test_sqlite_wal LABELS provider runtime
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite_wal.c)
target_link_libraries(test_sqlite_wal PRIVATE duro_rt_util)
# A disk that fills up under a runtime (an 8 MiB tmpfs it mounts: needs
# root, exits 77, skipped, without it or when the mount fails).
duro_add_test(test_sqlite_disk_full LABELS provider runtime TIMEOUT 120
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite_disk_full.c)
target_link_libraries(test_sqlite_disk_full PRIVATE duro_rt_util)
set_tests_properties(test_sqlite_disk_full PROPERTIES SKIP_RETURN_CODE 77)
# Group commit: writes queued behind the writer share one transaction; a
# clean failure fails alone, another reruns each write alone.
duro_add_test(test_sqlite_group LABELS provider unit tsan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sqlite_group.c)
