// SPDX-License-Identifier: GPL-2.0-only
//
// cassini-sim: CASSINI's jobs on a packet-level network, for innet's `--engine ns3`.
//
// Copyright (C) 2025 the innet authors.
//
// This program is free software; you can redistribute it and/or modify it under the terms of
// the GNU General Public License version 2 as published by the Free Software Foundation.
// It links against ns-3 (GPL-2.0); see COPYING in this folder. innet (Apache-2.0) only runs it
// as a separate process, through a JSON file in and a JSON file out.
//
// Usage: cassini-sim CONFIG.json RESULT.json
//
// The config (written by innet.cassini.sim.ns3, which documents every field) gives the
// nodes, the point-to-point links (rates already scaled, delays), each switch's next hop per
// destination host (innet.routing's, so the links the plan believes jobs share are the ones
// they share), the queue settings, and the jobs: their ring flows, shift, and the segments of
// one iteration (compute for some ms, or communicate some bytes at some rate on every flow).
// Each flow is one long-lived DCTCP connection; the sender writes its phase's bytes at the
// phase's rate (application-limited, as a collective paces its buffers); an Up segment ends
// when every flow of the job has delivered its bytes, so a congested link stretches the
// iteration. Every egress queue is RED with ECN in DCTCP's step mode (mark above K packets).
// With `transport: {cc: mltcp}` every sender runs MLTCP over that DCTCP (MltcpDctcp below).

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

using namespace ns3;
using json = nlohmann::json;

