# KVTUNE_UNITY_BUILD compiles a target's sources in batches of eight (CMake's unity build): the
# heavy headers (gtest, CLI11, nlohmann_json) and their template instances are compiled once per
# batch instead of once per file. CI (.ci/run) turns it on; a developer's build keeps one object
# per file, so editing one file recompiles that file alone.
function(kvtune_unity_build target)
  if(KVTUNE_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
