# Install rules, the CMake package (briskConfig.cmake), the pkg-config files
# and the Debian package (cpack -G DEB). Included by CMakeLists.txt when
# BRISK_INSTALL is on; BRISK_INSTALL_TARGETS lists the library variants.
include(CMakePackageConfigHelpers)

set(BRISK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/brisk)
set(BRISK_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The shared libraries get libbrisk.so.0.1.0, the SONAME link libbrisk.so.0
# and the development link libbrisk.so. The static archives are ordinary
# STATIC targets whose one source is the partially linked object, so
# install(EXPORT) describes them like any archive.
install(TARGETS ${BRISK_INSTALL_TARGETS} EXPORT briskTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/brisk.h ${PROJECT_SOURCE_DIR}/include/brisk.hpp
              ${PROJECT_SOURCE_DIR}/include/brisk-new-delete.hpp ${BRISK_GENERATED_INCLUDE}/brisk_version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT briskTargets NAMESPACE brisk:: DESTINATION ${BRISK_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/briskConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/briskConfig.cmake INSTALL_DESTINATION ${BRISK_CMAKE_DIR})
# Same major version, same ABI (README, "Versions and the ABI").
write_basic_package_version_file(${PROJECT_BINARY_DIR}/briskConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/briskConfig.cmake ${PROJECT_BINARY_DIR}/briskConfigVersion.cmake
        DESTINATION ${BRISK_CMAKE_DIR})

# pkg-config: every path from ${pcfiledir}, so the tree may be installed
# with any --prefix (or moved) and still be found.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(BRISK_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(BRISK_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
file(RELATIVE_PATH BRISK_PC_TO_PREFIX /prefix/${BRISK_PC_DIR} /prefix)
string(REGEX REPLACE "/$" "" BRISK_PC_TO_PREFIX "${BRISK_PC_TO_PREFIX}")
foreach(pc brisk brisk-core)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${BRISK_PC_DIR})
endforeach()

install(PROGRAMS ${PROJECT_BINARY_DIR}/brisk-run DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/docs/brisk-run.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

if(BRISK_TOP_LEVEL)
  set(CPACK_PACKAGE_NAME brisk)
  set(CPACK_PACKAGE_VENDOR "brisk authors")
  set(CPACK_PACKAGE_CONTACT "brisk authors")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "brisk: a fast general-purpose memory allocator (drop-in malloc)")
  set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION libs)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34)")
  set(CPACK_GENERATOR DEB)
  include(CPack)
endif()
