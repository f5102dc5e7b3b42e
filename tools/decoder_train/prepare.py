#!/usr/bin/env python3
"""Builds the decoder adapter's training and validation examples (issue 13), here on the CPU; plain Python 3.

Three tasks in prompt format cq-prompt-v1 (docs/ANSWERS.md, cqprompt.py), written as text examples
{"id", "source", "task", "lang", "prompt", "completion", "meta"}:

  answer       passages + question -> the shortest reference answer found verbatim in a shown (flattened) passage,
               是/否 ( Yes/ No) for yes/no questions
  abstain      the suites' unanswerable questions (their own document's clauses shown) -> 无法回答 / Cannot be answered
  abstain_syn  answerable questions paired with retrieved-but-wrong passages (other documents, none holding any
               reference answer; for --syn-same-doc of them the gold document's own other clauses first, those
               holding no reference answer) -> the refusal
  relevance    (question, one clause) -> 是/否 ( yes/ no): gold clauses against BM25/router-retrieved non-gold ones,
               balanced per question
  abstain_heldout  held-out-document unanswerables (issue 26): a train-part question whose own documents are NOT in
               the KB -> the refusal; the passages are what `clauseqa retrieve` finds in a KB of the suite's other
               TRAIN documents (--heldout-share of the train documents held out per round, --heldout-rounds rounds
               per suite, the rounds disjoint), none holding a reference answer

Passages are what the app shows: `clauseqa retrieve --jsonl --mode router,bm25` over knowledge bases ingested by
`clauseqa ingest` (one KB per suite, in --data; made when missing). When the retrieved passages do not show an
answer, the gold clause (from the KB's own clause table) is put in among them at a varied position (cut around the
answer when the answer lies past the 800-character budget).

Leaks: a train example never shows a passage of a validation or calibration document (retrieval runs over the whole
suite, as a user's KB; those passages are dropped from the lists the train examples are made of) and never comes from
a validation or calibration question; leak_problems() checks every example before anything is written.

Sources: the dev suites' TRAIN parts only (tools/dev_split.py, by document): cjrc-dev, cmrc-dev, policy-zh-dev,
cuad-dev, contracts-en-dev (answer/abstain/relevance), laws-zh (relevance); ../shared/train: cail2019_rc_trainsample
and c3_train_extractive (answer/abstain: their contexts are ingested as documents of their own KBs, so the structure
parser cuts them into passages exactly as a user's upload), lawyer_llama_query2article (relevance, retrieval over the
laws-zh KB) and cail2021_argpair_retrieval (relevance, its own hard negatives). --licensed-only keeps the sets whose
license allows a product (cmrc-dev, cuad-dev, contracts-en-dev, laws-zh).

Validation (from the suites' VALIDATION parts, retrieval as at run time, nothing inserted): val_answer.jsonl (answer
prompts with the shown flattened passages for the copy constraint, reference answers, answerable) and
val_rerank.jsonl (each question's retrieved candidates as relevance prompts, and which are gold). Calibration
(cal_answer.jsonl, the same form): questions of the dev suites' calibration part (tools/dev_split.py: a fifth of the
TRAIN documents, held out of every training task here), on which train.py chooses the refusal threshold.

  python3 tools/decoder_train/prepare.py --clauseqa build/clauseqa --data /tmp/dectrain-data --out .device/dec_data
Then tools/decoder_train/pack.py tokenizes (needs transformers + gguf) and bundle.sh packs for the GPU box.
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import cqprompt as P  # noqa: E402
import dev_split  # noqa: E402
import heldout_unans  # noqa: E402

ANSWER_SUITES = ["cjrc-dev", "cmrc-dev", "policy-zh-dev", "cuad-dev", "contracts-en-dev"]
RELEVANCE_SUITES = ANSWER_SUITES + ["laws-zh"]
AUX_QA = ["cail2019_rc_trainsample", "c3_train_extractive"]
AUX_REL = ["lawyer_llama_query2article", "cail2021_argpair_retrieval"]
DOC_SUITE = {"lawyer_llama_query2article": "laws-zh"}   # sources whose passages are documents of a dev suite
HELDOUT_ROUNDS = "cjrc-dev=1,cmrc-dev=1,policy-zh-dev=2,cuad-dev=5,contracts-en-dev=5"

# name -> (license, licensed for a product?)
LICENSES = {
    "cjrc-dev": ("CAIL2019 reading comprehension (CJRC) competition data, no license file: research use", False),
    "cmrc-dev": ("CMRC 2018: CC BY-SA 4.0", True),
    "policy-zh-dev": ("DataFountain 2020 NCPPolicies competition data, no license: research use only", False),
    "cuad-dev": ("CUAD v1: CC BY 4.0 (contracts: public EDGAR filings)", True),
    "contracts-en-dev": ("LegalBench-RAG copies of ContractNLI (CC BY 4.0) and PrivacyQA (MIT)", True),
    "laws-zh": ("laws: public domain (PRC Copyright Law art. 5); LawBench Apache-2.0; LeCoQA MIT", True),
    "cail2019_rc_trainsample": ("CAIL2019 competition data, no license: research use", False),
    "c3_train_extractive": ("C3: non-commercial research purpose only", False),
    "lawyer_llama_query2article": ("lawyer-llama: Apache-2.0 repository, 'academic research only' (questions from the "
                                   "PKU legal-consultation data; the cited articles are public-domain law)", False),
    "cail2021_argpair_retrieval": ("CAIL2021 competition data, no license: research use", False),
}

K_RETRIEVE = 12      # retrieved per question (the answer prompt uses the first 8, as `--k 8`)
K_ANSWER = 8
K_RERANK = 8         # candidates of a validation question for the rerank check
MAX_SPAN = {"zh": 300, "en": 600}   # longest target span (characters)
MIN_CLAUSE_SPAN = 25                # clause_extraction: shorter gold snippets only when there is no longer one
K_WRONG = 20                        # BM25 pool for the wrong passages of abstain_syn
INSERT_POS_WEIGHTS = [0.35, 0.3, 0.2, 0.15]
SENT_END = set("。；;！？!?.\n")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def read_jsonl(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


# ---------------------------------------------------------------- clauseqa: KBs, retrieval, clause tables

class Store:
    def __init__(self, clauseqa, data, work):
        self.cq, self.data, self.work = clauseqa, data, work
        self.db = os.path.join(data, "clauseqa.db")
        self._clauses = {}

    def n_docs(self, kb):
        if not os.path.exists(self.db):
            return 0
        c = sqlite3.connect(self.db)
        try:
            r = c.execute("SELECT count(*) FROM documents d JOIN kbs k ON d.kb_id = k.id WHERE k.name = ?",
                          (kb,)).fetchone()
            return r[0] if r else 0
        except sqlite3.OperationalError:
            return 0
        finally:
            c.close()

    def ensure(self, kb, docs_dir):
        """Ingests docs_dir into kb unless kb already holds (about) as many documents: identical files are kept once
        (cjrc-dev has 1, policy-zh-dev 5), so 2 % fewer pass; ingest skips what is there, so a second run only adds
        what is missing."""
        n_files = len([f for f in os.listdir(docs_dir) if not f.startswith(".")])
        have = self.n_docs(kb)
        if have and have >= 0.98 * n_files:
            return
        log("ingest %s <- %s" % (kb, docs_dir))
        r = subprocess.run(["nice", "-n", "10", self.cq, "ingest", "--data", self.data, "--kb", kb, docs_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if not self.n_docs(kb):
            sys.exit("prepare: ingest of %s failed: %s" % (kb, r.stderr[-2000:]))

    def retrieve(self, kb, questions, k=K_RETRIEVE, mode="router,bm25"):
        """{question id: [passage dict]} for [(id, question)], cached in WORK/retrieve/."""
        key = hashlib.sha256(json.dumps([kb, k, mode, self.n_docs(kb), questions], ensure_ascii=False)
                             .encode()).hexdigest()[:16]
        cache = os.path.join(self.work, "retrieve", "%s-%s.jsonl" % (kb, key))
        if not os.path.exists(cache):
            log("retrieve %s: %d questions" % (kb, len(questions)))
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            inp = "".join(json.dumps({"id": i, "question": q}, ensure_ascii=False) + "\n" for i, q in questions)
            r = subprocess.run(["nice", "-n", "10", self.cq, "retrieve", "--data", self.data, "--kb", kb, "--jsonl",
                                "--mode", mode, "--k", str(k)], input=inp, capture_output=True, text=True)
            if r.returncode:
                sys.exit("prepare: retrieve over %s failed: %s" % (kb, r.stderr[-2000:]))
            with open(cache + ".tmp", "w", encoding="utf-8") as f:
                f.write(r.stdout)
            os.replace(cache + ".tmp", cache)
        out = {}
        for row in read_jsonl(cache):
            out[row["id"]] = [passage(x["doc"], x.get("title"), x.get("clause"), x["text"], x.get("page"))
                              for x in row.get("results") or []]
        return out

    def clauses(self, kb):
        """{doc name: [passage dict in clause order]} of a KB (the clause texts ingest made)."""
        if kb not in self._clauses:
            c = sqlite3.connect(self.db)
            docs = defaultdict(list)
            for name, title, label, text, page in c.execute(
                    "SELECT d.name, d.title, c.label, c.text, c.page_first FROM clauses c JOIN documents d ON "
                    "c.doc_id = d.id JOIN kbs k ON d.kb_id = k.id WHERE k.name = ? ORDER BY d.id, c.ord", (kb,)):
                docs[name].append(passage(name, title, label, text, page or None))
            c.close()
            self._clauses[kb] = dict(docs)
        return self._clauses[kb]


def passage(doc, title, label, text, page=None):
    return {"doc": doc, "title": title or doc, "label": label or None, "text": text, "page": page}


def same(a, b):
    return a["doc"] == b["doc"] and a["text"] == b["text"]


def hits_any(p, gold):
    return any(P.is_hit(p["doc"], p["text"], p["page"], g) for g in gold)


# ---------------------------------------------------------------- auxiliary QA sets as suites

def build_aux_suite(name, rows, root):
    """Writes ROOT/name/docs/<n>.txt (one per distinct context) and questions.jsonl in shared/eval's format."""
    d = os.path.join(root, name)
    qpath = os.path.join(d, "questions.jsonl")
    ctx_ids = {}
    for r in rows:
        ctx_ids.setdefault(r["context"], str(len(ctx_ids) + 1))
    os.makedirs(os.path.join(d, "docs"), exist_ok=True)
    for ctx, n in ctx_ids.items():
        p = os.path.join(d, "docs", n + ".txt")
        if not os.path.exists(p):
            with open(p, "w", encoding="utf-8") as f:
                f.write(ctx)
    qs = []
    for r in rows:
        doc = ctx_ids[r["context"]]
        answers = list(r.get("answers") or [])
        if not r.get("answerable", True):
            qs.append({"id": r["id"], "question": r["question"], "type": "span_qa", "answerable": False,
                       "gold": [{"doc": doc, "clause": None, "page": None, "text": None}], "answers": []})
        elif answers and answers[0] in ("YES", "NO"):
            qs.append({"id": r["id"], "question": r["question"], "type": "yes_no", "answerable": True,
                       "gold": [{"doc": doc, "clause": None, "page": None, "text": None}], "answers": answers[:1]})
        else:
            qs.append({"id": r["id"], "question": r["question"], "type": "span_qa", "answerable": True,
                       "gold": [{"doc": doc, "clause": None, "page": None, "text": a} for a in answers],
                       "answers": answers})
    with open(qpath, "w", encoding="utf-8") as f:
        for q in qs:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return d, qs


