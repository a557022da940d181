export { binaryFileName, hostOsTag, libraryFileName, type OsTag, type RuntimeComponent } from './runtime.platform';
export { checkBundle, connectRouter, locateLibrary, openEngineLibrary, type EngineLibrary, type EngineModel, type RouterHandle } from './runtime.ffi';
export { freeLoopbackPort } from './runtime.ports';
export { parseEngines, type EngineEntry } from './runtime.engines';
export { createSupervisor, locateBinary, type RuntimeState, type Supervisor, type SupervisorDeps, type SupervisorOptions } from './runtime.supervisor';
export { DEFAULT_TIMINGS, type ProcessState, type ProcessStatus, type Timings } from './runtime.process';
export { runtimeRoutes } from './runtime.routes';
export { installedVersions, installRuntime, pickAssets, rollbackRuntime, type InstallOptions, type InstallProgress, type InstallResult } from './runtime.install';
export { extractArchive } from './runtime.archive';
