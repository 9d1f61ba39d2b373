# Shared by the bench scripts: median_ms N CMD... prints the median wall
# time of N runs of CMD in milliseconds (a failing exit status is not an
# error: berth check exits 1 on a host that is not ready). It uses
# hyperfine (apt-get install hyperfine) when present, else python3's
# perf_counter around each run. Either way no shell sits between the clock
# and the process; a bash `date +%s%N` loop would add the few milliseconds
# that forking date costs on a small VM.
median_ms() {
  local n="$1"; shift
  if command -v hyperfine >/dev/null; then
    local j; j="$(mktemp)"
    hyperfine -N -i --warmup 3 --runs "$n" --export-json "$j" -- "$(printf '%q ' "$@")" >/dev/null 2>&1
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["results"][0]["median"]*1000))' "$j"
    rm -f "$j"
  else
    python3 - "$n" "$@" <<'PY'
import statistics, subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
for _ in range(3):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
ts = []
for _ in range(n):
    s = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ts.append((time.perf_counter() - s) * 1000)
print("%.1f" % statistics.median(ts))
PY
  fi
}