# ---------------------------------------------------------------- example builders

class Builder:
    def __init__(self, args, store, rng):
        self.args, self.store, self.rng = args, store, rng
        self.train, self.val_answer, self.val_rerank, self.cal_answer = [], [], [], []
        self.counts = Counter()
        self.skips = Counter()

    def add(self, source, task, qid, lang, prompt, completion, meta=None, shown=()):
        """One train example; meta["docs"] names the documents of the passages given to the prompt (shown), for
        leak_problems()."""
        meta = dict(meta or {})
        meta["docs"] = sorted({p["doc"] for p in shown})
        self.train.append({"id": qid, "source": source, "task": task, "lang": lang, "prompt": prompt,
                           "completion": completion, "meta": meta})
        self.counts[(source, task)] += 1

    # -- helpers

    def refs_of(self, q, lang):
        refs = [a for a in q.get("answers") or [] if a and a not in ("YES", "NO")]
        if not refs and q.get("type") == "clause_extraction":   # contracts-en: no short answers, the gold snippets
            refs = [g["text"] for g in q.get("gold") or [] if g.get("text")]
        refs = [P.trim(P.flatten(a)) for a in refs]
        refs = sorted({a for a in refs if a and len(a) <= MAX_SPAN[lang]}, key=lambda a: (len(a), a))
        if q.get("type") == "clause_extraction" and any(len(a) >= MIN_CLAUSE_SPAN for a in refs):
            refs = [a for a in refs if len(a) >= MIN_CLAUSE_SPAN]   # not a heading fragment such as "3.1 EFCA shall:"
        return refs

    def find_target(self, flat_text, refs):
        for a in refs:   # shortest first
            s = P.find_verbatim(flat_text, a)
            if s:
                return s
        return None

    def shown_target(self, L, refs, only=None):
        """(target span, passage index) of the shortest reference found in a shown passage (only in `only`)."""
        _, flat = P.answer_prompt("x", L)
        best = None
        for i, ft in flat:
            if only is not None and i not in only:
                continue
            t = self.find_target(ft, refs)
            if t and (best is None or len(t) < len(best[0])):
                best = (t, i)
        return best

    def window(self, p, target):
        """p, cut to at most 800 characters around `target` when it lies past the first 800."""
        ft = P.flatten(p["text"])
        k = ft.find(target)
        if k < 0 or k + len(target) <= P.ANSWER_CHARS:
            return p
        lo = max(0, k + len(target) - P.ANSWER_CHARS)
        start = self.rng.randint(lo, k)
        for j in range(start, min(k, start + 80)):   # start after a sentence end when one is near
            if j > 0 and p["text"][j - 1] in SENT_END:
                start = j
                break
        q = dict(p)
        q["text"] = p["text"][start:start + P.ANSWER_CHARS]
        return q

    def insert(self, L, g, check):
        """L with passage g put in at a varied position where it is shown and check(shown flat text) holds."""
        L = [p for p in L if not same(p, g)]
        pos = self.rng.choices(range(len(INSERT_POS_WEIGHTS)), INSERT_POS_WEIGHTS)[0]
        pos = min(pos, len(L))
        while pos >= 0:
            M = L[:pos] + [g] + L[pos:]
            _, flat = P.answer_prompt("x", M)
            for i, ft in flat:
                if i == pos and check(ft):
                    return M, pos
            pos -= 1
        return None, None

    def overlap_clause(self, clauses, question):
        qs = {c for c in question if P.is_cjk(ord(c)) or c.isalnum()}
        return max(clauses, key=lambda p: len(qs & set(p["text"])))

    # -- answer / abstain of one dev or aux QA question (train part)

    def same_doc_wrong(self, q, clauses, gdocs, nrefs):
        """The gold documents' clauses that hold no reference answer (nor a number of one), best word overlap with
        the question first: similar text from the same case / article that does not answer."""
        digits = set()
        for r in nrefs:
            cur = ""
            for ch in r + " ":
                if ch.isdigit():
                    cur += ch
                elif cur:
                    digits.add(cur)
                    cur = ""
        qs = {c for c in q["question"] if P.is_cjk(ord(c)) or c.isalnum()}
        out = []
        for d in sorted(gdocs):
            for p in clauses.get(d, []):
                t = P.norm(p["text"])
                if any(r and r in t for r in nrefs) or any(x in t for x in digits):
                    continue
                out.append(p)
        out.sort(key=lambda p: -len(qs & set(p["text"])))
        return out[:2]

    def qa_train(self, source, kb, q, cands, pool=()):
        lang = P.lang_of(q["question"])
        clauses = self.store.clauses(kb)
        gold = q.get("gold") or []
        gdocs = {g["doc"] for g in gold if g.get("doc")}
        L = list(cands[:K_ANSWER])
        qtype = q.get("type")
        if not q.get("answerable", True) or qtype == "yes_no":
            doc_clauses = [p for d in sorted(gdocs) for p in clauses.get(d, [])]
            if not doc_clauses:
                self.skips[(source, "gold doc not in KB")] += 1
                return
            _, flat = P.answer_prompt("x", L)
            inserted = None
            if not any(L[i]["doc"] in gdocs for i, _ in flat):
                g = self.overlap_clause(doc_clauses, q["question"])
                M, inserted = self.insert(L, g if len(g["text"]) <= P.ANSWER_CHARS else dict(g, text=g["text"][:P.ANSWER_CHARS]),
                                          lambda ft: True)
                if M is None:
                    self.skips[(source, "no room")] += 1
                    return
                L = M
            prompt, _ = P.answer_prompt(q["question"], L, lang)
            meta = {"qid": q["id"], "inserted": inserted}
            if not q.get("answerable", True):
                self.add(source, "abstain", q["id"], lang, prompt, P.answer_completion(lang, refuse=True), meta, L)
            else:
                verdict = (q.get("answers") or ["YES"])[0] == "YES"
                self.add(source, "answer", q["id"], lang, prompt, P.answer_completion(lang, verdict=verdict),
                         dict(meta, verdict=verdict), L)
            return
        refs = self.refs_of(q, lang)
        if not refs:
            self.skips[(source, "no usable reference answer")] += 1
            return
        self.answer_variants(source, kb, q, lang, refs, L, cands, gold, gdocs, clauses)
        # abstain_syn: the question over retrieved passages of other documents that hold no reference answer
        if self.rng.random() < self.args.syn_rate[lang]:
            nrefs = [P.norm(a) for a in refs + list(q.get("answers") or [])]
            W = []
            if self.rng.random() < self.args.syn_same_doc:
                W = [dict(p, text=p["text"][:P.ANSWER_CHARS]) for p in self.same_doc_wrong(q, clauses, gdocs, nrefs)]
            kind = "same_doc" if W else "other_docs"
            for p in list(cands) + list(pool):
                if (p["doc"] not in gdocs and not any(same(p, x) for x in W) and
                        not any(r and r in P.norm(p["text"]) for r in nrefs)):
                    W.append(p)
            if W:
                prompt, _ = P.answer_prompt(q["question"], W[:K_ANSWER], lang)
                self.add(source, "abstain_syn", q["id"] + "#wrong", lang, prompt,
                         P.answer_completion(lang, refuse=True), {"qid": q["id"], "kind": kind}, W[:K_ANSWER])
                self.counts[(source, "abstain_syn_" + kind)] += 1
            else:
                self.skips[(source, "abstain_syn: no wrong passages")] += 1

    def answer_variants(self, source, kb, q, lang, refs, L, cands, gold, gdocs, clauses):
        n_var = self.args.en_variants if lang == "en" else 1
        done = set()
        for v in range(n_var):
            M = list(L)
            gold_idx = {i for i, p in enumerate(M) if hits_any(p, gold)}
            found = self.shown_target(M, refs, only=gold_idx)
            inserted = None
            if v > 0 or not found:
                # the gold clause from the KB: the one holding the shortest reference
                best = None
                for d in sorted(gdocs):
                    for p in clauses.get(d, []):
                        t = self.find_target(P.flatten(p["text"]), refs)
                        if t and (best is None or len(t) < len(best[1])):
                            best = (p, t)
                if best is None:
                    if v > 0:
                        break
                    if v == 0:
                        found = self.shown_target(M, refs)   # a shown non-gold passage holding a reference
                        if not found:
                            self.skips[(source, "reference not in any gold clause")] += 1
                            return
                else:
                    g, t = best
                    g = self.window(g, t)
                    if v > 0:   # a variant: the gold among other retrieved passages, at another position
                        M = [p for p in M if not same(p, best[0]) and not hits_any(p, gold)]
                        self.rng.shuffle(M)
                    M2, inserted = self.insert(M, g, lambda ft: P.find_verbatim(ft, t) is not None)
                    if M2 is None:
                        self.skips[(source, "no room")] += 1
                        continue
                    M = M2
                    found = self.shown_target(M, refs, only={inserted})
                    if not found:
                        self.skips[(source, "target lost")] += 1
                        continue
            target = found[0]
            prompt, _ = P.answer_prompt(q["question"], M, lang)
            if prompt in done:
                continue
            done.add(prompt)
            self.add(source, "answer", q["id"] + ("" if v == 0 else "#v%d" % v), lang, prompt,
                     P.answer_completion(lang, span=target),
                     {"qid": q["id"], "inserted": inserted, "passage": found[1]}, M)

    # -- held-out-document unanswerables (issue 26)

    def heldout_train(self, source, q, cands, held, rnd):
        """The question over passages retrieved from a KB that lacks its own documents (held): the refusal. Passages of
        a held-out document (none expected: they are not in that KB) and those holding a reference answer (another
        copy of the text) are dropped; no passage left: skipped."""
        lang = P.lang_of(q["question"])
        nrefs = [P.norm(a) for a in self.refs_of(q, lang) + [a for a in q.get("answers") or []
                                                               if a and a not in ("YES", "NO")]]
        L = [p for p in cands if p["doc"] not in held and not any(r and r in P.norm(p["text"]) for r in nrefs)]
        if not L:
            self.skips[(source, "abstain_heldout: no passage left")] += 1
            return
        prompt, flat = P.answer_prompt(q["question"], L[:K_ANSWER], lang)
        self.add(source, "abstain_heldout", "%s#heldout%d" % (q["id"], rnd), lang, prompt,
                 P.answer_completion(lang, refuse=True),
                 {"qid": q["id"], "kind": "heldout", "round": rnd, "heldout": sorted(heldout_unans.gold_docs(q))},
                 [L[i] for i, _ in flat])

    # -- relevance of one question

    def relevance_train(self, source, q, cands, gold_passages, max_pairs, is_pos):
        lang = P.lang_of(q["question"])
        pos = [p for p in cands if is_pos(p)]
        neg = [p for p in cands if not is_pos(p)]
        if not pos:
            pos = gold_passages
        if not pos or not neg:
            self.skips[(source, "relevance: no positive or no negative")] += 1
            return
        n = min(max_pairs, len(pos), len(neg))
        for j, p in enumerate(self.rng.sample(pos, n)):
            self.add(source, "relevance", "%s#r%d+" % (q["id"], j), lang, P.relevance_prompt(q["question"], p, lang),
                     P.RELEVANT[(lang, True)], {"qid": q["id"]}, [p])
        for j, p in enumerate(self.rng.sample(neg[:max(5, n)], n)):
            self.add(source, "relevance", "%s#r%d-" % (q["id"], j), lang, P.relevance_prompt(q["question"], p, lang),
                     P.RELEVANT[(lang, False)], {"qid": q["id"]}, [p])

    # -- validation

    def qa_val(self, source, q, cands):
        lang = P.lang_of(q["question"])
        prompt, flat = P.answer_prompt(q["question"], cands[:K_ANSWER], lang)
        gold = q.get("gold") or []
        answerable = q.get("answerable", True)
        refs = list(q.get("answers") or [])
        target = None
        if not answerable:
            target = P.answer_completion(lang, refuse=True)
        elif q.get("type") == "yes_no":
            target = P.answer_completion(lang, verdict=(refs or ["YES"])[0] == "YES")
        else:
            t = self.shown_target(cands[:K_ANSWER], self.refs_of(q, lang))
            target = P.answer_completion(lang, span=t[0]) if t else None
        self.val_answer.append({
            "id": q["id"], "source": source, "lang": lang, "qtype": q.get("type"), "answerable": answerable,
            "prompt": prompt, "completion": target, "refs": refs, "flat": [ft for _, ft in flat],
            "gold_shown": any(hits_any(cands[i], gold) for i, _ in flat) if gold else None})
        self.counts[(source, "val_answer")] += 1

    def qa_cal(self, source, q, cands):
        """A calibration row: qa_val's form, from a held-out train-part question."""
        n = len(self.val_answer)
        self.qa_val(source, q, cands)
        row = self.val_answer.pop()
        assert len(self.val_answer) == n
        self.counts[(source, "val_answer")] -= 1
        self.cal_answer.append(row)
        self.counts[(source, "cal_answer")] += 1

    def rerank_val(self, source, q, cands):
        lang = P.lang_of(q["question"])
        gold = q.get("gold") or []
        C = cands[:K_RERANK]
        self.val_rerank.append({"id": q["id"], "source": source, "lang": lang, "qtype": q.get("type"),
                                "prompts": [P.relevance_prompt(q["question"], p, lang) for p in C],
                                "hits": [hits_any(p, gold) for p in C]})
        self.counts[(source, "val_rerank")] += 1


