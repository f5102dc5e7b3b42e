#!/usr/bin/env bash
# Bounded libFuzzer run of tests/fuzz/fuzz_http.c: makes the seed corpus (one request per route and per kind of
# body, and the malformed shapes the hostile campaign of issue 16 used), then fuzzes for SECONDS.
#   usage: run_fuzz.sh path/to/fuzz_http SECONDS [WORKDIR]
# A crash leaves its input as WORKDIR/crash-* (replay: fuzz_http FILE). Longer runs: docs/RELIABILITY.md.
set -euo pipefail
fuzzer=$1
seconds=$2
work=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus"
seed() { printf "$2" > "$work/corpus/$1"; }

H='Host: 127.0.0.1\r\n'
seed health            "GET /api/v1/health HTTP/1.1\r\n$H\r\n"
seed metrics           "GET /metrics HTTP/1.1\r\n$H\r\n"
seed page              "GET / HTTP/1.1\r\n$H\r\nGET /app.js HTTP/1.1\r\n$H\r\n"
seed head              "HEAD /api/v1/kbs HTTP/1.1\r\n$H\r\n"
seed kbs               "GET /api/v1/kbs HTTP/1.1\r\n${H}Authorization: Bearer reader\r\n\r\n"
seed kb_create         "POST /api/v1/kbs HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"name\":\"新法\"}"
seed kb_delete         "DELETE /api/v1/kbs/%%E5%%90%%88%%E5%%90%%8C HTTP/1.1\r\n$H\r\n"
seed retrieve          "POST /api/v1/kbs/laws/retrieve HTTP/1.1\r\n${H}Content-Length: 46\r\n\r\n{\"question\":\"第四十四条\",\"k\":5,\"mode\":\"bm25\"}"
seed ask_sse           "POST /api/v1/kbs/laws/ask HTTP/1.1\r\n${H}Accept: text/event-stream\r\nContent-Length: 46\r\n\r\n{\"question\":\"加班工资\",\"history\":[{\"role\":\"user\"}]}"
seed chat              "POST /v1/chat/completions HTTP/1.1\r\n${H}Content-Length: 75\r\n\r\n{\"model\":\"laws\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"
seed chunked           "POST /api/v1/kbs HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n8\r\n{\"name\":\r\n7\r\n \"cq1\"}\r\n0\r\n\r\n"
seed upload_raw        "PUT /api/v1/kbs/laws/documents?filename=a.md&replace=1 HTTP/1.1\r\n${H}Content-Length: 12\r\n\r\n# A\n\nText.\n"
seed upload_xname      "POST /api/v1/kbs/laws/documents HTTP/1.1\r\n${H}X-Filename: %%E6%%B3%%95.txt\r\nContent-Length: 4\r\n\r\ntext"
seed upload_form       "POST /api/v1/kbs/laws/documents HTTP/1.1\r\n${H}Content-Type: multipart/form-data; boundary=XB\r\nContent-Length: 143\r\n\r\n--XB\r\nContent-Disposition: form-data; name=\"replace\"\r\n\r\ntrue\r\n--XB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.md\"\r\n\r\n# A\r\n--XB--\r\n"
seed ids               "GET /api/v1/documents/7/pages/2.png?clause=3&width=500 HTTP/1.1\r\n$H\r\nGET /api/v1/clauses/9 HTTP/1.1\r\n$H\r\nGET /api/v1/jobs/101 HTTP/1.1\r\n$H\r\nPOST /api/v1/jobs/7/cancel HTTP/1.1\r\n$H\r\n"
seed preflight         "OPTIONS /api/v1/kbs HTTP/1.1\r\n${H}Origin: https://portal.example.com\r\nAccess-Control-Request-Method: POST\r\n\r\n"
seed foreign_origin    "DELETE /api/v1/kbs/laws HTTP/1.1\r\n${H}Origin: http://evil.example\r\n\r\n"
seed foreign_host      "GET /api/v1/kbs HTTP/1.1\r\nHost: rebind.example:8080\r\n\r\n"
seed nul_path          "GET /api/v1/kbs/laws%%00x HTTP/1.1\r\n$H\r\n"
seed bad_utf8          "GET /api/v1/kbs/%%FF%%C0%%AF HTTP/1.1\r\n$H\r\n"
seed nul_json          "POST /api/v1/kbs HTTP/1.1\r\n${H}Content-Length: 24\r\n\r\n{\"name\":\"laws\\\\u0000x\"}  "
seed trailing          "POST /api/v1/kbs HTTP/1.1\r\n${H}Content-Length: 19\r\n\r\n{\"name\":\"a\"}garbage"
seed huge_length       "POST /api/v1/kbs HTTP/1.1\r\n${H}Content-Length: 99999999999\r\n\r\n{"
seed short_body        "POST /api/v1/kbs/laws/ask HTTP/1.1\r\n${H}Content-Length: 200\r\n\r\n{\"question\":"
seed bad_key           "GET /api/v1/kbs HTTP/1.1\r\n${H}Authorization: Bearer bad\r\n\r\n"
seed garbage           "GARBAGE\r\n\r\n"
seed login             "POST /api/v1/login HTTP/1.1\r\n${H}Origin: http://127.0.0.1\r\nContent-Length: 38\r\n\r\n{\"user\":\"alice\",\"password\":\"password\"}"
seed session           "GET /api/v1/me HTTP/1.1\r\n${H}Cookie: a=b; cq_session=cqs_ok\r\n\r\nPOST /api/v1/kbs/laws/ask HTTP/1.1\r\n${H}Cookie: cq_session=cqs_ok\r\nSec-Fetch-Site: cross-site\r\nContent-Length: 16\r\n\r\n{\"question\":\"x\"}POST /api/v1/logout HTTP/1.1\r\n${H}Cookie: cq_session=cqs_ok\r\n\r\n"
seed audit             "GET /api/v1/audit?limit=5&before=9&action=upload HTTP/1.1\r\n$H\r\n"
seed asterisk          "GET * HTTP/1.1\r\n$H\r\nOPTIONS * HTTP/1.1\r\n$H\r\n"
seed absolute          "GET /api/v1/health HTTP/1.1\r\n$H\r\nGET http://127.0.0.1/api/v1/kbs HTTP/1.1\r\n$H\r\n"
seed two_origins       "POST /api/v1/kbs HTTP/1.1\r\n${H}Origin: http://127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Length: 12\r\n\r\n{\"name\":\"o\"}"
seed json_twice        "POST /api/v1/kbs HTTP/1.1\r\n${H}Content-Length: 23\r\n\r\n{\"name\":\"a\",\"name\":\"b\"}"
seed http10            "GET /api/v1/health HTTP/1.0\r\n\r\n"
seed doc_search        "GET /api/v1/documents/7/search?q=%%E5%%8A%%A0%%E7%%8F%%AD HTTP/1.1\r\n$H\r\nGET /api/v1/documents/7/search?q= HTTP/1.1\r\n$H\r\nGET /api/v1/documents/101/search?q=Wages HTTP/1.1\r\n$H\r\n"
seed version_put       "PUT /api/v1/documents/7/version HTTP/1.1\r\n${H}Content-Length: 47\r\n\r\n{\"label\":\"2018年版\",\"effective\":\"2019-01-01\"}"
seed compare           "GET /api/v1/documents/7/compare/8?clause=%%E7%%AC%%AC%%E5%%85%%AD%%E5%%8D%%81%%E6%%9D%%A1&changed=1 HTTP/1.1\r\n$H\r\n"
seed conversations     "GET /api/v1/conversations?kb=laws&all=1 HTTP/1.1\r\n$H\r\nGET /api/v1/conversations/5 HTTP/1.1\r\n$H\r\nDELETE /api/v1/conversations/404 HTTP/1.1\r\n$H\r\n"
seed conversation_name "PATCH /api/v1/conversations/5 HTTP/1.1\r\n${H}Content-Length: 18\r\n\r\n{\"title\":\"工资\"}"
seed ask_kept          "POST /api/v1/kbs/laws/ask HTTP/1.1\r\n${H}Content-Length: 53\r\n\r\n{\"question\":\"加班\",\"conversation_id\":5,\"keep\":true}"

set +e
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -detect_leaks=0 -print_final_stats=1 \
  -dict="$here/http.dict" -artifact_prefix="$work/" "$work/corpus" > "$work/fuzz.log" 2>&1
rc=$?
grep -E '^#[0-9]+.*(INITED|DONE)|^stat::|^Done|ERROR|SUMMARY|runtime error|not |no end|crash-|Test unit' "$work/fuzz.log"
exit $rc
