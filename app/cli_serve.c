/* clauseqa serve [--port 8080] [--host 127.0.0.1] [--threads N] [--connections N] [--max-upload-mb N]
 *                [--no-open-mode] [--port-file PATH] [--access-log FILE|-] [--access-log-format text|json]
 *                [--ocr off|auto|force] [--cors-origin URL]... [--allow-host NAME]... [--request-timeout-s N]
 *                [--max-client-connections N] [--max-pages N] [--doc-memory-mb N] [--max-asks N]
 *                [--max-waiting-asks N] ... */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/cli.h"
#include "app/ldap_auth.h"
#include "app/cli_common.h"
#include "app/admission.h"
#include "app/service.h"
#include "core/log.h"
#include "reader/reader.h"
#include "web/server.h"

#define MAX_LIST 32 /* --cors-origin and --allow-host values */

/* --cors-origin and --allow-host values: the flag is repeatable and a value may hold several separated by commas
 * (so that one key of clauseqa.conf can give them all). Values are cut in place: argv's strings are the program's. */
typedef struct {
    const char *items[MAX_LIST + 1]; /* NULL-terminated */
    int n;
} name_list;

static int name_list_add(name_list *l, const char *opt, char *value) {
    char *save = NULL;
    for (char *t = strtok_r(value, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (l->n == MAX_LIST) {
            fprintf(stderr, "clauseqa serve: at most %d values of %s\n", MAX_LIST, opt);
            return -1;
        }
        l->items[l->n++] = t;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: clauseqa serve [--port 8080] [--host 127.0.0.1] [--data DIR] [--threads 16]\n"
            "                      [--connections 128] [--max-upload-mb 64] [--no-open-mode] [--port-file PATH]\n"
            "                      [--access-log FILE|-] [--access-log-format text|json] [--ocr off|auto|force]\n"
            "                      [--cors-origin URL]... [--allow-host NAME]... [--request-timeout-s 30]\n"
            "                      [--max-client-connections 32] [--max-pages 5000] [--doc-memory-mb 512]\n"
            "                      [--max-asks 8] [--max-waiting-asks 256]\n"
            "Serves the page and the REST API (docs/API.md) until SIGINT or SIGTERM; requests in flight finish, the\n"
            "running ingestion job stops between two pages, and jobs not yet done resume at the next start. SIGHUP\n"
            "reopens the access log (log rotation).\n"
            "Every option can also be set in clauseqa.conf's [serve] section (clauseqa --help, docs/API.md).\n"
            "  --port N          TCP port (0: any free port; see --port-file)\n"
            "  --host ADDR       IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
            "  --threads N       worker threads, the most requests handled at once (default 16)\n"
            "  --connections N   connections held open at once, idle keep-alive ones included (default 128); 2\n"
            "                    more are kept for health, metrics and the job routes\n"
            "  --max-upload-mb N largest upload accepted (default 64)\n"
            "  --no-open-mode    require API keys even on a loopback address while none exist\n"
            "  --port-file PATH  write the port listened on to PATH once the server is up\n"
            "  --access-log F    one line a request (time, client, method, path, status, bytes, duration, key)\n"
            "                    appended to file F, or to stdout for '-', or none for 'off'. Default: none; under\n"
            "                    systemd with LogsDirectory= (deploy/clauseqa.service), $LOGS_DIRECTORY/access.log\n"
            "  --access-log-format text (default) or json (JSON lines)\n"
            "  --ocr MODE        OCR of scanned PDF pages for uploads that do not say: auto (default), off, force\n"
            "  --cors-origin URL let pages of this origin (https://portal.example.com) call the API; repeatable, or\n"
            "                    several separated by commas. Default: only the server's own page may; other origins\n"
            "                    cannot change anything\n"
            "  --allow-host NAME accept requests for this host name (besides IP addresses and localhost), such as the\n"
            "                    name a proxy in front passes on; repeatable, or several separated by commas; '*'\n"
            "                    accepts any (turns the DNS-rebinding check off)\n"
            "  --request-timeout-s N  seconds for request headers and for each read and write (default 30)\n"
            "  --max-client-connections N  connections one client address may hold (default 32; 0: no limit)\n"
            CQ_CLI_LIMITS_HELP
            "  --max-asks N      questions answered at once (default 8; each holds a decoder sequence and its cache)\n"
            "  --max-waiting-asks N  questions that may wait for their turn beyond those, each at most 30 s (default\n"
            "                    256; 0: none); past that a question is refused at once with 503 and Retry-After.\n"
            "                    Requests served at once are bounded by --threads too\n"
            "  --answers MODE    generate (the decoder writes verified answers, streamed), extractive, or auto\n"
            "                    (default: generate when the decoder's weights are installed)\n"
            "  --model PATH      decoder GGUF (default: " CQ_DECODER_DEFAULT_FILE " in the models folders)\n"
            "  --device D        cpu, cuda or auto (default) for the decoder\n"
            "  --exact           CPU decoder: float products in decode steps too (the reference; slower)\n"
            "  --adapter DIR     the decoder's trained adapter, or none (default: DATA/models/answer when present)\n"
            "Keys: while no API key has ever existed and the server listens on a loopback address, requests are\n"
            "not authenticated (open mode, for a developer's machine). `clauseqa keys create --role admin` turns\n"
            "authentication on for good: revoking every key does not turn it off;\n"
            "`clauseqa keys open-mode on` does.\n");
}

static void second_interrupt(int sig) {
    (void)sig;
    static const char msg[] = "clauseqa serve: second SIGINT, exiting without waiting\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(130);
    _exit(130);
}

static bool is_loopback(const char *host) { return !strncmp(host, "127.", 4); }

/* The access log: the one configured ("off": none); else, under systemd with LogsDirectory= (deploy/clauseqa.service
 * sets $LOGS_DIRECTORY), access.log in that folder, so that a service writes one by default; else none. */
static const char *access_log_path(const char *configured, char *buf, size_t cap) {
    if (configured) return strcmp(configured, "off") ? configured : NULL;
    const char *dir = getenv("LOGS_DIRECTORY");
    if (!dir || !dir[0] || strchr(dir, ':')) return NULL; /* several folders: none is the obvious one */
    int n = snprintf(buf, cap, "%s/access.log", dir);
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

int cq_cmd_serve(int argc, char **argv) {
    static const struct option opts[] = {{"port", required_argument, 0, 'p'},
                                         {"host", required_argument, 0, 'H'},
                                         {"threads", required_argument, 0, 't'},
                                         {"connections", required_argument, 0, 'c'},
                                         {"max-upload-mb", required_argument, 0, 'm'},
                                         {"no-open-mode", no_argument, 0, 'n'},
                                         {"port-file", required_argument, 0, 'f'},
                                         {"access-log", required_argument, 0, 'a'},
                                         {"access-log-format", required_argument, 0, 'F'},
                                         {"answers", required_argument, 0, 1000},
                                         {"model", required_argument, 0, 1001},
                                         {"device", required_argument, 0, 1002},
                                         {"exact", no_argument, 0, 1004},
                                         {"adapter", required_argument, 0, 1005},
                                         {"ocr", required_argument, 0, 'o'},
                                         {"cors-origin", required_argument, 0, 1006},
                                         {"allow-host", required_argument, 0, 1007},
                                         {"request-timeout-s", required_argument, 0, 1008},
                                         {"max-client-connections", required_argument, 0, 1009},
                                         {"max-pages", required_argument, 0, 1010},
                                         {"doc-memory-mb", required_argument, 0, 1011},
                                         {"max-asks", required_argument, 0, 1012},
                                         {"max-waiting-asks", required_argument, 0, 1013},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *host = "127.0.0.1", *port_file = NULL, *access_log = NULL;
    bool access_json = false;
    long port = 8080, threads = 16, connections = 128, upload_mb = 64, timeout_s = 30, client_connections = 32;
    long max_pages = CQ_READER_DEFAULT_MAX_PAGES, memory_mb = CQ_READER_DEFAULT_MAX_MB;
    long max_asks = CQ_ADMISSION_DEFAULT_ACTIVE, max_waiting = CQ_ADMISSION_DEFAULT_WAITING;
    name_list cors = {0}, hosts = {0};
    bool no_open = false;
    cq_reader_ocr ocr = CQ_OCR_AUTO;
    cq_answer_cli answer_cli = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int a = cq_cli_answer_opt(c, optarg, &answer_cli);
        if (a < 0) return 2;
        if (a) continue;
        switch (c) {
        case 'p': {
            char *end;
            port = strtol(optarg, &end, 10);
            if (*end || port < 0 || port > 65535) {
                fprintf(stderr, "clauseqa serve: --port needs a number from 0 to 65535\n");
                return 2;
            }
            break;
        }
        case 'H': host = optarg; break;
        case 't':
            if ((threads = cq_cli_positive("--threads", optarg)) < 0) return 2;
            break;
        case 'c':
            if ((connections = cq_cli_positive("--connections", optarg)) < 0) return 2;
            break;
        case 'm':
            if ((upload_mb = cq_cli_positive("--max-upload-mb", optarg)) < 0) return 2;
            break;
        case 'n': no_open = true; break;
        case 'f': port_file = optarg; break;
        case 'a': access_log = optarg; break;
        case 'F':
            if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
                fprintf(stderr, "clauseqa serve: --access-log-format is text or json, not '%s'\n", optarg);
                return 2;
            }
            access_json = !strcmp(optarg, "json");
            break;
        case 'o':
            if (!cq_cli_ocr("serve", optarg, &ocr)) return 2;
            break;
        case 1006:
        case 1007:
            if (name_list_add(c == 1006 ? &cors : &hosts, c == 1006 ? "--cors-origin" : "--allow-host", optarg))
                return 2;
            break;
        case 1008:
            if ((timeout_s = cq_cli_positive("--request-timeout-s", optarg)) < 0) return 2;
            break;
        case 1009: {
            char *end;
            client_connections = strtol(optarg, &end, 10);
            if (!*optarg || *end || client_connections < 0) {
                fprintf(stderr, "clauseqa serve: --max-client-connections needs a number (0: no limit)\n");
                return 2;
            }
            break;
        }
        case 1010:
            if ((max_pages = cq_cli_count("--max-pages", optarg)) < 0) return 2;
            break;
        case 1011:
            if ((memory_mb = cq_cli_count("--doc-memory-mb", optarg)) < 0) return 2;
            break;
        case 1012:
            if ((max_asks = cq_cli_positive("--max-asks", optarg)) < 0) return 2;
            break;
        case 1013:
            if ((max_waiting = cq_cli_count("--max-waiting-asks", optarg)) < 0) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: return cq_cli_usage_hint("serve");
        }
    }
    if (optind < argc) {
        fprintf(stderr, "clauseqa serve: unexpected argument '%s'\n", argv[optind]);
        return cq_cli_usage_hint("serve");
    }
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    if (threads > 256 || connections > 4096 || upload_mb > 512 || timeout_s > 3600 || client_connections > 4096) {
        fprintf(stderr, "clauseqa serve: at most 256 threads, 4096 connections, 512 MB uploads and a 3600 s "
                        "request timeout\n");
        return 2;
    }
    const char *data_dir = cq_cli_data_dir();

    /* Signals are taken by sigwait below: block them before any thread starts so that every thread inherits it. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    cq_err err = {0};
    if (cq_web_listen_check(host, (int)port, &err)) { /* before the models take their seconds to load */
        fprintf(stderr, "clauseqa serve: %s\n", err.msg);
        return err.code == CQ_ERR_INVALID ? 2 : 1;
    }
    int dec_failed;
    const cq_models *models = cq_cli_models();
    cq_decoder *dec = cq_cli_answer_decoder("serve", &answer_cli, &dec_failed);
    if (dec_failed) return 1;
    if (dec) {
        const cq_device on = cq_decoder_get_info(dec)->device;
        const char *weights = cq_models_reader(models, answer_cli.model, on);
        CQ_INFO("answers: generated by %s on %s, weights %s (%s)", cq_decoder_get_info(dec)->name, cq_device_name(on),
                weights, answer_cli.model ? "--model" : weights == models->decoder_gpu ? models->decoder_gpu_origin
                                                                                       : models->decoder_origin);
    }
    else if (answer_cli.answers)
        CQ_INFO("answers: extractive (--answers extractive)");
    cq_ldap_config ldap; /* [ldap] and $CLAUSEQA_LDAP_* (app/ldap_auth.h) */
    if (cq_ldap_config_read(cq_cli_config(), &ldap, &err)) {
        fprintf(stderr, "clauseqa serve: %s\n", err.msg);
        cq_decoder_close(dec);
        return 2;
    }
    if (ldap.url[0])
        CQ_INFO("sign-in: LDAP at %s%s (%zu group mappings), local accounts too", ldap.url,
                ldap.starttls ? " with StartTLS" : "", ldap.n_map);
    cq_service *svc = NULL;
    cq_service_config sc = {.ldap = &ldap, .data_dir = data_dir, .store = cq_cli_store_where(), .allow_open = is_loopback(host) && !no_open,
                            .max_connections = (int)threads + 2, .decoder = dec, .models = models, .ocr = ocr,
                            .max_pages = max_pages ? (int)max_pages : -1,
                            .doc_memory_mb = memory_mb ? (int)memory_mb : -1,
                            .max_asks = max_asks > 100000 ? 100000 : (int)max_asks,
                            .max_waiting_asks = max_waiting ? (max_waiting > 100000 ? 100000 : (int)max_waiting) : -1};
    if (cq_service_open(&sc, &svc, &err)) {
        fprintf(stderr, "clauseqa serve: %s\n", err.msg);
        cq_decoder_close(dec);
        return 1;
    }
    char default_log[4096];
    access_log = access_log_path(access_log, default_log, sizeof default_log);
    cq_web_service ws;
    cq_service_web(svc, &ws);
    cq_web_config wc = {
        .host = host,
        .port = (int)port,
        .threads = (int)threads,
        .connections = (int)connections,
        .max_upload_bytes = (size_t)upload_mb << 20,
        .request_timeout_ms = (int)timeout_s * 1000,
        .max_client_connections = client_connections ? (int)client_connections : -1,
        .cors_origins = cors.items,
        .allowed_hosts = hosts.items,
        .spool_dir = cq_service_spool_dir(svc),
        .access_log = access_log,
        .access_log_json = access_json,
    };
    cq_web_server *server = NULL;
    if (cq_web_start(&wc, &ws, &server, &err)) {
        fprintf(stderr, "clauseqa serve: %s\n", err.msg);
        cq_service_close(svc);
        cq_decoder_close(dec);
        return 1;
    }
    int bound = cq_web_port(server);
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (f) {
            fprintf(f, "%d\n", bound);
            fclose(f);
        }
    }
    for (int i = 0; i < cors.n; i++) CQ_INFO("CORS: pages of %s may call the API", cors.items[i]);
    if (cq_service_open_mode(svc))
        CQ_WARN("open mode: no API key has been made, so requests are not authenticated (this machine only). Turn "
                "authentication on with: clauseqa keys create --role admin --data %s",
                data_dir);
    else
        CQ_INFO("authentication on: requests need an API key (clauseqa keys create --role admin --data %s makes "
                "one)",
                data_dir);
    if (access_log && strcmp(access_log, "-")) CQ_INFO("access log: %s", access_log);
    /* The address last, where the eye lands. */
    const char *config = cq_cli_config_path();
    CQ_INFO("serving http://%s:%d/ (data: %s%s%s, %ld threads; Ctrl-C stops)", host, bound, data_dir,
            config ? ", configuration: " : "", config ? config : "", threads);

    int sig = 0;
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP) {
        if (cq_web_reopen_logs(server, &err)) CQ_ERROR("SIGHUP: %s", err.msg);
        else if (access_log) CQ_INFO("SIGHUP: access log reopened");
    }
    /* While stopping, a second SIGTERM is ignored (CivetWeb's threads do not all keep the signals blocked) and a
     * second SIGINT (Ctrl-C again) ends the process at once. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, second_interrupt);
    CQ_INFO("%s: stopping (requests in flight finish; the running ingestion job stops between two pages; "
            "unfinished jobs resume at the next start)", sig == SIGINT ? "SIGINT" : "SIGTERM");
    cq_service_interrupt_jobs(svc);
    cq_web_stop(server);
    cq_service_close(svc);
    cq_decoder_close(dec);
    CQ_INFO("stopped");
    return 0;
}
