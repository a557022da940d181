/**
 * A PostgreSQL cluster of the test's own, to stop, crash and restart under load without touching
 * the machine's server on 5432 (every other test file uses that one):
 *
 *   const pg = await startPrivatePostgres();       // initdb in a temp dir, started on a free port
 *   const url = await pg.createDatabase('cpd');     // postgres://postgres@127.0.0.1:PORT/cpd
 *   await pg.stop('fast');  await pg.start();       // a clean shutdown, then up again
 *   await pg.restart('immediate');                  // a crash (SIGQUIT to every backend), then crash recovery
 *   await pg.close();                               // stops it and removes the directory
 *   await startPrivatePostgres({ password: 'pw' })  // TCP connections authenticate with SCRAM-SHA-256
 *   await startPrivatePostgres({ password: 'pw', auth: 'md5' })  // or with MD5 (the password stored as MD5)
 *   const standby = await pg.startStandby();        // a hot standby streaming from it (writes: 25006)
 *
 * It runs the Debian server binaries (/usr/lib/postgresql/<major>/bin, or PG_BIN). initdb and the
 * server refuse to run as root: as root they run as the `postgres` OS user (runuser), otherwise as
 * the current user. Trust authentication on 127.0.0.1 only (SCRAM-SHA-256 with a password, as
 * managed PostgreSQL services require), the Unix socket in the temp dir.
 * fsync is off (a test cluster need not survive a power cut); synchronous_commit stays on, so a
 * commit acknowledged to a client survives a crash of the server, as in production.
 */
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from './ports';
import { waitFor } from './wait';

export type ShutdownMode = 'smart' | 'fast' | 'immediate';

export interface PrivatePostgres {
  port: number;
  /** postgres://postgres[:password]@127.0.0.1:PORT */
  url: string;
  createDatabase(name: string): Promise<string>;
  stop(mode: ShutdownMode): Promise<void>;
  start(): Promise<void>;
  restart(mode: ShutdownMode): Promise<void>;
  /** The server's log so far (crash recovery, terminated connections). */
  log(): Promise<string>;
  /**
   * A hot standby streaming from this cluster (pg_basebackup), on a port of its own: it serves
   * reads and refuses every write with 25006, as a former primary does after a failover.
   */
  startStandby(): Promise<Standby>;
  close(): Promise<void>;
}

export interface Standby {
  port: number;
  /** Resolves once the standby has replayed everything the primary has written so far. */
  caughtUp(): Promise<void>;
  close(): Promise<void>;
}

function binDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((d) => existsSync(join(root, d, 'bin/pg_ctl'))) : [];
  const newest = majors.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no PostgreSQL server binaries under ${root} (set PG_BIN)`);
  return join(root, newest, 'bin');
}

export async function startPrivatePostgres(opts: { password?: string; auth?: 'scram-sha-256' | 'md5' } = {}): Promise<PrivatePostgres> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'cpd-private-pg-'));
  if (asRoot) {
    const id = async (flag: string) => Number((await run(['id', flag, 'postgres'], false)).trim());
    chownSync(dir, await id('-u'), await id('-g'));
  }
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');

  async function run(cmd: string[], asServerUser = true): Promise<string> {
    const argv = asServerUser && asRoot ? ['runuser', '-u', 'postgres', '--', ...cmd] : cmd;
    const proc = Bun.spawn(argv, {
      cwd: dir,
      stdout: 'pipe',
      stderr: 'pipe',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' },
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`${argv.join(' ')} failed (${code}):\n${out}${err}`);
    return out;
  }

  const auth = ['--auth=trust'];
  if (opts.password !== undefined) {
    const pwfile = join(dir, 'pwfile');
    await Bun.write(pwfile, opts.password);
    if (asRoot) await run(['chown', 'postgres', pwfile], false);
    auth.push(`--auth-host=${opts.auth ?? 'scram-sha-256'}`, `--pwfile=${pwfile}`);
  }
  await run([join(bin, 'initdb'), '-D', data, '-U', 'postgres', ...auth, '-E', 'UTF8', '--no-sync', '--no-instructions']);
  let port = 0;
  const options = (on = port) => `-p ${on} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`;
  const pgCtlOf = (dataDir: string, log: string) => (...args: string[]) => run([join(bin, 'pg_ctl'), '-D', dataDir, '-l', log, '-w', '-t', '60', ...args]);
  const pgCtl = pgCtlOf(data, logFile);

  // A free port can be taken between the probe and the server's bind: try a few.
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    try {
      await pgCtl('-o', options(), 'start');
      break;
    } catch (err) {
      if (attempt >= 4) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const url = `postgres://postgres${opts.password === undefined ? '' : `:${encodeURIComponent(opts.password)}`}@127.0.0.1:${port}`;
  let running = true;
  if (opts.auth === 'md5' && opts.password !== undefined) {
    // initdb stored the password as SCRAM, which the md5 method also accepts: store it as MD5, so
    // logins from now on use MD5.
    const admin = postgres(`${url}/postgres`, { max: 1, onnotice: () => {} });
    await admin.unsafe(`set password_encryption = 'md5'`);
    await admin.unsafe(`alter role postgres password '${opts.password.replace(/'/g, "''")}'`);
    await admin.end();
  }

  return {
    port,
    url,
    async createDatabase(name) {
      const admin = postgres(`${url}/postgres`, { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database "${name}"`);
      await admin.end();
      return `${url}/${name}`;
    },
    async stop(mode) {
      await pgCtl('-m', mode, 'stop');
      running = false;
    },
    async start() {
      await pgCtl('-o', options(), 'start');
      running = true;
    },
    async restart(mode) {
      await pgCtl('-m', mode, '-o', options(), 'restart');
      running = true;
    },
    log: () => Bun.file(logFile).text(),
    async startStandby() {
      const standbyData = join(dir, 'standby');
      const standbyCtl = pgCtlOf(standbyData, join(dir, 'standby.log'));
      // -R writes the standby's primary_conninfo and standby.signal; a fast checkpoint starts the copy at once (a spread one waited ~90 s).
      await run([join(bin, 'pg_basebackup'), '-D', standbyData, '-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync']);
      let standbyPort = 0;
      for (let attempt = 0; ; attempt++) {
        standbyPort = await freePort();
        try {
          await standbyCtl('-o', options(standbyPort), 'start');
          break;
        } catch (err) {
          if (attempt >= 4) throw err;
        }
      }
      const lsn = async (on: number, query: string) => {
        const client = postgres(`postgres://postgres@127.0.0.1:${on}/postgres`, { max: 1, onnotice: () => {} });
        const [row] = await client.unsafe<Array<{ lsn: string }>>(query);
        await client.end();
        return row!.lsn;
      };
      return {
        port: standbyPort,
        async caughtUp() {
          const written = await lsn(port, 'select pg_current_wal_lsn()::text as lsn');
          const replayed = `select (pg_last_wal_replay_lsn() >= '${written}'::pg_lsn)::text as lsn`;
          await waitFor(() => lsn(standbyPort, replayed), 'the standby to replay what the primary wrote', { until: (done) => done === 'true' });
        },
        close: () => standbyCtl('-m', 'immediate', 'stop').then(() => {}),
      };
    },
    async close() {
      if (running) await pgCtl('-m', 'immediate', 'stop').catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
