"""Prompt format cq-prompt-v1 (docs/ANSWERS.md) and the scoring helpers of shared/eval/FORMAT.md, in plain Python.

Shared by prepare.py (training examples), train.py (validation) and the tests. No third-party imports: the
formatter test runs with the system Python. The C side (`clauseqa prompt --jsonl`) must give byte-identical
prompts; tests/integration/test_decoder_prompt_parity.py compares the two.
"""
import unicodedata
from collections import Counter

FORMAT = "cq-prompt-v1"
ANSWER_CHARS = 800      # passage text in an answer prompt, all passages together (code points, headers excluded)
ANSWER_PASSAGES = 5     # passages in an answer prompt at most
RELEVANCE_CHARS = 400   # the one passage of a relevance prompt

REFUSAL = {"zh": "无法回答", "en": " Cannot be answered"}
VERDICT = {("zh", True): "是", ("zh", False): "否", ("en", True): " Yes", ("en", False): " No"}
RELEVANT = {("zh", True): "是", ("zh", False): "否", ("en", True): " yes", ("en", False): " no"}


def is_cjk(cp):
    """core/utf8.c cq_is_cjk."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x323AF or
            0xF900 <= cp <= 0xFAFF or cp == 0x3007)


def is_space(cp):
    """core/utf8.c cq_is_space."""
    return (cp in (0x20, 0x09, 0x0A, 0x0D, 0x0C, 0x0B, 0xA0, 0x3000, 0x202F, 0x205F, 0xFEFF) or
            0x2000 <= cp <= 0x200B)


def lang_of(question):
    """'zh' when the question holds a CJK character (cq_utf8_has_cjk), else 'en'."""
    return "zh" if any(is_cjk(ord(c)) for c in question) else "en"


def flatten(text):
    """Every \\r and \\n becomes one space (byte for byte what the copy constraint matches against)."""
    return text.replace("\r", " ").replace("\n", " ")


def trim(s):
    i, j = 0, len(s)
    while i < j and is_space(ord(s[i])):
        i += 1
    while j > i and is_space(ord(s[j - 1])):
        j -= 1
    return s[i:j]


def clean_question(q):
    return trim(flatten(q))


def passage_header(p, lang):
    title = p.get("title") or ""
    label = p.get("label") or ""
    text = p.get("text") or ""
    with_label = bool(label) and not text.startswith(label)
    if lang == "zh":
        return "《%s》%s" % (title, label + " " if with_label else "")
    return "%s, %s. " % (title, label) if with_label else "%s. " % title


def passage_line(p, lang, max_chars=None):
    text = p.get("text") or ""
    if max_chars is not None:
        text = text[:max_chars]
    return passage_header(p, lang) + flatten(text)


def shown_passages(passages, max_chars=ANSWER_CHARS, max_passages=ANSWER_PASSAGES):
    """[(index into passages, characters of its text shown)] for an answer prompt: the first passage cut to max_chars,
    each next one whole while it fits in what is left; the first that does not fit ends the list."""
    out, left = [], max_chars
    for i, p in enumerate(passages[:max_passages]):
        n = len(p.get("text") or "")
        if i == 0:
            take = min(n, left)
        elif n <= left:
            take = n
        else:
            break
        out.append((i, take))
        left -= take
        if left <= 0:
            break
    return out


def answer_prompt(question, passages, lang=None):
    """(prompt text, [(passage index, flattened shown text)]) of task 1."""
    q = clean_question(question)
    lang = lang or lang_of(q)
    shown = shown_passages(passages)
    lines = []
    flat = []
    for k, (i, take) in enumerate(shown):
        lines.append("[%d] %s" % (k + 1, passage_line(passages[i], lang, take)))
        flat.append((i, flatten((passages[i].get("text") or "")[:take])))
    if lang == "zh":
        prompt = "任务：回答\n材料：\n" + "".join(l + "\n" for l in lines) + "问题：%s\n答案：" % q
    else:
        prompt = "Task: answer\nPassages:\n" + "".join(l + "\n" for l in lines) + "Question: %s\nAnswer:" % q
    return prompt, flat


def relevance_prompt(question, passage, lang=None):
    q = clean_question(question)
    lang = lang or lang_of(q)
    line = passage_line(passage, lang, RELEVANCE_CHARS)
    if lang == "zh":
        return "任务：相关性\n材料：%s\n问题：%s\n相关：" % (line, q)
    return "Task: relevance\nPassage: %s\nQuestion: %s\nRelevant:" % (line, q)


def answer_completion(lang, span=None, verdict=None, refuse=False):
    if refuse:
        return REFUSAL[lang]
    if verdict is not None:
        return VERDICT[(lang, bool(verdict))]
    return span if lang == "zh" else " " + span


# ---- FORMAT.md scoring ----

def norm(s):
    return "".join(c for c in unicodedata.normalize("NFKC", s or "").lower() if not c.isspace())


def char_f1(a, b):
    a, b = norm(a), norm(b)
    if not a or not b:
        return 0.0
    common = sum((Counter(a) & Counter(b)).values())
    if not common:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


def is_hit(doc, text, page, gold):
    """FORMAT.md's retrieval hit rule for one passage (doc name, text, page or None) against one gold item."""
    if doc != gold.get("doc"):
        return False
    g = gold.get("text")
    if g is None:
        return gold.get("page") is None or gold.get("page") == page
    nr, ng = norm(text), norm(g)
    if not ng:
        return False
    if ng in nr:
        return True
    if nr in ng and len(nr) >= 20:
        return True
    return char_f1(text, g) >= 0.5


def norm_map(s):
    """norm(s) and, for each of its characters, the index in s of the character it came from."""
    out, idx = [], []
    for i, c in enumerate(s):
        for d in unicodedata.normalize("NFKC", c).lower():
            if not d.isspace():
                out.append(d)
                idx.append(i)
    return "".join(out), idx


def find_verbatim(passage_flat, answer):
    """The substring of passage_flat that holds `answer` (exactly, else as FORMAT.md's norm() sees both: folded case
    and width, white space ignored), trimmed of surrounding white space; None when absent."""
    a = trim(flatten(answer or ""))
    if not a:
        return None
    if a in passage_flat:
        return a
    na = norm(a)
    if not na:
        return None
    np_, idx = norm_map(passage_flat)
    k = np_.find(na)
    if k < 0:
        return None
    s = trim(passage_flat[idx[k]:idx[k + len(na) - 1] + 1])
    return s or None
