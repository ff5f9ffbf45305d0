#!/usr/bin/env python3
"""Interleaved before/after of `iterion run` (one tool node, docker), cold and warm, two binaries,
against `docker run --rm` (BENCHMARKS.md, session 14). Usage: bench-run-ab.py OLD_ITERION NEW_ITERION [ROUNDS]."""
import os, subprocess, sys, tempfile, time, statistics, pathlib
A = sys.argv[1]; B = sys.argv[2]; runs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
IMAGE = "iterion-test/debian:bookworm"
ws = pathlib.Path(tempfile.mkdtemp(prefix="ab-ws-")).resolve()
subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
(ws / "one.iter").write_text(f'tool n0:\n  command: `echo ok`\n\nworkflow bench:\n  entry: n0\n  sandbox:\n    image: "{IMAGE}"\n  n0 -> done\n')
homes = {k: tempfile.mkdtemp(prefix=f"ab-{k}-") for k in ["A-cold", "B-cold", "A-warm", "B-warm"]}
def settle():
    while subprocess.run(["pgrep", "-f", "iterion __warm-fill"], capture_output=True).returncode == 0:
        time.sleep(0.02)
def timed(cmd, env=None):
    t = time.perf_counter(); r = subprocess.run(cmd, cwd=ws, env=env, capture_output=True); d = time.perf_counter() - t
    if r.returncode != 0: print("FAILED", cmd, r.stderr.decode()[-2000:], file=sys.stderr); sys.exit(1)
    return d * 1000
def it(binary, key):
    env = dict(os.environ, ITERION_HOME=homes[key], RUST_LOG="error")
    if key.endswith("warm"):
        env.update(ITERION_SANDBOX_WARM="1", ITERION_SANDBOX_HOST_STATE="none")
    return lambda: (timed([binary, "run", "one.iter"], env), settle())[0]
series = {
    "A cold": it(A, "A-cold"), "B cold": it(B, "B-cold"),
    "A warm": it(A, "A-warm"), "B warm": it(B, "B-warm"),
    "docker run --rm": lambda: timed(["docker", "run", "--rm", IMAGE, "sh", "-c", "echo ok"]),
}
names = list(series)
for n in names: series[n]()  # warm-up; teaches the pools
samples = {n: [] for n in names}
for r in range(runs):
    for k in range(len(names)):
        n = names[(k + r) % len(names)]
        samples[n].append(series[n]())
base = statistics.median(samples["docker run --rm"])
print(f"A={A}\nB={B}\nruns={runs}, load={os.getloadavg()}")
for n in names:
    m = statistics.median(samples[n]); print(f"| {n} | {m:.0f} ms | {m/base:.2f}x | p90 {sorted(samples[n])[int(len(samples[n])*0.9)-1]:.0f} |")
