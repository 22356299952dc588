-- Core store schema: the runs table. Every other table carries run_id.
CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1;

-- Facts about the store itself: schema_version (tracekit refuses a store of another one).
CREATE TABLE IF NOT EXISTS _store (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

CREATE TABLE IF NOT EXISTS runs (
    run_id                INTEGER PRIMARY KEY,  -- the run's id (1, 2, ...)
    name                  VARCHAR NOT NULL,     -- the run's name (file stem, --name, or run folder name)
    kind                  VARCHAR NOT NULL,     -- source kind: nsys, ncu, timing (comma-joined for run folders)
    source_path           VARCHAR,              -- file or folder ingested (absolute path at ingest time)
    source_hash           VARCHAR UNIQUE,       -- XXH3-128 of the source content; re-ingesting it is a no-op
    tool_version          VARCHAR,              -- profiler product version (EXPORT_PRODUCT_VERSION, ncu version)
    export_schema_version VARCHAR,              -- nsys EXPORT_SCHEMA_VERSION, when known
    gpu                   VARCHAR,              -- GPU name(s) seen in the capture
    params                JSON,                 -- capture parameters (bs, nc, preset, tool, ...)
    meta                  JSON,                 -- everything else known about the capture
    ingested_at           TIMESTAMP             -- when it was ingested (UTC)
);

-- Every profile a run was read from, with the hash of its decompressed content: the same
-- capture reached another way (the .sqlite.xz inside an ingested run folder) is that run.
CREATE TABLE IF NOT EXISTS run_sources (
    run_id       INTEGER,  -- the run
    kind         VARCHAR,  -- what the file holds: nsys, ncu, timing
    path         VARCHAR,  -- the file (absolute path at ingest time)
    content_hash VARCHAR   -- XXH3-128 of its decompressed content
);

-- Round to 0.1 the way `nsys stats` does: half away from zero on the exact binary value
-- of the double (217993.05 is stored as 217993.04999... and prints 217993.0; 1537.25 is
-- exact and prints 1537.3). printf gives the exact decimal expansion of the double.
CREATE OR REPLACE MACRO round1(x) AS
    CASE WHEN x IS NULL THEN NULL
         WHEN abs(x) < 1e17 THEN CAST(round(CAST(printf('%.20f', x) AS DECIMAL(38, 20)), 1) AS DOUBLE)
         ELSE round(x, 1) END;
