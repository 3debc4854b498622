# SQLite-specific tests (URL parsing, schema, pragmas, query plans).
