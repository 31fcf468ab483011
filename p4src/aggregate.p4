/* innet data plane: reliable in-network aggregation (docs/aggregation-protocol.md).
 *
 * Small controls, one concern each:
 *   AggFault   drops a controller-set share of aggregation packets (fault injection, off by
 *              default), with the v1model random extern;
 *   AggValues  the 32 sums of one cell: store a first vector, add a later one (and detect
 *              a wrapped element), or read the stored sums back;
 *   Aggregate  checks the packet, then runs a cell's life cycle: clean a cell that another
 *              job or an older chunk holds, drop stale and duplicate packets, answer a
 *              retransmission of a finished chunk with the stored sum (shadow copy), merge,
 *              emit when the expected bitmap is complete, OR the contributors' CE marks;
 *              drop a request (NACK) for a contribution the cell holds while it waits,
 *              answer one for a complete cell with the stored sum, turned back up, and
 *              narrow one to the workers the cell lacks, copied below when several are.
 *   AggResultRepair  scopes the repair of a lost RESULT to the blue switch below the loss:
 *              holds its other workers' requests for a chunk while one is on its way to
 *              the destination, and copies the answer below when any was held.
 *   AggFirst   (egress) tells a chunk's first transmission on the port from everything else:
 *              a packet is first when it carries a contributor this switch has not sent yet
 *              for that chunk; agg_first and agg_repeat count the two per egress port, so the
 *              measured cost is SOAR's phi whatever was lost or sent again.
 *
 * Every switch of a job's tree has an agg_job entry for it: `aggregate` on a blue switch,
 * `track` on a red one (forward, but check the packet and count first transmissions). Both
 * carry the expected bitmap (the workers below) and the job's cells slot_base .. slot_base +
 * slots - 1 of the pool; the packet's slot picks the cell.
 */
#ifndef INNET_AGGREGATE_P4
#define INNET_AGGREGATE_P4

control AggFault(inout headers_t hdr, out bit<1> drop) {
    bit<16> threshold = 0;

    action drop_share(bit<16> share) {
        threshold = share;  /* drop when random(0..65535) < share */
    }

    action no_fault() {
        threshold = 0;
    }

    /* keyless: the controller sets the default action, one share per switch */
    table agg_fault {
        actions = { drop_share; no_fault; }
        default_action = no_fault();
        size = 1;
    }

    apply {
        drop = 0;
        agg_fault.apply();
        if (threshold != 0) {
            bit<16> r;
            random(r, 0, 0xffff);
            if (r < threshold) {
                drop = 1;
            }
        }
    }
}

/* The 32 sums of a cell, one action per use, so that each does only its own work: BMv2
 * runs every statement of an action, and adding (read, add, overflow check, write back) is
 * most of what a blue switch spends on a packet. One register array per element, indexed by
 * the cell, so no statement computes an element's address. A first contribution is stored
 * as it came (a sum of one value cannot wrap); a later one is added into the cell, and into
 * the packet only when the packet leaves with the sums (the contribution that completes the
 * chunk: the others are held, their copy of the sums would be thrown away); a finished
 * chunk's sums are read back into the packet. An element wrapped when both operands have the
 * same sign and the sum the other one. */
