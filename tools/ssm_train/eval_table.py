"""Prints the Markdown table of docs/EVAL.md's issue-6 section from `clauseqa eval --json` outputs named
DIR/<suite>.<tag>.<mode>.json (mode with ',' written as '_'), e.g. build/evout/cuad-dev.D.router_bm25.json.

    python3 tools/ssm_train/eval_table.py build/evout D [--manifest data/models/ssm/ssm.json]

--manifest also records the same numbers in the weights' manifest ("validation_clauseqa_eval"), beside the
training-side scores.
"""
import json
import os
import sys

MODES = [("bm25", "bm25"), ("router_bm25", "router,bm25 (default)"), ("dense", "dense"),
         ("bm25_dense", "bm25+dense"), ("router_bm25_dense", "router,bm25,dense")]
SUITES = ["laws-zh-sub", "laws-zh", "policy-zh-dev", "cjrc-dev", "cuad-dev", "contracts-en-dev"]


def main():
    args = [a for a in sys.argv[1:] if a != "--manifest"]
    manifest = args.pop() if "--manifest" in sys.argv else None
    d, tag = args[0], args[1] if len(args) > 1 else "D"
    record = {}
    print("| suite | type | n | mode | hit@1 | hit@5 | hit@10 | MRR |")
    print("|---|---|---|---|---|---|---|---|")
    for s in SUITES:
        for m, label in MODES:
            p = os.path.join(d, "%s.%s.%s.json" % (s, tag, m))
            if not os.path.exists(p) or not os.path.getsize(p):
                continue
            r = json.load(open(p))
            rows = list(r["types"].items())
            for t, a in rows:
                record["%s/%s/%s" % (s, t, label.split(" ")[0])] = {
                    "n": a["retrieval_questions"], **{k: round(a[k], 4) for k in ("hit@1", "hit@5", "hit@10", "mrr")}}
                print("| %s | %s | %d | %s | %.3f | %.3f | %.3f | %.3f |" % (s, t, a["retrieval_questions"], label,
                      a["hit@1"], a["hit@5"], a["hit@10"], a["mrr"]))

    if manifest:
        cfg = json.load(open(manifest))
        cfg["manifest"]["validation_clauseqa_eval"] = {
            "how": "clauseqa eval on the validation questions (tools/ssm_train/val_suites.py), BF16 weights, "
                   "fast CPU backend; laws-zh-sub = gold documents + 300 sampled laws-zh documents",
            "scores": record}
        with open(manifest, "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
