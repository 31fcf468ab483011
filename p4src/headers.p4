/* innet data plane: constants, headers and metadata.
 *
 * The aggregation constants are mirrored in controller/aggpacket.py (the one Python module that
 * knows the packet format); tests/test_p4rt_aggpacket.py fails when the two disagree.
 */
#ifndef INNET_HEADERS_P4
#define INNET_HEADERS_P4

#define ETHERTYPE_IPV4 0x0800
#define IPPROTO_UDP 17

/* UDP destination port of aggregation packets. */
#define AGG_UDP_PORT 50000
/* 32-bit values per packet. p4c 1.2.4.8 has no loops: aggregate.p4 unrolls this many steps. */
#define AGG_VECTOR_LEN 32
/* Cells of the slot pool (all jobs); the controller gives each job a range per switch. */
#define AGG_SLOTS 256
/* UDP length of a well-formed aggregation packet: UDP 8 + header 16 + 32 x 4 values. */
#define AGG_UDP_LEN 152
/* flags */
#define AGG_FLAG_MERGED 0x01   /* a switch emitted the sum of several contributions */
#define AGG_FLAG_RESULT 0x02   /* the destination's result to the workers: forward only */
#define AGG_FLAG_OVERFLOW 0x04 /* some element of the sum wrapped */
#define AGG_FLAG_RESENT 0x08   /* the stored sum of a finished chunk, sent again */
#define AGG_FLAG_NACK 0x10     /* with RESULT: the destination asks the workers in bitmap to
                                  send the chunk again (slot: the chunk's cell); forwarded
                                  like a RESULT unless a blue switch holds them or answers
                                  (aggregate.p4) */
#define AGG_FLAG_ECE 0x20      /* with RESULT: a contribution reached the destination CE */
#define AGG_FLAG_ASK 0x40      /* with RESULT | NACK: a worker's request for a RESULT it lost,
                                  on its way up: every switch forwards it untouched */
#define AGG_FLAG_COPY 0x80     /* with RESULT | NACK | ASK: the job's RESULTs go to its group, so
                                  the blue switch above the worker may hold the requests of
                                  its other workers and copy the answer below; with RESULT
                                  alone: that answer (slot: the chunk's cell, not how far
                                  behind; aggregate.p4 AggResultRepair) */
/* cell flag only (never on the wire): some contribution arrived with CE */
#define AGG_CELL_CE 0x80
/* what AggValues does with a cell's sums: a fresh cell takes the packet's values, a cell
   in use adds them, a finished one's sums are read back into the packet (shadow copy) */
#define AGG_MODE_STORE 0
#define AGG_MODE_ADD 1       /* into the cell only: the packet is held (dropped) */
#define AGG_MODE_ADD_EMIT 2  /* into the cell and the packet, which leaves with the sums */
#define AGG_MODE_LOAD 3
/* owner register: job | AGG_OWNED, so 0 is a cell never used */
#define AGG_OWNED 0x10000

/* Index of agg_events, the per-switch counter of what happened to aggregation packets
 * (controller/aggpacket.py EVENT_NAMES in the same order). */
#define AGG_EV_HELD 0       /* absorbed into its cell, packet dropped */
#define AGG_EV_EMITTED 1    /* last expected contribution: the sums went out */
#define AGG_EV_DUPLICATE 2  /* contributor already merged, chunk not finished: dropped */
#define AGG_EV_STALE 3      /* a chunk older than the one its cell holds: dropped */
#define AGG_EV_MALFORMED 4  /* short/long packet, slot beyond the job's, unexpected bits */
#define AGG_EV_RESENT 5     /* retransmission of a finished chunk: stored sum sent again */
#define AGG_EV_OVERFLOW 6   /* a sum wrapped (flagged in the packet) */
#define AGG_EV_FAULT_DROP 7 /* dropped by the controller-set fault injection */
#define AGG_EV_RESULT 8     /* a destination's result passed through */
#define AGG_EV_NACK_HELD 9  /* a request for a contribution the cell holds, chunk not
                               finished: dropped (another worker's request repairs it) */
#define AGG_EV_NACK_SPREAD 10 /* a request naming several workers the cell lacks: sent
                                to the job's group address, named only those */
#define AGG_EV_ASK_HELD 11   /* a worker's request for a lost RESULT held at the blue switch
                               above it: another worker's request for it is on its way */
#define AGG_EV_RESULT_SPREAD 12 /* the answer to such requests, copied to every port below
                                  through the job's group (several had asked) */
#define AGG_EVENTS 16

/* a job's group address, where its RESULTs go: 239.1.(job >> 8).(job & 255) (RFC 2365's
 * administratively scoped block; controller/innet/aggpacket.py result_group_ip) */
#define AGG_GROUP_PREFIX 0xEF010000
#define AGG_GROUP_MAC 0x01005e000000

#define PORT_COUNTERS 512

typedef bit<9> port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t {
    mac_t dst_addr;
    mac_t src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<6> dscp;
    bit<2> ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    ip4_t src_addr;
    ip4_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* 16 bytes after the UDP header (controller/aggpacket.py is the Python side). */
header agg_t {
    bit<16> job;
    bit<16> slot;     /* chunk mod the job's slots: the cell within the job's range */
    bit<32> chunk;    /* the chunk's number in its stream, compared in serial order */
    bit<32> bitmap;   /* contributors merged in this packet: worker i sets bit i */
    bit<16> count;    /* contributions merged in this packet */
    bit<8> flags;
    bit<8> reserved;
}

#define AGG_FIELD(i) bit<32> v##i;
header vec_t {
    AGG_FIELD(0)  AGG_FIELD(1)  AGG_FIELD(2)  AGG_FIELD(3)
    AGG_FIELD(4)  AGG_FIELD(5)  AGG_FIELD(6)  AGG_FIELD(7)
    AGG_FIELD(8)  AGG_FIELD(9)  AGG_FIELD(10) AGG_FIELD(11)
    AGG_FIELD(12) AGG_FIELD(13) AGG_FIELD(14) AGG_FIELD(15)
    AGG_FIELD(16) AGG_FIELD(17) AGG_FIELD(18) AGG_FIELD(19)
    AGG_FIELD(20) AGG_FIELD(21) AGG_FIELD(22) AGG_FIELD(23)
    AGG_FIELD(24) AGG_FIELD(25) AGG_FIELD(26) AGG_FIELD(27)
    AGG_FIELD(28) AGG_FIELD(29) AGG_FIELD(30) AGG_FIELD(31)
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    udp_t udp;
    agg_t agg;
    vec_t vec;
}

struct metadata_t {
    bit<32> agg_expected;   /* from the agg_job entry: bitmap of contributors to wait for */
    bit<16> agg_slot_base;  /* from the agg_job entry: first cell of the job's range */
    bit<16> agg_slots;      /* from the agg_job entry: cells in the job's range */
    bit<2> agg_mode;        /* AggValues: one of AGG_MODE_* */
    bit<1> agg_overflow;    /* set by AggValues when an element wrapped */
    bit<1> agg_blue;        /* agg_job said aggregate (1) or track (0) */
    bit<1> agg_tracked;     /* a contribution or aggregate of a job this switch tracks */
    bit<32> agg_cell;       /* its cell: its sums (agg_v0..31), what egress saw sent */
    bit<1> agg_dropped;     /* Aggregate dropped it: routing must not give it a port again */
    bit<1> ecn_enabled;
    bit<19> ecn_threshold;
}

#endif
