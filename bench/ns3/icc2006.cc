// qosnet's ns-3 model of the ICC 2006 TDP testbed, FIFO variant
// (Baldi et al., "Time Driven Priority Router Implementation and First
// Experiments", ICC 2006, §IV): four routers in full mesh at 100 Mb/s,
// RouterTester ports as hosts, CBR flows looping round rings, routed on
// destination AND TTL as the paper's modified FreeBSD routers were.
//
// It is an independent second simulator for qosnet's: the same scenario is
// run by both (scripts/bench-sim-vs-ns3) and their per-flow delays must
// agree. Nothing here is taken from qosnet's code; the behaviour it must
// match is the one documented in docs/scenario-format.md ("Generated
// routes", link framing) and docs/results.md (measurement window).
//
// ns-3 modules used (Debian's libns3-dev 3.37):
//   core            simulator, event schedulers, time, object system
//   network         nodes, packets, queues (DropTailQueue), Mac48Address
//   internet        IPv4 stack (Ipv4L3Protocol: forwarding, TTL decrement,
//                   UDP), InternetStackHelper, Ipv4RoutingProtocol API
//   point-to-point  PointToPointNetDevice/Channel: full-duplex serial links
//                   (one independent transmitter per direction, store and
//                   forward, a fixed propagation delay)
//
// What is modelled, and how it maps onto ns-3 (bench/ns3/README.md has the
// full table):
//
// * Topology. The program reads a small text description (written by
//   scripts/bench-sim-vs-ns3 from the scenario TOML): nodes (routers,
//   hosts), links (rate, delay, framing), flows (endpoints, ring path,
//   loops, size, rate, phase, TTL, ports, the generator's clock drift).
//   Interfaces are created in link order and addressed as qosnet does
//   (link i: 10.(i>>8).(i&255).0/24, end `a` .1, end `b` .2), so qosnet's
//   "port p" is ns-3 IPv4 interface p+1 (interface 0 is loopback).
//
// * Routing on destination and TTL. ns-3's stock routing protocols
//   (Ipv4StaticRouting, Ipv4GlobalRouting) look at the destination only,
//   so a packet looping round a ring would loop forever. TtlRouting below
//   is a complete Ipv4RoutingProtocol: a route is (prefix/len, inclusive
//   TTL range, output interface, gateway); lookup is longest prefix first,
//   and among equal lengths TTL-specific routes first (the paper's rule),
//   matching the TTL *as received* (RouteInput is called before
//   Ipv4L3Protocol::IpForward decrements it). The table is generated here
//   from the description by the rules of docs/scenario-format.md
//   ("Generated routes"): connected subnets and hop-count shortest paths to
//   every link subnet (ties to the lower node index), /32 routes along each
//   flow's path, and for a ring walked `loops` times one exact-TTL /32
//   route per router visit. `--print-routes` prints the tables and each
//   flow's hop trace in `qosnet check`'s format, and the bench script
//   compares them line by line with qosnet's, before any timing.
//
// * Ethernet framing on a point-to-point link. PointToPointNetDevice
//   serialises `packet size` bytes (IP datagram + its 2-byte PPP header) at
//   the data rate. EthernetP2PDevice (a PointToPointNetDevice whose Send
//   pads the packet) makes that size the Ethernet wire cost instead:
//       14 (MAC header) + IP (padded to the 60-byte minimum frame)
//       + 4 (FCS) + 8 (preamble/SFD) + 12 (inter-frame gap)
//   = 1040 bytes = 83.2 us at 100 Mb/s for a 1002-byte IP packet.
//   The padding is zero bytes after the IP datagram; Ipv4L3Protocol::Receive
//   trims it ("residual frame padding") at the next hop. qosnet delivers a
//   frame to the far end at (transmission start + all those bytes + delay),
//   i.e. the IFG is counted before the receiver sees the frame; that is the
//   default here. `--ifg-after-frame` models the physical order instead (the
//   receiver has the frame after FCS; the 12-byte IFG is idle line time
//   after it, ns-3's InterframeGap attribute), to measure what the
//   convention is worth.
//
// * Routers: no processing time (the comparison runs qosnet with
//   processing 0), one FIFO per output interface: the device's
//   DropTailQueue, limited to the router's queue_packets. No traffic-control
//   queue disc is installed (addresses are assigned by hand, not by
//   Ipv4AddressHelper, which would install ns-3's default root queue disc),
//   so IP hands packets straight to the device queue.
//
// * Hosts: an application per flow sends UDP datagrams of exactly `size`
//   IP bytes through an ordinary ns-3 UDP socket, each carrying a 24-byte
//   probe (flow, sequence number, send time). Send times are computed as
//   qosnet's CBR generator does: the k-th packet at local time
//   round(start + k * 1e9/pps) ns on the generator's clock, converted to
//   true time with the host's clock_drift_ppm/clock_offset
//   (ceil((local - offset) / (1 + ppm * 1e-6))), while local time < stop.
//   Another socket per (host, dport) receives and measures.
//
// * Measurement (docs/results.md): `sent` counts packets sent in
//   [warmup, duration); delays are recorded for those packets when they
//   arrive (one-way, send to delivery at the destination's IP layer); the run
//   continues until the network is empty (nothing here keeps timers, so it
//   ends by itself; qosnet stops at the same point, or at duration + drain
//   at the latest, and the script checks that both delivered every packet).
//   Output: JSON on stdout with per-flow sent/received/lost, delay
//   min/mean/p50/p99/p999/max (exact, from all samples), router hops seen
//   (initial TTL minus received TTL), drops by reason, and the engine's
//   event count (Simulator::GetEventCount) and wall time of Simulator::Run.
//
// Usage: icc2006 DESCRIPTION [--print-routes] [--ifg-after-frame]
//                [--scheduler map|heap|list|calendar|priority] [--tie-seed N]
//                [--cpu-stage] [--trace FILE]
//
// Diagnostics (bench/ns3/README.md, "Why the two differ on the scenario as
// given"): --tie-seed N runs events of the same nanosecond in a seeded
// random order instead of ns-3's FIFO order; --cpu-stage hands each packet a
// router forwards to its output queue in a separate zero-delay event, the
// way qosnet's router CPU stage (processing time 0) did before its fifth
// round of speed work (docs/measurements.md).
//
// --trace FILE writes a line per frame put on a link (time of its first bit,
// node, port, flow, sequence number, TTL), the same facts qosnet's --pcap
// captures hold, to find where two simulations part. Not for timed runs.

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace ns3;

