"""DuckDB's httpfs through cv's gateway: Parquet written with COPY ... TO 's3://…' (multipart
uploads), read back with globs, ranged footer and column-chunk reads, and a query whose result
must equal the same query on the local copy of the files.

    python duckdb_httpfs.py HOST:PORT ACCESS_KEY SECRET_KEY BUCKET WORKDIR
"""
import glob
import os
import sys

import duckdb
import duckdb_extension_httpfs

endpoint, ak, sk, bucket, work = sys.argv[1:6]
here = os.path.dirname(duckdb_extension_httpfs.__file__)
ext = glob.glob(os.path.join(here, "extensions", "*", "httpfs.duckdb_extension"))
if not ext:
    sys.exit(f"no httpfs.duckdb_extension under {here}")
con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false",
                             "autoload_known_extensions": "false"})
con.execute(f"LOAD '{ext[0]}'")
con.execute(f"""CREATE SECRET cv (TYPE s3, KEY_ID '{ak}', SECRET '{sk}', REGION 'us-east-1',
                ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)""")

table = """SELECT i AS id, i % 97 AS k, 'name-' || (i % 1013) AS name, (i * 7919) % 100003 AS v
           FROM range(0, 600000) t(i)"""
local = os.path.join(work, "local")
os.makedirs(local, exist_ok=True)
for part in range(3):
    where = f"WHERE id % 3 = {part}"
    opts = "(FORMAT parquet, ROW_GROUP_SIZE 50000)"
    con.execute(f"COPY (SELECT * FROM ({table}) {where}) TO '{local}/p{part}.parquet' {opts}")
    con.execute(f"COPY (SELECT * FROM ({table}) {where}) TO 's3://{bucket}/duck/p{part}.parquet' {opts}")

query = "SELECT k, count(*), sum(v), min(name), max(id) FROM read_parquet('{}') WHERE k < 50 GROUP BY k ORDER BY k"
want = con.execute(query.format(f"{local}/p*.parquet")).fetchall()
got = con.execute(query.format(f"s3://{bucket}/duck/p*.parquet")).fetchall()
assert len(want) == 50, len(want)
assert got == want, "the query through the gateway differs from the local files"
print("ok   glob query equals the local files")
n = con.execute(f"SELECT count(*) FROM read_parquet('s3://{bucket}/duck/p1.parquet')").fetchone()[0]
assert n == 200000, n
print("ok   row count through one file")
files = sorted(r[0] for r in con.execute(f"SELECT file FROM glob('s3://{bucket}/duck/*.parquet')").fetchall())
assert files == [f"s3://{bucket}/duck/p{i}.parquet" for i in range(3)], files
print("ok   glob listing")
print("duckdb over the gateway: all checks held")
