"""TPC-H data and queries for cv's engine runners (spark_tpch.py; the DuckDB runner of the FUSE
path uses the same), from DuckDB's tpch extension (the duckdb-extension-tpch package on PyPI,
loaded from its file: nothing is downloaded at run time).

    python tpch_data.py gen --sf 1 --out DIR    # DIR/<table>/part-N.parquet, 8 tables
    python tpch_data.py queries                 # the 22 queries, as the runners take them
"""

import argparse
import glob
import hashlib
import math
import os
import sys
from decimal import Decimal

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def connect():
    import duckdb
    import duckdb_extension_tpch

    here = os.path.dirname(duckdb_extension_tpch.__file__)
    ext = glob.glob(os.path.join(here, "extensions", "*", "tpch.duckdb_extension"))
    if not ext:
        sys.exit(f"no tpch.duckdb_extension under {here}")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext[0]}'")
    return con


def gen(sf, out, file_size="64MB"):
    """Writes the tables as Parquet, each a directory of files of about file_size (the large
    tables are several files, as engines meet them), and returns their row counts."""
    con = connect()
    con.execute(f"CALL dbgen(sf={sf})")
    counts = {}
    for t in TABLES:
        d = os.path.join(out, t)
        os.makedirs(d, exist_ok=True)
        con.execute(
            f"COPY {t} TO '{d}' (FORMAT parquet, FILE_SIZE_BYTES '{file_size}', "
            f"FILENAME_PATTERN 'part-{{i}}', OVERWRITE_OR_IGNORE true)"
        )
        counts[t] = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    return counts


def queries():
    """{number: SQL} of the 22 queries, without their trailing semicolons."""
    con = connect()
    rows = con.execute("SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr").fetchall()
    return {n: q.strip().rstrip(";") for n, q in rows}


def norm(v):
    """A value as text that does not depend on how the engine summed: floats to 9 significant
    digits (decimals are exact)."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.9g}"
    if isinstance(v, Decimal):
        return format(v.normalize(), "f")
    return str(v)


def fingerprint(rows, ordered):
    """Row count and a hash of the rows as text (sorted unless the query orders them): two
    locations answered the same iff their fingerprints are equal."""
    lines = ["|".join(norm(v) for v in r) for r in rows]
    if not ordered:
        lines.sort()
    h = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    return f"{len(rows)}:{h}"


def report(result, out):
    """Writes a runner's result to `out` (JSON, if given) and prints each location's sum."""
    import json
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    for r in result["locations"]:
        print(json.dumps({"location": r["location"], "sum_of_medians": r["sum_of_medians"]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--sf", type=float, default=1.0)
    g.add_argument("--out", required=True)
    g.add_argument("--file-size", default="64MB")
    sub.add_parser("queries")
    a = ap.parse_args()
    if a.cmd == "gen":
        for t, n in gen(a.sf, a.out, a.file_size).items():
            print(f"{t}\t{n}")
    else:
        for n, q in queries().items():
            print(f"-- q{n}\n{q};\n")


if __name__ == "__main__":
    main()