namespace
{

struct Segment
{
    bool up;
    double ms;       // Down: compute time
    uint64_t bytes;  // Up: bytes per flow
    double bps;      // Up: the phase's (scaled) rate
};

struct Job;

struct Flow
{
    Job* job = nullptr;
    Ptr<Socket> tx;
    uint64_t written = 0;  // bytes handed to TCP so far
    uint64_t target = 0;   // cumulative bytes the current phase ends at
    uint64_t received = 0;
    uint64_t iterationStart = 0;  // `received` when the job's current iteration began
    bool done = true;
    EventId tick;
    std::vector<uint64_t> samples;  // `received` every sample_ms (when asked)
};

struct Job
{
    std::string name;
    double iterationMs = 0;
    // an iteration never ends before its start + this (the profiled T when innet takes the
    // scaled packet time's bound out of the compute: alone, a job then runs at its T, not the
    // bound's slack early); 0: no floor
    double minIterationMs = 0;
    double shiftMs = 0;
    uint32_t iterations = 0;
    std::vector<Segment> segments;
    uint64_t iterationBytes = 0;  // what one iteration sends on each flow
    std::vector<std::unique_ptr<Flow>> flows;
    bool realign = false;
    double realignPct = 0, budgetPct = 0, gridMs = 0;
    int seg = -1;
    uint32_t pending = 0;
    double startMs = NAN;
    std::vector<double> times;
    uint32_t realigned = 0;
    // config version 2 (traces): the job waits for `after` and ready_ms, trains `iterations`
    // and leaves; its shift may change at later rounds (`shifts`)
    double readyMs = 0;
    std::vector<Job*> dependents;
    uint32_t waitingOn = 0;
    bool started = false;
    bool finished = false;
    double startedMs = NAN;
    double finishMs = NAN;
    std::vector<std::pair<double, double>> shifts;  // (from ms, shift ms)
    double alignedShift = NAN;
};

std::vector<std::unique_ptr<Job>> g_jobs;
int g_version = 1;
double g_epochMs = 0;
uint32_t g_mss = 1448;
bool g_stopped = false;
double g_sampleMs = 0;  // 0: no samples of the flows' delivered bytes

// The senders' congestion control: "dctcp" (every connection) or "mltcp" (MLTCP's increase
// on the senders, below).
struct Transport
{
    std::string cc = "dctcp";
    double slope = 0, intercept = 0;
};

Transport g_transport;

double
NowMs()
{
    return Simulator::Now().GetSeconds() * 1e3 - g_epochMs;
}

bool
AllMeasured()
{
    for (const auto& j : g_jobs)
    {
        if (g_version >= 2 ? !j->finished : j->times.size() < j->iterations)
        {
            return false;
        }
    }
    return true;
}

void Advance(Job* job);

void
SegmentDone(Job* job)
{
    Advance(job);
}

// The sender writes one MSS per tick at the phase's rate; what TCP cannot take yet waits.
void
Tick(Flow* f, double bps)
{
    if (f->written >= f->target)
    {
        return;
    }
    uint64_t n = std::min<uint64_t>(g_mss, f->target - f->written);
    uint32_t room = f->tx->GetTxAvailable();
    if (room >= n)
    {
        int sent = f->tx->Send(Create<Packet>(static_cast<uint32_t>(n)));
        if (sent > 0)
        {
            f->written += static_cast<uint64_t>(sent);
        }
    }
    if (f->written < f->target)
    {
        f->tick = Simulator::Schedule(Seconds(static_cast<double>(g_mss) * 8.0 / bps), &Tick, f,
                                      bps);
    }
}

void
Received(Flow* f, uint64_t bytes)
{
    f->received += bytes;
    if (!f->done && f->received >= f->target)
    {
        f->done = true;
        Job* job = f->job;
        if (--job->pending == 0)
        {
            SegmentDone(job);
        }
    }
}

// How far the flow is into its iteration: the share of the iteration's bytes delivered.
double
IterationProgress(const Flow* f)
{
    const Job* job = f->job;
    if (job->iterationBytes == 0)
    {
        return 0.0;
    }
    double done = static_cast<double>(f->received - f->iterationStart);
    return std::clamp(done / static_cast<double>(job->iterationBytes), 0.0, 1.0);
}

void
StartSegment(Job* job)
{
    if (job->seg == 0)
    {
        for (auto& f : job->flows)
        {
            f->iterationStart = f->received;
        }
    }
    const Segment& s = job->segments[job->seg];
    if (!s.up)
    {
        Simulator::Schedule(MilliSeconds(1) * s.ms, &SegmentDone, job);
        return;
    }
    job->pending = static_cast<uint32_t>(job->flows.size());
    if (job->pending == 0)  // a job on one host: nothing goes on the wire
    {
        Simulator::Schedule(MilliSeconds(1) * (static_cast<double>(s.bytes) * 8e3 / s.bps),
                            &SegmentDone, job);
        return;
    }
    for (auto& f : job->flows)
    {
        f->target += s.bytes;
        f->done = f->received >= f->target;
        if (f->done)
        {
            --job->pending;
        }
        Tick(f.get(), s.bps);
    }
    if (job->pending == 0)
    {
        Simulator::ScheduleNow(&SegmentDone, job);
    }
}

void
BeginIteration(Job* job)
{
    double t = NowMs();
    if (!std::isnan(job->startMs))
    {
        job->times.push_back(t - job->startMs);
    }
    job->startMs = t;
    if (AllMeasured())
    {
        if (!g_stopped)
        {
            g_stopped = true;
            Simulator::Stop();
        }
        return;
    }
    job->seg = 0;
    StartSegment(job);
}

// ---- version 2: traces (innet.cassini.sim.trace documents the same rules for the fluid model)

double
CurrentShift(const Job* job, double t)
{
    double s = job->shifts.empty() ? 0.0 : job->shifts.front().second;
    for (const auto& [at, shift] : job->shifts)
    {
        if (at <= t + 1e-9)
        {
            s = shift;
        }
    }
    return s;
}

// From t to the next point of shift + m grid (0 when t is on it).
double
ToGrid(double shift, double grid, double t)
{
    double wait = std::fmod(shift - t, grid);
    if (wait < 0)
    {
        wait += grid;
    }
    return (wait <= 1e-6 || grid - wait <= 1e-6) ? 0.0 : wait;
}

void
Restart(Job* job)
{
    job->startMs = NowMs();
    job->seg = 0;
    StartSegment(job);
}

void TryStart(Job* job);

void
Finish(Job* job)
{
    job->finished = true;
    job->finishMs = NowMs();
    for (Job* d : job->dependents)
    {
        if (--d->waitingOn == 0)
        {
            TryStart(d);
        }
    }
    if (AllMeasured() && !g_stopped)
    {
        g_stopped = true;
        Simulator::Stop();
    }
}

// A job may start once the jobs that held its GPUs have left and its ready time has come;
// an agent first waits for the grid of its shift.
void
TryStart(Job* job)
{
    if (job->waitingOn > 0 || job->started)
    {
        return;
    }
    double t = NowMs();
    if (t < job->readyMs - 1e-9)
    {
        Simulator::Schedule(MilliSeconds(1) * (job->readyMs - t), &TryStart, job);
        return;
    }
    job->started = true;
    job->startedMs = t;
    double wait = 0;
    if (job->realign)
    {
        job->alignedShift = CurrentShift(job, t);
        wait = ToGrid(job->alignedShift, job->gridMs, t);
    }
    Simulator::Schedule(MilliSeconds(1) * wait, &Restart, job);
}

// An iteration of a trace's job is over: leave after the last; otherwise apply a new shift
// (whatever the wait) or re-align as version 1 does.
void
EndIteration(Job* job)
{
    double t = NowMs();
    job->times.push_back(t - job->startMs);
    if (job->times.size() >= job->iterations)
    {
        Finish(job);
        return;
    }
    double wait = 0;
    if (job->realign)
    {
        double shift = CurrentShift(job, t);
        wait = ToGrid(shift, job->gridMs, t);
        if (shift != job->alignedShift)
        {
            job->alignedShift = shift;
        }
        else
        {
            double late = wait > 0 ? std::fmod(job->gridMs - wait, job->gridMs) : 0.0;
            double period = job->iterationMs;
            if (!(late > job->realignPct / 100.0 * period &&
                  wait <= job->budgetPct / 100.0 * period + 1e-9))
            {
                wait = 0;
            }
        }
    }
    if (wait > 0)
    {
        ++job->realigned;
        job->times.back() += wait;  // counted in the iteration it ends, as version 1
        Simulator::Schedule(MilliSeconds(1) * wait, &Restart, job);
        return;
    }
    Restart(job);
}

// The current segment is over: the next one, or the next iteration (CASSINI's agent first
// checks the job against the grid of its interleaving, as innet.cassini.fluid._advance does).
void
Advance(Job* job)
{
    if (job->seg >= 0 && job->seg + 1 < static_cast<int>(job->segments.size()))
    {
        ++job->seg;
        StartSegment(job);
        return;
    }
    double due = job->startMs + job->minIterationMs;
    if (job->seg >= 0 && NowMs() < due - 1e-5)  // 10 ns: below the simulator's time step
    {
        Simulator::Schedule(MilliSeconds(1) * (due - NowMs()), &Advance, job);
        return;
    }
    if (g_version >= 2)
    {
        EndIteration(job);
        return;
    }
    if (job->seg >= 0 && job->realign)
    {
        double t = NowMs();
        double late = std::fmod(t - job->shiftMs, job->gridMs);
        if (late < 0)
        {
            late += job->gridMs;
        }
        if (job->gridMs - late <= 1e-6)
        {
            late = 0;
        }
        double period = job->iterationMs;
        if (late > job->realignPct / 100.0 * period &&
            job->gridMs - late <= job->budgetPct / 100.0 * period + 1e-9)
        {
            job->seg = -1;
            ++job->realigned;
            Simulator::Schedule(MilliSeconds(1) * (job->gridMs - late), &BeginIteration, job);
            return;
        }
    }
    BeginIteration(job);
}

// Static routing with innet's host routes in a hash table. Ipv4StaticRouting keeps its routes
// in a list and scans it for every packet at every hop; with a host route per destination a
// switch of the 1,024-server fat-tree scans up to 1,024 entries a packet. A host route of
// Ipv4StaticRouting is the longest match for its destination and the first /32 found wins,
// so looking it up by address forwards every packet where the list would; anything else
// (local delivery, the connected networks, hosts' default routes) is Ipv4StaticRouting's own.
class HostRouting : public Ipv4StaticRouting
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("innet::HostRouting")
                                .SetParent<Ipv4StaticRouting>()
                                .SetGroupName("Internet")
                                .AddConstructor<HostRouting>();
        return tid;
    }

    // As AddHostRouteTo(dest, nextHop, interface): the route LookupStatic would build for it,
    // built once (a first route to a destination wins, as in the list).
    void AddHost(Ipv4Address dest, Ipv4Address nextHop, uint32_t interface)
    {
        if (m_hosts.count(dest.Get()))
        {
            return;
        }
        Ptr<Ipv4Route> route = Create<Ipv4Route>();
        route->SetDestination(dest);
        route->SetSource(m_ipv4->SourceAddressSelection(interface, dest));
        route->SetGateway(nextHop);
        route->SetOutputDevice(m_ipv4->GetNetDevice(interface));
        m_hosts.emplace(dest.Get(), route);
    }

    void SetIpv4(Ptr<Ipv4> ipv4) override
    {
        m_ipv4 = ipv4;
        Ipv4StaticRouting::SetIpv4(ipv4);
    }

    // Ipv4StaticRouting::RouteInput's order: a packet for this node is delivered, a node that
    // does not forward refuses it (both in Ipv4StaticRouting), then the route is looked up.
    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback& mcb,
                    const LocalDeliverCallback& lcb,
                    const ErrorCallback& ecb) override
    {
        auto it = m_hosts.find(header.GetDestination().Get());
        if (it != m_hosts.end())
        {
            uint32_t iif = m_ipv4->GetInterfaceForDevice(idev);
            if (!m_ipv4->IsDestinationAddress(header.GetDestination(), iif) &&
                m_ipv4->IsForwarding(iif))
            {
                ucb(it->second, p, header);
                return true;
            }
        }
        return Ipv4StaticRouting::RouteInput(p, header, idev, ucb, mcb, lcb, ecb);
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& sockerr) override
    {
        auto it = m_hosts.find(header.GetDestination().Get());
        if (it != m_hosts.end() && (!oif || oif == it->second->GetOutputDevice()))
        {
            sockerr = Socket::ERROR_NOTERROR;
            return Create<Ipv4Route>(*it->second);
        }
        return Ipv4StaticRouting::RouteOutput(p, header, oif, sockerr);
    }

  protected:
    void DoDispose() override
    {
        m_hosts.clear();
        m_ipv4 = nullptr;
        Ipv4StaticRouting::DoDispose();
    }

  private:
    Ptr<Ipv4> m_ipv4;
    std::unordered_map<uint32_t, Ptr<Ipv4Route>> m_hosts;  // destination -> its route
};

