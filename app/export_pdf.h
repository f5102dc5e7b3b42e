/* A small PDF writer for exported conversations (issue 30 item 5): paragraphs of text in a few styles, wrapped and
 * paged on A4. No font is embedded: ASCII is set in Helvetica, everything else (Chinese first of all) in the
 * standard Adobe-GB1 CID font STSong-Light (UniGB-UCS2-H), which every PDF viewer supplies (MuPDF from its built-in
 * CJK font) — the file stays a few KB and its text can be searched and copied. The middle dot and the bullet are written as the CJK middle dot (U+30FB). Characters outside the Basic
 * Multilingual Plane are written as "?".
 *
 * Why not MuPDF's writer: MuPDF 1.21 (Debian 12) has CJK fonts built in (fz_lookup_cjk_font: Noto/Droid), but its
 * HTML story → PDF path sets Chinese in a non-embedded Japanese "Mincho" and drops the simplified characters it
 * cannot encode (劳, 资, 单 …), and embedding the built-in CJK font fails ("substitute font creation is not
 * implemented yet"). Naming the reader's own Adobe-GB1 font is what PDF defines for this, and MuPDF renders it from
 * the same built-in font. */
#ifndef CQ_APP_EXPORT_PDF_H
#define CQ_APP_EXPORT_PDF_H

#include <stddef.h>

#include "core/error.h"

typedef enum { CQ_PDF_TITLE, CQ_PDF_HEADING, CQ_PDF_BODY, CQ_PDF_QUOTE, CQ_PDF_SMALL } cq_pdf_style;

typedef struct cq_pdf cq_pdf;

cq_pdf *cq_pdf_new(void); /* NULL when out of memory */
/* Adds a paragraph (UTF-8; "\n" breaks a line). */
void cq_pdf_para(cq_pdf *p, cq_pdf_style style, const char *text);
/* The document: *out malloc'd, *len its bytes. Frees p. */
cq_status cq_pdf_finish(cq_pdf *p, char **out, size_t *len, cq_err *err);
void cq_pdf_free(cq_pdf *p);

#endif
