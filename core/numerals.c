#include "core/numerals.h"

#include <stdio.h>
#include <string.h>

#include "core/utf8.h"

static int digit_value(unsigned int cp) {
    switch (cp) {
    case 0x96F6: case 0x3007: return 0;              /* 零 〇 */
    case 0x4E00: case 0x58F9: return 1;              /* 一 壹 */
    case 0x4E8C: case 0x4E24: case 0x8D30: return 2; /* 二 两 贰 */
    case 0x4E09: case 0x53C1: return 3;              /* 三 叁 */
    case 0x56DB: case 0x8086: return 4;              /* 四 肆 */
    case 0x4E94: case 0x4F0D: return 5;              /* 五 伍 */
    case 0x516D: case 0x9646: return 6;              /* 六 陆 */
    case 0x4E03: case 0x67D2: return 7;              /* 七 柒 */
    case 0x516B: case 0x634C: return 8;              /* 八 捌 */
    case 0x4E5D: case 0x7396: return 9;              /* 九 玖 */
    default: return -1;
    }
}

static long unit_value(unsigned int cp) {
    switch (cp) {
    case 0x5341: case 0x62FE: return 10;    /* 十 拾 */
    case 0x767E: case 0x4F70: return 100;   /* 百 佰 */
    case 0x5343: case 0x4EDF: return 1000;  /* 千 仟 */
    case 0x4E07: return 10000;              /* 万 */
    default: return 0;
    }
}

bool cq_is_cn_numeral(unsigned int cp) { return digit_value(cp) >= 0 || unit_value(cp) > 0; }

static long roman_letter(char c) {
    switch (c) {
    case 'I': case 'i': return 1;
    case 'V': case 'v': return 5;
    case 'X': case 'x': return 10;
    case 'L': case 'l': return 50;
    case 'C': case 'c': return 100;
    default: return 0;
    }
}

long cq_roman_parse(const char *s, size_t n, size_t *used) {
    size_t i = 0;
    long total = 0;
    while (i < n && roman_letter(s[i])) {
        long v = roman_letter(s[i]), next = i + 1 < n ? roman_letter(s[i + 1]) : 0;
        total += v < next ? -v : v;
        i++;
    }
    *used = i;
    return i ? total : -1;
}

long cq_number_parse(const char *s, size_t n, size_t *used) {
    size_t i = 0, len;
    *used = 0;
    if (n == 0) return -1;
    uint32_t cp = cq_utf8_decode(s, n, &len);
    if ((cp >= '0' && cp <= '9') || (cp >= 0xFF10 && cp <= 0xFF19)) {
        long v = 0;
        while (i < n) {
            cp = cq_utf8_decode(s + i, n - i, &len);
            int d = (cp >= '0' && cp <= '9') ? (int)(cp - '0') : (cp >= 0xFF10 && cp <= 0xFF19) ? (int)(cp - 0xFF10) : -1;
            if (d < 0) break;
            v = v * 10 + d;
            if (v > 99999999) return -1;
            i += len;
        }
        *used = i;
        return v;
    }
    /* Chinese: total = sum of (digit * unit) within the current 万 section; a bare unit means 1 × unit (十二 = 12). */
    long total = 0, section = 0, digit = -1;
    bool any = false, prev_digit = false;
    while (i < n) {
        cp = cq_utf8_decode(s + i, n - i, &len);
        int d = digit_value(cp);
        long u = unit_value(cp);
        if (d >= 0) {
            digit = prev_digit ? digit * 10 + d : d; /* a run of digits reads positionally: 二〇二一 = 2021 */
            if (digit > 99999999) return -1;
            prev_digit = true;
        } else if (u == 10000) {
            section += digit > 0 ? digit : 0;
            if (section == 0) section = 1;
            total += section * 10000;
            section = 0;
            digit = -1;
        } else if (u > 0) {
            section += (digit >= 0 ? (digit == 0 ? 1 : digit) : 1) * u;
            digit = -1;
        } else {
            break;
        }
        if (d < 0) prev_digit = false;
        any = true;
        i += len;
    }
    if (!any) return -1;
    if (digit > 0) section += digit;
    total += section;
    if (total > 99999999) return -1;
    *used = i;
    return total;
}

long cq_number_parse_ref(const char *s, size_t n, size_t *used) {
    long v = cq_number_parse(s, n, used);
    if (v >= 0) return v;
    size_t i = 0, len;
    while (i < n) {
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        if (!((cp >= '0' && cp <= '9') || (cp >= 0xFF10 && cp <= 0xFF19) || cq_is_cn_numeral(cp))) break;
        i += len;
    }
    *used = i;
    return i ? CQ_NUMBER_TOO_LARGE : -1;
}

char *cq_number_format_cn(long v, char *out) {
    static const char *digits[] = {"零", "一", "二", "三", "四", "五", "六", "七", "八", "九"};
    static const char *units[] = {"", "十", "百", "千"};
    out[0] = 0;
    if (v < 0 || v >= 100000000) {
        snprintf(out, 64, "%ld", v);
        return out;
    }
    if (v == 0) {
        strcpy(out, digits[0]);
        return out;
    }
    long parts[2] = {v / 10000, v % 10000};
    bool need_zero = false, started = false;
    for (int p = 0; p < 2; p++) {
        long x = parts[p];
        if (x == 0) {
            if (started) need_zero = true;
            continue;
        }
        int d[4] = {(int)(x / 1000), (int)(x / 100 % 10), (int)(x / 10 % 10), (int)(x % 10)};
        for (int k = 0; k < 4; k++) {
            if (d[k] == 0) {
                if (started) need_zero = true;
                continue;
            }
            if (need_zero) strcat(out, digits[0]);
            need_zero = false;
            /* 10..19 at the very start read 十, 十二 (not 一十二); elsewhere 一百一十. */
            if (!(k == 2 && d[k] == 1 && !started)) strcat(out, digits[d[k]]);
            strcat(out, units[3 - k]);
            started = true;
        }
        if (p == 0) {
            strcat(out, "万");
            need_zero = parts[1] > 0 && parts[1] < 1000;
        }
    }
    return out;
}
