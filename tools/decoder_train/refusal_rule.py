#!/usr/bin/env python3
"""Fits the reader's refusal rule (adapter.json "refusal_rule", app/answer.c) on the calibration runs and scores it
on the validation runs, both made with the refusal masked (device_calibrate.sh: `clauseqa eval --refusal-min-p 2
--out`), so that every question's answer and features are on record.

The rule: a generated answer is refused when

    bias + w_refusal_p * refusal_p + w_confidence * confidence + w_key_terms * key_terms / n_key_terms
         + w_key_terms_sentence * key_terms_sentence / n_key_terms + w_verdict * verdict  >=  0

(key_terms: the question's key terms found in the cited clause; key_terms_sentence: in the sentence around the span,
the clause's count for a verdict; verdict: 1 for a yes/no verdict; a question without key terms counts 1 for both
shares). It is a logistic regression on those features: the weights are fitted on the calibration runs with each
suite's classes weighted to their share of the suite's whole train part (refusal_threshold.py's prior) and L2
regularisation, then the bias is moved so that the rule refuses where the fitted probability of "unanswerable" is
at least the threshold that maximises refusal_threshold.py's objective on the calibration runs.

    python3 tools/decoder_train/refusal_rule.py --runs DIR [--fit-tag train-hybrid] [--val-tag val-hybrid]
        [--features refusal_p,confidence,...] [--retrieval DIR] [--json RULE.json]

prints the fitted rule, the calibration curve and, per validation suite, the threshold rule (the adapter's
refusal_min_p chosen by refusal_threshold.py) next to the fitted rule: abstention on unanswerable questions, false
refusals, F1; and the cjrc curve (abstention at false-refusal rates). --json writes the rule as adapter.json takes it.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refusal_threshold as rt  # noqa: E402

FEATURES = ["refusal_p", "confidence", "key_terms", "key_terms_sentence", "verdict", "top_score", "margin",
            "coverage", "cited_top"]


def features(raw, ret=None):
    """The rule's features of one eval line (--out), as the runtime computes them when it decides. Retrieval's
    (top_score: log(1 + the best clause's score), margin: (top-1 - top-2) / top-1, coverage: the question's terms in
    the best clause, cited_top: the answer cites the best clause) come from the line itself when it has them (eval
    since 0978d1b), else from ret, the same question's line of a run with the same retrieval (e.g. `--answers
    extractive` on the CPU)."""
    n = raw.get("n_key_terms", 0) or 0
    kt = raw.get("key_terms", -1)
    ks = raw.get("key_terms_sentence", -1)
    verdict = 1.0 if ("key_terms_sentence" not in raw and kt >= 0) else 0.0
    if ks < 0:
        ks = kt
    x = {"refusal_p": raw.get("refusal_p", 0.0), "confidence": raw.get("confidence", 0.0),
         "key_terms": (max(kt, 0) / n) if n else 1.0, "key_terms_sentence": (max(ks, 0) / n) if n else 1.0,
         "verdict": verdict, "generated": "confidence" in raw}
    ret = ret or {}
    top = raw.get("top") or []
    if not (top and "score" in top[0]):
        top = ret.get("top") or []
    s1 = top[0].get("score", 0.0) if top else 0.0
    s2 = top[1].get("score", 0.0) if len(top) > 1 else 0.0
    x["top_score"] = math.log1p(max(s1, 0.0))
    x["margin"] = (s1 - s2) / s1 if s1 > 0 else 0.0
    x["coverage"] = raw["coverage"] if "coverage" in raw else ret.get("coverage", 0.0)
    x["cited_top"] = 1.0 if raw.get("cited", 0) == 1 else 0.0
    return x


def read_lines(path):
    out = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                out[r["id"]] = r
    return out


def load(runs, tag, questions, retrieval=None):
    suites = rt.load(runs, tag, questions)
    for name, rows in suites.items():
        raw = {}
        with open(os.path.join(runs, "%s.%s.jsonl" % (name, tag)), encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                raw[r["id"]] = r
        ret = read_lines(os.path.join(retrieval, "%s.%s.jsonl" % (name, tag))) if retrieval else {}
        for r in rows:
            r["x"] = features(raw[r["id"]], ret.get(r["id"]))
    return suites


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z > -30 else 0.0


def fit_logistic(X, y, w, l2=1.0, iters=50):
    """Weighted L2-regularised logistic regression by Newton's method (the bias unregularised). X: rows of
    features (already with the bias column first). Returns the coefficients."""
    d = len(X[0])
    beta = [0.0] * d
    for _ in range(iters):
        g = [0.0] * d
        H = [[0.0] * d for _ in range(d)]
        for xi, yi, wi in zip(X, y, w):
            p = sigmoid(sum(b * v for b, v in zip(beta, xi)))
            for a in range(d):
                g[a] += wi * (p - yi) * xi[a]
                for b in range(d):
                    H[a][b] += wi * p * (1 - p) * xi[a] * xi[b]
        for a in range(1, d):
            g[a] += l2 * beta[a]
            H[a][a] += l2
        H[0][0] += 1e-9
        step = solve(H, g)
        beta = [b - s for b, s in zip(beta, step)]
        if max(abs(s) for s in step) < 1e-9:
            break
    return beta


def solve(A, b):
    n = len(b)
    M = [row[:] + [b[i]] for i, row in enumerate(A)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[c][c]:
                f = M[r][c] / M[c][c]
                for k in range(c, n + 1):
                    M[r][k] -= f * M[c][k]
    return [M[i][n] / M[i][i] if M[i][i] else 0.0 for i in range(n)]


class Rule:
    """The rule in the runtime's terms: refuse when bias + sum(weight * feature) >= 0."""

    def __init__(self, bias, weights):
        self.bias, self.weights = bias, weights

    def z(self, x):
        return self.bias + sum(w * x[f] for f, w in self.weights.items())

    def refuses(self, r):
        return r["x"]["generated"] and self.z(r["x"]) >= 0

    def json(self):
        return {"bias": round(self.bias, 6), "weights": {f: round(w, 6) for f, w in self.weights.items()}}


def fit(suites, names, feats, prior_of, l2):
    """The logistic fit on the calibration runs; returns (standardised coefficients mapped back to raw features as
    a Rule with the bias of probability 0.5, the per-suite class weights)."""
    X, y, w = [], [], []
    weights = {}
    for n in names:
        rows = [r for r in suites[n] if r["x"]["generated"]]
        weights[n] = rt.class_weights(suites[n], prior_of(n))
        scale = 1.0 / len(rows) if rows else 0  # every suite counts alike, as in the objective
        for r in rows:
            X.append([r["x"][f] for f in feats])
            y.append(0.0 if r["answerable"] else 1.0)
            w.append(scale * (weights[n][1] if not r["answerable"] else weights[n][0]))
    total = sum(w)
    w = [v * len(w) / total for v in w]
    mean = [sum(wi * x[j] for x, wi in zip(X, w)) / len(w) for j in range(len(feats))]
    sd = [math.sqrt(sum(wi * (x[j] - mean[j]) ** 2 for x, wi in zip(X, w)) / len(w)) or 1.0
          for j in range(len(feats))]
    Z = [[1.0] + [(x[j] - mean[j]) / sd[j] for j in range(len(feats))] for x in X]
    beta = fit_logistic(Z, y, w, l2=l2)
    coef = {f: beta[j + 1] / sd[j] for j, f in enumerate(feats)}
    bias = beta[0] - sum(beta[j + 1] * mean[j] / sd[j] for j in range(len(feats)))
    return Rule(bias, coef), weights


def objective(suites, names, weights, refuse_fn):
    vals = [rt.score(suites[n], None, refuse_fn, weights[n])["score"] for n in names]
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals)


def metrics(rows, refuse_fn):
    """F1 over answerable questions with answers (a refusal scores 0), abstention on unanswerable ones, false
    refusals (the rule's and the pipeline's own abstentions) on answerable ones."""
    f1 = n = n_ans = fa = n_un = ab = 0
    for r in rows:
        refuse = refuse_fn(r) or r["other_abstention"]
        if r["answerable"]:
            n_ans += 1
            fa += refuse
            if r["has_answers"]:
                n += 1
                f1 += 0 if refuse else r["f1"]
        else:
            n_un += 1
            ab += refuse
    return {"n": len(rows), "f1": f1 / n if n else None, "abst": ab / n_un if n_un else None,
            "falseA": fa / n_ans if n_ans else None}


def auc(rows, key):
    pos = [key(r) for r in rows if not r["answerable"]]
    neg = [key(r) for r in rows if r["answerable"]]
    if not pos or not neg:
        return None
    allv = sorted([(v, 1) for v in pos] + [(v, 0) for v in neg])
    rk, i = [0.0] * len(allv), 0
    while i < len(allv):
        j = i
        while j < len(allv) and allv[j][0] == allv[i][0]:
            j += 1
        for k in range(i, j):
            rk[k] = (i + j - 1) / 2 + 1
        i = j
    sp = sum(rk[k] for k in range(len(allv)) if allv[k][1])
    return (sp - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="folder of <suite>.<tag>.jsonl (clauseqa eval --out)")
    ap.add_argument("--fit-tag", default="train-hybrid")
    ap.add_argument("--val-tag", action="append", help="default val-hybrid")
    ap.add_argument("--questions", default="../shared/eval")
    ap.add_argument("--eval", default="../shared/eval", help="the whole suites, for the train part's class mix")
    ap.add_argument("--retrieval", help="folder of <suite>.<tag>.jsonl runs with the same retrieval whose lines carry "
                    "top scores and coverage (for runs whose own lines lack them)")
    ap.add_argument("--features", default="refusal_p,confidence,key_terms,key_terms_sentence,verdict")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--threshold", type=float, help="the threshold rule's t (default: chosen on the fit runs)")
    ap.add_argument("--json", help="write the fitted rule here (adapter.json's refusal_rule)")
    args = ap.parse_args()
    feats = [f for f in args.features.split(",") if f]
    for f in feats:
        if f not in FEATURES:
            sys.exit("refusal_rule: unknown feature %s (known: %s)" % (f, ", ".join(FEATURES)))
    fit_s = load(args.runs, args.fit_tag, args.questions, args.retrieval)
    if not fit_s:
        sys.exit("refusal_rule: no %s/*.%s.jsonl" % (args.runs, args.fit_tag))
    names = sorted(fit_s)
    prior_of = lambda n: rt.train_prior(args.eval, n)  # noqa: E731
    rule, weights = fit(fit_s, names, feats, prior_of, args.l2)
    # the threshold rule's t on the same runs and objective
    grid = rt.GRID  # refusal_threshold.py's choice, as the adapter's refusal_min_p is made
    t_best = max(grid, key=lambda t: objective(fit_s, names, weights, lambda r, t=t: r["p"] >= t))
    t = args.threshold if args.threshold is not None else t_best
    # the rule's operating point: the probability cut maximising the same objective
    p_grid = [i / 100 for i in range(5, 100)] + [1.01]
    best = None
    for pc in p_grid:
        shift = -math.log(pc / (1 - pc)) if pc < 1 else -1e9
        cand = Rule(rule.bias + shift, rule.weights)
        obj = objective(fit_s, names, weights, cand.refuses)
        if best is None or obj > best[1]:
            best = (pc, obj, cand)
    pc, obj, final = best
    print("fit on %s/*.%s (%s): %s" % (args.runs, args.fit_tag, ", ".join(
        "%s %d (%d unanswerable)" % (n, len(fit_s[n]), sum(1 for r in fit_s[n] if not r["answerable"]))
        for n in names), json.dumps(final.json())))
    print("  refuse at P(unanswerable) >= %.2f: objective %.4f; threshold rule t %.2f: objective %.4f"
          % (pc, obj, t_best, objective(fit_s, names, weights, lambda r: r["p"] >= t_best)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(final.json(), f, indent=1)
    for tag in args.val_tag or ["val-hybrid"]:
        val = load(args.runs, tag, args.questions, args.retrieval)
        print("validation %s: threshold rule (t %.2f) | fitted rule" % (tag, t))
        for n in sorted(val):
            a = metrics(val[n], lambda r: r["p"] >= t)
            b = metrics(val[n], final.refuses)
            print("  %-17s n %5d  abst %s falseA %s F1 %s | abst %s falseA %s F1 %s" % (
                n, a["n"], rt.fmt(a["abst"]), rt.fmt(a["falseA"]), rt.fmt(a["f1"]), rt.fmt(b["abst"]),
                rt.fmt(b["falseA"]), rt.fmt(b["f1"])))
        for n in sorted(val):
            rows = val[n]
            if not any(not r["answerable"] for r in rows):
                continue
            print("  %s AUC: refusal_p %.3f, rule %.3f; each feature (higher = more often unanswerable): %s"
                  % (n, auc(rows, lambda r: r["p"]), auc(rows, lambda r: final.z(r["x"])), ", ".join(
                      "%s %.3f" % (f, auc(rows, lambda r, f=f: r["x"][f])) for f in feats)))
            # abstention at fixed false-refusal rates (what the target asks)
            for target in (0.05, 0.08, 0.15):
                for label, key in (("refusal_p", lambda r: r["p"]), ("rule", lambda r: final.z(r["x"]))):
                    neg = sorted((key(r) for r in rows if r["answerable"]), reverse=True)
                    cut = neg[int(target * len(neg))] if neg else 0
                    pos = [key(r) for r in rows if not r["answerable"]]
                    print("    at %2.0f %% false refusals (%s > %.3f): %.1f %% of unanswerable refused"
                          % (100 * target, label, cut, 100.0 * sum(v > cut for v in pos) / len(pos)))


if __name__ == "__main__":
    main()
