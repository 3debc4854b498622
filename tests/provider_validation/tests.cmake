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
