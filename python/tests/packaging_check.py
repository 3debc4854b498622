"""packaging_check.py - CTest's python_packaging: the package builds and
installs offline as issue 24 says. In a temporary directory, from a copy of
the checkout's python/, src/, include/ and LICENSE:

1. `python3 -m build --no-isolation` makes an sdist (carrying the C tree
   under csrc/, no path outside it) and, from that sdist unpacked
   elsewhere, a cp310-abi3 wheel;
2. the wheel installs into a fresh `venv --system-site-packages` and
   examples/python/process_order.py runs with that venv's python from a
   directory outside the repository, importing duro from the venv;
3. `pip install --no-build-isolation ./python` installs into another fresh
   venv, and the example runs there too.

No network: pip gets --no-index. The venvs are made --without-pip and use
Debian's pip (python3-pip) through --system-site-packages.

    python3 python/tests/packaging_check.py REPO_ROOT

Exits 0 when all of it worked; on a failure prints what ran and keeps the
temporary directory."""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

EXPECTED = ": Completed {'status': 'approved', 'by': 'alice', 'charged': 42}"


def run(cmd, cwd, env, timeout=300):
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    print(f"$ {' '.join(cmd)}  ({time.monotonic() - t0:.1f} s, "
          f"exit {out.returncode})", flush=True)
    if out.returncode != 0:
        print(out.stdout[-4000:], out.stderr[-4000:], sep="\n")
        raise SystemExit(f"packaging_check: failed: {' '.join(cmd)}")
    return out.stdout


def copy_checkout(root, dest):
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info",
                                    "__pycache__", "*.db*")
    for part in ("python", "src", "include"):
        shutil.copytree(os.path.join(root, part), os.path.join(dest, part),
                        ignore=ignore)
    shutil.copy(os.path.join(root, "LICENSE"), dest)


def make_venv(path, env):
    run([sys.executable, "-m", "venv", "--system-site-packages",
         "--without-pip", path], cwd=os.path.dirname(path), env=env)
    return os.path.join(path, "bin", "python")


def run_example(python, example, rundir, env):
    os.makedirs(rundir)
    where = run([python, "-c", "import duro, sys; print(duro.__file__); "
                 "print(sys.prefix)"], cwd=rundir, env=env).split()
    venv = os.path.dirname(os.path.dirname(python))
    if not where[0].startswith(venv + os.sep):
        raise SystemExit(f"packaging_check: duro imported from {where[0]}, "
                         f"not from the venv {venv}")
    out = run([python, example, "sqlite:orders.db"], cwd=rundir, env=env)
    if EXPECTED not in out:
        raise SystemExit(f"packaging_check: the example printed {out!r}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: packaging_check.py REPO_ROOT")
    root = os.path.abspath(sys.argv[1])
    example = os.path.join(root, "examples", "python", "process_order.py")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    tmp = tempfile.mkdtemp(prefix="duro-packaging-")
    ok = False
    try:
        checkout = os.path.join(tmp, "checkout")
        copy_checkout(root, checkout)
        dist = os.path.join(tmp, "dist")

        # 1. sdist, then a wheel from it
        run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
             dist, os.path.join(checkout, "python")], cwd=tmp, env=env)
        sdists = glob.glob(os.path.join(dist, "duro-*.tar.gz"))
        wheels = glob.glob(os.path.join(dist, "duro-*-cp310-abi3-*.whl"))
        if len(sdists) != 1 or len(wheels) != 1:
            raise SystemExit(f"packaging_check: {os.listdir(dist)} is not "
                             "one sdist and one cp310-abi3 wheel")
        with tarfile.open(sdists[0]) as t:
            names = t.getnames()
        top = names[0].split("/")[0]
        for need in ("setup.py", "pyproject.toml", "src/duro_module.c",
                     "csrc/src/core/engine.c", "csrc/include/duro.h",
                     "csrc/src/providers/sqlite/sources.cmake"):
            if f"{top}/{need}" not in names:
                raise SystemExit(f"packaging_check: the sdist lacks {need}")
        if any(".." in n.split("/") for n in names):
            raise SystemExit("packaging_check: the sdist has a path with ..")
        with zipfile.ZipFile(wheels[0]) as z:
            if "duro/_duro.abi3.so" not in z.namelist():
                raise SystemExit("packaging_check: the wheel lacks "
                                 "duro/_duro.abi3.so")

        # 2. the wheel in a fresh venv, the example from outside the repo
        python = make_venv(os.path.join(tmp, "venv-wheel"), env)
        run([python, "-m", "pip", "install", "--no-index", "--no-deps",
             wheels[0]], cwd=tmp, env=env)
        run_example(python, example, os.path.join(tmp, "run-wheel"), env)

        # 3. pip install ./python (from the checkout's copy) in another venv
        python = make_venv(os.path.join(tmp, "venv-pip"), env)
        run([python, "-m", "pip", "install", "--no-index",
             "--no-build-isolation", "./python"], cwd=checkout, env=env)
        run_example(python, example, os.path.join(tmp, "run-pip"), env)
        ok = True
        print("packaging_check: ok")
    finally:
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"packaging_check: left {tmp} for inspection")


if __name__ == "__main__":
    main()
