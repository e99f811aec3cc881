//! Parquet files of problems (what the Hub's datasets are), read with the `parquet` crate into Arrow
//! batches; each row becomes the JSON object arrow-json writes for it and goes through the JSON-lines
//! field reader, so both formats accept and reject the same values with the same messages. Rows are
//! numbered from 1 in ids and errors, as lines are.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_json::writer::{LineDelimited, WriterBuilder};
use cppo_core::Problem;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{DataError, Result};
use crate::jsonl::{parse_line, read_jsonl, IdScheme, JsonlSpec};

/// Loads every row of a `.parquet` file as a problem. Ids come from `spec.id_field`, else
/// `<path>:<row>`.
pub fn load_parquet(path: impl AsRef<Path>, spec: &JsonlSpec) -> Result<Vec<Problem>> {
    let path = path.as_ref();
    let label = path.display().to_string();
    read_parquet(
        path,
        spec,
        &IdScheme {
            prefix: "",
            line_label: &label,
            offset: 0,
        },
    )
}

/// A `.parquet` or a JSON-lines file (any other extension), by its extension.
pub fn load_file(path: impl AsRef<Path>, spec: &JsonlSpec) -> Result<Vec<Problem>> {
    let path = path.as_ref();
    if is_parquet(path) {
        load_parquet(path, spec)
    } else {
        crate::jsonl::load_jsonl(path, spec)
    }
}

/// The files of one split (shards in order), as one list. Without an id field, ids are
/// `<label>:<n>` with n counting rows across the files from 1.
pub fn load_split_files(files: &[PathBuf], spec: &JsonlSpec, label: &str, id_prefix: &str) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    for path in files {
        let ids = IdScheme {
            prefix: id_prefix,
            line_label: label,
            offset: problems.len(),
        };
        let mut part = if is_parquet(path) {
            read_parquet(path, spec, &ids)?
        } else {
            read_jsonl(path, spec, &ids)?
        };
        problems.append(&mut part);
    }
    Ok(problems)
}

fn is_parquet(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> DataError {
    DataError::Parquet {
        path: path.to_owned(),
        message: what.to_string(),
    }
}

pub(crate) fn read_parquet(path: &Path, spec: &JsonlSpec, ids: &IdScheme<'_>) -> Result<Vec<Problem>> {
    let file = File::open(path).map_err(|source| DataError::Io {
        path: path.to_owned(),
        source,
    })?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| corrupt(path, e))?
        .build()
        .map_err(|e| corrupt(path, e))?;
    let mut problems = Vec::new();
    let mut row = 0usize;
    for batch in reader {
        let batch = batch.map_err(|e| corrupt(path, e))?;
        // Nulls are written out so a null field reads as null (an error naming it), not as missing.
        let mut writer = WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, LineDelimited>(Vec::new());
        writer.write(&batch).map_err(|e| corrupt(path, e))?;
        writer.finish().map_err(|e| corrupt(path, e))?;
        let text = String::from_utf8(writer.into_inner()).map_err(|e| corrupt(path, e))?;
        for line in text.lines() {
            row += 1;
            problems.push(parse_line(path, row, line, spec, ids)?);
        }
    }
    Ok(problems)
}
