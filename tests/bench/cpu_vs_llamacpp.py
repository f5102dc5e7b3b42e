#!/usr/bin/env python3
"""clauseqa's CPU decoder against llama.cpp on the same cores and the same GGUF (issue 15). Not a test: prints a
table of prefill tok/s (a 512-token prompt, logits of the last token) and decode tok/s (128 steps after the 512-token
prompt) for both, each in two builds: native (clauseqa's kernels chosen by the CPU, AVX-512 VNNI where it runs it;
llama.cpp with GGML_NATIVE) and AVX2 (clauseqa with CLAUSEQA_CPU_ISA=avx2; llama.cpp built for AVX2/FMA/F16C only).
The four run one after the other within each of several rounds (so a busy neighbour slows all of them), pinned with
taskset; the table shows the median and range over the rounds, and the ratios of the medians.

llama.cpp is not part of clauseqa: when its llama-bench is missing, the script fetches the llama-cpp-python sdist
(which vendors llama.cpp) with pip into a temporary folder and builds the two llama-bench binaries there.

usage: tests/bench/cpu_vs_llamacpp.py [--rounds N] [--cores 0,1] [--threads 2] [--build build]
                                      [--llama-dir /tmp/clauseqa-llamacpp] [--model PATH] [--only native|avx2]
                                      [--prompt 512] [--decode 128] [--llama-bench KIND=PATH ...]

--llama-bench native=PATH (or avx2=PATH) uses a llama-bench built elsewhere (e.g. on another machine with
GGML_BACKEND_DL and GGML_CPU_ALL_VARIANTS, which loads the CPU variant the running CPU supports: "native" without
building on the machine that measures).
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

LLAMA_FLAGS = {
    "native": ["-DGGML_NATIVE=ON"],
    "avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
             "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX512_VNNI=OFF",
             "-DGGML_AVX512_BF16=OFF", "-DGGML_AVX_VNNI=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF"],
}


def run(cmd, env=None, cwd=None):
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-3000:]))
    return r.stdout


def llama_source(llama_dir):
    src = os.path.join(llama_dir, "llama.cpp")
    if os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        return src
    os.makedirs(llama_dir, exist_ok=True)
    print("fetching the llama-cpp-python sdist (it vendors llama.cpp) into %s" % llama_dir, flush=True)
    run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-d", llama_dir,
         "llama-cpp-python"])
    sdist = sorted(glob.glob(os.path.join(llama_dir, "llama_cpp_python-*.tar.gz")))[-1]
    with tarfile.open(sdist) as t:
        t.extractall(llama_dir)
    vendored = glob.glob(os.path.join(llama_dir, "llama_cpp_python-*", "vendor", "llama.cpp"))[0]
    shutil.move(vendored, src)
    return src


def llama_bench(llama_dir, kind, jobs):
    src = llama_source(llama_dir)
    build = os.path.join(src, "build-" + kind)
    exe = os.path.join(build, "bin", "llama-bench")
    if os.path.exists(exe):
        return exe
    print("building llama.cpp's llama-bench (%s) in %s" % (kind, build), flush=True)
    run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
         "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF"] + LLAMA_FLAGS[kind])
    run(["cmake", "--build", build, "-j", str(jobs), "--target", "llama-bench"])
    return exe


def clauseqa_once(bench, model, cores, threads, kind):
    env = dict(os.environ)
    env.pop("CLAUSEQA_CPU_ISA", None)
    if kind == "avx2":
        env["CLAUSEQA_CPU_ISA"] = "avx2"
    out = run(["taskset", "-c", cores, bench, "--model", model, "--threads", str(threads), "--prompt", str(PROMPT),
               "--decode", str(DECODE), "--runs", "1", "--perplexity", "0"], env=env)
    pre = re.search(r"^prefill \(last logits\)\s+\d+\s+([\d.]+)", out, re.M)
    dec = re.search(r"^decode \(full logits to host, batch 1\)\s+\d+\s+([\d.]+)", out, re.M)
    if not pre or not dec:
        sys.exit("unexpected bench_decoder output:\n" + out)
    return float(pre.group(1)), float(dec.group(1))


def llama_once(exe, model, cores, threads):
    out = run(["taskset", "-c", cores, exe, "-m", model, "-t", str(threads), "-r", "1", "-o", "jsonl",
               "-p", str(PROMPT), "-n", "0"])
    pre = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    out = run(["taskset", "-c", cores, exe, "-m", model, "-t", str(threads), "-r", "1", "-o", "jsonl",
               "-p", "0", "-n", str(DECODE), "-d", str(PROMPT)])
    dec = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    p = [r["avg_ts"] for r in pre if r.get("n_prompt") == PROMPT and r.get("n_gen") == 0]
    d = [r["avg_ts"] for r in dec if r.get("n_gen") == DECODE]
    if not p or not d:
        sys.exit("unexpected llama-bench output")
    return float(p[0]), float(d[0])


def cell(xs):
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cores", default="0,1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--llama-dir", default="/tmp/clauseqa-llamacpp")
    ap.add_argument("--model", default=os.path.join(ROOT, "data", "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--only", choices=["native", "avx2"])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--llama-bench", action="append", default=[], metavar="KIND=PATH",
                    help="a prebuilt llama-bench for KIND (native or avx2) instead of building one")
    a = ap.parse_args()
    given = {}
    for spec in a.llama_bench:
        kind, sep, path = spec.partition("=")
        if not sep or kind not in LLAMA_FLAGS or not os.access(path, os.X_OK):
            sys.exit("--llama-bench %s: expected native=PATH or avx2=PATH of an executable" % spec)
        given[kind] = path
    global PROMPT, DECODE
    PROMPT, DECODE = a.prompt, a.decode
    bench = os.path.join(a.build, "tests", "bench_decoder")
    if not os.path.exists(bench):
        sys.exit("%s is missing: build clauseqa first (cmake --build %s)" % (bench, a.build))
    kinds = [a.only] if a.only else ["native", "avx2"]
    exes = {k: given.get(k) or llama_bench(a.llama_dir, k, a.jobs) for k in kinds}
    res = {(who, k): ([], []) for who in ("clauseqa", "llama.cpp") for k in kinds}
    for r in range(a.rounds):
        for k in kinds:
            for who in ("clauseqa", "llama.cpp"):
                if who == "clauseqa":
                    p, d = clauseqa_once(bench, a.model, a.cores, a.threads, k)
                else:
                    p, d = llama_once(exes[k], a.model, a.cores, a.threads)
                res[(who, k)][0].append(p)
                res[(who, k)][1].append(d)
                print("round %d %-9s %-6s prefill %7.1f tok/s  decode %6.1f tok/s" % (r + 1, who, k, p, d),
                      flush=True)
    load = os.getloadavg()
    print()
    print("%d threads on cores %s, %s, %d rounds, load average at the end %.1f / %.1f / %.1f" %
          (a.threads, a.cores, os.path.basename(a.model), a.rounds, *load))
    print("| build | engine | prefill %d tok/s, median (range) | decode after %d tokens, tok/s, median (range) |" %
          (PROMPT, PROMPT))
    print("|---|---|---|---|")
    for k in kinds:
        for who in ("clauseqa", "llama.cpp"):
            p, d = res[(who, k)]
            print("| %s | %s | %s | %s |" % (k, who, cell(p), cell(d)))
    for k in kinds:
        cp, cd = res[("clauseqa", k)]
        lp, ld = res[("llama.cpp", k)]
        print("%s: clauseqa / llama.cpp = prefill x%.2f, decode x%.2f (medians)" %
              (k, statistics.median(cp) / statistics.median(lp), statistics.median(cd) / statistics.median(ld)))


if __name__ == "__main__":
    main()