namespace
{

[[noreturn]] void
Die(const std::string& msg)
{
    std::cerr << "icc2006: " << msg << std::endl;
    std::exit(2);
}

// ---------------------------------------------------------------------------
// The scenario description (one record per line: KIND NAME key=value ...).

struct NodeDesc
{
    std::string name;
    bool router = false;
    uint32_t queuePackets = 1000;
    double driftPpm = 0.0; // hosts: the traffic generator's clock
    int64_t offsetNs = 0;
};

struct LinkDesc
{
    uint32_t a = 0, b = 0;
    uint64_t rateBps = 0;
    int64_t delayNs = 0;
    uint32_t fcs = 4, preamble = 8, ifg = 12;
    uint32_t prefix = 0; // host byte order
    uint8_t prefixLen = 24;
};

struct FlowDesc
{
    std::string name;
    uint32_t from = 0, to = 0;
    std::vector<uint32_t> path;
    uint32_t loops = 0; // > 0: `path` is a ring walked `loops` times
    uint32_t size = 0;  // IP bytes
    double pps = 0;
    int64_t startNs = 0;
    int64_t stopNs = 0;
    uint8_t ttl = 64;
    uint16_t sport = 0, dport = 5001;
};

struct Description
{
    std::string name;
    int64_t durationNs = 0, warmupNs = 0, drainNs = 200000000;
    std::vector<NodeDesc> nodes;
    std::vector<LinkDesc> links;
    std::vector<FlowDesc> flows;

