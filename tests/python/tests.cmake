# Programs the Python tests (python/tests) run beside the package, included
# by python/CMakeLists.txt when it registers them: the C version of the
# workflow of test_same_history.py. Its path, and the duro command's, reach
# the tests through the environment of python_sqlite and python_postgres
# (DURO_TEST_SAME_HISTORY_WORKER, DURO_TEST_DURO_BIN).
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
add_executable(same_history_worker
  ${PROJECT_SOURCE_DIR}/tests/python/same_history_worker.c)
target_link_libraries(same_history_worker PRIVATE duro_static
                      PkgConfig::JANSSON)
target_compile_options(same_history_worker PRIVATE ${DURO_WARNINGS})
set(DURO_PY_TEST_ENV
    "DURO_TEST_SAME_HISTORY_WORKER=$<TARGET_FILE:same_history_worker>"
    "DURO_TEST_DURO_BIN=$<TARGET_FILE:duro_cli>")
