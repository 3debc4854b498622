# PostgreSQL-specific tests that need no server (URL parsing and password
# masking). The validation suite on a real server is test_provider_postgres
# (tests/provider_validation).
duro_add_test(test_postgres_url LABELS unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_postgres_url.c)
