# install.cmake - what `cmake --install` (and `make install`) puts where,
# under GNUInstallDirs: both libraries (the shared one with its soname
# links), the public headers, duro.pc for pkg-config, the CMake package
# (find_package(duro): duro::duro, duro::duro_static), the duro command
# with its man page and bash completion, the documents (licence, changelog,
# README, docs/, examples/), and man pages once man/ exists. Components:
# Runtime (what a program that uses the shared library needs at run time)
# and Development (what compiling and linking against duro needs).
include(CMakePackageConfigHelpers)

set(DURO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/duro)

# ---- libraries and headers -------------------------------------------------
install(TARGETS duro_shared duro_static EXPORT duroTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
          NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
install(FILES ${PROJECT_SOURCE_DIR}/include/duro.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/duro
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development
  FILES_MATCHING PATTERN "*.h")

# ---- the duro command ----------------------------------------------------------
# The operator's command (tools/duro), its man page and its bash completion
# (where bash-completion looks for it on demand).
install(TARGETS duro_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT Runtime)
install(FILES ${PROJECT_SOURCE_DIR}/tools/duro/duro.1
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT Runtime)
install(FILES ${PROJECT_SOURCE_DIR}/tools/duro/duro.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME duro COMPONENT Runtime)

# ---- pkg-config --------------------------------------------------------------
# duro.pc is written at install time, not at configure time, so that it
# names the prefix actually installed to (`cmake --install --prefix P`, or
# `make install PREFIX=P`), not the one the build was configured with.
# DESTDIR is not part of it: a staged install still names its final prefix.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DURO_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(DURO_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DURO_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(DURO_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(DURO_PC_FILE ${PROJECT_BINARY_DIR}/pkgconfig/duro.pc)
if(DURO_POSTGRES)
  set(DURO_PC_LIBS_PQ " -lpq")
  set(DURO_FIND_POSTGRES "find_dependency(PostgreSQL)")
else()
  set(DURO_PC_LIBS_PQ "")
  set(DURO_FIND_POSTGRES "")
endif()
install(CODE "
  set(DURO_PC_LIBS_PQ [==[${DURO_PC_LIBS_PQ}]==])
  set(DURO_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(DURO_PC_LIBDIR [==[${DURO_PC_LIBDIR}]==])
  set(DURO_PC_INCLUDEDIR [==[${DURO_PC_INCLUDEDIR}]==])
  set(DURO_PC_VERSION [==[${PROJECT_VERSION}]==])
  configure_file([==[${PROJECT_SOURCE_DIR}/cmake/duro.pc.in]==]
                 [==[${DURO_PC_FILE}]==] @ONLY)"
  COMPONENT Development)
install(FILES ${DURO_PC_FILE}
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT Development)

# ---- CMake package -------------------------------------------------------------
# The version file accepts what the soname accepts (CMakeLists.txt): while
# the major version is 0, only the same MAJOR.MINOR (SameMinorVersion: 0.2
# may break 0.1's API), from 1.0 on the same MAJOR (SameMajorVersion).
# find_package(duro) with no version takes any.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(DURO_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(DURO_VERSION_COMPATIBILITY SameMajorVersion)
endif()
install(EXPORT duroTargets NAMESPACE duro:: FILE duroTargets.cmake
  DESTINATION ${DURO_CMAKE_DIR} COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/duroConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/duroConfig.cmake
  INSTALL_DESTINATION ${DURO_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/duroConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${DURO_VERSION_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/cmake/duroConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/duroConfigVersion.cmake
  DESTINATION ${DURO_CMAKE_DIR} COMPONENT Development)

# ---- documents -----------------------------------------------------------------
# share/doc/duro: the licence, the changelog, the README with docs/ (and its
# images) and examples/ beside it, as in the source tree, so the README's
# links work there; duro(1) names these paths. The examples compile alone
# with the README's pkg-config line (tests/install/test_install.sh).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
              ${PROJECT_SOURCE_DIR}/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT Runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT Runtime
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT Development
  FILES_MATCHING PATTERN "*.c" PATTERN "*.cpp" PATTERN "README.md")

# Man pages, when man/ has them: man/NAME.SECTION (man/duro.1) goes to
# share/man/manSECTION. Library pages (section 3) are Development.
foreach(section 1 3 5 7 8)
  file(GLOB DURO_MAN_PAGES CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/man/*.${section})
  if(section EQUAL 3)
    set(DURO_MAN_COMPONENT Development)
  else()
    set(DURO_MAN_COMPONENT Runtime)
  endif()
  if(DURO_MAN_PAGES)
    install(FILES ${DURO_MAN_PAGES}
      DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
      COMPONENT ${DURO_MAN_COMPONENT})
  endif()
endforeach()
