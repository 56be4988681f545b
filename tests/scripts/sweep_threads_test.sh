#!/usr/bin/env bash
# tests/bench/sweep-threads without a real sweep: bad arguments exit 2 with a message naming the
# problem; a failing kvtune's exit status (2 for a bad sweep file) comes through with its message;
# over a stand-in kvtune that records its arguments, each round runs --jobs 1 then --jobs 2, each
# into its own fresh directory, and prints the round's seconds and speed-up, then the range.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
script="$root/tests/bench/sweep-threads"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$work/kvtune" <<'STUB'
#!/usr/bin/env bash
# A stand-in: `kvtune sweep [FILE] --jobs N --out DIR`; FILE bad.toml fails as kvtune does.
echo "$*" >> "$(dirname "$0")/calls"
[ "$2" = "bad.toml" ] && { echo "kvtune: bad.toml:1:1: expected a table" >&2; exit 2; }
out="${*: -1}"
[ -e "$out" ] && { echo "stale $out" >&2; exit 9; }
mkdir -p "$out"
STUB
chmod +x "$work/kvtune"

expect_exit2() {  # expect_exit2 "message fragment" args...
  local want="$1"; shift
  local err rc
  err="$("$script" "$@" 2>&1 >/dev/null)"; rc=$?
  [ "$rc" -eq 2 ] || fail "sweep-threads $*: exit $rc, expected 2"
  [[ "$err" == *"$want"* ]] || fail "sweep-threads $*: message '$err' lacks '$want'"
}
expect_exit2 "unknown argument '--bogus'" --bogus
expect_exit2 "--rounds 'x': expected a whole number of at least 1" --kvtune "$work/kvtune" --rounds x
expect_exit2 "--rounds '0': expected a whole number of at least 1" --kvtune "$work/kvtune" --rounds 0
expect_exit2 "'$work/none' is not an executable kvtune" --kvtune "$work/none"
expect_exit2 "kvtune sweep --jobs 1 failed (exit status 2)" --kvtune "$work/kvtune" --file bad.toml
expect_exit2 "bad.toml:1:1: expected a table" --kvtune "$work/kvtune" --file bad.toml

rm -f "$work/calls"
"$script" --kvtune "$work/kvtune" --rounds 2 --file my.toml > "$work/log" 2>&1 || fail "two rounds: exit $? ($(cat "$work/log"))"
[ "$(grep -c -E '^round [12]: 1 thread [0-9]+\.[0-9]{2} s, 2 threads [0-9]+\.[0-9]{2} s, speed-up [0-9]+\.[0-9]{2}$' "$work/log")" -eq 2 ] ||
  fail "the rounds' lines: $(cat "$work/log")"
grep -q -E '^speed-up 1 -> 2 threads: [0-9]+\.[0-9]{2}-[0-9]+\.[0-9]{2}$' "$work/log" || fail "the range line: $(cat "$work/log")"
mapfile -t calls < "$work/calls"
[ "${#calls[@]}" -eq 4 ] || fail "expected 4 sweeps, got ${#calls[@]}"
for i in 0 1 2 3; do
  jobs=$((i % 2 + 1))
  [[ "${calls[$i]}" == "sweep my.toml --jobs $jobs --out "*"/jobs$jobs" ]] || fail "sweep $((i + 1)): '${calls[$i]}'"
done
echo "sweep-threads: argument errors, a failing sweep and the rounds behave"
