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
} entry;

/* Chinese: matched as substrings. Each statutory phrase is the wording of the articles that regulate the matter
 * (劳动法 / 劳动合同法, 民法典, 刑法, 道路交通安全法, 消费者权益保护法, 著作权法). */
static const entry zh[] = {
    /* work */
    {"加班费", "延长工作时间 工资报酬"},
    {"加班", "延长工作时间"},
    {"工资", "劳动报酬"},
    {"薪水", "工资 劳动报酬"},
    {"薪资", "工资 劳动报酬"},
    {"欠薪", "拖欠 劳动报酬"},
    {"老板", "用人单位"},
    {"员工", "劳动者"},
    {"工人", "劳动者"},
    {"打工", "劳动者 用人单位"},
    {"辞退", "解除劳动合同"},
    {"开除", "解除劳动合同"},
    {"解雇", "解除劳动合同"},
    {"炒鱿鱼", "解除劳动合同"},
    {"辞职", "解除劳动合同"},
    {"离职", "解除劳动合同 终止劳动合同"},
    {"跳槽", "解除劳动合同"},
    {"裁员", "裁减人员"},
    {"遣散费", "经济补偿"},
    {"补偿金", "经济补偿"},
    {"年假", "带薪年休假"},
    {"社保", "社会保险"},
    {"五险一金", "社会保险 住房公积金"},
    {"合同到期", "期满"},
    {"上下班路上", "上下班途中"},
    /* family */
    {"孩子", "子女 未成年人"},
    {"小孩", "子女 未成年人"},
    {"儿子", "子女"},
    {"女儿", "子女"},
    {"老人", "老年人"},
    {"老公", "配偶 夫妻"},
    {"老婆", "配偶 夫妻"},
    {"丈夫", "配偶"},
    {"妻子", "配偶"},
    {"彩礼", "借婚姻索取财物"},
    {"私生子", "非婚生子女"},
    {"领养", "收养"},
    /* property, contracts, money */
    {"房东", "出租人"},
    {"租客", "承租人"},
    {"房客", "承租人"},
    {"租房", "租赁 承租人"},
    {"借钱", "借款"},
    {"欠钱", "债务 借款"},
    {"欠债", "债务"},
    {"还钱", "返还 借款 清偿"},
    {"赔钱", "赔偿"},
    {"商家", "经营者"},
    {"卖家", "出卖人 经营者"},
    {"买家", "买受人 消费者"},
    {"网购", "网络 电子商务"},
    {"假货", "假冒 伪劣"},
    {"物业公司", "物业服务人"},
    {"开公司", "设立 公司"},
    {"执照", "营业执照 许可证"},
    {"装修", "装饰装修"},
    {"宠物", "饲养的动物"},
    {"狗咬", "饲养的动物 损害"},
    {"高空抛物", "抛掷物品"},
    {"盗版", "复制 著作权"},
    {"抄袭", "剽窃"},
    /* crime, traffic, courts */
    {"打人", "殴打 伤害"},
    {"打伤", "伤害"},
    {"偷东西", "盗窃"},
    {"小偷", "盗窃"},
    {"偷窃", "盗窃"},
    {"骗钱", "诈骗"},
    {"骗子", "诈骗"},
    {"坐牢", "有期徒刑"},
    {"判刑", "刑罚"},
    {"罚钱", "罚款"},
    {"酒驾", "饮酒 驾驶"},
    {"醉驾", "醉酒 驾驶"},
    {"车祸", "交通事故"},
    {"撞人", "交通事故"},
    {"交警", "公安机关交通管理部门"},
    {"打官司", "诉讼"},
};

/* English: whole words, any case. */
static const entry en[] = {
    {"landlord", "lessor"},
    {"tenant", "lessee"},
    {"fired", "terminate termination"},
    {"firing", "terminate termination"},
    {"boss", "employer"},
    {"quit", "resign resignation termination"},
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

/* Whether word occurs in text as a whole word or its plural in s, any case (word characters: ASCII letters and
 * digits). */
static int has_word_ci(const char *text, const char *word) {
    size_t n = strlen(word);
    for (const char *p = text; *p; p++) {
        if (strncasecmp(p, word, n) || (p > text && isalnum((unsigned char)p[-1]))) continue;
        size_t end = n + ((p[n] == 's' || p[n] == 'S') && !isalnum((unsigned char)p[n + 1]));
        if (!isalnum((unsigned char)p[end])) return 1;
    }
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
