/**
 * A STORE-only ZIP64 writer that lays the archive out from precomputed sizes and CRC-32s.
 *
 * Why our own writer (measured on this project's bundles; docs/decisions/0006-zip64-writer.md):
 *  - fflate writes only 32-bit sizes and offsets: a 6 GiB archive came out corrupt ("bad zipfile
 *    offset"), so it cannot be the container writer for multi-GiB weight files.
 *  - client-zip and zip-stream write valid ZIP64 but compute CRC-32 while streaming
 *    (0.3–0.75 GB/s against 1.3–1.7 GB/s for a plain file response) and produce a byte stream
 *    with no random access, so they can serve neither Content-Length up front nor Range.
 * The registry computes every file's size and CRC-32 once, at publish time, so the whole archive
 * is a fixed sequence of segments: small header byte arrays (built here) and object byte ranges
 * (streamed from storage). Its size is known before the first byte, any byte range maps to a few
 * segment slices, and memory stays constant whatever the bundle size (see streamZip).
 * Format: APPNOTE.TXT 6.3.10 §4.3 (local header, central directory, ZIP64 end records, §4.5.3 extra field).
 */

export interface ZipEntry {
  /** Path inside the archive, forward slashes, UTF-8. */
  name: string;
  size: number;
  crc32: number;
  /** Object key of the entry's bytes in storage. */
  key: string;
}

export type ZipSegment =
  | { offset: number; length: number; bytes: Uint8Array; key?: undefined }
  | { offset: number; length: number; key: string; bytes?: undefined };

export interface ZipPlan {
  size: number;
  segments: ZipSegment[];
}

const U32_MAX = 0xffffffff;
const U16_MAX = 0xffff;
const VERSION_ZIP64 = 45;
const VERSION_DEFAULT = 20;
const MADE_BY_UNIX = 3 << 8;
const FLAG_UTF8 = 0x0800;
const REGULAR_FILE_0644 = (0o100644 << 16) >>> 0;

class Writer {
  private readonly view: DataView;
  readonly bytes: Uint8Array;
  private at = 0;
  constructor(length: number) {
    this.bytes = new Uint8Array(length);
    this.view = new DataView(this.bytes.buffer);
  }
  u16(v: number) {
    this.view.setUint16(this.at, v, true);
    this.at += 2;
  }
  u32(v: number) {
    this.view.setUint32(this.at, v >>> 0, true);
    this.at += 4;
  }
  u64(v: number) {
    this.view.setBigUint64(this.at, BigInt(v), true);
    this.at += 8;
  }
  raw(b: Uint8Array) {
    this.bytes.set(b, this.at);
    this.at += b.length;
  }
}

