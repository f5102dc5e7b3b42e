"""The teacher's vectors, compactly, for the sittings that follow (issue 27): written on the GPU box from
train.py's --teacher-save file, brought back by a few `run` calls (at most 8 files of 16 MiB a call), kept in a
cache outside the repository and read back here.

    python3 tools/teacher/egemma_vectors.py export --teacher T.pt --data DATA --out DIR [--file-mb 15] [--dim 256]
    python3 tools/teacher/egemma_vectors.py check DIR --data DATA     (here: every file there, fingerprints match)

export writes into DIR (every file <= --file-mb MB):
  dev_rank.npz        every dev question of prepare.py (both parts): qi (its row in queries.json "questions"),
                      rank (n, 50) int32 global clause ids, the teacher's 50 nearest among its suite's store clauses
                      (full dimension; -1 pads a suite of fewer clauses), cos (n, 50) float16
  dev_q.npz           qi, vec (n, D) float16: the dev questions' vectors, full dimension
  val_c.<k>.npz       gid, vec float16: every clause of a validation document (full dimension), in pieces
  cache.<kind>.<k>.npz  kind in c, q, h, i; rows first..last of that kind (c: corpus.npz order, i.e. by document;
                      doc_off there cuts them): q8 (rows, --dim) int8 and scale (rows,) float16 of the Matryoshka cut
                      (first --dim coordinates renormalized): vector = q8 * scale
  fingerprint.json    prepare.py's store_sha256 and counts, the teacher's info (tokens.npz sha256, its check), dims

The cache lives outside the repository (docs/SSM.md, "EmbeddingGemma teacher": /var/cache/clauseqa/teacher/<store
sha256 prefix>/). When it is absent or its fingerprint does not match the data, recompute it: the device plan's
teacher step (tools/teacher/device27.sh), from egemma_pack.py's folder.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _save_pieces(out, stem, arrays, rows, file_mb):
    """arrays: {name: array with `rows` rows}; pieces stem.<k>.npz each at most file_mb MB."""
    per_row = sum(a[:1].nbytes for a in arrays.values()) or 1
    step = max(1, int(file_mb * 1e6 * 0.98) // per_row)
    names = []
    for k, s in enumerate(range(0, rows, step)):
        p = os.path.join(out, "%s.%d.npz" % (stem, k))
        np.savez(p, first=np.int64(s), **{n: a[s:s + step] for n, a in arrays.items()})
        names.append(os.path.basename(p))
    return names


def export(a):
    import torch
    d = torch.load(a.teacher, map_location="cuda" if torch.cuda.is_available() else "cpu")
    info = d.get("info", {})
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    z = np.load(os.path.join(a.data, "corpus.npz"))
    doc_off, doc_suite, doc_val = z["doc_off"], z["doc_suite"], z["doc_val"]
    q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))["questions"]
    suites = meta["suites"]
    n_store = meta["n_store_clauses"]
    clause_suite = np.repeat(doc_suite, np.diff(doc_off))
    clause_val = np.repeat(doc_val, np.diff(doc_off)).astype(bool)
    C, Q = d["c"], d["q"]
    os.makedirs(a.out, exist_ok=True)
    files = []
    # dev questions: the teacher's 50 nearest store clauses of their suite, at full dimension
    qi_all, rank_all, cos_all = [], [], []
    for si, suite in enumerate(suites):
        qi = [j for j, x in enumerate(q) if x["src"] == "dev" and x["suite"] == suite]
        gids = np.flatnonzero((clause_suite == si) & (np.arange(len(clause_suite)) < n_store))
        if not qi or not len(gids):
            continue
        cs = C[torch.as_tensor(gids, device=C.device)].float()
        for s in range(0, len(qi), 1024):
            qv = Q[torch.as_tensor(qi[s:s + 1024], device=Q.device)].float()
            sc, ix = (qv @ cs.T).topk(min(50, len(gids)), dim=1)
            r = np.full((len(qv), 50), -1, np.int32)  # -1: a suite of fewer than 50 clauses
            c = np.zeros((len(qv), 50), np.float16)
            r[:, :ix.shape[1]] = gids[ix.cpu().numpy()]
            c[:, :ix.shape[1]] = sc.cpu().numpy()
            rank_all.append(r)
            cos_all.append(c)
        qi_all += qi
    qi_all = np.asarray(qi_all, np.int64)
    np.savez(os.path.join(a.out, "dev_rank.npz"), qi=qi_all, rank=np.concatenate(rank_all),
             cos=np.concatenate(cos_all))
    files.append("dev_rank.npz")
    files += _save_pieces(a.out, "dev_q", {"qi": qi_all, "vec": Q[torch.as_tensor(qi_all, device=Q.device)]
                                           .cpu().numpy().astype(np.float16)}, len(qi_all), a.file_mb)
    vg = np.flatnonzero(clause_val)
    files += _save_pieces(a.out, "val_c", {"gid": vg, "vec": C[torch.as_tensor(vg, device=C.device)].cpu().numpy()
                                           .astype(np.float16)}, len(vg), a.file_mb)
    for kind in ("c", "q", "h", "i"):
        v = d[kind].float()
        v = torch.nn.functional.normalize(v[:, :a.dim], dim=-1)
        scale = v.abs().amax(1).clamp_min(1e-8) / 127.0
        q8 = torch.round(v / scale[:, None]).clamp(-127, 127).to(torch.int8).cpu().numpy()
        files += _save_pieces(a.out, "cache.%s" % kind, {"q8": q8, "scale": scale.cpu().numpy().astype(np.float16)},
                              len(q8), a.file_mb)
    fp = {"store_sha256": meta["store_sha256"], "n_clauses": meta["n_clauses"], "n_store_clauses": n_store,
          "n_questions": meta["n_questions"], "rows": {k: int(d[k].shape[0]) for k in ("c", "q", "h", "i")},
          "full_dim": int(C.shape[1]), "cache_dim": a.dim, "teacher": {k: v for k, v in info.items() if k != "validation"},
          "teacher_validation": info.get("validation"), "files": files}
    json.dump(fp, open(os.path.join(a.out, "fingerprint.json"), "w"), indent=1)
    for f in files + ["fingerprint.json"]:
        print("%-24s %6.1f MB" % (f, os.path.getsize(os.path.join(a.out, f)) / 1e6))


def load_cache(folder, kind):
    """The cache's vectors of one kind as float32 (rows, dim), from its pieces."""
    parts = sorted(glob.glob(os.path.join(folder, "cache.%s.*.npz" % kind)), key=lambda p: int(p.split(".")[-2]))
    if not parts:
        raise FileNotFoundError("no cache.%s.*.npz in %s" % (kind, folder))
    out = []
    for p in parts:
        z = np.load(p)
        out.append(z["q8"].astype(np.float32) * z["scale"].astype(np.float32)[:, None])
    return np.concatenate(out)