// ns-3's DCTCP, its window never cut below one segment. ns-3 cuts the slow-start threshold
// (the window after the cut) to (1 - alpha / 2) x cwnd with no floor, so an ECN echo after a
// timeout (cwnd one segment) or a run of echoes leaves it below one segment; once nothing is
// in flight the sender sends nothing (a full segment does not fit the window, and ns-3 waits
// for a larger one rather than send a small segment), no ACK comes to open it, and no timer
// runs to retransmit: the connection stalls for good, or until a phase's last bytes are few
// enough to fit. One segment is the least that keeps it sending (Linux, counting in segments,
// keeps two; two here would change runs whose window never went below one).
class FlooredDctcp : public TcpDctcp
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("innet::FlooredDctcp")
                                .SetParent<TcpDctcp>()
                                .SetGroupName("Internet")
                                .AddConstructor<FlooredDctcp>();
        return tid;
    }

    FlooredDctcp() = default;

    FlooredDctcp(const FlooredDctcp& sock)
        : TcpDctcp(sock)
    {
    }

    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override
    {
        return std::max(TcpDctcp::GetSsThresh(tcb, bytesInFlight), tcb->m_segmentSize);
    }

    Ptr<TcpCongestionOps> Fork() override
    {
        return CopyObject<FlooredDctcp>(this);
    }
};

