# PostgreSQL tests, run against a real server: a throwaway cluster that the
# CTest fixture `pg` starts before them and stops after them, failed or not
# (.ci/pg-cluster, through pg_fixture.sh), or the server DURO_TEST_PG_URL
# names when it is set. The tests read the URL from pg_test_url()
# (pg_util.h). Without PostgreSQL's server binaries, or without libpq, one
# test, postgres_skipped, says so and is reported as skipped.
#
# duro_pg_test(name [LABELS l...] sources...) adds a PostgreSQL test: label
# postgres, fixture pg, linked with libpq and pg_util. Those labelled tsan
# (the provider's threads and the runtimes on it) also run in the TSan
# pass; CTest adds the fixture's start and stop tests to any selection.

# Where the server binaries are: DURO_PG_BINDIR when set, else the same
# search as .ci/pg-cluster (pg_config --bindir, the newest
# /usr/lib/postgresql/*/bin, PATH).
set(DURO_PG_BINDIR "" CACHE PATH
  "Directory of PostgreSQL's server binaries for the test cluster (empty: search; a directory without them: skip the PostgreSQL tests)")
unset(DURO_PG_CTL CACHE)
unset(DURO_PG_INITDB CACHE)
if(DURO_PG_BINDIR)
  find_program(DURO_PG_CTL pg_ctl PATHS ${DURO_PG_BINDIR} NO_DEFAULT_PATH)
  find_program(DURO_PG_INITDB initdb PATHS ${DURO_PG_BINDIR} NO_DEFAULT_PATH)
