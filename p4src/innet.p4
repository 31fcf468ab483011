/* innet data plane (v1model, BMv2 simple_switch_grpc).
 *
 * - IPv4 forwarding by longest prefix (host /32 routes from the controller), per-port packet
 *   and byte counters in ingress (offered load: egress never sees tail drops) and egress.
 * - A job's RESULT packets, sent once to its group address, replicated down its tree by the
 *   packet replication engine (ipv4_multicast).
 * - ECN: in egress an ECT packet whose enq_qdepth is at or above the threshold set in the
 *   keyless table ecn_config gets CE; ecn_marked counts those per egress port.
 * - In-network aggregation (aggregate.p4) on UDP port AGG_UDP_PORT; egress counts each
 *   chunk's first transmissions per port apart from retransmissions (agg_first, agg_repeat).
 *
 * Compile (the committed outputs must match, tests/test_p4rt_p4c.py checks):
 *   p4c-bm2-ss --std p4-16 --arch v1model -o p4src/innet.json \
 *       --p4runtime-files p4src/innet.p4info.txtpb p4src/innet.p4
 */
#include <core.p4>
#include <v1model.p4>

#include "headers.p4"
#include "parser.p4"
#include "aggregate.p4"

control InnetIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    counter(PORT_COUNTERS, CounterType.packets_and_bytes) port_in;
    Aggregate() aggregation;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action ipv4_forward(mac_t dst_mac, port_t port) {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    /* a job's results, sent once by the destination to the job's group address, copied by
     * the replication engine to every port toward the job's workers (the controller writes
     * one multicast group per job and switch, group id = job) */
    action ipv4_multicast(bit<16> group) {
        standard_metadata.mcast_grp = group;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { ipv4_forward; ipv4_multicast; drop; }
        default_action = drop();
        size = 1024;
    }

    apply {
        port_in.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            /* aggregation first: it may turn a request back toward the destination (a new
             * destination address to route), or drop the packet (then no route may give it
             * a port again) */
            if (hdr.udp.isValid() && hdr.udp.dst_port == AGG_UDP_PORT) {
                aggregation.apply(hdr, meta, standard_metadata);
            }
            if (meta.agg_dropped == 0) {
                ipv4_lpm.apply();
            }
        } else {
            drop();
        }
    }
}

control InnetEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(PORT_COUNTERS, CounterType.packets_and_bytes) port_out;
    counter(PORT_COUNTERS, CounterType.packets) ecn_marked;
    AggFirst() first_transmission;

    action set_ecn_threshold(bit<19> threshold) {
        meta.ecn_enabled = 1;
        meta.ecn_threshold = threshold;
    }

    action ecn_off() {
        meta.ecn_enabled = 0;
    }

    /* keyless: the controller sets the default action, one threshold per switch */
    table ecn_config {
        actions = { set_ecn_threshold; ecn_off; }
        default_action = ecn_off();
        size = 1;
    }

    apply {
        port_out.count((bit<32>)standard_metadata.egress_port);
        if (hdr.ipv4.isValid()) {
            ecn_config.apply();
            if (meta.ecn_enabled == 1 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)
                    && standard_metadata.enq_qdepth >= meta.ecn_threshold) {
                hdr.ipv4.ecn = 3;
                ecn_marked.count((bit<32>)standard_metadata.egress_port);
            }
        }
        first_transmission.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(InnetParser(), InnetVerifyChecksum(), InnetIngress(), InnetEgress(),
         InnetComputeChecksum(), InnetDeparser()) main;
