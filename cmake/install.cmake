# `cmake --install`: the CLI, headers, libraries, configs/ and sweeps/, and the CMake package that
# out-of-tree plugins build against (find_package(kvtune CONFIG); docs/plugin-guide.md).
#
# Package version = the plugin ABI version MAJOR.MINOR, read from kvtune/plugin_abi.h, with
# SameMajorVersion compatibility: find_package(kvtune 1) finds any kvtune that loads ABI-1 plugins,
# and a plugin asking for 1.2 (fields appended in minor 2) is not given a 1.0 SDK. The release
# version is kvtune_RELEASE_VERSION.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

file(STRINGS "${PROJECT_SOURCE_DIR}/core/include/kvtune/plugin_abi.h" abi_lines
     REGEX "^#define KVTUNE_PLUGIN_ABI_(MAJOR|MINOR) [0-9]+$")
foreach(line IN LISTS abi_lines)
  string(REGEX MATCH "(MAJOR|MINOR) ([0-9]+)$" _ "${line}")
  set(KVTUNE_PLUGIN_ABI_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
endforeach()
if(NOT DEFINED KVTUNE_PLUGIN_ABI_MAJOR OR NOT DEFINED KVTUNE_PLUGIN_ABI_MINOR)
  message(FATAL_ERROR "cannot read KVTUNE_PLUGIN_ABI_MAJOR/MINOR from core/include/kvtune/plugin_abi.h")
endif()
set(KVTUNE_PLUGIN_ABI_VERSION "${KVTUNE_PLUGIN_ABI_MAJOR}.${KVTUNE_PLUGIN_ABI_MINOR}")

set(KVTUNE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/kvtune")
set(KVTUNE_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/kvtune")

set_target_properties(kvtune_exact_fp PROPERTIES EXPORT_NAME exact_fp)

# Two export sets: the SDK needs nothing; the core needs OpenMP and toml++ on the plugin author's
# machine, so kvtuneConfig.cmake loads it only when those are found.
install(TARGETS kvtune_plugin_sdk kvtune_exact_fp EXPORT kvtunePluginSdkTargets)
install(TARGETS kvtune kvtune_core kvtune_builtin_schemes EXPORT kvtuneTargets
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/core/include/kvtune" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_BINARY_DIR}/core/generated/kvtune/version.h" "${PROJECT_SOURCE_DIR}/plugins/builtin.h"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/kvtune")
# The installed CLI finds these relative to itself (<prefix>/bin/../share/kvtune/configs).
install(DIRECTORY "${PROJECT_SOURCE_DIR}/configs" "${PROJECT_SOURCE_DIR}/sweeps" DESTINATION "${KVTUNE_INSTALL_DATADIR}")
# The chart scripts report.html inlines, in node_modules' layout (<prefix>/share/kvtune/web/node_modules,
# the first place the CLI looks; report_page.cpp): each package's build, package.json and LICENSE.
# scripts/setup installs them with npm; without them the install still works, and --report says
# where it looked.
foreach(package vega vega-lite vega-embed)
  set(from "${PROJECT_SOURCE_DIR}/web/node_modules/${package}")
  set(to "${KVTUNE_INSTALL_DATADIR}/web/node_modules/${package}")
  install(FILES "${from}/package.json" "${from}/LICENSE" DESTINATION "${to}" OPTIONAL)
  install(FILES "${from}/build/${package}.min.js" DESTINATION "${to}/build" OPTIONAL)
endforeach()

install(EXPORT kvtunePluginSdkTargets NAMESPACE kvtune:: DESTINATION "${KVTUNE_INSTALL_CMAKEDIR}")
install(EXPORT kvtuneTargets NAMESPACE kvtune:: DESTINATION "${KVTUNE_INSTALL_CMAKEDIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/kvtuneConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/kvtuneConfig.cmake"
                              INSTALL_DESTINATION "${KVTUNE_INSTALL_CMAKEDIR}"
                              PATH_VARS KVTUNE_INSTALL_DATADIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/kvtuneConfigVersion.cmake"
                                 VERSION "${KVTUNE_PLUGIN_ABI_VERSION}" COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/kvtuneConfig.cmake" "${PROJECT_BINARY_DIR}/kvtuneConfigVersion.cmake"
        DESTINATION "${KVTUNE_INSTALL_CMAKEDIR}")
