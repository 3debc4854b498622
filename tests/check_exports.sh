#!/bin/sh
# check_exports.sh LIB - the shared library exports only the public API: every
# defined dynamic symbol starts with "duro_" and none with "duro__" (internal).
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^duro_' || true)
internal=$(printf '%s\n' "$syms" | grep '^duro__' || true)
count=$(printf '%s\n' "$syms" | grep -c '^duro_' || true)
if [ -n "$bad$internal" ]; then
    echo "unexpected exported symbols:" >&2
    printf '%s\n' $bad $internal >&2
    exit 1
fi
for required in duro_runtime_create duro_client_start duro_call_activity \
    duro_provider_open duro_activity_cancel_fd duro_client_store_stats \
    duro_client_metrics_write duro_client_metrics_format \
    duro_version duro_version_number; do
    printf '%s\n' "$syms" | grep -qx "$required" ||
        { echo "missing export: $required" >&2; exit 1; }
done
echo "exports ok: $count public symbols"
