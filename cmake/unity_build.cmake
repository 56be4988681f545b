# KVTUNE_UNITY_BUILD compiles a target's sources in batches of eight (CMake's unity build): the
# heavy headers (gtest, CLI11, nlohmann_json, toml++) and their template instances are compiled
# once per batch instead of once per file. CI (.ci/run) turns it on; a developer's build keeps one
# object per file, so editing one file recompiles that file alone. A file with its own compile
# options (attention_kernels.cpp) stays out of the batches. Names that files keep to themselves
# (an anonymous namespace) must differ between the files of a target.
# PER_FILE_UNDER_FUZZ: the sanitizer build (KVTUNE_FUZZ) keeps one object per file, because
# fuzz/coverage-ignorelist.txt chooses the files to leave uninstrumented by the name of the file
# compiled.
function(kvtune_unity_build target)
  cmake_parse_arguments(arg "PER_FILE_UNDER_FUZZ" "" "" ${ARGN})
  if(KVTUNE_UNITY_BUILD AND NOT (arg_PER_FILE_UNDER_FUZZ AND KVTUNE_FUZZ))
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
