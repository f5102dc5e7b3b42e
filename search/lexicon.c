/* Lay words → statutory words for BM25 (search/lexicon.h). */
#include "search/lexicon.h"
#include "core/log.h"
#include "core/strbuf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *lay;   /* what people say */
    const char *legal; /* what the statutes say: space-separated phrases */
    /* what stands for the lay word in a question the reader reads (cq_lexicon_reword): a drop-in in the statutes'
     * words, or NULL where none reads right in a sentence (打工, 辞退 "辞退员工", 儿子, 小偷, 狗咬 …) or none says
     * the same (辞职: the worker ends the contract; 解除劳动合同 does not say who — "劳动者能否口头辞职？" read so was
     * answered 是 by the 270M, 否 as asked) */
    const char *said;
} entry;

/* Chinese: matched as substrings. Each statutory phrase is the wording of the articles that regulate the matter
 * (劳动法 / 劳动合同法, 民法典, 刑法, 道路交通安全法, 消费者权益保护法, 著作权法). */
static const entry zh[] = {
    /* work */
    {"加班费", "延长工作时间 工资报酬", "延长工作时间的工资报酬"},
    {"加班", "延长工作时间", "延长工作时间"},
    {"工资", "劳动报酬", "劳动报酬"},
    {"薪水", "工资 劳动报酬", "工资"},
    {"薪资", "工资 劳动报酬", "工资"},
    {"欠薪", "拖欠 劳动报酬", "拖欠劳动报酬"},
    {"老板", "用人单位", "用人单位"},
    {"员工", "劳动者", "劳动者"},
    {"工人", "劳动者", "劳动者"},
    {"打工", "劳动者 用人单位", NULL},
    {"辞退", "解除劳动合同", NULL},
    {"开除", "解除劳动合同", NULL},
    {"解雇", "解除劳动合同", NULL},
    {"炒鱿鱼", "解除劳动合同", NULL},
    {"辞职", "解除劳动合同", NULL},
    {"离职", "解除劳动合同 终止劳动合同", NULL},
    {"跳槽", "解除劳动合同", NULL},
    {"裁员", "裁减人员", "裁减人员"},
    {"遣散费", "经济补偿", "经济补偿"},
    {"补偿金", "经济补偿", "经济补偿"},
    {"年假", "带薪年休假", "带薪年休假"},
    {"社保", "社会保险", "社会保险"},
    {"五险一金", "社会保险 住房公积金", "社会保险和住房公积金"},
    {"合同到期", "期满", "合同期满"},
    {"上下班路上", "上下班途中", "上下班途中"},
    /* family */
    {"孩子", "子女 未成年人", NULL},
    {"小孩", "子女 未成年人", NULL},
    {"儿子", "子女", NULL},
    {"女儿", "子女", NULL},
    {"老人", "老年人", "老年人"},
    {"老公", "配偶 夫妻", "配偶"},
    {"老婆", "配偶 夫妻", "配偶"},
    {"丈夫", "配偶", "配偶"},
    {"妻子", "配偶", "配偶"},
    {"彩礼", "借婚姻索取财物", NULL},
    {"私生子", "非婚生子女", "非婚生子女"},
    {"领养", "收养", "收养"},
    /* property, contracts, money */
    {"房东", "出租人", "出租人"},
    {"租客", "承租人", "承租人"},
    {"房客", "承租人", "承租人"},
    {"租房", "租赁 承租人", "租赁"},
    {"借钱", "借款", "借款"},
    {"欠钱", "债务 借款", NULL},
    {"欠债", "债务", NULL},
    {"还钱", "返还 借款 清偿", NULL},
    {"赔钱", "赔偿", "赔偿"},
    {"商家", "经营者", "经营者"},
    {"卖家", "出卖人 经营者", "出卖人"},
    {"买家", "买受人 消费者", "买受人"},
    {"网购", "网络 电子商务", NULL},
    {"假货", "假冒 伪劣", NULL},
    {"物业公司", "物业服务人", "物业服务人"},
    {"开公司", "设立 公司", "设立公司"},
    {"执照", "营业执照 许可证", NULL},
    {"装修", "装饰装修", "装饰装修"},
    {"宠物", "饲养的动物", "饲养的动物"},
    {"狗咬", "饲养的动物 损害", NULL},
    {"高空抛物", "抛掷物品", NULL},
    {"盗版", "复制 著作权", NULL},
    {"抄袭", "剽窃", "剽窃"},
    /* crime, traffic, courts */
    {"打人", "殴打 伤害", "殴打他人"},
    {"打伤", "伤害", "伤害"},
    {"偷东西", "盗窃", "盗窃"},
    {"小偷", "盗窃", NULL},
    {"偷窃", "盗窃", "盗窃"},
    {"骗钱", "诈骗", "诈骗"},
    {"骗子", "诈骗", NULL},
    {"坐牢", "有期徒刑", NULL},
    {"判刑", "刑罚", "判处刑罚"},
    {"罚钱", "罚款", "罚款"},
    {"酒驾", "饮酒 驾驶", "饮酒后驾驶"},
    {"醉驾", "醉酒 驾驶", "醉酒驾驶"},
    {"车祸", "交通事故", "交通事故"},
    {"撞人", "交通事故", NULL},
    {"交警", "公安机关交通管理部门", "公安机关交通管理部门"},
    {"打官司", "诉讼", "诉讼"},
};

