//! A fact the host does not expose is `null` in JSON, never an empty list that
//! reads as "none": fields kept as lists in Rust (empty when absent) are
//! serialized through this module (`#[serde(with = "absent")]`).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub trait Empty {
    fn is_empty(&self) -> bool;
}

impl<T> Empty for Vec<T> {
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

impl<K, V> Empty for BTreeMap<K, V> {
    fn is_empty(&self) -> bool {
        BTreeMap::is_empty(self)
    }
}

pub fn serialize<T: Serialize + Empty, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    if v.is_empty() {
        s.serialize_none()
    } else {
        s.serialize_some(v)
    }
}

pub fn deserialize<'de, T: Deserialize<'de> + Default, D: Deserializer<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