function dosDateTime(d: Date): { time: number; date: number } {
  const year = Math.min(Math.max(d.getUTCFullYear(), 1980), 2107);
  return {
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | (d.getUTCSeconds() >> 1),
    date: ((year - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
  };
}

function localHeader(e: ZipEntry, name: Uint8Array, dos: { time: number; date: number }): Uint8Array {
  const zip64 = e.size >= U32_MAX;
  const w = new Writer(30 + name.length + (zip64 ? 20 : 0));
  w.u32(0x04034b50);
  w.u16(zip64 ? VERSION_ZIP64 : VERSION_DEFAULT);
  w.u16(FLAG_UTF8);
  w.u16(0); // STORE
  w.u16(dos.time);
  w.u16(dos.date);
  w.u32(e.crc32);
  w.u32(zip64 ? U32_MAX : e.size); // compressed size
  w.u32(zip64 ? U32_MAX : e.size); // uncompressed size
  w.u16(name.length);
  w.u16(zip64 ? 20 : 0);
  w.raw(name);
  if (zip64) {
    // A local ZIP64 extra carries both sizes (APPNOTE 4.5.3).
    w.u16(0x0001);
    w.u16(16);
    w.u64(e.size);
    w.u64(e.size);
  }
  return w.bytes;
}

function centralHeader(e: ZipEntry, name: Uint8Array, dos: { time: number; date: number }, offset: number): Uint8Array {
  const bigSize = e.size >= U32_MAX;
  const bigOffset = offset >= U32_MAX;
  // The central ZIP64 extra holds only the fields that overflow, in this order.
  const extraLength = (bigSize ? 16 : 0) + (bigOffset ? 8 : 0);
  const zip64 = extraLength > 0;
  const w = new Writer(46 + name.length + (zip64 ? 4 + extraLength : 0));
  w.u32(0x02014b50);
  w.u16(MADE_BY_UNIX | VERSION_ZIP64);
  w.u16(zip64 ? VERSION_ZIP64 : VERSION_DEFAULT);
  w.u16(FLAG_UTF8);
  w.u16(0);
  w.u16(dos.time);
  w.u16(dos.date);
  w.u32(e.crc32);
  w.u32(bigSize ? U32_MAX : e.size);
  w.u32(bigSize ? U32_MAX : e.size);
  w.u16(name.length);
  w.u16(zip64 ? 4 + extraLength : 0);
  w.u16(0); // comment
  w.u16(0); // disk number
  w.u16(0); // internal attributes
  w.u32(REGULAR_FILE_0644);
  w.u32(bigOffset ? U32_MAX : offset);
  w.raw(name);
  if (zip64) {
    w.u16(0x0001);
    w.u16(extraLength);
    if (bigSize) {
      w.u64(e.size);
      w.u64(e.size);
    }
    if (bigOffset) w.u64(offset);
  }
  return w.bytes;
}

function endRecords(count: number, cdOffset: number, cdSize: number): Uint8Array {
  const zip64 = count >= U16_MAX || cdOffset >= U32_MAX || cdSize >= U32_MAX;
  const w = new Writer((zip64 ? 56 + 20 : 0) + 22);
  if (zip64) {
    const zip64EndOffset = cdOffset + cdSize;
    w.u32(0x06064b50); // ZIP64 end of central directory record
    w.u64(44); // size of the rest of this record
    w.u16(MADE_BY_UNIX | VERSION_ZIP64);
    w.u16(VERSION_ZIP64);
    w.u32(0);
    w.u32(0);
    w.u64(count);
    w.u64(count);
    w.u64(cdSize);
    w.u64(cdOffset);
    w.u32(0x07064b50); // ZIP64 end of central directory locator
    w.u32(0);
    w.u64(zip64EndOffset);
    w.u32(1);
  }
  w.u32(0x06054b50);
  w.u16(0);
  w.u16(0);
  w.u16(Math.min(count, U16_MAX));
  w.u16(Math.min(count, U16_MAX));
  w.u32(Math.min(cdSize, U32_MAX));
  w.u32(Math.min(cdOffset, U32_MAX));
  w.u16(0);
  return w.bytes;
}

/** Lays out the archive: every segment's offset and length, and the total size. */
export function planZip(entries: ZipEntry[], modified: Date): ZipPlan {
  const dos = dosDateTime(modified);
  const encoder = new TextEncoder();
  const segments: ZipSegment[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  const push = (s: Omit<ZipSegment, 'offset'>) => {
    if (s.length === 0) return;
    segments.push({ ...s, offset } as ZipSegment);
    offset += s.length;
  };
  for (const e of entries) {
    const name = encoder.encode(e.name);
    const headerOffset = offset;
    const header = localHeader(e, name, dos);
    push({ bytes: header, length: header.length });
    push({ key: e.key, length: e.size });
    central.push(centralHeader(e, name, dos, headerOffset));
  }
  const cdOffset = offset;
  const cdSize = central.reduce((n, b) => n + b.length, 0);
  const tail = new Uint8Array(cdSize + endRecords(entries.length, cdOffset, cdSize).length);
  let at = 0;
  for (const b of central) {
    tail.set(b, at);
    at += b.length;
  }
  tail.set(endRecords(entries.length, cdOffset, cdSize), at);
  push({ bytes: tail, length: tail.length });
  return { size: offset, segments };
}

/** Bytes [start, end) of an object as chunks; a chunk may be overwritten once the next is asked for. */
export type ReadObject = (key: string, start: number, end: number) => AsyncIterable<Uint8Array>;

/**
 * Streams bytes [start, end) of the planned archive: header slices from memory, object slices
 * from storage. A Bun direct stream: write() hands each chunk to the response sink, which sends
 * or copies it before returning, and returns a promise when the socket is backed up; the next
 * chunk is read only after that promise settles. So a download holds one read buffer and the
 * sink's buffer whatever its size, and with the fs store's reused read buffer makes no garbage.
 * (Measured: a pull stream with a fresh buffer per chunk grew RSS by 90–135 MB over 1–3 GiB,
 * garbage the collector reclaimed late.) A client that goes away aborts `signal`: reading stops.
 */
export function streamZip(plan: ZipPlan, read: ReadObject, start = 0, end = plan.size, signal?: AbortSignal): ReadableStream<Uint8Array> {
  const parts = plan.segments.filter((s) => s.offset < end && s.offset + s.length > start);
  return new ReadableStream<Uint8Array>({
    type: 'direct',
    async pull(controller) {
      for (const part of parts) {
        const from = Math.max(start, part.offset) - part.offset;
        const to = Math.min(end, part.offset + part.length) - part.offset;
        if (part.bytes) {
          await controller.write(part.bytes.subarray(from, to));
          continue;
        }
        for await (const chunk of read(part.key, from, to)) {
          if (signal?.aborted) return controller.close();
          await controller.write(chunk);
        }
      }
      controller.close();
    },
  });
}
