#!/usr/bin/env bash
# `npm run bench [-- flags]`: the protocol rows (bench/run.ts, which takes the flags), then the storage rows
# (bench/stores.ts, `npm run bench:stores` for its own flags) unless the run was narrowed with --only. The storage
# rows run even when a protocol row missed its target; the exit status is 1 when either part failed.
set -u
cd "$(dirname "$0")/.."
node --import tsx bench/run.ts "$@"
rows=$?
for arg in "$@"; do
  case "$arg" in
    --only|--only=*|--help) exit "$rows" ;;
  esac
done
[ "$rows" -eq 130 ] && exit 130
node --import tsx bench/stores.ts
stores=$?
[ "$rows" -eq 0 ] && [ "$stores" -eq 0 ]