def generic_query(question):
    """The question without the words that name its contract (CUAD's " Contract: X (file Y)", ContractNLI's
    "Consider X; "), so BM25 finds the same kind of clause in OTHER documents for the abstain_syn examples."""
    q = question.split(" Contract: ")[0]
    if q.startswith("Consider ") and "; " in q:
        q = q.split("; ", 1)[1]
    return q


def train_doc(suite, doc, cal_held=True):
    """A document train examples may show: neither of the suite's validation part nor (while the calibration part is
    held out, --cal-answer) of its calibration part (tools/dev_split.py)."""
    return not dev_split.doc_is_validation(suite, doc) and not (cal_held and dev_split.doc_is_calibration(suite, doc))


def heldout_plan(suite, questions, doc_names, share, rounds, cal_held=True):
    """Held-out-document rounds over a suite's TRAIN part: [(round, held-out docs, KB docs, questions)].

    The train documents that are gold of the given train questions, ranked by sha256("trainheldout/<suite>/<doc>")
    (independent of the calibration's "calib/" and heldout_unans.py's "heldout/" ranks), are cut into consecutive
    slices of round(share * n) (at least 1); round r holds slice r out, with every version of a held-out law
    (heldout_unans.family). The round's KB is the suite's train documents (train_doc) less the held-out ones; its
    questions are those whose gold documents are all held out (mixed-gold questions are left out: part of their
    answer is still there). Rounds run out when the slices do; the held-out sets of two rounds never share a
    document."""
    if not 0 < share < 1:
        raise SystemExit("prepare: --heldout-share must lie strictly between 0 and 1 (got %g)" % share)
    key = lambda d: hashlib.sha256(("trainheldout/%s/%s" % (suite, d)).encode("utf-8")).hexdigest()  # noqa: E731
    cands = sorted({d for q in questions for d in heldout_unans.gold_docs(q)
                    if d in doc_names and train_doc(suite, d, cal_held)}, key=key)
    k = max(1, int(round(share * len(cands))))
    plan, used = [], set()
    for r in range(rounds):
        fams = {heldout_unans.family(d) for d in cands[r * k:(r + 1) * k] if d not in used}
        if not fams:
            break
        # (a version in the validation / calibration part is not in the KB either: train documents are the KB)
        held = {d for d in doc_names if heldout_unans.family(d) in fams and train_doc(suite, d, cal_held)}
        used |= held
        kb_docs = sorted(d for d in doc_names if train_doc(suite, d, cal_held) and d not in held)
        if not kb_docs:
            break
        qs = [q for q in questions if heldout_unans.gold_docs(q) and all(d in held for d in heldout_unans.gold_docs(q))]
        plan.append((r, held, kb_docs, qs))
    return plan


