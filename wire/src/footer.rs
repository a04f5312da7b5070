//! File-format tail sizing (Parquet, ORC, StarRocks segments).
