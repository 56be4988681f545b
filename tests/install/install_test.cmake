# Installs kvtune into a temporary prefix and uses it as a plugin author would (issue #6):
#   1. cmake --install, then the layout: CLI, headers, libraries, configs/, sweeps/, CMake package;
#   2. the installed CLI runs from elsewhere and finds its configs under <prefix>/share/kvtune;
#   3. examples/plugin-nf4 configures and builds against the prefix (find_package(kvtune 1));
#   4. a program built against kvtune::core from the prefix loads the built plugin and runs every
#      conformance check on it (the code behind `kvtune check-plugin`), and find_package(kvtune 2)
#      is refused (the package version is the plugin ABI version);
#   5. the installed CLI loads the built plugin: `schemes --plugin` names it and its origin,
#      KVTUNE_PLUGIN_PATH finds it, `check-plugin` passes it, and a sweep file naming it in
#      `plugins = [...]` evaluates its scheme beside a built-in one.
# Run by CTest: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -P this file.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake needs -D${var}=...")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

# 1. install and check the layout
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f bin/kvtune
          include/kvtune/plugin_abi.h include/kvtune/plugin_sdk.h include/kvtune/scheme.h include/kvtune/version.h
          include/kvtune/plugin_loader.h include/kvtune/conformance.h include/kvtune/builtin.h
          lib/libkvtune_core.a lib/libkvtune_builtin_schemes.a
          lib/cmake/kvtune/kvtuneConfig.cmake lib/cmake/kvtune/kvtuneConfigVersion.cmake
          lib/cmake/kvtune/kvtuneTargets.cmake lib/cmake/kvtune/kvtunePluginSdkTargets.cmake
          share/kvtune/configs/models share/kvtune/configs/runtimes share/kvtune/sweeps/seed-table.toml
          share/kvtune/web/node_modules/vega/build/vega.min.js share/kvtune/web/node_modules/vega/LICENSE
          share/kvtune/web/node_modules/vega-lite/build/vega-lite.min.js
          share/kvtune/web/node_modules/vega-embed/build/vega-embed.min.js
          share/kvtune/web/node_modules/vega-embed/package.json)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()

# 2. the installed CLI, run from outside both trees, finds <prefix>/share/kvtune/configs
file(MAKE_DIRECTORY "${WORK_DIR}/elsewhere")
execute_process(COMMAND "${prefix}/bin/kvtune" memory --model llama-3.1-70b --ctx 131072 --k f16 --v f16
                WORKING_DIRECTORY "${WORK_DIR}/elsewhere" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installed kvtune memory failed (${rc}):\n${out}\n${err}")
endif()

# 2b. and writes report.html with the chart scripts of <prefix>/share/kvtune (issue #18)
execute_process(COMMAND "${prefix}/bin/kvtune" sweep "${SOURCE_DIR}/tests/browser/report-sweep.toml"
                        --out "${WORK_DIR}/elsewhere/report" --report --jobs 2
                WORKING_DIRECTORY "${WORK_DIR}/elsewhere" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${WORK_DIR}/elsewhere/report/report.html")
  message(FATAL_ERROR "installed kvtune sweep --report failed (${rc}):\n${out}\n${err}")
endif()
file(READ "${WORK_DIR}/elsewhere/report/report.html" page)
string(FIND "${page}" "/*! vega-embed " at)
if(at EQUAL -1)
  message(FATAL_ERROR "the installed kvtune's report.html lacks the inlined vega-embed")
endif()

# 3. and 4. out-of-tree builds against the prefix, with the build's sanitizer flags if any
set(flags "")
if(SANITIZE)
  set(sanitize "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer")
  list(APPEND flags "-DCMAKE_CXX_FLAGS=${sanitize}" "-DCMAKE_EXE_LINKER_FLAGS=${sanitize}"
                    "-DCMAKE_MODULE_LINKER_FLAGS=${sanitize}")
endif()
if(MAKE_PROGRAM)
  list(APPEND flags "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
foreach(project nf4 consumer)
  if(project STREQUAL "nf4")
    set(source "${SOURCE_DIR}/examples/plugin-nf4")
  else()
    set(source "${SOURCE_DIR}/tests/install/consumer")
  endif()
  run("${CMAKE_COMMAND}" -S "${source}" -B "${WORK_DIR}/${project}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
      "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${flags})
  run("${CMAKE_COMMAND}" --build "${WORK_DIR}/${project}")
endforeach()

set(plugin "${WORK_DIR}/nf4/libkvtune_nf4.so")
if(NOT EXISTS "${plugin}")
  message(FATAL_ERROR "the example did not produce ${plugin}")
endif()
run("${WORK_DIR}/consumer/kvtune_consumer" "${plugin}")
foreach(expected "families: nf4" "PASS nf4 nf4:group=64 footprint_equals_packed_size" "checks passed"
                 "nf4:group=32,scale=f16 bits/element at 64x128: 4.5")
  string(FIND "${run_output}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the consumer's output lacks '${expected}':\n${run_output}")
  endif()
endforeach()
# 5. the installed CLI with the plugin, run from outside both trees
function(kvtune_expect expected)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}/elsewhere"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}" "${expected}" at)
  if(NOT rc EQUAL 0 OR at EQUAL -1)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "'${cmd}' (exit ${rc}) did not print '${expected}':\n${out}\n${err}")
  endif()
endfunction()
kvtune_expect("from ${plugin}" "${prefix}/bin/kvtune" schemes --plugin "${plugin}")
kvtune_expect("nf4  -  " "${CMAKE_COMMAND}" -E env "KVTUNE_PLUGIN_PATH=${WORK_DIR}/nf4" "${prefix}/bin/kvtune" schemes)
kvtune_expect("checks passed" "${prefix}/bin/kvtune" check-plugin "${plugin}")
file(WRITE "${WORK_DIR}/elsewhere/sweep.toml" "plugins = [\"${plugin}\"]
[workload]
tokens = 256
head_dim = 64
[search]
k = [\"nf4\", \"q8_0\"]
v = [\"nf4:group=32\"]
[budget]
max_rel_out_err = 0.5
")
kvtune_expect("nf4" "${prefix}/bin/kvtune" sweep sweep.toml --out out)
file(STRINGS "${WORK_DIR}/elsewhere/out/results.jsonl" records)
list(LENGTH records count)
string(FIND "${records}" "\"k\":\"nf4:group=64\"" nf4_at)
if(NOT count EQUAL 2 OR nf4_at EQUAL -1)
  message(FATAL_ERROR "the sweep with the plugin wrote ${count} records:\n${records}")
endif()
message(STATUS "install test passed: ${prefix}")
