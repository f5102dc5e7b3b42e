#!/usr/bin/env bash
# Ingests data/demo into the knowledge base "demo" (already present files are skipped); says so in one line.
# usage: tools/demo_kb.sh BINARY DATA_DIR
set -euo pipefail
bin=${1:-build/clauseqa}
data=${2:-data}
here=$(cd "$(dirname "$0")/.." && pwd)
summary=$("$bin" ingest --data "$data" --kb demo "$here"/data/demo/*.pdf "$here"/data/demo/*.md 2>&1 | tail -n 1)
echo "demo knowledge base 'demo' in $data/: $summary"
