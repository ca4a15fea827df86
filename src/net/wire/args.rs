//! How a request's `WireArgs` decode: field by field, each text checked
//! against its limit as it is read, and copied out of the frame only
//! within it. A field over its limit still decodes, empty, with
//! `oversize` saying which limit it broke, so that the server refuses the
//! request by id and keeps the connection.

use std::sync::Arc;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{WireArgs, MAX_OWNER_LEN, MAX_SOURCE_LEN, MAX_UID_LEN};
use crate::{MAX_RESOURCES, MAX_RESOURCE_NAME_LEN};

impl<'de> Deserialize<'de> for WireArgs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const FIELDS: &[&str] = &["uid", "resources", "owner", "source", "quorum"];
        deserializer.deserialize_struct("WireArgs", FIELDS, ArgsVisitor)
    }
}

struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = WireArgs;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("lock arguments")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireArgs, A::Error> {
        let mut args = WireArgs::default();
        let mut fields = FieldReader { seq: &mut seq };
        let uid = fields.string(0)?;
        let names: Names = fields.element(1)?;
        let owner = fields.string(2)?;
        let source = fields.string(3)?;
        args.quorum = fields.element(4)?;
        args.uid = bounded("uid", uid, MAX_UID_LEN, &mut args.oversize);
        args.owner = bounded("owner", owner, MAX_OWNER_LEN, &mut args.oversize);
        args.source = bounded("source", source, MAX_SOURCE_LEN, &mut args.oversize);
        match names {
            Names::Within(names) => args.resources = names.into(),
            Names::Beyond(reason) => {
                args.oversize.get_or_insert(reason);
            }
        }
        Ok(args)
    }
}

/// Reads the fields of a sequence in order, failing on a short one.
struct FieldReader<'s, A> {
    seq: &'s mut A,
}

impl<'de, A: SeqAccess<'de>> FieldReader<'_, A> {
    fn element<T: Deserialize<'de>>(&mut self, index: usize) -> Result<T, A::Error> {
        self.seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(index, &"5 fields of lock arguments"))
    }

    /// A string borrowed from the frame: nothing is allocated before its
    /// length is checked.
    fn string(&mut self, index: usize) -> Result<&'de str, A::Error> {
        self.element::<Field<'de>>(index).map(|f| f.0)
    }
}

/// A string field borrowed from the frame being decoded.
struct Field<'de>(&'de str);

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'de str>::deserialize(deserializer).map(Field)
    }
}

/// `value` as a shared string when it is within `limit`; otherwise empty,
/// with the first broken limit noted in `oversize`.
fn bounded(what: &str, value: &str, limit: usize, oversize: &mut Option<String>) -> Arc<str> {
    if value.len() <= limit {
        return value.into();
    }
    oversize.get_or_insert_with(|| {
        format!(
            "{what} of {} bytes; at most {limit} are allowed",
            value.len()
        )
    });
    Arc::default()
}

/// A resource list, kept only when it is within the library's limits.
enum Names {
    Within(Vec<String>),
    Beyond(String),
}

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(NamesVisitor)
    }
}

struct NamesVisitor;

impl<'de> Visitor<'de> for NamesVisitor {
    type Value = Names;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of resource names")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
        let hint = seq.size_hint().unwrap_or(0).min(MAX_RESOURCES);
        let mut names = Vec::with_capacity(hint);
        let mut count = 0usize;
        let mut beyond = None;
        // Every element is read, borrowed, so that the fields after the
        // list decode; only names within the limits are copied.
        while let Some(Field(name)) = seq.next_element::<Field<'de>>()? {
            count += 1;
            if beyond.is_some() {
                continue;
            }
            if name.len() > MAX_RESOURCE_NAME_LEN {
                beyond = Some(format!(
                    "resource name of {} bytes; at most {MAX_RESOURCE_NAME_LEN} are allowed",
                    name.len()
                ));
            } else if count > MAX_RESOURCES {
                // Release what was copied; the count is all that matters now.
                names = Vec::new();
            } else {
                names.push(name.to_owned());
            }
        }
        if count > MAX_RESOURCES {
            return Ok(Names::Beyond(format!(
                "{count} resources in one lock; at most {MAX_RESOURCES} are allowed, split the lock"
            )));
        }
        Ok(match beyond {
            Some(reason) => Names::Beyond(reason),
            None => Names::Within(names),
        })
    }
}