/* English: whole words, any case. */
static const entry en[] = {
    {"landlord", "lessor", "lessor"},
    {"tenant", "lessee", "lessee"},
    {"fired", "terminate termination", NULL},
    {"firing", "terminate termination", NULL},
    {"boss", "employer", "employer"},
    {"quit", "resign resignation termination", NULL},
};

int cq_lexicon_enabled(void) {
    const char *v = getenv("CLAUSEQA_QUERY_EXPAND");
    return !v || !(!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false"));
}

double cq_lexicon_weight(void) {
    if (!cq_lexicon_enabled()) return 0.0;
    const char *v = getenv("CLAUSEQA_QUERY_EXPAND_WEIGHT");
    if (!v) return CQ_LEXICON_WEIGHT;
    char *end = NULL;
    double w = strtod(v, &end);
    if (end != v && !*end && w > 0.0 && w <= 4.0) return w;
    static int warned; /* once a process: this is read for every question */
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        CQ_WARN("CLAUSEQA_QUERY_EXPAND_WEIGHT is a number in (0, 4], not '%s': using %.1f", v, CQ_LEXICON_WEIGHT);
    return CQ_LEXICON_WEIGHT;
}

/* Whether word starts at p in text as a whole word or its plural in s, any case (word characters: ASCII letters and
 * digits); has_word_ci: anywhere in text. */
static int word_here_ci(const char *text, const char *p, const char *word) {
    const size_t n = strlen(word);
    if (strncasecmp(p, word, n) || (p > text && isalnum((unsigned char)p[-1]))) return 0;
    const size_t end = n + ((p[n] == 's' || p[n] == 'S') && !isalnum((unsigned char)p[n + 1]));
    return !isalnum((unsigned char)p[end]);
}

static int has_word_ci(const char *text, const char *word) {
    for (const char *p = text; *p; p++)
        if (word_here_ci(text, p, word)) return 1;
    return 0;
}

/* The next space-separated phrase of *p into buf (phrases of sizeof buf bytes or more skipped); *p moves past it.
 * 0 at the end of the list. */
static int next_phrase(const char **p, char (*buf)[128]) {
    while (*p && **p) {
        const char *at = *p;
        size_t n = strcspn(at, " ");
        *p += n + (at[n] == ' ');
        if (n && n < sizeof *buf) {
            memcpy(*buf, at, n);
            (*buf)[n] = 0;
            return 1;
        }
    }
    return 0;
}

/* Appends each space-separated phrase of legal to out (space-separated) unless text or out already holds it. */
static void add_all(cq_strbuf *out, const char *text, const char *legal) {
    char phrase[128];
    for (const char *p = legal; next_phrase(&p, &phrase);)
        if (!strstr(text, phrase) && !(out->data && strstr(out->data, phrase)))
            cq_strbuf_printf(out, "%s%s", out->len ? " " : "", phrase);
}

size_t cq_lexicon_phrases_in(const char *expansion, const char *text) {
    size_t held = 0;
    char phrase[128];
    for (const char *p = expansion; next_phrase(&p, &phrase);) held += strstr(text, phrase) != NULL;
    return held;
}

char *cq_lexicon_expand(const char *text, int *failed) {
    *failed = 0;
    if (!text || !cq_lexicon_enabled()) return NULL;
    cq_strbuf out = {0};
    for (size_t i = 0; i < sizeof zh / sizeof zh[0]; i++)
        if (strstr(text, zh[i].lay)) add_all(&out, text, zh[i].legal);
    for (size_t i = 0; i < sizeof en / sizeof en[0]; i++)
        if (has_word_ci(text, en[i].lay)) add_all(&out, text, en[i].legal);
    *failed = out.failed;
    if (out.len) return cq_strbuf_finish(&out); /* NULL when it failed */
    cq_strbuf_free(&out);
    return NULL;
}

/* The entry whose lay word starts text at p the longest (Chinese: as it is; English: a whole word or its plural, any
 * case: *n then counts the word without the plural's s), or NULL. */
static const entry *lay_at(const char *text, const char *p, size_t *n) {
    const entry *best = NULL;
    *n = 0;
    for (size_t i = 0; i < sizeof zh / sizeof zh[0]; i++) {
        size_t l = strlen(zh[i].lay);
        if (l > *n && !strncmp(p, zh[i].lay, l)) best = &zh[i], *n = l;
    }
    if (best) return best;
    for (size_t i = 0; i < sizeof en / sizeof en[0]; i++)
        if (strlen(en[i].lay) > *n && word_here_ci(text, p, en[i].lay)) best = &en[i], *n = strlen(en[i].lay);
    return best;
}

/* Whether text holds phrase: as a substring (Chinese) or a whole word (English). */
static int holds(const char *text, const char *phrase, bool latin) {
    return latin ? has_word_ci(text, phrase) : strstr(text, phrase) != NULL;
}

char *cq_lexicon_reword(const char *question, const char *passage, int *failed) {
    *failed = 0;
    if (!question || !passage || !cq_lexicon_enabled()) return NULL;
    cq_strbuf out = {0};
    int changed = 0;
    for (const char *p = question; *p;) {
        size_t n;
        const entry *e = lay_at(question, p, &n);
        if (!e) { /* one character on */
            const unsigned char c = (unsigned char)*p;
            size_t len = c < 0xC0 || c >= 0xF8 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            for (size_t k = 1; k < len; k++)
                if (((unsigned char)p[k] & 0xC0) != 0x80) len = k; /* broken or cut: the byte alone */
            cq_strbuf_append(&out, p, len);
            p += len;
            continue;
        }
        const bool latin = isalpha((unsigned char)e->lay[0]);
        char first[128];
        const char *legal = e->legal;
        const int swap = e->said && next_phrase(&legal, &first) && !holds(passage, e->lay, latin) &&
                         holds(passage, first, latin) && !holds(question, e->said, latin);
        if (swap) cq_strbuf_puts(&out, e->said);
        else cq_strbuf_append(&out, p, n);
        changed |= swap;
        p += n;
    }
    *failed = out.failed;
    if (changed && !out.failed) return cq_strbuf_finish(&out);
    cq_strbuf_free(&out);
    return NULL;
}