else()
  set(pg_search)
  find_program(DURO_PG_CONFIG pg_config)
  if(DURO_PG_CONFIG)
    execute_process(COMMAND ${DURO_PG_CONFIG} --bindir
      OUTPUT_VARIABLE pg_config_bindir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE pg_config_rc ERROR_QUIET)
    if(pg_config_rc EQUAL 0 AND EXISTS "${pg_config_bindir}/initdb")
      list(APPEND pg_search ${pg_config_bindir})
    endif()
  endif()
  file(GLOB pg_versioned LIST_DIRECTORIES true /usr/lib/postgresql/*/bin)
  list(SORT pg_versioned COMPARE NATURAL ORDER DESCENDING)
  list(APPEND pg_search ${pg_versioned})
  # The directories first (newest version first), then PATH.
  find_program(DURO_PG_CTL pg_ctl PATHS ${pg_search} NO_DEFAULT_PATH)
  find_program(DURO_PG_CTL pg_ctl)
  if(DURO_PG_CTL)
    # initdb from the same place as pg_ctl (PATH may hold symlinks).
    get_filename_component(pg_ctl_real ${DURO_PG_CTL} REALPATH)
    get_filename_component(pg_ctl_dir ${pg_ctl_real} DIRECTORY)
    find_program(DURO_PG_INITDB initdb PATHS ${pg_ctl_dir} NO_DEFAULT_PATH)
  endif()
endif()

pkg_check_modules(LIBPQ IMPORTED_TARGET libpq)

set(DURO_PG_DIR ${PROJECT_BINARY_DIR}/pg)
set(DURO_PG_URL_FILE ${DURO_PG_DIR}/url)
set(DURO_PG_SKIP_REASON "")
if(NOT LIBPQ_FOUND)
  set(DURO_PG_SKIP_REASON "libpq (libpq-dev) not found")
elseif(NOT DURO_PG_CTL OR NOT DURO_PG_INITDB)
  set(DURO_PG_SKIP_REASON "PostgreSQL server binaries not found")
endif()

if(DURO_PG_SKIP_REASON)
  message(STATUS "${DURO_PG_SKIP_REASON}: the PostgreSQL tests are skipped")
  add_test(NAME postgres_skipped COMMAND sh
    ${CMAKE_CURRENT_LIST_DIR}/pg_fixture.sh skipped "${DURO_PG_SKIP_REASON}")
  set_tests_properties(postgres_skipped PROPERTIES
    LABELS postgres SKIP_RETURN_CODE 77)
else()
  get_filename_component(pg_ctl_real ${DURO_PG_CTL} REALPATH)
  get_filename_component(DURO_PG_SERVER_BINDIR ${pg_ctl_real} DIRECTORY)
  message(STATUS "PostgreSQL tests: a throwaway cluster from ${DURO_PG_SERVER_BINDIR}")
  set(pg_fixture sh ${CMAKE_CURRENT_LIST_DIR}/pg_fixture.sh)
  set(pg_fixture_args ${PROJECT_SOURCE_DIR}/.ci/pg-cluster
    ${DURO_PG_DIR}/cluster ${DURO_PG_URL_FILE})
  add_test(NAME pg_cluster_start COMMAND ${pg_fixture} start ${pg_fixture_args})
  add_test(NAME pg_cluster_stop COMMAND ${pg_fixture} stop ${pg_fixture_args})
  set_tests_properties(pg_cluster_start PROPERTIES
    FIXTURES_SETUP pg LABELS postgres TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
  set_tests_properties(pg_cluster_stop PROPERTIES
    FIXTURES_CLEANUP pg LABELS postgres TIMEOUT 120
    ENVIRONMENT "DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
endif()

if(NOT LIBPQ_FOUND)
  function(duro_pg_test name)
  endfunction()
  return()
endif()

add_library(duro_pg_util STATIC ${CMAKE_CURRENT_LIST_DIR}/pg_util.c)
target_include_directories(duro_pg_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(duro_pg_util PUBLIC duro_test_harness PkgConfig::LIBPQ)
target_compile_options(duro_pg_util PRIVATE ${DURO_WARNINGS})
target_compile_definitions(duro_pg_util PRIVATE _GNU_SOURCE)

# The tests are registered even without server binaries: they then find no
# URL file (no fixture wrote one) and exit 77, skipped, unless
# DURO_TEST_PG_URL names a server.
function(duro_pg_test name)
  cmake_parse_arguments(T "" "" "LABELS" ${ARGN})
  duro_add_test(${name} LABELS postgres ${T_LABELS}
    SOURCES ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE duro_pg_util PkgConfig::LIBPQ)
  set_tests_properties(${name} PROPERTIES
    FIXTURES_REQUIRED pg SKIP_RETURN_CODE 77)
  if(NOT DURO_PG_SKIP_REASON)
    set_tests_properties(${name} PROPERTIES
      ENVIRONMENT "DURO_TEST_PG_URL_FILE=${DURO_PG_URL_FILE}")
  endif()
endfunction()

# The infrastructure itself, without the provider: connect, version, and
# the FOR UPDATE SKIP LOCKED claims the provider's queues will use.
duro_pg_test(test_pg_smoke ${CMAKE_CURRENT_LIST_DIR}/test_pg_smoke.c)

# The PostgreSQL provider (DURO_POSTGRES builds): URL parsing and password
# masking without a server; the provider validation suite, each test on a
# fresh schema, plus what only a server database has
# (tests/provider_validation/main_postgres.c), on the fixture's server.
if(DURO_POSTGRES)
  duro_add_test(test_postgres_url LABELS unit
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_postgres_url.c)
  set(DURO_PV_DIR ${PROJECT_SOURCE_DIR}/tests/provider_validation)
  duro_pg_test(test_provider_postgres
    ${DURO_PV_DIR}/main_postgres.c ${DURO_PV_DIR}/validation.c
    ${DURO_PV_DIR}/faulty_provider.c LABELS provider tsan)
  target_include_directories(test_provider_postgres PRIVATE ${DURO_PV_DIR})
  # 50-80 s on a quiet machine (a 16 s server stop, the session timeouts'
  # waits); a loaded one, or ASan, can take several times that
  set_tests_properties(test_provider_postgres PROPERTIES TIMEOUT 900)
endif()

# A cancellation decided in one process reaches an activity running in
# another through the provider's notification (wait_for_cancellations),
# with polls and renewals a minute apart.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_cancel ${CMAKE_CURRENT_LIST_DIR}/test_pg_cancel.c
    LABELS runtime tsan)
endif()

# Schedules on a PostgreSQL store: three runtimes start one instance per
# fire time.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_schedules ${CMAKE_CURRENT_LIST_DIR}/test_pg_schedules.c
    LABELS runtime tsan)
endif()

# duro_test_env on a PostgreSQL store: its wait skips a month and hours of
# retry backoff through the provider's next_due and counted wake-ups.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_test_env ${CMAKE_CURRENT_LIST_DIR}/test_pg_test_env.c
    LABELS runtime tsan)
endif()

# Crash recovery on the server: three crash_worker processes share a fresh
# schema and 300 orchestrations; the one running a given activity is
# SIGKILLed mid-activity and restarted (test_crash's scenario and checks,
# duro_crash_util from tests/runtime/tests.cmake).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_crash ${CMAKE_CURRENT_LIST_DIR}/test_pg_crash.c
    LABELS runtime)
  target_link_libraries(test_pg_crash PRIVATE duro_crash_util)
endif()

# Tests that stop, restart or crash the server run it on a cluster of their
# own (pg_own_cluster.c: .ci/pg-cluster on port $DURO_PG_PORT + an offset of
# the test's), since the fixture's serves the other tests meanwhile; they
# exit 77 (skipped) without the server binaries. Ports: + 3
# test_pg_server_crash, + 4 test_pg_cluster, + 6 test_pg_outage, + 7
# test_pg_chaos.
add_library(duro_pg_own_cluster STATIC
  ${CMAKE_CURRENT_LIST_DIR}/pg_own_cluster.c)
target_include_directories(duro_pg_own_cluster PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(duro_pg_own_cluster PUBLIC duro_test_harness)
target_compile_options(duro_pg_own_cluster PRIVATE ${DURO_WARNINGS})
target_compile_definitions(duro_pg_own_cluster PRIVATE _GNU_SOURCE
  DURO_PG_CLUSTER="${PROJECT_SOURCE_DIR}/.ci/pg-cluster")

# duro_pg_own_cluster_test(name [LABELS l...] [TIMEOUT s] SOURCES ...)
function(duro_pg_own_cluster_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "LABELS;SOURCES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  duro_add_test(${name} LABELS postgres ${T_LABELS} TIMEOUT ${T_TIMEOUT}
    SOURCES ${T_SOURCES})
  target_link_libraries(${name} PRIVATE duro_pg_own_cluster)
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77
    ENVIRONMENT "DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
endfunction()

# The server itself crashes (pg_ctl stop -m immediate, then crash recovery)
# under two runtime processes.
if(DURO_POSTGRES)
  duro_pg_own_cluster_test(test_pg_server_crash LABELS runtime
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pg_server_crash.c)
  target_link_libraries(test_pg_server_crash PRIVATE duro_crash_util)
endif()

# The server stopped (pg_ctl stop -m fast) for 12 s, longer than the old
# 21-attempt budget of an activity's ack, while activities finish: their
# results are recorded once it is back, within their locks; none runs
# twice.
if(DURO_POSTGRES)
  duro_pg_own_cluster_test(test_pg_outage LABELS runtime TIMEOUT 180
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pg_outage.c)
  target_link_libraries(test_pg_outage PRIVATE duro_crash_util)
endif()

# The fault run of issue 23: two crash_worker processes ("chaos": 300
# chains, 10 % of them cancelled by the test) while the test kills their
# backends every 2 s, restarts the server fast and immediate, and stops it
# for 10 s; the end state must be exact, with no operator action.
if(DURO_POSTGRES)
  duro_pg_own_cluster_test(test_pg_chaos LABELS runtime TIMEOUT 240
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pg_chaos.c)
  target_link_libraries(test_pg_chaos PRIVATE duro_crash_util
    PkgConfig::LIBPQ)
endif()

# A password in the URL, in every spelling libpq reads, is in no message of
# a real server's refusals (wrong password, no such schema, nothing
# listening): on a cluster of its own, port $DURO_PG_PORT + 5, whose
# pg_hba.conf checks one role's password (the fixture's trusts all).
if(DURO_POSTGRES)
  duro_add_test(test_pg_secrets LABELS postgres
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pg_secrets.c)
  target_link_libraries(test_pg_secrets PRIVATE PkgConfig::LIBPQ)
  target_compile_definitions(test_pg_secrets PRIVATE
    DURO_PG_CLUSTER="${PROJECT_SOURCE_DIR}/.ci/pg-cluster")
  set_tests_properties(test_pg_secrets PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 180
    ENVIRONMENT "DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
endif()

# What duro list's first page and duro metrics read among 220,000
# instances and 101,010 queued messages: EXPLAIN (ANALYZE, BUFFERS) rows
# and buffers, bounded, and index-only counts (a fresh schema, loaded with
# generate_series, dropped at exit).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_costs ${CMAKE_CURRENT_LIST_DIR}/test_pg_costs.c)
  pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
  target_link_libraries(test_pg_costs PRIVATE PkgConfig::JANSSON)
  set_tests_properties(test_pg_costs PROPERTIES TIMEOUT 120)
endif()

# The connection pool is sized from the runtime's concurrency (pool= in the
# URL overrides it), counted on the server.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_pool ${CMAKE_CURRENT_LIST_DIR}/test_pg_pool.c
    LABELS runtime tsan)
endif()

# A runtime whose connections drop around COMMITs (the provider's commit-loss
# hook), after the COMMIT in one run and before it in the other: every
# instance completes once, with an exactly-once history.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_commit_loss
    ${CMAKE_CURRENT_LIST_DIR}/test_pg_commit_loss.c LABELS runtime tsan)
  target_link_libraries(test_pg_commit_loss PRIVATE duro_rt_util)
endif()

# The operator's verbs end to end on the server: test_lifecycle's file,
# built with LIFECYCLE_PG (a fresh schema per test).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_lifecycle
    ${PROJECT_SOURCE_DIR}/tests/runtime/test_lifecycle.c LABELS runtime tsan)
  target_compile_definitions(test_pg_lifecycle PRIVATE LIFECYCLE_PG)
  target_link_libraries(test_pg_lifecycle PRIVATE duro_rt_util)
  # Instance deadlines on the server: test_deadline's file.
  duro_pg_test(test_pg_deadline
    ${PROJECT_SOURCE_DIR}/tests/runtime/test_deadline.c
    ${PROJECT_SOURCE_DIR}/tests/provider_validation/faulty_provider.c
    LABELS runtime tsan)
  target_include_directories(test_pg_deadline PRIVATE
    ${PROJECT_SOURCE_DIR}/tests/provider_validation)
  target_compile_definitions(test_pg_deadline PRIVATE DEADLINE_PG)
  target_link_libraries(test_pg_deadline PRIVATE duro_rt_util)
endif()

# Reset and rewind end to end on the server: test_rewind's file, built
# with REWIND_PG (a fresh schema per test).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_rewind
    ${PROJECT_SOURCE_DIR}/tests/runtime/test_rewind.c LABELS runtime tsan)
  target_compile_definitions(test_pg_rewind PRIVATE REWIND_PG)
  target_link_libraries(test_pg_rewind PRIVATE duro_rt_util)
endif()

# duro's text rule on the server, which refuses invalid UTF-8 itself
# (22021): test_utf8's file built with UTF8_PG (a fresh schema per test).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_utf8
    ${PROJECT_SOURCE_DIR}/tests/runtime/test_utf8.c LABELS runtime tsan)
  target_compile_definitions(test_pg_utf8 PRIVATE UTF8_PG)
  target_link_libraries(test_pg_utf8 PRIVATE duro_rt_util)
endif()

# Driven orchestrations on the server: test_driver's file, built with
# DRIVER_PG (a fresh schema per store).
if(DURO_POSTGRES)
  duro_pg_test(test_pg_driver
    ${PROJECT_SOURCE_DIR}/tests/runtime/test_driver.c
    ${PROJECT_SOURCE_DIR}/tests/provider_validation/faulty_provider.c
    LABELS runtime tsan)
  target_compile_definitions(test_pg_driver PRIVATE DRIVER_PG)
  target_link_libraries(test_pg_driver PRIVATE duro_rt_util)
  target_include_directories(test_pg_driver PRIVATE
    ${PROJECT_SOURCE_DIR}/tests/provider_validation)
endif()

# A shell test of the duro command on the server: NAME.sh DURO PG_CLUSTER,
# with the pg fixture's URL file (skipped, 77, without a server).
function(duro_pg_cli_test name)
  add_test(NAME ${name}
    COMMAND sh ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/${name}.sh
            $<TARGET_FILE:duro_cli> ${PROJECT_SOURCE_DIR}/.ci/pg-cluster)
  set_tests_properties(${name} PROPERTIES
    LABELS "postgres;cli" FIXTURES_REQUIRED pg SKIP_RETURN_CODE 77
    TIMEOUT 120)
  if(NOT DURO_PG_SKIP_REASON)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "DURO_TEST_PG_URL_FILE=${DURO_PG_URL_FILE};DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
  endif()
endfunction()

if(DURO_POSTGRES)
  # A password in the URL (userinfo and password=) is in none of the
  # command's output (list, metrics, status, a failed connection, duro ui
  # when built with the console); a read verb on a schema that does not
  # exist fails and creates nothing (create=0); a server that takes no
  # writes says so.
  duro_pg_cli_test(test_pg_cli)
  # duro behind PgBouncer: refused in transaction and statement pooling (a
  # connection's statements would run in other server sessions: another
  # schema's search_path, lost prepared statements and LISTEN), working in
  # session pooling. Skipped (77) without pgbouncer.
  duro_pg_cli_test(test_pg_pgbouncer)
  # A URL without a password works with PGPASSWORD and a password file
  # (libpq's), for a role the fixture's cluster makes present one.
  duro_pg_cli_test(test_pg_password)
endif()

# bench/pg_cost_bench.sh once with a tiny store, as every benchmark is
# (label bench): it runs, prints its lines, and drops its schema.
if(DURO_POSTGRES AND NOT DURO_PG_SKIP_REASON)
  add_test(NAME bench_pg_cost_smoke
    COMMAND sh -c "sh \"$1\" \"$(cat \"$2\")\" 1 300 100 \"$3\""
            bench_pg_cost_smoke ${PROJECT_SOURCE_DIR}/bench/pg_cost_bench.sh
            ${DURO_PG_URL_FILE} ${PROJECT_BINARY_DIR})
  set_tests_properties(bench_pg_cost_smoke PROPERTIES
    LABELS "bench;postgres" FIXTURES_REQUIRED pg TIMEOUT 120)
endif()

# .ci/pg-cluster itself: crash and stop use the port the cluster started
# on, not DURO_PG_PORT (its own cluster, port $DURO_PG_PORT + 4).
if(NOT DURO_PG_SKIP_REASON)
  add_test(NAME test_pg_cluster
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_pg_cluster.sh
            ${PROJECT_SOURCE_DIR}/.ci/pg-cluster)
  set_tests_properties(test_pg_cluster PROPERTIES
    LABELS postgres SKIP_RETURN_CODE 77 TIMEOUT 180
    ENVIRONMENT "DURO_PG_BINDIR=${DURO_PG_SERVER_BINDIR}")
endif()

# A runtime stopped (SIGSTOP) inside a turn's ack holds row locks another
# runtime's activity acks need: the other must go on completing its own work
# while it stays stopped (lock_timeout, acks that need the rows run apart,
# and the server ending the frozen session). freeze_worker is the process
# that stops itself, through the provider's ack hook.
if(DURO_POSTGRES)
  add_executable(freeze_worker ${CMAKE_CURRENT_LIST_DIR}/freeze_worker.c)
  target_link_libraries(freeze_worker PRIVATE duro_static)
  target_compile_definitions(freeze_worker PRIVATE _GNU_SOURCE)
  target_compile_options(freeze_worker PRIVATE ${DURO_WARNINGS})
  duro_pg_test(test_pg_frozen ${CMAKE_CURRENT_LIST_DIR}/test_pg_frozen.c
    LABELS runtime)
  target_compile_definitions(test_pg_frozen PRIVATE
    FREEZE_WORKER_PATH="$<TARGET_FILE:freeze_worker>")
  add_dependencies(test_pg_frozen freeze_worker)
endif()

# What a runtime holds when its connections are lost is released when it
# reconnects: a turn whose ack, retry and abandon failed while its role could
# not log in completes as soon as it may again, not when its lock expires.
if(DURO_POSTGRES)
  duro_pg_test(test_pg_reconnect ${CMAKE_CURRENT_LIST_DIR}/test_pg_reconnect.c
    LABELS runtime)
  target_link_libraries(test_pg_reconnect PRIVATE duro_rt_util)
endif()
