"""DuckDB TPC-H over directories (local disk, cv's FUSE mount) and S3 locations (httpfs: cv's
gateway, an object store directly): the 22 queries, each timed per pass, with a fingerprint of
every result: every location must answer the same.

    python duckdb_tpch.py --location /data/tpch --location /mnt/cv/tpch --passes 3 \
        --drop-caches --out run.json

Each location is a directory of <table>/*.parquet (tpch_data.py gen). Given more than once,
the locations take turns pass by pass. --drop-caches empties the kernel's page cache (sync,
then /proc/sys/vm/drop_caches; needs root) before every query, on every location alike, so
each query reads its bytes from the device or from cv, not from memory. The JSON written has
per-query times of every timed pass, their medians, and the fingerprints, as spark_tpch.py's.

An s3://BUCKET/PREFIX location is read through DuckDB's httpfs (the duckdb-extension-httpfs
package, loaded from its file) with the credentials that --s3-file names for that bucket: a file
of lines BUCKET=HOST:PORT,KEY,SECRET (path-style, plain HTTP; a file, so that no secret is on
a command line). --between-passes CMD runs a shell command before every timed
pass (e.g. dropping cv's cache for cold passes).

An http://HOST:PORT location is a plain HTTP server (no S3: no listing) holding the files of
the directory --http-files names, at the same paths; the views name each file's URL.
"""

import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpch_data  # noqa: E402


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def io_counters():
    """This process's rchar (bytes its reads returned) and read_bytes (bytes it made the block
    layer fetch) from /proc/self/io: what DuckDB asked for, and what came from the device."""
    out = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v)
    return out["rchar"], out["read_bytes"]


def load_httpfs(con, s3):
    """httpfs from its PyPI package, and one secret per bucket (scoped to it)."""
    import duckdb_extension_httpfs

    here = os.path.dirname(duckdb_extension_httpfs.__file__)
    ext = glob.glob(os.path.join(here, "extensions", "*", "httpfs.duckdb_extension"))
    if not ext:
        sys.exit(f"no httpfs.duckdb_extension under {here}")
    con.execute(f"LOAD '{ext[0]}'")
    for i, spec in enumerate(s3):
        bucket, rest = spec.split("=", 1)
        endpoint, key, secret = rest.split(",", 2)
        con.execute(f"""CREATE SECRET s{i} (TYPE s3, KEY_ID '{key}', SECRET '{secret}', REGION 'us-east-1',
                        ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false, SCOPE 's3://{bucket}')""")


def tables(loc, http_files):
    """Per table, what read_parquet reads: a glob, or for a plain HTTP server every file's URL."""
    out = {}
    for t in tpch_data.TABLES:
        if loc.startswith("http://"):
            names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(http_files, t, "*.parquet")))
            if not names:
                sys.exit(f"no {t}/*.parquet under --http-files {http_files}")
            out[t] = "[" + ",".join(f"'{loc}/{t}/{n}'" for n in names) + "]"
        else:
            out[t] = f"'{loc}/{t}/*.parquet'"
    return out


def connect(loc, threads, s3, http_files):
    import duckdb

    remote = loc.startswith(("s3://", "http://"))
    con = duckdb.connect(config={"threads": threads, "allow_unsigned_extensions": "true",
                                 "autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    if remote:
        load_httpfs(con, s3)
    # Only the kernel's cache and cv's may hold file bytes between queries: DuckDB's own
    # caches of file data and Parquet metadata are off where this version has them.
    for s in ("enable_external_file_cache", "parquet_metadata_cache"):
        try:
            con.execute(f"SET {s} = false")
        except Exception:  # noqa: BLE001 (a setting this version lacks)
            pass
    for t, files in tables(loc, http_files).items():
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet({files})")
    return con


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--location", required=True, action="append",
                    help="directory holding <table>/ Parquet directories; given more than once, the "
                         "locations take turns pass by pass and their results must be equal")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the queries")
    ap.add_argument("--warmup", type=int, default=1, help="untimed passes before them")
    ap.add_argument("--queries", default="", help="e.g. 1,6,14 (default all 22)")
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before every query")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--s3-file", help="lines BUCKET=HOST:PORT,KEY,SECRET for s3:// locations")
    ap.add_argument("--http-files", help="the directory an http:// location serves")
    ap.add_argument("--between-passes", help="shell command run before every timed pass")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()

    qs = tpch_data.queries()
    if a.queries:
        qs = {int(n): qs[int(n)] for n in a.queries.split(",")}
    locs = [loc.rstrip("/") for loc in a.location]
    s3 = []
    if a.s3_file:
        with open(a.s3_file) as f:
            s3 = [line.strip() for line in f if line.strip()]
    cons = {loc: connect(loc, a.threads, s3, a.http_files) for loc in locs}

    times = {loc: {n: [] for n in qs} for loc in locs}
    # Per location, summed over the timed passes: [rchar, read_bytes].
    io = {loc: [0, 0] for loc in locs}
    prints = {}
    for p in range(a.warmup + a.passes):
        timed = p >= a.warmup
        if timed and a.between_passes:
            subprocess.run(a.between_passes, shell=True, check=True)
        for loc in locs:
            total = 0.0
            io0 = io_counters()
            for n, q in qs.items():
                if a.drop_caches:
                    drop_caches()
                t0 = time.perf_counter()
                rows = cons[loc].execute(q).fetchall()
                dt = time.perf_counter() - t0
                total += dt
                fp = tpch_data.fingerprint(rows, ordered="order by" in q.lower())
                if prints.setdefault(n, (loc, fp))[1] != fp:
                    sys.exit(f"q{n} on {loc}, pass {p}: answered {fp}; {prints[n][0]} answered {prints[n][1]}")
                if timed:
                    times[loc][n].append(dt)
            if timed:
                io1 = io_counters()
                io[loc][0] += io1[0] - io0[0]
                io[loc][1] += io1[1] - io0[1]
            kind = "timed" if timed else "warm-up"
            print(f"{loc}: {kind} pass {p}: {total:.2f} s", file=sys.stderr)

    result = {"fingerprints": {f"q{n}": fp for n, (_, fp) in prints.items()}, "locations": []}
    for loc in locs:
        medians = {n: statistics.median(v) for n, v in times[loc].items() if v}
        result["locations"].append({
            "location": loc,
            "times": {f"q{n}": v for n, v in times[loc].items()},
            "medians": {f"q{n}": m for n, m in medians.items()},
            "sum_of_medians": sum(medians.values()),
            "read_per_pass": io[loc][0] // max(a.passes, 1),
            "device_read_per_pass": io[loc][1] // max(a.passes, 1),
        })
    tpch_data.report(result, a.out)


if __name__ == "__main__":
    main()
