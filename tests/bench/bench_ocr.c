/* OCR speed and accuracy on a scan of a real law.
 *
 *   bench_ocr [PDF] [--dpi 200] [--pages N] [--threads 1,2]
 *
 * PDF (default data/demo/劳动法(2018-12-29).pdf, 9 pages) is scanned by MuPDF (each page drawn in grey at --dpi
 * and put alone on a page, tests/unit/test_scan_util.h), then read by the PDF reader with OCR on as many threads as
 * each --threads entry says. Prints per run the wall time, pages per second and CPU time, and the character
 * accuracy of every page against the original's text layer (NFKC, white space ignored; the first run's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "reader/reader.h"
#include "../unit/test_scan_util.h"

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static cq_status read_pdf(const char *path, cq_reader_ocr ocr, int threads, cq_doctext *d, cq_err *err) {
    cq_reader_input in = {.path = path, .ocr = ocr, .ocr_threads = threads};
    return cq_reader_format_named("pdf")->read(&in, d, err);
}

int main(int argc, char **argv) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char def[1024];
    snprintf(def, sizeof def, "%s/data/demo/劳动法(2018-12-29).pdf", src ? src : ".");
    const char *pdf = def, *thread_list = "1,2";
    int dpi = 200, max_pages = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dpi") && i + 1 < argc) dpi = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pages") && i + 1 < argc) max_pages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) thread_list = argv[++i];
        else pdf = argv[i];
    }
    cq_doctext orig;
    cq_err err = {0};
    if (read_pdf(pdf, CQ_OCR_OFF, 0, &orig, &err)) {
        fprintf(stderr, "bench_ocr: %s\n", err.msg);
        return 1;
    }
    int n = max_pages > 0 && max_pages < orig.n_pages ? max_pages : orig.n_pages;
    scan_page *pages = calloc((size_t)n, sizeof *pages);
    for (int i = 0; i < n; i++) pages[i] = (scan_page){i, true, NULL};
    char scan[128], why[256];
    snprintf(scan, sizeof scan, "/tmp/bench_ocr_%d.pdf", (int)getpid());
    if (scan_pdf(pdf, scan, dpi, pages, n, why, sizeof why)) {
        fprintf(stderr, "bench_ocr: scanning %s: %s\n", pdf, why);
        return 1;
    }
    printf("%s: %d pages scanned at %d dpi; OCR %s, %d online CPUs\n\n", pdf, n, dpi, CQ_OCR_LANGUAGES,
           (int)sysconf(_SC_NPROCESSORS_ONLN));
    printf("| threads | wall s | pages/s | CPU s | mean confidence |\n|---|---|---|---|---|\n");
    cq_doctext first = {0};
    for (const char *t = thread_list; *t;) {
        int threads = atoi(t);
        double w0 = cq_clock_seconds(), c0 = cpu_seconds();
        cq_doctext d;
        if (read_pdf(scan, CQ_OCR_AUTO, threads, &d, &err)) {
            fprintf(stderr, "bench_ocr: %s\n", err.msg);
            return 1;
        }
        double wall = cq_clock_seconds() - w0, cpu = cpu_seconds() - c0, conf = 0;
        for (int p = 0; p < d.n_pages; p++) conf += d.pages[p].ocr_confidence / d.n_pages;
        printf("| %d | %.1f | %.2f | %.1f | %.2f |\n", threads, wall, n / wall, cpu, conf);
        if (!first.text) first = d;
        else cq_doctext_free(&d);
        const char *comma = strchr(t, ',');
        t = comma ? comma + 1 : t + strlen(t);
    }
    printf("\n| page | characters | accuracy |\n|---|---|---|\n");
    double sum = 0, chars = 0;
    for (int p = 0; p < n && p < first.n_pages; p++) {
        const cq_page *a = &orig.pages[p], *b = &first.pages[p];
        double acc = scan_char_accuracy(orig.text + a->text_start, a->text_end - a->text_start,
                                        first.text + b->text_start, b->text_end - b->text_start);
        printf("| %d | %u | %.4f |\n", p + 1, a->n_chars, acc);
        sum += acc * a->n_chars;
        chars += a->n_chars;
    }
    printf("| all | %.0f | %.4f |\n", chars, chars ? sum / chars : 0);
    cq_doctext_free(&first);
    cq_doctext_free(&orig);
    free(pages);
    unlink(scan);
    return 0;
}