    uint32_t Node(const std::string& n) const
    {
        for (uint32_t i = 0; i < nodes.size(); i++)
        {
            if (nodes[i].name == n)
            {
                return i;
            }
        }
        Die("unknown node `" + n + "`");
    }
};

int64_t
ToInt(const std::string& key, const std::string& v)
{
    try
    {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        if (used != v.size())
        {
            throw std::invalid_argument(v);
        }
        return x;
    }
    catch (const std::exception&)
    {
        Die("`" + key + "=" + v + "` is not an integer");
    }
}

double
ToDouble(const std::string& key, const std::string& v)
{
    try
    {
        size_t used = 0;
        double x = std::stod(v, &used);
        if (used != v.size() || !std::isfinite(x))
        {
            throw std::invalid_argument(v);
        }
        return x;
    }
    catch (const std::exception&)
    {
        Die("`" + key + "=" + v + "` is not a number");
    }
}

uint32_t
ParseIp(const std::string& s)
{
    unsigned a, b, c, d;
    char tail;
    if (std::sscanf(s.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 ||
        b > 255 || c > 255 || d > 255)
    {
        Die("`" + s + "` is not an IPv4 address");
    }
    return (a << 24) | (b << 16) | (c << 8) | d;
}

std::string
IpStr(uint32_t ip)
{
    std::ostringstream o;
    o << (ip >> 24) << '.' << ((ip >> 16) & 255) << '.' << ((ip >> 8) & 255) << '.' << (ip & 255);
    return o.str();
}

Description
ReadDescription(const std::string& file)
{
    std::ifstream in(file);
    if (!in)
    {
        Die("cannot read " + file);
    }
    Description d;
    std::string line;
    int lineNo = 0;
    while (std::getline(in, line))
    {
        lineNo++;
        if (line.empty() || line[0] == '#')
        {
            continue;
        }
        std::istringstream ls(line);
        std::string kind, name;
        ls >> kind >> name;
        std::map<std::string, std::string> kv;
        std::string tok;
        while (ls >> tok)
        {
            auto eq = tok.find('=');
            if (eq == std::string::npos)
            {
                Die(file + ":" + std::to_string(lineNo) + ": expected key=value, got `" + tok + "`");
            }
            kv[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        auto take = [&](const std::string& k) -> std::string {
            auto it = kv.find(k);
            if (it == kv.end())
            {
                return "";
            }
            std::string v = it->second;
            kv.erase(it);
            return v;
        };
        auto need = [&](const std::string& k) -> std::string {
            std::string v = take(k);
            if (v.empty())
            {
                Die(file + ":" + std::to_string(lineNo) + ": " + kind + " " + name + " needs " + k);
            }
            return v;
        };
        if (kind == "scenario")
        {
            d.name = name;
            d.durationNs = ToInt("duration_ns", need("duration_ns"));
            d.warmupNs = ToInt("warmup_ns", need("warmup_ns"));
            d.drainNs = ToInt("drain_ns", need("drain_ns"));
        }
        else if (kind == "node")
        {
            NodeDesc n;
            n.name = name;
            std::string k = need("kind");
            if (k != "router" && k != "host")
            {
                Die("node " + name + ": kind must be router or host");
            }
            n.router = k == "router";
            std::string v = take("queue_packets");
            if (!v.empty())
            {
                n.queuePackets = ToInt("queue_packets", v);
            }
            v = take("drift_ppm");
            if (!v.empty())
            {
                n.driftPpm = ToDouble("drift_ppm", v);
            }
            v = take("offset_ns");
            if (!v.empty())
            {
                n.offsetNs = ToInt("offset_ns", v);
            }
            d.nodes.push_back(n);
        }
        else if (kind == "link")
        {
            LinkDesc l;
            l.a = d.Node(need("a"));
            l.b = d.Node(need("b"));
            l.rateBps = ToInt("rate_bps", need("rate_bps"));
            l.delayNs = ToInt("delay_ns", need("delay_ns"));
            l.fcs = ToInt("fcs", need("fcs"));
            l.preamble = ToInt("preamble", need("preamble"));
            l.ifg = ToInt("ifg", need("ifg"));
            std::string sub = take("subnet");
            uint32_t idx = d.links.size();
            if (sub.empty())
            {
                // qosnet's default: link i is 10.(i>>8).(i&255).0/24.
                l.prefix = (10u << 24) | ((idx >> 8) << 16) | ((idx & 255) << 8);
                l.prefixLen = 24;
            }
            else
            {
                auto slash = sub.find('/');
                if (slash == std::string::npos)
                {
                    Die("link subnet `" + sub + "` needs /len");
                }
                l.prefix = ParseIp(sub.substr(0, slash));
                l.prefixLen = ToInt("subnet", sub.substr(slash + 1));
                if (l.prefixLen > 30)
                {
                    Die("link subnet `" + sub + "` is too small");
                }
            }
            d.links.push_back(l);
        }
        else if (kind == "flow")
        {
            FlowDesc f;
            f.name = name;
            f.from = d.Node(need("from"));
            f.to = d.Node(need("to"));
            std::string p = take("path");
            std::istringstream ps(p);
            std::string hop;
            while (std::getline(ps, hop, ','))
            {
                if (!hop.empty())
                {
                    f.path.push_back(d.Node(hop));
                }
            }
            std::string lp = take("loops");
            f.loops = lp.empty() ? 0 : ToInt("loops", lp);
            f.size = ToInt("size", need("size"));
            f.pps = ToDouble("pps", need("pps"));
            f.startNs = ToInt("start_ns", need("start_ns"));
            f.stopNs = ToInt("stop_ns", need("stop_ns"));
            f.ttl = ToInt("ttl", need("ttl"));
            f.sport = ToInt("sport", need("sport"));
            f.dport = ToInt("dport", need("dport"));
            if (f.size < 20 + 8 + 24 || f.size > 9000)
            {
                Die("flow " + name + ": size must be 52..9000 IP bytes (UDP + 24-byte probe)");
            }
            if (f.pps <= 0)
            {
                Die("flow " + name + ": rate must be positive");
            }
            d.flows.push_back(f);
        }
        else
        {
            Die(file + ":" + std::to_string(lineNo) + ": unknown record `" + kind + "`");
        }
        if (!kv.empty())
        {
            Die(file + ":" + std::to_string(lineNo) + ": unknown key `" + kv.begin()->first + "`");
        }
    }
    if (d.durationNs <= 0)
    {
        Die("description has no scenario record");
    }
    return d;
}

// ---------------------------------------------------------------------------
// Interfaces and generated routes (docs/scenario-format.md, "Generated
// routes"), computed from the description alone.

struct Iface
{
    uint32_t link;
    uint32_t ip;
    uint8_t prefixLen;
    uint32_t peer;     // node index
    uint32_t peerPort; // the peer's port index
    uint32_t peerIp;
};

// One route: destination prefix, inclusive TTL range (as received), output
// port, and gateway (0: the destination is on the link).
struct TtlRoute
{
    uint32_t prefix;
    uint8_t len;
    uint8_t ttlLo, ttlHi;
    uint32_t port;
    uint32_t gateway;

    uint32_t Mask() const
    {
        return len == 0 ? 0 : ~uint32_t(0) << (32 - len);
    }
    bool TtlSpecific() const
    {
        return !(ttlLo == 0 && ttlHi == 255);
    }
    bool Matches(uint32_t dst, uint8_t ttl) const
    {
        return (dst & Mask()) == (prefix & Mask()) && ttl >= ttlLo && ttl <= ttlHi;
    }
    std::string Str() const
    {
        std::ostringstream o;
        o << IpStr(prefix) << '/' << unsigned(len);
        if (TtlSpecific())
        {
            o << " ttl " << unsigned(ttlLo) << "..=" << unsigned(ttlHi);
        }
        o << " port " << port;
        if (gateway != 0)
        {
            o << " via " << IpStr(gateway);
        }
        return o.str();
    }
};

// A route table kept sorted by (prefix length descending, TTL-specific
// first), insertion order among equals: the first match is the answer.
class TtlTable
{
  public:
    void Add(const TtlRoute& r, const std::string& who)
    {
        for (const auto& o : m_routes)
        {
            if (o.len == r.len && (o.prefix & o.Mask()) == (r.prefix & r.Mask()) &&
                o.ttlLo <= r.ttlHi && r.ttlLo <= o.ttlHi && o.TtlSpecific() == r.TtlSpecific())
            {
                Die(who + ": route " + r.Str() + " overlaps existing route " + o.Str());
            }
        }
        auto key = [](const TtlRoute& x) { return std::make_pair(x.len, x.TtlSpecific()); };
        auto pos = std::find_if(m_routes.begin(), m_routes.end(), [&](const TtlRoute& o) {
            return key(o) < key(r);
        });
        m_routes.insert(pos, r);
    }
    const TtlRoute* Lookup(uint32_t dst, uint8_t ttl) const
    {
        for (const auto& r : m_routes)
        {
            if (r.Matches(dst, ttl))
            {
                return &r;
            }
        }
        return nullptr;
    }
    const std::vector<TtlRoute>& Routes() const
    {
        return m_routes;
    }

  private:
    std::vector<TtlRoute> m_routes;
};

struct Network
{
    std::vector<std::vector<Iface>> ifaces; // per node, in link order
    std::vector<TtlTable> tables;           // per node (hosts: empty)
    std::vector<std::vector<uint32_t>> hops; // per flow: routers visited
};

Network
BuildNetwork(const Description& d)
{
    const uint32_t n = d.nodes.size();
    Network net;
    net.ifaces.resize(n);
    net.tables.resize(n);
    for (uint32_t li = 0; li < d.links.size(); li++)
    {
        const LinkDesc& l = d.links[li];
        if (l.a == l.b)
        {
            Die("link from " + d.nodes[l.a].name + " to itself");
        }
        uint32_t pa = net.ifaces[l.a].size(), pb = net.ifaces[l.b].size();
        uint32_t ipA = l.prefix + 1, ipB = l.prefix + 2;
        net.ifaces[l.a].push_back({li, ipA, l.prefixLen, l.b, pb, ipB});
        net.ifaces[l.b].push_back({li, ipB, l.prefixLen, l.a, pa, ipA});
    }
    for (uint32_t i = 0; i < n; i++)
    {
        if (!d.nodes[i].router && net.ifaces[i].size() != 1)
        {
            Die("host " + d.nodes[i].name + " must have exactly one link");
        }
    }
    auto isRouter = [&](uint32_t i) { return d.nodes[i].router; };
    auto portTo = [&](uint32_t a, uint32_t b) -> int {
        for (uint32_t p = 0; p < net.ifaces[a].size(); p++)
        {
            if (net.ifaces[a][p].peer == b)
            {
                return p;
            }
        }
        return -1;
    };
    const uint32_t NONE = std::numeric_limits<uint32_t>::max();
    // next[v][dst]: the neighbour of router v on a shortest path (in hops,
    // through routers only) towards node dst. BFS from dst visiting
    // neighbours in node-index order, so ties go to the lower index.
    std::vector<std::vector<uint32_t>> next(n, std::vector<uint32_t>(n, NONE));
    for (uint32_t dst = 0; dst < n; dst++)
    {
        std::vector<uint32_t> dist(n, NONE);
        std::deque<uint32_t> q;
        dist[dst] = 0;
        q.push_back(dst);
        while (!q.empty())
        {
            uint32_t u = q.front();
            q.pop_front();
            if (u != dst && !isRouter(u))
            {
                continue;
            }
            std::vector<uint32_t> nb;
            for (const auto& f : net.ifaces[u])
            {
                nb.push_back(f.peer);
            }
            std::sort(nb.begin(), nb.end());
            for (uint32_t v : nb)
            {
                if (dist[v] == NONE && isRouter(v))
                {
                    dist[v] = dist[u] + 1;
                    next[v][dst] = u;
                    q.push_back(v);
                }
            }
        }
    }
    // Connected subnets, and shortest-path routes to every other link subnet.
    for (uint32_t r = 0; r < n; r++)
    {
        if (!isRouter(r))
        {
            continue;
        }
        for (uint32_t li = 0; li < d.links.size(); li++)
        {
            const LinkDesc& l = d.links[li];
            int port = -1;
            bool connected = l.a == r || l.b == r;
            if (connected)
            {
                for (uint32_t p = 0; p < net.ifaces[r].size(); p++)
                {
                    if (net.ifaces[r][p].link == li)
                    {
                        port = p;
                    }
                }
            }
            else
            {
                uint32_t end = next[r][l.a] != NONE ? l.a : l.b;
                if (next[r][end] != NONE)
                {
                    port = portTo(r, next[r][end]);
                }
            }
            if (port >= 0)
            {
                TtlRoute rt{l.prefix, l.prefixLen, 0, 255, uint32_t(port), 0};
                if (!connected)
                {
                    rt.gateway = net.ifaces[r][port].peerIp;
                }
                net.tables[r].Add(rt, "router " + d.nodes[r].name);
            }
        }
    }
    // Flow paths: /32 routes to the destination host; a ring walked `loops`
    // times gets one exact-TTL route per router visit (ICC 2006 §IV-B).
    for (const auto& f : d.flows)
    {
        if (f.path.empty())
        {
            continue;
        }
        uint32_t dst = net.ifaces[f.to][0].ip;
        std::string who = "flow " + f.name;
        if (f.loops > 0)
        {
            uint32_t k = f.path.size();
            uint32_t visits = f.loops * k + 1;
            for (uint32_t j = 0; j < visits; j++)
            {
                uint32_t at = f.path[j % k];
                uint8_t ttl = f.ttl - j;
                uint32_t nh = j + 1 == visits ? f.to : f.path[(j + 1) % k];
                int p = portTo(at, nh);
                if (p < 0)
                {
                    Die(who + ": ring path is not connected");
                }
                net.tables[at].Add({dst, 32, ttl, ttl, uint32_t(p), 0}, who);
            }
        }
        else
        {
            for (uint32_t j = 0; j < f.path.size(); j++)
            {
                uint32_t at = f.path[j];
                uint32_t nh = j + 1 < f.path.size() ? f.path[j + 1] : f.to;
                int p = portTo(at, nh);
                if (p < 0)
                {
                    Die(who + ": path is not connected");
                }
                const TtlRoute* o = net.tables[at].Lookup(dst, f.ttl);
                if (!(o && o->len == 32 && o->port == uint32_t(p)))
                {
                    net.tables[at].Add({dst, 32, 0, 255, uint32_t(p), 0}, who);
                }
            }
        }
    }
    // Trace each flow through the tables, as a packet would go.
    for (const auto& f : d.flows)
    {
        uint32_t dst = net.ifaces[f.to][0].ip;
        uint32_t at = net.ifaces[f.from][0].peer;
        uint8_t ttl = f.ttl;
        std::vector<uint32_t> trace;
        for (;;)
        {
            if (ttl <= 1)
            {
                Die("flow " + f.name + ": TTL runs out at " + d.nodes[at].name);
            }
            const TtlRoute* r = net.tables[at].Lookup(dst, ttl);
            if (!r)
            {
                Die("flow " + f.name + ": " + d.nodes[at].name + " has no route to " + IpStr(dst));
            }
            trace.push_back(at);
            uint32_t peer = net.ifaces[at][r->port].peer;
            if (peer == f.to)
            {
                break;
            }
            if (!isRouter(peer))
            {
                Die("flow " + f.name + ": routed to host " + d.nodes[peer].name);
            }
            at = peer;
            ttl--;
        }
        net.hops.push_back(trace);
    }
    return net;
}

void
PrintNetwork(const Description& d, const Network& net)
{
    std::cout << "scenario " << d.name << ": " << d.nodes.size() << " nodes, " << d.links.size()
              << " links, " << d.flows.size() << " flows\n";
    for (uint32_t i = 0; i < d.nodes.size(); i++)
    {
        std::cout << "node " << d.nodes[i].name << " (" << (d.nodes[i].router ? "router" : "host")
                  << ")\n";
        for (const auto& f : net.ifaces[i])
        {
            std::cout << "  port " << IpStr(f.ip) << '/' << unsigned(f.prefixLen) << " -> "
                      << d.nodes[f.peer].name << "\n";
        }
        for (const auto& r : net.tables[i].Routes())
        {
            std::cout << "  route " << r.Str() << "\n";
        }
    }
    for (uint32_t k = 0; k < d.flows.size(); k++)
    {
        std::cout << "flow " << d.flows[k].name << ": " << net.hops[k].size() << " router hops:";
        for (uint32_t h : net.hops[k])
        {
            std::cout << ' ' << d.nodes[h].name;
        }
        std::cout << "\n";
    }
}

} // namespace

// ---------------------------------------------------------------------------
// TtlRouting: an Ipv4RoutingProtocol that routes on destination and TTL.

namespace ns3
{

class TtlRouting : public Ipv4RoutingProtocol
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QosnetTtlRouting")
                                .SetParent<Ipv4RoutingProtocol>()
                                .SetGroupName("Internet")
                                .AddConstructor<TtlRouting>();
        return tid;
    }

    // Install the node's table. `hostPort` >= 0 on hosts: everything they
    // originate leaves by that port (qosnet hosts have no route table).
    void SetTable(const TtlTable& t, int32_t hostDefaultPort, uint32_t hostGateway)
    {
        m_table = t;
        m_hostPort = hostDefaultPort;
        m_hostGateway = hostGateway;
    }

    uint64_t NoRoute() const
    {
        return m_noRoute;
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& sockerr) override
    {
        uint32_t port;
        uint32_t gw;
        if (m_hostPort >= 0)
        {
            port = m_hostPort;
            gw = m_hostGateway;
        }
        else
        {
            const TtlRoute* r = m_table.Lookup(header.GetDestination().Get(), header.GetTtl());
            if (!r)
            {
                sockerr = Socket::ERROR_NOROUTETOHOST;
                m_noRoute++;
                return nullptr;
            }
            port = r->port;
            gw = r->gateway;
        }
        sockerr = Socket::ERROR_NOTERROR;
        return MakeRoute(header.GetDestination(), port, gw);
    }

    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    UnicastForwardCallback ucb,
                    MulticastForwardCallback mcb,
                    LocalDeliverCallback lcb,
                    ErrorCallback ecb) override
    {
        int32_t iif = m_ipv4->GetInterfaceForDevice(idev);
        // For this node: up to UDP (as Ipv4StaticRouting does).
        if (m_ipv4->IsDestinationAddress(header.GetDestination(), iif))
        {
            lcb(p, header, iif);
            return true;
        }
        if (m_hostPort >= 0)
        {
            // A host does not forward (qosnet counts it as misdelivered).
            m_noRoute++;
            ecb(p, header, Socket::ERROR_NOROUTETOHOST);
            return true;
        }
        // The TTL as received: Ipv4L3Protocol::IpForward decrements it (and
        // drops the packet if it reaches 0) only after this lookup.
        const TtlRoute* r = m_table.Lookup(header.GetDestination().Get(), header.GetTtl());
        if (!r)
        {
            m_noRoute++;
            ecb(p, header, Socket::ERROR_NOROUTETOHOST);
            return true;
        }
        Ptr<Ipv4Route> rt = MakeRoute(header.GetDestination(), r->port, r->gateway);
        if (m_cpuStage)
        {
            // --cpu-stage: hand the packet to the output in a separate
            // zero-delay event, as qosnet's router CPU stage did before
            // its fifth round of speed work.
            Simulator::ScheduleNow([ucb, rt, p, header]() { ucb(rt, p, header); });
        }
        else
        {
            ucb(rt, p, header);
        }
        return true;
    }

    bool m_cpuStage = false;

    void NotifyInterfaceUp(uint32_t) override
    {
    }
    void NotifyInterfaceDown(uint32_t) override
    {
    }
    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }
    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override
    {
    }
    void SetIpv4(Ptr<Ipv4> ipv4) override
    {
        m_ipv4 = ipv4;
    }
    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit) const override
    {
        for (const auto& r : m_table.Routes())
        {
            *stream->GetStream() << "route " << r.Str() << "\n";
        }
    }

  private:
    // A fresh Ipv4Route per lookup, as ns-3's own Ipv4StaticRouting does.
    Ptr<Ipv4Route> MakeRoute(Ipv4Address dst, uint32_t port, uint32_t gateway) const
    {
        uint32_t ifIndex = port + 1; // interface 0 is loopback
        Ptr<Ipv4Route> rt = Create<Ipv4Route>();
        rt->SetDestination(dst);
        rt->SetSource(m_ipv4->GetAddress(ifIndex, 0).GetLocal());
        // Always name the next hop: on a point-to-point link it is the
        // peer. (Ipv4Interface::Send would loop a packet addressed to the
        // node's own address back locally if the gateway were "any"; a
        // RouterTester port sending to itself round a ring must not.)
        rt->SetGateway(Ipv4Address(gateway != 0 ? gateway : m_peer.at(port)));
        rt->SetOutputDevice(m_ipv4->GetNetDevice(ifIndex));
        return rt;
    }

  public:
    std::vector<uint32_t> m_peer; // per port, the peer's address

  private:
    Ptr<Ipv4> m_ipv4;
    TtlTable m_table;
    int32_t m_hostPort = -1;
    uint32_t m_hostGateway = 0;
    uint64_t m_noRoute = 0;
};

