#!/usr/bin/env python3
"""check_call_cycles.py - no two source files of a layer call into each
other in a loop (issue 25: the providers, the runtime, the duro command).

    check_call_cycles.py [--nm NM] OBJECT...

The OBJECTs are the object files of the targets checked (CMake passes
$<TARGET_OBJECTS:...>: exactly what is built, no stale file). An edge A -> B means A's object leaves undefined a symbol
that B's defines (nm: exact, after the preprocessor; static functions are
not seen, which is right: they cannot be called from another file). The
graph spans all OBJECTs together; each strongly connected component of more
than one file is a loop. The loops known today are listed in KNOWN, each
with the issue that removes it: a loop not listed fails, and so does a
listed one that is gone or has changed (edit KNOWN so it stays true).
Exit 0 clean, 1 a loop, 2 usage or nm failure."""
import os
import subprocess
import sys

# The loops that stand today. Each file set is exact (object names without
# directories). The providers have none (issue 25: the shared SQL layer
# calls each store through its dialect's table, the URL dispatcher is
# above them, their helpers below); engine.c and retry.c (the retry composites call back into the
# engine's task API) are one module split in two files. The duro command
# has none: main.c above the verbs, cli.c, words.c and ui_reply.c below.
KNOWN = [
    {"engine.c.o", "retry.c.o"},
]


def symbols(nm, path):
    out = subprocess.run([nm, "-P", path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"check_call_cycles: {nm} {path}: {out.stderr.strip()}")
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBR":  # global text, data, bss, read-only
            defined.add(name)
    return defined, undefined


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def main(argv):
    nm = "nm"
    if len(argv) >= 2 and argv[0] == "--nm":
        nm, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    objects = [a for part in argv for a in part.split(";") if a]
    missing = [o for o in objects if not os.path.isfile(o)]
    if not objects or missing:
        print(f"check_call_cycles: no object files, or missing: {missing}",
              file=sys.stderr)
        return 2
    names = {o: os.path.basename(o) for o in objects}
    if len(set(names.values())) != len(objects):
        print("check_call_cycles: two object files share a name",
              file=sys.stderr)
        return 2
    defined_by, undefined = {}, {}
    for o in objects:
        d, u = symbols(nm, o)
        undefined[o] = u
        for s in d:
            defined_by[s] = o
    edges = {o: {defined_by[s] for s in undefined[o]
                 if s in defined_by and defined_by[s] != o}
             for o in objects}
    loops = [{names[o] for o in c}
             for c in components(sorted(objects), edges) if len(c) > 1]
    failed = 0
    for loop in loops:
        if loop not in KNOWN:
            failed = 1
            print("a loop of calls between files: " + ", ".join(sorted(loop)))
    for known in KNOWN:
        if known not in loops:
            failed = 1
            print("a known loop is gone or changed (update KNOWN): " +
                  ", ".join(sorted(known)))
    print(f"{len(objects)} object files, {len(loops)} loop(s), "
          f"{len(KNOWN)} known")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
