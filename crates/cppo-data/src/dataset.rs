//! The published sets by name, each read with the fields its file really has: in a local data folder
//! (the shared mirror, `CPPO_DATA_DIR`) or in the Hub dataset repository that publishes it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cppo_core::{Problem, Task};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{DataError, Result};
use crate::jsonl::{read_jsonl, IdScheme, JsonlSpec};
use crate::root::{data_root, DataRoot};

/// A built-in dataset. Names (for a CLI or TOML) are `gsm8k:train`, `gsm8k:test`, `math:train`, `math500`,
/// `amc23` and `aime24`; the evaluation sets also answer to `math500:test`, `amc23:test` and `aime24:test`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dataset {
    Gsm8kTrain,
    Gsm8kTest,
    MathTrain,
    Math500,
    Amc23,
    Aime24,
}

impl Dataset {
    pub const ALL: [Dataset; 6] = [
        Dataset::Gsm8kTrain,
        Dataset::Gsm8kTest,
        Dataset::MathTrain,
        Dataset::Math500,
        Dataset::Amc23,
        Dataset::Aime24,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dataset::Gsm8kTrain => "gsm8k:train",
            Dataset::Gsm8kTest => "gsm8k:test",
            Dataset::MathTrain => "math:train",
            Dataset::Math500 => "math500",
            Dataset::Amc23 => "amc23",
            Dataset::Aime24 => "aime24",
        }
    }

    /// The file's path inside the data root.
    pub fn relative_path(self) -> &'static str {
        match self {
            Dataset::Gsm8kTrain => "gsm8k/train.jsonl",
            Dataset::Gsm8kTest => "gsm8k/test.jsonl",
            Dataset::MathTrain => "math/train.jsonl",
            Dataset::Math500 => "math500/test.jsonl",
            Dataset::Amc23 => "amc23/test.jsonl",
            Dataset::Aime24 => "aime24/test.jsonl",
        }
    }

    pub fn task(self) -> Task {
        match self {
            Dataset::Gsm8kTrain | Dataset::Gsm8kTest => Task::Gsm8k,
            _ => Task::Math,
        }
    }

    /// The fields this set's file uses. GSM8K keeps the whole worked solution (the grader reads after `####`)
    /// and MATH train the whole solution (the grader reads the last `\boxed{}`); the evaluation sets give the
    /// bare gold. AMC and AIME also carry a `question` field, identical to `problem` in the published files.
    pub fn spec(self) -> JsonlSpec {
        let task = self.task();
        match self {
            Dataset::Gsm8kTrain | Dataset::Gsm8kTest => JsonlSpec::new("question", "answer", task),
            Dataset::MathTrain => {
                JsonlSpec::new("problem", "solution", task).with_id_field("unique_id")
            }
            Dataset::Math500 => {
                JsonlSpec::new("problem", "answer", task).with_id_field("unique_id")
            }
            Dataset::Amc23 | Dataset::Aime24 => {
                JsonlSpec::new("problem", "answer", task).with_id_field("id")
            }
        }
    }

    /// The Hub dataset repository that publishes this set with the fields cppo reads, for when no
    /// local data folder has it. Chosen for having the same fields (and, where the repository has them,
    /// the same ids) as the local files:
    /// - GSM8K: `openai/gsm8k`, config `main` (`main/{train,test}-*.parquet`), the official release;
    /// - MATH train: `DigitalLearningGmbH/MATH-lighteval` (`data/train-*.parquet`, the 7,500 problems of
    ///   Hendrycks et al. with `problem`, `solution`, `level`, `type`; no `unique_id`, so ids are
    ///   `math:train:<row>`), the copy the Hub's own MATH recipes use since `hendrycks/competition_math`
    ///   was taken down;
    /// - MATH-500: `HuggingFaceH4/MATH-500` (`test.jsonl`, PRM800K's subset, the same file as the mirror);
    /// - AMC 2023: `math-ai/amc23` (`test-*.parquet`, the 40 problems of the Qwen2.5-Math suite, with the
    ///   problem in `question`; ids `amc23:<row>`);
    /// - AIME 2024: `HuggingFaceH4/aime_2024` (`data/train-*.parquet`, the 30 problems of AIME 2024 I and
    ///   II with the ids 60-89 of `AI-MO/aimo-validation-aime`, as the mirror has them).
    pub fn hub_source(self) -> HubSource {
        let task = self.task();
        let (name, spec, id_prefix) = match self {
            Dataset::Gsm8kTrain => ("openai/gsm8k:main:train", JsonlSpec::new("question", "answer", task), ""),
            Dataset::Gsm8kTest => ("openai/gsm8k:main:test", JsonlSpec::new("question", "answer", task), ""),
            Dataset::MathTrain => ("DigitalLearningGmbH/MATH-lighteval:train", JsonlSpec::new("problem", "solution", task), ""),
            Dataset::Math500 => (
                "HuggingFaceH4/MATH-500:test",
                JsonlSpec::new("problem", "answer", task).with_id_field("unique_id"),
                "",
            ),
            Dataset::Amc23 => ("math-ai/amc23:test", JsonlSpec::new("question", "answer", task), ""),
            Dataset::Aime24 => (
                "HuggingFaceH4/aime_2024:train",
                JsonlSpec::new("problem", "answer", task).with_id_field("id"),
                "aime24:",
            ),
        };
        HubSource { name, spec, id_prefix }
    }

    /// Reads the files of this set's Hub split (see [`Dataset::hub_source`]).
    pub fn load_hub_files(self, files: &[PathBuf]) -> Result<Vec<Problem>> {
        let source = self.hub_source();
        crate::parquet::load_split_files(files, &source.spec, self.name(), source.id_prefix)
    }

    pub fn path_in(self, root: &Path) -> PathBuf {
        root.join(self.relative_path())
    }

    /// Loads from the default data root (see [`data_root`]).
    pub fn load(self) -> Result<Vec<Problem>> {
        self.load_from(&data_root()?)
    }

    pub fn load_from(self, root: &DataRoot) -> Result<Vec<Problem>> {
        let path = self.path_in(&root.path);
        if !path.is_file() {
            return Err(DataError::MissingFile {
                dataset: self.name().to_owned(),
                path,
                root: root.path.clone(),
                origin: root.origin.to_string(),
                relative: self.relative_path().to_owned(),
            });
        }
        // MATH ids are already unique paths; the others get the set's name so mixed reports stay readable.
        let prefix = match self {
            Dataset::Amc23 => "amc23:",
            Dataset::Aime24 => "aime24:",
            _ => "",
        };
        read_jsonl(
            &path,
            &self.spec(),
            &IdScheme {
                prefix,
                line_label: self.name(),
                offset: 0,
            },
        )
    }
}

/// Where a built-in set lives on the Hub and how its files read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubSource {
    /// The dataset name for `hub:` (`org/name[:config]:split`).
    pub name: &'static str,
    pub spec: JsonlSpec,
    /// Prepended to the id field's value.
    pub id_prefix: &'static str,
}

fn all_names() -> String {
    Dataset::ALL
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dataset {
    type Err = DataError;
    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim();
        let alias = match name {
            "math500:test" => Some(Dataset::Math500),
            "amc23:test" => Some(Dataset::Amc23),
            "aime24:test" => Some(Dataset::Aime24),
            _ => None,
        };
        alias
            .or_else(|| Dataset::ALL.into_iter().find(|d| d.name() == name))
            .ok_or_else(|| DataError::UnknownDataset(name.to_owned(), all_names()))
    }
}

impl Serialize for Dataset {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Dataset {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}