NS_OBJECT_ENSURE_REGISTERED(TtlRouting);

class TtlRoutingHelper : public Ipv4RoutingHelper
{
  public:
    TtlRoutingHelper* Copy() const override
    {
        return new TtlRoutingHelper(*this);
    }
    Ptr<Ipv4RoutingProtocol> Create(Ptr<Node>) const override
    {
        return CreateObject<TtlRouting>();
    }
};

// ---------------------------------------------------------------------------
// EthernetP2PDevice: a PointToPointNetDevice whose serialisation time is an
// Ethernet frame's wire time (see the header comment).

class EthernetP2PDevice : public PointToPointNetDevice
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QosnetEthernetP2PDevice")
                                .SetParent<PointToPointNetDevice>()
                                .SetGroupName("PointToPoint")
                                .AddConstructor<EthernetP2PDevice>();
        return tid;
    }

    void SetFraming(uint32_t fcs, uint32_t preamble, uint32_t ifg, bool ifgInFrame)
    {
        m_tail = fcs + preamble + (ifgInFrame ? ifg : 0);
    }

    bool Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber) override
    {
        // `packet` is the IP datagram. On Ethernet it would travel as
        // 14 header bytes + the datagram padded to a 60-byte frame, then
        // FCS, preceded by the preamble (and followed by the IFG, when it is
        // counted here). PointToPointNetDevice adds its own 2-byte PPP
        // header; pad the rest with zeros after the datagram.
        uint32_t ip = packet->GetSize();
        uint32_t frame = std::max<uint32_t>(14 + ip, 60);
        uint32_t wire = frame + m_tail;
        packet->AddPaddingAtEnd(wire - 2 - ip);
        return PointToPointNetDevice::Send(packet, dest, protocolNumber);
    }

  private:
    uint32_t m_tail = 4 + 8 + 12;
};