#define AGG_REGISTER(i) register<bit<32>>(AGG_SLOTS) agg_v##i;
#define AGG_ADD(i) \
    agg_v##i.read(stored, meta.agg_cell); \
    acc = stored + hdr.vec.v##i; \
    wrapped = wrapped | ((stored ^ acc) & (hdr.vec.v##i ^ acc)); \
    agg_v##i.write(meta.agg_cell, acc);
#define AGG_ADD_EMIT(i) AGG_ADD(i) hdr.vec.v##i = acc;
#define AGG_STORE(i) agg_v##i.write(meta.agg_cell, hdr.vec.v##i);
#define AGG_LOAD(i) agg_v##i.read(hdr.vec.v##i, meta.agg_cell);
#define AGG_ALL(step) \
    step(0)  step(1)  step(2)  step(3)  step(4)  step(5)  step(6)  step(7) \
    step(8)  step(9)  step(10) step(11) step(12) step(13) step(14) step(15) \
    step(16) step(17) step(18) step(19) step(20) step(21) step(22) step(23) \
    step(24) step(25) step(26) step(27) step(28) step(29) step(30) step(31)

control AggValues(inout headers_t hdr, inout metadata_t meta) {
    AGG_ALL(AGG_REGISTER)

    action store_vector() {
        AGG_ALL(AGG_STORE)
        meta.agg_overflow = 0;
    }

    action add_vector() {
        bit<32> stored;
        bit<32> acc;
        bit<32> wrapped = 0;
        AGG_ALL(AGG_ADD)
        meta.agg_overflow = wrapped[31:31];
    }

    action add_vector_emit() {
        bit<32> stored;
        bit<32> acc;
        bit<32> wrapped = 0;
        AGG_ALL(AGG_ADD_EMIT)
        meta.agg_overflow = wrapped[31:31];
    }

    action load_vector() {
        AGG_ALL(AGG_LOAD)
        meta.agg_overflow = 0;
    }

    apply {
        if (meta.agg_mode == AGG_MODE_STORE) {
            store_vector();
        } else if (meta.agg_mode == AGG_MODE_ADD) {
            add_vector();
        } else if (meta.agg_mode == AGG_MODE_ADD_EMIT) {
            add_vector_emit();
        } else {
            load_vector();
        }
    }
}

/* A RESULT lost above a blue switch is lost to every worker below it, and each asks the
 * destination for it (RESULT | NACK | ASK | COPY, slot: the chunk's cell). The first request
 * passes; the others are held here, their bits kept; the answer (RESULT | COPY, unicast to
 * the first) is copied to every port below through the job's group when any was held, to
 * the first alone otherwise. A request from a worker whose bit is kept passes: it asks again,
 * so its request or the answer was lost. Per cell: the chunk asked for and who asked; a cell
 * that holds another chunk's askers is taken over by the first request for the new one. */
control AggResultRepair(inout headers_t hdr, in metadata_t meta, out bit<1> held,
                        out bit<1> spread) {
    register<bit<32>>(AGG_SLOTS) agg_ask_chunk;
    register<bit<32>>(AGG_SLOTS) agg_askers;

    apply {
        held = 0;
        spread = 0;
        bit<32> index = (bit<32>)meta.agg_slot_base + (bit<32>)hdr.agg.slot;
        bit<32> chunk;
        bit<32> askers;
        agg_ask_chunk.read(chunk, index);
        agg_askers.read(askers, index);
        if (chunk != hdr.agg.chunk) {
            askers = 0;
        }
        if ((hdr.agg.flags & AGG_FLAG_NACK) != 0) {
            if (askers != 0 && (askers & hdr.agg.bitmap) == 0) {
                held = 1;
            }
            agg_ask_chunk.write(index, hdr.agg.chunk);
            agg_askers.write(index, askers | hdr.agg.bitmap);
        } else {
            agg_askers.write(index, 0);
            if ((askers & (askers - 1)) != 0) {
                spread = 1;
            }
        }
    }
}

control Aggregate(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(AGG_SLOTS) agg_owner;   /* job | AGG_OWNED; 0: never used */
    register<bit<32>>(AGG_SLOTS) agg_chunk;
    register<bit<32>>(AGG_SLOTS) agg_bitmap;  /* contributors merged so far */
    register<bit<16>>(AGG_SLOTS) agg_count;
    register<bit<8>>(AGG_SLOTS) agg_flags;    /* AGG_FLAG_OVERFLOW | AGG_CELL_CE */
    counter(AGG_EVENTS, CounterType.packets) agg_events;
    AggFault() fault;
    AggValues() values;
    AggResultRepair() result_repair;

    action aggregate(bit<32> expected, bit<16> slot_base, bit<16> slots) {
        meta.agg_blue = 1;
        meta.agg_expected = expected;
        meta.agg_slot_base = slot_base;
        meta.agg_slots = slots;
    }

    /* red for the job: forward unchanged, but count first transmissions in egress */
    action track(bit<32> expected, bit<16> slot_base, bit<16> slots) {
        meta.agg_blue = 0;
        meta.agg_expected = expected;
        meta.agg_slot_base = slot_base;
        meta.agg_slots = slots;
    }

    table agg_job {
        key = { hdr.agg.job : exact; }
        actions = { aggregate; track; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action drop_as(bit<32> event) {
        agg_events.count(event);
        mark_to_drop(standard_metadata);
        meta.agg_dropped = 1;
    }

    /* the destination's request, answered here: back to the destination, as the aggregate
     * it lost would have gone (from the worker's address, ECN-capable, a fresh TTL) */
    action turn_back() {
        bit<32> requester = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = requester;
        hdr.ipv4.ttl = 64;
        hdr.ipv4.ecn = 2;
        hdr.agg.flags = 0;
    }

    /* the packet now carries a cell's sums: fields, CE, and no UDP checksum (0: none) */
    action send_sums(bit<32> bitmap, bit<16> count, bit<8> flags, bit<8> cell_flags) {
        hdr.agg.bitmap = bitmap;
        hdr.agg.count = count;
        hdr.agg.flags = hdr.agg.flags | flags | (cell_flags & AGG_FLAG_OVERFLOW);
        if ((cell_flags & AGG_CELL_CE) != 0) {
            hdr.ipv4.ecn = 3;
        }
        hdr.udp.checksum = 0;
    }

    apply {
        bit<1> fault_drop = 0;
        bit<1> well_formed = 0;
        if (hdr.agg.isValid() && hdr.vec.isValid() && hdr.udp.length == AGG_UDP_LEN) {
            well_formed = 1;
            fault.apply(hdr, fault_drop);
        }
        if (well_formed == 0) {
            /* cut short (the parser could not extract it all) or too long */
            drop_as(AGG_EV_MALFORMED);
        } else if (fault_drop == 1) {
            drop_as(AGG_EV_FAULT_DROP);
        } else if (!agg_job.apply().hit) {
            /* not on this job's tree (or a result of one): plain forwarding */
            if ((hdr.agg.flags & AGG_FLAG_RESULT) != 0) {
                agg_events.count(AGG_EV_RESULT);
            }
        } else if ((hdr.agg.flags & AGG_FLAG_RESULT) != 0) {
            bit<32> index = (bit<32>)meta.agg_slot_base + (bit<32>)hdr.agg.slot;
            /* 0: pass, 1: held (drop), 2: answer with the stored sum, 3: copy below */
            bit<2> answer = 0;
            bit<32> have = 0;
            bit<16> count = 0;
            bit<8> flags = 0;
            bit<32> group = AGG_GROUP_PREFIX | (bit<32>)hdr.agg.job;
            bit<1> copied = 0;  /* to the group address: a blue switch above copied it */
            if (hdr.ipv4.dst_addr == group) {
                copied = 1;
            }
            if ((hdr.agg.flags & (AGG_FLAG_NACK | AGG_FLAG_ASK)) == AGG_FLAG_NACK
                    && meta.agg_blue == 1
                    && hdr.agg.slot < meta.agg_slots && index < AGG_SLOTS
                    && hdr.agg.bitmap != 0
                    && (copied == 1 || (hdr.agg.bitmap & ~meta.agg_expected) == 0)) {
                /* the destination's request for contributions of this switch's workers,
                 * on its way to the lowest worker it names (or copied to every port below
                 * by a blue switch above). The workers asked for what the cell holds would
                 * only send duplicates: while the chunk waits on another worker, drop it
                 * (that one is asked too). When the cell is complete its aggregate was lost
                 * above: answer the request of the lowest contributor with the stored sum
                 * and drop the others; a copy (which has no worker's address to answer
                 * from) names the lowest contributor alone, whose copy the cell answers. A
                 * request naming workers the cell lacks goes on naming only those: to the
                 * worker it is addressed to when that one alone is lacking, else to the
                 * job's group address, copied to every port below by the replication
                 * engine (one request per blue switch, however many must send again) */
                bit<32> asked = hdr.agg.bitmap & meta.agg_expected;
                bit<32> lowest = asked & (~asked + 1);
                bit<32> owner;
                bit<32> chunk;
                agg_owner.read(owner, index);
                agg_chunk.read(chunk, index);
                agg_bitmap.read(have, index);
                if (owner != ((bit<32>)hdr.agg.job | AGG_OWNED) || chunk != hdr.agg.chunk) {
                    have = 0;  /* nothing of this chunk came here yet */
                }
                bit<32> lacking = asked & ~have;
                if (asked == 0) {
                    answer = 1;  /* a copy for the workers below other switches */
                } else if (lacking != 0) {
                    hdr.agg.bitmap = lacking;
                    hdr.udp.checksum = 0;  /* the payload changed: no checksum (RFC 768) */
                    if (copied == 1 || lacking != lowest) {
                        hdr.ipv4.dst_addr = group;
                        /* the group's MAC (RFC 1112: 01:00:5e + the low 23 bits), which
                         * every worker below accepts; the addressee's alone it would not */
                        hdr.ethernet.dst_addr = AGG_GROUP_MAC | (bit<48>)(group & 0x7fffff);
                        answer = 3;
                    }
                } else if (have != meta.agg_expected) {
                    answer = 1;
                } else if (copied == 1) {
                    hdr.agg.bitmap = lowest;
                    hdr.udp.checksum = 0;
                    answer = 3;
                } else if (lowest == (have & (~have + 1))) {
                    answer = 2;
                } else {
                    answer = 1;
                }
            }
            bit<8> repair = hdr.agg.flags & (AGG_FLAG_NACK | AGG_FLAG_ASK | AGG_FLAG_COPY);
            if (meta.agg_blue == 1 && hdr.agg.slot < meta.agg_slots && index < AGG_SLOTS
                    && (repair == AGG_FLAG_COPY
                        || (repair == (AGG_FLAG_NACK | AGG_FLAG_ASK | AGG_FLAG_COPY)
                            && hdr.agg.bitmap != 0
                            && (hdr.agg.bitmap & ~meta.agg_expected) == 0))) {
                /* a worker's request for a lost RESULT, or its answer (AggResultRepair) */
                bit<1> held;
                bit<1> spread;
                result_repair.apply(hdr, meta, held, spread);
                if (held == 1) {
                    answer = 1;
                } else if (spread == 1 && copied == 0) {
                    hdr.ipv4.dst_addr = group;
                    hdr.ethernet.dst_addr = AGG_GROUP_MAC | (bit<48>)(group & 0x7fffff);
                    hdr.udp.checksum = 0;  /* the pseudo-header changed: no checksum */
                    answer = 3;
                }
            }
            if (answer == 1 && repair != 0 && (repair & AGG_FLAG_ASK) != 0) {
                drop_as(AGG_EV_ASK_HELD);
            } else if (answer == 3 && repair == AGG_FLAG_COPY) {
                agg_events.count(AGG_EV_RESULT_SPREAD);
            } else if (answer == 1) {
                drop_as(AGG_EV_NACK_HELD);
            } else if (answer == 3) {
                agg_events.count(AGG_EV_NACK_SPREAD);
            } else if (answer == 2) {
                agg_count.read(count, index);
                agg_flags.read(flags, index);
                meta.agg_cell = index;
                meta.agg_tracked = 1;  /* egress counts it: a repeat of the lost aggregate */
                turn_back();
                meta.agg_mode = AGG_MODE_LOAD;
                values.apply(hdr, meta);
                send_sums(have, count, AGG_FLAG_MERGED | AGG_FLAG_RESENT, flags);
                agg_events.count(AGG_EV_RESENT);
            } else {
                agg_events.count(AGG_EV_RESULT);
            }
        } else {
            bit<32> index = (bit<32>)meta.agg_slot_base + (bit<32>)hdr.agg.slot;
            if (hdr.agg.slot >= meta.agg_slots || index >= AGG_SLOTS || hdr.agg.bitmap == 0
                    || (hdr.agg.bitmap & ~meta.agg_expected) != 0) {
                drop_as(AGG_EV_MALFORMED);
            } else if (meta.agg_blue == 0) {
                meta.agg_tracked = 1;  /* red: forwarded as it came */
                meta.agg_cell = index;
            } else {
                meta.agg_tracked = 1;
                meta.agg_cell = index;
                bit<32> owner;
                bit<32> chunk;
                bit<32> have;
                bit<16> count;
                bit<8> flags;
                agg_owner.read(owner, index);
                agg_chunk.read(chunk, index);
                agg_bitmap.read(have, index);
                agg_count.read(count, index);
                agg_flags.read(flags, index);
                bit<32> me = (bit<32>)hdr.agg.job | AGG_OWNED;
                bit<32> ahead = hdr.agg.chunk - chunk;  /* serial order: bit 31 = behind */
                meta.agg_mode = AGG_MODE_ADD;
                if (owner != me || (ahead != 0 && ahead[31:31] == 0)) {
                    /* clean before reuse: another job's cell, or a chunk every worker
                     * has finished */
                    agg_owner.write(index, me);
                    agg_chunk.write(index, hdr.agg.chunk);
                    have = 0;
                    count = 0;
                    flags = 0;
                    meta.agg_mode = AGG_MODE_STORE;
                }
                if (owner == me && ahead != 0 && ahead[31:31] == 1) {
                    drop_as(AGG_EV_STALE);
                } else if ((have & hdr.agg.bitmap) != 0) {
                    if (have == meta.agg_expected) {
                        meta.agg_mode = AGG_MODE_LOAD;  /* the stored sums, into the packet */
                        values.apply(hdr, meta);
                        send_sums(have, count, AGG_FLAG_MERGED | AGG_FLAG_RESENT, flags);
                        agg_events.count(AGG_EV_RESENT);
                    } else {
                        drop_as(AGG_EV_DUPLICATE);
                    }
                } else {
                    if (meta.agg_mode == AGG_MODE_ADD
                            && (have | hdr.agg.bitmap) == meta.agg_expected) {
                        meta.agg_mode = AGG_MODE_ADD_EMIT;  /* this one leaves with the sums */
                    }
                    values.apply(hdr, meta);
                    have = have | hdr.agg.bitmap;
                    count = count + hdr.agg.count;
                    flags = flags | (hdr.agg.flags & AGG_FLAG_OVERFLOW);
                    if (meta.agg_overflow == 1) {
                        flags = flags | AGG_FLAG_OVERFLOW;
                        agg_events.count(AGG_EV_OVERFLOW);
                    }
                    if (hdr.ipv4.ecn == 3) {
                        flags = flags | AGG_CELL_CE;
                    }
                    agg_bitmap.write(index, have);
                    agg_count.write(index, count);
                    agg_flags.write(index, flags);
                    if (have == meta.agg_expected) {
                        send_sums(have, count, AGG_FLAG_MERGED, flags);
                        agg_events.count(AGG_EV_EMITTED);
                    } else {
                        drop_as(AGG_EV_HELD);
                    }
                }
            }
        }
    }
}

/* Egress: is this packet the first transmission, on this port, of its contributors for its
 * chunk? Per cell the switch remembers the chunk and the contributors it has sent; the cell's
 * life cycle is the ingress one (a newer chunk or another job cleans it, an older chunk is a
 * late copy). Counting here, after the queue, means a packet the queue dropped was never sent:
 * its retransmission is the first transmission then. */
control AggFirst(inout headers_t hdr, in metadata_t meta,
                 in standard_metadata_t standard_metadata) {
    register<bit<32>>(AGG_SLOTS) agg_sent_owner;   /* job | AGG_OWNED; 0: never used */
    register<bit<32>>(AGG_SLOTS) agg_sent_chunk;
    register<bit<32>>(AGG_SLOTS) agg_sent_bitmap;  /* contributors sent for that chunk */
    counter(PORT_COUNTERS, CounterType.packets) agg_first;
    counter(PORT_COUNTERS, CounterType.packets) agg_repeat;

    apply {
        if (meta.agg_tracked == 1) {
            bit<32> owner;
            bit<32> chunk;
            bit<32> sent;
            agg_sent_owner.read(owner, meta.agg_cell);
            agg_sent_chunk.read(chunk, meta.agg_cell);
            agg_sent_bitmap.read(sent, meta.agg_cell);
            bit<32> me = (bit<32>)hdr.agg.job | AGG_OWNED;
            bit<32> ahead = hdr.agg.chunk - chunk;  /* serial order: bit 31 = behind */
            bit<1> late = 0;
            if (owner != me || (ahead != 0 && ahead[31:31] == 0)) {
                agg_sent_owner.write(meta.agg_cell, me);
                agg_sent_chunk.write(meta.agg_cell, hdr.agg.chunk);
                sent = 0;
            } else if (ahead != 0) {
                late = 1;
            }
            if (late == 0 && (hdr.agg.bitmap & ~sent) != 0) {
                agg_sent_bitmap.write(meta.agg_cell, sent | hdr.agg.bitmap);
                agg_first.count((bit<32>)standard_metadata.egress_port);
            } else {
                agg_repeat.count((bit<32>)standard_metadata.egress_port);
            }
        }
    }
}

#endif
