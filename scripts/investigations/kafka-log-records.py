#!/usr/bin/env python3
"""Reads a Kafka partition's log segments record by record, with who wrote each record.

A verifier says that a key's records arrived out of order; only the broker's log says which
producer wrote each one, in which batch, at which offset. Kafka's DumpLogSegments prints the
producer ids but no header values, and the harvester's tests carry the record's number in a
header (`x-seq`). This reads the record batches (format v2, uncompressed, as the tests write
them) of the segments given and prints, per record: partition directory, offset, producer id and
epoch, the producer's sequence, the key, the header asked for, and the create time.

    scripts/investigations/kafka-log-records.py DIR_OR_SEGMENT... [--key K] [--header x-seq]

Copy the partition directories first (`.state/kafka/n1/data/<topic>-<p>`): the services' data
directory goes with the next `services.sh up`.
"""

import argparse
import pathlib
import struct
import sys

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # offset .. record count: 61 bytes


def varint(buf, i):
    """A zigzag varint at i: (value, next index)."""
    shift = raw = 0
    while True:
        byte = buf[i]
        i += 1
        raw |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), i


def chunk(buf, i):
    """A varint-length byte string at i (None for length -1): (bytes, next index)."""
    n, i = varint(buf, i)
    if n < 0:
        return None, i
    return buf[i:i + n], i + n


def records(segment):
    """Yields (offset, producer id, epoch, sequence, key, headers, timestamp ms)."""
    buf = segment.read_bytes()
    at = 0
    while at + BATCH_HEADER.size <= len(buf):
        (base, length, _epoch_of_leader, magic, _crc, attributes, _last_delta, base_ts, _max_ts,
         pid, pepoch, base_seq, count) = BATCH_HEADER.unpack_from(buf, at)
        if length <= 0:
            return
        end = at + 12 + length
        if magic != 2 or attributes & 0x07:
            sys.exit(f"{segment}: batch at offset {base}: magic {magic}, attributes {attributes}:"
                     " only uncompressed v2 batches are read")
        i = at + BATCH_HEADER.size
        for _ in range(count):
            size, i = varint(buf, i)
            start = i
            i += 1  # attributes
            ts_delta, i = varint(buf, i)
            offset_delta, i = varint(buf, i)
            key, i = chunk(buf, i)
            _value, i = chunk(buf, i)
            n_headers, i = varint(buf, i)
            headers = {}
            for _ in range(n_headers):
                name, i = chunk(buf, i)
                value, i = chunk(buf, i)
                headers[name.decode()] = value
            i = start + size
            seq = base_seq + offset_delta if base_seq >= 0 else -1
            yield base + offset_delta, pid, pepoch, seq, key, headers, base_ts + ts_delta
        at = end


def segments(paths):
    for p in map(pathlib.Path, paths):
        yield from sorted(p.glob("*.log")) if p.is_dir() else [p]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="partition directories or .log segments")
    parser.add_argument("--key", help="only this key's records")
    parser.add_argument("--header", default="x-seq", help="the header to print (x-seq)")
    args = parser.parse_args()
    print("partition\toffset\tproducer\tepoch\tsequence\tkey\t" + args.header + "\tcreate_ms")
    for seg in segments(args.paths):
        for offset, pid, epoch, seq, key, headers, ts in records(seg):
            key_text = key.decode(errors="replace") if key is not None else ""
            if args.key is not None and key_text != args.key:
                continue
            value = headers.get(args.header)
            shown = value.decode(errors="replace") if value is not None else ""
            print(f"{seg.parent.name}\t{offset}\t{pid}\t{epoch}\t{seq}\t{key_text}\t{shown}\t{ts}")


if __name__ == "__main__":
    main()
