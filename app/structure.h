/* Structure parser: document text → clauses.
 *
 * Chinese legal structure: 编 / 分编 / 章 / 节 are headings (they go into the heading path); 条 (including
 * 第X条之一) is the clause; 款 are its paragraphs and 项 （一）/ 目 1. items stay inside the article's text.
 * 附则 and 附件 headings, a 序言/preamble before the first article.
 * English: Article N / ARTICLE IV / Section 7.2 / § 3 / numbered headings "7.2 Termination." / "12. Notices";
 * headings without numbers in capitals are headings. Where a document has no recognisable numbering the
 * fallback is paragraphs, merged up to a useful size and split at sentence ends when too long.
 *
 * A clause's text is the document text of its span, heading kept with the body ("第十二条 申请人应当..."),
 * hard breaks kept as '\n' (they separate 款), page breaks removed. */
#ifndef CQ_APP_STRUCTURE_H
#define CQ_APP_STRUCTURE_H

#include <stddef.h>
#include <stdint.h>

#include "app/doctext.h"
#include "core/error.h"

typedef enum {
    CQ_CLAUSE_ARTICLE = 1,   /* 第X条 / Article / Section / numbered clause: has a label */
    CQ_CLAUSE_PREAMBLE = 2,  /* text before the first article (title block, 序言, recitals) */
    CQ_CLAUSE_PARAGRAPH = 3, /* fallback chunk of unstructured text: no label */
} cq_clause_kind;

typedef struct {
    cq_clause_kind kind;
    uint32_t start, end;  /* byte span in cq_doctext.text */
    char *label;          /* "第十二条", "第二十条之一", "Section 7.2", "Article 5", "§ 3"; NULL for paragraphs */
    char *label_key;      /* canonical key for lookups: "12", "20-1", "7.2", "5"; NULL without label */
    char *path;           /* "第三章 申报条件 > 第一节 一般规定 > 第十二条"; for paragraphs the headings above */
    char *text;           /* display text, see above */
    int page_first, page_last; /* 1-based; 0 when the document has no pages */
} cq_clause;

typedef struct {
    cq_clause *clauses;
    size_t n_clauses;
    char *title; /* the title the text itself shows (first heading line), or NULL */
} cq_structure;

cq_status cq_structure_parse(const cq_doctext *doc, cq_structure *out, cq_err *err);
void cq_structure_free(cq_structure *s);

#endif
