/* A question, analysed once: the value that follow-up resolution, retrieval and answering read.
 *
 *   cq_query_parse(s, kb, "《劳动法》第四十四条第二款规定了什么？", &q)
 *     type       CQ_QUERY_CLAUSE: it names a clause (ref: article 44, paragraph 2, key "44", its byte span)
 *     lang       CQ_QUERY_ZH: it has CJK text (answers and notices are then written in Chinese)
 *     titles     the KB's documents it names (劳动法(2018-12-29), …), best first (search/router.h)
 *     terms      what BM25 searches: the words of the question without its reference ("第四十四条" says where,
 *                not what), question words and stop words removed, deduplicated
 *     exp_terms  the BM25 terms of the statutory words for its everyday ones ("加班" → 延长工作时间:
 *                search/lexicon.h), those terms lacks; searched with a lower weight (search/retrieve.c)
 *     all_terms  the same for the whole question, reference included: what an answer's coverage counts
 *     as_of      the day the question asks about (store/versions.h: "2020年时" → 2020-12-31, "as of 1 March
 *                2020"), or the one the request gives (cq_query_set_as_of); 0: today. Its words are not BM25 terms
 *     compare    it compares versions: "新旧版本第六十条有何不同？"
 *     absent_name  (English) a proper name it gives that the KB holds nowhere: the answer says so instead of quoting
 *                another document's clause (app/answer.c)
 *     absent_words (English) the words of its topic that no clause holds in any form, when they are more than
 *                half of them: the answer says so beside what it quotes (app/answer.c)
 *     form_terms (English) other forms of its terms ("invoice", "invoicing" … for "invoices": the keyword index does
 *                not stem); searched beside terms with weight CQ_QUERY_FORMS_WEIGHT (search/retrieve.c)
 *     ambiguous  a clause it names without naming a document ("第四十四条规定了什么？") that several of the KB's
 *                documents have: their names, so that the answer asks which one is meant (app/answer.c)
 *
 * Everything but the titles, absent_name, absent_words and ambiguous is a function of the text alone; those need the
 * KB (the router's title cache, the keyword index, the clauses' labels).
 * A question completed by follow-up resolution (app/followup.h) is a new text and is parsed again. */
#ifndef CQ_SEARCH_QUERY_H
#define CQ_SEARCH_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "search/router.h"
#include "store/store.h"
#include "core/versions_text.h"

typedef enum {
    CQ_QUERY_TOPIC = 0, /* names no clause: "员工加班费怎么算？" */
    CQ_QUERY_CLAUSE,    /* names an article or a heading: 第四十四条, 第三章, Article 5, Section 7.2, § 3 (ref) */
    CQ_QUERY_PARAGRAPH, /* names a 款 or 项 but no article: "那第二款呢？", a follow-up's fragment */
} cq_query_type;

typedef enum {
    CQ_QUERY_EN = 0, /* no CJK text */
    CQ_QUERY_ZH,     /* CJK text */
} cq_query_lang;

#define CQ_QUERY_MAX_TERMS 40  /* a long question keeps its first CQ_QUERY_MAX_TERMS distinct terms */
#define CQ_QUERY_MAX_TITLES 64 /* documents a question may name */
#define CQ_QUERY_MAX_AMBIGUOUS 5 /* documents named in cq_query.ambiguous */
#define CQ_QUERY_FORMS_WEIGHT 0.5 /* the BM25 share of a term's other forms (form_terms); CLAUSEQA_FORMS_WEIGHT, in
                                     [0, 4], overrides it (0: not searched) */

typedef struct {
    char *text;          /* the question */
    cq_query_type type;
    cq_query_lang lang;
    cq_clause_ref ref;   /* CQ_QUERY_CLAUSE: the first clause reference (search/router.h); CQ_QUERY_PARAGRAPH: only
                            its byte span ref.start, ref.end is set; zeroed for CQ_QUERY_TOPIC */
    char **terms;        /* BM25 terms (see above), malloc'd strings */
    size_t n_terms;
    char **exp_terms;    /* terms of the expansion (below) that terms lacks */
    size_t n_exp_terms;
    char **form_terms;   /* English: other forms of terms (see above): the stem of each with common endings */
    size_t n_form_terms;
    char **all_terms;    /* terms of the whole question */
    size_t n_all_terms;
    cq_date as_of;       /* the day asked about (the last day of a period the question names), 0: today */
    cq_date as_of_first; /* the period's first day ("2020年时": 2020-01-01); == as_of for a day */
    int version_year;    /* "2018年修正版": the version of that year is meant (as_of is that year's last day) */
    size_t as_of_start, as_of_end; /* the date's byte span in the question; 0, 0 when it came with the request */
    int compare;         /* the question compares versions: 2 it says so, 1 it asks what changed (store/versions.h) */
    int64_t kb_id;       /* the KB the titles were matched in; 0 when parsed without one */
    cq_title_match titles[CQ_QUERY_MAX_TITLES]; /* documents of that KB the question names, best first */
    size_t n_titles;
    char *absent_name;   /* an English question's proper name that no clause of the KB mentions and no document's name
                          * or title holds ("Consider FNHA's Non-Disclosure Agreement" of a KB without FNHA's): the
                          * question is about a document the KB lacks. NULL otherwise, and without a KB */
    char *absent_words;  /* an English question's topic words (space-separated) that no clause of the KB holds in any
                          * form ("assign consent" of "Can either party assign the agreement without consent?" asked
                          * of a contract with no assignment clause), when they are more than half of its topic words;
                          * frame words ("clause", "party", "agreement" …) aside. NULL otherwise, and without a KB */
    char *ambiguous;     /* a clause reference without a document ("第四十四条规定了什么？") that several documents of
                          * the KB have ("44" in 劳动法 and 劳动合同法): what to call those documents (their titles, else
                          * names; versions of one named once), one a line, at most CQ_QUERY_MAX_AMBIGUOUS; the router
                          * resolves it to none of them, and the answer asks which is meant. NULL otherwise */
    size_t n_ambiguous;  /* how many (distinct) documents have it: more than the names when ambiguous_more */
    bool ambiguous_more; /* there may be more than n_ambiguous (the store was read that far) */
    char *expansion;     /* the statutory phrases for the question's everyday words (exp_terms), space-separated
                          * ("延长工作时间 劳动者" for "员工加班费怎么算？"); NULL when none (search/lexicon.h) */
} cq_query;

/* Analyses question for KB kb_id of store s. With s NULL (and kb_id 0) only the text is analysed: no titles, and
 * the query cannot be retrieved with. *out is zeroed first; free it with cq_query_free. */
cq_status cq_query_parse(cq_store *s, int64_t kb_id, const char *question, cq_query *out, cq_err *err);
void cq_query_free(cq_query *q);

/* The stem of an English word: its length once the longest common ending is removed while three letters remain
 * ("invoices" → 6, "invoic"; "pays" → 3, "pay"): what form_terms are made from. */
size_t cq_query_stem_len(const char *word);

/* Whether a BM25 term is an English word: three lower-case letters (a to z) or more, under 64 (those have other
 * forms, form_terms; the answer step counts them by their stem). */
bool cq_query_is_word(const char *term);

/* The day a request asks about (REST "as_of", CLI --as-of): it overrides a date found in the question. */
void cq_query_set_as_of(cq_query *q, cq_date day);

#endif
