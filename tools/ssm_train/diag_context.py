"""Issue 14's laws-zh collapse: does a trained encoder lose the right clause when it reads a whole long document (as
ingest does) instead of the <= --window-token windows it trained on? CPU-sized:

    python3 tools/ssm_train/diag_context.py --data D --weights RUN1 [RUN2 ...] [--suite laws-zh] [--split train]
        [--questions 150] [--others 100] [--window 512]

For --questions dev questions of the suite (a fixed sample), a small corpus of their gold documents plus --others
random documents of the suite is encoded three ways:
  whole    each document from a fresh state, in one pass (what `clauseqa ingest` stores);
  windows  the document cut into consecutive runs of clauses of <= --window tokens, each read from a fresh state
           behind the document's first clause (what train.py's windows look like);
  alone    each clause alone (BOS SEP clause).
and reports dense hit@1/5/10 over that corpus, hit@5 within the gold document only (the right article once the
law is right), the position of the gold clause in its document (tokens), hit@5 by that position, and the mean
cosine of random clause pairs (how spread the vectors are) for each way.
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as tm  # noqa: E402
import train  # noqa: E402


def load_model(folder, data):
    cfg = json.load(open(os.path.join(folder, "ssm.json")))
    c = tm.Config(**{k: v for k, v in cfg.items() if k in (
        "vocab_size", "d_model", "n_layer", "d_state", "d_conv", "expand", "dt_rank", "d_embed", "bidirectional",
        "norm_eps", "tokenizer", "token_embd_dim", "token_table_id")})
    m = tm.SSMEncoder(c)
    if c.external:
        rows = np.load(os.path.join(data.dir, "table.gemma3.npy"))
        m.embedding.set_table(torch.as_tensor(data.ids, dtype=torch.long), torch.from_numpy(rows))
    from safetensors.torch import load_file
    m.load_state_dict({k: v.float() for k, v in load_file(os.path.join(folder, "ssm.safetensors")).items()})
    return m.eval()


def encode_ways(m, data, docs, window, ways, device, batch_tokens=60000):
    """{way: (n_clauses, E) vectors} for the clauses of docs (global ids)."""
    out = {w: torch.zeros(data.n_clauses, m.c.d_embed) for w in ways}
    seqs = {"whole": [], "windows": [], "alone": []}   # (clause gids, clause token lists)
    for dd in docs:
        a, b = int(data.doc_off[dd]), int(data.doc_off[dd + 1])
        gids = list(range(a, b))
        cls = [data.clause(g).tolist() for g in gids]
        seqs["whole"].append((gids, cls, 0))
        i = 0
        while i < len(gids):
            j, tot = i, 1 + (data.clen(a) if i > 0 else 0)
            while j < len(gids) and (j == i or tot + data.clen(gids[j]) <= window):
                tot += data.clen(gids[j])
                j += 1
            ids = ([a] if i > 0 else []) + gids[i:j]   # the first clause in front: context only
            seqs["windows"].append((ids, [data.clause(g)[:train.MAX_CLAUSE].tolist() for g in ids], int(i > 0)))
            i = j
        for g, c in zip(gids, cls):
            seqs["alone"].append(([g], [c], 0))
    with torch.no_grad():
        for way, items in seqs.items():
            if way not in ways:
                continue
            print("  encoding %s: %d sequences" % (way, len(items)), file=sys.stderr, flush=True)
            items = sorted(items, key=lambda x: sum(len(c) + 1 for c in x[1]))
            k = 0
            while k < len(items):
                n, longest = 0, 0
                while k + n < len(items):
                    ln = sum(len(c) + 1 for c in items[k + n][1]) + 1
                    if n and max(longest, ln) * (n + 1) > batch_tokens:
                        break
                    longest = max(longest, ln)
                    n += 1
                part = items[k:k + n]
                vs = tm.encode_documents(m, [p[1] for p in part], device)
                for (ids, _, drop), v in zip(part, vs):
                    out[way][torch.as_tensor(ids[drop:])] = v[drop:].float().cpu()
                k += n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--weights", nargs="+", required=True)
    ap.add_argument("--tokenizer", default="gemma3")
    ap.add_argument("--suite", default="laws-zh")
    ap.add_argument("--split", default="train")
    ap.add_argument("--type", default="semantic")
    ap.add_argument("--questions", type=int, default=150)
    ap.add_argument("--others", type=int, default=100)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--ways", default="whole,windows,alone")
    ap.add_argument("--max-doc-tokens", type=int, default=0, help="only questions whose gold document is at most "
                    "this long (a CPU-sized sample; 0: any)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = train.Data(args.data, args.tokenizer)
    rng = random.Random(args.seed)
    si = data.suites.index(args.suite)
    qs = [(j, q) for j, q in enumerate(data.q["questions"]) if q["src"] == "dev" and q["suite"] == args.suite
          and q["split"] == args.split and q["type"] == args.type]
    if args.max_doc_tokens:
        def doc_tokens(g):
            dd = int(data.clause_doc[g])
            return int(data.cl_off[data.doc_off[dd + 1]] - data.cl_off[data.doc_off[dd]])
        qs = [(j, q) for j, q in qs if max(doc_tokens(g) for g in q["pos"]) <= args.max_doc_tokens]
    qs = rng.sample(qs, min(args.questions, len(qs)))
    gold_docs = sorted(set(int(data.clause_doc[g]) for _, q in qs for g in q["pos"]))
    pool = [dd for dd in np.flatnonzero(data.doc_suite == si).tolist() if dd not in gold_docs]
    docs = sorted(gold_docs + rng.sample(pool, min(args.others, len(pool))))
    cl = np.concatenate([np.arange(data.doc_off[dd], data.doc_off[dd + 1]) for dd in docs])
    tokpos = {}
    for dd in gold_docs:
        p = 1
        for g in range(int(data.doc_off[dd]), int(data.doc_off[dd + 1])):
            tokpos[g] = p
            p += int(data.cl_off[g + 1] - data.cl_off[g]) + 1
    gpos = np.asarray([tokpos[q["pos"][0]] for _, q in qs])
    print("%s %s/%s: %d questions, %d gold documents + %d others = %d clauses, %d tokens; gold clause position in its "
          "document (tokens): median %d, p25 %d, p75 %d, > %d: %.2f" % (
              args.suite, args.split, args.type, len(qs), len(gold_docs), len(docs) - len(gold_docs), len(cl),
              int(sum(data.cl_off[g + 1] - data.cl_off[g] + 1 for g in cl)), np.median(gpos),
              np.percentile(gpos, 25), np.percentile(gpos, 75), args.window, (gpos > args.window).mean()),
          flush=True)
    for w in args.weights:
        m = load_model(w, data).to(args.device)
        with torch.no_grad():
            qv = tm.encode_queries(m, [data.text_tokens("q", j)[:train.MAX_QUERY].tolist() for j, _ in qs],
                                   args.device).float().cpu()
        vecs = encode_ways(m, data, docs, args.window, args.ways.split(","), args.device)
        res = {}
        for way, V in vecs.items():
            C = V[torch.as_tensor(cl)]
            sims = qv @ C.T
            top = sims.topk(10, dim=1).indices.numpy()
            h1 = h5 = h10 = within5 = 0
            near5 = far5 = nnear = nfar = 0
            for r, (j, q) in enumerate(qs):
                pos = set(q["pos"])
                ranked = cl[top[r]].tolist()
                rank = next((k + 1 for k, g in enumerate(ranked) if g in pos), 99)
                h1 += rank <= 1
                h5 += rank <= 5
                h10 += rank <= 10
                dd = int(data.clause_doc[q["pos"][0]])
                a, b = int(data.doc_off[dd]), int(data.doc_off[dd + 1])
                s = (qv[r] @ V[a:b].T).topk(min(5, b - a)).indices.numpy() + a
                within5 += bool(pos & set(s.tolist()))
                if gpos[r] > args.window:
                    nfar += 1
                    far5 += rank <= 5
                else:
                    nnear += 1
                    near5 += rank <= 5
            n = len(qs)
            g = torch.Generator().manual_seed(0)
            i1 = torch.randint(len(cl), (4000,), generator=g)
            i2 = torch.randint(len(cl), (4000,), generator=g)
            spread = (C[i1] * C[i2]).sum(1).mean().item()
            res[way] = {"hit@1": round(h1 / n, 3), "hit@5": round(h5 / n, 3), "hit@10": round(h10 / n, 3),
                        "within_doc_hit@5": round(within5 / n, 3),
                        "hit@5_gold_within_window": round(near5 / max(1, nnear), 3), "n_within": nnear,
                        "hit@5_gold_beyond_window": round(far5 / max(1, nfar), 3), "n_beyond": nfar,
                        "mean_cos_random_pairs": round(spread, 3)}
        steps = json.load(open(os.path.join(w, "ssm.json"))).get("manifest", {}).get("steps_done")
        print(json.dumps({"weights": w, "steps": steps, "ways": res}), flush=True)


if __name__ == "__main__":
    main()
