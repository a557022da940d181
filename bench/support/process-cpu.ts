/** CPU time of processes on this machine, read from /proc (the benches run beside their servers). */
import { readdirSync, readFileSync } from 'node:fs';

/** /proc/<pid>/stat counts CPU time in clock ticks of 10 ms (USER_HZ = 100 on Linux). */
export const TICK_MS = 10;

/** User + system CPU time in ms from a /proc/<pid>/stat line (every thread of the process). */
function cpuMsOf(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** CPU milliseconds used so far by process `pid`. */
export function processCpuMs(pid: number): number {
  return cpuMsOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

/** CPU milliseconds used so far by every process named postgres (the server and its backends). */
export function postgresCpuMs(): number {
  let ms = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.includes('(postgres)')) ms += cpuMsOf(stat);
    } catch {} // a backend that exited between readdir and read
  }
  return ms;
}
