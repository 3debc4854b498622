"""Builds duro._duro from the repository's C sources (libduro compiled
into the extension, SQLite and, when pkg-config finds libpq, PostgreSQL),
as one abi3 module for CPython 3.10+. Run through pip from a checkout:
`pip install ./python` (no network: --no-build-isolation). The sources are
listed by src/*/sources.cmake, the lists CMake builds libduro from."""
import os
import re
import subprocess

from setuptools import Extension, setup

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: no abi3 tag, the build still works
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cmake_sources(path):
    text = open(os.path.join(ROOT, path)).read()
    # setuptools wants paths relative to setup.py's directory
    return ["../" + s for s in re.findall(r"(src/\S+\.c)", text)]


def pkg_config(*args):
    try:
        return subprocess.run(["pkg-config", *args], check=True,
                              capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


if not os.path.exists(os.path.join(ROOT, "src", "core", "engine.c")):
    raise SystemExit("duro: setup.py builds from the repository's C sources; "
                     "run it from a checkout (pip install ./python)")

parts = ["base", "core", "runtime", "client", "providers", "providers/sqlite"]
os.chdir(HERE)
sources = ["src/duro_module.c"]
for part in parts:
    sources += cmake_sources(f"src/{part}/sources.cmake")
macros = [("DURO_BUILDING", None), ("_GNU_SOURCE", None),
          ("Py_LIMITED_API", "0x030A0000")]
libraries = ["sqlite3", "pthread"]
extra_compile = ["-std=c11", "-fvisibility=hidden"]
extra_link = []
pq = pkg_config("--cflags", "--libs", "libpq")
if pq is not None:
    sources += cmake_sources("src/providers/postgres/sources.cmake")
    macros.append(("DURO_HAVE_POSTGRES", "1"))
    extra_compile += [f for f in pq if f.startswith("-I")]
    extra_link += [f for f in pq if not f.startswith("-I")]

cmdclass = {}
if bdist_wheel is not None:
    class abi3_wheel(bdist_wheel):
        def get_tag(self):
            python, abi, plat = super().get_tag()
            if python.startswith("cp"):
                return "cp310", "abi3", plat
            return python, abi, plat

    cmdclass["bdist_wheel"] = abi3_wheel

setup(
    ext_modules=[
        Extension(
            "duro._duro",
            sources=sources,
            include_dirs=["../include", "../src"],
            define_macros=macros,
            libraries=libraries,
            extra_compile_args=extra_compile,
            extra_link_args=extra_link,
            py_limited_api=True,
        )
    ],
    cmdclass=cmdclass,
)
