# End-to-end runtime tests: real runtime, real SQLite files.
add_library(duro_rt_util STATIC ${CMAKE_CURRENT_LIST_DIR}/rt_util.c)
target_link_libraries(duro_rt_util PUBLIC duro_test_harness)
target_include_directories(duro_rt_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_compile_options(duro_rt_util PRIVATE ${DURO_WARNINGS})
target_compile_definitions(duro_rt_util PRIVATE _GNU_SOURCE)

function(duro_runtime_test name)
  duro_add_test(${name} LABELS runtime tsan SOURCES ${ARGN})
  target_link_libraries(${name} PRIVATE duro_rt_util)
endfunction()

duro_runtime_test(test_smoke ${CMAKE_CURRENT_LIST_DIR}/test_smoke.c)
# Schedules: several runtimes, overlap, catch-up and DST on a moved clock.
duro_runtime_test(test_schedules ${CMAKE_CURRENT_LIST_DIR}/test_schedules.c)
# duro_test_env: the virtual clock that skips while a test waits.
duro_runtime_test(test_test_env ${CMAKE_CURRENT_LIST_DIR}/test_test_env.c)
duro_runtime_test(test_cancel ${CMAKE_CURRENT_LIST_DIR}/test_cancel.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_cancel PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)

# Crash recovery: test_crash SIGKILLs crash_worker (a separate process on the
# same SQLite file) at random instants, then checks results and history.
# Not labelled tsan: the interesting process is killed, not raced.
# duro_crash_util (spawning crash_worker, the checks, the three-process
# scenario) is shared with test_pg_crash (tests/postgres/tests.cmake); a test
# linking it gets crash_worker built first.
add_executable(crash_worker ${CMAKE_CURRENT_LIST_DIR}/crash_worker.c)
target_link_libraries(crash_worker PRIVATE duro_static)
target_compile_definitions(crash_worker PRIVATE _GNU_SOURCE)
target_compile_options(crash_worker PRIVATE ${DURO_WARNINGS})
add_library(duro_crash_util STATIC ${CMAKE_CURRENT_LIST_DIR}/crash_util.c)
target_link_libraries(duro_crash_util PUBLIC duro_test_harness)
target_include_directories(duro_crash_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_compile_options(duro_crash_util PRIVATE ${DURO_WARNINGS})
target_compile_definitions(duro_crash_util PRIVATE _GNU_SOURCE
  CRASH_WORKER_PATH="$<TARGET_FILE:crash_worker>")
add_dependencies(duro_crash_util crash_worker)
duro_add_test(test_crash LABELS runtime TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_crash.c)
target_link_libraries(test_crash PRIVATE duro_rt_util duro_crash_util)
duro_runtime_test(test_orch_api ${CMAKE_CURRENT_LIST_DIR}/test_orch_api.c)
# Cancel with cleanup, terminate, suspend and resume end to end (the same
# file runs on PostgreSQL as test_pg_lifecycle, tests/postgres/tests.cmake).
duro_runtime_test(test_lifecycle ${CMAKE_CURRENT_LIST_DIR}/test_lifecycle.c)
# Instance deadlines end to end (the same file runs on PostgreSQL as
# test_pg_deadline, tests/postgres/tests.cmake).
duro_runtime_test(test_deadline ${CMAKE_CURRENT_LIST_DIR}/test_deadline.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_deadline PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
# Reset and rewind end to end (the same file runs on PostgreSQL as
# test_pg_rewind, tests/postgres/tests.cmake).
duro_runtime_test(test_rewind ${CMAKE_CURRENT_LIST_DIR}/test_rewind.c)
# kill -9 during a cleanup (forked runtime processes; not labelled tsan).
duro_add_test(test_cleanup_crash LABELS runtime TIMEOUT 300
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cleanup_crash.c)
target_link_libraries(test_cleanup_crash PRIVATE duro_rt_util)
duro_runtime_test(test_orch_context ${CMAKE_CURRENT_LIST_DIR}/test_orch_context.c)
duro_runtime_test(test_orch_foreign ${CMAKE_CURRENT_LIST_DIR}/test_orch_foreign.c)
duro_runtime_test(test_orch_replay ${CMAKE_CURRENT_LIST_DIR}/test_orch_replay.c)
duro_runtime_test(test_replay_histories ${CMAKE_CURRENT_LIST_DIR}/test_replay_histories.c)
duro_runtime_test(test_cancel_faults ${CMAKE_CURRENT_LIST_DIR}/test_cancel_faults.c
                  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_cancel_faults PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
duro_runtime_test(test_orch_faults ${CMAKE_CURRENT_LIST_DIR}/test_orch_faults.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_orch_faults PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
duro_runtime_test(test_runtime_faults ${CMAKE_CURRENT_LIST_DIR}/test_runtime_faults.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_runtime_faults PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
duro_runtime_test(test_cancel_reasons ${CMAKE_CURRENT_LIST_DIR}/test_cancel_reasons.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_cancel_reasons PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
duro_runtime_test(test_locks ${CMAKE_CURRENT_LIST_DIR}/test_locks.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_locks PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
duro_runtime_test(test_metrics ${CMAKE_CURRENT_LIST_DIR}/test_metrics.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_metrics PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
# The client's operations on instances: cancel records in status, why an
# instance is stuck, cancel many, cancel by filter, purge.
duro_runtime_test(test_ops ${CMAKE_CURRENT_LIST_DIR}/test_ops.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
# A shutdown keeps its deadline while activity acks fail retryably.
duro_runtime_test(test_shutdown ${CMAKE_CURRENT_LIST_DIR}/test_shutdown.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_shutdown PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
# duro's text rule: text that is not UTF-8 is refused where it enters
# (client, orchestration context, results) and never stored (the same file
# runs on PostgreSQL as test_pg_utf8, tests/postgres/tests.cmake).
duro_runtime_test(test_utf8 ${CMAKE_CURRENT_LIST_DIR}/test_utf8.c)
# Orchestrations run by a driver (duro_driver), the driver written in C in
# the test; the same file runs on PostgreSQL as test_pg_driver
# (tests/postgres/tests.cmake).
duro_runtime_test(test_driver ${CMAKE_CURRENT_LIST_DIR}/test_driver.c
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation/faulty_provider.c)
target_include_directories(test_driver PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../provider_validation)
