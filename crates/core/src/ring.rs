//! The consistent-hash ring of `directors.shard()`, built and searched
//! exactly as varnishd 7.1 builds and searches it, so that a key has the
//! same owner under Lacquer as under varnishd with the same names and
//! weights: the 32-bit hash both use ([`hash32`]), a member's points (its
//! ident followed by each replica number, 0 up), the search that clamps a
//! key past the last point to the last point, and the walk that yields
//! the distinct members from there on, wrapping. Which member is healthy
//! enough to take is the caller's business (vmod directors).

use sha2::{Digest, Sha256};

/// The 32-bit hash of varnishd's shard director, `shard.key()` and hash
/// director: SHA-256 over the parts in order (an empty part adds
/// nothing), of which the last four bytes are read little-endian.
pub fn hash32<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut sha = Sha256::new();
    for part in parts {
        sha.update(part);
    }
    let digest = sha.finalize();
    u32::from_le_bytes([digest[28], digest[29], digest[30], digest[31]])
}

/// The key `by=HASH` takes on the backend side: the first four bytes,
/// big-endian, of the request's SHA-256 digest, made from what
/// `vcl_hash` fed it.
pub fn digest_key(hash_input: &[u8]) -> u32 {
    let digest = Sha256::digest(hash_input);
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The key of a blob (`by=BLOB`): its first four bytes, big-endian, a
/// shorter blob padded with zeros on the left.
pub fn blob_key(blob: &[u8]) -> u32 {
    blob.iter()
        .take(4)
        .fold(0u32, |key, &b| (key << 8) | u32::from(b))
}

/// How many points a member with `weight` gets when added with
/// `replicas`: the product, truncated (a weight under 1 counts as 1).
pub fn replicas_for(replicas: u32, weight: f64) -> u32 {
    let weight = if weight >= 1.0 { weight } else { 1.0 };
    let points = f64::from(replicas) * weight;
    if points > f64::from(u32::MAX) {
        u32::MAX
    } else {
        points as u32
    }
}

/// One member's point on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Point {
    at: u32,
    /// The member's index, in the order the members were given.
    member: u32,
}

/// The ring: every member's points, sorted.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    points: Vec<Point>,
    members: usize,
}

impl Ring {
    /// The ring of `members`, each an ident (the backend's name where no
    /// ident was given) and its number of points, in member order.
    pub fn build(members: &[(&[u8], u32)]) -> Ring {
        let n = members.len();
        if n == 0 {
            return Ring::default();
        }
        // No member may have more points than its share of the space.
        let most = u32::try_from((u64::from(u32::MAX) - 1) / n as u64).unwrap_or(u32::MAX);
        let total: usize = members.iter().map(|(_, r)| (*r).min(most) as usize).sum();
        let mut points = Vec::with_capacity(total);
        let mut number = String::new();
        for (member, (ident, replicas)) in members.iter().enumerate() {
            for replica in 0..(*replicas).min(most) {
                number.clear();
                std::fmt::Write::write_fmt(&mut number, format_args!("{replica}"))
                    .expect("a String takes any write");
                points.push(Point {
                    at: hash32([*ident, number.as_bytes()]),
                    member: member as u32,
                });
            }
        }
        // Stable: equal points stay in member order, then replica order.
        points.sort_by_key(|p| p.at);
        Ring { points, members: n }
    }

    /// Whether the ring has no points (no members).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The number of members.
    pub fn members(&self) -> usize {
        self.members
    }

    /// Each member's share of the 2^32 keys: the keys whose lookup lands
    /// on one of its points (a point takes the keys after the point
    /// before it up to itself; the last point also those past it all).
    pub fn shares(&self) -> Vec<f64> {
        let mut keys = vec![0u64; self.members];
        let mut from = 0u64;
        for (i, p) in self.points.iter().enumerate() {
            let to = if i + 1 == self.points.len() {
                1 << 32
            } else {
                u64::from(p.at) + 1
            };
            keys[p.member as usize] += to.saturating_sub(from);
            from = from.max(to);
        }
        keys.iter()
            .map(|&k| k as f64 / (1u64 << 32) as f64)
            .collect()
    }

    /// The member whose point a key lands on.
    pub fn owner(&self, key: u32) -> Option<usize> {
        self.walk(key).next()
    }

    /// The index of the point `key` lands on: the first point at or past
    /// it, or the last point when the key is past them all (there is no
    /// wrapping here, as in varnishd). The search is varnishd's own, so
    /// that among equal points the same one is found.
    fn lookup(&self, key: u32) -> usize {
        let n = self.points.len();
        let (mut low, mut high) = (0, n);
        loop {
            let i = (low + high) / 2;
            let at = self.points[i].at;
            if at == key || i == n - 1 {
                return i;
            }
            if at < key && self.points[i + 1].at >= key {
                return i + 1;
            }
            if at > key {
                if i == 0 {
                    return 0;
                }
                high = i;
            } else {
                low = i;
            }
        }
    }

    /// The distinct members in ring order from the point `key` lands on,
    /// wrapping around: the owner first, then each next candidate.
    pub fn walk(&self, key: u32) -> Walk<'_> {
        let start = if self.points.is_empty() {
            0
        } else {
            self.lookup(key)
        };
        Walk {
            ring: self,
            at: start,
            stepped: 0,
            seen: vec![false; self.members],
            found: 0,
        }
    }
}

