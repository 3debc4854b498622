# README's first program compiles with warnings as errors against this
# build's libraries, prints its result, and fails cleanly (a message, no
# crash) when its store cannot be opened. It needs no ldd, so it comes
# first.
add_test(NAME readme_first_program
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_readme.sh
          ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER}
          $<TARGET_FILE:duro_static> $<TARGET_FILE_DIR:duro_shared>
          ${DURO_POSTGRES} "${DURO_SANITIZE}")
set_tests_properties(readme_first_program PROPERTIES
  LABELS "example;tsan" TIMEOUT 120)

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

# `make uninstall` uses the DESTDIR the install used (never / after a staged
# install) and refuses another one.
find_program(DURO_MAKE NAMES make gmake)
if(DURO_MAKE)
  add_test(NAME install_uninstall
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_uninstall.sh ${PROJECT_SOURCE_DIR})
  set_tests_properties(install_uninstall PROPERTIES LABELS install)
endif()

# A project that builds duro with add_subdirectory links duro::duro and
# duro::duro_static and gets none of duro's tests, benchmarks or examples.
add_test(NAME install_subproject
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_subproject.sh
          ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER} ${CMAKE_COMMAND}
          ${CMAKE_GENERATOR})
set_tests_properties(install_subproject PROPERTIES LABELS install TIMEOUT 300)
