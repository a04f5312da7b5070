//! Real Parquet files for the open benchmarks, written with the `parquet`
//! crate so the footers are what engines actually read.

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::path::Path;
use std::sync::Arc;

const SCHEMA: &str = "message bench {
    required int64 id;
    required int64 ts;
    required int64 amount;
    required binary region (UTF8);
    required binary payload;
}";

/// Writes a Parquet file of about `target_bytes` at `path`, with several row
/// groups (so the footer has real column-chunk metadata). Returns its size.
pub fn write_file(path: &Path, target_bytes: u64, seed: u64) -> std::io::Result<u64> {
    let schema = Arc::new(parse_message_type(SCHEMA).map_err(std::io::Error::other)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_enabled(false)
            .set_created_by("cv-benches".into())
            .build(),
    );
    let file = std::fs::File::create(path)?;
    let mut w = SerializedFileWriter::new(file, schema, props).map_err(std::io::Error::other)?;
    // ~32 bytes of fixed columns + 200 bytes of payload per row.
    let rows_per_group = 4096usize;
    let groups = (target_bytes / (rows_per_group as u64 * 232)).max(1);
    for g in 0..groups {
        let base = (seed << 32) + g * rows_per_group as u64;
        let ids: Vec<i64> = (0..rows_per_group as i64).map(|i| base as i64 + i).collect();
        let ts: Vec<i64> = ids.iter().map(|i| 1_700_000_000_000 + i * 17).collect();
        let amount: Vec<i64> = ids.iter().map(|i| (i * 7919) % 100_000).collect();
        let region: Vec<ByteArray> =
            ids.iter().map(|i| ByteArray::from(["eu", "us", "ap", "sa"][(*i % 4) as usize])).collect();
        // Varied bytes (an xorshift stream) so encodings cannot shrink them.
        let mut x = base | 1;
        let payloads: Vec<ByteArray> = (0..rows_per_group)
            .map(|_| {
                let row: Vec<u8> = (0..200)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                ByteArray::from(row)
            })
            .collect();
        let mut rg = w.next_row_group().map_err(std::io::Error::other)?;
        let mut col = 0;
        while let Some(mut c) = rg.next_column().map_err(std::io::Error::other)? {
            match col {
                0 => c.typed::<Int64Type>().write_batch(&ids, None, None),
                1 => c.typed::<Int64Type>().write_batch(&ts, None, None),
                2 => c.typed::<Int64Type>().write_batch(&amount, None, None),
                3 => c.typed::<ByteArrayType>().write_batch(&region, None, None),
                _ => c.typed::<ByteArrayType>().write_batch(&payloads, None, None),
            }
            .map_err(std::io::Error::other)?;
            c.close().map_err(std::io::Error::other)?;
            col += 1;
        }
        rg.close().map_err(std::io::Error::other)?;
    }
    w.close().map_err(std::io::Error::other)?;
    Ok(std::fs::metadata(path)?.len())
}

/// The footer length a Parquet file's last 8 bytes declare, if they end in `PAR1`.
pub fn footer_len(last8: &[u8]) -> Option<u64> {
    if last8.len() != 8 || &last8[4..] != b"PAR1" {
        return None;
    }
    Some(u64::from(u32::from_le_bytes([last8[0], last8[1], last8[2], last8[3]])))
}

/// Parses a footer (metadata bytes without the trailing 8) to prove it is real.
pub fn parse_footer(metadata: &[u8]) -> Result<usize, String> {
    let md = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(metadata).map_err(|e| e.to_string())?;
    Ok(md.num_row_groups())
}

/// Writes `n` Parquet files of about `size` bytes into `dir` on 2 threads;
/// returns their names.
pub fn generate(dir: &Path, n: usize, size: u64) -> std::io::Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("part-{i:05}.parquet")).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let names = &names;
                s.spawn(move || -> std::io::Result<()> {
                    for (i, name) in names.iter().enumerate().skip(t).step_by(2) {
                        write_file(&dir.join(name), size, i as u64)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().map_err(|_| std::io::Error::other("writer panicked"))?)
    })?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_parquet_file_whose_footer_parses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.parquet");
        let len = write_file(&p, 2 << 20, 1).unwrap();
        assert!(len > 1 << 20, "{len}");
        let bytes = std::fs::read(&p).unwrap();
        let flen = footer_len(&bytes[bytes.len() - 8..]).unwrap() as usize;
        let meta = &bytes[bytes.len() - 8 - flen..bytes.len() - 8];
        assert!(parse_footer(meta).unwrap() >= 2);
    }
}
