//! The consumer group generation a member was assigned in, which librdkafka knows but
//! rust-rdkafka does not expose: heartbeats carry it so two holders of partition 0 (a broker
//! that gets group coordination wrong) can tell which assignment is the newer one.

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

/// The consumer's current group generation (classic protocol), or -1 outside a group.
#[allow(unsafe_code)]
pub(crate) fn of<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> i32 {
    // SAFETY: `native_ptr` is the live `rd_kafka_t` that `consumer` owns for the duration of this
    // call. `rd_kafka_consumer_group_metadata` returns a new object (or NULL outside a group)
    // that this function owns: it reads one field of it and destroys it before returning, and
    // nothing else holds it.
    unsafe {
        let metadata =
            rdkafka_sys::rd_kafka_consumer_group_metadata(consumer.client().native_ptr());
        if metadata.is_null() {
            return -1;
        }
        let generation = rdkafka_sys::rd_kafka_consumer_group_metadata_generation_id(metadata);
        rdkafka_sys::rd_kafka_consumer_group_metadata_destroy(metadata);
        generation
    }
}