def load_pieces(folder, stem):
    """{name: concatenated array} of stem.<k>.npz pieces."""
    parts = sorted(glob.glob(os.path.join(folder, "%s.*.npz" % stem)), key=lambda p: int(p.split(".")[-2]))
    if not parts:
        raise FileNotFoundError("no %s.*.npz in %s" % (stem, folder))
    zs = [np.load(p) for p in parts]
    return {n: np.concatenate([z[n] for z in zs]) for n in zs[0].files if n != "first"}


def check(a):
    fp = json.load(open(os.path.join(a.dir, "fingerprint.json")))
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    bad = [k for k in ("store_sha256", "n_clauses", "n_questions") if fp[k] != meta[k]]
    missing = [f for f in fp["files"] if not os.path.exists(os.path.join(a.dir, f))]
    print("fingerprint: %s; files: %d of %d present" % ("matches the data" if not bad else "DIFFERS in %s" % bad,
                                                         len(fp["files"]) - len(missing), len(fp["files"])))
    if missing:
        print("missing: %s" % " ".join(missing))
    if bad or missing:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--teacher", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--file-mb", type=float, default=15.0)
    e.add_argument("--dim", type=int, default=256)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--data", required=True)
    a = ap.parse_args()
    export(a) if a.cmd == "export" else check(a)


if __name__ == "__main__":
    main()