// MLTCP (Rajasekaran et al., "MLTCP", arXiv 2402.09589): a flow's additive increase grows
// with how far its iteration is: each acknowledged segment adds F(r) = slope x r + intercept
// segments' worth of Linux Reno's credit instead of 1, r being the share of this iteration's
// bytes the flow has delivered. Of two jobs colliding on a link, the one further into its
// iteration regains its window faster after each ECN cut, takes the larger share, finishes
// its phase first, and the next iteration starts it earlier: iteration by iteration the
// phases slide apart, with no scheduler. The cut (DCTCP's, floored at one segment) and slow
// start are unchanged. r is read from the flow's delivered bytes (what its ACKs report one
// path delay later: the simulator reads it at the receiver).
class MltcpDctcp : public FlooredDctcp
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("innet::MltcpDctcp")
                                .SetParent<FlooredDctcp>()
                                .SetGroupName("Internet")
                                .AddConstructor<MltcpDctcp>();
        return tid;
    }

    MltcpDctcp() = default;

    MltcpDctcp(const MltcpDctcp& sock)
        : FlooredDctcp(sock),
          m_flow(sock.m_flow),
          m_slope(sock.m_slope),
          m_intercept(sock.m_intercept),
          m_credit(sock.m_credit)
    {
    }

    void Attach(const Flow* flow, double slope, double intercept)
    {
        m_flow = flow;
        m_slope = slope;
        m_intercept = intercept;
    }

    std::string GetName() const override
    {
        return "MltcpDctcp";
    }

    Ptr<TcpCongestionOps> Fork() override
    {
        return CopyObject<MltcpDctcp>(this);
    }

  protected:
    // TcpLinuxReno::CongestionAvoidance step for step (one segment per window of credit; a
    // credit left from a larger window adds one segment and restarts), each acknowledged
    // segment's credit weighed by F(r): with F = 1 it is DCTCP's own increase, to the packet
    void CongestionAvoidance(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override
    {
        double r = m_flow != nullptr ? IterationProgress(m_flow) : 0.0;
        double f = m_slope * r + m_intercept;
        uint32_t w = std::max<uint32_t>(1, tcb->m_cWnd / tcb->m_segmentSize);
        if (m_credit >= w)
        {
            m_credit = 0;
            tcb->m_cWnd += tcb->m_segmentSize;
        }
        m_credit += f * segmentsAcked;
        if (m_credit >= w)
        {
            auto add = static_cast<uint32_t>(m_credit / w);
            m_credit -= static_cast<double>(add) * w;
            tcb->m_cWnd += add * tcb->m_segmentSize;
        }
    }

  private:
    const Flow* m_flow = nullptr;
    double m_slope = 0;
    double m_intercept = 1;
    double m_credit = 0;
};

class HostRoutingHelper : public Ipv4RoutingHelper
{
  public:
    HostRoutingHelper* Copy() const override
    {
        return new HostRoutingHelper(*this);
    }

    Ptr<Ipv4RoutingProtocol> Create(Ptr<Node>) const override
    {
        return CreateObject<HostRouting>();
    }
};

struct Sink
{
    Flow* flow;
    Ptr<Socket> listener;
    std::vector<Ptr<Socket>> accepted;
};

std::vector<std::unique_ptr<Sink>> g_sinks;

void
SinkRecv(Sink* sink, Ptr<Socket> socket)
{
    Ptr<Packet> p;
    while ((p = socket->Recv()))
    {
        if (p->GetSize() > 0)
        {
            Received(sink->flow, p->GetSize());
        }
    }
}

void
SinkAccept(Sink* sink, Ptr<Socket> socket, const Address&)
{
    socket->SetRecvCallback(MakeBoundCallback(&SinkRecv, sink));
    sink->accepted.push_back(socket);
}

bool
SinkRequest(Ptr<Socket>, const Address&)
{
    return true;
}

void
Connect(Ptr<Socket> socket, InetSocketAddress to)
{
    socket->Connect(to);
}

Ptr<HostRouting>
RoutingOf(Ptr<Node> node)
{
    return DynamicCast<HostRouting>(node->GetObject<Ipv4>()->GetRoutingProtocol());
}

[[noreturn]] void
Fail(const std::string& what)
{
    std::cerr << "cassini-sim: " << what << std::endl;
    std::exit(2);
}

template <typename T>
T
Field(const json& obj, const char* key, const std::string& where)
{
    if (!obj.contains(key))
    {
        Fail(where + ": missing field '" + key + "'");
    }
    try
    {
        return obj.at(key).get<T>();
    }
    catch (const json::exception& e)
    {
        Fail(where + "." + key + ": " + e.what());
    }
}

// ---- the run, step by step: main() calls these in this order. The order is part of the
// behaviour: ns-3 numbers nodes, interfaces and addresses, hands out random streams and runs
// events due at the same time in the order they are created, so every step creates its
// objects in the order the config lists them, and the config is read in the order that makes
// the first bad field the one reported.

// The run-wide fields besides those the event handlers read as globals (g_version, g_mss,
// g_epochMs).
struct RunSettings
{
    uint32_t k = 0;       // RED marks above this many packets (DCTCP's K)
    uint32_t buffer = 0;  // an egress queue's size in packets
    double stopMs = 0;    // the run ends here if the jobs have not: their bound did not hold
    std::string routing;  // "static" (innet's host routes) or "ecmp" (ns-3's global routing)
};

// One direction of a link as seen from its sending node: the interface to send on, the
// neighbour's address (the next hop of a route) and the queue whose marks are reported.
struct Port
{
    uint32_t ifIndex;
    Ipv4Address far;
    Ptr<QueueDisc> qdisc;
};

// The built network, kept by the config's names because routes, flows and the output all
// refer to nodes by name.
struct Network
{
    std::map<std::string, Ptr<Node>> nodes;
    std::map<std::string, bool> isHost;
    std::map<std::pair<std::string, std::string>, Port> ports;  // (node, neighbour) -> port
    std::map<std::string, Ipv4Address> hostAddress;              // a host has one link
    std::vector<std::pair<std::string, std::string>> order;      // ports in the links' order
};

// ---- config parsing

// The config file as JSON; a file that cannot be read or parsed is one line and exit 2, which
// innet turns into its error message.
json
ReadConfig(const std::string& path)
{
    json cfg;
    std::ifstream in(path);
    if (!in)
    {
        Fail(path + ": cannot read");
    }
    try
    {
        in >> cfg;
    }
    catch (const json::exception& e)
    {
        Fail(path + ": not JSON: " + e.what());
    }
    return cfg;
}

