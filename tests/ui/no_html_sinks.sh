#!/bin/sh
# no_html_sinks.sh - fails when anything under tools/duro/web/ could turn
# data into markup or code: the page renders every string with textContent.
#   no_html_sinks.sh WEBDIR
set -u
dir=${1:?usage: no_html_sinks.sh WEBDIR}
if grep -rnE 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval[[:space:]]*\(|\bFunction[[:space:]]*\(|setTimeout[[:space:]]*\([[:space:]]*["'\'']|javascript:' "$dir"; then
    echo "no_html_sinks: the lines above build HTML or code from strings" >&2
    exit 1
fi
if grep -rnE '<script>|<script [^>]*>[^<]|[[:space:]]on[a-z]+=' "$dir"/*.html; then
    echo "no_html_sinks: inline script or handler (the CSP forbids it)" >&2
    exit 1
fi
echo "no_html_sinks: ok"
