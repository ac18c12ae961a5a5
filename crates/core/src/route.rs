//! IPv4 route table: longest-prefix match, with an optional TTL range.
//!
//! The TTL range reproduces the ICC 2006 TDP testbed (§IV-B), whose FreeBSD
//! routers were "modified to make IP routing decisions based on both the
//! destination address and the time-to-live": a packet loops n times
//! around a ring and leaves once its TTL has fallen far enough. Routes with
//! a TTL range are preferred over plain routes of the same prefix length.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 prefix, `a.b.c.d/len` (CIDR notation, RFC 4632 §3.1): the one
/// prefix type of qosnet, for routes, scenario subnets and lab addresses
/// alike. The address keeps its host bits (an interface address such as
/// `10.0.1.1/24` is one); [`Ipv4Prefix::network`] clears them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

/// Why a text is not an IPv4 prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// No `/`: the whole text.
    NoLength(String),
    /// The part before `/`.
    BadAddress(String),
    /// The part after `/`, or a number above 32.
    BadLength(String),
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::NoLength(s) => write!(f, "`{s}` is not ADDRESS/LENGTH"),
            PrefixError::BadAddress(a) => write!(f, "`{a}` is not an IPv4 address"),
            PrefixError::BadLength(l) => write!(f, "`{l}` is not a prefix length 0..=32"),
        }
    }
}

impl std::error::Error for PrefixError {}

impl Ipv4Prefix {
    /// `0.0.0.0/0`, the destination of a default route.
    pub const DEFAULT: Ipv4Prefix = Ipv4Prefix {
        addr: Ipv4Addr::UNSPECIFIED,
        len: 0,
    };

    /// `addr/len`; a length above 32 is refused.
    pub fn new(addr: Ipv4Addr, len: u8) -> Result<Ipv4Prefix, PrefixError> {
        if len > 32 {
            return Err(PrefixError::BadLength(len.to_string()));
        }
        Ok(Ipv4Prefix { addr, len })
    }

    /// `a.b.c.d/len`, the length required (a scenario's subnets and
    /// route prefixes).
    pub fn parse_cidr(s: &str) -> Result<Ipv4Prefix, PrefixError> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| PrefixError::NoLength(s.to_string()))?;
        Self::parse_parts(a, l)
    }

    fn parse_parts(a: &str, l: &str) -> Result<Ipv4Prefix, PrefixError> {
        let addr: Ipv4Addr = a.parse().map_err(|_| PrefixError::BadAddress(a.to_string()))?;
        let len = l
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| PrefixError::BadLength(l.to_string()))?;
        Ok(Ipv4Prefix { addr, len })
    }

    /// The netmask as a host-order word.
    pub fn mask(&self) -> u32 {
        mask(self.len)
    }

    /// The same prefix with the host bits cleared (`10.0.1.1/24` →
    /// `10.0.1.0/24`).
    pub fn network(&self) -> Ipv4Prefix {
        Ipv4Prefix {
            addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()),
            len: self.len,
        }
    }

    /// Whether `ip` lies inside the prefix.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.addr) & self.mask()
    }
}

/// `a.b.c.d/len`; a bare address means `/32` (a host). Surrounding
/// blanks around either part are allowed.
impl FromStr for Ipv4Prefix {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Ipv4Prefix, PrefixError> {
        let (a, l) = s.split_once('/').unwrap_or((s, "32"));
        Self::parse_parts(a.trim(), l.trim())
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destinations this route covers.
    pub dst: Ipv4Prefix,
    /// Inclusive TTL range the route applies to (TTL as received).
    pub ttl: (u8, u8),
    pub port: u16,
    /// Next hop; `None` means the destination is on the link.
    pub gateway: Option<Ipv4Addr>,
}

impl Route {
    pub fn new(prefix: Ipv4Addr, len: u8, port: u16) -> Self {
        Route {
            dst: Ipv4Prefix {
                addr: prefix,
                len: len.min(32),
            },
            ttl: (0, 255),
            port,
            gateway: None,
        }
    }
    pub fn with_ttl(mut self, lo: u8, hi: u8) -> Self {
        self.ttl = (lo, hi);
        self
    }
    pub fn via(mut self, gw: Ipv4Addr) -> Self {
        self.gateway = Some(gw);
        self
    }
    fn mask(&self) -> u32 {
        self.dst.mask()
    }
    pub fn matches(&self, dst: Ipv4Addr, ttl: u8) -> bool {
        self.dst.contains(dst) && (self.ttl.0..=self.ttl.1).contains(&ttl)
    }
    fn ttl_specific(&self) -> bool {
        self.ttl != (0, 255)
    }
}

/// The netmask of a prefix length, as a host-order word.
pub fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32) as u32)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dst)?;
        if self.ttl_specific() {
            write!(f, " ttl {}..={}", self.ttl.0, self.ttl.1)?;
        }
        write!(f, " port {}", self.port)?;
        if let Some(g) = self.gateway {
            write!(f, " via {g}")?;
        }
        Ok(())
    }
}

