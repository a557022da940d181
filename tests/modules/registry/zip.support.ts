/** What the ZIP writer's tests share: reading stored files back, collecting a stream, `unzip`. */
export const GiB = 1024 ** 3;

/** The CRC-32 of `size` zero bytes, as a sparse file of that size holds (reading the file back costs seconds more). */
export function crcOfZeros(size: number): number {
  const zeros = new Uint8Array(1 << 22);
  let crc = 0;
  for (let left = size; left > 0; left -= zeros.length) crc = Bun.hash.crc32(zeros.subarray(0, Math.min(left, zeros.length)), crc);
  return crc;
}

export function readerFor(files: Record<string, string>) {
  return (key: string, start: number, end: number) => Bun.file(files[key]!).slice(start, end).stream();
}

export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export function unzip(args: string[]) {
  const r = Bun.spawnSync(['unzip', ...args], { stdout: 'pipe', stderr: 'pipe' });
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` };
}