// The fields every later step depends on, checked before anything is built.
RunSettings
ParseSettings(const json& cfg)
{
    g_version = Field<int>(cfg, "version", "config");
    if (g_version != 1 && g_version != 2)
    {
        Fail("config.version: expected 1 or 2");
    }
    RunSettings run;
    const json& queue = cfg.at("queue");
    run.k = Field<uint32_t>(queue, "k_packets", "queue");
    run.buffer = Field<uint32_t>(queue, "buffer_packets", "queue");
    g_mss = Field<uint32_t>(cfg, "mss", "config");
    g_epochMs = Field<double>(cfg, "epoch_ms", "config");
    run.stopMs = Field<double>(cfg, "stop_ms", "config");
    run.routing = Field<std::string>(cfg, "routing", "config");
    if (run.routing != "static" && run.routing != "ecmp")
    {
        Fail("config.routing: expected 'static' or 'ecmp', got '" + run.routing + "'");
    }
    if (cfg.contains("transport"))  // optional: DCTCP everywhere without it
    {
        const json& t = cfg.at("transport");
        g_transport.cc = Field<std::string>(t, "cc", "config.transport");
        if (g_transport.cc == "mltcp")
        {
            g_transport.slope = Field<double>(t, "slope", "config.transport");
            g_transport.intercept = Field<double>(t, "intercept", "config.transport");
            if (!(g_transport.slope >= 0) || !(g_transport.intercept > 0))
            {
                Fail("config.transport: mltcp needs slope >= 0 and intercept > 0");
            }
        }
        else if (g_transport.cc != "dctcp")
        {
            Fail("config.transport.cc: expected 'dctcp' or 'mltcp', got '" +
                 g_transport.cc + "'");
        }
    }
    if (cfg.contains("sample_ms"))
    {
        g_sampleMs = Field<double>(cfg, "sample_ms", "config");
        if (!(g_sampleMs > 0))
        {
            Fail("config.sample_ms must be > 0");
        }
    }
    return run;
}

// Every connection is the same DCTCP (with the one-segment floor) and the same seed gives the
// same run: set as defaults, before any socket exists, so that every object created later
// takes them.
void
SetTcpDefaults(const json& cfg)
{
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(Field<uint32_t>(cfg, "seed", "config") + 1);
    GlobalValue::Bind("ChecksumEnabled", BooleanValue(false));
    Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                       TypeIdValue(FlooredDctcp::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(g_mss));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd",
                       UintegerValue(Field<uint32_t>(cfg, "initial_cwnd", "config")));
    Config::SetDefault("ns3::TcpSocket::SndBufSize",
                       UintegerValue(Field<uint32_t>(cfg, "buffer_bytes", "config")));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize",
                       UintegerValue(Field<uint32_t>(cfg, "buffer_bytes", "config")));
    Config::SetDefault("ns3::TcpSocketBase::MinRto",
                       TimeValue(MilliSeconds(1) * Field<double>(cfg, "min_rto_ms", "config")));
    // below the minimum RTO, or a held ACK of a phase's last odd segment fires spurious
    // timeouts whose backoff stalls the connection for seconds
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout",
                       TimeValue(MilliSeconds(1) * Field<double>(cfg, "delack_timeout_ms", "config")));
}

// Every egress queue marks as DCTCP's switches do: on the instant queue (QW = 1), every packet
// above K (MinTh = MaxTh, not gentle), marking instead of dropping until the buffer is full.
void
SetQueueDefaults(const RunSettings& run)
{
    Config::SetDefault("ns3::RedQueueDisc::UseEcn", BooleanValue(true));
    Config::SetDefault("ns3::RedQueueDisc::UseHardDrop", BooleanValue(false));
    Config::SetDefault("ns3::RedQueueDisc::Gentle", BooleanValue(false));
    Config::SetDefault("ns3::RedQueueDisc::QW", DoubleValue(1.0));  // the instant queue
    Config::SetDefault("ns3::RedQueueDisc::MeanPktSize", UintegerValue(g_mss + 52));
    Config::SetDefault("ns3::RedQueueDisc::MaxSize",
                       QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, run.buffer)));
    Config::SetDefault("ns3::RedQueueDisc::MinTh", DoubleValue(run.k));
    Config::SetDefault("ns3::RedQueueDisc::MaxTh", DoubleValue(run.k));
}

// Experiments may override any attribute without a new build (`ns3_defaults`); set after the
// fixed defaults so that they win. ECMP is global routing's option, set here for the same
// reason: before the routing objects exist.
void
SetExtraDefaults(const json& cfg, const RunSettings& run)
{
    if (cfg.contains("ns3_defaults"))  // extra attributes, e.g. for experiments
    {
        for (const auto& [name, value] : cfg.at("ns3_defaults").items())
        {
            if (!Config::SetDefaultFailSafe(name, StringValue(value.get<std::string>())))
            {
                Fail("ns3_defaults: no attribute '" + name + "'");
            }
        }
    }
    if (run.routing == "ecmp")
    {
        Config::SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", BooleanValue(true));
    }
}

// ---- topology

