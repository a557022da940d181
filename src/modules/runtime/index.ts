export { binaryFileName, hostOsTag, libraryFileName, type OsTag, type RuntimeComponent } from './runtime.platform';
export { checkBundle, connectRouter, locateLibrary, openEngineLibrary, type EngineLibrary, type EngineModel, type RouterHandle } from './runtime.ffi';
export { freeLoopbackPort } from './runtime.ports';