NS_OBJECT_ENSURE_REGISTERED(EthernetP2PDevice);

// ---------------------------------------------------------------------------
// The probe every measurement packet carries (24 bytes, like qosnet's).

class ProbeHeader : public Header
{
  public:
    uint32_t flow = 0;
    uint64_t seq = 0;
    uint64_t txNs = 0;

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QosnetProbeHeader")
                                .SetParent<Header>()
                                .SetGroupName("Applications")
                                .AddConstructor<ProbeHeader>();
        return tid;
    }
    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }
    uint32_t GetSerializedSize() const override
    {
        return 24;
    }
    void Serialize(Buffer::Iterator i) const override
    {
        i.WriteHtonU32(0x71057e57); // magic
        i.WriteHtonU32(flow);
        i.WriteHtonU64(seq);
        i.WriteHtonU64(txNs);
    }
    uint32_t Deserialize(Buffer::Iterator i) override
    {
        magic = i.ReadNtohU32();
        flow = i.ReadNtohU32();
        seq = i.ReadNtohU64();
        txNs = i.ReadNtohU64();
        return 24;
    }
    void Print(std::ostream& os) const override
    {
        os << "flow=" << flow << " seq=" << seq << " tx=" << txNs;
    }
    bool Valid() const
    {
        return magic == 0x71057e57;
    }

  private:
    uint32_t magic = 0;
};

NS_OBJECT_ENSURE_REGISTERED(ProbeHeader);

// ---------------------------------------------------------------------------
// TieShuffleScheduler (--tie-seed N): ns-3's schedulers run events of the
// same timestamp in the order they were scheduled (by uid), as qosnet's
// engine does with its own events. The two engines break their events down
// differently, so where two frames reach a router in the same nanosecond
// they may queue them in different orders; both orders are correct. This
// scheduler orders same-timestamp events by a seeded hash of their uid
// instead, to measure how much per-flow figures depend on tie order alone.
// Events at time 0 keep the FIFO order (node initialisation).
//
// Caveat: ns-3's DefaultSimulatorImpl::IsExpired assumes FIFO ties; nothing
// in this model asks whether an event has expired (no timers are cancelled
// or polled), so that does not matter here.