// A node per host, then per switch, each with an IPv4 stack: HostRouting when the switches
// forward on innet's next hops, ns-3's global routing for ECMP.
void
CreateNodes(const json& cfg, const RunSettings& run, Network& net)
{
    NodeContainer all;
    for (const auto& h : Field<std::vector<std::string>>(cfg, "hosts", "config"))
    {
        net.nodes[h] = CreateObject<Node>();
        net.isHost[h] = true;
        all.Add(net.nodes[h]);
    }
    for (const auto& s : Field<std::vector<std::string>>(cfg, "switches", "config"))
    {
        if (net.nodes.count(s))
        {
            Fail("config.switches: '" + s + "' is also a host");
        }
        net.nodes[s] = CreateObject<Node>();
        net.isHost[s] = false;
        all.Add(net.nodes[s]);
    }
    InternetStackHelper stack;
    HostRoutingHelper hostHelper;
    Ipv4GlobalRoutingHelper globalHelper;
    if (run.routing == "static")
    {
        stack.SetRoutingHelper(hostHelper);
    }
    else
    {
        stack.SetRoutingHelper(globalHelper);
    }
    stack.Install(all);
}

// What installing one link made: both ends' devices, queue discs and addresses.
struct InstalledLink
{
    NetDeviceContainer devs;
    QueueDiscContainer qd;
    Ipv4InterfaceContainer ifs;
};

// A point-to-point link with a RED queue disc at both ends and the next /30. The devices'
// own queue holds one packet, so packets wait (and are marked) in RED, not behind it.
InstalledLink
InstallLink(Ptr<Node> a, Ptr<Node> b, double gbps, double delayUs,
            Ipv4AddressHelper& addresses)
{
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(gbps * 1e9)));
    p2p.SetChannelAttribute("Delay", TimeValue(MicroSeconds(1) * delayUs));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1p"));
    NetDeviceContainer devs = p2p.Install(a, b);
    TrafficControlHelper tch;
    tch.SetRootQueueDisc("ns3::RedQueueDisc", "LinkBandwidth",
                         DataRateValue(DataRate(gbps * 1e9)), "LinkDelay",
                         TimeValue(MicroSeconds(1) * delayUs));
    QueueDiscContainer qd = tch.Install(devs);
    Ipv4InterfaceContainer ifs = addresses.Assign(devs);
    addresses.NewNetwork();
    return {devs, qd, ifs};
}

// Both directions' ports of a link a-b (the first link between two nodes is the one routes
// and the output use) and the address of a host end: a host has exactly one link, the
// address its flows connect to.
void
RecordLink(const std::string& a, const std::string& b, const InstalledLink& link,
           const std::string& where, Network& net)
{
    uint32_t ia = net.nodes[a]->GetObject<Ipv4>()->GetInterfaceForDevice(link.devs.Get(0));
    uint32_t ib = net.nodes[b]->GetObject<Ipv4>()->GetInterfaceForDevice(link.devs.Get(1));
    if (!net.ports.count({a, b}))
    {
        net.ports[{a, b}] = Port{ia, link.ifs.GetAddress(1), link.qd.Get(0)};
        net.ports[{b, a}] = Port{ib, link.ifs.GetAddress(0), link.qd.Get(1)};
        net.order.emplace_back(a, b);
        net.order.emplace_back(b, a);
    }
    for (const auto& [node, addr] : {std::pair{a, link.ifs.GetAddress(0)},
                                     std::pair{b, link.ifs.GetAddress(1)}})
    {
        if (net.isHost[node])
        {
            if (net.hostAddress.count(node))
            {
                Fail(where + ": host '" + node + "' has a second link");
            }
            net.hostAddress[node] = addr;
        }
    }
}

// Every link of the config, in its order (the addresses follow it): one /30 each.
void
ConnectLinks(const json& cfg, Network& net)
{
    Ipv4AddressHelper addresses("10.0.0.0", "255.255.255.252");
    size_t li = 0;
    for (const auto& link : cfg.at("links"))
    {
        std::string where = "links[" + std::to_string(li++) + "]";
        auto a = Field<std::string>(link, "a", where);
        auto b = Field<std::string>(link, "b", where);
        double gbps = Field<double>(link, "gbps", where);
        double delayUs = Field<double>(link, "delay_us", where);
        if (!net.nodes.count(a) || !net.nodes.count(b))
        {
            Fail(where + ": unknown node '" + (net.nodes.count(a) ? b : a) + "'");
        }
        if (!(gbps > 0) || !(delayUs >= 0))
        {
            Fail(where + ": gbps must be > 0 and delay_us >= 0");
        }
        InstalledLink installed =
            InstallLink(net.nodes[a], net.nodes[b], gbps, delayUs, addresses);
        RecordLink(a, b, installed, where, net);
    }
}

// A host sends everything to the switch at the other end of its one link.
void
SetHostDefaultRoutes(Network& net)
{
    for (const auto& [host, addr] : net.hostAddress)
    {
        std::string sw;
        for (const auto& [key, port] : net.ports)
        {
            if (key.first == host)
            {
                sw = key.second;
            }
        }
        const Port& up = net.ports[{host, sw}];
        RoutingOf(net.nodes[host])->SetDefaultRoute(up.far, up.ifIndex);
    }
}

// Each switch forwards to each host on innet.routing's next hop (`next_hops`), so that the
// links the plan believes jobs share are the links their packets cross.
void
AddSwitchRoutes(const json& cfg, Network& net)
{
    for (const auto& [sw, table] : cfg.at("next_hops").items())
    {
        if (!net.nodes.count(sw) || net.isHost[sw])
        {
            Fail("next_hops: '" + sw + "' is not a switch");
        }
        Ptr<HostRouting> routes = RoutingOf(net.nodes[sw]);
        for (const auto& [dst, nb] : table.items())
        {
            auto neighbour = nb.get<std::string>();
            if (!net.hostAddress.count(dst) || !net.ports.count({sw, neighbour}))
            {
                Fail("next_hops." + sw + "." + dst + ": no such host or no link to '" +
                     neighbour + "'");
            }
            const Port& port = net.ports[{sw, neighbour}];
            routes->AddHost(net.hostAddress[dst], port.far, port.ifIndex);
        }
    }
}

