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
/* Register slots per job (slot = round mod AGG_SLOTS_PER_JOB) and in all (AGG_SLOTS / 4 jobs). */
#define AGG_SLOTS_PER_JOB 4
#define AGG_SLOTS 64
/* flags: set by the switch on the packet that carries a merged result. */
#define AGG_FLAG_MERGED 0x01

/* Index of agg_events, the per-switch counter of what happened to aggregation packets. */
#define AGG_EV_HELD 0      /* absorbed into the slot, packet dropped */
#define AGG_EV_EMITTED 1   /* last expected contribution: the sums went out */
#define AGG_EV_DUPLICATE 2 /* contributor already merged (or its round already finished) */
#define AGG_EV_BUSY 3      /* the slot holds another round of the job */
#define AGG_EV_FOREIGN 4   /* contributor not expected at this switch, or empty bitmap */
#define AGG_EVENTS 8

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

/* 12 bytes after the UDP header. */
header agg_t {
    bit<16> job;
    bit<16> round;
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
    bit<16> agg_slot_base;  /* from the agg_job entry: first register slot of the job */
    bit<32> agg_index;      /* first register cell of the slot in use */
    bit<32> agg_keep;       /* all ones: keep the sums in the registers; zero: free the slot */
    bit<1> ecn_enabled;
    bit<19> ecn_threshold;
}

#endif
