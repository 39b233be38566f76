//! The tag index: which stored objects carry each surrogate key, read at
//! insertion from the `xkey`, `X-HashTwo`, `Surrogate-Key` and `Cache-Tag`
//! response headers. Purging a tag visits only that tag's objects, so its
//! cost does not grow with the size of the cache.

use crate::object::Object;
use lacquer_http::Headers;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, Weak};

/// The response headers whose values are tags.
pub const TAG_HEADERS: [&str; 4] = ["xkey", "x-hashtwo", "surrogate-key", "cache-tag"];

const SHARDS: usize = 16;

/// Objects of one tag, by address (an object is unlinked before it goes).
type Members = HashMap<usize, Weak<Object>>;

/// One shard of the index: tag to members.
type Shard = Mutex<HashMap<Box<[u8]>, Members>>;

pub(crate) struct TagIndex {
    shards: Box<[Shard]>,
    hasher: RandomState,
}

/// Splits a list of tags: words separated by white space or commas.
pub fn split(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    list.split(|b| b.is_ascii_whitespace() || *b == b',')
        .filter(|t| !t.is_empty())
}

/// The distinct tags a response's headers give it.
pub fn tags_of(headers: &Headers) -> Vec<Box<[u8]>> {
    tags_of_fields(headers.iter().map(|h| (&h.name[..], &h.value[..])))
}

/// The distinct tags of a list of fields (name, value), in the fields'
/// order, read in one pass.
pub fn tags_of_fields<'a, V: std::ops::Deref<Target = [u8]>>(
    fields: impl Iterator<Item = (&'a [u8], V)>,
) -> Vec<Box<[u8]>> {
    let mut tags: Vec<Box<[u8]>> = Vec::new();
    for (name, value) in fields {
        if !TAG_HEADERS
            .iter()
            .any(|t| t.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        for tag in split(&value) {
            if !tags.iter().any(|t| **t == *tag) {
                tags.push(tag.into());
            }
        }
    }
    tags
}

/// Whether a stored head (its status line, then `Name: value` lines)
/// has a field whose values are tags.
pub fn names_tags(head: &[u8]) -> bool {
    head.split(|&b| b == b'\n').skip(1).any(|line| {
        line.iter().position(|&b| b == b':').is_some_and(|colon| {
            TAG_HEADERS
                .iter()
                .any(|t| t.as_bytes().eq_ignore_ascii_case(&line[..colon]))
        })
    })
}

fn address(obj: &Object) -> usize {
    obj as *const Object as usize
}

impl TagIndex {
    pub fn new() -> TagIndex {
        TagIndex {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, tag: &[u8]) -> &Shard {
        &self.shards[self.hasher.hash_one(tag) as usize % SHARDS]
    }

    /// Records an object under each of its tags.
    pub fn add(&self, obj: &Arc<Object>, tags: &[Box<[u8]>]) {
        for tag in tags {
            let mut map = self.shard(tag).lock().unwrap_or_else(|e| e.into_inner());
            map.entry(tag.clone())
                .or_default()
                .insert(address(obj), Arc::downgrade(obj));
        }
    }

    /// Forgets an object under each of its tags.
    pub fn remove(&self, obj: &Object, tags: &[Box<[u8]>]) {
        for tag in tags {
            let mut map = self.shard(tag).lock().unwrap_or_else(|e| e.into_inner());
            if let Some(members) = map.get_mut(&tag[..]) {
                members.remove(&address(obj));
                if members.is_empty() {
                    map.remove(&tag[..]);
                }
            }
        }
    }

    /// The live objects carrying a tag.
    pub fn objects(&self, tag: &[u8]) -> Vec<Arc<Object>> {
        let map = self.shard(tag).lock().unwrap_or_else(|e| e.into_inner());
        map.get(tag)
            .map(|m| m.values().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }

    /// How many tags have objects.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_come_from_every_tag_header_once() {
        let mut h = Headers::new();
        h.append("xkey", "a b");
        h.append("XKey", "c");
        h.append("Surrogate-Key", "b  d");
        h.append("Cache-Tag", "e,f, a");
        h.append("X-HashTwo", "g");
        h.append("X-Other", "z");
        let tags = tags_of(&h);
        let names: Vec<&[u8]> = tags.iter().map(|t| &t[..]).collect();
        assert_eq!(
            names,
            [&b"a"[..], b"b", b"c", b"d", b"e", b"f", b"g"],
            "in field order, without repeats"
        );
    }

    #[test]
    fn a_head_names_tags_by_any_tag_field() {
        assert!(names_tags(
            b"HTTP/1.1 200 OK\r\nX-A: b\r\nSurrogate-KEY: x\r\n"
        ));
        assert!(names_tags(b"HTTP/1.1 200 OK\r\nxkey: a"));
        assert!(!names_tags(b"HTTP/1.1 200 OK\r\nX-Key: a\r\nXkeys: b\r\n"));
        assert!(!names_tags(b"xkey: status lines are no fields\r\n"));
    }

    #[test]
    fn split_drops_empty_words() {
        let words: Vec<&[u8]> = split(b" ,a,,b \t c ").collect();
        assert_eq!(words, [&b"a"[..], b"b", b"c"]);
    }
}
