"""Builds duro._duro from duro's C sources (libduro compiled into the
extension, SQLite and, when pkg-config finds libpq, PostgreSQL), as one
abi3 module for CPython 3.10+. No network needed:

    pip install --no-build-isolation ./python          # from a checkout
    python3 -m build --no-isolation ./python           # sdist + wheel

The sources are listed by src/*/sources.cmake, the lists CMake builds
libduro from. In a checkout they are the repository's (../src,
../include); the sdist carries a copy of what the build reads under csrc/
(the sdist command below writes it), so the sdist builds on its own."""
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: no abi3 tag, the build still works
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # setuptools wants paths relative to setup.py's directory

# Where the C tree is, relative to HERE: an sdist's copy, or the checkout's.
if os.path.exists(os.path.join("csrc", "src", "core", "engine.c")):
    C_ROOT = "csrc"
elif os.path.exists(os.path.join("..", "src", "core", "engine.c")):
    C_ROOT = ".."
else:
    raise SystemExit("duro: setup.py builds from duro's C sources: run it "
                     "from a checkout (pip install ./python) or from an "
                     "sdist made by `python3 -m build ./python`")

PARTS = ["base", "core", "runtime", "client", "providers",
         "providers/sqlite"]
POSTGRES_PART = "providers/postgres"


def cmake_sources(part):
    """The .c files of src/<part>/sources.cmake, relative to the C root."""
    with open(os.path.join(C_ROOT, "src", part, "sources.cmake")) as f:
        return re.findall(r"(src/\S+\.c)", f.read())


def c_tree_files():
    """What the build reads from the C root, relative to it: the parts'
    sources.cmake and .c files, and every header of src/ and include/."""
    files = []
    for part in PARTS + [POSTGRES_PART]:
        files.append(f"src/{part}/sources.cmake")
        files += cmake_sources(part)
    for top in ("src", "include"):
        for d, _, names in os.walk(os.path.join(C_ROOT, top)):
            rel = os.path.relpath(d, C_ROOT)
            files += [os.path.join(rel, n) for n in sorted(names)
                      if n.endswith(".h")]
    return sorted(set(files))


def pkg_config(*args):
    try:
        return subprocess.run(["pkg-config", *args], check=True,
                              capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


def c_path(rel):
    return os.path.join(C_ROOT, rel)


sources = ["src/duro_module.c"]
for part in PARTS:
    sources += [c_path(s) for s in cmake_sources(part)]
macros = [("DURO_BUILDING", None), ("_GNU_SOURCE", None),
          ("Py_LIMITED_API", "0x030A0000")]
libraries = ["sqlite3", "pthread"]
extra_compile = ["-std=c11", "-fvisibility=hidden"]
extra_link = []
pq = pkg_config("--cflags", "--libs", "libpq")
if pq is not None:
    sources += [c_path(s) for s in cmake_sources(POSTGRES_PART)]
    macros.append(("DURO_HAVE_POSTGRES", "1"))
    extra_compile += [f for f in pq if f.startswith("-I")]
    extra_link += [f for f in pq if not f.startswith("-I")]


class sdist_with_c(sdist):
    """Puts the C tree the build reads under csrc/ in the sdist (and the
    repository's LICENSE at its top), instead of the ../ paths of a
    checkout, which an sdist cannot hold."""

    def make_release_tree(self, base_dir, files):
        files = [f for f in files
                 if not f.startswith(("../", "csrc/", "csrc" + os.sep))]
        super().make_release_tree(base_dir, files)
        for rel in c_tree_files():
            dest = os.path.join(base_dir, "csrc", rel)
            self.mkpath(os.path.dirname(dest))
            self.copy_file(c_path(rel), dest)
        # From an sdist, LICENSE is at the top already (in `files`).
        if C_ROOT == ".." and os.path.exists(c_path("LICENSE")):
            self.copy_file(c_path("LICENSE"),
                           os.path.join(base_dir, "LICENSE"))


class parallel_build_ext(build_ext):
    """Compiles the extension's sources on every CPU (DURO_BUILD_JOBS to
    say how many): setuptools' --parallel runs extensions, not the sources
    of one, in parallel, and this one extension is libduro whole. Falls
    back to setuptools' serial compile if its compiler lacks the hooks."""

    def build_extension(self, ext):
        jobs = int(os.environ.get("DURO_BUILD_JOBS") or os.cpu_count() or 1)
        cc = self.compiler
        hooks = ("_setup_compile", "_get_cc_args", "_compile")
        if jobs > 1 and all(hasattr(cc, h) for h in hooks):
            cc.compile = self._parallel_compile(cc, jobs)
        super().build_extension(ext)

    @staticmethod
    def _parallel_compile(cc, jobs):
        def compile(sources, output_dir=None, macros=None, include_dirs=None,
                    debug=0, extra_preargs=None, extra_postargs=None,
                    depends=None):
            macros, objects, extra_postargs, pp_opts, build = \
                cc._setup_compile(output_dir, macros, include_dirs, sources,
                                  depends, extra_postargs)
            cc_args = cc._get_cc_args(pp_opts, debug, extra_preargs)

            def one(obj):
                src, ext = build[obj]
                cc._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(one, objects))
            return objects

        return compile


cmdclass = {"sdist": sdist_with_c, "build_ext": parallel_build_ext}
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
            include_dirs=[c_path("include"), c_path("src")],
            define_macros=macros,
            libraries=libraries,
            extra_compile_args=extra_compile,
            extra_link_args=extra_link,
            py_limited_api=True,
        )
    ],
    cmdclass=cmdclass,
)
