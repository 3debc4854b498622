#!/usr/bin/env python3
"""check_dialect_copies.py - what issue 25 asks of the two stores' own code,
kept true: (1) no run of six or more lines stands in a SQLite file and again
in a PostgreSQL file (the shared logic lives in src/providers/sql/), and
(2) the two folders together stay at least 1,500 lines below the 15,793
(.c and .h) they had before the shared SQL layer.

    check_dialect_copies.py SOURCE_DIR

Lines are compared with their spacing collapsed; blank lines, comments and
lines of punctuation alone (braces, a lone ")") are passed over, so a run is
six lines of substance: a statement's SQL, a loop, a call sequence. The
`duplicates` tool also matches runs alike but for names; this is the exact
part of that, cheap enough for every build. Exit 0 clean, 1 a finding, 2
usage."""

import glob
import os
import re
import sys

RUN = 6
LINES_BEFORE = 15793  # src/providers/sqlite + postgres, .c and .h, before
SHRINK = 1500


def substance(path):
    out = []
    in_comment = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, raw in enumerate(f, 1):
            line = re.sub(r"\s+", " ", raw).strip().rstrip("\\").strip()
            if in_comment:
                if "*/" in line:
                    in_comment = False
                continue
            if line.startswith("/*"):
                in_comment = "*/" not in line
                continue
            if line.startswith("//") or re.fullmatch(r"[{}();,\s]*", line):
                continue
            out.append((number, line))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    sqlite = sorted(glob.glob(os.path.join(root, "src/providers/sqlite/*.[ch]")))
    pg = sorted(glob.glob(os.path.join(root, "src/providers/postgres/*.[ch]")))
    if not sqlite or not pg:
        print("check_dialect_copies: no provider sources under", root)
        return 2
    failed = 0
    runs = {}
    for path in pg:
        lines = substance(path)
        for i in range(len(lines) - RUN + 1):
            key = tuple(text for _, text in lines[i:i + RUN])
            runs.setdefault(key, (path, lines[i][0]))
    for path in sqlite:
        lines = substance(path)
        i = 0
        while i <= len(lines) - RUN:
            key = tuple(text for _, text in lines[i:i + RUN])
            if key in runs:
                other, at = runs[key]
                print("check_dialect_copies: %s:%d and %s:%d share %d lines:"
                      % (os.path.relpath(path, root), lines[i][0],
                         os.path.relpath(other, root), at, RUN))
                for text in key:
                    print("    " + text)
                failed = 1
                i += RUN
            else:
                i += 1
    total = 0
    for path in sqlite + pg:
        with open(path, encoding="utf-8", errors="replace") as f:
            total += sum(1 for _ in f)
    limit = LINES_BEFORE - SHRINK
    print("check_dialect_copies: %d lines in the two stores' folders "
          "(at most %d)" % (total, limit))
    if total > limit:
        print("check_dialect_copies: over the issue 25 bound")
        failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
