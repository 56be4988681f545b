# KVTUNE_UNITY_BUILD compiles a target's sources in batches of eight (CMake's unity build): the
# heavy headers (gtest, CLI11, nlohmann_json, toml++) and their template instances are compiled
# once per batch instead of once per file. CI (.ci/run) turns it on; a developer's build keeps one
# object per file, so editing one file recompiles that file alone. A file with its own compile
# options (attention_kernels.cpp) stays out of the batches. Names that files keep to themselves
# (an anonymous namespace) must differ between the files of a target.
# SPLIT_BY_COVERAGE: in the sanitizer build (KVTUNE_FUZZ), fuzz/coverage-ignorelist.txt chooses
# the files left without coverage instrumentation by the name of the file compiled, which for a
# batch is the batch's own file. So there a batch never mixes the files the list names with the
# others (kvtune_coverage_batches), and the list names the batches of the former.
function(kvtune_unity_build target)
  cmake_parse_arguments(arg "SPLIT_BY_COVERAGE" "" "" ${ARGN})
  if(NOT KVTUNE_UNITY_BUILD)
    return()
  endif()
  if(arg_SPLIT_BY_COVERAGE AND KVTUNE_FUZZ)
    kvtune_coverage_batches(${target})
  else()
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# The coverage ignorelist's `src:` globs as CMake regular expressions (`*` matches any run of
# characters, '/' included, and `?` any one, as in LLVM's special case lists).
function(kvtune_coverage_ignore_regexes out)
  file(STRINGS "${PROJECT_SOURCE_DIR}/fuzz/coverage-ignorelist.txt" lines REGEX "^src:")
  set(regexes "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^src:" "" glob "${line}")
    string(CONFIGURE "${glob}" glob @ONLY)
    # Inside a CMake bracket expression a backslash is a plain character and a leading ] is one
    # too: so the bracket holds every character a regular expression gives a meaning but * and ?.
    string(REGEX REPLACE "([][.+^$()|\\\\])" "\\\\\\1" regex "${glob}")
    string(REPLACE "*" ".*" regex "${regex}")
    string(REPLACE "?" "." regex "${regex}")
    list(APPEND regexes "^${regex}$")
  endforeach()
  set(${out} "${regexes}" PARENT_SCOPE)
endfunction()

# Groups the target's sources in batches of eight named uncovered_N (the files the ignorelist
# names) and covered_N (the rest): CMake writes each as <build dir>/.../Unity/unity_<name>_cxx.cxx.
function(kvtune_coverage_batches target)
  kvtune_coverage_ignore_regexes(regexes)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(count_uncovered 0)
  set(count_covered 0)
  foreach(source IN LISTS sources)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${source_dir}" NORMALIZE OUTPUT_VARIABLE path)
    set(kind covered)
    foreach(regex IN LISTS regexes)
      if(path MATCHES "${regex}")
        set(kind uncovered)
        break()
      endif()
    endforeach()
    math(EXPR batch "${count_${kind}} / 8")
    math(EXPR count_${kind} "${count_${kind}} + 1")
    set_source_files_properties("${source}" PROPERTIES UNITY_GROUP "${kind}_${batch}")
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()
