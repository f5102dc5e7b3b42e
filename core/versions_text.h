/* What texts say about versions of a regulation (core/versions_text.c): days as yyyymmdd, dates written in Chinese
 * and English, the group key of a regulation's name or title, a document's version dates and label, and the date or
 * comparison a question asks for. Pure functions: no database, no allocation that outlives a call. The store keeps
 * what they find (store/versions.h: groups, status on a day, corrections); retrieval and answers read questions
 * with them. */
#ifndef CQ_CORE_VERSIONS_TEXT_H
#define CQ_CORE_VERSIONS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A day as yyyymmdd (20181026); 0 is "unknown". */
typedef int32_t cq_date;

/* ---- dates -------------------------------------------------------------------------------------------------- */

bool cq_date_valid(cq_date d);                   /* a real day of the Gregorian calendar, years 1000-9999 */
cq_date cq_date_make(int year, int month, int day); /* 0 when not a real day */
cq_date cq_date_parse_iso(const char *s);        /* "2018-10-26" (exactly that form) → 20181026; 0 when invalid */
char *cq_date_format(cq_date d, char out[11]);   /* "2018-10-26"; "" for 0. Returns out */
cq_date cq_date_today(void);                     /* today in local time */
cq_date cq_date_add_days(cq_date d, int days);
cq_date cq_date_add_months(cq_date d, int months); /* the day clamped to the month's length */
int cq_date_last_day(int year, int month);         /* 28..31 */

/* ---- what a document says about its version ------------------------------------------------------------------ */

#define CQ_VERSION_KEY_MAX 256
#define CQ_VERSION_LABEL_MAX 64
#define CQ_VERSION_MAX_REPEALS 8

typedef struct {
    char key[CQ_VERSION_KEY_MAX];     /* the group key: versions of one regulation share it */
    char label[CQ_VERSION_LABEL_MAX]; /* "2018年修正", "2023年修订", "2016年通过", "Amended and Restated 2020", or "" */
    cq_date promulgated;              /* the version's own date (adopted, amended, revised, published) */
    cq_date effective;                /* when it takes effect (施行 / effective); promulgated when the text says none */
    cq_date repealed;                 /* the document says it was repealed (or ceased to be in force) on that day;
                                         a repeal without a day known: its effective day */
    char repeals[CQ_VERSION_MAX_REPEALS][CQ_VERSION_KEY_MAX]; /* keys of the regulations it repeals (同时废止) */
    size_t n_repeals;
} cq_version_meta;

/* The group key of a document from its name (file name without extension) and title (NULL when unknown): the
 * title when it names a regulation (a Chinese title ending in 法, 条例, 规定, 办法 …; not a contract), else the
 * name. Empty when nothing is left. */
void cq_version_key(const char *name, const char *title, char *out, size_t cap);

/* The key of a regulation's title or name as a question or another document writes it ("《中华人民共和国合同法》",
 * "公司法（2018年修正）"): folded, without 中华人民共和国, brackets, dates and version words. */
void cq_version_title_key(const char *title, char *out, size_t cap);

/* Everything above from the document: its name, its title, and the text of its header (what comes before the first
 * article) and of its last articles (where 本法自…起施行 and 同时废止 are), any of them NULL. */
void cq_version_meta_extract(const char *name, const char *title, const char *header, const char *tail,
                             cq_version_meta *out);

/* Dates written in text: 2018年10月26日, 二〇一八年十月二十六日, 2018-10-26, 2018.10.26, 2018/10/26, 26 October
 * 2018, October 26, 2018. Calls fn for each with its byte span; stops when fn returns non-zero. Month-only and
 * year-only dates are not reported. */
typedef int (*cq_date_fn)(void *ctx, cq_date d, size_t start, size_t end);
void cq_dates_scan(const char *text, cq_date_fn fn, void *ctx);

/* ---- a question's date -------------------------------------------------------------------------------------- */

typedef struct {
    cq_date on;             /* the day asked about: the last day of a period ("2020年时" → 2020-12-31) */
    cq_date first;          /* the period's first day (2020-01-01); == on for a day */
    int version_year;       /* "2018年修正版", "the 2018 version": that year's version is meant, not the one in
                               force then (on = the year's last day) */
    size_t start, end;      /* the date's byte span in the question */
} cq_question_date;

/* Finds the date a question asks about: "2020年时", "2019年12月的规定", "截至2021年3月1日", "2020年8月20号之前"
 * (the day before), "2018年修正的公司法", "as of 1 March 2020", "in 2019", "before 2020-08-20". A year that is part
 * of a name ("宪法修正案2004年第二十三条", "公司法(2018-10-26)") is not one. Returns 1 and fills out, else 0. */
int cq_question_date_find(const char *question, cq_question_date *out);

/* A question that compares versions: 2 when it says so ("新旧版本第六十条有何不同？", "2018年和2023年的公司法有什么变化",
 * "the difference between the old and new versions"), 1 when it only asks what changed ("第六十条修改了什么",
 * "what changed in Article 5": a comparison if the regulation it names has versions), 0 otherwise. */
int cq_question_is_comparison(const char *question);

/* Years named in a question (for "2018年和2023年…"), at most max, in order; returns how many. */
size_t cq_question_years(const char *question, int *years, size_t max);

#endif
