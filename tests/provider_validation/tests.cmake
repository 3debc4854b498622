# Provider validation suite (see tests/provider_validation/README.md): the
# same tests on SQLite directly and through the fault-injecting wrapper.
# Labelled tsan too: the racing tests are meant to run under ThreadSanitizer.
set(DURO_PV_DIR ${CMAKE_CURRENT_LIST_DIR})
set(DURO_PV_SOURCES ${DURO_PV_DIR}/validation.c ${DURO_PV_DIR}/faulty_provider.c)

duro_add_test(test_provider_sqlite LABELS provider tsan
  SOURCES ${DURO_PV_DIR}/main_sqlite.c ${DURO_PV_SOURCES})
target_include_directories(test_provider_sqlite PRIVATE ${DURO_PV_DIR})

duro_add_test(test_provider_faulty LABELS provider tsan
  SOURCES ${DURO_PV_DIR}/main_faulty.c ${DURO_PV_SOURCES})
target_include_directories(test_provider_faulty PRIVATE ${DURO_PV_DIR})

# The same suite on PostgreSQL (DURO_POSTGRES builds): each test on a fresh
# schema of the server that DURO_TEST_PG_URL names when the binary runs
# (README.md here). Registered in CTest only when DURO_TEST_PG_URL was set
# at configure time; without a server it exits 0 and says so.
if(DURO_POSTGRES)
  duro_add_test(test_provider_postgres LABELS provider postgres
    SOURCES ${DURO_PV_DIR}/main_postgres.c ${DURO_PV_SOURCES})
  target_include_directories(test_provider_postgres PRIVATE ${DURO_PV_DIR})
  if(NOT DEFINED ENV{DURO_TEST_PG_URL} OR "$ENV{DURO_TEST_PG_URL}" STREQUAL "")
    set_tests_properties(test_provider_postgres PROPERTIES DISABLED TRUE)
  else()
    set_tests_properties(test_provider_postgres PROPERTIES
      ENVIRONMENT "DURO_TEST_PG_URL=$ENV{DURO_TEST_PG_URL}")
  endif()
endif()
