# The installed library works for a program outside this build: install
# into a temporary prefix, then build and run a program against it through
# pkg-config and find_package(duro), shared and static. Sanitized builds
# pass their -fsanitize flags on to that program.
find_program(DURO_LDD ldd)
if(NOT DURO_LDD)
  message(WARNING "ldd not found: the install test is not registered")
  return()
endif()
add_test(NAME install_consumer
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_install.sh
          ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER}
          ${PKG_CONFIG_EXECUTABLE} ${CMAKE_COMMAND} ${CMAKE_GENERATOR}
          ${PROJECT_VERSION} "${DURO_SANITIZE}")
set_tests_properties(install_consumer PROPERTIES LABELS install TIMEOUT 300)
