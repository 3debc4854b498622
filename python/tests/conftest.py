"""Fixtures of the duro Python tests: a fresh store per test. A SQLite file
in the test's tmp_path by default; with DURO_PY_STORE=postgres (CTest's
python_postgres) a fresh schema on the PostgreSQL server of the tests, whose
URL is DURO_TEST_PG_URL or the first line of DURO_TEST_PG_URL_FILE (written
by the pg_cluster_start fixture); without one the run is skipped (77)."""
import os
import re
import shutil
import subprocess

import pytest

_pg_url = None


def _postgres_url():
    url = os.environ.get("DURO_TEST_PG_URL")
    if url:
        return url
    path = os.environ.get("DURO_TEST_PG_URL_FILE")
    try:
        with open(path or "") as f:
            return f.readline().strip()
    except OSError:
        return None


def pytest_configure(config):
    global _pg_url
    if os.environ.get("DURO_PY_STORE") == "postgres":
        _pg_url = _postgres_url()
        if not _pg_url:
            pytest.exit("no PostgreSQL server to test against (no "
                        "DURO_TEST_PG_URL, no URL file): skipped", 77)


def _psql():
    bindir = os.environ.get("DURO_PG_BINDIR")
    if bindir and os.access(os.path.join(bindir, "psql"), os.X_OK):
        return os.path.join(bindir, "psql")
    return shutil.which("psql")


@pytest.fixture
def db(tmp_path, request):
    if _pg_url is None:
        yield f"sqlite:{tmp_path}/duro.db"
        return
    schema = re.sub(r"[^a-z0-9_]", "_",
                    f"py_{os.getpid()}_{request.node.name}".lower())[:60]
    sep = "&" if "?" in _pg_url else "?"
    yield f"{_pg_url}{sep}schema={schema}"
    psql = _psql()
    if psql:  # best effort: the throwaway cluster goes anyway
        subprocess.run([psql, "-q", "-d", _pg_url, "-c",
                        f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       capture_output=True, timeout=60)