class TieShuffleScheduler : public Scheduler
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::QosnetTieShuffleScheduler")
                                .SetParent<Scheduler>()
                                .SetGroupName("Core")
                                .AddConstructor<TieShuffleScheduler>()
                                .AddAttribute("Seed",
                                              "Seed of the same-timestamp order",
                                              UintegerValue(1),
                                              MakeUintegerAccessor(&TieShuffleScheduler::m_seed),
                                              MakeUintegerChecker<uint64_t>());
        return tid;
    }

    void Insert(const Event& ev) override
    {
        m_events.emplace(KeyOf(ev.key), ev);
    }
    bool IsEmpty() const override
    {
        return m_events.empty();
    }
    Event PeekNext() const override
    {
        return m_events.begin()->second;
    }
    Event RemoveNext() override
    {
        Event ev = m_events.begin()->second;
        m_events.erase(m_events.begin());
        return ev;
    }
    void Remove(const Event& ev) override
    {
        m_events.erase(KeyOf(ev.key));
    }

  private:
    using Key = std::tuple<uint64_t, uint64_t, uint32_t>;
    Key KeyOf(const EventKey& k) const
    {
        if (k.m_ts == 0)
        {
            return Key(0, 0, k.m_uid);
        }
        // splitmix64 of (uid, seed)
        uint64_t z = k.m_uid + m_seed * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return Key(k.m_ts, z ^ (z >> 31), k.m_uid);
    }

    uint64_t m_seed = 1;
    std::map<Key, Event> m_events;
};

NS_OBJECT_ENSURE_REGISTERED(TieShuffleScheduler);

} // namespace ns3

namespace
{

// Per-flow measurement at the receiver.
struct FlowStat
{
    uint64_t sent = 0;     // sent in [warmup, duration)
    uint64_t generated = 0; // all packets sent
    uint64_t received = 0; // of those sent in the window
    uint64_t totalReceived = 0;
    uint64_t reordered = 0;
    int64_t maxSeq = -1;
    std::vector<int64_t> delays;
    uint32_t hopsMin = std::numeric_limits<uint32_t>::max(), hopsMax = 0;
};

std::vector<FlowStat> g_stats;
int64_t g_warmupNs = 0, g_durationNs = 0;

// A host's clock (of its traffic generator) against true time:
// local = true + offset + true * ppm * 1e-6, and the inverse used to
// schedule a local time, rounded up to the next nanosecond.
struct GenClock
{
    int64_t offsetNs = 0;
    double driftPpm = 0;

    int64_t Global(int64_t local) const
    {
        if (offsetNs == 0 && driftPpm == 0.0)
        {
            return local;
        }
        double x = double(local - offsetNs) / (1.0 + driftPpm * 1e-6);
        return int64_t(std::ceil(std::max(x, 0.0)));
    }
};

// A CBR source: the k-th packet at local time round(start + k * gap).
class CbrSource : public SimpleRefCount<CbrSource>
{
  public:
    CbrSource(uint32_t id, const FlowDesc& f, GenClock clock, Ptr<Socket> socket, uint32_t dstIp)
        : m_id(id),
          m_f(f),
          m_clock(clock),
          m_socket(socket),
          m_dst(InetSocketAddress(Ipv4Address(dstIp), f.dport)),
          m_gapNs(1e9 / f.pps)
    {
    }

    void Start()
    {
        if (m_f.startNs < m_f.stopNs)
        {
            Simulator::Schedule(NanoSeconds(m_clock.Global(m_f.startNs)), &CbrSource::Emit, this);
        }
    }

  private:
    void Emit()
    {
        int64_t now = Simulator::Now().GetNanoSeconds();
        ProbeHeader h;
        h.flow = m_id;
        h.seq = m_seq++;
        h.txNs = now;
        // UDP payload = IP size - 20 (IP) - 8 (UDP); the probe leads it.
        Ptr<Packet> p = Create<Packet>(m_f.size - 28 - h.GetSerializedSize());
        p->AddHeader(h);
        FlowStat& s = g_stats[m_id];
        s.generated++;
        if (now >= g_warmupNs && now < g_durationNs)
        {
            s.sent++;
        }
        m_socket->SendTo(p, 0, m_dst);
        m_k++;
        double nextLocal = std::round(double(m_f.startNs) + double(m_k) * m_gapNs);
        if (nextLocal < double(m_f.stopNs))
        {
            int64_t at = std::max(m_clock.Global(int64_t(nextLocal)), now);
            Simulator::Schedule(NanoSeconds(at - now), &CbrSource::Emit, this);
        }
    }

