"""Fixtures of the duro Python tests: a fresh store per test. DURO_TEST_URL
(set by CTest's PostgreSQL run) is not used yet: SQLite files only."""
import pytest


@pytest.fixture
def db(tmp_path):
    return f"sqlite:{tmp_path}/duro.db"