/// Routes kept sorted by (prefix length desc, TTL-specific first), so the
/// first match is the answer. Tables here are small (tens of routes); a
/// linear scan over a sorted vector beats a trie at that size.
#[derive(Clone, Debug)]
pub struct RouteTable {
    routes: Vec<Route>,
    /// Per route, in the same order, what [`Route::matches`] tests,
    /// precomputed: a lookup (one per forwarded packet) scans these
    /// 12-byte entries instead of recomputing each route's mask.
    keys: Vec<MatchKey>,
    /// Recent answers of [`RouteTable::lookup_cached`], direct-mapped by
    /// (destination, TTL): `dst << 32 | ttl << 16 | index + 1`, 0 for
    /// empty. A router forwards the same few (destination, TTL) pairs over
    /// and over (the ICC 2006 testbed: a handful of flows, each looping a
    /// ring with its TTL falling), and the scan of a table of TTL-ranged
    /// routes was a tenth of the simulator's instructions per hop. Only
    /// hits are kept; [`RouteTable::add`] empties it.
    cache: Box<[u64; CACHE]>,
}

/// Entries of the lookup cache (a power of two).
const CACHE: usize = 64;

impl Default for RouteTable {
    fn default() -> Self {
        RouteTable {
            routes: Vec::new(),
            keys: Vec::new(),
            cache: Box::new([0; CACHE]),
        }
    }
}

/// A route's match test: `dst & mask == net` and `lo <= ttl <= hi`.
#[derive(Clone, Copy, Debug)]
struct MatchKey {
    mask: u32,
    net: u32,
    lo: u8,
    hi: u8,
}