    uint32_t m_id;
    FlowDesc m_f;
    GenClock m_clock;
    Ptr<Socket> m_socket;
    Address m_dst;
    double m_gapNs;
    uint64_t m_k = 0;
    uint64_t m_seq = 0;
};

std::vector<uint8_t> g_flowTtl;

void
SinkReceive(Ptr<Socket> socket)
{
    Address from;
    while (Ptr<Packet> p = socket->RecvFrom(from))
    {
        ProbeHeader h;
        if (p->GetSize() < h.GetSerializedSize())
        {
            continue;
        }
        p->RemoveHeader(h);
        if (!h.Valid() || h.flow >= g_stats.size())
        {
            continue;
        }
        FlowStat& s = g_stats[h.flow];
        s.totalReceived++;
        SocketIpTtlTag ttl;
        if (p->RemovePacketTag(ttl))
        {
            uint32_t hops = g_flowTtl[h.flow] - ttl.GetTtl();
            s.hopsMin = std::min(s.hopsMin, hops);
            s.hopsMax = std::max(s.hopsMax, hops);
        }
        int64_t tx = h.txNs;
        if (tx >= g_warmupNs && tx < g_durationNs)
        {
            s.received++;
            if (int64_t(h.seq) < s.maxSeq)
            {
                s.reordered++;
            }
            else
            {
                s.maxSeq = h.seq;
            }
            s.delays.push_back(Simulator::Now().GetNanoSeconds() - tx);
        }
    }
}

std::map<std::string, uint64_t> g_drops;

// --trace FILE: one line per frame put on a link (first bit):
// "t_ns node port flow seq ttl", for finding where two runs part.
std::ofstream g_trace;
std::vector<std::string> g_nodeNames;

void
TxBegin(uint32_t node, uint32_t port, Ptr<const Packet> frame)
{
    Ptr<Packet> p = frame->Copy();
    PppHeader ppp;
    Ipv4Header ip;
    UdpHeader udp;
    ProbeHeader probe;
    p->RemoveHeader(ppp);
    p->RemoveHeader(ip);
    if (ip.GetProtocol() != 17 || p->GetSize() < 8 + 24)
    {
        return;
    }
    p->RemoveHeader(udp);
    p->RemoveHeader(probe);
    g_trace << Simulator::Now().GetNanoSeconds() << ' ' << g_nodeNames[node] << ' ' << port << ' '
            << probe.flow << ' ' << probe.seq << ' ' << unsigned(ip.GetTtl()) << '\n';
}

void
Ipv4Drop(const Ipv4Header&, Ptr<const Packet>, Ipv4L3Protocol::DropReason reason, Ptr<Ipv4>, uint32_t)
{
    static const char* names[] = {"", "ttl_expired", "no_route", "bad_checksum", "interface_down",
                                  "route_error", "fragment_timeout", "duplicate"};
    std::string n = reason < 8 ? names[reason] : "other";
    g_drops["ip_" + n]++;
}

void
QueueDrop(Ptr<const Packet>)
{
    g_drops["queue_full"]++;
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string descFile;
    bool printRoutes = false;
    bool ifgAfterFrame = false;
    std::string scheduler = "map";
    std::string traceFile;
    uint64_t tieSeed = 0;
    bool cpuStage = false;
    for (int i = 1; i < argc; i++)
    {
        std::string a = argv[i];
        if (a == "--trace" && i + 1 < argc)
        {
            traceFile = argv[++i];
        }
        else if (a == "--cpu-stage")
        {
            cpuStage = true;
        }
        else if (a == "--tie-seed" && i + 1 < argc)
        {
            tieSeed = ToInt("--tie-seed", argv[++i]);
        }
        else if (a == "--print-routes")
        {
            printRoutes = true;
        }
        else if (a == "--ifg-after-frame")
        {
            ifgAfterFrame = true;
        }
        else if (a == "--scheduler" && i + 1 < argc)
        {
            scheduler = argv[++i];
        }
        else if (a == "-h" || a == "--help")
        {
            std::cout << "usage: icc2006 DESCRIPTION [--print-routes] [--ifg-after-frame] "
                         "[--scheduler map|heap|list|calendar|priority] [--tie-seed N] "
                         "[--cpu-stage] [--trace FILE]\n";
            return 0;
        }
        else if (descFile.empty() && a[0] != '-')
        {
            descFile = a;
        }
        else
        {
            Die("unknown argument `" + a + "` (see --help)");
        }
    }
    if (descFile.empty())
    {
        Die("usage: icc2006 DESCRIPTION [--print-routes] [--ifg-after-frame] [--scheduler S]");
    }
    const Description d = ReadDescription(descFile);
    const Network net = BuildNetwork(d);
    if (printRoutes)
    {
        PrintNetwork(d, net);
        return 0;
    }

    auto wallStart = std::chrono::steady_clock::now();
    std::map<std::string, std::string> schedulers = {
        {"map", "ns3::MapScheduler"},
        {"heap", "ns3::HeapScheduler"},
        {"list", "ns3::ListScheduler"},
        {"calendar", "ns3::CalendarScheduler"},
        {"priority", "ns3::PriorityQueueScheduler"}};
    if (!schedulers.count(scheduler))
    {
        Die("unknown scheduler `" + scheduler + "`");
    }
    ObjectFactory sf;
    if (tieSeed > 0)
    {
        scheduler = "tie-shuffle";
        schedulers[scheduler] = "ns3::QosnetTieShuffleScheduler";
        sf.SetTypeId(schedulers[scheduler]);
        sf.Set("Seed", UintegerValue(tieSeed));
    }
    else
    {
        sf.SetTypeId(schedulers[scheduler]);
    }
    Simulator::SetScheduler(sf);

    const uint32_t n = d.nodes.size();
    for (const auto& nd : d.nodes)
    {
        g_nodeNames.push_back(nd.name);
    }
    if (!traceFile.empty())
    {
        g_trace.open(traceFile);
        if (!g_trace)
        {
            Die("cannot write " + traceFile);
        }
    }
    NodeContainer nodes;
    nodes.Create(n);
    InternetStackHelper stack;
    stack.SetIpv6StackInstall(false);
    stack.SetRoutingHelper(TtlRoutingHelper());
    stack.Install(nodes);

    // Devices and channels in link order, so that each node's devices (and
    // IPv4 interfaces 1, 2, ...) come in qosnet's port order.
    std::vector<std::vector<Ptr<EthernetP2PDevice>>> devs(n);
    for (const auto& l : d.links)
    {
        Ptr<PointToPointChannel> ch = CreateObject<PointToPointChannel>();
        ch->SetAttribute("Delay", TimeValue(NanoSeconds(l.delayNs)));
        for (uint32_t end : {l.a, l.b})
        {
            Ptr<EthernetP2PDevice> dev = CreateObject<EthernetP2PDevice>();
            dev->SetAddress(Mac48Address::Allocate());
            dev->SetDataRate(DataRate(l.rateBps));
            dev->SetFraming(l.fcs, l.preamble, l.ifg, !ifgAfterFrame);
            // Physical order: the IFG is idle line time after the frame.
            dev->SetInterframeGap(ifgAfterFrame ? NanoSeconds(l.ifg * 8 * 1000000000ull / l.rateBps)
                                                : Time(0));
            // The output FIFO: a router's queue_packets; a host's NIC queue
            // as large as qosnet's (10 000 packets).
            Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
            uint32_t limit = d.nodes[end].router ? d.nodes[end].queuePackets : 10000;
            q->SetAttribute("MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, limit)));
            q->TraceConnectWithoutContext("Drop", MakeCallback(&QueueDrop));
            dev->SetQueue(q);
            nodes.Get(end)->AddDevice(dev);
            dev->Attach(ch);
            if (!traceFile.empty())
            {
                dev->TraceConnectWithoutContext(
                    "PhyTxBegin",
                    MakeBoundCallback(&TxBegin, end, uint32_t(devs[end].size())));
            }
            devs[end].push_back(dev);
        }
    }
    for (uint32_t i = 0; i < n; i++)
    {
        Ptr<Ipv4> ipv4 = nodes.Get(i)->GetObject<Ipv4>();
        for (uint32_t p = 0; p < net.ifaces[i].size(); p++)
        {
            const Iface& f = net.ifaces[i][p];
            uint32_t ifIndex = ipv4->AddInterface(devs[i][p]);
            if (ifIndex != p + 1)
            {
                Die("interface numbering is not port + 1");
            }
            ipv4->AddAddress(ifIndex,
                             Ipv4InterfaceAddress(Ipv4Address(f.ip),
                                                  Ipv4Mask(f.prefixLen == 0
                                                               ? 0
                                                               : ~uint32_t(0) << (32 - f.prefixLen))));
            ipv4->SetUp(ifIndex);
        }
        Ptr<TtlRouting> rp = DynamicCast<TtlRouting>(ipv4->GetRoutingProtocol());
        for (const auto& f : net.ifaces[i])
        {
            rp->m_peer.push_back(f.peerIp);
        }
        rp->m_cpuStage = cpuStage;
        if (d.nodes[i].router)
        {
            rp->SetTable(net.tables[i], -1, 0);
        }
        else
        {
            rp->SetTable(TtlTable(), 0, net.ifaces[i][0].peerIp);
        }
        Ptr<Ipv4L3Protocol> l3 = nodes.Get(i)->GetObject<Ipv4L3Protocol>();
        l3->TraceConnectWithoutContext("Drop", MakeCallback(&Ipv4Drop));
    }

    // Applications: a receiving socket per (destination host, dport), a
    // sending socket and CBR source per flow.
    g_warmupNs = d.warmupNs;
    g_durationNs = d.durationNs;
    g_stats.resize(d.flows.size());
    std::map<std::pair<uint32_t, uint16_t>, Ptr<Socket>> sinks;
    std::vector<Ptr<CbrSource>> sources;
    TypeId udp = UdpSocketFactory::GetTypeId();
    for (uint32_t k = 0; k < d.flows.size(); k++)
    {
        const FlowDesc& f = d.flows[k];
        g_flowTtl.push_back(f.ttl);
        uint32_t dstIp = net.ifaces[f.to][0].ip;
        auto key = std::make_pair(f.to, f.dport);
        if (!sinks.count(key))
        {
            Ptr<Socket> s = Socket::CreateSocket(nodes.Get(f.to), udp);
            if (s->Bind(InetSocketAddress(Ipv4Address(dstIp), f.dport)) != 0)
            {
                Die("flow " + f.name + ": cannot bind the receiver");
            }
            s->SetIpRecvTtl(true);
            s->SetRecvCallback(MakeCallback(&SinkReceive));
            sinks[key] = s;
        }
        Ptr<Socket> tx = Socket::CreateSocket(nodes.Get(f.from), udp);
        if (tx->Bind(InetSocketAddress(Ipv4Address(net.ifaces[f.from][0].ip), f.sport)) != 0)
        {
            Die("flow " + f.name + ": cannot bind the sender");
        }
        tx->SetIpTtl(f.ttl);
        const NodeDesc& h = d.nodes[f.from];
        Ptr<CbrSource> src = Create<CbrSource>(k, f, GenClock{h.offsetNs, h.driftPpm}, tx, dstIp);
        src->Start();
        sources.push_back(src);
    }

    // Sources stop before `duration`; nothing else in this network keeps
    // timers (no ARP on point-to-point links, no routing protocol
    // messages), so the run ends by itself when the last packet has arrived,
    // as qosnet's does (which also stops at duration + drain at the
    // latest; the script checks that no packet was still in flight).
    auto runStart = std::chrono::steady_clock::now();
    Simulator::Run();
    auto runEnd = std::chrono::steady_clock::now();
    double runWall = std::chrono::duration<double>(runEnd - runStart).count();
    double setupWall = std::chrono::duration<double>(runStart - wallStart).count();
    uint64_t events = Simulator::GetEventCount();
    double simS = Simulator::Now().GetSeconds();
    uint64_t noRoute = 0;
    for (uint32_t i = 0; i < n; i++)
    {
        noRoute += DynamicCast<TtlRouting>(nodes.Get(i)->GetObject<Ipv4>()->GetRoutingProtocol())
                       ->NoRoute();
    }

    std::ostringstream o;
    o.precision(12);
    o << "{\n  \"simulator\": \"ns-3\",\n  \"ns3_version\": \"3.37\",\n";
    o << "  \"scenario\": \"" << d.name << "\",\n";
    o << "  \"duration_s\": " << d.durationNs / 1e9 << ",\n  \"warmup_s\": " << d.warmupNs / 1e9
      << ",\n";
    o << "  \"framing\": \"" << (ifgAfterFrame ? "ifg-after-frame" : "ifg-in-frame") << "\",\n";
    o << "  \"flows\": [\n";
    for (uint32_t k = 0; k < d.flows.size(); k++)
    {
        FlowStat& s = g_stats[k];
        std::sort(s.delays.begin(), s.delays.end());
        auto q = [&](double f) -> int64_t {
            if (s.delays.empty())
            {
                return 0;
            }
            // Nearest rank.
            size_t r = size_t(std::ceil(f * s.delays.size()));
            return s.delays[std::min(std::max<size_t>(r, 1), s.delays.size()) - 1];
        };
        int64_t sum = 0; // exact (the mean is sum / n, as qosnet's)
        for (int64_t x : s.delays)
        {
            sum += x;
        }
        bool any = !s.delays.empty();
        o << "    {\"name\": \"" << d.flows[k].name << "\", \"sent\": " << s.sent
          << ", \"received\": " << s.received << ", \"lost\": "
          << (s.sent > s.received ? s.sent - s.received : 0) << ", \"reordered\": " << s.reordered
          << ", \"generated\": " << s.generated << ", \"total_received\": " << s.totalReceived
          << ", \"router_hops\": " << (any ? s.hopsMin : 0) << ", \"router_hops_max\": "
          << s.hopsMax << ", \"route_hops\": " << net.hops[k].size()
          << ",\n     \"delay_ns\": {\"min\": " << (any ? s.delays.front() : 0)
          << ", \"mean\": " << std::fixed << std::setprecision(6)
          << (any ? double(sum) / s.delays.size() : 0.0) << std::defaultfloat << std::setprecision(12)
          << ", \"p50\": " << q(0.5)
          << ", \"p99\": " << q(0.99) << ", \"p999\": " << q(0.999)
          << ", \"max\": " << (any ? s.delays.back() : 0) << "}}"
          << (k + 1 < d.flows.size() ? "," : "") << "\n";
    }
    o << "  ],\n  \"drops\": {";
    g_drops["routing_no_route"] = noRoute;
    bool first = true;
    for (const auto& kv : g_drops)
    {
        o << (first ? "" : ", ") << "\"" << kv.first << "\": " << kv.second;
        first = false;
    }
    o << "},\n";
    o << "  \"engine\": {\"events\": " << events << ", \"wall_s\": " << runWall
      << ", \"setup_wall_s\": " << setupWall << ", \"sim_s\": " << simS
      << ", \"events_per_wall_s\": " << events / std::max(runWall, 1e-9)
      << ", \"sim_s_per_wall_s\": " << simS / std::max(runWall, 1e-9) << ", \"scheduler\": \""
      << schedulers[scheduler] << "\"}\n}\n";
    Simulator::Destroy();
    std::cout << o.str();
    return 0;
}
