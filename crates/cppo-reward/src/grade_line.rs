//! One input line of `cppo grade`, read straight into its two fields: a JSON tree of the whole line
//! (a map, a copy of every string) cost about a fifth of grading time, for fields that are only read.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// What a line's `response` or `answer` field held.
pub enum Field<'a> {
    Text(Cow<'a, str>),
    /// A JSON number, written as serde_json writes it (`27`, `2.5`).
    Number(String),
    /// Anything else (`null`, `true`, an array, an object).
    Other,
}

/// The two fields of one line (`None`: absent). A repeated key keeps its last value.
#[derive(Default)]
pub struct Fields<'a> {
    pub response: Option<Field<'a>>,
    pub answer: Option<Field<'a>>,
}

/// Why a line could not be read.
pub enum LineError {
    /// Not JSON at all (serde_json's message).
    Invalid(String),
    /// JSON, but not an object.
    NotAnObject,
}

const NOT_AN_OBJECT: &str = "expected a JSON object";

/// Reads a line that must be one JSON object.
pub fn read(text: &str) -> Result<Fields<'_>, LineError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = de.deserialize_any(LineVisitor).and_then(|f| de.end().map(|()| f));
    fields.map_err(|e| if e.is_data() && e.to_string().starts_with(NOT_AN_OBJECT) { LineError::NotAnObject } else { LineError::Invalid(e.to_string()) })
}

struct LineVisitor;

impl<'de> Visitor<'de> for LineVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(NOT_AN_OBJECT)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "response" => fields.response = Some(map.next_value::<Field<'de>>()?),
                "answer" => fields.answer = Some(map.next_value::<Field<'de>>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }

    // Every other JSON value: the same message, so `read` can tell it from a syntax error.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(de::Error::custom(NOT_AN_OBJECT))
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Text(Cow::Borrowed(s)))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Field::Text(Cow::Owned(s.to_string())))
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(Field::Text(Cow::Owned(s)))
    }
    fn visit_i64<E: de::Error>(self, x: i64) -> Result<Self::Value, E> {
        Ok(Field::Number(x.to_string()))
    }
    fn visit_u64<E: de::Error>(self, x: u64) -> Result<Self::Value, E> {
        Ok(Field::Number(x.to_string()))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(x).map_or(Field::Other, |n| Field::Number(n.to_string())))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
}
