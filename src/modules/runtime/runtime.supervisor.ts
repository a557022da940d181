/**
 * The runtime supervisor of `cpd serve`: one engine process per ENGINES entry,
 * each on a bundle fetched from the registry and checked through the engine FFI library, and
 * optionally the external aria router whose models (read through its FFI library) become router
 * backends. State changes are written to DATA_DIR/runtimes/state.json for `cpd engine status`.
 */
import { join } from 'node:path';
import type { AppContext } from '../../app-context';
import { AppError } from '../../platform/errors';
import type { RouterService } from '../router';
import { artifactFor, type BundleSource, fetchBundle } from './runtime.bundles';
import { type EngineEntry, engineName, parseEngines } from './runtime.engines';
import { checkBundle, connectRouter, locateLibrary } from './runtime.ffi';
import { DEFAULT_ROTATION, RotatingLog, type RotationOptions } from './runtime.logs';
import { findInstalledFile, logsDir } from './runtime.paths';
import { binaryFileName, type RuntimeComponent } from './runtime.platform';
import { registerRuntimeMetrics } from './runtime.metrics';
import { writeRuntimeState } from './runtime.state';
import { DEFAULT_TIMINGS, type ProcessSpec, SupervisedProcess, type Timings } from './runtime.process';

export interface SupervisorDeps {
  registry: BundleSource;
  router: Pick<RouterService, 'registerBackend'>;
}

export interface SupervisorOptions {
  timings?: Partial<Timings>;
  rotation?: RotationOptions;
}

const BIN_ENV: Record<RuntimeComponent, string> = { engine: 'ARIA_ENGINE_BIN', router: 'ARIA_ROUTER_BIN' };

/** The configured binary (ARIA_ENGINE_BIN / ARIA_ROUTER_BIN), else the one inside the installed `current` version. */
export function locateBinary(component: RuntimeComponent, dataDir: string, configured: string | null = null): string {
  const found = configured || findInstalledFile(dataDir, component, binaryFileName(component));
  if (!found) throw new AppError('unavailable', `${binaryFileName(component)} not found: set ${BIN_ENV[component]} or run \`cpd engine install --component ${component}\``);
  return found;
}

export function createSupervisor(ctx: AppContext, deps: SupervisorDeps, opts: SupervisorOptions = {}) {
  const { config, log } = ctx;
  const paths = config.runtime;
  const childEnv = paths.childEnv;
  const timings: Timings = { ...DEFAULT_TIMINGS, ...opts.timings };
  const rotation = opts.rotation ?? DEFAULT_ROTATION;
  const entries = parseEngines(config.engines);
  const processes: SupervisedProcess[] = [];
  let started = false;

  const status = () => processes.map((p) => p.status());
  const writeState = () => writeRuntimeState(config.dataDir, status());
  registerRuntimeMetrics(ctx.metrics, status);

  function supervise(spec: Omit<ProcessSpec, 'log'>): SupervisedProcess {
    const output = new RotatingLog(join(logsDir(config.dataDir), `${spec.name}.log`), rotation);
    const proc = new SupervisedProcess({ ...spec, log: output }, timings, writeState);
    processes.push(proc);
    return proc;
  }

  function engineProcess(entry: EngineEntry, index: number) {
    let bundleDir = '';
    let unregister: (() => void) | null = null;
    const proc = supervise({
      name: engineName(entry, index),
      kind: 'engine',
      model: entry.slug,
      gpu: entry.gpu,
      ports: 1,
      readyPath: '/v1/models',
      command: ([port]) => ({
        argv: [
          locateBinary('engine', config.dataDir, paths.engineBin),
          'serve',
          bundleDir,
          '--bind',
          `127.0.0.1:${port}`,
          ...(entry.gpu !== null ? ['--compute', 'cuda'] : []),
        ],
        env: { ...childEnv, ...(entry.gpu !== null ? { CUDA_VISIBLE_DEVICES: entry.gpu } : {}) },
      }),
      onReady: (baseUrl) => {
        unregister = deps.router.registerBackend(entry.slug, `${baseUrl}/v1`, { source: 'engine' });
        log.info({ msg: 'engine ready', model: entry.slug, url: baseUrl });
      },
      onDown: () => {
        unregister?.();
        unregister = null;
      },
    });
    const prepare = async () => {
      const artifact = await artifactFor(deps.registry, entry);
      bundleDir = await fetchBundle(deps.registry, artifact, config.dataDir);
      checkBundle(locateLibrary('engine', config.dataDir, paths.engineLib), bundleDir);
      locateBinary('engine', config.dataDir, paths.engineBin);
    };
    return prepare().then(
      () => proc.start(),
      (err) => {
        const message = `${entry.slug}:${entry.quant}: ${(err as Error).message}`;
        log.error({ msg: 'engine not started', model: entry.slug, error: message });
        proc.fail(message);
      },
    );
  }

  /** The external aria router (ARIA_ROUTER=supervise): its models become backends of cpd's router. */
  function routerProcess() {
    let unregister: Array<() => void> = [];
    const proc = supervise({
      name: 'router',
      kind: 'router',
      model: '*',
      gpu: null,
      ports: 2,
      readyPath: '/v1/models',
      command: ([data, mgmt]) => ({
        argv: [locateBinary('router', config.dataDir, paths.routerBin), 'serve', '--bind', `127.0.0.1:${data}`, '--mgmt-bind', `127.0.0.1:${mgmt}`],
        env: childEnv,
      }),
      onReady: (baseUrl, [, mgmt]) => {
        const handle = connectRouter(locateLibrary('router', config.dataDir, paths.routerLib), `http://127.0.0.1:${mgmt}`);
        try {
          const models = handle.models();
          unregister = models.map((slug) => deps.router.registerBackend(slug, `${baseUrl}/v1`, { source: 'engine' }));
          log.info({ msg: 'aria router ready', url: baseUrl, models });
        } finally {
          handle.close();
        }
      },
      onDown: () => {
        for (const u of unregister) u();
        unregister = [];
      },
    });
    return proc.start();
  }

  return {
    entries,

    /** Whether ENGINES (or ARIA_ROUTER=supervise) asks for any process. */
    configured: () => entries.length > 0 || paths.superviseRouter,

    /** Starts every configured process in the background; bundles are fetched and checked first. */
    start(): Promise<void> {
      if (started) return Promise.resolve();
      started = true;
      writeState();
      const all = entries.map((entry, i) => engineProcess(entry, i));
      if (paths.superviseRouter) all.push(routerProcess());
      process.on('exit', killAll);
      return Promise.all(all).then(
        () => undefined,
        (err) => log.error({ msg: 'runtime supervisor start failed', error: (err as Error).message }),
      );
    },

    status,

    /** SIGTERM to every child, SIGKILL after the stop deadline; resolves when all are gone. */
    async stop(): Promise<void> {
      process.off('exit', killAll);
      await Promise.all(processes.map((p) => p.stop()));
      if (started) writeState();
    },
  };

  function killAll() {
    for (const p of processes) p.killNow();
  }
}

export type Supervisor = ReturnType<typeof createSupervisor>;