// ---- jobs and their senders

// One segment of an iteration: compute for `ms`, or send `bytes` on every flow at `gbps`.
Segment
ParseSegment(const json& sc, const std::string& where)
{
    Segment s{};
    s.up = Field<bool>(sc, "up", where);
    if (s.up)
    {
        s.bytes = Field<uint64_t>(sc, "bytes", where);
        s.bps = Field<double>(sc, "gbps", where) * 1e9;
        if (!(s.bps > 0))
        {
            Fail(where + ": gbps must be > 0");
        }
    }
    else
    {
        s.ms = Field<double>(sc, "ms", where);
    }
    return s;
}

// A job's own fields (not its flows, which need the network): what it trains, when it may
// start (version 1: its shift; version 2: its ready time and shifts), and its agent.
std::unique_ptr<Job>
ParseJob(const json& jc, const std::string& where)
{
    auto job = std::make_unique<Job>();
    job->name = Field<std::string>(jc, "name", where);
    job->iterationMs = Field<double>(jc, "iteration_ms", where);
    job->iterations = Field<uint32_t>(jc, "iterations", where);
    if (!(job->iterationMs > 0) || job->iterations < 1)
    {
        Fail(where + ": iteration_ms must be > 0 and iterations >= 1");
    }
    if (jc.contains("min_iteration_ms"))
    {
        job->minIterationMs = Field<double>(jc, "min_iteration_ms", where);
        if (!(job->minIterationMs >= 0))
        {
            Fail(where + ": min_iteration_ms must be >= 0");
        }
    }
    if (g_version >= 2)
    {
        job->readyMs = Field<double>(jc, "ready_ms", where);
        for (const auto& e : jc.at("shifts"))
        {
            job->shifts.emplace_back(e.at(0).get<double>(), e.at(1).get<double>());
        }
    }
    else
    {
        job->shiftMs = Field<double>(jc, "shift_ms", where);
    }
    for (const auto& sc : jc.at("segments"))
    {
        job->segments.push_back(ParseSegment(sc, where + ".segments"));
    }
    if (job->segments.empty())
    {
        Fail(where + ".segments: empty");
    }
    for (const Segment& seg : job->segments)
    {
        job->iterationBytes += seg.up ? seg.bytes : 0;
    }
    if (jc.contains("realign") && !jc.at("realign").is_null())
    {
        const json& r = jc.at("realign");
        job->realign = true;
        job->realignPct = Field<double>(r, "pct", where + ".realign");
        job->budgetPct = Field<double>(r, "budget_pct", where + ".realign");
        job->gridMs = Field<double>(r, "grid_ms", where + ".realign");
    }
    return job;
}

// One ring hop: a sink listening on dst and a sender socket on src. The connection opens at
// time 0 and stays open for the whole run, as a collective library keeps its rings; the
// sender only writes when a phase gives it bytes (Tick).
void
OpenFlow(Job* job, const std::string& src, const std::string& dst, uint16_t port,
         Network& net)
{
    auto flow = std::make_unique<Flow>();
    flow->job = job;
    auto sink = std::make_unique<Sink>();
    sink->flow = flow.get();
    sink->listener = Socket::CreateSocket(net.nodes[dst], TcpSocketFactory::GetTypeId());
    sink->listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
    sink->listener->Listen();
    sink->listener->SetAcceptCallback(MakeCallback(&SinkRequest),
                                      MakeBoundCallback(&SinkAccept, sink.get()));
    flow->tx = Socket::CreateSocket(net.nodes[src], TcpSocketFactory::GetTypeId());
    if (g_transport.cc == "mltcp")  // the sender's side: the receiver only ACKs
    {
        auto ops = CreateObject<MltcpDctcp>();
        ops->Attach(flow.get(), g_transport.slope, g_transport.intercept);
        DynamicCast<TcpSocketBase>(flow->tx)->SetCongestionControlAlgorithm(ops);
    }
    flow->tx->Bind();
    // at time 0, once the queue discs are initialised (not before Run)
    Simulator::Schedule(Seconds(0), &Connect, flow->tx,
                        InetSocketAddress(net.hostAddress[dst], port));
    g_sinks.push_back(std::move(sink));
    job->flows.push_back(std::move(flow));
}

// Every job with its flows, in the config's order; a version-1 job starts its first
// iteration at its shift (modulo its iteration) after the connections' epoch.
void
CreateJobs(const json& cfg, Network& net)
{
    uint16_t nextPort = 10000;
    size_t ji = 0;
    for (const auto& jc : cfg.at("jobs"))
    {
        std::string where = "jobs[" + std::to_string(ji++) + "]";
        std::unique_ptr<Job> job = ParseJob(jc, where);
        for (const auto& fc : jc.at("flows"))
        {
            auto src = fc.at(0).get<std::string>();
            auto dst = fc.at(1).get<std::string>();
            if (!net.hostAddress.count(src) || !net.hostAddress.count(dst))
            {
                Fail(where + ".flows: unknown host in " + src + "->" + dst);
            }
            OpenFlow(job.get(), src, dst, nextPort++, net);
        }
        if (job->realign && !(job->gridMs > 0))
        {
            Fail(where + ".realign.grid_ms must be > 0");
        }
        if (g_version == 1)
        {
            double shift = std::fmod(job->shiftMs, job->iterationMs);
            Simulator::Schedule(MilliSeconds(1) * (g_epochMs + shift), &BeginIteration,
                                job.get());
        }
        g_jobs.push_back(std::move(job));
    }
}