def leak_problems(rows, questions, cal_held=True):
    """What in the train rows comes from a validation or calibration part: a row of a dev suite's question that is
    not a train-part one (dev_split), or a row showing a passage of a validation / calibration document of the dev
    suite its passages come from (meta["docs"]; lawyer_llama's are laws-zh's). questions: {suite: {id: question}}.
    Empty when nothing leaks."""
    bad = []
    for r in rows:
        src, m = r["source"], r.get("meta") or {}
        if src in questions:
            q = questions[src].get(m.get("qid"))
            if q is None:
                bad.append("%s %s: question %r not in the suite" % (src, r["id"], m.get("qid")))
            elif dev_split.question_is_validation(src, q):
                bad.append("%s %s: a validation question" % (src, r["id"]))
            elif cal_held and dev_split.question_is_calibration(src, q):
                bad.append("%s %s: a calibration question" % (src, r["id"]))
        suite = src if src in questions else DOC_SUITE.get(src)
        if suite:
            if "docs" not in m:
                bad.append("%s %s: no meta docs" % (src, r["id"]))
            for d in m.get("docs") or []:
                if not train_doc(suite, d, cal_held):
                    bad.append("%s %s: shows %s, a %s document of %s" % (
                        src, r["id"], d, "validation" if dev_split.doc_is_validation(suite, d) else "calibration",
                        suite))
    return bad


