# Warnings as errors for our own code only (third-party headers come in as SYSTEM includes).
add_library(kvtune_warnings INTERFACE)
target_compile_options(kvtune_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Werror>
  # Designated initializers that leave defaulted members out are the intended idiom.
  $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>
  # GCC 12 reports -Wrestrict false positives inside std::string concatenation at -O3 (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)

# Bit-exact codecs: no FMA contraction, no fast-math (STYLE.md, "Numerics").
add_library(kvtune_exact_fp INTERFACE)
target_compile_options(kvtune_exact_fp INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)

if(KVTUNE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  # The sanitizer build exists to find memory and UB errors: -O1 (the level the AddressSanitizer
  # docs suggest for reasonable speed) and line tables only (-g1, enough for file:line in reports)
  # compile much faster than -O2 -g. Later flags win, so these override the build type's.
  add_compile_options(-O1 -g1)
endif()

if(KVTUNE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KVTUNE_FUZZ needs clang (libFuzzer): CXX=clang++ (scripts/fuzz sets it)")
  endif()
  # Every library the targets link is instrumented for coverage and checked by ASan and UBSan; the
  # fuzz targets themselves add -fsanitize=fuzzer (fuzz/CMakeLists.txt).
  # fuzz/coverage-ignorelist.txt: the numerical code no target reads input through keeps ASan and
  # UBSan but not the coverage callbacks, which made the test suites built here 2-3x slower.
  configure_file("${PROJECT_SOURCE_DIR}/fuzz/coverage-ignorelist.txt" "${PROJECT_BINARY_DIR}/coverage-ignorelist.txt" @ONLY)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
                      -fsanitize-coverage-ignorelist=${PROJECT_BINARY_DIR}/coverage-ignorelist.txt -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
endif()
