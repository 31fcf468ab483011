/* innet data plane: in-network aggregation.
 *
 * An agg_job entry for a job makes this switch blue for the job. Each job owns
 * AGG_SLOTS_PER_JOB consecutive register slots from the entry's slot_base; a round uses slot
 * slot_base + (round mod AGG_SLOTS_PER_JOB), so a new round can start while the previous one
 * drains. Per slot: the running sums (AGG_VECTOR_LEN cells), the bitmap of contributors merged
 * so far (0 = free), the number of contributions merged, the round it holds, and whether that
 * round finished (so a late retransmission of a finished round is not taken for a new round).
 *
 * A contribution whose bitmap overlaps what the slot holds is a duplicate and is dropped: sums
 * are never added twice. The contribution that completes the expected bitmap leaves with the
 * sums, the merged bitmap and count, and the slot is freed; the others are dropped.
 */
#ifndef INNET_AGGREGATE_P4
#define INNET_AGGREGATE_P4

/* One element: add the packet's value into the slot's cell, write the sum into the packet,
 * store it back (or zero when agg_keep is zero, which frees the cell for the next round). */
#define AGG_STEP(i) \
    agg_values.read(acc, meta.agg_index + i); \
    acc = acc + hdr.vec.v##i; \
    hdr.vec.v##i = acc; \
    agg_values.write(meta.agg_index + i, acc & meta.agg_keep);

control Aggregate(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(AGG_SLOTS * AGG_VECTOR_LEN) agg_values;
    register<bit<32>>(AGG_SLOTS) agg_bitmap;
    register<bit<16>>(AGG_SLOTS) agg_count;
    register<bit<16>>(AGG_SLOTS) agg_round;
    register<bit<8>>(AGG_SLOTS) agg_done;
    counter(AGG_EVENTS, CounterType.packets) agg_events;

    action aggregate(bit<32> expected, bit<16> slot_base) {
        meta.agg_expected = expected;
        meta.agg_slot_base = slot_base;
    }

    table agg_job {
        key = { hdr.agg.job : exact; }
        actions = { aggregate; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action add_vector() {
        bit<32> acc;
        AGG_STEP(0)  AGG_STEP(1)  AGG_STEP(2)  AGG_STEP(3)
        AGG_STEP(4)  AGG_STEP(5)  AGG_STEP(6)  AGG_STEP(7)
        AGG_STEP(8)  AGG_STEP(9)  AGG_STEP(10) AGG_STEP(11)
        AGG_STEP(12) AGG_STEP(13) AGG_STEP(14) AGG_STEP(15)
        AGG_STEP(16) AGG_STEP(17) AGG_STEP(18) AGG_STEP(19)
        AGG_STEP(20) AGG_STEP(21) AGG_STEP(22) AGG_STEP(23)
        AGG_STEP(24) AGG_STEP(25) AGG_STEP(26) AGG_STEP(27)
        AGG_STEP(28) AGG_STEP(29) AGG_STEP(30) AGG_STEP(31)
    }

    apply {
        if (agg_job.apply().hit) {
            bit<32> slot = (bit<32>)meta.agg_slot_base
                         + (bit<32>)(hdr.agg.round & (AGG_SLOTS_PER_JOB - 1));
            bit<32> have = 0;
            bit<16> held_round = 0;
            bit<8> done = 0;
            if (slot < AGG_SLOTS) {
                agg_bitmap.read(have, slot);
                agg_round.read(held_round, slot);
                agg_done.read(done, slot);
            }
            if (slot >= AGG_SLOTS || hdr.agg.bitmap == 0
                    || (hdr.agg.bitmap & ~meta.agg_expected) != 0) {
                agg_events.count(AGG_EV_FOREIGN);
                mark_to_drop(standard_metadata);
            } else if ((have & hdr.agg.bitmap) != 0
                    || (have == 0 && done == 1 && held_round == hdr.agg.round)) {
                agg_events.count(AGG_EV_DUPLICATE);
                mark_to_drop(standard_metadata);
            } else if (have != 0 && held_round != hdr.agg.round) {
                agg_events.count(AGG_EV_BUSY);
                mark_to_drop(standard_metadata);
            } else {
                bit<32> merged = have | hdr.agg.bitmap;
                bit<16> count;
                agg_count.read(count, slot);
                count = count + hdr.agg.count;
                meta.agg_index = slot * AGG_VECTOR_LEN;
                agg_round.write(slot, hdr.agg.round);
                if (merged == meta.agg_expected) {
                    meta.agg_keep = 0;
                } else {
                    meta.agg_keep = 0xffffffff;
                }
                add_vector();
                if (merged == meta.agg_expected) {
                    agg_bitmap.write(slot, 0);
                    agg_count.write(slot, 0);
                    agg_done.write(slot, 1);
                    hdr.agg.bitmap = merged;
                    hdr.agg.count = count;
                    hdr.agg.flags = hdr.agg.flags | AGG_FLAG_MERGED;
                    /* the payload changed; 0 means "no checksum" for UDP over IPv4 */
                    hdr.udp.checksum = 0;
                    agg_events.count(AGG_EV_EMITTED);
                } else {
                    agg_bitmap.write(slot, merged);
                    agg_count.write(slot, count);
                    agg_done.write(slot, 0);
                    agg_events.count(AGG_EV_HELD);
                    mark_to_drop(standard_metadata);
                }
            }
        }
    }
}

#endif