def relevance_gold(store, kb, q):
    """Gold clauses of a question from the KB's clause table (FORMAT.md's hit rule), for when retrieval missed."""
    clauses = store.clauses(kb)
    gold = [g for g in q.get("gold") or [] if g.get("text")]
    out = []
    for d in sorted({g["doc"] for g in gold}):
        for p in clauses.get(d, []):
            if hits_any(p, gold):
                out.append(p)
                break
    return out


def heldout_examples(args, store, B, suite, tr, rounds, cal_held, part):
    """abstain_heldout examples of one suite: per round of heldout_plan() a KB of the suite's other train documents
    (links under WORK/heldout/, ingested once: the KB's name holds a hash of its document list) and the held-out
    documents' questions retrieved over it."""
    names = heldout_unans.suite_doc_names(args.eval, suite)
    plan = heldout_plan(suite, tr, names, args.heldout_share, rounds, cal_held)
    part["heldout_rounds"] = []
    for r, held, kb_docs, qs in plan:
        tag = hashlib.sha256(json.dumps(kb_docs, ensure_ascii=False).encode("utf-8")).hexdigest()[:10]
        kb = "trh-%s-r%d-%s" % (suite, r, tag)
        d = os.path.join(args.work, "heldout", kb, "docs")
        if not os.path.isdir(d):
            os.makedirs(d + ".tmp", exist_ok=True)
            for name in kb_docs:
                link = os.path.join(d + ".tmp", names[name])
                if not os.path.lexists(link):
                    os.symlink(os.path.abspath(os.path.join(args.eval, suite, "docs", names[name])), link)
            os.replace(d + ".tmp", d)
        store.ensure(kb, d)
        R = store.retrieve(kb, [(q["id"], q["question"]) for q in qs])
        n0 = B.counts[(suite, "abstain_heldout")]
        for q in qs:
            cands = [p for p in R.get(q["id"]) or [] if train_doc(suite, p["doc"], cal_held)]
            B.heldout_train(suite, q, cands, held, r)
        part["heldout_rounds"].append({"round": r, "heldout_docs": len(held), "kb_docs": len(kb_docs),
                                       "questions": len(qs),
                                       "examples": B.counts[(suite, "abstain_heldout")] - n0})
        log("%s held-out round %d: %d of %d train documents out, %d questions -> %d examples"
            % (suite, r, len(held), len(held) + len(kb_docs), len(qs), B.counts[(suite, "abstain_heldout")] - n0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--clauseqa", default="build/clauseqa")
    ap.add_argument("--data", default="/tmp/dectrain-data", help="clauseqa data folder holding one KB per suite "
                                                                 "(ingested here when missing)")
    ap.add_argument("--work", default="/tmp/dectrain-work", help="retrieval cache and the auxiliary suites' docs")
    ap.add_argument("--out", default=".device/dec_data")
    ap.add_argument("--licensed-only", action="store_true",
                    help="drop the research-only / non-commercial sets (keep cmrc-dev, cuad-dev, contracts-en-dev, "
                         "laws-zh)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--syn-rate-zh", type=float, default=0.5, help="share of answerable zh questions that also give "
                                                                   "an abstain_syn example")
    ap.add_argument("--syn-rate-en", type=float, default=0.3)
    ap.add_argument("--en-variants", type=int, default=2, help="answer examples per English question (other "
                                                              "passages, other gold position)")
    ap.add_argument("--rel-pairs", type=int, default=2, help="relevance (yes, no) pairs per question at most")
    ap.add_argument("--syn-same-doc", type=float, default=0.25,
                    help="share of abstain_syn examples whose wrong passages start with the gold document's own "
                         "clauses that hold no reference answer")
    ap.add_argument("--cal-answer", default="cjrc-dev=300,cmrc-dev=120,policy-zh-dev=80,cuad-dev=60,"
                                           "contracts-en-dev=60",
                    help="calibration answer questions per suite (from the calibration part, held out of training; "
                         "'' keeps the calibration part in training)")
    ap.add_argument("--val-answer", default="cjrc-dev=240,cmrc-dev=120,policy-zh-dev=100,cuad-dev=60,"
                                            "contracts-en-dev=60", help="validation answer questions per suite")
    ap.add_argument("--val-rerank", default="cjrc-dev=150,cmrc-dev=80,policy-zh-dev=100,cuad-dev=80,"
                                            "contracts-en-dev=80,laws-zh=150", help="validation rerank questions")
    ap.add_argument("--heldout-share", type=float, default=0.2,
                    help="abstain_heldout: share of a suite's train documents held out of the KB in each round "
                         "(their questions are asked of the other train documents; target: the refusal)")
    ap.add_argument("--heldout-rounds", default=HELDOUT_ROUNDS,
                    help="abstain_heldout rounds per suite (disjoint held-out sets, one reduced KB each; '' none)")
    ap.add_argument("--suites", default=",".join(RELEVANCE_SUITES), help="dev suites to use (tests)")
    ap.add_argument("--aux", default=",".join(AUX_QA + AUX_REL), help="shared/train sets to use ('' none)")
    ap.add_argument("--limit", type=int, default=0, help="questions per source at most (tests)")
    args = ap.parse_args()
    args.syn_rate = {"zh": args.syn_rate_zh, "en": args.syn_rate_en}
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    store = Store(os.path.abspath(args.clauseqa), args.data, args.work)
    B = Builder(args, store, rng)
    used = lambda name: LICENSES[name][1] or not args.licensed_only  # noqa: E731
    val_answer = dict((k, int(v)) for k, v in (x.split("=") for x in args.val_answer.split(",") if x))
    val_rerank = dict((k, int(v)) for k, v in (x.split("=") for x in args.val_rerank.split(",") if x))
    cal_answer = dict((k, int(v)) for k, v in (x.split("=") for x in args.cal_answer.split(",") if x))
    heldout_rounds = dict((k, int(v)) for k, v in (x.split("=") for x in args.heldout_rounds.split(",") if x))
    suites = [s for s in args.suites.split(",") if s]
    aux = set(x for x in args.aux.split(",") if x)
    for s in suites:
        if s not in RELEVANCE_SUITES:
            sys.exit("prepare: unknown suite %s (%s)" % (s, ", ".join(RELEVANCE_SUITES)))
    for s in aux:
        if s not in AUX_QA + AUX_REL:
            sys.exit("prepare: unknown set %s (%s)" % (s, ", ".join(AUX_QA + AUX_REL)))
    cal_held = bool(cal_answer)
    parts = {}
    by_id = {}     # {suite: {question id: question}}: leak_problems()

    # ---- development suites
    for suite in [s for s in RELEVANCE_SUITES if s in suites]:   # (an unlicensed suite still gives validation)
        store.ensure(suite, os.path.join(args.eval, suite, "docs"))
        qs = dev_split.read_questions(args.eval, suite)
        by_id[suite] = {q["id"]: q for q in qs}
        allowed = lambda p, suite=suite: train_doc(suite, p["doc"], cal_held)  # noqa: E731
        tr = [q for q in qs if not dev_split.question_is_validation(suite, q)]
        va = [q for q in qs if dev_split.question_is_validation(suite, q)]
        if args.limit:
            tr, va = tr[:args.limit], va[:max(1, args.limit // 4)]
        R = store.retrieve(suite, [(q["id"], q["question"]) for q in tr + va])
        ca = []
        if cal_answer:   # the calibration part: held out of every training task, a sample answers for calibration
            ca = [q for q in tr if dev_split.question_is_calibration(suite, q)]
            tr = [q for q in tr if not dev_split.question_is_calibration(suite, q)]
        parts[suite] = {"train_questions": len(tr) if used(suite) else 0, "validation_questions": len(va),
                        "calibration_questions": len(ca)}
        W = store.retrieve(suite, [(q["id"], generic_query(q["question"])) for q in tr], K_WRONG, "bm25") \
            if suite in ANSWER_SUITES and used(suite) else {}
        for q in (tr if used(suite) else []):
            cands = [p for p in R.get(q["id"]) or [] if allowed(p)]
            if suite in ANSWER_SUITES:
                B.qa_train(suite, suite, q, cands, [p for p in W.get(q["id"]) or [] if allowed(p)])
            gold = [g for g in q.get("gold") or [] if g.get("text")]
            if q.get("answerable", True) and gold:
                pairs = 1 if q.get("type") == "clause_lookup" else args.rel_pairs
                B.relevance_train(suite, q, cands[:10], relevance_gold(store, suite, q), pairs,
                                  lambda p, gold=gold: hits_any(p, gold))
        if suite in ANSWER_SUITES and used(suite) and heldout_rounds.get(suite, 0) > 0:
            heldout_examples(args, store, B, suite, tr, heldout_rounds[suite], cal_held, parts[suite])
        vrng = random.Random(args.seed + 1)
        if suite in cal_answer:
            for q in random.Random(args.seed + 2).sample(ca, min(len(ca), cal_answer[suite])):
                B.qa_cal(suite, q, R.get(q["id"]) or [])
        if suite in val_answer:
            for q in vrng.sample(va, min(len(va), val_answer[suite])):
                B.qa_val(suite, q, R.get(q["id"]) or [])
        if suite in val_rerank:
            pool = [q for q in va if q.get("answerable", True) and any(g.get("text") for g in q.get("gold") or [])]
            if suite == "laws-zh":
                pool = [q for q in pool if q.get("type") == "semantic"]
            for q in vrng.sample(pool, min(len(pool), val_rerank[suite])):
                B.rerank_val(suite, q, R.get(q["id"]) or [])

    # ---- shared/train QA sets: their contexts become documents of their own KBs
    for name in AUX_QA:
        if not used(name) or name not in aux:
            continue
        rows = read_jsonl(os.path.join(args.train, name, "train.jsonl.gz"))
        if args.limit:
            rows = rows[:args.limit]
        d, qs = build_aux_suite(name, rows, os.path.join(args.work, "suites"))
        kb = "aux-%s-%s" % (name, hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()[:8])
        store.ensure(kb, os.path.join(d, "docs"))
        R = store.retrieve(kb, [(q["id"], q["question"]) for q in qs])
        W = store.retrieve(kb, [(q["id"], q["question"]) for q in qs], K_WRONG, "bm25")
        parts[name] = {"train_questions": len(qs), "validation_questions": 0, "note": "train split only"}
        for q in qs:
            B.qa_train(name, kb, q, R.get(q["id"]) or [], W.get(q["id"]) or [])

    # ---- shared/train retrieval sets
    if used("lawyer_llama_query2article") and "lawyer_llama_query2article" in aux:
        name = "lawyer_llama_query2article"
        rows = read_jsonl(os.path.join(args.train, name, "train.jsonl.gz"))
        if args.limit:
            rows = rows[:args.limit]
        store.ensure("laws-zh", os.path.join(args.eval, "laws-zh", "docs"))
        R = store.retrieve("laws-zh", [(r["id"], r["query"]) for r in rows])
        # 民法典 articles of the laws-zh KB by label (the code's articles are numbered through all its books); the
        # books in laws-zh's validation / calibration parts (总则, 附则, 婚姻家庭编) are not shown
        civil = {}
        for doc, ps in store.clauses("laws-zh").items():
            if doc.startswith("民法典") and train_doc("laws-zh", doc, cal_held):
                for p in ps:
                    if p["label"]:
                        civil.setdefault(p["label"], p)
        parts[name] = {"train_questions": len(rows), "validation_questions": 0, "note": "train split only"}
        for r in rows:
            labels = set()
            for t in r.get("positive") or []:
                if t.startswith("《民法典》") and "条" in t:
                    labels.add(t[len("《民法典》"):t.index("条") + 1])
            gp = [civil[l] for l in sorted(labels) if l in civil]
            q = {"id": r["id"], "question": r["query"]}
            B.relevance_train(name, q, [p for p in R.get(r["id"]) or [] if train_doc("laws-zh", p["doc"], cal_held)][:10],
                              gp, 1,
                              lambda p, labels=labels: p["doc"].startswith("民法典") and p["label"] in labels)
    if used("cail2021_argpair_retrieval") and "cail2021_argpair_retrieval" in aux:
        name = "cail2021_argpair_retrieval"
        rows = read_jsonl(os.path.join(args.train, name, "train.jsonl.gz"))
        if args.limit:
            rows = rows[:args.limit]
        parts[name] = {"train_questions": len(rows), "validation_questions": 0, "note": "train split only"}
        for r in rows:
            doc = str(r.get("text_id") or r["id"])
            ps = [passage(doc, None, None, t) for t in (r.get("positive") or [])[:1]]
            ns = [passage(doc, None, None, t) for t in r.get("negatives") or []]
            q = {"id": r["id"], "question": r["query"]}
            B.relevance_train(name, q, ps + ns, ps, 1, lambda p, ps=ps: any(same(p, x) for x in ps))

    # ---- nothing of a validation or calibration part in training
    bad = leak_problems(B.train, by_id, cal_held)
    if bad:
        sys.exit("prepare: %d train examples leak a validation / calibration part, nothing written: %s"
                 % (len(bad), "; ".join(bad[:5])))

    # ---- write
    rng.shuffle(B.train)
    files = {"train.jsonl": B.train, "val_answer.jsonl": B.val_answer, "val_rerank.jsonl": B.val_rerank,
             "cal_answer.jsonl": B.cal_answer}
    for fn, rows in files.items():
        with open(os.path.join(args.out, fn), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = defaultdict(dict)
    for (s, t), n in sorted(B.counts.items()):
        counts[s][t] = n
    sources = sorted({s for s, _ in B.counts})
    meta = {
        "prompt_format": P.FORMAT,
        "licensed_only": args.licensed_only,
        "seed": args.seed,
        "options": {k: v for k, v in vars(args).items() if k not in ("syn_rate",)},
        "split": "tools/dev_split.py: a document is validation when int(sha256('<suite>/<doc>'), 16) % 5 == 0; "
                 "train examples come from the train parts only and show passages of train documents only "
                 "(leak_problems checked), validation examples from the validation parts" +
                 ("; the calibration part (a train document with int(sha256('calib/<suite>/<doc>'), 16) % 5 == 0) "
                  "is held out of training and gives cal_answer.jsonl" if cal_answer else ""),
        "sources": {s: {"license": LICENSES[s][0], "licensed": LICENSES[s][1], "parts": parts.get(s, {}),
                        "trained": any(counts[s].get(t) for t in ("answer", "abstain", "abstain_syn", "abstain_heldout",
                                                                   "relevance")),
                        "examples": counts[s]} for s in sources},
        "skipped": {"%s: %s" % k: n for k, n in sorted(B.skips.items())},
        "totals": dict(Counter(r["task"] for r in B.train)),
        "files": {fn: sha256_file(os.path.join(args.out, fn)) for fn in files},
        "clauseqa": {"binary_sha256": sha256_file(args.clauseqa), "mode": "router,bm25", "k": K_RETRIEVE},
    }
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
    w = max(len(s) for s in sources) if sources else 10
    tasks = ["answer", "abstain", "abstain_syn", "abstain_heldout", "relevance", "val_answer", "val_rerank",
             "cal_answer"]
    print("%-*s %s  license" % (w, "source", " ".join("%11s" % t for t in tasks)))
    for s in sources:
        print("%-*s %s  %s" % (w, s, " ".join("%11d" % counts[s].get(t, 0) for t in tasks),
                               "licensed" if LICENSES[s][1] else "research/non-commercial"))
    print("%-*s %s" % (w, "total", " ".join("%11d" % sum(counts[s].get(t, 0) for s in sources) for t in tasks)))
    for k, n in sorted(B.skips.items()):
        print("skipped %s: %s %d" % (k[0], k[1], n))


if __name__ == "__main__":
    main()
