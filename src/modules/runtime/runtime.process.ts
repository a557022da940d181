/**
 * One supervised child process (an engine or the external router): spawn on free loopback ports,
 * readiness through HTTP, health checks, restarts with exponential backoff and jitter, crash-loop
 * detection (failed, retried slowly) and a graceful stop (SIGTERM, SIGKILL after a deadline).
 * Children run in their own process group so a stop also reaches anything they forked.
 */
import type { Subprocess } from 'bun';
import type { RotatingLog } from './runtime.logs';
import { freeLoopbackPort } from './runtime.ports';

export type ProcessState = 'starting' | 'ready' | 'backoff' | 'failed' | 'stopped';

export interface Timings {
  /** First restart delay; doubles per consecutive quick exit, up to backoffMaxMs (then ±50% jitter). */
  backoffBaseMs: number;
  backoffMaxMs: number;
  readyTimeoutMs: number;
  /** An exit sooner than this after start counts towards a crash loop. */
  crashWindowMs: number;
  /** This many quick exits in a row: the process is marked failed. */
  crashLoopLimit: number;
  /** A failed process is retried after this long. */
  failedRetryMs: number;
  stopDeadlineMs: number;
  pollMs: number;
  healthIntervalMs: number;
}

export const DEFAULT_TIMINGS: Timings = {
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  readyTimeoutMs: 120_000,
  crashWindowMs: 10_000,
  crashLoopLimit: 5,
  failedRetryMs: 5 * 60_000,
  stopDeadlineMs: 10_000,
  pollMs: 200,
  healthIntervalMs: 5_000,
};

export interface ProcessStatus {
  name: string;
  kind: 'engine' | 'router';
  model: string;
  gpu: string | null;
  state: ProcessState;
  pid: number | null;
  port: number | null;
  restarts: number;
  last_exit: { code: number | null; signal: string | null; at: string } | null;
  last_error: string | null;
  started_at: string | null;
  ready_at: string | null;
}

export interface ProcessSpec {
  name: string;
  kind: 'engine' | 'router';
  model: string;
  gpu: string | null;
  /** How many loopback ports the command needs; the first is the data plane (readiness, port). */
  ports: number;
  command(ports: number[]): { argv: string[]; env: Record<string, string | undefined> };
  readyPath: string;
  onReady(baseUrl: string, ports: number[]): void | Promise<void>;
  onDown(): void;
  log: RotatingLog;
}

const HEALTH_FAILURES_BEFORE_RESTART = 3;
const STDERR_TAIL = 2048;
const OUTPUT_FLUSH_MS = 500;

export class SupervisedProcess {
  private state: ProcessState = 'starting';
  private proc: Subprocess | null = null;
  private port: number | null = null;
  private restarts = 0;
  private quickExits = 0;
  private lastExit: ProcessStatus['last_exit'] = null;
  private lastError: string | null = null;
  private startedAt: Date | null = null;
  private readyAt: Date | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopping = false;
  private stderrTail = '';
  /** Why the supervisor itself ended the current child (readiness timeout, failed health checks). */
  private killReason: string | null = null;
  /** Bumped on every spawn: callbacks of an older child do nothing. */
  private generation = 0;

  constructor(
    private readonly spec: ProcessSpec,
    private readonly timings: Timings,
    private readonly onChange: () => void,
  ) {}

  status(): ProcessStatus {
    return {
      name: this.spec.name,
      kind: this.spec.kind,
      model: this.spec.model,
      gpu: this.spec.gpu,
      state: this.state,
      pid: this.proc?.pid ?? null,
      port: this.port,
      restarts: this.restarts,
      last_exit: this.lastExit,
      last_error: this.lastError,
      started_at: this.startedAt?.toISOString() ?? null,
      ready_at: this.readyAt?.toISOString() ?? null,
    };
  }

  /** Marks the entry failed without a process (e.g. its bundle was refused). */
  fail(message: string): void {
    this.state = 'failed';
    this.lastError = message;
    this.onChange();
  }

