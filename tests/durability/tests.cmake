# Durability: acknowledged commits survive kill -9 (kill_worker, a separate
# process using the public API) and a rolled-back spill beside a second
# writer. Not labelled tsan: the interesting processes are killed, not raced.
add_executable(kill_worker ${CMAKE_CURRENT_LIST_DIR}/kill_worker.c)
target_link_libraries(kill_worker PRIVATE duro_static)
target_compile_definitions(kill_worker PRIVATE _GNU_SOURCE)
target_compile_options(kill_worker PRIVATE ${DURO_WARNINGS})
duro_add_test(test_durability LABELS runtime provider TIMEOUT 600
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_durability.c)
target_compile_definitions(test_durability PRIVATE
  KILL_WORKER_PATH="$<TARGET_FILE:kill_worker>")
add_dependencies(test_durability kill_worker)
