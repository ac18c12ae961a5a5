//! IPv4 route table: longest-prefix match, with an optional TTL range.
//!
//! The TTL range reproduces the ICC 2006 TDP testbed (§IV-B), whose FreeBSD
//! routers were "modified to make IP routing decisions based on both the
//! destination address and the time-to-live": a packet loops n times
//! around a ring and leaves once its TTL has fallen far enough. Routes with
//! a TTL range are preferred over plain routes of the same prefix length.

use std::fmt;
use std::net::Ipv4Addr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: Ipv4Addr,
    pub len: u8,
    /// Inclusive TTL range the route applies to (TTL as received).
    pub ttl: (u8, u8),
    pub port: u16,
    /// Next hop; `None` means the destination is on the link.
    pub gateway: Option<Ipv4Addr>,
}

impl Route {
    pub fn new(prefix: Ipv4Addr, len: u8, port: u16) -> Self {
        Route {
            prefix,
            len: len.min(32),
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
        mask(self.len)
    }
    pub fn matches(&self, dst: Ipv4Addr, ttl: u8) -> bool {
        u32::from(dst) & self.mask() == u32::from(self.prefix) & self.mask()
            && (self.ttl.0..=self.ttl.1).contains(&ttl)
    }
    fn ttl_specific(&self) -> bool {
        self.ttl != (0, 255)
    }
}

pub fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32) as u32)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.prefix, self.len)?;
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
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: Vec<Route>,
    /// Per route, in the same order, what [`Route::matches`] tests,
    /// precomputed: a lookup (one per forwarded packet) scans these
    /// 12-byte entries instead of recomputing each route's mask.
    keys: Vec<MatchKey>,
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
            net: u32::from(r.prefix) & r.mask(),
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
        let key = u32::from(r.prefix) & r.mask();
        if let Some(o) = self.routes.iter().find(|o| {
            o.len == r.len
                && u32::from(o.prefix) & o.mask() == key
                && o.ttl.0 <= r.ttl.1
                && r.ttl.0 <= o.ttl.1
                && o.ttl_specific() == r.ttl_specific()
        }) {
            return Err(format!("route {r} overlaps existing route {o}"));
        }
        let pos = self
            .routes
            .iter()
            .position(|o| (o.len, o.ttl_specific()) < (r.len, r.ttl_specific()))
            .unwrap_or(self.routes.len());
        self.routes.insert(pos, r);
        self.keys.insert(pos, MatchKey::of(&r));
        Ok(())
    }
    pub fn lookup(&self, dst: Ipv4Addr, ttl: u8) -> Option<&Route> {
        let dst = u32::from(dst);
        let i = self.keys.iter().position(|k| k.matches(dst, ttl))?;
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
                let want = t.iter().find(|r| r.matches(dst, ttl));
                proptest::prop_assert_eq!(t.lookup(dst, ttl), want);
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