  async start(): Promise<void> {
    if (this.stopping) return;
    const generation = ++this.generation;
    this.setState('starting');
    const ports = await Promise.all(Array.from({ length: this.spec.ports }, freeLoopbackPort));
    if (this.stopping || generation !== this.generation) return;
    this.port = ports[0]!;
    this.startedAt = new Date();
    this.readyAt = null;
    this.stderrTail = '';
    this.killReason = null;
    let proc: Subprocess<'ignore', 'pipe', 'pipe'>;
    let resolveOutput!: (done: Promise<unknown>) => void;
    const outputDone = new Promise<unknown>((r) => {
      resolveOutput = r;
    });
    try {
      // The binary is looked up on every start: an install between restarts is picked up.
      const { argv, env } = this.spec.command(ports);
      this.spec.log.write(`--- ${this.startedAt.toISOString()} starting: ${argv.join(' ')}\n`);
      proc = Bun.spawn(argv, {
        env,
        stdin: 'ignore',
        stdout: 'pipe',
        stderr: 'pipe',
        detached: true,
        onExit: (_p, code, signal) => {
          // Let the last stderr lines land first (bounded: a forked grandchild may hold the pipe).
          const flushed = Promise.race([outputDone, Bun.sleep(OUTPUT_FLUSH_MS)]);
          void flushed.then(() => this.exited(generation, code, signal === null ? null : String(signal)));
        },
      });
    } catch (err) {
      this.exited(generation, null, null, `cannot start: ${(err as Error).message}`);
      return;
    }
    this.proc = proc;
    this.onChange();
    resolveOutput(Promise.all([this.pipe(proc.stdout, false), this.pipe(proc.stderr, true)]));
    void this.awaitReady(generation, `http://127.0.0.1:${this.port}`, ports);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.generation++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.spec.onDown();
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      signalGroup(proc.pid, 'SIGTERM');
      const deadline = new Promise<'deadline'>((r) => {
        this.timer = setTimeout(() => r('deadline'), this.timings.stopDeadlineMs);
      });
      if ((await Promise.race([proc.exited, deadline])) === 'deadline') {
        this.spec.log.write(`--- ${new Date().toISOString()} did not stop within ${this.timings.stopDeadlineMs} ms: SIGKILL\n`);
        signalGroup(proc.pid, 'SIGKILL');
        await proc.exited;
      }
      if (this.timer) clearTimeout(this.timer);
    }
    // Whatever the leader forked dies with the group.
    if (proc) signalGroup(proc.pid, 'SIGKILL');
    this.proc = null;
    this.setState('stopped');
    this.spec.log.close();
  }

  /** Synchronous last resort for process exit paths that skip the graceful stop. */
  killNow(): void {
    if (this.proc) signalGroup(this.proc.pid, 'SIGKILL');
  }

  private setState(state: ProcessState) {
    this.state = state;
    this.onChange();
  }

  private async pipe(stream: ReadableStream<Uint8Array>, isStderr: boolean) {
    try {
      for await (const chunk of stream) {
        this.spec.log.write(chunk);
        if (isStderr) this.stderrTail = (this.stderrTail + Buffer.from(chunk).toString('utf8')).slice(-STDERR_TAIL);
      }
    } catch {
      // the pipe broke with the process: nothing more to read
    }
  }

  private async awaitReady(generation: number, baseUrl: string, ports: number[]) {
    const deadline = Date.now() + this.timings.readyTimeoutMs;
    while (generation === this.generation) {
      if (await this.probe(baseUrl)) {
        if (generation !== this.generation) return;
        this.readyAt = new Date();
        try {
          await this.spec.onReady(baseUrl, ports);
        } catch (err) {
          this.killReason = `ready, but could not be registered: ${(err as Error).message}`;
          if (this.proc) signalGroup(this.proc.pid, 'SIGKILL');
          return;
        }
        this.setState('ready');
        this.scheduleHealth(generation, baseUrl, 0);
        return;
      }
      if (Date.now() > deadline) {
        this.killReason = `not ready within ${this.timings.readyTimeoutMs} ms (GET ${this.spec.readyPath})`;
        if (this.proc) signalGroup(this.proc.pid, 'SIGKILL');
        return;
      }
      await Bun.sleep(this.timings.pollMs);
    }
  }

  private async probe(baseUrl: string): Promise<boolean> {
    try {
      const res = await fetch(`${baseUrl}${this.spec.readyPath}`, { signal: AbortSignal.timeout(Math.max(this.timings.pollMs * 5, 1000)) });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  private scheduleHealth(generation: number, baseUrl: string, failures: number) {
    this.timer = setTimeout(async () => {
      if (generation !== this.generation) return;
      const ok = await this.probe(baseUrl);
      if (generation !== this.generation) return;
      if (!ok && failures + 1 >= HEALTH_FAILURES_BEFORE_RESTART) {
        this.killReason = `health check GET ${this.spec.readyPath} failed ${HEALTH_FAILURES_BEFORE_RESTART} times`;
        if (this.proc) signalGroup(this.proc.pid, 'SIGKILL');
        return;
      }
      this.scheduleHealth(generation, baseUrl, ok ? 0 : failures + 1);
    }, this.timings.healthIntervalMs);
  }

  private exited(generation: number, code: number | null, signal: string | null, spawnError?: string) {
    if (generation !== this.generation) return;
    this.generation++; // the readiness loop and health timer of this child end here
    if (this.timer) clearTimeout(this.timer);
    const now = new Date();
    this.lastExit = { code, signal, at: now.toISOString() };
    // Whatever the crashed leader forked must not outlive it.
    if (this.proc) signalGroup(this.proc.pid, 'SIGKILL');
    this.proc = null;
    this.spec.onDown();
    const how = spawnError ?? (signal ? `killed by ${signal}` : `exited with code ${code}`);
    const said = lastLine(this.stderrTail);
    this.lastError = [this.killReason, said ? `${how}: ${said}` : how].filter(Boolean).join('; ');
    this.spec.log.write(`--- ${now.toISOString()} ${how}\n`);

    const uptime = this.startedAt ? now.getTime() - this.startedAt.getTime() : 0;
    this.quickExits = uptime < this.timings.crashWindowMs ? this.quickExits + 1 : 1;
    let delay: number;
    if (this.quickExits >= this.timings.crashLoopLimit) {
      this.state = 'failed';
      this.lastError = `crash loop: ${this.quickExits} exits within ${this.timings.crashWindowMs} ms of starting; retrying in ${this.timings.failedRetryMs} ms; last: ${this.lastError}`;
      // One more quick exit after the slow retry marks it failed again.
      this.quickExits = this.timings.crashLoopLimit - 1;
      delay = this.timings.failedRetryMs;
    } else {
      this.state = 'backoff';
      const exp = Math.min(this.timings.backoffMaxMs, this.timings.backoffBaseMs * 2 ** (this.quickExits - 1));
      delay = exp / 2 + Math.random() * (exp / 2);
    }
    this.onChange();
    this.timer = setTimeout(() => {
      this.restarts++;
      void this.start();
    }, delay);
  }
}

function lastLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ''
  );
}

/** Signals the child's whole process group (it was spawned detached, so it leads one). */
function signalGroup(pid: number, signal: NodeJS.Signals) {
  try {
    // Windows has no process groups: signal the child itself.
    process.kill(process.platform === 'win32' ? pid : -pid, signal);
  } catch {
    // the whole group is already gone
  }
}
