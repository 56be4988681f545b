#!/usr/bin/env bash
# scripts/gpu-check's arguments, its build's time limit and its --prebuilt path, without a GPU: bad
# arguments exit 2 with a message naming the problem; a bundle (here stand-in binaries that record what they were given)
# is run without a build, with its lib/ on LD_LIBRARY_PATH, and summary.md says so.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_exit2() {  # expect_exit2 "message fragment" args...
  local want="$1"; shift
  local err rc
  err="$("$root/scripts/gpu-check" "$@" 2>&1 >/dev/null)"; rc=$?
  [ "$rc" -eq 2 ] || fail "gpu-check $*: exit $rc, expected 2"
  [[ "$err" == *"$want"* ]] || fail "gpu-check $*: message '$err' lacks '$want'"
}
expect_exit2 "unknown argument '--bogus'" --bogus
expect_exit2 "bin/kvtune_gpu_tests is missing" --prebuilt "$work/nowhere" --out "$work/out0"
mkdir -p "$work/half/bin" && : > "$work/half/bin/kvtune_gpu_tests"
expect_exit2 "bin/kvtune_gpu_bench is missing" --prebuilt "$work/half" --out "$work/out0"

err="$("$root/scripts/gpu-bundle" --bogus 2>&1 >/dev/null)"; rc=$?
[ "$rc" -eq 2 ] && [[ "$err" == *"unknown argument '--bogus'"* ]] || fail "gpu-bundle --bogus: exit $rc, '$err'"

# A bundle of stand-ins.
b="$work/bundle"
mkdir -p "$b/bin" "$b/lib"
echo "0123456789ab" > "$b/commit"
cat > "$b/bin/kvtune_gpu_tests" <<'STUB'
#!/usr/bin/env bash
echo "tests args: $*"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "[  PASSED  ] 3 tests."
STUB
cat > "$b/bin/kvtune_gpu_bench" <<'STUB'
#!/usr/bin/env bash
[ "$1" = "--out" ] || exit 3
printf 'Targets met: 1, missed: 2; points with non-finite output: 0.\n' > "$2/bench_decode_attention.md"
STUB
chmod +x "$b/bin/"*
out="$work/out"
"$root/scripts/gpu-check" --prebuilt "$b" --out "$out" --budget 200 > "$work/log" 2>&1 || fail "gpu-check --prebuilt: exit $? ($(cat "$work/log"))"
s="$out/summary.md"
grep -q -- "- commit: 0123456789ab (prebuilt)" "$s" || fail "summary lacks the bundle's commit"
grep -q -- "- build: skipped, binaries from $b" "$s" || fail "summary lacks the skipped build"
grep -q -- "- GPU tests: passed" "$s" || fail "summary lacks the tests' result"
grep -q "PASSED  \] 3 tests" "$s" || fail "summary lacks the tests' counts"
grep -q "Targets met: 1, missed: 2" "$s" || fail "summary lacks the benchmark's targets line"
grep -q "^LD_LIBRARY_PATH=$b/lib" "$out/gpu-tests.log" || fail "the bundle's lib/ is not first on LD_LIBRARY_PATH"
grep -q "tests args: --gtest_output=xml:$out/gpu-tests.xml" "$out/gpu-tests.log" || fail "the tests were not given the XML output"
# The same bundle as the archive scripts/gpu-bundle writes beside it (bin, lib and commit at its
# top level): unpacked outside DIR, run the same way, and gone afterwards.
tar -C "$b" -czf "$work/bundle.tar.gz" bin lib commit
"$root/scripts/gpu-check" --prebuilt "$work/bundle.tar.gz" --out "$work/out-tar" --budget 200 > "$work/log-tar" 2>&1 ||
  fail "gpu-check --prebuilt ARCHIVE: exit $? ($(cat "$work/log-tar"))"
grep -q -- "- commit: 0123456789ab (prebuilt)" "$work/out-tar/summary.md" || fail "the archive's bundle did not run"
grep -q -- "- build: skipped, binaries from $work/bundle.tar.gz" "$work/out-tar/summary.md" ||
  fail "summary.md does not name the archive"
[ -z "$(ls -A "$work" | grep '^\.gpu-bundle\.')" ] || fail "the unpacked bundle was left beside DIR"
grep -q -- "- GPU tests: passed" "$work/out-tar/summary.md" || fail "the archive's tests did not pass"
[ ! -e "$work/out-tar/bin" ] || fail "the bundle was unpacked into DIR"
printf 'not an archive' > "$work/bogus.tar.gz"
expect_exit2 "bogus.tar.gz: not a bundle archive" --prebuilt "$work/bogus.tar.gz" --out "$work/out0"
# nvidia-smi sees a GPU but the runtime does not: the tests skip and the bench finds nothing to
# measure, which must fail the check rather than pass it.
mkdir -p "$work/fake-smi" "$work/blind/bin" "$work/blind/lib"
printf '#!/usr/bin/env bash\necho "NVIDIA H200, 143771 MiB, 550.54.15"\n' > "$work/fake-smi/nvidia-smi"
echo "0123456789ab" > "$work/blind/commit"
printf '#!/usr/bin/env bash\necho "[  PASSED  ] 0 tests."\necho "[  SKIPPED ] 137 tests, listed below:"\n' \
  > "$work/blind/bin/kvtune_gpu_tests"
printf '#!/usr/bin/env bash\necho "kvtune_gpu_bench: nothing to measure: no CUDA device"\n' > "$work/blind/bin/kvtune_gpu_bench"
chmod +x "$work/fake-smi/nvidia-smi" "$work/blind/bin/"*
PATH="$work/fake-smi:$PATH" "$root/scripts/gpu-check" --prebuilt "$work/blind" --out "$work/out-blind" --budget 200 \
  > "$work/log-blind" 2>&1 && fail "gpu-check passed although every GPU test skipped on a machine with a GPU"
grep -q -- "- GPU tests: FAILED: 137 tests skipped: the CUDA runtime found no device" "$work/out-blind/summary.md" ||
  fail "summary lacks the skipped tests' failure ($(cat "$work/out-blind/summary.md"))"
grep -q -- "- benchmark: FAILED: the CUDA runtime found no device" "$work/out-blind/summary.md" ||
  fail "summary lacks the benchmark's failure"
# A build that would overrun the budget is stopped at its share (the budget less 150 s, at least
# 10 s) and the summary says so, instead of the caller's limit ending the run without one.
mkdir -p "$work/slow-cmake"
printf '#!/usr/bin/env bash\necho "cmake $*"\nsleep 120\n' > "$work/slow-cmake/cmake"
chmod +x "$work/slow-cmake/cmake"
t0=$SECONDS
PATH="$work/slow-cmake:$PATH" KVTUNE_GPU_BUILD_DIR="$work/build-gpu" "$root/scripts/gpu-check" --out "$work/out-slow" \
  --budget 155 > "$work/log-slow" 2>&1 && fail "gpu-check passed although its build timed out"
[ $((SECONDS - t0)) -lt 60 ] || fail "the build was not stopped at its limit ($((SECONDS - t0)) s)"
grep -q -- "- build: TIMED OUT after [0-9]* s (limit 10 s;" "$work/out-slow/summary.md" ||
  fail "summary lacks the build's time-out ($(cat "$work/out-slow/summary.md"))"
echo "gpu-check: argument errors, the build's time limit and the prebuilt path behave"
