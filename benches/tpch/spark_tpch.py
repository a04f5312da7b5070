"""Spark SQL TPC-H over any Hadoop location (file://, cv://), local mode: the 22 queries, each
timed per pass, with a fingerprint of every result: every location must answer the same.

    python spark_tpch.py --location file:///data/tpch --location cv://cluster/tpch --passes 3 \
        --jar cv-hadoop.jar --native-lib libcv_capi.so --cv-config client.toml --out run.json

--copy-from URL first writes every table read from URL to --location as Parquet through
Spark (the Hadoop write path: a committer's temporary files and renames), then queries it.
--between-passes CMD runs a shell command before every timed pass (e.g. dropping cv's cache
for cold passes). The JSON written has per-query times of every timed pass, their medians,
and the fingerprints.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpch_data  # noqa: E402


def session(a):
    from pyspark.sql import SparkSession

    # Loopback only: the driver would otherwise bind to the host's first address.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    b = (
        SparkSession.builder.master(f"local[{a.cores}]")
        .appName("cv-spark-tpch")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", a.driver_memory)
        .config("spark.sql.shuffle.partitions", str(a.shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
    )
    if a.jar:
        # On the JVM's own class path, so Hadoop's ServiceLoader finds cv's FileSystem.
        b = b.config("spark.driver.extraClassPath", a.jar)
        b = b.config("spark.hadoop.fs.cv.impl", "io.cv.hadoop.CvHadoopFileSystem")
        b = b.config("spark.hadoop.fs.AbstractFileSystem.cv.impl", "io.cv.hadoop.CvAbstractFileSystem")
    if a.native_lib:
        b = b.config("spark.driver.extraJavaOptions", f"-Dcv.native.library={a.native_lib}")
    if a.cv_config:
        b = b.config("spark.hadoop.fs.cv.config", a.cv_config)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--location", required=True, action="append",
                    help="directory URL holding <table>/ Parquet directories; given more than once, the "
                         "locations take turns pass by pass and their results must be equal")
    ap.add_argument("--copy-from", help="write every table read from this URL to the (first) location first")
    ap.add_argument("--passes", type=int, default=3, help="timed passes over the queries")
    ap.add_argument("--warmup", type=int, default=1, help="untimed passes before them")
    ap.add_argument("--queries", default="", help="e.g. 1,6,14 (default all 22)")
    ap.add_argument("--between-passes", help="shell command run before every timed pass")
    ap.add_argument("--jar", help="cv-hadoop.jar")
    ap.add_argument("--native-lib", help="libcv_capi.so")
    ap.add_argument("--cv-config", help="cv client config file (fs.cv.config)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()

    qs = tpch_data.queries()
    if a.queries:
        qs = {int(n): qs[int(n)] for n in a.queries.split(",")}
    spark = session(a)
    locs = [loc.rstrip("/") for loc in a.location]
    if a.copy_from:
        src = a.copy_from.rstrip("/")
        for t in tpch_data.TABLES:
            t0 = time.perf_counter()
            spark.read.parquet(f"{src}/{t}").write.mode("overwrite").parquet(f"{locs[0]}/{t}")
            print(f"copied {t} to {locs[0]}/{t} in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    frames = {loc: {t: spark.read.parquet(f"{loc}/{t}") for t in tpch_data.TABLES} for loc in locs}
    counts = {loc: {t: df.count() for t, df in frames[loc].items()} for loc in locs}

    times = {loc: {n: [] for n in qs} for loc in locs}
    prints = {}
    for p in range(a.warmup + a.passes):
        timed = p >= a.warmup
        for loc in locs:
            for t, df in frames[loc].items():
                df.createOrReplaceTempView(t)
            if timed and a.between_passes:
                subprocess.run(a.between_passes, shell=True, check=True)
            total = 0.0
            for n, q in qs.items():
                t0 = time.perf_counter()
                rows = spark.sql(q).collect()
                dt = time.perf_counter() - t0
                total += dt
                fp = tpch_data.fingerprint(rows, ordered="order by" in q.lower())
                if prints.setdefault(n, (loc, fp))[1] != fp:
                    sys.exit(f"q{n} on {loc}, pass {p}: answered {fp}; {prints[n][0]} answered {prints[n][1]}")
                if timed:
                    times[loc][n].append(dt)
            kind = "timed" if timed else "warm-up"
            print(f"{loc}: {kind} pass {p}: {total:.2f} s", file=sys.stderr)
    spark.stop()

    result = {"fingerprints": {f"q{n}": fp for n, (_, fp) in prints.items()}, "locations": []}
    for loc in locs:
        medians = {n: statistics.median(v) for n, v in times[loc].items() if v}
        result["locations"].append({
            "location": loc,
            "rows": counts[loc],
            "times": {f"q{n}": v for n, v in times[loc].items()},
            "medians": {f"q{n}": m for n, m in medians.items()},
            "sum_of_medians": sum(medians.values()),
        })
    tpch_data.report(result, a.out)


if __name__ == "__main__":
    main()