// Version 2: who waits for whom (`after`: the jobs that held its GPUs), which needs every job
// to exist first; the jobs that wait for no one are offered a start at their ready time.
void
LinkTraceJobs(const json& cfg)
{
    std::map<std::string, Job*> byName;
    for (const auto& j : g_jobs)
    {
        byName[j->name] = j.get();
    }
    size_t i = 0;
    for (const auto& jc : cfg.at("jobs"))
    {
        Job* job = g_jobs[i++].get();
        for (const auto& a : jc.at("after"))
        {
            auto name = a.get<std::string>();
            if (!byName.count(name) || byName[name] == job)
            {
                Fail("jobs[" + std::to_string(i - 1) + "].after: no other job '" + name +
                     "'");
            }
            byName[name]->dependents.push_back(job);
            ++job->waitingOn;
        }
    }
    for (const auto& j : g_jobs)
    {
        if (j->waitingOn == 0)
        {
            Simulator::Schedule(MilliSeconds(1) * (g_epochMs + j->readyMs), &TryStart,
                                j.get());
        }
    }
}

// Every flow's delivered bytes, every sample_ms from the epoch on (the shares of a link
// over time, for tests and plots).
void
Sample()
{
    for (const auto& j : g_jobs)
    {
        for (const auto& f : j->flows)
        {
            f->samples.push_back(f->received);
        }
    }
    Simulator::Schedule(MilliSeconds(1) * g_sampleMs, &Sample);
}

// ---- output

// A job's measured iterations (never more than it was asked for: the last may end as the run
// stops) and the bytes its flows delivered; a trace's job also its start and finish.
json
JobReport(const Job& j)
{
    uint64_t bytes = 0;
    for (const auto& f : j.flows)
    {
        bytes += f->received;
    }
    std::vector<double> times(j.times.begin(),
                              j.times.begin() + std::min<size_t>(j.times.size(), j.iterations));
    json entry = {{"name", j.name},
                  {"iterations_ms", times},
                  {"realignments", j.realigned},
                  {"bytes", bytes}};
    if (g_version >= 2)
    {
        entry["start_ms"] = j.startedMs;
        entry["finish_ms"] = j.finishMs;
    }
    if (g_sampleMs > 0)
    {
        json flows = json::array();
        for (const auto& f : j.flows)
        {
            flows.push_back(f->samples);
        }
        entry["flow_samples"] = flows;
    }
    return entry;
}

// Every egress queue that saw traffic, with its ECN marks (RED's unforced marks above K and
// forced ones at the buffer's end) and drops: innet charges a switch queue's marks to the
// jobs crossing it. Read before Simulator::Destroy, which disposes of the queue discs.
json
QueueReports(Network& net)
{
    json queues = json::array();
    for (const auto& key : net.order)
    {
        const Port& p = net.ports[key];
        const QueueDisc::Stats& st = p.qdisc->GetStats();
        uint64_t marks = st.GetNMarkedPackets(RedQueueDisc::UNFORCED_MARK) +
                         st.GetNMarkedPackets(RedQueueDisc::FORCED_MARK);
        if (st.nTotalSentPackets == 0 && marks == 0)
        {
            continue;
        }
        queues.push_back({{"from", key.first},
                          {"to", key.second},
                          {"switch", !net.isHost[key.first]},
                          {"marks", marks},
                          {"drops", st.nTotalDroppedPackets},
                          {"packets", st.nTotalSentPackets}});
    }
    return queues;
}

// The result innet reads: whether every job got its iterations (or, in a trace, left) before
// stop_ms, when the run ended, the jobs and the queues.
json
Report(Network& net)
{
    bool complete = AllMeasured();
    double endMs = NowMs();
    json out;
    out["version"] = g_version;
    out["complete"] = complete;
    out["duration_ms"] = endMs;
    out["transport"] = g_transport.cc;
    out["jobs"] = json::array();
    for (const auto& j : g_jobs)
    {
        out["jobs"].push_back(JobReport(*j));
    }
    out["queues"] = QueueReports(net);
    return out;
}

// One line of JSON; a result that cannot be written is an error, not a silent empty file.
void
WriteResult(const std::string& path, const json& out)
{
    std::ofstream o(path);
    o << out.dump() << std::endl;
    if (!o)
    {
        Fail(path + ": cannot write");
    }
}

} // namespace

int
main(int argc, char** argv)
{
    if (argc != 3)
    {
        std::cerr << "usage: cassini-sim CONFIG.json RESULT.json" << std::endl;
        return 2;
    }
    auto wall0 = std::chrono::steady_clock::now();
    const json cfg = ReadConfig(argv[1]);
    const RunSettings run = ParseSettings(cfg);
    SetTcpDefaults(cfg);
    SetQueueDefaults(run);
    SetExtraDefaults(cfg, run);

    Network net;
    CreateNodes(cfg, run, net);
    ConnectLinks(cfg, net);
    if (run.routing == "static")
    {
        SetHostDefaultRoutes(net);
        AddSwitchRoutes(cfg, net);
    }
    else
    {
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    }

    CreateJobs(cfg, net);
    if (g_version >= 2)
    {
        LinkTraceJobs(cfg);
    }
    if (g_sampleMs > 0)
    {
        Simulator::Schedule(MilliSeconds(1) * g_epochMs, &Sample);
    }

    Simulator::Stop(MilliSeconds(1) * (g_epochMs + run.stopMs));
    Simulator::Run();
    json out = Report(net);
    out["wall_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    Simulator::Destroy();
    WriteResult(argv[2], out);
    return 0;
}
