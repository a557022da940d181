/**
 * DATA_DIR/runtimes/state.json: the supervisor rewrites it (atomically) on every state change so
 * that `cpd engine status`, another process on the same host, reads it without a token.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stateFile } from './runtime.paths';
import type { ProcessStatus } from './runtime.process';

export interface RuntimeState {
  server_pid: number;
  updated_at: string;
  processes: ProcessStatus[];
}

export function writeRuntimeState(dataDir: string, processes: ProcessStatus[]): void {
  const file = stateFile(dataDir);
  const state: RuntimeState = { server_pid: process.pid, updated_at: new Date().toISOString(), processes };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
}

/** The last written state, and whether the server that wrote it is still alive; null when none. */
export function readRuntimeState(dataDir: string): (RuntimeState & { server_running: boolean }) | null {
  const file = stateFile(dataDir);
  if (!existsSync(file)) return null;
  const state = JSON.parse(readFileSync(file, 'utf8')) as RuntimeState;
  let running = true;
  try {
    process.kill(state.server_pid, 0);
  } catch {
    running = false;
  }
  return { ...state, server_running: running };
}
