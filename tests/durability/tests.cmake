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

# Power loss: powerloss_worker runs real turns and activity acks through a
# test-only VFS (powerloss_vfs.c, never in the library) that cuts the power
# at a chosen write or sync; test_powerloss checks the files it leaves.
add_executable(powerloss_worker ${CMAKE_CURRENT_LIST_DIR}/powerloss_worker.c
  ${CMAKE_CURRENT_LIST_DIR}/powerloss_vfs.c)
target_link_libraries(powerloss_worker PRIVATE duro_static)
target_compile_definitions(powerloss_worker PRIVATE _GNU_SOURCE)
target_compile_options(powerloss_worker PRIVATE ${DURO_WARNINGS})
duro_add_test(test_powerloss LABELS runtime provider TIMEOUT 600
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_powerloss.c)
target_compile_definitions(test_powerloss PRIVATE
  POWERLOSS_WORKER_PATH="$<TARGET_FILE:powerloss_worker>")
add_dependencies(test_powerloss powerloss_worker)

# Decided at once (provider contract version 9): decide_worker cancels,
# terminates or suspends 1,000 instances that have not begun and is
# SIGKILLed mid-way; test_decide_kill checks each is whole or untouched.
add_executable(decide_worker ${CMAKE_CURRENT_LIST_DIR}/decide_worker.c)
target_link_libraries(decide_worker PRIVATE duro_static)
target_compile_definitions(decide_worker PRIVATE _GNU_SOURCE)
target_compile_options(decide_worker PRIVATE ${DURO_WARNINGS})
duro_add_test(test_decide_kill LABELS runtime provider TIMEOUT 600
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_decide_kill.c)
target_compile_definitions(test_decide_kill PRIVATE
  DECIDE_WORKER_PATH="$<TARGET_FILE:decide_worker>")
add_dependencies(test_decide_kill decide_worker)