/// The members of a ring in order from a key ([`Ring::walk`]).
pub struct Walk<'r> {
    ring: &'r Ring,
    at: usize,
    /// Points stepped over so far (the walk stops after a full turn).
    stepped: usize,
    seen: Vec<bool>,
    found: usize,
}

impl Iterator for Walk<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let points = &self.ring.points;
        while self.found < self.ring.members && self.stepped < points.len() {
            let member = points[self.at].member as usize;
            self.at = (self.at + 1) % points.len();
            self.stepped += 1;
            if !self.seen[member] {
                self.seen[member] = true;
                self.found += 1;
                return Some(member);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ring_members: &[&str], replicas: u32) -> Ring {
        let members: Vec<(&[u8], u32)> = ring_members
            .iter()
            .map(|n| (n.as_bytes(), replicas))
            .collect();
        Ring::build(&members)
    }

    #[test]
    fn the_hash_is_varnishds() {
        // Values varnishd's shard director computes (its tests d00015
        // and d00017 list them).
        assert_eq!(hash32([&b"s1"[..], b"0"]), 0xf08a_d325);
        assert_eq!(hash32([&b"s10"[..]]), 0xf08a_d325);
        assert_eq!(hash32([&b"s2"[..], b"0"]), 0x6e04_0182);
        assert_eq!(hash32([&b"1"[..], b"0"]), 0xd51d_afe6);
        // An empty part adds nothing.
        assert_eq!(hash32([&b""[..], b"s", b"", b"10"]), 0xf08a_d325);
        assert_eq!(hash32([&b"/Boo0aixe"[..]]), 0xd0b5_f795);
        assert_eq!(hash32([&b"/eishoSu2"[..]]), 0xdace_4662);
        assert_eq!(hash32([&b"/Aunah3uo"[..]]), 0x97b7_3d62);
    }

    #[test]
    fn keys_find_the_owner_varnishd_finds() {
        // Three members of 25 points (varnishd's d00017 and d00018).
        let ring = names(&["s1", "s2", "s3"], 25);
        assert_eq!(ring.points.len(), 75);
        assert_eq!(ring.points[0].at, 0x03b6_b56a);
        assert_eq!(ring.points[74].at, 0xfc28_e8d2);
        assert_eq!(
            (ring.points[29].at, ring.points[30].at),
            (0x6bfd_5a2d, 0x6e04_0182)
        );
        for (key, owner) in [
            (0x68b9_02f7, 0),
            (0x39dc_4613, 1),
            (0xc779_3505, 2),
            (1, 0),
            (2_147_483_647, 1),
            // Past the last point: the last point's member, no wrap.
            (u32::MAX, 2),
            (0xd0b5_f795, 0),
            (0xdace_4662, 1),
            (0x97b7_3d62, 2),
        ] {
            assert_eq!(ring.owner(key), Some(owner), "key {key:#x}");
        }
    }

    #[test]
    fn the_walk_gives_each_member_once_wrapping() {
        let ring = names(&["s1", "s2", "s3"], 25);
        for key in [0, 1 << 31, u32::MAX, 0x6bfd_5a2d] {
            let mut order: Vec<usize> = ring.walk(key).collect();
            assert_eq!(order.len(), 3);
            order.sort_unstable();
            assert_eq!(order, [0, 1, 2]);
        }
        assert_eq!(Ring::build(&[]).owner(7), None);
    }

    #[test]
    fn weights_and_keys_are_read_as_varnishd_reads_them() {
        assert_eq!(replicas_for(67, 1.0), 67);
        assert_eq!(replicas_for(67, 1.5), 100);
        assert_eq!(replicas_for(67, 0.5), 67);
        assert_eq!(replicas_for(u32::MAX, 2.0), u32::MAX);
        assert_eq!(blob_key(&[0x68, 0xb9, 0x02, 0xf7, 0xff]), 0x68b9_02f7);
        assert_eq!(blob_key(&[1]), 1);
        assert_eq!(blob_key(&[1, 2]), 0x0102);
        assert_eq!(blob_key(&[]), 0);
        // SHA-256("") starts e3b0c442.
        assert_eq!(digest_key(b""), 0xe3b0_c442);
    }

    #[test]
    fn shares_add_up_and_follow_the_lookup() {
        let ring = Ring::build(&[
            (b"a".as_slice(), 67),
            (b"b".as_slice(), 67),
            (b"c".as_slice(), 67),
        ]);
        let shares = ring.shares();
        let total: f64 = shares.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        // Sampled keys land on each member about as often as its share.
        let mut hits = [0u32; 3];
        for k in 0..30_000u32 {
            hits[ring.owner(k.wrapping_mul(143_165)).unwrap()] += 1;
        }
        for (m, share) in shares.iter().enumerate() {
            let seen = f64::from(hits[m]) / 30_000.0;
            assert!((seen - share).abs() < 0.02, "member {m}: {seen} vs {share}");
        }
        assert!(Ring::default().shares().is_empty());
    }
}