impl MatchKey {
    fn of(r: &Route) -> Self {
        MatchKey {
            mask: r.mask(),
            net: u32::from(r.dst.addr) & r.mask(),
            lo: r.ttl.0,
            hi: r.ttl.1,
        }
    }
    #[inline(always)]
    fn matches(&self, dst: u32, ttl: u8) -> bool {
        dst & self.mask == self.net && self.lo <= ttl && ttl <= self.hi
    }
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a route. Refuses an exact duplicate key (same prefix, length and
    /// overlapping TTL range) with a message naming both routes.
    pub fn add(&mut self, r: Route) -> Result<(), String> {
        let key = u32::from(r.dst.addr) & r.mask();
        if let Some(o) = self.routes.iter().find(|o| {
            o.dst.len == r.dst.len
                && u32::from(o.dst.addr) & o.mask() == key
                && o.ttl.0 <= r.ttl.1
                && r.ttl.0 <= o.ttl.1
                && o.ttl_specific() == r.ttl_specific()
        }) {
            return Err(format!("route {r} overlaps existing route {o}"));
        }
        let pos = self
            .routes
            .iter()
            .position(|o| (o.dst.len, o.ttl_specific()) < (r.dst.len, r.ttl_specific()))
            .unwrap_or(self.routes.len());
        self.routes.insert(pos, r);
        self.keys.insert(pos, MatchKey::of(&r));
        self.cache.fill(0);
        Ok(())
    }
    pub fn lookup(&self, dst: Ipv4Addr, ttl: u8) -> Option<&Route> {
        let dst = u32::from(dst);
        let i = self.keys.iter().position(|k| k.matches(dst, ttl))?;
        self.routes.get(i)
    }
    /// [`lookup`](Self::lookup) through the cache of recent answers: the
    /// same route, without the scan when (`dst`, `ttl`) was looked up
    /// since the table last changed and its cache slot was not reused.
    #[inline]
    pub fn lookup_cached(&mut self, dst: Ipv4Addr, ttl: u8) -> Option<&Route> {
        let d = u32::from(dst);
        let tag = (d as u64) << 32 | (ttl as u64) << 16;
        // Fibonacci hashing of the pair; the top bits pick the slot.
        let h = ((d ^ (ttl as u32) << 24) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = (h >> (64 - CACHE.trailing_zeros())) as usize;
        let e = self.cache[slot];
        if e & !0xffff == tag && e & 0xffff != 0 {
            return self.routes.get((e & 0xffff) as usize - 1);
        }
        let i = self.keys.iter().position(|k| k.matches(d, ttl))?;
        if i < 0xffff {
            self.cache[slot] = tag | (i as u64 + 1);
        }
        self.routes.get(i)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }
    pub fn len(&self) -> usize {
        self.routes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_print_and_contain() {
        let p: Ipv4Prefix = "10.1.2.3/24".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.2.3/24");
        assert_eq!(p.network().to_string(), "10.1.2.0/24");
        assert!(p.contains(Ipv4Addr::new(10, 1, 2, 200)) && !p.contains(Ipv4Addr::new(10, 1, 3, 1)));
        assert_eq!("1.2.3.4".parse::<Ipv4Prefix>().unwrap().len, 32);
        assert_eq!(" 1.2.3.4 / 8 ".parse::<Ipv4Prefix>().unwrap().len, 8);
        assert!(Ipv4Prefix::DEFAULT.contains(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(Ipv4Prefix::parse_cidr("10.0.0.0/8").unwrap().len, 8);
        let e = |s: &str| Ipv4Prefix::parse_cidr(s).unwrap_err().to_string();
        assert_eq!(e("10.0.0.0"), "`10.0.0.0` is not ADDRESS/LENGTH");
        assert_eq!(e("10.0.0/8"), "`10.0.0` is not an IPv4 address");
        assert_eq!(e("10.0.0.0/33"), "`33` is not a prefix length 0..=32");
        assert!("x/3".parse::<Ipv4Prefix>().is_err());
        assert_eq!(
            Ipv4Prefix::new(Ipv4Addr::LOCALHOST, 33),
            Err(PrefixError::BadLength("33".into()))
        );
        assert_eq!(Route::new(Ipv4Addr::new(10, 0, 0, 0), 40, 1).dst.len, 32);
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    proptest::proptest! {
        /// The precomputed match keys give what a scan with
        /// [`Route::matches`] gives.
        #[test]
        fn lookup_is_the_first_matching_route(
            routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u8..=255, 0u8..=255), 0..40),
            probes in proptest::collection::vec((any::<u32>(), any::<u8>()), 1..50),
        ) {
            let mut t = RouteTable::new();
            for (k, &(p, len, a, b)) in routes.iter().enumerate() {
                let r = Route::new(Ipv4Addr::from(p), len, k as u16);
                let r = if a % 3 == 0 { r } else { r.with_ttl(a.min(b), a.max(b)) };
                let _ = t.add(r);
            }
            // Destinations near the routes' prefixes, and random ones.
            for (k, &(x, ttl)) in probes.iter().enumerate() {
                let dst = match routes.get(k) {
                    Some(&(p, ..)) if x % 2 == 0 => Ipv4Addr::from(p ^ (x >> 20)),
                    _ => Ipv4Addr::from(x),
                };
                let want = t.iter().find(|r| r.matches(dst, ttl)).copied();
                proptest::prop_assert_eq!(t.lookup(dst, ttl).copied(), want);
                // Twice through the cache: a miss, then (mostly) a hit.
                proptest::prop_assert_eq!(t.lookup_cached(dst, ttl).copied(), want);
                proptest::prop_assert_eq!(t.lookup_cached(dst, ttl).copied(), want);
            }
            // A route added later is seen through the cache.
            let (dst, ttl) = (Ipv4Addr::from(probes[0].0), probes[0].1);
            let _ = t.lookup_cached(dst, ttl);
            if t.add(Route::new(dst, 32, 999).with_ttl(ttl, ttl)).is_ok() {
                proptest::prop_assert_eq!(t.lookup_cached(dst, ttl).map(|r| r.port), Some(999));
            }
        }
    }
    use proptest::prelude::any;

    #[test]
    fn longest_prefix_wins() {
        let mut t = RouteTable::new();
        t.add(Route::new(ip("0.0.0.0"), 0, 9)).unwrap();
        t.add(Route::new(ip("10.0.0.0"), 8, 1)).unwrap();
        t.add(Route::new(ip("10.1.0.0"), 16, 2)).unwrap();
        assert_eq!(t.lookup(ip("10.1.2.3"), 64).unwrap().port, 2);
        assert_eq!(t.lookup(ip("10.2.2.3"), 64).unwrap().port, 1);
        assert_eq!(t.lookup(ip("192.0.2.1"), 64).unwrap().port, 9);
    }

    #[test]
    fn ttl_ranges_route_loops() {
        let mut t = RouteTable::new();
        t.add(Route::new(ip("10.9.0.0"), 24, 5)).unwrap();
        t.add(Route::new(ip("10.9.0.0"), 24, 1).with_ttl(45, 255))
            .unwrap();
        assert_eq!(t.lookup(ip("10.9.0.7"), 64).unwrap().port, 1);
        assert_eq!(t.lookup(ip("10.9.0.7"), 45).unwrap().port, 1);
        assert_eq!(t.lookup(ip("10.9.0.7"), 44).unwrap().port, 5);
    }

    #[test]
    fn overlapping_routes_are_refused() {
        let mut t = RouteTable::new();
        t.add(Route::new(ip("10.9.0.0"), 24, 1).with_ttl(40, 50)).unwrap();
        let e = t
            .add(Route::new(ip("10.9.0.0"), 24, 2).with_ttl(50, 60))
            .unwrap_err();
        assert!(e.contains("overlaps"), "{e}");
        t.add(Route::new(ip("10.9.0.0"), 24, 2).with_ttl(51, 60)).unwrap();
        assert_eq!(mask(0), 0);
        assert_eq!(mask(32), u32::MAX);
    }
}
